"""The window's lifecycle in the real task runner: opening a database runs off the GUI thread, a
new database cancels the old one's work (interrupting its running reads) instead of waiting for
it, a benchmark run cut off by a scope or database change never leaves the bench pane locked, and
re-embedding goes through the task runner, not a thread of the engine's own."""

from __future__ import annotations

import threading

import apsw
import pytest
from PySide6.QtCore import QSettings

from engine.embed.hashing import HashingEmbedder
from engine.memory import MemoryEngine
from tests.ui.memdb_scenarios import ANA, BOB, build
from ui.context import AppContext
from ui.main_window import MainWindow
from ui.panes.bench import BenchPane
from ui.tasks import InlineRunner, TaskRunner

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")


@pytest.fixture
def dbs(template, tmp_path):
    import shutil

    first, second = tmp_path / "first.db", tmp_path / "second.db"
    shutil.copy(template, first)
    shutil.copy(template, second)
    return first, second


@pytest.fixture
def window(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)  # never the user's
    win = MainWindow(settings=settings, runner=TaskRunner())
    qtbot.addWidget(win)
    yield win
    win.close()  # cancels and waits for the workers, closes every engine


def _opened(qtbot, win: MainWindow, path) -> None:
    with qtbot.waitSignal(win.sigContextChanged, timeout=20000,
                          check_params_cb=lambda ctx: ctx is not None and ctx.engine.path == path):
        win.open_database(path)
    qtbot.waitUntil(lambda: not win.runner.busy, timeout=20000)  # the panes' first reads


def test_the_engine_opens_and_migrates_off_the_gui_thread(qtbot, window, dbs, monkeypatch):
    built_in: list[threading.Thread] = []
    real = MemoryEngine.__init__

    def spy(self, *args, **kwargs):
        built_in.append(threading.current_thread())
        real(self, *args, **kwargs)

    monkeypatch.setattr(MemoryEngine, "__init__", spy)
    with qtbot.waitSignal(window.sigContextChanged, timeout=20000):
        assert window.open_database(dbs[0]) is None  # running: the window is not blocked meanwhile
        assert window.engine is None and "Opening" in window.banner.text  # says so while it runs
    assert built_in and threading.main_thread() not in built_in
    assert window.engine is not None and window.engine.path == dbs[0]


def test_opening_another_database_mid_run_cancels_and_interrupts_instead_of_blocking(qtbot, window, dbs):
    """The run reads without ever asking should_stop(): only interrupt() can stop its query. The
    old window waited up to 30 s on the GUI thread, then closed the database under the worker."""
    first, second = dbs
    _opened(qtbot, window, first)
    bench = window.panes["bench"]
    old = window.engine
    in_query, outcome = threading.Event(), []

    def endless_read(engine, dataset, path, *, limit, recipe, progress, should_stop):
        conn = engine.store.db.connection()
        conn.create_scalar_function("entered", lambda x: in_query.set() or x, 1)
        try:  # a read that takes minutes
            conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT entered(x) + 1 FROM c "
                         "WHERE x < 2000000000) SELECT count(*) FROM c").fetchall()
        except apsw.InterruptError:
            outcome.append("interrupted")
            raise
        outcome.append("finished")
        return {"run_id": 0, "status": "done"}

    bench.run_benchmark = endless_read
    bench.data_path.setText("x.json")
    bench.start.click()
    assert in_query.wait(10)
    assert not bench.start.isEnabled()

    assert window.open_database(second) is None  # returns at once: nothing waits on the GUI thread
    qtbot.waitUntil(lambda: outcome == ["interrupted"], timeout=10000)
    qtbot.waitUntil(lambda: window.engine is not None and window.engine.path == second, timeout=20000)
    qtbot.waitUntil(lambda: not window._retiring, timeout=20000)  # closed once the run had ended
    assert old.store.db._closed
    assert bench.start.isEnabled() and not bench.stop.isEnabled() and bench.progress.isHidden()
    assert "InterruptError" not in bench.banner.label.text()  # the old database's error is not shown


def test_a_scope_change_mid_run_leaves_the_bench_pane_usable(qtbot, engine):
    """The generation guard drops a run's result after a scope change; the unlocking still runs."""
    release = threading.Event()

    def run(engine, dataset, path, *, limit, recipe, progress, should_stop):
        release.wait(10)
        return {"run_id": 0, "status": "done"}

    runner = TaskRunner()
    pane = BenchPane()
    qtbot.addWidget(pane)
    try:
        pane.set_context(AppContext(engine=engine, scope=ANA, runner=runner))
        pane.run_benchmark = run
        pane.data_path.setText("x.json")
        pane.start.click()
        assert not pane.start.isEnabled() and pane.stop.isEnabled()
        pane.set_context(AppContext(engine=engine, scope=BOB, runner=runner))
        finished = []
        pane.sigRunFinished.connect(finished.append)
        release.set()
        qtbot.waitUntil(lambda: not runner.busy, timeout=10000)
        assert pane.start.isEnabled() and not pane.stop.isEnabled() and pane.progress.isHidden()
        assert finished == []  # the result of the other scope's run is still dropped
    finally:
        release.set()
        pane.shutdown()
        runner.shutdown()


def test_reembedding_runs_in_the_task_runner(qtbot, tmp_path):
    path = tmp_path / "m.db"
    build(path)  # 64-dimensional vectors; the window's embedder makes 384
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings=settings, runner=InlineRunner())
    qtbot.addWidget(win)
    threads_before = {t.name for t in threading.enumerate()}
    assert win.open_database(path)
    assert "memlens-reembed" not in {t.name for t in threading.enumerate()} - threads_before
    assert not win.engine.background_busy
    assert win.engine.counts(ANA)["stale_embeddings"] == 0  # done by the runner's task
    assert win.engine.embedder_record()["dims"] == HashingEmbedder().dims
    win.close()


def test_a_newer_open_supersedes_one_still_running(qtbot, window, dbs, monkeypatch):
    """Two opens in a row: the window shows the second, and the first one's engine, which arrives
    after or before it, is closed rather than left open."""
    made: list[MemoryEngine] = []
    real = MemoryEngine.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(MemoryEngine, "__init__", spy)
    first, second = dbs
    assert window.open_database(first) is None
    assert window.open_database(second) is None
    qtbot.waitUntil(lambda: window.engine is not None and window.engine.path == second, timeout=20000)
    qtbot.waitUntil(lambda: not window.runner.busy and not window._retiring, timeout=20000)
    assert window.engine.path == second and window.ctx is not None and window.ctx.engine is window.engine
    opened_first = [e for e in made if e.path == first]
    assert opened_first and all(e.store.db._closed for e in opened_first)


def test_the_first_run_demo_says_it_is_ready_once_it_is_open(qtbot, window, tmp_path):
    """The open runs after the build, in the runner: the "ready" line is shown when the window
    shows the database, not before (the switch would clear it)."""
    from app.gui import build_demo_then_open

    path = tmp_path / "demo.db"
    build_demo_then_open(window, path)
    qtbot.waitUntil(lambda: window.engine is not None and not window.runner.busy, timeout=120000)
    assert window.engine.path == path
    assert "Demo ready:" in window.banner.text
