"""`memlens import neoagent`: a NeoAgent database comes in whole, exact, idempotent and read-only.

The broken-row tests use build_quirky_db; the NeoAgent-as-it-really-writes tests (every chunk
shape and time format, a live writer process) are in test_neoagent_real.py."""

from __future__ import annotations

import json
import sqlite3

import pytest

from app.cli import main
from engine.errors import BadInput, Cancelled
from engine.importers.neoagent import (
    NO_AGENT,
    import_neoagent,
    map_category,
    norm_time,
    parse_object,
    row_scope,
)
from engine.importers.neoagent_spans import locate_chunk, utf16_to_index
from engine.scope import Scope
from engine.store.neoagent import file_sha256
from tests.engine.neoagent_common import by_ref, engine  # noqa: F401
from tests.fixtures.neoagent_db import DOC_A, build_large_db, build_quirky_db

A = Scope("1", "agent-a", "agent", "agent-a")
A_CONV = Scope("1", "agent-a", "conversation", "conv-9")
NOAGENT = Scope("1", NO_AGENT, "agent", NO_AGENT)
B = Scope("2", "agent-b", "agent", "agent-b")
B_CONV = Scope("2", "agent-b", "conversation", "c-77")


@pytest.fixture
def quirky(tmp_path):
    return build_quirky_db(tmp_path / "neoagent.db")


def _dir_listing(path):
    return sorted(p.name for p in path.parent.iterdir())


# --- pure pieces ------------------------------------------------------------------------------------------

def test_every_timestamp_format_normalises():
    assert norm_time("2024-03-01 09:00:00") == "2024-03-01T09:00:00Z"
    assert norm_time("2024-03-05T12:30:00.000Z") == "2024-03-05T12:30:00Z"
    assert norm_time("2024-03-05T14:30:00+02:00") == "2024-03-05T12:30:00Z"
    assert norm_time("Tue, 31 Mar 2026 09:12:44 +0200") == "2026-03-31T07:12:44Z"  # Gmail's Date: header
    assert norm_time("31 Mar 2026 09:12:44 GMT") == "2026-03-31T09:12:44Z"
    assert norm_time("") is None and norm_time(None) is None
    for bad in ("yesterday", "2024-13-01 00:00:00", 1709283600):
        with pytest.raises(ValueError):
            norm_time(bad)


def test_json_columns_parse_defensively():
    assert parse_object('{"a": 1}') == ({"a": 1}, True)
    assert parse_object(None) == ({}, True) and parse_object("") == ({}, True)
    assert parse_object("{not json") == ({}, False)
    assert parse_object("[1, 2]") == ({}, False)


def test_spans_are_exact_or_refused_and_utf16_offsets_are_converted():
    doc = "ab\U0001F3E0cd"
    assert utf16_to_index(doc, 4) == 3 and utf16_to_index(doc, 3) is None  # 3 splits the surrogate pair
    assert (locate_chunk(doc, 3, 5, "cd").start, locate_chunk(doc, 3, 5, "cd").how) == (3, ())
    span = locate_chunk(doc, 4, 6, "cd")
    assert (span.start, span.end, span.how) == (3, 5, ("utf16_offsets",))
    for start, end, text in ((0, 99, "zz"), (0, 2, "xx"), (2, 2, ""), ("0", 2, "ab")):
        with pytest.raises(Exception) as info:
            locate_chunk(doc, start, end, text)
        assert getattr(info.value, "reason", None) == "bad_span"


def test_scope_and_category_rules():
    owner = Scope("1", "agent-a", "agent", "agent-a")
    assert row_scope(owner, "agent-a", "agent", "agent-a") == (owner, None)
    assert row_scope(owner, "agent-a", None, None) == (owner, None)
    assert row_scope(owner, "agent-a", "conversation", "c1") == (Scope("1", "agent-a", "conversation", "c1"), None)
    assert row_scope(owner, "agent-a", "galaxy", "x") == (owner, "unknown_scope_type")
    assert row_scope(owner, "agent-a", "task", "") == (owner, "scope_without_id")
    assert map_category("user_fact") == ("identity", "category_alias")
    assert map_category("Preferences") == ("preferences", None)
    assert map_category("nonsense") == ("episodic", "category_unknown")


# --- the whole import ----------------------------------------------------------------------------------------

