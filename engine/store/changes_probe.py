"""Cheap change detection, so an open inspector sees what other processes write (live refresh).

Two levels, so the common case (nothing happened) costs microseconds:

1. `ChangeSignal.signature()`: `PRAGMA data_version` on a dedicated read-only connection (it
   changes whenever any other connection commits, in this process or another) plus the size and
   mtime of the database and its -wal file. Cheap enough for a GUI-thread timer.
2. `probe_changes(store, scope, previous)`: run in a worker thread when the signature moved:
   `max(id)` and `count(*)` per table, and for tables that grew, how many of the new rows are in
   the scope being shown. New curation-log rows name the tables their command touched (updates
   that add no row, like a fact's status change, are found that way).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from ..scope import Scope
from .sql import scope_where

# Tables the panes watch. Scoped ones carry the four scope columns; the rest are global.
SCOPED_TABLES = ("documents", "chunks", "memories", "facts", "memory_relations", "memory_sources", "entities",
                 "entity_mentions", "embeddings", "retrieval_traces", "trace_candidates", "conflicts",
                 "curation_log", "extraction_queue")
GLOBAL_TABLES = ("bench_runs", "bench_items")


class ChangeSignal:
    """A dedicated read-only connection whose data_version, with the file stats, says "something
    was committed". Never reads a row; close() it when the database is closed."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.wal = Path(f"{self.path}-wal")
        self.conn = apsw.Connection(str(self.path), flags=apsw.SQLITE_OPEN_READONLY)
        self.conn.set_busy_timeout(200)

    @staticmethod
    def _stat(path: Path) -> tuple[int, int]:
        try:
            st = path.stat()
        except OSError:
            return (-1, -1)
        return (st.st_size, st.st_mtime_ns)

    def signature(self) -> tuple[Any, ...]:
        try:
            version = self.conn.data_version()
        except apsw.Error:
            version = None  # busy or gone: the stats still tell
        return (version, self._stat(self.path), self._stat(self.wal))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None  # type: ignore[assignment]


@dataclass(slots=True)
class Probe:
    marks: dict[str, tuple[int, int]]  # table -> (max id, row count)
    meta: tuple[int, int]  # (rows, total bytes) of the meta table


@dataclass(slots=True)
class Changes:
    tables: set[str] = field(default_factory=set)  # changed tables that matter to the scope shown
    new_memories: int = 0  # memories added in the scope shown
    other_scopes: bool = False  # memories or documents were added in other scopes (the scope list may grow)


def _marks(conn: apsw.Connection) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for table in (*SCOPED_TABLES, *GLOBAL_TABLES):
        top, count = conn.execute(f"SELECT coalesce(max(id), 0), count(*) FROM {table}").fetchone() or (0, 0)
        out[table] = (int(top), int(count))
    return out


def probe_changes(store: Any, scope: Scope | None, previous: Probe | None) -> tuple[Probe, Changes]:
    """The current marks, and what changed since `previous` (nothing when there is no previous)."""
    conn = store.conn
    conn.execute("BEGIN")  # one snapshot for all the counts
    try:
        probe = Probe(_marks(conn), tuple(conn.execute(
            "SELECT count(*), coalesce(sum(octet_length(value)), 0) FROM meta").fetchone()))
        changes = Changes()
        if previous is None:
            return probe, changes
        sp = scope.as_params() if scope is not None else None
        for table, (max_id, count) in probe.marks.items():
            old_max, old_count = previous.marks.get(table, (0, 0))
            if (max_id, count) == (old_max, old_count):
                continue
            added = conn.execute(f"SELECT count(*) FROM {table} WHERE id > ?", (old_max,)).fetchone()[0]
            deleted = old_count + added - count > 0
            if table in GLOBAL_TABLES or sp is None:
                changes.tables.add(table)
                continue
            mine = conn.execute(f"SELECT count(*) FROM {table} WHERE id > ? AND {scope_where()}", (old_max, *sp)).fetchone()[0]
            if mine or deleted:
                changes.tables.add(table)
            if table == "memories":
                changes.new_memories = mine
            if table in ("memories", "documents") and added > mine:
                changes.other_scopes = True
            if table == "curation_log" and mine:
                for (before,) in conn.execute(f"SELECT before FROM curation_log WHERE id > ? AND {scope_where()}",
                                              (old_max, *sp)):
                    try:
                        rows = json.loads(before).get("rows", {})
                    except (ValueError, AttributeError):
                        rows = {}
                    changes.tables |= {t for t in rows if isinstance(t, str)}
        if probe.meta != previous.meta:
            changes.tables.add("meta")
        return probe, changes
    finally:
        conn.execute("COMMIT")


__all__ = ["ChangeSignal", "Probe", "Changes", "probe_changes", "SCOPED_TABLES", "GLOBAL_TABLES"]
