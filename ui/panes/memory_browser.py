"""Memory browser: every memory of the scope in a virtualised table, filtered and searchable.

Selecting a row selects the memory (and its fact) on the bus; a memory or fact selected
elsewhere is found in the table, loading further pages if it lies beyond what is loaded.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta

from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableView,
)

from engine.memory import MEMORY_STATUSES, MemoryFilter
from ui.models.memory_table import COLUMN_INDEX, MemoryTableModel
from ui.panes.base import PaneBase
from ui.selection import Selection

ANY = "any"
SEARCH_DELAY_MS = 250
MAX_PAGES_TO_REACH = 40  # follow a selection this many pages (20,000 rows) before asking to narrow


def _date_bound(text: str, *, upper: bool) -> str | None:
    """'2024-03-01' or a full ISO time -> a comparable bound; an upper date bound includes that day."""
    text = text.strip()
    if not text:
        return None
    try:
        if len(text) == 10:
            d = date.fromisoformat(text)
            return (d + timedelta(days=1)).isoformat() if upper else d.isoformat()
        from engine.timeutil import normalise_iso

        return normalise_iso(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD) or an ISO-8601 time") from None


class MemoryBrowserPane(PaneBase):
    pane_key = "memories"
    title = "Memory browser"
    watched_tables = frozenset({"memories", "facts", "documents", "memory_sources", "chunks"})

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.model = MemoryTableModel(self)
        self._pending: int | None = None  # a memory to select once its page is loaded
        self._pages_followed = 0
        self._syncing = False

        row1 = QHBoxLayout()
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search memory text (Ctrl+F): every word must match")
        self.search.setClearButtonEnabled(True)
        row1.addWidget(self.search, 1)
        self.clear_button = QPushButton("Clear filters", self)
        row1.addWidget(self.clear_button)
        self.root_layout.addLayout(row1)

        row2 = QHBoxLayout()
        self.kind = self._combo("Kind", [ANY, "episode", "fact", "summary"])
        self.status = self._combo("Status", [ANY, *MEMORY_STATUSES])
        self.trust = self._combo("Trust", [ANY, "user", "assistant", "tool", "external"])
        self.source_type = self._combo("Source", [ANY])
        self.category = self._combo("Category", [ANY])
        for w in (self.kind, self.status, self.trust, self.source_type, self.category):
            w.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            w.setMinimumContentsLength(4)
            row2.addWidget(w, 1)
        self.root_layout.addLayout(row2)

        row3 = QHBoxLayout()
        self.time_from = QLineEdit(self)
        self.time_from.setPlaceholderText("from YYYY-MM-DD")
        self.time_to = QLineEdit(self)
        self.time_to.setPlaceholderText("to YYYY-MM-DD (inclusive)")
        self.count_label = QLabel("No database open.", self)
        self.count_label.setProperty("role", "muted")
        row3.addWidget(self.time_from, 1)
        row3.addWidget(self.time_to, 1)
        row3.addWidget(self.count_label, 2)
        self.root_layout.addLayout(row3)

        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.setSortingEnabled(False)  # only the id order is indexed: see _header_clicked
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSortIndicatorShown(True)
        header.setSortIndicator(COLUMN_INDEX["id"], Qt.SortOrder.AscendingOrder)
        header.setSectionsClickable(True)
        header.sectionClicked.connect(self._header_clicked)
        fm = self.fontMetrics()
        em = fm.horizontalAdvance("M")
        for key, sample in (("id", "0000000"), ("kind", "episode"), ("status", "needs review"),
                            ("trust", "assistant"), ("confidence", "Conf."), ("category", "preference"),
                            ("source_type", "markdown"), ("time", "2024-03-01 09:00"),
                            ("replaced_by", "→ m0000000 · 2024-03-01")):
            self.table.setColumnWidth(COLUMN_INDEX[key], fm.horizontalAdvance(sample) + em)
        self._min_text_width = 22 * em
        self.root_layout.addWidget(self.table, 1)

        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(self.apply_filters)
        self.search.textChanged.connect(lambda _t: self._search_timer.start())
        self.search.returnPressed.connect(self.apply_filters)
        for combo in (self.kind, self.status, self.trust, self.source_type, self.category):
            combo.currentIndexChanged.connect(lambda _i: self.apply_filters())
        for edit in (self.time_from, self.time_to):
            edit.editingFinished.connect(self.apply_filters)
        self.clear_button.clicked.connect(self.clear_filters)
        self.table.selectionModel().currentRowChanged.connect(self._row_changed)
        self.table.doubleClicked.connect(self._double_clicked)
        self.model.sigTotal.connect(lambda _n: self._update_count())
        self.model.sigPageLoaded.connect(self._page_loaded)
        self.model.sigError.connect(lambda exc: self.banner.show_error(exc, "Reading memories"))

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit_text_column()

    def _fit_text_column(self) -> None:
        """The text column takes what the others leave, but never less than ~22 characters."""
        others = sum(self.table.columnWidth(c) for c in range(self.model.columnCount()) if c != COLUMN_INDEX["text"])
        free = self.table.viewport().width() - others
        self.table.setColumnWidth(COLUMN_INDEX["text"], max(self._min_text_width, free))

    def _combo(self, label: str, items: list[str]) -> QComboBox:
        combo = QComboBox(self)
        combo.setToolTip(label)
        self._fill(combo, label, items)
        return combo

    @staticmethod
    def _fill(combo: QComboBox, label: str, items: list[str]) -> None:
        current = combo.currentData()
        combo.blockSignals(True)
        combo.clear()
        for item in items:
            combo.addItem(f"{label}: {item.replace('_', ' ')}", None if item == ANY else item)
        i = combo.findData(current) if current is not None else 0
        combo.setCurrentIndex(max(i, 0))
        combo.blockSignals(False)

    # protocol -------------------------------------------------------------------------------------
    def refresh(self) -> None:
        if self.ctx is None:
            self.model.set_source(None)
            self.count_label.setText("No database open.")
            return
        engine, scope = self.ctx.engine, self.ctx.scope
        self.model.set_source(self.ctx, self.current_filter())
        self._update_count()
        self.read(lambda: engine.memory_facets(scope), self._facets)  # after the first page: it scans

    def on_data_changed(self, tables: set[str]) -> None:
        if set(tables) & self.watched_tables and self.ctx is not None:
            # In place, not a reset: the selected row and the scroll position stay where they are
            # while other processes write (live refresh) or curation changes a row.
            self.model.refresh_in_place()
            if set(tables) & {"memories", "documents"}:
                engine, scope = self.ctx.engine, self.ctx.scope
                self.read(lambda: engine.memory_facets(scope), self._facets)

    def on_selected(self, sel: Selection) -> None:
        if self.ctx is None:
            return
        if sel.kind == "memory":
            self._reach(sel.id)
        elif sel.kind == "fact":
            engine, scope = self.ctx.engine, self.ctx.scope
            self.read(lambda: engine.memory_ids_for_facts(scope, [sel.id]).get(sel.id),
                      lambda mid: self._reach(mid) if mid is not None else None)

    def shutdown(self) -> None:
        self._search_timer.stop()
        super().shutdown()

    # filters ----------------------------------------------------------------------------------------
    def _facets(self, facets: dict) -> None:
        self._fill(self.source_type, "Source", [ANY, *facets["source_types"]])
        self._fill(self.category, "Category", [ANY, *facets["categories"]])
        if facets.get("time_min"):
            self.time_from.setToolTip(f"earliest: {facets['time_min']}")
            self.time_to.setToolTip(f"latest: {facets['time_max']}")

    def current_filter(self) -> MemoryFilter:
        return MemoryFilter(
            kind=self.kind.currentData(), status=self.status.currentData(), trust=self.trust.currentData(),
            source_type=self.source_type.currentData(), category=self.category.currentData(),
            time_from=_date_bound(self.time_from.text(), upper=False) if self.time_from.text().strip() else None,
            time_to=_date_bound(self.time_to.text(), upper=True) if self.time_to.text().strip() else None,
            text=self.search.text().strip() or None, descending=self.model.filter.descending)

    def apply_filters(self) -> None:
        self._search_timer.stop()
        if self.ctx is None:
            return
        try:
            flt = self.current_filter()
        except ValueError as exc:
            self.banner.show_notice(f"{exc}. Type a date like 2024-03-01.", "warning")
            return
        self.banner.clear()
        if flt != self.model.filter:
            self.model.set_source(self.ctx, flt)
            self._update_count()

    def clear_filters(self) -> None:
        for combo in (self.kind, self.status, self.trust, self.source_type, self.category):
            combo.blockSignals(True)
            combo.setCurrentIndex(0)
            combo.blockSignals(False)
        for edit in (self.search, self.time_from, self.time_to):
            edit.blockSignals(True)
            edit.clear()
            edit.blockSignals(False)
        self.banner.clear()
        if self.ctx is not None:
            self.model.set_source(self.ctx, replace(MemoryFilter(), descending=self.model.filter.descending))
            self._update_count()
        if self._pending is not None:
            self._reach(self._pending)

    def _header_clicked(self, section: int) -> None:
        header = self.table.horizontalHeader()
        descending = not self.model.filter.descending if section == COLUMN_INDEX["id"] else self.model.filter.descending
        order = Qt.SortOrder.DescendingOrder if descending else Qt.SortOrder.AscendingOrder
        header.setSortIndicator(COLUMN_INDEX["id"], order)
        if section == COLUMN_INDEX["id"] and self.ctx is not None:
            self.model.sort(section, order)
            self._update_count()

    def focus_search(self) -> None:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def _update_count(self) -> None:
        if self.ctx is None:
            return
        loaded = self.model.rowCount()
        total = self.model.total
        if total is None:
            self.count_label.setText(f"{loaded:,} memories loaded, counting…")
        else:
            noun = "memory" if total == 1 else "memories"
            shown = "" if loaded >= total else f" ({loaded:,} loaded; scroll for more)"
            filt = "" if self.model.filter.empty else " matching the filters"
            self.count_label.setText(f"{total:,} {noun}{filt}{shown}")

    # selection ---------------------------------------------------------------------------------------
    def selected_memory_id(self) -> int | None:
        index = self.table.currentIndex()
        row = self.model.row(index.row()) if index.isValid() else None
        return row["id"] if row else None

    def _row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._syncing or not current.isValid():
            return
        row = self.model.row(current.row())
        if row is None:
            return
        self._pending = None
        self.select("memory", row["id"])
        if row["fact_id"]:
            self.select("fact", row["fact_id"])

    def _double_clicked(self, index: QModelIndex) -> None:
        """Double-click an outdated memory's "Replaced by": go to what replaced it."""
        row = self.model.row(index.row()) if index.isValid() else None
        if row and row.get("replaced_by"):
            self._reach(int(row["replaced_by"]))  # its row here (found quietly, as for a selection from elsewhere)
            self.select("memory", int(row["replaced_by"]))  # and the other panes follow

    def _select_row(self, row: int) -> None:
        self._syncing = True
        try:
            index = self.model.index(row, COLUMN_INDEX["id"])
            self.table.selectionModel().setCurrentIndex(
                index, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
            self.table.scrollTo(index, QAbstractItemView.ScrollHint.PositionAtCenter)
        finally:
            self._syncing = False

    def _reach(self, memory_id: int) -> None:
        """Select a memory's row, loading pages up to it, or say why it is not shown."""
        row = self.model.row_of(memory_id)
        if row is not None:
            self._pending = None
            self._select_row(row)
            return
        if self.ctx is None:
            return
        self._pending = memory_id
        self._pages_followed = 0
        engine, scope, flt = self.ctx.engine, self.ctx.scope, self.model.filter
        self.read(lambda: engine.memory_rank(scope, flt, memory_id), lambda rank: self._ranked(memory_id, rank))

    def _ranked(self, memory_id: int, rank: int | None) -> None:
        if self._pending != memory_id:
            return
        if rank is None:
            self.banner.show_notice(f"Memory {memory_id} is hidden by the current filters (or is in another scope).",
                                    "info", [("Clear filters", self.clear_filters)])
            return
        if rank >= self.model.rowCount() + MAX_PAGES_TO_REACH * self.model.page_size:
            self.banner.show_notice(f"Memory {memory_id} is row {rank + 1:,} of this listing: narrow the filters "
                                    "or search for its text to reach it.", "info")
            self._pending = None
            return
        self.model.fetchMore(QModelIndex())

    def _page_loaded(self, _rows: int) -> None:
        self._update_count()
        if self._pending is None:
            return
        row = self.model.row_of(self._pending)
        if row is not None:
            self._pending = None
            self._select_row(row)
        elif self.model.canFetchMore() and self._pages_followed < MAX_PAGES_TO_REACH:
            self._pages_followed += 1
            self.model.fetchMore(QModelIndex())
