"""Retrieval metrics: hand-computed cases, edge cases and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.bench.metrics import (
    AT_K_METRICS,
    METRICS,
    ScoredQuestion,
    dedupe,
    evidence_recall,
    f1,
    hit,
    mean,
    metric_key,
    metric_keys,
    mrr,
    ndcg_any,
    percentiles,
    precision,
    project,
    recall_all,
    recall_any,
    score_ranking,
    summarise,
)

AT_K = {
    "recall_any": recall_any,
    "recall_all": recall_all,
    "ndcg_any": ndcg_any,
    "evidence_recall": evidence_recall,
    "hit": hit,
    "precision": precision,
    "f1": f1,
}

# "a" repeats: deduplicated, c is at rank 3 (not 4) and d at rank 4.
RANKED = ["a", "b", "a", "c", "d"]
GOLD = {"c", "x"}  # x is never retrieved


def test_dedupe_and_project_keep_the_first_rank():
    assert dedupe(RANKED) == ["a", "b", "c", "d"]
    sessions = {"D1:1": "s1", "D2:4": "s2", "D1:7": "s1", "D3:1": None}
    assert project(["D2:4", "D1:7", "D3:1", "D1:1"], sessions.get) == ["s2", "s1"]


def test_hand_computed_with_duplicates_and_an_unreachable_gold_id():
    assert recall_any(RANKED, GOLD, 2) == 0.0
    assert recall_any(RANKED, GOLD, 3) == 1.0  # would need k=4 without deduplication
    assert hit(RANKED, GOLD, 3) == 1.0
    assert recall_all(RANKED, GOLD, 3) == 0.0
    assert recall_all(RANKED, GOLD, 100) == 0.0
    assert evidence_recall(RANKED, GOLD, 1) == 0.0
    assert evidence_recall(RANKED, GOLD, 3) == 0.5
    assert precision(RANKED, GOLD, 3) == pytest.approx(1 / 3)
    assert precision(RANKED, GOLD, 4) == pytest.approx(1 / 4)
    assert f1(RANKED, GOLD, 3) == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))  # 0.4
    assert f1(RANKED, GOLD, 3) == pytest.approx(0.4)
    assert mrr(RANKED, GOLD) == pytest.approx(1 / 3)
    # DCG@3 = 1/log2(3) (c at rank 3); ideal: min(3, |gold|)=2 relevant at ranks 1, 2 -> 1 + 1.
    assert ndcg_any(RANKED, GOLD, 3) == pytest.approx((1 / math.log2(3)) / 2)
    assert ndcg_any(RANKED, GOLD, 1) == 0.0


def test_recall_all_when_every_gold_id_is_found():
    ranked = ["c", "x", "a", "y", "b"]
    gold = {"a", "b", "c"}
    assert recall_all(ranked, gold, 4) == 0.0
    assert recall_all(ranked, gold, 5) == 1.0
    assert evidence_recall(ranked, gold, 4) == pytest.approx(2 / 3)
    assert precision(ranked, gold, 5) == pytest.approx(3 / 5)
    assert f1(ranked, gold, 5) == pytest.approx(2 * 0.6 * 1.0 / 1.6)
    assert mrr(ranked, gold) == 1.0


def test_ndcg_uses_longmemevals_discount():
    # LongMemEval's dcg: rel_1 + sum_{i>=2} rel_i / log2(i). Ranks 1 and 2 both weigh 1.
    assert ndcg_any(["a", "b"], {"b"}, 10) == 1.0
    assert ndcg_any(["a", "b", "c"], {"c"}, 10) == pytest.approx(1 / math.log2(3))
    ranked = ["c", "x", "a", "y", "b"]
    dcg = 1 + 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 + 1 / math.log2(3)
    assert ndcg_any(ranked, {"a", "b", "c"}, 5) == pytest.approx(dcg / idcg)
    # The ideal ordering is cut at k: two relevant ids, k=1 -> ideal 1.
    assert ndcg_any(["a", "b"], {"a", "b"}, 1) == 1.0
    assert ndcg_any(["z", "a"], {"a", "b"}, 1) == 0.0


def test_k_larger_than_the_ranking():
    assert recall_any(["a"], {"a"}, 10) == 1.0
    assert recall_all(["a"], {"a"}, 10) == 1.0
    assert evidence_recall(["a"], {"a"}, 10) == 1.0
    assert precision(["a"], {"a"}, 10) == pytest.approx(0.1)  # divided by k, not by 1
    assert f1(["a"], {"a"}, 10) == pytest.approx(2 * 0.1 / 1.1)
    assert ndcg_any(["a"], {"a"}, 10) == 1.0
    assert ndcg_any(["a"], {"a", "b"}, 10) == pytest.approx(0.5)


def test_duplicates_cannot_score_twice():
    ranked = ["a", "a", "a", "b"]
    assert precision(ranked, {"a"}, 2) == 0.5
    assert ndcg_any(ranked, {"a"}, 3) == 1.0
    assert recall_any(ranked, {"b"}, 2) == 1.0  # b is the second distinct id
    assert mrr(ranked, {"b"}) == 0.5


def test_empty_gold_and_empty_ranking_score_zero():
    for name, fn in AT_K.items():
        assert fn(["a", "b"], set(), 5) == 0.0, name
        assert fn([], {"a"}, 5) == 0.0, name
    assert mrr(["a"], set()) == 0.0
    assert mrr([], {"a"}) == 0.0
    assert mrr(["b", "c", "d", "e"], {"e"}) == 0.25  # uncut: no k


@pytest.mark.parametrize("k", [0, -1, True, 2.0, None])
def test_bad_k_is_refused(k):
    for name, fn in AT_K.items():
        with pytest.raises(ValueError):
            fn(["a"], {"a"}, k)
        with pytest.raises(ValueError):
            fn(["a"], set(), k)
        del name


def test_metric_keys():
    assert metric_key("turn", "recall_any", 10) == "turn_recall_any@10"
    assert metric_key("session", "mrr") == "session_mrr"
    assert metric_key("turn", "evidence_recall", 5) == "turn_evidence_recall@5"
    with pytest.raises(ValueError):
        metric_key("document", "hit", 1)
    with pytest.raises(ValueError):
        metric_key("turn", "recall", 1)
    with pytest.raises(ValueError):
        metric_key("turn", "hit")
    keys = metric_keys([1, 5], ["turn"])
    assert keys[:3] == ["turn_recall_any@1", "turn_recall_any@5", "turn_recall_all@1"]
    assert keys[-1] == "turn_mrr"
    assert len(keys) == len(AT_K_METRICS) * 2 + 1
    assert not any(key.startswith("turn_recall@") for key in keys)
    assert METRICS[-1] == "mrr"


def test_score_ranking():
    scores = score_ranking(RANKED, GOLD, [1, 3], "session")
    assert list(scores) == metric_keys([1, 3], ["session"])
    assert scores["session_recall_any@3"] == 1.0
    assert scores["session_hit@3"] == 1.0
    assert scores["session_evidence_recall@3"] == 0.5
    assert scores["session_precision@1"] == 0.0
    assert scores["session_f1@3"] == pytest.approx(0.4)
    assert scores["session_mrr"] == pytest.approx(1 / 3)


def test_mean_and_percentiles():
    assert mean([]) is None
    assert mean([1, 2]) == 1.5
    assert mean(iter([0.1] * 10)) == pytest.approx(0.1)
    assert percentiles([1, 2, 3, 4]) == pytest.approx({"p50": 2.5, "p95": 3.85, "p99": 3.97})
    assert percentiles([]) == {"p50": None, "p95": None, "p99": None}
    assert percentiles([7.0]) == {"p50": 7.0, "p95": 7.0, "p99": 7.0}
    values = [12.0, 3.5, 99.0, 41.0, 7.25, 8.0, 150.0]
    got = percentiles(values, (0, 25, 99.9, 100))
    assert list(got) == ["p0", "p25", "p99.9", "p100"]
    assert list(got.values()) == pytest.approx(list(np.percentile(values, [0, 25, 99.9, 100])))
    with pytest.raises(ValueError):
        percentiles([1.0], (101,))


def _question(qid, ranked, gold, category=None, excluded=False):
    metrics = {}
    for level in ("turn", "session"):
        metrics.update(score_ranking(ranked.get(level, []), gold.get(level, []), [1, 5], level))
    return ScoredQuestion(qid, metrics, gold, category, excluded)


def test_summarise_means_exclusions_and_categories():
    def both(turn, session):
        return {"turn": turn, "session": session}

    items = [
        _question("q1", both(["t1", "t2"], ["s1"]), both(["t2"], ["s1"]), "x"),
        _question("q2", both(["t9"], ["s9"]), both(["t9"], ["s9"]), "y", excluded=True),
        _question("q3", both(["t3"], ["s3", "s2"]), both([], ["s2"]), "x"),
        # A plain mapping works too; no category -> counted overall only.
        {
            "question_id": "q4",
            "metrics": _question("q4", both(["t4"], ["s4"]), both(["t5"], ["s4"])).metrics,
            "gold": both(["t5"], ["s4"]),
        },
    ]
    summary = summarise(items, [1, 5], ["turn", "session"])
    assert summary["questions"] == 4
    assert summary["excluded"] == 1
    assert summary["empty_gold"] == {"turn": 1, "session": 0}
    assert summary["scored"] == {"turn": 2, "session": 3}
    assert summary["category_questions"] == {"x": 2, "y": 1}
    m = summary["metrics"]
    assert list(m) == metric_keys([1, 5], ["turn", "session"])
    # turn: q1 (t2 at rank 2) and q4 (miss); q3 has no turn gold, q2 is excluded.
    assert m["turn_recall_any@1"] == 0.0
    assert m["turn_recall_any@5"] == 0.5
    assert m["turn_mrr"] == pytest.approx((0.5 + 0) / 2)
    assert m["turn_precision@5"] == pytest.approx((0.2 + 0) / 2)
    # session: q1 hit at 1, q3 hit at 2, q4 hit at 1.
    assert m["session_recall_any@1"] == pytest.approx(2 / 3)
    assert m["session_hit@5"] == 1.0
    assert m["session_mrr"] == pytest.approx((1 + 0.5 + 1) / 3)
    x = summary["by_category"]["x"]
    assert x["turn_recall_any@5"] == 1.0  # q1 only
    assert x["session_mrr"] == pytest.approx(0.75)
    # Every question of category y is excluded: the means are None, never a made-up 0.
    assert set(summary["by_category"]["y"].values()) == {None}
    assert list(summary["by_category"]) == ["x", "y"]


def test_summarise_edge_cases():
    empty = summarise([], [10], ["session"])
    assert empty["metrics"]["session_recall_any@10"] is None
    assert empty["questions"] == 0 and empty["by_category"] == {}
    with pytest.raises(ValueError, match="q1: metrics lack turn_recall_any@3"):
        summarise([ScoredQuestion("q1", {}, {"turn": ["a"]})], [3], ["turn"])
    with pytest.raises(ValueError):
        summarise([], [0], ["turn"])
    with pytest.raises(ValueError):
        summarise([], [1], ["paragraph"])


# --- properties -----------------------------------------------------------------------------

IDS = st.sampled_from("abcdefgh")
rankings = st.lists(IDS, max_size=16)
golds = st.sets(st.sampled_from("abcdefghij"), min_size=1, max_size=6)
ks = st.integers(min_value=1, max_value=20)


def _longmemeval_ndcg(ranked: list[str], gold: set[str], k: int) -> float:
    """An independent transcription of LongMemEval's eval_utils.ndcg over a corpus that holds
    every gold id: relevance per corpus entry, DCG with numpy's log2(arange(2, n + 1))."""

    def dcg(relevances: list[int]) -> float:
        rel = np.asarray(relevances, dtype=float)[:k]
        if rel.size == 0:
            return 0.0
        return float(rel[0] + np.sum(rel[1:] / np.log2(np.arange(2, rel.size + 1))))

    corpus = ranked + sorted(gold - set(ranked))
    relevances = [1 if doc in gold else 0 for doc in corpus]
    ideal = dcg(sorted(relevances, reverse=True))
    actual = dcg([relevances[i] for i in range(len(ranked))][:k])
    return 0.0 if ideal == 0 else actual / ideal


