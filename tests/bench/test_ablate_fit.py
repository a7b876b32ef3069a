"""Feature ablation on folds, weight fitting, and the container cache they stand on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.bench import ablate, containers, fit
from engine.bench.runner import run_benchmark
from engine.errors import BadInput
from engine.memory import MemoryEngine
from engine.retrieve.recipes import FITTED, get_recipe

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"


@pytest.fixture
def engine(tmp_path):
    with MemoryEngine(tmp_path / "main.db", llm=False) as eng:
        yield eng


def _item(fold, base, off, qid):
    return {"question_id": qid, "category": "single-hop", "fold": fold, "excluded": False, "gold": {"turn": ["D1:1"]},
            "variants": {ablate.BASELINE: {"turn_evidence_recall@10": base}, "f": {"turn_evidence_recall@10": off}}}


def test_a_feature_that_helps_one_fold_and_hurts_the_others_is_not_a_mechanism():
    # fold a: with f 1.0, without 0.0 (helps); folds b and c: with f 0.0, without 1.0 (hurts)
    items = [_item("a", 1.0, 0.0, "q1"), _item("b", 0.0, 1.0, "q2"), _item("c", 0.0, 1.0, "q3")]
    r = ablate.summarise_ablation(items, ["f"], "turn_evidence_recall@10")["features"]["f"]
    assert r["by_fold"] == {"a": 1.0, "b": -1.0, "c": -1.0}
    assert r["contribution"] == pytest.approx(-1 / 3)
    # held out a: b and c say drop it (no credit); held out b: a and c net 0, kept (-1); same for c
    assert r["held_out"] == pytest.approx(-2 / 3) and r["kept_in_folds"] == ["b", "c"]
    assert r["verdict"] == "hurts on held-out folds" and (r["folds_helped"], r["folds_hurt"]) == (1, 2)


def test_a_feature_that_lowers_a_rate_that_should_be_low_helps():
    # false_supersession: with f 0.0 (none), without 1.0; a positive contribution means it helps
    def item(fold, base, off, qid):
        return {"question_id": qid, "category": "dev:w2", "fold": fold, "excluded": False, "gold": {},
                "variants": {ablate.BASELINE: {"false_supersession": base}, "f": {"false_supersession": off}}}

    report = ablate.summarise_ablation([item("a", 0.0, 1.0, "q1"), item("b", 0.0, 0.0, "q2"), item("c", 0.0, 1.0, "q3")],
                                       ["f"], "false_supersession")
    r = report["features"]["f"]
    assert r["by_fold"] == {"a": 1.0, "b": 0.0, "c": 1.0} and r["contribution"] == pytest.approx(2 / 3)
    assert r["verdict"] == "helps on held-out folds" and ablate.cv_selection(report) == {"a": [], "b": [], "c": []}
    worse = ablate.summarise_ablation([item("a", 1.0, 0.0, "q1"), item("b", 1.0, 0.0, "q2")], ["f"], "false_supersession")
    assert worse["features"]["f"]["verdict"] == "hurts on held-out folds"
    assert ablate.cv_selection(worse) == {"a": ["f"], "b": ["f"]}


def test_a_sweep_picks_the_lowest_rate_where_less_is_better():
    table = {"x=1": {"by_fold": {"a": 0.2, "b": 0.0}}, "x=2": {"by_fold": {"a": 0.0, "b": 0.1}},
             "x=3": {"by_fold": {"a": 0.0, "b": 0.0}}}
    n = {"a": 10, "b": 10}
    assert ablate.sweep_choice(table, ["x=1", "x=2", "x=3"], n, "false_supersession") == "x=3"
    assert ablate.sweep_choice(table, ["x=1", "x=2", "x=3"], n, "current_first@1") == "x=1"
    # held out b, fold a alone decides: x=2 and x=3 tie at 0, the first given wins
    assert ablate.sweep_choice(table, ["x=2", "x=3", "x=1"], n, "false_supersession", held_out="b") == "x=2"


def test_tuning_weighs_what_the_official_scoring_counts():
    # LoCoMo's adversarial questions are counted by its own scoring (a fit without them traded the
    # category away); LongMemEval's abstention questions have nothing to find
    adversarial = {**_item("a", 0.0, 1.0, "conv-26:q9"), "category": "adversarial", "excluded": True}
    abstention = {**_item("a", 0.0, 1.0, "q_abs"), "category": "temporal-reasoning", "excluded": True}
    plain = _item("a", 1.0, 1.0, "q1")
    report = ablate.summarise_ablation([adversarial, abstention, plain], ["f"], "turn_evidence_recall@10")
    assert report["questions"] == 2 and report["features"]["f"]["contribution"] == pytest.approx(-0.5)
    assert [fit._usable(it) for it in (adversarial, abstention, plain)] == [True, False, True]


def test_a_feature_that_helps_every_fold_is_kept_everywhere():
    items = [_item("a", 1.0, 0.0, "q1"), _item("b", 1.0, 0.5, "q2")]
    report = ablate.summarise_ablation(items, ["f"], "turn_evidence_recall@10")
    r = report["features"]["f"]
    assert r["held_out"] == pytest.approx(0.75) and r["kept_in_folds"] == ["a", "b"]
    assert r["verdict"] == "helps on held-out folds"
    assert ablate.cv_selection(report) == {"a": [], "b": []}
    bad = ablate.summarise_ablation([_item("a", 0.0, 1.0, "q1"), _item("b", 0.0, 1.0, "q2")], ["f"],
                                    "turn_evidence_recall@10")
    assert ablate.cv_selection(bad) == {"a": ["f"], "b": ["f"]}
    # a feature that only one fold sees stays on when that fold is held out
    once = ablate.summarise_ablation([_item("a", 1.0, 0.0, "q1"), _item("b", 1.0, 1.0, "q2")], ["f"],
                                     "turn_evidence_recall@10")
    assert ablate.cv_selection(once) == {"a": [], "b": []} and once["features"]["f"]["held_out"] == 0.5


def test_ablation_end_to_end_on_two_conversations(engine, tmp_path):
    out = ablate.run_ablation(engine, DATA / "bench_locomo_tiny.json", features=["fts", "speaker_names"],
                              embedder="hashing", metric="turn_mrr")
    assert out["fold_kind"] == "conversation" and set(out["folds"]) == {"conv-x1", "conv-x2"}
    assert set(out["features"]) == {"fts", "speaker_names"}
    assert out["features"]["fts"]["contribution"] > 0  # the lexical channel finds what hashing vectors miss
    assert out["cross_validated"]["overall"] is not None
    files = ablate.write_report(out, tmp_path / "abl")
    assert files[1].read_text().startswith("# Ablation: locomo")
    with pytest.raises(BadInput, match="unknown feature"):
        ablate.run_ablation(engine, DATA / "bench_locomo_tiny.json", features=["nope"], embedder="hashing")


def test_the_feature_named_baseline_is_measured_against_the_recipe_with_every_feature_on(engine):
    """The popularity channel's feature is called "baseline": its variant once took the place of
    the all-on one, so every ablation's baseline lacked the channel and the channel scored 0."""
    run = ablate._Ablation(engine, DATA / "bench_locomo_tiny.json", features=["baseline", "fts"], folds=None,
                           metric=None, recipe="offline", embedder="hashing", extract=None, limit=None, fresh=False)
    shipped = sorted(get_recipe("offline").off)
    assert "baseline" not in shipped  # the recipe has the channel
    for spec in run.specs:
        variants = spec["variants"]
        assert len(variants) == 3 and sorted(variants[ablate.BASELINE]) == shipped
        assert variants["baseline"] == sorted({*shipped, "baseline"}) and variants["fts"] == sorted({*shipped, "fts"})


