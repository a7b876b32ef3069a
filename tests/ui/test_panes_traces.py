"""The retrieval-trace pane: what-if queries change no memory, the funnel, candidates, gold, why-not."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.ui.memdb_scenarios import ANA, BOB, build, mounted, open_engine
from ui.context import AppContext
from ui.models.rows import MEMORY_ID_ROLE, STAGE_ROLE
from ui.models.trace_models import TraceCandidatesModel, TraceContextModel, split_context
from ui.panes.traces import TracesPane, parse_extra, window_text
from ui.tasks import InlineRunner, TaskRunner


@pytest.fixture
def pane(qtbot, engine):
    with mounted(qtbot, engine, TracesPane, (1200, 800)) as p:
        yield p


def memories_state(engine) -> str:
    data = engine.export(ANA)  # memories, facts, relations, sources... (retrieval traces are not in it)
    return json.dumps(data, sort_keys=True, default=str)


def test_lists_stored_traces_and_models_pass_the_model_tester(pane, qtmodeltester):
    assert pane.trace_list.rowCount() == 2
    assert pane.trace_list.index(0, 2).data() == "Where does Ana work?"  # newest first
    pane.trace_view.selectRow(1)
    assert pane.trace["query"] == "Where does Ana live?"
    assert pane.candidates.rowCount() == len(pane.trace["candidates"]) > 0
    qtmodeltester.check(pane.trace_list)
    qtmodeltester.check(pane.candidates)
    qtmodeltester.check(pane.proxy)
    qtmodeltester.check(pane.context)


def test_what_if_query_changes_no_memory_and_honours_as_of(pane, engine):
    before = memories_state(engine)
    access = [m["access_count"] for m in engine.export(ANA)["memories"]]
    pane.ctx.bus.set_as_of("2024-01-03T12:00:00Z")
    pane.query.setText("Where does Ana live?")
    with_signal = []
    pane.sigWhatIfDone.connect(with_signal.append)
    pane.query.returnPressed.emit()
    assert with_signal, "the what-if ran"
    assert memories_state(engine) == before
    assert [m["access_count"] for m in engine.export(ANA)["memories"]] == access
    t = pane.trace
    assert t["id"] == with_signal[0] and t["origin"] == "operator" and t["as_of"] == "2024-01-03T12:00:00Z"
    assert pane.trace_list.rowCount() == 3
    # as of Jan 3rd Ana still lived in Berlin: Munich's fact was not valid yet
    drops = {r["text"]: r["dropped"] for r in pane.candidates.rows if r.get("dropped")}
    assert drops["Ana lives in Munich."]["reason"] == "not_valid_at"
    ranked = [r["text"] for r in sorted((r for r in pane.candidates.rows if r["rank"]), key=lambda r: r["rank"])]
    assert "Ana lives in Berlin." in ranked


def test_funnel_bars_are_the_stages_and_a_stage_lists_its_drops(pane):
    pane.trace_view.selectRow(1)
    t = pane.trace
    np.testing.assert_array_equal(pane.funnel_out.opts["height"], [s["out"] for s in t["stages"]])
    np.testing.assert_array_equal(pane.funnel_in.opts["height"], [s["in"] for s in t["stages"]])
    for stage in ("filters", "rank"):
        pane.filter_stage(stage)
        expected = [c for c in t["candidates"] if c["dropped"] and c["dropped"]["stage"] == stage]
        assert pane.proxy.rowCount() == len(expected) > 0
        for r in range(pane.proxy.rowCount()):
            assert pane.proxy.index(r, 0).data(STAGE_ROLE) == stage
        assert f"Dropped at {stage}: {len(expected)}" in pane.stage_label.text()
    pane.show_all.click()
    assert pane.proxy.rowCount() == len(t["candidates"])


def test_funnel_click_maps_to_a_stage(pane, qtbot):
    pane.trace_view.selectRow(1)
    from PySide6.QtCore import QPointF

    vb = pane.funnel.getPlotItem().getViewBox()
    names = [s["name"] for s in pane.trace["stages"]]
    i = names.index("filters")

    class Ev:
        def scenePos(self):
            return vb.mapViewToScene(QPointF(float(i), 1.0))

    pane.funnel.resize(400, 300)
    vb.setGeometry(vb.geometry())  # laid out offscreen
    pane._funnel_scene_clicked(Ev())
    assert pane.proxy.stage == "filters"


def test_selecting_a_candidate_selects_its_memory_and_draws_its_components(pane):
    pane.trace_view.selectRow(1)
    bus = pane.ctx.bus
    idx = pane.proxy.index(0, 0)
    pane.candidate_view.setCurrentIndex(idx)
    mid = idx.data(MEMORY_ID_ROLE)
    assert bus.current.kind == "memory" and bus.current.id == mid
    assert bus.current.extra == ("trace", pane.trace["id"])
    cand = pane.candidates.row(pane.proxy.mapToSource(idx).row())
    additive = {k: v for k, v in cand["components"].items() if v and k not in ("derived_factor", "truncated")}
    x0, x1 = pane.component_bars.opts["x0"], pane.component_bars.opts["x1"]
    y = pane.component_bars.opts["y"]
    top = y.max()
    widths = sorted(np.round(x1[y == top] - x0[y == top], 6))
    assert widths == sorted(np.round(np.abs(list(additive.values())), 6))
    assert pane.score_marks.data["x"][list(pane.score_marks.data["y"]).index(top)] == pytest.approx(cand["score"])


def test_context_is_verbatim_with_token_costs(pane):
    pane.trace_view.selectRow(1)
    t = pane.trace
    assert pane.context.text() == t["context"]["text"]
    ranked = {c["memory_id"]: c["tokens"] for c in t["candidates"] if c["rank"] is not None}
    for row in pane.context.rows:
        assert row["tokens"] == ranked[row["memory_id"]]
    assert sum(r["tokens"] for r in pane.context.rows) == t["context"]["tokens"]
    assert "Timings (ms)" in pane.timings.text()


def test_split_context_round_trips():
    text = "[m1 · chat:a · 2024] one\nline two of one\n[m22 · x] two\n[m3] three"
    items = split_context(text)
    assert [m for m, _ in items] == [1, 22, 3]
    assert "\n".join(line for _, line in items) == text
    assert split_context("") == []


def test_why_not_for_the_memory_selected_elsewhere(pane, engine):
    pane.trace_view.selectRow(1)  # "Where does Ana live?"
    berlin = next(f for f in engine.export(ANA)["facts"] if f["object"] == "Berlin")
    pane.ctx.bus.select("fact", berlin["id"], source="test")
    assert pane.target_memory == berlin["memory_id"]
    assert "dropped at <b>filters</b> — superseded" in pane.why_text.text()
    assert pane.why_button.isEnabled()
    results = []
    pane.sigExplained.connect(results.append)
    before = memories_state(engine)
    pane.why_button.click()
    assert results and results[0]["verdict"] == "dropped" and results[0]["memory_id"] == berlin["memory_id"]
    assert "superseded" in pane.why_text.text()
    assert memories_state(engine) == before
    # a memory no channel proposed
    assert pane.trace["id"]  # the open trace stays open after explain refreshed the list
    bob_unrelated = [m["id"] for m in engine.export(ANA)["memories"]
                     if pane.candidates.row_of_memory(m["id"]) is None]
    if bob_unrelated:
        pane.ctx.bus.select("memory", bob_unrelated[0], source="test")
        assert "never a candidate" in pane.why_text.text()


def test_a_trace_selected_on_the_bus_opens_with_gold_marked(pane):
    bus = pane.ctx.bus
    first = pane.trace_list.row(1)["id"]
    pane.trace_view.selectRow(0)
    cands = pane.candidates  # of trace 2 now
    bus.select("trace", first, source="bench", extra=("gold", (1, 2, 999)))
    assert pane.trace["id"] == first
    gold_rows = cands.gold_rows()
    present = {c["memory_id"] for c in pane.trace["candidates"]} & {1, 2, 999}
    assert {cands.row(i)["memory_id"] for i in gold_rows} == present
    i = gold_rows[0]
    assert cands.index(i, 0).data() == "★"
    assert cands.index(i, 3).data(0x8) is not None  # BackgroundRole highlights the row
    assert f"{len(present)}/3 gold memories among candidates" in pane.header.text()


def test_a_trace_in_another_database_opens_read_only(pane, tmp_path, engine):
    other = build(tmp_path / "container.db", recalls=("Where does Ana work?",))
    with open_engine(other) as e2:
        trace_id = e2.traces(ANA)[0]["id"]
        gold = [c["memory_id"] for c in e2.trace(trace_id, scope=ANA)["candidates"] if c["rank"] == 1]
    pane.ctx.bus.select("trace", trace_id, source="bench", extra=("gold", tuple(gold), "trace_db", str(other)))
    assert pane.trace_db == str(other)
    assert pane.trace["query"] == "Where does Ana work?"
    assert len(pane.candidates.gold_rows()) == 1
    assert "from " + str(other) in pane.header.text()
    eng = pane.ctx.engine.trace_db(other)  # the container, opened once by the pane's read
    assert eng is not pane.ctx.engine and eng.store.db.readonly and pane.ctx.engine.trace_db(str(other)) is eng
    # candidates of a foreign DB are not published on this DB's bus, and why-not stays off
    before = pane.ctx.bus.current
    pane.candidate_view.setCurrentIndex(pane.proxy.index(0, 0))
    assert pane.ctx.bus.current == before
    assert not pane.why_button.isEnabled()


def test_scopes_stay_apart(qtbot, engine):
    p = TracesPane()
    qtbot.addWidget(p)
    p.set_context(AppContext(engine=engine, scope=BOB, runner=InlineRunner()))
    assert p.trace_list.rowCount() == 0
    p.shutdown()


def test_the_header_names_the_time_window_a_question_named(pane):
    pane.query.setText("Where did Ana live on 2 January, 2024?")
    pane.query.returnPressed.emit()
    assert pane.trace["query"].startswith("Where did Ana live on 2 January")
    assert "time window 2024-01-01 – 2024-01-04" in pane.header.text()  # the day, a day of slack either side
    assert "fading" not in pane.header.text()  # a date is a hard edge
    loose = {"timeframe": ["2023-01-13T08:00:00Z", "2023-01-23T08:00:00Z"], "timeframe_fade_days": 14.0}
    assert window_text(loose) == " · time window 2023-01-13 – 2023-01-23, fading out over the 14 days before"
    assert window_text({}) == ""


def test_parse_extra():
    assert parse_extra(("gold", (1, 2), "trace_db", "/x.db")) == {"gold": (1, 2), "trace_db": "/x.db"}
    assert parse_extra(("trace", 5)) == {"trace": 5}
    assert parse_extra(()) == {}


def test_models_on_their_own(qtmodeltester):
    m = TraceCandidatesModel()
    m.set_trace([{"memory_id": 5, "channels": {"vector": {"rank": 1, "score": 0.9}}, "components": {"fusion": 0.5},
                  "score": 0.5, "rank": 1, "tokens": 10, "dropped": None},
                 {"memory_id": 6, "channels": {"fts": {"rank": 2, "score": 3.0}}, "components": {}, "score": 0.0,
                  "rank": None, "tokens": None, "dropped": {"stage": "filters", "reason": "expired", "detail": "x"}}],
                {5: {"kind": "fact", "text": "a", "trust": "user", "status": "active"}}, {6})
    qtmodeltester.check(m)
    assert [(c.key, c.title) for c in m.columns[4:6]] == [("ch:vector", "vector"), ("ch:fts", "fts")]
    assert m.index(1, 0).data() == "★" and m.index(1, 3).data() == "(not in this scope / deleted)"
    c = TraceContextModel()
    c.set_context("[m5 · x] a", m.rows)
    qtmodeltester.check(c)


def test_a_memory_sharing_a_place_says_with_which(pane):
    """Facts read from the same turn as a ranked memory share its place in the top k: the fate
    column names the memory, its tooltip and the why line say what that means."""
    pane.trace_view.selectRow(1)
    shared = pane.trace["params"].get("shared_places")
    assert shared, "the scenario's facts and turns rank together"
    mid, other = next(iter(shared.items()))
    i = pane.candidates.row_of_memory(int(mid))
    fate = pane.candidates.column_index("fate")
    assert pane.candidates.index(i, fate).data().endswith(f" · with m{other}")
    assert f"memory {other}" in pane.candidates.index(i, fate).data(Qt.ItemDataRole.ToolTipRole)
    pane.target_memory = int(mid)
    pane._update_why()
    assert f"sharing its place in the top k with m{other}" in pane.why_text.text()
    rank = next(s for s in pane.trace["stages"] if s["name"] == "rank")
    assert rank["places"] == 5 < rank["out"]
    labels = [t.textItem.toPlainText() for t in pane._funnel_labels]
    assert any(label.endswith("\n5 places") for label in labels)
    assert "k 5 sources" in pane.header.text()


@pytest.mark.qt_log_ignore("This plugin does not support")  # shown offscreen, to lay the plot out
@pytest.mark.parametrize("size", [(1280, 800), (1000, 520)])
def test_funnel_labels_fit_over_their_bars_at_any_height(pane, size):
    """The room over the bars is set in pixels: a short pane must not cut the top label line off."""
    pane.trace_view.selectRow(1)
    pane.resize(*size)
    pane.show()
    QApplication.processEvents()
    view = pane.funnel.getPlotItem().getViewBox().sceneBoundingRect()
    assert view.height() > 20
    for label in pane._funnel_labels:
        assert label.sceneBoundingRect().top() >= view.top() - 1, label.textItem.toPlainText()


def test_what_if_off_the_gui_thread(qtbot, engine):
    runner = TaskRunner()
    p = TracesPane()
    qtbot.addWidget(p)
    try:
        with qtbot.waitSignal(p.trace_list.modelReset, timeout=10000):
            p.set_context(AppContext(engine=engine, scope=ANA, runner=runner))
        p.query.setText("Who works at Siemens?")
        with qtbot.waitSignal(p.sigTraceShown, timeout=20000, check_params_cb=lambda t: t is not None):
            p.run_what_if()
        assert p.trace["query"] == "Who works at Siemens?"
        runner.wait()
    finally:
        p.shutdown()
        runner.shutdown()


def test_the_header_says_what_the_question_was_read_as():
    from ui.panes.traces import features_text

    assert features_text({}) == ""
    assert features_text({"features": {"how_phrase": ["how old"], "speaker_user": True,
                                       "timeframe": ["2023-01-01", "2023-02-01"]}, "off": ["entity"]}) == (
        "read as: how_phrase (how old); speaker_user · switched off: entity")


def test_an_outdated_candidate_is_marked_and_links_to_what_replaced_it(pane, engine):
    res = engine.recall("Where does Ana live now?", scope=ANA, origin="operator", k=5)
    pane.load_trace(res.trace.id)
    marks = pane.trace["params"]["outdated"]
    mid, mark = next((m, v) for m, v in marks.items() if v["rule"] == "claim_superseded")
    i = pane.candidates.row_of_memory(int(mid))
    text = pane.candidates.column_index("text")
    fate = pane.candidates.column_index("fate")
    assert pane.candidates.index(i, text).data().startswith(f"[outdated → m{mark['by']}] ")
    assert pane.candidates.index(i, fate).data().endswith(f" · outdated → m{mark['by']}")
    tip = pane.candidates.index(i, fate).data(Qt.ItemDataRole.ToolTipRole)
    assert tip.startswith(f"updated on {mark['on']} by m{mark['by']}: ") and "claim_superseded" in tip
    assert pane.select_candidate(int(mid))
    assert "Outdated for this question" in pane.why_text.text()
    pane._follow_replacement(pane.candidate_view.currentIndex())  # the double-click
    current = pane.candidates.row(pane.proxy.mapToSource(pane.candidate_view.currentIndex()).row())
    assert int(current["memory_id"]) == int(mark["by"])


def test_a_ranking_rules_component_wears_the_outdated_amber_not_another_parts_colour():
    from ui.models.trace_models import COMPONENT_ORDER
    from ui.panes.traces import RULE_COMPONENTS, component_color

    assert {"later_leads", "same_slot", "return_restores"} <= RULE_COMPONENTS
    palette = {component_color(n).name() for n in COMPONENT_ORDER}
    amber = component_color("later_leads")
    assert amber.name() not in palette and component_color("return_restores") == amber
    assert component_color("session") != amber  # a part of its own keeps its colour
