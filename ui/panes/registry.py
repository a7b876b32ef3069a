"""The inspector's panes, in menu order: (key, title, module, class, shortcut)."""

from __future__ import annotations

PANES: tuple[tuple[str, str, str, str, str], ...] = (
    ("memories", "Memory browser", "ui.panes.memory_browser", "MemoryBrowserPane", "Ctrl+1"),
    ("spans", "Source spans", "ui.panes.source_spans", "SourceSpansPane", "Ctrl+2"),
    ("graph", "Fact graph", "ui.panes.fact_graph", "FactGraphPane", "Ctrl+3"),
    ("timeline", "Version timeline", "ui.panes.timeline", "TimelinePane", "Ctrl+4"),
    ("traces", "Retrieval traces", "ui.panes.traces", "TracesPane", "Ctrl+5"),
    ("conflicts", "Conflicts", "ui.panes.conflicts", "ConflictsPane", "Ctrl+6"),
    ("profile", "Profile", "ui.panes.profile", "ProfilePane", "Ctrl+7"),
    ("bench", "Benchmarks", "ui.panes.bench", "BenchPane", "Ctrl+8"),
    ("settings", "Settings", "ui.panes.settings", "SettingsPane", "Ctrl+9"),
    ("health", "Store health", "ui.panes.health", "HealthPane", "Ctrl+0"),
)
