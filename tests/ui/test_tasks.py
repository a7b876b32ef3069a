"""ui/tasks: work runs off the GUI thread at background priority, results come back by signal."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from engine.background import BACKGROUND_NICE
from ui.tasks import InlineRunner, TaskRunner

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux")


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@linux_only
def test_workers_run_below_the_gui_thread_and_so_do_the_threads_they_start(qtbot):
    gui_before = _nice()
    runner = TaskRunner()
    seen: dict[str, int] = {}

    def work(progress, should_stop):
        seen["worker"] = _nice()
        child = threading.Thread(target=lambda: seen.__setitem__("child", _nice()))  # e.g. the embedder's pool
        child.start()
        child.join()
        progress(1.0, "done")
        return threading.get_ident()

    results = []
    runner.run(work, results.append)
    qtbot.waitUntil(lambda: bool(results), timeout=5000)
    runner.shutdown()
    assert results[0] != threading.get_ident()
    assert seen["worker"] == max(gui_before, BACKGROUND_NICE)
    assert seen["child"] == seen["worker"]
    assert _nice() == gui_before  # the GUI thread keeps its priority


@linux_only
def test_inline_runner_leaves_the_calling_thread_alone():
    before = _nice()
    out = []
    InlineRunner().run(lambda p, s: _nice(), out.append)
    assert out == [before] and _nice() == before


def test_errors_reach_the_gui_thread_with_the_traceback(qtbot):
    runner = TaskRunner()
    errors = []

    def work(progress, should_stop):
        raise ValueError("bad input file")

    runner.run(work, on_error=errors.append)
    qtbot.waitUntil(lambda: bool(errors), timeout=5000)
    runner.shutdown()
    assert isinstance(errors[0], ValueError)
    assert "bad input file" in errors[0].__memlens_traceback__


def test_full_collections_wait_while_any_task_runs_and_resume_after(qtbot):
    import gc

    before = gc.get_threshold()
    runner = TaskRunner()
    first_in, release_first = threading.Event(), threading.Event()
    seen: dict[str, tuple] = {}

    def slow(progress, should_stop):
        first_in.set()
        release_first.wait(5)
        seen["slow"] = gc.get_threshold()

    def failing(progress, should_stop):
        seen["failing"] = gc.get_threshold()
        raise ValueError("a task that fails still lets go")

    done, errors = [], []
    runner.run(slow, done.append)
    assert first_in.wait(5)
    runner.run(failing, on_error=errors.append)
    qtbot.waitUntil(lambda: bool(errors), timeout=5000)
    assert gc.get_threshold()[2] > before[2]  # the slow task still runs: still deferred
    release_first.set()
    qtbot.waitUntil(lambda: bool(done), timeout=5000)
    runner.shutdown()
    for thresholds in seen.values():
        assert thresholds[:2] == before[:2] and thresholds[2] > 1000 * before[2]  # young generations as usual
    assert gc.get_threshold() == before


def test_work_that_can_wait_runs_once_no_task_is_running(qtbot):
    runner = TaskRunner()
    gate = threading.Event()
    order: list[str] = []
    runner.run(lambda p, s: gate.wait(5), lambda _r: order.append("page"))
    runner.when_idle(lambda: order.append("model"))
    assert order == []  # a task is running: the waiting work waits
    with qtbot.waitSignal(runner.sigIdle, timeout=5000):
        gate.set()
    assert order == ["page", "model"]
    runner.when_idle(lambda: order.append("at once"))  # nothing running: now
    assert order[-1] == "at once"
    runner.shutdown()


@linux_only
def test_foreground_work_runs_at_the_gui_threads_priority(qtbot):
    runner = TaskRunner()
    seen = []
    runner.run(lambda p, s: seen.append(("background", _nice())), background=True)
    runner.run(lambda p, s: seen.append(("foreground", _nice())), background=False)
    qtbot.waitUntil(lambda: len(seen) == 2, timeout=5000)
    runner.shutdown()
    assert dict(seen) == {"background": max(_nice(), BACKGROUND_NICE), "foreground": _nice()}


def test_progress_is_throttled_and_the_last_report_arrives_before_the_result(qtbot):
    """A loop reporting every item queued a signal per item: 20,000 repaints of a progress bar."""
    runner = TaskRunner()
    seen: list[tuple[float, str]] = []
    order: list[str] = []

    def work(progress, should_stop):
        for i in range(1, 20001):
            progress(i / 20000, f"item {i}")
        return "done"

    runner.run(work, lambda result: order.append(result), on_progress=lambda f, m: (seen.append((f, m)),
                                                                                 order.append("progress")))
    qtbot.waitUntil(lambda: "done" in order, timeout=10000)
    runner.shutdown()
    assert 1 <= len(seen) < 1000  # at most one per PROGRESS_INTERVAL_S, however fast the loop
    assert seen[-1] == (1.0, "item 20000")  # the latest report wins and is never lost
    assert order[-1] == "done" and order[-2] == "progress"


def test_a_task_cancelled_before_it_starts_does_not_run_and_settles(qtbot):
    runner = TaskRunner(max_threads=1)
    gate, ran, errors, settled = threading.Event(), [], [], []
    first = runner.run(lambda p, s: gate.wait(5))
    second = runner.run(lambda p, s: ran.append(True), on_error=errors.append)
    tasks = runner.cancel_all()
    assert set(tasks) == {first, second}
    runner.when_settled(tasks, lambda: settled.append(runner.busy))
    gate.set()
    qtbot.waitUntil(lambda: bool(settled), timeout=5000)
    runner.shutdown()
    assert ran == [] and type(errors[0]).__name__ == "Cancelled"
    assert settled == [False]  # called once both had delivered
    runner.when_settled(tasks, lambda: settled.append("at once"))
    assert settled[-1] == "at once"
