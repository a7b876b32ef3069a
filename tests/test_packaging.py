"""Packaging files: the PyInstaller spec, desktop entry, AppStream metadata, icons, versions.

Fast checks only. The bundle itself is built and smoke-checked by `make package`
(packaging/build.py), which fails when its check fails; it is not part of `make test`.
"""

from __future__ import annotations

import ast
import configparser
import re
import shutil
import struct
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import engine
from app import about
from engine.paths import resources_dir

ROOT = Path(__file__).resolve().parent.parent
PACKAGING = ROOT / "packaging"
APP_ID = "io.github.memlens.Memlens"
DESKTOP = PACKAGING / "memlens.desktop"
METAINFO = PACKAGING / f"{APP_ID}.metainfo.xml"
SIZES = (16, 32, 48, 64, 128, 256, 512)


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _changelog_release() -> tuple[str, str]:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    match = re.search(r"^## \[(\d+\.\d+\.\d+[^\]]*)\] - (\d{4}-\d{2}-\d{2})$", text, re.M)
    assert match, "CHANGELOG.md has no '## [X.Y.Z] - YYYY-MM-DD' release heading"
    return match.group(1), match.group(2)


# -- versions ----------------------------------------------------------------------------------

def test_one_version_everywhere():
    version, _ = _changelog_release()
    assert _pyproject()["project"]["version"] == version
    assert engine.__version__ == version
    release = ET.parse(METAINFO).getroot().find("releases/release")
    assert release.get("version") == version


def test_changelog_is_keep_a_changelog():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    assert "## [Unreleased]" in text
    assert text.index("## [Unreleased]") < text.index(f"## [{engine.__version__}]")
    headings = re.findall(r"^### (\w+)$", text, re.M)
    assert headings and set(headings) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


# -- PyInstaller -------------------------------------------------------------------------------

def test_spec_parses_and_bundles_what_the_app_needs():
    source = (PACKAGING / "memlens.spec").read_text(encoding="utf-8")
    tree = ast.parse(source, filename="memlens.spec")
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert {"Analysis", "PYZ", "EXE", "COLLECT"} <= called
    collect = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "COLLECT")
    assert {k.arg: ast.literal_eval(k.value) for k in collect.keywords if k.arg == "name"} == {"name": "memlens"}
    assert "from app.cli import main" in source  # the console script's entry point
    assert "freeze_support()" in source  # bench --workers spawns processes
    for package in ('"app"', '"engine"', '"ui"'):  # panes are imported by name: collect_submodules
        assert package in source
    for dev in ('"pytest"', '"hypothesis"', '"tests"'):
        assert dev in source  # excluded


def test_build_script_and_icon_script_parse():
    for name in ("build.py", "make_icons.py"):
        ast.parse((PACKAGING / name).read_text(encoding="utf-8"), filename=name)
    sys.path.insert(0, str(PACKAGING))
    try:
        import make_icons
    finally:
        sys.path.remove(str(PACKAGING))
    assert make_icons.SIZES == SIZES
    assert make_icons.APP_ID == APP_ID


