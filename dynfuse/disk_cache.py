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

Entries are machine code that dynfuse runs, so the cache trusts only what its user could have
written. Directories are made 0700 and entries 0600, whatever the umask. Before an entry is read or
written, the cache directory and each directory down to the entry are checked (once per process
each): owned by this user and writable by no one else; an entry file must be this user's, and not a
link. Anything else is warned about once, naming the directory and why, and the disk cache is not
used there: kernels compile as they would without it. A cache shared by a team on purpose names a
key file (``DYNFUSE_CACHE_KEY``, which only the team can read): entries are then authenticated with
HMAC-SHA256 under that key, bound to the entry's name, an entry that fails is ignored with a warning
(counted in ``disk_cache_errors``), and directories need only be writable by no one outside their
group. The checksum alone detects corruption, not tampering.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
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
_FORMAT_VERSION = 1  # the digest is the payload's blake2b-256
_SHARED_FORMAT_VERSION = 2  # the digest is an HMAC-SHA256 under the shared key
_HEADER = struct.Struct("<8sIQ32s")  # magic, format version, payload length, digest
# Modes of what the cache makes: private, or open to the directory's group in a shared cache
_PRIVATE_MODES, _SHARED_MODES = (0o700, 0o600), (0o770, 0o660)
_SHORTEST_KEY = 16  # bytes of a shared key file, at least
_NAMESPACE = re.compile(r"[a-z0-9][a-z0-9_-]*")
_KEY = re.compile(r"[0-9a-f]{64}")
# Entries, and the temporary files of stores in flight (or of processes killed while storing).
_OWN_FILE = re.compile(r"(?P<key>[0-9a-f]{64})\.bin(?P<temporary>\.\d+-\d+-[0-9a-f]+\.tmp)?")
# A temporary file older than this belongs to no store still running: ``clear`` may remove it.
_STALE_TEMPORARY_SECONDS = 600

_lock = threading.Lock()
os.register_at_fork(after_in_child=_lock._at_fork_reinit)  # free in a forked child, as in execute
_warned: set[tuple[str, Path]] = set()
# Why each directory checked is not to be trusted (None: it is), and the shared key read from each
# key file (or why it cannot be used); kept for the process, under _lock.
_verdicts: dict[Path, str | None] = {}
_keys: dict[Path, bytes | str] = {}


def key_of(*parts: Any) -> str:
    """The entry key for everything the compiled code depends on (the parts' reprs must be stable).

    hashlib and hmac (OpenSSL's, 3 ms) are imported where an entry is first keyed or checked: a
    short program's only look at the cache is ``holds_any``."""
    import hashlib

    return hashlib.sha256(repr(parts).encode()).hexdigest()


def load(namespace: str, key: str) -> bytes | None:
    """The stored payload, or None when there is none worth trusting (the caller then rebuilds).

    Each load while enabled counts one ``disk_cache_hits`` or one ``disk_cache_misses``.
    """
    if not config.disk_cache:
        return None
    path = _entry_path(namespace, key)
    try:
        shared_key = _usable(path, create=False)
        if shared_key is None:
            count("disk_cache_misses")
            return None
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(descriptor, "rb") as file:
            status = os.fstat(file.fileno())
            data = file.read()
    except OSError:  # missing entry or directory, unreadable file or directory, a link: a plain miss
        count("disk_cache_misses")
        return None
    untrusted = _file_problem(status, shared=bool(shared_key))
    corrupt = None if untrusted else _problem_with(data, namespace, key, shared_key)
    if untrusted or (corrupt and shared_key):  # not ours to remove: ignored, and warned about
        _ignore_untrusted(path, untrusted or corrupt)
    elif corrupt:
        _discard_corrupt(path, corrupt)
    if untrusted or corrupt:
        count("disk_cache_misses")
        return None
    count("disk_cache_hits")
    return data[_HEADER.size :]


def contains(namespace: str, key: str) -> bool:
    """Whether an entry is stored (unverified: ``load`` checks it), while the disk cache is enabled."""
    if not config.disk_cache:
        return False
    path = _entry_path(namespace, key)
    try:
        return _usable(path, create=False) is not None and path.is_file()
    except OSError:  # a directory on the way that cannot be searched: nothing usable
        return False


# A namespace's directory found holding entries stays so for the process; one found empty is
# looked at again after this many asks (the tier policy asks at a kernel's every interpreted run,
# and a look costs tens of microseconds); one this process stored in holds entries.
EMPTY_LOOKS_KEPT = 256
# By (cache directory, namespace): True, or the asks left before an empty one is looked at again
_holding: dict[tuple[Path, str], bool | int] = {}
# The namespaces this process stored into after seeing them empty: what they hold is its own
_own_entries_only: set[tuple[Path, str]] = set()


