"""The store: refusing foreign files without touching them, migrations, scope on every row."""

from __future__ import annotations

import dataclasses
import hashlib
import sqlite3

import apsw
import pytest

from engine.embed.hashing import HashingEmbedder
from engine.errors import DatabaseTooNew, NotAMemlensDatabase
from engine.memory import MemoryEngine
from engine.scope import Scope
from engine.store.db import Database
from engine.store.schema import APPLICATION_ID, SCHEMA_VERSION
from engine.store.store import Store

SCOPED_TABLES = ("documents", "chunks", "memories", "facts", "memory_relations", "memory_sources",
                 "entities", "entity_mentions", "embeddings", "retrieval_traces", "trace_candidates",
                 "conflicts", "curation_log", "extraction_queue")


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_new_database_has_the_whole_model(tmp_path):
    db = Database(tmp_path / "m.db")
    conn = db.connection()
    assert conn.pragma("application_id") == APPLICATION_ID
    assert conn.pragma("user_version") == SCHEMA_VERSION
    assert conn.pragma("journal_mode") == "wal"
    assert conn.pragma("foreign_keys") == 1
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")}
    for t in (*SCOPED_TABLES, "llm_calls", "bench_runs", "bench_items", "memories_fts", "chunks_fts", "meta"):
        assert t in tables, t
    for t in SCOPED_TABLES:
        cols = {r[1] for r in conn.execute(f"PRAGMA table_info({t})")}
        assert {"user_id", "agent_id", "scope_type", "scope_id"} <= cols, t
    db.close()


def test_reopen_is_idempotent(tmp_path):
    Database(tmp_path / "m.db").close()
    db = Database(tmp_path / "m.db")
    assert db.connection().pragma("user_version") == SCHEMA_VERSION
    assert db.integrity_check() == "ok"
    db.close()


def test_foreign_sqlite_file_is_refused_unchanged(tmp_path):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t(x)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    con.close()
    before = _digest(path)
    with pytest.raises(NotAMemlensDatabase, match="another application"):
        Database(path)
    assert _digest(path) == before
    assert not (tmp_path / "other.db-wal").exists()


@pytest.mark.parametrize("content", [b"hello, this is not a database at all" * 10, b"\x00\x01\x02" * 50])
def test_non_sqlite_file_is_refused_unchanged(tmp_path, content):
    path = tmp_path / "junk.db"
    path.write_bytes(content)
    with pytest.raises(NotAMemlensDatabase, match="not an SQLite file"):
        Database(path)
    assert path.read_bytes() == content


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "m.db"
    db = Database(path)
    with db.write() as conn:
        conn.pragma("user_version", SCHEMA_VERSION + 1)
    db.close()
    before = _digest(path)
    with pytest.raises(DatabaseTooNew, match="newer memlens"):
        Database(path)
    assert _digest(path) == before


def test_corrupt_memlens_file_is_refused(tmp_path):
    path = tmp_path / "m.db"
    Database(path).close()
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # trash the schema page body, keep the header
    path.write_bytes(bytes(data))
    with pytest.raises((NotAMemlensDatabase, apsw.CorruptError)):
        store = Store(path)
        store.counts(Scope.default())


