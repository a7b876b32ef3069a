"""One very large memory_add over MCP while other processes read and write the same file.

    python -m tests.perf.big_turn [--mb 2] [--embedder local] [--json]      (make perf-lock)

Builds a database with a few hundred ordinary turns, starts `memlens mcp` (the official SDK's
client over stdio) and sends one memory_add of --mb megabytes of prose. While it runs:
- `memlens recall` is run again and again as a separate process (wall time of each, and the
  recall's own time from its --json timings), compared with the same command before the call;
- a second process keeps an engine open, as the inspector does, and recalls in a loop (each
  recall also stores its trace, so it needs the write lock for a moment);
- a third process adds one small turn at a time and measures how long each write takes (how
  long the big call holds the write lock at a stretch).
Prints the figures; asserts nothing (speed targets are figures, not tests). The machine may be
shared: compare the figures of one run (during vs idle), not runs with each other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[2]
QUERY = "where did Ana Lima move to?"
SCOPE_ARGS = ["--user", "ana", "--agent", "bot"]
IDLE_S = 6  # seconds the loops run before the big call: their baseline
# Pauses between the probes' own operations: on two cores, back-to-back probes would compete with
# the call they measure (a CLI recall process spends about a CPU-second starting up).
LOOP_PAUSE_S = 0.2
CLI_PAUSE_S = 1.0


def prose(chars: int) -> str:
    sentence = ("On day {i} I walked with Ana Lima from the harbour to the old market in Lisbon, and "
                "Bob Smith told us about the river. I love hiking and my favourite colour is blue. ")
    parts, n, i = [], 0, 0
    while n < chars:
        s = sentence.format(i=i)
        parts.append(s)
        n += len(s)
        i += 1
    return "".join(parts)[:chars]


def seed(db: Path, embedder: str) -> None:
    from engine.embed import make_embedder
    from engine.memory import MemoryEngine
    from engine.scope import Scope

    turns = [{"role": "user" if i % 2 == 0 else "assistant",
              "content": f"Turn {i}: Ana Lima moved to Porto in {2000 + i % 20}." if i % 2 == 0 else "Noted."}
             for i in range(400)]
    with MemoryEngine(db, embedder=make_embedder(embedder), llm=None) as engine:
        engine.add_turns(turns, scope=Scope.default("ana", "bot"), extract="heuristic")


def cli_recall(db: Path, env: dict[str, str]) -> tuple[float, float | None, int]:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "app.cli", "recall", QUERY, "--db", str(db), *SCOPE_ARGS, "--json"],
                          env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    own = json.loads(proc.stdout)["timings_ms"]["total"] / 1000 if proc.returncode == 0 else None
    return wall, own, proc.returncode


def loop(mode: str, db: str, stop: str, out: str, embedder: str) -> int:
    """--reader: recall in a loop on one open engine; --writer: one small turn per write."""
    from engine.embed import make_embedder
    from engine.memory import MemoryEngine
    from engine.scope import Scope

    scope = Scope.default("ana", "bot" if mode == "reader" else "probe")
    times, errors = [], []
    with MemoryEngine(db, embedder=make_embedder(embedder), llm=None, create=False) as engine:

        def once(i: int) -> None:
            if mode == "reader":
                engine.recall(QUERY, scope=scope)
            else:
                engine.add_turns([{"role": "user", "content": f"Probe {i}."}], scope=scope, extract="none")

        once(-1)  # warm up (the model, the vector index, the embedder record): not a sample
        i = 0
        while not Path(stop).exists():
            t, at = time.perf_counter(), time.time()
            try:
                once(i)
                times.append((at, time.perf_counter() - t))
            except Exception as exc:  # noqa: BLE001 - counted and reported
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
            i += 1
            time.sleep(LOOP_PAUSE_S)
    Path(out).write_text(json.dumps({"times": times, "errors": errors}), encoding="utf-8")
    return 0


def summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {"n": len(values), "p50_s": round(statistics.median(ordered), 3),
            "p95_s": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
            "max_s": round(ordered[-1], 3)}


def measure(mb: float, embedder: str, work: Path) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    db = work / "big.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMLENS_EMBEDDER": embedder,
           "XDG_DATA_HOME": str(work / "xdg"), "MEMLENS_SETTINGS_FILE": str(work / "s.conf")}
    seed(db, embedder)
    idle = [cli_recall(db, env) for _ in range(3)]
    stop = work / "stop"
    loops = {mode: subprocess.Popen([sys.executable, "-m", "tests.perf.big_turn", f"--{mode}", str(db), str(stop),
                                     str(work / f"{mode}.json"), "--embedder", embedder], env=env, cwd=ROOT)
             for mode in ("reader", "writer")}
    during: list[tuple[float, float | None, int]] = []
    done = threading.Event()

    def recalls() -> None:
        while not done.is_set():
            during.append(cli_recall(db, env))
            done.wait(CLI_PAUSE_S)

    content = prose(int(mb * 1_000_000))
    params = StdioServerParameters(command=sys.executable, env=env, cwd=str(ROOT),
                                   args=["-m", "app.cli", "mcp", "--db", str(db), *SCOPE_ARGS, "--extract", "heuristic"])
    result: dict[str, Any] = {}

    async def big_call() -> None:
        with open(work / "mcp-stderr.log", "w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    time.sleep(IDLE_S)  # the loops open their engines and measure the idle baseline
                    reader = threading.Thread(target=recalls, daemon=True)
                    reader.start()
                    t, result["start"] = time.perf_counter(), time.time()
                    res = await session.call_tool("memory_add", {"role": "user", "content": content})
                    result["seconds"] = time.perf_counter() - t
                    result["end"] = time.time()
                    result["ok"] = not res.is_error
                    result["facts"] = None if res.is_error else len(res.structured_content["fact_ids"])
                    done.set()
                    reader.join()

    anyio.run(big_call)
    stop.touch()
    loop_out = {}
    for mode, proc in loops.items():
        proc.wait(timeout=120)
        loop_out[mode] = json.loads((work / f"{mode}.json").read_text())

    def split(mode: str, during: bool) -> list[float]:
        # A sample belongs to the call if it started during it, or started before and ended after its start.
        return [d for at, d in loop_out[mode]["times"]
                if (result["start"] - d <= at <= result["end"]) == during and at <= result["end"]]

    return {
        "turn_chars": len(content), "embedder": embedder,
        "memory_add_seconds": round(result["seconds"], 2), "memory_add_ok": result["ok"],
        "facts_from_the_turn": result["facts"],
        "cli_recall_wall_idle": summary([w for w, _, c in idle if c == 0]),
        "cli_recall_wall_during": summary([w for w, _, c in during if c == 0]),
        "cli_recall_own_timing_idle": summary([o for _, o, c in idle if c == 0 and o is not None]),
        "cli_recall_own_timing_during": summary([o for _, o, c in during if c == 0 and o is not None]),
        "cli_recall_failures": [c for _, _, c in idle + during if c != 0],
        "open_engine_recall_idle": summary(split("reader", False)),
        "open_engine_recall_during": summary(split("reader", True)),
        "open_engine_recall_errors": loop_out["reader"]["errors"][:5],
        "small_write_idle": summary(split("writer", False)),
        "small_write_during": summary(split("writer", True)),
        "small_write_errors": loop_out["writer"]["errors"][:5],
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m tests.perf.big_turn", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=2.0, help="size of the turn in millions of characters")
    parser.add_argument("--embedder", default="local", choices=("local", "hashing"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--reader", nargs=3, metavar=("DB", "STOP", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--writer", nargs=3, metavar=("DB", "STOP", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reader or args.writer:
        return loop("reader" if args.reader else "writer", *(args.reader or args.writer), embedder=args.embedder)
    with tempfile.TemporaryDirectory(prefix="memlens-bigturn-") as tmp:
        out = measure(args.mb, args.embedder, Path(tmp))
    if args.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
