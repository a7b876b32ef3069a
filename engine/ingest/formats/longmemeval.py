"""LongMemEval (Wu et al., ICLR 2025), oracle and S variants: a list of questions, each with a
private haystack of sessions given as parallel lists `haystack_session_ids`,
`haystack_dates` ("2023/04/20 (Thu) 09:10") and `haystack_sessions` (lists of
`{"role", "content", "has_answer"?}`).

One document per distinct haystack session: sessions shared by several questions are stored
once with every question id in meta["question_ids"]. In the S variant the same session is
timestamped differently for each question; the first date wins and all of them are kept in
meta["times"]. A session id that comes back with different turns gets its own document with
external_id "<id>#2", "<id>#3", ... (meta["session_id"] stays the plain id).

One chunk per turn "<role>: <content>", turns joined by a blank line, message_id
"<session_id>:<turn_index>" with the index into the original list (so has_answer
annotations and turn-level evidence line up even when an empty turn is skipped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.errors import BadInput, UnknownFormat
from engine.ingest.formats.chat import content_text, role_label, trust_for_role
from engine.ingest.model import ParsedDocument
from engine.ingest.normalize import DocumentBuilder, label, normalize
from engine.timeutil import to_iso, to_utc_iso

_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\(\w+\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$")
_KEYS = ("haystack_session_ids", "haystack_sessions")


def parse_haystack_date(raw: Any) -> str | None:
    """'2023/04/20 (Thu) 09:10' -> '2023-04-20T09:10:00Z' (zone-less, read as UTC)."""
    if not isinstance(raw, str):
        return None
    match = _DATE.match(raw)
    if match is None:
        return to_utc_iso(raw)
    year, month, day, hour, minute = match.groups()
    try:
        return to_iso(datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0)))
    except ValueError:
        return None


@dataclass
class _Session:
    session_id: str
    external_id: str
    turns: tuple[dict[str, Any], ...]
    key: tuple[tuple[Any, str], ...]
    question_ids: list[str] = field(default_factory=list)
    times: list[str] = field(default_factory=list)
    date_raw: Any = None
    has_answer: dict[int, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class HaystackSession:
    """One entry of a question's parallel haystack lists, as written."""

    session_id: Any  # haystack_session_ids[i]
    date_raw: Any  # haystack_dates[i]; None when the question has no haystack_dates list
    turns: tuple[dict[str, Any], ...]  # haystack_sessions[i], the turn objects


@dataclass(frozen=True)
class Question:
    """One LongMemEval question: the structure both the importer (below) and the benchmark
    loader (engine/bench/datasets.py) read, so the file is walked by one rule. Values stay as
    written: the importer labels them leniently, the benchmark refuses what its gold cannot use."""

    index: int
    item: dict[str, Any]  # the question object (question_id, question, answer, answer_session_ids, ...)
    sessions: tuple[HaystackSession, ...]  # the haystack in file order (repeated ids included)

    @property
    def id_label(self) -> str:
        """The question's id as the importer writes it: a label, "question_<index>" without one."""
        return _id_label(self.item, self.index)


def _id_label(item: dict[str, Any], index: int) -> str:
    return label(item.get("question_id")) or f"question_{index}"


def read_questions(data: Any, name: str) -> list[Question]:
    """LongMemEval JSON already loaded (a list of questions, or one) -> its questions.
    UnknownFormat when it is not LongMemEval's shape; BadInput when its haystack lists differ
    in length or a session is not a list of turn objects."""
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise UnknownFormat(f"{name}: not LongMemEval: expected a list of questions with haystack_sessions")
    questions = []
    for i, q in enumerate(items):
        if not isinstance(q, dict) or any(not isinstance(q.get(k), list) for k in _KEYS):
            raise UnknownFormat(
                f"{name}: not LongMemEval: item {i} lacks haystack_session_ids/haystack_sessions lists"
            )
        ids, bodies, dates = q["haystack_session_ids"], q["haystack_sessions"], q.get("haystack_dates")
        if len(ids) != len(bodies) or (isinstance(dates, list) and len(dates) != len(bodies)):
            raise BadInput(
                f"{name}: question {label(q.get('question_id', i))}: haystack_session_ids, haystack_dates "
                "and haystack_sessions differ in length"
            )
        if not isinstance(dates, list):
            dates = [None] * len(bodies)
        qid = _id_label(q, i)
        sessions = []
        for sid, date_raw, turns in zip(ids, dates, bodies):
            if not isinstance(turns, list):
                raise BadInput(f"{name}: question {qid}: session {label(sid)} is not a list of turns")
            for t, turn in enumerate(turns):
                if not isinstance(turn, dict):
                    raise BadInput(f"{name}: question {qid}: session {label(sid)} turn {t} is not a JSON object")
            sessions.append(HaystackSession(sid, date_raw, tuple(turns)))
        questions.append(Question(i, q, tuple(sessions)))
    return questions


def parse_json(data: Any, *, name: str) -> list[ParsedDocument]:
    """LongMemEval JSON already loaded -> one ParsedDocument per distinct haystack session."""
    by_id: dict[str, list[_Session]] = {}
    order: list[_Session] = []
    for question in read_questions(data, name):
        qid = question.id_label
        for haystack in question.sessions:
            sid, date_raw, turns = label(haystack.session_id), haystack.date_raw, haystack.turns
            key = tuple((t.get("role"), content_text(t.get("content"))) for t in turns)
            variants = by_id.setdefault(sid, [])
            session = next((s for s in variants if s.key == key), None)
            if session is None:
                external_id = sid if not variants else f"{sid}#{len(variants) + 1}"
                session = _Session(sid, external_id, turns, key, date_raw=date_raw)
                variants.append(session)
                order.append(session)
            if qid not in session.question_ids:
                session.question_ids.append(qid)
            when = parse_haystack_date(date_raw)
            if when and when not in session.times:
                session.times.append(when)
            for t, turn in enumerate(turns):
                if "has_answer" in turn:
                    session.has_answer[t] = session.has_answer.get(t, False) or bool(turn["has_answer"])
    return [doc for doc in map(_document, order) if doc is not None]


def _document(session: _Session) -> ParsedDocument | None:
    builder = DocumentBuilder()
    source_time = parse_haystack_date(session.date_raw)
    skipped = 0
    for t, turn in enumerate(session.turns):
        content = normalize(content_text(turn.get("content")))
        if not content.strip():
            skipped += 1
            continue
        role = role_label(turn.get("role")) or "unknown"
        if builder.chunks:
            builder.add("\n\n", normalized=True)
        start, end = builder.add(f"{role}: {content}")  # one piece, scrubbed as a line: DocumentBuilder.add
        builder.add_chunk(
            start,
            end,
            "message",
            speaker=role,
            role=role,
            message_id=f"{session.session_id}:{t}",
            source_time=source_time,
            trust=trust_for_role(role),
            meta={"has_answer": session.has_answer[t]} if t in session.has_answer else {},
        )
    if not builder.chunks:
        return None
    meta: dict[str, Any] = {
        "question_ids": session.question_ids,
        "session_id": session.session_id,
        "skipped": skipped,
    }
    if len(session.times) > 1:
        meta["times"] = session.times
    return builder.build(
        source_type="longmemeval",
        trust="user",
        title=f"LongMemEval session {session.session_id}",
        source_time=source_time,
        external_id=session.external_id,
        meta=meta,
    )
