"""memlens's retrieval metrics against gold evidence ids, and their aggregation into a run summary.

These are OUR definitions (the "memlens" scheme of engine/bench/scoring.py). Each benchmark's own
scoring, which differs from these in which turns form the corpus, what counts as gold and which
questions count, is the "official" scheme there; a run reports both.

Scores are computed from ids only, never judged by an LLM. A ranking is the list of ids a
recipe returned, best first. It may repeat an id (several memories citing one turn, several
turns of one session): every metric first keeps each id at its first rank, so a repeat can
neither score twice nor push other ids out of the top k.

Conventions, all per question, k >= 1:

- recall_any@k   1 if any gold id is in the top k (LongMemEval's recall_any).
- recall_all@k   1 if every gold id is in the top k (LongMemEval's recall_all).
- ndcg_any@k     LongMemEval's NDCG with binary relevance, as its src/retrieval/eval_utils.py
                 computes it: DCG = rel_1 + sum_{i>=2} rel_i / log2(i) over 1-based ranks i,
                 i.e. ranks 1 and 2 both weigh 1 (the original Jarvelin-Kekalainen discount,
                 not the rel_i / log2(i + 1) of most IR libraries); the ideal DCG puts
                 min(k, |gold|) relevant ids first.
- evidence_recall@k   the share of gold ids in the top k (LoCoMo's evidence recall).
- hit@k          1 if any gold id is in the top k. The same number as recall_any@k, kept under
                 its own name for harnesses that report hit rates; it is never called recall.
- precision@k    gold ids in the top k divided by k, even when fewer than k ids came back
                 (trec_eval's convention: returning less cannot raise precision).
- f1@k           harmonic mean of precision@k and evidence_recall@k (0 when both are 0).
- mrr            1 / rank of the first gold id in the whole ranking, 0 if none (no cut-off).

Session level: the ranking is the induced ranking of distinct sessions (each at the rank of its
best turn), so the top k are the first k distinct sessions, and any turn of a gold session puts
that session in. This is NOT LongMemEval's turn-to-session evaluation, which credits a gold
session only through its evidence turns (the others form a separate "noans" session), takes the
gold sessions from the evidence turns and scores NDCG on the widened turn list: that is the
official scheme in scoring.py, and the two give different numbers.

With empty gold every metric is 0.0: the question is unanswerable by retrieval, and summarise()
leaves it out of the means and reports how many there were.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

LEVELS = ("turn", "session")
# Recorded with every run; bump when a definition changes what a run scores. 1: a level's ids
# came from the top k memories only. 2: from the whole ranking (the first k distinct ids).
# 3: every run is scored under each scheme of engine/bench/scoring.py, the benchmark's official
# one the default (run metrics are official figures where the benchmark has them); ConvoMem gold
# is matched by exact text.
METRICS_VERSION = 3
AT_K_METRICS = ("recall_any", "recall_all", "ndcg_any", "evidence_recall", "hit", "precision", "f1")
METRICS = (*AT_K_METRICS, "mrr")


# --- rankings -------------------------------------------------------------------------------


def dedupe(ranked: Iterable[Hashable]) -> list[Any]:
    """The ranking with each id kept at its first (best) rank."""
    return list(dict.fromkeys(ranked))


def project(ranked: Iterable[Hashable], key: Callable[[Any], Hashable | None]) -> list[Any]:
    """Map a ranking onto coarser ids (turn -> session), keeping each coarse id at the rank of
    its best member; ids that map to None are dropped. The top k of the result are then the
    first k distinct sessions, as LongMemEval's turn-to-session evaluation widens k to find."""
    return dedupe(c for c in map(key, ranked) if c is not None)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def _top(ranked: Iterable[Hashable], k: int) -> list[Any]:
    _check_k(k)
    return dedupe(ranked)[:k]


def _found(ranked: Iterable[Hashable], gold: Collection[Hashable], k: int) -> int:
    gold = set(gold)
    return sum(1 for item in _top(ranked, k) if item in gold)