def test_import_counts_and_reports_every_row_that_does_not_fit(engine, quirky):
    report = import_neoagent(engine, quirky.path).as_dict()
    assert report["imported"] == {"chunks": 7, "conflicts": 1, "documents": 3, "entities": 3, "facts": 9,
                                  "memories": 15, "mentions": 5, "relations": 4, "sources": 8, "traces": 4}
    # only really broken rows are skipped: a chunk whose text is not at its span, dangling references,
    # a status NeoAgent never writes
    assert report["skipped"] == {
        "chunks": {"bad_span": 1},
        "facts": {"dangling_reference": 1, "unknown_status": 1},
        "mentions": {"dangling_reference": 2},
        "relations": {"dangling_reference": 1},
        "sources": {"dangling_reference": 2, "reference_to_skipped_row": 1},
    }
    problems = report["problems"]
    assert "chunk-bad" in problems["bad_span"]["examples"][0]
    # a time that is no time: the row keeps its data, the time is unknown, and that is said
    assert problems["bad_timestamp"]["action"] == "imported with the time unknown"
    assert problems["bad_timestamp"]["records"] == {"memories": 1, "facts": 1}
    assert "'zombie'" in problems["unknown_status"]["examples"][0]
    assert any("f-ghost" in e for e in problems["dangling_reference"]["examples"])
    assert problems["bad_json"]["records"] == {"memories": 1, "traces": 1, "chunks": 1}
    assert report["notes"]["chunk_utf16_offsets"]["count"] == 1
    assert report["notes"]["category_alias"]["count"] == 3
    assert report["not_imported"] == {"core_memory": 1, "assistant_self_state": 1}
    assert report["embedded"] == 15
    # every owner got its own scope; '' (no agent) became agent "none"
    owners = {(o["memlens_user"], o["memlens_agent"]) for o in report["owners"]}
    assert owners == {("1", "agent-a"), ("1", NO_AGENT), ("2", "agent-b")}
    scopes = set(engine.store.scopes())
    assert {A, A_CONV, NOAGENT, B, B_CONV} <= scopes


def test_spans_are_exact_in_memlens(engine, quirky):
    import_neoagent(engine, quirky.path)
    checked = 0
    for scope in engine.store.scopes():
        data = engine.export(scope)
        docs = {d["id"]: d for d in data["documents"]}
        chunks = {c["id"]: c for c in data["chunks"]}
        for c in data["chunks"]:
            assert docs[c["document_id"]]["text"][c["start"]:c["end"]] == c["text"]
            checked += 1
        for s in data["sources"]:
            ch = chunks[s["chunk_id"]]
            assert (s["start"], s["end"], s["document_id"]) == (ch["start"], ch["end"], ch["document_id"])
    assert checked == 7
    # the chunk NeoAgent stored with UTF-16 offsets lands on the right Python span
    rita = engine.show("memory", by_ref(engine, A)["neoagent:memory:m-rita"]["id"], scope=A)
    assert [s["text"] for s in rita["sources"]] == ["Ana: My sister Rita works at Acme as a nurse."]
    assert DOC_A.index("Ana: My sister") == rita["sources"][0]["start"]


def test_supersession_validity_and_review_carry_over(engine, quirky):
    import_neoagent(engine, quirky.path)
    facts = by_ref(engine, A, "facts")
    lisbon, porto = facts["neoagent:fact:f-lisbon"], facts["neoagent:fact:f-porto"]
    assert lisbon["status"] == "superseded"
    assert (lisbon["valid_from"], lisbon["valid_to"], lisbon["invalidated_at"], lisbon["learned_at"]) == (
        "2024-01-01T00:00:00Z", "2024-03-05T12:30:00Z", "2024-03-05T12:30:00Z", "2024-03-01T09:00:00Z")
    assert porto["status"] == "active" and porto["supersedes_fact_id"] == lisbon["id"]
    assert porto["relation"] == "updates" and porto["forget_after"] == "2030-01-01T00:00:00Z"
    shown = engine.show("fact", porto["id"], scope=A)
    assert [v["object"] for v in shown["versions"]] == ["Lisbon", "Porto"]
    assert shown["evidence"][0]["text"] == "Ana: Actually I moved to Porto last week \U0001F3E0."
    # relation updates between the memories, with its evidence chunk
    rel = [r for r in shown["relations"] if r["type"] == "updates"]
    assert rel and rel[0]["created_by"] == "import" and rel[0]["evidence_chunk_id"] is not None
    # review -> needs_review with a conflict against the fact metadata names; duplicate -> superseded
    job, sister, dup = (facts[f"neoagent:fact:{k}"] for k in ("f-rita-job", "f-rita-sister", "f-rita-dup"))
    assert job["status"] == "needs_review" and dup["status"] == "superseded" and dup["rule"] == "neoagent_duplicate"
    (conflict,) = engine.conflicts(A)
    assert (conflict["fact_a_id"], conflict["fact_b_id"]) == (job["id"], sister["id"])
    assert conflict["reason"] == "conflicts with an earlier employer"


