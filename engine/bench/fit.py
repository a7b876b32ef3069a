"""Fusion weights and prior strengths fitted on benchmark files, with cross-validated figures.

`memlens bench fit --data FILE [--data FILE ...]` answers every question of the files (their
containers built once, containers.py) and keeps, for every scored candidate, the raw value
behind each weighted part of its score (the channels' normalised scores and the priors' raw
values, Recall._score), the rest of its score, and its message ids.

The weights are fitted by coordinate ascent on the files' own metric (turn evidence recall@10 over
every question the benchmark's own scoring counts, runner.tuned_on),
re-ranking those stored candidates under trial weights: each weight in turn is scaled by a few
factors and a change is kept only when it gains; every question weighs the same, whichever file
it is in (with each file weighing the same, one question of a 14-question file outweighed seventy
of LoCoMo's, and a refit followed one question of LongMemEval S to LoCoMo cross-validated 0.818
against 0.832 pooled). The vector weight stays fixed and sets the scale. The search
ignores the pipeline's second-order effects (neighbour scores follow their seeds' fused scores;
caps and shared places), so the fit alternates with real answers under the new weights
(`--rounds`), and every figure it reports comes from the real pipeline.

Cross-validation holds out one fold at a time (LoCoMo: a conversation; LongMemEval: a question
type): weights fitted on everything else (one search over the hand-set weights' candidates)
answer the held-out fold's questions through the real pipeline, so the cross-validated figure is
what the fitting procedure does on data it did not see. `--write` stores the weights fitted on
everything in resources/recipes/fitted.json, which the offline and default recipes load.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import BadInput
from ..retrieve.recipes import FITTED, Recipe, overrides_for, recipe_weights
from . import datasets as ds
from .ablate import DEFAULT_FOLDS, DEFAULT_METRIC, ShouldStop, _fold_of
from .runner import (
    DEFAULT_KS,
    container_engine,
    containers_for,
    execute,
    git_commit,
    limit_questions,
    question_metrics,
    tuned_on,
)

if TYPE_CHECKING:
    from ..memory import MemoryEngine

STEPS = (0.0, 0.5, 0.75, 1.25, 1.5, 2.0)  # multipliers tried per weight and pass
FROM_ZERO = (0.05, 0.1, 0.2, 0.4)  # values tried for a weight at zero


def fit_container(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Answer a container's questions with spec["overrides"]; per question its metrics and, for
    every scored candidate, (x: fitted features, offset: the rest of its score, message ids)."""
    names = [n for n, _ in FITTED]
    out: list[dict[str, Any]] = []
    qs = spec["questions"]
    with container_engine(spec, qs) as (engine, scope, vectors):
        for q, qvec in zip(qs, vectors):
            res = engine.recall(q["question"], scope=scope, k=max(DEFAULT_KS), recipe=spec["recipe"], origin="bench",
                                now=q["now"], persist=False, query_vector=qvec, **spec["overrides"])
            metrics = question_metrics(engine, scope, spec["format"], res.ordered_ids, q["gold"], list(DEFAULT_KS))
            scored = [c for c in res.trace.candidates.values() if "x" in c.meta]
            msgs = engine.store.message_ids(scope, [c.memory_id for c in scored])
            rows = []
            w = spec["current"]
            for c in scored:
                feats = {**c.meta.get("channel_x", {}), **c.meta["x"]}
                x = [float(feats.get(n, 0.0)) for n in names]
                fitted_part = sum(w[n] * v for n, v in zip(names, x))
                rows.append((x, c.score - fitted_part, msgs.get(c.memory_id, [])))
            out.append({"container": spec["container"], "question_id": q["question_id"], "category": q["category"],
                        "fold": q["fold"], "file": spec["file"], "excluded": q["excluded"], "gold": q["gold"],
                        "metrics": metrics, "rows": rows})
    Path(spec["db"]).unlink(missing_ok=True)
    return out


def _usable(it: dict[str, Any]) -> bool:
    return tuned_on(it) and bool(it["gold"].get("turn"))


def _compiled(items: list[dict[str, Any]], files: list[str]) -> list[tuple[Any, ...]]:
    """Per usable question: (feature matrix, offsets, message ids per row, gold turns, weight)."""
    usable = sum(1 for it in items if it["file"] in files and _usable(it))
    out = []
    for it in items:
        if not _usable(it) or not it["rows"]:
            continue
        x = np.asarray([r[0] for r in it["rows"]], dtype=float)
        off = np.asarray([r[1] for r in it["rows"]], dtype=float)
        out.append((x, off, [r[2] for r in it["rows"]], set(it["gold"]["turn"]),
                    1.0 / usable))
    return out


def offline_metric(compiled: list[tuple[Any, ...]], w: np.ndarray, k: int = 10) -> float:
    """Turn evidence recall@k of every question re-ranked under weights `w` (see the module doc)."""
    total = 0.0
    for x, off, msgs, gold, weight in compiled:
        order = np.argsort(-(x @ w + off), kind="stable")
        seen: dict[str, None] = {}
        for i in order:
            for m in msgs[i]:
                seen.setdefault(m)
            if len(seen) >= k:
                break
        total += weight * len(gold & set(list(seen)[:k])) / len(gold)
    return total


