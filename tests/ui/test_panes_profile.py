"""Profile: static and dynamic lines, each expandable to the facts (and evidence) behind it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.snapshot import SAMPLE_SCOPE
from ui.models.rows import FACT_ID_ROLE
from ui.panes.profile import ProfilePane

from .shell_db import Recorder, ctx, engine, fact_by, qsettings, sample_db, sample_template  # noqa: F401

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")


def _pane(qtbot, ctx):
    pane = ProfilePane()
    qtbot.addWidget(pane)
    pane.resize(900, 500)
    pane.set_context(ctx)
    return pane


def test_tree_model_and_lines(qtbot, qtmodeltester, ctx, engine):
    pane = _pane(qtbot, ctx)
    qtmodeltester.check(pane.model)
    profile = engine.profile(SAMPLE_SCOPE)
    assert pane.line_texts() == [line.text for line in profile.static] + [line.text for line in profile.dynamic]
    assert "Ana lives in Munich." in pane.line_texts() and "Ana plans to visit Lisbon in June." in pane.line_texts()
    top = [pane.model.index(i, 0).data() for i in range(pane.model.rowCount())]
    assert top[0].startswith("Static") and top[1].startswith("Dynamic")
    assert "tokens" in pane.summary.text()


def test_each_line_expands_to_its_facts_with_evidence(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    munich = fact_by(engine, "lives_in", "Munich")
    cells = pane.fact_cells(munich["id"])
    assert cells[:5] == [f"fact {munich['id']}", "Ana", "lives_in", "Munich", "0.85"]
    assert cells[5].startswith("“I moved to Munich” — Chat with Ana")
    index = pane.model.index_of_fact(munich["id"])
    assert "Big news: [I moved to Munich] last week" in index.siblingAtColumn(5).data(Qt.ItemDataRole.ToolTipRole)
    assert pane.tree.isExpanded(index.parent())  # small profiles open to their facts
    static = pane.model.index(0, 0)
    likes = next(pane.model.index(i, 0, static) for i in range(pane.model.rowCount(static))
                 if pane.model.index(i, 0, static).data() == "Ana likes jazz and hiking.")
    assert pane.model.rowCount(likes) == 2 and likes.siblingAtColumn(3).data() == "jazz, hiking"


def test_selection_both_ways(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    rec = Recorder(ctx.bus)
    munich = fact_by(engine, "lives_in", "Munich")
    pane.tree.setCurrentIndex(pane.model.index_of_fact(munich["id"]))
    assert rec.seen == [("fact", munich["id"], "profile")]
    nurse = fact_by(engine, "has_role", "nurse")
    ctx.bus.select("fact", nurse["id"], source="test")
    assert pane.tree.currentIndex().data(FACT_ID_ROLE) == nurse["id"]
    assert rec.seen[-1] == ("fact", nurse["id"], "test")  # following a selection publishes nothing
    ctx.bus.select("memory", munich["memory_id"], source="test")
    assert pane.tree.currentIndex().data(FACT_ID_ROLE) == munich["id"]
    berlin = fact_by(engine, "lives_in", "Berlin")
    ctx.bus.select("fact", berlin["id"], source="test")
    assert f"Fact {berlin['id']} is not behind any profile line" in pane.note.text()


def test_budget_cuts_lines_and_curation_refreshes(qtbot, qtmodeltester, ctx, engine):
    pane = _pane(qtbot, ctx)
    pane.budget.setValue(20)
    pane.budget.editingFinished.emit()
    top = [pane.model.index(i, 0).data() for i in range(pane.model.rowCount())]
    assert any(t.startswith("Left out by the token budget") for t in top)
    qtmodeltester.check(pane.model)
    pane.budget.setValue(400)
    pane.budget.editingFinished.emit()
    conflict = engine.conflicts(SAMPLE_SCOPE)[0]
    engine.curator(SAMPLE_SCOPE).resolve(conflict["id"], "b")
    ctx.bus.data_changed({"facts"})
    assert "Ana has role teacher." in pane.line_texts() and "Ana has role nurse." not in pane.line_texts()
