"""A reader process of the soak test: polls the database the way the inspector does.

Every POLL_S it reads the change signature (data_version and file stats), and when it moved it
probes what changed (ui/live.py's probe); it counts the scope's rows, browses the newest
memories and runs a recall that stores nothing; every REOPEN_EVERY rounds it closes the engine
and opens it again, the path that used to fail while a writer held the lock. Each failure is a
refusal. Runs until the stop file exists; writes a JSON summary to the output file.

    python -m tests.soak.reader DB STOPFILE OUTFILE
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

POLL_S = 0.05
REOPEN_EVERY = 20
SLOW_MS = 1000  # operations slower than this are listed (name, ms, when)
SCOPES = (("ana", "bot"), ("ana", "files"))


def main(db: str, stop: str, out: str) -> int:
    from engine.embed.hashing import HashingEmbedder
    from engine.memory import MemoryEngine
    from engine.scope import Scope
    from engine.store.changes_probe import ChangeSignal, probe_changes

    stats = {"rounds": 0, "opens": 0, "recalls": 0, "probes": 0, "refusals": [], "max_ms": {}}

    def timed(name, fn, *args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every failure of a reader is what this counts
            stats["refusals"].append(f"{name}: {type(exc).__name__}: {exc}"[:300])
            if len(stats["refusals"]) <= 3:
                traceback.print_exc(file=sys.stderr)
            return None
        finally:
            ms = 1000 * (time.perf_counter() - t)
            stats["max_ms"][name] = round(max(stats["max_ms"].get(name, 0.0), ms), 1)
            if ms > SLOW_MS:
                stats.setdefault("slow", []).append([name, round(ms), round(time.time(), 2)])

    while not Path(db).exists() and not Path(stop).exists():
        time.sleep(POLL_S)
    engine = signal = None
    previous = None
    last_signature = None
    scopes = [Scope.default(*s) for s in SCOPES]
    while not Path(stop).exists():
        if engine is None or stats["rounds"] % REOPEN_EVERY == 0:
            if engine is not None:
                engine.close()
                signal.close()
            engine = timed("open", MemoryEngine, db, embedder=HashingEmbedder(), llm=None, create=False,
                           background_reembed=False)
            signal = timed("signal", ChangeSignal, db) if engine is not None else None
            if engine is None or signal is None:
                engine = None
                time.sleep(POLL_S)
                continue
            stats["opens"] += 1
        scope = scopes[stats["rounds"] % len(scopes)]
        signature = timed("signature", signal.signature)
        if signature != last_signature:
            last_signature = signature
            result = timed("probe", probe_changes, engine.store, scope, previous)
            if result is not None:
                previous = result[0]
                stats["probes"] += 1
        counts = timed("counts", engine.counts, scope)
        timed("browse", engine.store.documents, scope, limit=20)
        if stats["rounds"] % 5 == 0 and counts and counts["memories"]:
            result = timed("recall", engine.recall, "which city did I visit?", scope=scope, persist=False)
            if result is not None:
                stats["recalls"] += 1
                slow = stats.get("slow")
                if slow and slow[-1][0] == "recall" and len(slow[-1]) == 3:
                    slow[-1].append({k: round(v) for k, v in result.trace.timings.items() if v >= 100})
        stats["rounds"] += 1
        time.sleep(POLL_S)
    if engine is not None:
        engine.close()
        signal.close()
    Path(out).write_text(json.dumps(stats), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
