"""Parsed documents -> stored documents, chunks, episodic memories, vectors, mentions, FTS rows.

Everything that is not a write happens before the transaction: hashing, entity mentions and
embeddings are computed first (short documents' chunks embedded together, a long document's
batch by batch), so the write lock is held only for the inserts, and other processes (an agent
over MCP, the inspector) get their turn in between.

A document is written in one transaction when it has at most WRITE_BATCH_CHUNKS new chunks,
else in several: the first inserts the new version marked partial (its content hash starts
with PARTIAL) with the first batch of chunks, the last moves the surviving chunks over, drops
the obsolete ones, retires the previous version and gives the new one its real hash. A crash
loses at most the document in flight, and re-running the same ingest finishes the rest: an
unchanged document is a no-op (content hash), a partial one left by a crash is discarded, a
changed one becomes a new version whose surviving chunks keep their ids and memories while
obsolete chunks go, together with the episodes only they supported.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..embed.base import Embedder
from ..embed.text import contextual_text
from ..errors import Cancelled
from ..extract.secrets import MARKER as SECRET_MARKER
from ..names import Mention, find_mentions
from ..scope import Scope
from ..statements import (
    PARSED_TRUST,
    RULES_VERSION,
    clauses,
    encode_clauses,
    read_slots_for_store,
    text_digest,
    turn_body,
)
from ..store.recall import ClauseRow
from ..store.store import Store, Writer
from ..timeexpr import stored_rows
from .model import ParsedChunk, ParsedDocument

Progress = Callable[[float, str], None]
ShouldStop = Callable[[], bool]

EMBED_BATCH_CHUNKS = 256  # chunks embedded together across documents before they are written
WRITE_BATCH_CHUNKS = 1000  # new chunks per write transaction (about 0.1-0.3 s of inserts here)
PARTIAL = "partial:"  # content-hash prefix of a document version whose writing has not finished


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


def embedding_text(doc: ParsedDocument, i: int) -> str:
    """What a chunk's vector is computed from: its text, then (for a message) a little of the one
    before, so a reply like "Yes, it was amazing!" is found by what it answers. The memory's
    text and FTS row stay exactly the chunk's span."""
    ch = doc.chunks[i]
    prev = doc.chunks[i - 1] if i > 0 else None
    return contextual_text(doc.text[ch.start:ch.end], ch.kind,
                           doc.text[prev.start:prev.end] if prev else None, prev.kind if prev else None)


@dataclass(slots=True)
class IngestReport:
    documents: int = 0  # documents written (new or new version)
    chunks: int = 0
    memories: int = 0
    facts: int = 0
    skipped: int = 0  # inputs not stored on purpose: unchanged documents and skipped files
    unchanged: int = 0  # documents identical to their stored version
    failed: int = 0  # input files that could not be read (each with its reason in files/errors)
    redacted: int = 0
    removed_chunks: int = 0
    seconds: float = 0.0  # wall time of the whole run (MemoryEngine includes extraction)
    embed_seconds: float = 0.0
    extract_seconds: float = 0.0
    document_ids: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    extraction: dict[str, Any] | None = None
    written: list[bool] = field(default_factory=list)  # per input document: stored (False: unchanged)
    files: list[dict[str, Any]] | None = None  # per input file: path, status, reason, documents (ingest_sources)

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents, "chunks": self.chunks, "memories": self.memories,
            "facts": self.facts, "skipped": self.skipped, "unchanged": self.unchanged, "failed": self.failed,
            "redacted": self.redacted, "removed_chunks": self.removed_chunks,
            "seconds": round(self.seconds, 3), "embed_seconds": round(self.embed_seconds, 3),
            "extract_seconds": round(self.extract_seconds, 3),
            "document_ids": self.document_ids, "errors": self.errors, "extraction": self.extraction,
            **({"files": self.files} if self.files is not None else {}),
        }


