"""Memories are private to the user: the data folder 0700, every file memlens writes 0600, and a
database others can read is reported."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from engine.bench.runner import run_benchmark
from engine.embed.hashing import HashingEmbedder
from engine.files import exposure, open_private, private_dir, write_private
from engine.memory import MemoryEngine
from engine.scope import Scope

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
ANA = Scope.default("ana", "bot")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():
    old = os.umask(0o022)  # the usual default, which made the folder 0755 and the files 0644
    yield
    os.umask(old)


def test_a_new_database_its_folder_and_side_files_are_private(tmp_path, open_umask):
    path = tmp_path / "data" / "memlens" / "memlens.db"
    with MemoryEngine(path, embedder=HashingEmbedder(), llm=None) as engine:
        engine.add_turns([{"role": "user", "content": "I live in Porto."}], scope=ANA, extract="heuristic")
        side = [Path(f"{path}-wal"), Path(f"{path}-shm")]
        assert all(p.exists() for p in side)
        assert [mode(p) for p in [path, *side]] == [0o600, 0o600, 0o600]
        assert engine.store.db.exposure() is None
    assert mode(tmp_path / "data") == 0o700 and mode(tmp_path / "data" / "memlens") == 0o700


def test_a_database_others_can_read_is_reported(tmp_path):
    path = tmp_path / "m.db"
    with MemoryEngine(path, embedder=HashingEmbedder(), llm=None) as engine:
        engine.add_turns([{"role": "user", "content": "I live in Porto."}], scope=ANA)
    os.chmod(path, 0o644)
    message = exposure(path)
    assert message and "m.db can be read by everyone on this machine (mode 0644)" in message
    assert f"chmod 600 {path}" in message
    os.chmod(path, 0o640)
    assert "by its group" in exposure(path)
    os.chmod(path, 0o600)
    assert exposure(path) is None


def test_private_writers_override_the_umask_and_an_older_mode(tmp_path, open_umask):
    folder = private_dir(tmp_path / "a" / "b")
    assert mode(tmp_path / "a") == 0o700 and mode(folder) == 0o700
    old = tmp_path / "old.txt"
    old.write_text("x")
    os.chmod(old, 0o644)
    write_private(old, "y")
    assert mode(old) == 0o600 and old.read_text() == "y"
    with open_private(tmp_path / "new.bin", "wb") as fh:
        fh.write(b"z")
    assert mode(tmp_path / "new.bin") == 0o600


def test_benchmark_containers_are_private(tmp_path, open_umask):
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        out = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", limit=2, embedder="hashing")
    run_dir = tmp_path / "main.db.bench" / f"run-{out['run_id']}"
    containers = list(run_dir.glob("*.db*"))
    assert containers and all(mode(p) == 0o600 for p in containers)
    assert mode(run_dir) == 0o700 and mode(tmp_path / "main.db.bench") == 0o700
    vectors = list((tmp_path / "main.db.bench").glob("vectors.db*"))  # the run's vector cache
    assert vectors and all(mode(p) == 0o600 for p in vectors)
