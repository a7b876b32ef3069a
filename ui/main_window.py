"""The inspector's main window: every registered pane in a dock, one context shared by all.

Panes come from ui/panes/registry.py and are imported by module path; a pane whose module is
not there yet is simply not listed. Opening a database makes one AppContext (engine, scope,
selection bus, task runner) and hands it to every pane; a scope change does the same. Layout,
geometry, the recent databases and the last scope per database are kept in QSettings. Errors
are shown in place (a banner under the menu, or inside the pane), never as traceback dialogs.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6 import __version__ as PYSIDE_VERSION
from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, Signal, qVersion
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDockWidget,
    QFileDialog,
    QFrame,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolBar,
    QWidget,
)

from engine import __version__
from engine.errors import BadInput, Cancelled, MemlensError
from engine.scope import Scope
from engine.settings import SettingsStore
from ui.context import AppContext
from ui.live import LiveRefresh
from ui.panes.base import PaneBase
from ui.panes.registry import PANES
from ui.qsettings import open_qsettings
from ui.selection import SelectionBus
from ui.tasks import TaskRunner
from ui.theme import apply_theme, register_fonts, theme_watcher
from ui.widgets.banner import NoticeBanner, describe_error
from ui.widgets.curation import describe_result, run_curation

if TYPE_CHECKING:
    from engine.memory import MemoryEngine

__all__ = ["MainWindow", "ask_database_path", "register_fonts", "show_about"]

MAX_RECENT = 8
ARRIVED_VISIBLE_MS = 8000  # how long the "new memories arrived" indicator stays up
STATE_VERSION = 1
EXPOSURE_MESSAGE_MS = 30_000
DB_FILTER = "memlens databases (*.db *.sqlite *.sqlite3 *.memlens);;All files (*)"


def ask_database_path(parent: QWidget | None, start_dir: str = "") -> Path | None:
    """Ask for a database file to open. Tests replace this."""
    path, _ = QFileDialog.getOpenFileName(parent, "Open a memlens database", start_dir, DB_FILTER)
    return Path(path) if path else None


def show_about(parent: QWidget, title: str, text: str) -> None:
    """Show the About box (non-blocking). Tests replace this."""
    box = QMessageBox(QMessageBox.Icon.Information, title, text, QMessageBox.StandardButton.Ok, parent)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.open()


def scope_label(scope: Scope) -> str:
    return f"{scope.user_id} / {scope.agent_id} ({scope.scope_type}:{scope.scope_id})"


@dataclass(slots=True)
class _Opened:
    """What opening a database in the background hands to the GUI thread."""

    engine: Any  # engine.memory.MemoryEngine
    llm: Any  # engine.llm.LLMClient or None
    scopes: list[Scope]
    exposure: str | None
    warnings: list[str]


def _close_engine(engine: Any, llm: Any) -> None:
    if engine is not None:
        engine.close()
    if llm is not None:
        llm.close()


def _human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


class _FailedPane(PaneBase):
    """Stands in for a pane whose module is there but failed to load: says why, in place."""

    def __init__(self, key: str, title: str, exc: BaseException, parent=None) -> None:
        self.pane_key = key  # type: ignore[misc]
        self.title = title  # type: ignore[misc]
        super().__init__(parent)
        self.banner.show_error(exc, f"The {title} pane could not be loaded")
        self.root_layout.addStretch(1)


def load_panes(panes=PANES) -> list[tuple[str, str, str, type[PaneBase] | None, BaseException | None]]:
    """(key, title, shortcut, class or None, error or None) for every registered pane that exists."""
    out: list[tuple[str, str, str, type[PaneBase] | None, BaseException | None]] = []
    for key, title, module, class_name, shortcut in panes:
        try:
            mod = importlib.import_module(module)
            cls = getattr(mod, class_name)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue  # not written yet: not listed
            out.append((key, title, shortcut, None, exc))
            continue
        except Exception as exc:  # noqa: BLE001 - shown in the pane's place
            out.append((key, title, shortcut, None, exc))
            continue
        out.append((key, title, shortcut, cls, None))
    return out


class MainWindow(QMainWindow):
    sigContextChanged = Signal(object)  # AppContext or None
    sigOpenFailed = Signal(object)  # (path, exception)

    def __init__(self, *, settings: QSettings | None = None, runner: TaskRunner | None = None,
                 panes=PANES, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        app = QApplication.instance()
        if not isinstance(app, QApplication):
            raise RuntimeError("the window needs a QApplication")
        register_fonts()
        apply_theme(app)
        theme_watcher(app).sigThemeChanged.connect(self._on_theme)
        self.setWindowTitle("memlens")
        self.setDockNestingEnabled(True)
        self.setDockOptions(QMainWindow.DockOption.AllowTabbedDocks | QMainWindow.DockOption.AllowNestedDocks
                            | QMainWindow.DockOption.AnimatedDocks)
        self.settings = settings if settings is not None else open_qsettings()
        self.settings_store = SettingsStore(self.settings)
        self.runner = runner if runner is not None else TaskRunner()
        self.bus = SelectionBus()
        self.live = LiveRefresh(self.bus, self)  # other processes' writes (MCP agent, CLI ingest) show up live
        self.engine: MemoryEngine | None = None
        self._llm: Any = None  # engine.llm.LLMClient
        self._open_token = 0  # the latest open_database call; an older one's result is dropped
        self._retiring: list[tuple[Any, Any]] = []  # (engine, llm) let go of, closed once their tasks end
        self.ctx: AppContext | None = None
        self.panes: dict[str, PaneBase] = {}
        self.docks: dict[str, QDockWidget] = {}
        self._closing = False

        self.notice_bar = QToolBar("Notices", self)
        self.notice_bar.setObjectName("toolbar-notices")
        self.notice_bar.setMovable(False)
        self.notice_bar.setFloatable(False)
        self.notice_bar.toggleViewAction().setVisible(False)
        self.banner = NoticeBanner(self.notice_bar)
        self.banner.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        # A toolbar shows a widget through an action: its visibility (and with it the widget's enabled
        # state) is the action's, so notices toggle the action, not only the widget.
        self._banner_action = self.notice_bar.addWidget(self.banner)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.notice_bar)
        self.notice_bar.hide()

        self._build_panes(panes)
        self._build_status_bar()
        self._build_menus()
        self._restore_window()
        self.bus.sigDataChanged.connect(lambda _t: self.refresh_status())
        self.bus.sigShowPane.connect(self.show_pane)
        self.live.sigNewMemories.connect(self._memories_arrived)
        self.live.sigScopesChanged.connect(self._refresh_scope_list)

    # panes -------------------------------------------------------------------------------------------
    def _build_panes(self, panes) -> None:
        for key, title, shortcut, cls, error in load_panes(panes):
            pane: PaneBase
            if cls is None:
                assert error is not None  # load_panes says why a class is missing
                pane = _FailedPane(key, title, error)
            else:
                try:
                    pane = cls()
                except Exception as exc:  # noqa: BLE001 - a broken pane must not take the window down
                    pane = _FailedPane(key, title, exc)
            dock = QDockWidget(title, self)
            dock.setObjectName(f"dock-{key}")
            # A pane's minimum size must not dictate the window's: below it, the pane scrolls.
            holder = QScrollArea(dock)
            holder.setObjectName(f"holder-{key}")
            holder.setWidgetResizable(True)
            holder.setFrameShape(QFrame.Shape.NoFrame)
            holder.setWidget(pane)
            dock.setWidget(holder)
            dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                             | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                             | QDockWidget.DockWidgetFeature.DockWidgetClosable)
            dock.setProperty("shortcut", shortcut)
            self.panes[key] = pane
            self.docks[key] = dock
            if hasattr(pane, "use_settings"):
                pane.use_settings(self.settings_store, self.runner)

    def _default_layout(self) -> None:
        """Browser (tabbed with traces and benchmarks) on the left; spans above the review panes on the right."""
        left_top: list[str] = [k for k in ("memories", "traces", "bench", "health") if k in self.docks]
        left_bottom: list[str] = []
        right_top: list[str] = [k for k in ("spans",) if k in self.docks]
        right_bottom: list[str] = [k for k in ("conflicts", "profile", "graph", "timeline", "settings") if k in self.docks]
        placed = set(left_top + left_bottom + right_top + right_bottom)
        right_bottom += [k for k in self.docks if k not in placed]
        for dock in self.docks.values():
            dock.setFloating(False)
            dock.show()

        def column(area: Qt.DockWidgetArea, top: list[str], bottom: list[str]) -> None:
            groups = [g for g in (top, bottom) if g]
            previous = None
            for group in groups:
                first = self.docks[group[0]]
                if previous is None:
                    self.addDockWidget(area, first)
                else:
                    self.splitDockWidget(previous, first, Qt.Orientation.Vertical)
                for key in group[1:]:
                    self.tabifyDockWidget(first, self.docks[key])
                first.raise_()
                previous = first

        column(Qt.DockWidgetArea.LeftDockWidgetArea, left_top, left_bottom)
        column(Qt.DockWidgetArea.RightDockWidgetArea, right_top, right_bottom)
        if left_top and left_bottom:
            self.resizeDocks([self.docks[left_top[0]], self.docks[left_bottom[0]]], [3, 2], Qt.Orientation.Vertical)
        if right_top and right_bottom:
            self.resizeDocks([self.docks[right_top[0]], self.docks[right_bottom[0]]], [2, 3], Qt.Orientation.Vertical)
        if (left_top or left_bottom) and (right_top or right_bottom):
            left = self.docks[(left_top or left_bottom)[0]]
            right = self.docks[(right_top or right_bottom)[0]]
            self.resizeDocks([left, right], [self.width() * 11 // 20, self.width() * 9 // 20],
                             Qt.Orientation.Horizontal)
        for key in ("traces", "conflicts", "memories"):
            if key in self.docks:
                self.docks[key].raise_()

    def show_pane(self, key: str) -> PaneBase | None:
        dock = self.docks.get(key)
        if dock is None:
            return None
        dock.show()
        dock.raise_()
        return self.panes[key]

    # status bar --------------------------------------------------------------------------------------
    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.path_label = QLabel("No database open.", self)
        self.path_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.size_label = QLabel("", self)
        self.counts_label = QLabel("", self)
        self.embedder_label = QLabel("", self)
        self.scope_combo = QComboBox(self)
        self.scope_combo.setToolTip("The scope every pane shows (user / agent, scope type:id)")
        self.scope_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.scope_combo.setEnabled(False)
        # Memories another process wrote into this scope: a count, cleared after a while or on click.
        self.arrived_button = QPushButton("", self)
        self.arrived_button.setObjectName("live-arrived")
        self.arrived_button.setFlat(True)
        self.arrived_button.setToolTip("Memories written by another process (an agent over MCP, a CLI ingest) "
                                       "while this window was open. Click to dismiss.")
        self.arrived_button.hide()
        self.arrived_button.clicked.connect(self.clear_arrived)
        self.arrived_count = 0
        self._arrived_timer = QTimer(self)
        self._arrived_timer.setSingleShot(True)
        self._arrived_timer.setInterval(ARRIVED_VISIBLE_MS)
        self._arrived_timer.timeout.connect(self.clear_arrived)
        bar.addWidget(self.path_label, 1)
        bar.addPermanentWidget(self.arrived_button)
        for w in (self.size_label, self.counts_label, self.embedder_label, self.scope_combo):
            bar.addPermanentWidget(w)
        self.scope_combo.currentIndexChanged.connect(self._scope_picked)

    def _memories_arrived(self, n: int) -> None:
        self.arrived_count += n
        noun = "memory" if self.arrived_count == 1 else "memories"
        self.arrived_button.setText(f"● {self.arrived_count:,} new {noun} arrived")
        self.arrived_button.show()
        self._arrived_timer.start()

    def clear_arrived(self) -> None:
        self._arrived_timer.stop()
        self.arrived_count = 0
        self.arrived_button.hide()

    def _refresh_scope_list(self) -> None:
        """Another process wrote into a scope this window has not listed yet: offer it in the picker."""
        if self.engine is None or self.ctx is None:
            return
        engine, ctx = self.engine, self.ctx

        def done(scopes: list[Scope]) -> None:
            if ctx is self.ctx:
                self._fill_scopes(scopes, ctx.scope)

        self.runner.run(lambda _p, _s: engine.scopes(), done, lambda _exc: None)

    def refresh_status(self) -> None:
        if self.engine is None or self.ctx is None:
            for label in (self.size_label, self.counts_label, self.embedder_label):
                label.setText("")
            return
        engine, scope, path = self.engine, self.ctx.scope, Path(self.engine.path)
        configured = self.settings_store.get("embedder") or "local"

        def work() -> dict[str, Any]:
            size = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
            return {"size": size, "counts": engine.counts(scope), "embedder": engine.embedder_record()}

        ctx = self.ctx

        def failed(exc: BaseException) -> None:
            if ctx is self.ctx:  # not what a database let go of meanwhile says (cancelled, interrupted)
                self.show_notice(describe_error(exc)[0], "warning")

        def done(info: dict[str, Any]) -> None:
            if ctx is not self.ctx:
                return
            c = info["counts"]
            self.size_label.setText(_human_size(info["size"]))
            self.counts_label.setText(f"{c['memories']:,} memories · {c['facts']:,} facts · "
                                      f"{c['open_conflicts']:,} open conflicts")
            emb = info["embedder"]
            if emb:
                text = f"embedder {emb['provider']}/{emb['model']} ({emb['dims']}d)"
                if emb["provider"] != configured:
                    text += f" · configured: {configured}"
            else:
                text = f"embedder {configured} (no vectors yet)"
            self.embedder_label.setText(text)

        self.runner.run(lambda _p, _s: work(), done, failed)

    # menus -----------------------------------------------------------------------------------------------
    def _build_menus(self) -> None:
        mb = self.menuBar()
        file_menu = mb.addMenu("&File")
        self.open_action = QAction("&Open database…", self)
        self.open_action.setShortcut(QKeySequence.StandardKey.Open)
        self.open_action.triggered.connect(self.open_dialog)
        file_menu.addAction(self.open_action)
        self.recent_menu = file_menu.addMenu("Open &recent")
        self._rebuild_recent()
        file_menu.addSeparator()
        self.quit_action = QAction("&Quit", self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.quit_action.triggered.connect(self.close)
        file_menu.addAction(self.quit_action)

        edit_menu = mb.addMenu("&Edit")
        self.undo_action = QAction("&Undo curation", self)
        self.undo_action.setShortcut(QKeySequence("Ctrl+Z"))
        self.undo_action.triggered.connect(self.undo)
        self.redo_action = QAction("&Redo curation", self)
        self.redo_action.setShortcut(QKeySequence("Ctrl+Shift+Z"))
        self.redo_action.triggered.connect(self.redo)
        self.find_action = QAction("&Find memories", self)
        self.find_action.setShortcut(QKeySequence("Ctrl+F"))
        self.find_action.triggered.connect(self.find_memory)
        for a in (self.undo_action, self.redo_action, self.find_action):
            edit_menu.addAction(a)

        view_menu = mb.addMenu("&View")
        self.view_actions: dict[str, QAction] = {}
        for key, dock in self.docks.items():
            action = QAction(dock.windowTitle(), self)
            shortcut = dock.property("shortcut")
            if shortcut:
                action.setShortcut(QKeySequence(shortcut))
            action.triggered.connect(lambda _c=False, k=key: self._focus_pane(k))
            view_menu.addAction(action)
            self.view_actions[key] = action
        view_menu.addSeparator()
        reset = QAction("Reset layout", self)
        reset.triggered.connect(self._default_layout)
        view_menu.addAction(reset)

        query_menu = mb.addMenu("&Query")
        self.query_action = QAction("&Run query", self)
        self.query_action.setShortcut(QKeySequence("Ctrl+Return"))
        self.query_action.triggered.connect(self.run_query)
        if "traces" not in self.panes:
            self.query_action.setEnabled(False)
            self.query_action.setToolTip("The retrieval traces pane is not available in this build")
        query_menu.addAction(self.query_action)

        help_menu = mb.addMenu("&Help")
        self.about_action = QAction("&About memlens", self)
        self.about_action.triggered.connect(self.about)
        help_menu.addAction(self.about_action)
        self._update_actions()

    def _update_actions(self) -> None:
        has_db = self.ctx is not None
        for a in (self.undo_action, self.redo_action):
            a.setEnabled(has_db)

    def _focus_pane(self, key: str) -> None:
        pane = self.show_pane(key)
        if pane is not None:
            pane.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def find_memory(self) -> None:
        pane = self.show_pane("memories")
        if pane is not None and hasattr(pane, "focus_search"):
            pane.focus_search()

    def run_query(self) -> None:
        pane = self.show_pane("traces")
        if pane is None:
            return
        if hasattr(pane, "focus_query"):
            pane.focus_query()
            return
        # Without the hook: the pane's query field gets the focus; pressed again while typing, it runs.
        field = getattr(pane, "query", None)
        if not isinstance(field, QLineEdit):
            field = pane.findChild(QLineEdit)
        if field is None:
            pane.setFocus(Qt.FocusReason.ShortcutFocusReason)
        elif field.hasFocus() and field.text().strip() and callable(run := getattr(pane, "run_what_if", None)):
            run()
        else:
            field.setFocus(Qt.FocusReason.ShortcutFocusReason)
            field.selectAll()

    def about_text(self) -> str:
        db = f"\nDatabase: {self.engine.path}" if self.engine is not None else ""
        return (f"memlens {__version__}\nA desktop inspector for agent long-term memory: source-grounded facts, "
                f"version chains and traced retrieval over one SQLite file.{db}\n\n"
                f"Qt {qVersion()} · PySide6 {PYSIDE_VERSION}")

    def about(self) -> None:
        show_about(self, "About memlens", self.about_text())

    # curation (Edit menu) --------------------------------------------------------------------------------
    def undo(self) -> None:
        self._curate(lambda cur: cur.undo(), "Undo")

    def redo(self) -> None:
        self._curate(lambda cur: cur.redo(), "Redo")

    def _curate(self, command, what: str) -> None:
        if self.ctx is None:
            return

        def failed(exc: BaseException) -> None:
            if isinstance(exc, BadInput):
                self.statusBar().showMessage(f"{what}: {exc}", 8000)
            else:
                self.show_error(exc, what)

        run_curation(self.ctx, command, lambda r: self.statusBar().showMessage(describe_result(r), 8000), failed)

    # notices ----------------------------------------------------------------------------------------------
    def show_notice(self, message: str, level: str = "info", actions=()) -> None:
        self.banner.show_notice(message, level, actions)
        self._banner_action.setVisible(True)
        self.notice_bar.show()

    def show_error(self, exc: BaseException, context: str = "", actions=()) -> None:
        self.banner.show_error(exc, context, actions)
        self._banner_action.setVisible(True)
        self.notice_bar.show()

    def clear_notice(self) -> None:
        self.banner.clear()
        self._banner_action.setVisible(False)
        self.notice_bar.hide()

    # databases ---------------------------------------------------------------------------------------------
    def open_dialog(self) -> bool | None:
        start = str(Path(self.engine.path).parent) if self.engine is not None else str(Path.home())
        path = ask_database_path(self, start)
        if path is None:
            return False
        return self.open_database(path)

    def open_database(self, path: str | Path, *, on_opened: Callable[[], None] | None = None) -> bool | None:
        """Open `path` (creating an empty memlens DB if it does not exist) without blocking the window.

        The engine's open, its migrations and the first reads run in the task runner while the
        window says so; then the database the window had is retired: its tasks are cancelled, its
        running reads interrupted, and it is closed once they have all ended (never under a
        worker). Returns True or False when the open has already succeeded or failed (an inline
        runner), None while it runs (sigContextChanged or sigOpenFailed follow). A newer open
        supersedes an older one still running. `on_opened()` runs once the window shows it. On
        failure the current database stays open and the window says why, offering to open another."""
        from engine.llm import LLMClient
        from engine.memory import MemoryEngine

        path = Path(path).expanduser()
        self._open_token += 1
        token = self._open_token
        warnings: list[str] = []
        embedder = None
        try:
            embedder = self.settings_store.make_embedder()
        except MemlensError as exc:
            warnings.append(f"Embedder settings: {exc}. Recall and corrections will fail until this is fixed in "
                            "Settings.")
        config = self.settings_store.llm_config()

        def work(_progress, _stop) -> _Opened:
            llm = LLMClient(config) if config is not None else None  # imports the client library: not here
            engine = None
            try:
                # Re-embedding runs in the task runner (_after_open), not in a thread of the engine's own.
                engine = MemoryEngine(path, embedder=embedder, llm=llm, create=True, background_reembed=False)
                problems = []
                try:
                    _ = engine.embedder  # records the model; vectors of another model become stale
                except MemlensError as exc:  # e.g. an embedding endpoint that does not answer
                    problems.append(f"Embedder: {exc}. Recall and corrections will fail until this is fixed.")
                return _Opened(engine, llm, engine.scopes(), engine.exposure(), problems)
            except BaseException:
                _close_engine(engine, llm)
                raise

        outcome: list[bool] = []

        def done(opened: _Opened) -> None:
            if self._closing:  # the window has shut its runner down: close it here
                _close_engine(opened.engine, opened.llm)
                return
            if token != self._open_token:
                self._close_later([], opened.engine, opened.llm)  # superseded by a newer open
                return
            self._switch_to(path, opened, warnings + opened.warnings)
            outcome.append(True)
            if on_opened is not None:
                on_opened()

        def failed(exc: BaseException) -> None:
            if token != self._open_token or self._closing:
                return
            self.clear_notice()
            self._open_failed(path, exc)
            outcome.append(False)

        self.show_notice(f"Opening {path} …", "info")  # the loading state: the panes keep what they show
        self.runner.run(work, done, failed)
        return outcome[0] if outcome else None

    def _switch_to(self, path: Path, opened: _Opened, warnings: list[str]) -> None:
        self._retire_engine()
        engine, scopes = opened.engine, opened.scopes
        self.engine, self._llm = engine, opened.llm
        self.clear_notice()
        for warning in warnings:
            self.show_notice(warning, "warning")
        self._add_recent(path)
        self.setWindowTitle(f"memlens — {path.name}")
        self.path_label.setText(str(path))
        self.path_label.setToolTip(str(path))
        scope = self._remembered_scope(path, scopes) or (scopes[0] if scopes else Scope.default())
        self._fill_scopes(scopes, scope)
        self._set_context(AppContext(engine=engine, scope=scope, bus=self.bus, runner=self.runner))
        self._after_open(engine)
        if not scopes:
            self.show_notice(f"{path.name} holds no memories yet. Ingest something: memlens ingest PATH --db {path}",
                             "info", [("Open another…", self.open_dialog)])
        if opened.exposure:  # said once per opening; `memlens status` says it too
            self.statusBar().showMessage(f"Warning: {opened.exposure}", EXPOSURE_MESSAGE_MS)

    def _after_open(self, engine: MemoryEngine) -> None:
        """Background work an opened database needs, through the task runner, once the panes have
        their first page: load the embedding model (creating its session holds the GIL for ~30 ms,
        which would otherwise land at the start of the first ingestion or query, and loading it
        first would delay what the user opened the database to see), then re-embed vectors another
        model or an older text definition made. Failures are reported by the first pane that
        embeds, with what to do."""
        warm = getattr(engine.embedder, "warm", None)

        def reembed(_result=None) -> None:
            if engine is not self.engine:
                return  # another database was opened meanwhile

            def progress(_fraction: float, message: str) -> None:
                if engine is self.engine:
                    self.statusBar().showMessage(f"Re-embedding with the current model: {message}", 4000)

            self.runner.run(lambda p, s: engine.reembed_stale(progress=p, should_stop=s), None,
                            lambda exc: None if isinstance(exc, Cancelled) else self._background_failed(exc),
                            progress)

        if callable(warm):
            self.runner.when_idle(lambda: self.runner.run(lambda _p, _s: warm(), reembed, lambda _exc: reembed()))
        else:
            self.runner.when_idle(reembed)

    def _background_failed(self, exc: BaseException) -> None:
        what, _todo = describe_error(exc)
        self.statusBar().showMessage(f"Re-embedding stopped: {what}", EXPOSURE_MESSAGE_MS)

    def _open_failed(self, path: Path, exc: BaseException) -> None:
        what, todo = describe_error(exc)
        still = f" {Path(self.engine.path).name} is still open." if self.engine is not None else ""
        actions: list[tuple[str, Callable[[], object]]] = [("Open another…", self.open_dialog)]
        recent = [p for p in self.recent_paths() if Path(p) != path and Path(p).exists()]
        if recent:
            actions.append((f"Open {Path(recent[0]).name}", functools.partial(self.open_database, recent[0])))
        self.show_notice(f"Cannot open {path}.\n{what}\n{todo}{still}", "error", actions)
        self.sigOpenFailed.emit((path, exc))

    def _retire_engine(self) -> None:
        """Let go of the open database without waiting for it: detach the panes, cancel every task
        (they read the old engine), interrupt its running reads, and close it once they have all
        ended."""
        engine, llm = self.engine, self._llm
        if engine is None:
            return
        self.engine, self._llm = None, None
        self._set_context(None)
        tasks = self.runner.cancel_all()
        engine.interrupt()
        self._close_later(tasks, engine, llm)

    def _close_later(self, tasks, engine, llm) -> None:
        """Close `engine` (and its LLM client) in the task runner once `tasks` have ended: closing
        optimises the file, which may ANALYZE."""

        self._retiring.append((engine, llm))

        def close(_progress=None, _stop=None) -> None:
            _close_engine(engine, llm)

        def closed(_result=None) -> None:
            if (engine, llm) in self._retiring:
                self._retiring.remove((engine, llm))

        self.runner.when_settled(tasks, lambda: self.runner.run(close, closed, self._close_failed))

    def _close_failed(self, exc: BaseException) -> None:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)  # for bug reports

    def close_database(self) -> None:
        self._open_token += 1  # an open still running is dropped
        self._retire_engine()
        self._fill_scopes([], None)
        self.path_label.setText("No database open.")
        self.setWindowTitle("memlens")
        self.refresh_status()

    def _set_context(self, ctx: AppContext | None) -> None:
        self.ctx = ctx
        self.clear_arrived()
        self.live.set_context(ctx)
        for key, pane in self.panes.items():
            try:
                pane.set_context(ctx)
            except Exception as exc:  # noqa: BLE001 - one pane's failure stays in that pane
                pane.banner.show_error(exc, f"{self.docks[key].windowTitle()} could not show this database")
        self._update_actions()
        self.refresh_status()
        self.sigContextChanged.emit(ctx)

    # scopes ----------------------------------------------------------------------------------------------------
    def _fill_scopes(self, scopes: list[Scope], current: Scope | None) -> None:
        self.scope_combo.blockSignals(True)
        self.scope_combo.clear()
        items = list(scopes)
        if current is not None and current not in items:
            items.insert(0, current)
        for s in items:
            self.scope_combo.addItem(scope_label(s), s)
        if current is not None:
            self.scope_combo.setCurrentIndex(items.index(current))
        self.scope_combo.setEnabled(len(items) > 1)
        self.scope_combo.blockSignals(False)

    def scope_index(self, scope: Scope) -> int:
        return next((i for i in range(self.scope_combo.count()) if self.scope_combo.itemData(i) == scope), -1)

    def _scope_picked(self, index: int) -> None:
        scope = self.scope_combo.itemData(index)
        if scope is not None:
            self.set_scope(scope)

    def set_scope(self, scope: Scope) -> None:
        if self.engine is None or (self.ctx is not None and self.ctx.scope == scope):
            return
        i = self.scope_index(scope)
        if i >= 0 and i != self.scope_combo.currentIndex():
            self.scope_combo.blockSignals(True)
            self.scope_combo.setCurrentIndex(i)
            self.scope_combo.blockSignals(False)
        self.settings.setValue(self._scope_key(Path(self.engine.path)), json.dumps(scope.as_dict()))
        self.bus.current = None
        self._set_context(AppContext(engine=self.engine, scope=scope, bus=self.bus, runner=self.runner))

    @staticmethod
    def _scope_key(path: Path) -> str:
        digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
        return f"scopes/{digest}"

    def _remembered_scope(self, path: Path, scopes: list[Scope]) -> Scope | None:
        raw = self.settings.value(self._scope_key(path))
        if not raw:
            return None
        try:
            scope = Scope(**json.loads(raw))
        except (ValueError, TypeError, MemlensError):
            return None
        return scope if scope in scopes else None

    # recent files and window state --------------------------------------------------------------------------------
    def recent_paths(self) -> list[str]:
        raw = self.settings.value("recent")
        if raw is None:
            return []
        if isinstance(raw, str):
            return [raw] if raw else []
        return [str(p) for p in raw]

    def _add_recent(self, path: Path) -> None:
        p = str(path.resolve()) if path.exists() else str(path)
        recent = [p] + [r for r in self.recent_paths() if r != p]
        self.settings.setValue("recent", recent[:MAX_RECENT])
        self._rebuild_recent()

    def _rebuild_recent(self) -> None:
        self.recent_menu.clear()
        paths = self.recent_paths()
        for p in paths:
            action = self.recent_menu.addAction(p)
            action.triggered.connect(lambda _c=False, path=p: self.open_database(path))
        self.recent_menu.setEnabled(bool(paths))

    def _restore_window(self) -> None:
        geometry = self.settings.value("window/geometry")
        state = self.settings.value("window/state")
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
        else:
            self.resize(1400, 900)
        self._default_layout()
        if isinstance(state, QByteArray) and not state.isEmpty():
            self.restoreState(state, STATE_VERSION)
        self.notice_bar.setVisible(self._banner_action.isVisible() and bool(self.banner.text))

    def save_window(self) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState(STATE_VERSION))
        self.settings.sync()

    def _on_theme(self, _theme=None) -> None:
        for pane in self.panes.values():
            pane.refresh()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        if not self._closing:
            self._closing = True
            self.save_window()
            self.statusBar().clearMessage()  # and its timeout's timer
            self.live.shutdown()
            self.clear_arrived()
            for pane in self.panes.values():
                pane.shutdown()
            self._open_token += 1  # an open still running closes what it opened
            if self.engine is not None:
                self.engine.interrupt()  # the workers' reads stop now; shutdown() cancels the rest
            self.runner.shutdown()
            # no worker runs now: close the open database and those let go of whose close had not run
            retiring, self._retiring = [(self.engine, self._llm), *self._retiring], []
            self.engine, self._llm = None, None
            for engine, llm in retiring:
                _close_engine(engine, llm)
        super().closeEvent(event)
