"""Running extraction over stored documents: turn windows, a durable queue, LLM or heuristic.

It sits above extract/ (pure rules: heuristic, canonical keys, grounding) and hands every
window's candidates to consolidate(), so it lives beside it here rather than in extract/.

Windows are enqueued in the same run that ingests their document and processed afterwards;
a window whose model call fails (timeout, HTTP error, malformed JSON) stays in the queue with
its error and is retried on the next run, so a flaky endpoint never blocks ingestion and
never silently loses a window. One model call per window (which the client may have to send
more than once: a refused structured-output mode, a truncated answer). An error every later
window would repeat (unknown model, refused key, unreachable endpoint) stops the run at the
first window: the rest stay queued, untouched, and the report says why in one line.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..embed.base import Embedder
from ..errors import BadInput, Cancelled
from ..extract import heuristic
from ..extract.model import Candidate, SourceChunk
from ..llm import FATAL_ERRORS, LLMClient, LLMConfig, describe_failure
from ..prompts import extract_v2
from ..records import Chunk, Document, ExtractionWindow, Fact
from ..scope import Scope
from ..store.store import Store, Writer
from . import ConsolidationReport, consolidate, withdraw_taken_back

WINDOW_TURNS = 8  # turns per model call
WINDOW_CHARS = 6000  # and no more text than this
MAX_ATTEMPTS = 5
MARK_BATCH = 64  # windows without facts marked done per transaction
MODES = ("none", "auto", "heuristic", "llm")


@dataclass(slots=True)
class ExtractReport:
    windows: int = 0
    failed_windows: int = 0
    llm_calls: int = 0
    facts: ConsolidationReport = field(default_factory=ConsolidationReport)
    errors: list[str] = field(default_factory=list)
    stopped: str | None = None  # why the run stopped before the last window (a fatal endpoint error)

    def as_dict(self) -> dict[str, Any]:
        f = self.facts
        return {"windows": self.windows, "failed_windows": self.failed_windows, "llm_calls": self.llm_calls,
                "facts_inserted": f.inserted, "facts_reinforced": f.reinforced, "facts_superseded": f.superseded,
                "conflicts": f.conflicts, "reviews": f.reviews, "candidates_skipped": f.skipped,
                "evidence_unverified": f.unverified, "errors": self.errors[:20], "stopped": self.stopped}


def windows(chunks: list[Chunk]) -> list[tuple[int, int]]:
    """Consecutive chunk ordinals grouped into windows of at most WINDOW_TURNS / WINDOW_CHARS."""
    out: list[tuple[int, int]] = []
    start: int | None = None
    size = 0
    count = 0
    last = 0  # set with start
    for ch in chunks:
        if ch.kind == "heading":
            continue
        length = ch.end - ch.start
        if start is not None and (count >= WINDOW_TURNS or size + length > WINDOW_CHARS):
            out.append((start, last))
            start, size, count = None, 0, 0
        if start is None:
            start = ch.ordinal
        size += length
        count += 1
        last = ch.ordinal
    if start is not None:
        out.append((start, last))
    return out


def _finish_window(window_id: int, w: Writer) -> None:
    """consolidate's `then`: the window is done in the transaction that stored its facts."""
    w.finish_window(window_id, ok=True, error=None)


def resolve_mode(mode: str, llm: LLMClient | LLMConfig | None) -> str:
    """The extraction mode `mode` names, given whether an endpoint is configured (a client or its
    config); BadInput for an unknown mode, or "llm" without an endpoint."""
    if mode not in MODES:
        raise BadInput(f"--extract must be one of {', '.join(MODES)}")
    if mode == "auto":
        return "llm" if llm is not None else "heuristic"
    if mode == "llm" and llm is None:
        raise BadInput("--extract llm needs an endpoint: set MEMLENS_LLM_BASE_URL (and a model)")
    return mode


