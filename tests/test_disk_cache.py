"""The on-disk cache of compiled code: verified entries, atomic writes, and the ``cache`` command."""

import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import warnings

import pytest

import dynfuse
from dynfuse import cache, config, disk_cache

PAYLOAD = bytes(range(256)) * 64
KEY = disk_cache.key_of("cpu", "kernel signature", "0.1.0", "llvmlite", "llvm", "cpu", "+avx2")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    cache.finish_background_compiles()  # an earlier test's, which would store its code here
    directory = tmp_path / "cache"
    monkeypatch.setattr(config, "cache_dir", directory)
    monkeypatch.setattr(config, "disk_cache", True)
    return directory


def entry_file(directory):
    (path,) = directory.rglob("*.bin")
    return path


def counters():
    snapshot = dynfuse.stats()
    return {name: snapshot[f"disk_cache_{name}"] for name in ("hits", "misses", "writes", "errors")}


def run_dynfuse(cache_directory, *arguments, **environment):
    env = {**os.environ, "DYNFUSE_CACHE_DIR": str(cache_directory), "DYNFUSE_DISK_CACHE": "1", **environment}
    command = [sys.executable, *arguments]
    return subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=120)


def test_key_depends_on_every_part():
    assert len(KEY) == 64 and int(KEY, 16) >= 0
    assert disk_cache.key_of("cpu", 1) == disk_cache.key_of("cpu", 1) != disk_cache.key_of("cpu", 2)


def test_round_trip_and_miss(cache_dir):
    assert disk_cache.load("cpu", KEY) is None
    disk_cache.store("cpu", KEY, PAYLOAD)
    assert disk_cache.load("cpu", KEY) == PAYLOAD
    assert disk_cache.load("cuda", KEY) is None
    assert entry_file(cache_dir) == cache_dir / "cpu" / KEY[:2] / f"{KEY}.bin"
    assert counters() == {"hits": 1, "misses": 2, "writes": 1, "errors": 0}


def test_empty_payload_round_trips():
    disk_cache.store("cpu", KEY, b"")
    assert disk_cache.load("cpu", KEY) == b""


def test_names_outside_the_layout_are_refused():
    with pytest.raises(ValueError, match="bad namespace"):
        disk_cache.load("../elsewhere", KEY)
    with pytest.raises(ValueError, match="bad namespace"):
        disk_cache.store("cpu", "not-a-digest", PAYLOAD)


CORRUPTIONS = {
    "truncated header": lambda data: data[:10],
    "truncated payload": lambda data: data[:-1],
    "trailing bytes": lambda data: data + b"\0",
    "random bytes": lambda data: os.urandom(len(data)),
    "wrong checksum": lambda data: data[:-1] + bytes([data[-1] ^ 1]),
    "other format version": lambda data: data[:8] + struct.pack("<I", 99) + data[12:],
}


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_corrupt_entry_is_a_warned_miss_and_removed(cache_dir, corrupt):
    disk_cache.store("cpu", KEY, PAYLOAD)
    path = entry_file(cache_dir)
    path.write_bytes(corrupt(path.read_bytes()))
    with pytest.warns(RuntimeWarning, match=r"disk cache entry .*\.bin is corrupt \(.+\); rebuilding it"):
        assert disk_cache.load("cpu", KEY) is None
    assert not path.exists()
    assert counters() == {"hits": 0, "misses": 1, "writes": 1, "errors": 1}


def test_corrupt_entry_is_rebuilt_and_warned_about_once(cache_dir):
    disk_cache.store("cpu", KEY, PAYLOAD)
    path = entry_file(cache_dir)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.warns(RuntimeWarning, match="is corrupt"):
        assert disk_cache.load("cpu", KEY) is None
    disk_cache.store("cpu", KEY, PAYLOAD)
    assert disk_cache.load("cpu", KEY) == PAYLOAD
    path.write_bytes(b"garbage")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert disk_cache.load("cpu", KEY) is None
    assert dynfuse.stats()["disk_cache_errors"] == 2


