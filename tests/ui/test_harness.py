"""The harness (tests/conftest.py) sees what a test leaves running besides Python threads: work in
a task runner's pool and active timers of the application's widgets."""

from __future__ import annotations

import threading

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QWidget

from tests.fixtures import leaks
from ui.tasks import TaskRunner


def test_work_left_in_a_task_runner_is_seen(qtbot):
    runner, gate = TaskRunner(), threading.Event()
    started = threading.Event()
    runner.run(lambda p, s: (started.set(), gate.wait(5)))
    assert started.wait(5)
    try:
        assert leaks.busy_pools() == ["TaskRunner with 1 task(s) running"]
    finally:
        gate.set()
        runner.shutdown()
    assert leaks.busy_pools() == []


def test_an_active_timer_of_a_widget_is_seen(qtbot):
    before = set(leaks.active_timers())
    owner = QWidget()
    owner.setObjectName("owner")
    timer = QTimer(owner)
    timer.setInterval(250)
    timer.start()
    try:
        new = [what for key, what in leaks.active_timers().items() if key not in before]
        assert new == ["QTimer every 250 ms of QWidget owner"]
    finally:
        timer.stop()
    assert not [key for key in leaks.active_timers() if key not in before]
    owner.deleteLater()
