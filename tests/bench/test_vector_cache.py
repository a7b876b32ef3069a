"""The content-addressed vector cache: exact vectors back, each text embedded once, runs reuse it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from engine.bench import containers
from engine.bench.runner import run_benchmark
from engine.embed.cache import CachedEmbedder, embedder_identity
from engine.embed.hashing import HashingEmbedder
from engine.embed.local import LocalEmbedder
from engine.memory import MemoryEngine
from engine.store import bench as bench_sql
from engine.store.vector_cache import VectorCacheFile

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"


class Counting(HashingEmbedder):
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self, dims: int = 64) -> None:
        super().__init__(dims)
        self.asked: list[str] = []

    def embed(self, texts, *, kind="passage"):
        self.asked += list(texts)
        return super().embed(texts, kind=kind)


def test_cached_vectors_are_the_embedders_and_each_text_is_embedded_once(tmp_path):
    inner = Counting()
    cache = VectorCacheFile(tmp_path / "v.db")
    emb = CachedEmbedder(inner, cache)
    texts = ["Ana went hiking.", "Ben likes tea.", "Ana went hiking."]
    first = emb.embed(texts)
    assert np.array_equal(first, HashingEmbedder(64).embed(texts))  # bit for bit
    assert inner.asked == ["Ana went hiking.", "Ben likes tea."]  # a repeat inside one call is one text
    assert emb.stats.as_dict() == {"embedded": 2, "reused": 1}
    again = CachedEmbedder(inner, VectorCacheFile(tmp_path / "v.db"))  # another process, the same file
    assert np.array_equal(again.embed(["Ben likes tea.", "Cleo reads."]), inner.embed(["Ben likes tea.", "Cleo reads."]))
    assert again.stats.as_dict() == {"embedded": 1, "reused": 1}
    inner.asked.clear()
    emb.embed(["Ben likes tea."], kind="query")  # another kind is another text for the cache
    assert inner.asked == ["Ben likes tea."]
    assert emb.embed([]).shape == (0, 64)
    fresh = CachedEmbedder(inner, cache, read=False)  # --fresh: computed again, and stored
    inner.asked.clear()
    fresh.embed(["Ana went hiking."])
    assert inner.asked == ["Ana went hiking."] and fresh.stats.reused == 0


def test_another_model_or_another_definition_never_reads_these_vectors(tmp_path, monkeypatch):
    cache = VectorCacheFile(tmp_path / "v.db")
    CachedEmbedder(HashingEmbedder(64), cache).embed(["Ana went hiking."])
    wider = CachedEmbedder(HashingEmbedder(384), cache)
    assert wider.embed(["Ana went hiking."]).shape == (1, 384) and wider.stats.embedded == 1
    assert cache.count() == 2
    local = LocalEmbedder()
    before = embedder_identity(local)
    monkeypatch.setattr(LocalEmbedder, "_read_sums", lambda self: {"model.onnx": "0" * 64})
    assert embedder_identity(local) != before  # other weights: other vectors


def _shared_haystacks(tmp_path: Path) -> Path:
    """The tiny LongMemEval S file plus a question asked about the first question's haystack."""
    data = json.loads((DATA / "bench_longmemeval_s_tiny.json").read_text())
    twin = copy.deepcopy(data[0])
    twin["question_id"] = twin["question_id"] + "_twin"
    twin["question"] = "Where is the allotment?"
    path = tmp_path / "shared.json"
    path.write_text(json.dumps(data + [twin]))
    return path


