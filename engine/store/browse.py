"""SQL for the inspector's browsing panes: paged memory listings, span views, evidence slices.

Mixed into store.Store. Every query names the scope. Listings page by keyset (`after_id`), never
OFFSET, so the 1000th page costs what the first does; counts are separate queries so a table
view can size its scroll bar without loading rows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from ..scope import Scope
from .sql import dict_rows, scope_where

# What the browser calls a memory's status: the fact's status, or what happened to the memory.
MEMORY_STATUSES = ("active", "needs_review", "superseded", "expired", "retracted", "forgotten")
_STATUS_SQL = ("CASE WHEN m.forgotten_at IS NOT NULL THEN 'forgotten'"
               " WHEN m.retracted_at IS NOT NULL THEN 'retracted'"
               " ELSE coalesce(f.status, 'active') END")
_TIME_SQL = "coalesce(m.source_time, m.created_at)"
_SOURCE_TYPE_SQL = ("(SELECT d.source_type FROM memory_sources s JOIN documents d ON d.id = s.document_id"
                    " WHERE s.memory_id = m.id ORDER BY s.id LIMIT 1)")
# What replaced a memory, as "<memory id>|<claim>|<when>": for a turn, the newest fact that
# superseded a claim read from it (not one the turn itself stated: "I quit smoking" stores its old
# value as history); for a superseded fact, the fact that updated it.
_REPLACED_SQL = (
    "CASE WHEN m.kind = 'episode' THEN (SELECT r.src_memory_id || '|' || f2.predicate || ' ' || f2.object || '|'"
    " || coalesce(f3.valid_from, r.created_at) FROM memory_sources s1"
    " JOIN memory_sources s2 ON s2.chunk_id = s1.chunk_id AND s2.memory_id != s1.memory_id"
    " JOIN facts f2 ON f2.memory_id = s2.memory_id AND f2.status = 'superseded'"
    " JOIN memory_relations r ON r.dst_memory_id = f2.memory_id AND r.type = 'updates' AND r.removed_at IS NULL"
    " JOIN facts f3 ON f3.memory_id = r.src_memory_id"
    " WHERE s1.memory_id = m.id AND NOT EXISTS (SELECT 1 FROM memory_sources s3 WHERE s3.memory_id = r.src_memory_id"
    "  AND s3.chunk_id = s1.chunk_id) ORDER BY r.id DESC LIMIT 1)"
    " WHEN f.status = 'superseded' THEN (SELECT r.src_memory_id || '|' || f.predicate || ' ' || f.object || '|'"
    " || coalesce(f3.valid_from, r.created_at) FROM memory_relations r JOIN facts f3 ON f3.memory_id = r.src_memory_id"
    " WHERE r.dst_memory_id = m.id AND r.type = 'updates' AND r.removed_at IS NULL ORDER BY r.id DESC LIMIT 1)"
    " END")
_MAX_ID = 2**63 - 1
PREVIEW_CHARS = 400  # the table elides anyway; never ship whole documents per row
_WORD = re.compile(r"\w+", re.UNICODE)


def search_match(text: str | None) -> str | None:
    """A search box's text as an FTS5 query: every word must match, the last one as a prefix."""
    words = _WORD.findall(text or "")
    if not words:
        return None
    quoted = ['"' + w.replace('"', '""') + '"' for w in words[:16]]
    quoted[-1] += "*"
    return " ".join(quoted)


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """The browser's filters; None means "any". Times are ISO-8601 text compared as text."""

    kind: str | None = None  # episode | fact | summary
    status: str | None = None  # one of MEMORY_STATUSES
    trust: str | None = None  # user | assistant | tool | external
    source_type: str | None = None  # chat | locomo | email | markdown | code | ...
    category: str | None = None
    time_from: str | None = None  # inclusive, on source_time (created_at when unknown)
    time_to: str | None = None  # exclusive
    text: str | None = None  # full-text search over memories_fts
    descending: bool = False  # order by id

    def without_text(self) -> MemoryFilter:
        return replace(self, text=None)

    @property
    def empty(self) -> bool:
        return all(getattr(self, f) in (None, "") for f in ("kind", "status", "trust", "source_type", "category",
                                                             "time_from", "time_to", "text"))


