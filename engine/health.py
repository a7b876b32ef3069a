"""Store health: what is wrong with this memory, check by check, each item with its evidence.

Every check is a pure function of the store (read through engine/store, always in one scope)
and a few parameters (`now`, a page). It returns how many items it found and one page of
them; each item names the record that explains it, the pane that shows it, and the curation
commands that fix it (engine/curate.py: merge, forget, open a conflict, retract a fact,
re-embed, remove an entity, expire, unpin), so the fix keeps its undo and its audit-log line.

The checks:

  duplicate_memories      two live memories with the same text, or vectors at cosine >= NEAR_COSINE
  duplicate_facts         two current facts making the same claim (same subject, predicate and
                          object after normalisation, or near-identical vectors from different evidence)
  unflagged_contradictions  a single-valued predicate with two active values and no open conflict
  unsupported_facts       evidence never verified in its span, or every source retracted or forgotten
  orphaned_derivations    derived facts whose premises are gone (or were never recorded)
  external_instructions   external content that reads as an instruction to the AI
                          (engine.reconcile's detector, the one that keeps such text out of facts)
  shaky_profile           profile lines resting on a fact below LOW_CONFIDENCE
  unsourced_memories      memories without a source span (or with a span outside its chunk)
  vector_problems         vectors missing, stale, or of another model than the store's
  fts_out_of_sync         full-text rows missing, orphaned or indexing other text than the row holds
  noisy_entities          entities that look like noise: a sentence-initial word, a span across a
                          sentence break, or a name mentioned in most memories
  overdue_forgetting      forget_after has passed and the memory is still current, or pinned

Near-duplicate vectors are found exactly up to EXACT_PAIRS_UPTO vectors; above that by random-
hyperplane hashing (bands of sign bits on mean-centred vectors, candidates filtered by the
Hamming distance of a 256-bit signature, then verified by their exact cosine), which reads each
vector once and finds about 95 % of the pairs at cosine 0.96 and 98 % at 0.97 (measured on 20k
anisotropic vectors by tests/engine/test_health.py; the bands narrow as the store grows).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .errors import BadInput
from .extract.canonical import MULTI_VALUED
from .extract.instructions import instruction_span
from .names import name_key, sentence_opener
from .profile import build_profile
from .records import Fact
from .scope import Scope
from .store.store import Store
from .timeutil import now_iso

Progress = Callable[[float, str], None]
ShouldStop = Callable[[], bool]

NEAR_COSINE = 0.96  # two memories at or above this cosine say the same thing
MIN_DUPLICATE_CHARS = 24  # shorter texts ("ok, thanks!") repeat for good reasons
LOW_CONFIDENCE = 0.6  # below this the extractor itself rated a fact little better than a guess
EVERYWHERE_SHARE = 0.3  # an entity in this share of the memories selects almost nothing
EVERYWHERE_MIN_MEMORIES = 50  # ... judged only on stores at least this large
EXACT_PAIRS_UPTO = 4096  # vectors compared all against all below this
SIGNATURE_BITS = 256
HAMMING_CUT = 50  # signature bits apart: about 35 degrees between centred vectors
DEFAULT_LIMIT = 200  # items returned per check (the count is always the total)
MAX_LISTED = 50  # records listed in one item's evidence (the item says how many there are)


@dataclass(slots=True)
class Fix:
    """One curation command that repairs an item: Curator.<command>(**args)."""

    command: str
    args: dict[str, Any]
    label: str


# The curation commands a fix may name (checked before the UI calls one).
FIX_COMMANDS = frozenset({"merge", "forget", "open_conflict", "retract_fact", "reembed", "remove_entity",
                          "expire_due", "pin", "rebuild_fts"})


@dataclass(slots=True)
class HealthItem:
    key: str  # stable across runs: the check's name and the ids involved
    summary: str
    target: dict[str, Any]  # {"kind": memory | fact | chunk | document | entity, "id": n}
    pane: str  # the inspector pane that explains it: spans | graph | timeline | memories | profile | conflicts
    evidence: dict[str, Any]
    fixes: list[Fix] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class CheckResult:
    name: str
    title: str
    count: int
    items: list[HealthItem]
    seconds: float = 0.0
    offset: int = 0
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "about": ABOUT[self.name], "count": self.count, "offset": self.offset,
                "seconds": round(self.seconds, 3), "note": self.note, "items": [i.as_dict() for i in self.items]}


@dataclass(slots=True)
class HealthReport:
    scope: Scope
    taken_at: str
    checks: dict[str, CheckResult]
    cancelled: bool = False
    seconds: float = 0.0
    recorded: int | None = None  # the trend row (health_trend's "id") this run was kept as; None if not kept

    def counts(self) -> dict[str, int]:
        return {name: r.count for name, r in self.checks.items()}

    def as_dict(self) -> dict[str, Any]:
        return {"scope": self.scope.as_dict(), "taken_at": self.taken_at, "cancelled": self.cancelled,
                "seconds": round(self.seconds, 3), "checks": {n: r.as_dict() for n, r in self.checks.items()}}


class _Stopped(Exception):
    pass


class CheckContext:
    """What the checks share in one run: the store, the scope, the page, and lazily computed reads
    that two checks use (current facts, near-duplicate vector pairs)."""

    def __init__(self, store: Store, scope: Scope, *, now: str, limit: int, offset: int,
                 should_stop: ShouldStop | None) -> None:
        self.store = store
        self.scope = scope
        self.now = now
        self.limit = limit
        self.offset = offset
        self.should_stop = should_stop  # the run's cancel check, for reads that loop over many rows
        self._facts: list[Fact] | None = None
        self._pairs: NearPairs | None = None
        self._fact_memory: dict[int, Fact] | None = None

    def stop_check(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise _Stopped

    def page(self, items: list[Any]) -> list[Any]:
        return items[self.offset:self.offset + self.limit]

    @property
    def embedder(self) -> dict[str, Any] | None:
        """{"provider", "model", "dims"} the store records as current, or None before any vector."""
        raw = self.store.get_meta("embedder")
        return json.loads(raw) if raw else None

    def current_facts(self) -> list[Fact]:
        if self._facts is None:
            self._facts = self.store.current_facts(self.scope)
        return self._facts

    def fact_of_memory(self, memory_id: int) -> Fact | None:
        if self._fact_memory is None:
            self._fact_memory = {f.memory_id: f for f in self.current_facts()}
        return self._fact_memory.get(memory_id)

    def near_pairs(self) -> NearPairs:
        """Live memories at cosine >= NEAR_COSINE (computed once per run: two checks use them)."""
        if self._pairs is None:
            emb = self.embedder
            self._pairs = NearPairs([], set()) if emb is None else near_duplicate_pairs(
                self.store, self.scope, emb["model"], int(emb["dims"]), should_stop=self.stop_check)
        return self._pairs


# --- near-duplicate vectors --------------------------------------------------------------------------

@dataclass(slots=True)
class NearPairs:
    pairs: list[tuple[int, int, float]]  # (memory a, memory b, cosine), a < b
    fact_memories: set[int]  # which of the compared memories hold a fact
    note: str | None = None  # how they were found, when that was approximate


def near_duplicate_pairs(store: Store, scope: Scope, model: str, dims: int, *, threshold: float = NEAR_COSINE,
                         should_stop: Callable[[], None] | None = None) -> NearPairs:
    """Pairs of live memories (of at least MIN_DUPLICATE_CHARS) whose vectors of this model are at
    cosine >= threshold."""
    planes = np.random.default_rng(23).standard_normal((dims, SIGNATURE_BITS)).astype(np.float32)
    ids_parts, sig_parts, kept = [], [], []
    fact_memories: set[int] = set()
    mean = None
    total = 0
    for ids, facts, mat in store.live_vector_blocks(scope, model, dims, min_chars=MIN_DUPLICATE_CHARS):
        if should_stop is not None:
            should_stop()
        fact_memories.update(ids[facts].tolist())
        if mean is None:  # centre on the first block's mean: embeddings share a direction that
            mean = mat.mean(axis=0)  # would put every vector in one bucket
            offset = mean @ planes
        total += len(ids)
        if total <= EXACT_PAIRS_UPTO:
            kept.append(mat)
        ids_parts.append(ids)
        proj = mat @ planes
        proj -= offset  # (mat - mean) @ planes, without a centred copy of the block
        sig_parts.append(np.packbits(proj > 0, axis=1))
    if total < 2:
        return NearPairs([], fact_memories)
    ids = np.concatenate(ids_parts)
    if total <= EXACT_PAIRS_UPTO:
        mat = np.concatenate(kept)
        norms = np.linalg.norm(mat, axis=1)
        sims = (mat @ mat.T) / np.maximum(np.outer(norms, norms), 1e-12)
        a, b = np.nonzero(np.triu(sims >= threshold, k=1))
        return NearPairs(sorted((int(min(ids[i], ids[j])), int(max(ids[i], ids[j])), float(sims[i, j]))
                                for i, j in zip(a, b)), fact_memories)
    sig = np.concatenate(sig_parts)
    candidates = _signature_candidates(sig, should_stop)
    if len(candidates) == 0:
        return NearPairs([], fact_memories, _lsh_note(total))
    ia, ib = candidates[:, 0], candidates[:, 1]
    wanted = sorted(set(ids[ia].tolist()) | set(ids[ib].tolist()))
    vectors = store.vectors_of(scope, wanted, model, dims)
    out = []
    for i, j in zip(ia.tolist(), ib.tolist()):
        va, vb = vectors.get(int(ids[i])), vectors.get(int(ids[j]))
        if va is None or vb is None:
            continue
        cos = float(np.dot(va, vb) / (np.linalg.norm(va) * np.linalg.norm(vb) or 1.0))
        if cos >= threshold:
            out.append((int(min(ids[i], ids[j])), int(max(ids[i], ids[j])), cos))
    return NearPairs(sorted(out), fact_memories, _lsh_note(total))


def _lsh_note(n: int) -> str:
    return (f"{n:,} vectors: near duplicates found by random-hyperplane hashing (about 95 % of the pairs at "
            f"cosine {NEAR_COSINE} are found, more above it); identical texts are always found")


def _signature_candidates(sig: np.ndarray, should_stop: Callable[[], None] | None) -> np.ndarray:
    """Row pairs (i < j) that share a band of signature bits and differ in at most HAMMING_CUT bits."""
    n = len(sig)
    # Buckets of about four rows: narrower bands collide more often, so more of them fit in the
    # signature and a near pair shares at least one more surely; the Hamming filter drops the rest.
    bits = min(24, max(10, math.ceil(math.log2(n)) - 2))
    bands = SIGNATURE_BITS // bits
    padded = np.pad(sig, ((0, 0), (0, 4)))  # a band may end in the last byte: read 4 bytes from anywhere
    words = np.ascontiguousarray(sig).view(np.uint64)  # the signature as 4 words
    found = []
    for band in range(bands):
        if should_stop is not None:
            should_stop()
        lo = band * bits
        first = lo // 8  # the band's bits sit inside these 4 bytes (bits <= 24, offset < 8), big-endian
        word = np.zeros(len(sig), dtype=np.uint32)
        for k in range(4):
            word |= padded[:, first + k].astype(np.uint32) << np.uint32(24 - 8 * k)
        keys = (word >> np.uint32(32 - lo % 8 - bits)) & np.uint32((1 << bits) - 1)
        order = np.argsort(keys)
        sorted_keys, sorted_words = keys[order], words[order]  # neighbours in memory, too
        first_word = np.ascontiguousarray(sorted_words[:, 0])
        for d in range(1, 64):  # members of one bucket sit next to each other once sorted
            at = np.flatnonzero(sorted_keys[d:] == sorted_keys[:-d])
            if not len(at):
                break
            # 64 bits first (a random pair differs in ~32 of them, a near one in ~1/5 of HAMMING_CUT's
            # share): only the few that pass pay for all 256
            at = at[np.bitwise_count(first_word[at] ^ first_word[at + d]) <= 2 * HAMMING_CUT // 4]
            at = at[np.bitwise_count(sorted_words[at] ^ sorted_words[at + d]).sum(axis=1, dtype=np.int64) <= HAMMING_CUT]
            if len(at):
                a, b = order[at], order[at + d]
                found.append(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1))
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    return np.unique(np.concatenate(found), axis=0)


class _Groups:
    """Union-find over ids: pairs join into groups."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self) -> list[list[int]]:
        out: dict[int, list[int]] = {}
        for x in list(self.parent):
            out.setdefault(self.find(x), []).append(x)
        return sorted((sorted(g) for g in out.values() if len(g) > 1), key=lambda g: g[0])


