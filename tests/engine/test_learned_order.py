"""learned_order: a small fixed model orders one speaker's statements the rules left undecided."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.embed.local import LocalEmbedder
from engine.ingest.formats.chat import parse_json
from engine.memory import MemoryEngine
from engine.retrieve import order
from engine.retrieve.order import FEATURE_NAMES
from engine.retrieve.recipes import NOT_SHIPPED
from engine.retrieve.trace import Trace
from engine.scope import Scope

S = Scope.default("dana", "bot")


def _model(**weights: float) -> dict:
    f = len(FEATURE_NAMES)
    w = [weights.get(n, 0.0) for n in FEATURE_NAMES]
    return {"features": list(FEATURE_NAMES), "depth": 10, "mean": [0.0] * f, "scale": [1.0] * f, "weights": w,
            "bias": -1.0, "threshold": 0.5}


# a later plain change is a replacement; a plan, wish or hypothetical is not
MODEL = _model(l_change=4.0, l_modal=-6.0)


def _trace(later: str) -> Trace:
    t = Trace(query="Where do I live now?", origin="test", recipe="offline", k=5, as_of=None)
    for mid, text, when, score in ((1, "user: I live in a flat in Berlin.", "2024-01-10T10:00:00Z", 0.9),
                                   (2, f"user: {later}", "2024-06-12T10:00:00Z", 0.7),
                                   (3, "assistant: Nice!", "2024-06-12T10:00:00Z", 0.5)):
        c = t.candidate(mid)
        c.score = score
        c.components = {"fusion": score}
        c.meta = {"text": text, "kind": "episode", "speaker": text.split(":")[0], "source_time": when,
                  "trust": "user", "document_id": mid, "chunk_id": mid}
    return t


def _vectors(ids: list[int]) -> dict[int, np.ndarray]:
    return {i: np.ones(4) / 2.0 for i in ids}


def _ranked(t: Trace) -> list[int]:
    return [c.memory_id for c in sorted(t.alive(), key=lambda c: -c.score)]


def test_a_later_change_with_a_high_probability_leads_and_is_traced():
    t = _trace("I moved to Munich last week.")
    order.apply(t, MODEL, np.ones(4) / 2.0, _vectors, {"live"})
    assert _ranked(t)[:2] == [2, 1]
    mark = t.params["outdated"]["1"]
    assert mark["rule"] == "learned_order" and mark["by"] == 2 and mark["on"] == "2024-06-12"
    assert mark["code"] == "learned_order.p" and mark["p"] > 0.5 and "P=" in mark["reason"]
    assert t.candidates[2].components["learned_order"] > 0
    assert t.params["learned_order"]["fired"] == {"1": mark["p"]}
    assert len(t.candidates[2].meta["order_rows"]) == 1  # the pair the fit reads back


def test_a_plan_does_not_replace_the_state():
    t = _trace("I might move to Munich next year.")
    order.apply(t, MODEL, np.ones(4) / 2.0, _vectors, {"live"})
    assert _ranked(t) == [1, 2, 3] and "outdated" not in t.params
    assert t.params["learned_order"]["fired"] == {}


def test_no_model_changes_nothing_and_says_why():
    t = _trace("I moved to Munich last week.")
    order.apply(t, None, None, _vectors, set())
    assert _ranked(t) == [1, 2, 3] and "skipped" in t.params["learned_order"]


def test_pairs_a_rule_already_ordered_are_left_to_it():
    t = _trace("I moved to Munich last week.")
    t.params["outdated"] = {"2": {"by": 9, "rule": "same_slot"}}
    assert order.pairs_of(t, 10) == []


@pytest.fixture(scope="module")
def embedder():
    return LocalEmbedder()


def test_off_by_default_and_a_model_that_never_fires_changes_no_ranking(tmp_path, embedder):
    assert "learned_order" in NOT_SHIPPED
    never = tmp_path / "never.json"
    never.write_text(json.dumps({**MODEL, "threshold": 2.0}), encoding="utf-8")
    sure = tmp_path / "sure.json"
    sure.write_text(json.dumps(_model(l_plain=0.0) | {"bias": 30.0}), encoding="utf-8")  # every pair fires
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as eng:
        convs = [{"id": f"s{n}", "messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": text, "timestamp": when, "id": f"s{n}:{i}"}
            for i, text in enumerate(turns)]} for n, (when, turns) in enumerate([
                ("2024-01-10T10:00:00Z", ["I'm on the 3rd floor of a block in Harrow, renting.", "Sounds cosy."]),
                ("2024-06-12T09:30:00Z", ["The cottage in Wendover came with a massive overgrown veg patch.",
                                          "Lovely!"])], start=1)]
        eng.ingest_documents(parse_json(convs, name="chat.json"), scope=S, extract="none")
        q = "Where do I live now?"
        off = eng.recall(q, scope=S, persist=False)
        quiet = eng.recall(q, scope=S, persist=False, on=("learned_order",), order_model=str(never))
        assert quiet.ordered_ids == off.ordered_ids and "learned_order" in quiet.trace.params
        moved = eng.recall(q, scope=S, persist=False, on=("learned_order",), order_model=str(sure))
        marks = moved.trace.params.get("outdated") or {}
        assert any(m["rule"] == "learned_order" for m in marks.values())
        old = int(next(k for k, m in marks.items() if m["rule"] == "learned_order"))
        explained = eng.explain(q, old, scope=S, persist=False, on=("learned_order",), order_model=str(sure))
        assert "learned_order" in explained["detail"]
