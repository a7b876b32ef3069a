"""Work grows linearly with the input: every ingestion step, counted, not timed.

Timing assertions would fail on a busy machine and pass on a fast one; instead each case counts
the Python lines the engine executes (sys.settrace, engine/ files only) for an input and for
one four times larger. Linear (or n log n) work gives a ratio near 4; the quadratic steps this
guards against (an overlap test against every earlier entity mention, every extraction window
reading its whole document, every confirmation of a fact collecting all its earlier sources)
gave 10 to 16 and more. Wall-clock figures come from `python -m tests.perf.big_turn`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from engine.embed.hashing import HashingEmbedder
from engine.ingest.entities import find_mentions
from engine.memory import MemoryEngine
from engine.scope import Scope

ENGINE = str(Path(__file__).resolve().parents[2] / "engine")
SCOPE = Scope.default("ana", "bot")
LINEAR = 6.0  # the largest ratio accepted for 4x the input (4 = linear; quadratic is ~16)


def lines_run(fn, *args) -> int:
    """How many lines of engine code fn(*args) executes."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(ENGINE) else None

    sys.settrace(tracer)
    try:
        fn(*args)
    finally:
        sys.settrace(None)
    return count


def ratio(make, run, n: int) -> float:
    small, large = lines_run(run, make(n)), lines_run(run, make(4 * n))
    return large / small


def names_text(n: int) -> str:
    people = ["Ana Lima", "Bob", "Carol Smith", "Dr. Rui Costa", "New York", "Lisbon", "ana@example.com", "@rui_c"]
    return " ".join(f"Then {people[i % len(people)]} met us near the river {i}." for i in range(n))


def test_entity_mentions_are_linear_in_the_text():
    assert ratio(names_text, find_mentions, 300) < LINEAR


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
