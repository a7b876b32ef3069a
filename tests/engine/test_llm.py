"""LLMClient against the scripted server: results, typed errors, accounting, configuration."""

from __future__ import annotations

import hashlib
import re
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import BadInput
from engine.llm import (
    DEFAULT_MODEL,
    TASKS,
    LLMCallRecord,
    LLMClient,
    LLMConfig,
    canonical_json,
    validate_json,
)
from tests.fixtures.openai_server import Reply, rough_tokens

FACTS_SCHEMA = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "subject": {"type": "string"},
                    "predicate": {"type": "string"},
                    "object": {"type": "string"},
                    "confidence": {"type": "number"},
                    "valid_from": {"type": ["string", "null"]},
                    "relation": {"enum": ["new", "updates", "extends"]},
                },
                "required": ["subject", "predicate", "object", "confidence", "valid_from",
                             "relation"],
                "additionalProperties": False,
            },
        },
        "count": {"type": "integer"},
        "done": {"type": "boolean"},
    },
    "required": ["facts", "count", "done"],
    "additionalProperties": False,
}
GOOD = {
    "facts": [
        {"subject": "Ana", "predicate": "lives_in", "object": "Lisbon", "confidence": 0.9,
         "valid_from": None, "relation": "new"},
    ],
    "count": 1,
    "done": True,
}
MESSAGES = [
    {"role": "system", "content": "Extract facts."},
    {"role": "user", "content": "Ana moved to Lisbon."},
]
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture
def records():
    return []


@pytest.fixture
def llm(openai_server, records):
    # first_call_timeout=0: these tests time the client out on purpose, first call or not
    config = LLMConfig(base_url=openai_server.base_url, model="test-model", max_retries=0,
                       timeout=5.0, first_call_timeout=0)
    with LLMClient(config, recorder=records.append) as client:
        yield client


def _extract(llm, **kwargs):
    return llm.complete_json("EXTRACT", MESSAGES, "facts", FACTS_SCHEMA, **kwargs)


# -- the ok path -----------------------------------------------------------------------------


def test_ok_path_returns_parsed_data_and_accounting(openai_server, llm):
    openai_server.queue_chat(GOOD)

    result = _extract(llm)

    assert result.ok and result.error is None and result.detail is None
    assert result.data == GOOD
    assert result.raw is not None and result.raw == result.raw.strip()
    assert result.model == "test-model" and result.response_model == "test-model"
    assert result.task == "EXTRACT"
    assert result.completion_tokens == rough_tokens(result.raw)
    assert result.prompt_tokens and result.prompt_tokens > 0
    assert result.latency_ms > 0
    assert re.fullmatch(r"[0-9a-f]{64}", result.request_hash)


def test_request_carries_the_strict_json_schema(openai_server, llm):
    openai_server.queue_chat(GOOD)
    result = _extract(llm)

    (sent,) = openai_server.chat_requests
    assert sent.json["model"] == "test-model"
    assert sent.json["messages"] == MESSAGES
    assert sent.json["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "facts", "schema": FACTS_SCHEMA, "strict": True},
    }
    # The hash is of exactly what went over the wire, canonicalised.
    assert result.request_hash == hashlib.sha256(
        canonical_json(sent.json).encode("utf-8")).hexdigest()


def test_same_request_same_hash_different_request_different_hash(openai_server, llm):
    openai_server.chat_responder = lambda request: GOOD
    a = _extract(llm)
    b = _extract(llm)
    c = llm.complete_json("EXTRACT", MESSAGES[:1], "facts", FACTS_SCHEMA)
    assert a.request_hash == b.request_hash != c.request_hash


def test_task_models_choose_the_model(openai_server):
    config = LLMConfig(base_url=openai_server.base_url, model="base",
                       task_models={"JUDGE": "judge-model"}, max_retries=0)
    openai_server.chat_responder = lambda request: {"verdict": request["model"]}
    schema = {"type": "object", "properties": {"verdict": {"type": "string"}},
              "required": ["verdict"]}
    with LLMClient(config) as llm:
        judged = llm.complete_json("judge", MESSAGES, "verdict", schema)
        answered = llm.complete_json("ANSWER", MESSAGES, "verdict", schema)
    assert (judged.model, judged.data) == ("judge-model", {"verdict": "judge-model"})
    assert (answered.model, answered.data) == ("base", {"verdict": "base"})


