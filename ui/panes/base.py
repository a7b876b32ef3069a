"""The pane protocol: every inspector pane is a `PaneBase` (a QWidget shown in a dock).

Lifecycle, driven by the main window:

- constructed with no arguments (`Pane()` or `Pane(parent)`), then `set_context(ctx)` whenever a database is
  opened, closed (`ctx=None`) or the scope changes. `set_context` reconnects the bus and calls
  `refresh()`.
- `refresh()`: re-read everything for `self.ctx` (through `self.read(...)`/`self.run_task(...)`,
  never on the GUI thread beyond one small query). Must cope with `self.ctx is None`.
- `on_selected(sel)`: a `ui.selection.Selection` made anywhere (selections this pane made itself
  are filtered out unless `receives_own_selections` is True).
- `on_data_changed(tables)`: a set of table names that changed (curation, ingest). Default:
  `refresh()` when `tables` meets `watched_tables` (empty `watched_tables` = any change).
- `on_as_of_changed(as_of)`: the bus's as-of time (ISO string or None). Default: nothing.
- `shutdown()`: stop timers and drop pending results; called before the window closes (and when
  the pane itself is closed). Subclasses that start timers override it and call `super().shutdown()`.

Optional hooks the window calls when a pane has them: `use_settings(settings_store, runner)`
(given once, before any context), `focus_search()` (Edit > Find, Ctrl+F) and `focus_query()`
(Query > Run query, Ctrl+Return). Panes are shown inside a scroll area, so a large minimum size
never forces the window wider.

Helpers: `self.select(kind, id)` publishes on the bus tagged with this pane's key;
`self.read(fn, on_done)` runs `fn()` in the runner and hands the result to `on_done` on the GUI
thread, unless the context changed meanwhile (stale results are dropped; `run_task`'s
`on_settled` runs regardless, to unlock what the task locked); errors land in
`self.banner` with what to do. `self.root_layout` is a QVBoxLayout whose first item is the banner:
add the pane's widgets to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from PySide6.QtWidgets import QVBoxLayout, QWidget

from ui.context import AppContext
from ui.selection import Selection
from ui.tasks import Task, Work
from ui.widgets.banner import NoticeBanner


class PaneBase(QWidget):
    pane_key: ClassVar[str] = ""
    title: ClassVar[str] = ""
    watched_tables: ClassVar[frozenset[str]] = frozenset()
    receives_own_selections: ClassVar[bool] = False

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(f"pane-{self.pane_key or type(self).__name__}")
        self.ctx: AppContext | None = None
        self._generation = 0
        self._closed = False
        self.root_layout = QVBoxLayout(self)
        self.root_layout.setContentsMargins(4, 4, 4, 4)
        self.root_layout.setSpacing(4)
        self.banner = NoticeBanner(self)
        self.root_layout.addWidget(self.banner)

    # context ------------------------------------------------------------------------------------
    def set_context(self, ctx: AppContext | None) -> None:
        if self.ctx is not None:
            bus = self.ctx.bus
            for sig, slot in ((bus.sigSelected, self._dispatch_selected),
                              (bus.sigDataChanged, self._dispatch_data_changed),
                              (bus.sigAsOfChanged, self._dispatch_as_of)):
                try:
                    sig.disconnect(slot)
                except (RuntimeError, TypeError):
                    pass
        self.ctx = ctx
        self._generation += 1
        self.banner.clear()
        if ctx is not None:
            ctx.bus.sigSelected.connect(self._dispatch_selected)
            ctx.bus.sigDataChanged.connect(self._dispatch_data_changed)
            ctx.bus.sigAsOfChanged.connect(self._dispatch_as_of)
        self.refresh()

    def refresh(self) -> None:
        """Re-read everything for the current context. Override."""

    def on_selected(self, sel: Selection) -> None:
        """React to a selection made elsewhere. Override."""

    def on_data_changed(self, tables: set[str]) -> None:
        if not self.watched_tables or (set(tables) & self.watched_tables):
            self.refresh()

    def on_as_of_changed(self, as_of: str | None) -> None:
        """React to the as-of time. Override."""

    def shutdown(self) -> None:
        """Stop timers and drop pending results. Overrides call super().shutdown()."""
        self._closed = True
        self._generation += 1

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        self.shutdown()
        super().closeEvent(event)

    # helpers --------------------------------------------------------------------------------------
    def select(self, kind: str, id: int, *, extra: tuple = ()) -> None:
        if self.ctx is not None:
            self.ctx.bus.select(kind, id, source=self.pane_key, extra=extra)

    def run_task(self, work: Work, on_done: Callable[[Any], None], *,
                 on_error: Callable[[BaseException], None] | None = None,
                 on_progress: Callable[[float, str], None] | None = None,
                 on_settled: Callable[[], None] | None = None) -> Task | None:
        """Run runner-style `work(progress, should_stop)`; drop the result if the context changed.

        `on_settled()` runs first when the task has ended, however it ended and whatever the
        context is by then: what a pane locked for the task (a Run button, a progress bar) is
        unlocked there, since a dropped result must not leave it locked."""
        if self.ctx is None:
            return None
        gen = self._generation

        def done(result: Any) -> None:
            if on_settled is not None:
                on_settled()
            if gen == self._generation and not self._closed:
                on_done(result)

        def failed(exc: BaseException) -> None:
            if on_settled is not None:
                on_settled()
            if gen != self._generation or self._closed:
                return
            if on_error is not None:
                on_error(exc)
            else:
                self.banner.show_error(exc)

        return self.ctx.runner.run(work, done, failed, on_progress)

    def read(self, fn: Callable[[], Any], on_done: Callable[[Any], None], *,
             on_error: Callable[[BaseException], None] | None = None) -> Task | None:
        """Run a zero-argument read `fn()` in the runner (see run_task)."""
        return self.run_task(lambda _progress, _stop: fn(), on_done, on_error=on_error)

    # dispatch (filters own selections and closed panes) ----------------------------------------
    def _dispatch_selected(self, sel: Selection) -> None:
        if self._closed or (sel.source == self.pane_key and not self.receives_own_selections):
            return
        self.on_selected(sel)

    def _dispatch_data_changed(self, tables: set[str]) -> None:
        if not self._closed:
            self.on_data_changed(tables)

    def _dispatch_as_of(self, as_of: str | None) -> None:
        if not self._closed:
            self.on_as_of_changed(as_of)
