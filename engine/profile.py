"""The profile: what the agent should always know about the user, each line backed by facts.

Built on read from active, non-external, non-forgotten facts, so the next call after any
consolidation or curation sees the change. Static lines are identity, role and durable
preferences; dynamic lines are current plans, projects and recent focus. Multi-valued
predicates merge into one line ("Ana likes hiking, jazz and figs."). Lines are ranked by
importance x confidence and cut at a token budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .extract.canonical import MULTI_VALUED
from .records import Fact
from .scope import Scope
from .store.store import Store
from .tokens import estimate_tokens

DYNAMIC_CATEGORIES = frozenset({"plan", "event"})
DYNAMIC_PREDICATES = frozenset({"plans_to", "working_on", "focus", "learning", "reading", "watching",
                                "current_project", "visiting", "traveling_to"})


@dataclass(slots=True)
class ProfileLine:
    text: str
    fact_ids: list[int]
    section: str  # static | dynamic
    subject: str
    predicate_key: str
    weight: float
    tokens: int = 0


@dataclass(slots=True)
class Profile:
    static: list[ProfileLine] = field(default_factory=list)
    dynamic: list[ProfileLine] = field(default_factory=list)
    cut: list[ProfileLine] = field(default_factory=list)  # lines the budget left out
    budget: int = 400

    def as_dict(self) -> dict[str, Any]:
        def line(x: ProfileLine) -> dict[str, Any]:
            return {"text": x.text, "fact_ids": x.fact_ids, "tokens": x.tokens}

        return {"static": [line(x) for x in self.static], "dynamic": [line(x) for x in self.dynamic],
                "cut": [line(x) for x in self.cut], "budget": self.budget}

    def lines(self) -> list[ProfileLine]:
        return self.static + self.dynamic


def _section(fact: Fact) -> str:
    if fact.is_static:
        return "static"
    if fact.category in DYNAMIC_CATEGORIES or fact.predicate_key in DYNAMIC_PREDICATES or fact.forget_after:
        return "dynamic"
    return "static"


def _weight(fact: Fact) -> float:
    return fact.importance * fact.confidence + (1.0 if fact.pinned else 0.0)


# How a merged multi-valued line reads ("Ana has pets Rex and Miso."); others use the predicate.
VERB_PHRASES = {"has_pet": "has pets", "uses_tool": "uses", "speaks_language": "speaks", "friend_of": "is friends with",
                "sibling_of": "has siblings", "visited": "has visited", "plans_to": "plans to", "allergic_to":
                "is allergic to", "hobby": "has hobbies", "knows": "knows", "likes": "likes", "dislikes": "dislikes"}


def _join(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def build_profile(store: Store, scope: Scope, *, budget: int = 400) -> Profile:
    facts = [f for f in store.facts(scope, statuses=("active",))
             if f.trust != "external" and not f.forgotten_at and f.relation != "derives"]
    groups: dict[tuple[str, str], list[Fact]] = {}
    for f in facts:
        groups.setdefault((f.subject_key, f.predicate_key), []).append(f)
    lines: list[ProfileLine] = []
    for (_, pkey), group in groups.items():
        group.sort(key=lambda f: (f.valid_from or f.learned_at, f.id))
        weight = max(_weight(f) for f in group)
        section = _section(group[-1])
        if pkey in MULTI_VALUED and len(group) > 1:
            verb = VERB_PHRASES.get(pkey, group[0].predicate.replace("_", " "))
            text = f"{group[0].subject} {verb} {_join([f.object for f in group])}."
            lines.append(ProfileLine(text, [f.id for f in group], section, group[0].subject, pkey, weight))
        else:
            for f in group:
                lines.append(ProfileLine(f.text, [f.id], section, f.subject, pkey, _weight(f)))
    lines.sort(key=lambda x: (-x.weight, x.text))
    profile = Profile(budget=budget)
    used = 0
    for line in lines:
        line.tokens = estimate_tokens(line.text)
        if used + line.tokens > budget:
            profile.cut.append(line)
            continue
        used += line.tokens
        (profile.static if line.section == "static" else profile.dynamic).append(line)
    return profile
