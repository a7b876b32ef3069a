"""The inspector's main window. For now: open a database and say what is in it.

The panes (memory browser, fact graph, timeline, spans, traces, conflicts, profile, bench)
arrive with the inspector issue; this window already opens any DB safely off the GUI thread's
hot path (a count query is milliseconds) and reports a foreign or corrupt file in place.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import QLabel, QMainWindow, QVBoxLayout, QWidget

from engine.errors import MemlensError
from engine.paths import resources_dir


def register_fonts() -> list[str]:
    """Qt wheels ship no fonts: register the bundled ones and make the first the default."""
    from PySide6.QtWidgets import QApplication

    families: list[str] = []
    font_dir = resources_dir() / "fonts"
    for path in sorted(font_dir.glob("*.ttf")):
        fid = QFontDatabase.addApplicationFont(str(path))
        if fid >= 0:
            families.extend(QFontDatabase.applicationFontFamilies(fid))
    if families:
        QApplication.setFont(QFont(families[0], 10))
    return families


class MainWindow(QMainWindow):
    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("memlens")
        self.resize(900, 600)
        body = QWidget(self)
        layout = QVBoxLayout(body)
        self.summary = QLabel("No database open.", body)
        self.summary.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        self.setCentralWidget(body)
        self.engine = None

    def open_database(self, path: Path) -> bool:
        from engine.memory import MemoryEngine

        if self.engine is not None:
            self.engine.close()
            self.engine = None
        try:
            self.engine = MemoryEngine(path, create=True)
        except MemlensError as exc:
            self.summary.setText(f"Cannot open this database.\n\n{exc}\n\nOpen another file or pass --db.")
            return False
        self.refresh()
        return True

    def refresh(self) -> None:
        if self.engine is None:
            return
        store = self.engine.store
        lines = [f"Database: {self.engine.path}", ""]
        scopes = store.scopes()
        if not scopes:
            lines.append("The database is empty. Ingest something: memlens ingest PATH --db " + str(self.engine.path))
        for scope in scopes:
            c = store.counts(scope)
            lines.append(
                f"{scope.user_id} / {scope.agent_id} ({scope.scope_type}:{scope.scope_id}): "
                f"{c['documents']} documents, {c['chunks']} chunks, {c['memories']} memories, "
                f"{c['facts']} facts, {c['open_conflicts']} open conflicts"
            )
        self.summary.setText("\n".join(lines))

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        super().closeEvent(event)
