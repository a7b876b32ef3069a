"""Embeddings from an OpenAI-compatible endpoint (OpenAI, Ollama, LM Studio, vLLM, ...).

Vectors are asked for as floats: the openai client otherwise requests base64 and decodes it
itself, which some compatible servers do not implement. Any endpoint failure becomes an
EmbedderError with a one-line message; callers decide whether to fall back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import openai

from engine.embed.base import l2_normalise
from engine.errors import EmbedderError

__all__ = ["BATCH_SIZE", "OpenAIEmbedder"]

BATCH_SIZE = 128
# Local servers ignore the key, but the openai client refuses to start without one.
PLACEHOLDER_API_KEY = "memlens-no-key"


def _one_line(text: Any, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class OpenAIEmbedder:
    """The Embedder protocol over `client.embeddings.create`.

    `dims` is either given (then every response must match it) or learned from the first
    response; until then it is 0. `probe()` asks the endpoint once and returns it. (dims is a
    plain attribute on purpose: a property that did I/O would fire on `isinstance(x,
    Embedder)`, which on Python 3.11 reads every protocol attribute.)

    Holds an HTTP client: close() it (or use `with`) when done.
    """

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dims: int | None = None,
        batch_size: int = BATCH_SIZE,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        if not model:
            raise ValueError("an embedding model name is required")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.model = model
        self.base_url = base_url
        self.batch_size = batch_size
        self.timeout = timeout
        if dims is not None and dims < 1:
            raise ValueError("dims must be positive")
        self.dims: int = dims or 0
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or PLACEHOLDER_API_KEY,
            timeout=timeout,
            max_retries=max_retries,
        )

    def probe(self) -> int:
        """The vector width, asking the endpoint once if no response has told us yet."""
        if not self.dims:
            self._embed_batch(["dimension probe"])
        return self.dims

    def fingerprint(self) -> str:
        """Which server computes the vectors (engine/embed/cache.py keys vectors by it)."""
        return str(self.base_url or "")

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r}, dims={self.dims})"

    def embed(self, texts: Sequence[str], *, kind: str = "passage") -> np.ndarray:
        """(len(texts), dims) float32 unit rows. `kind` needs no prefix for these models."""
        texts = list(texts)
        if not texts:
            # Nothing to send; an unknown width is learned once so the shape is honest.
            return np.zeros((0, self.probe()), dtype=np.float32)
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            rows.append(self._embed_batch(texts[start:start + self.batch_size]))
        return l2_normalise(np.vstack(rows))

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        # The API rejects empty strings; a blank chunk still deserves a (meaningless) vector.
        inputs = [t if t.strip() else " " for t in batch]
        try:
            response = self._client.embeddings.create(
                model=self.model, input=inputs, encoding_format="float"
            )
        except openai.APITimeoutError as exc:
            raise EmbedderError(
                f"embedding endpoint {self._where()} did not answer within {self.timeout:g} s"
            ) from exc
        except openai.APIStatusError as exc:
            raise EmbedderError(_one_line(
                f"embedding endpoint {self._where()} returned HTTP {exc.status_code}: {exc.message}"
            )) from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise EmbedderError(_one_line(
                f"cannot reach embedding endpoint {self._where()}: {cause}"
            )) from exc
        except (openai.OpenAIError, ValueError) as exc:
            raise EmbedderError(_one_line(
                f"embedding endpoint {self._where()} failed: {exc}"
            )) from exc
        return self._matrix(response, len(batch))

    def _matrix(self, response: Any, expected: int) -> np.ndarray:
        data = getattr(response, "data", None)
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no"
            raise EmbedderError(
                f"embedding endpoint {self._where()} returned {got} vectors for {expected} texts"
            )
        # Servers may answer out of order; `index` says which input each vector belongs to.
        ordered = sorted(data, key=lambda item: getattr(item, "index", 0) or 0)
        try:
            mat = np.asarray([item.embedding for item in ordered], dtype=np.float32)
        except (TypeError, ValueError, AttributeError) as exc:
            raise EmbedderError(_one_line(
                f"embedding endpoint {self._where()} returned unusable vectors: {exc}"
            )) from exc
        if mat.ndim != 2 or mat.shape[1] == 0:
            raise EmbedderError(
                f"embedding endpoint {self._where()} returned vectors of shape {mat.shape}"
            )
        if not np.isfinite(mat).all():
            raise EmbedderError(f"embedding endpoint {self._where()} returned non-finite values")
        if not self.dims:
            self.dims = int(mat.shape[1])
        elif mat.shape[1] != self.dims:
            raise EmbedderError(
                f"embedding model {self.model} returned {mat.shape[1]}-dimensional vectors, "
                f"expected {self.dims}"
            )
        return mat

    def _where(self) -> str:
        return f"{str(self._client.base_url).rstrip('/')} (model {self.model})"
