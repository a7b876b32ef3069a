"""One tiny call of each kind an endpoint will get (extraction, planner, reranker, answer,
judge), through the real prompt modules and the real client: what "Test connection" shows.

Each call uses its task's model, prompt and schema on a one-line input, so a model that
cannot follow a schema, a server that refuses a structured-output mode or a model name it does
not serve shows up here and not in the middle of an ingestion. The client learns the mode
the endpoint takes on the first call; the report says which mode each call used.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .extract.model import SourceChunk
from .llm import FATAL_ERRORS, TASKS, LLMClient, LLMConfig, LLMResult, describe_failure
from .prompts import extract_v2, plan_v1, qa_v1, rerank_v1

CALL_TIMEOUT_S = 20.0
FIRST_CALL_TIMEOUT_S = 60.0  # a local server may still be loading the model

_TURN = "I moved to Lisbon last week and started at Acme as a designer."
_QUESTION = "Where does Ana live now?"
_MEMORIES = [(1, "Ana moved to Lisbon in May 2024."), (2, "Ana likes green tea.")]


def _probe(client: LLMClient, task: str) -> LLMResult:
    if task == "EXTRACT":
        chunk = SourceChunk(chunk_id=0, document_id=0, text=_TURN, start=0, end=len(_TURN), speaker="Ana",
                            role="user", trust="user", source_time="2024-05-20T09:00:00Z")
        return client.complete_json(task, extract_v2.build_messages([chunk]), extract_v2.SCHEMA_NAME,
                                    extract_v2.SCHEMA)
    if task == "PLAN":
        return client.complete_json(task, plan_v1.build_messages(_QUESTION), plan_v1.SCHEMA_NAME, plan_v1.SCHEMA)
    if task == "RERANK":
        return client.complete_json(task, rerank_v1.build_messages(_QUESTION, _MEMORIES), rerank_v1.SCHEMA_NAME,
                                    rerank_v1.SCHEMA)
    if task == "ANSWER":
        context = "\n".join(text for _, text in _MEMORIES)
        return client.complete_json(task, qa_v1.answer_messages(_QUESTION, context, None), "answer",
                                    qa_v1.ANSWER_SCHEMA)
    return client.complete_json(task, qa_v1.judge_messages(_QUESTION, "Lisbon", "She lives in Lisbon."),
                                "judgement", qa_v1.JUDGE_SCHEMA)


def check_endpoint(config: LLMConfig) -> dict[str, Any]:
    """{"base_url", "models" (what /v1/models lists, None if unreadable), "ok", "calls": [{"task",
    "model", "ok", "error", "line", "mode", "fallbacks", "requests", "latency_ms", "tokens"}],
    "modes": {model: mode}}. No retries; a fatal error (unknown model, refused key, no
    connection) skips the later calls to the same model, marked "not tried"."""
    config = dataclasses.replace(config, timeout=CALL_TIMEOUT_S, max_retries=0,
                                 first_call_timeout=FIRST_CALL_TIMEOUT_S)
    calls: list[dict[str, Any]] = []
    fatal: dict[str, str] = {}  # model -> the error that stops its later calls
    with LLMClient(config) as client:
        models = client.list_models()
        for task in TASKS:
            model = client.model_for(task)
            if model in fatal:
                calls.append({"task": task, "model": model, "ok": False, "error": fatal[model],
                              "line": f"not tried after {fatal[model]}", "mode": None, "fallbacks": [],
                              "requests": 0, "latency_ms": 0.0, "tokens": None})
                continue
            r = _probe(client, task)
            if r.error in FATAL_ERRORS:
                fatal[model] = r.error
            calls.append({"task": task, "model": model, "ok": r.ok, "error": r.error,
                          "line": describe_failure(r.error, r.detail), "mode": r.mode, "fallbacks": list(r.fallbacks),
                          "requests": r.requests, "latency_ms": r.latency_ms,
                          "tokens": None if r.prompt_tokens is None else (r.prompt_tokens, r.completion_tokens)})
        modes = {client.model_for(t): client.structured_mode(t) for t in TASKS}
    return {"base_url": config.base_url, "models": models, "ok": all(c["ok"] for c in calls), "calls": calls,
            "modes": modes}