def _brief(text: str | None, n: int = 90) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


# --- the checks ---------------------------------------------------------------------------------------

def duplicate_memories(ctx: CheckContext) -> CheckResult:
    groups = _Groups()
    identical: set[int] = set()  # members that joined their group by identical text
    for ids in ctx.store.identical_memory_groups(ctx.scope, min_chars=MIN_DUPLICATE_CHARS):
        for other in ids[1:]:
            groups.join(ids[0], other)
        identical.update(ids)
    ctx.stop_check()
    near = ctx.near_pairs()
    best: dict[int, float] = {}
    for a, b, cos in near.pairs:
        if a in near.fact_memories or b in near.fact_memories:
            continue  # a fact sits close to the turn it was read from; facts have their own check
        groups.join(a, b)
        best[a], best[b] = max(best.get(a, 0.0), cos), max(best.get(b, 0.0), cos)
    found = groups.groups()
    page = ctx.page(found)
    members_of_page = [m for g in page for m in g[:MAX_LISTED]]
    briefs = ctx.store.memory_briefs(ctx.scope, members_of_page)
    spans = ctx.store.evidence_spans(ctx.scope, members_of_page, context=0)
    items = []
    for g in page:
        keep, drops = g[0], g[1:]
        members = []
        for m in g[:MAX_LISTED]:
            brief = briefs.get(m, {})
            src = (spans.get(m) or [{}])[0]
            members.append({"memory_id": m, "kind": brief.get("kind"), "text": brief.get("text"),
                            "source_time": brief.get("source_time"), "document_id": src.get("document_id"),
                            "document": src.get("title")})
        how = {str(d): "identical text" if d in identical and keep in identical else f"cosine {best.get(d, 1.0):.3f}"
               for d in drops[:MAX_LISTED]}
        fixes = [Fix("merge", {"keep": keep, "drop": d}, f"Merge #{d} into #{keep}") for d in drops[:3]]
        fixes += [Fix("forget", {"memory_id": d, "reason": f"duplicate of memory {keep}"}, f"Forget #{d}")
                  for d in drops[:3]]
        items.append(HealthItem(
            key=f"duplicate_memories:{'-'.join(map(str, g))}",
            summary=f"{len(g)} memories say the same ({', '.join(sorted(set(how.values())))}): "
                    f"“{_brief(briefs.get(keep, {}).get('text'), 70)}”",
            target={"kind": "memory", "id": keep}, pane="spans",
            evidence={"memories": members, "keep": keep, "how": how, "member_count": len(g)}, fixes=fixes))
    return CheckResult("duplicate_memories", TITLES["duplicate_memories"], len(found), items, note=near.note)


