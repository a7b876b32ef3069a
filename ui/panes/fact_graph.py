"""Fact graph: entities and facts as nodes, subject -> fact -> object edges and memory relations.

The pane shows either the neighbourhood of the current selection (k fact-to-fact hops) or the
whole scope, filtered by predicate, status and time. Reading, graph assembly and the force
layout (ui/models/graph_layout.py) run in one runner task; the GUI thread only calls `setData`
with numpy arrays. Positions carry over by node key between requests, so growing the
neighbourhood moves what the operator was looking at as little as possible.

Encoding: entities are teal squares; facts are circles coloured by status (superseded, expired
and retracted faded), outlined amber when they need review, and shaped by trust (user circle,
assistant hexagon, tool triangle, external diamond); seeds of the neighbourhood get a red ring.
Relation edges are coloured by type (updates orange, extends blue, derives purple).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFontMetricsF
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDateEdit,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QSpinBox,
)

from engine.timeutil import normalise_iso
from ui.models.graph_data import (
    EDGE_KINDS,
    NODE_KINDS,
    RELATION_KINDS,
    STATUSES,
    TRUSTS,
    GraphData,
    build_graph,
    lay_out,
    positions_by_key,
)
from ui.models.graph_style import (
    ENTITY_COLOR,
    EPISODE_COLOR,
    MENTION_EDGE,
    RELATION_COLORS,
    SEED_OUTLINE,
    STRUCTURE_EDGE,
    pick,
    plot_colors,
    status_color,
    styled_plot,
)
from ui.panes.base import PaneBase
from ui.selection import Selection
from ui.tasks import Task

TRUST_SYMBOL = {"user": "o", "assistant": "h", "tool": "t", "external": "d"}
FADED = ("superseded", "expired", "retracted")
LABEL_LIMIT = 40
SMALL_GRAPH = 40  # up to this many nodes every node is labelled
MAX_FACTS = 20000
EPISODE_LIMIT = 3000


class FactGraphPane(PaneBase):
    pane_key = "graph"
    title = "Fact graph"
    watched_tables = frozenset({"facts", "memories", "memory_relations", "entities", "entity_mentions"})

    sigGraphShown = Signal(object)  # the GraphData now on screen (tests, snapshot)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.graph = GraphData()
        self._positions: dict[str, tuple[float, float]] = {}
        self._seed: dict[str, Any] = {}  # {"fact_ids": [...], "entity_keys": [...], "label": str}
        self._task: Task | None = None
        self._request_id = 0
        self._labels: list[pg.TextItem] = []
        self.timings: dict[str, float] = {}

        bar = QHBoxLayout()
        self.mode = QComboBox(self)
        self.mode.addItem("Neighbourhood of selection", "neighbourhood")
        self.mode.addItem("Whole scope", "scope")
        self.mode.setToolTip("Show the facts around the current selection, or every fact of the scope")
        self.hops = QSpinBox(self)
        self.hops.setRange(0, 6)
        self.hops.setValue(1)
        self.hops.setPrefix("hops ")
        self.hops.setToolTip("Fact-to-fact steps through shared entities and memory relations")
        self.predicate = QComboBox(self)
        self.predicate.addItem("All predicates", None)
        self.predicate.setMinimumContentsLength(14)
        self.episodes = QCheckBox("Episodes", self)
        self.episodes.setToolTip("Also show episode memories that mention the entities on screen")
        self.show_labels = QCheckBox("Labels", self)
        self.show_labels.setChecked(True)
        for w in (self.mode, self.hops, self.predicate, self.episodes, self.show_labels):
            bar.addWidget(w)
        bar.addStretch(1)
        self.root_layout.addLayout(bar)

        filt = QHBoxLayout()
        self.status_boxes: dict[str, QCheckBox] = {}
        for st in STATUSES:
            box = QCheckBox(st.replace("_", " "), self)
            box.setChecked(True)
            self.status_boxes[st] = box
            filt.addWidget(box)
        self.time_mode = QComboBox(self)
        self.time_mode.addItem("Any time", "any")
        self.time_mode.addItem("Valid at as-of", "as_of")
        self.time_mode.addItem("Valid between", "range")
        self.since = QDateEdit(self)
        self.until = QDateEdit(self)
        for edit in (self.since, self.until):
            edit.setCalendarPopup(True)
            edit.setDisplayFormat("yyyy-MM-dd")
            w.setEnabled(False)
        filt.addWidget(self.time_mode)
        filt.addWidget(self.since)
        filt.addWidget(self.until)
        filt.addStretch(1)
        self.root_layout.addLayout(filt)

        self.plot = styled_plot(self)
        self.plot.hideAxis("left")
        self.plot.hideAxis("bottom")
        self.plot.setAspectLocked(True)
        self.plot.setMenuEnabled(False)
        # Which labels fit without overlapping depends on the zoom: lay them out again once a pan
        # or zoom settles.
        self._relabel = QTimer(self)
        self._relabel.setSingleShot(True)
        self._relabel.setInterval(120)
        self._relabel.timeout.connect(self._draw_labels)
        self.plot.getViewBox().sigRangeChanged.connect(lambda *_: None if self._closed else self._relabel.start())
        self.graph_item = pg.GraphItem()
        self.graph_item.scatter.opts["hoverable"] = True
        self.graph_item.scatter.opts["tip"] = self._tip
        self.edge_items: dict[str, pg.PlotDataItem] = {}
        for kind in (*RELATION_KINDS, "mention"):
            color = RELATION_COLORS.get(kind) or pick(MENTION_EDGE)
            style = Qt.PenStyle.DashLine if kind == "derives" else Qt.PenStyle.SolidLine
            item = pg.PlotDataItem(connect="pairs", pen=pg.mkPen(color, width=2 if kind != "mention" else 1,
                                                                 style=style))
            self.edge_items[kind] = item
            self.plot.addItem(item)
        self.plot.addItem(self.graph_item)  # nodes above the relation edges
        self.graph_item.scatter.sigClicked.connect(self._clicked)
        self.root_layout.addWidget(self.plot, 1)

        foot = QHBoxLayout()
        self.summary = QLabel("", self)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(160)
        self.progress.setTextVisible(False)
        self.progress.hide()
        foot.addWidget(self.summary, 1)
        foot.addWidget(self.progress)
        self.root_layout.addLayout(foot)
        self.detail = QLabel("", self)
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.root_layout.addWidget(self.detail)
        self.legend = QLabel(self._legend_html(), self)
        self.legend.setWordWrap(True)
        self.root_layout.addWidget(self.legend)

        self.mode.currentIndexChanged.connect(self.request)
        self.hops.valueChanged.connect(self.request)
        self.predicate.currentIndexChanged.connect(self.request)
        self.episodes.toggled.connect(self.request)
        self.show_labels.toggled.connect(lambda _=None: self._draw_labels())
        for box in self.status_boxes.values():
            box.toggled.connect(self.request)
        self.time_mode.currentIndexChanged.connect(self._time_mode_changed)
        self.since.dateChanged.connect(self.request)
        self.until.dateChanged.connect(self.request)

    # protocol ------------------------------------------------------------------------------------
    def refresh(self) -> None:
        if self.ctx is None:
            self._clear()
            return
        engine, scope = self.ctx.engine, self.ctx.scope
        self.read(lambda: (engine.fact_predicates(scope), engine.time_span(scope)), self._filters_loaded)

    def on_selected(self, sel: Selection) -> None:
        if self.ctx is None or sel.kind not in ("fact", "memory", "entity", "conflict"):
            return
        engine, scope = self.ctx.engine, self.ctx.scope

        def seeds() -> dict[str, Any]:
            if sel.kind == "fact":
                return {"fact_ids": [sel.id], "entity_keys": [], "label": f"fact {sel.id}"}
            if sel.kind == "memory":
                fact = engine.fact_by_memory(scope, sel.id)
                if fact is not None:
                    return {"fact_ids": [fact["id"]], "entity_keys": [], "label": f"fact {fact['id']}"}
                return {"fact_ids": [], "entity_keys": engine.entity_keys_of_memory(scope, sel.id),
                        "label": f"memory {sel.id}"}
            if sel.kind == "entity":
                key = engine.entity_key(scope, sel.id)
                return {"fact_ids": [], "entity_keys": [key] if key else [], "label": f"entity {key}"}
            c = engine.conflict(scope, sel.id)
            ids = [] if c is None else [x for x in (c["fact_a_id"], c["fact_b_id"]) if x]
            return {"fact_ids": ids, "entity_keys": [], "label": f"conflict {sel.id}"}

        self.read(seeds, self._set_seed)

    def on_as_of_changed(self, as_of: str | None) -> None:
        if self.time_mode.currentData() == "as_of":
            self.request()

    def shutdown(self) -> None:
        self._relabel.stop()
        if self._task is not None:
            self._task.cancel()
        super().shutdown()

    # requests ------------------------------------------------------------------------------------
    def _filters_loaded(self, result) -> None:
        predicates, (lo, hi) = result
        current = self.predicate.currentData()
        self.predicate.blockSignals(True)
        self.predicate.clear()
        self.predicate.addItem("All predicates", None)
        for p in predicates:
            self.predicate.addItem(f"{p['predicate_key']} ({p['n']})", p["predicate_key"])
        i = self.predicate.findData(current)
        self.predicate.setCurrentIndex(max(0, i))
        self.predicate.blockSignals(False)
        for w, value in ((self.since, lo), (self.until, hi)):
            if value:
                w.blockSignals(True)
                w.setDate(_qdate(value))
                w.blockSignals(False)
        self.request()

    def _set_seed(self, seed: dict[str, Any]) -> None:
        self._seed = seed
        if self.mode.currentData() == "neighbourhood":
            self.request()
        else:
            self._mark_seed_in_place()

    def _time_mode_changed(self) -> None:
        rng = self.time_mode.currentData() == "range"
        self.since.setEnabled(rng)
        self.until.setEnabled(rng)
        self.request()

    def params(self) -> dict[str, Any]:
        statuses = [s for s, b in self.status_boxes.items() if b.isChecked()]
        since = until = None
        tm = self.time_mode.currentData()
        if tm == "as_of" and self.ctx is not None and self.ctx.bus.as_of:
            since = until = self.ctx.bus.as_of
        elif tm == "range":
            since = normalise_iso(self.since.date().toString("yyyy-MM-dd") + "T00:00:00Z")
            until = normalise_iso(self.until.date().toString("yyyy-MM-dd") + "T23:59:59Z")
        pred = self.predicate.currentData()
        return {"mode": self.mode.currentData(), "hops": self.hops.value(), "statuses": statuses,
                "predicate_keys": [pred] if pred else None, "since": since, "until": until,
                "episodes": self.episodes.isChecked(), "seed": dict(self._seed)}

    def request(self, *_args) -> None:
        """Read, build and lay out the graph for the current controls, off the GUI thread."""
        if self.ctx is None:
            return
        if self._task is not None:
            self._task.cancel()
        self._request_id += 1
        rid = self._request_id
        p = self.params()
        engine, scope = self.ctx.engine, self.ctx.scope
        previous = dict(self._positions)
        size = self.plot.size()
        aspect = size.width() / max(1, size.height())

        def work(progress, should_stop) -> tuple[GraphData, float]:
            t0 = time.perf_counter()
            statuses = p["statuses"] or ["__none__"]
            seed = p["seed"]
            if p["mode"] == "neighbourhood" and (seed.get("fact_ids") or seed.get("entity_keys")):
                hood = engine.graph_neighbourhood(scope, fact_ids=seed.get("fact_ids", ()),
                                                  entity_keys=seed.get("entity_keys", ()), hops=p["hops"],
                                                  statuses=statuses, predicate_keys=p["predicate_keys"],
                                                  since=p["since"], until=p["until"], max_facts=MAX_FACTS)
                facts, relations, truncated = hood["facts"], hood["relations"], hood["truncated"]
            else:
                facts = engine.graph_facts(scope, statuses=statuses, predicate_keys=p["predicate_keys"],
                                           since=p["since"], until=p["until"], limit=MAX_FACTS + 1)
                truncated = len(facts) > MAX_FACTS
                facts = facts[:MAX_FACTS]
                relations = engine.graph_relations(scope)
            episodes = []
            if p["episodes"]:
                keys = sorted({f["subject_key"] for f in facts} | {f["object_key"] for f in facts}
                              | set(seed.get("entity_keys", ())))
                episodes = engine.episodes_mentioning(scope, keys, limit=EPISODE_LIMIT)
            read_ms = (time.perf_counter() - t0) * 1000
            progress(0.05, "building graph")
            graph = build_graph(facts, relations, episodes, seed_fact_ids=seed.get("fact_ids", ()),
                                seed_entity_keys=seed.get("entity_keys", ()))
            graph.truncated = truncated
            lay_out(graph, previous=previous, aspect=aspect, should_stop=should_stop,
                    progress=lambda f, m: progress(0.1 + 0.9 * f, m))
            return graph, read_ms

        self.progress.setValue(0)
        self.progress.show()
        self._task = self.run_task(work, functools.partial(self._shown, rid), on_error=functools.partial(self._failed, rid),
                                   on_progress=lambda fraction, _message: self._progress(rid, fraction))

    def _progress(self, rid: int, fraction: float) -> None:
        if rid == self._request_id:
            self.progress.setValue(int(fraction * 100))

    def _failed(self, rid: int, exc: BaseException) -> None:
        if rid == self._request_id:
            self.progress.hide()
            self.banner.show_error(exc)

    def _shown(self, rid: int, result) -> None:
        if rid != self._request_id:
            return  # a newer request superseded this one
        graph, read_ms = result
        self.progress.hide()
        self.banner.clear()
        self.show_graph(graph)
        self.timings["read_ms"] = read_ms

    # drawing ------------------------------------------------------------------------------------------
    def show_graph(self, graph: GraphData) -> None:
        """Put a laid-out graph on screen (GUI thread): one setData per item, numpy arrays."""
        t0 = time.perf_counter()
        self.graph = graph
        self._positions = positions_by_key(graph) if len(graph) else self._positions
        n = len(graph)
        if n == 0:
            self._clear()
            self.summary.setText(self._empty_text())
            self.sigGraphShown.emit(graph)
            return
        symbols, sizes, brushes, pens = self._node_style(graph)
        structural = (graph.edge_kind == EDGE_KINDS.index("subject")) | (graph.edge_kind == EDGE_KINDS.index("object"))
        self.graph_item.setData(pos=graph.pos, adj=graph.adj[structural] if structural.any() else None,
                                pen=pg.mkPen(pick(STRUCTURE_EDGE), width=1), symbol=symbols, size=sizes,
                                symbolBrush=brushes, symbolPen=pens, data=np.arange(n), pxMode=True)
        for kind, item in self.edge_items.items():
            sel = graph.edge_kind == EDGE_KINDS.index(kind)
            if sel.any():
                pts = graph.pos[graph.adj[sel].reshape(-1)]
                item.setData(pts[:, 0], pts[:, 1])
            else:
                item.setData([], [])
        self._draw_labels()
        vb = self.plot.getPlotItem().getViewBox()
        vb.setDefaultPadding(0.06)
        vb.enableAutoRange(pg.ViewBox.XYAxes, True)  # follows resizes until the operator pans or zooms
        self.timings["set_data_ms"] = (time.perf_counter() - t0) * 1000
        self.summary.setText(self._summary_text(graph))
        self.sigGraphShown.emit(graph)

    def _node_style(self, graph: GraphData):
        n = len(graph)
        entity, fact, episode = (graph.kind == NODE_KINDS.index(k) for k in NODE_KINDS)
        symbols = np.full(n, "o", dtype=object)
        sizes = np.full(n, 11.0)
        symbols[entity] = "s"
        sizes[entity] = 10.0
        sizes[episode] = 6.0
        for t, sym in TRUST_SYMBOL.items():
            symbols[fact & (graph.trust == TRUSTS.index(t))] = sym
        sizes[graph.seed] += 4.0
        # a small palette of brushes/pens, indexed per node (a few objects, not n)
        palette_b: dict[Any, Any] = {}

        def brush(key, color: QColor, alpha: int = 255):
            if key not in palette_b:
                c = QColor(color)
                c.setAlpha(alpha)
                palette_b[key] = pg.mkBrush(c)
            return palette_b[key]

        brushes = np.empty(n, dtype=object)
        brushes[entity] = brush("entity", QColor(pick(ENTITY_COLOR)))
        brushes[episode] = brush("episode", QColor(pick(EPISODE_COLOR)), 180)
        for i, st in enumerate(STATUSES):
            sel = fact & (graph.status == i)
            if sel.any():
                brushes[sel] = brush(("fact", st), status_color(st), 110 if st in FADED else 255)
        unknown = fact & (graph.status < 0)
        brushes[unknown] = brush("unknown", QColor("#6b7280"))
        bg, fg = plot_colors()
        thin = pg.mkPen(QColor(bg), width=1)
        faded_pen = pg.mkPen(QColor(127, 127, 127, 200), width=1, style=Qt.PenStyle.DotLine)
        review_pen = pg.mkPen(status_color("needs_review").darker(130), width=3)
        seed_pen = pg.mkPen(SEED_OUTLINE, width=3)
        pens = np.full(n, thin, dtype=object)
        faded = np.isin(graph.status, [STATUSES.index(s) for s in FADED]) & fact
        pens[faded] = faded_pen
        pens[fact & (graph.status == STATUSES.index("needs_review"))] = review_pen
        pens[graph.seed] = seed_pen
        return symbols, sizes, brushes, pens

    def _draw_labels(self) -> None:
        for item in self._labels:
            self.plot.removeItem(item)
        self._labels = []
        graph = self.graph
        if not self.show_labels.isChecked() or len(graph) == 0:
            return
        degree = np.bincount(graph.adj.reshape(-1), minlength=len(graph)) if len(graph.adj) else np.zeros(len(graph))
        # small graphs: every label. Larger ones: the seeds, then entities by degree (facts and
        # episodes keep their text in the tooltip), so labels name the hubs instead of piling up.
        order = np.lexsort((-degree, graph.kind != NODE_KINDS.index("entity"), graph.hop, ~graph.seed))
        if len(graph) > SMALL_GRAPH:
            named = graph.seed | (graph.kind == NODE_KINDS.index("entity"))
            order = order[named[order]]
        _, fg = plot_colors()
        view = self.plot.getViewBox()
        laid_out = view.width() > 1 and view.height() > 1  # else no pixel geometry yet: label all
        metrics = QFontMetricsF(self.font())
        taken: list[QRectF] = []
        for i in order[: LABEL_LIMIT * 5]:  # bounded: this runs on the GUI thread after every zoom
            if len(self._labels) >= LABEL_LIMIT:
                break
            x, y = float(graph.pos[i, 0]), float(graph.pos[i, 1])
            if laid_out:
                # A label that would overlap one already placed (higher in the order) is left
                # out; the node's tooltip still has its text.
                at = view.mapViewToScene(QPointF(x, y))
                w, h = metrics.horizontalAdvance(graph.labels[i]) + 6, metrics.height()
                rect = QRectF(at.x() - w / 2, at.y() + 0.35 * h, w, h)
                if not graph.seed[i] and any(rect.intersects(r) for r in taken):
                    continue
                taken.append(rect)
            item = pg.TextItem(graph.labels[i], color=fg, anchor=(0.5, -0.35))
            item.setPos(x, y)
            item.setZValue(5)
            self.plot.addItem(item, ignoreBounds=True)
            self._labels.append(item)

    def _mark_seed_in_place(self) -> None:
        g = self.graph
        if len(g) == 0:
            return
        fids = set(self._seed.get("fact_ids", ()))
        keys = set(self._seed.get("entity_keys", ()))
        g.seed = np.array([(k.startswith("f:") and int(k[2:]) in fids) or (k.startswith("e:") and k[2:] in keys)
                           for k in g.keys], dtype=bool)
        self.show_graph(g)

    def _clear(self) -> None:
        self.graph_item.setData(pos=np.zeros((0, 2)), adj=None)
        for item in self.edge_items.values():
            item.setData([], [])
        for item in self._labels:
            self.plot.removeItem(item)
        self._labels = []

    # interaction ----------------------------------------------------------------------------------
    def _tip(self, x=None, y=None, data=None) -> str:
        if data is None or self.graph is None or int(data) >= len(self.graph):
            return ""
        return self.graph.tips[int(data)]

    def _clicked(self, _scatter, points, _ev=None) -> None:
        if len(points):
            self.click_node(int(points[0].index()))

    def click_node(self, i: int) -> None:
        """What a click on node i does: facts and episodes go on the bus, entities re-centre the graph."""
        g = self.graph
        if not 0 <= i < len(g):
            return
        key = g.keys[i]
        self.detail.setText(g.tips[i].replace("\n", " — "))
        if key.startswith("f:"):
            self._seed = {"fact_ids": [int(g.fact_id[i])], "entity_keys": [], "label": key}
            self._mark_seed_in_place()
            self.select("fact", int(g.fact_id[i]))
        elif key.startswith("m:"):
            self.select("memory", int(g.memory_id[i]))
        else:
            self._seed = {"fact_ids": [], "entity_keys": [key[2:]], "label": f"entity {key[2:]}"}
            if self.mode.currentData() == "neighbourhood":
                self.request()
            else:
                self._mark_seed_in_place()

    # text -------------------------------------------------------------------------------------------
    def _summary_text(self, g: GraphData) -> str:
        parts = [f"{g.count('entity')} entities", f"{g.count('fact')} facts"]
        if g.count("episode"):
            parts.append(f"{g.count('episode')} episodes")
        rel = sum(g.edge_count(k) for k in RELATION_KINDS)
        parts.append(f"{g.edge_count()} edges ({rel} relations)")
        where = "whole scope" if self.mode.currentData() == "scope" or not self._seed else \
            f"{self.hops.value()} hop(s) around {self._seed.get('label', 'the selection')}"
        text = " · ".join(parts) + f" — {where}; layout {g.layout_ms:.0f} ms ({g.layout_iterations} iterations)"
        if g.truncated:
            text += f"; stopped at {MAX_FACTS} facts: narrow the filters"
        return text

    def _empty_text(self) -> str:
        if self.ctx is None:
            return "No database open."
        return "No facts match: widen the filters, add hops, or select a fact elsewhere."

    @staticmethod
    def _legend_html() -> str:
        def dot(color: str, text: str) -> str:
            return f"<span style='color:{color}'>■</span> {text}"

        items = [dot(pick(ENTITY_COLOR), "entity"), dot(status_color("active").name(), "active fact"),
                 dot(status_color("needs_review").name(), "needs review (outlined)"),
                 dot(status_color("superseded").name(), "superseded/expired (faded)"),
                 "◆ external · ▲ tool · ⬢ assistant · ● user"]
        items += [f"<span style='color:{c}'>━</span> {k}" for k, c in RELATION_COLORS.items()]
        return "<small>" + " &nbsp; ".join(items) + "</small>"


def _qdate(iso: str):
    from PySide6.QtCore import QDate

    return QDate.fromString(iso[:10], "yyyy-MM-dd")


__all__ = ["FactGraphPane"]
