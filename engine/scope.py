"""Scope: who a memory belongs to. Every store read and write takes one."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ScopeError

SCOPE_TYPES = ("agent", "conversation", "task", "channel", "shared")


@dataclass(frozen=True, slots=True)
class Scope:
    user_id: str
    agent_id: str
    scope_type: str = "agent"
    scope_id: str = "default"

    def __post_init__(self) -> None:
        for name in ("user_id", "agent_id", "scope_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ScopeError(f"scope needs a non-empty {name}")
        if self.scope_type not in SCOPE_TYPES:
            raise ScopeError(f"unknown scope type {self.scope_type!r} (one of {', '.join(SCOPE_TYPES)})")

    def as_params(self) -> tuple[str, str, str, str]:
        return (self.user_id, self.agent_id, self.scope_type, self.scope_id)

    def as_dict(self) -> dict[str, str]:
        return {
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "scope_type": self.scope_type,
            "scope_id": self.scope_id,
        }

    @classmethod
    def default(cls, user: str | None = None, agent: str | None = None) -> Scope:
        agent_id = agent or "default"
        return cls(user_id=user or "default", agent_id=agent_id, scope_type="agent", scope_id=agent_id)
