"""The version timeline: bars over world time, belief marks, the as-of slider and the bus."""

from __future__ import annotations

import numpy as np
import pytest

from engine.timeutil import normalise_iso
from tests.ui.memdb_scenarios import ANA, build, mounted, open_engine
from ui.context import AppContext
from ui.models.timeline_data import iso, ts
from ui.panes.timeline import SLIDER_STEPS, TimelinePane
from ui.tasks import InlineRunner


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return build(tmp_path_factory.mktemp("timeline") / "seed.db", recalls=())


@pytest.fixture
def pane(qtbot, engine):
    with mounted(qtbot, engine, TimelinePane, (900, 560)) as p:
        yield p


def test_subject_versions_are_bars_over_world_time(pane, engine):
    assert pane.subject.currentData() == "ana"  # the subject with most versions comes first
    d = pane.data
    facts = [f for f in engine.export(ANA)["facts"] if f["subject_key"] == "ana"]
    assert len(d) == len(facts) == 6
    by_id = {f["id"]: f for f in facts}
    for i, fid in enumerate(d.fact_ids):
        f = by_id[int(fid)]
        assert d.start[i] == ts(f["valid_from"])
        assert d.open_ended[i] == (f["valid_to"] is None)
        if f["valid_to"]:
            assert d.end[i] == ts(f["valid_to"])
        assert d.learned[i] == ts(f["learned_at"])
        assert d.status[i] == f["status"]
    # the bar item holds these arrays; lives_in versions are one group, oldest first
    opts = pane.bars.opts
    np.testing.assert_array_equal(opts["x0"], d.start)
    np.testing.assert_array_equal(opts["y"], d.row)
    lives = [d.labels[i] for i in range(len(d)) if pane._predicate_of(i) == "lives_in"]
    assert lives == ["Berlin", "Munich", "Hamburg"]
    berlin = d.labels.index("Berlin")
    assert np.isfinite(d.invalidated[berlin])  # belief time: when Munich retired it
    assert len(pane.invalidated_marks.data) == 1
    assert len(pane.open_marks.data) == int(d.open_ended.sum())
    lo, hi = pane.plot.getPlotItem().getViewBox().viewRange()[0]
    assert lo <= d.start.min() and hi >= d.start.max()


def test_predicate_filter(pane):
    pane.predicate.setCurrentIndex(pane.predicate.findData("lives_in"))
    assert pane.data.labels == ["Berlin", "Munich", "Hamburg"]
    assert pane.data.status == ["superseded", "active", "needs_review"]


def test_the_slider_sets_the_bus_as_of_throttled(pane, qtbot):
    bus = pane.ctx.bus
    seen: list = []
    bus.sigAsOfChanged.connect(seen.append)
    for v in range(0, 400, 8):  # 50 rapid moves
        pane.slider.setValue(v)
    expected = iso(pane.slider_time(392))
    assert pane.as_of_line.isVisible() or pane.as_of_line.value() == pytest.approx(ts(expected))
    qtbot.waitUntil(lambda: bus.as_of == expected, timeout=3000)
    assert 1 <= len(seen) < 10  # the SignalProxy coalesced the burst
    assert pane.as_of_line.value() == pytest.approx(ts(expected))


def test_as_of_from_the_bus_moves_the_line_and_dims_versions_not_valid_then(pane):
    bus = pane.ctx.bus
    bus.set_as_of("2024-01-05T00:00:00Z")
    d = pane.data
    valid = dict(zip(d.labels, pane.valid_now))
    assert valid == {"Rex": False, "jazz": True, "Berlin": False, "Munich": True, "Hamburg": False, "Siemens": True}
    alphas = dict(zip(d.labels, (b.color().alpha() for b in pane.bars.opts["brushes"])))
    assert alphas["Munich"] == 255 and alphas["Rex"] < 100
    assert pane.as_of_line.value() == pytest.approx(ts("2024-01-05T00:00:00Z"))
    lo, hi = pane.span
    assert pane.slider.value() == round((ts("2024-01-05T00:00:00Z") - lo) / (hi - lo) * SLIDER_STEPS)
    pane.clear_as_of.click()
    assert bus.as_of is None
    assert pane.valid_now.all()


def test_the_slider_spans_the_scope_world_time(pane, engine):
    lo, hi = engine.store.time_span(ANA)
    assert pane.span == (ts(lo), ts(hi))
    assert normalise_iso(lo) == "2024-01-01T09:00:00Z"


def test_follows_the_selected_fact_and_clicks_select_on_the_bus(pane, engine):
    bus = pane.ctx.bus
    tom = next(f for f in engine.export(ANA)["facts"] if f["subject"] == "Tom")
    bus.select("fact", tom["id"], source="test")
    assert pane.subject.currentData() == "tom"
    assert list(pane.data.fact_ids) == [tom["id"]]
    assert pane.selected_fact == tom["id"]
    assert len(pane.selected_outline.opts["x0"]) == 1
    # back to Ana through a memory selection, then click Munich's row
    munich = next(f for f in engine.export(ANA)["facts"] if f["object"] == "Munich")
    bus.select("memory", munich["memory_id"], source="test")
    assert pane.subject.currentData() == "ana"
    hamburg_row = pane.data.row[pane.data.labels.index("Hamburg")]
    pane.click_at(float(pane.data.start.mean()), float(hamburg_row) + 0.2)
    hamburg = next(f for f in engine.export(ANA)["facts"] if f["object"] == "Hamburg")
    assert bus.current.kind == "fact" and bus.current.id == hamburg["id"] and bus.current.source == "timeline"
    pane.click_at(0.0, float(pane.data.row.min()) - 5)  # empty space: nothing happens
    assert bus.current.id == hamburg["id"]


def test_follow_can_be_switched_off(pane, engine):
    pane.follow.setChecked(False)
    tom = next(f for f in engine.export(ANA)["facts"] if f["subject"] == "Tom")
    pane.ctx.bus.select("fact", tom["id"], source="test")
    assert pane.subject.currentData() == "ana"


def test_empty_database(qtbot, tmp_path):
    eng = open_engine(tmp_path / "empty.db")
    p = TimelinePane()
    qtbot.addWidget(p)
    try:
        p.set_context(AppContext(engine=eng, scope=ANA, runner=InlineRunner()))
        assert len(p.data) == 0 and p.subject.count() == 0
        p.slider.setValue(10)
        p.shutdown()
    finally:
        eng.close()


def test_a_selected_turn_shows_the_interval_of_the_claim_it_carried(pane, engine):
    data = engine.export(ANA)
    berlin = next(f for f in data["facts"] if f["object"] == "Berlin")
    turn = next(m for m in data["memories"] if m["kind"] == "episode" and "I live in Berlin" in m["text"])
    pane.ctx.bus.select("memory", turn["id"], source="test")
    assert pane.selected_fact == berlin["id"] and len(pane.selected_outline.opts["x0"]) == 1
    assert pane.detail.text() == (f"Turn m{turn['id']} carried: lives_in Berlin {berlin['valid_from'][:10]} → "
                                  f"{berlin['valid_to'][:10]} (superseded)")
