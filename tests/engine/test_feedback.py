"""Pseudo-relevance feedback and session evidence (issue 16): built, switched by name, in the trace."""

from __future__ import annotations

import pytest

from engine.embed.hashing import HashingEmbedder
from engine.memory import MemoryEngine
from engine.retrieve.recipes import NOT_SHIPPED, get_recipe

from .test_recall_context import SCOPE, by_message, session

NEW = ("prf_terms", "prf_vector", "session_evidence")


@pytest.fixture
def engine(tmp_path):
    eng = MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(256), llm=False)
    session(eng, 1, "2023-05-09T10:00:00Z", [
        ("Tim", "I finished the novel about dragons, the library copy had a torn cover."),
        ("Anna", "The library shelf by the window has every dragon novel."),
        ("Tim", "I read books on the train every morning."),
        ("Anna", "Reading on the train sounds relaxing."),
    ])
    session(eng, 2, "2023-06-02T10:00:00Z", [
        ("Tim", "My shelf is full, I need a bigger one for the library sale."),
        ("Anna", "Great, see you at the gym then."),
    ])
    session(eng, 3, "2023-07-02T10:00:00Z", [
        ("Anna", "The gym was packed today."),
        ("Tim", "Awesome, the gym is great."),
    ])
    yield eng
    eng.close()


def test_the_new_mechanisms_ship_off_until_held_out_folds_say_otherwise(engine):
    assert set(NEW) <= set(NOT_SHIPPED)
    for name in ("default", "offline", "hand"):
        assert all(not get_recipe(name).on(f) for f in NEW)
    res = engine.recall("What books has Tim read?", scope=SCOPE, k=5, origin="bench")
    assert "prf" not in res.trace.params and "session_evidence" not in res.trace.params
    assert all("prf_fts" not in c.channels and "session_evidence" not in c.components
               for c in res.trace.candidates.values())


def test_feedback_expands_with_what_the_best_turns_share_not_the_question_or_names(engine):
    res = engine.recall("What books has Tim read?", scope=SCOPE, k=5, origin="bench", on=["prf_terms"])
    prf = res.trace.params["prf"]
    words = [w for w, _ in prf["terms"]]
    assert prf["seeds"] and words
    assert "library" in words  # said by several of the best turns, and rare in the store
    assert not {"books", "read", "tim", "anna"} & set(words)  # the question's own words, names
    assert all(weight > 0 for _, weight in prf["terms"])
    # the second round is its own channel: the turn that says the shared words, not the gym talk
    found = by_message(engine, res)
    assert "prf_fts" in found["D2:1"].channels
    assert all("prf_fts" not in c.channels for c in res.trace.candidates.values() if "gym" in c.meta["text"])
    assert any(s["name"] == "feedback" for s in res.trace.stages)


def test_rocchio_feedback_searches_again_with_the_moved_query_vector(engine):
    res = engine.recall("What books has Tim read?", scope=SCOPE, k=5, origin="bench", on=["prf_vector"])
    assert res.trace.params["prf"]["seeds"]
    assert "terms" not in res.trace.params["prf"]  # prf_terms is still off
    assert any("prf_vector" in c.channels for c in res.trace.candidates.values())


def test_a_session_that_says_the_questions_words_between_its_turns_leads_as_a_whole(engine):
    res = engine.recall("dragon novel library train", scope=SCOPE, k=8, origin="bench", on=["session_evidence"])
    found = by_message(engine, res)
    assert found["D1:3"].components["session_evidence"] == pytest.approx(0.2)  # the best session: 1.0 x weight
    assert found["D1:3"].components["session_evidence"] > found["D2:1"].components.get("session_evidence", 0.0)
    assert res.trace.params["session_evidence"]
    off = engine.recall("dragon novel library train", scope=SCOPE, k=8, origin="bench")
    assert all("session_evidence" not in c.components for c in off.trace.candidates.values())
