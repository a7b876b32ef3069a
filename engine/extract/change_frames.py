"""Change frames: the common ways a speaker says that something about them changed.

The offline extractor (heuristic.py) runs these over every sentence of a user's turn. Each frame
names the new value and, where the sentence says it, the value it replaced:

  replacement  switched / changed / moved from X to Y; replaced X with Y; swapped / traded X for Y;
               sold X and bought Y; left X and joined Y; closed X and opened Y; cancelled X and
               signed up at Y; quit / stopped / gave up X ... Y now / instead; used to X, now Y
  ending       quit / stopped / gave up / dropped X; no longer X; not X anymore
  new value    my new N is Y; my N is now Y; my N changed to Y; "New N: Y"
  state        my N is Y, for a closed set of a person's attributes (phone, car, email, address ...)

A frame counts only in a clause that is the speaker's own, asserted, and not a visit
(engine.statements: "my sister switched to Linux", "I might switch to Linux", "if I leave Acme"
and "I tried surfing" change nothing). The predicate comes from the attribute noun when the
frame has one ("changed my major from law to philosophy" -> studies); otherwise it is a guess
from the verb, marked soft, and consolidation lends it the predicate of the stored fact whose
object was replaced ("sold the Golf" continues "my car is a 2012 VW Golf").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from engine.extract.canonical import predicate_key
from engine.statements import clauses

# A person's attributes that "my N is Y" states (a closed set: "my hands hurt" is not one).
ATTRIBUTES = frozenset("""phone car email address number salary rent bank gym major job title school editor laptop
    diet doctor dentist therapist mortgage provider carrier landlord commute username handle nickname
    pronouns team manager boss office""".split())
_PERSON_ATTRIBUTES = frozenset({"doctor", "dentist", "therapist", "landlord", "manager", "boss"})

_DETERMINERS = frozenset("""a an the my our his her their one some this that these those used old new brand
    second-hand secondhand""".split())
# Where a value phrase ends.
_STOP = frozenset("""and but or so because since when while after before until with without for from to at in
    on by about over around into during last this next yesterday today tomorrow now instead again too also
    anymore any more is are was were has have had which who that as than if though although just only
    really because cause plus then starting""".split())
_TOKEN = re.compile(r"[\w'’&+#.@-]+|[^\w\s]")
_SUBJECT_PAST = r"(?:(?:I|we|We)(?:['’](?:ve|d))?\s+(?:have\s+|had\s+)?(?:just\s+|finally\s+|recently\s+|also\s+)?)?"


@dataclass(frozen=True, slots=True)
class ChangeHit:
    predicate: str  # canonical key
    obj: str
    text: str  # the fact sentence with {S} for the subject
    anchor: int  # sentence offset where the statement starts
    end: int
    relation: str = "updates"  # updates | new
    replaces: str | None = None
    replaces_text: str | None = None
    soft: bool = False  # the predicate is a guess from the verb


def value_at(sentence: str, pos: int, *, max_words: int = 5) -> tuple[str, int] | None:
    """The value phrase at `pos`: up to max_words words, without a leading determiner, up to a
    stop word or punctuation ("the Golf" -> Golf, "a used Renault Zoe last week" -> Renault Zoe)."""
    words: list[str] = []
    start = end = pos
    for m in _TOKEN.finditer(sentence, pos):
        if sentence[end:m.start()].strip():
            break
        token = m.group(0).rstrip(".")
        low = token.casefold()
        if not token or not (token[0].isalnum() or token[0] in "@#"):
            break
        if not words and low in _DETERMINERS:
            end = m.end()
            continue
        if low in _STOP or (words and low.endswith("'s")):
            break
        if not words:
            start = m.start()
        words.append(token)
        end = m.start() + len(token)
        if len(words) > max_words:
            return None
    if not words or words[0].casefold() in ("it", "them", "him", "her", "me", "us", "you", "one", "everything", "out",
                                            "off", "up", "back", "down", "away"):
        return None  # a pronoun, or a phrasal verb ("dropped out of State")
    return sentence[start:end].strip(), end


def _own_clause(sentence: str, at: int) -> bool:
    """Is the clause around offset `at` the speaker's own assertion (not a plan, question, visit
    or someone else's)?"""
    offset = 0
    for c in clauses(sentence):
        where = sentence.find(c.text, offset)
        if where < 0:
            continue
        offset = where + len(c.text)
        if where <= at < where + len(c.text) + 1:
            return c.subject in ("self", "thing") and not (c.question or c.modal or c.visit)
    return False


def _noun_predicate(noun: str | None, guess: str) -> tuple[str, bool]:
    if noun:
        return predicate_key(noun), False
    return guess, True