def test_unknown_task_is_a_caller_error(llm):
    with pytest.raises(ValueError, match="unknown LLM task"):
        llm.complete_json("SUMMARISE", MESSAGES, "x", {"type": "object"})


def test_placeholder_api_key_when_none_is_configured(openai_server):
    openai_server.queue_chat({"a": 1}, {"a": 1})
    with LLMClient(LLMConfig(base_url=openai_server.base_url, max_retries=0)) as llm:
        assert llm.complete_json("PLAN", MESSAGES, "a", {"type": "object"}).ok
    with LLMClient(LLMConfig(base_url=openai_server.base_url, api_key="sk-real",
                             max_retries=0)) as llm:
        assert llm.complete_json("PLAN", MESSAGES, "a", {"type": "object"}).ok
    first, second = openai_server.chat_requests
    assert first.headers["authorization"] == "Bearer memlens-no-key"
    assert second.headers["authorization"] == "Bearer sk-real"
    assert first.json["model"] == DEFAULT_MODEL


def test_fenced_json_from_a_local_server_is_accepted(openai_server, llm):
    openai_server.queue_chat("```json\n" + canonical_json(GOOD) + "\n```")
    result = _extract(llm)
    assert result.ok and result.data == GOOD


# -- failures are results, not exceptions ----------------------------------------------------


def test_malformed_json(openai_server, llm):
    openai_server.queue_chat('{"facts": [{"subject": "Ana", ')
    result = _extract(llm)
    assert not result.ok
    assert result.error == "malformed_json"
    assert result.data is None
    assert result.raw == '{"facts": [{"subject": "Ana", '
    assert result.detail and result.detail.startswith("not JSON")
    assert result.completion_tokens and result.prompt_tokens  # the call still cost tokens


def test_truncated_answer_says_so(openai_server, llm):
    cut = Reply.text('{"facts": [', finish_reason="length")
    openai_server.queue_chat(cut, cut)  # asked once more with twice the room, cut again
    result = _extract(llm)
    assert result.error == "truncated" and result.requests == 2
    assert "token limit" in (result.detail or "")


@pytest.mark.parametrize(
    ("reply", "where"),
    [
        ({"facts": [], "count": 0}, "$: 'done' is a required property"),
        ({**GOOD, "count": "1"}, "$.count: '1' is not of type 'integer'"),
        ({**GOOD, "done": 1}, "$.done: 1 is not of type 'boolean'"),
        ({**GOOD, "count": True}, "$.count: True is not of type 'integer'"),
        ({**GOOD, "extra": 1}, "('extra' was unexpected)"),
        ({**GOOD, "facts": [{**GOOD["facts"][0], "relation": "replaces"}]},
         "$.facts[0].relation: 'replaces' is not one of"),
        ({**GOOD, "facts": [{**GOOD["facts"][0], "valid_from": 5}]},
         "$.facts[0].valid_from: 5 is not of type 'string', 'null'"),
        ({**GOOD, "facts": {"subject": "x"}}, "$.facts: {'subject': 'x'} is not of type 'array'"),
        ([GOOD], "is not of type 'object'"),
    ],
)
def test_schema_mismatch(openai_server, llm, reply, where):
    openai_server.queue_chat(reply)
    result = _extract(llm)
    assert not result.ok
    assert result.error == "schema_mismatch"
    assert result.data is None
    assert where in (result.detail or "")


def test_http_500(openai_server, llm):
    openai_server.queue_chat(Reply.error(500, "The server had an error"))
    result = _extract(llm)
    assert not result.ok
    assert result.error == "http_500"
    assert "The server had an error" in (result.detail or "")
    assert result.raw and '"server_error"' in result.raw
    assert result.prompt_tokens is None and result.completion_tokens is None
    assert len(openai_server.chat_requests) == 1  # max_retries=0


def test_http_429_is_retried_when_configured(openai_server, records):
    openai_server.queue_chat(Reply.error(429, "slow down", headers={"retry-after-ms": "10"}),
                             GOOD)
    config = LLMConfig(base_url=openai_server.base_url, model="m", max_retries=2)
    with LLMClient(config, recorder=records.append) as llm:
        result = _extract(llm)
    assert result.ok and result.data == GOOD
    assert len(openai_server.chat_requests) == 2
    assert len(records) == 1  # one logical call, however many HTTP attempts


