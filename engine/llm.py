"""The one way the engine talks to a language model: any OpenAI-compatible endpoint.

Every call asks for structured output (response_format json_schema, strict) and comes back as
an `LLMResult`; endpoint trouble (timeouts, HTTP errors, unreachable hosts, text that is not
JSON, JSON that does not fit the schema) is a result with ok=False and a short typed `error`,
never an exception, so callers can fall back to the heuristic path and the operator can see
why. Retries are the openai client's (max_retries, with its backoff, on 408/409/429/5xx,
timeouts and connection errors).

Each call is also handed to an optional `recorder` as an `LLMCallRecord` (the store persists
those into llm_calls: accounting, caching by request_hash, and the "why" in the inspector).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import openai

from engine.timeutil import now_iso

__all__ = [
    "DEFAULT_MODEL",
    "ERRORS",
    "TASKS",
    "LLMCallRecord",
    "LLMClient",
    "LLMConfig",
    "LLMResult",
    "canonical_json",
    "validate_json",
]

TASKS = ("EXTRACT", "PLAN", "RERANK", "ANSWER", "JUDGE")

# The short, typed `error` values of a failed call ("http_<status>" stands for every status).
ERRORS = (
    "timeout",  # the endpoint did not answer within the timeout (after retries)
    "connection",  # could not connect, connection dropped, or another transport failure
    "http_<status>",  # the endpoint answered with an HTTP error, e.g. "http_429", "http_500"
    "malformed_json",  # the answer is not JSON (or not the shape of a chat completion)
    "schema_mismatch",  # JSON, but not what the schema asks for (see LLMResult.detail)
    "refusal",  # the model refused (message.refusal set, no content)
    "empty_response",  # no choices or no content
)

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2
# Local servers (Ollama, LM Studio, vLLM, llama.cpp) ignore the key, but the client wants one.
PLACEHOLDER_API_KEY = "memlens-no-key"

_OPENAI_HOSTS = ("api.openai.com",)


def _get(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "")
    value = value.strip() if isinstance(value, str) else ""
    return value or None


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to call the model. `task_models` maps a TASKS name to a model id."""

    base_url: str
    api_key: str | None = None
    model: str = DEFAULT_MODEL
    task_models: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES

    def model_for(self, task: str) -> str:
        return self.task_models.get(_task_name(task)) or self.model

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMConfig | None:
        """The endpoint from MEMLENS_LLM_* (falling back to OPENAI_BASE_URL / OPENAI_API_KEY);
        None when no base URL is configured (then the engine runs without a model).

        OPENAI_API_KEY is only used for an OpenAI endpoint (OPENAI_BASE_URL, or a
        MEMLENS_LLM_BASE_URL on api.openai.com): pointing memlens at some other server must
        not send it the operator's OpenAI key. Such a server gets MEMLENS_LLM_API_KEY or a
        placeholder.
        """
        env: Mapping[str, str] = os.environ if environ is None else environ
        memlens_url = _get(env, "MEMLENS_LLM_BASE_URL")
        base_url = memlens_url or _get(env, "OPENAI_BASE_URL")
        if base_url is None:
            return None
        api_key = _get(env, "MEMLENS_LLM_API_KEY")
        if api_key is None and (memlens_url is None or _is_openai_host(memlens_url)):
            api_key = _get(env, "OPENAI_API_KEY")
        task_models = {
            task: model
            for task in TASKS
            if (model := _get(env, f"MEMLENS_LLM_MODEL_{task}")) is not None
        }
        return cls(
            base_url=base_url,
            api_key=api_key,
            model=_get(env, "MEMLENS_LLM_MODEL") or DEFAULT_MODEL,
            task_models=task_models,
        )


def _is_openai_host(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in _OPENAI_HOSTS)


def _task_name(task: str) -> str:
    name = str(task).upper()
    if name not in TASKS:
        raise ValueError(f"unknown LLM task {task!r}; expected one of {', '.join(TASKS)}")
    return name


