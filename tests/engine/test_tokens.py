"""The token estimate and the budget's truncation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.tokens import estimate_tokens, truncate_to_tokens


def _by_search(text: str, budget: int, marker: str = " […]") -> str:
    """The definition: the longest prefix that fits, found by re-estimating prefixes."""
    if estimate_tokens(text) <= budget:
        return text
    room = budget - estimate_tokens(marker)
    if room <= 0:
        return ""
    lo, hi = 0, len(text)
    while lo < hi:
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


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab cdéß_7.,!中\n\t-", max_size=300), st.integers(min_value=0, max_value=80))
def test_truncation_keeps_the_longest_prefix_that_fits(text, budget):
    assert truncate_to_tokens(text, budget) == _by_search(text, budget)


def test_a_long_word_is_cut_inside_and_the_result_fits():
    text = "a" * 100 + " tail"
    out = truncate_to_tokens(text, 5)
    assert out == _by_search(text, 5) and estimate_tokens(out) <= 5 and out.endswith(" […]")
    assert estimate_tokens("abcdefg") == 2 and estimate_tokens("abcdef") == 1
