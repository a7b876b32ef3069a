"""Where bundled resources live: a source checkout, an installed tree or a PyInstaller bundle."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def resources_dir() -> Path:
    env = os.environ.get("MEMLENS_RESOURCES")
    if env:
        return Path(env)
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        return Path(frozen) / "resources"
    return Path(__file__).resolve().parent.parent / "resources"
