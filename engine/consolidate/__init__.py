"""Consolidation: candidates from an extractor -> grounded, reconciled, stored facts.

One transaction per batch; every change lands in curation_log (actor "extractor") with row
images, so an extraction is explained ("fact A retired fact B because of evidence E via
rule R") and can be undone like any operator command.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..changes import ChangeSet
from ..embed.base import Embedder
from ..embed.text import fact_vector_text
from ..extract import canonical
from ..extract.ground import ground
from ..extract.model import Candidate, SourceChunk
from ..extract.secrets import scrub
from ..names import find_mentions
from ..reconcile import Decision, FactView, ReconcileConfig, reconcile
from ..records import Fact
from ..scope import Scope
from ..store.store import Store, Writer
from ..timeutil import now_iso


@dataclass(slots=True)
class ConsolidationReport:
    candidates: int = 0
    inserted: int = 0
    reinforced: int = 0
    superseded: int = 0
    conflicts: int = 0
    reviews: int = 0
    skipped: int = 0
    unverified: int = 0
    fact_ids: list[int] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    log_id: int | None = None

    def merge(self, other: ConsolidationReport) -> None:
        for name in ("candidates", "inserted", "reinforced", "superseded", "conflicts", "reviews", "skipped",
                     "unverified"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.fact_ids += other.fact_ids
        self.decisions += other.decisions


def _view(f: Fact) -> FactView:
    return FactView(id=f.id, memory_id=f.memory_id, subject_key=f.subject_key, predicate_key=f.predicate_key,
                    object_key=f.object_key, object=f.object, confidence=f.confidence, status=f.status,
                    valid_from=f.valid_from, learned_at=f.learned_at, category=f.category or "other", trust=f.trust)


def prepare(candidates: list[tuple[SourceChunk, Candidate]]) -> tuple[list[Candidate], list[str]]:
    """Ground and canonicalise; drop anything that would carry a secret into a fact."""
    kept: list[Candidate] = []
    dropped: list[str] = []
    for chunk, cand in candidates:
        ground(cand, chunk)
        if cand.valid_from is None:
            cand.valid_from = chunk.source_time
        if any(scrub(v)[1] for v in (cand.text, cand.object, cand.subject)):
            dropped.append(f"candidate '{cand.predicate}' dropped: it would store a secret")
            continue
        if not cand.subject_key:
            cand.subject_key = canonical.subject_key(cand.subject, speaker=chunk.speaker)
        if not cand.predicate_key:
            cand.predicate_key = canonical.predicate_key(cand.predicate)
        if not cand.object_key:
            cand.object_key = canonical.object_key(cand.object)
        if cand.replaces and not cand.replaces_key:
            cand.replaces_key = canonical.object_key(cand.replaces)
        kept.append(cand)
    return kept, dropped


def lend_predicates(stored: list[dict[str, Any]], cands: list[Candidate]) -> None:
    """A change whose predicate the extractor only guessed from its verb takes the predicate of
    the fact holding the value it replaced: "I sold the Golf and bought a Tesla" continues "my car
    is a 2012 VW Golf" (car), "I'm not vegetarian anymore" ends has_diet. Facts earlier in the
    batch count too; the latest match wins."""
    for i, cand in enumerate(cands):
        if not (cand.soft_predicate and cand.replaces_key):
            continue
        known = [(f["predicate_key"], f["predicate"], f["object_key"], f["category"]) for f in stored
                 if f["subject_key"] == cand.subject_key] if stored and "subject_key" in stored[0] else \
            [(f["predicate_key"], f["predicate"], f["object_key"], f["category"]) for f in stored]
        known += [(c.predicate_key, c.predicate, c.object_key, c.category) for c in cands[:i]
                  if c.subject_key == cand.subject_key]
        match = [k for k in known if canonical.objects_match(k[2], cand.replaces_key)]
        if match:
            cand.predicate_key, cand.predicate, _, category = match[-1]
            cand.category = category or cand.category
            cand.soft_predicate = False


def consolidate(store: Store, scope: Scope, embedder: Embedder,
                candidates: list[tuple[SourceChunk, Candidate]], *,
                config: ReconcileConfig = ReconcileConfig(), actor: str = "extractor",
                note: str | None = None, then: Callable[[Writer], None] | None = None) -> ConsolidationReport:
    """then(w), if given, runs inside the same transaction (the extractor marks its window done
    there, so a crash cannot store the facts and leave the window to be read again)."""
    report = ConsolidationReport(candidates=len(candidates))
    cands, dropped = prepare(candidates)
    report.skipped += len(dropped)
    report.decisions += [{"action": "skip", "rule": "secret", "reason": d} for d in dropped]
    if not cands:
        if then is not None:
            with store.writer(scope) as w:
                then(w)
        return report
    if any(c.soft_predicate and c.replaces_key for c in cands):
        for key in {c.subject_key for c in cands if c.soft_predicate and c.replaces_key}:
            lend_predicates([f | {"subject_key": key} for f in store.facts_of_subjects(scope, [key])],
                            [c for c in cands if c.subject_key == key])
    existing = [_view(r) for r in store.facts_for_keys(scope, [(c.subject_key, c.predicate_key) for c in cands])]
    decisions = reconcile(existing, cands, config=config)
    inserts = [d for d in decisions if d.action == "insert"]
    texts = [fact_vector_text(cands[d.index].text, cands[d.index].evidence) for d in inserts]
    vectors: np.ndarray | list[np.ndarray] = embedder.embed(texts, kind="passage") if inserts else []
    vec_of = {d.index: v for d, v in zip(inserts, vectors)}
    now = now_iso()
    memory_of: dict[int | str, int] = {f.id: f.memory_id for f in existing}
    fact_of: dict[str, int] = {}
    valid_from_of: dict[int | str, str | None] = {f.id: f.valid_from for f in existing}

    def resolve(ref: int | str | None) -> int:
        """A decision's fact: a stored id, or this batch's "new:<i>" placeholder (inserted by now)."""
        if ref is None:
            raise ValueError("reconcile named no fact where its decision needs one")
        return fact_of[ref] if isinstance(ref, str) else ref

    changes = ChangeSet()
    with store.writer(scope) as w:
        for d in decisions:
            cand = cands[d.index]
            # Reasons name facts of this batch by placeholder ("fact new:2"); they exist by now.
            d.reason = re.sub(r"new:(\d+)", lambda m: str(fact_of.get(m.group(0), m.group(0))), d.reason)
            entry = {"candidate": cand.text, "action": d.action, "rule": d.rule, "reason": d.reason,
                     "evidence_unverified": cand.evidence_unverified}
            if cand.evidence_unverified:
                report.unverified += 1
            if d.action == "skip":
                report.skipped += 1
                report.decisions.append(entry)
                continue
            if d.action == "reinforce":
                fid = resolve(d.target)
                changes.touch(w, "facts", fid)
                row = _image(w, fid)
                changes.touch(w, "memories", row["memory_id"])
                w.update_fact(fid, confidence=d.confidence, source_count=row["source_count"] + 1)
                w.update_memory(row["memory_id"], confidence=d.confidence)
                if cand.chunk_id is not None:
                    # Only the row this adds: a fact confirmed a thousand times has a thousand sources,
                    # and collecting them all on each confirmation made repetition quadratic.
                    span = _span(cand)
                    assert span is not None  # it has a chunk
                    sid = w.add_source(memory_id=row["memory_id"], chunk_id=span[0], document_id=span[1],
                                       start=span[2], end=span[3], relevance=0.5 if cand.evidence_unverified else 1.0)
                    if sid is not None:
                        changes.created("memory_sources", sid)
                report.reinforced += 1
                entry["fact_id"] = fid
                report.decisions.append(entry)
                continue
            fid = _insert_fact(w, changes, cand, d, now, vec_of[d.index], embedder)
            row = _image(w, fid)
            fact_of[d.ref] = fid
            memory_of[d.ref] = row["memory_id"]
            valid_from_of[d.ref] = row["valid_from"]
            report.inserted += 1
            report.fact_ids.append(fid)
            entry["fact_id"] = fid
            for old_ref in d.supersedes:
                old = resolve(old_ref)
                changes.touch(w, "facts", old)
                old_row = _image(w, old)
                w.update_fact(old, status="superseded", invalidated_at=now,
                              valid_to=old_row["valid_to"] or row["valid_from"] or now)
                report.superseded += 1
            if d.supersedes:
                w.update_fact(fid, supersedes_fact_id=resolve(d.supersedes[-1]))
            if d.former and cand.replaces:  # the value it replaced, which no fact held: history behind it
                former = replace(cand, text=cand.replaces_text or f"{cand.subject} had {cand.replaces}.",
                                 object=cand.replaces, object_key=cand.replaces_key, replaces=None,
                                 valid_to=row["valid_from"], forget_after=None)
                hd = Decision(d.index, "insert", d.rule, "stated as the value it replaced", status="superseded",
                              relation="new", confidence=d.confidence)
                old_fid = _insert_fact(w, changes, former, hd, now, embedder.embed(
                    [fact_vector_text(former.text, former.evidence)], kind="passage")[0], embedder)
                w.update_fact(old_fid, invalidated_at=now)
                w.update_fact(fid, supersedes_fact_id=old_fid)
                old_row = _image(w, old_fid)
                rid = w.add_relation(src_memory_id=row["memory_id"], dst_memory_id=old_row["memory_id"], type="updates",
                                     confidence=d.confidence, created_by="extractor" if actor == "extractor" else "operator",
                                     rule=d.rule, reason=hd.reason, evidence_chunk_id=cand.chunk_id)
                changes.created("memory_relations", rid)
                report.inserted += 1
                report.fact_ids.append(old_fid)
            if d.superseded_by is not None:  # stored as history behind a newer fact
                newer = resolve(d.superseded_by)
                w.update_fact(fid, invalidated_at=now, valid_to=valid_from_of.get(d.superseded_by) or now)
                changes.touch(w, "facts", newer)
                if _image(w, newer)["supersedes_fact_id"] is None:
                    w.update_fact(newer, supersedes_fact_id=fid)
            for rel_type, other_ref in d.links:
                src, dst = row["memory_id"], memory_of[other_ref]
                if d.superseded_by is not None:
                    src, dst = dst, src  # the newer fact updates this older one
                rid = w.add_relation(src_memory_id=src, dst_memory_id=dst, type=rel_type, confidence=d.confidence,
                                     created_by="extractor" if actor == "extractor" else "operator",
                                     rule=d.rule, reason=d.reason, evidence_chunk_id=cand.chunk_id)
                changes.created("memory_relations", rid)
            if d.relation == "derives" and cand.premises:
                # Inside the transaction: a premise may be a fact this batch has just inserted.
                for premise_mid in _premise_memories(store, scope, cand.premises, exclude=row["memory_id"]):
                    rid = w.add_relation(src_memory_id=row["memory_id"], dst_memory_id=premise_mid, type="derives",
                                         confidence=d.confidence, created_by="extractor", rule=d.rule,
                                         reason="inferred from this fact", evidence_chunk_id=cand.chunk_id)
                    changes.created("memory_relations", rid)
            if d.conflict_with is not None:
                cid = w.open_conflict(fact_a_id=resolve(d.conflict_with), fact_b_id=fid, rule=d.rule, reason=d.reason)
                changes.created("conflicts", cid)
                report.conflicts += 1
            if d.review:
                cid = w.open_conflict(fact_a_id=fid, fact_b_id=None, rule=d.rule, reason=d.reason)
                changes.created("conflicts", cid)
                report.reviews += 1
            report.decisions.append(entry)
        if then is not None:
            then(w)
        changes.seal(w)
        if not changes.empty:
            report.log_id = w.log_curation(
                command="consolidate", target_type="facts", target_id=report.fact_ids[0] if report.fact_ids else None,
                before={"rows": changes.before},
                after={"rows": changes.after, "decisions": report.decisions},
                actor=actor, note=note)
    return report


def withdraw_taken_back(store: Store, scope: Scope, withdrawn: list[tuple[Fact, Fact | None, str]], *,
                        actor: str = "extractor", note: str | None = None) -> ConsolidationReport:
    """Retract facts a later take-back withdrew (heuristic.taken_back_earlier: (fact, the fact it
    superseded or None, the take-back clause)) and give back what each had superseded its place:
    "Actually we're staying in Berlin" a month after "we're moving to Munich". One logged,
    undoable step."""
    report = ConsolidationReport()
    if not withdrawn:
        return report
    now = now_iso()
    changes = ChangeSet()
    with store.writer(scope) as w:
        for fact, was, clause in withdrawn:
            changes.touch(w, "facts", fact.id)
            w.update_fact(fact.id, status="retracted", invalidated_at=now, rule="taken_back_later",
                          reason=f"taken back in a later conversation (\"{clause}\")")
            entry = {"candidate": fact.text, "action": "retract", "rule": "taken_back_later", "fact_id": fact.id,
                     "reason": f"fact {fact.id} '{fact.predicate}: {fact.object}' taken back later (\"{clause}\")"}
            if was is not None and was.status == "superseded":
                changes.touch(w, "facts", was.id)
                w.update_fact(was.id, status="active", invalidated_at=None, valid_to=None, rule="taken_back_later",
                              reason=f"what replaced it (fact {fact.id}) was taken back (\"{clause}\")")
                entry["restored_fact_id"] = was.id
            report.decisions.append(entry)
        changes.seal(w)
        report.log_id = w.log_curation(
            command="consolidate", target_type="facts", target_id=withdrawn[0][0].id,
            before={"rows": changes.before}, after={"rows": changes.after, "decisions": report.decisions},
            actor=actor, note=note)
    return report


def _image(w: Writer, fact_id: int) -> dict[str, Any]:
    """A fact row this transaction has read or written (so it exists)."""
    row = w.row_image("facts", fact_id)
    assert row is not None
    return row


def _span(cand: Candidate) -> tuple[int, int, int, int] | None:
    """(chunk, document, start, end) of a grounded candidate's evidence; None without a chunk."""
    if cand.chunk_id is None:
        return None
    assert cand.document_id is not None and cand.evidence_start is not None and cand.evidence_end is not None
    return cand.chunk_id, cand.document_id, cand.evidence_start, cand.evidence_end


