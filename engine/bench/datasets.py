"""Benchmark dataset loaders: LoCoMo, LongMemEval (oracle and S shapes), ConvoMem and memlens's
own update scenarios (resources/bench/updates.json).

The structure of a LoCoMo or LongMemEval file is read once, by its importer's reader
(engine/ingest/formats/locomo.read_samples, longmemeval.read_questions); the loaders here build
the benchmark's view on top of it (questions, gold ids, categories, quirks), refusing what the
importer would merely label.

Each loader reads one JSON file and returns frozen dataclasses with the gold evidence already
normalised to the ids the ingest importers give their chunks, so retrieval can be scored by
id: LoCoMo turns are `dia_id`s ("D3:7") and sessions "<sample_id>:session_<n>" (the LoCoMo
importer's external_id); LongMemEval turns are "<session_id>:<turn_index>" and sessions the
raw session ids; ConvoMem messages are "c<conversation>:<message>" and conversations
"c<conversation>", both 0-based and private to their test case (a pre-mixed file's haystack, or
one core evidence item's conversations).

The published files are not clean. Every repair and every refusal to repair is counted in the
dataset's `quirks` (a QuirkReport), so a benchmark report can say what was done to the gold.
Quirk examples name ids and positions only, never dataset text (LoCoMo is CC BY-NC).

A file that is not the dataset it claims to be raises engine.errors.BadInput with a one-line
reason that starts with the path; nothing is written anywhere.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from engine.errors import BadInput, UnknownFormat
from engine.ingest.detect import UPDATES_NAME as UPDATES_NAME  # re-exported: an updates file's "dataset"
from engine.ingest.detect import sniff_json
from engine.ingest.formats import locomo, longmemeval
from engine.ingest.normalize import read_file_bytes
from engine.timeutil import to_iso

from . import DATASETS  # re-exported: the names the loaders below answer to

# The codes used in the data (task_eval/evaluation.py), NOT the paper's list order.
LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

_MAX_EXAMPLES = 8
_CHUNK = 1 << 20


# --- shared ---------------------------------------------------------------------------------


@dataclass
class QuirkReport:
    """What a loader repaired, dropped or noticed: a count and a few examples per kind."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def note(self, kind: str, example: str, n: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + n
        shown = self.examples.setdefault(kind, [])
        if len(shown) < _MAX_EXAMPLES:
            shown.append(example)

    def count(self, kind: str) -> int:
        return self.counts.get(kind, 0)

    def __bool__(self) -> bool:
        return bool(self.counts)

    def as_dict(self) -> dict[str, Any]:
        kinds = sorted(self.counts)
        return {
            "counts": {k: self.counts[k] for k in kinds},
            "examples": {k: list(self.examples.get(k, [])) for k in kinds},
        }


def sha256_file(path: Path | str) -> str:
    """Hex sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while block := handle.read(_CHUNK):
                digest.update(block)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a directory") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    return digest.hexdigest()


def _read_json(path: Path | str) -> tuple[Any, str]:
    """(parsed JSON, sha256 of the bytes) for one file, or BadInput with a one-line reason."""
    name = str(path)
    raw = read_file_bytes(path)
    sha = hashlib.sha256(raw).hexdigest()
    if not raw.strip():
        raise BadInput(f"{name}: empty file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{name}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{name}: malformed JSON at line {exc.lineno}:{exc.colno}: {exc.msg}") from None
    return data, sha


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _fail(name: str, reason: str) -> BadInput:
    return BadInput(_one_line(f"{name}: {reason}"))


def _answer_text(value: Any, quirks: QuirkReport, where: str) -> str | None:
    """Gold answers are strings; ints (LoCoMo "2022", 32 LongMemEval answers) become strings."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        quirks.note("int_answer", where)
    else:
        quirks.note("non_string_answer", f"{where}: {type(value).__name__}")
    return str(value)


def detect_dataset(path: Path | str) -> str:
    """"locomo" | "longmemeval" | "convomem" | "updates" from the file's structure (UnknownFormat if none).
    A folder is ConvoMem's layout (one file per test case or evidence batch), or LoCoMo's family
    when its first JSON file is LoCoMo or REALTALK (REALTALK ships one file per chat)."""
    if Path(path).is_dir():
        files = _json_files(Path(path))
        return "locomo" if files and sniff_json(_read_json(files[0])[0]) == "locomo" else "convomem"
    data, _ = _read_json(path)
    return _detect(data, str(path))


def _detect(data: Any, name: str) -> str:
    kind = sniff_json(data)
    if kind not in DATASETS:  # None, or chat messages
        raise UnknownFormat(
            f"{name}: not a benchmark file: expected LoCoMo, LongMemEval, ConvoMem or memlens updates JSON"
        )
    return kind


def load_dataset(path: Path | str) -> Dataset:
    """Detect the dataset and load it, reading the file once."""
    return read_dataset(path)[0]


def read_dataset(path: Path | str) -> tuple[Dataset, Any]:
    """(the loaded dataset, the parsed JSON it came from): the runner hands the raw records of
    each container to the normal importers, so it must not read and parse the file twice. A
    folder is read as ConvoMem (its raw JSON is then None: the runner builds chat JSON from it)."""
    if Path(path).is_dir():
        read = _read_folder(Path(path))
        if read and sniff_json(read[0][1]) == "locomo":
            return _locomo_folder(Path(path), read)
        return _convomem_folder(Path(path), read), None
    data, sha = _read_json(path)
    kind = _detect(data, str(path))
    if kind == "locomo":
        data = _locomo_samples(data, str(path))
    loaded: Dataset = _LOADERS[kind](data, sha, path)
    return loaded, data


# --- LoCoMo ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocomoTurn:
    dia_id: str
    speaker: str
    text: str
    blip_caption: str | None
    session: int


@dataclass(frozen=True)
class LocomoSession:
    sample_id: str
    number: int
    date: str | None  # as written: "1:56 pm on 8 May, 2023"
    time: str | None  # ISO UTC: "2023-05-08T13:56:00Z" (LoCoMo dates carry no zone)
    turns: tuple[LocomoTurn, ...]

    @property
    def session_id(self) -> str:
        """The LoCoMo importer's external_id for this session's document."""
        return locomo_session_id(self.sample_id, self.number)


