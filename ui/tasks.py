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
"""

from __future__ import annotations

import gc
import threading
import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from engine.background import lower_thread_priority

Work = Callable[[Callable[[float, str], None], Callable[[], bool]], Any]


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
        self.setAutoDelete(False)

    def cancel(self) -> None:
        self._stop.set()

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:  # worker thread
        if self.background:
            lower_thread_priority()
        full_collections.hold()
        try:
            self.execute()
        finally:
            full_collections.release()

    def execute(self) -> None:
        try:
            result = self.work(lambda f, m: self.signals.sigProgress.emit(float(f), str(m)), self._stop.is_set)
        except BaseException as exc:  # noqa: BLE001 - delivered to the GUI thread, shown in the pane
            exc.__memlens_traceback__ = traceback.format_exc()  # type: ignore[attr-defined]
            self.signals.sigError.emit(exc)
        else:
            self.signals.sigDone.emit(result)


class TaskRunner(QObject):
    sigIdle = Signal()  # the last running task has delivered its result

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
        self._when_idle: list[Callable[[], None]] = []

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
        self._live.discard(task)
        if not self._live:
            waiting, self._when_idle = self._when_idle, []
            for fn in waiting:
                fn()
            if not self._live:
                self.sigIdle.emit()

    def when_idle(self, fn: Callable[[], None]) -> None:
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

    def wait(self, msecs: int = 30000) -> bool:
        return self.pool.waitForDone(msecs) and self.foreground_pool.waitForDone(msecs)

    def shutdown(self) -> None:
        for task in list(self._live):
            task.cancel()
        self.pool.waitForDone(30000)
        self.foreground_pool.waitForDone(30000)


class InlineRunner(TaskRunner):
    """Runs work synchronously on the calling thread (tests)."""

    def run(self, work, on_done=None, on_error=None, on_progress=None, *, background=True):
        task = self._task(work, on_done, on_error, on_progress)
        task.execute()  # on this thread, at its own priority
        return task
