"""LoCoMo (Maharana et al., ACL 2024): a list of samples, each a two-person conversation split
into sessions.

One document per session: a header line "Session 3 (2023-05-08 13:56)" (not a chunk), a
blank line, then one chunk per turn "<speaker>: <text>", turns joined by "\\n". A turn that
shares an image carries " [shares a photo: <caption>]" inside its chunk, because the caption
is often the only place the evidence is. Sessions come from the `session_<n>` LISTS: conv-26
has `session_<n>_date_time` keys without sessions.

REALTALK (Lee et al., 2025: 21 days of real messaging between two people) is read as the same
family: one JSON object per chat (Chat_<n>_<A>_<B>.json), `name.speaker_1` / `speaker_2`,
`session_<n>` lists at the top level, messages `{"clean_text", "speaker", "date_time", "dia_id"}`,
`session_<n>_date_time` and message times written "29.12.2023, 00:51:12" (day first), and `qa`
with LoCoMo's evidence dia_ids. `realtalk_samples` turns such chats into LoCoMo samples, so the
importer and the benchmark read one shape; a message's own time becomes its chunk's time (a real
chat's session can span a day, and "yesterday" is said against the message, not the session).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePath
from typing import Any

from engine.errors import BadInput, UnknownFormat
from engine.ingest.model import ParsedDocument
from engine.ingest.normalize import DocumentBuilder, label, normalize
from engine.timeexpr import month_number
from engine.timeutil import to_iso, to_utc_iso

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DATE_KEY = re.compile(r"^session_(\d+)_date_time$")
_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*$",
    re.IGNORECASE,
)
# REALTALK's "29.12.2023, 00:51:12": day first, dotted, seconds optional
_DOTTED = re.compile(r"^\s*(\d{1,2})\.(\d{1,2})\.(\d{4}),?\s+(\d{1,2}):(\d{2})(?::(\d{2}))?\s*$")


def parse_session_date(raw: Any) -> datetime | None:
    """"1:56 pm on 8 May, 2023" -> datetime(2023, 5, 8, 13, 56) (naive, read as UTC); also
    REALTALK's "29.12.2023, 00:51:12" and ISO-8601.

    LoCoMo dates carry no zone; they are conversation-local, and UTC is as good a reading as
    any as long as every session uses the same one.
    """
    if not isinstance(raw, str):
        return None
    match = _DATE.match(raw)
    if match is None:
        if (dotted := _DOTTED.match(raw)) is not None:
            day, month_i, year, hour_d, minute_d, second = dotted.groups()
            try:
                return datetime(int(year), int(month_i), int(day), int(hour_d), int(minute_d), int(second or 0))
            except ValueError:
                return None
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


@dataclass(frozen=True)
class Session:
    """One `session_<n>` list of a LoCoMo conversation, as written."""

    number: int
    date_raw: Any  # conversation["session_<n>_date_time"]; None when the key is absent
    when: datetime | None  # parse_session_date(date_raw)
    turns: tuple[dict[str, Any], ...]  # the turn objects, in file order


@dataclass(frozen=True)
class Sample:
    """One LoCoMo sample: the structure both the importer (below) and the benchmark loader
    (engine/bench/datasets.py) read, so the file is walked by one rule. Values stay as written:
    the importer labels them leniently, the benchmark refuses what its gold cannot use."""

    index: int
    sample_id: Any  # as written (None when absent)
    conversation: dict[str, Any]
    sessions: tuple[Session, ...]  # the session_<n> lists, by number
    not_lists: tuple[str, ...]  # session_<n> keys whose value is not a list (no session)
    dates_without_session: tuple[int, ...]  # session_<n>_date_time keys without a list (conv-26)
    qa: Any  # sample["qa"] as written (None when absent)

    @property
    def id_label(self) -> str:
        """The sample's id as the importer writes it: a label, "sample_<index>" without one."""
        return _id_label(self.sample_id, self.index)


def _id_label(sample_id: Any, index: int) -> str:
    return label(sample_id) or f"sample_{index}"


def is_realtalk(item: Any) -> bool:
    """A REALTALK chat: `name` with the two speakers and top-level session lists, no `conversation`."""
    return (isinstance(item, dict) and "conversation" not in item and isinstance(item.get("name"), dict)
            and any(_SESSION_KEY.match(str(key)) for key in item))


