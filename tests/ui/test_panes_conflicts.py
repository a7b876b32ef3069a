"""Conflicts: the review queue, facts side by side with evidence, curation through the runner with
undo/redo, and the audit log."""

from __future__ import annotations

import pytest

from app.snapshot import SAMPLE_SCOPE
from ui.panes import conflicts as conflicts_module
from ui.panes.conflicts import ConflictsPane

from .shell_db import Recorder, ctx, engine, fact_by, qsettings, sample_db, sample_template, state  # noqa: F401

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")


def _pane(qtbot, ctx):
    pane = ConflictsPane()
    qtbot.addWidget(pane)
    pane.resize(1000, 800)
    pane.set_context(ctx)
    return pane


def test_models_and_the_side_by_side_view(qtbot, qtmodeltester, ctx, engine):
    pane = _pane(qtbot, ctx)
    qtmodeltester.check(pane.queue_model)
    qtmodeltester.check(pane.log_model)
    assert pane.queue_label.text() == "2 open conflicts in the review queue"
    nurse, teacher = fact_by(engine, "has_role", "nurse"), fact_by(engine, "has_role", "teacher")
    assert (pane.current_conflict["fact_a_id"], pane.current_conflict["fact_b_id"]) == (nurse["id"], teacher["id"])
    assert "confident_disagreement" in pane.reason.text() and "neither states a change" in pane.reason.text()
    assert pane.card_a.claim.text() == "Ana · has role → nurse"
    assert pane.card_b.claim.text() == "Ana · has role → teacher"
    assert "I work at Siemens as a nurse." in pane.card_a.evidence.toPlainText()
    assert "I'm a teacher at a school in Munich" in pane.card_b.evidence.toPlainText()
    assert "Chat with Ana (March 2024)" in pane.card_b.evidence.toPlainText()
    assert all(b.isEnabled() for b in (pane.keep_a, pane.keep_b, pane.keep_both, pane.reject_both))
    assert pane.log_model.rowCount() == len(engine.store.curation_log(SAMPLE_SCOPE))


def test_single_fact_review_offers_confirm_or_reject(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    diabetes = fact_by(engine, "has_condition", "diabetes")
    ctx.bus.select("fact", diabetes["id"], source="test")
    assert pane.current_conflict["fact_b"] is None
    assert pane.keep_a.text() == "Confirm" and not pane.keep_b.isEnabled() and not pane.keep_both.isEnabled()
    assert "held for review on its own" in pane.card_b.claim.text()
    assert "sensitive_needs_review" in pane.reason.text()


def test_keep_b_then_undo_restores_the_exact_state(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    before = state(engine)
    nurse = fact_by(engine, "has_role", "nurse")
    with qtbot.waitSignal(ctx.bus.sigDataChanged) as changed:
        pane.keep_b.click()
    assert {"facts", "conflicts", "curation_log"} <= changed.args[0]
    assert fact_by(engine, "has_role", "teacher")["status"] == "active"
    assert fact_by(engine, "has_role", "nurse")["status"] == "superseded"
    assert pane.queue_label.text() == "1 open conflict in the review queue"
    assert "Resolved conflict" in pane.banner.text and pane.log_model.row(0)["command"] == "resolve"
    after = state(engine)
    pane.undo_button.click()
    assert state(engine) == before
    assert pane.queue_label.text() == "2 open conflicts in the review queue"
    assert pane.log_model.row(0)["command"] == "undo"
    pane.redo_button.click()
    assert state(engine) == after
    assert fact_by(engine, "has_role", "teacher")["status"] == "active"
    assert pane.current_conflict is None or pane.current_conflict["fact_a_id"] != nurse["id"]


@pytest.mark.parametrize("button,expect", [("keep_a", ("active", "retracted")), ("keep_both", ("active", "active")),
                                           ("reject_both", ("retracted", "retracted"))])
def test_every_resolution_is_undoable(qtbot, ctx, engine, button, expect):
    pane = _pane(qtbot, ctx)
    before = state(engine)
    getattr(pane, button).click()
    statuses = (fact_by(engine, "has_role", "nurse")["status"], fact_by(engine, "has_role", "teacher")["status"])
    assert statuses == expect
    pane.undo()
    assert state(engine) == before


def test_edit_goes_through_the_ask_function(qtbot, ctx, engine, monkeypatch):
    pane = _pane(qtbot, ctx)
    teacher = fact_by(engine, "has_role", "teacher")
    asked = []

    def fake_ask(parent, facts):
        asked.append([f["id"] for f in facts])
        return {"fact_id": teacher["id"], "object": "biology teacher", "note": "she teaches biology"}

    monkeypatch.setattr(conflicts_module, "ask_fact_edit", fake_ask)
    before = state(engine)
    pane.edit_button.click()
    assert asked == [[fact_by(engine, "has_role", "nurse")["id"], teacher["id"]]]
    corrected = fact_by(engine, "has_role", "biology teacher")
    assert corrected["status"] == "active" and corrected["supersedes_fact_id"] == teacher["id"]
    assert "Corrected fact" in pane.banner.text
    pane.undo()
    assert state(engine) == before
    monkeypatch.setattr(conflicts_module, "ask_fact_edit", lambda parent, facts: None)  # cancelled
    pane.edit_button.click()
    assert state(engine) == before


def test_errors_are_shown_in_the_pane(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    pane.redo()  # nothing was undone
    assert "nothing to redo" in pane.banner.text and pane.banner.level == "error"


def test_queue_click_selects_the_conflict(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    rec = Recorder(ctx.bus)
    pane.queue.selectRow(1)
    assert rec.seen == [("conflict", pane.queue_model.row(1)["id"], "conflicts")]
    ctx.bus.select("conflict", pane.queue_model.row(0)["id"], source="test")
    assert pane.current_conflict["id"] == pane.queue_model.row(0)["id"]
    pane.show_combo.setCurrentIndex(1)  # all conflicts, resolved ones included
    assert pane.queue_model.rowCount() == len(engine.conflicts(SAMPLE_SCOPE, status=None))