def test_a_pooled_ablation_judges_each_fold_by_every_files_other_folds():
    """One file's fold where f hurts is held out against the other file's folds, which say it
    helps: f stays on there, and its loss on that fold counts against it, as it would on new data."""
    loc = [_item("locomo:conv-1", 1.0, 0.0, "q1"), _item("locomo:conv-2", 1.0, 0.0, "q2")]
    lme = [_item("longmemeval:multi-session", 0.0, 1.0, "q3")]
    alone = ablate.summarise_ablation([{**lme[0], "fold": "multi-session"}], ["f"], "turn_evidence_recall@10")
    assert alone["features"]["f"]["verdict"] == "hurts on held-out folds"
    pooled = ablate.summarise_ablation(loc + lme, ["f"], "turn_evidence_recall@10")
    r = pooled["features"]["f"]
    assert r["kept_in_folds"] == ["locomo:conv-1", "locomo:conv-2", "longmemeval:multi-session"]
    assert r["held_out"] == pytest.approx(1 / 3) and r["verdict"] == "helps on held-out folds"
    assert ablate.cv_selection(pooled) == {f: [] for f in r["kept_in_folds"]}


def test_pooled_ablation_end_to_end_writes_each_files_report_and_the_pooled_one(engine, tmp_path):
    paths = [str(DATA / "bench_locomo_tiny.json"), str(DATA / "bench_longmemeval_oracle_tiny.json")]
    out = ablate.run_pooled_ablation(engine, paths, features=["fts", "speaker_user"], embedder="hashing")
    assert out["dataset"] == "pooled" and [r["dataset"] for r in out["by_file"]] == ["locomo", "longmemeval"]
    assert {f.split(":")[0] for f in out["folds"]} == {"locomo", "longmemeval"}
    assert out["questions"] == sum(r["questions"] for r in out["by_file"])
    assert set(out["cross_validated_by_file"]) == {"bench_locomo_tiny.json", "bench_longmemeval_oracle_tiny.json"}
    assert out["cross_validated"]["overall"] is not None
    files = ablate.write_report(out, tmp_path / "abl")
    assert [f.name for f in files if f.suffix == ".md"] == [
        "ablate-pooled-bench_locomo_tiny-bench_longmemeval_oracle_tiny.md", "ablate-locomo-bench_locomo_tiny.md",
        "ablate-longmemeval-bench_longmemeval_oracle_tiny.md"]
    assert "each file alone" in files[1].read_text()
    with pytest.raises(BadInput, match="two or more"):
        ablate.run_pooled_ablation(engine, paths[:1], embedder="hashing")


