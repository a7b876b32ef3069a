"""Current truth end to end: an outdated statement never answers a "now" question.

Small chats through the normal ingest path (default offline extraction, and none) with the
bundled local embedder, as a new user would have them; each check names the rule it exercises.
"""

from __future__ import annotations

import pytest

from engine.embed.local import LocalEmbedder
from engine.ingest.formats.chat import parse_json
from engine.memory import MemoryEngine
from engine.retrieve.recipes import NOT_SHIPPED, get_recipe
from engine.scope import Scope

S = Scope.default("dana", "bot")


@pytest.fixture(scope="module")
def embedder():
    return LocalEmbedder()


def chat(engine, sessions: list[tuple[str, list[str]]], *, extract: str = "heuristic") -> None:
    convs = [{"id": f"s{n}", "messages": [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text, "timestamp": when, "id": f"s{n}:{i}"}
        for i, text in enumerate(turns)]} for n, (when, turns) in enumerate(sessions, start=1)]
    engine.ingest_documents(parse_json(convs, name="chat.json"), scope=S, extract=extract)


def turn_order(engine, res) -> list[str]:
    msgs = engine.store.message_ids(S, res.ordered_ids)
    return list(dict.fromkeys(m for mid in res.ordered_ids for m in msgs.get(mid, [])))


def first_of(order: list[str], *ids: str) -> str:
    return next(t for t in order if t in ids)


@pytest.fixture
def dana(tmp_path, embedder):
    eng = MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False)
    chat(eng, [("2024-01-10T10:00:00Z", ["Hi! Quick intro: my name is Dana Okafor and I live in Berlin.",
                                         "Nice to meet you, Dana!"]),
               ("2024-06-12T09:30:00Z", ["Big news: I moved to Munich last week.", "Congratulations on the move!"])])
    yield eng
    eng.close()


def test_a_turn_is_outdated_for_the_claim_asked_whatever_else_it_carries(dana):
    res = dana.recall("Where does Dana live now?", scope=S)
    order = turn_order(dana, res)
    assert first_of(order, "s1:0", "s2:0") == "s2:0"
    berlin = next(r for r in res.results if r["text"].startswith("user: Hi!"))
    munich = next(r for r in res.results if r["fact"] and r["fact"]["object"] == "Munich")
    assert munich["rank"] < berlin["rank"]
    assert berlin["updated_by"]["rule"] == "claim_superseded"
    assert berlin["updated_by"]["label"] == f"updated on 2024-06-12 by m{munich['memory_id']}: The user lives in Munich."
    assert "[updated on 2024-06-12 by m" in res.context_text
    # the decision is a named component on both: the current version lifted, the old turn below it
    assert res.trace.candidates[berlin["memory_id"]].components["claim_superseded"] <= 0
    assert res.trace.candidates[munich["memory_id"]].score > res.trace.candidates[berlin["memory_id"]].score
    why = dana.explain("Where does Dana live now?", berlin["memory_id"], scope=S)
    assert "outdated for this question (claim_superseded)" in why["detail"] and "lives_in Berlin" in why["detail"]


def test_the_claim_that_still_holds_is_not_outdated(dana):
    res = dana.recall("What is Dana's last name?", scope=S)
    assert not res.trace.params.get("outdated")
    assert first_of(turn_order(dana, res), "s1:0", "s2:0") == "s1:0"


def test_history_puts_the_old_value_first(dana):
    for res in (dana.recall("Where did Dana live before Munich?", scope=S),
                dana.recall("Where does Dana live?", scope=S, as_of="2024-03-01T00:00:00Z")):
        assert first_of(turn_order(dana, res), "s1:0", "s2:0") == "s1:0"
        assert res.results[0]["text"] in ("The user lives in Berlin.",
                                          "user: Hi! Quick intro: my name is Dana Okafor and I live in Berlin.")


def test_each_rule_switches_off_in_the_recipe(dana):
    res = dana.recall("Where does Dana live now?", scope=S, off=("claim_superseded", "restated_later"))
    assert not res.trace.params.get("outdated")
    assert all("claim_superseded" not in c.components for c in res.trace.candidates.values())


@pytest.fixture(params=["heuristic", "none"])
def engine(request, tmp_path, embedder):
    eng = MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False)
    eng.extract_mode = request.param
    yield eng
    eng.close()