def test_memory_layout_and_fields(engine, quirky):
    import_neoagent(engine, quirky.path)
    mems = by_ref(engine, A)
    lisbon = mems["neoagent:memory:m-lisbon"]
    assert (lisbon["kind"], lisbon["category"], lisbon["trust"]) == ("fact", "identity", "user")
    assert (lisbon["created_at"], lisbon["updated_at"]) == ("2024-03-01T09:00:00Z", "2024-03-05T12:30:00Z")
    assert mems["neoagent:memory:m-porto"]["importance"] == 0.8
    rita = mems["neoagent:memory:m-rita"]
    assert rita["kind"] == "summary"  # three facts: one memlens memory each, deriving from it
    assert mems["neoagent:fact:f-rita-job"]["text"] == "Rita works_at Acme"
    archived = mems["neoagent:memory:m-archived"]
    assert archived["forgotten_at"] == "2024-03-04T10:00:00Z" and "archived" in archived["forget_reason"]
    peanut = mems["neoagent:memory:m-peanut"]
    assert peanut["pinned"] == 1 and peanut["kind"] == "fact"  # its only fact had an unknown status
    assert mems["neoagent:memory:m-weird-scope"]["scope_type"] == "agent"
    bad_time = mems["neoagent:memory:m-bad-time"]  # created_at 'yesterday-ish': the other time stands in
    assert bad_time["created_at"] == bad_time["updated_at"] == "2024-03-01T09:00:00Z"
    assert by_ref(engine, A, "facts")["neoagent:fact:f-tea"]["valid_from"] is None
    assert set(by_ref(engine, A_CONV)) == {"neoagent:memory:m-conv"}
    bo = by_ref(engine, B)
    assert bo["neoagent:memory:m-bo-bike"]["kind"] == "episode"  # verbatim the text of the chunk it cites
    # a document cited from a conversation scope is copied there, with the chunks
    conv = engine.export(B_CONV)
    assert [d["external_id"] for d in conv["documents"]] == ["neoagent:document:doc-b"]
    assert {c["text"] for c in conv["chunks"]} == {"Bo: I drive a red bike.", "Bo: I started learning Rust."}
    # traces: agent-origin, hashed query, results in rank order; the dangling result dropped
    traces = engine.store.traces(A)
    assert len(traces) == 3 and all(t["query_text"] is None and t["origin"] == "agent" for t in traces)
    first = engine.trace(min(t["id"] for t in traces), scope=A)
    assert [c["memory_id"] for c in first["candidates"]] == [mems["neoagent:memory:m-porto"]["id"],
                                                            mems["neoagent:memory:m-lisbon"]["id"]]


def test_imported_memories_are_recalled(engine, quirky):
    import_neoagent(engine, quirky.path)
    result = engine.recall("Where does Ana live now? Porto", scope=A, origin="operator")
    texts = [r["text"] for r in result.as_dict()["results"]]
    assert "Ana moved to Porto." in texts
    assert engine.counts(A)["embeddings"] == engine.counts(A)["memories"]


