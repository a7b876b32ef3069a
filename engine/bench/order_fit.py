"""learned_order's fit and its held-out folds: `memlens bench fit --model order`.

Every dev question of the updates file is answered once with the stage on and a model that never
fires (threshold above 1: the ranking is the one without the stage), and the stage's pairs are read
back from the trace: each (earlier, later) pair's feature row, computed by the stage itself
(engine/retrieve/order.py), and the message ids of both turns.

Labels, from the dev scenarios only: for a current question, a pair whose earlier turn is stale and
whose later turn is gold is 1 (the later states the value that now replaces the earlier's); every
other pair of a current or keep question is 0 (earlier gold, later stale: a plan, visit, someone
else's value, a hypothetical, a take-back, a kept claim; and pairs of unrelated turns). History
questions give no pair: the stage runs under current intent only.

The model is logistic regression with a bias, fitted by Newton's method in numpy (the small Newton
loop of engine/bench/rerank_fit.py, copied: that module's fit is pairwise and has no bias), each
question weighing the same, L2-regularised towards zero on standardised features.

Folds: leave one dev batch out (dev:tidy, dev:w2, dev:w3, dev:w4). A model fitted without a batch
answers that batch's questions through the real pipeline (Recipe.order_model names its file), and
the report gives per fold current_first@1, history@3 and false_supersession with and without the
stage. The heldout part is answered by the model fitted on all dev, and reported as aggregates only;
the blind part is never run. `--write` stores the model fitted on all dev in
resources/recipes/order.json, with the files, commit and fold figures.
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
from ..retrieve.order import FEATURE_NAMES, MODEL_PATH
from . import datasets as ds
from .runner import container_engine, containers_for, execute, git_commit, truth_metrics, turn_ranking

if TYPE_CHECKING:
    from ..memory import MemoryEngine

DEPTH = 10  # the pairs read: turns among the first DEPTH candidates (k, the reader's view)
L2 = 3.0
# A pair whose earlier turn still holds (gold) and whose later one does not weighs HARM times a
# plain negative: firing on it is a false supersession, hiding a value that holds. The threshold is
# then the one of THRESHOLDS that fires on most replacements less HARM times the harmful pairs, on
# the training pairs themselves (each fold's own).
HARM = 10.0
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
K = 10
METRICS = ("current_first@1", "history@3", "false_supersession")


def never_model(depth: int = DEPTH) -> dict[str, Any]:
    """A model that reads every pair and moves none (threshold above any probability)."""
    f = len(FEATURE_NAMES)
    return {"features": list(FEATURE_NAMES), "depth": depth, "mean": [0.0] * f, "scale": [1.0] * f,
            "weights": [0.0] * f, "bias": 0.0, "threshold": 2.0}


def collect_container(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Answer a container's questions with the stage on and spec["model"]; per question its current
    truth metrics and the stage's pairs (rows, both turns' message ids) (worker process)."""
    out: list[dict[str, Any]] = []
    qs = spec["questions"]
    with container_engine(spec, qs) as (engine, scope, vectors):
        for q, qvec in zip(qs, vectors):
            res = engine.recall(q["question"], scope=scope, k=K, recipe=spec["recipe"], origin="bench", now=q["now"],
                                as_of=q.get("as_of"), persist=False, query_vector=qvec, on=("learned_order",),
                                order_model=spec["model"])
            rows = [(e, c.memory_id, row) for c in res.trace.candidates.values() for e, row in c.meta.get("order_rows", ())]
            msgs = engine.store.message_ids(scope, sorted({m for e, ll, _ in rows for m in (e, ll)}))
            ranking = turn_ranking(engine, scope, res.ordered_ids)
            out.append({
                "fold": q["fold"], "question_id": q["question_id"], "category": q["category"],
                "type": q["update_type"], "gold": q["gold"]["turn"], "stale": q["stale"],
                "pairs": [[msgs.get(e, []), msgs.get(ll, [])] for e, ll, _ in rows],
                "x": [row.tolist() for _, _, row in rows],
                "metrics": truth_metrics(engine, scope, q, res, ranking),
            })
    Path(spec["db"]).unlink(missing_ok=True)
    return out


def harmful(it: dict[str, Any]) -> list[bool]:
    """The pairs whose earlier turn still holds and whose later one does not (see HARM)."""
    gold = set(it["gold"])
    return [bool(gold & set(e)) and not gold & set(ll) for e, ll in it["pairs"]]


