"""Version timeline: every version of a subject's facts over world time, with belief time marked.

Each fact version is a horizontal bar from valid_from to valid_to (open-ended versions run to
now and end in an arrow), coloured by status. Belief time is marked on the bar: learned_at
(an upward triangle), invalidated_at (a cross) and forget_after (a star). The as-of slider
spans every time the scope mentions; moving it draws a vertical line at once and, throttled by
a SignalProxy, sets the bus's as-of time (which every pane and what-if query honours). Versions
that were not valid at the as-of time are dimmed. The pane follows the selected fact.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QPushButton, QSlider

from engine.timeutil import now_iso
from ui.models.graph_style import plot_colors, status_color, styled_plot
from ui.models.timeline_data import TimelineData, build_timeline, iso, ts
from ui.panes.base import PaneBase
from ui.selection import Selection

SLIDER_STEPS = 1000
BAR_HEIGHT = 0.6
DIM_ALPHA = 55
LABEL_CHARS = 30
AXIS_WIDTH = 235


class TimelinePane(PaneBase):
    pane_key = "timeline"
    title = "Version timeline"
    watched_tables = frozenset({"facts", "memories"})

    sigTimelineShown = Signal(object)  # the TimelineData now on screen

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.data = TimelineData()
        self.span: tuple[float, float] = (0.0, 1.0)  # world time of the scope (the slider's range)
        self.view_range: tuple[float, float] | None = None
        self.draw_limit = 0.0
        self.valid_now = np.zeros(0, dtype=bool)
        self.pinned_marks = 0
        self.selected_fact: int | None = None
        self.turn_claims: tuple[int, list[dict[str, Any]]] | None = None  # a selected turn and its claims
        self._pending_fact: dict[str, Any] | None = None
        self._request_id = 0
        self.timings: dict[str, float] = {}

        bar = QHBoxLayout()
        self.subject = QComboBox(self)
        self.subject.setMinimumContentsLength(16)
        self.subject.setToolTip("The subject whose fact versions are shown")
        self.predicate = QComboBox(self)
        self.predicate.setMinimumContentsLength(14)
        self.predicate.addItem("All predicates", None)
        self.follow = QCheckBox("Follow selection", self)
        self.follow.setChecked(True)
        bar.addWidget(QLabel("Subject", self))
        bar.addWidget(self.subject)
        bar.addWidget(self.predicate)
        bar.addWidget(self.follow)
        bar.addStretch(1)
        self.root_layout.addLayout(bar)

        self.plot = styled_plot(self, axisItems={"bottom": pg.DateAxisItem(orientation="bottom", utcOffset=0)})
        _bg, fg = plot_colors()
        ax = self.plot.getPlotItem().getAxis("bottom")
        ax.setPen(pg.mkPen(fg))
        ax.setTextPen(pg.mkPen(fg))
        self.plot.setMenuEnabled(False)
        self.plot.getPlotItem().getViewBox().setMouseEnabled(x=True, y=False)
        self.plot.showGrid(x=True, y=False, alpha=0.15)
        self.bars = pg.BarGraphItem(x0=np.zeros(0), x1=np.zeros(0), y=np.zeros(0), height=BAR_HEIGHT)
        self.open_marks = pg.ScatterPlotItem(symbol="t2", size=11, pen=None)
        self.learned_marks = pg.ScatterPlotItem(symbol="t1", size=10, brush=pg.mkBrush("#2563eb"), pen=None)
        self.invalidated_marks = pg.ScatterPlotItem(symbol="x", size=11, brush=pg.mkBrush(fg), pen=pg.mkPen(fg))
        self.forget_marks = pg.ScatterPlotItem(symbol="star", size=12, brush=pg.mkBrush("#ea580c"), pen=None)
        self.selected_outline = pg.BarGraphItem(x0=np.zeros(0), x1=np.zeros(0), y=np.zeros(0), height=BAR_HEIGHT + 0.2,
                                                brush=None, pen=pg.mkPen("#dc2626", width=2))
        for item in (self.bars, self.selected_outline, self.open_marks, self.learned_marks, self.invalidated_marks,
                     self.forget_marks):
            self.plot.addItem(item)
        self.as_of_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#dc2626", width=2),
                                          label="as of", labelOpts={"position": 0.985, "color": "#dc2626",
                                                                 "fill": (255, 255, 255, 210)})
        self.as_of_line.hide()
        self.plot.addItem(self.as_of_line, ignoreBounds=True)
        self.plot.scene().sigMouseClicked.connect(self._scene_clicked)
        self.root_layout.addWidget(self.plot, 1)

        slider_row = QHBoxLayout()
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setRange(0, SLIDER_STEPS)
        self.slider.setToolTip("As-of time: what the memory believed was true at this moment")
        self.as_of_label = QLabel("as of: now", self)
        self.as_of_label.setMinimumWidth(210)
        self.clear_as_of = QPushButton("Now", self)
        self.clear_as_of.setToolTip("Clear the as-of time (recall and every pane use the present)")
        slider_row.addWidget(QLabel("As of", self))
        slider_row.addWidget(self.slider, 1)
        slider_row.addWidget(self.as_of_label)
        slider_row.addWidget(self.clear_as_of)
        self.root_layout.addLayout(slider_row)
        self.detail = QLabel("", self)
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.root_layout.addWidget(self.detail)
        self.legend = QLabel(self._legend_html(), self)
        self.root_layout.addWidget(self.legend)

        self.subject.currentIndexChanged.connect(self._subject_changed)
        self.predicate.currentIndexChanged.connect(self.request)
        self.slider.valueChanged.connect(self._slider_moved_now)
        # rapid slider input reaches the bus (and every pane listening to it) at most 20 times a second
        self._proxy = pg.SignalProxy(self.slider.valueChanged, rateLimit=20, slot=self._slider_settled)
        self.clear_as_of.clicked.connect(self._clear_as_of)

    # protocol ----------------------------------------------------------------------------------------
    def refresh(self) -> None:
        if self.ctx is None:
            self.show_timeline(TimelineData())
            return
        engine, scope = self.ctx.engine, self.ctx.scope
        self.read(lambda: (engine.fact_subjects(scope), engine.time_span(scope)), self._subjects_loaded)

    def on_selected(self, sel: Selection) -> None:
        if self.ctx is None or not self.follow.isChecked() or sel.kind not in ("fact", "memory"):
            return
        engine, scope = self.ctx.engine, self.ctx.scope

        def work():
            if sel.kind == "fact":
                return engine.fact(scope, sel.id), None
            fact = engine.fact_by_memory(scope, sel.id)
            if fact is not None:
                return fact, None
            # a turn: the claims it carried, the replaced one first (the interval that ended)
            claims = sorted(engine.turn_claims(scope, [sel.id]).get(sel.id, []),
                            key=lambda f: (f["status"] != "superseded", f["fact_id"]))
            return (engine.fact(scope, claims[0]["fact_id"]) if claims else None), (sel.id, claims)

        self.read(work, self._follow_selection)

    def _follow_selection(self, result) -> None:
        fact, turn = result
        self.turn_claims = turn
        self._follow_fact(fact)
        if turn is not None and fact is None:
            self.detail.setText(f"Turn m{turn[0]} carried no extracted claim.")

    def on_as_of_changed(self, as_of: str | None) -> None:
        self._apply_as_of(as_of)

    def shutdown(self) -> None:
        self._proxy.disconnect()
        super().shutdown()

    # loading -----------------------------------------------------------------------------------------
    def _subjects_loaded(self, result) -> None:
        subjects, (lo, hi) = result
        now = time.time()
        lo_t, hi_t = ts(lo), ts(hi)
        if not np.isfinite(lo_t):
            lo_t, hi_t = now - 86400.0, now
        self.span = (lo_t, max(hi_t, lo_t + 1.0))
        current = self.subject.currentData()
        self.subject.blockSignals(True)
        self.subject.clear()
        for s in subjects:
            self.subject.addItem(f"{s['subject']} ({s['n']})", s["subject_key"])
        want = self._pending_fact["subject_key"] if self._pending_fact else current
        i = self.subject.findData(want)
        self.subject.setCurrentIndex(i if i >= 0 else 0)
        self.subject.blockSignals(False)
        self._apply_as_of(self.ctx.bus.as_of if self.ctx else None)
        self._load_predicates()

    def _subject_changed(self) -> None:
        self._load_predicates()

    def _load_predicates(self) -> None:
        if self.ctx is None:
            return
        key = self.subject.currentData()
        engine, scope = self.ctx.engine, self.ctx.scope
        self.read(lambda: engine.fact_predicates(scope, key) if key else [], self._predicates_loaded)

    def _predicates_loaded(self, predicates) -> None:
        current = self.predicate.currentData()
        if self._pending_fact and current is not None:
            current = self._pending_fact["predicate_key"]
        self.predicate.blockSignals(True)
        self.predicate.clear()
        self.predicate.addItem("All predicates", None)
        for p in predicates:
            self.predicate.addItem(f"{p['predicate']} ({p['n']})", p["predicate_key"])
        i = self.predicate.findData(current)
        self.predicate.setCurrentIndex(i if i >= 0 else 0)
        self.predicate.blockSignals(False)
        self._pending_fact = None
        self.request()

    def _follow_fact(self, fact: dict | None) -> None:
        if fact is None:
            return
        self.selected_fact = int(fact["id"])
        if fact["subject_key"] == self.subject.currentData() and (
                self.predicate.currentData() in (None, fact["predicate_key"])):
            self._draw_selected()
            return
        self._pending_fact = {"subject_key": fact["subject_key"], "predicate_key": fact["predicate_key"]}
        i = self.subject.findData(fact["subject_key"])
        if i < 0:
            self.refresh()
            return
        if i == self.subject.currentIndex():
            self._load_predicates()
        else:
            self.subject.setCurrentIndex(i)  # -> predicates -> request

    def request(self, *_args) -> None:
        if self.ctx is None:
            return
        key = self.subject.currentData()
        pred = self.predicate.currentData()
        engine, scope = self.ctx.engine, self.ctx.scope
        self._request_id += 1
        rid = self._request_id
        now = ts(now_iso())
        if key is None:
            self.show_timeline(TimelineData(now=now))
            return
        self.read(lambda: build_timeline(engine.timeline_facts(scope, key, pred), now=now),
                  lambda data: self.show_timeline(data) if rid == self._request_id else None)

    # drawing -------------------------------------------------------------------------------------------
    def show_timeline(self, data: TimelineData) -> None:
        t0 = time.perf_counter()
        self.data = data
        n = len(data)
        if n == 0:
            self.bars.setOpts(x0=np.zeros(0), x1=np.zeros(0), y=np.zeros(0), brushes=None, pens=None)
            for item in (self.open_marks, self.learned_marks, self.invalidated_marks, self.forget_marks):
                item.setData([], [])
            self.selected_outline.setOpts(x0=np.zeros(0), x1=np.zeros(0), y=np.zeros(0))
            self.detail.setText("No facts for this subject." if self.ctx is not None else "No database open.")
            self.sigTimelineShown.emit(data)
            return
        # The view covers world time (the scope's span and these versions); belief times that fall
        # outside it (imported history is learned long after it happened) are pinned to its edges.
        lo = min(self.span[0], float(np.nanmin(data.start)))
        finite_end = data.end[~data.open_ended]
        hi = max([self.span[1], float(np.nanmax(data.start))] + ([float(finite_end.max())] if len(finite_end) else []))
        pad = max((hi - lo) * 0.06, 86400.0)
        self.view_range = (lo - pad, hi + pad)
        self.draw_limit = hi + 0.6 * pad  # open bars, arrows and pinned marks stop here, inside the view
        self._paint_bars()
        ends = data.open_ended
        arrow_x = np.minimum(data.end, self.draw_limit) + 0.1 * pad
        self.open_marks.setData(arrow_x[ends], data.row[ends], brush=[self._status_brush(s) for s, o in
                                                                        zip(data.status, ends) if o])
        pinned = 0
        for item, times in ((self.learned_marks, data.learned), (self.invalidated_marks, data.invalidated),
                            (self.forget_marks, data.forget_after)):
            ok = np.isfinite(times)
            x = np.clip(times[ok], self.view_range[0], self.draw_limit)
            pinned += int((x != times[ok]).sum())
            item.setData(x, data.row[ok] + BAR_HEIGHT / 2 + 0.08)
        self.pinned_marks = pinned
        # one label per row; pyqtgraph drops a tick label that does not fit the axis, so cap the length
        ticks = [(float(y), _short(f"{self._predicate_of(i)}: {lbl}", LABEL_CHARS))
                 for i, (y, lbl) in enumerate(zip(data.row, data.labels))]
        left = self.plot.getPlotItem().getAxis("left")
        left.setTicks([ticks, []])
        left.setWidth(AXIS_WIDTH)
        self._draw_selected()
        self.plot.setXRange(*self.view_range, padding=0)
        self.plot.setYRange(float(data.row.min()) - 0.8, float(data.row.max()) + 0.8, padding=0)
        self.timings["set_data_ms"] = (time.perf_counter() - t0) * 1000
        note = f"; {pinned} belief mark(s) outside the world-time range are pinned to its edge" if pinned else ""
        claims = self._claims_text() if (data.fact_ids == self.selected_fact).any() else None
        self.detail.setText(claims or f"{n} version(s) of {self.subject.currentText().rsplit(' (', 1)[0]}; "
                                      f"click a bar to select that fact{note}.")
        self.sigTimelineShown.emit(data)

    def _predicate_of(self, i: int) -> str:
        y = self.data.row[i]
        name = ""
        for gy, pred in self.data.group_ticks:
            if gy >= y:
                name = pred
        return name

    def _status_brush(self, status: str, alpha: int = 255):
        c = QColor(status_color(status))
        if status in ("superseded", "expired", "retracted"):
            alpha = min(alpha, 150)
        c.setAlpha(alpha)
        return pg.mkBrush(c)

    def _paint_bars(self) -> None:
        data = self.data
        if not len(data):
            return
        as_of = self.ctx.bus.as_of if self.ctx is not None else None
        valid = data.valid_at(ts(as_of)) if as_of else np.ones(len(data), dtype=bool)
        brushes = [self._status_brush(s, 255 if v else DIM_ALPHA) for s, v in zip(data.status, valid)]
        pens = [pg.mkPen(status_color(s).darker(140), width=2 if s == "needs_review" else 1,
                         style=Qt.PenStyle.DashLine if g else Qt.PenStyle.SolidLine)
                for s, g in zip(data.status, data.start_guessed)]
        end = np.minimum(data.end, self.draw_limit) if self.view_range else data.end
        self.bars.setOpts(x0=data.start, x1=np.maximum(end, data.start), y=data.row, height=BAR_HEIGHT,
                          brushes=brushes, pens=pens)
        self.valid_now = valid

    def _claims_text(self) -> str | None:
        """"Turn m3 carried: lives_in Berlin 2024-01-10 → 2024-06-12 (superseded); ..." for a selected turn."""
        if not self.turn_claims or not self.turn_claims[1]:
            return None
        mid, claims = self.turn_claims
        parts = [f"{c['predicate_key']} {c['object']} {(c['valid_from'] or '?')[:10]} → "
                 f"{(c['valid_to'] or 'now')[:10]} ({c['status'].replace('_', ' ')})" for c in claims]
        return f"Turn m{mid} carried: " + "; ".join(parts)

    def _draw_selected(self) -> None:
        data = self.data
        sel = data.fact_ids == self.selected_fact if self.selected_fact is not None else np.zeros(len(data), bool)
        claims = self._claims_text()
        if claims is not None and sel.any():
            self.detail.setText(claims)
        if sel.any():
            end = np.minimum(data.end[sel], self.draw_limit) if self.view_range else data.end[sel]
            self.selected_outline.setOpts(x0=data.start[sel], x1=np.maximum(end, data.start[sel]), y=data.row[sel])
        else:
            self.selected_outline.setOpts(x0=np.zeros(0), x1=np.zeros(0), y=np.zeros(0))

    # as-of --------------------------------------------------------------------------------------------
    def slider_time(self, value: int | None = None) -> float:
        v = self.slider.value() if value is None else value
        lo, hi = self.span
        return lo + (hi - lo) * v / SLIDER_STEPS

    def _slider_moved_now(self, value: int) -> None:
        t = self.slider_time(value)
        self.as_of_line.setValue(t)
        self.as_of_line.show()
        self.as_of_label.setText(f"as of: {iso(t)}")

    def _slider_settled(self, args) -> None:
        if self.ctx is None or self._closed:
            return
        self.ctx.bus.set_as_of(iso(self.slider_time(int(args[0]))))

    def _clear_as_of(self) -> None:
        if self.ctx is not None:
            self.ctx.bus.set_as_of(None)

    def _apply_as_of(self, as_of: str | None) -> None:
        if as_of:
            t = ts(as_of)
            lo, hi = self.span
            value = int(round((t - lo) / (hi - lo) * SLIDER_STEPS)) if hi > lo else 0
            self.slider.blockSignals(True)
            self.slider.setValue(int(np.clip(value, 0, SLIDER_STEPS)))
            self.slider.blockSignals(False)
            self.as_of_line.setValue(t)
            self.as_of_line.show()
            self.as_of_label.setText(f"as of: {as_of}")
        else:
            self.slider.blockSignals(True)
            self.slider.setValue(SLIDER_STEPS)
            self.slider.blockSignals(False)
            self.as_of_line.hide()
            self.as_of_label.setText("as of: now")
        self._paint_bars()

    # interaction ------------------------------------------------------------------------------------
    def _scene_clicked(self, ev) -> None:
        vb = self.plot.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(ev.scenePos()):
            return
        p = vb.mapSceneToView(ev.scenePos())
        self.click_at(p.x(), p.y())

    def click_at(self, x: float, y: float) -> None:
        """Select the fact version whose bar row is at y (the whole row is the target)."""
        i = self.data.row_of_y(y)
        if i is None:
            return
        self.selected_fact = int(self.data.fact_ids[i])
        self.turn_claims = None
        self._draw_selected()
        self.detail.setText(self.data.tips[i].replace("\n", " — "))
        self.select("fact", self.selected_fact)

    @staticmethod
    def _legend_html() -> str:
        parts = [f"<span style='color:{status_color(s).name()}'>■</span> {s.replace('_', ' ')}"
                 for s in ("active", "needs_review", "superseded", "expired", "retracted")]
        parts += ["<span style='color:#2563eb'>▲</span> learned", "✕ invalidated",
                  "<span style='color:#ea580c'>★</span> forget after", "▶ still valid (open-ended)",
                  "dashed: no valid_from (learned time used)"]
        return "<small>" + " &nbsp; ".join(parts) + "</small>"


def _short(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


__all__ = ["TimelinePane"]
