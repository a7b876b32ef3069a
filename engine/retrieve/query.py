"""Turning free text into a safe, fast FTS5 query.

The query is split by the tokenizer the FTS index uses (Store.fts_tokens), so every term it
asks for is a term the index can hold: "art-related" is the two index terms "art" and "relat",
"Nate's" is "nate", and "running" and "runs" are one term. Every term is quoted (user text never
reaches FTS5 syntax), stop-words and one-letter tokens are dropped (PERF.md: OR-ing very common
words costs 40-900 ms at 100k-1M rows; content words cost under 3 ms), and the rest are OR-ed
so BM25 ranks by how many rare words match.
"""

from __future__ import annotations

from collections.abc import Callable

Tokenize = Callable[[str], list[tuple[str, str]]]  # text -> [(surface, index term)]

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here
    here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
    let's me more most mustn't my myself no nor not of off on once only or other ought our ours ourselves
    out over own same shan't she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this those through
    to too under until up very was wasn't we we'd we'll we're we've were weren't what what's when when's
    where where's which while who who's whom why why's with won't would wouldn't you you'd you'll you're
    you've your yours yourself yourselves also just did does done get got like really would could yeah
    yes oh ok okay hey hi hello thanks thank lol haha um uh will shall may might must""".split()
)
# The tokenizer splits at apostrophes: "don't" is "don" + "t", "they're" is "they" + "re". The
# pieces of a stop-word contraction are stop-words too.
STOP_WORDS = STOP_WORDS | frozenset(p for w in STOP_WORDS if "'" in w for p in w.split("'"))

# "How old", "how long", "how many": the word after "how" names the kind of answer (an age, a
# duration, a count), and the answer rarely repeats it ("I just turned 32", "it took three
# hours"). Alone it matches any "old" or "long"; it is searched as the phrase "how old", which
# still finds the turn where someone asked the same thing ("How long have you had them?").
HOW_ANSWER_TYPE = frozenset("old long many much often far big large tall soon late early".split())


def content_terms(text: str, tokenize: Tokenize, *, how_phrase: bool = True) -> list[str]:
    """The content words of `text` as FTS terms (casefolded surfaces), one per index term, in order."""
    terms: list[str] = []
    seen: set[str] = set()
    prev = ""
    for surface, term in tokenize(text):
        word = surface.casefold()
        after_how, prev = prev == "how", word
        if how_phrase and after_how and word in HOW_ANSWER_TYPE:
            phrase = f"how {word}"
            if phrase not in seen:
                seen.add(phrase)
                terms.append(phrase)
            continue
        if len(word) < 2 or word in STOP_WORDS or term in seen:
            continue
        seen.add(term)
        terms.append(word)
    return terms


def match_expression(terms: list[str]) -> str:
    """A quoted OR query over `terms` (each a word or a phrase), or "" when there are none."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms if t)


def fts_query(text: str, tokenize: Tokenize, *, max_terms: int = 24) -> str:
    """A quoted OR query over the content words of `text`, or "" when none remain."""
    return match_expression(content_terms(text, tokenize)[:max_terms])