def labels(it: dict[str, Any]) -> list[float]:
    """1 for (earlier stale, later gold) of a current question, else 0 (see the module doc)."""
    gold, stale = set(it["gold"]), set(it["stale"])
    if it["type"] != "current":
        return [0.0] * len(it["pairs"])
    return [1.0 if stale & set(e) and gold & set(ll) and not gold & set(e) else 0.0 for e, ll in it["pairs"]]


def _usable(it: dict[str, Any]) -> bool:
    return it["type"] in ("current", "keep") and bool(it["x"]) and it["fold"].startswith("dev:")


def train(items: list[dict[str, Any]], depth: int = DEPTH, l2: float = L2, threshold: float | None = None
          ) -> dict[str, Any]:
    """Logistic regression on the items' pairs, each question weighing the same."""
    used = [it for it in items if _usable(it)]
    if not used:
        raise BadInput("no current or keep question with a pair of statements to fit on")
    x = np.vstack([np.asarray(it["x"], dtype=float) for it in used])
    y = np.concatenate([np.asarray(labels(it)) for it in used])
    harm = np.concatenate([np.asarray(harmful(it), dtype=bool) for it in used])
    wt = np.concatenate([np.full(len(it["x"]), 1.0 / len(it["x"])) for it in used]) * np.where(harm, HARM, 1.0)
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd < 1e-6] = 1.0
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    f = z.shape[1]
    reg = l2 * np.eye(f)
    reg[-1, -1] = 1e-6  # the bias is not pulled to 0
    w = np.zeros(f)
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -30, 30)))
        grad = z.T @ (wt * (p - y)) + reg @ w
        hess = z.T @ (z * (wt * p * (1.0 - p))[:, None]) + reg
        step = np.linalg.solve(hess, grad)
        w = w - step
        if float(np.abs(step).max()) < 1e-7:
            break
    if threshold is None:
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -30, 30)))
        threshold = max(THRESHOLDS, key=lambda t: (float(((p >= t) & (y > 0)).sum() - HARM * ((p >= t) & harm).sum()), t))
    return {"features": list(FEATURE_NAMES), "depth": depth, "mean": mu.round(6).tolist(),
            "scale": sd.round(6).tolist(), "weights": w[:-1].round(6).tolist(), "bias": round(float(w[-1]), 6),
            "threshold": threshold, "harm": HARM, "l2": l2, "questions": len(used), "pairs": int(len(y)),
            "positives": int(y.sum())}