_ARTICLES = frozenset({"the", "a", "an", "my", "his", "her", "their", "our", "your"})


def object_norm(object_key: str) -> str:
    """An object compared as a claim: case, punctuation and leading articles do not make it another."""
    words = re.findall(r"\w+", object_key.casefold())
    while words and words[0] in _ARTICLES:
        words = words[1:]
    return " ".join(words)


def duplicate_facts(ctx: CheckContext) -> CheckResult:
    facts = ctx.current_facts()
    by_id = {f.id: f for f in facts}
    groups = _Groups()
    how: dict[tuple[int, int], str] = {}
    keyed: dict[tuple[str, str, str], list[int]] = {}
    for f in facts:
        keyed.setdefault((f.subject_key, f.predicate_key, object_norm(f.object_key)), []).append(f.id)
    for ids in keyed.values():
        for other in ids[1:]:
            groups.join(ids[0], other)
            how[(ids[0], other)] = "same subject, predicate and object"
    ctx.stop_check()
    near = ctx.near_pairs()
    for a, b, cos in near.pairs:
        fa, fb = ctx.fact_of_memory(a), ctx.fact_of_memory(b)
        if fa is None or fb is None or (fa.subject_key, fa.predicate_key) != (fb.subject_key, fb.predicate_key):
            continue
        if (fa.evidence or "") == (fb.evidence or ""):
            continue  # two facts read from one quote (likes jazz / likes hiking) embed alike: not the same claim
        groups.join(fa.id, fb.id)
        how.setdefault((min(fa.id, fb.id), max(fa.id, fb.id)), f"cosine {cos:.3f}")
    found = groups.groups()
    items = []
    for g in ctx.page(found):
        members = [by_id[i] for i in g]
        keep = max(members, key=lambda f: (f.confidence, -f.id))
        drops = [f for f in members if f.id != keep.id]
        why = sorted({v for (a, b), v in how.items() if a in g and b in g})
        fixes = [Fix("merge", {"keep": keep.memory_id, "drop": d.memory_id},
                     f"Merge fact #{d.id} into #{keep.id}") for d in drops[:3]]
        fixes += [Fix("retract_fact", {"fact_id": d.id, "reason": f"duplicate of fact {keep.id}"},
                      f"Retract fact #{d.id}") for d in drops[:3]]
        items.append(HealthItem(
            key=f"duplicate_facts:{'-'.join(map(str, g))}",
            summary=f"{len(g)} facts make one claim ({'; '.join(why)}): {keep.subject} · "
                    f"{keep.predicate} → {' / '.join(sorted({f.object for f in members}))}",
            target={"kind": "fact", "id": keep.id}, pane="graph",
            evidence={"facts": [_fact_brief(f) for f in members], "keep": keep.id, "how": why}, fixes=fixes))
    return CheckResult("duplicate_facts", TITLES["duplicate_facts"], len(found), items, note=near.note)