def test_missing_directory_is_created_on_first_store(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", tmp_path / "a" / "b" / "c")
    assert disk_cache.load("cpu", KEY) is None
    assert disk_cache.info()["writable"] and disk_cache.info()["entries"] == 0
    disk_cache.store("cpu", KEY, PAYLOAD)
    assert disk_cache.load("cpu", KEY) == PAYLOAD


def test_directory_deleted_between_stores(cache_dir):
    disk_cache.store("cpu", KEY, PAYLOAD)
    shutil.rmtree(cache_dir)
    assert disk_cache.load("cpu", KEY) is None
    disk_cache.store("cpu", KEY, PAYLOAD)
    assert disk_cache.load("cpu", KEY) == PAYLOAD


def running_as_root():
    return hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.parametrize("kind", ["under a regular file", "read-only directory"])
def test_unwritable_directory_disables_writing_with_one_warning(tmp_path, monkeypatch, kind):
    if kind == "under a regular file":
        (tmp_path / "afile").write_text("not a directory")
        directory = tmp_path / "afile" / "sub"
    else:
        if running_as_root():
            pytest.skip("root writes through chmod 0o555")
        directory = tmp_path / "read-only"
        directory.mkdir()
        directory.chmod(0o555)
    monkeypatch.setattr(config, "cache_dir", directory)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(5):
                disk_cache.store("cpu", KEY, PAYLOAD)
        assert len(caught) == 1
        assert str(caught[0].message).startswith(f"dynfuse: cannot write the disk cache in {directory} (")
        assert disk_cache.load("cpu", KEY) is None
        assert disk_cache.info()["writable"] is False
        assert disk_cache.clear() == 0
        assert counters() == {"hits": 0, "misses": 1, "writes": 0, "errors": 0}
    finally:
        if directory.is_dir():
            directory.chmod(0o755)


def test_clear_removes_only_dynfuse_files(cache_dir):
    cuda_key = disk_cache.key_of("cuda")
    disk_cache.store("cpu", KEY, PAYLOAD)
    disk_cache.store("cuda", cuda_key, PAYLOAD)
    shard = cache_dir / "cpu" / KEY[:2]
    fresh_temporary = shard / f"{KEY}.bin.{os.getpid()}-1-abcd.tmp"
    stale_temporary = shard / f"{KEY}.bin.{os.getpid()}-2-abcd.tmp"
    for temporary in (fresh_temporary, stale_temporary):
        temporary.write_bytes(b"half written")
    an_hour_ago = time.time() - 3600
    os.utime(stale_temporary, (an_hour_ago, an_hour_ago))
    foreign = [cache_dir / "notes.txt", cache_dir / "stray", shard / "README", shard / f"{KEY}.bin.bak"]
    foreign.append(cache_dir / "cpu" / f"{KEY}.bin")  # an entry's name, but not where entries live
    for path in foreign:
        path.write_text("someone else's")
    entry_size = (shard / f"{KEY}.bin").stat().st_size
    assert disk_cache.info()["namespaces"] == {
        "cpu": {"entries": 1, "bytes": entry_size},
        "cuda": {"entries": 1, "bytes": entry_size},
    }
    assert disk_cache.clear() == 2
    assert all(path.exists() for path in foreign)
    assert fresh_temporary.exists() and not stale_temporary.exists()
    assert disk_cache.info()["entries"] == 0


def racing_payload(writer, size):
    return bytes([writer]) * size


def is_whole(loaded, size):
    return loaded is not None and loaded == racing_payload(loaded[0], size)


def test_threads_storing_one_key_never_tear_it():
    size, rounds = 1 << 18, 30
    torn = []

    def race(writer):
        for _ in range(rounds):
            disk_cache.store("cpu", KEY, racing_payload(writer, size))
            loaded = disk_cache.load("cpu", KEY)
            if not is_whole(loaded, size):
                torn.append(loaded)

    threads = [threading.Thread(target=race, args=(writer,)) for writer in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert torn == []
    assert counters() == {"hits": 8 * rounds, "misses": 0, "writes": 8 * rounds, "errors": 0}


RACER = f"""
import sys, time
from dynfuse import disk_cache
writer, start, size = int(sys.argv[1]), float(sys.argv[2]), 1 << 20
time.sleep(max(0.0, start - time.time()))  # all racers begin together, whatever their import took
for _ in range(25):
    disk_cache.store("cpu", {KEY!r}, bytes([writer]) * size)
    loaded = disk_cache.load("cpu", {KEY!r})
    assert loaded is not None and loaded == bytes([loaded[0]]) * size, "torn or missing entry"
"""


def test_processes_storing_one_key_never_tear_it(cache_dir):
    env = {**os.environ, "DYNFUSE_CACHE_DIR": str(cache_dir), "DYNFUSE_DISK_CACHE": "1"}
    start = str(time.time() + 1.0)
    racers = [
        subprocess.Popen(
            [sys.executable, "-W", "error", "-c", RACER, str(writer), start],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for writer in range(4)
    ]
    for racer in racers:
        _, stderr = racer.communicate(timeout=120)
        assert racer.returncode == 0, stderr
    assert is_whole(disk_cache.load("cpu", KEY), 1 << 20)
    assert list(cache_dir.rglob("*.tmp")) == []


def test_cache_command_info_and_clear(cache_dir):
    disk_cache.store("cpu", KEY, PAYLOAD)
    disk_cache.store("cpu", disk_cache.key_of("other kernel"), PAYLOAD)
    disk_cache.store("cuda", KEY, b"small")
    foreign = cache_dir / "notes.txt"
    foreign.write_text("keep me")

    info = run_dynfuse(cache_dir, "-m", "dynfuse", "cache", "info")
    assert info.returncode == 0, info.stderr
    lines = info.stdout.splitlines()
    assert lines[:3] == [f"directory: {cache_dir}", "writable:  yes", "enabled:   yes"]
    assert lines[3].startswith("entries:   3 entries (") and lines[3].endswith(" KiB)")
    assert [line.split(" (")[0] for line in lines[4:]] == ["  cpu: 2 entries", "  cuda: 1 entry"]

    cleared = run_dynfuse(cache_dir, "-m", "dynfuse", "cache", "clear")
    assert (cleared.returncode, cleared.stdout) == (0, f"removed 3 entries from {cache_dir}\n")
    assert foreign.read_text() == "keep me" and disk_cache.info()["entries"] == 0


def test_cache_command_needs_an_action(cache_dir):
    result = run_dynfuse(cache_dir, "-m", "dynfuse", "cache")
    assert result.returncode == 2 and "info" in result.stderr


def test_environment_switch_disables_the_disk_cache(cache_dir):
    code = (
        "from dynfuse import cache, config, disk_cache; "
        f"disk_cache.store('cpu', {KEY!r}, b'payload'); "
        f"print(config.disk_cache, disk_cache.load('cpu', {KEY!r}))"
    )
    result = run_dynfuse(cache_dir, "-c", code, DYNFUSE_DISK_CACHE="0")
    assert result.stdout.split() == ["False", "None"], result.stderr
    assert not cache_dir.exists()
