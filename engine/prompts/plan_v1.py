"""Prompt module: the retrieval planner (query variants, entities, time frame, intent).

Runs only when cheap retrieval is weak; a failure or a timeout returns ok=False and the
pipeline keeps its cheap result (the deterministic fallback).
"""

from __future__ import annotations

from typing import Any

from ..llm import LLMClient, Recorder
from ..timeutil import normalise_iso

VERSION = "plan-v1"
SCHEMA_NAME = "retrieval_plan"
SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "required": ["variants", "entities", "intent", "as_of"],
    "properties": {
        "variants": {"type": "array", "items": {"type": "string"}},
        "entities": {"type": "array", "items": {"type": "string"}},
        "intent": {"type": "string", "enum": ["current", "historical"]},
        "as_of": {"type": ["string", "null"]},
    },
}
SYSTEM = ("You plan a search over a person's long-term memory. Given a question, return up to three short "
          "rephrasings that would match how the answer was originally said, the names of people, places and "
          "things it is about, whether it asks about the current state or about the past ('historical'), and an "
          "ISO date if it asks about a specific moment, else null.")


def build_messages(query: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": query}]


def plan(llm: LLMClient, query: str, *, timeout: float, recorder: Recorder | None = None) -> dict[str, Any]:
    # no transport retries: a retried timeout would multiply the deadline (the fallback is cheap retrieval)
    result = llm.complete_json("PLAN", build_messages(query), SCHEMA_NAME, SCHEMA, timeout=timeout, recorder=recorder,
                               max_retries=0)
    out: dict[str, Any] = {"ok": result.ok, "version": VERSION, "latency_ms": result.latency_ms,
                           "model": result.model, "error": result.error, "detail": result.detail,
                           "mode": result.mode, "fallbacks": list(result.fallbacks)}
    if result.ok and result.data is not None:
        d = result.data
        as_of = None
        if d.get("as_of"):
            try:
                as_of = normalise_iso(d["as_of"])
            except ValueError:
                as_of = None
        out.update({"variants": [str(v) for v in d["variants"]][:3], "entities": [str(e) for e in d["entities"]][:8],
                    "intent": d["intent"], "as_of": as_of})
    return out