def test_empty_file_is_adopted(tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    db = Database(path)
    assert db.connection().pragma("application_id") == APPLICATION_ID
    db.close()


def test_writer_requires_a_scope(tmp_path):
    store = Store(tmp_path / "m.db")
    with pytest.raises(TypeError):
        with store.writer(None):  # type: ignore[arg-type]
            pass
    store.close()


def test_connection_per_thread(tmp_path):
    import threading

    store = Store(tmp_path / "m.db")
    seen = []
    t = threading.Thread(target=lambda: seen.append(store.conn))
    t.start()
    t.join()
    assert seen[0] is not store.conn
    store.close()


def test_a_commit_without_a_disk_sync_is_committed_and_only_that_one_skips_the_sync(tmp_path):
    db = Database(tmp_path / "m.db")
    conn = db.connection()
    full = conn.pragma("synchronous")
    with db.write(durable=False) as c:
        assert c.pragma("synchronous") == 1  # NORMAL: the WAL is not synced at this commit
        c.execute("INSERT INTO meta(key, value) VALUES ('a', '1')")
    assert conn.pragma("synchronous") == full  # the next commits sync as before
    with pytest.raises(ValueError):
        with db.write(durable=False) as c:
            c.execute("INSERT INTO meta(key, value) VALUES ('b', '2')")
            raise ValueError("rolled back")
    assert conn.pragma("synchronous") == full
    other = apsw.Connection(str(tmp_path / "m.db"))  # another process sees the commit, and not the rollback
    assert [r[0] for r in other.execute("SELECT key FROM meta WHERE key IN ('a', 'b')")] == ["a"]
    other.close()
    db.close()


def test_the_vector_change_counter_sees_every_change_to_vectors(tmp_path):
    store = Store(tmp_path / "m.db")
    scope = Scope.default()
    seen = [store.vector_changes()]
    with store.writer(scope) as w:
        mid = w.insert_memory(kind="episode", text="Ana hikes.", trust="user", content_hash="h", source_time=None,
                              importance=0.5, confidence=1.0, extraction_method="verbatim")
        w.put_embeddings("memory", [(mid, [1.0, 0.0])], provider="p", model="m", dims=2, embed_ms=None)
    seen.append(store.vector_changes())
    with store.writer(scope, durable=False) as w:  # a commit that touches no vector (a trace) leaves it
        w.insert_trace(origin="operator", query_text="q", query_hash="h", recipe="offline", k=10, as_of=None,
                       params={}, plan=None, rerank=None, stages=[], timings={}, context_text="", context_tokens=0,
                       result_count=0)
    seen.append(store.vector_changes())
    store.mark_stale_embeddings("p", "other")  # re-marked by another process's writer: seen as well
    other = apsw.Connection(str(tmp_path / "m.db"))
    other.execute("DELETE FROM embeddings")
    other.close()
    seen.append(store.vector_changes())
    assert seen[0] < seen[1] == seen[2] < seen[3]
    store.close()


def test_a_store_of_one_scope_searches_without_the_scope_check_and_finds_the_same(tmp_path):
    from engine.embed.hashing import HashingEmbedder
    from engine.memory import MemoryEngine

    alice, bob = Scope.default("alice", "a"), Scope.default("bob", "b")
    with MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(32), llm=False, background_reembed=False) as eng:
        eng.add_turns([{"role": "user", "content": f"Munich trip number {i}, and the Munich beer."} for i in range(30)]
                      + [{"role": "user", "content": "Munich trip number 3, and the Munich beer."}], scope=alice)
        store = eng.store
        scoped = ("SELECT m.id, bm25(memories_fts) AS score FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
                  " WHERE memories_fts MATCH ? AND m.user_id = ? AND m.agent_id = ? AND m.scope_type = ? AND m.scope_id = ?"
                  " ORDER BY score LIMIT ?")
        assert store.sole_scope(alice) and not store.sole_scope(bob)
        for limit in (5, 31, 100):  # ties (equal texts) cut at the same place, in the same order
            assert store.fts_memories(alice, '"munich" OR "trip"', limit=limit) == \
                [tuple(r) for r in store.conn.execute(scoped, ('"munich" OR "trip"', *alice.as_params(), limit))]
        eng.add_turns([{"role": "user", "content": "Bob went to Munich."}], scope=bob)
        assert not store.sole_scope(alice)
        ids = {mid for mid, _ in store.fts_memories(alice, '"munich"', limit=100)}
        assert len(ids) == 31 and all(store.memory(alice, mid) is not None for mid in ids)
        assert len(store.fts_memories(bob, '"munich"', limit=100)) == 1


def test_term_counts_bounded_by_at_most_agree_with_the_full_counts(tmp_path):
    from engine.embed.hashing import HashingEmbedder
    from engine.memory import MemoryEngine

    alice = Scope.default("alice", "a")
    with MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(32), llm=False, background_reembed=False) as eng:
        eng.add_turns([{"role": "user", "content": f"Running to Munich, trip {i}."} for i in range(12)]
                      + [{"role": "user", "content": "Ran past the old canal in Munich."}], scope=alice)
        store = eng.store
        terms = ["munich", "running", "runs", "canal", "old canal", "zurich", "art-related"]
        full = store.fts_term_frequencies(terms)
        assert full["munich"] == 13 and full["running"] == full["runs"] == 12 and full["canal"] == 1
        assert full["old canal"] == 1 and full["zurich"] == full["art-related"] == 0
        for at_most in (0, 1, 5, 12, 13, 50):  # exact up to at_most, at_most + 1 above it
            bounded = store.fts_term_frequencies(terms, at_most=at_most)
            assert bounded == {t: min(n, at_most + 1) for t, n in full.items()}


