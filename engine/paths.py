"""Where bundled resources live: a source checkout, an installed tree or a PyInstaller bundle."""

from __future__ import annotations

import os
import sys
from pathlib import Path

RESOURCES_ENV = "MEMLENS_RESOURCES"  # both declared in the settings list; read here, below it
CACHE_DIR_ENV = "MEMLENS_CACHE_DIR"


def resources_dir() -> Path:
    env = os.environ.get(RESOURCES_ENV)
    if env:
        return Path(env)
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        return Path(frozen) / "resources"
    return Path(__file__).resolve().parent.parent / "resources"


def cache_dir() -> Path:
    """Where memlens keeps what it can recompute (the vector cache of `memlens perf --data`):
    $MEMLENS_CACHE_DIR, else the platform's per-user cache folder."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env)
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "memlens" / "cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "memlens"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memlens"