def test_reimport_is_idempotent_and_changes_update(engine, quirky, tmp_path):
    first = import_neoagent(engine, quirky.path).as_dict()
    counts = {s: engine.counts(s) for s in engine.store.scopes()}
    second = import_neoagent(engine, quirky.path).as_dict()
    assert second["imported"] == {} and second["updated"] == {}
    assert second["unchanged"] == first["imported"]
    assert {s: engine.counts(s) for s in engine.store.scopes()} == counts
    # NeoAgent changes a memory's text and retires a fact; one memory disappears
    con = sqlite3.connect(quirky.path)
    con.execute("UPDATE memories SET content = 'Ana moved to Porto in March.', updated_at = '2024-03-06 08:00:00'"
                " WHERE id = 'm-porto'")
    con.execute("UPDATE memory_facts SET status = 'expired', invalidated_at = '2024-03-07T00:00:00.000Z'"
                " WHERE id = 'f-porto'")
    con.execute("DELETE FROM memories WHERE id = 'm-conv'")
    con.commit()
    con.close()
    third = import_neoagent(engine, quirky.path).as_dict()
    assert third["updated"] == {"facts": 1, "memories": 1}
    assert third["imported"] == {} and third["retired"] == {"memories": 1} and third["gone_from_source"] == {}
    mems = by_ref(engine, A)
    assert mems["neoagent:memory:m-porto"]["text"] == "Ana moved to Porto in March."
    fact = by_ref(engine, A, "facts")["neoagent:fact:f-porto"]
    assert (fact["status"], fact["invalidated_at"]) == ("expired", "2024-03-07T00:00:00Z")
    assert third["embedded"] == 1  # the changed text got a new vector
    gone = by_ref(engine, A_CONV)["neoagent:memory:m-conv"]  # deleted in NeoAgent: forgotten here, not deleted
    assert gone["forgotten_at"] is not None and "deleted in NeoAgent" in gone["forget_reason"]
    (entry,) = engine.curation_log(A_CONV)
    assert (entry["command"], entry["actor"]) == ("retire", "neoagent-import")


def test_operator_curation_survives_a_reimport_of_unchanged_rows(engine, quirky):
    import_neoagent(engine, quirky.path)
    mid = by_ref(engine, A)["neoagent:memory:m-lisbon"]["id"]
    engine.curator(A).forget(mid, reason="operator says no")
    again = import_neoagent(engine, quirky.path).as_dict()
    assert again["updated"] == {}
    assert engine.store.memory(A, mid).forgotten_at is not None


@pytest.mark.parametrize("wal", [False, True])
def test_the_source_is_never_written(tmp_path, engine, wal):
    quirky = build_quirky_db(tmp_path / "neo.db", wal=wal)
    before, listing = file_sha256(quirky.path), _dir_listing(quirky.path)
    report = import_neoagent(engine, quirky.path)
    import_neoagent(engine, quirky.path)
    assert file_sha256(quirky.path) == before
    assert _dir_listing(quirky.path) == listing  # no -wal/-shm/-journal left beside it
    assert report.source_mode == "private_copy" and report.snapshot["sha256"]["neo.db"] == before


def test_owner_filters_import_only_those_owners(engine, quirky):
    report = import_neoagent(engine, quirky.path, user="1", agent=NO_AGENT).as_dict()
    assert [(o["memlens_user"], o["memlens_agent"]) for o in report["owners"]] == [("1", NO_AGENT)]
    assert set(engine.store.scopes()) == {NOAGENT}
    assert report["imported"]["memories"] == 1 and report["imported"]["traces"] == 1
    report = import_neoagent(engine, quirky.path, user="2").as_dict()
    assert set(engine.store.scopes()) == {NOAGENT, B, B_CONV}
    with pytest.raises(BadInput, match="no NeoAgent owner matches --user 9"):
        import_neoagent(engine, quirky.path, user="9")


def test_no_cross_scope_leak(engine, quirky):
    import_neoagent(engine, quirky.path)
    a = engine.export(A)
    ids_a = {m["id"] for m in a["memories"]}
    for scope in (NOAGENT, B, B_CONV, A_CONV):
        other = engine.export(scope)
        assert not ids_a & {m["id"] for m in other["memories"]}
        assert all(s["memory_id"] not in ids_a for s in other["sources"])
    assert all(r["src_memory_id"] in ids_a and r["dst_memory_id"] in ids_a for r in a["relations"])


def test_not_a_neoagent_database_is_refused_and_nothing_is_written(tmp_path, engine):
    text = tmp_path / "notes.db"
    text.write_text("hello " * 50)
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE memories(id INTEGER PRIMARY KEY, text TEXT)")
    con.commit()
    con.close()
    memlens_db = tmp_path / "memlens.db"
    for path, msg in ((text, "not an SQLite file"), (other, "memories lacks"), (memlens_db, "is a memlens database"),
                      (tmp_path / "missing.db", "no such file")):
        with pytest.raises(BadInput, match=msg):
            import_neoagent(engine, path)
    assert engine.store.scopes() == []


