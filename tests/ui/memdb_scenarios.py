"""Small memlens databases for the graph, timeline, trace and benchmark pane tests, built only
through engine APIs (ingest + consolidate with explicit candidates, recall, record_bench_run)."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from engine.consolidate import consolidate
from engine.embed.hashing import HashingEmbedder
from engine.extract.model import Candidate, SourceChunk
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.memory import MemoryEngine
from engine.scope import Scope

ANA = Scope.default("ana", "bot")
BOB = Scope.default("bob", "bot")
EMB = HashingEmbedder(64)

# (day, speaker line, subject, predicate, object, trust, category, confidence)
STATEMENTS = [
    (1, "I live in Berlin.", "Ana", "lives_in", "Berlin", "user", "location", 0.7),
    (2, "I work at Siemens.", "Ana", "works_at", "Siemens", "user", "work", 0.7),
    (3, "I like jazz.", "Ana", "likes", "jazz", "user", "preference", 0.6),
    (4, "I moved to Munich.", "Ana", "lives_in", "Munich", "user", "location", 0.8),
    (5, "Tom works at Siemens too.", "Tom", "works_at", "Siemens", "external", "work", 0.6),
    (6, "I have a dog named Rex.", "Ana", "has_pet", "Rex", "user", "pet", 0.7),
    (7, "Actually I live in Hamburg now.", "Ana", "lives_in", "Hamburg", "user", "location", 0.9),
]


def seed_scope(engine: MemoryEngine, scope: Scope, statements=STATEMENTS) -> None:
    for day, line, subj, pred, obj, trust, cat, conf in statements:
        text = f"{subj}: {line}"
        when = f"2024-01-{day:02d}T09:00:00Z"
        doc = ParsedDocument(text=text, source_type="chat", trust=trust, uri="chat", external_id=f"d{day}",
                             source_time=when,
                             chunks=[ParsedChunk(0, len(text), "message", speaker=subj, role="user",
                                                 message_id=f"D1:{day}", source_time=when)])
        report = engine.ingest_documents([doc], scope=scope)
        did = report.document_ids[0]
        ch = engine.store.chunks_of(scope, did)[0]
        view = SourceChunk(ch.id, did, ch.text, ch.start, ch.end, subj, "user", trust, ch.source_time)
        cand = Candidate(text=f"{subj} {pred.replace('_', ' ')} {obj}.", subject=subj, predicate=pred, object=obj,
                         evidence=obj, confidence=conf, category=cat, trust=trust)
        consolidate(engine.store, scope, EMB, [(view, cand)])


def build(path: Path, *, recalls: tuple[str, ...] = ("Where does Ana live?", "Where does Ana work?")) -> Path:
    with MemoryEngine(path, embedder=EMB, llm=False) as engine:
        seed_scope(engine, ANA)
        seed_scope(engine, BOB, STATEMENTS[:3])
        for q in recalls:
            engine.recall(q, scope=ANA, origin="operator", k=5)  # five places: some candidates fall below the cut
    return path


def open_engine(path: Path) -> MemoryEngine:
    return MemoryEngine(path, embedder=EMB, llm=False, background_reembed=False)


@contextlib.contextmanager
def engine_copy(template, tmp_path):
    """A private copy of a module-scoped seed DB, opened; closed afterwards."""
    path = tmp_path / "m.db"
    shutil.copy(template, path)
    eng = open_engine(path)
    try:
        yield eng
    finally:
        eng.close()


@contextlib.contextmanager
def mounted(qtbot, engine, pane_cls, size, scope=None):
    """A pane of pane_cls on `engine` (inline runner), shut down and detached afterwards."""
    from ui.context import AppContext
    from ui.tasks import InlineRunner

    pane = pane_cls()
    qtbot.addWidget(pane)
    pane.resize(*size)
    pane.set_context(AppContext(engine=engine, scope=scope or ANA, runner=InlineRunner()))
    try:
        yield pane
    finally:
        pane.shutdown()
        pane.set_context(None)
