"""Item models for the retrieval-trace pane: stored traces, a trace's candidates, its context lines.

The candidate model shows every memory any channel proposed: its rank and raw score per
channel, its score components, the final score, and its fate (a rank, or the stage, typed
reason and detail of its drop). A set of gold memory ids (from a benchmark question) can be
marked: those rows get a star and a highlight, so "was the gold memory a candidate, and where
did it fall out?" is one glance.
"""

from __future__ import annotations

import re
from typing import Any

from PySide6.QtCore import QSortFilterProxyModel, Qt
from PySide6.QtGui import QBrush, QColor

from ui.models.graph_style import dark
from ui.models.rows import MEMORY_ID_ROLE, SORT_ROLE, STAGE_ROLE, Column, Index, RowTableModel

CHANNEL_ORDER = ("vector", "fts", "entity", "relation", "neighbour", "baseline")
# the fifteen additive parts first (one series colour each), then the multiplier and the flag
COMPONENT_ORDER = ("fusion", "confidence", "importance", "recency", "usage", "trust", "fact", "speaker", "timeframe",
                   "session", "review", "claim_superseded", "restated_later", "not_a_change", "history_first", "pinned",
                   "version_cap", "rerank", "derived_factor", "truncated")

OUTDATED_LIGHT, OUTDATED_DARK = "#b45309", "#fbbf24"  # amber: an outdated statement, shown as history


def outdated_label(mark: dict[str, Any]) -> str:
    """"updated on 2024-06-12 by m25: The user lives in Munich" for a trace's params["outdated"] entry."""
    text = " ".join(str(mark.get("text") or "").split())
    for prefix in ("user: ", "assistant: "):
        text = text.removeprefix(prefix)
    return f"updated on {mark.get('on')} by m{mark.get('by')}: {_elide(text, 120)}"


def _elide(text: str | None, n: int = 160) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= n else line[: n - 1] + "…"


def _gold_brush() -> QBrush:
    return QBrush(QColor("#4d3d00" if dark() else "#fef3c7"))


class TraceListModel(RowTableModel):
    """Stored traces (GraphReads/RecallReads.traces rows), newest first."""

    columns = (Column("id", "Trace"), Column("origin", "Origin"), Column("query", "Query"),
               Column("result_count", "Results"), Column("context_tokens", "Tokens"), Column("as_of", "As of"),
               Column("created_at", "Created"))

    def cell(self, row, key):
        if key == "query":
            return row.get("query_text") or f"(agent query, hash {str(row.get('query_hash', ''))[:10]}…)"
        return row.get(key)

    def extra_role(self, row, key, role):
        if role == MEMORY_ID_ROLE:
            return int(row["id"])
        return None

    def row_of_trace(self, trace_id: int) -> int | None:
        for i, r in enumerate(self.rows):
            if int(r["id"]) == int(trace_id):
                return i
        return None


