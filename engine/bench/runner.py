"""The benchmark runner: isolated containers, the normal ingest and recall paths, gold metrics.

Each LoCoMo conversation, LongMemEval question or ConvoMem item is a container with its own
DB file (so parallel workers never contend for one writer), ingested with its original
timestamps through the normal importers and ingestion pipeline, then queried through the
normal recall pipeline with the chosen recipe, so every question has a stored trace. The run
itself (configuration, per-question items, summary) is stored in the main DB.

Retrieval metrics use the recipe's top k before the context budget (what the ranking
retrieved); the context budget is reported separately as context tokens.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import BadInput, Cancelled
from ..files import private_dir
from ..timeutil import now_iso
from . import containers
from . import datasets as ds
from .metrics import LEVELS, METRICS_VERSION, dedupe, percentiles
from .scoring import MEMLENS, lme_official_id, schemes_for, score_question, summarise_run
from .scoring import describe as describe_scoring
from .update_metrics import (
    KU_METRICS,
    UPDATE_METRICS,
    evidence_order,
    false_by_rule,
    misses_by_cause,
    score_update_question,
    summarise_extra,
)

if TYPE_CHECKING:
    import numpy as np

    from ..embed.base import Embedder
    from ..embed.cache import CachedEmbedder
    from ..llm import LLMClient
    from ..memory import MemoryEngine
    from ..retrieve.pipeline import RecallResult
    from ..scope import Scope

ShouldStop = Callable[[], bool]

DEFAULT_KS = (1, 3, 5, 10)
BENCH_SCOPE = ("bench", "bench")


def git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _locomo_containers(dataset: ds.LocomoDataset, raw: Any) -> list[dict[str, Any]]:
    by_sample = {c["sample_id"]: c for c in raw}
    return [{"container": conv.sample_id, "format": "locomo", "raw": [by_sample[conv.sample_id]], "questions": [{
        "question_id": q.question_id, "question": q.question, "category": q.category_name, "now": None,
        "excluded": q.category == 5,
        "answer": q.answer if q.answer is not None else "Not mentioned in the conversation.",
        "gold": {"turn": list(q.evidence), "session": sorted({e.split(":")[0] for e in q.evidence}),
                 "official": {"evidence": list(q.raw_evidence)}},
    } for q in dataset.questions if q.sample_id == conv.sample_id]} for conv in dataset.conversations]


def _lme_corpus(q: ds.LongMemEvalQuestion) -> list[list[str]]:
    """The official corpus of one question: its user turns, [memlens turn id, run_retrieval.py id]."""
    return [[turn.turn_id(s.session_id), lme_official_id(s.session_id, turn.index, turn.has_answer)]
            for s in q.sessions for turn in s.turns if turn.role == "user"]


def _longmemeval_containers(dataset: ds.LongMemEvalDataset, raw: Any) -> list[dict[str, Any]]:
    by_id = {q["question_id"]: q for q in raw}
    specs = []
    for q in dataset.questions:
        corpus = _lme_corpus(q)
        specs.append({"container": q.question_id, "format": "longmemeval", "raw": [by_id[q.question_id]],
                      "questions": [{
                          "question_id": q.question_id, "question": q.question, "category": q.question_type,
                          "now": q.question_date, "excluded": q.abstention, "answer": q.answer, "corpus": corpus,
                          "gold": {"turn": list(q.evidence_turn_ids), "session": list(q.answer_session_ids),
                                   "official": {"turn": [o for _, o in corpus if "answer" in o]}},
                          # the order of the old and the new value's evidence (update_metrics.evidence_order)
                          "session_dates": {s.session_id: s.date for s in q.sessions
                                            if s.session_id in q.answer_session_ids}
                          if q.question_type == "knowledge-update" else None,
                      }]})
    return specs


def _updates_containers(dataset: ds.UpdatesDataset, raw: Any) -> list[dict[str, Any]]:
    """memlens bench updates: a scenario's sessions as chat conversations, its questions with gold
    and stale turns; the category is "<split>:<question type>"."""
    return [{"container": sc.scenario_id, "format": "chat", "raw": [
        {"id": sess.session_id, "messages": [
            {"role": t.role, "content": t.text, "id": t.turn_id, "timestamp": sess.date} for t in sess.turns]}
        for sess in sc.sessions], "questions": [{
            "question_id": q.question_id, "question": q.question, "category": f"{sc.split}:{q.type}",
            "now": None, "as_of": q.as_of, "excluded": False, "answer": None, "update_type": q.type,
            "stale": list(q.stale),
            "gold": {"turn": list(q.gold), "session": sorted({g.split(":")[0] for g in q.gold})},
        } for q in sc.questions]} for sc in dataset.scenarios]


def limit_questions(specs: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """The first `limit` questions (None: all), taken a container at a time in file order."""
    if limit is None:
        return specs
    if limit < 1:
        raise BadInput("--limit must be at least 1")
    kept, n = [], 0
    for spec in specs:
        if n >= limit:
            break
        spec["questions"] = spec["questions"][: limit - n]
        n += len(spec["questions"])
        kept.append(spec)
    return kept


def _convomem_containers(dataset: ds.ConvoMemDataset, raw: Any) -> list[dict[str, Any]]:
    return [{"container": case.case_id, "format": "chat", "raw": [{"id": c.conversation_id, "messages": [
        {"role": "user", "name": m.speaker, "content": m.text, "id": m.message_id} for m in c.messages]}
        for c in case.conversations], "questions": [{
            "question_id": q.question_id, "question": q.question, "category": q.category, "now": None,
            "excluded": False, "answer": q.answer,
            "gold": {"turn": list(q.evidence), "session": list(q.evidence_sessions)}} for q in case.questions]}
        for case in dataset.cases]


# dataset name -> (loaded dataset, its raw JSON) -> one spec per container: the raw records the
# normal importer reads ("format"), and its questions with their gold ids (scoring.py reads them)
CONTAINERS: dict[str, Callable[[Any, Any], list[dict[str, Any]]]] = {
    "locomo": _locomo_containers,
    "longmemeval": _longmemeval_containers,
    "convomem": _convomem_containers,
    "updates": _updates_containers,
}


def containers_for(dataset: ds.Dataset, raw: Any) -> list[dict[str, Any]]:
    """One spec per container of a loaded dataset (CONTAINERS by its name)."""
    return CONTAINERS[dataset.name](dataset, raw)


def without_blind(dataset: ds.Dataset, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The specs but those of an updates file's blind part: a check read once, as aggregates, when
    nothing is left to choose (README). `bench updates` runs it only with --blind, `bench misses`
    likewise; `bench ablate` and `bench fit` never (a fold of it would vote in the others' choice)."""
    if not isinstance(dataset, ds.UpdatesDataset):
        return specs
    hidden = {sc.scenario_id for sc in dataset.scenarios if sc.split == "blind"}
    return [s for s in specs if s["container"] not in hidden]


