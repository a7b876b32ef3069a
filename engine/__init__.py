"""memlens engine: the headless agent-memory core (no Qt, no ui, no app)."""

__version__ = "0.1.0"
