"""Store health: what is wrong with this memory, at a glance, with the fix one click away.

One row per check (engine/health.py) with its item count and a trend of the counts recorded at
each open, each ingest and each `memlens health`. Picking a check lists its items (paged: the
next page is read in the background when the list is scrolled to its end); picking an item shows
its evidence, "Open" brings forward the pane that explains it (source spans, fact graph,
timeline, ...) with the record selected, and the fix buttons run the curation commands the check
named, with undo and an audit-log line like every other curation.

Checks run in the task runner with progress and a Cancel button. After a change (a curation, or
another process's ingest seen by live refresh) they run again, one run at a time, and never
sooner than the last run took: on a large store the pane uses at most about half a core.
"""

from __future__ import annotations

import functools
import html
import json
from typing import Any

from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from engine.curate import CurationResult
from engine.errors import BadInput
from engine.health import ABOUT, CHECKS, FIX_COMMANDS, TITLES, Fix, HealthItem, HealthReport
from ui.context import AppContext
from ui.models.health_models import PANE_TITLES, ChecksModel, HealthItemsModel, TrendDelegate
from ui.panes.base import PaneBase
from ui.tasks import Task
from ui.theme import current_theme
from ui.widgets.curation import describe_result, run_curation
from ui.widgets.tables import row_table

PAGE = 100  # items read per check at a time
TREND_POINTS = 30
RERUN_MIN_MS = 800  # after a change, wait at least this long (and at least as long as the last run took)
MAX_FIX_BUTTONS = 4
# Tables whose change can change what a check finds; "chunks" only changes on ingestion.
WATCHED = frozenset({"memories", "facts", "documents", "chunks", "conflicts", "entities", "entity_mentions",
                     "embeddings", "memory_sources", "memory_relations", "curation_log"})


def _e(text: Any) -> str:
    return html.escape("" if text is None else str(text)).replace("\n", "<br>")


def _premise_colour(theme: Any, state: str) -> str:
    return theme.status["active"] if state == "current" else theme.status.get(state, theme.muted)


