"""A consistent private copy of an SQLite file that another program may be writing at the time.

Reading someone else's live database through SQLite is not read-only: a reader of a WAL file
writes its read marks into `-shm` (and creates `-wal`/`-shm` when they are missing), and
`immutable=1` is only honest for a file that cannot change. So the file set is copied byte for
byte into a private directory and SQLite opens the copy, where recovery (a leftover `-wal`, a
hot `-journal`) happens on our files only. The source is opened O_RDONLY and never written;
`-shm` is never opened at all (it is an index SQLite rebuilds from the `-wal`).

A copy taken while the writer works can tear: a checkpoint rewrites pages of the main file
while we read it, or the WAL is reset between copying the main file and the WAL. So every
attempt reads each file twice: once into the copy (hashing it), then again to hash it in
place, with the files' identity (inode, size, mtime, ctime) taken before and after. Equal
hashes and identities mean each file held still from its copy to its re-read; the two windows
overlap, so the copied set is the state of one instant, which SQLite recovers like a crash
image. Otherwise the attempt is thrown away and retried until `wait` seconds have passed.

Before each attempt the main file's SQLite lock bytes are probed the way a reader would take
its shared lock (POSIX only; nothing is held while copying, so a writer is never delayed): a
writer holding PENDING or EXCLUSIVE means "locked", and after `wait` seconds of that the copy
gives up with `SourceBusy` ("locked, try again"). POSIX locks belong to a process, so this must
not run in a process that itself has the source open through SQLite (memlens never does).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadInput, Busy
from ..files import open_private

try:  # POSIX advisory locks, as SQLite's unix VFS uses them
    import fcntl
except ImportError:  # pragma: no cover - Windows: SQLite's locks there are mandatory; a read of a locked range fails
    fcntl = None  # type: ignore[assignment]

# SQLite's lock bytes (os_unix.c): a reader read-locks PENDING, then the SHARED range, then drops PENDING.
PENDING_BYTE = 0x40000000
SHARED_FIRST = PENDING_BYTE + 2
SHARED_SIZE = 510
# Files that hold committed or in-flight state. `-shm` is deliberately absent (see the module doc).
SIDE_SUFFIXES = ("-wal", "-journal")
BLOCK = 1 << 20


class SourceBusy(Busy):
    """The source stayed locked by a writer, or kept changing under every copy, for `wait` seconds."""


@dataclass(frozen=True, slots=True)
class _Identity:
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int


def _identity(st: os.stat_result | None) -> _Identity | None:
    return None if st is None else _Identity(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


@dataclass(slots=True)
class Snapshot:
    """The private copy: `path` is the main file inside `directory` (delete it with `discard()`)."""

    source: Path
    directory: Path
    path: Path
    attempts: int
    sha256: dict[str, str] = field(default_factory=dict)  # source file name -> sha256 of what was copied
    seconds: float = 0.0  # copying and verifying, retries and waits included

    def discard(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _locked_by_writer(fd: int) -> bool:
    """True when another process holds SQLite's PENDING or EXCLUSIVE lock on the file behind fd.

    Probed with non-blocking read locks, released at once (unlocking a range we did not lock is a
    no-op, so this never disturbs a lock the writer holds)."""
    if fcntl is None:
        return False
    for start, length in ((PENDING_BYTE, 1), (SHARED_FIRST, SHARED_SIZE)):
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, length, start, os.SEEK_SET)
        except OSError:
            return True
        fcntl.lockf(fd, fcntl.LOCK_UN, length, start, os.SEEK_SET)
    return False


def _read_at(fd: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, BLOCK, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # Windows; the descriptor is ours alone
    return os.read(fd, BLOCK)


def _copy_fd(fd: int, dest: Path) -> str:
    """Copy what fd reads into dest; its sha256. A source read error is an OSError (a busy source);
    one writing the copy is BadInput (no room for the private copy: retrying will not help)."""
    h = hashlib.sha256()
    offset = 0
    try:
        out = open_private(dest, "wb")
    except OSError as exc:
        raise BadInput(f"cannot make a private copy in {dest.parent}: {exc.strerror or exc}") from None
    with out:
        while True:
            block = _read_at(fd, offset)
            if not block:
                break
            try:
                out.write(block)
            except OSError as exc:
                raise BadInput(f"cannot make a private copy in {dest.parent}: {exc.strerror or exc}") from None
            h.update(block)
            offset += len(block)
    return h.hexdigest()


def _hash_fd(fd: int) -> str:
    h = hashlib.sha256()
    offset = 0
    while True:
        block = _read_at(fd, offset)
        if not block:
            return h.hexdigest()
        h.update(block)
        offset += len(block)


def _open_ro(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return None


class _Torn(Exception):
    """This attempt's copy cannot be trusted: the files moved underneath it, or a writer holds the lock."""

    def __init__(self, reason: str, *, locked: bool = False) -> None:
        super().__init__(reason)
        self.locked = locked


