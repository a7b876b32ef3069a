"""Scoring schemes: each benchmark as its authors' code scores retrieval, and memlens's variant.

A scheme turns one question's ranking into per-question metrics, and a run's questions into a
summary. Every run is scored under every scheme its dataset has; the first is the default (the
figures `bench --json`, the report and the pane show first). Schemes are looked up by dataset
name, so a new dataset only needs an entry in SCHEMES (one without gets the memlens scheme).

"official" schemes follow the benchmark's own scripts rule for rule, written from reading them:

- LongMemEval (xiaowu0162/LongMemEval, src/retrieval/run_retrieval.py with eval_utils.py, as
  src/evaluation/print_retrieval_metrics.py reports them). The corpus is the user turns only, one
  id per turn, "<session>_<1-based turn index>"; in a session whose id holds "answer", a turn
  without has_answer is renamed "noans_..."; gold is every corpus id still holding "answer". Turn
  level: recall_any / recall_all / NDCG over the top k user turns (recall_all of no gold is 1, as
  Python's all() of nothing). Session level (evaluate_retrieval_turn2session): a turn's session is
  its id less the last "_" part, so a gold session's non-evidence turns make a "noans_" session
  of their own; k widens until the turns hold k distinct sessions; NDCG is computed on the
  widened turn list, where only evidence turns are relevant. Means leave out question ids
  holding "_abs", nothing else (a question without user-side evidence counts, with recall_any 0
  and recall_all 1).
- LoCoMo (snap-research/LoCoMo, task_eval/evaluation.py eval_question_answering with
  evaluation_stats.py analyze_aggr_acc, rag=True; evaluate_qa.py rounds each recall to three
  decimals). A question's recall is the share of its evidence entries, exactly as written
  (malformed ones never match), found among the top k retrieved dia_ids; the mean divides the sum
  over questions with evidence by every question, adversarial ones included, so a question
  without evidence adds 0. Session level reads the summary mode: an entry counts when its session
  number ("D3:7" -> "3") is among the top k distinct sessions.
- ConvoMem (SalesforceAIResearch/ConvoMem) scores answers with an LLM judge under its own
  prompts and has no retrieval metric (only a debug count of retrieved evidence conversations),
  so it has no official scheme here: its figures are memlens's, and say so.

A ranking is a list of turn (message) ids, best first; repeats keep their first rank.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .metrics import LEVELS, dedupe, mean, metric_key, project, score_ranking, summarise

Question = Mapping[str, Any]  # a container question spec (runner.containers_for) or a stored item
Scores = dict[str, float]


@dataclass(frozen=True)
class Scheme:
    name: str  # "official" | "memlens"
    label: str  # one line for a report header: whose rules, from which scripts
    definitions: Mapping[str, str]  # "<level>_<metric>" -> one line
    score: Callable[[Question, Sequence[str], Sequence[int]], Scores]
    summarise: Callable[[Sequence[Question], Sequence[int]], dict[str, Any]]
    official: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> dict[str, Any]:
        """What a run records about the scheme (config["scoring"]), so a stored figure keeps its definition."""
        return {"label": self.label, "official": self.official, "definitions": dict(self.definitions),
                "notes": list(self.notes)}


def _category(q: Question) -> str | None:
    value = q.get("category")
    return None if value is None else str(value)


def _official_gold(q: Question) -> Mapping[str, Any]:
    return (q.get("gold") or {}).get("official") or {}


def _means(items: Sequence[tuple[str | None, Scores]], keys: Sequence[str]) -> dict[str, Any]:
    """Plain means of per-question values, overall and per category (None where no question counts)."""
    cats = sorted({c for c, _ in items if c is not None})
    return {
        "metrics": {key: mean(s[key] for _, s in items if key in s) for key in keys},
        "by_category": {c: {key: mean(s[key] for cc, s in items if cc == c and key in s) for key in keys}
                        for c in cats},
    }


# --- memlens ------------------------------------------------------------------------------------


def _memlens_session(message_id: str) -> str | None:
    """"session:turn" -> "session"; LoCoMo "D3:5" -> "D3" (its gold sessions are "D<n>")."""
    return message_id.rsplit(":", 1)[0] if ":" in message_id else None


def _memlens_score(q: Question, ranking: Sequence[str], ks: Sequence[int]) -> Scores:
    gold = q.get("gold") or {}
    ranking = dedupe(ranking)
    scores: Scores = {}
    for level, ranked in (("turn", ranking), ("session", project(ranking, _memlens_session))):
        if gold.get(level):
            scores.update(score_ranking(ranked, gold[level], ks, level))
    return scores


def _memlens_summarise(items: Sequence[Question], ks: Sequence[int]) -> dict[str, Any]:
    s = summarise([{"question_id": it.get("question_id"), "metrics": it.get("metrics_memlens", {}),
                    "gold": it.get("gold") or {}, "category": it.get("category"),
                    "excluded": bool(it.get("excluded"))} for it in items], ks)
    return {"metrics": s["metrics"], "by_category": s["by_category"],
            "counts": {"questions": s["questions"], "left_out": s["excluded"], "empty_gold": s["empty_gold"],
                       "scored": s["scored"], "by_category": s["category_questions"]}}


_MEMLENS_DEFS = {
    "turn_recall_any": "ours: 1 if any gold turn (evidence of either speaker) is among the first k distinct turns",
    "turn_recall_all": "ours: 1 if every gold turn is among the first k distinct turns",
    "turn_ndcg_any": "ours: NDCG@k over distinct turns, LongMemEval's discount (ranks 1 and 2 weigh 1)",
    "turn_evidence_recall": "ours: share of the (repaired) gold turns among the first k distinct turns",
    "turn_hit": "ours: the same number as recall_any, under the name hit-rate harnesses use",
    "turn_precision": "ours: gold turns among the first k distinct turns, divided by k",
    "turn_f1": "ours: harmonic mean of precision@k and evidence recall@k",
    "turn_mrr": "ours: 1 / rank of the first gold turn, 0 if none",
    "session_recall_any": "ours: 1 if any gold session has a turn among the first k distinct sessions "
                          "(any turn of a gold session counts)",
    "session_recall_all": "ours: 1 if every gold session has a turn among the first k distinct sessions",
    "session_ndcg_any": "ours: NDCG@k on the ranking of distinct sessions",
    "session_evidence_recall": "ours: share of gold sessions among the first k distinct sessions",
    "session_hit": "ours: the same number as session recall_any",
    "session_precision": "ours: gold sessions among the first k distinct sessions, divided by k",
    "session_f1": "ours: harmonic mean of session precision@k and evidence recall@k",
    "session_mrr": "ours: 1 / rank of the first gold session, 0 if none",
}
_MEMLENS_NOTES = (
    "Questions left out of the means: LoCoMo adversarial (category 5), LongMemEval abstention (_abs ids), "
    "and at each level any question without gold there; they are counted, never scored as 0.",
    "Gold: LoCoMo evidence repaired (split lists, zero padding, extra colons; ids that name no turn dropped); "
    "LongMemEval turns with has_answer of either role, sessions from answer_session_ids; ConvoMem messages "
    "whose text is exactly an evidence text.",
)


def memlens_scheme(note: str | None = None) -> Scheme:
    return Scheme(
        name="memlens", label="memlens (ours): " + (note or "gold ids, first k distinct ids of the whole ranking"),
        definitions=_MEMLENS_DEFS, score=_memlens_score, summarise=_memlens_summarise,
        notes=_MEMLENS_NOTES)


# --- LongMemEval official -------------------------------------------------------------------------
#
# The question spec carries "corpus": [[memlens turn id, official id], ...], the user turns of the
# haystack in file order with their run_retrieval.py ids (not stored), and gold["official"] =
# {"turn": [the official gold ids]} (stored with the item).

LME_LEVELS = ("turn", "session")
LME_METRICS = ("recall_any", "recall_all", "ndcg_any")


def lme_official_id(session_id: str, index: int, has_answer: bool | None) -> str:
    """run_retrieval.py's corpus id of a user turn at 0-based `index` of its session."""
    turn_id = f"{session_id}_{index + 1}"
    if "answer" in session_id and not has_answer:
        return turn_id.replace("answer", "noans")
    return turn_id


