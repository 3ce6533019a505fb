"""Compiled object code kept across processes, under ``config.cache_dir``.

An entry is ``<cache_dir>/<namespace>/<key[:2]>/<key>.bin``: a header (magic, format version,
payload length, blake2b of the payload), then the payload. ``load`` trusts nothing it has not
checked: a truncated or garbage entry (a crash, a full disk, a stray edit) is warned about once,
removed, counted in ``disk_cache_errors`` and reported as a miss, so the caller rebuilds it.
``store`` writes a temporary file beside the entry and renames it over the entry, so readers and
concurrent writers only ever see whole entries. No fsync: a file torn by a power cut fails its
checksum, which costs one rebuild. No I/O error escapes: a directory that cannot be written is
warned about once per process and directory, and each later store tries again quietly (the directory
may come back, the disk may be freed).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import struct
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import config
from .stats import count

_MAGIC = b"DYNFUSE\x00"
_FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sIQ32s")  # magic, format version, payload length, blake2b-256 of the payload
_NAMESPACE = re.compile(r"[a-z0-9][a-z0-9_-]*")
_KEY = re.compile(r"[0-9a-f]{64}")
# Entries, and the temporary files of stores in flight (or of processes killed while storing).
_OWN_FILE = re.compile(r"(?P<key>[0-9a-f]{64})\.bin(?P<temporary>\.\d+-\d+-[0-9a-f]+\.tmp)?")
# A temporary file older than this belongs to no store still running: ``clear`` may remove it.
_STALE_TEMPORARY_SECONDS = 600

_lock = threading.Lock()
os.register_at_fork(after_in_child=_lock._at_fork_reinit)  # free in a forked child, as in execute
_warned: set[tuple[str, Path]] = set()


def key_of(*parts: Any) -> str:
    """The entry key for everything the compiled code depends on (the parts' reprs must be stable)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def load(namespace: str, key: str) -> bytes | None:
    """The stored payload, or None when there is none worth trusting (the caller then rebuilds).

    Each load while enabled counts one ``disk_cache_hits`` or one ``disk_cache_misses``.
    """
    if not config.disk_cache:
        return None
    path = _entry_path(namespace, key)
    try:
        data = path.read_bytes()
    except OSError:  # missing entry or directory, unreadable file: a plain miss
        count("disk_cache_misses")
        return None
    problem = _problem_with(data)
    if problem is not None:
        _discard_corrupt(path, problem)
        count("disk_cache_misses")
        return None
    count("disk_cache_hits")
    return data[_HEADER.size :]


def contains(namespace: str, key: str) -> bool:
    """Whether an entry is stored (unverified: ``load`` checks it), while the disk cache is enabled."""
    return config.disk_cache and _entry_path(namespace, key).is_file()


def store(namespace: str, key: str, payload: bytes) -> None:
    """Keep ``payload`` for later processes; a failure to write only loses the reuse."""
    if not config.disk_cache:
        return
    import secrets  # here: a program whose kernels are all on disk never stores

    path = _entry_path(namespace, key)
    writer = f"{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}"
    temporary = path.with_name(f"{path.name}.{writer}.tmp")
    header = _HEADER.pack(_MAGIC, _FORMAT_VERSION, len(payload), _checksum(payload))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "xb") as file:
            file.write(header)
            file.write(payload)
        os.replace(temporary, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        if _first_time("unwritable", config.cache_dir):
            warnings.warn(
                f"dynfuse: cannot write the disk cache in {config.cache_dir} ({error}); "
                "compiled kernels will not be kept across processes",
                RuntimeWarning,
                stacklevel=2,
            )
        return
    count("disk_cache_writes")


def info() -> dict[str, Any]:
    """What ``python -m dynfuse cache info`` shows: where the cache is, whether it can grow, its size."""
    directory = config.cache_dir
    namespaces: dict[str, dict[str, int]] = {}
    for namespace, path, is_temporary in _own_files(directory):
        if is_temporary:
            continue
        try:
            size = path.stat().st_size
        except OSError:  # removed meanwhile
            continue
        totals = namespaces.setdefault(namespace, {"entries": 0, "bytes": 0})
        totals["entries"] += 1
        totals["bytes"] += size
    return {
        "directory": str(directory),
        "enabled": config.disk_cache,
        "writable": _writable(directory),
        "entries": sum(totals["entries"] for totals in namespaces.values()),
        "bytes": sum(totals["bytes"] for totals in namespaces.values()),
        "namespaces": dict(sorted(namespaces.items())),
    }


def clear() -> int:
    """Remove dynfuse's entries and stale temporary files, nothing else; returns the entries removed."""
    removed = 0
    stale_before = time.time() - _STALE_TEMPORARY_SECONDS
    for _, path, is_temporary in _own_files(config.cache_dir):
        try:
            if is_temporary and path.stat().st_mtime > stale_before:
                continue  # a store in flight will rename it
            path.unlink()
        except OSError:
            continue
        removed += not is_temporary
    return removed


def _entry_path(namespace: str, key: str) -> Path:
    if not _NAMESPACE.fullmatch(namespace) or not _KEY.fullmatch(key):
        raise ValueError(f"disk cache: bad namespace {namespace!r} or key {key!r} (keys come from key_of)")
    return config.cache_dir / namespace / key[:2] / f"{key}.bin"


def _checksum(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, digest_size=32).digest()


def _problem_with(data: bytes) -> str | None:
    if len(data) < _HEADER.size:
        return f"{len(data)} bytes, shorter than the header"
    magic, version, length, checksum = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        return "not a dynfuse entry"
    if version != _FORMAT_VERSION:
        return f"format version {version}, expected {_FORMAT_VERSION}"
    if len(data) - _HEADER.size != length:
        return f"payload of {len(data) - _HEADER.size} bytes, header says {length}"
    if _checksum(data[_HEADER.size :]) != checksum:
        return "checksum mismatch"
    return None


def _discard_corrupt(path: Path, problem: str) -> None:
    count("disk_cache_errors")
    if _first_time("corrupt", path):
        message = f"dynfuse: disk cache entry {path} is corrupt ({problem}); rebuilding it"
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    with contextlib.suppress(OSError):  # in a read-only cache it stays, and each process rebuilds it
        path.unlink(missing_ok=True)


def _first_time(kind: str, path: Path) -> bool:
    with _lock:
        first = (kind, path) not in _warned
        _warned.add((kind, path))
    return first


def _own_files(directory: Path) -> Iterator[tuple[str, Path, bool]]:
    """(namespace, path, is_temporary) of each file dynfuse wrote: other files are not ours to touch."""
    for namespace in _names_in(directory):
        if not _NAMESPACE.fullmatch(namespace):
            continue
        for shard in _names_in(directory / namespace):
            for name in _names_in(directory / namespace / shard):
                match = _OWN_FILE.fullmatch(name)
                if match and match["key"][:2] == shard:
                    yield namespace, directory / namespace / shard / name, match["temporary"] is not None


def _names_in(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:  # missing, not a directory, unreadable, or removed during the walk: nothing of ours
        return []


def _writable(directory: Path) -> bool:
    existing = directory
    while not os.path.exists(existing):  # a store would create the rest under the nearest existing directory
        existing = existing.parent
    return os.path.isdir(existing) and os.access(existing, os.W_OK | os.X_OK)
