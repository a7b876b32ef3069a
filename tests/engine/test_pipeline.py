"""Ingestion pipeline over the store: exact spans, versions, vectors, FTS, scopes, stale vectors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from engine.embed.hashing import HashingEmbedder
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.memory import MemoryEngine
from engine.scope import Scope

ALICE = Scope.default("alice", "bot")
BOB = Scope.default("bob", "bot")


def chat_doc(messages: list[tuple[str, str]], *, uri="chat.json", external_id="c1") -> ParsedDocument:
    text, chunks = "", []
    for speaker, content in messages:
        if text:
            text += "\n\n"
        line = f"{speaker}: {content}"
        chunks.append(ParsedChunk(start=len(text), end=len(text) + len(line), kind="message",
                                  speaker=speaker, role="user", message_id=str(len(chunks)),
                                  source_time="2024-05-01T10:00:00Z"))
        text += line
    return ParsedDocument(text=text, source_type="chat", trust="user", uri=uri, external_id=external_id,
                          title="chat", source_time="2024-05-01T10:00:00Z", chunks=chunks)


@pytest.fixture
def engine(tmp_path):
    eng = MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder())
    yield eng
    eng.close()


MSGS = [("Ana", "I moved to Munich last spring."), ("Ben", "Nice! Do you still work at Siemens?"),
        ("Ana", "Yes, I lead the battery team there.")]


def test_chunks_memories_sources_are_exact(engine):
    report = engine.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    assert (report.documents, report.chunks, report.memories, report.skipped) == (1, 3, 3, 0)
    data = engine.export(ALICE)
    doc = data["documents"][0]
    assert len(data["chunks"]) == 3
    for ch in data["chunks"]:
        assert doc["text"][ch["start"]:ch["end"]] == ch["text"]
    by_chunk = {c["id"]: c for c in data["chunks"]}
    for src in data["sources"]:
        ch = by_chunk[src["chunk_id"]]
        assert (src["start"], src["end"]) == (ch["start"], ch["end"])
    mem_texts = sorted(m["text"] for m in data["memories"])
    assert mem_texts == sorted(f"{s}: {c}" for s, c in MSGS)
    assert all(m["kind"] == "episode" and m["trust"] == "user" for m in data["memories"])


def test_read_your_writes_fts_and_vectors(engine):
    engine.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    hits = engine.store.fts_memories(ALICE, "munich")
    assert len(hits) == 1
    mem = engine.store.memory(ALICE, hits[0][0])
    assert "Munich" in mem.text
    emb = engine.store.embedding_of(ALICE, "memory", mem.id)
    assert (emb.provider, emb.model, emb.dims) == ("hashing", "hashing-v1-384", 384)
    assert emb.created_at and emb.embed_ms is not None and emb.embed_ms >= 0
    expected = HashingEmbedder().embed([mem.text])[0]
    assert np.allclose(emb.vector, expected)
    stemmed = engine.store.fts_memories(ALICE, "moving")  # porter stemming: moving ~ moved
    assert [h[0] for h in stemmed] == [mem.id]


def test_unchanged_document_is_a_noop(engine):
    engine.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    before = engine.export(ALICE)
    again = engine.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    assert (again.documents, again.skipped, again.chunks) == (0, 1, 0)
    assert engine.export(ALICE) == before


def test_changed_document_becomes_a_new_version(engine):
    engine.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    first = engine.export(ALICE)
    kept_chunk = next(c for c in first["chunks"] if "battery" in c["text"])
    dropped_chunk = next(c for c in first["chunks"] if "Siemens" in c["text"])
    changed = [MSGS[0], ("Ana", "Actually I also adopted a cat named Miso."), MSGS[2]]
    report = engine.ingest_documents([chat_doc(changed)], scope=ALICE)
    assert (report.documents, report.chunks, report.removed_chunks) == (1, 1, 1)
    data = engine.export(ALICE)
    docs = sorted(data["documents"], key=lambda d: d["version"])
    assert [d["version"] for d in docs] == [1, 2]
    assert docs[0]["replaced_at"] is not None and docs[1]["previous_id"] == docs[0]["id"]
    current = docs[1]
    chunk_ids = {c["id"] for c in data["chunks"]}
    assert kept_chunk["id"] in chunk_ids and dropped_chunk["id"] not in chunk_ids
    for ch in data["chunks"]:
        assert ch["document_id"] == current["id"]
        assert current["text"][ch["start"]:ch["end"]] == ch["text"]
    for src in data["sources"]:
        assert src["document_id"] == current["id"]
        assert current["text"][src["start"]:src["end"]] in {c["text"] for c in data["chunks"]}
    texts = {m["text"] for m in data["memories"]}
    assert not any("Siemens" in t for t in texts)  # the episode only that chunk supported is gone
    assert any("Miso" in t for t in texts)
    assert engine.store.fts_memories(ALICE, "siemens") == []
    assert engine.store.db.integrity_check() == "ok"
    # And back: re-ingesting the first version is again a change, not a no-op.
    back = engine.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    assert back.documents == 1


def test_scopes_do_not_see_each_other(engine):
    engine.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    assert engine.counts(BOB)["memories"] == 0
    assert engine.store.fts_memories(BOB, "munich") == []
    mid = engine.export(ALICE)["memories"][0]["id"]
    assert engine.store.memory(BOB, mid) is None
    with pytest.raises(Exception, match="no memory"):
        engine.show("memory", mid, scope=BOB)
    # The same document in Bob's scope is new there, not a no-op.
    report = engine.ingest_documents([chat_doc(MSGS)], scope=BOB)
    assert report.documents == 1 and engine.counts(BOB)["memories"] == 3


def test_entity_mentions_are_spans_in_the_document(engine):
    engine.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    data = engine.export(ALICE)
    doc = data["documents"][0]
    mem = next(m for m in data["memories"] if "Munich" in m["text"])
    mentions = engine.store.mentions_of(ALICE, mem["id"])
    names = {m["name"] for m in mentions}
    assert {"Ana", "Munich"} <= names
    for m in mentions:
        assert doc["text"][m["start"]:m["end"]] == m["name"]


def test_show_memory_has_provenance(engine):
    engine.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    mid = engine.store.fts_memories(ALICE, "siemens")[0][0]
    shown = engine.show("memory", mid, scope=ALICE)
    assert shown["sources"][0]["text"] == "Ben: Nice! Do you still work at Siemens?"
    assert shown["embedding"]["model"] == "hashing-v1-384"
    moved = engine.store.fts_memories(ALICE, "munich")[0][0]
    shown = engine.show("memory", moved, scope=ALICE)
    (t,) = shown["sources"][0]["times"]  # "last spring", resolved against the turn's own time
    assert t["text"] == "last spring" and t["kind"] == "season"
    text = engine.export(ALICE)["documents"][0]["text"]
    assert text[t["start"]:t["end"]] == "last spring"


def test_model_change_marks_vectors_stale_and_reembeds(tmp_path):
    path = tmp_path / "m.db"
    with MemoryEngine(path, embedder=HashingEmbedder(384)) as eng:
        eng.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    with MemoryEngine(path, embedder=HashingEmbedder(256)) as eng:
        _ = eng.embedder  # first use notices the model change and starts re-embedding
        eng.wait_for_background()
        assert eng.counts(ALICE)["stale_embeddings"] == 0
        for m in eng.export(ALICE)["memories"]:
            emb = eng.store.embedding_of(ALICE, "memory", m["id"])
            assert (emb.model, emb.dims, emb.vector.shape) == ("hashing-v1-256", 256, (256,))


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="per-thread nice is Linux")
def test_the_background_reembed_runs_below_the_thread_that_opened_the_db(tmp_path, monkeypatch):
    import os
    import threading

    from engine.background import BACKGROUND_NICE

    path = tmp_path / "m.db"
    with MemoryEngine(path, embedder=HashingEmbedder(384)) as eng:
        eng.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    seen: list[int] = []
    real = MemoryEngine.reembed_stale

    def spy(self, **kw):
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return real(self, **kw)

    monkeypatch.setattr(MemoryEngine, "reembed_stale", spy)
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    with MemoryEngine(path, embedder=HashingEmbedder(256)) as eng:
        _ = eng.embedder
        eng.wait_for_background()
        assert eng.counts(ALICE)["stale_embeddings"] == 0
    assert seen == [max(before, BACKGROUND_NICE)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before  # the opener keeps its own


def test_stale_vectors_survive_a_stopped_reembed(tmp_path):
    path = tmp_path / "m.db"
    with MemoryEngine(path, embedder=HashingEmbedder(384)) as eng:
        eng.ingest_documents([chat_doc(MSGS)], scope=ALICE)
    with MemoryEngine(path, embedder=HashingEmbedder(256), background_reembed=False) as eng:
        _ = eng.embedder
        assert eng.counts(ALICE)["stale_embeddings"] == 3
        assert eng.reembed_stale(should_stop=lambda: True) == 0
        assert eng.counts(ALICE)["stale_embeddings"] == 3
        assert eng.reembed_stale() == 3
        assert eng.counts(ALICE)["stale_embeddings"] == 0


def test_progress_and_cancel(engine):
    from engine.errors import Cancelled

    docs = [chat_doc(MSGS, external_id=f"c{i}") for i in range(5)]
    seen = []
    engine.ingest_documents(docs[:2], scope=ALICE, progress=lambda f, m: seen.append(f))
    assert seen and seen[-1] == pytest.approx(2 / 2)
    calls = {"n": 0}

    def stop():
        calls["n"] += 1
        return calls["n"] > 3

    with pytest.raises(Cancelled):
        engine.ingest_documents(docs[2:], scope=ALICE, should_stop=stop)
    assert engine.store.db.integrity_check() == "ok"


def test_reembedding_uses_the_same_contextual_text_as_ingestion(tmp_path):
    from engine.ingest.pipeline import embedding_text

    path = tmp_path / "m.db"
    doc = chat_doc(MSGS)
    with MemoryEngine(path, embedder=HashingEmbedder(384)) as eng:
        eng.ingest_documents([doc], scope=ALICE)
        first = {m["text"]: eng.store.embedding_of(ALICE, "memory", m["id"]).vector for m in eng.export(ALICE)["memories"]}
    with MemoryEngine(path, embedder=HashingEmbedder(256)) as eng:
        _ = eng.embedder
        eng.wait_for_background()
        for i, ch in enumerate(doc.chunks):
            text = doc.text[ch.start:ch.end]
            mid = eng.store.fts_memories(ALICE, '"' + text.split()[-1].strip("?.!") + '"')[0][0]
            got = eng.store.embedding_of(ALICE, "memory", mid).vector
            assert np.allclose(got, HashingEmbedder(256).embed([embedding_text(doc, i)])[0])
    assert len(first) == 3


def test_a_fact_is_embedded_with_its_evidence_and_reembedding_reproduces_it(tmp_path):
    from engine.embed.text import fact_vector_text

    path = tmp_path / "m.db"
    doc = chat_doc([("Ana", "Honestly, I love hiking."), ("Ben", "Same here!")])
    with MemoryEngine(path, embedder=HashingEmbedder(384)) as eng:
        eng.ingest_documents([doc], scope=ALICE, extract="heuristic")
        fact = next(f for f in eng.export(ALICE)["facts"] if f["predicate_key"] == "likes")
        mem = eng.store.memory(ALICE, fact["memory_id"])
        expected = fact_vector_text(mem.text, fact["evidence"])
        assert mem.text == "Ana likes hiking." and "Honestly" in expected
        got = eng.store.embedding_of(ALICE, "memory", mem.id).vector
        assert np.allclose(got, HashingEmbedder(384).embed([expected])[0])
        assert not np.allclose(got, HashingEmbedder(384).embed([mem.text])[0])
    with MemoryEngine(path, embedder=HashingEmbedder(256)) as eng:  # another model: every vector is redone
        _ = eng.embedder
        eng.wait_for_background()
        got = eng.store.embedding_of(ALICE, "memory", mem.id).vector
        assert np.allclose(got, HashingEmbedder(256).embed([expected])[0])


def test_fact_vector_text():
    from engine.embed.text import fact_vector_text

    assert fact_vector_text("Ana likes tea.", None) == "Ana likes tea."
    assert fact_vector_text("Ana likes tea.", "  ") == "Ana likes tea."
    assert fact_vector_text("Ana is allergic to peanuts.", "allergic to peanuts") == "Ana is allergic to peanuts."
    assert fact_vector_text("Ana likes tea.", "I  love\ntea!") == "Ana likes tea.\n(from: I love tea!)"


def test_facts_embedded_by_an_older_version_are_redone_on_open(tmp_path):
    """A database from before facts carried their evidence (vector_text version 1): the first
    engine that can re-embed in the background redoes the fact vectors; one that cannot leaves
    the old ones in use."""
    import apsw

    from engine.embed.text import VECTOR_TEXT_VERSION, fact_vector_text

    path = tmp_path / "m.db"
    emb = HashingEmbedder(384)
    with MemoryEngine(path, embedder=emb) as eng:
        eng.ingest_documents([chat_doc([("Ana", "Honestly, I love hiking."), ("Ben", "Same!")])], scope=ALICE,
                             extract="heuristic")
        fact = eng.export(ALICE)["facts"][0]
        mem = eng.store.memory(ALICE, fact["memory_id"])
        assert eng.store.get_meta("vector_text") == str(VECTOR_TEXT_VERSION)
    conn = apsw.Connection(str(path))  # what version 1 wrote: the fact's text alone, no marker
    conn.execute("UPDATE embeddings SET vector = ? WHERE owner_type = 'memory' AND owner_id = ?",
                 (emb.embed([mem.text])[0].tobytes(), mem.id))
    conn.execute("DELETE FROM meta WHERE key = 'vector_text'")
    conn.close()
    import shutil

    foreground = tmp_path / "copy.db"
    shutil.copy(path, foreground)
    with MemoryEngine(path, embedder=emb, background_reembed=False) as eng:
        _ = eng.embedder
        row = eng.store.embedding_of(ALICE, "memory", mem.id)
        assert not row.stale and np.allclose(row.vector, emb.embed([mem.text])[0])
        assert eng.store.get_meta("vector_text") is None
    with MemoryEngine(foreground, embedder=emb, background_reembed=False) as eng:  # `memlens reembed`
        assert eng.reembed_stale() == 1
        row = eng.store.embedding_of(ALICE, "memory", mem.id)
        assert np.allclose(row.vector, emb.embed([fact_vector_text(mem.text, fact["evidence"])])[0])
    with MemoryEngine(path, embedder=emb) as eng:
        _ = eng.embedder
        eng.wait_for_background()
        row = eng.store.embedding_of(ALICE, "memory", mem.id)
        assert not row.stale
        assert np.allclose(row.vector, emb.embed([fact_vector_text(mem.text, fact["evidence"])])[0])
        assert eng.store.get_meta("vector_text") == str(VECTOR_TEXT_VERSION)


def test_outdated_fact_vectors_stay_searchable_until_redone(tmp_path):
    from engine.embed.text import fact_vector_text
    from engine.index.vectors import VectorIndex

    emb = HashingEmbedder(384)
    with MemoryEngine(tmp_path / "m.db", embedder=emb, background_reembed=False) as eng:
        eng.ingest_documents([chat_doc([("Ana", "Honestly, I love hiking."), ("Ben", "Same!")])], scope=ALICE,
                             extract="heuristic")
        fact = eng.export(ALICE)["facts"][0]
        mid = fact["memory_id"]
        text = eng.store.memory(ALICE, mid).text
        old = emb.embed([text])[0]
        with eng.store.writer(ALICE) as w:  # a vector written under the older definition
            w.put_embeddings("memory", [(mid, old)], provider=emb.provider, model=emb.model, dims=emb.dims,
                             embed_ms=None)
        index = VectorIndex(eng.store, ALICE, emb.model, emb.dims)
        index.refresh()
        assert eng.store.mark_fact_embeddings_outdated() == 1
        assert eng.store.mark_fact_embeddings_outdated() == 0  # already marked
        index.refresh()
        ids, _ = index.search(old, 5)
        assert ids[0] == mid  # still found while it waits
        assert [row[2] for row in next(eng.store.stale_embedding_batches(10))] == [mid]
        assert eng.reembed_stale() == 1
        index.refresh()  # redone in place: the index reloads it
        new = emb.embed([fact_vector_text(text, fact["evidence"])])[0]
        ids, scores = index.search(new, 1)
        assert ids[0] == mid and scores[0] == pytest.approx(1.0, abs=1e-5)
        assert list(eng.store.stale_embedding_batches(10)) == []


def test_outdated_fact_vectors_are_handed_out_once_each_in_order(tmp_path):
    emb = HashingEmbedder(64)
    with MemoryEngine(tmp_path / "m.db", embedder=emb, llm=False, background_reembed=False) as eng:
        eng.ingest_documents([chat_doc([("Ana", "Honestly, I love hiking."), ("Ana", "I love chess."),
                                        ("Ana", "I love tea.")])], scope=ALICE, extract="heuristic")
        facts = sorted(f["memory_id"] for f in eng.export(ALICE)["facts"])
        assert len(facts) == 3
        assert eng.store.mark_fact_embeddings_outdated() == 3
        # a batch left unhandled (its vectors still outdated) is not handed out again: the pass
        # moves on from where it stopped rather than rescanning the facts from the start
        # (at most three batches read, so a pass that hands the same batch out again fails here
        # instead of looping)
        batches = itertools.islice(eng.store.stale_embedding_batches(2), 3)
        assert [[row[2] for row in batch] for batch in batches] == [facts[:2], facts[2:]]


def test_a_name_never_runs_across_a_sentence_break():
    """'Ana. Kreuzberg is lovely' names two things; only a title's dot is part of a name."""
    from engine.names import find_mentions

    assert [m.name for m in find_mentions("I met Ana. Kreuzberg is lovely.")] == ["Ana", "Kreuzberg"]
    assert [m.name for m in find_mentions("We saw Rex. He barked.")] == ["Rex"]
    assert [m.name for m in find_mentions("Dr. Ana Lima works at the Museum of Art.")] == ["Dr. Ana Lima",
                                                                                          "Museum of Art"]


