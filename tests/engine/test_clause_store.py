"""Turns' parsed clauses and same_slot readings kept beside their memories (memory_clauses):
written at ingestion, read by recall in a process that has not parsed them, never read when the
text or the rules differ, gone with their memory, and a recall over stored parses and readings
ranks exactly as one that makes them."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from engine import statements
from engine.embed.hashing import HashingEmbedder
from engine.ingest.formats.chat import parse_json
from engine.memory import MemoryEngine
from engine.retrieve import recipes
from engine.retrieve.pipeline import Recall
from engine.scope import Scope
from engine.store.recall import StoredParse

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
    """This process's parse and reading caches emptied, as a fresh process has them."""
    statements._CLAUSES._items.clear()
    statements._LONG_CLAUSES._items.clear()
    statements._SLOT_READINGS._items.clear()


def full_rows(engine: MemoryEngine) -> dict[int, tuple[Any, ...]]:
    return {mid: tuple(rest) for mid, *rest in engine.store.conn.execute(
        "SELECT memory_id, text_hash, rules, clauses, readings FROM memory_clauses")}


def vectors_only(parses: list[tuple[Any, ...]], before: dict[int, tuple[Any, ...]]) -> bool:
    """Does a recall write back nothing but clause vectors (the parse and readings as stored)?"""
    return all(p[1:5] == before[p[0]] and p[5] is not None for p in parses)


def stored_readings(engine: MemoryEngine) -> dict[int, str | None]:
    return dict(engine.store.conn.execute("SELECT memory_id, readings FROM memory_clauses"))


# a pool where same_slot reads every user turn: one speaker, three conversations
QUESTIONS = ["Where does Dana live now?", "Where did Dana live before Munich?", "Is Dana moving to Hamburg?",
             "Where do I live?"]


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
    before = full_rows(eng)
    res = eng.recall("Where does Dana live now?", scope=S)
    assert not set(user_turns(eng).values()) & set(parsed_now)  # every user turn came from the store
    assert vectors_only(res.parses, before)  # nothing to write back but the clause vectors it embedded
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
                               statements.encode_clauses(statements.clauses("I sold my car.")), None, None, None,
                               None)])
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


def test_ingestion_keeps_the_default_slot_reading_of_every_user_turn(eng):
    turns = user_turns(eng)
    times = dict(eng.store.conn.execute("SELECT id, source_time FROM memories"))
    kept = stored_readings(eng)
    for mid in turns:
        variant = statements.reading_variant(times[mid], False, True)
        assert variant in json.loads(kept[mid])  # not a reply, claims_in_passing on
    forget_parses()
    for mid, body in turns.items():  # and it is the reading this process would make
        made = statements._read_slots(body, times[mid], False, True)
        forget_parses()
        statements.prime_slot_readings(body, times[mid], json.loads(kept[mid]))
        assert statements._SLOT_READINGS.get((body, times[mid], False, True)) == made


def test_a_fresh_process_reads_the_stored_readings_and_ranks_as_reading_does(eng, monkeypatch):
    forget_parses()
    read_now: list[str] = []
    real = statements._read_slots
    monkeypatch.setattr(statements, "_read_slots", lambda text, *a: read_now.append(text) or real(text, *a))
    before = full_rows(eng)
    from_store = [eng.recall(q, scope=S, persist=False) for q in QUESTIONS]
    assert not set(user_turns(eng).values()) & set(read_now)  # every user turn's reading came from the store
    assert all(vectors_only(r.parses, before) for r in from_store)
    eng.store.conn.execute("UPDATE memory_clauses SET readings = NULL")
    forget_parses()
    reading = [eng.recall(q, scope=S, persist=False) for q in QUESTIONS]
    assert set(user_turns(eng).values()) <= set(read_now)
    for a, b in zip(from_store, reading, strict=True):
        assert a.ordered_ids == b.ordered_ids
        assert {m: c.components for m, c in a.trace.candidates.items()} == \
            {m: c.components for m, c in b.trace.candidates.items()}
        assert a.trace.params.get("outdated") == b.trace.params.get("outdated")


def test_recall_writes_the_readings_the_store_lacked_and_keeps_the_parse(eng):
    before = rows(eng)
    eng.store.conn.execute("UPDATE memory_clauses SET readings = NULL")
    forget_parses()
    res = eng.recall("Where does Dana live now?", scope=S)
    assert res.parses and all(p[4] is not None for p in res.parses)
    kept = stored_readings(eng)
    for mid, *_ in res.parses:
        assert kept[mid] is not None and rows(eng)[mid] == before[mid]  # the parse itself unchanged
    # a reading of another variant (a reply) joins the stored ones instead of replacing them
    mid, body = next(iter(user_turns(eng).items()))
    when = dict(eng.store.conn.execute("SELECT id, source_time FROM memories"))[mid]
    forget_parses()
    had = statements.read_slots_for_store(body, when)  # the default variant, as ingestion keeps it
    forget_parses()
    statements.clauses(body)
    statements._slot_reading(body, when, True, True)  # only the reply variant in this process
    recall = Recall(eng.store, S, eng.embedder, None, recipes.get_recipe("offline"))
    recall._unstored = [(mid, body, when, StoredParse(statements.text_digest(body), "", had, None, None, None), {})]
    (row,) = recall._new_parses()
    merged = json.loads(row[4])
    assert set(merged) == {statements.reading_variant(when, False, True), statements.reading_variant(when, True, True)}
    assert merged[statements.reading_variant(when, False, True)] == json.loads(had)[
        statements.reading_variant(when, False, True)]
    # and nothing to write when the store holds every reading this process made
    from engine.retrieve.pipeline import CLAUSE_VECTORS, _stored_vectors

    stored = StoredParse(row[1], row[3], row[4], *row[5:])
    recall._unstored = [(mid, body, when, stored, _stored_vectors(stored, CLAUSE_VECTORS.model_of(eng.embedder), body))]
    assert recall._new_parses() == []


