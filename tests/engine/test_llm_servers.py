"""What real local servers do, scripted (issue 22): each behaviour `make check-llm` met on a
llama.cpp server with a small model, or that Ollama / LM Studio / vLLM are known for, and
how the client copes. Every test goes through real HTTP and the real openai client."""

from __future__ import annotations

import json
import time

import pytest

from engine.embed.hashing import HashingEmbedder
from engine.llm import LLMClient, LLMConfig, describe_failure, structured_mode
from engine.memory import MemoryEngine
from engine.scope import Scope
from tests.fixtures.openai_server import LLAMA_CPP_FORMATS, Reply, ScriptedOpenAIServer

SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["answer", "sure"],
    "properties": {"answer": {"type": "string"}, "sure": {"type": "boolean"}},
}
GOOD = {"answer": "Lisbon", "sure": True}
MESSAGES = [{"role": "system", "content": "Answer the question."},
            {"role": "user", "content": "Where does Ana live?"}]


@pytest.fixture
def server(request):
    with ScriptedOpenAIServer(**getattr(request, "param", {})) as srv:
        yield srv
    assert not srv.errors


def client_for(server, records=None, **config):
    config.setdefault("max_retries", 0)
    config.setdefault("timeout", 5.0)
    return LLMClient(LLMConfig(base_url=server.base_url, model="test-model", **config),
                     recorder=None if records is None else records.append)


def ask(client, **kwargs):
    return client.complete_json("ANSWER", MESSAGES, "answer", SCHEMA, **kwargs)


# -- structured output: json_schema -> json_object -> prompt ---------------------------------


@pytest.mark.parametrize("server", [{"response_formats": LLAMA_CPP_FORMATS}], indirect=True)
def test_llama_cpp_refuses_json_schema_and_json_object_carries_the_schema(server):
    records = []
    server.queue_chat(GOOD, GOOD)
    with client_for(server, records) as client:
        first = ask(client)
        second = ask(client)

    assert first.ok and first.data == GOOD and first.mode == "json_object" and first.requests == 2
    assert first.fallbacks == ("json_schema refused, asking again as json_object",)
    refused, answered, again = records
    assert (refused.ok, refused.error) == (False, "format_refused")
    assert "Input should be 'text' or 'json_object'" in refused.detail
    assert "internal_server_error" in refused.response_text  # the 500 body is on record
    assert answered.ok and again.ok
    # the mode is remembered: the second call asks json_object straight away
    assert second.ok and second.requests == 1 and second.mode == "json_object"
    assert structured_mode(server.base_url, "test-model") == "json_object"
    sent = [r.json for r in server.chat_requests]
    assert sent[0]["response_format"]["type"] == "json_schema"
    assert sent[1]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    # json_object constrains syntax only: the last user turn tells the model the shape
    assert json.dumps(SCHEMA, sort_keys=True, separators=(",", ":")) in sent[1]["messages"][-1]["content"]
    assert sent[1]["messages"][0] == MESSAGES[0]
    # prompt and completion tokens of both requests are counted
    assert first.prompt_tokens == answered.prompt_tokens  # the refused request cost none


@pytest.mark.parametrize("server", [{"response_formats": frozenset({"text"})}], indirect=True)
def test_a_server_that_takes_no_response_format_gets_the_schema_in_the_prompt(server):
    records = []
    server.queue_chat(GOOD)
    with client_for(server, records) as client:
        result = ask(client)
    assert result.ok and result.mode == "prompt" and result.requests == 3
    assert [r.error for r in records] == ["format_refused", "format_refused", None]
    last = server.chat_requests[-1].json
    assert "response_format" not in last and '"required":["answer","sure"]' in last["messages"][-1]["content"]