def fit_weights(items: list[dict[str, Any]], files: list[str], start: dict[str, float]) -> dict[str, float]:
    """Coordinate ascent on offline_metric from `start` (see the module doc)."""
    names = [n for n, _ in FITTED]
    compiled = _compiled(items, files)
    if not compiled:
        raise BadInput("no question with gold evidence to fit on")
    w = np.array([start[n] for n in names], dtype=float)
    best = offline_metric(compiled, w)
    for _ in range(6):
        improved = False
        for j, name in enumerate(names):
            if name == "vector":
                continue
            for value in ([w[j] * f for f in STEPS] if w[j] > 0 else FROM_ZERO):
                trial = w.copy()
                trial[j] = value
                got = offline_metric(compiled, trial)
                if got > best + 1e-6:
                    best, w, improved = got, trial, True
        if not improved:
            break
    return {n: round(float(v), 6) for n, v in zip(names, w)}


def _specs(paths: list[Path], folds: str | None, recipe: str, emb_name: str, extract: str, cache: Path,
           work: Path, limit: int | None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    specs: list[dict[str, Any]] = []
    metric_of: dict[str, str] = {}
    for path in paths:
        loaded, raw = ds.read_dataset(path)
        if loaded.name == "updates":  # its metric is the order of current and old values, not recall
            raise BadInput(f"{path}: bench fit fits recall weights on LoCoMo, LongMemEval and ConvoMem; "
                           "the updates benchmark measures current truth (see bench ablate)")
        kind = folds or DEFAULT_FOLDS.get(loaded.name, "type")
        metric_of[str(path)] = DEFAULT_METRIC.get(loaded.name, "turn_evidence_recall@10")
        file_specs = limit_questions(containers_for(loaded, raw), limit)
        for s in file_specs:
            for q in s["questions"]:
                q["fold"] = f"{path.stem}:{_fold_of(loaded.name, kind, s['container'], q['category'])}"
            s.update({"file": str(path), "recipe": recipe, "embedder": emb_name, "extract": extract,
                      "cache": str(cache), "db": str(work / f"c{len(specs)}.db")})
            specs.append(s)
    return specs, metric_of


def _answer(specs: list[dict[str, Any]], weights: dict[str, float], recipe_obj: Recipe, workers: int,
            should_stop: ShouldStop | None) -> list[dict[str, Any]]:
    for s in specs:
        s["overrides"] = overrides_for(weights, recipe_obj)
        s["current"] = weights
    items: list[dict[str, Any]] = []
    for chunk in execute(specs, workers, None, should_stop, fn=fit_container):
        items.extend(chunk)
    return items


def _score(items: list[dict[str, Any]], metric_of: dict[str, str]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for f, metric in metric_of.items():
        level = metric.split("_", 1)[0]
        vals = [it["metrics"].get(metric, 0.0) for it in items
                if it["file"] == f and tuned_on(it) and it["gold"].get(level)]
        out[f] = sum(vals) / len(vals) if vals else None
    return out



def dataset_files(data_paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The --data files of a fit, each an existing file (BadInput otherwise, before any work)."""
    if not data_paths:
        raise BadInput("bench fit needs at least one --data FILE")
    paths = [Path(p) for p in data_paths]
    for p in paths:
        if not p.is_file():
            raise BadInput(f"{p}: no such dataset file")
    return paths

def run_fit(engine: MemoryEngine, data_paths: list[str], *, recipe: str = "offline", folds: str | None = None, workers: int = 1,
            embedder: str | None = None, extract: str = "none", rounds: int = 2, limit: int | None = None,
            cross_validate: bool = True, progress: Callable[[float, str], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Fit the weights on `data_paths` and cross-validate them; the `bench fit --json` document."""
    from ..retrieve.recipes import get_recipe
    from .containers import cache_dir_for

    paths = dataset_files(data_paths)
    if rounds < 1:
        raise BadInput("--rounds must be at least 1")
    recipe_obj = get_recipe(recipe)
    emb_name = embedder or os.environ.get("MEMLENS_EMBEDDER") or "local"
    work = Path(str(engine.path) + ".bench") / "fit"
    specs, metric_of = _specs(paths, folds, recipe, emb_name, extract, cache_dir_for(engine.path), work, limit)
    files = [str(p) for p in paths]
    t0 = time.perf_counter()
    hand = recipe_weights(get_recipe("hand"))  # start from, and pull towards, the weights as set by hand
    steps = 1 + rounds + (1 if cross_validate else 0)

    def note(i: float, what: str) -> None:
        if progress is not None:
            progress(min(1.0, i / steps), what)

    note(0, "answering with the hand-set weights")
    items = base_items = _answer(specs, hand, recipe_obj, workers, should_stop)
    before = _score(items, metric_of)
    weights = hand
    history = [{"round": 0, "weights": hand, "dev": before}]
    for rnd in range(1, rounds + 1):
        weights = fit_weights(items, files, weights)
        note(rnd, f"round {rnd}: answering with the fitted weights")
        items = _answer(specs, weights, recipe_obj, workers, should_stop)
        history.append({"round": rnd, "weights": weights, "dev": _score(items, metric_of)})
    report: dict[str, Any] = {
        "files": [{"path": f, "metric": metric_of[f]} for f in files], "recipe": recipe, "embedder": emb_name,
        "extract": extract, "hand": hand, "fitted": weights, "dev_hand": before, "dev_fitted": history[-1]["dev"],
        "rounds": history, "git_commit": git_commit()}
    if cross_validate:
        report["cross_validated"] = _cross_validate(base_items, specs, files, metric_of, hand, recipe_obj, workers,
                                                    should_stop, rounds, note)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    return report


def _cross_validate(base_items: list[dict[str, Any]], specs: list[dict[str, Any]], files: list[str],
                    metric_of: dict[str, str], hand: dict[str, float], recipe_obj: Recipe, workers: int,
                    should_stop: ShouldStop | None, rounds: int, note: Callable[[float, str], None]) -> dict[str, Any]:
    """Leave one fold out: weights fitted without it answer its questions through the pipeline.

    The held-out fit searches from the hand-set weights on the other folds' candidates as the
    hand-set weights ranked them (no answering again in between: with 17 folds that would cost
    17 passes over every file), then answers the held-out fold with the result."""
    folds = sorted({it["fold"] for it in base_items})
    held: list[dict[str, Any]] = []
    per_fold: dict[str, Any] = {}
    for i, fold in enumerate(folds):
        note(1 + rounds + i / max(1, len(folds)), f"cross-validation: fold {fold}")
        train = [it for it in base_items if it["fold"] != fold]
        weights = fit_weights(train, [f for f in files if any(it["file"] == f for it in train)], hand)
        test_specs = [dict(s, questions=[q for q in s["questions"] if q["fold"] == fold]) for s in specs]
        test_specs = [s for s in test_specs if s["questions"]]
        got = _answer(test_specs, weights, recipe_obj, workers, should_stop)
        held.extend(got)
        per_fold[fold] = {"weights": weights, "score": _score(got, {s["file"]: metric_of[s["file"]]
                                                                  for s in test_specs})}
    return {"by_file": _score(held, metric_of), "folds": per_fold}


def write_weights(report: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Store the weights fitted on everything where the recipes load them."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    def name(p: str) -> str:  # where the files lie here says nothing
        return Path(p).name

    def by_name(d: dict[str, Any] | None) -> dict[str, Any]:
        return {name(k): v for k, v in (d or {}).items()}

    doc = {"fitted": report["fitted"], "hand": report["hand"],
           "files": [{"file": name(f["path"]), "metric": f["metric"]} for f in report["files"]],
           "dev_hand": by_name(report["dev_hand"]), "dev_fitted": by_name(report["dev_fitted"]),
           "cross_validated": by_name((report.get("cross_validated") or {}).get("by_file")),
           "git_commit": report.get("git_commit"),
           "command": "memlens bench fit " + " ".join(f"--data {Path(f['path']).name}" for f in report["files"])}
    out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


def markdown(report: dict[str, Any]) -> str:
    names = [n for n, _ in FITTED]
    lines = ["# Fitted retrieval weights", "",
             f"- recipe `{report['recipe']}`, embedder `{report['embedder']}`, extraction `{report['extract']}`, "
             f"commit `{(report.get('git_commit') or 'unknown')[:12]}`", "",
             "| file | metric | hand-set | fitted (dev) | fitted, cross-validated |", "|---|---|---:|---:|---:|"]
    cv = (report.get("cross_validated") or {}).get("by_file") or {}

    def fmt(v: float | None) -> str:
        return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"

    for f in report["files"]:
        p = f["path"]
        lines.append(f"| {Path(p).name} | {f['metric']} | {fmt(report['dev_hand'].get(p))} | "
                     f"{fmt(report['dev_fitted'].get(p))} | {fmt(cv.get(p))} |")
    lines += ["", "| weight | hand-set | fitted |", "|---|---:|---:|"]
    for n in names:
        lines.append(f"| {n} | {report['hand'][n]:.4f} | {report['fitted'][n]:.4f} |")
    folds = (report.get("cross_validated") or {}).get("folds") or {}
    if folds:
        lines += ["", "## Held-out folds", "", "| fold | " + " | ".join(names) + " | score |",
                  "|---|" + "---:|" * (len(names) + 1)]
        for fold, r in folds.items():
            score = next(iter(r["score"].values()), None)
            lines.append(f"| {fold} | " + " | ".join(f"{r['weights'][n]:.3f}" for n in names) + f" | {fmt(score)} |")
    return "\n".join(lines) + "\n"
