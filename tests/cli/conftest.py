"""The command-line tests embed with the hashing embedder, whatever the developer's environment says."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def hashing(monkeypatch):
    monkeypatch.setenv("MEMLENS_EMBEDDER", "hashing")
