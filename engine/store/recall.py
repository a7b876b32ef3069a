"""SQL the recall pipeline needs: vectors, candidate metadata, channel lookups, traces."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import Any, NamedTuple, TypeVar

import apsw
import numpy as np

from .. import jsontext
from ..records import StoredTrace, TraceCandidate
from ..scope import Scope
from .schema import FTS_TOKENIZER
from .sql import dict_rows, scope_where


class StoredParse(NamedTuple):
    """What memory_clauses keeps of a turn's text (engine.statements and the recall's current-truth
    stage read it back): its parse, its same_slot readings, and the vectors of the clauses recall
    has embedded under one embedder model."""

    digest: bytes  # engine.statements.text_digest of the parsed text
    clauses: str  # engine.statements.encode_clauses
    readings: str | None  # engine.statements.encode_slot_readings
    vectors_model: str | None  # the embedder the vectors are of (model/dims)
    vectors: bytes | None  # float32 rows, one a clause in vector_at
    vector_at: str | None  # the clauses' indices, comma-separated, ascending


# A memory_clauses row as written: (memory id, text digest, rules version, encoded clauses, encoded
# readings, vectors' model, vectors, their clause indices): StoredParse's fields with the memory
# and the rules version (engine.statements.RULES_VERSION) they were made under.
ClauseRow = tuple[int, bytes, str, str, str | None, str | None, bytes | None, str | None]

# and the trace's candidates as one JSON array, where it has one (schema v8; else trace_candidates rows)
_TRACE_FIELDS = (*(f.name for f in fields(StoredTrace) if f.name != "candidates"), "candidate_rows")
_TRACE_COLUMNS = ", ".join(f'"{name}"' for name in _TRACE_FIELDS)
_CANDIDATE_FIELDS = tuple(f.name for f in fields(TraceCandidate))
_CANDIDATE_COLUMNS = ", ".join(f'"{name}"' for name in _CANDIDATE_FIELDS)
_IN_CHUNK = 500  # SQLite variable limit is far higher; this keeps statements cacheable
_COMPOUND_SELECTS = 400  # SQLite joins at most 500 selects in one compound


def _chunks(ids: list[int]) -> Iterator[list[int]]:
    for i in range(0, len(ids), _IN_CHUNK):
        yield ids[i:i + _IN_CHUNK]



# What recall reads of the data alone, kept per thread while the data is unchanged
# (Database.data_key; RecallReads._kept): a conversation's questions meet the same few hundred
# memories, and reading them again was a tenth of a recall's CPU (LoCoMo dev). Each kept dict is
# emptied whole beyond this many.
META_CACHE_ROWS = 20_000
K = TypeVar("K", int, str)  # a kept row's key: a memory id, or a name
_ABSENT: dict[str, Any] = {}  # a memory not in the scope (or deleted): remembered as absent


class RecallReads:
    conn: Any
    db: Any
    _meta_local: Any  # threading.local of Store

    def _kept(self, name: str, *key: Any) -> dict[Any, Any]:
        """This thread's dict under `name`, kept while the data is unchanged (Database.data_key) and
        `key` (a scope, a limit) is the same: the one mechanism behind every answer recall keeps
        across calls (candidate_meta's rows, kept_rows, term counts, what the store holds). A new
        key or new data starts it empty, and so does growing beyond META_CACHE_ROWS."""
        local = self._meta_local
        state = (key, self.db.data_key())
        kept: tuple[Any, dict[Any, Any]] | None = getattr(local, name, None)
        if kept is None or kept[0] != state or len(kept[1]) > META_CACHE_ROWS:
            kept = (state, {})
            setattr(local, name, kept)
        return kept[1]

    def _kept_now(self, name: str, *key: Any) -> dict[Any, Any] | None:
        """This thread's dict under `name` if it is kept for `key` and the data as it is now (as
        _kept would serve it), else None: nothing is started."""
        kept: tuple[Any, dict[Any, Any]] | None = getattr(self._meta_local, name, None)
        return kept[1] if kept is not None and kept[0] == (key, self.db.data_key()) else None

    # vectors ----------------------------------------------------------------------------------
    # embeddings.stale: 0 current, 1 unusable (another model wrote it), 2 outdated (this model, an
    # older definition of the text it embeds: searchable until the background re-embed redoes it)
    def vector_state(self, scope: Scope, model: str) -> tuple[int, int, str, int]:
        """(max row id, rows, newest created_at, outdated rows) of the vectors search may use."""
        row = self.conn.execute(
            f"SELECT coalesce(max(id), 0), count(*), coalesce(max(created_at), ''), coalesce(sum(stale = 2), 0)"
            f" FROM embeddings WHERE {scope_where()} AND owner_type = 'memory' AND stale != 1 AND model = ?",
            (*scope.as_params(), model)).fetchone()
        return int(row[0]), int(row[1]), row[2], int(row[3])

    def vector_changes(self) -> int:
        """A number that changes whenever any stored vector is added, replaced or removed."""
        return self.conn.execute("SELECT n FROM vector_changes").fetchone()[0]

    def vector_count_after(self, scope: Scope, model: str, after_id: int) -> int:
        return self.conn.execute(
            f"SELECT count(*) FROM embeddings WHERE {scope_where()} AND owner_type = 'memory' AND stale != 1"
            " AND model = ? AND id > ?", (*scope.as_params(), model, after_id)).fetchone()[0]

    def load_vectors(self, scope: Scope, model: str, dims: int, after_id: int = 0
                     ) -> tuple[np.ndarray, np.ndarray, int]:
        """(memory ids, float32 matrix, max embedding row id) of current vectors with row id > after_id.

        Rows are copied straight into one preallocated matrix, so loading 1M x 384 needs the
        1.5 GB of the result and little more (no list of blobs, no joined copy).
        """
        n = self.vector_count_after(scope, model, after_id)
        ids = np.zeros(n, dtype=np.int64)
        mat = np.zeros((n, dims), dtype=np.float32)
        last = after_id
        i = 0
        for rid, owner, blob in self.conn.execute(
                f"SELECT id, owner_id, vector FROM embeddings WHERE {scope_where()} AND owner_type = 'memory'"
                " AND stale != 1 AND model = ? AND dims = ? AND id > ? ORDER BY id",
                (*scope.as_params(), model, dims, after_id)):
            if i == n:  # a writer added rows since the count: the next refresh takes them
                break
            ids[i] = owner
            mat[i] = np.frombuffer(blob, dtype=np.float32)
            last = rid
            i += 1
        return ids[:i], mat[:i], last

    # full text --------------------------------------------------------------------------------
    def _fts_tokenizer(self) -> Any:  # apsw.FTS5Tokenizer, whose result type depends on the flags
        local = self.db._local  # the tokenizer belongs to this thread's connection
        tok = getattr(local, "fts_tokenizer", None)
        if tok is None:
            tok = local.fts_tokenizer = self.conn.fts5_tokenizer(FTS_TOKENIZER[0], list(FTS_TOKENIZER[1]))
        return tok

    def fts_tokens(self, text: str) -> list[tuple[str, str]]:
        """(surface, index term) for each token of `text`, split exactly as the FTS index splits
        memory text (FTS_TOKENIZER), so a query can only ask for terms the index can hold."""
        raw = text.encode("utf-8")
        toks = self._fts_tokenizer()(raw, apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=True,
                                     include_colocated=False)
        return [(raw[start:end].decode("utf-8", "replace"), term) for start, end, term in toks]

    def fts_term_frequencies(self, terms: list[str], *, at_most: int | None = None) -> dict[str, int]:
        """term -> number of memories containing it (any scope: an estimate for choosing terms).
        at_most: a count above it is reported as at_most + 1, and costs no more than that many
        rows (the vocabulary's count reads a term's whole posting list: ~10 ms a common word at 1M)."""
        tok = self._fts_tokenizer()
        stems: dict[str, list[str]] = {}
        surfaces: dict[str, str] = {}  # index term -> a word that the tokenizer turns into it
        for term in terms:
            raw = term.encode("utf-8")
            toks = tok(raw, apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=True, include_colocated=False)
            if toks:
                stems[term] = [t for _, _, t in toks]
                for start, end, t in toks:
                    surfaces.setdefault(t, raw[start:end].decode("utf-8", "replace"))
        if not stems:
            return {}
        if at_most is not None:
            # counted once while the data is unchanged (Database.data_key): a conversation's
            # questions ask about the same names and things, and these counts were a twentieth of
            # a recall's CPU (LoCoMo dev)
            counted: dict[str, int] = self._kept("df", at_most)
            df = {}
            for t, w in surfaces.items():
                n = counted.get(t)
                if n is None:
                    n = counted[t] = self.conn.execute(
                        "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)",
                        ('"' + w.replace('"', '""') + '"', at_most + 1)).fetchone()[0]
                df[t] = n
            return {term: min(df[s] for s in parts) for term, parts in stems.items()}
        wanted = sorted({s for parts in stems.values() for s in parts})
        marks = ",".join("?" * len(wanted))
        df = {r[0]: r[1] for r in self.conn.execute(
            f"SELECT term, doc FROM memories_fts_vocab WHERE term IN ({marks})", tuple(wanted))}
        # a phrase ("how old", "art-related") is in at most as many memories as its rarest word
        return {term: min(df.get(s, 0) for s in parts) for term, parts in stems.items()}

    def chunk_times(self, scope: Scope, chunk_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
        """chunk id -> the times it names ({"start", "end", "text", "kind", "window_start",
        "window_end"}; offsets inside the chunk), in text order."""
        out: dict[int, list[dict[str, Any]]] = {}
        for part in _chunks(sorted(set(chunk_ids))):
            marks = ",".join("?" * len(part))
            for row in dict_rows(
                    self.conn,
                    f'SELECT chunk_id, start, "end", text, kind, window_start, window_end FROM chunk_times'
                    f" WHERE {scope_where()} AND chunk_id IN ({marks}) ORDER BY chunk_id, start",
                    (*scope.as_params(), *part)):
                out.setdefault(row.pop("chunk_id"), []).append(row)
        return out

    def memory_count_estimate(self) -> int:
        row = self.conn.execute("SELECT max(id) FROM memories").fetchone()
        return int(row[0] or 0)

    # channels ---------------------------------------------------------------------------------
    def entity_memories(self, scope: Scope, canonicals: list[str], limit: int, *, each: int | None = None
                        ) -> list[tuple[int, int]]:
        """(memory_id, number of the named entities it mentions), most first, newest first.
        each: count only an entity's newest `each` memories, read in index order, so a name in
        200,000 memories costs what one in `each` does (the whole aggregation was most of a
        recall's CPU at 1M memories); where no entity is in more than `each`, the same result."""
        if not canonicals:
            return []
        marks = ",".join("?" * len(canonicals))
        if each is None:
            return [tuple(r) for r in self.conn.execute(
                "SELECT em.memory_id, count(DISTINCT e.id) AS n FROM entities e"
                " JOIN entity_mentions em ON em.entity_id = e.id"
                f" WHERE {scope_where('e')} AND e.canonical IN ({marks})"
                " GROUP BY em.memory_id ORDER BY n DESC, em.memory_id DESC LIMIT ?",
                (*scope.as_params(), *canonicals, limit))]
        with self.conn:  # one snapshot for the entities and their mentions
            eids = [r[0] for r in self.conn.execute(
                f"SELECT id FROM entities e WHERE {scope_where('e')} AND e.canonical IN ({marks})",
                (*scope.as_params(), *canonicals))]
            n: dict[int, int] = {}
            size = _COMPOUND_SELECTS
            parts = [eids[i:i + size] for i in range(0, len(eids), size)]
            for part in parts:
                newest = " UNION ALL ".join(["SELECT * FROM (SELECT DISTINCT memory_id FROM entity_mentions"
                                             " WHERE entity_id = ? ORDER BY memory_id DESC LIMIT ?)"] * len(part))
                rows = self.conn.execute(
                    f"SELECT memory_id, count(*) AS n FROM ({newest}) GROUP BY memory_id"
                    + (" ORDER BY n DESC, memory_id DESC LIMIT ?" if len(parts) == 1 else ""),
                    (*(x for eid in part for x in (eid, each)), *((limit,) if len(parts) == 1 else ())))
                for mid, c in rows:
                    n[mid] = n.get(mid, 0) + c
        return sorted(n.items(), key=lambda kv: (-kv[1], -kv[0]))[:limit]

    def entity_kinds(self, scope: Scope, canonicals: list[str]) -> dict[str, list[tuple[int, str]]]:
        """canonical name -> (entity id, kind) of every entity filed under it."""
        out: dict[str, list[tuple[int, str]]] = {}
        if canonicals:
            marks = ",".join("?" * len(canonicals))
            for eid, canonical, kind in self.conn.execute(
                    f"SELECT id, canonical, kind FROM entities WHERE {scope_where()} AND canonical IN ({marks})"
                    " ORDER BY id", (*scope.as_params(), *canonicals)):
                out.setdefault(canonical, []).append((eid, kind))
        return out

    def entity_names(self, scope: Scope, canonicals: list[str]) -> dict[str, int]:
        """Which of these canonical names are known entities (canonical -> mention count, over every
        kind a name was filed as: "Ana" the speaker and "Ana" the name are one name here)."""
        if not canonicals:
            return {}
        marks = ",".join("?" * len(canonicals))
        return {r[0]: r[1] for r in self.conn.execute(
            "SELECT e.canonical, sum((SELECT count(*) FROM entity_mentions em WHERE em.entity_id = e.id))"
            f" FROM entities e WHERE {scope_where()} AND e.canonical IN ({marks}) GROUP BY e.canonical",
            (*scope.as_params(), *canonicals))}

    def _holds_any(self, what: str) -> bool:
        """Does the store hold a live relation ("relations") or any fact ("facts")? Asked once while
        the data is unchanged (Database.data_key): a store without them (a benchmark container
        ingested without extraction) need not look relations and a turn's claims up at every
        recall, two queries over a hundred or more candidates each."""
        held: dict[str, bool] = self._kept("held")
        hit = held.get(what)
        if hit is None:
            sql = {"relations": "SELECT EXISTS (SELECT 1 FROM memory_relations WHERE removed_at IS NULL)",
                   "facts": "SELECT EXISTS (SELECT 1 FROM facts)"}[what]
            hit = held[what] = bool(self.conn.execute(sql).fetchone()[0])
        return hit

    def relation_edges(self, memory_ids: list[int]) -> list[dict[str, Any]]:
        """Every live relation touching these memories, from any scope (the caller checks scope)."""
        out: list[dict[str, Any]] = []
        if not memory_ids or not self._holds_any("relations"):
            return out
        for part in _chunks(memory_ids):
            marks = ",".join("?" * len(part))
            out += dict_rows(self.conn,
                             "SELECT id, src_memory_id, dst_memory_id, type, confidence, user_id, agent_id, scope_type,"
                             f" scope_id FROM memory_relations WHERE removed_at IS NULL AND (src_memory_id IN ({marks})"
                             f" OR dst_memory_id IN ({marks}))", (*part, *part))
        return out

    def baseline_memories(self, scope: Scope, limit: int) -> list[tuple[int, float]]:
        """Pinned and most important fact memories: a small prior-only channel."""
        return [tuple(r) for r in self.conn.execute(
            f"SELECT id, importance + pinned FROM memories WHERE {scope_where()} AND kind = 'fact'"
            " AND forgotten_at IS NULL AND retracted_at IS NULL ORDER BY pinned DESC, importance DESC, id DESC LIMIT ?",
            (*scope.as_params(), limit))]

    def neighbour_memories(self, scope: Scope, memory_ids: list[int], window: int) -> list[tuple[int, int, int]]:
        """(seed memory, neighbour episode, offset) for turns within `window` chunks in the same document;
        the offset is signed: +1 is the turn right after the seed."""
        out: list[tuple[int, int, int]] = []
        for part in _chunks(memory_ids):
            marks = ",".join("?" * len(part))
            out += [tuple(r) for r in self.conn.execute(
                "SELECT s.memory_id, s2.memory_id, c2.ordinal - c.ordinal FROM memory_sources s"
                " JOIN chunks c ON c.id = s.chunk_id"
                " JOIN chunks c2 ON c2.document_id = c.document_id AND c2.ordinal BETWEEN c.ordinal - ? AND c.ordinal + ?"
                "  AND c2.id != c.id"
                " JOIN memory_sources s2 ON s2.chunk_id = c2.id"
                " JOIN memories m2 ON m2.id = s2.memory_id AND m2.kind = 'episode'"
                f" WHERE s.memory_id IN ({marks}) AND {scope_where('s')}",
                (window, window, *part, *scope.as_params()))]
        return out

    # candidate metadata ------------------------------------------------------------------------
    def candidate_meta(self, scope: Scope, memory_ids: list[int]) -> dict[int, dict[str, Any]]:
        """memory -> what recall reads of it (its fact, its first source's speaker, document and
        chunk). The rows are shared with later calls while the data is unchanged: read them, never
        change them."""
        return self._kept_rows("rows", scope, memory_ids, self._candidate_meta)

    def _note_usage(self, scope: Scope, counts: dict[int, int]) -> None:
        """After a committed reinforce_usage: the kept rows of these memories take their new
        access_count (the usage prior reads it), each replaced by a copy, so a row already handed
        out stays as it was. Rows kept under another scope or older data are left to be emptied."""
        rows = self._kept_now("rows", scope.as_params())
        if rows is None:
            return
        for mid, count in counts.items():
            row = rows.get(mid)
            if row is not None and row is not _ABSENT:
                rows[mid] = {**row, "access_count": count}

    def kept_rows(self, name: str, scope: Scope, keys: list[K],
                  read: Callable[[Scope, list[K]], dict[K, dict[str, Any]]]) -> dict[K, dict[str, Any]]:
        """key -> its row by `read` (what recall decides from the data alone), kept as
        candidate_meta's rows are: while the scope and the data are unchanged."""
        return self._kept_rows(f"kept:{name}", scope, keys, read)

    def _kept_rows(self, name: str, scope: Scope, memory_ids: list[K],
                   read: Callable[[Scope, list[K]], dict[K, dict[str, Any]]]) -> dict[K, dict[str, Any]]:
        """memory -> its row by `read`, from this thread's rows under `name` while the scope and the
        data are unchanged (Database.data_key); a memory `read` does not return is remembered as
        absent. Emptied whole beyond META_CACHE_ROWS."""
        rows: dict[K, dict[str, Any]] = self._kept(name, scope.as_params())
        out = {mid: row for mid in memory_ids if (row := rows.get(mid)) is not None and row is not _ABSENT}
        missing = [mid for mid in dict.fromkeys(memory_ids) if mid not in rows]
        if missing:
            found = read(scope, missing)
            for mid in missing:
                rows[mid] = found.get(mid, _ABSENT)
            out.update(found)
        return out

    def _candidate_meta(self, scope: Scope, memory_ids: list[int]) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for part in _chunks(memory_ids):
            marks = ",".join("?" * len(part))
            for row in dict_rows(
                    self.conn,
                    "SELECT m.id, m.kind, m.text, m.trust, m.importance, m.confidence, m.source_time, m.created_at,"
                    " m.forget_after AS m_forget_after, m.forgotten_at, m.forget_reason, m.retracted_at,"
                    " m.access_count, m.pinned, m.content_hash, m.is_static,"
                    " f.id AS fact_id, f.subject, f.predicate, f.object, f.subject_key, f.predicate_key, f.status,"
                    " f.relation, f.valid_from, f.valid_to, f.learned_at, f.invalidated_at, f.forget_after,"
                    " f.supersedes_fact_id, f.confidence AS fact_confidence, f.evidence_unverified,"
                    # the first source, looked up once: its chunk's speaker, its document, the chunk
                    " c.speaker, c.role, fs.document_id, fs.chunk_id"
                    " FROM memories m LEFT JOIN facts f ON f.memory_id = m.id"
                    " LEFT JOIN memory_sources fs ON fs.id = (SELECT min(s.id) FROM memory_sources s"
                    "   WHERE s.memory_id = m.id)"
                    " LEFT JOIN chunks c ON c.id = fs.chunk_id"
                    f" WHERE m.id IN ({marks}) AND {scope_where('m')}",
                    (*part, *scope.as_params())):
                out[row["id"]] = row
        return out

    def turn_claims(self, scope: Scope, memory_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
        """episode memory -> the facts read from its chunk (any status): the claims a turn carried."""
        out: dict[int, list[dict[str, Any]]] = {}
        if not memory_ids or not self._holds_any("facts"):
            return out
        for part in _chunks(memory_ids):
            marks = ",".join("?" * len(part))
            for row in dict_rows(
                    self.conn,
                    "SELECT DISTINCT s1.memory_id AS turn_id, f.id AS fact_id, f.memory_id, f.subject_key, f.predicate_key,"
                    " f.object, f.status, f.valid_from, f.valid_to FROM memory_sources s1"
                    " JOIN memory_sources s2 ON s2.chunk_id = s1.chunk_id AND s2.memory_id != s1.memory_id"
                    " JOIN facts f ON f.memory_id = s2.memory_id"
                    f" WHERE s1.memory_id IN ({marks}) AND {scope_where('f')} ORDER BY f.id", (*part, *scope.as_params())):
                out.setdefault(row.pop("turn_id"), []).append(row)
        return out

    def memory_clauses(self, memory_ids: list[int], rules: str) -> dict[int, StoredParse]:
        """memory -> its stored parse by these rules (the caller checks the digest against the
        text it would parse). Memory ids come from this scope's candidates; the rows hold nothing
        but what was read of their memory's text."""
        out: dict[int, StoredParse] = {}
        for part in _chunks(memory_ids):
            marks = ",".join("?" * len(part))
            for mid, *row in self.conn.execute(
                    "SELECT memory_id, text_hash, clauses, readings, vectors_model, vectors, vector_at FROM"
                    f" memory_clauses WHERE memory_id IN ({marks}) AND rules = ?", (*part, rules)):
                out[mid] = StoredParse(*row)
        return out

    def newer_versions(self, scope: Scope, memory_ids: list[int]) -> dict[int, list[int]]:
        """fact memory -> the fact memories that updated it (live 'updates' relations, newer -> older)."""
        out: dict[int, list[int]] = {}
        for part in _chunks(memory_ids):
            marks = ",".join("?" * len(part))
            for dst, src in self.conn.execute(
                    f"SELECT dst_memory_id, src_memory_id FROM memory_relations WHERE dst_memory_id IN ({marks})"
                    f" AND type = 'updates' AND removed_at IS NULL AND {scope_where()} ORDER BY id",
                    (*part, *scope.as_params())):
                out.setdefault(dst, []).append(src)
        return out

    def first_sources(self, scope: Scope, memory_ids: list[int]) -> dict[int, dict[str, Any]]:
        """The first source span of each memory, with its document's title, type and chunk position.
        The rows are kept per thread while the data is unchanged (Database.data_key), as
        candidate_meta's, and shared with later calls: read them, never change them."""
        return self._kept_rows("sources", scope, memory_ids, self._first_sources)

    def _first_sources(self, scope: Scope, memory_ids: list[int]) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for part in _chunks(memory_ids):
            marks = ",".join("?" * len(part))
            for row in dict_rows(
                    self.conn,
                    "SELECT s.memory_id, s.document_id, s.chunk_id, s.start, s.\"end\", d.title, d.source_type, d.uri,"
                    " d.external_id, c.message_id, c.ordinal, c.speaker FROM memory_sources s"
                    " JOIN documents d ON d.id = s.document_id JOIN chunks c ON c.id = s.chunk_id"
                    f" WHERE s.memory_id IN ({marks}) AND {scope_where('s')} ORDER BY s.id", (*part, *scope.as_params())):
                out.setdefault(row["memory_id"], row)
        return out

    def message_ids(self, scope: Scope, memory_ids: list[int]) -> dict[int, list[str]]:
        """memory -> the message ids (dia_id, session:turn, ...) of the chunks it cites, in source order."""
        out: dict[int, list[str]] = {}
        for part in _chunks(memory_ids):
            marks = ",".join("?" * len(part))
            for mid, msg in self.conn.execute(
                    "SELECT s.memory_id, c.message_id FROM memory_sources s JOIN chunks c ON c.id = s.chunk_id"
                    f" WHERE s.memory_id IN ({marks}) AND {scope_where('s')} AND c.message_id IS NOT NULL ORDER BY s.id",
                    (*part, *scope.as_params())):
                out.setdefault(mid, []).append(msg)
        return out

    def embedding_context(self, memory_ids: list[int]) -> dict[int, tuple[Any, ...]]:
        """memory -> (memory kind, a fact's evidence, its first chunk's kind, the previous chunk's
        text and kind): what engine.embed.text.vector_text needs to re-embed it."""
        out: dict[int, tuple[Any, ...]] = {}
        for part in _chunks(memory_ids):
            marks = ",".join("?" * len(part))
            for mid, mkind, evidence, kind, prev_text, prev_kind in self.conn.execute(
                    "SELECT m.id, m.kind, f.evidence, c.kind, p.text, p.kind FROM memories m"
                    " LEFT JOIN facts f ON f.memory_id = m.id"
                    " LEFT JOIN memory_sources fs ON fs.id = (SELECT min(s.id) FROM memory_sources s"
                    "   WHERE s.memory_id = m.id)"
                    " LEFT JOIN chunks c ON c.id = fs.chunk_id"
                    " LEFT JOIN chunks p ON p.document_id = c.document_id AND p.ordinal = c.ordinal - 1"
                    f" WHERE m.id IN ({marks})", tuple(part)):
                out[mid] = (mkind, evidence, kind or "", prev_text, prev_kind)
        return out

    def fact_versions(self, scope: Scope, subject_key: str, predicate_key: str) -> list[dict[str, Any]]:
        return dict_rows(
            self.conn,
            "SELECT f.id, f.memory_id, f.object, f.status, f.valid_from, f.valid_to, f.learned_at, f.invalidated_at,"
            f" f.supersedes_fact_id FROM facts f WHERE {scope_where('f')} AND f.subject_key = ? AND f.predicate_key = ?"
            " ORDER BY coalesce(f.valid_from, f.learned_at), f.id",
            (*scope.as_params(), subject_key, predicate_key))

    def document_memory_counts(self, scope: Scope) -> list[tuple[int, int]]:
        """(document id, memories sourced from it), in document id order."""
        return [tuple(r) for r in self.conn.execute(
            f"SELECT document_id, count(DISTINCT memory_id) FROM memory_sources WHERE {scope_where()}"
            " GROUP BY document_id ORDER BY document_id", scope.as_params())]

    def latest_source_time(self, scope: Scope) -> str | None:
        row = self.conn.execute(f"SELECT max(source_time) FROM memories WHERE {scope_where()}", scope.as_params()).fetchone()
        return row[0]

    # traces ------------------------------------------------------------------------------------
    def trace(self, scope: Scope, trace_id: int) -> StoredTrace | None:
        row = self.conn.execute(f"SELECT {_TRACE_COLUMNS} FROM retrieval_traces WHERE id = ? AND {scope_where()}",
                                (trace_id, *scope.as_params())).fetchone()
        if row is None:
            return None
        t = dict(zip(_TRACE_FIELDS, row))
        packed = t.pop("candidate_rows")
        for key in ("params", "plan", "rerank", "stages", "timings"):
            if t.get(key):
                t[key] = json.loads(t[key])
        candidates = []
        if packed is not None:  # one JSON text (schema v8): its rows numbered in the order they were written;
            # a plain array is what the first v8 code wrote, still in databases written then
            sp = (t["user_id"], t["agent_id"], t["scope_type"], t["scope_id"])
            rows = json.loads(packed)
            if isinstance(rows, dict):  # the compact form: the components' names once, a row their values
                names = rows["components"]
                rows = [[r[0], r[1], dict(zip(names, r[2])) if isinstance(r[2], list) else r[2], *r[3:]]
                        for r in rows["rows"]]
            candidates = [TraceCandidate(n, *sp, trace_id, *c) for n, c in enumerate(rows, start=1)]
            candidates.sort(key=lambda c: (c.rank is None, c.rank or 0, -c.score, c.id))
            return StoredTrace(**t, candidates=candidates)
        for c in self.conn.execute(f"SELECT {_CANDIDATE_COLUMNS} FROM trace_candidates WHERE trace_id = ? ORDER BY"
                                   " rank IS NULL, rank, score DESC, id", (trace_id,)):
            cand = dict(zip(_CANDIDATE_FIELDS, c))
            cand["channels"], cand["components"] = json.loads(cand["channels"]), json.loads(cand["components"])
            candidates.append(TraceCandidate(**cand))
        return StoredTrace(**t, candidates=candidates)

    def traces(self, scope: Scope, *, limit: int = 200) -> list[dict[str, Any]]:
        return dict_rows(self.conn, "SELECT id, origin, query_text, query_hash, recipe, k, as_of, result_count,"
                         f" context_tokens, created_at FROM retrieval_traces WHERE {scope_where()} ORDER BY id DESC LIMIT ?",
                         (*scope.as_params(), limit))


class RecallWrites:
    conn: Any
    _sp: tuple[str, str, str, str]
    now: str
    usage: dict[int, int]  # memory -> its access_count after this writer's reinforce_usage

    def insert_trace(self, *, origin: str, query_text: str | None, query_hash: str, recipe: str, k: int,
                     as_of: str | None, params: dict[str, Any], plan: Any, rerank: Any, stages: list[Any],
                     timings: dict[str, Any],
                     context_text: str, context_tokens: int, result_count: int,
                     candidate_rows: str | None = None) -> int:
        """candidate_rows: the candidates as one JSON text (engine.memory._packed_candidates; see schema
        v8), or None when they are written as trace_candidates rows."""
        self.conn.execute(
            "INSERT INTO retrieval_traces(user_id, agent_id, scope_type, scope_id, origin, query_text, query_hash,"
            " recipe, k, as_of, params, plan, rerank, stages, timings, context_text, context_tokens, result_count,"
            " created_at, candidate_rows) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*self._sp, origin, query_text, query_hash, recipe, k, as_of, jsontext.dumps(params),
             jsontext.dumps(plan) if plan is not None else None,
             jsontext.dumps(rerank) if rerank is not None else None,
             jsontext.dumps(stages), jsontext.dumps(timings), context_text, context_tokens, result_count, self.now,
             candidate_rows))
        return self.conn.last_insert_rowid()

    def insert_trace_candidates(self, trace_id: int, rows: list[tuple[Any, ...]]) -> None:
        """rows: (memory_id, channels json, components json, score, rank, dropped_stage, drop_reason, detail, tokens)."""
        self.conn.executemany(
            "INSERT INTO trace_candidates(user_id, agent_id, scope_type, scope_id, trace_id, memory_id, channels,"
            " components, score, rank, dropped_stage, drop_reason, drop_detail, tokens)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", [(*self._sp, trace_id, *r) for r in rows])

    def put_memory_clauses(self, rows: list[ClauseRow]) -> None:
        """Replaces each row's memory's parse (ClauseRow)."""
        self.conn.executemany("INSERT OR REPLACE INTO memory_clauses(memory_id, text_hash, rules, clauses, readings,"
                              " vectors_model, vectors, vector_at) VALUES (?,?,?,?,?,?,?,?)", rows)

    def reinforce_usage(self, memory_ids: list[int]) -> None:
        """Count a use of each memory (an agent's recall returned it). The new counts are left in
        self.usage: once committed, Store.writer hands them to the kept rows (RecallReads._note_usage),
        so a usage count is no change of the data recall's caches are kept on (Database.data_key)."""
        for mid, count in self.conn.executemany(
                "UPDATE memories SET access_count = access_count + 1, last_accessed_at = ?"
                f" WHERE id = ? AND {scope_where()} RETURNING id, access_count",
                [(self.now, mid, *self._sp) for mid in memory_ids]):
            self.usage[mid] = count


class BulkWrites:
    """Fast paths for synthetic stores (memlens perf): executemany, ids chosen by the caller."""

    conn: Any
    _sp: tuple[str, str, str, str]
    now: str

    def bulk_memories(self, rows: list[tuple[Any, ...]]) -> None:
        """rows: (id, kind, text, trust, importance, confidence, source_time, content_hash)."""
        self.conn.executemany(
            "INSERT INTO memories(id, user_id, agent_id, scope_type, scope_id, kind, text, trust, importance,"
            " confidence, source_time, created_at, updated_at, content_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(r[0], *self._sp, *r[1:7], self.now, self.now, r[7]) for r in rows])

    def bulk_facts(self, rows: list[tuple[Any, ...]]) -> None:
        """rows: (id, memory_id, subject, predicate, object, subject_key, predicate_key, object_key, status,
        confidence, valid_from, valid_to, learned_at, invalidated_at, supersedes_fact_id, relation)."""
        self.conn.executemany(
            "INSERT INTO facts(id, user_id, agent_id, scope_type, scope_id, memory_id, subject, predicate, object,"
            " subject_key, predicate_key, object_key, status, confidence, valid_from, valid_to, learned_at,"
            " invalidated_at, supersedes_fact_id, relation, extraction_method)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,'synthetic')",
            [(r[0], *self._sp, *r[1:]) for r in rows])

    def bulk_relations(self, rows: list[tuple[Any, ...]]) -> None:
        """rows: (src_memory_id, dst_memory_id, type)."""
        self.conn.executemany(
            "INSERT INTO memory_relations(user_id, agent_id, scope_type, scope_id, src_memory_id, dst_memory_id, type,"
            " confidence, created_by, rule, created_at) VALUES (?,?,?,?,?,?,?,1.0,'extractor','synthetic',?)",
            [(*self._sp, *r, self.now) for r in rows])

    def bulk_documents(self, rows: list[tuple[Any, ...]]) -> None:
        """rows: (id, source_type, uri, title, text, content_hash, trust, source_time)."""
        self.conn.executemany(
            "INSERT INTO documents(id, user_id, agent_id, scope_type, scope_id, source_type, uri, title, text,"
            " content_hash, trust, source_time, ingested_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(r[0], *self._sp, *r[1:], self.now) for r in rows])

    def bulk_chunks(self, rows: list[tuple[Any, ...]]) -> None:
        """rows: (id, document_id, ordinal, start, end, text, content_hash, speaker, role, source_time, trust)."""
        self.conn.executemany(
            'INSERT INTO chunks(id, user_id, agent_id, scope_type, scope_id, document_id, ordinal, kind, start, "end",'
            " text, content_hash, speaker, role, source_time, trust) VALUES (?,?,?,?,?,?,?,'message',?,?,?,?,?,?,?,?)",
            [(r[0], *self._sp, *r[1:]) for r in rows])

    def bulk_sources(self, rows: list[tuple[Any, ...]]) -> None:
        """rows: (memory_id, chunk_id, document_id, start, end)."""
        self.conn.executemany(
            'INSERT INTO memory_sources(user_id, agent_id, scope_type, scope_id, memory_id, chunk_id, document_id,'
            ' start, "end", created_at) VALUES (?,?,?,?,?,?,?,?,?,?)', [(*self._sp, *r, self.now) for r in rows])

    def bulk_entities(self, rows: list[tuple[Any, ...]]) -> None:
        """rows: (id, name, canonical, kind)."""
        self.conn.executemany(
            "INSERT INTO entities(id, user_id, agent_id, scope_type, scope_id, name, canonical, kind, created_at)"
            " VALUES (?,?,?,?,?,?,?,?,?)", [(r[0], *self._sp, *r[1:], self.now) for r in rows])

    # A stored corpus copied within its scope (memlens perf --data): the copy's rows are the rows
    # ingestion wrote for the original, with new ids, as if the same sources had been ingested
    # again under other names. Table -> {column: the table whose ids it holds}.
    _REPLICATED = (
        ("documents", {"id": "documents", "previous_id": "documents"}),
        ("chunks", {"id": "chunks", "document_id": "documents", "quotes_chunk_id": "chunks"}),
        ("memories", {"id": "memories"}),
        ("memory_sources", {"id": "memory_sources", "memory_id": "memories", "chunk_id": "chunks",
                            "document_id": "documents"}),
        ("entity_mentions", {"id": "entity_mentions", "memory_id": "memories", "chunk_id": "chunks"}),
        ("embeddings", {"id": "embeddings", "owner_id": "owner"}),
        ("chunk_times", {"id": "chunk_times", "chunk_id": "chunks"}),
    )

    def replication_base(self) -> dict[str, int]:
        """The largest id of each replicated table in this scope: the rows `replicate` copies.
        Only stores of sources (no facts, relations or curation) can be copied this way: a
        copied fact would be a second current value of itself, which ingestion never writes."""
        where = scope_where()
        for table in ("facts", "memory_relations"):
            if self.conn.execute(f"SELECT 1 FROM {table} WHERE {where} LIMIT 1", self._sp).fetchone():
                raise ValueError(f"this scope has {table}: only stores of sources can be replicated")
        return {t: int(self.conn.execute(f"SELECT coalesce(max(id), 0) FROM {t} WHERE {where}", self._sp)
                       .fetchone()[0]) for t, _ in self._REPLICATED}

    def replicate(self, base: dict[str, int], *, documents_upto: int, tag: str) -> int:
        """Copy the base rows (ids up to `base`) of documents up to id `documents_upto` once more;
        the copies' document uris end in '#<tag>'. Returns the memories added."""
        where = scope_where()
        off = {t: int(self.conn.execute(f"SELECT coalesce(max(id), 0) FROM {t}").fetchone()[0])
               for t, _ in self._REPLICATED}
        mems = (f"(SELECT memory_id FROM memory_sources WHERE {where} AND id <= {base['memory_sources']}"
                f" AND document_id <= {int(documents_upto)})")
        chunks = f"(SELECT id FROM chunks WHERE {where} AND id <= {base['chunks']} AND document_id <= {int(documents_upto)})"
        picks = {
            "documents": (f"id <= {int(documents_upto)}", ()),
            "chunks": (f"document_id <= {int(documents_upto)}", ()),
            "memories": (f"id IN {mems}", self._sp),
            "memory_sources": (f"document_id <= {int(documents_upto)}", ()),
            "entity_mentions": (f"memory_id IN {mems}", self._sp),
            "embeddings": (f"((owner_type = 'memory' AND owner_id IN {mems}) OR (owner_type = 'chunk'"
                           f" AND owner_id IN {chunks}))", (*self._sp, *self._sp)),
            "chunk_times": (f"chunk_id IN {chunks}", self._sp),
        }
        added = 0
        for table, refs in self._REPLICATED:
            cols = [r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")]
            exprs = []
            for col in cols:
                ref = refs.get(col)
                if ref == "owner":
                    exprs.append(f"owner_id + CASE owner_type WHEN 'memory' THEN {off['memories']} ELSE {off['chunks']} END")
                elif ref is not None:
                    exprs.append(f'"{col}" + {off[ref]}')
                elif table == "documents" and col == "uri":
                    exprs.append("coalesce(uri, '') || '#' || ?")
                else:
                    exprs.append(f'"{col}"')
            cond, extra = picks[table]
            params = ((tag,) if table == "documents" else ()) + self._sp + tuple(extra)
            names = ", ".join(f'"{c}"' for c in cols)
            self.conn.execute(f"INSERT INTO {table}({names}) SELECT {', '.join(exprs)} FROM {table}"
                              f" WHERE {where} AND id <= {base[table]} AND {cond}", params)
            if table == "memories":
                added = self.conn.changes()
        # the copies' parsed clauses (memory_clauses: keyed by memory, no scope or id of its own)
        kept = "text_hash, rules, clauses, readings, vectors_model, vectors, vector_at"
        self.conn.execute(f"INSERT INTO memory_clauses(memory_id, {kept}) SELECT memory_id + {off['memories']},"
                          f" {kept} FROM memory_clauses WHERE memory_id <= {base['memories']} AND memory_id IN {mems}",
                          self._sp)
        return added
