"""Recipes: named, declarative retrieval configurations (the benchmark loops over them)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from ..errors import BadInput
from ..paths import resources_dir


@dataclass(frozen=True, slots=True)
class Recipe:
    name: str
    # candidate generation: how many each channel proposes
    vector_k: int = 100
    fts_k: int = 100
    entity_k: int = 50
    baseline_k: int = 5
    relation_hops: int = 1
    neighbour_window: int = 3  # episodes this many turns either side of a strong hit join as context
    neighbour_seeds: int = 10
    answer_factor: float = 1.0  # the turn right after a seed that asks something is its answer: this share of it
    # session context: a memory gains this times its document's best direct score, scaled by the
    # share of the candidates the document does not hold (one long conversation tells nothing)
    session_weight: float = 0.3
    # fusion: "weighted" (convex sum of per-channel min-max normalised scores) or "rrf"
    fusion: str = "weighted"
    weights: dict[str, float] = field(default_factory=lambda: {
        "vector": 0.5, "fts": 0.5, "entity": 0.15, "relation": 0.3, "neighbour": 0.5, "baseline": 0.05})
    rrf_k: int = 60
    # priors, added to the fused score
    confidence_weight: float = 0.05
    importance_weight: float = 0.03
    # Off: a newer-first prior over every memory lost on held-out folds of every file it moved
    # (LoCoMo conversations, the update scenarios' held-out half), and what it was meant for, the
    # newer statement of a changed claim leading, is done by the current-truth rules. A recipe
    # may still set it.
    recency_weight: float = 0.0
    recency_half_life_days: float = 180.0
    usage_weight: float = 0.02
    # Untrusted sources rank a little lower. The assistant's own turns are not: they are half of
    # the conversation ("what did you recommend?"), and ablation found the penalty hurt there.
    trust_penalty: dict[str, float] = field(default_factory=lambda: {
        "user": 0.0, "assistant": 0.0, "tool": 0.04, "external": 0.03})
    speaker_weight: float = 0.2  # who said it: turns by (facts about) a person the query names
    # the same for a side of the conversation the question speaks as ("what did I ...": the user's
    # turns; "you recommended": the assistant's). Its own weight: a first-person question in a
    # two-party chat points at one side far more surely than a name in a group chat points at that
    # person (LoCoMo's adversarial questions name the wrong one)
    side_weight: float = 0.2
    # memories inside the window a time in the query names ("on 9 May"; "two weeks ago" also fades out)
    timeframe_weight: float = 0.3
    when_weight: float = 0.1  # a "when" question: turns that name a time
    per_document_cap: int = 0  # >0: at most this many turns from one document before the others
    aggregate_cap: int = 2  # the same, only for questions that gather across sessions ("how many", "which first")
    fact_bonus: float = 0.05  # a fact distils its evidence: a small edge over the raw turn
    review_penalty: float = 0.1  # facts waiting for review rank below confirmed ones
    # current truth (features claim_superseded, restated_later, not_a_change, history_first in
    # engine/retrieve/intent.py; switched off by name like every feature): how restatements are compared
    restatement_pool: int = 20  # the best-scored turns compared with each other
    restatement_starts: int = 3  # chains followed from this many of the best-scored statements
    restatement_count_similarity: float = 0.5  # "how many ...?": a later count of the same thing, this close
    restatement_change_similarity: float = 0.1  # a change clause this close to the one claim it would replace
    restatement_state_similarity: float = 0.4  # a later statement of the same claim with no change word, in the top k
    restatement_answer_share: float = 0.8  # ... whose claim answers the question at least this well, relative
    restatement_similarity: float = 0.2  # cosine between the two statements, at least
    # a change clause must answer the question at least this well, relative to the statement it would
    # replace ("my wife's new job starts Monday" says nothing of "what's my wife's name?")
    restatement_change_answer_share: float = 0.12
    # asked_claim_only: where the question clearly asks one of the earlier turn's claims, a change
    # not clearly aligned to one must answer the question at least this well, relative to that claim
    restatement_claim_answer_share: float = 0.5
    # same_slot: a statement's claim answers the question at least this well (cosine), and two
    # claims without a shared word are in one slot when their vectors are at least this close
    slot_answer_similarity: float = 0.25
    slot_similarity: float = 0.4
    # ... and a reply is in the question's slot when the other speaker's question it answers is
    # at least this close to the question asked (question to question: "What do you do these
    # days?" for "What is my job?")
    slot_question_similarity: float = 0.4
    # later_leads: a later turn about the same thing is at least this share as close to the
    # question as the turn that would answer (turn vectors), and its clause most like the question
    # at least this share as close as that turn's best clause (clause vectors)
    later_answer_share: float = 0.8
    later_clause_share: float = 0.8
    derived_factor: float = 0.8  # inferences are scaled down, so they cannot tie verified facts
    trust_allowed: tuple[str, ...] = ("user", "assistant", "tool", "external")
    # the LLM stages run only when cheap retrieval is weak
    planner: bool = True
    reranker: bool = True
    weak_top_score: float = 0.35
    ambiguous_margin: float = 0.02
    llm_timeout_s: float = 8.0
    rerank_max: int = 24
    rerank_model: str = ""  # learned_rerank's model file ("": the shipped resources/recipes/rerank.json)
    order_model: str = ""  # learned_order's model file ("": the shipped resources/recipes/order.json)
    # output
    k: int = 10
    budget_tokens: int = 800
    # named features switched off (engine/retrieve/intent.py FEATURES): ablations, and recipes
    # that leave a rule out
    off: tuple[str, ...] = ()

    def on(self, feature: str) -> bool:
        return feature not in self.off

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# The weights `memlens bench fit` fits: (name, Recipe field; "weights.X" is a channel weight).
# The other parts of a score (confidence, importance, usage, trust, fact, review, pinned) and the
# current-truth ranking rules are correctness priors the benchmark files cannot identify: they stay as set.
FITTED = (("vector", "weights.vector"), ("fts", "weights.fts"), ("entity", "weights.entity"),
          ("relation", "weights.relation"), ("neighbour", "weights.neighbour"), ("baseline", "weights.baseline"),
          ("session", "session_weight"), ("speaker", "speaker_weight"), ("side", "side_weight"),
          ("timeframe", "timeframe_weight"), ("when_time", "when_weight"))
# Written by `memlens bench fit --write` (with the files, commit and figures it was fitted on).
FITTED_WEIGHTS = resources_dir() / "recipes" / "fitted.json"


def recipe_weights(recipe: Recipe) -> dict[str, float]:
    """The recipe's value of each fitted weight."""
    return {name: float(recipe.weights.get(name, 0.0)) if field.startswith("weights.") else float(getattr(recipe, field))
            for name, field in FITTED}


