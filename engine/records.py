"""Domain records read from the store. SQL stays in engine/store; everything else uses these."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, TypeVar

T = TypeVar("T")


def from_dict(cls: type[T], row: dict[str, Any]) -> T:
    wanted = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    data: dict[str, Any] = {}
    for name, value in row.items():
        if name not in wanted:
            continue
        if name == "meta" and isinstance(value, str):
            value = json.loads(value)
        data[name] = value
    return cls(**data)


class Record:
    def as_dict(self) -> dict[str, Any]:
        """{field: value} with nested dicts, lists and records copied (what dataclasses.asdict
        gives): the JSON-ready shape. Done by hand because asdict costs ~75 us a fact, and the
        CLI, MCP and UI turn every fact they list into one."""
        out = {}
        for name in _field_names(type(self)):
            value = getattr(self, name)
            out[name] = value if type(value) in _SCALARS else _plain(value)
        return out


_SCALARS = frozenset({int, float, str, bool, bytes, type(None)})


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return value.as_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


@dataclass(slots=True)
class Document(Record):
    id: int
    user_id: str
    agent_id: str
    scope_type: str
    scope_id: str
    source_type: str
    uri: str | None
    external_id: str | None
    title: str | None
    text: str
    content_hash: str
    trust: str
    source_time: str | None
    ingested_at: str
    retracted_at: str | None
    version: int
    previous_id: int | None
    replaced_at: str | None
    meta: dict[str, Any]


@dataclass(slots=True)
class Chunk(Record):
    id: int
    document_id: int
    ordinal: int
    kind: str
    start: int
    end: int
    text: str
    speaker: str | None
    role: str | None
    message_id: str | None
    source_time: str | None
    trust: str
    quotes_chunk_id: int | None
    meta: dict[str, Any]


@dataclass(slots=True)
class Memory(Record):
    id: int
    user_id: str
    agent_id: str
    scope_type: str
    scope_id: str
    kind: str
    text: str
    category: str | None
    importance: float
    confidence: float
    trust: str
    is_static: int
    source_time: str | None
    created_at: str
    updated_at: str
    forget_after: str | None
    forgotten_at: str | None
    forget_reason: str | None
    retracted_at: str | None
    access_count: int
    last_accessed_at: str | None
    strength: float
    pinned: int
    extraction_method: str | None


@dataclass(slots=True)
class Source(Record):
    memory_id: int
    chunk_id: int
    document_id: int
    start: int
    end: int
    relevance: float


@dataclass(slots=True)
class Fact(Record):
    """A facts row with its memory's trust, text, pin and forgetting (Store.fact_record)."""

    id: int
    user_id: str
    agent_id: str
    scope_type: str
    scope_id: str
    memory_id: int
    subject: str
    predicate: str
    object: str
    subject_key: str
    predicate_key: str
    object_key: str
    relation: str
    status: str
    confidence: float
    importance: float
    category: str | None
    is_static: int
    valid_from: str | None
    valid_to: str | None
    learned_at: str
    invalidated_at: str | None
    forget_after: str | None
    supersedes_fact_id: int | None
    evidence: str | None
    evidence_unverified: int
    source_count: int
    extraction_method: str
    extractor_model: str | None
    prompt_version: str | None
    rule: str | None
    reason: str | None
    external_ref: str | None
    # from the fact's memory
    trust: str
    text: str
    pinned: int
    forgotten_at: str | None
    forget_reason: str | None


@dataclass(slots=True)
class Conflict(Record):
    """Two facts that disagree, or one held for review (fact_b_id None)."""

    id: int
    user_id: str
    agent_id: str
    scope_type: str
    scope_id: str
    fact_a_id: int
    fact_b_id: int | None
    rule: str
    reason: str | None
    status: str
    resolution: str | None
    created_at: str
    resolved_at: str | None
    curation_id: int | None


@dataclass(slots=True)
class TraceCandidate(Record):
    """One candidate of a stored retrieval trace (trace_candidates), its JSON columns decoded."""

    id: int
    user_id: str
    agent_id: str
    scope_type: str
    scope_id: str
    trace_id: int
    memory_id: int
    channels: dict[str, Any]
    components: dict[str, Any]
    score: float
    rank: int | None
    dropped_stage: str | None
    drop_reason: str | None
    drop_detail: str | None
    tokens: int | None


@dataclass(slots=True)
class StoredTrace(Record):
    """A retrieval trace as stored (retrieval_traces, JSON columns decoded) with its candidates,
    kept first, then by score. engine/retrieve/trace.py's Trace is the one a recall builds."""

    id: int
    user_id: str
    agent_id: str
    scope_type: str
    scope_id: str
    origin: str
    query_text: str | None
    query_hash: str
    recipe: str
    k: int
    as_of: str | None
    params: Any
    plan: Any
    rerank: Any
    stages: Any
    timings: Any
    context_text: str | None
    context_tokens: int | None
    result_count: int | None
    created_at: str
    candidates: list[TraceCandidate]


@dataclass(slots=True)
class Embedding(Record):
    """A stored vector and how it was made (embeddings)."""

    provider: str | None
    model: str
    dims: int
    created_at: str
    embed_ms: float | None
    stale: int
    vector: Any  # np.ndarray of float32, `dims` long

    def about(self) -> dict[str, Any]:
        """Everything but the vector, JSON-ready."""
        return {"provider": self.provider, "model": self.model, "dims": self.dims, "created_at": self.created_at,
                "embed_ms": self.embed_ms, "stale": self.stale}


@dataclass(slots=True)
class Relation(Record):
    """A link between two memories (memory_relations): updates, extends, derives."""

    id: int
    user_id: str
    agent_id: str
    scope_type: str
    scope_id: str
    src_memory_id: int
    dst_memory_id: int
    type: str
    confidence: float | None
    evidence_chunk_id: int | None
    created_by: str | None
    rule: str | None
    reason: str | None
    created_at: str
    removed_at: str | None


@dataclass(slots=True)
class CurationEntry(Record):
    """One curation_log row, its `before` and `after` images decoded."""

    id: int
    user_id: str
    agent_id: str
    scope_type: str
    scope_id: str
    command: str
    target_type: str | None
    target_id: int | None
    before: dict[str, Any]
    after: dict[str, Any]
    actor: str | None
    note: str | None
    created_at: str
    undone_at: str | None
    undo_of: int | None


@dataclass(slots=True)
class ExtractionWindow(Record):
    """A run of a document's chunks queued for fact extraction (extraction_queue)."""

    id: int
    user_id: str
    agent_id: str
    scope_type: str
    scope_id: str
    document_id: int
    first_ordinal: int
    last_ordinal: int
    status: str
    attempts: int
    last_error: str | None
    created_at: str
    updated_at: str
