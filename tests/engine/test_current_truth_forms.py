"""Current truth read from the form of talk (issue 15's mechanisms round): a change told as an
event or marked as the present, an earlier statement that only mentions the asked thing, and a
later turn that asserts nothing of the speaker's present. Phrasings are this file's own, not the
update scenarios'; each check switches its feature on or off by name to show what it does.
told_as_done, said_now and asides_below are built, not shipped (recipes.NOT_SHIPPED): `on` takes
them back; older_mentions is shipped."""

from __future__ import annotations

import pytest

from engine.memory import MemoryEngine
from engine.statements import later_claims

from .test_current_truth import S, chat, first_of, turn_order
from .test_current_truth import embedder as embedder  # noqa: F401  (the module's fixture)

EARLY, LATE = "2023-02-01T09:00:00Z", "2023-10-05T09:00:00Z"


@pytest.fixture
def engine(tmp_path, embedder):  # noqa: F811
    eng = MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False)
    yield eng
    eng.close()


def marks_of(res, rule: str) -> list[dict]:
    return [m for m in (res.trace.params.get("outdated") or {}).values() if m["rule"] == rule]


def asides_of(res) -> set[str]:
    return {a["rule"] for a in (res.trace.params.get("asides") or {}).values()}


def test_a_change_told_as_an_event_replaces_the_earlier_statement(engine):
    # told_as_done: the later turn asserts no state; it tells of something done, tied by a word
    chat(engine, [(EARLY, ["I keep all my notes in Evernote, synced to my phone.", "Handy."]),
                  (LATE, ["exported every Evernote note into Obsidian, took ages. how do backlinks work?",
                          "Use double brackets."])], extract="none")
    res = engine.recall("Which notes app do I use?", scope=S, on=("told_as_done",))
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s2:0"
    assert any("tells of it as done" in m["reason"] for m in marks_of(res, "same_slot"))
    off = engine.recall("Which notes app do I use?", scope=S)  # as shipped: not on
    assert first_of(turn_order(engine, off), "s1:0", "s2:0") == "s1:0"
    assert not marks_of(off, "same_slot")


@pytest.mark.parametrize("later", [
    "my sister exported her Evernote notes into Obsidian, she says it's better",  # someone else's
    "if I exported my Evernote notes into Obsidian, would the tags survive?",  # a supposition
])
def test_an_event_that_may_be_someone_elses_or_supposed_replaces_nothing(engine, later):
    chat(engine, [(EARLY, ["I keep all my notes in Evernote, synced to my phone.", "Handy."]),
                  (LATE, [later, "Sure."])], extract="none")
    res = engine.recall("Which notes app do I use?", scope=S, on=("told_as_done",))
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not marks_of(res, "same_slot")


def test_later_claims_read_the_form_not_the_words():
    said = "2023-10-05T09:00:00Z"
    assert later_claims("exported every note into Obsidian", said, done=True, now=True) == [
        ("exported every note into Obsidian", "done")]
    assert later_claims("strictly vegan now, no eggs either", said, done=True, now=True)[0][1] == "now"
    assert later_claims("strictly vegan now", said, done=True, now=False) == []
    assert later_claims("as a teenager I drank litres of cola", said, done=True, now=True) == []  # a past period
    assert later_claims("quick one about my dentist", said, done=True, now=True) == []  # nothing done
    assert later_claims("the neighbours' dog is a spaniel too, called Juno", said, done=True, now=True) == []
    assert later_claims("my wife's car is electric now", said, done=True, now=True) == []
    assert later_claims("we applied to Oakwood", said, done=True, now=True) == []  # a step


def test_a_clause_marked_as_the_present_states_the_value(engine):
    # said_now: no subject of its own ("strictly vegan now"), yet it says what holds now
    chat(engine, [(EARLY, ["I'm vegetarian, but I eat eggs.", "Nice."]),
                  (LATE, ["strictly vegan now, no eggs either. any egg substitutes for baking?", "Aquafaba."])],
         extract="none")
    res = engine.recall("What's my diet these days?", scope=S, on=("said_now",))
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s2:0"
    assert any("it says it is so now" in m["reason"] for m in marks_of(res, "same_slot"))
    off = engine.recall("What's my diet these days?", scope=S)
    assert first_of(turn_order(engine, off), "s1:0", "s2:0") == "s1:0"


def test_an_earlier_turn_that_only_mentions_the_thing_is_replaced(engine):
    # older_mentions: the earlier turn asserts no claim ("my first thursday one was last week");
    # the clause of it most like the question stands for it, only ever as the earlier of two
    chat(engine, [(EARLY, ["what shoes for spin class? my first thursday one was last week and my feet hurt",
                           "Cleats."]),
                  (LATE, ["which mat should I buy? it's thursdays at the yoga studio now, spin was too much for my "
                          "knees", "A 6mm mat."])], extract="none")
    # (the later turn's clause is said_now's: `on` takes it back)
    res = engine.recall("What's my thursday class these days?", scope=S, on=("said_now",))
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s2:0"
    assert any("the earlier only mentions it" in m["reason"] for m in marks_of(res, "same_slot"))
    # an `off` list names every feature off: said_now stays on here, older_mentions is off
    off = engine.recall("What's my thursday class these days?", scope=S,
                        off=("claim_match", "told_as_done", "asides_below", "older_mentions"))
    assert first_of(turn_order(engine, off), "s1:0", "s2:0") == "s1:0"
    assert not marks_of(off, "same_slot")


def test_a_later_turn_that_asserts_nothing_of_the_present_goes_below(engine):
    # asides_below: a step and a hope ("applied for", "fingers crossed"), about the asked person
    chat(engine, [(EARLY, ["Our son Leo is at Hill Top Primary.", "Nice."]),
                  (LATE, ["We've applied for Leo to go to Oakwood for secondary, fingers crossed. What should we ask "
                          "at the open day?", "Ask about sets."])], extract="none")
    res = engine.recall("Which school does Leo go to?", scope=S, on=("asides_below",))
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert "asides_below" in asides_of(res) and not marks_of(res, "same_slot")
    (aside,) = [a for a in res.trace.params["asides"].values() if a["rule"] == "asides_below"]
    assert "asserts nothing of the speaker's present" in aside["reason"]
    off = engine.recall("Which school does Leo go to?", scope=S)
    assert first_of(turn_order(engine, off), "s1:0", "s2:0") == "s2:0"
    # asked for the plan itself, the aside stays where it is
    plan = engine.recall("Which school did we apply to for Leo, fingers crossed?", scope=S, on=("asides_below",))
    assert "asides_below" not in asides_of(plan)
