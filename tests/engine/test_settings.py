"""The settings list's headless part: where the database lives by default."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine.settings import default_db_path


def test_memlens_db_wins(tmp_path):
    assert default_db_path({"MEMLENS_DB": "~/x.db"}) == Path("~/x.db").expanduser()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG_DATA_HOME is the Linux convention")
def test_the_platform_data_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_db_path({}) == tmp_path / "memlens" / "memlens.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_db_path({}) == Path.home() / ".local" / "share" / "memlens" / "memlens.db"