_EMBEDDERS: dict[str, Embedder] = {}


def _embedder(name: str) -> Embedder:
    """One embedder per process and name: loading the ONNX model holds the GIL for a few hundred
    ms (a stall for the inspector's GUI thread) and is the same work for every container."""
    from ..embed import make_embedder

    if name not in _EMBEDDERS:
        _EMBEDDERS[name] = make_embedder(name)
    return _EMBEDDERS[name]


def _share_embedder(name: str, embedder: Embedder | None) -> None:
    """In-process runs use the calling engine's embedder when it is the model `name` builds, so
    the inspector does not load the same model a second time (its tokenizer alone holds the GIL
    for ~30 ms, a GUI stall) and keep two copies in memory."""
    from ..embed import make_embedder

    if name in _EMBEDDERS or embedder is None:
        return
    try:
        fresh = make_embedder(name)  # cheap: models load on first use
    except BadInput:
        return  # reported where the containers build theirs, as before
    same = (type(fresh) is type(embedder) and fresh.model == embedder.model and fresh.dims == embedder.dims
            and getattr(fresh, "model_dir", None) == getattr(embedder, "model_dir", None))
    _EMBEDDERS[name] = embedder if same else fresh


def _cached_embedder(spec: dict[str, Any]) -> CachedEmbedder:
    """The container's embedder behind the run's vector cache (containers.vector_cache_path):
    texts embedded by an earlier container or run are not embedded again. spec["fresh"] computes
    every vector anew (and stores it); spec["fresh_vectors"], a cache file of this run's own, then
    serves the texts this run has already computed (sessions repeated across haystacks). Without a
    usable cache it only counts what it embeds."""
    from ..embed.cache import CachedEmbedder

    emb = _embedder(spec["embedder"])
    if spec.get("fresh_vectors"):
        return CachedEmbedder(emb, containers.vector_cache(Path(spec["fresh_vectors"])))
    cache = containers.vector_cache(containers.vector_cache_path(Path(spec["cache"]))) if spec.get("cache") else None
    return CachedEmbedder(emb, cache, read=not spec.get("fresh"))


def _build_container(spec: dict[str, Any], db: Path) -> dict[str, int]:
    """Ingest a container's sources into a new DB at `db` through the normal importers; returns
    the texts embedded and those the vector cache served ({"embedded", "reused"})."""
    from ..ingest.formats import chat, locomo, longmemeval
    from ..memory import MemoryEngine
    from ..scope import Scope

    parse = {"locomo": locomo.parse_json, "longmemeval": longmemeval.parse_json, "chat": chat.parse_json}[spec["format"]]
    docs = parse(spec["raw"], name=spec["container"])
    emb = _cached_embedder(spec)
    with MemoryEngine(db, embedder=emb, llm=False, background_reembed=False) as engine:
        engine.ingest_documents(docs, scope=Scope.default(*BENCH_SCOPE), extract=spec["extract"])
    containers.settle(db)
    return emb.stats.as_dict()


class Opened(NamedTuple):
    reused: bool  # a cached build was copied
    vectors: dict[str, int] | None  # for a new build: {"embedded", "reused"} texts


def open_container(spec: dict[str, Any]) -> Opened:
    """Put the container's DB at spec["db"]: a private copy of the cached build when one exists
    for exactly these sources, embedder, extraction and ingestion code (containers.py), else a
    fresh build (then cached, unless spec["cache"] is None; spec["fresh"] rebuilds)."""
    db = Path(spec["db"])
    containers.discard(db)
    cache = Path(spec["cache"]) if spec.get("cache") else None
    if cache is None:
        return Opened(False, _build_container(spec, db))
    emb = _embedder(spec["embedder"])
    key = containers.container_key(spec, embedder_model=emb.model, embedder_dims=emb.dims)
    hit = None if spec.get("fresh") else containers.cached(cache, key)
    reused = hit is not None
    vectors = None
    if hit is None:
        building = containers.build_path(cache, key)
        try:
            vectors = _build_container(spec, building)
            hit = containers.store_built(cache, key, building)
        finally:
            containers.discard(building)
    containers.private_copy(hit, db)
    return Opened(reused, vectors)


