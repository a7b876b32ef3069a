"""LoCoMo (Maharana et al., ACL 2024): a list of samples, each a two-person conversation split
into sessions.

One document per session: a header line "Session 3 (2023-05-08 13:56)" (not a chunk), a
blank line, then one chunk per turn "<speaker>: <text>", turns joined by "\\n". A turn that
shares an image carries " [shares a photo: <caption>]" inside its chunk, because the caption
is often the only place the evidence is. Sessions come from the `session_<n>` LISTS: conv-26
has `session_<n>_date_time` keys without sessions.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from engine.errors import BadInput, UnknownFormat
from engine.ingest.model import ParsedDocument
from engine.ingest.normalize import DocumentBuilder, label, normalize
from engine.timeexpr import month_number
from engine.timeutil import to_iso, to_utc_iso

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*$",
    re.IGNORECASE,
)


def parse_session_date(raw: Any) -> datetime | None:
    """"1:56 pm on 8 May, 2023" -> datetime(2023, 5, 8, 13, 56) (naive, read as UTC).

    LoCoMo dates carry no zone; they are conversation-local, and UTC is as good a reading as
    any as long as every session uses the same one.
    """
    if not isinstance(raw, str):
        return None
    match = _DATE.match(raw)
    if match is None:
        iso = to_utc_iso(raw)
        return datetime.fromisoformat(iso[:-1]) if iso else None
    hour, minute, ampm, day, month_name, year = match.groups()
    month = month_number(month_name)
    hour_i = int(hour) % 12 + (12 if ampm.lower() == "p" else 0)
    if month is None:
        return None
    try:
        return datetime(int(year), month, int(day), hour_i, int(minute))
    except ValueError:
        return None


def _samples(data: Any, name: str) -> list[dict[str, Any]]:
    samples = [data] if isinstance(data, dict) else data
    if not isinstance(samples, list) or not samples:
        raise UnknownFormat(f"{name}: not LoCoMo: expected a list of samples with \"conversation\"")
    for i, sample in enumerate(samples):
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            raise UnknownFormat(f"{name}: not LoCoMo: item {i} has no \"conversation\" object")
    return samples


def parse_json(data: Any, *, name: str) -> list[ParsedDocument]:
    """LoCoMo JSON already loaded -> one ParsedDocument per session."""
    docs = []
    for index, sample in enumerate(_samples(data, name)):
        sample_id = label(sample.get("sample_id")) or f"sample_{index}"
        conv = sample["conversation"]
        speakers = [s for s in (label(conv.get("speaker_a")), label(conv.get("speaker_b"))) if s]
        sessions = sorted(
            (int(m.group(1)), value)
            for key, value in conv.items()
            if (m := _SESSION_KEY.match(key)) and isinstance(value, list)
        )
        for n, turns in sessions:
            date_raw = conv.get(f"session_{n}_date_time")
            when = parse_session_date(date_raw)
            builder = DocumentBuilder()
            if when is not None:
                header = f"Session {n} ({when:%Y-%m-%d %H:%M})"
            elif label(date_raw):
                header = f"Session {n} ({label(date_raw)})"
            else:
                header = f"Session {n}"
            builder.add(header + "\n\n")
            source_time = to_iso(when) if when else None
            skipped = 0
            for t, turn in enumerate(turns):
                if not isinstance(turn, dict):
                    raise BadInput(f"{name}: {sample_id} session_{n}: turn {t} is not a JSON object")
                speaker = label(turn.get("speaker")) or "unknown"
                text = normalize(str(turn.get("text") or ""))
                caption = normalize(str(turn.get("blip_caption") or ""))
                if not text.strip() and not caption.strip():
                    skipped += 1
                    continue
                if builder.chunks:
                    builder.add("\n", normalized=True)
                start, end = builder.add(f"{speaker}: ", normalized=True)
                meta: dict[str, Any] = {}
                if text.strip():
                    _, end = builder.add(text, normalized=True)
                if caption.strip():
                    opening = " [shares a photo: " if text.strip() else "[shares a photo: "
                    builder.add(opening, normalized=True)
                    builder.add(caption, normalized=True)
                    _, end = builder.add("]", normalized=True)
                    meta["blip_caption"] = caption.strip()
                    if isinstance(turn.get("img_url"), list):
                        meta["img_url"] = [str(u) for u in turn["img_url"]]
                dia_id = turn.get("dia_id")
                builder.add_chunk(
                    start,
                    end,
                    "message",
                    speaker=speaker,
                    role="user",
                    message_id=label(dia_id) if dia_id is not None else None,
                    source_time=source_time,
                    meta=meta,
                )
            if not builder.chunks:
                continue
            who = " & ".join(speakers)
            docs.append(
                builder.build(
                    source_type="locomo",
                    trust="user",
                    title=f"{sample_id} session {n}" + (f": {who}" if who else ""),
                    source_time=source_time,
                    external_id=f"{sample_id}:session_{n}",
                    meta={
                        "sample_id": sample_id,
                        "session": n,
                        "speakers": speakers,
                        "date_raw": date_raw if isinstance(date_raw, str) else None,
                        "skipped": skipped,
                    },
                )
            )
    return docs
