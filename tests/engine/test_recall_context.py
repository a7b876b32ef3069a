"""Conversation context in recall: times named in the question, answers after questions, sessions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.embed.hashing import HashingEmbedder
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.memory import MemoryEngine
from engine.retrieve import timeframe
from engine.retrieve.recipes import get_recipe
from engine.scope import Scope

SCOPE = Scope.default("ana", "bot")
NOW = datetime(2024, 1, 20, 12, 0, tzinfo=UTC)


def day(y, m, d):
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize("query, start, end", [
    ("What did Nate cook on 9 November, 2022?", day(2022, 11, 8), day(2022, 11, 11)),
    ("What was the issue, as mentioned on November 6, 2023?", day(2023, 11, 5), day(2023, 11, 8)),
    ("Which book did Tim finish on 8th December, 2023?", day(2023, 12, 7), day(2023, 12, 10)),
    ("Where was the picture from December 1,2023 taken?", day(2023, 11, 30), day(2023, 12, 3)),
    ("What happened on 3 Jan?", day(2024, 1, 2), day(2024, 1, 5)),  # no year: the latest one up to now
    ("What happened on 3 March?", day(2023, 3, 2), day(2023, 3, 5)),  # March 2024 is still ahead
    ("Where was John between August 11 and August 15 2023?", day(2023, 8, 10), day(2023, 8, 17)),
    ("What did he try in November 2022?", day(2022, 10, 29), day(2022, 12, 4)),
    ("What deal did John get in December?", day(2023, 11, 28), day(2024, 1, 4)),
    ("What did John organise in 2023?", day(2023, 1, 1), day(2024, 1, 1)),
    ("What is on 31 February, 2023?", day(2023, 1, 29), day(2023, 3, 4)),  # no such day: the month it names
    # "last week, as mentioned on 6 November": the remark, so the memory, is from the date
    ("What went wrong last week, as mentioned on 6 November, 2023?", day(2023, 11, 5), day(2023, 11, 8)),
])
def test_absolute_times_become_windows(query, start, end):
    assert timeframe.window(query, NOW) == (start, end, timedelta(0))  # a date is a hard edge


@pytest.mark.parametrize("query", [
    "may I ask what you cooked?",  # "may" is a verb unless capitalised
    "What did the sister of May cook?",  # and "May" a person unless a time word, day or year comes with it
    "What did Jan say in Jan?",
    "Where does Ana live?",
])
def test_no_time_no_window(query):
    assert timeframe.window(query, NOW) is None


def test_relative_times_still_work_and_need_a_reference():
    start, end, fade = timeframe.window("What did I buy two weeks ago?", NOW)
    assert start < day(2024, 1, 6) < end and end < NOW
    assert fade == timedelta(days=14)  # "two weeks ago" is loose: further back the prior fades over two weeks
    assert timeframe.window("What did I buy yesterday?", NOW)[0] == day(2024, 1, 18) + (NOW - day(2024, 1, 20))
    assert timeframe.window("What did I buy two weeks ago?", None) is None


def test_a_loose_time_fades_out_and_a_date_does_not():
    frame = timeframe.window("What did I buy two weeks ago?", NOW)  # full weight 9.1 to 18.9 days back
    weight = {days: timeframe.closeness(frame, NOW - timedelta(days=days)) for days in (5, 8, 14, 18, 21, 26, 33, 40)}
    assert weight[14] == weight[18] == 1.0
    assert 1.0 > weight[21] > weight[26] > 0.0  # an event a week further back still counts, less
    assert weight[33] == weight[40] == 0.0
    assert weight[5] == weight[8] == 0.0  # people place the past too near, not too far: no fade this side
    date = timeframe.window("What did I buy on 6 January?", NOW)
    assert timeframe.closeness(date, day(2024, 1, 6)) == 1.0
    assert timeframe.closeness(date, day(2024, 1, 8)) == 0.0


def test_a_vague_time_is_weak_evidence_for_a_narrow_window():
    """"This summer" said in August holds June for a third of its span: it may be June, it may as
    well be July or August. "On 3 June" is wholly inside; a time outside scores as a date would."""
    june = timeframe.window("What did Melanie do in June 2023?", NOW)
    summer = timeframe.interval_closeness(june, day(2023, 6, 1), day(2023, 9, 1))
    assert 0.3 < summer < 0.4
    assert timeframe.interval_closeness(june, day(2023, 6, 3), day(2023, 6, 4)) == 1.0
    year = timeframe.interval_closeness(june, day(2023, 1, 1), day(2024, 1, 1))
    assert 0.0 < year < summer
    assert timeframe.interval_closeness(june, day(2023, 9, 1), day(2023, 9, 2)) == 0.0


def session(engine, n: int, when: str, turns: list[tuple[str, str]]) -> None:
    text, chunks, pos = "", [], 0
    for i, (who, said) in enumerate(turns, start=1):
        line = f"{who}: {said}"
        chunks.append(ParsedChunk(pos, pos + len(line), "message", speaker=who, role="user", source_time=when,
                                  message_id=f"D{n}:{i}"))
        text += line + "\n"
        pos += len(line) + 1
    doc = ParsedDocument(text=text, source_type="chat", trust="user", uri=f"chat:{n}", external_id=f"s{n}",
                         source_time=when, chunks=chunks)
    engine.ingest_documents([doc], scope=SCOPE, extract="none")


@pytest.fixture
def empty(tmp_path):
    """A fresh engine, closed afterwards even when the test fails."""
    eng = MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(256), llm=False)
    yield eng
    eng.close()


@pytest.fixture
def engine(empty):
    eng = empty
    session(eng, 1, "2023-05-09T10:00:00Z", [
        ("Joanna", "Your turtles look adorable in that tank!"),
        ("Joanna", "How long have you had them?"),
        ("Nate", "Three years now, they bring me tons of joy."),
        ("Joanna", "Lovely. I am off to the gym."),
    ])
    session(eng, 2, "2023-08-21T10:00:00Z", [
        ("Nate", "I cooked a coconut curry for my turtles' birthday party."),
        ("Joanna", "A curry party sounds great."),
    ])
    session(eng, 3, "2023-06-02T10:00:00Z", [
        ("Nate", "I cooked a coconut curry again tonight."),
        ("Joanna", "Curry twice in a month, nice."),
    ])
    return eng


def by_message(engine, res) -> dict[str, dict]:
    msgs = engine.store.message_ids(SCOPE, res.ranked_ids)
    return {msgs[mid][0]: res.trace.candidates[mid] for mid in res.ranked_ids}


def test_the_turn_after_a_question_is_found_as_its_answer(engine):
    query = "How long has Nate had his turtles?"
    res = engine.recall(query, scope=SCOPE, k=5, origin="bench")
    found = by_message(engine, res)
    answer = found["D1:3"]  # shares no word with the query but "Nate"
    via = res.trace.candidates[answer.channels["neighbour"]["via"]]
    assert via.meta["text"].endswith("How long have you had them?")
    assert set(answer.components) >= {"session", "speaker"}
    # the answer is worth what its question is worth, not half of it as an ordinary next turn
    plain = engine.recall(query, scope=SCOPE, k=5, origin="bench", answer_factor=0.0)
    halved = next(c for c in plain.trace.candidates.values() if c.meta.get("text", "").startswith("Nate: Three"))
    assert halved.channels["neighbour"]["via"] == via.memory_id
    assert answer.channels["neighbour"]["score"] == pytest.approx(2 * halved.channels["neighbour"]["score"], rel=1e-4)


def test_a_question_asked_without_its_question_mark_still_has_its_answer_next(empty):
    """Chat drops question marks: "so how long have you had them" asks as much as with one."""
    session(empty, 1, "2023-05-09T10:00:00Z", [
        ("Joanna", "your turtles look adorable in that tank"),
        ("Joanna", "so how long have you had them"),
        ("Nate", "three years now, they bring me tons of joy"),
        ("Joanna", "lovely. i am off to the gym"),
    ])
    query = "How long has Nate had his turtles?"
    with_answer = by_message(empty, empty.recall(query, scope=SCOPE, k=5, origin="bench"))
    plain = by_message(empty, empty.recall(query, scope=SCOPE, k=5, origin="bench", answer_factor=0.0))
    answer, halved = with_answer["D1:3"].channels["neighbour"], plain["D1:3"].channels["neighbour"]
    assert answer["score"] == pytest.approx(2 * halved["score"], rel=1e-4)  # read as the question's answer


def test_a_date_in_the_question_ranks_that_session_first(engine):
    res = engine.recall("What did Nate cook on 2 June, 2023?", scope=SCOPE, k=3, origin="bench")
    ranked = list(by_message(engine, res))
    assert ranked[0] == "D3:1"
    first = res.trace.candidates[res.ranked_ids[0]]
    assert first.components["timeframe"] > 0
    assert res.trace.params["timeframe"][0].startswith("2023-06-01")
    # without the date the August party (more words in common) comes first
    res = engine.recall("What did Nate cook for the turtles' birthday party?", scope=SCOPE, k=3, origin="bench")
    assert list(by_message(engine, res))[0] == "D2:1"


def test_an_event_a_week_beyond_two_weeks_ago_still_outranks_an_unrelated_one_inside(empty):
    # LongMemEval's shape: the question's event, the one it must be told apart from a week
    # further back, and in the window a session sharing only a word or two with the question.
    session(empty, 1, "2023-01-15T10:00:00Z", [("user", "I saw the art exhibit at the Met today.")])
    session(empty, 2, "2023-01-08T10:00:00Z", [("user", "I went on a guided art tour at MoMA today.")])
    session(empty, 3, "2023-01-16T10:00:00Z", [("user", "I fixed the lamp in the hall.")])
    session(empty, 4, "2022-11-20T10:00:00Z", [("user", "I went to an art fair in Boston.")])
    res = empty.recall("Where was the art event I went to two weeks ago?", scope=SCOPE, k=4, origin="bench",
                       now="2023-02-01T08:00:00Z")
    found = by_message(empty, res)
    weight = {m: c.components["timeframe"] for m, c in found.items()}
    full = get_recipe(res.trace.recipe).timeframe_weight  # fitted (resources/recipes/fitted.json)
    assert full > 0
    assert weight["D1:1"] == weight["D3:1"] == pytest.approx(full)  # 17 and 16 days back: inside
    assert 0.0 < weight["D2:1"] < full  # 24 days back: fading
    assert weight["D4:1"] == 0.0  # 10 weeks back: nothing
    assert res.trace.params["timeframe_fade_days"] == 14
    assert list(found).index("D2:1") < list(found).index("D3:1")


@pytest.mark.parametrize("query, favoured", [
    ("You recommended a place in Trastevere, what was it?", {"assistant"}),  # what the assistant said
    ("What did you suggest for dinner in Trastevere?", {"assistant"}),
    ("What did I eat in Trastevere?", {"user"}),  # what the user said
    ("Can you remind me what I ate in Trastevere?", {"user", "assistant"}),  # either side may have
    ("Can you suggest a place in Trastevere for me?", {"user"}),  # a request, not about what was said
])
def test_the_speaker_prior_follows_who_the_question_says_spoke(empty, query, favoured):
    session(empty, 1, "2023-05-01T10:00:00Z", [
        ("user", "Where should I eat in Trastevere tonight?"),
        ("assistant", "Try Da Enzo in Trastevere, the cacio e pepe is famous."),
        ("user", "I ate pasta in Trastevere last year."),
    ])
    res = empty.recall(query, scope=SCOPE, k=3, origin="bench")
    prior = {c.meta["speaker"]: c.components["side"] for c in res.trace.candidates.values() if c.components}
    assert {who for who, v in prior.items() if v > 0} == favoured
    # a side is not a person the question names: that prior stays off
    assert all(c.components["speaker"] == 0 for c in res.trace.candidates.values() if c.components)


def test_turns_of_the_best_matching_session_gain_its_context(engine):
    res = engine.recall("turtles tank adorable", scope=SCOPE, k=10, origin="bench")
    found = by_message(engine, res)
    assert found["D1:4"].components["session"] > found["D3:2"].components.get("session", 0.0)


def test_one_long_conversation_gives_no_session_context(tmp_path):
    with MemoryEngine(tmp_path / "one.db", embedder=HashingEmbedder(256), llm=False) as eng:
        session(eng, 1, "2023-05-09T10:00:00Z", [
            ("Joanna", "Your turtles look adorable in that tank!"),
            ("Nate", "Thanks, I feed them twice a day."),
            ("Joanna", "I am off to the gym."),
        ])
        res = eng.recall("turtles tank adorable", scope=SCOPE, k=3, origin="bench")
        assert res.ranked_ids
        assert all(res.trace.candidates[m].components.get("session", 0.0) == 0.0 for m in res.ranked_ids)


def test_neighbours_are_turns_never_facts(engine):
    from engine.consolidate import consolidate
    from engine.extract.model import Candidate, SourceChunk

    doc = next(d for d in engine.store.documents(SCOPE) if d.external_id == "s1")
    chunk = next(c for c in engine.store.chunks_of(SCOPE, doc.id) if c.text.startswith("Nate: Three"))
    view = SourceChunk(chunk.id, doc.id, chunk.text, chunk.start, chunk.end, "Nate", "user", "user",
                       "2023-05-09T10:00:00Z")
    consolidate(engine.store, SCOPE, HashingEmbedder(256), [(view, Candidate(
        text="Nate has had turtles for three years.", subject="Nate", predicate="has_pet", object="turtles",
        evidence="Three years now", relation="new", confidence=0.8, category="preference"))])
    res = engine.recall("adorable tank", scope=SCOPE, k=10, origin="bench")
    kinds = {c.meta.get("kind") for c in res.trace.candidates.values() if "neighbour" in c.channels}
    assert kinds == {"episode"}


def test_query_terms_are_split_by_the_index_tokenizer(engine):
    """One tokenizer: the query is split exactly as the FTS index splits memory text, so a
    hyphenated compound is its parts, a possessive its name, and two forms of one word one term."""
    from engine.retrieve.query import content_terms, fts_query

    tok = engine.store.fts_tokens
    assert content_terms("an art-related event, well-known", tok) == ["art", "related", "event", "well", "known"]
    assert content_terms("Nate's sister don't run; running runs", tok) == ["nate", "sister", "run"]
    assert fts_query("art-related", tok) == '"art" OR "related"'
    session(engine, 4, "2023-09-01T10:00:00Z", [("Nate", "I saw the Ancient Civilizations exhibit at the Museum of Art.")])
    res = engine.recall("Where was the art-related event held?", scope=SCOPE, k=5, origin="bench",
                        weights={"fts": 1.0})
    fts = {by: c for by, c in by_message(engine, res).items() if "fts" in c.channels}
    assert "D4:1" in fts  # the phrase "art related" alone is in no turn


def test_questions_that_count_or_order_gather_from_several_sessions(empty):
    eng = empty
    session(eng, 1, "2023-05-09T10:00:00Z", [
        ("Nate", "The graduation ceremony for my cousin was long."),
        ("Nate", "At the graduation ceremony the speeches went on and on."),
        ("Nate", "After the graduation ceremony we had cake."),
        ("Nate", "The graduation ceremony photos came out well."),
    ])
    session(eng, 2, "2023-06-02T10:00:00Z", [("Nate", "Off to a graduation at the college today.")])
    session(eng, 3, "2023-07-14T10:00:00Z", [("Nate", "My nephew's graduation was outdoors.")])

    def sessions(query):
        res = eng.recall(query, scope=SCOPE, k=4, origin="bench")
        return res, [m.split(":")[0] for m in by_message(eng, res)]

    plain, where = sessions("What happened at Nate's graduation ceremony?")
    assert where.count("D1") == 4 and "per_document_cap" not in plain.trace.params  # the best session, turn by turn
    counted, where = sessions("How many graduation ceremonies did Nate attend?")
    assert set(where) == {"D1", "D2", "D3"} and where.count("D1") == 2
    assert counted.trace.params["per_document_cap"]["cap"] == 2
    held = [c for c in counted.trace.candidates.values() if c.dropped and "held back" in (c.dropped.get("detail") or "")]
    assert len(held) == 2  # the first session's other turns, with the reason in the trace
    _, where = sessions("Which graduation ceremony did Nate attend first?")
    assert set(where) == {"D1", "D2", "D3"}


def test_the_gathering_cap_holds_back_turns_never_facts(empty):
    eng = empty
    eng.add_turns([{"role": "user", "content": "I have a dog named Rex."},
                   {"role": "user", "content": "I also have a cat named Miso."},
                   {"role": "user", "content": "I live in Munich and I work at BMW."},
                   {"role": "user", "content": "My sister is Lea."}], scope=SCOPE)
    res = eng.recall("How many pets do I have?", scope=SCOPE, k=3, origin="bench")
    facts = [c for c in res.trace.candidates.values() if c.meta.get("fact_id") is not None]
    assert len(facts) >= 3  # several facts from the one conversation
    assert res.trace.params["per_document_cap"]["cap"] == 2
    assert not [c for c in facts if c.dropped and "held back" in (c.dropped.get("detail") or "")]


def test_the_word_after_how_is_searched_only_as_the_phrase(engine):
    """"How old", "how long", "how many": the answer ("I just turned 32") rarely repeats the
    adjective, which alone finds any "old" or "long"; the phrase still finds the turn where
    someone asked the same thing."""
    from engine.retrieve.query import content_terms, fts_query

    tok = engine.store.fts_tokens
    assert content_terms("How old was I when Alex was born?", tok) == ["how old", "alex", "born"]
    assert content_terms("How long did the old bridge stand?", tok) == ["how long", "old", "bridge", "stand"]
    assert content_terms("Where is the long table?", tok) == ["long", "table"]
    assert fts_query("how many hikes", tok) == '"how many" OR "hikes"'
    session(engine, 5, "2023-10-01T10:00:00Z", [("Nate", "My niece is five years old and loves old cartoons."),
                                               ("Joanna", "How old is she now, exactly?")])
    res = engine.recall("How old is the red car?", scope=SCOPE, k=5, origin="bench", weights={"fts": 1.0})
    fts = {by for by, c in by_message(engine, res).items() if "fts" in c.channels}
    assert "D5:2" in fts and "D5:1" not in fts
    assert "how old" in res.trace.params["fts_terms"]


def test_a_time_the_turn_names_places_it_in_the_questions_window(empty):
    """"Last Saturday", said on Monday 15 May, is 13 May: a question about 13 May finds that turn
    though its session is dated two days later; with the feature off it is one turn among many."""
    eng = empty
    session(eng, 1, "2023-05-15T13:00:00Z", [
        ("Caroline", "I went to a pottery class last Saturday, it was so calming."),
        ("Melanie", "I went to a pottery fair once, it was crowded."),
    ])
    session(eng, 2, "2023-04-02T13:00:00Z", [("Caroline", "A pottery class is on my list, one day.")])
    q = "What did Caroline do on 13 May 2023?"
    res = eng.recall(q, scope=SCOPE, k=3, origin="bench", weights={"fts": 0.0, "vector": 0.2, "entity": 0.0})
    found = by_message(eng, res)
    from engine.retrieve.recipes import get_recipe

    assert get_recipe(None).timeframe_weight > 0
    assert found["D1:1"].components["timeframe"] == pytest.approx(get_recipe(None).timeframe_weight)
    assert list(res.trace.params["event_times"].values()) == ["last Saturday: 2023-05-13"]
    off = eng.recall(q, scope=SCOPE, k=3, origin="bench", weights={"fts": 0.0, "vector": 0.2, "entity": 0.0},
                     off=("event_times",))
    assert by_message(eng, off)["D1:1"].components["timeframe"] == 0.0
    assert "event_times" not in off.trace.params


def test_times_are_stored_with_their_span_at_ingestion(empty):
    eng = empty
    session(eng, 1, "2023-05-15T13:00:00Z", [("Caroline", "Yesterday I adopted a cat, and next week I fly.")])
    mid = eng.store.memories_for_messages(SCOPE, ["D1:1"])[0]
    chunk = eng.store.first_sources(SCOPE, [mid])[mid]["chunk_id"]
    rows = eng.store.chunk_times(SCOPE, [chunk])[chunk]
    text = eng.store.memory(SCOPE, mid).text
    assert [(text[r["start"]:r["end"]], r["window_start"][:10]) for r in rows] == [
        ("Yesterday", "2023-05-14"), ("next week", "2023-05-22")]


@pytest.mark.parametrize("query, asks", [
    ("When did Caroline go to the support group?", True),
    ("In what year did Nate start his job?", True),
    ("Which month did they move?", True),
    ("How long ago was the wedding?", True),
    ("What did Caroline say when she met Mel?", False),  # "when" inside is not the question word
    ("Where does Dana live now?", False),
])
def test_questions_that_ask_for_a_time(query, asks):
    from engine.retrieve.intent import ASKS_WHEN

    assert bool(ASKS_WHEN.search(query)) is asks


def test_a_when_question_favours_the_turn_that_names_a_time(empty):
    eng = empty
    session(eng, 1, "2023-05-08T13:00:00Z", [
        ("Caroline", "I went to the support group yesterday, it was so powerful."),
        ("Caroline", "The support group people are lovely and kind."),
    ])
    res = eng.recall("When did Caroline go to the support group?", scope=SCOPE, k=2, origin="bench")
    found = by_message(eng, res)
    from engine.retrieve.recipes import get_recipe

    assert get_recipe(None).when_weight > 0
    assert found["D1:1"].components["when_time"] == pytest.approx(get_recipe(None).when_weight)
    assert found["D1:2"].components["when_time"] == 0.0
    assert res.trace.params["features"]["when_time"] == "When"
    off = eng.recall("When did Caroline go to the support group?", scope=SCOPE, k=2, origin="bench", off=("when_time",))
    assert all("when_time" not in c.components for c in off.trace.candidates.values())
