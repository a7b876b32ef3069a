"""The Trace: every candidate any channel produced, its scores, and its fate.

Every candidate ends with exactly one of: a final rank (it is in the results), or a drop
(stage + typed reason + a one-line detail). That invariant is what lets the inspector answer
"why not this memory?" for anything a channel ever proposed.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Any

STAGES = ("plan", "candidates", "filters", "score", "rerank", "rank", "budget")


class DropReason(enum.StrEnum):
    """Why a candidate left the pipeline; stored (and compared) as its plain string value."""

    OUT_OF_SCOPE = "out_of_scope"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    FORGOTTEN = "forgotten"
    RETRACTED = "retracted"
    NOT_VALID_AT = "not_valid_at"
    TRUST_FILTERED = "trust_filtered"
    DUPLICATE = "duplicate"
    BELOW_CUT = "below_cut"
    BUDGET = "budget"


@dataclass(slots=True)
class CandidateTrace:
    memory_id: int
    channels: dict[str, dict[str, float]] = field(default_factory=dict)  # channel -> {"rank", "score"}
    components: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    rank: int | None = None
    dropped: dict[str, str] | None = None  # {"stage", "reason", "detail"}
    tokens: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # not persisted: what the stages read

    def drop(self, stage: str, reason: str, detail: str = "") -> None:
        if self.dropped is None:
            self.dropped = {"stage": stage, "reason": reason, "detail": detail}
            self.rank = None

    @property
    def alive(self) -> bool:
        return self.dropped is None

    def as_dict(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "channels": self.channels, "components": self.components,
                "score": round(self.score, 6), "rank": self.rank, "dropped": self.dropped, "tokens": self.tokens}


@dataclass(slots=True)
class Trace:
    query: str
    origin: str
    recipe: str
    k: int
    as_of: str | None
    id: int | None = None
    candidates: dict[int, CandidateTrace] = field(default_factory=dict)
    stages: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    plan: dict[str, Any] | None = None
    rerank: dict[str, Any] | None = None
    intent: str = "current"
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def query_hash(self) -> str:
        return hashlib.sha256(self.query.encode("utf-8")).hexdigest()

    def candidate(self, memory_id: int) -> CandidateTrace:
        cand = self.candidates.get(memory_id)
        if cand is None:
            cand = self.candidates[memory_id] = CandidateTrace(memory_id)
        return cand

    def alive(self) -> list[CandidateTrace]:
        return [c for c in self.candidates.values() if c.alive]

    def stage(self, name: str, n_in: int, n_out: int, ms: float, **extra: Any) -> None:
        self.stages.append({"name": name, "in": n_in, "out": n_out, "ms": round(ms, 3), **extra})
        self.timings[name] = round(self.timings.get(name, 0.0) + ms, 3)

    def as_dict(self, *, include_query: bool = True) -> dict[str, Any]:
        return {
            "id": self.id, "query": self.query if include_query else None, "query_hash": self.query_hash,
            "origin": self.origin, "recipe": self.recipe, "k": self.k, "as_of": self.as_of, "intent": self.intent,
            "plan": self.plan, "rerank": self.rerank, "stages": self.stages, "timings_ms": self.timings,
            "candidates": [c.as_dict() for c in sorted(
                self.candidates.values(), key=lambda c: (c.rank is None, c.rank or 0, -c.score, c.memory_id))],
        }


def lift_above(c: CandidateTrace, above: float, rule: str) -> None:
    """Put `c` just above the score `above` (if it is not already), the lift added to its `rule`
    component: how a current-truth rule makes one statement lead another."""
    if c.score <= above:
        delta = above + 1e-6 - c.score
        c.components[rule] = round(c.components.get(rule, 0.0) + delta, 6)
        c.score += delta
