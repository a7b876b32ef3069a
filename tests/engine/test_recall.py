"""The traced recall pipeline: current-first versions, as-of, drops with reasons, budget, scope."""

from __future__ import annotations

import json
import math

import apsw
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.consolidate import consolidate
from engine.embed.hashing import HashingEmbedder
from engine.errors import BadInput
from engine.extract.model import Candidate, SourceChunk
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.llm import LLMClient, LLMConfig
from engine.memory import MemoryEngine
from engine.retrieve.trace import DropReason
from engine.scope import Scope
from tests.fixtures.openai_server import Reply

ANA = Scope.default("ana", "bot")
BOB = Scope.default("bob", "bot")
EMB = HashingEmbedder(128)


def say(engine, scope, day: int, text: str, *, pred=None, obj=None, relation="new", forget_after=None, conf=0.7,
        category="location"):
    line = f"Ana: {text}"
    when = f"2024-{day:02d}-01T10:00:00Z"
    doc = ParsedDocument(text=line, source_type="chat", trust="user", uri="chat", external_id=f"d{day}-{text[:12]}",
                         source_time=when, chunks=[ParsedChunk(0, len(line), "message", speaker="Ana", role="user",
                                                               source_time=when)])
    report = engine.ingest_documents([doc], scope=scope)
    if pred:
        did = report.document_ids[0]
        ch = engine.store.chunks_of(scope, did)[0]
        view = SourceChunk(ch.id, did, ch.text, ch.start, ch.end, "Ana", "user", "user", when)
        cand = Candidate(text=f"Ana {pred.replace('_', ' ')} {obj}.", subject="Ana", predicate=pred, object=obj,
                         evidence=obj, relation=relation, confidence=conf, category=category, forget_after=forget_after)
        return consolidate(engine.store, scope, EMB, [(view, cand)])
    return report


@pytest.fixture
def engine(tmp_path):
    eng = MemoryEngine(tmp_path / "m.db", embedder=EMB, llm=False)
    say(eng, ANA, 1, "I live in Berlin, near the old canal.", pred="lives_in", obj="Berlin")
    say(eng, ANA, 3, "I moved to Munich for the new job.", pred="lives_in", obj="Munich", relation="updates")
    say(eng, ANA, 4, "Planning a trip to Porto in April.", pred="plans_to", obj="visit Porto", category="plan",
        forget_after="2024-04-30T00:00:00Z")
    say(eng, ANA, 5, "My sister Lea studies chemistry in Zurich.")
    say(eng, BOB, 2, "Bob lives in Oslo and loves Munich beer.")
    yield eng
    eng.close()


def fact_results(result):
    return [r for r in result.results if r["fact"]]


def test_current_value_first_with_labelled_history(engine):
    res = engine.recall("where does Ana live now", scope=ANA, now="2024-06-01T00:00:00Z")
    facts = fact_results(res)
    assert facts[0]["fact"]["object"] == "Munich"
    assert [h["object"] for h in facts[0]["history"]] == ["Berlin"]
    assert facts[0]["history"][0]["label"] == "previous"
    assert all(r["fact"]["object"] != "Berlin" for r in facts)
    berlin = next(c for c in res.trace.candidates.values() if c.meta.get("object") == "Berlin")
    assert berlin.dropped["reason"] == DropReason.SUPERSEDED
    assert "previously: Berlin" in res.context_text


def test_historical_question_puts_the_old_value_first(engine):
    res = engine.recall("where did Ana live before Munich", scope=ANA, now="2024-06-01T00:00:00Z")
    assert res.trace.intent == "historical"
    objs = [r["fact"]["object"] for r in fact_results(res) if r["fact"]["predicate"] == "lives_in"]
    assert objs.index("Berlin") < objs.index("Munich")
    # switching the history_first feature off restores the current-first order
    res = engine.recall("where did Ana live before Munich", scope=ANA, now="2024-06-01T00:00:00Z",
                        off=("history_first",))
    objs = [r["fact"]["object"] for r in fact_results(res) if r["fact"]["predicate"] == "lives_in"]
    assert objs.index("Munich") < objs.index("Berlin")


@pytest.mark.parametrize("query, intent", [
    ("where did Ana live in the past?", "historical"),
    ("what was Ana's old address?", "historical"),
    ("where has Ana lived in the past two weeks?", "current"),  # a recent span, not the past
    ("what did Ana do in the past few days?", "current"),
    ("how old is Ana?", "current"),  # an age
])
def test_intent_reads_the_past_and_not_a_recent_span(engine, query, intent):
    assert engine.recall(query, scope=ANA, now="2024-06-01T00:00:00Z").trace.intent == intent


def test_a_turn_whose_claim_was_replaced_ranks_below_its_current_version(engine):
    def turn(res, start):
        return next(c for c in res.trace.candidates.values()
                    if c.meta.get("kind") == "episode" and c.meta["text"].startswith(start))

    res = engine.recall("where does Ana live", scope=ANA, now="2024-06-01T00:00:00Z")
    old, new = turn(res, "Ana: I live in Berlin"), turn(res, "Ana: I moved to Munich")
    munich = next(c for c in res.trace.candidates.values() if c.meta.get("object") == "Munich")
    assert "claim_superseded" in old.components and old.score < munich.score
    assert res.trace.params["outdated"][str(old.memory_id)]["by"] == munich.memory_id
    assert str(new.memory_id) not in res.trace.params["outdated"]
    assert str(turn(res, "Ana: Planning a trip").memory_id) not in res.trace.params["outdated"]  # its fact is current
    # asked about the past, the old turn leads
    res = engine.recall("where did Ana live before Munich", scope=ANA, now="2024-06-01T00:00:00Z")
    assert turn(res, "Ana: I live in Berlin").score > turn(res, "Ana: I moved to Munich").score


