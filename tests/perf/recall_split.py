"""Where a benchmark's slowest recalls spend their CPU, and the garbage collector's share of it.

    python -m tests.perf.recall_split [--no-freeze] -- bench locomo --data FILE --db DB --workers 1 --json

Runs the `memlens` command after `--` in this process (so use --workers 1) with the recall
pipeline's stages, its current-truth rules and its store reads wrapped in thread-CPU timers, and
a gc callback timing each collection. Prints, for all recalls and for the slowest 5% of them
(by thread CPU), the mean milliseconds of each part and of the collector ("GC"), and each
generation's passes (count, total, longest). --no-freeze undoes bench's gc.freeze before each
timed recall (engine/bench/runner.py), to see the collections it keeps out of them. The timers
add their own overhead: compare parts within one run, not with recall_cpu_ms. Prints figures (on stderr:
the command's own output stays on stdout); asserts nothing.
"""

from __future__ import annotations

import collections
import gc
import statistics
import sys
import time
from typing import Any

_cur: collections.Counter[str] = collections.Counter()
_recalls: list[dict[str, float]] = []
_passes: dict[int, list[float]] = {0: [], 1: [], 2: []}
_started: list[float] = [0.0]


def _timed(f: Any, name: str) -> Any:
    def run(*a: Any, **kw: Any) -> Any:
        t = time.thread_time()
        try:
            return f(*a, **kw)
        finally:
            _cur[name] += time.thread_time() - t
    return run


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.thread_time()
    else:
        spent = time.thread_time() - _started[0]
        _cur["GC"] += spent
        _passes[info["generation"]].append(spent)


def _install(freeze: bool) -> None:
    from engine import memory
    from engine.retrieve import pipeline
    from engine.store import recall as recall_sql
    from engine.store import store

    for name in ("_candidates", "_filters", "_score", "_current_truth", "_restatement_order", "_slot_order",
                 "_stored_clauses", "_rank", "_budget", "_dedupe", "_fuse", "_load_meta", "_names_in_sentence",
                 "_fts_terms", "_later_leads"):
        setattr(pipeline.Recall, name, _timed(getattr(pipeline.Recall, name), name))
    pipeline.CLAUSE_VECTORS.get = _timed(pipeline.CLAUSE_VECTORS.get, "clause vectors")  # type: ignore[method-assign]
    memory.MemoryEngine._persist_trace = _timed(memory.MemoryEngine._persist_trace, "_persist_trace")  # type: ignore[method-assign]
    store.Store.fts_memories = _timed(store.Store.fts_memories, "fts_memories")  # type: ignore[method-assign]
    for name in ("candidate_meta", "neighbour_memories", "entity_names", "fts_term_frequencies", "fts_tokens"):
        setattr(recall_sql.RecallReads, name, _timed(getattr(recall_sql.RecallReads, name), name))
    from engine import statements
    for name in ("slot_claims", "_read_slots", "_clauses"):  # module functions, called by their global names
        setattr(statements, name, _timed(getattr(statements, name), name))
    recall = memory.MemoryEngine.recall

    if not freeze:  # the harness's gc.freeze calls do nothing: every pass walks what it did before
        gc.freeze = lambda: None

    def timed_recall(*a: Any, **kw: Any) -> Any:
        _cur.clear()
        t = time.thread_time()
        res = recall(*a, **kw)
        _cur["TOTAL"] = time.thread_time() - t
        _recalls.append(dict(_cur))
        return res
    memory.MemoryEngine.recall = timed_recall  # type: ignore[method-assign]
    gc.callbacks.append(_on_gc)


def _report() -> None:
    if not _recalls:
        print("no recall ran", file=sys.stderr)
        return
    ranked = sorted(_recalls, key=lambda d: -d["TOTAL"])
    top = ranked[: max(1, len(ranked) // 20)]
    names = sorted({k for d in ranked for k in d}, key=lambda k: -sum(d.get(k, 0.0) for d in top))
    print(f"{len(ranked)} recalls; the slowest {len(top)} (5%) against all, mean ms of thread CPU", file=sys.stderr)
    for name in names:
        every = 1000 * statistics.mean(d.get(name, 0.0) for d in ranked)
        slow = 1000 * statistics.mean(d.get(name, 0.0) for d in top)
        print(f"  {name:24s} all {every:7.2f}   slowest 5% {slow:7.2f}", file=sys.stderr)
    for gen, spent in _passes.items():
        if spent:
            print(f"  gc generation {gen}: {len(spent)} passes, {1000 * sum(spent):.1f} ms in all,"
                  f" longest {1000 * max(spent):.2f} ms", file=sys.stderr)


def main(argv: list[str]) -> int:
    freeze = "--no-freeze" not in argv
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    command = argv[argv.index("--") + 1:]
    _install(freeze)
    from app.cli import main as cli

    sys.argv = ["memlens", *command]
    try:
        cli()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    finally:
        _report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
