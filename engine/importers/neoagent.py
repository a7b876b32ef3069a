"""Import a NeoAgent memory database (design/NEOAGENT-SCHEMA.md) into memlens.

The mapping, record by record (everything else is reported, never guessed):

- Owner (integer user id, text agent id; `''` or NULL = no agent) -> memlens user `str(user_id)`,
  agent the agent id or NO_AGENT ("none"). `--user/--agent` pick owners; each owner is written in
  ONE transaction, so an interrupted import keeps every owner it finished and re-running completes.
- A memory's scope_type/scope_id -> its memlens scope; scope type agent (or one NeoAgent does not
  know, which it treats as agent) -> the owner's agent scope. Everything hanging off a memory lives
  in that memory's scope; a document goes into every scope whose memories cite it (the owner's agent
  scope when none does), so each scope is whole on its own and no read crosses scopes.
- A memory with one fact -> one memlens memory of kind "fact" hosting that fact. With two or more
  facts (memlens keeps one fact per memory) -> a "summary" memory plus one "fact" memory per fact
  (text "subject predicate object", the parent's sources, a `derives` relation to the parent). With
  none -> kind "episode" if its text is verbatim a chunk it cites (NeoAgent stores ingested chunks
  as "<title>\n<chunk text>"), else "fact".
- Fact statuses: active, superseded, needs_review, expired as they are; review -> needs_review;
  duplicate -> superseded (rule neoagent_duplicate), lined up behind the fact NeoAgent kept (its
  pointer goes duplicate -> kept; memlens chains new -> old). Facts held for review open a review
  item in the conflicts queue (with the conflicting fact when metadata names it). Any other status:
  skipped.
- Times: SQLite text (UTC), ISO-8601 from JS and RFC 2822 mail dates (Gmail's Date: header) ->
  'YYYY-MM-DDTHH:MM:SSZ'. A time that is none of these is unknown: the row keeps its data, the
  time is left empty (or falls back to the row's other time) and the value is reported.
- Spans: memlens keeps `document.text[start:end] == chunk text`, so each chunk gets the exact span
  of its body, found at NeoAgent's offsets under each way NeoAgent writes them (neoagent_spans.py:
  UTF-16 offsets, message headers, re-joined blocks, compacted offsets); what NeoAgent stored, and
  how it differs, goes to the chunk's meta (`stored_as`), which the source pane shows beside it.
  Only a chunk whose body is not at its span at all is skipped (bad_span).
- Entity mentions NeoAgent marks (or would mark) as capitalised only at a sentence start are not
  entities, as NeoAgent hides them.
- JSON metadata that does not parse: the row is imported without it, and that is reported.
- Archived memories -> forgotten (reason "archived in NeoAgent"); importance 1..10 -> 0.1..1.0.
- Gone from NeoAgent on a re-import: its memories are forgotten and its current facts retracted
  (engine/store/neoagent.py), with one curation_log entry per scope, unless the operator curated
  the row in memlens; documents and chunks stay as the provenance of what was.

Ids are kept as external refs ("neoagent:memory:<id>", "neoagent:fact:<id>", "neoagent:document:<id>",
"neoagent:chunk:<id>", "neoagent:retrieval:<id>"), so re-importing inserts nothing twice, updates
what NeoAgent changed, and retires what it no longer has. Imported memories get vectors from the
engine's embedder; their full-text rows come from the triggers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..embed.base import Embedder
from ..embed.text import vector_text
from ..errors import BadInput, Cancelled
from ..extract.canonical import object_key, predicate_key, subject_key
from ..names import name_key
from ..scope import SCOPE_TYPES, Scope
from ..store.neoagent import (
    NOT_IMPORTED,
    ChunkRow,
    DocumentRow,
    EntityRow,
    FactRow,
    MemoryRow,
    MentionRow,
    NeoAgentSource,
    OwnerPlan,
    OwnerRows,
    OwnerWrite,
    RelationRow,
    ReviewRow,
    SourceRow,
    TraceRow,
    WriteCounts,
    memories_needing_vectors,
    put_vectors,
)
from ..store.store import Store
from ..timeutil import normalise_stored_time, now_iso
from .neoagent_spans import EXPLAINED, Unfit, locate_chunk

Progress = Callable[[float, str], None]
ShouldStop = Callable[[], bool]

NO_AGENT = "none"  # the memlens agent id of NeoAgent rows with agent '' or NULL
TRUST_LABELS = ("user", "assistant", "tool", "external")
# NeoAgent's own trustLevel values (NEOAGENT-SCHEMA.md 2.10) -> memlens trust labels.
TRUST_LEVELS = {"user_or_verified_conversation": "user", "external_source": "external"}
CATEGORIES = ("identity", "preferences", "projects", "contacts", "events", "tasks", "episodic", "procedural",
              "assistant_self")
CATEGORY_ALIASES = {"user_fact": "identity", "preference": "preferences", "personality": "assistant_self"}
STATUS_MAP = {"active": "active", "superseded": "superseded", "needs_review": "needs_review",
              "review": "needs_review", "expired": "expired", "duplicate": "superseded"}
RELATION_TYPES = ("updates", "extends", "derives")
FACT_RELATIONS = ("new", "updates", "extends", "derives")
# Who said it, by NeoAgent source_type, when metadata carries no trustLevel memlens knows.
TRUST_BY_SOURCE = {"conversation_consolidation": "user", "benchmark": "user", "memory_ingestion": "external",
                   "llm_import": "external", "memory_transfer": "external", "deliverable_run": "tool"}
# NeoAgent's chunk boundaries (ingestion_chunking.js) and the older generic names -> memlens chunk kinds.
BOUNDARY_KINDS = {"message": "message", "turn": "message", "paragraph": "paragraph", "heading": "heading",
                  "section": "heading", "quote": "quote", "code": "code_symbol", "code_symbol": "code_symbol",
                  "window": "window", "split": "split", "structural": "paragraph", "email_thread": "paragraph",
                  "code_structure": "code_symbol", "layout_segments": "paragraph", "asset_caption_pair": "paragraph",
                  "overlap_window": "window"}
EMBED_BATCH = 256
EXAMPLES = 5


# -- the report ------------------------------------------------------------------------------------

@dataclass
class ImportReport:
    source: str
    source_mode: str = "private_copy"
    snapshot: dict[str, Any] = field(default_factory=dict)  # attempts, seconds, sha256 of each file copied
    owners: list[dict[str, Any]] = field(default_factory=list)
    imported: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    unchanged: dict[str, int] = field(default_factory=dict)
    gone_from_source: dict[str, int] = field(default_factory=dict)
    retired: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)
    problems: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_imported: dict[str, int] = field(default_factory=dict)
    missing_tables: list[str] = field(default_factory=list)
    embedded: int = 0
    rows_read: int = 0
    seconds: float = 0.0

    def problem(self, record: str, reason: str, action: str, example: str) -> None:
        """A row (or a link inside one) that did not fit: counted by reason, with examples."""
        p = self.problems.setdefault(reason, {"count": 0, "action": action, "records": {}, "examples": []})
        p["count"] += 1
        p["records"][record] = p["records"].get(record, 0) + 1
        if action not in p["action"].split(" / "):
            p["action"] += f" / {action}"
        if len(p["examples"]) < EXAMPLES:
            p["examples"].append(example)
        if action == "skipped":
            by = self.skipped.setdefault(record, {})
            by[reason] = by.get(reason, 0) + 1

    def note(self, reason: str, example: str) -> None:
        """A documented normalisation that was applied (an alias, NeoAgent's own fallbacks)."""
        n = self.notes.setdefault(reason, {"count": 0, "examples": []})
        n["count"] += 1
        if len(n["examples"]) < EXAMPLES:
            n["examples"].append(example)

    def merge(self, counts: WriteCounts) -> None:
        for which in ("imported", "updated", "unchanged", "gone_from_source", "retired"):
            mine = getattr(self, which)
            for k, v in getattr(counts, which).items():
                mine[k] = mine.get(k, 0) + v
        for record, reason, action, example in counts.problems:
            self.problem(record, reason, action, example)

    @property
    def skipped_total(self) -> int:
        return sum(sum(v.values()) for v in self.skipped.values())

    def as_dict(self) -> dict[str, Any]:
        written = sum(self.imported.values()) + sum(self.updated.values())
        return {
            "source": self.source, "source_mode": self.source_mode, "snapshot": self.snapshot, "owners": self.owners,
            "imported": dict(sorted(self.imported.items())), "updated": dict(sorted(self.updated.items())),
            "unchanged": dict(sorted(self.unchanged.items())),
            "gone_from_source": dict(sorted(self.gone_from_source.items())),
            "retired": dict(sorted(self.retired.items())),
            "skipped": {k: dict(sorted(v.items())) for k, v in sorted(self.skipped.items())},
            "problems": dict(sorted(self.problems.items())), "notes": dict(sorted(self.notes.items())),
            "not_imported": self.not_imported, "missing_tables": self.missing_tables,
            "embedded": self.embedded, "rows_read": self.rows_read, "seconds": round(self.seconds, 3),
            "rows_per_second": round(self.rows_read / self.seconds, 1) if self.seconds > 0 else None,
            "rows_written": written,
        }

    def summary(self) -> str:
        def fmt(d: dict[str, int]) -> str:
            return ", ".join(f"{v} {k}" for k, v in sorted(d.items()) if v) or "nothing"
        lines = [f"imported {fmt(self.imported)}", f"updated {fmt(self.updated)}",
                 f"unchanged {fmt(self.unchanged)}"]
        if self.retired:
            lines.append(f"deleted in NeoAgent, so retired here (see memlens log): {fmt(self.retired)}")
        if self.gone_from_source:
            lines.append(f"no longer in NeoAgent (kept): {fmt(self.gone_from_source)}")
        for reason, p in sorted(self.problems.items()):
            lines.append(f"  {reason}: {p['count']} ({p['action']}) e.g. {p['examples'][0]}")
        for reason, n in sorted(self.notes.items()):
            lines.append(f"  note {reason}: {n['count']} e.g. {n['examples'][0]}")
        if self.not_imported:
            lines.append("not imported (no place in memlens): "
                         + ", ".join(f"{t} ({n} rows)" for t, n in sorted(self.not_imported.items())))
        lines.append(f"{len(self.owners)} owners, {self.rows_read:,} rows read, {self.embedded:,} vectors, "
                     f"{self.seconds:.2f}s")
        return "\n".join(lines)


# -- pure helpers ------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=65536)
def _norm_text_time(text: str) -> str:
    return normalise_stored_time(text)


def norm_time(value: Any) -> str | None:
    """SQLite text (UTC), ISO-8601 or an RFC 2822 mail date -> 'YYYY-MM-DDTHH:MM:SSZ'; None/'' -> None.

    Raises ValueError for anything else (numbers included: seconds or milliseconds is a guess)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"not a time string: {value!r}")
    text = value.strip()
    if not text:
        return None
    return _norm_text_time(text)


def parse_object(value: Any) -> tuple[dict[str, Any], bool]:
    """A JSON object column -> (dict, parsed ok). NULL and '' are an empty object."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}, True
    try:
        obj = json.loads(value) if isinstance(value, (str, bytes)) else None
    except ValueError:
        return {}, False
    return (obj, True) if isinstance(obj, dict) else ({}, False)


def parse_list(value: Any) -> tuple[list[Any], bool]:
    if value is None or (isinstance(value, str) and not value.strip()):
        return [], True
    try:
        obj = json.loads(value) if isinstance(value, (str, bytes)) else None
    except ValueError:
        return [], False
    return (obj, True) if isinstance(obj, list) else ([], False)


def _version_pointers(facts: list[dict[str, Any]]) -> dict[str, str | None]:
    """NeoAgent fact id -> the id of the fact it supersedes (memlens: new -> old).

    NeoAgent's pointers are new -> old except for duplicates, which point at the fact NeoAgent
    kept. Reversed here: the kept fact stays the head and the duplicates line up behind it
    (newest first), each taking the free pointer of the one before; when the kept fact already
    supersedes an older version, its duplicates stay unlinked (their reason names it)."""
    ids = {f["id"] for f in facts}
    out: dict[str, str | None] = {f["id"]: None if f["duplicate"] else f["supersedes"] for f in facts}
    behind: dict[str, list[dict[str, Any]]] = {}
    for f in facts:
        if f["duplicate"] and f["supersedes"] in ids and f["supersedes"] != f["id"]:
            behind.setdefault(f["supersedes"], []).append(f)
    for kept, dups in behind.items():
        tail = kept
        for d in sorted(dups, key=lambda d: (d["created_at"] or "", d["id"]), reverse=True):
            if out.get(tail) is not None:
                break
            out[tail] = d["id"]
            tail = d["id"]
    return out


_SENTENCE_END = ".!?:;\n"
_OPENERS = "\"'“‘([*-–—•> \t\r"


def in_sentence(text: str, name: str, kind: str) -> bool:
    """NeoAgent's in_sentence rule for a mention it has not backfilled: a structural entity (an
    email, url, version, file, ...) always counts; a concept counts when some occurrence in the
    memory is not at a sentence start, or when it cannot be found (nothing to go on)."""
    if kind != "concept" or not name[:1].isupper():
        return True
    found = False
    for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text):
        found = True
        before = text[:m.start()].rstrip(_OPENERS)
        if before and before[-1] not in _SENTENCE_END:
            return True
    return not found


