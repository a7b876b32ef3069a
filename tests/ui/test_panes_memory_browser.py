"""Memory browser: a virtualised, filterable table that follows and drives the selection bus."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QModelIndex

from app.snapshot import SAMPLE_SCOPE
from engine.store.browse import MemoryFilter
from ui.models.memory_table import COLUMN_INDEX, MemoryTableModel
from ui.models.rows import MEMORY_ID_ROLE
from ui.panes.memory_browser import MemoryBrowserPane
from ui.tasks import TaskRunner

from .shell_db import Recorder, ctx, engine, fact_by, qsettings, sample_db, sample_template  # noqa: F401

# Showing any top-level window on the offscreen platform logs this; it is not a problem of ours.
pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")


def _pane(qtbot, ctx, page_size=500):
    pane = MemoryBrowserPane()
    pane.model.page_size = page_size
    qtbot.addWidget(pane)
    pane.resize(900, 500)
    pane.set_context(ctx)
    return pane


def test_model_passes_the_model_tester_while_paging(qtbot, qtmodeltester, ctx):
    model = MemoryTableModel(page_size=7)
    model.set_source(ctx, MemoryFilter())
    assert model.rowCount() == 7 and model.total == ctx.engine.counts(SAMPLE_SCOPE)["memories"]
    qtmodeltester.check(model)  # fetches more pages as it goes
    while model.canFetchMore(QModelIndex()):
        model.fetchMore(QModelIndex())
    assert model.rowCount() == model.total
    ids = [model.data(model.index(r, 0), MEMORY_ID_ROLE) for r in range(model.rowCount())]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    qtmodeltester.check(model)
    model.set_source(ctx, MemoryFilter(kind="fact", descending=True))
    qtmodeltester.check(model)
    assert all(model.row(r)["kind"] == "fact" for r in range(model.rowCount()))


def test_only_pages_are_loaded_and_the_total_is_counted(qtbot, ctx):
    pane = _pane(qtbot, ctx, page_size=5)
    assert pane.model.rowCount() == 5
    total = ctx.engine.counts(SAMPLE_SCOPE)["memories"]
    assert pane.model.total == total
    assert f"{total} memories" in pane.count_label.text() and "5 loaded" in pane.count_label.text()


def test_filters_and_search(qtbot, ctx):
    pane = _pane(qtbot, ctx)
    pane.kind.setCurrentIndex(pane.kind.findData("fact"))
    assert {pane.model.row(r)["kind"] for r in range(pane.model.rowCount())} == {"fact"}
    pane.status.setCurrentIndex(pane.status.findData("needs_review"))
    texts = {pane.model.row(r)["text"] for r in range(pane.model.rowCount())}
    assert texts == {"Ana has role teacher.", "Ana has condition diabetes."}
    pane.clear_filters()
    pane.search.setText("Munich")
    qtbot.waitUntil(lambda: pane.model.filter.text == "Munich")  # debounced
    rows = [pane.model.row(r)["text"] for r in range(pane.model.rowCount())]
    assert rows and all("munich" in t.lower() for t in rows)
    pane.clear_filters()
    assert pane.source_type.findData("email") > 0 and pane.source_type.findData("code") > 0
    pane.source_type.setCurrentIndex(pane.source_type.findData("email"))
    assert {pane.model.row(r)["source_type"] for r in range(pane.model.rowCount())} == {"email"}
    pane.clear_filters()
    pane.time_from.setText("2024-03-02")
    pane.time_to.setText("2024-03-02")
    pane.apply_filters()
    times = {pane.model.row(r)["time"][:10] for r in range(pane.model.rowCount())}
    assert times == {"2024-03-02"}
    pane.time_to.setText("yesterday")
    pane.apply_filters()
    assert pane.banner.isVisibleTo(pane) and "not a date" in pane.banner.text


def test_selecting_a_row_selects_memory_and_fact(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    rec = Recorder(ctx.bus)
    munich = fact_by(engine, "lives_in", "Munich")
    row = pane.model.row_of(munich["memory_id"])
    pane.table.selectRow(row)
    assert rec.seen == [("memory", munich["memory_id"], "memories"), ("fact", munich["id"], "memories")]
    episode = next(r for r in range(pane.model.rowCount()) if pane.model.row(r)["kind"] == "episode")
    pane.table.selectRow(episode)
    assert rec.seen[-1] == ("memory", pane.model.row(episode)["id"], "memories")


def test_incoming_selection_loads_pages_until_the_row_is_there(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx, page_size=4)
    last = ctx.engine.store.browse_memories(SAMPLE_SCOPE, MemoryFilter(descending=True), limit=1)[0]["id"]
    ctx.bus.select("memory", last, source="test")
    assert pane.selected_memory_id() == last
    assert pane.model.rowCount() < pane.model.total or pane.model.row_of(last) == pane.model.total - 1
    munich = fact_by(engine, "lives_in", "Munich")
    ctx.bus.select("fact", munich["id"], source="test")
    assert pane.selected_memory_id() == munich["memory_id"]
    assert pane.table.currentIndex().column() == COLUMN_INDEX["id"]  # scrolled to the row's start


def test_a_selection_hidden_by_filters_says_so(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    pane.kind.setCurrentIndex(pane.kind.findData("episode"))
    munich = fact_by(engine, "lives_in", "Munich")
    ctx.bus.select("memory", munich["memory_id"], source="test")
    assert "hidden by the current filters" in pane.banner.text
    pane.clear_filters()
    assert pane.selected_memory_id() == munich["memory_id"]


def test_reads_run_in_the_thread_pool(qtbot, ctx):
    runner = TaskRunner()
    ctx.runner = runner
    try:
        pane = _pane(qtbot, ctx, page_size=6)
        qtbot.waitUntil(lambda: pane.model.rowCount() == 6 and pane.model.total is not None)
        pane.model.fetchMore(QModelIndex())
        qtbot.waitUntil(lambda: pane.model.rowCount() == 12)
    finally:
        runner.shutdown()


def test_data_changes_reload_and_keep_the_selection(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    munich = fact_by(engine, "lives_in", "Munich")
    ctx.bus.select("memory", munich["memory_id"], source="test")
    engine.curator(SAMPLE_SCOPE).forget(munich["memory_id"])
    ctx.bus.data_changed({"memories"})
    row = pane.model.row_of(munich["memory_id"])
    assert pane.model.row(row)["status"] == "forgotten"
    assert pane.selected_memory_id() == munich["memory_id"]


def test_an_outdated_memory_names_what_replaced_it_and_a_double_click_goes_there(qtbot, ctx, engine):
    from PySide6.QtCore import Qt

    pane = _pane(qtbot, ctx)
    while pane.model.canFetchMore(QModelIndex()):
        pane.model.fetchMore(QModelIndex())
    rows = [pane.model.row(r) for r in range(pane.model.rowCount())]
    berlin, munich = fact_by(engine, "lives_in", "Berlin"), fact_by(engine, "lives_in", "Munich")
    turn = next(r for r in rows if r["kind"] == "episode" and "I live in Berlin" in r["text"])
    assert (turn["replaced_by"], turn["replaced_claim"]) == (munich["memory_id"], "lives_in Berlin")
    assert next(r for r in rows if r["id"] == berlin["memory_id"])["replaced_by"] == munich["memory_id"]
    # the turn that states the change is not outdated by the value it replaced
    assert next(r for r in rows if r["kind"] == "episode" and "moved to Munich" in r["text"])["replaced_by"] is None
    cell = pane.model.index(pane.model.row_of(turn["id"]), COLUMN_INDEX["replaced_by"])
    assert cell.data() == f"→ m{munich['memory_id']} · {munich['valid_from'][:10]}"
    assert "Outdated: its claim 'lives_in Berlin' was replaced" in cell.data(Qt.ItemDataRole.ToolTipRole)
    seen = Recorder(ctx.bus)
    pane._double_clicked(cell)
    assert pane.selected_memory_id() == munich["memory_id"]
    assert ("memory", munich["memory_id"], "memories") in seen.seen
