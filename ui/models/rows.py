"""A small table model over a list of dict rows (conflict queue, audit log, ...).

Replacing the rows resets the model (these lists are short: a review queue, the latest log
entries); per-column formatters and tooltips keep presentation out of the panes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor

ROW_ROLE = Qt.ItemDataRole.UserRole + 1
ID_ROLE = Qt.ItemDataRole.UserRole + 2


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    format: Callable[[dict[str, Any]], str] | None = None
    tooltip: Callable[[dict[str, Any]], str | None] | None = None
    color: Callable[[dict[str, Any]], str | None] | None = None
    numeric: bool = False


class RowsTableModel(QAbstractTableModel):
    def __init__(self, columns: Sequence[Column], parent=None) -> None:
        super().__init__(parent)
        self.columns = tuple(columns)
        self.rows: list[dict[str, Any]] = []

    def set_rows(self, rows: list[dict[str, Any]]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def row_dict(self, row: int) -> dict[str, Any] | None:
        return self.rows[row] if 0 <= row < len(self.rows) else None

    def row_of(self, key: str, value: Any) -> int | None:
        for i, r in enumerate(self.rows):
            if r.get(key) == value:
                return i
        return None

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.columns)

    def flags(self, index: QModelIndex | QPersistentModelIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole \
                and 0 <= section < len(self.columns):
            return self.columns[section].title
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not (0 <= index.row() < len(self.rows)) \
                or not (0 <= index.column() < len(self.columns)):
            return None
        row = self.rows[index.row()]
        col = self.columns[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            if col.format is not None:
                return col.format(row)
            value = row.get(col.key)
            return "" if value is None else str(value)
        if role == Qt.ItemDataRole.ToolTipRole and col.tooltip is not None:
            return col.tooltip(row)
        if role == Qt.ItemDataRole.ForegroundRole and col.color is not None:
            c = col.color(row)
            return QColor(c) if c else None
        if role == Qt.ItemDataRole.TextAlignmentRole and col.numeric:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == ROW_ROLE:
            return dict(row)
        if role == ID_ROLE:
            return row.get("id")
        return None
