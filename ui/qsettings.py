"""The QSettings the inspector stores its values in (the settings list is engine/settings.py)."""

from __future__ import annotations

import os

from PySide6.QtCore import QSettings

from engine.settings import BY_NAME

ORGANISATION = "memlens"
APPLICATION = "memlens"
SETTINGS_FILE_ENV = BY_NAME["settings_file"].env  # an INI file instead of the platform store (tests, portable use)


def open_qsettings(path: str | os.PathLike[str] | None = None) -> QSettings:
    """An INI file at `path` or $MEMLENS_SETTINGS_FILE, else the platform store under
    organisation "memlens"."""
    path = path or os.environ.get(SETTINGS_FILE_ENV)
    if path:
        return QSettings(str(path), QSettings.Format.IniFormat)
    return QSettings(ORGANISATION, APPLICATION)
