"""The scripted OpenAI-compatible server, exercised through the real openai client."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import openai
import pytest

from tests.fixtures.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    decode_base64_embedding,
    rough_tokens,
)

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
}
MESSAGES = [
    {"role": "system", "content": "Answer in JSON."},
    {"role": "user", "content": "What is the capital of France?"},
]


@pytest.fixture
def client(openai_server):
    with openai_server.client(max_retries=0, timeout=5.0) as c:
        yield c


def _chat(client, **kwargs):
    kwargs.setdefault("model", "test-model")
    kwargs.setdefault("messages", MESSAGES)
    return client.chat.completions.create(**kwargs)


def _server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("scripted-openai")]


# -- chat completions ------------------------------------------------------------------------


def test_fixture_is_running_on_loopback(openai_server):
    assert openai_server.running
    assert openai_server.url.startswith("http://127.0.0.1:")
    assert openai_server.base_url == openai_server.url + "/v1"


def test_structured_output_round_trip(openai_server, client):
    openai_server.queue_chat({"answer": "Paris", "sources": [1, 2]})

    completion = _chat(client, response_format=RESPONSE_FORMAT)

    content = completion.choices[0].message.content
    assert json.loads(content) == {"answer": "Paris", "sources": [1, 2]}
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "test-model"
    assert completion.usage.completion_tokens == rough_tokens(content)
    assert completion.usage.prompt_tokens > 0
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    (sent,) = openai_server.chat_requests
    assert sent.json["response_format"] == RESPONSE_FORMAT
    assert sent.json["messages"] == MESSAGES


def test_prompt_tokens_grow_with_the_request(openai_server, client):
    openai_server.queue_chat({"a": 1}, {"a": 1})
    short = _chat(client, messages=[{"role": "user", "content": "hi"}])
    long = _chat(client, messages=[{"role": "user", "content": "hi " * 400}])
    assert long.usage.prompt_tokens > short.usage.prompt_tokens + 200


def test_usage_can_be_scripted(openai_server, client):
    openai_server.queue_chat(Reply.json({"a": 1}, usage={"prompt_tokens": 11,
                                                          "completion_tokens": 7}))
    usage = _chat(client).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (11, 7, 18)


def test_raw_string_reply_is_sent_verbatim(openai_server, client):
    openai_server.queue_chat('{"answer": "Par')
    assert _chat(client).choices[0].message.content == '{"answer": "Par'


def test_queue_is_fifo_then_responder_answers(openai_server, client):
    seen = []

    def responder(request):
        seen.append(request)
        return {"echo": request["messages"][-1]["content"]}

    openai_server.chat_responder = responder
    openai_server.queue_chat({"n": 1}, Reply.text("two"))

    replies = [
        _chat(client, messages=[{"role": "user", "content": f"q{i}"}]).choices[0].message.content
        for i in range(3)
    ]

    assert replies == ['{"n": 1}', "two", '{"echo": "q2"}']
    assert len(seen) == 1 and seen[0]["model"] == "test-model"
    assert openai_server.pending_chat == 0


def test_unscripted_chat_is_a_loud_500(openai_server, client):
    with pytest.raises(openai.InternalServerError) as info:
        _chat(client)
    assert info.value.code == "unscripted"


def test_scripted_error_has_openai_error_body(openai_server, client):
    openai_server.queue_chat(Reply.error(429, "Rate limit reached", code="rate_limit_exceeded"))
    with pytest.raises(openai.RateLimitError) as info:
        _chat(client)
    err = info.value
    assert err.status_code == 429
    assert err.body == {
        "message": "Rate limit reached",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limit_exceeded",
    }


@pytest.mark.parametrize(
    ("status", "exc_type"),
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (404, openai.NotFoundError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
def test_scripted_status_maps_to_client_exception(openai_server, client, status, exc_type):
    openai_server.queue_chat(Reply.error(status, f"status {status}"))
    with pytest.raises(exc_type) as info:
        _chat(client)
    assert info.value.status_code == status
    assert info.value.body["message"] == f"status {status}"


def test_client_retries_consume_queued_replies(openai_server):
    # retry-after-ms keeps the client's backoff short.
    openai_server.queue_chat(Reply.error(500, "flaky", headers={"retry-after-ms": "10"}),
                             {"answer": "ok"})
    with openai_server.client(max_retries=1, timeout=5.0) as c:
        completion = _chat(c)
    assert json.loads(completion.choices[0].message.content) == {"answer": "ok"}
    retry_counts = [r.headers.get("x-stainless-retry-count") for r in openai_server.chat_requests]
    assert retry_counts == ["0", "1"]


def test_verbatim_body_reply(openai_server, client):
    openai_server.queue_chat(Reply.body("<html>bad gateway</html>", status=502))
    with pytest.raises(openai.InternalServerError) as info:
        _chat(client)
    assert info.value.status_code == 502


def test_responder_that_raises_is_reported(openai_server, client):
    def broken(request):
        raise RuntimeError("responder bug")

    openai_server.chat_responder = broken
    with pytest.raises(openai.InternalServerError) as info:
        _chat(client)
    assert "responder bug" in info.value.message
    # The fixture fails tests whose handlers hit unexpected errors; this one is on purpose.
    assert len(openai_server.errors) == 1
    openai_server.errors.clear()


def test_streaming_is_refused(openai_server, client):
    with pytest.raises(openai.BadRequestError):
        _chat(client, stream=True)


# -- timeouts and shutdown -------------------------------------------------------------------


def test_delayed_reply_makes_client_time_out_quickly(openai_server):
    openai_server.queue_chat(Reply.delayed(5, {"answer": "too late"}))
    with openai_server.client(max_retries=0, timeout=0.5) as c:
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            _chat(c)
        elapsed = time.monotonic() - started
    assert 0.4 < elapsed < 2.5
    assert len(openai_server.chat_requests) == 1


def test_delay_shorter_than_timeout_still_answers(openai_server, client):
    openai_server.queue_chat(Reply.delayed(0.2, {"answer": "slow"}))
    started = time.monotonic()
    completion = _chat(client)
    assert time.monotonic() - started >= 0.2
    assert json.loads(completion.choices[0].message.content) == {"answer": "slow"}


def test_stop_does_not_wait_for_a_sleeping_handler():
    server = ScriptedOpenAIServer().start()
    try:
        server.queue_chat(Reply.delayed(20, {"answer": "never"}))
        with server.client(max_retries=0, timeout=0.3) as c:
            with pytest.raises(openai.APITimeoutError):
                _chat(c)
    finally:
        started = time.monotonic()
        server.stop()
        elapsed = time.monotonic() - started
    assert elapsed < 2.0
    assert not _server_threads()


def test_stop_while_a_client_still_waits():
    server = ScriptedOpenAIServer().start()
    server.queue_chat(Reply.delayed(20, {"answer": "never"}))
    outcome: list[BaseException] = []

    def call() -> None:
        with server.client(max_retries=0, timeout=10.0) as c:
            try:
                _chat(c)
            except openai.OpenAIError as exc:
                outcome.append(exc)

    caller = threading.Thread(target=call, name="test-caller")
    caller.start()
    deadline = time.monotonic() + 5
    while not server.chat_requests and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    caller.join(timeout=5)
    assert time.monotonic() - started < 2.0
    assert not caller.is_alive()
    # The abandoned handler closes the connection without an answer.
    assert len(outcome) == 1 and isinstance(outcome[0], openai.APIConnectionError)


def test_shutdown_leaves_no_threads_and_closes_the_port():
    before = set(threading.enumerate())
    server = ScriptedOpenAIServer().start()
    port = server.port
    server.queue_chat({"a": 1})
    with server.client(max_retries=0, timeout=5.0) as c:
        _chat(c)
        c.models.list()
    assert _server_threads()
    server.stop()
    server.stop()  # idempotent

    assert set(threading.enumerate()) <= before
    assert not server.running
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_context_manager_starts_and_stops():
    with ScriptedOpenAIServer() as server:
        assert server.running
    assert not server.running
    assert not _server_threads()


def test_concurrent_requests(openai_server):
    openai_server.chat_responder = lambda req: {"echo": req["messages"][0]["content"]}
    with openai_server.client(max_retries=0, timeout=5.0) as c:
        def ask(i: int) -> str:
            msg = [{"role": "user", "content": f"q{i}"}]
            return _chat(c, messages=msg).choices[0].message.content

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(ask, range(24)))
    assert answers == [json.dumps({"echo": f"q{i}"}) for i in range(24)]
    assert len(openai_server.chat_requests) == 24


# -- embeddings ------------------------------------------------------------------------------


def test_embeddings_default_request_is_base64_and_decodes_to_the_hashing_vectors(
    openai_server, client
):
    texts = ["the cat sat on the mat", "a dog barked"]
    response = client.embeddings.create(model="test-embedding", input=texts)

    (sent,) = openai_server.embedding_requests
    assert sent.json["encoding_format"] == "base64"  # the client's own default
    expected = openai_server.embedder().embed(texts)
    got = np.asarray([d.embedding for d in response.data], dtype=np.float32)
    assert got.shape == (2, 384)
    np.testing.assert_array_equal(got, expected)
    assert [d.index for d in response.data] == [0, 1]
    assert response.model == "test-embedding"
    assert response.usage.prompt_tokens == sum(rough_tokens(t) for t in texts)


def test_embeddings_explicit_base64_is_little_endian_float32(openai_server, client):
    response = client.embeddings.create(model="e", input="hello world", encoding_format="base64")
    raw = response.data[0].embedding
    assert isinstance(raw, str)
    np.testing.assert_array_equal(
        decode_base64_embedding(raw), openai_server.embedder().embed(["hello world"])[0]
    )


def test_embeddings_float_format(openai_server, client):
    response = client.embeddings.create(
        model="e", input=["hello world", "bye"], encoding_format="float"
    )
    (sent,) = openai_server.embedding_requests
    assert sent.json["encoding_format"] == "float"
    assert '"embedding": [' in _raw_embedding_body(openai_server, "float")
    got = np.asarray([d.embedding for d in response.data], dtype=np.float32)
    np.testing.assert_array_equal(got, openai_server.embedder().embed(["hello world", "bye"]))


def _raw_embedding_body(server: ScriptedOpenAIServer, fmt: str) -> str:
    """The HTTP body itself, fetched with urllib, to see what is on the wire."""
    req = urllib.request.Request(
        server.base_url + "/embeddings",
        data=json.dumps({"model": "e", "input": "x", "encoding_format": fmt}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.read().decode()


def test_embeddings_without_encoding_format_default_to_float_like_the_api(openai_server):
    req = urllib.request.Request(
        openai_server.base_url + "/embeddings",
        data=json.dumps({"model": "e", "input": ["x"]}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        body = json.loads(resp.read())
    assert isinstance(body["data"][0]["embedding"], list)


def test_embeddings_dims_are_configurable(openai_server, client):
    openai_server.embed_dims = 64
    response = client.embeddings.create(model="e", input="x", encoding_format="float")
    assert len(response.data[0].embedding) == 64
    response = client.embeddings.create(model="e", input="x", dimensions=16,
                                        encoding_format="float")
    assert len(response.data[0].embedding) == 16


def test_embeddings_are_deterministic_across_servers(openai_server, client):
    first = client.embeddings.create(model="e", input="stable", encoding_format="float")
    with ScriptedOpenAIServer() as other, other.client(max_retries=0) as c2:
        second = c2.embeddings.create(model="e", input="stable", encoding_format="float")
    assert first.data[0].embedding == second.data[0].embedding


@pytest.mark.parametrize("bad_input", ["", [], ["ok", ""]])
def test_embeddings_reject_empty_input(client, bad_input):
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="e", input=bad_input, encoding_format="float")


def test_embeddings_errors_and_delays_are_scriptable(openai_server, client):
    openai_server.queue_embeddings(Reply.error(503, "overloaded"), None)
    with pytest.raises(openai.InternalServerError) as info:
        client.embeddings.create(model="e", input="x", encoding_format="float")
    assert info.value.message.endswith("overloaded")
    ok = client.embeddings.create(model="e", input="x", encoding_format="float")
    assert len(ok.data) == 1

    openai_server.queue_embeddings(Reply.delayed(5))
    with openai_server.client(max_retries=0, timeout=0.5) as quick:
        with pytest.raises(openai.APITimeoutError):
            quick.embeddings.create(model="e", input="x", encoding_format="float")


# -- other endpoints and recording -----------------------------------------------------------


def test_models_list(openai_server, client):
    assert [m.id for m in client.models.list()] == ["test-model", "test-embedding"]
    assert client.models.retrieve("test-model").id == "test-model"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("missing")


def test_unknown_path_is_404_with_openai_error_body(openai_server, client):
    with pytest.raises(openai.NotFoundError) as info:
        client.files.list()
    assert info.value.code == "unknown_url"

    req = urllib.request.Request(openai_server.url + "/nope", method="GET")
    with pytest.raises(urllib.error.HTTPError) as http_info:
        urllib.request.urlopen(req, timeout=5)
    with http_info.value as response:
        assert response.code == 404
        body = json.loads(response.read())
    assert set(body["error"]) >= {"message", "type", "code"}
    assert body["error"]["type"] == "invalid_request_error"


def test_every_request_is_recorded_with_headers_and_body(openai_server):
    openai_server.queue_chat({"answer": "x"})
    with openai_server.client(api_key="sk-recorded", max_retries=0) as c:
        _chat(c, response_format=RESPONSE_FORMAT)
        c.embeddings.create(model="e", input="x", encoding_format="float")
        c.models.list()

    reqs = openai_server.requests
    assert [(r.method, r.path) for r in reqs] == [
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/embeddings"),
        ("GET", "/v1/models"),
    ]
    assert all(r.headers["authorization"] == "Bearer sk-recorded" for r in reqs)
    assert reqs[0].json["response_format"]["json_schema"]["schema"] == SCHEMA
    assert json.loads(reqs[0].text) == reqs[0].json
    assert reqs[2].json is None and reqs[2].body == b""
    assert openai_server.requests_to("/embeddings") == [reqs[1]]
    openai_server.clear_requests()
    assert openai_server.requests == []