def _lme_dcg(relevances: Sequence[int], k: int) -> float:
    """eval_utils.dcg: the first relevance as is, then rel_i / log2(i) for 1-based ranks i >= 2."""
    rel = list(relevances)[:k]
    if not rel:
        return 0.0
    return float(rel[0]) + math.fsum(r / math.log2(i) for i, r in enumerate(rel[1:], start=2))


def _lme_evaluate(ranked: Sequence[int], gold: set[str], ids: Sequence[str], k: int) -> tuple[float, float, float]:
    """eval_utils.evaluate_retrieval: (recall_any, recall_all, ndcg) of corpus indices `ranked`."""
    top = {ids[i] for i in ranked[:k]}
    recall_any = 1.0 if any(g in top for g in gold) else 0.0
    recall_all = 1.0 if all(g in top for g in gold) else 0.0
    relevance = [1 if doc in gold else 0 for doc in ids]
    ideal = _lme_dcg(sorted(relevance, reverse=True), k)
    ndcg = 0.0 if ideal == 0 else _lme_dcg([relevance[i] for i in ranked[:k]], k) / ideal
    return recall_any, recall_all, ndcg


def _lme_session(official_id: str) -> str:
    return "_".join(official_id.split("_")[:-1])


def _lme_turn_to_session(ranked: Sequence[int], gold: set[str], ids: Sequence[str],
                         k: int) -> tuple[float, float, float]:
    """eval_utils.evaluate_retrieval_turn2session: widen k until the top turns hold k distinct sessions."""
    sessions = [_lme_session(i) for i in ids]
    gold_sessions = {_lme_session(g) for g in gold}
    effective = k
    while effective <= len(sessions) and len({sessions[i] for i in ranked[:effective]}) < k:
        effective += 1
    return _lme_evaluate(ranked, gold_sessions, sessions, effective)


