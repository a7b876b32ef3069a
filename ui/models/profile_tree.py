"""The profile as a three-level tree model: sections -> profile lines -> the facts behind each line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor, QFont

from ui.models.rows import FACT_ID_ROLE, KIND_ROLE
from ui.theme import current_theme

COLUMNS = ("Profile line / fact", "Subject", "Predicate", "Object", "Conf.", "Evidence")
SECTIONS = (("static", "Static — identity, role, lasting preferences"),
            ("dynamic", "Dynamic — current plans and focus"),
            ("cut", "Left out by the token budget"))


def evidence_text(fact: dict[str, Any], spans: list[dict[str, Any]]) -> str:
    if spans:
        s = spans[0]
        where = s.get("title") or s.get("source_type") or f"document {s['document_id']}"
        more = f" (+{len(spans) - 1} more)" if len(spans) > 1 else ""
        return f"“{s['text']}” — {where}{more}"
    if fact.get("evidence"):
        return f"“{fact['evidence']}” (no stored span)"
    return "no evidence recorded"


def evidence_tooltip(spans: list[dict[str, Any]]) -> str:
    out = []
    for s in spans[:5]:
        where = s.get("title") or s.get("uri") or f"document {s['document_id']}"
        out.append(f"{where} [{s['source_type']}, trust {s['trust']}] chars {s['start']}–{s['end']}:\n"
                   f"…{s['before']}[{s['text']}]{s['after']}…")
    return "\n\n".join(out)


@dataclass(eq=False)
class Node:
    kind: str
    cells: tuple[str, ...]
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    fact_id: int | None = None
    tooltips: dict[int, str] = field(default_factory=dict)
    status: str | None = None

    def add(self, child: Node) -> Node:
        child.parent = self
        self.children.append(child)
        return child

    @property
    def row(self) -> int:
        return self.parent.children.index(self) if self.parent is not None else 0


class ProfileTreeModel(QAbstractItemModel):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.root = Node("root", ())
        self.fact_nodes: dict[int, Node] = {}

    # building ---------------------------------------------------------------------------------------
    def set_profile(self, profile, facts: dict[int, dict[str, Any]], evidence: dict[int, list[dict[str, Any]]]) -> None:
        self.beginResetModel()
        self.root = Node("root", ())
        self.fact_nodes = {}
        for key, title in SECTIONS:
            lines = getattr(profile, key)
            if key == "cut" and not lines:
                continue
            section = self.root.add(Node("section", (f"{title} ({len(lines)})",)))
            for line in lines:
                line_facts = [facts[fid] for fid in line.fact_ids if fid in facts]
                n = len(line.fact_ids)
                node = section.add(Node("line", (
                    line.text, line.subject, line.predicate_key, ", ".join(f["object"] for f in line_facts),
                    f"{max(f['confidence'] for f in line_facts):.2f}" if line_facts else "",
                    f"{n} fact{'s' if n != 1 else ''}, {line.tokens} tokens"),
                    fact_id=line.fact_ids[0] if n == 1 else None, tooltips={0: line.text}))
                for f in line_facts:
                    spans = evidence.get(f["memory_id"], [])
                    child = node.add(Node("fact", (
                        f"fact {f['id']}", f["subject"], f["predicate"], f["object"], f"{f['confidence']:.2f}",
                        evidence_text(f, spans)), fact_id=f["id"], status=f["status"], tooltips={
                        0: f"{f['text']}\nrule {f['rule']}: {f['reason'] or ''}\nvalid from {f['valid_from'] or '?'}, "
                           f"learned {f['learned_at']}, via {f['extraction_method']}",
                        5: evidence_tooltip(spans) or evidence_text(f, spans)}))
                    self.fact_nodes[f["id"]] = child
        if not self.root.children or not any(s.children for s in self.root.children):
            self.root.add(Node("empty", ("No active facts yet: ingest with extraction (memlens ingest --extract "
                                         "heuristic) or resolve the review queue.",)))
        self.endResetModel()

    def index_of_fact(self, fact_id: int) -> QModelIndex:
        node = self.fact_nodes.get(fact_id)
        return self.createIndex(node.row, 0, node) if node is not None else QModelIndex()

    def node(self, index: QModelIndex | QPersistentModelIndex) -> Node:
        return index.internalPointer() if index.isValid() else self.root

    # Qt model -------------------------------------------------------------------------------------------
    def index(self, row: int, column: int, parent=QModelIndex()) -> QModelIndex:
        if column < 0 or column >= len(COLUMNS) or row < 0:
            return QModelIndex()
        if parent.isValid() and parent.column() != 0:
            return QModelIndex()
        node = self.node(parent)
        if row >= len(node.children):
            return QModelIndex()
        return self.createIndex(row, column, node.children[row])

    def parent(self, index=QModelIndex()) -> QModelIndex:  # type: ignore[override]
        if not index.isValid():
            return QModelIndex()
        p = index.internalPointer().parent
        if p is None or p is self.root:
            return QModelIndex()
        return self.createIndex(p.row, 0, p)

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        if parent.isValid() and parent.column() != 0:
            return 0
        return len(self.node(parent).children)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return len(COLUMNS)

    def flags(self, index: QModelIndex | QPersistentModelIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        node = self.node(index)
        flags = Qt.ItemFlag.ItemIsEnabled
        if node.kind in ("line", "fact"):
            flags |= Qt.ItemFlag.ItemIsSelectable
        if not node.children:
            flags |= Qt.ItemFlag.ItemNeverHasChildren
        return flags

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole \
                and 0 <= section < len(COLUMNS):
            return COLUMNS[section]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        node = self.node(index)
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return node.cells[col] if col < len(node.cells) else ""
        if role == Qt.ItemDataRole.ToolTipRole:
            return node.tooltips.get(col)
        if role == Qt.ItemDataRole.FontRole and node.kind == "section":
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.ForegroundRole and node.kind == "fact" and col == 0 and node.status:
            color = current_theme().status.get(node.status)
            return QColor(color) if color else None
        if role == FACT_ID_ROLE:
            return node.fact_id
        if role == KIND_ROLE:
            return node.kind
        return None
