"""Writers never lock readers out: opening and reading never wait for another process's write,
and a write that waits past the busy timeout is DatabaseBusy (a temporary failure), not bad input."""

from __future__ import annotations

import pytest

import engine.store.db as db_module
from engine.embed.hashing import HashingEmbedder
from engine.errors import BadInput, DatabaseBusy
from engine.memory import MemoryEngine
from engine.scope import Scope
from engine.store.db import Database
from tests.fixtures.lock_holder import hold_write_lock

ANA = Scope.default("ana", "bot")


@pytest.fixture
def short_busy_timeout(monkeypatch):
    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_MS", 300)


@pytest.fixture
def memdb(tmp_path):
    path = tmp_path / "m.db"
    with MemoryEngine(path, embedder=HashingEmbedder(), llm=None) as engine:
        engine.add_turns([{"role": "user", "content": f"I met Ana number {i} in Lisbon."} for i in range(300)],
                         scope=ANA, extract="heuristic")
    return path


def test_opening_and_reading_never_wait_for_a_writer(memdb, short_busy_timeout):
    # bestpractice's optimize-at-open hook wanted the write lock: "cannot open (database is locked)".
    with hold_write_lock(memdb):
        with MemoryEngine(memdb, embedder=HashingEmbedder(), llm=None, create=False) as engine:
            assert engine.counts(ANA)["memories"] >= 300
            result = engine.recall("Where did I meet Ana?", scope=ANA, persist=False)
            assert result.results
            assert engine.show("memory", result.results[0]["memory_id"], scope=ANA)["sources"]


def test_a_write_past_the_busy_timeout_is_database_busy_and_writes_nothing(memdb, short_busy_timeout):
    with MemoryEngine(memdb, embedder=HashingEmbedder(), llm=None, create=False) as engine:
        before = engine.counts(ANA)
        with hold_write_lock(memdb):
            with pytest.raises(DatabaseBusy) as busy:
                engine.add_turns([{"role": "user", "content": "I moved to Porto."}], scope=ANA, extract="heuristic")
            assert not isinstance(busy.value, BadInput)
            assert "busy" in str(busy.value) and "retry" in str(busy.value)
        assert engine.counts(ANA) == before
        engine.add_turns([{"role": "user", "content": "I moved to Porto."}], scope=ANA, extract="heuristic")
        assert engine.counts(ANA)["memories"] > before["memories"]


def test_optimize_runs_when_the_lock_is_free_and_never_waits_for_it(memdb, short_busy_timeout):
    db = Database(memdb, create=False)
    try:
        with hold_write_lock(memdb):
            assert db.optimize() is False  # would have waited, so it did not run
        assert db.optimize() is True
        tables = {r[0] for r in db.connection().execute("SELECT name FROM sqlite_schema")}
        assert "sqlite_stat1" in tables  # ANALYZE ran: the planner has statistics
    finally:
        db.close()


def test_processes_creating_the_same_file_at_once_all_open_it(tmp_path):
    """The schema is created under the write lock with the version read again: the second process
    used to run the same migration ("table meta already exists") or call the file foreign."""
    import subprocess
    import sys

    code = ("import sys; from engine.store.db import Database; d = Database(sys.argv[1]); "
            "print(d.integrity_check()); d.close()")
    for round_ in range(4):
        path = tmp_path / f"new{round_}.db"
        procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
        results = [p.communicate(timeout=60) for p in procs]
        assert [(p.returncode, out.strip()) for p, (out, _) in zip(procs, results)] == [(0, "ok")] * 4, results


def _busy_at_open(monkeypatch, times: int) -> list[int]:
    """apsw.Connection answers busy at once `times` times, as SQLite does where a wait could deadlock
    (two processes switching one new file to WAL together), then opens for real."""
    real, calls = db_module.apsw.Connection, []

    def connection(*args, **kwargs):
        calls.append(1)
        if len(calls) <= times:
            raise db_module.apsw.BusyError("database is locked")
        return real(*args, **kwargs)

    monkeypatch.setattr(db_module.apsw, "Connection", connection)
    return calls


def test_an_open_answered_busy_at_once_is_retried_until_the_busy_timeout(tmp_path, monkeypatch):
    calls = _busy_at_open(monkeypatch, 3)
    d = Database(tmp_path / "new.db")
    assert d.integrity_check() == "ok" and len(calls) == 4
    d.close()


def test_an_open_still_busy_after_the_busy_timeout_is_database_busy(tmp_path, monkeypatch, short_busy_timeout):
    _busy_at_open(monkeypatch, 10**6)
    with pytest.raises(DatabaseBusy, match="busy"):
        Database(tmp_path / "new.db")


def test_a_recall_answers_when_its_trace_cannot_be_stored(memdb, short_busy_timeout):
    with MemoryEngine(memdb, embedder=HashingEmbedder(), llm=None, create=False) as engine:
        with hold_write_lock(memdb):
            result = engine.recall("Where did I meet Ana?", scope=ANA, origin="agent")
        assert result.results and result.trace.id is None
        assert "busy" in result.not_stored and "busy" in result.as_dict()["trace_not_stored"]
        assert engine.recall("Where did I meet Ana?", scope=ANA).trace.id is not None