def _fact_brief(f: Fact) -> dict[str, Any]:
    return {"id": f.id, "memory_id": f.memory_id, "subject": f.subject, "predicate": f.predicate, "object": f.object,
            "status": f.status, "relation": f.relation, "confidence": f.confidence, "valid_from": f.valid_from,
            "valid_to": f.valid_to, "learned_at": f.learned_at, "evidence": f.evidence, "text": f.text}


def _overlap(a: Fact, b: Fact) -> bool:
    """Do two facts claim to hold at the same world time?"""
    a_from, b_from = a.valid_from or "", b.valid_from or ""
    return not ((a.valid_to and a.valid_to <= b_from) or (b.valid_to and b.valid_to <= a_from))


def unflagged_contradictions(ctx: CheckContext) -> CheckResult:
    active = [f for f in ctx.current_facts() if f.status == "active" and f.predicate_key not in MULTI_VALUED]
    linked = {frozenset((s, d)) for s, d, _t in ctx.store.relation_pairs(ctx.scope, ("extends", "updates", "derives"))}
    flagged = [set(p) - {None} for p in ctx.store.open_conflict_pairs(ctx.scope)]
    groups: dict[tuple[str, str], list[Fact]] = {}
    for f in active:
        groups.setdefault((f.subject_key, f.predicate_key), []).append(f)
    found = []
    for (_s, _p), group in sorted(groups.items()):
        pairs = []
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if object_norm(a.object_key) == object_norm(b.object_key):
                    continue  # the same value twice: duplicate_facts
                if frozenset((a.memory_id, b.memory_id)) in linked or not _overlap(a, b):
                    continue
                if any({a.id, b.id} <= c for c in flagged):
                    continue
                pairs.append((a, b))
        if pairs:
            found.append((group, pairs))
    items = []
    for group, pairs in ctx.page(found):
        first = group[0]
        fixes = [Fix("open_conflict", {"fact_a_id": a.id, "fact_b_id": b.id,
                                       "reason": f"two active values for single-valued '{a.predicate}':"
                                                 f" '{a.object}' and '{b.object}' (found by the health check)"},
                     f"Conflict #{a.id} vs #{b.id}") for a, b in pairs[:2]]
        fixes += [Fix("retract_fact", {"fact_id": f.id, "reason": "contradicted, retracted from the health view"},
                      f"Retract #{f.id} ({_brief(f.object, 16)})") for f in group[:2]]
        values = ", ".join(f"“{_brief(f.object, 30)}” (#{f.id})" for f in group[:4])
        items.append(HealthItem(
            key=f"unflagged_contradictions:{first.subject_key}:{first.predicate_key}",
            summary=f"{first.subject} · {first.predicate} has {len(group)} active values: {values}"
                    + (f" and {len(group) - 4} more" if len(group) > 4 else ""),
            target={"kind": "fact", "id": pairs[0][0].id}, pane="timeline",
            evidence={"facts": [_fact_brief(f) for f in group[:MAX_LISTED]],
                      "pairs": [[a.id, b.id] for a, b in pairs[:MAX_LISTED]], "pair_count": len(pairs),
                      "value_count": len(group)},
            fixes=fixes))
    return CheckResult("unflagged_contradictions", TITLES["unflagged_contradictions"], len(found), items)


