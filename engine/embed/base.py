"""The Embedder protocol: every vector in the store comes from one of these."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows.

    provider / model / dims are recorded with every stored vector; when they differ from what
    a DB holds, the old vectors are stale and get re-embedded.
    """

    # Read-only to the protocol: an embedder may hold them as attributes or properties (a cache
    # in front of another embedder forwards its inner one's).
    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def dims(self) -> int: ...

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        """Return an array of shape (len(texts), dims), dtype float32, rows of unit length.

        kind is "passage" for stored text and "query" for recall queries (some models prefix
        them differently).
        """
        ...


def l2_normalise(mat: np.ndarray) -> np.ndarray:
    mat = np.asarray(mat, dtype=np.float32)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: np.ndarray = (mat / norms).astype(np.float32, copy=False)
    return out