def test_as_of_answers_in_world_and_belief_time(engine):
    res = engine.recall("where does Ana live", scope=ANA, as_of="2024-02-01T00:00:00Z")
    objs = [r["fact"]["object"] for r in fact_results(res)]
    assert "Berlin" in objs and "Munich" not in objs
    munich = next(c for c in res.trace.candidates.values() if c.meta.get("object") == "Munich")
    assert munich.dropped["reason"] == DropReason.NOT_VALID_AT


def test_expired_fact_is_not_current_but_is_found_as_of(engine):
    res = engine.recall("trip to Porto", scope=ANA, now="2024-06-01T00:00:00Z")
    porto = next(c for c in res.trace.candidates.values() if c.meta.get("object") == "visit Porto")
    assert porto.dropped["reason"] == DropReason.EXPIRED
    before = engine.recall("trip to Porto", scope=ANA, as_of="2024-04-15T00:00:00Z")
    assert any(r["fact"] and r["fact"]["object"] == "visit Porto" for r in before.results)


def test_forgotten_and_retracted_are_dropped_with_reasons(engine):
    lea = engine.recall("Lea chemistry Zurich", scope=ANA).results[0]["memory_id"]
    engine.curator(ANA).forget(lea, reason="asked to forget")
    res = engine.recall("Lea chemistry Zurich", scope=ANA)
    assert res.trace.candidates[lea].dropped["reason"] == DropReason.FORGOTTEN
    doc = engine.store.sources_of(ANA, lea)[0].document_id
    engine.curator(ANA).retract(doc)
    again = engine.recall("Lea chemistry Zurich", scope=ANA)
    assert again.trace.candidates[lea].dropped["reason"] == DropReason.RETRACTED  # checked before forgotten
    assert lea not in [r["memory_id"] for r in again.results]


def test_trace_persists_and_explains(engine, tmp_path):
    res = engine.recall("where does Ana live", scope=ANA, k=2)
    t = engine.trace(res.trace.id, scope=ANA)
    assert t["query"] == "where does Ana live"
    assert [s["name"] for s in t["stages"]][:3] == ["candidates", "filters", "score"]
    for c in t["candidates"]:
        assert (c["rank"] is not None) != (c["dropped"] is not None)
    below = next(c for c in t["candidates"] if c["dropped"] and c["dropped"]["reason"] == "below_cut")
    why = engine.explain("where does Ana live", below["memory_id"], scope=ANA, k=2)
    assert why["verdict"] == "below_cut" and "position" in why["detail"]
    berlin_mid = next(c.memory_id for c in res.trace.candidates.values() if c.meta.get("object") == "Berlin")
    why = engine.explain("where does Ana live", berlin_mid, scope=ANA)
    assert why["verdict"] == "dropped" and "superseded" in why["detail"]
    berlin_turn = next(m["id"] for m in engine.export(ANA)["memories"] if "old canal" in m["text"])
    why = engine.explain("Zurich chemistry", berlin_turn, scope=ANA, recipe="lexical")  # full text only
    assert why["verdict"] == "never_candidate"
    assert "shares no content word" in why["detail"] and "cosine" in why["detail"]
    with pytest.raises(BadInput):
        engine.trace(res.trace.id, scope=BOB)


def test_operator_what_if_changes_no_memory_agent_recall_reinforces(engine):
    before = engine.export(ANA)["memories"]
    engine.recall("where does Ana live", scope=ANA)
    assert engine.export(ANA)["memories"] == before
    res = engine.recall("where does Ana live", scope=ANA, origin="agent")
    after = {m["id"]: m for m in engine.export(ANA)["memories"]}
    assert all(after[r["memory_id"]]["access_count"] == 1 for r in res.results)
    stored = engine.trace(res.trace.id, scope=ANA)
    assert stored["query"] is None and stored["query_hash"] == res.trace.query_hash


def test_scope_isolation_holds_across_relation_hops(engine):
    bob_mem = engine.export(BOB)["memories"][0]["id"]
    ana_fact = next(f for f in engine.facts(ANA) if f["object"] == "Munich")
    # A relation row pointing across scopes (only a corrupt or hand-edited DB has one).
    with engine.store.writer(ANA) as w:
        w.add_relation(src_memory_id=ana_fact["memory_id"], dst_memory_id=bob_mem, type="extends", confidence=1.0,
                       created_by="operator", rule="test", reason="cross-scope edge")
    res = engine.recall("where does Ana live now", scope=ANA)
    assert bob_mem not in [r["memory_id"] for r in res.results]
    hop = res.trace.candidates[bob_mem]  # the relation channel did follow the edge ...
    assert "relation" in hop.channels
    assert hop.dropped["reason"] == DropReason.OUT_OF_SCOPE  # ... and the filter stopped it
    assert "Oslo" not in res.context_text and "Oslo" not in json.dumps(res.as_dict())


