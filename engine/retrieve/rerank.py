"""learned_rerank: a linear ranking model over the trace's components, after fusion.

The stage re-orders the first `depth` candidates of the fused ranking (score order, every prior
applied) by a learned score, before the current-truth rules (version_cap, claim_superseded,
restated_later, ...), which then order its result as they order the fused one, so the stage can
never put an outdated statement back above the one that replaced it. The learned score is a
weighted sum of features the pipeline has already computed for each candidate (each channel's
normalised score and rank, the priors' raw values, the neighbour and session signals, the turn's
length in characters, its document's share, its place among its document's candidates and their
best score among the first `depth`, whether both lexical and vector channels proposed it, ...):
one pass over the pool reads a raw row per candidate (RAW_NAMES) and its document's signals, and
every feature is derived from those in numpy. The model's `keep` is a margin the fused first k
keep their places by; with `hold` the model only chooses which candidates reach the first k, and
among them the fused order stands. The weights are fitted by `memlens bench fit --model rerank`
(engine/bench/rerank_fit.py: pairwise logistic regression in numpy over the development files,
its settings chosen on held-out folds) and ship as data in resources/recipes/rerank.json
(Recipe.rerank_model names another file); evaluating them needs numpy only.

Every re-ordered candidate keeps its place above the candidates past `depth` (the stage never
brings anything new into the top), its learned score is recorded in the trace
(trace.params["learned_rerank"]) and the change to its score is a component ("learned_rerank").
"""

from __future__ import annotations

import json
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
    "timeframe", "when_time", "fact", "chars", "asks", "document_share", "document_position", "document_gap",
    "residual", "rank_agreement", "beside_top",
)
_CHANNELS = ("vector", "fts", "neighbour", "entity", "relation")
_PRIORS = ("session", "speaker", "side", "timeframe", "when_time")


# What the stage reads from each candidate, one row a candidate (raw); features() derives
# FEATURE_NAMES from these rows in numpy, so the fit (engine/bench/rerank_fit.py) can derive them
# again for a pool of any depth from the rows the trace recorded at the deepest one.
RAW_NAMES = (
    "score", "fusion", *_CHANNELS, "vector_rank", "fts_rank", "neighbour_rank", *_PRIORS, "fact", "chars", "asks",
    "residual", "document", "chunk",
)
_NAN = float("nan")


def pool(cands: list[CandidateTrace], depth: int) -> list[CandidateTrace]:
    """The candidates the stage re-orders: the first `depth` by score (ties by id, as _rank)."""
    if len(cands) <= 2 * depth:
        return sorted(cands, key=lambda c: (-c.score, c.memory_id))[:depth]
    n = len(cands)
    score = np.fromiter((c.score for c in cands), dtype=float, count=n)
    ids = np.fromiter((c.memory_id for c in cands), dtype=np.int64, count=n)
    best = np.argpartition(-score, depth - 1)[:depth]  # the first `depth` scores, and any tied with the last
    tied = np.flatnonzero(score >= score[best].min())
    order = tied[np.lexsort((ids[tied], -score[tied]))][:depth]
    return [cands[i] for i in order.tolist()]


def raw(top: list[CandidateTrace]) -> np.ndarray:
    """One row of RAW_NAMES per candidate of `top` (in score order): the only per-candidate pass
    (a missing rank, document or chunk is NaN)."""
    flat: list[float] = []
    put = flat.extend
    nan = _NAN
    for c in top:
        m = c.meta
        cx = m.get("channel_x") or _EMPTY
        x = m.get("x") or _EMPTY
        ch = c.channels
        comp = c.components
        text = m.get("text") or ""
        doc = m.get("document_id")
        chunk = m.get("chunk_id")
        put((
            c.score, comp.get("fusion", 0.0), cx.get("vector", 0.0), cx.get("fts", 0.0),
            cx.get("neighbour", 0.0), cx.get("entity", 0.0), cx.get("relation", 0.0),
            ch["vector"]["rank"] if "vector" in ch else nan, ch["fts"]["rank"] if "fts" in ch else nan,
            ch["neighbour"]["rank"] if "neighbour" in ch else nan,
            x.get("session", 0.0), x.get("speaker", 0.0), x.get("side", 0.0), x.get("timeframe", 0.0),
            x.get("when_time", 0.0), 0.0 if m.get("fact_id") is None else 1.0, len(text),
            1.0 if "?" in text else 0.0, c.score - sum(comp.values()),
            nan if doc is None else doc, nan if chunk is None else chunk,
        ))
    return np.fromiter(flat, dtype=float, count=len(flat)).reshape(len(top), len(RAW_NAMES))


