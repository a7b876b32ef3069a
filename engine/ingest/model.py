"""What an importer hands to the ingestion pipeline: normalised text plus exact chunk spans.

Importers (engine/ingest/formats/*) are pure: bytes in, ParsedDocument list out. They never
touch the store. Every chunk is a half-open span [start, end) into ParsedDocument.text, which
is already normalised (see engine.ingest.normalize), so `doc.text[c.start:c.end]` IS the
chunk text; there is no separate copy that could drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CHUNK_KINDS = ("message", "window", "heading", "paragraph", "quote", "code_symbol", "split")
TRUST_LABELS = ("user", "assistant", "tool", "external")
# The importers by name (engine/ingest/detect.py dispatches on them; the CLI offers them, with "auto").
FORMATS = ("chat", "locomo", "longmemeval", "markdown", "text", "email", "code")


@dataclass(slots=True)
class ParsedChunk:
    start: int
    end: int
    kind: str  # one of CHUNK_KINDS
    speaker: str | None = None
    role: str | None = None  # user | assistant | system | tool, for chat-like sources
    message_id: str | None = None  # dia_id, LongMemEval "session:turn", email Message-ID, ...
    source_time: str | None = None  # ISO-8601 UTC
    trust: str | None = None  # per-chunk trust (chat: from role); None = the document's
    quotes_ordinal: int | None = None  # for kind=quote: ordinal of the chunk it is quoted in
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ParsedDocument:
    text: str  # normalised, the coordinate system of every span
    source_type: str  # chat | locomo | longmemeval | markdown | text | email | code
    trust: str  # default trust of the document's chunks
    uri: str | None = None
    title: str | None = None
    source_time: str | None = None  # ISO-8601 UTC
    external_id: str | None = None  # conversation id, session id, Message-ID, file path
    chunks: list[ParsedChunk] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def chunk_text(self, chunk: ParsedChunk) -> str:
        return self.text[chunk.start : chunk.end]
