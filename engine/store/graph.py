"""SQL for the inspector's graph, timeline and trace panes (benchmark runs live in store/bench.py).

Every read is of user data and filters on the four scope columns; a relation is only returned
when both of its memories are in the scope too. `trace_scope` is the one lookup that returns
which scope owns a trace, so that a benchmark item (which names a trace in its container DB but
not the container's scope) can open it, scoped from then on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..scope import Scope
from .sql import dict_rows, same_scope, scope_where

_IN_CHUNK = 500

GRAPH_FACT_COLUMNS = (
    "f.id, f.memory_id, f.subject, f.predicate, f.object, f.subject_key, f.predicate_key, f.object_key,"
    " f.relation, f.status, f.confidence, f.category, f.valid_from, f.valid_to, f.learned_at, f.invalidated_at,"
    " f.forget_after, f.supersedes_fact_id, f.extraction_method, m.trust, m.pinned, m.forgotten_at, m.text")


_FACTS_FROM = f"SELECT {GRAPH_FACT_COLUMNS} FROM facts f JOIN memories m ON m.id = f.memory_id"


def _parts(ids: Sequence[Any]) -> Iterable[list[Any]]:
    ids = list(ids)
    for i in range(0, len(ids), _IN_CHUNK):
        yield ids[i:i + _IN_CHUNK]


class GraphReads:
    """Mixed into store.Store: `self.conn` and `self.db` exist."""

    conn: Any
    db: Any

    # facts with their times --------------------------------------------------------------------
    def _fact_filter(self, scope: Scope, *, statuses: Sequence[str] | None, predicate_keys: Sequence[str] | None,
                     since: str | None, until: str | None) -> tuple[str, list[Any]]:
        sql = f" WHERE {scope_where('f')} AND {same_scope('m', 'f')}"
        params: list[Any] = [*scope.as_params()]
        if statuses:
            sql += f" AND f.status IN ({','.join('?' * len(statuses))})"
            params += list(statuses)
        if predicate_keys:
            sql += f" AND f.predicate_key IN ({','.join('?' * len(predicate_keys))})"
            params += list(predicate_keys)
        # A fact is in a time window when its world-time validity overlaps it (open ends are open).
        if since:
            sql += " AND (f.valid_to IS NULL OR f.valid_to > ?)"
            params.append(since)
        if until:
            sql += " AND coalesce(f.valid_from, f.learned_at) <= ?"
            params.append(until)
        return sql, params

    def graph_facts(self, scope: Scope, *, statuses: Sequence[str] | None = None,
                    predicate_keys: Sequence[str] | None = None, since: str | None = None, until: str | None = None,
                    limit: int = 50000) -> list[dict[str, Any]]:
        """Facts (with their memory's trust) for the whole-scope graph, oldest first."""
        where, params = self._fact_filter(scope, statuses=statuses, predicate_keys=predicate_keys, since=since,
                                          until=until)
        return dict_rows(self.conn, _FACTS_FROM + f"{where} ORDER BY f.id LIMIT ?", (*params, limit))

    def graph_facts_by_id(self, scope: Scope, fact_ids: Sequence[int]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for part in _parts(sorted(set(fact_ids))):
            where, params = self._fact_filter(scope, statuses=None, predicate_keys=None, since=None, until=None)
            marks = ",".join("?" * len(part))
            out += dict_rows(self.conn, _FACTS_FROM + f"{where} AND f.id IN ({marks}) ORDER BY f.id", (*params, *part))
        return out

    def graph_relations(self, scope: Scope, memory_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """Live relations whose two memories are both in the scope (optionally: touching these memories)."""
        base = ("SELECT r.id, r.src_memory_id, r.dst_memory_id, r.type, r.confidence, r.created_by, r.rule"
                " FROM memory_relations r"
                f" JOIN memories a ON a.id = r.src_memory_id AND {same_scope('a', 'r')}"
                f" JOIN memories b ON b.id = r.dst_memory_id AND {same_scope('b', 'r')}"
                f" WHERE {scope_where('r')}"
                " AND r.removed_at IS NULL")
        if memory_ids is None:
            return dict_rows(self.conn, base + " ORDER BY r.id", scope.as_params())
        out: dict[int, dict[str, Any]] = {}
        for part in _parts(sorted(set(memory_ids))):
            marks = ",".join("?" * len(part))
            touching = f" AND (r.src_memory_id IN ({marks}) OR r.dst_memory_id IN ({marks}))"
            for row in dict_rows(self.conn, base + touching, (*scope.as_params(), *part, *part)):
                out[row["id"]] = row
        return [out[k] for k in sorted(out)]

    def _facts_touching(self, scope: Scope, keys: Sequence[str], where: str, params: list[Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for part in _parts(sorted(set(keys))):
            marks = ",".join("?" * len(part))
            sql = _FACTS_FROM + f"{where} AND (f.subject_key IN ({marks}) OR f.object_key IN ({marks}))"
            out += dict_rows(self.conn, sql,
                             (*params, *part, *part))
        return out

    def _facts_of_memories(self, scope: Scope, memory_ids: Sequence[int], where: str,
                           params: list[Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for part in _parts(sorted(set(memory_ids))):
            marks = ",".join("?" * len(part))
            out += dict_rows(self.conn, _FACTS_FROM + f"{where} AND f.memory_id IN ({marks})", (*params, *part))
        return out

    def graph_neighbourhood(self, scope: Scope, *, fact_ids: Sequence[int] = (), entity_keys: Sequence[str] = (),
                            hops: int = 1, statuses: Sequence[str] | None = None,
                            predicate_keys: Sequence[str] | None = None, since: str | None = None,
                            until: str | None = None, max_facts: int = 20000) -> dict[str, Any]:
        """The facts within `hops` fact-to-fact steps of the seeds, and the relations among them.

        One step goes from a fact to every fact that shares an entity with it (as subject or
        object) or a memory relation. Entity seeds start with the facts naming that entity (step
        0). Filters apply to every fact reached except the fact seeds themselves (a selected
        fact is always shown). `truncated` says the walk stopped at `max_facts`.
        """
        where, params = self._fact_filter(scope, statuses=statuses, predicate_keys=predicate_keys, since=since,
                                          until=until)
        facts: dict[int, dict[str, Any]] = {}
        hop_of: dict[int, int] = {}
        for row in self.graph_facts_by_id(scope, fact_ids):
            facts[row["id"]] = row
            hop_of[row["id"]] = 0
        for row in self._facts_touching(scope, entity_keys, where, params) if entity_keys else []:
            facts.setdefault(row["id"], row)
            hop_of.setdefault(row["id"], 0)
        frontier = list(facts.values())
        seen_keys: set[str] = set()
        truncated = False
        for hop in range(1, max(0, hops) + 1):
            if not frontier:
                break
            keys = {k for f in frontier for k in (f["subject_key"], f["object_key"])} - seen_keys
            seen_keys |= keys
            found = self._facts_touching(scope, sorted(keys), where, params) if keys else []
            mids = [f["memory_id"] for f in frontier]
            linked: set[int] = set()
            for rel in self.graph_relations(scope, mids):
                linked.update((rel["src_memory_id"], rel["dst_memory_id"]))
            linked -= {f["memory_id"] for f in facts.values()}
            if linked:
                found += self._facts_of_memories(scope, sorted(linked), where, params)
            nxt = []
            for row in found:
                if row["id"] in facts:
                    continue
                if len(facts) >= max_facts:
                    truncated = True
                    break
                facts[row["id"]] = row
                hop_of[row["id"]] = hop
                nxt.append(row)
            frontier = nxt
            if truncated:
                break
        ordered = [facts[k] for k in sorted(facts)]
        for row in ordered:
            row["hop"] = hop_of[row["id"]]
        relations = self.graph_relations(scope, [f["memory_id"] for f in ordered]) if ordered else []
        in_graph = {f["memory_id"] for f in ordered}
        relations = [r for r in relations if r["src_memory_id"] in in_graph and r["dst_memory_id"] in in_graph]
        return {"facts": ordered, "relations": relations, "truncated": truncated}

    def entity_keys_of_memory(self, scope: Scope, memory_id: int) -> list[str]:
        """Canonical names of the entities an (episode) memory mentions, for seeding a neighbourhood."""
        return [r[0] for r in self.conn.execute(
            "SELECT DISTINCT e.canonical FROM entity_mentions em JOIN entities e ON e.id = em.entity_id"
            f" WHERE em.memory_id = ? AND {scope_where('em')} AND {same_scope('e', 'em')}"
            " ORDER BY e.canonical", (memory_id, *scope.as_params()))]

    def entity_key(self, scope: Scope, entity_id: int) -> str | None:
        """The canonical name of an entity row (the key fact subjects and objects use)."""
        row = self.conn.execute(f"SELECT canonical FROM entities WHERE id = ? AND {scope_where()}",
                                (entity_id, *scope.as_params())).fetchone()
        return row[0] if row else None

    def episodes_mentioning(self, scope: Scope, entity_keys: Sequence[str], *, limit: int = 2000
                            ) -> list[dict[str, Any]]:
        """(entity canonical, episode memory id, text, trust, source_time) for episodes naming these entities."""
        out: list[dict[str, Any]] = []
        for part in _parts(sorted(set(entity_keys))):
            marks = ",".join("?" * len(part))
            out += dict_rows(
                self.conn,
                "SELECT DISTINCT e.canonical AS entity_key, m.id AS memory_id, m.text, m.trust, m.source_time,"
                " m.forgotten_at FROM entities e JOIN entity_mentions em ON em.entity_id = e.id"
                f" JOIN memories m ON m.id = em.memory_id AND {same_scope('m', 'e')}"
                f" WHERE {scope_where('e')}"
                f" AND e.canonical IN ({marks}) AND m.kind = 'episode' ORDER BY m.id LIMIT ?",
                (*scope.as_params(), *part, limit))
        return out[:limit]

    # timeline --------------------------------------------------------------------------------
    def fact_subjects(self, scope: Scope) -> list[dict[str, Any]]:
        """Every subject key with a display name (its most recent spelling) and how many fact versions it has."""
        return dict_rows(
            self.conn,
            "SELECT f.subject_key, (SELECT g.subject FROM facts g WHERE g.subject_key = f.subject_key AND"
            f" {same_scope('g', 'f')} ORDER BY g.id DESC LIMIT 1) AS subject, count(*) AS n"
            f" FROM facts f WHERE {scope_where('f')} GROUP BY f.subject_key ORDER BY n DESC, f.subject_key",
            scope.as_params())

    def fact_predicates(self, scope: Scope, subject_key: str | None = None) -> list[dict[str, Any]]:
        sql = (f"SELECT f.predicate_key, min(f.predicate) AS predicate, count(*) AS n FROM facts f WHERE {scope_where('f')}")
        params: list[Any] = [*scope.as_params()]
        if subject_key is not None:
            sql += " AND f.subject_key = ?"
            params.append(subject_key)
        return dict_rows(self.conn, sql + " GROUP BY f.predicate_key ORDER BY n DESC, f.predicate_key", tuple(params))

    def timeline_facts(self, scope: Scope, subject_key: str, predicate_key: str | None = None
                       ) -> list[dict[str, Any]]:
        """Every version of every fact about a subject (optionally one predicate), in version order."""
        where, params = self._fact_filter(scope, statuses=None, predicate_keys=[predicate_key] if predicate_key
                                          else None, since=None, until=None)
        return dict_rows(self.conn, f"SELECT {GRAPH_FACT_COLUMNS}, m.forget_after AS memory_forget_after"
                         f" FROM facts f JOIN memories m ON m.id = f.memory_id{where} AND f.subject_key = ?"
                         " ORDER BY f.predicate_key, coalesce(f.valid_from, f.learned_at), f.id",
                         (*params, subject_key))

    def time_span(self, scope: Scope, *, belief: bool = False) -> tuple[str | None, str | None]:
        """The earliest and latest world time of the scope: fact validity and memory source times.

        belief=True also counts belief and retention times (learned_at, invalidated_at,
        forget_after), which for imported history are often years after the world times.
        """
        sp = scope.as_params()
        lo, hi = [], []
        cols = ["valid_from", "valid_to"] + (["learned_at", "invalidated_at", "forget_after"] if belief else [])
        for col in cols:
            row = self.conn.execute(f"SELECT min({col}), max({col}) FROM facts WHERE {scope_where()}", sp).fetchone()
            if row[0]:
                lo.append(row[0])
                hi.append(row[1])
        row = self.conn.execute(f"SELECT min(source_time), max(source_time) FROM memories WHERE {scope_where()}",
                                sp).fetchone()
        if row[0]:
            lo.append(row[0])
            hi.append(row[1])
        if not lo and not belief:
            return self.time_span(scope, belief=True)
        return (min(lo) if lo else None, max(hi) if hi else None)

    # traces ----------------------------------------------------------------------------------
    def memory_briefs(self, scope: Scope, memory_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Text, kind, trust and fact status of memories, for labelling trace candidates."""
        out: dict[int, dict[str, Any]] = {}
        for part in _parts(sorted(set(memory_ids))):
            marks = ",".join("?" * len(part))
            for row in dict_rows(
                    self.conn,
                    "SELECT m.id, m.kind, m.text, m.trust, m.source_time, f.id AS fact_id, f.status"
                    " FROM memories m LEFT JOIN facts f ON f.memory_id = m.id"
                    f" WHERE m.id IN ({marks}) AND {scope_where('m')}", (*part, *scope.as_params())):
                out[row["id"]] = row
        return out

    def trace_scope(self, trace_id: int) -> Scope | None:
        """Which scope owns a trace (a benchmark item names a trace but not its scope)."""
        row = self.conn.execute("SELECT user_id, agent_id, scope_type, scope_id FROM retrieval_traces WHERE id = ?",
                                (trace_id,)).fetchone()
        return Scope(*row) if row else None

    def memories_for_messages(self, scope: Scope, message_ids: Sequence[str]) -> list[int]:
        """Memories sourced from chunks with these message ids (benchmark gold turns -> memory ids)."""
        out: set[int] = set()
        for part in _parts(sorted(set(message_ids))):
            marks = ",".join("?" * len(part))
            out.update(r[0] for r in self.conn.execute(
                "SELECT DISTINCT s.memory_id FROM memory_sources s JOIN chunks c ON c.id = s.chunk_id"
                f" WHERE c.message_id IN ({marks}) AND {scope_where('c')} AND {same_scope('s', 'c')}",
                (*part, *scope.as_params())))
        return sorted(out)

    def memories_for_sessions(self, scope: Scope, sessions: Sequence[str]) -> list[int]:
        """Memories sourced from messages of these sessions (message ids "<session>:<turn>"), for
        benchmark questions whose gold is given per session."""
        out: set[int] = set()
        for session in sorted(set(sessions)):
            out.update(r[0] for r in self.conn.execute(
                "SELECT DISTINCT s.memory_id FROM memory_sources s JOIN chunks c ON c.id = s.chunk_id"
                f" WHERE c.message_id >= ? AND c.message_id < ? AND {scope_where('c')} AND {same_scope('s', 'c')}",
                (session + ":", session + ";", *scope.as_params())))  # ';' sorts right after ':'
        return sorted(out)


__all__ = ["GraphReads"]
