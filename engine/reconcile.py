"""Reconciliation: active facts + new candidates -> decisions, each with its rule and reason.

A pure function (no I/O, no clock): the caller passes `now` and the facts that share a
subject/predicate key with the candidates, and applies the returned decisions. Candidates are
taken in order; a decision about one is visible to the next (a batch that says Berlin, then
Munich, ends with Munich current and Berlin superseded by it).

Rules (the names are stored with every decision and shown in the inspector):
  same_claim                reinforce: same subject, predicate and object
  explicit_update           the extractor saw a change ("moved to", "now"): supersede
  explicit_replacement      the source names the value it replaced ("switched from VS Code to
                            Neovim"): that value is superseded, even where several may hold;
                            when no fact holds it yet, it is stored as history behind the new one
  explicit_extends          an added detail: both stay active, linked
  derived_inference         an inference: kept apart, lower confidence, linked to premises
  multi_valued              likes / has_pet / knows ...: a new value is simply another value
  newer_source_supersedes   single-valued, different object, newer source: supersede
  older_source_is_history   single-valued, different object, older source: stored as history
  confident_disagreement    both >= conflict_confidence, no explicit change: review queue
  sensitive_needs_review    identity/security/finance/health below sensitive_confidence
  external_instruction      instruction-like text from an external source: not a fact
  new_fact                  nothing known yet for this subject and predicate
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .extract.canonical import MULTI_VALUED, objects_match
from .extract.instructions import instruction_span
from .extract.model import SENSITIVE_CATEGORIES, Candidate


@dataclass(frozen=True, slots=True)
class ReconcileConfig:
    conflict_confidence: float = 0.8  # both at least this sure and disagreeing -> review
    sensitive_confidence: float = 0.85  # identity/security/finance/health need this much
    derive_confidence_cap: float = 0.6  # an inference never outranks what it rests on
    reinforce_weight: float = 0.5  # share of the remaining doubt a repeat removes


@dataclass(frozen=True, slots=True)
class FactView:
    """The part of a stored fact that reconciliation reads."""

    id: int | str  # a stored fact's id, or "new:<index>" for one this batch inserts
    memory_id: int
    subject_key: str
    predicate_key: str
    object_key: str
    object: str
    confidence: float
    status: str
    valid_from: str | None
    learned_at: str
    category: str = "other"
    trust: str = "user"


@dataclass(slots=True)
class Decision:
    """What to do with candidate `index`.

    action: insert (a new fact with `status`), reinforce (`target` gains a source and
    confidence), skip (nothing stored). New facts are referred to by `ref` ("new:<index>")
    so later decisions in the same batch can point at them before they have ids.
    """

    index: int
    action: str  # insert | reinforce | skip
    rule: str
    reason: str
    status: str = "active"  # for insert: active | superseded | needs_review
    relation: str = "new"  # the relation stored on the new fact
    confidence: float = 0.0
    target: int | str | None = None  # reinforce: the fact; supersede/extend/conflict: the other fact
    supersedes: list[int | str] = field(default_factory=list)  # facts this one retires
    superseded_by: int | str | None = None  # older_source_is_history: the fact that retires this one
    links: list[tuple[str, int | str]] = field(default_factory=list)  # (type, other fact) relations to store
    conflict_with: int | str | None = None
    review: bool = False  # open a single-fact review item
    # explicit_replacement with nothing to supersede: store the replaced value (candidate.replaces)
    # as a superseded fact behind this one, so "what did I use before?" has an answer
    former: bool = False

    @property
    def ref(self) -> str:
        return f"new:{self.index}"


def reinforced_confidence(old: float, new: float, weight: float) -> float:
    """Diminishing returns: each repeat removes a share of the remaining doubt."""
    return min(0.99, old + (1.0 - old) * max(0.0, min(1.0, new)) * weight)


def _later(a: str | None, b: str | None) -> bool | None:
    """Is time a later than time b? None when either is unknown."""
    if not a or not b:
        return None
    return a > b


def reconcile(active: list[FactView], candidates: list[Candidate], *, user_keys: frozenset[str] = frozenset(),
              config: ReconcileConfig = ReconcileConfig()) -> list[Decision]:
    """Decide, for each candidate in order, how it meets what is already known.

    `active` holds the current (active or needs_review) facts sharing a subject/predicate key
    with some candidate. `user_keys` are the subject keys that mean the user themselves.
    """
    # Working set: (subject_key, predicate_key) -> current facts, including ones this batch adds.
    current: dict[tuple[str, str], list[FactView]] = {}
    for f in active:
        if f.status in ("active", "needs_review"):
            current.setdefault((f.subject_key, f.predicate_key), []).append(f)
    decisions: list[Decision] = []

    for i, cand in enumerate(candidates):
        key = (cand.subject_key, cand.predicate_key)
        here = current.setdefault(key, [])
        conf = cand.confidence

        if cand.trust == "external" and instruction_span(cand.evidence or cand.text) is not None:
            decisions.append(Decision(i, "skip", "external_instruction",
                                      "external text that reads as an instruction is never stored as a fact"))
            continue

        same = next((f for f in here if f.object_key == cand.object_key), None)
        if same is not None and cand.relation != "derives":
            decisions.append(Decision(
                i, "reinforce", "same_claim",
                f"repeats fact {same.id}: confidence {same.confidence:.2f} -> "
                f"{reinforced_confidence(same.confidence, conf, config.reinforce_weight):.2f}",
                confidence=reinforced_confidence(same.confidence, conf, config.reinforce_weight),
                target=same.id))
            here[here.index(same)] = replace(
                same, confidence=reinforced_confidence(same.confidence, conf, config.reinforce_weight))
            continue

        def view(status: str, c: float = conf, i: int = i, cand: Candidate = cand) -> FactView:
            """The batch's own new fact, as later candidates of the batch see it."""
            return FactView(
                id=f"new:{i}", memory_id=-1, subject_key=cand.subject_key, predicate_key=cand.predicate_key,
                object_key=cand.object_key, object=cand.object, confidence=c, status=status,
                valid_from=cand.valid_from, learned_at=cand.valid_from or "", category=cand.category, trust=cand.trust)

        sensitive = cand.category in SENSITIVE_CATEGORIES and conf < config.sensitive_confidence

        if cand.relation == "derives":
            capped = min(conf, config.derive_confidence_cap)
            d = Decision(i, "insert", "derived_inference",
                         f"an inference, kept apart at confidence {capped:.2f} (cap {config.derive_confidence_cap})",
                         status="active", relation="derives", confidence=capped)
            decisions.append(d)  # the caller links it to the premises it names
            here.append(view("active", capped))
            continue

        if sensitive:
            decisions.append(Decision(
                i, "insert", "sensitive_needs_review",
                f"{cand.category} facts need confidence >= {config.sensitive_confidence:.2f}; this has {conf:.2f}",
                status="needs_review", relation=cand.relation, confidence=conf, review=True))
            here.append(view("needs_review"))
            continue

        others = [f for f in here if f.object_key != cand.object_key]
        if cand.replaces_key and cand.relation == "updates":
            matched = [f for f in others if objects_match(f.object_key, cand.replaces_key)]
            if not matched and cand.predicate_key not in MULTI_VALUED:
                matched = others  # single-valued: what held before is what it replaced
            if matched:
                d = Decision(i, "insert", "explicit_replacement",
                             f"the source says it replaced '{cand.replaces}': "
                             + ", ".join(f"fact {f.id} ({f.object})" for f in matched) + " superseded",
                             relation="updates", confidence=conf, target=matched[-1].id)
                d.supersedes = [f.id for f in matched]
                d.links = [("updates", f.id) for f in matched]
            else:
                d = Decision(i, "insert", "explicit_replacement",
                             f"the source says it replaced '{cand.replaces}', which no fact held: stored as history",
                             relation="updates", confidence=conf, former=True)
            decisions.append(d)
            here[:] = [f for f in here if f not in matched]
            here.append(view("active"))
            continue
        if not others:
            decisions.append(Decision(i, "insert", "new_fact", "nothing known yet for this subject and predicate",
                                      relation=cand.relation if cand.relation != "updates" else "new",
                                      confidence=conf))
            here.append(view("active"))
            continue

        if cand.relation == "extends":
            d = Decision(i, "insert", "explicit_extends", "an added detail: both stay active",
                         relation="extends", confidence=conf, target=others[-1].id)
            d.links = [("extends", others[-1].id)]
            decisions.append(d)
            here.append(view("active"))
            continue

        if cand.predicate_key in MULTI_VALUED:
            decisions.append(Decision(i, "insert", "multi_valued",
                                      f"'{cand.predicate_key}' holds several values; a new one conflicts with none",
                                      relation="new", confidence=conf))
            here.append(view("active"))
            continue

        if cand.relation == "updates":
            d = Decision(i, "insert", "explicit_update",
                         "the source states a change: " + ", ".join(f"fact {f.id} ({f.object})" for f in others)
                         + " superseded", relation="updates", confidence=conf, target=others[-1].id)
            d.supersedes = [f.id for f in others]
            d.links = [("updates", f.id) for f in others]
            decisions.append(d)
            here[:] = [f for f in here if f not in others]
            here.append(view("active"))
            continue

        latest = max(others, key=lambda f: (f.valid_from or f.learned_at or ""))
        if conf >= config.conflict_confidence and latest.confidence >= config.conflict_confidence:
            decisions.append(Decision(
                i, "insert", "confident_disagreement",
                f"fact {latest.id} says '{latest.object}' ({latest.confidence:.2f}), this source says "
                f"'{cand.object}' ({conf:.2f}), and neither states a change",
                status="needs_review", relation="new", confidence=conf, conflict_with=latest.id))
            here.append(view("needs_review"))
            continue

        newer = _later(cand.valid_from, latest.valid_from or latest.learned_at)
        if newer is False:
            d = Decision(i, "insert", "older_source_is_history",
                         f"fact {latest.id} ('{latest.object}') comes from a newer source; this is stored as history",
                         status="superseded", relation="new", confidence=conf, superseded_by=latest.id)
            d.links = [("updates", latest.id)]
            decisions.append(d)
            continue
        d = Decision(i, "insert", "newer_source_supersedes",
                     f"a newer source says '{cand.object}'; " + ", ".join(f"fact {f.id} ('{f.object}')" for f in others)
                     + " superseded", relation="updates", confidence=conf, target=latest.id)
        d.supersedes = [f.id for f in others]
        d.links = [("updates", f.id) for f in others]
        decisions.append(d)
        here[:] = [f for f in here if f not in others]
        here.append(view("active"))

    return decisions