@contextmanager
def container_engine(spec: dict[str, Any], questions: Sequence[Mapping[str, Any]]
                     ) -> Iterator[tuple[MemoryEngine, Scope, np.ndarray | list[Any]]]:
    """A worker's side of one container for the harnesses that recall many variants (ablate,
    fit, misses): the container opened, an offline engine over it and the questions' vectors.
    The engine embeds through the run's vector cache as run_container's does, so the clause
    vectors recall computes are the ones a `bench` run of the same file reads."""
    from ..memory import MemoryEngine
    from ..scope import Scope

    open_container(spec)
    emb = _cached_embedder(spec)
    with MemoryEngine(spec["db"], embedder=emb, llm=False, background_reembed=False) as engine:
        vectors: np.ndarray | list[Any] = emb.embed([q["question"] for q in questions], kind="query") if questions else []
        yield engine, Scope.default(*BENCH_SCOPE), vectors


def turn_ranking(engine: MemoryEngine, scope: Scope, order: list[int]) -> list[str]:
    """A ranking of memories (best first) as the distinct message ids they cite, best first: what
    every scoring scheme reads. The whole ranking, not only the top k memories: a level's top k is
    its first k distinct ids, and k sessions may need more than k turns (LongMemEval's
    turn-to-session evaluation widens k the same way). Candidates never proposed rank nowhere."""
    msgs = engine.store.message_ids(scope, order)
    return dedupe(m for mid in order for m in msgs.get(mid, []))


def question_metrics(engine: MemoryEngine, scope: Scope, fmt: str, order: list[int], gold: dict[str, Any], ks: list[int],
                     ranking: list[str] | None = None) -> dict[str, float]:
    """memlens's metrics of one ranking at every level that has gold ids (ablation and weight
    fitting read ours; `fmt` is kept for their calls). `ranking`: its turn ids, when known."""
    return MEMLENS.score({"gold": gold}, turn_ranking(engine, scope, order) if ranking is None else ranking, ks)


@contextmanager
def timed_recalls() -> Iterator[Callable[[], None]]:
    """What a harness calls before each timed recall (`settle()`): gc.freeze, so that no full
    collection walks the results kept so far inside a recall (such a pass landed, up to 48 ms, in
    whichever recall it fell in: LoCoMo dev, 15 passes; tests.perf.recall_split). Everything goes
    back to the collector when the block ends, however it ends. In a process where something was
    frozen before (the inspector's start-up objects, app.gui.settle_gc), `settle()` does nothing:
    a thaw would hand those back to the full passes that stalled its window, and a freeze without
    a thaw would keep the cyclic garbage pending at each question for the life of the process."""
    if gc.get_freeze_count() > 0:
        yield lambda: None
        return
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()