def evidence_html(item: HealthItem) -> str:
    """The evidence of one item as readable HTML (every value shown; known shapes laid out)."""
    theme = current_theme()
    ev = dict(item.evidence)
    out = [f"<p><b>{_e(item.summary)}</b></p>"]

    def record_list(title: str, rows: list[dict[str, Any]], fmt) -> None:
        out.append(f"<p style='margin:6px 0 2px 0'><b>{_e(title)}</b></p><ul style='margin-top:0'>")
        out.extend(f"<li>{fmt(r)}</li>" for r in rows)
        out.append("</ul>")

    if "memories" in ev and isinstance(ev["memories"], list):
        how = ev.pop("how", {}) or {}
        keep = ev.pop("keep", None)
        record_list("Memories", ev.pop("memories"), lambda m: (
            f"#{m['memory_id']} ({_e(m.get('kind'))}){' — kept' if m['memory_id'] == keep else ''}"
            f"{' — ' + _e(how.get(str(m['memory_id']))) if how.get(str(m['memory_id'])) else ''}: "
            f"“{_e(m.get('text'))}”" + (f" <span style='color:{theme.muted}'>[{_e(m['document'])}]</span>"
                                          if m.get("document") else "")))
    for key in ("facts", "weak"):
        if key in ev and isinstance(ev[key], list):
            record_list("Facts" if key == "facts" else "Low-confidence facts", ev.pop(key), lambda f: (
                f"#{f['id']} {_e(f['subject'])} · {_e(f['predicate'])} → {_e(f['object'])} "
                f"<span style='color:{theme.status.get(f['status'], theme.muted)}'>{_e(f['status'])}</span>"
                f" · confidence {f['confidence']:.2f} · valid from {_e((f.get('valid_from') or '?')[:10])}"
                + (f" · quote “{_e(f['evidence'])}”" if f.get("evidence") else "")))
    if "fact" in ev and isinstance(ev["fact"], dict):
        f = ev.pop("fact")
        out.append(f"<p>Fact #{f['id']}: {_e(f['subject'])} · {_e(f['predicate'])} → {_e(f['object'])} "
                   f"({_e(f['status'])}, confidence {f['confidence']:.2f})</p>")
    if "sources" in ev and isinstance(ev["sources"], list):
        record_list("Sources", ev.pop("sources"), lambda s: (
            f"{_e(s.get('document') or 'document ' + str(s.get('document_id')))}"
            + (f" — <b>retracted {_e(s['retracted_at'][:10])}</b>" if s.get("retracted_at") else "")
            + f": “{_e(s.get('text'))}”"))
    if "gone_turns" in ev and isinstance(ev["gone_turns"], list):
        rows = ev.pop("gone_turns")
        if rows:
            record_list("Turns it was read from, gone", rows, lambda t: (
                f"memory #{t['episode_id']}: " + (f"forgotten ({_e(t['forget_reason'])})" if t.get("forgotten_at")
                                                  else f"retracted {_e((t.get('retracted_at') or '')[:10])}")))
    if "premises" in ev and isinstance(ev["premises"], list):
        record_list("Premises", ev.pop("premises"), lambda p: (
            f"#{p.get('fact_id') or p['memory_id']} “{_e(p.get('text'))}” — "
            f"<span style='color:{_premise_colour(theme, p['state'])}'>"
            f"{_e(p['state'])}</span>"))
    if "phrase" in ev:
        out.append(f"<p>…{_e(ev.pop('before', ''))}<span style='background:{theme.span_fact}; color:#111'>"
                   f"{_e(ev.pop('phrase'))}</span>{_e(ev.pop('after', ''))}…</p>")
        ev.pop("start", None)
        ev.pop("end", None)
    if "contexts" in ev and isinstance(ev["contexts"], list):
        rows = ev.pop("contexts")
        if rows:
            record_list("Where it is mentioned", [{"t": c} for c in rows], lambda r: f"“…{_e(r['t'])}…”")
    rest = {k: v for k, v in ev.items() if v not in (None, [], {})}
    if rest:
        out.append("<table cellspacing='0' cellpadding='2'>")
        for k, v in rest.items():
            value = json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v
            out.append(f"<tr><td style='color:{theme.muted}; padding-right:8px'>{_e(k.replace('_', ' '))}</td>"
                       f"<td>{_e(value)}</td></tr>")
        out.append("</table>")
    return "".join(out)


