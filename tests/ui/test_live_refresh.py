"""Live refresh: another process's writes appear in the open inspector within a second, the
operator keeps their selection and scroll position, and a status-bar indicator says what came."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest
from PySide6.QtCore import QItemSelectionModel, QSettings, Qt

from engine.embed.hashing import HashingEmbedder
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.memory import MemoryEngine
from engine.scope import Scope
from ui.live import LiveRefresh
from ui.main_window import MainWindow
from ui.selection import SelectionBus
from ui.tasks import InlineRunner, TaskRunner

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")

ROOT = Path(__file__).resolve().parents[2]
SCOPE = Scope.default("ana", "bot")
INITIAL = 120


def _chat(n: int, prefix: str) -> ParsedDocument:
    lines = [f"Ana: {prefix} message {i} about trains and Lisbon." for i in range(n)]
    text, chunks, pos = "", [], 0
    for line in lines:
        chunks.append(ParsedChunk(pos, pos + len(line), "message", speaker="Ana", message_id=f"{prefix}-{len(chunks)}"))
        text += line + "\n"
        pos += len(line) + 1
    return ParsedDocument(text=text, source_type="chat", trust="user", uri=f"{prefix}.json", external_id=prefix,
                          chunks=chunks)


@pytest.fixture
def live_db(tmp_path) -> Path:
    path = tmp_path / "live.db"
    with MemoryEngine(path, embedder=HashingEmbedder(), llm=None) as eng:
        eng.ingest_documents([_chat(INITIAL, "first")], scope=SCOPE)
    return path


def _window(qtbot, tmp_path, runner) -> MainWindow:
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings=settings, runner=runner)
    qtbot.addWidget(win)
    win.resize(1200, 700)
    return win


def _select_row(pane, row: int) -> None:
    index = pane.model.index(row, 0)
    pane.table.selectionModel().setCurrentIndex(
        index, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)


def test_another_process_ingest_appears_with_the_selection_and_scroll_kept(qtbot, tmp_path, live_db):
    runner = TaskRunner()
    win = _window(qtbot, tmp_path, runner)
    win.show()
    with qtbot.waitSignal(win.sigContextChanged, timeout=20000):  # the open runs in the runner
        win.open_database(live_db)
    pane = win.show_pane("memories")
    qtbot.waitUntil(lambda: pane.model.rowCount() == INITIAL and pane.model.total == INITIAL, timeout=5000)
    assert win.live.active
    _select_row(pane, 40)
    selected = pane.selected_memory_id()
    bar = pane.table.verticalScrollBar()
    assert bar.maximum() > 30  # the table scrolls: the position is worth keeping
    bar.setValue(30)

    chat = tmp_path / "more.json"
    chat.write_text(json.dumps([{"id": "second", "messages": [
        {"role": "user", "content": f"Second conversation, message {i}: Ana booked a train to Porto."}
        for i in range(5)]}]), encoding="utf-8")
    env = dict(os.environ, MEMLENS_EMBEDDER="hashing", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "ingest", str(chat), "--db", str(live_db), "--extract", "none",
         "--user", "ana", "--agent", "bot", "--json"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        qtbot.waitUntil(lambda: proc.poll() is not None, timeout=120_000)
        out, err = proc.communicate()
        assert proc.returncode == 0, err.decode()
        assert json.loads(out)["memories"] == 5
        exited = time.monotonic()
        # Within a second of the writer finishing (its commit came earlier still), the rows are there.
        qtbot.waitUntil(lambda: pane.model.total == INITIAL + 5 and pane.model.rowCount() == INITIAL + 5,
                        timeout=1000)
        assert time.monotonic() - exited < 1.0
        qtbot.waitUntil(lambda: not win.arrived_button.isHidden(), timeout=1000)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert win.arrived_button.text() == "● 5 new memories arrived"
    assert f"{INITIAL + 5} memories" in pane.count_label.text()
    assert pane.selected_memory_id() == selected  # the operator's row stays selected...
    assert bar.value() == 30  # ...and the view did not jump
    # the status bar counts come from their own background read, a moment after the pane's
    qtbot.waitUntil(lambda: win.counts_label.text().startswith(f"{INITIAL + 5} memories"), timeout=1000)
    qtbot.mouseClick(win.arrived_button, Qt.MouseButton.LeftButton)
    assert win.arrived_button.isHidden() and win.arrived_count == 0
    win.close()
    assert not win.live.active


def test_live_refresh_announces_only_tables_of_the_shown_scope(qtbot, live_db):
    engine = MemoryEngine(live_db, embedder=HashingEmbedder(), llm=None, background_reembed=False)
    from ui.context import AppContext

    bus = SelectionBus()
    ctx = AppContext(engine=engine, scope=SCOPE, bus=bus, runner=InlineRunner())
    live = LiveRefresh(bus, interval_ms=20)
    seen: list[set] = []
    bus.sigDataChanged.connect(lambda t: seen.append(set(t)))
    arrived: list[int] = []
    live.sigNewMemories.connect(arrived.append)
    scopes: list[bool] = []
    live.sigScopesChanged.connect(lambda: scopes.append(True))
    try:
        live.set_context(ctx)
        assert live.active and seen == []  # the baseline announces nothing
        # another connection writes into ANOTHER scope: no pane of this scope refreshes
        with MemoryEngine(live_db, embedder=HashingEmbedder(), llm=None) as other:
            other.ingest_documents([_chat(3, "elsewhere")], scope=Scope.default("bo", "bot"))
        qtbot.waitUntil(lambda: scopes == [True], timeout=2000)
        assert not any({"memories", "chunks", "documents"} & t for t in seen) and arrived == []
        # ... and into this one
        with MemoryEngine(live_db, embedder=HashingEmbedder(), llm=None) as other:
            other.ingest_documents([_chat(2, "here")], scope=SCOPE)
        qtbot.waitUntil(lambda: arrived == [2], timeout=2000)
        assert {"memories", "chunks", "documents", "memory_sources"} <= seen[-1]
        # a curation by another process (no new memory row) is found through the curation log
        mid = engine.export(SCOPE)["memories"][0]["id"]
        with MemoryEngine(live_db, embedder=HashingEmbedder(), llm=None) as other:
            other.curator(SCOPE).forget(mid, reason="stale")
        qtbot.waitUntil(lambda: "memories" in seen[-1] and "curation_log" in seen[-1], timeout=2000)
        # what this window announced itself is not announced again
        n = len(seen)
        conn = apsw.Connection(str(live_db))
        conn.execute("UPDATE memories SET pinned = 1 WHERE id = ?", (mid,))
        conn.execute("INSERT INTO curation_log(user_id, agent_id, scope_type, scope_id, command, actor, created_at)"
                     " VALUES (?,?,?,?, 'pin', 'operator', '2024-01-01T00:00:00Z')", SCOPE.as_params())
        conn.close()
        bus.data_changed({"curation_log"})
        with qtbot.waitSignal(live.sigProbed, timeout=2000) as probed:
            pass
        assert probed.args[0] == set() and len(seen) == n + 1
    finally:
        live.shutdown()
        engine.close()
    assert not live.active


def test_the_browser_refreshes_in_place_when_rows_go_in_the_middle(qtbot, qtmodeltester, live_db):
    from ui.context import AppContext
    from ui.panes.memory_browser import MemoryBrowserPane

    engine = MemoryEngine(live_db, embedder=HashingEmbedder(), llm=None, background_reembed=False)
    try:
        ctx = AppContext(engine=engine, scope=SCOPE, bus=SelectionBus(), runner=InlineRunner())
        pane = MemoryBrowserPane()
        qtbot.addWidget(pane)
        pane.resize(900, 400)
        pane.set_context(ctx)
        _select_row(pane, 50)
        keep = pane.selected_memory_id()
        gone = pane.model.row(10)["id"]
        resets: list[bool] = []
        pane.model.modelReset.connect(lambda: resets.append(True))
        with engine.store.writer(SCOPE) as w:
            w.delete_memory(gone)
        ctx.bus.data_changed({"memories"})
        assert resets == []  # no reset: a layout change that moved the selection with its row
        assert pane.model.row_of(gone) is None and pane.model.rowCount() == INITIAL - 1
        assert pane.selected_memory_id() == keep and pane.table.currentIndex().row() == 49
        qtmodeltester.check(pane.model)
        engine.curator(SCOPE).forget(keep, reason="test")
        ctx.bus.data_changed({"memories"})
        assert pane.model.row(49)["status"] == "forgotten" and pane.selected_memory_id() == keep
    finally:
        engine.close()