def test_entity_keys_move_to_the_one_name_key(tmp_path):
    """Mentions keyed by the old second canonicaliser (curly quotes, mail addresses) are re-keyed by
    engine.names.name_key; two entities that now share a key become one, with all their mentions;
    a row may take the key another row gives up in the same step."""
    from engine.store.schema import MIGRATIONS

    # by name, not number: the steps of branches merged in the same round may be renumbered
    (name_keys,) = [step for step in MIGRATIONS if step.__name__.endswith("_name_keys")]
    store = Store(tmp_path / "m.db")
    with store.writer(Scope("u", "a", "agent", "a")) as w:
        mid = w.insert_memory(kind="episode", text="x", trust="user", content_hash="h", source_time=None)
    conn = store.conn
    rows = [(1, "O’Brien", "o’brien"), (2, "O'Brien", "o'brien"), (3, "Ana Lima <ana@x.org>", "ana lima <ana@x.org>"),
            (4, "Tom’s", "tom"), (5, "Tom", "tom’s"), (6, "Bob", "rob"), (7, "Rob", "bob")]  # 6 and 7 trade keys
    for eid, name, canonical in rows:
        conn.execute("INSERT INTO entities(id, user_id, agent_id, scope_type, scope_id, name, canonical, kind, created_at)"
                     " VALUES (?, 'u', 'a', 'agent', 'a', ?, ?, 'name', '2026-01-01T00:00:00Z')", (eid, name, canonical))
        conn.execute("INSERT INTO entity_mentions(user_id, agent_id, scope_type, scope_id, entity_id, memory_id)"
                     " VALUES ('u', 'a', 'agent', 'a', ?, ?)", (eid, mid))
    with conn:
        name_keys(conn)
    keys = dict(conn.execute("SELECT id, canonical FROM entities ORDER BY id").fetchall())
    assert keys == {2: "o'brien", 3: "ana lima", 4: "tom", 6: "bob", 7: "rob"}
    assert conn.execute("SELECT entity_id, count(*) FROM entity_mentions GROUP BY entity_id ORDER BY 1").fetchall() == [
        (2, 2), (3, 1), (4, 2), (6, 1), (7, 1)]
    store.close()


