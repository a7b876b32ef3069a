"""The bounded LRU map and text keys the recall caches share."""

from __future__ import annotations

import pytest

from engine.memo import LRU, text_key


def test_lru_keeps_the_recently_used_and_drops_the_oldest():
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3 and len(cache) == 2
    with pytest.raises(ValueError):
        LRU(0)


def test_a_long_text_is_keyed_by_a_digest_and_a_short_one_by_itself():
    assert text_key("short", 10) == "short"
    long_a, long_b = "x" * 11, "x" * 10 + "y"
    assert isinstance(text_key(long_a, 10), bytes) and len(text_key(long_a, 10)) == 16
    assert text_key(long_a, 10) == text_key("x" * 11, 10) != text_key(long_b, 10)