@dataclass(frozen=True)
class LocomoConversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[LocomoSession, ...]

    def turns(self) -> list[LocomoTurn]:
        return [turn for session in self.sessions for turn in session.turns]


@dataclass(frozen=True)
class LocomoQuestion:
    question_id: str  # "<sample_id>:q<index in qa>"
    sample_id: str
    index: int
    question: str
    answer: str | None  # None for adversarial items that carry only adversarial_answer
    adversarial_answer: str | None
    category: int  # the data's code, 1..5
    category_name: str  # LOCOMO_CATEGORIES[category]
    evidence: tuple[str, ...]  # normalised dia_ids that name a turn of this conversation
    evidence_sessions: tuple[str, ...]  # "<sample_id>:session_<n>", first-mention order
    raw_evidence: tuple[str, ...]  # as written in the file


@dataclass(frozen=True)
class LocomoDataset:
    path: str
    sha256: str
    conversations: tuple[LocomoConversation, ...]
    questions: tuple[LocomoQuestion, ...]
    quirks: QuirkReport

    name = "locomo"

    def stats(self) -> dict[str, Any]:
        by_category = {code: 0 for code in LOCOMO_CATEGORIES}
        for q in self.questions:
            by_category[q.category] += 1
        return {
            "conversations": len(self.conversations),
            "sessions": sum(len(c.sessions) for c in self.conversations),
            "turns": sum(len(s.turns) for c in self.conversations for s in c.sessions),
            "questions": len(self.questions),
            "by_category": by_category,
            "questions_without_evidence": sum(1 for q in self.questions if not q.evidence),
        }


locomo_session_id = locomo.session_id  # the importer's external_id of a session's document


# "D3:7", also the broken "D:11:26" and "D30:05"; anything else ("D") is unrecognisable.
_DIA = re.compile(r"^D(:?)(\d+):(\d+)$")
_EVIDENCE_SEPARATORS = re.compile(r"[;,\s]+")


def load_locomo(path: Path | str) -> LocomoDataset:
    data, sha = _read_json(path)
    return _locomo(data, sha, path)


def _text(value: Any, name: str, where: str, key: str) -> str:
    if not isinstance(value, str):
        raise _fail(name, f"{where}: \"{key}\" is {type(value).__name__}, expected a string")
    return value


def _locomo(data: Any, sha: str, path: Path | str) -> LocomoDataset:
    name = str(path)
    if not isinstance(data, list) or not data:
        raise _fail(name, "not LoCoMo: expected a non-empty list of samples")
    quirks = QuirkReport()
    conversations: list[LocomoConversation] = []
    questions: list[LocomoQuestion] = []
    seen_samples: set[str] = set()
    for sample in locomo.read_samples(data, name):
        i, sample_id = sample.index, sample.sample_id
        if not isinstance(sample_id, str) or not sample_id:
            raise _fail(name, f"item {i}: missing \"sample_id\"")
        if sample_id in seen_samples:
            raise _fail(name, f"item {i}: sample_id {sample_id} repeats an earlier sample")
        seen_samples.add(sample_id)
        conversation = _locomo_conversation(sample_id, sample, name, quirks)
        conversations.append(conversation)
        if not isinstance(sample.qa, list):
            raise _fail(name, f"{sample_id}: \"qa\" is missing or not a list")
        turn_session = {t.dia_id: t.session for t in conversation.turns()}
        for index, item in enumerate(sample.qa):
            questions.append(_locomo_question(sample_id, index, item, turn_session, name, quirks))
    return LocomoDataset(
        path=name,
        sha256=sha,
        conversations=tuple(conversations),
        questions=tuple(questions),
        quirks=quirks,
    )


def _locomo_samples(data: Any, name: str) -> Any:
    """A LoCoMo-family file's samples as a list of LoCoMo samples (the runner hands each
    container its sample): REALTALK chats converted, one sample object listed."""
    converted = locomo.realtalk_samples(data, name)
    if converted is not None:
        return converted
    return [data] if isinstance(data, dict) else data


def _json_files(folder: Path) -> list[Path]:
    """The JSON files under a benchmark folder, in path order (the order their checksum reads)."""
    return sorted(p for p in folder.rglob("*.json") if p.is_file())


def _read_folder(folder: Path) -> list[tuple[Path, Any, str]]:
    """(file, parsed JSON, sha256) of each of the folder's JSON files, each read once."""
    return [(file, *_read_json(file)) for file in _json_files(folder)]


def _folder_checksum(folder: Path, read: list[tuple[Path, Any, str]], kind: str, refusal: str) -> str:
    """One checksum over the files' paths and bytes; BadInput(`refusal`) for a file that is not `kind`."""
    digest = hashlib.sha256()
    for file, data, sha in read:
        if sniff_json(data) != kind:
            raise _fail(str(file), refusal)
        digest.update(f"{file.relative_to(folder).as_posix()}\0{sha}\n".encode())
    return digest.hexdigest()


def _locomo_folder(folder: Path, read: list[tuple[Path, Any, str]]) -> tuple[LocomoDataset, list[Any]]:
    """A folder of LoCoMo-family files (REALTALK's data/Chat_*.json) as one dataset."""
    sha = _folder_checksum(folder, read, "locomo", "not LoCoMo or REALTALK, like the folder's first file")
    samples = [sample for file, data, _ in read for sample in _locomo_samples(data, str(file))]
    return _locomo(samples, sha, folder), samples


