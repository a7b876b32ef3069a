"""Which importer reads a file, and the one entry point the pipeline calls.

parse_path / parse_bytes pick the format from the extension and the content (or take the
one asked for), run the importer and stamp every document with the file's uri. Every
refusal is an engine.errors.BadInput (UnknownFormat for "no importer fits") whose message is
one line starting with the file name. Nothing here writes anywhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path, PurePath
from typing import Any

from engine.errors import BadInput, UnknownFormat
from engine.ingest.formats import chat, locomo, longmemeval
from engine.ingest.formats.code import FILENAMES, LANGUAGES, language_for, parse_code
from engine.ingest.formats.email import is_mbox, parse_eml, parse_mbox
from engine.ingest.formats.text import parse_markdown, parse_text
from engine.ingest.model import FORMATS, ParsedDocument
from engine.ingest.normalize import binary_reason, decode, read_file_bytes

MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mkdn"})
JSON_EXTENSIONS = frozenset({".json", ".jsonl", ".ndjson"})
EMAIL_EXTENSIONS = frozenset({".eml", ".mbox", ".mbx"})
SKIP_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache"})

_JSON_PARSERS: dict[str, Callable[..., list[ParsedDocument]]] = {
    "chat": chat.parse_json,
    "locomo": locomo.parse_json,
    "longmemeval": longmemeval.parse_json,
}


# --- JSON -----------------------------------------------------------------------------------


def _load_json(text: str, name: str, jsonl: bool) -> Any:
    if not jsonl:
        return chat.load_json(text, name)
    items = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise BadInput(f"{name}: malformed JSON at line {lineno}:{exc.colno}: {exc.msg}") from None
    return items


def _describe(data: Any) -> str:
    if isinstance(data, dict):
        keys = ", ".join(sorted(map(str, data))[:6]) or "no keys"
        return f"an object with keys {keys}"
    if isinstance(data, list):
        if not data:
            return "an empty list"
        first = data[0]
        if isinstance(first, dict):
            keys = ", ".join(sorted(map(str, first))[:6]) or "no keys"
            return f"a list of objects with keys {keys}"
        return f"a list of {type(first).__name__}"
    return f"a JSON {type(data).__name__}"


UPDATES_NAME = "memlens-updates"  # the "dataset" field of memlens's own update benchmark


def sniff_json(data: Any) -> str | None:
    """"locomo" | "longmemeval" | "convomem" | "updates" | "chat" for a loaded JSON value, or None:
    the one reading of a JSON value's shape, for ingestion and for the benchmark loaders (which
    then check the structure itself and say what is wrong)."""
    if isinstance(data, dict) and (isinstance(data.get("evidence_items"), list)
                                   or isinstance(data.get("evidenceItems"), list)):
        return "convomem"
    if isinstance(data, dict) and data.get("dataset") == UPDATES_NAME:
        return "updates"
    item = data
    if isinstance(data, list):
        if not data or not isinstance(data[0], dict):
            return None
        item = data[0]
    if not isinstance(item, dict):
        return None
    if "conversation" in item and ("qa" in item or "sample_id" in item):
        return "locomo"
    if locomo.is_realtalk(item):  # REALTALK chats: LoCoMo's family, read by its importer
        return "locomo"
    if "haystack_sessions" in item:
        return "longmemeval"
    if "message_evidences" in item and "conversations" in item:
        return "convomem"
    if isinstance(item.get("messages"), list):
        return "chat"
    if isinstance(data, list) and ("role" in item or "content" in item):
        return "chat"
    return None


def _parse_json(raw: bytes, name: str, fmt: str, jsonl: bool) -> list[ParsedDocument]:
    data = _load_json(decode(raw, name), name, jsonl)
    if fmt == "auto":
        if isinstance(data, list) and not data:
            raise BadInput(f"{name}: empty JSON list: nothing to ingest")
        sniffed = sniff_json(data)
        if sniffed in ("convomem", "updates"):
            what = "a ConvoMem" if sniffed == "convomem" else "memlens's updates"
            raise UnknownFormat(f"{name}: {what} benchmark file, not a source to ingest: run it with memlens bench")
        if sniffed is None:
            raise UnknownFormat(
                f"{name}: JSON of an unknown shape ({_describe(data)}); expected chat messages, "
                "LoCoMo or LongMemEval"
            )
        fmt = sniffed
    return _JSON_PARSERS[fmt](data, name=name)


# --- dispatch -------------------------------------------------------------------------------


def detect_format(raw: bytes, name: str) -> str:
    """The importer for a file from its name and first bytes. JSON files say "json" here; the
    JSON importers are told apart by structure in _parse_json."""
    path = PurePath(name)
    suffix = path.suffix.lower()
    if suffix in JSON_EXTENSIONS:
        return "json"
    if suffix in EMAIL_EXTENSIONS:
        return "email"
    if path.name.lower() in FILENAMES or suffix in LANGUAGES:
        return "code"
    if suffix in MARKDOWN_EXTENSIONS:
        return "markdown"
    if is_mbox(raw):
        return "email"
    if not suffix and raw.lstrip()[:1] in (b"{", b"["):
        return "json"
    return "text"


def _run(raw: bytes, name: str, fmt: str) -> list[ParsedDocument]:
    suffix = PurePath(name).suffix.lower()
    jsonl = suffix in (".jsonl", ".ndjson")
    if fmt == "auto":
        fmt = detect_format(raw, name)
        if fmt == "json":
            try:
                return _parse_json(raw, name, "auto", jsonl)
            except BadInput:
                if suffix:  # a .json file that is not usable JSON is an error...
                    raise
                return _run_text(raw, name, "text")  # ...an extension-less one is just text
    if fmt in _JSON_PARSERS:
        return _parse_json(raw, name, fmt, jsonl)
    if fmt == "email":
        if suffix in (".mbox", ".mbx") or raw.startswith(b"From "):
            return parse_mbox(raw, name=name)
        return parse_eml(raw, name=name)
    return _run_text(raw, name, fmt)


def _run_text(raw: bytes, name: str, fmt: str) -> list[ParsedDocument]:
    text = decode(raw, name)
    if fmt == "markdown":
        return parse_markdown(text, name=PurePath(name).name)
    if fmt == "code":
        return parse_code(text, name=name, language=language_for(name))
    return parse_text(text, name=PurePath(name).name)


def parse_bytes(
    raw: bytes, *, name: str, fmt: str = "auto", uri: str | None = None
) -> list[ParsedDocument]:
    """A file's bytes -> its documents. `name` (a path or file name) drives detection and
    starts every error message; `uri` (default: name) is stamped on every document."""
    if fmt != "auto" and fmt not in FORMATS:
        raise UnknownFormat(f"{name}: unknown format {fmt!r}; choose auto or one of {', '.join(FORMATS)}")
    if not raw.strip():
        raise BadInput(f"{name}: empty file" if not raw else f"{name}: empty file (only whitespace)")
    reason = binary_reason(raw)
    if reason is not None:
        raise BadInput(f"{name}: binary file: {reason}")
    try:
        docs = _run(raw, name, fmt)
    except BadInput as exc:
        message = " ".join(str(exc).split())  # one line, always
        detail = message[len(name) + 2 :] if message.startswith(f"{name}: ") else message
        if fmt != "auto" and (isinstance(exc, UnknownFormat) or "malformed JSON" in detail):
            raise UnknownFormat(f"{name}: --format {fmt} cannot read this file: {detail}") from None
        raise type(exc)(f"{name}: {detail}") from None
    if not docs:
        raise BadInput(f"{name}: nothing to ingest: no non-empty content")
    uri = uri if uri is not None else name
    for i, doc in enumerate(docs):
        doc.uri = uri
        if doc.external_id is None:
            doc.external_id = uri if len(docs) == 1 else f"{uri}#{i}"
    return docs


def parse_path(path: Path | str, fmt: str = "auto") -> list[ParsedDocument]:
    """Read and parse one file. Directories are refused: expand them with iter_source_files."""
    path = Path(path)
    raw = read_file_bytes(path, directory_hint="; give the files in it (see iter_source_files)")
    return parse_bytes(raw, name=str(path), fmt=fmt, uri=str(path.resolve()))


def walk_sources(path: Path | str) -> Iterator[tuple[Path, str | None]]:
    """Every entry under the directory `path` in a stable (sorted) order, each with the reason it
    is skipped (hidden, a VCS/cache/venv directory, a binary file, unreadable) or None for a file
    to parse. A skipped directory is one entry; its contents are not listed."""
    for root, dirs, files in os.walk(path):
        kept = []
        for d in sorted(dirs):
            if d.startswith("."):
                yield Path(root, d), "hidden directory"
            elif d in SKIP_DIRS:
                yield Path(root, d), "tool or cache directory"
            else:
                kept.append(d)
        dirs[:] = kept
        for filename in sorted(files):
            file = Path(root, filename)
            if filename.startswith("."):
                yield file, "hidden file"
                continue
            try:
                with file.open("rb") as handle:
                    head = handle.read(8192)
            except OSError as exc:
                yield file, f"cannot read: {exc.strerror or exc}"
                continue
            reason = binary_reason(head) if head else None
            yield file, (f"binary file: {reason}" if reason else None)


def iter_source_files(path: Path | str) -> Iterator[Path]:
    """`path` itself if it is a file; else the files under it that walk_sources does not skip."""
    path = Path(path)
    if not path.is_dir():
        yield path
        return
    for file, skip in walk_sources(path):
        if skip is None:
            yield file
