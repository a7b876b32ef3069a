"""Source code: one document per file, chunked by structure.

Python is parsed with `ast`: each top-level function or class is one "code_symbol" chunk
from its leading comment lines and decorators to its last line; the module-level code
between symbols is cut into blank-line-separated blocks. A file that does not parse falls
back to blocks. Other languages are blank-line blocks. Consecutive small blocks are merged up
to max_chars ("paragraph"), and anything larger (a block or a symbol) is cut at line ends
into "split" chunks that keep the symbol's meta.

Every chunk's meta has "line_start"/"line_end" (1-based, inclusive) for the UI.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import PurePath
from typing import Any

from engine.ingest.formats.text import MAX_CHARS, split_span
from engine.ingest.model import ParsedDocument
from engine.ingest.normalize import DocumentBuilder, line_spans, normalize, strip_span

LANGUAGES = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".kts": "kotlin",
    ".scala": "scala", ".swift": "swift", ".dart": "dart",
    ".c": "c", ".h": "c", ".cpp": "cpp", ".cc": "cpp", ".cxx": "cpp", ".hpp": "cpp",
    ".hh": "cpp", ".hxx": "cpp", ".cs": "csharp", ".m": "objective-c", ".mm": "objective-c",
    ".rb": "ruby", ".php": "php", ".pl": "perl", ".pm": "perl", ".lua": "lua", ".r": "r",
    ".jl": "julia", ".hs": "haskell", ".ml": "ocaml", ".ex": "elixir", ".exs": "elixir",
    ".erl": "erlang", ".clj": "clojure", ".el": "elisp", ".zig": "zig", ".nim": "nim",
    ".sh": "shell", ".bash": "shell", ".zsh": "shell", ".fish": "shell", ".ps1": "powershell",
    ".bat": "batch", ".cmd": "batch", ".sql": "sql", ".proto": "protobuf",
    ".css": "css", ".scss": "css", ".less": "css", ".vue": "vue", ".svelte": "svelte",
    ".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".ini": "ini", ".cfg": "ini",
    ".gradle": "groovy", ".groovy": "groovy", ".tf": "terraform", ".nix": "nix",
    ".cmake": "cmake", ".mk": "make",
}
FILENAMES = {
    "makefile": "make", "gnumakefile": "make", "dockerfile": "dockerfile",
    "cmakelists.txt": "cmake", "rakefile": "ruby", "gemfile": "ruby", "justfile": "make",
}


def language_for(name: str) -> str | None:
    """The language of a file name by extension (or well-known name), or None."""
    path = PurePath(name)
    return FILENAMES.get(path.name.lower()) or LANGUAGES.get(path.suffix.lower())


class _Lines:
    def __init__(self, text: str) -> None:
        self.text = text
        self.spans = line_spans(text)

    def blank(self, i: int) -> bool:
        s, e = self.spans[i]
        return not self.text[s:e].strip()

    def line(self, i: int) -> str:
        s, e = self.spans[i]
        return self.text[s:e]

    def span(self, first: int, last: int) -> tuple[int, int]:
        return self.spans[first][0], self.spans[last][1]

    def line_of(self, offset: int) -> int:
        """0-based line index of a character offset (binary search)."""
        lo, hi = 0, len(self.spans) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.spans[mid][0] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo


def _blocks(lines: _Lines, first: int, last: int) -> list[tuple[int, int]]:
    """Blank-line-separated blocks of lines first..last (inclusive) as (first, last) pairs."""
    blocks = []
    start = None
    for i in range(first, last + 1):
        if lines.blank(i):
            if start is not None:
                blocks.append((start, i - 1))
            start = None
        elif start is None:
            start = i
    if start is not None:
        blocks.append((start, last))
    return blocks


def _add(builder: DocumentBuilder, lines: _Lines, start: int, end: int, kind: str,
         meta: dict[str, Any], max_chars: int) -> None:
    """One chunk over [start, end), or "split" chunks cut at line ends if it is too long."""
    span = strip_span(lines.text, start, end)
    if span is None:
        return
    pieces = [span] if span[1] - span[0] <= max_chars else split_span(
        lines.text, span[0], span[1], max_chars, by_lines=True
    )
    for k, (s, e) in enumerate(pieces):
        piece_meta = {**meta, "line_start": lines.line_of(s) + 1, "line_end": lines.line_of(e - 1) + 1}
        if len(pieces) > 1:
            piece_meta.update(part=k + 1, parts=len(pieces), block=kind)
        builder.add_chunk(s, e, kind if len(pieces) == 1 else "split", meta=piece_meta)


def _add_blocks(builder: DocumentBuilder, lines: _Lines, first: int, last: int,
                max_chars: int) -> None:
    """Module-level code: blank-line blocks, consecutive ones merged up to max_chars."""
    group: tuple[int, int] | None = None
    for block in _blocks(lines, first, last):
        if group is not None:
            start, _ = lines.span(group[0], group[1])
            _, end = lines.span(block[0], block[1])
            if end - start <= max_chars:
                group = (group[0], block[1])
                continue
            _add(builder, lines, *lines.span(*group), "paragraph", {}, max_chars)
        group = block
    if group is not None:
        _add(builder, lines, *lines.span(*group), "paragraph", {}, max_chars)


def _python_symbols(text: str) -> tuple[list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef], str | None]:
    """Top-level defs and classes, or ([], reason) if the file does not parse."""
    try:
        with warnings.catch_warnings():
            # Invalid escape sequences etc. warn at parse time; the file is data here.
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except SyntaxError as exc:
        return [], f"line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return [], f"{type(exc).__name__}: {exc}"
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [node for node in tree.body if isinstance(node, kinds)], None


def _parse_python(builder: DocumentBuilder, lines: _Lines, max_chars: int) -> dict[str, Any]:
    symbols, error = _python_symbols(lines.text)
    if error is not None:
        _add_blocks(builder, lines, 0, len(lines.spans) - 1, max_chars)
        return {"syntax_error": error}
    done = -1  # last line index already chunked
    for node in symbols:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        last = (node.end_lineno or node.lineno) - 1
        while first - 1 > done and lines.line(first - 1).lstrip().startswith("#") and not (
            first - 1 == 0 and lines.line(0).startswith("#!")
        ):
            first -= 1
        if first > done + 1:
            _add_blocks(builder, lines, done + 1, first - 1, max_chars)
        symbol_kind = "class" if isinstance(node, ast.ClassDef) else "function"
        meta = {"symbol": node.name, "symbol_kind": symbol_kind, "lineno": node.lineno}
        _add(builder, lines, *lines.span(first, last), "code_symbol", meta, max_chars)
        done = last
    if done + 1 <= len(lines.spans) - 1:
        _add_blocks(builder, lines, done + 1, len(lines.spans) - 1, max_chars)
    return {"symbols": len(symbols)}


def parse_code(
    text: str, *, name: str, language: str | None = None, max_chars: int = MAX_CHARS
) -> list[ParsedDocument]:
    """Source text -> one document (none if the file holds only whitespace)."""
    text = normalize(text)
    language = language or language_for(name) or "text"
    builder = DocumentBuilder()
    builder.add(text, normalized=True)
    lines = _Lines(text)
    meta: dict[str, Any] = {"language": language}
    if language == "python":
        meta.update(_parse_python(builder, lines, max_chars))
    else:
        _add_blocks(builder, lines, 0, len(lines.spans) - 1, max_chars)
    if not builder.chunks:
        return []
    return [builder.build(source_type="code", trust="external", title=PurePath(name).name, meta=meta)]
