"""Source spans: the document behind the selected memory, with every evidence span highlighted.

The document is shown exactly as stored (document offsets map 1:1 onto the text shown, chunk
by chunk); chunks alternate a subtle background, email quotes are indented in the quote colour,
code symbols and quoted mail carry a label line, and each span of a fact or summary memory is
highlighted in the colour of its status. An episode's span is its whole chunk: clicking
anywhere in a chunk selects that episode, clicking a highlight selects its memory (and fact).
Selecting a memory elsewhere scrolls to its span and flashes it.

A chunk imported from another system that stored it differently from the document (NeoAgent's
message headers, re-joined blocks, offsets counted another way; chunk meta `stored_as`) carries a
label line saying so, and when it is the focused chunk the "As stored by ..." panel beside the
document shows the stored text, so the exact span and what the other system kept sit side by side.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument, QTextFormat
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QSplitter, QTextEdit, QToolTip, QVBoxLayout, QWidget

from ui.panes.base import PaneBase
from ui.selection import Selection
from ui.theme import current_theme, mono_font

FLASH_TICKS = 6
FLASH_INTERVAL_MS = 110
MAX_DOCUMENT_CHARS = 5_000_000  # beyond this a QTextDocument gets sluggish; say so instead


@dataclass(slots=True)
class Segment:
    """Document text [start, end) shown at Qt position qt_start onwards."""

    start: int
    end: int
    qt_start: int


class SpanTextEdit(QTextEdit):
    """Read-only text that reports where it was clicked (a plain click, not a drag-select)."""

    sigClickedAt = Signal(int)  # Qt document position
    sigToolTipAt = Signal(int, object)  # position, global point

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.viewport().setCursor(Qt.CursorShape.PointingHandCursor)

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802
        super().mouseReleaseEvent(event)
        if event.button() == Qt.MouseButton.LeftButton and not self.textCursor().hasSelection():
            self.sigClickedAt.emit(self.cursorForPosition(event.position().toPoint()).position())

    def viewportEvent(self, event) -> bool:  # noqa: N802
        if event.type() == QEvent.Type.ToolTip:
            self.sigToolTipAt.emit(self.cursorForPosition(event.pos()).position(), event.globalPos())
            return True
        return super().viewportEvent(event)


class SourceSpansPane(PaneBase):
    pane_key = "spans"
    title = "Source spans"
    watched_tables = frozenset({"documents", "chunks", "memory_sources", "memories", "facts"})

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.header = QLabel("Select a memory, fact, chunk or document to see its source.", self)
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.PlainText)
        self.header.setProperty("role", "heading")
        self.root_layout.addWidget(self.header)
        self.legend = QLabel("", self)
        self.legend.setProperty("role", "muted")
        self.legend.setWordWrap(True)
        self.root_layout.addWidget(self.legend)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        self.text = SpanTextEdit(split)
        self.stored_box = QWidget(split)
        box = QVBoxLayout(self.stored_box)
        box.setContentsMargins(6, 0, 0, 0)
        self.stored_title = QLabel("", self.stored_box)
        self.stored_title.setWordWrap(True)
        self.stored_title.setProperty("role", "muted")
        self.stored_text = QPlainTextEdit(self.stored_box)
        self.stored_text.setReadOnly(True)
        box.addWidget(self.stored_title)
        box.addWidget(self.stored_text, 1)
        split.addWidget(self.text)
        split.addWidget(self.stored_box)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        self.stored_box.hide()
        self.root_layout.addWidget(split, 1)
        self._qdoc = QTextDocument(self)  # the view does not own documents it is given: keep one
        self.text.setDocument(self._qdoc)

        self.view: dict[str, Any] | None = None  # the span_view being shown
        self.document_id: int | None = None
        self.focus_memory: int | None = None
        self.focus_chunk: int | None = None
        self.segments: list[Segment] = []
        self._chunks_by_id: dict[int, dict[str, Any]] = {}
        self._seg_starts: list[int] = []
        self._seg_qt: list[int] = []
        # Where Qt positions and document offsets part: characters Qt counts twice (UTF-16 surrogate
        # pairs, an emoji) and the "\n" of each "\r\n", which Qt folds into one block break.
        self._astral: list[int] = []
        self._crlf: list[int] = []
        self._flash_on = False
        self._flash_left = 0
        self._flash_timer = QTimer(self)
        self._flash_timer.setInterval(FLASH_INTERVAL_MS)
        self._flash_timer.timeout.connect(self._flash_tick)
        self._request = 0
        self.text.sigClickedAt.connect(self._clicked)
        self.text.sigToolTipAt.connect(self._tooltip)

    # protocol ---------------------------------------------------------------------------------------
    def refresh(self) -> None:
        if self.ctx is None:
            self._clear("No database open.")
            return
        if self.document_id is not None:
            self._load("document", self.document_id, focus_memory=self.focus_memory, focus_chunk=self.focus_chunk)
        elif self.ctx.bus.current is not None:
            self.on_selected(self.ctx.bus.current)
        else:
            self._clear("Select a memory, fact, chunk or document to see its source.")

    def on_selected(self, sel: Selection) -> None:
        if self.ctx is None or sel.kind not in ("memory", "fact", "chunk", "document"):
            return
        self._load(sel.kind, sel.id, focus_chunk=sel.id if sel.kind == "chunk" else None)

    def on_data_changed(self, tables: set[str]) -> None:
        if set(tables) & self.watched_tables and self.document_id is not None and self.ctx is not None:
            self._load("document", self.document_id, focus_memory=self.focus_memory, focus_chunk=self.focus_chunk,
                       flash=False)

    def shutdown(self) -> None:
        self._flash_timer.stop()
        super().shutdown()

    # loading --------------------------------------------------------------------------------------------
    def _load(self, kind: str, record_id: int, *, focus_memory: int | None = None, focus_chunk: int | None = None,
              flash: bool = True) -> None:
        if self.ctx is None:
            return
        engine, scope = self.ctx.engine, self.ctx.scope
        self._request += 1
        request = self._request
        current = self.document_id if self.view is not None else None

        def work():
            where = engine.document_of(scope, kind, record_id)
            if where is None:
                return None
            document_id, memory_id = where
            view = None if document_id == current else engine.span_view(scope, document_id)
            return document_id, memory_id, view

        def done(result) -> None:
            if request != self._request:
                return
            if result is None:
                what = {"memory": "Memory", "fact": "Fact", "chunk": "Chunk", "document": "Document"}[kind]
                hint = ("It has no source span: it was written by an operator or an import without provenance."
                        if kind in ("memory", "fact") else "It is not in this scope.")
                self.banner.show_notice(f"{what} {record_id}: no source document to show. {hint}", "info")
                return
            document_id, memory_id, view = result
            self.banner.clear()
            if view is not None:
                self._show(view)
            self.focus_memory = focus_memory if focus_memory is not None else memory_id
            self.focus_chunk = focus_chunk
            self._focus(flash=flash)

        self.read(work, done)

    def _clear(self, message: str) -> None:
        self._flash_timer.stop()
        self.view = None
        self.document_id = None
        self.focus_memory = self.focus_chunk = None
        self.segments = []
        self._chunks_by_id = {}
        self._seg_starts, self._seg_qt, self._astral, self._crlf = [], [], [], []
        self._qdoc.clear()
        self.text.setExtraSelections([])
        self.header.setText(message)
        self.legend.setText("")
        self.stored_box.hide()

    def _show(self, view: dict[str, Any]) -> None:
        doc = view["document"]
        self.view = view
        self.document_id = doc["id"]
        self._chunks_by_id = {c["id"]: c for c in view["chunks"]}
        parts = [doc.get("title") or doc.get("uri") or f"Document {doc['id']}",
                 f"{doc['source_type']}", f"trust {doc['trust']}"]
        if doc.get("source_time"):
            parts.append(doc["source_time"].replace("T", " ").rstrip("Z")[:16])
        if doc.get("version", 1) > 1:
            parts.append(f"version {doc['version']}")
        if doc.get("retracted_at"):
            parts.append(f"RETRACTED {doc['retracted_at'][:10]}")
        self.header.setText(" · ".join(parts))
        evidence = [s for s in view["spans"] if not self._chunk_wide(s)]
        self.legend.setText(
            f"Document {doc['id']}: {len(view['chunks'])} chunks, {len(evidence)} evidence spans of facts and summaries "
            "(highlighted by status)" + (f", {len(view['times'])} times it names (dotted; hover for the dates)"
                                         if view.get("times") else "")
            + ". Click a highlight to select its memory, or a chunk to select its episode.")
        if len(doc["text"]) > MAX_DOCUMENT_CHARS:
            self.banner.show_notice(f"This document has {len(doc['text']):,} characters; only the first "
                                    f"{MAX_DOCUMENT_CHARS:,} are shown.", "warning")
        self._build(view)

    def _chunk_wide(self, span: dict[str, Any]) -> bool:
        chunk = self._chunks_by_id.get(span["chunk_id"])
        return chunk is not None and span["start"] <= chunk["start"] and span["end"] >= chunk["end"]

    # rendering -------------------------------------------------------------------------------------------
    @staticmethod
    def _label(chunk: dict[str, Any], previous: dict[str, Any] | None) -> str | None:
        own = SourceSpansPane._kind_label(chunk, previous)
        stored = (chunk.get("meta") or {}).get("stored_as")
        if not stored:
            return own
        what = "; ".join(stored.get("explained") or stored.get("how") or ())
        note = f"▸ {stored.get('by', 'the source')} stored this chunk differently ({what})"
        return f"{own}   {note}" if own else note

    @staticmethod
    def _kind_label(chunk: dict[str, Any], previous: dict[str, Any] | None) -> str | None:
        meta = chunk.get("meta") or {}
        kind = chunk["kind"]
        if kind == "code_symbol" or (kind == "split" and meta.get("symbol")):
            lines = ""
            if meta.get("line_start"):
                lines = f" · lines {meta['line_start']}–{meta.get('line_end', meta['line_start'])}"
            part = f" (part {meta['part']} of {meta['parts']})" if meta.get("parts") else ""
            return f"▸ {meta.get('symbol_kind', 'symbol')} {meta.get('symbol', '?')}{lines}{part}"
        if kind == "quote":
            return "❝ quoted" + (f": {meta['attribution']}" if meta.get("attribution") else "")
        if kind == "message" and chunk.get("source_time"):
            day = chunk["source_time"][:10]
            if previous is None or (previous.get("source_time") or "")[:10] != day:
                return f"— {day} —"
        return None

    def _build(self, view: dict[str, Any]) -> None:
        theme = current_theme()
        text = view["document"]["text"][:MAX_DOCUMENT_CHARS]
        is_code = view["document"]["source_type"] == "code"
        base_font = mono_font(self.font().pointSize()) if is_code else QFont(self.font())
        self._flash_timer.stop()
        self.text.setExtraSelections([])
        qdoc = self._qdoc
        qdoc.clear()
        qdoc.setDefaultFont(base_font)
        cursor = QTextCursor(qdoc)
        segments: list[Segment] = []
        first = True

        def block(fmt: QTextBlockFormat, chars: QTextCharFormat) -> None:
            nonlocal first
            if first:
                cursor.setBlockFormat(fmt)
                cursor.setBlockCharFormat(chars)
                cursor.setCharFormat(chars)
                first = False
            else:
                cursor.insertBlock(fmt, chars)

        plain_chars = QTextCharFormat()
        plain_chars.setFont(base_font)
        label_chars = QTextCharFormat()
        label_font = QFont(self.font())
        label_font.setPointSizeF(max(6.0, self.font().pointSizeF() * 0.85))
        label_font.setBold(True)
        label_chars.setFont(label_font)
        label_chars.setForeground(QColor(theme.chunk_rule))

        # Nested or overlapping chunks are shown inside the chunk that contains them; a window (it
        # joins chunks, e.g. an imported overlap window) yields to the chunks it joins.
        chunks = sorted(view["chunks"], key=lambda c: (c["start"], c["kind"] == "window", -c["end"]))
        outer: list[dict[str, Any]] = []
        for c in chunks:
            if outer and c["start"] < outer[-1]["end"]:
                continue
            outer.append(c)
        pos = 0
        previous = None
        for i, chunk in enumerate(outer):
            start, end = min(chunk["start"], len(text)), min(chunk["end"], len(text))
            if start > pos and text[pos:start].strip():
                block(QTextBlockFormat(), plain_chars)
                segments.append(Segment(pos, start, cursor.position()))
                cursor.insertText(text[pos:start], plain_chars)
            label = self._label(chunk, previous)
            if label:
                lf = QTextBlockFormat()
                lf.setTopMargin(6)
                if chunk["kind"] == "quote":
                    lf.setLeftMargin(24)
                block(lf, label_chars)
                cursor.insertText(label, label_chars)
            bf = QTextBlockFormat()
            chars = QTextCharFormat(plain_chars)
            if chunk["kind"] == "quote":
                bf.setLeftMargin(24)
                bf.setBackground(QColor(theme.quote_bg))
                chars.setForeground(QColor(theme.quote_fg))
            elif i % 2 == 1:
                bf.setBackground(QColor(theme.chunk_band))
            if chunk["kind"] == "heading":
                chars.setFontWeight(QFont.Weight.Bold)
            bf.setProperty(QTextFormat.Property.UserProperty, chunk["id"])
            block(bf, chars)
            if end > start:
                segments.append(Segment(start, end, cursor.position()))
                cursor.insertText(text[start:end], chars)
            pos = max(pos, end)
            previous = chunk
        if pos < len(text) and text[pos:].strip():
            block(QTextBlockFormat(), plain_chars)
            segments.append(Segment(pos, len(text), cursor.position()))
            cursor.insertText(text[pos:], plain_chars)
        self.segments = segments
        self._seg_starts = [s.start for s in segments]
        self._seg_qt = [s.qt_start for s in segments]
        self._astral = [i for i, ch in enumerate(text) if ord(ch) > 0xFFFF]
        self._crlf = [m.start() + 1 for m in re.finditer("\r\n", text)]
        self._paint_spans(view)
        self._paint_times(view)
        self.text.moveCursor(QTextCursor.MoveOperation.Start)

    def _paint_spans(self, view: dict[str, Any]) -> None:
        theme = current_theme()
        cursor = QTextCursor(self._qdoc)
        # Wider spans first, so a narrower one inside stays visible on top.
        for span in sorted(view["spans"], key=lambda s: -(s["end"] - s["start"])):
            if self._chunk_wide(span):
                continue
            a, b = self.qt_position(span["start"]), self.qt_position(span["end"], end=True)
            if a is None or b is None or b <= a:
                continue
            fmt = QTextCharFormat()
            if span["kind"] == "fact":
                fmt.setBackground(QColor(self._status_fill(span["status"])))
            else:
                fmt.setBackground(QColor(theme.span_fills[span["memory_id"] % len(theme.span_fills)]))
            if span["status"] in ("superseded", "expired", "retracted", "forgotten"):
                fmt.setFontStrikeOut(span["status"] in ("retracted", "forgotten"))
                fmt.setFontUnderline(True)
            cursor.setPosition(a)
            cursor.setPosition(b, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(fmt)

    def _paint_times(self, view: dict[str, Any]) -> None:
        """Times the text names ("last Saturday"), resolved at ingestion: a dotted underline; the
        tooltip says which dates they mean."""
        cursor = QTextCursor(self._qdoc)
        fmt = QTextCharFormat()
        fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.DotLine)
        fmt.setUnderlineColor(QColor(current_theme().status["needs_review"]))
        for t in view.get("times", []):
            a, b = self.qt_position(t["start"]), self.qt_position(t["end"], end=True)
            if a is None or b is None or b <= a:
                continue
            cursor.setPosition(a)
            cursor.setPosition(b, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(fmt)

    def times_at(self, offset: int) -> list[dict[str, Any]]:
        return [t for t in (self.view or {}).get("times", []) if t["start"] <= offset < t["end"]]

    @staticmethod
    def describe_time(t: dict[str, Any]) -> str:
        """'"last Saturday" means 2023-05-13' or '... 2023-05-08 to 2023-05-14' (end inclusive)."""
        from datetime import datetime, timedelta

        start = t["window_start"][:10]
        last = (datetime.fromisoformat(t["window_end"][:10]) - timedelta(days=1)).date().isoformat()
        span = start if last == start else f"{start} to {last}"
        return f'"{t["text"]}" means {span} (resolved against when it was said)'

    @staticmethod
    def _status_fill(status: str) -> str:
        theme = current_theme()
        if status == "active":
            return theme.span_fact
        if status == "needs_review":
            return theme.span_fills[3]
        return theme.chunk_band if not theme.dark else "#3a3f47"

    # positions -------------------------------------------------------------------------------------------
    def qt_position(self, offset: int, *, end: bool = False) -> int | None:
        """The Qt position of a document offset (end=True: of an exclusive end offset)."""
        i = bisect.bisect_right(self._seg_starts, offset - (1 if end else 0)) - 1
        if i < 0:
            return None
        seg = self.segments[i]
        if not (seg.start <= offset <= seg.end):
            return None
        return seg.qt_start + self._qt_units(seg.start, offset)

    def _qt_units(self, start: int, end: int) -> int:
        """How many Qt positions text[start:end] takes (see _astral and _crlf)."""
        n = end - start
        for marks, sign in ((self._astral, 1), (self._crlf, -1)):
            if marks:
                n += sign * (bisect.bisect_left(marks, end) - bisect.bisect_left(marks, start))
        return n

    def document_offset(self, qt_pos: int) -> int | None:
        i = bisect.bisect_right(self._seg_qt, qt_pos) - 1
        if i < 0:
            return None
        seg = self.segments[i]
        want = qt_pos - seg.qt_start
        lo, hi = seg.start, seg.end  # the last offset whose Qt position is at or before qt_pos
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._qt_units(seg.start, mid) <= want:
                lo = mid
            else:
                hi = mid - 1
        return lo if seg.start <= lo < seg.end else None

    def spans_at(self, offset: int) -> list[dict[str, Any]]:
        """Spans covering a document offset, narrowest first (chunk-wide episode spans last)."""
        if self.view is None:
            return []
        hits = [s for s in self.view["spans"] if s["start"] <= offset < s["end"]]
        return sorted(hits, key=lambda s: (self._chunk_wide(s), s["end"] - s["start"], s["memory_id"]))

    def chunk_at(self, offset: int) -> dict[str, Any] | None:
        if self.view is None:
            return None
        inside = [c for c in self.view["chunks"] if c["start"] <= offset < c["end"]]
        return min(inside, key=lambda c: c["end"] - c["start"]) if inside else None

    # interaction -----------------------------------------------------------------------------------------
    def _clicked(self, qt_pos: int) -> None:
        offset = self.document_offset(qt_pos)
        if offset is None:
            return
        spans = self.spans_at(offset)
        if not spans:
            chunk = self.chunk_at(offset)
            if chunk is not None:
                self.select("chunk", chunk["id"])
            return
        span = spans[0]
        self.focus_memory = span["memory_id"]
        self.focus_chunk = None
        self._focus(flash=True, scroll=False)
        self.select("memory", span["memory_id"])
        if span["fact_id"]:
            self.select("fact", span["fact_id"])

    def _tooltip(self, qt_pos: int, global_pos) -> None:
        offset = self.document_offset(qt_pos)
        if offset is None:
            QToolTip.hideText()
            return
        lines = []
        chunk = self.chunk_at(offset)
        if chunk is not None:
            who = f" · {chunk['speaker']}" if chunk.get("speaker") else ""
            when = f" · {chunk['source_time']}" if chunk.get("source_time") else ""
            lines.append(f"chunk {chunk['id']} ({chunk['kind']}, #{chunk['ordinal']}){who}{when}")
        for t in self.times_at(offset):
            lines.append("time: " + self.describe_time(t))
        for s in self.spans_at(offset)[:6]:
            lines.append(f"{s['kind']} {s['memory_id']} [{s['status']}]: {s['text'][:90]}")
        QToolTip.showText(global_pos, "\n".join(lines), self.text)

    def focused_range(self) -> tuple[int, int] | None:
        """The Qt range of the focused memory's span (or chunk) in this document."""
        if self.view is None:
            return None
        if self.focus_memory is not None:
            spans = [s for s in self.view["spans"] if s["memory_id"] == self.focus_memory]
            if spans:
                s = min(spans, key=lambda s: s["start"])
                a, b = self.qt_position(s["start"]), self.qt_position(s["end"], end=True)
                return (a, b) if a is not None and b is not None else None
        if self.focus_chunk is not None:
            c = self._chunks_by_id.get(self.focus_chunk)
            if c is not None:
                a, b = self.qt_position(c["start"]), self.qt_position(c["end"], end=True)
                return (a, b) if a is not None and b is not None else None
        return None

    def focused_chunk(self) -> dict[str, Any] | None:
        """The focused chunk, or the chunk of the focused memory's first span."""
        if self.view is None:
            return None
        if self.focus_chunk is not None:
            return self._chunks_by_id.get(self.focus_chunk)
        spans = [s for s in self.view["spans"] if s["memory_id"] == self.focus_memory]
        return self._chunks_by_id.get(min(spans, key=lambda s: s["start"])["chunk_id"]) if spans else None

    def _show_stored(self) -> None:
        """Beside the document: what the source system stored for the focused chunk, when it differs."""
        chunk = self.focused_chunk()
        stored = ((chunk or {}).get("meta") or {}).get("stored_as")
        if not stored or chunk is None:
            self.stored_box.hide()
            return
        what = "; ".join(stored.get("explained") or stored.get("how") or ())
        self.stored_title.setText(f"As stored by {stored.get('by', 'the source')} (chunk {chunk['id']}), beside the exact"
                                  f" span at the left. It differs by: {what}.")
        self.stored_text.setPlainText(stored.get("text") or "")
        self.stored_box.show()

    def _focus(self, *, flash: bool, scroll: bool = True) -> None:
        self._show_stored()
        rng = self.focused_range()
        if rng is None:
            self.text.setExtraSelections([])
            return
        if scroll:
            cursor = QTextCursor(self._qdoc)
            cursor.setPosition(rng[0])
            bar = self.text.verticalScrollBar()
            rect = self.text.cursorRect(cursor)
            bar.setValue(bar.value() + rect.top() - self.text.viewport().height() // 3)
        if flash:
            self._flash_left = FLASH_TICKS
            self._flash_on = True
            self._apply_focus(self._flash_on)
            self._flash_timer.start()
        else:
            self._apply_focus(False)

    def _flash_tick(self) -> None:
        self._flash_left -= 1
        self._flash_on = not self._flash_on and self._flash_left > 0
        self._apply_focus(self._flash_on)
        if self._flash_left <= 0:
            self._flash_timer.stop()

    @property
    def flashing(self) -> bool:
        return self._flash_timer.isActive()

    def _apply_focus(self, bright: bool) -> None:
        rng = self.focused_range()
        if rng is None:
            self.text.setExtraSelections([])
            return
        theme = current_theme()
        sel = QTextEdit.ExtraSelection()
        cursor = QTextCursor(self._qdoc)
        cursor.setPosition(rng[0])
        cursor.setPosition(rng[1], QTextCursor.MoveMode.KeepAnchor)
        sel.cursor = cursor
        fmt = QTextCharFormat()
        color = QColor(theme.span_flash)
        if not bright:
            color.setAlpha(90)
        fmt.setBackground(color)
        fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.SingleUnderline)
        fmt.setUnderlineColor(QColor(theme.span_flash))
        sel.format = fmt
        self.text.setExtraSelections([sel])

    def shown_text(self) -> str:
        return self._qdoc.toPlainText()