def forget_vectors() -> None:
    from engine.retrieve import pipeline

    pipeline.CLAUSE_VECTORS._vecs._items.clear()


def embedded_texts(eng: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every passage text the engine's embedder is asked for from now on."""
    seen: list[str] = []
    real = eng.embedder.embed

    def embed(texts: list[str], kind: str = "passage") -> np.ndarray:
        if kind == "passage":
            seen.extend(texts)
        return real(texts, kind=kind)

    monkeypatch.setattr(eng.embedder, "embed", embed)
    return seen


def test_a_recall_keeps_the_clause_vectors_it_embedded_and_a_fresh_process_embeds_none_again(eng, monkeypatch):
    q = "Where does Dana live now?"
    forget_parses()
    forget_vectors()
    seen = embedded_texts(eng, monkeypatch)
    first = eng.recall(q, scope=S)
    turns = user_turns(eng)
    clause_texts = {c.text for body in turns.values() for c in statements.clauses(body)}
    made = [t for t in seen if t in clause_texts]
    assert made  # the current-truth rules compared clauses
    kept = {}
    for mid, model, blob, at in eng.store.conn.execute(
            "SELECT memory_id, vectors_model, vectors, vector_at FROM memory_clauses WHERE vectors IS NOT NULL"):
        assert model == f"{eng.embedder.model}/{eng.embedder.dims}"
        parts = statements.clauses(turns[mid])
        rows = np.frombuffer(blob, dtype="<f4").reshape(-1, eng.embedder.dims)
        for i, row in zip(map(int, at.split(",")), rows, strict=True):
            kept[parts[i].text] = row
    assert set(made) <= set(kept)
    for text, row in kept.items():  # the very vectors the embedder gives
        assert np.array_equal(row, eng.embedder.embed([text])[0])
    # a fresh process serves them from the store, and ranks as the first recall did
    forget_parses()
    forget_vectors()
    seen.clear()
    again = eng.recall(q, scope=S, persist=False)
    assert not set(seen) & set(kept)
    assert again.parses == []  # nothing new to keep
    assert again.ordered_ids == first.ordered_ids
    assert {m: c.components for m, c in again.trace.candidates.items()} == \
        {m: c.components for m, c in first.trace.candidates.items()}


def test_clause_vectors_of_another_model_are_not_read(eng, monkeypatch):
    q = "Where does Dana live now?"
    forget_parses()
    forget_vectors()
    eng.recall(q, scope=S)
    with eng.store.writer(S):
        eng.store.conn.execute("UPDATE memory_clauses SET vectors_model = 'another-model/64'"
                               " WHERE vectors IS NOT NULL")
    forget_parses()
    forget_vectors()
    seen = embedded_texts(eng, monkeypatch)
    res = eng.recall(q, scope=S, persist=False)
    clause_texts = {c.text for body in user_turns(eng).values() for c in statements.clauses(body)}
    assert set(seen) & clause_texts  # embedded again
    assert res.parses and all(p[5] == f"{eng.embedder.model}/{eng.embedder.dims}" for p in res.parses if p[5])


def test_a_damaged_row_of_clause_vectors_is_not_read(eng):
    q = "Where does Dana live now?"
    forget_parses()
    forget_vectors()
    first = eng.recall(q, scope=S)
    with eng.store.writer(S):  # too short for its indices, and indices that are not numbers
        eng.store.conn.execute("UPDATE memory_clauses SET vectors = substr(vectors, 1, 10) WHERE vectors IS NOT NULL"
                               " AND memory_id = (SELECT min(memory_id) FROM memory_clauses WHERE vectors IS NOT NULL)")
        eng.store.conn.execute("UPDATE memory_clauses SET vector_at = 'x,y' WHERE vectors IS NOT NULL"
                               " AND memory_id = (SELECT max(memory_id) FROM memory_clauses WHERE vectors IS NOT NULL)")
    forget_parses()
    forget_vectors()
    again = eng.recall(q, scope=S)
    assert again.ordered_ids == first.ordered_ids
    assert all(len(p[6]) == 4 * eng.embedder.dims * len(p[7].split(",")) for p in again.parses if p[6])