def _truthy(flag: Any) -> bool:
    try:
        return bool(int(flag))
    except (TypeError, ValueError):
        return bool(flag)


def _chunk_texts(chunk: dict[str, Any]) -> set[str]:
    """The texts a memory has when it is verbatim this chunk (NEOAGENT-SCHEMA.md 2.7)."""
    texts = {chunk["values"]["text"], chunk["stored"]}
    if chunk.get("title"):
        texts |= {f"{chunk['title']}\n{t}" for t in list(texts)}
    return texts


def _message_header(header: str | None) -> tuple[str | None, str | None]:
    """NeoAgent's message header "<timestamp> <speaker>" (either may be missing) -> (time, speaker)."""
    if not header or not header.strip():
        return None, None
    words = header.split()
    for cut in range(len(words), 0, -1):  # the longest leading run of words that is a time
        try:
            when = norm_time(" ".join(words[:cut]))
        except ValueError:
            continue
        return when, " ".join(words[cut:]) or None
    return None, header.strip()


def owner_scope(user_id: Any, agent_id: str | None) -> Scope:
    agent = agent_id if agent_id else NO_AGENT
    return Scope(user_label(user_id), agent, "agent", agent)


def user_label(user_id: Any) -> str:
    if isinstance(user_id, float) and user_id.is_integer():
        user_id = int(user_id)
    return str(user_id)