@settings(max_examples=300, deadline=None)
@given(rankings, golds, ks)
def test_metrics_are_bounded_and_ordered(ranked, gold, k):
    values = {name: fn(ranked, gold, k) for name, fn in AT_K.items()}
    values["mrr"] = mrr(ranked, gold)
    for name, value in values.items():
        assert 0.0 <= value <= 1.0 + 1e-12, name
    assert values["recall_all"] <= values["recall_any"]
    assert values["recall_all"] <= values["evidence_recall"] <= values["recall_any"]
    assert values["hit"] == values["recall_any"]
    assert values["precision"] <= values["recall_any"]
    assert (values["ndcg_any"] > 0) == (values["recall_any"] > 0)
    assert values["mrr"] >= values["recall_any"] / k
    assert values["ndcg_any"] == pytest.approx(_longmemeval_ndcg(dedupe(ranked), gold, k))


@settings(max_examples=300, deadline=None)
@given(rankings, golds, ks)
def test_recall_metrics_do_not_decrease_with_k(ranked, gold, k):
    for fn in (recall_any, recall_all, evidence_recall, hit):
        assert fn(ranked, gold, k) <= fn(ranked, gold, k + 1)


@settings(max_examples=200, deadline=None)
@given(rankings, golds, ks)
def test_duplicates_never_change_a_score(ranked, gold, k):
    unique = dedupe(ranked)
    for name, fn in AT_K.items():
        assert fn(ranked, gold, k) == fn(unique, gold, k), name
        assert fn(ranked + ranked, gold, k) == fn(unique, gold, k), name
    assert mrr(ranked + ranked, gold) == mrr(unique, gold)
