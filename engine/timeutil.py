"""One time format for the whole store: ISO-8601 UTC with seconds, 'YYYY-MM-DDTHH:MM:SSZ'.

A single fixed-width format keeps lexicographic order equal to time order in SQL.
"""

from __future__ import annotations

from datetime import datetime, timezone

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def to_iso(dt: datetime) -> str:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).strftime(FORMAT)


def now_iso() -> str:
    return to_iso(datetime.now(timezone.utc))


def parse_iso(value: str) -> datetime:
    """Parse an ISO-8601 string (with Z, an offset, or naive meaning UTC) to an aware datetime."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def normalise_iso(value: str | None) -> str | None:
    """Any accepted ISO-8601 form -> the store's canonical form; None stays None."""
    if value is None or value == "":
        return None
    return to_iso(parse_iso(value))
