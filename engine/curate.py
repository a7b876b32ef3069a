"""Operator curation as commands with do/undo, every one logged with row images.

Each command runs in one transaction, records the before/after image of every row it touches
(engine/changes.py) and writes one curation_log entry. `undo` writes the before images back
(checking first that nothing changed the rows since) and `redo` writes the after images; both
are logged too. Retraction can be previewed: the preview runs the real cascade inside a
transaction that is rolled back, so it cannot drift from what apply would do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .changes import ChangeSet, apply_images
from .embed.base import Embedder
from .embed.text import fact_vector_text, vector_text
from .errors import BadInput
from .extract import canonical
from .profile import build_profile
from .records import CurationEntry, Fact, Memory
from .scope import Scope
from .store.store import Store, Writer
from .timeutil import now_iso

KEEP_CHOICES = ("a", "b", "both", "none")
REEMBED_MAX = 1000  # memories one logged re-embed may touch (its undo keeps every old vector)

Body = Callable[[Writer, ChangeSet], dict[str, Any]]  # a command's writes, inside its transaction


@dataclass(slots=True)
class CurationResult:
    log_id: int | None
    command: str
    summary: dict[str, int]
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"log_id": self.log_id, "command": self.command, "summary": self.summary, **self.details}


class _Rollback(Exception):
    pass


class Curator:
    def __init__(self, store: Store, scope: Scope, *, embedder: Callable[[], Embedder] | None = None,
                 actor: str = "operator") -> None:
        self.store = store
        self.scope = scope
        self._embedder = embedder
        self.actor = actor

    # plumbing ---------------------------------------------------------------------------------
    def _run(self, command: str, target_type: str | None, target_id: int | None, note: str | None,
             body: Body) -> CurationResult:
        changes = ChangeSet()
        with self.store.writer(self.scope) as w:
            details = body(w, changes) or {}
            changes.seal(w)
            log_id = w.log_curation(command=command, target_type=target_type, target_id=target_id,
                                    before={"rows": changes.before}, after={"rows": changes.after, **details},
                                    actor=self.actor, note=note)
        return CurationResult(log_id, command, changes.summary(), details)

    def _fact(self, fact_id: int) -> Fact:
        fact = self.store.fact_record(self.scope, fact_id)
        if fact is None:
            raise BadInput(f"no fact {fact_id} in this scope")
        return fact

    # conflicts ----------------------------------------------------------------------------------
    def resolve(self, conflict_id: int, keep: str, *, note: str | None = None) -> CurationResult:
        if keep not in KEEP_CHOICES:
            raise BadInput(f"--keep must be one of {', '.join(KEEP_CHOICES)} (or a fact id of the conflict)")
        conflict = self.store.conflict_record(self.scope, conflict_id)
        if conflict is None:
            raise BadInput(f"no conflict {conflict_id} in this scope")
        if conflict.status != "open":
            raise BadInput(f"conflict {conflict_id} is already {conflict.status}")
        a = self._fact(conflict.fact_a_id)
        b = self._fact(conflict.fact_b_id) if conflict.fact_b_id else None
        if b is None and keep in ("b", "both"):
            raise BadInput(f"conflict {conflict_id} holds a single fact for review: keep a or none")
        now = now_iso()

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            for f in (a, b):
                if f is not None:
                    ch.touch(w, "facts", f.id)
            ch.touch(w, "conflicts", conflict_id)
            if keep == "a":
                w.update_fact(a.id, status="active", rule="operator_keep", reason=f"kept by operator (conflict {conflict_id})")
                if b is not None:
                    w.update_fact(b.id, status="retracted", invalidated_at=now, rule="operator_reject",
                                  reason=f"rejected by operator in favour of fact {a.id}")
            elif keep == "b":
                assert b is not None  # refused above for a conflict that holds one fact
                w.update_fact(b.id, status="active", supersedes_fact_id=a.id, relation="updates",
                              rule="operator_keep", reason=f"kept by operator over fact {a.id}")
                w.update_fact(a.id, status="superseded", invalidated_at=now,
                              valid_to=a.valid_to or b.valid_from or now, rule="operator_supersede",
                              reason=f"superseded by fact {b.id} by operator decision")
                rid = w.add_relation(src_memory_id=b.memory_id, dst_memory_id=a.memory_id, type="updates",
                                     confidence=1.0, created_by="operator", rule="operator_keep",
                                     reason=f"conflict {conflict_id} resolved for fact {b.id}")
                ch.created("memory_relations", rid)
            elif keep == "both":
                assert b is not None  # refused above for a conflict that holds one fact
                w.update_fact(a.id, status="active")
                w.update_fact(b.id, status="active", relation="extends", rule="operator_keep_both",
                              reason=f"kept with fact {a.id} as an extension")
                rid = w.add_relation(src_memory_id=b.memory_id, dst_memory_id=a.memory_id, type="extends",
                                     confidence=1.0, created_by="operator", rule="operator_keep_both",
                                     reason=f"conflict {conflict_id}: both kept")
                ch.created("memory_relations", rid)
            else:
                for f in (a, b):
                    if f is not None:
                        w.update_fact(f.id, status="retracted", invalidated_at=now, rule="operator_reject",
                                      reason=f"rejected by operator (conflict {conflict_id})")
            w.set_conflict(conflict_id, status="resolved", resolution=f"keep_{keep}", curation_id=None)
            return {"conflict_id": conflict_id, "keep": keep}

        return self._run("resolve", "conflict", conflict_id, note, body)

    # facts --------------------------------------------------------------------------------------
    def restore(self, fact_id: int, *, note: str | None = None) -> CurationResult:
        fact = self._fact(fact_id)
        if fact.status == "active":
            raise BadInput(f"fact {fact_id} is already active")
        now = now_iso()
        rivals = [f for f in self.store.facts_for_keys(self.scope, [(fact.subject_key, fact.predicate_key)],
                                                        statuses=("active",))
                  if f.id != fact_id and f.object_key != fact.object_key]
        if fact.predicate_key in canonical.MULTI_VALUED:
            rivals = []

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            ch.touch(w, "facts", fact_id)
            w.update_fact(fact_id, status="active", invalidated_at=None, valid_to=None, rule="operator_restore",
                          reason="restored by operator")
            for r in rivals:
                ch.touch(w, "facts", r.id)
                w.update_fact(r.id, status="superseded", invalidated_at=now, valid_to=r.valid_to or now,
                              rule="operator_restore", reason=f"fact {fact_id} restored over it by operator")
            return {"fact_id": fact_id, "superseded": [r.id for r in rivals]}

        return self._run("restore", "fact", fact_id, note, body)

    def edit(self, fact_id: int, *, object: str | None = None, text: str | None = None,
             predicate: str | None = None, note: str | None = None) -> CurationResult:
        """A correction is a new version that updates the old fact, never an in-place change."""
        old = self._fact(fact_id)
        if object is None and text is None and predicate is None:
            raise BadInput("edit needs a new object, predicate or text")
        new_object = object if object is not None else old.object
        new_predicate = predicate if predicate is not None else old.predicate
        new_text = text if text is not None else (
            old.text if object is None and predicate is None
            else f"{old.subject} {new_predicate.replace('_', ' ')} {new_object}.")
        if self._embedder is None:
            raise BadInput("editing needs an embedder")
        emb = self._embedder()
        vector = emb.embed([fact_vector_text(new_text, old.evidence)])[0]
        now = now_iso()

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            ch.touch(w, "facts", fact_id)
            mid = w.insert_memory(kind="fact", text=new_text, trust=old.trust,
                                  content_hash=hashlib.sha256(new_text.encode()).hexdigest(),
                                  source_time=now, category=old.category, importance=old.importance,
                                  confidence=1.0, is_static=bool(old.is_static), forget_after=old.forget_after,
                                  extraction_method="operator")
            ch.created("memories", mid)
            fid = w.insert_fact(
                memory_id=mid, subject=old.subject, predicate=new_predicate, object=new_object,
                subject_key=old.subject_key, predicate_key=canonical.predicate_key(new_predicate),
                object_key=canonical.object_key(new_object), relation="updates", status="active", confidence=1.0,
                importance=old.importance, category=old.category, is_static=old.is_static,
                valid_from=old.valid_from, learned_at=now, forget_after=old.forget_after,
                supersedes_fact_id=fact_id, evidence=old.evidence, extraction_method="operator",
                rule="operator_edit", reason=note or "edited by operator")
            ch.created("facts", fid)
            for src in self.store.sources_of(self.scope, old.memory_id):
                w.add_source(memory_id=mid, chunk_id=src.chunk_id, document_id=src.document_id,
                             start=src.start, end=src.end, relevance=src.relevance)
            ch.created_where(w, "memory_sources", "memory_id", mid)
            w.put_embeddings("memory", [(mid, vector)], provider=emb.provider, model=emb.model, dims=emb.dims,
                             embed_ms=None)
            ch.created_where(w, "embeddings", "owner_id", mid)
            w.update_fact(fact_id, status="superseded", invalidated_at=now, rule="operator_edit",
                          reason=f"corrected by operator as fact {fid}")
            rid = w.add_relation(src_memory_id=mid, dst_memory_id=old.memory_id, type="updates", confidence=1.0,
                                 created_by="operator", rule="operator_edit", reason=note or "operator correction")
            ch.created("memory_relations", rid)
            return {"fact_id": fid, "replaces": fact_id}

        return self._run("edit", "fact", fact_id, note, body)

    # memories -----------------------------------------------------------------------------------
    def _memory(self, memory_id: int) -> Memory:
        mem = self.store.memory(self.scope, memory_id)
        if mem is None:
            raise BadInput(f"no memory {memory_id} in this scope")
        return mem

    def forget(self, memory_id: int, *, reason: str = "forgotten by operator", note: str | None = None) -> CurationResult:
        mem = self._memory(memory_id)
        if mem.forgotten_at:
            raise BadInput(f"memory {memory_id} is already forgotten ({mem.forget_reason})")

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            ch.touch(w, "memories", memory_id)
            w.update_memory(memory_id, forgotten_at=now_iso(), forget_reason=reason)
            return {"memory_id": memory_id, "reason": reason}

        return self._run("forget", "memory", memory_id, note or reason, body)

    def pin(self, memory_id: int, pinned: bool = True, *, note: str | None = None) -> CurationResult:
        self._memory(memory_id)

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            ch.touch(w, "memories", memory_id)
            w.update_memory(memory_id, pinned=int(pinned))
            return {"memory_id": memory_id, "pinned": pinned}

        return self._run("pin" if pinned else "unpin", "memory", memory_id, note, body)

    def expire_due(self, now: str | None = None) -> CurationResult | None:
        """Facts whose forget_after has passed become expired: out of current recall, kept in history."""
        now = now or now_iso()
        due = self.store.due_for_expiry(self.scope, now)
        if not due:
            return None

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            for f in due:
                ch.touch(w, "facts", f.id)
                w.update_fact(f.id, status="expired", invalidated_at=now, valid_to=f.forget_after,
                              rule="forget_after_passed", reason=f"forget_after {f.forget_after} passed")
            return {"expired": [f.id for f in due]}

        return self._run("expire", "facts", None, None, body)

    # repairs the store-health view offers (engine/health.py) -------------------------------------
    def merge(self, keep: int, drop: int, *, note: str | None = None) -> CurationResult:
        """`drop` says what `keep` says: its source spans move onto `keep`, and it is forgotten (a fact:
        also retracted), so one memory carries all the evidence."""
        if keep == drop:
            raise BadInput("merge needs two different memories")
        kept, dropped = self._memory(keep), self._memory(drop)
        for m in (kept, dropped):
            if m.forgotten_at or m.retracted_at:
                raise BadInput(f"memory {m.id} is no longer current (forgotten or retracted)")
        keep_fact = self.store.fact_record_by_memory(self.scope, keep)
        drop_fact = self.store.fact_record_by_memory(self.scope, drop)
        if (keep_fact is None) != (drop_fact is None):
            raise BadInput("merge a fact into a fact, or a memory into a memory")
        sources = self.store.sources_of(self.scope, drop)
        now = now_iso()

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            before = set(w.ids_where("memory_sources", "memory_id", keep))
            for src in sources:
                w.add_source(memory_id=keep, chunk_id=src.chunk_id, document_id=src.document_id,
                             start=src.start, end=src.end, relevance=src.relevance)
            for rid in set(w.ids_where("memory_sources", "memory_id", keep)) - before:
                ch.created("memory_sources", rid)
            ch.touch(w, "memories", drop)
            w.update_memory(drop, forgotten_at=now, forget_reason=f"merged into memory {keep}")
            if keep_fact is not None and drop_fact is not None:  # both or neither (checked above)
                ch.touch(w, "facts", keep_fact.id)
                ch.touch(w, "facts", drop_fact.id)
                w.update_fact(keep_fact.id, source_count=keep_fact.source_count + drop_fact.source_count,
                              confidence=max(keep_fact.confidence, drop_fact.confidence))
                w.update_fact(drop_fact.id, status="retracted", invalidated_at=now, rule="operator_merge",
                              reason=f"the same claim as fact {keep_fact.id}, merged into it")
            return {"keep": keep, "drop": drop, "sources_moved": len(sources),
                    "fact_ids": [keep_fact.id, drop_fact.id] if keep_fact and drop_fact else []}

        return self._run("merge", "memory", drop, note, body)

    def open_conflict(self, fact_a_id: int, fact_b_id: int | None = None, *, reason: str,
                      note: str | None = None) -> CurationResult:
        """Put two facts (or one, held for review) in the review queue, as reconciliation would have."""
        a = self._fact(fact_a_id)
        b = self._fact(fact_b_id) if fact_b_id is not None else None
        if fact_a_id == fact_b_id:
            raise BadInput("a conflict needs two different facts (or one, held for review)")
        for f in (a, b):
            if f is not None and f.status not in ("active", "needs_review"):
                raise BadInput(f"fact {f.id} is {f.status}, not current")
        ids = {fact_a_id, fact_b_id} - {None}
        for c in self.store.conflicts(self.scope, status="open"):
            if {c.fact_a_id, c.fact_b_id} - {None} == ids:
                raise BadInput(f"conflict {c.id} already holds {'these facts' if len(ids) > 1 else 'this fact'}")

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            cid = w.open_conflict(fact_a_id=fact_a_id, fact_b_id=fact_b_id,
                                  rule="operator_flag" if b is not None else "operator_review", reason=reason)
            ch.created("conflicts", cid)
            return {"conflict_id": cid, "fact_ids": sorted(ids)}

        return self._run("open_conflict", "fact", fact_a_id, note, body)

    def retract_fact(self, fact_id: int, *, reason: str = "retracted by operator", note: str | None = None
                     ) -> CurationResult:
        """Withdraw one fact (its memory and sources stay, for the record): out of recall and the profile."""
        fact = self._fact(fact_id)
        if fact.status == "retracted":
            raise BadInput(f"fact {fact_id} is already retracted")

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            ch.touch(w, "facts", fact_id)
            w.update_fact(fact_id, status="retracted", invalidated_at=now_iso(), rule="operator_retract", reason=reason)
            return {"fact_id": fact_id, "reason": reason}

        return self._run("retract_fact", "fact", fact_id, note or reason, body)

    def reembed(self, memory_ids: list[int], *, note: str | None = None) -> CurationResult:
        """Give these memories a vector of the current model, from the text ingestion embeds."""
        ids = sorted(set(int(i) for i in memory_ids))
        if not ids:
            raise BadInput("nothing to re-embed")
        if len(ids) > REEMBED_MAX:
            raise BadInput(f"at most {REEMBED_MAX} memories per re-embed (got {len(ids)})")
        if self._embedder is None:
            raise BadInput("re-embedding needs an embedder")
        mems = [self._memory(i) for i in ids]
        context = self.store.embedding_context(ids)
        emb = self._embedder()
        vectors = emb.embed([vector_text(m.text, context.get(m.id)) for m in mems], kind="passage")

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            for mid in ids:
                for rid in w.ids_where("embeddings", "owner_id", mid):
                    ch.touch(w, "embeddings", rid)
            w.put_embeddings("memory", list(zip(ids, vectors)), provider=emb.provider, model=emb.model,
                             dims=emb.dims, embed_ms=None)
            for mid in ids:
                for rid in w.ids_where("embeddings", "owner_id", mid):
                    ch.before.setdefault("embeddings", {}).setdefault(str(rid), None)
            return {"memory_ids": ids, "model": emb.model}

        return self._run("reembed", "memory", ids[0] if len(ids) == 1 else None, note, body)

    def remove_entity(self, entity_id: int, *, note: str | None = None) -> CurationResult:
        """Drop an entity and its mentions (a noisy name: the memories keep their text)."""
        if self.store.entity_key(self.scope, entity_id) is None:
            raise BadInput(f"no entity {entity_id} in this scope")

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            for rid in w.ids_where("entity_mentions", "entity_id", entity_id):
                ch.touch(w, "entity_mentions", rid)
            ch.touch(w, "entities", entity_id)
            w.delete_entity(entity_id)
            return {"entity_id": entity_id}

        return self._run("remove_entity", "entity", entity_id, note, body)

    # retraction ---------------------------------------------------------------------------------
    def retract(self, document_id: int, *, dry_run: bool = False, note: str | None = None) -> CurationResult:
        doc = self.store.document(self.scope, document_id)
        if doc is None:
            raise BadInput(f"no document {document_id} in this scope")
        if doc.retracted_at:
            raise BadInput(f"document {document_id} is already retracted")
        profile_before = build_profile(self.store, self.scope).as_dict()
        now = now_iso()
        preview: dict[str, Any] = {}

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            ch.touch(w, "documents", document_id)
            w.retract_document(document_id, now, note or "retracted by operator")
            support = self.store.document_support(self.scope, document_id)
            only = [s["memory_id"] for s in support if s["elsewhere"] == 0]
            retracted_facts: list[int] = []
            for mid in only:
                ch.touch(w, "memories", mid)
                w.update_memory(mid, retracted_at=now)
                fact = self.store.fact_record_by_memory(self.scope, mid)
                if fact is not None and fact.status != "retracted":
                    ch.touch(w, "facts", fact.id)
                    w.update_fact(fact.id, status="retracted", invalidated_at=now, rule="source_retracted",
                                  reason=f"its only source, document {document_id}, was retracted")
                    retracted_facts.append(fact.id)
            returned: list[int] = []
            for fid in retracted_facts:
                prev = self._fact(fid).supersedes_fact_id
                if prev and prev not in retracted_facts:
                    older = self.store.fact_record(self.scope, prev)
                    if older and older.status == "superseded":
                        ch.touch(w, "facts", prev)
                        w.update_fact(prev, status="active", invalidated_at=None, valid_to=None,
                                      rule="superseder_retracted", reason=f"fact {fid} that replaced it was retracted")
                        returned.append(prev)
            derived_lost: list[int] = []
            gone = {self._fact(f).memory_id for f in retracted_facts}
            for rel in self.store.relations(self.scope):
                if rel.type != "derives" or rel.dst_memory_id not in gone:
                    continue
                premises = [r.dst_memory_id for r in self.store.relations_of(self.scope, rel.src_memory_id)
                            if r.type == "derives" and r.src_memory_id == rel.src_memory_id]
                derived = self.store.fact_record_by_memory(self.scope, rel.src_memory_id)
                if derived and derived.status != "retracted" and all(p in gone for p in premises):
                    ch.touch(w, "facts", derived.id)
                    w.update_fact(derived.id, status="retracted", invalidated_at=now, rule="premises_retracted",
                                  reason=f"every premise was retracted with document {document_id}")
                    derived_lost.append(derived.id)
            profile_after = build_profile(self.store, self.scope).as_dict()
            before_lines = {x["text"] for x in profile_before["static"] + profile_before["dynamic"]}
            after_lines = {x["text"] for x in profile_after["static"] + profile_after["dynamic"]}
            preview.update({
                "document_id": document_id,
                "memories_retracted": only,
                "facts_retracted": retracted_facts,
                "facts_returned": returned,
                "derivations_lost": derived_lost,
                "profile_removed": sorted(before_lines - after_lines),
                "profile_added": sorted(after_lines - before_lines),
            })
            if dry_run:
                raise _Rollback
            return preview

        if dry_run:
            try:
                self._run("retract", "document", document_id, note, body)
            except _Rollback:
                pass
            return CurationResult(None, "retract", {}, {"dry_run": True, **preview})
        return self._run("retract", "document", document_id, note, body)

    # undo / redo --------------------------------------------------------------------------------
    def undo(self, log_id: int | None = None, *, note: str | None = None) -> CurationResult:
        entry = self._entry(log_id, want_undone=False)
        if entry.undone_at:
            raise BadInput(f"curation {entry.id} is already undone")

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            apply_images(w, target=entry.before["rows"], expect=entry.after["rows"])
            w.mark_undone(entry.id, True)
            ch.before, ch.after = entry.after["rows"], entry.before["rows"]
            return {"undid": entry.id, "undid_command": entry.command}

        return self._replay("undo", entry, note, body)

    def redo(self, log_id: int | None = None, *, note: str | None = None) -> CurationResult:
        entry = self._entry(log_id, want_undone=True)
        if not entry.undone_at:
            raise BadInput(f"curation {entry.id} is not undone")

        def body(w: Writer, ch: ChangeSet) -> dict[str, Any]:
            apply_images(w, target=entry.after["rows"], expect=entry.before["rows"])
            w.mark_undone(entry.id, False)
            return {"redid": entry.id, "redid_command": entry.command}

        return self._replay("redo", entry, note, body)

    def _replay(self, command: str, entry: CurationEntry, note: str | None, body: Body) -> CurationResult:
        changes = ChangeSet()
        with self.store.writer(self.scope) as w:
            details = body(w, changes)
            log_id = w.log_curation(command=command, target_type="curation", target_id=entry.id,
                                    before={}, after=details, actor=self.actor, note=note, undo_of=entry.id)
        rows = entry.before["rows"]
        return CurationResult(log_id, command, {t: len(r) for t, r in rows.items() if r}, details)

    def _entry(self, log_id: int | None, *, want_undone: bool) -> CurationEntry:
        if log_id is not None:
            entry = self.store.curation_entry(self.scope, log_id)
            if entry is None:
                raise BadInput(f"no curation entry {log_id} in this scope")
            if entry.command in ("undo", "redo"):
                raise BadInput(f"entry {log_id} is itself an {entry.command}; undo or redo entry {entry.undo_of}")
            return entry
        other = None  # the latest entry of another actor that the default passes over
        for entry in self.store.curation_log(self.scope):
            if entry.command in ("undo", "redo") or bool(entry.undone_at) != want_undone:
                continue
            if entry.actor == self.actor:
                return entry
            other = other or entry
        verb = "redo" if want_undone else "undo"
        if other is None:
            raise BadInput(f"nothing to {verb}")
        target = f" {other.target_type} {other.target_id}" if other.target_id is not None else ""
        raise BadInput(f"nothing to {verb} by the {self.actor}: the latest entry, {other.id} ({other.command}"
                       f"{target} by the {other.actor}, {other.created_at}), is not the {self.actor}'s; "
                       f"{verb} it by its id: memlens {verb} {other.id}")
