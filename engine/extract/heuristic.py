"""The offline extractor: first-person statements in a chunk -> grounded fact candidates.

`extract(chunk)` reads what a speaker says about themself ("I live in Berlin", "my wife Ana",
"I'm allergic to peanuts") and proposes candidates whose evidence is the exact sentence of
chunk.text they came from. It is an extractor, not a storage filter: reconcile decides what
becomes a fact. It prefers a missing fact to a wrong one, so it produces nothing for:

- assistant, system and tool chunks (an assistant's guess about the user is not evidence);
  chunks whose speaker is unknown; external chunks (email, files, code) without a named sender.
  External chunks yield facts about their named sender only, never about "the user";
- a chunk that reads as instructions to the AI ("ignore previous instructions", "system
  prompt", "assistant:", "the user wants you to", ...) — all of it; for user chunks the weak
  markers ("you must", "from now on you") drop only their sentence;
- a sentence holding a secret (engine/extract/secrets.py): its quote would carry it into a fact;
- questions, negations ("I don't live in Paris anymore"), hypotheticals and reported speech
  ("if I lived in Paris", "my mom thinks I live in Paris", text inside quotes), past states
  ("I lived in Paris", "I used to work at ...");
- a statement its speaker takes back a turn or two later ("New number: 07700 900999", then
  "Scratch that, the SIM didn't work, same old number as before"): `taken_back` drops what was
  read from it, for a window of turns read together.

Subjects: the chunk's speaker; a user chunk with no name -> "user". Places, employers and
names must be capitalised ("I live in berlin" is missed on purpose: "I live in fear").
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from engine.extract.canonical import (
    STATIC_PREDICATES,
    object_key,
    predicate_category,
    predicate_key,
    subject_key,
)
from engine.extract.change_frames import change_frames
from engine.extract.instructions import INSTRUCTION, WEAK_INSTRUCTION
from engine.extract.model import Candidate, SourceChunk
from engine.extract.secrets import find_secrets
from engine.names import name_key
from engine.records import Fact
from engine.statements import takes_back, takes_back_change, takes_back_later
from engine.timeexpr import FULL_MONTHS, MONTH_WORD, month_number
from engine.timeutil import parse_iso, to_iso

IMPORTANCE = {
    "identity": 0.8, "health": 0.8, "security": 0.9, "relationship": 0.75, "location": 0.7,
    "work": 0.7, "finance": 0.7, "date": 0.65, "pet": 0.6, "plan": 0.55, "preference": 0.5,
    "tool": 0.45, "event": 0.4, "other": 0.4,
}
BASE_CONFIDENCE = 0.65
HEDGE_PENALTY = 0.15
EXTERNAL_PENALTY = 0.05

# --- who may speak ---------------------------------------------------------------------------

_NO_FACT_ROLES = frozenset({"assistant", "system", "tool", "developer", "function", "ai", "model"})
_UNNAMED = frozenset({"user", "human", "me"})


def _subject_for(chunk: SourceChunk) -> str | None:
    """The name facts are about, or None when this chunk may not produce facts."""
    role = (chunk.role or "").casefold()
    if role in _NO_FACT_ROLES or chunk.trust in ("assistant", "tool"):
        return None
    speaker = (chunk.speaker or "").strip()
    if chunk.trust == "external":
        name = name_key(speaker)
        if not name or "@" in name or name in _UNNAMED or name == "unknown":
            return None  # facts about a named sender at most
        m = re.match(r'^\s*"?([^"<]*?)"?\s*<[^>]*>\s*$', speaker)
        return (m.group(1).strip() if m else speaker) or None
    if chunk.trust != "user":
        return None
    if not speaker or speaker.casefold() in _UNNAMED:
        return "user"
    if speaker.casefold() == "unknown":
        return None
    return speaker


def _body_start(chunk: SourceChunk) -> int:
    """Skip the "<speaker>: " prefix chat importers put in front of a message."""
    for label in (chunk.speaker, chunk.role):
        if label and chunk.text.startswith(label + ":"):
            at = len(label) + 1
            while at < len(chunk.text) and chunk.text[at] in " \t":
                at += 1
            return at
    return 0


# --- sentences -------------------------------------------------------------------------------

_ABBREVIATIONS = frozenset("""mr mrs ms dr st prof jr sr vs etc e.g i.e approx no mt ft inc ltd co
    jan feb mar apr jun jul aug sep sept oct nov dec""".split())
_BREAK = re.compile(r"[.!?]+[\"'’”)\]]*(?=\s)|\n")


def _sentences(text: str, start: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each sentence of text[start:], trimmed; a newline always ends one."""
    at = start
    for m in _BREAK.finditer(text, start):
        if m.group(0) != "\n" and m.group(0).startswith("."):
            word = re.search(r"([\w.]+)$", text[at:m.start()])
            before = word.group(1) if word else ""
            abbreviation = bool(before) and (before.casefold() in _ABBREVIATIONS
                                             or re.fullmatch(r"[A-Z]", before) is not None)  # an initial: "J. Smith"
            if abbreviation and before.casefold() == "no":
                abbreviation = bool(re.match(r"\s*\d", text[m.end():]))  # "No. 5", not "No. I work..."
            if abbreviation:
                continue
        yield from _trimmed(text, at, m.end())
        at = m.end()
    yield from _trimmed(text, at, len(text))


