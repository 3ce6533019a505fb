"""The on-disk cache of compiled code: verified entries, atomic writes, and the ``cache`` command."""

import hashlib
import os
import secrets
import shutil
import stat
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
    monkeypatch.setattr(config, "cache_key", None)
    disk_cache.forget_checks()
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


def test_whether_a_namespace_holds_entries_is_looked_at_seldom_and_never_stale_after_a_store(cache_dir):
    """The tier policy asks at every interpreted kernel run: an empty namespace's directory is
    looked at again only every ``EMPTY_LOOKS_KEPT`` asks; one this process stored in holds entries
    at once, and after the cache is cleared each is looked at again."""
    assert not disk_cache.holds_any("cpu")
    (cache_dir / "cpu" / "ab").mkdir(parents=True)  # as another process's store leaves it
    assert not any(disk_cache.holds_any("cpu") for _ in range(disk_cache.EMPTY_LOOKS_KEPT))
    assert disk_cache.holds_any("cpu")
    assert not disk_cache.holds_any("cuda")
    disk_cache.store("cuda", KEY, PAYLOAD)
    assert disk_cache.holds_any("cuda")
    shutil.rmtree(cache_dir)
    disk_cache.clear()
    assert not disk_cache.holds_any("cuda")


def test_a_namespace_seen_empty_then_stored_into_holds_only_this_processs_entries(cache_dir):
    """``holds_earlier`` (whether another process's code may be there, which the tier policy asks
    before generating a kernel's code to look it up): a namespace this process saw empty and then
    stored into holds its own entries only, which it has in memory; one found holding entries, or
    stored into unseen, may hold others'. Clearing forgets it."""
    assert not disk_cache.holds_earlier("cpu")
    disk_cache.store("cpu", KEY, PAYLOAD)
    assert disk_cache.holds_any("cpu") and not disk_cache.holds_earlier("cpu")
    disk_cache.store("cpu", "cd" + KEY[2:], PAYLOAD)
    assert not disk_cache.holds_earlier("cpu")
    (cache_dir / "cuda" / "ab").mkdir(parents=True)  # another process's entry
    assert disk_cache.holds_earlier("cuda")
    disk_cache.store("cuda", KEY, PAYLOAD)
    assert disk_cache.holds_earlier("cuda")
    disk_cache.forget_checks()
    assert disk_cache.holds_earlier("cpu")  # unseen since: it may hold others' now
    disk_cache.store("groups", KEY, PAYLOAD)  # stored into unseen
    assert disk_cache.holds_earlier("groups")


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
    assert lines[3] == f"owner:     {disk_cache._user(os.getuid())}, mode 0700"
    assert lines[4:6] == ["trusted:   yes", "shared:    no (private)"]
    assert lines[6].startswith("entries:   3 entries (") and lines[6].endswith(" KiB)")
    assert [line.split(" (")[0] for line in lines[7:]] == ["  cpu: 2 entries", "  cuda: 1 entry"]

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


# ---- trust: only code this user (or a team holding the key) could have written is run -----------

OTHER_KEY = disk_cache.key_of("another kernel")


def modes(*paths):
    return [stat.S_IMODE(path.stat().st_mode) for path in paths]


def test_a_fresh_cache_is_private_whatever_the_umask(cache_dir):
    permissive = os.umask(0)
    try:
        disk_cache.store("cpu", KEY, PAYLOAD)
    finally:
        os.umask(permissive)
    path = entry_file(cache_dir)
    assert modes(cache_dir, path.parent.parent, path.parent, path) == [0o700, 0o700, 0o700, 0o600]
    assert disk_cache.load("cpu", KEY) == PAYLOAD


@pytest.mark.parametrize(
    ("mode", "reason"), [(0o777, "writable by every user"), (0o770, "writable by its group")]
)
def test_a_cache_others_can_write_is_neither_read_nor_written(cache_dir, mode, reason):
    disk_cache.store("cpu", KEY, PAYLOAD)  # a valid entry; then the directory is opened to others
    os.chmod(cache_dir, mode)
    disk_cache.forget_checks()
    before = counters()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert disk_cache.load("cpu", KEY) is None
        assert not disk_cache.contains("cpu", KEY)
        disk_cache.store("cpu", OTHER_KEY, PAYLOAD)
        assert disk_cache.load("cpu", KEY) is None
    messages = [str(warning.message) for warning in caught]
    assert len(messages) == 1 and str(cache_dir) in messages[0] and reason in messages[0]
    after = counters()
    assert (after["hits"], after["writes"]) == (before["hits"], before["writes"])
    assert [path.name for path in cache_dir.rglob("*.bin")] == [f"{KEY}.bin"]  # nothing written


