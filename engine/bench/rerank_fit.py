"""The learned re-ranker's fit and its held-out folds: `memlens bench fit --model rerank`.

Every question of the files is answered once with the stage on and a model that keeps the fused
order (its score is the fused score: the ranking is the one without the stage), and the stage's
pool is read back from the trace: each of the first DEPTH_MAX candidates' raw rows, read by the
stage itself (engine/retrieve/rerank.py; a shallower pool's features are derived from its first
rows), and the message ids they cite.

The model is pairwise logistic regression (RankNet's loss on a linear scorer) fitted by Newton's
method in numpy: within one question, every candidate that cites a gold turn against every one
that does not, each question (or each file, or each fold) weighing the same, L2-regularised
towards zero on standardised features. Depth, L2, weighing and keep are chosen on the held-out
folds without the pipeline (_choose), hold through it (run_rerank_fit).

Held-out folds are bench ablate's pooled ones: a LoCoMo conversation each, a LongMemEval question
type each (oracle and S questions of one type share a fold). A model fitted without a fold answers
that fold's questions through the real pipeline (Recipe.rerank_model names its file), so the
current-truth rules, caps and shared places act on its order as they would in use; the
cross-validated figure gathers those answers, scored by the benchmarks' own schemes (ours and
official, scoring.py). `--write` stores the model fitted on every fold in
resources/recipes/rerank.json, with the files, commit and figures.
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
from ..retrieve.rerank import FEATURE_NAMES, MODEL_PATH, features, score
from . import datasets as ds
from .ablate import DEFAULT_FOLDS, _fold_of
from .fit import dataset_files
from .runner import (
    container_engine,
    containers_for,
    excluded,
    execute,
    git_commit,
    limit_questions,
    tuned_on,
    turn_ranking,
)
from .scoring import score_question, summarise_run

if TYPE_CHECKING:
    from ..memory import MemoryEngine

# The grid the command chooses from on the held-out folds (see _choose): the candidates re-ordered
# (a re-ranker's ceiling, bench misses: two thirds of LoCoMo's missed gold turns rank 11-100), the
# L2 strength (per question of weight 1), how the questions weigh (each the same; each file the
# same; each fold the same) and `keep`, a bonus in learned-score units for the fused order's first
# K (the model must beat the fused top K by that margin to change it; 0: none). The pool is read
# once at DEPTH_MAX; a smaller depth's features are derived again from its first rows. `hold`
# (the stage's first K places keep the fused order among them: the model chooses which candidates
# reach the top K, not their order there) is judged through the pipeline (run_rerank_fit).
DEPTH_MAX = 100
DEPTHS = (30, 50, 100)
L2S = (3.0, 10.0, 30.0)
WEIGHINGS = ("question", "file", "fold")
KEEPS = (0.0, 0.25, 0.5, 1.0, 2.0)
HOLDS = (False, True)
K = 10


def identity_model(depth: int = DEPTH_MAX) -> dict[str, Any]:
    """A model whose learned score is the fused score: the stage runs, and changes no order."""
    f = len(FEATURE_NAMES)
    w = [0.0] * f
    w[FEATURE_NAMES.index("score_gap")] = 1.0
    return {"features": list(FEATURE_NAMES), "depth": depth, "mean": [0.0] * f, "scale": [1.0] * f, "weights": w}


def collect_container(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Answer a container's questions with the stage on and spec["model"] (a file); per question its
    scores and the stage's pool: raw rows (rerank.RAW_NAMES) and message ids in pool order (worker
    process)."""
    out: list[dict[str, Any]] = []
    qs = spec["questions"]
    with container_engine(spec, qs) as (engine, scope, vectors):
        for q, qvec in zip(qs, vectors):
            res = engine.recall(q["question"], scope=scope, k=K, recipe=spec["recipe"], origin="bench", now=q["now"],
                                as_of=q.get("as_of"), persist=False, query_vector=qvec, on=("learned_rerank",),
                                rerank_model=spec["model"])
            pooled = sorted((c.meta["rerank_row"][0], c.memory_id, c.meta["rerank_row"][1])
                            for c in res.trace.candidates.values() if "rerank_row" in c.meta)
            msgs = engine.store.message_ids(scope, [mid for _, mid, _ in pooled])
            out.append({
                "file": spec["file"], "dataset": spec["dataset"], "fold": q["fold"], "question_id": q["question_id"],
                "category": q["category"], "excluded": q["excluded"], "gold": q["gold"],
                "msgs": [msgs.get(mid, []) for _, mid, _ in pooled],
                "raw": [row.tolist() for _, _, row in pooled],
                "scores": score_question(spec["dataset"], q, turn_ranking(engine, scope, res.ordered_ids), [K]),
            })
    Path(spec["db"]).unlink(missing_ok=True)
    return out


