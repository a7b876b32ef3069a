"""Benchmarks: stored runs, their dashboards, run-vs-run deltas, and every question with its trace.

The runs come from the main DB (engine/store/bench.py). For the selected run: metric@k curves
(one PlotDataItem per metric, the compared run dashed), per-category bars for one metric, the
latency histogram with p50/p95/p99, and the context-token histogram. The question table marks
misses (the chosen metric below 1, or the question failed); clicking a question opens its trace
in the traces pane through the bus — `select("trace", id, extra=("gold", memory_ids, "trace_db",
path))` — with the gold turns resolved to memory ids in the container DB that holds the trace.

New runs go through engine/bench/runner.run_benchmark in the task runner, with progress and Stop.
"""

from __future__ import annotations

import html
import importlib
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.bench import DATASETS
from engine.bench.metrics import AT_K_METRICS
from engine.bench.runner import (
    describe_differences,
    false_rules_text,
    misses_text,
    run_scores,
    run_scoring,
    setup_differences,
)
from engine.bench.scoring import definition
from engine.retrieve.recipes import RECIPES
from ui.models.bench_models import (
    BenchCompareModel,
    BenchItemsModel,
    BenchRunsModel,
    curves,
    delta_rows,
    gold_ids,
    item_missed,
    ks_of,
    metric_names,
)
from ui.models.graph_style import plot_colors, series_color, styled_plot
from ui.panes.base import PaneBase
from ui.tasks import Task
from ui.widgets.tables import row_table

# Current truth (engine/bench/update_metrics.py): drawn per half of memlens bench updates, or overall.
TRUTH_METRICS = ("current_first@1", "current_top@1", "keep_first@1", "history@3", "false_supersession",
                 "ku_latest_first", "ku_previous_first")
TRUTH_GROUPS = (("dev", "#2563eb"), ("heldout", "#d97706"), ("blind", "#059669"))
# memlens bench updates splits dev into its tidy scenarios and natural-style batches (dev:w2, dev:w3, ...,
# each written by someone who had not read the engine): drawn apart, since one mean hides the gap
NATURAL_BATCH = re.compile(r"dev:w(\d+)")
NATURAL_COLORS = ("#7c3aed", "#a855f7", "#c026d3", "#db2777", "#9333ea")
TRUTH_KEYS = frozenset((*TRUTH_METRICS, "keep_top@1"))  # every current-truth key a summary may hold
REFRESH_COALESCE_MS = 2000
SIZE_ROWS = 100  # column widths are measured on this many rows, not on every question
CURVE_TOP = 1.04


