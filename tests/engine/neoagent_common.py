"""What the two NeoAgent import test modules share: an engine on a fresh memlens file, rows by ref."""

from __future__ import annotations

import pytest

from engine.embed.hashing import HashingEmbedder
from engine.memory import MemoryEngine


@pytest.fixture
def engine(tmp_path):
    eng = MemoryEngine(tmp_path / "memlens.db", embedder=HashingEmbedder(), llm=None, background_reembed=False)
    yield eng
    eng.close()


def by_ref(engine, scope, table="memories"):
    """The scope's rows of `table` (an export key) keyed by their NeoAgent external ref."""
    return {r["external_ref"]: r for r in engine.export(scope)[table] if r.get("external_ref")}
