"""Curation from the UI: every command runs in the task runner, then one data-changed broadcast.

Panes and the window call `run_curation(ctx, command, describe, ...)` where `command(curator)`
does one Curator call; when it returns, the bus announces the tables it touched (Anki's OpChanges
idea: one signal, each pane decides whether to refresh).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.curate import CurationResult, Curator
from ui.context import AppContext

# Tables every curation may change besides the rows it names: the log, and what reads derive from.
ALWAYS_CHANGED = frozenset({"curation_log"})


def changed_tables(result: CurationResult) -> set[str]:
    tables = set(result.summary) | set(ALWAYS_CHANGED)
    if result.command in ("undo", "redo"):
        tables |= {"facts", "memories", "conflicts", "memory_relations"}
    return tables


def describe_result(result: CurationResult) -> str:
    d = result.details
    rows = sum(result.summary.values())
    what = {
        "resolve": lambda: f"Resolved conflict {d.get('conflict_id')} (keep {d.get('keep')})",
        "edit": lambda: f"Corrected fact {d.get('replaces')} as fact {d.get('fact_id')}",
        "undo": lambda: f"Undid {d.get('undid_command')} #{d.get('undid')}",
        "redo": lambda: f"Redid {d.get('redid_command')} #{d.get('redid')}",
        "forget": lambda: f"Forgot memory {d.get('memory_id')}",
        "restore": lambda: f"Restored fact {d.get('fact_id')}",
        "merge": lambda: f"Merged memory {d.get('drop')} into {d.get('keep')}",
        "open_conflict": lambda: f"Opened conflict {d.get('conflict_id')} for facts {d.get('fact_ids')}",
        "retract_fact": lambda: f"Retracted fact {d.get('fact_id')}",
        "reembed": lambda: f"Re-embedded {len(d.get('memory_ids') or [])} memories with {d.get('model')}",
        "remove_entity": lambda: f"Removed entity {d.get('entity_id')}",
        "expire": lambda: f"Expired {len(d.get('expired') or [])} facts past their forget_after",
        "pin": lambda: f"Pinned memory {d.get('memory_id')}",
        "unpin": lambda: f"Unpinned memory {d.get('memory_id')}",
    }.get(result.command, lambda: result.command.capitalize())()
    log = f" (log #{result.log_id}" if result.log_id else " ("
    return f"{what}{log}, {rows} rows changed)".replace("( ", "(").replace("(, ", "(")


def run_curation(ctx: AppContext, command: Callable[[Curator], CurationResult],
                 on_done: Callable[[CurationResult], None] | None = None,
                 on_error: Callable[[BaseException], None] | None = None) -> Any:
    engine, scope = ctx.engine, ctx.scope
    bus = ctx.bus

    def done(result: CurationResult) -> None:
        bus.data_changed(changed_tables(result))
        if on_done is not None:
            on_done(result)

    return ctx.runner.run(lambda _p, _s: command(engine.curator(scope)), done, on_error)