def unsupported_facts(ctx: CheckContext) -> CheckResult:
    found = []
    for r in ctx.store.fact_support(ctx.scope):
        reasons = []
        if r["evidence_unverified"]:
            reasons.append("evidence_unverified")
        if r["sources"] and not r["live_sources"]:
            reasons.append("sources_retracted")
        elif r["turns"] and not r["live_turns"]:  # (a retracted document retracts its turns too)
            reasons.append("sources_forgotten")
        if reasons:
            found.append((r, reasons))
    page = ctx.page(found)
    facts = ctx.store.facts_by_ids(ctx.scope, [r["id"] for r, _ in page])
    spans = ctx.store.evidence_spans(ctx.scope, [r["memory_id"] for r, _ in page], context=0)
    gone = ctx.store.gone_turns(ctx.scope, [r["memory_id"] for r, _ in page])
    words = {"evidence_unverified": "its evidence was never found in the source span",
             "sources_retracted": "every source document is retracted",
             "sources_forgotten": "every turn it was read from is forgotten or retracted"}
    items = []
    for r, reasons in page:
        f = facts[r["id"]]
        items.append(HealthItem(
            key=f"unsupported_facts:{f.id}",
            summary=f"Fact #{f.id} “{_brief(f.text, 60)}”: " + "; ".join(words[x] for x in reasons),
            target={"kind": "fact", "id": f.id}, pane="spans",
            evidence={"fact": _fact_brief(f), "reasons": reasons, "quote": f.evidence,
                      "sources": [{"document_id": s["document_id"], "document": s["title"], "chunk_id": s["chunk_id"],
                                   "retracted_at": s["retracted_at"], "text": s["text"]} for s in spans.get(f.memory_id, [])],
                      "gone_turns": gone.get(f.memory_id, [])},
            fixes=[Fix("retract_fact", {"fact_id": f.id, "reason": "its support is gone (" + ", ".join(reasons) + ")"},
                       f"Retract fact #{f.id}"),
                   Fix("forget", {"memory_id": f.memory_id, "reason": "its support is gone"},
                       f"Forget fact #{f.id}")]))
    return CheckResult("unsupported_facts", TITLES["unsupported_facts"], len(found), items)


def orphaned_derivations(ctx: CheckContext) -> CheckResult:
    by_fact: dict[int, list[dict[str, Any]]] = {}
    for r in ctx.store.derivations(ctx.scope):
        by_fact.setdefault(r["fact_id"], []).append(r)
    found = []
    for rows in by_fact.values():
        premises = []
        for r in rows:
            if r["premise_memory_id"] is None:
                continue
            state = ("forgotten" if r["premise_forgotten_at"] else "retracted" if r["premise_retracted_at"]
                     else r["premise_status"] if r["premise_status"] not in (None, "active", "needs_review") else "current")
            premises.append({"memory_id": r["premise_memory_id"], "fact_id": r["premise_fact_id"],
                             "text": r["premise_text"], "state": state})
        gone = [p for p in premises if p["state"] != "current"]
        if gone or not premises:
            found.append((rows[0], premises, gone))
    items = []
    for r, premises, gone in ctx.page(found):
        why = ("no premise was recorded" if not premises else
               f"{len(gone)} of {len(premises)} premises gone: " + ", ".join(
                   f"#{p['fact_id'] or p['memory_id']} {p['state']}" for p in gone))
        items.append(HealthItem(
            key=f"orphaned_derivations:{r['fact_id']}",
            summary=f"Derived fact #{r['fact_id']} “{_brief(r['text'], 60)}”: {why}",
            target={"kind": "fact", "id": r["fact_id"]}, pane="graph",
            evidence={"fact_id": r["fact_id"], "text": r["text"], "premises": premises},
            fixes=[Fix("retract_fact", {"fact_id": r["fact_id"], "reason": f"derived from premises that are gone ({why})"},
                       f"Retract fact #{r['fact_id']}")]))
    return CheckResult("orphaned_derivations", TITLES["orphaned_derivations"], len(found), items)