def _lme_score(q: Question, ranking: Sequence[str], ks: Sequence[int]) -> Scores:
    corpus = q.get("corpus") or []
    position = {ours: i for i, (ours, _) in enumerate(corpus)}
    ids = [official for _, official in corpus]
    ranked = [position[t] for t in dedupe(ranking) if t in position]  # assistant turns are not in the corpus
    gold = {i for i in ids if "answer" in i}
    scores: Scores = {}
    for k in ks:
        for level, values in (("turn", _lme_evaluate(ranked, gold, ids, k)),
                              ("session", _lme_turn_to_session(ranked, gold, ids, k))):
            for metric, value in zip(LME_METRICS, values):
                scores[metric_key(level, metric, k)] = value
    return scores


def _lme_keys(ks: Sequence[int]) -> list[str]:
    return [metric_key(level, metric, k) for level in LME_LEVELS for metric in LME_METRICS for k in ks]


def _lme_summarise(items: Sequence[Question], ks: Sequence[int]) -> dict[str, Any]:
    counted = [it for it in items if "_abs" not in str(it.get("question_id"))]
    out = _means([(_category(it), it.get("metrics_official", {})) for it in counted], _lme_keys(ks))
    no_gold = sum(1 for it in counted if not _official_gold(it).get("turn"))
    cats: dict[str, int] = {}
    for it in counted:
        cats[str(_category(it))] = cats.get(str(_category(it)), 0) + 1
    out["counts"] = {"questions": len(items), "left_out": len(items) - len(counted), "counted": len(counted),
                     "without_user_evidence": no_gold, "by_category": dict(sorted(cats.items()))}
    return out


LME_OFFICIAL = Scheme(
    name="official",
    label="official: LongMemEval src/retrieval/run_retrieval.py + eval_utils.py (print_retrieval_metrics.py)",
    definitions={
        "turn_recall_any": "official: 1 if an evidence user turn is in the top k user turns (the corpus is user "
                           "turns); 0 for a question with no user-side evidence",
        "turn_recall_all": "official: 1 if every evidence user turn is in the top k user turns; 1 for a question "
                           "with no user-side evidence (all of nothing)",
        "turn_ndcg_any": "official: eval_utils NDCG@k over user turns (ranks 1 and 2 weigh 1, then 1/log2 rank)",
        "session_recall_any": "official turn-to-session: 1 if a gold session is among the top k distinct sessions; "
                              "a gold session's non-evidence turns form a separate noans session",
        "session_recall_all": "official turn-to-session: 1 if every session with an evidence user turn is among "
                              "the top k distinct sessions (noans split)",
        "session_ndcg_any": "official turn-to-session: NDCG on the widened turn list that reaches k sessions; "
                            "only evidence turns are relevant",
    },
    score=_lme_score, summarise=_lme_summarise, official=True,
    notes=("Means leave out question ids with _abs only; per-category figures are means of the official "
           "per-question values by question_type (the official scripts print no breakdown).",))


# --- LoCoMo official ------------------------------------------------------------------------------
#
# gold["official"] = {"evidence": [the entries exactly as written]}.


def _locomo_session_number(entry: str) -> str:
    """evaluation.py's session of an evidence entry or a dia_id: "D3:7" -> "3"."""
    return entry.split(":")[0][1:]


def _locomo_recall(found: Callable[[str], bool], evidence: Sequence[str]) -> float:
    return round(sum(1 for ev in evidence if found(ev)) / len(evidence), 3) if evidence else 1.0


def _locomo_score(q: Question, ranking: Sequence[str], ks: Sequence[int]) -> Scores:
    evidence = [str(e) for e in _official_gold(q).get("evidence") or []]
    turns = dedupe(ranking)
    sessions = dedupe(_locomo_session_number(t) for t in turns)
    scores: Scores = {}
    for k in ks:
        top, top_sessions = set(turns[:k]), set(sessions[:k])
        scores[metric_key("turn", "evidence_recall", k)] = _locomo_recall(top.__contains__, evidence)

        def in_top_sessions(ev: str, top_sessions: set[str] = top_sessions) -> bool:
            return _locomo_session_number(ev) in top_sessions

        scores[metric_key("session", "evidence_recall", k)] = _locomo_recall(in_top_sessions, evidence)
    return scores