def test_memoised_clause_terms_are_the_tokenizers_for_every_store_and_text(tmp_path):
    # same_slot's and restated_later's terms are kept by text across recalls (pipeline._TERMS):
    # what a memo serves must be what the store's FTS tokenizer reads, from any store, a long
    # text kept under a digest included, and frozen so no caller can change it for the next
    from engine.retrieve import pipeline
    from engine.retrieve.query import content_terms
    from engine.statements import SLOT_FUNCTION

    texts = ["I'm studying Portuguese at the uni now", "My phne is a Pixel 8, it's great",
             "also the 2024 rent is £950", "x " * 700 + "Lisbon", "x " * 700 + "Porto", ""]
    with MemoryEngine(tmp_path / "a.db", embedder=HashingEmbedder()) as a, \
            MemoryEngine(tmp_path / "b.db", embedder=HashingEmbedder()) as b:
        for store in (a.store, b.store, a.store):
            for text in texts:
                slot = {t for s, t in store.fts_tokens(text) if len(t) > 2 and not t.isdigit()
                        and s.casefold() not in SLOT_FUNCTION}
                got = pipeline._slot_terms(store, text)
                assert got == slot and isinstance(got, frozenset)
                got = pipeline._content_terms(store, text)
                assert got == set(content_terms(text, store.fts_tokens)) and isinstance(got, frozenset)
    assert pipeline._slot_terms(a.store, texts[3]) != pipeline._slot_terms(a.store, texts[4])
    assert "studi" in pipeline._slot_terms(a.store, texts[0]) and "now" not in pipeline._slot_terms(a.store, texts[0])