def external_instructions(ctx: CheckContext) -> CheckResult:
    found = []
    for n, (mid, kind, text) in enumerate(ctx.store.external_memory_texts(ctx.scope)):
        if n % 2000 == 0:
            ctx.stop_check()
        span = instruction_span(text)
        if span is not None:
            found.append((mid, kind, text, span))
    items = []
    for mid, kind, text, (s, e) in ctx.page(found):
        items.append(HealthItem(
            key=f"external_instructions:{mid}",
            summary=f"Memory #{mid} ({kind}, external) reads as an instruction: “{text[s:e]}”",
            target={"kind": "memory", "id": mid}, pane="spans",
            evidence={"memory_id": mid, "kind": kind, "phrase": text[s:e], "start": s, "end": e,
                      "before": text[max(0, s - 80):s], "after": text[e:e + 120]},
            fixes=[Fix("forget", {"memory_id": mid, "reason": "external text that reads as an instruction to the AI"},
                       f"Forget #{mid}")]))
    return CheckResult("external_instructions", TITLES["external_instructions"], len(found), items)


def shaky_profile(ctx: CheckContext) -> CheckResult:
    profile = build_profile(ctx.store, ctx.scope)
    lines = profile.static + profile.dynamic
    facts = ctx.store.facts_by_ids(ctx.scope, sorted({i for line in lines for i in line.fact_ids}))
    found = []
    for line in lines:
        weak = sorted((facts[i] for i in line.fact_ids if i in facts and facts[i].confidence < LOW_CONFIDENCE),
                      key=lambda f: (f.confidence, f.id))
        if weak:
            found.append((line, weak))
    items = []
    for line, weak in ctx.page(found):
        w = weak[0]
        items.append(HealthItem(
            key=f"shaky_profile:{'-'.join(map(str, line.fact_ids))}",
            summary=f"Profile line “{_brief(line.text, 70)}” rests on fact #{w.id} at confidence {w.confidence:.2f}",
            target={"kind": "fact", "id": w.id}, pane="profile",
            evidence={"line": line.text, "section": line.section, "fact_ids": line.fact_ids,
                      "weak": [_fact_brief(f) for f in weak], "threshold": LOW_CONFIDENCE},
            fixes=[Fix("open_conflict", {"fact_a_id": w.id, "fact_b_id": None,
                                         "reason": f"the profile line rests on confidence {w.confidence:.2f}"},
                       f"Hold fact #{w.id} for review"),
                   Fix("retract_fact", {"fact_id": w.id, "reason": "low confidence, retracted from the health view"},
                       f"Retract fact #{w.id}")]))
    return CheckResult("shaky_profile", TITLES["shaky_profile"], len(found), items)


def unsourced_memories(ctx: CheckContext) -> CheckResult:
    total, rows = ctx.store.unsourced_memories(ctx.scope, limit=ctx.limit, offset=ctx.offset)
    items = []
    for r in rows:
        why = "no source span" if not r["sources"] else "a source span outside its chunk (or on a missing chunk)"
        items.append(HealthItem(
            key=f"unsourced_memories:{r['id']}",
            summary=(f"Memory #{r['id']} ({r['kind']}, via {r['extraction_method'] or 'ingest'}) has {why}: "
                     f"“{_brief(r['text'], 60)}”"),
            target={"kind": "memory", "id": r["id"]}, pane="memories",
            evidence={"memory_id": r["id"], "kind": r["kind"], "text": r["text"], "trust": r["trust"],
                      "sources": r["sources"], "created_at": r["created_at"], "why": why},
            fixes=[Fix("forget", {"memory_id": r["id"], "reason": "no source span supports it"}, f"Forget #{r['id']}")]))
    return CheckResult("unsourced_memories", TITLES["unsourced_memories"], total, items)


def vector_problems(ctx: CheckContext) -> CheckResult:
    emb = ctx.embedder
    model, dims = (emb["model"], int(emb["dims"])) if emb else (None, None)
    total, rows = ctx.store.vector_problems(ctx.scope, model, dims, limit=ctx.limit, offset=ctx.offset)
    items = []
    for r in rows:
        if r["embedding_id"] is None:
            why = "missing"
        elif r["stale"] == 1 or (model and r["model"] != model):
            why = "other_model"
        elif r["stale"] == 2:
            why = "outdated"
        else:
            why = "other_dims"
        words = {"missing": "has no vector", "other_model": f"has a vector of {r['model']}, not {model}",
                 "outdated": "has a vector of an older text definition", "other_dims": f"has a {r['dims']}-d vector"}
        items.append(HealthItem(
            key=f"vector_problems:{r['id']}",
            summary=f"Memory #{r['id']} ({r['kind']}) {words[why]}: “{_brief(r['text'], 50)}”",
            target={"kind": "memory", "id": r["id"]}, pane="memories",
            evidence={"memory_id": r["id"], "why": why, "vector": None if why == "missing" else {
                          k: r[k] for k in ("provider", "model", "dims", "stale", "embedded_at")},
                      "store_embedder": emb},
            fixes=[Fix("reembed", {"memory_ids": [r["id"]]}, f"Re-embed #{r['id']}")]))
    return CheckResult("vector_problems", TITLES["vector_problems"], total, items)


