"""Row images: what a mutation changed, so it can be logged, explained and undone exactly.

A ChangeSet records, for every row a command touches, its image before (None if the command
created it) and after (None if the command deleted it). Undo writes the before images back;
redo writes the after images. Both first check that the rows still look the way the command
left them, so a later change is never silently overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import BadInput

Images = dict[str, dict[str, dict[str, Any] | None]]  # table -> str(id) -> image


class RowImages(Protocol):
    """What a change set reads from a store writer (engine/store/facts.py)."""

    def row_image(self, table: str, row_id: int) -> dict[str, Any] | None: ...

    def ids_where(self, table: str, column: str, value: Any) -> list[int]: ...


@dataclass(slots=True)
class ChangeSet:
    before: Images = field(default_factory=dict)
    after: Images = field(default_factory=dict)

    def touch(self, w: RowImages, table: str, row_id: int) -> None:
        """Call before changing an existing row."""
        rows = self.before.setdefault(table, {})
        if str(row_id) not in rows:
            rows[str(row_id)] = w.row_image(table, row_id)

    def created(self, table: str, row_id: int) -> None:
        self.before.setdefault(table, {}).setdefault(str(row_id), None)

    def created_where(self, w: RowImages, table: str, column: str, value: Any) -> None:
        for rid in w.ids_where(table, column, value):
            self.created(table, rid)

    def seal(self, w: RowImages) -> None:
        """Read the after images of every touched row (call at the end, inside the transaction)."""
        self.after = {t: {rid: w.row_image(t, int(rid)) for rid in rows} for t, rows in self.before.items()}

    @property
    def empty(self) -> bool:
        return not any(self.before.values())

    def summary(self) -> dict[str, int]:
        return {t: len(rows) for t, rows in self.before.items() if rows}


# Restore order matters for foreign keys: parents before children on insert, the reverse on delete.
_ORDER = ("documents", "chunks", "memories", "facts", "memory_sources", "memory_relations", "conflicts",
          "embeddings", "entities", "entity_mentions")


def apply_images(w: Any, target: Images, expect: Images) -> None:
    """Make the rows equal `target`, after checking they currently equal `expect`."""
    for table, rows in expect.items():
        for rid, image in rows.items():
            if w.row_image(table, int(rid)) != image:
                raise BadInput(f"{table} row {rid} changed since; undo the later change first")
    tables = [t for t in _ORDER if t in target] + [t for t in target if t not in _ORDER]
    # Deletions first (children first), then inserts/updates (parents first).
    for table in reversed(tables):
        for rid, image in target[table].items():
            if image is None:
                w.restore_row(table, int(rid), None)
    for table in tables:
        for rid, image in target[table].items():
            if image is not None:
                w.restore_row(table, int(rid), image)