def _means(items: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": len(items)}
    for m in METRICS:
        vals = [it["metrics"][m] for it in items if m in it["metrics"]]
        out[m] = round(sum(vals) / len(vals), 4) if vals else None
    return out


def _specs(path: Path, recipe: str, emb: str, extract: str, cache: Path, work: Path) -> list[dict[str, Any]]:
    loaded, raw = ds.read_dataset(path)
    if not isinstance(loaded, ds.UpdatesDataset):
        raise BadInput(f"{path}: learned_order is fitted on the updates benchmark's file")
    batch_of = loaded.dev_batches()
    split_of = {sc.scenario_id: sc.split for sc in loaded.scenarios}
    specs: list[dict[str, Any]] = []
    for s in containers_for(loaded, raw):
        split = split_of.get(s["container"])
        if split == "dev":
            fold = ds.dev_batch_whole(batch_of.get(s["container"], "dev:tidy"))
        elif split == "heldout":
            fold = "heldout"
        else:
            continue  # never the blind part
        for q in s["questions"]:
            q["fold"] = fold
        s.update({"file": str(path), "dataset": "updates", "recipe": recipe, "embedder": emb, "extract": extract,
                  "cache": str(cache), "db": str(work / f"c{len(specs)}.db"), "fold": fold})
        specs.append(s)
    return specs


def _answer(specs: list[dict[str, Any]], model_of: Callable[[str], Path | None], workers: int) -> list[dict[str, Any]]:
    runs = [dict(s, model=str(path), db=f"{s['db']}.{i}") for i, s in enumerate(specs)
            if (path := model_of(s["fold"])) is not None]
    return [it for chunk in execute(runs, workers, None, None, fn=collect_container) for it in chunk]


def _save(model: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(model) + "\n", encoding="utf-8")
    return path


def run_order_fit(engine: MemoryEngine, data_path: str, *, recipe: str = "offline", workers: int = 1,
                  embedder: str | None = None, extract: str | None = None,
                  progress: Callable[[float, str], None] | None = None) -> dict[str, Any]:
    """Fit learned_order on the dev scenarios, judge it on leave-one-batch-out folds; the report."""
    from ..retrieve.recipes import get_recipe
    from .containers import cache_dir_for

    if "learned_order" not in get_recipe(recipe).off:
        raise BadInput(f"recipe {recipe!r} runs learned_order: the fit needs the ranking without it")
    emb = embedder or os.environ.get("MEMLENS_EMBEDDER") or "local"
    work = Path(str(engine.path) + ".bench") / "order"
    extract = extract or ds.default_extract("updates")  # as `bench updates` ingests: offline facts
    specs = _specs(Path(data_path), recipe, emb, extract, cache_dir_for(engine.path), work)
    t0 = time.perf_counter()

    def note(share: float, what: str) -> None:
        if progress is not None:
            progress(share, what)

    note(0.0, "answering every question with the stage reading pairs and moving none")
    never = _save(never_model(), work / "never.json")
    items = _answer(specs, lambda fold: never, workers)
    dev_folds = sorted({it["fold"] for it in items if it["fold"].startswith("dev:")})
    full = train(items)
    models: dict[str, Path | None] = {fold: _save(train([it for it in items if it["fold"] != fold]), work / f"fold{i}.json")
                                      for i, fold in enumerate(dev_folds)}
    models["heldout"] = _save(full, work / "full.json")
    note(0.5, "each dev batch answered by the model fitted without it; heldout by the model fitted on all dev")
    held = _answer(specs, models.__getitem__, workers)
    folds = {fold: {"without": _means([it for it in items if it["fold"] == fold]),
                    "with": _means([it for it in held if it["fold"] == fold])} for fold in [*dev_folds, "heldout"]}
    natural = [f for f in dev_folds if f != "dev:tidy"]
    pooled = {"without": _means([it for it in items if it["fold"] in natural]),
              "with": _means([it for it in held if it["fold"] in natural])}
    return {"file": Path(data_path).name, "recipe": recipe, "embedder": emb, "git_commit": git_commit(),
            "objective": "logistic regression (numpy Newton), pairs of current and keep dev questions, each question "
                         "weighing the same", "l2": L2, "harm": HARM, "threshold": full["threshold"],
            "depth": DEPTH, "extract": extract,
            "folds": folds, "natural_pooled": pooled, "model": full,
            "weights": dict(zip(FEATURE_NAMES, full["weights"])), "seconds": round(time.perf_counter() - t0, 1)}


def write_model(report: dict[str, Any], path: str | os.PathLike[str] = MODEL_PATH) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {**report["model"], "files": [report["file"]], "git_commit": report.get("git_commit"),
           "folds": report["folds"], "natural_pooled": report["natural_pooled"],
           "command": f"memlens bench fit --model order --data {report['file']}"}
    out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


def markdown(report: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        return "" if v is None else f"{v:.3f}"

    lines = ["# learned_order: leave-one-dev-batch-out folds", "",
             f"- recipe `{report['recipe']}`, embedder `{report['embedder']}`, commit "
             f"`{(report.get('git_commit') or 'unknown')[:12]}`; file {report['file']}",
             f"- extract `{report['extract']}`; {report['objective']}; L2 {report['l2']}; harm {report['harm']}; "
             f"threshold {report['threshold']}; depth {report['depth']}; "
             f"{report['model']['pairs']} pairs, {report['model']['positives']} positive", "",
             "| fold | questions | current_first@1 without | with | history@3 without | with | "
             "false_supersession without | with |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    rows = [*report["folds"].items(), ("natural pooled (w2+w3+w4)", report["natural_pooled"])]
    for fold, r in rows:
        a, b = r["without"], r["with"]
        lines.append(f"| {fold} | {a['questions']} | " + " | ".join(f"{fmt(a[m])} | {fmt(b[m])}" for m in METRICS) + " |")
    lines += ["", "heldout: answered by the model fitted on all dev (aggregate only).", "",
              "## Weights (standardised features)", "", "| feature | weight |", "|---|---:|"]
    lines += [f"| {n} | {w:+.3f} |" for n, w in report["weights"].items()]
    lines.append(f"| bias | {report['model']['bias']:+.3f} |")
    return "\n".join(lines) + "\n"