def _locomo_conversation(
    sample_id: str, sample: locomo.Sample, name: str, quirks: QuirkReport
) -> LocomoConversation:
    if sample.not_lists:
        raise _fail(name, f"{sample_id}: {sample.not_lists[0]} is not a list of turns")
    # The session lists, not the date keys: conv-26 has dates for sessions it lacks.
    for n in sample.dates_without_session:
        quirks.note("date_without_session", locomo_session_id(sample_id, n))
    sessions = []
    seen_ids: set[str] = set()
    for session in sample.sessions:
        n = session.number
        where = locomo_session_id(sample_id, n)
        date = session.date_raw
        time = None
        if isinstance(date, str) and date.strip():
            if session.when is None:
                quirks.note("unparsed_date", where)
            else:
                time = to_iso(session.when)
        else:
            quirks.note("session_without_date", where)
            date = None
        turns = []
        for t, turn in enumerate(session.turns):
            at = f"{where} turn {t}"
            dia_id = _text(turn.get("dia_id"), name, at, "dia_id").strip()
            if dia_id in seen_ids:
                quirks.note("duplicate_dia_id", f"{sample_id}: {dia_id}")
                continue
            seen_ids.add(dia_id)
            caption = turn.get("blip_caption")
            turns.append(
                LocomoTurn(
                    dia_id=dia_id,
                    speaker=_text(turn.get("speaker"), name, at, "speaker"),
                    text=_text(turn.get("text", ""), name, at, "text"),
                    blip_caption=caption if isinstance(caption, str) and caption else None,
                    session=n,
                )
            )
        sessions.append(LocomoSession(sample_id, n, date, time, tuple(turns)))
    if not sessions:
        raise _fail(name, f"{sample_id}: no session_<n> lists")
    conv = sample.conversation
    return LocomoConversation(
        sample_id=sample_id,
        speaker_a=str(conv.get("speaker_a") or ""),
        speaker_b=str(conv.get("speaker_b") or ""),
        sessions=tuple(sessions),
    )


def _locomo_question(
    sample_id: str,
    index: int,
    item: Any,
    turn_session: dict[str, int],
    name: str,
    quirks: QuirkReport,
) -> LocomoQuestion:
    qid = f"{sample_id}:q{index}"
    if not isinstance(item, dict):
        raise _fail(name, f"{qid}: not a JSON object")
    question = _text(item.get("question"), name, qid, "question")
    category = item.get("category")
    if isinstance(category, bool) or category not in LOCOMO_CATEGORIES:
        raise _fail(name, f"{qid}: category {category!r} is not one of 1-5")
    if "answer" in item:
        answer = _answer_text(item["answer"], quirks, qid)
        if category == 5:
            quirks.note("adversarial_with_answer", qid)
    else:
        answer = None
        if category != 5:
            quirks.note("missing_answer", qid)
    adversarial = item.get("adversarial_answer")
    adversarial = None if adversarial is None else str(adversarial)
    raw = item.get("evidence", [])
    if not isinstance(raw, list):
        raise _fail(name, f"{qid}: \"evidence\" is not a list")
    evidence = _locomo_evidence(qid, raw, turn_session, quirks)
    sessions = list(dict.fromkeys(locomo_session_id(sample_id, turn_session[d]) for d in evidence))
    return LocomoQuestion(
        question_id=qid,
        sample_id=sample_id,
        index=index,
        question=question,
        answer=answer,
        adversarial_answer=adversarial,
        category=category,
        category_name=LOCOMO_CATEGORIES[category],
        evidence=tuple(evidence),
        evidence_sessions=tuple(sessions),
        raw_evidence=tuple(str(e) for e in raw),
    )


def _locomo_evidence(
    qid: str, raw: list[Any], turn_session: dict[str, int], quirks: QuirkReport
) -> list[str]:
    """Split, repair and check one question's evidence list (see the module docstring)."""
    if not raw:
        quirks.note("empty_evidence", qid)
        return []
    evidence: list[str] = []
    for entry in raw:
        if not isinstance(entry, str):
            quirks.note("evidence_not_string", f"{qid}: {entry!r}")
            entry = str(entry)
        pieces = [p for p in _EVIDENCE_SEPARATORS.split(entry.strip()) if p]
        if len(pieces) > 1:
            quirks.note("evidence_split", f"{qid}: {entry!r} -> {', '.join(pieces)}")
        if not pieces:
            quirks.note("evidence_dropped", f"{qid}: {entry!r} (blank)")
        for piece in pieces:
            match = _DIA.match(piece)
            if match is None:
                quirks.note("evidence_dropped", f"{qid}: {piece!r} (not a dia_id)")
                continue
            colon, session, turn = match.groups()
            fixed = f"D{int(session)}:{int(turn)}"
            if colon:
                quirks.note("evidence_extra_colon", f"{qid}: {piece!r} -> {fixed}")
            if fixed != f"D{session}:{turn}":
                quirks.note("evidence_zero_padded", f"{qid}: {piece!r} -> {fixed}")
            if fixed not in turn_session:
                quirks.note("evidence_dropped", f"{qid}: {piece!r} (no such turn)")
                continue
            if fixed in evidence:
                quirks.note("evidence_duplicate", f"{qid}: {fixed}")
                continue
            evidence.append(fixed)
    if not evidence:
        quirks.note("no_valid_evidence", qid)
    return evidence


# --- LongMemEval ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LongMemEvalTurn:
    index: int  # position in the session's original list
    role: str
    content: str
    has_answer: bool | None  # None where the file has no has_answer key (S distractors)

    def turn_id(self, session_id: str) -> str:
        return f"{session_id}:{self.index}"


@dataclass(frozen=True)
class LongMemEvalSession:
    session_id: str
    date: str | None  # ISO UTC, parsed from date_raw
    date_raw: str | None  # "2023/05/30 (Tue) 23:40"
    turns: tuple[LongMemEvalTurn, ...]


@dataclass(frozen=True)
class LongMemEvalQuestion:
    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str | None  # ISO UTC: the "now" of the question
    question_date_raw: str | None
    abstention: bool  # question_id ends with "_abs"
    answer_session_ids: tuple[str, ...]
    sessions: tuple[LongMemEvalSession, ...]  # the haystack, file order, first of a repeated id
    evidence_turn_ids: tuple[str, ...]  # "<session_id>:<turn index>" where has_answer is true

    @property
    def category(self) -> str:
        return self.question_type


