"""The official scoring schemes pinned on small hand-checked cases, one per rule of the benchmarks'
own scripts (LongMemEval run_retrieval.py + eval_utils.py; LoCoMo evaluation.py +
evaluation_stats.py), and memlens's variant beside them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.bench import datasets as ds
from engine.bench.runner import CONTAINERS
from engine.bench.scoring import (
    LME_OFFICIAL,
    LOCOMO_OFFICIAL,
    MEMLENS,
    definition,
    describe,
    lme_official_id,
    schemes_for,
    score_question,
    summarise_run,
)

R3 = 1 / math.log2(3)  # the NDCG weight of rank 3 (ranks 1 and 2 weigh 1)


def _lme_file(tmp_path, items):
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    loaded, raw = ds.read_dataset(path)
    return {spec["questions"][0]["question_id"]: spec["questions"][0]
            for spec in CONTAINERS["longmemeval"](loaded, raw)}


def _session(*turns):
    return [{"role": role, "content": f"{role} {i}", "has_answer": flag} for i, (role, flag) in enumerate(turns)]


@pytest.fixture
def lme(tmp_path):
    """Question q1: evidence in user turn 0 of answer_aa_1; answer_aa_2 holds assistant-side evidence only.
    Question q2 (single-session-assistant): no user-side evidence at all. q3_abs: an abstention question."""
    base = {"question_type": "multi-session", "question": "What pet did I adopt?", "answer": "a cat",
            "question_date": "2023/05/30 (Tue) 23:40"}
    q1 = {**base, "question_id": "q1", "answer_session_ids": ["answer_aa_1", "answer_aa_2"],
          "haystack_session_ids": ["answer_aa_1", "distract_1", "answer_aa_2"],
          "haystack_dates": ["2023/05/01 (Mon) 10:00"] * 3,
          "haystack_sessions": [
              _session(("user", True), ("assistant", False), ("user", False), ("assistant", False)),
              [{"role": "user", "content": "u0"}, {"role": "assistant", "content": "a1"},
               {"role": "user", "content": "u2"}],
              _session(("user", False), ("assistant", True))]}
    q2 = {**base, "question_id": "q2", "question_type": "single-session-assistant",
          "answer_session_ids": ["answer_bb_1"],
          "haystack_session_ids": ["answer_bb_1"], "haystack_dates": ["2023/05/01 (Mon) 10:00"],
          "haystack_sessions": [_session(("user", False), ("assistant", True))]}
    q3 = {**q1, "question_id": "q3_abs"}
    return _lme_file(tmp_path, [q1, q2, q3])


def test_lme_official_corpus_is_user_turns_with_the_noans_split(lme):
    assert lme["q1"]["corpus"] == [
        ["answer_aa_1:0", "answer_aa_1_1"], ["answer_aa_1:2", "noans_aa_1_3"],
        ["distract_1:0", "distract_1_1"], ["distract_1:2", "distract_1_3"], ["answer_aa_2:0", "noans_aa_2_1"]]
    assert lme["q1"]["gold"]["official"] == {"turn": ["answer_aa_1_1"]}
    assert lme["q1"]["gold"]["turn"] == ["answer_aa_1:0", "answer_aa_2:1"]  # ours: either speaker
    assert lme_official_id("answer_x_abs_1", 0, False) == "noans_x_abs_1_1"
    assert lme_official_id("sharegpt_77", 4, None) == "sharegpt_77_5"  # not an answer session: kept


def test_lme_official_turn_level_skips_assistant_turns(lme):
    # assistant turn answer_aa_1:1 is not in the corpus, so the evidence turn is the third user turn
    ranking = ["answer_aa_1:2", "distract_1:0", "answer_aa_1:1", "answer_aa_1:0", "distract_1:2"]
    s = LME_OFFICIAL.score(lme["q1"], ranking, [1, 3])
    assert (s["turn_recall_any@1"], s["turn_recall_all@1"], s["turn_ndcg_any@1"]) == (0.0, 0.0, 0.0)
    assert (s["turn_recall_any@3"], s["turn_recall_all@3"]) == (1.0, 1.0)
    assert s["turn_ndcg_any@3"] == pytest.approx(R3)


def test_lme_official_session_level_credits_a_gold_session_through_its_evidence_turns_only(lme):
    ranking = ["answer_aa_1:2", "distract_1:0", "answer_aa_1:0"]
    official = LME_OFFICIAL.score(lme["q1"], ranking, [1, 2, 3])
    ours = MEMLENS.score(lme["q1"], ranking, [1, 2, 3])
    # answer_aa_1's non-evidence turn 2 is session "noans_aa_1": a miss for the official code
    assert [official[f"session_recall_any@{k}"] for k in (1, 2, 3)] == [0.0, 0.0, 1.0]
    assert official["session_recall_all@3"] == 1.0  # gold sessions come from evidence turns: answer_aa_2 is not one
    assert official["session_ndcg_any@3"] == pytest.approx(R3)  # NDCG on the turn list, evidence turn at rank 3
    # ours: any turn of a gold session counts, gold from answer_session_ids
    assert ours["session_recall_any@1"] == 1.0 and ours["session_recall_all@3"] == 0.0


def test_lme_official_widens_k_until_k_distinct_sessions(lme):
    s = LME_OFFICIAL.score(lme["q1"], ["distract_1:0", "distract_1:2", "answer_aa_1:0"], [2])
    assert s["session_recall_any@2"] == 1.0  # two turns of distract_1 make one session: k widens to 3 turns
    assert s["session_ndcg_any@2"] == pytest.approx(R3)
    assert s["turn_recall_any@2"] == 0.0
    # a ranking that never reaches k sessions is read whole (k grows past the corpus size)
    short = LME_OFFICIAL.score(lme["q1"], ["answer_aa_1:0"], [3])
    assert (short["session_recall_all@3"], short["session_ndcg_any@3"]) == (1.0, 1.0)


def test_lme_official_question_without_user_side_evidence(lme):
    q2 = lme["q2"]
    assert q2["gold"]["official"] == {"turn": []} and q2["gold"]["turn"] == ["answer_bb_1:1"]
    s = LME_OFFICIAL.score(q2, ["answer_bb_1:1", "answer_bb_1:0"], [1])
    # eval_utils: any() of no gold is 0, all() of no gold is 1, NDCG 0
    assert (s["turn_recall_any@1"], s["turn_recall_all@1"], s["turn_ndcg_any@1"]) == (0.0, 1.0, 0.0)
    assert (s["session_recall_any@1"], s["session_recall_all@1"], s["session_ndcg_any@1"]) == (0.0, 1.0, 0.0)
    assert MEMLENS.score(q2, ["answer_bb_1:1"], [1])["turn_recall_any@1"] == 1.0


def test_lme_official_means_count_every_question_but_abstention(lme):
    rankings = {"q1": ["answer_aa_1:0"], "q2": ["answer_bb_1:0"], "q3_abs": ["distract_1:0"]}
    items = []
    for qid, q in lme.items():
        items.append({**q, "scores": score_question("longmemeval", q, rankings[qid], [1]), "excluded": q["excluded"]})
    out = summarise_run("longmemeval", items, [1])
    official, ours = out["official"], out["memlens"]
    # q1 found (1, 1), q2 has no user gold (0, 1); q3_abs left out
    assert official["metrics"]["turn_recall_any@1"] == 0.5 and official["metrics"]["turn_recall_all@1"] == 1.0
    assert official["counts"]["left_out"] == 1 and official["counts"]["without_user_evidence"] == 1
    assert official["by_category"]["single-session-assistant"]["turn_recall_all@1"] == 1.0
    # ours: q1's gold turns are answer_aa_1:0 and answer_aa_2:1 (1 of 2 found), q2's assistant turn missed
    assert ours["metrics"]["turn_recall_any@1"] == 0.5 and ours["metrics"]["turn_recall_all@1"] == 0.0
    assert ours["counts"]["left_out"] == 1


# --- LoCoMo -------------------------------------------------------------------------------------


def _locomo_q(evidence, category="single-hop"):
    return {"question_id": "c:q", "category": category, "gold": {"turn": [], "official": {"evidence": evidence}}}


def test_locomo_official_reads_evidence_as_written_and_rounds_to_three_places():
    q = _locomo_q(["D1:3", "D2:1; D3:4", "D1:3"])  # a repeat counts twice, a joined entry never matches
    s = LOCOMO_OFFICIAL.score(q, ["D1:3", "D2:1", "D3:4", "D5:5"], [1, 4])
    assert s["turn_evidence_recall@1"] == 0.667 and s["turn_evidence_recall@4"] == 0.667
    # summary mode: an entry's session is the digits before its first colon ("D2:1; D3:4" -> "2")
    assert s["session_evidence_recall@1"] == 0.667
    odd = LOCOMO_OFFICIAL.score(_locomo_q(["D30:05", "D:11:26"]), ["D30:5", "D11:26"], [2])
    assert odd["turn_evidence_recall@2"] == 0.0  # zero padding and an extra colon: no exact match
    assert odd["session_evidence_recall@2"] == 0.5  # "D30:05" is session 30; "D:11:26" has no session


def test_locomo_official_top_k_are_distinct_dia_ids():
    s = LOCOMO_OFFICIAL.score(_locomo_q(["D1:2"]), ["D1:1", "D1:1", "D1:2"], [2])
    assert s["turn_evidence_recall@2"] == 1.0


def test_locomo_official_mean_divides_by_every_question_adversarial_included():
    qs = [
        {**_locomo_q(["D1:1", "D1:2"]), "question_id": "c:q0"},
        {**_locomo_q(["D1:1"], "adversarial"), "question_id": "c:q1", "excluded": True},
        {**_locomo_q([], "open-domain"), "question_id": "c:q2"},
    ]
    items = [{**q, "scores": score_question("locomo", q, ["D1:1"], [1])} for q in qs]
    assert items[2]["scores"]["official"]["turn_evidence_recall@1"] == 1.0  # evaluation.py's value, not summed
    out = summarise_run("locomo", items, [1])
    official = out["official"]
    assert official["metrics"]["turn_evidence_recall@1"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert official["by_category"] == {
        "adversarial": {"turn_evidence_recall@1": 1.0, "session_evidence_recall@1": 1.0},
        "open-domain": {"turn_evidence_recall@1": 0.0, "session_evidence_recall@1": 0.0},
        "single-hop": {"turn_evidence_recall@1": 0.5, "session_evidence_recall@1": 1.0}}
    assert official["counts"]["without_evidence"] == 1 and official["counts"]["counted"] == 3


def test_memlens_leaves_out_what_it_does_not_score():
    q_adv = {"question_id": "c:q1", "category": "adversarial", "excluded": True,
             "gold": {"turn": ["D1:1"], "session": ["D1"]}}
    q_empty = {"question_id": "c:q2", "category": "open-domain", "excluded": False, "gold": {"turn": [], "session": []}}
    items = [{**q, "scores": score_question("locomo", q, ["D1:1"], [1])} for q in (q_adv, q_empty)]
    ours = summarise_run("locomo", items, [1])["memlens"]
    assert ours["metrics"]["turn_recall_any@1"] is None
    # per category: None is "not scored", not a zero
    assert ours["by_category"]["adversarial"]["turn_evidence_recall@1"] is None
    assert ours["by_category"]["open-domain"]["turn_evidence_recall@1"] is None
    assert ours["counts"]["left_out"] == 1 and ours["counts"]["empty_gold"]["turn"] == 1


# --- registry -----------------------------------------------------------------------------------


def test_schemes_and_their_recorded_definitions():
    assert [s.name for s in schemes_for("locomo")] == ["official", "memlens"]
    assert [s.name for s in schemes_for("longmemeval")] == ["official", "memlens"]
    assert [s.name for s in schemes_for("convomem")] == ["memlens"]
    assert "no retrieval metric" in schemes_for("convomem")[0].label
    assert [s.name for s in schemes_for("a-new-dataset")] == ["memlens"]  # every dataset is scored by ours
    recorded = describe("longmemeval")
    assert recorded["default"] == "official" and recorded["schemes"]["official"]["official"] is True
    assert "noans" in definition(recorded, "official", "session_recall_any@5")
    assert definition(recorded, "memlens", "turn_mrr").startswith("ours:")
    assert definition(recorded, "official", "turn_precision@5") is None
    for scheme in (*schemes_for("locomo"), *schemes_for("longmemeval")):
        assert all(len(text.splitlines()) == 1 for text in scheme.definitions.values())


def test_the_readme_defines_every_metric_of_every_scheme_as_recorded():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    for dataset in ("locomo", "longmemeval", "convomem"):
        for scheme in schemes_for(dataset):
            for key, text in scheme.definitions.items():
                assert f"- `{key}`: {text}" in readme, (dataset, scheme.name, key)
