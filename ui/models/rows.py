"""The one table model over a list of dict rows, and every custom item-data role of the inspector.

`RowTableModel` is what the conflict queue, the audit log, health, traces and benchmarks show
their lists with. Columns are `Column`s: a key and a title, and optionally a formatter, a tooltip,
a colour and right alignment, so a short list is declared where it is used; a model with more
logic overrides `cell` (the display value by key), `sort_key`, `tooltip` and `extra_role`
instead. `set_rows` resets (short lists); `append_rows` adds at the end as a begin/end insert pair,
so a growing list keeps its scroll position, selection and column widths.

The roles are numbered here and only here: two models answering one number with different
meanings is how a view reads a memory id as a row dict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor

_USER = Qt.ItemDataRole.UserRole
ROW_ROLE = _USER + 1  # the row's dict
ID_ROLE = _USER + 2  # the row's "id"
SORT_ROLE = _USER + 3  # the value a QSortFilterProxyModel sorts the column by
MEMORY_ID_ROLE = _USER + 4  # the memory a row (or a profile line) stands for
FACT_ID_ROLE = _USER + 5  # the fact a row (or a profile line) stands for
STAGE_ROLE = _USER + 6  # the recall stage that dropped a trace candidate (None: ranked)
KIND_ROLE = _USER + 7  # what a tree node is (the profile: "section" | "line" | "fact" | "empty")
TREND_ROLE = _USER + 8  # list[int]: a health check's recorded counts, oldest first

Index = QModelIndex | QPersistentModelIndex


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    format: Callable[[dict[str, Any]], str] | None = None  # the display text (default: cell(row, key))
    tooltip: Callable[[dict[str, Any]], str | None] | None = None
    color: Callable[[dict[str, Any]], str | None] | None = None  # a foreground colour name
    numeric: bool = False  # right-aligned


class RowTableModel(QAbstractTableModel):
    """A read-only table over a list of row dicts (see the module docstring)."""

    columns: tuple[Column, ...] = ()

    def __init__(self, parent=None, *, columns: Sequence[Column] | None = None) -> None:
        super().__init__(parent)
        if columns is not None:
            self.columns = tuple(columns)
        self.rows: list[dict[str, Any]] = []

    # rows -----------------------------------------------------------------------------------------
    def set_rows(self, rows: Sequence[dict[str, Any]]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def append_rows(self, rows: Sequence[dict[str, Any]]) -> None:
        """Add rows at the end without a reset: the view keeps its scroll position, selection and widths."""
        if not rows:
            return
        n = len(self.rows)
        self.beginInsertRows(QModelIndex(), n, n + len(rows) - 1)
        self.rows.extend(rows)
        self.endInsertRows()

    def row(self, i: int) -> dict[str, Any] | None:
        return self.rows[i] if 0 <= i < len(self.rows) else None

    def row_of(self, key: str, value: Any) -> int | None:
        """The first row whose `key` equals `value` (None: no such row)."""
        return next((i for i, r in enumerate(self.rows) if r.get(key) == value), None)

    def column_index(self, key: str) -> int:
        return next(i for i, c in enumerate(self.columns) if c.key == key)

    # hooks ------------------------------------------------------------------------------------------
    def cell(self, row: dict[str, Any], key: str) -> Any:
        return row.get(key)

    def sort_key(self, row: dict[str, Any], key: str) -> Any:
        value = self.cell(row, key)
        return value if isinstance(value, (int, float)) else str(value or "")

    def tooltip(self, row: dict[str, Any], key: str) -> str | None:
        return None

    def extra_role(self, row: dict[str, Any], key: str, role: int) -> Any:
        return None

    # Qt -------------------------------------------------------------------------------------------
    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802 (Qt naming)
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.columns)

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal \
                and 0 <= section < len(self.columns):
            return self.columns[section].title
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self.rows) or not 0 <= index.column() < len(self.columns):
            return None
        row = self.rows[index.row()]
        col = self.columns[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            if col.format is not None:
                return col.format(row)
            value = self.cell(row, col.key)
            if value is None:
                return ""
            return f"{value:.4f}" if isinstance(value, float) else str(value)
        if role == Qt.ItemDataRole.ToolTipRole:
            return col.tooltip(row) if col.tooltip is not None else self.tooltip(row, col.key)
        if role == Qt.ItemDataRole.ForegroundRole and col.color is not None:
            c = col.color(row)
            return QColor(c) if c else None
        if role == Qt.ItemDataRole.TextAlignmentRole and col.numeric:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == SORT_ROLE:
            return self.sort_key(row, col.key)
        if role == ROW_ROLE:
            return row
        if role == ID_ROLE:
            return row.get("id")
        return self.extra_role(row, col.key, role)


__all__ = ["Column", "RowTableModel", "ROW_ROLE", "ID_ROLE", "SORT_ROLE", "MEMORY_ID_ROLE", "FACT_ID_ROLE",
           "STAGE_ROLE", "KIND_ROLE", "TREND_ROLE"]