def _gold_rows(it: dict[str, Any]) -> list[bool]:
    gold = set(it["gold"].get("turn") or [])
    return [bool(gold & set(m)) for m in it["msgs"]]


def _usable(it: dict[str, Any]) -> bool:
    return tuned_on(it) and bool(it["gold"].get("turn"))


class Pools:
    """The usable questions' pools, their features at each depth and their gold rows' pairs (each
    gold row's features minus each other row's, unstandardised: standardising only scales them)."""

    def __init__(self, items: list[dict[str, Any]]):
        self.items = [it for it in items if _usable(it) and it.get("raw")]
        if not self.items:
            raise BadInput("no question with gold evidence to fit on")
        self.raw = [np.asarray(it["raw"], dtype=float) for it in self.items]
        self.gold = [np.asarray(_gold_rows(it)[: len(r)], dtype=bool) for it, r in zip(self.items, self.raw)]
        self._x: dict[int, list[np.ndarray]] = {}
        self._pairs: dict[int, list[np.ndarray]] = {}

    def x(self, depth: int) -> list[np.ndarray]:
        if depth not in self._x:
            self._x[depth] = [features(r[:depth]) for r in self.raw]
        return self._x[depth]

    def pairs(self, depth: int) -> list[np.ndarray]:
        if depth not in self._pairs:
            out = []
            for x, g in zip(self.x(depth), self.gold):
                g = g[: len(x)]
                out.append((x[g][:, None, :] - x[~g][None, :, :]).reshape(-1, x.shape[1]))
            self._pairs[depth] = out
        return self._pairs[depth]


def _weights(items: list[dict[str, Any]], weighing: str) -> np.ndarray:
    """Each question's weight in the loss, averaging 1: each the same, or each file / fold the same."""
    if weighing == "question":
        return np.ones(len(items))
    if weighing not in ("file", "fold"):
        raise BadInput(f"unknown weighing {weighing!r}")
    groups = [it[weighing] for it in items]
    count = {g: groups.count(g) for g in set(groups)}
    return np.asarray([len(items) / (len(count) * count[g]) for g in groups])


def train(items: list[dict[str, Any]] | Pools, depth: int = DEPTH_MAX, l2: float = 10.0, weighing: str = "question",
          keep: float = 0.0, only: list[int] | None = None) -> dict[str, Any]:
    """Pairwise logistic regression on the pools (see the module doc); `only`: those questions of them."""
    pools = items if isinstance(items, Pools) else Pools(items)
    use = list(range(len(pools.items))) if only is None else only
    if not use:
        raise BadInput("no question with gold evidence to fit on")
    xs, pairs = pools.x(depth), pools.pairs(depth)
    allx = np.vstack([xs[i] for i in use])
    mu = allx.mean(axis=0)
    sd = allx.std(axis=0)
    sd[sd < 1e-6] = 1.0  # a constant feature
    qw = _weights([pools.items[i] for i in use], weighing)
    diffs, weights = [], []
    for i, w_q in zip(use, qw):
        d = pairs[i]
        if len(d):
            diffs.append(d)
            weights.append(np.full(len(d), w_q / len(d)))
    f = allx.shape[1]
    w = np.zeros(f)
    if diffs:
        dm = np.vstack(diffs) / sd
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
            "scale": sd.round(6).tolist(), "weights": w.round(6).tolist(), "l2": l2, "weighing": weighing,
            "keep": keep, "questions": len(use)}