def holds_any(namespace: str) -> bool:
    """Whether the namespace may hold an entry: a first look, before a key that is dear to compute
    (the CPU backend's needs LLVM) is asked for with ``contains``."""
    if not config.disk_cache:
        return False
    place = (config.cache_dir, namespace)
    known = _holding.get(place)
    if known is True:
        return True
    if known:
        _holding[place] = known - 1
        return False
    try:
        with os.scandir(config.cache_dir / namespace) as shards:
            found = any(shard.is_dir(follow_symlinks=False) for shard in shards)
    except OSError:  # no such directory yet, or not one to search
        found = False
    _holding[place] = True if found else EMPTY_LOOKS_KEPT
    return found


def holds_earlier(namespace: str) -> bool:
    """Whether the namespace may hold an entry this process did not store (``holds_any``, less a
    namespace it saw empty and then stored into): what it compiled itself, it holds in memory."""
    if (config.cache_dir, namespace) in _own_entries_only:
        return False
    return holds_any(namespace)


def store(namespace: str, key: str, payload: bytes) -> None:
    """Keep ``payload`` for later processes; a failure to write only loses the reuse."""
    if not config.disk_cache:
        return
    import secrets  # here: a program whose kernels are all on disk never stores

    path = _entry_path(namespace, key)
    writer = f"{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}"
    temporary = path.with_name(f"{path.name}.{writer}.tmp")
    try:
        shared_key = _usable(path, create=True)
        if shared_key is None:
            return
        version = _SHARED_FORMAT_VERSION if shared_key else _FORMAT_VERSION
        header = _HEADER.pack(_MAGIC, version, len(payload), _digest(payload, namespace, key, shared_key))
        file_mode = (_SHARED_MODES if shared_key else _PRIVATE_MODES)[1]
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(temporary, flags, file_mode), "wb") as file:
            os.fchmod(file.fileno(), file_mode)  # exactly, whatever the umask
            file.write(header)
            file.write(payload)
        os.replace(temporary, path)
        place = (config.cache_dir, namespace)
        if place in _own_entries_only or type(_holding.get(place)) is int:  # seen empty, then stored into
            _own_entries_only.add(place)
        _holding[place] = True  # it holds this entry now
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


def private_directory(directory: Path) -> bool:
    """Make ``directory`` (the cache directory or one under it) as the cache makes its own, and
    say whether it and every cache directory above it can be trusted (warned about once if not):
    what dynfuse checks before it gives a directory to CuPy for its own compiled kernels."""
    try:
        return _usable(directory / "entry", create=True) is not None
    except OSError:
        return False


def forget_checks() -> None:
    """Check every directory and key file again when next used (they were trusted or not as this
    process first saw them)."""
    with _lock:
        _verdicts.clear()
        _keys.clear()
    _holding.clear()
    _own_entries_only.clear()


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
    owner, mode, reason = _describe(directory)
    return {
        "directory": str(directory),
        "enabled": config.disk_cache,
        "writable": _writable(directory),
        "owner": owner,
        "mode": mode,
        "shared": config.cache_key is not None,
        "trusted": reason is None,
        "reason": reason,
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
    _holding.clear()
    _own_entries_only.clear()
    return removed


def _entry_path(namespace: str, key: str) -> Path:
    if not _NAMESPACE.fullmatch(namespace) or not _KEY.fullmatch(key):
        raise ValueError(f"disk cache: bad namespace {namespace!r} or key {key!r} (keys come from key_of)")
    return config.cache_dir / namespace / key[:2] / f"{key}.bin"


def _digest(payload: bytes, namespace: str, key: str, shared_key: bytes) -> bytes:
    """The header's digest: the payload's checksum, or, in a shared cache, its HMAC bound to the
    entry's name (so a valid entry copied over another's fails)."""
    import hashlib
    import hmac

    if not shared_key:
        return hashlib.blake2b(payload, digest_size=32).digest()
    return hmac.new(shared_key, f"{namespace}/{key}\0".encode() + payload, hashlib.sha256).digest()


def _problem_with(data: bytes, namespace: str, key: str, shared_key: bytes) -> str | None:
    if len(data) < _HEADER.size:
        return f"{len(data)} bytes, shorter than the header"
    magic, version, length, digest = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        return "not a dynfuse entry"
    expected = _SHARED_FORMAT_VERSION if shared_key else _FORMAT_VERSION
    if version != expected:
        return f"format version {version}, expected {expected}"
    if len(data) - _HEADER.size != length:
        return f"payload of {len(data) - _HEADER.size} bytes, header says {length}"
    import hmac

    if not hmac.compare_digest(_digest(data[_HEADER.size :], namespace, key, shared_key), digest):
        return "not authenticated by the shared key" if shared_key else "checksum mismatch"
    return None


def _usable(path: Path, create: bool) -> bytes | None:
    """The shared key (b"" in a private cache) where the entry at ``path`` may be read or written:
    the key file is usable, and the cache directory and each directory down to the entry can be
    trusted (``create``: the missing ones are made, as the cache makes them). None, warned about
    once, where not."""
    shared_key = _shared_key()
    if shared_key is None:
        return None
    directory_mode = (_SHARED_MODES if shared_key else _PRIVATE_MODES)[0]
    root = config.cache_dir
    parts = path.parent.relative_to(root).parts
    for directory in [root, *(root.joinpath(*parts[:depth]) for depth in range(1, len(parts) + 1))]:
        if create and not directory.exists():
            if directory == root:
                directory.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):  # another process made it meanwhile: checked below
                directory.mkdir()
                os.chmod(directory, directory_mode)  # exactly, whatever the umask
        elif not create and not directory.exists():
            return shared_key  # a plain miss below
        reason = _verdict(directory, shared=bool(shared_key))
        if reason is not None:
            if _first_time("untrusted", directory):
                warnings.warn(
                    f"dynfuse: not using the disk cache in {directory}: {reason}; anyone who can "
                    "write there could make dynfuse run their code, so compiled kernels are not "
                    "read from or kept there",
                    RuntimeWarning,
                    stacklevel=4,
                )
            return None
    return shared_key