# --- per-question metrics -------------------------------------------------------------------


def recall_any(ranked: Iterable[Hashable], gold: Collection[Hashable], k: int) -> float:
    return 1.0 if _found(ranked, gold, k) > 0 else 0.0


def recall_all(ranked: Iterable[Hashable], gold: Collection[Hashable], k: int) -> float:
    gold = set(gold)
    if not gold:
        _check_k(k)
        return 0.0
    return 1.0 if _found(ranked, gold, k) == len(gold) else 0.0


def hit(ranked: Iterable[Hashable], gold: Collection[Hashable], k: int) -> float:
    return 1.0 if _found(ranked, gold, k) > 0 else 0.0


def evidence_recall(ranked: Iterable[Hashable], gold: Collection[Hashable], k: int) -> float:
    gold = set(gold)
    if not gold:
        _check_k(k)
        return 0.0
    return _found(ranked, gold, k) / len(gold)


def precision(ranked: Iterable[Hashable], gold: Collection[Hashable], k: int) -> float:
    return _found(ranked, gold, k) / k


def f1(ranked: Iterable[Hashable], gold: Collection[Hashable], k: int) -> float:
    ranked = list(ranked)
    p = precision(ranked, gold, k)
    r = evidence_recall(ranked, gold, k)
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _discount(rank: int) -> float:
    """LongMemEval's weight for a 1-based rank: 1 for ranks 1 and 2, then 1 / log2(rank)."""
    return 1.0 if rank <= 2 else 1.0 / math.log2(rank)


def ndcg_any(ranked: Iterable[Hashable], gold: Collection[Hashable], k: int) -> float:
    gold = set(gold)
    top = _top(ranked, k)
    ideal = sum(_discount(rank) for rank in range(1, min(k, len(gold)) + 1))
    if ideal == 0:
        return 0.0
    dcg = sum(_discount(rank) for rank, item in enumerate(top, start=1) if item in gold)
    return dcg / ideal


def mrr(ranked: Iterable[Hashable], gold: Collection[Hashable]) -> float:
    gold = set(gold)
    for rank, item in enumerate(dedupe(ranked), start=1):
        if item in gold:
            return 1.0 / rank
    return 0.0


_AT_K: dict[str, Callable[[Iterable[Hashable], Collection[Hashable], int], float]] = {
    "recall_any": recall_any,
    "recall_all": recall_all,
    "ndcg_any": ndcg_any,
    "evidence_recall": evidence_recall,
    "hit": hit,
    "precision": precision,
    "f1": f1,
}