def test_kept_neighbours_are_the_stores_in_its_order_and_follow_new_data(engine):
    # Recall._neighbours keeps each seed's neighbour rows while the data is unchanged: what it
    # returns must be store.neighbour_memories' rows, in its order, for any seed list, and a new
    # turn in a seed's conversation must show up at once
    import random

    from engine.retrieve.pipeline import Recall
    from engine.retrieve.recipes import get_recipe

    msgs = [("Ana" if i % 2 else "Ben", f"message number {i} about topic {i % 3}") for i in range(8)]
    engine.ingest_documents([chat_doc(msgs, uri="a"), chat_doc(msgs[:5], uri="b", external_id="b")], scope=ALICE)
    ids = sorted(m["id"] for m in engine.export(ALICE)["memories"])
    rec = Recall(engine.store, ALICE, engine.embedder, None, get_recipe(None))
    rng = random.Random(3)
    for window in (1, 2):
        for _ in range(12):
            seeds = rng.sample(ids, rng.randint(1, len(ids)))
            seeds += seeds[:2]  # a seed twice
            assert rec._neighbours(seeds, window) == engine.store.neighbour_memories(ALICE, seeds, window)
    before = rec._neighbours(ids, 1)
    engine.ingest_documents([chat_doc(msgs[:3] + [("Ana", "a new last turn")], uri="c", external_id="c")],
                            scope=ALICE)
    ids = sorted(m["id"] for m in engine.export(ALICE)["memories"])
    after = rec._neighbours(ids, 1)
    assert after == engine.store.neighbour_memories(ALICE, ids, 1) and len(after) > len(before)
    # the new conversation leaves the old seeds' rows as they were; a change inside a seed's own
    # conversation must reach them too: conversation b gains a turn after its last one
    old = ids[:]
    kept = rec._neighbours(old, 1)
    engine.ingest_documents([chat_doc(msgs[:5] + [("Ana", "one more turn in b")], uri="b", external_id="b")],
                            scope=ALICE)
    fresh = engine.store.neighbour_memories(ALICE, old, 1)
    assert fresh != kept  # the store's rows moved (the test's premise)
    assert rec._neighbours(old, 1) == fresh
