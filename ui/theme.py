"""Light and dark, following the system (QStyleHints.colorScheme), and the bundled fonts.

Qt wheels ship no fonts, so `register_fonts()` must run before any text is drawn or text is
boxes. Panes ask `current_theme()` for the few domain colours they paint themselves (evidence
spans, chunk bands, quotes, fact statuses); everything else comes from the palette.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from engine.paths import resources_dir

SANS = "DejaVu Sans"
MONO = "DejaVu Sans Mono"


_registered: list[str] = []


def register_fonts() -> list[str]:
    """Register the bundled fonts (once per process) and make the sans family the application default."""
    families = _registered
    if not families:
        font_dir = resources_dir() / "fonts"
        for path in sorted(font_dir.glob("*.ttf")):
            fid = QFontDatabase.addApplicationFont(str(path))
            if fid >= 0:
                families.extend(f for f in QFontDatabase.applicationFontFamilies(fid) if f not in families)
    if families:
        QApplication.setFont(QFont(SANS if SANS in families else families[0], 10))
    return list(families)


def mono_font(point_size: int = 10) -> QFont:
    font = QFont(MONO, point_size)
    font.setStyleHint(QFont.StyleHint.Monospace)
    return font


@dataclass(frozen=True)
class Theme:
    dark: bool
    span_fills: tuple[str, ...]  # evidence spans, cycled per memory
    span_fact: str  # spans of fact memories (episodes use span_fills)
    span_flash: str  # the focused span, briefly
    chunk_band: str  # every other chunk
    chunk_rule: str  # separators / labels between chunks
    quote_fg: str
    quote_bg: str
    muted: str
    status: dict[str, str]
    notice: dict[str, tuple[str, str]]  # level -> (background, border)

    def color(self, name: str) -> QColor:
        return QColor(getattr(self, name))


LIGHT = Theme(
    dark=False,
    span_fills=("#fde68a", "#bfdbfe", "#bbf7d0", "#fbcfe8", "#ddd6fe"),
    span_fact="#fcd34d",
    span_flash="#f97316",
    chunk_band="#f3f4f6",
    chunk_rule="#6b7280",
    quote_fg="#4b5563",
    quote_bg="#eef2ff",
    muted="#6b7280",
    status={"active": "#15803d", "needs_review": "#b45309", "superseded": "#6b7280", "expired": "#6b7280",
            "retracted": "#b91c1c", "forgotten": "#9ca3af"},
    notice={"info": ("#eff6ff", "#93c5fd"), "warning": ("#fffbeb", "#fcd34d"), "error": ("#fef2f2", "#fca5a5")},
)

DARK = Theme(
    dark=True,
    span_fills=("#6b5a12", "#1e3a5f", "#14532d", "#6b2150", "#3b2f6b"),
    span_fact="#8a6d10",
    span_flash="#c2410c",
    chunk_band="#262a30",
    chunk_rule="#9ca3af",
    quote_fg="#a5b4fc",
    quote_bg="#1e2235",
    muted="#9ca3af",
    status={"active": "#4ade80", "needs_review": "#fbbf24", "superseded": "#9ca3af", "expired": "#9ca3af",
            "retracted": "#f87171", "forgotten": "#6b7280"},
    notice={"info": ("#172554", "#1d4ed8"), "warning": ("#422006", "#a16207"), "error": ("#450a0a", "#b91c1c")},
)

_current = LIGHT


def current_theme() -> Theme:
    return _current


def system_is_dark() -> bool:
    app = QGuiApplication.instance()
    if app is None:
        return False
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


def _dark_palette() -> QPalette:
    p = QPalette()
    base, window, text = QColor("#1b1e23"), QColor("#23272e"), QColor("#e5e7eb")
    for role, color in (
        (QPalette.ColorRole.Window, window), (QPalette.ColorRole.WindowText, text),
        (QPalette.ColorRole.Base, base), (QPalette.ColorRole.AlternateBase, QColor("#262a30")),
        (QPalette.ColorRole.ToolTipBase, window), (QPalette.ColorRole.ToolTipText, text),
        (QPalette.ColorRole.Text, text), (QPalette.ColorRole.Button, window),
        (QPalette.ColorRole.ButtonText, text), (QPalette.ColorRole.BrightText, QColor("#f87171")),
        (QPalette.ColorRole.Highlight, QColor("#2563eb")), (QPalette.ColorRole.HighlightedText, QColor("#ffffff")),
        (QPalette.ColorRole.Link, QColor("#60a5fa")), (QPalette.ColorRole.PlaceholderText, QColor("#9ca3af")),
    ):
        p.setColor(role, color)
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6b7280"))
    return p


def _stylesheet(theme: Theme) -> str:
    rules = []
    for level, (bg, border) in theme.notice.items():
        rules.append(f'#NoticeBanner[level="{level}"] {{ background: {bg}; border: 1px solid {border};'
                     " border-radius: 4px; }")
    rules.append(f"QLabel[role=\"muted\"] {{ color: {theme.muted}; }}")
    rules.append("QLabel[role=\"heading\"] { font-weight: bold; }")
    return "\n".join(rules)


def apply_theme(app: QApplication, dark: bool | None = None) -> Theme:
    """Fusion style with a light or dark palette (the system's choice unless `dark` is given)."""
    global _current
    dark = system_is_dark() if dark is None else dark
    _current = DARK if dark else LIGHT
    if app.style().name().lower() != "fusion":
        app.setStyle("Fusion")
    app.setPalette(_dark_palette() if dark else app.style().standardPalette())
    app.setStyleSheet(_stylesheet(_current))
    return _current


class ThemeWatcher(QObject):
    """Re-applies the theme when the system switches between light and dark (one per application)."""

    sigThemeChanged = Signal(object)  # Theme

    def __init__(self, app: QApplication) -> None:
        super().__init__(app)
        self._app = app
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._changed)

    def _changed(self, _scheme) -> None:
        self.sigThemeChanged.emit(apply_theme(self._app))


def theme_watcher(app: QApplication) -> ThemeWatcher:
    watcher = app.findChild(ThemeWatcher)
    return watcher if watcher is not None else ThemeWatcher(app)
