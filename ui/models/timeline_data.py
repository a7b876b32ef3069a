"""The version timeline as arrays: one row per fact version, its world-time bar and belief-time marks.

Pure numpy (no Qt). Times are UNIX seconds (what pyqtgraph's DateAxisItem reads); an open
validity (no valid_to) runs to `now`. Rows are grouped by predicate, oldest version first,
with one empty row between predicates so each group reads as its own chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import numpy as np

from engine.timeutil import parse_iso, to_iso

STATUSES = ("active", "needs_review", "superseded", "expired", "retracted")


def ts(iso: str | None) -> float:
    """ISO-8601 -> UNIX seconds (NaN for None or junk)."""
    if not iso:
        return float("nan")
    try:
        return parse_iso(iso).timestamp()
    except ValueError:
        return float("nan")


def iso(t: float) -> str:
    from datetime import datetime

    return to_iso(datetime.fromtimestamp(float(t), tz=UTC))


@dataclass(slots=True)
class TimelineData:
    fact_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    memory_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    row: np.ndarray = field(default_factory=lambda: np.zeros(0))  # y of each version
    start: np.ndarray = field(default_factory=lambda: np.zeros(0))  # valid_from (or learned_at)
    end: np.ndarray = field(default_factory=lambda: np.zeros(0))  # valid_to (or now when open)
    open_ended: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    start_guessed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # no valid_from
    learned: np.ndarray = field(default_factory=lambda: np.zeros(0))
    invalidated: np.ndarray = field(default_factory=lambda: np.zeros(0))
    forget_after: np.ndarray = field(default_factory=lambda: np.zeros(0))
    status: list[str] = field(default_factory=list)
    trust: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # per version: "object"
    group_ticks: list[tuple[float, str]] = field(default_factory=list)  # (y, predicate) per group
    tips: list[str] = field(default_factory=list)
    now: float = 0.0

    def __len__(self) -> int:
        return len(self.fact_ids)

    def valid_at(self, t: float) -> np.ndarray:
        """Which versions were true in the world at time t (start <= t < end; open ends never end)."""
        return (self.start <= t) & ((self.end > t) | self.open_ended)

    def span(self) -> tuple[float, float]:
        vals = np.concatenate([self.start, self.end, self.learned, self.invalidated, self.forget_after])
        vals = vals[np.isfinite(vals)]
        if not len(vals):
            return (self.now - 86400.0, self.now)
        return (float(vals.min()), float(vals.max()))

    def row_of_y(self, y: float) -> int | None:
        if not len(self):
            return None
        i = int(np.argmin(np.abs(self.row - y)))
        return i if abs(self.row[i] - y) <= 0.45 else None


def build_timeline(facts: Sequence[dict[str, Any]], *, now: float) -> TimelineData:
    """facts: GraphReads.timeline_facts rows (already in predicate, version order)."""
    rows: list[float] = []
    groups: list[tuple[float, str]] = []
    y = 0.0
    last_pred = None
    out = TimelineData(now=now)
    start, end, open_, guessed, learned, inval, forget = [], [], [], [], [], [], []
    fids, mids = [], []
    # newest group at the top: pyqtgraph's y grows upwards, so walk predicates and stack downwards
    for f in facts:
        if f["predicate_key"] != last_pred:
            if last_pred is not None:
                y -= 1.0  # a blank row between predicates
            groups.append((y, f["predicate"]))
            last_pred = f["predicate_key"]
        rows.append(y)
        vf, lt = ts(f.get("valid_from")), ts(f.get("learned_at"))
        s = vf if np.isfinite(vf) else lt
        e = ts(f.get("valid_to"))
        is_open = not np.isfinite(e)
        start.append(s)
        end.append(max(now, s) if is_open else e)
        open_.append(is_open)
        guessed.append(not np.isfinite(vf))
        learned.append(lt)
        inval.append(ts(f.get("invalidated_at")))
        forget.append(ts(f.get("forget_after") or f.get("memory_forget_after")))
        fids.append(int(f["id"]))
        mids.append(int(f["memory_id"]))
        out.status.append(f["status"])
        out.trust.append(f.get("trust") or "")
        out.labels.append(str(f["object"]))
        valid = f"{(f.get('valid_from') or '?')[:19]} → {(f.get('valid_to') or 'open')[:19]}"
        out.tips.append(f"fact {f['id']} [{f['status']}] {f['subject']} · {f['predicate']} · {f['object']}\n"
                        f"world time: {valid}\nlearned {f.get('learned_at') or '?'}"
                        + (f"; invalidated {f['invalidated_at']}" if f.get("invalidated_at") else "")
                        + (f"; forget after {f.get('forget_after')}" if f.get("forget_after") else ""))
        y -= 1.0
    out.fact_ids = np.array(fids, dtype=np.int64)
    out.memory_ids = np.array(mids, dtype=np.int64)
    out.row = np.array(rows, dtype=np.float64)
    out.start = np.array(start, dtype=np.float64)
    out.end = np.array(end, dtype=np.float64)
    out.open_ended = np.array(open_, dtype=bool)
    out.start_guessed = np.array(guessed, dtype=bool)
    out.learned = np.array(learned, dtype=np.float64)
    out.invalidated = np.array(inval, dtype=np.float64)
    out.forget_after = np.array(forget, dtype=np.float64)
    out.group_ticks = groups
    return out


__all__ = ["TimelineData", "build_timeline", "ts", "iso", "STATUSES"]
