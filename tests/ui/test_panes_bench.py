"""The benchmark pane: stored runs and their dashboards, compare, a real run with progress, and a
click on a question that opens its trace in the traces pane through the bus."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

import ui.panes.bench as bench_pane
from engine.bench.metrics import METRICS_VERSION
from engine.bench.scoring import describe
from engine.store import bench as bench_sql
from tests.ui.memdb_scenarios import ANA, open_engine
from ui.context import AppContext
from ui.models.bench_models import BenchCompareModel, curves, delta_rows, item_missed, parse_key
from ui.panes.bench import BenchPane, truth_parts
from ui.panes.traces import TracesPane
from ui.tasks import InlineRunner, TaskRunner

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def store_run(engine, *, recipe: str, metrics: dict, by_category: dict, items: list[dict]) -> int:
    store = engine.store
    run_id = bench_sql.create_run(store, dataset="locomo", data_path="x.json", sha256="ab" * 32, split="dev",
                                  recipe=recipe, k_values=[1, 5], embedder="hashing", models={}, prompt_hashes={},
                                  git_commit=None, config={"extract": "none"}, started_at="2024-02-01T00:00:00Z")
    bench_sql.add_items(store, run_id, items)
    bench_sql.finish_run(store, run_id, status="done", sample_count=len(items), failures=0, metrics=metrics,
                         by_category=by_category, latency_ms={"p50": 10.0, "p95": 20.0, "p99": 30.0},
                         context_tokens={"mean": 100.0, "p95": 150.0}, finished_at="2024-02-01T00:01:00Z")
    return run_id


@pytest.fixture
def seeded(template, tmp_path):
    """A copy of the scenario DB with two stored runs whose items point at its traces."""
    path = tmp_path / "m.db"
    shutil.copy(template, path)
    eng = open_engine(path)
    traces = {t["query_text"]: t["id"] for t in eng.store.traces(ANA)}
    live = eng.store.memories_for_messages(ANA, ["D1:1"])  # "I live in Berlin." turn
    items = [
        {"container": "c1", "question_id": "q1", "question": "Where does Ana live?", "category": "single-hop",
         "gold": {"turn": ["D1:1"], "session": ["D1"]}, "metrics": {"turn_recall_any@1": 0.0, "turn_recall_any@5": 1.0,
                                                                    "turn_mrr": 0.5},
         "latency_ms": 9.0, "context_tokens": 120, "trace_id": traces["Where does Ana live?"], "status": "done"},
        {"container": "c1", "question_id": "q2", "question": "Where does Ana work?", "category": "multi-hop",
         "gold": {"turn": ["D1:2"], "session": ["D1"]}, "metrics": {"turn_recall_any@1": 1.0, "turn_recall_any@5": 1.0,
                                                                    "turn_mrr": 1.0},
         "latency_ms": 12.0, "context_tokens": 90, "trace_id": traces["Where does Ana work?"], "status": "done"},
        {"container": "c1", "question_id": "q3", "question": "Broken?", "category": "multi-hop", "gold": {},
         "status": "failed", "error": "RuntimeError: boom"},
    ]
    metrics_a = {"turn_recall_any@1": 0.5, "turn_recall_any@5": 1.0, "turn_hit@1": 0.5, "turn_hit@5": 1.0,
                 "turn_mrr": 0.75}
    cats_a = {"single-hop": {"turn_recall_any@5": 1.0, "turn_recall_any@1": 0.0},
              "multi-hop": {"turn_recall_any@5": 1.0, "turn_recall_any@1": 1.0}}
    runs = (
        store_run(eng, recipe="default", metrics={k: v * 0.8 for k, v in metrics_a.items()},
                  by_category={c: {k: v * 0.8 for k, v in m.items()} for c, m in cats_a.items()}, items=items[:2]),
        store_run(eng, recipe="rrf", metrics=metrics_a, by_category=cats_a, items=items),
    )
    yield SimpleNamespace(engine=eng, runs=runs, gold_live=live)
    eng.close()


@pytest.fixture
def engine(seeded):
    return seeded.engine


@pytest.fixture
def panes(qtbot, engine):
    ctx = AppContext(engine=engine, scope=ANA, runner=InlineRunner())
    b, t = BenchPane(), TracesPane()
    for p in (b, t):
        qtbot.addWidget(p)
        p.resize(1200, 800)
        p.set_context(ctx)
    yield b, t
    for p in (b, t):
        p.shutdown()
        p.set_context(None)


@pytest.mark.qt_log_ignore("This plugin does not support")  # shown offscreen, to lay the plots out
def test_stored_runs_are_listed_newest_first_with_their_dashboards(panes, seeded, qtmodeltester):
    b, _ = panes
    older, newer = seeded.runs
    assert b.runs_model.rowCount() == 2
    assert [b.runs_model.row(i)["id"] for i in range(2)] == [newer, older]
    assert b.run["id"] == newer
    qtmodeltester.check(b.runs_model)
    qtmodeltester.check(b.items_model)
    qtmodeltester.check(b.compare_model)
    # metric@k curves: one PlotDataItem per metric of the level, fed k and values
    assert set(b.curve_items) == {"recall_any", "hit"}
    xs, ys = b.curve_items["recall_any"].getData()
    assert list(xs) == [1.0, 5.0] and list(ys) == [0.5, 1.0]
    # every curve is in the legend, and the legend lies outside the plotted area
    assert sorted(label.text for _, label in b.curve_legend.items) == ["hit", "recall_any"]
    b.resize(1280, 720)
    b.show()
    QApplication.processEvents()
    view = b.curve_plot.getPlotItem().vb
    assert view.sceneBoundingRect().height() > 20
    assert not view.sceneBoundingRect().intersects(b.curve_legend.sceneBoundingRect())
    ticks = lambda: [v for v, _ in b.curve_plot.getPlotItem().getAxis("left")._tickLevels[0]]  # noqa: E731
    assert ticks() == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    b.resize(1024, 420)  # short: six labels would overlap, three do not
    QApplication.processEvents()
    assert view.sceneBoundingRect().height() < 100 and ticks() == [0.0, 0.5, 1.0]
    # per-category bars for the chosen metric
    b.k.setCurrentText("1")
    assert b.metric_key() == "turn_recall_any@1"
    heights = dict(zip(["multi-hop", "single-hop"], b.category_bars.opts["height"]))
    assert heights == {"multi-hop": 1.0, "single-hop": 0.0}
    # latency and token histograms over the done questions, percentile lines drawn
    x, counts = b.latency_hist.getData()
    assert counts.sum() == 2
    assert len([m for plot, m in b._marks if plot is b.latency_plot]) == 3
    assert "p50/p95/p99 10.0/20.0/30.0 ms" in b.summary.text()


def test_official_scoring_first_ours_beside_it_and_unscored_categories_say_so(panes, engine, qtbot):
    """A run scored under LoCoMo's official scheme and ours: the pane opens on the official figures,
    each metric's recorded definition is its tooltip, and a category ours does not score (LoCoMo's
    adversarial questions) draws 'not scored' instead of a zero bar."""
    b, _ = panes
    store = engine.store
    scoring = describe("locomo")
    run_id = bench_sql.create_run(store, dataset="locomo", data_path="x.json", sha256="cd" * 32, split="dev",
                                  recipe="offline", k_values=[1, 5], embedder="hashing", models={}, prompt_hashes={},
                                  git_commit=None, config={"extract": "none", "metrics_version": METRICS_VERSION,
                                                           "scoring": scoring},
                                  started_at="2024-03-01T00:00:00Z")
    official = {"turn_evidence_recall@1": 0.25, "turn_evidence_recall@5": 0.5,
                "session_evidence_recall@1": 0.5, "session_evidence_recall@5": 0.75}
    ours = {"turn_evidence_recall@1": 0.5, "turn_evidence_recall@5": 1.0, "turn_recall_any@1": 0.5,
            "turn_recall_any@5": 1.0, "turn_mrr": 0.75}
    items = [{"container": "c", "question_id": "c:q0", "question": "Where?", "category": "single-hop",
              "gold": {"turn": ["D1:1"], "session": ["D1"], "official": {"evidence": ["D1:1"]}},
              "metrics": {"turn_evidence_recall@5": 0.0}, "scores": {"official": {"turn_evidence_recall@5": 0.0},
                                                                     "memlens": {"turn_evidence_recall@5": 1.0}},
              "status": "done"},
             {"container": "c", "question_id": "c:q1", "question": "Trick?", "category": "adversarial",
              "gold": {"turn": ["D1:2"], "session": ["D1"], "official": {"evidence": ["D1:2"]}},
              "metrics": {"turn_evidence_recall@5": 1.0}, "scores": {"official": {"turn_evidence_recall@5": 1.0},
                                                                     "memlens": {"turn_evidence_recall@5": 1.0}},
              "status": "done"}]
    bench_sql.add_items(store, run_id, items)
    scores = {"official": {"metrics": official, "by_category": {
                  "adversarial": {"turn_evidence_recall@5": 1.0}, "single-hop": {"turn_evidence_recall@5": 0.0}}},
              "memlens": {"metrics": ours, "by_category": {
                  "adversarial": {"turn_evidence_recall@5": None}, "single-hop": {"turn_evidence_recall@5": 1.0}}}}
    bench_sql.finish_run(store, run_id, status="done", sample_count=2, failures=0, metrics=official,
                         by_category=scores["official"]["by_category"], latency_ms={}, context_tokens={},
                         scores=scores, finished_at="2024-03-01T00:01:00Z")
    b.refresh()
    b.select_run(run_id)
    assert b.run["id"] == run_id
    assert [b.scheme.itemData(i) for i in range(b.scheme.count())] == ["official", "memlens"]
    assert b.scheme.itemText(1) == "memlens (ours)" and b.scheme_name() == "official"
    assert "task_eval/evaluation.py" in b.scheme.toolTip() and "scoring <b>official</b> (default)" in b.summary.text()
    assert set(b.curve_items) == {"evidence_recall"}  # the official scheme scores evidence recall only
    b.k.setCurrentText("5")
    assert b.metric_key() == "turn_evidence_recall@5"
    assert b.metric_combo.toolTip().startswith("turn_evidence_recall@5: official: share of the evidence entries")
    assert list(b.category_bars.opts["height"]) == [1.0, 0.0] and b.not_scored == []  # a real zero stays a bar
    col = b.items_model.column_index("metric")
    assert b.items_model.index(0, col).data() == "0.0000"
    b.scheme.setCurrentIndex(1)  # ours: adversarial questions are left out
    assert b.metric_key() == "turn_evidence_recall@5"
    assert b.metric_combo.toolTip().startswith("turn_evidence_recall@5: ours:")
    assert set(b.curve_items) == {"evidence_recall", "recall_any"}
    assert list(b.category_bars.opts["x"]) == [1.0] and list(b.category_bars.opts["height"]) == [1.0]
    assert b.not_scored == ["adversarial"]
    labels = [m for plot, m in b._marks if plot is b.category_plot]
    assert [m.toPlainText() for m in labels] == ["not scored"] and labels[0].pos().x() == 0.0
    assert b.items_model.headerData(col, Qt.Orientation.Horizontal) == "turn_evidence_recall@5 (memlens)"
    assert b.items_model.index(0, col).data() == "1.0000"
    # compared with a run from before schemes (ours only), under the official scheme: nothing to compare
    b.compare.setCurrentIndex(b.compare.findData(b.runs[-1]["id"]))
    assert "default scoring official vs memlens" in b.compare_note.text()
    b.scheme.setCurrentIndex(0)
    assert "was not scored under <b>official</b>" in b.compare_note.text()


def test_question_table_marks_misses_and_filters(panes):
    b, _ = panes
    b.k.setCurrentText("1")
    assert b.items_model.rowCount() == 3
    col = b.items_model.column_index("metric")
    assert b.items_model.headerData(col, Qt.Orientation.Horizontal) == "turn_recall_any@1 (memlens)"
    b.misses_only.setChecked(True)
    ids = [b.items_model.row(i)["question_id"] for i in range(b.items_model.rowCount())]
    assert ids == ["q1", "q3"]  # below 1 at k=1, and the failed one
    assert b.items_model.index(0, col).data(0x8) is not None  # BackgroundRole
    b.k.setCurrentText("5")
    ids = [b.items_model.row(i)["question_id"] for i in range(b.items_model.rowCount())]
    assert ids == ["q3"]


def test_a_running_run_refreshes_by_appending_questions(panes, seeded, qtbot):
    b, _ = panes
    run = dict(b.run)
    items = list(b.items)
    b._show_run(run, items[:1])
    assert b.items_model.rowCount() == 1
    b.items_view.selectRow(0)
    resets, inserted = [], []
    b.items_model.modelReset.connect(lambda: resets.append(1))
    b.items_model.rowsInserted.connect(lambda _parent, first, last: inserted.append((first, last)))
    b._show_run(run, items)  # the same run, two more questions done: no reset, the selection stays
    assert resets == [] and inserted == [(1, len(items) - 1)]
    assert [b.items_model.row(i)["question_id"] for i in range(3)] == [it["question_id"] for it in items]
    assert b.items_view.selectionModel().selectedRows()[0].row() == 0
    b._show_run(dict(run, id=seeded.runs[0]), items[:2])  # another run: rebuilt
    assert resets == [1] and b.items_model.rowCount() == 2


def test_compare_two_runs(panes, seeded):
    b, _ = panes
    older, newer = seeded.runs
    b.compare.setCurrentIndex(b.compare.findData(older))
    assert b.other["id"] == older
    rows = {(r["scope"], r["metric"]): r for r in b.compare_model.rows}
    assert rows[("overall", "turn_recall_any@1")]["delta"] == pytest.approx(0.5 - 0.4)
    assert rows[("single-hop", "turn_recall_any@5")]["delta"] == pytest.approx(0.2)
    assert "recall_any (run" in " ".join(b.curve_items)  # the compared run's curves, dashed
    assert len(b.category_bars_b.opts["height"]) == 2
    # the two runs used different recipes: the compare tab says it is not like for like
    assert "Not like for like" in b.compare_note.text() and "recipe rrf vs default" in b.compare_note.text()
    b.compare.setCurrentIndex(b.compare.findData(None))
    assert b.compare_note.text().startswith("Pick a run")


def test_clicking_a_question_opens_its_trace_with_gold(panes, seeded, qtbot):
    b, t = panes
    bus = b.ctx.bus
    b.misses_only.setChecked(False)
    row = next(i for i in range(b.items_model.rowCount()) if b.items_model.row(i)["question_id"] == "q1")
    with qtbot.waitSignal(bus.sigSelected, timeout=2000):
        b._item_clicked(b.items_model.index(row, 2))
    sel = bus.current
    item = b.items_model.row(row)
    assert sel.kind == "trace" and sel.id == item["trace_id"] and sel.source == "bench"
    assert sel.extra == ("gold", tuple(seeded.gold_live))
    assert t.trace["id"] == item["trace_id"]
    assert t.gold == frozenset(seeded.gold_live)
    starred = [t.candidates.row(i)["memory_id"] for i in t.candidates.gold_rows()]
    assert starred and set(starred) <= set(seeded.gold_live)


def test_a_real_run_through_the_pane_then_a_question_opens_its_container_trace(panes, engine, qtbot, tmp_path):
    if bench_pane.load_runner() is None:
        pytest.skip("this build has no benchmark runner")
    b, t = panes
    data = tmp_path / "locomo_tiny.json"
    shutil.copy(DATA / "bench_locomo_tiny.json", data)
    b.data_path.setText(str(data))
    b.dataset.setCurrentText("locomo")
    b.limit.setValue(0)
    progress = []
    finished = []
    b.sigRunFinished.connect(finished.append)
    b.progress.valueChanged.connect(progress.append)
    b.start.click()
    assert finished and finished[0]["status"] == "done"
    assert progress and progress[-1] == 100
    run_id = finished[0]["run_id"]
    assert b.run["id"] == run_id and b.runs_model.rowCount() == 3
    assert b.items_model.rowCount() == finished[0]["questions"] > 0
    assert not b.stop.isEnabled() and b.start.isEnabled()
    item = next(b.items_model.row(i) for i in range(b.items_model.rowCount())
                if b.items_model.row(i).get("trace_id") is not None)
    assert item["trace_db"] and Path(item["trace_db"]).exists()
    b.open_item(item)
    assert t.trace_db == item["trace_db"] and t.trace["id"] == item["trace_id"]
    assert t.trace["query"] == item["question"]
    turns = item["gold"].get("turn") or []
    if turns:
        assert t.gold, "gold turns resolved to memory ids in the container DB"


def test_stop_cancels_a_running_benchmark(qtbot, engine, tmp_path):
    """Run in the real task runner; Stop reaches the runner's should_stop and the pane says so."""
    started, never = threading.Event(), threading.Event()
    seen_stop = []

    def fake(engine, dataset, path, *, limit, recipe, progress, should_stop):
        started.set()
        progress(0.5, "halfway")
        deadline = time.monotonic() + 20
        while not should_stop() and time.monotonic() < deadline:
            never.wait(0.01)
        seen_stop.append(should_stop())
        return {"run_id": bench_sql.runs(engine.store)[0]["id"], "status": "cancelled",
                "questions": 0}

    runner = TaskRunner()
    p = BenchPane()
    qtbot.addWidget(p)
    try:
        p.set_context(AppContext(engine=engine, scope=ANA, runner=runner))
        qtbot.waitUntil(lambda: p.runs_model.rowCount() == 2, timeout=5000)
        p.run_benchmark = fake
        p.data_path.setText(str(tmp_path / "x.json"))
        p.start.click()
        qtbot.waitUntil(started.is_set, timeout=5000)
        assert p.stop.isEnabled() and not p.start.isEnabled()
        with qtbot.waitSignal(p.sigRunFinished, timeout=10000):
            p.stop.click()
        assert seen_stop == [True]
        assert "stopped" in p.banner.label.text()
        assert p.start.isEnabled() and not p.stop.isEnabled() and p.progress.isHidden()
    finally:
        p.shutdown()
        runner.shutdown()


