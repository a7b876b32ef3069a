"""The quantised vector scan holds each distinct vector once: copies of a message do not crowd
the shortlist, and the top k is the exact top k by score."""

from __future__ import annotations

import numpy as np
import pytest

import engine.index.vectors as vectors
from engine.embed.hashing import HashingEmbedder
from engine.index.vectors import VectorIndex
from engine.memory import MemoryEngine
from engine.scope import Scope
from tests.engine.test_pipeline import chat_doc

ANA = Scope.default("ana", "bot")
WORDS = "garden river violin market tennis ferry pottery lantern orchard comet puzzle harbor".split()


def conversation(n: int, offset: int = 0) -> list[tuple[str, str]]:
    return [("Ana" if i % 2 else "Ben", f"{WORDS[i % len(WORDS)]} {WORDS[(3 * i + 1) % len(WORDS)]} {i + offset}")
            for i in range(n)]


@pytest.fixture
def small_scan(monkeypatch):
    monkeypatch.setattr(vectors, "SCAN_QUANTISED_FROM", 10)
    monkeypatch.setattr(vectors, "SHORTLIST", 4)


def exact_top(index: VectorIndex, q: np.ndarray, k: int) -> np.ndarray:
    scores = index._mat[: index._n] @ q
    return np.sort(scores)[::-1][:k]


def test_copies_are_one_quantised_row_and_the_top_k_is_exact(tmp_path, small_scan):
    emb = HashingEmbedder(384)
    with MemoryEngine(tmp_path / "m.db", embedder=emb, background_reembed=False) as eng:
        turns = conversation(30)
        docs = [chat_doc(turns, uri=f"chat{c}.json", external_id=f"c{c}") for c in range(4)]
        eng.ingest_documents(docs, scope=ANA, extract="none")
        index = VectorIndex(eng.store, ANA, emb.model, emb.dims)
        index.refresh()
        rows = index._mat[: index._n]
        distinct = len(np.unique(rows, axis=0))
        assert index._n >= 4 * 30 and distinct < index._n / 3  # the same conversation four times
        for text in ["garden river", "violin ferry 7", "comet puzzle harbor", "Ben: orchard"]:
            q = emb.embed([text], kind="query")[0]
            ids, scores = index.search(q, 6)
            assert index._sq.ntotal == distinct
            assert len(set(ids.tolist())) == 6
            np.testing.assert_allclose(scores, exact_top(index, q, 6), atol=1e-6)
            vecs = index.vectors_of(ids.tolist())
            for mid, s in zip(ids.tolist(), scores):  # each score is its own row's exact score
                assert float(vecs[mid] @ q) == pytest.approx(float(s), abs=1e-6)

        # Appended rows: a repeated conversation joins the copies, a new one adds rows.
        eng.ingest_documents([chat_doc(turns, uri="again.json", external_id="again"),
                              chat_doc(conversation(5, offset=100), uri="new.json", external_id="new")],
                             scope=ANA, extract="none")
        q = emb.embed(["tennis lantern"], kind="query")[0]
        ids, scores = index.search(q, 8)
        assert index._n > 5 * 30
        assert index._sq.ntotal == len(np.unique(index._mat[: index._n], axis=0))
        np.testing.assert_allclose(scores, exact_top(index, q, 8), atol=1e-6)


def test_without_copies_the_quantised_scan_is_unchanged(tmp_path, small_scan):
    emb = HashingEmbedder(384)
    with MemoryEngine(tmp_path / "m.db", embedder=emb, background_reembed=False) as eng:
        eng.ingest_documents([chat_doc(conversation(40))], scope=ANA, extract="none")
        index = VectorIndex(eng.store, ANA, emb.model, emb.dims)
        q = emb.embed(["pottery market"], kind="query")[0]
        ids, scores = index.search(q, 5)
        assert index._sq.ntotal == index._n and not index._copies
        np.testing.assert_allclose(scores, exact_top(index, q, 5), atol=1e-6)


def test_vectors_of_finds_each_id_whatever_the_row_order(tmp_path):
    emb = HashingEmbedder(384)
    with MemoryEngine(tmp_path / "m.db", embedder=emb, background_reembed=False) as eng:
        eng.ingest_documents([chat_doc(conversation(12))], scope=ANA, extract="none")
        index = VectorIndex(eng.store, ANA, emb.model, emb.dims)
        index.refresh()
        ids = index._ids[: index._n].tolist()
        truth = {mid: index._mat[i].copy() for i, mid in enumerate(ids)}
        asked = [ids[3], ids[0], ids[-1], 10**9]  # and an id it does not hold
        for reorder in (False, True):
            if reorder:  # rows out of id order (a later embedding of an older memory)
                index._ids[: index._n] = index._ids[: index._n][::-1].copy()
                index._mat[: index._n] = index._mat[: index._n][::-1].copy()
                index._sorted_n = -1
            got = index.vectors_of(asked)
            assert sorted(got) == sorted(asked[:3])
            for mid, vec in got.items():
                assert np.array_equal(vec, truth[mid])
