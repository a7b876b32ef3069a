"""The vector stage: an exact float32 scan over an in-memory mirror of the SQLite BLOBs.

PERF.md measured exact numpy scans at 12.5 / 15.5 ms (median / p95) for 100k x 384 on this
machine, with recall 1.0 by construction; approximate indexes were faster but missed up to
73% of the true top 10. The matrix is loaded once per scope and model, then kept current
cheaply: new rows are appended, and only a deletion or a re-embedding (rare) reloads.
"""

from __future__ import annotations

import threading

import numpy as np

from ..scope import Scope


class VectorIndex:
    def __init__(self, store, scope: Scope, model: str, dims: int) -> None:
        self.store = store
        self.scope = scope
        self.model = model
        self.dims = dims
        self._lock = threading.Lock()
        self._ids = np.zeros(0, dtype=np.int64)
        self._mat = np.zeros((0, dims), dtype=np.float32)
        self._n = 0
        self._last_row = 0
        self._state: tuple[int, int, str] | None = None
        self._change_key: tuple[int, int] | None = None

    def __len__(self) -> int:
        return self._n

    def refresh(self) -> None:
        key = self.store.db.change_key()
        if key == self._change_key:
            return
        with self._lock:
            state = self.store.vector_state(self.scope, self.model)
            if state != self._state:
                max_id, count, newest = state
                if self._state is not None and count >= self._n and newest >= self._state[2] and \
                        count - self._n == self._count_after(self._last_row):
                    ids, mat, last = self.store.load_vectors(self.scope, self.model, self.dims, self._last_row)
                    self._append(ids, mat)
                    self._last_row = last
                else:
                    ids, mat, last = self.store.load_vectors(self.scope, self.model, self.dims, 0)
                    self._ids, self._mat, self._n = ids.copy(), np.array(mat, dtype=np.float32), len(ids)
                    self._last_row = last
                self._state = state
            self._change_key = key

    def _count_after(self, row_id: int) -> int:
        return self.store.vector_count_after(self.scope, self.model, row_id)

    def _append(self, ids: np.ndarray, mat: np.ndarray) -> None:
        if len(ids) == 0:
            return
        need = self._n + len(ids)
        if need > len(self._ids):
            cap = max(need, 2 * len(self._ids), 1024)
            new_ids = np.zeros(cap, dtype=np.int64)
            new_mat = np.zeros((cap, self.dims), dtype=np.float32)
            new_ids[: self._n] = self._ids[: self._n]
            new_mat[: self._n] = self._mat[: self._n]
            self._ids, self._mat = new_ids, new_mat
        self._ids[self._n:need] = ids
        self._mat[self._n:need] = mat
        self._n = need

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(memory ids, cosine scores) of the exact top k, best first."""
        self.refresh()
        n = self._n
        if n == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        scores = self._mat[:n] @ q
        k = min(k, n)
        top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        order = top[np.argsort(-scores[top], kind="stable")]
        return self._ids[order].copy(), scores[order].copy()