@dataclass(frozen=True)
class LongMemEvalDataset:
    path: str
    sha256: str
    variant: str  # "oracle" (haystack = evidence sessions only) or "haystack" (S / M)
    questions: tuple[LongMemEvalQuestion, ...]
    quirks: QuirkReport

    name = "longmemeval"

    def stats(self) -> dict[str, Any]:
        by_type: dict[str, int] = {}
        for q in self.questions:
            by_type[q.question_type] = by_type.get(q.question_type, 0) + 1
        return {
            "questions": len(self.questions),
            "abstention": sum(1 for q in self.questions if q.abstention),
            "sessions": sum(len(q.sessions) for q in self.questions),
            "turns": sum(len(s.turns) for q in self.questions for s in q.sessions),
            "evidence_turns": sum(len(q.evidence_turn_ids) for q in self.questions),
            "by_type": dict(sorted(by_type.items())),
        }


_LME_REQUIRED = ("question_id", "question_type", "question", "answer")


def load_longmemeval(path: Path | str) -> LongMemEvalDataset:
    data, sha = _read_json(path)
    return _longmemeval(data, sha, path)


def _lme_date(raw: Any, quirks: QuirkReport, where: str) -> tuple[str | None, str | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, str):
        quirks.note("unparsed_date", where)
        return None, None
    parsed = longmemeval.parse_haystack_date(raw)
    if parsed is None:
        quirks.note("unparsed_date", where)
    return parsed, raw


def _longmemeval(data: Any, sha: str, path: Path | str) -> LongMemEvalDataset:
    name = str(path)
    quirks = QuirkReport()
    questions = []
    seen: set[str] = set()
    oracle = True
    for raw in longmemeval.read_questions(data, name):
        question = _lme_question(raw, name, quirks)
        if question.question_id in seen:
            raise _fail(name, f"question {question.question_id} appears twice")
        seen.add(question.question_id)
        haystack = {s.session_id for s in question.sessions}
        oracle = oracle and haystack <= set(question.answer_session_ids)
        questions.append(question)
    return LongMemEvalDataset(
        path=name,
        sha256=sha,
        variant="oracle" if oracle else "haystack",
        questions=tuple(questions),
        quirks=quirks,
    )


def _lme_question(raw: longmemeval.Question, name: str, quirks: QuirkReport) -> LongMemEvalQuestion:
    i, item = raw.index, raw.item
    if not isinstance(item.get("answer_session_ids"), list):
        raise _fail(name, f"not LongMemEval: item {i} has no \"answer_session_ids\" list")
    for key in _LME_REQUIRED:
        if key not in item or item[key] is None:
            raise _fail(name, f"item {i}: missing \"{key}\"")
    qid = _text(item["question_id"], name, f"item {i}", "question_id")
    dates = item.get("haystack_dates")
    if dates is None:
        quirks.note("no_haystack_dates", qid)
    elif not isinstance(dates, list):  # the importer reads such a question as undated
        raise _fail(
            name,
            f"question {qid}: haystack_session_ids, haystack_dates and haystack_sessions "
            "differ in length",
        )
    question_date, question_date_raw = _lme_date(item.get("question_date"), quirks, qid)
    answer_ids = tuple(str(s) for s in item["answer_session_ids"])
    sessions: list[LongMemEvalSession] = []
    seen: set[str] = set()
    evidence: list[str] = []
    for haystack in raw.sessions:
        sid = str(haystack.session_id)
        if sid in seen:
            quirks.note("duplicate_session", f"{qid}: {sid}")
            continue
        seen.add(sid)
        date, date_raw = _lme_date(haystack.date_raw, quirks, f"{qid}: {sid}")
        turns = []
        for t, turn in enumerate(haystack.turns):
            content = turn.get("content")
            if not isinstance(content, str):
                quirks.note("non_string_content", f"{qid}: {sid}:{t}")
                content = "" if content is None else str(content)
            flag = turn.get("has_answer")
            has_answer = None if flag is None else bool(flag)
            turns.append(LongMemEvalTurn(t, str(turn.get("role") or ""), content, has_answer))
            if has_answer:
                evidence.append(f"{sid}:{t}")
                if sid not in answer_ids:
                    quirks.note("evidence_turn_outside_answer_sessions", f"{qid}: {sid}:{t}")
        if sid in answer_ids and not any(turn.has_answer for turn in turns):
            quirks.note("answer_session_without_evidence_turns", f"{qid}: {sid}")
        sessions.append(LongMemEvalSession(sid, date, date_raw, tuple(turns)))
    for sid in answer_ids:
        if sid not in seen:
            quirks.note("answer_session_not_in_haystack", f"{qid}: {sid}")
    if not evidence:
        quirks.note("question_without_evidence_turns", qid)
    if not answer_ids:
        quirks.note("question_without_answer_sessions", qid)
    return LongMemEvalQuestion(
        question_id=qid,
        question_type=str(item["question_type"]),
        question=_text(item["question"], name, qid, "question"),
        answer=_answer_text(item["answer"], quirks, qid) or "",
        question_date=question_date,
        question_date_raw=question_date_raw,
        abstention=qid.endswith("_abs"),
        answer_session_ids=answer_ids,
        sessions=tuple(sessions),
        evidence_turn_ids=tuple(evidence),
    )


# --- ConvoMem -------------------------------------------------------------------------------
#
# Two layouts, both from SalesforceAIResearch/ConvoMem (EvidenceSchema.scala, TestCase.scala):
#
# - pre-mixed test case (what the official evaluation reads): {"evidenceItems": [item],
#   "conversations": [conv], "contextSize"}. The conversations are the haystack every item's
#   question is asked against; each item also lists its own evidence conversations by id.
# - core evidence file (Hugging Face core_benchmark/evidence_questions/<category>/<n>_evidence/
#   <person>.json): {"evidence_items": [item], "checkpoint"?}; an item's conversations are its
#   haystack. A bare list of items, or one item, is read the same way.
#
# Gold has no ids: an evidence text is gold wherever a message has exactly that text.