class TraceCandidatesModel(RowTableModel):
    """Every candidate of one trace, with gold marking."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.channels: list[str] = []
        self.gold: frozenset[int] = frozenset()
        self.columns = self._columns()

    def _columns(self) -> tuple[Column, ...]:
        return (Column("gold", "Gold"), Column("memory_id", "Memory"), Column("kind", "Kind"), Column("text", "Text"),
                *(Column(f"ch:{c}", c) for c in self.channels), Column("components", "Components"),
                Column("score", "Score"), Column("fate", "Rank / dropped at"), Column("reason", "Reason"),
                Column("detail", "Detail"), Column("tokens", "Tokens"))

    def set_trace(self, candidates: list[dict[str, Any]], briefs: dict[int, dict[str, Any]] | None = None,
                  gold: set[int] | frozenset[int] | None = None, shared: dict[str, int] | None = None,
                  outdated: dict[str, dict[str, Any]] | None = None) -> None:
        """candidates: MemoryEngine.trace()["candidates"]; briefs: GraphReads.memory_briefs; shared:
        the trace's params["shared_places"] (memory -> the memory whose place in the top k it shares);
        outdated: its params["outdated"] (memory -> {"by", "on", "text", "rule", "reason"}: what recall
        judged replaced it for this question)."""
        briefs = briefs or {}
        shares = {int(m): int(o) for m, o in (shared or {}).items()}
        outdated_of = {int(m): v for m, v in (outdated or {}).items()}
        present = {ch for c in candidates for ch in c.get("channels", {})}
        channels = [c for c in CHANNEL_ORDER if c in present] + sorted(present - set(CHANNEL_ORDER))
        rows = []
        for c in candidates:
            b = briefs.get(int(c["memory_id"]), {})
            rows.append({**c, "kind": b.get("kind") or "?", "text": b.get("text"), "trust": b.get("trust"),
                         "fact_status": b.get("status"), "in_scope": bool(b),
                         "shares_place_with": shares.get(int(c["memory_id"])),
                         "updated_by": outdated_of.get(int(c["memory_id"]))})
        self.beginResetModel()
        self.channels = channels
        self.columns = self._columns()
        self.rows = rows
        if gold is not None:
            self.gold = frozenset(int(g) for g in gold)
        self.endResetModel()

    def set_gold(self, gold) -> None:
        self.gold = frozenset(int(g) for g in (gold or ()))
        if self.rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.rows) - 1, len(self.columns) - 1))

    def gold_rows(self) -> list[int]:
        return [i for i, r in enumerate(self.rows) if int(r["memory_id"]) in self.gold]

    def row_of_memory(self, memory_id: int) -> int | None:
        for i, r in enumerate(self.rows):
            if int(r["memory_id"]) == int(memory_id):
                return i
        return None

    def dropped_at(self, stage: str) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("dropped") and r["dropped"]["stage"] == stage]

    @staticmethod
    def components_text(comp: dict[str, float]) -> str:
        keys = [k for k in COMPONENT_ORDER if k in comp] + sorted(set(comp) - set(COMPONENT_ORDER))
        return " ".join(f"{k} {comp[k]:+.3f}" for k in keys if comp[k])

    def cell(self, row, key):
        if key == "gold":
            return "★" if int(row["memory_id"]) in self.gold else ""
        if key == "text":
            if not row.get("in_scope"):
                return "(not in this scope / deleted)"
            up = row.get("updated_by")  # an outdated statement says so where it is read
            return (f"[outdated → m{up['by']}] " if up else "") + _elide(row.get("text"))
        if key.startswith("ch:"):
            ch = row.get("channels", {}).get(key[3:])
            if not ch:
                return None
            return f"#{ch.get('rank')} {float(ch.get('score') or 0):.3f}"
        if key == "components":
            return self.components_text(row.get("components") or {})
        if key == "score":
            return float(row["score"]) if row.get("score") is not None else None
        if key == "fate":
            up = row.get("updated_by")
            outdated = f" · outdated → m{up['by']}" if up else ""
            if row.get("rank") is not None:
                with_ = row.get("shares_place_with")
                return f"rank {row['rank']}" + (f" · with m{with_}" if with_ is not None else "") + outdated
            d = row.get("dropped")
            return (f"dropped: {d['stage']}" if d else "") + outdated
        if key == "reason":
            d = row.get("dropped")
            return d["reason"] if d else ""
        if key == "detail":
            d = row.get("dropped")
            return d.get("detail") if d else ""
        return row.get(key)

    def sort_key(self, row, key):
        if key.startswith("ch:"):
            ch = row.get("channels", {}).get(key[3:])
            return int(ch.get("rank") or 10**9) if ch else 10**9
        if key == "fate":
            if row.get("rank") is not None:
                return int(row["rank"])
            stage = str((row.get("dropped") or {}).get("stage"))
            return 10**6 + {"filters": 1, "score": 2, "rank": 3, "budget": 4}.get(stage, 9)
        if key == "score":
            return float(row.get("score") or 0.0)
        if key == "gold":
            return 0 if int(row["memory_id"]) in self.gold else 1
        return super().sort_key(row, key)

    def tooltip(self, row, key):
        if key == "text":
            return row.get("text")
        if key == "detail":
            d = row.get("dropped")
            return d.get("detail") if d else None
        if key == "fate" and row.get("updated_by"):
            return outdated_label(row["updated_by"]) + f" ({row['updated_by']['rule']}): {row['updated_by']['reason']}"
        if key == "fate" and row.get("shares_place_with") is not None:
            return (f"shares its place in the top k with memory {row['shares_place_with']}: both come from the "
                    "same source chunk (a turn, a message or a passage), so together they count as one source")
        if key.startswith("ch:"):
            ch = row.get("channels", {}).get(key[3:])
            if ch and ch.get("via") is not None:
                return f"reached via memory {ch['via']}" + (f" ({ch['type']})" if ch.get("type") else "")
        return None

    def extra_role(self, row, key, role):
        if role == MEMORY_ID_ROLE:
            return int(row["memory_id"])
        if role == STAGE_ROLE:
            d = row.get("dropped")
            return d["stage"] if d else ("kept" if row.get("rank") is not None else "")
        if role == Qt.ItemDataRole.BackgroundRole and int(row["memory_id"]) in self.gold:
            return _gold_brush()
        if role == Qt.ItemDataRole.ForegroundRole and row.get("dropped"):
            return QBrush(QColor("#9ca3af" if dark() else "#6b7280"))
        if role == Qt.ItemDataRole.ForegroundRole and row.get("updated_by") and key in ("fate", "text"):
            return QBrush(QColor(OUTDATED_DARK if dark() else OUTDATED_LIGHT))
        if role == Qt.ItemDataRole.TextAlignmentRole and key in ("score", "tokens", "memory_id", "gold"):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class StageFilterProxy(QSortFilterProxyModel):
    """Candidates dropped at one stage (or all of them when the stage is None)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.stage: str | None = None
        self.setSortRole(SORT_ROLE)

    def set_stage(self, stage: str | None) -> None:
        self.beginFilterChange()
        self.stage = stage
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:  # noqa: N802
        if self.stage is None:
            return True
        model = self.sourceModel()
        return model.index(source_row, 0, source_parent).data(STAGE_ROLE) == self.stage


