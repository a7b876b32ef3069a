"""The one way the engine talks to a language model: any OpenAI-compatible endpoint.

Every call asks for a JSON object matching a schema and comes back as an `LLMResult`; endpoint
trouble (timeouts, HTTP errors, unreachable hosts, an unknown model, text that is not JSON,
JSON that does not fit the schema, an answer cut at the token limit) is a result with ok=False
and a short typed `error`, never an exception, so callers can fall back to the heuristic path
and the operator can see why. Transport retries are the openai client's (max_retries, with its
backoff, on 408/409/429/5xx, timeouts and connection errors).

Servers differ (a real llama.cpp server refuses `json_schema` with HTTP 500, some models wrap
JSON in prose or fences, stop mid-object, or answer slowly while the model loads), so a call is
more than one request when it has to be:

- structured output is detected per endpoint and model: `json_schema` (strict) first, then
  `json_object` (carrying the schema, which llama.cpp turns into a grammar), then a plain
  request whose prompt carries the schema; the first mode the endpoint accepts is remembered
  for the process (`structured_mode`);
- the reply is parsed tolerantly (a reasoning preamble, a code fence or prose around the
  object) and always validated against the schema (jsonschema), whatever the mode;
- an answer cut at the token limit (finish_reason "length") that does not parse is asked once
  more with twice the room;
- until an endpoint and model have answered once, the timeout is at least `first_call_timeout`.

Each request is handed to an optional `recorder` as an `LLMCallRecord` (the store persists
those into llm_calls: accounting, the request_hash, and the "why" in the inspector), so a
refused mode or a truncated first answer is on record next to the request that succeeded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from engine.errors import BadInput
from engine.lazy import lazy_import
from engine.timeutil import now_iso

# Loaded on first use: together a second of every memlens start on a busy machine, and a recall or a
# status that calls no model never uses them.
if TYPE_CHECKING:
    import jsonschema
    import openai
else:
    jsonschema = lazy_import("jsonschema")
    openai = lazy_import("openai")

__all__ = [
    "DEFAULT_MODEL",
    "ERRORS",
    "FATAL_ERRORS",
    "STRUCTURED_MODES",
    "TASKS",
    "LLMCallRecord",
    "LLMClient",
    "LLMConfig",
    "LLMResult",
    "Recorder",
    "canonical_json",
    "describe_failure",
    "parse_reply",
    "structured_mode",
    "validate_json",
]

TASKS = ("EXTRACT", "PLAN", "RERANK", "ANSWER", "JUDGE")

# The short, typed `error` values of a failed call ("http_<status>" stands for every status).
ERRORS = (
    "timeout",  # the endpoint did not answer within the timeout (after retries)
    "connection",  # could not connect, connection dropped, or another transport failure
    "http_<status>",  # the endpoint answered with an HTTP error, e.g. "http_429", "http_500"
    "unknown_model",  # a 404 whose body is about the model: the endpoint does not serve it
    "format_refused",  # the endpoint refused the response_format asked for (the next mode follows)
    "malformed_json",  # the answer holds no JSON (or is not the shape of a chat completion)
    "schema_mismatch",  # JSON, but not what the schema asks for (see LLMResult.detail)
    "truncated",  # cut at the token limit before the JSON was complete (even with more room)
    "refusal",  # the model refused (message.refusal set, no content)
    "empty_response",  # no choices or no content
)
# Errors that every later call to the same endpoint would repeat: a long run stops at the first.
FATAL_ERRORS = frozenset({"unknown_model", "connection", "http_401", "http_403"})

# How the JSON is asked for, most to least constrained (see the module docstring).
STRUCTURED_MODES = ("json_schema", "json_object", "prompt")

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_TIMEOUT = 60.0
# Ollama, LM Studio and llama.cpp load the model on the first request: tens of seconds on a laptop.
DEFAULT_FIRST_CALL_TIMEOUT = 120.0
DEFAULT_MAX_RETRIES = 2
# Completion room per task (tokens); a truncated answer is asked once more with twice as much.
# EXTRACT: a window of eight turns rarely holds more than ~8 memories of ~100 tokens each.
TASK_MAX_TOKENS = {"EXTRACT": 1024, "PLAN": 400, "RERANK": 400, "ANSWER": 300, "JUDGE": 300}
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
    # the timeout is at least this until the endpoint has answered for a model (0: no minimum)
    first_call_timeout: float = DEFAULT_FIRST_CALL_TIMEOUT

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
        timeout = DEFAULT_TIMEOUT
        if (text := _get(env, "MEMLENS_LLM_TIMEOUT")) is not None:
            try:
                timeout = float(text)
            except ValueError:
                timeout = -1.0
            if not 0 < timeout < 86_400:
                raise BadInput(f"MEMLENS_LLM_TIMEOUT must be a number of seconds, got {text!r}")
        return cls(
            base_url=base_url,
            api_key=api_key,
            model=_get(env, "MEMLENS_LLM_MODEL") or DEFAULT_MODEL,
            task_models=task_models,
            timeout=timeout,
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
    prompt_tokens: int | None  # summed over every request the call made
    completion_tokens: int | None
    latency_ms: float  # the whole call, every request included
    request_hash: str  # of the last request
    task: str = ""
    detail: str | None = None  # one human-readable line about the error
    response_model: str | None = None  # the model the endpoint says answered
    mode: str | None = None  # the structured-output mode of the last request (STRUCTURED_MODES)
    requests: int = 1  # HTTP-level requests memlens made for this call (client retries not counted)
    fallbacks: tuple[str, ...] = ()  # what was tried again and why, e.g. "json_schema refused"


@dataclass(frozen=True)
class LLMCallRecord:
    """One request, as the store persists it into llm_calls."""

    task: str
    model: str
    request_hash: str
    request_json: str | None  # canonical JSON of the request (what request_hash hashes)
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


# -- what this process has learnt about each endpoint ---------------------------------------


@dataclass
class _Endpoint:
    mode: str | None = None  # the structured-output mode it accepted, once known
    refused: set[str] = field(default_factory=set)  # modes it refused (not asked again)
    warm: bool = False  # it has answered a chat completion for this model


_ENDPOINTS: dict[tuple[str, str], _Endpoint] = {}
_ENDPOINTS_LOCK = threading.Lock()


def _endpoint(base_url: str, model: str) -> _Endpoint:
    key = (base_url.rstrip("/"), model)
    with _ENDPOINTS_LOCK:
        return _ENDPOINTS.setdefault(key, _Endpoint())


def structured_mode(base_url: str, model: str) -> str | None:
    """The structured-output mode this endpoint accepted for `model` in this process, if known."""
    return _endpoint(base_url, model).mode


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
        # OpenAI's newer models refuse max_tokens; local servers know only max_tokens.
        self._room_key = "max_completion_tokens" if _is_openai_host(config.base_url) else "max_tokens"

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def model_for(self, task: str) -> str:
        return self.config.model_for(task)

    def structured_mode(self, task: str) -> str | None:
        """The structured-output mode learnt for the `task` model, if a call has settled it."""
        return structured_mode(self.config.base_url, self.config.model_for(task))

    def list_models(self, *, timeout: float = 10.0) -> list[str] | None:
        """The ids /v1/models lists (often empty on local servers); None when it cannot be read."""
        try:
            page = self._client.with_options(max_retries=0).models.list(timeout=timeout)
            return [str(m.id) for m in page.data]
        except (openai.APIError, ValueError, AttributeError, TypeError):
            return None

    def complete_json(
        self,
        task: str,
        messages: Sequence[Mapping[str, Any]],
        schema_name: str,
        schema: dict[str, Any],
        *,
        timeout: float | None = None,
        recorder: Recorder | None = None,
        max_tokens: int | None = None,
        max_retries: int | None = None,
    ) -> LLMResult:
        """Ask the `task` model for a JSON object matching `schema`.

        `messages` are chat messages ({"role", "content"}). Raises only for caller mistakes
        (an unknown task); endpoint and model failures come back as ok=False. `recorder`
        overrides the client's for this call (the store records calls under their scope).
        `max_tokens` overrides the task's completion room. `max_retries` overrides the
        client's transport retries: a caller with a deadline and a fallback (the planner,
        the reranker) passes 0, since the client retries a timeout with the same timeout, and
        a local server that answers one request at a time still works on the abandoned one.
        """
        recorder = recorder if recorder is not None else self.recorder
        transport = self._client if max_retries is None else self._client.with_options(max_retries=max_retries)
        task_name = _task_name(task)
        model = self.config.model_for(task_name)
        endpoint = _endpoint(self.config.base_url, model)
        modes = [endpoint.mode] if endpoint.mode else [m for m in STRUCTURED_MODES if m not in endpoint.refused]
        room = max_tokens or TASK_MAX_TOKENS[task_name]
        wait = timeout if timeout is not None else self.config.timeout
        fallbacks: list[str] = []
        attempts: list[_Attempt] = []
        started = time.perf_counter()
        while True:
            mode = modes[0]
            request = self._request(model, messages, schema_name, schema, mode, room)
            first = not endpoint.warm
            attempt = self._attempt(transport, request, schema,
                                    max(wait, self.config.first_call_timeout) if first else wait)
            attempts.append(attempt)
            note = None
            if attempt.error == "format_refused" and len(modes) > 1:
                note = f"{mode} refused, asking again as {modes[1]}"
                endpoint.refused.add(modes.pop(0))
            elif attempt.completed:  # a chat completion came back: the mode works here
                endpoint.warm = True
                if endpoint.mode is None:
                    endpoint.mode = mode
            if note is None and attempt.error == "truncated" and not any(
                    a.error == "truncated" for a in attempts[:-1]):
                note = f"cut at {room} tokens, asking again with {room * 2}"
                room *= 2
            if first and attempt.error == "timeout" and self.config.first_call_timeout > wait:
                attempt.detail = _join(attempt.detail, "the first call to this endpoint waits longer")
            if attempt.error == "unknown_model":
                listed = self.list_models()
                attempt.detail = _join(attempt.detail, "the endpoint lists no models" if listed == [] else
                                       f"the endpoint lists: {', '.join(listed[:8])}" if listed else None)
            if note is not None:
                fallbacks.append(note)
                attempt.detail = _join(attempt.detail, note)
            self._record(recorder, task_name, model, attempt)
            if note is None:
                break
        last = attempts[-1]
        latency_ms = round((time.perf_counter() - started) * 1000.0, 3)
        return LLMResult(
            ok=last.error is None,
            data=last.data if last.error is None else None,
            raw=last.raw,
            error=last.error,
            model=model,
            prompt_tokens=_total(a.prompt_tokens for a in attempts),
            completion_tokens=_total(a.completion_tokens for a in attempts),
            latency_ms=latency_ms,
            request_hash=last.request_hash,
            task=task_name,
            detail=last.detail,
            response_model=last.response_model,
            mode=modes[0],
            requests=len(attempts),
            fallbacks=tuple(fallbacks),
        )

    # -- one request --------------------------------------------------------------------------

    def _request(self, model: str, messages: Sequence[Mapping[str, Any]], schema_name: str,
                 schema: dict[str, Any], mode: str, room: int) -> dict[str, Any]:
        msgs = [dict(m) for m in messages]
        request: dict[str, Any] = {"model": model, "messages": msgs, self._room_key: room}
        if mode == "json_schema":
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": schema, "strict": True},
            }
            return request
        if mode == "json_object":
            # "schema" is llama.cpp's extension (a grammar from it); other servers ignore it
            request["response_format"] = {"type": "json_object", "schema": schema}
        # json_object constrains the syntax only, and prompt mode nothing: the model is told the
        # shape in the last user turn (a system turn after it breaks strict chat templates).
        ask = ("\n\nReply with one JSON object and nothing else (no prose, no code fence). It must "
               f"match this JSON schema:\n{canonical_json(schema)}")
        for m in reversed(msgs):
            if m.get("role") == "user" and isinstance(m.get("content"), str):
                m["content"] += ask
                break
        else:
            msgs.append({"role": "user", "content": ask.strip()})
        return request

    def _attempt(self, transport: openai.OpenAI, request: dict[str, Any], schema: dict[str, Any],
                 timeout: float) -> _Attempt:
        request_json = canonical_json(request)
        attempt = _Attempt(request_json=request_json,
                           request_hash=hashlib.sha256(request_json.encode("utf-8")).hexdigest())
        started = time.perf_counter()
        self._send(transport, request, timeout, attempt)
        if attempt.error is None:
            data, attempt.error, detail = parse_reply(attempt.raw or "", schema)
            if attempt.error is not None and attempt.finish_reason == "length":
                # not JSON because the answer stopped short, not because the model misbehaved
                attempt.error = "truncated"
                detail = f"the answer was cut at the token limit ({detail})"
            attempt.detail = detail
            attempt.data = data
        attempt.latency_ms = round((time.perf_counter() - started) * 1000.0, 3)
        return attempt

    def _send(self, transport: openai.OpenAI, request: dict[str, Any], timeout: float, out: _Attempt) -> None:
        try:
            # The raw response keeps the body text for the record even when it is not a
            # chat completion; parse() then builds the typed object from it.
            http = transport.chat.completions.with_raw_response.create(**request,
                                                                          timeout=timeout)
        except openai.APITimeoutError:
            out.error, out.detail = "timeout", f"no answer within {timeout:g} s"
            return
        except openai.APIStatusError as exc:
            out.raw = _response_text(exc.response)
            out.error, out.detail = _status_error(exc.status_code, _server_message(exc), out.raw,
                                                  request, self.config.base_url)
            return
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            out.error = "connection"
            out.detail = _one_line(f"{exc.message} ({cause!r})")
            return
        except openai.APIResponseValidationError as exc:
            out.error, out.detail = "malformed_json", _one_line(exc.message)
            return
        except openai.APIError as exc:  # any other transport-level failure of the client
            out.error, out.detail = "connection", _one_line(exc.message)
            return
        try:
            response = http.parse()
        except (ValueError, openai.APIResponseValidationError) as exc:
            # a 200 whose body claims to be JSON but is not
            out.error, out.detail = "malformed_json", _one_line(f"response body: {exc}")
            out.raw = _response_text(http)
            return
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list):
            # A 200 whose body is not a chat completion (the client hands back text/objects).
            out.error, out.detail = "malformed_json", "the response is not a chat completion"
            out.raw = _response_text(http)
            return
        out.completed = True
        usage = getattr(response, "usage", None)
        out.prompt_tokens = getattr(usage, "prompt_tokens", None)
        out.completion_tokens = getattr(usage, "completion_tokens", None)
        out.response_model = getattr(response, "model", None)
        message = choices[0].message if choices else None
        if message is None:
            out.error, out.detail = "empty_response", "the response has no choices"
            return
        out.finish_reason = choices[0].finish_reason
        refusal = getattr(message, "refusal", None)
        if message.content is None and refusal:
            out.error, out.detail, out.raw = "refusal", _one_line(refusal), refusal
            return
        out.raw = message.content
        if not (message.content or "").strip():
            out.error = "empty_response"
            out.detail = "the model answered with an empty message" + (
                f" (finish_reason {out.finish_reason})" if out.finish_reason else "")

    def _record(self, recorder: Recorder | None, task: str, model: str, a: _Attempt) -> None:
        if recorder is None:
            return
        recorder(LLMCallRecord(
            task=task, model=model, request_hash=a.request_hash, request_json=a.request_json,
            response_text=a.raw, ok=a.error is None, error=a.error, detail=a.detail,
            prompt_tokens=a.prompt_tokens, completion_tokens=a.completion_tokens,
            latency_ms=a.latency_ms, created_at=now_iso()))


@dataclass
class _Attempt:
    request_json: str
    request_hash: str
    completed: bool = False  # the endpoint answered with a chat completion (HTTP 200)
    error: str | None = None
    detail: str | None = None
    raw: str | None = None
    data: dict[str, Any] | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    response_model: str | None = None
    latency_ms: float = 0.0


def _total(values: Any) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _join(*parts: str | None) -> str | None:
    return "; ".join(p for p in parts if p) or None


# -- HTTP errors -----------------------------------------------------------------------------

# Words in an error body that say the response_format was the problem: llama.cpp's
# "Input should be 'text' or 'json_object'", LM Studio's "'response_format.type' must be
# 'json_schema' or 'text'", vLLM's and OpenAI's "Invalid schema for response_format ...".
_FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object", re.IGNORECASE)
_MODEL_WORDS = re.compile(r"\bmodel", re.IGNORECASE)


def _server_message(exc: openai.APIStatusError) -> str:
    """What the server said, without the client's "Error code: 500 - {...}" wrapping."""
    body = exc.body
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])
    if isinstance(body, str) and body.strip():
        return body
    return str(exc.message)