def _verdict(directory: Path, shared: bool) -> str | None:
    """Why ``directory`` cannot be trusted, None where it can (checked once per process)."""
    with _lock:
        if directory in _verdicts:
            return _verdicts[directory]
    try:
        status = os.stat(directory)
    except OSError as error:
        reason: str | None = f"it cannot be examined ({error.strerror})"
    else:
        reason = _directory_problem(status, shared)
    with _lock:
        _verdicts[directory] = reason
    return reason


def _directory_problem(status: os.stat_result, shared: bool) -> str | None:
    mode = stat.S_IMODE(status.st_mode)
    if not stat.S_ISDIR(status.st_mode):
        return "it is not a directory"
    if mode & stat.S_IWOTH:
        return f"it is writable by every user (mode {mode:04o})"
    if shared:
        return None
    if status.st_uid != os.getuid():
        return f"it is owned by {_user(status.st_uid)}, not {_user(os.getuid())}"
    if mode & stat.S_IWGRP:
        return f"it is writable by its group (mode {mode:04o}; a team's cache names DYNFUSE_CACHE_KEY)"
    return None


def _file_problem(status: os.stat_result, shared: bool) -> str | None:
    """Why an entry file cannot be trusted: in a shared cache its HMAC decides."""
    if not stat.S_ISREG(status.st_mode):
        return "not a regular file"
    if shared:
        return None
    if status.st_uid != os.getuid():
        return f"owned by {_user(status.st_uid)}, not {_user(os.getuid())}"
    if stat.S_IMODE(status.st_mode) & (stat.S_IWGRP | stat.S_IWOTH):
        return f"owned by this user but writable by others (mode {stat.S_IMODE(status.st_mode):04o})"
    return None


def _shared_key() -> bytes | None:
    """The shared key (b"" without ``DYNFUSE_CACHE_KEY``), read once per key file; None, warned
    about once, where the file cannot be used: unreadable, readable by every user, or too short."""
    path = config.cache_key
    if path is None:
        return b""
    with _lock:
        found = _keys.get(path)
    if found is None:
        try:
            status = os.stat(path)
            found = path.read_bytes()
        except OSError as error:
            found = f"it cannot be read ({error.strerror})"
        else:
            if stat.S_IMODE(status.st_mode) & stat.S_IROTH:
                found = "it is readable by every user, who could then sign entries"
            elif len(found) < _SHORTEST_KEY:
                found = f"it holds {len(found)} bytes, fewer than {_SHORTEST_KEY}"
        with _lock:
            _keys[path] = found
    if isinstance(found, str):
        if _first_time("key", path):
            warnings.warn(
                f"dynfuse: not using the disk cache: the key file {path} (DYNFUSE_CACHE_KEY) cannot "
                f"be used: {found}",
                RuntimeWarning,
                stacklevel=4,
            )
        return None
    return found


def _user(uid: int) -> str:
    import pwd  # here: only a warning names users

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _describe(directory: Path) -> tuple[str | None, str | None, str | None]:
    """The cache directory's owner and mode, and why it cannot be trusted (None: it can, or it
    does not exist yet and will be made private)."""
    try:
        status = os.stat(directory)
    except OSError:
        return None, None, None
    return (
        _user(status.st_uid),
        f"{stat.S_IMODE(status.st_mode):04o}",
        _directory_problem(status, shared=config.cache_key is not None),
    )


def _ignore_untrusted(path: Path, problem: str) -> None:
    count("disk_cache_errors")
    if _first_time("ignored", path):
        warnings.warn(f"dynfuse: ignoring disk cache entry {path}: {problem}", RuntimeWarning, stacklevel=3)


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
