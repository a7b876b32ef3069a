"""Where a NeoAgent chunk really is in its document (NEOAGENT-SCHEMA.md section 2.1).

NeoAgent's stored chunk text is often not `content[char_start:char_end]`, and its offsets are not
always Python indices:

- offsets count UTF-16 code units (JavaScript strings);
- they may be computed on the trimmed content, or (layout segments) on a whitespace-compacted copy;
- a message chunk stores "<timestamp> <speaker>\\n<body>" while the span covers the body only;
- structural chunks re-join trimmed blocks with "\\n\\n", whatever separated them in the source;
- with CRLF line ends a block that spans lines is not found verbatim (NeoAgent splits the text
  with "\\r\\n" made "\\n"), so it is placed where the search stood: its offsets fall behind the
  real ones by at most the number of carriage returns before it.

`locate_chunk` tries each reading of the offsets and each shape of the text, and returns the
exact span of the chunk's body in the document (so memlens keeps `text[start:end] == chunk
text`) with the list of differences it had to allow. A chunk whose body is not at its span under
any of them is really broken: `Unfit("bad_span")`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_SPACE = re.compile(r"\s+")

# Names of the differences between what NeoAgent stored and the document (kept in the chunk's meta).
UTF16 = "utf16_offsets"
TRIMMED = "offsets_in_trimmed_content"
COMPACTED = "offsets_in_compacted_content"
HEADER = "message_header"
WHITESPACE = "whitespace_between_blocks"
CRLF = "offsets_short_by_carriage_returns"
EXPLAINED = {  # each difference in words (the source pane shows these beside the stored text)
    UTF16: "offsets counted in UTF-16 units",
    TRIMMED: "offsets counted in the trimmed text",
    COMPACTED: "offsets counted in a whitespace-compacted copy",
    HEADER: "a header line before the body",
    WHITESPACE: "other whitespace between words or blocks",
    CRLF: "offsets that fell behind by the carriage returns NeoAgent dropped",
}


class Unfit(Exception):
    """A source row that does not fit memlens: skipped and reported under `reason`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    start: int  # Python indices into the document text: text[start:end] is the chunk's body
    end: int
    how: tuple[str, ...] = ()  # differences allowed (empty: the stored text is exactly the slice)
    header: str | None = None  # the line NeoAgent put before a message's body

    @property
    def exact(self) -> bool:
        return not self.how


def utf16_to_index(text: str, units: int) -> int | None:
    """A UTF-16 code-unit offset (JS string index) -> a Python index, or None if it splits a pair."""
    count = 0
    for i, ch in enumerate(text):
        if count == units:
            return i
        if count > units:
            return None
        count += 2 if ord(ch) > 0xFFFF else 1
    return len(text) if count == units else None


def _readings(doc: str, start: int, end: int) -> Iterator[tuple[int, int, tuple[str, ...]]]:
    """(start, end) as Python indices under each reading NeoAgent's offsets can have, plainest first."""
    lead = len(doc) - len(doc.lstrip())
    astral = _has_astral(doc)
    seen: set[tuple[int, int]] = set()
    for view, to_doc, how in _views(doc, lead):
        units = [((start, end), how)]
        if astral:
            s16, e16 = utf16_to_index(view, start), utf16_to_index(view, end)
            if s16 is not None and e16 is not None:
                units.append(((s16, e16), (*how, UTF16)))
        for (s, e), tags in units:
            if not (0 <= s < e <= len(view)):
                continue
            span = (to_doc(s), to_doc(e))
            if span not in seen:
                seen.add(span)
                yield span[0], span[1], tags


def _views(doc: str, lead: int) -> Iterator[tuple[str, Callable[[int], int], tuple[str, ...]]]:
    """The texts NeoAgent may have counted in, each with its map back to `doc` (lazily: the
    compacted copy is only built for a chunk the plainer readings do not explain)."""
    yield doc, lambda i: i, ()
    if lead:
        yield doc[lead:], lambda i: i + lead, (TRIMMED,)
    compact, where = _compacted(doc[lead:])
    if compact != doc[lead:]:
        yield compact, lambda i: lead + where[i], (COMPACTED,)