# The core benchmark's six categories: its evidence folders, and the names shown for them.
CONVOMEM_CATEGORIES: dict[str, str] = {
    "user_evidence": "user facts",
    "assistant_facts_evidence": "assistant facts",
    "changing_evidence": "changing facts",
    "abstention_evidence": "abstention",
    "preference_evidence": "preferences",
    "implicit_connection_evidence": "implicit connections",
}
# ConvoMem's repackaging of LoCoMo (LocomoTestCasesGenerator.scala): category_<n>_<name> folders,
# items labelled "locomo_category_<n>". Its names follow the paper's list order, not the data's codes:
# "basic facts" holds LoCoMo's code-1 (multi-hop) questions, "reasoning" code 3 (open-domain),
# "multi-session" code 4 (single-hop), "abstention" code 5 (adversarial). Shown as ConvoMem names them.
CONVOMEM_LOCOMO_CATEGORIES: dict[int, str] = {
    1: "basic facts",
    2: "temporal",
    3: "reasoning",
    4: "multi-session",
    5: "abstention",
}
_LOCOMO_ITEM = re.compile(r"^locomo_category_(\d+)$")
_LOCOMO_FOLDER = re.compile(r"^category_(\d+)_")


@dataclass(frozen=True)
class ConvoMemMessage:
    message_id: str  # "c<conversation index>:<message index>", within its test case
    speaker: str
    text: str


@dataclass(frozen=True)
class ConvoMemConversation:
    conversation_id: str  # "c<index>" within its test case
    source_id: str | None  # the file's own "id", when it has one
    contains_evidence: bool | None  # the file's "containsEvidence" flag, when present
    messages: tuple[ConvoMemMessage, ...]


@dataclass(frozen=True)
class ConvoMemQuestion:
    question_id: str  # "<case>:q<index of the item>"
    case_id: str
    question: str
    answer: str | None
    category: str | None  # a CONVOMEM_CATEGORIES or CONVOMEM_LOCOMO_CATEGORIES name, else as written
    use_case: str | None  # the item's own "category" when it is not the benchmark category
    evidence_texts: tuple[str, ...]  # message_evidences texts as written, repeats dropped
    evidence: tuple[str, ...]  # ids of the messages whose text is exactly an evidence text
    evidence_sessions: tuple[str, ...]  # conversation ids holding gold messages
    unmatched_evidence: int  # evidence texts that are no message's exact text


@dataclass(frozen=True)
class ConvoMemTestCase:
    """One haystack and the questions asked against it: a benchmark container."""

    case_id: str  # the file (relative to the data path, no .json) for pre-mixed; "<file>#<item>" for core
    source: str  # the file it came from
    layout: str  # "premixed" | "core"
    context_size: int | None
    conversations: tuple[ConvoMemConversation, ...]
    questions: tuple[ConvoMemQuestion, ...]


@dataclass(frozen=True)
class ConvoMemDataset:
    path: str
    sha256: str  # of the file; for a folder, of its files' relative paths and sha256s
    cases: tuple[ConvoMemTestCase, ...]
    quirks: QuirkReport

    name = "convomem"

    @property
    def questions(self) -> tuple[ConvoMemQuestion, ...]:
        return tuple(q for case in self.cases for q in case.questions)

    def stats(self) -> dict[str, Any]:
        by_category: dict[str, int] = {}
        layouts: dict[str, int] = {}
        for case in self.cases:
            layouts[case.layout] = layouts.get(case.layout, 0) + 1
            for q in case.questions:
                key = q.category or ""
                by_category[key] = by_category.get(key, 0) + 1
        questions = self.questions
        return {
            "files": len({c.source for c in self.cases}),
            "test_cases": len(self.cases),
            "layouts": dict(sorted(layouts.items())),
            "questions": len(questions),
            "conversations": sum(len(c.conversations) for c in self.cases),
            "messages": sum(len(v.messages) for c in self.cases for v in c.conversations),
            "evidence_texts": sum(len(q.evidence_texts) for q in questions),
            "evidence_messages": sum(len(q.evidence) for q in questions),
            "unmatched_evidence": sum(q.unmatched_evidence for q in questions),
            "questions_without_evidence": sum(1 for q in questions if not q.evidence),
            "by_category": dict(sorted(by_category.items())),
        }


def load_convomem(path: Path | str) -> ConvoMemDataset:
    """A ConvoMem file, or a folder of them (read recursively, in path order)."""
    if Path(path).is_dir():
        return _convomem_folder(Path(path))
    data, sha = _read_json(path)
    return _convomem(data, sha, path)


def _convomem_folder(folder: Path, read: list[tuple[Path, Any, str]] | None = None) -> ConvoMemDataset:
    read = _read_folder(folder) if read is None else read
    if not read:
        raise _fail(str(folder), "a folder is read as ConvoMem, and this one holds no .json files")
    sha = _folder_checksum(folder, read, "convomem", "not a ConvoMem file (a folder is read as ConvoMem only)")
    quirks = QuirkReport()
    cases: list[ConvoMemTestCase] = []
    for file, data, _ in read:
        cases.extend(_convomem_cases(data, file.relative_to(folder), str(file), quirks))
    return ConvoMemDataset(path=str(folder), sha256=sha, cases=tuple(cases), quirks=quirks)


def _convomem(data: Any, sha: str, path: Path | str) -> ConvoMemDataset:
    quirks = QuirkReport()
    cases = _convomem_cases(data, PurePath(Path(path).name), str(path), quirks)
    return ConvoMemDataset(path=str(path), sha256=sha, cases=tuple(cases), quirks=quirks)


