"""Strict harness (STYLE.md item 8): offscreen Qt before anything loads it, no stray threads."""

from __future__ import annotations

import os
import tempfile
import threading

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("MEMLENS_EMBEDDER", "hashing")
# Never read or write the user's real settings or default database from a test.
_TEST_HOME = tempfile.mkdtemp(prefix="memlens-tests-")
os.environ["MEMLENS_SETTINGS_FILE"] = os.path.join(_TEST_HOME, "settings.conf")
os.environ["XDG_DATA_HOME"] = os.path.join(_TEST_HOME, "data")
os.environ["XDG_CONFIG_HOME"] = os.path.join(_TEST_HOME, "config")
os.environ.pop("MEMLENS_DB", None)
# Never let a test reach a real endpoint configured on the developer's machine.
for _var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "MEMLENS_LLM_BASE_URL", "MEMLENS_LLM_API_KEY"):
    os.environ.pop(_var, None)

import pytest  # noqa: E402

pytest_plugins = ["tests.fixtures.openai_plugin"]


@pytest.fixture(autouse=True)
def _no_leaked_threads():
    before = {t.ident for t in threading.enumerate()}
    yield
    leaked = [
        t
        for t in threading.enumerate()
        if t.ident not in before and t.is_alive() and not t.daemon
    ]
    for t in leaked:
        t.join(timeout=5)
    still = [t.name for t in leaked if t.is_alive()]
    assert not still, f"test left threads running: {still}"
