"""Profile: what the agent always knows about the user, each line expandable to its facts.

Static lines (identity, role, durable preferences) and dynamic lines (plans, current focus),
then the lines the token budget left out. Under every line: the facts that produced it, with
subject, predicate, object, confidence and the evidence quote with its source.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QItemSelectionModel, QModelIndex
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QSpinBox, QTreeView

from ui.models.profile_tree import ProfileTreeModel
from ui.models.rows import FACT_ID_ROLE, KIND_ROLE
from ui.panes.base import PaneBase
from ui.selection import Selection

EXPAND_ALL_UP_TO = 60  # facts: small profiles open fully, large ones line by line


class ProfilePane(PaneBase):
    pane_key = "profile"
    title = "Profile"
    watched_tables = frozenset({"facts", "memories", "documents"})

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        top = QHBoxLayout()
        self.summary = QLabel("No database open.", self)
        self.summary.setWordWrap(True)
        top.addWidget(self.summary, 1)
        top.addWidget(QLabel("Token budget:", self))
        self.budget = QSpinBox(self)
        self.budget.setRange(20, 100_000)
        self.budget.setSingleStep(50)
        self.budget.setValue(400)
        self.budget.setToolTip("The profile is cut at this many tokens (the agent's context budget for it)")
        top.addWidget(self.budget)
        self.root_layout.addLayout(top)
        self.model = ProfileTreeModel(self)
        self.tree = QTreeView(self)
        self.tree.setModel(self.model)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setWordWrap(False)
        self.tree.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.tree.header()
        header.setStretchLastSection(True)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        em = self.fontMetrics().horizontalAdvance("M")
        for col, width in ((0, 24), (1, 6), (2, 8), (3, 10), (4, 4)):
            self.tree.setColumnWidth(col, width * em)
        self.root_layout.addWidget(self.tree, 1)
        self.note = QLabel("", self)
        self.note.setProperty("role", "muted")
        self.note.setWordWrap(True)
        self.root_layout.addWidget(self.note)
        self.memory_to_fact: dict[int, int] = {}
        self.profile_data: dict[str, Any] | None = None
        self._syncing = False
        self.tree.selectionModel().currentChanged.connect(self._current_changed)
        self.budget.editingFinished.connect(self.refresh)

    # protocol -----------------------------------------------------------------------------------------
    def refresh(self) -> None:
        if self.ctx is None:
            self.model.set_profile(_EMPTY_PROFILE, {}, {})
            self.summary.setText("No database open.")
            return
        engine, scope, budget = self.ctx.engine, self.ctx.scope, self.budget.value()

        def work() -> dict[str, Any]:
            profile = engine.profile(scope, budget=budget)
            ids = sorted({fid for line in profile.lines() + profile.cut for fid in line.fact_ids})
            facts = engine.facts_by_ids(scope, ids)
            evidence = engine.evidence_spans(scope, [f["memory_id"] for f in facts.values()])
            return {"profile": profile, "facts": facts, "evidence": evidence}

        self.read(work, self._show)

    def on_selected(self, sel: Selection) -> None:
        fact_id = sel.id if sel.kind == "fact" else self.memory_to_fact.get(sel.id) if sel.kind == "memory" else None
        if fact_id is None:
            return
        index = self.model.index_of_fact(fact_id)
        if not index.isValid():
            if sel.kind == "fact":
                self.note.setText(f"Fact {fact_id} is not behind any profile line (only active, non-external "
                                  "facts make the profile).")
            return
        self.note.setText("")
        self._set_current(index)

    def _set_current(self, index: QModelIndex) -> None:
        self._syncing = True
        try:
            parent = index.parent()
            while parent.isValid():
                self.tree.expand(parent)
                parent = parent.parent()
            self.tree.selectionModel().setCurrentIndex(
                index, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
            self.tree.scrollTo(index)
        finally:
            self._syncing = False

    # rendering ------------------------------------------------------------------------------------------
    def _show(self, data: dict[str, Any]) -> None:
        self.profile_data = data
        profile, facts, evidence = data["profile"], data["facts"], data["evidence"]
        current = self.tree.currentIndex()
        keep = current.data(FACT_ID_ROLE) if current.isValid() else None
        self.memory_to_fact = {f["memory_id"]: fid for fid, f in facts.items()}
        used = sum(line.tokens for line in profile.lines())
        self.summary.setText(f"{len(profile.static)} static and {len(profile.dynamic)} dynamic lines, "
                             f"{used} of {profile.budget} tokens" +
                             (f"; {len(profile.cut)} left out" if profile.cut else ""))
        self.model.set_profile(profile, facts, evidence)
        expand_lines = len(facts) <= EXPAND_ALL_UP_TO
        for r in range(self.model.rowCount()):
            section = self.model.index(r, 0)
            if section.data(KIND_ROLE) != "section":
                self.tree.setFirstColumnSpanned(r, QModelIndex(), True)
                continue
            self.tree.setFirstColumnSpanned(r, QModelIndex(), True)
            self.tree.expand(section)
            if expand_lines:
                for i in range(self.model.rowCount(section)):
                    self.tree.expand(self.model.index(i, 0, section))
        if keep is not None and self.model.index_of_fact(keep).isValid():
            self._set_current(self.model.index_of_fact(keep))
        elif self.ctx is not None and self.ctx.bus.current is not None:
            self.on_selected(self.ctx.bus.current)

    def _current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._syncing or not current.isValid():
            return
        fid = current.data(FACT_ID_ROLE)
        if fid is not None:
            self.select("fact", int(fid))

    def line_texts(self) -> list[str]:
        out = []
        for r in range(self.model.rowCount()):
            section = self.model.index(r, 0)
            if section.data(KIND_ROLE) == "section":
                out += [self.model.index(i, 0, section).data() for i in range(self.model.rowCount(section))]
        return out

    def fact_cells(self, fact_id: int) -> list[str]:
        index = self.model.index_of_fact(fact_id)
        return [index.siblingAtColumn(c).data() for c in range(self.model.columnCount())]


class _EmptyProfile:
    static: list = []
    dynamic: list = []
    cut: list = []
    budget = 0

    def lines(self) -> list:
        return []


_EMPTY_PROFILE = _EmptyProfile()
