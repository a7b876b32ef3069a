"""A long document is written in bounded transactions, and a crash between them loses nothing
that the next ingest of the same source cannot finish."""

from __future__ import annotations

import pytest

import engine.ingest.pipeline as pipeline
from engine.embed.hashing import HashingEmbedder
from engine.ingest.detect import parse_bytes
from engine.memory import MemoryEngine
from engine.scope import Scope
from engine.store.store import Writer

ANA = Scope.default("ana", "bot")


def long_text(n: int, changed: int | None = None) -> bytes:
    paras = [f"Paragraph {i}: Ana Lima wrote to Bob about Lisbon{' (edited)' if i == changed else ''}."
             for i in range(n)]
    return "\n\n".join(paras).encode()


def docs(raw: bytes):
    return parse_bytes(raw, name="notes.txt", uri="/notes.txt")


def commits(engine: MemoryEngine) -> int:
    return engine.store.db.generation


def check_document(engine: MemoryEngine, n: int) -> dict:
    [doc] = [d for d in engine.export(ANA)["documents"] if not d["replaced_at"]]
    assert not doc["content_hash"].startswith(pipeline.PARTIAL)
    chunks = engine.store.chunks_of(ANA, doc["id"])
    assert [c.ordinal for c in chunks] == list(range(n))
    assert all(doc["text"][c.start:c.end] == c.text for c in chunks)
    for c in chunks:
        [mid] = engine.store.memories_of_chunk(ANA, c.id)
        assert engine.store.memory(ANA, mid).text == c.text
    return doc


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(pipeline, "WRITE_BATCH_CHUNKS", 7)


def test_a_long_document_is_written_in_batches(tmp_path, small_batches):
    with MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(), llm=None) as engine:
        _ = engine.embedder  # its first use records the model (a commit of its own)
        before = commits(engine)
        report = engine.ingest_documents(docs(long_text(30)), scope=ANA)
        assert report.chunks == 30 and commits(engine) - before == 5  # ceil(30 / 7) transactions
        first = check_document(engine, 30)
        # A new version: surviving chunks keep their ids, the changed one is replaced.
        old_ids = {c.text: c.id for c in engine.store.chunks_of(ANA, first["id"])}
        report = engine.ingest_documents(docs(long_text(30, changed=12)), scope=ANA)
        assert (report.documents, report.chunks, report.removed_chunks) == (1, 1, 1)
        second = check_document(engine, 30)
        assert second["version"] == 2 and second["previous_id"] == first["id"]
        kept = [c for c in engine.store.chunks_of(ANA, second["id"]) if c.text in old_ids]
        assert len(kept) == 29 and all(old_ids[c.text] == c.id for c in kept)


def test_a_crash_between_batches_is_finished_by_the_next_ingest(tmp_path, small_batches, monkeypatch):
    path = tmp_path / "m.db"
    with MemoryEngine(path, embedder=HashingEmbedder(), llm=None) as engine:
        calls = {"n": 0}
        real = pipeline.Ingestor._insert_chunks

        def crash_on_third(self, *args):
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt  # as if the process died here (the partial version stays)
            return real(self, *args)

        monkeypatch.setattr(pipeline.Ingestor, "_insert_chunks", crash_on_third)
        monkeypatch.setattr(Writer, "discard_partial_documents", lambda self, uri, ext: 0)
        with pytest.raises(KeyboardInterrupt):
            engine.ingest_documents(docs(long_text(30)), scope=ANA)
        [partial] = engine.export(ANA)["documents"]
        assert partial["content_hash"].startswith(pipeline.PARTIAL)
        assert len(engine.store.chunks_of(ANA, partial["id"])) == 14
    monkeypatch.undo()
    monkeypatch.setattr(pipeline, "WRITE_BATCH_CHUNKS", 7)
    with MemoryEngine(path, embedder=HashingEmbedder(), llm=None) as engine:
        report = engine.ingest_documents(docs(long_text(30)), scope=ANA)
        assert (report.documents, report.chunks) == (1, 30)
        doc = check_document(engine, 30)
        assert [d["id"] for d in engine.export(ANA)["documents"]] == [doc["id"]]  # the partial one is gone
        assert engine.counts(ANA)["memories"] == 30 and engine.store.db.integrity_check() == "ok"


def test_a_cancelled_long_document_leaves_nothing_behind(tmp_path, small_batches):
    from engine.errors import Cancelled

    with MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(), llm=None) as engine:
        engine.ingest_documents(docs(b"A first document about Porto."), scope=Scope.default("ana", "other"))
        checks = iter([False] * 3 + [True] * 100)
        with pytest.raises(Cancelled):
            engine.ingest_documents(docs(long_text(30)), scope=ANA, should_stop=lambda: next(checks))
        assert engine.export(ANA)["documents"] == [] and engine.counts(ANA)["memories"] == 0


def test_a_long_document_is_embedded_batch_by_batch_and_reports_progress(tmp_path, small_batches):
    """Embedding all of a 10 MB file before writing anything kept it invisible (and its memory
    growing) for minutes; each batch is embedded just before its own transaction."""
    calls: list[int] = []

    class Counting(HashingEmbedder):
        def embed(self, texts, *, kind="passage"):
            calls.append(len(texts))
            return super().embed(texts, kind=kind)

    seen: list[float] = []
    with MemoryEngine(tmp_path / "m.db", embedder=Counting(), llm=None) as engine:
        engine.ingest_documents(docs(long_text(30)), scope=ANA, progress=lambda f, _m: seen.append(f))
        check_document(engine, 30)
    assert calls == [7, 7, 7, 7, 2]
    assert seen == sorted(seen) and len(seen) == 5 and seen[-1] == 1.0
