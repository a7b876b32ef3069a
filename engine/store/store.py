"""The store API: every read and every write names a Scope. All SQL lives here (and in schema).

Writes go through `Store.writer(scope)`, one transaction per logical change (for ingestion:
one per document), under the process-wide single-writer lock of Database.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import apsw
import numpy as np

from ..records import Chunk, Document, Embedding, Memory, Source, from_dict
from ..scope import Scope
from ..timeutil import now_iso
from .browse import BrowseReads
from .db import Database
from .facts import FactReads, FactWrites
from .graph import GraphReads
from .health import HealthReads, HealthWrites
from .recall import BulkWrites, RecallReads, RecallWrites
from .sql import SCOPE_COLUMNS, dict_rows, scope_where

T = TypeVar("T")

# A row's scope as one string, and the first and last scope of the memories in index order
# (sole_scope), built from the scope columns like every scope predicate (sql.py).
_SCOPE_KEY = " || char(0) || ".join(SCOPE_COLUMNS)
_SCOPE_BOUNDS = (f"SELECT (SELECT {_SCOPE_KEY} FROM memories ORDER BY {', '.join(SCOPE_COLUMNS)} LIMIT 1),"
                 f" (SELECT {_SCOPE_KEY} FROM memories ORDER BY {' DESC, '.join(SCOPE_COLUMNS)} DESC LIMIT 1)")


def _one(conn: apsw.Connection, cls: type[T], sql: str, params: tuple[Any, ...]) -> T | None:
    rows = dict_rows(conn, sql, params)
    return from_dict(cls, rows[0]) if rows else None


def _all(conn: apsw.Connection, cls: type[T], sql: str, params: tuple[Any, ...]) -> list[T]:
    return [from_dict(cls, r) for r in dict_rows(conn, sql, params)]


class Writer(FactWrites, RecallWrites, BulkWrites, HealthWrites):
    """Granular writes inside one open transaction, all stamped with one scope."""

    def __init__(self, conn: apsw.Connection, scope: Scope) -> None:
        self.conn = conn
        self.scope = scope
        self._sp = scope.as_params()
        self.now = now_iso()
        self.usage: dict[int, int] = {}

    # documents -----------------------------------------------------------------------------
    def insert_document(
        self, *, source_type: str, uri: str | None, external_id: str | None, title: str | None,
        text: str, content_hash: str, trust: str, source_time: str | None, version: int,
        previous_id: int | None, meta: dict[str, Any],
    ) -> int:
        self.conn.execute(
            "INSERT INTO documents(user_id, agent_id, scope_type, scope_id, source_type, uri,"
            " external_id, title, text, content_hash, trust, source_time, ingested_at, version,"
            " previous_id, meta) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*self._sp, source_type, uri, external_id, title, text, content_hash, trust,
             source_time, self.now, version, previous_id, json.dumps(meta, sort_keys=True)),
        )
        return self.conn.last_insert_rowid()

    def mark_document_replaced(self, document_id: int) -> None:
        self.conn.execute(
            f"UPDATE documents SET replaced_at = ? WHERE id = ? AND {scope_where()}",
            (self.now, document_id, *self._sp),
        )

    # chunks --------------------------------------------------------------------------------
    def insert_chunk(
        self, *, document_id: int, ordinal: int, kind: str, start: int, end: int, text: str,
        content_hash: str, speaker: str | None, role: str | None, message_id: str | None,
        source_time: str | None, trust: str, quotes_chunk_id: int | None, meta: dict[str, Any],
    ) -> int:
        self.conn.execute(
            'INSERT INTO chunks(user_id, agent_id, scope_type, scope_id, document_id, ordinal, kind,'
            ' start, "end", text, content_hash, speaker, role, message_id, source_time, trust,'
            " quotes_chunk_id, meta) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*self._sp, document_id, ordinal, kind, start, end, text, content_hash, speaker, role,
             message_id, source_time, trust, quotes_chunk_id, json.dumps(meta, sort_keys=True)),
        )
        return self.conn.last_insert_rowid()

    def add_chunk_times(self, chunk_id: int, rows: list[tuple[Any, ...]]) -> None:
        """rows: (start, end, text, kind, window_start, window_end), offsets inside the chunk."""
        self.conn.executemany(
            'INSERT INTO chunk_times(user_id, agent_id, scope_type, scope_id, chunk_id, start, "end", text, kind,'
            " window_start, window_end) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [(*self._sp, chunk_id, *r) for r in rows])

    def set_document_hash(self, document_id: int, content_hash: str) -> None:
        self.conn.execute(f"UPDATE documents SET content_hash = ? WHERE id = ? AND {scope_where()}",
                          (content_hash, document_id, *self._sp))

    def discard_partial_documents(self, uri: str | None, external_id: str | None) -> int:
        """Remove versions of this source whose writing never finished (content hash 'partial:...'),
        with their chunks and the episodes only they supported. Returns how many went."""
        ids = [r[0] for r in self.conn.execute(
            f"SELECT id FROM documents WHERE {scope_where()} AND uri IS ? AND external_id IS ?"
            " AND content_hash LIKE 'partial:%'", (*self._sp, uri, external_id))]
        for doc_id in ids:
            chunk_ids = [r[0] for r in self.conn.execute(
                f"SELECT id FROM chunks WHERE document_id = ? AND {scope_where()}", (doc_id, *self._sp))]
            for cid in chunk_ids:
                for mid in self.delete_chunk(cid):
                    if self.source_count(mid) == 0:
                        self.delete_memory(mid)
            self.conn.execute(f"DELETE FROM documents WHERE id = ? AND {scope_where()}", (doc_id, *self._sp))
        return len(ids)

    def move_chunk(self, chunk_id: int, *, document_id: int, ordinal: int, start: int, end: int,
                   quotes_chunk_id: int | None, meta: dict[str, Any], source_time: str | None) -> None:
        (old_start,) = self.conn.execute(
            f"SELECT start FROM chunks WHERE id = ? AND {scope_where()}", (chunk_id, *self._sp)).fetchone()
        self.move_chunks(document_id, [(chunk_id, old_start, ordinal, start, end, quotes_chunk_id, meta, source_time)])

    def move_chunks(self, document_id: int, rows: list[tuple[Any, ...]]) -> None:
        """Chunks whose text survives into a new document version keep their ids and memories.

        rows: (chunk_id, old_start, ordinal, start, end, quotes_chunk_id, meta, source_time). The
        source spans and entity mentions inside each chunk move with it, keeping their offset
        within the chunk."""
        sp = self._sp
        self.conn.executemany(
            'UPDATE chunks SET document_id = ?, ordinal = ?, start = ?, "end" = ?, quotes_chunk_id = ?,'
            f" meta = ?, source_time = ? WHERE id = ? AND {scope_where()}",
            [(document_id, ordinal, start, end, quotes, json.dumps(meta, sort_keys=True), when, cid, *sp)
             for cid, _old, ordinal, start, end, quotes, meta, when in rows])
        self.conn.executemany(
            'UPDATE memory_sources SET start = start + ?, "end" = "end" + ?, document_id = ?'
            f" WHERE chunk_id = ? AND {scope_where()}",
            [(start - old, start - old, document_id, cid, *sp) for cid, old, _o, start, *_ in rows])
        self.conn.executemany(
            'UPDATE entity_mentions SET start = start + ?, "end" = "end" + ?'
            f" WHERE chunk_id = ? AND {scope_where()}",
            [(start - old, start - old, cid, *sp) for cid, old, _o, start, *_ in rows if start != old])

    def delete_chunk(self, chunk_id: int) -> list[int]:
        """Remove a chunk and its source links; return the memories that lost a source."""
        mids = [r[0] for r in self.conn.execute(
            f"SELECT DISTINCT memory_id FROM memory_sources WHERE chunk_id = ? AND {scope_where()}",
            (chunk_id, *self._sp))]
        self.conn.execute(f"DELETE FROM memory_sources WHERE chunk_id = ? AND {scope_where()}", (chunk_id, *self._sp))
        self.conn.execute(
            f"UPDATE entity_mentions SET chunk_id = NULL, start = NULL, \"end\" = NULL WHERE chunk_id = ? AND {scope_where()}",
            (chunk_id, *self._sp))
        self.conn.execute(f"UPDATE chunks SET quotes_chunk_id = NULL WHERE quotes_chunk_id = ? AND {scope_where()}",
                          (chunk_id, *self._sp))
        self.conn.execute(f"UPDATE memory_relations SET evidence_chunk_id = NULL WHERE evidence_chunk_id = ? AND {scope_where()}",
                          (chunk_id, *self._sp))
        self.conn.execute(f"DELETE FROM chunks WHERE id = ? AND {scope_where()}", (chunk_id, *self._sp))
        return mids

    # memories ------------------------------------------------------------------------------
    def insert_memory(
        self, *, kind: str, text: str, trust: str, content_hash: str, source_time: str | None,
        category: str | None = None, importance: float = 0.5, confidence: float = 1.0,
        is_static: bool = False, forget_after: str | None = None,
        extraction_method: str | None = None, external_ref: str | None = None,
    ) -> int:
        self.conn.execute(
            "INSERT INTO memories(user_id, agent_id, scope_type, scope_id, kind, text, category,"
            " importance, confidence, trust, is_static, source_time, created_at, updated_at,"
            " forget_after, content_hash, extraction_method, external_ref)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*self._sp, kind, text, category, importance, confidence, trust, int(is_static),
             source_time, self.now, self.now, forget_after, content_hash, extraction_method,
             external_ref),
        )
        return self.conn.last_insert_rowid()

    def source_count(self, memory_id: int) -> int:
        return self.conn.execute(
            f"SELECT count(*) FROM memory_sources WHERE memory_id = ? AND {scope_where()}",
            (memory_id, *self._sp)).fetchone()[0]

    def memory_kind(self, memory_id: int) -> str | None:
        row = self.conn.execute(f"SELECT kind FROM memories WHERE id = ? AND {scope_where()}",
                                (memory_id, *self._sp)).fetchone()
        return row[0] if row else None

    def delete_memory(self, memory_id: int) -> None:
        """Hard delete of an unsupported episode (its text lives on in the older document)."""
        p = (memory_id, *self._sp)
        self.conn.execute(f"DELETE FROM embeddings WHERE owner_type = 'memory' AND owner_id = ? AND {scope_where()}", p)
        self.conn.execute(f"DELETE FROM entity_mentions WHERE memory_id = ? AND {scope_where()}", p)
        self.conn.execute(f"DELETE FROM memory_sources WHERE memory_id = ? AND {scope_where()}", p)
        self.conn.execute(f"DELETE FROM memories WHERE id = ? AND {scope_where()}", p)

    def forget_memory(self, memory_id: int, reason: str) -> None:
        self.conn.execute(
            f"UPDATE memories SET forgotten_at = ?, forget_reason = ?, updated_at = ? WHERE id = ? AND {scope_where()}"
            " AND forgotten_at IS NULL",
            (self.now, reason, self.now, memory_id, *self._sp))

    def add_source(self, *, memory_id: int, chunk_id: int, document_id: int, start: int, end: int,
                   relevance: float = 1.0) -> int | None:
        """The new source row's id, or None when the memory already cites exactly this span."""
        self.conn.execute(
            'INSERT OR IGNORE INTO memory_sources(user_id, agent_id, scope_type, scope_id, memory_id,'
            ' chunk_id, document_id, start, "end", relevance, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)',
            (*self._sp, memory_id, chunk_id, document_id, start, end, relevance, self.now))
        return self.conn.last_insert_rowid() if self.conn.changes() else None

    # embeddings ----------------------------------------------------------------------------
    def put_embeddings(self, owner_type: str, rows: list[tuple[int, np.ndarray]], *, provider: str,
                       model: str, dims: int, embed_ms: float | None) -> None:
        self.conn.executemany(
            "INSERT INTO embeddings(user_id, agent_id, scope_type, scope_id, owner_type, owner_id,"
            " vector, provider, model, dims, created_at, embed_ms, stale) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,0)"
            " ON CONFLICT(owner_type, owner_id) DO UPDATE SET vector = excluded.vector,"
            " provider = excluded.provider, model = excluded.model, dims = excluded.dims,"
            " created_at = excluded.created_at, embed_ms = excluded.embed_ms, stale = 0",
            [(*self._sp, owner_type, oid, np.asarray(vec, dtype=np.float32).tobytes(), provider, model,
              dims, self.now, embed_ms) for oid, vec in rows],
        )

    # entities ------------------------------------------------------------------------------
    def upsert_entity(self, name: str, canonical: str, kind: str) -> int:
        return self.upsert_entity_created(name, canonical, kind)[0]

    def upsert_entity_created(self, name: str, canonical: str, kind: str) -> tuple[int, bool]:
        row = self.conn.execute(
            f"SELECT id FROM entities WHERE {scope_where()} AND canonical = ? AND kind = ?",
            (*self._sp, canonical, kind)).fetchone()
        if row:
            return row[0], False
        self.conn.execute(
            "INSERT INTO entities(user_id, agent_id, scope_type, scope_id, name, canonical, kind, created_at)"
            " VALUES (?,?,?,?,?,?,?,?)", (*self._sp, name, canonical, kind, self.now))
        return self.conn.last_insert_rowid(), True

    def add_mentions(self, rows: list[tuple[int, int, int | None, int | None, int | None]]) -> None:
        """rows: (entity_id, memory_id, chunk_id, start, end) with document offsets."""
        self.conn.executemany(
            'INSERT INTO entity_mentions(user_id, agent_id, scope_type, scope_id, entity_id, memory_id,'
            ' chunk_id, start, "end") VALUES (?,?,?,?,?,?,?,?,?)',
            [(*self._sp, *r) for r in rows])

    # meta ----------------------------------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                          (key, value))