def test_an_old_memory_behind_many_newer_ones_is_found(tmp_path):
    """The oldest memory must still be found behind 100k newer ones."""
    from engine.bench.perf import SyntheticStore
    from engine.store.store import Store

    path = tmp_path / "big.db"
    scope = Scope.default("perf", "perf")
    old_text = "Ana keeps her grandmother's quillwort recipe in the blue tin"
    store = Store(path)
    with store.writer(scope) as w:
        mid = w.insert_memory(kind="episode", text=old_text, trust="user", content_hash="old",
                              source_time="2015-01-01T00:00:00Z")
        w.put_embeddings("memory", [(mid, EMB.embed([old_text])[0])], provider=EMB.provider, model=EMB.model,
                         dims=EMB.dims, embed_ms=None)
    synth = SyntheticStore(path, 100_000, dims=EMB.dims)
    texts = synth._texts(synth.n)
    vectors = synth.rng.standard_normal((synth.n, EMB.dims), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for start in range(0, synth.n, 20000):
        rows = range(start, min(synth.n, start + 20000))
        with store.writer(scope) as w:
            w.bulk_memories([(mid + 1 + i, "episode", texts[i][0], "user", 0.5, 1.0, "2024-01-01T00:00:00Z", str(i))
                             for i in rows])
            w.put_embeddings("memory", [(mid + 1 + i, vectors[i]) for i in rows], provider=EMB.provider,
                             model=EMB.model, dims=EMB.dims, embed_ms=None)
    store.close()
    with MemoryEngine(path, embedder=EMB, llm=False) as eng:
        assert eng.counts(scope)["memories"] == 100_001
        res = eng.recall("where is the quillwort recipe kept", scope=scope)
        assert res.results[0]["memory_id"] == mid


QUERIES = st.text(alphabet=st.sampled_from(list("abcdefghijklmnopqrstuvwxyz   ")), min_size=1, max_size=40).filter(
    lambda s: s.strip())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.one_of(QUERIES, st.sampled_from(["where does Ana live", "Munich", "Porto trip", "sister"])),
       k=st.integers(1, 6), budget=st.integers(1, 200))
def test_every_candidate_has_a_rank_or_a_drop_and_budget_holds(engine, query, k, budget):
    res = engine.recall(query, scope=ANA, k=k, budget=budget, persist=False)
    for c in res.trace.candidates.values():
        assert (c.rank is None) != (c.dropped is None), c
        if c.dropped:
            assert c.dropped["reason"] in set(DropReason)
    assert res.context_tokens <= budget
    places = {m.get("chunk_id") or ("memory", mid) for mid, m in ((r["memory_id"], res.trace.candidates[r["memory_id"]].meta)
                                                               for r in res.results)}
    assert len(places) <= k  # k counts sources: a fact shares its place with the turn it was read from
    # the whole ranking: the top k first, then every candidate below the cut, best first
    assert res.ordered_ids[:len(res.ranked_ids)] == res.ranked_ids
    below = {c.memory_id for c in res.trace.candidates.values() if c.dropped and c.dropped["reason"] == "below_cut"}
    assert set(res.ordered_ids[len(res.ranked_ids):]) == below
    assert [r["rank"] for r in res.results] == list(range(1, len(res.results) + 1))


def test_an_item_larger_than_the_budget_is_truncated_not_dropped(engine):
    res = engine.recall("where does Ana live", scope=ANA, budget=6)
    assert len(res.results) == 1 and res.context_tokens <= 6 and res.context_text.endswith("[…]")


@pytest.mark.parametrize("failure", ["http_500", "malformed"])
def test_planner_and_reranker_failures_fall_back(tmp_path, openai_server, failure):
    bad = Reply.error(500, "down") if failure == "http_500" else Reply.text("{not json")
    openai_server.queue_chat(bad, bad)
    client = LLMClient(LLMConfig(base_url=openai_server.base_url, model="m", timeout=2, max_retries=0))
    with MemoryEngine(tmp_path / "m.db", embedder=EMB, llm=client) as eng:
        say(eng, ANA, 1, "I live in Berlin.", pred="lives_in", obj="Berlin")
        res = eng.recall("zzz qqq", scope=ANA, weak_top_score=10.0)  # force "weak"
        assert res.trace.plan["ok"] is False and res.trace.rerank["ok"] is False
        names = [s["name"] for s in res.trace.stages]
        assert "plan" in names and "rerank" in names
        assert all(s.get("fallback") for s in res.trace.stages if s["name"] in ("plan", "rerank"))
    client.close()


def test_reranker_cannot_add_unknown_ids(tmp_path, openai_server):
    openai_server.queue_chat({"variants": [], "entities": [], "intent": "current", "as_of": None},
                             {"order": [999999], "reason": "invented"})
    client = LLMClient(LLMConfig(base_url=openai_server.base_url, model="m", timeout=2, max_retries=0))
    with MemoryEngine(tmp_path / "m.db", embedder=EMB, llm=client) as eng:
        say(eng, ANA, 1, "I live in Berlin.", pred="lives_in", obj="Berlin")
        res = eng.recall("Berlin", scope=ANA, weak_top_score=10.0)
        assert res.trace.rerank["ok"] and res.trace.rerank["order"] == [] and res.trace.rerank["ignored_ids"] == [999999]
        assert 999999 not in res.trace.candidates
        assert len(res.trace.rerank["candidates"]) <= 24
    client.close()