def _convomem_cases(data: Any, rel: PurePath, name: str, quirks: QuirkReport) -> list[ConvoMemTestCase]:
    stem = rel.with_suffix("").as_posix()
    # the folders above the file name the category; a folder run also has its own path parts
    folders = (*PurePath(name).parts[:-1], *rel.parts[:-1], rel.stem.split("__")[0])
    if isinstance(data, dict) and "evidenceItems" in data:
        items = data["evidenceItems"]
        if not isinstance(items, list) or not items:
            raise _fail(name, "not ConvoMem: \"evidenceItems\" is not a non-empty list")
        if not isinstance(data.get("conversations"), list):
            raise _fail(name, "not ConvoMem: a pre-mixed test case needs a \"conversations\" list")
        conversations = _convomem_conversations(data["conversations"], name, "conversations")
        size = data.get("contextSize")
        size = size if isinstance(size, int) and not isinstance(size, bool) else None
        if size is not None and size != len(conversations):
            quirks.note("context_size_mismatch", f"{stem}: contextSize {size}, {len(conversations)} conversations")
        questions = [_convomem_question(stem, i, item, conversations, True, folders, name, quirks)
                     for i, item in enumerate(items)]
        _check_contains_evidence(stem, conversations, questions, quirks)
        return [ConvoMemTestCase(stem, rel.as_posix(), "premixed", size, conversations, tuple(questions))]
    if isinstance(data, dict) and "evidence_items" in data:
        items = data["evidence_items"]
    elif isinstance(data, dict):
        items = [data]
    else:
        items = data
    if not isinstance(items, list) or not items:
        raise _fail(name, "not ConvoMem: expected evidence items ({\"evidenceItems\": [...], \"conversations\": "
                          "[...]}, {\"evidence_items\": [...]} or a list)")
    cases = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _fail(name, f"not ConvoMem: item {i} is not a JSON object")
        if not isinstance(item.get("conversations"), list):
            raise _fail(name, f"not ConvoMem: item {i} has no \"conversations\" list")
        conversations = _convomem_conversations(item["conversations"], name, f"item {i} conversations")
        question = _convomem_question(stem, i, item, conversations, False, folders, name, quirks)
        _check_contains_evidence(question.question_id, conversations, [question], quirks)
        cases.append(ConvoMemTestCase(f"{stem}#{i}", rel.as_posix(), "core", None, conversations, (question,)))
    return cases


def _speaker_text(value: Any, name: str, where: str) -> tuple[str, str]:
    if not isinstance(value, Mapping) or not isinstance(value.get("text"), str):
        raise _fail(name, f"{where}: expected {{\"speaker\", \"text\"}} with a string text")
    return str(value.get("speaker") or ""), value["text"]


def _convomem_conversations(raw: list[Any], name: str, where: str) -> tuple[ConvoMemConversation, ...]:
    out = []
    for c, conv in enumerate(raw):
        if not isinstance(conv, dict) or not isinstance(conv.get("messages"), list):
            raise _fail(name, f"{where}[{c}]: no \"messages\" list")
        messages = tuple(
            ConvoMemMessage(f"c{c}:{m}", *_speaker_text(message, name, f"{where}[{c}] message {m}"))
            for m, message in enumerate(conv["messages"]))
        flag = conv.get("containsEvidence")
        source = conv.get("id")
        out.append(ConvoMemConversation(f"c{c}", None if source is None else str(source),
                                        flag if isinstance(flag, bool) else None, messages))
    return tuple(out)


def _convomem_category(item: dict[str, Any], folders: tuple[str, ...], quirks: QuirkReport,
                       qid: str) -> tuple[str | None, str | None]:
    """(the benchmark category, the item's own use-case category when that is something else)."""
    raw = item.get("category")
    raw = None if raw in (None, "") else str(raw)
    for part in reversed(folders):
        if part in CONVOMEM_CATEGORIES:
            return CONVOMEM_CATEGORIES[part], (raw if raw != part else None)
    if raw in CONVOMEM_CATEGORIES:
        return CONVOMEM_CATEGORIES[raw], None
    if raw is not None and (m := _LOCOMO_ITEM.match(raw)) and int(m.group(1)) in CONVOMEM_LOCOMO_CATEGORIES:
        return CONVOMEM_LOCOMO_CATEGORIES[int(m.group(1))], None
    for part in reversed(folders):
        if (m := _LOCOMO_FOLDER.match(part)) and int(m.group(1)) in CONVOMEM_LOCOMO_CATEGORIES:
            return CONVOMEM_LOCOMO_CATEGORIES[int(m.group(1))], raw
    quirks.note("category_outside_the_benchmark", f"{qid}: {raw!r}" if raw else f"{qid}: none")
    return raw, None


def _convomem_question(stem: str, i: int, item: Any, conversations: tuple[ConvoMemConversation, ...],
                       premixed: bool, folders: tuple[str, ...], name: str,
                       quirks: QuirkReport) -> ConvoMemQuestion:
    qid = f"{stem}:q{i}"
    if not isinstance(item, dict):
        raise _fail(name, f"not ConvoMem: item {i} is not a JSON object")
    if not isinstance(item.get("message_evidences"), list):
        raise _fail(name, f"not ConvoMem: item {i} has no \"message_evidences\" list")
    question = _text(item.get("question"), name, f"item {i}", "question")
    texts: list[str] = []
    for e, ev in enumerate(item["message_evidences"]):
        _, text = _speaker_text(ev, name, f"item {i} message_evidences[{e}]")
        if text in texts:
            quirks.note("duplicate_evidence", f"{qid}: evidence {e}")
            continue
        texts.append(text)
    if not texts:
        quirks.note("no_evidence", qid)
    haystack = conversations
    if premixed:  # the item names its evidence conversations: its gold lies there
        own = item.get("conversations")
        own_ids = {str(c.get("id")) for c in own if isinstance(c, dict) and c.get("id") is not None} \
            if isinstance(own, list) else set()
        named = tuple(c for c in conversations if c.source_id in own_ids)
        if own_ids - {c.source_id for c in named}:
            quirks.note("evidence_conversation_not_in_test_case", f"{qid}: {sorted(own_ids)[0]}")
        haystack = named if named else conversations
    wanted = set(texts)
    matched: set[str] = set()
    evidence: list[str] = []
    sessions: list[str] = []
    for conv in haystack:
        for message in conv.messages:
            if message.text in wanted:
                matched.add(message.text)
                evidence.append(message.message_id)
                if conv.conversation_id not in sessions:
                    sessions.append(conv.conversation_id)
    if len(evidence) > len(matched):
        quirks.note("evidence_text_on_several_messages", qid)
    stripped = {m.text.strip(): m.message_id for conv in haystack for m in conv.messages}
    unmatched = [e for e, text in enumerate(texts) if text not in matched]
    for e in unmatched:
        near = stripped.get(texts[e].strip())
        quirks.note("unmatched_evidence", f"{qid}: evidence {e}"
                    + (f" (equals message {near} only without surrounding whitespace)" if near else ""))
    category, use_case = _convomem_category(item, folders, quirks, qid)
    return ConvoMemQuestion(
        question_id=qid,
        case_id=stem if premixed else f"{stem}#{i}",
        question=question,
        answer=_answer_text(item.get("answer"), quirks, qid),
        category=category,
        use_case=use_case,
        evidence_texts=tuple(texts),
        evidence=tuple(evidence),
        evidence_sessions=tuple(sessions),
        unmatched_evidence=len(unmatched),
    )


