"""Source spans: the selected memory's document with highlighted evidence, chunk bands, quotes
and code symbols; clicks select memories; selections scroll to and flash their span."""

from __future__ import annotations

import hashlib

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor

from app.snapshot import SAMPLE_SCOPE
from engine.store.browse import MemoryFilter
from ui.panes.source_spans import SourceSpansPane

from .shell_db import Recorder, ctx, engine, fact_by, qsettings, sample_db, sample_template  # noqa: F401

# Showing any top-level window on the offscreen platform logs this; it is not a problem of ours.
pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")


def _pane(qtbot, ctx):
    pane = SourceSpansPane()
    qtbot.addWidget(pane)
    pane.resize(900, 600)
    pane.show()
    qtbot.waitExposed(pane)
    pane.set_context(ctx)
    return pane


def _range_text(pane) -> str:
    a, b = pane.focused_range()
    return pane.shown_text()[a:b]


def test_selecting_a_fact_shows_its_document_and_flashes_its_span(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    munich = fact_by(engine, "lives_in", "Munich")
    ctx.bus.select("fact", munich["id"], source="test")
    assert pane.header.text().startswith("Chat with Ana (March 2024) · chat")
    assert "Ana: Big news: I moved to Munich last week." in pane.shown_text()
    assert _range_text(pane) == "I moved to Munich"
    assert pane.flashing
    qtbot.waitUntil(lambda: not pane.flashing)  # the flash stops by itself
    assert len(pane.text.extraSelections()) == 1  # the span stays marked
    # every fact's evidence is highlighted in the text, not only the selected one
    nurse = fact_by(engine, "has_role", "nurse")
    span = next(s for s in pane.view["spans"] if s["memory_id"] == nurse["memory_id"])
    cursor = QTextCursor(pane.text.document())
    cursor.setPosition(pane.qt_position(span["start"]) + 1)
    assert cursor.charFormat().background().style() != Qt.BrushStyle.NoBrush


def test_chunk_boundaries_are_visible(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    ctx.bus.select("fact", fact_by(engine, "lives_in", "Munich")["id"], source="test")
    doc = pane.text.document()
    banded = [doc.findBlockByNumber(i).blockFormat().background().style() != Qt.BrushStyle.NoBrush
              for i in range(doc.blockCount())]
    assert any(banded) and not all(banded)  # alternating, not uniform
    assert "— 2024-03-02 —" in pane.shown_text()  # day changes are labelled


def test_clicking_a_highlight_selects_its_memory_and_fact(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    munich = fact_by(engine, "lives_in", "Munich")
    teacher = fact_by(engine, "has_role", "teacher")
    ctx.bus.select("fact", munich["id"], source="test")
    rec = Recorder(ctx.bus)
    span = next(s for s in pane.view["spans"] if s["memory_id"] == teacher["memory_id"])
    cursor = QTextCursor(pane.text.document())
    cursor.setPosition(pane.qt_position(span["start"]) + 2)
    pane.text.setTextCursor(cursor)
    pane.text.ensureCursorVisible()
    qtbot.mouseClick(pane.text.viewport(), Qt.MouseButton.LeftButton, pos=pane.text.cursorRect(cursor).center())
    assert rec.seen == [("memory", teacher["memory_id"], "spans"), ("fact", teacher["id"], "spans")]
    assert _range_text(pane) == "I'm a teacher"
    qtbot.waitUntil(lambda: not pane.flashing)


def test_clicking_plain_chunk_text_selects_the_episode(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    ctx.bus.select("fact", fact_by(engine, "lives_in", "Munich")["id"], source="test")
    rec = Recorder(ctx.bus)
    offset = pane.view["document"]["text"].index("Congratulations")
    cursor = QTextCursor(pane.text.document())
    cursor.setPosition(pane.qt_position(offset) + 1)
    qtbot.mouseClick(pane.text.viewport(), Qt.MouseButton.LeftButton, pos=pane.text.cursorRect(cursor).center())
    chunk = pane.chunk_at(offset)
    episode = ctx.engine.store.memories_of_chunk(SAMPLE_SCOPE, chunk["id"])[0]
    assert rec.seen == [("memory", episode, "spans")]
    qtbot.waitUntil(lambda: not pane.flashing)


def test_email_quotes_are_indented_and_labelled(qtbot, ctx):
    pane = _pane(qtbot, ctx)
    email = ctx.engine.store.browse_memories(SAMPLE_SCOPE, MemoryFilter(source_type="email"))
    quote_memory = next(m for m in email if m["text"].lstrip().startswith(">") or "wrote" in m["text"])
    ctx.bus.select("memory", quote_memory["id"], source="test")
    assert "❝ quoted" in pane.shown_text()
    a, _ = pane.focused_range()
    block = pane.text.document().findBlock(a)
    assert block.blockFormat().leftMargin() > 0
    qtbot.waitUntil(lambda: not pane.flashing)


def test_code_symbols_are_labelled_in_a_monospace_font(qtbot, ctx):
    pane = _pane(qtbot, ctx)
    code = ctx.engine.store.browse_memories(SAMPLE_SCOPE, MemoryFilter(source_type="code"))
    greet = next(m for m in code if "def greet" in m["text"])
    ctx.bus.select("memory", greet["id"], source="test")
    text = pane.shown_text()
    assert "▸ function greet · lines" in text and "▸ class Counter" in text
    assert "def greet" in _range_text(pane)
    assert pane.text.document().defaultFont().family() == "DejaVu Sans Mono"
    qtbot.waitUntil(lambda: not pane.flashing)


def test_chunk_and_document_selections(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    munich = fact_by(engine, "lives_in", "Munich")
    src = ctx.engine.store.sources_of(SAMPLE_SCOPE, munich["memory_id"])[0]
    ctx.bus.select("chunk", src.chunk_id, source="test")
    assert _range_text(pane).startswith("Ana: Big news")
    ctx.bus.select("document", src.document_id, source="test")
    assert pane.document_id == src.document_id
    qtbot.waitUntil(lambda: not pane.flashing)


def test_a_memory_without_a_source_says_so(qtbot, ctx):
    pane = _pane(qtbot, ctx)
    with ctx.engine.store.writer(SAMPLE_SCOPE) as w:
        text = "An imported note without provenance."
        mid = w.insert_memory(kind="summary", text=text, trust="user",
                              content_hash=hashlib.sha256(text.encode()).hexdigest(), source_time=None)
    ctx.bus.select("memory", mid, source="test")
    assert f"Memory {mid}: no source document" in pane.banner.text


def test_shutdown_stops_the_flash(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    ctx.bus.select("fact", fact_by(engine, "lives_in", "Munich")["id"], source="test")
    assert pane.flashing
    pane.close()
    assert not pane.flashing


@pytest.fixture
def imported_ctx(tmp_path):
    """A memlens database imported from a NeoAgent one (message headers, emoji, CRLF, compacted offsets)."""
    from engine.embed.hashing import HashingEmbedder
    from engine.importers.neoagent import import_neoagent
    from engine.memory import MemoryEngine
    from engine.scope import Scope
    from tests.fixtures.neoagent_db import MAIN, build_neoagent_db
    from ui.context import AppContext
    from ui.selection import SelectionBus
    from ui.tasks import InlineRunner

    neo = build_neoagent_db(tmp_path / "neoagent.db")
    eng = MemoryEngine(tmp_path / "memlens.db", embedder=HashingEmbedder(), llm=None, background_reembed=False)
    import_neoagent(eng, neo.path)
    yield AppContext(engine=eng, scope=Scope("1", MAIN, "agent", MAIN), bus=SelectionBus(), runner=InlineRunner())
    eng.close()


def _focused_qt_text(pane) -> str:
    """The focused range as Qt shows it (Qt positions count UTF-16 units, so no Python slicing)."""
    a, b = pane.focused_range()
    cursor = QTextCursor(pane.text.document())
    cursor.setPosition(a)
    cursor.setPosition(b, QTextCursor.MoveMode.KeepAnchor)
    return cursor.selectedText().replace("\u2029", "\n")


def _imported(ctx, ref: str) -> int:
    return next(m["id"] for m in ctx.engine.export(ctx.scope)["memories"] if m["external_ref"] == ref)


def test_what_neoagent_stored_is_shown_beside_the_exact_span(qtbot, imported_ctx):
    pane = _pane(qtbot, imported_ctx)
    imported_ctx.bus.select("memory", _imported(imported_ctx, "neoagent:memory:m-doc-chat-0"), source="test")
    # the exact span of the body, after an emoji (two Qt positions for one character)
    assert _focused_qt_text(pane) == "I moved to Porto last week \U0001F3E0. The flat is small but bright."
    assert "▸ NeoAgent stored this chunk differently (offsets counted in UTF-16 units; a header line before the body)" \
        in pane.shown_text()
    assert pane.stored_box.isVisible()
    assert pane.stored_text.toPlainText() == ("2026-03-30T18:01:00.000Z Ana\n"
                                              "I moved to Porto last week \U0001F3E0. The flat is small but bright.")
    assert "header line" in pane.stored_title.text()
    offset = pane.view["document"]["text"].index("bright")  # Qt positions map back to document offsets
    assert pane.document_offset(pane.qt_position(offset)) == offset
    qtbot.waitUntil(lambda: not pane.flashing)
    # CRLF line ends: Qt folds each into one break, the highlight still covers exactly the span
    imported_ctx.bus.select("memory", _imported(imported_ctx, "neoagent:memory:m-doc-crlf-0"), source="test")
    assert _focused_qt_text(pane) == "Meeting with Rita\nShe brings the car.\n\nWe leave at nine\nand eat in Braga."
    assert pane.stored_text.toPlainText() == "Meeting with Rita\nShe brings the car.\n\nWe leave at nine\nand eat in Braga."
    offset = pane.view["document"]["text"].index("Braga")
    assert pane.document_offset(pane.qt_position(offset)) == offset
    qtbot.waitUntil(lambda: not pane.flashing)


def test_a_chunk_stored_as_it_is_shows_no_side_panel(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    ctx.bus.select("fact", fact_by(engine, "lives_in", "Munich")["id"], source="test")
    assert not pane.stored_box.isVisible() and "stored this chunk differently" not in pane.shown_text()
    qtbot.waitUntil(lambda: not pane.flashing)


def test_times_the_text_names_are_marked_with_the_dates_they_mean(qtbot, ctx, engine):
    pane = _pane(qtbot, ctx)
    ctx.bus.select("fact", fact_by(engine, "lives_in", "Munich")["id"], source="test")
    times = [t for t in pane.view["times"] if t["text"] == "last week"]
    assert times, pane.view["times"]
    t = times[0]
    assert pane.shown_text()[pane.qt_position(t["start"]):pane.qt_position(t["end"], end=True)] == "last week"
    cursor = QTextCursor(pane.text.document())
    cursor.setPosition(pane.qt_position(t["start"]) + 1)
    from PySide6.QtGui import QTextCharFormat

    assert cursor.charFormat().underlineStyle() == QTextCharFormat.UnderlineStyle.DotLine
    text = pane.describe_time(t)
    assert text.startswith('"last week" means ') and " to " in text  # a week: a range of days
