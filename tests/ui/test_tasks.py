"""ui/tasks: work runs off the GUI thread at background priority, results come back by signal."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from ui.tasks import BACKGROUND_NICE, InlineRunner, TaskRunner

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
