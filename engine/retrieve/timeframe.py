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
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from ..timeexpr import COUNT, FULL_MONTH, count_value, month_window
from ..timeexpr import DMY as _DMY
from ..timeexpr import MDY as _MDY
from ..timeexpr import MONTHS as _MONTHS
from ..timeexpr import MY as _MY
from ..timeexpr import UNIT_DAYS as _UNIT_DAYS
from ..timeexpr import Y_ONLY as _Y_ONLY

__all__ = ["COUNT", "Window", "closeness", "window"]

# The question's own readings of relative times (the grammar's other forms, "next week", "this
# coming Saturday", are about plans, not what a question about memories points at).
_AGO = re.compile(rf"\b({COUNT})\s+(day|week|month|year)s?\s+ago\b", re.IGNORECASE)
_LAST = re.compile(r"\b(last|past|previous)\s+(week|month|year|weekend)\b", re.IGNORECASE)
_DAYWORD = re.compile(r"\b(yesterday|today|this morning|tonight|last night)\b", re.IGNORECASE)
# A month with no day or year: full names only and after a time preposition, since "Jan",
# "May" and "June" are also people ("the sister of May").
_M_ONLY = re.compile(rf"\b(?:in|during|since|this|last)\s+{FULL_MONTH}\b")
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


def interval_closeness(frame: Window, start: datetime, end: datetime) -> float:
    """How likely a time said as [start, end) ("this summer", "last Saturday") lies in the window:
    the share of the interval inside it (the time is as likely anywhere in what was said), so a
    vague "this year" is weak evidence for "in June" and "on June 3" is full evidence; an interval
    wholly outside scores closeness() of its point nearest the window."""
    if start < frame.end and frame.start < end:
        span = (end - start).total_seconds()
        inside = (min(end, frame.end) - max(start, frame.start)).total_seconds()
        return 1.0 if span <= 0 else min(1.0, inside / span)
    return closeness(frame, min(end - timedelta(seconds=1), frame.start) if end <= frame.start else start)


def window(query: str, now: datetime | None) -> Window | None:
    """The [start, end) window of world time the question refers to, or None."""
    if now is None:
        return None
    absolute = _absolute(query, now)
    if absolute is not None:
        return absolute
    m = _AGO.search(query)
    if m:
        n = count_value(m.group(1))
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
        for hit in rx.finditer(query):
            g = hit.group
            d, mon, y = (g(1), g(2), g(3)) if order == "dmy" else (g(2), g(1), g(3))
            day = _date(int(y) if y else None, _MONTHS[mon], int(d), now)
            if day is not None:
                days.append((hit.start(), day))
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
        return Window(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))
    return None


def _date(year: int | None, month: int, day: int, now: datetime) -> datetime | None:
    try:
        if year is not None:
            return datetime(year, month, day, tzinfo=UTC)
        this = datetime(now.year, month, day, tzinfo=UTC)  # no year: the latest one up to now
        return this if this <= now + timedelta(days=1) else datetime(now.year - 1, month, day, tzinfo=UTC)
    except ValueError:  # "31 February"
        return None


def _month_window(year: int, month: int) -> Window:
    start, end = month_window(year, month)
    return Window(start - MONTH_SLACK, end + MONTH_SLACK)
