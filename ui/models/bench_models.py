"""Item models and small pure helpers for the benchmark pane: runs, questions, run-vs-run deltas.

Metric keys are the runner's: "<level>_<metric>@<k>" and "<level>_mrr" (engine/bench/metrics.py).
A run holds them under each scoring scheme (engine/bench/scoring.py: "official", "memlens"); the
question model shows one scheme's, a question's own metrics under that scheme.
"""

from __future__ import annotations

import re
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor

from ui.models.graph_style import dark
from ui.models.rows import Column, RowTableModel

_KEY = re.compile(r"^(turn|session)_([a-z_]+)@(\d+)$")


def parse_key(key: str) -> tuple[str, str, int] | None:
    """"turn_recall_any@5" -> ("turn", "recall_any", 5); other keys (mrr) -> None."""
    m = _KEY.match(key)
    return (m.group(1), m.group(2), int(m.group(3))) if m else None


def curves(metrics: dict[str, float | None], level: str) -> dict[str, tuple[list[int], list[float]]]:
    """metric -> (ks, values) for every metric@k of one level, ks ascending (None values skipped)."""
    out: dict[str, dict[int, float]] = {}
    for key, value in (metrics or {}).items():
        parsed = parse_key(key)
        if parsed is None or parsed[0] != level or value is None:
            continue
        out.setdefault(parsed[1], {})[parsed[2]] = float(value)
    return {m: (sorted(v), [v[k] for k in sorted(v)]) for m, v in out.items()}


def ks_of(metrics: dict[str, Any]) -> list[int]:
    return sorted({p[2] for p in (parse_key(k) for k in (metrics or {})) if p})


def metric_names(metrics: dict[str, Any], level: str) -> list[str]:
    return sorted({p[1] for p in (parse_key(k) for k in (metrics or {})) if p and p[0] == level})


def delta_rows(a: dict[str, Any], b: dict[str, Any] | None, *, level: str | None = None) -> list[dict[str, Any]]:
    """Per metric and per category: run a, run b and a - b (rows for the compare table)."""
    rows: list[dict[str, Any]] = []

    def keep(key: str) -> bool:
        return level is None or key.startswith(level + "_")

    def add(scope: str, ma: dict, mb: dict) -> None:
        for key in sorted(set(ma) | set(mb)):
            if not keep(key):
                continue
            va, vb = ma.get(key), mb.get(key)
            rows.append({"scope": scope, "metric": key, "a": va, "b": vb,
                         "delta": None if va is None or vb is None else float(va) - float(vb)})

    add("overall", a.get("metrics") or {}, (b or {}).get("metrics") or {})
    cats_a, cats_b = a.get("by_category") or {}, (b or {}).get("by_category") or {}
    for cat in sorted(set(cats_a) | set(cats_b)):
        add(cat, cats_a.get(cat, {}), cats_b.get(cat, {}))
    return rows


