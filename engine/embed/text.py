"""What a stored memory's vector is computed from: one definition for every writer of vectors.

Ingestion, consolidation, curation edits, the NeoAgent importer and re-embedding all embed a
memory from these functions, so a re-embed reproduces what was first written. The memory's text
and FTS row stay exactly its own; only the vector sees the extra context.
"""

from __future__ import annotations

from typing import Any

CONTEXT_CHARS = 300  # of the previous message, embedded after the message itself


def contextual_text(text: str, kind: str, prev_text: str | None, prev_kind: str | None) -> str:
    if kind == "message" and prev_text and prev_kind == "message":
        return f"{text}\n(in reply to: {prev_text[:CONTEXT_CHARS]})"
    return text


# Bump when vector_text changes what a stored memory is embedded from: opening a database written
# under an older version re-embeds what changed (2: facts gained their evidence quote).
VECTOR_TEXT_VERSION = 2


def fact_vector_text(text: str, evidence: str | None) -> str:
    """A fact is embedded with the words it was read from. Alone, "Nate likes helping people." is
    a few words and a name, and sits closer to any short question about Nate than the turns that
    answer it; with its quote it is compared on what was said. Its text and FTS row stay the fact."""
    evidence = " ".join((evidence or "").split())
    if not evidence or evidence.casefold() in text.casefold():
        return text
    return f"{text}\n(from: {evidence[:CONTEXT_CHARS]})"


def vector_text(text: str, context: tuple[Any, ...] | None) -> str:
    """The text a stored memory's vector is computed from, given Store.embedding_context's row:
    the same text ingestion and consolidation embedded, so re-embedding reproduces it."""
    if context is None:
        return text
    memory_kind, evidence, kind, prev_text, prev_kind = context
    if memory_kind == "fact":
        return fact_vector_text(text, evidence)
    return contextual_text(text, kind, prev_text, prev_kind)