def test_unknown_features_are_refused_and_switched_off_ones_are_in_the_trace(tmp_path):
    with pytest.raises(BadInput, match="unknown feature 'nope'"):
        get_recipe("offline", off=("nope",))
    with MemoryEngine(tmp_path / "m.db", llm=False) as eng:
        from engine.scope import Scope

        scope = Scope.default("u", "a")
        eng.add_turns([{"role": "user", "content": "How old is my cat Miso? She is five years old."}], scope=scope,
                      extract="none")
        res = eng.recall("How old is Miso?", scope=scope, off=("fts",))
        assert res.trace.params["off"] == ["fts"] and "fts_terms" not in res.trace.params
        assert res.trace.params["features"]["how_phrase"] == ["how old"]


def test_the_weight_search_moves_towards_what_ranks_the_gold_first():
    """Gold candidates have the top fts value and an ordinary vector one: starting from a tiny fts
    weight, the search raises it until the gold ranks first, and leaves the vector weight alone."""
    names = [n for n, _ in FITTED]
    rng = np.random.default_rng(7)
    items = []
    for q in range(30):
        # the two columns that matter are drawn first, so the draw does not depend on how many
        # weights are fitted
        vector, fts = rng.uniform(0.4, 0.6, size=20), rng.uniform(0, 0.3, size=20)
        x = rng.uniform(0, 1, size=(20, len(names)))
        x[:, names.index("vector")] = vector
        x[:, names.index("fts")] = fts
        x[0, names.index("fts")] = 1.0
        rows = [(list(x[i]), 0.0, [f"D{q}:{i}"]) for i in range(20)]
        items.append({"file": "f", "rows": rows, "gold": {"turn": [f"D{q}:0"]}, "category": "single-hop",
                      "question_id": f"q{q}", "excluded": False})
    start = {n: 0.0 for n in names} | {"vector": 1.0, "fts": 0.01}
    compiled = fit._compiled(items, ["f"])
    vec = lambda w: np.array([w[n] for n in names])  # noqa: E731
    before = fit.offline_metric(compiled, vec(start), k=1)
    fitted = fit.fit_weights(items, ["f"], start)
    assert fitted["vector"] == 1.0 and fitted["fts"] > start["fts"]
    after = fit.offline_metric(compiled, vec(fitted), k=1)
    assert before < 0.2 and after > before + 0.3, (before, after)