def gold_ids(item: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(gold turn message ids, gold session ids) of a bench item."""
    gold = item.get("gold") or {}
    if isinstance(gold, list):
        return [str(g) for g in gold], []
    return [str(g) for g in gold.get("turn") or []], [str(g) for g in gold.get("session") or []]


def item_metrics(item: dict[str, Any], scheme: str | None = None) -> dict[str, Any]:
    """A question's metrics under one scheme (a question stored before schemes: its only metrics)."""
    scores = item.get("scores") or {}
    if scheme is not None and scheme in scores:
        return scores[scheme] or {}
    return item.get("metrics") or {}


def item_missed(item: dict[str, Any], key: str, scheme: str | None = None) -> bool:
    """A question to look at: it failed to run, or the chosen metric is below 1 (gold not fully found)."""
    if item.get("status") not in (None, "done"):
        return True
    value = item_metrics(item, scheme).get(key)
    return value is not None and float(value) < 1.0


class BenchRunsModel(RowTableModel):
    columns = (Column("id", "Run"), Column("dataset", "Dataset"), Column("split", "Split"), Column("recipe", "Recipe"),
               Column("status", "Status"), Column("sample_count", "Questions"), Column("failures", "Failed"),
               Column("headline", "Headline"), Column("p50", "p50 ms"), Column("started_at", "Started"))

    def cell(self, row, key):
        if key == "headline":  # the run's default scoring (official where the benchmark has its own)
            m = row.get("metrics") or {}
            scheme = ((row.get("config") or {}).get("scoring") or {}).get("default", "memlens")
            for k in ("turn_evidence_recall@10", "turn_recall_any@10", "session_recall_any@10"):
                if m.get(k) is not None:
                    return f"{scheme} {k} {float(m[k]):.3f}"
            return ""
        if key == "p50":
            lat = row.get("latency_ms") or {}
            return None if lat.get("p50") is None else float(lat["p50"])
        return row.get(key)

    def row_of_run(self, run_id: int) -> int | None:
        for i, r in enumerate(self.rows):
            if int(r["id"]) == int(run_id):
                return i
        return None


class BenchItemsModel(RowTableModel):
    """The questions of one run: question, category, the chosen metric, latency, tokens, trace."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.metric_key = "turn_recall_any@5"
        self.scheme: str | None = None
        self.columns = self._columns()

    def _columns(self):
        metric = f"{self.metric_key} ({self.scheme})" if self.scheme else self.metric_key
        return (Column("question_id", "Question id"), Column("category", "Category"), Column("question", "Question"),
                Column("status", "Status"), Column("metric", metric), Column("mrr", "MRR"),
                Column("latency_ms", "Latency ms"), Column("context_tokens", "Tokens"), Column("gold", "Gold"),
                Column("trace_id", "Trace"))

    def set_metric(self, key: str, scheme: str | None = None) -> None:
        self.beginResetModel()
        self.metric_key = key
        self.scheme = scheme
        self.columns = self._columns()
        self.endResetModel()

    def cell(self, row, key):
        m = item_metrics(row, self.scheme)
        if key == "metric":
            v = m.get(self.metric_key)
            return None if v is None else float(v)
        if key == "mrr":
            level = self.metric_key.split("_", 1)[0]
            v = m.get(f"{level}_mrr")
            return None if v is None else float(v)
        if key == "gold":
            turns, sessions = gold_ids(row)
            return ", ".join(turns or sessions)
        if key == "question":
            return " ".join(str(row.get("question") or "").split())
        return row.get(key)

    def tooltip(self, row, key):
        if key == "question":
            return row.get("question")
        if key == "status" and row.get("error"):
            return row["error"]
        if key == "trace_id" and row.get("trace_db"):
            return f"trace {row.get('trace_id')} in {row['trace_db']}"
        return None

    def extra_role(self, row, key, role):
        if role == Qt.ItemDataRole.BackgroundRole and item_missed(row, self.metric_key, self.scheme):
            v = item_metrics(row, self.scheme).get(self.metric_key)
            miss = row.get("status") not in (None, "done") or not v
            if dark():
                return QBrush(QColor("#4c1d1d" if miss else "#3f3415"))
            return QBrush(QColor("#fee2e2" if miss else "#fef9c3"))
        return None


class BenchCompareModel(RowTableModel):
    columns = (Column("scope", "Scope"), Column("metric", "Metric"), Column("a", "Run A"), Column("b", "Run B"),
               Column("delta", "Δ A−B"))

    def extra_role(self, row, key, role):
        if role == Qt.ItemDataRole.ForegroundRole and key == "delta" and row.get("delta"):
            good = row["delta"] > 0
            return QBrush(QColor(("#4ade80" if good else "#f87171") if dark() else ("#15803d" if good else "#b91c1c")))
        return None

    def cell(self, row, key):
        v = row.get(key)
        if key == "delta" and v is not None:
            return f"{v:+.4f}"
        return v


__all__ = ["BenchRunsModel", "BenchItemsModel", "BenchCompareModel", "parse_key", "curves", "ks_of",
           "metric_names", "delta_rows", "gold_ids", "item_missed", "item_metrics"]