def _nobody() -> int:
    import pwd

    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
@pytest.mark.parametrize("owned", ["cache directory", "shard directory", "entry"])
def test_what_another_user_owns_is_not_loaded(cache_dir, owned):
    disk_cache.store("cpu", KEY, PAYLOAD)
    path = entry_file(cache_dir)
    os.chown(
        {"cache directory": cache_dir, "shard directory": path.parent, "entry": path}[owned], _nobody(), -1
    )
    disk_cache.forget_checks()
    before = counters()
    with pytest.warns(RuntimeWarning, match=f"uid {_nobody()}"):
        assert disk_cache.load("cpu", KEY) is None
    assert counters()["hits"] == before["hits"] and path.exists()  # not ours to remove


def test_a_link_in_place_of_an_entry_is_not_followed(cache_dir):
    disk_cache.store("cpu", KEY, PAYLOAD)
    disk_cache.store("cpu", OTHER_KEY, PAYLOAD + b"other")
    path = entry_file_of(cache_dir, KEY)
    path.unlink()
    path.symlink_to(entry_file_of(cache_dir, OTHER_KEY))
    assert disk_cache.load("cpu", KEY) is None


def entry_file_of(directory, key):
    return directory / "cpu" / key[:2] / f"{key}.bin"


@pytest.fixture
def team_key(tmp_path, monkeypatch):
    """A shared cache's key file, readable by its owner and group only."""
    path = tmp_path / "team.key"
    path.write_bytes(secrets.token_bytes(32))
    os.chmod(path, 0o640)
    monkeypatch.setattr(config, "cache_key", path)
    disk_cache.forget_checks()
    return path


def _planted(payload: bytes, digest: bytes, version: int) -> bytes:
    return disk_cache._HEADER.pack(disk_cache._MAGIC, version, len(payload), digest) + payload


def test_a_shared_cache_runs_only_entries_its_key_authenticates(cache_dir, team_key, monkeypatch):
    disk_cache.store("cpu", KEY, PAYLOAD)
    disk_cache.store("cpu", OTHER_KEY, b"another kernel's code")
    path = entry_file_of(cache_dir, KEY)
    assert modes(cache_dir, path) == [0o770, 0o660]  # the team's group may add entries
    assert disk_cache.load("cpu", KEY) == PAYLOAD
    evil = b"code of someone who can write the directory"
    forgeries = {
        "a valid checksum": _planted(evil, hashlib.blake2b(evil, digest_size=32).digest(), 1),
        "another key's HMAC": _planted(evil, secrets.token_bytes(32), 2),
        "another entry's, authentic": entry_file_of(cache_dir, OTHER_KEY).read_bytes(),
    }
    for forgery, data in forgeries.items():
        path.write_bytes(data)
        disk_cache.forget_checks()  # each a fresh process's first look
        before = counters()
        with pytest.warns(RuntimeWarning, match="ignoring disk cache entry"):
            assert disk_cache.load("cpu", KEY) is None, forgery
        assert counters()["errors"] == before["errors"] + 1, forgery
        assert path.read_bytes() == data  # ignored, left for whoever may remove it
        monkeypatch.setattr(disk_cache, "_warned", set())


def test_a_key_file_every_user_can_read_turns_the_disk_cache_off(cache_dir, team_key):
    os.chmod(team_key, 0o644)
    disk_cache.forget_checks()
    with pytest.warns(RuntimeWarning, match="readable by every user"):
        disk_cache.store("cpu", KEY, PAYLOAD)
        assert disk_cache.load("cpu", KEY) is None
    assert not cache_dir.exists()


def test_cache_info_says_why_a_directory_is_not_trusted(cache_dir):
    cache_dir.mkdir(mode=0o700)
    os.chmod(cache_dir, 0o777)
    info = run_dynfuse(cache_dir, "-m", "dynfuse", "cache", "info")
    assert info.returncode == 0, info.stderr
    assert "owner:     " in info.stdout and ", mode 0777" in info.stdout
    assert "trusted:   no: it is writable by every user (mode 0777)" in info.stdout