def _status_error(status: int, message: str, body: str | None, request: Mapping[str, Any],
                  base_url: str) -> tuple[str, str]:
    text = f"{message} {body or ''}"
    if ("response_format" in request and status in (400, 415, 422, 500, 501)
            and _FORMAT_WORDS.search(text)):
        kind = request["response_format"]["type"]
        return "format_refused", _one_line(f"the endpoint refused response_format {kind} "
                                           f"(HTTP {status}): {message}")
    if status == 404 and _MODEL_WORDS.search(text):
        return "unknown_model", _one_line(f"the endpoint does not serve model "
                                          f"{request.get('model')!r} (HTTP 404): {message}")
    if status == 404:
        return "http_404", _one_line(f"{base_url} has no chat completions (HTTP 404): {message}; "
                                     "does the base URL end in /v1?")
    if status in (401, 403):
        return f"http_{status}", _one_line(f"the endpoint refused the request (HTTP {status}): "
                                           f"{message}")
    return f"http_{status}", _one_line(message)


_HINTS = {
    "timeout": "the endpoint did not answer in time: a slow model (a longer timeout helps) or a server down",
    "connection": "could not connect; check the base URL (scheme, host, port, /v1)",
    "unknown_model": "check the model name",
    "format_refused": "the endpoint takes no structured output",
    "malformed_json": "the model did not return JSON; try a larger model",
    "schema_mismatch": "the model's JSON did not fit the schema; try a larger model",
    "truncated": "the model did not finish its JSON within twice the token room",
    "refusal": "the model refused",
    "empty_response": "the model said nothing; check the server's chat template",
    "http_401": "check the API key",
    "http_403": "check the API key and its permissions",
    "http_404": "check the base URL",
    "http_429": "the endpoint is rate-limiting; try again later",
}