class Store(FactReads, RecallReads, GraphReads, BrowseReads, HealthReads):
    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, readonly: bool = False) -> None:
        self.db = Database(path, create=create, readonly=readonly)
        self.path = self.db.path
        self._meta_local = threading.local()  # what recall keeps per thread (RecallReads._kept)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> apsw.Connection:  # the mixins' `conn`: this thread's connection
        return self.db.connection()

    @contextlib.contextmanager
    def writer(self, scope: Scope, *, durable: bool = True, diagnostic: bool = False) -> Iterator[Writer]:
        if not isinstance(scope, Scope):
            raise TypeError("writer() needs a Scope")
        # durable=False, diagnostic=True: see Database.write
        nested = self.db.connection().in_transaction
        with self.db.write(durable=durable, diagnostic=diagnostic) as conn:
            w = Writer(conn, scope)
            yield w
            if w.usage and nested:  # the caller's transaction may yet roll back: a change of the data
                self.db.count_as_data()
        if w.usage and not nested:  # committed: the kept rows take the new counts
            self._note_usage(scope, w.usage)

    def llm_recorder(self, scope: Scope, *, redact: bool = False) -> Callable[[Any], None]:
        """A recorder for LLMClient: each model request becomes a row of llm_calls in `scope`.
        redact keeps no request or reply text (an agent's query is never stored), only the
        hash, the outcome, tokens and latency."""
        def record(rec: Any) -> None:  # an engine.llm.LLMCallRecord (llm/ sits beside store/)
            if redact:
                rec = dataclasses.replace(rec, request_json=None, response_text=None)
            with self.writer(scope) as w:
                w.record_llm_call(rec)
        return record

    # meta ----------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.db.write() as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                         (key, value))

    # documents -----------------------------------------------------------------------------
    def latest_document(self, scope: Scope, uri: str | None, external_id: str | None) -> Document | None:
        return _one(
            self.conn, Document,
            f"SELECT * FROM documents WHERE {scope_where()} AND uri IS ? AND external_id IS ?"
            " AND replaced_at IS NULL AND content_hash NOT LIKE 'partial:%' ORDER BY version DESC LIMIT 1",
            (*scope.as_params(), uri, external_id))

    def document(self, scope: Scope, document_id: int) -> Document | None:
        return _one(self.conn, Document, f"SELECT * FROM documents WHERE id = ? AND {scope_where()}",
                    (document_id, *scope.as_params()))

    def documents(self, scope: Scope, *, limit: int = 1000, offset: int = 0) -> list[Document]:
        return _all(self.conn, Document,
                    f"SELECT * FROM documents WHERE {scope_where()} ORDER BY id LIMIT ? OFFSET ?",
                    (*scope.as_params(), limit, offset))

    def chunks_of(self, scope: Scope, document_id: int) -> list[Chunk]:
        return _all(self.conn, Chunk,
                    f"SELECT * FROM chunks WHERE document_id = ? AND {scope_where()} ORDER BY ordinal",
                    (document_id, *scope.as_params()))

    def chunks_between(self, scope: Scope, document_id: int, first: int, last: int) -> list[Chunk]:
        """The chunks with ordinals first..last: an extraction window reads its own turns only
        (reading the whole document per window made extraction quadratic in its length)."""
        return _all(self.conn, Chunk,
                    f"SELECT * FROM chunks WHERE document_id = ? AND ordinal BETWEEN ? AND ? AND {scope_where()}"
                    " ORDER BY ordinal", (document_id, first, last, *scope.as_params()))

    def chunk(self, scope: Scope, chunk_id: int) -> Chunk | None:
        return _one(self.conn, Chunk, f"SELECT * FROM chunks WHERE id = ? AND {scope_where()}",
                    (chunk_id, *scope.as_params()))

    def memory(self, scope: Scope, memory_id: int) -> Memory | None:
        return _one(self.conn, Memory, f"SELECT * FROM memories WHERE id = ? AND {scope_where()}",
                    (memory_id, *scope.as_params()))

    def memories_of_chunk(self, scope: Scope, chunk_id: int) -> list[int]:
        return [r[0] for r in self.conn.execute(
            f"SELECT memory_id FROM memory_sources WHERE chunk_id = ? AND {scope_where()} ORDER BY memory_id",
            (chunk_id, *scope.as_params()))]

    def sources_of(self, scope: Scope, memory_id: int) -> list[Source]:
        return _all(self.conn, Source,
                    f"SELECT * FROM memory_sources WHERE memory_id = ? AND {scope_where()} ORDER BY id",
                    (memory_id, *scope.as_params()))

    def mentions_of(self, scope: Scope, memory_id: int) -> list[dict[str, Any]]:
        return dict_rows(self.conn,
                      'SELECT e.id AS entity_id, e.name, e.kind, m.chunk_id, m.start, m."end"'
                      " FROM entity_mentions m JOIN entities e ON e.id = m.entity_id"
                      f" WHERE m.memory_id = ? AND {scope_where('m')} ORDER BY m.start", (memory_id, *scope.as_params()))

    def embedding_of(self, scope: Scope, owner_type: str, owner_id: int) -> Embedding | None:
        row = self.conn.execute("SELECT provider, model, dims, created_at, embed_ms, stale, vector FROM embeddings"
                                f" WHERE owner_type = ? AND owner_id = ? AND {scope_where()}",
                                (owner_type, owner_id, *scope.as_params())).fetchone()
        if row is None:
            return None
        provider, model, dims, created_at, embed_ms, stale, blob = row
        return Embedding(provider, model, dims, created_at, embed_ms, stale, np.frombuffer(blob, dtype=np.float32))

    # search (the recall pipeline builds on these) --------------------------------------------
    def sole_scope(self, scope: Scope) -> bool:
        """Is every memory of the store in `scope`? (The first and last scope in index order.)"""
        key = "\x00".join(scope.as_params())
        first, last = self.conn.execute(_SCOPE_BOUNDS).fetchone() or (None, None)
        return bool(first == key and last == key)

    def fts_memories(self, scope: Scope, match: str, limit: int = 50, *, kind: str | None = None
                     ) -> list[tuple[int, float]]:
        """(memory_id, bm25) best first for an FTS5 MATCH expression, inside the scope."""
        sql = ("SELECT m.id, bm25(memories_fts) AS score FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
               f" WHERE memories_fts MATCH ? AND {scope_where('m')}")
        params: tuple[Any, ...] = (match, *scope.as_params())
        if kind is not None:
            sql += " AND m.kind = ?"
            params += (kind,)
        with self.conn:  # one snapshot: the scope check below and the search see the same rows
            if kind is None and self.sole_scope(scope):
                # Every memory is in this scope (a benchmark container, a one-agent store): the
                # scope check per match, a row lookup each and three quarters of this query's time
                # at 100k memories, would keep every row. The matches reach the sort in the same
                # order either way, so the result is the same, ties included.
                rows: list[tuple[Any, ...]] = self.conn.execute(
                    "SELECT rowid, bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH ?"
                    " ORDER BY score LIMIT ?", (match, limit)).fetchall()
            else:
                rows = self.conn.execute(sql + " ORDER BY score LIMIT ?", (*params, limit)).fetchall()
        return [(r[0], r[1]) for r in rows]

    def fts_matches(self, scope: Scope, match: str, memory_id: int) -> bool:
        """Does this one memory match the FTS expression? (No ranking of every other match.)"""
        return self.conn.execute(
            "SELECT 1 FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
            f" WHERE memories_fts MATCH ? AND memories_fts.rowid = ? AND {scope_where('m')}",
            (match, memory_id, *scope.as_params())).fetchone() is not None

    # accounting ----------------------------------------------------------------------------
    def counts(self, scope: Scope) -> dict[str, int]:
        sp = scope.as_params()
        out = {}
        for key, sql in (
            ("documents", f"SELECT count(*) FROM documents WHERE {scope_where()} AND replaced_at IS NULL"),
            ("chunks", f"SELECT count(*) FROM chunks WHERE {scope_where()}"),
            ("memories", f"SELECT count(*) FROM memories WHERE {scope_where()}"),
            ("facts", f"SELECT count(*) FROM facts WHERE {scope_where()}"),
            ("open_conflicts", f"SELECT count(*) FROM conflicts WHERE {scope_where()} AND status = 'open'"),
            ("embeddings", f"SELECT count(*) FROM embeddings WHERE {scope_where()}"),
            ("stale_embeddings", f"SELECT count(*) FROM embeddings WHERE {scope_where()} AND stale != 0"),
        ):
            (out[key],) = self.conn.execute(sql, sp).fetchone() or (0,)
        return out

    def scopes(self) -> list[Scope]:
        """Every scope that holds documents or memories (for the inspector's scope picker)."""
        rows = self.conn.execute(
            "SELECT DISTINCT user_id, agent_id, scope_type, scope_id FROM memories"
            " UNION SELECT DISTINCT user_id, agent_id, scope_type, scope_id FROM documents ORDER BY 1, 2, 3, 4")
        return [Scope(*r) for r in rows]

    def scope_sizes(self) -> list[tuple[Scope, int]]:
        """Every scope that holds documents or memories, with its memory count (largest first)."""
        counts = dict(((r[0], r[1], r[2], r[3]), r[4]) for r in self.conn.execute(
            "SELECT user_id, agent_id, scope_type, scope_id, count(*) FROM memories"
            " GROUP BY user_id, agent_id, scope_type, scope_id"))
        sizes = [(s, counts.get(s.as_params(), 0)) for s in self.scopes()]
        return sorted(sizes, key=lambda x: -x[1])

    # embeddings upkeep ----------------------------------------------------------------------
    def mark_stale_embeddings(self, provider: str, model: str) -> int:
        """Vectors from any other provider/model are stale; returns how many were marked."""
        with self.db.write() as conn:
            conn.execute("UPDATE embeddings SET stale = 1 WHERE stale = 0 AND (provider != ? OR model != ?)",
                         (provider, model))
            return conn.changes()

    def has_facts(self) -> bool:
        """Any fact in any scope."""
        return self.conn.execute("SELECT EXISTS (SELECT 1 FROM facts)").fetchone() == (1,)

    def mark_fact_embeddings_outdated(self) -> int:
        """Every fact's vector is outdated (stale = 2): what a fact is embedded from changed. Search
        keeps using it until the re-embed redoes it. Returns how many were marked."""
        with self.db.write() as conn:
            conn.execute("UPDATE embeddings SET stale = 2 WHERE stale = 0 AND owner_type = 'memory'"
                         " AND owner_id IN (SELECT memory_id FROM facts)")
            return conn.changes()

    def stale_embedding_batches(self, limit: int) -> Iterator[list[tuple[Scope, str, int, str]]]:
        """Batches of (scope, owner_type, owner_id, text) whose vectors to redo, any scope
        (maintenance task): unusable ones first (the partial index finds them), then outdated
        facts, reached through the facts table from where the last batch stopped. Each batch is
        read when the previous one has been handled, so redone vectors do not come back."""
        after = 0  # outdated facts up to this memory id have been handed out
        while True:
            rows = list(self.conn.execute(
                "SELECT e.user_id, e.agent_id, e.scope_type, e.scope_id, e.owner_type, e.owner_id,"
                " COALESCE(m.text, c.text) FROM embeddings e"
                " LEFT JOIN memories m ON e.owner_type = 'memory' AND m.id = e.owner_id"
                " LEFT JOIN chunks c ON e.owner_type = 'chunk' AND c.id = e.owner_id"
                " WHERE e.stale = 1 ORDER BY e.id LIMIT ?", (limit,)))
            if len(rows) < limit:  # only facts are ever outdated
                outdated = list(self.conn.execute(
                    "SELECT e.user_id, e.agent_id, e.scope_type, e.scope_id, e.owner_type, e.owner_id, m.text"
                    " FROM facts f JOIN embeddings e ON e.owner_type = 'memory' AND e.owner_id = f.memory_id"
                    " JOIN memories m ON m.id = f.memory_id WHERE f.memory_id > ? AND e.stale = 2"
                    " ORDER BY f.memory_id LIMIT ?", (after, limit - len(rows))))
                if outdated:
                    after = outdated[-1][5]
                rows += outdated
            if not rows:
                return
            yield [(Scope(r[0], r[1], r[2], r[3]), r[4], r[5], r[6] or "") for r in rows]

    # export --------------------------------------------------------------------------------
    def export(self, scope: Scope) -> dict[str, list[dict[str, Any]]]:
        sp = scope.as_params()
        c = self.conn
        out = {
            "documents": dict_rows(c, f"SELECT * FROM documents WHERE {scope_where()} ORDER BY id", sp),
            "chunks": dict_rows(c, f"SELECT * FROM chunks WHERE {scope_where()} ORDER BY id", sp),
            "memories": dict_rows(c, f"SELECT * FROM memories WHERE {scope_where()} ORDER BY id", sp),
            "facts": dict_rows(c, f"SELECT * FROM facts WHERE {scope_where()} ORDER BY id", sp),
            "relations": dict_rows(c, f"SELECT * FROM memory_relations WHERE {scope_where()} ORDER BY id", sp),
            "sources": dict_rows(c, f"SELECT * FROM memory_sources WHERE {scope_where()} ORDER BY id", sp),
            "entities": dict_rows(c, f"SELECT * FROM entities WHERE {scope_where()} ORDER BY id", sp),
        }
        for key in ("documents", "chunks"):
            for row in out[key]:
                row["meta"] = json.loads(row["meta"])
        return out