@dataclass(slots=True)
class _NewChunk:
    """A chunk to insert, with everything computed before the write transaction."""

    ordinal: int
    text: str
    content_hash: str
    trust: str
    source_time: str | None
    mentions: list[Mention]
    speaker_entity: bool  # the speaker is a mention without a span (the text does not name them)
    times: list[tuple[Any, ...]]  # the time expressions it names, resolved against its own time (timeexpr)
    # (digest, encoded clauses, encoded slot readings or None) of its parsed text (memory_clauses)
    clauses: tuple[bytes, str, str | None] | None = None


@dataclass(slots=True)
class _Pending:
    doc: ParsedDocument
    content_hash: str
    previous_id: int | None
    previous_version: int
    reuse: dict[int, int]  # parsed chunk index -> existing chunk id whose text it repeats
    old_starts: dict[int, int]  # reused chunk id -> its start in the previous version
    obsolete: list[int]  # existing chunk ids that the new version drops
    new_chunks: list[_NewChunk] = field(default_factory=list)
    vectors: dict[int, np.ndarray] = field(default_factory=dict)  # chunk index -> vector
    embed_ms: float | None = None  # this document's share of its batch's embedding time, per vector


MENTIONS_PER_ENTITY = 16  # spans kept per entity and chunk


def _first_spans(mentions: list[Mention]) -> list[Mention]:
    """The first MENTIONS_PER_ENTITY spans of each entity in a chunk. Mentions are a recall aid
    (which memories name an entity, and how often entities are named): a pasted 2 MB log named
    the same three people 66,000 times, which cost most of its write transaction and made them
    look a thousand times more common than they are."""
    seen: dict[tuple[str, str], int] = {}
    kept = []
    for m in mentions:
        key = (m.canonical, m.kind)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= MENTIONS_PER_ENTITY:
            kept.append(m)
    return kept


