"""Time expressions in text: the one date grammar, for questions and for what was said.

`mentions(text, ref)` finds the times a turn names ("yesterday", "last Saturday", "two weeks
ago", "last month", "in May", "on 5 June 2023", "next week") and resolves each against `ref`,
the time the turn was said (its session date), to a [start, end) window of world time. A turn
that says "I went hiking last Saturday" on Monday 15 May 2023 is about Saturday 13 May, which is
what a question like "What did Caroline do on 13 May?" needs to find it. Expressions with no
reference time resolve only when they are absolute ("on 5 June 2023", "in 2022").

The question side (engine/retrieve/timeframe.py) reads the same patterns with its own policy
(slack, fading, "the latest such month up to now").

Month names are matched capitalised only: "may" is a verb, "May" a month; a bare month needs a
time preposition ("in May"), since "May" and "June" are also names.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

# the month names live in timeutil, below the modules that read them (statements, this grammar)
from engine.timeutil import FULL_MONTHS as FULL_MONTHS
from engine.timeutil import MONTHS as MONTHS
from engine.timeutil import month_number as month_number

NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "a couple of": 2,
                "few": 3, "a few": 3, "several": 3}
UNIT_DAYS = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}
# A count of time units as people write it: "3", "two", "a couple of" (a regex alternation).
COUNT = r"\d+|" + "|".join(re.escape(w) for w in sorted(NUMBER_WORDS, key=len, reverse=True))

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_MONTH_NAMES = "|".join(sorted(MONTHS, key=len, reverse=True))
MONTH = rf"({_MONTH_NAMES})\.?"
MONTH_WORD = rf"(?:{_MONTH_NAMES})\.?"  # the same, without a group of its own
FULL_MONTH = r"(" + "|".join(FULL_MONTHS) + r")"
YEAR = r"((?:19|20)\d{2})"
DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
DMY = re.compile(rf"\b{DAY}\s+(?:of\s+)?{MONTH}\b(?:,?\s*{YEAR}\b)?")
MDY = re.compile(rf"\b{MONTH}\s+{DAY}\b(?:,\s*|\s+)?(?:{YEAR}\b)?")
MY = re.compile(rf"\b{MONTH}(?:\s+of)?,?\s+{YEAR}\b")
M_ONLY = re.compile(rf"\b(in|during|since|this|last|next|early|late|mid|end of|beginning of)\s+{FULL_MONTH}\b")
Y_ONLY = re.compile(rf"\b(?:in|during|of|since|throughout)\s+{YEAR}\b")
AGO = re.compile(rf"\b({COUNT})\s+(day|week|weekend|month|year)s?\s+ago\b", re.IGNORECASE)
IN_N = re.compile(rf"\bin\s+({COUNT})\s+(day|week|month|year)s?(?!\s+ago)\b", re.IGNORECASE)
LAST = re.compile(r"\b(last|past|previous|this|next|coming)\s+(week|month|year|weekend)\b", re.IGNORECASE)
DAYWORD = re.compile(r"\b(yesterday|today|this morning|this afternoon|this evening|tonight|last night|tomorrow|"
                     r"the other day|the day before yesterday)\b", re.IGNORECASE)
# A weekday, not a habit: "on Saturdays" names no one day.
# Seasons as the northern hemisphere has them (the conversations we read are mostly northern).
SEASONS = {"spring": (3, 3), "summer": (6, 3), "autumn": (9, 3), "fall": (9, 3), "winter": (12, 3)}
SEASON = re.compile(r"\b(last|this|next|past)\s+(spring|summer|autumn|fall|winter)\b", re.IGNORECASE)
WEEKDAY = re.compile(r"\b(?:(last|this|next|this past|this coming|on)\s+)?(" + "|".join(WEEKDAYS) + r")\b")


class Mention(NamedTuple):
    start: int  # offsets in the text given
    end: int
    text: str
    kind: str  # date | month | year | week | weekend | weekday | ago | day | span | season
    window_start: datetime
    window_end: datetime


def count_value(word: str) -> int:
    w = word.lower()
    return int(w) if w.isdigit() else NUMBER_WORDS[w]


def day(dt: datetime) -> datetime:
    return datetime(dt.year, dt.month, dt.day, tzinfo=UTC)


def month_window(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    return start, datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)


def year_window(year: int) -> tuple[datetime, datetime]:
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)


def _safe_date(year: int, month: int, d: int) -> datetime | None:
    try:
        return datetime(year, month, d, tzinfo=UTC)
    except ValueError:  # "31 February"
        return None


def nearest_date(month: int, d: int, ref: datetime) -> datetime | None:
    """A day and month said without a year: the one nearest the time it was said."""
    options = [x for x in (_safe_date(ref.year + dy, month, d) for dy in (-1, 0, 1)) if x is not None]
    return min(options, key=lambda x: abs(x - ref)) if options else None


def nearest_month(month: int, ref: datetime) -> tuple[int, int]:
    """(year, month) of the named month nearest the time it was said."""
    options = [(ref.year + dy, month) for dy in (-1, 0, 1)]
    return min(options, key=lambda ym: abs(datetime(ym[0], ym[1], 15, tzinfo=UTC) - ref))


def _week_start(dt: datetime) -> datetime:
    d = day(dt)
    return d - timedelta(days=d.weekday())


def mentions(text: str, ref: datetime | None) -> list[Mention]:
    """Every time expression in `text` that resolves, earliest first, none overlapping another."""
    found: list[Mention] = []
    taken: list[tuple[int, int]] = []  # few per turn: a scan is cheaper than an interval tree

    def add(m: re.Match[str], kind: str, start: datetime | None, end: datetime | None) -> None:
        if start is None or end is None or end <= start:
            return
        s, e = m.span()
        if any(a < e and s < b for a, b in taken):
            return
        taken.append((s, e))
        found.append(Mention(s, e, m.group(0), kind, start, end))

    # absolute first: they are the most specific
    for rx, order in ((DMY, "dmy"), (MDY, "mdy")):
        for m in rx.finditer(text):
            d, mon, y = (m.group(1), m.group(2), m.group(3)) if order == "dmy" else (m.group(2), m.group(1), m.group(3))
            month, dd = MONTHS[mon], int(d)
            if y:
                when = _safe_date(int(y), month, dd)
            else:
                when = nearest_date(month, dd, ref) if ref is not None else None
            if when is not None:
                add(m, "date", when, when + timedelta(days=1))
    for m in MY.finditer(text):
        add(m, "month", *month_window(int(m.group(2)), MONTHS[m.group(1)]))
    for m in Y_ONLY.finditer(text):
        add(m, "year", *year_window(int(m.group(1))))
    if ref is None:
        found.sort(key=lambda x: x.start)
        return found
    today = day(ref)
    for m in M_ONLY.finditer(text):
        prep, month = m.group(1).lower(), MONTHS[m.group(2)]
        if prep == "last":
            year = ref.year if month < ref.month else ref.year - 1
        elif prep == "next":
            year = ref.year if month > ref.month else ref.year + 1
        elif prep == "since":
            year = ref.year if month <= ref.month else ref.year - 1
            add(m, "span", datetime(year, month, 1, tzinfo=UTC), today + timedelta(days=1))
            continue
        else:
            year, month = nearest_month(month, ref)
        add(m, "month", *month_window(year, month))
    for rx, sign in ((AGO, -1), (IN_N, 1)):
        for m in rx.finditer(text):
            n, unit = count_value(m.group(1)), m.group(2).lower()
            slack = {"day": 0, "week": 3, "weekend": 3, "month": 10, "year": 120}[unit]
            try:
                centre = today + sign * timedelta(days=n * UNIT_DAYS[unit])
                window = centre - timedelta(days=slack), centre + timedelta(days=slack + 1)
            except OverflowError:  # "10,000 years ago" is no date a calendar holds: not a time here
                continue
            add(m, "ago", *window)
    for m in LAST.finditer(text):
        which, unit = m.group(1).lower(), m.group(2).lower()
        step = -1 if which in ("last", "past", "previous") else 1 if which in ("next", "coming") else 0
        if unit in ("week", "weekend"):
            week = _week_start(ref) + timedelta(days=7 * step)
            if unit == "weekend":
                add(m, "weekend", week + timedelta(days=5), week + timedelta(days=7))
            else:
                add(m, "week", week, week + timedelta(days=7))
        elif unit == "month":
            y, mo = ref.year, ref.month + step
            if mo < 1:
                y, mo = y - 1, 12
            elif mo > 12:
                y, mo = y + 1, 1
            add(m, "month", *month_window(y, mo))
        else:
            add(m, "year", *year_window(ref.year + step))
    for m in SEASON.finditer(text):
        which, (first, months) = m.group(1).lower(), SEASONS[m.group(2).lower()]

        def season(year: int, first: int = first, months: int = months) -> tuple[datetime, datetime]:
            start = datetime(year, first, 1, tzinfo=UTC)
            end_month = first + months
            return start, datetime(year + (end_month > 12), (end_month - 1) % 12 + 1, 1, tzinfo=UTC)

        year = ref.year - 1 if first == 12 and ref.month <= 2 else ref.year  # "this winter" in January
        start, end = season(year)
        if which in ("last", "past"):  # the latest one over before the day
            while end > ref:
                year -= 1
                start, end = season(year)
        elif which == "next":  # the first one to begin after it
            while start <= ref:
                year += 1
                start, end = season(year)
        add(m, "season", start, end)
    for m in DAYWORD.finditer(text):
        word = m.group(1).lower()
        if word == "the other day":
            add(m, "day", today - timedelta(days=7), today)
            continue
        back = {"yesterday": 1, "last night": 1, "tomorrow": -1, "the day before yesterday": 2}.get(word, 0)
        start = today - timedelta(days=back)
        add(m, "day", start, start + timedelta(days=1))
    for m in WEEKDAY.finditer(text):
        which, name = (m.group(1) or "").lower(), m.group(2)
        target = WEEKDAYS.index(name)
        if which in ("next", "this coming"):
            ahead = (target - ref.weekday()) % 7 or 7
            when = today + timedelta(days=ahead)
        elif which == "this":  # "this Saturday": the coming one, or today
            when = today + timedelta(days=(target - ref.weekday()) % 7)
        else:  # "last Saturday", "on Saturday", "Saturday": the latest one before the day it was said
            back = (ref.weekday() - target) % 7 or 7
            when = today - timedelta(days=back)
        add(m, "weekday", when, when + timedelta(days=1))
    found.sort(key=lambda x: x.start)
    return found


def stored_rows(text: str, source_time: str | None) -> list[tuple[int, int, str, str, str, str]]:
    """(start, end, text, kind, window_start, window_end) of each time `text` names, resolved
    against `source_time` (ISO-8601, or None), as the store keeps them."""
    from .timeutil import parse_iso, to_iso

    try:
        ref = parse_iso(source_time) if source_time else None
    except ValueError:
        ref = None
    return [(m.start, m.end, m.text, m.kind, to_iso(m.window_start), to_iso(m.window_end))
            for m in mentions(text, ref)]