def test_fit_end_to_end_reports_dev_and_cross_validated_figures(engine):
    out = fit.run_fit(engine, [str(DATA / "bench_locomo_tiny.json")], embedder="hashing", rounds=1)
    path = str(DATA / "bench_locomo_tiny.json")
    assert set(out["fitted"]) == {n for n, _ in FITTED} and out["fitted"]["vector"] == out["hand"]["vector"]
    assert out["dev_fitted"][path] is not None and out["cross_validated"]["by_file"][path] is not None
    assert set(out["cross_validated"]["folds"]) == {"bench_locomo_tiny:conv-x1", "bench_locomo_tiny:conv-x2"}
    assert "| vector |" in fit.markdown(out)


def test_containers_are_reused_until_what_made_them_changes(engine):
    path = DATA / "bench_locomo_tiny.json"
    cache = containers.cache_dir_for(engine.path)
    first = run_benchmark(engine, "locomo", path, embedder="hashing")
    assert first["containers"] == {"built": 2, "reused": 0} and len(list(cache.glob("*.db"))) == 2
    second = run_benchmark(engine, "locomo", path, embedder="hashing", recipe="lexical")
    assert second["containers"] == {"built": 0, "reused": 2}
    again = run_benchmark(engine, "locomo", path, embedder="hashing")
    assert again["metrics"] == first["metrics"]  # a reused container answers as the fresh one did
    assert run_benchmark(engine, "locomo", path, embedder="hashing", fresh=True)["containers"]["built"] == 2
    other = run_benchmark(engine, "locomo", path, embedder="hashing", extract="heuristic")
    assert other["containers"] == {"built": 2, "reused": 0}  # another extraction mode is another container
    assert len(list(cache.glob("*.db"))) == 4
    assert not list(cache.glob("*.building*"))  # nothing half-built is left behind


def test_the_shipped_fitted_weights_are_loaded_and_the_hand_recipe_keeps_the_old_ones():
    import json

    from engine.retrieve.recipes import FITTED_WEIGHTS, Recipe, recipe_weights

    hand = recipe_weights(get_recipe("hand"))
    assert hand == recipe_weights(Recipe("x"))  # the dataclass defaults: weights as set by hand
    if not FITTED_WEIGHTS.is_file():
        pytest.skip("no fitted weights shipped")
    doc = json.loads(FITTED_WEIGHTS.read_text())
    # every fitted weight comes from the file (a weight no longer fitted, left in an older file, is
    # not applied); recency is off in the shipped recipes
    assert recipe_weights(get_recipe("offline")) == {k: float(doc["fitted"][k]) for k, _ in FITTED}
    assert get_recipe("offline").recency_weight == 0.0
    assert doc["files"] and all("/" not in f["file"] for f in doc["files"])  # names, not paths of this machine


