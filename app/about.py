"""What the About box says: version, licence, and the components memlens ships with.

Headless on import (no Qt): `about_text()` and `components()` only read package metadata, which
PyInstaller bundles for the libraries listed here (packaging/memlens.spec). `app_icon()` builds
the window icon from resources/icons and is the one function that needs Qt.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from engine import __version__
from engine.paths import resources_dir

APP_ID = "io.github.memlens.Memlens"  # desktop entry, AppStream id, icon name (packaging/)
LICENSE = "Apache-2.0"
SUMMARY = ("A desktop inspector for agent long-term memory: source-grounded facts, version chains "
           "and traced retrieval over one SQLite file.")
ICON_SIZES = (16, 32, 48, 64, 128, 256, 512)


@dataclass(frozen=True)
class Component:
    name: str
    distribution: str | None  # the PyPI distribution whose version is shown; None for bundled data
    license: str
    role: str
    version: str | None = None  # for bundled data, fixed here


# Every runtime dependency in pyproject.toml is listed (tests/test_packaging.py checks it), plus the
# data files under resources/ that carry their own licences.
COMPONENTS: tuple[Component, ...] = (
    Component("Qt for Python (PySide6)", "pyside6-essentials", "LGPL-3.0-only OR GPL-2.0-only OR GPL-3.0-only",
              "the desktop interface (Qt 6)"),
    Component("Shiboken6", "shiboken6", "LGPL-3.0-only OR GPL-2.0-only OR GPL-3.0-only", "Qt for Python bindings"),
    Component("pyqtgraph", "pyqtgraph", "MIT", "graph, timeline and benchmark plots"),
    Component("NumPy", "numpy", "BSD-3-Clause; its OpenBLAS is BSD-3-Clause", "vectors and scores"),
    Component("APSW (SQLite)", "apsw", "any OSI-approved licence; SQLite is public domain", "the memory store"),
    Component("ONNX Runtime", "onnxruntime", "MIT", "runs the local embedding model"),
    Component("Hugging Face Tokenizers", "tokenizers", "Apache-2.0", "tokenises text for the local model"),
    Component("Faiss", "faiss-cpu", "MIT", "the vector index"),
    Component("OpenAI Python library", "openai", "Apache-2.0", "OpenAI-compatible LLM and embedding endpoints"),
    Component("MCP Python SDK", "mcp", "MIT", "`memlens mcp`: memory served to agents over MCP"),
    Component("jsonschema", "jsonschema", "MIT", "checks every model reply against its prompt's schema"),
    Component("orjson", "orjson", "Apache-2.0 OR MIT", "writes each recall's trace as JSON"),
    Component("platformdirs", "platformdirs", "MIT", "where the default database lives on each platform"),
    Component("all-MiniLM-L6-v2 (int8 ONNX)", None, "Apache-2.0",
              "the bundled local embedding model, from sentence-transformers (resources/models, see MODEL.md)"),
    Component("DejaVu fonts", None, "Bitstream Vera licence, changes public domain; see resources/fonts/LICENSE-DejaVu.txt",
              "the interface fonts", "2.37"),
)


def component_version(component: Component) -> str:
    if component.distribution is None:
        return component.version or ""
    try:
        return metadata.version(component.distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def components() -> list[dict[str, str]]:
    """[{"name", "version", "license", "role"}] in display order."""
    return [{"name": c.name, "version": component_version(c), "license": c.license, "role": c.role}
            for c in COMPONENTS]


def about_text() -> str:
    lines = [f"memlens {__version__}", SUMMARY, "", f"Licensed under the {LICENSE} licence.", "",
             "Built with:"]
    for c in components():
        version = f" {c['version']}" if c["version"] else ""
        lines.append(f"  {c['name']}{version}: {c['role']} [{c['license']}]")
    return "\n".join(lines)


def app_icon():
    """The window icon (every size in resources/icons); an empty QIcon if the files are missing."""
    from PySide6.QtGui import QIcon

    icon = QIcon()
    folder = resources_dir() / "icons"
    for size in ICON_SIZES:
        path = folder / f"memlens-{size}.png"
        if path.is_file():
            icon.addFile(str(path))
    return icon