@pytest.mark.parametrize("server", [{"response_formats": LLAMA_CPP_FORMATS}], indirect=True)
def test_the_refusal_is_detected_through_the_clients_own_retries(server):
    """With retries on (the default), the client resends the 500 twice before the mode falls back."""
    server.queue_chat(GOOD)
    started = time.perf_counter()
    with client_for(server, max_retries=2) as client:
        result = ask(client)
    assert result.ok and result.mode == "json_object"
    assert len(server.chat_requests) == 4  # 3 x json_schema (the client's retries), 1 x json_object
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("server", [{"response_formats": LLAMA_CPP_FORMATS}], indirect=True)
def test_a_refused_mode_is_not_asked_again_even_before_a_mode_has_worked(server):
    server.queue_chat(Reply.delayed(2, GOOD), GOOD)  # json_object's first answer comes too late
    with client_for(server, timeout=0.5, first_call_timeout=0) as client:
        first = ask(client)
        second = ask(client)
    assert first.error == "timeout" and first.requests == 2
    assert second.ok and second.requests == 1 and second.mode == "json_object"
    assert [r.json.get("response_format", {}).get("type") for r in server.chat_requests] == [
        "json_schema", "json_object", "json_object"]


def test_an_http_500_that_is_not_about_the_format_is_not_a_mode_change(server):
    server.queue_chat(Reply.error(500, "CUDA out of memory"))
    with client_for(server) as client:
        result = ask(client)
    assert result.error == "http_500" and result.requests == 1
    assert structured_mode(server.base_url, "test-model") is None  # nothing learnt


# -- tolerant parsing, strict validation -----------------------------------------------------


@pytest.mark.parametrize("reply", [
    Reply.prose(GOOD),
    Reply.fenced(GOOD),
    Reply.fenced(GOOD, lang="", before="Here you go:"),
    Reply.reasoning(GOOD),
    Reply.text("Example: {\"answer\": 3}. The real answer: " + json.dumps(GOOD) + " Done."),
], ids=["prose", "fence", "fence-after-prose", "reasoning-preamble", "two-objects"])
def test_json_wrapped_in_text_is_found_and_validated(server, reply):
    server.queue_chat(reply)
    with client_for(server) as client:
        result = ask(client)
    assert result.ok and result.data == GOOD


@pytest.mark.parametrize("wrap", [lambda t: t, lambda t: f"Here: {t}", lambda t: f"```\n{t}\n```"],
                         ids=["bare", "prose", "fence"])
def test_a_raw_newline_inside_a_string_is_read(server, wrap):
    """SmolLM2 on llama.cpp wrote a line break inside a JSON string (invalid strict JSON)."""
    server.queue_chat(Reply.text(wrap('{"answer": "Lisbon,\nPortugal", "sure": true}')))
    with client_for(server) as client:
        result = ask(client)
    assert result.ok and result.data == {"answer": "Lisbon,\nPortugal", "sure": True}


def test_a_caller_with_a_deadline_gets_no_transport_retries(server):
    """The planner and the reranker have a fallback: a retried timeout would multiply their deadline."""
    from engine.prompts import plan_v1, rerank_v1

    busy = Reply.error(503, "busy", headers={"retry-after-ms": "10"})
    server.queue_chat(busy, busy, busy, GOOD)
    with client_for(server, max_retries=2) as client:
        planned = plan_v1.plan(client, "where?", timeout=5)
        reranked = rerank_v1.rerank(client, "where?", [(1, "Ana lives in Lisbon.")], timeout=5)
        answered = ask(client)  # the client's own retries still hold for the others
    assert planned["error"] == reranked["error"] == "http_503"
    assert answered.ok and len(server.chat_requests) == 4


@pytest.mark.parametrize(("reply", "error"), [
    (Reply.prose({"answer": 3, "sure": True}), "schema_mismatch"),
    (Reply.text("I think Ana lives in Lisbon."), "malformed_json"),
    (Reply.text("<think>Lisbon, probably {maybe}"), "malformed_json"),  # never left the preamble
    (Reply.text(""), "empty_response"),  # Gemma 3 on llama.cpp with the llama-2 fallback template
    (Reply.text("  \n"), "empty_response"),
])
def test_nothing_invalid_gets_through(server, reply, error):
    server.queue_chat(reply)
    with client_for(server) as client:
        result = ask(client)
    assert (result.ok, result.error, result.data) == (False, error, None)
    assert result.detail


# -- truncation ------------------------------------------------------------------------------


