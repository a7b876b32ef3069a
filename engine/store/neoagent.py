"""SQL for importing a NeoAgent database (NEOAGENT-SCHEMA.md): reading it, and writing memlens.

Two halves, both plain SQL and no mapping logic (that lives in engine/importers/neoagent.py):

* `NeoAgentSource` reads a NeoAgent file's rows per owner (integer user id, text agent id with
  `''`/NULL meaning "no agent") from a private copy taken consistently while NeoAgent may be
  running (engine/store/snapshot.py): the file and its side files are never written, created or
  locked, and every read of one import sees the one state that copy holds.
* `OwnerWrite` writes one owner's planned rows into memlens inside ONE transaction (a crash
  loses at most the owner in flight; re-importing finishes it), keyed by external refs so that
  re-importing is idempotent: `memories.external_ref` / `facts.external_ref`, the document's
  `external_id`, `neoagent_ref` in chunk meta and trace params, natural keys for sources,
  relations, entities and mentions, and per-owner row hashes in the `meta` table so a row
  NeoAgent did not change is left alone (curation done in memlens since is kept).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from ..changes import ChangeSet
from ..errors import BadInput
from ..scope import Scope
from ..timeutil import now_iso
from .facts import FACT_COLUMNS
from .schema import APPLICATION_ID
from .snapshot import Snapshot, private_copy
from .sql import dict_rows
from .store import Store, Writer

# -- the NeoAgent side ---------------------------------------------------------------------------

# The columns we read, per table (NEOAGENT-SCHEMA.md). Columns a given NeoAgent version lacks are
# read as NULL; the `required` ones must exist for the table to be read at all.
TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "memories": (
        ("id", "user_id", "agent_id", "category", "scope_type", "scope_id", "source_type", "source_id",
         "source_label", "stale_after_days", "metadata_json", "content", "summary", "importance", "confidence",
         "memory_hash", "embedding_provider", "embedding_model", "embedding_dimensions", "embedded_at",
         "access_count", "memory_strength", "last_accessed_at", "pinned", "archived", "created_at", "updated_at"),
        ("id", "user_id", "agent_id", "content")),
    "memory_facts": (
        ("id", "memory_id", "user_id", "agent_id", "subject", "predicate", "object", "category", "confidence",
         "event_time", "valid_from", "valid_to", "learned_at", "invalidated_at", "status", "supersedes_fact_id",
         "metadata_json", "created_at", "updated_at"),
        ("id", "memory_id", "subject", "predicate", "object")),
    "memory_entities": (
        ("id", "user_id", "agent_id", "entity_key", "name", "kind", "aliases_json", "summary", "mention_count",
         "first_seen_at", "last_seen_at", "metadata_json"),
        ("id", "user_id", "name")),
    "memory_entity_mentions": (
        ("entity_id", "memory_id", "user_id", "agent_id", "created_at", "in_sentence"),
        ("entity_id", "memory_id")),
    "memory_relations": (
        ("id", "user_id", "agent_id", "from_memory_id", "to_memory_id", "relation_type", "confidence",
         "metadata_json", "created_at"),
        ("user_id", "from_memory_id", "to_memory_id", "relation_type")),
    "memory_ingestion_documents": (
        ("id", "user_id", "agent_id", "source_type", "normalized_type", "provider_key", "connection_id",
         "external_object_id", "source_account", "title", "content", "summary", "salience", "source_timestamp",
         "metadata_json", "created_at", "updated_at"),
        ("id", "user_id", "content")),
    "memory_source_chunks": (
        ("id", "document_id", "user_id", "agent_id", "chunk_index", "char_start", "char_end", "content",
         "content_hash", "metadata_json", "created_at", "updated_at"),
        ("id", "document_id", "char_start", "char_end", "content")),
    "memory_source_links": (
        ("memory_id", "chunk_id", "source_document_id", "source_timestamp", "relevance_score",
         "extraction_method", "metadata_json", "created_at"),
        ("memory_id", "chunk_id")),
    "memory_retrieval_events": (
        ("id", "user_id", "agent_id", "query_hash", "scope_type", "scope_id", "requested_k", "candidate_count",
         "semantic_candidate_count", "lexical_candidate_count", "entity_candidate_count",
         "relation_candidate_count", "result_count", "result_ids_json", "context_tokens_estimate", "latency_ms",
         "created_at"),
        ("id", "user_id")),
}

# NeoAgent tables that hold memory but that memlens has no place for (reported with their row counts).
NOT_IMPORTED = ("core_memory", "assistant_self_state", "materialized_knowledge_views", "agent_memory_write_queue",
                "memory_ingestion_jobs", "memory_retrieval_enhancements", "memory_embedding_bands")

_OWNER = "user_id = ? AND coalesce(agent_id, '') = ?"


@dataclass(slots=True)
class OwnerRows:
    """Everything one NeoAgent owner (user, agent) holds, as plain dicts straight from SQL."""

    user_id: int | str
    agent_id: str  # '' = no agent
    memories: list[dict[str, Any]] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, Any]] = field(default_factory=list)
    entities: list[dict[str, Any]] = field(default_factory=list)
    mentions: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def row_count(self) -> int:
        return sum(len(getattr(self, k)) for k in ("memories", "facts", "documents", "chunks", "links", "relations",
                                                    "entities", "mentions", "events"))


def _sqlite_header(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(100)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read ({exc.strerror or exc})") from None


class NeoAgentSource:
    """A NeoAgent SQLite file, read from a consistent private copy. Raises BadInput for anything that
    is not one, SourceBusy (a Busy: "locked, try again") when NeoAgent kept it locked for `wait` s.

    The user's file and its side files are only ever opened O_RDONLY (engine/store/snapshot.py);
    SQLite opens the copy, inside one read transaction for the whole import."""

    def __init__(self, path: str | os.PathLike[str], *, wait: float = 5.0,
                 on_copied: Callable[[str, int], None] | None = None) -> None:
        self.path = Path(path)
        self.conn: apsw.Connection | None = None
        self.snapshot: Snapshot | None = None
        if not self.path.exists():
            raise BadInput(f"{self.path}: no such file")
        if self.path.is_dir():
            raise BadInput(f"{self.path}: is a directory, not a NeoAgent database")
        head = _sqlite_header(self.path)
        if len(head) < 100 or head[:16] != b"SQLite format 3\x00":
            raise BadInput(f"{self.path}: not a NeoAgent database (not an SQLite file)")
        if struct.unpack(">I", head[68:72])[0] == APPLICATION_ID:
            raise BadInput(f"{self.path}: is a memlens database, not a NeoAgent one")
        self.snapshot = private_copy(self.path, wait=wait, on_copied=on_copied)
        self.mode = "private_copy"
        try:
            # Our own copy: SQLite may recover a -wal or a hot journal here; nothing of it reaches the source.
            self.conn = apsw.Connection(str(self.snapshot.path))
            self.conn.set_busy_timeout(5000)
            self.conn.execute("BEGIN")  # one snapshot for the whole import (nothing else writes the copy)
            self.columns = self._columns()
            is_memlens = self.conn.pragma("application_id") == APPLICATION_ID  # the header may be in the WAL
        except apsw.Error as exc:
            self.close()
            raise BadInput(f"{self.path}: not a readable SQLite database ({exc.__class__.__name__}: {exc})") from None
        if is_memlens:
            self.close()
            raise BadInput(f"{self.path}: is a memlens database, not a NeoAgent one")
        missing = [c for c in TABLES["memories"][1] if c not in self.columns.get("memories", ())]
        if missing:
            self.close()
            what = "no memories table" if "memories" not in self.columns else f"memories lacks {', '.join(missing)}"
            raise BadInput(f"{self.path}: not a NeoAgent database ({what})")
        # Tables present but without the columns we need are reported, not guessed at.
        self.unreadable: dict[str, list[str]] = {}
        for table, (_wanted, required) in TABLES.items():
            have = self.columns.get(table)
            if have is not None:
                lacks = [c for c in required if c not in have]
                if lacks:
                    self.unreadable[table] = lacks

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            try:
                if not conn.getautocommit():
                    conn.execute("ROLLBACK")
            except apsw.Error:
                pass
            conn.close()
            self.conn = None
        if self.snapshot is not None:
            self.snapshot.discard()
            self.snapshot = None

    @property
    def _db(self) -> apsw.Connection:
        if self.conn is None:
            raise BadInput(f"{self.path}: the import source is closed")
        return self.conn

    def __enter__(self) -> NeoAgentSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # schema -------------------------------------------------------------------------------------
    def _columns(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for (name,) in self._db.execute("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view')"):
            out[name] = {r[1] for r in self._db.execute(f'PRAGMA table_info("{name}")')}
        return out

    def has(self, table: str) -> bool:
        return table in self.columns and table not in self.unreadable

    def missing_tables(self) -> list[str]:
        return [t for t in TABLES if t not in self.columns]

    def _select(self, table: str, alias: str = "") -> str:
        wanted, _ = TABLES[table]
        have = self.columns[table]
        pre = f"{alias}." if alias else ""
        return ", ".join(f'{pre}"{c}"' if c in have else f'NULL AS "{c}"' for c in wanted)

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        return dict_rows(self._db, sql, params)

    # owners ----------------------------------------------------------------------------------------
    def owners(self) -> list[tuple[Any, str]]:
        """Every (user id, agent id or '') that holds memories, documents, entities or retrieval events."""
        parts = [f"SELECT user_id, coalesce(agent_id, '') FROM {t} WHERE coalesce(user_id, '') != ''"
                 for t in ("memories", "memory_ingestion_documents", "memory_entities", "memory_retrieval_events",
                           "memory_relations")
                 if self.has(t) and "agent_id" in self.columns[t]]
        rows = self._db.execute(" UNION ".join(parts)).fetchall()
        return sorted({(r[0], str(r[1])) for r in rows}, key=lambda o: (str(o[0]), o[1]))

    def ownerless_counts(self) -> dict[str, int]:
        """Rows whose owner columns are NULL (they belong to nobody and cannot be scoped)."""
        out = {}
        for t in ("memories", "memory_ingestion_documents", "memory_entities", "memory_retrieval_events",
                  "memory_relations"):
            if self.has(t):
                (n,) = self._db.execute(f"SELECT count(*) FROM {t} WHERE coalesce(user_id, '') = ''").fetchone() or (0,)
                if n:
                    out[t] = n
        return out

    def owner_rows(self, user_id: Any, agent_id: str) -> OwnerRows:
        p = (user_id, agent_id)
        rows = OwnerRows(user_id, agent_id)
        rows.memories = self._rows(f"SELECT {self._select('memories')} FROM memories WHERE {_OWNER} ORDER BY rowid", p)
        m_owner = "m.user_id = ? AND coalesce(m.agent_id, '') = ?"
        if self.has("memory_facts"):
            rows.facts = self._rows(
                f"SELECT {self._select('memory_facts', 'f')} FROM memory_facts f JOIN memories m ON m.id = f.memory_id"
                f" WHERE {m_owner} ORDER BY f.rowid", p)
        if self.has("memory_ingestion_documents"):
            rows.documents = self._rows(
                f"SELECT {self._select('memory_ingestion_documents')} FROM memory_ingestion_documents"
                f" WHERE {_OWNER} ORDER BY rowid", p)
        if self.has("memory_source_chunks") and self.has("memory_ingestion_documents"):
            rows.chunks = self._rows(
                f"SELECT {self._select('memory_source_chunks', 'c')} FROM memory_source_chunks c"
                " JOIN memory_ingestion_documents d ON d.id = c.document_id"
                f" WHERE d.user_id = ? AND coalesce(d.agent_id, '') = ? ORDER BY c.document_id, c.chunk_index, c.rowid",
                p)
        if self.has("memory_source_links"):
            rows.links = self._rows(
                f"SELECT {self._select('memory_source_links', 'l')} FROM memory_source_links l"
                f" JOIN memories m ON m.id = l.memory_id WHERE {m_owner} ORDER BY l.rowid", p)
        if self.has("memory_relations"):
            rows.relations = self._rows(
                f"SELECT {self._select('memory_relations')} FROM memory_relations WHERE {_OWNER} ORDER BY rowid", p)
        if self.has("memory_entities"):
            rows.entities = self._rows(
                f"SELECT {self._select('memory_entities')} FROM memory_entities WHERE {_OWNER} ORDER BY rowid", p)
        if self.has("memory_entity_mentions"):
            rows.mentions = self._rows(
                f"SELECT {self._select('memory_entity_mentions', 'em')} FROM memory_entity_mentions em"
                f" JOIN memories m ON m.id = em.memory_id WHERE {m_owner} ORDER BY em.rowid", p)
        if self.has("memory_retrieval_events"):
            rows.events = self._rows(
                f"SELECT {self._select('memory_retrieval_events')} FROM memory_retrieval_events WHERE {_OWNER}"
                " ORDER BY id", p)
        return rows

    # cross-owner lookups (to tell a dangling reference from one to another owner's row) --------------
    def id_owners(self, table: str) -> dict[str, tuple[Any, str]]:
        if not self.has(table):
            return {}
        if table == "memory_facts":
            sql = ("SELECT f.id, m.user_id, coalesce(m.agent_id, '') FROM memory_facts f"
                   " JOIN memories m ON m.id = f.memory_id")
        elif table == "memory_source_chunks":
            if not self.has("memory_ingestion_documents"):
                return {}
            sql = ("SELECT c.id, d.user_id, coalesce(d.agent_id, '') FROM memory_source_chunks c"
                   " JOIN memory_ingestion_documents d ON d.id = c.document_id")
        else:
            sql = f"SELECT id, user_id, coalesce(agent_id, '') FROM {table}"
        return {str(r[0]): (r[1], r[2]) for r in self._db.execute(sql)}

    # rows that hang off nothing ------------------------------------------------------------------------
    def orphans(self) -> dict[str, list[dict[str, Any]]]:
        """Rows whose parent is missing entirely: facts/links/mentions without their memory,
        chunks without their document."""
        out: dict[str, list[dict[str, Any]]] = {}
        if self.has("memory_facts"):
            out["memory_facts"] = self._rows(
                f"SELECT {self._select('memory_facts', 'f')} FROM memory_facts f"
                " WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = f.memory_id)")
        if self.has("memory_source_links"):
            out["memory_source_links"] = self._rows(
                f"SELECT {self._select('memory_source_links', 'l')} FROM memory_source_links l"
                " WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = l.memory_id)")
        if self.has("memory_entity_mentions"):
            out["memory_entity_mentions"] = self._rows(
                f"SELECT {self._select('memory_entity_mentions', 'em')} FROM memory_entity_mentions em"
                " WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = em.memory_id)")
        if self.has("memory_source_chunks"):
            docs = "memory_ingestion_documents" if self.has("memory_ingestion_documents") else None
            cond = (f"NOT EXISTS (SELECT 1 FROM {docs} d WHERE d.id = c.document_id)" if docs else "1")
            out["memory_source_chunks"] = self._rows(
                f"SELECT {self._select('memory_source_chunks', 'c')} FROM memory_source_chunks c WHERE {cond}")
        return {k: v for k, v in out.items() if v}

    def table_counts(self, tables: Iterable[str]) -> dict[str, int]:
        return {t: (self._db.execute(f'SELECT count(*) FROM "{t}"').fetchone() or (0,))[0]
                for t in tables if t in self.columns}


def file_sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- the memlens side ---------------------------------------------------------------------------------

MEMORY_IMPORT_COLUMNS = (
    "kind", "text", "category", "importance", "confidence", "trust", "is_static", "source_time", "created_at",
    "updated_at", "forget_after", "forgotten_at", "forget_reason", "access_count", "last_accessed_at", "strength",
    "pinned", "content_hash", "extraction_method")
DOCUMENT_IMPORT_COLUMNS = ("source_type", "uri", "title", "text", "content_hash", "trust", "source_time", "meta")
CHUNK_IMPORT_COLUMNS = ("ordinal", "kind", "start", "end", "text", "content_hash", "speaker", "role", "message_id",
                        "source_time", "trust", "meta")
IMPORT_ACTOR = "neoagent-import"  # curation_log actor of the retirements an import makes
TRACE_RECIPE = "neoagent-import"  # the recipe name of traces imported from memory_retrieval_events
REVIEW_RULE = "neoagent_review"


def row_hash(values: Any) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(slots=True)
class DocumentRow:
    key: str  # external_id, "neoagent:document:<id>"
    scope: Scope
    values: dict[str, Any]  # DOCUMENT_IMPORT_COLUMNS

    @property
    def hash(self) -> str:
        return row_hash(self.values)


@dataclass(slots=True)
class ChunkRow:
    key: str  # "neoagent:chunk:<id>", kept in meta["neoagent_ref"]
    document_key: str
    scope: Scope
    values: dict[str, Any]  # CHUNK_IMPORT_COLUMNS

    @property
    def hash(self) -> str:
        return row_hash(self.values)


@dataclass(slots=True)
class MemoryRow:
    key: str  # external_ref
    scope: Scope
    values: dict[str, Any]  # MEMORY_IMPORT_COLUMNS

    @property
    def hash(self) -> str:
        return row_hash(self.values)


@dataclass(slots=True)
class FactRow:
    key: str  # external_ref
    memory_key: str
    scope: Scope
    values: dict[str, Any]  # FACT_COLUMNS minus memory_id, supersedes_fact_id, external_ref
    supersedes_key: str | None = None

    @property
    def hash(self) -> str:
        return row_hash([self.values, self.memory_key, self.supersedes_key])


@dataclass(slots=True)
class SourceRow:
    scope: Scope
    memory_key: str
    chunk_key: str
    document_key: str
    relevance: float


@dataclass(slots=True)
class RelationRow:
    scope: Scope
    src_key: str
    dst_key: str
    type: str
    confidence: float
    rule: str
    reason: str | None
    created_at: str
    evidence_chunk_key: str | None = None


@dataclass(slots=True)
class EntityRow:
    scope: Scope
    name: str
    canonical: str
    kind: str


@dataclass(slots=True)
class MentionRow:
    scope: Scope
    canonical: str
    kind: str
    memory_key: str


@dataclass(slots=True)
class ReviewRow:
    scope: Scope
    fact_key: str
    other_fact_key: str | None
    reason: str


@dataclass(slots=True)
class TraceRow:
    key: str  # "neoagent:retrieval:<id>", kept in params["neoagent_ref"]
    scope: Scope
    values: dict[str, Any]  # query_hash, k, params, stages, timings, context_tokens, result_count, created_at
    result_keys: list[str] = field(default_factory=list)  # memory external refs, in rank order

    @property
    def hash(self) -> str:
        return row_hash([self.values, self.result_keys])


@dataclass(slots=True)
class OwnerPlan:
    """Everything to write for one NeoAgent owner; built by engine.importers.neoagent."""

    user_id: str
    agent_id: str
    documents: list[DocumentRow] = field(default_factory=list)
    chunks: list[ChunkRow] = field(default_factory=list)
    memories: list[MemoryRow] = field(default_factory=list)
    facts: list[FactRow] = field(default_factory=list)
    sources: list[SourceRow] = field(default_factory=list)
    relations: list[RelationRow] = field(default_factory=list)
    entities: list[EntityRow] = field(default_factory=list)
    mentions: list[MentionRow] = field(default_factory=list)
    reviews: list[ReviewRow] = field(default_factory=list)
    traces: list[TraceRow] = field(default_factory=list)

    def scopes(self) -> list[Scope]:
        seen: dict[Scope, None] = {}
        for rows in (self.documents, self.chunks, self.memories, self.facts, self.sources, self.relations,
                     self.entities, self.mentions, self.traces):
            for r in rows:
                seen.setdefault(r.scope, None)
        return list(seen)


@dataclass(slots=True)
class WriteCounts:
    """Per record kind: rows inserted, updated (NeoAgent changed them), unchanged, and those in memlens
    that NeoAgent no longer has: retired here, or kept and counted (nothing is ever deleted)."""

    imported: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    unchanged: dict[str, int] = field(default_factory=dict)
    gone_from_source: dict[str, int] = field(default_factory=dict)  # gone from NeoAgent, kept here
    retired: dict[str, int] = field(default_factory=dict)  # gone from NeoAgent, so forgotten / retracted here
    problems: list[tuple[str, str, str, str]] = field(default_factory=list)  # (record kind, reason, action, example)

    def bump(self, which: str, kind: str, n: int = 1) -> None:
        d = getattr(self, which)
        d[kind] = d.get(kind, 0) + n


def _hash_key(user_id: str, agent_id: str) -> str:
    return f"neoagent:rows:{user_id}:{agent_id}"


def _scope_tag(scope: Scope) -> str:
    return "\x1f".join(scope.as_params())


class OwnerWrite:
    """Applies one OwnerPlan inside one transaction of `store` (call `apply()`)."""

    def __init__(self, store: Store, plan: OwnerPlan) -> None:
        self.store = store
        self.plan = plan
        self.counts = WriteCounts()

    def apply(self) -> WriteCounts:
        plan = self.plan
        with self.store.db.write() as conn:
            self.conn = conn
            self._writers: dict[Scope, Writer] = {}
            raw = conn.execute("SELECT value FROM meta WHERE key = ?", (_hash_key(plan.user_id, plan.agent_id),)).fetchone()
            self.old_hashes: dict[str, str] = json.loads(raw[0]) if raw else {}
            self.new_hashes: dict[str, str] = {}
            self._load_existing()
            self.retired_hashes: set[str] = set()
            self._documents()
            self._chunks()
            self._memories()
            self._facts()
            self._sources()
            self._relations()
            self._entities()
            self._reviews()
            self._traces()
            self._gone()
            self.w(Scope(plan.user_id, plan.agent_id, "agent", plan.agent_id)).set_meta(
                _hash_key(plan.user_id, plan.agent_id), json.dumps(self.new_hashes, sort_keys=True))
        return self.counts

    def w(self, scope: Scope) -> Writer:
        writer = self._writers.get(scope)
        if writer is None:
            writer = self._writers[scope] = Writer(self.conn, scope)
        return writer

    def _problem(self, kind: str, reason: str, action: str, example: str) -> None:
        self.counts.problems.append((kind, reason, action, example))

    # existing memlens rows of this owner ---------------------------------------------------------------
    def _load_existing(self) -> None:
        c, owner = self.conn, (self.plan.user_id, self.plan.agent_id)
        def scope_of(r: tuple[Any, ...]) -> Scope:
            return Scope(r[0], r[1], r[2], r[3])

        self.docs: dict[tuple[str, str], tuple[int, str, int]] = {}  # (scope tag, key) -> (id, content_hash, version)
        for r in c.execute("SELECT user_id, agent_id, scope_type, scope_id, external_id, id, content_hash, version"
                           " FROM documents WHERE user_id = ? AND agent_id = ? AND external_id LIKE 'neoagent:%'"
                           " AND replaced_at IS NULL", owner):
            self.docs[(_scope_tag(scope_of(r)), r[4])] = (r[5], r[6], r[7])
        self.chunks: dict[tuple[str, str], tuple[int, int, str]] = {}  # (scope tag, key) -> (id, document id, text)
        for r in c.execute("SELECT user_id, agent_id, scope_type, scope_id, json_extract(meta, '$.neoagent_ref'), id,"
                           " document_id, text FROM chunks WHERE user_id = ? AND agent_id = ?"
                           " AND json_extract(meta, '$.neoagent_ref') IS NOT NULL", owner):
            self.chunks[(_scope_tag(scope_of(r)), r[4])] = (r[5], r[6], r[7])
        self.memories: dict[str, tuple[Scope, int, str]] = {}  # key -> (scope, id, text)
        self.forgotten: set[int] = set()
        for r in c.execute("SELECT user_id, agent_id, scope_type, scope_id, external_ref, id, text, forgotten_at"
                           " FROM memories WHERE user_id = ? AND agent_id = ? AND external_ref LIKE 'neoagent:%'", owner):
            self.memories[r[4]] = (scope_of(r), r[5], r[6])
            if r[7] is not None:
                self.forgotten.add(r[5])
        self.facts: dict[str, tuple[Scope, int]] = {}
        self.fact_status: dict[int, str] = {}
        self.fact_memory: dict[int, int] = {}
        for r in c.execute("SELECT user_id, agent_id, scope_type, scope_id, external_ref, id, status, memory_id"
                           " FROM facts WHERE user_id = ? AND agent_id = ? AND external_ref LIKE 'neoagent:%'", owner):
            self.facts[r[4]] = (scope_of(r), r[5])
            self.fact_status[r[5]] = r[6]
            self.fact_memory[r[5]] = r[7]
        self.relations = {(r[0], r[1], r[2]) for r in c.execute(
            "SELECT src_memory_id, dst_memory_id, type FROM memory_relations WHERE user_id = ? AND agent_id = ?", owner)}
        self.mentions = {(r[0], r[1]) for r in c.execute(
            "SELECT entity_id, memory_id FROM entity_mentions WHERE user_id = ? AND agent_id = ?", owner)}
        self.reviews = {r[0] for r in c.execute(
            "SELECT fact_a_id FROM conflicts WHERE user_id = ? AND agent_id = ? AND rule = ?", (*owner, REVIEW_RULE))}
        self.traces: dict[str, int] = {}
        for r in c.execute("SELECT json_extract(params, '$.neoagent_ref'), id FROM retrieval_traces"
                           " WHERE user_id = ? AND agent_id = ? AND recipe = ?", (*owner, TRACE_RECIPE)):
            if r[0]:
                self.traces[r[0]] = r[1]
        self.seen: dict[str, set[str]] = {"documents": set(), "chunks": set(), "memories": set(), "facts": set()}

    def _changed(self, hkey: str, h: str) -> bool:
        self.new_hashes[hkey] = h
        return self.old_hashes.get(hkey) != h

    # documents and chunks ------------------------------------------------------------------------------
    def _documents(self) -> None:
        self.doc_ids: dict[tuple[str, str], int] = {}
        self.replaced: dict[int, int] = {}  # old document id -> new version id
        for d in self.plan.documents:
            tag = _scope_tag(d.scope)
            self.seen["documents"].add(f"{tag}|{d.key}")
            existing = self.docs.get((tag, d.key))
            v = d.values
            changed = self._changed(f"document|{tag}|{d.key}", d.hash)
            w = self.w(d.scope)
            if existing is None:
                self.doc_ids[(tag, d.key)] = w.insert_document(
                    source_type=v["source_type"], uri=v["uri"], external_id=d.key, title=v["title"], text=v["text"],
                    content_hash=v["content_hash"], trust=v["trust"], source_time=v["source_time"], version=1,
                    previous_id=None, meta=v["meta"])
                self.counts.bump("imported", "documents")
                continue
            doc_id, content_hash, version = existing
            if not changed:
                self.doc_ids[(tag, d.key)] = doc_id
                self.counts.bump("unchanged", "documents")
                continue
            if content_hash == v["content_hash"]:  # same text: title, time or metadata changed
                self.conn.execute(
                    "UPDATE documents SET source_type = ?, uri = ?, title = ?, trust = ?, source_time = ?, meta = ?"
                    " WHERE id = ?", (v["source_type"], v["uri"], v["title"], v["trust"], v["source_time"],
                                      json.dumps(v["meta"], sort_keys=True), doc_id))
                self.doc_ids[(tag, d.key)] = doc_id
            else:  # new text: a new version; chunks that survive move to it with their memories
                w.mark_document_replaced(doc_id)
                new_id = w.insert_document(
                    source_type=v["source_type"], uri=v["uri"], external_id=d.key, title=v["title"], text=v["text"],
                    content_hash=v["content_hash"], trust=v["trust"], source_time=v["source_time"],
                    version=version + 1, previous_id=doc_id, meta=v["meta"])
                self.doc_ids[(tag, d.key)] = new_id
                self.replaced[doc_id] = new_id
            self.counts.bump("updated", "documents")

    def _chunks(self) -> None:
        self.chunk_ids: dict[tuple[str, str], tuple[int, int, int, int]] = {}  # (tag, key) -> (id, document, start, end)
        for ch in self.plan.chunks:
            tag = _scope_tag(ch.scope)
            self.seen["chunks"].add(f"{tag}|{ch.key}")
            doc_id = self.doc_ids[(tag, ch.document_key)]
            v = ch.values
            meta = dict(v["meta"], neoagent_ref=ch.key)
            existing = self.chunks.get((tag, ch.key))
            changed = self._changed(f"chunk|{tag}|{ch.key}", ch.hash)
            w = self.w(ch.scope)
            if existing is not None and existing[2] == v["text"]:
                cid, old_doc, _ = existing
                if changed or old_doc != doc_id:
                    w.move_chunk(cid, document_id=doc_id, ordinal=v["ordinal"], start=v["start"], end=v["end"],
                                 quotes_chunk_id=None, meta=meta, source_time=v["source_time"])
                    self.conn.execute("UPDATE chunks SET kind = ?, speaker = ?, role = ?, message_id = ?, trust = ?"
                                      " WHERE id = ?", (v["kind"], v["speaker"], v["role"], v["message_id"], v["trust"],
                                                        cid))
                    self.counts.bump("updated", "chunks")
                else:
                    self.counts.bump("unchanged", "chunks")
                self.chunk_ids[(tag, ch.key)] = (cid, doc_id, v["start"], v["end"])
                continue
            if existing is not None:  # same NeoAgent id, other text: the old chunk stays with its old version
                self._problem("chunks", "chunk_text_changed", "imported as a new chunk", f"chunk {ch.key}")
            cid = w.insert_chunk(
                document_id=doc_id, ordinal=v["ordinal"], kind=v["kind"], start=v["start"], end=v["end"],
                text=v["text"], content_hash=v["content_hash"], speaker=v["speaker"], role=v["role"],
                message_id=v["message_id"], source_time=v["source_time"], trust=v["trust"], quotes_chunk_id=None,
                meta=meta)
            self.chunk_ids[(tag, ch.key)] = (cid, doc_id, v["start"], v["end"])
            self.counts.bump("imported", "chunks")

    # memories and facts --------------------------------------------------------------------------------
    def _memories(self) -> None:
        self.memory_ids: dict[str, int] = {}
        self.moved: set[str] = set()
        cols = MEMORY_IMPORT_COLUMNS
        for m in self.plan.memories:
            self.seen["memories"].add(m.key)
            v = m.values
            existing = self.memories.get(m.key)
            changed = self._changed(f"memory|{m.key}", m.hash)
            if existing is not None and existing[0] != m.scope:
                # NeoAgent moved it to another scope: memlens keeps it where it is (with its history),
                # and nothing of this run hangs new rows off it in the new scope.
                self._problem("memories", "scope_changed", "left in its earlier scope",
                              f"{m.key}: now {' / '.join(m.scope.as_params())}, imported earlier into "
                              f"{' / '.join(existing[0].as_params())}")
                self.moved.add(m.key)
                self.new_hashes[f"memory|{m.key}"] = self.old_hashes.get(f"memory|{m.key}", "")
                continue
            if existing is None:
                self.conn.execute(
                    f"INSERT INTO memories(user_id, agent_id, scope_type, scope_id, {', '.join(cols)}, external_ref)"
                    f" VALUES (?,?,?,?,{','.join('?' * len(cols))},?)",
                    (*m.scope.as_params(), *(v[c] for c in cols), m.key))
                self.memory_ids[m.key] = self.conn.last_insert_rowid()
                self.counts.bump("imported", "memories")
                continue
            mid = existing[1]
            self.memory_ids[m.key] = mid
            if not changed:
                self.counts.bump("unchanged", "memories")
                continue
            self.conn.execute(f"UPDATE memories SET {', '.join(f'{c} = ?' for c in cols)} WHERE id = ?",
                              (*(v[c] for c in cols), mid))
            if existing[2] != v["text"]:  # the vector no longer matches: the embedding pass redoes it
                self.conn.execute("UPDATE embeddings SET stale = 1 WHERE owner_type = 'memory' AND owner_id = ?", (mid,))
            self.counts.bump("updated", "memories")

    def _facts(self) -> None:
        self.fact_ids: dict[str, int] = {}
        cols = [c for c in FACT_COLUMNS if c not in ("memory_id", "supersedes_fact_id", "external_ref")]
        pending_links: list[tuple[FactRow, int]] = []
        for f in self.plan.facts:
            self.seen["facts"].add(f.key)
            existing = self.facts.get(f.key)
            if f.memory_key in self.moved:
                self._problem("facts", "scope_changed", "skipped", f"{f.key}: its memory {f.memory_key} moved scope")
                self.new_hashes[f"fact|{f.key}"] = self.old_hashes.get(f"fact|{f.key}", "")
                continue
            changed = self._changed(f"fact|{f.key}", f.hash)
            mid = self.memory_ids[f.memory_key]
            w = self.w(f.scope)
            if existing is not None and existing[0] != f.scope:
                self._problem("facts", "scope_changed", "left in its earlier scope", f.key)
                self.new_hashes[f"fact|{f.key}"] = self.old_hashes.get(f"fact|{f.key}", "")
                continue
            if existing is None:
                fid = w.insert_fact(memory_id=mid, external_ref=f.key, **{c: f.values[c] for c in cols})
                self.fact_ids[f.key] = fid
                pending_links.append((f, fid))
                self.counts.bump("imported", "facts")
                continue
            fid = existing[1]
            self.fact_ids[f.key] = fid
            if not changed:
                self.counts.bump("unchanged", "facts")
                continue
            w.update_fact(fid, memory_id=mid, **{c: f.values[c] for c in cols})
            pending_links.append((f, fid))
            self.counts.bump("updated", "facts")
        # Version pointers once every fact of the owner has its id (a newer fact may come first).
        for f, fid in pending_links:
            target = self.fact_ids.get(f.supersedes_key) if f.supersedes_key else None
            self.w(f.scope).update_fact(fid, supersedes_fact_id=target)

    # links ----------------------------------------------------------------------------------------------
    def _sources(self) -> None:
        for s in self.plan.sources:
            if s.memory_key in self.moved:
                continue
            cid, doc_id, start, end = self.chunk_ids[(_scope_tag(s.scope), s.chunk_key)]
            mid = self.memory_ids[s.memory_key]
            self.w(s.scope).add_source(memory_id=mid, chunk_id=cid, document_id=doc_id, start=start, end=end,
                                       relevance=s.relevance)
            self.counts.bump("imported" if self.conn.changes() else "unchanged", "sources")

    def _relations(self) -> None:
        for r in self.plan.relations:
            if r.src_key in self.moved or r.dst_key in self.moved:
                continue
            src, dst = self.memory_ids[r.src_key], self.memory_ids[r.dst_key]
            if (src, dst, r.type) in self.relations:
                self.counts.bump("unchanged", "relations")
                continue
            evidence = None
            if r.evidence_chunk_key is not None:
                hit = self.chunk_ids.get((_scope_tag(r.scope), r.evidence_chunk_key))
                evidence = hit[0] if hit else None
            self.conn.execute(
                "INSERT INTO memory_relations(user_id, agent_id, scope_type, scope_id, src_memory_id, dst_memory_id,"
                " type, confidence, evidence_chunk_id, created_by, rule, reason, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,'import',?,?,?)",
                (*r.scope.as_params(), src, dst, r.type, r.confidence, evidence, r.rule, r.reason, r.created_at))
            self.relations.add((src, dst, r.type))
            self.counts.bump("imported", "relations")

    def _entities(self) -> None:
        ids: dict[tuple[str, str, str], int] = {}
        for e in self.plan.entities:
            eid, created = self.w(e.scope).upsert_entity_created(e.name, e.canonical, e.kind)
            ids[(_scope_tag(e.scope), e.canonical, e.kind)] = eid
            self.counts.bump("imported" if created else "unchanged", "entities")
        rows: dict[Scope, list[tuple[Any, ...]]] = {}
        for m in self.plan.mentions:
            if m.memory_key in self.moved:
                continue
            eid = ids[(_scope_tag(m.scope), m.canonical, m.kind)]
            mid = self.memory_ids[m.memory_key]
            if (eid, mid) in self.mentions:
                self.counts.bump("unchanged", "mentions")
                continue
            self.mentions.add((eid, mid))
            rows.setdefault(m.scope, []).append((eid, mid, None, None, None))
            self.counts.bump("imported", "mentions")
        for scope, batch in rows.items():
            self.w(scope).add_mentions(batch)

    def _reviews(self) -> None:
        for r in self.plan.reviews:
            if r.fact_key not in self.fact_ids:
                continue
            fid = self.fact_ids[r.fact_key]
            if fid in self.reviews:
                self.counts.bump("unchanged", "conflicts")
                continue
            other = self.fact_ids.get(r.other_fact_key) if r.other_fact_key else None
            self.w(r.scope).open_conflict(fact_a_id=fid, fact_b_id=other, rule=REVIEW_RULE, reason=r.reason)
            self.reviews.add(fid)
            self.counts.bump("imported", "conflicts")

    def _traces(self) -> None:
        for t in self.plan.traces:
            h = t.hash
            self.new_hashes[f"trace|{t.key}"] = h
            if t.key in self.traces:
                self.counts.bump("unchanged", "traces")
                continue
            v = t.values
            params = dict(v["params"], neoagent_ref=t.key)
            self.conn.execute(
                "INSERT INTO retrieval_traces(user_id, agent_id, scope_type, scope_id, origin, query_text, query_hash,"
                " recipe, k, as_of, params, plan, rerank, stages, timings, context_text, context_tokens, result_count,"
                " created_at) VALUES (?,?,?,?,'agent',NULL,?,?,?,NULL,?,NULL,NULL,?,?,NULL,?,?,?)",
                (*t.scope.as_params(), v["query_hash"], TRACE_RECIPE, v["k"], json.dumps(params, sort_keys=True),
                 json.dumps(v["stages"]), json.dumps(v["timings"]), v["context_tokens"], v["result_count"],
                 v["created_at"]))
            tid = self.conn.last_insert_rowid()
            keys = [k for k in t.result_keys if k not in self.moved]
            rows = [(self.memory_ids[k], json.dumps({"neoagent": {"rank": i + 1}}), "{}", None, i + 1, None, None,
                     None, None) for i, k in enumerate(keys)]
            self.w(t.scope).insert_trace_candidates(tid, rows)
            self.traces[t.key] = tid
            self.counts.bump("imported", "traces")

    def _gone(self) -> None:
        """Rows an earlier import brought in that NeoAgent no longer has (deleted there, or re-created
        under new ids, as updateMemory does with facts): memories are forgotten and current facts
        retracted, each scope's retirements logged as one curation_log entry with row images (so
        they can be explained and undone), except rows the operator curated in memlens, which stay
        as they are. Documents and chunks stay as the provenance of what was; all are counted."""
        retire: dict[Scope, list[tuple[str, int, str, str]]] = {}  # scope -> (table, id, external ref, reason)
        for key, (scope, mid, _text) in self.memories.items():
            if key in self.seen["memories"]:
                continue
            if key.startswith("neoagent:fact:") and key in self.seen["facts"]:
                reason = "NeoAgent: its fact now belongs to its memory directly"
            else:
                reason = "deleted in NeoAgent (gone from its database at import)"
            if mid in self.forgotten:
                self.counts.bump("gone_from_source", "memories")
            else:
                retire.setdefault(scope, []).append(("memories", mid, key, reason))
        for key, (scope, fid) in self.facts.items():
            if key in self.seen["facts"]:
                continue
            if self.fact_status.get(fid) in ("active", "needs_review"):
                retire.setdefault(scope, []).append(("facts", fid, key, "deleted in NeoAgent (gone from its database"
                                                                        " at import; it re-creates edited facts)"))
            else:  # already history here: it stays as it is
                self.counts.bump("gone_from_source", "facts")
        if retire:
            self._retire(retire)
        for (tag, key) in self.docs:
            if f"{tag}|{key}" not in self.seen["documents"]:
                self.counts.bump("gone_from_source", "documents")
        for (tag, key), (_cid, doc_id, _t) in self.chunks.items():
            if f"{tag}|{key}" not in self.seen["chunks"] and doc_id not in self.replaced:
                self.counts.bump("gone_from_source", "chunks")
        # Keep the hashes of rows we did not see, so a row that comes back is recognised; a retired
        # row loses its hash, so if NeoAgent has it again the next import brings it back to life.
        for k, h in self.old_hashes.items():
            if k not in self.retired_hashes:
                self.new_hashes.setdefault(k, h)

    def _retire(self, retire: dict[Scope, list[tuple[str, int, str, str]]]) -> None:
        # One NeoAgent memory is a family here (the memory, the fact memories deriving from it, their
        # facts): the operator curating any of it keeps all of it.
        parent = dict(self.conn.execute(
            "SELECT src_memory_id, dst_memory_id FROM memory_relations WHERE user_id = ? AND agent_id = ?"
            " AND rule = 'neoagent_memory_fact'", (self.plan.user_id, self.plan.agent_id)).fetchall())

        def family(table: str, rid: int) -> int:
            mid = rid if table == "memories" else self.fact_memory.get(rid, -rid)
            return parent.get(mid, mid)

        curated = {family(t, rid) for t, rid in self._curated()}
        now = now_iso()
        for scope, rows in retire.items():
            w = self.w(scope)
            ch = ChangeSet()
            done: list[str] = []
            for table, rid, key, reason in rows:
                kind = "memory" if table == "memories" else "fact"
                if family(table, rid) in curated:
                    self.counts.bump("gone_from_source", table)
                    self._problem(table, "curated_in_memlens", "kept as the operator left it",
                                  f"{key}: gone from NeoAgent, but curated in memlens")
                    continue
                ch.touch(w, table, rid)
                if table == "memories":
                    w.forget_memory(rid, reason)
                else:
                    w.update_fact(rid, status="retracted", invalidated_at=now, rule="neoagent_deleted", reason=reason)
                    for (cid,) in self.conn.execute(
                            "SELECT id FROM conflicts WHERE fact_a_id = ? AND status = 'open' AND rule = ?",
                            (rid, REVIEW_RULE)).fetchall():
                        ch.touch(w, "conflicts", cid)
                        w.set_conflict(cid, status="dismissed", resolution="its fact was deleted in NeoAgent",
                                       curation_id=None)
                self.retired_hashes.add(f"{kind}|{key}")
                self.counts.bump("retired", table)
                done.append(key)
            if done:
                ch.seal(w)
                w.log_curation(command="retire", target_type="neoagent_import", target_id=None,
                               before={"rows": ch.before}, after={"rows": ch.after, "refs": done},
                               actor=IMPORT_ACTOR, note=f"gone from NeoAgent: {len(done)} rows retired")

    def _curated(self) -> set[tuple[str, int]]:
        """(table, id) of every row of this owner that an operator (anyone but the importer) changed in
        memlens with a curation command that is not undone, or brought back by undoing a retirement."""
        out: set[tuple[str, int]] = set()
        targets = {"memory": "memories", "fact": "facts"}
        owner = (self.plan.user_id, self.plan.agent_id)
        rows = self.conn.execute(
            "SELECT target_type, target_id, before FROM curation_log WHERE user_id = ? AND agent_id = ?"
            " AND actor != ? AND undone_at IS NULL", (*owner, IMPORT_ACTOR)).fetchall()
        rows += self.conn.execute(  # the import's own retirements that an operator undid
            "SELECT NULL, NULL, r.before FROM curation_log r WHERE r.user_id = ? AND r.agent_id = ?"
            " AND r.actor = ? AND r.undone_at IS NOT NULL", (*owner, IMPORT_ACTOR)).fetchall()
        for target_type, target_id, before in rows:
            if target_type in targets and target_id is not None:
                out.add((targets[target_type], target_id))
            try:
                images = json.loads(before).get("rows", {})
            except (ValueError, AttributeError):
                continue
            for table in ("memories", "facts"):
                out.update((table, int(rid)) for rid in (images.get(table) or {}))
        return out


# -- vectors for imported memories ----------------------------------------------------------------------

def memories_needing_vectors(store: Store, user_id: str, agent_id: str, model: str, limit: int,
                             after_id: int = 0) -> list[tuple[Scope, int, str]]:
    """Imported memories of this owner with no current vector for `model` (new, changed or stale),
    in id order after `after_id` (a keyset: each batch costs the same)."""
    rows = store.conn.execute(
        "SELECT m.user_id, m.agent_id, m.scope_type, m.scope_id, m.id, m.text FROM memories m"
        " LEFT JOIN embeddings e ON e.owner_type = 'memory' AND e.owner_id = m.id"
        " WHERE m.id > ? AND m.user_id = ? AND m.agent_id = ? AND m.external_ref LIKE 'neoagent:%'"
        " AND (e.id IS NULL OR e.stale != 0 OR e.model != ?) ORDER BY m.id LIMIT ?",
        (after_id, user_id, agent_id, model, limit))
    return [(Scope(r[0], r[1], r[2], r[3]), r[4], r[5]) for r in rows]


def put_vectors(store: Store, rows: list[tuple[Scope, int, np.ndarray]], *, provider: str, model: str, dims: int,
                embed_ms: float | None) -> None:
    """One transaction for a batch of vectors (of any scopes)."""
    by_scope: dict[Scope, list[tuple[int, np.ndarray]]] = {}
    for scope, mid, vec in rows:
        by_scope.setdefault(scope, []).append((mid, vec))
    with store.db.write() as conn:
        for scope, batch in by_scope.items():
            Writer(conn, scope).put_embeddings("memory", batch, provider=provider, model=model, dims=dims,
                                               embed_ms=embed_ms)


__all__ = [
    "NeoAgentSource", "OwnerRows", "OwnerPlan", "OwnerWrite", "WriteCounts", "DocumentRow", "ChunkRow", "MemoryRow",
    "FactRow", "SourceRow", "RelationRow", "EntityRow", "MentionRow", "ReviewRow", "TraceRow", "NOT_IMPORTED",
    "MEMORY_IMPORT_COLUMNS", "TRACE_RECIPE", "REVIEW_RULE", "file_sha256", "memories_needing_vectors", "put_vectors",
]