def _attempt(source: Path, into: Path, on_copied: Callable[[str, int], None] | None, attempt: int) -> dict[str, str]:
    """One copy of the file set into `into`, verified; {file name: sha256} or _Torn."""
    names = [source.name] + [source.name + s for s in SIDE_SUFFIXES]
    paths = [source] + [source.with_name(n) for n in names[1:]]
    fds: dict[str, int] = {}
    try:
        for name, path in zip(names, paths):
            fd = _open_ro(path)
            if fd is not None:
                fds[name] = fd
        if source.name not in fds:
            raise BadInput(f"{source}: no such file")
        if _locked_by_writer(fds[source.name]):
            raise _Torn("a writer holds the lock", locked=True)
        # The identity of what each descriptor reads (a file renamed over the path shows up below).
        before = {n: _identity(os.fstat(fds[n])) if n in fds else None for n in names}
        copied: dict[str, str] = {}
        for name in names:
            if name in fds:
                copied[name] = _copy_fd(fds[name], into / name)
                if on_copied is not None:
                    on_copied(name, attempt)
        for name in fds:
            if _hash_fd(fds[name]) != copied[name]:
                raise _Torn(f"{name} changed while being copied")
        after = {n: _identity(_stat(p)) for n, p in zip(names, paths)}
        if after != before:
            raise _Torn("a file appeared, went away or was rewritten while being copied")
        return copied
    except OSError as exc:  # a read refused by a mandatory lock (Windows) is a busy source too
        raise _Torn(f"read failed: {exc.strerror or exc}") from None
    finally:
        for fd in fds.values():
            os.close(fd)


def private_copy(source: str | os.PathLike[str], *, wait: float = 5.0,
                 on_copied: Callable[[str, int], None] | None = None) -> Snapshot:
    """Copy `source` (and its -wal / -journal) into a new private directory, consistently.

    Retries while the source is locked by a writer or changes under the copy; after `wait`
    seconds raises SourceBusy. `on_copied(file name, attempt)` runs after each file is copied
    (the tests use it to let a writer in at the worst moment)."""
    source = Path(source)
    try:
        directory = Path(tempfile.mkdtemp(prefix="memlens-copy-"))  # 0700: the copy holds someone's memories
    except OSError as exc:
        raise BadInput(f"cannot make a private copy of {source} in {tempfile.gettempdir()}: "
                       f"{exc.strerror or exc} (set TMPDIR to a writable folder)") from None
    t0 = time.monotonic()
    deadline = t0 + max(0.0, wait)
    attempt = 0
    pause = 0.02
    last = _Torn("")
    try:
        while True:
            attempt += 1
            for leftover in directory.iterdir():
                leftover.unlink()
            try:
                digests = _attempt(source, directory, on_copied, attempt)
                return Snapshot(source, directory, directory / source.name, attempt, digests,
                                round(time.monotonic() - t0, 3))
            except _Torn as exc:
                last = exc
            if time.monotonic() >= deadline:
                why = ("another program holds its write lock" if last.locked
                       else f"it kept changing while being copied ({last})")
                raise SourceBusy(f"{source}: locked, try again: {why}; NeoAgent is probably writing to it"
                                 f" (waited {time.monotonic() - t0:.1f} s, {attempt} attempts)")
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.5)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


__all__ = ["Snapshot", "SourceBusy", "private_copy", "SIDE_SUFFIXES"]
