"""The learned re-ranker's fit and its held-out folds: `memlens bench fit --model rerank`.

Every question of the files is answered once, with the shipped recipe and the `learned_rerank`
stage off; for each, the candidates the stage would see (engine/retrieve/rerank.py `pool`: the
first `depth` by score) are kept with their feature rows (rerank.features, the very function the
stage calls), and every alive candidate's message ids, document and kind in score order. The
stage only re-orders those candidates, so re-ranking them here under trial weights gives the
ranking the pipeline would return; the same per-document cap (_rank) is applied after it, and
the figures are scored by the benchmarks' own schemes (ours and official, scoring.py).

The model is pairwise logistic regression (RankNet's loss on a linear scorer) fitted by Newton's
method in numpy: within one question, every candidate that cites a gold turn against every one
that does not, each question weighing the same whichever file it is in (as bench fit weighs
them), L2-regularised towards zero on standardised features.

Held-out folds are bench ablate's pooled ones: a LoCoMo conversation each, a LongMemEval question
type each (oracle and S questions of one type share a fold). A model fitted without a fold answers
that fold's questions; the cross-validated figure gathers those answers. `--write` stores the model
fitted on every fold in resources/recipes/rerank.json, with the files, commit and figures.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import BadInput
from ..retrieve.rerank import FEATURE_NAMES, MODEL_PATH, features, pool
from . import datasets as ds
from .ablate import DEFAULT_FOLDS, _fold_of
from .metrics import dedupe
from .misses import KEPT_DROPS
from .runner import container_engine, containers_for, execute, git_commit, limit_questions, tuned_on, turn_ranking
from .scoring import score_question, summarise_run

if TYPE_CHECKING:
    from ..memory import MemoryEngine

# The candidates re-ordered (a re-ranker's ceiling, bench misses: two thirds of LoCoMo's missed gold
# turns rank 11-100) and the L2 strength (per question of weight 1). Both were chosen on the held-out
# folds' pooled figure from a small grid (depth 30 / 50 / 100, L2 1 / 3 / 10 / 30 / 100, at 3e58afb),
# so the cross-validated figure at these values is, if anything, a little optimistic.
DEPTH = 100
DEPTHS = (30, 50, 100)  # reported side by side; the shipped model is DEPTH's
L2 = 10.0
K = 10


def collect_container(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Per question: the stage's pool as feature rows (one matrix per depth) and every alive
    candidate's message ids, document and kind in score order (worker process)."""
    out: list[dict[str, Any]] = []
    qs = spec["questions"]
    with container_engine(spec, qs) as (engine, scope, vectors):
        for q, qvec in zip(qs, vectors):
            res = engine.recall(q["question"], scope=scope, k=K, recipe=spec["recipe"], origin="bench", now=q["now"],
                                as_of=q.get("as_of"), persist=False, query_vector=qvec)
            cands = [c for c in res.trace.candidates.values()
                     if c.dropped is None or c.dropped["reason"] in KEPT_DROPS]
            ordered = pool(cands, len(cands))
            msgs = engine.store.message_ids(scope, [c.memory_id for c in ordered])
            cap = int((res.trace.params.get("per_document_cap") or {}).get("cap") or 0)
            out.append({
                "file": spec["file"], "dataset": spec["dataset"], "fold": q["fold"], "question_id": q["question_id"],
                "category": q["category"], "excluded": q["excluded"], "gold": q["gold"], "corpus": q.get("corpus"),
                "msgs": [msgs.get(c.memory_id, []) for c in ordered],
                "docs": [c.meta.get("document_id") if c.meta.get("fact_id") is None else None for c in ordered],
                "cap": cap, "x": {str(d): features(ordered[:d]).tolist() for d in DEPTHS},
                "pipeline": score_question(spec["dataset"], q, turn_ranking(engine, scope, res.ordered_ids), [K]),
            })
    Path(spec["db"]).unlink(missing_ok=True)
    return out


