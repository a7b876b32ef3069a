"""Why gold evidence misses the top k: the failure analysis behind a retrieval change.

`memlens bench misses --data FILE` answers every question of a benchmark file (containers built
once, containers.py) and, for every gold turn that is not among the first k turns of the ranking,
says why, from the recall trace:

- not a candidate: no channel proposed it (no re-ranking can bring it back);
- dropped: a filter removed it (superseded, not valid at the time asked, ...);
- ranked: at which position (11-20, 21-50, beyond), which channels had it and at what rank, and
  whether its document (session) is among the top k's at all, or how many turns it lies from
  the nearest top-k turn of its own document.

It also reports the headroom of any re-ranking of the candidates as they are: turn evidence
recall@k if the first N turns of the ranking were perfectly ordered (N = k is the figure itself).
Per category and over the questions ours scores (LoCoMo's adversarial ones apart). It changes
nothing and tunes nothing: it says where a gain could come from before a rule is written for it.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadInput
from . import datasets as ds
from .runner import (
    container_engine,
    containers_for,
    execute,
    git_commit,
    limit_questions,
    turn_ranking,
    without_blind,
)

if TYPE_CHECKING:

    from ..memory import MemoryEngine

CHANNELS = ("vector", "fts", "neighbour", "entity", "relation", "baseline")
DEPTHS = (10, 15, 20, 30, 50, 100)  # headroom: the first N turns perfectly ordered (and N = k)
KEPT_DROPS = ("below_cut", "budget")  # ranked, only past k or the context budget


def misses_container(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """One item per question with gold turns: its category, gold count, first turns of the
    ranking, and one record per missed gold turn (worker process)."""
    k = spec["k"]
    out: list[dict[str, Any]] = []
    qs = [q for q in spec["questions"] if (q["gold"].get("turn") or [])]
    with container_engine(spec, qs) as (engine, scope, vectors):
        for q, qvec in zip(qs, vectors):
            res = engine.recall(q["question"], scope=scope, k=k, recipe=spec["recipe"], origin="bench", now=q["now"],
                                as_of=q.get("as_of"), persist=False, query_vector=qvec, off=tuple(spec["off"]),
                                on=tuple(spec["on"]))
            ranking = turn_ranking(engine, scope, res.ordered_ids)
            cands = list(res.trace.candidates.values())
            msgs = engine.store.message_ids(scope, [c.memory_id for c in cands])
            best: dict[str, Any] = {}  # turn id -> the highest-scored candidate citing it
            for c in cands:
                for m in msgs.get(c.memory_id, []):
                    if m not in best or c.score > best[m].score:
                        best[m] = c
            top = ranking[:k]
            top_docs = {best[t].meta.get("document_id") for t in top if t in best}
            position = {t: i for i, t in enumerate(ranking, start=1)}
            gold = list(dict.fromkeys(q["gold"]["turn"]))
            missed: list[dict[str, Any]] = []
            for t in gold:
                if t in top:
                    continue
                if t not in best:
                    missed.append({"why": "not a candidate"})
                    continue
                c = best[t]
                if c.dropped is not None and c.dropped["reason"] not in KEPT_DROPS:
                    missed.append({"why": f"dropped ({c.dropped['reason']})"})
                    continue
                doc = c.meta.get("document_id")
                seq = c.meta.get("chunk_id")  # a conversation's turns are chunks in order
                near = [abs(seq - best[x].meta["chunk_id"]) for x in top if x in best
                        and best[x].meta.get("document_id") == doc and seq is not None
                        and best[x].meta.get("chunk_id") is not None]
                missed.append({"why": "ranked", "position": position.get(t), "session_in_top": doc in top_docs,
                               "distance": min(near) if near else None,
                               "channels": {ch: int(c.channels[ch]["rank"]) for ch in CHANNELS if ch in c.channels}})
            out.append({"category": q["category"], "excluded": q["excluded"], "gold": len(gold),
                        "found_at": {n: len(set(gold) & set(ranking[:n])) for n in (k, *DEPTHS)},
                        "missed": missed})
    Path(spec["db"]).unlink(missing_ok=True)
    return out


def _bucket(m: dict[str, Any]) -> str:
    if m["why"] != "ranked":
        return str(m["why"])
    p = m["position"] or 10**9
    return "ranked 11-20" if p <= 20 else "ranked 21-50" if p <= 50 else "ranked beyond 50"


CEILING = ("ranked 11-30", "ranked 31-100", "ranked beyond 100", "absent")


def _depth(m: dict[str, Any]) -> str:
    """A re-ranker's ceiling: where a missed gold turn lies in the fused candidate pool. "absent":
    no channel proposed it, or a filter dropped it (no re-ranking of the pool reaches it)."""
    if m["why"] != "ranked":
        return "absent"
    p = m["position"] or 10**9
    return CEILING[0] if p <= 30 else CEILING[1] if p <= 100 else CEILING[2]


def summarise(items: list[dict[str, Any]], k: int) -> dict[str, Any]:
    """Per group of questions: the misses by reason, channel and session, and the headroom."""
    def group(its: list[dict[str, Any]]) -> dict[str, Any]:
        missed = [m for it in its for m in it["missed"]]
        ranked = [m for m in missed if m["why"] == "ranked"]
        channels = {}
        for ch in CHANNELS:
            ranks = [m["channels"][ch] for m in ranked if ch in m["channels"]]
            if ranks:
                channels[ch] = {"had_it": len(ranks), "median_rank": statistics.median(ranks)}
        dist = Counter("other session" if not m["session_in_top"] else
                       "same session, no position" if m["distance"] is None else
                       f"same session, {min(m['distance'], 6)}{'+' if m['distance'] >= 6 else ''} turn"
                       f"{'' if m['distance'] == 1 else 's'} away"
                       for m in ranked)
        headroom = {n: (sum(min(k, it["found_at"][n]) / it["gold"] for it in its) / len(its)) if its else None
                    for n in sorted({k, *(d for d in DEPTHS if d > k)})}
        depth = Counter(_depth(m) for m in missed)
        return {"questions": len(its), "gold_turns": sum(it["gold"] for it in its), "missed": len(missed),
                "why": dict(Counter(_bucket(m) for m in missed).most_common()),
                "depth": {d: {"missed": depth[d], "share": round(depth[d] / len(missed), 4) if missed else None}
                          for d in CEILING}, "channels": channels,
                "session": dict(dist.most_common()), "headroom": headroom}

    cats = sorted({it["category"] for it in items})
    return {"ours": group([it for it in items if not it["excluded"]]),
            "by_category": {c: group([it for it in items if it["category"] == c]) for c in cats}}


def run_misses(engine: MemoryEngine, data_path: str | os.PathLike[str], *, recipe: str = "offline", k: int = 10,
               workers: int = 1, embedder: str | None = None, extract: str | None = None, limit: int | None = None,
               off: list[str] | None = None, on: list[str] | None = None, blind: bool = False) -> dict[str, Any]:
    """The `bench misses --json` document for one benchmark file (an updates file's blind part only
    with `blind`, as `bench updates --blind`)."""
    from ..retrieve.recipes import switched_off
    from .containers import cache_dir_for

    path = Path(data_path)
    if not path.is_file():
        raise BadInput(f"{path}: no such dataset file")
    if k < 1:
        raise BadInput("--k must be at least 1")
    switched = switched_off(recipe, off or (), on or ())  # unknown names fail here
    loaded, raw = ds.read_dataset(path)
    emb = embedder or os.environ.get("MEMLENS_EMBEDDER") or "local"
    work = Path(str(engine.path) + ".bench") / "misses"
    specs = containers_for(loaded, raw)
    specs = limit_questions(specs if blind else without_blind(loaded, specs), limit)
    for i, s in enumerate(specs):
        s.update({"db": str(work / f"c{i}.db"), "k": k, "recipe": recipe, "embedder": emb,
                  "extract": extract or ds.default_extract(loaded.name), "cache": str(cache_dir_for(engine.path)),
                  "off": switched, "on": list(on or ())})
    t0 = time.perf_counter()
    items = [it for chunk in execute(specs, workers, None, None, fn=misses_container) for it in chunk]
    return {"data": str(path), "dataset": loaded.name, "recipe": recipe, "k": k, "off": list(off or ()),
            "on": list(on or ()), "git_commit": git_commit(), "seconds": round(time.perf_counter() - t0, 1),
            **summarise(items, k)}


def markdown(report: dict[str, Any]) -> str:
    k = report["k"]
    lines = [f"# Why gold turns miss the top {k}: {Path(report['data']).name} ({report['recipe']})", ""]
    for name, g in [("scored by ours", report["ours"]), *report["by_category"].items()]:
        head = ", ".join(f"{n} {v:.3f}" for n, v in g["headroom"].items() if v is not None)
        lines += [f"## {name}: {g['questions']} questions, {g['missed']} of {g['gold_turns']} gold turns missed", "",
                  "- why: " + ", ".join(f"{w} {n}" for w, n in g["why"].items()),
                  "- where in the fused pool (a re-ranker's ceiling): " + ", ".join(
                      f"{d} {v['missed']} ({v['share'] or 0:.0%})" for d, v in g.get("depth", {}).items()),
                  "- channels that had a ranked miss (median rank): " + ", ".join(
                      f"{ch} {v['had_it']} ({v['median_rank']:g})" for ch, v in g["channels"].items()),
                  "- its session: " + ", ".join(f"{w} {n}" for w, n in g["session"].items()),
                  f"- recall@{k} with the first N turns perfectly ordered: {head}", ""]
    return "\n".join(lines)
