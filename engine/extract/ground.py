"""Grounding: find a candidate's evidence quote as an exact span inside its source chunk.

Models paraphrase whitespace and case; we tolerate exactly that (casefold, runs of
whitespace, curly vs straight quotes) and nothing more. A quote that cannot be found is kept,
flagged `evidence_unverified`, with its confidence lowered; never silently dropped or trusted.
"""

from __future__ import annotations

import re

from .model import Candidate, SourceChunk

UNVERIFIED_PENALTY = 0.6  # confidence multiplier for a quote we could not find

_FOLD = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})


def _folded_with_map(text: str) -> tuple[str, list[int]]:
    """Casefolded text with whitespace runs collapsed to one space, and a map back to offsets."""
    out: list[str] = []
    index: list[int] = []
    prev_space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if prev_space:
                continue
            prev_space = True
            out.append(" ")
            index.append(i)
            continue
        prev_space = False
        folded = ch.translate(_FOLD).casefold()
        for f in folded:
            out.append(f)
            index.append(i)
    return "".join(out), index


def locate(quote: str, text: str) -> tuple[int, int] | None:
    """[start, end) of quote inside text, tolerating whitespace and case; None if absent."""
    quote = quote.strip().strip('"').strip()
    if not quote:
        return None
    pos = text.find(quote)
    if pos >= 0:
        return pos, pos + len(quote)
    folded_text, index = _folded_with_map(text)
    folded_quote = re.sub(r"\s+", " ", quote.translate(_FOLD).casefold())
    pos = folded_text.find(folded_quote)
    if pos < 0:
        # A trailing full stop or ellipsis the model added is not evidence of anything.
        trimmed = folded_quote.rstrip(".…! ")
        if len(trimmed) >= 8:
            pos = folded_text.find(trimmed)
            folded_quote = trimmed
    if pos < 0:
        return None
    start = index[pos]
    end = index[pos + len(folded_quote) - 1] + 1
    return start, end


def ground(candidate: Candidate, chunk: SourceChunk) -> Candidate:
    """Attach the chunk and the evidence span (document offsets) to the candidate, in place."""
    candidate.chunk_id = chunk.chunk_id
    candidate.document_id = chunk.document_id
    candidate.trust = chunk.trust
    span = locate(candidate.evidence, chunk.text)
    if span is None:
        candidate.evidence_unverified = True
        candidate.confidence = round(candidate.confidence * UNVERIFIED_PENALTY, 4)
        candidate.evidence_start, candidate.evidence_end = chunk.start, chunk.end
    else:
        candidate.evidence_unverified = False
        candidate.evidence_start = chunk.start + span[0]
        candidate.evidence_end = chunk.start + span[1]
    return candidate