def overrides_for(weights: dict[str, float], recipe: Recipe) -> dict[str, Any]:
    """Recipe overrides that set `weights` (a recipe_weights-shaped dict)."""
    channel = dict(recipe.weights)
    out: dict[str, Any] = {}
    for name, where in FITTED:
        if where.startswith("weights."):
            channel[name] = float(weights[name])
        else:
            out[where] = float(weights[name])
    out["weights"] = channel
    return out


def _fitted(recipe: Recipe) -> Recipe:
    """`recipe` with the shipped fitted weights, when there are any."""
    try:
        doc = json.loads(FITTED_WEIGHTS.read_text(encoding="utf-8"))
        weights = {name: float(doc["fitted"][name]) for name, _ in FITTED}
    except (OSError, ValueError, KeyError, TypeError):
        return recipe
    return replace(recipe, **overrides_for(weights, recipe))


# Features built but not shipped on: a recipe or `--on NAME` switches them on.
# claim_match (issue 15's natural-talk round, tuned on half A of the -w2 dev batch): on the -w3
# batch, written after it, it put one more current value first (0.650 -> 0.667) and made one more
# false supersession (0.057 -> 0.071; `memlens bench updates --off claim_match`, dev:w3), and it
# did nothing on half B; a false supersession hides a value that still holds, so it stays off.
# same_slot (issue 15) was here until its reading of what is a plain assertion (statements.not_plain)
# held on data it was not tuned on: on the update scenarios' held-out half it now supersedes
# nothing that stays (false supersessions 0, current-first@1 as without it), and on dev it orders the
# changes said with no change word (0.907 -> 0.970).
# told_as_done, said_now and asides_below (issue 15's mechanisms round, developed on half A of the
# natural-talk dev scenarios: all of -w2 and the even-placed -w3) each put two more of half A's
# current values first (63 -> 69 of 90 together) and none of half B's (22 of 30 with and without
# them: `memlens bench updates --off NAME`, dev:half_a, dev:half_b): fitted to half A by the
# round's own rule, so they stay off. asides_below also cost LongMemEval dev's ce6d2d27 (a turn
# "looking for" cocktail ideas read as a search put the newest evidence below). older_mentions
# ships: it took one false supersession off half B (3 -> 2 of 36) and moved nothing else. On the -w4
# batch, written after the round and read by nobody tuning, the three together gave 0.533 -> 0.550
# with one false supersession more. learned_rerank: see engine/retrieve/rerank.py.
# learned_order: see engine/retrieve/order.py and the README's current-truth section (its fold table).
NOT_SHIPPED: tuple[str, ...] = ("claim_match", "told_as_done", "said_now", "asides_below", "learned_rerank",
                                "learned_order")

