"""learned_order: a learned, general ordering of one speaker's statements over time.

Under current intent, after the current-truth rules (claim_superseded, restated_later, same_slot,
not_a_change, ...), every pair of turns among the first `depth` candidates said by one speaker at
different times (earlier E, later L) that no rule already ordered (neither is marked outdated, an
aside or history) is read by a small logistic model: P(L states the value that now replaces E's for
the asked claim). Above the model's threshold L leads E (and E's fact), and E stays right below it,
marked outdated the way the rules mark one (trace.params["outdated"], rule "learned_order", "updated
on ... by ...", with P in its reason and code "learned_order.p").

The features are general, no phrase lists: the query and turn vector similarities (cos(q,E),
cos(q,L), cos(E,L)), fused ranks and the score gap, the time gap, shared content words, and the
readings engine.statements already makes of each turn's clauses (plain assertion, plan / wish /
hypothetical, visit or stay, someone else's matter, take-back, change frame, question form,
negation, a time ahead). The model is fitted by `memlens bench fit --model order`
(engine/bench/order_fit.py, leave-one-dev-batch-out folds through the real pipeline) and ships as
data in resources/recipes/order.json (Recipe.order_model names another file); evaluating it needs
numpy only. Every pair read is kept in the later turn's meta["order_rows"] (the fit reads them back).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..names import name_key
from ..paths import resources_dir
from ..statements import ahead_of, clauses, content_words, turn_body
from .rerank import read_model
from .trace import CandidateTrace, Trace, lift_above

MODEL_PATH = resources_dir() / "recipes" / "order.json"

_SIDE = ("plain", "modal", "visit", "other_person", "retracts", "change", "question_only", "negation", "ahead",
         "length")
FEATURE_NAMES = (
    "cos_qe", "cos_ql", "cos_el", "cos_gain", "score_gap", "rank_e", "rank_l", "log_days", "same_session",
    "shared_words", "query_words_gain",
    *(f"e_{n}" for n in _SIDE), *(f"l_{n}" for n in _SIDE),
)
_NEGATION = re.compile(r"(?i)\b(?:not|no|never|no longer|anymore|any more)\b|n't\b|n’t\b")


def _days(a: str, b: str) -> float:
    from ..timeutil import parse_iso

    try:
        return abs((parse_iso(b) - parse_iso(a)).total_seconds()) / 86400.0
    except (TypeError, ValueError):
        return 0.0


def readings(text: str, said_on: str | None) -> list[float]:
    """engine.statements' readings of a turn body as numbers (the _SIDE features)."""
    parts = clauses(text)
    said = [c for c in parts if len(c.text.split()) > 1] or parts
    plain = any(c.asserts and not c.visit and c.subject in ("self", "thing", "pronoun") for c in said)
    return [
        1.0 if plain else 0.0,
        1.0 if any(c.modal for c in said) else 0.0,
        1.0 if any(c.visit for c in said) else 0.0,
        1.0 if any(c.subject == "person" for c in said) else 0.0,
        1.0 if any(c.retracts for c in said) else 0.0,
        1.0 if any(c.states_change for c in said) else 0.0,
        1.0 if said and all(c.question for c in said) else 0.0,
        1.0 if _NEGATION.search(text) else 0.0,
        1.0 if ahead_of(text, said_on) else 0.0,
        math.log1p(len(text.split())),
    ]


def pairs_of(trace: Trace, depth: int) -> list[tuple[CandidateTrace, CandidateTrace]]:
    """(earlier, later) turns among the first `depth` alive candidates by one speaker at different
    times that no current-truth rule already ordered."""
    decided = set(trace.params.get("outdated") or {}) | set(trace.params.get("asides") or {}) \
        | set(trace.params.get("history_first") or {})
    top = sorted(trace.alive(), key=lambda c: (-c.score, c.memory_id))[:depth]
    turns = [c for c in top if c.meta.get("kind") == "episode" and c.meta.get("speaker") and c.meta.get("source_time")
             and c.meta.get("trust") in ("user", "external") and str(c.memory_id) not in decided]
    out = []
    for e in turns:
        for ll in turns:
            if (ll.meta["source_time"] > e.meta["source_time"]
                    and name_key(e.meta["speaker"]) == name_key(ll.meta["speaker"])):
                out.append((e, ll))
    return out