def test_a_fact_and_the_turn_it_was_read_from_share_one_place_in_the_top_k(engine):
    q, now = "why did Ana move to Munich", "2024-06-01T00:00:00Z"
    res = engine.recall(q, scope=ANA, k=1, now=now)
    turn, fact = res.results
    assert turn["text"] == "Ana: I moved to Munich for the new job." and fact["fact"]["object"] == "Munich"
    # the fact says what the turn says: it joins the turn's place instead of needing a second one,
    # and nothing from another turn gets in
    assert res.trace.params["shared_places"] == {str(fact["memory_id"]): turn["memory_id"]}
    assert fact["shares_place_with"] == turn["memory_id"] and turn["shares_place_with"] is None
    assert next(s for s in res.trace.stages if s["name"] == "rank")["places"] == 1
    below = [c for c in res.trace.candidates.values() if c.dropped and c.dropped["reason"] == DropReason.BELOW_CUT]
    assert below and all("k = 1 sources" in c.dropped["detail"] for c in below)
    why = engine.explain(q, fact["memory_id"], scope=ANA, k=1, now=now)
    assert why["verdict"] == "retrieved"
    assert f"sharing its place in the top k with memory {turn['memory_id']}" in why["detail"]
    # the cut falls at the first memory that needs a place k + 1: a restatement ranked below it stays out
    res = engine.recall("where does Ana live now", scope=ANA, k=1, now=now)
    assert [r["text"] for r in res.results] == ["Ana lives in Munich."]
    assert "shared_places" not in res.trace.params


def test_a_trace_is_committed_without_a_sync_but_an_agents_usage_counts_are_synced(engine, monkeypatch):
    seen = []
    real = engine.store.writer

    def spy(scope, *, durable=True, diagnostic=False):
        seen.append((durable, diagnostic))
        return real(scope, durable=durable, diagnostic=diagnostic)

    monkeypatch.setattr(engine.store, "writer", spy)
    engine.recall("Where does Ana live?", scope=ANA, origin="operator")
    engine.recall("Where does Ana live?", scope=ANA, origin="agent")  # reinforces usage: synced
    assert seen == [(False, True), (True, True)]  # usage counts keep the caches (Store.writer)


def test_memory_rows_recall_read_are_reused_until_the_data_changes(engine):
    """candidate_meta's rows survive a recall's trace commit (diagnostic), and are read again after
    any change of the data: a write of this process, a raw write, another connection's commit."""
    ids = [r[0] for r in engine.store.conn.execute("SELECT id FROM memories WHERE user_id = 'ana'")]
    first = engine.store.candidate_meta(ANA, ids)
    engine.recall("Where does Ana live?", scope=ANA, origin="operator")  # a trace commit
    assert all(engine.store.candidate_meta(ANA, ids)[m] is first[m] for m in ids)  # the same rows, not read again
    engine.store.conn.execute("UPDATE memories SET importance = 0.9 WHERE id = ?", (ids[0],))  # a raw write
    assert engine.store.candidate_meta(ANA, ids)[ids[0]]["importance"] == 0.9
    engine.recall("Where does Ana live?", scope=ANA, origin="agent")  # usage counts: data
    counted = engine.store.candidate_meta(ANA, ids)
    assert max(r["access_count"] for r in counted.values()) == 1
    other = apsw.Connection(str(engine.store.path))  # another connection (as another process would)
    other.execute("UPDATE memories SET importance = 0.2 WHERE id = ?", (ids[0],))
    other.close()
    assert engine.store.candidate_meta(ANA, ids)[ids[0]]["importance"] == 0.2
    assert engine.store.candidate_meta(BOB, ids).keys() <= {r[0] for r in engine.store.conn.execute(
        "SELECT id FROM memories WHERE user_id = 'bob'")}  # another scope's rows are not served


def test_kept_answers_are_emptied_beyond_their_bound_and_read_again(engine, monkeypatch):
    """Every answer recall keeps (RecallReads._kept) is emptied whole once it holds more than
    META_CACHE_ROWS entries, and what it held is read again, the same."""
    from engine.store import recall as recall_sql

    ids = [r[0] for r in engine.store.conn.execute("SELECT id FROM memories WHERE user_id = 'ana'")]
    assert len(ids) >= 3
    monkeypatch.setattr(recall_sql, "META_CACHE_ROWS", 1)
    first = engine.store.candidate_meta(ANA, ids[:1])
    assert engine.store.candidate_meta(ANA, ids[:1])[ids[0]] is first[ids[0]]  # kept: one row, within the bound
    engine.store.candidate_meta(ANA, ids[1:3])  # two more: beyond the bound, the next call starts anew
    again = engine.store.candidate_meta(ANA, ids[:1])
    assert again[ids[0]] is not first[ids[0]] and again[ids[0]] == first[ids[0]]