def test_without_a_runner_only_stored_runs_are_shown(qtbot, engine, monkeypatch):
    monkeypatch.setattr(bench_pane, "load_runner", lambda: None)
    p = BenchPane()
    qtbot.addWidget(p)
    p.set_context(AppContext(engine=engine, scope=ANA, runner=InlineRunner()))
    assert not p.start.isEnabled()
    assert "stored runs only" in p.runner_note.text()
    assert p.runs_model.rowCount() == 2
    p.shutdown()


def test_empty_database_says_what_to_do(qtbot, tmp_path):
    eng = open_engine(tmp_path / "e.db")
    p = BenchPane()
    qtbot.addWidget(p)
    try:
        p.set_context(AppContext(engine=eng, scope=ANA, runner=InlineRunner()))
        assert p.runs_model.rowCount() == 0 and "No benchmark runs" in p.summary.text()
        p.shutdown()
    finally:
        eng.close()


def test_pure_helpers(qtmodeltester):
    assert parse_key("session_ndcg_any@10") == ("session", "ndcg_any", 10)
    assert parse_key("turn_mrr") is None
    c = curves({"turn_hit@5": 0.5, "turn_hit@1": 0.25, "session_hit@1": 1.0, "turn_mrr": 0.3}, "turn")
    assert c == {"hit": ([1, 5], [0.25, 0.5])}
    rows = delta_rows({"metrics": {"turn_hit@1": 0.5}, "by_category": {"x": {"turn_hit@1": 1.0}}},
                      {"metrics": {"turn_hit@1": 0.25}, "by_category": {}})
    assert rows[0]["delta"] == 0.25 and rows[1]["delta"] is None
    assert item_missed({"status": "failed"}, "k") and not item_missed({"status": "done", "metrics": {"k": 1.0}}, "k")
    m = BenchCompareModel()
    m.set_rows(rows)
    qtmodeltester.check(m)
    assert np.isclose(float(m.index(0, 4).data()), 0.25)


