"""Metrics of current truth: does the value that holds now come first, and does history survive?

Per question of the memlens updates benchmark (engine/bench/datasets.py, UpdatesDataset), from
the ranking of turn ids a recall returned (best first, each id at its first rank):

- current_first@1   current questions: of the turns that state a value of the asked claim (the
                    gold, which state the value holding now, and the stale, which state an old
                    value, a plan, a visit or someone else's value), the first ranked is gold.
                    This is the promise: an outdated statement never answers a "now" question.
- current_top@1     stricter: the first turn of the whole ranking is gold (small talk too can
                    come first, misleading no one but costing a place).
- keep_first@1, keep_top@1   the same for keep questions: a claim that still holds in a turn
                    whose other claim was replaced ("I'm Dana and I live in Berlin"); its stale
                    turn is the one that replaced the other claim.
- history@3         history questions (an earlier value, or the value at an as-of time): a turn
                    stating it is among the first three.
- false_supersession  current and keep questions: 1 when the recall treated a gold turn (one
                    whose claim still holds) as replaced by a turn outside the gold, 0 otherwise.
                    The recall says which turns it treated as replaced, and by what, in its
                    trace (Trace.params["outdated"]); facts superseded by a non-change reach the
                    ranking through it too.

A current or keep question that misses first@1 is also counted under the cause of its miss
(MISS_CAUSES, "miss:<cause>" 1.0 in its metrics; `bench updates` reports the counts by part): an
aggregate a held-out part may be read by, that says which mechanism fails without showing a
question.

For LongMemEval's knowledge-update questions, whose gold lists the evidence of both the old and
the new value (so recall alone cannot tell them apart):

- ku_latest_first   the best-ranked turn of the latest evidence session ranks above every turn
                    of the earlier evidence sessions. Questions that ask for the earlier value
                    ("What was my previous goal ... before I updated it?", a fixed pattern below,
                    independent of the engine) are scored instead as
- ku_previous_first the best-ranked turn of the earliest evidence session ranks above the others.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .metrics import dedupe, mean

FIRST_K = 1
HISTORY_K = 3
UPDATE_METRICS = ("current_first@1", "current_top@1", "keep_first@1", "keep_top@1", "history@3",
                  "false_supersession")
KU_METRICS = ("ku_latest_first", "ku_previous_first")
# A question that asks for the value before the update (the dataset's wording, not the engine's).
ASKS_PREVIOUS = re.compile(r"\b(previous|previously|before|used to|originally|at first|initially)\b", re.I)


RULE_PREFIX = "false_supersession:"
MISS_PREFIX = "miss:"
MOVED_K = 10  # the benchmark's largest k, the depth its recalls rank (and their rules reorder)
# Why the first turn that states a value is not gold, in the order tested:
MISS_CAUSES = {
    "unranked": "no gold turn in the ranking at all: candidates never found it",
    "beyond_k": "the best gold turn ranks below k, where no current-truth rule moves a turn",
    "gold_replaced": "a rule marked a gold turn as replaced by a turn outside the gold (a false supersession)",
    "stale_marked": "the stale turn that leads is marked as replaced, yet still leads",
    "unordered": "gold within k, a stale turn above it, and no rule marked either",
    # ... split by which was said first, where the turn ids tell it (the updates file's "s<session>:<turn>"):
    "unordered_later_gold": "unordered, the gold said after the stale turn above it: a change not lifted",
    "unordered_earlier_gold": "unordered, the gold said before the stale turn above it: a later non-change not put below",
}
_SESSION = re.compile(r"^s(\d+):")


def first_in(turns: Sequence[str], gold: Iterable[str], k: int) -> float:
    top = dedupe(turns)[:k]
    gold = set(gold)
    return 1.0 if any(t in gold for t in top) else 0.0


def false_rules(outdated: Iterable[Sequence[Any]], gold: Iterable[str]) -> list[str]:
    """The rules (trace.params["outdated"][...]["rule"], "" when a mark names none) that treated a
    gold turn as replaced by a turn outside the gold, each once, in the order met. outdated: (turn
    ids of a memory the recall treated as replaced, turn ids of what replaced it[, the rule that
    did]), one per mark; the question's false_supersession is 1 when this is not empty."""
    gold = set(gold)
    out: list[str] = []
    for mark in outdated:
        turns, by = mark[0], mark[1]
        rule = str(mark[2]) if len(mark) > 2 and mark[2] else ""
        if gold.intersection(turns) and not gold.intersection(by) and rule not in out:
            out.append(rule)
    return out


def score_update_question(qtype: str, turns: Sequence[str], gold: Sequence[str], stale: Sequence[str],
                          outdated: Iterable[Sequence[Any]], k: int = MOVED_K) -> dict[str, float]:
    """The question's metrics; a false supersession also as "false_supersession:<rule>" 1.0 for
    each rule that made one (RULE_PREFIX; what `bench updates` counts by rule), and a miss of
    first@1 as "miss:<cause>" 1.0 (MISS_PREFIX, miss_cause; `k`: the depth the recall's rules
    reorder, its k)."""
    if qtype == "history":
        return {"history@3": first_in(turns, gold, HISTORY_K)}
    stated = set(gold) | set(stale)
    marks = list(outdated)
    rules = false_rules(marks, gold)
    first = first_in([t for t in turns if t in stated], gold, FIRST_K)
    out = {f"{qtype}_first@1": first, f"{qtype}_top@1": first_in(turns, gold, FIRST_K),
           "false_supersession": 1.0 if rules else 0.0,
           **{f"{RULE_PREFIX}{rule or 'unnamed'}": 1.0 for rule in rules}}
    if not first:
        out[f"{MISS_PREFIX}{miss_cause(turns, gold, stale, marks, k, bool(rules))}"] = 1.0
    return out


