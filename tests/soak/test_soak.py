"""The soak test, short (make test); `make soak` runs it for minutes (tests/soak/harness.py)."""

from __future__ import annotations

import os
import sys

import pytest

from tests.soak.harness import run_soak

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and /bin/sh")]
SECONDS = float(os.environ.get("MEMLENS_SOAK_SECONDS", "15"))


def test_writers_killed_at_random_never_lock_readers_out_or_lose_a_commit(tmp_path):
    out = run_soak(SECONDS, tmp_path, kill_every=(1.5, 4.0))
    assert out["problems"] == [], out
    assert out["integrity"] == "ok" and out["reader_refusals"] == 0
    assert out["memory_add_acknowledged"] > 0 and out["files_committed"] > 0
    assert out["reader_rounds"] > 0 and out["reader_opens"] > 1 and out["status_runs"] > 0
    assert sum(out["kills"].values()) > 0, out["kills"]
