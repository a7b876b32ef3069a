"""Item models for the Health pane: the checks (one row each, with a trend) and one check's items.

The items model pages: it holds what has been fetched and the check's total count, and when the
view scrolls to the end `fetchMore` asks its fetcher (the pane, which reads the next page in the
task runner) and returns at once; the page arrives through `append` as a begin/end insert pair.
So a check with a million items costs the GUI thread one page at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from engine.health import HealthItem
from ui.models.rows import TREND_ROLE, Column, RowTableModel
from ui.theme import current_theme

PANE_TITLES = {"spans": "Source spans", "graph": "Fact graph", "timeline": "Version timeline",
               "memories": "Memory browser", "profile": "Profile", "conflicts": "Conflicts"}


def _trend_tip(row: dict[str, Any]) -> str:
    points = row.get("trend_points") or []
    if not points:
        return "No recorded runs yet"
    lines = [f"{p['taken_at'][:16].replace('T', ' ')}  {p['count']:,}  ({p['trigger']})" for p in points[-12:]]
    return "Items at each recorded run (open, ingest, memlens health):\n" + "\n".join(lines)


class ChecksModel(RowTableModel):
    """One row per check: title, item count, trend (drawn by TrendDelegate), seconds."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent, columns=(
            Column("title", "Check", tooltip=lambda r: f"{r['name']}" + (f"\n{r['note']}" if r.get("note") else "")),
            Column("count", "Items", numeric=True, format=lambda r: "—" if r["count"] is None else f"{r['count']:,}",
                   color=lambda r: None if not r["count"] else current_theme().status["needs_review"]),
            Column("trend", "Trend", format=lambda r: "", tooltip=_trend_tip),
            Column("seconds", "Time", numeric=True,
                   format=lambda r: "" if r.get("seconds") is None else f"{r['seconds']:.2f} s"),
        ))

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == TREND_ROLE and index.isValid() and 0 <= index.row() < len(self.rows):
            return [p["count"] for p in self.rows[index.row()].get("trend_points") or []]
        return super().data(index, role)


class TrendDelegate(QStyledItemDelegate):
    """A sparkline of TREND_ROLE inside the cell (the last point marked)."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        values = index.data(TREND_ROLE) or []
        if not values:
            return
        rect = QRectF(option.rect).adjusted(4, 4, -4, -4)
        lo, hi = min(values), max(values)
        span = (hi - lo) or 1
        step = rect.width() / max(1, len(values) - 1)
        points = [QPointF(rect.left() + i * step if len(values) > 1 else rect.center().x(),
                          rect.bottom() - (v - lo) / span * rect.height() if hi != lo else rect.center().y())
                  for i, v in enumerate(values)]
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        color = QColor(current_theme().status["needs_review"] if values[-1] else current_theme().status["active"])
        painter.setPen(QPen(color, 1.5))
        if len(points) > 1:
            painter.drawPolyline(QPolygonF(points))
        painter.setBrush(color)
        painter.drawEllipse(points[-1], 2.5, 2.5)
        painter.restore()


class HealthItemsModel(RowTableModel):
    """One check's items, paged: `total` is the check's count, the rows what has been fetched
    (each row {"key", "item"}: the HealthItem and its stable key)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent, columns=(
            Column("summary", "Item", format=lambda r: r["item"].summary, tooltip=lambda r: r["item"].summary),
            Column("pane", "Opens in", format=lambda r: PANE_TITLES.get(r["item"].pane, r["item"].pane),
                   tooltip=lambda r: f"Double-click to open it in {PANE_TITLES.get(r['item'].pane, r['item'].pane)}"),
        ))
        self.total = 0
        self.fetcher: Callable[[int], None] | None = None  # called with the offset of the next page
        self.pending = False

    @property
    def items(self) -> list[HealthItem]:
        return [r["item"] for r in self.rows]

    def set_items(self, items: Sequence[HealthItem], total: int, fetcher: Callable[[int], None] | None) -> None:
        self.fetcher, self.pending = fetcher, False
        self.total = max(total, len(items))
        self.set_rows([{"key": i.key, "item": i} for i in items])

    def append(self, items: Sequence[HealthItem], total: int) -> None:
        """A fetched page: items already shown (the store changed between pages) are skipped, and a
        page with nothing new ends the paging."""
        seen = {r["key"] for r in self.rows}
        fresh = [i for i in items if i.key not in seen]
        self.pending = False
        if fresh:
            self.beginInsertRows(QModelIndex(), len(self.rows), len(self.rows) + len(fresh) - 1)
            self.rows.extend({"key": i.key, "item": i} for i in fresh)
            self.endInsertRows()
        self.total = max(total, len(self.rows)) if fresh else len(self.rows)

    def item(self, row: int) -> HealthItem | None:
        r = self.row(row)
        return r["item"] if r else None

    def canFetchMore(self, parent=QModelIndex()) -> bool:  # noqa: N802
        return not parent.isValid() and self.fetcher is not None and not self.pending and len(self.rows) < self.total

    def fetchMore(self, parent=QModelIndex()) -> None:  # noqa: N802
        if self.canFetchMore(parent):
            self.pending = True
            self.fetcher(len(self.rows))  # type: ignore[misc]
