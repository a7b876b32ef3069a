"""The scope predicate is the isolation boundary: no store read returns a row of another scope.

One database holds scope A and four others that each differ from A in exactly one of the four
scope columns (so a predicate that forgot one column leaks). Every other scope's text, speakers,
names and scope values contain the word "zebra"; A's never do. Every scoped read method of Store
is called for A with arguments hypothesis draws from the ids and keys of all five scopes, and no
"zebra" may come back (beyond the arguments themselves), nor a memory id of another scope.

A new read method must be taught here (its parameters' names) before this test passes.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.embed.hashing import HashingEmbedder
from engine.memory import MemoryEngine
from engine.scope import Scope
from engine.store.browse import MemoryFilter
from engine.store.store import Store

MARK = "zebra"
A = Scope("ana-user", "alpha-bot", "conversation", "c-1")
OTHERS = [dataclasses.replace(A, **{column: f"{MARK}-{column}"}) for column in ("user_id", "agent_id", "scope_id")]
OTHERS.append(dataclasses.replace(A, scope_type="task", scope_id=f"{MARK}-task"))  # scope_type differs (with its id)


def _turns(name: str, city: str, job: str, place: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "name": name, "content": f"I live in {city}. I work at {job} as a designer.",
         "timestamp": "2024-03-01T09:00:00Z"},
        {"role": "assistant", "content": f"Noted, {name}: {city} and {job}."},
        {"role": "user", "name": name, "content": f"I moved to {place} last week. My sister {name}a likes tea.",
         "timestamp": "2024-05-01T09:00:00Z"},
        {"role": "user", "name": name, "content": f"Remember that {name} loves hiking near {place}.",
         "timestamp": "2024-05-02T09:00:00Z"},
    ]


# The ids a read can be handed, by the parameter names the store uses for them.
ID_TABLES = {"memory_id": "memories", "chunk_id": "chunks", "document_id": "documents", "fact_id": "facts",
             "conflict_id": "conflicts", "log_id": "curation_log", "trace_id": "retrieval_traces",
             "entity_id": "entities", "owner_id": "memories", "record_id": "memories", "after_id": "memories",
             "first": "chunks", "last": "chunks"}
LIST_TABLES = {"memory_ids": "memories", "fact_ids": "facts", "entity_ids": "entities", "chunk_ids": "chunks"}
# Reads whose answer names memories by bare id (anything else carries text to check).
MEMORY_ID_RESULTS = {"memories_of_chunk", "memories_for_messages", "memories_for_sessions", "fts_memories",
                     "baseline_memories", "entity_memories", "neighbour_memories", "identical_memory_groups",
                     "memory_ids_for_facts", "relation_pairs", "open_conflict_pairs"}
# Not reads: a write transaction, a recorder factory. And sole_scope, whose one bit is about the
# other scopes by design (is any memory outside this one? recall's fast path when none is).
SKIP = {"writer", "llm_recorder", "sole_scope"}


def _fill(path, people) -> str:
    eng = MemoryEngine(path, embedder=HashingEmbedder(64), llm=False)
    for scope, name, city, job, place in people:
        eng.add_turns(_turns(name, city, job, place), scope=scope, extract="heuristic", conversation=f"{name} chat")
        eng.recall(f"where does {name} live", scope=scope)
        eng.health(scope, record="test")
        facts = eng.store.facts(scope)
        assert facts, f"the heuristic extractor found no fact for {scope}"
        cur = eng.curator(scope)
        current = next(f for f in facts if f.status == "active")
        cur.open_conflict(current.id, None, reason=f"checked by {name}")
        episode = next(m for m in eng.store.browse_memories(scope) if m["kind"] == "episode")
        cur.forget(episode["id"], reason=f"forgotten for {name}")
    eng.wait_for_background()
    model = eng.embedder.model
    eng.close()
    return model


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """The five scopes in one file (A written first, so its ids are those of a file holding A
    alone), and that file holding A alone."""
    folder = tmp_path_factory.mktemp("isolation")
    ana = (A, "Ana", "Lisbon", "Acme", "Porto")
    model = _fill(folder / "world.db", [ana, *((s, "Zebra", "Zebraville", "Zebracorp", "Zebraton") for s in OTHERS)])
    _fill(folder / "alone.db", [ana])
    store, alone = Store(folder / "world.db", readonly=True), Store(folder / "alone.db", readonly=True)
    conn = store.conn
    pool: dict[str, list[Any]] = {}
    for table in {*ID_TABLES.values(), *LIST_TABLES.values()}:
        pool[table] = [r[0] for r in conn.execute(f"SELECT id FROM {table}")]
    a_memories = {r[0] for r in conn.execute(
        "SELECT id FROM memories WHERE user_id = ? AND agent_id = ? AND scope_type = ? AND scope_id = ?",
        A.as_params())}
    pool["keys"] = [tuple(r) for r in conn.execute("SELECT DISTINCT subject_key, predicate_key FROM facts")]
    pool["canonicals"] = [r[0] for r in conn.execute("SELECT DISTINCT canonical FROM entities")]
    pool["message_ids"] = [r[0] for r in conn.execute("SELECT DISTINCT message_id FROM chunks") if r[0]]
    pool["uris"] = [r[0] for r in conn.execute("SELECT DISTINCT uri FROM documents")]
    pool["external_ids"] = [r[0] for r in conn.execute("SELECT DISTINCT external_id FROM documents")]
    # A's documents have random external ids: the same document's in the file holding A alone
    same = dict(zip(*([r[0] for r in s.conn.execute("SELECT external_id FROM documents ORDER BY id LIMIT 1")]
                      for s in (store, alone)), strict=True))
    yield {"store": store, "alone": alone, "pool": pool, "a_memories": a_memories, "model": model, "same": same}
    store.close()
    alone.close()


def _argument(name: str, param: inspect.Parameter, pool: dict[str, list[Any]], model: str,
              data: st.DataObject) -> Any:
    draw = data.draw
    ints = st.integers(min_value=-1, max_value=5)
    if name in ID_TABLES:
        return draw(st.sampled_from(pool[ID_TABLES[name]]) | ints)
    if name in LIST_TABLES:
        return draw(st.lists(st.sampled_from(pool[LIST_TABLES[name]]), max_size=12))
    keys = pool["keys"]
    choices: dict[str, st.SearchStrategy[Any]] = {
        "subject_key": st.sampled_from([k for k, _ in keys]),
        "predicate_key": st.sampled_from([p for _, p in keys]) | st.none(),
        "subject_keys": st.lists(st.sampled_from([k for k, _ in keys]), max_size=6),
        "keys": st.lists(st.sampled_from(keys), max_size=6),
        "canonicals": st.lists(st.sampled_from(pool["canonicals"]), min_size=1, max_size=6),
        "entity_keys": st.lists(st.sampled_from(pool["canonicals"]), max_size=6),
        "message_ids": st.lists(st.sampled_from(pool["message_ids"]), max_size=6),
        "sessions": st.lists(st.sampled_from([m.split(":")[0] for m in pool["message_ids"]]), max_size=3),
        "fact_ids": st.lists(st.sampled_from(pool["facts"]), max_size=6),
        "match": st.sampled_from(["zebra", "live", "lisbon OR zebraville", "designer", "hiking"]),
        "model": st.just(model),
        "dims": st.just(64),
        "owner_type": st.sampled_from(["memory", "chunk"]),
        "kind": st.sampled_from(["document", "chunk", "memory", "fact"]),
        "now": st.sampled_from(["2024-06-01T00:00:00Z", "2099-01-01T00:00:00Z"]),
        "flt": st.none() | st.builds(MemoryFilter, text=st.none() | st.sampled_from(["zebra", "live"]),
                                     kind=st.none() | st.sampled_from(["episode", "fact"])),
        "uri": st.sampled_from(pool["uris"]),
        "external_id": st.sampled_from(pool["external_ids"]),
        "types": st.just(("updates", "extends", "derives")),
        "window": st.integers(min_value=0, max_value=3),
        "min_chars": st.just(0),
        "max_attempts": st.just(5),
        "table": st.sampled_from(["memories", "chunks"]),
        "status": st.none() | st.just("open"),
        "statuses": st.sampled_from([("active", "needs_review"), ("active", "needs_review", "superseded")]),
        "limit": st.just(200),
        "offset": st.just(0),
    }
    if name in choices:
        return draw(choices[name])
    if param.default is not inspect.Parameter.empty:
        return param.default
    raise AssertionError(f"teach test_scope_isolation the parameter {name!r}")


def _reads() -> list[str]:
    out = []
    for name, fn in inspect.getmembers(Store, inspect.isfunction):
        params = list(inspect.signature(fn).parameters)
        if not name.startswith("_") and name not in SKIP and params[1:2] == ["scope"]:
            out.append(name)
    return sorted(out)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, np.ndarray):
        yield from value.ravel().tolist()
    elif isinstance(value, dict):
        for k, v in sorted(value.items(), key=lambda kv: repr(kv[0])):  # dict order is not a row's
            yield from _leaves(k)
            yield from _leaves(v)
    elif isinstance(value, (list, tuple, set, frozenset)) or inspect.isgenerator(value):
        for v in value:
            yield from _leaves(v)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield from _leaves(dataclasses.asdict(value))
    else:
        yield value


def test_every_scoped_read_is_taught():
    assert len(_reads()) >= 80  # the store's read surface; a large drop means the discovery broke


_VOLATILE = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z?|turns-[0-9a-f]{32}")


def _masked(leaves: list[Any]) -> list[Any]:
    """Leaves with what differs between two writings of the same data masked: times written,
    random external ids, and floats (bm25 and vector scores use whole-file statistics; timings)."""
    return [_VOLATILE.sub("<t>", v) if isinstance(v, str) else "<f>" if isinstance(v, float) else v
            for v in leaves]


def _leaks(world: dict[str, Any], name: str, kwargs: dict[str, Any]) -> list[Any]:
    """What a read for A returned of another scope: marked text, memory ids that are not A's, or
    anything else that differs from the same read of the file that holds A alone."""
    leaves = list(_leaves(getattr(world["store"], name)(A, **kwargs)))
    alone_kwargs = {k: world["same"].get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    alone = list(_leaves(getattr(world["alone"], name)(A, **alone_kwargs)))
    given = list(_leaves(kwargs))
    given_text = " ".join(str(v) for v in given).casefold()
    out = [v for v in leaves if isinstance(v, str) and MARK in v.casefold() and v.casefold() not in given_text]
    if name in MEMORY_ID_RESULTS:  # every int these reads return is a memory id (or a count, rank, score)
        ids = {v for v in leaves if isinstance(v, int) and not isinstance(v, bool)}
        foreign = (ids & set(world["pool"]["memories"])) - world["a_memories"]
        out += sorted(foreign - {v for v in given if isinstance(v, int)})  # echoed arguments are not rows
    mine, theirs = Counter(map(repr, _masked(leaves))), Counter(map(repr, _masked(alone)))  # rows, in any order
    if not out and mine != theirs:
        out.append(f"differs from the file that holds A alone: {sorted((mine - theirs).elements())[:12]} more, "
                   f"{sorted((theirs - mine).elements())[:12]} fewer")
    return out


@pytest.mark.parametrize("name", _reads())
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_read_returns_nothing_of_another_scope(world, name, data):
    fn = getattr(world["store"], name)
    params = list(inspect.signature(fn).parameters.items())[1:]
    kwargs = {p: _argument(p, param, world["pool"], world["model"], data) for p, param in params
              if param.kind is not inspect.Parameter.VAR_KEYWORD}
    leaked = _leaks(world, name, kwargs)
    assert not leaked, f"{name}({kwargs}) returned another scope's rows: {leaked[:3]}"


def test_the_check_sees_a_predicate_that_forgets_a_column(world, monkeypatch):
    """The same check, against a browse module whose scope predicate ignores agent_id: it must leak."""
    import engine.store.browse as browse

    def forgetful(alias: str = "") -> str:
        p = f"{alias}." if alias else ""
        return f"{p}user_id = ? AND ({p}agent_id = ? OR 1) AND {p}scope_type = ? AND {p}scope_id = ?"

    monkeypatch.setattr(browse, "scope_where", forgetful)
    assert _leaks(world, "browse_memories", {})
    assert _leaks(world, "count_memories", {"flt": None})
