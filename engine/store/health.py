"""SQL for the store-health checks (engine/health.py) and their trend table.

Every read names a Scope. Reads that can return a row per memory take `limit`/`offset` and
have a matching count, so a check on a 1M-memory store materialises one page, not the store.
The FTS check reads the index's own docsize table instead of running FTS5's integrity-check
command: that command is an INSERT and takes the write lock, which a read must never do.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import apsw
import apsw.fts5
import numpy as np

from ..scope import Scope
from .sql import dict_rows, scope_where

_LIVE_M = "m.forgotten_at IS NULL AND m.retracted_at IS NULL"
_CURRENT = "('active', 'needs_review')"
TREND_KEEP = 500  # trend rows kept per scope


def _varint(blob: bytes) -> int:
    """The first SQLite varint of an FTS5 docsize blob: the token count of the first column."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value


class HealthReads:
    """Mixed into store.Store: `self.conn` exists."""

    conn: Any

    # counts -----------------------------------------------------------------------------------
    def live_memory_count(self, scope: Scope) -> int:
        return self.conn.execute(f"SELECT count(*) FROM memories m WHERE {scope_where('m')} AND {_LIVE_M}",
                                 scope.as_params()).fetchone()[0]

    # duplicates -------------------------------------------------------------------------------
    def identical_memory_groups(self, scope: Scope, *, min_chars: int) -> list[list[int]]:
        """Ids of live non-fact memories sharing one content hash, in groups of two or more."""
        rows = self.conn.execute(
            f"SELECT group_concat(m.id) FROM memories m WHERE {scope_where('m')} AND {_LIVE_M} AND m.kind != 'fact'"
            " AND length(m.text) >= ? GROUP BY m.content_hash HAVING count(*) > 1 ORDER BY min(m.id)",
            (*scope.as_params(), min_chars))
        return [sorted(int(x) for x in r[0].split(",")) for r in rows]

    def live_vector_blocks(self, scope: Scope, model: str, dims: int, *, min_chars: int = 0, block: int = 20000
                           ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(memory ids, is_fact flags, float32 vectors) of live memories of at least min_chars with a
        usable vector of this model, a block at a time (a 1M store is never held twice in memory)."""
        cur = self.conn.execute(
            "SELECT m.id, m.kind = 'fact', e.vector FROM embeddings e JOIN memories m ON m.id = e.owner_id"
            f" WHERE {scope_where('e')} AND e.owner_type = 'memory' AND e.stale != 1 AND e.model = ? AND e.dims = ?"
            f" AND {_LIVE_M} AND length(m.text) >= ? ORDER BY e.id", (*scope.as_params(), model, dims, min_chars))
        while True:
            rows = list(itertools.islice(cur, block))
            if not rows:
                return
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            facts = np.fromiter((bool(r[1]) for r in rows), dtype=bool, count=len(rows))
            mat = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dims)
            yield ids, facts, mat

    def vectors_of(self, scope: Scope, memory_ids: list[int], model: str, dims: int) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        for part in _parts(memory_ids):
            for mid, blob in self.conn.execute(
                    f"SELECT owner_id, vector FROM embeddings WHERE {scope_where()} AND owner_type = 'memory'"
                    f" AND model = ? AND dims = ? AND owner_id IN ({','.join('?' * len(part))})",
                    (*scope.as_params(), model, dims, *part)):
                out[int(mid)] = np.frombuffer(blob, dtype=np.float32)
        return out

    # facts ------------------------------------------------------------------------------------
    def open_conflict_pairs(self, scope: Scope) -> list[tuple[int, int | None]]:
        return [(r[0], r[1]) for r in self.conn.execute(
            f"SELECT fact_a_id, fact_b_id FROM conflicts WHERE {scope_where()} AND status = 'open'", scope.as_params())]

    def relation_pairs(self, scope: Scope, types: tuple[str, ...]) -> list[tuple[int, int, str]]:
        """(src memory, dst memory, type) of current relations of these types."""
        return [(r[0], r[1], r[2]) for r in self.conn.execute(
            f"SELECT src_memory_id, dst_memory_id, type FROM memory_relations WHERE {scope_where()}"
            f" AND removed_at IS NULL AND type IN ({','.join('?' * len(types))})", (*scope.as_params(), *types))]

    def fact_support(self, scope: Scope) -> list[dict[str, Any]]:
        """For each current fact: its sources, how many lie in unretracted documents, how many episodes
        share its source chunks and how many of those are live (the ones it was read from)."""
        return dict_rows(
            self.conn,
            "SELECT f.id, f.memory_id, f.evidence_unverified,"
            " (SELECT count(*) FROM memory_sources s WHERE s.memory_id = f.memory_id) AS sources,"
            " (SELECT count(*) FROM memory_sources s JOIN documents d ON d.id = s.document_id"
            "  WHERE s.memory_id = f.memory_id AND d.retracted_at IS NULL) AS live_sources,"
            " (SELECT count(*) FROM memory_sources s JOIN memory_sources t ON t.chunk_id = s.chunk_id"
            "  JOIN memories e ON e.id = t.memory_id WHERE s.memory_id = f.memory_id AND e.kind != 'fact') AS turns,"
            " (SELECT count(*) FROM memory_sources s JOIN memory_sources t ON t.chunk_id = s.chunk_id"
            "  JOIN memories e ON e.id = t.memory_id WHERE s.memory_id = f.memory_id AND e.kind != 'fact'"
            "  AND e.forgotten_at IS NULL AND e.retracted_at IS NULL) AS live_turns"
            " FROM facts f JOIN memories m ON m.id = f.memory_id"
            f" WHERE {scope_where('f')} AND f.status IN {_CURRENT} AND {_LIVE_M} ORDER BY f.id", scope.as_params())

    def gone_turns(self, scope: Scope, memory_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
        """memory id -> the forgotten or retracted episodes read from the same chunks as its sources."""
        out: dict[int, list[dict[str, Any]]] = {}
        for part in _parts(memory_ids):
            for r in dict_rows(
                    self.conn,
                    "SELECT DISTINCT s.memory_id, e.id AS episode_id, s.chunk_id, e.forgotten_at, e.forget_reason,"
                    " e.retracted_at FROM memory_sources s JOIN memory_sources t ON t.chunk_id = s.chunk_id"
                    " JOIN memories e ON e.id = t.memory_id"
                    f" WHERE {scope_where('s')} AND s.memory_id IN ({','.join('?' * len(part))}) AND e.kind != 'fact'"
                    " AND (e.forgotten_at IS NOT NULL OR e.retracted_at IS NOT NULL) ORDER BY e.id",
                    (*scope.as_params(), *part)):
                out.setdefault(r.pop("memory_id"), []).append(r)
        return out

    def derivations(self, scope: Scope) -> list[dict[str, Any]]:
        """Current derived facts (relation 'derives' or the source of a derives relation), one row per
        premise (premise columns NULL when it has none), with each premise's state."""
        return dict_rows(
            self.conn,
            "SELECT f.id AS fact_id, f.memory_id, f.relation, m.text, r.dst_memory_id AS premise_memory_id,"
            " pm.text AS premise_text, pm.forgotten_at AS premise_forgotten_at,"
            " pm.retracted_at AS premise_retracted_at, pf.id AS premise_fact_id, pf.status AS premise_status"
            " FROM facts f JOIN memories m ON m.id = f.memory_id"
            " LEFT JOIN memory_relations r ON r.src_memory_id = f.memory_id AND r.type = 'derives'"
            f"  AND r.removed_at IS NULL AND {scope_where('r')}"
            " LEFT JOIN memories pm ON pm.id = r.dst_memory_id"
            " LEFT JOIN facts pf ON pf.memory_id = r.dst_memory_id"
            f" WHERE {scope_where('f')} AND f.status IN {_CURRENT} AND {_LIVE_M}"
            " AND (f.relation = 'derives' OR r.id IS NOT NULL) ORDER BY f.id, r.id",
            (*scope.as_params(), *scope.as_params()))

    # external text ----------------------------------------------------------------------------
    def external_memory_texts(self, scope: Scope) -> Iterator[tuple[int, str, str]]:
        """(id, kind, text) of every live memory read from external content."""
        for row in self.conn.execute(
                f"SELECT m.id, m.kind, m.text FROM memories m WHERE {scope_where('m')} AND m.trust = 'external'"
                f" AND {_LIVE_M} ORDER BY m.id", scope.as_params()):
            yield row[0], row[1], row[2]

    # provenance -------------------------------------------------------------------------------
    _UNSOURCED = (" FROM memories m WHERE {sw} AND {live} AND (NOT EXISTS (SELECT 1 FROM memory_sources s"
                  " WHERE s.memory_id = m.id) OR EXISTS (SELECT 1 FROM memory_sources s JOIN chunks c"
                  ' ON c.id = s.chunk_id WHERE s.memory_id = m.id AND (s.start < c.start OR s."end" > c."end"))'
                  " OR EXISTS (SELECT 1 FROM memory_sources s LEFT JOIN chunks c ON c.id = s.chunk_id"
                  " WHERE s.memory_id = m.id AND c.id IS NULL))")

    def unsourced_memories(self, scope: Scope, *, limit: int, offset: int) -> tuple[int, list[dict[str, Any]]]:
        """Live memories with no source span, or with a span outside its chunk or on a missing chunk."""
        where = self._UNSOURCED.format(sw=scope_where("m"), live=_LIVE_M)
        total = self.conn.execute("SELECT count(*)" + where, scope.as_params()).fetchone()[0]
        rows = dict_rows(
            self.conn,
            "SELECT m.id, m.kind, m.text, m.trust, m.extraction_method, m.created_at,"
            " (SELECT count(*) FROM memory_sources s WHERE s.memory_id = m.id) AS sources" + where
            + " ORDER BY m.id LIMIT ? OFFSET ?", (*scope.as_params(), limit, offset))
        return total, rows

    # vectors ----------------------------------------------------------------------------------
    _VECTORS = (" FROM memories m LEFT JOIN embeddings e ON e.owner_type = 'memory' AND e.owner_id = m.id"
                " WHERE {sw} AND {live} AND (e.id IS NULL OR e.stale != 0 OR (? IS NOT NULL AND (e.model != ? OR e.dims != ?)))")

    def vector_problems(self, scope: Scope, model: str | None, dims: int | None, *, limit: int, offset: int
                        ) -> tuple[int, list[dict[str, Any]]]:
        """Live memories whose vector is missing, stale (1: another model, 2: an older text
        definition) or of a model/width other than the store's current one (None: not judged)."""
        where = self._VECTORS.format(sw=scope_where("m"), live=_LIVE_M)
        params = (*scope.as_params(), model, model, dims)
        total = self.conn.execute("SELECT count(*)" + where, params).fetchone()[0]
        rows = dict_rows(
            self.conn,
            "SELECT m.id, m.kind, m.text, e.id AS embedding_id, e.provider, e.model, e.dims, e.stale,"
            " e.created_at AS embedded_at" + where + " ORDER BY m.id LIMIT ? OFFSET ?", (*params, limit, offset))
        return total, rows

    # full text --------------------------------------------------------------------------------
    def fts_rows_out_of_sync(self, scope: Scope, table: str, *,
                             should_stop: Callable[[], bool] | None = None) -> dict[str, list[int]]:
        """Rows of `table` (memories or chunks) in this scope that its FTS5 index does not hold as
        they are: "missing" (no index row), "changed" (the index counts another number of tokens
        than the text has now), and index rows whose content row is gone ("orphaned", no scope:
        they belong to no row at all)."""
        if table not in ("memories", "chunks"):
            raise ValueError(table)
        fts = apsw.fts5.Table(self.conn, f"{table}_fts")
        tokenize = fts.tokenizer
        out: dict[str, list[int]] = {"missing": [], "changed": [], "orphaned": []}
        cur = self.conn.execute(
            f"SELECT t.id, t.text, d.sz FROM {table} t LEFT JOIN {table}_fts_docsize d ON d.id = t.id"
            f" WHERE {scope_where('t')} ORDER BY t.id", scope.as_params())
        reason = apsw.FTS5_TOKENIZE_DOCUMENT
        for n, (rid, text, sz) in enumerate(cur):
            if sz is None:
                if text:
                    out["missing"].append(rid)
            elif _varint(sz) != len(list(tokenize(text.encode("utf-8"), reason, None, include_offsets=False))):
                out["changed"].append(rid)
            if should_stop is not None and n % 20000 == 0 and should_stop():
                break
        out["orphaned"] = [r[0] for r in self.conn.execute(
            f"SELECT d.id FROM {table}_fts_docsize d WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.id = d.id)"
            " ORDER BY d.id")]
        return out

    # entities ---------------------------------------------------------------------------------
    def entity_stats(self, scope: Scope) -> list[dict[str, Any]]:
        """Every entity of the scope with how many live memories mention it."""
        return dict_rows(
            self.conn,
            "SELECT e.id, e.name, e.kind, e.canonical, count(DISTINCT em.memory_id) AS memories, count(em.id) AS mentions"
            " FROM entities e JOIN entity_mentions em ON em.entity_id = e.id JOIN memories m ON m.id = em.memory_id"
            f" WHERE {scope_where('e')} AND {_LIVE_M} GROUP BY e.id ORDER BY e.id", scope.as_params())

    def speakers(self, scope: Scope) -> set[str]:
        """Everyone who speaks in the scope's chunks, as written."""
        return {r[0] for r in self.conn.execute(
            f"SELECT DISTINCT speaker FROM chunks WHERE {scope_where('chunks')} AND speaker IS NOT NULL", scope.as_params())}

    def mention_contexts(self, scope: Scope, entity_ids: list[int], *, before: int = 8, each: int | None = None,
                         context: bool = True) -> dict[int, list[dict[str, Any]]]:
        """entity id -> its mentions with up to `before` characters before and one after, cut from the
        chunk that holds each (offset 0 = the chunk starts with the mention), and `context`: the
        text around it; `each`: only an entity's first that many mentions (by memory), read through
        the mentions index, so a name mentioned 100,000 times costs what one mentioned `each` times
        does. (Each cut reads the chunk's whole text again, which for a long turn is most of it.)"""
        out: dict[int, list[dict[str, Any]]] = {}
        around = (', substr(c.text, max(1, em.start - c.start - 40 + 1), min(120, em."end" - c.start + 40)) AS context'
                  if context else "")
        select = ("SELECT em.entity_id, em.memory_id, em.chunk_id, em.start - c.start AS offset,"
                  " substr(c.text, max(1, em.start - c.start - ? + 1), min(?, em.start - c.start)) AS before,"
                  f' substr(c.text, em."end" - c.start + 1, 1) AS after{around}'
                  " FROM entity_mentions em JOIN chunks c ON c.id = em.chunk_id"
                  f" WHERE {scope_where('em')}")
        if each:
            for eid in entity_ids:
                rows = dict_rows(self.conn, select + " AND em.entity_id = ? ORDER BY em.memory_id LIMIT ?",
                                 (before, before, *scope.as_params(), eid, each))
                if rows:
                    out[eid] = rows
            return out
        for part in _parts(entity_ids):
            for r in dict_rows(self.conn, select + f" AND em.entity_id IN ({','.join('?' * len(part))}) ORDER BY em.id",
                               (before, before, *scope.as_params(), *part)):
                out.setdefault(r["entity_id"], []).append(r)
        return out

    # expiry -----------------------------------------------------------------------------------
    def overdue_memories(self, scope: Scope, now: str, *, limit: int, offset: int) -> tuple[int, list[dict[str, Any]]]:
        """Live memories whose forget_after (the fact's, else the memory's) has passed and that are
        pinned, or are a fact still current, or are not a fact (nothing expires them)."""
        where = (" FROM memories m LEFT JOIN facts f ON f.memory_id = m.id"
                 f" WHERE {scope_where('m')} AND {_LIVE_M} AND coalesce(f.forget_after, m.forget_after) <= ?"
                 f" AND (m.pinned = 1 OR f.id IS NULL OR f.status IN {_CURRENT})")
        params = (*scope.as_params(), now)
        total = self.conn.execute("SELECT count(*)" + where, params).fetchone()[0]
        rows = dict_rows(
            self.conn,
            "SELECT m.id, m.kind, m.text, m.pinned, coalesce(f.forget_after, m.forget_after) AS forget_after,"
            " f.id AS fact_id, f.status" + where + " ORDER BY forget_after, m.id LIMIT ? OFFSET ?",
            (*params, limit, offset))
        return total, rows

    # trend ------------------------------------------------------------------------------------
    def health_trend(self, scope: Scope, *, limit: int = 50) -> list[dict[str, Any]]:
        """The latest recorded runs, oldest first: {id, taken_at, trigger, counts}."""
        rows = dict_rows(self.conn, f"SELECT id, taken_at, occasion AS trigger, counts FROM health_counts WHERE {scope_where()}"
                         " ORDER BY id DESC LIMIT ?", (*scope.as_params(), limit))
        for r in rows:
            r["counts"] = json.loads(r["counts"])
        return rows[::-1]

    def rebuild_fts(self) -> None:
        """Rebuild both full-text indexes from their content tables (derived data: nothing is lost)."""
        with self.db.write() as conn:  # type: ignore[attr-defined]
            for table in ("memories_fts", "chunks_fts"):
                apsw.fts5.Table(conn, table).command_rebuild()  # type: ignore[no-untyped-call]  # apsw's own


class HealthWrites:
    """Mixed into store.Writer: `self.conn`, `self._sp` and `self.now` exist."""

    conn: Any
    _sp: tuple[str, str, str, str]
    now: str

    def record_health_counts(self, trigger: str, counts: dict[str, int], taken_at: str | None = None) -> int:
        """Keep one run's counts for the trend; taken_at is the run's own time (default: now)."""
        self.conn.execute(
            "INSERT INTO health_counts(user_id, agent_id, scope_type, scope_id, taken_at, occasion, counts)"
            " VALUES (?,?,?,?,?,?,?)", (*self._sp, taken_at or self.now, trigger, json.dumps(counts, sort_keys=True)))
        rid = self.conn.last_insert_rowid()
        self.conn.execute(
            f"DELETE FROM health_counts WHERE {scope_where()} AND id < (SELECT min(id) FROM (SELECT id FROM"
            f" health_counts WHERE {scope_where()} ORDER BY id DESC LIMIT ?))", (*self._sp, *self._sp, TREND_KEEP))
        return rid

    def delete_entity(self, entity_id: int) -> None:
        self.conn.execute(f"DELETE FROM entity_mentions WHERE entity_id = ? AND {scope_where()}", (entity_id, *self._sp))
        self.conn.execute(f"DELETE FROM entities WHERE id = ? AND {scope_where()}", (entity_id, *self._sp))


def _parts(ids: list[int], size: int = 500) -> Iterator[list[int]]:
    ids = list(ids)
    for i in range(0, len(ids), size):
        yield ids[i:i + size]


__all__ = ["HealthReads", "HealthWrites", "TREND_KEEP"]