def _check_contains_evidence(where: str, conversations: tuple[ConvoMemConversation, ...],
                             questions: list[ConvoMemQuestion], quirks: QuirkReport) -> None:
    """The file's containsEvidence flags against the gold found by text (a test case's flags
    cover all of its questions)."""
    holding = {s for q in questions for s in q.evidence_sessions}
    for conv in conversations:
        if conv.contains_evidence is not None and conv.contains_evidence != (conv.conversation_id in holding):
            quirks.note("contains_evidence_mismatch", f"{where}: {conv.conversation_id}")


# dataset name -> (parsed JSON, sha256, path) -> dataset; a new file-backed benchmark adds its
# sniffing rule to _sniff, its name to DATASETS and its loader here
_LOADERS: dict[str, Callable[[Any, str, Path | str], Dataset]] = {
    "locomo": _locomo, "longmemeval": _longmemeval, "convomem": _convomem}


# --- memlens updates ------------------------------------------------------------------------
#
# memlens's own benchmark of current truth (resources/bench/updates.json, written by hand for
# memlens): small chats where one thing about the speaker changes between sessions months apart,
# or seems to and does not (someone else's change, a plan, a hypothetical, a visit, a retracted
# change). Each scenario is one container; its questions ask for the value now (current), an
# earlier one or the one that held at a time (history), or a claim of an outdated turn that still
# holds (keep). Scenarios are split dev / heldout / blind: rules are tuned on dev only. The blind
# batch (ids "-z<N>") was written by someone who had not read the engine's rules, after they were
# built, and is run as a check of whether they carry over to phrasings nobody had in mind.

# "additive" (a second value beside the first: "we also got a cat") came after the held-out half was
# written, so only the dev and blind parts have it.
UPDATE_KINDS = ("change", "other_person", "plan", "hypothetical", "visit", "retracted", "additive")
UPDATE_QUESTION_TYPES = ("current", "history", "keep")
UPDATE_SPLITS = ("dev", "heldout", "blind")
_UPDATE_ROLES = ("user", "assistant")


def default_extract(dataset: str) -> str:
    """Fact extraction in a benchmark's containers unless asked otherwise: none for the public
    benchmarks (retrieval over turns), heuristic for updates (a new user's default ingestion
    without an endpoint: its changes are recognised offline)."""
    return "heuristic" if dataset == "updates" else "none"


def updates_default_path() -> Path:
    """The dataset that ships with memlens."""
    from engine.paths import resources_dir

    return resources_dir() / "bench" / "updates.json"


@dataclass(frozen=True)
class UpdateTurn:
    turn_id: str  # "s<session>:<turn>", session 1-based, turn 0-based
    role: str  # user | assistant
    text: str


@dataclass(frozen=True)
class UpdateSession:
    session_id: str  # "s<session>"
    date: str  # ISO UTC
    turns: tuple[UpdateTurn, ...]


@dataclass(frozen=True)
class UpdateQuestion:
    question_id: str  # "<scenario>/<index>"
    type: str  # current | history | keep
    question: str
    gold: tuple[str, ...]  # turn ids
    as_of: str | None  # ISO UTC: answer as of this time
    stale: tuple[str, ...] = ()  # turns stating another value of the claim (current and keep questions)


@dataclass(frozen=True)
class UpdateScenario:
    scenario_id: str
    split: str  # dev | heldout
    domain: str
    kind: str  # one of UPDATE_KINDS
    steps: int  # values in the chain (1 for a non-change)
    sessions: tuple[UpdateSession, ...]
    questions: tuple[UpdateQuestion, ...]

    @property
    def is_change(self) -> bool:
        return self.kind == "change"


@dataclass(frozen=True)
class UpdatesDataset:
    path: str
    sha256: str
    scenarios: tuple[UpdateScenario, ...]
    quirks: QuirkReport

    name = "updates"

    @property
    def questions(self) -> tuple[UpdateQuestion, ...]:
        return tuple(q for s in self.scenarios for q in s.questions)

    def dev_batches(self) -> dict[str, str]:
        """Scenario id -> its dev batch. Every dev scenario whose id ends in "-w<N>" belongs to batch
        "dev:w<N>", split in two fixed halves before any of its failures were read: its ids sorted,
        alternating, the first, third, ... are "dev:w<N>a", the others "dev:w<N>b". The other dev
        scenarios are "dev:tidy". Only the dev part is grouped this way; `dev_groups` names every
        group a batch counts in."""
        by_batch: dict[str, list[str]] = {}
        for s in self.scenarios:
            batch = _BATCH_ID.search(s.scenario_id)
            if s.split == "dev" and batch:
                by_batch.setdefault(batch.group(1), []).append(s.scenario_id)
        out: dict[str, str] = {}
        for name, ids in by_batch.items():
            out.update({sid: f"dev:{name}{'ab'[i % 2]}" for i, sid in enumerate(sorted(ids))})
        out.update({s.scenario_id: "dev:tidy" for s in self.scenarios if s.split == "dev" and s.scenario_id not in out})
        return out

    def stats(self) -> dict[str, Any]:
        def count(key: Callable[[UpdateScenario], str]) -> dict[str, int]:
            out: dict[str, int] = {}
            for s in self.scenarios:
                out[key(s)] = out.get(key(s), 0) + 1
            return dict(sorted(out.items()))

        return {
            "scenarios": len(self.scenarios),
            "questions": len(self.questions),
            "by_split": count(lambda s: s.split),
            "by_kind": count(lambda s: f"{s.split}:{s.kind}"),
            "by_domain": count(lambda s: s.domain),
            "chains": count(lambda s: f"{s.steps}-step") if self.scenarios else {},
        }


