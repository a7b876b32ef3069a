"""Curation: undo restores the exact prior state after any sequence; retract+undo is identity;
no operation reads or writes across scopes."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.consolidate import consolidate
from engine.embed.hashing import HashingEmbedder
from engine.errors import BadInput
from engine.extract.model import Candidate, SourceChunk
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.memory import MemoryEngine
from engine.scope import Scope

ANA = Scope.default("ana", "bot")
BOB = Scope.default("bob", "bot")
EMB = HashingEmbedder(64)

STATEMENTS = [("lives_in", "Berlin"), ("lives_in", "Munich"), ("works_at", "Siemens"), ("has_role", "nurse"),
              ("has_role", "teacher"), ("likes", "jazz")]


def seed(engine: MemoryEngine, scope: Scope) -> None:
    """Three documents whose facts supersede, conflict and repeat each other."""
    for day, (pred, obj) in enumerate(STATEMENTS):
        line = f"Ana: I {pred.replace('_', ' ')} {obj}."
        doc = ParsedDocument(text=line, source_type="chat", trust="user", uri="u", external_id=f"d{day}",
                             source_time=f"2024-01-0{day + 1}T00:00:00Z",
                             chunks=[ParsedChunk(0, len(line), "message", speaker="Ana", role="user",
                                                 source_time=f"2024-01-0{day + 1}T00:00:00Z")])
        report = engine.ingest_documents([doc], scope=scope)
        did = report.document_ids[0]
        ch = engine.store.chunks_of(scope, did)[0]
        view = SourceChunk(ch.id, did, ch.text, ch.start, ch.end, "Ana", "user", "user", ch.source_time)
        c = Candidate(text=f"Ana {pred} {obj}.", subject="Ana", predicate=pred, object=obj, evidence=obj,
                      confidence=0.9 if pred == "has_role" else 0.6, category="work" if pred != "lives_in" else "location")
        consolidate(engine.store, scope, EMB, [(view, c)])


def state(engine: MemoryEngine, scope: Scope) -> str:
    data = engine.export(scope)
    data["conflicts"] = engine.conflicts(scope, status=None)
    return json.dumps(data, sort_keys=True, default=str)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("cur") / "seed.db"
    with MemoryEngine(path, embedder=EMB) as eng:
        seed(eng, ANA)
        seed(eng, BOB)
    return path


def _copy(template, tmp_path):
    import shutil

    dst = tmp_path / "m.db"
    shutil.copy(template, dst)
    return dst


OPS = st.lists(st.tuples(st.sampled_from(["resolve_a", "resolve_b", "resolve_both", "resolve_none", "restore",
                                          "edit", "forget", "pin", "retract"]),
                         st.integers(min_value=0, max_value=50)), min_size=1, max_size=6)


def _do(engine, op, pick):
    cur = engine.curator(ANA)
    facts = engine.facts(ANA, history=True)
    conflicts = engine.conflicts(ANA)
    docs = [d for d in engine.export(ANA)["documents"] if not d["retracted_at"]]
    if op.startswith("resolve_") and conflicts:
        c = conflicts[pick % len(conflicts)]
        keep = op.split("_")[1]
        if c["fact_b_id"] is None and keep in ("b", "both"):
            keep = "a"
        return cur.resolve(c["id"], keep)
    if op == "restore":
        old = [f for f in facts if f["status"] != "active"]
        if old:
            return cur.restore(old[pick % len(old)]["id"])
    if op == "edit" and facts:
        return cur.edit(facts[pick % len(facts)]["id"], object=f"Place{pick}")
    if op in ("forget", "pin"):
        mems = [m for m in engine.export(ANA)["memories"] if not m["forgotten_at"]]
        if mems:
            m = mems[pick % len(mems)]
            return cur.forget(m["id"]) if op == "forget" else cur.pin(m["id"])
    if op == "retract" and docs:
        return cur.retract(docs[pick % len(docs)]["id"])
    return None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_undo_after_any_sequence_restores_exact_state(template, tmp_path, ops):
    path = _copy(template, tmp_path)
    with MemoryEngine(path, embedder=EMB) as engine:
        initial = state(engine, ANA)
        bob = state(engine, BOB)
        done = []
        for op, pick in ops:
            try:
                result = _do(engine, op, pick)
            except BadInput:
                continue
            if result is not None:
                done.append(result.log_id)
        assert state(engine, BOB) == bob, "a curation command touched another scope"
        for log_id in reversed(done):
            engine.curator(ANA).undo(log_id)
        assert state(engine, ANA) == initial
        # Redo everything forward again, then undo again: still exact.
        for log_id in done:
            engine.curator(ANA).redo(log_id)
        for log_id in reversed(done):
            engine.curator(ANA).undo(log_id)
        assert state(engine, ANA) == initial
        assert engine.store.db.integrity_check() == "ok"


def test_retract_preview_then_apply_then_undo(template, tmp_path):
    path = _copy(template, tmp_path)
    with MemoryEngine(path, embedder=EMB) as engine:
        initial = state(engine, ANA)
        munich_doc = engine.export(ANA)["documents"][1]
        preview = engine.curator(ANA).retract(munich_doc["id"], dry_run=True)
        assert state(engine, ANA) == initial, "a dry run changed something"
        d = preview.details
        assert d["dry_run"] and len(d["facts_retracted"]) == 1 and len(d["facts_returned"]) == 1
        assert any("Munich" in t for t in d["profile_removed"]) and any("Berlin" in t for t in d["profile_added"])
        applied = engine.curator(ANA).retract(munich_doc["id"])
        assert {k: applied.details[k] for k in ("facts_retracted", "facts_returned")} == \
            {k: d[k] for k in ("facts_retracted", "facts_returned")}
        berlin = engine.store.fact(ANA, d["facts_returned"][0])
        assert berlin["status"] == "active" and berlin["object"] == "Berlin"
        engine.curator(ANA).undo(applied.log_id)
        assert state(engine, ANA) == initial


def test_undo_refuses_when_rows_changed_since(template, tmp_path):
    path = _copy(template, tmp_path)
    with MemoryEngine(path, embedder=EMB) as engine:
        cur = engine.curator(ANA)
        mem = engine.export(ANA)["memories"][0]["id"]
        first = cur.pin(mem)
        cur.forget(mem)
        with pytest.raises(BadInput, match="changed since"):
            cur.undo(first.log_id)
        cur.undo()  # the latest (forget) first
        cur.undo(first.log_id)
        assert engine.store.memory(ANA, mem).pinned == 0


def test_scoped_reads_refuse_other_scopes(template, tmp_path):
    path = _copy(template, tmp_path)
    with MemoryEngine(path, embedder=EMB) as engine:
        ana_fact = engine.facts(ANA)[0]
        assert engine.store.fact(BOB, ana_fact["id"]) is None
        with pytest.raises(BadInput):
            engine.curator(BOB).edit(ana_fact["id"], object="x")
        with pytest.raises(BadInput):
            engine.show("fact", ana_fact["id"], scope=BOB)
        doc = engine.export(ANA)["documents"][0]
        with pytest.raises(BadInput):
            engine.curator(BOB).retract(doc["id"])