def features(trace: Trace, pairs: list[tuple[CandidateTrace, CandidateTrace]], qvec: np.ndarray | None,
             vectors_of: Callable[[list[int]], dict[int, np.ndarray]], query_words: set[str]) -> np.ndarray:
    """One row of FEATURE_NAMES per pair."""
    out = np.zeros((len(pairs), len(FEATURE_NAMES)), dtype=float)
    if not pairs:
        return out
    ranked = sorted(trace.alive(), key=lambda c: (-c.score, c.memory_id))
    rank = {c.memory_id: i + 1 for i, c in enumerate(ranked)}
    ids = sorted({c.memory_id for p in pairs for c in p})
    vecs = vectors_of(ids)
    body = {c.memory_id: turn_body(c.meta["text"], c.meta["speaker"]) for p in pairs for c in p}
    read = {mid: readings(body[mid], next(c for p in pairs for c in p if c.memory_id == mid).meta.get("source_time"))
            for mid in ids}
    words = {mid: content_words(body[mid]) for mid in ids}

    def cos(a: np.ndarray | None, b: np.ndarray | None) -> float:
        return float(np.dot(a, b)) if a is not None and b is not None else 0.0

    for i, (e, ll) in enumerate(pairs):
        ve, vl = vecs.get(e.memory_id), vecs.get(ll.memory_id)
        qe, ql = cos(qvec, ve), cos(qvec, vl)
        we, wl = words[e.memory_id], words[ll.memory_id]
        out[i] = [
            qe, ql, cos(ve, vl), ql - qe, ll.score - e.score,
            math.log(rank[e.memory_id]), math.log(rank[ll.memory_id]),
            math.log1p(_days(e.meta["source_time"], ll.meta["source_time"])),
            1.0 if e.meta.get("document_id") == ll.meta.get("document_id") else 0.0,
            len(we & wl) / max(1, len(we | wl)),
            float(len(query_words & wl) - len(query_words & we)),
            *read[e.memory_id], *read[ll.memory_id],
        ]
    return out


def probability(model: dict[str, Any], x: np.ndarray) -> np.ndarray:
    mu = np.asarray(model["mean"], dtype=float)
    sd = np.asarray(model["scale"], dtype=float)
    w = np.asarray(model["weights"], dtype=float)
    z = ((x - mu) / sd) @ w + float(model.get("bias", 0.0))
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -30, 30))), dtype=float)


def load_model(path: str | Path | None = None) -> dict[str, Any] | None:
    """The shipped model (None: no model, or one fitted on other features)."""
    return read_model(path, MODEL_PATH, tuple(FEATURE_NAMES))


def apply(trace: Trace, model: dict[str, Any] | None, qvec: np.ndarray | None,
          vectors_of: Callable[[list[int]], dict[int, np.ndarray]], query_words: set[str],
          group: Callable[[CandidateTrace], list[CandidateTrace]] | None = None) -> None:
    """The stage (see the module doc): above the threshold the later turn leads, the earlier is marked."""
    if model is None:
        trace.params["learned_order"] = {"skipped": "no model fitted on these features"}
        return
    pairs = pairs_of(trace, int(model.get("depth", 10)))
    if not pairs:
        return
    x = features(trace, pairs, qvec, vectors_of, query_words)
    p = probability(model, x)
    for (e, ll), row in zip(pairs, x):
        ll.meta.setdefault("order_rows", []).append((e.memory_id, row))  # bench fit --model order reads them
    threshold = float(model.get("threshold", 0.5))
    marks: dict[str, dict[str, Any]] = trace.params.setdefault("outdated", {})
    fired: dict[str, float] = {}
    for i in sorted(range(len(pairs)), key=lambda i: -p[i]):
        if p[i] < threshold:
            break
        e, ll = pairs[i]
        if str(e.memory_id) in marks or str(ll.memory_id) in marks:
            continue  # each turn is ordered once: by the strongest pair it is in
        earlier = group(e) if group is not None else [e]
        top = max(m.score for m in earlier)
        lift_above(ll, top, "learned_order")
        on = ll.meta["source_time"][:10]
        e.components.setdefault("learned_order", 0.0)
        marks[str(e.memory_id)] = {
            "by": ll.memory_id, "rule": "learned_order", "on": on, "text": ll.meta["text"],
            "code": "learned_order.p", "p": round(float(p[i]), 4),
            "reason": f"a learned model (bench fit --model order) gives P={p[i]:.2f} that the same speaker's later "
                      f"statement ({on}) replaces it for the asked claim"}
        fired[str(e.memory_id)] = round(float(p[i]), 4)
    if not marks:
        del trace.params["outdated"]
    trace.params["learned_order"] = {"pairs": len(pairs), "threshold": threshold, "fired": fired}