class HealthPane(PaneBase):
    pane_key = "health"
    title = "Store health"
    watched_tables = WATCHED

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.report: HealthReport | None = None
        self.trend: list[dict[str, Any]] = []
        self.current_check: str | None = None
        self.current_item: HealthItem | None = None
        self._task: Task | None = None
        self._running = False
        self._run_id = 0
        self._pending_trigger: str | None = None  # a change came in: run again (recording this trigger)
        self._dirty = False
        self._last_run_ms = 0
        self._want_item: str | None = None
        self._opened: AppContext | None = None  # the context the last "open" trend point was recorded for

        top = QHBoxLayout()
        self.summary = QLabel("No database open.", self)
        self.summary.setProperty("role", "heading")
        self.summary.setWordWrap(True)
        top.addWidget(self.summary, 1)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(160)
        self.progress.hide()
        top.addWidget(self.progress)
        self.run_button = QPushButton("Check now", self)
        self.run_button.setToolTip("Run every check again (in the background)")
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Stop the running checks; the ones already done stay shown")
        self.cancel_button.setEnabled(False)
        self.undo_button = QPushButton("Undo", self)
        self.undo_button.setToolTip("Undo the latest operator curation (Ctrl+Z)")
        self.redo_button = QPushButton("Redo", self)
        for b in (self.run_button, self.cancel_button, self.undo_button, self.redo_button):
            top.addWidget(b)
        self.root_layout.addLayout(top)

        self.checks_model = ChecksModel(self)
        self.checks = row_table(self, self.checks_model)
        self.checks.setItemDelegateForColumn(2, TrendDelegate(self.checks))
        em = self.fontMetrics().horizontalAdvance("M")
        for col, width in ((1, 5), (2, 7), (3, 6)):
            self.checks.setColumnWidth(col, width * em)
        header = self.checks.horizontalHeader()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)

        self.items_model = HealthItemsModel(self)
        self.items = row_table(self, self.items_model)
        self.items.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.items.setColumnWidth(1, 10 * em)
        ih = self.items.horizontalHeader()
        ih.setStretchLastSection(False)
        ih.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.items_label = QLabel("", self)
        self.items_label.setProperty("role", "muted")
        self.items_label.setWordWrap(True)  # a long note must not widen the pane

        detail = QWidget(self)
        dl = QVBoxLayout(detail)
        dl.setContentsMargins(0, 0, 0, 0)
        self.evidence = QTextBrowser(detail)
        self.evidence.setOpenLinks(False)
        dl.addWidget(self.evidence, 1)
        actions = QHBoxLayout()
        self.open_button = QPushButton("Open", detail)
        self.open_button.setEnabled(False)
        actions.addWidget(self.open_button)
        self.fix_buttons: list[QPushButton] = []
        for _ in range(MAX_FIX_BUTTONS):
            b = QPushButton("", detail)
            b.hide()
            actions.addWidget(b)
            self.fix_buttons.append(b)
        actions.addStretch(1)
        dl.addLayout(actions)

        items_box = QWidget(self)
        il = QVBoxLayout(items_box)
        il.setContentsMargins(0, 0, 0, 0)
        il.addWidget(self.items_label)
        il.addWidget(self.items, 1)
        right = QSplitter(Qt.Orientation.Vertical, self)
        right.addWidget(items_box)
        right.addWidget(detail)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
        left = QWidget(self)
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.checks, 3)
        self.about = QLabel("", left)
        self.about.setWordWrap(True)
        self.about.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.about.setProperty("role", "muted")
        ll.addWidget(self.about, 1)
        left.setMinimumWidth(30 * em)  # the check names stay readable however wide an item gets
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        self.root_layout.addWidget(self.splitter, 1)

        self._rerun_timer = QTimer(self)
        self._rerun_timer.setSingleShot(True)
        self._rerun_timer.timeout.connect(self._rerun)

        self.checks.selectionModel().currentRowChanged.connect(self._check_changed)
        self.items.selectionModel().currentRowChanged.connect(self._item_changed)
        self.items.doubleClicked.connect(lambda index: self.open_item(self.items_model.item(index.row())))
        self.run_button.clicked.connect(lambda: self.run_checks(None))
        self.cancel_button.clicked.connect(self.cancel)
        self.open_button.clicked.connect(lambda: self.open_item(self.current_item))
        for i, b in enumerate(self.fix_buttons):
            b.clicked.connect(lambda _c=False, i=i: self._fix_clicked(i))
        self.undo_button.clicked.connect(lambda: self._curate(lambda cur: cur.undo(), "Undo"))
        self.redo_button.clicked.connect(lambda: self._curate(lambda cur: cur.redo(), "Redo"))
        self._show_item(None)

    # protocol ------------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """A database was opened (or the scope changed): run every check and record the counts."""
        self._rerun_timer.stop()
        self._dirty = False
        self.report, self.trend, self.current_check = None, [], None
        self.checks_model.set_rows([])
        self.items_model.set_items([], 0, None)
        self.about.setText("")
        self._show_item(None)
        if self.ctx is None:
            self.summary.setText("No database open.")
            self._set_running(False)
            return
        # A newly opened database or scope is a trend point; a refresh for another reason (the theme) is not.
        opened = self.ctx is not self._opened
        self._opened = self.ctx
        self.run_checks("open" if opened else None)

    def on_data_changed(self, tables: set[str]) -> None:
        if not (set(tables) & self.watched_tables) or self.ctx is None:
            return
        if "chunks" in tables:  # only ingestion writes chunks: this change is an ingest
            self._pending_trigger = "ingest"
        self._dirty = True
        if not self._running:
            self._schedule_rerun()

    def on_selected(self, sel) -> None:
        """Another pane selected a record: show the item about it, if the current check has one."""
        row = next((i for i, it in enumerate(self.items_model.items)
                    if (it.target.get("kind"), it.target.get("id")) == (sel.kind, sel.id)), None)
        if row is not None:
            self._select_item_row(row, publish=False)

    def shutdown(self) -> None:
        self._rerun_timer.stop()
        if self._task is not None:
            self._task.cancel()
        super().shutdown()

    # running ---------------------------------------------------------------------------------------------
    def _schedule_rerun(self) -> None:
        self._rerun_timer.start(max(RERUN_MIN_MS, self._last_run_ms))

    def _rerun(self) -> None:
        trigger, self._pending_trigger = self._pending_trigger, None
        self._dirty = False
        self.run_checks(trigger)

    def run_checks(self, trigger: str | None) -> None:
        """Run every check in the background; `trigger` ("open", "ingest") records the counts for the trend."""
        if self.ctx is None:
            return
        if self._task is not None:
            self._task.cancel()
        engine, scope = self.ctx.engine, self.ctx.scope
        self._run_id += 1
        run_id = self._run_id

        def work(progress, should_stop):
            import time

            t0 = time.perf_counter()
            report = engine.health(scope, limit=PAGE, record=trigger, progress=progress, should_stop=should_stop)
            return report, engine.health_trend(scope, limit=TREND_POINTS), (time.perf_counter() - t0) * 1000

        self._set_running(True)
        self.progress.setValue(0)
        self._running = True
        task = self.run_task(work, lambda result: self._loaded(run_id, result),
                             on_error=lambda exc: self._failed(run_id, exc), on_progress=self._progressed)
        if self._running and run_id == self._run_id:  # (an inline runner has finished it already)
            self._task = task

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self.summary.setText("Stopping the checks…")

    def _progressed(self, fraction: float, message: str) -> None:
        self.progress.setValue(int(fraction * 100))
        self.progress.setFormat(message[:40])
        self.progress.setToolTip(message)

    def _set_running(self, running: bool) -> None:
        self.progress.setVisible(running)
        self.cancel_button.setEnabled(running)
        self.run_button.setEnabled(self.ctx is not None and not running)
        self.undo_button.setEnabled(self.ctx is not None)
        self.redo_button.setEnabled(self.ctx is not None)

    def _finished(self, run_id: int) -> bool:
        """Was this the latest run? Then it is over; start the next if changes came in meanwhile."""
        if run_id != self._run_id:
            return False
        self._task = None
        self._running = False
        self._set_running(False)
        if self._dirty:
            self._schedule_rerun()
        return True

    def _failed(self, run_id: int, exc: BaseException) -> None:
        if self._finished(run_id):
            self.banner.show_error(exc, "The health checks failed")
            self.summary.setText("The health checks failed.")

    def _loaded(self, run_id: int, result: tuple[HealthReport, list[dict[str, Any]], float]) -> None:
        if not self._finished(run_id):
            return
        report, trend, ms = result
        self._last_run_ms = int(ms)
        self.report, self.trend = report, trend
        keep_check = self.current_check
        keep_item = self.current_item.key if self.current_item else self._want_item
        # by the trend row's id: taken_at has one-second resolution, and a rerun in the second of a
        # recorded run (a curation's, say) was taken for it, hiding a count that moved
        recorded = report.recorded is not None and bool(trend) and trend[-1]["id"] == report.recorded
        rows = []
        for name in CHECKS:
            r = report.checks.get(name)
            points = [{"taken_at": t["taken_at"], "trigger": t["trigger"], "count": t["counts"].get(name, 0)}
                      for t in trend if name in t["counts"]]
            # this run was not recorded: show it as the newest point, unless it only repeats the last
            # recorded count (a rerun with nothing new, say after a change announced twice under load)
            if r is not None and not recorded and not (points and points[-1]["count"] == r.count):
                points.append({"taken_at": report.taken_at, "trigger": "now", "count": r.count})
            rows.append({"name": name, "title": TITLES[name], "count": r.count if r else None,
                         "seconds": r.seconds if r else None, "note": r.note if r else None, "trend_points": points})
        self.checks_model.set_rows(rows)
        with_items = [n for n, r in report.checks.items() if r.count]
        total = sum(r.count for r in report.checks.values())
        when = report.taken_at[11:19]
        if report.cancelled:
            self.summary.setText(f"Stopped after {len(report.checks)} of {len(CHECKS)} checks "
                                 f"({total:,} items so far). Check now runs them all again.")
        elif total:
            self.summary.setText(f"{len(with_items)} of {len(CHECKS)} checks found {total:,} items "
                                 f"(checked at {when} UTC in {report.seconds:.1f} s).")
        else:
            self.summary.setText(f"Nothing wrong found by {len(CHECKS)} checks (checked at {when} UTC "
                                 f"in {report.seconds:.1f} s).")
        chosen = keep_check if keep_check in report.checks else (
            with_items[0] if with_items else next(iter(report.checks), None))
        if chosen is not None:
            self._want_item = keep_item
            self._select_check(chosen)

    # checks and items --------------------------------------------------------------------------------------
    def _select_check(self, name: str) -> None:
        row = self.checks_model.row_of("name", name)
        if row is None:
            return
        index = self.checks_model.index(row, 0)
        if self.checks.currentIndex().row() == row:
            self._show_check(name)
        else:
            self.checks.selectionModel().setCurrentIndex(
                index, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)

    def _check_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        row = self.checks_model.row(current.row()) if current.isValid() else None
        if row is not None:
            self._show_check(row["name"])

    def _show_check(self, name: str) -> None:
        self.current_check = name
        self.about.setText(f"<b>{_e(TITLES[name])}</b><br>{_e(ABOUT[name])}")
        result = self.report.checks.get(name) if self.report else None
        if result is None:
            self.items_model.set_items([], 0, None)
            self.items_label.setText(f"{TITLES[name]}: not checked in this run.")
            self._show_item(None)
            return
        self.items_model.set_items(result.items, result.count, functools.partial(self._fetch, name))
        self._update_items_label()
        want = self._want_item
        self._want_item = None
        row = self.items_model.row_of("key", want) if want else None
        if result.items:
            self._select_item_row(row if row is not None else 0, publish=False)
        else:
            self._show_item(None)

    def _update_items_label(self) -> None:
        name = self.current_check
        if name is None:
            self.items_label.setText("")
            return
        shown, total = len(self.items_model.items), self.items_model.total
        note = self.report.checks[name].note if self.report and name in self.report.checks else None
        text = f"{TITLES[name]}: {total:,} item{'s' if total != 1 else ''}"
        if shown < total:
            text += f" (showing {shown:,}; scroll for more)"
        self.items_label.setText(text + (" · approximate (hover for how)" if note else ""))
        self.items_label.setToolTip(note or "")

    def _fetch(self, name: str, offset: int) -> None:
        """The next page of one check, read in the background (called by the model's fetchMore)."""
        if self.ctx is None:
            return
        engine, scope = self.ctx.engine, self.ctx.scope

        def done(report: HealthReport) -> None:
            if self.current_check == name:
                r = report.checks[name]
                self.items_model.append(r.items, r.count)
                self._update_items_label()

        def failed(exc: BaseException) -> None:
            self.items_model.pending = False
            self.banner.show_error(exc)

        self.read(lambda: engine.health(scope, checks=[name], limit=PAGE, offset=offset), done, on_error=failed)

    def _select_item_row(self, row: int, *, publish: bool) -> None:
        index = self.items_model.index(row, 0)
        self.items.selectionModel().blockSignals(True)
        self.items.selectionModel().setCurrentIndex(
            index, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
        self.items.selectionModel().blockSignals(False)
        self.items.scrollTo(index)
        self._show_item(self.items_model.item(row))
        if publish:
            self._publish(self.current_item)

    def _item_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        item = self.items_model.item(current.row()) if current.isValid() else None
        self._show_item(item)
        self._publish(item)

    def _publish(self, item: HealthItem | None) -> None:
        if item is not None and item.target.get("id") is not None:
            self.select(item.target["kind"], item.target["id"])

    def _show_item(self, item: HealthItem | None) -> None:
        self.current_item = item
        if item is None:
            self.evidence.setHtml("<p>Pick an item to see its evidence.</p>" if self.items_model.items or self.ctx
                                  is None else "<p>This check found nothing.</p>")
            self.open_button.setEnabled(False)
            self.open_button.setText("Open")
            for b in self.fix_buttons:
                b.hide()
            return
        self.evidence.setHtml(evidence_html(item))
        self.open_button.setEnabled(item.target.get("id") is not None)
        self.open_button.setText(f"Open in {PANE_TITLES.get(item.pane, item.pane)}")
        for b, fix in zip(self.fix_buttons, item.fixes + [None] * MAX_FIX_BUTTONS):
            b.setVisible(fix is not None)
            if fix is not None:
                width = 18 * self.fontMetrics().horizontalAdvance("M")  # a long label elides: the pane never widens
                b.setText(self.fontMetrics().elidedText(fix.label, Qt.TextElideMode.ElideRight, width))
                b.setToolTip(f"{fix.label}: {fix.command}({', '.join(f'{k}={v!r}' for k, v in fix.args.items())})"
                             " — logged in the audit log, undoable")

    def open_item(self, item: HealthItem | None) -> None:
        """Select the item's record everywhere and bring forward the pane that explains it."""
        if item is None or self.ctx is None or item.target.get("id") is None:
            return
        self.select(item.target["kind"], item.target["id"])
        self.ctx.bus.show_pane(item.pane)

    # fixes -------------------------------------------------------------------------------------------------
    def selected_items(self) -> list[HealthItem]:
        rows = sorted({i.row() for i in self.items.selectionModel().selectedRows()})
        return [it for it in (self.items_model.item(r) for r in rows) if it is not None]

    def _fix_clicked(self, i: int) -> None:
        item = self.current_item
        if item is None or i >= len(item.fixes):
            return
        fix = item.fixes[i]
        if fix.command == "reembed":  # one logged command for every selected item that needs a vector
            ids = sorted({m for it in self.selected_items() + [item] for f in it.fixes if f.command == "reembed"
                          for m in f.args["memory_ids"]})
            fix = Fix("reembed", {"memory_ids": ids}, fix.label)
        self.apply_fix(fix)

    def apply_fix(self, fix: Fix) -> None:
        if self.ctx is None or fix.command not in FIX_COMMANDS:
            return
        if fix.command == "rebuild_fts":  # derived index: rebuilt, not curated (nothing to undo)
            engine, bus = self.ctx.engine, self.ctx.bus
            def rebuilt(_result: object) -> None:
                self.banner.show_notice("Rebuilt the full-text indexes.", "info")
                bus.data_changed({"memories"})

            self.run_task(lambda _p, _s: engine.rebuild_fts(), rebuilt)
            return
        def command(cur):
            result = getattr(cur, fix.command)(**fix.args)
            if result is None:  # expire_due: nothing was due any more
                raise BadInput("nothing is past its forget_after any more")
            return result

        self._curate(command, fix.label)

    def _curate(self, command, what: str) -> None:
        if self.ctx is None:
            return
        run_curation(self.ctx, command, self._curated, lambda exc: self.banner.show_error(exc, what))

    def _curated(self, result: CurationResult) -> None:
        actions = [] if result.command in ("undo", "redo") else [("Undo", lambda: self._curate(lambda c: c.undo(), "Undo"))]
        self.banner.show_notice(describe_result(result) + ".", "info", actions)
