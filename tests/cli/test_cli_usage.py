"""How people type memlens: global options on either side of the command, one-line errors with one
prefix, no display for `gui`, records and recall lists a person can read."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from app.display import display_problem
from tests.cli.helpers import run

ROOT = Path(__file__).resolve().parents[2]
TURNS = [
    {"id": "c1", "title": "Trip", "messages": [
        {"role": "user", "content": "I moved to Lisbon in March.\nThe flat is near the river.\n\nIt has a balcony.",
         "timestamp": "2024-03-02T10:00:00Z"},
        {"role": "assistant", "content": "Lisbon in March: noted.", "timestamp": "2024-03-02T10:00:05Z"}]},
]


@pytest.fixture
def db(tmp_path, capsys) -> Path:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(TURNS), encoding="utf-8")
    path = tmp_path / "m.db"
    code, _, err = run(capsys, "--db", path, "--user", "ana", "--agent", "bot", "ingest", src, "--extract", "heuristic")
    assert code == 0, err
    return path


def test_global_options_before_the_command_mean_what_they_mean_after_it(db, capsys):
    before = run(capsys, "--db", db, "--json", "--user", "ana", "--agent", "bot", "status")
    after = run(capsys, "status", "--db", db, "--json", "--user", "ana", "--agent", "bot")
    mixed = run(capsys, "--json", "--user", "ana", "status", "--db", db, "--agent", "bot")
    assert before[0] == after[0] == mixed[0] == 0
    counts = [json.loads(out)["counts"] for _, out, _ in (before, after, mixed)]
    assert counts[0] == counts[1] == counts[2] and counts[0]["documents"] == 1
    # the one after the command wins when both are given (as the command's own option)
    code, out, _ = run(capsys, "--user", "nobody", "status", "--db", db, "--json", "--user", "ana", "--agent", "bot")
    assert json.loads(out)["counts"] == counts[0]


def test_a_global_option_the_command_does_not_take_is_refused_once(capsys):
    code, out, err = run(capsys, "--user", "ana", "perf")
    assert (code, out, err) == (2, "", "memlens: perf does not take --user\n")


@pytest.mark.parametrize("argv, message", [
    (["ingest"], "memlens: ingest: the following arguments are required: paths\n"),
    (["--bogus"], "memlens: unrecognized arguments: --bogus\n"),
    (["show", "planet", "1"], "memlens: show: argument kind: invalid choice: 'planet' "
                              "(choose from 'memory', 'fact', 'document', 'chunk')\n"),
])
def test_usage_errors_carry_the_prefix_once(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (2, "", message)


def test_show_prints_a_readable_record_and_json_only_when_asked(db, capsys):
    code, out, _ = run(capsys, "--db", db, "--user", "ana", "--agent", "bot", "--json", "export")
    data = json.loads(out)
    mid = next(m["id"] for m in data["memories"] if m["kind"] == "episode" and "balcony" in m["text"])
    code, out, err = run(capsys, "show", "memory", mid, "--db", db, "--user", "ana", "--agent", "bot")
    assert code == 0, err
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)
    lines = out.splitlines()
    assert lines[0] == f"memory {mid} · episode"
    # every line of the memory quoted, the source named with its span
    assert "    | The flat is near the river." in lines and "    | It has a balcony." in lines
    assert any(re.match(r"  document \d+ \"Trip\" \(chat\) \[\d+, \d+\), chunk \d+", line) for line in lines)
    assert lines[-1] == "embedding: hashing/hashing-v1-384 (384d)"
    fact = data["facts"][0]
    code, out, _ = run(capsys, "show", "fact", fact["id"], "--db", db, "--user", "ana", "--agent", "bot")
    assert out.startswith(f"fact {fact['id']} [{fact['status']}] {fact['subject']} {fact['predicate']} ")
    assert "evidence (1):" in out
    doc = data["documents"][0]
    code, out, _ = run(capsys, "show", "document", doc["id"], "--db", db, "--user", "ana", "--agent", "bot")
    assert out.splitlines()[0] == f"document {doc['id']} \"Trip\" · chat · trust user" and "chunks (2):" in out
    chunk = data["chunks"][0]
    code, out, _ = run(capsys, "show", "chunk", chunk["id"], "--db", db, "--user", "ana", "--agent", "bot")
    assert out.startswith(f"chunk {chunk['id']} · message · document {doc['id']}") and "    | user: I moved" in out
    code, out, _ = run(capsys, "show", "chunk", chunk["id"], "--db", db, "--user", "ana", "--agent", "bot", "--json")
    assert json.loads(out)["chunk"]["id"] == chunk["id"]


def test_recall_keeps_one_line_per_result_for_memories_with_several_lines(db, capsys):
    code, out, err = run(capsys, "recall", "Lisbon balcony river", "--db", db, "--user", "ana", "--agent", "bot")
    assert code == 0, err
    header, *results = out.splitlines()
    assert header.startswith("trace ") and results
    assert all(re.match(r"^ *\d+\. \[\d\.\d{3}\] m\d+ \S", line) for line in results), out
    assert any("I moved to Lisbon in March. The flat is near the river. It has a balcony." in r for r in results)


def _listening_socket(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    return server


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="Unix sockets")
def test_display_check_connects_to_what_the_environment_names(tmp_path):
    linux = "linux"
    with _listening_socket(tmp_path / "wl-test") as _server:
        env = {"WAYLAND_DISPLAY": "wl-test", "XDG_RUNTIME_DIR": str(tmp_path)}
        assert display_problem(env, linux) is None
        assert "cannot reach the display WAYLAND_DISPLAY=wl-gone" in display_problem(
            env | {"WAYLAND_DISPLAY": "wl-gone"}, linux)
        assert display_problem(env | {"QT_QPA_PLATFORM": "xcb"}, linux) is not None  # X11 asked for: Wayland won't do
    assert display_problem({}, linux).startswith("no display to open the inspector on")
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, linux) is None
    assert display_problem({"DISPLAY": "not a display"}, linux) is not None
    assert display_problem({}, "darwin") is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11/Wayland")
@pytest.mark.parametrize("display", [None, ":97"])
def test_gui_without_a_display_exits_2_with_what_to_do(tmp_path, display):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    if display:
        env["DISPLAY"] = display  # named, but no X server there
    env["XDG_RUNTIME_DIR"] = str(tmp_path)
    for argv in (["gui", "--db", str(tmp_path / "m.db")], ["demo", "--db", str(tmp_path / "demo.db")]):
        proc = subprocess.run([sys.executable, "-m", "app.cli", *argv], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("memlens: ")
        assert "desktop session" in proc.stderr and "memlens snapshot --out DIR" in proc.stderr
        assert not list(tmp_path.glob("*.db"))  # nothing was built or created