_LINE_START = re.compile(r"^\[m(\d+)[\]\s·]", re.MULTILINE)


def split_context(text: str) -> list[tuple[int | None, str]]:
    """The context text as (memory id, verbatim line) items; joining the lines with "\\n" gives it back."""
    if not text:
        return []
    starts = [m.start() for m in _LINE_START.finditer(text)]
    if not starts or starts[0] != 0:
        starts = [0] + starts
    items = []
    for a, b in zip(starts, starts[1:] + [len(text) + 1]):
        piece = text[a:b - 1] if b <= len(text) else text[a:]
        m = _LINE_START.match(piece)
        items.append((int(m.group(1)) if m else None, piece))
    return items


class TraceContextModel(RowTableModel):
    """The rendered context, one row per item, with its token cost."""

    columns = (Column("position", "#"), Column("memory_id", "Memory"), Column("tokens", "Tokens"),
               Column("line", "Context line (verbatim)"))

    def set_context(self, text: str, candidates: list[dict[str, Any]]) -> None:
        tokens = {int(c["memory_id"]): c.get("tokens") for c in candidates if c.get("rank") is not None}
        rows = [{"position": i + 1, "memory_id": mid, "tokens": tokens.get(mid) if mid is not None else None,
                 "line": line} for i, (mid, line) in enumerate(split_context(text))]
        self.set_rows(rows)

    def text(self) -> str:
        return "\n".join(r["line"] for r in self.rows)

    def cell(self, row, key):
        if key == "line":
            return _elide(row["line"], 400)
        return row.get(key)

    def tooltip(self, row, key):
        return row["line"] if key == "line" else None

    def extra_role(self, row, key, role):
        if role == MEMORY_ID_ROLE:
            return row.get("memory_id")
        return None


__all__ = ["TraceListModel", "TraceCandidatesModel", "TraceContextModel", "StageFilterProxy", "split_context",
           "CHANNEL_ORDER", "COMPONENT_ORDER"]
