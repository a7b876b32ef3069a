"""SQL for benchmark runs and their per-question items (bench_runs, bench_items)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .sql import dict_rows

if TYPE_CHECKING:
    from .store import Store

_JSON_RUN = ("k_values", "models", "prompt_hashes", "config", "metrics", "by_category", "latency_ms", "context_tokens",
             "scores")
_JSON_ITEM = ("gold", "retrieved", "metrics", "scores", "ranking")


def create_run(store: Store, *, dataset: str, data_path: str, sha256: str, split: str | None, recipe: str,
               k_values: list[int], embedder: str, models: dict[str, Any], prompt_hashes: dict[str, Any], git_commit: str | None,
               config: dict[str, Any], started_at: str) -> int:
    with store.db.write() as conn:
        conn.execute(
            "INSERT INTO bench_runs(dataset, data_path, sha256, split, recipe, k_values, embedder, models, prompt_hashes,"
            " git_commit, config, status, started_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,'running',?)",
            (dataset, data_path, sha256, split, recipe, json.dumps(k_values), embedder, json.dumps(models),
             json.dumps(prompt_hashes), git_commit, json.dumps(config), started_at))
        return conn.last_insert_rowid()


def add_items(store: Store, run_id: int, items: list[dict[str, Any]]) -> None:
    with store.db.write() as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO bench_items(run_id, container, question_id, question, category, gold, retrieved,"
            " metrics, scores, ranking, latency_ms, context_tokens, trace_id, trace_db, status, error, answer, judge)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(run_id, it["container"], it["question_id"], it.get("question"), it.get("category"),
              json.dumps(it.get("gold", {})), json.dumps(it.get("retrieved", [])), json.dumps(it.get("metrics", {})),
              json.dumps(it.get("scores", {})), json.dumps(it.get("ranking", [])),
              it.get("latency_ms"), it.get("context_tokens"), it.get("trace_id"), it.get("trace_db"),
              it.get("status", "done"), it.get("error"), it.get("answer"), it.get("judge")) for it in items])


def finish_run(store: Store, run_id: int, *, status: str, sample_count: int, failures: int, metrics: dict[str, Any],
               by_category: dict[str, Any], latency_ms: dict[str, Any], context_tokens: dict[str, Any], finished_at: str,
               scores: dict[str, Any] | None = None) -> None:
    """`metrics` / `by_category` are the default scheme's; `scores` every scheme's summary."""
    with store.db.write() as conn:
        conn.execute(
            "UPDATE bench_runs SET status = ?, sample_count = ?, failures = ?, metrics = ?, by_category = ?,"
            " latency_ms = ?, context_tokens = ?, scores = ?, finished_at = ? WHERE id = ?",
            (status, sample_count, failures, json.dumps(metrics), json.dumps(by_category), json.dumps(latency_ms),
             json.dumps(context_tokens), json.dumps(scores or {}), finished_at, run_id))


def _decode(row: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    for k in keys:
        if isinstance(row.get(k), str):
            row[k] = json.loads(row[k])
    return row


def run(store: Store, run_id: int) -> dict[str, Any] | None:
    rows = dict_rows(store.conn, "SELECT * FROM bench_runs WHERE id = ?", (run_id,))
    return _decode(rows[0], _JSON_RUN) if rows else None


def runs(store: Store, limit: int = 200) -> list[dict[str, Any]]:
    return [_decode(r, _JSON_RUN) for r in dict_rows(store.conn, "SELECT * FROM bench_runs ORDER BY id DESC LIMIT ?",
                                                     (limit,))]


_ITEM_COLUMNS = ("id, run_id, container, question_id, question, category, gold, retrieved, metrics, scores,"
                 " latency_ms, context_tokens, trace_id, trace_db, status, error, answer, judge")


def items(store: Store, run_id: int, *, ranking: bool = False) -> list[dict[str, Any]]:
    """A run's questions in run order; `ranking` adds each one's whole turn ranking (long: only
    for re-scoring and export)."""
    columns = _ITEM_COLUMNS + (", ranking" if ranking else "")
    return [_decode(r, _JSON_ITEM) for r in dict_rows(
        store.conn, f"SELECT {columns} FROM bench_items WHERE run_id = ? ORDER BY id", (run_id,))]


def done_question_ids(store: Store, run_id: int) -> set[str]:
    return {r[0] for r in store.conn.execute(
        "SELECT question_id FROM bench_items WHERE run_id = ? AND status != 'failed'", (run_id,))}


__all__ = ["create_run", "add_items", "finish_run", "run", "runs", "items", "done_question_ids"]
_ = Any