def fts_out_of_sync(ctx: CheckContext) -> CheckResult:
    found = []
    for table in ("memories", "chunks"):
        ctx.stop_check()
        rows = ctx.store.fts_rows_out_of_sync(ctx.scope, table, should_stop=ctx.should_stop)
        for problem in ("missing", "changed", "orphaned"):
            found += [(table, problem, rid) for rid in rows[problem]]
    ctx.stop_check()
    words = {"missing": "is not in the full-text index", "changed": "is indexed with other text than it holds now",
             "orphaned": "is in the full-text index but no longer in the table"}
    items = []
    for table, problem, rid in ctx.page(found):
        kind = "memory" if table == "memories" else "chunk"
        items.append(HealthItem(
            key=f"fts_out_of_sync:{table}:{rid}",
            summary=f"{kind.capitalize()} #{rid} {words[problem]} ({table}_fts)",
            target={"kind": kind, "id": rid}, pane="memories" if kind == "memory" else "spans",
            evidence={"table": table, "row_id": rid, "problem": problem},
            fixes=[Fix("rebuild_fts", {}, "Rebuild the full-text indexes")]))
    return CheckResult("fts_out_of_sync", TITLES["fts_out_of_sync"], len(found), items)


_SENTENCE_BREAK = re.compile(r"[.!?;]\s")
def noisy_entities(ctx: CheckContext) -> CheckResult:
    live = ctx.store.live_memory_count(ctx.scope)
    stats = ctx.store.entity_stats(ctx.scope)
    single = [e["id"] for e in stats if e["kind"] == "name" and e["memories"] == 1 and " " not in e["name"]]
    contexts = ctx.store.mention_contexts(ctx.scope, single)
    talking = {name_key(s) for s in ctx.store.speakers(ctx.scope)}
    found = []
    for e in stats:
        name = e["name"]
        if e["kind"] == "name" and (_SENTENCE_BREAK.search(name) or not (name[:1].isalnum() and name[-1:].isalnum())):
            found.append((e, "fragment", "a fragment across a sentence break or with punctuation"))
        elif (live >= EVERYWHERE_MIN_MEMORIES and e["memories"] >= EVERYWHERE_SHARE * live
              and e["kind"] != "person" and e["canonical"] not in talking):
            # the people talking are in every turn of theirs, by design
            found.append((e, "everywhere", f"mentioned in {e['memories']:,} of {live:,} memories "
                                           f"({e['memories'] / live:.0%}): as a key it selects almost nothing"))
        elif e["id"] in contexts and contexts[e["id"]] and all(
                sentence_opener(m["offset"], m["before"], m["after"]) for m in contexts[e["id"]]):
            found.append((e, "sentence_initial", "only ever the capitalised first word of a sentence"))
    items = []
    for e, reason, why in ctx.page(found):
        items.append(HealthItem(
            key=f"noisy_entities:{e['id']}",
            summary=f"Entity “{e['name']}” ({e['kind']}): {why}",
            target={"kind": "entity", "id": e["id"]}, pane="graph",
            evidence={"entity_id": e["id"], "name": e["name"], "kind": e["kind"], "reason": reason,
                      "memories": e["memories"], "mentions": e["mentions"], "live_memories": live,
                      "contexts": [m["context"] for m in contexts.get(e["id"], [])][:3]},
            fixes=[Fix("remove_entity", {"entity_id": e["id"]}, f"Remove entity “{_brief(e['name'], 24)}”")]))
    return CheckResult("noisy_entities", TITLES["noisy_entities"], len(found), items)


def overdue_forgetting(ctx: CheckContext) -> CheckResult:
    total, rows = ctx.store.overdue_memories(ctx.scope, ctx.now, limit=ctx.limit, offset=ctx.offset)
    items = []
    for r in rows:
        fixes = []
        if r["pinned"]:
            why = "pinned past its forget_after"
            fixes.append(Fix("pin", {"memory_id": r["id"], "pinned": False}, f"Unpin #{r['id']}"))
        elif r["fact_id"] is not None:
            why = f"a fact still {r['status'].replace('_', ' ')} past its forget_after"
            fixes.append(Fix("expire_due", {}, "Expire every overdue fact"))
        else:
            why = "past its forget_after and never forgotten"
        fixes.append(Fix("forget", {"memory_id": r["id"], "reason": f"forget_after {r['forget_after']} passed"},
                         f"Forget #{r['id']}"))
        items.append(HealthItem(
            key=f"overdue_forgetting:{r['id']}",
            summary=f"Memory #{r['id']} ({r['kind']}) is {why} ({r['forget_after'][:10]}): “{_brief(r['text'], 50)}”",
            target={"kind": "fact", "id": r["fact_id"]} if r["fact_id"] else {"kind": "memory", "id": r["id"]},
            pane="timeline" if r["fact_id"] else "memories",
            evidence={"memory_id": r["id"], "fact_id": r["fact_id"], "status": r["status"], "pinned": bool(r["pinned"]),
                      "forget_after": r["forget_after"], "now": ctx.now},
            fixes=fixes))
    return CheckResult("overdue_forgetting", TITLES["overdue_forgetting"], total, items)