def test_trace_rows_are_indexed_by_trace_only(tmp_path):
    """Trace candidates are read by trace; an index by memory made each trace commit dirty a page
    per candidate (issue 21). A store built before the step loses it; reading a trace uses the
    trace index."""
    from engine.store.schema import MIGRATIONS

    (by_trace,) = [step for step in MIGRATIONS if step.__name__.endswith("_trace_rows_by_trace")]
    store = Store(tmp_path / "m.db")
    conn = store.conn

    def indexes():
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='index' AND"
                                           " tbl_name='trace_candidates' AND sql IS NOT NULL")}

    assert indexes() == {"trace_candidates_trace"}
    conn.execute("CREATE INDEX trace_candidates_memory ON trace_candidates(memory_id)")  # as step 1 made it
    with conn:
        by_trace(conn)
    assert indexes() == {"trace_candidates_trace"}
    plan = " ".join(str(r[-1]) for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM trace_candidates WHERE trace_id = 1 ORDER BY rank IS NULL, rank"))
    assert "trace_candidates_trace" in plan
    store.close()


def test_typed_records_hold_every_column_of_their_table(tmp_path):
    """Each record read by a SELECT in its field order declares exactly its table's columns (and
    Fact its memory's fields after them): a column added to the schema fails here until the record
    learns it, so no value is silently dropped or read into the wrong field."""
    from engine.records import Conflict, CurationEntry, ExtractionWindow, Fact, Relation, StoredTrace, TraceCandidate

    scope = Scope.default("ana", "bot")
    with MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(64), llm=False,
                      background_reembed=False) as eng:
        def columns(table: str) -> list[str]:
            return [r[1] for r in eng.store.conn.execute(f"PRAGMA table_info({table})")]

        def names(record) -> list[str]:
            return [f.name for f in dataclasses.fields(record)]

        assert names(Fact) == columns("facts") + ["trust", "text", "pinned", "forgotten_at", "forget_reason"]
        assert set(names(Fact)[len(columns("facts")):]) <= set(columns("memories"))
        assert names(Conflict) == columns("conflicts")
        assert names(Relation) == columns("memory_relations")
        assert names(CurationEntry) == columns("curation_log")
        # candidate_rows (one JSON array of the candidates) is read into candidates
        assert names(StoredTrace) == [c for c in columns("retrieval_traces") if c != "candidate_rows"] + ["candidates"]
        assert names(TraceCandidate) == columns("trace_candidates")
        assert names(ExtractionWindow) == columns("extraction_queue")

        eng.add_turns([{"role": "user", "name": "Ana", "content": "I live in Lisbon. I work at Acme as a nurse.",
                        "timestamp": "2024-03-01T09:00:00Z"}], scope=scope, extract="heuristic")
        fact_id = eng.store.facts(scope)[0].id
        conflict_id = eng.curator(scope).open_conflict(fact_id, None, reason="checked").details["conflict_id"]
        row, record = eng.store.fact(scope, fact_id), eng.store.fact_record(scope, fact_id)
        assert row is not None and record is not None and record.as_dict() == row
        sql = eng.store.conn.execute("SELECT f.*, m.trust, m.text, m.pinned, m.forgotten_at, m.forget_reason FROM facts f"
                                     " JOIN memories m ON m.id = f.memory_id WHERE f.id = ?", (fact_id,)).fetchone()
        assert tuple(row.values()) == tuple(sql)  # the fields hold their own columns' values
        by_memory = eng.store.fact_record_by_memory(scope, row["memory_id"])
        assert by_memory == record
        crow, crecord = eng.store.conflict(scope, conflict_id), eng.store.conflict_record(scope, conflict_id)
        assert crow is not None and crecord is not None and crecord.as_dict() == crow
        assert tuple(crow.values()) == eng.store.conn.execute("SELECT * FROM conflicts WHERE id = ?",
                                                              (conflict_id,)).fetchone()
        assert eng.store.fact_record(scope, 10_000) is None and eng.store.conflict_record(scope, 10_000) is None
        # as_dict is dataclasses.asdict without its cost: the same values, nested images copied
        (entry, *_) = eng.store.curation_log(scope)
        doc = eng.store.document(scope, 1)  # the chat add_turns stored, with its meta
        for rec in (record, crecord, entry, doc):
            assert rec is not None and rec.as_dict() == dataclasses.asdict(rec)
        assert entry.as_dict()["after"] == entry.after and entry.as_dict()["after"] is not entry.after


def test_interrupt_stops_other_threads_reads_but_not_a_write_in_progress(tmp_path):
    """Database.interrupt: how a caller that cancelled its work stops a read that never asks
    should_stop, before closing the file; the writer's transaction is left to commit."""
    import threading

    db = Database(tmp_path / "m.db")
    db.connection().execute("CREATE TABLE t(x)")
    in_read, in_write, release_write, out = threading.Event(), threading.Event(), threading.Event(), {}

    def read() -> None:
        conn = db.connection()
        conn.create_scalar_function("entered", lambda x: in_read.set() or x, 1)
        try:
            conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT entered(x) + 1 FROM c "
                         "WHERE x < 2000000000) SELECT count(*) FROM c").fetchall()
            out["read"] = "finished"
        except apsw.InterruptError:
            out["read"] = "interrupted"

    def write() -> None:
        with db.write() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            in_write.set()
            release_write.wait(10)
            conn.execute("INSERT INTO t VALUES (2)")
        out["write"] = "committed"

    threads = [threading.Thread(target=read), threading.Thread(target=write)]
    for t in threads:
        t.start()
    assert in_read.wait(10) and in_write.wait(10)
    assert db.interrupt() >= 1
    release_write.set()
    for t in threads:
        t.join(20)
    assert out == {"read": "interrupted", "write": "committed"}
    assert db.connection().execute("SELECT count(*) FROM t").fetchone()[0] == 2
    assert db.connection().execute("SELECT 1").fetchone()[0] == 1  # statements after it run as usual
    db.close()
