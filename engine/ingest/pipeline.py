"""Parsed documents -> stored documents, chunks, episodic memories, vectors, mentions, FTS rows.

One transaction per document, so a crash loses at most the document in flight, and re-running
the same ingest finishes the rest: an unchanged document is a no-op (content hash), a changed
one becomes a new version whose surviving chunks keep their ids and memories while obsolete
chunks go, together with the episodes only they supported.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..embed.base import Embedder
from ..errors import Cancelled
from ..extract.secrets import MARKER as SECRET_MARKER
from ..scope import Scope
from ..timeexpr import stored_rows
from ..store.store import Store, Writer
from .entities import find_mentions
from .model import ParsedChunk, ParsedDocument

Progress = Callable[[float, str], None]
ShouldStop = Callable[[], bool]

EMBED_BATCH_CHUNKS = 256  # chunks embedded together across documents before they are written


def _sha(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def document_hash(doc: ParsedDocument) -> str:
    """Identity of a document's content: text and the chunking that gives it spans."""
    layout = ";".join(f"{c.kind}:{c.start}:{c.end}:{c.speaker or ''}:{c.message_id or ''}" for c in doc.chunks)
    return _sha(doc.source_type, doc.trust, doc.source_time or "", doc.text, layout)


def chunk_hash(doc: ParsedDocument, chunk: ParsedChunk) -> str:
    return _sha(chunk.kind, chunk.speaker or "", chunk.message_id or "", doc.text[chunk.start:chunk.end])


CONTEXT_CHARS = 300  # of the previous message, embedded after the message itself


def embedding_text(doc: ParsedDocument, i: int) -> str:
    """What a chunk's vector is computed from: its text, then (for a message) a little of the one
    before, so a reply like "Yes, it was amazing!" is found by what it answers. The memory's
    text and FTS row stay exactly the chunk's span."""
    ch = doc.chunks[i]
    prev = doc.chunks[i - 1] if i > 0 else None
    return contextual_text(doc.text[ch.start:ch.end], ch.kind,
                           doc.text[prev.start:prev.end] if prev else None, prev.kind if prev else None)


def contextual_text(text: str, kind: str, prev_text: str | None, prev_kind: str | None) -> str:
    if kind == "message" and prev_text and prev_kind == "message":
        return f"{text}\n(in reply to: {prev_text[:CONTEXT_CHARS]})"
    return text


# Bump when vector_text changes what a stored memory is embedded from: opening a database written
# under an older version re-embeds what changed (2: facts gained their evidence quote).
VECTOR_TEXT_VERSION = 2


def fact_vector_text(text: str, evidence: str | None) -> str:
    """A fact is embedded with the words it was read from. Alone, "Nate likes helping people." is
    a few words and a name, and sits closer to any short question about Nate than the turns that
    answer it; with its quote it is compared on what was said. Its text and FTS row stay the fact."""
    evidence = " ".join((evidence or "").split())
    if not evidence or evidence.casefold() in text.casefold():
        return text
    return f"{text}\n(from: {evidence[:CONTEXT_CHARS]})"


def vector_text(text: str, context: tuple | None) -> str:
    """The text a stored memory's vector is computed from, given Store.embedding_context's row:
    the same text ingestion and consolidation embedded, so re-embedding reproduces it."""
    if context is None:
        return text
    memory_kind, evidence, kind, prev_text, prev_kind = context
    if memory_kind == "fact":
        return fact_vector_text(text, evidence)
    return contextual_text(text, kind, prev_text, prev_kind)


@dataclass(slots=True)
class IngestReport:
    documents: int = 0  # documents written (new or new version)
    chunks: int = 0
    memories: int = 0
    facts: int = 0
    skipped: int = 0  # unchanged documents
    failed: int = 0
    redacted: int = 0
    removed_chunks: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    document_ids: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    extraction: dict | None = None

    def as_dict(self) -> dict:
        return {
            "documents": self.documents, "chunks": self.chunks, "memories": self.memories,
            "facts": self.facts, "skipped": self.skipped, "failed": self.failed,
            "redacted": self.redacted, "removed_chunks": self.removed_chunks,
            "seconds": round(self.seconds, 3), "embed_seconds": round(self.embed_seconds, 3),
            "document_ids": self.document_ids, "errors": self.errors, "extraction": self.extraction,
        }


