"""Retrieval traces: what a recall considered, what it dropped and why, what it put in the context.

Left: a what-if query box (Enter runs a read-only operator recall in the runner, as of the bus's
as-of time) and the stored traces. Right, for the selected trace: the stage funnel (a bar per
stage, in -> out; click a stage to list what it dropped and why), the score components of the
selected candidate as a stacked bar next to the last kept candidate's, the candidate table
(every memory any channel proposed, its channel ranks and scores, components, final score and
fate), the verbatim context with per-item token cost, stage timings, and "why not this memory?"
for the memory selected elsewhere.

A benchmark question opens here through the bus: `select("trace", id, extra=("gold", ids,
"trace_db", path))`. Gold candidates are starred; a trace stored in another database file (a
benchmark container's) is opened read-only.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.retrieve.intent import FEATURES
from ui.models.graph_style import pick, plot_colors, series_color, styled_plot
from ui.models.trace_models import (
    COMPONENT_ORDER,
    OUTDATED_DARK,
    OUTDATED_LIGHT,
    StageFilterProxy,
    TraceCandidatesModel,
    TraceContextModel,
    TraceListModel,
    outdated_label,
)
from ui.panes.base import PaneBase
from ui.selection import Selection
from ui.widgets.tables import row_table

# The ranking rules' own components (a current-truth lift: same_slot, later_leads, return_restores,
# ...) beyond the palette's fifteen: the amber of an outdated statement, one colour for every rule,
# where a hashed palette colour passed for another part (return_restores wore the session's green).
RULE_COMPONENTS = frozenset(f.name for f in FEATURES.values() if f.kind == "rank") - set(COMPONENT_ORDER)


def component_color(name: str) -> QColor:
    """One colour per score component, the same in the stacked bar and its legend."""
    if name in COMPONENT_ORDER:
        return series_color(COMPONENT_ORDER.index(name))
    if name in RULE_COMPONENTS:
        return QColor(pick((OUTDATED_LIGHT, OUTDATED_DARK)))
    return series_color(len(COMPONENT_ORDER) + sum(map(ord, name)))  # stable for components added later


def window_text(params: dict[str, Any]) -> str:
    """The time window a question named, as the header shows it ("" when it named none)."""
    frame = params.get("timeframe")
    if not frame:
        return ""
    text = f" · time window {frame[0][:10]} – {frame[1][:10]}"
    fade = params.get("timeframe_fade_days")
    return text + (f", fading out over the {fade:g} days before" if fade else "")


def features_text(params: dict[str, Any]) -> str:
    """What the question was read as (engine/retrieve/intent.py features that fired) and which
    features the recipe switched off, as the header shows them ("" when neither)."""
    def show(name: str, value: Any) -> str:
        if value is True:
            return name
        if isinstance(value, list):
            value = ", ".join(map(str, value))
        return f"{name} ({value})"

    fired = params.get("features") or {}
    parts = [show(k, v) for k, v in fired.items() if k != "timeframe"]  # the window has its own words
    text = ("read as: " + "; ".join(parts)) if parts else ""
    if params.get("off"):
        text += (" · " if text else "") + "switched off: " + ", ".join(params["off"])
    return text


def parse_extra(extra: tuple) -> dict[str, Any]:
    """Selection extras are flat key/value pairs: ("gold", (1, 2), "trace_db", "/x.db")."""
    out: dict[str, Any] = {}
    for i in range(0, len(extra) - 1, 2):
        if isinstance(extra[i], str):
            out[extra[i]] = extra[i + 1]
    return out


class TracesPane(PaneBase):
    pane_key = "traces"
    title = "Retrieval traces"
    watched_tables = frozenset({"retrieval_traces", "trace_candidates"})

    sigTraceShown = Signal(object)  # the trace dict now on screen
    sigWhatIfDone = Signal(object)  # the trace id a what-if query produced
    sigExplained = Signal(object)  # the explain() result

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.trace: dict[str, Any] | None = None
        self.trace_scope = None
        self.trace_db: str | None = None
        self.gold: frozenset[int] = frozenset()
        self.target_memory: int | None = None
        self._load_id = 0
        self._stages: list[dict[str, Any]] = []
        self._selected_candidate: dict[str, Any] | None = None

        split = QSplitter(Qt.Orientation.Horizontal, self)
        left = QWidget(split)
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        self.query = QLineEdit(left)
        self.query.setPlaceholderText("What-if query — Enter runs a read-only recall")
        self.query.setClearButtonEnabled(True)
        self.as_of_note = QLabel("as of: now", left)
        self.trace_list = TraceListModel(self)
        self.trace_view = row_table(left, self.trace_list)
        self.trace_view.setSortingEnabled(False)
        lv.addWidget(self.query)
        lv.addWidget(self.as_of_note)
        lv.addWidget(self.trace_view, 1)

        right = QWidget(split)
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        self.header = QLabel("Select a trace, or type a query.", right)
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        rv.addWidget(self.header)
        plots = QSplitter(Qt.Orientation.Horizontal, right)
        self.funnel = styled_plot(plots)
        self.funnel.setMenuEnabled(False)
        self.funnel.setMouseEnabled(x=False, y=False)
        self.funnel.setTitle("Stage funnel (click a stage)")
        self.funnel_in = pg.BarGraphItem(x=np.zeros(0), height=np.zeros(0), width=0.7,
                                         brush=pg.mkBrush(148, 163, 184, 90), pen=None)
        self.funnel_out = pg.BarGraphItem(x=np.zeros(0), height=np.zeros(0), width=0.45,
                                          brush=pg.mkBrush("#2563eb"), pen=None)
        self.funnel.addItem(self.funnel_in)
        self.funnel.addItem(self.funnel_out)
        self._funnel_labels: list[pg.TextItem] = []
        self._funnel_top = 1.0  # the tallest bar: the y range over it follows the plot's height
        self.funnel.getPlotItem().getViewBox().sigResized.connect(self._fit_funnel)
        self.funnel.scene().sigMouseClicked.connect(self._funnel_scene_clicked)
        self.components = styled_plot(plots)
        self.components.setMenuEnabled(False)
        self.components.setTitle("Score components")
        self.component_bars = pg.BarGraphItem(x0=np.zeros(0), x1=np.zeros(0), y=np.zeros(0), height=0.6)
        self.components.addItem(self.component_bars)
        self.score_marks = pg.ScatterPlotItem(symbol="|", size=22, pen=pg.mkPen(plot_colors()[1], width=2))
        self.components.addItem(self.score_marks)
        self.components.addItem(pg.InfiniteLine(pos=0, angle=90, pen=pg.mkPen("#9ca3af")), ignoreBounds=True)
        plots.addWidget(self.funnel)
        plots.addWidget(self.components)
        plots.setSizes([380, 420])
        rv.addWidget(plots, 3)
        self.component_legend = QLabel("", right)
        self.component_legend.setWordWrap(True)
        rv.addWidget(self.component_legend)

        filt = QHBoxLayout()
        self.stage_label = QLabel("All candidates", right)
        self.show_all = QPushButton("Show all", right)
        self.show_all.setEnabled(False)
        filt.addWidget(self.stage_label, 1)
        filt.addWidget(self.show_all)
        rv.addLayout(filt)

        tabs = QTabWidget(right)
        self.candidates = TraceCandidatesModel(self)
        self.proxy = StageFilterProxy(self)
        self.proxy.setSourceModel(self.candidates)
        self.candidate_view = row_table(tabs, self.proxy)
        self.candidate_view.setSortingEnabled(True)
        self.context = TraceContextModel(self)
        ctx_page = QWidget(tabs)
        cv = QVBoxLayout(ctx_page)
        cv.setContentsMargins(0, 0, 0, 0)
        self.context_total = QLabel("", ctx_page)
        self.context_view = row_table(ctx_page, self.context)
        cv.addWidget(self.context_total)
        cv.addWidget(self.context_view, 1)
        tabs.addTab(self.candidate_view, "Candidates")
        tabs.addTab(ctx_page, "Context")
        self.tabs = tabs
        rv.addWidget(tabs, 5)

        self.timings = QLabel("", right)
        self.timings.setWordWrap(True)
        rv.addWidget(self.timings)
        why = QHBoxLayout()
        self.why_button = QPushButton("Why not…?", right)
        self.why_button.setEnabled(False)
        self.why_button.setToolTip("Select a memory anywhere, then ask why this query did or did not recall it")
        self.why_text = QLabel("", right)
        self.why_text.setWordWrap(True)
        self.why_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        why.addWidget(self.why_button)
        why.addWidget(self.why_text, 1)
        rv.addLayout(why)
        split.addWidget(left)
        split.addWidget(right)
        split.setSizes([330, 870])
        self.root_layout.addWidget(split, 1)

        self.query.returnPressed.connect(self.run_what_if)
        self.trace_view.selectionModel().currentRowChanged.connect(self._trace_row_changed)
        self.candidate_view.selectionModel().currentRowChanged.connect(self._candidate_row_changed)
        self.candidate_view.doubleClicked.connect(self._follow_replacement)
        self.show_all.clicked.connect(lambda: self.filter_stage(None))
        self.why_button.clicked.connect(self.explain_target)

    # protocol -------------------------------------------------------------------------------------------
    def set_context(self, ctx) -> None:
        self.trace = None
        super().set_context(ctx)

    def refresh(self) -> None:
        if self.ctx is None:
            self.trace_list.set_rows([])
            self._show_trace(None)
            return
        self._update_as_of_note()
        engine, scope = self.ctx.engine, self.ctx.scope
        self.read(lambda: engine.traces(scope, limit=500), self._traces_loaded)

    def on_selected(self, sel: Selection) -> None:
        if sel.kind == "trace":
            extra = parse_extra(sel.extra)
            self.load_trace(sel.id, gold=extra.get("gold"), trace_db=extra.get("trace_db"))
        elif sel.kind == "memory":
            self._set_target(sel.id)
        elif sel.kind == "fact" and self.ctx is not None:
            engine, scope = self.ctx.engine, self.ctx.scope
            self.read(lambda: engine.fact(scope, sel.id), lambda f: self._set_target(f["memory_id"]) if f else None)

    def on_as_of_changed(self, as_of: str | None) -> None:
        self._update_as_of_note()

    # trace list ---------------------------------------------------------------------------------------------
    def _traces_loaded(self, rows: list[dict[str, Any]]) -> None:
        self.trace_view.selectionModel().blockSignals(True)
        self.trace_list.set_rows(rows)
        self.trace_view.selectionModel().blockSignals(False)
        self._sync_list_selection()
        self.trace_view.resizeColumnsToContents()
        self.trace_view.setColumnWidth(2, min(260, self.trace_view.columnWidth(2)))

    def _trace_row_changed(self, current, _previous) -> None:
        row = self.trace_list.row(current.row())
        if row is not None:
            self.load_trace(int(row["id"]))

    def _update_as_of_note(self) -> None:
        as_of = self.ctx.bus.as_of if self.ctx is not None else None
        self.as_of_note.setText(f"what-if as of: {as_of}" if as_of else "what-if as of: now")

    # what-if ------------------------------------------------------------------------------------------------
    def run_what_if(self) -> None:
        """Run the query box as an operator recall (changes no memory), then show its trace."""
        text = self.query.text().strip()
        if not text or self.ctx is None:
            return
        engine, scope, as_of = self.ctx.engine, self.ctx.scope, self.ctx.bus.as_of
        self.header.setText(f"Running “{text}”…")

        def work(_progress, _stop):
            return engine.recall(text, scope=scope, origin="operator", as_of=as_of).trace.id

        self.run_task(work, self._what_if_done)

    def _what_if_done(self, trace_id: int) -> None:
        self.sigWhatIfDone.emit(trace_id)
        self.load_trace(trace_id)
        self.refresh()

    # loading one trace ----------------------------------------------------------------------------------------
    def load_trace(self, trace_id: int, *, gold=None, trace_db: str | None = None) -> None:
        if self.ctx is None:
            return
        main, scope = self.ctx.engine, self.ctx.scope
        own = not trace_db or Path(trace_db).resolve() == Path(main.path).resolve()
        self._load_id += 1
        lid = self._load_id

        def work(_progress, _stop):
            engine = main.trace_db(None if own else trace_db)  # a benchmark container: opened read-only once
            sc = scope if own and engine.has_trace(scope, trace_id) else engine.trace_scope(trace_id) or scope
            t = engine.trace(trace_id, scope=sc)
            briefs = engine.memory_briefs(sc, [c["memory_id"] for c in t["candidates"]])
            return t, briefs, sc

        gold_set = frozenset(int(g) for g in gold) if gold is not None else None
        self.run_task(work, lambda res: self._trace_loaded(lid, res, gold_set, trace_db if not own else None))

    def _trace_loaded(self, lid: int, result, gold, trace_db) -> None:
        if lid != self._load_id:
            return
        trace, briefs, scope = result
        same = self.trace is not None and self.trace["id"] == trace["id"] and trace_db == self.trace_db
        self.trace_scope = scope
        self.trace_db = trace_db
        if gold is not None:
            self.gold = gold
        elif not same:
            self.gold = frozenset()  # gold marks belong to the benchmark question that opened the trace
        self.banner.clear()
        self._show_trace(trace, briefs)
        self._sync_list_selection()
        gold_rows = self.candidates.gold_rows()
        if gold_rows:
            # a benchmark question: focus the best gold candidate, so the stacked bar compares it with
            # the last kept one and the why line says where it fell out
            rows = self.candidates.rows
            best = min(gold_rows, key=lambda i: (rows[i].get("rank") is None, -float(rows[i].get("score") or 0.0)))
            self._set_target(int(rows[best]["memory_id"]))
            idx = self.proxy.mapFromSource(self.candidates.index(best, 0))
            if idx.isValid():
                self.candidate_view.scrollTo(idx, QAbstractItemView.ScrollHint.PositionAtCenter)

    def _sync_list_selection(self) -> None:
        """The list highlights the open trace, or nothing when it lives in another DB or scope."""
        sm = self.trace_view.selectionModel()
        sm.blockSignals(True)
        row = None
        if self.trace is not None and not self.trace_db and self.trace_scope == (self.ctx.scope if self.ctx else None):
            row = self.trace_list.row_of_trace(self.trace["id"])
        if row is None:
            self.trace_view.clearSelection()
            sm.clearCurrentIndex()
        else:
            self.trace_view.selectRow(row)
        sm.blockSignals(False)
        self.trace_view.viewport().update()

    def _show_trace(self, trace: dict[str, Any] | None, briefs: dict[int, dict] | None = None) -> None:
        self.trace = trace
        if trace is None:
            self.candidates.set_trace([], {}, set())
            self.context.set_context("", [])
            self._draw_funnel([])
            self._draw_components(None)
            self.header.setText("Select a trace, or type a query.")
            self.filter_stage(None)
            self.timings.setText("")
            self.sigTraceShown.emit(None)
            return
        self.candidates.set_trace(trace["candidates"], briefs or {}, self.gold,
                                  shared=(trace.get("params") or {}).get("shared_places"),
                                  outdated=(trace.get("params") or {}).get("outdated"))
        self.filter_stage(None)
        self.candidate_view.sortByColumn(self.candidates.column_index("fate"),
                                         Qt.SortOrder.AscendingOrder)
        self.candidate_view.resizeColumnsToContents()
        self.candidate_view.setColumnWidth(3, 320)
        self.context.set_context(trace["context"]["text"] or "", trace["candidates"])
        self.context_view.resizeColumnsToContents()
        self.context_total.setText(f"{trace['context']['tokens'] or 0} tokens in {len(self.context.rows)} items "
                                   f"(budget {trace['params'].get('budget', '?')})")
        query = trace["query"] if trace["query"] is not None else f"(agent query, hash {trace['query_hash'][:12]}…)"
        where = f" — from {self.trace_db}" if self.trace_db else ""
        gold = (f"; {len(self.candidates.gold_rows())}/{len(self.gold)} gold memories among candidates"
                if self.gold else "")
        self.header.setText(f"<b>Trace {trace['id']}</b> · {trace['origin']} · recipe {trace['recipe']} · "
                            f"k {trace['k']} sources{window_text(trace.get('params') or {})}"
                            f"{' · as of ' + trace['as_of'] if trace['as_of'] else ''} · {trace['created_at']}<br>"
                            f"“{query}” — {len(trace['candidates'])} candidates{gold}{where}"
                            + (f" · {html.escape(read)}" if (read := features_text(trace.get("params") or {})) else ""))
        self._draw_funnel(trace["stages"])
        timings = trace.get("timings_ms") or {}
        total = sum(v for k, v in timings.items() if k in ("embed", "candidates", "filters", "score", "plan",
                                                           "rerank", "rank", "budget"))
        self.timings.setText("Timings (ms): " + " · ".join(f"{k} {v:.2f}" for k, v in timings.items())
                             + f" — total {total:.2f}")
        kept = [c for c in trace["candidates"] if c.get("rank") is not None]
        first = min(kept, key=lambda c: c["rank"]) if kept else next(iter(trace["candidates"]), None)
        self._selected_candidate = first
        self._draw_components(first)
        self._update_why()
        self.sigTraceShown.emit(trace)

    # funnel -----------------------------------------------------------------------------------------------------
    def _draw_funnel(self, stages: list[dict[str, Any]]) -> None:
        self._stages = list(stages)
        for item in self._funnel_labels:
            self.funnel.removeItem(item)
        self._funnel_labels = []
        x = np.arange(len(stages), dtype=float)
        n_in = np.array([float(s.get("in", 0)) for s in stages])
        n_out = np.array([float(s.get("out", 0)) for s in stages])
        self.funnel_in.setOpts(x=x, height=n_in, width=0.7)
        self.funnel_out.setOpts(x=x, height=n_out, width=0.45)
        ax = self.funnel.getPlotItem().getAxis("bottom")
        ax.setTicks([[(float(i), s["name"]) for i, s in enumerate(stages)], []])
        _bg, fg = plot_colors()
        for i, s in enumerate(stages):
            dropped = len(self.candidates.dropped_at(s["name"]))
            label = f"{s.get('in', 0)}→{s.get('out', 0)}" + (f"\n−{dropped}" if dropped else "")
            if s.get("places") is not None and s["places"] != s.get("out"):
                label += f"\n{s['places']} places"  # facts share their turn's place in the top k
            t = pg.TextItem(label, color=fg, anchor=(0.5, 1.0))
            t.setPos(float(i), float(max(s.get("in", 0), s.get("out", 0))))
            self.funnel.addItem(t, ignoreBounds=True)
            self._funnel_labels.append(t)
        if stages:
            self._funnel_top = float(max(n_in.max(), n_out.max(), 1.0))
            self._fit_funnel()
            self.funnel.setXRange(-0.6, len(stages) - 0.4, padding=0)

    def _fit_funnel(self, *_args) -> None:
        """Room over the tallest bar for its label, in pixels: the labels keep their size when the
        plot gets short, so a share of the range is not enough."""
        top = self._funnel_top
        height = self.funnel.getPlotItem().getViewBox().height()
        # the labels' own height (a TextItem ignores the view's scale: its rect is in pixels)
        need = max((t.textItem.boundingRect().height() for t in self._funnel_labels), default=0.0) + 4
        share = need / height if height > 0 else 0.5
        self.funnel.setYRange(0, top / (1.0 - min(0.75, max(0.15, share))), padding=0)

    def _funnel_scene_clicked(self, ev) -> None:
        vb = self.funnel.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(ev.scenePos()):
            return
        x = vb.mapSceneToView(ev.scenePos()).x()
        i = int(round(x))
        if 0 <= i < len(self._stages) and abs(x - i) <= 0.4:
            self.filter_stage(self._stages[i]["name"])

    def filter_stage(self, stage: str | None) -> None:
        """List what a stage dropped and why (None: every candidate)."""
        if stage == "candidates":
            stage = None  # every candidate entered at this stage
        self.proxy.set_stage(stage)
        self.show_all.setEnabled(stage is not None)
        if stage is None:
            self.stage_label.setText(f"All {self.candidates.rowCount()} candidates")
        else:
            rows = self.candidates.dropped_at(stage)
            reasons: dict[str, int] = {}
            for r in rows:
                reasons[r["dropped"]["reason"]] = reasons.get(r["dropped"]["reason"], 0) + 1
            why = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1]))
            self.stage_label.setText(f"Dropped at {stage}: {len(rows)}" + (f" ({why})" if why else " — nothing"))
            self.tabs.setCurrentIndex(0)

    # candidates ----------------------------------------------------------------------------------------------------
    def _candidate_row_changed(self, current, _previous) -> None:
        if not current.isValid():
            return
        src = self.proxy.mapToSource(current)
        row = self.candidates.row(src.row())
        if row is None:
            return
        self._selected_candidate = row
        self._draw_components(row)
        mid = int(row["memory_id"])
        self.target_memory = mid
        self._update_why()
        if (self.trace is not None and not self.trace_db and row.get("in_scope") and self.ctx is not None
                and self.trace_scope == self.ctx.scope):
            self.select("memory", mid, extra=("trace", int(self.trace["id"])))

    def _follow_replacement(self, index) -> None:
        """Double-click an outdated candidate: go to what replaced it."""
        row = self.candidates.row(self.proxy.mapToSource(index).row())
        if row and row.get("updated_by"):
            self.select_candidate(int(row["updated_by"]["by"]))

    def select_candidate(self, memory_id: int) -> bool:
        """Make the candidate row of this memory current (as a click would)."""
        i = self.candidates.row_of_memory(memory_id)
        if i is None:
            return False
        idx = self.proxy.mapFromSource(self.candidates.index(i, 0))
        if not idx.isValid():
            self.filter_stage(None)
            idx = self.proxy.mapFromSource(self.candidates.index(i, 0))
        self.candidate_view.setCurrentIndex(idx)
        return True

    def _draw_components(self, cand: dict[str, Any] | None) -> None:
        rows: list[tuple[str, dict[str, Any]]] = []
        if cand is not None:
            rows.append((f"m{cand['memory_id']}", cand))
            kept = [r for r in self.candidates.rows if r.get("rank") is not None]
            last = max(kept, key=lambda r: r["rank"]) if kept else None
            if last is not None and int(last["memory_id"]) != int(cand["memory_id"]):
                rows.append((f"kept #{last['rank']} m{last['memory_id']}", last))
        x0, x1, y, brushes, marks_x, marks_y, ticks = [], [], [], [], [], [], []
        for yi, (label, c) in enumerate(reversed(rows)):
            comp = c.get("components") or {}
            pos = neg = 0.0
            for name in [k for k in COMPONENT_ORDER if k in comp] + sorted(set(comp) - set(COMPONENT_ORDER)):
                v = float(comp[name])
                if name in ("derived_factor", "truncated") or v == 0.0:
                    continue  # a multiplier and a flag, not additive parts
                if v > 0:
                    x0.append(pos)
                    x1.append(pos + v)
                    pos += v
                else:
                    x0.append(neg + v)
                    x1.append(neg)
                    neg += v
                y.append(float(yi))
                brushes.append(pg.mkBrush(component_color(name)))
            marks_x.append(float(c.get("score") or 0.0))
            marks_y.append(float(yi))
            ticks.append((float(yi), label))
        if x0:
            self.component_bars.setOpts(x0=np.array(x0), x1=np.array(x1), y=np.array(y), height=0.6,
                                        brushes=brushes, pens=[pg.mkPen(plot_colors()[0], width=1)] * len(x0))
        else:
            self.component_bars.setOpts(x0=np.zeros(0), x1=np.zeros(0), y=np.zeros(0), brushes=None, pens=None)
        self.score_marks.setData(marks_x, marks_y)
        left = self.components.getPlotItem().getAxis("left")
        left.setTicks([ticks, []])
        left.setWidth(120)
        self.components.getPlotItem().getViewBox().autoRange(padding=0.1)
        if cand is None:
            self.component_legend.setText("")
            return
        comp = cand.get("components") or {}
        parts = []
        for name in [k for k in COMPONENT_ORDER if k in comp] + sorted(set(comp) - set(COMPONENT_ORDER)):
            if not comp[name]:
                continue
            color = component_color(name).name()
            parts.append(f"<span style='color:{color}'>■</span> {name} {float(comp[name]):+.3f}")
        fate = f"rank {cand['rank']}" if cand.get("rank") is not None else (
            f"dropped at {cand['dropped']['stage']} ({cand['dropped']['reason']})" if cand.get("dropped") else "")
        self.component_legend.setText(f"<small><b>m{cand['memory_id']}</b> score {float(cand.get('score') or 0):.4f}, "
                                      f"{fate}: " + " &nbsp; ".join(parts) + " &nbsp; | = final score</small>")

    # why not ---------------------------------------------------------------------------------------------------------
    def _set_target(self, memory_id: int) -> None:
        self.target_memory = int(memory_id)
        self._update_why()
        if self.trace is not None:
            i = self.candidates.row_of_memory(memory_id)
            if i is not None:
                self.candidate_view.selectionModel().blockSignals(True)
                idx = self.proxy.mapFromSource(self.candidates.index(i, 0))
                if idx.isValid():
                    self.candidate_view.setCurrentIndex(idx)
                    self.candidate_view.scrollTo(idx)
                self.candidate_view.selectionModel().blockSignals(False)
                self._selected_candidate = self.candidates.row(i)
                self._draw_components(self._selected_candidate)

    def _query_for_explain(self) -> str | None:
        if self.trace is not None and self.trace.get("query"):
            return self.trace["query"]
        return self.query.text().strip() or None

    def _update_why(self) -> None:
        mid = self.target_memory
        can = mid is not None and self._query_for_explain() is not None and not self.trace_db
        self.why_button.setEnabled(bool(can))
        self.why_button.setText(f"Why not m{mid}?" if mid is not None else "Why not…?")
        if mid is None or self.trace is None:
            return
        i = self.candidates.row_of_memory(mid)
        if i is None:
            self.why_text.setText(f"m{mid} was never a candidate of trace {self.trace['id']}: no channel proposed it. "
                                  "Ask “Why not” for the channel-by-channel reason.")
            return
        row = self.candidates.rows[i]
        up = row.get("updated_by")
        outdated = (f"<br><span style='color:{OUTDATED_LIGHT}'>Outdated for this question: "
                    f"{html.escape(outdated_label(up))}</span> ({up['rule']}: {html.escape(up['reason'])}) — "
                    f"double-click the row to go to m{up['by']}." if up else "")
        if row.get("rank") is not None:
            score = f"score {float(row['score']):.4f}" if row.get("score") is not None else "no score recorded"
            with_ = row.get("shares_place_with")
            shares = (f", sharing its place in the top k with m{with_} (read from the same source chunk)"
                      if with_ is not None else "")
            self.why_text.setText(f"m{mid} was retrieved at rank {row['rank']} ({score}){shares}.{outdated}")
        else:
            d = row["dropped"]
            self.why_text.setText(f"m{mid} was dropped at <b>{d['stage']}</b> — {d['reason']}: {d.get('detail') or ''}"
                                  f"{outdated}")

    def explain_target(self) -> None:
        """engine.explain(query, memory): a fresh read-only what-if for the selected memory."""
        query, mid = self._query_for_explain(), self.target_memory
        if self.ctx is None or query is None or mid is None:
            return
        engine, scope = self.ctx.engine, self.trace_scope or self.ctx.scope
        kwargs: dict[str, Any] = {}
        if self.trace is not None:
            kwargs = {"as_of": self.trace.get("as_of"), "recipe": self.trace.get("recipe"), "k": self.trace.get("k")}
        else:
            kwargs = {"as_of": self.ctx.bus.as_of}
        self.why_text.setText(f"Asking why m{mid}…")
        self.run_task(lambda _p, _s: engine.explain(query, mid, scope=scope, **kwargs), self._explained)

    def _explained(self, result: dict[str, Any]) -> None:
        verdict = {"retrieved": "retrieved", "below_cut": "ranked below the cut", "dropped": "dropped",
                   "never_candidate": "never a candidate"}.get(result["verdict"], result["verdict"])
        extra = ""
        if "score" in result and result.get("last_kept_score") is not None:
            extra = f" (score {result['score']:.4f}; last kept {result['last_kept_score']:.4f})"
        self.why_text.setText(f"<b>m{result['memory_id']}: {verdict}</b>{extra} — {result['detail']}")
        self.sigExplained.emit(result)
        self.refresh()  # explain stored its what-if trace; the list shows it, the open trace stays


__all__ = ["TracesPane", "parse_extra"]
