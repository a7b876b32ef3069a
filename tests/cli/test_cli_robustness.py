"""The CLI with real files and a busy database: directory ingest file by file, exit 75 when
another process holds the lock, scope-less commands that say which scope they used, undo that
names what it would not undo, size limits, private outputs."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

import engine.ingest.limits as limits
import engine.store.db as db_module
from app.cli import EX_TEMPFAIL, EXIT_SOME_FAILED
from engine.embed.hashing import HashingEmbedder
from engine.memory import MemoryEngine
from engine.scope import Scope
from tests.cli.helpers import run
from tests.fixtures.lock_holder import hold_write_lock

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
ANA = Scope.default("ana", "bot")


def make_tree(root: Path) -> Path:
    root.mkdir()
    shutil.copy(DATA / "garden.md", root / "garden.md")
    shutil.copy(DATA / "notes.txt", root / "notes.txt")
    shutil.copy(DATA / "chat_messages.json", root / "chat.json")
    (root / "pixel.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    (root / "tool").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(200))
    (root / "noise.md").write_bytes(os.urandom(4096))
    (root / "settings.json").write_text('{"theme": "dark", "font": 12}', encoding="utf-8")
    (root / "broken.json").write_text('[{"role": "user", "content": "hi"', encoding="utf-8")
    (root / "empty.txt").write_text("", encoding="utf-8")
    (root / ".hidden.md").write_text("# secret", encoding="utf-8")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("x", encoding="utf-8")
    return root


def test_directory_ingest_reports_every_file_and_a_bad_file_fails_alone(tmp_path, capsys):
    root = make_tree(tmp_path / "inbox")
    db = tmp_path / "m.db"
    code, out, err = run(capsys, "ingest", root, "--db", db, "--json", "--extract", "none")
    assert code == EXIT_SOME_FAILED, err
    report = json.loads(out)
    files = {Path(f["path"]).name: f for f in report["files"]}
    assert {n for n, f in files.items() if f["status"] == "ingested"} == {"garden.md", "notes.txt", "chat.json"}
    assert {n for n, f in files.items() if f["status"] == "failed"} == {"settings.json", "broken.json"}
    assert {n for n, f in files.items() if f["status"] == "skipped"} == {
        "pixel.png", "tool", "noise.md", "empty.txt", ".hidden.md", ".git"}
    assert "unknown shape" in files["settings.json"]["reason"] and "malformed JSON" in files["broken.json"]["reason"]
    assert "PNG" in files["pixel.png"]["reason"] and "ELF" in files["tool"]["reason"]
    assert files["noise.md"]["reason"].startswith("binary file") and files[".git"]["reason"] == "hidden directory"
    assert all(f["reason"] for f in report["files"] if f["status"] != "ingested")
    assert (report["failed"], report["skipped"], report["unchanged"]) == (2, 6, 0)
    assert report["documents"] == sum(f["documents"] for f in report["files"] if f["status"] == "ingested") > 0
    # The good files were committed although two failed.
    with MemoryEngine(db, embedder=HashingEmbedder(), create=False) as engine:
        assert engine.counts(Scope.default())["documents"] == report["documents"]
    # The text summary lists each file that was not ingested, with its reason; a re-run is unchanged.
    code, out, err = run(capsys, "ingest", root, "--db", db, "--extract", "none")
    assert code == EXIT_SOME_FAILED
    assert "3 unchanged, 6 files skipped, 2 failed" in out
    assert any(line.split()[:1] == ["failed"] and "settings.json" in line for line in out.splitlines())
    # Only good files: exit 0.
    for name in ("settings.json", "broken.json"):
        (root / name).unlink()
    assert run(capsys, "ingest", root, "--db", db, "--json")[0] == 0


def test_a_named_bad_file_still_refuses_the_whole_run(tmp_path, capsys):
    root = make_tree(tmp_path / "inbox")
    db = tmp_path / "m.db"
    code, _, err = run(capsys, "ingest", root / "garden.md", root / "settings.json", "--db", db)
    assert code == 2 and "settings.json" in err and not db.exists()


def test_a_held_write_lock_exits_75_with_its_own_message(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_MS", 300)
    db = tmp_path / "m.db"
    assert run(capsys, "ingest", DATA / "chat_messages.json", "--db", db, "--json")[0] == 0
    with hold_write_lock(db):
        code, out, err = run(capsys, "ingest", DATA / "notes.txt", "--db", db, "--json")
        assert code == EX_TEMPFAIL and out == ""
        assert err.count("\n") == 1 and "busy" in err and "retry" in err and "nothing was written" in err
        code, out, err = run(capsys, "status", "--db", db, "--json")  # reading never waits
        assert code == 0, err
        assert json.loads(out)["counts"]["documents"] == 1
    assert run(capsys, "ingest", DATA / "notes.txt", "--db", db, "--json")[0] == 0


def test_scope_less_commands_name_the_scope_and_list_the_others(tmp_path, capsys):
    db = tmp_path / "m.db"
    assert run(capsys, "ingest", DATA / "chat_messages.json", "--db", db, "--user", "ana", "--agent", "bot")[0] == 0
    code, out, err = run(capsys, "status", "--db", db)
    assert code == 0
    assert "scope --user default --agent default (the default: no --user/--agent/--scope given)" in out
    assert "other scopes in this file:" in out and "--user ana --agent bot:" in out
    for argv in (("export",), ("recall", "garden"), ("facts",)):
        code, out, err = run(capsys, *argv, "--db", db)
        assert code == 0, err
        assert "scope --user default --agent default" in err and "also holds --user ana --agent bot (" in err
    payload = json.loads(run(capsys, "status", "--db", db, "--json")[1])
    assert payload["scope"]["user_id"] == "default"
    assert [(s["user_id"], s["agent_id"]) for s in payload["scopes"]] == [("ana", "bot")]
    assert payload["scopes"][0]["memories"] > 0
    # Naming the scope silences the note.
    code, out, err = run(capsys, "export", "--db", db, "--user", "ana", "--agent", "bot")
    assert code == 0 and err == "" and json.loads(out)["memories"]


def test_undo_names_the_latest_entry_it_would_not_undo(tmp_path, capsys):
    db = tmp_path / "m.db"
    with MemoryEngine(db, embedder=HashingEmbedder(), llm=None) as engine:
        added = engine.add_turns([{"role": "user", "content": "I live in Porto."}], scope=ANA, extract="none")
        entry = engine.curator(ANA, actor="agent").forget(added.memory_ids[0], reason="the user asked")
    code, _, err = run(capsys, "undo", "--db", db, "--user", "ana", "--agent", "bot")
    assert code == 2
    assert f"the latest entry, {entry.log_id} (forget memory {added.memory_ids[0]} by the agent" in err
    assert f"memlens undo {entry.log_id}" in err
    code, out, err = run(capsys, "undo", entry.log_id, "--db", db, "--user", "ana", "--agent", "bot", "--json")
    assert code == 0, err
    assert json.loads(out)["undid"] == entry.log_id


def test_ingest_seconds_include_extraction(tmp_path, capsys):
    msgs = [{"role": "user", "content": f"My favourite colour is blue. Turn {i}."} for i in range(200)]
    src = tmp_path / "repeat.json"
    src.write_text(json.dumps(msgs), encoding="utf-8")
    code, out, err = run(capsys, "ingest", src, "--db", tmp_path / "m.db", "--json", "--extract", "heuristic")
    assert code == 0, err
    report = json.loads(out)
    assert report["extraction"]["facts_reinforced"] > 0 and report["extract_seconds"] > 0
    assert report["seconds"] >= report["extract_seconds"] + report["embed_seconds"]


def test_size_limits_are_clear_one_line_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(limits, "MAX_TURN_CHARS", 1000)
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", 5000)
    db = tmp_path / "m.db"
    chat = tmp_path / "long-turn.json"
    chat.write_text(json.dumps([{"role": "user", "content": "word " * 300}]), encoding="utf-8")
    code, _, err = run(capsys, "ingest", chat, "--db", db)
    assert code == 2 and "message 0 has 1,500 characters; a turn may hold at most 1,000" in err
    big = tmp_path / "big.txt"
    big.write_text("Lisbon is lovely. " * 400, encoding="utf-8")
    code, _, err = run(capsys, "ingest", big, "--db", db)
    assert code == 2 and "7,200 bytes; memlens reads at most 5,000 bytes" in err
    assert not db.exists()
    with MemoryEngine(db, embedder=HashingEmbedder(), llm=None) as engine:
        from engine.errors import BadInput

        with pytest.raises(BadInput, match="a turn may hold at most 1,000"):
            engine.add_turns([{"role": "user", "content": "x" * 1001}], scope=ANA)
        assert engine.counts(ANA)["memories"] == 0


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
def test_status_says_when_others_can_read_the_database_and_exports_are_private(tmp_path, capsys):
    db = tmp_path / "m.db"
    assert run(capsys, "ingest", DATA / "chat_messages.json", "--db", db)[0] == 0
    code, out, _ = run(capsys, "status", "--db", db, "--json")
    assert json.loads(out)["readable_by_others"] is None
    os.chmod(db, 0o644)
    code, out, _ = run(capsys, "status", "--db", db)
    assert "warning: m.db can be read by everyone on this machine (mode 0644)" in out
    assert json.loads(run(capsys, "status", "--db", db, "--json")[1])["readable_by_others"]
    os.chmod(db, 0o600)
    for argv in (("--out", tmp_path / "e.json"), ("--format", "csv", "--out", tmp_path / "e.zip"),
                 ("--format", "csv", "--out", tmp_path / "csvdir")):
        assert run(capsys, "export", "--db", db, *argv)[0] == 0
    for path in (tmp_path / "e.json", tmp_path / "e.zip", *(tmp_path / "csvdir").iterdir()):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE((tmp_path / "csvdir").stat().st_mode) == 0o700
