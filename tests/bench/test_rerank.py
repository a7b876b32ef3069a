"""learned_rerank: the stage, its features, the pairwise fit and its held-out folds."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from engine.bench import rerank_fit
from engine.errors import BadInput
from engine.memory import MemoryEngine
from engine.retrieve import rerank
from engine.retrieve.trace import Trace

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
LENGTH = rerank.FEATURE_NAMES.index("chars")


def _trace(n: int) -> Trace:
    t = Trace(query="q", origin="test", recipe="offline", k=3, as_of=None)
    for i in range(n):
        c = t.candidate(i + 1)
        c.score = 1.0 - i * 0.01  # candidate 1 first
        c.components = {"fusion": c.score}
        c.channels = {"vector": {"rank": i + 1, "score": c.score}}
        c.meta = {"text": " ".join(["w"] * (i + 1)), "document_id": i % 2, "chunk_id": i, "kind": "episode"}
    return t


def _model(depth: int, feature: int, sign: float = 1.0) -> dict:
    w = [0.0] * len(rerank.FEATURE_NAMES)
    w[feature] = sign
    f = len(rerank.FEATURE_NAMES)
    return {"features": list(rerank.FEATURE_NAMES), "depth": depth, "mean": [0.0] * f, "scale": [1.0] * f, "weights": w}


def test_the_stage_reorders_only_its_pool_keeps_it_above_the_rest_and_records_each_learned_score():
    t = _trace(6)
    rerank.apply(t, _model(4, LENGTH))  # longer turns first, among the first 4 only
    order = [c.memory_id for c in sorted(t.alive(), key=lambda c: -c.score)]
    assert order == [4, 3, 2, 1, 5, 6]
    assert set(t.params["learned_rerank"]["scores"]) == {"1", "2", "3", "4"}
    assert t.candidates[4].components["learned_rerank"] > 0 and "learned_rerank" not in t.candidates[5].components
    fewer = _trace(6)
    rerank.apply(fewer, None)  # no model: the order stays and the trace says why
    assert [c.memory_id for c in sorted(fewer.alive(), key=lambda c: -c.score)] == [1, 2, 3, 4, 5, 6]
    assert "skipped" in fewer.params["learned_rerank"]


def test_features_are_read_from_the_trace_one_row_a_candidate():
    t = _trace(5)
    x = rerank.features(rerank.pool(t.alive(), 5))
    assert x.shape == (5, len(rerank.FEATURE_NAMES))
    names = rerank.FEATURE_NAMES
    assert x[0, names.index("score_gap")] == 0.0 and x[4, names.index("score_gap")] < 0
    assert x[0, names.index("vector_rank")] == 1.0 and x[0, names.index("fts_rank")] == 0.0
    assert x[:, names.index("document_share")].tolist() == [0.6, 0.4, 0.6, 0.4, 0.6]


def test_a_model_fitted_on_other_features_is_not_read(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_model(10, LENGTH)))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**_model(10, LENGTH), "features": ["length"]}))
    assert rerank.load_model(good) is not None and rerank.load_model(bad) is None
    assert rerank.load_model(tmp_path / "missing.json") is None


def test_a_rewritten_model_file_is_read_again(tmp_path):
    # bench fit --model rerank writes its fold models to the same paths run after run, in-process
    # with one worker: the stage must answer with the weights on disk, not those read before
    path = tmp_path / "m.json"
    path.write_text(json.dumps(_model(10, LENGTH)))
    assert rerank.load_model(path)["depth"] == 10
    path.write_text(json.dumps(_model(30, LENGTH)))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a new mtime even on a coarse clock
    assert rerank.load_model(path)["depth"] == 30


def _item(gold_rows: list[int], n: int, rng: np.random.Generator, fold: str) -> dict:
    raw = rng.normal(size=(n, len(rerank.RAW_NAMES)))
    col = {name: i for i, name in enumerate(rerank.RAW_NAMES)}
    raw[:, col["score"]] = np.linspace(1.0, 0.0, n)
    raw[:, col["chars"]] = rng.integers(20, 60, size=n)
    raw[gold_rows, col["chars"]] = 2000  # the gold turns are the long ones
    raw[:, col["document"]] = rng.integers(0, 5, size=n)
    raw[:, col["chunk"]] = np.arange(n)
    return {"file": f"{fold}.json", "dataset": "locomo", "fold": fold, "question_id": f"{fold}-{rng.integers(1 << 30)}",
            "category": "multi-hop", "excluded": False, "gold": {"turn": [f"t{i}" for i in gold_rows]},
            "msgs": [[f"t{i}"] for i in range(n)], "raw": raw.tolist()}


def _top10_recall(items: list[dict], model: dict | None) -> float:
    got = []
    for it in items:
        x = rerank.features(np.asarray(it["raw"]))
        order = np.argsort(-rerank.score(model, x), kind="stable") if model else np.arange(len(x))
        top = {m for i in order[:10] for m in it["msgs"][i]}
        got.append(len(top & set(it["gold"]["turn"])) / len(it["gold"]["turn"]))
    return sum(got) / len(got)


def test_the_pairwise_fit_learns_what_ranks_the_gold_first():
    rng = np.random.default_rng(7)
    items = [_item([25, 40], 60, rng, f"f{i % 3}") for i in range(30)]
    model = rerank_fit.train(items, 60)
    w = dict(zip(rerank.FEATURE_NAMES, model["weights"]))
    assert w["chars"] == max(w.values()) > 0
    assert _top10_recall(items, None) == 0.0 and _top10_recall(items, model) > 0.9
    # the identity model scores by the fused score: the stage runs and keeps the order
    t = _trace(6)
    rerank.apply(t, rerank_fit.identity_model(6))
    assert [c.memory_id for c in sorted(t.alive(), key=lambda c: -c.score)] == [1, 2, 3, 4, 5, 6]
    with pytest.raises(BadInput, match="no question with gold"):
        rerank_fit.train([{**items[0], "gold": {"turn": []}}], 60)


def test_fit_end_to_end_reports_dev_held_out_folds_and_writes_a_model_the_stage_reads(tmp_path, monkeypatch):
    from engine.bench.runner import run_benchmark

    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        out = rerank_fit.run_rerank_fit(engine, [str(DATA / "bench_locomo_tiny.json")], embedder="hashing")
        bench = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", k_values=[10], embedder="hashing")
        # with the identity model the stage changes nothing: "without" is the benchmark's own figure
        name = "bench_locomo_tiny.json"
        for scheme in ("memlens", "official"):
            assert out["without"]["by_file"][name][scheme]["overall"] == pytest.approx(
                bench["scores"][scheme]["metrics"]["turn_evidence_recall@10"])
        assert set(out["folds"]) == {"locomo:conv-x1", "locomo:conv-x2"}
        assert out["cross_validated"]["by_file"][name]["official"]["overall"] is not None
        assert "| locomo:conv-x1 |" in rerank_fit.markdown(out)
        path = rerank_fit.write_model(out, tmp_path / "rerank.json")
        assert rerank.load_model(path)["depth"] == out["depth"] in rerank_fit.DEPTHS
    from dataclasses import replace

    from engine.retrieve import recipes

    monkeypatch.setitem(recipes.RECIPES, "on", replace(recipes.RECIPES["offline"], off=()))
    with MemoryEngine(tmp_path / "other.db", llm=False) as engine, pytest.raises(BadInput, match="runs learned_rerank"):
        rerank_fit.run_rerank_fit(engine, [str(DATA / "bench_locomo_tiny.json")], recipe="on", embedder="hashing")


def test_recall_with_the_stage_on_records_it_and_off_leaves_the_order(tmp_path, monkeypatch):
    from engine.embed.hashing import HashingEmbedder
    from engine.ingest.model import ParsedChunk, ParsedDocument
    from engine.scope import Scope

    scope = Scope.default("ana", "bot")
    path = tmp_path / "rerank.json"
    path.write_text(json.dumps(_model(50, LENGTH)))
    monkeypatch.setattr(rerank, "MODEL_PATH", path)
    with MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(64), llm=False) as engine:
        texts = ["Ana: I adopted a cat", "Ana: the cat I adopted is called Miso and she is a very calm tabby cat",
                 "Ana: my cat likes the window"]
        for i, text in enumerate(texts):
            when = f"2024-0{i + 1}-01T10:00:00Z"
            engine.ingest_documents([ParsedDocument(
                text=text, source_type="chat", trust="user", uri="chat", external_id=f"d{i}", source_time=when,
                chunks=[ParsedChunk(0, len(text), "message", speaker="Ana", role="user", source_time=when)])],
                scope=scope)
        off = engine.recall("which cat did Ana adopt?", scope=scope, k=3, recipe="offline", persist=False)
        on = engine.recall("which cat did Ana adopt?", scope=scope, k=3, recipe="offline", persist=False,
                           on=("learned_rerank",))
    assert "learned_rerank" not in off.trace.params
    scores = on.trace.params["learned_rerank"]["scores"]
    assert len(scores) == len(on.trace.alive()) >= 2
    longest = max(on.trace.alive(), key=lambda c: len(c.meta["text"]))
    assert on.ranked_ids[0] == longest.memory_id


def test_the_features_are_derived_from_the_raw_rows_as_each_candidate_reads():
    t = _trace(14)
    t.candidates[3].meta["document_id"] = None  # no document: no mates, its own best
    t.candidates[5].channels["fts"] = {"rank": 2, "score": 0.5}
    t.candidates[12].channels = {"neighbour": {"rank": 3, "score": 0.1}}
    t.candidates[7].meta["text"] = "is it?"
    top = rerank.pool(t.alive(), 14)
    x = rerank.features(top)
    f = {n: x[:, i].tolist() for i, n in enumerate(rerank.FEATURE_NAMES)}
    # documents alternate 0, 1, None (candidate 3), 1, 0, ...: document 0 holds 6 of the 14, document 1 7
    assert f["document_share"][2] == 0.0 and f["document_position"][2] == 1.0
    assert f["document_share"][0] == pytest.approx(6 / 14) and f["document_share"][1] == pytest.approx(7 / 14)
    assert f["document_position"][:6] == [1.0, 1.0, 1.0, 0.5, 0.5, 1 / 3]
    assert f["document_gap"][4] == pytest.approx(top[0].score - top[0].score)  # document 0: its best is the first
    assert f["document_gap"][3] == pytest.approx(top[1].score - top[0].score)
    # candidate 5: vector rank 5, fts rank 2
    assert f["vector_and_fts"][4] == 1.0 and f["rank_agreement"][4] == pytest.approx(1.0 / np.log2(6.0))
    assert f["neighbour_only"][11] == 1.0 and f["neighbour_near"][11] == 0.25 and f["vector_rank"][11] == 0.0
    assert f["asks"][6] == 1.0 and f["chars"][6] == pytest.approx(np.log1p(len("is it?")))
    # beside_top: chunk i +- 1 of the same document among the first 10 (documents alternate: none here)
    assert f["beside_top"] == [0.0] * 14
    # the rows the trace records give the same features, and a shallower pool's are its first rows' own
    r = rerank.raw(top)
    assert np.array_equal(rerank.features(r), x)
    assert np.allclose(rerank.features(r[:6]), rerank.features(rerank.pool(t.alive(), 6)))


def test_keep_leaves_the_fused_first_k_unless_the_model_beats_them_by_the_margin():
    def order(keep: float) -> list[int]:
        t = _trace(6)
        t.k = 2
        rerank.apply(t, {**_model(6, LENGTH), "keep": keep})  # longer turns first: 6, 5, 4, ...
        return [c.memory_id for c in sorted(t.alive(), key=lambda c: -c.score)]

    assert order(0.0) == [6, 5, 4, 3, 2, 1]
    # log1p(chars): turn 1 0.69, 2 1.39, 3 1.79, 4 2.08, 5 2.30, 6 2.48; with a margin of 2 the fused
    # first two keep their places, with 1 turn 6 beats both and turn 5 beats turn 1 only
    assert order(2.0) == [2, 1, 6, 5, 4, 3]
    assert order(1.0) == [6, 2, 5, 4, 3, 1]


def test_hold_lets_the_model_choose_the_first_k_and_keeps_the_fused_order_among_them():
    t = _trace(6)
    t.k = 3
    rerank.apply(t, {**_model(6, LENGTH), "hold": True})  # learned: 6, 5, 4 first; fused among them: 4, 5, 6
    assert [c.memory_id for c in sorted(t.alive(), key=lambda c: -c.score)] == [4, 5, 6, 3, 2, 1]
    assert t.params["learned_rerank"]["hold"] is True


def test_weighing_by_file_or_fold_gives_each_the_same_total():
    items = [{"file": "a", "fold": "x"}] * 6 + [{"file": "b", "fold": "y"}] * 2
    assert rerank_fit._weights(items, "question").tolist() == [1.0] * 8
    w = rerank_fit._weights(items, "file")
    assert w[:6].sum() == pytest.approx(w[6:].sum()) and w.mean() == pytest.approx(1.0)
    with pytest.raises(BadInput, match="weighing"):
        rerank_fit._weights(items, "nothing")


def test_the_grid_is_judged_on_held_out_folds_and_a_setting_that_helps_is_chosen(monkeypatch):
    monkeypatch.setattr(rerank_fit, "DEPTHS", (60,))
    monkeypatch.setattr(rerank_fit, "L2S", (1.0,))
    monkeypatch.setattr(rerank_fit, "WEIGHINGS", ("question", "fold"))
    rng = np.random.default_rng(3)
    items = [_item([25, 40], 60, rng, f"f{i % 3}") for i in range(30)]
    pools = rerank_fit.Pools(items)
    chosen, grid = rerank_fit._choose(pools, lambda what: None)
    assert len(grid) == 2 * len(rerank_fit.KEEPS)
    assert chosen["without"] == 0.0 and chosen["held_out"] > 0.9 and chosen["folds_losing"] == 0
    # the proxy of the fused order reads the pool as it stands; a model the held-out figure of its order
    assert rerank_fit._proxy(pools, 0, None) == 0.0
    assert rerank_fit._proxy(pools, 0, rerank_fit.train(pools, 60, 1.0)) == 1.0


def test_the_pool_is_the_first_by_score_ties_by_id_however_many_candidates():
    t = _trace(40)
    for c in t.alive():
        c.score = round(c.score, 1)  # ties across ids
    cands = list(reversed(t.alive()))
    for depth in (3, 7, 19, 40):
        assert [c.memory_id for c in rerank.pool(cands, depth)] == [
            c.memory_id for c in sorted(cands, key=lambda c: (-c.score, c.memory_id))[:depth]]