@dataclass(frozen=True)
class LLMResult:
    ok: bool
    data: dict[str, Any] | None  # the parsed, schema-checked JSON object (None unless ok)
    raw: str | None  # the response text (message content, or the error body)
    error: str | None  # one of ERRORS, None when ok
    model: str  # the model asked for
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float
    request_hash: str
    task: str = ""
    detail: str | None = None  # one human-readable line about the error
    response_model: str | None = None  # the model the endpoint says answered


@dataclass(frozen=True)
class LLMCallRecord:
    """One call, as the store persists it into llm_calls."""

    task: str
    model: str
    request_hash: str
    request_json: str  # canonical JSON of the request (what request_hash hashes)
    response_text: str | None
    ok: bool
    error: str | None
    detail: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float
    created_at: str  # ISO-8601 UTC, the store's format


Recorder = Callable[[LLMCallRecord], None]


def canonical_json(value: Any) -> str:
    """Key-sorted, compact, UTF-8 JSON: the same request always has the same text and hash."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class LLMClient:
    """Structured-output calls to the configured endpoint. Close it (or use `with`)."""

    def __init__(self, config: LLMConfig, *, recorder: Recorder | None = None) -> None:
        self.config = config
        self.recorder = recorder
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or PLACEHOLDER_API_KEY,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def model_for(self, task: str) -> str:
        return self.config.model_for(task)

    def complete_json(
        self,
        task: str,
        messages: Sequence[Mapping[str, Any]],
        schema_name: str,
        schema: dict[str, Any],
        *,
        timeout: float | None = None,
        recorder: Recorder | None = None,
    ) -> LLMResult:
        """Ask the `task` model for a JSON object matching `schema`.

        `messages` are chat messages ({"role", "content"}). Raises only for caller mistakes
        (an unknown task); endpoint and model failures come back as ok=False. `recorder`
        overrides the client's for this call (the store records calls under their scope).
        """
        recorder = recorder if recorder is not None else self.recorder
        task_name = _task_name(task)
        model = self.config.model_for(task_name)
        request: dict[str, Any] = {
            "model": model,
            "messages": [dict(m) for m in messages],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": schema, "strict": True},
            },
        }
        request_json = canonical_json(request)
        request_hash = hashlib.sha256(request_json.encode("utf-8")).hexdigest()

        started = time.perf_counter()
        outcome = self._call(request, timeout if timeout is not None else self.config.timeout)
        latency_ms = round((time.perf_counter() - started) * 1000.0, 3)

        data: dict[str, Any] | None = None
        error, detail, raw = outcome.error, outcome.detail, outcome.raw
        if error is None:
            data, error, parse_detail = _parse(raw or "", schema)
            # e.g. "not JSON: ...; the answer was cut at the token limit"; nothing when ok
            detail = "; ".join(d for d in (parse_detail, detail) if d) if error else None

        result = LLMResult(
            ok=error is None,
            data=data if error is None else None,
            raw=raw,
            error=error,
            model=model,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            latency_ms=latency_ms,
            request_hash=request_hash,
            task=task_name,
            detail=detail,
            response_model=outcome.response_model,
        )
        if recorder is not None:
            recorder(
                LLMCallRecord(
                    task=task_name,
                    model=model,
                    request_hash=request_hash,
                    request_json=request_json,
                    response_text=raw,
                    ok=result.ok,
                    error=result.error,
                    detail=result.detail,
                    prompt_tokens=result.prompt_tokens,
                    completion_tokens=result.completion_tokens,
                    latency_ms=latency_ms,
                    created_at=now_iso(),
                )
            )
        return result

    def _call(self, request: dict[str, Any], timeout: float) -> _Outcome:
        try:
            # The raw response keeps the body text for the record even when it is not a
            # chat completion; parse() then builds the typed object from it.
            http = self._client.chat.completions.with_raw_response.create(**request,
                                                                          timeout=timeout)
        except openai.APITimeoutError:
            return _Outcome(error="timeout", detail=f"no answer within {timeout:g} s")
        except openai.APIStatusError as exc:
            body = _response_text(exc.response)
            return _Outcome(error=f"http_{exc.status_code}", detail=_one_line(exc.message),
                            raw=body)
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            return _Outcome(error="connection", detail=_one_line(f"{exc.message} ({cause!r})"))
        except openai.APIResponseValidationError as exc:
            return _Outcome(error="malformed_json", detail=_one_line(exc.message))
        except openai.APIError as exc:  # any other transport-level failure of the client
            return _Outcome(error="connection", detail=_one_line(exc.message))
        try:
            response = http.parse()
        except (ValueError, openai.APIResponseValidationError) as exc:
            # a 200 whose body claims to be JSON but is not
            return _Outcome(error="malformed_json", detail=_one_line(f"response body: {exc}"),
                            raw=_response_text(http))

        choices = getattr(response, "choices", None)
        if not isinstance(choices, list):
            # A 200 whose body is not a chat completion (the client hands back text/objects).
            return _Outcome(error="malformed_json", detail="the response is not a chat completion",
                            raw=_response_text(http))
        usage = getattr(response, "usage", None)
        outcome = _Outcome(
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            response_model=getattr(response, "model", None),
        )
        message = choices[0].message if choices else None
        if message is None:
            outcome.error, outcome.detail = "empty_response", "the response has no choices"
            return outcome
        refusal = getattr(message, "refusal", None)
        if message.content is None and refusal:
            outcome.error, outcome.detail, outcome.raw = "refusal", _one_line(refusal), refusal
            return outcome
        if not message.content:
            outcome.error, outcome.detail = "empty_response", "the response has no content"
            outcome.raw = message.content
            return outcome
        outcome.raw = message.content
        if choices[0].finish_reason == "length":
            outcome.detail = "the answer was cut at the token limit"
        return outcome


@dataclass
class _Outcome:
    error: str | None = None
    detail: str | None = None
    raw: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    response_model: str | None = None


def _response_text(response: Any) -> str | None:
    try:
        return response.text
    except Exception:  # noqa: BLE001 - a body we cannot read is just absent
        return None


def _one_line(text: Any, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


def _parse(text: str, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None,
                                                        str | None]:
    """content -> (data, error, detail). Tolerates a ``` fence some local servers add."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        fenced = _FENCE.match(text)
        if fenced is None:
            return None, "malformed_json", _one_line(f"not JSON: {exc}")
        try:
            value = json.loads(fenced.group(1))
        except ValueError as exc2:
            return None, "malformed_json", _one_line(f"not JSON: {exc2}")
    problems = validate_json(value, schema)
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return None, "schema_mismatch", _one_line(problems[0] + more)
    if not isinstance(value, dict):
        return None, "schema_mismatch", f"$: expected an object, got {_type_name(value)}"
    return value, None, None


# -- a JSON-schema subset validator ----------------------------------------------------------
#
# Enough for the schemas memlens sends with strict structured output: type (a name or a list,
# "null" unions included), enum, const, properties, required, additionalProperties: false,
# items, anyOf. Other keywords are ignored: the endpoint enforces them when it can; this check
# only catches answers our code would trip over.

_JSON_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    raise ValueError(f"unsupported JSON schema type {name!r}")


def validate_json(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Problems with `value` against `schema` (the subset above), as "path: what" lines."""
    problems: list[str] = []
    _validate(value, schema, path, problems)
    return problems


def _validate(value: Any, schema: Mapping[str, Any], path: str, out: list[str]) -> None:
    if not isinstance(schema, Mapping) or not schema:
        return  # {} (or True) accepts anything
    if "anyOf" in schema:
        options = schema["anyOf"]
        if not any(not validate_json(value, option, path) for option in options):
            out.append(f"{path}: matches none of the anyOf alternatives")
            return
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_is_type(value, name) for name in names):
            out.append(f"{path}: expected {' or '.join(names)}, got {_type_name(value)}")
            return
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} is not one of {list(schema['enum'])!r}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{path}: expected {schema['const']!r}")
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key in schema.get("required") or ():
            if key not in value:
                out.append(f"{path}: missing required key {key!r}")
        for key, item in value.items():
            if key in properties:
                _validate(item, properties[key], f"{path}.{key}", out)
            elif schema.get("additionalProperties") is False:
                out.append(f"{path}: unexpected key {key!r}")
            elif isinstance(schema.get("additionalProperties"), Mapping):
                _validate(item, schema["additionalProperties"], f"{path}.{key}", out)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            _validate(item, schema["items"], f"{path}[{i}]", out)
