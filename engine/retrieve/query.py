"""Turning free text into a safe, fast FTS5 query.

Every token is quoted (user text never reaches FTS5 syntax), stop-words and one-letter
tokens are dropped (PERF.md: OR-ing very common words costs 40-900 ms at 100k-1M rows; content
words cost under 3 ms), and the rest are OR-ed so BM25 ranks by how many rare words match.
"""

from __future__ import annotations

import re

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

_TOKEN = re.compile(r"[\w][\w'’-]*", re.UNICODE)
# "How old", "how long", "how many": the word after "how" names the kind of answer (an age, a
# duration, a count), and the answer rarely repeats it ("I just turned 32", "it took three
# hours"). Alone it matches any "old" or "long"; it is searched as the phrase "how old", which
# still finds the turn where someone asked the same thing ("How long have you had them?").
HOW_ANSWER_TYPE = frozenset("old long many much often far big large tall soon late early".split())


def content_terms(text: str) -> list[str]:
    terms: list[str] = []
    prev = ""
    for raw in _TOKEN.findall(text):
        tok = raw.casefold().replace("’", "'").strip("'-")
        after_how, prev = prev == "how", tok
        if after_how and tok in HOW_ANSWER_TYPE:
            if f"how {tok}" not in terms:
                terms.append(f"how {tok}")
            continue
        if len(tok) < 2 or tok in STOP_WORDS:
            continue
        base = tok.split("'")[0]
        if base and base not in STOP_WORDS and base not in terms and len(base) >= 2:
            terms.append(base)
        # A hyphenated compound is an FTS5 phrase ("art-related" matches only "art related"); its
        # parts also go in, so "an art-related event" still reaches "the Museum of Art".
        for part in base.split("-") if "-" in base else ():
            if len(part) >= 2 and part not in STOP_WORDS and part not in terms:
                terms.append(part)
    return terms


def fts_query(text: str, *, max_terms: int = 24) -> str:
    """A quoted OR query over the content words of `text`, or "" when none remain."""
    terms = content_terms(text)[:max_terms]
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
