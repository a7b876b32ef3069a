"""What every query in the store shares: the scope predicate, and rows read as dicts.

The scope predicate is the isolation boundary: every row that holds user data carries
(user_id, agent_id, scope_type, scope_id), and every read or write of such rows filters on all
four. It is built here and nowhere else, so it cannot drift; tests/engine/test_scope_isolation.py
runs every store read with two scopes holding data and finds no row of the other.
"""

from __future__ import annotations

import functools
from typing import Any

import apsw

SCOPE_COLUMNS = ("user_id", "agent_id", "scope_type", "scope_id")  # the order of Scope.as_params()


@functools.cache
def scope_where(alias: str = "") -> str:
    """`[alias.]user_id = ? AND ... AND [alias.]scope_id = ?`; its parameters are Scope.as_params()."""
    prefix = f"{alias}." if alias else ""
    return " AND ".join(f"{prefix}{column} = ?" for column in SCOPE_COLUMNS)


@functools.cache
def same_scope(a: str, b: str) -> str:
    """Rows `a` and `b` of a join belong to one scope (no parameters)."""
    return " AND ".join(f"{a}.{column} = {b}.{column}" for column in SCOPE_COLUMNS)


def dict_rows(conn: apsw.Connection, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """The rows of a query as {column: value} dicts. The column names are read once, while the
    first row is current (the only time apsw can describe the result); reading them per row was a
    tenth of a recall's time (issue 21)."""
    cur = conn.cursor()
    rows = cur.execute(sql, params)
    first = next(rows, None)
    if first is None:
        return []
    names = tuple(d[0] for d in cur.getdescription())
    return [dict(zip(names, first)), *(dict(zip(names, row)) for row in rows)]