@dataclass(slots=True)
class _Pending:
    doc: ParsedDocument
    content_hash: str
    previous_id: int | None
    previous_version: int
    reuse: dict[int, int]  # parsed chunk index -> existing chunk id whose text it repeats
    obsolete: list[int]  # existing chunk ids that the new version drops
    vectors: dict[int, np.ndarray] = field(default_factory=dict)  # chunk index -> vector
    embed_ms: float | None = None  # this document's share of its batch's embedding time, per vector


class Ingestor:
    def __init__(self, store: Store, scope: Scope, embedder: Embedder) -> None:
        self.store = store
        self.scope = scope
        self.embedder = embedder

    # planning ---------------------------------------------------------------------------------
    def _plan(self, doc: ParsedDocument) -> _Pending | None:
        content_hash = document_hash(doc)
        prev = self.store.latest_document(self.scope, doc.uri, doc.external_id)
        if prev is not None and prev.content_hash == content_hash and prev.retracted_at is None:
            return None
        reuse: dict[int, int] = {}
        obsolete: list[int] = []
        if prev is not None and prev.retracted_at is None:
            old = self.store.chunks_of(self.scope, prev.id)
            by_hash: dict[str, list[int]] = {}
            for ch in old:
                by_hash.setdefault(_sha(ch.kind, ch.speaker or "", ch.message_id or "", ch.text), []).append(ch.id)
            for i, ch in enumerate(doc.chunks):
                ids = by_hash.get(chunk_hash(doc, ch))
                if ids:
                    reuse[i] = ids.pop(0)
            kept = set(reuse.values())
            obsolete = [ch.id for ch in old if ch.id not in kept]
        return _Pending(doc, content_hash, prev.id if prev else None, prev.version if prev else 0, reuse, obsolete)

    # the run ----------------------------------------------------------------------------------
    def ingest(self, docs: Iterable[ParsedDocument], *, progress: Progress | None = None,
               should_stop: ShouldStop | None = None) -> IngestReport:
        t0 = time.perf_counter()
        report = IngestReport()
        docs = list(docs)
        total = max(1, len(docs))
        group: list[_Pending] = []
        group_chunks = 0
        done = 0

        def flush() -> None:
            nonlocal group, group_chunks, done
            if not group:
                return
            self._embed(group, report)
            for pending in group:
                if should_stop is not None and should_stop():
                    raise Cancelled("ingestion cancelled")
                self._write(pending, report)
                done += 1
                if progress is not None:
                    progress(done / total, pending.doc.title or pending.doc.uri or "document")
            group, group_chunks = [], 0

        try:
            for doc in docs:
                if should_stop is not None and should_stop():
                    raise Cancelled("ingestion cancelled")
                pending = self._plan(doc)
                if pending is None:
                    report.skipped += 1
                    done += 1
                    continue
                group.append(pending)
                group_chunks += len(doc.chunks) - len(pending.reuse)
                if group_chunks >= EMBED_BATCH_CHUNKS:
                    flush()
            flush()
        finally:
            report.seconds = time.perf_counter() - t0
        return report

    def _embed(self, group: Sequence[_Pending], report: IngestReport) -> None:
        texts: list[str] = []
        owners: list[tuple[_Pending, int]] = []
        for pending in group:
            doc = pending.doc
            for i, _ch in enumerate(doc.chunks):
                if i not in pending.reuse:
                    texts.append(embedding_text(doc, i))
                    owners.append((pending, i))
        if not texts:
            return
        t = time.perf_counter()
        mat = self.embedder.embed(texts, kind="passage")
        elapsed = time.perf_counter() - t
        report.embed_seconds += elapsed
        for (pending, i), vec in zip(owners, mat):
            pending.vectors[i] = vec
            pending.embed_ms = 1000.0 * elapsed / len(texts)

    def _write(self, p: _Pending, report: IngestReport) -> None:
        doc = p.doc
        emb = self.embedder
        with self.store.writer(self.scope) as w:
            if p.previous_id is not None:
                w.mark_document_replaced(p.previous_id)
            doc_id = w.insert_document(
                source_type=doc.source_type, uri=doc.uri, external_id=doc.external_id, title=doc.title,
                text=doc.text, content_hash=p.content_hash, trust=doc.trust, source_time=doc.source_time,
                version=p.previous_version + 1, previous_id=p.previous_id, meta=doc.meta,
            )
            chunk_ids: list[int] = []
            new_vectors: list[tuple[int, np.ndarray]] = []
            mentions: list[tuple[int, int, int | None, int | None, int | None]] = []
            for ordinal, ch in enumerate(doc.chunks):
                quotes_id = chunk_ids[ch.quotes_ordinal] if ch.quotes_ordinal is not None and ch.quotes_ordinal < len(chunk_ids) else None
                text = doc.text[ch.start:ch.end]
                trust = ch.trust or doc.trust
                source_time = ch.source_time or doc.source_time
                if ordinal in p.reuse:
                    cid = p.reuse[ordinal]
                    w.move_chunk(cid, document_id=doc_id, ordinal=ordinal, start=ch.start, end=ch.end,
                                 quotes_chunk_id=quotes_id, meta=ch.meta, source_time=source_time)
                    chunk_ids.append(cid)
                    continue
                cid = w.insert_chunk(
                    document_id=doc_id, ordinal=ordinal, kind=ch.kind, start=ch.start, end=ch.end, text=text,
                    content_hash=chunk_hash(doc, ch), speaker=ch.speaker, role=ch.role, message_id=ch.message_id,
                    source_time=source_time, trust=trust, quotes_chunk_id=quotes_id, meta=ch.meta,
                )
                chunk_ids.append(cid)
                times = stored_rows(text, source_time)
                if times:
                    w.add_chunk_times(cid, times)
                mid = w.insert_memory(
                    kind="episode", text=text, trust=trust, content_hash=_sha("episode", text),
                    source_time=source_time, importance=0.5, confidence=1.0, extraction_method="verbatim",
                )
                w.add_source(memory_id=mid, chunk_id=cid, document_id=doc_id, start=ch.start, end=ch.end)
                new_vectors.append((mid, p.vectors[ordinal]))
                mentions.extend(self._mentions(w, doc, ch, text, mid, cid))
                report.chunks += 1
                report.memories += 1
            for old_id in p.obsolete:
                for mid in w.delete_chunk(old_id):
                    if w.source_count(mid) == 0:
                        if w.memory_kind(mid) == "episode":
                            w.delete_memory(mid)
                        else:
                            w.forget_memory(mid, "source removed: document changed")
                report.removed_chunks += 1
            if new_vectors:
                w.put_embeddings("memory", new_vectors, provider=emb.provider, model=emb.model,
                                 dims=emb.dims, embed_ms=p.embed_ms)
            if mentions:
                w.add_mentions(mentions)
        report.documents += 1
        report.redacted += len(SECRET_MARKER.findall(doc.text))  # scrubbed during normalisation
        report.document_ids.append(doc_id)

    def _mentions(self, w: Writer, doc: ParsedDocument, ch: ParsedChunk, text: str, mid: int, cid: int):
        speaker_span = None
        if ch.speaker and text.startswith(ch.speaker):
            speaker_span = (0, len(ch.speaker))
        rows = []
        for m in find_mentions(text, speaker=ch.speaker if speaker_span else None, speaker_span=speaker_span):
            eid = w.upsert_entity(m.name, m.canonical, m.kind)
            rows.append((eid, mid, cid, ch.start + m.start, ch.start + m.end))
        if ch.speaker and speaker_span is None:
            # The speaker is an entity of the turn even when the text does not name them.
            eid = w.upsert_entity(ch.speaker, ch.speaker.casefold(), "person")
            rows.append((eid, mid, cid, None, None))
        return rows