# How a known predicate's new value reads; the old value follows in brackets, so the fact is
# found by either ("The user studies philosophy (before: law).").
_TEMPLATES = {"lives_in": "{S} lives in {O}", "works_at": "{S} works at {O}", "studies": "{S} studies {O}",
              "studies_at": "{S} studies at {O}", "has_role": "{S} works as {O}", "has_diet": "{S} is {O}"}


def _text(predicate: str, soft: bool, change_text: str, old: str) -> str:
    if soft or predicate not in _TEMPLATES:
        return change_text
    return _TEMPLATES[predicate] + " (before: " + old + ")."


# switched / changed / moved [my N] from X to Y
_FROM_TO = re.compile(r"(?i)\b(?P<verb>switched|changed|moved|went|converted|transitioned|upgraded|downgraded)"
                      r"(?:\s+(?:over|back|me|us))?(?:\s+(?:my|our)\s+(?P<noun>\w+))?\s+from\s+")
# replaced X with Y; swapped / traded [in] / exchanged X for Y
_REPLACED = re.compile(r"(?i)\b(?P<verb>replaced|swapped|traded(?:\s+in)?|exchanged)\s+")
# sold X and bought Y; left X and joined Y; closed X and opened Y; cancelled X and signed up at Y
_PAIR = re.compile(r"(?i)\b(?P<verb>sold|left|closed|cancell?ed|quit|dropped|ditched|dumped|got\s+rid\s+of|returned"
                   r"|gave\s+away)"
                   r"\s+")
_PAIR_SECOND = re.compile(r"(?i)\s*(?:,\s*|\s)(?:and|then)\s+(?:I\s+|we\s+)?(?:just\s+|finally\s+)?"
                          r"(?P<verb>bought|got|picked\s+up|joined|opened|signed\s+up|started|adopted|moved)"
                          r"(?:\s+(?:an?\s+account|one|a\s+new\s+one))?(?:\s+(?:at|with|for|to|in))?\s+")
# ... Y now / Y instead / only Y (for me) now / Y is my thing now / getting into Y instead
_NEW_AFTER = re.compile(
    r"(?i)(?:(?:it['’]s|its)\s+(?:only|just|all)\s+(?P<a>[\w'’ -]+?)\s+(?:for\s+me\s+)?now"
    r"|(?:getting|got|gotten)\s+into\s+(?P<b>[\w'’ -]+?)\s+instead"
    r"|(?:only|just)\s+(?P<c>[\w'’ -]+?)\s+(?:for\s+me\s+)?now"
    r"|(?P<d>[\w'’-]+(?:\s+[\w'’-]+)?)\s+is\s+my\s+thing\s+now"
    r"|(?:I['’]m|I\s+am|we['’]re|we\s+are)\s+(?:doing|playing|using|on|into|with|at)\s+(?P<e>[\w'’ -]+?)\s+"
    r"(?:now|instead)"
    r"|(?:I|we)\s+(?:use|play|do|drink|eat|take|drive|ride)\s+(?P<f>[\w'’ -]+?)\s+(?:now|instead))\b")
# quit / stopped / gave up X (an ending, or a replacement when Y follows)
_ENDING = re.compile(r"(?i)(?:(?<=^)|(?<=[\s,;:]))(?:" + _SUBJECT_PAST + r")(?P<verb>quit|stopped|gave\s+up|dropped"
                     r"|ditched|cancell?ed)\s+")
# no longer [verb] X; not X anymore; not using X anymore
_NO_LONGER = re.compile(r"(?i)\bno\s+longer\s+(?:(?P<verb>need|use|eat|drink|take|play|have|own|drive|smoke|do)\s+"
                        r"|(?P<pverb>work|live|study|bank)\s+(?:at|in|for|with)\s+)?")
_PVERB_PREDICATE = {"work": "works_at", "live": "lives_in", "study": "studies_at", "bank": "bank"}
# "no longer feel like it": a verb we cannot file, not a value
_LOOSE_VERBS = frozenset("""work live go feel think want care see talk speak believe like love study run play know
    get make need use""".split())
_ANYMORE = re.compile(r"(?i)\b(?:(?:I['’]m|I\s+am|we['’]re|we\s+are)\s+not|(?:I|we)\s+(?:don['’]t|do\s+not)\s+"
                      r"(?P<verb>\w+)|^not\s+(?P<ing>\w+ing))\s+(?P<rest>.+?)\s+any\s*more\b")