_BATCH_ID = re.compile(r"-(w\d+)$")  # a dev scenario's batch: "home1-w2" is in "dev:w2"
_HALF = re.compile(r"^(dev:w\d+)[ab]$")
# The halves issue 15's mechanisms round developed on: all of "-w2" with "dev:w3a" is "dev:half_a",
# "dev:w3b" (read only as aggregates) "dev:half_b". Later batches are in neither.
_ROUND_HALVES = {"dev:w2a": "dev:half_a", "dev:w2b": "dev:half_a", "dev:w3a": "dev:half_a", "dev:w3b": "dev:half_b"}


def dev_groups(batch: str) -> list[str]:
    """The groups a dev batch (`UpdatesDataset.dev_batches`) is counted in: itself, for a half
    "dev:w<N>a" / "dev:w<N>b" also its whole batch "dev:w<N>", and "dev:half_a" / "dev:half_b"
    for the halves of "-w2" and "-w3" (see _ROUND_HALVES)."""
    out = [batch]
    whole = _HALF.match(batch)
    if whole:
        out.append(whole.group(1))
    if batch in _ROUND_HALVES:
        out.append(_ROUND_HALVES[batch])
    return out


def dev_batch_whole(batch: str) -> str:
    """A half's whole batch ("dev:w4a" -> "dev:w4"); any other batch ("dev:tidy") itself."""
    whole = _HALF.match(batch)
    return whole.group(1) if whole else batch


def load_updates(path: Path | str | None = None) -> UpdatesDataset:
    path = updates_default_path() if path is None else path
    data, sha = _read_json(path)
    return _updates(data, sha, path)


def _iso(value: Any, name: str, where: str) -> str:
    from engine.timeutil import normalise_iso

    if not isinstance(value, str):
        raise _fail(name, f"{where}: expected an ISO-8601 date string")
    try:
        iso = normalise_iso(value)
    except ValueError:
        raise _fail(name, f"{where}: {value!r} is not an ISO-8601 date") from None
    if iso is None:
        raise _fail(name, f"{where}: expected an ISO-8601 date string")
    return iso


def _updates(data: Any, sha: str, path: Path | str) -> UpdatesDataset:
    name = str(path)
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list) or not data["scenarios"]:
        raise _fail(name, 'not a memlens updates file: expected {"scenarios": [...]} with at least one scenario')
    scenarios: list[UpdateScenario] = []
    seen: set[str] = set()
    for i, item in enumerate(data["scenarios"]):
        scenario = _update_scenario(i, item, name)
        if scenario.scenario_id in seen:
            raise _fail(name, f"scenario {scenario.scenario_id} appears twice")
        seen.add(scenario.scenario_id)
        scenarios.append(scenario)
    return UpdatesDataset(path=name, sha256=sha, scenarios=tuple(scenarios), quirks=QuirkReport())


def _update_scenario(i: int, item: Any, name: str) -> UpdateScenario:
    if not isinstance(item, dict):
        raise _fail(name, f"scenario {i} is not a JSON object")
    sid = _text(item.get("id"), name, f"scenario {i}", "id")
    for key, allowed in (("split", UPDATE_SPLITS), ("kind", UPDATE_KINDS)):
        if item.get(key) not in allowed:
            raise _fail(name, f"scenario {sid}: \"{key}\" must be one of {', '.join(allowed)}")
    domain = _text(item.get("domain"), name, f"scenario {sid}", "domain")
    steps = item.get("steps", 1)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise _fail(name, f"scenario {sid}: \"steps\" must be a positive integer")
    if not isinstance(item.get("sessions"), list) or len(item["sessions"]) < 2:
        raise _fail(name, f"scenario {sid}: needs a \"sessions\" list of at least two sessions")
    sessions: list[UpdateSession] = []
    turn_ids: set[str] = set()
    for n, session in enumerate(item["sessions"], start=1):
        where = f"scenario {sid} session {n}"
        if not isinstance(session, dict) or not isinstance(session.get("turns"), list) or not session["turns"]:
            raise _fail(name, f"{where}: needs a non-empty \"turns\" list")
        date = _iso(session.get("date"), name, where)
        if sessions and date <= sessions[-1].date:
            raise _fail(name, f"{where}: sessions must be in time order")
        turns = []
        for t, turn in enumerate(session["turns"]):
            if (not isinstance(turn, list) or len(turn) != 2 or turn[0] not in _UPDATE_ROLES
                    or not isinstance(turn[1], str) or not turn[1].strip()):
                raise _fail(name, f"{where} turn {t}: expected [\"user\"|\"assistant\", text]")
            turns.append(UpdateTurn(f"s{n}:{t}", turn[0], turn[1]))
            turn_ids.add(f"s{n}:{t}")
        sessions.append(UpdateSession(f"s{n}", date, tuple(turns)))
    if not isinstance(item.get("questions"), list) or not item["questions"]:
        raise _fail(name, f"scenario {sid}: needs a non-empty \"questions\" list")
    questions = []
    for j, q in enumerate(item["questions"]):
        where = f"scenario {sid} question {j}"
        if not isinstance(q, dict) or q.get("type") not in UPDATE_QUESTION_TYPES:
            raise _fail(name, f"{where}: \"type\" must be one of {', '.join(UPDATE_QUESTION_TYPES)}")
        text = _text(q.get("q"), name, where, "q")
        gold = q.get("gold")
        if not isinstance(gold, list) or not gold or not all(isinstance(g, str) for g in gold):
            raise _fail(name, f"{where}: \"gold\" must be a non-empty list of turn ids")
        unknown = [g for g in gold if g not in turn_ids]
        if unknown:
            raise _fail(name, f"{where}: gold {unknown[0]} is not a turn of the scenario")
        as_of = _iso(q["as_of"], name, where) if q.get("as_of") is not None else None
        stale = q.get("stale", [])
        if not isinstance(stale, list) or any(g not in turn_ids or g in gold for g in stale):
            raise _fail(name, f"{where}: \"stale\" must list turn ids of the scenario that are not gold")
        questions.append(UpdateQuestion(f"{sid}/{j}", q["type"], text, tuple(gold), as_of, tuple(stale)))
    return UpdateScenario(sid, item["split"], domain, item["kind"], steps, tuple(sessions), tuple(questions))


_LOADERS["updates"] = _updates

Dataset = LocomoDataset | LongMemEvalDataset | ConvoMemDataset | UpdatesDataset  # what load_dataset returns