def test_cli_import_json_and_bad_input(tmp_path, quirky, capsys, monkeypatch):
    monkeypatch.setenv("MEMLENS_EMBEDDER", "hashing")
    db = tmp_path / "cli.db"
    code = main(["import", "neoagent", str(quirky.path), "--db", str(db), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    payload = json.loads(out)
    assert payload["imported"]["memories"] == 15 and payload["skipped"]["chunks"] == {"bad_span": 1}
    assert payload["problems"]["unknown_status"]["count"] == 1
    code = main(["import", "neoagent", str(quirky.path), "--db", str(db), "--user", "2", "--agent", "agent-b"])
    out, _ = capsys.readouterr()
    assert code == 0 and "unchanged" in out
    bad = tmp_path / "bad.db"
    bad.write_text("nope " * 40)
    fresh = tmp_path / "fresh.db"
    code = main(["import", "neoagent", str(bad), "--db", str(fresh)])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "not a NeoAgent database" in err
    assert not fresh.exists()  # nothing written, not even an empty memlens file


def test_a_stopped_import_keeps_finished_owners_and_a_rerun_completes(engine, quirky):
    calls = []

    def stop_after_first_owner():
        calls.append(1)
        return len(calls) > 1 and len(engine.store.scopes()) > 0

    with pytest.raises(Cancelled):
        import_neoagent(engine, quirky.path, should_stop=stop_after_first_owner)
    partial = set(engine.store.scopes())
    assert partial and partial != {A, A_CONV, NOAGENT, B, B_CONV}
    report = import_neoagent(engine, quirky.path).as_dict()
    assert set(engine.store.scopes()) >= {A, A_CONV, NOAGENT, B, B_CONV}
    assert report["unchanged"]  # what the first run committed was not written twice


def test_a_large_import_is_complete_and_then_a_no_op(tmp_path, engine):
    """(Its speed is a figure, not an assertion: `memlens import neoagent --json` reports seconds.)"""
    path = tmp_path / "large.db"
    counts = build_large_db(path, memories=2000)
    report = import_neoagent(engine, path).as_dict()
    assert report["imported"]["memories"] >= counts["memories"]
    assert report["imported"]["facts"] == counts["facts"]
    assert report["skipped"] == {}
    again = import_neoagent(engine, path).as_dict()
    assert again["imported"] == {} and again["updated"] == {}


def test_a_copy_in_use_by_neoagent_is_read_through_its_wal(tmp_path, engine):
    path = tmp_path / "live.db"
    build_quirky_db(path, wal=True)
    writer = sqlite3.connect(path)  # NeoAgent running: a live -wal holding a newer memory
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("INSERT INTO memories(id, user_id, agent_id, content, created_at, updated_at)"
                   " VALUES ('m-live', 1, 'agent-a', 'Ana bought a kayak.', '2024-04-01 10:00:00', '2024-04-01 10:00:00')")
    writer.commit()
    try:
        report = import_neoagent(engine, path)
        assert set(report.snapshot["sha256"]) == {"live.db", "live.db-wal"}  # the WAL was copied and recovered
        assert "neoagent:memory:m-live" in by_ref(engine, A)
    finally:
        writer.close()


def test_an_older_neoagent_schema_is_read_with_what_it_has(tmp_path, engine):
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE memories (id TEXT PRIMARY KEY, user_id INTEGER NOT NULL, agent_id TEXT, category TEXT,
          content TEXT NOT NULL, importance INTEGER DEFAULT 5, archived INTEGER DEFAULT 0,
          created_at TEXT DEFAULT (datetime('now')), updated_at TEXT DEFAULT (datetime('now')));
        CREATE TABLE memory_relations (id TEXT PRIMARY KEY, user_id INTEGER NOT NULL, agent_id TEXT,
          from_memory_id TEXT NOT NULL, to_memory_id TEXT NOT NULL, relation_type TEXT NOT NULL);
        INSERT INTO memories(id, user_id, agent_id, category, content) VALUES
          ('a', 3, NULL, 'preference', 'Cy likes rye bread.'), ('b', 3, NULL, 'identity', 'Cy is a baker.');
        INSERT INTO memory_relations VALUES ('r', 3, NULL, 'b', 'a', 'extends');
    """)
    con.close()
    report = import_neoagent(engine, path).as_dict()
    assert report["imported"] == {"memories": 2, "relations": 1}
    assert "memory_facts" in report["missing_tables"] and report["skipped"] == {}
    scope = Scope("3", NO_AGENT, "agent", NO_AGENT)
    mems = by_ref(engine, scope)
    assert mems["neoagent:memory:a"]["category"] == "preferences" and mems["neoagent:memory:a"]["trust"] == "external"