def test_a_truncated_answer_is_asked_again_once_with_twice_the_room(server):
    records = []
    long = {"answer": "x" * 100, "sure": True}  # ~29 tokens at four characters a token
    server.queue_chat(long, long)
    with client_for(server, records) as client:
        result = ask(client, max_tokens=20)
    assert result.ok and result.data == long and result.requests == 2
    assert result.fallbacks == ("cut at 20 tokens, asking again with 40",)
    assert [r.error for r in records] == ["truncated", None]
    assert [r.json["max_tokens"] for r in server.chat_requests] == [20, 40]
    assert records[0].completion_tokens == 20  # the cut answer's tokens are accounted for


def test_an_answer_still_cut_with_more_room_is_truncated(server):
    records = []
    huge = {"answer": "x" * 400, "sure": True}
    server.queue_chat(huge, huge)
    with client_for(server, records) as client:
        result = ask(client, max_tokens=20)
    assert (result.ok, result.error, result.requests) == (False, "truncated", 2)
    assert "cut at the token limit" in result.detail
    assert [r.error for r in records] == ["truncated", "truncated"]


def test_openai_hosts_get_max_completion_tokens():
    client = LLMClient(LLMConfig(base_url="https://api.openai.com/v1"))
    try:
        request = client._request("m", MESSAGES, "answer", SCHEMA, "json_schema", 300)
    finally:
        client.close()
    assert request["max_completion_tokens"] == 300 and "max_tokens" not in request


# -- slow first call -------------------------------------------------------------------------


@pytest.mark.parametrize("server", [{"first_call_delay": 1.5}], indirect=True)
def test_the_first_call_waits_longer_while_the_model_loads(server):
    server.queue_chat(GOOD, Reply.delayed(1.5, GOOD))
    with client_for(server, timeout=0.5, first_call_timeout=5.0) as client:
        first = ask(client)
        later = ask(client)
    assert first.ok and first.latency_ms >= 1400
    assert later.error == "timeout"  # once warm, the ordinary timeout holds


@pytest.mark.parametrize("server", [{"first_call_delay": 1.5}], indirect=True)
def test_a_first_call_timeout_says_so(server):
    server.queue_chat(GOOD)
    with client_for(server, timeout=0.3, first_call_timeout=0.6) as client:
        result = ask(client)
    assert result.error == "timeout" and "no answer within 0.6 s" in result.detail
    assert "first call" in result.detail


# -- clear one-line errors -------------------------------------------------------------------


@pytest.mark.parametrize(("server", "listed"), [
    ({"known_models_only": True, "models": ()}, "the endpoint lists no models"),
    ({"known_models_only": True, "models": ("gemma3", "qwen2.5")}, "the endpoint lists: gemma3, qwen2.5"),
], indirect=["server"])
def test_an_unknown_model_is_one_clear_line(server, listed):
    with client_for(server) as client:
        result = ask(client)
    assert result.error == "unknown_model" and result.requests == 1
    line = describe_failure(result.error, result.detail)
    assert "\n" not in line
    assert "does not serve model 'test-model' (HTTP 404)" in line
    assert 'model "test-model" not found' in line and listed in line
    assert line.endswith("check the model name")


def test_a_wrong_base_url_is_not_an_unknown_model(server):
    client = LLMClient(LLMConfig(base_url=server.url, model="m", max_retries=0))  # no /v1
    with client:
        result = ask(client)
    assert result.error == "http_404" and "does the base URL end in /v1?" in result.detail


@pytest.mark.parametrize(("status", "hint"), [(401, "check the API key"), (403, "permissions")])
def test_a_refused_request_is_one_clear_line(server, status, hint):
    server.queue_chat(Reply.error(status, "Incorrect API key provided"))
    with client_for(server) as client:
        result = ask(client)
    line = describe_failure(result.error, result.detail)
    assert line.startswith(f"http_{status}: the endpoint refused the request (HTTP {status}): "
                           "Incorrect API key provided")
    assert hint in line and "\n" not in line


@pytest.mark.parametrize("server", [{"models": ()}], indirect=True)
def test_an_empty_model_list_is_an_empty_list_not_an_error(server):
    with client_for(server) as client:
        assert client.list_models() == []