def test_http_400_is_not_retried(openai_server):
    openai_server.queue_chat(Reply.error(400, "maximum context length exceeded",
                                         code="context_length_exceeded"))
    config = LLMConfig(base_url=openai_server.base_url, model="m", max_retries=2)
    with LLMClient(config) as llm:
        result = _extract(llm)
    assert result.error == "http_400"
    assert len(openai_server.chat_requests) == 1


def test_timeout(openai_server, llm):
    openai_server.queue_chat(Reply.delayed(5, GOOD))
    result = _extract(llm, timeout=0.5)
    assert not result.ok
    assert result.error == "timeout"
    assert 400 <= result.latency_ms < 2500
    assert result.data is None


def test_connection_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=2.0)
    with LLMClient(config) as llm:
        result = _extract(llm)
    assert result.error == "connection"
    assert not result.ok and result.data is None


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply.body("<html>oops</html>"), "malformed_json"),
        (Reply.body("{broken", headers={"Content-Type": "application/json"}), "malformed_json"),
        (Reply.body({"unexpected": "envelope"}), "malformed_json"),
        (Reply.body({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                     "choices": []}), "empty_response"),
        (Reply.body({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                     "choices": [{"index": 0, "finish_reason": "stop", "message": {
                         "role": "assistant", "content": None, "refusal": "I can't."}}]}),
         "refusal"),
        (Reply.text(""), "empty_response"),
    ],
)
def test_broken_envelopes(openai_server, llm, reply, error):
    openai_server.queue_chat(reply)
    result = _extract(llm)
    assert (result.ok, result.error, result.data) == (False, error, None)


# -- the recorder ----------------------------------------------------------------------------


def test_recorder_sees_every_call(openai_server, llm, records):
    openai_server.queue_chat(GOOD, "not json", Reply.error(503, "down"), Reply.delayed(5, GOOD))
    results = [_extract(llm), _extract(llm), _extract(llm), _extract(llm, timeout=0.3)]

    assert [r.error for r in results] == [None, "malformed_json", "http_503", "timeout"]
    assert len(records) == 4
    for record, result in zip(records, results):
        assert isinstance(record, LLMCallRecord)
        assert record.task == "EXTRACT"
        assert record.model == "test-model"
        assert record.request_hash == result.request_hash
        assert hashlib.sha256(record.request_json.encode()).hexdigest() == record.request_hash
        assert record.ok == result.ok and record.error == result.error
        assert record.response_text == result.raw
        assert record.prompt_tokens == result.prompt_tokens
        assert record.completion_tokens == result.completion_tokens
        assert 0 < record.latency_ms <= result.latency_ms  # the call adds its bookkeeping
        assert ISO_UTC.match(record.created_at)
    ok, bad_json, down, slow = records
    assert ok.ok and ok.prompt_tokens and ok.completion_tokens
    assert bad_json.response_text == "not json" and bad_json.completion_tokens
    assert down.prompt_tokens is None and '"down"' in (down.response_text or "")
    assert slow.response_text is None and slow.latency_ms >= 250


# -- configuration ---------------------------------------------------------------------------


def test_from_env_none_without_a_base_url():
    assert LLMConfig.from_env({}) is None
    assert LLMConfig.from_env({"OPENAI_API_KEY": "sk-x", "MEMLENS_LLM_MODEL": "m"}) is None
    assert LLMConfig.from_env({"MEMLENS_LLM_BASE_URL": "  "}) is None


def test_from_env_memlens_variables_win():
    config = LLMConfig.from_env({
        "MEMLENS_LLM_BASE_URL": "http://localhost:11434/v1",
        "MEMLENS_LLM_API_KEY": "memlens-key",
        "MEMLENS_LLM_MODEL": "llama3.1",
        "MEMLENS_LLM_MODEL_JUDGE": "qwen2.5:14b",
        "OPENAI_BASE_URL": "https://api.openai.com/v1",
        "OPENAI_API_KEY": "sk-openai",
    })
    assert config is not None
    assert config.base_url == "http://localhost:11434/v1"
    assert config.api_key == "memlens-key"
    assert config.model == "llama3.1"
    assert config.task_models == {"JUDGE": "qwen2.5:14b"}
    assert config.model_for("judge") == "qwen2.5:14b"
    assert config.model_for("EXTRACT") == "llama3.1"


def test_from_env_falls_back_to_openai_variables():
    config = LLMConfig.from_env({
        "OPENAI_BASE_URL": "https://api.openai.com/v1",
        "OPENAI_API_KEY": "sk-openai",
    })
    assert config is not None
    assert (config.base_url, config.api_key, config.model) == (
        "https://api.openai.com/v1", "sk-openai", DEFAULT_MODEL)
    assert config.task_models == {}


