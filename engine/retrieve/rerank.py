"""learned_rerank: a linear ranking model over the trace's components, after fusion.

The stage re-orders the first `depth` candidates of the fused ranking (score order, every prior
applied) by a learned score, before the current-truth rules (version_cap, claim_superseded,
restated_later, ...), which then order its result as they order the fused one, so the stage can
never put an outdated statement back above the one that replaced it. The learned score is a
weighted sum of features the pipeline has already computed for each candidate (each channel's
normalised score and rank, the priors' raw values, the neighbour and session signals, the turn's
length, its document's share and best score among the first `depth`, whether both lexical and
vector channels proposed it, ...). The weights
are fitted by `memlens bench fit --model rerank` (engine/bench/rerank_fit.py: pairwise logistic
regression in numpy over the development files, judged on held-out folds) and ship as data in
resources/recipes/rerank.json (Recipe.rerank_model names another file); evaluating them needs
numpy only.

Every re-ordered candidate keeps its place above the candidates past `depth` (the stage never
brings anything new into the top), its learned score is recorded in the trace
(trace.params["learned_rerank"]) and the change to its score is a component ("learned_rerank").
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..paths import resources_dir
from .trace import CandidateTrace, Trace

MODEL_PATH = resources_dir() / "recipes" / "rerank.json"

FEATURE_NAMES = (
    "score_gap", "log_position", "fusion", "vector", "fts", "neighbour", "entity", "relation",
    "vector_rank", "fts_rank", "vector_and_fts", "neighbour_only", "neighbour_near", "session", "speaker", "side",
    "timeframe", "when_time", "fact", "length", "asks", "document_share", "document_position", "document_gap",
    "residual", "rank_agreement", "beside_top",
)
_CHANNELS = ("vector", "fts", "neighbour", "entity", "relation")
_PRIORS = ("session", "speaker", "side", "timeframe", "when_time")


def _rr(rank: float | None) -> float:
    """A channel rank's worth: 1 at rank 1, falling as 1/log2(1 + rank); 0 when absent."""
    return 1.0 / math.log2(1.0 + rank) if rank is not None and rank >= 1 else 0.0


def pool(cands: list[CandidateTrace], depth: int) -> list[CandidateTrace]:
    """The candidates the stage re-orders: the first `depth` by score (ties by id, as _rank)."""
    return sorted(cands, key=lambda c: (-c.score, c.memory_id))[:depth]


def features(top: list[CandidateTrace]) -> np.ndarray:
    """One row of FEATURE_NAMES per candidate of `top` (in score order)."""
    n = len(top)
    out = np.zeros((n, len(FEATURE_NAMES)), dtype=float)
    if not n:
        return out
    best = top[0].score
    docs: dict[Any, list[int]] = {}
    for i, c in enumerate(top):
        docs.setdefault(c.meta.get("document_id"), []).append(i)
    near_top = {(c.meta.get("document_id"), c.meta.get("chunk_id")) for c in top[:10] if c.meta.get("chunk_id") is not None}
    for i, c in enumerate(top):
        m = c.meta
        cx = m.get("channel_x") or {}
        x = m.get("x") or {}
        ranks = {ch: float(c.channels[ch]["rank"]) for ch in ("vector", "fts") if ch in c.channels}
        doc = m.get("document_id")
        mates = docs[doc]
        chunk = m.get("chunk_id")
        nb = c.channels.get("neighbour")
        words = len((m.get("text") or "").split())
        row = [
            c.score - best, math.log(i + 1.0), float(c.components.get("fusion", 0.0)),
            *(float(cx.get(ch, 0.0)) for ch in _CHANNELS),
            _rr(ranks.get("vector")), _rr(ranks.get("fts")), 1.0 if len(ranks) == 2 else 0.0,
            1.0 if nb is not None and not ranks else 0.0,
            1.0 / (1.0 + float(nb["rank"])) if nb is not None else 0.0,
            *(float(x.get(p, 0.0)) for p in _PRIORS),
            1.0 if m.get("fact_id") is not None else 0.0, math.log1p(words),
            1.0 if "?" in (m.get("text") or "") else 0.0,
            len(mates) / n if doc is not None else 0.0,
            1.0 / (1.0 + mates.index(i)) if doc is not None else 1.0,
            top[mates[0]].score - best if doc is not None else c.score - best,
            c.score - sum(c.components.values()),
            min(_rr(ranks.get("vector")), _rr(ranks.get("fts"))),
            1.0 if chunk is not None and ((doc, chunk - 1) in near_top or (doc, chunk + 1) in near_top) else 0.0,
        ]
        out[i] = row
    return out


def score(model: dict[str, Any], x: np.ndarray) -> np.ndarray:
    """The learned score of each row: standardised features times the weights."""
    mu = np.asarray(model["mean"], dtype=float)
    sd = np.asarray(model["scale"], dtype=float)
    w = np.asarray(model["weights"], dtype=float)
    return np.asarray(((x - mu) / sd) @ w, dtype=float)


@lru_cache(maxsize=4)
def _load(path: str, _stamp: tuple[int, int]) -> dict[str, Any] | None:
    """The model at `path` as it was when it had `_stamp` (mtime, size): a rewritten file (bench fit
    --model rerank writes its fold models to the same paths run after run) is read again."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or list(doc.get("features") or []) != list(FEATURE_NAMES):
        return None  # a model fitted on other features cannot be read as these
    return doc


def load_model(path: str | Path | None = None) -> dict[str, Any] | None:
    """The shipped model (None: no model, or one fitted on other features)."""
    p = Path(path or MODEL_PATH)
    try:
        st = p.stat()
    except OSError:
        return None
    return _load(str(p), (st.st_mtime_ns, st.st_size))


def apply(trace: Trace, model: dict[str, Any] | None) -> None:
    """Re-order the first model["depth"] alive candidates by the learned score (the stage)."""
    if model is None:
        trace.params["learned_rerank"] = {"skipped": "no model fitted on these features"}
        return
    top = pool(trace.alive(), int(model["depth"]))
    if len(top) < 2:
        return
    x = features(top)
    s = score(model, x)
    floor = top[-1].score
    new = floor + 1e-6 + (s - float(s.min()))
    learned: dict[str, float] = {}
    for i, (c, v, ls) in enumerate(zip(top, new, s)):
        c.meta["rerank_row"] = (i, x[i])  # its place in the pool and its features (bench fit --model rerank)
        c.components["learned_rerank"] = round(float(v) - c.score, 6)
        c.score = float(v)
        learned[str(c.memory_id)] = round(float(ls), 4)
    trace.params["learned_rerank"] = {"depth": int(model["depth"]), "scores": learned}
