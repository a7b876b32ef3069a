"""Turns' parsed clauses kept beside their memories (memory_clauses): written at ingestion, read by
recall in a process that has not parsed them, never read when the text or the rules differ, gone
with their memory, and a recall over stored parses ranks exactly as one that parses."""

from __future__ import annotations

import pytest

from engine import statements
from engine.embed.hashing import HashingEmbedder
from engine.ingest.formats.chat import parse_json
from engine.memory import MemoryEngine
from engine.scope import Scope

S = Scope.default("dana", "bot")
TURNS = [("2024-01-10T10:00:00Z", ["My name is Dana and I live in Berlin, in a flat near the park.",
                                   "Nice to meet you, Dana!"]),
         ("2024-03-02T09:00:00Z", ["We're thinking of moving to Hamburg next year, but nothing is decided.",
                                   "Sounds exciting."]),
         ("2024-06-12T09:30:00Z", ["Big news: I moved to Munich last week. The Berlin flat is history.",
                                   "Congratulations on the move!"])]


def chat(engine: MemoryEngine) -> None:
    convs = [{"id": f"s{n}", "messages": [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text, "timestamp": when, "id": f"s{n}:{i}"}
        for i, text in enumerate(turns)]} for n, (when, turns) in enumerate(TURNS, start=1)]
    engine.ingest_documents(parse_json(convs, name="chat.json"), scope=S, extract="none")


@pytest.fixture
def eng(tmp_path):
    engine = MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(64), llm=False, background_reembed=False)
    chat(engine)
    yield engine
    engine.close()


def rows(engine: MemoryEngine) -> dict[int, tuple[bytes, str, str]]:
    return {mid: (digest, rules, parts) for mid, digest, rules, parts in engine.store.conn.execute(
        "SELECT memory_id, text_hash, rules, clauses FROM memory_clauses")}


def user_turns(engine: MemoryEngine) -> dict[int, str]:
    return {mid: statements.turn_body(text, speaker) for mid, text, speaker in engine.store.conn.execute(
        "SELECT m.id, m.text, c.speaker FROM memories m JOIN memory_sources s ON s.memory_id = m.id"
        " JOIN chunks c ON c.id = s.chunk_id WHERE m.kind = 'episode' AND m.trust = 'user'")}


def forget_parses() -> None:
    """This process's parse caches emptied, as a fresh process has them."""
    statements._CLAUSES._items.clear()
    statements._LONG_CLAUSES._items.clear()


def test_ingestion_keeps_the_parse_of_every_user_turn(eng):
    turns = user_turns(eng)
    stored = rows(eng)
    assert set(stored) == set(turns) and len(turns) == 3  # the assistant's turns are not compared
    for mid, body in turns.items():
        digest, rules, parts = stored[mid]
        assert digest == statements.text_digest(body) and rules == statements.RULES_VERSION
        assert statements.decode_clauses(parts) == tuple(statements.clauses(body))


def test_a_fresh_process_reads_the_stored_parse_instead_of_parsing(eng, monkeypatch):
    forget_parses()
    parsed_now: list[str] = []
    real = statements._clauses
    monkeypatch.setattr(statements, "_clauses", lambda text: parsed_now.append(text) or real(text))
    res = eng.recall("Where does Dana live now?", scope=S)
    assert not set(user_turns(eng).values()) & set(parsed_now)  # every user turn came from the store
    assert res.parses == []  # nothing to write back
    # without the stored parses the same recall parses them
    eng.store.conn.execute("DELETE FROM memory_clauses")
    forget_parses()
    eng.recall("Where does Dana live now?", scope=S)
    assert set(user_turns(eng).values()) <= set(parsed_now)


def test_stored_parses_rank_as_parsing_does(eng):
    questions = ["Where does Dana live now?", "Where did Dana live before Munich?", "Is Dana moving to Hamburg?"]
    forget_parses()
    from_store = [eng.recall(q, scope=S, persist=False) for q in questions]
    eng.store.conn.execute("DELETE FROM memory_clauses")
    forget_parses()
    parsing = [eng.recall(q, scope=S, persist=False) for q in questions]
    for a, b in zip(from_store, parsing, strict=True):
        assert a.ordered_ids == b.ordered_ids
        assert {m: c.components for m, c in a.trace.candidates.items()} == \
            {m: c.components for m, c in b.trace.candidates.items()}


def test_recall_writes_the_parses_the_store_lacked(eng):
    eng.store.conn.execute("DELETE FROM memory_clauses")
    forget_parses()
    res = eng.recall("Where does Dana live now?", scope=S)
    written = rows(eng)
    assert written and {p[0] for p in res.parses} == set(written)
    turns = user_turns(eng)
    for mid, (digest, _rules, parts) in written.items():
        assert digest == statements.text_digest(turns[mid])
        assert statements.decode_clauses(parts) == tuple(statements.clauses(turns[mid]))


def test_a_parse_of_other_rules_or_another_text_is_not_read(eng):
    mid, body = next(iter(user_turns(eng).items()))
    assert eng.store.memory_clauses([mid], "other-rules") == {}
    with eng.store.writer(S) as w:  # a stored parse whose text is not the memory's now
        w.put_memory_clauses([(mid, statements.text_digest("something else"), statements.RULES_VERSION,
                               statements.encode_clauses(statements.clauses("I sold my car.")))])
    forget_parses()
    res = eng.recall("Where does Dana live now?", scope=S)
    assert statements.clauses(body) != list(statements.clauses("I sold my car."))
    assert mid in {p[0] for p in res.parses}  # parsed again, and the right parse written back
    assert rows(eng)[mid][0] == statements.text_digest(body)


def test_the_parse_goes_with_its_memory(eng):
    mid = next(iter(user_turns(eng)))
    with eng.store.writer(S) as w:
        w.delete_memory(mid)
    assert mid not in rows(eng)
