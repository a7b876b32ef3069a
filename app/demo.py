"""The demo database: built on first run from resources/demo with the local embedder and the
heuristic extractor, plus the operator-curated facts file and one benchmark run.

Everything goes through the normal paths (importers, ingestion, extraction, grounding,
reconciliation, the benchmark runner), so the demo shows exactly what memlens does with
real input.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from engine.consolidate import consolidate
from engine.errors import BadInput
from engine.extract.model import Candidate, SourceChunk
from engine.memory import MemoryEngine, parse_sources
from engine.paths import resources_dir
from engine.scope import Scope

DEMO_SCOPE = Scope.default("ana", "assistant")


def demo_dir() -> Path:
    return resources_dir() / "demo"


def _curated(engine: MemoryEngine, corpus: Path) -> int:
    """Ground each curated fact in the chunk that holds its quote and reconcile it."""
    pairs: list[tuple[SourceChunk, Candidate]] = []
    docs = [d for d in engine.export(DEMO_SCOPE)["documents"] if not d["replaced_at"]]
    for item in json.loads((corpus / "curated-facts.json").read_text(encoding="utf-8")):
        uri = str((corpus / item["source"]).resolve())
        found = [(d, c) for d in docs if d["uri"] == uri
                 for c in engine.store.chunks_of(DEMO_SCOPE, d["id"]) if item["quote"] in c.text]
        if not found:
            raise BadInput(f"curated fact quote not found in {item['source']}: {item['quote']!r}")
        doc, chunk = found[0]
        view = SourceChunk(chunk.id, doc["id"], chunk.text, chunk.start, chunk.end, chunk.speaker, chunk.role,
                           chunk.trust, chunk.source_time or doc["source_time"], doc["source_type"])
        pairs.append((view, Candidate(
            text=item["text"], subject=item["subject"], predicate=item["predicate"], object=item["object"],
            evidence=item["quote"], relation=item.get("relation", "new"), category=item.get("category", "other"),
            confidence=item["confidence"], is_static=item.get("static", False),
            premises=item.get("premises", []), extraction_method="import")))
    report = consolidate(engine.store, DEMO_SCOPE, engine.embedder, pairs, actor="extractor",
                         note="curated facts imported by the demo")
    return report.inserted


def _forget_editor_turn(engine: MemoryEngine) -> int:
    """Ana asked the assistant to forget what she said about her editor; the operator forgets that
    turn. The fact read from it stays (forgetting a turn does not cascade), which the Health pane
    shows as a fact without live support."""
    turn = next(m for m in engine.export(DEMO_SCOPE)["memories"]
                if m["kind"] == "episode" and "I use Neovim" in m["text"])
    engine.curator(DEMO_SCOPE).forget(turn["id"], reason="Ana asked to forget what she said about her editor")
    return turn["id"]


def build_demo(path: Path, *, progress: Callable[[float, str], None] | None = None,
               should_stop: Callable[[], bool] | None = None, embedder=None) -> dict:
    """Build the demo DB at `path` (which must not exist yet); return what was made."""
    step = progress or (lambda f, m: None)
    if path.exists():
        raise BadInput(f"{path}: already exists; the demo is only built into a new file")
    corpus = demo_dir()
    if not corpus.is_dir():
        raise BadInput(f"{corpus}: the demo corpus is missing from this installation")
    files = [corpus / "chats", corpus / "mail" / "inbox.mbox", corpus / "notes", corpus / "code"]
    docs = parse_sources(files)
    with MemoryEngine(path, embedder=embedder, llm=False) as engine:
        step(0.1, "ingesting the demo corpus")
        report = engine.ingest_documents(docs, scope=DEMO_SCOPE, extract="heuristic", should_stop=should_stop)
        step(0.5, "importing curated facts")
        curated = _curated(engine, corpus)
        step(0.6, "expiring what is past its forget_after")
        engine.expire_due(DEMO_SCOPE)
        step(0.62, "an operator forgets a turn at Ana's request")
        forgotten = _forget_editor_turn(engine)
        step(0.65, "a first recall so the traces pane has one")
        engine.recall("Where does Ana live now?", scope=DEMO_SCOPE)
        engine.recall("What pets does Ana have?", scope=DEMO_SCOPE)
        step(0.7, "a benchmark run for the dashboard")
        from engine.bench.runner import run_benchmark

        bench = run_benchmark(engine, "locomo", corpus / "bench-demo.json", k_values=(1, 3, 5, 10),
                              recipe="offline", embedder=getattr(engine.embedder, "provider", None) and
                              ("hashing" if engine.embedder.provider == "hashing" else "local"),
                              should_stop=should_stop)
        step(1.0, "demo ready")
        counts = engine.counts(DEMO_SCOPE)
    return {"path": str(path), "documents": report.documents, "memories": counts["memories"],
            "facts": counts["facts"], "curated_facts": curated, "open_conflicts": counts["open_conflicts"],
            "bench_run": bench["run_id"], "redacted": report.redacted, "forgotten_turn": forgotten}