def _locomo_summarise(items: Sequence[Question], ks: Sequence[int]) -> dict[str, Any]:
    keys = [metric_key(level, "evidence_recall", k) for level in LEVELS for k in ks]
    totals: dict[str, int] = {}
    sums: dict[str, dict[str, float]] = {}
    for it in items:
        cat = str(_category(it))
        totals[cat] = totals.get(cat, 0) + 1
        bucket = sums.setdefault(cat, {key: 0.0 for key in keys})
        if _official_gold(it).get("evidence"):
            for key in keys:
                bucket[key] += float(it.get("metrics_official", {}).get(key, 0.0))
    n = sum(totals.values())
    return {
        "metrics": {key: (math.fsum(b[key] for b in sums.values()) / n if n else None) for key in keys},
        "by_category": {c: {key: sums[c][key] / totals[c] for key in keys} for c in sorted(totals)},
        "counts": {"questions": len(items), "counted": n, "left_out": 0,
                   "without_evidence": sum(1 for it in items if not _official_gold(it).get("evidence")),
                   "by_category": dict(sorted(totals.items()))},
    }


LOCOMO_OFFICIAL = Scheme(
    name="official",
    label="official: LoCoMo task_eval/evaluation.py + evaluation_stats.py (RAG recall)",
    definitions={
        "turn_evidence_recall": "official: share of the evidence entries as written found among the top k "
                                "dia_ids, rounded to 3 places; the mean divides by every question (adversarial "
                                "included), an empty-evidence question adds 0",
        "session_evidence_recall": "official (summary mode): share of evidence entries whose session is among the "
                                   "top k distinct sessions, rounded to 3 places; aggregated as turn recall",
    },
    score=_locomo_score, summarise=_locomo_summarise, official=True,
    notes=("Per-category figures are the official recall_by_category (sum over the category's questions "
           "with evidence, divided by all of its questions).",))


# --- registry -------------------------------------------------------------------------------------

MEMLENS = memlens_scheme()
CONVOMEM_NOTE = "ConvoMem's own evaluation has no retrieval metric (an LLM judges its answers)"
# dataset -> its schemes, the default first
SCHEMES: dict[str, tuple[Scheme, ...]] = {
    "locomo": (LOCOMO_OFFICIAL, MEMLENS),
    "longmemeval": (LME_OFFICIAL, MEMLENS),
    "convomem": (memlens_scheme(CONVOMEM_NOTE),),
}


def schemes_for(dataset: str) -> tuple[Scheme, ...]:
    return SCHEMES.get(dataset) or (MEMLENS,)


def score_question(dataset: str, q: Question, ranking: Sequence[str], ks: Sequence[int]) -> dict[str, Scores]:
    """{scheme name: per-question metrics} under every scheme of the dataset."""
    return {s.name: s.score(q, ranking, ks) for s in schemes_for(dataset)}


def summarise_run(dataset: str, items: Sequence[Question], ks: Sequence[int]) -> dict[str, dict[str, Any]]:
    """{scheme name: {"metrics", "by_category", "counts"}} over the done items of a run. Each item
    is a stored item or spec: "question_id", "category", "gold", "excluded", "scores" {scheme: metrics}."""
    out = {}
    for scheme in schemes_for(dataset):
        view = [{**it, f"metrics_{scheme.name}": (it.get("scores") or {}).get(scheme.name, {})} for it in items]
        out[scheme.name] = scheme.summarise(view, ks)
    return out


def describe(dataset: str) -> dict[str, Any]:
    """config["scoring"]: the default scheme's name and every scheme's label and definitions."""
    schemes = schemes_for(dataset)
    return {"default": schemes[0].name, "schemes": {s.name: s.describe() for s in schemes}}


def definition(scoring: Mapping[str, Any] | None, scheme: str, key: str) -> str | None:
    """The one-line definition of a metric key ("turn_recall_any@5") under a recorded scheme."""
    defs = (((scoring or {}).get("schemes") or {}).get(scheme) or {}).get("definitions") or {}
    base = key.split("@", 1)[0]
    return defs.get(base)


__all__ = ["Scheme", "SCHEMES", "schemes_for", "score_question", "summarise_run", "describe", "definition",
           "lme_official_id", "memlens_scheme", "MEMLENS", "LME_OFFICIAL", "LOCOMO_OFFICIAL"]