def ranking(it: dict[str, Any], depth: int, s: np.ndarray | None = None) -> list[str]:
    """The question's turn ranking with its first `depth` candidates ordered by `s` (None: as fused)."""
    n = len(it["msgs"])
    idx = list(range(n))
    if s is not None:
        d = min(depth, n)
        idx = sorted(range(d), key=lambda i: (-float(s[i]), i)) + idx[d:]
    if it["cap"] > 0:  # the per-document cap, as _rank applies it after the stage
        seen: dict[Any, int] = {}
        first: list[int] = []
        later: list[int] = []
        for i in idx:
            doc = it["docs"][i]
            seen[doc] = seen.get(doc, 0) + 1
            (first if doc is None or seen[doc] <= it["cap"] else later).append(i)
        idx = first + later
    return dedupe(m for i in idx for m in it["msgs"][i])


def _gold_rows(it: dict[str, Any], depth: int) -> list[bool]:
    gold = set(it["gold"].get("turn") or [])
    return [bool(gold & set(m)) for m in it["msgs"][:depth]]


def _usable(it: dict[str, Any]) -> bool:
    return tuned_on(it) and bool(it["gold"].get("turn"))


def train(items: list[dict[str, Any]], depth: int, l2: float = L2) -> dict[str, Any]:
    """Pairwise logistic regression on the items' pools (see the module doc)."""
    used = [it for it in items if _usable(it) and it["x"][str(depth)]]
    if not used:
        raise BadInput("no question with gold evidence to fit on")
    xs = [np.asarray(it["x"][str(depth)], dtype=float) for it in used]
    allx = np.vstack(xs)
    mu = allx.mean(axis=0)
    sd = allx.std(axis=0)
    sd[sd < 1e-6] = 1.0  # a constant feature (and one the stored rounding would make 0)
    diffs, weights = [], []
    for it, x in zip(used, xs):
        z = (x - mu) / sd
        g = np.asarray(_gold_rows(it, depth)[: len(z)])
        if not g.any() or g.all():
            continue
        d = (z[g][:, None, :] - z[~g][None, :, :]).reshape(-1, z.shape[1])
        diffs.append(d)
        weights.append(np.full(len(d), 1.0 / len(d)))
    f = allx.shape[1]
    w = np.zeros(f)
    if diffs:
        dm = np.vstack(diffs)
        wt = np.concatenate(weights)
        for _ in range(50):
            p = 1.0 / (1.0 + np.exp(-(dm @ w)))
            grad = -dm.T @ (wt * (1.0 - p)) + l2 * w
            hess = dm.T @ (dm * (wt * p * (1.0 - p))[:, None]) + l2 * np.eye(f)
            step = np.linalg.solve(hess, grad)
            w = w - step
            if float(np.abs(step).max()) < 1e-7:
                break
    return {"features": list(FEATURE_NAMES), "depth": depth, "mean": mu.round(6).tolist(),
            "scale": sd.round(6).tolist(), "weights": w.round(6).tolist(), "l2": l2, "questions": len(used)}


def _scored(items: list[dict[str, Any]], model: dict[str, Any] | None, depth: int) -> list[dict[str, Any]]:
    from ..retrieve.rerank import score

    out = []
    for it in items:
        x = np.asarray(it["x"][str(depth)], dtype=float)
        s = score(model, x) if model is not None and len(x) else None
        out.append({**it, "scores": score_question(it["dataset"], it, ranking(it, depth, s), [K])})
    return out