def test_from_env_memlens_url_with_openai_key():
    # An OpenAI URL set through MEMLENS_LLM_BASE_URL may use the OpenAI key ...
    config = LLMConfig.from_env({"MEMLENS_LLM_BASE_URL": "https://api.openai.com/v1",
                                 "OPENAI_API_KEY": "sk-openai"})
    assert config is not None and config.api_key == "sk-openai"
    # ... but another server never receives the operator's OpenAI key.
    config = LLMConfig.from_env({"MEMLENS_LLM_BASE_URL": "http://gpu-box:8000/v1",
                                 "OPENAI_API_KEY": "sk-openai"})
    assert config is not None and config.api_key is None


def test_from_env_reads_every_task_model():
    env = {"MEMLENS_LLM_BASE_URL": "http://x/v1"}
    env.update({f"MEMLENS_LLM_MODEL_{t}": f"model-{t.lower()}" for t in TASKS})
    config = LLMConfig.from_env(env)
    assert config is not None
    assert {t: config.model_for(t) for t in TASKS} == {t: f"model-{t.lower()}" for t in TASKS}


def test_from_env_reads_the_timeout():
    base = {"MEMLENS_LLM_BASE_URL": "http://x/v1"}
    assert LLMConfig.from_env(base).timeout == 60.0
    assert LLMConfig.from_env({**base, "MEMLENS_LLM_TIMEOUT": "300"}).timeout == 300.0
    for bad in ("soon", "0", "-5"):
        with pytest.raises(BadInput, match="MEMLENS_LLM_TIMEOUT must be a number of seconds"):
            LLMConfig.from_env({**base, "MEMLENS_LLM_TIMEOUT": bad})


def test_from_env_defaults_to_os_environ(monkeypatch):
    monkeypatch.setenv("MEMLENS_LLM_BASE_URL", "http://127.0.0.1:1/v1")
    config = LLMConfig.from_env()
    assert config is not None and config.base_url == "http://127.0.0.1:1/v1"


# -- the validator ---------------------------------------------------------------------------


def test_validator():
    assert validate_json(GOOD, FACTS_SCHEMA) == []
    assert validate_json(True, {"type": "integer"}) != []  # a boolean is no number in JSON
    assert validate_json(3.0, {"type": "integer"}) == []
    assert validate_json(3.5, {"type": "integer"}) != []
    assert validate_json(1, {"type": "number"}) == []
    assert validate_json(None, {"type": ["string", "null"]}) == []
    assert validate_json(None, {"anyOf": [{"type": "string"}, {"type": "null"}]}) == []
    assert validate_json(2, {"anyOf": [{"type": "string"}, {"type": "null"}]}) != []
    assert validate_json("x", {"const": "x"}) == []
    assert validate_json({"k": 1}, {"type": "object", "additionalProperties":
                                    {"type": "string"}}) == ["$.k: 1 is not of type 'string'"]
    assert validate_json({"anything": [1, None]}, {}) == []
    # every keyword counts now (jsonschema), not only the subset memlens' own schemas use
    assert validate_json("abc", {"type": "string", "maxLength": 2}) != []
    assert validate_json([1, 1], {"type": "array", "uniqueItems": True}) != []
    # the most relevant problem comes first
    problems = validate_json({"facts": [{"subject": 1}], "count": 1, "done": True}, FACTS_SCHEMA)
    assert problems[0].startswith("$.facts[0]")


def test_a_broken_schema_is_a_programming_error_not_a_model_error():
    with pytest.raises(Exception, match="is not valid under any of the given schemas"):
        validate_json({}, {"type": "no-such-type"})


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=6))
def test_canonical_json_ignores_key_order(d):
    reordered = dict(reversed(list(d.items())))
    assert canonical_json(d) == canonical_json(reordered)


def test_the_client_libraries_load_when_first_used(tmp_path):
    """openai and jsonschema took a second of every memlens start on a busy machine; a process
    that calls no model never imports them."""
    import subprocess
    import sys

    code = ("import sys; import engine.memory, app.cli; from engine.llm import openai; "
            "print('openai' in sys.modules, 'jsonschema' in sys.modules); openai.OpenAI; "
            "print('openai' in sys.modules, openai.__version__ == sys.modules['openai'].__version__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", "True", "True"]
