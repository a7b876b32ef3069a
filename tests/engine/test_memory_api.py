"""MemoryEngine as the API for Python agents: add_turns, and one engine shared by several threads."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from engine.embed.hashing import HashingEmbedder
from engine.errors import BadInput
from engine.llm import LLMClient, LLMConfig
from engine.memory import MemoryEngine, TurnsAdded
from engine.scope import Scope

ANA = Scope.default("ana", "bot")
BOB = Scope.default("bob", "bot")


@pytest.fixture
def engine(tmp_path):
    eng = MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(128), llm=False)
    yield eng
    eng.close()


def test_add_turns_stores_each_turn_with_speaker_time_and_trust(engine):
    added = engine.add_turns([
        {"role": "user", "name": "Ana", "content": "I live in Berlin and I work as a nurse.",
         "timestamp": "2024-03-01T09:00:00+01:00"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1"}]},  # no text: skipped
        {"role": "assistant", "content": [{"type": "text", "text": "Noted, Ana."}], "timestamp": 1709283600},
    ], scope=ANA, conversation="onboarding")
    assert isinstance(added, TurnsAdded)
    assert added.skipped_messages == 1 and len(added.memory_ids) == 2
    doc = engine.show("document", added.document_id, scope=ANA)
    assert doc["document"]["title"] == "onboarding" and doc["document"]["source_type"] == "chat"
    first, second = doc["chunks"]
    assert (first["speaker"], first["role"], first["trust"]) == ("Ana", "user", "user")
    assert first["source_time"] == "2024-03-01T08:00:00Z"
    assert (second["speaker"], second["trust"], second["source_time"]) == ("assistant", "assistant",
                                                                            "2024-03-01T09:00:00Z")
    mem = engine.show("memory", added.memory_ids[0], scope=ANA)
    assert mem["memory"]["kind"] == "episode"
    assert mem["sources"][0]["text"] == "Ana: I live in Berlin and I work as a nurse."
    # extract="auto" without an endpoint is the heuristic extractor: facts, with their memories
    assert added.extraction["windows"] == 1 and added.fact_ids
    assert len(added.fact_memory_ids) == len(added.fact_ids)
    objects = {engine.store.fact(ANA, f)["object"] for f in added.fact_ids}
    assert "Berlin" in objects
    assert added.as_dict()["document_id"] == added.document_id


def test_add_turns_one_message_defaults_to_now_and_every_call_is_kept(engine):
    a = engine.add_turns({"role": "user", "content": "ok"}, scope=ANA, extract="none")
    b = engine.add_turns({"role": "user", "content": "ok"}, scope=ANA, extract="none")
    assert a.document_id != b.document_id and a.memory_ids != b.memory_ids  # a repeated turn is a new turn
    assert a.extraction is None and a.fact_ids == []
    assert engine.counts(ANA)["memories"] == 2 and engine.counts(ANA)["facts"] == 0
    when = engine.store.chunks_of(ANA, a.document_id)[0].source_time
    assert when is not None and when.endswith("Z")


def test_add_turns_updates_and_reinforces_facts(engine):
    first = engine.add_turns({"role": "user", "content": "I live in Berlin.", "timestamp": "2024-01-01T10:00:00Z"},
                             scope=ANA)
    again = engine.add_turns({"role": "user", "content": "I live in Berlin.", "timestamp": "2024-02-01T10:00:00Z"},
                             scope=ANA)
    moved = engine.add_turns({"role": "user", "content": "I moved to Lisbon.", "timestamp": "2024-06-01T10:00:00Z"},
                             scope=ANA)
    assert first.fact_ids and again.fact_ids == [] and again.reinforced_fact_ids == first.fact_ids
    assert moved.superseded_fact_ids == first.fact_ids
    result = engine.recall("where does Ana live?", scope=ANA, origin="agent")
    assert "Lisbon" in result.context_text


@pytest.mark.parametrize("messages, message", [
    ([], "non-empty list"),
    ("I live in Berlin", "non-empty list"),
    ([{"content": "no role"}], "role must be user, assistant, system or tool"),
    ([{"role": "narrator", "content": "x"}], "role must be"),
    ([{"role": "user", "content": "x", "timestamp": "next week"}], "timestamp 'next week'"),
    ([{"role": "user", "content": "x", "name": ""}], "name must be a non-empty string"),
    ([{"role": "user", "content": "   "}, {"role": "tool", "content": None}], "no message has any text"),
    ([{"role": "user", "content": "fine"}, "not an object"], "message 1 is not an object"),
])
def test_add_turns_bad_input_writes_nothing(engine, messages, message):
    before = engine.counts(ANA)
    with pytest.raises(BadInput, match=message):
        engine.add_turns(messages, scope=ANA)
    assert engine.counts(ANA) == before


def test_add_turns_keeps_the_turn_when_extraction_fails(tmp_path, openai_server):
    openai_server.chat_responder = lambda request: "not json {"
    client = LLMClient(LLMConfig(base_url=openai_server.base_url, model="test-model", max_retries=0))
    with MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(128), llm=client) as eng:
        first = eng.add_turns({"role": "user", "content": "I live in Madrid."}, scope=ANA, extract="llm")
        assert first.memory_ids and first.fact_ids == []
        assert first.extraction["failed_windows"] == 1 and "malformed_json" in first.extraction["errors"][0]
        # the window stayed queued: the next call retries it with its own
        openai_server.chat_responder = lambda request: {"memories": []}
        second = eng.add_turns({"role": "user", "content": "Hello again."}, scope=ANA, extract="llm")
        assert second.extraction["windows"] == 2 and second.extraction["failed_windows"] == 0
        assert first.memory_ids[0] in [r["memory_id"] for r in eng.recall("Madrid", scope=ANA).results]
    client.close()


def test_one_engine_shared_by_four_threads(tmp_path):
    """Four agent threads add turns and recall at once through one engine: no errors, nothing lost,
    no fact stored twice, no memory crossing scopes."""
    engine = MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(128), llm=False)
    turns_per_thread = 12
    errors: list[BaseException] = []
    added: dict[int, list[int]] = {}
    recalls: dict[int, list[str]] = {}
    start = threading.Barrier(4)

    def agent(n: int) -> None:
        scope = ANA if n % 2 == 0 else BOB
        mine, texts = [], []
        try:
            # Each thread opens its connection before the race starts: opening one while another
            # thread writes is its own (known) problem, test_first_call_of_a_thread_during_a_write.
            engine.counts(scope)
            start.wait()
            for i in range(turns_per_thread):
                out = engine.add_turns([
                    {"role": "user", "content": f"Thread {n} note {i}: my pet number {n}-{i} is called Rex{n}x{i}."},
                    {"role": "assistant", "content": f"Got it, thread {n} item {i}."}], scope=scope)
                mine += out.memory_ids
                if i % 3 == 0:
                    res = engine.recall(f"pet called Rex{n}x{i}", scope=scope, origin="agent")
                    texts.append(res.context_text)
            added[n] = mine
            recalls[n] = texts
        except BaseException as exc:  # reported below, with the thread it came from
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(n,), name=f"agent-{n}") for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    try:
        assert not [t.name for t in threads if t.is_alive()]
        assert not errors, errors
        for n, ids in added.items():
            scope = ANA if n % 2 == 0 else BOB
            other = BOB if scope is ANA else ANA
            assert len(ids) == 2 * turns_per_thread and len(set(ids)) == len(ids)
            for mid in ids:
                assert engine.store.memory(scope, mid) is not None
                assert engine.store.memory(other, mid) is None
            assert all(f"Rex{n}x" in text for text in recalls[n])
        for scope in (ANA, BOB):
            assert engine.counts(scope)["documents"] == 2 * turns_per_thread
            facts = engine.facts(scope, history=True)
            dupes = Counter((f["subject_key"], f["predicate_key"], f["object_key"]) for f in facts)
            assert not [k for k, c in dupes.items() if c > 1]
            assert len(engine.store.traces(scope)) == 2 * (turns_per_thread // 3)
            assert all(t["query_text"] is None for t in engine.store.traces(scope))
    finally:
        engine.close()


def test_two_engines_on_one_file_write_in_turn(tmp_path):
    """Two engines on one file stand for two processes (an agent's MCP server and the inspector)."""
    path = tmp_path / "m.db"
    with MemoryEngine(path, embedder=HashingEmbedder(128), llm=False) as agent, \
            MemoryEngine(path, embedder=HashingEmbedder(128), llm=False) as inspector:
        agent.add_turns({"role": "user", "content": "I live in Berlin."}, scope=ANA, extract="none")
        with agent.store.writer(ANA) as w:
            agent.store.counts(ANA)  # a write that reads first (as enqueue and consolidate do)
            other = threading.Thread(target=inspector.add_turns, args=({"role": "user", "content": "Hi"},),
                                     kwargs={"scope": BOB, "extract": "none"})
            other.start()  # commits now; with BEGIN IMMEDIATE it would wait for our commit instead
            other.join(2)
            w.reinforce_usage([1])  # our write, after the other engine's commit
        other.join(10)
        assert agent.counts(BOB)["memories"] == 1