def test_the_blind_part_is_drawn_beside_the_halves_named_in_the_title(panes, seeded):
    b, _ = panes
    truth = {"current_first@1": 0.9, "false_supersession": 0.0}
    run = store_run(seeded.engine, recipe="offline", metrics={"turn_recall_any@5": 1.0, **truth},
                    by_category={"dev": truth, "heldout": truth, "blind": {**truth, "current_first@1": 0.7}}, items=[])
    b.refresh()
    b.select_run(run)
    assert list(b.truth_bars["blind"].opts["height"]) == [0.7, 0.0]
    assert [label for label, _ in b.truth_keys] == ["dev", "heldout", "blind"]
    assert "by part" in b.truth_plot.getPlotItem().titleLabel.text


def test_natural_style_batches_are_drawn_apart_from_the_tidy_dev_scenarios(panes, seeded):
    b, _ = panes
    truth = {"current_first@1": 0.99, "false_supersession": 0.0}
    cats = {"dev": truth, "dev:tidy": truth, "dev:w3": {**truth, "current_first@1": 0.65},
            "dev:w2": {**truth, "current_first@1": 0.75}, "dev:w2a": truth, "heldout": truth,
            "blind": {**truth, "current_first@1": 0.7}}
    assert [key for key, _, _ in truth_parts(cats)] == ["dev:tidy", "dev:w2", "dev:w3", "heldout", "blind"]
    assert [key for key, _, _ in truth_parts({"dev": truth, "dev:w2": truth})] == ["dev"]  # no tidy part: dev whole
    run = store_run(seeded.engine, recipe="offline", metrics={"turn_recall_any@5": 1.0, **truth},
                    by_category=cats, items=[])
    b.refresh()
    b.select_run(run)
    assert list(b.truth_bars["dev:w2"].opts["height"]) == [0.75, 0.0]
    assert list(b.truth_bars["dev:w3"].opts["height"]) == [0.65, 0.0]
    dev_whole = b.truth_bars.get("dev")  # dev whole is not drawn beside its parts
    assert dev_whole is None or len(dev_whole.opts["height"]) == 0
    assert [label for label, _ in b.truth_keys] == ["dev tidy", "dev w2", "dev w3", "heldout", "blind"]
    assert "dev w3" in b.truth_plot.getPlotItem().titleLabel.text  # the parts are named in the title
    # a later run without dev:w2: dev:w3 takes the first batch colour, in the title and on its bars alike
    later = store_run(seeded.engine, recipe="offline", metrics={"turn_recall_any@5": 1.0, **truth},
                      by_category={k: v for k, v in cats.items() if k != "dev:w2"}, items=[])
    b.refresh()
    b.select_run(later)
    colour = dict(b.truth_keys)["dev w3"]
    before = {key: c for key, _, c in truth_parts(cats)}["dev:w3"]  # its colour while dev:w2 was there
    assert b.truth_bars["dev:w3"].opts["brush"] == colour != before


