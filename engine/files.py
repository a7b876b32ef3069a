"""Files memlens writes are private to the user who runs it, as mail and messenger clients keep theirs.

The memory holds personal facts, retrieval traces and model-call records, so the data folder is
created 0700 and every file (the database, the side files SQLite makes next to it, benchmark
containers, exports, reports) 0600. SQLite gives its -wal and -shm files the mode of the
database file, so creating the database 0600 covers them. A file that already exists keeps its
mode (the user may have chosen it): opening one that others can read is reported, not changed.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import IO, Any

DIR_MODE = 0o700
FILE_MODE = 0o600
SIDE_SUFFIXES = ("-wal", "-shm", "-journal")


def private_dir(path: str | os.PathLike[str]) -> Path:
    """mkdir -p, creating each missing folder 0700 (folders that exist keep their mode)."""
    path = Path(path)
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(folder, DIR_MODE)  # mkdir's mode is masked by the umask; 0700 is what we mean
    return path


def create_private(path: str | os.PathLike[str]) -> bool:
    """Create an empty file 0600 if it does not exist (True if this call created it)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def open_private(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any) -> IO[Any]:
    """open() for writing a new or replaced file that only its owner can read."""
    if not any(c in mode for c in "wax"):
        raise ValueError("open_private is for writing")
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if "x" in mode else 0)
    flags |= os.O_APPEND if "a" in mode else (os.O_TRUNC if "w" in mode else 0)
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # a file that existed keeps its old mode through os.open
    except (AttributeError, OSError):  # no fchmod on Windows, where modes mean little anyway
        pass
    return os.fdopen(fd, mode, **kwargs)


def write_private(path: str | os.PathLike[str], data: str | bytes, *, encoding: str = "utf-8") -> Path:
    path = Path(path)
    with open_private(path, "wb") as fh:
        fh.write(data.encode(encoding) if isinstance(data, str) else data)
    return path


def make_private(path: str | os.PathLike[str]) -> None:
    """For a file another library wrote (Qt's image writer): owner-only from now on."""
    os.chmod(path, FILE_MODE)


def exposure(db_path: str | os.PathLike[str]) -> str | None:
    """One line when other users of this machine can read the database or its side files, else None."""
    if sys.platform == "win32" or str(db_path) == ":memory:":
        return None  # POSIX modes do not describe who can read a file on Windows
    path = Path(db_path)
    readable = []
    for candidate in [path, *(Path(str(path) + s) for s in SIDE_SUFFIXES)]:
        try:
            mode = stat.S_IMODE(candidate.stat().st_mode)
        except OSError:
            continue
        if mode & 0o044:
            readable.append((candidate, mode))
    if not readable:
        return None
    names = " ".join(str(p) for p, _ in readable)
    first, mode = readable[0]
    who = "everyone on this machine" if mode & 0o004 else "its group"
    return (f"{first.name} can be read by {who} (mode {mode:04o}); "
            f"to keep these memories private: chmod 600 {names}")