def run_container(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Open one container (built, or reused from the cache) and answer its questions. Runs in a
    worker process."""
    from ..memory import MemoryEngine
    from ..scope import Scope

    scope = Scope.default(*BENCH_SCOPE)
    db = Path(spec["db"])
    try:
        opened = open_container(spec)
    except Exception as exc:  # a container that cannot be built fails its questions, not the run
        return [{"container": spec["container"], "question_id": q["question_id"], "question": q["question"],
                 "category": q["category"], "gold": q["gold"], "status": "failed",
                 "error": f"building the container: {exc.__class__.__name__}: {exc}"} for q in spec["questions"]]
    items: list[dict[str, Any]] = []
    ks = spec["ks"]
    qa_client = None
    if spec.get("qa"):
        from ..llm import LLMClient, LLMConfig

        qa_client = LLMClient(LLMConfig(**spec["qa"]))
    # Recall embeds too (the current-truth stage's clauses): through the run's vector cache, so
    # a second run of the file reads the vectors the first computed, as it does the questions'.
    emb = _cached_embedder(spec)
    with MemoryEngine(db, embedder=emb, llm=False, background_reembed=False) as engine, timed_recalls() as settle:
        if qa_client is not None:  # answer and judge calls go into the container's llm_calls
            qa_client.recorder = engine.store.llm_recorder(scope)
        # The vector index is read as the container opens, timed apart (index_load_cpu_ms), as
        # memlens perf loads it before its first question: recall_cpu_ms is a recall's own work,
        # where LongMemEval's one-question containers otherwise carried the load in every figure.
        c0 = time.thread_time()
        engine.vectors(scope).refresh()
        load_cpu = (time.thread_time() - c0) * 1000.0
        for q in spec["questions"]:
            # The question's vector first, timed on its own (PERF.md: the query embedding is the
            # largest single cost of a local recall; it is reported apart from the local stages),
            # from the vector cache when an earlier run embedded the same question.
            before = emb.stats.embedded
            t0 = time.perf_counter()
            try:
                qvec = emb.embed([q["question"]], kind="query")[0]
                embed_ms: float | None = (time.perf_counter() - t0) * 1000.0
                if emb.stats.embedded == before:
                    embed_ms = None  # served by the cache: no embedding was measured
                settle()  # no full collection inside the timed recall (timed_recalls)
                t0, c0 = time.perf_counter(), time.thread_time()
                res = engine.recall(q["question"], scope=scope, k=max(ks), recipe=spec["recipe"], origin="bench",
                                    now=q["now"], as_of=q.get("as_of"), query_vector=qvec,
                                    off=tuple(spec.get("off") or ()), **(spec.get("set") or {}))
            except Exception as exc:  # a failed question is recorded, never aborts the run
                items.append({"container": spec["container"], "question_id": q["question_id"],
                              "question": q["question"], "category": q["category"], "gold": q["gold"],
                              "status": "failed", "error": f"{exc.__class__.__name__}: {exc}"})
                continue
            latency = (time.perf_counter() - t0) * 1000.0
            cpu = (time.thread_time() - c0) * 1000.0  # a shared machine inflates the wall time, not this
            ranking = turn_ranking(engine, scope, res.ordered_ids)
            scores = score_question(spec["dataset"], q, ranking, ks)
            msgs = engine.store.message_ids(scope, res.ranked_ids)
            truth = truth_metrics(engine, scope, q, res, ranking)
            item = {
                "container": spec["container"], "question_id": q["question_id"], "question": q["question"],
                "category": q["category"], "gold": q["gold"], "excluded": q["excluded"],
                "retrieved": [{"memory_id": mid, "message_ids": msgs.get(mid, [])} for mid in res.ranked_ids],
                "metrics": dict(scores[spec["scoring"]]) | truth, "scores": scores, "ranking": ranking,
                "latency_ms": round(latency, 3), "context_tokens": res.context_tokens,
                "trace_id": res.trace.id, "trace_db": str(db), "status": "done", "reused": opened.reused,
                "query_embed_ms": None if embed_ms is None else round(embed_ms, 3), "recall_cpu_ms": round(cpu, 3),
            }
            if qa_client is not None:
                _answer_and_judge(qa_client, q, res.context_text, item)
            items.append(item)
    if qa_client is not None:
        qa_client.close()
    if emb.cache is not None and spec.get("fresh_vectors"):
        emb.cache.checkpoint()  # the run folds this file into the shared cache when it ends
    if items and opened.vectors is not None:
        items[0]["vectors"] = opened.vectors  # the container's, once
    if items:
        items[0]["index_load_cpu_ms"] = round(load_cpu, 3)
    return items


def truth_metrics(engine: MemoryEngine, scope: Scope, q: dict[str, Any], res: RecallResult,
                  ranking: list[str]) -> dict[str, float]:
    """Current truth (update_metrics) of one answered question, beside the scheme's metrics: the
    updates benchmark's, or LongMemEval knowledge-update evidence order; {} for other questions."""
    truth: dict[str, float] = {}
    if q.get("update_type"):
        truth.update(score_update_question(q["update_type"], ranking, q["gold"]["turn"], q["stale"],
                                           _outdated_turns(engine, scope, res), res.trace.k))
    if q.get("session_dates") and not q["excluded"]:
        truth.update(evidence_order(q["question"], ranking, q["gold"]["turn"], q["session_dates"],
                                    lambda t: t.rsplit(":", 1)[0]))  # "<session id>:<turn>"
    return truth


def _outdated_turns(engine: MemoryEngine, scope: Scope, res: RecallResult) -> list[tuple[list[str], list[str], str]]:
    """(turn ids of each memory the recall treated as replaced, turn ids of what replaced it, the
    rule that did)."""
    marks = res.trace.params.get("outdated") or {}
    if not marks:
        return []
    mids = {int(m) for m in marks} | {int(v["by"]) for v in marks.values() if v.get("by") is not None}
    msgs = engine.store.message_ids(scope, sorted(mids))
    return [(msgs.get(int(m), []), msgs.get(int(v["by"]), []) if v.get("by") is not None else [], v.get("rule") or "")
            for m, v in marks.items()]


def _answer_and_judge(llm: LLMClient, q: dict[str, Any], context: str, item: dict[str, Any]) -> None:
    """One answer from the context block, then one judgement against the gold answer."""
    from ..prompts import qa_v1

    given = qa_v1.answer(llm, q["question"], context, q["now"])
    item["answer"] = given["answer"] if given["ok"] else None
    if not given["ok"]:
        item["judge"] = json.dumps({"ok": False, "error": f"answer failed: {given['error']}"})
        return
    verdict = qa_v1.judge(llm, q["question"], str(q.get("answer")), given["answer"])
    item["judge"] = json.dumps(verdict)
    if verdict["ok"]:
        item["metrics"]["qa_correct"] = 1.0 if verdict["correct"] else 0.0


def run_benchmark(engine: MemoryEngine, dataset: str, data_path: str | os.PathLike[str], *,
                  k_values: Sequence[int] = DEFAULT_KS,
                  limit: int | None = None, recipe: str = "default", workers: int = 1, embedder: str | None = None,
                  extract: str = "none", executor: str | None = None, resume_run: int | None = None,
                  qa: bool = False, fresh: bool = False, off: tuple[str, ...] | list[str] = (),
                  on: tuple[str, ...] | list[str] = (), progress: Callable[[float, str], None] | None = None,
                  should_stop: Callable[[], bool] | None = None, blind: bool = False,
                  settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run (or resume) a benchmark; store it in engine's DB; return the `bench --json` document.
    blind: for an updates file, also run its blind part (left out by default: it is a check read
    once, as aggregates, and figures printed on every run would be read while tuning).
    settings: Recipe fields changed for every recall of the run (recipes.parse_settings, the CLI's
    --set), recorded in the run's config; the containers are the same whatever they are."""
    from ..retrieve.recipes import switched_off
    from ..store import bench as bench_sql

    path = Path(data_path)
    if not path.exists():
        raise BadInput(f"{path}: no such dataset file or folder")
    ks = sorted({int(k) for k in k_values})
    if not ks or ks[0] < 1:
        raise BadInput("--k needs positive integers, e.g. 1,3,5,10")
    if workers < 1:
        raise BadInput("--workers must be at least 1")
    # `off`: features off besides those the recipe leaves off; `on`: ones it leaves off, taken back.
    # The run records, and every recall gets, the whole list (unknown recipe or feature -> BadInput first).
    off = switched_off(recipe, off, on)
    loaded, raw = ds.read_dataset(path)
    if loaded.name != dataset:
        raise BadInput(f"{path}: this is a {loaded.name} file, not {dataset}")
    specs = containers_for(loaded, raw)
    prior: dict[str, Any] | None = None
    if resume_run is not None:  # read once: what the run started with decides what is left to run
        prior = bench_sql.run(engine.store, resume_run)
        if prior is None:
            raise BadInput(f"no benchmark run {resume_run}")
        if prior["sha256"] != loaded.sha256:
            raise BadInput(f"run {resume_run} used a different file (sha256 {prior['sha256'][:12]}...)")
        # finish it as it started (a run from before --blind ran the blind part)
        blind = bool((prior.get("config") or {}).get("blind", True))
    if not blind:
        specs = without_blind(loaded, specs)
    scoring = describe_scoring(dataset)
    specs = limit_questions(specs, limit)
    emb_name = embedder or os.environ.get("MEMLENS_EMBEDDER") or "local"
    if workers == 1 and executor in (None, "processes"):
        _share_embedder(emb_name, getattr(engine, "embedder", None))
    store = engine.store
    qa_config = None
    models: dict[str, str] = {}
    prompt_hashes: dict[str, str] = {}
    if qa:
        from ..prompts import qa_v1

        llm = engine.llm
        if llm is None:
            raise BadInput("--answer needs an endpoint: set MEMLENS_LLM_BASE_URL (and models for ANSWER and JUDGE)")
        c = llm.config
        qa_config = {"base_url": c.base_url, "api_key": c.api_key, "model": c.model, "task_models": dict(c.task_models),
                     "timeout": c.timeout, "max_retries": c.max_retries, "first_call_timeout": c.first_call_timeout}
        models = {"answer": c.model_for("ANSWER"), "judge": c.model_for("JUDGE")}
        prompt_hashes = qa_v1.prompt_hashes()
    if resume_run is not None and prior is not None:  # resuming (read and checked above; both set together)
        version = (prior.get("config") or {}).get("metrics_version", 1)
        if version != METRICS_VERSION:
            raise BadInput(f"run {resume_run} was scored with metric definitions {version}, this memlens uses "
                           f"{METRICS_VERSION}: start a new run")
        run_id = resume_run
        off = list((prior.get("config") or {}).get("off") or [])  # finish it as it started
        settings = dict((prior.get("config") or {}).get("set") or {})
        done = bench_sql.done_question_ids(store, run_id)
        specs = [s for s in specs if not all(q["question_id"] in done for q in s["questions"])]
    else:
        config = {"dataset": dataset, "data_path": str(path), "k": ks, "limit": limit, "recipe": recipe, "off": off,
                  "workers": workers, "embedder": emb_name, "extract": extract, "executor": executor or "processes",
                  "levels": list(LEVELS), "metrics_version": METRICS_VERSION, "scoring": scoring,
                  "quirks": loaded.quirks.as_dict()}
        if isinstance(loaded, ds.UpdatesDataset):
            config["blind"] = blind
        if settings:
            config["set"] = dict(settings)
        if qa:
            from ..prompts import qa_v1

            config["qa_prompts"] = {"version": qa_v1.VERSION, "answer": qa_v1.ANSWER_SYSTEM, "judge": qa_v1.JUDGE_SYSTEM}
        run_id = bench_sql.create_run(
            store, dataset=dataset, data_path=str(path), sha256=loaded.sha256,
            split=path.stem if path.is_file() else path.name, recipe=recipe, k_values=ks, embedder=emb_name,
            models=models, prompt_hashes=prompt_hashes, git_commit=git_commit(), config=config, started_at=now_iso())
    run_dir = Path(str(engine.path) + ".bench") / f"run-{run_id}"
    private_dir(run_dir)  # containers hold the benchmark conversations: 0700, each .db 0600
    cache = containers.cache_dir_for(engine.path)
    # --fresh reads no vector computed before the run, but does read those the run computes: its own
    # cache file, folded into the shared one when the run ends (a later run then reuses them).
    fresh_vectors = run_dir / "fresh-vectors.db" if fresh else None
    for spec in specs:
        spec.update({"db": str(run_dir / f"{hashlib.sha1(spec['container'].encode()).hexdigest()[:12]}.db"),
                     "ks": ks, "recipe": recipe, "set": dict(settings or {}), "embedder": emb_name, "extract": extract,
                     "qa": qa_config,
                     "cache": str(cache), "fresh": fresh, "off": off, "dataset": dataset,
                     "scoring": scoring["default"], "fresh_vectors": None if fresh_vectors is None else str(fresh_vectors)})
    total = max(1, len(specs))
    status = "done"
    built = {"built": 0, "reused": 0}
    vectors = {"embedded": 0, "reused": 0}
    embed_ms: list[float] = []
    cpu_ms: list[float] = []  # the recalls' CPU time, of the questions answered in this process's run
    load_ms: list[float] = []  # each container's vector index load (CPU), before its first question
    try:
        for i, items in enumerate(execute(specs, workers, executor, should_stop)):
            if items:
                built["reused" if items[0].get("reused") else "built"] += 1
                for key, n in (items[0].get("vectors") or {}).items():
                    vectors[key] += n
                embed_ms += [it["query_embed_ms"] for it in items if it.get("query_embed_ms") is not None]
                cpu_ms += [it["recall_cpu_ms"] for it in items if it.get("recall_cpu_ms") is not None]
                if items[0].get("index_load_cpu_ms") is not None:
                    load_ms.append(items[0]["index_load_cpu_ms"])
            bench_sql.add_items(store, run_id, items)
            if progress is not None:
                progress((i + 1) / total, f"{items[0]['container'] if items else ''}: {i + 1}/{total} containers")
    except Cancelled:
        status = "cancelled"
    finally:
        if fresh_vectors is not None:
            containers.fold_vector_cache(fresh_vectors, containers.vector_cache_path(cache))
    all_items = bench_sql.items(store, run_id)
    summary = _summarise(dataset, all_items, ks, loaded)
    failures = sum(1 for it in all_items if it["status"] == "failed")
    default = summary["scores"][summary["scoring"]]
    bench_sql.finish_run(store, run_id, status=status, sample_count=len(all_items), failures=failures,
                         metrics=default["metrics"], by_category=default["by_category"],
                         latency_ms=summary["latency_ms"], context_tokens=summary["context_tokens"],
                         scores=summary["scores"], finished_at=now_iso())
    return {"run_id": run_id, "dataset": dataset, "sha256": loaded.sha256, "status": status,
            "questions": len(all_items), "failures": failures, "containers": built,
            "metrics": default["metrics"], "by_category": default["by_category"], "counts": default["counts"], **summary,
            # texts of the containers built in this run: embedded by the model, or served by the vector cache
            "vectors": vectors,
            # questions whose vector the model computed in this run (the rest came from the cache)
            "query_embed_ms": {"embedded": len(embed_ms), **(percentiles(embed_ms, (50, 95, 99)) if embed_ms else {})},
            # latency_ms is wall time; this is the recall thread's CPU time, which other work on the machine does not inflate
            "recall_cpu_ms": percentiles(cpu_ms, (50, 95, 99)) if cpu_ms else {},
            # each container's vector index, read as it opened (not in recall_cpu_ms)
            "index_load_cpu_ms": {"containers": len(load_ms), **(percentiles(load_ms, (50, 95, 99)) if load_ms else {})},
            "labels": {name: s["label"] for name, s in scoring["schemes"].items()},
            "definitions": {name: s["definitions"] for name, s in scoring["schemes"].items()}}


def _summarise(dataset: str, items: list[dict[str, Any]], ks: list[int],
               loaded: ds.Dataset | None = None) -> dict[str, Any]:
    """Every scheme's summary of the done questions, the default scheme's name, latency and tokens."""
    done = [{**it, "excluded": excluded(it)} for it in items if it["status"] == "done"]
    scores = summarise_run(dataset, done, ks)
    by_rule, misses = _add_current_truth(scores, done, loaded)
    judged = [it for it in done if "qa_correct" in (it["metrics"] or {})]
    if judged:  # single-answer QA accuracy (ours under any scheme; abstentions included: declining is correct)
        for summary in scores.values():
            summary["metrics"]["qa_accuracy"] = sum(it["metrics"]["qa_correct"] for it in judged) / len(judged)
            for cat in {it["category"] for it in judged}:
                group = [it["metrics"]["qa_correct"] for it in judged if it["category"] == cat]
                summary["by_category"].setdefault(str(cat), {})["qa_accuracy"] = sum(group) / len(group)
    lat = [it["latency_ms"] for it in done if it["latency_ms"] is not None]
    tokens = [it["context_tokens"] for it in done if it["context_tokens"] is not None]
    return {"scoring": schemes_for(dataset)[0].name, "scores": scores,
            # current truth: how many questions each rule falsely superseded in, overall ("all") and per group
            **({"false_supersessions_by_rule": by_rule} if by_rule else {}),
            # ... and how many current and keep questions missed first@1 for each cause (update_metrics.MISS_CAUSES)
            **({"misses_by_cause": misses} if misses else {}),
            "latency_ms": percentiles(lat, (50, 95, 99)) if lat else {},
            "context_tokens": {"mean": round(sum(tokens) / len(tokens), 1) if tokens else None,
                               "p95": percentiles(tokens, (95,)).get("p95") if tokens else None}}


def _add_current_truth(scores: dict[str, Any], done: list[dict[str, Any]], loaded: ds.Dataset | None
                       ) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """Current truth (update_metrics) in every scheme's summary, as qa_accuracy is: overall, per
    category, and for memlens bench updates per part ("dev", "heldout", "blind"), per part and scenario
    kind ("heldout:plan") and per dev batch ("dev:tidy", every "dev:w<N>" and its halves "dev:w<N>a", "dev:w<N>b";
    "dev:half_a" is all of "-w2" with "dev:w3a", the natural talk issue 15's mechanisms round
    develops on, "dev:half_b" is "dev:w3b": ds.dev_groups). Returns the questions each rule
    falsely superseded in and the misses of first@1 by cause, by the same groups
    (update_metrics.false_by_rule, misses_by_cause)."""
    kind_of = {sc.scenario_id: sc.kind for sc in loaded.scenarios} if isinstance(loaded, ds.UpdatesDataset) else {}
    batch_of = loaded.dev_batches() if isinstance(loaded, ds.UpdatesDataset) else {}

    def groups(it: Mapping[str, Any]) -> list[str]:
        out = [str(it["category"])]
        if it["container"] in kind_of:
            split = str(it["category"]).split(":")[0]
            out += [split, f"{split}:{kind_of[it['container']]}"]
        batch = batch_of.get(it["container"])
        if batch:
            out += ds.dev_groups(batch)
        return out

    counted = [it for it in done if not it["excluded"]]
    extra = summarise_extra(counted, (*UPDATE_METRICS, *KU_METRICS), groups)
    if not extra["metrics"]:
        return {}, {}
    by_rule = false_by_rule(counted, groups)
    misses = misses_by_cause(counted, groups)
    for summary in scores.values():
        summary["metrics"].update(extra["metrics"])
        for group, vals in extra["by_category"].items():
            summary["by_category"].setdefault(group, {}).update(vals)
        if by_rule:  # stored with the run's scores: bench report and the dashboard read it back
            summary["false_supersessions_by_rule"] = by_rule
        if misses:
            summary["misses_by_cause"] = misses
    return by_rule, misses


def excluded(item: dict[str, Any]) -> bool:
    """Whether our scheme leaves the question out of its means. Stored items do not carry the flag;
    the category says it (LoCoMo adversarial, LongMemEval _abs ids)."""
    return bool(item.get("excluded") or item.get("category") == "adversarial" or str(item["question_id"]).endswith("_abs"))


def tuned_on(item: dict[str, Any]) -> bool:
    """Whether `bench fit` and `bench ablate` weigh this question: every question the benchmark's
    own scoring counts. LoCoMo's official aggregate counts its adversarial questions (they name
    the wrong person; their evidence says who it was), so weights fitted without them traded the
    whole category away (official recall@10 0.831 -> 0.751 while ours stayed 0.810); LongMemEval's
    abstention questions have no evidence to find."""
    return not excluded(item) or item.get("category") == "adversarial"


def execute(specs: list[dict[str, Any]], workers: int, executor: str | None, should_stop: ShouldStop | None,
            fn: Callable[[dict[str, Any]], Any] = run_container) -> Iterator[Any]:
    """Run `fn` (a module-level function, so worker processes can import it) on every spec,
    yielding each result as it completes."""
    if executor and executor.startswith("dask://"):
        yield from _execute_dask(specs, executor[len("dask://"):], should_stop, fn)
        return
    if executor not in (None, "processes"):
        raise BadInput(f"unknown executor {executor!r} (processes or dask://HOST:PORT)")
    if workers == 1:
        for spec in specs:  # in this process: _embedder() may hand out the calling engine's model
            if should_stop is not None and should_stop():
                raise Cancelled("benchmark cancelled")
            yield fn(spec)
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(fn, spec) for spec in specs]
        try:
            for fut in as_completed(futures):
                if should_stop is not None and should_stop():
                    for f in futures:
                        f.cancel()
                    raise Cancelled("benchmark cancelled")
                yield fut.result()
        finally:
            for f in futures:
                f.cancel()


def _execute_dask(specs: list[dict[str, Any]], address: str, should_stop: ShouldStop | None,
                  fn: Callable[[dict[str, Any]], Any] = run_container) -> Iterator[Any]:
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise BadInput("--executor dask:// needs the 'dask' extra: pip install 'memlens[dask]'") from None
    client = Client(address, timeout="10s")  # type: ignore[no-untyped-call]  # distributed is untyped
    try:
        futures = client.map(fn, specs, pure=False)
        for fut in dask_completed(futures):  # type: ignore[no-untyped-call]
            if should_stop is not None and should_stop():
                client.cancel(futures)  # type: ignore[no-untyped-call]
                raise Cancelled("benchmark cancelled")
            yield fut.result()
    finally:
        client.close()  # type: ignore[no-untyped-call]


_SETUP = (("dataset", "dataset"), ("sha256", "file sha256"), ("split", "split"), ("recipe", "recipe"),
          ("k_values", "k"), ("embedder", "embedder"), ("extract", "extraction"), ("limit", "question limit"),
          ("models", "models"), ("prompt_hashes", "prompts"), ("metrics_version", "metric definitions"),
          ("off", "features off"), ("set", "recipe settings"), ("scoring", "default scoring"), ("git_commit", "commit"))


def run_scoring(run: dict[str, Any]) -> dict[str, Any]:
    """The scoring a stored run recorded (scoring.describe); a run from before schemes existed
    (metric definitions 1 and 2) was scored by memlens's metrics only, under the version it recorded."""
    cfg = run.get("config") or {}
    if cfg.get("scoring"):
        scoring: dict[str, Any] = cfg["scoring"]
        return scoring
    version = cfg.get("metrics_version", 1)
    return {"default": "memlens", "schemes": {"memlens": {
        "label": f"memlens (ours), metric definitions {version}: recorded before definitions were stored",
        "official": False, "definitions": {}, "notes": []}}}


def _counts_text(by: Mapping[str, Mapping[str, int]]) -> str:
    parts = [g for g in ds.UPDATE_SPLITS if g in by]
    return ", ".join(f"{name} {n}" + (" (" + ", ".join(f"{g} {by[g][name]}" for g in parts if name in by[g])
                                       + ")" if parts else "")
                     for name, n in (by.get("all") or {}).items())


def false_rules_text(summary: Mapping[str, Any]) -> str:
    """"restated_later 12 (dev 12)": the questions each rule falsely superseded in, over the run
    and per part of an updates file; "" when none (or a run from before they were counted)."""
    return _counts_text(summary.get("false_supersessions_by_rule") or {})


def misses_text(summary: Mapping[str, Any]) -> str:
    """"unordered 9 (dev 6, heldout 3), beyond_k 2 (dev 2)": current and keep questions that missed
    first@1, by cause (update_metrics.MISS_CAUSES), over the run and per part; "" when none."""
    return _counts_text(summary.get("misses_by_cause") or {})


def run_scores(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A stored run's summaries by scheme name: {"metrics", "by_category", "counts"?}."""
    if run.get("scores"):
        scores: dict[str, dict[str, Any]] = run["scores"]
        return scores
    return {run_scoring(run)["default"]: {"metrics": run.get("metrics") or {},
                                          "by_category": run.get("by_category") or {}}}


def setup_differences(run: dict[str, Any], other: dict[str, Any]) -> list[dict[str, Any]]:
    """What two runs did differently, beside the code under test: a delta between runs that used
    different data, extraction, models or metric definitions says nothing about retrieval.
    [{"field", "label", "run", "other"}]"""
    def value(r: dict[str, Any], key: str) -> Any:
        cfg = r.get("config") or {}
        if key == "metrics_version":
            return cfg.get(key, 1)  # runs from before the version was recorded used the first
        if key == "off":
            return cfg.get(key) or []
        if key == "set":
            return cfg.get(key) or {}
        if key == "scoring":
            return run_scoring(r)["default"]
        return cfg.get(key) if key in ("extract", "limit") else r.get(key)

    return [{"field": key, "label": label, "run": value(run, key), "other": value(other, key)}
            for key, label in _SETUP if value(run, key) != value(other, key)]


def describe_differences(diffs: list[dict[str, Any]]) -> str:
    """One line: "extraction heuristic vs none; commit 9bd9ad8bb6c7 vs 2c92f2c0e1a3"."""
    def show(field: str, v: Any) -> str:
        if v is None or v == {} or v == []:
            return "none" if field in ("extract", "limit", "off") else "-"
        if field in ("git_commit", "sha256"):
            return str(v)[:12]
        return ",".join(map(str, v)) if isinstance(v, list) else str(v)
    return "; ".join(f"{d['label']} {show(d['field'], d['run'])} vs {show(d['field'], d['other'])}" for d in diffs)


def _delta(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float | None]:
    return {k: (None if v is None or b.get(k) is None else round(v - b[k], 4)) for k, v in a.items()}


def report(engine: MemoryEngine, run_id: int, against: int | None = None) -> dict[str, Any]:
    """A stored run (and its delta against another, scheme by scheme) as JSON, plus Markdown text."""
    from ..store import bench as bench_sql

    run = bench_sql.run(engine.store, run_id)
    if run is None:
        raise BadInput(f"no benchmark run {run_id}")
    out: dict[str, Any] = {"run": run, "scoring": run_scoring(run), "scores": run_scores(run)}
    other = None
    if against is not None:
        other = bench_sql.run(engine.store, against)
        if other is None:
            raise BadInput(f"no benchmark run {against}")
        out["against"] = other
        out["setup_differences"] = setup_differences(run, other)
        mine, theirs = run_scores(run), run_scores(other)
        out["delta"] = _delta(run["metrics"] or {}, other["metrics"] or {})
        out["delta_by_category"] = {cat: _delta(vals, (other["by_category"] or {}).get(cat, {}))
                                    for cat, vals in (run["by_category"] or {}).items()}
        out["delta_scores"] = {name: _delta(mine[name]["metrics"], theirs[name]["metrics"])
                               for name in mine if name in theirs}
    out["markdown"] = _markdown(run, other, out.get("setup_differences"))
    return out


def _fmt(value: Any, places: int = 4) -> str:
    return "not scored" if value is None else f"{value:.{places}f}"


def score_rows(scores: dict[str, dict[str, Any]], order: list[str]) -> list[tuple[str, list[Any]]]:
    """(metric key, [value per scheme in `order`, or "" where the scheme has no such metric]) for
    every key any scheme has, the default scheme's keys first."""
    keys = list(dict.fromkeys(k for name in order for k in (scores.get(name) or {}).get("metrics", {})))
    return [(k, [(scores[name]["metrics"][k] if k in scores[name]["metrics"] else "") for name in order])
            for k in keys]


def _markdown(run: dict[str, Any], other: dict[str, Any] | None, diffs: list[dict[str, Any]] | None = None) -> str:
    extract = (run.get("config") or {}).get("extract") or "none"
    scoring, scores = run_scoring(run), run_scores(run)
    order = [scoring["default"], *(n for n in scores if n != scoring["default"])]
    theirs = run_scores(other) if other else {}
    base = scoring["default"]
    lines = [f"# Benchmark run {run['id']}: {run['dataset']} ({run['split']})", "",
             f"- file sha256 `{run['sha256']}`", f"- recipe `{run['recipe']}`, k {run['k_values']}, embedder "
             f"`{run['embedder']}`, extraction `{extract}`, commit `{(run['git_commit'] or 'unknown')[:12]}`",
             f"- {run['sample_count']} questions, {run['failures']} failed, status {run['status']}",
             *(f"- scoring `{name}`{' (default)' if name == base else ''}: "
               f"{(scoring['schemes'].get(name) or {}).get('label', name)}" for name in order),
             f"- latency ms {run['latency_ms']}", f"- context tokens {run['context_tokens']}",
             *([f"- false supersessions by rule (questions): {false_rules_text(scores[base])}"]
               if false_rules_text(scores.get(base) or {}) else []),
             *([f"- current and keep misses of first@1 by cause (questions): {misses_text(scores[base])}"]
               if misses_text(scores.get(base) or {}) else []),
             *([f"- compared with run {other['id']}, which differs in: {describe_differences(diffs)}"] if other and diffs
               else [f"- compared with run {other['id']}, same setup"] if other else []), "",
             "| metric | " + " | ".join(order) + " |" + (f" run {other['id']} {base} | delta |" if other else ""),
             "|---|" + "---|" * len(order) + ("---|---|" if other else "")]
    for key, values in score_rows(scores, order):
        row = f"| {key} | " + " | ".join("–" if v == "" else _fmt(v) for v in values) + " |"
        if other:
            mine = scores[base]["metrics"].get(key)
            ov = (theirs.get(base) or {}).get("metrics", {}).get(key)
            d = None if mine is None or ov is None else mine - ov
            row += f" {'' if ov is None else _fmt(ov)} | {'' if d is None else f'{d:+.4f}'} |"
        lines.append(row)
    for name in order:
        summary, recorded = scores[name], scoring["schemes"].get(name) or {}
        lines += ["", f"## {name}: by category", ""]
        for cat, vals in sorted((summary.get("by_category") or {}).items()):
            main = {k: v for k, v in vals.items() if k.endswith("@10") or k.endswith("@5")}
            lines.append(f"- **{cat}**: " + ", ".join(f"{k} {_fmt(v, 3)}" for k, v in sorted(main.items())))
        if summary.get("counts"):
            lines.append(f"- counts: {json.dumps(summary['counts'], sort_keys=True)}")
        if recorded.get("definitions"):
            lines += ["", f"## {name}: definitions", ""]
            lines += [f"- `{k}`: {v}" for k, v in recorded["definitions"].items()]
            lines += [f"- {note}" for note in recorded.get("notes") or []]
    return "\n".join(lines) + "\n"
