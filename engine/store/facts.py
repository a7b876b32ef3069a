"""SQL for facts, relations, conflicts, the curation log and row images (for undo)."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from ..records import Conflict, CurationEntry, ExtractionWindow, Fact, Record, Relation
from ..scope import Scope
from .sql import dict_rows, scope_where

# Tables whose rows curation may snapshot and restore, and their JSON columns.
UNDOABLE_TABLES = ("facts", "memories", "memory_relations", "memory_sources", "conflicts", "documents",
                   "chunks", "embeddings", "entities", "entity_mentions")

FACT_COLUMNS = (
    "memory_id", "subject", "predicate", "object", "subject_key", "predicate_key", "object_key",
    "relation", "status", "confidence", "importance", "category", "is_static", "valid_from", "valid_to",
    "learned_at", "invalidated_at", "forget_after", "supersedes_fact_id", "evidence", "evidence_unverified",
    "source_count", "extraction_method", "extractor_model", "prompt_version", "rule", "reason", "external_ref",
)


# The one read of a fact: its row and, from its memory, the fields Fact lists after the table's,
# in Fact's field order (so a row is Fact(*row)).
_MEMORY_FIELDS = ("trust", "text", "pinned", "forgotten_at", "forget_reason")
_FACT_SELECT = ("SELECT " + ", ".join(f'{"m" if f.name in _MEMORY_FIELDS else "f"}."{f.name}"' for f in fields(Fact))
                + " FROM facts f JOIN memories m ON m.id = f.memory_id")


def _select(record: type[Record], table: str) -> str:
    """SELECT of a table's columns in the record's field order (so a row is record(*row))."""
    return "SELECT " + ", ".join(f'"{f.name}"' for f in fields(record)) + f" FROM {table}"  # type: ignore[arg-type]


_CONFLICT_SELECT = _select(Conflict, "conflicts")
_RELATION_SELECT = _select(Relation, "memory_relations")
_CURATION_SELECT = _select(CurationEntry, "curation_log")
_WINDOW_SELECT = _select(ExtractionWindow, "extraction_queue")
_CURATION_FIELDS = tuple(f.name for f in fields(CurationEntry))


def _entry(row: tuple[Any, ...]) -> CurationEntry:
    entry = dict(zip(_CURATION_FIELDS, row))
    entry["before"], entry["after"] = json.loads(entry["before"]), json.loads(entry["after"])
    return CurationEntry(**entry)


class FactWrites:
    """Mixed into store.Writer: `self.conn`, `self._sp` (scope params) and `self.now` exist."""

    conn: Any
    _sp: tuple[str, str, str, str]
    now: str

    def insert_fact(self, **values: Any) -> int:
        cols = [c for c in FACT_COLUMNS if c in values]
        unknown = set(values) - set(FACT_COLUMNS)
        if unknown:
            raise ValueError(f"unknown fact columns: {sorted(unknown)}")
        self.conn.execute(
            f"INSERT INTO facts(user_id, agent_id, scope_type, scope_id, {', '.join(cols)})"
            f" VALUES (?,?,?,?,{','.join('?' * len(cols))})",
            (*self._sp, *(values[c] for c in cols)))
        return self.conn.last_insert_rowid()

    def update_fact(self, fact_id: int, **values: Any) -> None:
        unknown = set(values) - set(FACT_COLUMNS)
        if unknown or not values:
            raise ValueError(f"bad fact update: {sorted(unknown) or 'nothing to set'}")
        sets = ", ".join(f"{c} = ?" for c in values)
        self.conn.execute(f"UPDATE facts SET {sets} WHERE id = ? AND {scope_where()}",
                          (*values.values(), fact_id, *self._sp))

    def update_memory(self, memory_id: int, **values: Any) -> None:
        allowed = {"confidence", "importance", "forgotten_at", "forget_reason", "pinned", "retracted_at",
                   "forget_after", "category", "is_static", "text", "access_count", "last_accessed_at", "strength"}
        if set(values) - allowed or not values:
            raise ValueError(f"bad memory update: {sorted(set(values) - allowed)}")
        sets = ", ".join(f"{c} = ?" for c in values)
        self.conn.execute(f"UPDATE memories SET {sets}, updated_at = ? WHERE id = ? AND {scope_where()}",
                          (*values.values(), self.now, memory_id, *self._sp))

    def retract_document(self, document_id: int, when: str, reason: str) -> None:
        self.conn.execute(f"UPDATE documents SET retracted_at = ?, retract_reason = ? WHERE id = ? AND {scope_where()}",
                          (when, reason, document_id, *self._sp))

    def add_relation(self, *, src_memory_id: int, dst_memory_id: int, type: str, confidence: float,
                     created_by: str, rule: str | None, reason: str | None,
                     evidence_chunk_id: int | None = None) -> int:
        self.conn.execute(
            "INSERT INTO memory_relations(user_id, agent_id, scope_type, scope_id, src_memory_id, dst_memory_id,"
            " type, confidence, evidence_chunk_id, created_by, rule, reason, created_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*self._sp, src_memory_id, dst_memory_id, type, confidence, evidence_chunk_id, created_by, rule,
             reason, self.now))
        return self.conn.last_insert_rowid()

    def open_conflict(self, *, fact_a_id: int, fact_b_id: int | None, rule: str, reason: str) -> int:
        self.conn.execute(
            "INSERT INTO conflicts(user_id, agent_id, scope_type, scope_id, fact_a_id, fact_b_id, rule, reason,"
            " status, created_at) VALUES (?,?,?,?,?,?,?,?,'open',?)",
            (*self._sp, fact_a_id, fact_b_id, rule, reason, self.now))
        return self.conn.last_insert_rowid()

    def set_conflict(self, conflict_id: int, *, status: str, resolution: str | None, curation_id: int | None) -> None:
        self.conn.execute(
            f"UPDATE conflicts SET status = ?, resolution = ?, resolved_at = ?, curation_id = ?"
            f" WHERE id = ? AND {scope_where()}",
            (status, resolution, self.now if status != "open" else None, curation_id, conflict_id, *self._sp))

    def log_curation(self, *, command: str, target_type: str | None, target_id: int | None, before: dict[str, Any],
                     after: dict[str, Any], actor: str, note: str | None, undo_of: int | None = None) -> int:
        self.conn.execute(
            "INSERT INTO curation_log(user_id, agent_id, scope_type, scope_id, command, target_type, target_id,"
            " before, after, actor, note, created_at, undo_of) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*self._sp, command, target_type, target_id, json.dumps(before, sort_keys=True),
             json.dumps(after, sort_keys=True), actor, note, self.now, undo_of))
        return self.conn.last_insert_rowid()

    def mark_undone(self, log_id: int, undone: bool) -> None:
        self.conn.execute(f"UPDATE curation_log SET undone_at = ? WHERE id = ? AND {scope_where()}",
                          (self.now if undone else None, log_id, *self._sp))

    # extraction queue and model calls ----------------------------------------------------------
    def enqueue_window(self, document_id: int, first_ordinal: int, last_ordinal: int) -> bool:
        self.conn.execute(
            "INSERT OR IGNORE INTO extraction_queue(user_id, agent_id, scope_type, scope_id, document_id,"
            " first_ordinal, last_ordinal, status, attempts, created_at, updated_at)"
            " VALUES (?,?,?,?,?,?,?,'pending',0,?,?)",
            (*self._sp, document_id, first_ordinal, last_ordinal, self.now, self.now))
        return self.conn.changes() > 0

    def finish_window(self, window_id: int, *, ok: bool, error: str | None) -> None:
        self.conn.execute(
            "UPDATE extraction_queue SET status = ?, attempts = attempts + 1, last_error = ?, updated_at = ?"
            f" WHERE id = ? AND {scope_where()}",
            ("done" if ok else "failed", error, self.now, window_id, *self._sp))

    def record_llm_call(self, rec: Any) -> int:
        self.conn.execute(
            "INSERT INTO llm_calls(user_id, agent_id, scope_type, scope_id, task, model, request_hash, request,"
            " response, ok, error, prompt_tokens, completion_tokens, latency_ms, created_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*self._sp, rec.task, rec.model, rec.request_hash, rec.request_json, rec.response_text, int(rec.ok),
             rec.error if not rec.detail else f"{rec.error}: {rec.detail}", rec.prompt_tokens,
             rec.completion_tokens, rec.latency_ms, rec.created_at))
        return self.conn.last_insert_rowid()

    # row images ---------------------------------------------------------------------------
    def ids_where(self, table: str, column: str, value: Any) -> list[int]:
        if table not in UNDOABLE_TABLES or not column.isidentifier():
            raise ValueError("bad table or column")
        return [r[0] for r in self.conn.execute(
            f'SELECT id FROM {table} WHERE "{column}" = ? AND {scope_where()} ORDER BY id', (value, *self._sp))]

    def row_image(self, table: str, row_id: int) -> dict[str, Any] | None:
        if table not in UNDOABLE_TABLES:
            raise ValueError(f"table {table} is not undoable")
        rows = dict_rows(self.conn, f"SELECT * FROM {table} WHERE id = ? AND {scope_where()}", (row_id, *self._sp))
        if not rows:
            return None
        row = rows[0]
        if "vector" in row and isinstance(row["vector"], bytes):
            row["vector"] = row["vector"].hex()
        return row

    def restore_row(self, table: str, row_id: int, image: dict[str, Any] | None) -> None:
        """Make row `row_id` of `table` equal `image` (None: the row must not exist)."""
        if table not in UNDOABLE_TABLES:
            raise ValueError(f"table {table} is not undoable")
        if image is None:
            self.conn.execute(f"DELETE FROM {table} WHERE id = ? AND {scope_where()}", (row_id, *self._sp))
            return
        image = dict(image)
        if image.get("user_id") != self._sp[0] or image.get("scope_id") != self._sp[3]:
            raise ValueError("row image belongs to another scope")
        if "vector" in image and isinstance(image["vector"], str):
            image["vector"] = bytes.fromhex(image["vector"])
        cols = list(image)
        exists = self.conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (row_id,)).fetchone()
        if exists:
            sets = ", ".join(f'"{c}" = ?' for c in cols if c != "id")
            self.conn.execute(f"UPDATE {table} SET {sets} WHERE id = ?",
                              (*(image[c] for c in cols if c != "id"), row_id))
        else:
            self.conn.execute(
                f"INSERT INTO {table}({', '.join(chr(34) + c + chr(34) for c in cols)}) VALUES ({','.join('?' * len(cols))})",
                tuple(image[c] for c in cols))


class FactReads:
    """Mixed into store.Store: `self.conn` exists."""

    conn: Any

    def _facts(self, where: str, params: tuple[Any, ...]) -> list[Fact]:
        """Facts (with their memory's fields) WHERE `where`, a condition on `f` and `m`."""
        return [Fact(*row) for row in self.conn.execute(f"{_FACT_SELECT} WHERE {where}", params)]

    def current_facts(self, scope: Scope) -> list[Fact]:
        """Active and needs-review facts whose memory is live (neither forgotten nor retracted)."""
        return self._facts(f"{scope_where('f')} AND f.status IN ('active', 'needs_review')"
                           " AND m.forgotten_at IS NULL AND m.retracted_at IS NULL ORDER BY f.id", scope.as_params())

    def facts_by_ids(self, scope: Scope, fact_ids: list[int]) -> dict[int, Fact]:
        if not fact_ids:
            return {}
        marks = ",".join("?" * len(fact_ids))
        return {f.id: f for f in self._facts(f"f.id IN ({marks}) AND {scope_where('f')}",
                                               (*fact_ids, *scope.as_params()))}

    def facts_for_keys(self, scope: Scope, keys: list[tuple[str, str]],
                       statuses: tuple[str, ...] = ("active", "needs_review")) -> list[Fact]:
        out: list[Fact] = []
        marks = ",".join("?" * len(statuses))
        for subject_key, predicate_key in sorted(set(keys)):
            out += self._facts(f"{scope_where('f')} AND f.subject_key = ? AND f.predicate_key = ?"
                               f" AND f.status IN ({marks}) ORDER BY f.id",
                               (*scope.as_params(), subject_key, predicate_key, *statuses))
        return out

    def facts_of_subjects(self, scope: Scope, subject_keys: list[str],
                          statuses: tuple[str, ...] = ("active", "needs_review")) -> list[dict[str, Any]]:
        """Every current fact about these subjects (a change that names what it replaced looks for
        the fact holding that value, whatever its predicate)."""
        out: list[dict[str, Any]] = []
        marks = ",".join("?" * len(statuses))
        for key in sorted(set(subject_keys)):
            out += dict_rows(
                self.conn,
                "SELECT f.id, f.predicate, f.predicate_key, f.object_key, f.category FROM facts f"
                f" WHERE {scope_where('f')} AND f.subject_key = ?"
                f" AND f.status IN ({marks}) ORDER BY f.id", (*scope.as_params(), key, *statuses))
        return out

    def fact(self, scope: Scope, fact_id: int) -> dict[str, Any] | None:
        """The fact as a JSON-ready dict (the inspector, CLI and MCP); domain code reads fact_record."""
        record = self.fact_record(scope, fact_id)
        return record.as_dict() if record is not None else None

    def fact_record(self, scope: Scope, fact_id: int) -> Fact | None:
        rows = self._facts(f"f.id = ? AND {scope_where('f')}", (fact_id, *scope.as_params()))
        return rows[0] if rows else None

    def fact_by_memory(self, scope: Scope, memory_id: int) -> dict[str, Any] | None:
        record = self.fact_record_by_memory(scope, memory_id)
        return record.as_dict() if record is not None else None

    def fact_record_by_memory(self, scope: Scope, memory_id: int) -> Fact | None:
        rows = self._facts(f"f.memory_id = ? AND {scope_where('f')} ORDER BY f.id LIMIT 1",
                           (memory_id, *scope.as_params()))
        return rows[0] if rows else None

    def facts(self, scope: Scope, *, subject_key: str | None = None, statuses: tuple[str, ...] | None = None,
              limit: int = 100000) -> list[Fact]:
        where = scope_where("f")
        params: list[Any] = [*scope.as_params()]
        if subject_key is not None:
            where += " AND f.subject_key = ?"
            params.append(subject_key)
        if statuses:
            where += f" AND f.status IN ({','.join('?' * len(statuses))})"
            params += list(statuses)
        return self._facts(where + " ORDER BY f.subject_key, f.predicate_key, f.id LIMIT ?", (*params, limit))

    def relations_of(self, scope: Scope, memory_id: int) -> list[Relation]:
        return [Relation(*row) for row in self.conn.execute(
            f"{_RELATION_SELECT} WHERE (src_memory_id = ? OR dst_memory_id = ?) AND {scope_where()}"
            " AND removed_at IS NULL ORDER BY id", (memory_id, memory_id, *scope.as_params()))]

    def relations(self, scope: Scope) -> list[Relation]:
        return [Relation(*row) for row in self.conn.execute(
            f"{_RELATION_SELECT} WHERE {scope_where()} AND removed_at IS NULL ORDER BY id", scope.as_params())]

    def conflicts(self, scope: Scope, *, status: str | None = "open") -> list[Conflict]:
        sql = f"{_CONFLICT_SELECT} WHERE {scope_where()}"
        params: tuple[Any, ...] = scope.as_params()
        if status:
            sql += " AND status = ?"
            params += (status,)
        return [Conflict(*row) for row in self.conn.execute(sql + " ORDER BY id", params)]

    def conflict(self, scope: Scope, conflict_id: int) -> dict[str, Any] | None:
        """The conflict as a JSON-ready dict; domain code reads conflict_record."""
        record = self.conflict_record(scope, conflict_id)
        return record.as_dict() if record is not None else None

    def conflict_record(self, scope: Scope, conflict_id: int) -> Conflict | None:
        rows = [Conflict(*row) for row in self.conn.execute(f"{_CONFLICT_SELECT} WHERE id = ? AND {scope_where()}",
                                                             (conflict_id, *scope.as_params()))]
        return rows[0] if rows else None

    def curation_log(self, scope: Scope, *, limit: int = 1000) -> list[CurationEntry]:
        return [_entry(row) for row in self.conn.execute(
            f"{_CURATION_SELECT} WHERE {scope_where()} ORDER BY id DESC LIMIT ?", (*scope.as_params(), limit))]

    def curation_entry(self, scope: Scope, log_id: int) -> CurationEntry | None:
        row = self.conn.execute(f"{_CURATION_SELECT} WHERE id = ? AND {scope_where()}",
                                (log_id, *scope.as_params())).fetchone()
        return _entry(row) if row is not None else None

    def pending_windows(self, scope: Scope, *, max_attempts: int) -> list[ExtractionWindow]:
        return [ExtractionWindow(*row) for row in self.conn.execute(
            f"{_WINDOW_SELECT} WHERE {scope_where()} AND status IN ('pending','failed') AND attempts < ? ORDER BY id",
            (*scope.as_params(), max_attempts))]

    def queue_counts(self, scope: Scope) -> dict[str, int]:
        return {r[0]: r[1] for r in self.conn.execute(
            f"SELECT status, count(*) FROM extraction_queue WHERE {scope_where()} GROUP BY status", scope.as_params())}

    def llm_calls(self, scope: Scope, *, limit: int = 100) -> list[dict[str, Any]]:
        return dict_rows(self.conn, f"SELECT * FROM llm_calls WHERE {scope_where()} ORDER BY id DESC LIMIT ?",
                         (*scope.as_params(), limit))

    def due_for_expiry(self, scope: Scope, now: str) -> list[Fact]:
        return self._facts(f"{scope_where('f')} AND f.status IN ('active','needs_review')"
                           " AND f.forget_after IS NOT NULL AND f.forget_after <= ? ORDER BY f.id",
                           (*scope.as_params(), now))

    def document_support(self, scope: Scope, document_id: int) -> list[dict[str, Any]]:
        """Memories with a source in this document, and how many sources they have in other documents
        that are not retracted."""
        return dict_rows(
            self.conn,
            "SELECT s.memory_id, m.kind,"
            # support elsewhere: sources in other documents that still stand (not retracted themselves)
            " (SELECT count(*) FROM memory_sources o JOIN documents d ON d.id = o.document_id"
            "  WHERE o.memory_id = s.memory_id AND o.document_id != ? AND d.retracted_at IS NULL) AS elsewhere"
            " FROM memory_sources s JOIN memories m ON m.id = s.memory_id"
            f" WHERE s.document_id = ? AND {scope_where('s')}"
            " GROUP BY s.memory_id",
            (document_id, document_id, *scope.as_params()))


__all__ = ["FactReads", "FactWrites", "UNDOABLE_TABLES", "FACT_COLUMNS", "dict_rows"]
