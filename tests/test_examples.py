"""The examples run as users run them: a fresh interpreter, the script's own output."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLENS_", "OPENAI_"))}
    env.update({"MEMLENS_EMBEDDER": "hashing", "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path),
                "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")})
    return subprocess.run([sys.executable, "-W", "error", str(ROOT / "examples" / name)], cwd=tmp_path, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)


def test_agent_memory_example(tmp_path):
    proc = run_example("agent_memory.py", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout
    # two sessions stored; the move to Lisbon replaced the Berlin fact
    assert len(re.findall(r"^stored turns as memories \[[\d, ]+\]; new facts \[[\d, ]+\]", out, re.M)) == 2
    assert re.search(r"; replaced facts \[\d+\]$", out, re.M)
    # the context block: cited lines, the current fact with its history
    context = out.split("each line cites its memory):\n", 1)[1].split("\n\nprofile:", 1)[0].splitlines()
    assert context and all(re.match(r"\[m\d+ · chat:travel chat#\d+ · \d{4}-\d\d-\d\d\] ", line) for line in context)
    assert any("lives in Lisbon. [previously: Berlin" in line for line in context)
    assert re.search(r"^recall trace \d+: ", out, re.M)
    # the profile, each line with its facts
    assert re.search(r"^  The user lives in Lisbon\.  \(facts \[\d+\]\)$", out, re.M)
    assert "Berlin" not in out.split("profile:", 1)[1].split("explain", 1)[0]
    assert re.search(r"^explain m\d+: retrieved - ranked \d+ of \d+", out, re.M)
    assert re.search(r"^forgot m\d+ \(curation log entry \d+\)$", out, re.M)
    assert not list(tmp_path.glob("memlens-example-*"))  # the temporary database was removed
