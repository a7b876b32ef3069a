"""The minimal window opens a DB and reports foreign files in place; PySide6 survives many emits."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from engine.embed.hashing import HashingEmbedder
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.memory import MemoryEngine
from engine.scope import Scope
from ui.main_window import MainWindow, register_fonts


def test_window_summarises_the_database(qtbot, tmp_path):
    path = tmp_path / "m.db"
    with MemoryEngine(path, embedder=HashingEmbedder()) as eng:
        doc = ParsedDocument(text="Ana: hello there", source_type="chat", trust="user", uri="x", external_id="1",
                             chunks=[ParsedChunk(0, 16, "message", speaker="Ana")])
        eng.ingest_documents([doc], scope=Scope.default("ana", "bot"))
    win = MainWindow()
    qtbot.addWidget(win)
    assert win.open_database(path)
    text = win.summary.text()
    assert "ana / bot" in text and "1 memories" in text


def test_window_explains_a_foreign_file(qtbot, tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("just some text, not a database " * 20)
    win = MainWindow()
    qtbot.addWidget(win)
    assert not win.open_database(path)
    assert "not a memlens database" in win.summary.text()
    assert path.read_text().startswith("just some text")


def test_bundled_font_registers(qtbot):
    families = register_fonts()
    assert "DejaVu Sans" in families


class _Emitter(QObject):
    sigTick = Signal(bool)


def test_many_signal_emits_do_not_abort(qtbot):
    """PySide6 6.12.0 aborts Python 3.11 after ~1000 emits (STYLE.md); we pin <6.12 and prove it."""
    received = []
    em = _Emitter()
    em.sigTick.connect(lambda v: received.append(v))
    for i in range(20000):
        em.sigTick.emit(i % 2 == 0)
    assert len(received) == 20000 and received[0] is True