@functools.lru_cache(maxsize=16)
def _has_astral(text: str) -> bool:
    return any(ord(c) > 0xFFFF for c in text)


@functools.lru_cache(maxsize=16)  # a document's chunks come one after another
def _compacted(text: str) -> tuple[str, list[int]]:
    """text with every whitespace run as one space (JS `replace(/\\s+/g, ' ')`), and for each of
    its indices (and its end) the index in `text`."""
    out: list[str] = []
    where: list[int] = []
    pos = 0
    for m in _SPACE.finditer(text):
        out.append(text[pos:m.start()])
        where.extend(range(pos, m.start()))
        out.append(" ")
        where.append(m.start())
        pos = m.end()
    out.append(text[pos:])
    where.extend(range(pos, len(text)))
    where.append(len(text))
    return "".join(out), where


def _walk(doc: str, at: int, text: str) -> tuple[int, int] | None:
    """The span of `text` in `doc` starting at `at` when the two differ only in how much
    whitespace separates words (never whether there is any); None otherwise."""
    n, m = len(doc), len(text)
    i, j = at, 0
    while i < n and doc[i].isspace():
        i += 1
    while j < m and text[j].isspace():
        j += 1
    first = i
    while j < m:
        if text[j].isspace():
            while j < m and text[j].isspace():
                j += 1
            if j == m:
                break
            if i >= n or not doc[i].isspace():
                return None
            while i < n and doc[i].isspace():
                i += 1
        elif i >= n or doc[i] != text[j]:
            return None
        else:
            i += 1
            j += 1
    return (first, i) if i > first else None


def locate_chunk(doc: str, start: object, end: object, stored: str) -> ChunkSpan:
    """The exact span of a stored chunk's body in its document (see the module doc), or Unfit."""
    if isinstance(start, bool) or isinstance(end, bool) or not isinstance(start, int) or not isinstance(end, int):
        raise Unfit("bad_span", f"offsets are not integers ({start!r}, {end!r})")
    if not stored.strip():
        raise Unfit("bad_span", "empty chunk text")
    header, body = (stored.split("\n", 1) if "\n" in stored else (None, stored))
    shapes: list[tuple[str, str | None, tuple[str, ...]]] = [(stored, None, ())]
    if header is not None and header.strip() and body.strip():
        shapes.append((body, header, (HEADER,)))
    readings: list[tuple[int, int, tuple[str, ...]]] = []
    for s, e, tags in _readings(doc, start, end):  # the slice is the text (or the message's body) exactly
        readings.append((s, e, tags))
        for text, head, how in shapes:
            if doc[s:e] == text:
                return ChunkSpan(s, e, (*tags, *how), head)
    # The same words from the span's start with other whitespace, then a little later (offsets that
    # fell behind by dropped carriage returns); the compacted reading last, as it only stands for
    # layout segments and would otherwise explain CRLF drift by accident.
    plain = [r for r in readings if COMPACTED not in r[2]]
    drifts = [(at, tags + (CRLF,)) for s, _e, tags in plain if "\r" in doc
              for at in range(s + 1, min(len(doc), s + doc.count("\r") + 1))
              if doc[at - 1].isspace() and not doc[at].isspace()]
    starts = [(s, tags) for s, _e, tags in plain] + drifts + \
        [(s, tags) for s, _e, tags in readings if COMPACTED in tags]
    for at, tags in starts:
        for text, head, how in shapes:
            hit = _walk(doc, at, text)
            if hit is not None:
                return ChunkSpan(hit[0], hit[1], (*tags, *how, WHITESPACE), head)
    if not readings:
        raise Unfit("bad_span", f"[{start}, {end}) is outside the document ({len(doc)} chars)")
    s, e, _ = readings[0]
    raise Unfit("bad_span", f"[{start}, {end}) reads {doc[s:e][:40]!r}, the chunk says {stored[:40]!r}")


__all__ = ["ChunkSpan", "Unfit", "locate_chunk", "utf16_to_index", "EXPLAINED", "CRLF", "UTF16", "TRIMMED", "COMPACTED", "HEADER",
           "WHITESPACE"]
