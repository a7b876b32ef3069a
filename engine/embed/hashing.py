"""A deterministic feature-hashing embedder. Tests only: fast, no model file, no network.

Words and character trigrams are hashed (blake2b, stable across processes, unlike hash())
into signed buckets, so texts that share words share direction and similarity is meaningful
enough for retrieval tests.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from .base import l2_normalise

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    provider = "hashing"

    def __init__(self, dims: int = 384) -> None:
        self.dims = dims
        self.model = f"hashing-v1-{dims}"

    def _features(self, text: str) -> list[str]:
        words = [w.lower() for w in _WORD.findall(text)]
        feats = [f"w:{w}" for w in words]
        for w in words:
            padded = f"#{w}#"
            feats.extend(f"c:{padded[i:i + 3]}" for i in range(len(padded) - 2))
        return feats

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat in self._features(text):
                h = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(h, "little")
                bucket = value % self.dims
                sign = 1.0 if (value >> 63) & 1 else -1.0
                weight = 1.0 if feat.startswith("w:") else 0.3
                out[row, bucket] += sign * weight
        return l2_normalise(out)
