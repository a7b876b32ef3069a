"""The Qt application: fonts, theme, settings, the main window, opening a database.

Unexpected exceptions in the GUI thread are shown in the window's notice bar (with what to do),
never as a traceback dialog; the traceback goes to stderr for bug reports.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import cast


def build_demo_then_open(window, path: Path) -> None:
    """First run: build the demo DB off the GUI thread, showing progress, then open it."""
    from app.demo import build_demo

    window.show_notice(f"First run: building the demo database at {path} ...", "info")

    def work(progress, should_stop):
        return build_demo(path, progress=progress, should_stop=should_stop)

    def done(info) -> None:
        window.clear_notice()
        window.open_database(path, on_opened=lambda: window.show_notice(
            f"Demo ready: {info['memories']} memories, {info['facts']} facts, "
            f"{info['open_conflicts']} conflict waiting in the queue.", "info"))

    def failed(exc: BaseException) -> None:
        window.show_error(exc, "Building the demo database failed")

    def progress(fraction: float, message: str) -> None:
        window.show_notice(f"Building the demo database: {message} ({fraction:.0%})", "info")

    window.runner.run(work, done, failed, progress)


def settle_gc() -> None:
    """Move everything start-up made (modules, Qt wrappers, the open DB's caches) out of the
    collector's reach: a full collection otherwise walks it all while holding the GIL, and the
    worker thread's collections stalled the GUI thread by 40-60 ms each (app.latency_probe). The
    MCP server calls it too once its model has loaded (such a pass otherwise lands in a tool call).
    Only the young generations are collected first: a full pass here is itself such a stall
    (25 ms of CPU with the window up, for a few dozen unreachable objects left over)."""
    import gc

    gc.collect(1)
    gc.freeze()


PRELOADED = ("onnxruntime", "tokenizers", "numpy.random")


def preload_modules() -> None:
    """Import what worker threads would otherwise import in the middle of work: an import holds
    the GIL while it runs, and onnxruntime's (the embedder's first load) and numpy.random's (the
    first graph layout) stalled the GUI thread by 20-40 ms during an ingestion (app.latency_probe)."""
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # whoever needs it reports it, as without the preload


def warm_up(window, on_ready=None) -> None:
    """After the first window: once the panes have their first page of data, import the modules
    and load the bundled embedding model in the background (parsing its tokenizer and creating
    its session take ~0.3 s of CPU, which the first window no longer waits for), then move what
    start-up made out of the collector's reach (settle_gc). Everything is in place before the
    first ingestion or query; a model that fails to load is reported by the first pane that
    embeds, with what to do. `on_ready(stamps)`: perf_counter() when the panes were first idle
    ("data") and when the model had loaded ("model")."""
    import time

    stamps: dict[str, float] = {}

    def work(_progress, _stop) -> None:
        preload_modules()
        warm = getattr(window.settings_store.make_embedder(), "warm", None)
        if callable(warm):
            warm()

    def done(_result=None) -> None:
        stamps["model"] = time.perf_counter()
        settle_gc()
        if on_ready is not None:
            on_ready(stamps)

    def start() -> None:
        stamps["data"] = time.perf_counter()
        # at the GUI's priority: the imports and the model's load hold the GIL in stretches, which a
        # preempted background thread would stretch into GUI stalls of hundreds of ms on a busy machine
        window.runner.run(work, done, lambda _exc: done(), background=False)

    window.runner.when_idle(start)


def report_ready(stamps: dict[str, float]) -> None:
    """MEMLENS_REPORT_READY=1 (app.first_window): say on stderr when the first page of data was
    up and the model loaded, as perf_counter() stamps the measuring process can compare."""
    sys.stderr.write("memlens-ready " + " ".join(f"{k}={v:.6f}" for k, v in sorted(stamps.items())) + "\n")
    sys.stderr.flush()


def run(db_path: Path | None, argv: list[str] | None = None, *, demo_if_missing: bool = False) -> int:
    from PySide6.QtWidgets import QApplication

    from engine.settings import value as setting_value
    from ui.main_window import MainWindow
    from ui.qsettings import APPLICATION, ORGANISATION
    from ui.theme import register_fonts

    app = cast(QApplication, QApplication.instance() or QApplication(argv if argv is not None else sys.argv[:1]))
    app.setApplicationName(APPLICATION)
    app.setOrganizationName(ORGANISATION)
    app.setApplicationDisplayName("memlens")
    register_fonts()
    from app import about

    app.setDesktopFileName(about.APP_ID)  # Wayland matches the window to its menu entry and icon
    app.setWindowIcon(about.app_icon())
    # Nothing slow before the window: the model, onnxruntime and the tokenizer load after it is
    # up with its first page of data (warm_up), and the LLM client library when first used.
    window = MainWindow()
    # licence and bundled components (ui cannot import app); a hook MainWindow calls
    window.about_text = lambda: about.about_text() + (  # type: ignore[method-assign]
        f"\n\nDatabase: {window.engine.path}" if window.engine is not None else "")

    def excepthook(kind, exc, tb) -> None:
        traceback.print_exception(kind, exc, tb, file=sys.stderr)
        try:
            window.show_error(exc, "Unexpected error")
        except Exception:  # noqa: BLE001 - the window itself is gone: stderr has it
            pass

    previous = sys.excepthook
    sys.excepthook = excepthook
    try:
        if db_path is not None and demo_if_missing and not db_path.exists():
            window.show()
            build_demo_then_open(window, db_path)
        elif db_path is not None:
            window.open_database(db_path)
        else:
            recent = window.recent_paths()
            if recent and Path(recent[0]).exists():
                window.open_database(Path(recent[0]))
        window.show()
        warm_up(window, report_ready if setting_value("report_ready") else None)
        return app.exec()
    finally:
        sys.excepthook = previous
