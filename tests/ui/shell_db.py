"""Fixtures for the shell and browsing-pane tests: a real sample database (app.snapshot's builder:
chat with supersession, a conflict and a review, plus email, Markdown and code), a temporary
QSettings file, and an AppContext with an inline runner."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings

from app.snapshot import SAMPLE_SCOPE, add_sample_traces, build_sample_db
from engine.embed.hashing import HashingEmbedder
from engine.memory import MemoryEngine
from ui.context import AppContext
from ui.selection import SelectionBus
from ui.tasks import InlineRunner

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
EXTRA = (DATA / "reply.eml", DATA / "garden.md", DATA / "sample.py")


@pytest.fixture(scope="session")
def sample_template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sample") / "sample.db"
    build_sample_db(path, extra_sources=EXTRA)
    add_sample_traces(path)
    return path


@pytest.fixture
def sample_db(sample_template, tmp_path) -> Path:
    """A private copy: tests may curate it."""
    dst = tmp_path / "sample.db"
    shutil.copy(sample_template, dst)
    return dst


@pytest.fixture
def qsettings(tmp_path) -> QSettings:
    """Settings in a temporary INI file: tests never touch the user's configuration."""
    return QSettings(str(tmp_path / "memlens-test.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def engine(sample_db):
    eng = MemoryEngine(sample_db, embedder=HashingEmbedder(), llm=None)
    yield eng
    eng.close()


@pytest.fixture
def ctx(engine) -> AppContext:
    return AppContext(engine=engine, scope=SAMPLE_SCOPE, bus=SelectionBus(), runner=InlineRunner())


def fact_by(engine: MemoryEngine, predicate: str, obj: str) -> dict:
    return next(f for f in engine.facts(SAMPLE_SCOPE, history=True) if f["predicate"] == predicate and f["object"] == obj)


def state(engine: MemoryEngine) -> str:
    """Everything curation may change in the sample scope, as one comparable string."""
    import json

    data = engine.export(SAMPLE_SCOPE)
    data["conflicts"] = engine.conflicts(SAMPLE_SCOPE, status=None)
    return json.dumps(data, sort_keys=True, default=str)


class Recorder:
    """Collects the selections a bus publishes."""

    def __init__(self, bus: SelectionBus) -> None:
        self.seen: list[tuple[str, int, str]] = []
        bus.sigSelected.connect(lambda sel: self.seen.append((sel.kind, sel.id, sel.source)))
