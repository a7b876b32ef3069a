"""Relative time in a question ("two weeks ago", "last month", "yesterday") -> a window of world time.

Time-aware scoring: memories from inside the window the question points at get a prior. The
window is widened by a slack proportional to its distance (people say "two weeks ago" for ten
days ago too), and nothing is filtered out by it.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
        "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "few": 3, "several": 3}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_AGO = re.compile(r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|couple of|few|several)"
                  r"\s+(day|week|month|year)s?\s+ago\b", re.IGNORECASE)
_LAST = re.compile(r"\b(last|past|previous)\s+(week|month|year|weekend)\b", re.IGNORECASE)
_DAYWORD = re.compile(r"\b(yesterday|today|this morning|tonight|last night)\b", re.IGNORECASE)


def window(query: str, now: datetime | None) -> tuple[datetime, datetime] | None:
    """The [start, end) window of world time the question refers to, or None."""
    if now is None:
        return None
    m = _AGO.search(query)
    if m:
        n = int(m.group(1)) if m.group(1).isdigit() else _NUM[m.group(1).lower()]
        days = n * _UNIT_DAYS[m.group(2).lower()]
        slack = max(2.0, days * 0.35)
        centre = now - timedelta(days=days)
        return centre - timedelta(days=slack), centre + timedelta(days=slack)
    m = _LAST.search(query)
    if m:
        unit = m.group(2).lower()
        days = 3 if unit == "weekend" else _UNIT_DAYS[unit]
        return now - timedelta(days=2 * days), now
    m = _DAYWORD.search(query)
    if m:
        word = m.group(1).lower()
        back = 0 if word in ("today", "this morning", "tonight") else 1
        return now - timedelta(days=back + 1), now + timedelta(hours=1)
    return None
