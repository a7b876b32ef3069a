"""Fixtures the pane tests share: one scenario DB built per session, and a private copy per test."""

from __future__ import annotations

import pytest

from tests.ui.memdb_scenarios import build, engine_copy


@pytest.fixture(scope="session")
def template(tmp_path_factory):
    """The default scenario DB (memdb_scenarios.build), built once; a module may override it."""
    return build(tmp_path_factory.mktemp("seed") / "seed.db")


@pytest.fixture
def engine(template, tmp_path):
    """An open engine on a private copy of `template`."""
    with engine_copy(template, tmp_path) as eng:
        yield eng
