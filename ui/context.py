"""What every pane gets: the engine, the scope being inspected, the selection bus, the runner."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.memory import MemoryEngine
from engine.scope import Scope

from .selection import SelectionBus
from .tasks import TaskRunner


@dataclass
class AppContext:
    engine: MemoryEngine
    scope: Scope
    bus: SelectionBus = field(default_factory=SelectionBus)
    runner: TaskRunner = field(default_factory=TaskRunner)