def test_relation_and_claim_lookups_answer_as_the_tables_do_while_the_data_changes(tmp_path):
    """A store with no live relation and no fact gives recall none without asking per candidate;
    the answer is asked again after any change of the data (a write, another connection's commit)."""
    with MemoryEngine(tmp_path / "e.db", embedder=EMB, llm=False) as eng:
        say(eng, ANA, 1, "I live in Berlin, near the old canal.")
        say(eng, ANA, 2, "I moved to Munich for the new job.")
        ids = [r[0] for r in eng.store.conn.execute("SELECT id FROM memories ORDER BY id")]
        assert eng.store.relation_edges(ids) == [] and eng.store.turn_claims(ANA, ids) == {}
        eng.recall("Where does Ana live?", scope=ANA, origin="operator")  # a trace commit: no data
        other = apsw.Connection(str(eng.store.path))  # another connection (as another process would)
        other.execute("INSERT INTO memory_relations(user_id, agent_id, scope_type, scope_id, src_memory_id,"
                      " dst_memory_id, type, confidence, created_by, created_at)"
                      " SELECT user_id, agent_id, scope_type, scope_id, ?, ?, 'updates', 0.9, 'operator', '2024-01-01'"
                      " FROM memories WHERE id = ?", (ids[1], ids[0], ids[1]))
        other.close()
        assert [(e["src_memory_id"], e["dst_memory_id"]) for e in eng.store.relation_edges(ids)] == [(ids[1], ids[0])]
        say(eng, ANA, 3, "I live in Hamburg now.", pred="lives_in", obj="Hamburg")  # a fact, written here
        turn = eng.store.conn.execute("SELECT max(id) FROM memories WHERE kind = 'episode'").fetchone()[0]
        assert [f["object"] for f in eng.store.turn_claims(ANA, [turn])[turn]] == ["Hamburg"]


def test_first_sources_are_reused_until_the_data_changes(engine):
    ids = [r[0] for r in engine.store.conn.execute("SELECT id FROM memories WHERE user_id = 'ana'")]
    first = engine.store.first_sources(ANA, ids)
    engine.recall("Where does Ana live?", scope=ANA, origin="operator")  # a trace commit
    assert all(engine.store.first_sources(ANA, ids)[m] is first[m] for m in first)
    engine.store.conn.execute("UPDATE documents SET title = 'renamed'")  # a raw write
    assert {s["title"] for s in engine.store.first_sources(ANA, ids).values()} == {"renamed"}
    assert not engine.store.first_sources(BOB, ids).keys() & set(ids)  # another scope's rows are not served


def test_the_entity_channel_matches_names_not_a_sentences_capitalised_first_word(tmp_path):
    """"Family is everything" files "Family" as a capitalised word; a question about family must not
    pull it through the entity channel as a name, while "Rosa", capitalised inside a sentence once,
    is a name even where a sentence starts with her."""
    with MemoryEngine(tmp_path / "e.db", embedder=EMB, llm=False) as eng:
        say(eng, ANA, 1, "Family is everything to me. Bake at 180 for an hour.")
        say(eng, ANA, 2, "Rosa sent me her recipe.")
        say(eng, ANA, 3, "I had lunch with Rosa yesterday.")
        res = eng.recall("what does my family bake with rosa", scope=ANA, now="2024-06-01T00:00:00Z")
        assert res.trace.params["entities"] == ["rosa"]
        assert {"family", "bake"} <= set(eng.store.entity_kinds(ANA, ["family", "bake"]))  # filed, yet left out
        named = {c.memory_id for c in res.trace.candidates.values() if "entity" in c.channels}
        texts = {mid: res.trace.candidates[mid].meta["text"] for mid in named}
        assert texts and all("Rosa" in t for t in texts.values())


@pytest.mark.parametrize(("offset", "before", "after", "opener"), [
    (0, "", " ", True), (12, "great. ", " ", True), (3, "- ", " ", True), (10, "said to ", " ", False),
    (0, "", ":", False), (9, "hey you\n", " ", True), (30, "**", " ", False),
])
def test_sentence_opener(offset, before, after, opener):
    from engine.names import sentence_opener
    assert sentence_opener(offset, before, after) is opener


def test_a_text_said_again_with_other_case_and_spacing_is_a_duplicate(tmp_path):
    """Duplicates are found case and spacing aside, for short texts and for long ones (kept under a
    digest of their normalised text), and a text met again is keyed as the first time."""
    from engine.retrieve.pipeline import DEDUPE_TEXT_CHARS, _dedupe_key

    long_text = "We walked along the canal to the old harbour and talked about the move. " * 8
    assert len(long_text) > DEDUPE_TEXT_CHARS
    for text in ("Ana likes the canal.", long_text):
        respaced = "  " + text.upper().replace(" ", " \n\t ") + " "
        assert _dedupe_key(text) == _dedupe_key(respaced) == _dedupe_key(text)
        assert _dedupe_key(text) != _dedupe_key(text + " again")
    assert _dedupe_key("Ana likes the canal.") == "ana likes the canal."
    eng = MemoryEngine(tmp_path / "m.db", embedder=EMB, llm=False)
    say(eng, ANA, 1, long_text)
    say(eng, ANA, 2, long_text.upper().replace(" ", "  "))
    cands = eng.recall("the walk along the canal to the harbour", scope=ANA, k=5).trace.candidates.values()
    dups = [c for c in cands if c.dropped and c.dropped["reason"] == DropReason.DUPLICATE]
    assert len(dups) == 1 and dups[0].dropped["detail"].startswith("same text as memory ")
    eng.close()