def row_scope(owner: Scope, raw_agent: str, scope_type: Any, scope_id: Any) -> tuple[Scope, str | None]:
    """A memory's or event's memlens scope, and the note of a NeoAgent fallback that applied."""
    st = scope_type.strip() if isinstance(scope_type, str) and scope_type.strip() else "agent"
    sid = str(scope_id).strip() if scope_id is not None and str(scope_id).strip() else ""
    if st not in SCOPE_TYPES:
        return owner, "unknown_scope_type"  # NeoAgent reads these as the agent scope
    if st == "agent":
        if not sid or sid == raw_agent:
            return owner, None
        return Scope(owner.user_id, owner.agent_id, "agent", sid), None
    if not sid:
        return owner, "scope_without_id"
    return Scope(owner.user_id, owner.agent_id, st, sid), None


def map_category(raw: Any) -> tuple[str, str | None]:
    """(category, note): NeoAgent's aliases and its unknown -> episodic rule."""
    text = raw.strip().lower() if isinstance(raw, str) else ""
    if text in CATEGORIES:
        return text, None
    if text in CATEGORY_ALIASES:
        return CATEGORY_ALIASES[text], "category_alias"
    return "episodic", ("category_unknown" if text else None)


def _number(value: Any, default: float, what: str) -> float:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        raise Unfit("bad_number", f"{what}={value!r}") from None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fact_text(subject: str, predicate: str, obj: str) -> str:
    return f"{subject} {predicate} {obj}"


# -- one owner: source rows -> an OwnerPlan -------------------------------------------------------------

@dataclass
class Lookups:
    """Ids in the whole source, to tell a dangling reference from one into another owner's rows."""

    memory_owner: dict[str, tuple[Any, str]]
    fact_owner: dict[str, tuple[Any, str]]
    chunk_owner: dict[str, tuple[Any, str]]


