"""The demo database shows the Health pane something real: items of at least four kinds, each
from the demo corpus or from a curation command the demo build runs."""

from __future__ import annotations

from app.demo import DEMO_SCOPE, build_demo
from engine.embed.hashing import HashingEmbedder
from engine.memory import MemoryEngine


def test_the_demo_has_health_items_of_at_least_four_kinds(tmp_path):
    emb = HashingEmbedder()
    path = tmp_path / "demo.db"
    info = build_demo(path, embedder=emb)
    with MemoryEngine(path, embedder=emb, llm=False, background_reembed=False) as engine:
        report = engine.health(DEMO_SCOPE)
    kinds = {name for name, r in report.checks.items() if r.count}
    assert len(kinds) >= 4, kinds
    assert {"duplicate_memories", "unsupported_facts", "external_instructions", "noisy_entities"} <= kinds
    dup = report.checks["duplicate_memories"].items[0]
    assert "Great to hear you settled in Munich" in dup.evidence["memories"][0]["text"]
    unsupported = report.checks["unsupported_facts"].items[0]
    assert unsupported.evidence["gone_turns"][0]["episode_id"] == info["forgotten_turn"]
    assert "Ignore previous instructions" in report.checks["external_instructions"].items[0].summary
