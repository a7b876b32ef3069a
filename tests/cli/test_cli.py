"""The CLI contract: JSON shapes, exit status 2 for bad input with nothing written, crash safety."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from app.cli import main
from tests.cli.helpers import run

ROOT = Path(__file__).resolve().parents[2]


def write_chat(path: Path, n_conversations: int = 2, n_messages: int = 3) -> Path:
    convs = [
        {"id": f"conv-{i}", "title": f"Conversation {i}", "messages": [
            {"role": "user" if j % 2 == 0 else "assistant", "content": f"Message {j} of conversation {i} about Lisbon trips.",
             "timestamp": f"2024-03-{(i % 27) + 1:02d}T10:{j % 60:02d}:00Z"}
            for j in range(n_messages)]}
        for i in range(n_conversations)
    ]
    path.write_text(json.dumps(convs), encoding="utf-8")
    return path


def test_ingest_json_counts_and_noop(tmp_path, capsys):
    src = write_chat(tmp_path / "chats.json")
    db = tmp_path / "m.db"
    code, out, err = run(capsys, "ingest", src, "--db", db, "--json")
    assert code == 0, err
    report = json.loads(out)
    for key in ("documents", "chunks", "memories", "facts", "skipped", "failed", "seconds"):
        assert key in report
    assert (report["documents"], report["chunks"], report["memories"], report["skipped"]) == (2, 6, 6, 0)
    code, out, _ = run(capsys, "ingest", src, "--db", db, "--json")
    assert code == 0 and json.loads(out)["skipped"] == 2 and json.loads(out)["documents"] == 0


def test_show_and_export_shapes(tmp_path, capsys):
    src = write_chat(tmp_path / "chats.json")
    db = tmp_path / "m.db"
    run(capsys, "ingest", src, "--db", db, "--json")
    code, out, _ = run(capsys, "export", "--db", db, "--json")
    data = json.loads(out)
    assert set(data) >= {"documents", "chunks", "memories", "facts", "relations", "sources"}
    doc = data["documents"][0]
    for key in ("id", "text", "source_type", "trust"):
        assert key in doc
    for ch in data["chunks"]:
        assert {"id", "document_id", "kind", "start", "end", "text"} <= set(ch)
    for src_row in data["sources"]:
        assert {"memory_id", "chunk_id", "start", "end"} <= set(src_row)
    mid = data["memories"][0]["id"]
    code, out, _ = run(capsys, "show", "memory", mid, "--db", db, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["memory"]["id"] == mid
    assert shown["sources"][0]["text"] == shown["memory"]["text"]
    code, out, _ = run(capsys, "show", "document", doc["id"], "--db", db, "--json")
    assert json.loads(out)["chunks"][0]["document_id"] == doc["id"]
    code, _, err = run(capsys, "export", "--db", db, "--format", "csv")
    assert code == 2 and "--out FOLDER or --out FILE.zip" in err


def _csv_tables(read) -> dict[str, list[dict]]:
    import csv
    import io

    return {name.removesuffix(".csv"): list(csv.DictReader(io.StringIO(text))) for name, text in read()}


def test_csv_export_is_one_file_per_table_in_a_folder_or_a_zip(tmp_path, capsys):
    import zipfile

    db = tmp_path / "m.db"
    run(capsys, "ingest", write_chat(tmp_path / "chats.json"), "--db", db, "--json")
    data = json.loads(run(capsys, "export", "--db", db, "--json")[1])
    code, out, err = run(capsys, "export", "--db", db, "--format", "csv", "--out", tmp_path / "csv", "--json")
    assert code == 0, err
    folder = tmp_path / "csv"
    from_folder = _csv_tables(lambda: [(p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.iterdir())])
    code, _, err = run(capsys, "export", "--db", db, "--format", "csv", "--out", tmp_path / "x.zip")
    assert code == 0, err
    with zipfile.ZipFile(tmp_path / "x.zip") as zf:
        from_zip = _csv_tables(lambda: [(n, zf.read(n).decode("utf-8")) for n in zf.namelist()])
    for tables in (from_folder, from_zip):
        assert set(tables) == set(data)  # every table, each its own file with its own header
        for table, rows in data.items():
            assert len(tables[table]) == len(rows)
            if rows:
                assert list(tables[table][0]) == list(rows[0])  # the header row is the table's columns
                assert [r["id"] for r in tables[table]] == [str(r["id"]) for r in rows]
    memories = {int(r["id"]): r["text"] for r in from_folder["memories"]}
    assert memories == {m["id"]: m["text"] for m in data["memories"]}
    assert json.loads(out)["tables"]["memories"] == len(data["memories"])
    # An existing file where a folder is asked for (or the reverse) is refused.
    assert run(capsys, "export", "--db", db, "--format", "csv", "--out", tmp_path / "chats.json")[0] == 2


def _snapshot(path: Path) -> str | None:
    if not path.exists():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("case", ["malformed", "binary", "empty", "missing", "unknown_shape", "bad_format"])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, case):
    db = tmp_path / "m.db"
    good = write_chat(tmp_path / "good.json")
    run(capsys, "ingest", good, "--db", db, "--json")
    before = _snapshot(db), _snapshot(Path(str(db) + "-wal"))
    bad = tmp_path / "bad.json"
    args = [bad]
    if case == "malformed":
        bad.write_text('[{"role": "user", "content": "hi"')
    elif case == "binary":
        bad = tmp_path / "blob.bin"
        bad.write_bytes(bytes(range(256)) * 8)
        args = [bad]
    elif case == "empty":
        bad.write_text("")
    elif case == "missing":
        args = [tmp_path / "nope.json"]
    elif case == "unknown_shape":
        bad.write_text('{"weather": "sunny"}')
    elif case == "bad_format":
        bad.write_text("# A note\n\nplain markdown")
        args = [bad, "--format", "locomo"]
    # A bad file next to a good one: nothing of either is written.
    code, out, err = run(capsys, "ingest", good, *args, "--db", db, "--json")
    assert code == 2, (out, err)
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("memlens: ")
    assert (_snapshot(db), _snapshot(Path(str(db) + "-wal"))) == before


def test_bad_flags_and_foreign_db_exit_2(tmp_path, capsys):
    good = write_chat(tmp_path / "good.json")
    code, _, err = run(capsys, "ingest", good, "--format", "pdf")
    assert code == 2 and err.count("\n") == 1
    foreign = tmp_path / "foreign.db"
    foreign.write_text("definitely not sqlite " * 50)
    code, _, err = run(capsys, "ingest", good, "--db", foreign)
    assert code == 2 and "not a memlens database" in err
    assert foreign.read_text().startswith("definitely not sqlite")
    code, _, err = run(capsys, "show", "memory", "1", "--db", tmp_path / "absent.db")
    assert code == 2 and not (tmp_path / "absent.db").exists()
    code, _, err = run(capsys, "show", "memory", "abc", "--db", tmp_path / "absent.db")
    assert code == 2


def test_show_unknown_id_exits_2(tmp_path, capsys):
    db = tmp_path / "m.db"
    run(capsys, "ingest", write_chat(tmp_path / "c.json"), "--db", db)
    code, out, err = run(capsys, "show", "memory", "99999", "--db", db, "--json")
    assert code == 2 and "no memory 99999" in err


def test_sigkill_mid_ingest_loses_nothing_committed(tmp_path):
    """Kill -9 in the middle of a large ingest, check integrity, re-run, expect no duplicates."""
    src = write_chat(tmp_path / "big.json", n_conversations=400, n_messages=12)
    db = tmp_path / "m.db"
    env = {**os.environ, "MEMLENS_EMBEDDER": "hashing", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "ingest", str(src), "--db", str(db), "--json", "--extract", "none"],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    committed = 0
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists():
                try:
                    probe = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
                    try:
                        committed = probe.execute("SELECT count(*) FROM documents").fetchone()[0]
                    finally:
                        probe.close()
                except apsw.Error:
                    committed = 0
            if committed >= 20:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "ingest finished before it could be killed; make the input larger"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    conn = apsw.Connection(str(db))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        docs_after_kill = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        assert 20 <= docs_after_kill < 400
        # Every finished document is whole: 12 chunks, 12 memories, 12 vectors each.
        per_doc = conn.execute(
            "SELECT d.id, (SELECT count(*) FROM chunks c WHERE c.document_id = d.id) FROM documents d").fetchall()
        assert all(n == 12 for _, n in per_doc)
        assert conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 12 * docs_after_kill
    finally:
        conn.close()
    rerun = subprocess.run([sys.executable, "-m", "app.cli", "ingest", str(src), "--db", str(db), "--json", "--extract", "none"],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert report["skipped"] == docs_after_kill and report["documents"] == 400 - docs_after_kill
    conn = apsw.Connection(str(db))
    try:
        assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] == 400
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 400 * 12
        assert conn.execute("SELECT count(DISTINCT external_id) FROM documents").fetchone()[0] == 400
    finally:
        conn.close()


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("memlens ")


def test_recall_marks_a_fact_sharing_its_turns_place(tmp_path, capsys):
    src = tmp_path / "chat.json"
    src.write_text(json.dumps([{"id": "c", "messages": [
        {"role": "user", "content": "I live in Berlin.", "timestamp": "2024-03-01T10:00:00Z"}]}]), encoding="utf-8")
    db = tmp_path / "m.db"
    code, _, err = run(capsys, "ingest", src, "--db", db, "--extract", "heuristic", "--json")
    assert code == 0, err
    code, out, err = run(capsys, "recall", "Where do I live?", "--db", db, "--k", "1", "--json")
    assert code == 0, err
    results = json.loads(out)["results"]
    assert len(results) == 2 and {r["kind"] for r in results} == {"episode", "fact"}
    assert results[1]["shares_place_with"] == results[0]["memory_id"]
    code, out, _ = run(capsys, "recall", "Where do I live?", "--db", db, "--k", "1")
    assert f"(with m{results[0]['memory_id']}: same source)" in out.splitlines()[2]


def test_recall_says_what_replaced_an_outdated_turn(tmp_path, capsys):
    src = tmp_path / "chat.json"
    src.write_text(json.dumps([
        {"id": "s1", "messages": [{"role": "user", "content": "My name is Dana and I live in Berlin.",
                                   "timestamp": "2024-01-10T10:00:00Z"}]},
        {"id": "s2", "messages": [{"role": "user", "content": "Big news: I moved to Munich last week.",
                                   "timestamp": "2024-06-12T09:30:00Z"}]}]), encoding="utf-8")
    db = tmp_path / "m.db"
    code, _, err = run(capsys, "ingest", src, "--db", db, "--extract", "heuristic", "--json")
    assert code == 0, err
    code, out, err = run(capsys, "recall", "Where do I live now?", "--db", db)
    assert code == 0, err
    lines = out.splitlines()
    berlin = next(i for i, line in enumerate(lines) if "I live in Berlin" in line)
    assert lines[berlin + 1].strip().startswith("[updated on 2024-06-12 by m") and "Munich" in lines[berlin + 1]


def test_perf_data_prints_the_perf_json_shape(tmp_path, capsys):
    data = ROOT / "tests" / "fixtures" / "data" / "bench_locomo_tiny.json"
    code, out, _ = run(capsys, "perf", "--data", data, "--embedder", "hashing", "--memories", 40, "--queries", 5,
                       "--vector-cache", tmp_path / "v.db", "--workdir", tmp_path, "--json")
    assert code == 0
    doc = json.loads(out)
    assert {"memories", "queries", "total_ms", "stages_ms", "vector_recall_at_10", "build_seconds", "db_bytes",
            "peak_rss_bytes", "cpu_ms", "vectors"} <= set(doc)
    assert doc["memories"] >= 40 and doc["queries"] == 5
    code, _, err = run(capsys, "perf", "--data", tmp_path / "none.json", "--embedder", "hashing")
    assert code == 2 and "no such dataset file" in err
