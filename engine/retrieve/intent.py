"""What the recall pipeline reads from a question, and the registry of every named feature.

Every query-understanding rule and every scoring prior of the pipeline is a named Feature. A
Recipe switches any of them off by name (`Recipe.off`), the trace records which ones fired and
what they read, and `memlens bench ablate` measures each one's contribution on folds it was not
tuned on. A rule that does not help on held-out folds is removed or rebuilt, not kept.

Query-side rules live here, in `read_intent`; the pipeline asks `recipe.on(name)` before it
applies a prior, channel or ranking rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..names import find_mentions, name_key
from . import timeframe
from .query import Tokenize, content_terms


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    kind: str  # query | channel | prior | rank
    doc: str


_F = [
    # what is read from the question
    Feature("historical_intent", "query", "words about the past ('before', 'used to', 'previously') make the question "
            "historical: replaced facts and outdated turns rank like current ones"),
    Feature("how_phrase", "query", "'how old', 'how long', 'how many' are searched as the phrase, not the adjective"),
    Feature("aggregate_cap", "rank", "a question that gathers across sessions ('how many', 'in total', 'which ... "
            "first') holds a document's extra turns behind other documents' first ones"),
    Feature("speaker_user", "query", "a first-person question ('what did I ...') favours the user's own turns"),
    Feature("speaker_assistant", "query", "'you recommended', 'what did you suggest' favour the assistant's turns"),
    Feature("speaker_remind", "query", "'remind me' favours neither side: either may have said it"),
    Feature("speaker_names", "query", "turns by (facts about) a person the question names get the speaker prior"),
    Feature("timeframe", "prior", "memories inside the window a time in the question names ('in May 2023', "
            "'two weeks ago') get a prior; turn-side times resolved at ingestion count as well as the session's"),
    Feature("timeframe_fade", "prior", "a relative time ('two weeks ago') fades out further back instead of a hard edge"),
    Feature("when_time", "prior", "a question that asks when ('When did ...', 'what year', 'how long ago') favours "
            "turns that name a time ('last Saturday', 'in 2019'): the answer is usually said as one"),
    Feature("event_times", "prior", "times a turn itself names ('last Saturday', 'in May'), resolved against its "
            "session date at ingestion, place it in the question's window too"),
    # candidate channels
    Feature("vector", "channel", "nearest neighbours of the question's embedding"),
    Feature("fts", "channel", "BM25 over the question's rarest content words"),
    Feature("entity", "channel", "memories that mention a name the question names (a word only ever capitalised "
            "as a sentence's first word is not a name)"),
    Feature("relation", "channel", "one hop along updates / extends / derives relations"),
    Feature("neighbour", "channel", "turns next to a strong hit join as its context"),
    Feature("answer_turn", "channel", "the turn right after a hit that asks something is its answer"),
    Feature("baseline", "channel", "the most important memories, a weak floor for every question"),
    Feature("session_context", "prior", "a memory shares its document's best direct score, scaled by how little of "
            "the candidates the document holds"),
    # priors and ranking rules
    Feature("confidence", "prior", "confident facts and memories rank higher"),
    Feature("importance", "prior", "important memories rank higher"),
    Feature("recency", "prior", "newer memories rank higher (half-life from the recipe; weight 0 in the shipped "
            "recipes: it hurt on held-out folds)"),
    Feature("usage", "prior", "memories recalled often rank higher"),
    Feature("trust", "prior", "assistant, tool and external content rank slightly below the user's"),
    Feature("fact_bonus", "prior", "a fact distils its evidence: a small edge over the raw turn"),
    Feature("review", "prior", "facts waiting for review rank below confirmed ones"),
    Feature("claim_superseded", "rank", "under current intent, a turn whose fact for the claim the question asks "
            "about was superseded ranks below that claim's current version, whatever else it carried; asked about the "
            "past, it leads it"),
    Feature("restated_later", "rank", "where no fact links them, a later statement in the top k of a change (or of "
            "the same claim) by the same speaker about the same thing leads an earlier one, kept as history"),
    Feature("not_a_change", "rank", "a later plan, wish, visit or someone else's change about the same thing stays "
            "below the earlier statement of the state it does not replace"),
    Feature("same_slot", "rank", "where no fact or change word links them, two statements by the same speaker of "
            "a value of the asked claim (any verb or none; an answer to the assistant's question too), same slot and "
            "different values, are ordered by time: the later leads, the earlier is history (asked about the past: "
            "the earlier leads)"),
    Feature("asked_claim_only", "rank", "restated_later: where the question clearly asks one claim of an earlier "
            "turn that carried several, a later change nearer another of its claims replaces nothing it was asked "
            "about (\"we're engaged\" is about \"my girlfriend Priya\", not \"she loves mango\")"),
    Feature("return_to_held", "rank", "restated_later: a later clause that says the speaker is back, still or again "
            "in a state and names nothing the earlier statement does not hold (\"I'm back at the trust Monday\") "
            "replaces nothing"),
    Feature("return_restores", "rank", "restated_later: a stop (\"quitting five-a-side\", \"no more glasses\") "
            "and then a return (\"back playing on Wednesdays\", \"back to specs\") restore what held before the stop: "
            "that statement is current again, right below the return, no longer marked replaced"),
    Feature("change_not_yet", "rank", "restated_later: a later change that names a time after the day it was said "
            "(\"signed up for a course that starts in October\") is an arrangement: it goes "
            "below the state it would replace, as a plan does"),
    Feature("claims_in_passing", "rank", "same_slot reads claims said in passing: a moment (\"in December\") "
            "anchors its own sentence, not the whole turn; a person named beside their noun is that person (\"our son "
            "Max\"); the speaker's clause that names the asked person states their thing (\"we're home-educating "
            "Max\")"),
    Feature("framed_plans", "rank", "restated_later / not_a_change: a later turn whose every asserted clause is "
            "framed as a plan or a step (\"the idea is to go by next spring\", \"been looking at flats in\") is an "
            "aside below the statement of the state, not a statement of it"),
    Feature("claim_match", "rank", "restated_later / not_a_change: two turns are about the same thing when two of "
            "their asserted clauses are as close as whole turns must be (a long turn's vector is mostly its request)"),
    Feature("unasserted_below", "rank", "a later turn by the same speaker that speaks of the asked thing only as not "
            "yet so (a hope, a plan frame, a step, a time still ahead) goes below an earlier plain statement of it"),
    Feature("told_as_done", "rank", "same_slot: a later turn that asserts no state of the asked thing but tells, in "
            "the speaker's own clause, of something done (\"deleted my LastPass account\", \"just unboxed the "
            "iPhone 15\") states a value of it that may replace an earlier one, tied to it by a word, not by vectors "
            "alone; never a question, plan, wish, negation, step, visit or someone else's turn"),
    Feature("said_now", "rank", "same_slot: a clause of the speaker's that marks itself as the present (\"three "
            "months fully vegan now\", \"it's tuesdays at the arts centre now\") states a value of the asked thing, "
            "whatever its subject's form; never a question, plan, wish, negation, step, visit or someone else's turn"),
    Feature("older_mentions", "rank", "same_slot: a turn that asserts no claim of the asked thing still stands as "
            "the earlier of two statements by the clause of the speaker's most like the question (\"my dell xps 13 "
            "fan screams whenever i edit\"), and a later plain claim in its slot replaces it; never the later"),
    Feature("asides_below", "rank", "a later turn by the same speaker that states no value of the asked thing and "
            "speaks only as a plan, hope, step, time ahead, stay, visit, someone else's turn or a supposition goes below "
            "the earlier turn that states or mentions it, however well it matches the question"),
    Feature("later_leads", "rank", "under current intent, where no rule ordered them, the latest turn of the top k "
            "by the same speaker about the same thing, nearly as well matched to the question, speaking of it as holding "
            "(no plan, wish, visit, stay, time ahead, nothing told of the past or of someone else's), leads the turn "
            "that would answer; that one stays below it as history"),
    Feature("history_first", "rank", "asked about the past, the old version (fact or statement) leads the one that "
            "replaced it"),
    Feature("pinned", "prior", "pinned memories rank higher"),
    Feature("version_cap", "rank", "an old value never outranks its successor"),
    Feature("derived", "prior", "inferences are scaled down so they cannot tie verified facts"),
    Feature("learned_rerank", "rank", "a linear model fitted on the development files (bench fit --model rerank, "
            "resources/recipes/rerank.json) re-orders the first candidates after fusion from their channels' scores "
            "and ranks, the priors and neighbour/session signals"),
    Feature("learned_order", "rank", "under current intent, a logistic model fitted on the dev scenarios (bench fit "
            "--model order, resources/recipes/order.json) reads two statements by one speaker at different times that no "
            "rule ordered (vector similarities, ranks, time gap, shared words, the clauses' readings) and, when it is sure "
            "the later replaces the earlier for the asked claim, puts the later first and the earlier below it as history"),
    Feature("dedupe", "rank", "memories with the same text keep only the best"),
    Feature("shared_places", "rank", "k counts sources: a fact and the turn it was read from share one place"),
]
FEATURES: dict[str, Feature] = {f.name: f for f in _F}

FIRST_PERSON = re.compile(r"\b(I|me|my|mine|myself|I'm|I've|I'd)\b")
# A question about what the assistant said ("you mentioned ...", "what did you suggest ..."),
# and one that asks to be reminded without saying who said it.
_SAID = "mentioned|said|told|recommended|suggested|gave|provided|listed|shared|explained|described|wrote|named"
_SAY = "mention|say|tell|recommend|suggest|give|provide|list|share|explain|describe|write|name"
SECOND_PERSON_SAID = re.compile(rf"\b(?:you\s+(?:\w+\s+){{0,2}}?(?:{_SAID})|did\s+you\s+(?:{_SAY}))\b", re.IGNORECASE)
REMIND = re.compile(r"\bremind\s+me\b", re.IGNORECASE)

# Words that put the question in the past, so replaced facts and outdated turns are evidence too.
# Strong ones say so whatever else the question says; weak ones ("first", "old", "earlier") only
# when the question does not also ask about the present ("my current ...", "now", "still").
_STRONG_PAST = re.compile(
    r"\b(before|previous|previously|used to|formerly|originally|prior to|no longer|anymore|back then|"
    r"at the time|had been|in the past(?!\s+(?:(?:" + timeframe.COUNT + r")\s+)?(?:hour|day|week|month|year)s?\b))\b",
    re.IGNORECASE)
_WEAK_PAST = re.compile(r"\b(first(?!\s+thing)|(?<!how )old|earlier|history)\b", re.IGNORECASE)
# Asks for a time as its answer.
ASKS_WHEN = re.compile(r"^\W*when\b|\b(?:what|which)\s+(?:year|month|day|date|week|time of year)\b|\bhow long ago\b|"
                       r"\bwhat time\b(?!\s+of day)", re.IGNORECASE)
_PRESENT = re.compile(r"\b(now|current|currently|these days|nowadays|at the moment|at present|still|today)\b",
                      re.IGNORECASE)

# Questions that gather across sessions. "How much" counts only in the past tense ("how much did
# I spend"): "how much does my rent cost" asks for one current value.
AGGREGATE = re.compile(
    r"\b(how many|how much\s+(?:\w+\s+){0,2}?(?:did|have|had)|in total|total|altogether|combined|the number of"
    r"|which\b.{0,60}\b(first|last|earlier|later|sooner))\b", re.IGNORECASE)


@dataclass(slots=True)
class Intent:
    """What a question asks for, as read by the enabled query features."""
    query: str
    terms: list[str] = field(default_factory=list)  # FTS terms, rarest chosen later
    intent: str = "current"  # or "historical"
    aggregate: bool = False
    asks_when: bool = False  # the answer is a time
    speakers: set[str] = field(default_factory=set)  # canonical names; "user" / "assistant" for the two sides
    frame: timeframe.Window | None = None
    fired: dict[str, Any] = field(default_factory=dict)  # feature -> what it read (for the trace)


def read_intent(query: str, on: Callable[[str], bool], tokenize: Tokenize, *, ref: datetime | None, as_of: str | None) -> Intent:
    """Read `query` with the features `on(name)` allows. `ref`: the time "now" means."""
    it = Intent(query)
    it.terms = content_terms(query, tokenize, how_phrase=on("how_phrase"))
    if on("how_phrase"):
        phrases = [t for t in it.terms if t.startswith("how ")]
        if phrases:
            it.fired["how_phrase"] = phrases
    if as_of:
        it.intent = "historical"
        it.fired["as_of"] = as_of
    elif on("historical_intent"):
        m = _STRONG_PAST.search(query)
        if m is None and not _PRESENT.search(query):
            m = _WEAK_PAST.search(query)
        if m is not None:
            it.intent = "historical"
            it.fired["historical_intent"] = m.group(0)
    if on("aggregate_cap"):
        m = AGGREGATE.search(query)
        if m is not None:
            it.aggregate = True
            it.fired["aggregate_cap"] = m.group(0)
    if on("when_time"):
        m = ASKS_WHEN.search(query)
        if m is not None:
            it.asks_when = True
            it.fired["when_time"] = m.group(0).strip()
    it.speakers = _speakers(query, on, it.fired)
    if on("timeframe"):
        frame = timeframe.window(query, ref)
        if frame is not None and not on("timeframe_fade"):
            frame = timeframe.Window(frame.start, frame.end)
        it.frame = frame
        if frame is not None:
            it.fired["timeframe"] = [frame.start.isoformat(), frame.end.isoformat()]
    return it


def query_names(query: str) -> set[str]:
    """Canonical names the question mentions ("Where", "What" and other sentence furniture are not)."""
    return {m.canonical for m in find_mentions(query) if m.kind in ("name", "person")}


def _speakers(query: str, on: Callable[[str], bool], fired: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    if on("speaker_names"):
        names = query_names(query)
        if names:
            out |= names
            fired["speaker_names"] = sorted(names)
    if on("speaker_assistant") and SECOND_PERSON_SAID.search(query):
        out.add("assistant")  # "you recommended ...": the assistant's own turns, not the user's
        fired["speaker_assistant"] = True
        return out
    if on("speaker_user") and FIRST_PERSON.search(query):
        out.add("user")  # "what did I say..." is about the user's own turns
        fired["speaker_user"] = True
        if on("speaker_remind") and REMIND.search(query):
            out.add("assistant")  # "remind me ...": either side may have said it
            fired["speaker_remind"] = True
    return out


def speaker_matches(who: str | None, speakers: set[str]) -> bool:
    """Is a turn's speaker (or a fact's subject) one the question is about?"""
    if not who or not speakers:
        return False
    key = name_key(who)
    return key in speakers or key.split(" ")[0] in speakers
