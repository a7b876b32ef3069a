"""make check-llm's report (tests/llm_check/check_llm.py), fed by llm_calls rows that the scripted server
produced the way the real llama.cpp server does: the summary counts what happened, and the
protocol check fails on what it must fail on."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from engine.embed.hashing import HashingEmbedder
from engine.llm import LLMClient, LLMConfig
from engine.memory import MemoryEngine
from engine.scope import Scope
from tests.fixtures.openai_server import LLAMA_CPP_FORMATS, Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
SCOPE = Scope.default(None, None)


@pytest.fixture(scope="module")
def check_llm():
    spec = importlib.util.spec_from_file_location("check_llm", ROOT / "tests" / "llm_check" / "check_llm.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_llm"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("check_llm", None)


def _rows(tmp_path, *replies):
    turns = [{"role": "user", "name": "Ana", "content": f"I adopted dog number {i}."} for i in range(16)]
    with ScriptedOpenAIServer(response_formats=LLAMA_CPP_FORMATS) as server, \
            LLMClient(LLMConfig(base_url=server.base_url, model="m", max_retries=0, timeout=5)) as client, \
            MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(), llm=client) as engine:
        server.queue_chat(*replies)
        engine.add_turns(turns, scope=SCOPE, extract="llm")
    return tmp_path / "m.db"


def test_the_summary_counts_requests_modes_fallbacks_and_failures(tmp_path, check_llm):
    db = _rows(tmp_path, Reply.prose({"memories": []}), Reply.text("no JSON here"))
    rows = check_llm.calls_of(db, SCOPE)
    s = check_llm.summarise("extraction", rows, ["1 windows left queued"], [])
    assert (s["requests"], s["calls"], s["answered"]) == (3, 2, 1)
    assert s["failures"] == {"format_refused": 1, "malformed_json": 1}
    assert s["fallbacks"] == ["json_schema refused, asking again as json_object", "1 windows left queued"]
    assert s["modes"] == {"json_schema": 1, "json_object": 2}
    assert s["prompt_tokens"] > 0 and s["latency_ms"]["max"] >= s["latency_ms"]["p50"] > 0
    assert check_llm.protocol_problems(s, rows) == []


def test_the_protocol_check_fails_on_an_accepted_invalid_reply_and_on_transport_only(tmp_path, check_llm):
    db = _rows(tmp_path, {"memories": []}, {"memories": []})
    rows = check_llm.calls_of(db, SCOPE)
    s = check_llm.summarise("extraction", rows, [], [])
    assert check_llm.protocol_problems(s, rows) == []
    forged = [dict(rows[1], response='{"memories": "lots"}')]  # ok=1, but not what the schema says
    assert "does not validate" in check_llm.protocol_problems(s, forged)[0]
    refused = [dict(r, ok=0, error="http_500: boom") for r in rows]
    assert "every request failed on the protocol" in check_llm.protocol_problems(s, refused)[-1]
    assert "no request was recorded" in check_llm.protocol_problems(s, [])[0]
    assert "untyped error" in check_llm.protocol_problems(s, [dict(rows[1], ok=0, error="weird")])[0]