_EMPTY: dict[str, Any] = {}
_R = {n: i for i, n in enumerate(RAW_NAMES)}



def _documents(top: list[CandidateTrace]) -> np.ndarray:
    """Per candidate of `top`: its document's share of the pool, 1 / (1 + its mates above it), the
    place of its document's first candidate and whether it is beside (chunk +- 1 of the same
    document) one of the first 10 (a candidate without a document has no mates)."""
    n = len(top)
    first: dict[Any, int] = {}
    count: dict[Any, int] = {}
    rows: list[float] = []
    near = {(c.meta.get("document_id"), c.meta.get("chunk_id")) for c in top[:10]}
    for i, c in enumerate(top):
        doc = c.meta.get("document_id")
        if doc is None:
            rows += (0.0, 1.0, i, 0.0)
            continue
        seen = count.get(doc, 0)
        count[doc] = seen + 1
        at = first.setdefault(doc, i)
        chunk = c.meta.get("chunk_id")
        beside = chunk is not None and ((doc, chunk - 1) in near or (doc, chunk + 1) in near)
        rows += (doc, 1.0 / (1.0 + seen), at, 1.0 if beside else 0.0)
    out = np.fromiter(rows, dtype=float, count=len(rows)).reshape(n, 4)
    for i, c in enumerate(top):  # the share, once every count is known
        doc = c.meta.get("document_id")
        if doc is not None:
            out[i, 0] = count[doc] / n
    return out


def _documents_of(r: np.ndarray) -> np.ndarray:
    """_documents from the raw rows alone (numpy; the fit derives a shallower pool's features)."""
    n = len(r)
    doc, chunk = r[:, _R["document"]], r[:, _R["chunk"]]
    order = np.argsort(doc, kind="stable")  # each document's candidates together, in pool order (NaN last)
    d = doc[order]
    opens = np.empty(n, dtype=bool)
    opens[0] = True
    np.not_equal(d[1:], d[:-1], out=opens[1:])  # NaN differs from everything: a group of its own
    starts = np.flatnonzero(opens)
    group = np.cumsum(opens) - 1
    size = np.diff(np.append(starts, n))[group]
    out = np.empty((n, 4))
    alone = np.isnan(doc)
    out[order, 0] = size / n
    out[alone, 0] = 0.0
    out[order, 1] = 1.0 / (1.0 + np.arange(n) - starts[group])  # 1 / (1 + its mates above it)
    out[order, 2] = order[starts[group]]  # its document's first candidate
    m = min(10, n)
    out[:, 3] = ((doc[:, None] == doc[None, :m]) & (np.abs(chunk[:, None] - chunk[None, :m]) == 1)).any(axis=1)
    return out


_F = {n: i for i, n in enumerate(FEATURE_NAMES)}
# Features that are a raw column as it is: (feature columns, raw columns).
_SAME = ("fusion", *_CHANNELS, *_PRIORS, "fact", "asks", "residual")
_SAME_F, _SAME_R = np.asarray([_F[n] for n in _SAME]), np.asarray([_R[n] for n in _SAME])
_LOG_PLACE = np.log(np.arange(1.0, 1001.0))