def test_a_later_change_leads_where_no_fact_links_them(engine):
    chat(engine, [("2023-03-08T18:30:00Z", ["I play tennis twice a week at the club, mostly doubles.", "Fun!"]),
                  ("2023-09-28T18:30:00Z", ["I quit tennis after my elbow injury, it's only padel for me now.",
                                            "Padel is easier on the elbow."])], extract=engine.extract_mode)
    res = engine.recall("What sport do I play?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s2:0"
    marks = res.trace.params["outdated"]
    assert {m["rule"] for m in marks.values()} <= {"claim_superseded", "restated_later"}
    history = engine.recall("What sport did I play before padel?", scope=S)
    assert "s1:0" in turn_order(engine, history)[:3]


@pytest.mark.parametrize("later", [
    "My sister just moved to Paris, so I'll have a place to crash.",  # someone else's change
    "I might move to Rome next year, we'll see.",  # a plan
    "If I got the job in Madrid I'd move there in a heartbeat.",  # a hypothetical
    "I was in Porto last week for a conference.",  # a visit
])
def test_a_non_change_never_replaces_the_earlier_statement(engine, later):
    chat(engine, [("2023-04-14T08:00:00Z", ["I've lived in Lyon for six years now and I love it.", "Nice!"]),
                  ("2023-10-02T20:15:00Z", [later, "Sounds good."])], extract=engine.extract_mode)
    res = engine.recall("What city do I live in?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not res.trace.params.get("outdated")
    assert not any(f["status"] == "superseded" for f in engine.facts(S, history=True))


@pytest.mark.parametrize("later", [
    "I also adopted a cat named Miso last week.",
    "We adopted a cat named Miso as well, last week.",
    "In addition to Rex we got a cat, Miso, she arrived last week.",
])
def test_an_addition_replaces_nothing(engine, later):
    # 'also', 'as well', 'in addition': a second pet joins the first (the demo's "What pets does
    # Ana have?" put the dog below the cat as history)
    chat(engine, [("2023-02-01T10:00:00Z", ["I have a dog named Rex, he's a beagle.", "Cute!"]),
                  ("2023-08-15T10:00:00Z", [later, "Lovely!"])], extract=engine.extract_mode)
    res = engine.recall("What pets do I have?", scope=S)
    assert not res.trace.params.get("outdated")
    assert not any(f["status"] == "superseded" for f in engine.facts(S, history=True))


def test_a_change_about_something_else_replaces_nothing(engine):
    # the later turn speaks of the dog and states a change, of job: the dog's turn still holds
    # (the demo's "What pets does Ana have?" put it below the BMW turn as history)
    chat(engine, [("2023-02-01T10:00:00Z", ["I have a dog named Rex. He is a very energetic border collie.", "Cute!"]),
                  ("2023-08-15T10:00:00Z", ["He loves the river paths. And I started a new job at BMW, in the battery "
                                            "research group.", "Congratulations!"])], extract=engine.extract_mode)
    res = engine.recall("What pets do I have?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not res.trace.params.get("outdated")


def test_a_retracted_change_leaves_the_original_value(engine):
    chat(engine, [("2023-01-09T12:00:00Z", ["I live in Berlin with my wife.", "Cosy!"]),
                  ("2023-03-21T21:10:00Z", ["We're moving to Hamburg in June, the flat is signed!", "Exciting!"]),
                  ("2023-06-30T16:00:00Z", ["Actually we're staying in Berlin, the Hamburg deal fell through.",
                                            "Sorry to hear."])], extract=engine.extract_mode)
    res = engine.recall("Where do I live?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0", "s3:0") in ("s1:0", "s3:0")
    for mark in (res.trace.params.get("outdated") or {}).values():  # whatever was marked, s2 replaced nothing
        assert engine.store.message_ids(S, [mark["by"]])[mark["by"]] != ["s2:0"]


def test_a_later_statement_is_lifted_only_from_the_top_k(tmp_path, embedder):
    # restated_later reorders what a reader gets and never changes it: outside the top k, a later
    # change is left where it ranks (in free chat "my new job" or "right now" may be about something else)
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as eng:
        chat(eng, [("2023-03-08T18:30:00Z", ["I play tennis twice a week at the club, mostly doubles.", "Fun!"]),
                   ("2023-09-28T18:30:00Z", ["I quit tennis after my elbow injury, it's only padel for me now.",
                                             "Padel is easier on the elbow."])], extract="none")
        plain = turn_order(eng, eng.recall("What sport do I play?", scope=S, k=4, off=("restated_later", "same_slot")))
        assert first_of(plain, "s1:0", "s2:0") == "s1:0" and plain.index("s2:0") >= 1
        top1 = eng.recall("What sport do I play?", scope=S, k=1)
        assert turn_order(eng, top1)[0] == "s1:0" and not top1.trace.params.get("outdated")
        wide = eng.recall("What sport do I play?", scope=S, k=4)
        assert first_of(turn_order(eng, wide), "s1:0", "s2:0") == "s2:0"
        assert {m["rule"] for m in wide.trace.params["outdated"].values()} == {"restated_later"}


def test_a_later_change_leads_the_earlier_turns_answering_fact(tmp_path, embedder):
    # the earlier turn carries two facts; the one that would answer "where do I work?" (works_at
    # Initech) goes below the change, not only the one more like the query's words (has_role)
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as eng:
        chat(eng, [("2023-01-12T09:00:00Z", ["I'm an accountant at Initech, tax season is coming and I'm dreading it.",
                                             "Hang in there!"]),
                   ("2023-08-03T09:00:00Z", ["Nope, I'm at Umbrella Corp these days, in their finance team.",
                                             "How is it so far?"])])
        res = eng.recall("Where do I work?", scope=S)
        assert first_of(turn_order(eng, res), "s1:0", "s2:0") == "s2:0"
        initech = next(r for r in res.results if r["fact"] and r["fact"]["object"] == "Initech")
        umbrella = next(r for r in res.results if r["text"].startswith("user: Nope"))
        assert umbrella["rank"] < initech["rank"] and initech["updated_by"]["rule"] == "restated_later"


def test_a_change_that_only_the_earlier_statement_names_leads(engine):
    # "how do we heat the house?" never says boiler: the later turn is read beside the earlier one
    chat(engine, [("2023-04-04T12:00:00Z", ["We heat the house with an old oil boiler, it's costing a fortune.",
                                            "Oil prices have been brutal."]),
                  ("2023-12-04T12:00:00Z", ["The oil boiler was ripped out in October and a heat pump was fitted.",
                                            "How is the heat pump coping?"])], extract=engine.extract_mode)
    res = engine.recall("How do we heat the house?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s2:0"
    history = engine.recall("What heating did we have before the heat pump?", scope=S)
    assert first_of(turn_order(engine, history), "s1:0", "s2:0") == "s1:0"


def test_someone_elses_change_told_with_its_consequence_replaces_nothing(engine):
    chat(engine, [("2023-04-10T09:00:00Z", ["I'm a product designer at Spotify in Stockholm.", "Nice!"]),
                  ("2023-10-10T09:00:00Z", ["Big shake-up: my manager left Spotify and joined Klarna, so I'm "
                                            "reporting to someone new.", "How's the new manager?"])],
         extract=engine.extract_mode)
    res = engine.recall("Where do I work?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not res.trace.params.get("outdated")
    for aside in (res.trace.params.get("asides") or {}).values():  # when it had to move, said as their matter
        assert aside["rule"] == "not_a_change" and "my manager left Spotify" in aside["reason"]


def test_a_plan_met_along_a_chain_goes_below_its_head(engine):
    # the plan (s2:0) is followed by its retraction (s2:2), which leads the first statement; the plan
    # must not stay on top
    chat(engine, [("2023-02-09T18:00:00Z", ["We have a VW Golf, it's ten years old now.", "Golfs last forever."]),
                  ("2023-08-09T18:00:00Z", ["We're selling the Golf and getting a Kia EV6.", "Exciting!",
                                            "Scratch that, the EV6 deal fell through, we're keeping the Golf for now."])],
         extract=engine.extract_mode)
    res = engine.recall("What car do we have?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0", "s2:2") in ("s1:0", "s2:2")


def test_a_wished_amount_is_not_the_newer_one(engine):
    chat(engine, [("2023-06-06T12:00:00Z", ["My salary is 38k at the council.", "Steady at least."]),
                  ("2023-12-06T12:00:00Z", ["The job at the university would pay 45k, I'm waiting to hear back.",
                                            "Fingers crossed!"])], extract=engine.extract_mode)
    res = engine.recall("What's my salary?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not res.trace.params.get("outdated")


def test_a_later_amount_leads(engine):
    # the third amount has no change word: asked for an amount by its name, the later one is newer
    chat(engine, [("2022-05-05T18:00:00Z", ["I earn 42k as a junior analyst, how much should I save?", "20 percent."]),
                  ("2023-04-20T18:00:00Z", ["Got a raise in my annual review, I'm on 48k now.", "Congratulations!"]),
                  ("2024-03-11T18:00:00Z", ["The senior analyst role pays 57k, I start next week and still can't "
                                            "believe it.", "Well deserved!"])], extract=engine.extract_mode)
    res = engine.recall("What's my salary?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0", "s3:0") == "s3:0"
    assert any(m["rule"] in ("restated_later", "claim_superseded") for m in res.trace.params["outdated"].values())


@pytest.mark.parametrize("first, later", [
    (["I live in Berlin, in a flat near Tempelhof.", "Lovely area!"],
     ["I live in Munich, the flat is tiny but close to the Englischer Garten.", "Sounds nice."]),
    (["I edit my videos in Premiere Pro.", "Industry standard."],
     ["Editing is all DaVinci Resolve for me, Premiere kept crashing.", "Resolve is great."]),
    (["My phone is an iPhone 12, the battery is getting weak.", "Try low power mode."],
     ["my phne is a pixel 8 pro, loving the camra", "Great camera indeed."]),
    # a habit ("on Sunday mornings") is a standing state, not a moment
    (["I coach the under-10s at Riverside FC on Saturdays.", "Noted."],
     ["I coach the under-12 girls at Hartley Rovers on Sunday mornings.", "Good to know."]),
])
def test_a_later_value_of_the_same_slot_leads_whatever_its_verb(engine, first, later):
    question = {"I live": "Where do I live?", "I edit": "What do I edit videos in?", "My phone": "What phone do I have?",
                "I coach": "Which team do I coach?"}
    q = next(v for k, v in question.items() if first[0].startswith(k))
    chat(engine, [("2023-02-03T10:00:00Z", first), ("2023-10-03T10:00:00Z", later)], extract=engine.extract_mode)
    res = engine.recall(q, scope=S, on=("same_slot",))
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s2:0"
    marks = res.trace.params["outdated"]
    assert any(m["rule"] in ("same_slot", "restated_later", "claim_superseded") for m in marks.values())
    off = engine.recall(q, scope=S, off=("same_slot", "restated_later", "claim_superseded", "later_leads"))
    assert not off.trace.params.get("outdated")


def test_an_answer_to_the_assistants_question_states_the_new_value(engine):
    chat(engine, [("2023-03-01T09:00:00Z", ["I'm a pharmacist at Boots in Leeds.", "Good to know."]),
                  ("2023-11-01T09:00:00Z", ["Can you help me write a cover letter?",
                                            "Sure. Where are you working at the moment?",
                                            "Lloyds Pharmacy in Harrogate, on the dispensary team."])],
         extract=engine.extract_mode)
    res = engine.recall("Where do I work?", scope=S, on=("same_slot",))
    assert first_of(turn_order(engine, res), "s1:0", "s2:2") == "s2:2"
    marks = [m for m in res.trace.params["outdated"].values() if m["rule"] == "same_slot"]
    assert marks and all("Lloyds Pharmacy" in m["text"] and "Boots" in m["reason"] for m in marks)
    assert all(engine.store.message_ids(S, [m["by"]])[m["by"]] == ["s2:2"] for m in marks)
    history = engine.recall("Where did I work before Lloyds?", scope=S, on=("same_slot",))
    assert "s1:0" in turn_order(engine, history)[:3]


@pytest.mark.parametrize("later", [
    "This week I'm in Glasgow for work, the hotel is fine.",  # a stated end
    "back from two weeks in glasgow, jet lag is brutal",  # a return, a short stay
    "my wife lives in Glasgow during the week for her job",  # someone else's
    "We've put an offer in on a house in Glasgow, fingers crossed.",  # a hope
    "I grew up in Glasgow and my parents still live there.",  # told of the past
    "I'm house-sitting for a friend in Glasgow for the next three weeks.",  # a time still ahead
    "I'd never live in Glasgow, far too wet for me.",  # a negation
    "Is Glasgow a good place to live for someone like me?",  # a question
    "We've applied for a flat in Glasgow near the park.",  # a step, not the state
])
def test_same_slot_never_replaces_with_a_stay_someone_elses_value_or_a_hope(engine, later):
    chat(engine, [("2023-02-01T10:00:00Z", ["I live in Bristol with my partner and two cats.", "Nice."]),
                  ("2023-09-01T10:00:00Z", [later, "Noted."])], extract=engine.extract_mode)
    res = engine.recall("Where do I live?", scope=S, on=("same_slot",))
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not res.trace.params.get("outdated")


GUITAR = "any tips for barre chords on guitar? been playing acoustic for a year and my fingers hurt"


def test_a_later_turn_about_the_same_thing_leads_where_no_rule_read_a_change(engine):
    # no change word, no claim of the slot read from either turn: only time orders them
    chat(engine, [("2023-02-01T10:00:00Z", [GUITAR, "Sure."]),
                  ("2023-08-01T10:00:00Z", ["the saxophone is so much harder than guitar lol, my lips go numb. "
                                            "how do I stop the reed squeaking?", "Good question."])],
         extract=engine.extract_mode)
    q = "What instrument do I play?"
    before = engine.recall(q, scope=S, off=("later_leads",))
    assert first_of(turn_order(engine, before), "s1:0", "s2:0") == "s1:0"
    res = engine.recall(q, scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s2:0"
    marks = res.trace.params["outdated"]
    old = next(mid for mid, m in marks.items() if m["rule"] == "later_leads")
    assert "later" in marks[old]["reason"] and res.trace.candidates[int(old)].components["later_leads"] == 0.0
    new = marks[old]["by"]
    assert res.trace.candidates[new].components["later_leads"] > 0  # the lift is a named component
    why = engine.explain(q, int(old), scope=S)
    assert "outdated for this question (later_leads)" in why["detail"]
    # asked about the past, nothing is marked and the old value may lead
    assert not any(m["rule"] == "later_leads" for m in
                   (engine.recall("What instrument did I play before?", scope=S).trace.params.get("outdated") or {}).values())


@pytest.mark.parametrize("later", [
    # each of these leads without later_leads' guards (vectors and clause alike pass): the guard named stops it
    "if I took up the saxophone, would it be so much harder than guitar? my lips would go numb. how do reeds work?",
    "might take up the saxophone, so much harder than guitar lol, my lips go numb. how do I stop the reed squeaking?",
    "my flatmate's saxophone is so much harder than guitar lol, my lips go numb when I try it. how do I stop the reed "
    "squeaking?",  # someone else's thing
    "the saxophone is so much harder than guitar lol, borrowing one from school for the week. how do I stop the reed "
    "squeaking?",  # a stay that ends
    "hoping to take up the saxophone soon, so much harder than guitar lol. how do I stop the reed squeaking?",
    # and these the vectors already keep apart
    "what saxophone should I buy if I ever take it up? a Yamaha?",  # a question, a supposition
    "my flatmate's saxophone is so much louder than guitar lol, the neighbours hate us. how do reeds work?",  # theirs
    "borrowing a saxophone from school for the week, so much harder than guitar lol. how do I stop the reed squeaking?",
])
def test_a_later_question_someone_elses_thing_or_a_stay_does_not_lead(engine, later):
    chat(engine, [("2023-02-01T10:00:00Z", [GUITAR, "Sure."]), ("2023-08-01T10:00:00Z", [later, "Good question."])],
         extract=engine.extract_mode)
    res = engine.recall("What instrument do I play?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not any(m["rule"] == "later_leads" for m in (res.trace.params.get("outdated") or {}).values())


@pytest.mark.parametrize("q, now, then", [
    ("What do I drink every day?", "I drink two cups of green tea every day, no sugar.",
     "As a student I drank energy drinks every day, it's a miracle I slept."),
    ("Which sport do I play?", "I play netball every Tuesday with the work team, wing attack mostly.",
     "At uni I played rugby every weekend, my knees still remember it."),
])
def test_a_later_turn_told_of_the_past_does_not_lead(engine, q, now, then):
    chat(engine, [("2023-02-01T10:00:00Z", [now, "Nice."]), ("2023-08-01T10:00:00Z", [then, "Ha."])],
         extract=engine.extract_mode)
    res = engine.recall(q, scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not any(m["rule"] == "later_leads" for m in (res.trace.params.get("outdated") or {}).values())


@pytest.mark.parametrize("sessions, q, want", [
    # the earlier statement is an aside in form ("won't start", a question after it)
    ([["My Vespa won't start in the cold, could it be the battery?", "Quite likely."],
      ["The Vespa's gone, a guy from Bristol bought it, and I ride an e-bike to work now.", "How's the e-bike?",
       "Love it."]], "What did I ride before the e-bike?", "s1:0"),
    # three values: the one right before the named later value, not the first
    ([["Teaching high-school chemistry is exhausting but I love my students.", "It's a demanding job.",
       "Could you draft a fun intro activity for titration?", "Try a mystery acid challenge."],
      ["I handed in my notice at the school in February and I'm doing freelance tutoring now.", "Brave move!"],
      ["The freelancing didn't pay the bills, so since September I've been a lab technician at Novartis.",
       "Stable pay and a lab.", "It is. Any tips for surviving twelve-hour shifts?", "Pack real meals."]],
     "What was I doing for work before the lab job?", "s2:0"),
])
def test_before_a_named_later_value_the_statement_right_before_it_leads(engine, sessions, q, want):
    dates = ["2023-01-10T10:00:00Z", "2023-05-10T10:00:00Z", "2023-10-22T10:00:00Z"]
    chat(engine, list(zip(dates, sessions)), extract=engine.extract_mode)
    res = engine.recall(q, scope=S)
    assert want in turn_order(engine, res)[:3]
    assert res.trace.params["history_first"]


def test_a_change_taken_back_in_its_own_conversation_replaces_nothing(tmp_path, embedder):
    # raw turns only: the offline extractor still files "New number: ..." as an update that the
    # retraction in the next turn does not undo (its fact of the new number stays active)
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as engine:
        chat(engine, [("2023-01-01T10:00:00Z", ["My number is 07700 900456 for the school.", "Saved."]),
                      ("2023-06-01T10:00:00Z", ["New number: 07700 900999.", "Updated!",
                                                "Scratch that, the SIM didn't work, same old number as before."])],
             extract="none")
        res = engine.recall("What is my phone number?", scope=S)
        assert first_of(turn_order(engine, res), "s1:0", "s2:0", "s2:2") in ("s1:0", "s2:2")
        assert res.trace.params["asides"]  # the taken-back change went below, with its reason
        for mark in (res.trace.params.get("outdated") or {}).values():
            assert engine.store.message_ids(S, [mark["by"]])[mark["by"]] != ["s2:0"]


@pytest.mark.parametrize("first, change, back, q", [
    ("We live in Berlin, in a flat in Kreuzberg.", "Big news, we've decided: we're moving to Munich for Jonas's job!",
     "Actually we're staying in Berlin, the transfer was cancelled.", "Which city do we live in?"),
    ("I drive a Honda Civic, ten years old and still going.", "I sold the Civic and bought a Mazda MX-5!",
     "The MX-5 deal fell through, the finance was refused, so I've still got the Civic.", "What car do I have?"),
])
def test_a_change_taken_back_in_a_later_conversation_replaces_nothing(engine, first, change, back, q):
    chat(engine, [("2023-01-09T12:00:00Z", [first, "Noted."]), ("2023-04-10T19:00:00Z", [change, "Exciting!"]),
                  ("2023-05-15T19:00:00Z", [back, "Sorry to hear that."])], extract=engine.extract_mode)
    res = engine.recall(q, scope=S, on=("same_slot",))
    assert first_of(turn_order(engine, res), "s1:0", "s2:0", "s3:0") in ("s1:0", "s3:0")
    # nothing treats the first statement as replaced by the change that was taken back
    for mid, mark in (res.trace.params.get("outdated") or {}).items():
        assert not ("s1:0" in engine.store.message_ids(S, [int(mid)]).get(int(mid), [])
                    and engine.store.message_ids(S, [mark["by"]])[mark["by"]] == ["s2:0"]), mark


def test_a_take_back_in_a_later_conversation_must_name_the_change():
    from engine.statements import takes_back_change
    assert takes_back_change("Actually we're staying in Berlin.", "We're moving to Munich. We live in Berlin.")
    assert takes_back_change("Actually we're staying in Lyon for Christmas.", "I moved to Munich. I live in Berlin.") is None
    assert takes_back_change("Would the MX-5 deal fall through?", "I bought a Mazda MX-5") is None


def test_the_offline_extractor_drops_a_change_its_speaker_takes_back(tmp_path, embedder):
    """"New number: ..." then "Scratch that, ... same old number as before": the new number never
    becomes a fact, so the old one stays current; the report says what was dropped and why."""
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as engine:
        chat(engine, [("2023-01-01T10:00:00Z", ["My number is 07700 900456 for the school.", "Saved."]),
                      ("2023-06-01T10:00:00Z", ["New number: 07700 900999.", "Updated!",
                                                "Scratch that, the SIM didn't work, same old number as before."])])
        current = [f.object for f in engine.store.current_facts(S)]
        assert any("900456" in o for o in current) and not any("900999" in o for o in current)
        res = engine.recall("What is my phone number?", scope=S)
        assert first_of(turn_order(engine, res), "s1:0", "s2:0", "s2:2") in ("s1:0", "s2:2")


@pytest.mark.parametrize("change, back, withdrawn, restored", [
    ("Big news, we've decided: we're moving to Munich for Jonas's job!",
     "Actually we're staying in Berlin, the transfer was cancelled.", "Munich", None),  # a plan
    ("I moved to Munich last week!", "Munich fell through in the end, the landlord pulled out, I'm still in Berlin.",
     "Munich", "Berlin"),  # a change: what it superseded is current again
])
def test_the_offline_extractor_withdraws_a_fact_taken_back_in_a_later_conversation(tmp_path, embedder, change,
                                                                                   back, withdrawn, restored):
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as engine:
        chat(engine, [("2023-01-09T12:00:00Z", ["We live in Berlin, in a flat in Kreuzberg.", "Great."]),
                      ("2023-04-10T19:00:00Z", [change, "Congratulations!"]),
                      ("2023-05-15T19:00:00Z", [back, "Sorry to hear that."])])
        facts = engine.store.facts(S)
        gone = [f for f in facts if withdrawn in f.object]
        assert gone and all(f.status == "retracted" and f.rule == "taken_back_later" for f in gone)
        current = [f.object for f in engine.store.current_facts(S)]
        assert any("Berlin" in o for o in current) and not any(withdrawn in o for o in current)
        if restored:
            assert any(f.rule == "taken_back_later" and restored in f.object and f.status == "active" for f in facts)


def test_a_later_take_back_of_something_else_withdraws_nothing(tmp_path, embedder):
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as engine:
        chat(engine, [("2023-01-09T12:00:00Z", ["I live in Leeds.", "Great."]),
                      ("2023-04-10T19:00:00Z", ["I moved to York last week!", "Congrats!"]),
                      ("2023-05-15T19:00:00Z", ["Actually we're staying at my parents' for Christmas.", "Nice."])])
        assert not [f for f in engine.store.facts(S) if f.rule == "taken_back_later"]
        assert any("York" in f.object for f in engine.store.current_facts(S))


@pytest.mark.parametrize("first, change, back", [
    # names nothing of the change: "decided" is only in the change's own turn
    ("We live in Berlin, in a flat in Kreuzberg.", "Big news, we've decided: we're moving to Munich!",
     "Actually, we decided against it."),
    # names a value the speaker holds, but of another slot than the plan's (where they work)
    ("I work at Acme and we live in Berlin.", "We're moving to Munich in the spring!",
     "Actually I'm still at Acme, the reorg was cancelled."),
    # names a word of the change's turn that is not its value, what it replaced, or its slot
    ("I live in Leeds.", "I moved to York last week, the garden is huge!",
     "Actually we're not doing the garden party after all."),
])
def test_a_later_take_back_must_name_the_change_its_value_or_its_slot(tmp_path, embedder, first, change, back):
    """heuristic.taken_back_earlier withdraws a plan or change only when the take-back's sentence
    names it: its value, what it replaced, its slot, or (a plan) a held value of the slot it
    would change."""
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as engine:
        chat(engine, [("2023-01-09T12:00:00Z", [first, "Great."]), ("2023-04-10T19:00:00Z", [change, "Congrats!"]),
                      ("2023-05-15T19:00:00Z", [back, "Ok."])])
        assert not [f for f in engine.store.facts(S) if f.rule == "taken_back_later"]


@pytest.mark.parametrize("change, back, withdrawn", [
    ("I moved to York last week!", "Never mind York, the landlord pulled out. Anyway, how are you?", "York"),  # its value
    # a plan, taken back by naming the value it would have replaced in its slot (where they live)
    ("We are relocating to Oslo in June!", "Actually we decided to stay in Leeds. The kids are happy.", "Oslo"),
])
def test_a_later_take_back_that_names_the_change_or_its_slots_value_withdraws_it(tmp_path, embedder, change, back,
                                                                                 withdrawn):
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as engine:
        chat(engine, [("2023-01-09T12:00:00Z", ["We live in Leeds.", "Great."]),
                      ("2023-04-10T19:00:00Z", [change, "Congrats!"]), ("2023-05-15T19:00:00Z", [back, "Ok."])])
        gone = [f for f in engine.store.facts(S) if f.rule == "taken_back_later" and f.status == "retracted"]
        assert gone and all(withdrawn in f.object for f in gone)
        assert any("Leeds" in f.object for f in engine.store.current_facts(S))


def test_a_take_back_reaches_only_its_own_speakers_last_statement(tmp_path, embedder):
    from engine.extract import heuristic
    from engine.extract.model import SourceChunk

    def turn(i: int, role: str, text: str) -> SourceChunk:
        return SourceChunk(chunk_id=i, document_id=1, text=text, start=0, end=len(text), speaker=None, role=role,
                           trust="user", source_time="2023-06-01T10:00:00Z", source_type="chat")

    views = [turn(1, "user", "I work at Acme as a tester."), turn(2, "user", "My new phone is a Pixel 8."),
             turn(3, "assistant", "Never mind the phone, how is work?"), turn(4, "user", "Scratch that, still on the iPhone.")]
    pairs = [(ch, cand) for ch in views for cand in heuristic.extract(ch)]
    assert {ch.chunk_id for ch, _ in pairs} >= {1, 2}
    kept, why = heuristic.taken_back(pairs, views)
    assert {ch.chunk_id for ch, _ in kept} == {ch.chunk_id for ch, _ in pairs} - {2}
    assert why and all("taken back" in w and "Scratch that" in w for w in why)


def test_explain_says_why_same_slot_put_a_turn_below(tmp_path, embedder):
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as eng:
        chat(eng, [("2023-02-01T20:00:00Z", ["I edit my videos in Premiere Pro.", "Industry standard."]),
                   ("2023-10-01T20:00:00Z", ["Editing is all DaVinci Resolve for me, Premiere kept crashing.",
                                             "Resolve is great."])], extract="none")
        res = eng.recall("What do I edit videos in?", scope=S, on=("same_slot",))
        (old,) = [int(m) for m, mark in res.trace.params["outdated"].items() if mark["rule"] == "same_slot"]
        detail = eng.explain("What do I edit videos in?", old, scope=S, on=("same_slot",))["detail"]
        assert "outdated for this question (same_slot)" in detail and "DaVinci Resolve" in detail
        past = eng.recall("What did I edit videos in before Resolve?", scope=S, on=("same_slot",))
        assert turn_order(eng, past)[0] == "s1:0"


def test_same_slot_is_shipped_on_and_switches_off_by_name(tmp_path, embedder, monkeypatch):
    """Every shipped recipe orders same-slot statements; `off` switches it off and the trace says so.
    A feature a recipe leaves off because it is not shipped (recipes.NOT_SHIPPED, empty today) is
    listed apart from what a recall switched off, and `on` takes it back."""
    from engine.retrieve import pipeline
    from engine.retrieve.recipes import get_recipe

    assert all(get_recipe(name).on("same_slot") for name in ("default", "offline", "hand"))
    assert not get_recipe("offline", off=("same_slot",)).on("same_slot")
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as eng:
        chat(eng, [("2023-02-01T20:00:00Z", ["I edit my videos in Premiere Pro.", "Industry standard."]),
                   ("2023-10-01T20:00:00Z", ["Editing is all DaVinci Resolve for me, Premiere kept crashing.",
                                             "Resolve is great."])], extract="none")
        res = eng.recall("What do I edit videos in?", scope=S)
        assert any(m["rule"] == "same_slot" for m in res.trace.params["outdated"].values())
        assert turn_order(eng, res)[0] == "s2:0" and "same_slot" not in res.trace.params.get("not_shipped", [])
        off = eng.recall("What do I edit videos in?", scope=S, off=("same_slot",))
        assert off.trace.params["off"] == ["same_slot"]
        assert all(m["rule"] != "same_slot" for m in (off.trace.params.get("outdated") or {}).values())
        monkeypatch.setattr(pipeline, "NOT_SHIPPED", ("same_slot",))
        held = eng.recall("What do I edit videos in?", scope=S, off=("same_slot",))
        assert held.trace.params["not_shipped"] == ["same_slot"] and "off" not in held.trace.params


@pytest.mark.parametrize("first, later, q", [
    ("We're with EDF for gas and electric, the app is clunky.", "Octopus is the energy supplier we pay now.",
     "Which energy supplier are we with?"),
    ("I keep all my notes in Evernote.", "Obsidian is the notes app I use for everything.", "Which notes app do I use?"),
])
def test_a_later_name_identified_as_the_speakers_thing_leads(tmp_path, embedder, first, later, q):
    """"Octopus is the energy supplier we pay now" names the speaker's supplier, not a person whose
    matter it is: it leads the earlier statement instead of going below it as someone else's."""
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as engine:
        chat(engine, [("2023-01-10T10:00:00Z", [first, "Noted."]), ("2023-09-10T10:00:00Z", [later, "Good to know."])])
        res = engine.recall(q, scope=S)
        assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s2:0"
        assert not res.trace.params.get("asides")


def _asked_then_replied(first: str, opener: str, question: str, reply: str) -> list[tuple[str, list[str]]]:
    return [("2022-03-01T09:00:00Z", [first, "Noted."]), ("2023-04-02T19:00:00Z", [opener, question, reply, "Great."])]


@pytest.mark.parametrize("first, opener, question, reply, q, claim", [
    ("I'm a chef at a bistro in Leith.", "Help me write a bio?", "Sure. What's your line of work these days?",
     "Accountancy at a small firm in Perth, mainly tax returns.", "What do I do for work?",
     "Accountancy at a small firm in Perth"),
    ("I'm a nurse at St Mary's in Paddington.", "Could you look over my CV?",
     "Of course. What do you do for a living now?", "Software testing at Monzo, mostly the payments team.",
     "What is my job?", "Software testing at Monzo"),
    ("We live in a semi in Didsbury.", "Can you help me with a change of address letter?",
     "Sure. Where are you based these days?", "A flat in Glasgow's West End, top floor.", "Where do I live?",
     "A flat in Glasgow's West End"),
])
def test_a_reply_to_a_question_like_the_one_asked_is_in_its_slot(tmp_path, embedder, first, opener, question, reply,
                                                                  q, claim):
    """same_slot: the other speaker's question a reply answers supplies its slot (question to
    question, by vector), and the reply's answer is its first claim; the earlier statement, read
    beside its facts, goes below it as history."""
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as engine:
        chat(engine, _asked_then_replied(first, opener, question, reply))
        res = engine.recall(q, scope=S)
        assert first_of(turn_order(engine, res), "s1:0", "s2:2") == "s2:2"
        marks = [(int(m), mark) for m, mark in (res.trace.params.get("outdated") or {}).items()
                 if mark["rule"] == "same_slot"]
        assert any(engine.store.message_ids(S, [m])[m] == ["s1:0"] for m, _ in marks)
        assert all(f"'{claim}' after" in mark["reason"] and "a question like this one" in mark["reason"]
                   for _, mark in marks)


def test_a_reply_to_another_question_is_not_in_the_asked_slot(tmp_path, embedder):
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as engine:
        chat(engine, _asked_then_replied("I'm a barista at a cafe in Brighton.", "Any tips for my commute?",
                                         "Sure. How do you get around these days?",
                                         "Cycling mostly, the train is too pricey."))
        res = engine.recall("What is my job?", scope=S)
        assert not res.trace.params.get("outdated")


@pytest.mark.parametrize("first, later, q", [
    ("We keep two chickens, Hetty and Mabel.", "The family across the road got a kitten and it naps under our hedge.",
     "What pet do we have?"),
    ("I drive an old Volvo estate.", "My brother bought a new car and leaves it on our drive.", "What car do I have?"),
])
def test_someone_elses_thing_at_the_speakers_place_goes_below_the_speakers_own(tmp_path, embedder, first, later, q):
    with MemoryEngine(tmp_path / "m.db", embedder=embedder, llm=False, background_reembed=False) as engine:
        chat(engine, [("2023-05-05T17:00:00Z", [first, "Nice."]), ("2023-11-05T17:00:00Z", [later, "Ha."])])
        res = engine.recall(q, scope=S)
        assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
        assert any("someone else's matter" in a["reason"] for a in res.trace.params["asides"].values())


# issue 15's natural-talk round: restated_later reads the form of the later change more closely.
# Each check runs with its rule on and off, so a test of a rule can fail without it.

@pytest.mark.parametrize("later", [
    "Two weeks covering at the district office, very grand. I'm back at Hillcrest Monday. How do I write a handover?",
    "the district office stint is over, I'm back at Hillcrest again",
])
def test_a_return_to_the_held_value_replaces_nothing(engine, later):
    chat(engine, [("2023-02-06T09:00:00Z", ["I teach maths at Hillcrest Academy, year 9 mostly.", "Nice!"]),
                  ("2023-05-15T09:00:00Z", [later, "Keep it short."])], extract=engine.extract_mode)
    res = engine.recall("Where do I work?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not res.trace.params.get("outdated")
    assert "already holds" in next(iter(res.trace.params["return_to_held"].values()))
    off = engine.recall("Where do I work?", scope=S, off=("return_to_held",))
    assert first_of(turn_order(engine, off), "s1:0", "s2:0") == "s2:0"  # read as a change without the rule


def test_a_change_not_yet_in_force_goes_below_the_state(engine):
    chat(engine, [("2023-03-02T09:00:00Z", ["I play the violin in a community orchestra on Thursdays.", "Lovely!"]),
                  ("2023-10-04T09:00:00Z", ["Enrolled in a jazz piano class that begins in November, so excited. "
                                            "What should I practise first?", "Scales."])], extract=engine.extract_mode)
    res = engine.recall("What instrument do I play?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not res.trace.params.get("outdated")
    (why,) = res.trace.params["change_not_yet"].values()
    assert "November" in why
    off = engine.recall("What instrument do I play?", scope=S, off=("change_not_yet",))
    assert first_of(turn_order(engine, off), "s1:0", "s2:0") == "s2:0"


def test_a_change_told_as_done_with_a_month_is_still_a_change(engine):
    # "in November" said in February may be next November for a plan, not for what was done
    chat(engine, [("2022-09-08T09:00:00Z", ["I'm a nurse on the cardiology ward at St Mary's.", "Tough job!"]),
                  ("2023-02-14T09:00:00Z", ["Started at the Riverside GP surgery in November, practice nursing suits "
                                            "me better.", "Congratulations!"])], extract=engine.extract_mode)
    res = engine.recall("Where do I work now?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s2:0"
    assert not res.trace.params.get("change_not_yet")


@pytest.mark.parametrize("engaged, rule", [
    # the change and the name apart: the change clause is nearer the partner claim than the allergy
    ("I proposed and he said yes!!! 💍 Sam, engaged as of Saturday. Help me plan a small party?", True),
    # "Sam and I" is one subject, the clause names Sam: no rule is needed to see it is the partner claim
    ("Sam and I are engaged!!! Help me plan a small party?", False),
])
def test_a_change_of_another_claim_of_the_turn_replaces_nothing_asked(engine, engaged, rule):
    chat(engine, [("2023-01-12T09:00:00Z", ["Cooking for my boyfriend Sam tonight, he's allergic to peanuts. "
                                            "Any curry ideas?", "A coconut korma."]),
                  ("2023-08-20T09:00:00Z", [engaged, "Congratulations!"])],
         extract=engine.extract_mode)
    res = engine.recall("What is Sam allergic to?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not res.trace.params.get("outdated")
    if not rule:
        assert not res.trace.params.get("asked_claim_only")
        return
    assert "allergic to peanuts" in next(iter(res.trace.params["asked_claim_only"].values()))
    off = engine.recall("What is Sam allergic to?", scope=S, off=("asked_claim_only",))
    assert off.trace.params.get("outdated")  # without the rule the engagement replaced the allergy


def test_a_claim_said_in_passing_of_the_asked_person_is_read(engine):
    # claims_in_passing: "our daughter Nora" is Nora; "we're homeschooling Nora" is the speaker's
    # clause that states Nora's school
    chat(engine, [("2023-09-04T09:00:00Z", ["our daughter Nora goes to Oakfield Primary, the uniform list is endless. "
                                            "where do I get cheap school shoes?", "Supermarkets do decent ones."]),
                  ("2024-02-20T09:00:00Z", ["we're homeschooling Nora since half term, Oakfield wasn't right for her. "
                                            "how do I plan a week of lessons?", "Start with a simple timetable."])],
         extract=engine.extract_mode)
    res = engine.recall("Where does Nora go to school now?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s2:0"
    assert {m["rule"] for m in res.trace.params["outdated"].values()} == {"same_slot"}
    off = engine.recall("Where does Nora go to school now?", scope=S, off=("claims_in_passing",))
    assert first_of(turn_order(engine, off), "s1:0", "s2:0") == "s1:0"


def test_a_moment_anchors_its_own_sentence_only():
    from engine.statements import asked, slot_claims

    reply = "a Specialized Turbo Vado, the e-bike. The Boardman got stolen in March, from outside the gym"
    q = asked("Which bike do I ride?")
    assert slot_claims(reply, q, reply=True, said_on="2023-06-10T09:00:00Z")[0] == ["the e-bike"]
    assert slot_claims(reply, q, reply=True, said_on="2023-06-10T09:00:00Z", per_sentence=False)[0] == []
    # a turn whose every sentence is anchored is an episode still
    assert slot_claims("cycled in on the Boardman again today, legs are dead", q, said_on="2023-06-10")[0] == []


def test_a_plan_framed_without_a_modal_goes_below_the_state(engine):
    # framed_plans: "the idea is to move" and "been viewing houses in" frame a plan, not a home
    chat(engine, [("2023-02-11T09:00:00Z", ["I rent a two-bed in Didsbury and the boiler is making a noise again. "
                                            "Who should fix it?", "Your landlord."]),
                  ("2023-07-02T09:00:00Z", ["been viewing houses in Whitby, the idea is to move up there when my lease "
                                            "ends. what do I ask the estate agent?", "Ask about damp."])],
         extract=engine.extract_mode)
    res = engine.recall("Where do I live?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not res.trace.params.get("outdated")
    assert next(iter(res.trace.params["asides"].values()))["rule"] == "not_a_change"
    # unasserted_below reads the same turn as a search ("been viewing"): both off, it leads
    off = engine.recall("Where do I live?", scope=S, off=(*NOT_SHIPPED, "framed_plans", "unasserted_below"))
    assert first_of(turn_order(engine, off), "s1:0", "s2:0") == "s2:0"


def test_two_long_turns_are_about_one_thing_when_two_of_their_clauses_are(engine):
    # claim_match: the later turn is mostly its request; its plan is still about the home
    chat(engine, [("2023-02-11T09:00:00Z", ["I rent a two-bed in Didsbury, the bathroom ceiling has black mould "
                                            "spreading from the extractor and the grout is going green. What spray "
                                            "actually kills it for good?", "A mould remover with bleach."]),
                  ("2023-07-02T09:00:00Z", ["been viewing houses in Whitby, the idea is to move up there when my lease "
                                            "ends. what should I ask on a viewing about broadband, parking and council "
                                            "tax?", "Ask about speeds."])],
         extract=engine.extract_mode)
    # claim_match is built, not shipped (recipes.NOT_SHIPPED): `on` takes it back; an `off` list
    # names every feature off, so (*NOT_SHIPPED, "unasserted_below") switches claim_match off too
    res = engine.recall("Where do I live?", scope=S, on=("claim_match",))
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert "claim_match" in engine.recall("Where do I live?", scope=S).trace.params["not_shipped"]
    off = engine.recall("Where do I live?", scope=S, off=(*NOT_SHIPPED, "unasserted_below"))
    assert first_of(turn_order(engine, off), "s1:0", "s2:0") == "s2:0"


@pytest.mark.parametrize("later", [
    "house-hunting in York at the moment, we'd love to live near the Minster. what should I ask at viewings?",
    "Fingers crossed, we live in York by Christmas, the offer's in! What do I need for a mortgage?",
    "We're looking at houses to live in around York, three beds. Which areas are good to live in?",
])
def test_a_later_turn_that_speaks_of_it_only_as_not_yet_so_goes_below(engine, later):
    # unasserted_below: no modal, no change word; slot_claims reads the turn as a hope, a step or a
    # search, so it says nothing of where I live now
    chat(engine, [("2023-03-01T09:00:00Z", ["I rent a flat in Leeds with my sister. Can you help me word a message "
                                            "about the washing machine?", "Sure."]),
                  ("2023-09-12T09:00:00Z", [later, "Good question."])], extract=engine.extract_mode)
    res = engine.recall("Where do I live?", scope=S)
    assert first_of(turn_order(engine, res), "s1:0", "s2:0") == "s1:0"
    assert not res.trace.params.get("outdated")
    (aside,) = res.trace.params["asides"].values()
    assert aside["rule"] == "unasserted_below" and "not yet so" in aside["reason"]
    off = engine.recall("Where do I live?", scope=S, off=(*NOT_SHIPPED, "unasserted_below"))
    assert first_of(turn_order(engine, off), "s1:0", "s2:0") == "s2:0"


def test_a_question_about_the_plan_itself_keeps_the_plan_first(engine):
    chat(engine, [("2023-03-01T09:00:00Z", ["I rent a flat in Leeds with my sister.", "Nice."]),
                  ("2023-09-12T09:00:00Z", ["We're looking at houses to live in around York, three beds. Which areas "
                                            "are good to live in?", "Good question."])], extract=engine.extract_mode)
    res = engine.recall("Which city are we looking at houses in?", scope=S)
    assert not any(a["rule"] == "unasserted_below" for a in (res.trace.params.get("asides") or {}).values())


def test_the_rules_top_k_breaks_ties_as_the_ranking_does():
    """The current-truth rules move only turns of the top k; with a tie at the k-th place, their
    top k is the one the ranking returns (the smaller id first), whatever order recall met them in."""
    from engine.retrieve.pipeline import _top_k
    from engine.retrieve.trace import Trace

    t = Trace(query="Where do I live now?", origin="test", recipe="offline", k=2, as_of=None)
    for mid, score in ((9, 0.5), (7, 0.9), (3, 0.5)):  # met 9 before 3, both at the 2nd place
        t.candidate(mid).score = score
    assert _top_k(t) == {7, 3}
    t.candidates[3].drop("filters", "expired")
    assert _top_k(t) == {7, 9}  # only alive candidates count


def test_a_return_that_names_nothing_new_replaces_nothing(engine):
    # "back at school" names only what is asked: it is the same school, not a new one
    chat(engine, [("2024-01-10T09:00:00Z", ["Mia's parents' evening at Ashgrove Primary is on Thursday, any questions "
                                            "I should ask?", "Ask about reading."]),
                  ("2024-09-04T09:00:00Z", ["back to school today, year 4 already! how do I get her organised?",
                                            "A checklist by the door."])],
         extract=engine.extract_mode)
    res = engine.recall("Which school does Mia go to now?", scope=S)
    assert not res.trace.params.get("outdated")
    assert "already holds" in next(iter(res.trace.params["return_to_held"].values()))
    off = engine.recall("Which school does Mia go to now?", scope=S, off=(*get_recipe("default").off, "return_to_held"))
    assert off.trace.params.get("outdated")  # read as a change of school without the rule


STOP_AND_RETURN = [("2023-02-01T09:00:00Z", ["I swim three mornings a week at the leisure centre pool, any tips for "
                                             "tumble turns?", "Practise the somersault first."]),
                   ("2023-05-10T09:00:00Z", ["giving up swimming, the chlorine is wrecking my skin", "Sorry to hear."]),
                   ("2023-09-20T09:00:00Z", ["found a barrier cream that works so I'm back swimming three mornings a "
                                             "week. best goggles for long sessions?", "Anti-fog ones."])]


def test_a_return_after_a_stop_restores_what_held_before(engine):
    chat(engine, STOP_AND_RETURN, extract=engine.extract_mode)
    res = engine.recall("Do I still swim?", scope=S)
    order = turn_order(engine, res)
    assert first_of(order, "s1:0", "s2:0", "s3:0") == "s3:0"
    assert order.index("s1:0") < order.index("s2:0")  # what holds again before the stop that ended it
    marks = res.trace.params.get("outdated") or {}
    assert not any(m["by"] == res_mid(engine, res, "s2:0") for m in marks.values())  # s1 no longer replaced by the stop
    assert "holds again" in next(iter(res.trace.params["return_restores"].values()))
    why = engine.explain("Do I still swim?", res_mid(engine, res, "s1:0"), scope=S)
    assert "current again (return_restores)" in why["detail"] and "updated_by" not in why
    off = engine.recall("Do I still swim?", scope=S, off=(*get_recipe("default").off, "return_restores"))
    assert not off.trace.params.get("return_restores")


def res_mid(engine, res, turn: str) -> int:
    """The memory id of the turn `turn` among a recall's results."""
    msgs = engine.store.message_ids(S, res.ordered_ids)
    return next(mid for mid in res.ordered_ids if msgs.get(mid) == [turn] and mid in res.trace.candidates
                and res.trace.candidates[mid].meta.get("kind") == "episode")