def _insert_fact(w: Writer, changes: ChangeSet, cand: Candidate, d: Decision, now: str, vector: np.ndarray,
                 embedder: Embedder) -> int:
    import hashlib

    mid = w.insert_memory(
        kind="fact", text=cand.text, trust=cand.trust, content_hash=hashlib.sha256(cand.text.encode()).hexdigest(),
        source_time=cand.valid_from, category=cand.category, importance=cand.importance, confidence=d.confidence,
        is_static=cand.is_static, forget_after=cand.forget_after, extraction_method=cand.extraction_method)
    changes.created("memories", mid)
    fid = w.insert_fact(
        memory_id=mid, subject=cand.subject, predicate=cand.predicate, object=cand.object,
        subject_key=cand.subject_key, predicate_key=cand.predicate_key, object_key=cand.object_key,
        relation=d.relation, status=d.status, confidence=d.confidence, importance=cand.importance,
        category=cand.category, is_static=int(cand.is_static), valid_from=cand.valid_from, valid_to=cand.valid_to,
        learned_at=now, forget_after=cand.forget_after, evidence=cand.evidence,
        evidence_unverified=int(cand.evidence_unverified), extraction_method=cand.extraction_method,
        extractor_model=cand.extractor_model, prompt_version=cand.prompt_version, rule=d.rule, reason=d.reason)
    changes.created("facts", fid)
    span = _span(cand)
    if span is not None:
        w.add_source(memory_id=mid, chunk_id=span[0], document_id=span[1], start=span[2], end=span[3],
                     relevance=0.5 if cand.evidence_unverified else 1.0)
        changes.created_where(w, "memory_sources", "memory_id", mid)
    w.put_embeddings("memory", [(mid, vector)], provider=embedder.provider, model=embedder.model,
                     dims=embedder.dims, embed_ms=None)
    changes.created_where(w, "embeddings", "owner_id", mid)
    rows: list[tuple[int, int, int | None, int | None, int | None]] = []
    for m in find_mentions(cand.text):
        eid, created = w.upsert_entity_created(m.name, m.canonical, m.kind)
        if created:
            changes.created("entities", eid)
        rows.append((eid, mid, cand.chunk_id, None, None))
    if rows:
        w.add_mentions(rows)
        changes.created_where(w, "entity_mentions", "memory_id", mid)
    return fid


def _premise_memories(store: Store, scope: Scope, premises: list[str], *, exclude: int) -> list[int]:
    """The fact memories a derivation names as premises (best full-text match each)."""
    from ..retrieve.query import fts_query

    out: list[int] = []
    for premise in premises:
        match = fts_query(premise, store.fts_tokens)
        if not match:
            continue
        for mid, _ in store.fts_memories(scope, match, limit=5, kind="fact"):
            if mid != exclude and mid not in out:
                out.append(mid)
                break
    return out
