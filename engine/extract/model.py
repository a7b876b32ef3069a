"""What an extractor proposes: memory candidates, each grounded in a quote from a source chunk."""

from __future__ import annotations

from dataclasses import dataclass, field

RELATIONS = ("new", "updates", "extends", "derives")
CATEGORIES = ("identity", "location", "work", "relationship", "pet", "preference", "plan", "event",
              "date", "tool", "health", "finance", "security", "other")
# Categories whose facts need stronger evidence before they become active (issue 3).
SENSITIVE_CATEGORIES = ("identity", "security", "finance", "health")


@dataclass(slots=True)
class SourceChunk:
    """The part of a source an extractor sees: one chunk of a stored document."""

    chunk_id: int
    document_id: int
    text: str  # == document.text[start:end]
    start: int  # document offsets of the chunk
    end: int
    speaker: str | None
    role: str | None  # user | assistant | system | tool | None
    trust: str  # user | assistant | tool | external
    source_time: str | None  # ISO UTC
    source_type: str = "chat"


@dataclass(slots=True)
class Candidate:
    text: str  # the fact as a standalone sentence
    subject: str
    predicate: str
    object: str
    evidence: str  # a quote from the source chunk
    relation: str = "new"  # as the extractor classified it; reconcile decides
    category: str = "other"
    confidence: float = 0.5
    importance: float = 0.5
    is_static: bool = False
    valid_from: str | None = None
    valid_to: str | None = None
    forget_after: str | None = None
    extraction_method: str = "heuristic"  # heuristic | llm | operator | import
    extractor_model: str | None = None
    prompt_version: str | None = None
    premises: list[str] = field(default_factory=list)  # for derives: the statements it rests on
    # For an update that names what it replaced ("switched from VS Code to Neovim"): the old value
    # as said, and a sentence for it, stored as history when no fact holds it yet.
    replaces: str | None = None
    replaces_text: str | None = None
    # The extractor guessed the predicate from the verb alone: the fact whose object is `replaces`
    # lends its own ("sold the Golf" continues whatever "my car is a 2012 VW Golf" was filed under).
    soft_predicate: bool = False
    # Filled in by grounding (engine/extract/ground.py):
    chunk_id: int | None = None
    document_id: int | None = None
    evidence_start: int | None = None  # document offsets of the located quote
    evidence_end: int | None = None
    evidence_unverified: bool = False
    trust: str = "user"
    # Filled in by canonicalisation (engine/extract/canonical.py):
    subject_key: str = ""
    predicate_key: str = ""
    object_key: str = ""
    replaces_key: str = ""
