"""The inputs of one ingestion run, file by file: what was ingested, skipped or failed, and why.

A file named on the command line must parse, or the run is refused before anything is written
(BadInput). A directory is walked: each file in it is parsed on its own, so a binary, hidden or
empty file is skipped with its reason and a file no importer can read fails alone with its
reason while the others are ingested.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import BadInput
from engine.ingest.detect import parse_path, walk_sources
from engine.ingest.model import ParsedDocument

STATUSES = ("ingested", "unchanged", "skipped", "failed")
# Parse refusals that mean "there is nothing here to ingest" rather than "this file is broken".
_NOTHING = ("empty file", "nothing to ingest", "binary file")


@dataclass(slots=True)
class SourceFile:
    path: str
    status: str  # one of STATUSES ("pending" until the run has written its documents)
    reason: str | None = None
    documents: list[int] = field(default_factory=list)  # indexes into SourceSet.docs

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "reason": self.reason, "documents": len(self.documents)}


@dataclass(slots=True)
class SourceSet:
    docs: list[ParsedDocument] = field(default_factory=list)
    files: list[SourceFile] = field(default_factory=list)

    def add(self, path: Path, docs: list[ParsedDocument]) -> None:
        start = len(self.docs)
        self.docs.extend(docs)
        self.files.append(SourceFile(str(path), "pending", documents=list(range(start, len(self.docs)))))

    def settle(self, written: Sequence[bool]) -> None:
        """written[i]: whether docs[i] was stored (False: unchanged since the last ingest)."""
        for f in self.files:
            if f.status == "pending":
                f.status = "ingested" if any(written[i] for i in f.documents) else "unchanged"

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)


def _detail(exc: BadInput, path: Path) -> str:
    message = str(exc)
    for prefix in (f"{path}: ", f"{path.name}: "):
        if message.startswith(prefix):
            return message[len(prefix):]
    return message


def collect_sources(paths: Sequence[str | os.PathLike[str]], *, fmt: str = "auto") -> SourceSet:
    """Parse every path before anything is written (directories are walked)."""
    if not paths:
        raise BadInput("nothing to ingest: give at least one path")
    out = SourceSet()
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            out.add(path, parse_path(path, fmt))  # a named file must parse: BadInput refuses the run
            continue
        before = len(out.files)
        for file, skip in walk_sources(path):
            if skip is not None:
                out.files.append(SourceFile(str(file), "skipped", skip))
                continue
            try:
                out.add(file, parse_path(file, fmt))
            except BadInput as exc:
                detail = _detail(exc, file)
                status = "skipped" if detail.startswith(_NOTHING) else "failed"
                out.files.append(SourceFile(str(file), status, detail))
        mine = out.files[before:]
        if not any(f.status in ("pending", "failed") for f in mine):
            skipped = "; ".join(f"{Path(f.path).name}: {f.reason}" for f in mine[:5])
            raise BadInput(f"{path}: no ingestible files in this directory"
                           + (f" (skipped {len(mine)}: {skipped}{', ...' if len(mine) > 5 else ''})" if mine else ""))
    return out
