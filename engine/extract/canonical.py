"""Canonical keys, so the same claim always meets its earlier versions.

Reconcile compares facts by (subject_key, predicate_key) and, for single-valued predicates,
treats a different object_key as an update or a conflict. So the keys must be stable across
wording ("I live in", "resides in", "moved to" -> lives_in), across who is speaking ("I", "me",
"the user", the speaker's own name -> the speaker's key) and across spelling of the object
("The NYC." -> "new york city"), and must never merge things that differ: aliases come only
from explicit tables, never from fuzzy matching.

Direction of family predicates: `<subject> parent_of <object>` means the subject is the
object's parent. A bare noun means "the subject's <noun> is the object" ("mother" -> child_of:
the subject is the mother's child); "<noun> of" means "the subject is the <noun> of the object"
("mother of" -> parent_of).
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata

from engine.extract.model import Candidate
from engine.names import name_key, normalize

USER_KEY = "user"  # the subject key of an unnamed user
SELF_REFERENCES = frozenset({"i", "me", "my", "myself", "mine", "the user", "user"})

def _resolve(key: str, aliases: dict[str, str]) -> str:
    return aliases.get(key, key)


def subject_key(subject: str, *, speaker: str | None, aliases: dict[str, str] | None = None) -> str:
    """The canonical key of a fact's subject.

    Self-references ("I", "me", "my", "myself", "the user", "user") and the speaker's own name
    map to the speaker's key (USER_KEY when there is no speaker). `aliases` maps a name to the
    key it stands for ({"annie": "ana"}); keys and values are normalised like names."""
    table = {name_key(k): name_key(v) for k, v in (aliases or {}).items()}
    speaker_name = name_key(speaker) if speaker else ""
    speaker_key = _resolve(speaker_name, table) if speaker_name else USER_KEY
    key = name_key(subject)
    if not key:
        return ""
    if key in SELF_REFERENCES or key == speaker_name:
        return speaker_key
    return _resolve(key, table)


# --- predicates ------------------------------------------------------------------------------

# canonical key -> phrasings (lower case, words separated by single spaces). The key's own
# words ("lives in" for lives_in) always count; inflections of the first word are tried too.
_PREDICATES: dict[str, tuple[str, ...]] = {
    "lives_in": ("live in", "reside in", "move to", "moved to", "relocate to", "relocated to",
                 "based in", "home is", "home is in", "live at", "located in", "current city",
                 "city of residence", "residence", "place of residence", "settle in", "settled in"),
    "is_from": ("from", "come from", "hometown", "grew up in", "grow up in", "originally from"),
    "born_in": ("born in", "birthplace", "place of birth", "was born in"),
    "works_at": ("work at", "work for", "employed by", "employed at", "job at", "join", "joined",
                 "employer", "company", "start at", "started at", "started working at", "new job at",
                 "hired by", "hired at", "start working at"),
    "has_role": ("role", "job title", "title", "job", "work as", "occupation", "profession",
                 "position", "has role", "is employed as", "employed as"),
    "works_on": ("work on", "working on", "project"),
    "studies_at": ("study at", "student at", "attend", "attends", "enrolled at", "enrolled in",
                   "university", "school", "college", "go to school at"),
    "studies": ("study", "major in", "major", "field of study", "degree in", "studying"),
    "has_pet": ("pet", "has pet", "has a pet", "own pet", "has dog", "has a dog", "has cat", "has a cat",
                "pets"),
    "likes": ("like", "love", "enjoy", "into", "is into", "fan of", "is a fan of", "fond of",
              "is fond of", "adore", "likes"),
    "dislikes": ("dislike", "hate", "detest", "can't stand", "cannot stand", "can not stand",
                 "not a fan of", "does not like", "doesn't like", "don't like", "do not like", "loathe"),
    "prefers": ("prefer", "preference"),
    "hobby": ("hobby", "hobbies", "pastime", "has hobby"),
    "interested_in": ("interested in", "is interested in", "curious about"),
    "birthday": ("birthday", "birth date", "date of birth", "born on", "dob", "birthdate", "was born on"),
    "birth_year": ("birth year", "year of birth", "born in year"),
    "age": ("age", "aged", "years old"),
    "plans_to": ("plan to", "plan", "plans", "planning to", "intend to", "going to", "will",
                 "plan on", "planning on", "intends to", "scheduled to"),
    "uses_tool": ("use", "using", "uses tool", "tool", "use tool", "tools"),
    "married_to": ("married to", "is married to", "spouse", "wife", "husband", "spouse of", "wife of",
                   "husband of", "marry", "married"),
    "partner_of": ("partner", "partner of", "girlfriend", "boyfriend", "dating", "is dating",
                   "in a relationship with", "fiance", "fiancee", "fiancé", "fiancée", "engaged to",
                   "girlfriend of", "boyfriend of"),
    "sibling_of": ("sibling", "sibling of", "brother", "sister", "brother of", "sister of", "siblings"),
    "parent_of": ("parent of", "father of", "mother of", "mom of", "dad of", "son", "daughter", "child",
                  "kid", "children", "kids", "has child", "has son", "has daughter"),
    "child_of": ("child of", "son of", "daughter of", "mother", "father", "mom", "mum", "dad", "parent",
                 "parents"),
    "friend_of": ("friend", "friends with", "friend of", "best friend", "is friends with", "best friend of",
                  "friends"),
    "colleague_of": ("colleague", "coworker", "co-worker", "colleague of", "coworker of"),
    "knows": ("know", "acquainted with", "met"),
    "speaks_language": ("speak", "language", "languages", "speaks language", "fluent in", "is fluent in"),
    "native_language": ("native language", "mother tongue", "first language"),
    "learns": ("learn", "learning", "is learning"),
    "allergic_to": ("allergic to", "is allergic to", "allergy", "allergies", "has allergy to",
                    "allergy to", "has an allergy to"),
    "has_name": ("name", "is named", "called", "is called", "named", "full name", "first name"),
    "nickname": ("goes by", "nickname", "go by"),
    "nationality": ("nationality", "citizen of", "is citizen of", "citizenship"),
    "visited": ("visit", "been to", "has been to", "traveled to", "travelled to", "went to", "trip to"),
    "member_of": ("member of", "is member of", "is a member of", "belong to", "plays for", "play for"),
    "owns": ("own", "has car", "drives"),
    "has_diet": ("diet", "is vegetarian", "is vegan", "eats"),
}

# Where a fact's category comes from (model.CATEGORIES); favourite_* -> preference.
_CATEGORY: dict[str, str] = {
    "has_name": "identity", "nickname": "identity", "nationality": "identity", "age": "identity",
    "native_language": "identity", "gender": "identity", "pronouns": "identity", "religion": "identity",
    "lives_in": "location", "is_from": "location", "born_in": "location", "visited": "event",
    "works_at": "work", "has_role": "work", "works_on": "work", "studies_at": "work", "studies": "work",
    "colleague_of": "relationship",
    "married_to": "relationship", "partner_of": "relationship", "sibling_of": "relationship",
    "parent_of": "relationship", "child_of": "relationship", "friend_of": "relationship",
    "knows": "relationship", "member_of": "relationship",
    "has_pet": "pet",
    "likes": "preference", "dislikes": "preference", "prefers": "preference", "hobby": "preference",
    "interested_in": "preference", "has_diet": "preference", "speaks_language": "other", "learns": "other",
    "plans_to": "plan",
    "birthday": "date", "birth_year": "date", "anniversary": "date",
    "uses_tool": "tool",
    "allergic_to": "health", "medical_condition": "health", "takes_medication": "health",
    "owns": "finance", "salary": "finance", "bank": "finance",
    "password": "security", "security_question": "security",
}

# Predicates where several objects can hold at once: a second value is not a conflict.
MULTI_VALUED: frozenset[str] = frozenset({
    "likes", "dislikes", "has_pet", "knows", "friend_of", "uses_tool", "speaks_language", "allergic_to",
    "sibling_of", "child_of", "parent_of", "plans_to", "visited", "hobby", "interested_in", "member_of",
    "colleague_of", "owns", "works_on", "learns", "studies", "medical_condition", "takes_medication",
})
# Predicates whose true value never changes: a different value is a conflict, never an update.
STATIC_PREDICATES: frozenset[str] = frozenset({
    "birthday", "birth_year", "born_in", "native_language", "blood_type", "is_from",
})

_AUX = frozenset("""is am are was were be been being has have had do does did currently now recently
    just also still already really actually""".split())
# Subject words and determiners an extractor may leave at the front ("I just moved to", "my mother").
_LEADING = frozenset({"i", "we", "he", "she", "they", "user", "my", "our", "his", "her", "their", "the"})
_LEMMA_EXCEPTIONS = {"lives": "live", "living": "live", "lived": "live", "moving": "move", "moved": "move",
                     "moves": "move", "studies": "study", "studied": "study", "studying": "study",
                     "went": "go", "goes": "go", "going": "go", "hates": "hate", "hated": "hate",
                     "loves": "love", "loved": "love", "loving": "love", "likes": "like", "liked": "like",
                     "uses": "use", "used": "use", "using": "use", "resides": "reside", "resided": "reside",
                     "residing": "reside", "speaks": "speak", "spoke": "speak", "speaking": "speak",
                     "knows": "know", "knew": "know", "owns": "own", "owned": "own", "married": "married",
                     "enjoys": "enjoy", "enjoyed": "enjoy", "works": "work", "worked": "work",
                     "working": "work", "attended": "attend", "plans": "plan", "planned": "plan",
                     "planning": "plan", "visits": "visit", "visited": "visit", "visiting": "visit",
                     "learns": "learn", "learned": "learn", "learnt": "learn", "prefers": "prefer",
                     "preferred": "prefer", "dislikes": "dislike", "disliked": "dislike",
                     "intends": "intend", "intended": "intend", "joins": "join", "relocates": "relocate",
                     "relocating": "relocate", "settles": "settle", "belongs": "belong", "plays": "play",
                     "comes": "come", "came": "come", "grew": "grow", "majors": "major", "majored": "major",
                     "detests": "detest", "adores": "adore", "loathes": "loathe", "starts": "start",
                     "started": "start", "starting": "start"}
_SPELLING = {"favorite": "favourite", "fave": "favourite", "fav": "favourite", "color": "colour",
             "colors": "colours"}


def _build_lookup() -> dict[str, str]:
    lookup: dict[str, str] = {}
    for key, phrases in _PREDICATES.items():
        lookup[key.replace("_", " ")] = key
        for phrase in phrases:
            lookup.setdefault(phrase, key)
    return lookup


_LOOKUP = _build_lookup()
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _words(text: str) -> list[str]:
    text = _CAMEL_BOUNDARY.sub(" ", unicodedata.normalize("NFKC", text))
    text = normalize(text)
    return re.findall(r"[^\W_]+(?:'[^\W_]+)?", text)


def _lookup(words: list[str]) -> str | None:
    if not words:
        return None
    while len(words) > 1 and words[0] in _LEADING:
        words = words[1:]
    tries = [words]
    stripped = [w for w in words if w not in _AUX]
    if stripped and stripped != words:
        tries.append(stripped)
    for ws in list(tries):
        lemma = _LEMMA_EXCEPTIONS.get(ws[0])
        if lemma:
            tries.append([lemma, *ws[1:]])
    for ws in tries:
        hit = _LOOKUP.get(" ".join(ws))
        if hit:
            return hit
    return None


def predicate_key(predicate: str) -> str:
    """A predicate phrase -> its canonical key ("resides in" -> lives_in, "favorite band" ->
    favourite_band); an unknown phrase -> the snake_case of its words ("" -> related_to)."""
    words = _words(predicate)
    hit = _lookup(words)
    if hit:
        return hit
    content = [w for w in words if w not in ("my", "his", "her", "their", "our", "the", "a", "an")]
    if content and content[0] in ("favourite", "favorite", "fave", "fav") and len(content) > 1:
        return "favourite_" + "_".join(_SPELLING.get(w, w) for w in content[1:])
    return "_".join(words) or "related_to"


def predicate_category(key: str) -> str:
    """The category (one of model.CATEGORIES) of a canonical predicate key; unknown -> other."""
    if key.startswith("favourite_"):
        return "preference"
    return _CATEGORY.get(key, "other")


def is_multi_valued(key: str) -> bool:
    return key in MULTI_VALUED


def is_static(key: str) -> bool:
    return key in STATIC_PREDICATES


# --- objects ---------------------------------------------------------------------------------

# Whole-value aliases only. Kept small on purpose: a wrong merge silently supersedes a fact.
OBJECT_ALIASES: dict[str, str] = {
    "nyc": "new york city", "ny city": "new york city",
    "sf": "san francisco",
    "la": "los angeles",
    "usa": "united states", "us": "united states", "u.s": "united states", "u.s.a": "united states",
    "united states of america": "united states", "america": "united states",
    "uk": "united kingdom", "u.k": "united kingdom", "great britain": "united kingdom",
    "münchen": "munich", "munchen": "munich", "lisboa": "lisbon", "köln": "cologne", "wien": "vienna",
    "postgres": "postgresql", "psql": "postgresql",
    "js": "javascript", "ts": "typescript", "py": "python", "golang": "go",
    "k8s": "kubernetes", "nvim": "neovim", "vscode": "visual studio code", "vs code": "visual studio code",
}
_ARTICLES = re.compile(r"^(?:the|a|an)\s+")
# Keep + # & @ (c++, c#, r&d, @handle); keep . ' - only inside a word (node.js, o'brien, e-mail).
_OBJECT_DROP = re.compile(r"[^\w\s+#&@.'/-]|(?<!\w)[.'/-]|[.'/-](?!\w)|_")


def object_key(obj: str) -> str:
    """An object as a key: casefolded, NFKC, no leading article, no punctuation, whitespace
    collapsed, then the explicit alias table ("The NYC." -> "new york city")."""
    text = normalize(obj)
    while True:  # until stable: dropping "_" in "0/_" leaves a "/" that now ends a word
        dropped = _OBJECT_DROP.sub(" ", text)
        if dropped == text:
            break
        text = dropped
    text = " ".join(text.split())
    while True:
        stripped = _ARTICLES.sub("", text)
        if stripped == text:
            break
        text = stripped
    return OBJECT_ALIASES.get(text, text)


_LIGHT_OBJECT_WORDS = frozenset("""the a an my our old new account membership subscription card plan job car phone
    one""".split())


def objects_match(a: str, b: str) -> bool:
    """Do two object keys name the same thing, one perhaps more fully ("golf" / "2012 vw golf",
    "barclays account" / "barclays")? Used only where a source says which value it replaced."""
    if not a or not b:
        return False
    if a == b:
        return True
    ta = {w for w in a.split() if w not in _LIGHT_OBJECT_WORDS}
    tb = {w for w in b.split() if w not in _LIGHT_OBJECT_WORDS}
    return bool(ta and tb) and (ta <= tb or tb <= ta)


# --- candidates ------------------------------------------------------------------------------

def with_keys(candidate: Candidate, *, speaker: str | None, aliases: dict[str, str] | None = None) -> Candidate:
    """A copy of `candidate` with subject_key, predicate_key and object_key filled in."""
    pkey = predicate_key(candidate.predicate)
    return dataclasses.replace(
        candidate,
        subject_key=subject_key(candidate.subject, speaker=speaker, aliases=aliases),
        predicate_key=pkey,
        object_key=object_key(candidate.object),
        replaces_key=object_key(candidate.replaces) if candidate.replaces else "",
    )
