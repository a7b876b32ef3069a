"""A bounded, thread-safe least-recently-used map, and the key a text is cached under.

Recall meets the same best-scored turns question after question; the current-truth stage caches
what it derives from them (parsed clauses, clause vectors) here rather than in a cache of its own
per module.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


def text_key(text: str, longest: int) -> str | bytes:
    """A text as a cache key: itself up to `longest` characters, else a 16-byte digest of it, so a
    cache of long texts does not hold them."""
    if len(text) <= longest:
        return text
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class LRU(Generic[K, V]):
    """At most `size` entries; a get moves its entry to the back, a put beyond the bound drops
    the least recently used."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
