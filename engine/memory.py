"""MemoryEngine: the one facade the CLI, the UI and Python agents call.

For a Python agent this class is the API (examples/agent_memory.py runs it end to end):

    from engine.memory import MemoryEngine
    from engine.scope import Scope

    scope = Scope.default(user="ana", agent="travel-bot")     # every call names whose memory
    with MemoryEngine("memory.db") as mem:                    # creates the file if needed
        mem.add_turns([{"role": "user", "content": "I moved to Lisbon in March."},
                       {"role": "assistant", "content": "Noted: Lisbon since March."}], scope=scope)
        hit = mem.recall("where does the user live?", scope=scope, origin="agent")
        prompt_context = hit.context_text                    # cited lines, within a token budget
        profile = mem.profile(scope).as_dict()               # static/dynamic lines + their facts
        why = mem.explain("where does the user live?", hit.results[0]["memory_id"], scope=scope,
                          persist=False)                     # a what-if: no trace, no query text kept
        mem.curator(scope, actor="agent").forget(hit.results[0]["memory_id"], reason="user asked")

Thread-safety: the engine holds one Store whose Database gives every thread its own
connection and serialises writes; one engine object may be shared by every thread of an
agent (ingestion, extraction and recall may run concurrently; extraction runs one at a
time per engine so that two threads never reconcile the same facts against each other).
Call close() (or use `with`) once, when no other thread uses the engine any more.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import jsontext
from .background import lower_thread_priority
from .consolidate.runner import Extractor, ExtractReport
from .curate import CurationResult, Curator
from .embed import make_embedder
from .embed.base import Embedder
from .embed.text import VECTOR_TEXT_VERSION, vector_text
from .errors import BadInput, DatabaseBusy
from .extract.canonical import subject_key as canonical_subject
from .health import DEFAULT_LIMIT, HealthReport, run_checks
from .index.vectors import VectorIndex
from .ingest.model import ParsedDocument
from .ingest.pipeline import Ingestor, IngestReport
from .ingest.sources import SourceSet, collect_sources
from .llm import LLMClient, LLMConfig
from .profile import Profile, build_profile
from .reads import InspectorReads
from .records import Document, Fact
from .retrieve.pipeline import Recall, RecallResult, updated_by
from .retrieve.query import fts_query
from .retrieve.recipes import get_recipe
from .scope import Scope
from .store.browse import MEMORY_STATUSES as MEMORY_STATUSES  # the browser's filter, for browse_memories callers
from .store.browse import MemoryFilter as MemoryFilter
from .store.changes_probe import ChangeSignal as ChangeSignal  # what change_signal() returns
from .store.store import Store
from .timeutil import normalise_iso, now_iso

Progress = Callable[[float, str], None]
ShouldStop = Callable[[], bool]

REEMBED_BATCH = 256


def _packed_candidates(cands: list[Any]) -> str:
    """A trace's candidates as one JSON text (schema v8's candidate_rows), compact: every
    candidate's score components have the same names in the same order but for a few (the derived
    factor), so the names are written once and a row holds their values, or its own dict where
    they differ: repeated, the names were much of the text (engine.store.recall.RecallReads.trace
    reads this form and the plain array the first v8 code wrote)."""
    names = next((list(c.components) for c in cands if c.components), [])
    key = tuple(names)
    rows = [[c.memory_id, c.channels, list(c.components.values()) if tuple(c.components) == key else c.components,
             c.score, c.rank,
             *((c.dropped["stage"], c.dropped["reason"], c.dropped["detail"]) if c.dropped else (None, None, None)),
             c.tokens] for c in cands]
    return jsontext.dumps({"components": names, "rows": rows})


@dataclass(slots=True)
class TurnsAdded:
    """What add_turns() stored and what extraction made of it (ids are in the call's scope)."""

    document_id: int  # the chat document that holds the turns (one per call)
    memory_ids: list[int]  # the episodic memory of each stored turn, in order
    fact_ids: list[int] = field(default_factory=list)  # facts this call's extraction inserted
    fact_memory_ids: list[int] = field(default_factory=list)  # their memories (recall units)
    reinforced_fact_ids: list[int] = field(default_factory=list)  # existing facts the turns confirmed
    superseded_fact_ids: list[int] = field(default_factory=list)  # older facts a new one replaced
    skipped_messages: int = 0  # messages without text (e.g. assistant tool calls), not stored
    extraction: dict[str, Any] | None = None  # ExtractReport.as_dict(); None when extract="none"
    report: IngestReport | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"document_id": self.document_id, "memory_ids": self.memory_ids, "fact_ids": self.fact_ids,
                "fact_memory_ids": self.fact_memory_ids, "reinforced_fact_ids": self.reinforced_fact_ids,
                "superseded_fact_ids": self.superseded_fact_ids, "skipped_messages": self.skipped_messages,
                "extraction": self.extraction}