def metric_key(level: str, metric: str, k: int | None = None) -> str:
    """"turn_recall_any@10"; mrr has no cut-off: "session_mrr"."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}")
    if metric == "mrr":
        return f"{level}_mrr"
    if k is None:
        raise ValueError(f"{metric} needs a cut-off k")
    _check_k(k)
    return f"{level}_{metric}@{k}"


def metric_keys(ks: Sequence[int], levels: Sequence[str]) -> list[str]:
    """Every key a summary holds, in report order: per level, each metric at each k, then mrr."""
    keys: list[str] = []
    for level in levels:
        keys.extend(metric_key(level, metric, k) for metric in AT_K_METRICS for k in ks)
        keys.append(metric_key(level, "mrr"))
    return keys


def score_ranking(
    ranked: Iterable[Hashable], gold: Collection[Hashable], ks: Sequence[int], level: str
) -> dict[str, float]:
    """Every metric of one level for one question, keyed as in a summary:
    {"<level>_<metric>@<k>": value, ..., "<level>_mrr": value}."""
    ranked = dedupe(ranked)
    gold = set(gold)
    scores = {
        metric_key(level, metric, k): fn(ranked, gold, k)
        for metric, fn in _AT_K.items()
        for k in ks
    }
    scores[metric_key(level, "mrr")] = mrr(ranked, gold)
    return {key: scores[key] for key in metric_keys(ks, [level])}


# --- aggregation ----------------------------------------------------------------------------


def mean(values: Iterable[float]) -> float | None:
    """The arithmetic mean, or None when there is nothing to average."""
    values = [float(v) for v in values]
    return math.fsum(values) / len(values) if values else None


def _percentile_name(q: float) -> str:
    return f"p{q:g}"


def percentiles(
    values: Iterable[float], qs: Sequence[float] = (50, 95, 99)
) -> dict[str, float | None]:
    """{"p50": ..., "p95": ..., "p99": ...} with linear interpolation between closest ranks
    (numpy's default method); every value is None when there are no values."""
    data = np.asarray([float(v) for v in values], dtype=float)
    for q in qs:
        if not 0 <= q <= 100:
            raise ValueError(f"percentile {q!r} is outside 0..100")
    if data.size == 0:
        return {_percentile_name(q): None for q in qs}
    results = np.percentile(data, list(qs))
    return {_percentile_name(q): float(v) for q, v in zip(qs, results)}


@dataclass(frozen=True)
class ScoredQuestion:
    """One question's input to summarise(): its metrics and what decides whether they count."""

    question_id: str
    metrics: Mapping[str, float]
    gold: Mapping[str, Collection[Hashable]]  # level -> gold ids at that level
    category: str | None = None
    excluded: bool = False  # e.g. LongMemEval abstention: kept in the run, out of the means


def _get(item: Any, name: str, default: Any = None) -> Any:
    if isinstance(item, Mapping):
        return item.get(name, default)
    return getattr(item, name, default)


def summarise(
    items: Iterable[ScoredQuestion | Mapping[str, Any]],
    ks: Sequence[int],
    levels: Sequence[str] = LEVELS,
) -> dict[str, Any]:
    """Mean of every per-question metric over the questions that count, overall and per category.

    Each item is a ScoredQuestion or a mapping with the same keys ("metrics", "gold",
    "category", "excluded"). A question counts at a level unless it is excluded or has no
    gold ids at that level; uncounted questions are reported, never scored as zero. A mean
    over no questions is None.

    Returns {"metrics": {key: mean}, "by_category": {category: {key: mean}}, "questions": n,
    "excluded": n, "empty_gold": {level: n}, "scored": {level: n},
    "category_questions": {category: n}}.
    """
    for k in ks:
        _check_k(k)
    for level in levels:
        if level not in LEVELS:
            raise ValueError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    keys = metric_keys(ks, levels)
    level_keys = {level: metric_keys(ks, [level]) for level in levels}
    overall: dict[str, list[float]] = {key: [] for key in keys}
    per_category: dict[str, dict[str, list[float]]] = {}
    category_questions: dict[str, int] = {}
    total = excluded = 0
    empty = {level: 0 for level in levels}
    scored = {level: 0 for level in levels}
    for item in items:
        total += 1
        category = _get(item, "category")
        category = None if category is None else str(category)
        if category is not None:
            category_questions[category] = category_questions.get(category, 0) + 1
            bucket = per_category.setdefault(category, {key: [] for key in keys})
        if _get(item, "excluded", False):
            excluded += 1
            continue
        metrics = _get(item, "metrics") or {}
        gold = _get(item, "gold") or {}
        for level in levels:
            if not gold.get(level):
                empty[level] += 1
                continue
            scored[level] += 1
            for key in level_keys[level]:
                if key not in metrics:
                    qid = _get(item, "question_id", "?")
                    raise ValueError(f"question {qid}: metrics lack {key}")
                value = float(metrics[key])
                overall[key].append(value)
                if category is not None:
                    bucket[key].append(value)
    return {
        "metrics": {key: mean(values) for key, values in overall.items()},
        "by_category": {
            category: {key: mean(values) for key, values in per_category[category].items()}
            for category in sorted(per_category)
        },
        "questions": total,
        "excluded": excluded,
        "empty_gold": empty,
        "scored": scored,
        "category_questions": dict(sorted(category_questions.items())),
    }