def miss_cause(turns: Sequence[str], gold: Sequence[str], stale: Sequence[str], outdated: Sequence[Sequence[Any]],
               k: int, falsely_replaced: bool) -> str:
    """The MISS_CAUSES key of a current or keep question whose first value-stating turn is not gold."""
    ranked = dedupe(turns)
    gold_set, stale_set = set(gold), set(stale)
    at = next((i for i, t in enumerate(ranked) if t in gold_set), None)
    if at is None:
        return "unranked"
    if at >= k:
        return "beyond_k"
    if falsely_replaced:
        return "gold_replaced"
    lead = next((t for t in ranked if t in stale_set), None)
    if lead is not None and any(lead in mark[0] for mark in outdated):
        return "stale_marked"
    said = [_SESSION.match(t) for t in (ranked[at], lead or "")]
    if said[0] and said[1] and said[0].group(1) != said[1].group(1):
        return "unordered_later_gold" if int(said[0].group(1)) > int(said[1].group(1)) else "unordered_earlier_gold"
    return "unordered"


def count_flags(items: Iterable[Mapping[str, Any]], prefix: str,
                group_of: Callable[[Mapping[str, Any]], Iterable[str]]) -> dict[str, dict[str, int]]:
    """{group: {name: questions whose metrics carry "<prefix><name>"}}, "all" among the groups."""
    out: dict[str, dict[str, int]] = {}
    for it in items:
        for key in it.get("metrics") or {}:
            if key.startswith(prefix):
                name = key[len(prefix):]
                for g in ("all", *group_of(it)):
                    out.setdefault(g, {})[name] = out.get(g, {}).get(name, 0) + 1
    return {g: dict(sorted(names.items())) for g, names in sorted(out.items())}


def false_by_rule(items: Iterable[Mapping[str, Any]], group_of: Callable[[Mapping[str, Any]], Iterable[str]]
                  ) -> dict[str, dict[str, int]]:
    """{group: {rule: questions with a false supersession by it}}, "all" among the groups."""
    return count_flags(items, RULE_PREFIX, group_of)


def misses_by_cause(items: Iterable[Mapping[str, Any]], group_of: Callable[[Mapping[str, Any]], Iterable[str]]
                    ) -> dict[str, dict[str, int]]:
    """{group: {cause: current and keep questions that missed first@1 for it}} (MISS_CAUSES)."""
    return count_flags(items, MISS_PREFIX, group_of)


def evidence_order(question: str, turns: Sequence[str], evidence: Sequence[str],
                   session_dates: Mapping[str, str | None], session_of: Callable[[str], str]) -> dict[str, float]:
    """{"ku_latest_first" or "ku_previous_first": 0/1}, or {} when the evidence is not in two
    sessions with known, different dates."""
    sessions = {session_of(t) for t in evidence}
    dated = sorted((session_dates.get(s), s) for s in sessions if session_dates.get(s))
    if len(dated) < 2 or dated[0][0] == dated[-1][0]:
        return {}
    previous = bool(ASKS_PREVIOUS.search(question))
    wanted = dated[0][1] if previous else dated[-1][1]
    wanted_date = session_dates[wanted]
    others = {s for d, s in dated if d != wanted_date}
    gold_turns = set(evidence)
    for t in dedupe(turns):
        if t not in gold_turns:
            continue
        s = session_of(t)
        if s == wanted:
            value = 1.0
            break
        if s in others:
            value = 0.0
            break
    else:
        value = 0.0
    return {"ku_previous_first" if previous else "ku_latest_first": value}


def summarise_extra(items: Iterable[Mapping[str, Any]], keys: Sequence[str],
                    group_of: Callable[[Mapping[str, Any]], Iterable[str]]) -> dict[str, Any]:
    """Means of `keys` over the items that carry them: {"metrics": {key: mean}, "by_category":
    {group: {key: mean}}, "counts": {key: n}}. `group_of(item)` -> the groups an item counts in."""
    overall: dict[str, list[float]] = {k: [] for k in keys}
    groups: dict[str, dict[str, list[float]]] = {}
    for it in items:
        metrics = it.get("metrics") or {}
        for key in keys:
            if key not in metrics:
                continue
            value = float(metrics[key])
            overall[key].append(value)
            for g in group_of(it):
                groups.setdefault(g, {}).setdefault(key, []).append(value)
    return {"metrics": {k: mean(v) for k, v in overall.items() if v},
            "by_category": {g: {k: mean(v) for k, v in vals.items()} for g, vals in sorted(groups.items())},
            "counts": {k: len(v) for k, v in overall.items() if v}}