def features(top: list[CandidateTrace] | np.ndarray) -> np.ndarray:
    """One row of FEATURE_NAMES per candidate of `top` (in score order), or per row of raw(top):
    numpy over the raw rows, no per-candidate step but raw()'s and _documents()'."""
    if isinstance(top, list):
        r = raw(top)
        docs = _documents(top) if top else np.empty((0, 4))
    else:
        r = np.asarray(top, dtype=float)
        docs = _documents_of(r) if len(r) else np.empty((0, 4))
    n = len(r)
    out = np.empty((n, len(FEATURE_NAMES)))
    if not n:
        return out
    out[:, _SAME_F] = r[:, _SAME_R]
    score = r[:, _R["score"]]
    out[:, _F["score_gap"]] = score - score[0]
    out[:, _F["log_position"]] = _LOG_PLACE[:n] if n <= len(_LOG_PLACE) else np.log(np.arange(1.0, n + 1.0))
    ranks = r[:, _R["vector_rank"]:_R["neighbour_rank"] + 1]  # vector, fts, neighbour; NaN: not proposed by it
    has = ranks == ranks
    ranked = np.where(ranks[:, :2] >= 1.0, ranks[:, :2], np.nan)
    worth = np.nan_to_num(1.0 / np.log2(1.0 + ranked))  # 1 at rank 1, 1/log2(1 + rank); 0 absent
    out[:, _F["vector_rank"]:_F["fts_rank"] + 1] = worth
    out[:, _F["vector_and_fts"]] = has[:, 0] & has[:, 1]
    out[:, _F["neighbour_only"]] = has[:, 2] & ~(has[:, 0] | has[:, 1])
    out[:, _F["neighbour_near"]] = np.nan_to_num(1.0 / (1.0 + ranks[:, 2]))
    out[:, _F["rank_agreement"]] = worth.min(axis=1)
    out[:, _F["chars"]] = np.log1p(r[:, _R["chars"]])
    out[:, _F["document_share"]] = docs[:, 0]
    out[:, _F["document_position"]] = docs[:, 1]
    out[:, _F["document_gap"]] = score[docs[:, 2].astype(np.intp)] - score[0]
    out[:, _F["beside_top"]] = docs[:, 3]
    return out


def score(model: dict[str, Any], x: np.ndarray) -> np.ndarray:
    """The learned score of each row: standardised features times the weights."""
    mu = np.asarray(model["mean"], dtype=float)
    sd = np.asarray(model["scale"], dtype=float)
    w = np.asarray(model["weights"], dtype=float)
    return np.asarray(((x - mu) / sd) @ w, dtype=float)


@lru_cache(maxsize=8)
def _load(path: str, _stamp: tuple[int, int], features: tuple[str, ...]) -> dict[str, Any] | None:
    """The model at `path` as it was when it had `_stamp` (mtime, size): a rewritten file (bench fit
    --model rerank / order writes its fold models to the same paths run after run) is read again."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or list(doc.get("features") or []) != list(features):
        return None  # a model fitted on other features cannot be read as these
    return doc


def read_model(path: str | Path | None, default: Path, features: tuple[str, ...]) -> dict[str, Any] | None:
    """A learned stage's model file (`path`, else `default`) fitted on `features`; None: no file, or
    one fitted on other features. Shared by learned_rerank and learned_order."""
    p = Path(path or default)
    try:
        st = p.stat()
    except OSError:
        return None
    return _load(str(p), (st.st_mtime_ns, st.st_size), tuple(features))


def load_model(path: str | Path | None = None) -> dict[str, Any] | None:
    """The shipped model (None: no model, or one fitted on other features)."""
    return read_model(path, MODEL_PATH, tuple(FEATURE_NAMES))


def apply(trace: Trace, model: dict[str, Any] | None) -> None:
    """Re-order the first model["depth"] alive candidates by the learned score (the stage)."""
    if model is None:
        trace.params["learned_rerank"] = {"skipped": "no model fitted on these features"}
        return
    top = pool(trace.alive(), int(model["depth"]))
    if len(top) < 2:
        return
    r = raw(top)
    s = score(model, features(r))
    keep = float(model.get("keep") or 0.0)  # the fused first k keep their places unless beaten by this margin
    if keep:
        s[: trace.k] += keep
    floor = top[-1].score
    new = floor + 1e-6 + (s - float(s.min()))
    if model.get("hold"):  # the model picks the first k; among them the fused order stands
        first = np.argsort(-s, kind="stable")[: trace.k]
        new[np.sort(first)] = np.sort(new[first])[::-1]
    change = np.round(new - r[:, _R["score"]], 6).tolist()
    for i, (c, v, d) in enumerate(zip(top, new.tolist(), change)):
        c.meta["rerank_row"] = (i, r[i])  # its place in the pool and its raw row (bench fit --model rerank)
        c.components["learned_rerank"] = d
        c.score = v
    trace.params["learned_rerank"] = {"depth": int(model["depth"]), "keep": keep, "hold": bool(model.get("hold")),
                                      "scores": dict(zip((str(c.memory_id) for c in top), np.round(s, 4).tolist()))}
