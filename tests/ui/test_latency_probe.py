"""The event-loop latency probe runs end to end on the bundled demo inputs and reports every phase."""

from __future__ import annotations

import json

import pytest

from app import latency_probe

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")


def test_probe_reports_open_ingest_and_benchmark(qapp, capsys):
    assert latency_probe.main([]) == 0
    out = json.loads(capsys.readouterr().out)
    phases = [r["phase"].split()[0] for r in out["results"]]
    assert phases == ["open", "ingest", "benchmark"]
    for r in out["results"]:
        assert r["error"] is None and r["ticks"] > 0
        assert r["max_stall_ms"] >= r["p99_ms"] > 0
        assert all(0 <= when and ms <= r["max_stall_ms"] for when, ms in r["worst"])
