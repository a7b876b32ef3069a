"""Time in a question -> a window of world time.

Absolute dates ("on 9 November, 2022", "December 8th", "in January 2024", "between August 11
and August 15 2023", "in 2023") and relative ones ("two weeks ago", "last month", "yesterday").
Time-aware scoring: memories from inside the window the question points at get a prior. The
window is widened by a slack (people say "two weeks ago" for ten days ago too, and a remark made
on a date is often stored a day either side of it), a relative one also fades out further back,
and nothing is filtered out by it.
An absolute date wins over a relative phrase: in "last week, as mentioned on November 6" the
remark, and so the memory, is from November 6.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
        "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "few": 3, "several": 3}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
# A count of time units as people write it: "3", "two", "a couple of" (a regex alternation).
COUNT = r"\d+|" + "|".join(sorted(_NUM, key=len, reverse=True))
_AGO = re.compile(rf"\b({COUNT})\s+(day|week|month|year)s?\s+ago\b", re.IGNORECASE)
_LAST = re.compile(r"\b(last|past|previous)\s+(week|month|year|weekend)\b", re.IGNORECASE)
_DAYWORD = re.compile(r"\b(yesterday|today|this morning|tonight|last night)\b", re.IGNORECASE)

_FULL_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
                "November", "December")
_MONTHS = {m: i for i, m in enumerate(_FULL_MONTHS, start=1)}
_MONTHS |= {m[:3]: i for m, i in list(_MONTHS.items())} | {"Sept": 9}
# Month names are matched capitalised only: "may" is a verb, "May" a month.
_MONTH = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"((?:19|20)\d{2})"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DMY = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b(?:,?\s*{_YEAR}\b)?")
_MDY = re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?:,\s*|\s+)?(?:{_YEAR}\b)?")
_MY = re.compile(rf"\b{_MONTH}(?:\s+of)?,?\s+{_YEAR}\b")
# A month with no day or year: full names only and after a time preposition, since "Jan",
# "May" and "June" are also people ("the sister of May").
_FULL_MONTH = r"(" + "|".join(_FULL_MONTHS) + r")"
_M_ONLY = re.compile(rf"\b(?:in|during|since|this|last)\s+{_FULL_MONTH}\b")
_Y_ONLY = re.compile(rf"\b(?:in|during|of|since|throughout)\s+{_YEAR}\b")
DAY_SLACK = timedelta(days=1)
MONTH_SLACK = timedelta(days=3)
# "N units ago" is said loosely, and more often of something longer ago than stated than of
# something more recent (forward telescoping: people remember past events as nearer than they
# were). So the prior is full within AGO_SLACK x N units (at least two days) either side of the
# date named, and before that fades linearly to nothing over another N units; after it, it
# stops. LongMemEval's "two weeks ago" questions hold the event asked about and the one it must
# be told apart from, a week or so further back; a hard edge at 19 days ranked that one below
# unrelated sessions that merely fell inside.
AGO_SLACK = 0.35
AGO_FADE = 1.0


class Window(NamedTuple):
    start: datetime
    end: datetime
    fade: timedelta = timedelta(0)  # how far before start the prior fades to nothing; 0: a hard edge


def closeness(frame: Window, when: datetime) -> float:
    """1.0 inside the window, 0.0 after it, and before it falling linearly to 0.0 over its fade."""
    if frame.start <= when < frame.end:
        return 1.0
    if when >= frame.end or frame.fade <= timedelta(0):
        return 0.0
    return max(0.0, 1.0 - (frame.start - when) / frame.fade)


def window(query: str, now: datetime | None) -> Window | None:
    """The [start, end) window of world time the question refers to, or None."""
    if now is None:
        return None
    absolute = _absolute(query, now)
    if absolute is not None:
        return absolute
    m = _AGO.search(query)
    if m:
        n = int(m.group(1)) if m.group(1).isdigit() else _NUM[m.group(1).lower()]
        days = n * _UNIT_DAYS[m.group(2).lower()]
        slack = max(2.0, days * AGO_SLACK)
        centre = now - timedelta(days=days)
        return Window(centre - timedelta(days=slack), centre + timedelta(days=slack), timedelta(days=days * AGO_FADE))
    m = _LAST.search(query)
    if m:
        unit = m.group(2).lower()
        days = 3 if unit == "weekend" else _UNIT_DAYS[unit]
        return Window(now - timedelta(days=2 * days), now)
    m = _DAYWORD.search(query)
    if m:
        word = m.group(1).lower()
        back = 0 if word in ("today", "this morning", "tonight") else 1
        return Window(now - timedelta(days=back + 1), now + timedelta(hours=1))
    return None


def _absolute(query: str, now: datetime) -> Window | None:
    days = []  # (position, day) for every full or partial date, in the order written
    for rx, order in ((_DMY, "dmy"), (_MDY, "mdy")):
        for m in rx.finditer(query):
            d, mon, y = (m.group(1), m.group(2), m.group(3)) if order == "dmy" else (m.group(2), m.group(1), m.group(3))
            day = _date(int(y) if y else None, _MONTHS[mon], int(d), now)
            if day is not None:
                days.append((m.start(), day))
    if days:
        days.sort(key=lambda x: x[0])
        first, last = days[0][1], days[-1][1]
        if len(days) > 1 and re.search(r"\b(between|from)\b", query, re.IGNORECASE) and last >= first:
            return Window(first - DAY_SLACK, last + timedelta(days=1) + DAY_SLACK)
        return Window(first - DAY_SLACK, first + timedelta(days=1) + DAY_SLACK)
    m = _MY.search(query)
    if m:
        return _month_window(int(m.group(2)), _MONTHS[m.group(1)])
    m = _M_ONLY.search(query)
    if m:
        month = _MONTHS[m.group(1)]
        year = now.year if month <= now.month else now.year - 1  # the latest such month up to now
        return _month_window(year, month)
    m = _Y_ONLY.search(query)
    if m:
        year = int(m.group(1))
        return Window(datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc))
    return None


def _date(year: int | None, month: int, day: int, now: datetime) -> datetime | None:
    try:
        if year is not None:
            return datetime(year, month, day, tzinfo=timezone.utc)
        this = datetime(now.year, month, day, tzinfo=timezone.utc)  # no year: the latest one up to now
        return this if this <= now + timedelta(days=1) else datetime(now.year - 1, month, day, tzinfo=timezone.utc)
    except ValueError:  # "31 February"
        return None


def _month_window(year: int, month: int) -> Window:
    start = datetime(year, month, 1, tzinfo=timezone.utc)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=timezone.utc)
    return Window(start - MONTH_SLACK, end + MONTH_SLACK)
