"""Markdown and plain text: one document per file, structure-aware chunks.

Markdown: a chunk per heading line (kind "heading"; setext headings include their underline)
and one per block under it (kind "paragraph"): paragraphs, fenced code blocks and lists are
each kept whole. Plain text: paragraphs separated by blank lines.

A block longer than max_chars becomes kind "split" chunks cut at sentence ends, else at
whitespace, never inside a word; only a single "word" longer than max_chars is cut hard.
Code and lists are cut at line ends first. The file is normalised once, as a whole, and
every span is an offset into that text.
"""

from __future__ import annotations

import re
from typing import Any

from engine.ingest.model import ParsedDocument
from engine.ingest.normalize import DocumentBuilder, line_spans, normalize

MAX_CHARS = 1500

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
# Lists that may interrupt a paragraph (CommonMark): bullets, and ordered lists starting at 1.
_LIST_INTERRUPT = re.compile(r"^ {0,3}(?:[-*+]|1[.)])[ \t]+\S")
# A sentence ends at . ! ? (and CJK / ellipsis forms), optionally followed by closing quotes
# or brackets, and then whitespace.
_SENTENCE_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f][\"'\u201d\u2019)\]]*(?=\s)")


# --- splitting oversized blocks -------------------------------------------------------------


def _last_space(text: str, lo: int, hi: int) -> int | None:
    """Largest i in [lo, hi] with text[i] whitespace, or None."""
    for i in range(min(hi, len(text) - 1), lo - 1, -1):
        if text[i].isspace():
            return i
    return None