def _part_done(progress: Callable[[float, str], None], done: int, total: int, name: str, part: float) -> None:
    """Progress through a multi-batch document: `part` of the (done + 1)th of `total`."""
    progress((done + part) / total, name)

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
        old_starts: dict[int, int] = {}
        obsolete: list[int] = []
        if prev is not None and prev.retracted_at is None:
            old = self.store.chunks_of(self.scope, prev.id)
            by_hash: dict[str, deque[int]] = {}  # a deque: "Noted." may repeat thousands of times
            for ch in old:
                by_hash.setdefault(_sha(ch.kind, ch.speaker or "", ch.message_id or "", ch.text), deque()).append(ch.id)
                old_starts[ch.id] = ch.start
            for i, parsed in enumerate(doc.chunks):
                ids = by_hash.get(chunk_hash(doc, parsed))
                if ids:
                    reuse[i] = ids.popleft()
            kept = set(reuse.values())
            obsolete = [ch.id for ch in old if ch.id not in kept]
        return _Pending(doc, content_hash, prev.id if prev else None, prev.version if prev else 0, reuse,
                        old_starts, obsolete)

    def _prepare(self, p: _Pending) -> None:
        """Texts, hashes and entity mentions of the chunks to insert (outside any transaction)."""
        doc = p.doc
        for ordinal, ch in enumerate(doc.chunks):
            if ordinal in p.reuse:
                continue
            text = doc.text[ch.start:ch.end]
            speaker_span = (0, len(ch.speaker)) if ch.speaker and text.startswith(ch.speaker) else None
            mentions = _first_spans(find_mentions(text, speaker=ch.speaker if speaker_span else None,
                                                  speaker_span=speaker_span))
            source_time = ch.source_time or doc.source_time
            trust = ch.trust or doc.trust
            parse = None
            if ch.speaker and trust in PARSED_TRUST:
                # what recall's current-truth stage parses of a turn (engine/retrieve/pipeline.py),
                # parsed once here and kept beside the memory (memory_clauses)
                body = turn_body(text, ch.speaker)
                parse = (text_digest(body), encode_clauses(clauses(body)), read_slots_for_store(body, source_time))
            p.new_chunks.append(_NewChunk(
                ordinal=ordinal, text=text, content_hash=chunk_hash(doc, ch), trust=trust,
                source_time=source_time, mentions=mentions, speaker_entity=bool(ch.speaker) and speaker_span is None,
                times=stored_rows(text, source_time), clauses=parse))

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
            for pending in group:
                self._prepare(pending)
            # Short documents are embedded together; a long one batch by batch as it is written.
            self._embed([(p, p.new_chunks) for p in group if len(p.new_chunks) <= WRITE_BATCH_CHUNKS], report)
            for pending in group:
                if should_stop is not None and should_stop():
                    raise Cancelled("ingestion cancelled")
                name = pending.doc.title or pending.doc.uri or "document"
                self._write(pending, report, should_stop, on_batch=None if progress is None else
                            functools.partial(_part_done, progress, done, total, name))
                done += 1
                if progress is not None:
                    progress(done / total, name)
            group, group_chunks = [], 0

        try:
            for doc in docs:
                if should_stop is not None and should_stop():
                    raise Cancelled("ingestion cancelled")
                pending = self._plan(doc)
                report.written.append(pending is not None)
                if pending is None:
                    report.skipped += 1
                    report.unchanged += 1
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

    def _embed(self, items: Sequence[tuple[_Pending, Sequence[_NewChunk]]], report: IngestReport) -> None:
        texts: list[str] = []
        owners: list[tuple[_Pending, int]] = []
        for pending, chunks in items:
            for nc in chunks:
                texts.append(embedding_text(pending.doc, nc.ordinal))
                owners.append((pending, nc.ordinal))
        if not texts:
            return
        t = time.perf_counter()
        mat = self.embedder.embed(texts, kind="passage")
        elapsed = time.perf_counter() - t
        report.embed_seconds += elapsed
        for (pending, i), vec in zip(owners, mat):
            pending.vectors[i] = vec
            pending.embed_ms = 1000.0 * elapsed / len(texts)

    def _write(self, p: _Pending, report: IngestReport, should_stop: ShouldStop | None = None,
               on_batch: Callable[[float], None] | None = None) -> None:
        doc = p.doc
        batches = [p.new_chunks[i:i + WRITE_BATCH_CHUNKS] for i in range(0, len(p.new_chunks), WRITE_BATCH_CHUNKS)]
        batches = batches or [[]]
        chunk_ids: dict[int, int] = dict(p.reuse)  # ordinal -> chunk id, across the batches
        entities: dict[tuple[str, str], int] = {}  # (canonical, kind) -> entity id, committed or this batch's
        doc_id: int | None = None
        try:
            for n, batch in enumerate(batches):
                first, last = n == 0, n == len(batches) - 1
                if batch and batch[0].ordinal not in p.vectors:
                    self._embed([(p, batch)], report)  # before the transaction, like everything but writes
                with self.store.writer(self.scope) as w:
                    if first:
                        w.discard_partial_documents(doc.uri, doc.external_id)  # a crash's leftovers
                        doc_id = w.insert_document(
                            source_type=doc.source_type, uri=doc.uri, external_id=doc.external_id,
                            title=doc.title, text=doc.text, meta=doc.meta, trust=doc.trust,
                            content_hash=p.content_hash if last else PARTIAL + p.content_hash,
                            source_time=doc.source_time, version=p.previous_version + 1, previous_id=p.previous_id)
                    assert doc_id is not None  # the first batch inserted it
                    self._insert_chunks(w, p, doc_id, batch, chunk_ids, entities)
                    report.chunks += len(batch)
                    report.memories += len(batch)
                    if last:
                        self._finish(w, p, doc_id, chunk_ids, report, retag=not first)
                if not last:
                    if on_batch is not None:
                        on_batch((n + 1) / len(batches))
                    if should_stop is not None and should_stop():
                        raise Cancelled("ingestion cancelled")
        except BaseException:
            if doc_id is not None and len(batches) > 1:
                try:
                    with self.store.writer(self.scope) as w:  # take the unfinished version back out now
                        w.discard_partial_documents(doc.uri, doc.external_id)
                except Exception:  # noqa: BLE001 - the next ingest of this source discards it instead
                    pass
            raise
        report.documents += 1
        report.redacted += len(SECRET_MARKER.findall(doc.text))  # scrubbed during normalisation
        assert doc_id is not None  # every document has a first batch
        report.document_ids.append(doc_id)

    def _insert_chunks(self, w: Writer, p: _Pending, doc_id: int, batch: list[_NewChunk], chunk_ids: dict[int, int],
                       entities: dict[tuple[str, str], int]) -> None:
        doc = p.doc
        emb = self.embedder
        new_vectors: list[tuple[int, np.ndarray]] = []
        mentions: list[tuple[int, int, int | None, int | None, int | None]] = []
        parses: list[ClauseRow] = []

        def entity(name: str, canonical: str, kind: str) -> int:
            key = (canonical, kind)
            if key not in entities:
                entities[key] = w.upsert_entity(name, canonical, kind)
            return entities[key]

        for nc in batch:
            ch = doc.chunks[nc.ordinal]
            q = ch.quotes_ordinal
            quotes_id = chunk_ids.get(q) if q is not None and q < nc.ordinal else None
            cid = w.insert_chunk(
                document_id=doc_id, ordinal=nc.ordinal, kind=ch.kind, start=ch.start, end=ch.end, text=nc.text,
                content_hash=nc.content_hash, speaker=ch.speaker, role=ch.role, message_id=ch.message_id,
                source_time=nc.source_time, trust=nc.trust, quotes_chunk_id=quotes_id, meta=ch.meta,
            )
            chunk_ids[nc.ordinal] = cid
            if nc.times:
                w.add_chunk_times(cid, nc.times)
            mid = w.insert_memory(
                kind="episode", text=nc.text, trust=nc.trust, content_hash=_sha("episode", nc.text),
                source_time=nc.source_time, importance=0.5, confidence=1.0, extraction_method="verbatim",
            )
            w.add_source(memory_id=mid, chunk_id=cid, document_id=doc_id, start=ch.start, end=ch.end)
            if nc.clauses is not None:
                parses.append((mid, nc.clauses[0], RULES_VERSION, nc.clauses[1], nc.clauses[2], None, None, None))
            new_vectors.append((mid, p.vectors[nc.ordinal]))
            for m in nc.mentions:
                mentions.append((entity(m.name, m.canonical, m.kind), mid, cid, ch.start + m.start, ch.start + m.end))
            if nc.speaker_entity and ch.speaker:  # speaker_entity implies a speaker
                # The speaker is an entity of the turn even when the text does not name them.
                mentions.append((entity(ch.speaker, ch.speaker.casefold(), "person"), mid, cid, None, None))
        if new_vectors:
            w.put_embeddings("memory", new_vectors, provider=emb.provider, model=emb.model,
                             dims=emb.dims, embed_ms=p.embed_ms)
        if mentions:
            w.add_mentions(mentions)
        if parses:
            w.put_memory_clauses(parses)

    def _finish(self, w: Writer, p: _Pending, doc_id: int, chunk_ids: dict[int, int], report: IngestReport,
                *, retag: bool) -> None:
        """The last transaction of a document: surviving chunks move over, obsolete ones go, and
        the new version replaces the previous one."""
        doc = p.doc
        if p.previous_id is not None:
            w.mark_document_replaced(p.previous_id)
        moves = []
        for ordinal, cid in p.reuse.items():
            ch = doc.chunks[ordinal]
            q = ch.quotes_ordinal
            quotes_id = chunk_ids.get(q) if q is not None and q < ordinal else None
            moves.append((cid, p.old_starts[cid], ordinal, ch.start, ch.end, quotes_id, ch.meta,
                          ch.source_time or doc.source_time))
        if moves:
            w.move_chunks(doc_id, moves)
        for old_id in p.obsolete:
            for mid in w.delete_chunk(old_id):
                if w.source_count(mid) == 0:
                    if w.memory_kind(mid) == "episode":
                        w.delete_memory(mid)
                    else:
                        w.forget_memory(mid, "source removed: document changed")
            report.removed_chunks += 1
        if retag:
            w.set_document_hash(doc_id, p.content_hash)
