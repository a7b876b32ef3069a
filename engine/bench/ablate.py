"""Feature ablation on folds: what each named retrieval feature contributes where it was not tuned.

`memlens bench ablate --data FILE` builds (or reuses, containers.py) every container of a
benchmark file once, then answers every question under the baseline recipe and under the
baseline with each named feature (engine/retrieve/intent.py FEATURES) switched off. The query
vector is computed once per question, so a variant costs only its recall.

Folds: LoCoMo's are its conversations, LongMemEval's its question types (`--folds conversation`
or `--folds type`; the default is the file's natural one). A feature's contribution on a fold is
the baseline's mean metric minus the mean with the feature off (the other way round for a metric
where less is better, LOWER_IS_BETTER: `--metric false_supersession`). Its held-out contribution is
leave-one-fold-out: for each fold, the feature is kept unless it hurts on the other folds, and
then credited with what it does on the held-out fold. A feature that helps on average but whose
held-out contribution is negative is fitted to particular folds, not a mechanism.

The cross-validated figure runs, for each fold, the recipe with every feature switched off that
hurt on the other folds, and scores it on that fold only; beside the dev figure (all
features, all folds) it says how much of the dev figure is selection on the dev data.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadInput
from ..files import private_dir, write_private
from . import datasets as ds
from .metrics import LEVELS
from .runner import (
    DEFAULT_KS,
    container_engine,
    containers_for,
    execute,
    git_commit,
    limit_questions,
    question_metrics,
    truth_metrics,
    tuned_on,
    turn_ranking,
    without_blind,
)

if TYPE_CHECKING:

    from ..memory import MemoryEngine

ShouldStop = Callable[[], bool]

# memlens bench updates: current truth (update_metrics), on its halves (tuned on dev, held-out the other)
DEFAULT_METRIC = {"locomo": "turn_evidence_recall@10", "longmemeval": "turn_evidence_recall@10",
                  "convomem": "turn_evidence_recall@10", "updates": "current_first@1"}
DEFAULT_FOLDS = {"locomo": "conversation", "longmemeval": "type", "convomem": "type", "updates": "half"}
SECONDARY = ("turn_evidence_recall@5", "turn_recall_all@10", "session_recall_all@5", "turn_mrr")
# Features the offline recipe cannot exercise (no LLM stages here): listed, never measured as zero.

# The variant with every chosen feature on. Variants are keyed by the feature switched off, and one
# feature is named "baseline" (the popularity channel): under that key its variant replaced the
# all-on one, so every ablation compared against the recipe without that channel and measured the
# channel itself as 0. No feature's name has a space.
BASELINE = "all on"
# Metrics where less is better: a feature helps when it lowers them (its contribution is then
# positive, as for every other metric), and a sweep picks the value that scores lowest.
LOWER_IS_BETTER = frozenset({"false_supersession"})


def _gain(metric: str) -> float:
    """+1 where more of `metric` is better, -1 where less is (LOWER_IS_BETTER)."""
    return -1.0 if metric in LOWER_IS_BETTER else 1.0


def ablate_container(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Answer a container's questions under every variant in spec["variants"] ({name: off}, or
    {name: {"off": off, "set": recipe settings}} for a sweep).
    Runs in a worker process. One item per question: {"question_id", "category", "fold",
    "excluded", "gold", "variants": {name: metrics}}."""
    questions = spec["questions"]
    out: list[dict[str, Any]] = []
    with container_engine(spec, questions) as (engine, scope, vectors):
        for q, qvec in zip(questions, vectors):
            item = {"container": spec["container"], "question_id": q["question_id"], "category": q["category"],
                    "fold": q["fold"], "excluded": q["excluded"], "gold": q["gold"], "variants": {}}
            for name, variant in spec["variants"].items():
                # a variant is the features off, or (a sweep) {"off": [...], "set": {setting: value}}
                off, settings = (variant["off"], variant["set"]) if isinstance(variant, dict) else (variant, {})
                res = engine.recall(q["question"], scope=scope, k=max(spec["ks"]), recipe=spec["recipe"],
                                    origin="bench", now=q["now"], as_of=q.get("as_of"), persist=False,
                                    query_vector=qvec, off=tuple(off), **settings)
                ranking = turn_ranking(engine, scope, res.ordered_ids)
                item["variants"][name] = question_metrics(engine, scope, spec["format"], res.ordered_ids, q["gold"],
                                                          spec["ks"], ranking) | truth_metrics(engine, scope, q, res,
                                                                                               ranking)
            out.append(item)
    Path(spec["db"]).unlink(missing_ok=True)
    return out