# used to VERB X, [but] now [I] VERB Y
_USED_TO = re.compile(r"(?i)\bused\s+to\s+(?P<v1>\w+)\s+")
_USED_TO_NOW = re.compile(r"(?i)\s*,?\s*(?:but\s+)?now\s+(?:I\s+|we\s+)?(?P<v2>\w+)\s+")
# my new N is Y; my N is now Y; my N changed to Y; "New N: Y"; my N is Y
_MY_NEW = re.compile(r"(?i)\b(?:my|our)\s+(?P<new>new\s+)?(?P<noun>\w+)(?:\s+\w+)?\s+(?:is\s+(?P<now>now\s+)?"
                     r"|has\s+changed\s+to\s+|changed\s+to\s+|is\s+changing\s+to\s+)")
_NEW_NOUN = re.compile(r"(?i)(?:^|[\s(])new\s+(?P<noun>\w+)\s*:\s*")


# "my new flat in Bergen", "our new place in Leipzig": a home that changed
_NEW_HOME = re.compile(r"(?i)\b(?:my|our)\s+(?:brand\s+)?new\s+(?:flat|house|place|apartment|home|condo|digs)"
                       r"\s+(?:in|at)\s+")


def _third(verb: str) -> str:
    return {"quit": "quit", "stopped": "stopped", "dropped": "dropped", "ditched": "ditched", "cancelled": "cancelled",
            "canceled": "cancelled"}.get(verb.casefold(), " ".join(verb.split()).casefold())


