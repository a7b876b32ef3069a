"""Names: the one key a name is compared by, and the cheap grammar that finds names in text.

`name_key` is how every part of the engine compares names: facts are keyed by it (subject keys),
entity mentions are stored under it, and the retrieval channels and the speaker prior match query
names with it, so "Ana Lima <ana@x.org>", "ana lima" and "Ana Lima's" meet.

`find_mentions` finds speakers, proper names, emails and handles for episodic memories. It is a
recall aid (the entity channel matches query names against these), not NER: it prefers a few
honest mentions over many guesses. Offsets are relative to the text given.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from email.utils import parseaddr

# Capitalised words in a row ("New York", "Dr. Ana Lima"), allowing an inner "of"/"de"/"van".
# The only dot inside a name is a title's ("Dr. Ana Lima"): "Ana. Kreuzberg" is two sentences.
# A word of a name ends in a letter or digit: in "visit 'Lisbon'" the quote is not part of it.
_PROPER = re.compile(
    r"\b(?:(?:Dr|Mr|Mrs|Ms|Prof|St|Mt|Sr|Jr)\.|[A-Z](?:[\w'’-]*\w)?)"
    r"(?:\s+(?:(?:of|de|da|van|von|del|la|le)\s+)?[A-Z](?:[\w'’-]*\w)?)*"
)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_HANDLE = re.compile(r"(?<![\w@])@[A-Za-z0-9_]{2,30}\b")

# Capitalised words that are sentence furniture rather than names when they stand alone.
_COMMON = frozenset(
    """i i'm i've i'd i'll me my we our you your he she it they them this that these those
    a an the and but or so if then when what where why how who which yes no not ok okay oh hey
    hi hello thanks thank sure well also just really very maybe please sorry wow great good
    nice cool yeah yep nope haha lol do does did is are was were be been have has had can could
    would should will shall may might must there here today tomorrow yesterday monday tuesday
    wednesday thursday friday saturday sunday january february march april may june july
    august september october november december user assistant system tool session""".split()
)


# What may stand between a sentence break and its first word: list bullets, heading marks, quotes.
_OPENERS = " \t#*->•\"'“‘([0123456789"


def sentence_opener(offset: int, before: str | None, after: str | None, *, before_chars: int = 8) -> bool:
    """Is a capitalised word at `offset` of its chunk (`before`: up to `before_chars` characters
    before it, `after`: the one after) just the first word of a sentence? Capitalised there, a
    word says nothing about being a name ("Family is everything", "Bake at 180"); "Ana:" is a
    label, not a sentence."""
    if after == ":":
        return False
    if offset == 0:
        return True
    rest = (before or "").rstrip(_OPENERS)
    if not rest:
        return offset <= before_chars  # only openers since the chunk began
    return rest.endswith((".", "!", "?", "\n", ":"))


@dataclass(frozen=True, slots=True)
class Mention:
    name: str
    canonical: str
    kind: str  # person | name | email | handle
    start: int
    end: int


_QUOTES = str.maketrans({"’": "'", "‘": "'", "`": "'", "“": '"', "”": '"', "‐": "-", "–": "-", "—": "-"})
_POSSESSIVE = re.compile(r"(?<=\w)'s?$")


def normalize(text: str) -> str:
    """NFKC, casefold, plain quotes, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return " ".join(text.split())


@functools.lru_cache(maxsize=8192)  # a long text names the same few entities thousands of times
def name_key(name: str) -> str:
    """A person's or thing's name as a key: "Ana Lima <ana@x.org>" -> "ana lima", "Tom's" -> "tom"."""
    if "<" in name and name.rstrip().endswith(">"):
        display, _address = parseaddr(name)  # a mail header's display name, quoted or not
        if display.strip():
            name = display
    text = normalize(name).strip(" \t\"'.,;:!?()[]{}")
    return _POSSESSIVE.sub("", text).strip()


def find_mentions(text: str, *, speaker: str | None = None, speaker_span: tuple[int, int] | None = None) -> list[Mention]:
    out: list[Mention] = []
    # One byte per character, set where a mention already sits: an overlap test costs the new
    # mention's length, so the whole pass stays linear in the text (a list of taken spans, tested
    # one by one, made a 2 MB turn quadratic).
    taken = bytearray(len(text))

    def add(name: str, kind: str, start: int, end: int) -> None:
        if taken.find(1, start, end) != -1:
            return
        canon = name_key(name)
        if not canon:
            return
        taken[start:end] = b"\x01" * (end - start)
        out.append(Mention(name, canon, kind, start, end))

    if speaker and speaker_span:
        add(speaker, "person", *speaker_span)
    for m in _EMAIL.finditer(text):
        add(m.group(), "email", m.start(), m.end())
    for m in _HANDLE.finditer(text):
        add(m.group(), "handle", m.start(), m.end())
    for m in _PROPER.finditer(text):
        name = m.group().rstrip(".")
        words = name.split()
        # Strip leading sentence furniture ("Hey Caroline" -> "Caroline").
        while words and words[0].casefold().strip("'’") in _COMMON:
            words.pop(0)
        if not words:
            continue
        if len(words) == 1 and (len(words[0]) < 2 or words[0].casefold() in _COMMON):
            continue
        name = " ".join(words)
        start = m.start() + m.group().index(words[0])
        add(name, "name", start, start + len(name))
    out.sort(key=lambda x: x.start)
    return out