RECIPES: dict[str, Recipe] = {
    "default": _fitted(Recipe("default", off=NOT_SHIPPED)),
    "lexical": Recipe("lexical", weights={"vector": 0.0, "fts": 1.0, "entity": 0.0, "relation": 0.0, "neighbour": 0.0,
                                          "baseline": 0.0}, neighbour_window=0, planner=False, reranker=False),
    "vector": Recipe("vector", weights={"vector": 1.0, "fts": 0.0, "entity": 0.0, "relation": 0.0, "neighbour": 0.0,
                                        "baseline": 0.0}, neighbour_window=0, planner=False, reranker=False),
    "rrf": Recipe("rrf", fusion="rrf"),
    "offline": _fitted(Recipe("offline", planner=False, reranker=False, off=NOT_SHIPPED)),
    # the weights as set by hand before any fit: for comparison, and the base `bench fit` pulls towards
    "hand": Recipe("hand", planner=False, reranker=False, off=NOT_SHIPPED),
}


def switched_off(name: str | None, off: Iterable[str] = (), on: Iterable[str] = ()) -> list[str]:
    """Every feature off when a caller's `off` adds to the recipe's own list and `on` takes some of
    it back (recipes.NOT_SHIPPED stay off unless taken back), sorted: the list recall's `off` wants
    (it replaces the recipe's list; passed alone, an `off` would switch every feature the recipe
    leaves off on). Unknown recipe or feature names -> BadInput. The CLI's --off/--on, bench runs
    and bench misses all merge this way."""
    off, on = tuple(off), tuple(on)
    return sorted(get_recipe(name, off=sorted({*get_recipe(name).off, *off}), on=on).off)


def settable() -> dict[str, type]:
    """The Recipe fields `--set NAME=VALUE` may change, by type: the numbers and switches (the
    name, the feature list, the channel weights, the model files and k have their own options)."""
    kinds = {"int": int, "float": float, "bool": bool}  # the annotations (a float field may default to 30)
    return {f.name: kinds[str(f.type)] for f in fields(Recipe) if str(f.type) in kinds and f.name != "k"}


def parse_settings(pairs: Iterable[str]) -> dict[str, Any]:
    """{"NAME": value} from "NAME=VALUE" strings (the CLI's --set), each VALUE read as its field's
    type; BadInput in one line for an unknown name or a value of the wrong type."""
    types = settable()
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name or not text:
            raise BadInput(f"--set wants NAME=VALUE, got {pair!r}")
        kind = types.get(name)
        if kind is None:
            raise BadInput(f"--set: {name!r} is not a recipe setting (one of {', '.join(sorted(types))})")
        if kind is bool:
            low = text.casefold()
            if low not in ("true", "false", "1", "0", "on", "off"):
                raise BadInput(f"--set {name}: wants true or false, got {text!r}")
            out[name] = low in ("true", "1", "on")
            continue
        try:
            value = kind(text)
        except ValueError:
            raise BadInput(f"--set {name}: wants {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        if kind is float and not math.isfinite(value):
            raise BadInput(f"--set {name}: wants a finite number, got {text!r}")
        out[name] = value
    return out


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """(NAME, [values]) from "NAME=V1,V2,..." (the CLI's bench ablate --sweep), each value read as
    the field's type (parse_settings); BadInput in one line unless there are two distinct values."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    raw = [v.strip() for v in rest.split(",") if v.strip()]
    if not sep or not name or len(raw) < 2:
        raise BadInput(f"--sweep wants NAME=V1,V2,... with two values or more, got {text!r}")
    values = [parse_settings([f"{name}={v}"])[name] for v in raw]
    if len(set(values)) < len(values):
        raise BadInput(f"--sweep: a value of {name} is given twice")
    return name, values


def get_recipe(name: str | None, **overrides: Any) -> Recipe:
    recipe = RECIPES.get(name or "default")
    if recipe is None:
        raise BadInput(f"unknown recipe {name!r} (one of {', '.join(RECIPES)})")
    on = tuple(overrides.pop("on", None) or ())
    if "off" in overrides or on:
        from .intent import FEATURES

        off = tuple(overrides.get("off", recipe.off))  # `off` names every feature off; `on` takes some back
        unknown = [f for f in (*off, *on) if f not in FEATURES]
        if unknown:
            raise BadInput(f"unknown feature {unknown[0]!r} (one of {', '.join(FEATURES)})")
        overrides["off"] = tuple(f for f in off if f not in on)
    return replace(recipe, **overrides) if overrides else recipe