def test_every_question_weighs_the_same_whichever_file_it_is_in():
    """A file of 2 questions must not outweigh one of 8: a weight that ranks the small file's gold
    first and the big file's last loses to one that does the opposite."""
    names = [n for n, _ in FITTED]
    fts = names.index("fts")

    def item(file: str, q: int, gold_has_fts: bool) -> dict:
        x = np.zeros((2, len(names)))
        x[0 if gold_has_fts else 1, fts] = 1.0
        return {"file": file, "rows": [(list(x[0]), 0.5, [f"D{q}:0"]), (list(x[1]), 0.5, [f"D{q}:1"])],
                "gold": {"turn": [f"D{q}:0"]}, "category": "single-hop", "question_id": f"{file}{q}", "excluded": False}

    items = [item("small", q, True) for q in range(2)] + [item("big", q, False) for q in range(2, 10)]
    compiled = fit._compiled(items, ["small", "big"])
    assert sorted({round(c[-1], 9) for c in compiled}) == [0.1]
    w = np.zeros(len(names))
    w[fts] = 1.0
    k1 = fit.offline_metric(compiled, w, k=1)
    assert k1 == pytest.approx(0.2) and fit.offline_metric(compiled, -w, k=1) == pytest.approx(0.8)


def test_misses_say_why_each_gold_turn_is_outside_the_top_k_and_the_headroom_of_reordering(engine):
    from engine.bench import misses

    out = misses.run_misses(engine, DATA / "bench_locomo_tiny.json", k=1, embedder="hashing")
    bench = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", k_values=[1], embedder="hashing")
    ours = out["ours"]
    # with N = k the "perfect order" of the first N turns is the ranking itself: the benchmark's figure
    assert ours["headroom"][1] == pytest.approx(bench["scores"]["memlens"]["metrics"]["turn_evidence_recall@1"])
    assert sum(ours["why"].values()) == ours["missed"] > 0  # every miss has one reason
    ranked = sum(n for w, n in ours["why"].items() if w.startswith("ranked"))
    assert sum(ours["session"].values()) == ranked
    values = list(ours["headroom"].values())
    assert values == sorted(values) and values[-1] <= 1.0 and list(ours["headroom"]) == [1, 10, 15, 20, 30, 50, 100]
    # a re-ranker's ceiling: every miss lies at one depth of the pool, or is absent from it
    assert list(ours["depth"]) == list(misses.CEILING)
    assert sum(d["missed"] for d in ours["depth"].values()) == ours["missed"]
    assert ours["depth"]["absent"]["missed"] == sum(n for w, n in ours["why"].items() if not w.startswith("ranked"))
    assert misses.markdown(out).startswith("# Why gold turns miss the top 1: bench_locomo_tiny.json")
    with pytest.raises(BadInput, match="unknown feature"):
        misses.run_misses(engine, DATA / "bench_locomo_tiny.json", embedder="hashing", off=["nope"])


def test_misses_leave_the_blind_part_of_updates_out_unless_asked(engine, tmp_path):
    """The blind part is read once, as aggregates: `bench misses` on updates ran it every time."""
    from engine.bench import misses

    from .test_updates import dev_and_blind

    path, _ = dev_and_blind(tmp_path)
    plain = misses.run_misses(engine, path, k=1, embedder="hashing")
    asked = misses.run_misses(engine, path, k=1, embedder="hashing", blind=True)
    assert not any(c.startswith("blind") for c in plain["by_category"])
    assert any(c.startswith("blind") for c in asked["by_category"])


def test_misses_keep_off_what_the_recipe_leaves_off(engine, monkeypatch):
    """`bench misses` once passed its own --off list alone, which replaced the recipe's: every
    feature the recipe leaves off (recipes.NOT_SHIPPED) was on in its figures."""
    from dataclasses import replace

    from engine.bench import misses
    from engine.retrieve import recipes

    monkeypatch.setitem(recipes.RECIPES, "offline", replace(recipes.RECIPES["offline"], off=("session_context",)))
    seen: list[list[str]] = []

    def execute(specs, workers, executor, should_stop, fn):
        seen.extend(s["off"] for s in specs)
        return []

    monkeypatch.setattr(misses, "execute", execute)
    misses.run_misses(engine, DATA / "bench_locomo_tiny.json", embedder="hashing", off=["fts"])
    assert seen and all(set(off) == {"session_context", "fts"} for off in seen)
    seen.clear()
    misses.run_misses(engine, DATA / "bench_locomo_tiny.json", embedder="hashing", on=["session_context"])
    assert seen and all(off == [] for off in seen)