def _summary(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Per file: every scheme's turn recall@K overall and per category, as `bench <dataset>` reports."""
    out: dict[str, Any] = {}
    for f in sorted({it["file"] for it in items}):
        mine = [{**it, "excluded": it["excluded"] or it["category"] == "adversarial"
                 or str(it["question_id"]).endswith("_abs")} for it in items if it["file"] == f]
        summ = summarise_run(mine[0]["dataset"], mine, [K])
        key = f"turn_evidence_recall@{K}"
        per: dict[str, Any] = {}
        for scheme, s in summ.items():
            keys = [k for k in s["metrics"] if k.startswith("turn_") and k.endswith(f"@{K}")]
            main = key if key in s["metrics"] else (keys[0] if keys else None)
            per[scheme] = {"metric": main, "overall": s["metrics"].get(main) if main else None,
                           "by_category": {c: v.get(main) for c, v in (s.get("by_category") or {}).items()}}
        out[Path(f).name] = per
    return out


def _pooled(items: list[dict[str, Any]]) -> float:
    """Ours, every usable question weighing the same (the objective's own weighting)."""
    vals = [it["scores"]["memlens"][f"turn_evidence_recall@{K}"] for it in items if _usable(it)]
    return sum(vals) / len(vals) if vals else 0.0


def _specs(paths: list[Path], recipe: str, emb: str, extract: str, cache: Path, work: Path,
           limit: int | None) -> list[dict[str, Any]]:
    specs: list[dict[str, Any]] = []
    for path in paths:
        loaded, raw = ds.read_dataset(path)
        if loaded.name not in ("locomo", "longmemeval"):
            raise BadInput(f"{path}: the re-ranker is fitted on LoCoMo and LongMemEval files")
        kind = DEFAULT_FOLDS[loaded.name]
        for s in limit_questions(containers_for(loaded, raw), limit):
            for q in s["questions"]:
                q["fold"] = f"{loaded.name}:{_fold_of(loaded.name, kind, s['container'], q['category'])}"
            s.update({"file": str(path), "dataset": loaded.name, "recipe": recipe, "embedder": emb,
                      "extract": extract, "cache": str(cache), "db": str(work / f"c{len(specs)}.db")})
            specs.append(s)
    return specs


def run_rerank_fit(engine: MemoryEngine, data_paths: list[str], *, recipe: str = "offline", workers: int = 1,
                   embedder: str | None = None, extract: str = "none", limit: int | None = None,
                   depths: tuple[int, ...] = DEPTHS, progress: Callable[[float, str], None] | None = None
                   ) -> dict[str, Any]:
    """Fit the re-ranker on `data_paths`, cross-validate it; the `bench fit --model rerank` document."""
    from ..retrieve.recipes import get_recipe
    from .containers import cache_dir_for

    if not data_paths:
        raise BadInput("bench fit needs at least one --data FILE")
    paths = [Path(p) for p in data_paths]
    for p in paths:
        if not p.is_file():
            raise BadInput(f"{p}: no such dataset file")
    if "learned_rerank" not in get_recipe(recipe).off:
        raise BadInput(f"recipe {recipe!r} runs learned_rerank: the fit needs the ranking without it")
    emb = embedder or os.environ.get("MEMLENS_EMBEDDER") or "local"
    work = Path(str(engine.path) + ".bench") / "rerank"
    specs = _specs(paths, recipe, emb, extract, cache_dir_for(engine.path), work, limit)
    t0 = time.perf_counter()
    if progress is not None:
        progress(0.0, "answering every question without the re-ranker")
    items = [it for chunk in execute(specs, workers, None, None, fn=collect_container) for it in chunk]
    folds = sorted({it["fold"] for it in items})
    base = [{**it, "scores": it["pipeline"]} for it in items]
    offline_base = _scored(items, None, DEPTH)
    report: dict[str, Any] = {
        "files": [p.name for p in paths], "recipe": recipe, "embedder": emb, "extract": extract, "k": K,
        "objective": "pairwise logistic regression (numpy), every question the benchmarks' own scoring counts, "
                     "each weighing the same", "l2": L2, "shipped_depth": DEPTH, "folds": folds,
        "git_commit": git_commit(),
        "pipeline": {"by_file": _summary(base), "pooled": _pooled(base)},
        "offline_no_rerank": {"by_file": _summary(offline_base), "pooled": _pooled(offline_base)},
        "depths": {}}
    for j, depth in enumerate(depths):
        full = train(items, depth)
        dev = _scored(items, full, depth)
        held: list[dict[str, Any]] = []
        per_fold: dict[str, Any] = {}
        for i, fold in enumerate(folds):
            if progress is not None:
                progress((j + i / len(folds)) / len(depths), f"depth {depth}: fold {fold}")
            model = train([it for it in items if it["fold"] != fold], depth)
            mine = [it for it in items if it["fold"] == fold]
            got = _scored(mine, model, depth)
            before = _scored(mine, None, depth)
            held += got
            per_fold[fold] = {"questions": sum(1 for it in mine if _usable(it)), "without": _pooled(before),
                              "held_out": _pooled(got), "dev_fitted": _pooled([d for d in dev if d["fold"] == fold])}
        report["depths"][str(depth)] = {
            "model": full, "dev_fitted": {"by_file": _summary(dev), "pooled": _pooled(dev)},
            "cross_validated": {"by_file": _summary(held), "pooled": _pooled(held)}, "folds": per_fold,
            "weights": dict(zip(FEATURE_NAMES, full["weights"]))}
    report["seconds"] = round(time.perf_counter() - t0, 1)
    return report


def write_model(report: dict[str, Any], path: str | os.PathLike[str] = MODEL_PATH) -> Path:
    """Store the model fitted on every fold at the shipped depth where the stage loads it."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    d = report["depths"][str(report["shipped_depth"])]
    doc = {**d["model"], "files": report["files"], "git_commit": report.get("git_commit"),
           "dev_fitted": d["dev_fitted"], "cross_validated": d["cross_validated"],
           "command": "memlens bench fit --model rerank " + " ".join(f"--data {f}" for f in report["files"])}
    out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


def markdown(report: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        return "" if v is None else f"{v:.4f}"

    lines = ["# Learned re-ranker (learned_rerank): dev-fitted and held-out folds", "",
             f"- recipe `{report['recipe']}`, embedder `{report['embedder']}`, commit "
             f"`{(report.get('git_commit') or 'unknown')[:12]}`; files: {', '.join(report['files'])}",
             f"- {report['objective']}; L2 {report['l2']}; shipped depth {report['shipped_depth']}", "",
             f"Pooled ours turn evidence recall@{report['k']} (every fold question weighing the same): pipeline "
             f"{fmt(report['pipeline']['pooled'])}, offline re-creation without the stage "
             f"{fmt(report['offline_no_rerank']['pooled'])}", "",
             "| depth | file | scheme | without | dev-fitted | cross-validated |", "|---|---|---|---:|---:|---:|"]
    base = report["pipeline"]["by_file"]
    for depth, d in report["depths"].items():
        for f, schemes in d["dev_fitted"]["by_file"].items():
            for scheme, v in schemes.items():
                cv = d["cross_validated"]["by_file"][f][scheme]
                lines.append(f"| {depth} | {f} | {scheme} | {fmt(base[f][scheme]['overall'])} | {fmt(v['overall'])} | "
                             f"{fmt(cv['overall'])} |")
    shipped = report["depths"][str(report["shipped_depth"])]
    lines += ["", f"## Per category (depth {report['shipped_depth']}): without / dev-fitted / cross-validated", "",
              "| file | scheme | category | without | dev-fitted | cross-validated |", "|---|---|---|---:|---:|---:|"]
    for f, schemes in shipped["dev_fitted"]["by_file"].items():
        for scheme, v in schemes.items():
            for cat, val in v["by_category"].items():
                cv = shipped["cross_validated"]["by_file"][f][scheme]["by_category"].get(cat)
                lines.append(f"| {f} | {scheme} | {cat} | {fmt(base[f][scheme]['by_category'].get(cat))} | "
                             f"{fmt(val)} | {fmt(cv)} |")
    lines += ["", "## Held-out folds (pooled ours, each fold's questions)", "",
              "| depth | fold | questions | without | model fitted without the fold | dev-fitted |",
              "|---|---|---:|---:|---:|---:|"]
    for depth, d in report["depths"].items():
        for fold, r in d["folds"].items():
            lines.append(f"| {depth} | {fold} | {r['questions']} | {fmt(r['without'])} | {fmt(r['held_out'])} | "
                         f"{fmt(r['dev_fitted'])} |")
    lines += ["", f"## Weights (depth {report['shipped_depth']}, standardised features)", "",
              "| feature | weight |", "|---|---:|"]
    lines += [f"| {n} | {w:+.3f} |" for n, w in shipped["weights"].items()]
    return "\n".join(lines) + "\n"