def truth_parts(by_category: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, legend label, colour) of each current-truth part a run has, in the order drawn: the tidy
    dev scenarios (or all of dev when the run does not split it), each natural-style batch, heldout, blind."""
    batches = sorted((int(m.group(1)), key) for key in by_category if (m := NATURAL_BATCH.fullmatch(key)))
    parts: list[tuple[str, str, str]] = []
    if batches and "dev:tidy" in by_category:
        parts.append(("dev:tidy", "dev tidy", TRUTH_GROUPS[0][1]))
        parts += [(key, f"dev w{n}", NATURAL_COLORS[i % len(NATURAL_COLORS)]) for i, (n, key) in enumerate(batches)]
    elif "dev" in by_category:
        parts.append(("dev", "dev", TRUTH_GROUPS[0][1]))
    parts += [(g, g, c) for g, c in TRUTH_GROUPS[1:] if g in by_category]
    return parts


def ask_data_file(parent) -> str | None:
    """The dataset file picker (tests replace this function)."""
    path, _ = QFileDialog.getOpenFileName(parent, "Benchmark data file", "", "JSON (*.json *.jsonl);;All files (*)")
    return path or None


def load_runner():
    """engine.bench.runner.run_benchmark, or None when this build has no runner."""
    try:
        return importlib.import_module("engine.bench.runner").run_benchmark
    except (ImportError, AttributeError):
        return None


def resolve_gold(engine, item: dict[str, Any]) -> tuple[int, ...]:
    """Gold turn (or session) ids of a question -> memory ids in the DB and scope holding its trace."""
    turns, sessions = gold_ids(item)
    return engine.trace_db(item.get("trace_db")).gold_memory_ids(int(item["trace_id"]), turns, sessions)


class BenchPane(PaneBase):
    pane_key = "bench"
    title = "Benchmarks"
    watched_tables = frozenset({"bench_runs", "bench_items"})

    sigRunShown = Signal(object)  # the run dict now on screen
    sigRunFinished = Signal(object)  # run_benchmark's result

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.runs: list[dict[str, Any]] = []
        self.run: dict[str, Any] | None = None
        self.other: dict[str, Any] | None = None
        self.items: list[dict[str, Any]] = []
        self._task: Task | None = None
        self._run_token = 0  # which start_run the controls are locked for
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(REFRESH_COALESCE_MS)
        self._refresh_timer.timeout.connect(self.refresh)
        self._load_id = 0
        self.run_benchmark = load_runner()

        runbar = QHBoxLayout()
        self.dataset = QComboBox(self)
        self.dataset.addItems(DATASETS)
        self.data_path = QLineEdit(self)
        self.data_path.setPlaceholderText("dataset file (LoCoMo / LongMemEval / ConvoMem JSON), or a ConvoMem folder")
        self.browse = QPushButton("…", self)
        self.limit = QSpinBox(self)
        self.limit.setRange(0, 1_000_000)
        self.limit.setSpecialValueText("all questions")
        self.limit.setPrefix("limit ")
        self.limit.setValue(50)
        self.recipe = QComboBox(self)
        self.recipe.addItems(list(RECIPES))
        self.start = QPushButton("Run", self)
        self.stop = QPushButton("Stop", self)
        self.stop.setEnabled(False)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(140)
        self.progress.hide()
        for w in (QLabel("New run:", self), self.dataset, self.data_path, self.browse, self.limit, self.recipe,
                  self.start, self.stop, self.progress):
            runbar.addWidget(w)
        runbar.setStretchFactor(self.data_path, 1)
        self.root_layout.addLayout(runbar)
        self.runner_note = QLabel("", self)
        self.root_layout.addWidget(self.runner_note)
        if self.run_benchmark is None:
            for w in (self.dataset, self.data_path, self.browse, self.limit, self.recipe, self.start):
                w.setEnabled(False)
            self.runner_note.setText("This build has no benchmark runner (engine/bench/runner.py): "
                                     "showing stored runs only.")
        else:
            self.runner_note.hide()

        outer = QSplitter(Qt.Orientation.Vertical, self)
        top = QSplitter(Qt.Orientation.Horizontal, outer)
        left = QWidget(top)
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        self.runs_model = BenchRunsModel(self)
        self.runs_view = row_table(left, self.runs_model)
        lv.addWidget(QLabel("Stored runs", left))
        lv.addWidget(self.runs_view, 1)
        opts = QGridLayout()
        self.scheme = QComboBox(left)  # scoring scheme: the benchmark's own ("official") or ours
        self.level = QComboBox(left)
        self.level.addItems(["turn", "session"])
        self.metric_combo = QComboBox(left)
        self.k = QComboBox(left)
        self.compare = QComboBox(left)
        self.compare.addItem("(no comparison)", None)
        for r, (label, w) in enumerate((("Scoring", self.scheme), ("Level", self.level), ("Metric", self.metric_combo),
                                        ("k", self.k), ("Compare with", self.compare))):
            opts.addWidget(QLabel(label, left), r, 0)
            opts.addWidget(w, r, 1)
        lv.addLayout(opts)
        # The run's summary scrolls: an updates run adds its false supersessions and misses by
        # cause, which a fixed label clipped at the window's foot.
        self.summary = QLabel("", left)
        self.summary.setWordWrap(True)
        self.summary.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary_scroll = QScrollArea(left)
        self.summary_scroll.setWidgetResizable(True)
        self.summary_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.summary_scroll.setWidget(self.summary)
        lv.addWidget(self.summary_scroll, 1)

        dash = QWidget(top)
        grid = QGridLayout(dash)
        grid.setContentsMargins(0, 0, 0, 0)
        self.curve_plot = styled_plot(dash)
        self.curve_plot.setTitle("metric@k")
        self.curve_plot.setLabel("bottom", "k")
        self.curve_plot.getPlotItem().getViewBox().sigResized.connect(self._fit_curve_ticks)
        self.curve_plot.setYRange(0, CURVE_TOP, padding=0)
        # The legend sits in its own column right of the curves, not over them (there are up to
        # seven): the dashboard is wider than tall, and a row under the axis left the curves ~25 px
        # on a 1024 x 640 window.
        self.curve_legend = pg.LegendItem(labelTextSize="7pt", colCount=1, verSpacing=-8, horSpacing=6)
        plot_item = self.curve_plot.getPlotItem()
        plot_item.layout.addItem(self.curve_legend, 2, 3)
        plot_item.layout.setColumnMinimumWidth(2, 8)  # the (hidden) right axis' column: a gap before it
        plot_item.legend = self.curve_legend  # curves added with a name register themselves
        self.category_plot = styled_plot(dash)
        self.category_plot.setTitle("by category")
        cat_axis = self.category_plot.getPlotItem().getAxis("bottom")
        cat_font = cat_axis.font()  # category names are long ("single-session-preference"): a size smaller
        cat_font.setPointSizeF(max(6.0, cat_font.pointSizeF() - 1.5))
        cat_axis.setStyle(tickFont=cat_font)
        cat_axis.setHeight(38)
        self.category_bars = pg.BarGraphItem(x=np.zeros(0), height=np.zeros(0), width=0.38, brush="#2563eb")
        self.category_bars_b = pg.BarGraphItem(x=np.zeros(0), height=np.zeros(0), width=0.38,
                                               brush=pg.mkBrush(148, 163, 184, 200))
        self.category_plot.addItem(self.category_bars_b)
        self.category_plot.addItem(self.category_bars)
        self.latency_plot = styled_plot(dash)
        self.latency_plot.setTitle("latency (ms)")
        self.latency_hist = pg.PlotDataItem(stepMode="center", fillLevel=0, brush=pg.mkBrush(37, 99, 235, 120),
                                            pen=pg.mkPen("#2563eb"))
        self.latency_plot.addItem(self.latency_hist)
        self.tokens_plot = styled_plot(dash)
        self.tokens_plot.setTitle("context tokens")
        self.tokens_hist = pg.PlotDataItem(stepMode="center", fillLevel=0, brush=pg.mkBrush(22, 163, 74, 120),
                                           pen=pg.mkPen("#16a34a"))
        self.tokens_plot.addItem(self.tokens_hist)
        self._marks: list[Any] = []
        self.not_scored: list[str] = []  # categories the chosen metric scores no question of
        self._scheme_run: int | None = None  # the run the scoring combo was filled for
        self.curve_items: dict[str, pg.PlotDataItem] = {}
        for i, w in enumerate((self.curve_plot, self.category_plot, self.latency_plot, self.tokens_plot)):
            w.setMenuEnabled(False)
            grid.addWidget(w, i // 2, i % 2)
        # current truth: shown for runs that have it (memlens bench updates, LongMemEval updates)
        self.truth_plot = styled_plot(dash)
        self.truth_plot.setTitle("current truth")
        self.truth_plot.setMenuEnabled(False)
        self.truth_bars: dict[str, pg.BarGraphItem] = {}  # one per part, made when a run first has it
        self.truth_keys: list[tuple[str, str]] = []  # (label, colour) of the parts drawn, named in the title
        self._truth_labels: list[pg.TextItem] = []
        self.truth_plot.hide()
        grid.addWidget(self.truth_plot, 2, 0, 1, 2)
        top.addWidget(left)
        top.addWidget(dash)
        top.setSizes([420, 780])

        tabs = QTabWidget(outer)
        qpage = QWidget(tabs)
        qv = QVBoxLayout(qpage)
        qv.setContentsMargins(0, 0, 0, 0)
        qbar = QHBoxLayout()
        self.misses_only = QCheckBox("Misses only", qpage)
        self.misses_only.setToolTip("Questions whose chosen metric is below 1, or that failed to run")
        self.items_note = QLabel("", qpage)
        qbar.addWidget(self.misses_only)
        qbar.addWidget(self.items_note, 1)
        qv.addLayout(qbar)
        self.items_model = BenchItemsModel(self)
        self._items_view: tuple | None = None  # (run id, metric, scheme, misses only) the table shows
        self.items_view = row_table(qpage, self.items_model)
        qv.addWidget(self.items_view, 1)
        self.compare_model = BenchCompareModel(self)
        cpage = QWidget(tabs)
        cv = QVBoxLayout(cpage)
        cv.setContentsMargins(0, 0, 0, 0)
        self.compare_note = QLabel("", cpage)  # what else the two runs did differently
        self.compare_note.setWordWrap(True)
        self.compare_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        cv.addWidget(self.compare_note)
        self.compare_view = row_table(cpage, self.compare_model)
        cv.addWidget(self.compare_view, 1)
        tabs.addTab(qpage, "Questions")
        tabs.addTab(cpage, "Compare")
        self.tabs = tabs
        outer.addWidget(top)
        outer.addWidget(tabs)
        outer.setSizes([430, 330])
        self.root_layout.addWidget(outer, 1)

        self.browse.clicked.connect(self._browse)
        self.start.clicked.connect(self.start_run)
        self.stop.clicked.connect(self.stop_run)
        self.runs_view.selectionModel().currentRowChanged.connect(self._run_row_changed)
        self.scheme.currentIndexChanged.connect(self._options_changed)
        self.level.currentIndexChanged.connect(self._options_changed)
        self.metric_combo.currentIndexChanged.connect(self._options_changed)
        self.k.currentIndexChanged.connect(self._options_changed)
        self.compare.currentIndexChanged.connect(self._compare_changed)
        self.misses_only.toggled.connect(lambda _=None: self._fill_items())
        self.items_view.clicked.connect(self._item_clicked)

    # protocol ---------------------------------------------------------------------------------------
    def refresh(self) -> None:
        if self.ctx is None:
            self.runs_model.set_rows([])
            self._show_run(None, [])
            return
        engine = self.ctx.engine
        self.read(lambda: engine.bench_runs(limit=500), self._runs_loaded)

    def on_data_changed(self, tables: set[str]) -> None:
        """A running benchmark writes bench_items after every container: re-reading and redrawing the
        whole run each time stalled the GUI thread (~400 ms at 1,000 questions), so refreshes are
        coalesced to one every REFRESH_COALESCE_MS, and skipped while this pane's own run is going
        (it refreshes when the run ends)."""
        if not (set(tables) & self.watched_tables) or self._task is not None:
            return
        if not self._refresh_timer.isActive():
            self._refresh_timer.start()

    def shutdown(self) -> None:
        self._refresh_timer.stop()
        if self._task is not None:
            self._task.cancel()
        super().shutdown()

    # runs -----------------------------------------------------------------------------------------------
    def _runs_loaded(self, runs: list[dict[str, Any]]) -> None:
        self.runs = runs
        keep = self.run["id"] if self.run else None
        self.runs_view.selectionModel().blockSignals(True)
        self.runs_model.set_rows(runs)
        self.runs_view.selectionModel().blockSignals(False)
        self.runs_view.resizeColumnsToContents()
        self.compare.blockSignals(True)
        current = self.compare.currentData()
        self.compare.clear()
        self.compare.addItem("(no comparison)", None)
        for r in runs:
            self.compare.addItem(f"run {r['id']} · {r['dataset']} · {r['recipe']}", int(r["id"]))
        i = self.compare.findData(current)
        self.compare.setCurrentIndex(max(0, i))
        self.compare.blockSignals(False)
        if not runs:
            self.summary.setText("No benchmark runs in this database yet. Start one above, or run "
                                 "`memlens bench locomo --data FILE`.")
            self._show_run(None, [])
            return
        row = self.runs_model.row_of_run(keep) if keep is not None else None
        self.select_run(int(runs[row if row is not None else 0]["id"]))

    def select_run(self, run_id: int) -> None:
        row = self.runs_model.row_of_run(run_id)
        if row is not None and self.runs_view.currentIndex().row() != row:
            self.runs_view.selectRow(row)  # -> _run_row_changed
        else:
            self._load_run(run_id)

    def _run_row_changed(self, current, _previous) -> None:
        row = self.runs_model.row(current.row())
        if row is not None:
            self._load_run(int(row["id"]))

    def _load_run(self, run_id: int) -> None:
        if self.ctx is None:
            return
        engine = self.ctx.engine
        self._load_id += 1
        lid = self._load_id
        self.read(lambda: (engine.bench_run(run_id), engine.bench_items(run_id)),
                  lambda res: self._show_run(*res) if lid == self._load_id else None)

    def _show_run(self, run: dict[str, Any] | None, items: list[dict[str, Any]]) -> None:
        self.run = run
        self.items = items
        if run is None:
            self._clear_plots()
            self.items_model.set_rows([])
            self._items_view = None
            self.compare_model.set_rows([])
            self.sigRunShown.emit(None)
            return
        scoring = run_scoring(run)
        schemes = list(run_scores(run))
        self.scheme.blockSignals(True)
        current_scheme = self.scheme.currentData()
        self.scheme.clear()
        for name in [scoring["default"], *(n for n in schemes if n != scoring["default"])]:
            recorded = scoring["schemes"].get(name) or {}
            self.scheme.addItem(name + ("" if recorded.get("official") else " (ours)"), name)
            self.scheme.setItemData(self.scheme.count() - 1, recorded.get("label", name), Qt.ItemDataRole.ToolTipRole)
        # another run opens on its default scoring (official where the benchmark has its own); the
        # same run, refreshed while it runs, keeps the scheme chosen
        i = self.scheme.findData(current_scheme) if run["id"] == self._scheme_run else -1
        self._scheme_run = run["id"]
        self.scheme.setCurrentIndex(max(0, i))
        self.scheme.blockSignals(False)
        self._fill_metric_choices()
        lat = run.get("latency_ms") or {}
        tok = run.get("context_tokens") or {}
        cfg = run.get("config") or {}
        self.summary.setText(
            f"<b>Run {run['id']}</b>: {run['dataset']} ({run.get('split') or '?'}), recipe {run['recipe']}, "
            f"embedder {run.get('embedder') or '?'}, k {run.get('k_values')}, status {run['status']}<br>"
            f"{run.get('sample_count', 0)} questions, {run.get('failures', 0)} failed; latency p50/p95/p99 "
            f"{_fmt(lat.get('p50'))}/{_fmt(lat.get('p95'))}/{_fmt(lat.get('p99'))} ms; context tokens mean "
            f"{_fmt(tok.get('mean'))}, p95 {_fmt(tok.get('p95'))}<br><small>sha256 {run['sha256'][:16]}… · commit "
            f"{(run.get('git_commit') or 'unknown')[:10]} · extract {cfg.get('extract', '?')}</small><br>"
            f"<small>scoring <b>{html.escape(scoring['default'])}</b> (default): "
            f"{html.escape((scoring['schemes'].get(scoring['default']) or {}).get('label', ''))}"
            + "".join(f"; {html.escape(n)} beside it" for n in schemes if n != scoring["default"]) + "</small>"
            + (f"<br><small>false supersessions, questions by rule: {html.escape(false)}</small>"
               if (false := false_rules_text(run_scores(run).get(scoring["default"]) or {})) else "")
            + (f"<br><small>misses of first@1, questions by cause: {html.escape(missed)}</small>"
               if (missed := misses_text(run_scores(run).get(scoring["default"]) or {})) else ""))
        self._draw()
        self._fill_items()
        self.sigRunShown.emit(run)

    def _compare_changed(self) -> None:
        other_id = self.compare.currentData()
        if other_id is None or self.ctx is None:
            self.other = None
            self._draw()
            return
        engine = self.ctx.engine
        self.read(lambda: engine.bench_run(int(other_id)), self._other_loaded)

    def _other_loaded(self, other: dict[str, Any] | None) -> None:
        self.other = other
        self._draw()

    def _options_changed(self) -> None:
        if self.sender() in (self.level, self.scheme) and self.run is not None:
            self._fill_metric_choices()  # the metric list depends on the scheme and the level
        self._update_tooltips()
        self._draw()
        self._fill_items()

    def _fill_metric_choices(self) -> None:
        metrics = self.scheme_summary(self.run).get("metrics") or {}
        names = metric_names(metrics, self.level.currentText()) or list(AT_K_METRICS)
        for combo, values, default in ((self.metric_combo, names, "recall_any"),
                                       (self.k, [str(k) for k in (ks_of(metrics) or (self.run or {}).get("k_values")
                                                                  or [])], "5")):
            current = combo.currentText() or default
            combo.blockSignals(True)
            combo.clear()
            combo.addItems(values)
            i = combo.findText(current)
            combo.setCurrentIndex(i if i >= 0 else max(0, combo.findText(default)))
            combo.blockSignals(False)
        self._update_tooltips()

    def scheme_name(self) -> str | None:
        return self.scheme.currentData()

    def scheme_summary(self, run: dict[str, Any] | None) -> dict[str, Any]:
        """The selected scheme's {"metrics", "by_category"} of a run ({} when it lacks that scheme)."""
        if not run:
            return {}
        return run_scores(run).get(self.scheme_name() or run_scoring(run)["default"]) or {}

    def metric_definition(self, key: str | None = None) -> str:
        """The one-line definition the run recorded for a metric under the selected scheme."""
        if self.run is None:
            return ""
        key = key or self.metric_key()
        text = definition(run_scoring(self.run), self.scheme_name() or "", key)
        return f"{key}: {text}" if text else f"{key}: no definition recorded with this run"

    def _update_tooltips(self) -> None:
        scoring = run_scoring(self.run) if self.run else {"schemes": {}}
        recorded = scoring["schemes"].get(self.scheme_name() or "") or {}
        self.scheme.setToolTip(recorded.get("label", ""))
        tip = self.metric_definition() if self.run else ""
        self.metric_combo.setToolTip(tip)
        self.k.setToolTip(tip)
        self.category_plot.setToolTip(tip + ("\n'not scored': no question of that category counts for this metric"
                                             if tip else ""))
        level = self.level.currentText()
        names = metric_names(self.scheme_summary(self.run).get("metrics") or {}, level)
        self.curve_plot.setToolTip("\n".join(self.metric_definition(f"{level}_{n}@1") for n in names))

    def metric_key(self) -> str:
        metric = self.metric_combo.currentText() or "recall_any"
        return f"{self.level.currentText()}_{metric}@{self.k.currentText() or 5}"

    # dashboards ---------------------------------------------------------------------------------------------
    def _clear_plots(self) -> None:
        self.truth_plot.hide()
        for item in self.curve_items.values():
            self.curve_plot.removeItem(item)
        self.curve_items = {}
        self.curve_legend.clear()
        self.category_bars.setOpts(x=np.zeros(0), height=np.zeros(0))
        self.category_bars_b.setOpts(x=np.zeros(0), height=np.zeros(0))
        self.latency_hist.setData([], [])
        self.tokens_hist.setData([], [])
        for plot, item in self._marks:
            plot.removeItem(item)
        self._marks = []

    def _draw(self) -> None:
        self._clear_plots()
        run = self.run
        if run is None:
            return
        level = self.level.currentText()
        shown, other_shown = self.scheme_summary(run), self.scheme_summary(self.other)
        mine = curves(shown.get("metrics") or {}, level)
        other_id = self.other["id"] if self.other else None
        theirs = curves(other_shown.get("metrics") or {}, level) if other_id is not None else {}
        for i, name in enumerate(sorted(mine)):
            ks, values = mine[name]
            color = series_color(i)
            item = pg.PlotDataItem(np.array(ks, float), np.array(values, float), pen=pg.mkPen(color, width=2),
                                   symbol="o", symbolSize=6, symbolBrush=color, symbolPen=None, name=name)
            self.curve_plot.addItem(item)
            self.curve_items[name] = item
            if name in theirs:
                ks_b, values_b = theirs[name]
                other = pg.PlotDataItem(np.array(ks_b, float), np.array(values_b, float),
                                        pen=pg.mkPen(color, width=1, style=Qt.PenStyle.DashLine))
                self.curve_plot.addItem(other)
                self.curve_items[f"{name} (run {other_id})"] = other
        self.curve_plot.setTitle(f"metric@k, {self.scheme_name()}" + (f" (dashed: run {self.other['id']})"
                                                                        if self.other else ""))
        ks_all = ks_of(shown.get("metrics") or {})
        if ks_all:
            self.curve_plot.getPlotItem().getAxis("bottom").setTicks([[(float(k), str(k)) for k in ks_all], []])
            self.curve_plot.setXRange(min(ks_all) - 0.5, max(ks_all) + 0.5, padding=0)
        # values live in [0, 1]; a little room above 1 keeps the markers of a perfect score whole
        self.curve_plot.setYRange(0, CURVE_TOP, padding=0)
        self._fit_curve_ticks()

        _bg, fg = plot_colors()
        key = self.metric_key()
        by_cat = shown.get("by_category") or {}
        # the updates benchmark's halves and kinds hold current truth only: drawn in its own panel
        cats = sorted(c for c, v in by_cat.items() if any(k not in TRUTH_KEYS for k in (v or {})))
        x = np.arange(len(cats), dtype=float)
        self._set_bars(self.category_bars, x - (0.2 if self.other else 0.0), [(by_cat[c] or {}).get(key) for c in cats])
        if self.other:
            ob = other_shown.get("by_category") or {}
            self._set_bars(self.category_bars_b, x + 0.2, [(ob.get(c) or {}).get(key) for c in cats])
        # a metric that scores no question of a category draws no bar there, and says so: a 0 bar
        # would read as a total failure (LoCoMo's adversarial questions have no gold for ours)
        self.not_scored = [c for c in cats if (by_cat[c] or {}).get(key) is None]
        for c in self.not_scored:
            label = pg.TextItem("not scored", color=fg, anchor=(0.5, 1.0))
            label.setPos(float(cats.index(c)), 0.0)
            self.category_plot.addItem(label, ignoreBounds=True)
            self._marks.append((self.category_plot, label))
        names = [c.replace("-", "-\n").replace(":", ":\n") for c in cats]  # a line per part: long names do not run together
        axis = self.category_plot.getPlotItem().getAxis("bottom")
        lines = max((n.count("\n") + 1 for n in names), default=1)
        axis.setHeight(8 + lines * (QFontMetrics(axis.style["tickFont"] or axis.font()).height()))
        axis.setTicks([list(enumerate(names)), []])
        self.category_plot.setTitle(f"by category: {key}, {self.scheme_name()}"
                                    + (f" (grey: run {self.other['id']})" if self.other else ""))
        self.category_plot.setYRange(0, 1.02, padding=0)
        if cats:
            self.category_plot.setXRange(-0.6, len(cats) - 0.4, padding=0)

        done = [it for it in self.items if it.get("status") == "done"]
        lat = np.array([float(it["latency_ms"]) for it in done if it.get("latency_ms") is not None])
        if len(lat):
            counts, edges = np.histogram(lat, bins=min(30, max(5, len(lat) // 3)))
            self.latency_hist.setData(edges, counts)
            for j, (name, value) in enumerate((run.get("latency_ms") or {}).items()):
                if value is None:
                    continue
                line = pg.InfiniteLine(pos=float(value), angle=90, pen=pg.mkPen(fg, style=Qt.PenStyle.DotLine),
                                       label=f"{name} {value:.1f}",
                                       labelOpts={"position": 0.92 - 0.14 * j, "color": fg})
                self.latency_plot.addItem(line, ignoreBounds=True)
                self._marks.append((self.latency_plot, line))
        tokens = np.array([float(it["context_tokens"]) for it in done if it.get("context_tokens") is not None])
        if len(tokens):
            counts, edges = np.histogram(tokens, bins=min(30, max(5, len(tokens) // 3)))
            self.tokens_hist.setData(edges, counts)
            for j, (name, value) in enumerate((run.get("context_tokens") or {}).items()):
                if value is None:
                    continue
                line = pg.InfiniteLine(pos=float(value), angle=90, pen=pg.mkPen(fg, style=Qt.PenStyle.DotLine),
                                       label=f"{name} {float(value):.0f}",
                                       labelOpts={"position": 0.92 - 0.14 * j, "color": fg})
                self.tokens_plot.addItem(line, ignoreBounds=True)
                self._marks.append((self.tokens_plot, line))
        self.compare_model.set_rows(delta_rows(shown, other_shown if self.other else None, level=level))
        self.compare_view.resizeColumnsToContents()
        self.compare_note.setText(self._compare_text(run, self.other))
        self._draw_truth(run)

    def _draw_truth(self, run: dict[str, Any]) -> None:
        """Bars of the current-truth metrics: one per part the run has (`truth_parts`), or one set overall."""
        metrics, cats = run.get("metrics") or {}, run.get("by_category") or {}
        names = [m for m in TRUTH_METRICS if metrics.get(m) is not None]
        self.truth_keys = []
        for bars in self.truth_bars.values():
            bars.setOpts(x=np.zeros(0), height=np.zeros(0))
        for label in self._truth_labels:
            self.truth_plot.removeItem(label)
        self._truth_labels = []
        if not names:
            self.truth_plot.hide()
            return
        parts = truth_parts(cats)
        groups = parts or [("all", "all", "#2563eb")]
        width = 0.8 / len(groups)
        for j, (group, label_text, color) in enumerate(groups):
            source = cats[group] if parts else metrics
            x = np.arange(len(names), dtype=float) - 0.4 + width * (j + 0.5)
            heights = [float(source.get(m) or 0.0) for m in names]
            bars = self.truth_bars.get(group)
            if bars is None:
                bars = self.truth_bars[group] = pg.BarGraphItem(x=x, height=np.zeros(0), width=0.38)
                self.truth_plot.addItem(bars)
            # the colour each draw: a batch's place (and so its colour in the title) depends on the run
            bars.setOpts(x=x, height=np.array(heights), width=width * 0.95, brush=color)
            self.truth_keys.append((label_text, color))
            _bg, fg = plot_colors()
            for xi, h in zip(x, heights):  # the value on each bar: a zero (no false supersession) shows too
                inside = h >= 0.3  # written inside a tall bar, above a short one
                label = pg.TextItem(f"{h:.2f}", color="#ffffff" if inside else fg, anchor=(0.5, 0.0 if inside else 1.0))
                if len(groups) > 3:  # five parts' values side by side fit only in a smaller font
                    font = label.textItem.font()
                    font.setPointSizeF(max(6.0, font.pointSizeF() * 0.75))
                    label.setFont(font)
                label.setPos(float(xi), h)
                self.truth_plot.addItem(label)
                self._truth_labels.append(label)
        axis = self.truth_plot.getPlotItem().getAxis("bottom")
        axis.setTicks([list(enumerate(names)), []])
        # the parts are named in the title, in their colours: a legend inside a plot this short covered bars
        keys = "  ".join(f'<span style="color:{c}">&#9632;</span> {html.escape(t)}' for t, c in self.truth_keys)
        self.truth_plot.setTitle("current truth" + (f" by part, tuned on dev only: {keys}" if parts else ""))
        self.truth_plot.setYRange(0, 1.12, padding=0)
        self.truth_plot.setXRange(-0.5, len(names) - 0.5, padding=0)
        self.truth_plot.getPlotItem().getAxis("left").setTicks([[(v, f"{v:g}") for v in (0.0, 0.5, 1.0)], []])
        self.truth_plot.show()

    @staticmethod
    def _set_bars(bars: pg.BarGraphItem, x: np.ndarray, values: list[float | None]) -> None:
        """Bars for the scored categories only (None: the metric scores none of its questions)."""
        keep = [i for i, v in enumerate(values) if v is not None]
        bars.setOpts(x=x[keep], height=np.array([values[i] for i in keep], float), width=0.38)

    def _fit_curve_ticks(self, *_args) -> None:
        """Ticks every 0.2 when the plot is tall enough for six labels, else 0, 0.5 and 1."""
        axis = self.curve_plot.getPlotItem().getAxis("left")
        height = self.curve_plot.getPlotItem().getViewBox().height()
        line = QFontMetrics(axis.style["tickFont"] or axis.font()).height()
        step = 0.2 if height >= 6 * (line + 2) else 0.5
        ticks = [round(i * step, 1) for i in range(int(round(1 / step)) + 1)]
        axis.setTicks([[(v, f"{v:.1f}") for v in ticks], []])

    def _compare_text(self, run: dict[str, Any], other: dict[str, Any] | None) -> str:
        if other is None:
            return "Pick a run to compare with (left)."
        if self.scheme_name() not in run_scores(other):
            return (f"Run {other['id']} was not scored under <b>{html.escape(str(self.scheme_name()))}</b> "
                    f"(it has {html.escape(', '.join(run_scores(other)))}): nothing to compare.")
        diffs = setup_differences(run, other)
        if not diffs:
            return f"Run {run['id']} − run {other['id']}: same setup."
        warn = any(d["field"] not in ("git_commit",) for d in diffs)
        return (f"Run {run['id']} − run {other['id']}. " + ("<b>Not like for like</b>: " if warn else "")
                + "they differ in " + html.escape(describe_differences(diffs)) + ".")

    # questions ------------------------------------------------------------------------------------------------
    def _fill_items(self) -> None:
        key, scheme = self.metric_key(), self.scheme_name()
        if (self.items_model.metric_key, self.items_model.scheme) != (key, scheme):
            self.items_model.set_metric(key, scheme)
        rows = [it for it in self.items if not self.misses_only.isChecked() or item_missed(it, key, scheme)]
        shown = self.items_model.rows
        view = ((self.run or {}).get("id"), key, scheme, self.misses_only.isChecked())
        if view == self._items_view and len(rows) >= len(shown) and \
                [r.get("question_id") for r in rows[:len(shown)]] == [r.get("question_id") for r in shown]:
            # the same run again (a running benchmark refreshes every few seconds): add the new
            # questions only; a reset and re-measured columns cost the GUI thread ~70 ms per refresh
            self.items_model.append_rows(rows[len(shown):])
        else:
            self.items_model.set_rows(rows)
            self.items_view.horizontalHeader().setResizeContentsPrecision(SIZE_ROWS)
            self.items_view.resizeColumnsToContents()
            self.items_view.setColumnWidth(2, min(380, self.items_view.columnWidth(2)))
        self._items_view = view
        misses = sum(1 for it in self.items if item_missed(it, key, scheme))
        self.items_note.setText(f"{len(rows)} shown · {misses} of {len(self.items)} below 1 on {key} ({scheme}) — "
                                "click a question to open its trace with the gold memories starred")

    def _item_clicked(self, index) -> None:
        row = self.items_model.row(index.row())
        if row is not None:
            self.open_item(row)

    def open_item(self, item: dict[str, Any]) -> None:
        """Open a question's trace in the traces pane (via the bus), gold memories marked."""
        if self.ctx is None or item.get("trace_id") is None:
            self.items_note.setText("This question has no stored trace (it failed before recall).")
            return
        engine = self.ctx.engine

        def opened(gold: tuple[int, ...]) -> None:
            extra: tuple = ("gold", tuple(int(g) for g in gold))
            if item.get("trace_db"):
                extra += ("trace_db", str(item["trace_db"]))
            self.select("trace", int(item["trace_id"]), extra=extra)

        self.read(lambda: resolve_gold(engine, item), opened)

    # running ----------------------------------------------------------------------------------------------------
    def _browse(self) -> None:
        path = ask_data_file(self)
        if path:
            self.data_path.setText(path)
            name = Path(path).name.lower()
            for ds in DATASETS:
                if ds in name:
                    self.dataset.setCurrentText(ds)

    def start_run(self) -> None:
        if self.ctx is None or self.run_benchmark is None:
            return
        path = self.data_path.text().strip()
        if not path and self.dataset.currentText() == "updates":
            from engine.bench.datasets import updates_default_path

            path = str(updates_default_path())  # memlens's own dataset ships with it
        if not path:
            self.banner.show_notice("Choose a dataset file first (the … button).", level="warning")
            return
        engine, fn = self.ctx.engine, self.run_benchmark
        dataset, recipe = self.dataset.currentText(), self.recipe.currentText()
        limit = self.limit.value() or None
        self.start.setEnabled(False)
        self.stop.setEnabled(True)
        self.progress.setValue(0)
        self.progress.show()
        self.banner.clear()

        def work(progress, should_stop):
            return fn(engine, dataset, path, limit=limit, recipe=recipe, progress=progress, should_stop=should_stop,
                      **({"extract": "heuristic"} if dataset == "updates" else {}))  # as `memlens bench updates`

        self._run_token += 1
        token = self._run_token
        # A scope or database change drops the result (run_task), never the unlocking (on_settled).
        task = self.run_task(work, self._run_done, on_error=self._run_failed, on_progress=self._run_progress,
                             on_settled=lambda: self._run_settled(token))
        self._task = task if task is not None and not task.settled else None
        if task is None:
            self._run_settled(token)

    def stop_run(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self.stop.setEnabled(False)

    def _run_progress(self, fraction: float, message: str) -> None:
        self.progress.setValue(int(fraction * 100))
        self.progress.setToolTip(message)

    def _run_settled(self, token: int) -> None:
        if token != self._run_token:
            return  # an older run
        self._task = None
        self.start.setEnabled(self.run_benchmark is not None)
        self.stop.setEnabled(False)
        self.progress.hide()

    def _run_done(self, result: dict[str, Any]) -> None:
        self.sigRunFinished.emit(result)
        if result.get("status") == "cancelled":
            self.banner.show_notice(f"Run {result['run_id']} stopped; its finished questions are kept.",
                                    level="info")
        if self.run is None or self.run["id"] != result["run_id"]:
            self.run = {"id": result["run_id"]}
        self.refresh()

    def _run_failed(self, exc: BaseException) -> None:
        self.banner.show_error(exc)


def _fmt(value) -> str:
    if value is None:
        return "–"
    return f"{float(value):.1f}"


__all__ = ["BenchPane", "ask_data_file", "load_runner", "resolve_gold"]