def test_models_cannot_be_listed_from_a_dead_endpoint():
    client = LLMClient(LLMConfig(base_url="http://127.0.0.1:9/v1", max_retries=0))
    with client:
        assert client.list_models(timeout=1.0) is None


# -- through the engine: nothing invalid is stored, every failure is in llm_calls -------------

ANA = Scope.default("ana", "assistant")
CHAT = [{"role": "user", "content": f"I moved to city number {i}.", "name": "Ana"} for i in range(20)]


def test_extraction_stops_at_an_unknown_model_and_leaves_the_rest_queued(tmp_path):
    with ScriptedOpenAIServer(known_models_only=True, models=("gemma3",)) as server, \
            client_for(server) as client, \
            MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(), llm=client) as engine:
        report = engine.add_turns(CHAT, scope=ANA, extract="llm")
        calls = engine.store.llm_calls(ANA)
        facts = engine.facts(ANA)
    extraction = report.extraction
    assert extraction["windows"] == 1 and extraction["failed_windows"] == 1
    assert "extraction stopped, 2 windows left queued" in extraction["stopped"]
    assert "unknown_model" in extraction["stopped"] and "the endpoint lists: gemma3" in extraction["stopped"]
    assert len(calls) == 1 and calls[0]["error"].startswith("unknown_model: ")
    assert "the endpoint lists: gemma3" in calls[0]["error"]  # the row says what to pick instead
    assert facts == []


def test_extraction_through_llama_cpp_records_the_refusal_and_stores_only_valid_facts(tmp_path):
    memory = {"turn": 1, "text": "Ana moved to city number 0.", "subject": "Ana", "predicate": "lives_in",
              "object": "city number 0", "relation": "updates", "category": "location", "confidence": 0.8,
              "importance": 0.6, "static": False, "valid_from": None, "valid_to": None, "forget_after": None,
              "evidence": "I moved to city number 0.", "premises": [], "replaces": None}
    with ScriptedOpenAIServer(response_formats=LLAMA_CPP_FORMATS) as server, \
            client_for(server) as client, \
            MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(), llm=client) as engine:
        server.queue_chat(Reply.prose({"memories": [memory]}),
                          Reply.fenced({"memories": [{**memory, "confidence": "high"}]}),  # invalid
                          Reply.text(""))
        report = engine.add_turns(CHAT, scope=ANA, extract="llm")
        calls = sorted(engine.store.llm_calls(ANA), key=lambda c: c["id"])
        facts = engine.facts(ANA)
    assert [c["error"].split(":")[0] if c["error"] else None for c in calls] == [
        "format_refused", None, "schema_mismatch", "empty_response"]
    assert report.extraction["failed_windows"] == 2 and report.extraction["stopped"] is None
    assert [f["object"] for f in facts] == ["city number 0"]


def test_planner_and_reranker_calls_are_in_llm_calls_and_agent_queries_stay_out(tmp_path):
    with ScriptedOpenAIServer() as server, client_for(server) as client, \
            MemoryEngine(tmp_path / "m.db", embedder=HashingEmbedder(), llm=client) as engine:
        engine.add_turns(CHAT[:3], scope=ANA, extract="none")
        server.queue_chat({"variants": ["city"], "entities": ["Ana"], "intent": "current", "as_of": None},
                          Reply.text("no idea"),
                          {"variants": [], "entities": [], "intent": "current", "as_of": None},
                          {"order": [1], "reason": "x"})
        engine.recall("which secret city?", scope=ANA, weak_top_score=2.0)
        engine.recall("which secret city?", scope=ANA, weak_top_score=2.0, origin="agent")
        calls = sorted(engine.store.llm_calls(ANA), key=lambda c: c["id"])
    assert [(c["task"], c["ok"]) for c in calls] == [("PLAN", 1), ("RERANK", 0), ("PLAN", 1), ("RERANK", 1)]
    assert calls[1]["error"].startswith("malformed_json")
    assert "which secret city?" in calls[0]["request"]
    assert calls[2]["request"] is None and calls[3]["response"] is None  # the agent's query is not kept
    assert calls[2]["request_hash"] and calls[3]["prompt_tokens"]
