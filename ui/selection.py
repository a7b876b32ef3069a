"""One selection bus: selecting a memory, fact, chunk, document or trace candidate anywhere
focuses it in every pane. Panes emit `select(...)` and listen to `sigSelected`.

Emitting the same selection twice is a no-op, so panes that re-select what they were told to
show cannot start a ping-pong.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal


@dataclass(frozen=True, slots=True)
class Selection:
    kind: str  # memory | fact | chunk | document | trace | conflict | entity
    id: int
    source: str = ""  # the pane that made it (panes ignore their own selections if they like)
    extra: tuple = ()  # e.g. ("trace", trace_id) for a trace candidate


class SelectionBus(QObject):
    sigSelected = Signal(object)  # Selection
    sigAsOfChanged = Signal(object)  # ISO string or None: the as-of time for every pane and query
    sigDataChanged = Signal(object)  # a set of table names that changed (curation, ingest, live refresh)
    sigShowPane = Signal(str)  # a pane key: a pane asks the window to bring another pane forward

    def __init__(self) -> None:
        super().__init__()
        self.current: Selection | None = None
        self.as_of: str | None = None

    def select(self, kind: str, id: int, *, source: str = "", extra: tuple = ()) -> None:
        sel = Selection(kind, int(id), source, extra)
        if self.current is not None and (self.current.kind, self.current.id, self.current.extra) == (kind, sel.id, extra):
            return
        self.current = sel
        self.sigSelected.emit(sel)

    def set_as_of(self, as_of: str | None) -> None:
        if as_of != self.as_of:
            self.as_of = as_of
            self.sigAsOfChanged.emit(as_of)

    def data_changed(self, tables: set[str]) -> None:
        self.sigDataChanged.emit(set(tables))

    def show_pane(self, key: str) -> None:
        """Ask for pane `key` to be shown (e.g. the pane that explains what was just selected)."""
        self.sigShowPane.emit(key)
