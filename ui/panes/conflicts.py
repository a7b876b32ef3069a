"""Conflicts: the review queue, both facts side by side with their evidence, and the audit log.

Each open conflict shows the rule that flagged it and why, fact A and fact B (or a single fact
held for review) with the source text around each evidence span. Keep A / keep B / keep both /
reject both / edit call the Curator through the task runner; every command is logged and can
be undone and redone here or with Ctrl+Z / Ctrl+Shift+Z.
"""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from engine.curate import CurationResult
from ui.models.rows import Column, RowTableModel
from ui.panes.base import PaneBase
from ui.selection import Selection
from ui.theme import current_theme
from ui.widgets.curation import describe_result, run_curation
from ui.widgets.tables import row_table


def ask_fact_edit(parent: QWidget, facts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Ask which fact to correct and how: {"fact_id", "object", "note"} or None. Tests replace this."""
    dialog = QDialog(parent)
    dialog.setWindowTitle("Correct a fact")
    form = QFormLayout(dialog)
    which = QComboBox(dialog)
    for label, f in zip("AB", facts):
        which.addItem(f"{label}: fact {f['id']} — {f['subject']} {f['predicate']} {f['object']}", f["id"])
    obj = QLineEdit(dialog)
    obj.setText(facts[0]["object"] if facts else "")
    which.currentIndexChanged.connect(lambda i: obj.setText(facts[i]["object"]))
    note = QLineEdit(dialog)
    note.setPlaceholderText("why (kept in the audit log)")
    form.addRow("Fact", which)
    form.addRow("Correct object", obj)
    form.addRow("Note", note)
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, dialog)
    buttons.accepted.connect(dialog.accept)
    buttons.rejected.connect(dialog.reject)
    form.addRow(buttons)
    try:
        if dialog.exec() != QDialog.DialogCode.Accepted or not obj.text().strip():
            return None
        return {"fact_id": which.currentData(), "object": obj.text().strip(), "note": note.text().strip() or None}
    finally:
        dialog.deleteLater()


def _html(text: str) -> str:
    return html.escape(text).replace("\n", "<br>")


def _fact_brief(f: dict[str, Any] | None) -> str:
    if f is None:
        return "—"
    return f"#{f['id']} {f['subject']} · {f['predicate']} → {f['object']} ({f['status'].replace('_', ' ')})"


def _status_color(f: dict[str, Any] | None) -> str | None:
    return current_theme().status.get(f["status"]) if f else None


class FactCard(QGroupBox):
    """One side of a conflict: the fact, how it was learned, and its evidence in context."""

    def __init__(self, title: str, parent=None) -> None:
        super().__init__(title, parent)
        self.side = title
        layout = QVBoxLayout(self)
        self.claim = QLabel("", self)
        self.claim.setWordWrap(True)
        self.claim.setProperty("role", "heading")
        self.claim.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.claim)
        self.details = QLabel("", self)
        self.details.setWordWrap(True)
        self.details.setProperty("role", "muted")
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.details)
        self.evidence = QTextBrowser(self)
        self.evidence.setOpenLinks(False)
        layout.addWidget(self.evidence, 1)
        self.fact: dict[str, Any] | None = None

    def show_fact(self, fact: dict[str, Any] | None, spans: list[dict[str, Any]]) -> None:
        self.fact = fact
        if fact is None:
            self.claim.setText("No second fact: this one is held for review on its own.")
            self.details.setText("")
            self.evidence.setHtml("")
            return
        self.setTitle(f"{self.side}: fact {fact['id']}")
        self.claim.setText(f"{fact['subject']} · {fact['predicate'].replace('_', ' ')} → {fact['object']}")
        self.details.setText(
            f"status {fact['status'].replace('_', ' ')} · confidence {fact['confidence']:.2f} · trust {fact['trust']}"
            f" · valid from {(fact['valid_from'] or '?')[:16]} · learned {fact['learned_at'][:16]}"
            f" · via {fact['extraction_method']}" + (f" ({fact['extractor_model']})" if fact.get("extractor_model") else "")
            + f"\nrule {fact['rule'] or '—'}: {fact['reason'] or ''}")
        theme = current_theme()
        mark = theme.span_fact
        blocks = []
        for s in spans:
            where = html.escape(s.get("title") or s.get("uri") or f"document {s['document_id']}")
            who = f" · {html.escape(s['speaker'])}" if s.get("speaker") else ""
            when = f" · {html.escape(s['source_time'][:16])}" if s.get("source_time") else ""
            retracted = " · <b>retracted</b>" if s.get("retracted_at") else ""
            blocks.append(
                f"<p style='margin:0 0 2px 0; color:{theme.muted}'>{where} [{html.escape(s['source_type'])}, "
                f"trust {html.escape(s['trust'])}]{who}{when}{retracted}</p>"
                f"<p style='margin:0 0 10px 0'>{'…' if s['before'] else ''}{_html(s['before'])}"
                f"<span style='background:{mark}; color:#111'>{_html(s['text'])}</span>"
                f"{_html(s['after'])}{'…' if s['after'] else ''}</p>")
        if not blocks:
            quote = html.escape(fact.get("evidence") or "")
            blocks.append(f"<p>No stored source span.{(' Extractor quote: “' + quote + '”') if quote else ''}</p>")
        self.evidence.setHtml("".join(blocks))


class ConflictsPane(PaneBase):
    pane_key = "conflicts"
    title = "Conflicts"
    watched_tables = frozenset({"conflicts", "facts", "curation_log", "memories", "documents"})

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.facts: dict[int, dict[str, Any]] = {}
        self.evidence: dict[int, list[dict[str, Any]]] = {}
        self.current_conflict: dict[str, Any] | None = None
        self._syncing = False
        self._want_conflict: int | None = None

        top = QHBoxLayout()
        self.queue_label = QLabel("No database open.", self)
        self.queue_label.setProperty("role", "heading")
        top.addWidget(self.queue_label, 1)
        self.show_combo = QComboBox(self)
        self.show_combo.addItem("Open conflicts", "open")
        self.show_combo.addItem("All conflicts", None)
        top.addWidget(self.show_combo)
        self.undo_button = QPushButton("Undo", self)
        self.undo_button.setToolTip("Undo the latest operator curation (Ctrl+Z)")
        self.redo_button = QPushButton("Redo", self)
        self.redo_button.setToolTip("Redo the latest undone curation (Ctrl+Shift+Z)")
        top.addWidget(self.undo_button)
        top.addWidget(self.redo_button)
        self.root_layout.addLayout(top)

        self.queue_model = RowTableModel(self, columns=(
            Column("id", "ID", numeric=True),
            Column("rule", "Rule"),
            Column("a", "Fact A", format=lambda r: _fact_brief(r["fact_a"]), color=lambda r: _status_color(r["fact_a"])),
            Column("b", "Fact B", format=lambda r: _fact_brief(r["fact_b"]), color=lambda r: _status_color(r["fact_b"])),
            Column("status", "Status", format=lambda r: r["status"] + (f" ({r['resolution']})" if r["resolution"] else "")),
            Column("created_at", "Flagged", format=lambda r: r["created_at"][:16].replace("T", " ")),
        ))
        self.queue = row_table(self, self.queue_model)
        em = self.fontMetrics().horizontalAdvance("M")
        for col, width in ((0, 3), (1, 15), (4, 9), (5, 9)):
            self.queue.setColumnWidth(col, width * em)
        self.queue.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.queue.horizontalHeader().setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)

        detail = QWidget(self)
        dl = QVBoxLayout(detail)
        dl.setContentsMargins(0, 0, 0, 0)
        self.reason = QLabel("Select a conflict to compare its facts.", detail)
        self.reason.setWordWrap(True)
        self.reason.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        dl.addWidget(self.reason)
        cards = QHBoxLayout()
        self.card_a = FactCard("Fact A", detail)
        self.card_b = FactCard("Fact B", detail)
        cards.addWidget(self.card_a)
        cards.addWidget(self.card_b)
        dl.addLayout(cards, 1)
        buttons = QHBoxLayout()
        self.keep_a = QPushButton("Keep A", detail)
        self.keep_b = QPushButton("Keep B", detail)
        self.keep_both = QPushButton("Keep both", detail)
        self.reject_both = QPushButton("Reject both", detail)
        self.edit_button = QPushButton("Edit…", detail)
        self.keep_a.setToolTip("A stays active; B is retracted")
        self.keep_b.setToolTip("B becomes current and supersedes A")
        self.keep_both.setToolTip("Both stay active; B extends A")
        self.reject_both.setToolTip("Both are retracted")
        self.edit_button.setToolTip("Correct one of the facts: a new version that updates it")
        for b in (self.keep_a, self.keep_b, self.keep_both, self.reject_both, self.edit_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        dl.addLayout(buttons)

        self.log_model = RowTableModel(self, columns=(
            Column("id", "#", numeric=True),
            Column("created_at", "Time", format=lambda r: r["created_at"][:19].replace("T", " ")),
            Column("actor", "Actor"),
            Column("command", "Command"),
            Column("target", "Target", format=lambda r: f"{r['target_type'] or ''} {r['target_id'] or ''}".strip()),
            Column("rows", "Rows", format=lambda r: ", ".join(f"{t} {n}" for t, n in r["rows"].items()),
                   tooltip=lambda r: ", ".join(f"{t}: {n}" for t, n in r["rows"].items())),
            Column("note", "Note", format=lambda r: r["note"] or ""),
            Column("undone_at", "Undone", format=lambda r: (r["undone_at"] or "")[:19].replace("T", " ")),
        ))
        log_box = QWidget(self)
        ll = QVBoxLayout(log_box)
        ll.setContentsMargins(0, 0, 0, 0)
        log_title = QLabel("Audit log (every curation, newest first)", log_box)
        log_title.setProperty("role", "heading")
        ll.addWidget(log_title)
        self.log = row_table(self, self.log_model)
        for col, width in ((0, 3), (1, 11), (2, 6), (3, 7), (4, 8), (5, 18), (7, 11)):
            self.log.setColumnWidth(col, width * em)
        self.log.horizontalHeader().setSectionResizeMode(6, QHeaderView.ResizeMode.Stretch)
        ll.addWidget(self.log)

        self.splitter = QSplitter(Qt.Orientation.Vertical, self)
        self.splitter.addWidget(self.queue)
        self.splitter.addWidget(detail)
        self.splitter.addWidget(log_box)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 5)
        self.splitter.setStretchFactor(2, 2)
        self.root_layout.addWidget(self.splitter, 1)

        self.queue.selectionModel().currentRowChanged.connect(self._conflict_changed)
        self.show_combo.currentIndexChanged.connect(lambda _i: self.refresh())
        self.keep_a.clicked.connect(lambda: self.resolve("a"))
        self.keep_b.clicked.connect(lambda: self.resolve("b"))
        self.keep_both.clicked.connect(lambda: self.resolve("both"))
        self.reject_both.clicked.connect(lambda: self.resolve("none"))
        self.edit_button.clicked.connect(self.edit)
        self.undo_button.clicked.connect(self.undo)
        self.redo_button.clicked.connect(self.redo)
        self._update_buttons()

    # protocol -----------------------------------------------------------------------------------------
    def refresh(self) -> None:
        if self.ctx is None:
            self.queue_model.set_rows([])
            self.log_model.set_rows([])
            self.queue_label.setText("No database open.")
            self._show_conflict(None)
            return
        engine, scope, status = self.ctx.engine, self.ctx.scope, self.show_combo.currentData()

        def work() -> dict[str, Any]:
            conflicts = engine.conflicts(scope, status=status)
            ids = sorted({c["fact_a_id"] for c in conflicts} | {c["fact_b_id"] for c in conflicts if c["fact_b_id"]})
            facts = engine.facts_by_ids(scope, ids)
            evidence = engine.evidence_spans(scope, [f["memory_id"] for f in facts.values()])
            log = engine.curation_log(scope, limit=300)
            open_count = len(conflicts) if status == "open" else sum(c["status"] == "open" for c in conflicts)
            return {"conflicts": conflicts, "facts": facts, "evidence": evidence, "log": log, "open": open_count}

        self.read(work, self._loaded)

    def on_selected(self, sel: Selection) -> None:
        if sel.kind == "conflict":
            self._want_conflict = sel.id
            self._select_conflict(sel.id)
        elif sel.kind == "fact":
            row = next((i for i, r in enumerate(self.queue_model.rows)
                        if sel.id in (r["fact_a_id"], r["fact_b_id"])), None)
            if row is not None:
                self._select_row(row)

    # data -------------------------------------------------------------------------------------------------
    def _loaded(self, data: dict[str, Any]) -> None:
        keep = self.current_conflict["id"] if self.current_conflict else self._want_conflict
        self.facts, self.evidence = data["facts"], data["evidence"]
        rows = [dict(c, fact_a=self.facts.get(c["fact_a_id"]), fact_b=self.facts.get(c["fact_b_id"]))
                for c in data["conflicts"]]
        self.queue_model.set_rows(rows)
        log_rows = [dict(r, rows={t: len(v) for t, v in (r["before"].get("rows") or r["after"].get("rows") or {}).items()
                                  if v}) for r in data["log"]]
        self.log_model.set_rows(log_rows)
        n = data["open"]
        self.queue_label.setText(f"{n} open conflict{'s' if n != 1 else ''} in the review queue" if n
                                 else "The review queue is empty.")
        self.current_conflict = None
        if rows:
            row = self.queue_model.row_of("id", keep) if keep is not None else None
            self._select_row(row if row is not None else 0)
        else:
            self._show_conflict(None)

    def _select_conflict(self, conflict_id: int) -> None:
        row = self.queue_model.row_of("id", conflict_id)
        if row is not None:
            self._select_row(row)

    def _select_row(self, row: int) -> None:
        """Show a queue row without publishing it (only the operator's clicks select on the bus)."""
        index = self.queue_model.index(row, 0)
        self._syncing = True
        try:
            self.queue.selectionModel().setCurrentIndex(
                index, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
        finally:
            self._syncing = False
        self.queue.scrollTo(index)
        self._show_conflict(self.queue_model.row(row))

    def _conflict_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._syncing:
            return
        row = self.queue_model.row(current.row()) if current.isValid() else None
        if row is None or (self.current_conflict and self.current_conflict["id"] == row["id"]):
            return
        self._show_conflict(row)
        self.select("conflict", row["id"])

    def _show_conflict(self, conflict: dict[str, Any] | None) -> None:
        self.current_conflict = conflict
        if conflict is None:
            self.reason.setText("Nothing to review: facts that disagree, or sensitive facts the extractor was unsure "
                                "about, appear here." if self.ctx else "No database open.")
            self.card_a.show_fact(None, [])
            self.card_b.show_fact(None, [])
            self.card_a.claim.setText("")
            self.card_b.claim.setText("")
            self._update_buttons()
            return
        a, b = conflict["fact_a"], conflict["fact_b"]
        self.reason.setText(f"Conflict {conflict['id']} · rule {conflict['rule']} · {conflict['status']}"
                            + (f" ({conflict['resolution']})" if conflict["resolution"] else "")
                            + f"\n{conflict['reason'] or ''}")
        self.card_a.show_fact(a, self.evidence.get(a["memory_id"], []) if a else [])
        self.card_b.show_fact(b, self.evidence.get(b["memory_id"], []) if b else [])
        self._update_buttons()

    def _update_buttons(self) -> None:
        c = self.current_conflict
        open_ = c is not None and c["status"] == "open"
        pair = c is not None and open_ and c["fact_b"] is not None
        self.keep_a.setEnabled(open_)
        self.keep_a.setText("Keep A" if pair or not open_ else "Confirm")
        self.reject_both.setText("Reject both" if pair or not open_ else "Reject")
        self.keep_b.setEnabled(pair)
        self.keep_both.setEnabled(pair)
        self.reject_both.setEnabled(open_)
        self.edit_button.setEnabled(c is not None and c["fact_a"] is not None)
        has_ctx = self.ctx is not None
        self.undo_button.setEnabled(has_ctx)
        self.redo_button.setEnabled(has_ctx)

    # commands ---------------------------------------------------------------------------------------------
    def _curate(self, command, what: str) -> None:
        if self.ctx is None:
            return
        run_curation(self.ctx, command, self._curated,
                     lambda exc: self.banner.show_error(exc, what))

    def _curated(self, result: CurationResult) -> None:
        actions = [] if result.command in ("undo", "redo") else [("Undo", self.undo)]
        self.banner.show_notice(describe_result(result) + ".", "info", actions)

    def resolve(self, keep: str) -> None:
        c = self.current_conflict
        if c is None:
            return
        self._curate(lambda cur: cur.resolve(c["id"], keep), f"Resolving conflict {c['id']}")

    def edit(self) -> None:
        c = self.current_conflict
        if c is None:
            return
        facts = [f for f in (c["fact_a"], c["fact_b"]) if f is not None]
        answer = ask_fact_edit(self, facts)
        if not answer:
            return
        self._curate(lambda cur: cur.edit(answer["fact_id"], object=answer["object"], note=answer.get("note")),
                     f"Correcting fact {answer['fact_id']}")

    def undo(self) -> None:
        self._curate(lambda cur: cur.undo(), "Undo")

    def redo(self) -> None:
        self._curate(lambda cur: cur.redo(), "Redo")
