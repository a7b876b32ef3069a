"""Prompt modules for optional question answering in benchmarks: one answer, one judgement.

A single answer per question (no best-of-N), from the context block the recall pipeline built;
the judge compares it with the gold answer. Both prompts are versioned and hashed, and the
hashes are stored with the run, so two runs' QA numbers are only compared when they match.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..llm import LLMClient

VERSION = "qa-v1"

ANSWER_SYSTEM = ("Answer the question using only the memories given. Be brief: a name, a date, a short phrase. "
                 "If the memories do not contain the answer, say exactly: not mentioned.")
ANSWER_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": False, "required": ["answer"],
                                 "properties": {"answer": {"type": "string"}}}

JUDGE_SYSTEM = ("You grade an answer against the gold answer to a question about a conversation. It is correct "
                "when it states the same fact as the gold answer (wording, format and extra detail do not matter; "
                "a date counts if it names the same day or period). For an unanswerable question the gold answer "
                "says so, and only an answer that declines is correct.")
JUDGE_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": False, "required": ["correct", "reason"],
                                "properties": {"correct": {"type": "boolean"}, "reason": {"type": "string"}}}


def prompt_hashes() -> dict[str, str]:
    def h(text: str) -> str:
        return hashlib.sha256(f"{VERSION}\n{text}".encode()).hexdigest()

    return {"answer": h(ANSWER_SYSTEM), "judge": h(JUDGE_SYSTEM)}


def answer_messages(question: str, context: str, when: str | None) -> list[dict[str, str]]:
    dated = f" (asked on {when})" if when else ""
    return [{"role": "system", "content": ANSWER_SYSTEM},
            {"role": "user", "content": f"Memories:\n{context}\n\nQuestion{dated}: {question}"}]


def judge_messages(question: str, gold: str, given: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": f"Question: {question}\nGold answer: {gold}\nAnswer to grade: {given}"}]


def answer(llm: LLMClient, question: str, context: str, when: str | None) -> dict[str, Any]:
    result = llm.complete_json("ANSWER", answer_messages(question, context, when), "answer", ANSWER_SCHEMA)
    data = result.data or {}
    return {"ok": result.ok, "answer": data["answer"] if result.ok else None, "error": result.error,
            "detail": result.detail, "model": result.model, "latency_ms": result.latency_ms}


def judge(llm: LLMClient, question: str, gold: str, given: str) -> dict[str, Any]:
    result = llm.complete_json("JUDGE", judge_messages(question, gold, given), "judgement", JUDGE_SCHEMA)
    data = result.data or {}
    return {"ok": result.ok, "correct": bool(data["correct"]) if result.ok else None,
            "reason": data["reason"] if result.ok else None, "error": result.error, "detail": result.detail,
            "model": result.model}