def _where(scope: Scope, flt: MemoryFilter) -> tuple[str, list[Any], bool]:
    """(WHERE clause, params, needs the facts join)."""
    clauses = [scope_where('m')]
    params: list[Any] = [*scope.as_params()]
    needs_fact = False
    if flt.kind:
        clauses.append("m.kind = ?")
        params.append(flt.kind)
    if flt.trust:
        clauses.append("m.trust = ?")
        params.append(flt.trust)
    if flt.category:
        clauses.append("m.category = ?")
        params.append(flt.category)
    if flt.status:
        if flt.status == "forgotten":
            clauses.append("m.forgotten_at IS NOT NULL")
        elif flt.status == "retracted":
            clauses.append("m.forgotten_at IS NULL AND (m.retracted_at IS NOT NULL OR f.status = 'retracted')")
            needs_fact = True
        elif flt.status == "active":
            clauses.append("m.forgotten_at IS NULL AND m.retracted_at IS NULL AND coalesce(f.status, 'active') = 'active'")
            needs_fact = True
        else:
            clauses.append("m.forgotten_at IS NULL AND m.retracted_at IS NULL AND f.status = ?")
            params.append(flt.status)
            needs_fact = True
    if flt.time_from:
        clauses.append(f"{_TIME_SQL} >= ?")
        params.append(flt.time_from)
    if flt.time_to:
        clauses.append(f"{_TIME_SQL} < ?")
        params.append(flt.time_to)
    if flt.source_type:
        clauses.append("EXISTS (SELECT 1 FROM memory_sources s JOIN documents d ON d.id = s.document_id"
                       " WHERE s.memory_id = m.id AND d.source_type = ?)")
        params.append(flt.source_type)
    match = search_match(flt.text)
    if match:
        clauses.append("m.id IN (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?)")
        params.append(match)
    return " AND ".join(clauses), params, needs_fact


def _from(needs_fact: bool) -> str:
    return "memories m LEFT JOIN facts f ON f.memory_id = m.id" if needs_fact else "memories m"


