"""The main window: every registered pane in a dock over one shared context, menus and shortcuts,
status bar, remembered layout/recent files/scope, errors in place, themes, and snapshots."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QImage, QKeySequence, QPalette
from PySide6.QtWidgets import QApplication, QPushButton

import ui.main_window as main_window_module
from app.snapshot import SAMPLE_SCOPE, snapshot, stage_selection
from engine import __version__
from engine.embed.hashing import HashingEmbedder
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.memory import MemoryEngine
from engine.scope import Scope
from ui.main_window import MainWindow
from ui.panes.base import PaneBase
from ui.panes.registry import PANES
from ui.tasks import InlineRunner
from ui.theme import apply_theme, current_theme, system_is_dark

from .shell_db import fact_by, qsettings, sample_db, sample_template, state  # noqa: F401

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")

PRESENT = [key for key, _t, module, _c, _s in PANES if importlib.util.find_spec(module) is not None]


def _window(qtbot, qsettings, **kwargs) -> MainWindow:
    win = MainWindow(settings=qsettings, runner=InlineRunner(), **kwargs)
    qtbot.addWidget(win)
    return win


def _banner_buttons(win) -> list[QPushButton]:
    return [b for b in win.banner.findChildren(QPushButton) if b.isVisibleTo(win.banner)]


def test_every_registered_pane_is_a_dock_sharing_one_context(qtbot, qsettings, sample_db):
    win = _window(qtbot, qsettings)
    assert list(win.docks) == PRESENT and {"memories", "spans", "conflicts", "profile", "settings"} <= set(PRESENT)
    assert win.open_database(sample_db)
    ctx = win.ctx
    assert ctx.scope == SAMPLE_SCOPE
    for key, pane in win.panes.items():
        assert isinstance(pane, PaneBase) and pane.ctx is ctx, key
        assert win.docks[key].objectName() == f"dock-{key}"
    counts = ctx.engine.counts(SAMPLE_SCOPE)
    assert win.counts_label.text() == (f"{counts['memories']} memories · {counts['facts']} facts · "
                                       f"{counts['open_conflicts']} open conflicts")
    assert win.embedder_label.text().startswith("embedder hashing/")
    assert win.path_label.text() == str(sample_db) and win.size_label.text().endswith("KB")
    assert win.scope_combo.currentText() == "ana / assistant (agent:assistant)"
    assert win.windowTitle() == "memlens — sample.db"


def test_one_selection_moves_every_pane(qtbot, qsettings, sample_db):
    win = _window(qtbot, qsettings)
    win.open_database(sample_db)
    engine = win.engine
    munich = fact_by(engine, "lives_in", "Munich")
    win.bus.select("memory", munich["memory_id"], source="test")
    assert win.panes["memories"].selected_memory_id() == munich["memory_id"]
    spans = win.panes["spans"]
    a, b = spans.focused_range()
    assert spans.shown_text()[a:b] == "I moved to Munich"
    win.bus.select("fact", munich["id"], source="test")
    assert win.panes["profile"].tree.currentIndex().siblingAtColumn(3).data() == "Munich"
    teacher = fact_by(engine, "has_role", "teacher")
    win.bus.select("fact", teacher["id"], source="test")
    assert win.panes["conflicts"].current_conflict["fact_b_id"] == teacher["id"]
    assert win.panes["memories"].selected_memory_id() == teacher["memory_id"]
    qtbot.waitUntil(lambda: not spans.flashing)


def test_foreign_file_is_explained_and_another_can_be_opened(qtbot, qsettings, sample_db, tmp_path, monkeypatch):
    notes = tmp_path / "notes.db"
    notes.write_text("just some text, not a database " * 20)
    win = _window(qtbot, qsettings)
    assert not win.open_database(notes)
    assert win.notice_bar.isVisibleTo(win) and win.banner.level == "error"
    assert f"Cannot open {notes}" in win.banner.text and "not a memlens database" in win.banner.text
    assert notes.read_text().startswith("just some text")  # not a byte changed
    asked = []
    monkeypatch.setattr(main_window_module, "ask_database_path", lambda parent, start: asked.append(start) or sample_db)
    [button] = [b for b in _banner_buttons(win) if b.text() == "Open another…"]
    button.click()
    assert asked and win.ctx is not None and Path(win.engine.path) == sample_db
    assert not win.notice_bar.isVisibleTo(win)


def test_corrupt_and_other_sqlite_files_keep_the_open_database(qtbot, qsettings, sample_db, tmp_path):
    import apsw

    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 40)
    other = tmp_path / "other.sqlite"
    conn = apsw.Connection(str(other))
    conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
    conn.close()
    win = _window(qtbot, qsettings)
    win.open_database(sample_db)
    for bad, why in ((corrupt, "not a memlens database"), (other, "an SQLite file of another application"),
                     (tmp_path, "is a directory, not a database file")):
        assert not win.open_database(bad)
        assert why in win.banner.text
        assert "sample.db is still open" in win.banner.text
        assert Path(win.engine.path) == sample_db and win.ctx is not None
    assert any(b.text() == "Open sample.db" for b in _banner_buttons(win))  # the recent one is offered


def test_an_empty_database_says_how_to_fill_it(qtbot, qsettings, tmp_path):
    win = _window(qtbot, qsettings)
    assert win.open_database(tmp_path / "new.db")
    assert "holds no memories yet" in win.banner.text and "memlens ingest" in win.banner.text


def test_layout_geometry_recent_files_and_scope_are_remembered(qtbot, qsettings, sample_db, tmp_path):
    with MemoryEngine(sample_db, embedder=HashingEmbedder(), llm=None) as eng:
        text = "Bob: I live in Oslo."
        eng.ingest_documents([ParsedDocument(text=text, source_type="chat", trust="user", external_id="bob",
                                             chunks=[ParsedChunk(0, len(text), "message", speaker="Bob")])],
                             scope=Scope.default("bob", "bot"))
    win = _window(qtbot, qsettings)
    win.resize(760, 580)  # inside the offscreen screen (800x800): restoreGeometry clamps to the screen
    win.open_database(sample_db)
    assert win.scope_combo.count() == 2 and win.scope_combo.isEnabled()
    bob = Scope.default("bob", "bot")
    win.scope_combo.setCurrentIndex(win.scope_index(bob))
    assert win.ctx.scope == bob and all(p.ctx.scope == bob for p in win.panes.values())
    assert win.panes["memories"].model.total == 1
    win.docks["profile"].hide()
    win.close()
    again = _window(qtbot, qsettings)
    assert (again.size().width(), again.size().height()) == (760, 580)
    assert not again.docks["profile"].isVisibleTo(again)
    assert again.recent_paths()[0] == str(sample_db.resolve())
    assert [a.text() for a in again.recent_menu.actions()] == [str(sample_db.resolve())]
    again.recent_menu.actions()[0].trigger()
    assert again.ctx.scope == bob  # the scope last used with this database


def test_menus_and_shortcuts(qtbot, qsettings, sample_db):
    win = _window(qtbot, qsettings)
    assert win.open_action.shortcut() == QKeySequence("Ctrl+O")
    assert win.undo_action.shortcut() == QKeySequence("Ctrl+Z")
    assert win.redo_action.shortcut() == QKeySequence("Ctrl+Shift+Z")
    assert win.find_action.shortcut() == QKeySequence("Ctrl+F")
    assert win.query_action.shortcut() == QKeySequence("Ctrl+Return")
    for key, _title, _module, _cls, shortcut in PANES:
        if key in win.view_actions:
            assert win.view_actions[key].shortcut() == QKeySequence(shortcut)
    menus = [a.text() for a in win.menuBar().actions()]
    assert menus == ["&File", "&Edit", "&View", "&Query", "&Help"]
    assert not win.undo_action.isEnabled()  # nothing open
    win.open_database(sample_db)
    assert win.undo_action.isEnabled()


def test_find_focuses_the_browser_search(qtbot, qsettings, sample_db):
    win = _window(qtbot, qsettings)
    win.open_database(sample_db)
    win.show()
    qtbot.waitExposed(win)
    win.activateWindow()
    win.view_actions["profile"].trigger()  # another pane first
    win.find_action.trigger()
    search = win.panes["memories"].search
    qtbot.waitUntil(search.hasFocus)
    assert win.docks["memories"].isVisible()


def test_query_focuses_the_traces_pane_when_present(qtbot, qsettings, sample_db):
    win = _window(qtbot, qsettings)
    win.open_database(sample_db)
    win.show()
    qtbot.waitExposed(win)
    if "traces" not in win.panes:
        assert not win.query_action.isEnabled()
        return
    win.query_action.trigger()
    assert win.docks["traces"].isVisible()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is not None
                    and win.panes["traces"].isAncestorOf(QApplication.focusWidget()))


def test_undo_and_redo_from_the_edit_menu_go_through_the_curator(qtbot, qsettings, sample_db):
    win = _window(qtbot, qsettings)
    win.open_database(sample_db)
    before = state(win.engine)
    win.panes["conflicts"].keep_b.click()
    after = state(win.engine)
    assert after != before and win.counts_label.text().endswith("1 open conflicts")
    win.undo_action.trigger()
    assert state(win.engine) == before
    assert win.counts_label.text().endswith("2 open conflicts")
    assert "Undid resolve" in win.statusBar().currentMessage()
    win.redo_action.trigger()
    assert state(win.engine) == after
    win.redo_action.trigger()  # nothing left to redo: a status message, no dialog
    assert "nothing to redo" in win.statusBar().currentMessage()


def test_about_names_the_version(qtbot, qsettings, monkeypatch):
    shown = []
    monkeypatch.setattr(main_window_module, "show_about", lambda parent, title, text: shown.append((title, text)))
    win = _window(qtbot, qsettings)
    win.about_action.trigger()
    assert shown and shown[0][0] == "About memlens" and f"memlens {__version__}" in shown[0][1]


def test_missing_panes_are_not_listed_and_broken_ones_say_why(qtbot, qsettings, tmp_path, monkeypatch):
    (tmp_path / "memlens_broken_pane.py").write_text("raise RuntimeError('the pane exploded')\n")
    (tmp_path / "memlens_needy_pane.py").write_text("import memlens_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    panes = PANES[:1] + (
        ("ghost", "Ghost", "ui.panes.does_not_exist_yet", "GhostPane", "Ctrl+0"),
        ("broken", "Broken", "memlens_broken_pane", "BrokenPane", ""),
        ("needy", "Needy", "memlens_needy_pane", "NeedyPane", ""),
    )
    win = _window(qtbot, qsettings, panes=panes)
    assert list(win.docks) == ["memories", "broken", "needy"]
    assert "could not be loaded" in win.panes["broken"].banner.text and "exploded" in win.panes["broken"].banner.text
    assert "memlens_no_such_dependency" in win.panes["needy"].banner.text
    for name in ("memlens_broken_pane", "memlens_needy_pane"):
        sys.modules.pop(name, None)


def test_light_and_dark_themes(qtbot, qsettings):
    app = QApplication.instance()
    win = _window(qtbot, qsettings)
    assert not system_is_dark() and not current_theme().dark  # offscreen reports no dark preference
    try:
        apply_theme(app, dark=True)
        assert current_theme().dark
        assert app.palette().color(QPalette.ColorRole.Window).lightness() < 80
        assert app.palette().color(QPalette.ColorRole.Text).lightness() > 180
    finally:
        apply_theme(app, dark=False)
    assert app.palette().color(QPalette.ColorRole.Window).lightness() > 180
    assert win.isWindow()


def _image_stats(path: Path) -> tuple[float, int]:
    img = QImage(str(path)).convertToFormat(QImage.Format.Format_Grayscale8)
    assert not img.isNull()
    raw = np.frombuffer(img.constBits(), dtype=np.uint8, count=img.sizeInBytes())
    pixels = raw.reshape(img.height(), img.bytesPerLine())[:, : img.width()]
    return float(pixels.std()), len(np.unique(pixels))


def test_snapshot_renders_every_pane_with_content(qtbot, sample_db, tmp_path):
    out = tmp_path / "shots"
    paths = snapshot(out, db_path=sample_db, size=(1280, 800))
    assert [p.name for p in paths] == ["window.png"] + [f"{k}.png" for k in PRESENT]
    for path in paths:
        std, levels = _image_stats(path)
        assert std > 12 and levels > 16, (path.name, std, levels)  # not blank, not a flat box
    assert QImage(str(out / "window.png")).width() >= 1280


def test_snapshot_without_a_database_builds_the_sample(qtbot, tmp_path):
    paths = snapshot(tmp_path / "shots")
    assert (tmp_path / "shots" / "conflicts.png") in paths


def test_staged_selection_fills_the_panes_with_text(qtbot, qsettings, sample_db):
    win = _window(qtbot, qsettings)
    win.resize(1280, 800)
    win.show()
    win.open_database(sample_db)
    chosen = stage_selection(win)
    munich = fact_by(win.engine, "lives_in", "Munich")
    assert chosen["fact"] == munich["id"] and chosen["conflict"] == 1 and "trace" in chosen
    assert "Ana lives in Munich." in win.panes["memories"].model.row(
        win.panes["memories"].model.row_of(munich["memory_id"]))["text"]
    assert "I moved to Munich" in win.panes["spans"].shown_text()
    assert "Ana lives in Munich." in win.panes["profile"].line_texts()
    assert win.panes["conflicts"].card_b.claim.text() == "Ana · has role → teacher"
    assert win.panes["settings"].fields["embedder"].currentData() == "hashing"
    std, levels = _image_stats_of(win.grab())
    assert std > 12 and levels > 16
    qtbot.waitUntil(lambda: not win.panes["spans"].flashing)


def _image_stats_of(pixmap) -> tuple[float, int]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.png"
        pixmap.save(str(path))
        return _image_stats(path)
