"""`memlens perf`: a synthetic store at scale and the recall pipeline's latency over it.

The store is built in a temporary DB through the store's bulk writers: realistic-looking
text (names, verbs, stop words and a Zipf-distributed vocabulary, so FTS sees common and
rare terms), real 384-dim unit vectors, and facts in version chains with `updates` relations.
Each query targets one memory: a few of its words, and its vector mixed with noise (a planted
neighbour at cosine ~0.8). Query embedding is excluded: the pipeline gets the query vector.
"""

from __future__ import annotations

import hashlib
import json
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..scope import Scope

if TYPE_CHECKING:
    from ..store.store import Store, Writer

NAMES = ["Ana", "Ben", "Chloe", "Dev", "Elif", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kira", "Luca", "Maya",
         "Nils", "Omar", "Priya", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wen", "Xavi", "Yara", "Zoe"]
VERBS = ["visited", "mentioned", "bought", "planned", "loved", "fixed", "painted", "cooked", "read", "watched",
         "started", "finished", "joined", "left", "found", "lost", "shared", "booked", "tried", "missed"]
STOP = ["the", "a", "with", "and", "to", "of", "in", "for", "on", "that", "it", "was", "my", "our", "last", "this"]
PREDICATES = ["lives_in", "works_at", "has_role", "likes", "has_pet", "studies_at", "drives", "plays"]
CONVERSATION = 50  # memories per synthetic chat document (build(provenance=True))
# Problems build(provenance=True) plants, one in every N memories: a turn repeated verbatim, an
# episode without a source span, a memory without a vector.
PLANT_EVERY = {"duplicate": 5000, "no_source": 10007, "no_vector": 7001}


def _vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(2, 4))
        words.add("".join(rng.choice(list(consonants)) + rng.choice(list(vowels)) for _ in range(n))
                  + rng.choice(["", "n", "r", "s", "t"]))
    return sorted(words)