class MemoryEngine(InspectorReads):
    """Long-term memory over one SQLite file: the API for Python agents, the CLI and the inspector.

    Open it on a path (created when missing), pass a Scope to every call (whose memory: user,
    agent, and optionally a conversation/task/channel), and close it when done:

    - add_turns(messages, scope=...)                  store chat turns; extract and reconcile facts
    - ingest_documents(docs, scope=...)               the same for parsed documents (engine.ingest)
    - recall(query, scope=..., origin="agent")         ranked memories, cited context text, trace id;
                                                      "agent" reinforces what it returns and keeps
                                                      only a hash of the query
    - profile(scope)                                   what is known about the user, line by line
    - explain(query, memory_id, scope=..., persist=False)   why a memory was (not) recalled; changes
                                                      no memory (persist=False: stores no trace)
    - curator(scope, actor="agent").forget(id, reason=...)   soft forget, logged, undoable
    - show("memory" | "fact" | "document" | "chunk", id, scope=...)   one record with provenance
    - facts(scope), conflicts(scope), export(scope), trace(id, scope=...)
    - the inspector's read-only views (browse_memories, span_view, graph_facts, bench_runs, ...):
      engine/reads.py
    - close()

    Errors the caller can fix raise engine.errors.BadInput (nothing was written); every error
    the engine raises on purpose is an engine.errors.MemlensError. Thread-safe: see the module
    docstring.
    """

    def __init__(self, path: str | os.PathLike[str], *, embedder: Embedder | None = None,
                 llm: LLMClient | None | bool = True, create: bool = True, readonly: bool = False,
                 background_reembed: bool = True) -> None:
        """Open (or create) the database at path.

        embedder: None for $MEMLENS_EMBEDDER (the bundled local model by default; "hashing" is
        for tests), or an engine.embed Embedder. llm: a client, None/False for no model at all,
        or True to read the endpoint from the environment (MEMLENS_LLM_BASE_URL, ...); without
        one, extract="auto" means the offline heuristic extractor.
        """
        self.store = Store(path, create=create, readonly=readonly)
        self.path = self.store.path
        self._embedder = embedder
        self._llm_arg = llm
        self._llm: LLMClient | None = None
        self._llm_resolved = False
        self._llm_owned = False
        self._embedder_checked = False
        self._background_reembed = background_reembed and not readonly
        self._reembed_thread: threading.Thread | None = None
        self._reembed_stop = threading.Event()
        self._lock = threading.Lock()
        self._extract_lock = threading.Lock()  # one extraction run at a time (see the module docstring)
        self._indexes: dict[tuple[Scope, str], VectorIndex] = {}
        self._trace_dbs: dict[Path, MemoryEngine] = {}  # benchmark containers opened by trace_db()
        self._trace_dbs_lock = threading.Lock()

    # lifecycle --------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop background re-embedding, release the model client and every connection."""
        self._reembed_stop.set()
        thread = self._reembed_thread
        if thread is not None:
            thread.join()
        if self._llm is not None and self._llm_owned:
            self._llm.close()
        self._close_trace_dbs()
        self.store.close()

    @property
    def llm(self) -> LLMClient | None:
        """The configured OpenAI-compatible client, or None when no endpoint is set."""
        with self._lock:
            if not self._llm_resolved:
                self._llm_resolved = True
                if isinstance(self._llm_arg, LLMClient):
                    self._llm = self._llm_arg
                elif self._llm_arg is True:
                    config = LLMConfig.from_env()
                    if config is not None:
                        self._llm = LLMClient(config)
                        self._llm_owned = True
            return self._llm

    @staticmethod
    def check_endpoint(config: LLMConfig) -> dict[str, Any]:
        """One tiny call of each kind to the endpoint, through the real prompts (engine.llm_check);
        needs no database."""
        from .llm_check import check_endpoint

        return check_endpoint(config)

    def interrupt(self) -> None:
        """Stop the reads running on this engine in other threads (they raise apsw.InterruptError),
        so that a caller which has cancelled its work can close the engine soon; writes in progress
        finish (Database.interrupt). For an inspector switching to another database."""
        self.store.db.interrupt()
        for engine in list(self._trace_dbs.values()):
            engine.interrupt()

    def trace_db(self, path: str | os.PathLike[str] | None) -> MemoryEngine:
        """The engine of the file holding a benchmark question's trace: this one when `path` is
        None or this file, else the run's container DB, opened read-only once and closed with
        this engine (BadInput when it is missing or not a memlens database)."""
        if path is None or Path(path).resolve() == Path(self.path).resolve():
            return self
        key = Path(path).resolve()
        with self._trace_dbs_lock:
            engine = self._trace_dbs.get(key)
            if engine is None:
                engine = MemoryEngine(key, create=False, readonly=True, llm=False, background_reembed=False)
                self._trace_dbs[key] = engine
            return engine

    def _close_trace_dbs(self) -> None:
        with self._trace_dbs_lock:
            engines, self._trace_dbs = list(self._trace_dbs.values()), {}
        for engine in engines:
            engine.close()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
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
        stale = 0
        if recorded != json.dumps(current, sort_keys=True):
            self.store.set_meta("embedder", json.dumps(current, sort_keys=True))
            if recorded is not None:
                stale += self.store.mark_stale_embeddings(emb.provider, emb.model)
        # Old vectors of a changed text definition still work: without a background re-embed they
        # stay until something re-embeds (reembed_stale upgrades first).
        if self._background_reembed or not self.store.has_facts():
            stale += self._upgrade_vector_text()
        if stale and self._background_reembed:
            self._start_reembed()

    def _upgrade_vector_text(self) -> int:
        """Vectors written before a change of what memories are embedded from (VECTOR_TEXT_VERSION;
        version 1 embedded a fact's text alone, version 2 adds its evidence) become outdated:
        searchable until redone. Returns how many were marked."""
        if self.store.db.readonly or self.store.get_meta("vector_text") == str(VECTOR_TEXT_VERSION):
            return 0
        self.store.set_meta("vector_text", str(VECTOR_TEXT_VERSION))
        return self.store.mark_fact_embeddings_outdated()

    def _start_reembed(self) -> None:
        if self._reembed_thread is not None and self._reembed_thread.is_alive():
            return
        self._reembed_stop.clear()

        def work() -> None:
            lower_thread_priority()  # started from the caller's thread, e.g. the inspector's GUI thread
            self.reembed_stale(should_stop=self._reembed_stop.is_set)

        self._reembed_thread = threading.Thread(target=work, name="memlens-reembed", daemon=False)
        self._reembed_thread.start()

    @property
    def background_busy(self) -> bool:
        """Is a background re-embed still running?"""
        thread = self._reembed_thread
        return thread is not None and thread.is_alive()

    def wait_for_background(self) -> None:
        thread = self._reembed_thread
        if thread is not None:
            thread.join()

    def reembed_stale(self, *, progress: Progress | None = None, should_stop: ShouldStop | None = None) -> int:
        """Re-embed every stale vector with the current model, one batch per transaction."""
        emb = self._embedder if self._embedder is not None else self.embedder
        self._upgrade_vector_text()  # about to re-embed: outdated definitions are redone too
        done = 0
        for batch in self.store.stale_embedding_batches(REEMBED_BATCH):
            if should_stop and should_stop():
                break
            context = self.store.embedding_context([oid for _, otype, oid, _ in batch if otype == "memory"])
            texts = []
            for _, otype, oid, text in batch:  # the same text ingestion embedded (engine.ingest.pipeline)
                texts.append(vector_text(text, context.get(oid) if otype == "memory" else None))
            vectors = emb.embed(texts, kind="passage")
            by_scope: dict[tuple[Scope, str], list[Any]] = {}
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
    def ingest_documents(self, docs: Iterable[ParsedDocument], *, scope: Scope, extract: str = "none",
                         progress: Progress | None = None, should_stop: ShouldStop | None = None) -> IngestReport:
        """Store documents, then (unless extract="none") extract and reconcile facts from them.

        Extraction problems never fail ingestion: failed windows stay queued with their error
        and are retried by the next run (report.extraction says what happened).
        """
        return self._ingest(docs, scope=scope, extract=extract, progress=progress, should_stop=should_stop)[0]

    def _ingest(self, docs: Iterable[ParsedDocument], *, scope: Scope, extract: str,
                progress: Progress | None = None,
                should_stop: ShouldStop | None = None) -> tuple[IngestReport, ExtractReport | None]:
        t0 = time.perf_counter()
        extractor = Extractor(self.store, scope, self.embedder, mode=extract,
                              llm=self.llm if extract in ("auto", "llm") else None)
        report = Ingestor(self.store, scope, self.embedder).ingest(docs, progress=progress, should_stop=should_stop)
        if extractor.mode == "none":
            return report, None
        # Two concurrent runs would read the same pending windows and the same existing facts,
        # and each reconcile its candidates as if the other's did not exist (duplicate facts).
        t1 = time.perf_counter()
        with self._extract_lock:
            extractor.enqueue(report.document_ids)
            Curator(self.store, scope, actor="system").expire_due()
            ex = extractor.run(should_stop=should_stop)
        report.facts = ex.facts.inserted
        report.extraction = ex.as_dict()
        report.extract_seconds = time.perf_counter() - t1
        report.seconds = time.perf_counter() - t0  # the whole run, extraction included
        return report, ex

    def add_turns(self, messages: dict[str, Any] | Sequence[dict[str, Any]], *, scope: Scope,
                  extract: str = "auto", conversation: str | None = None, via: str = "python") -> TurnsAdded:
        """Store chat turns as one new chat document, then extract and reconcile facts from them.

        messages: one message or a list, each {"role", "content", "name"?, "timestamp"?} with
        role user | assistant | system | tool (the chat importer's aliases work too), content a
        string or OpenAI content parts, name the speaker (default: the role) and timestamp
        ISO-8601 or epoch seconds (default: now, since a live turn happens now). Messages with
        no text (an assistant message that only calls tools) are skipped and counted.
        conversation: a label kept as the document's title (default "agent turns"); every call
        makes its own document, so sending a conversation turn by turn keeps every turn.
        extract: "auto" (the LLM endpoint if configured, else heuristic), "llm", "heuristic"
        or "none". A failing extraction never fails the call: the turns are stored and the
        window stays queued with its error, retried by the next call (result.extraction says
        what happened). Bad messages raise BadInput before anything is written.
        """
        from .ingest.formats.chat import checked_role, content_text, parse_json
        from .ingest.limits import check_turn
        from .timeutil import to_utc_iso

        if isinstance(messages, dict):
            messages = [messages]
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
            raise BadInput("messages must be a message object or a non-empty list of them")
        now = now_iso()
        clean: list[dict[str, Any]] = []
        skipped = 0
        for i, msg in enumerate(messages):
            where = f"message {i}" if len(messages) > 1 else "the message"
            if not isinstance(msg, dict):
                raise BadInput(f"{where} is not an object with role and content")
            role = checked_role(msg.get("role"), where, required=True)
            name = msg.get("name")
            if name is not None and (not isinstance(name, str) or not name.strip()):
                raise BadInput(f"{where}: name must be a non-empty string")
            when = msg.get("timestamp", msg.get("created_at", msg.get("time")))
            if when is not None and to_utc_iso(when) is None:
                raise BadInput(f"{where}: timestamp {when!r} is not ISO-8601 or epoch seconds")
            text = content_text(msg.get("content"))
            check_turn(text, where)
            if not text.strip():
                skipped += 1
                continue
            clean.append({"role": role, "content": msg.get("content"),
                          **({"name": name.strip()} if name is not None else {}),
                          "timestamp": when if when is not None else now})
        if not clean:
            raise BadInput("nothing to store: no message has any text")
        # A fresh external id per call: an id that repeats would make this a new *version* of an
        # earlier document, and ingestion drops the turns a new version no longer contains.
        ext = f"turns-{uuid.uuid4().hex}"
        docs = parse_json({"id": ext, "title": conversation or "agent turns", "messages": clean}, name=via)
        for doc in docs:
            doc.meta.update({"via": via, "conversation": conversation})
        report, ex = self._ingest(docs, scope=scope, extract=extract)
        if not report.document_ids:  # cannot happen with a fresh id; a loud failure beats a silent one
            raise BadInput("the turns were not stored: " + "; ".join(report.errors or ["unknown reason"]))
        doc_id = report.document_ids[0]
        st = self.store
        memory_ids = [mid for ch in st.chunks_of(scope, doc_id) for mid in st.memories_of_chunk(scope, ch.id)
                      if (m := st.memory(scope, mid)) is not None and m.kind == "episode"]
        out = TurnsAdded(document_id=doc_id, memory_ids=memory_ids, skipped_messages=skipped, report=report,
                         extraction=report.extraction)
        if ex is not None:
            out.fact_ids = list(ex.facts.fact_ids)
            for fid in out.fact_ids:
                fact = st.fact_record(scope, fid)
                if fact is not None:
                    out.fact_memory_ids.append(fact.memory_id)
                    if fact.supersedes_fact_id:
                        out.superseded_fact_ids.append(fact.supersedes_fact_id)
            out.reinforced_fact_ids = sorted({d["fact_id"] for d in ex.facts.decisions
                                              if d.get("action") == "reinforce" and d.get("fact_id")})
        return out

    def ingest_paths(self, paths: Sequence[str | os.PathLike[str]], *, scope: Scope, fmt: str = "auto",
                     extract: str = "none", progress: Progress | None = None,
                     should_stop: ShouldStop | None = None) -> IngestReport:
        return self.ingest_sources(collect_sources(paths, fmt=fmt), scope=scope, extract=extract,
                                   progress=progress, should_stop=should_stop)

    def ingest_sources(self, sources: SourceSet, *, scope: Scope, extract: str = "none",
                       progress: Progress | None = None, should_stop: ShouldStop | None = None) -> IngestReport:
        """Ingest what collect_sources() parsed; report.files says, file by file, what became of it
        (ingested, unchanged, skipped or failed, with the reason)."""
        report = self.ingest_documents(sources.docs, scope=scope, extract=extract, progress=progress,
                                       should_stop=should_stop)
        sources.settle(report.written)
        report.files = [f.as_dict() for f in sources.files]
        report.skipped += sources.count("skipped")
        report.failed += sources.count("failed")
        report.errors += [f"{f.path}: {f.reason}" for f in sources.files if f.status == "failed"]
        return report

    # recall -----------------------------------------------------------------------------------
    def vectors(self, scope: Scope) -> VectorIndex:
        emb = self.embedder
        key = (scope, emb.model)
        with self._lock:
            index = self._indexes.get(key)
            if index is None:
                index = self._indexes[key] = VectorIndex(self.store, scope, emb.model, emb.dims)
        return index

    def recall(self, query: str, *, scope: Scope, k: int | None = None, as_of: str | None = None,
               recipe: str | None = None, origin: str = "operator", budget: int | None = None,
               now: str | None = None, persist: bool = True, query_vector: np.ndarray | None = None,
               **recipe_overrides: Any) -> RecallResult:
        """Run the traced recall pipeline.

        origin "operator" (a what-if from the CLI or the inspector) changes no memory; "agent"
        reinforces the usage of what it returns and stores only a hash of the query.
        k counts sources, not memories: a fact and the turn it was read from (or facts read from
        one turn) share a place when they rank next to each other, so results may hold more than
        k memories; trace.params["shared_places"] says which. query_vector: the query's embedding
        when the caller has it already (benchmarks that run one question under many recipes).
        recipe_overrides change Recipe fields; `off` names every feature off (the recipe's own
        list is replaced: pass `[*get_recipe(name).off, ...]` to add to it, as the CLI's --off
        does) and `on` takes features back from it (recipes.NOT_SHIPPED are off unless taken back).
        """
        if not query or not query.strip():
            raise BadInput("the query is empty")
        if origin not in ("operator", "agent", "bench"):
            raise BadInput(f"unknown origin {origin!r}")
        if k is not None and k < 1:
            raise BadInput("k must be at least 1")
        try:
            as_of_iso = normalise_iso(as_of) if as_of else None
        except ValueError:
            raise BadInput(f"--as-of {as_of!r} is not an ISO-8601 time") from None
        rec = get_recipe(recipe, **recipe_overrides)
        if now is None and origin != "bench":
            now = now_iso()  # expiry is judged against the wall clock; benchmarks bring their own "now"
        index = self.vectors(scope)
        llm = self.llm if (rec.planner or rec.reranker) else None
        # the planner's and reranker's requests are accounted for in llm_calls, without the
        # query's text when it is an agent's or a what-if's
        recorder = self.store.llm_recorder(scope, redact=origin == "agent" or not persist) if llm else None
        result = Recall(self.store, scope, self.embedder, index, rec, llm=llm, now=now, recorder=recorder).run(
            query, k=k, as_of=as_of_iso, origin=origin, budget=budget, query_vector=query_vector)
        if persist:
            try:
                self._persist_trace(scope, result, keep_query=origin != "agent")
            except DatabaseBusy as exc:
                # A recall is a read: the answer stands when its trace cannot be written (another
                # process held the write lock past the busy timeout); result.not_stored says so.
                result.not_stored = str(exc)
        return result

    def _persist_trace(self, scope: Scope, result: RecallResult, *, keep_query: bool) -> None:
        t = result.trace
        # every candidate in one JSON array (schema v8), in the order recall met them
        packed = _packed_candidates(list(t.candidates.values()))
        # A trace is not worth a disk sync per recall (Database.write); an agent's recall also counts
        # the usage of what it returned, which is data: that commit is synced as any other. It is
        # diagnostic all the same: the store puts the new counts into the rows it keeps
        # (Store.writer), so a real client's recalls keep the caches.
        with self.store.writer(scope, durable=t.origin == "agent", diagnostic=True) as w:
            t.id = w.insert_trace(origin=t.origin, query_text=t.query if keep_query else None, query_hash=t.query_hash,
                                  recipe=t.recipe, k=t.k, as_of=t.as_of, params=t.params | {"intent": t.intent},
                                  plan=t.plan, rerank=t.rerank, stages=t.stages, timings=t.timings,
                                  context_text=result.context_text, context_tokens=result.context_tokens,
                                  result_count=len(result.results), candidate_rows=packed)
            if result.parses:  # turns this recall parsed first: the next process reads them
                w.put_memory_clauses(result.parses)
            if t.origin == "agent":
                w.reinforce_usage([r["memory_id"] for r in result.results])

    def trace(self, trace_id: int, *, scope: Scope) -> dict[str, Any]:
        t = self.store.trace(scope, trace_id)
        if t is None:
            raise BadInput(f"no trace {trace_id} in this scope")
        cands = [{"memory_id": c.memory_id, "channels": c.channels, "components": c.components, "score": c.score,
                  "rank": c.rank, "tokens": c.tokens,
                  "dropped": None if not c.drop_reason else {
                      "stage": c.dropped_stage, "reason": c.drop_reason, "detail": c.drop_detail}}
                 for c in t.candidates]
        return {"id": t.id, "query": t.query_text, "query_hash": t.query_hash, "origin": t.origin,
                "recipe": t.recipe, "k": t.k, "as_of": t.as_of, "created_at": t.created_at,
                "params": t.params, "plan": t.plan, "rerank": t.rerank, "stages": t.stages,
                "timings_ms": t.timings, "context": {"text": t.context_text, "tokens": t.context_tokens},
                "candidates": cands}

    def explain(self, query: str, memory_id: int, *, scope: Scope, **kwargs: Any) -> dict[str, Any]:
        """Why was (or wasn't) this memory recalled for this query? Read-only (an operator what-if)."""
        mem = self.store.memory(scope, memory_id)
        if mem is None:
            raise BadInput(f"no memory {memory_id} in this scope")
        result = self.recall(query, scope=scope, origin="operator", **kwargs)
        cand = result.trace.candidates.get(memory_id)
        out: dict[str, Any] = {"trace_id": result.trace.id, "memory_id": memory_id, "text": mem.text}
        if cand is None:
            out["verdict"] = "never_candidate"
            out["detail"] = self._why_never(query, memory_id, scope, result)
        elif cand.rank is not None:
            out["verdict"] = "retrieved"
            out["detail"] = f"ranked {cand.rank} of {len(result.results)}"
            other = (result.trace.params.get("shared_places") or {}).get(str(memory_id))
            if other is not None:
                out["detail"] += (f", sharing its place in the top k with memory {other} "
                                  "(read from the same source chunk)")
        else:
            dropped = cand.dropped
            assert dropped is not None  # a candidate without a rank was dropped at some stage
            if dropped["reason"] == "below_cut":
                out["verdict"] = "below_cut"
                out["detail"] = dropped["detail"]
            else:
                out["verdict"] = "dropped"
                out["detail"] = f"dropped at stage {dropped['stage']} for reason {dropped['reason']}: " \
                                f"{dropped['detail']}"
        if cand is not None:
            out.update({"channels": cand.channels, "components": cand.components, "score": round(cand.score, 6),
                        "dropped": cand.dropped, "rank": cand.rank})
            # current truth: was it judged outdated (and by what), an aside, or history asked for?
            updated = updated_by(result.trace, memory_id)
            if updated:
                out["updated_by"] = updated
                out["detail"] += f"; outdated for this question ({updated['rule']}): {updated['label']} - " \
                                 f"{updated['reason']}"
            for key, what in (("asides", "kept below an earlier statement"), ("history_first", "led as history")):
                mark = (result.trace.params.get(key) or {}).get(str(memory_id))
                if mark:
                    out[key] = mark
                    out["detail"] += f"; {what} ({mark['rule']}): {mark['reason']}"
            restored = (result.trace.params.get("return_restores") or {}).get(str(memory_id))
            if restored:  # a stop, then a return to what it held
                out["restored"] = restored
                out["detail"] += f"; current again (return_restores): {restored}"
        if result.results:
            out["last_kept_score"] = result.results[-1]["score"]
        return out

    def _why_never(self, query: str, memory_id: int, scope: Scope, result: RecallResult) -> str:
        rec = get_recipe(result.trace.recipe)
        reasons = []
        emb = self.store.embedding_of(scope, "memory", memory_id)
        if emb is None or emb.stale == 1 or emb.model != self.embedder.model:
            reasons.append("it has no current vector for this model")
        else:
            q = self.embedder.embed([query], kind="query")[0]
            cos = float(np.dot(emb.vector, q))
            vec = result.trace.candidates
            kth = sorted((c.channels["vector"]["score"] for c in vec.values() if "vector" in c.channels), reverse=True)
            cut = kth[rec.vector_k - 1] if len(kth) >= rec.vector_k else None
            reasons.append(f"vector: cosine {cos:.3f}" + (f", below the {rec.vector_k}th best {cut:.3f}" if cut else ""))
        match = fts_query(query, self.store.fts_tokens)
        matches = bool(match) and self.store.fts_matches(scope, match, memory_id)
        reasons.append("full text: " + ("matches, but ranked beyond the channel's limit" if matches
                                         else "shares no content word with the query"))
        return "; ".join(reasons)

    # facts, profile, curation -----------------------------------------------------------------
    def facts(self, scope: Scope, *, subject: str | None = None, history: bool = False) -> list[dict[str, Any]]:
        statuses = None if history else ("active", "needs_review")
        key = canonical_subject(subject, speaker=None) if subject else None
        return [f.as_dict() for f in self.store.facts(scope, subject_key=key, statuses=statuses)]

    def profile(self, scope: Scope, *, budget: int = 400) -> Profile:
        return build_profile(self.store, scope, budget=budget)

    def conflicts(self, scope: Scope, *, status: str | None = "open") -> list[dict[str, Any]]:
        return [c.as_dict() for c in self.store.conflicts(scope, status=status)]

    def _document(self, scope: Scope, document_id: int) -> Document:
        """The document a chunk or source span points at (its foreign key keeps it)."""
        doc = self.store.document(scope, document_id)
        if doc is None:
            raise BadInput(f"no document {document_id} in this scope")
        return doc

    def curator(self, scope: Scope, *, actor: str = "operator") -> Curator:
        return Curator(self.store, scope, embedder=lambda: self.embedder, actor=actor)

    def expire_due(self, scope: Scope, now: str | None = None) -> CurationResult | None:
        return Curator(self.store, scope, actor="system").expire_due(now)

    # store health -----------------------------------------------------------------------------
    def health(self, scope: Scope, *, checks: list[str] | None = None, limit: int = DEFAULT_LIMIT, offset: int = 0,
               now: str | None = None, record: str | None = None, progress: Progress | None = None,
               should_stop: ShouldStop | None = None) -> HealthReport:
        """Run the store-health checks (engine.health) in this scope: each check's count and one page
        of items with their evidence and fixes. record="open" | "ingest" | "cli" ... keeps the counts
        of a complete, uncancelled run of every check for the trend (health_trend)."""
        report = run_checks(self.store, scope, checks=checks, limit=limit, offset=offset, now=now,
                            progress=progress, should_stop=should_stop)
        if record and not report.cancelled and checks is None and not self.store.db.readonly:
            with self.store.writer(scope) as w:
                report.recorded = w.record_health_counts(record, report.counts(), report.taken_at)
        return report

    def health_trend(self, scope: Scope, *, limit: int = 50) -> list[dict[str, Any]]:
        """The recorded health runs of this scope, oldest first: {id, taken_at, trigger, counts} (id:
        HealthReport.recorded of the run that was kept)."""
        return self.store.health_trend(scope, limit=limit)

    def rebuild_fts(self) -> None:
        """Rebuild the full-text indexes from their tables (the fix for fts_out_of_sync)."""
        self.store.rebuild_fts()

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
            doc = self._document(scope, ch.document_id)
            return {
                "chunk": ch.as_dict(),
                "document": {"id": doc.id, "title": doc.title, "uri": doc.uri, "source_type": doc.source_type},
                "span_text": doc.text[ch.start:ch.end],
                "memory_ids": st.memories_of_chunk(scope, record_id),
                "times": self._times(scope, ch.id, ch.start),
            }
        if kind == "memory":
            mem = st.memory(scope, record_id)
            if mem is None:
                raise BadInput(f"no memory {record_id} in this scope")
            sources = []
            document = functools.cache(functools.partial(self._document, scope))
            for src in st.sources_of(scope, record_id):  # many sources may share one (long) document
                doc = document(src.document_id)
                chunk = st.chunk(scope, src.chunk_id) if src.chunk_id is not None else None
                times = self._times(scope, chunk.id, chunk.start) if chunk is not None else []
                sources.append({
                    **src.as_dict(),
                    "document_title": doc.title, "document_uri": doc.uri, "source_type": doc.source_type,
                    "text": doc.text[src.start:src.end],
                    # times named inside this span, with the dates they were resolved to
                    "times": [t for t in times if src.start <= t["start"] and t["end"] <= src.end],
                })
            emb = st.embedding_of(scope, "memory", record_id)
            return {"memory": mem.as_dict(), "sources": sources, "entities": st.mentions_of(scope, record_id),
                    "embedding": emb.about() if emb is not None else None}
        if kind == "fact":
            return self._show_fact(record_id, scope)
        raise BadInput(f"unknown kind {kind!r} (memory, fact, document or chunk)")

    def _times(self, scope: Scope, chunk_id: int, chunk_start: int) -> list[dict[str, Any]]:
        """The times a chunk names, with document offsets ({"start", "end", "text", "kind",
        "window_start", "window_end"})."""
        return [t | {"start": chunk_start + t["start"], "end": chunk_start + t["end"]}
                for t in self.store.chunk_times(scope, [chunk_id]).get(chunk_id, [])]

    def _show_fact(self, fact_id: int, scope: Scope) -> dict[str, Any]:
        st = self.store
        fact = st.fact_record(scope, fact_id)
        if fact is None:
            raise BadInput(f"no fact {fact_id} in this scope")
        # The version chain: walk supersedes_fact_id back, and the facts that supersede forward.
        chain_back, seen = [], {fact_id}
        cur = fact
        while cur.supersedes_fact_id and cur.supersedes_fact_id not in seen:
            prev = st.fact_record(scope, cur.supersedes_fact_id)
            if prev is None:
                break
            seen.add(prev.id)
            chain_back.append(prev)
            cur = prev
        forward, cur = [], fact
        by_prev = {f.supersedes_fact_id: f for f in st.facts(scope) if f.supersedes_fact_id}
        while cur.id in by_prev and by_prev[cur.id].id not in seen:
            cur = by_prev[cur.id]
            seen.add(cur.id)
            forward.append(cur)
        versions = list(reversed(chain_back)) + [fact] + forward

        def brief(f: Fact) -> dict[str, Any]:
            return {"id": f.id, "object": f.object, "status": f.status, "valid_from": f.valid_from,
                    "valid_to": f.valid_to, "learned_at": f.learned_at, "invalidated_at": f.invalidated_at,
                    "confidence": f.confidence, "rule": f.rule, "reason": f.reason}

        evidence = []
        document = functools.cache(functools.partial(self._document, scope))
        for src in st.sources_of(scope, fact.memory_id):  # a fact confirmed 1,000 times has 1,000
            doc = document(src.document_id)
            evidence.append({**src.as_dict(), "document_title": doc.title, "source_type": doc.source_type,
                             "trust": doc.trust, "retracted": bool(doc.retracted_at),
                             "text": doc.text[src.start:src.end]})
        relations = st.relations_of(scope, fact.memory_id)
        conflicts = [c.as_dict() for c in st.conflicts(scope, status=None) if fact_id in (c.fact_a_id, c.fact_b_id)]
        retired_by = forward[0] if forward else None
        return {
            "fact": fact.as_dict(), "versions": [brief(v) for v in versions], "relations": [r.as_dict() for r in relations],
            "evidence": evidence, "conflicts": conflicts,
            "created_by": {"rule": fact.rule, "reason": fact.reason, "method": fact.extraction_method,
                           "model": fact.extractor_model, "prompt_version": fact.prompt_version},
            "retired_by": None if retired_by is None else {"fact_id": retired_by.id, "rule": retired_by.rule,
                                                           "reason": retired_by.reason},
        }


def parse_sources(paths: Sequence[str | os.PathLike[str]], *, fmt: str = "auto") -> list[ParsedDocument]:
    """Parse every path (directories are walked) before anything is written; a file that fails
    refuses the whole set (MemoryEngine.ingest_sources reports failures file by file instead)."""
    sources = collect_sources(paths, fmt=fmt)
    failed = [f for f in sources.files if f.status == "failed"]
    if failed:
        raise BadInput(f"{failed[0].path}: {failed[0].reason}")
    return sources.docs