class BrowseReads:
    """Mixed into store.Store: `self.conn` exists."""

    conn: Any

    # memory listing -------------------------------------------------------------------------------
    def count_memories(self, scope: Scope, flt: MemoryFilter | None = None) -> int:
        flt = flt or MemoryFilter()
        where, params, needs_fact = _where(scope, flt)
        return self.conn.execute(f"SELECT count(*) FROM {_from(needs_fact)} WHERE {where}", tuple(params)).fetchone()[0]

    def browse_memories(self, scope: Scope, flt: MemoryFilter | None = None, *, after_id: int | None = None,
                        limit: int = 500) -> list[dict[str, Any]]:
        """One page of the memory table, in id order (descending if the filter says so), after `after_id`."""
        flt = flt or MemoryFilter()
        where, params, _ = _where(scope, flt)
        # Always bound the id: then SQLite walks the rowid in order and stops after `limit` rows,
        # instead of collecting the whole scope from an index and sorting it (1M rows: 2 ms vs 1 s).
        if flt.descending:
            where += " AND m.id < ?"
            params.append(after_id if after_id is not None else _MAX_ID)
        else:
            where += " AND m.id > ?"
            params.append(after_id if after_id is not None else 0)
        order = "DESC" if flt.descending else "ASC"
        sql = (f"SELECT m.id, m.kind, substr(m.text, 1, {PREVIEW_CHARS}) AS text, length(m.text) AS text_length,"
               f" {_STATUS_SQL} AS status, m.trust, m.confidence, m.category, {_SOURCE_TYPE_SQL} AS source_type,"
               f" {_TIME_SQL} AS time, m.pinned, m.forget_reason, m.importance, f.id AS fact_id, f.subject,"
               f" f.predicate, f.object, {_REPLACED_SQL} AS replaced"
               f" FROM memories m LEFT JOIN facts f ON f.memory_id = m.id WHERE {where}"
               f" ORDER BY m.id {order} LIMIT ?")
        rows = dict_rows(self.conn, sql, (*params, limit))
        for row in rows:  # -> replaced_by (memory id), replaced_claim, replaced_on
            by, claim, when = (row.pop("replaced") or "||").split("|", 2)
            row.update(replaced_by=int(by) if by else None, replaced_claim=claim or None,
                       replaced_on=(when or "")[:10] or None)
        return rows

    def memory_rank(self, scope: Scope, flt: MemoryFilter | None, memory_id: int) -> int | None:
        """The row index of a memory in the listing for this filter, or None if the filter hides it."""
        flt = flt or MemoryFilter()
        where, params, needs_fact = _where(scope, flt)
        hit = self.conn.execute(f"SELECT 1 FROM {_from(needs_fact)} WHERE {where} AND m.id = ?",
                                (*params, memory_id)).fetchone()
        if hit is None:
            return None
        cmp = ">" if flt.descending else "<"
        return self.conn.execute(f"SELECT count(*) FROM {_from(needs_fact)} WHERE {where} AND m.id {cmp} ?",
                                 (*params, memory_id)).fetchone()[0]

    def memory_facets(self, scope: Scope, *, limit: int = 200) -> dict[str, list[str]]:
        """The values the filter boxes offer: categories, source types, kinds, trust labels in use."""
        sp = scope.as_params()
        cats = [r[0] for r in self.conn.execute(
            f"SELECT DISTINCT category FROM memories WHERE {scope_where()} AND category IS NOT NULL ORDER BY 1 LIMIT ?",
            (*sp, limit))]
        types = [r[0] for r in self.conn.execute(
            f"SELECT DISTINCT source_type FROM documents WHERE {scope_where()} ORDER BY 1 LIMIT ?", (*sp, limit))]
        kinds = [r[0] for r in self.conn.execute(
            f"SELECT DISTINCT kind FROM memories WHERE {scope_where()} ORDER BY 1", sp)]
        trust = [r[0] for r in self.conn.execute(
            f"SELECT DISTINCT trust FROM memories WHERE {scope_where()} ORDER BY 1", sp)]
        span = self.conn.execute(f"SELECT min({_TIME_SQL}), max({_TIME_SQL}) FROM memories m WHERE {scope_where('m')}",
                                 sp).fetchone()
        return {"categories": cats, "source_types": types, "kinds": kinds, "trust": trust,
                "time_min": span[0], "time_max": span[1]}

    def memory_ids_for_facts(self, scope: Scope, fact_ids: list[int]) -> dict[int, int]:
        if not fact_ids:
            return {}
        marks = ",".join("?" * len(fact_ids))
        return {r[0]: r[1] for r in self.conn.execute(
            f"SELECT id, memory_id FROM facts WHERE id IN ({marks}) AND {scope_where()}", (*fact_ids, *scope.as_params()))}

    # span view ---------------------------------------------------------------------------------------
    def document_of(self, scope: Scope, kind: str, record_id: int) -> tuple[int, int | None] | None:
        """(document id, memory id to focus or None) for a memory, fact, chunk or document."""
        sp = scope.as_params()
        if kind == "document":
            row = self.conn.execute(f"SELECT id FROM documents WHERE id = ? AND {scope_where()}", (record_id, *sp)).fetchone()
            return (row[0], None) if row else None
        if kind == "chunk":
            row = self.conn.execute(f"SELECT document_id FROM chunks WHERE id = ? AND {scope_where()}",
                                    (record_id, *sp)).fetchone()
            return (row[0], None) if row else None
        if kind == "fact":
            row = self.conn.execute(f"SELECT memory_id FROM facts WHERE id = ? AND {scope_where()}", (record_id, *sp)).fetchone()
            if row is None:
                return None
            record_id = row[0]
        elif kind != "memory":
            return None
        row = self.conn.execute(
            f"SELECT s.document_id FROM memory_sources s WHERE s.memory_id = ? AND {scope_where('s')} ORDER BY s.id LIMIT 1",
            (record_id, *sp)).fetchone()
        return (row[0], record_id) if row else None

    def span_view(self, scope: Scope, document_id: int) -> dict[str, Any] | None:
        """A document with its chunks, every evidence span in it (with its memory) and entity mentions."""
        sp = scope.as_params()
        docs = dict_rows(self.conn, f"SELECT id, source_type, uri, title, text, trust, source_time, retracted_at,"
                         f" version, meta FROM documents WHERE id = ? AND {scope_where()}", (document_id, *sp))
        if not docs:
            return None
        doc = docs[0]
        doc["meta"] = json.loads(doc["meta"])
        chunks = dict_rows(self.conn,
                           'SELECT id, ordinal, kind, start, "end", speaker, role, message_id, source_time, trust,'
                           f" quotes_chunk_id, meta FROM chunks WHERE document_id = ? AND {scope_where()} ORDER BY ordinal",
                           (document_id, *sp))
        for c in chunks:
            c["meta"] = json.loads(c["meta"])
        spans = dict_rows(
            self.conn,
            'SELECT s.memory_id, s.chunk_id, s.start, s."end", s.relevance, m.kind, substr(m.text, 1, 200) AS text,'
            f" {_STATUS_SQL} AS status, f.id AS fact_id"
            " FROM memory_sources s JOIN memories m ON m.id = s.memory_id LEFT JOIN facts f ON f.memory_id = m.id"
            f" WHERE s.document_id = ? AND {scope_where('s')} ORDER BY s.start, s.\"end\" DESC, s.memory_id",
            (document_id, *sp))
        mentions = dict_rows(
            self.conn,
            'SELECT e.id AS entity_id, e.name, e.kind, em.memory_id, em.start, em."end" FROM entity_mentions em'
            " JOIN entities e ON e.id = em.entity_id JOIN chunks c ON c.id = em.chunk_id"
            f" WHERE c.document_id = ? AND {scope_where('em')}"
            " AND em.start IS NOT NULL ORDER BY em.start",
            (document_id, *sp))
        # times a chunk names, resolved at ingestion (offsets made document offsets here)
        times = dict_rows(
            self.conn,
            'SELECT t.chunk_id, c.start + t.start AS start, c.start + t."end" AS "end", t.text, t.kind, t.window_start,'
            " t.window_end FROM chunk_times t JOIN chunks c ON c.id = t.chunk_id WHERE c.document_id = ? AND"
            f" {scope_where('t')} ORDER BY c.start + t.start",
            (document_id, *sp))
        return {"document": doc, "chunks": chunks, "spans": spans, "mentions": mentions, "times": times}

    # evidence for facts (profile, conflicts) -----------------------------------------------------------
    def evidence_spans(self, scope: Scope, memory_ids: list[int], *, context: int = 80
                       ) -> dict[int, list[dict[str, Any]]]:
        """Per memory: each source span with its document's title/type/trust and up to `context`
        characters of its chunk before and after it."""
        out: dict[int, list[dict[str, Any]]] = {mid: [] for mid in memory_ids}
        if not memory_ids:
            return out
        marks = ",".join("?" * len(memory_ids))
        rows = dict_rows(
            self.conn,
            'SELECT s.memory_id, s.chunk_id, s.document_id, s.start, s."end", d.title, d.uri, d.source_type,'
            " d.trust, d.retracted_at, c.speaker, c.source_time,"
            # Context stays inside the span's chunk: the text around a quote, not the next message.
            " substr(d.text, max(c.start, s.start - ?) + 1, s.start - max(c.start, s.start - ?)) AS before,"
            ' substr(d.text, s.start + 1, s."end" - s.start) AS text,'
            ' substr(d.text, s."end" + 1, min(c."end", s."end" + ?) - s."end") AS after'
            " FROM memory_sources s JOIN documents d ON d.id = s.document_id JOIN chunks c ON c.id = s.chunk_id"
            f" WHERE s.memory_id IN ({marks}) AND {scope_where('s')} ORDER BY s.memory_id, s.id",
            (context, context, context, *memory_ids, *scope.as_params()))
        for r in rows:
            out.setdefault(r["memory_id"], []).append(r)
        return out
