"""OpenAIEmbedder against the scripted server."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from engine.embed.base import Embedder
from engine.embed.openai_embed import BATCH_SIZE, OpenAIEmbedder
from engine.errors import EmbedderError, MemlensError
from tests.fixtures.openai_server import Reply

TEXTS = ["Ana moved to Lisbon in 2021.", "Bruno likes green tea.", "The meeting is on Friday."]


@pytest.fixture
def embedder(openai_server):
    with OpenAIEmbedder("test-embedding", base_url=openai_server.base_url, max_retries=0,
                        timeout=5.0) as emb:
        yield emb


def test_is_an_embedder_and_checking_that_sends_nothing(openai_server, embedder):
    assert isinstance(embedder, Embedder)
    assert embedder.provider == "openai"
    assert embedder.model == "test-embedding"
    assert embedder.dims == 0  # not known until the endpoint answers
    assert openai_server.requests == []


def test_embed_returns_float32_unit_rows_from_the_endpoint(openai_server, embedder):
    vectors = embedder.embed(TEXTS)

    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors, openai_server.embedder().embed(TEXTS), atol=1e-6)
    assert embedder.dims == 384
    (sent,) = openai_server.embedding_requests
    assert sent.json == {"model": "test-embedding", "input": TEXTS, "encoding_format": "float"}


def test_query_kind_uses_the_same_endpoint(openai_server, embedder):
    np.testing.assert_array_equal(embedder.embed(TEXTS[:1], kind="query"),
                                  embedder.embed(TEXTS[:1]))


def test_dims_are_learned_from_the_first_response(openai_server, embedder):
    openai_server.embed_dims = 48
    assert embedder.embed(["x"]).shape == (1, 48)
    assert embedder.dims == 48


def test_given_dims_must_match(openai_server):
    with OpenAIEmbedder("e", base_url=openai_server.base_url, dims=256, max_retries=0) as emb:
        assert emb.dims == 256
        with pytest.raises(EmbedderError, match="384-dimensional vectors, expected 256"):
            emb.embed(["x"])


def test_batches_of_128_keep_order(openai_server, embedder):
    texts = [f"memory number {i} about topic {i % 7}" for i in range(300)]

    vectors = embedder.embed(texts)

    sizes = [len(r.json["input"]) for r in openai_server.embedding_requests]
    assert BATCH_SIZE == 128
    assert sizes == [128, 128, 44]
    assert all(r.json["encoding_format"] == "float" for r in openai_server.embedding_requests)
    np.testing.assert_allclose(vectors, openai_server.embedder().embed(texts), atol=1e-6)


def test_empty_list_with_known_dims_sends_nothing(openai_server):
    with OpenAIEmbedder("e", base_url=openai_server.base_url, dims=384) as emb:
        out = emb.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32
    assert openai_server.requests == []


def test_empty_list_with_unknown_dims_probes_once(openai_server, embedder):
    assert embedder.embed([]).shape == (0, 384)
    assert embedder.embed([]).shape == (0, 384)
    assert len(openai_server.embedding_requests) == 1
    assert embedder.probe() == 384
    assert len(openai_server.embedding_requests) == 1


def test_blank_texts_still_get_vectors(openai_server, embedder):
    vectors = embedder.embed(["", "real text", "   "])
    assert vectors.shape == (3, 384)
    assert openai_server.embedding_requests[0].json["input"] == [" ", "real text", " "]


def test_out_of_order_response_is_reordered_by_index(openai_server, embedder):
    a, b = openai_server.embedder().embed(["first", "second"]).tolist()
    openai_server.queue_embeddings(Reply.body({
        "object": "list", "model": "e", "usage": {"prompt_tokens": 2, "total_tokens": 2},
        "data": [{"object": "embedding", "index": 1, "embedding": b},
                 {"object": "embedding", "index": 0, "embedding": a}],
    }))
    vectors = embedder.embed(["first", "second"])
    np.testing.assert_allclose(vectors, np.asarray([a, b], dtype=np.float32), atol=1e-6)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply.error(500, "The server had an error"), "returned HTTP 500: .*server had an error"),
        (Reply.error(401, "Incorrect API key provided", code="invalid_api_key"), "HTTP 401"),
        (Reply.error(429, "Rate limit reached"), "HTTP 429"),
        (Reply.body({"object": "list", "model": "e", "data": []}), "returned 0 vectors for 3"),
        (Reply.body({"object": "list", "model": "e", "data": [
            {"object": "embedding", "index": i, "embedding": [1.0, "x"]} for i in range(3)]}),
         "unusable vectors"),
        (Reply.body({"object": "list", "model": "e", "data": [
            {"object": "embedding", "index": i, "embedding": []} for i in range(3)]}),
         "shape"),
        (Reply.body("<html>gateway</html>", status=502), "HTTP 502"),
        (Reply.body("{broken", headers={"Content-Type": "application/json"}), "failed"),
    ],
)
def test_endpoint_failures_raise_one_line_embedder_errors(openai_server, embedder, reply,
                                                          message):
    openai_server.queue_embeddings(reply)
    with pytest.raises(EmbedderError, match=message) as info:
        embedder.embed(TEXTS)
    assert isinstance(info.value, MemlensError)
    assert "\n" not in str(info.value)
    assert openai_server.base_url in str(info.value) or "HTTP" in str(info.value)


def test_timeout_raises_quickly(openai_server):
    openai_server.queue_embeddings(Reply.delayed(5))
    with OpenAIEmbedder("e", base_url=openai_server.base_url, timeout=0.5,
                        max_retries=0) as emb:
        with pytest.raises(EmbedderError, match="did not answer within 0.5 s"):
            emb.embed(["x"])


def test_unreachable_endpoint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with OpenAIEmbedder("e", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0,
                        timeout=2.0) as emb:
        with pytest.raises(EmbedderError, match="cannot reach embedding endpoint"):
            emb.embed(["x"])


def test_retries_recover_from_a_transient_error(openai_server):
    openai_server.queue_embeddings(Reply.error(503, "busy", headers={"retry-after-ms": "10"}))
    with OpenAIEmbedder("e", base_url=openai_server.base_url, max_retries=1) as emb:
        assert emb.embed(["x"]).shape == (1, 384)
    assert len(openai_server.embedding_requests) == 2


def test_constructor_rejects_nonsense():
    with pytest.raises(ValueError):
        OpenAIEmbedder("")
    with pytest.raises(ValueError):
        OpenAIEmbedder("e", batch_size=0)
