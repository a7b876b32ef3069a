"""Colours and plot set-up shared by the graph, timeline, trace and benchmark panes.

Fact statuses take the theme's colours (ui/theme.py) so every pane paints a status the same way;
relation types, channels and score components get a small fixed palette that reads on light and
dark backgrounds. Plots get the theme's background instead of pyqtgraph's global black.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor

from ui.theme import current_theme

RELATION_COLORS = {"updates": "#ea580c", "extends": "#2563eb", "derives": "#9333ea"}
STRUCTURE_EDGE = ("#94a3b8", "#64748b")  # (light, dark) subject/object edges
MENTION_EDGE = ("#cbd5e1", "#475569")
ENTITY_COLOR = ("#0f766e", "#2dd4bf")
EPISODE_COLOR = ("#a8a29e", "#78716c")
SEED_OUTLINE = "#dc2626"
SERIES = ("#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2", "#ca8a04", "#db2777", "#4b5563",
          "#65a30d", "#7c3aed", "#0d9488", "#be185d", "#0369a1", "#a16207")
FALLBACK_STATUS = {"active": "#15803d", "needs_review": "#b45309", "superseded": "#6b7280", "expired": "#6b7280",
                   "retracted": "#b91c1c", "forgotten": "#9ca3af"}


def dark() -> bool:
    return bool(getattr(current_theme(), "dark", False))


def pick(pair: tuple[str, str]) -> str:
    return pair[1] if dark() else pair[0]


def status_color(status: str) -> QColor:
    colors = getattr(current_theme(), "status", None) or FALLBACK_STATUS
    return QColor(colors.get(status, FALLBACK_STATUS.get(status, "#6b7280")))


def series_color(i: int) -> QColor:
    return QColor(SERIES[i % len(SERIES)])


def plot_colors() -> tuple[str, str]:
    """(background, foreground) for plots under the current theme."""
    return ("#1b1e23", "#d1d5db") if dark() else ("#ffffff", "#374151")


def styled_plot(parent=None, **kwargs) -> pg.PlotWidget:
    """A PlotWidget painted in the theme's colours (not pyqtgraph's global black)."""
    bg, fg = plot_colors()
    w = pg.PlotWidget(parent=parent, background=bg, **kwargs)
    item = w.getPlotItem()
    for name in ("left", "bottom", "right", "top"):
        ax = item.getAxis(name)
        ax.setPen(pg.mkPen(fg))
        ax.setTextPen(pg.mkPen(fg))
    return w


__all__ = ["RELATION_COLORS", "status_color", "series_color", "styled_plot", "plot_colors", "pick", "dark",
           "STRUCTURE_EDGE", "MENTION_EDGE", "ENTITY_COLOR", "EPISODE_COLOR", "SEED_OUTLINE"]
