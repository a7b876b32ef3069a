"""What writing a trace's candidates as JSON costs: the standard library's encoder against
engine.jsontext (orjson), on the traces a database holds.

    python -m tests.perf.trace_json DB [--traces N] [--repeat R]

Reads the last N stored traces of DB (read-only; default 200), rebuilds each one's candidate rows
as recall hands them to engine.memory._packed_candidates (memory id, channels, component values,
score, rank, drop, tokens) and times encoding them R times (default 20) both ways. Prints the
candidates per trace and the mean milliseconds a trace for each encoder, and checks that both
texts read back alike; asserts nothing else. A bench container's traces are the realistic input
(`<db>.bench/run-N/<container>.db`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import apsw

from engine import jsontext

_STDLIB = json.JSONEncoder(check_circular=False).encode  # what engine.memory used before jsontext


def _traces(db: str, count: int) -> list[dict[str, Any]]:
    conn = apsw.Connection(f"file:{db}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        rows = conn.execute("SELECT candidate_rows FROM retrieval_traces WHERE candidate_rows IS NOT NULL"
                            " ORDER BY id DESC LIMIT ?", (count,)).fetchall()
    finally:
        conn.close()
    return [json.loads(r[0]) for r in rows]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.perf.trace_json")
    ap.add_argument("db")
    ap.add_argument("--traces", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)
    traces = _traces(args.db, args.traces)
    if not traces:
        print(f"{args.db}: no stored trace with candidate rows", file=sys.stderr)
        return 1
    timings: dict[str, list[float]] = {"json": [], "jsontext": []}
    for packed in traces:
        for name, encode in (("json", _STDLIB), ("jsontext", jsontext.dumps)):
            t0 = time.perf_counter()
            for _ in range(args.repeat):
                text = encode(packed)
            timings[name].append((time.perf_counter() - t0) / args.repeat * 1000.0)
        if json.loads(text) != json.loads(_STDLIB(packed)):
            print("the two encoders' texts read back differently", file=sys.stderr)
            return 1
    sizes = [len(p["rows"]) for p in traces]
    print(f"{len(traces)} traces, {statistics.mean(sizes):.0f} candidates each on average (max {max(sizes)})")
    for name, ms in timings.items():
        print(f"  {name:9s} mean {statistics.mean(ms):.3f} ms a trace, p95 {sorted(ms)[int(0.95 * (len(ms) - 1))]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