def test_current_truth_is_drawn_per_half(panes, seeded):
    b, _ = panes
    truth = {"current_first@1": 0.9, "history@3": 1.0, "false_supersession": 0.0}
    run = store_run(seeded.engine, recipe="offline", metrics={"turn_recall_any@5": 1.0, **truth},
                    by_category={"dev": truth, "heldout": {**truth, "current_first@1": 0.8},
                                 "dev:current": {"turn_recall_any@5": 1.0}}, items=[])
    b.refresh()
    b.select_run(run)
    assert b.truth_plot.isVisibleTo(b)
    assert list(b.truth_bars["dev"].opts["height"]) == [0.9, 1.0, 0.0]
    assert list(b.truth_bars["heldout"].opts["height"]) == [0.8, 1.0, 0.0]
    assert [t.toPlainText() for t in b._truth_labels] == ["0.90", "1.00", "0.00", "0.80", "1.00", "0.00"]
    assert [label for label, _ in b.truth_keys] == ["dev", "heldout"]
    # the category bars list only categories that have the chosen metric
    axis = b.category_plot.getPlotItem().getAxis("bottom")
    assert [name for _, name in axis._tickLevels[0]] == ["dev:\ncurrent"]
    b.select_run(seeded.runs[1])  # a run without current truth hides the panel
    assert not b.truth_plot.isVisibleTo(b)


