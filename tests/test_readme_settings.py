"""The README's settings table and the settings list say the same, and no MEMLENS_ variable the
product reads goes around the list."""

from __future__ import annotations

import re
from pathlib import Path

from engine.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"`(MEMLENS_[A-Z0-9_]+)`")


def readme_table() -> set[str]:
    """The variables named in the first column of the README table headed `| variable | meaning |`."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("| variable | meaning |")
    names: set[str] = set()
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        names.update(NAME.findall(line.split("|")[1]))
    return names


def test_every_setting_is_in_the_readme_and_the_readme_names_no_other():
    declared = {s.env for s in SETTINGS}
    documented = readme_table()
    assert declared - documented == set(), "settings missing from the README's table"
    assert documented - declared == set(), "the README's table names variables the settings list does not know"


def test_the_product_reads_no_memlens_variable_the_list_does_not_declare():
    declared = {s.env for s in SETTINGS}
    read = {}
    for path in [*ROOT.glob("engine/**/*.py"), *ROOT.glob("app/**/*.py"), *ROOT.glob("ui/**/*.py")]:
        for name in re.findall(r"""["'](MEMLENS_[A-Z0-9_]+)["']""", path.read_text(encoding="utf-8")):
            read.setdefault(name, path.relative_to(ROOT).as_posix())
    assert {name: where for name, where in read.items() if name not in declared} == {}
