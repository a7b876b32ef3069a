"""`memlens perf --data FILE`: the recall pipeline at scale on real turns and real questions.

engine/perf.py measures a synthetic store (random vectors, Zipf words, no sources); real
questions exercise more: many content words, neighbour expansion through the source chunks,
time windows, the speaker and session priors, and the trace every recall writes. Here:

1. The benchmark files' sessions (LongMemEval haystacks, each distinct session once; LoCoMo
   conversations) are ingested into one scope through the normal ingestion pipeline, with
   the real embedder behind the vector cache (engine/embed/cache.py): a text any benchmark run
   or earlier perf run embedded is not embedded again, and the vectors are the model's.
2. When N memories are asked for and the files hold fewer, the stored corpus is copied within
   the scope (Writer.replicate: the rows ingestion wrote, with new ids, as if the same sessions
   had been ingested again under other names) until N is reached, in whole sessions. A copy
   repeats its text and vector exactly, so a question's neighbourhood holds every copy of the
   turns it matches; the vector figure below counts ties as found (see `_vector_recall`).
3. The store is reopened, and the files' questions (a deterministic sample of `queries`) are
   recalled through MemoryEngine.recall as a benchmark does (offline recipe, the question's own
   `now`, the trace persisted), the question's vector given: its embedding is excluded here as
   in engine/perf.py, and `memlens bench` reports it apart (query_embed_ms).

Reported as `memlens perf --json` does, plus CPU time per recall (thread time: on a machine
shared with other work, wall time measures the queue for the cores as much as the recall).
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import BadInput
from ..scope import Scope
from .runner import timed_recalls

if TYPE_CHECKING:
    from ..embed.cache import CachedEmbedder
    from ..index.vectors import VectorIndex

PERF_SCOPE = ("perf", "perf")


def _pcts(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    arr = np.asarray(values)
    return {f"p{p}": round(float(np.percentile(arr, p)), 3) for p in (50, 95, 99)}


def load_sources(paths: list[Path]) -> tuple[list[Any], list[tuple[str, str | None]], list[dict[str, Any]]]:
    """(documents, questions as (text, now), one {"file", "sha256", "documents", "questions"} per
    file) from LongMemEval and LoCoMo files; each distinct session once."""
    from ..ingest.formats import locomo, longmemeval
    from ..ingest.pipeline import document_hash
    from . import datasets as ds

    docs, questions, files = [], [], []
    seen: set[str] = set()
    for path in paths:
        loaded, raw = ds.read_dataset(path)
        if isinstance(loaded, ds.LongMemEvalDataset):
            parsed = longmemeval.parse_json(raw, name=path.name)
            qs = [(q.question, q.question_date) for q in loaded.questions]
        elif isinstance(loaded, ds.LocomoDataset):
            parsed = locomo.parse_json(raw, name=path.name)
            qs = [(q.question, None) for q in loaded.questions]
        else:
            raise BadInput(f"{path}: perf --data reads LongMemEval and LoCoMo files, not {loaded.name}")
        kept = 0
        for doc in parsed:  # a session two files (or two haystacks) share is stored once
            h = document_hash(doc)
            if h not in seen:
                seen.add(h)
                docs.append(doc)
                kept += 1
        questions += qs
        files.append({"file": str(path), "sha256": loaded.sha256, "documents": kept, "questions": len(qs)})
    return docs, questions, files


def _vector_recall(index: VectorIndex, mat: np.ndarray, qvecs: np.ndarray, found: list[np.ndarray]) -> float:
    """Share of the exact top-10 scores the index's top 10 reached. A store with copies holds
    equal vectors, so the exact top 10 is a set of scores, not of ids: a returned row counts when
    its exact score is at least the 10th best (ties are the same vector under another id)."""
    hits = 0
    pos = {int(mid): i for i, mid in enumerate(index._ids[: index._n].tolist())}
    for q, ids in zip(qvecs, found):
        scores = mat @ q
        k = min(10, len(scores))
        tenth = np.partition(-scores, k - 1)[k - 1] * -1
        got = scores[[pos[int(m)] for m in ids[:k]]]
        hits += int(np.sum(got >= tenth - 1e-6))
    return hits / (10 * max(1, len(found)))


def _build(path: Path, docs: list[Any], memories: int | None, emb: CachedEmbedder, scope: Scope,
           progress: Callable[[float, str], None] | None) -> dict[str, Any]:
    """Ingest the sessions (whole sessions up to `memories`), then copy them to reach it."""
    from ..memory import MemoryEngine

    t0 = time.perf_counter()
    with MemoryEngine(path, embedder=emb, llm=False, background_reembed=False) as engine:
        take = docs
        if memories is not None:  # fewer memories than the files hold: whole sessions, in file order
            n, take = 0, []
            for doc in docs:
                if n >= memories:
                    break
                take.append(doc)
                n += len(doc.chunks)
        report = engine.ingest_documents(take, scope=scope, extract="none",
                                         progress=(lambda f, m: progress(0.5 * f, f"ingesting: {m}"))
                                         if progress else None)
        ingest_seconds = time.perf_counter() - t0
        corpus, copies, store = report.memories, 0, engine.store
        if memories is not None and memories > corpus:
            with store.writer(scope) as w:
                base = w.replication_base()
            doc_mems = store.document_memory_counts(scope)  # [(document id, memories)] in id order
            total = corpus
            while total < memories:
                upto, n = 0, 0
                for doc_id, count in doc_mems:  # the last copy may be partial, in whole documents
                    if total + n >= memories:
                        break
                    upto, n = doc_id, n + count
                copies += 1
                with store.writer(scope) as w:
                    total += w.replicate(base, documents_upto=upto, tag=f"copy{copies}")
                if progress is not None:
                    progress(0.5 + 0.3 * min(1.0, total / memories), f"copied to {total:,} memories")
    stats = getattr(emb, "stats", None)
    return {"corpus_memories": corpus, "copies": copies, "ingest_seconds": round(ingest_seconds, 2),
            "build_seconds": round(time.perf_counter() - t0, 2),
            "vectors": stats.as_dict() if stats is not None else {"embedded": corpus, "reused": 0}}


def run_data_perf(paths: list[str], memories: int | None = None, queries: int = 200, *,
                  vector_cache: str | os.PathLike[str] | None = None, embedder: str = "local",
                  workdir: str | None = None, keep: str | os.PathLike[str] | None = None, seed: int = 7,
                  progress: Callable[[float, str], None] | None = None, origin: str = "bench") -> dict[str, Any]:
    """The module doc's measurement. keep: build the store at this path and keep it, or, when a
    store built there from the same files, N and embedder exists, measure it again as it is.
    origin: whose recalls ("agent": a real client's, each counting the usage of what it returned)."""
    from ..embed import make_embedder
    from ..embed.cache import CachedEmbedder
    from ..memory import MemoryEngine
    from ..store.vector_cache import VectorCacheFile

    files = [Path(p) for p in paths]
    for f in files:
        if not f.is_file():
            raise BadInput(f"{f}: no such dataset file")
    if memories is not None and memories < 1:
        raise BadInput("--memories must be positive")
    if queries < 1:
        raise BadInput("--queries must be positive")
    if origin not in ("bench", "agent"):
        raise BadInput(f"--origin {origin!r}: bench or agent")
    docs, questions, file_info = load_sources(files)
    if not docs or not questions:
        raise BadInput("perf --data: the files hold no sessions or no questions")
    scope = Scope.default(*PERF_SCOPE)
    cache = VectorCacheFile(vector_cache) if vector_cache else None
    emb = CachedEmbedder(make_embedder(embedder), cache)
    recipe = json.dumps({"files": [f["sha256"] for f in file_info], "memories": memories,
                         "embedder": emb.identity() if cache is not None else emb.model}, sort_keys=True)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(keep) if keep else Path(tmp) / "perf.db"
        built = None
        if keep and path.exists():
            with MemoryEngine(path, embedder=emb, llm=False, background_reembed=False, create=False) as engine:
                kept = engine.store.get_meta(KEPT_KEY)
            if kept is None or json.loads(kept)["recipe"] != recipe:
                raise BadInput(f"{path}: not a perf store built from these files, N and embedder (delete it to rebuild)")
            built = json.loads(kept)["build"] | {"reused_store": True}
        if built is None:
            built = _build(path, docs, memories, emb, scope, progress)
            with MemoryEngine(path, embedder=emb, llm=False, background_reembed=False) as engine:
                engine.store.set_meta(KEPT_KEY, json.dumps({"recipe": recipe, "build": built}))
        out = _measure(path, questions, queries, emb, scope, seed, progress, origin)
        out["db_bytes"] = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    if cache is not None:
        cache.close()
    return {"memories": out.pop("memories"), "queries": out.pop("queries"), "recipe": "offline", "origin": origin,
            "files": file_info,
            **built, **out, "embedder": emb.model,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "note": ("real sessions and questions; query embedding excluded (query vectors are given); "
                     "copies repeat the corpus exactly (vector recall counts equal vectors as found); "
                     "cpu_ms is the recall thread's CPU time")}


KEPT_KEY = "perf_data_build"


def _measure(path: Path, questions: list[Any], queries: int, emb: CachedEmbedder, scope: Scope, seed: int,
             progress: Callable[[float, str], None] | None, origin: str = "bench") -> dict[str, Any]:
    from ..memory import MemoryEngine

    rng = np.random.default_rng(seed)
    picked = [questions[i] for i in rng.permutation(len(questions))[:queries]]
    qvecs = emb.embed([q for q, _ in picked], kind="query")
    # Measured as a store is used: reopened, the vector index loaded before the first question.
    with MemoryEngine(path, embedder=emb, llm=False, background_reembed=False) as engine:
        index = engine.vectors(scope)
        t1 = time.perf_counter()
        index.search(qvecs[0], 10)
        load_seconds = time.perf_counter() - t1
        stage_ms: dict[str, list[float]] = {}
        totals, cpu = [], []
        channel_counts: dict[str, list[int]] = {}
        found: list[np.ndarray] = []
        with timed_recalls() as settle:
            for n, ((text, now), qvec) in enumerate(zip(picked, qvecs)):
                settle()  # as bench's run_container: no full pass walks the kept results in a recall
                ts, tc = time.perf_counter(), time.thread_time()
                result = engine.recall(text, scope=scope, k=10, recipe="offline", origin=origin, now=now,
                                       query_vector=qvec)
                cpu.append((time.thread_time() - tc) * 1000.0)
                totals.append((time.perf_counter() - ts) * 1000.0)
                top = 0.0
                for name, ms in result.trace.timings.items():
                    stage_ms.setdefault(name, []).append(ms)
                for st in result.trace.stages:
                    top += st["ms"]
                    for ch, c in st.get("channels", {}).items():
                        channel_counts.setdefault(ch, []).append(c)
                stage_ms.setdefault("trace_write", []).append(totals[-1] - top)  # persisting the trace, and glue
                found.append(index.search(qvec, 10)[0])
                if progress is not None and n % 20 == 0:
                    progress(0.8 + 0.2 * n / len(picked), f"question {n}/{len(picked)}")
        # Ground truth after the timed loop, so the brute force does not disturb the timings.
        recall_at_10 = _vector_recall(index, index._mat[: index._n], qvecs, found)
        count = len(index)
    return {"memories": count, "queries": len(picked), "total_ms": _pcts(totals), "cpu_ms": _pcts(cpu),
            "stages_ms": {k: _pcts(v) for k, v in sorted(stage_ms.items()) if k != "embed"},
            "candidates_per_channel": {k: round(float(np.mean(v)), 1) for k, v in channel_counts.items()},
            "vector_recall_at_10": round(recall_at_10, 4), "vector_load_seconds": round(load_seconds, 3)}