class SyntheticStore:
    def __init__(self, path: Path, n: int, *, dims: int = 384, seed: int = 7, fact_share: float = 0.1) -> None:
        self.path = path
        self.n = n
        self.dims = dims
        self.rng = np.random.default_rng(seed)
        self.fact_share = fact_share
        self.vocab = _vocabulary(self.rng, 20000)
        ranks = np.arange(1, len(self.vocab) + 1)
        p = (1.0 / ranks) / (1.0 / ranks).sum()  # Zipf: a few words are everywhere
        self.cdf = np.cumsum(p)
        self.scope = Scope.default("perf", "perf")
        self.words: list[list[str]] = []

    def _texts(self, count: int) -> list[tuple[str, list[str]]]:
        lengths = self.rng.integers(4, 9, size=count)
        picks = np.searchsorted(self.cdf, self.rng.random(int(lengths.sum())), side="right")
        picks = np.minimum(picks, len(self.vocab) - 1)
        names = self.rng.integers(len(NAMES), size=count)
        verbs = self.rng.integers(len(VERBS), size=count)
        stops = self.rng.integers(len(STOP), size=int(lengths.sum()))
        coins = self.rng.random(int(lengths.sum())) < 0.5
        out = []
        pos = 0
        for i in range(count):
            content = [self.vocab[j] for j in picks[pos:pos + lengths[i]]]
            parts = [NAMES[names[i]], VERBS[verbs[i]]]
            for off, w in enumerate(content):
                if coins[pos + off]:
                    parts.append(STOP[stops[pos + off]])
                parts.append(w)
            pos += lengths[i]
            out.append((" ".join(parts) + ".", content))
        return out

    def build(self, store: Store, embedder_model: str, progress: Callable[[float, str], None] | None = None, *,
              provenance: bool = False) -> np.ndarray:
        """Fill the store; return the float32 matrix of vectors in memory-id order (for ground truth).

        provenance=True also writes what ingestion would have: a chat document per CONVERSATION
        turns, a chunk per episode with its exact span, a source span for every memory (a fact
        points at the next turn of its conversation), and a mention of the speaker's name; and it plants a few
        of the problems the health checks look for (PLANTED says which, and how many)."""
        vectors = self.rng.standard_normal((self.n, self.dims), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        batch = 20000  # a multiple of CONVERSATION: no conversation spans two batches
        if provenance:
            with store.writer(self.scope) as w:
                w.bulk_entities([(k + 1, name, name.lower(), "name") for k, name in enumerate(NAMES)])
        fact_id = 0
        base_day = np.datetime64("2020-01-01")
        for start in range(0, self.n, batch):
            stop = min(self.n, start + batch)
            mems: list[tuple[Any, ...]] = []
            facts: list[tuple[Any, ...]] = []
            rels: list[tuple[int, int, str]] = []
            embs: list[tuple[int, np.ndarray]] = []
            chain: dict[tuple[str, str], tuple[int, int, str]] = {}
            position: dict[int, int] = {}  # fact id -> index in `facts`
            texts = self._texts(stop - start)
            for i in range(start, stop):
                mid = i + 1
                day = str(base_day + int(i * 1500 / max(1, self.n)))  # ~4 years, oldest first
                when = f"{day}T12:00:00Z"
                text, content = texts[i - start]
                self.words.append(content)
                is_fact = self.rng.random() < self.fact_share
                mems.append((mid, "fact" if is_fact else "episode", text, "user", 0.5, 0.8 if is_fact else 1.0, when,
                             hashlib.blake2b(text.encode(), digest_size=8).hexdigest()))
                if is_fact:
                    fact_id += 1
                    subj = NAMES[int(self.rng.integers(len(NAMES)))]
                    pred = PREDICATES[int(self.rng.integers(len(PREDICATES)))]
                    obj = content[0]
                    key = (subj.lower(), pred)
                    prev = chain.get(key)
                    facts.append((fact_id, mid, subj, pred, obj, key[0], pred, obj, "active", 0.8, when, None, when,
                                  None, prev[0] if prev else None, "updates" if prev else "new"))
                    position[fact_id] = len(facts) - 1
                    if prev is not None:
                        j = position[prev[0]]
                        f = facts[j]
                        facts[j] = (*f[:8], "superseded", f[9], f[10], when, f[12], when, *f[14:])
                        rels.append((mid, prev[1], "updates"))
                    chain[key] = (fact_id, mid, when)
                if provenance and i % PLANT_EVERY["duplicate"] == PLANT_EVERY["duplicate"] - 1 \
                        and len(mems) > 1 and mems[-2][1] == mems[-1][1] == "episode":
                    twin = mems[-2]  # the same turn again, verbatim: its text, hash and vector
                    mems[-1] = (mid, "episode", twin[2], *mems[-1][3:7], twin[7])
                    vectors[i] = vectors[i - 1]
                if not (provenance and i % PLANT_EVERY["no_vector"] == 0):
                    embs.append((mid, vectors[i]))
            with store.writer(self.scope) as w:
                w.bulk_memories(mems)
                w.bulk_facts(facts)
                w.bulk_relations(rels)
                w.put_embeddings("memory", embs, provider="synthetic", model=embedder_model, dims=self.dims,
                                 embed_ms=None)
                if provenance:
                    self._provenance(w, mems)
            if progress is not None:
                progress(stop / self.n, f"built {stop:,} memories")
        return vectors

    def _provenance(self, w: Writer, mems: list[tuple[Any, ...]]) -> None:
        """Documents, chunks, source spans and name mentions for one batch of memories (see build)."""
        docs: list[tuple[Any, ...]] = []
        chunks: list[tuple[Any, ...]] = []
        sources: list[tuple[Any, ...]] = []
        mentions: list[tuple[Any, ...]] = []
        for c in range(0, len(mems), CONVERSATION):
            conv = mems[c:c + CONVERSATION]
            doc_id = conv[0][0]  # ids of the conversation's first memory: unique, no counter needed
            parts, pos, last_chunk = [], 0, None
            pending_facts = []
            for m in conv:
                mid, kind, text, when = m[0], m[1], m[2], m[6]
                if kind != "episode":
                    pending_facts.append(mid)
                    continue
                chunk = (mid, doc_id, len(chunks), pos, pos + len(text), text, m[7], text.split(" ", 1)[0], "user",
                         when, "user")
                chunks.append(chunk)
                parts.append(text)
                if mid % PLANT_EVERY["no_source"] != 0:
                    sources.append((mid, mid, doc_id, pos, pos + len(text)))
                name = text.split(" ", 1)[0]
                mentions.append((NAMES.index(name) + 1, mid, mid, pos, pos + len(name)))
                for fid in pending_facts:  # facts before this turn are read from it
                    sources.append((fid, mid, doc_id, pos, pos + len(text)))
                pending_facts = []
                last_chunk = chunk
                pos += len(text) + 1
            for fid in pending_facts:  # facts after the last turn: read from it
                if last_chunk is not None:
                    sources.append((fid, last_chunk[0], doc_id, last_chunk[3], last_chunk[4]))
            if parts:
                text = "\n".join(parts)
                docs.append((doc_id, "chat", f"synthetic://chat/{doc_id}", f"Conversation {doc_id}", text,
                             hashlib.blake2b(text.encode(), digest_size=8).hexdigest(), "user", conv[0][6]))
        w.bulk_documents(docs)
        w.bulk_chunks(chunks)
        w.bulk_sources(sources)
        w.add_mentions(mentions)

    def queries(self, vectors: np.ndarray, q: int) -> list[tuple[int, str, np.ndarray]]:
        out = []
        for _ in range(q):
            i = int(self.rng.integers(self.n))
            words = self.words[i]
            pick = list(self.rng.choice(words, size=min(3, len(words)), replace=False))
            noise = self.rng.standard_normal(self.dims).astype(np.float32)
            noise /= np.linalg.norm(noise)
            vec = vectors[i] * 0.8 + noise * 0.6
            vec /= np.linalg.norm(vec)
            out.append((i + 1, f"what about {' '.join(pick)}", vec.astype(np.float32)))
        return out


class _FixedEmbedder:
    """The pipeline's embedder for perf: queries arrive as vectors, so it must never be asked."""

    provider = "synthetic"

    def __init__(self, model: str, dims: int) -> None:
        self.model = model
        self.dims = dims

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        raise AssertionError("perf passes query vectors; nothing should embed")


def _pcts(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    arr = np.asarray(values)
    return {f"p{p}": round(float(np.percentile(arr, p)), 3) for p in (50, 95, 99)}


def run_perf(memories: int = 100_000, queries: int = 200, *, dims: int = 384, workdir: str | None = None,
             recipe: str = "offline", progress: Callable[[float, str], None] | None = None) -> dict[str, Any]:
    from ..index.vectors import VectorIndex
    from ..retrieve.pipeline import Recall
    from ..retrieve.recipes import get_recipe
    from ..store.store import Store

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(tmp) / "perf.db"
        model = f"synthetic-{dims}"
        t0 = time.perf_counter()
        store = Store(path)
        try:
            synth = SyntheticStore(path, memories, dims=dims)
            vectors = synth.build(store, model, progress)
            build_seconds = time.perf_counter() - t0
            store.close()  # measure a store as it is used: reopened (statistics gathered on connect)
            store = Store(path)
            index = VectorIndex(store, synth.scope, model, dims)
            t1 = time.perf_counter()
            index.refresh()
            index.search(vectors[0], 10)  # builds the quantised index where the store is large
            load_seconds = time.perf_counter() - t1
            emb = _FixedEmbedder(model, dims)
            rec = get_recipe(recipe, planner=False, reranker=False)
            stage_ms: dict[str, list[float]] = {}
            totals: list[float] = []
            cpu: list[float] = []  # the recall thread's CPU time: wall time on a shared machine includes the wait
            channel_counts: dict[str, list[int]] = {}
            recall_hits = 0
            found = 0
            qs = synth.queries(vectors, queries)
            vector_ids: list[np.ndarray] = []
            for n, (target, text, qvec) in enumerate(qs):
                ts, tc = time.perf_counter(), time.thread_time()
                result = Recall(store, synth.scope, emb, index, rec).run(text, k=10, query_vector=qvec)
                cpu.append((time.thread_time() - tc) * 1000.0)
                totals.append((time.perf_counter() - ts) * 1000.0)
                for name, ms in result.trace.timings.items():
                    stage_ms.setdefault(name, []).append(ms)
                for st in result.trace.stages:
                    for ch, c in st.get("channels", {}).items():
                        channel_counts.setdefault(ch, []).append(c)
                vector_ids.append(index.search(qvec, 10)[0])
                found += any(r["memory_id"] == target for r in result.results)
                if progress is not None and n % 20 == 0:
                    progress(n / max(1, len(qs)), f"query {n}/{len(qs)}")
            # Ground truth after the timed loop, so the brute force does not disturb the timings.
            for (_target, _text, qvec), ids in zip(qs, vector_ids):
                exact = np.argpartition(-(vectors @ qvec), 10)[:10] + 1
                recall_hits += len(set(ids.tolist()) & set(exact.tolist()))
            db_bytes = sum(p.stat().st_size for p in Path(tmp).glob("perf.db*"))
        finally:
            store.close()
    return {
        "memories": memories, "queries": queries, "dims": dims, "recipe": recipe,
        "total_ms": _pcts(totals), "cpu_ms": _pcts(cpu),
        "stages_ms": {k: _pcts(v) for k, v in sorted(stage_ms.items()) if k != "embed"},
        "candidates_per_channel": {k: round(float(np.mean(v)), 1) for k, v in channel_counts.items()},
        "vector_recall_at_10": round(recall_hits / (10 * max(1, len(qs))), 4),
        "target_found_at_10": round(found / max(1, len(qs)), 4),
        "build_seconds": round(build_seconds, 2), "vector_load_seconds": round(load_seconds, 3),
        "db_bytes": db_bytes, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "note": "query embedding excluded (query vectors are given); BLAS threads as set by OPENBLAS_NUM_THREADS",
    }


def run_health_perf(memories: int = 100_000, *, dims: int = 384, workdir: str | None = None, keep: str | None = None,
                    progress: Callable[[float, str], None] | None = None) -> dict[str, Any]:
    """Build a synthetic store with provenance (SyntheticStore.build(provenance=True)), reopen it as
    the CLI would, and time every health check over it twice (first read, then warm caches)."""
    from ..health import run_checks
    from ..store.store import Store

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(keep) if keep else Path(tmp) / "health.db"
        if path.exists():
            from ..errors import BadInput

            raise BadInput(f"{path}: already exists; the synthetic store is only built into a new file")
        model = f"synthetic-{dims}"
        t0 = time.perf_counter()
        synth = SyntheticStore(path, memories, dims=dims)
        with Store(path) as store:
            synth.build(store, model, progress, provenance=True)
            store.set_meta("embedder", json.dumps({"dims": dims, "model": model, "provider": "synthetic"}, sort_keys=True))
        build_seconds = time.perf_counter() - t0
        runs = []
        for _ in range(2):
            with Store(path) as store:  # reopened: what `memlens health --db` does
                report = run_checks(store, synth.scope)
            runs.append(report)
        db_bytes = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    first, second = runs
    return {
        "memories": memories, "dims": dims, "build_seconds": round(build_seconds, 2),
        "seconds": {"first": round(first.seconds, 3), "second": round(second.seconds, 3)},
        "checks": {n: {"count": r.count, "seconds": round(r.seconds, 3), "note": r.note} for n, r in first.checks.items()},
        "planted_every": PLANT_EVERY, "db": str(path) if keep else None, "db_bytes": db_bytes,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