def _proxy(pools: Pools, i: int, model: dict[str, Any] | None) -> float:
    """Ours for question i with `model` ordering its pool (None: the fused order), the rest of the
    pool after it: the stage's effect before the current-truth rules, without the pipeline."""
    it, raw = pools.items[i], pools.raw[i]
    n = len(raw)
    order = np.arange(n)
    if model is not None:
        x = pools.x(int(model["depth"]))[i]
        s = score(model, x) + float(model.get("keep") or 0.0) * (np.arange(len(x)) < K)
        order = np.concatenate([np.argsort(-s, kind="stable"), np.arange(len(x), n)])
    seen: list[str] = []
    for j in order:
        for m in it["msgs"][j]:
            if m not in seen:
                seen.append(m)
        if len(seen) >= K:
            break
    gold = set(it["gold"]["turn"])
    return len(gold & set(seen[:K])) / len(gold)


def _choose(pools: Pools, progress: Callable[[str], None]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every setting of the grid judged on the held-out folds without the pipeline (_proxy, each
    fold's questions answered by the model fitted without it); the chosen one: the best pooled
    figure among those under which no fold loses against the fused order, else among those whose
    every fold loses at most one question (the shipping rule), else the best pooled figure."""
    folds = sorted({it["fold"] for it in pools.items})
    of = [it["fold"] for it in pools.items]
    base = np.asarray([_proxy(pools, i, None) for i in range(len(pools.items))])
    rows: list[dict[str, Any]] = []
    for depth in DEPTHS:
        for l2 in L2S:
            for weighing in WEIGHINGS:
                progress(f"depth {depth}, L2 {l2:g}, weighing {weighing}")
                models = {f: train(pools, depth, l2, weighing, only=[i for i, g in enumerate(of) if g != f])
                          for f in folds}
                for keep in KEEPS:
                    got = np.asarray([_proxy(pools, i, {**models[of[i]], "keep": keep}) for i in range(len(of))])
                    gain = {f: float(sum(got[i] - base[i] for i in range(len(of)) if of[i] == f)) for f in folds}
                    rows.append({"depth": depth, "l2": l2, "weighing": weighing, "keep": keep,
                                 "held_out": round(float(got.mean()), 5), "worst_fold": min(gain, key=gain.__getitem__),
                                 "worst_fold_questions": round(min(gain.values()), 3),
                                 "folds_losing": sum(1 for v in gain.values() if v < -1e-9)})
    clean = [r for r in rows if r["folds_losing"] == 0]
    safe = [r for r in rows if r["worst_fold_questions"] >= -1.0]
    best = max(clean or safe or rows, key=lambda r: (r["held_out"], r["keep"]))
    return ({"without": round(float(base.mean()), 5), **best}, rows)


def _summary(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Per file: every scheme's turn recall@K overall and per category, as `bench <dataset>` reports."""
    out: dict[str, Any] = {}
    for f in sorted({it["file"] for it in items}):
        mine = [{**it, "excluded": excluded(it)} for it in items if it["file"] == f]
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


def _answer(specs: list[dict[str, Any]], model_of: Callable[[str], Path], workers: int) -> list[dict[str, Any]]:
    """Answer every spec's questions, each fold's with its own model file."""
    runs: list[dict[str, Any]] = []
    for s in specs:
        for fold in sorted({q["fold"] for q in s["questions"]}):
            runs.append(dict(s, questions=[q for q in s["questions"] if q["fold"] == fold], model=str(model_of(fold)),
                             db=f"{s['db']}.{len(runs)}"))
    return [it for chunk in execute(runs, workers, None, None, fn=collect_container) for it in chunk]


def _save(model: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(model) + "\n", encoding="utf-8")
    return path


def run_rerank_fit(engine: MemoryEngine, data_paths: list[str], *, recipe: str = "offline", workers: int = 1,
                   embedder: str | None = None, extract: str = "none", limit: int | None = None,
                   progress: Callable[[float, str], None] | None = None) -> dict[str, Any]:
    """Fit the re-ranker on `data_paths`, cross-validate it; the `bench fit --model rerank` document."""
    from ..retrieve.recipes import get_recipe
    from .containers import cache_dir_for

    paths = dataset_files(data_paths)
    if "learned_rerank" not in get_recipe(recipe).off:
        raise BadInput(f"recipe {recipe!r} runs learned_rerank: the fit needs the ranking without it")
    emb = embedder or os.environ.get("MEMLENS_EMBEDDER") or "local"
    work = Path(str(engine.path) + ".bench") / "rerank"
    specs = _specs(paths, recipe, emb, extract, cache_dir_for(engine.path), work, limit)
    t0 = time.perf_counter()

    def note(share: float, what: str) -> None:
        if progress is not None:
            progress(share, what)

    note(0.0, "answering every question with the fused order")
    keep = _save(identity_model(), work / "identity.json")
    items = _answer(specs, lambda fold: keep, workers)
    folds = sorted({it["fold"] for it in items})
    pools = Pools(items)
    note(0.3, "choosing depth, L2, weighing and keep on the held-out folds")
    chosen, grid = _choose(pools, lambda what: note(0.3, what))
    setting = {k: chosen[k] for k in ("depth", "l2", "weighing", "keep")}
    full = train(pools, **setting)
    fold_models = {fold: train(pools, **setting, only=[i for i, it in enumerate(pools.items) if it["fold"] != fold])
                   for fold in folds}
    # `hold` (the first K places keep the fused order among them) changes no top K the proxy reads, so
    # it is judged through the pipeline: each fold answered both ways by the model fitted without it
    helds: dict[bool, list[dict[str, Any]]] = {}
    for n, hold in enumerate(HOLDS):
        note(0.45 + 0.15 * n, f"cross-validation (hold {hold}): each fold answered by the model fitted without it")
        paths_of = {fold: _save({**m, "hold": hold}, work / f"fold{i}.hold{int(hold)}.json")
                    for i, (fold, m) in enumerate(fold_models.items())}
        helds[hold] = _answer(specs, paths_of.__getitem__, workers)
    variants = {str(hold).lower(): {"pooled": _pooled(h), "by_file": _summary(h),
                                    "folds_losing": sum(1 for f in folds if _pooled([it for it in h if it["fold"] == f])
                                                        < _pooled([it for it in items if it["fold"] == f]) - 1e-9)}
                for hold, h in helds.items()}
    hold = max(HOLDS, key=lambda h: (variants[str(h).lower()]["folds_losing"] == 0, variants[str(h).lower()]["pooled"]))
    setting["hold"] = hold
    full["hold"] = hold
    held = helds[hold]
    note(0.75, "answering every question with the model fitted on every fold")
    path = _save(full, work / "full.json")
    dev = _answer(specs, lambda fold: path, workers)
    per_fold = {fold: {"questions": sum(1 for it in items if it["fold"] == fold and _usable(it)),
                       "without": _pooled([it for it in items if it["fold"] == fold]),
                       "held_out": _pooled([it for it in held if it["fold"] == fold]),
                       "dev_fitted": _pooled([it for it in dev if it["fold"] == fold])} for fold in folds}
    for r in per_fold.values():  # the held-out change in questions (every question weighing 1)
        r["held_out_questions"] = round((r["held_out"] - r["without"]) * r["questions"], 3)
    changed = _changed(items, held, dev)
    return {
        "files": [p.name for p in paths], "recipe": recipe, "embedder": emb, "extract": extract, "k": K,
        "objective": f"pairwise logistic regression (numpy), every question the benchmarks' own scoring counts, "
                     f"weighing: each {setting['weighing']} the same", **setting, "folds": per_fold,
        "chosen": chosen, "grid": grid, "hold_variants": variants, "changed": changed, "git_commit": git_commit(), "model": full,
        "weights": dict(zip(FEATURE_NAMES, full["weights"])),
        "without": {"by_file": _summary(items), "pooled": _pooled(items)},
        "dev_fitted": {"by_file": _summary(dev), "pooled": _pooled(dev)},
        "cross_validated": {"by_file": _summary(held), "pooled": _pooled(held)},
        "seconds": round(time.perf_counter() - t0, 1)}


def _changed(items: list[dict[str, Any]], held: list[dict[str, Any]], dev: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every usable question whose ours moved, held out or dev-fitted: where the stage wins and loses."""
    def ours(it: dict[str, Any]) -> float:
        return float(it["scores"]["memlens"].get(f"turn_evidence_recall@{K}", float("nan")))

    def key(it: dict[str, Any]) -> tuple[str, str]:
        return (it["file"], str(it["question_id"]))

    h = {key(it): ours(it) for it in held if _usable(it)}
    d = {key(it): ours(it) for it in dev if _usable(it)}
    out = []
    for it in items:
        if _usable(it) and (h.get(key(it)) != ours(it) or d.get(key(it)) != ours(it)):
            out.append({"file": Path(it["file"]).name, "question_id": it["question_id"], "fold": it["fold"],
                        "category": it["category"], "without": round(ours(it), 4),
                        "held_out": round(h.get(key(it), float("nan")), 4), "dev_fitted": round(d.get(key(it), float("nan")), 4)})
    return out


def write_model(report: dict[str, Any], path: str | os.PathLike[str] = MODEL_PATH) -> Path:
    """Store the model fitted on every fold at the shipped depth where the stage loads it."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {**report["model"], "files": report["files"], "git_commit": report.get("git_commit"),
           "without": report["without"], "dev_fitted": report["dev_fitted"],
           "cross_validated": report["cross_validated"],
           "command": "memlens bench fit --model rerank " + " ".join(f"--data {f}" for f in report["files"])}
    out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


def markdown(report: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        return "" if v is None else f"{v:.4f}"

    lines = ["# Learned re-ranker (learned_rerank): dev-fitted and held-out folds", "",
             f"- recipe `{report['recipe']}`, embedder `{report['embedder']}`, commit "
             f"`{(report.get('git_commit') or 'unknown')[:12]}`; files: {', '.join(report['files'])}",
             f"- {report['objective']}; L2 {report['l2']:g}; depth {report['depth']}; keep {report['keep']:g}, chosen on "
             f"the held-out folds without the pipeline (table below); hold {str(report['hold']).lower()}, chosen on "
             f"them through the pipeline (held-out pooled: " + ", ".join(
                 f"hold {h} {fmt(v['pooled'])}, {v['folds_losing']} folds losing"
                 for h, v in report["hold_variants"].items()) + ")", "",
             f"Pooled ours turn evidence recall@{report['k']} (every question weighing the same): without "
             f"{fmt(report['without']['pooled'])}, dev-fitted {fmt(report['dev_fitted']['pooled'])}, "
             f"cross-validated {fmt(report['cross_validated']['pooled'])}", "",
             "| file | scheme | category | without | dev-fitted | cross-validated |", "|---|---|---|---:|---:|---:|"]
    for f, schemes in report["without"]["by_file"].items():
        for scheme, v in schemes.items():
            dev = report["dev_fitted"]["by_file"][f][scheme]
            cv = report["cross_validated"]["by_file"][f][scheme]
            lines.append(f"| {f} | {scheme} | all | {fmt(v['overall'])} | {fmt(dev['overall'])} | {fmt(cv['overall'])} |")
            for cat, val in v["by_category"].items():
                if val is not None:
                    lines.append(f"| {f} | {scheme} | {cat} | {fmt(val)} | {fmt(dev['by_category'].get(cat))} | "
                                 f"{fmt(cv['by_category'].get(cat))} |")
    lines += ["", "## Held-out folds (pooled ours, each fold's questions)", "",
              "| fold | questions | without | model fitted without the fold | change in questions | dev-fitted |",
              "|---|---:|---:|---:|---:|---:|"]
    for fold, r in report["folds"].items():
        lines.append(f"| {fold} | {r['questions']} | {fmt(r['without'])} | {fmt(r['held_out'])} | "
                     f"{r['held_out_questions']:+.2f} | {fmt(r['dev_fitted'])} |")
    lines += ["", "## The grid, held out without the pipeline (the stage's order, before the current-truth rules)", "",
              f"Fused order: {fmt(report['chosen']['without'])}. Chosen: the best pooled figure among the settings under "
              "which no fold loses, else those whose every fold loses at most one question, else the best.", "",
              "| depth | L2 | weighing | keep | held out | folds losing | worst fold (questions) |",
              "|---:|---:|---|---:|---:|---:|---|"]
    for r in sorted(report["grid"], key=lambda r: -r["held_out"]):
        lines.append(f"| {r['depth']} | {r['l2']:g} | {r['weighing']} | {r['keep']:g} | {fmt(r['held_out'])} | "
                     f"{r['folds_losing']} | {r['worst_fold']} ({r['worst_fold_questions']:+.2f}) |")
    lines += ["", "## Weights (standardised features)", "", "| feature | weight |", "|---|---:|"]
    lines += [f"| {n} | {w:+.3f} |" for n, w in report["weights"].items()]
    return "\n".join(lines) + "\n"
