"""The NeoAgent import against what NeoAgent really writes (NEOAGENT-SCHEMA.md section 2).

The database is built the way NeoAgent builds and fills it (tests/fixtures/neoagent_db.py: its DDL in
boot order, every chunk shape, every time format) and a real NeoAgent-like process
(tests/fixtures/neoagent_writer.py) opens, writes, checkpoints and closes it during the import.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli import EX_TEMPFAIL, main
from engine.errors import BadInput, Busy
from engine.importers.neoagent import NO_AGENT, import_neoagent, in_sentence, open_source
from engine.scope import Scope
from engine.store import snapshot
from tests.engine.neoagent_common import by_ref, engine  # noqa: F401
from tests.fixtures.neoagent_db import LIVE_BATCH, MAIN, build_neoagent_db, seed_live_db

REPO = Path(__file__).resolve().parents[2]
A = Scope("1", MAIN, "agent", MAIN)
NOAGENT = Scope("1", NO_AGENT, "agent", NO_AGENT)
B = Scope("2", "agent-bo", "agent", "agent-bo")
B_CONV = Scope("2", "agent-bo", "conversation", "c-77")


@pytest.fixture
def neo(tmp_path):
    return build_neoagent_db(tmp_path / "neoagent.db")


def _file_set(path: Path) -> dict[str, str]:
    """sha256 of the database and every side file beside it (and which exist)."""
    out = {}
    for p in sorted(path.parent.iterdir()):
        if p.name.startswith(path.name):
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class Writer:
    """tests/fixtures/neoagent_writer.py in its own process, driven line by line."""

    def __init__(self, path: Path, *mode: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fixtures.neoagent_writer", str(path),
                                      *(mode or ("serve",))],
                                     cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.read() == "ok ready"

    def read(self) -> str:
        line = self.proc.stdout.readline().strip()
        assert line, f"the writer died (exit {self.proc.poll()})"
        return line

    def do(self, command: str) -> None:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        assert self.read() == f"ok {command.split()[0]}"

    def close(self) -> None:
        """Let it finish what it is doing (closing stdin stops it), then reap it."""
        try:
            self.proc.stdin.close()
        except OSError:  # it is gone already (a crash): nothing to flush to
            pass
        self.proc.stdout.read()
        self.proc.stdout.close()
        self.proc.wait(timeout=120)


# --- pure rules ---------------------------------------------------------------------------------------------

def test_sentence_initial_words_are_not_entities_unless_seen_mid_sentence():
    assert not in_sentence("She says Rita visits on Friday.", "She", "concept")
    assert not in_sentence("Ana moved. The flat is small.", "The", "concept")
    assert in_sentence("Ana moved to Porto.", "Porto", "concept")
    assert in_sentence("Porto is far. We like Porto.", "Porto", "concept")  # once mid-sentence is enough
    assert in_sentence("Write to landlord@example.com today.", "landlord@example.com", "email")
    assert in_sentence("Nothing to go on.", "Zed", "concept")


# --- the whole import ------------------------------------------------------------------------------------------

def test_nothing_real_is_skipped_and_every_linked_memory_keeps_its_span(engine, neo):
    report = import_neoagent(engine, neo.path).as_dict()
    assert report["skipped"] == {}
    assert "bad_span" not in report["problems"] and "bad_timestamp" not in report["problems"]
    checked = 0
    for scope in (A, B):
        data = engine.export(scope)
        docs = {d["id"]: d for d in data["documents"]}
        chunks = {c["id"]: c for c in data["chunks"]}
        mems = {m["id"]: m for m in data["memories"]}
        sources: dict[str, list[dict]] = {}
        for s in data["sources"]:
            sources.setdefault(mems[s["memory_id"]]["external_ref"], []).append(s)
        for c in data["chunks"]:  # memlens keeps text[start:end] == chunk text, always
            assert docs[c["document_id"]]["text"][c["start"]:c["end"]] == c["text"]
        for mid, body in neo.linked.items():
            ref = f"neoagent:memory:{mid}"
            if ref not in {m["external_ref"] for m in mems.values()}:
                continue
            (s,) = sources[ref]
            assert docs[s["document_id"]]["text"][s["start"]:s["end"]] == body, mid
            chunk = chunks[s["chunk_id"]]
            stored = neo.chunks[chunk["meta"]["neoagent"]["id"]]
            shape = tuple(chunk["meta"].get("stored_as", {}).get("how", ()))
            assert shape == neo.shapes[chunk["meta"]["neoagent"]["id"]], mid
            if shape:  # what NeoAgent stored is kept beside the exact span
                assert chunk["meta"]["stored_as"]["text"] == stored.content
            checked += 1
    assert checked == len(neo.linked) == 17


def test_message_chunks_keep_their_speaker_and_time_and_mail_dates_are_read(engine, neo):
    import_neoagent(engine, neo.path)
    data = engine.export(A)
    mail = next(d for d in data["documents"] if d["external_id"] == "neoagent:document:doc-mail")
    assert mail["source_time"] == "2026-03-31T07:12:44Z"  # 'Tue, 31 Mar 2026 09:12:44 +0200'
    chat = sorted((c for c in data["chunks"] if c["meta"]["neoagent"].get("chunk_index") is not None
                   and c["kind"] == "message"), key=lambda c: c["start"])
    assert [(c["speaker"], c["role"], c["source_time"]) for c in chat] == [
        ("Ana", None, "2026-03-30T18:01:00Z"), ("assistant", "assistant", "2026-03-30T18:10:00Z"),
        ("Ana", None, "2026-03-30T18:03:00Z"), (None, None, "2026-03-30T18:10:00Z")]
    assert chat[0]["text"] == "I moved to Porto last week \U0001F3E0. The flat is small but bright."
    assert chat[0]["meta"]["stored_as"]["header"] == "2026-03-30T18:01:00.000Z Ana"
    # an ingested memory is its chunk ("<title>\n<chunk text>"): an episode
    mems = by_ref(engine, A)
    assert {mems[f"neoagent:memory:m-doc-chat-{i}"]["kind"] for i in range(4)} == {"episode"}
    assert mems["neoagent:memory:m-doc-mail-0"]["trust"] == "external"
    assert mems["neoagent:memory:m-porto"]["trust"] == "user"  # user_or_verified_conversation


def test_an_overlap_window_gets_the_span_of_the_two_chunks_it_joins(engine, neo):
    report = import_neoagent(engine, neo.path).as_dict()
    window = by_ref(engine, A)["neoagent:memory:m-window"]
    shown = engine.show("memory", window["id"], scope=A)
    (source,) = shown["sources"]
    # from the first chunk's body to the second's, exactly as in the document
    assert source["text"].startswith(neo.linked["m-doc-notes-0"]) and source["text"].endswith(neo.linked["m-doc-notes-1"])
    assert window["kind"] == "episode" and report["notes"]["overlap_window_linked"]["count"] == 1


def test_duplicates_line_up_behind_the_fact_neoagent_kept(engine, neo):
    import_neoagent(engine, neo.path)
    facts = by_ref(engine, A, "facts")
    kept, dup = facts["neoagent:fact:f-flat"], facts["neoagent:fact:f-flat-dup"]
    assert kept["status"] == "active" and dup["status"] == "superseded"
    assert kept["supersedes_fact_id"] == dup["id"] and dup["supersedes_fact_id"] is None
    assert "f-flat" in dup["reason"] and dup["rule"] == "neoagent_duplicate"
    shown = engine.show("fact", dup["id"], scope=A)
    assert [v["id"] for v in shown["versions"]] == [dup["id"], kept["id"]]
    # the plain update chain is new -> old as NeoAgent wrote it
    assert facts["neoagent:fact:f-porto"]["supersedes_fact_id"] == facts["neoagent:fact:f-lisbon"]["id"]
    # status review (no reviewReason in NeoAgent): held for review with a reason of its own
    (conflict,) = engine.conflicts(A)
    assert conflict["fact_a_id"] == facts["neoagent:fact:f-rita"]["id"] and "review" in conflict["reason"]


def test_entities_sentence_starts_and_relation_evidence(engine, neo):
    report = import_neoagent(engine, neo.path).as_dict()
    names = {e["name"] for e in engine.export(A)["entities"]}
    assert names == {"Ana", "Porto", "Rita", "landlord@example.com"}  # not She, not The
    assert report["notes"]["sentence_initial_only"]["count"] == 2
    rels = {(r["type"], r["evidence_chunk_id"] is not None) for r in engine.export(A)["relations"]}
    # evidenceSourceId is the memory's source id: the mail's external id finds the mail's chunk,
    # a consolidation run id finds none
    assert ("extends", True) in rels and ("updates", False) in rels


def test_reimport_is_a_no_op(engine, neo):
    first = import_neoagent(engine, neo.path).as_dict()
    counts = {s: engine.counts(s) for s in engine.store.scopes()}
    log = {s: engine.curation_log(s) for s in engine.store.scopes()}
    second = import_neoagent(engine, neo.path).as_dict()
    assert second["imported"] == {} and second["updated"] == {} and second["retired"] == {}
    assert second["unchanged"] == first["imported"] and second["embedded"] == 0
    assert {s: engine.counts(s) for s in engine.store.scopes()} == counts
    assert {s: engine.curation_log(s) for s in engine.store.scopes()} == log
    assert set(engine.store.scopes()) == {A, NOAGENT, B, B_CONV}


def test_deleted_rows_retire_with_an_audit_entry_unless_the_operator_curated_them(engine, neo):
    import_neoagent(engine, neo.path)
    mems = by_ref(engine, A)
    engine.curator(A).pin(mems["neoagent:memory:m-flat"]["id"])  # the operator curates this one
    con = sqlite3.connect(neo.path)
    con.execute("PRAGMA foreign_keys = ON")  # as NeoAgent's driver has it: deletes cascade
    # updateMemory: the memory's facts are re-created under new ids
    con.execute("DELETE FROM memory_facts WHERE id = 'f-porto'")
    con.execute("INSERT INTO memory_facts(id, memory_id, user_id, agent_id, subject, predicate, object, status,"
                " learned_at, supersedes_fact_id) VALUES ('f-porto-2', 'm-porto', 1, ?, 'Ana', 'lives_in',"
                " 'Porto (Bonfim)', 'active', '2026-04-01T09:00:00.000Z', 'f-lisbon')", (MAIN,))
    con.execute("DELETE FROM memories WHERE id IN ('m-rita', 'm-flat')")  # deleted in NeoAgent (facts cascade)
    con.commit()
    con.close()
    report = import_neoagent(engine, neo.path).as_dict()
    assert report["retired"] == {"facts": 2, "memories": 1}  # f-porto, f-rita; m-rita
    # m-flat (two facts: a summary and a fact memory per fact) was curated by the operator: all of it is kept
    assert report["gone_from_source"] == {"facts": 2, "memories": 3}
    assert report["problems"]["curated_in_memlens"]["count"] == 4
    facts = by_ref(engine, A, "facts")
    old = facts["neoagent:fact:f-porto"]
    assert (old["status"], old["rule"]) == ("retracted", "neoagent_deleted") and old["invalidated_at"]
    assert facts["neoagent:fact:f-porto-2"]["status"] == "active"
    assert facts["neoagent:fact:f-flat"]["status"] == "active"  # the operator's
    mems = by_ref(engine, A)
    assert mems["neoagent:memory:m-rita"]["forgotten_at"] and mems["neoagent:memory:m-flat"]["forgotten_at"] is None
    assert engine.conflicts(A) == []  # the review of the deleted fact is dismissed with it
    entry = next(e for e in engine.curation_log(A) if e["command"] == "retire")
    assert entry["actor"] == "neoagent-import"
    images = entry["before"]["rows"]
    assert str(old["id"]) in images["facts"] and images["facts"][str(old["id"])]["status"] == "active"
    again = import_neoagent(engine, neo.path).as_dict()
    assert again["retired"] == {} and again["imported"] == {} and again["updated"] == {}
    # the operator undoes the retirement: the rows are back, and the next import leaves them so
    engine.curator(A).undo(entry["id"])
    assert by_ref(engine, A, "facts")["neoagent:fact:f-porto"]["status"] == "active"
    assert by_ref(engine, A)["neoagent:memory:m-rita"]["forgotten_at"] is None
    after_undo = import_neoagent(engine, neo.path).as_dict()
    assert after_undo["retired"] == {} and after_undo["problems"]["curated_in_memlens"]["count"] == 7
    assert by_ref(engine, A, "facts")["neoagent:fact:f-porto"]["status"] == "active"


# --- the source: never touched, one consistent state --------------------------------------------------------

def test_the_source_and_its_side_files_are_byte_identical_afterwards(tmp_path, engine):
    path = tmp_path / "neoagent.db"
    seed_live_db(path)
    w = Writer(path)
    try:
        w.do("crash c1")  # NeoAgent died: its -wal (with a committed ingestion) and -shm stay behind
    finally:
        w.close()
    assert set(_file_set(path)) == {"neoagent.db", "neoagent.db-wal", "neoagent.db-shm"}
    for leftover in ("with -shm", "without -shm"):
        if leftover == "without -shm":
            (tmp_path / "neoagent.db-shm").unlink()
        before = _file_set(path)
        report = import_neoagent(engine, path).as_dict()
        assert _file_set(path) == before, leftover  # no -shm created, none rewritten, nothing else
        assert engine.counts(A)["memories"] == 150 + LIVE_BATCH  # the crashed round was committed: it is there
        assert report["snapshot"]["sha256"] == {k: v for k, v in before.items() if not k.endswith("-shm")}


def test_a_write_between_copying_the_file_and_its_wal_makes_the_import_retry(tmp_path, engine):
    path = tmp_path / "neoagent.db"
    seed_live_db(path)
    w = Writer(path)
    try:
        w.do("crash c0")  # leaves a -wal, so the copy has two files to get right
    finally:
        w.close()
    w = Writer(path)
    try:
        def neoagent_writes(name, attempt):
            if attempt == 1 and name == "neoagent.db":  # the main file is copied, its WAL not yet
                w.do("round r1")  # start, ingest 200 memories, checkpoint, close
        src = open_source(path, on_copied=neoagent_writes)
        try:
            assert src.snapshot.attempts == 2
            report = import_neoagent(engine, src).as_dict()
        finally:
            src.close()
    finally:
        w.close()
    assert report["skipped"] == {} and engine.counts(A)["memories"] == 150 + 2 * LIVE_BATCH


def test_a_running_writer_never_yields_a_mixed_snapshot(tmp_path, engine, monkeypatch):
    path = tmp_path / "neoagent.db"
    seed_live_db(path)
    # A slow disk: reading in 4 KiB steps with a pause each, so NeoAgent's checkpoints land in the
    # middle of copying the main file (without the re-read check this yields torn copies).
    real_pread = os.pread

    def slow_pread(fd, n, offset):
        time.sleep(0.0002)
        return real_pread(fd, n, offset)

    monkeypatch.setattr(snapshot, "BLOCK", 4096)
    monkeypatch.setattr(snapshot.os, "pread", slow_pread)
    w = Writer(path, "loop", "1.0")  # NeoAgent starts, ingests, checkpoints and stops, again and again
    seen = []
    try:
        for _ in range(6):
            src = open_source(path, wait=60)
            try:
                rows = src.conn.execute(
                    "SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM memory_source_links),"
                    " (SELECT count(*) FROM memory_source_chunks), (SELECT count(*) FROM memory_ingestion_documents),"
                    " (SELECT count(*) FROM memory_source_links l WHERE NOT EXISTS"
                    "  (SELECT 1 FROM memory_source_chunks c WHERE c.id = l.chunk_id))").fetchone()
                assert src.conn.execute("PRAGMA quick_check").fetchone() == ("ok",)
                seen.append((rows, src.snapshot.attempts))
            finally:
                src.close()
        report = import_neoagent(engine, path).as_dict()  # a whole import while it writes
    finally:
        w.close()
    print("snapshots (rows, attempts):", seen)
    for (memories, links, chunks, documents, dangling), _attempts in seen:
        rounds, rest = divmod(memories - 150, LIVE_BATCH)
        assert rest == 0 and links == chunks == memories and documents == rounds + 1 and dangling == 0, seen
    assert report["skipped"] == {} and "dangling_reference" not in report["problems"]
    assert (engine.counts(A)["memories"] - 150) % LIVE_BATCH == 0


def test_a_locked_source_is_a_temporary_failure(tmp_path, engine, capsys, monkeypatch):
    path = tmp_path / "neoagent.db"
    seed_live_db(path)
    before = _file_set(path)
    w = Writer(path)
    try:
        w.do("lock")  # NeoAgent holds the file locked while it writes
        with pytest.raises(Busy, match="locked, try again"):
            import_neoagent(engine, open_source(path, wait=0.3))
        monkeypatch.setenv("MEMLENS_EMBEDDER", "hashing")
        fresh = tmp_path / "fresh.db"
        code = main(["import", "neoagent", str(path), "--db", str(fresh), "--wait", "0.3"])
        _out, err = capsys.readouterr()
        assert code == EX_TEMPFAIL == 75
        assert err.count("\n") == 1 and "locked, try again" in err
        assert not fresh.exists()
        w.do("unlock")
    finally:
        w.close()
    assert engine.store.scopes() == []
    assert import_neoagent(engine, path).as_dict()["imported"]["memories"] == 150  # once released, it works
    assert {k: v for k, v in _file_set(path).items()} == before


def test_no_room_for_the_private_copy_is_bad_input_not_busy(tmp_path, neo, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing" / "dir"))
    with pytest.raises(BadInput, match="cannot make a private copy"):
        open_source(neo.path, wait=0)
