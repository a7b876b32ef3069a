"""Strict harness (STYLE.md item 8): offscreen Qt before anything loads it, nothing left running."""

from __future__ import annotations

import os
import tempfile

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

from tests.fixtures import leaks  # noqa: E402

pytest_plugins = ["tests.fixtures.openai_plugin"]


@pytest.fixture(autouse=True)
def _no_leaks():
    """A test leaves nothing running: no Python thread, no work in a QThreadPool, no active QTimer
    (tests/fixtures/leaks.py). Torn down after pytest-qt has closed the test's widgets."""
    before, timers_before = leaks.thread_idents(), set(leaks.active_timers())
    yield
    pools = leaks.busy_pools()
    leaks.wait_for_pools()  # whatever the verdict, that work must not reach into the next test
    leaks.collect_widgets()
    timers = [what for key, what in leaks.active_timers().items() if key not in timers_before]
    threads = leaks.leaked_threads(before)
    for t in threads:
        t.join(timeout=5)
    still = [t.name for t in threads if t.is_alive()]
    assert not still, f"test left threads running: {still}"
    assert not pools, f"test left work running in a thread pool: {pools}"
    assert not timers, f"test left timers running: {timers}"
