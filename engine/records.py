"""Domain records read from the store. SQL stays in engine/store; everything else uses these."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
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
        return asdict(self)  # type: ignore[call-overload,no-any-return]  # subclasses are dataclasses


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
