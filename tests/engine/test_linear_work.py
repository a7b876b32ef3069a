"""Work grows linearly with the input: every ingestion step, counted, not timed.

Timing assertions would fail on a busy machine and pass on a fast one; instead each case counts,
for an input and for one four times larger, the Python lines the engine executes (sys.settrace,
engine/ files only) and the database pages its connections touch (SQLite's cache hits and
misses: work done in C, such as reading a document's text again and again). Linear (or n log n)
work gives ratios near 4; the quadratic steps this guards against (an overlap test against every
earlier entity mention, every extraction window reading its whole document and all its chunks,
every confirmation of a fact collecting all its earlier sources) gave 8 to 15 and more.
Wall-clock figures come from `python -m tests.perf.big_turn`.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import apsw
import pytest

from engine.embed.hashing import HashingEmbedder
from engine.memory import MemoryEngine
from engine.names import find_mentions
from engine.scope import Scope
from engine.store.db import Database

ENGINE = str(Path(__file__).resolve().parents[2] / "engine")
SCOPE = Scope.default("ana", "bot")
LINEAR = 6.0  # the largest ratio accepted for 4x the input (4 = linear; quadratic is ~16)


def work(fn, *args) -> tuple[int, int]:
    """(lines of engine code, database pages touched) while fn(*args) runs."""
    count = pages = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(ENGINE) else None

    def close(db: Database) -> None:
        nonlocal pages
        for conn in list(db._all):
            with contextlib.suppress(apsw.Error):
                pages += sum(conn.status(op)[0] for op in (apsw.SQLITE_DBSTATUS_CACHE_HIT,
                                                          apsw.SQLITE_DBSTATUS_CACHE_MISS))
        real_close(db)

    real_close = Database.close
    Database.close = close
    sys.settrace(tracer)
    try:
        fn(*args)
    finally:
        sys.settrace(None)
        Database.close = real_close
    return count, pages


def ratio(make, run, n: int, *, pages: bool = True) -> float:
    """The larger of the two growth ratios (lines, pages) from n to 4n."""
    (lines_n, pages_n), (lines_4n, pages_4n) = work(run, make(n)), work(run, make(4 * n))
    return max(lines_4n / lines_n, pages_4n / pages_n if pages else 0.0)


def names_text(n: int) -> str:
    people = ["Ana Lima", "Bob", "Carol Smith", "Dr. Rui Costa", "New York", "Lisbon", "ana@example.com", "@rui_c"]
    return " ".join(f"Then {people[i % len(people)]} met us near the river {i}." for i in range(n))


def test_entity_mentions_are_linear_in_the_text():
    assert ratio(names_text, find_mentions, 300, pages=False) < LINEAR


def test_one_long_turn_is_linear(tmp_path):
    """A single huge memory_add: normalise, chunk, mentions, embed, write, extract."""
    counter = iter(range(10))

    def add(text: str) -> None:
        with MemoryEngine(tmp_path / f"turn{next(counter)}.db", embedder=HashingEmbedder(), llm=None) as engine:
            engine.add_turns([{"role": "user", "content": text}], scope=SCOPE, extract="heuristic")

    def make(n: int) -> str:
        return names_text(n) + " I live in Porto and I love hiking. " * (n // 10)

    assert ratio(make, add, 500) < LINEAR


def test_a_repeated_fact_is_linear_in_the_repetitions(tmp_path):
    """Extraction over many turns repeating one fact (each window confirms it again)."""
    counter = iter(range(10))

    def make(n: int) -> Path:
        path = tmp_path / f"repeat{n}.json"
        msgs = [{"role": "user", "content": "My favourite colour is blue."} if i % 2 == 0 else
                {"role": "assistant", "content": "Noted."} for i in range(n)]
        path.write_text(json.dumps({"messages": msgs}), encoding="utf-8")
        return path

    def ingest(path: Path) -> None:
        with MemoryEngine(tmp_path / f"r{next(counter)}.db", embedder=HashingEmbedder(), llm=None) as engine:
            report = engine.ingest_paths([path], scope=SCOPE, extract="heuristic")
            assert report.extraction["facts_reinforced"] > 0

    assert ratio(make, ingest, 80) < LINEAR


@pytest.mark.parametrize("kind", ["text", "markdown"])
def test_a_long_file_is_linear(tmp_path, kind):
    counter = iter(range(10))

    def make(n: int) -> Path:
        path = tmp_path / f"long{n}.{'md' if kind == 'markdown' else 'txt'}"
        paragraphs = [f"{'## Part ' + str(i) + chr(10) + chr(10) if kind == 'markdown' and i % 5 == 0 else ''}"
                      f"Paragraph {i}: Ana Lima wrote to Bob about Lisbon. I work as a nurse in Porto."
                      for i in range(n)]
        path.write_text("\n\n".join(paragraphs), encoding="utf-8")
        return path

    def ingest(path: Path) -> None:
        with MemoryEngine(tmp_path / f"f{next(counter)}.db", embedder=HashingEmbedder(), llm=None) as engine:
            engine.ingest_paths([path], scope=SCOPE, extract="heuristic")

    assert ratio(make, ingest, 60) < LINEAR


def test_extraction_and_show_read_each_document_once(tmp_path, monkeypatch):
    """Reading a document means reading all its text: once per extraction window (10 MB of text
    made 3,600 windows and 36 GB copied) or once per source of a fact is quadratic in C, where
    line counts do not see it and page counts hardly do at test sizes. Count the reads."""
    from engine.store.store import Store

    reads: list[int] = []
    real = Store.document
    monkeypatch.setattr(Store, "document", lambda self, scope, doc_id: reads.append(doc_id) or real(self, scope, doc_id))
    path = tmp_path / "long.json"
    path.write_text(json.dumps([{"role": "user", "content": f"My favourite colour is blue. ({i})"}
                                for i in range(200)]), encoding="utf-8")
    with MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(), llm=None) as engine:
        report = engine.ingest_paths([path], scope=SCOPE, extract="heuristic")
        assert report.extraction["windows"] >= 20 and report.extraction["facts_reinforced"] >= 100
        assert len(reads) == 1, f"{len(reads)} reads of one document"
        [fact] = engine.facts(SCOPE)
        reads.clear()
        shown = engine.show("fact", fact["id"], scope=SCOPE)
        assert len(shown["evidence"]) > 100 and len(reads) == 1
