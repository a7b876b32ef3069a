"""The fact graph as arrays: entities and facts (and optionally episodes) as nodes, edges between them.

Pure Python + numpy (no Qt), so it is built on a worker thread together with the layout and
tested without a display. Nodes are keyed by stable strings ("e:<entity key>", "f:<fact id>",
"m:<memory id>") so an incremental layout can carry positions over between neighbourhoods.

Edges, in this order of kinds:
  subject   entity -> fact (the fact's subject)
  object    fact -> entity (the fact's object)
  updates / extends / derives   fact -> fact, from memory_relations (src memory -> dst memory)
  mention   entity -> episode memory (only when episodes are included)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ui.models.graph_layout import force_layout

NODE_KINDS = ("entity", "fact", "episode")
EDGE_KINDS = ("subject", "object", "updates", "extends", "derives", "mention")
RELATION_KINDS = ("updates", "extends", "derives")
STATUSES = ("active", "needs_review", "superseded", "expired", "retracted")
TRUSTS = ("user", "assistant", "tool", "external")


@dataclass(slots=True)
class GraphData:
    keys: list[str] = field(default_factory=list)  # stable node keys
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))  # index into NODE_KINDS
    labels: list[str] = field(default_factory=list)
    tips: list[str] = field(default_factory=list)
    fact_id: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1 if not a fact
    memory_id: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1 for entities
    status: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))  # index into STATUSES, -1
    trust: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))  # index into TRUSTS, -1
    hop: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int16))
    seed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    adj: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    edge_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))  # index into EDGE_KINDS
    pos: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    truncated: bool = False
    layout_ms: float = 0.0
    layout_iterations: int = 0

    def __len__(self) -> int:
        return len(self.keys)

    def index_of(self, key: str) -> int | None:
        try:
            return self.keys.index(key)
        except ValueError:
            return None

    def count(self, kind: str) -> int:
        return int((self.kind == NODE_KINDS.index(kind)).sum())

    def edge_count(self, kind: str | None = None) -> int:
        if kind is None:
            return len(self.adj)
        return int((self.edge_kind == EDGE_KINDS.index(kind)).sum())


def _short(text: str, n: int = 48) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def build_graph(facts: Sequence[dict[str, Any]], relations: Iterable[dict[str, Any]] = (),
                episodes: Iterable[dict[str, Any]] = (), *, seed_fact_ids: Iterable[int] = (),
                seed_entity_keys: Iterable[str] = ()) -> GraphData:
    """facts: rows of GraphReads.graph_facts/graph_neighbourhood; relations: GraphReads.graph_relations;
    episodes: GraphReads.episodes_mentioning rows (entity_key, memory_id, text, trust)."""
    keys: list[str] = []
    index: dict[str, int] = {}
    kind: list[int] = []
    labels: list[str] = []
    tips: list[str] = []
    fact_ids: list[int] = []
    memory_ids: list[int] = []
    status: list[int] = []
    trust: list[int] = []
    hop: list[int] = []
    seeds_f = {int(x) for x in seed_fact_ids}
    seeds_e = set(seed_entity_keys)

    def add(key: str, k: str, label: str, tip: str, fid: int = -1, mid: int = -1, st: int = -1, tr: int = -1,
            h: int = 0) -> int:
        i = index.get(key)
        if i is not None:
            hop[i] = min(hop[i], h)
            return i
        i = index[key] = len(keys)
        keys.append(key)
        kind.append(NODE_KINDS.index(k))
        labels.append(label)
        tips.append(tip)
        fact_ids.append(fid)
        memory_ids.append(mid)
        status.append(st)
        trust.append(tr)
        hop.append(h)
        return i

    edges: list[tuple[int, int, int]] = []
    fact_node_of_memory: dict[int, int] = {}
    for f in facts:
        h = int(f.get("hop") or 0)
        s = add("e:" + f["subject_key"], "entity", _short(f["subject"], 32), f"entity {f['subject']}", h=h)
        st = STATUSES.index(f["status"]) if f["status"] in STATUSES else -1
        tr = TRUSTS.index(f["trust"]) if f.get("trust") in TRUSTS else -1
        valid = f"{(f.get('valid_from') or '…')[:10]} → {(f.get('valid_to') or 'now')[:10]}"
        tip = (f"fact {f['id']} ({f['status']}, trust {f.get('trust')}, confidence {f['confidence']:.2f})\n"
               f"{f['subject']} · {f['predicate']} · {f['object']}\n"
               f"valid {valid}; learned {(f.get('learned_at') or '')[:10]}")
        fi = add(f"f:{f['id']}", "fact", _short(f"{f['predicate']}: {f['object']}", 40), tip, fid=int(f["id"]),
                 mid=int(f["memory_id"]), st=st, tr=tr, h=h)
        o = add("e:" + f["object_key"], "entity", _short(f["object"], 32), f"entity {f['object']}", h=h)
        fact_node_of_memory[int(f["memory_id"])] = fi
        edges.append((s, fi, EDGE_KINDS.index("subject")))
        edges.append((fi, o, EDGE_KINDS.index("object")))
    seen_rel: set[int] = set()
    for r in relations:
        a = fact_node_of_memory.get(int(r["src_memory_id"]))
        b = fact_node_of_memory.get(int(r["dst_memory_id"]))
        if a is None or b is None or r["type"] not in RELATION_KINDS or r["id"] in seen_rel:
            continue
        seen_rel.add(r["id"])
        edges.append((a, b, EDGE_KINDS.index(r["type"])))
    for ep in episodes:
        ent = index.get("e:" + ep["entity_key"])
        if ent is None:
            continue
        tr = TRUSTS.index(ep["trust"]) if ep.get("trust") in TRUSTS else -1
        mi = add(f"m:{ep['memory_id']}", "episode", f"m{ep['memory_id']}",
                 f"episode memory {ep['memory_id']} (trust {ep.get('trust')})\n{_short(ep['text'], 160)}",
                 mid=int(ep["memory_id"]), tr=tr, h=hop[ent] + 1)
        edges.append((ent, mi, EDGE_KINDS.index("mention")))
    # one edge per (pair, kind): repeated facts about the same pair stay separate nodes anyway
    adj = np.array([(a, b) for a, b, _ in edges], dtype=np.int64).reshape(-1, 2)
    ek = np.array([k for _, _, k in edges], dtype=np.int8)
    if len(adj):
        _, first = np.unique(np.column_stack([adj, ek]), axis=0, return_index=True)
        first.sort()
        adj, ek = adj[first], ek[first]
    seed = np.array([(k.startswith("f:") and int(k[2:]) in seeds_f) or (k.startswith("e:") and k[2:] in seeds_e)
                     for k in keys], dtype=bool)
    return GraphData(keys=keys, kind=np.array(kind, dtype=np.int8), labels=labels, tips=tips,
                     fact_id=np.array(fact_ids, dtype=np.int64), memory_id=np.array(memory_ids, dtype=np.int64),
                     status=np.array(status, dtype=np.int8), trust=np.array(trust, dtype=np.int8),
                     hop=np.array(hop, dtype=np.int16), seed=seed, adj=adj, edge_kind=ek,
                     pos=np.zeros((len(keys), 2)))


# edge weights for the layout: structure pulls harder than mentions, relations a little less
_EDGE_WEIGHT = {"subject": 1.0, "object": 1.0, "updates": 0.6, "extends": 0.6, "derives": 0.6, "mention": 0.4}


def lay_out(graph: GraphData, *, previous: dict[str, tuple[float, float]] | None = None, seed: int = 7,
            aspect: float = 1.0,
            should_stop: Callable[[], bool] | None = None,
            progress: Callable[[float, str], None] | None = None) -> GraphData:
    """Positions for every node (in place), starting from `previous` positions by node key."""
    import time

    n = len(graph)
    initial = None
    if previous:
        initial = np.full((n, 2), np.nan)
        for i, key in enumerate(graph.keys):
            p = previous.get(key)
            if p is not None:
                initial[i] = p
        if np.isnan(initial).all():
            initial = None
    weights = np.array([_EDGE_WEIGHT[EDGE_KINDS[k]] for k in graph.edge_kind], dtype=np.float64)
    t0 = time.perf_counter()
    result = force_layout(n, graph.adj, initial=initial, weights=weights if len(weights) else None, seed=seed,
                          aspect=aspect, should_stop=should_stop, progress=progress)
    graph.pos = result.pos
    graph.layout_ms = (time.perf_counter() - t0) * 1000.0
    graph.layout_iterations = result.iterations
    return graph


def positions_by_key(graph: GraphData) -> dict[str, tuple[float, float]]:
    return dict(zip(graph.keys, map(tuple, graph.pos.tolist())))  # tolist: no per-row numpy scalars


__all__ = ["GraphData", "build_graph", "lay_out", "positions_by_key", "NODE_KINDS", "EDGE_KINDS", "STATUSES",
           "TRUSTS", "RELATION_KINDS"]
