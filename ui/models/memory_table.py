"""The memory browser's table: virtualised over the store, one keyset page at a time.

Only the rows the view has scrolled to are loaded (canFetchMore/fetchMore, pages of 500); the
filter's total comes from a separate count query so the operator sees "12 of 1,000,000". All
reads go through the task runner; results of a superseded filter are dropped by generation.
"""

from __future__ import annotations

import functools
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QColor

from engine.memory import MemoryFilter
from ui.context import AppContext
from ui.models.rows import FACT_ID_ROLE, MEMORY_ID_ROLE, ROW_ROLE
from ui.theme import current_theme

COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "ID"), ("kind", "Kind"), ("text", "Text"), ("status", "Status"), ("trust", "Trust"),
    ("confidence", "Conf."), ("category", "Category"), ("source_type", "Source"), ("time", "Time"),
    ("replaced_by", "Replaced by"),
)
COLUMN_INDEX = {key: i for i, (key, _) in enumerate(COLUMNS)}
TEXT_CHARS = 200


def _elide(text: str, limit: int = TEXT_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class MemoryTableModel(QAbstractTableModel):
    sigTotal = Signal(int)  # rows matching the filter (count query)
    sigPageLoaded = Signal(int)  # rows loaded so far
    sigError = Signal(object)  # an exception from a read

    def __init__(self, parent=None, *, page_size: int = 500) -> None:
        super().__init__(parent)
        self.page_size = page_size
        self.ctx: AppContext | None = None
        self.filter = MemoryFilter()
        self.rows: list[dict[str, Any]] = []
        self._row_of: dict[int, int] = {}
        self.total: int | None = None
        self._loading = False
        self._exhausted = True
        self._generation = 0
        self._resetting = False

    # source --------------------------------------------------------------------------------------
    def set_source(self, ctx: AppContext | None, flt: MemoryFilter | None = None) -> None:
        """Point the model at a context and filter: clears it, then counts and loads the first page."""
        self._resetting = True  # listeners of modelReset may ask for more: not until the reset is over
        self.beginResetModel()
        self._generation += 1
        self.ctx = ctx
        if flt is not None:
            self.filter = flt
        self.rows = []
        self._row_of = {}
        self.total = None
        self._loading = False
        self._exhausted = ctx is None
        self.endResetModel()
        self._resetting = False
        if ctx is None:
            return
        gen = self._generation
        engine, scope, flt_now = ctx.engine, ctx.scope, self.filter
        self.fetchMore(QModelIndex())  # the first page first: a count can take a full scan
        ctx.runner.run(lambda _p, _s: engine.count_memories(scope, flt_now),
                       functools.partial(self._counted, gen), functools.partial(self._failed, gen))

    def reload(self) -> None:
        self.set_source(self.ctx, self.filter)

    def refresh_in_place(self) -> None:
        """Re-read the loaded rows (and the next page when everything was loaded) WITHOUT a reset:
        changed rows are updated, new ones inserted, gone ones removed, so the view keeps its
        selection and scroll position (live refresh, curation). Falls back to a reload when empty."""
        if self.ctx is None or not self.rows:
            self.reload()
            return
        gen, n = self._generation, len(self.rows)
        limit = n + (self.page_size if self._exhausted else 0)
        engine, scope, flt = self.ctx.engine, self.ctx.scope, self.filter

        def work(_p, _s):
            return engine.browse_memories(scope, flt, after_id=None, limit=limit), engine.count_memories(scope, flt)

        self.ctx.runner.run(work, lambda res: self._merge(gen, n, limit, *res), functools.partial(self._failed, gen))

    def _merge(self, gen: int, n_before: int, limit: int, fresh: list[dict[str, Any]], total: int) -> None:
        if gen != self._generation:
            return
        if self._loading or len(self.rows) != n_before:  # a page arrived meanwhile: read again
            self.refresh_in_place()
            return
        old_ids = [r["id"] for r in self.rows]
        new_ids = [r["id"] for r in fresh]
        if new_ids[:len(old_ids)] == old_ids:  # the usual case: updates, and rows appended at the end
            changed = [i for i, (a, b) in enumerate(zip(self.rows, fresh)) if a != b]
            for i in changed:
                self.rows[i] = fresh[i]
            if changed:
                self.dataChanged.emit(self.index(min(changed), 0), self.index(max(changed), len(COLUMNS) - 1))
            if len(fresh) > len(old_ids):
                first = len(old_ids)
                self._loading = True  # no nested fetch from inside rowsInserted (see _page)
                self.beginInsertRows(QModelIndex(), first, len(fresh) - 1)
                for i in range(first, len(fresh)):
                    self._row_of[fresh[i]["id"]] = i
                self.rows.extend(fresh[first:])
                self.endInsertRows()
                self._loading = False
        else:  # rows went or came in the middle: one layout change that moves the persistent indexes
            self.layoutAboutToBeChanged.emit()
            position = {mid: i for i, mid in enumerate(new_ids)}
            old_indexes = self.persistentIndexList()
            old_rows = [old_ids[i.row()] if 0 <= i.row() < len(old_ids) else None for i in old_indexes]
            self.rows = list(fresh)
            self._row_of = {mid: i for i, mid in enumerate(new_ids)}
            new_indexes = [self.createIndex(position[mid], i.column()) if mid in position else QModelIndex()
                           for i, mid in zip(old_indexes, old_rows)]
            self.changePersistentIndexList(old_indexes, new_indexes)
            self.layoutChanged.emit()
        self._exhausted = len(fresh) < limit
        if total != self.total:
            self.total = total
            self.sigTotal.emit(total)
        self.sigPageLoaded.emit(len(self.rows))

    def _counted(self, gen: int, n: int) -> None:
        if gen == self._generation:
            self.total = n
            self.sigTotal.emit(n)

    def _failed(self, gen: int, exc: BaseException) -> None:
        if gen == self._generation:
            self._loading = False
            self._exhausted = True
            self.sigError.emit(exc)

    # paging ----------------------------------------------------------------------------------------
    def canFetchMore(self, parent=QModelIndex()) -> bool:  # noqa: N802 (Qt naming)
        if parent.isValid():
            return False
        return not self._loading and not self._exhausted and not self._resetting

    def fetchMore(self, parent=QModelIndex()) -> None:  # noqa: N802
        if parent.isValid() or self._loading or self._exhausted or self._resetting or self.ctx is None:
            return
        self._loading = True
        gen = self._generation
        after = self.rows[-1]["id"] if self.rows else None
        engine, scope, flt, limit = self.ctx.engine, self.ctx.scope, self.filter, self.page_size
        self.ctx.runner.run(lambda _p, _s: engine.browse_memories(scope, flt, after_id=after, limit=limit),
                            functools.partial(self._page, gen), functools.partial(self._failed, gen))

    def _page(self, gen: int, page: list[dict[str, Any]]) -> None:
        if gen != self._generation:
            return
        if len(page) < self.page_size:
            self._exhausted = True
        if page:
            # Still "loading" while the insertion is in flight: a view (or the model tester) that
            # asks for more from inside rowsInserted must not start a nested insertion.
            first = len(self.rows)
            self.beginInsertRows(QModelIndex(), first, first + len(page) - 1)
            for i, row in enumerate(page):
                self._row_of[row["id"]] = first + i
            self.rows.extend(page)
            self.endInsertRows()
        self._loading = False
        self.sigPageLoaded.emit(len(self.rows))

    @property
    def loading(self) -> bool:
        return self._loading

    @property
    def exhausted(self) -> bool:
        return self._exhausted

    def row_of(self, memory_id: int) -> int | None:
        return self._row_of.get(memory_id)

    def row(self, row: int) -> dict[str, Any] | None:
        return self.rows[row] if 0 <= row < len(self.rows) else None

    # Qt model ------------------------------------------------------------------------------------------
    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(COLUMNS)

    def flags(self, index: QModelIndex | QPersistentModelIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(COLUMNS):
            if role == Qt.ItemDataRole.DisplayRole:
                return COLUMNS[section][1]
            if role == Qt.ItemDataRole.ToolTipRole and section == 0:
                return "Memory id (click to reverse the order)"
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not (0 <= index.row() < len(self.rows)) or not (0 <= index.column() < len(COLUMNS)):
            return None
        row = self.rows[index.row()]
        key = COLUMNS[index.column()][0]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(row, key)
        if role == Qt.ItemDataRole.ToolTipRole:
            if key == "text":
                more = "…" if row["text_length"] > len(row["text"]) else ""
                return row["text"] + more
            if key == "status" and row.get("forget_reason"):
                return f"{row['status']}: {row['forget_reason']}"
            if key in ("replaced_by", "text") and row.get("replaced_by"):
                what = "its claim" if row["kind"] == "episode" else "this fact"
                return (f"Outdated: {what} '{row['replaced_claim']}' was replaced on {row['replaced_on']} by "
                        f"m{row['replaced_by']} (double-click to go there)")
            return None
        if role == Qt.ItemDataRole.ForegroundRole and key in ("replaced_by", "text") and row.get("replaced_by"):
            return QColor(current_theme().status.get("superseded") or "#b45309")
        if role == Qt.ItemDataRole.ForegroundRole and key == "status":
            color = current_theme().status.get(row["status"])
            return QColor(color) if color else None
        if role == Qt.ItemDataRole.TextAlignmentRole and key in ("id", "confidence"):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == MEMORY_ID_ROLE:
            return row["id"]
        if role == FACT_ID_ROLE:
            return row["fact_id"]
        if role == ROW_ROLE:
            return dict(row)
        return None

    @staticmethod
    def _display(row: dict[str, Any], key: str) -> str:
        value = row.get(key)
        if key == "text":
            text = _elide(row["text"])
            return ("★ " if row.get("pinned") else "") + text
        if key == "confidence":
            return f"{value:.2f}" if value is not None else ""
        if key == "time":
            return (value or "").replace("T", " ").rstrip("Z")[:16]
        if key == "status":
            return (value or "").replace("_", " ")
        if key == "replaced_by":
            return f"→ m{value} · {row.get('replaced_on') or '?'}" if value else ""
        return "" if value is None else str(value)

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        """Only the id order is indexed at a million rows: other columns keep it."""
        if column != COLUMN_INDEX["id"]:
            return
        descending = order == Qt.SortOrder.DescendingOrder
        if descending != self.filter.descending:
            from dataclasses import replace

            self.set_source(self.ctx, replace(self.filter, descending=descending))
