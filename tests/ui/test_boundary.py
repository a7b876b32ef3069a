"""The inspector talks to the engine through MemoryEngine only (ARCHITECTURE.md, "Layers").

The import contract in pyproject.toml keeps ui/ from importing engine.store; this finds what an
import check cannot see: reaching the store through the engine object (`ctx.engine.store.x()`,
`engine.store.db`).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def store_reaches(source: str) -> list[int]:
    """Lines where `.store` is read off something named engine/eng (ctx.engine.store, eng.store)."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr == "store" and _name(node.value) in ("engine", "eng"))


def test_the_check_finds_what_it_looks_for():
    assert store_reaches("x = self.ctx.engine.store.facts(scope)\ny = eng.store\nz = self.store\n") == [1, 2]


def test_no_ui_module_reaches_into_the_store():
    offenders = [f"{path.relative_to(ROOT)}:{line}" for path in sorted((ROOT / "ui").rglob("*.py"))
                 for line in store_reaches(path.read_text(encoding="utf-8"))]
    assert offenders == []
