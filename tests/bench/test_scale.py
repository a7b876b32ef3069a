"""`memlens perf --data`: real sessions at scale, copies that are what ingesting again would write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.bench.scale import load_sources, run_data_perf
from engine.embed.hashing import HashingEmbedder
from engine.errors import BadInput
from engine.ingest.formats import locomo
from engine.memory import MemoryEngine
from engine.scope import Scope

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
SCOPE = Scope.default("perf", "perf")
QUESTIONS = ["What did Caroline paint?", "When did Melanie go camping?", "Where does Caroline work?"]


def _rows(engine, table: str) -> int:
    return engine.store.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def _renamed(docs, tag):
    for d in docs:
        d.uri = (d.uri or "") + "#" + tag
    return docs


def test_a_copy_holds_what_ingesting_the_same_sessions_again_writes(tmp_path):
    raw = json.loads((DATA / "bench_locomo_tiny.json").read_text())
    emb = HashingEmbedder(64)
    tables = ("documents", "chunks", "memories", "memory_sources", "entity_mentions", "embeddings", "chunk_times",
              "memories_fts", "chunks_fts", "entities")
    with MemoryEngine(tmp_path / "twice.db", embedder=emb, llm=False, background_reembed=False) as twice, \
            MemoryEngine(tmp_path / "copied.db", embedder=emb, llm=False, background_reembed=False) as copied:
        twice.ingest_documents(locomo.parse_json(raw, name="a"), scope=SCOPE)
        twice.ingest_documents(_renamed(locomo.parse_json(raw, name="a"), "copy1"), scope=SCOPE)
        copied.ingest_documents(locomo.parse_json(raw, name="a"), scope=SCOPE)
        with copied.store.writer(SCOPE) as w:
            base = w.replication_base()
            assert w.replicate(base, documents_upto=base["documents"], tag="copy1") == base["memories"]
        for table in tables:
            assert _rows(copied, table) == _rows(twice, table), table
        uris = sorted(r[0] or "" for r in copied.store.conn.execute("SELECT uri FROM documents"))
        assert uris == sorted(r[0] or "" for r in twice.store.conn.execute("SELECT uri FROM documents"))
        for q in QUESTIONS:  # the same ranking, memory for memory (ids differ only by the copy's offset)
            a = twice.recall(q, scope=SCOPE, recipe="offline", origin="bench")
            b = copied.recall(q, scope=SCOPE, recipe="offline", origin="bench")
            assert [r["text"] for r in a.results] == [r["text"] for r in b.results]
            assert [round(r["score"], 6) for r in a.results] == [round(r["score"], 6) for r in b.results]
            assert [c["memory_id"] for c in a.results] == [c["memory_id"] for c in b.results]


def test_a_store_with_facts_is_not_copied(tmp_path):
    raw = json.loads((DATA / "bench_locomo_tiny.json").read_text())
    with MemoryEngine(tmp_path / "f.db", embedder=HashingEmbedder(64), llm=False, background_reembed=False) as eng:
        eng.ingest_documents(locomo.parse_json(raw, name="a"), scope=SCOPE, extract="heuristic")
        assert eng.counts(SCOPE)["facts"] > 0
        with pytest.raises(ValueError, match="only stores of sources"), eng.store.writer(SCOPE) as w:
            w.replication_base()


def test_perf_on_real_files_reaches_n_and_reports_every_stage(tmp_path):
    files = [str(DATA / "bench_locomo_tiny.json"), str(DATA / "bench_longmemeval_s_tiny.json")]
    docs, questions, info = load_sources([Path(f) for f in files])
    corpus = sum(len(d.chunks) for d in docs)
    cache = tmp_path / "vectors.db"
    out = run_data_perf(files, memories=corpus * 3 + 1, queries=12, vector_cache=cache, embedder="hashing",
                        workdir=str(tmp_path))
    assert out["corpus_memories"] == corpus and out["copies"] == 3
    assert out["memories"] >= corpus * 3 + 1 and out["queries"] == 12 == min(12, len(questions))
    assert {"candidates", "filters", "score", "rank", "budget", "vector", "fts", "trace_write"} <= set(out["stages_ms"])
    assert {"p50", "p95", "p99"} == set(out["total_ms"]) == set(out["cpu_ms"])
    assert out["candidates_per_channel"]["vector"] > 0 and out["vector_recall_at_10"] == 1.0
    assert out["vectors"] == {"embedded": corpus, "reused": 0} and [f["questions"] for f in out["files"]] == \
        [f["questions"] for f in info]
    again = run_data_perf(files, memories=10, queries=3, vector_cache=cache, embedder="hashing", workdir=str(tmp_path))
    assert again["copies"] == 0 and again["vectors"]["embedded"] == 0  # the cache served every text
    assert 10 <= again["memories"] < corpus


def test_perf_data_refuses_what_it_cannot_measure(tmp_path):
    with pytest.raises(BadInput, match="no such dataset file"):
        run_data_perf([str(tmp_path / "missing.json")], embedder="hashing")
    with pytest.raises(BadInput, match="LongMemEval and LoCoMo"):
        run_data_perf([str(DATA / "convomem_tiny.json")], embedder="hashing")
    with pytest.raises(BadInput, match="--memories"):
        run_data_perf([str(DATA / "bench_locomo_tiny.json")], memories=0, embedder="hashing")


def test_a_kept_store_is_measured_again_without_rebuilding_and_never_mistaken(tmp_path):
    files = [str(DATA / "bench_locomo_tiny.json")]
    kept = tmp_path / "kept.db"
    first = run_data_perf(files, memories=30, queries=3, vector_cache=tmp_path / "v.db", embedder="hashing", keep=kept)
    assert kept.is_file() and "reused_store" not in first
    again = run_data_perf(files, memories=30, queries=3, vector_cache=tmp_path / "v.db", embedder="hashing", keep=kept)
    assert again["reused_store"] and again["memories"] == first["memories"] and again["copies"] == first["copies"]
    with pytest.raises(BadInput, match="not a perf store built from these files"):
        run_data_perf(files, memories=60, queries=3, vector_cache=tmp_path / "v.db", embedder="hashing", keep=kept)
