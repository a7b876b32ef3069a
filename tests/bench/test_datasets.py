"""Benchmark loaders on invented fixtures (every quirk the real files have), plus count checks
against the real development split when ../shared/data is beside the checkout (tests.shared_data)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from engine.bench.datasets import (
    CONVOMEM_CATEGORIES,
    LOCOMO_CATEGORIES,
    ConvoMemDataset,
    LocomoDataset,
    LongMemEvalDataset,
    detect_dataset,
    load_convomem,
    load_dataset,
    load_locomo,
    load_longmemeval,
    sha256_file,
)
from engine.errors import BadInput, UnknownFormat
from tests.shared_data import SHARED_DATA, needs_shared

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"
LOCOMO = FIXTURES / "bench_locomo_tiny.json"
LME_S = FIXTURES / "bench_longmemeval_s_tiny.json"
LME_ORACLE = FIXTURES / "bench_longmemeval_oracle_tiny.json"
CONVOMEM = FIXTURES / "convomem_tiny.json"



def _write(tmp_path: Path, data: object, name: str = "data.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- LoCoMo ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def locomo() -> LocomoDataset:
    return load_locomo(LOCOMO)


def test_locomo_conversations_sessions_turns(locomo):
    first, second = locomo.conversations
    assert (first.sample_id, first.speaker_a, first.speaker_b) == ("conv-x1", "Odile", "Tamsin")
    # session_4 has a date key but no turn list: it is not a session.
    assert [s.number for s in first.sessions] == [1, 2, 3]
    assert [s.session_id for s in first.sessions] == [
        "conv-x1:session_1",
        "conv-x1:session_2",
        "conv-x1:session_3",
    ]
    s1 = first.sessions[0]
    assert s1.date == "1:56 pm on 8 May, 2023"
    assert s1.time == "2023-05-08T13:56:00Z"
    assert first.sessions[1].time == "2023-06-20T09:05:00Z"
    assert first.sessions[2].time == "2023-07-01T00:00:00Z"  # 12:00 am is midnight
    assert [t.dia_id for t in s1.turns] == ["D1:1", "D1:2", "D1:3"]
    assert s1.turns[0].speaker == "Odile" and s1.turns[0].blip_caption is None
    assert s1.turns[1].blip_caption == "a photo of a patchwork quilt with orange squares"
    assert {t.session for t in first.sessions[1].turns} == {2}
    assert len(second.turns()) == 2
    assert locomo.stats() == {
        "conversations": 2,
        "sessions": 4,
        "turns": 10,
        "questions": 12,
        "by_category": {1: 2, 2: 2, 3: 1, 4: 5, 5: 2},
        "questions_without_evidence": 2,
    }


def test_locomo_questions_answers_and_categories(locomo):
    q = {x.question_id: x for x in locomo.questions}
    assert list(q)[:3] == ["conv-x1:q0", "conv-x1:q1", "conv-x1:q2"]
    assert q["conv-x1:q0"].answer == "Pimento"
    assert q["conv-x1:q0"].category == 4 and q["conv-x1:q0"].category_name == "single-hop"
    assert q["conv-x1:q1"].answer == "2021"  # an int in the file
    assert q["conv-x1:q1"].category_name == "temporal"
    assert q["conv-x1:q2"].category_name == "multi-hop"
    assert q["conv-x1:q6"].category_name == "open-domain"
    adversarial = q["conv-x1:q7"]
    assert adversarial.category_name == "adversarial"
    assert adversarial.answer is None and adversarial.adversarial_answer == "Pimento"
    both = q["conv-x1:q8"]
    assert both.answer == "Not mentioned" and both.adversarial_answer == "a quilt"
    assert q["conv-x2:q1"].sample_id == "conv-x2" and q["conv-x2:q1"].index == 1


def test_locomo_category_codes_are_the_datas_not_the_papers():
    assert LOCOMO_CATEGORIES == {
        1: "multi-hop",
        2: "temporal",
        3: "open-domain",
        4: "single-hop",
        5: "adversarial",
    }


def test_locomo_evidence_normalisation(locomo):
    q = {x.question_id: x for x in locomo.questions}
    assert q["conv-x1:q2"].evidence == ("D1:2", "D2:2")  # "D1:2; D2:2"
    assert q["conv-x1:q2"].raw_evidence == ("D1:2; D2:2",)
    assert q["conv-x1:q3"].evidence == ("D1:1", "D2:1", "D2:3")  # "D1:1 D2:1 D2:3"
    assert q["conv-x1:q4"].evidence == ("D2:2",)  # "D2:02"
    assert q["conv-x1:q5"].evidence == ("D3:1",)  # "D:3:1"
    assert q["conv-x1:q6"].evidence == ()
    assert q["conv-x1:q9"].evidence == ("D3:2",)  # "D" and "D9:9" dropped, repeat removed
    assert q["conv-x2:q1"].evidence == ()  # its only id names no turn
    assert q["conv-x1:q3"].evidence_sessions == ("conv-x1:session_1", "conv-x1:session_2")
    assert q["conv-x1:q5"].evidence_sessions == ("conv-x1:session_3",)


def test_locomo_quirk_report(locomo):
    report = locomo.quirks.as_dict()
    assert report["counts"] == {
        "adversarial_with_answer": 1,
        "date_without_session": 1,
        "empty_evidence": 1,
        "evidence_dropped": 3,
        "evidence_duplicate": 1,
        "evidence_extra_colon": 1,
        "evidence_split": 2,
        "evidence_zero_padded": 1,
        "int_answer": 1,
        "no_valid_evidence": 1,
    }
    examples = report["examples"]
    assert examples["evidence_split"] == [
        "conv-x1:q2: 'D1:2; D2:2' -> D1:2, D2:2",
        "conv-x1:q3: 'D1:1 D2:1 D2:3' -> D1:1, D2:1, D2:3",
    ]
    assert examples["evidence_zero_padded"] == ["conv-x1:q4: 'D2:02' -> D2:2"]
    assert examples["evidence_extra_colon"] == ["conv-x1:q5: 'D:3:1' -> D3:1"]
    assert examples["evidence_dropped"] == [
        "conv-x1:q9: 'D' (not a dia_id)",
        "conv-x1:q9: 'D9:9' (no such turn)",
        "conv-x2:q1: 'D4:1' (no such turn)",
    ]
    assert examples["empty_evidence"] == ["conv-x1:q6"]
    assert examples["no_valid_evidence"] == ["conv-x2:q1"]
    assert examples["date_without_session"] == ["conv-x1:session_4"]


def test_locomo_checksum_and_detection(locomo):
    digest = hashlib.sha256(LOCOMO.read_bytes()).hexdigest()
    assert locomo.sha256 == digest == sha256_file(LOCOMO)
    assert detect_dataset(LOCOMO) == "locomo"
    assert isinstance(load_dataset(LOCOMO), LocomoDataset)


REALTALK = FIXTURES / "realtalk"  # two chats written to REALTALK's published shape, one file each


def test_realtalk_folder_is_one_locomo_dataset(tmp_path):
    assert detect_dataset(REALTALK) == "locomo" and detect_dataset(REALTALK / "Chat_1_Ana_Ben.json") == "locomo"
    ds = load_dataset(REALTALK)
    assert isinstance(ds, LocomoDataset)
    assert [c.sample_id for c in ds.conversations] == ["Chat_1_Ana_Ben", "Chat_2_Cai_Dev"]
    ana = ds.conversations[0]
    assert (ana.speaker_a, ana.speaker_b) == ("Ana", "Ben")
    assert [(s.date, s.time) for s in ana.sessions] == [
        ("29.12.2023, 23:51:12", "2023-12-29T23:51:12Z"), ("04.01.2024, 18:02:00", "2024-01-04T18:02:00Z")]
    assert ana.sessions[0].turns[0].text == "hey how was ur weekend"  # clean_text
    assert [(q.question_id, q.category_name, q.evidence) for q in ds.questions][:2] == [
        ("Chat_1_Ana_Ben:q0", "temporal", ("D1:4",)), ("Chat_1_Ana_Ben:q1", "multi-hop", ("D2:1", "D2:3"))]
    # the folder's checksum follows every file in it
    copy = tmp_path / "rt"
    shutil.copytree(REALTALK, copy)
    assert load_dataset(copy).sha256 == ds.sha256
    (copy / "Chat_2_Cai_Dev.json").write_text((copy / "Chat_2_Cai_Dev.json").read_text().replace("bakery", "cafe"))
    assert load_dataset(copy).sha256 != ds.sha256


def test_a_folder_mixing_realtalk_with_other_files_is_refused(tmp_path):
    shutil.copytree(REALTALK, tmp_path / "rt")
    shutil.copy(CONVOMEM, tmp_path / "rt" / "z.json")
    with pytest.raises(BadInput, match=r"z\.json: not LoCoMo or REALTALK, like the folder's first file"):
        load_dataset(tmp_path / "rt")


def test_locomo_dates_that_do_not_parse_are_reported(tmp_path):
    data = [
        {
            "sample_id": "s",
            "conversation": {
                "speaker_a": "A",
                "speaker_b": "B",
                "session_1_date_time": "sometime in spring",
                "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hello"}],
                "session_2": [{"speaker": "B", "dia_id": "D2:1", "text": "hi"}],
            },
            "qa": [{"question": "?", "answer": "x", "evidence": ["D1:1"], "category": 4}],
        }
    ]
    ds = load_locomo(_write(tmp_path, data))
    assert [(s.date, s.time) for s in ds.conversations[0].sessions] == [
        ("sometime in spring", None),
        (None, None),
    ]
    assert ds.quirks.counts == {"unparsed_date": 1, "session_without_date": 1}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"sample_id": "s"}, "not LoCoMo"),
        ([], "not LoCoMo"),
        ([{"sample_id": "s", "conversation": []}], "no \"conversation\""),
        ([{"conversation": {"session_1": []}, "qa": []}], "sample_id"),
        ([{"sample_id": "s", "conversation": {"session_1": "x"}, "qa": []}], "not a list of turns"),
        ([{"sample_id": "s", "conversation": {}, "qa": []}], "no session_<n> lists"),
        (
            [{"sample_id": "s", "conversation": {"session_1": [{"speaker": "A", "text": "t"}]}, "qa": []}],
            "dia_id",
        ),
        (
            [
                {
                    "sample_id": "s",
                    "conversation": {"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "t"}]},
                }
            ],
            "\"qa\"",
        ),
        (
            [
                {
                    "sample_id": "s",
                    "conversation": {"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "t"}]},
                    "qa": [{"question": "?", "answer": "a", "evidence": [], "category": 7}],
                }
            ],
            "category 7",
        ),
        (
            [
                {
                    "sample_id": "s",
                    "conversation": {"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "t"}]},
                    "qa": [{"question": "?", "answer": "a", "evidence": "D1:1", "category": 4}],
                }
            ],
            "evidence",
        ),
    ],
)
def test_locomo_malformed_is_bad_input(tmp_path, data, reason):
    path = _write(tmp_path, data)
    with pytest.raises(BadInput) as info:
        load_locomo(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    assert reason in message


# --- LongMemEval ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lme_s() -> LongMemEvalDataset:
    return load_longmemeval(LME_S)


def test_longmemeval_s_questions(lme_s):
    assert lme_s.variant == "haystack"
    first, second, abstain = lme_s.questions
    assert first.question_id == "b7e1c0de" and first.question_type == "single-session-user"
    assert first.category == "single-session-user"
    assert first.answer == "12"  # an int in the file
    assert first.question_date == "2023-05-30T23:40:00Z"
    assert first.question_date_raw == "2023/05/30 (Tue) 23:40"
    assert not first.abstention and abstain.abstention
    assert first.answer_session_ids == ("answer_b7e1c0de_1",)
    # The repeated session id keeps the first occurrence only.
    assert [s.session_id for s in first.sessions] == [
        "sharegpt_k2P9x",
        "answer_b7e1c0de_1",
        "ultrachat_55120",
    ]
    assert first.sessions[0].turns[0].content.startswith("Can you suggest")
    assert first.sessions[1].date == "2023-05-12T19:02:00Z"
    assert first.sessions[1].date_raw == "2023/05/12 (Fri) 19:02"
    turns = first.sessions[1].turns
    assert [(t.index, t.role, t.has_answer) for t in turns] == [
        (0, "user", False),
        (1, "user", True),
        (2, "assistant", False),
    ]
    assert turns[1].turn_id("answer_b7e1c0de_1") == "answer_b7e1c0de_1:1"
    assert first.sessions[0].turns[0].has_answer is None  # distractors carry no key in S
    assert first.evidence_turn_ids == ("answer_b7e1c0de_1:1",)
    assert second.evidence_turn_ids == ("answer_c3d4e5f6_1:0",)
    assert abstain.evidence_turn_ids == ()


def test_longmemeval_s_quirks_and_stats(lme_s):
    assert lme_s.quirks.as_dict() == {
        "counts": {
            "answer_session_without_evidence_turns": 2,
            "duplicate_session": 1,
            "int_answer": 1,
            "question_without_evidence_turns": 1,
        },
        "examples": {
            "answer_session_without_evidence_turns": [
                "c3d4e5f6: answer_c3d4e5f6_2",
                "d9a8b7c6_abs: answer_d9a8b7c6_abs_1",
            ],
            "duplicate_session": ["b7e1c0de: sharegpt_k2P9x"],
            "int_answer": ["b7e1c0de"],
            "question_without_evidence_turns": ["d9a8b7c6_abs"],
        },
    }
    assert lme_s.stats() == {
        "questions": 3,
        "abstention": 1,
        "sessions": 8,
        "turns": 17,
        "evidence_turns": 2,
        "by_type": {"multi-session": 1, "single-session-user": 1, "temporal-reasoning": 1},
    }


def test_longmemeval_oracle_shape():
    ds = load_longmemeval(LME_ORACLE)
    assert ds.variant == "oracle"
    assert not ds.quirks
    update, assistant = ds.questions
    # Every oracle turn has has_answer; the order of sessions is the file's.
    assert all(t.has_answer is not None for s in update.sessions for t in s.turns)
    assert update.evidence_turn_ids == ("answer_e1f2a3b4_2:0", "answer_e1f2a3b4_1:0")
    assert assistant.evidence_turn_ids == ("answer_f5e6d7c8:1",)
    assert update.question_date == "2023-09-03T20:23:00Z"
    assert update.sessions[1].date == "2023-06-18T00:48:00Z"
    assert detect_dataset(LME_ORACLE) == "longmemeval"
    assert isinstance(load_dataset(LME_S), LongMemEvalDataset)


def _lme_item(**changes: object) -> dict[str, object]:
    item: dict[str, object] = {
        "question_id": "x1",
        "question_type": "single-session-user",
        "question": "?",
        "answer": "a",
        "question_date": "2023/01/02 (Mon) 03:04",
        "haystack_dates": ["2023/01/01 (Sun) 00:00"],
        "haystack_session_ids": ["answer_x1"],
        "haystack_sessions": [[{"role": "user", "content": "c", "has_answer": True}]],
        "answer_session_ids": ["answer_x1"],
    }
    item.update(changes)
    return item


def test_longmemeval_odd_but_loadable(tmp_path):
    data = [
        _lme_item(question_date="yesterday-ish", answer_session_ids=["answer_x1", "answer_gone"]),
        _lme_item(
            question_id="x2",
            haystack_session_ids=["s_other"],
            haystack_sessions=[[{"role": "user", "content": 5, "has_answer": True}]],
        ),
    ]
    ds = load_longmemeval(_write(tmp_path, data))
    assert ds.questions[0].question_date is None
    assert ds.questions[0].question_date_raw == "yesterday-ish"
    assert ds.questions[1].sessions[0].turns[0].content == "5"
    assert ds.quirks.counts == {
        "unparsed_date": 1,
        "answer_session_not_in_haystack": 2,  # "answer_gone", and x2's "answer_x1"
        "non_string_content": 1,
        "evidence_turn_outside_answer_sessions": 1,
    }
    assert ds.variant == "haystack"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"haystack_sessions": []}, "haystack_session_ids"),
        ([], "not LongMemEval"),
        ([_lme_item(question=None)], "\"question\""),
        ([_lme_item(answer_session_ids=None)], "answer_session_ids"),
        ([_lme_item(haystack_dates=[])], "differ in length"),
        ([_lme_item(haystack_sessions=["nope"])], "not a list of turns"),
        ([_lme_item(haystack_sessions=[["nope"]])], "not a JSON object"),
        ([_lme_item(), _lme_item()], "appears twice"),
        ([_lme_item(), 3], "item 1"),
    ],
)
def test_longmemeval_malformed_is_bad_input(tmp_path, data, reason):
    path = _write(tmp_path, data)
    with pytest.raises(BadInput) as info:
        load_longmemeval(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    assert reason in message


# --- ConvoMem -------------------------------------------------------------------------------

CONVOMEM_PREMIXED = FIXTURES / "convomem_premixed_tiny.json"


@pytest.fixture(scope="module")
def convomem() -> ConvoMemDataset:
    return load_convomem(CONVOMEM)


@pytest.fixture(scope="module")
def premixed() -> ConvoMemDataset:
    return load_convomem(CONVOMEM_PREMIXED)


def test_convomem_core_items_are_one_test_case_each_with_gold_by_exact_text(convomem):
    assert [c.case_id for c in convomem.cases] == [f"convomem_tiny#{i}" for i in range(3)]
    assert {c.layout for c in convomem.cases} == {"core"}
    first, second, third = convomem.questions
    assert first.question_id == "convomem_tiny:q0" and first.case_id == "convomem_tiny#0"
    assert first.category == "user facts" and first.use_case is None and first.answer == "The bassoon"
    conversations = convomem.cases[0].conversations
    assert [c.conversation_id for c in conversations] == ["c0", "c1"]
    assert conversations[1].source_id == "conv-beta" and conversations[1].contains_evidence is True
    # the message has the evidence text inside surrounding whitespace: not the exact text, so not gold
    assert first.evidence == () and first.unmatched_evidence == 1
    # A repeated evidence text counts once; every message that carries it exactly is gold.
    assert second.evidence_texts == ("I'm going to Tallinn in March.", "After Tallinn I'll take the bus to Riga.")
    assert second.evidence == ("c0:0", "c1:1") and second.evidence_sessions == ("c0", "c1")
    assert second.unmatched_evidence == 1
    assert third.category is None and third.evidence == () and third.unmatched_evidence == 1


def test_convomem_quirks_report_every_evidence_text_that_matches_no_message(convomem):
    quirks = convomem.quirks.as_dict()
    assert quirks["counts"] == {"category_outside_the_benchmark": 1, "contains_evidence_mismatch": 2,
                                "duplicate_evidence": 1, "evidence_text_on_several_messages": 1,
                                "unmatched_evidence": 3}
    assert quirks["examples"]["unmatched_evidence"] == [
        "convomem_tiny:q0: evidence 0 (equals message c1:1 only without surrounding whitespace)",
        "convomem_tiny:q1: evidence 1", "convomem_tiny:q2: evidence 0"]
    stats = convomem.stats()
    assert stats["questions"] == 3 and stats["test_cases"] == 3 and stats["messages"] == 11
    assert stats["evidence_texts"] == 4 and stats["evidence_messages"] == 2 and stats["unmatched_evidence"] == 3
    assert stats["by_category"] == {"": 1, "user facts": 2}


def test_convomem_premixed_is_one_haystack_for_all_its_questions(premixed):
    (case,) = premixed.cases
    assert case.layout == "premixed" and case.context_size == 3 and case.case_id == "convomem_premixed_tiny"
    assert [c.source_id for c in case.conversations] == ["bakery_session_1", "bakery_session_2", "bakery_session_3"]
    q0, q1, q2, q3 = case.questions
    assert [q.category for q in case.questions] == ["basic facts", "temporal", "reasoning", "abstention"]
    assert q0.evidence == ("c1:0",) and q0.evidence_sessions == ("c1",)
    # "Thanks!" is in all three conversations; the item names sessions 1 and 3 as its own
    assert q1.evidence == ("c0:1", "c0:2", "c2:0") and q1.evidence_sessions == ("c0", "c2")
    assert q2.evidence_texts == () and q2.evidence == ()
    assert q3.evidence == () and q3.unmatched_evidence == 1
    assert premixed.quirks.counts == {"contains_evidence_mismatch": 1, "evidence_text_on_several_messages": 1,
                                      "no_evidence": 1, "unmatched_evidence": 1}
    assert premixed.quirks.examples["contains_evidence_mismatch"] == ["convomem_premixed_tiny: c2"]


def test_convomem_categories_come_from_the_core_folders(tmp_path):
    item = json.loads(CONVOMEM.read_text(encoding="utf-8"))["evidence_items"][2]
    as_list = _write(tmp_path, [item, item], "list.json")
    assert len(load_convomem(as_list).questions) == 2
    assert detect_dataset(as_list) == "convomem"
    for folder_name, shown in CONVOMEM_CATEGORIES.items():
        folder = tmp_path / "core" / folder_name / "1_evidence"
        folder.mkdir(parents=True)
        _write(folder, {"evidence_items": [{**item, "category": "Travel plans"}]}, "person.json")
        (q,) = load_convomem(folder / "person.json").questions
        assert (q.category, q.use_case) == (shown, "Travel plans")
    everything = load_convomem(tmp_path / "core")  # a folder: every file under it, in path order
    assert sorted(q.category for q in everything.questions) == sorted(CONVOMEM_CATEGORIES.values())
    assert len(set(CONVOMEM_CATEGORIES.values())) == 6
    assert detect_dataset(tmp_path / "core") == "convomem" and load_dataset(tmp_path / "core").name == "convomem"
    assert isinstance(load_dataset(CONVOMEM), ConvoMemDataset)


def test_convomem_folder_checksum_covers_names_and_bytes(tmp_path):
    folder = tmp_path / "set"
    folder.mkdir()
    shutil.copy(CONVOMEM_PREMIXED, folder / "category_2_temporal__dataset_0.json")
    first = load_convomem(folder)
    assert first.stats()["files"] == 1 and first.sha256 != sha256_file(CONVOMEM_PREMIXED)
    (folder / "category_2_temporal__dataset_0.json").rename(folder / "other.json")
    assert load_convomem(folder).sha256 != first.sha256
    (folder / "notes.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(BadInput, match="notes.json: not a ConvoMem file"):
        load_convomem(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInput, match="no .json files"):
        load_convomem(empty)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"evidence_items": []}, "not ConvoMem"),
        ({"evidenceItems": [], "conversations": []}, "not a non-empty list"),
        ({"evidenceItems": [{"question": "?", "message_evidences": []}]}, "\"conversations\" list"),
        ({"evidence_items": [{"question": "?", "conversations": []}]}, "message_evidences"),
        ({"evidence_items": [{"message_evidences": [], "conversations": []}]}, "\"question\""),
        (
            [{"question": "?", "message_evidences": [{"speaker": "U"}], "conversations": []}],
            "message_evidences[0]",
        ),
        (
            [{"question": "?", "message_evidences": [], "conversations": [{"turns": []}]}],
            "\"messages\"",
        ),
    ],
)
def test_convomem_malformed_is_bad_input(tmp_path, data, reason):
    path = _write(tmp_path, data)
    with pytest.raises(BadInput) as info:
        load_convomem(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    assert reason in message


# --- files ----------------------------------------------------------------------------------


def test_unreadable_files_are_bad_input(tmp_path):
    cases = {
        "missing.json": None,
        "empty.json": b"",
        "broken.json": b'[{"sample_id": "s",',
        "latin1.json": '["caf\xe9"]'.encode("latin-1"),
    }
    for name, raw in cases.items():
        path = tmp_path / name
        if raw is not None:
            path.write_bytes(raw)
        for loader in (load_locomo, load_longmemeval, load_convomem, detect_dataset):
            with pytest.raises(BadInput) as info:
                loader(path)
            assert "\n" not in str(info.value) and str(info.value).startswith(str(path))
    with pytest.raises(BadInput, match="line 1:20"):
        load_locomo(tmp_path / "broken.json")
    with pytest.raises(BadInput, match="is a directory"):
        load_locomo(tmp_path)
    with pytest.raises(BadInput, match="no such file"):
        sha256_file(tmp_path / "missing.json")


def test_detect_dataset_refuses_other_json(tmp_path):
    for data in ([{"role": "user", "content": "hi"}], {"messages": []}, [1, 2], "text"):
        with pytest.raises(UnknownFormat):
            detect_dataset(_write(tmp_path, data))


def test_a_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + LME_ORACLE.read_bytes())
    assert len(load_longmemeval(path).questions) == 2


# --- the real development split (read only) ------------------------------------------------


@needs_shared("locomo-dev.json")
def test_real_locomo_dev_counts():
    ds = load_locomo(SHARED_DATA / "locomo-dev.json")
    assert ds.sha256 == "7c2fafddef878db45094b46dded0cad8e2791e930e248003e0a671a05baf4293"
    stats = ds.stats()
    assert stats["conversations"] == 5
    assert stats["sessions"] == 128
    assert stats["turns"] == 2760
    assert stats["questions"] == 999
    assert stats["by_category"] == {1: 142, 2: 156, 3: 46, 4: 418, 5: 237}
    per_conversation = {
        c.sample_id: (len(c.sessions), len(c.turns()))
        for c in ds.conversations
    }
    assert per_conversation == {
        "conv-26": (19, 419),
        "conv-30": (19, 369),
        "conv-41": (32, 663),
        "conv-42": (29, 629),
        "conv-43": (29, 680),
    }
    counts = ds.quirks.counts
    assert counts["empty_evidence"] == 2  # both in conv-26, both category 3
    assert counts["int_answer"] == 6
    assert counts["adversarial_with_answer"] == 2
    assert counts["date_without_session"] == 16  # conv-26 sessions 20-35
    assert sum(1 for q in ds.questions if q.category == 5 and q.answer is None) == 235


@needs_shared("longmemeval-s-dev.json", "longmemeval-dev.json")
def test_real_longmemeval_dev_counts():
    s = load_longmemeval(SHARED_DATA / "longmemeval-s-dev.json")
    assert s.variant == "haystack"
    stats = s.stats()
    assert stats["questions"] == 18
    assert stats["abstention"] == 4
    assert stats["sessions"] == 844
    assert stats["turns"] == 8841
    assert set(stats["by_type"].values()) == {3}
    oracle = load_longmemeval(SHARED_DATA / "longmemeval-dev.json")
    assert oracle.variant == "oracle"
    stats = oracle.stats()
    assert (stats["questions"], stats["abstention"]) == (60, 4)
    assert (stats["sessions"], stats["turns"], stats["evidence_turns"]) == (112, 1283, 101)
    assert detect_dataset(SHARED_DATA / "longmemeval-dev.json") == "longmemeval"


@needs_shared("convomem")
def test_real_convomem_premixed_files_load_with_every_evidence_text_matched():
    folder = load_convomem(SHARED_DATA / "convomem")
    stats = folder.stats()
    assert (stats["files"], stats["test_cases"], stats["layouts"]) == (5, 5, {"premixed": 5})
    assert stats["by_category"] == {"abstention": 47, "basic facts": 32, "multi-session": 70, "reasoning": 13,
                                    "temporal": 37}
    assert stats["evidence_texts"] == stats["evidence_messages"] == 251 and stats["unmatched_evidence"] == 0
    assert folder.quirks.counts == {"no_evidence": 2}  # two reasoning items list no evidence at all
    one = load_dataset(SHARED_DATA / "convomem" / "category_1_basic_facts__dataset_0.json")
    assert [c.context_size for c in one.cases] == [19] and len(one.cases[0].conversations) == 19
    assert {q.category for q in one.questions} == {"basic facts"}


# --- the benchmark's gold names what the importer stores --------------------------------------


@pytest.mark.parametrize("path", [LOCOMO, LME_S, LME_ORACLE], ids=lambda p: p.name)
def test_gold_ids_name_the_importers_chunks_and_documents(path):
    """The loaders build their view on the importer's reader, so every gold turn id is a chunk's
    message_id and every gold session a document's external_id (or LongMemEval session id)."""
    from engine.ingest.formats import locomo, longmemeval

    data = json.loads(path.read_text(encoding="utf-8"))
    dataset = load_dataset(path)
    if isinstance(dataset, LocomoDataset):
        docs = locomo.parse_json(data, name=path.name)
        sessions = {d.external_id for d in docs}
        gold_turns = {e for q in dataset.questions for e in q.evidence}
        gold_sessions = {s for q in dataset.questions for s in q.evidence_sessions}
        assert {s.session_id for c in dataset.conversations for s in c.sessions} >= sessions
    else:
        docs = longmemeval.parse_json(data, name=path.name)
        sessions = {d.meta["session_id"] for d in docs}
        gold_turns = {t for q in dataset.questions for t in q.evidence_turn_ids}
        gold_sessions = {s for q in dataset.questions for s in q.answer_session_ids} & {
            s.session_id for q in dataset.questions for s in q.sessions}
    turns = {c.message_id for d in docs for c in d.chunks}
    assert gold_turns and gold_sessions
    assert gold_turns <= turns and gold_sessions <= sessions
