"""The Qt application: font registration, opening a database, the main window."""

from __future__ import annotations

import sys
from pathlib import Path


def run(db_path: Path, argv: list[str] | None = None) -> int:
    from PySide6.QtWidgets import QApplication

    from ui.main_window import MainWindow, register_fonts

    app = QApplication.instance() or QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("memlens")
    app.setOrganizationName("memlens")
    register_fonts()
    window = MainWindow()
    window.open_database(db_path)
    window.show()
    return app.exec()
