"""The inspector's browsing reads: keyset pages agree with counts, filters and search work, and
nothing leaks across scopes."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.consolidate import consolidate
from engine.embed.hashing import HashingEmbedder
from engine.extract.model import Candidate, SourceChunk
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.memory import MemoryEngine
from engine.scope import Scope
from engine.store.browse import MemoryFilter, search_match

ANA = Scope.default("ana", "bot")
BOB = Scope.default("bob", "bot")
EMB = HashingEmbedder(64)
DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def _chat(scope: Scope, lines: list[str], day: int) -> ParsedDocument:
    chunks, pos = [], 0
    for i, line in enumerate(lines):
        chunks.append(ParsedChunk(pos, pos + len(line), "message", speaker=line.split(":")[0], role="user",
                                  message_id=f"d{day}m{i}", source_time=f"2024-01-{day:02d}T10:00:00Z"))
        pos += len(line) + 1
    return ParsedDocument(text="\n".join(lines), source_type="chat", trust="user", uri=f"chat-{day}",
                          external_id=f"{scope.user_id}-{day}", source_time=f"2024-01-{day:02d}T10:00:00Z",
                          chunks=chunks)


def _fact(engine: MemoryEngine, scope: Scope, document_id: int, ordinal: int, pred: str, obj: str, evidence: str,
          confidence: float = 0.9):
    ch = engine.store.chunks_of(scope, document_id)[ordinal]
    view = SourceChunk(ch.id, document_id, ch.text, ch.start, ch.end, ch.speaker, "user", "user", ch.source_time)
    cand = Candidate(text=f"Ana {pred.replace('_', ' ')} {obj}.", subject="Ana", predicate=pred, object=obj,
                     evidence=evidence, confidence=confidence, category="work")
    return consolidate(engine.store, scope, EMB, [(view, cand)])


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("browse") / "b.db"
    with MemoryEngine(path, embedder=EMB, llm=None) as eng:
        r1 = eng.ingest_documents([_chat(ANA, ["Ana: I work as a nurse in Berlin.", "Ana: The weather is grey."], 1)],
                                  scope=ANA)
        r2 = eng.ingest_documents([_chat(ANA, ["Ana: I am a teacher now, at the Goethe school."], 2)], scope=ANA)
        _fact(eng, ANA, r1.document_ids[0], 0, "has_role", "nurse", "I work as a nurse")
        _fact(eng, ANA, r2.document_ids[0], 0, "has_role", "teacher", "I am a teacher")
        eng.ingest_paths([DATA / "reply.eml", DATA / "sample.py"], scope=ANA)
        eng.ingest_documents([_chat(BOB, ["Bob: I work as a nurse too, secretly."], 3)], scope=BOB)
    return path


def test_pages_cover_the_count_in_both_orders(db):
    with MemoryEngine(db, embedder=EMB, llm=None) as eng:
        st = eng.store
        total = st.count_memories(ANA)
        assert total == eng.counts(ANA)["memories"]
        for descending in (False, True):
            flt = MemoryFilter(descending=descending)
            ids, after = [], None
            while True:
                page = st.browse_memories(ANA, flt, after_id=after, limit=3)
                if not page:
                    break
                ids += [r["id"] for r in page]
                after = page[-1]["id"]
            assert len(ids) == total == len(set(ids))
            assert ids == sorted(ids, reverse=descending)
            for mid in (ids[0], ids[-1], ids[len(ids) // 2]):
                assert st.memory_rank(ANA, flt, mid) == ids.index(mid)


def test_filters_and_search(db):
    with MemoryEngine(db, embedder=EMB, llm=None) as eng:
        st = eng.store
        facts = st.browse_memories(ANA, MemoryFilter(kind="fact"))
        assert {r["status"] for r in facts} == {"active", "needs_review"}
        assert all(r["fact_id"] for r in facts)
        review = st.browse_memories(ANA, MemoryFilter(status="needs_review"))
        assert [r["object"] for r in review] == ["teacher"]
        assert st.count_memories(ANA, MemoryFilter(status="needs_review")) == 1
        emails = st.browse_memories(ANA, MemoryFilter(source_type="email"))
        assert emails and all(r["source_type"] == "email" for r in emails)
        hits = st.browse_memories(ANA, MemoryFilter(text="nurs"))  # prefix search on the last word
        assert hits and all("nurse" in r["text"].lower() for r in hits)
        assert st.count_memories(ANA, MemoryFilter(text="nurse berlin")) == 1  # every word must match
        day1 = st.browse_memories(ANA, MemoryFilter(time_from="2024-01-01", time_to="2024-01-02", kind="episode"))
        assert {r["text"] for r in day1} == {"Ana: I work as a nurse in Berlin.", "Ana: The weather is grey."}
        assert st.count_memories(ANA, MemoryFilter(category="work")) == 2
        assert st.memory_rank(ANA, MemoryFilter(kind="fact"), day1[0]["id"]) is None
        facets = st.memory_facets(ANA)
        assert {"chat", "email", "code"} <= set(facets["source_types"]) and "work" in facets["categories"]


def test_search_text_is_never_fts_syntax():
    assert search_match("") is None and search_match("  ?!  ") is None
    assert search_match('nurse" OR x') == '"nurse" "OR" "x"*'


def test_no_read_crosses_scopes(db):
    with MemoryEngine(db, embedder=EMB, llm=None) as eng:
        st = eng.store
        bob_ids = {r["id"] for r in st.browse_memories(BOB)}
        ana_ids = {r["id"] for r in st.browse_memories(ANA, limit=1000)}
        assert bob_ids and not bob_ids & ana_ids
        assert st.count_memories(ANA, MemoryFilter(text="secretly")) == 0
        bob_mid = next(iter(bob_ids))
        assert st.document_of(ANA, "memory", bob_mid) is None
        assert st.memory_rank(ANA, None, bob_mid) is None
        bob_doc = st.document_of(BOB, "memory", bob_mid)[0]
        assert st.span_view(ANA, bob_doc) is None
        assert st.evidence_spans(ANA, [bob_mid]) == {bob_mid: []}
        assert st.facts_by_ids(ANA, [f["id"] for f in eng.facts(BOB)]) == {}


def test_span_view_and_evidence(db):
    with MemoryEngine(db, embedder=EMB, llm=None) as eng:
        st = eng.store
        nurse = next(f for f in eng.facts(ANA) if f["object"] == "nurse")
        doc_id, mid = st.document_of(ANA, "fact", nurse["id"])
        assert mid == nurse["memory_id"]
        view = st.span_view(ANA, doc_id)
        text = view["document"]["text"]
        assert [c["kind"] for c in view["chunks"]] == ["message", "message"]
        for c in view["chunks"]:
            assert 0 <= c["start"] < c["end"] <= len(text)
        fact_span = next(s for s in view["spans"] if s["memory_id"] == mid)
        assert text[fact_span["start"]:fact_span["end"]] == "I work as a nurse"
        assert fact_span["fact_id"] == nurse["id"] and fact_span["status"] == "active"
        ev = st.evidence_spans(ANA, [mid], context=10)[mid]
        assert ev[0]["text"] == "I work as a nurse" and ev[0]["before"] == "Ana: "
        assert ev[0]["after"] == " in Berlin" and ev[0]["source_type"] == "chat"
        wide = st.evidence_spans(ANA, [mid], context=500)[mid][0]  # context never leaves the chunk
        assert wide["before"] + wide["text"] + wide["after"] == "Ana: I work as a nurse in Berlin."
        facts = st.facts_by_ids(ANA, [nurse["id"]])
        assert facts[nurse["id"]].text == "Ana has role nurse."
        assert st.memory_ids_for_facts(ANA, [nurse["id"]]) == {nurse["id"]: mid}


def test_email_quotes_and_code_symbols_reach_the_span_view(db):
    with MemoryEngine(db, embedder=EMB, llm=None) as eng:
        st = eng.store
        email = st.browse_memories(ANA, MemoryFilter(source_type="email"))[0]
        view = st.span_view(ANA, st.document_of(ANA, "memory", email["id"])[0])
        assert "quote" in {c["kind"] for c in view["chunks"]}
        code = st.browse_memories(ANA, MemoryFilter(source_type="code"))[0]
        view = st.span_view(ANA, st.document_of(ANA, "memory", code["id"])[0])
        symbols = {c["meta"].get("symbol") for c in view["chunks"] if c["kind"] == "code_symbol"}
        assert {"greet", "Counter"} <= symbols