def test_the_summary_says_which_rule_made_the_false_supersessions(panes, seeded):
    b, _ = panes
    truth = {"current_first@1": 0.9, "false_supersession": 0.25}
    run = store_run(seeded.engine, recipe="offline", metrics={"turn_recall_any@5": 1.0, **truth},
                    by_category={"dev": truth, "heldout": truth}, items=[])
    by_rule = {"all": {"restated_later": 3, "same_slot": 1}, "dev": {"restated_later": 3}, "heldout": {"same_slot": 1}}
    bench_sql.finish_run(seeded.engine.store, run, status="done", sample_count=0, failures=0,
                         metrics={"turn_recall_any@5": 1.0, **truth}, by_category={"dev": truth, "heldout": truth},
                         latency_ms={}, context_tokens={}, finished_at="2024-02-01T00:02:00Z",
                         scores={"memlens": {"metrics": {"turn_recall_any@5": 1.0, **truth},
                                             "by_category": {"dev": truth, "heldout": truth},
                                             "false_supersessions_by_rule": by_rule,
                                             "misses_by_cause": {"all": {"unordered_later_gold": 2},
                                                                 "heldout": {"unordered_later_gold": 2}}}})
    b.refresh()
    b.select_run(run)
    assert "false supersessions, questions by rule: restated_later 3 (dev 3), same_slot 1 (heldout 1)" in b.summary.text()
    assert "misses of first@1, questions by cause: unordered_later_gold 2 (heldout 2)" in b.summary.text()
    b.select_run(run - 1)  # a run without the counts says nothing of them
    assert "false supersessions" not in b.summary.text() and "misses of first@1" not in b.summary.text()
