"""The vector stage: exact top-k over an in-memory mirror of the SQLite BLOBs.

PERF.md measured, for 100k x 384 here: numpy float32 scans 12.5 / 15.5 ms (median / p95),
faiss 8-bit scalar-quantised scans with float32 rescoring of a shortlist 7.2 / 8.9 ms, both
with the exact top 10; graph and hash indexes were faster but missed up to 73% of it. Small
stores scan float32 directly; from SCAN_QUANTISED_FROM rows a faiss SQ8 scan picks a shortlist
that is rescored exactly in float32, which keeps recall@10 at 1.0 (memlens perf measures it)
and is what makes 1M memories fit the latency budget.

Identical vectors (a message repeated verbatim, real stores hold many) are one row of the
quantised index: a shortlist of copies of one vector could hold nothing else, and a
quantisation error between the best and second best vector then lost the best one entirely
(`memlens perf --data locomo-dev.json --memories 1000000`, where every text has 362 copies,
measured vector recall@10 0.985 so). The shortlist holds distinct vectors; each is scored once
and stands for all its copies.

The matrix is loaded once per scope and model, then kept current cheaply: new rows are
appended (and added to the quantised index), and only a deletion or a re-embedding reloads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..scope import Scope

SCAN_QUANTISED_FROM = 20_000  # rows; below this a float32 scan is as fast and simpler
SHORTLIST = 256  # quantised candidates rescored in float32
_CHUNK = 8192  # rows keyed or compared at a time (bounds the temporaries)
_MULT = np.random.default_rng(0x5EED).integers(1, 2**63, size=4096, dtype=np.uint64) | np.uint64(1)


def _row_keys(mat: np.ndarray) -> np.ndarray:
    """A 64-bit key per row from its bytes (integer arithmetic, so a row's key is the same in any
    batch). Equal rows, equal keys; a key is only a hint: rows are compared before being called
    copies."""
    mat = np.ascontiguousarray(mat, dtype=np.float32)
    out = np.empty(len(mat), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for start in range(0, len(mat), _CHUNK):
            block = mat[start:start + _CHUNK]
            words = block.view(np.uint64) if block.shape[1] % 2 == 0 else block.view(np.uint32).astype(np.uint64)
            out[start:start + _CHUNK] = (words * _MULT[: words.shape[1]]).sum(axis=1)
    return out


class VectorIndex:
    def __init__(self, store: Any, scope: Scope, model: str, dims: int) -> None:
        # `store`: an engine.store.Store (index/ sits beside store/ in the layers, so it is not
        # imported here); the index reads its vector_state, load_vectors and vector_changes.
        self.store = store
        self.scope = scope
        self.model = model
        self.dims = dims
        self._lock = threading.Lock()
        self._ids = np.zeros(0, dtype=np.int64)
        self._mat = np.zeros((0, dims), dtype=np.float32)
        self._n = 0
        self._last_row = 0
        self._state: tuple[int, int, str, int] | None = None  # vector_state: max id, count, newest, outdated
        self._change_key: tuple[int, int] | None = None
        self._changes: int | None = None  # the store's vector change counter when last loaded
        self._sq: Any = None  # faiss IndexScalarQuantizer over the distinct vectors of rows [0, self._sq_n)
        self._sq_n = 0
        self._sq_trained_n = 0
        self._sq_rows = np.zeros(0, dtype=np.int64)  # quantised index position -> its first row
        self._copies: dict[int, np.ndarray] = {}  # first row -> the later rows with the same vector
        # _row_keys of each group's first row, sorted, and those rows; then rows added since training
        self._key_rows: tuple[np.ndarray, np.ndarray] = (np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64))
        self._key_new: dict[int, int] = {}
        self._pos: dict[int, int] | None = None  # memory id -> row, built on first use after a change
        self._pos_n = 0
        self._sorted, self._sorted_n = False, -1  # whether rows [0, _sorted_n) are in memory-id order

    def __len__(self) -> int:
        return self._n

    def refresh(self) -> None:
        key = self.store.db.change_key()
        if key == self._change_key:
            return
        with self._lock:
            # Most commits touch no vector (every recall commits its trace): the change counter
            # (one row) says so, and the vectors are not counted again.
            changes = self.store.vector_changes()
            if changes == self._changes:
                self._change_key = key
                return
            state = self.store.vector_state(self.scope, self.model)
            if state != self._state:
                max_id, count, newest, outdated = state
                # rows only added: load those; anything else (re-embedded in place, removed) reloads all
                if self._state is not None and count >= self._n and newest >= self._state[2] and \
                        outdated == self._state[3] and count - self._n == self._count_after(self._last_row):
                    ids, mat, last = self.store.load_vectors(self.scope, self.model, self.dims, self._last_row)
                    self._append(ids, mat)
                    self._last_row = last
                else:
                    ids, mat, last = self.store.load_vectors(self.scope, self.model, self.dims, 0)
                    self._ids, self._mat, self._n = ids, mat, len(ids)
                    self._last_row = last
                    self._pos = None
                    self._sq, self._sq_n, self._sq_trained_n = None, 0, 0
                    self._copies, self._key_new = {}, {}
                    self._sorted_n = -1  # as many rows as before can be in another order
                self._state = state
            self._change_key = key
            self._changes = changes

    def _count_after(self, row_id: int) -> int:
        return int(self.store.vector_count_after(self.scope, self.model, row_id))

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
        if self._pos is not None:
            self._pos.update((int(mid), self._n + i) for i, mid in enumerate(ids.tolist()))
            self._pos_n = need
        self._n = need

    def _quantised(self) -> Any:
        """The SQ8 index over the distinct vectors, trained on the rows we have, extended with
        appended ones."""
        import faiss

        n = self._n
        if self._sq is None or n > 2 * self._sq_trained_n:
            faiss.omp_set_num_threads(1)  # a memory-bound scan gains nothing from a second thread
            firsts = self._group(n)
            sq = faiss.IndexScalarQuantizer(self.dims, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
            sq.train(self._mat[firsts])
            sq.add(self._mat[firsts])
            self._sq, self._sq_n, self._sq_trained_n, self._sq_rows = sq, n, n, firsts
        elif self._sq_n < n:
            added = [row for row in range(self._sq_n, n) if not self._is_copy(row)]
            if added:
                rows = np.asarray(added, dtype=np.int64)
                self._sq.add(self._mat[rows])
                self._sq_rows = np.concatenate([self._sq_rows, rows])
            self._sq_n = n
        return self._sq

    def _group(self, n: int) -> np.ndarray:
        """Rows [0, n) grouped by identical vectors: sets the copies and the key table, returns
        each group's first row in row order."""
        keys = _row_keys(self._mat[:n])
        order = np.argsort(keys, kind="stable")  # equal keys: rows in order, the first one first
        sorted_keys = keys[order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        first_of = np.repeat(order[starts], np.diff(np.r_[starts, n]))  # in `order`'s order
        later = np.flatnonzero(order != first_of)
        same = np.zeros(len(later), dtype=bool)
        for at in range(0, len(later), _CHUNK):  # a copy only when the vectors are equal
            part = later[at:at + _CHUNK]
            same[at:at + _CHUNK] = np.all(self._mat[order[part]] == self._mat[first_of[part]], axis=1)
        copy_rows, copy_firsts = order[later[same]], first_of[later[same]]
        self._copies = {}
        if len(copy_rows):
            by_first = np.lexsort((copy_rows, copy_firsts))
            copy_rows, copy_firsts = copy_rows[by_first], copy_firsts[by_first]
            bounds = np.flatnonzero(np.r_[True, copy_firsts[1:] != copy_firsts[:-1], True])
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
                self._copies[int(copy_firsts[a])] = copy_rows[a:b]
        is_copy = np.zeros(n, dtype=bool)
        is_copy[copy_rows] = True
        self._key_rows = (sorted_keys[starts], order[starts])
        self._key_new = {}
        return np.flatnonzero(~is_copy)

    def _is_copy(self, row: int) -> bool:
        """Whether an appended row repeats a vector the quantised index holds (then it joins
        that vector's copies); otherwise it becomes the first row of its own."""
        key = int(_row_keys(self._mat[row:row + 1])[0])
        first = self._key_new.get(key)
        if first is None:
            keys, rows = self._key_rows
            at = int(np.searchsorted(keys, np.uint64(key)))
            if at < len(keys) and int(keys[at]) == key:
                first = int(rows[at])
        if first is not None and np.array_equal(self._mat[first], self._mat[row]):
            self._copies[first] = np.append(self._copies.get(first, np.zeros(0, dtype=np.int64)), row)
            return True
        self._key_new.setdefault(key, row)
        return False

    def vectors_of(self, memory_ids: Iterable[int]) -> dict[int, np.ndarray]:
        """memory id -> its vector, for the ids this index holds (recall compares a few memories
        with each other: a statement and its later restatement)."""
        self.refresh()
        with self._lock:
            ids = self._ids[: self._n]
            if self._sorted_n != self._n:
                self._sorted, self._sorted_n = bool(np.all(ids[1:] > ids[:-1])), self._n
            if self._sorted:  # rows in id order (the usual case): no id -> row table to build
                wanted = list(dict.fromkeys(int(m) for m in memory_ids))
                at = np.minimum(np.searchsorted(ids, wanted), max(0, self._n - 1)).tolist()
                return {m: self._mat[a] for m, a in zip(wanted, at) if self._n and ids[a] == m}
            if self._pos is None or self._pos_n != self._n:
                self._pos = {int(mid): i for i, mid in enumerate(self._ids[: self._n].tolist())}
                self._pos_n = self._n
            pos = self._pos
            return {mid: self._mat[pos[mid]] for mid in memory_ids if mid in pos}

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(memory ids, cosine scores) of the top k, best first, scored exactly in float32."""
        self.refresh()
        n = self._n
        if n == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        k = min(k, n)
        if n >= SCAN_QUANTISED_FROM:
            with self._lock:
                sq = self._quantised()
                _, pos = sq.search(q[None, :], min(sq.ntotal, max(SHORTLIST, 4 * k)))
                rows = self._sq_rows[pos[0][pos[0] >= 0]]
                copies = self._copies
            scores = self._mat[rows] @ q
            order = np.argsort(-scores, kind="stable")
            if not copies:
                order = order[:k]
                return self._ids[rows[order]].copy(), scores[order].copy()
            out_rows: list[np.ndarray] = []
            out_scores: list[np.ndarray] = []
            got = 0
            for i in order:  # a vector, then its copies (the same score), until k rows
                group = np.r_[rows[i], copies.get(int(rows[i]), np.zeros(0, dtype=np.int64))][: k - got]
                out_rows.append(group)
                out_scores.append(np.full(len(group), scores[i], dtype=np.float32))
                got += len(group)
                if got >= k:
                    break
            return self._ids[np.concatenate(out_rows)].copy(), np.concatenate(out_scores)
        scores = self._mat[:n] @ q
        top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        order = top[np.argsort(-scores[top], kind="stable")]
        return self._ids[order].copy(), scores[order].copy()