def _trimmed(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        yield start, end


# --- shared pieces of the patterns ----------------------------------------------------------

_A = r"['’]"
I_ = r"(?<![\w'’-])[Ii]"
I_AM = I_ + r"(?:" + _A + r"m|\s+am)"
I_HAVE = I_ + r"(?:" + _A + r"ve|\s+have)"
WE = r"(?<![\w'’-])[Ww]e"
WE_ARE = WE + r"(?:" + _A + r"re|\s+are)"
ADV = (r"(?:\s+(?:just|now|currently|still|also|actually|recently|finally|really|already|officially"
       r"|even|mostly|definitely|absolutely|totally|truly|honestly|both|all|kind\s+of|sort\s+of))*")
MONTHS = tuple(m.casefold() for m in FULL_MONTHS)
_MONTH = MONTH_WORD
_UPPER = "A-ZÀ-ÖØ-Þ"
_PROPER_FIRST = r"(?:[" + _UPPER + r"][\w&'’+-]*(?:\.[\w&'’+-]+)*|\d+[A-Za-z][\w&'’+-]*)"
_PROPER_NEXT = r"[" + _UPPER + r"][\w&'’+-]*(?:\.[\w&'’+-]+)*"
# "and"/"on" are not connectors: "Berlin and Tom ...", "Berlin on Monday".
_CONNECT = r"(?:of|de|da|do|del|der|des|la|le|van|von|am|upon|&|y|di|du)"
PROPER = re.compile(
    r"(?:(?:The|the)\s+(?=[" + _UPPER + r"]))?" + _PROPER_FIRST
    + r"(?:\s+(?:" + _CONNECT + r"\s+)?" + _PROPER_NEXT + r"){0,4}"
)
NAME = re.compile(r"[" + _UPPER + r"][a-zà-öø-ÿ'’-]+(?:\s+(?:(?:van|von|de|da|del|der|di|du|la|le)\s+)?["
                  + _UPPER + r"][a-zà-öø-ÿ'’-]+){0,2}")
_NOT_A_NAME = frozenset("""i i'm i've i'd i'll the a an and but or so he she it they we you his her their our
    my your its this that there here then when what who where why how is was are were has have had
    monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday
    mom mum dad mother father sister brother wife husband god ok okay yes no hi hello hey thanks
    english french german spanish italian portuguese""".split()) | frozenset(MONTHS)
_NOT_A_PLACE = frozenset("""i i'm the a an it this that my our your he she they we you his her their
    there here monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday
    january february march april may june july august september october november december
    christmas easter summer winter spring autumn fall""".split())

# --- the result of one rule -------------------------------------------------------------------


@dataclass(slots=True)
class _Hit:
    predicate: str  # canonical key
    obj: str
    text: str  # the fact sentence, with {S} for the subject
    anchor: int  # sentence offset where the first-person subject starts
    end: int  # sentence offset where the object ends
    confidence: float = BASE_CONFIDENCE
    first_person: bool = True  # "I ..." statements get the prefix (hypothetical/reported) checks
    updates: bool = False
    plan_text: str | None = None  # for plans: the text that may hold a date
    change: bool = False  # a change frame (change_frames.py): its own grammar judged subject and mood
    replaces: str | None = None
    replaces_text: str | None = None
    soft: bool = False


def _clean_object(obj: str) -> str:
    return obj.strip().rstrip(".,;:!?)\"'’”").strip()


def _proper_at(sentence: str, pos: int) -> tuple[str, int] | None:
    """The capitalised phrase at `pos` (a place, an employer): "New York City", "H&M", "3M"."""
    m = PROPER.match(sentence, pos)
    if not m:
        return None
    obj = _clean_object(m.group(0))
    obj = re.sub(r"\s+(?:&|of|de)$", "", obj)
    if not obj or obj.casefold() in _NOT_A_PLACE or obj.split()[0].casefold() in ("i", "i'm", "my"):
        return None
    return obj, pos + len(obj)


def _name_at(sentence: str, pos: int) -> tuple[str, int] | None:
    """A person's or pet's name at `pos`: up to three capitalised words (with van/de/...), possessive dropped."""
    m = NAME.match(sentence, pos)
    if not m:
        return None
    raw = m.group(0).split()
    words: list[str] = []
    for token in raw:
        word = re.sub(r"['’]s?$", "", token)
        if word.casefold() in _NOT_A_NAME:
            break
        words.append(word)
        if word != token:
            break  # "Tom's car": the name ends at the possessive
    if not words or words[-1].casefold() in ("van", "von", "de", "da", "del", "der", "di", "du", "la", "le"):
        return None
    name = " ".join(words)
    if len(name) < 2:
        return None
    return name, pos + len(name)


# Where a phrase object (likes, plans, roles) ends.
_PHRASE_STOP = frozenset("""because but when while if though although since so which who that whenever
    as than especially except unless until before after with in on at for from during by about like
    whereas whilst cause coz and or nor yet where whose whom""".split())
_TRAILING_FILLER = re.compile(
    r"(?:\s+(?:a\s+lot|so\s+much|very\s+much|too|as\s+well|now|lately|these\s+days|right\s+now|nowadays|"
    r"though|anyway|haha|lol|really|much|regularly|daily|often|every\s+day|all\s+the\s+time|sometimes"
    r"|mostly|mainly|already|again))+$", re.I)
_BAD_FIRST = frozenset("""i i'm my your his her our their it it's its this that these those you him them me us
    how when what where why who whether being doing something anything everything nothing someone
    anyone everyone nobody one to not no never they they're we we're he she he's she's there there's
    all both some any most many every each several few such lots""".split())
# An object with one of these in it is a clause or points at something we cannot see.
_BAD_ANYWHERE = frozenset("""it them him her you me us this that these those is are was were am be been 's 're
    they they're he she we i i'm 'em""".split())
# "the ..." in chat points at something in context ("I love the colour" of a photo).
_DEICTIC_FIRST = frozenset({"the"})
_LIGHT_GERUNDS = frozenset("""going getting spending doing having being making taking seeing curling escaping
    talking coming putting giving keeping trying playing hanging sitting""".split())
_PARTICLES = frozenset("up lost out away to back around time down over off".split())
_WORD = re.compile(r"[\w'’&+#.-]+|[^\w\s]")


def _phrase_items(sentence: str, pos: int, *, max_words: int = 4, allow_list: bool = True,
                  allow_to: bool = False, stop_at_to: bool = False) -> tuple[list[str], int] | None:
    """The noun phrase(s) at `pos` ("hiking", "hiking, skiing and climbing"), or None when the
    object is a pronoun, a clause, a deictic "the ..." or too long to be a clean value. Returns
    the items and the sentence offset where the last one ends.

    A comma continues a list only when an "and"/"or" closes it: in "I love sci-fi movies, the
    effects are so cool" the comma ends the object."""
    raw: list[tuple[str, list[str], int]] = []  # (separator before, words, end offset)
    words: list[str] = []
    sep = ""
    end = pos
    for m in _WORD.finditer(sentence, pos):
        token = m.group(0)
        low = token.casefold()
        if token in (",", "&") or low in ("and", "or"):
            if not allow_list:
                break
            if not words:
                if low in ("and", "or") and sep == "," and raw:
                    sep = "and"  # "A, B, and C": the comma before "and"
                    continue
                break
            raw.append((sep, words, end))
            words = []
            sep = "," if token == "," else "and"
            continue
        if not token[0].isalnum() and token not in ("+", "#"):
            break
        if low in _PHRASE_STOP or (low == "to" and words and stop_at_to):
            break
        if not words and low in _BAD_FIRST and not (allow_to and low == "to" and not raw):
            break
        if low.rstrip(".") in _BAD_ANYWHERE:
            words = []
            break
        words.append(token if token.rstrip(".").casefold() in _ABBREVIATIONS else token.rstrip("."))
        end = m.end()
        if len(words) > max_words:
            words = []
            break
    if words:
        raw.append((sep, words, end))
    if not raw:
        return None
    # Keep the list up to the first comma unless an "and"/"or" item closes it.
    if any(sep == "," for sep, _, _ in raw[1:]) and raw[-1][0] != "and":
        raw = raw[:next(i for i, (sep, _, _) in enumerate(raw) if i and sep == ",")]
    cleaned: list[str] = []
    last_end = pos
    for _, item_words, item_end in raw:
        item = _TRAILING_FILLER.sub("", " ".join(item_words)).strip()
        parts = item.casefold().split()
        if not parts:
            return None
        deictic = parts[0] in _DEICTIC_FIRST and not (len(item_words) > 1 and item_words[1][:1].isupper())
        if deictic or parts == ["to"] or parts[-1] in ("to", "of", "the", "a", "an"):
            return None
        if parts[0] in _LIGHT_GERUNDS and (len(parts) == 1 or parts[-1] in _PARTICLES or parts[-1].endswith("ed")):
            return None  # "I love going [on road trips]": the object is in the part we cut off
        cleaned.append(item)
        last_end = item_end
    return cleaned, last_end


# --- rules -----------------------------------------------------------------------------------

_LIVE = re.compile(
    r"(?:" + I_ + ADV + r"\s+(?:live|reside)|" + I_AM + ADV + r"\s+(?:living|residing|based|settled)"
    r"|" + I_HAVE + ADV + r"\s+been\s+(?:living|based)|" + WE + ADV + r"\s+(?:live|reside)"
    r"|" + WE_ARE + ADV + r"\s+(?:living|based|settled)"
    r"|(?:" + I_ + r"|" + WE + r")(?:" + _A + r"ve|\s+have)?" + ADV + r"\s+(?:moved|relocated)(?:\s+back)?"
    r"|" + I_ + r"(?:" + _A + r"ve|\s+have)?" + ADV + r"\s+lived)"
    r"\s+(?:in|to|at)\s+"
)
_FROM = re.compile(r"(?:" + I_AM + ADV + r"\s+(?:originally\s+)?from|" + I_ + r"\s+(?:originally\s+)?"
                   r"(?:come|grew\s+up)\s+(?:from|in))\s+")
_HOME = re.compile(r"(?<![\w'’-])[Mm]y\s+home\s+is\s+(?:in\s+)?")


def _rule_lives(sentence: str) -> Iterator[_Hit]:
    for m in _LIVE.finditer(sentence):
        cue = m.group(0)
        if re.search(r"\blived\b", cue):
            # "I've lived in Berlin for six years" is current; "I lived in Paris" is not.
            if not re.search(r"(?:" + _A + r"ve|have)", cue):
                continue
        found = _proper_at(sentence, m.end())
        if not found:
            continue
        obj, end = found
        if re.search(r"\blived\b", cue) and not re.match(r"\s+(?:for|since)\b", sentence[end:]):
            continue  # "I've lived in Paris, London and Rome" lists places, not a home
        updates = bool(re.search(r"\b(?:moved|relocated)\b", cue))
        yield _Hit("lives_in", obj, "{S} lives in {O}.", m.start(), end, updates=updates)
    for m in _FROM.finditer(sentence):
        found = _proper_at(sentence, m.end())
        if found:
            yield _Hit("is_from", found[0], "{S} is from {O}.", m.start(), found[1])
    for m in _HOME.finditer(sentence):
        found = _proper_at(sentence, m.end())
        if found:
            yield _Hit("lives_in", found[0], "{S} lives in {O}.", m.start(), found[1], first_person=False)


_WORK = re.compile(
    r"(?:" + I_ + ADV + r"\s+work|" + I_AM + ADV + r"\s+(?:working|employed)|" + I_HAVE + ADV
    + r"\s+been\s+working|" + WE + ADV + r"\s+work)\s+(?:at|for)\s+"
)
_JOIN = re.compile(
    r"(?:" + I_ + r"(?:" + _A + r"ve|\s+have)?" + ADV + r"\s+(?:joined|started(?:\s+(?:a\s+new\s+job|my\s+new\s+job"
    r"|a\s+job|working|work|a\s+new\s+role|a\s+new\s+position))?\s+at|got\s+(?:a\s+|the\s+)?"
    r"(?:new\s+)?(?:job|position|role|offer)\s+(?:at|with)|got\s+hired\s+(?:at|by)|was\s+hired\s+(?:at|by)))\s+"
)
_MY_JOB = re.compile(r"(?<![\w'’-])[Mm]y\s+new\s+(?:job|role|position|employer)\s+(?:is\s+)?(?:at|with)\s+")
_ROLE_HEADS = frozenset("""engineer developer programmer nurse doctor physician surgeon dentist teacher professor
    lecturer tutor designer architect manager director analyst scientist researcher consultant lawyer
    attorney accountant writer author journalist editor chef cook baker waiter waitress bartender barista
    pilot driver mechanic electrician plumber carpenter farmer pharmacist therapist psychologist
    psychiatrist veterinarian vet paramedic firefighter officer soldier student intern freelancer
    photographer artist musician singer actor actress dancer librarian cashier clerk secretary
    administrator technician specialist coordinator recruiter salesperson marketer entrepreneur founder
    cofounder co-founder ceo cto cfo coo vp pm sre tester translator interpreter economist statistician
    mathematician physicist chemist biologist geologist historian banker trader broker realtor counselor
    counsellor worker caregiver nanny midwife optometrist radiologist illustrator animator copywriter
    strategist planner owner lead head supervisor principal postdoc phd resident surveyor investigator
    detective judge paralegal dietitian nutritionist physiotherapist hairdresser barber tailor
    welder contractor builder janitor cleaner housekeeper receptionist practitioner""".split())
# "I'm a terrible cook" rates a skill; it is not a job.
_EVALUATIVE = frozenset("""good bad terrible great decent awful horrible poor excellent amazing slow fast big huge
    lousy nervous careful better worse best worst natural picky messy light heavy early late wannabe
    aspiring amateur hobby weekend former ex retired future wonderful fantastic average""".split())
_ROLE_MODIFIER = re.compile(r"[\w'’+#./-]+")
_IM_ROLE = re.compile(I_AM + ADV + r"\s+(a|an|the)\s+")
_WORK_AS = re.compile(r"(?:" + I_ + ADV + r"\s+work|" + I_AM + ADV + r"\s+(?:working|employed))\s+as\s+"
                      r"(?:an?\s+|the\s+)?")
_MY_ROLE = re.compile(r"(?<![\w'’-])[Mm]y\s+(?:job\s+title|title|role|job|position|occupation)\s+is\s+"
                      r"(?:an?\s+|the\s+)?")
_ROLE_END = frozenset("at for in with and who from by since now based here there".split())


def _role_at(sentence: str, pos: int, *, need_head: bool) -> tuple[str, int] | None:
    """A job title at `pos`: up to four words; for "I'm a ..." the last must be an occupation."""
    words: list[str] = []
    end = pos
    for m in _ROLE_MODIFIER.finditer(sentence, pos):
        if sentence[end:m.start()].strip() or len(words) == 4:
            break
        token = m.group(0)
        if token.casefold() in _ROLE_END or token.casefold() in _PHRASE_STOP:
            break
        words.append(token)
        end = m.end()
    while words and not re.search(r"\w", words[-1][-1]):
        words[-1] = words[-1][:-1]
        if not words[-1]:
            words.pop()
    if not words:
        return None
    head = words[-1].casefold().rstrip(".")
    if need_head and head not in _ROLE_HEADS:
        return None
    if any(w.casefold() in _EVALUATIVE for w in words):
        return None
    if words[0].casefold() in _BAD_FIRST:
        return None
    role = " ".join(words).rstrip(".")
    return role, pos + sentence[pos:].find(role) + len(role)


def _employer_after(sentence: str, pos: int) -> tuple[str, int] | None:
    m = re.match(r"\s+(?:at|for|with)\s+", sentence[pos:])
    if not m:
        return None
    return _proper_at(sentence, pos + m.end())


def _rule_work(sentence: str) -> Iterator[_Hit]:
    for m in _WORK.finditer(sentence):
        found = _proper_at(sentence, m.end())
        if found:
            yield _Hit("works_at", found[0], "{S} works at {O}.", m.start(), found[1])
    for m in _JOIN.finditer(sentence):
        found = _proper_at(sentence, m.end())
        if found:
            # "I joined Stripe" is usually a job, but also a club or a website: less sure.
            confidence = 0.55 if re.search(r"\bjoined\s*$", m.group(0)) else BASE_CONFIDENCE
            yield _Hit("works_at", found[0], "{S} works at {O}.", m.start(), found[1], confidence=confidence,
                       updates=True)
    for m in _MY_JOB.finditer(sentence):
        found = _proper_at(sentence, m.end())
        if found:
            yield _Hit("works_at", found[0], "{S} works at {O}.", m.start(), found[1], updates=True,
                       first_person=False)
    for pattern, need_head, first_person in ((_IM_ROLE, True, True), (_WORK_AS, False, True), (_MY_ROLE, False, False)):
        for m in pattern.finditer(sentence):
            found = _role_at(sentence, m.end(), need_head=need_head)
            if not found:
                continue
            role, end = found
            if role.casefold() in ("student",) and re.match(r"\s+at\s", sentence[end:]):
                continue  # "I'm a student at X" is studies_at, below
            yield _Hit("has_role", role, "{S} works as {A} {O}.", m.start(), end, first_person=first_person)
            employer = _employer_after(sentence, end)
            if employer:
                yield _Hit("works_at", employer[0], "{S} works at {O}.", m.start(), employer[1],
                           first_person=first_person)


_STUDY = re.compile(
    r"(?:" + I_ + ADV + r"\s+study|" + I_AM + ADV + r"\s+(?:studying|majoring\s+in|doing\s+(?:a|my)\s+"
    r"(?:PhD|phd|master" + _A + r"?s|masters|bachelor" + _A + r"?s|degree)(?:\s+in)?))\s+"
)
_STUDENT_AT = re.compile(r"(?:" + I_AM + ADV + r"\s+an?\s+(?:\w+\s+)?student|" + I_ + ADV + r"\s+study)\s+at\s+")


def _rule_study(sentence: str) -> Iterator[_Hit]:
    for m in _STUDY.finditer(sentence):
        if sentence[m.end():].startswith("at "):
            continue
        items = _phrase_items(sentence, m.end(), max_words=4, allow_list=False)
        if items:
            field, end = items[0][0], items[1]
            yield _Hit("studies", field, "{S} studies {O}.", m.start(), end)
            school = _employer_after(sentence, end)
            if school and re.match(r"\s+at\s", sentence[end:]):
                yield _Hit("studies_at", school[0], "{S} studies at {O}.", m.start(), school[1])
    for m in _STUDENT_AT.finditer(sentence):
        found = _proper_at(sentence, m.end())
        if found:
            yield _Hit("studies_at", found[0], "{S} studies at {O}.", m.start(), found[1])


_REL_NOUNS = {
    "wife": "married_to", "husband": "married_to", "spouse": "married_to",
    "partner": "partner_of", "girlfriend": "partner_of", "boyfriend": "partner_of", "fiancé": "partner_of",
    "fiancée": "partner_of", "fiance": "partner_of", "fiancee": "partner_of",
    "brother": "sibling_of", "sister": "sibling_of", "sibling": "sibling_of", "twin": "sibling_of",
    "mom": "child_of", "mum": "child_of", "mother": "child_of", "dad": "child_of", "father": "child_of",
    "son": "parent_of", "daughter": "parent_of",
    "friend": "friend_of", "colleague": "colleague_of", "coworker": "colleague_of", "co-worker": "colleague_of",
}
_REL_MOD = r"(?:(?:older|younger|little|big|baby|twin|eldest|oldest|youngest|best|dear|good|close|new)\s+)*"
_MY_REL = re.compile(
    r"(?<![\w'’-])[Mm]y\s+(" + _REL_MOD + r")(" + "|".join(sorted(_REL_NOUNS, key=len, reverse=True)) + r")"
    r"(?:" + _A + r"s\s+name\s+is|\s+is\s+(?:called|named)|\s*,|\s+)\s*(?=[" + _UPPER + r"])"
)
_MARRIED = re.compile(r"(?:" + I_AM + ADV + r"\s+(?P<married>married)\s+to|" + I_ + ADV + r"\s+(?P<wed>married)"
                      r"|" + I_AM + ADV + r"\s+(?:engaged\s+to|dating|in\s+a\s+relationship\s+with))\s+")


def _rule_relationships(sentence: str) -> Iterator[_Hit]:
    for m in _MY_REL.finditer(sentence):
        before = sentence[max(0, m.start() - 12):m.start()].casefold()
        if re.search(r"\bex[- ]?$|\blate\s*$", before) or re.search(r"\b(?:ex|late|former)\b", m.group(1)):
            continue
        found = _name_at(sentence, m.end())
        if not found:
            continue
        noun = m.group(2).casefold()
        predicate = _REL_NOUNS[noun]
        mods = m.group(1).strip()
        label = f"{mods} {noun}".strip()
        yield _Hit(predicate, found[0], "{S}{POSS} " + label + " is {O}.", m.start(), found[1], first_person=False)
    for m in _MARRIED.finditer(sentence):
        found = _name_at(sentence, m.end())
        if not found:
            continue
        if m.group("married") or m.group("wed"):
            yield _Hit("married_to", found[0], "{S} is married to {O}.", m.start(), found[1])
        else:
            yield _Hit("partner_of", found[0], "{S} is in a relationship with {O}.", m.start(), found[1])


_PETS = ("dog puppy cat kitten rabbit bunny hamster parrot bird goldfish fish turtle tortoise snake lizard "
         "horse pony ferret gecko budgie guinea pig chinchilla hedgehog").split()
_PET = r"(?:guinea\s+pig|" + "|".join(p for p in _PETS if p not in ("guinea", "pig")) + r")"
_HAVE_PET = re.compile(
    r"(?:" + I_ + ADV + r"\s+(?:have|own)|" + I_HAVE + ADV + r"\s+got|" + WE + ADV + r"\s+(?:have|own)|"
    + I_ + ADV + r"\s+(?:got|adopted)|" + WE + ADV + r"\s+(?:got|adopted))\s+(an?|one|two|three|four)\s+"
    r"(?:(?:\w+\s+){0,2}?)(" + _PET + r")(e?s)?(?![\w'’-])"
)
# What may follow "I have a dog" for the dog to be a pet rather than a modifier ("a dog walker").
_PET_AFTER = re.compile(r"\s*(?:$|[,.;:!)]|(?:named|called|and|but|who|that|which|at|in|with|for|since|now|too"
                        r"|as|so|at|back|from|whose|here|there|\d)\b)", re.I)
_MY_PET = re.compile(r"(?<![\w'’-])[Mm]y\s+(?:\w+\s+)?(" + _PET + r")"
                     r"(?:" + _A + r"s\s+name\s+is|\s+is\s+(?:called|named)|\s*,|\s+)\s*(?=[" + _UPPER + r"])")


def _rule_pets(sentence: str) -> Iterator[_Hit]:
    for m in _HAVE_PET.finditer(sentence):
        species = m.group(2)
        plural = bool(m.group(3))
        end = m.end()
        if not re.match(_PET_AFTER, sentence[end:]):
            continue  # "a fish tank", "a cat allergy", "a dog walker": not a pet
        named = re.match(r"(?:\s+(?:named|called)\s+|\s*,\s*)", sentence[end:])
        if named and not plural:
            found = _name_at(sentence, end + named.end())
            if found:
                yield _Hit("has_pet", found[0], "{S} has a " + species + " named {O}.", m.start(), found[1])
                continue
        if m.group(1).casefold() in ("a", "an", "one") and plural:
            continue  # "a dog's toy", "one cats" is not a pet
        obj = sentence[m.start(1):m.end()]
        yield _Hit("has_pet", obj, "{S} has {O}.", m.start(), m.end(), confidence=0.6)
    for m in _MY_PET.finditer(sentence):
        found = _name_at(sentence, m.end())
        if found:
            yield _Hit("has_pet", found[0], "{S} has a " + m.group(1) + " named {O}.", m.start(), found[1],
                       first_person=False)


_LIKE = re.compile(r"(?:" + I_ + ADV + r"\s+(?:really\s+|absolutely\s+)?(love|like|enjoy|adore)"
                   r"|" + I_AM + ADV + r"\s+(?:a\s+(?:big\s+|huge\s+)?fan\s+of|(?:really\s+)?into))\s+")
_DISLIKE = re.compile(r"(?:" + I_ + ADV + r"\s+(?:really\s+)?(hate|dislike|detest|loathe)|"
                      + I_ + r"\s+(?:can" + _A + r"t|cannot|can\s+not)\s+stand|" + I_ + r"\s+(?:don" + _A
                      + r"t|do\s+not)\s+(?:really\s+)?like)\s+")
_FAVOURITE = re.compile(r"(?<![\w'’-])[Mm]y\s+(?:absolute\s+|all-time\s+|all\s+time\s+)?(?:favou?rite|fave)\s+"
                        r"([a-zA-Z]+(?:\s+[a-zA-Z]+){0,2}?)\s+(?:is|are|has\s+to\s+be|would\s+be)\s+")
_NOT_LIKED = re.compile(r"(?i)^(?:to\s+(?:think|say|know|believe|see|hear|be|have|ask|tell|imagine|point|mention|"
                        r"add|keep|make\s+sure|get)\b)")


_CLAUSE_VERBS = frozenset("""comes goes joins says takes makes gets loves likes wants needs has does came went
    joined said took made got loved liked wanted needed had did runs ran walks walked plays played""".split())


def _is_clause(item: str) -> bool:
    """An item whose later word is a finite verb is a clause ("Rex comes along"), not a value."""
    words = item.split()
    return any(w.casefold() in _CLAUSE_VERBS for w in words[1:])


def _rule_preferences(sentence: str) -> Iterator[_Hit]:
    for pattern, predicate, verb in ((_LIKE, "likes", "likes"), (_DISLIKE, "dislikes", "dislikes")):
        for m in pattern.finditer(sentence):
            rest = sentence[m.end():]
            if _NOT_LIKED.match(rest) or re.match(r"(?:it|that|this|you|him|her|them|how|when)\b", rest, re.I):
                continue
            items = _phrase_items(sentence, m.end(), max_words=4, allow_to=True)
            if not items:
                continue
            for item in items[0]:
                if _is_clause(item):
                    continue  # "hiking, and Rex comes along": the list ended, a new clause began
                yield _Hit(predicate, item, "{S} " + verb + " {O}.", m.start(), items[1], confidence=0.6)
    for m in _FAVOURITE.finditer(sentence):
        what = m.group(1)
        found = _proper_at(sentence, m.end())
        if found:
            obj, end = found
        else:
            items = _phrase_items(sentence, m.end(), max_words=4, allow_list=False)
            if not items:
                continue
            obj, end = items[0][0], items[1]
        yield _Hit(predicate_key("favourite " + what), obj, "{S}{POSS} favourite " + what.casefold() + " is {O}.",
                   m.start(), end, first_person=False)


# Verbs that make "I'll ..." a life plan rather than a promise in passing ("I'll get the video to you").
_PLAN_VERBS = frozenset("""visit move relocate travel fly learn buy quit join study apply launch attend marry
    retire hike climb adopt open sell rent publish enroll enrol graduate renovate found propose compete
    emigrate immigrate""".split())
_DISCOURSE_VERBS = frozenset("""be say tell ask try need guess assume admit think check see look do have make
    let give keep help wait explain show send go""".split())
_PLAN = re.compile(
    r"(?:(?:" + I_AM + r"|" + WE_ARE + r")" + ADV + r"\s+(?:planning|hoping|intending|going|aiming|scheduled|set)\s+to"
    r"|(?:" + I_AM + r"|" + WE_ARE + r")" + ADV + r"\s+planning\s+on"
    r"|(?:" + I_ + r"|" + WE + r")" + ADV + r"\s+(?:plan|intend|aim)\s+to"
    r"|(?:" + I_ + r"|" + WE + r")(?:" + _A + r"ll|\s+will)" + ADV + r")\s+"
)
_PLAN_ING = re.compile(
    r"(?:" + I_AM + r"|" + WE_ARE + r")" + ADV + r"\s+(?=(?:moving|relocating|flying|travell?ing|heading|visiting"
    r"|starting|quitting|leaving|retiring|getting\s+married|graduating)\b)"
)
_PLAN_END = re.compile(r"[,;:!?()]|\.(?:\s|$)|\s(?:because|but|so|and\s+then|which|if|unless|since|when|though"
                       r"|although|cause|as\s+long\s+as|while|and\s+(?:I|i|we|We)(?:" + _A + r"\w+)?)(?![\w'’])")
_DANGLING = frozenset("the a an in of to and or with for my our at on by from".split())


def _plan_object(sentence: str, pos: int) -> tuple[str, int] | None:
    end = len(sentence)
    for stop in _PLAN_END.finditer(sentence, pos):
        if stop.group(0).startswith("."):
            word = re.search(r"([\w.]+)$", sentence[pos:stop.start()])
            if word and word.group(1).casefold() in _ABBREVIATIONS:
                continue  # "ask Dr. Patel", "support Mrs. Johnson"
        end = stop.start()
        break
    obj = _clean_object(sentence[pos:end])
    words = obj.split()
    if not words or len(words) > 14 or words[-1].casefold() in _DANGLING:
        return None
    return obj, pos + len(obj)


def _rule_plans(sentence: str) -> Iterator[_Hit]:
    for m in _PLAN.finditer(sentence):
        found = _plan_object(sentence, m.end())
        if not found:
            continue
        obj, end = found
        verb = obj.split()[0].casefold()
        cue = m.group(0).casefold()
        explicit = bool(re.search(r"plan|intend|aim|scheduled", cue))
        has_date = _date_phrase(obj) is not None
        if verb in _DISCOURSE_VERBS and not (verb in ("be", "go", "have") and has_date):
            continue
        if not explicit and verb not in _PLAN_VERBS and not has_date:
            continue
        confidence = 0.5 if "hoping" in cue else 0.55
        if re.search(r"(?i)(?<![\w'’])(?:you|this|that|these|those|it|them|'em|him|her)(?![\w'’])", obj):
            continue  # "I'll get the video to you soon": a promise in passing, not a plan
        destination = not re.match(r"[a-z]", obj) or verb in ("a", "an", "the", "my", "our", "some")
        if destination:
            # "I'm going to Japan / a conference in May": a trip, when a date says it is one.
            if re.search(r"\bgoing\s+to\s*$", cue) and has_date:
                yield _Hit("plans_to", obj, "{S} is going to {O}.", m.start(), end, confidence=confidence,
                           plan_text=obj)
            continue
        yield _Hit("plans_to", obj, "{S} plans to {O}.", m.start(), end, confidence=confidence, plan_text=obj)
    for m in _PLAN_ING.finditer(sentence):
        found = _plan_object(sentence, m.end())
        if not found:
            continue
        obj, end = found
        verb = obj.split()[0].casefold()
        if verb not in ("moving", "relocating", "retiring") and _date_phrase(obj) is None:
            continue
        yield _Hit("plans_to", obj, "{S} is {O}.", m.start(), end, confidence=0.55, plan_text=obj)


_DATE_VALUE = re.compile(
    r"(?:(?:on\s+)?(?:the\s+)?(?P<d1>\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<m1>" + _MONTH + r")"
    r"(?:,?\s+(?P<y1>\d{4}))?"
    r"|(?:on\s+)?(?P<m2>" + _MONTH + r")\s+(?P<d2>\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(?P<y2>\d{4}))?"
    r"|(?P<iso>\d{4}-\d{2}-\d{2}))(?![\w-])"
)
_BIRTHDAY = re.compile(r"(?<![\w'’-])[Mm]y\s+(?:birthday|date\s+of\s+birth|birth\s+date|bday)(?:\s+is|" + _A
                       + r"s)\s+(?:on\s+)?")
_BORN = re.compile(I_ + r"\s+was\s+born\s+(?:(on|in)\s+)?")


def _rule_dates(sentence: str) -> Iterator[_Hit]:
    for m in _BIRTHDAY.finditer(sentence):
        d = _DATE_VALUE.match(sentence, m.end())
        if d:
            obj = _clean_object(re.sub(r"^(?:on\s+)", "", d.group(0)))
            yield _Hit("birthday", obj, "{S}{POSS} birthday is {O}.", m.start(), d.end(), confidence=0.7,
                       first_person=False)
    for m in _BORN.finditer(sentence):
        prep = m.group(1)
        d = _DATE_VALUE.match(sentence, m.end())
        if d and prep != "in":
            yield _Hit("birthday", _clean_object(d.group(0)), "{S} was born on {O}.", m.start(), d.end(),
                       confidence=0.7)
            continue
        if prep != "in":
            continue
        year = re.match(r"(?:19|20)\d{2}(?!\d)", sentence[m.end():])
        if year:
            yield _Hit("birth_year", year.group(0), "{S} was born in {O}.", m.start(), m.end() + year.end(),
                       confidence=0.7)
            continue
        found = _proper_at(sentence, m.end())
        if found and not re.fullmatch(_MONTH, found[0]):
            yield _Hit("born_in", found[0], "{S} was born in {O}.", m.start(), found[1], confidence=0.7)


_KNOWN_TOOLS = frozenset("""vim neovim nvim emacs git docker python postgres postgresql mysql sqlite linux bash
    zsh fish tmux excel kubernetes k8s terraform ansible react vue svelte django flask rails node npm yarn
    pnpm rust go golang java kotlin swift typescript javascript jira notion obsidian slack figma vscode
    chatgpt claude copilot photoshop lightroom blender arch ubuntu debian fedora windows macos ios android
    iphone pytorch tensorflow pandas numpy jupyter latex markdown redis mongodb""".split())
_USE = re.compile(r"(?:(?:" + I_ + r"|" + WE + r")" + ADV + r"\s+(?:mostly\s+|mainly\s+|primarily\s+)?use"
                  r"|(?:" + I_AM + r"|" + WE_ARE + r")" + ADV + r"\s+(?:mostly\s+|mainly\s+)?using"
                  r"|(?:" + I_ + r"|" + WE + r")(?:" + _A + r"ve|\s+have)?" + ADV + r"\s+switched(?:\s+from\s+"
                  r"[\w.+# -]{1,30}?)?\s+to)\s+")


def _tool_token(token: str) -> bool:
    return bool(token[0].isupper() or re.search(r"\d|[.+#]", token) or token.casefold() in _KNOWN_TOOLS)


def _tool_name(item: str) -> str | None:
    """The tool's name: the leading run of capitalised / versioned / known words ("Google Docs",
    "Vallejo" of "Vallejo paints"), or None for "the bus"."""
    words = item.split()
    run: list[str] = []
    for word in words:
        if not _tool_token(word):
            break
        run.append(word)
    return " ".join(run) or None


def _rule_tools(sentence: str) -> Iterator[_Hit]:
    for m in _USE.finditer(sentence):
        items = _phrase_items(sentence, m.end(), max_words=3, stop_at_to=True)
        if not items:
            continue
        names = [_tool_name(item) for item in items[0]]
        if names[0] is None:
            continue
        tools = [n for n in names if n] if all(names) else [names[0]]
        updates = "switched" in m.group(0)
        for tool in tools:
            yield _Hit("uses_tool", tool, "{S} uses {O}.", m.start(), items[1], updates=updates)


_LANGUAGES = frozenset("""english german french spanish portuguese italian dutch swedish norwegian danish
    finnish polish czech slovak hungarian romanian bulgarian greek turkish russian ukrainian arabic hebrew
    persian farsi hindi urdu bengali punjabi tamil telugu marathi gujarati mandarin chinese cantonese
    japanese korean vietnamese thai indonesian malay tagalog filipino swahili amharic yoruba zulu
    afrikaans catalan basque galician welsh irish icelandic estonian latvian lithuanian serbian croatian
    bosnian slovenian albanian georgian armenian latin esperanto""".split())
_SPEAK = re.compile(r"(?:" + I_ + ADV + r"\s+speak(?:\s+(?:fluent|some|a\s+little|basic|conversational))?"
                    r"|" + I_AM + ADV + r"\s+fluent\s+in)\s+")
_NATIVE = re.compile(r"(?:(?<![\w'’-])[Mm]y\s+(?:native\s+language|mother\s+tongue|first\s+language)\s+is"
                     r"|" + I_AM + r"\s+a\s+native)\s+")
_LEARN = re.compile(r"(?:" + I_AM + ADV + r"\s+learning|" + I_ + ADV + r"\s+(?:started|began)\s+learning)\s+")


_LANGUAGE_LIST = re.compile(r"[A-Z][a-z]+(?:(?:\s*,\s*and\s+|\s*,\s*|\s+and\s+|\s+&\s+)[A-Z][a-z]+)*")


def _languages_at(sentence: str, pos: int) -> tuple[list[str], int] | None:
    m = _LANGUAGE_LIST.match(sentence, pos)
    if not m:
        return None
    langs = re.findall(r"[A-Z][a-z]+", m.group(0))
    if not all(lang.casefold() in _LANGUAGES for lang in langs):
        return None
    return langs, m.end()


def _rule_languages(sentence: str) -> Iterator[_Hit]:
    for m in _SPEAK.finditer(sentence):
        found = _languages_at(sentence, m.end())
        if found:
            hedge = 0.55 if re.search(r"little|some|basic", m.group(0)) else BASE_CONFIDENCE
            for lang in found[0]:
                yield _Hit("speaks_language", lang, "{S} speaks {O}.", m.start(), found[1], confidence=hedge)
    for m in _NATIVE.finditer(sentence):
        found = _languages_at(sentence, m.end())
        if found and len(found[0]) == 1:
            yield _Hit("native_language", found[0][0], "{S}{POSS} native language is {O}.", m.start(), found[1],
                       first_person=m.group(0)[0] in "Ii")
    for m in _LEARN.finditer(sentence):
        found = _languages_at(sentence, m.end())
        if found:
            for lang in found[0]:
                yield _Hit("learns", lang, "{S} is learning {O}.", m.start(), found[1])


_ALLERGIC = re.compile(r"(?:" + I_AM + ADV + r"\s+(?:very\s+|severely\s+|highly\s+|mildly\s+)?allergic\s+to|"
                       + I_ + ADV + r"\s+have\s+(?:an?\s+)?(?:severe\s+|mild\s+)?allergy\s+to)\s+")
_ALLERGY = re.compile(I_ + ADV + r"\s+have\s+(?:an?\s+)?(?:severe\s+|mild\s+|bad\s+)?([a-z]+(?:\s+[a-z]+)?)"
                      r"\s+allerg(?:y|ies)\b")
_DIET = re.compile(I_AM + ADV + r"\s+(?:a\s+)?(vegetarian|vegan|pescatarian|pescetarian|gluten-free"
                   r"|lactose\s+intolerant"
                   r"|celiac|coeliac|diabetic)\b")


def _rule_health(sentence: str) -> Iterator[_Hit]:
    for m in _ALLERGIC.finditer(sentence):
        items = _phrase_items(sentence, m.end(), max_words=3)
        if items:
            for item in items[0]:
                yield _Hit("allergic_to", item, "{S} is allergic to {O}.", m.start(), items[1], confidence=0.7)
    for m in _ALLERGY.finditer(sentence):
        what = m.group(1)
        if what.split()[0] in _BAD_FIRST or what in ("bad", "severe", "mild"):
            continue
        yield _Hit("allergic_to", what, "{S} is allergic to {O}.", m.start(), m.end(1), confidence=0.65)
    for m in _DIET.finditer(sentence):
        diet = m.group(1)
        predicate = "has_diet" if diet.split()[0] in ("vegetarian", "vegan", "pescatarian", "pescetarian",
                                                        "gluten-free") else "medical_condition"
        yield _Hit(predicate, diet, "{S} is {O}.", m.start(), m.end())


_NAME_IS = re.compile(r"(?<![\w'’-])[Mm]y\s+name(?:\s+is|" + _A + r"s)\s+")
_GO_BY = re.compile(I_ + r"\s+go\s+by\s+")
_AGE = re.compile(I_AM + r"\s+(\d{1,3})\s+years?\s+old\b")
# "I just turned 32" is a birthday just past: the age now. Not "I turned 180 degrees".
_TURNED = re.compile(I_ + r"(?:\s+(?:just|recently|finally|officially))?\s+turned\s+(\d{1,3})\b"
                     r"(?!\s*(?:%|percent|degrees?|°|pages?|miles?|km|kilometers?|times?|dollars?|euros?|[.,]\d))")


def _rule_identity(sentence: str) -> Iterator[_Hit]:
    for m in _NAME_IS.finditer(sentence):
        found = _name_at(sentence, m.end())
        if found:
            yield _Hit("has_name", found[0], "{S}{POSS} name is {O}.", m.start(), found[1], confidence=0.7,
                       first_person=False)
    for m in _GO_BY.finditer(sentence):
        found = _name_at(sentence, m.end())
        if found:
            yield _Hit("nickname", found[0], "{S} goes by {O}.", m.start(), found[1])
    for m in (*_AGE.finditer(sentence), *_TURNED.finditer(sentence)):
        if 3 <= int(m.group(1)) <= 120:
            yield _Hit("age", m.group(1), "{S} is {O} years old.", m.start(), m.end())


CHANGE_GATE = ("switch", "chang", "moved", "went", "convert", "replac", "swap", "trad", "sold", "left", "closed",
               "cancel", "quit", "stop", "gave", "drop", "ditch", "no longer", "anymore", "any more", "used to",
               "my ", "our ", "new ", "rid of", "return", "upgrad", "downgrad")
_CHANGE_SKIP = ("it", "them", "him", "her", "me", "us", "you", "that", "this", "there", "here")

def _rule_changes(sentence: str) -> Iterator[_Hit]:
    for h in change_frames(sentence):
        yield _Hit(h.predicate, h.obj, h.text, h.anchor, h.end, updates=h.relation == "updates", change=True,
                   replaces=h.replaces, replaces_text=h.replaces_text, soft=h.soft)


# Each rule with the words (lower case) one of which a sentence must contain for it to run: a
# cheap gate that spares the patterns on most sentences.
_RULES = (
    (_rule_changes, CHANGE_GATE),  # first: its hit (with what it replaced) wins over a plainer rule's
    (_rule_lives, ("live", "resid", "based", "settled", "moved", "relocated", "from", "grew up", "home")),
    (_rule_work, ("work", "employ", "join", "start", "job", "hire", "role", "position", "title", "occupation",
                  "'m ", "’m ", " am ")),
    (_rule_study, ("stud", "major", "phd", "master", "bachelor", "degree")),
    (_rule_relationships, ("my ", "married", "engaged", "dating", "relationship")),
    (_rule_pets, tuple(_PETS) + ("pupp", "bunn")),
    (_rule_preferences, ("love", "like", "enjoy", "ador", "hate", "detest", "loath", "stand", "fan of", "into",
                         "favo", "fave")),
    (_rule_plans, ("plan", "hop", "intend", "going", "aim", "schedul", "set to", "'ll", "’ll", "will", "moving",
                   "relocating", "flying", "travel", "heading", "visiting", "starting", "quitting", "leaving",
                   "retiring", "married", "graduating")),
    (_rule_dates, ("birth", "born", "bday")),
    (_rule_tools, ("use", "using", "switched")),
    (_rule_languages, ("speak", "fluent", "native", "tongue", "first language", "learning")),
    (_rule_health, ("allerg", "vegetarian", "vegan", "pesc", "gluten", "lactose", "celiac", "coeliac", "diabetic")),
    (_rule_identity, ("name", "go by", "years old", "turned")),
)
# Each gate as one pattern: "does the sentence hold any of these words" in one C-level scan (a
# generator over the words, per rule and sentence, was a fifth of a long turn's extraction).
_GATED = tuple((rule, re.compile("|".join(map(re.escape, gate)))) for rule, gate in _RULES)
# Change frames judge their own subject (engine.statements): "Swapped the road bike for an
# e-bike" drops its "I", so they run on sentences without a first-person word too.
_CHANGE_GATED = tuple((rule, gate) for rule, gate in _GATED if rule is _rule_changes)
# Every rule is about the speaker: a sentence with no I / my / we has nothing for them.
_FIRST_PERSON = re.compile(r"(?<![\w'’-])(?:[Ii]|[Mm]y|[Ww]e)(?![\w-])")

# --- checks that apply to every hit ---------------------------------------------------------

_CLAUSE_BREAK = re.compile(r"[,;:—–]|\s-\s|\b(?:and|but|so|because|since|plus|also|though|although|while)\b",
                           re.I)
# Words anywhere before an "I ..." statement that make the whole sentence hypothetical, reported
# or fictional. (Clause-level words such as "not" or "used to" are caught by _ALLOWED_LEAD.)
_SUBORDINATE = re.compile(
    r"(?i)\b(?:if|when|whenever|whether|unless|until|once|suppose|supposing|imagine|pretend|pretending"
    r"|as\s+if|what\s+if|even\s+if|in\s+case|said|says|say|told|tells|tell|thinks|thought|believes|claims"
    r"|claimed|asked|asks|wonder|wondering|wondered|dream|dreamt|dreamed|wish|wishes|wished|hope|hoping"
    r"|would|could|should|might|assume|assumes|assumed|rumou?r|lyrics|story|novel|character|roleplay"
    r"|role-play|hypothetically|quote|quoting)\b"
)
_ALLOWED_LEAD = frozenset("""so and but well oh ok okay yeah yes yep also actually btw fyi anyway anyways
    honestly basically now today recently lately finally just yesterday last this past week month year
    weekend ago in since as of on the a few couple two three four five six several days weeks months
    years i think guess believe suppose reckon that maybe probably perhaps possibly hi hey hello by way
    currently these moment at right for what it's worth fun fact plus because update news good great
    speaking about quick note ps p.s""".split()) | frozenset(MONTHS)
_HEDGE = re.compile(r"(?i)\b(?:I\s+think|I\s+guess|I\s+believe|I\s+suppose|I\s+reckon|maybe|probably|perhaps"
                    r"|possibly|not\s+sure|might|kind\s+of|sort\s+of)\b")
_NEGATION = re.compile(r"(?i)\b(?:not|never|no\s+longer|anymore|any\s+more|no\s+more|nobody|neither|nor)\b"
                       r"|n[’']t\b")
_UPDATE_SIGNAL = re.compile(r"(?i)\b(?:moved|relocated|now|no\s+longer|switched|new\s+job|new\s+role|started|joined"
                            r"|changed|these\s+days|nowadays)\b")


def _clause_span(sentence: str, anchor: int, end: int) -> tuple[int, int]:
    start = 0
    for m in _CLAUSE_BREAK.finditer(sentence, 0, anchor):
        start = m.end()
    stop = _CLAUSE_BREAK.search(sentence, end)
    return start, stop.start() if stop else len(sentence)


def _prefix_ok(sentence: str, anchor: int) -> bool:
    """The words before an "I ..." statement must not make it hypothetical or someone else's."""
    prefix = sentence[:anchor]
    if _SUBORDINATE.search(prefix):
        return False
    lead = prefix
    for m in _CLAUSE_BREAK.finditer(prefix):
        lead = prefix[m.end():]
    words = re.findall(r"[\w'’.]+", lead.casefold())
    return all(w in _ALLOWED_LEAD or w.isdigit() for w in words)


def _hit_ok(sentence: str, hit: _Hit) -> bool:
    """Drop hits inside quotations, under negation, or (for "I ...") hypothetical or reported."""
    prefix = sentence[:hit.anchor]
    if prefix.count('"') % 2 or prefix.count("“") > prefix.count("”"):
        return False  # inside a quotation
    if hit.change:
        return True  # "no longer", "not ... anymore" are the change itself; mood was judged by the frame
    if hit.first_person and not _prefix_ok(sentence, hit.anchor):
        return False
    start, stop = _clause_span(sentence, hit.anchor, hit.end)
    statement = sentence[hit.anchor:hit.end]
    tail = sentence[hit.end:stop]
    if hit.predicate != "dislikes" and _NEGATION.search(statement):
        return False
    if re.search(r"(?i)\b(?:anymore|any\s+more|no\s+more|no\s+longer)\b", tail):
        return False
    if not hit.first_person and _NEGATION.search(sentence[start:hit.anchor]):
        return False
    if hit.first_person and re.search(r"(?i)\b(?:not|never)\b\s*$", sentence[start:hit.anchor]):
        return False
    return True


# --- dates for plans ------------------------------------------------------------------------

_DATE_PHRASE = re.compile(
    r"(?i)\b(?:(?P<rel>tomorrow|tonight|this\s+weekend|next\s+weekend|next\s+week|next\s+month|next\s+year"
    r"|this\s+week|this\s+month|this\s+year)"
    r"|in\s+(?P<n>\d{1,2}|a|one|two|three|four|five|six)\s+(?P<unit>days?|weeks?|months?|years?)"
    r"|(?:next|this|on)\s+(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|(?:in|this|next|by|until|during)\s+(?P<mon>(?-i:" + "|".join(FULL_MONTHS) + r"))"
    r"(?:\s+(?P<mon_y>\d{4}))?"
    r"|in\s+(?P<year>20\d{2}))\b"
)
_WORD_NUM = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def _date_phrase(text: str) -> re.Match[str] | None:
    return _DATE_PHRASE.search(text) or _DATE_VALUE.search(text)


def _month_end(year: int, month: int) -> datetime:
    return datetime(year, month, calendar.monthrange(year, month)[1], tzinfo=UTC) + timedelta(days=1)


def forget_after_for(text: str, source_time: str | None) -> str | None:
    """When a plan stops being worth remembering: the end of the period its date names (the
    first instant after it), as ISO UTC. Relative dates need `source_time`; None when unknown."""
    try:
        now = parse_iso(source_time) if source_time else None
    except ValueError:
        now = None
    day = now.replace(hour=0, minute=0, second=0, microsecond=0) if now else None
    m = _DATE_PHRASE.search(text)
    if m:
        if m.group("year"):
            return to_iso(datetime(int(m.group("year")) + 1, 1, 1, tzinfo=UTC))
        if m.group("mon"):
            month = MONTHS.index(m.group("mon").casefold()) + 1
            if m.group("mon_y"):
                return to_iso(_month_end(int(m.group("mon_y")), month))
            if day is None:
                return None
            later = month < day.month or (month == day.month and "next" in m.group(0).casefold())
            year = day.year + (1 if later else 0)
            return to_iso(_month_end(year, month))
        if day is None:
            return None
        if m.group("rel"):
            rel = " ".join(m.group("rel").casefold().split())
            if rel == "tomorrow":
                return to_iso(day + timedelta(days=2))
            if rel == "tonight":
                return to_iso(day + timedelta(days=1))
            monday = day - timedelta(days=day.weekday())
            if rel in ("this week", "this weekend"):
                return to_iso(monday + timedelta(days=7))
            if rel in ("next week", "next weekend"):
                return to_iso(monday + timedelta(days=14))
            if rel == "this month":
                return to_iso(_month_end(day.year, day.month))
            if rel == "next month":
                year, month = (day.year + 1, 1) if day.month == 12 else (day.year, day.month + 1)
                return to_iso(_month_end(year, month))
            if rel == "this year":
                return to_iso(datetime(day.year + 1, 1, 1, tzinfo=UTC))
            if rel == "next year":
                return to_iso(datetime(day.year + 2, 1, 1, tzinfo=UTC))
        if m.group("unit"):
            raw = m.group("n").casefold()
            n = _WORD_NUM.get(raw) or int(raw)
            unit = m.group("unit").casefold().rstrip("s")
            days = {"day": 1, "week": 7, "month": 31, "year": 366}[unit] * n
            return to_iso(day + timedelta(days=days + 1))
        if m.group("wd"):
            target = _WEEKDAYS.index(m.group("wd").casefold())
            ahead = (target - day.weekday()) % 7 or 7  # the next such day after the message
            return to_iso(day + timedelta(days=ahead + 1))
    d = _DATE_VALUE.search(text)
    if d:
        if d.group("iso"):
            try:
                when = datetime.fromisoformat(d.group("iso")).replace(tzinfo=UTC)
            except ValueError:
                return None
            return to_iso(when + timedelta(days=1))
        mon = (d.group("m1") or d.group("m2")).rstrip(".").casefold()
        named = month_number(mon)
        if named is None:
            return None
        month = named
        dd = int(d.group("d1") or d.group("d2"))
        yy = d.group("y1") or d.group("y2")
        if yy:
            year = int(yy)
        elif day is not None:
            year = day.year if (month, dd) >= (day.month, day.day) else day.year + 1
        else:
            return None
        try:
            when = datetime(year, month, dd, tzinfo=UTC)
        except ValueError:
            return None
        return to_iso(when + timedelta(days=1))
    return None


# --- the extractor --------------------------------------------------------------------------

def _possessive(name: str) -> str:
    return name + ("'" if name.endswith("s") else "'s")


def _article(obj: str) -> str:
    first = obj.split()[0]
    if first.isupper() and len(first) > 1:
        return "an" if first[0] in "AEFHILMNORSX" else "a"
    return "an" if first[0].casefold() in "aeiou" else "a"


_FIRST_TO_THIRD = {"i": "they", "me": "them", "my": "their", "mine": "theirs", "myself": "themself",
                   "i'm": "they're", "i’m": "they're", "we": "they", "us": "them", "our": "their",
                   "ours": "theirs", "ourselves": "themselves"}


def _third_person(obj: str) -> str:
    """"start my PhD" -> "start their PhD", for the fact sentence only (the object stays as written)."""
    return re.sub(r"(?i)(?<![\w'’])(?:i['’]m|myself|ourselves|mine|ours|my|me|our|us|we|i)(?![\w'’])",
                  lambda m: _FIRST_TO_THIRD.get(m.group(0).casefold(), m.group(0)), obj)


def _render(template: str, subject: str, obj: str) -> str:
    obj = _third_person(obj)
    shown = "The user" if subject == "user" else subject
    text = template.replace("{S}{POSS}", _possessive(shown)).replace("{S}", shown)
    text = text.replace("{POSS}", "'s").replace("{A}", _article(obj)).replace("{O}", obj)
    return text[0].upper() + text[1:]


def extract(chunk: SourceChunk) -> list[Candidate]:
    """Fact candidates stated by the chunk's speaker about themself; see the module docstring."""
    subject = _subject_for(chunk)
    if subject is None:
        return []
    text = chunk.text
    body = _body_start(chunk)
    if INSTRUCTION.search(text[body:]):
        return []
    external = chunk.trust == "external"
    if external and WEAK_INSTRUCTION.search(text[body:]):
        return []
    skey = subject_key("I", speaker=None if subject == "user" else subject)
    out: list[Candidate] = []
    sentence_start = 0
    seen: set[tuple[str, str]] = set()
    read: set[str] = set()
    for start, end in _sentences(text, body):
        sentence = text[start:end]
        if sentence in read:
            continue  # said again in this chunk: every candidate it gives is already in `seen`
        read.add(sentence)
        if sentence.rstrip("\"'’”) ").endswith("?") or WEAK_INSTRUCTION.search(sentence):
            continue
        if sentence.lstrip().startswith(">"):
            continue  # a quoted reply in an email or forum post
        if find_secrets(sentence):
            continue  # a quote that would carry a secret into a fact
        rules = _GATED if _FIRST_PERSON.search(sentence) else _CHANGE_GATED  # else nothing about the speaker
        low = sentence.casefold()
        hedged = bool(_HEDGE.search(sentence))
        _merge_endings(out, sentence_start)
        sentence_start = len(out)
        for rule, gate in rules:
            if not gate.search(low):
                continue
            for hit in rule(sentence):
                if not _hit_ok(sentence, hit):
                    continue
                obj = _clean_object(hit.obj)
                okey = object_key(obj)
                if not okey or (hit.predicate, okey) in seen:
                    continue
                seen.add((hit.predicate, okey))
                start_c, stop_c = _clause_span(sentence, hit.anchor, hit.end)
                # Change words count in the statement's own clause ("Now I live ...", "... now"),
                # not elsewhere: "I moved to Munich with my wife Ana" updates where, not whom.
                region = sentence[start_c if hit.first_person else hit.anchor:stop_c]
                updates = hit.updates or bool(_UPDATE_SIGNAL.search(region))
                confidence = hit.confidence - (HEDGE_PENALTY if hedged else 0.0) - (
                    EXTERNAL_PENALTY if external else 0.0)
                category = predicate_category(hit.predicate)
                forget = forget_after_for(hit.plan_text, chunk.source_time) if hit.plan_text else None
                if hit.change and re.search(r"(?:^|\s)(?:" + "|".join(re.escape(w) for w in _CHANGE_SKIP) + r")\b",
                                            hit.obj.casefold()):
                    continue
                out.append(Candidate(
                    text=_render(hit.text, subject, obj),
                    subject=subject,
                    predicate=hit.predicate,
                    object=obj,
                    evidence=sentence,
                    relation="updates" if updates else "new",
                    category=category,
                    confidence=round(max(0.3, min(0.7, confidence)), 2),
                    importance=IMPORTANCE.get(category, 0.4),
                    is_static=hit.predicate in STATIC_PREDICATES,
                    valid_from=chunk.source_time,
                    forget_after=forget,
                    extraction_method="heuristic",
                    chunk_id=chunk.chunk_id,
                    document_id=chunk.document_id,
                    evidence_start=chunk.start + start,
                    evidence_end=chunk.start + end,
                    trust=chunk.trust,
                    subject_key=skey,
                    predicate_key=hit.predicate,
                    object_key=okey,
                    replaces=hit.replaces,
                    replaces_text=_render(hit.replaces_text, subject, hit.replaces or "") if hit.replaces_text else None,
                    replaces_key=object_key(hit.replaces) if hit.replaces else "",
                    soft_predicate=hit.soft,
                ))
    _merge_endings(out, sentence_start)
    return out


def _merge_endings(out: list[Candidate], start: int) -> None:
    """"I no longer work at Google, I now work at Meta": one update (Meta, replacing Google), not
    an ending and an update. Merges within out[start:], one sentence's candidates."""
    for end in [c for c in out[start:] if c.replaces and c.object_key.startswith("not ")]:
        new = next((c for c in out[start:] if c is not end and c.predicate_key == end.predicate_key
                    and c.relation == "updates" and not c.replaces), None)
        if new is not None:
            new.replaces, new.replaces_key = end.replaces, end.replaces_key
            out.remove(end)


TAKE_BACK_REACH = 2  # a take-back withdraws the speaker's statement at most this many own turns back


PLAN_PREDICATES = frozenset({"plans_to"})
# The slot a plan would change, read from its verb (the guesses change_frames makes for the past
# forms: "moved to Munich" files lives_in, "joined Acme" works_at): "move to Munich" would replace
# where the speaker lives, so "Actually we're staying in Berlin" takes it back; "I'm still at
# Acme" does not.
_PLAN_VERB_SLOT = {"move": "lives_in", "moving": "lives_in", "relocate": "lives_in", "relocating": "lives_in",
                   "live": "lives_in", "join": "works_at", "joining": "works_at", "work": "works_at",
                   "leave": "works_at", "leaving": "works_at", "quit": "works_at", "study": "studies_at"}


def _slot_words(predicate_key: str) -> str:
    """A predicate's own words ("lives_in" -> "lives in"): a take-back may name the slot."""
    return predicate_key.replace("_", " ")


def _take_back_sentence(text: str, clause: str) -> str:
    """The sentence of `text` that holds the take-back `clause` ("Actually we're staying in
    Berlin, the transfer was cancelled."): what the take-back names is read there, not in the
    rest of the turn."""
    for start, end in _sentences(text, 0):  # the extractor's own sentence split (abbreviations kept whole)
        if clause.strip() and clause.strip() in text[start:end]:
            return text[start:end]
    return clause


def taken_back_earlier(chunks: list[SourceChunk], facts_of: Callable[[str], list[Fact]], *,
                       given: Collection[int] = ()) -> list[tuple[Fact, Fact | None, str]]:
    """The facts of an earlier conversation that a take-back in `chunks` withdraws ("We're moving
    to Munich for Jonas's job!", a month later "Actually we're staying in Berlin, the transfer was
    cancelled"): of the speaker's current facts from before the take-back that a change filed
    (it superseded another) or that state a plan, the latest that the take-back's sentence names:
    its value, the value it replaced, or its slot (the predicate's words); for a plan also a value
    the speaker still holds in the slot the plan would change (_PLAN_VERB_SLOT: Berlin, where the
    speaker lives, for "move to Munich"). A take-back that names none of them ("Actually, never
    mind", "Actually I'm staying at Acme" for a move) withdraws nothing. (fact to withdraw, the fact
    it superseded or None, the take-back clause) each; `facts_of(subject key)`: their current and
    superseded facts. A take-back that withdrew a statement of this window (taken_back: `given`,
    the chunks that gave candidates) reaches no further."""
    out: list[tuple[Fact, Fact | None, str]] = []
    taken: set[int] = set()
    for j, chunk in enumerate(chunks):
        if chunk.role not in ("user", None) or not chunk.source_time:
            continue
        clause = takes_back_later(chunk.text)
        if clause is None:
            continue
        own = [c for c in chunks[:j] if c.speaker == chunk.speaker and c.role == chunk.role]
        if any(c.chunk_id in given for c in own[-TAKE_BACK_REACH:]):
            continue
        subject = _subject_for(chunk)
        if subject is None:
            continue
        known = facts_of(subject_key("I", speaker=None if subject == "user" else subject))
        by_id = {f.id: f for f in known}
        facts = [f for f in known if f.status in ("active", "needs_review")
                 and (f.valid_from or "") < chunk.source_time and f.id not in taken]
        replaced = {f.id: by_id.get(f.supersedes_fact_id) if f.supersedes_fact_id else None for f in facts}
        changes = sorted((f for f in facts if f.supersedes_fact_id or f.predicate_key in PLAN_PREDICATES),
                         key=lambda f: (f.valid_from or "", f.id), reverse=True)
        said = _take_back_sentence(chunk.text, clause)
        for f in changes:
            was = replaced[f.id]
            named = f"{f.object} {was.object if was else ''}"
            if f.predicate_key not in PLAN_PREDICATES:
                named += " " + _slot_words(f.predicate_key)
            else:
                slot = _PLAN_VERB_SLOT.get((f.object.split() or [""])[0].casefold())
                named += " " + " ".join(h.object for h in facts if slot and h.predicate_key == slot)
            if takes_back_change(said, named):
                out.append((f, was, clause))
                taken.add(f.id)
                break
    return out


def taken_back(pairs: list[tuple[SourceChunk, Candidate]], chunks: list[SourceChunk]
               ) -> tuple[list[tuple[SourceChunk, Candidate]], list[str]]:
    """Drop candidates read from a statement its speaker takes back later in `chunks` (one window,
    in order): "Scratch that ...", "never mind", "same old number as before" withdraw the nearest
    earlier turn of the same speaker that gave candidates, no more than TAKE_BACK_REACH of their own
    turns back. (kept pairs, one reason per dropped candidate)."""
    given = {ch.chunk_id for ch, _ in pairs}
    withdrawn: dict[int, str] = {}  # chunk id -> the clause that took it back
    for j, later in enumerate(chunks):
        clause = takes_back(later.text)
        if clause is None:
            continue
        own = [c for c in chunks[:j] if c.speaker == later.speaker and c.role == later.role]
        for earlier in reversed(own[-TAKE_BACK_REACH:]):
            if earlier.chunk_id in given and earlier.chunk_id not in withdrawn:
                withdrawn[earlier.chunk_id] = clause
                break
    if not withdrawn:
        return pairs, []
    kept = [(ch, c) for ch, c in pairs if ch.chunk_id not in withdrawn]
    reasons = [f"candidate '{c.predicate}: {c.object}' dropped: taken back later (\"{withdrawn[ch.chunk_id]}\")"
               for ch, c in pairs if ch.chunk_id in withdrawn]
    return kept, reasons
