"""Prompt module: the reranker. At most `rerank_max` candidates in, their ids back in order.

The model can only reorder: ids it invents are ignored, ids it leaves out keep their fused
order after the ones it ranked. Failure or timeout returns ok=False (fused order kept).
"""

from __future__ import annotations

from typing import Any

from ..llm import LLMClient, Recorder

VERSION = "rerank-v1"
SCHEMA_NAME = "rerank"
SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["order", "reason"],
    "properties": {"order": {"type": "array", "items": {"type": "integer"}}, "reason": {"type": "string"}},
}
SYSTEM = ("Rank memories by how well they help answer the question. Return the ids of the useful ones, best first, "
          "using only ids from the list, and one sentence on why.")


def build_messages(query: str, items: list[tuple[int, str]]) -> list[dict[str, str]]:
    listing = "\n".join(f"id {mid}: {text[:400]}" for mid, text in items)
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: {query}\n\nMemories:\n{listing}"}]


def rerank(llm: LLMClient, query: str, items: list[tuple[int, str]], *, timeout: float,
           recorder: Recorder | None = None) -> dict[str, Any]:
    # no transport retries: a retried timeout would multiply the deadline (the fallback is the fused order)
    result = llm.complete_json("RERANK", build_messages(query, items), SCHEMA_NAME, SCHEMA, timeout=timeout,
                               recorder=recorder, max_retries=0)
    out: dict[str, Any] = {"ok": result.ok, "version": VERSION, "latency_ms": result.latency_ms,
                           "model": result.model, "error": result.error, "detail": result.detail,
                           "mode": result.mode, "fallbacks": list(result.fallbacks),
                           "candidates": [mid for mid, _ in items]}
    if result.ok and result.data is not None:
        known = {mid for mid, _ in items}
        order = [int(x) for x in result.data["order"] if int(x) in known]
        out.update({"order": list(dict.fromkeys(order)), "reason": result.data["reason"],
                    "ignored_ids": [x for x in result.data["order"] if x not in known]})
    return out