def realtalk_samples(data: Any, name: str) -> list[dict[str, Any]] | None:
    """REALTALK chats (one object, or a list of them) as LoCoMo samples, or None when `data` is
    not REALTALK. The sample id is the file's stem ("Chat_10_Fahim_Muhhamed"; "_<i>" added when
    one file holds several chats); a message's `clean_text` is its text (its `text` when there
    is no clean one), everything else it carries (date_time, images) stays on the turn."""
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list) or not items or not all(is_realtalk(item) for item in items):
        return None
    stem = PurePath(name).stem or "realtalk"
    samples = []
    for i, chat in enumerate(items):
        names = chat["name"]
        conversation: dict[str, Any] = {"speaker_a": names.get("speaker_1"), "speaker_b": names.get("speaker_2")}
        for key, value in chat.items():
            if _SESSION_KEY.match(str(key)) and isinstance(value, list):
                conversation[key] = [_realtalk_turn(turn) for turn in value]
            elif _SESSION_KEY.match(str(key)) or _DATE_KEY.match(str(key)):
                conversation[key] = value
        for key in [k for k in conversation if _SESSION_KEY.match(k)]:
            # a session without its own date is dated by its first message that has one
            first = next((t["date_time"] for t in conversation[key] if isinstance(t, dict)
                          and parse_session_date(t.get("date_time")) is not None), None)
            if first is not None and parse_session_date(conversation.get(f"{key}_date_time")) is None:
                conversation[f"{key}_date_time"] = first
        sample_id = chat.get("sample_id") or (stem if len(items) == 1 else f"{stem}_{i}")
        samples.append({"sample_id": sample_id, "conversation": conversation, "qa": chat.get("qa"),
                        "source_format": "realtalk"})
    return samples


def _realtalk_turn(turn: Any) -> Any:
    if not isinstance(turn, dict):
        return turn  # read_samples says which turn is not an object
    clean = turn.get("clean_text")
    return {**turn, "text": clean} if isinstance(clean, str) else turn


def read_samples(data: Any, name: str) -> list[Sample]:
    """LoCoMo JSON already loaded (a list of samples, or one sample; or REALTALK chats) -> its
    samples. UnknownFormat when it is not LoCoMo's shape; BadInput for a turn that is not an object."""
    data = realtalk_samples(data, name) or data
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise UnknownFormat(f"{name}: not LoCoMo: expected a list of samples with \"conversation\"")
    samples = []
    for i, sample in enumerate(items):
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            raise UnknownFormat(f"{name}: not LoCoMo: item {i} has no \"conversation\" object")
        conv = sample["conversation"]
        lists: dict[int, list[Any]] = {}
        not_lists: list[str] = []
        dated: set[int] = set()
        for key, value in conv.items():
            if (m := _SESSION_KEY.match(key)) is not None:
                if isinstance(value, list):
                    lists[int(m.group(1))] = value
                else:
                    not_lists.append(key)
            elif (m := _DATE_KEY.match(key)) is not None:
                dated.add(int(m.group(1)))
        sessions = []
        for n in sorted(lists):
            for t, turn in enumerate(lists[n]):
                if not isinstance(turn, dict):
                    where = _id_label(sample.get("sample_id"), i)
                    raise BadInput(f"{name}: {where} session_{n}: turn {t} is not a JSON object")
            date_raw = conv.get(f"session_{n}_date_time")
            sessions.append(Session(n, date_raw, parse_session_date(date_raw), tuple(lists[n])))
        samples.append(Sample(i, sample.get("sample_id"), conv, tuple(sessions), tuple(not_lists),
                              tuple(sorted(dated - set(lists))), sample.get("qa")))
    return samples


def session_id(sample_id: str, number: int) -> str:
    """A session's document external_id, "<sample_id>:session_<n>" (what gold sessions name)."""
    return f"{sample_id}:session_{number}"


def parse_json(data: Any, *, name: str) -> list[ParsedDocument]:
    """LoCoMo JSON already loaded -> one ParsedDocument per session."""
    docs = []
    for sample in read_samples(data, name):
        sample_id = sample.id_label
        conv = sample.conversation
        speakers = [s for s in (label(conv.get("speaker_a")), label(conv.get("speaker_b"))) if s]
        for session in sample.sessions:
            n, date_raw, when = session.number, session.date_raw, session.when
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
            for turn in session.turns:
                speaker = label(turn.get("speaker")) or "unknown"
                text = normalize(str(turn.get("text") or ""))
                caption = normalize(str(turn.get("blip_caption") or ""))
                if not text.strip() and not caption.strip():
                    skipped += 1
                    continue
                if builder.chunks:
                    builder.add("\n", normalized=True)
                line = f"{speaker}: " + (text if text.strip() else "")
                meta: dict[str, Any] = {}
                if caption.strip():
                    line += (" [shares a photo: " if text.strip() else "[shares a photo: ") + caption + "]"
                    meta["blip_caption"] = caption.strip()
                    if isinstance(turn.get("img_url"), list):
                        meta["img_url"] = [str(u) for u in turn["img_url"]]
                start, end = builder.add(line)  # one piece, scrubbed as a line: DocumentBuilder.add
                dia_id = turn.get("dia_id")
                said = parse_session_date(turn.get("date_time"))  # REALTALK: each message has its time
                builder.add_chunk(
                    start,
                    end,
                    "message",
                    speaker=speaker,
                    role="user",
                    message_id=label(dia_id) if dia_id is not None else None,
                    source_time=to_iso(said) if said else source_time,
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
                    external_id=session_id(sample_id, n),
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
