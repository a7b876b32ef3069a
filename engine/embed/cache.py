"""A content-addressed vector cache in front of an embedder: the same text is embedded once.

Benchmark files repeat themselves (LongMemEval haystacks share about one session in five; a
question set shares its questions between runs), and embedding is nearly all of a container's
build time. `CachedEmbedder` looks each text up by (embedder identity, kind, exact text) in a
cache file (engine/store/vector_cache.py) and asks the embedder only for the texts it has never
seen, so a vector served from the cache is the very vector the embedder computed for that text.

That holds because the embedders here are pure functions of one text: the local model runs one
text per session run (engine/embed/local.py says why), hashing is arithmetic. The identity
covers what could change a vector: provider, model, dims, the embedder's own fingerprint (the
local model's file checksums, an endpoint's URL) and the source of the embedder's module, so an
edit to pooling or truncation can never serve an old vector.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Embedder


@dataclass(slots=True)
class CacheStats:
    embedded: int = 0  # texts the embedder computed
    reused: int = 0  # texts served from the cache file or repeated within one call

    def as_dict(self) -> dict[str, int]:
        return {"embedded": self.embedded, "reused": self.reused}


def embedder_identity(emb: Embedder) -> str:
    """What decides the vectors `emb` computes, as one string (the cache's namespace)."""
    parts = [emb.provider, emb.model, str(emb.dims)]
    fingerprint = getattr(emb, "fingerprint", None)
    if callable(fingerprint):
        parts.append(str(fingerprint()))
    module = sys.modules.get(type(emb).__module__)
    try:
        source = inspect.getsource(module) if module is not None else ""
    except (OSError, TypeError):  # no source (a frozen bundle): the class name stands in
        source = type(emb).__qualname__
    parts.append(hashlib.sha256(source.encode("utf-8")).hexdigest()[:16])
    return "|".join(parts)


def text_key(kind: str, text: str) -> bytes:
    return hashlib.sha256(f"{kind}\x00{text}".encode()).digest()


class CachedEmbedder:
    """The Embedder protocol over `inner`, with a VectorCacheFile in front. `stats` counts what
    was embedded and what was reused; other attributes (warm, probe, model_dir) are the inner's."""

    def __init__(self, inner: Embedder, cache: Any, *, read: bool = True) -> None:
        self.inner = inner
        self.cache = cache  # engine.store.vector_cache.VectorCacheFile; None: count, and reuse only repeats within a call
        self.read = read  # False: compute every text anew (and store the result)
        self.stats = CacheStats()
        self._identity: str | None = None

    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def dims(self) -> int:
        return self.inner.dims

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (unpickling): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.inner, name)

    def identity(self) -> str:
        if self._identity is None:
            if not self.inner.dims and hasattr(self.inner, "probe"):
                self.inner.probe()  # an endpoint's width is part of what it computes
            self._identity = embedder_identity(self.inner)
        return self._identity

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        texts = list(texts)
        if not texts:
            return self.inner.embed(texts, kind=kind)
        ident = self.identity() if self.cache is not None else ""
        keys = [text_key(kind, t) for t in texts]
        unique = list(dict.fromkeys(keys))
        found = self.cache.get(ident, unique) if self.read and self.cache is not None else {}
        todo = [k for k in unique if k not in found]
        computed: dict[bytes, np.ndarray] = {}
        if todo:
            first = {k: i for i, k in reversed(list(enumerate(keys)))}
            mat = self.inner.embed([texts[first[k]] for k in todo], kind=kind)
            computed = {k: np.asarray(row, dtype="<f4") for k, row in zip(todo, mat)}
            if self.cache is not None:
                self.cache.put(ident, [(k, v.tobytes()) for k, v in computed.items()], replace=not self.read)
        out = np.empty((len(texts), self.dims), dtype=np.float32)
        for i, k in enumerate(keys):
            vec = computed.get(k)
            out[i] = vec if vec is not None else np.frombuffer(found[k], dtype="<f4")
        self.stats.embedded += len(todo)
        self.stats.reused += len(texts) - len(todo)
        return out