def test_runs_reuse_vectors_and_say_so_and_rank_as_without_them(tmp_path):
    path = _shared_haystacks(tmp_path)
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        cold = run_benchmark(engine, "longmemeval", path, embedder="hashing")
        turns = sum(len(s) for q in json.loads(path.read_text()) for s in q["haystack_sessions"])
        twin_turns = sum(len(s) for s in json.loads(path.read_text())[-1]["haystack_sessions"])
        assert cold["containers"] == {"built": 4, "reused": 0}
        # the twin's haystack is the first question's: its every turn is served by the cache
        assert cold["vectors"] == {"embedded": turns - twin_turns, "reused": twin_turns}
        assert cold["query_embed_ms"]["embedded"] == 4
        # each recall's CPU time beside its wall time: at most the wall time it took
        assert 0 < cold["recall_cpu_ms"]["p50"] <= cold["recall_cpu_ms"]["p99"] <= cold["latency_ms"]["p99"] * 1.01
        # each container's vector index, read as it opened, is its own figure (not in a recall's)
        assert cold["index_load_cpu_ms"]["containers"] == 4 and cold["index_load_cpu_ms"]["p50"] > 0
        warm = run_benchmark(engine, "longmemeval", path, embedder="hashing", recipe="lexical")
        assert warm["containers"] == {"built": 0, "reused": 4} and warm["vectors"] == {"embedded": 0, "reused": 0}
        assert warm["query_embed_ms"] == {"embedded": 0}  # every question's vector came from the cache
        fresh = run_benchmark(engine, "longmemeval", path, embedder="hashing", fresh=True)
        # --fresh: every vector computed again, once: the twin's haystack reads what this run computed
        assert fresh["vectors"] == {"embedded": turns - twin_turns, "reused": twin_turns}
        run_own = Path(str(engine.path) + ".bench") / f"run-{fresh['run_id']}" / "fresh-vectors.db"
        assert not run_own.exists()  # folded into the shared cache: a next run reads them
        again = run_benchmark(engine, "longmemeval", path, embedder="hashing", fresh=True)
        assert again["vectors"] == fresh["vectors"]  # nothing from before a --fresh run is read
        for a, b in zip(bench_sql.items(engine.store, cold["run_id"]), bench_sql.items(engine.store, fresh["run_id"])):
            assert a["retrieved"] == b["retrieved"] and a["metrics"] == b["metrics"]
        assert (containers.cache_dir_for(engine.path).parent / "vectors.db").is_file()


def test_an_unusable_vector_cache_file_is_named_and_the_run_embeds_as_before(tmp_path, capsys):
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        target = containers.vector_cache_path(containers.cache_dir_for(engine.path))
        target.parent.mkdir(parents=True)
        target.write_bytes(b"not a database" * 100)
        out = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing")
    assert out["status"] == "done" and out["failures"] == 0
    assert out["vectors"]["embedded"] > 0 and out["vectors"]["reused"] == 0
    assert "vector cache" in capsys.readouterr().err
    assert target.read_bytes().startswith(b"not a database")  # left as it was


@pytest.mark.parametrize("dims", [64])
def test_the_cache_survives_a_reopen_and_a_second_writer(tmp_path, dims):
    a = VectorCacheFile(tmp_path / "v.db")
    b = VectorCacheFile(tmp_path / "v.db")
    ident = "x"
    a.put(ident, [(b"k1", np.ones(dims, dtype="<f4").tobytes())])
    b.put(ident, [(b"k1", np.zeros(dims, dtype="<f4").tobytes()), (b"k2", np.ones(dims, dtype="<f4").tobytes())])
    assert np.frombuffer(b.get(ident, [b"k1"])[b"k1"], dtype="<f4")[0] == 1.0  # the first write stands
    a.close()
    assert VectorCacheFile(tmp_path / "v.db").count(ident) == 2


def test_a_mapped_reader_sees_what_another_connection_writes_after_its_reads(tmp_path):
    # reads map the file (MMAP_BYTES): rows written later by another worker, in the WAL or
    # checkpointed into the file past what was mapped, are still read, and are the bytes written
    reader = VectorCacheFile(tmp_path / "v.db")
    writer = VectorCacheFile(tmp_path / "v.db")
    assert reader.conn.pragma("mmap_size") > 0
    assert reader.get("x", [b"k0"]) == {}
    rows = [(f"k{i}".encode(), np.full(384, i, dtype="<f4").tobytes()) for i in range(2000)]
    writer.put("x", rows)
    writer.conn.pragma("wal_checkpoint(TRUNCATE)")
    got = reader.get("x", [k for k, _ in rows])
    assert got == dict(rows)


