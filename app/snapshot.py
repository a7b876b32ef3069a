"""`memlens snapshot`: every inspector pane rendered offscreen to PNG, over a real database.

Also builds the small, real memory database the snapshot (and the UI tests) use when none is
given, through the engine's public APIs: a chat over four days whose facts supersede each other
and disagree (one open conflict, one fact held for review), plus whatever extra sources the caller
passes (email, Markdown, code, LoCoMo ...) ingested with the offline heuristic extractor. Every
fact is grounded in a real chunk span.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from engine.consolidate import consolidate
from engine.embed.base import Embedder
from engine.embed.hashing import HashingEmbedder
from engine.extract.model import Candidate, SourceChunk
from engine.files import make_private, private_dir
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.memory import MemoryEngine
from engine.scope import Scope

SAMPLE_SCOPE = Scope.default("ana", "assistant")

# (day, speaker, role, line, [(predicate, object, evidence, confidence, category, relation)])
_CHAT = [
    (1, "Ana", "user", "Hi! I live in Berlin and I work at Siemens as a nurse.",
     [("lives_in", "Berlin", "I live in Berlin", 0.7, "location", "new"),
      ("works_at", "Siemens", "I work at Siemens", 0.9, "work", "new"),
      ("has_role", "nurse", "as a nurse", 0.9, "work", "new")]),
    (1, "Assistant", "assistant", "Nice to meet you, Ana. How is Berlin treating you?", []),
    (2, "Ana", "user", "Big news: I moved to Munich last week. The flat is near the river.",
     [("lives_in", "Munich", "I moved to Munich", 0.85, "location", "updates")]),
    (2, "Assistant", "assistant", "Congratulations on the move! Munich is lovely in spring.", []),
    (3, "Ana", "user", "These days I teach biology; I'm a teacher at a school in Munich.",
     [("has_role", "teacher", "I'm a teacher", 0.9, "work", "new")]),
    (3, "Assistant", "assistant", "That is quite a change from nursing.", []),
    (4, "Ana", "user", "On weekends I like jazz and hiking in the Alps. I'm planning a trip to Lisbon in June.",
     [("likes", "jazz", "I like jazz", 0.8, "preference", "new"),
      ("likes", "hiking", "hiking in the Alps", 0.8, "preference", "new"),
      ("plans_to", "visit Lisbon in June", "I'm planning a trip to Lisbon in June", 0.7, "plan", "new")]),
    (4, "Ana", "user", "My bank PIN changed last month, and I take insulin for my diabetes.",
     [("has_condition", "diabetes", "I take insulin for my diabetes", 0.6, "health", "new")]),
]


def _chat_document() -> tuple[ParsedDocument, list[list[tuple]]]:
    parts: list[str] = []
    chunks: list[ParsedChunk] = []
    facts: list[list[tuple]] = []
    pos = 0
    for i, (day, speaker, role, line, cands) in enumerate(_CHAT):
        text = f"{speaker}: {line}"
        when = f"2024-03-{day:02d}T{9 + i:02d}:00:00Z"
        chunks.append(ParsedChunk(pos, pos + len(text), "message", speaker=speaker, role=role,
                                  message_id=f"m{i + 1}", source_time=when,
                                  trust="user" if role == "user" else "assistant"))
        parts.append(text)
        facts.append(cands)
        pos += len(text) + 1
    doc = ParsedDocument(text="\n".join(parts), source_type="chat", trust="user", uri="sample://chat/ana",
                         title="Chat with Ana (March 2024)", source_time="2024-03-01T09:00:00Z",
                         external_id="ana-march", chunks=chunks)
    return doc, facts


def seed_chat(engine: MemoryEngine, scope: Scope, embedder: Embedder) -> None:
    """The chat, then its facts through consolidation (supersession, a conflict, a review)."""
    doc, facts = _chat_document()
    report = engine.ingest_documents([doc], scope=scope)
    document_id = report.document_ids[0]
    stored = engine.store.chunks_of(scope, document_id)
    for chunk, cands in zip(stored, facts):
        if not cands:
            continue
        view = SourceChunk(chunk.id, document_id, chunk.text, chunk.start, chunk.end, chunk.speaker, chunk.role,
                           chunk.trust, chunk.source_time)
        batch = []
        for predicate, obj, evidence, confidence, category, relation in cands:
            batch.append((view, Candidate(
                text=f"Ana {predicate.replace('_', ' ')} {obj}.", subject="Ana", predicate=predicate, object=obj,
                evidence=evidence, confidence=confidence, category=category, relation=relation,
                importance=0.8 if category in ("work", "location", "health") else 0.5,
                is_static=category in ("work", "location"))))
        consolidate(engine.store, scope, embedder, batch)


def build_sample_db(path: str | os.PathLike[str], *, extra_sources: Sequence[str | os.PathLike[str]] = (),
                    embedder: Embedder | None = None, scope: Scope = SAMPLE_SCOPE,
                    extract: str = "heuristic") -> Path:
    """Create (or extend) a memlens database at `path` with the sample chat and `extra_sources`."""
    embedder = embedder or HashingEmbedder()
    path = Path(path)
    with MemoryEngine(path, embedder=embedder, llm=None) as engine:
        seed_chat(engine, scope, embedder)
        if extra_sources:
            engine.ingest_paths(list(extra_sources), scope=scope, extract=extract)
        engine.wait_for_background()
    return path


SAMPLE_QUERIES = ("Where does Ana live now?", "What is Ana's job?")


def add_sample_traces(path: str | os.PathLike[str], *, embedder: Embedder | None = None, scope: Scope = SAMPLE_SCOPE,
                      queries: Sequence[str] = SAMPLE_QUERIES) -> list[int]:
    """Run operator recalls (what-ifs: no memory changes) so the traces pane has something to show."""
    with MemoryEngine(path, embedder=embedder or HashingEmbedder(), llm=None) as engine:
        ids = [engine.recall(q, scope=scope, origin="operator", recipe="offline").trace.id for q in queries]
    return [i for i in ids if i is not None]  # every operator recall records its trace


# snapshots ----------------------------------------------------------------------------------------------
_OFFSCREEN_NOISE = ("This plugin does not support",)  # the offscreen platform's "no native windows" notes


def _quiet_offscreen_messages() -> None:
    from PySide6.QtCore import qInstallMessageHandler

    def handler(mode, context, message: str) -> None:
        if not message.startswith(_OFFSCREEN_NOISE):
            sys.stderr.write(message + "\n")

    qInstallMessageHandler(handler)


def stage_selection(window) -> dict[str, int]:
    """Make a selection that gives every pane something to show; returns what was selected."""
    ctx = window.ctx
    if ctx is None:
        return {}
    store, scope, bus = ctx.engine.store, ctx.scope, ctx.bus
    chosen: dict[str, int] = {}
    traces = store.traces(scope, limit=1)
    if traces:
        chosen["trace"] = traces[0]["id"]
        bus.select("trace", traces[0]["id"], source="snapshot")
    conflicts = store.conflicts(scope, status="open")
    if conflicts:
        chosen["conflict"] = conflicts[0].id
        bus.select("conflict", conflicts[0].id, source="snapshot")
    facts = store.facts(scope)
    with_history = [f for f in facts if f.supersedes_fact_id and f.status == "active"]
    fact = (with_history or [f for f in facts if f.status == "active"] or facts or [None])[0]
    if fact is not None:
        chosen["memory"], chosen["fact"] = fact.memory_id, fact.id
        bus.select("memory", fact.memory_id, source="snapshot")
        bus.select("fact", fact.id, source="snapshot")
    if fact is None or not store.sources_of(scope, fact.memory_id):
        # The source pane follows the last selection: give it a memory that has a source span
        # (an import's facts may have none, its episodes do).
        page = store.browse_memories(scope, limit=50)
        sourced = [m for m in page if store.sources_of(scope, m["id"])] or page
        if sourced:
            chosen["memory"] = sourced[0]["id"]
            bus.select("memory", sourced[0]["id"], source="snapshot")
    return chosen


SETTLE_MS = 150  # longer than the panes' debounce timers (the graph lays out its labels 120 ms after a zoom)


def _settle(app, window) -> None:
    from PySide6.QtCore import QEventLoop, QTimer

    for _ in range(3):
        app.processEvents()
        window.runner.wait()
    loop = QEventLoop()
    QTimer.singleShot(SETTLE_MS, loop.quit)
    loop.exec()
    app.processEvents()


def snapshot(out_dir: str | os.PathLike[str], db_path: str | os.PathLike[str] | None = None,
             size: tuple[int, int] = (1280, 800), test_connection: bool = False) -> list[Path]:
    """Render the whole window and every registered pane offscreen to PNG files named after the pane keys.

    Without `db_path`, a sample database is built in a temporary directory. The user's settings are
    never read or written (a throwaway INI file is used), and the database is opened as-is.
    test_connection presses the Settings pane's "Test connection" first (the endpoint comes from
    the environment, since the throwaway settings hold none).
    """
    import tempfile

    created_app = False
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        app = QApplication([sys.argv[0] if sys.argv else "memlens"])
        created_app = True
        _quiet_offscreen_messages()
    from PySide6.QtCore import QSettings

    from engine.errors import BadInput
    from ui.main_window import MainWindow
    from ui.panes.settings import SettingsPane
    from ui.tasks import InlineRunner
    from ui.theme import register_fonts

    register_fonts()
    out = private_dir(out_dir)  # the panes show memories: private like every file memlens writes
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="memlens-snapshot-") as tmp:
        settings = QSettings(str(Path(tmp) / "snapshot.ini"), QSettings.Format.IniFormat)
        if db_path is None:
            db_path = build_sample_db(Path(tmp) / "sample.db")
            add_sample_traces(db_path)
            settings.setValue("settings/embedder", "hashing")  # the sample was embedded with it
        elif not Path(db_path).exists():
            raise BadInput(f"{db_path}: no such database")
        window = MainWindow(settings=settings, runner=InlineRunner())
        try:
            window.resize(*size)
            window.show()
            if not window.open_database(Path(db_path)):
                raise BadInput(f"{db_path}: {window.banner.text}")
            _settle(app, window)
            stage_selection(window)
            if test_connection:
                cast(SettingsPane, window.panes["settings"]).run_test()  # the inline runner: done when it returns
            _settle(app, window)
            path = out / "window.png"
            window.grab().save(str(path))
            make_private(path)
            written.append(path)
            state = window.saveState()
            for key, dock in window.docks.items():
                for other in window.docks.values():
                    if other is not dock:
                        other.hide()
                dock.show()
                dock.raise_()
                _settle(app, window)
                path = out / f"{key}.png"
                window.panes[key].grab().save(str(path))
                make_private(path)
                written.append(path)
            window.restoreState(state)
        finally:
            window.close()
            window.deleteLater()
            app.processEvents()
    if created_app:
        app.processEvents()
    return written
