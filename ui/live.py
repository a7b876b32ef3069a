"""Live refresh: what other processes write (an agent over MCP, a CLI ingest, an import) shows up
in the open inspector within a second, without the operator losing their place.

A GUI-thread QTimer polls `ChangeSignal.signature()` (data_version on a dedicated read-only
connection plus the file and -wal stats: microseconds). When it moves, `probe_changes` runs in the
task runner and works out which tables changed for the scope being shown; the bus then announces
them (`bus.data_changed(tables)`) and only panes watching those tables refresh. Changes this window
announced itself (curation) are not announced twice. `sigNewMemories` carries how many memories
arrived in the scope, for the status-bar indicator; `sigScopesChanged` says other scopes grew.
"""

from __future__ import annotations

import functools
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from engine.memory import ChangeSignal
from ui.context import AppContext
from ui.selection import SelectionBus

POLL_MS = 400


class LiveRefresh(QObject):
    sigNewMemories = Signal(int)  # memories written into the shown scope by someone else
    sigScopesChanged = Signal()  # memories or documents appeared in other scopes
    sigProbed = Signal(object)  # the set of tables announced (possibly empty): for tests and status

    def __init__(self, bus: SelectionBus, parent: QObject | None = None, *, interval_ms: int = POLL_MS) -> None:
        super().__init__(parent)
        self.bus = bus
        self.ctx: AppContext | None = None
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.poll)
        self._signal: ChangeSignal | None = None
        self._last: Any = None
        self._probe = None
        self._generation = 0
        self._inflight = False
        self._again = False
        self._emitting = False
        self._announced: set[str] = set()  # tables someone else in this window announced since the last probe
        self._closed = False
        bus.sigDataChanged.connect(self._on_bus)

    @property
    def active(self) -> bool:
        return self.timer.isActive()

    def set_context(self, ctx: AppContext | None) -> None:
        """Follow another database or scope (None: stop)."""
        self._stop()
        self.ctx = ctx
        if ctx is None or self._closed or str(ctx.engine.path) == ":memory:":
            return
        try:
            self._signal = ctx.engine.change_signal()
        except Exception:  # noqa: BLE001 - no live refresh for a file we cannot open twice; the rest works
            self._signal = None
            return
        self._last = self._signal.signature()
        self._start_probe()  # the baseline: nothing is announced for it
        self.timer.start()

    def shutdown(self) -> None:
        """Stop the timer, drop pending probes and close the connection (before the window closes)."""
        self._closed = True
        self._stop()
        self.ctx = None
        try:
            self.bus.sigDataChanged.disconnect(self._on_bus)
        except (RuntimeError, TypeError):
            pass

    def _stop(self) -> None:
        self.timer.stop()
        self._generation += 1
        self._inflight = False
        self._again = False
        self._probe = None
        self._announced = set()
        if self._signal is not None:
            self._signal.close()
            self._signal = None

    # polling ---------------------------------------------------------------------------------------
    def poll(self) -> None:
        if self.ctx is None or self._signal is None:
            return
        signature = self._signal.signature()
        if signature == self._last:
            return
        self._last = signature
        if self._inflight:
            self._again = True  # look again when the running probe is back
            return
        self._start_probe()

    def _start_probe(self) -> None:
        ctx = self.ctx
        if ctx is None:
            return
        self._inflight = True
        gen, engine, scope, previous = self._generation, ctx.engine, ctx.scope, self._probe
        ctx.runner.run(lambda _p, _s: engine.probe_changes(scope, previous),
                       functools.partial(self._probed, gen), functools.partial(self._failed, gen))

    def _probed(self, gen: int, result) -> None:
        if gen != self._generation or self._closed:
            return
        self._inflight = False
        probe, changes = result
        baseline = self._probe is None
        self._probe = probe
        announced, self._announced = self._announced, set()
        tables = set() if baseline else changes.tables - announced
        if tables:
            self._emitting = True
            try:
                self.bus.data_changed(tables)
            finally:
                self._emitting = False
        if not baseline:
            if changes.new_memories and "memories" not in announced:
                self.sigNewMemories.emit(changes.new_memories)
            if changes.other_scopes:
                self.sigScopesChanged.emit()
        self.sigProbed.emit(tables)
        if self._again:
            self._again = False
            self._start_probe()

    def _failed(self, gen: int, _exc: BaseException) -> None:
        # A busy or vanished file: keep the old marks and look again at the next change.
        if gen == self._generation:
            self._inflight = False
            self._last = None

    def _on_bus(self, tables) -> None:
        if not self._emitting:
            self._announced |= set(tables)


__all__ = ["LiveRefresh", "POLL_MS"]
