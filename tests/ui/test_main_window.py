"""The window opens a DB and reports foreign files in place; PySide6 survives many emits.

(The whole shell is covered by test_shell.py.)"""

from __future__ import annotations

import os
import sys

import pytest
from PySide6.QtCore import QObject, QSettings, Signal

from engine.embed.hashing import HashingEmbedder
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.memory import MemoryEngine
from engine.scope import Scope
from ui.main_window import MainWindow, register_fonts
from ui.tasks import InlineRunner

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")


def _window(qtbot, tmp_path) -> MainWindow:
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)  # never the user's
    win = MainWindow(settings=settings, runner=InlineRunner())
    qtbot.addWidget(win)
    return win


def test_window_summarises_the_database(qtbot, tmp_path):
    path = tmp_path / "m.db"
    with MemoryEngine(path, embedder=HashingEmbedder()) as eng:
        doc = ParsedDocument(text="Ana: hello there", source_type="chat", trust="user", uri="x", external_id="1",
                             chunks=[ParsedChunk(0, 16, "message", speaker="Ana")])
        eng.ingest_documents([doc], scope=Scope.default("ana", "bot"))
    win = _window(qtbot, tmp_path)
    assert win.open_database(path)
    assert win.scope_combo.currentText().startswith("ana / bot")
    assert win.counts_label.text().startswith("1 memories")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
def test_window_says_once_when_others_can_read_the_database(qtbot, tmp_path):
    path = tmp_path / "m.db"
    with MemoryEngine(path, embedder=HashingEmbedder()) as eng:
        eng.add_turns([{"role": "user", "content": "I live in Porto."}], scope=Scope.default("ana", "bot"))
    win = _window(qtbot, tmp_path)
    assert win.open_database(path)
    assert win.statusBar().currentMessage() == ""  # created 0600: nothing to say
    os.chmod(path, 0o644)
    assert win.open_database(path)
    message = win.statusBar().currentMessage()
    assert message.startswith("Warning: m.db can be read by everyone on this machine (mode 0644)")
    assert "chmod 600" in message
    win.refresh_status()  # refreshing the counts does not repeat it
    win.statusBar().clearMessage()
    win.refresh_status()
    assert win.statusBar().currentMessage() == ""


def test_window_explains_a_foreign_file(qtbot, tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("just some text, not a database " * 20)
    win = _window(qtbot, tmp_path)
    assert not win.open_database(path)
    assert "not a memlens database" in win.banner.text
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