def describe_failure(error: str | None, detail: str | None) -> str:
    """One line for the operator: the typed error, what the endpoint said, what to check."""
    if error is None:
        return "ok"
    hint = _HINTS.get(error) or ("the server failed; see its log" if error.startswith("http_5")
                                 else "see the detail")
    return _one_line(f"{error}: {detail}; {hint}" if detail else f"{error}: {hint}")


def _response_text(response: Any) -> str | None:
    try:
        text = response.text
    except Exception:  # noqa: BLE001 - a body we cannot read is just absent
        return None
    return text if isinstance(text, str) else None


def _one_line(text: Any, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# -- reading a reply -------------------------------------------------------------------------

# A reasoning preamble (DeepSeek-R1, Qwen3, gpt-oss through some servers) before the answer;
# an unclosed one means the answer never came.
_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
_MAX_OBJECT_STARTS = 64  # '{' positions tried in a prose reply


def _json_values(body: str) -> Iterator[Any]:
    """JSON values in a reply that is not JSON as a whole, most likely first: fenced blocks, then
    objects decoded from each '{' in prose ("Here is the JSON: {...} Hope it helps")."""
    for block in _FENCE.findall(body):
        try:
            yield json.loads(block, strict=False)
        except ValueError:
            pass
    decoder = json.JSONDecoder(strict=False)
    end = -1
    for m in list(re.finditer(r"\{", body))[:_MAX_OBJECT_STARTS]:
        if m.start() < end:
            continue  # inside an object already tried
        try:
            value, end = decoder.raw_decode(body, m.start())
        except ValueError:
            continue
        yield value


def parse_reply(text: str, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None,
                                                            str | None]:
    """content -> (data, error, detail): the reply, or the first JSON value in it, that fits
    `schema`. A reasoning preamble is dropped first."""
    body = _THINK.sub("", text).strip()
    try:
        values = iter([json.loads(body, strict=False)])  # strict=False: a raw newline in a string
        not_json = None
    except ValueError as exc:
        values = _json_values(body)
        not_json = _one_line(f"not JSON: {exc}")
    first_problem: str | None = None
    for value in values:
        problems = validate_json(value, schema)
        if not problems and not isinstance(value, dict):
            problems = ["$: expected an object"]
        if not problems:
            return value, None, None
        if first_problem is None:
            more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
            first_problem = problems[0] + more
    if first_problem is not None:
        return None, "schema_mismatch", _one_line(first_problem)
    return None, "malformed_json", not_json


# -- schema validation -----------------------------------------------------------------------


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)  # a broken schema is our bug: fail loudly, not as a model error
    return cls(schema)


def validate_json(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """Problems with `value` against the JSON schema `schema`, as "path: what" lines (empty
    when it fits), most relevant first."""
    validator = _validator(canonical_json(schema))
    errors = sorted(validator.iter_errors(value), key=jsonschema.exceptions.relevance)
    return [f"{e.json_path}: {e.message}" for e in errors]
