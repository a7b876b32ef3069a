"""The first window waits for nothing slow: the model and the LLM client load after it is up."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer

from app import first_window, gui

ROOT = Path(__file__).resolve().parents[2]


def test_starting_the_inspector_imports_neither_onnxruntime_nor_openai():
    code = ("import sys, app.cli, app.gui, ui.main_window, engine.memory, engine.bench.runner; "
            "print([m for m in ('onnxruntime', 'tokenizers', 'openai') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"})
    assert json.loads(out.stdout.strip().replace("'", '"')) == []


def test_the_model_loads_after_the_first_page_of_data(qtbot, tmp_path, monkeypatch):
    from engine.memory import MemoryEngine
    from ui.main_window import MainWindow

    with MemoryEngine(tmp_path / "m.db", llm=False) as eng:
        eng.add_turns([{"role": "user", "content": "I moved to Lisbon."}], scope=eng_scope())
    window = MainWindow()
    qtbot.addWidget(window)
    warmed: list[set] = []
    embedder = window.settings_store.make_embedder()
    window.open_database(tmp_path / "m.db")
    gate = threading.Event()  # a page read that takes its time
    window.runner.run(lambda _p, _s: gate.wait(10))
    first_page = set(window.runner._live)  # the panes' reads of their first page
    QTimer.singleShot(2000, gate.set)
    # the model loads with none of them still running
    monkeypatch.setattr(type(embedder), "warm", lambda self: warmed.append(first_page & set(window.runner._live)),
                        raising=False)
    stamps: dict = {}
    gui.warm_up(window, stamps.update)
    qtbot.waitUntil(lambda: "model" in stamps, timeout=20000)
    assert warmed and all(still == set() for still in warmed)
    assert stamps["data"] <= stamps["model"]
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=20000)
    window.close()


def eng_scope():
    from engine.scope import Scope

    return Scope.default()


def test_the_first_window_probe_says_what_it_needs(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setattr(first_window.shutil, "which", lambda _name: None)
    with pytest.raises(RuntimeError, match="install Xvfb"):
        first_window.measure(None, 1)
