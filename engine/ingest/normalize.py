"""Normalisation: the one place that decides what an ingested document's characters are.

Normalisation happens ONCE. Every importer normalises each piece of source text with
normalize() and builds the document text from normalised pieces through DocumentBuilder,
which records chunk offsets as it appends, so `doc.text[c.start:c.end]` is the chunk text by
construction. Nothing here collapses whitespace: spans must stay stable.

Why concatenation stays normalised: every separator an importer inserts is ASCII and ends
in a space, a newline, ":" or "[" (never a letter, "<", "=" or ">", the only ASCII characters
that start a canonical composition), so no composition or reordering can cross a junction.
DocumentBuilder.build() checks this anyway.

Also here: byte decoding with a binary check, and timestamp normalisation to ISO-8601 UTC.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from pathlib import Path
from typing import Any

from engine.errors import BadInput
from engine.extract.secrets import scrub
from engine.ingest.limits import check_file_size
from engine.ingest.model import ParsedChunk, ParsedDocument

# C0 controls except \t (0x09) and \n (0x0a); \r is turned into \n before this runs.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def normalize(text: str) -> str:
    """The canonical form of ingested text. Idempotent: normalize(normalize(t)) == normalize(t).

    \\r\\n and \\r become \\n; C0 control characters other than \\n and \\t are dropped; leading
    BOMs are stripped; the result is Unicode NFC. Lone surrogates (which JSON "\\ud83d"
    escapes can produce and which no database can store as UTF-8) become U+FFFD. Secrets
    (API keys, tokens, passwords, private keys, card numbers) become typed markers such as
    `[secret:api_key]` here, before any span, chunk, embedding or FTS row exists, so no stored
    text can hold one.
    """
    return scrub(_normalize_chars(text))[0]


def _normalize_chars(text: str) -> str:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    if text.isascii():
        return text
    if _SURROGATE.search(text):
        # Adjacent high+low halves re-pair into one code point; the rest become U+FFFD.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    # Controls are dropped before the BOM strip and NFC so that neither can expose a new
    # BOM or a new composable pair on a second pass.
    text = text.lstrip("\ufeff")
    return unicodedata.normalize("NFC", text)


def label(value: Any) -> str:
    """A one-line display label (speaker, role, header value): normalised, whitespace runs
    collapsed. Labels are text WE write into the document, not source spans, so collapsing
    is fine here (and only here)."""
    if value is None:
        return ""
    return " ".join(normalize(str(value)).split())


# --- bytes -> text -------------------------------------------------------------------------


def read_file_bytes(path: Path | str, *, directory_hint: str = "") -> bytes:
    """The bytes of one input file, or BadInput with a one-line reason (missing, a directory,
    unreadable). Importers and benchmark loaders both read their inputs through here."""
    p = Path(path)
    name = str(path)
    if not p.exists():
        raise BadInput(f"{name}: no such file")
    if p.is_dir():
        raise BadInput(f"{name}: is a directory{directory_hint}")
    try:
        check_file_size(p.stat().st_size, name)
        return p.read_bytes()
    except OSError as exc:
        raise BadInput(f"{name}: cannot read: {exc.strerror or exc}") from None


_MAGIC = (
    (b"%PDF-", "a PDF document"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"PK\x03\x04", "a zip archive (or docx/xlsx/jar)"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\x7fELF", "an ELF executable"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
)
_UTF16_32_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: FF FE 00 00 starts with FF FE
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Bytes that never appear in text: C0 controls other than \t \n \v \f \r and ESC (ANSI colour
# codes in logs), plus DEL.
_CONTROL_BYTES = frozenset(set(range(0x20)) - {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1B}) | {0x7F}
_SAMPLE = 8000  # git's heuristic looks at the same prefix
_MAX_CONTROL_RATIO = 0.10


def binary_reason(raw: bytes) -> str | None:
    """Why `raw` looks binary ("contains NUL bytes", ...), or None if it may be text."""
    if raw.startswith(tuple(bom for bom, _ in _UTF16_32_BOMS)):
        return None  # UTF-16/32 text is full of NULs; decode() checks it after decoding
    for magic, what in _MAGIC:
        if raw.startswith(magic):
            return f"looks like {what}"
    sample = raw[:_SAMPLE]
    if b"\x00" in sample:
        return "contains NUL bytes"
    if sample:
        controls = sum(1 for b in sample if b in _CONTROL_BYTES)
        if controls / len(sample) > _MAX_CONTROL_RATIO:
            return f"{controls / len(sample):.0%} control bytes"
    return None


def check_not_binary(raw: bytes, name: str) -> None:
    reason = binary_reason(raw)
    if reason is not None:
        raise BadInput(f"{name}: binary file: {reason}")


def decode(raw: bytes, name: str = "input") -> str:
    """Bytes -> str: UTF-8 (BOM optional), or UTF-16/32 with a BOM. Not normalised.

    Raises BadInput "<name>: binary file: ..." or "<name>: not text: ...".
    """
    for bom, codec in _UTF16_32_BOMS:
        if raw.startswith(bom):
            try:
                text = raw.decode(codec)  # the codec consumes the BOM
            except UnicodeDecodeError as exc:
                raise BadInput(
                    f"{name}: not text: invalid {codec.upper()} at byte {exc.start}"
                ) from None
            sample = text[:_SAMPLE]
            if "\x00" in sample or (
                sample and sum(1 for ch in sample if ord(ch) in _CONTROL_BYTES) / len(sample)
                > _MAX_CONTROL_RATIO
            ):
                raise BadInput(f"{name}: binary file: control characters in {codec.upper()} text")
            return text
    check_not_binary(raw, name)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{name}: not text: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start}) and no UTF-16 byte-order mark; convert it to UTF-8"
        ) from None


# --- building a document from normalised pieces ----------------------------------------------


def strip_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """[start, end) shrunk past whitespace at both ends; None if nothing is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line, end excluding the "\\n". Splits on "\\n" only, unlike
    str.splitlines(), which also breaks at U+2028, \\x1c, ... and would shift offsets."""
    spans = []
    start = 0
    while True:
        nl = text.find("\n", start)
        if nl < 0:
            spans.append((start, len(text)))
            return spans
        spans.append((start, nl))
        start = nl + 1


class DocumentBuilder:
    """Appends normalised pieces and records chunk spans as it goes."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self._chunks: list[ParsedChunk] = []

    def __len__(self) -> int:
        return self._length

    def add(self, piece: str, *, normalized: bool = False) -> tuple[int, int]:
        """Append `piece` (normalised here unless the caller already did) -> its span.

        Secrets are scrubbed per piece, so a turn's line goes in as ONE piece: "password" and
        "hunter2xyz9" each pass the scrubber, "password: hunter2xyz9" does not. Pieces that
        were normalised apart and joined ("<speaker>: " + text) could store what the scrubber
        would have redacted."""
        if not normalized:
            piece = normalize(piece)
        start = self._length
        if piece:
            self._parts.append(piece)
            self._length += len(piece)
        return start, self._length

    def add_chunk(self, start: int, end: int, kind: str, **fields: Any) -> ParsedChunk:
        """Record a chunk over [start, end); build() strips whitespace off its span."""
        chunk = ParsedChunk(start=start, end=end, kind=kind, **fields)
        self._chunks.append(chunk)
        return chunk

    @property
    def chunks(self) -> list[ParsedChunk]:
        return self._chunks

    def build(self, **fields: Any) -> ParsedDocument:
        """The document; chunk spans stripped, chunks that are only whitespace dropped."""
        text = "".join(self._parts)
        if not unicodedata.is_normalized("NFC", text):  # pragma: no cover - see module doc
            raise RuntimeError("document text is not NFC after concatenation (importer bug)")
        kept = []
        for chunk in self._chunks:
            span = strip_span(text, chunk.start, chunk.end)
            if span is None:
                continue
            chunk.start, chunk.end = span
            kept.append(chunk)
        return ParsedDocument(text=text, chunks=kept, **fields)