def test_a_texts_opening_is_the_opening_of_its_whole_duplicate_form():
    """_dedupe compares whole texts only among candidates that open alike: the opening, read from
    the text's start, must be the start of the normalised whole text, or duplicates would be missed."""
    import random

    from engine.retrieve.pipeline import OPENING_CHARS, _opening

    rng = random.Random(7)
    pieces = ["Ana", "STRASSE", "straße", "ǅemal", "İstanbul", " ", "  ", "\n", "\t\u2003", "ﬁne", "x" * 70, ".", "é"]
    texts = ["", " ", "short", " " * 400 + "late start", "a" + " " * 300 + "b" * 80]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 120))) for _ in range(400)]
    for text in texts:
        assert _opening(text) == " ".join(text.casefold().split())[:OPENING_CHARS], repr(text)


def test_a_turns_counted_sentence_is_the_one_its_whole_search_finds():
    """_counts looks for _COUNT from the sentence of the first number word: what it finds is what a
    search of the whole turn finds."""
    import random

    from engine.retrieve.pipeline import _COUNT, _counts

    rng = random.Random(11)
    words = ["I", "have", "two", "cats", "3.5", "kg", "one-off", "second", "ten.", "x1", "57k", "alone", ".", "!", "?",
             "\n", "fine", "3", ":", "12:30", "4,000", "none"]
    texts = ["", "no number here at all", "Two cats. Three dogs!", "We left at 7.5 and came back"]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 60))) for _ in range(600)]
    for text in texts:
        whole = _COUNT.search(text)
        assert _counts(text) == (" ".join(whole.group(0).split())[:160] if whole else None), repr(text)


def test_the_entity_channel_counts_an_entitys_newest_memories_only_past_its_bound(tmp_path, monkeypatch):
    """Below the bound the channel's answer is the whole aggregation's (most names first, newest
    first); past it, an entity counts only its newest `each` memories."""
    eng = MemoryEngine(tmp_path / "m.db", embedder=EMB, llm=False)
    for day, text in enumerate(["Ana met Bob at the canal.", "Ana swims.", "Bob and Ana cook.", "Bob runs.",
                                "Ana and Bob moved to Munich.", "Ana reads."], start=1):
        say(eng, ANA, day, text)
    store = eng.store
    names = ["ana", "bob"]
    entities = sum(len(v) for v in store.entity_kinds(ANA, names).values())  # "Ana" the speaker and the name
    whole = store.entity_memories(ANA, names, 50)
    assert len(whole) == 6 and whole == sorted(whole, key=lambda mn: (-mn[1], -mn[0]))
    assert whole[0][1] > whole[-1][1]  # turns naming both come first
    assert store.entity_memories(ANA, names, 50, each=1000) == whole
    assert store.entity_memories(ANA, names, 3, each=1000) == whole[:3]
    newest = store.entity_memories(ANA, names, 50, each=1)  # one memory per entity: its newest
    assert sum(n for _m, n in newest) == entities
    assert newest == sorted(newest, key=lambda mn: (-mn[1], -mn[0])) and {m for m, _n in newest} <= {m for m, _n in whole}
    assert store.entity_memories(BOB, names, 50, each=1000) == []  # scoped by the entities
    from engine.store import recall as recall_sql

    monkeypatch.setattr(recall_sql, "_COMPOUND_SELECTS", 1)  # one entity a statement: counts added up across them
    assert store.entity_memories(ANA, names, 50, each=1000) == whole
    assert store.entity_memories(ANA, names, 50, each=1) == newest
    eng.close()


def test_a_name_that_opens_its_first_sentences_is_still_found_inside_a_later_one(tmp_path, monkeypatch):
    """The name check reads a name's first mentions, and the rest of its first NAME_MENTIONS_READ
    only when those all open a sentence: "Rosa", opening her first three turns and named inside a
    later one, is a name; "Family", only ever opening sentences, is not."""
    from engine.retrieve import pipeline

    monkeypatch.setattr(pipeline, "NAME_MENTIONS_FIRST", 2)
    with MemoryEngine(tmp_path / "e.db", embedder=EMB, llm=False) as eng:
        for day, text in enumerate(["Rosa sent me her recipe.", "Rosa called.", "Rosa is late.", "Family first.",
                                    "Family is everything.", "I had lunch with Rosa."], start=1):
            say(eng, ANA, day, text)
        reads = []
        contexts = eng.store.mention_contexts
        monkeypatch.setattr(eng.store, "mention_contexts", lambda *a, **kw: reads.append(kw["each"]) or contexts(*a, **kw))
        res = eng.recall("what does my family bake with rosa", scope=ANA, now="2024-06-01T00:00:00Z")
        assert res.trace.params["entities"] == ["rosa"]
        assert reads == [2, pipeline.NAME_MENTIONS_READ]