class Extractor:
    def __init__(self, store: Store, scope: Scope, embedder: Embedder, *, mode: str,
                 llm: LLMClient | None = None) -> None:
        self.store = store
        self.scope = scope
        self.embedder = embedder
        self.mode = resolve_mode(mode, llm)
        self.llm = llm

    def enqueue(self, document_ids: list[int]) -> int:
        if self.mode == "none":
            return 0
        n = 0
        with self.store.writer(self.scope) as w:
            for doc_id in document_ids:
                for first, last in windows(self.store.chunks_of(self.scope, doc_id)):
                    n += w.enqueue_window(doc_id, first, last)
        return n

    def _speaker_facts(self, subject_key: str) -> list[Fact]:
        """A speaker's current facts and those they superseded (heuristic.taken_back_earlier)."""
        return self.store.facts(self.scope, subject_key=subject_key, statuses=("active", "needs_review", "superseded"))

    def _views(self, window: ExtractionWindow, documents: dict[int, Document | None]) -> list[SourceChunk]:
        # One read per document and run: reading it (its whole text) for each of its windows made
        # a long file's extraction quadratic (10 MB of text: 3,600 windows, 36 GB copied).
        doc_id = window.document_id
        if doc_id not in documents:
            documents.clear()  # windows come document by document: keep one text in memory
            documents[doc_id] = self.store.document(self.scope, doc_id)
        doc = documents[doc_id]
        if doc is None or doc.retracted_at or doc.replaced_at:
            return []
        return [SourceChunk(chunk_id=c.id, document_id=doc.id, text=c.text, start=c.start, end=c.end,
                            speaker=c.speaker, role=c.role, trust=c.trust, source_time=c.source_time,
                            source_type=doc.source_type)
                for c in self.store.chunks_between(self.scope, doc.id, window.first_ordinal, window.last_ordinal)
                if c.kind != "heading"]

    def run(self, *, progress: Callable[[float, str], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> ExtractReport:
        report = ExtractReport()
        if self.mode == "none":
            return report
        pending = self.store.pending_windows(self.scope, max_attempts=MAX_ATTEMPTS)
        # Windows that yield nothing are marked done together (a commit costs a disk flush, and one
        # per window made a long document's extraction mostly waiting); a window with facts is
        # marked in the transaction that stores them.
        unmarked: list[tuple[int, str | None]] = []
        documents: dict[int, Document | None] = {}

        def mark() -> None:
            if unmarked:
                with self.store.writer(self.scope) as w:
                    for window_id, err in unmarked:
                        w.finish_window(window_id, ok=err is None, error=err)
                unmarked.clear()

        try:
            for i, window in enumerate(pending):
                if should_stop is not None and should_stop():
                    raise Cancelled("extraction cancelled")
                views = self._views(window, documents)
                error = fatal = None
                pairs = []
                if views:
                    if self.mode == "heuristic":
                        pairs = [(ch, cand) for ch in views for cand in heuristic.extract(ch)]
                        given = {ch.chunk_id for ch, _ in pairs}
                        pairs, withdrawn = heuristic.taken_back(pairs, views)
                        report.facts.skipped += len(withdrawn)
                        report.facts.decisions += [{"action": "skip", "rule": "taken_back", "reason": r}
                                                   for r in withdrawn]
                        # a take-back of what an earlier conversation told withdraws its stored fact
                        earlier = heuristic.taken_back_earlier(views, self._speaker_facts, given=given)
                        if earlier:
                            report.facts.merge(withdraw_taken_back(self.store, self.scope, earlier,
                                                                   note=f"window {window.id} (heuristic)"))
                    else:
                        pairs, error, fatal = self._llm(views, report)
                if error is None and pairs:
                    mark()
                    facts = consolidate(self.store, self.scope, self.embedder, pairs,
                                        note=f"window {window.id} ({self.mode})",
                                        then=functools.partial(_finish_window, window.id))
                    report.facts.merge(facts)
                else:
                    unmarked.append((window.id, error))
                    if len(unmarked) >= MARK_BATCH:
                        mark()
                report.windows += 1
                if error is not None:
                    report.failed_windows += 1
                    report.errors.append(f"window {window.id}: {error}")
                if progress is not None:
                    progress((i + 1) / len(pending), f"extracted window {i + 1}/{len(pending)}")
                if fatal:
                    report.stopped = f"extraction stopped, {len(pending) - i - 1} windows left queued: {error}"
                    break
        except BaseException:
            with contextlib.suppress(Exception):
                mark()  # what was read stays read, also when stopped
            raise
        mark()
        return report

    def _llm(self, views: list[SourceChunk], report: ExtractReport
             ) -> tuple[list[tuple[SourceChunk, Candidate]], str | None, bool]:
        """-> (pairs, error line or None, whether the error is fatal to the run)"""
        assert self.llm is not None
        result = self.llm.complete_json(extract_v2.TASK, extract_v2.build_messages(views), extract_v2.SCHEMA_NAME,
                                        extract_v2.SCHEMA, recorder=self.store.llm_recorder(self.scope))
        report.llm_calls += 1
        if not result.ok:
            return [], describe_failure(result.error, result.detail), result.error in FATAL_ERRORS
        return extract_v2.parse(result.data or {}, views, model=result.model), None, False
