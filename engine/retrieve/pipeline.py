"""The recall pipeline: plan? -> candidates -> filters -> score -> rerank? -> rank -> budget.

Each stage writes into one Trace. Cheap retrieval runs first; the LLM planner and reranker
run only when it is weak (no results, a low top score, or an ambiguous top two) and only
when an endpoint is configured, each within a time budget and with a deterministic fallback.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache, partial
from typing import Any

import numpy as np

from ..embed.base import Embedder
from ..index.vectors import VectorIndex
from ..llm import LLMClient, Recorder
from ..memo import LRU, text_key
from ..names import find_mentions, name_key, sentence_opener
from ..scope import Scope
from ..statements import (
    CLAUSE_PARTS,
    NO_CLAIM,
    NO_VERB,
    PARSED_TRUST,
    RETURNS,
    RULES_VERSION,
    SOMEONE_ELSES,
    STAY_THAT_ENDS,
    TOLD_OF_PAST,
    UNSURE,
    WHERE_THEY_ARE,
    asks_state,
    clauses,
    content_words,
    decode_clauses,
    encode_clauses,
    encode_slot_readings,
    has_slot_reading,
    later_claims,
    parsed,
    prime_clauses,
    prime_slot_readings,
    returning,
    stopping,
    text_digest,
    told_done,
    turn_body,
)
from ..store.recall import ClauseRow, StoredParse
from ..store.store import Store
from ..timeutil import parse_iso, to_iso
from ..tokens import estimate_tokens, truncate_to_tokens
from . import timeframe
from .intent import read_intent, speaker_matches
from .order import apply as learned_order
from .order import load_model as load_order_model
from .query import content_terms, match_expression
from .recipes import NOT_SHIPPED, Recipe
from .rerank import apply as learned_rerank
from .rerank import load_model
from .trace import CandidateTrace, DropReason, Trace, lift_above

# Which of a turn's claims a question asks, and which one a later change concerns, must be clear
# by this much (cosine plus 0.15 a shared content word) for the change to count as another claim's.
CLAIM_MARGIN = 0.1
NAME_MENTIONS_READ = 32  # mentions read to tell a name from a sentence's capitalised first word
NAME_MENTIONS_FIRST = 4  # read first; the rest only when these are all sentence openers
# an entity's newest memories the channel counts: more than any benchmark container holds (at most
# 344 for one name), and a bound on the channel's work at 1M memories, where a name is in 100,000s
ENTITY_MEMORIES_READ = 2000
ENTITY_MAX_SHARE = 0.2  # an entity mentioned by more than this share of memories does not discriminate
# A term in more memories than both of these is left out of the FTS query: its postings cost
# tens of milliseconds at 100k-1M rows and add little to BM25 (PERF.md).
FTS_COMMON_DF = 2000
FTS_COMMON_SHARE = 0.002
FTS_MAX_TERMS = 8  # the rarest ones


def _said_before(stated: list[CandidateTrace], later: CandidateTrace) -> list[CandidateTrace]:
    """The statements an aside may go below: said earlier, in another conversation, by the same speaker."""
    return [c for c in stated if c.meta["source_time"] < later.meta["source_time"]
            and c.meta.get("document_id") != later.meta.get("document_id")
            and name_key(c.meta["speaker"]) == name_key(later.meta["speaker"])]


@dataclass(slots=True)
class RecallResult:
    trace: Trace
    results: list[dict[str, Any]] = field(default_factory=list)
    ranked_ids: list[int] = field(default_factory=list)  # the top k before the budget (retrieval metrics)
    # every candidate that passed the filters, best first: the top k, then those below the cut. A
    # ranking deeper than k, for metrics that widen k (LongMemEval's turn-to-session evaluation)
    ordered_ids: list[int] = field(default_factory=list)
    context_text: str = ""
    context_tokens: int = 0
    not_stored: str | None = None  # why the trace (and an agent's usage counts) could not be stored
    # turns' clauses, slot readings and clause vectors this recall made that the store did not
    # hold, written with the trace (memory_clauses)
    parses: list[ClauseRow] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"trace_id": self.trace.id, "results": self.results,
                "context": {"text": self.context_text, "tokens": self.context_tokens},
                "timings_ms": {**self.trace.timings, "total": round(sum(
                    v for k, v in self.trace.timings.items() if k != "total"), 3)},
                **({"trace_not_stored": self.not_stored} if self.not_stored else {})}


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


# A question said without its question mark, as chat often is ("so what's your favorite game",
# "did you end up going"): a question word or an auxiliary before the person asked.
_ASKS_UNMARKED = re.compile(
    r"(?i)\b(?:(?:what|which|who|where|when|why|how)(?:['’]?s\b|\s+(?:do|does|did|are|is|was|were|have|has|had|can"
    r"|could|would|will|should)\s+(?:you|u|ya|y['’]all|we|they|he|she|it)\b)"
    r"|(?:do|does|did|are|were|have|has|can|could|would|will|should)\s+(?:you|u|ya|y['’]all)\s+\w+)")


def _asks(text: str) -> bool:
    """Does this turn ask something, so that the next turn is likely its answer? ("Wow! How long
    have you had them?" asks too: the question need not end the turn; "so what's your favorite
    game" asks without its question mark.)"""
    return "?" in text or _ASKS_UNMARKED.search(text) is not None


RESTATEMENT_MIN_WORDS = 8
SHORT_QUESTION_WORDS = 6  # same_slot: a question this short asks about the turn before it
SIDES = frozenset({"user", "assistant"})  # intent.speakers' names for the two sides of a conversation


class _VectorMemo:
    """Vectors of the short texts the current-truth stage compares (a turn's clauses, its
    claims, the question with its names masked), kept per embedder model and kind across
    recalls: recall after recall meets the same best-scored turns, and embedding their clauses
    again was most of that stage's CPU (LoCoMo dev: 2.9 of 6.9 s of recall). Bounded; least
    recently used goes first."""

    MAX_TEXT_CHARS = 4000  # longer texts (a whole long turn) are kept under a digest, not as the key

    def __init__(self, size: int = 8192) -> None:
        self._vecs: LRU[tuple[str, int, str, str | bytes], np.ndarray] = LRU(size)

    @staticmethod
    def _model(embedder: Embedder, kind: str) -> tuple[str, int, str]:
        return getattr(embedder, "model", type(embedder).__name__), int(getattr(embedder, "dims", 0)), kind

    @classmethod
    def model_of(cls, embedder: Embedder) -> str:
        """The embedder's model as a stored clause vector names it (memory_clauses.vectors_model)."""
        name, dims, _ = cls._model(embedder, "passage")
        return f"{name}/{dims}"

    def peek(self, embedder: Embedder, texts: list[str]) -> dict[str, np.ndarray]:
        """The passage vectors of `texts` this process holds, embedding none."""
        model = self._model(embedder, "passage")
        found = ((t, self._vecs.get((*model, text_key(t, self.MAX_TEXT_CHARS)))) for t in texts)
        return {t: v for t, v in found if v is not None}

    def prime(self, embedder: Embedder, vecs: dict[str, np.ndarray]) -> None:
        """Serve these passage vectors (a store kept them, made by this model) as this process's own."""
        model = self._model(embedder, "passage")
        for t, v in vecs.items():
            self._vecs.put((*model, text_key(t, self.MAX_TEXT_CHARS)), v)

    def get(self, embedder: Embedder, texts: list[str], kind: str = "passage") -> dict[str, np.ndarray]:
        model = self._model(embedder, kind)
        out: dict[str, np.ndarray] = {}
        for t in texts:
            v = self._vecs.get((*model, text_key(t, self.MAX_TEXT_CHARS)))
            if v is not None:
                out[t] = v
        missing = [t for t in dict.fromkeys(texts) if t not in out]
        if missing:
            for t, v in zip(missing, embedder.embed(missing, kind=kind)):
                out[t] = v
                self._vecs.put((*model, text_key(t, self.MAX_TEXT_CHARS)), v)
        return out


CLAUSE_VECTORS = _VectorMemo()


def _clause_texts(body: str) -> dict[str, int]:
    """A turn's clause texts -> the index of the first clause with that text (clauses(body))."""
    out: dict[str, int] = {}
    for at, c in enumerate(clauses(body)):
        out.setdefault(c.text, at)
    return out


def _stored_vectors(row: StoredParse | None, model: str, body: str) -> dict[str, np.ndarray]:
    """The clause vectors a stored row keeps of `body` under `model`, by clause text."""
    if row is None or row.vectors is None or row.vectors_model != model or not row.vector_at:
        return {}
    try:  # a row that does not hold what it says (a damaged file) is not read: recall embeds again
        at = [int(i) for i in row.vector_at.split(",")]
        dims = int(model.rpartition("/")[2])
        if dims < 1 or len(row.vectors) != 4 * dims * len(at):
            return {}
    except ValueError:
        return {}
    mat = np.frombuffer(row.vectors, dtype="<f4").reshape(len(at), dims)
    parts = clauses(body)
    return {parts[i].text: mat[n] for n, i in enumerate(at) if 0 <= i < len(parts)}


def _clause_vectors(embedder: Embedder, body: str) -> dict[str, np.ndarray]:
    """The vectors of `body`'s clauses this process has embedded (float32 ones: what a row keeps)."""
    return {t: v for t, v in CLAUSE_VECTORS.peek(embedder, list(_clause_texts(body))).items()
            if v.dtype == np.float32}


def _encode_vectors(vecs: dict[str, np.ndarray], model: str, body: str) -> tuple[str | None, bytes | None, str | None]:
    """(model, float32 rows, their clause indices ascending) of `body`'s clause vectors (by clause
    text) for memory_clauses; (None, None, None) when there are none."""
    index = _clause_texts(body)
    at = sorted(index[t] for t in vecs if t in index)
    if not at:
        return None, None, None
    parts = clauses(body)
    mat = np.stack([vecs[parts[i].text] for i in at]).astype("<f4", copy=False)
    return model, mat.tobytes(), ",".join(map(str, at))


# The content terms of the clauses and claims the current-truth stage compares, by rule and text:
# same_slot read every clause of every pooled turn through the FTS tokenizer question after
# question (LoCoMo dev: ~10% of that stage's CPU, issue 21). Exact: a text's terms are a function
# of the text alone, since the tokenizer is the FTS index's (FTS_TOKENIZER, SQLite's own
# porter/unicode61, one for every store) and the word lists are constants. Frozen, so no caller
# changes what the next one reads.
_TERMS: LRU[tuple[str, str | bytes], frozenset[str]] = LRU(16384)
TERMS_TEXT_CHARS = 1024


def _slot_terms(store: Store, text: str) -> frozenset[str]:
    """same_slot's terms of a text: index terms of its words longer than two letters, not digits,
    not SLOT_FUNCTION words (memoised, see _TERMS)."""
    key = ("slot", text_key(text, TERMS_TEXT_CHARS))
    hit = _TERMS.get(key)
    if hit is None:
        from ..statements import SLOT_FUNCTION

        hit = frozenset(term for surface, term in store.fts_tokens(text) if len(term) > 2 and not term.isdigit()
                        and surface.casefold() not in SLOT_FUNCTION)
        _TERMS.put(key, hit)
    return hit


def _content_terms(store: Store, text: str) -> frozenset[str]:
    """content_terms of a text as a set (restated_later's words; memoised, see _TERMS)."""
    key = ("content", text_key(text, TERMS_TEXT_CHARS))
    hit = _TERMS.get(key)
    if hit is None:
        hit = frozenset(content_terms(text, store.fts_tokens))
        _TERMS.put(key, hit)
    return hit
# A text's duplicate key (case and spacing aside), by the text's own key: normalising the long
# turns a recall meets again (LongMemEval's assistant answers run to thousands of characters) was
# up to 10 ms of the score stage; a digest of the text is a fraction of that.
_DEDUPE_KEYS: LRU[str | bytes, str | bytes] = LRU(16384)
DEDUPE_TEXT_CHARS = 256


def _dedupe_key(text: str) -> str | bytes:
    """" ".join(text.casefold().split()), under a digest when it is long; memoised by text."""
    slot = text_key(text, DEDUPE_TEXT_CHARS)
    key = _DEDUPE_KEYS.get(slot)
    if key is None:
        key = text_key(" ".join(text.casefold().split()), DEDUPE_TEXT_CHARS)
        _DEDUPE_KEYS.put(slot, key)
    return key


OPENING_CHARS = 64  # of a text's duplicate form (case and spacing aside) that _opening gives


# _opening by text: the same texts come back recall after recall (the rows candidate_meta keeps
# are shared, so their strings' hashes are already computed), and reading each opening again was
# most of the dedupe stage. Emptied whole beyond OPENINGS_KEPT texts.
_OPENINGS: dict[str, str] = {}
OPENINGS_KEPT = 8192
# A context line's token estimate (+1 for its newline) by the line: the same best-scored
# memories render the same lines recall after recall. Emptied whole beyond OPENINGS_KEPT lines.
_LINE_TOKENS: dict[str, int] = {}


def _opening(text: str) -> str:
    """The first OPENING_CHARS characters of " ".join(text.casefold().split()), read from the
    text's start alone: normalising a prefix gives a prefix of the normalised text (casefold maps
    each character alone, and only the last word can be cut). Two texts with other openings are
    no duplicates, so most candidates never need their whole text normalised (_dedupe)."""
    head = " ".join(text[:4 * OPENING_CHARS].casefold().split())
    if len(head) < OPENING_CHARS and len(text) > 4 * OPENING_CHARS:  # mostly spacing: read it all
        head = " ".join(text.casefold().split())
    return head[:OPENING_CHARS]


QUANTITY = re.compile(r"\bhow\s+(?:many|long|much|often)\b", re.IGNORECASE)
# A question about an amount by its name ("what's my salary?"), not about a thing whose name holds
# a number ("what camera lens did I buy?" -> "a 50mm prime").
AMOUNT = re.compile(r"(?i)\b(?:salary|salaries|pay|wage|wages|income|earn|earnings|rent|mortgage|price|cost|costs"
                    r"|fee|fees|bill|budget|savings|balance|weight|weigh|height|age|score|rate|allowance)\b")
_COUNT_WORD = (r"\b(?:\d+(?:[.,:]\d+)?(?:k|m|bn|kg|lbs?|km|mi|%)?"  # 57k, 86kg
               r"|half|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|dozen|twenty|thirty|hundred"
               r"|second|third|fourth|fifth|sixth)\b")  # "a third cat" counts three
_COUNT = re.compile(rf"(?i)[^.!?\n]*{_COUNT_WORD}[^.!?\n]*")
_COUNTED = re.compile(rf"(?i){_COUNT_WORD}")


def _counts(text: str) -> str | None:
    """The first sentence of a turn that holds a number, or None. _COUNT's match starts in the
    sentence of the first number word (its opening [^.!?\n]* crosses no sentence end), so it is
    looked for from there: tried from every character of a long turn without a number, it read the
    rest of the sentence each time."""
    word = _COUNTED.search(text)
    if word is None:
        return None
    start = max(text.rfind(end, 0, word.start()) for end in ".!?\n") + 1
    m = _COUNT.search(text, start)
    return " ".join(m.group(0).split())[:160] if m else None


def updated_by(trace: Trace, memory_id: int) -> dict[str, Any] | None:
    """What replaced this memory for the trace's question, if recall judged it outdated:
    {"memory_id", "on", "text", "rule", "reason", "label": "updated on 2024-06-12 by m25: ..."}."""
    mark = (trace.params.get("outdated") or {}).get(str(memory_id))
    if not mark:
        return None
    text = mark["text"]
    for prefix in ("user: ", "assistant: "):
        text = text.removeprefix(prefix)
    label = f"updated on {mark['on']} by m{mark['by']}: {' '.join(text.split())[:120]}"
    return {"memory_id": mark["by"], "on": mark["on"], "text": mark["text"], "rule": mark["rule"],
            "reason": mark["reason"], "label": label}


_body = turn_body  # a turn's text without the "<speaker>: " prefix the chat importers put in front


def _top_k(trace: Trace) -> set[int]:
    """The ids of the k best-scored alive candidates, ties broken as _rank breaks them (the
    smaller id first): the current-truth rules move only turns of the top k, so recall@k stays."""
    return {c.memory_id for c in sorted(trace.alive(), key=lambda c: (-c.score, c.memory_id))[: trace.k]}


def _speaker_named(c: CandidateTrace) -> str | None:
    """The turn's speaker by name, None for the anonymous user ("user", "human", "me")."""
    return c.meta["speaker"] if c.meta["speaker"].casefold() not in ("user", "human", "me") else None


def _facts_by_chunk(trace: Trace) -> dict[Any, list[CandidateTrace]]:
    """chunk id -> the live fact candidates read from it."""
    out: dict[Any, list[CandidateTrace]] = {}
    for c in trace.alive():
        if c.meta.get("fact_id") is not None and c.meta.get("chunk_id") is not None:
            out.setdefault(c.meta["chunk_id"], []).append(c)
    return out


def _answer_group(turn: CandidateTrace, facts_of: dict[Any, list[CandidateTrace]]) -> list[CandidateTrace]:
    """The turn and its fact that would answer (the best-scored: "The user works at Initech" for
    "where do I work?", not "works as an accountant", which is more like the query's words): a
    turn's facts go where the turn goes."""
    facts = facts_of.get(turn.meta.get("chunk_id"), [])
    return [turn, max(facts, key=lambda f: f.score)] if facts else [turn]


# return_to_held: a clause that says the speaker is back in a state, or still or again in it;
# with no word beside these (and times) that the earlier statement does not hold, it names the
# value already held ("I'm back at the trust Monday")
_RETURN_NOISE = frozenset("""back again still now today tomorrow tonight week weekend month monday tuesday wednesday
thursday friday saturday sunday next this from on""".split())


VECTORS_CLOSE = "their vectors are close"  # same_slot's reason when only the claims' vectors tie them
# "before the e-bike", "before I joined Globex", "before Obsidian": the later value a history
# question names
BEFORE_VALUE = re.compile(r"(?i)\bbefore\s+(?:(?:the|my|our|i|we|he|she|they)\s+)?([^?.!]+)")


def _taken_back(change: dict[str, Any], turns: list[CandidateTrace], replaced: str = "") -> str | None:
    """The clause of a later turn among `turns`, by the same speaker as the change (a turn's or a
    fact's meta), that takes it back, or None: in the same conversation any take-back ("New number:
    07700 900999." then "Scratch that, same old number as before"); in a later conversation one
    that names the change or what it replaced (`replaced`: that statement's text): "We're moving to
    Munich!", a month later "Actually we're staying in Berlin"."""
    from ..statements import takes_back, takes_back_change

    speaker = name_key(change.get("speaker") or "")
    for c in turns:
        if not c.meta.get("speaker") or name_key(c.meta["speaker"]) != speaker:
            continue
        body = _body(c.meta["text"], c.meta["speaker"])
        if c.meta.get("document_id") == change.get("document_id"):
            if (c.meta.get("chunk_id") or 0) > (change.get("chunk_id") or 0) and (clause := takes_back(body)):
                return clause
        elif ((c.meta.get("source_time") or "") > (change.get("source_time") or "\uffff")
              and (clause := takes_back_change(body, f"{change.get('text') or ''} {replaced}"))):
            return clause
    return None


def _mask_people(text: str, people: Any) -> str:
    """`text` with the people a question names replaced by "someone": who is asked about says
    nothing about which of their claims is asked ("Where does Dana live now?" asks for a place)."""
    for name in people:
        text = re.sub(rf"(?i)\b{re.escape(name)}\b(?:['’]s)?", "someone", text)
    return text


@lru_cache(maxsize=65536)
def _when_at(value: str) -> datetime:
    """parse_iso, memoised: the same few thousand times are read recall after recall."""
    return parse_iso(value)


def _when(value: str) -> datetime | None:
    """A candidate's time, None when it is not ISO-8601 (it then counts as no time)."""
    try:
        return _when_at(value)
    except ValueError:
        return None


def _put_below(asides: dict[str, Any], aside: CandidateTrace, moved: list[CandidateTrace], head: CandidateTrace,
               below: list[CandidateTrace], rule: str, reason: str) -> None:
    """Put the memories of `moved` (the turn `aside` and the fact that answers for it) just below the
    lowest of `below` (`head`'s group), as the score component `rule`, and record why in `asides`
    (trace.params["asides"]); nothing when all of them are below it already."""
    floor = min(m.score for m in below)
    if max(m.score for m in moved) < floor:
        return
    for m in moved:
        if m.score >= floor:
            delta = floor - 1e-6 - m.score
            m.components[rule] = round(m.components.get(rule, 0.0) + delta, 6)
            m.score += delta
    asides[str(aside.memory_id)] = {"below": head.memory_id, "rule": rule, "on": aside.meta["source_time"][:10],
                                    "reason": reason}


# slot_claims' reasons that say only that no clause asserts a standing state, not that the turn
# speaks of a non-change (a plan, hope, visit, stay, retraction, addition, someone else's turn)
_UNASSERTED_ONLY = (NO_CLAIM, UNSURE + TOLD_OF_PAST, UNSURE + NO_VERB)


# slot_claims' readings of a turn that is about somewhere or someone else: asides_below
_ELSEWHERE = (WHERE_THEY_ARE, SOMEONE_ELSES)
# a turn framed as a supposition anywhere ("hypothetically if i went vegetarian", "say i moved the
# isa over"): told_as_done reads no event in it
_MODAL_TURN = re.compile(r"(?i)\b(?:if|unless|hypothetically|suppos(?:e|ing)|say\s+(?:i|we)|what\s+if|imagine)\b")


def _replace_by(marks: dict[str, dict[str, Any]], rule: str, old: list[CandidateTrace], by: CandidateTrace,
                by_group: list[CandidateTrace], what: str) -> None:
    """`by` (and the facts that answer with it, `by_group`) leads every memory of `old`, each
    marked as replaced by it under `rule` (trace.params["outdated"]), the reason "the same speaker
    later (<the day `by` was said>) <what>"."""
    top = max(m.score for m in old)
    for m in by_group:
        lift_above(m, top, rule)
    on = by.meta["source_time"][:10]
    for m in old:
        m.components.setdefault(rule, 0.0)
        marks[str(m.memory_id)] = {"by": by.memory_id, "rule": rule, "on": on, "text": by.meta["text"],
                                   "reason": f"the same speaker later ({on}) {what}"}


def _minmax(values: dict[int, float]) -> dict[int, float]:
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    if hi - lo < 1e-12:
        return {k: 1.0 for k in values}
    return {k: (v - lo) / (hi - lo) for k, v in values.items()}


class Recall:
    """One recall over one scope. Construct per query; `run()` returns a RecallResult."""

    def __init__(self, store: Store, scope: Scope, embedder: Embedder, vectors: VectorIndex | None,
                 recipe: Recipe, *,
                 llm: LLMClient | None = None, now: str | None = None, recorder: Recorder | None = None) -> None:
        self.store = store
        self.scope = scope
        self.embedder = embedder
        self.vectors = vectors  # for this scope and model
        self.recipe = recipe
        self.llm = llm
        self.recorder = recorder  # where the planner's and reranker's requests go (llm_calls)
        self.now = now

    # ----------------------------------------------------------------------------------------
    def run(self, query: str, *, k: int | None = None, as_of: str | None = None, origin: str = "operator",
            query_vector: np.ndarray | None = None, budget: int | None = None) -> RecallResult:
        r = self.recipe
        k = k or r.k
        trace = Trace(query=query, origin=origin, recipe=r.name, k=k, as_of=as_of)
        self._ref = self._reference_time(as_of)
        self._intent = read_intent(query, r.on, self.store.fts_tokens, ref=self._ref, as_of=as_of)
        trace.intent = self._intent.intent
        trace.params = {"k": k, "budget": budget or r.budget_tokens, "as_of": as_of, "intent": trace.intent,
                        "features": self._intent.fired}
        switched = [f for f in r.off if f not in NOT_SHIPPED]  # what this recall switched off
        if switched:
            trace.params["off"] = switched
        if any(f in r.off for f in NOT_SHIPPED):  # built, left off by every shipped recipe
            trace.params["not_shipped"] = [f for f in r.off if f in NOT_SHIPPED]
        # turns this recall looked up in memory_clauses: (memory id, text, said on, the stored row
        # or None, the clause vectors read from it), written back with what the recall added to
        # them (_stored_clauses, _new_parses)
        self._unstored: list[tuple[int, str, str | None, StoredParse | None, dict[str, np.ndarray]]] = []
        t0 = time.perf_counter()
        if query_vector is None:
            query_vector = self.embedder.embed([query], kind="query")[0]
        self._qvec = query_vector
        trace.timings["embed"] = round(_ms(t0), 3)

        self._candidates(trace, query_vector, extra_terms=[])
        self._filters(trace, as_of)
        self._score(trace, as_of)
        if self._weak(trace) and self.llm is not None and r.planner:
            self._plan(trace, query, query_vector, as_of)
        if self._weak(trace) and self.llm is not None and r.reranker:
            self._rerank(trace, query)
        ranked, order = self._rank(trace, k)
        result = self._budget(trace, ranked, budget or r.budget_tokens)
        result.ordered_ids = order
        result.parses = self._new_parses()
        return result

    def _new_parses(self) -> list[ClauseRow]:
        """The rows of memory_clauses this recall can add to: the parses, slot readings and clause
        vectors it made of the turns it looked up (self._unstored) that the store did not hold."""
        rows: list[ClauseRow] = []
        model = CLAUSE_VECTORS.model_of(self.embedder)
        for mid, body, said_on, row, kept in self._unstored:
            if not parsed(body):
                continue
            had = row.readings if row is not None else None
            readings = encode_slot_readings(body, said_on)
            if had is not None and readings is not None and readings != had:
                readings = json.dumps({**json.loads(had), **json.loads(readings)}, ensure_ascii=False,
                                      separators=(",", ":"))
            readings = readings or had
            vecs = kept | _clause_vectors(self.embedder, body)
            if row is None or readings != had or len(vecs) > len(kept):
                rows.append((mid, text_digest(body), RULES_VERSION, encode_clauses(clauses(body)), readings,
                             *_encode_vectors(vecs, model, body)))
        return rows

    # candidates -------------------------------------------------------------------------------
    def _candidates(self, trace: Trace, qvec: np.ndarray, *, extra_terms: list[str]) -> None:
        r = self.recipe
        t0 = time.perf_counter()
        before = len(trace.candidates)
        counts: dict[str, int] = {}

        ta = time.perf_counter()
        if r.on("vector") and r.weights.get("vector", 0) > 0 and self.vectors is not None:
            ids, scores = self.vectors.search(qvec, r.vector_k)
            for rank, (mid, s) in enumerate(zip(ids.tolist(), scores.tolist()), start=1):
                trace.candidate(mid).channels.setdefault("vector", {"rank": rank, "score": round(float(s), 6)})
            counts["vector"] = len(ids)
        trace.timings["vector"] = round(trace.timings.get("vector", 0) + _ms(ta), 3)

        ta = time.perf_counter()
        terms = self._intent.terms + [t for t in extra_terms if t]
        if r.on("fts") and r.weights.get("fts", 0) > 0:
            chosen = self._fts_terms(terms)
            trace.params["fts_terms"] = chosen
            match = match_expression(chosen)
            hits = self.store.fts_memories(self.scope, match, limit=r.fts_k) if match else []
            for rank, (mid, bm25) in enumerate(hits, start=1):
                trace.candidate(mid).channels.setdefault("fts", {"rank": rank, "score": round(-float(bm25), 6)})
            counts["fts"] = len(hits)
        trace.timings["fts"] = round(trace.timings.get("fts", 0) + _ms(ta), 3)

        ta = time.perf_counter()
        if r.on("entity") and r.weights.get("entity", 0) > 0:
            names = {m.canonical for m in find_mentions(trace.query)}
            trace.params["query_names"] = sorted(names)
            words = [name_key(w) for w in terms]
            names |= set(words) | {f"{a} {b}" for a, b in zip(words, words[1:])}
            known = self.store.entity_names(self.scope, sorted(names))
            total = max(1, len(self.vectors) if self.vectors is not None else 1)
            useful = self._names_in_sentence([n for n, c in known.items() if c <= max(50, ENTITY_MAX_SHARE * total)])
            named = self.store.entity_memories(self.scope, useful, r.entity_k, each=ENTITY_MEMORIES_READ) if useful else []
            for rank, (mid, n) in enumerate(named, start=1):
                trace.candidate(mid).channels.setdefault("entity", {"rank": rank, "score": float(n)})
            counts["entity"] = len(named)
            trace.params["entities"] = useful
        trace.timings["entity"] = round(trace.timings.get("entity", 0) + _ms(ta), 3)

        ta = time.perf_counter()
        if r.on("baseline") and r.baseline_k > 0 and r.weights.get("baseline", 0) > 0:
            base = self.store.baseline_memories(self.scope, r.baseline_k)
            for rank, (mid, s) in enumerate(base, start=1):
                trace.candidate(mid).channels.setdefault("baseline", {"rank": rank, "score": round(float(s), 6)})
            counts["baseline"] = len(base)
        trace.timings["baseline"] = round(trace.timings.get("baseline", 0) + _ms(ta), 3)

        ta = time.perf_counter()
        if r.on("relation") and r.relation_hops > 0 and r.weights.get("relation", 0) > 0:
            frontier = [c.memory_id for c in trace.candidates.values()]
            added = 0
            for hop in range(1, r.relation_hops + 1):
                edges = self.store.relation_edges(frontier)
                nxt = []
                for e in edges:
                    for src, dst in ((e["src_memory_id"], e["dst_memory_id"]), (e["dst_memory_id"], e["src_memory_id"])):
                        if src in trace.candidates and dst not in frontier:
                            cand = trace.candidate(dst)
                            if "relation" not in cand.channels:
                                cand.channels["relation"] = {"rank": hop, "score": round(float(e["confidence"]), 6),
                                                             "via": src, "type": e["type"]}
                                cand.meta["edge_scope"] = (e["user_id"], e["agent_id"], e["scope_type"], e["scope_id"])
                                nxt.append(dst)
                                added += 1
                frontier = nxt
                if not frontier:
                    break
            counts["relation"] = added
        trace.timings["relation"] = round(trace.timings.get("relation", 0) + _ms(ta), 3)

        self._load_meta(trace)
        trace.stage("candidates", before, len(trace.candidates), _ms(t0), channels=counts)

    def _names_in_sentence(self, names: list[str]) -> list[str]:
        """The names that are names: a speaker, an address, several capitalised words, or a word
        capitalised inside a sentence at least once. A word only ever capitalised as a sentence's
        first word ("Family is everything", "Bake at 180") is an ordinary word, and matching the
        question's words against it made the channel a noisy second keyword search.
        Each name's answer is the data's alone: it is kept while the data is unchanged
        (RecallReads.kept_rows), where reading a common word's mentions out of long turns was a
        tenth of a recall at 100k memories (issue 21)."""
        if not names:
            return []
        decided = self.store.kept_rows("names_in_sentence", self.scope, names, self._read_names_in_sentence)
        return sorted(name for name in names if decided[name]["name"])

    def _read_names_in_sentence(self, scope: Scope, names: list[str]) -> dict[str, dict[str, Any]]:
        """name -> {"name": whether it is one} (see _names_in_sentence), read from the store."""
        kinds = self.store.entity_kinds(scope, names)
        keep: list[str] = []
        check: dict[str, list[int]] = {}
        for name in names:
            filed = kinds.get(name, [])
            if " " in name or any(kind != "name" for _eid, kind in filed):
                keep.append(name)
            else:
                check[name] = [eid for eid, _kind in filed]
        # A name's first few mentions first: one inside a sentence settles it, and most names have
        # one among their first four; the others read their first NAME_MENTIONS_READ (the same
        # mentions in the same order: the mentions index orders them by memory).
        for each in (NAME_MENTIONS_FIRST, NAME_MENTIONS_READ):
            if not check:
                break
            contexts = self.store.mention_contexts(scope, [e for ids in check.values() for e in ids], each=each,
                                                   context=False)
            named = [name for name, ids in check.items()
                     if any(not sentence_opener(m["offset"], m["before"], m["after"])
                            for eid in ids for m in contexts.get(eid, []))]
            keep += named
            check = {name: ids for name, ids in check.items()
                     if name not in named and any(len(contexts.get(eid, [])) == each for eid in ids)}
        kept = set(keep)
        return {name: {"name": name in kept} for name in names}

    def _fts_terms(self, terms: list[str]) -> list[str]:
        """The query's rarest content words: common ones cost much and rank nothing (PERF.md)."""
        terms = list(dict.fromkeys(terms))
        if not terms:
            return []
        limit = max(FTS_COMMON_DF, FTS_COMMON_SHARE * self.store.memory_count_estimate())
        # counted only up to the limit: a common word's count reads its whole posting list
        df = self.store.fts_term_frequencies(terms, at_most=int(limit))
        present = [t for t in terms if df.get(t, 0) > 0]
        if not present:
            return []
        kept = [t for t in present if df[t] <= limit]
        if not kept:  # every word is common: the rarest, counted in full
            df = self.store.fts_term_frequencies(present)
            kept = [min(present, key=lambda t: df[t])]
        return sorted(kept, key=lambda t: df[t])[:FTS_MAX_TERMS]

    def _load_meta(self, trace: Trace) -> None:
        missing = [mid for mid, c in trace.candidates.items() if not c.meta.get("loaded")]
        meta = self.store.candidate_meta(self.scope, missing)
        for mid in missing:
            cand = trace.candidates[mid]
            row = meta.get(mid)
            if row is None:
                cand.meta["loaded"] = True
                cand.meta["missing"] = True
            else:
                cand.meta.update(row)
                cand.meta["loaded"] = True

    # filters ----------------------------------------------------------------------------------
    def _filters(self, trace: Trace, as_of: str | None, cands: list[CandidateTrace] | None = None) -> None:
        """Drop what must not be recalled, each with a typed reason. `cands`: only these (no stage row)."""
        t0 = time.perf_counter()
        alive_before = len(trace.alive())
        now = self.now
        for cand in (trace.alive() if cands is None else [c for c in cands if c.alive]):
            m = cand.meta
            if m.get("missing"):
                cand.drop("filters", DropReason.OUT_OF_SCOPE, "not in this scope (reached through a relation or "
                          "deleted since)")
                continue
            if m["retracted_at"] or m.get("status") == "retracted":
                cand.drop("filters", DropReason.RETRACTED, f"retracted at {m['retracted_at'] or m.get('invalidated_at')}")
                continue
            if m["forgotten_at"]:
                cand.drop("filters", DropReason.FORGOTTEN, f"forgotten at {m['forgotten_at']}: {m['forget_reason']}")
                continue
            if m["trust"] not in self.recipe.trust_allowed:
                cand.drop("filters", DropReason.TRUST_FILTERED, f"trust {m['trust']} is not allowed by the recipe")
                continue
            if as_of is not None:
                reason = self._not_valid_at(m, as_of)
                if reason:
                    cand.drop("filters", DropReason.NOT_VALID_AT, reason)
                continue
            status = m.get("status")
            forget_after = m.get("forget_after") or m.get("m_forget_after")
            if status == "expired" or (forget_after and now and forget_after <= now):
                cand.drop("filters", DropReason.EXPIRED, f"forget_after {forget_after} has passed")
                continue
            if status == "superseded" and trace.intent != "historical":
                cand.drop("filters", DropReason.SUPERSEDED,
                          f"superseded at {m['invalidated_at']}; shown as history of the current version")
        if cands is None:
            trace.stage("filters", alive_before, len(trace.alive()), _ms(t0))

    @staticmethod
    def _not_valid_at(m: dict[str, Any], t: str) -> str | None:
        if m.get("fact_id") is not None:
            if m["valid_from"] and m["valid_from"] > t:
                return f"valid from {m['valid_from']}, after {t}"
            if m["valid_to"] and m["valid_to"] <= t:
                return f"valid until {m['valid_to']}, before {t}"
            if m["learned_at"] and m["learned_at"] > t and not m["valid_from"]:
                return f"learned at {m['learned_at']}, after {t}"
            forget_after = m.get("forget_after") or m.get("m_forget_after")
            if forget_after and forget_after <= t:
                return f"forgotten after {forget_after}, before {t}"
            return None
        if m["source_time"] and m["source_time"] > t:
            return f"from {m['source_time']}, after {t}"
        return None

    # score ------------------------------------------------------------------------------------
    def _reference_time(self, as_of: str | None) -> datetime | None:
        ref = as_of or self.now or self.store.latest_source_time(self.scope)
        try:
            return parse_iso(ref) if ref else None
        except ValueError:
            return None

    def _neighbours(self, seeds: list[int], window: int) -> list[tuple[int, int, int]]:
        """store.neighbour_memories(scope, seeds, window), each seed's rows kept while the scope and
        the data are unchanged (store.kept_rows): the same best-scored turns are seeds question after
        question, and the join was ~5% of recall's CPU (LoCoMo dev, issue 21). A seed's neighbours
        are the same read alone or with others (the join is per seed), and the rows come in the
        order the store's query gives them, seed by seed in ascending id (its IN list's order), so
        ties in the neighbour channel resolve as before (tests/engine/test_pipeline.py compares
        the two on a store; tests.perf.same_rankings on the benchmarks)."""
        def read(scope: Scope, missing: list[int]) -> dict[int, dict[str, Any]]:
            found: dict[int, dict[str, Any]] = {}
            for seed, nb, offset in self.store.neighbour_memories(scope, missing, window):
                found.setdefault(seed, {"rows": []})["rows"].append((seed, nb, offset))
            return found

        kept = self.store.kept_rows(f"neighbours:{window}", self.scope, seeds, read)
        return [row for seed in sorted(kept) for row in kept[seed]["rows"]]

    def _score(self, trace: Trace, as_of: str | None) -> None:
        r = self.recipe
        t0 = time.perf_counter()
        alive = trace.alive()
        ref = self._ref
        intent = self._intent
        base = self._fuse(alive, exclude=("relation", "neighbour"))
        # Neighbour expansion: turns next to the strongest hits carry their context.
        if r.on("neighbour") and r.neighbour_window > 0 and r.weights.get("neighbour", 0) > 0:
            ranked = sorted((c for c in alive if c.meta.get("kind") == "episode"), key=lambda c: -base[c.memory_id])
            seeds = [c.memory_id for c in ranked[: r.neighbour_seeds] if base[c.memory_id] > 0]
            added = []
            texts = {c.memory_id: c.meta.get("text") or "" for c in alive}
            for seed, nb, offset in self._neighbours(seeds, r.neighbour_window):
                dist = abs(offset)
                value = base[seed] / (1.0 + dist)
                if r.on("answer_turn") and r.answer_factor > 0 and offset == 1 and _asks(texts.get(seed, "")):
                    value = base[seed] * r.answer_factor
                cand = trace.candidate(nb)
                prev = cand.channels.get("neighbour")
                if prev is None or value > prev["score"]:
                    cand.channels["neighbour"] = {"rank": dist, "score": round(value, 6), "via": seed}
                    if nb not in base:
                        added.append(nb)
            if added:
                self._load_meta(trace)
                self._filters(trace, as_of, [trace.candidates[m] for m in added])
                alive = trace.alive()
        # Relation hops inherit the strength of the candidate they came from.
        for cand in alive:
            rel = cand.channels.get("relation")
            if rel is not None:
                rel["score"] = round(float(rel["score"]) * base.get(int(rel["via"]), 0.0), 6)
        fused = self._fuse(alive, exclude=(), record=True)
        session: dict[Any, float] = {}
        if r.on("session_context") and r.session_weight > 0:
            # A document's context is its best direct match, worth less the more of the candidates
            # it holds: in one long conversation everything shares it, and it tells nothing.
            held: dict[Any, int] = {}
            for c in alive:
                doc = c.meta.get("document_id")
                if doc is not None:
                    session[doc] = max(session.get(doc, 0.0), base.get(c.memory_id, 0.0))
                    held[doc] = held.get(doc, 0) + 1
            session = {doc: best * (1.0 - held[doc] / len(alive)) for doc, best in session.items()}
        frame = intent.frame
        said: dict[int, list[dict[str, Any]]] = {}  # chunk id -> the times its text names
        event_matches: dict[str, str] = {}  # memory id -> the time it named that the question's window holds
        if frame is not None:
            trace.params["timeframe"] = [to_iso(frame.start), to_iso(frame.end)]
            if frame.fade:
                trace.params["timeframe_fade_days"] = round(frame.fade.total_seconds() / 86400.0, 2)
        if (frame is not None and r.on("event_times")) or intent.asks_when:
            said = self.store.chunk_times(self.scope, [c.meta["chunk_id"] for c in alive if c.meta.get("chunk_id")])
        # What every candidate's priors read, decided once a query: which priors are on, the
        # constant ones' values, a speaker's match (a prior closure called a dozen times a
        # candidate, and round() on every component, were a fifth of this stage: issue 21).
        on = r.on
        use = {name: on(name) for name in ("confidence", "importance", "recency", "usage", "trust", "fact_bonus",
                                           "review", "pinned", "speaker", "side", "timeframe", "when_time")}
        use_session = bool(session) and on("session_context")
        use_when = intent.asks_when and use["when_time"]
        read_times = frame is not None and on("event_times")
        people, sides = intent.speakers - SIDES, intent.speakers & SIDES
        matches: dict[str | None, tuple[bool, bool]] = {}
        log10 = math.log(10)
        rounded: dict[float, float] = {}  # a component's shown value (round(v, 6)), by value
        for cand in alive:
            m = cand.meta
            fusion = round(fused[cand.memory_id], 6)
            comp = {"fusion": fusion}
            x = m["x"] = {}  # each prior's raw value: comp = weight x value (bench fit reads these)
            if use["confidence"]:
                v = x["confidence"] = (m.get("fact_confidence") or m["confidence"]) - 0.5
                comp["confidence"] = r.confidence_weight * v
            if use["importance"]:
                v = x["importance"] = m["importance"] - 0.5
                comp["importance"] = r.importance_weight * v
            when = m.get("valid_from") or m.get("source_time") or m.get("created_at")
            at = _when(when) if when else None
            if use["recency"]:
                fresh = 0.0
                if ref is not None and at is not None:
                    age = max(0.0, (ref - at).total_seconds() / 86400.0)
                    fresh = 0.5 ** (age / r.recency_half_life_days)
                x["recency"] = fresh
                comp["recency"] = r.recency_weight * fresh
            if use_session:  # a fact shares the context of the document its evidence is in
                v = x["session"] = session.get(m.get("document_id"), 0.0)
                comp["session"] = r.session_weight * v
            if use["usage"]:
                v = x["usage"] = min(1.0, math.log1p(m["access_count"]) / log10)
                comp["usage"] = r.usage_weight * v
            if use["trust"]:
                v = x["trust"] = -r.trust_penalty.get(m["trust"], 0.0)
                comp["trust"] = 1.0 * v
            if use["fact_bonus"]:
                v = x["fact"] = 1.0 if m.get("fact_id") is not None else 0.0
                comp["fact"] = r.fact_bonus * v
            if use["review"]:
                v = x["review"] = -1.0 if m.get("status") == "needs_review" else 0.0
                comp["review"] = r.review_penalty * v
            if use["pinned"]:
                v = x["pinned"] = 1.0 if m["pinned"] else 0.0
                comp["pinned"] = 0.05 * v
            who = m.get("subject") if m.get("fact_id") is not None else m.get("speaker")
            # whom the question is about is read by the speaker_* features (intent.speakers): a
            # person it names, or a side it speaks as ("user" / "assistant")
            match = matches.get(who)
            if match is None:
                match = matches[who] = (speaker_matches(who, people), speaker_matches(who, sides))
            if use["speaker"]:
                v = x["speaker"] = 1.0 if match[0] else 0.0
                comp["speaker"] = r.speaker_weight * v
            if use["side"]:
                v = x["side"] = 1.0 if match[1] else 0.0
                comp["side"] = r.side_weight * v
            near = 0.0
            if frame is not None:
                if at is not None:
                    near = timeframe.closeness(frame, at)
                for t in said.get(m.get("chunk_id", 0), ()) if read_times else ():  # a time the turn names
                    close = timeframe.interval_closeness(frame, _when_at(t["window_start"]), _when_at(t["window_end"]))
                    if close > near:
                        near = close
                        event_matches[str(cand.memory_id)] = f"{t['text']}: {t['window_start'][:10]}"
            if use["timeframe"]:
                x["timeframe"] = near
                comp["timeframe"] = r.timeframe_weight * near
            if use_when:
                v = x["when_time"] = 1.0 if said.get(m.get("chunk_id", 0)) else 0.0
                comp["when_time"] = r.when_weight * v
            score = sum(comp.values())
            if m.get("relation") == "derives" and r.on("derived"):
                comp["derived_factor"] = r.derived_factor
                score = score * r.derived_factor - 1e-6
            shown: dict[str, float] = {}
            for name, v in comp.items():
                if v:  # 0.0 and -0.0 are their own rounding
                    rv = rounded.get(v)
                    if rv is None:
                        rv = rounded[v] = round(v, 6)
                    v = rv
                shown[name] = v
            cand.components = shown
            cand.score = score
        if event_matches:
            trace.params["event_times"] = event_matches
        if r.on("learned_rerank"):  # engine/retrieve/rerank.py; before the current-truth rules, which then order its result
            learned_rerank(trace, load_model(r.rerank_model or None))
        if r.on("version_cap"):
            self._order_versions(trace)
        self._current_truth(trace, as_of)
        if r.on("learned_order") and not as_of and trace.intent == "current" and asks_state(trace.query):
            # engine/retrieve/order.py: after the rules, on the pairs they left undecided
            learned_order(trace, load_order_model(r.order_model or None), self._qvec,
                          self.vectors.vectors_of if self.vectors is not None else (lambda ids: {}),
                          content_words(trace.query), partial(_answer_group, facts_of=_facts_by_chunk(trace)))
        if r.on("dedupe"):
            self._dedupe(trace)
        trace.stage("score", len(alive), len(trace.alive()), _ms(t0))

    def _fuse(self, cands: list[CandidateTrace], *, exclude: tuple[str, ...], record: bool = False
              ) -> dict[int, float]:
        """Weighted (or RRF) fusion of the channels; `record`: keep each channel's normalised
        value in meta["channel_x"] (bench fit reads them)."""
        r = self.recipe
        out = {c.memory_id: 0.0 for c in cands}
        channels = [ch for ch, w in r.weights.items() if w > 0 and ch not in exclude]
        for ch in channels:
            present = {c.memory_id: float(c.channels[ch]["score"]) for c in cands if ch in c.channels}
            if not present:
                continue
            if r.fusion == "rrf":
                # Scaled so rank 1 in a channel is worth its full weight, as in weighted fusion;
                # raw 1/(k + rank) values (~0.016) would let the priors decide everything.
                for c in cands:
                    if ch in c.channels:
                        out[c.memory_id] += r.weights[ch] * (r.rrf_k + 1) / (r.rrf_k + float(c.channels[ch]["rank"]))
                continue
            if ch in ("vector", "fts"):
                norm = _minmax(present)
                if ch == "vector":  # keep absolute meaning: a weak best match is not a 1.0
                    top = max(present.values())
                    norm = {k: v * max(0.0, top) for k, v in norm.items()}
            elif ch == "entity":
                top = max(present.values())
                norm = {k: v / top for k, v in present.items()}
            else:
                norm = {k: max(0.0, min(1.0, v)) for k, v in present.items()}
            for mid, v in norm.items():
                out[mid] += r.weights[ch] * v
            if record:
                for c in cands:
                    c.meta.setdefault("channel_x", {})[ch] = norm.get(c.memory_id, 0.0)
        return out

    def _order_versions(self, trace: Trace) -> None:
        """An old value never outranks the current one: cap superseded facts below their successor.
        Asked about the past (historical intent, feature history_first), the old version leads."""
        alive = {c.meta.get("fact_id"): c for c in trace.alive() if c.meta.get("fact_id") is not None}
        older_first = trace.intent == "historical" and self.recipe.on("history_first") and not trace.as_of
        for cand in list(alive.values()):
            prev = cand.meta.get("supersedes_fact_id")
            seen = set()
            current = cand
            while prev and prev in alive and prev not in seen:
                seen.add(prev)
                older = alive[prev]
                below, above = (current, older) if older_first else (older, current)
                if below.score >= above.score:
                    below.components["version_cap"] = round(above.score - below.score - 1e-6, 6)
                    below.score = above.score - 1e-6
                current = older
                prev = older.meta.get("supersedes_fact_id")

    # current truth ----------------------------------------------------------------------------
    def _current_truth(self, trace: Trace, as_of: str | None) -> None:
        """Outdated turns rank below what replaced them, each decision a named component with its
        reason in trace.params["outdated"] (memory -> {"by", "rule", "on", "text", "reason"}).

        claim_superseded: a turn is outdated for the claim the question asks about (the most
          query-like of the facts read from it) when that fact was superseded, whatever other facts
          it carried; it goes below the claim's current version. Historical intent: it leads it.
        restated_later: where no fact links them, a later turn by the same speaker that states a
          change (engine.statements) about the same thing (cosine, both among the best scored, the
          later one in the top k) leads an earlier statement, which stays right below it as history.
        same_slot: where neither links them, two statements by the same speaker that assert a value of
          the asked claim (engine.statements.slot_claims: any verb or none, an answer to the other
          speaker's question too) and share its slot while their values differ are ordered by time:
          the later leads (asked about the past: the earlier), see _slot_order."""
        r = self.recipe
        if as_of or not any(r.on(f) for f in ("claim_superseded", "restated_later", "not_a_change", "history_first",
                                              "same_slot")):
            return  # as of a time, validity filters already chose what held then
        marks: dict[str, dict[str, Any]] = trace.params.setdefault("outdated", {})
        turns = [c for c in trace.alive() if c.meta.get("kind") == "episode"]
        self._stored_clauses(turns)
        claims = self.store.turn_claims(self.scope, [c.memory_id for c in turns]) if turns else {}
        replaced = {f["memory_id"] for rows in claims.values() for f in rows if f["status"] == "superseded"}
        newer = self.store.newer_versions(self.scope, sorted(replaced)) if replaced else {}
        if r.on("claim_superseded") and replaced:
            self._claim_supersession(trace, turns, marks, claims, dict(newer))
        # a change already filed under a claim (a fact of the later turn superseded one of the
        # earlier's) is claim_supersession's to judge, claim by claim
        facts_of_turn = {t: {f["memory_id"] for f in rows} for t, rows in claims.items()}
        linked = {(a, b) for a, fa in facts_of_turn.items() for b, fb in facts_of_turn.items()
                  if a != b and any(set(newer.get(f, ())) & fb for f in fa)}
        if (r.on("restated_later") or r.on("not_a_change")) and trace.intent != "historical" and asks_state(trace.query):
            self._restatement_order(trace, [c for c in turns if str(c.memory_id) not in marks], marks, linked)
        elif r.on("history_first") and trace.intent == "historical":
            self._restatement_order(trace, turns, marks, linked, historical=True)
        historical = trace.intent == "historical" and r.on("history_first") and "history_first" not in trace.params
        if r.on("same_slot") and (historical or (trace.intent != "historical" and asks_state(trace.query))):
            self._slot_order(trace, [c for c in turns if str(c.memory_id) not in marks], marks, linked,
                             historical=historical)
        if r.on("later_leads") and trace.intent != "historical" and asks_state(trace.query):
            self._later_leads(trace, [c for c in turns if str(c.memory_id) not in marks], marks, linked)
        if not marks:
            del trace.params["outdated"]

    def _masked_query_vector(self, trace: Trace, people: Any) -> np.ndarray:
        """The question's vector with the people it names masked (_mask_people): whom it asks about
        says nothing of which of their claims it asks. The query's own vector when it names no one."""
        masked = _mask_people(trace.query, people)
        return self._qvec if masked == trace.query else CLAUSE_VECTORS.get(self.embedder, [masked], "query")[masked]

    def _stored_clauses(self, turns: list[CandidateTrace]) -> None:
        """The clauses of the turns the rules below compare (the best-scored restatement_pool of
        those with a speaker, a time and PARSED_TRUST), from the store's parses of them where this
        process has none yet: a fresh process (every LongMemEval container's) parsed its long turns
        again at its first recall, a quarter of that recall's CPU. A parse the store lacks is
        recorded in self._unstored, and written with the trace once the rules have made it."""
        pool = sorted((c for c in turns if c.meta.get("trust") in PARSED_TRUST and c.meta.get("speaker")
                       and c.meta.get("source_time")), key=lambda c: -c.score)[: self.recipe.restatement_pool]
        bodies = {c.memory_id: _body(c.meta["text"], c.meta["speaker"]) for c in pool}
        said_on = {c.memory_id: c.meta["source_time"] for c in pool}
        passing = self.recipe.on("claims_in_passing")
        wanted = [mid for mid, body in bodies.items()
                  if not parsed(body) or not has_slot_reading(body, said_on[mid], False, passing)]
        if not wanted:
            return
        stored = self.store.memory_clauses(wanted, RULES_VERSION)
        model = CLAUSE_VECTORS.model_of(self.embedder)
        for mid in wanted:
            body, row = bodies[mid], stored.get(mid)
            if row is not None and row.digest == text_digest(body):
                if not parsed(body):
                    prime_clauses(body, decode_clauses(row.clauses))
                if row.readings is not None:
                    prime_slot_readings(body, said_on[mid], json.loads(row.readings))
                kept = _stored_vectors(row, model, body)  # read once: _new_parses compares with it
                if kept:
                    CLAUSE_VECTORS.prime(self.embedder, kept)
                self._unstored.append((mid, body, said_on[mid], row, kept))
            else:
                self._unstored.append((mid, body, said_on[mid], None, {}))

    def _claim_supersession(self, trace: Trace, turns: list[CandidateTrace], marks: dict[str, dict[str, Any]],
                            claims: dict[int, list[dict[str, Any]]], newer: dict[int, list[int]]) -> None:
        replaced = {f["memory_id"] for rows in claims.values() for f in rows if f["status"] == "superseded"}
        # each replaced claim -> its current version: follow 'updates' relations to an active fact
        frontier = {m for srcs in newer.values() for m in srcs}
        seen = set(replaced)
        while frontier - seen:
            step = self.store.newer_versions(self.scope, sorted(frontier - seen))
            seen |= frontier
            newer.update(step)
            frontier = {m for srcs in step.values() for m in srcs}
        metas = self.store.candidate_meta(self.scope, sorted(seen | set(newer)))

        def current_of(mid: int) -> int | None:
            chain, at = {mid}, mid
            while True:
                nxt = [m for m in newer.get(at, []) if m in metas and m not in chain]
                if not nxt:
                    return at if at != mid and metas.get(at, {}).get("status") in ("active", "needs_review") else None
                at = max(nxt, key=lambda m: (metas[m].get("valid_from") or "", m))
                chain.add(at)

        vecs = self.vectors.vectors_of({f["memory_id"] for rows in claims.values() for f in rows}
                                       | set(metas)) if self.vectors is not None else {}
        qv = self._qvec

        def relevance(mid: int) -> float:
            v = vecs.get(mid)
            return float(np.dot(v, qv)) if v is not None else -1.0

        historical = trace.intent == "historical" and self.recipe.on("history_first")
        alive = {c.memory_id: c for c in trace.alive()}
        for turn in turns:
            rows = claims.get(turn.memory_id) or []
            if not any(f["status"] == "superseded" for f in rows):
                continue
            # the claim this question asks about: the fact (or its current version) most like the query
            scored = []
            for f in rows:
                cur = current_of(f["memory_id"]) if f["status"] == "superseded" else None
                scored.append((max(relevance(f["memory_id"]), relevance(cur) if cur else -1.0), f, cur))
            rel, fact, cur = max(scored, key=lambda x: x[0])
            succ = alive.get(cur) if cur is not None else None
            if fact["status"] != "superseded" or succ is None or cur is None:
                continue
            if metas.get(cur, {}).get("chunk_id") == turn.meta.get("chunk_id"):
                continue  # "I quit smoking": the turn states the change itself (its old value is history)
            if _taken_back(succ.meta, turns, turn.meta["text"]):
                continue  # the change was taken back later in its own conversation: it replaced nothing
            m = succ.meta
            on = (m.get("valid_from") or m.get("source_time") or "")[:10]
            reason = (f"its claim '{fact['predicate_key']} {fact['object']}' (fact {fact['fact_id']}) was superseded;"
                      f" the current version is fact {m.get('fact_id')}: {m['text']}")
            if historical:  # asked about the past: the old evidence (turn and fact) leads the new (fact and turn)
                newer_turns = [c for c in turns if c.meta.get("chunk_id") == m.get("chunk_id")]
                top = max([succ.score] + [c.score for c in newer_turns])
                for old in (turn, alive.get(fact["memory_id"])):
                    if old is not None:
                        lift_above(old, top, "claim_superseded")
            else:
                # the current version of the asked claim leads the turn's other claims too: "where do I
                # work now?" gets Globex before "works as a data analyst" (true, but not what was asked)
                others = [alive[f["memory_id"]] for f in rows if f["memory_id"] in alive
                          and f["memory_id"] != succ.memory_id]
                lead = max([o.score for o in others] + [turn.score])
                if succ.score <= lead:
                    lift = lead + 2e-6 - succ.score
                    succ.components["claim_superseded"] = round(succ.components.get("claim_superseded", 0.0) + lift, 6)
                    succ.score += lift
                delta = min(0.0, succ.score - 1e-6 - turn.score)
                turn.components["claim_superseded"] = round(delta, 6)
                turn.score += delta
                marks[str(turn.memory_id)] = {"by": succ.memory_id, "rule": "claim_superseded", "on": on,
                                              "text": m["text"], "reason": reason,
                                              "fact_id": fact["fact_id"], "by_fact_id": m.get("fact_id")}

    def _restatement_order(self, trace: Trace, turns: list[CandidateTrace], marks: dict[str, dict[str, Any]],
                           linked: set[tuple[int, int]], *, historical: bool = False) -> None:
        """Order two statements by one speaker about the same thing that no fact links (see
        _current_truth). A later change leads (restated_later); a later plan, wish, visit or
        someone else's change about it goes below an earlier statement of the state, which it
        does not replace (not_a_change, reasons in trace.params["asides"]). Asked about the past
        ("what did I drive before the RAV4?"), the statement before the best-matching one leads it
        (history_first, in trace.params["history_first"])."""
        from ..statements import (
            DEPENDANTS,
            PERSON_NOUNS,
            ahead_of,
            asked,
            asks_about_asides,
            changes_for,
            claims_for,
            clauses,
            content_words,
            stance_for,
            widened,
        )

        r = self.recipe
        pool = sorted((c for c in turns if c.meta.get("trust") in ("user", "external") and c.meta.get("speaker")
                       and c.meta.get("source_time")), key=lambda c: -c.score)[: r.restatement_pool]
        if len(pool) < 2:
            return
        question = asked(trace.query)
        stance: dict[int, tuple[str, Any]] = {}  # stance_for: ("change", [clauses]), ("state", clause), ...
        speaker_of = _speaker_named
        for c in pool:
            stance[c.memory_id] = stance_for(_body(c.meta["text"], c.meta["speaker"]), question,
                                             speaker_named=speaker_of(c), plans_aside=r.on("framed_plans"))
        kinds = {k for k, _ in stance.values()}
        if historical:
            kinds.add("change")
        if asks_about_asides(trace.query):
            kinds.discard("aside")  # "which car did I say I'd get someday?" asks for the aside itself
            stance = {m: (("none", None) if k == "aside" else (k, c)) for m, (k, c) in stance.items()}
        if not kinds & {"change", "aside"}:
            # no change or aside read from the question alone; one may still be read beside the
            # statements of the state, which name what the question does not ("we heat the house
            # with an oil boiler", then "the oil boiler was ripped out")
            told = " ".join(_body(c.meta["text"], c.meta["speaker"]) for c in pool if stance[c.memory_id][0] == "state")
            wide = widened(question, told) if told else None  # once: it reads every word of the statements
            if wide is None or not any(changes_for(_body(c.meta["text"], c.meta["speaker"]), wide,
                                                   speaker_named=speaker_of(c))
                                       for c in pool if stance[c.memory_id][0] != "state"):
                return
        vecs = self.vectors.vectors_of([c.memory_id for c in pool]) if self.vectors is not None else {}
        clause_vecs: dict[str, np.ndarray] = {}

        def embed(texts: list[str]) -> list[np.ndarray]:
            missing = [t for t in dict.fromkeys(texts) if t not in clause_vecs]
            if missing:
                clause_vecs.update(CLAUSE_VECTORS.get(self.embedder, missing))
            return [clause_vecs[t] for t in texts]

        # who is asked about says nothing about which of their claims is asked: "Where does Dana
        # live now?" asks for a place, not for "my name is Dana Okafor"
        mask = partial(_mask_people, people=question.people)
        masked = mask(trace.query)
        def words(text: str) -> frozenset[str]:
            return _content_terms(self.store, text)  # stemmed: "studying" meets "studies"

        q_terms = words(masked)
        who_terms = words(" ".join(question.people)) if question.people else frozenset()
        masked_vec: list[np.ndarray] = []

        def claim_query() -> np.ndarray:
            if not masked_vec:
                masked_vec.append(self._masked_query_vector(trace, question.people))
            return masked_vec[0]

        def closest(vec: np.ndarray, terms: frozenset[str], claims: list[str], vs: list[np.ndarray]) -> int | None:
            """The claim nearest a text (cosine, plus shared content words), None when not clearly one."""
            scores = [float(np.dot(v, vec)) + 0.15 * len(terms & words(c)) for c, v in zip(claims, vs)]
            order = sorted(range(len(scores)), key=lambda i: -scores[i])
            return order[0] if scores[order[0]] - scores[order[1]] >= CLAIM_MARGIN else None

        def nearest(vec: np.ndarray, terms: frozenset[str], claims: list[str], vs: list[np.ndarray]) -> int:
            """The claim nearest a text, however close the next one (closest's score)."""
            return max(range(len(claims)), key=lambda i: float(np.dot(vs[i], vec)) + 0.15 * len(terms & words(claims[i])))

        def about_asked_claim(earlier: CandidateTrace, changes: list[str]) -> str | None:
            """The clause of `changes` (a later turn's change clauses) that changes the claim of
            `earlier` the question asks about, or None. Only a turn with several claims needs the
            check ("my name is Dana and I live in Berlin"), read from its facts when it has several,
            else from its clauses; a change fails it only when the question clearly asks one claim
            and the change clearly concerns another."""
            if len(changes) > 1:  # the most query-like first: a long turn may change several things
                vs = embed(changes)
                changes = [c for _, c in sorted(zip([-float(np.dot(v, claim_query())) for v in vs], changes))]
            facts = facts_of.get(earlier.meta.get("chunk_id"), [])
            claims = [f.meta["text"] for f in facts] if len(facts) >= 2 else [
                c.text for c in clauses(_body(earlier.meta["text"], earlier.meta["speaker"])) if c.asserts]
            if len(claims) < 2:
                # one claim: a change replaces it only if it is about the same thing ("I started a
                # new job at BMW" says nothing of "I have a dog named Rex", in the same turn as a
                # sentence about the dog or not)
                own = claims or [_body(earlier.meta["text"], earlier.meta["speaker"])]
                vs = embed(own + changes)
                near = [c for c, v in zip(changes, vs[len(own):]) if float(np.dot(v, vs[0])) >= r.restatement_change_similarity]
                return near[0] if near else None
            # aligned as the query is, without whom they are about: "the kitten is called Pepper now"
            # is about "named her Biscuit", not about "we picked up a kitten"
            vs = embed([mask(c) for c in claims + changes])
            asked_at = closest(claim_query(), q_terms, claims, vs[:len(claims)])
            for clause, v in zip(changes, vs[len(claims):]):
                if asked_at is not None and float(np.dot(v, vs[asked_at])) < r.restatement_change_similarity:
                    continue  # about something else than the asked claim, however unclear the alignment
                aligned_at = closest(v, words(clause) - who_terms, claims, vs[:len(claims)])
                if asked_at is None or asked_at == aligned_at:
                    return clause
                if (aligned_at is None and self.recipe.on("asked_claim_only")
                        and nearest(v, words(clause) - who_terms, claims, vs[:len(claims)]) != asked_at
                        and float(np.dot(v, claim_query()))
                        < r.restatement_claim_answer_share * float(np.dot(vs[asked_at], claim_query()))):
                    # asked_claim_only: the question clearly asks one claim, and the change is nearer
                    # another and answers the question far worse than the asked claim does: it is about
                    # that other ("💍 Priya" is about "my girlfriend Priya", not "she loves anything
                    # with mango", asked "what fruit is Priya mad about?")
                    trace.params.setdefault("asked_claim_only", {})[clause] = claims[asked_at]
                    continue
                if aligned_at is None:
                    return clause
            return None

        def answers_as_well(stated: list[str], earlier: CandidateTrace, share: float | None = None) -> bool:
            own = claims_for(_body(earlier.meta["text"], earlier.meta["speaker"]), question) or [earlier.meta["text"]]
            q = claim_query()

            def best(texts: list[str]) -> float:
                return max(float(np.dot(v, q)) for v in embed(texts))

            return best(stated) >= (r.restatement_answer_share if share is None else share) * best(own)

        def asserted_count(turn: CandidateTrace) -> str | None:
            """The first asserted clause of a turn that holds a number: "the job would pay 45k" is a
            wish, not the newer salary."""
            for c in clauses(_body(turn.meta["text"], turn.meta["speaker"])):
                if not (c.question or c.modal or c.visit) and (found := _counts(c.text)):
                    return found
            return None

        def own_claims(turn: CandidateTrace) -> list[str]:
            body = _body(turn.meta["text"], turn.meta["speaker"])
            return claims_for(body, question) or [body]

        wide_of: dict[str, Any] = {}

        def beside(text: str) -> Any:
            """The question widened by a statement's words, once per statement: widened() reads every
            word of it, and the same statement is read beside each later turn in turn."""
            if text not in wide_of:
                wide_of[text] = widened(question, text)
            return wide_of[text]

        def change_of(earlier: CandidateTrace, later: CandidateTrace) -> list[str]:
            """The later turn's change clauses for the asked claim, read beside the earlier statement:
            a thing it names counts as named ("The oil boiler was ripped out" after "we heat the
            house with an old oil boiler")."""
            kind, found = stance[later.memory_id]
            if kind == "change":
                return list(found)
            return changes_for(_body(later.meta["text"], later.meta["speaker"]),
                               beside(" ".join(own_claims(earlier))), speaker_named=speaker_of(later))

        def others_matter(earlier: CandidateTrace, later: CandidateTrace, found: list[str]) -> str | None:
            """The third person's change clause of the later turn when it, not the speaker's own, is
            the closest to the earlier claim ("my manager left Spotify and joined Klarna, so I'm
            reporting to someone new" for "where do I work?"): their matter; else None."""
            others = [c.text for c in clauses(_body(later.meta["text"], later.meta["speaker"]))
                      if c.subject == "person" and c.states_change and c.key in PERSON_NOUNS
                      and c.key not in question.people and not (question.self_ and c.key in DEPENDANTS)
                      and c.text not in found]
            if not others:
                return None
            own = own_claims(earlier)
            vs = embed(own + others + found)
            near = [max(float(np.dot(v, o)) for o in vs[:len(own)]) for v in vs[len(own):]]
            best = max(range(len(others)), key=lambda i: near[i])
            return others[best] if near[best] > max(near[len(others):]) else None

        said_of: dict[int, list[str]] = {}

        def said(turn: CandidateTrace) -> list[str]:
            """The clauses a turn asserts (not its questions to the other speaker)."""
            if turn.memory_id not in said_of:
                said_of[turn.memory_id] = [c.text for c in clauses(_body(turn.meta["text"], turn.meta["speaker"]))
                                           if not c.question and len(c.text.split()) > 1]
            return said_of[turn.memory_id]

        def same_thing(a: CandidateTrace, b: CandidateTrace) -> bool:
            if (a.memory_id, b.memory_id) in linked or (b.memory_id, a.memory_id) in linked:
                return False
            if not (a.memory_id in vecs and b.memory_id in vecs and a.meta.get("document_id") != b.meta.get("document_id")
                    and name_key(a.meta["speaker"]) == name_key(b.meta["speaker"])):
                return False
            if float(np.dot(vecs[a.memory_id], vecs[b.memory_id])) >= r.restatement_similarity:
                return True
            if not r.on("claim_match"):
                return False
            # claim_match: a long turn's vector is mostly its request ("what should I check on
            # viewings?"); two of their asserted clauses may still be about one thing ("I rent a
            # studio in Hackney" / "been looking at flats in Margate"), as close as turns must be
            ca, cb = said(a), said(b)
            if not ca or not cb:
                return False
            va, vb = embed(ca), embed(cb)
            return max(float(np.dot(x, y)) for x in va for y in vb) >= r.restatement_similarity

        # a turn's facts speak for it: the one that would answer goes where the turn goes
        facts_of = _facts_by_chunk(trace)
        group = partial(_answer_group, facts_of=facts_of)

        statements = [c for c in pool if stance[c.memory_id][0] in ("state", "change")]
        if historical:
            if not statements:
                return
            # read beside each other, the turns name what the question does not: "the oil boiler was
            # ripped out" is a statement of how we heat the house after "we heat it with an oil boiler"
            def states(c: CandidateTrace, told: str) -> bool:
                return stance_for(_body(c.meta["text"], c.meta["speaker"]), beside(told),
                                  speaker_named=speaker_of(c))[0] in ("state", "change")

            told = " ".join(_body(c.meta["text"], c.meta["speaker"]) for c in statements)
            statements += [c for c in pool
                           if c not in statements and stance[c.memory_id][0] != "aside" and states(c, told)]
            # "what did I ride before the e-bike?" names the later value: the turn that names it is
            # where the past begins, whatever its form ("The Vespa's gone, ... I ride an e-bike
            # now"), and any earlier statement of the same thing by its speaker tells what held
            # before it, said as an aside too ("My Vespa won't start in the cold")
            later_value = content_words(b.group(1)) if (b := BEFORE_VALUE.search(trace.query)) else set()
            naming = [c for c in pool
                      if later_value and later_value & content_words(_body(c.meta["text"], c.meta["speaker"]))]
            anchor = max(naming or statements, key=lambda c: max(m.score for m in group(c)))
            anchor_text = _body(anchor.meta["text"], anchor.meta["speaker"])
            before = [c for c in pool if c.meta["source_time"] < anchor.meta["source_time"] and same_thing(c, anchor)
                      and not (later_value and later_value <= content_words(_body(c.meta["text"], c.meta["speaker"])))
                      and (c in statements or (naming and stance[c.memory_id][0] == "aside")
                           or (stance[c.memory_id][0] != "aside" and states(c, anchor_text)))]
            if not before:
                return
            prev = max(before, key=lambda c: (c.meta["source_time"], c.score))
            # it leads the later value, and every other statement of that thing too: "teaching
            # chemistry" is not what I did right before the lab job, the freelancing was
            top = max(m.score for c in [anchor] + [c for c in statements if same_thing(c, anchor)] for m in group(c))
            for m in group(prev):
                if m.score <= top:
                    delta = top + 1e-6 - m.score
                    m.components["history_first"] = round(delta, 6)
                    m.score += delta
            trace.params["history_first"] = {str(prev.memory_id): {
                "over": anchor.memory_id, "rule": "history_first", "on": prev.meta["source_time"][:10],
                "reason": f"asked about the past: the statement before m{anchor.memory_id} "
                          f"({anchor.meta['source_time'][:10]}) leads it"}}
            return
        asides: dict[str, dict[str, Any]] = {}
        # Follow the chain from the statement that would answer now (the best-scored statement of
        # the asked state): a later change about the same thing leads it and becomes the answer in
        # its turn; a later plan, visit or someone else's change about it goes below it. Only that
        # chain moves: the rest of the ranking keeps its order.
        seen: set[int] = set()
        quantity = bool(QUANTITY.search(trace.query) or AMOUNT.search(trace.query))
        top_k = _top_k(trace)

        def push_below(aside: CandidateTrace, clause: str, answer: CandidateTrace) -> None:
            """not_a_change: a later plan, visit or someone else's matter goes below the statement it
            does not replace."""
            _put_below(asides, aside, group(aside), answer, group(answer), "not_a_change",
                       f"a plan, wish, visit or someone else's matter ('{clause}'), not a change of "
                       f"what m{answer.memory_id} states")

        def taken_back_later(change: CandidateTrace, replaced: CandidateTrace | None = None) -> str | None:
            return _taken_back(change.meta, pool, replaced.meta["text"] if replaced is not None else "")

        def follow(answer: CandidateTrace) -> None:
            pending: list[tuple[CandidateTrace, str]] = []  # asides met along the chain
            # the statement `answer` replaced, and the clauses that replaced it (return_restores)
            came_by: tuple[CandidateTrace, list[str]] | None = None
            while answer.memory_id not in seen:
                seen.add(answer.memory_id)
                later = [c for c in pool if c.meta["source_time"] > answer.meta["source_time"]
                         and same_thing(answer, c)]
                # A successor is one of the top k: the rule reorders what a reader gets, never changes
                # it (in free chat, "my new job" or "right now" in a turn about something else would
                # otherwise push an answer out: LoCoMo dev, 2 questions).
                successors = [c for c in later if c.memory_id in top_k]
                found = {c.memory_id: change_of(answer, c) for c in successors}
                # someone else's change told with its consequence for the speaker is their matter
                theirs = {mid: clause for mid, f in found.items()
                          if f and (clause := others_matter(answer, by_id[mid], f))}
                changes = {mid: about_asked_claim(answer, f) for mid, f in found.items() if f and mid not in theirs
                           # a change that answers the question far worse than the statement it would
                           # replace is about another of its claims ("my wife's new job" for her name)
                           and answers_as_well(f, answer, r.restatement_change_answer_share)}
                # asked how many / how long / how much, or for an amount by its name ("what's my
                # salary?"), a later amount of the same thing is the newer one, change word or not:
                # "half of the 10 are women" -> "6 women out of 10", "the senior role pays 57k"
                if quantity and _counts(answer.meta["text"]):
                    changes |= {c.memory_id: claim for c in successors if c.memory_id not in changes
                                and stance[c.memory_id][0] == "state" and (claim := asserted_count(c))
                                and float(np.dot(vecs[answer.memory_id], vecs[c.memory_id])) >= r.restatement_count_similarity}
                changes = {mid: clause for mid, clause in changes.items() if clause}
                if r.on("return_to_held"):
                    # return_to_held: "I'm back at the trust Monday" after "I'm a data analyst at the
                    # NHS trust": a return names the value already held; it replaces nothing
                    held = words(_body(answer.meta["text"], answer.meta["speaker"]))
                    for mid, clause in list(changes.items()):
                        if not (clause and RETURNS.search(clause)):
                            continue
                        # "back to school today" names nothing beside what is asked: no new value
                        if words(clause) - _RETURN_NOISE - q_terms <= held:
                            del changes[mid]
                            trace.params.setdefault("return_to_held", {})[str(mid)] = (
                                f"'{clause}' names what m{answer.memory_id} already holds")
                if r.on("change_not_yet"):
                    # change_not_yet: a change that names a time after the day it was said ("signed up
                    # for a course that starts in October", said in September) is an arrangement: it
                    # goes below the state it would replace, as a plan does. (Not NOT_YET's steps:
                    # "I'm looking for inspiration for a new cocktail" is no step towards a state.)
                    for mid, clause in list(changes.items()):
                        if not clause:
                            continue
                        said_on = by_id[mid].meta.get("source_time")
                        # the time is read in the part of the clause that holds it: "we sold it in
                        # November" is told as done (a month without a year is then past), "signed up
                        # for a course that starts in October" is a step whose state begins later
                        why = next((ahead for part in CLAUSE_PARTS.split(clause)
                                    if not told_done(part) and (ahead := ahead_of(part, said_on))), None)
                        if why:
                            del changes[mid]
                            pending.append((by_id[mid], f"not yet in force: {why}"))
                            trace.params.setdefault("change_not_yet", {})[str(mid)] = (
                                f"'{clause}' is not yet in force ({why}): it replaces nothing of m{answer.memory_id}")
                if not changes:
                    # No change word, no fact: the same claim stated again later still comes first, only
                    # when it answers the question about as well as the earlier one ("I have a shift
                    # tonight" restates nothing of "I'm a nurse at St Mary's" for "what is my current job?"),
                    # and not as a short reply to the assistant.
                    changes = {c.memory_id: about_asked_claim(answer, stated) for c in successors
                               if stance[c.memory_id][0] == "state" and c.memory_id not in theirs
                               and len(_body(c.meta["text"], c.meta["speaker"]).split()) >= RESTATEMENT_MIN_WORDS
                               and (stated := claims_for(_body(c.meta["text"], c.meta["speaker"]), question))
                               and float(np.dot(vecs[answer.memory_id], vecs[c.memory_id]))
                               >= r.restatement_state_similarity
                               and answers_as_well(stated, answer)}
                    changes = {mid: clause for mid, clause in changes.items() if clause}
                if not r.on("restated_later"):
                    changes = {}
                # a change taken back later ("New number: 07700 900999." then "Scratch that, same old
                # number as before"; a month on, "Actually we're staying in Berlin") replaces nothing:
                # an aside of what it left
                taken_back = {mid: clause for mid in changes if (clause := taken_back_later(by_id[mid], answer))}
                changes = {mid: clause for mid, clause in changes.items() if mid not in taken_back}
                if r.on("not_a_change"):
                    for mid, clause in taken_back.items():
                        push_below(by_id[mid], f"taken back later: {clause}", answer)
                if r.on("not_a_change"):
                    pending += [(c, theirs.get(c.memory_id) or stance[c.memory_id][1])
                                for c in later if c.memory_id not in changes
                                and (stance[c.memory_id][0] == "aside" or c.memory_id in theirs)]
                if not changes:
                    for aside, clause in pending:
                        if aside.memory_id != answer.memory_id:
                            push_below(aside, clause, answer)
                    return
                nxt = max((c for c in later if c.memory_id in changes), key=lambda c: (c.meta["source_time"], c.score))
                _replace_by(marks, "restated_later", group(answer), nxt, [nxt],
                            f"states a change about it: '{changes[nxt.memory_id]}'")
                told = found.get(nxt.memory_id) or [changes[nxt.memory_id] or ""]
                if r.on("return_restores") and (back_clause := returning(told)):
                    # a stop between the answer and the return (both later than it), or the stop that
                    # made the answer current: what held before the stop holds again
                    told_of = {mid: found.get(mid) or [clause or ""] for mid, clause in changes.items()}
                    between = [c for c in later if c.memory_id in changes and c.memory_id != nxt.memory_id
                               and c.meta["source_time"] < nxt.meta["source_time"]
                               and stopping(told_of[c.memory_id])]
                    if between:
                        stop = max(between, key=lambda c: c.meta["source_time"])
                        restore(answer, stop, told_of[stop.memory_id], nxt, back_clause)
                    elif came_by is not None and stopping(came_by[1]):
                        restore(came_by[0], answer, came_by[1], nxt, back_clause)
                came_by = (answer, told)
                answer = nxt

        def restore(before: CandidateTrace, stop: CandidateTrace, stopped: list[str], back: CandidateTrace,
                    back_clause: str) -> None:
            """return_restores: a stop ("giving up swimming", "no more glasses") and then a return ("back
            swimming three mornings a week", "back to specs") restore what held before the stop: that
            statement is current again, no longer marked replaced, right below the return; the stop
            is history, replaced by the return."""
            held = group(before)
            for m in held:
                if marks.get(str(m.memory_id), {}).get("by") in (stop.memory_id, back.memory_id):
                    del marks[str(m.memory_id)]
            on = back.meta["source_time"][:10]
            for m in group(stop):
                marks.setdefault(str(m.memory_id), {
                    "by": back.memory_id, "rule": "restated_later", "on": on, "text": back.meta["text"],
                    "reason": f"the same speaker later ({on}) returns to what it stopped: '{back_clause}'"})
                m.components.setdefault("restated_later", 0.0)
            floor = max(m.score for m in group(stop))
            for m in held:
                lift_above(m, floor, "return_restores")
            lift_above(back, max(m.score for m in held), "restated_later")
            trace.params.setdefault("return_restores", {})[str(before.memory_id)] = (
                f"m{stop.memory_id} stopped it ('{stopping(stopped)}'), m{back.memory_id} returned to it "
                f"('{back_clause}'): it holds again")

        # Follow the chain from each of the statements that would answer now (the best-scored
        # statements of the asked state): a later change about the same thing leads it and becomes
        # the answer in its turn; a later plan, visit or someone else's change about it goes below
        # it. Only those chains move: the rest of the ranking keeps its order.
        by_id = {c.memory_id: c for c in pool}
        # a change taken back in its own conversation answers nothing now: no chain starts there
        starts = sorted((c for c in statements if not (stance[c.memory_id][0] == "change" and taken_back_later(c))),
                        key=lambda c: -max(m.score for m in group(c)))[: r.restatement_starts]
        for start in starts:
            if start.memory_id not in seen and str(start.memory_id) not in marks:
                follow(start)
        if asides:
            trace.params["asides"] = asides
    def _slot_order(self, trace: Trace, turns: list[CandidateTrace], marks: dict[str, dict[str, Any]],
                    linked: set[tuple[int, int]], *, historical: bool = False) -> None:
        """same_slot: two statements by one speaker of a value of what the question asks, in the same
        slot with different values, that no fact and no change word links: the later leads under
        current intent, and the earlier stays right below it, marked as history (reason in
        trace.params["outdated"]); asked about the past, the one before the best-scored leads it
        (trace.params["history_first"], its rule same_slot).

        A statement counts when engine.statements.slot_claims reads a claim of it: asserted, the
        speaker's own (or the asked person's), not a plan, wish, hedge, stay that ends, retraction
        or addition; a turn that answers the other speaker's question ("Where are you working at
        the moment?" -> "Lloyds Pharmacy in Harrogate") is read with that question; a statement's
        facts count among its claims ("The user works as a barista" for "I'm a barista at Blue
        Bottle"). Its claim is the clause most like the question (names masked), at least
        recipe.slot_answer_similarity; a reply whose question is at least
        recipe.slot_question_similarity like the one asked is in its slot, its claim its first.
        Two claims share a slot when they share a content word beside their values (stemmed, one
        typing slip forgiven: "my phone is an iPhone 12" / "my phne is a pixel 8"), or both share
        one with the question, or one is a reply in the question's slot and the other answers the
        question, or their vectors are at least recipe.slot_similarity apart; their
        values differ when each holds a content word the other and the question do not. Only turns
        of the top k move, and only along one chain: recall@k never changes."""
        from ..statements import asked, asks_about_asides, one_slip_apart, slot_claims

        r = self.recipe
        if asks_about_asides(trace.query):
            return  # "which car did I say I'd get?": the aside is the answer
        asides = trace.params.get("asides", {})
        pool = sorted((c for c in turns if c.meta.get("trust") in ("user", "external") and c.meta.get("speaker")
                       and c.meta.get("source_time") and str(c.memory_id) not in asides),
                      key=lambda c: -c.score)[: r.restatement_pool]
        speakers: dict[str, set[Any]] = {}
        for c in pool:
            speakers.setdefault(name_key(c.meta["speaker"]), set()).add(c.meta.get("document_id"))
        if not any(len(docs) > 1 for docs in speakers.values()):
            return  # two statements to order need one speaker in two conversations
        question = asked(trace.query)
        before: dict[int, dict[int, int]] = {}  # turn -> {-1: the turn before it, -2: the one before that}
        metas: dict[int, dict[str, Any]] = {}

        speaker_of = _speaker_named

        def asked_by_other(c: CandidateTrace) -> str | None:
            """The other speaker's question the turn answers (with the speaker's own turn before it,
            which may name the topic: "Quick one about my dentist." / "Sure, what about them?"), or None."""
            around = before.get(c.memory_id, {})
            prev = metas.get(around[-1]) if -1 in around else None
            if not prev or name_key(prev.get("speaker") or "") == name_key(c.meta["speaker"]):
                return None
            asked_text = _body(prev["text"], prev.get("speaker"))
            if not asked_text.rstrip().endswith("?"):
                return None
            opener = metas.get(around[-2]) if -2 in around else None
            # a short question ("Sure, what about them?") asks about what the speaker raised before it
            if (opener and name_key(opener.get("speaker") or "") == name_key(c.meta["speaker"])
                    and len(asked_text.split()) <= SHORT_QUESTION_WORDS
                    and not _body(opener["text"], opener.get("speaker")).rstrip().endswith("?")):
                return _body(opener["text"], opener.get("speaker")) + " " + asked_text
            return asked_text

        def terms(text: str) -> frozenset[str]:
            return _slot_terms(self.store, text)

        said: dict[int, list[str]] = {}  # turn -> its claims
        texts: dict[int, list[str]] = {}  # turn -> the texts its claims are judged by (with the question answered)
        answered: dict[int, str] = {}  # a reply -> the other speaker's question it answers
        later_only: dict[tuple[int, str], str] = {}  # (turn, claim) read by told_as_done ("done") or said_now ("now")
        facts_of = _facts_by_chunk(trace)
        passing = r.on("claims_in_passing")
        read = {c.memory_id: slot_claims(_body(c.meta["text"], c.meta["speaker"]), question, per_sentence=passing,
                                         speaker_named=speaker_of(c), said_on=c.meta["source_time"]) for c in pool}
        # a turn with no claim of its own may answer the other speaker's question: only those look back
        bare = [c.memory_id for c in pool if read[c.memory_id][1] == NO_CLAIM]
        if bare:
            for seed, nb, offset in self._neighbours(bare, 2):
                if offset < 0:
                    before.setdefault(seed, {})[offset] = nb
            metas.update(self.store.candidate_meta(self.scope, sorted({m for d in before.values() for m in d.values()})))
        for c in pool:
            context = asked_by_other(c) if c.memory_id in before else None
            claims = read[c.memory_id][0] if context is None else slot_claims(
                _body(c.meta["text"], c.meta["speaker"]), question, reply=True, speaker_named=speaker_of(c),
                said_on=c.meta["source_time"], per_sentence=passing)[0]
            claims = [claim for claim in claims if terms(claim)]  # "Not yet.": no value of its own
            if (context is None and (r.on("told_as_done") or r.on("said_now"))
                    and (claims or read[c.memory_id][1] in _UNASSERTED_ONLY) and not _MODAL_TURN.search(c.meta["text"])):
                for extra, how in later_claims(_body(c.meta["text"], c.meta["speaker"]), c.meta["source_time"],
                                                done=r.on("told_as_done"), now=r.on("said_now")):
                    if extra not in claims and terms(extra):
                        claims.append(extra)
                        later_only[(c.memory_id, extra)] = how
            if claims:
                said[c.memory_id] = claims
                texts[c.memory_id] = [f"{context} {claim}" if context else claim for claim in claims]
                if context is not None:
                    answered[c.memory_id] = context
                else:
                    # a statement's facts say its claims again in the slot's own words ("I'm a
                    # barista at Blue Bottle" -> "The user works as a barista"): judged by the
                    # fact's sentence, its terms those of its predicate and object (not its subject)
                    for f in facts_of.get(c.meta.get("chunk_id"), []):
                        if f.meta.get("text") and f.meta.get("predicate") and f.meta.get("object"):
                            said[c.memory_id].append(f"{f.meta['predicate'].replace('_', ' ')} {f.meta['object']}")
                            texts[c.memory_id].append(f.meta["text"])
        masked = _mask_people(trace.query, question.people)
        qv = self._masked_query_vector(trace, question.people)
        if r.on("unasserted_below") and texts:
            self._unasserted_below(trace, pool, read, texts, qv, facts_of)
        # older_mentions: a turn none of whose claims answers the question may still stand, as the
        # earlier of two only, by its own clause most like the question (not a question, not someone
        # else's): "my dell xps 13 fan screams whenever i edit in darktable", "rent's £950 for my 1 bed"
        mentions: dict[int, list[str]] = {}
        if r.on("older_mentions") and texts and not historical:
            from ..statements import clauses

            for c in pool:
                if c.memory_id in answered:
                    continue  # a reply is read with its question
                own = [x.text for x in clauses(_body(c.meta["text"], c.meta["speaker"]))
                       if not x.question and x.subject in ("self", "thing", "none") and terms(x.text)]
                if own:
                    mentions[c.memory_id] = own
        if len(texts) + sum(1 for m in mentions if m not in texts) < (1 if r.on("asides_below") else 2):
            return
        vecs = CLAUSE_VECTORS.get(self.embedder, [t for ts in (*texts.values(), *mentions.values()) for t in ts])
        # a reply to a question like the one asked is in its slot, and its answer is its first claim
        # ("What do you do these days?" -> "Product design at Figma, mostly the mobile app")
        asked_vecs = CLAUSE_VECTORS.get(self.embedder, list(answered.values()), "query") if answered else {}
        in_slot = {mid for mid, q in answered.items() if float(np.dot(asked_vecs[q], qv)) >= r.slot_question_similarity}
        claim: dict[int, tuple[str, np.ndarray]] = {}  # turn -> (its claim most like the question, the vector)
        read_as: dict[int, str] = {}  # turn -> "done" / "now" when that claim is one of statements.later_claims
        claim_terms: dict[int, frozenset[str]] = {}  # ... and the claim's own content terms (not the question's it answers)
        for mid, ts in texts.items():
            at = 0 if mid in in_slot else max(range(len(ts)), key=lambda i: float(np.dot(vecs[ts[i]], qv)))
            if mid in in_slot or float(np.dot(vecs[ts[at]], qv)) >= r.slot_answer_similarity:
                claim[mid] = (said[mid][at], vecs[ts[at]])
                claim_terms[mid] = terms(said[mid][at])
                if (mid, said[mid][at]) in later_only:
                    read_as[mid] = later_only[(mid, said[mid][at])]
        # as the earlier of two, a turn stands by its claim or, closer to the question, by a mention
        as_old = dict(claim)
        as_old_terms = dict(claim_terms)
        mentioned: set[int] = set()  # turns that stand by a mention: only ever the earlier of two
        for mid, own in mentions.items():
            at = max(range(len(own)), key=lambda i: float(np.dot(vecs[own[i]], qv)))
            sim = float(np.dot(vecs[own[at]], qv))
            if mid in claim and (mid in in_slot or sim <= float(np.dot(claim[mid][1], qv))):
                continue  # its claim answers the question at least as well
            if sim >= r.slot_answer_similarity:
                as_old[mid] = (own[at], vecs[own[at]])
                as_old_terms[mid] = terms(own[at])
                mentioned.add(mid)
        q_terms = terms(masked)

        def shared(a: frozenset[str], b: frozenset[str]) -> bool:
            return bool(a & b) or any(one_slip_apart(x, y) for x in a for y in b)

        def same_slot(a: CandidateTrace, b: CandidateTrace) -> str | None:
            """Why a and b state values of one slot, or None."""
            if (a.memory_id, b.memory_id) in linked or (b.memory_id, a.memory_id) in linked:
                return None
            if a.meta.get("document_id") == b.meta.get("document_id"):
                return None
            if name_key(a.meta["speaker"]) != name_key(b.meta["speaker"]):
                return None
            if a.memory_id not in as_old or b.memory_id not in claim:
                return None
            ta, tb = as_old_terms[a.memory_id], claim_terms[b.memory_id]
            if not (ta - tb - q_terms) or not (tb - ta - q_terms):
                return None  # one says nothing the other does not: no other value
            if shared(ta - q_terms, tb - q_terms):
                return "they share a word beside their values"
            if ta & q_terms and tb & q_terms:
                return "both name what the question names"
            if (a.memory_id in in_slot) != (b.memory_id in in_slot):
                reply = a if a.memory_id in in_slot else b
                return f"one answers a question like this one ('{answered[reply.memory_id]}'), the other answers this one"
            if float(np.dot(as_old[a.memory_id][1], claim[b.memory_id][1])) >= r.slot_similarity:
                return VECTORS_CLOSE
            return None

        def replaces(old: CandidateTrace, new: CandidateTrace) -> str | None:
            """same_slot(old, new), with what the later's reading and the earlier's mention add to why."""
            why = same_slot(old, new)
            if why == VECTORS_CLOSE and (read_as.get(new.memory_id) == "done" or new.memory_id in others):
                # an event, or a turn where someone else speaks too ("well, mum and dad have"), is tied
                # to the earlier statement by a word, not by vectors alone
                return None
            if why and old.memory_id in mentioned:
                why += "; the earlier only mentions it"
            if why and new.memory_id in read_as:
                why += "; it tells of it as done" if read_as[new.memory_id] == "done" else "; it says it is so now"
            return why

        if r.on("asides_below") and not historical:
            self._asides_below(trace, pool, read, claim, as_old, facts_of)
        eligible = [c for c in pool if c.memory_id in as_old]
        others = set()  # turns with a clause of someone else's (a person subject: "well, mum and dad have")
        if r.on("told_as_done") or r.on("said_now") or r.on("older_mentions"):
            from ..statements import clauses

            others = {c.memory_id for c in eligible if any(
                x.subject == "person" and not x.question
                for x in clauses(_body(c.meta["text"], c.meta["speaker"])))}
        if len(eligible) < 2:
            return
        group = partial(_answer_group, facts_of=facts_of)

        def lift(m: CandidateTrace, above: float) -> None:
            lift_above(m, above, "same_slot")

        start = max(eligible, key=lambda c: max(m.score for m in group(c)))
        if historical:
            earlier = [(c, why) for c in eligible if c.meta["source_time"] < start.meta["source_time"]
                       and (why := replaces(c, start))]
            if not earlier:
                return
            prev, why = max(earlier, key=lambda x: (x[0].meta["source_time"], x[0].score))
            top = max(m.score for m in group(start))
            for m in group(prev):
                lift(m, top)
            trace.params["history_first"] = {str(prev.memory_id): {  # where explain and the trace pane read it
                "over": start.memory_id, "rule": "same_slot", "on": prev.meta["source_time"][:10],
                "reason": f"asked about the past: '{as_old[prev.memory_id][0]}' came before "
                          f"'{claim[start.memory_id][0]}' ({why})"}}
            return
        top_k = _top_k(trace)

        def replaced(old: CandidateTrace, by: CandidateTrace, why: str) -> None:
            _replace_by(marks, "same_slot", group(old), by, group(by),
                        f"states another value of it: '{claim[by.memory_id][0]}' after '{as_old[old.memory_id][0]}' "
                        f"({why})")

        # from the statement that would answer now, the latest later value of its slot (in the
        # top k) leads, link by link; the earlier values of that slot stay below it as history
        answer, chain = start, [start]
        while True:
            later = [(c, why) for c in eligible if c.memory_id in top_k and c not in chain
                     and c.meta["source_time"] > answer.meta["source_time"] and (why := replaces(answer, c))]
            if not later:
                break
            nxt, why = max(later, key=lambda x: (x[0].meta["source_time"], x[0].score))
            top = max(m.score for c in chain for m in group(c))  # above every earlier value, fact and turn
            for m in group(nxt):
                lift(m, top)
            replaced(answer, nxt, why)
            chain.append(nxt)
            answer = nxt
        for c in sorted(eligible, key=lambda c: c.meta["source_time"], reverse=True):
            if (c not in chain and str(c.memory_id) not in marks
                    and c.meta["source_time"] < answer.meta["source_time"] and (why := replaces(c, answer))):
                replaced(c, answer, why)

    def _later_leads(self, trace: Trace, turns: list[CandidateTrace], marks: dict[str, dict[str, Any]],
                     linked: set[tuple[int, int]]) -> None:
        """later_leads: where no rule ordered them, a later turn of the top k by the speaker of the
        turn that would answer now (the best-scored of the top k's turns), said in another
        conversation about the same thing, leads it; the earlier stays right below it, marked as
        history. "About the same thing": the two turns' vectors at a cosine of at least
        recipe.restatement_similarity, the later's at least recipe.later_answer_share as close to
        the question as the earlier's, and its clause most like the question (people masked) at
        least recipe.later_clause_share as close as the earlier's best clause. The later must speak
        of it as holding: not as a plan, wish, visit or someone else's matter
        (statements.stance_for), no reading of slot_claims that holds it back (statements.holds_back:
        a hope, a time ahead, a stay that ends, a take-back, an addition, a moment), its clause most
        like the question neither a plan nor a stay nor told of the past, and no clause of it
        someone else's (statements.theirs: whose change a turn without a change word tells is
        unclear when it tells of someone else too). A change said without a change word ("the
        saxophone is so much harder than guitar lol, my lips go numb" after "any tips for barre
        chords on guitar? been playing acoustic for a year") is what it orders; of several, the
        latest leads."""
        from ..statements import (
            TOLD_OF_PAST,
            asked,
            asks_about_asides,
            holds_back,
            not_plain,
            slot_claims,
            stance_for,
            temporary,
            theirs,
        )

        r = self.recipe
        if asks_about_asides(trace.query) or self.vectors is None:
            return
        moved = set(trace.params.get("asides", {})) | set(trace.params.get("history_first", {}))
        top_k = _top_k(trace)
        pool = [c for c in turns if c.memory_id in top_k and c.meta.get("trust") in ("user", "external")
                and c.meta.get("speaker") and c.meta.get("source_time") and str(c.memory_id) not in moved]
        if len(pool) < 2:
            return
        group = partial(_answer_group, facts_of=_facts_by_chunk(trace))
        answer = max(pool, key=lambda c: max(m.score for m in group(c)))
        if any(str(m.memory_id) in marks for m in group(answer)):
            return
        speaker = name_key(answer.meta["speaker"])
        later = [c for c in pool if c.meta["source_time"] > answer.meta["source_time"]
                 and c.meta.get("document_id") != answer.meta.get("document_id")
                 and name_key(c.meta["speaker"]) == speaker
                 and (answer.memory_id, c.memory_id) not in linked and (c.memory_id, answer.memory_id) not in linked]
        if not later:
            return
        vecs = self.vectors.vectors_of([answer.memory_id] + [c.memory_id for c in later])
        if answer.memory_id not in vecs:
            return
        qv, av = self._qvec, vecs[answer.memory_id]
        bar = float(np.dot(av, qv)) * r.later_answer_share
        later = [c for c in later if c.memory_id in vecs and float(np.dot(vecs[c.memory_id], qv)) >= bar
                 and float(np.dot(vecs[c.memory_id], av)) >= r.restatement_similarity]
        question = asked(trace.query)

        def holding(c: CandidateTrace) -> bool:
            body = _body(c.meta["text"], c.meta["speaker"])
            if stance_for(body, question, speaker_named=_speaker_named(c), plans_aside=r.on("framed_plans"))[0] == "aside":
                return False
            _, why = slot_claims(body, question, per_sentence=r.on("claims_in_passing"),
                                 speaker_named=_speaker_named(c), said_on=c.meta["source_time"])
            return not holds_back(why)

        later = [c for c in later if holding(c)]
        if not later:
            return
        mq = self._masked_query_vector(trace, question.people)
        said = {c.memory_id: [x for x in clauses(_body(c.meta["text"], c.meta["speaker"])) if not x.question]
                for c in [answer, *later]}
        own = [x.text for x in said[answer.memory_id]] or [_body(answer.meta["text"], answer.meta["speaker"])]
        cv = CLAUSE_VECTORS.get(self.embedder, own + [x.text for c in later for x in said[c.memory_id]])
        clause_bar = max(float(np.dot(cv[t], mq)) for t in own) * r.later_clause_share

        def answers(c: CandidateTrace) -> bool:
            xs = said[c.memory_id]
            if not xs:
                return False
            best = max(xs, key=lambda x: float(np.dot(cv[x.text], mq)))
            if float(np.dot(cv[best.text], mq)) < clause_bar:
                return False
            if best.modal or best.visit or best.retracts or temporary(best.text):
                return False
            if not_plain(best, c.meta["source_time"]) == TOLD_OF_PAST:
                return False  # "As a teenager I drank litres of cola a week": what held then
            # any clause of someone else's: "the neighbours' dog is a spaniel too, called Juno" (where
            # "called Juno", the best clause, has no subject of its own)
            return not any(theirs(x, question) for x in xs)

        later = [c for c in later if answers(c)]
        if not later:
            return
        nxt = max(later, key=lambda c: (c.meta["source_time"], c.score))
        _replace_by(marks, "later_leads", group(answer), nxt, group(nxt),
                    "speaks of the same thing as holding, about as close to the question, and no rule read a change "
                    "or an aside in either")

    def _asides_below(self, trace: Trace, pool: list[CandidateTrace], read: dict[int, tuple[list[str], str]],
                      claim: dict[int, tuple[str, np.ndarray]], as_old: dict[int, tuple[str, np.ndarray]],
                      facts_of: dict[Any, list[CandidateTrace]]) -> None:
        """asides_below: a later turn by the same speaker, in another conversation, that states no
        value of the asked thing and speaks only in a form that asserts nothing of the speaker's
        present (engine.statements.slot_claims' reading of the whole turn: a hope, a step or a time
        still ahead, a stay or visit that ends, being somewhere, someone else's turn; or a
        supposition anywhere in it: "hypothetically if i went vegetarian") goes below the earlier
        turn that states or mentions it (the best-scored of `as_old`), however well it matches the
        question: moving an aside down can hide no current value. Both in the top k (recall@k never
        changes); the reason is in trace.params["asides"]."""
        from ..statements import HOPE, NOT_ASSERTED, NOT_YET

        def aside(c: CandidateTrace) -> str | None:
            why = read[c.memory_id][1]
            if why in NOT_ASSERTED or why.startswith(STAY_THAT_ENDS) or why in _ELSEWHERE:
                return why  # a reading of the whole turn, not a clause's unsure one (not_plain)
            if _MODAL_TURN.search(c.meta["text"]):
                return "a supposition"
            return None

        if NOT_YET.search(trace.query) or HOPE.search(trace.query) or _MODAL_TURN.search(trace.query):
            return  # the question asks for the plan or the supposition itself
        top_k = _top_k(trace)
        asides = trace.params.setdefault("asides", {})
        group = partial(_answer_group, facts_of=facts_of)
        # the earlier turn states it (a claim of slot_claims', however near the question) or mentions it
        stated = [c for c in pool if c.memory_id in top_k and (c.memory_id in as_old or read[c.memory_id][0])]
        for later in pool:
            if (later.memory_id in claim or later.memory_id not in top_k or str(later.memory_id) in asides
                    or (why := aside(later)) is None):
                continue
            earlier = _said_before(stated, later)
            if not earlier:
                continue
            head = max(earlier, key=lambda c: max(m.score for m in group(c)))
            said = as_old[head.memory_id][0] if head.memory_id in as_old else read[head.memory_id][0][0]
            _put_below(asides, later, group(later), head, group(head), "asides_below",
                       f"it asserts nothing of the speaker's present ({why}); m{head.memory_id} states it: '{said}'")
        if not asides:
            del trace.params["asides"]

    def _unasserted_below(self, trace: Trace, pool: list[CandidateTrace], read: dict[int, tuple[list[str], str]],
                          texts: dict[int, list[str]], qv: np.ndarray,
                          facts_of: dict[Any, list[CandidateTrace]]) -> None:
        """unasserted_below: a later turn by the same speaker that speaks of the asked thing only as
        something not yet so (engine.statements.slot_claims' reason: a hope, a plan frame, a step,
        a time still ahead: "been looking at flats in Margate", "fingers crossed for the Leeds
        job") goes below an earlier plain statement of it, as not_a_change does with a plan it
        reads from a modal. Both must answer the question (recipe.slot_answer_similarity) and be in
        the top k (recall@k never changes); the reason is in trace.params["asides"]."""
        from ..statements import HOPE, NOT_ASSERTED, NOT_YET, clauses

        r = self.recipe
        if NOT_YET.search(trace.query) or HOPE.search(trace.query):
            return  # "which city are we looking at flats in?" asks for the plan itself
        framed = [c for c in pool if c.memory_id not in texts and any(w in read[c.memory_id][1] for w in NOT_ASSERTED)]
        if not framed:
            return
        own = {c.memory_id: [x.text for x in clauses(_body(c.meta["text"], c.meta["speaker"])) if not x.question]
               for c in framed}
        vecs = CLAUSE_VECTORS.get(self.embedder, [t for ts in (*texts.values(), *own.values()) for t in ts])

        def answers(ts: list[str]) -> bool:
            return bool(ts) and max(float(np.dot(vecs[t], qv)) for t in ts) >= r.slot_answer_similarity

        # both in the top k: the rule reorders what a reader gets, never changes it
        top_k = _top_k(trace)
        stated = [c for c in pool if c.memory_id in texts and c.memory_id in top_k and answers(texts[c.memory_id])]
        group = partial(_answer_group, facts_of=facts_of)
        asides = trace.params.setdefault("asides", {})
        for later in framed:
            if later.memory_id not in top_k or not answers(own[later.memory_id]):
                continue
            earlier = _said_before(stated, later)
            if not earlier:
                continue
            head = max(earlier, key=lambda c: max(m.score for m in group(c)))
            _put_below(asides, later, group(later), head, group(head), "unasserted_below",
                       f"it speaks of it only as not yet so ({read[later.memory_id][1]}); m{head.memory_id} "
                       f"states it: '{texts[head.memory_id][0]}'")
        if not asides:
            del trace.params["asides"]

    def _dedupe(self, trace: Trace) -> None:
        best: dict[str | bytes, CandidateTrace] = {}
        openings_of = _OPENINGS
        if len(openings_of) > OPENINGS_KEPT:
            openings_of.clear()
        alive = []
        for c in sorted(trace.alive(), key=lambda c: (-c.score, c.memory_id)):
            text = c.meta["text"]
            opening = openings_of.get(text)
            if opening is None:
                opening = openings_of[text] = _opening(text)
            alive.append((c, opening))
        openings = Counter(opening for _, opening in alive)
        for cand, opening in alive:
            if openings[opening] == 1:
                continue  # no other candidate opens alike: none has its text
            key = _dedupe_key(cand.meta["text"])
            if key in best:
                cand.drop("score", DropReason.DUPLICATE, f"same text as memory {best[key].memory_id}")
            else:
                best[key] = cand

    # weak retrieval and the LLM stages --------------------------------------------------------
    def _weak(self, trace: Trace) -> bool:
        alive = sorted(trace.alive(), key=lambda c: -c.score)
        if not alive:
            return True
        if alive[0].score < self.recipe.weak_top_score:
            return True
        return len(alive) > 1 and alive[0].score - alive[1].score < self.recipe.ambiguous_margin

    def _plan(self, trace: Trace, query: str, qvec: np.ndarray, as_of: str | None) -> None:
        from ..prompts import plan_v1

        t0 = time.perf_counter()
        before = len(trace.candidates)
        assert self.llm is not None  # planning runs only with a model
        plan = plan_v1.plan(self.llm, query, timeout=self.recipe.llm_timeout_s, recorder=self.recorder)
        trace.plan = plan
        if plan.get("ok"):
            if plan.get("intent") == "historical":
                trace.intent = self._intent.intent = "historical"
                self._intent.fired["planner_intent"] = "historical"
            variants = [v for v in plan.get("variants", []) if v and v != query][:3]
            extra = list(plan.get("entities", []))
            for variant in variants:
                extra += content_terms(variant, self.store.fts_tokens, how_phrase=self.recipe.on("how_phrase"))
            if variants:
                vecs = self.embedder.embed(variants, kind="query")
                qvec = np.mean(np.vstack([qvec[None, :], vecs]), axis=0)
                qvec = qvec / max(1e-9, float(np.linalg.norm(qvec)))
            n_stages = len(trace.stages)
            self._candidates(trace, qvec, extra_terms=extra)
            self._filters(trace, as_of or plan.get("as_of"))
            self._score(trace, as_of)
            del trace.stages[n_stages:]
        trace.stage("plan", before, len(trace.candidates), _ms(t0), ok=bool(plan.get("ok")),
                    fallback=None if plan.get("ok") else "cheap retrieval kept")

    def _rerank(self, trace: Trace, query: str) -> None:
        from ..prompts import rerank_v1

        t0 = time.perf_counter()
        top = sorted(trace.alive(), key=lambda c: -c.score)[: self.recipe.rerank_max]
        assert self.llm is not None  # reranking runs only with a model
        outcome = rerank_v1.rerank(self.llm, query, [(c.memory_id, c.meta["text"]) for c in top],
                                   timeout=self.recipe.llm_timeout_s, recorder=self.recorder)
        trace.rerank = outcome
        if outcome.get("ok"):
            order = [mid for mid in outcome["order"] if mid in {c.memory_id for c in top}]  # never unknown ids
            if order:
                hi = max(c.score for c in top)
                for pos, mid in enumerate(order):
                    cand = trace.candidates[mid]
                    cand.components["rerank"] = round(hi + 1.0 - pos * 1e-3 - cand.score, 6)
                    cand.score = hi + 1.0 - pos * 1e-3
        trace.stage("rerank", len(top), len(top), _ms(t0), ok=bool(outcome.get("ok")),
                    fallback=None if outcome.get("ok") else "fused order kept")

    # rank and budget --------------------------------------------------------------------------
    def _rank(self, trace: Trace, k: int) -> tuple[list[CandidateTrace], list[int]]:
        """(the top k, every alive candidate's id in ranked order)."""
        t0 = time.perf_counter()
        alive = sorted(trace.alive(), key=lambda c: (-c.score, c.memory_id))
        cap, why = self.recipe.per_document_cap, "the recipe's per-document cap"
        if not cap and self.recipe.aggregate_cap and self._intent.aggregate:
            # counting, summing and ordering questions need evidence from several sessions, not
            # the best session's every turn
            cap, why = self.recipe.aggregate_cap, "the question gathers across sessions"
        held: set[int] = set()
        if cap > 0:  # diversity: a document's extra hits wait behind other documents' first ones
            trace.params["per_document_cap"] = {"cap": cap, "why": why}
            seen: dict[int | None, int] = {}
            first: list[CandidateTrace] = []
            later: list[CandidateTrace] = []
            for c in alive:  # turns only: a fact is distilled evidence of its own, whatever its source
                doc = c.meta.get("document_id") if c.meta.get("fact_id") is None else None
                seen[doc] = seen.get(doc, 0) + 1
                (first if doc is None or seen[doc] <= cap else later).append(c)
            held = {c.memory_id for c in later}
            alive = first + later
        # k counts sources, not memories: a fact and the turn it was read from (or two facts read
        # from one turn) say the same thing and share one place, so restatements cannot crowd other
        # evidence out of the top k. The cut falls at the first memory that would need place k + 1.
        kept: list[CandidateTrace] = []
        place_of: dict[tuple[Any, ...], int] = {}
        cut = None
        for pos, cand in enumerate(alive, start=1):
            source = cand.meta.get("chunk_id")
            key = ("chunk", source) if source is not None else ("memory", cand.memory_id)
            if not self.recipe.on("shared_places"):
                key = ("memory", cand.memory_id)
            if cut is None and key in place_of:
                cand.meta["shares_place_with"] = place_of[key]
            elif cut is None and len(place_of) < k:
                place_of[key] = cand.memory_id
            else:
                if cut is None:
                    cut = kept[-1].score if kept else 0.0
                waited = (f"; held back behind other documents: its own already had {cap} results ({why})"
                          if cand.memory_id in held else "")
                cand.drop("rank", DropReason.BELOW_CUT, f"position {pos} with score {cand.score:.4f}; k = {k} "
                          f"sources, the last kept scored {cut:.4f}{waited}")
                continue
            cand.rank = pos
            kept.append(cand)
        shared = {str(c.memory_id): c.meta["shares_place_with"] for c in kept if "shares_place_with" in c.meta}
        if shared:  # memory -> the higher-ranked memory whose place it shares
            trace.params["shared_places"] = shared
        trace.stage("rank", len(alive), len(kept), _ms(t0), places=len(place_of))
        return kept, [c.memory_id for c in alive]

    def _budget(self, trace: Trace, ranked: list[CandidateTrace], budget: int) -> RecallResult:
        t0 = time.perf_counter()
        mids = [c.memory_id for c in ranked]
        sources = self.store.first_sources(self.scope, mids)
        result = RecallResult(trace, ranked_ids=mids)
        lines: list[str] = []
        used = 0
        final = 0
        for cand in ranked:
            m = cand.meta
            src = sources.get(cand.memory_id)
            history = self._history(m) if m.get("fact_id") is not None else []
            updated = updated_by(trace, cand.memory_id)
            line = self._render(cand, src, history, updated)
            cost = _LINE_TOKENS.get(line)
            if cost is None:
                if len(_LINE_TOKENS) > OPENINGS_KEPT:
                    _LINE_TOKENS.clear()
                cost = _LINE_TOKENS[line] = estimate_tokens(line) + 1
            if used + cost > budget:
                room = budget - used - 1
                if not lines and room > 0:
                    line = truncate_to_tokens(line, room)
                    cost = estimate_tokens(line) + 1
                    cand.components["truncated"] = 1.0
                else:
                    cand.tokens = cost
                    cand.drop("budget", DropReason.BUDGET, f"needs {cost} tokens, {budget - used} left of {budget}")
                    continue
            used += cost
            final += 1
            cand.rank = final
            cand.tokens = cost
            lines.append(line)
            result.results.append({
                "memory_id": cand.memory_id, "rank": final, "score": round(cand.score, 6), "text": m["text"],
                "kind": m["kind"], "trust": m["trust"],
                "fact": None if m.get("fact_id") is None else {
                    k: m[k] for k in ("fact_id", "subject", "predicate", "object", "status", "valid_from", "valid_to",
                                      "learned_at", "invalidated_at", "relation")} | {"confidence": m["fact_confidence"]},
                "history": history,
                # an outdated turn carries what replaced it: "updated on 2024-06-12 by m25: ..."
                "updated_by": updated,
                "source": None if src is None else {k: src[k] for k in ("document_id", "chunk_id", "start", "end")}
                | {"title": src["title"], "source_type": src["source_type"], "message_id": src["message_id"]},
                "tokens": cost,
                "shares_place_with": m.get("shares_place_with"),  # the higher-ranked memory with the same source chunk
            })
        result.context_text = "\n".join(lines)
        result.context_tokens = used
        trace.stage("budget", len(ranked), final, _ms(t0), tokens=used, limit=budget)
        return result

    def _history(self, m: dict[str, Any]) -> list[dict[str, Any]]:
        versions = self.store.fact_versions(self.scope, m["subject_key"], m["predicate_key"])
        return [{"fact_id": v["id"], "object": v["object"], "status": v["status"], "valid_from": v["valid_from"],
                 "valid_to": v["valid_to"], "label": "previous" if v["status"] == "superseded" else v["status"]}
                for v in versions if v["id"] != m["fact_id"] and v["status"] in ("superseded", "expired")]

    @staticmethod
    def _render(cand: CandidateTrace, src: dict[str, Any] | None, history: list[dict[str, Any]],
                updated: dict[str, Any] | None = None) -> str:
        m = cand.meta
        when = (m.get("valid_from") or m.get("source_time") or "")[:10]
        where = ""
        if src is not None:
            where = f"{src['source_type']}:{src['title'] or src['external_id'] or src['document_id']}"
            if src["message_id"]:
                where += f"#{src['message_id']}"
        cite = " · ".join(x for x in (f"m{cand.memory_id}", where, when) if x)
        text = m["text"]
        if history:
            prev = "; ".join(f"{h['object']} (until {(h['valid_to'] or '?')[:10]})" for h in history[-3:])
            text += f" [previously: {prev}]"
        if m.get("status") == "needs_review":
            text += " [unconfirmed]"
        if m.get("relation") == "derives":
            text += " [inferred]"
        if updated:
            text += f" [{updated['label']}]"
        return f"[{cite}] {text}"
