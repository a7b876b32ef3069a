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
    lo, hi = 0, len(text)
    while lo < hi:  # binary search on characters, then back off to whitespace
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) <= room:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    space = cut.rfind(" ")
    if space > len(cut) // 2:
        cut = cut[:space]
    return cut.rstrip() + marker