def change_frames(sentence: str) -> Iterator[ChangeHit]:
    """Every change frame in one sentence whose clause is the speaker's own assertion."""
    done: set[int] = set()

    def own(m: re.Match[str]) -> bool:
        return m.start() not in done and _own_clause(sentence, m.start())

    for m in _FROM_TO.finditer(sentence):
        x = value_at(sentence, m.end())
        if not x or not own(m):
            continue
        to = re.match(r"\s+(?:to|for)\s+", sentence[x[1]:])
        y = value_at(sentence, x[1] + to.end()) if to else None
        if not y:
            continue
        noun = m.group("noun")
        guess = "lives_in" if m.group("verb").casefold() == "moved" and y[0][:1].isupper() else "uses_tool"
        pred, soft = _noun_predicate(noun, guess)
        done.add(m.start())
        yield ChangeHit(pred, y[0], _text(pred, soft, "{S} switched from " + x[0] + " to {O}.", x[0]), m.start(), y[1],
                        replaces=x[0], replaces_text="{S} had " + x[0] + " before switching to " + y[0] + ".",
                        soft=soft)
    for m in _REPLACED.finditer(sentence):
        x = value_at(sentence, m.end())
        if not x or not own(m):
            continue
        sep = re.match(r"\s+(?:with|for|by)\s+", sentence[x[1]:])
        y = value_at(sentence, x[1] + sep.end()) if sep else None
        if not y:
            continue
        done.add(m.start())
        verb = " ".join(m.group("verb").split()).casefold()
        yield ChangeHit("uses_tool", y[0], "{S} " + verb + " " + x[0] + (" with " if verb == "replaced" else " for ")
                        + "{O}.", m.start(), y[1], replaces=x[0],
                        replaces_text="{S} had " + x[0] + " before " + y[0] + ".", soft=True)
    for m in _PAIR.finditer(sentence):
        x = value_at(sentence, m.end())
        if not x:
            continue
        second = _PAIR_SECOND.match(sentence, x[1])
        if second is None:
            # "left Acme for Globex", "ditched Spotify for Apple Music"
            tail = re.match(r"\s+(?:account\s+)?(?:for|to\s+join)\s+", sentence[x[1]:]) \
                if m.group("verb").casefold() in ("left", "ditched", "dropped", "dumped", "quit") else None
            if tail is None:
                continue
            y = value_at(sentence, x[1] + tail.end())
            verb2 = "joined" if m.group("verb").casefold() == "left" else "took up"
        else:
            y, verb2 = value_at(sentence, second.end()), " ".join(second.group("verb").split()).casefold()
        if not y or not own(m):
            continue
        verb1 = " ".join(m.group("verb").split()).casefold()
        guess = "works_at" if verb2 in ("joined", "started") or verb1 == "left" else "uses" if verb2 in (
            "opened", "signed up", "took up") else "owns"
        done.add(m.start())
        yield ChangeHit(guess, y[0], "{S} " + verb1 + " " + x[0] + " and " + verb2 + " {O}.", m.start(), y[1],
                        replaces=x[0], replaces_text="{S} had " + x[0] + " before " + y[0] + ".", soft=True)
    for m in _ENDING.finditer(sentence):
        if m.start() in done or not own(m):
            continue
        x = value_at(sentence, m.end(), max_words=3)
        if not x:
            continue
        verb = _third(m.group("verb"))
        job = re.match(r"(?i)(?:job|position|role)\s+(?:at|with)\s+", sentence[m.end():].removeprefix("my "))
        if job and x[0].casefold() in ("job", "position", "role"):
            at = m.end() + (3 if sentence[m.end():].startswith("my ") else 0) + job.end()
            employer = value_at(sentence, at)
            if employer:
                yield ChangeHit("works_at", "not " + employer[0], "{S} " + verb + " their job at " + employer[0] + ".",
                                m.start(), employer[1], replaces=employer[0])
            continue
        after = _NEW_AFTER.search(sentence, x[1])
        named = next((g for g in after.groups() if g), None) if after else None
        y = value_at(named, 0, max_words=3) if named else None
        if y and after:
            yield ChangeHit("does", y[0], "{S} " + verb + " " + x[0] + "; now {O}.", m.start(), after.end(),
                            replaces=x[0], replaces_text="{S} did " + x[0] + " before switching to " + y[0] + ".",
                            soft=True)
        else:
            yield ChangeHit("does", "not " + x[0], "{S} " + verb + " " + x[0] + ".", m.start(), x[1],
                            replaces=x[0], soft=True)
    for m in _NO_LONGER.finditer(sentence):
        x = value_at(sentence, m.end(), max_words=3)
        if not x or not own(m):
            continue
        verb, pverb = m.group("verb"), m.group("pverb")
        if not verb and not pverb and x[0].split()[0].casefold() in _LOOSE_VERBS:
            continue
        if pverb:
            text = "{S} no longer " + sentence[m.start(0):m.end()].split(None, 2)[2].strip() + " " + x[0] + "."
            text = re.sub(r"(?i)longer (work|live|study|bank)\b", lambda v: "longer " + v.group(1) + "s", text)
            yield ChangeHit(_PVERB_PREDICATE[pverb.casefold()], "not " + x[0], text, m.start(), x[1], replaces=x[0])
            continue
        text = "{S} no longer " + (verb + "s " if verb else "is ") + x[0] + "."
        yield ChangeHit("does", "not " + x[0], text.replace("haves", "has").replace("dos ", "does "), m.start(),
                        x[1], replaces=x[0], soft=True)
    for m in _ANYMORE.finditer(sentence):
        x = value_at(m.group("rest"), 0, max_words=3)
        if not x or not own(m):
            continue
        verb = m.group("verb") or m.group("ing")
        shown = ("{S} no longer " + (verb.removesuffix("ing") + "s " if m.group("ing") else verb + "s ") if verb
                 else "{S} is no longer ") + x[0] + "."
        yield ChangeHit("does", "not " + x[0], shown, m.start(), m.end(), replaces=x[0], soft=True)
    for m in _USED_TO.finditer(sentence):
        x = value_at(sentence, m.end(), max_words=3)
        if not x:
            continue
        now = _USED_TO_NOW.search(sentence, x[1])
        y = value_at(sentence, now.end(), max_words=4) if now else None
        if not y or not now or not own(m):
            continue
        yield ChangeHit("does", y[0], "{S} used to " + m.group("v1") + " " + x[0] + "; now {S} " + now.group("v2")
                        + "s {O}.", m.start(), y[1], replaces=x[0], soft=True)
    for m in _NEW_HOME.finditer(sentence):
        y = value_at(sentence, m.end(), max_words=4)
        if y and y[0][:1].isupper() and _own_clause(sentence, m.start()):
            yield ChangeHit("lives_in", y[0], "{S} lives in {O}.", m.start(), y[1])
    for pattern in (_MY_NEW, _NEW_NOUN):
        for m in pattern.finditer(sentence):
            noun = m.group("noun").casefold()
            if noun not in ATTRIBUTES:
                continue
            y = value_at(sentence, m.end(), max_words=5 if noun != "address" else 8)
            if not y or not _own_clause(sentence, m.start()) and pattern is _MY_NEW:
                continue
            if noun in _PERSON_ATTRIBUTES and not y[0][:1].isupper():
                continue
            changed = pattern is _NEW_NOUN or bool(m.groupdict().get("new") or m.groupdict().get("now")) \
                or "chang" in m.group(0).casefold()
            obj = y[0] if noun != "address" else _address(sentence, m.end()) or y[0]
            yield ChangeHit(predicate_key(noun), obj, "{S}{POSS} " + noun + " is {O}.", m.start(), y[1],
                            relation="updates" if changed else "new")


def _address(sentence: str, pos: int) -> str | None:
    """A street address runs on past commas: "48 Oak Avenue, Shelbyville"."""
    m = re.match(r"\s*(\d+[\w-]*\s+[^,.!?;]+(?:,\s*[A-Z][^,.!?;]*){0,2})", sentence[pos:])
    return m.group(1).strip() if m else None
