"""An in-pane notice: errors and empty states are shown where they happen, with what to do next.

Never a traceback dialog (STYLE.md, Orange3): a pane puts a `NoticeBanner` at its top and calls
`show_notice(...)` or `show_error(exc)`; the banner can carry buttons ("Open another file…").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy

from engine.errors import (
    BadInput,
    Cancelled,
    DatabaseTooNew,
    EmbedderError,
    MemlensError,
    NotAMemlensDatabase,
    ScopeError,
)

LEVELS = ("info", "warning", "error")


def describe_error(exc: BaseException) -> tuple[str, str]:
    """(what happened, what to do) for an exception raised by engine work."""
    text = str(exc) or exc.__class__.__name__
    if isinstance(exc, NotAMemlensDatabase):
        return text, "Open another file (File > Open database…) or create one with `memlens ingest`."
    if isinstance(exc, DatabaseTooNew):
        return text, "Upgrade memlens to read this file, or open another database."
    if isinstance(exc, ScopeError):
        return text, "Pick a scope in the status bar."
    if isinstance(exc, EmbedderError):
        return text, "Check the embedder in Settings (MEMLENS_EMBEDDER) and that its model or endpoint is reachable."
    if isinstance(exc, Cancelled):
        return "Stopped.", "Run it again when you are ready."
    if isinstance(exc, BadInput):
        return text, "Change the input and try again; nothing was written."
    if isinstance(exc, MemlensError):
        return text, "Try again; if it keeps happening, run the same action with the memlens CLI to see details."
    if isinstance(exc, OSError):
        return f"{exc.__class__.__name__}: {text}", "Check that the file exists and is readable, then retry."
    return (f"Unexpected {exc.__class__.__name__}: {text}",
            "This is a bug in memlens. Retry; if it persists, report it with the database's `memlens --json` output.")


class NoticeBanner(QFrame):
    """A one-line-or-few message strip with optional action buttons; hidden when empty."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("NoticeBanner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.label, 1)
        self._buttons: list[QPushButton] = []
        self.level = "info"
        self.hide()

    @property
    def text(self) -> str:
        return self.label.text()

    def show_notice(self, message: str, level: str = "info",
                    actions: Sequence[tuple[str, Callable[[], None]]] = ()) -> None:
        if level not in LEVELS:
            raise ValueError(level)
        self.level = level
        self.setProperty("level", level)
        self.label.setText(message)
        for b in self._buttons:
            b.deleteLater()
        self._buttons = []
        layout = self.layout()
        assert layout is not None  # set in __init__
        for title, callback in actions:
            button = QPushButton(title, self)
            button.clicked.connect(lambda _=False, cb=callback: cb())
            layout.addWidget(button)
            self._buttons.append(button)
        self.style().unpolish(self)
        self.style().polish(self)
        self.show()

    def show_error(self, exc: BaseException, context: str = "",
                   actions: Sequence[tuple[str, Callable[[], None]]] = ()) -> None:
        what, todo = describe_error(exc)
        prefix = f"{context}: " if context else ""
        self.show_notice(f"{prefix}{what}\n{todo}", "error", actions)

    def clear(self) -> None:
        self.label.clear()
        for b in self._buttons:
            b.deleteLater()
        self._buttons = []
        self.hide()
