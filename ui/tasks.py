"""All background work goes through here (STYLE.md item 3).

`TaskRunner.run(fn, on_done, on_error, progress=..., cancellable=...)` runs `fn(progress,
should_stop)` on a QThreadPool worker and delivers the result or the error to the GUI thread
by signal. No widget is touched off the GUI thread. Tests swap in `InlineRunner`, which runs
the same call synchronously, so they need no waiting.

Worker threads run at a lower CPU priority (engine.background: Linux nice +10, inherited by
the threads they start, such as the embedder's): on a two-core machine an ingestion keeps both
cores busy, and the GUI thread must still get the CPU within a frame when its timer fires.

While any task runs, the cycle collector's full (oldest-generation) passes wait until the last
task ends. A full pass walks every long-lived object holding the GIL; in a worker thread it
stalled the GUI thread by 10-30 ms several times per benchmark (app.latency_probe). The young
generations, which catch nearly all cyclic garbage, are still collected as usual.

Progress reaches the GUI thread at most every PROGRESS_INTERVAL_S (the latest report wins, and the
last one always arrives before the result): a loop that reports every item would otherwise queue
a signal per item and repaint a progress bar thousands of times a second.

Every task ends with exactly one of its done or error callbacks. A task cancelled before a worker
picked it up does not run: its error callback gets engine.errors.Cancelled. `cancel_all()` cancels
what is running (each work's should_stop() turns true) and `when_settled(tasks, fn)` calls `fn`
once those tasks have delivered: what the window does before it closes a database other work
still reads (a new database cancels the old one's tasks, as Orange's widgets cancel their last).
"""

from __future__ import annotations

import gc
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from engine.background import lower_thread_priority
from engine.errors import Cancelled

Work = Callable[[Callable[[float, str], None], Callable[[], bool]], Any]
PROGRESS_INTERVAL_S = 0.05  # progress signals per task: at most 20 a second


class _Signals(QObject):
    sigDone = Signal(object)
    sigError = Signal(object)
    sigProgress = Signal(float, str)