@pytest.mark.parametrize("model, stem", [("weights", "fit"), ("rerank", "rerank")])
def test_bench_fit_writes_its_report_as_json_and_markdown(tmp_path, capsys, model, stem):
    from app.cli import main

    out = tmp_path / "rep"
    code = main(["bench", "fit", "--db", str(tmp_path / "m.db"), "--data", str(DATA / "bench_locomo_tiny.json"),
                 "--embedder", "hashing", "--model", model, "--out", str(out), "--json"])
    assert code == 0
    doc = json.loads((out / f"{stem}.json").read_text(encoding="utf-8"))
    assert doc == json.loads(capsys.readouterr().out)
    assert (out / f"{stem}.md").read_text(encoding="utf-8").strip()
    code = main(["bench", "fit", "--db", str(tmp_path / "m.db"), "--data", str(tmp_path / "none.json"),
                 "--model", model, "--json"])
    assert code == 2  # a missing file: one line, nothing run


def test_an_updates_ablation_never_runs_the_blind_part(engine):
    """The blind batch is read once, as aggregates: as a fold it would vote in the others' selection."""
    from engine.bench import datasets as ds

    loaded, _ = ds.read_dataset(ds.updates_default_path())
    blind = {sc.scenario_id for sc in loaded.scenarios if sc.split == "blind"}
    assert blind  # the bundled set has one
    for folds in ("half", "batch"):
        run = ablate._Ablation(engine, ds.updates_default_path(), features=["fts"], folds=folds, metric=None,
                               recipe="offline", embedder="hashing", extract=None, limit=None, fresh=False)
        assert run.specs and not {s["container"] for s in run.specs} & blind
        assert "blind" not in {q["fold"] for s in run.specs for q in s["questions"]}
        assert {q["fold"] for s in run.specs for q in s["questions"]} >= {"heldout"}


def test_a_sweep_chooses_each_folds_value_on_the_other_folds(engine, tmp_path, capsys):
    """fts_k=0 empties the lexical channel the hashing vectors lean on: the other folds choose the
    recipe's value, and each fold is scored under the choice made without it."""
    from app.cli import main

    out = ablate.run_sweep(engine, DATA / "bench_locomo_tiny.json", sweep="fts_k=0,100", embedder="hashing",
                           metric="turn_mrr")
    assert out["setting"] == "fts_k" and out["recipe_value"] == 100 and out["values"] == [0, 100]
    assert set(out["folds"]) == {"conv-x1", "conv-x2"} and set(out["table"]) == {"fts_k=0", "fts_k=100"}
    full, empty = out["table"]["fts_k=100"], out["table"]["fts_k=0"]
    assert full["overall"]["turn_mrr"] > empty["overall"]["turn_mrr"]
    assert out["recipe_value_overall"] == full["overall"]["turn_mrr"]
    assert out["cross_validated"]["chosen_by_fold"] == {"conv-x1": "fts_k=100", "conv-x2": "fts_k=100"}
    n = out["folds"]
    held = sum(full["by_fold"][f] * n[f] for f in n) / sum(n.values())
    assert out["cross_validated"]["overall"] == pytest.approx(held)
    files = ablate.write_report(out, tmp_path / "sweep")
    assert files[0].name.endswith("-fts_k.json") and files[1].read_text().startswith("# Sweep of fts_k")
    db = tmp_path / "other.db"
    for argv, match in ((["--sweep", "fts_k=1"], "two values or more"), (["--sweep", "fts_k=1,x"], "an integer"),
                        (["--sweep", "nope=1,2"], "not a recipe setting"), (["--sweep", "fts_k=1,01"], "given twice"),
                        (["--sweep", "fts_k=1,2", "--off", "fts"], "drop --features / --off")):
        code = main(["bench", "ablate", "--data", str(DATA / "bench_locomo_tiny.json"), "--db", str(db),
                     "--embedder", "hashing", *argv])
        assert code == 2 and match in capsys.readouterr().err
    assert not db.exists()  # each refused before the database was opened
