"""A module imported on first use, for heavy libraries a run may never need."""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any


class LazyModule(ModuleType):
    """Stands for module `name`; the first attribute looked up imports it (once, under a lock:
    importlib's LazyLoader is not thread-safe on Python 3.11, and the MCP server's workers may
    all reach for the module at once)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._lock = threading.Lock()
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:  # only for names the stand-in itself does not have
        module = self._module
        if module is None:
            with self._lock:
                if self._module is None:
                    self._module = importlib.import_module(self.__name__)
                module = self._module
        return getattr(module, attr)


def lazy_import(name: str) -> ModuleType:
    return LazyModule(name)