TITLES = {
    "duplicate_memories": "Near-duplicate memories",
    "duplicate_facts": "Near-duplicate facts",
    "unflagged_contradictions": "Contradictions nobody flagged",
    "unsupported_facts": "Facts without live support",
    "orphaned_derivations": "Derived facts whose premises are gone",
    "external_instructions": "External text that reads as an instruction",
    "shaky_profile": "Profile lines on low-confidence facts",
    "unsourced_memories": "Memories without a source span",
    "vector_problems": "Vectors missing, stale or of another model",
    "fts_out_of_sync": "Full-text index out of sync",
    "noisy_entities": "Entities that look like noise",
    "overdue_forgetting": "Past forget_after, still current or pinned",
}

# What each check looks for and why an operator should care (shown with the check).
ABOUT = {
    "duplicate_memories": "Two live memories with the same text, or vectors at cosine >= "
                          f"{NEAR_COSINE}: recall spends two places on one thing. Merge keeps one with both sources.",
    "duplicate_facts": "Two current facts making one claim (same subject, predicate and object once case and "
                       "articles are set aside): the profile and recall count it twice.",
    "unflagged_contradictions": "A single-valued predicate (lives in, works at, ...) with two active values, "
                                "not linked as an extension and not in the review queue: recall may answer either.",
    "unsupported_facts": "A fact whose evidence was never found in its span, or whose every source document was "
                         "retracted, or every turn it was read from forgotten: it outlives its source.",
    "orphaned_derivations": "A derived fact whose premises were retracted, superseded, expired or forgotten "
                            "(or never recorded): the inference no longer stands.",
    "external_instructions": "Email, documents or tool output that read as an instruction to the AI "
                             "(reconciliation's detector): recall could hand it to the agent as context.",
    "shaky_profile": f"A profile line resting on a fact below confidence {LOW_CONFIDENCE}: the agent is always "
                     "told something the extractor barely believed. Hold it for review or retract it.",
    "unsourced_memories": "A memory without a source span (or with a span outside its chunk): nobody can say "
                          "where it came from.",
    "vector_problems": "A memory with no vector, one another model wrote, or one of an older text definition: "
                       "vector search cannot find it (or finds it by the wrong text). Re-embed it.",
    "fts_out_of_sync": "A row the full-text index lacks, holds after it was deleted, or indexed with other text "
                       "than it holds now: keyword search misses or misranks it. Rebuilding the index fixes it.",
    "noisy_entities": "An entity that is a sentence's first word, a fragment across a sentence break, or a name "
                      f"in more than {EVERYWHERE_SHARE:.0%} of memories: the entity channel and the graph get noise.",
    "overdue_forgetting": "A memory whose forget_after has passed but is still current (the expiry has not run) "
                          "or is pinned: it keeps coming back.",
}

CHECKS: dict[str, Callable[[CheckContext], CheckResult]] = {
    "duplicate_memories": duplicate_memories,
    "duplicate_facts": duplicate_facts,
    "unflagged_contradictions": unflagged_contradictions,
    "unsupported_facts": unsupported_facts,
    "orphaned_derivations": orphaned_derivations,
    "external_instructions": external_instructions,
    "shaky_profile": shaky_profile,
    "unsourced_memories": unsourced_memories,
    "vector_problems": vector_problems,
    "fts_out_of_sync": fts_out_of_sync,
    "noisy_entities": noisy_entities,
    "overdue_forgetting": overdue_forgetting,
}


def run_checks(store: Store, scope: Scope, *, checks: list[str] | None = None, limit: int = DEFAULT_LIMIT,
               offset: int = 0, now: str | None = None, progress: Progress | None = None,
               should_stop: ShouldStop | None = None) -> HealthReport:
    """Run the named checks (default: all) in this scope; each returns its count and one page of items.

    Stopping (should_stop) between or inside checks returns the checks finished so far, with
    `cancelled` set."""
    names = list(CHECKS) if checks is None else list(checks)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise BadInput(f"unknown health check {unknown[0]!r} (one of {', '.join(CHECKS)})")
    if limit < 0 or offset < 0:
        raise BadInput("limit and offset must not be negative")
    ctx = CheckContext(store, scope, now=now or now_iso(), limit=limit, offset=offset, should_stop=should_stop)
    report = HealthReport(scope=scope, taken_at=ctx.now, checks={})
    t0 = time.perf_counter()
    for i, name in enumerate(names):
        if progress is not None:
            progress(i / len(names), f"checking: {TITLES[name].lower()}")
        t = time.perf_counter()
        try:
            ctx.stop_check()
            result = CHECKS[name](ctx)
        except _Stopped:
            report.cancelled = True
            break
        result.seconds = time.perf_counter() - t
        result.offset = offset
        report.checks[name] = result
    report.seconds = time.perf_counter() - t0
    if progress is not None and not report.cancelled:
        progress(1.0, f"{len(report.checks)} checks, {sum(report.counts().values()):,} items")
    return report


__all__ = ["ABOUT", "CHECKS", "TITLES", "FIX_COMMANDS", "CheckResult", "Fix", "HealthItem", "HealthReport", "run_checks",
           "near_duplicate_pairs", "object_norm"]