def test_mention_contexts_without_the_context_cut_reads_the_same_mentions(tmp_path):
    with MemoryEngine(tmp_path / "e.db", embedder=EMB, llm=False) as eng:
        for day, text in enumerate(["Rosa sent me her recipe.", "I had lunch with Rosa and Family."], start=1):
            say(eng, ANA, day, text)
        ids = [e for v in eng.store.entity_kinds(ANA, ["rosa", "family"]).values() for e, _kind in v]
        for each in (None, 1):
            full = eng.store.mention_contexts(ANA, ids, each=each)
            bare = eng.store.mention_contexts(ANA, ids, each=each, context=False)
            assert full and all("context" in m and m["context"] for ms in full.values() for m in ms)
            assert bare == {e: [{k: v for k, v in m.items() if k != "context"} for m in ms] for e, ms in full.items()}


def test_the_name_check_is_kept_until_the_data_changes(tmp_path, monkeypatch):
    """Each name's answer is kept while the data is unchanged: the same question again reads no
    mention (a trace's commit changes no data); a new turn that names "Family" inside a sentence
    makes it a name at the next recall, and a forgotten memory makes the check read again."""
    with MemoryEngine(tmp_path / "e.db", embedder=EMB, llm=False) as eng:
        for day, text in enumerate(["Rosa sent me her recipe.", "Family first.", "I had lunch with Rosa.",
                                    "Family is everything."], start=1):
            say(eng, ANA, day, text)
        reads = []
        contexts = eng.store.mention_contexts
        monkeypatch.setattr(eng.store, "mention_contexts", lambda *a, **kw: reads.append(kw["each"]) or contexts(*a, **kw))
        question = "what does my family bake with rosa"
        assert eng.recall(question, scope=ANA, now="2024-06-01T00:00:00Z").trace.params["entities"] == ["rosa"]
        assert reads
        reads.clear()
        assert eng.recall(question, scope=ANA, now="2024-06-01T00:00:00Z").trace.params["entities"] == ["rosa"]
        assert reads == []  # kept
        say(eng, ANA, 5, "We had dinner with Family today.")
        res = eng.recall(question, scope=ANA, now="2024-06-01T00:00:00Z")
        assert reads  # the data changed: read again
        assert res.trace.params["entities"] == ["family", "rosa"]
        mid = next(m for m, c in res.trace.candidates.items() if "dinner with Family" in c.meta.get("text", ""))
        reads.clear()
        eng.curator(ANA).forget(mid, reason="test")
        eng.recall(question, scope=ANA, now="2024-06-01T00:00:00Z")
        assert reads


def test_a_stored_trace_reads_back_every_candidate_as_recall_left_it(engine):
    """Candidates are stored as one JSON array a trace (schema v8): every field reads back, in the
    order the trace_candidates rows gave (kept first, then by score); a trace stored as rows (before
    v8, or by the NeoAgent import) still reads."""
    res = engine.recall("Where does Ana live?", scope=ANA, k=2)
    stored = engine.store.trace(ANA, res.trace.id)
    assert len(stored.candidates) == len(res.trace.candidates) > 2
    for c in stored.candidates:
        live = res.trace.candidates[c.memory_id]
        assert (c.channels, c.components, c.score, c.rank, c.tokens) == (live.channels, live.components, live.score,
                                                                         live.rank, live.tokens)
        assert list(c.components) == list(live.components)  # in the order recall gave them
        assert (c.dropped_stage, c.drop_reason, c.drop_detail) == (
            (live.dropped["stage"], live.dropped["reason"], live.dropped["detail"]) if live.dropped else (None,) * 3)
    keys = [(c.rank is None, c.rank or 0, -c.score) for c in stored.candidates]
    assert keys == sorted(keys)
    # the same trace as rows, as traces before v8 were written
    with engine.store.writer(ANA) as w:
        engine.store.conn.execute("UPDATE retrieval_traces SET candidate_rows = NULL WHERE id = ?", (res.trace.id,))
        w.insert_trace_candidates(res.trace.id, [
            (c.memory_id, json.dumps(c.channels), json.dumps(c.components), c.score, c.rank, c.dropped_stage,
             c.drop_reason, c.drop_detail, c.tokens) for c in sorted(stored.candidates, key=lambda c: c.id)])
    as_rows = engine.store.trace(ANA, res.trace.id)
    assert [(c.memory_id, c.channels, c.components, c.score, c.rank, c.drop_reason) for c in as_rows.candidates] == \
        [(c.memory_id, c.channels, c.components, c.score, c.rank, c.drop_reason) for c in stored.candidates]


