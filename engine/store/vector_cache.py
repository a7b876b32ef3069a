"""SQL of the vector cache: a file of (embedder identity, text key) -> float32 vector.

The cache is its own small SQLite file, not part of a memlens database: it holds no user record,
only what an embedder computed for a text, so any database (a benchmark container, a perf store)
may be built from it, and deleting it loses nothing but time. It is private (0600) all the same:
a vector says something of the text it was computed from. Several processes share one file
(benchmark workers): WAL, a busy timeout, and INSERT OR IGNORE, since two of them may compute
the same text at once and both results are the same vector.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import apsw

from ..files import create_private, private_dir

BUSY_TIMEOUT_MS = 10_000
OPEN_RETRY_S = 0.02  # between attempts at a setup SQLite answered busy without waiting
_IN_CHUNK = 500
# Reads map the file rather than copy its pages through read(): a vector row spans two pages (its
# 1.5 KB blob overflows a 4 KB page's share), and recall reads its clauses' vectors here the first
# time it meets them (LoCoMo dev: ~7,400 texts a run, most of the slowest recalls' current-truth
# CPU, issue 21); mapped, a lookup costs about half. The same bytes either way. SQLite maps at
# most this much of the file, and only what the file holds.
MMAP_BYTES = 1 << 30

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    embedder TEXT NOT NULL,   -- provider, model, dims and a fingerprint of the code and weights
    key      BLOB NOT NULL,   -- sha256 of the kind and the exact text
    vector   BLOB NOT NULL,   -- float32, little-endian
    PRIMARY KEY (embedder, key)
) STRICT, WITHOUT ROWID;
"""


class VectorCacheFile:
    """One connection to a cache file (per process and thread: apsw connections are not shared)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        private_dir(self.path.parent)
        create_private(self.path)  # 0600, as every file memlens writes (its -wal and -shm follow)
        self.conn = apsw.Connection(str(self.path))
        self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        # Workers of a cold run open a new file at once: SQLite answers the switch to WAL busy
        # without calling the busy handler while another opener holds the file's lock, so the
        # setup is tried again until the busy timeout has passed (it once lost the cache for a run).
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000.0
        while True:
            try:
                self.conn.pragma("journal_mode", "wal")
                self.conn.pragma("synchronous", "normal")  # a lost tail costs a re-embed, never a wrong vector
                self.conn.pragma("mmap_size", MMAP_BYTES)
                self.conn.execute(_SCHEMA)
                break
            except apsw.BusyError:
                if time.monotonic() < deadline:
                    time.sleep(OPEN_RETRY_S)
                    continue
                self.conn.close()
                raise
            except apsw.Error:
                self.conn.close()
                raise

    def get(self, embedder: str, keys: list[bytes]) -> dict[bytes, bytes]:
        out: dict[bytes, bytes] = {}
        for i in range(0, len(keys), _IN_CHUNK):
            part = keys[i:i + _IN_CHUNK]
            marks = ",".join("?" * len(part))
            out.update(self.conn.execute(
                f"SELECT key, vector FROM vectors WHERE embedder = ? AND key IN ({marks})", (embedder, *part)))
        return out

    def put(self, embedder: str, rows: list[tuple[bytes, bytes]], *, replace: bool = False) -> None:
        if not rows:
            return
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        with self.conn:
            self.conn.executemany(f"{verb} INTO vectors(embedder, key, vector) VALUES (?, ?, ?)",
                                  [(embedder, k, v) for k, v in rows])

    def absorb(self, other: str | os.PathLike[str]) -> None:
        """Copy every vector of the cache file `other` into this one (its rows win: they were
        computed anew on purpose)."""
        self.conn.execute("ATTACH DATABASE ? AS other", (str(other),))
        try:
            with self.conn:
                self.conn.execute("INSERT OR REPLACE INTO vectors(embedder, key, vector) "
                                  "SELECT embedder, key, vector FROM other.vectors")
        finally:
            self.conn.execute("DETACH DATABASE other")

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the file and empty it, so a process that ends without
        closing leaves nothing for the next opener to recover (a warning on stderr)."""
        self.conn.pragma("wal_checkpoint", "TRUNCATE")

    def count(self, embedder: str | None = None) -> int:
        if embedder is None:
            (n,) = self.conn.execute("SELECT count(*) FROM vectors").fetchone() or (0,)
        else:
            (n,) = self.conn.execute("SELECT count(*) FROM vectors WHERE embedder = ?", (embedder,)).fetchone() or (0,)
        return int(n)

    def close(self) -> None:
        self.conn.close()
