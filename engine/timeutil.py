"""One time format for the whole store: ISO-8601 UTC with seconds, 'YYYY-MM-DDTHH:MM:SSZ'.

A single fixed-width format keeps lexicographic order equal to time order in SQL.
"""

from __future__ import annotations

import email.utils
import re
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any

FULL_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
               "November", "December")
MONTHS = {m: i for i, m in enumerate(FULL_MONTHS, start=1)}
MONTHS |= {m[:3]: i for m, i in list(MONTHS.items())} | {"Sept": 9}


def month_number(name: str) -> int | None:
    """1-12 for a month's name or abbreviation in any case ("may", "Sept.", "DECEMBER"), else None."""
    word = name.strip().rstrip(".").capitalize()
    return (MONTHS.get(word) or MONTHS.get(word[:3])) if len(word) >= 3 else None


def to_iso(dt: datetime) -> str:
    """'YYYY-MM-DDTHH:MM:SSZ' (the year always four digits); a naive datetime is taken to be UTC."""
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC)
    return f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}Z"


def now_iso() -> str:
    return to_iso(datetime.now(UTC))


@lru_cache(maxsize=8192)  # pure (datetimes are immutable); recall parses each candidate's times per query
def parse_iso(value: str) -> datetime:
    """Parse an ISO-8601 string (with Z, an offset, or naive meaning UTC) to an aware datetime."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def normalise_iso(value: str | None) -> str | None:
    """Any accepted ISO-8601 form -> the store's canonical form; None stays None."""
    if value is None or value == "":
        return None
    return to_iso(parse_iso(value))


def normalise_stored_time(value: str) -> str:
    """A time as other programs store it -> the store's canonical form; ValueError if it is none.

    ISO-8601 (JavaScript's toISOString, offsets, naive = UTC), SQLite's `datetime('now')` text
    ('YYYY-MM-DD HH:MM:SS', UTC) and RFC 2822 mail dates ('Tue, 31 Mar 2026 09:12:44 +0200', as
    a Date: header is copied verbatim; read by the standard library's email.utils)."""
    text = value.strip()
    try:
        return to_iso(parse_iso(text))
    except ValueError:
        pass
    try:
        dt = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        dt = None
    if dt is None:
        raise ValueError(f"not a time: {value!r}")
    return to_iso(dt)  # a zone-less mail date ('-0000') is read as UTC


_NUMERIC = re.compile(r"^[+-]?\d+(\.\d+)?$")


def to_utc_iso(value: Any) -> str | None:
    """A timestamp as importers meet it, in the store's form, or None if unparseable.

    Accepts ISO-8601 strings ("Z", offsets, space separator, date only; naive = UTC),
    datetimes, dates, and Unix epoch numbers (seconds, or milliseconds when that is the only
    plausible reading). Sub-second precision is dropped.
    """
    try:
        if value is None or isinstance(value, bool):
            return None
        if isinstance(value, datetime):
            return to_iso(value)
        if isinstance(value, date):
            return to_iso(datetime(value.year, value.month, value.day))
        if isinstance(value, str) and _NUMERIC.match(value.strip()):
            value = float(value.strip())
        if isinstance(value, (int, float)):
            seconds = float(value)
            if abs(seconds) > 1e11:  # 1e11 s is year 5138: this is milliseconds
                seconds /= 1000.0
            return to_iso(datetime.fromtimestamp(seconds, tz=UTC))
        if isinstance(value, str):
            text = value.strip()
            return to_iso(datetime.fromisoformat(text)) if text else None
    except (ValueError, OverflowError, OSError):
        return None
    return None