class OwnerPlanner:
    def __init__(self, rows: OwnerRows, lookups: Lookups, report: ImportReport) -> None:
        self.rows = rows
        self.lk = lookups
        self.report = report
        self.raw_agent = rows.agent_id or ""
        self.owner = owner_scope(rows.user_id, rows.agent_id)
        self.plan = OwnerPlan(self.owner.user_id, self.owner.agent_id)
        self._now = now_iso()

    # helpers --------------------------------------------------------------------------------------
    def _skip(self, record: str, exc: Unfit, what: str) -> None:
        self.report.problem(record, exc.reason, "skipped", f"{what}: {exc.detail}")

    def _times(self, record: str, row: dict[str, Any], cols: tuple[str, ...], what: str) -> dict[str, Any]:
        """The row's times, canonical. One that is not a time is unknown (None): the row keeps its
        data, the raw value goes to `out["unparsed"]` (a document keeps it in its meta) and is reported."""
        out: dict[str, Any] = {"unparsed": {}}
        for c in cols:
            try:
                out[c] = norm_time(row.get(c))
            except ValueError:
                out[c] = None
                out["unparsed"][c] = row.get(c)
                self.report.problem(record, "bad_timestamp", "imported with the time unknown",
                                    f"{what}: {c}={row.get(c)!r} is not a time")
        return out

    def _meta(self, record: str, row: dict[str, Any], what: str, col: str = "metadata_json") -> dict[str, Any]:
        meta, ok = parse_object(row.get(col))
        if not ok:
            self.report.problem(record, "bad_json", "imported without it",
                                f"{what}: {col} does not parse as a JSON object ({str(row.get(col))[:40]!r})")
        return meta

    def _missing(self, record: str, what: str, ref: str, owners: dict[str, tuple[Any, str]],
                 action: str = "skipped") -> None:
        """Report a reference that cannot be followed: to a skipped row, another owner's, or nothing."""
        owner = owners.get(ref)
        if owner is None:
            self.report.problem(record, "dangling_reference", action, f"{what}: {ref} does not exist")
        elif (owner[0], owner[1]) != (self.rows.user_id, self.raw_agent):
            self.report.problem(record, "other_owner_reference", action,
                                f"{what}: {ref} belongs to user {owner[0]} agent {owner[1]!r}")
        else:
            self.report.problem(record, "reference_to_skipped_row", action, f"{what}: {ref} was skipped")

    # the plan ---------------------------------------------------------------------------------------
    def build(self) -> OwnerPlan:
        docs = self._documents()
        chunks = self._chunks(docs)
        memories = self._memories()
        facts_by_memory = self._facts(memories)
        links = self._links(memories, chunks)
        self._windows(memories, docs, chunks, links)
        self._layout(memories, facts_by_memory, links, chunks)
        self._place_documents(docs, chunks, links)
        self._relations(memories, chunks, links)
        self._entities(memories)
        self._events(memories)
        return self.plan

    def _documents(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for row in self.rows.documents:
            rid = str(row["id"])
            what = f"document {rid}"
            text = row.get("content")
            if not isinstance(text, str) or not text:
                self._skip("documents", Unfit("empty_document", "no content"), what)
                continue
            t = self._times("documents", row, ("source_timestamp", "created_at", "updated_at"), what)
            meta = self._meta("documents", row, what)
            source_type = row.get("source_type") or row.get("normalized_type") or "neoagent"
            info = {k: row.get(k) for k in ("normalized_type", "provider_key", "connection_id", "external_object_id",
                                             "source_account", "summary", "salience")}
            info.update(id=rid, created_at=t["created_at"], updated_at=t["updated_at"], metadata=meta,
                        unparsed_times=t["unparsed"])
            provider = row.get("provider_key") or source_type
            ext = row.get("external_object_id")
            out[f"neoagent:document:{rid}"] = {
                "source_type": str(source_type), "uri": f"neoagent://{provider}/{ext}" if ext else None,
                "title": row.get("title"), "text": text, "content_hash": _sha(text), "trust": "external",
                "source_time": t["source_timestamp"] or t["created_at"],
                "meta": {"neoagent": {k: v for k, v in info.items() if v not in (None, "", {})}},
            }
        return out

    def _chunks(self, docs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for row in self.rows.chunks:
            rid = str(row["id"])
            what = f"chunk {rid} of document {row.get('document_id')}"
            doc_key = f"neoagent:document:{row.get('document_id')}"
            doc = docs.get(doc_key)
            if doc is None:
                self.report.problem("chunks", "reference_to_skipped_row", "skipped", f"{what}: its document was skipped")
                continue
            content = row.get("content")
            stored = content if isinstance(content, str) else ""
            try:
                span = locate_chunk(doc["text"], row.get("char_start"), row.get("char_end"), stored)
            except Unfit as exc:
                self._skip("chunks", exc, what)
                continue
            self._times("chunks", row, ("created_at", "updated_at"), what)
            text = doc["text"][span.start:span.end]
            for how in span.how:
                self.report.note(f"chunk_{how}", f"{what}: [{row['char_start']}, {row['char_end']}) -> "
                                                 f"[{span.start}, {span.end})")
            meta = self._meta("chunks", row, what)
            if row.get("content_hash") and row["content_hash"] != _sha(stored):
                self.report.note("chunk_hash_mismatch", f"{what}: content_hash is not sha256 of its text")
            boundary = next((meta[k] for k in ("boundary", "boundaryKind", "boundary_kind", "kind")
                             if isinstance(meta.get(k), str)), None)
            kind = BOUNDARY_KINDS.get(boundary.lower()) if boundary else None
            message_id = meta.get("messageId")
            if kind is None:
                kind = "message" if message_id or span.header else "split"
            said_at, said_by = _message_header(span.header)
            speaker = meta.get("speaker") if isinstance(meta.get("speaker"), str) else said_by
            role = next((r for r in (meta.get("role"), said_by) if r in ("user", "assistant", "system", "tool")), None)
            ordinal = row.get("chunk_index")
            info = {k: v for k, v in (("id", rid), ("chunk_index", ordinal), ("metadata", meta)) if v not in (None, {})}
            chunk_meta: dict[str, Any] = {"neoagent": info}
            if not span.exact:
                # What NeoAgent stored, beside the exact span memlens keeps (the source pane shows both).
                info["offsets"] = [row["char_start"], row["char_end"]]
                chunk_meta["stored_as"] = {"by": "NeoAgent", "text": stored, "how": list(span.how),
                                           "explained": [EXPLAINED[h] for h in span.how],
                                           "header": span.header}
            out[f"neoagent:chunk:{rid}"] = {
                "document_key": doc_key, "neoagent_document_id": str(row.get("document_id")), "stored": stored,
                "title": doc["title"], "document_external_id": doc["meta"]["neoagent"].get("external_object_id"),
                "values": {
                    "ordinal": ordinal if isinstance(ordinal, int) and not isinstance(ordinal, bool) else 0,
                    "kind": kind, "start": span.start, "end": span.end, "text": text, "content_hash": _sha(text),
                    "speaker": speaker, "role": role, "message_id": str(message_id) if message_id else None,
                    "source_time": said_at or doc["source_time"], "trust": doc["trust"],
                    "meta": chunk_meta,
                },
            }
        return out

    def _memories(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for row in self.rows.memories:
            rid = str(row["id"])
            what = f"memory {rid}"
            try:
                text = row.get("content")
                if not isinstance(text, str) or not text.strip():
                    raise Unfit("empty_content", "no content")
                importance = _number(row.get("importance"), 5.0, "importance")
                confidence = _number(row.get("confidence"), 0.7, "confidence")
                strength = _number(row.get("memory_strength"), 1.0, "memory_strength")
                access = _number(row.get("access_count"), 0.0, "access_count")
                pinned = _number(row.get("pinned"), 0.0, "pinned")
                archived = _number(row.get("archived"), 0.0, "archived")
            except Unfit as exc:
                self._skip("memories", exc, what)
                continue
            t = self._times("memories", row, ("created_at", "updated_at", "last_accessed_at", "embedded_at"), what)
            if not 1 <= importance <= 10 or not 0 <= confidence <= 1:
                self.report.note("clamped_to_range", f"{what}: importance {importance}, confidence {confidence}")
            importance = min(10.0, max(1.0, importance))
            confidence = min(1.0, max(0.0, confidence))
            meta = self._meta("memories", row, what)
            scope, note = row_scope(self.owner, self.raw_agent, row.get("scope_type"), row.get("scope_id"))
            if note:
                self.report.note(note, f"{what}: scope {row.get('scope_type')!r}/{row.get('scope_id')!r} -> agent scope")
            category, cnote = map_category(row.get("category"))
            if cnote:
                self.report.note(cnote, f"{what}: category {row.get('category')!r} -> {category}")
            raw_level = meta.get("trustLevel")
            level = raw_level if isinstance(raw_level, str) else None
            trust = (TRUST_LEVELS.get(level) if level else None) or (level if level in TRUST_LABELS else None) or \
                TRUST_BY_SOURCE.get(str(row.get("source_type") or ""), "external")
            created = t["created_at"] or t["updated_at"]
            if created is None:
                self.report.note("missing_created_at", f"{what}: no created_at or updated_at; the import time is used")
                created = self._now
            values = {
                "kind": "fact", "text": text, "category": category, "importance": round(importance / 10.0, 4),
                "confidence": confidence, "trust": trust, "is_static": int(bool(meta.get("isStatic"))),
                "source_time": None, "created_at": created, "updated_at": t["updated_at"] or created,
                "forget_after": None,
                "forgotten_at": (t["updated_at"] or created) if archived else None,
                "forget_reason": "archived in NeoAgent (time: its last update)" if archived else None,
                "access_count": int(access), "last_accessed_at": t["last_accessed_at"], "strength": strength,
                "pinned": int(bool(pinned)), "content_hash": _sha(text),
                "extraction_method": f"neoagent:{row.get('source_type') or 'unknown'}",
            }
            out[rid] = {"key": f"neoagent:memory:{rid}", "scope": scope, "values": values, "meta": meta}
        return out

    def _facts(self, memories: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        by_memory: dict[str, list[dict[str, Any]]] = {}
        for row in self.rows.facts:
            rid = str(row["id"])
            mid = str(row.get("memory_id"))
            what = f"fact {rid} (memory {mid})"
            mem = memories.get(mid)
            if mem is None:
                self.report.problem("facts", "reference_to_skipped_row", "skipped", f"{what}: its memory was skipped")
                continue
            try:
                triple = []
                for col in ("subject", "predicate", "object"):
                    v = row.get(col)
                    if not isinstance(v, str) or not v.strip():
                        raise Unfit("empty_triple", f"{col} is empty")
                    triple.append(v.strip())
                raw_status = row.get("status") if row.get("status") not in (None, "") else "active"
                status = STATUS_MAP.get(str(raw_status).strip().lower())
                if status is None:
                    raise Unfit("unknown_status", f"status {raw_status!r}")
                confidence = _number(row.get("confidence"), 0.7, "confidence")
            except Unfit as exc:
                self._skip("facts", exc, what)
                continue
            t = self._times("facts", row, ("event_time", "valid_from", "valid_to", "learned_at", "invalidated_at",
                                           "created_at", "updated_at"), what)
            owner_cols = (row.get("user_id"), row.get("agent_id") or "")
            if row.get("user_id") is not None and (str(owner_cols[0]), owner_cols[1]) != (
                    str(self.rows.user_id), self.raw_agent):
                self.report.note("fact_owner_differs", f"{what}: owner {owner_cols}; it follows its memory")
            meta = self._meta("facts", row, what)
            relation = meta.get("relation") if meta.get("relation") in FACT_RELATIONS else "new"
            if meta.get("relation") not in (None, *FACT_RELATIONS):
                self.report.note("relation_label_unknown", f"{what}: relation {meta.get('relation')!r} -> new")
            forget_after = None
            if meta.get("forgetAfter") is not None:
                try:
                    forget_after = norm_time(meta.get("forgetAfter"))
                except ValueError:
                    self.report.problem("facts", "bad_metadata_value", "imported without it",
                                        f"{what}: forgetAfter={meta.get('forgetAfter')!r}")
            category, _ = map_category(row.get("category") or mem["values"]["category"])
            subject, predicate, obj = triple
            sup = row.get("supersedes_fact_id")
            sup = str(sup) if sup not in (None, "") else None
            reason = meta.get("reviewReason") if isinstance(meta.get("reviewReason"), str) else None
            duplicate = str(raw_status).strip().lower() == "duplicate"
            if duplicate:  # its supersedes_fact_id names the fact NeoAgent kept (NEOAGENT-SCHEMA.md 2.2)
                reason = reason or (f"NeoAgent marked it a duplicate of fact {sup}, which it kept" if sup
                                    else "NeoAgent marked it a duplicate of an equal fact")
            evidence = meta.get("evidence")
            values = {
                "subject": subject, "predicate": predicate, "object": obj,
                "subject_key": subject_key(subject, speaker=None), "predicate_key": predicate_key(predicate),
                "object_key": object_key(obj), "relation": relation, "status": status,
                "confidence": min(1.0, max(0.0, confidence)), "importance": mem["values"]["importance"],
                "category": category, "is_static": int(bool(meta.get("isStatic"))),
                "valid_from": t["valid_from"] or t["event_time"], "valid_to": t["valid_to"],
                "learned_at": t["learned_at"] or t["created_at"] or mem["values"]["created_at"],
                "invalidated_at": t["invalidated_at"], "forget_after": forget_after,
                "evidence": evidence if isinstance(evidence, str) else (json.dumps(evidence) if evidence else None),
                "evidence_unverified": 0, "source_count": 1,
                "extraction_method": str(meta.get("extractedBy") or "neoagent"), "extractor_model": None,
                "prompt_version": None,
                "rule": "neoagent_duplicate" if duplicate else "neoagent_import",
                "reason": reason,
            }
            by_memory.setdefault(mid, []).append({
                "id": rid, "key": f"neoagent:fact:{rid}", "values": values, "raw_status": raw_status,
                "supersedes": sup, "duplicate": duplicate, "meta": meta,
                "created_at": t["created_at"], "updated_at": t["updated_at"],
            })
        return by_memory

    def _links(self, memories: dict[str, dict[str, Any]],
               chunks: dict[str, dict[str, Any]]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
        """memory id -> [(chunk key, link info)] for links that can be followed."""
        out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for row in self.rows.links:
            mid, cid = str(row.get("memory_id")), str(row.get("chunk_id"))
            what = f"link memory {mid} -> chunk {cid}"
            if mid not in memories:
                self.report.problem("sources", "reference_to_skipped_row", "skipped", f"{what}: the memory was skipped")
                continue
            chunk = chunks.get(f"neoagent:chunk:{cid}")
            if chunk is None:
                self._missing("sources", what, cid, self.lk.chunk_owner)
                continue
            doc = row.get("source_document_id")
            if doc not in (None, "") and str(doc) != chunk["neoagent_document_id"]:
                self.report.problem("sources", "document_mismatch", "skipped",
                                    f"{what}: link says document {doc}, the chunk is in {chunk['neoagent_document_id']}")
                continue
            try:
                relevance = _number(row.get("relevance_score"), 1.0, "relevance_score")
            except Unfit as exc:
                self._skip("sources", exc, what)
                continue
            t = self._times("sources", row, ("source_timestamp", "created_at"), what)
            self._meta("sources", row, what)
            out.setdefault(mid, []).append((f"neoagent:chunk:{cid}", {"time": t["source_timestamp"],
                                                                       "relevance": relevance}))
        return out

    def _windows(self, memories: dict[str, dict[str, Any]], docs: dict[str, dict[str, Any]], chunks: dict[str, dict[str, Any]],
                 links: dict[str, list[tuple[str, dict[str, Any]]]]) -> None:
        """Overlap-window memories of older NeoAgents (NEOAGENT-SCHEMA.md 2.3) have no source link,
        only their document and span in metadata. A window that is really there (the two chunks it
        joins, or its text at its span) becomes a memlens chunk of kind "window", linked to it."""
        by_index = {(c["document_key"], c["values"]["ordinal"]): c for c in chunks.values()}
        for rid, mem in memories.items():
            meta = mem["meta"]
            span = meta.get("sourceSpan") if isinstance(meta.get("sourceSpan"), dict) else None
            doc = docs.get(f"neoagent:document:{meta.get('ingestionDocumentId')}")
            if rid in links or not meta.get("isOverlapWindow") or span is None or doc is None:
                continue
            what = f"overlap window {rid}"
            text = mem["values"]["text"]
            title = doc["title"] or ""
            stored = text[len(title) + 1:] if title and text.startswith(f"{title}\n") else text
            doc_key = f"neoagent:document:{meta['ingestionDocumentId']}"
            index = meta.get("chunkIndex")
            base = -index - 1 if isinstance(index, int) and not isinstance(index, bool) and index < 0 else None
            first, second = by_index.get((doc_key, base)), by_index.get((doc_key, (base or 0) + 1))
            if first is not None and second is not None and \
                    f"{first['stored']}\n\n{second['stored']}".startswith(stored):
                start, end, how = first["values"]["start"], second["values"]["end"], ["the two chunks it joins"]
            else:
                try:
                    found = locate_chunk(doc["text"], span.get("charStart"), span.get("charEnd"), stored)
                except Unfit as exc:
                    self.report.problem("memories", "window_not_at_span", "imported without a source",
                                        f"{what}: {exc.detail}")
                    continue
                start, end, how = found.start, found.end, [EXPLAINED[h] for h in found.how]
            key = f"neoagent:window:{rid}"
            body = doc["text"][start:end]
            chunks[key] = {
                "document_key": doc_key, "neoagent_document_id": str(meta["ingestionDocumentId"]), "stored": stored,
                "title": doc["title"], "document_external_id": doc["meta"]["neoagent"].get("external_object_id"),
                "values": {
                    "ordinal": base if base is not None else 0, "kind": "window", "start": start, "end": end,
                    "text": body, "content_hash": _sha(body), "speaker": None, "role": None, "message_id": None,
                    "source_time": doc["source_time"], "trust": doc["trust"],
                    "meta": {"neoagent": {"window_of_memory": rid, "offsets": [span.get("charStart"),
                                                                               span.get("charEnd")]},
                             "stored_as": {"by": "NeoAgent", "text": stored, "how": ["overlap_window"],
                                           "explained": ["an overlap window (NeoAgent kept it as a memory, not a chunk)", *how],
                                           "header": None}},
                },
            }
            links[rid] = [(key, {"time": None, "relevance": 1.0})]
            self.report.note("overlap_window_linked", f"{what}: [{start}, {end}) of {doc_key}")

    def _layout(self, memories: dict[str, dict[str, Any]], facts: dict[str, list[dict[str, Any]]],
                links: dict[str, list[tuple[str, dict[str, Any]]]], chunks: dict[str, dict[str, Any]]) -> None:
        all_fact_keys = {f["key"]: (mid, f) for mid, fs in facts.items() for f in fs}
        pointers = _version_pointers([f for fs in facts.values() for f in fs])
        for mid, mem in memories.items():
            v, scope, key = mem["values"], mem["scope"], mem["key"]
            mine = facts.get(mid, [])
            my_links = links.get(mid, [])
            times = [info["time"] for _, info in my_links if info["time"]]
            times += [chunks[ck]["values"]["source_time"] for ck, _ in my_links if chunks[ck]["values"]["source_time"]]
            v["source_time"] = min(times) if times else None
            if not mine:  # the chunk itself (NeoAgent stores "<title>\n<chunk text>"): an episode
                verbatim = any(v["text"] in _chunk_texts(chunks[ck]) for ck, _ in my_links)
                v["kind"] = "episode" if verbatim else "fact"
            elif len(mine) == 1:
                f = mine[0]["values"]
                v["kind"] = "fact"
                v["forget_after"] = f["forget_after"]
                v["is_static"] = max(v["is_static"], f["is_static"])
                v["source_time"] = v["source_time"] or f["valid_from"]
            else:
                v["kind"] = "summary"
            self.plan.memories.append(MemoryRow(key, scope, v))
            for ck, info in my_links:
                self.plan.sources.append(SourceRow(scope, key, ck, chunks[ck]["document_key"], info["relevance"]))
            for f in mine:
                host = key
                if len(mine) > 1:
                    host = f["key"]
                    fv = f["values"]
                    text = fact_text(fv["subject"], fv["predicate"], fv["object"])
                    self.plan.memories.append(MemoryRow(host, scope, {
                        "kind": "fact", "text": text, "category": fv["category"], "importance": v["importance"],
                        "confidence": fv["confidence"], "trust": v["trust"], "is_static": fv["is_static"],
                        "source_time": fv["valid_from"] or v["source_time"],
                        "created_at": f["created_at"] or v["created_at"],
                        "updated_at": f["updated_at"] or f["created_at"] or v["updated_at"],
                        "forget_after": fv["forget_after"], "forgotten_at": v["forgotten_at"],
                        "forget_reason": v["forget_reason"], "access_count": 0, "last_accessed_at": None,
                        "strength": v["strength"], "pinned": v["pinned"], "content_hash": _sha(text),
                        "extraction_method": fv["extraction_method"]}))
                    for ck, info in my_links:
                        self.plan.sources.append(SourceRow(scope, host, ck, chunks[ck]["document_key"],
                                                           info["relevance"]))
                    self.plan.relations.append(RelationRow(
                        scope, host, key, "derives", fv["confidence"], "neoagent_memory_fact",
                        f"fact {f['id']} of NeoAgent memory {mid}", f["created_at"] or v["created_at"]))
                sup_key = None
                older = pointers.get(f["id"])
                if f["supersedes"] and f["supersedes"] != older and f"neoagent:fact:{f['supersedes']}" not in all_fact_keys:
                    self._missing("facts", f"fact {f['id']} {'duplicates' if f['duplicate'] else 'supersedes'} "
                                  f"{f['supersedes']}", f["supersedes"], self.lk.fact_owner,
                                  action="imported without the link")
                if older:
                    target = all_fact_keys.get(f"neoagent:fact:{older}")
                    what = f"fact {f['id']} supersedes {older}"
                    if target is None:
                        self._missing("facts", what, older, self.lk.fact_owner, action="imported without the link")
                    elif memories[target[0]]["scope"] != scope:
                        self.report.problem("facts", "cross_scope_reference", "imported without the link",
                                            f"{what}: the older fact is in another scope")
                    else:
                        sup_key = f"neoagent:fact:{older}"
                self.plan.facts.append(FactRow(f["key"], host, scope, f["values"], sup_key))
                if f["values"]["status"] == "needs_review":
                    other = f["meta"].get("conflictingFactId")
                    other_key = f"neoagent:fact:{other}" if other not in (None, "") else None
                    if other_key is not None and (other_key not in all_fact_keys
                                                  or memories[all_fact_keys[other_key][0]]["scope"] != scope):
                        self.report.problem("facts", "dangling_reference", "review opened without it",
                                            f"fact {f['id']}: conflictingFactId {other} is not imported in its scope")
                        other_key = None
                    reason = f["values"]["reason"] or f"held for review in NeoAgent (status {f['raw_status']!r})"
                    self.plan.reviews.append(ReviewRow(scope, f["key"], other_key, reason))

    def _place_documents(self, docs: dict[str, dict[str, Any]], chunks: dict[str, dict[str, Any]],
                         links: dict[str, list[tuple[str, dict[str, Any]]]]) -> None:
        placed: dict[str, dict[Scope, None]] = {k: {} for k in docs}
        for s in self.plan.sources:
            placed[s.document_key].setdefault(s.scope, None)
        by_doc: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for ck, ch in chunks.items():
            by_doc.setdefault(ch["document_key"], []).append((ck, ch))
        for key, values in docs.items():
            scopes = list(placed[key]) or [self.owner]
            for scope in scopes:
                self.plan.documents.append(DocumentRow(key, scope, values))
                for ck, ch in by_doc.get(key, []):
                    self.plan.chunks.append(ChunkRow(ck, key, scope, ch["values"]))

    def _relations(self, memories: dict[str, dict[str, Any]], chunks: dict[str, dict[str, Any]],
                   links: dict[str, list[tuple[str, dict[str, Any]]]]) -> None:
        for row in self.rows.relations:
            rid = str(row.get("id"))
            src, dst = str(row.get("from_memory_id")), str(row.get("to_memory_id"))
            what = f"relation {rid} ({src} -> {dst})"
            rtype = row.get("relation_type")
            if rtype not in RELATION_TYPES:
                self.report.problem("relations", "unknown_relation_type", "skipped", f"{what}: type {rtype!r}")
                continue
            missing = [m for m in (src, dst) if m not in memories]
            if missing:
                self._missing("relations", what, missing[0], self.lk.memory_owner)
                continue
            if memories[src]["scope"] != memories[dst]["scope"]:
                self.report.problem("relations", "cross_scope_reference", "skipped",
                                    f"{what}: the two memories are in different scopes")
                continue
            try:
                confidence = _number(row.get("confidence"), 0.7, "confidence")
            except Unfit as exc:
                self._skip("relations", exc, what)
                continue
            t = self._times("relations", row, ("created_at",), what)
            meta = self._meta("relations", row, what)
            evidence = meta.get("evidence")
            reason = f"NeoAgent relation {rid}" + (f": {evidence}" if isinstance(evidence, str) and evidence else "")
            # evidenceSourceId is the newer memory's source id (a run id, or the external id of the
            # document it was ingested from; NEOAGENT-SCHEMA.md 2.9): its evidence is that memory's
            # chunk from that document, when it has one.
            ev_source = meta.get("evidenceSourceId")
            ev_key = next((ck for ck, _ in links.get(src, []) if ev_source not in (None, "")
                           and str(ev_source) in (chunks[ck]["document_external_id"], chunks[ck]["neoagent_document_id"])),
                          None)
            if isinstance(ev_source, str) and ev_source and ev_key is None:
                reason += f" (evidence source {ev_source})"
            scope = memories[src]["scope"]
            self.plan.relations.append(RelationRow(
                scope, memories[src]["key"], memories[dst]["key"], rtype, min(1.0, max(0.0, confidence)),
                "neoagent_relation", reason, t["created_at"] or self._now, ev_key))

    def _entities(self, memories: dict[str, dict[str, Any]]) -> None:
        entities: dict[str, tuple[str, str, str]] = {}  # id -> (name, canonical, kind)
        for row in self.rows.entities:
            rid = str(row.get("id"))
            name = row.get("name")
            canon = name_key(name) if isinstance(name, str) else ""
            if not isinstance(name, str) or not canon:
                self.report.problem("entities", "empty_name", "skipped", f"entity {rid}: no name")
                continue
            raw_kind = row.get("kind")
            kind = raw_kind if isinstance(raw_kind, str) and raw_kind else "concept"
            entities[rid] = (name.strip(), canon, kind)
        placed: dict[tuple[Scope, str, str], str] = {}
        mentioned: set[str] = set()
        hidden: set[str] = set()
        for row in self.rows.mentions:
            eid, mid = str(row.get("entity_id")), str(row.get("memory_id"))
            what = f"mention of entity {eid} in memory {mid}"
            if mid not in memories:
                self.report.problem("mentions", "reference_to_skipped_row", "skipped", f"{what}: the memory was skipped")
                continue
            ent = entities.get(eid)
            if ent is None:
                self.report.problem("mentions", "dangling_reference", "skipped", f"{what}: no such entity")
                continue
            flag = row.get("in_sentence")
            if flag is None:  # NULL: NeoAgent has not backfilled it yet; decide the way it would
                flag = in_sentence(memories[mid]["values"]["text"], ent[0], ent[2])
            if not _truthy(flag):  # capitalised only at a sentence start ("She", "The"): NeoAgent hides it
                self.report.note("sentence_initial_only", f"{what}: {ent[0]!r} only starts sentences there;"
                                                          " not an entity")
                hidden.add(eid)
                continue
            scope = memories[mid]["scope"]
            placed.setdefault((scope, ent[1], ent[2]), ent[0])
            mentioned.add(eid)
            self.plan.mentions.append(MentionRow(scope, ent[1], ent[2], memories[mid]["key"]))
        for eid, ent in entities.items():
            if eid not in mentioned and eid not in hidden:
                placed.setdefault((self.owner, ent[1], ent[2]), ent[0])
        for (scope, canon, kind), name in placed.items():
            self.plan.entities.append(EntityRow(scope, name, canon, kind))

    def _events(self, memories: dict[str, dict[str, Any]]) -> None:
        for row in self.rows.events:
            rid = str(row.get("id"))
            what = f"retrieval event {rid}"
            t = self._times("traces", row, ("created_at",), what)
            try:
                counts = {c: int(_number(row.get(c), 0, c)) for c in (
                    "requested_k", "candidate_count", "semantic_candidate_count", "lexical_candidate_count",
                    "entity_candidate_count", "relation_candidate_count", "result_count", "context_tokens_estimate")}
                latency = _number(row.get("latency_ms"), 0.0, "latency_ms")
            except Unfit as exc:
                self._skip("traces", exc, what)
                continue
            scope, note = row_scope(self.owner, self.raw_agent, row.get("scope_type"), row.get("scope_id"))
            if note:
                self.report.note(note, f"{what}: scope {row.get('scope_type')!r}/{row.get('scope_id')!r} -> agent scope")
            ids, ok = parse_list(row.get("result_ids_json"))
            if not ok:
                self.report.problem("traces", "bad_json", "imported without its results",
                                    f"{what}: result_ids_json {str(row.get('result_ids_json'))[:40]!r}")
            keys: list[str] = []
            for raw in ids:
                ref = str(raw)
                mem = memories.get(ref)
                if mem is None:
                    self._missing("traces", f"{what} result", ref, self.lk.memory_owner, action="result dropped")
                elif mem["scope"] != scope:
                    self.report.note("result_in_other_scope", f"{what}: memory {ref} is in another scope")
                elif mem["key"] not in keys:
                    keys.append(mem["key"])
            stages = [{"name": "neoagent recall", "in": counts["candidate_count"], "out": counts["result_count"],
                       "ms": latency}]
            params = {"neoagent_event_id": rid, "candidate_count": counts["candidate_count"],
                      "semantic_candidates": counts["semantic_candidate_count"],
                      "lexical_candidates": counts["lexical_candidate_count"],
                      "entity_candidates": counts["entity_candidate_count"],
                      "relation_candidates": counts["relation_candidate_count"],
                      "result_ids": [str(i) for i in ids]}
            self.plan.traces.append(TraceRow(f"neoagent:retrieval:{rid}", scope, {
                "query_hash": str(row.get("query_hash") or ""), "k": counts["requested_k"], "params": params,
                "stages": stages, "timings": {"total": latency}, "context_tokens": counts["context_tokens_estimate"],
                "result_count": counts["result_count"], "created_at": t["created_at"] or self._now}, keys))


# -- the run ------------------------------------------------------------------------------------------

def open_source(path: str | os.PathLike[str], *, wait: float = 5.0, **kw: Any) -> NeoAgentSource:
    """Take a consistent private copy of a NeoAgent file and validate it (BadInput if it is not one,
    SourceBusy "locked, try again" after `wait` s of NeoAgent holding it). The file is never written."""
    return NeoAgentSource(path, wait=wait, **kw)


def _matches(owner: tuple[Any, str], user: str | None, agent: str | None) -> bool:
    uid, aid = owner
    if user is not None and user_label(uid) != str(user):
        return False
    if agent is not None and (aid or NO_AGENT) != (agent or NO_AGENT):
        return False
    return True


def import_neoagent(engine: Any, source: NeoAgentSource | str | os.PathLike[str], *, user: str | None = None,
                    agent: str | None = None, progress: Progress | None = None,
                    should_stop: ShouldStop | None = None) -> ImportReport:
    """Import every owner of a NeoAgent database (or those --user/--agent pick) into `engine`'s store
    (a MemoryEngine: a layer above this one, so not imported here).

    One transaction per owner, then its vectors in batches. Raises BadInput before writing
    anything when the source is not a NeoAgent database or no owner matches the filters, and
    Cancelled between owners when should_stop() says so (finished owners stay imported)."""
    t0 = time.perf_counter()
    own = not isinstance(source, NeoAgentSource)
    src = source if isinstance(source, NeoAgentSource) else open_source(source)
    try:
        if str(engine.path) != ":memory:" and Path(engine.path).resolve() == src.path.resolve():
            raise BadInput(f"{src.path}: cannot import a database into itself")
        snap = src.snapshot
        if snap is None:
            raise BadInput(f"{src.path}: the import source is closed")
        report = ImportReport(source=str(src.path), source_mode=src.mode, snapshot={
            "attempts": snap.attempts, "seconds": snap.seconds, "sha256": snap.sha256})
        owners = [o for o in src.owners() if _matches(o, user, agent)]
        if not owners:
            who = " ".join(x for x in (f"--user {user}" if user is not None else "",
                                       f"--agent {agent}" if agent is not None else "") if x)
            if who:
                raise BadInput(f"{src.path}: no NeoAgent owner matches {who}")
        labels: dict[tuple[str, str], list[tuple[Any, str]]] = {}
        for uid, aid in owners:
            labels.setdefault((user_label(uid), aid or NO_AGENT), []).append((uid, aid))
        for (u, a), group in labels.items():
            if len(group) > 1:  # e.g. agent '' and an agent really called "none"
                report.note("owners_merged", f"NeoAgent owners {group} all map to memlens user {u} agent {a}")
        report.missing_tables = src.missing_tables()
        for table, lacks in src.unreadable.items():
            report.problem(table, "table_unreadable", "skipped", f"{table} lacks {', '.join(lacks)}")
        report.not_imported = {t: n for t, n in src.table_counts(NOT_IMPORTED).items() if n}
        lookups = Lookups(src.id_owners("memories"), src.id_owners("memory_facts"),
                          src.id_owners("memory_source_chunks"))
        emb = engine.embedder
        for i, (uid, aid) in enumerate(owners):
            if should_stop is not None and should_stop():
                raise Cancelled(f"import stopped after {i} of {len(owners)} owners")
            if progress is not None:
                progress(i / len(owners), f"user {uid} agent {aid or NO_AGENT}: reading")
            rows = src.owner_rows(uid, aid)
            report.rows_read += rows.row_count
            plan = OwnerPlanner(rows, lookups, report).build()
            counts = OwnerWrite(engine.store, plan).apply()
            report.merge(counts)
            report.embedded += _embed_owner(engine.store, emb, plan.user_id, plan.agent_id, should_stop)
            report.owners.append({"user_id": uid, "agent_id": aid, "memlens_user": plan.user_id,
                                  "memlens_agent": plan.agent_id,
                                  "scopes": [s.as_dict() for s in plan.scopes()], "rows_read": rows.row_count})
        if user is None and agent is None:
            for table, n in src.ownerless_counts().items():
                for _ in range(n):
                    report.problem(_RECORD.get(table, table), "no_owner", "skipped", f"{table}: a row with no user_id")
        _orphans(src, report, user, agent)
        if progress is not None:
            progress(1.0, "done")
        report.seconds = time.perf_counter() - t0
        return report
    finally:
        if own:
            src.close()


def _embed_owner(store: Store, emb: Embedder, user_id: str, agent_id: str, should_stop: ShouldStop | None) -> int:
    """Vectors for this owner's imported memories that have no current one (one transaction per batch)."""
    done = 0
    last = 0
    while not (should_stop is not None and should_stop()):
        batch = memories_needing_vectors(store, user_id, agent_id, emb.model, EMBED_BATCH, after_id=last)
        if not batch:
            break
        last = batch[-1][1]
        context = store.embedding_context([mid for _, mid, _ in batch])
        # the text re-embedding would use (MemoryEngine.reembed_stale)
        texts = [vector_text(text, context.get(mid)) for _, mid, text in batch]
        t = time.perf_counter()
        vectors = emb.embed(texts, kind="passage")
        ms = 1000.0 * (time.perf_counter() - t) / len(texts)
        put_vectors(store, [(scope, mid, vec) for (scope, mid, _), vec in zip(batch, vectors)],
                    provider=emb.provider, model=emb.model, dims=emb.dims, embed_ms=ms)
        done += len(batch)
    return done


_RECORD = {"memories": "memories", "memory_facts": "facts", "memory_source_links": "sources",
           "memory_entity_mentions": "mentions", "memory_source_chunks": "chunks",
           "memory_ingestion_documents": "documents", "memory_entities": "entities", "memory_relations": "relations",
           "memory_retrieval_events": "traces"}


def _orphans(src: NeoAgentSource, report: ImportReport, user: str | None, agent: str | None) -> None:
    """Rows whose parent does not exist at all (facts, links, mentions without a memory, chunks
    without a document): reported once, for the owners being imported."""
    record = _RECORD
    parent = {"memory_facts": "memory_id", "memory_source_links": "memory_id", "memory_entity_mentions": "memory_id",
              "memory_source_chunks": "document_id"}
    for table, rows in src.orphans().items():
        for row in rows:
            if "user_id" in row and row.get("user_id") is not None:
                if not _matches((row["user_id"], row.get("agent_id") or ""), user, agent):
                    continue
            elif user is not None or agent is not None:
                continue  # no owner to filter on: reported by unfiltered imports only
            ident = row.get("id") or f"{row.get('memory_id')}/{row.get('chunk_id') or row.get('entity_id')}"
            report.problem(record[table], "dangling_reference", "skipped",
                           f"{table} {ident} -> {parent[table]} {row.get(parent[table])}: no such row")


__all__ = ["ImportReport", "NO_AGENT", "Unfit", "import_neoagent", "open_source", "norm_time", "parse_object",
           "in_sentence", "owner_scope", "row_scope", "map_category", "STATUS_MAP"]
