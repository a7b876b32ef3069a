"""A cheap, deterministic token estimate for budgets (no tokenizer download, no model).

Roughly what BPE tokenizers give for English: words, numbers and punctuation marks count one
each, and long words count extra. It errs high, so a budget it enforces is never exceeded by
a real tokenizer by much.
"""

from __future__ import annotations

import re

_PIECE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def estimate_tokens(text: str) -> int:
    n = 0
    for piece in _PIECE.findall(text):
        n += 1 + (len(piece) - 1) // 6 if len(piece) > 6 else 1
    return n


def truncate_to_tokens(text: str, budget: int, marker: str = " […]") -> str:
    """The longest prefix of text (cut at a word boundary) that fits budget with the marker."""
    if estimate_tokens(text) <= budget:
        return text
    room = budget - estimate_tokens(marker)
    if room <= 0:
        return ""
    cut = text[:_longest_prefix(text, room)]
    space = cut.rfind(" ")
    if space > len(cut) // 2:
        cut = cut[:space]
    return cut.rstrip() + marker


def _longest_prefix(text: str, room: int) -> int:
    """The length of the longest prefix of text whose estimate is at most room, in one pass over
    its pieces (a binary search re-estimating prefixes took ms on a long turn): the estimate only
    grows with the prefix, and a piece cut after q characters counts 1 + (q - 1) // 6."""
    used = 0
    for m in _PIECE.finditer(text):
        start, end = m.span()
        length = end - start
        cost = 1 + (length - 1) // 6 if length > 6 else 1
        if used + cost <= room:
            used += cost
            continue
        if used + 1 > room:
            return start
        return start + min(length - 1, 6 * (room - used - 1) + 6)
    return len(text)