def _fold_of(dataset: str, folds: str, container: str, category: str, batches: dict[str, str] | None = None) -> str:
    if folds == "conversation":
        return container
    if folds == "type":
        return str(category)
    if folds == "half" and dataset == "updates":  # its categories are "<half>:<question type>"
        return str(category).split(":", 1)[0]
    if folds == "batch" and dataset == "updates":  # the dev batches (UpdatesDataset.dev_batches), else the part
        return (batches or {}).get(container) or str(category).split(":", 1)[0]
    raise BadInput(f"unknown --folds {folds!r} (conversation or type; half or batch for updates)")


def _scored(items: list[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    """The questions a metric scores: those with gold ids at its level, or (current truth) those
    it was computed for."""
    level = metric.split("_", 1)[0]
    if level in LEVELS:
        return [it for it in items if tuned_on(it) and it["gold"].get(level)]
    return [it for it in items if tuned_on(it) and any(metric in v for v in it["variants"].values())]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarise_ablation(items: list[dict[str, Any]], features: list[str], metric: str) -> dict[str, Any]:
    """Per-fold and held-out contributions of each feature (see the module doc)."""
    scored = _scored(items, metric)
    folds = sorted({it["fold"] for it in scored})
    by_fold = {f: [it for it in scored if it["fold"] == f] for f in folds}

    def mean_of(group: list[dict[str, Any]], variant: str, key: str = metric) -> float:
        vals = [it["variants"][variant].get(key, 0.0) for it in group]
        return sum(vals) / len(vals) if vals else 0.0

    base = {f: mean_of(g, BASELINE) for f, g in by_fold.items()}
    n = {f: len(g) for f, g in by_fold.items()}
    total = sum(n.values()) or 1
    report: dict[str, Any] = {"metric": metric, "questions": total, "folds": {f: n[f] for f in folds},
                              "baseline": {"overall": mean_of(scored, BASELINE), "by_fold": base,
                                           **{k: mean_of(scored, BASELINE, k) for k in SECONDARY
                                              if any(k in it["variants"][BASELINE] for it in scored)}},
                              "features": {}}
    for feat in features:
        if not scored or feat not in scored[0]["variants"]:
            continue
        delta = {f: _gain(metric) * (base[f] - mean_of(by_fold[f], feat)) + 0.0 for f in folds}  # no -0.0
        overall = sum(delta[f] * n[f] for f in folds) / total
        held, kept_on = 0.0, []
        for f in folds:
            rest = sum(n[g] for g in folds if g != f)
            train = sum(delta[g] * n[g] for g in folds if g != f) / rest if rest else 0.0
            if train >= 0:  # kept unless the other folds say it hurts (no evidence keeps the default)
                held += delta[f] * n[f]
                kept_on.append(f)
        held /= total
        effect = any(abs(d) > 1e-12 for d in delta.values())
        changed = sum(1 for it in scored if abs(it["variants"][feat].get(metric, 0.0)
                                                 - it["variants"][BASELINE].get(metric, 0.0)) > 1e-12)
        if not effect:
            verdict = "no effect on this data"
        elif held > 1e-12 and overall > 0:
            verdict = "helps on held-out folds"
        elif overall < 0 or held < -1e-12:
            verdict = "hurts on held-out folds"
        else:
            verdict = "no held-out gain"
        report["features"][feat] = {
            "contribution": overall, "by_fold": delta, "held_out": held, "kept_in_folds": kept_on,
            "folds_helped": sum(1 for d in delta.values() if d > 1e-12),
            "folds_hurt": sum(1 for d in delta.values() if d < -1e-12),
            "questions_changed": changed, "verdict": verdict,
            **{f"{k}_contribution": mean_of(scored, BASELINE, k) - mean_of(scored, feat, k) for k in SECONDARY
               if any(k in it["variants"][BASELINE] for it in scored)}}
    return report


def cv_selection(report: dict[str, Any]) -> dict[str, list[str]]:
    """For each fold, the features switched off when it is held out: those that hurt on the
    other folds (a feature the other folds say nothing about keeps its default, on)."""
    folds = list(report["folds"])
    n = report["folds"]
    out: dict[str, list[str]] = {}
    for f in folds:
        off = []
        for feat, r in report["features"].items():
            if r["verdict"] == "no effect on this data":
                continue
            rest = sum(n[g] for g in folds if g != f)
            train = sum(r["by_fold"][g] * n[g] for g in folds if g != f) / rest if rest else 0.0
            if train < 0:
                off.append(feat)
        out[f] = sorted(off)
    return out


def run_ablation(engine: MemoryEngine, data_path: str | os.PathLike[str], *, features: list[str] | None = None,
                 folds: str | None = None, metric: str | None = None, recipe: str = "offline", workers: int = 1,
                 embedder: str | None = None, extract: str | None = None, limit: int | None = None,
                 fresh: bool = False, on: list[str] | None = None, progress: Callable[[float, str], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Ablate every feature (or `features`) on one benchmark file; the `bench ablate --json` document.
    `on`: features the recipe leaves off, switched on in the baseline (and so measured)."""
    run = _Ablation(engine, data_path, features=features, folds=folds, metric=metric, recipe=recipe,
                    embedder=embedder, extract=extract, limit=limit, fresh=fresh, on=on)
    t0 = time.perf_counter()
    items = _run(run.specs, workers, should_stop, progress, "ablation")
    report = summarise_ablation(items, run.chosen, run.metric)
    report["cross_validated"] = run.cross_validate(cv_selection(report), workers, should_stop, progress)
    return run.describe(report, time.perf_counter() - t0)


def run_pooled_ablation(engine: MemoryEngine, data_paths: list[str], *, features: list[str] | None = None,
                        metric: str | None = None, recipe: str = "offline", workers: int = 1,
                        embedder: str | None = None, extract: str | None = None, limit: int | None = None,
                        fresh: bool = False, on: list[str] | None = None,
                        progress: Callable[[float, str], None] | None = None,
                        should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Ablate on several files at once: each file's own report (its folds, its cross-validation),
    and a pooled one whose folds are every file's folds ("<file>:<fold>") and in which every
    question weighs the same, whichever file it is in (as `bench fit` weighs them). A feature is
    kept for a held-out fold unless the other folds of all the files say it hurts, so a rule is
    judged on all the development data, not on the 8 questions of one LongMemEval type."""
    if len(data_paths) < 2:
        raise BadInput("a pooled ablation needs two or more --data files")
    runs = [_Ablation(engine, path, features=features, folds=None, metric=metric, recipe=recipe,
                      embedder=embedder, extract=extract, limit=limit, fresh=fresh, on=on) for path in data_paths]
    metrics = {r.metric for r in runs}
    if len(metrics) > 1:
        raise BadInput(f"the files are scored on different metrics ({', '.join(sorted(metrics))}): pass --metric")
    chosen = [f for f in runs[0].chosen if all(f in r.chosen for r in runs)]
    t0 = time.perf_counter()
    reports, pooled_items = [], []
    for r in runs:
        items = _run(r.specs, workers, should_stop, progress, f"ablation of {r.path.name}")
        report = summarise_ablation(items, chosen, r.metric)
        report["cross_validated"] = r.cross_validate(cv_selection(report), workers, should_stop, progress)
        reports.append(r.describe(report, None))
        pooled_items += [{**it, "fold": f"{r.loaded.name}:{it['fold']}"} for it in items]
    pooled = summarise_ablation(pooled_items, chosen, runs[0].metric)
    selection = cv_selection(pooled)
    values: list[float] = []
    for r in runs:
        mine = {fold.split(":", 1)[1]: off for fold, off in selection.items() if fold.startswith(f"{r.loaded.name}:")}
        cv = r.cross_validate(mine, workers, should_stop, progress)
        values += cv.pop("values")
        pooled.setdefault("cross_validated_by_file", {})[r.path.name] = cv["overall"]
    pooled["cross_validated"] = {"overall": _mean(values), "off_by_fold": selection}
    pooled.update({"dataset": "pooled", "data_path": " + ".join(str(r.path) for r in runs),
                   "files_pooled": [rep["data_path"] for rep in reports], "recipe": recipe,
                   "extract": " / ".join(sorted({r.extract for r in runs})), "embedder": runs[0].emb_name,
                   "fold_kind": "file and its own fold", "git_commit": git_commit(),
                   "seconds": round(time.perf_counter() - t0, 1),
                   "not_measured": [f for f in runs[0].all_features if f not in chosen], "by_file": reports})
    return pooled


def run_sweep(engine: MemoryEngine, data_path: str | os.PathLike[str], *, sweep: str,
              folds: str | None = None, metric: str | None = None, recipe: str = "offline", workers: int = 1,
              embedder: str | None = None, extract: str | None = None, limit: int | None = None,
              fresh: bool = False, on: list[str] | None = None,
              progress: Callable[[float, str], None] | None = None,
              should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """A recipe setting chosen on folds (`bench ablate --sweep NAME=V1,V2,...`, recipes.parse_sweep):
    every question answered under each value; for each fold, the value the other folds score best
    (ties: the recipe's own value, then the order given) is scored on that fold. The cross-validated
    figure beside the recipe's own value's says whether a hand-set threshold is one the data would
    pick where it was not tuned."""
    from ..retrieve.recipes import get_recipe, parse_sweep

    setting, parsed = parse_sweep(sweep)
    run = _Ablation(engine, data_path, features=None, folds=folds, metric=metric, recipe=recipe,
                    embedder=embedder, extract=extract, limit=limit, fresh=fresh, on=on)
    default = getattr(get_recipe(recipe), setting)
    names = [f"{setting}={v}" for v in parsed]
    off = list(run.base_recipe.off)
    for spec in run.specs:
        spec["variants"] = {name: {"off": off, "set": {setting: v}} for name, v in zip(names, parsed)}
    t0 = time.perf_counter()
    items = _scored(_run(run.specs, workers, should_stop, progress, "sweep"), run.metric)
    fold_names = sorted({it["fold"] for it in items})
    n = {f: sum(1 for it in items if it["fold"] == f) for f in fold_names}

    def mean(group: list[dict[str, Any]], name: str, key: str) -> float | None:
        vals = [it["variants"][name][key] for it in group if key in it["variants"][name]]
        return sum(vals) / len(vals) if vals else None

    keys = [run.metric] + [k for k in (*SECONDARY, "false_supersession", "history@3", "keep_first@1")
                           if k != run.metric and any(k in v for it in items for v in it["variants"].values())]
    table = {name: {"overall": {k: mean(items, name, k) for k in keys},
                    "by_fold": {f: mean([it for it in items if it["fold"] == f], name, run.metric) for f in fold_names}}
             for name in names}
    order = sorted(range(len(names)), key=lambda i: (parsed[i] != default, i))  # ties: the recipe's own first
    ranked = [names[i] for i in order]
    chosen = {f: sweep_choice(table, ranked, n, run.metric, held_out=f) for f in fold_names}
    held = [it["variants"][chosen[f]][run.metric] for f in fold_names for it in items if it["fold"] == f]
    report: dict[str, Any] = {
        "metric": run.metric, "setting": setting, "recipe_value": default, "values": parsed,
        "questions": len(items), "folds": n, "table": table,
        "recipe_value_overall": table[f"{setting}={default}"]["overall"][run.metric]
        if f"{setting}={default}" in table else None,
        "cross_validated": {"overall": _mean(held), "chosen_by_fold": chosen},
        "best_on_all": sweep_choice(table, ranked, n, run.metric)}
    out = run.describe(report, time.perf_counter() - t0)
    out["not_measured"] = []  # a sweep switches no feature
    return out


def sweep_choice(table: dict[str, Any], ranked: list[str], n: dict[str, int], metric: str,
                 held_out: str | None = None) -> str:
    """The value (a name of `table`) that scores best on every fold but `held_out` (all folds when
    None), each fold weighed by its questions: the highest, or the lowest for a metric where less
    is better (LOWER_IS_BETTER); ties go to the first of `ranked` (the recipe's own value first)."""
    def score(name: str) -> float:
        return _gain(metric) * sum((table[name]["by_fold"][f] or 0.0) * n[f] for f in n if f != held_out)

    return max(ranked, key=lambda name: (score(name), -ranked.index(name)))


def sweep_markdown(report: dict[str, Any]) -> str:
    """A sweep's table as Markdown (`--out` writes it beside the JSON)."""
    m, folds = report["metric"], list(report["folds"])
    cv = report["cross_validated"]
    rv = report.get("recipe_value_overall")
    keys = list(next(iter(report["table"].values()))["overall"])
    lines = [f"# Sweep of {report['setting']}: {report['dataset']} ({Path(report['data_path']).name})", "",
             f"- metric `{m}`, recipe `{report['recipe']}` (its value {report['recipe_value']}), extraction "
             f"`{report['extract']}`, embedder `{report['embedder']}`, commit `{(report.get('git_commit') or 'unknown')[:12]}`",
             f"- {report['questions']} scored questions in {len(folds)} folds by {report['fold_kind']}",
             f"- the recipe's value: **{rv:.4f}**" if rv is not None else "- the recipe's value was not swept",
             f"- cross-validated (each fold under the value the other folds score best): **{(cv['overall'] or 0):.4f}**; "
             f"best on all folds: `{report['best_on_all']}`", "",
             "| value | " + " | ".join(keys) + " | " + " | ".join(folds) + " |",
             "|---|" + "---:|" * (len(keys) + len(folds))]
    for name, row in report["table"].items():
        cells = [f"{row['overall'][k]:.4f}" if row["overall"][k] is not None else "-" for k in keys]
        cells += [f"{row['by_fold'][f]:.4f}" if row["by_fold"][f] is not None else "-" for f in folds]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Chosen when held out: " + "; ".join(f"{f} `{v}`" for f, v in cv["chosen_by_fold"].items())]
    return "\n".join(lines) + "\n"


class _Ablation:
    """One file's containers, variants and folds, ready to run."""

    def __init__(self, engine: MemoryEngine, data_path: str | os.PathLike[str], *, features: list[str] | None,
                 folds: str | None, metric: str | None, recipe: str, embedder: str | None, extract: str | None,
                 limit: int | None, fresh: bool, on: list[str] | None = None) -> None:
        from ..retrieve.intent import FEATURES
        from ..retrieve.recipes import get_recipe
        from .containers import cache_dir_for

        self.path = Path(data_path)
        if not self.path.is_file():
            raise BadInput(f"{self.path}: no such dataset file")
        self.all_features = list(FEATURES)
        self.base_recipe = get_recipe(recipe, on=on or ())
        self.chosen = list(features) if features else [f for f in FEATURES if self.base_recipe.on(f)]
        unknown = [f for f in self.chosen if f not in FEATURES]
        if unknown:
            raise BadInput(f"unknown feature {unknown[0]!r} (one of {', '.join(FEATURES)})")
        self.loaded, raw = ds.read_dataset(self.path)
        self.folds = folds or DEFAULT_FOLDS.get(self.loaded.name, "type")
        self.metric = metric or DEFAULT_METRIC.get(self.loaded.name, "turn_evidence_recall@10")
        self.extract = extract or ds.default_extract(self.loaded.name)
        self.recipe = recipe
        self.emb_name = embedder or os.environ.get("MEMLENS_EMBEDDER") or "local"
        # never the blind part of an updates file: a fold of it would vote in the others' selection
        self.specs = limit_questions(without_blind(self.loaded, containers_for(self.loaded, raw)), limit)
        cache = cache_dir_for(engine.path)
        work = Path(str(engine.path) + ".bench") / "ablate"
        variants = {BASELINE: list(self.base_recipe.off)} | {f: sorted({*self.base_recipe.off, f})
                                                             for f in self.chosen}
        assert len(variants) == len(self.chosen) + 1, "a feature's variant is named as the all-on one"
        batches = self.loaded.dev_batches() if isinstance(self.loaded, ds.UpdatesDataset) else None
        for i, spec in enumerate(self.specs):
            for q in spec["questions"]:
                q["fold"] = _fold_of(self.loaded.name, self.folds, spec["container"], q["category"], batches)
            spec.update({"db": str(work / f"c{i}.db"), "ks": list(DEFAULT_KS), "recipe": recipe,
                         "embedder": self.emb_name, "extract": self.extract, "cache": str(cache), "fresh": fresh,
                         "variants": variants})

    def cross_validate(self, selection: dict[str, list[str]], workers: int, should_stop: ShouldStop | None,
                       progress: Callable[[float, str], None] | None) -> dict[str, Any]:
        """Each fold scored under the features `selection` keeps for it (the other folds' verdict)."""
        for spec in self.specs:
            spec["fresh"] = False
            spec["variants"] = {}
            for q in spec["questions"]:
                spec["variants"][f"cv:{q['fold']}"] = sorted({*self.base_recipe.off, *selection.get(q["fold"], [])})
        cv_scored = _scored(_run(self.specs, workers, should_stop, progress, "cross-validation"), self.metric)
        values = [it["variants"][f"cv:{it['fold']}"].get(self.metric, 0.0) for it in cv_scored]
        return {"overall": _mean(values), "off_by_fold": selection, "values": values}

    def describe(self, report: dict[str, Any], seconds: float | None) -> dict[str, Any]:
        report["cross_validated"].pop("values", None)
        report.update({"dataset": self.loaded.name, "data_path": str(self.path), "sha256": self.loaded.sha256,
                       "recipe": self.recipe, "extract": self.extract, "embedder": self.emb_name,
                       "fold_kind": self.folds, "git_commit": git_commit(),
                       "not_measured": [f for f in self.all_features if f not in self.chosen]})
        if seconds is not None:
            report["seconds"] = round(seconds, 1)
        return report


def _run(specs: list[dict[str, Any]], workers: int, should_stop: ShouldStop | None,
         progress: Callable[[float, str], None] | None, what: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    total = max(1, len(specs))
    for i, chunk in enumerate(execute(specs, workers, None, should_stop, fn=ablate_container)):
        items.extend(chunk)
        if progress is not None:
            progress((i + 1) / total, f"{what}: {i + 1}/{total} containers")
    return items


def markdown(report: dict[str, Any]) -> str:
    """The ablation table (or a sweep's, sweep_markdown) as Markdown (also written beside the JSON by `--out`)."""
    if "setting" in report:
        return sweep_markdown(report)
    m = report["metric"]
    base = report["baseline"]
    cv = report.get("cross_validated") or {}
    folds = list(report["folds"])
    lines = [f"# Ablation: {report['dataset']} ({_names(report)})", "",
             f"- metric `{m}`, recipe `{report['recipe']}`, extraction `{report['extract']}`, embedder "
             f"`{report['embedder']}`, commit `{(report.get('git_commit') or 'unknown')[:12]}`",
             f"- {report['questions']} scored questions in {len(folds)} folds by {report['fold_kind']}",
             f"- all features: **{base['overall']:.4f}**; cross-validated (each fold under the features the "
             f"other folds kept): **{(cv.get('overall') or 0):.4f}**", "",
             "Contribution = metric with the feature minus without it"
             + (f" (`{m}`: lower is better, so without it minus with it)" if m in LOWER_IS_BETTER else "")
             + ". Held-out = leave-one-fold-out: a fold counts the feature's effect there unless the other folds "
             "say it hurts.", "",
             *(["- pooled: every question weighs the same, folds are each file's own; each file alone, all "
                "features / cross-validated: " + "; ".join(
                    f"{Path(r['data_path']).name} {r['baseline']['overall']:.4f} / "
                    f"{(r.get('cross_validated') or {}).get('overall') or 0:.4f}" for r in report["by_file"]),
                "- cross-validated under the pooled verdicts, by file: " + "; ".join(
                    f"{name} {v:.4f}" for name, v in report.get("cross_validated_by_file", {}).items()), ""]
               if report.get("by_file") else []),
             "| feature | contribution | held-out | folds + / - | questions changed | verdict |",
             "|---|---:|---:|---:|---:|---|"]
    feats = sorted(report["features"].items(), key=lambda kv: -kv[1]["contribution"])
    for name, r in feats:
        lines.append(f"| {name} | {r['contribution']:+.4f} | {r['held_out']:+.4f} | {r['folds_helped']} / "
                     f"{r['folds_hurt']} | {r['questions_changed']} | {r['verdict']} |")
    lines += ["", "## By fold", "", "| feature | " + " | ".join(folds) + " |",
              "|---|" + "---:|" * len(folds),
              "| (all features) | " + " | ".join(f"{base['by_fold'][f]:.4f}" for f in folds) + " |"]
    for name, r in feats:
        lines.append(f"| {name} | " + " | ".join(f"{r['by_fold'][f]:+.4f}" for f in folds) + " |")
    if report.get("not_measured"):
        lines += ["", "Not measured here (off in this recipe or not asked for): " + ", ".join(report["not_measured"])]
    return "\n".join(lines) + "\n"


def _names(report: dict[str, Any]) -> str:
    return " + ".join(Path(r["data_path"]).name for r in report.get("by_file") or [report])


def write_report(report: dict[str, Any], out_dir: str | os.PathLike[str]) -> list[Path]:
    """The report's JSON and Markdown (a pooled one's files also each get their own pair)."""
    out = private_dir(out_dir)  # reports are private like every file memlens writes
    stems = "-".join(Path(r["data_path"]).stem for r in report.get("by_file") or [report])
    stem = f"ablate-{report['dataset']}-{stems}" + (f"-{report['setting']}" if "setting" in report else "")
    js, md = out / f"{stem}.json", out / f"{stem}.md"
    write_private(js, json.dumps(report, indent=2, sort_keys=True) + "\n")
    write_private(md, markdown(report))
    return [js, md] + [p for r in report.get("by_file") or [] for p in write_report(r, out_dir)]
