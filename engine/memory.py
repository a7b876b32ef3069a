"""MemoryEngine: the one facade the CLI, the UI and Python agents call.

Thread-safety: the engine holds one Store whose Database gives every thread its own
connection and serialises writes; an engine object may be shared between threads.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from .embed import make_embedder
from .embed.base import Embedder
from .errors import BadInput
from .ingest.model import ParsedDocument
from .ingest.pipeline import Ingestor, IngestReport
from .scope import Scope
from .store.store import Store

Progress = Callable[[float, str], None]
ShouldStop = Callable[[], bool]

REEMBED_BATCH = 256


class MemoryEngine:
    def __init__(self, path: str | os.PathLike[str], *, embedder: Embedder | None = None,
                 create: bool = True, readonly: bool = False, background_reembed: bool = True) -> None:
        self.store = Store(path, create=create, readonly=readonly)
        self.path = self.store.path
        self._embedder = embedder
        self._embedder_checked = False
        self._background_reembed = background_reembed and not readonly
        self._reembed_thread: threading.Thread | None = None
        self._reembed_stop = threading.Event()
        self._lock = threading.Lock()

    # lifecycle --------------------------------------------------------------------------------
    def close(self) -> None:
        self._reembed_stop.set()
        thread = self._reembed_thread
        if thread is not None:
            thread.join()
        self.store.close()

    def __enter__(self) -> "MemoryEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # embedder ---------------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = make_embedder()
            emb = self._embedder
            if not self._embedder_checked:
                self._embedder_checked = True
                self._check_embedder(emb)
        return emb

    def _check_embedder(self, emb: Embedder) -> None:
        """A different model than the one that wrote the vectors makes them stale."""
        if not emb.dims and hasattr(emb, "probe"):
            emb.probe()  # an endpoint embedder learns its width from the first response
        current = {"provider": emb.provider, "model": emb.model, "dims": emb.dims}
        recorded = self.store.get_meta("embedder")
        if self.store.db.readonly:
            return
        if recorded != json.dumps(current, sort_keys=True):
            self.store.set_meta("embedder", json.dumps(current, sort_keys=True))
            if recorded is not None and self.store.mark_stale_embeddings(emb.provider, emb.model):
                if self._background_reembed:
                    self._start_reembed()

    def _start_reembed(self) -> None:
        if self._reembed_thread is not None and self._reembed_thread.is_alive():
            return
        self._reembed_stop.clear()
        self._reembed_thread = threading.Thread(
            target=self.reembed_stale, kwargs={"should_stop": self._reembed_stop.is_set},
            name="memlens-reembed", daemon=False)
        self._reembed_thread.start()

    def wait_for_background(self) -> None:
        thread = self._reembed_thread
        if thread is not None:
            thread.join()

    def reembed_stale(self, *, progress: Progress | None = None, should_stop: ShouldStop | None = None) -> int:
        """Re-embed every stale vector with the current model, one batch per transaction."""
        emb = self._embedder if self._embedder is not None else self.embedder
        done = 0
        total = None
        while not (should_stop and should_stop()):
            batch = self.store.stale_embedding_batch(REEMBED_BATCH)
            if not batch:
                break
            if total is None:
                total = len(batch)
            vectors = emb.embed([text for *_, text in batch], kind="passage")
            by_scope: dict[tuple[Scope, str], list] = {}
            for (scope, owner_type, owner_id, _), vec in zip(batch, vectors):
                by_scope.setdefault((scope, owner_type), []).append((owner_id, vec))
            for (scope, owner_type), rows in by_scope.items():
                with self.store.writer(scope) as w:
                    w.put_embeddings(owner_type, rows, provider=emb.provider, model=emb.model,
                                     dims=emb.dims, embed_ms=None)
            done += len(batch)
            if progress is not None:
                progress(0.0, f"re-embedded {done} vectors")
        return done

    # ingestion --------------------------------------------------------------------------------
    def ingest_documents(self, docs: Iterable[ParsedDocument], *, scope: Scope,
                         progress: Progress | None = None, should_stop: ShouldStop | None = None) -> IngestReport:
        return Ingestor(self.store, scope, self.embedder).ingest(docs, progress=progress, should_stop=should_stop)

    def ingest_paths(self, paths: Sequence[str | os.PathLike[str]], *, scope: Scope, fmt: str = "auto",
                     progress: Progress | None = None, should_stop: ShouldStop | None = None) -> IngestReport:
        docs = parse_sources(paths, fmt=fmt)
        return self.ingest_documents(docs, scope=scope, progress=progress, should_stop=should_stop)

    # reading ----------------------------------------------------------------------------------
    def counts(self, scope: Scope) -> dict[str, int]:
        return self.store.counts(scope)

    def export(self, scope: Scope) -> dict[str, list[dict[str, Any]]]:
        return self.store.export(scope)

    def show(self, kind: str, record_id: int, *, scope: Scope) -> dict[str, Any]:
        st = self.store
        if kind == "document":
            doc = st.document(scope, record_id)
            if doc is None:
                raise BadInput(f"no document {record_id} in this scope")
            return {"document": doc.as_dict(), "chunks": [c.as_dict() for c in st.chunks_of(scope, record_id)]}
        if kind == "chunk":
            ch = st.chunk(scope, record_id)
            if ch is None:
                raise BadInput(f"no chunk {record_id} in this scope")
            doc = st.document(scope, ch.document_id)
            return {
                "chunk": ch.as_dict(),
                "document": {"id": doc.id, "title": doc.title, "uri": doc.uri, "source_type": doc.source_type},
                "span_text": doc.text[ch.start:ch.end],
                "memory_ids": st.memories_of_chunk(scope, record_id),
            }
        if kind == "memory":
            mem = st.memory(scope, record_id)
            if mem is None:
                raise BadInput(f"no memory {record_id} in this scope")
            sources = []
            for src in st.sources_of(scope, record_id):
                doc = st.document(scope, src.document_id)
                sources.append({
                    **src.as_dict(),
                    "document_title": doc.title, "document_uri": doc.uri, "source_type": doc.source_type,
                    "text": doc.text[src.start:src.end],
                })
            emb = st.embedding_of(scope, "memory", record_id)
            if emb is not None:
                emb.pop("vector")
            return {"memory": mem.as_dict(), "sources": sources, "entities": st.mentions_of(scope, record_id),
                    "embedding": emb}
        raise BadInput(f"unknown kind {kind!r} (memory, fact, document or chunk)")


def parse_sources(paths: Sequence[str | os.PathLike[str]], *, fmt: str = "auto") -> list[ParsedDocument]:
    """Parse every path (directories are walked) before anything is written: bad input fails whole."""
    from .ingest.detect import iter_source_files, parse_path

    docs: list[ParsedDocument] = []
    if not paths:
        raise BadInput("nothing to ingest: give at least one path")
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = list(iter_source_files(path))
            if not files:
                raise BadInput(f"{path}: no ingestible files in this directory")
            for f in files:
                docs.extend(parse_path(f, fmt))
        else:
            docs.extend(parse_path(path, fmt))
    return docs