def _cut(text: str, pos: int, max_chars: int, by_lines: bool) -> int:
    """Where to end the piece that starts at pos: an index in (pos, pos + max_chars]."""
    limit = pos + max_chars
    min_fill = pos + max(1, max_chars // 4)
    if by_lines:
        nl = text.rfind("\n", pos + 1, limit + 1)
        if nl > pos:
            return nl
    best = None
    for match in _SENTENCE_END.finditer(text, pos, limit + 1):
        if match.end() <= limit:
            best = match.end()
    if best is not None and best >= min_fill:
        return best
    space = _last_space(text, pos + 1, limit)
    if space is not None:
        return space
    # The word that starts at pos is longer than max_chars: the one place we cut a word.
    return limit


def split_span(
    text: str, start: int, end: int, max_chars: int = MAX_CHARS, *, by_lines: bool = False
) -> list[tuple[int, int]]:
    """[start, end) as stripped spans of at most max_chars characters each, cut at sentence
    ends (or line ends when by_lines), else at whitespace, never inside a word unless the word
    alone exceeds max_chars. The pieces cover every non-whitespace character, in order."""
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    pieces: list[tuple[int, int]] = []
    pos = start
    while True:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos >= end:
            return pieces
        if end - pos <= max_chars:
            cut = end
        else:
            # end - pos > max_chars, so every index _cut looks at is below end.
            cut = _cut(text, pos, max_chars, by_lines)
        piece_end = cut
        while text[piece_end - 1].isspace():
            piece_end -= 1
        pieces.append((pos, piece_end))
        pos = cut


# --- blocks ---------------------------------------------------------------------------------


def _blank(text: str, span: tuple[int, int]) -> bool:
    return text[span[0] : span[1]].strip() == ""


def _markdown_blocks(text: str) -> list[dict[str, Any]]:
    """Line-level block structure: dicts {kind, first, last (line indexes, inclusive), ...}
    with kind heading | paragraph | code | list."""
    spans = line_spans(text)
    lines = [text[s:e] for s, e in spans]
    n = len(lines)
    blank = [not line.strip() for line in lines]
    blocks: list[dict[str, Any]] = []
    i = 0
    if n and lines[0].rstrip() == "---":  # YAML front matter
        close = next((j for j in range(1, min(n, 200)) if lines[j].rstrip() in ("---", "...")), None)
        if close is not None:
            blocks.append({"kind": "paragraph", "first": 0, "last": close, "front_matter": True})
            i = close + 1
    while i < n:
        line = lines[i]
        if blank[i]:
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence and not (fence.group(2)[0] == "`" and "`" in fence.group(3)):
            char, size = fence.group(2)[0], len(fence.group(2))
            closing = re.compile(r"^ {0,3}" + re.escape(char) + "{" + str(size) + r",}[ \t]*$")
            j = i + 1
            while j < n and not closing.match(lines[j]):
                j += 1
            last = min(j, n - 1)
            info = fence.group(3).strip()
            blocks.append({"kind": "code", "first": i, "last": last, "info": info})
            i = last + 1
            continue
        heading = _ATX.match(line)
        if heading:
            blocks.append(
                {"kind": "heading", "first": i, "last": i, "level": len(heading.group(1)),
                 "title": (heading.group(2) or "").strip()}
            )
            i += 1
            continue
        if _LIST_ITEM.match(line):
            j = i + 1
            while j < n:
                if blank[j]:
                    k = j
                    while k < n and blank[k]:
                        k += 1
                    if k < n and (_LIST_ITEM.match(lines[k]) or lines[k][:1] in (" ", "\t")):
                        j = k
                        continue
                    break
                if _ATX.match(lines[j]) or (_FENCE.match(lines[j]) and not lines[j][:1].isspace()):
                    break
                j += 1
            blocks.append({"kind": "list", "first": i, "last": j - 1})
            i = j
            continue
        j = i + 1
        level = None
        while j < n:
            nxt = lines[j]
            if blank[j] or _ATX.match(nxt) or _FENCE.match(nxt) or _LIST_INTERRUPT.match(nxt):
                break
            setext = _SETEXT.match(nxt)
            if setext:
                level = 1 if setext.group(1)[0] == "=" else 2
                j += 1
                break
            j += 1
        if level is not None:
            title = " ".join(" ".join(lines[i : j - 1]).split())
            blocks.append({"kind": "heading", "first": i, "last": j - 1, "level": level, "title": title})
        else:
            blocks.append({"kind": "paragraph", "first": i, "last": j - 1})
        i = j
    for block in blocks:
        block["start"] = spans[block["first"]][0]
        block["end"] = spans[block["last"]][1]
    return blocks


def _text_blocks(text: str) -> list[dict[str, Any]]:
    """Plain text: runs of non-blank lines."""
    spans = line_spans(text)
    blocks = []
    current: list[tuple[int, int]] = []
    for span in spans + [(len(text), len(text))]:
        if _blank(text, span):
            if current:
                blocks.append({"kind": "paragraph", "start": current[0][0], "end": current[-1][1]})
            current = []
        else:
            current.append(span)
    return blocks


def _emit(
    builder: DocumentBuilder,
    text: str,
    block: dict[str, Any],
    kind: str,
    meta: dict[str, Any],
    max_chars: int,
    by_lines: bool,
) -> None:
    pieces = split_span(text, block["start"], block["end"], max_chars, by_lines=by_lines)
    if len(pieces) == 1:
        builder.add_chunk(*pieces[0], kind, meta=meta)
        return
    block_kind = meta.get("block", kind)
    for k, (s, e) in enumerate(pieces):
        split_meta = {**meta, "block": block_kind, "part": k + 1, "parts": len(pieces)}
        builder.add_chunk(s, e, "split", meta=split_meta)


def parse_markdown(text: str, *, name: str, max_chars: int = MAX_CHARS) -> list[ParsedDocument]:
    """Markdown text -> one document (none if the file holds only whitespace)."""
    text = normalize(text)
    builder = DocumentBuilder()
    builder.add(text, normalized=True)
    path: list[tuple[int, str]] = []
    title = None
    for block in _markdown_blocks(text):
        if block["kind"] == "heading":
            while path and path[-1][0] >= block["level"]:
                path.pop()
            path.append((block["level"], block["title"]))
            if title is None and block["title"]:
                title = block["title"]
            meta = {"level": block["level"], "heading_path": [t for _, t in path]}
            _emit(builder, text, block, "heading", meta, max_chars, by_lines=False)
            continue
        meta = {"heading_path": [t for _, t in path]}
        if block["kind"] != "paragraph":
            meta["block"] = block["kind"]
        if block["kind"] == "code" and block["info"]:
            meta["info"] = block["info"]
        if block.get("front_matter"):
            meta["block"] = "front_matter"
        by_lines = block["kind"] in ("code", "list") or bool(block.get("front_matter"))
        _emit(builder, text, block, "paragraph", meta, max_chars, by_lines)
    if not builder.chunks:
        return []
    return [builder.build(source_type="markdown", trust="external", title=title or name)]


def parse_text(text: str, *, name: str, max_chars: int = MAX_CHARS) -> list[ParsedDocument]:
    """Plain text -> one document of blank-line-separated paragraphs (none if blank)."""
    text = normalize(text)
    builder = DocumentBuilder()
    builder.add(text, normalized=True)
    for block in _text_blocks(text):
        _emit(builder, text, block, "paragraph", {}, max_chars, by_lines=False)
    if not builder.chunks:
        return []
    return [builder.build(source_type="text", trust="external", title=name)]