class _FullCollections:
    """Counts running tasks; while there are any, full collections are deferred."""

    DEFERRED = 1 << 30  # young-generation passes before a full one: never, in practice

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._saved: tuple[int, int, int] | None = None

    def hold(self) -> None:
        with self._lock:
            if self._running == 0:
                self._saved = gc.get_threshold()
                gc.set_threshold(self._saved[0], self._saved[1], self.DEFERRED)
            self._running += 1

    def release(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0 and self._saved is not None:
                gc.set_threshold(*self._saved)
                self._saved = None


full_collections = _FullCollections()


class Task(QRunnable):
    def __init__(self, work: Work, *, background: bool = True) -> None:
        super().__init__()
        self.work = work
        self.background = background
        self.signals = _Signals()
        self._stop = threading.Event()
        self._last_progress = float("-inf")
        self._pending_progress: tuple[float, str] | None = None
        self.settled = False  # its result or error has been delivered (GUI thread)
        self.setAutoDelete(False)

    def cancel(self) -> None:
        self._stop.set()

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def _progress(self, fraction: float, message: str) -> None:  # worker thread
        now = time.monotonic()
        if now - self._last_progress >= PROGRESS_INTERVAL_S:
            self._last_progress, self._pending_progress = now, None
            self.signals.sigProgress.emit(float(fraction), str(message))
        else:
            self._pending_progress = (float(fraction), str(message))

    def _flush_progress(self) -> None:
        pending, self._pending_progress = self._pending_progress, None
        if pending is not None:
            self.signals.sigProgress.emit(*pending)

    def run(self) -> None:  # worker thread
        if self.background:
            lower_thread_priority()
        full_collections.hold()
        try:
            self.execute()
        finally:
            full_collections.release()

    def execute(self) -> None:
        if self.cancelled:  # cancelled while it waited for a worker: nothing of it runs
            self.signals.sigError.emit(Cancelled("cancelled before it started"))
            return
        try:
            result = self.work(self._progress, self._stop.is_set)
        except BaseException as exc:  # noqa: BLE001 - delivered to the GUI thread, shown in the pane
            exc.__memlens_traceback__ = traceback.format_exc()  # type: ignore[attr-defined]
            self._flush_progress()
            self.signals.sigError.emit(exc)
        else:
            self._flush_progress()
            self.signals.sigDone.emit(result)


class TaskRunner(QObject):
    sigIdle = Signal()  # the last running task has delivered its result
    _instances: weakref.WeakSet[TaskRunner] = weakref.WeakSet()

    def __init__(self, max_threads: int = 2) -> None:
        super().__init__()
        self.pool = QThreadPool()
        self.pool.setMaxThreadCount(max_threads)
        # One thread at the GUI's own priority, never lowered, for short work that holds the GIL
        # in long stretches (loading the model): at background priority the machine's other work
        # preempts it while it holds the GIL, and the GUI thread waits that long too.
        self.foreground_pool = QThreadPool()
        self.foreground_pool.setMaxThreadCount(1)
        self._live: set[Task] = set()
        self._when_idle: list[Callable[[], object]] = []
        self._settle_waiters: list[tuple[set[Task], Callable[[], object]]] = []
        TaskRunner._instances.add(self)

    @classmethod
    def working(cls) -> list[TaskRunner]:
        """The runners, of this process, whose workers are running a task now (the test harness
        fails a test that leaves one behind)."""
        return [r for r in list(cls._instances)
                if r.pool.activeThreadCount() > 0 or r.foreground_pool.activeThreadCount() > 0]

    @staticmethod
    def _task(work: Work, on_done: Callable[[Any], None] | None, on_error: Callable[[BaseException], None] | None,
              on_progress: Callable[[float, str], None] | None, background: bool = True) -> Task:
        task = Task(work, background=background)
        if on_done is not None:
            task.signals.sigDone.connect(on_done)
        if on_error is not None:
            task.signals.sigError.connect(on_error)
        if on_progress is not None:
            task.signals.sigProgress.connect(on_progress)
        return task

    def run(self, work: Work, on_done: Callable[[Any], None] | None = None,
            on_error: Callable[[BaseException], None] | None = None,
            on_progress: Callable[[float, str], None] | None = None, *, background: bool = True) -> Task:
        """background=False: on the foreground pool (see __init__), for short GIL-bound work only."""
        task = self._task(work, on_done, on_error, on_progress, background)
        self._live.add(task)
        task.signals.sigDone.connect(lambda _=None, t=task: self._finished(t))
        task.signals.sigError.connect(lambda _=None, t=task: self._finished(t))
        (self.pool if background else self.foreground_pool).start(task)
        return task

    def _finished(self, task: Task) -> None:
        # connected after the caller's callbacks: they have run when the task counts as settled
        task.settled = True
        self._live.discard(task)
        ready = [(tasks, fn) for tasks, fn in self._settle_waiters if all(t.settled for t in tasks)]
        if ready:
            self._settle_waiters = [w for w in self._settle_waiters if w not in ready]
            for _tasks, fn in ready:
                fn()
        if not self._live:
            waiting, self._when_idle = self._when_idle, []
            for fn in waiting:
                fn()
            if not self._live:
                self.sigIdle.emit()

    def when_idle(self, fn: Callable[[], object]) -> None:
        """Call `fn` on the GUI thread once no task is running (at once if none is): work that
        can wait, such as loading the embedding model, goes after what the user is looking at."""
        if self._live:
            self._when_idle.append(fn)
        else:
            fn()

    @property
    def busy(self) -> bool:
        """Is any task still running?"""
        return bool(self._live)

    def cancel_all(self) -> list[Task]:
        """Ask every running or waiting task to stop (should_stop() turns true); returns them."""
        tasks = list(self._live)
        for task in tasks:
            task.cancel()
        return tasks

    def when_settled(self, tasks: list[Task], fn: Callable[[], object]) -> None:
        """Call `fn` on the GUI thread once every task in `tasks` has delivered (at once if they have)."""
        pending = {t for t in tasks if not t.settled}
        if pending:
            self._settle_waiters.append((pending, fn))
        else:
            fn()

    def wait(self, msecs: int = 30000) -> bool:
        return self.pool.waitForDone(msecs) and self.foreground_pool.waitForDone(msecs)

    def shutdown(self) -> None:
        """Cancel every task and wait for the workers (the window is closing)."""
        self.cancel_all()
        self.pool.waitForDone(30000)
        self.foreground_pool.waitForDone(30000)


class InlineRunner(TaskRunner):
    """Runs work synchronously on the calling thread (tests)."""

    def run(self, work, on_done=None, on_error=None, on_progress=None, *, background=True):
        task = self._task(work, on_done, on_error, on_progress)
        task.execute()  # on this thread, at its own priority
        task.settled = True
        return task
