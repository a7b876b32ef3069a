"""The read-only views the inspector and the CLI show, as MemoryEngine methods.

The UI reaches the engine only through MemoryEngine: it never holds a Store, so the store's
tables and queries can change without a pane changing. Each method here is one store read under
the name the panes already use, in the caller's scope (the first argument) unless it is about the
whole file (`scopes`, `scope_sizes`, `trace_scope`, benchmark runs). They are thin on purpose: a
read with domain logic (recall, explain, show, profile) lives in MemoryEngine itself.

Every method is safe to call from any thread (the Store gives each thread its own connection).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .scope import Scope
from .store import bench as bench_sql
from .store.browse import MemoryFilter
from .store.changes_probe import Changes, ChangeSignal, Probe, probe_changes
from .store.store import Store


class InspectorReads:
    """Mixed into MemoryEngine (engine/memory.py), which provides `store` and `path`."""

    store: Store
    path: Path

    # the file -------------------------------------------------------------------------------------------
    def scopes(self) -> list[Scope]:
        """Every scope that holds a document or a memory."""
        return self.store.scopes()

    def scope_sizes(self) -> list[tuple[Scope, int]]:
        """(scope, memories) for every scope, largest first."""
        return self.store.scope_sizes()

    def exposure(self) -> str | None:
        """Why other users can read this database file, or None when only its owner can."""
        exposed: str | None = self.store.db.exposure()
        return exposed

    def embedder_record(self) -> dict[str, Any] | None:
        """{"provider", "model", "dims"} of the model that wrote the stored vectors (None: none yet)."""
        raw = self.store.get_meta("embedder")
        return json.loads(raw) if raw else None

    def change_signal(self) -> ChangeSignal:
        """A dedicated read-only connection whose signature() moves when anyone commits (live refresh).
        The caller closes it."""
        return ChangeSignal(self.path)

    def probe_changes(self, scope: Scope | None, previous: Probe | None) -> tuple[Probe, Changes]:
        """Which tables changed since `previous`, and how many new memories are in `scope`."""
        return probe_changes(self.store, scope, previous)

    # memories (the browser) -------------------------------------------------------------------------------
    def browse_memories(self, scope: Scope, flt: MemoryFilter | None = None, *, after_id: int | None = None,
                        limit: int = 500) -> list[dict[str, Any]]:
        """One keyset page of memories matching `flt`, after `after_id` in the filter's order."""
        return self.store.browse_memories(scope, flt, after_id=after_id, limit=limit)

    def count_memories(self, scope: Scope, flt: MemoryFilter | None = None) -> int:
        return self.store.count_memories(scope, flt)

    def memory_rank(self, scope: Scope, flt: MemoryFilter | None, memory_id: int) -> int | None:
        """The row a memory has under `flt` (None: the filter hides it)."""
        return self.store.memory_rank(scope, flt, memory_id)

    def memory_facets(self, scope: Scope, *, limit: int = 200) -> dict[str, list[str]]:
        """The values the browser's filter boxes offer (categories, source types, ...)."""
        return self.store.memory_facets(scope, limit=limit)

    def memory_ids_for_facts(self, scope: Scope, fact_ids: list[int]) -> dict[int, int]:
        """fact id -> its memory id."""
        return self.store.memory_ids_for_facts(scope, fact_ids)

    def memory_briefs(self, scope: Scope, memory_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """memory id -> {"kind", "text", "trust", "status"} for the ids in this scope."""
        return self.store.memory_briefs(scope, memory_ids)

    # facts, evidence, curation ----------------------------------------------------------------------------
    def fact(self, scope: Scope, fact_id: int) -> dict[str, Any] | None:
        return self.store.fact(scope, fact_id)

    def fact_by_memory(self, scope: Scope, memory_id: int) -> dict[str, Any] | None:
        return self.store.fact_by_memory(scope, memory_id)

    def facts_by_ids(self, scope: Scope, fact_ids: list[int]) -> dict[int, dict[str, Any]]:
        return {i: f.as_dict() for i, f in self.store.facts_by_ids(scope, fact_ids).items()}

    def turn_claims(self, scope: Scope, memory_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
        """episode memory -> the facts read from its chunk (any status): the claims a turn carried."""
        return self.store.turn_claims(scope, memory_ids)

    def evidence_spans(self, scope: Scope, memory_ids: list[int], *, context: int = 80
                       ) -> dict[int, list[dict[str, Any]]]:
        """memory id -> its source spans, each with `context` characters of the document around it."""
        return self.store.evidence_spans(scope, memory_ids, context=context)

    def conflict(self, scope: Scope, conflict_id: int) -> dict[str, Any] | None:
        return self.store.conflict(scope, conflict_id)

    def curation_log(self, scope: Scope, *, limit: int = 1000) -> list[dict[str, Any]]:
        """The audit log, newest first."""
        return [e.as_dict() for e in self.store.curation_log(scope, limit=limit)]

    # source spans -----------------------------------------------------------------------------------------
    def document_of(self, scope: Scope, kind: str, record_id: int) -> tuple[int, int | None] | None:
        """(document id, chunk id or None) that a memory, fact, chunk or document lives in."""
        return self.store.document_of(scope, kind, record_id)

    def span_view(self, scope: Scope, document_id: int) -> dict[str, Any] | None:
        """A document with every span of every memory drawn from it (the source-spans pane)."""
        return self.store.span_view(scope, document_id)

    # graph and timeline -----------------------------------------------------------------------------------
    def fact_subjects(self, scope: Scope) -> list[dict[str, Any]]:
        return self.store.fact_subjects(scope)

    def fact_predicates(self, scope: Scope, subject_key: str | None = None) -> list[dict[str, Any]]:
        return self.store.fact_predicates(scope, subject_key)

    def time_span(self, scope: Scope, *, belief: bool = False) -> tuple[str | None, str | None]:
        """The earliest and latest world time (belief=True: learned/invalidated time) of the facts."""
        return self.store.time_span(scope, belief=belief)

    def timeline_facts(self, scope: Scope, subject_key: str, predicate_key: str | None = None
                       ) -> list[dict[str, Any]]:
        """Every version of a subject's facts (one predicate, or all), for the version timeline."""
        return self.store.timeline_facts(scope, subject_key, predicate_key)

    def graph_facts(self, scope: Scope, *, statuses: Sequence[str] | None = None,
                    predicate_keys: Sequence[str] | None = None, since: str | None = None, until: str | None = None,
                    limit: int = 50000) -> list[dict[str, Any]]:
        """Facts (with their memory's trust) for the whole-scope graph, oldest first."""
        return self.store.graph_facts(scope, statuses=statuses, predicate_keys=predicate_keys, since=since,
                                      until=until, limit=limit)

    def graph_neighbourhood(self, scope: Scope, *, fact_ids: Sequence[int] = (), entity_keys: Sequence[str] = (),
                            hops: int = 1, statuses: Sequence[str] | None = None,
                            predicate_keys: Sequence[str] | None = None, since: str | None = None,
                            until: str | None = None, max_facts: int = 20000) -> dict[str, Any]:
        """The facts within `hops` fact-to-fact steps (through shared entities) of the seed facts or
        entities, and the relations among them."""
        return self.store.graph_neighbourhood(scope, fact_ids=fact_ids, entity_keys=entity_keys, hops=hops,
                                              statuses=statuses, predicate_keys=predicate_keys, since=since,
                                              until=until, max_facts=max_facts)

    def graph_relations(self, scope: Scope, memory_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        return self.store.graph_relations(scope, memory_ids)

    def episodes_mentioning(self, scope: Scope, entity_keys: Sequence[str], *, limit: int = 2000
                            ) -> list[dict[str, Any]]:
        return self.store.episodes_mentioning(scope, entity_keys, limit=limit)

    def entity_keys_of_memory(self, scope: Scope, memory_id: int) -> list[str]:
        return self.store.entity_keys_of_memory(scope, memory_id)

    def entity_key(self, scope: Scope, entity_id: int) -> str | None:
        return self.store.entity_key(scope, entity_id)

    # traces -----------------------------------------------------------------------------------------------
    def traces(self, scope: Scope, *, limit: int = 200) -> list[dict[str, Any]]:
        """Stored retrieval traces, newest first (without their candidates)."""
        return self.store.traces(scope, limit=limit)

    def has_trace(self, scope: Scope, trace_id: int) -> bool:
        return self.store.trace(scope, trace_id) is not None

    def trace_scope(self, trace_id: int) -> Scope | None:
        """The scope a trace was recorded in, whichever it is (a benchmark container has its own)."""
        return self.store.trace_scope(trace_id)

    # benchmarks -------------------------------------------------------------------------------------------
    def bench_runs(self, *, limit: int = 200) -> list[dict[str, Any]]:
        """Stored benchmark runs, newest first."""
        return bench_sql.runs(self.store, limit=limit)

    def bench_run(self, run_id: int) -> dict[str, Any] | None:
        return bench_sql.run(self.store, run_id)

    def bench_items(self, run_id: int) -> list[dict[str, Any]]:
        """A run's questions with their metrics, trace ids and the container DB holding each trace."""
        return bench_sql.items(self.store, run_id)

    def gold_memory_ids(self, trace_id: int, turns: Sequence[str], sessions: Sequence[str]) -> tuple[int, ...]:
        """A benchmark question's gold turn (or, without turns, session) ids -> the memory ids they
        became in the scope of its trace (call it on the engine of the DB holding the trace:
        MemoryEngine.trace_db)."""
        scope = self.store.trace_scope(int(trace_id))
        if scope is None:
            return ()
        ids = self.store.memories_for_messages(scope, turns) if turns else []
        if not ids and sessions:
            ids = self.store.memories_for_sessions(scope, sessions)
        return tuple(ids)


__all__ = ["InspectorReads"]
