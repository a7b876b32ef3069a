"""Event-loop latency probe: how long does the GUI thread stall while the engine works?

    python -m app.latency_probe [--ingest PATH] [--bench FILE] [--dataset locomo|longmemeval|convomem]
    python -m app.latency_probe --db STORE.db [--user U --agent A]
    python -m app.latency_probe --first-window [--db PATH] [--repeat N]

Starts the inspector offscreen as app.gui.run does (the window first; modules and the embedding
model load in the background once the panes have their first page), opens a fresh DB (the open
is a phase: File > Open with the window up, until that background loading is done), then,
through ui/tasks (as the panes do), runs an ingestion and a benchmark while a 5 ms QTimer
records every gap between its ticks. Prints the longest stall and the p99 per phase.

With --db, a copy of an existing store is opened instead (the open phase then includes the Health
pane's first run of every check, and re-embedding any vectors of another model than the configured
one), followed by a run of every health check through the task runner, as the pane's Check now
does, on the settled window.

--first-window measures instead the time from launching `memlens gui --db PATH` to its window
being mapped (app/first_window.py), on the X display in $DISPLAY or a private Xvfb; without
--db on a demo database built for the purpose. Figures, never test assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    parser = argparse.ArgumentParser(prog="latency_probe")
    parser.add_argument("--ingest", default=str(Path(__file__).resolve().parents[1] / "resources" / "demo" / "chats"))
    parser.add_argument("--bench", default=str(Path(__file__).resolve().parents[1] / "resources" / "demo" / "bench-demo.json"))
    parser.add_argument("--dataset", default="locomo")
    parser.add_argument("--db", default=None, help="open a copy of this store; measure the open and a health run"
                        " (with --first-window: launch on this database, default a new demo)")
    parser.add_argument("--user", default=None)
    parser.add_argument("--agent", default=None)
    parser.add_argument("--first-window", action="store_true",
                        help="time from `memlens gui --db PATH` to a mapped window (needs X or Xvfb)")
    parser.add_argument("--repeat", type=int, default=5, help="with --first-window: launches to measure")
    args = parser.parse_args(argv)
    if args.first_window:
        from app.first_window import measure

        try:
            out = measure(Path(args.db) if args.db else None, max(1, args.repeat))
        except RuntimeError as exc:
            sys.stderr.write(f"latency_probe: {exc}\n")
            return 2
        print(json.dumps(out, indent=2))
        return 0

    import numpy as np
    from PySide6.QtCore import QElapsedTimer, QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from app.gui import warm_up
    from engine.bench.runner import run_benchmark
    from engine.memory import parse_sources
    from engine.scope import Scope
    from ui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    tmp = Path(tempfile.mkdtemp(prefix="memlens-probe-"))
    os.environ.setdefault("MEMLENS_SETTINGS_FILE", str(tmp / "settings.conf"))
    window = MainWindow()
    window.resize(1280, 800)
    window.show()
    gaps: list[float] = []
    ends: list[float] = []  # when each gap ended (s), to say where in a phase the worst ones fell
    clock = QElapsedTimer()
    clock.start()
    last = [clock.nsecsElapsed()]

    def tick() -> None:
        now = clock.nsecsElapsed()
        gaps.append((now - last[0]) / 1e6)
        ends.append(now / 1e9)
        last[0] = now

    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(tick)
    timer.start()

    def worst(n: int = 5) -> list[list[float]]:
        """The n longest stalls as [seconds into the phase, ms]."""
        if len(gaps) < 2:
            return []
        order = sorted(range(1, len(gaps)), key=lambda i: -gaps[i])[:n]
        return [[round(ends[i] - ends[0], 2), round(gaps[i], 1)] for i in order]

    def summary(name: str, t0: float, error: str | None) -> dict:
        """What one phase measured: its longest stall, p99 and worst stalls."""
        arr = np.asarray(gaps[1:] or [0.0])
        return {"phase": name, "seconds": round(time.perf_counter() - t0, 2), "ticks": len(arr),
                "max_stall_ms": round(float(arr.max()), 1), "p99_ms": round(float(np.percentile(arr, 99)), 1),
                "worst": worst(), "error": error}

    def phase(name: str, work) -> dict:
        gaps.clear()
        ends.clear()
        loop = QEventLoop()
        out: dict = {}

        def done(result) -> None:
            out["result"] = result
            loop.quit()

        def failed(exc) -> None:
            out["error"] = repr(exc)
            loop.quit()

        t0 = time.perf_counter()
        window.runner.run(work, done, failed)
        loop.exec()
        return summary(name, t0, out.get("error"))

    def idle(also=lambda: True) -> None:
        """Run the event loop until the task runner (opening, re-embedding, the panes' reads) has
        nothing left to do (and `also()` holds)."""
        loop = QEventLoop()
        poll = QTimer()
        poll.setInterval(20)
        poll.timeout.connect(lambda: loop.quit() if also() and not window.runner.busy else None)
        poll.start()
        loop.exec()
        poll.stop()

    def opened() -> dict:
        """Open the DB as a user would (and as app.gui.run does, the warm-up after it), then wait
        until the background work it starts has finished."""
        gaps.clear()
        ends.clear()
        t0 = time.perf_counter()
        window.open_database(tmp / "probe.db")
        ready: dict = {}
        warm_up(window, ready.update)  # as app.gui.run does after the window
        # the open, then (with --db) re-embedding vectors of another model: tasks of the runner
        idle(lambda: bool(ready))
        idle()  # and what the panes re-read once the new vectors landed
        return summary("open", t0, None)

    if args.db:
        shutil.copy(args.db, tmp / "probe.db")
    opening = opened()  # warm_up has settled the collector, as in app.gui.run
    engine, ctx = window.engine, window.ctx
    if engine is None or ctx is None:
        raise SystemExit(f"memlens: the probe could not open {tmp / 'probe.db'}: {window.banner.text}")
    if args.db:
        scope = Scope.default(args.user, args.agent) if args.user else ctx.scope
        results = [opening, phase("health", lambda p, s: engine.health(scope, limit=100, progress=p,
                                                                       should_stop=s).counts())]
        timer.stop()
        window.close()
        app.processEvents()
        shutil.rmtree(tmp, ignore_errors=True)
        print(json.dumps({"results": results, "db": args.db}, indent=2))
        return 0
    scope = Scope.default("probe", "probe")
    docs = parse_sources([args.ingest])
    results = [
        opening,
        phase("ingest", lambda p, s: engine.ingest_documents(docs, scope=scope, extract="heuristic", progress=p,
                                                             should_stop=s).as_dict()),
        phase("benchmark", lambda p, s: run_benchmark(engine, args.dataset, args.bench, progress=p, should_stop=s,
                                                      recipe="offline")),
    ]
    timer.stop()
    window.close()
    app.processEvents()
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"results": results, "embedder": engine.embedder.model if engine else None}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