def test_a_trace_packed_either_way_reads_back_the_same(engine):
    """candidate_rows is compact (the components' names once a trace, a row their values), or
    holds a row's own dict where its names differ (a derived fact's factor, a candidate dropped
    before scoring); traces written in the first v8 form (one array of rows, each its dict) read
    the same."""
    from engine.memory import _packed_candidates

    res = engine.recall("Where does Ana live?", scope=ANA, k=2)
    cands = list(res.trace.candidates.values())
    assert len(cands) > 2
    cands[0].components = {**cands[0].components, "derived_factor": 0.9}  # names of its own
    cands[1].components = {}
    cands[2].components = {"trust": -0.0, **{k: v for k, v in cands[2].components.items() if k != "trust"}}
    packed = _packed_candidates(cands)
    assert set(json.loads(packed)) == {"components", "rows"}
    first_form = json.dumps([[c.memory_id, c.channels, c.components, c.score, c.rank,
                              *((c.dropped["stage"], c.dropped["reason"], c.dropped["detail"]) if c.dropped
                                else (None, None, None)), c.tokens] for c in cands])
    read = []
    for text in (packed, first_form):
        with engine.store.writer(ANA):
            engine.store.conn.execute("UPDATE retrieval_traces SET candidate_rows = ? WHERE id = ?", (text, res.trace.id))
        stored = engine.store.trace(ANA, res.trace.id)
        read.append([(c.memory_id, c.channels, list(c.components.items()), c.score, c.rank, c.dropped_stage,
                      c.drop_reason, c.drop_detail, c.tokens) for c in stored.candidates])
        for c in stored.candidates:
            live = res.trace.candidates[c.memory_id]
            assert list(c.components.items()) == list(live.components.items())
            # -0.0 stays -0.0: a value is shown as recall computed it
            assert [math.copysign(1, v) for v in c.components.values()] == \
                [math.copysign(1, v) for v in live.components.values()]
    assert read[0] == read[1]
    assert any(math.copysign(1, v) < 0 for c in cands for v in c.components.values() if v == 0)


def test_term_counts_are_counted_again_when_the_data_changes(engine):
    """fts_term_frequencies(at_most=...) is kept while the data is unchanged (a recall's trace
    commit changes nothing), and counts a new memory's words."""
    assert engine.store.fts_term_frequencies(["canal"], at_most=100) == {"canal": 1}
    from engine.retrieve import pipeline

    engine.recall("Where is the canal?", scope=ANA, origin="operator")
    counted: list[str] = []
    conn = engine.store.conn
    conn.exec_trace = lambda _cursor, sql, _bindings: (counted.append(sql) if "memories_fts" in sql else None) or True
    try:
        assert engine.store.fts_term_frequencies(["canal"], at_most=100) == {"canal": 1}
        assert len(counted) == 1  # another limit than the recall's: counted again (the counts are per limit)
        # at the recall's own limit the count it made is kept across its trace commit
        limit = int(max(pipeline.FTS_COMMON_DF, pipeline.FTS_COMMON_SHARE * engine.store.memory_count_estimate()))
        engine.recall("Where is the canal?", scope=ANA, origin="operator")
        counted.clear()
        assert engine.store.fts_term_frequencies(["canal"], at_most=limit) == {"canal": 1}
    finally:
        conn.exec_trace = None
    assert counted == []  # kept: the full-text index was not read again
    say(engine, ANA, 6, "We walked along the canal again.")
    assert engine.store.fts_term_frequencies(["canal"], at_most=100) == {"canal": 2}


def test_an_agents_recalls_keep_the_caches_and_count_usage_exactly(engine, tmp_path):
    """An agent's recall counts the usage of what it returned without emptying the kept rows (a
    real client's second recall reads no memory row again), and the next recall ranks by the new
    counts exactly as a fresh engine on the same file does."""
    q, now = "Where does Ana live?", "2024-06-01T00:00:00Z"
    fresh = MemoryEngine(engine.store.path, embedder=EMB, llm=False)  # opened first: opening may write too
    first = engine.recall(q, scope=ANA, origin="agent", now=now)
    reads = []
    meta, sources = engine.store._candidate_meta, engine.store._first_sources
    engine.store._candidate_meta = lambda scope, ids: reads.append(("meta", ids)) or meta(scope, ids)
    engine.store._first_sources = lambda scope, ids: reads.append(("sources", ids)) or sources(scope, ids)
    expected = fresh.recall(q, scope=ANA, origin="operator", now=now, persist=False)
    second = engine.recall(q, scope=ANA, origin="agent", now=now)
    fresh.close()  # after: its close may write (pragma optimize), which is another connection's commit
    assert reads == []  # every row the second recall met was kept
    assert [r["memory_id"] for r in second.results] == [r["memory_id"] for r in expected.results]
    got = {m: (c.components, c.score, c.rank) for m, c in second.trace.candidates.items()}
    want = {m: (c.components, c.score, c.rank) for m, c in expected.trace.candidates.items()}
    assert got == want
    used = {m for m, c in second.trace.candidates.items() if c.components.get("usage")}
    assert used == {r["memory_id"] for r in first.results}  # the first recall's results, counted once
    counts = dict(engine.store.conn.execute("SELECT id, access_count FROM memories WHERE access_count > 0"))
    assert counts == {m: 2 if m in used else 1 for m in counts} and used <= counts.keys()


def test_usage_counted_inside_a_callers_transaction_is_a_change_of_the_data(engine):
    """A usage count in a nested writer may yet roll back with its caller: it moves data_key
    (the kept rows are read again) rather than being put into them."""
    ids = [r[0] for r in engine.store.conn.execute("SELECT id FROM memories WHERE user_id = 'ana'")]
    engine.store.candidate_meta(ANA, ids)
    before = engine.store.db.data_key()
    with engine.store.writer(ANA, diagnostic=True), engine.store.writer(ANA, diagnostic=True) as inner:
        inner.reinforce_usage(ids[:1])
    assert engine.store.db.data_key() != before
    assert engine.store.candidate_meta(ANA, ids)[ids[0]]["access_count"] == 1