def test_make_package_target_runs_the_build_and_its_smoke_check():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    phony = re.search(r"^\.PHONY:(.*)$", makefile, re.M)
    assert phony and "package" in phony.group(1).split()
    target = re.search(r"^package:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert target, "no package target"
    recipe = target.group(1)
    assert "[test,package]" in recipe or "[package]" in recipe
    assert "packaging/build.py" in recipe and "--no-smoke" not in recipe
    extra = _pyproject()["project"]["optional-dependencies"]["package"]
    assert any(req.lower().startswith("pyinstaller") for req in extra)


# -- wheels carry resources/ -------------------------------------------------------------------

def test_wheels_carry_resources():
    setuptools_cfg = _pyproject()["tool"]["setuptools"]
    assert any(p.startswith("resources") for p in setuptools_cfg["packages"]["find"]["include"])
    assert "**/*" in setuptools_cfg["package-data"]["resources"]


def test_resources_dir_lookup_order(monkeypatch, tmp_path):
    monkeypatch.delenv("MEMLENS_RESOURCES", raising=False)
    monkeypatch.delattr(sys, "_MEIPASS", raising=False)
    assert resources_dir() == ROOT / "resources"  # the source tree (and site-packages/resources when installed)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert resources_dir() == tmp_path / "resources"  # a PyInstaller bundle
    monkeypatch.setenv("MEMLENS_RESOURCES", str(tmp_path / "elsewhere"))
    assert resources_dir() == tmp_path / "elsewhere"  # an explicit override wins


# -- desktop entry -----------------------------------------------------------------------------

def _desktop_entry() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # keys are case-sensitive
    parser.read_string(DESKTOP.read_text(encoding="utf-8"))
    assert parser.sections() == ["Desktop Entry"]
    return parser["Desktop Entry"]


def test_desktop_entry_keys():
    entry = _desktop_entry()
    assert entry["Type"] == "Application"
    assert entry["Name"] == "memlens"
    assert entry["Comment"]
    assert entry["Exec"].split()[0] == "memlens"
    assert entry["Icon"] == APP_ID
    assert entry["Terminal"] == "false"
    assert entry["Categories"].endswith(";") and "Development" in entry["Categories"].split(";")
    assert entry["Keywords"].endswith(";")


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None, reason="desktop-file-utils not installed")
def test_desktop_entry_validates(tmp_path):
    installed = tmp_path / f"{APP_ID}.desktop"  # validated under the name it is installed as
    shutil.copyfile(DESKTOP, installed)
    result = subprocess.run(["desktop-file-validate", str(installed)], capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


# -- AppStream ---------------------------------------------------------------------------------

def test_metainfo_fields():
    root = ET.parse(METAINFO).getroot()
    assert root.tag == "component" and root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID
    assert root.findtext("name") == "memlens"
    assert root.findtext("summary")
    assert root.findtext("metadata_license") == "CC0-1.0"
    license = _pyproject()["project"]["license"]
    assert root.findtext("project_license") == (license["text"] if isinstance(license, dict) else license) == about.LICENSE
    description = root.find("description")
    assert description is not None and description.findall("p")
    launchable = root.find("launchable")
    assert launchable.get("type") == "desktop-id" and launchable.text == f"{APP_ID}.desktop"
    assert root.findtext("provides/binary") == "memlens"
    version, date = _changelog_release()
    release = root.find("releases/release")
    assert (release.get("version"), release.get("date")) == (version, date)


@pytest.mark.skipif(shutil.which("appstreamcli") is None, reason="appstream not installed")
def test_metainfo_validates():
    result = subprocess.run(["appstreamcli", "validate", "--no-net", str(METAINFO)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# -- icons -------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
def test_icon_exists_at_every_size(size):
    data = (ROOT / "resources" / "icons" / f"memlens-{size}.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height, depth, colour_type = struct.unpack(">IIBB", data[16:26])
    assert (width, height) == (size, size)
    assert colour_type == 6 and depth == 8  # RGBA: transparent outside the rounded tile


def test_app_icon_has_every_size(qapp):
    icon = about.app_icon()
    assert not icon.isNull()
    assert sorted(s.width() for s in icon.availableSizes()) == list(SIZES)


# -- About -------------------------------------------------------------------------------------

def _dist_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_about_lists_every_runtime_dependency():
    listed = {c.distribution for c in about.COMPONENTS if c.distribution}
    for requirement in _pyproject()["project"]["dependencies"]:
        assert _dist_name(requirement) in listed, f"app/about.py does not list {requirement}"


def test_about_text():
    text = about.about_text()
    assert text.startswith(f"memlens {engine.__version__}\n")
    assert about.LICENSE in text
    for component in about.COMPONENTS:
        assert component.name in text
    assert about.APP_ID == APP_ID