def test_a_container_that_cannot_be_built_fails_its_questions_not_the_run(tmp_path, monkeypatch):
    from engine.bench import runner

    real = runner._build_container

    def build(spec, db):
        if spec["container"].endswith("_twin"):
            raise OverflowError("date value out of range")
        return real(spec, db)

    monkeypatch.setattr(runner, "_build_container", build)
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        out = run_benchmark(engine, "longmemeval", _shared_haystacks(tmp_path), embedder="hashing")
        items = bench_sql.items(engine.store, out["run_id"])
    assert out["status"] == "done" and out["failures"] == 1 and out["questions"] == 4
    failed = [it for it in items if it["status"] == "failed"]
    assert len(failed) == 1 and "OverflowError" in failed[0]["error"] and failed[0]["question_id"].endswith("_twin")


def test_a_second_run_embeds_nothing_at_recall_either(tmp_path, monkeypatch):
    """The current-truth stage embeds clauses of the turns it compares: through the run's vector
    cache, as the questions are, so a second run of the file computes no vector at all."""
    from engine.bench import runner
    from engine.bench.datasets import updates_default_path
    from engine.retrieve import pipeline

    counting = Counting(384)
    monkeypatch.setitem(runner._EMBEDDERS, "hashing", counting)
    # this process's memo of clause vectors starts empty, as a run's worker process does
    monkeypatch.setattr(pipeline, "CLAUSE_VECTORS", pipeline._VectorMemo())
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        cold = run_benchmark(engine, "updates", updates_default_path(), embedder="hashing")
        questions = {it["question"] for it in bench_sql.items(engine.store, cold["run_id"])}
        at_recall = set(counting.asked) - questions
        assert len(at_recall) > len(questions)  # clauses were embedded while recalling
        counting.asked.clear()
        monkeypatch.setattr(pipeline, "CLAUSE_VECTORS", pipeline._VectorMemo())  # the next run's process
        warm = run_benchmark(engine, "updates", updates_default_path(), embedder="hashing")
        assert counting.asked == []
        for a, b in zip(bench_sql.items(engine.store, cold["run_id"]), bench_sql.items(engine.store, warm["run_id"])):
            assert a["retrieved"] == b["retrieved"]


def _open_and_put(path: str, start, n: int) -> str:
    start.wait()
    try:
        cache = VectorCacheFile(path)
        cache.put("x", [(f"k{n}".encode(), np.full(4, n, dtype="<f4").tobytes())])
        cache.close()
    except Exception as exc:  # reported to the test, which names it
        return f"{exc.__class__.__name__}: {exc}"
    return "ok"


def test_workers_opening_a_new_cache_file_at_once_all_use_it(tmp_path):
    """A cold benchmark run's workers create the cache file together; SQLite can answer the switch
    to WAL busy at once, without waiting, and a worker then ran without the cache."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    for attempt in range(3):
        path = str(tmp_path / f"v{attempt}.db")
        with ctx.Manager() as manager:
            start = manager.Barrier(6)
            with ctx.Pool(6) as pool:
                results = pool.starmap(_open_and_put, [(path, start, n) for n in range(6)])
        assert results == ["ok"] * 6
        assert VectorCacheFile(path).count("x") == 6


def test_a_run_in_this_process_keeps_what_was_frozen_before_it(tmp_path):
    """bench freezes what is alive before each timed recall (no full collection walks the kept
    results inside one) and thaws when a container is done, unless something was frozen before
    it began: then it freezes nothing (runner.timed_recalls), since gc.unfreeze would hand the
    inspector's start-up objects (app.gui.settle_gc) back to the full passes that stalled its
    window, and a freeze without a thaw would keep each question's pending garbage for good."""
    import gc

    path = DATA / "bench_longmemeval_s_tiny.json"
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        gc.unfreeze()
        run_benchmark(engine, "longmemeval", path, embedder="hashing")
        assert gc.get_freeze_count() == 0  # nothing was frozen before: all thawed
        gc.freeze()
        before = gc.get_freeze_count()
        try:
            run_benchmark(engine, "longmemeval", path, embedder="hashing", recipe="lexical")
            assert gc.get_freeze_count() >= before > 0
            assert gc.get_freeze_count() == before  # and nothing more: no question's pending garbage kept for good
        finally:
            gc.unfreeze()
