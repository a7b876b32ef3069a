"""memlens bench updates: the bundled dataset, its loader, the current-truth metrics and a run."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from engine.bench import datasets as ds
from engine.bench.runner import run_benchmark
from engine.bench.update_metrics import evidence_order, score_update_question
from engine.errors import BadInput
from engine.memory import MemoryEngine

ISSUE_DOMAINS = {"home", "work", "vehicles", "devices", "diet", "health", "family", "contact", "money", "school",
                 "hobbies", "pets"}


@pytest.fixture(scope="module")
def bundled():
    return ds.load_updates()


def test_the_bundled_dataset_covers_what_it_must_in_both_halves(bundled):
    assert len(bundled.scenarios) >= 60
    assert {s.domain for s in bundled.scenarios} == ISSUE_DOMAINS
    for split in ds.UPDATE_SPLITS:
        half = [s for s in bundled.scenarios if s.split == split]
        # every kind of the issue in each part; "additive" came after the held-out half (dev and blind have it)
        assert {s.kind for s in half} >= set(ds.UPDATE_KINDS) - {"additive"}, split
        assert {s.steps for s in half if s.is_change} == {2, 3}, split
    for s in bundled.scenarios:
        types = {q.type for q in s.questions}
        # a change has a history (its old value); a non-change may not (the third natural batch's
        # writers were told so: what held before a plan is what holds now)
        assert ({"current", "history"} if s.is_change else {"current"}) <= types, s.scenario_id
        dates = [datetime.fromisoformat(x.date.replace("Z", "+00:00")) for x in s.sessions]
        # months apart; a retraction may follow its plan within days or weeks ("returned it after a
        # week", "scrap that, physio says I can run"): only its first and last sessions are months apart
        if s.kind == "retracted":
            assert (dates[-1] - dates[0]).days >= 56 and all(b > a for a, b in zip(dates, dates[1:])), \
                f"{s.scenario_id}: sessions apart"
        else:
            assert (dates[-1] - dates[0]).days >= 60 and all((b - a).days >= 14 for a, b in zip(dates, dates[1:])), \
                f"{s.scenario_id}: sessions apart"
        for q in s.questions:
            assert q.type == "history" or q.stale or set(q.gold) >= {"s1:0", "s2:0"}, q.question_id


def test_loaded_through_the_normal_detection(bundled):
    loaded = ds.load_dataset(ds.updates_default_path())
    assert loaded.name == "updates" and loaded.sha256 == bundled.sha256
    assert ds.detect_dataset(ds.updates_default_path()) == "updates"


def _one(**override):
    scenario = {"id": "x", "split": "dev", "domain": "home", "kind": "change", "steps": 2, "sessions": [
        {"date": "2024-01-01T00:00:00Z", "turns": [["user", "I live in Berlin."]]},
        {"date": "2024-06-01T00:00:00Z", "turns": [["user", "I moved to Munich."]]}],
        "questions": [{"type": "current", "q": "Where do I live?", "gold": ["s2:0"], "stale": ["s1:0"]}]}
    scenario.update(override)
    return {"dataset": ds.UPDATES_NAME, "scenarios": [scenario]}


@pytest.mark.parametrize("override, reason", [
    ({"split": "test"}, '"split" must be one of'),
    ({"kind": "maybe"}, '"kind" must be one of'),
    ({"questions": [{"type": "current", "q": "Where?", "gold": ["s3:0"]}]}, "gold s3:0 is not a turn"),
    ({"questions": [{"type": "now", "q": "Where?", "gold": ["s2:0"]}]}, '"type" must be one of'),
    ({"questions": [{"type": "current", "q": "Where?", "gold": ["s2:0"], "stale": ["s2:0"]}]}, '"stale" must'),
    ({"sessions": [{"date": "2024-06-01T00:00:00Z", "turns": [["user", "a"]]},
                   {"date": "2024-01-01T00:00:00Z", "turns": [["user", "b"]]}]}, "time order"),
    ({"sessions": [{"date": "yesterday", "turns": [["user", "a"]]},
                   {"date": "2024-01-01T00:00:00Z", "turns": [["user", "b"]]}]}, "not an ISO-8601 date"),
])
def test_malformed_files_are_one_line_bad_input(tmp_path, override, reason):
    path = tmp_path / "u.json"
    path.write_text(json.dumps(_one(**override)), encoding="utf-8")
    with pytest.raises(BadInput, match=reason) as err:
        ds.load_dataset(path)
    assert "\n" not in str(err.value) and str(err.value).startswith(str(path))


def test_first_at_1_counts_only_value_turns_and_top_at_1_everything():
    ranked = ["s1:1", "s2:0", "s1:0"]  # small talk first, then the new value, then the old one
    m = score_update_question("current", ranked, ["s2:0"], ["s1:0"], [])
    assert m == {"current_first@1": 1.0, "current_top@1": 0.0, "false_supersession": 0.0}
    assert score_update_question("current", ["s1:0", "s2:0"], ["s2:0"], ["s1:0"], [])["current_first@1"] == 0.0
    assert score_update_question("history", ["s2:0", "s9:9", "s1:0"], ["s1:0"], [], []) == {"history@3": 1.0}


def false_supersession(outdated, gold) -> float:
    """The metric as a current question is scored with it."""
    return score_update_question("current", [], gold, [], outdated)["false_supersession"]


def test_false_supersession_is_a_gold_turn_replaced_by_a_turn_outside_gold():
    assert false_supersession([(["s1:0"], ["s2:0"])], ["s1:0"]) == 1.0  # the plan replaced the home
    assert false_supersession([(["s1:0"], ["s3:0"])], ["s1:0", "s3:0"]) == 0.0  # a restatement of it
    assert false_supersession([(["s9:0"], ["s2:0"])], ["s1:0"]) == 0.0


def test_false_supersessions_are_told_by_the_rule_that_made_them():
    from engine.bench.update_metrics import false_by_rule, false_rules, score_update_question

    marks = [(["s1:0"], ["s2:0"], "restated_later"), (["s1:0"], ["s3:0"], "same_slot"),
             (["s1:0"], ["s4:0"], "restated_later"), (["s2:0"], ["s1:0"], "same_slot"), (["s1:0"], ["s5:0"])]
    assert false_rules(marks, ["s1:0"]) == ["restated_later", "same_slot", ""]
    got = score_update_question("current", ["s1:0", "s2:0"], ["s1:0"], ["s2:0"], marks)
    assert got["false_supersession"] == 1.0
    assert {k for k in got if k.startswith("false_supersession:")} == {
        "false_supersession:restated_later", "false_supersession:same_slot", "false_supersession:unnamed"}
    assert "false_supersession:same_slot" not in score_update_question("current", [], ["s1:0"], [], marks[3:4])
    items = [{"metrics": got, "part": "dev"}, {"metrics": {"false_supersession": 0.0}, "part": "dev"},
             {"metrics": {"false_supersession:same_slot": 1.0}, "part": "heldout"}]
    assert false_by_rule(items, lambda it: [it["part"]]) == {
        "all": {"restated_later": 1, "same_slot": 2, "unnamed": 1},
        "dev": {"restated_later": 1, "same_slot": 1, "unnamed": 1}, "heldout": {"same_slot": 1}}
    from engine.bench.runner import false_rules_text

    told = false_rules_text({"false_supersessions_by_rule": false_by_rule(items, lambda it: [it["part"]])})
    assert told == "restated_later 1 (dev 1), same_slot 2 (dev 1, heldout 1), unnamed 1 (dev 1)"
    assert false_rules_text({}) == ""  # a run from before they were counted


def test_a_miss_is_counted_under_its_cause():
    from engine.bench.runner import misses_text
    from engine.bench.update_metrics import MISS_CAUSES, misses_by_cause

    def cause(turns, gold, stale, marks=(), qtype="current", k=3):
        m = score_update_question(qtype, turns, gold, stale, list(marks), k)
        causes = [key.split(":", 1)[1] for key in m if key.startswith("miss:")]
        assert len(causes) <= 1 and all(c in MISS_CAUSES for c in causes)
        return causes[0] if causes else None

    assert cause(["s2:0", "s1:0"], ["s2:0"], ["s1:0"]) is None  # a hit has no cause
    assert cause(["s1:0", "s1:1"], ["s2:0"], ["s1:0"]) == "unranked"
    assert cause(["s1:0", "s1:1", "s1:2", "s2:0"], ["s2:0"], ["s1:0"]) == "beyond_k"  # rank 4, k 3
    assert cause(["s1:0", "s2:0"], ["s2:0"], ["s1:0"]) == "unordered_later_gold"  # a change not lifted
    assert cause(["s2:0", "s1:0"], ["s1:0"], ["s2:0"]) == "unordered_earlier_gold"  # a visit not put below
    assert cause(["s2:0", "s1:0"], ["s1:0"], ["s2:0"], [(["s1:0"], ["s2:0"], "same_slot")]) == "gold_replaced"
    assert cause(["s1:0", "s2:0"], ["s2:0"], ["s1:0"], [(["s1:0"], ["s2:0"], "same_slot")]) == "stale_marked"
    assert cause(["a", "b"], ["b"], ["a"]) == "unordered"  # ids that do not tell the order
    assert cause(["s2:0", "s1:0"], ["s1:0"], ["s2:0"], qtype="keep") == "unordered_earlier_gold"
    assert cause(["s1:0"], ["s2:0"], [], qtype="history") is None  # history questions are not first@1
    items = [{"metrics": score_update_question("current", ["s1:0", "s2:0"], ["s2:0"], ["s1:0"], [], 3), "part": "dev"},
             {"metrics": score_update_question("current", ["s1:0"], ["s2:0"], ["s1:0"], [], 3), "part": "heldout"},
             {"metrics": score_update_question("current", ["s2:0"], ["s2:0"], ["s1:0"], [], 3), "part": "dev"}]
    by = misses_by_cause(items, lambda it: [it["part"]])
    assert by == {"all": {"unordered_later_gold": 1, "unranked": 1}, "dev": {"unordered_later_gold": 1},
                  "heldout": {"unranked": 1}}
    assert misses_text({"misses_by_cause": by}) == "unordered_later_gold 1 (dev 1), unranked 1 (heldout 1)"
    assert misses_text({}) == ""


def test_evidence_order_reads_the_dates_and_the_questions_wording():
    dates = {"a": "2023-01-01T00:00:00Z", "b": "2023-06-01T00:00:00Z"}
    of = lambda t: t.split(":")[0]  # noqa: E731
    assert evidence_order("What is my best time?", ["b:1", "a:0"], ["a:0", "b:1"], dates, of) == {"ku_latest_first": 1.0}
    assert evidence_order("What is my best time?", ["a:0", "b:1"], ["a:0", "b:1"], dates, of) == {"ku_latest_first": 0.0}
    assert evidence_order("What was my goal before I updated it?", ["a:0", "b:1"], ["a:0", "b:1"], dates, of) == {
        "ku_previous_first": 1.0}
    assert evidence_order("Q?", ["a:0"], ["a:0", "a:1"], dates, of) == {}  # one session: nothing to order


def test_a_run_reports_current_truth_per_half_and_kind(tmp_path, bundled):
    raw = json.loads(ds.updates_default_path().read_text(encoding="utf-8"))
    keep = {"home-d1", "home-d3", "tool-h1"}  # a change (with a keep question), a non-change, a held-out change
    raw["scenarios"] = [s for s in raw["scenarios"] if s["id"] in keep]
    path = tmp_path / "updates.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        out = run_benchmark(engine, "updates", path, k_values=(1, 3, 10), embedder="hashing", extract="heuristic")
    assert out["failures"] == 0 and out["questions"] == sum(len(s["questions"]) for s in raw["scenarios"])
    for key in ("current_first@1", "current_top@1", "keep_first@1", "history@3", "false_supersession",
                "turn_recall_any@10"):
        assert key in out["metrics"], key
    assert {"dev", "heldout", "dev:change", "dev:other_person", "dev:current", "heldout:history"} <= set(out["by_category"])
    assert 0.0 <= out["by_category"]["dev"]["current_first@1"] <= 1.0
    # every current and keep question that missed first@1 is counted once, under a known cause
    from engine.bench.update_metrics import MISS_CAUSES

    n = {t: sum(q["type"] == t for s in raw["scenarios"] for q in s["questions"]) for t in ("current", "keep")}
    missed = round(n["current"] * (1 - out["metrics"]["current_first@1"]) + n["keep"] * (1 - out["metrics"]["keep_first@1"]))
    by_cause = (out.get("misses_by_cause") or {}).get("all") or {}
    assert set(by_cause) <= set(MISS_CAUSES) and sum(by_cause.values()) == missed


def dev_and_blind(tmp_path):
    """An updates file of one dev scenario (home-d1) and one blind one: (its path, its scenarios)."""
    raw = json.loads(ds.updates_default_path().read_text(encoding="utf-8"))
    blind = next(s for s in raw["scenarios"] if s["split"] == "blind")
    raw["scenarios"] = [s for s in raw["scenarios"] if s["id"] == "home-d1"] + [blind]
    path = tmp_path / "updates.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path, raw["scenarios"]


def test_the_blind_part_runs_only_when_asked(tmp_path, bundled):
    """The blind part is read once, as aggregates: a plain run neither recalls nor reports it."""
    path, (dev, blind) = dev_and_blind(tmp_path)
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        plain = run_benchmark(engine, "updates", path, k_values=(1,), embedder="hashing", extract="heuristic")
        asked = run_benchmark(engine, "updates", path, k_values=(1,), embedder="hashing", extract="heuristic",
                              blind=True)
    assert plain["questions"] == len(dev["questions"])
    assert not any(key.startswith("blind") for key in plain["by_category"])
    assert asked["questions"] == len(dev["questions"]) + len(blind["questions"])
    assert "blind" in asked["by_category"]


def test_knowledge_update_order_is_scored_on_longmemeval(tmp_path):
    def session(sid, date, text):
        return sid, date, [{"role": "user", "content": text, "has_answer": True},
                           {"role": "assistant", "content": "Noted."}]
    sessions = [session("old", "2023/01/01 (Sun) 10:00", "I have been running for 6 months now."),
                session("new", "2023/06/01 (Thu) 10:00", "I have been running for 11 months now.")]
    item = {"question_id": "ku1", "question_type": "knowledge-update", "question": "How long have I been running?",
            "answer": "11 months", "question_date": "2023/06/02 (Fri) 10:00",
            "haystack_session_ids": [s[0] for s in sessions], "haystack_dates": [s[1] for s in sessions],
            "haystack_sessions": [s[2] for s in sessions], "answer_session_ids": ["old", "new"]}
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([item]), encoding="utf-8")
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        out = run_benchmark(engine, "longmemeval", path, k_values=(10,), embedder="hashing")
    assert out["metrics"]["ku_latest_first"] in (0.0, 1.0)
    assert out["by_category"]["knowledge-update"]["ku_latest_first"] == out["metrics"]["ku_latest_first"]


def test_ablation_scores_current_truth_on_the_halves(tmp_path):
    from engine.bench.ablate import run_ablation

    raw = json.loads(ds.updates_default_path().read_text(encoding="utf-8"))
    keep = {"home-d1", "home-d3", "tool-h1"}
    raw["scenarios"] = [s for s in raw["scenarios"] if s["id"] in keep]
    path = tmp_path / "updates.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        out = run_ablation(engine, path, features=["claim_superseded", "restated_later"], embedder="hashing")
    assert out["metric"] == "current_first@1" and out["extract"] == "heuristic" and out["fold_kind"] == "half"
    assert set(out["folds"]) == {"dev", "heldout"}
    current = sum(1 for s in raw["scenarios"] for q in s["questions"] if q["type"] == "current")
    assert out["questions"] == current  # history and keep questions are not scored by current_first@1
    assert set(out["features"]) == {"claim_superseded", "restated_later"}


def test_fit_refuses_the_updates_benchmark_in_one_line(tmp_path):
    from engine.bench.fit import run_fit

    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        with pytest.raises(BadInput, match="measures current truth"):
            run_fit(engine, [str(ds.updates_default_path())], embedder="hashing")


def test_the_natural_style_dev_batch_is_split_in_two_fixed_halves(bundled):
    batches = bundled.dev_batches()
    natural = sorted(s.scenario_id for s in bundled.scenarios if s.split == "dev" and s.scenario_id.endswith("-w2"))
    assert [batches[sid] for sid in natural[:4]] == ["dev:w2a", "dev:w2b", "dev:w2a", "dev:w2b"]
    counts = {b: list(batches.values()).count(b) for b in set(batches.values())}
    assert counts["dev:w2a"] == counts["dev:w2b"] == len(natural) // 2
    later = [s.scenario_id for s in bundled.scenarios if s.split == "dev" and s.scenario_id.endswith("-w3")]
    later = sorted(later)
    assert later and [batches[sid] for sid in later[:3]] == ["dev:w3a", "dev:w3b", "dev:w3a"]
    assert sum(batches[sid] == "dev:w3b" for sid in later) == len(later) // 2
    batched = [s for s in bundled.scenarios if s.split == "dev" and re.search(r"-w\d+$", s.scenario_id)]
    assert len(batched) > len(natural) + len(later)  # a later batch ("-w4") is halved by the same rule
    fourth = sorted(s.scenario_id for s in batched if s.scenario_id.endswith("-w4"))
    assert [batches[sid] for sid in fourth] == ["dev:w4a" if i % 2 == 0 else "dev:w4b" for i in range(len(fourth))]
    assert counts["dev:tidy"] == sum(1 for s in bundled.scenarios if s.split == "dev") - len(batched)
    assert {s.split for s in bundled.scenarios if s.scenario_id in batches} == {"dev"}  # no other part is grouped


def test_every_w_batch_is_a_group_halved_by_its_sorted_ids(tmp_path):
    raw = json.loads(ds.updates_default_path().read_text(encoding="utf-8"))
    by_id = {s["id"]: s for s in raw["scenarios"]}
    # a batch the code has never named ("-w5"), one "-w2" scenario, a tidy one and a held-out one
    fifth = [dict(by_id[sid], id=f"{sid}-w5") for sid in ("home-d3", "home-d1", "work-d1")]
    raw["scenarios"] = [*fifth, by_id["home-d2"], by_id["tool-h1"],
                        next(s for s in raw["scenarios"] if s["split"] == "dev" and s["id"].endswith("-w2"))]
    path = tmp_path / "updates.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    batches = ds.load_updates(path).dev_batches()
    assert [batches[sid] for sid in ("home-d1-w5", "home-d3-w5", "work-d1-w5")] == ["dev:w5a", "dev:w5b", "dev:w5a"]
    assert batches["home-d2"] == "dev:tidy" and "tool-h1" not in batches
    assert ds.dev_groups("dev:w5b") == ["dev:w5b", "dev:w5"]
    assert ds.dev_groups("dev:w2b") == ["dev:w2b", "dev:w2", "dev:half_a"]
    assert ds.dev_groups("dev:w3b") == ["dev:w3b", "dev:w3", "dev:half_b"]
    assert ds.dev_groups("dev:tidy") == ["dev:tidy"]
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        out = run_benchmark(engine, "updates", path, k_values=(1,), embedder="hashing", extract="heuristic")
    groups = set(out["by_category"])
    assert {"dev:w5", "dev:w5a", "dev:w5b", "dev:w2", "dev:half_a", "dev:tidy"} <= groups
    assert not {"dev:w3", "dev:half_b"} & groups  # no "-w3" scenario here
    w5 = [out["by_category"][g]["current_first@1"] for g in ("dev:w5a", "dev:w5b", "dev:w5")]
    assert all(0.0 <= v <= 1.0 for v in w5)


def test_ablation_folds_by_batch_are_the_dev_batches_beside_the_parts():
    from engine.bench.ablate import _fold_of

    batches = {"home1-w2": "dev:w2b", "home-d1": "dev:tidy"}
    assert _fold_of("updates", "batch", "home1-w2", "dev:current", batches) == "dev:w2b"
    assert _fold_of("updates", "batch", "home-d1", "dev:current", batches) == "dev:tidy"
    assert _fold_of("updates", "batch", "tool-h1", "heldout:current", batches) == "heldout"
    assert _fold_of("updates", "batch", "x-w5", "dev:current", {"x-w5": "dev:w5a"}) == "dev:w5a"  # a later batch's half
    with pytest.raises(BadInput):
        _fold_of("locomo", "batch", "conv-26", "single-hop", batches)
