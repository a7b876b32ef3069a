"""Property: for every importer and any input, chunk spans are exact, ordered, stripped and
inside a normalised document text, and the chunks say what the source said.

Inputs are built from hostile pieces: combining marks that NFC composes (also at the start
of a piece, right after a separator we insert), \\r\\n and \\r, tabs, NUL and other controls,
BOMs, lone surrogates (JSON escapes can produce them), emoji and ZWJ sequences, U+2028, and
the syntax each importer reacts to (headings, fences, quote markers, decorators).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine.errors import BadInput
from engine.ingest.detect import parse_bytes
from engine.ingest.formats import chat, code, locomo, longmemeval, text
from engine.ingest.formats import email as email_format
from engine.ingest.model import CHUNK_KINDS, TRUST_LABELS, ParsedDocument
from engine.ingest.normalize import label, normalize

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)

NASTY = [
    "e\u0301", "\u0301", "A\u030a", "\u0338", "<\u0338", "=", ">", "\u1100", "\u1161", "\u11a8",
    "\r\n", "\r", "\n", "\n\n", "\t", " ", "   ", "\x00", "\x07", "\x0b", "\x0c", "\x1b", "\x7f",
    "\ufeff", "\u00a0", "\u2028", "\u200b", "\U0001f600", "\U0001f469\u200d\U0001f469\u200d\U0001f467",
    "\u0130", "\u1e9e", "\ufb01", "\u00c5", "\u212b", "\u0958", "a", "word", "Satz.", "Ende! ", "?",
    "# ", "## ", "```", "~~~", "- ", "1. ", "> ", "On Mon, Bob wrote:", "-- ", "---", "===",
    "-----Original Message-----", "From ", "@deco", "def f():", "class C:", "    ", "#", ":",
    "x" * 40,
]
pieces = st.one_of(st.sampled_from(NASTY), st.text(max_size=6))
nasty = st.lists(pieces, max_size=25).map("".join)
# JSON can carry lone surrogates ("\ud83d" escapes); raw UTF-8 files cannot.
json_nasty = st.one_of(nasty, st.sampled_from(["\ud83d", "x\udc00y", "\ud83d\ude00"]))


def nonws(value: str) -> str:
    return "".join(value.split())


def check_document(doc: ParsedDocument, max_chars: int | None = None) -> list[str]:
    """The invariants every importer promises; returns the chunk texts."""
    t = doc.text
    assert normalize(t) == t, "document text is not normalised"
    assert doc.trust in TRUST_LABELS
    assert doc.chunks, "documents without chunks are dropped"
    out = []
    previous_end = 0
    for ordinal, c in enumerate(doc.chunks):
        assert c.kind in CHUNK_KINDS
        assert c.trust is None or c.trust in TRUST_LABELS
        assert 0 <= c.start < c.end <= len(t)
        assert c.start >= previous_end, "chunks overlap or are out of order"
        previous_end = c.end
        piece = t[c.start : c.end]
        assert piece == doc.chunk_text(c)
        assert piece and piece == piece.strip(), "chunk starts or ends with whitespace"
        if max_chars is not None:
            assert len(piece) <= max_chars
        if c.kind == "quote" and c.quotes_ordinal is not None:
            assert doc.chunks[c.quotes_ordinal].kind == "message"
            assert c.quotes_ordinal != ordinal
        if c.source_time is not None:
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", c.source_time)
        out.append(piece)
    return out


def check_splits(doc: ParsedDocument, max_chars: int) -> None:
    """Consecutive split pieces meet at whitespace, unless a giant word was cut hard."""
    for a, b in zip(doc.chunks, doc.chunks[1:]):
        if a.kind == b.kind == "split" and a.meta.get("part", 0) + 1 == b.meta.get("part"):
            hard = a.end - a.start == max_chars and not any(ch.isspace() for ch in doc.chunk_text(a))
            assert hard or doc.text[a.end].isspace(), "split inside a word"


@given(st.one_of(nasty, json_nasty))
@example("e\x00\u0301")  # a control between a letter and its accent: drop it before NFC
@example("\x00\ufeffx")  # a control hiding a BOM: drop it before the BOM strip
@example("\ufeff\ufeffx")
@example("A\r\u030a")
@example("\ud83d\ude00\udc00")
@SETTINGS
def test_normalize_is_idempotent(value):
    once = normalize(value)
    assert normalize(once) == once
    assert "\r" not in once and "\x00" not in once and not once.startswith("\ufeff")


# --- chat -----------------------------------------------------------------------------------

times = st.one_of(
    st.none(),
    st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
    st.integers(min_value=0, max_value=4_000_000_000),
    nasty,
)
parts = st.lists(
    st.one_of(json_nasty, st.fixed_dictionaries({"type": st.just("text"), "text": json_nasty}),
              st.just({"type": "image_url", "image_url": {"url": "x"}})),
    max_size=3,
)
message = st.fixed_dictionaries(
    {"role": st.one_of(st.sampled_from(["user", "assistant", "system", "tool", "User ", "human", "AI"]), st.none(),
                       json_nasty),  # an unknown role is refused (test_chat_spans)
     "content": st.one_of(json_nasty, parts, st.none())},
    optional={"name": json_nasty, "timestamp": times, "created_at": times, "id": st.one_of(json_nasty, st.integers())},
)
messages = st.lists(message, min_size=1, max_size=6)
chat_payload = st.one_of(
    messages,
    st.fixed_dictionaries({"messages": messages}, optional={"title": json_nasty}),
    st.lists(st.fixed_dictionaries({"id": st.text(max_size=4), "messages": messages}), min_size=1, max_size=3),
)


def expected_chat(msgs):
    out = []
    for m in msgs:
        content = normalize(chat.content_text(m.get("content")))
        if not content.strip():
            continue
        role = chat.role_label(m.get("role"))
        speaker = label(m.get("name")) or role or "unknown"
        out.append(normalize(f"{speaker}: " + content).strip())  # the line is scrubbed as one
    return out


@given(chat_payload)
@SETTINGS
def test_chat_spans(payload):
    if isinstance(payload, dict):
        conversations = [payload["messages"]]
    elif "messages" in payload[0]:
        conversations = [c["messages"] for c in payload]
    else:
        conversations = [payload]
    if any(chat.role_label(m.get("role")) not in (None, *chat.ROLE_TRUST) for c in conversations for m in c):
        with pytest.raises(BadInput, match="role must be"):  # one role rule: an unknown role is refused
            chat.parse_json(payload, name="c.json")
        return
    docs = chat.parse_json(payload, name="c.json")
    expected = [e for e in map(expected_chat, conversations) if e]
    assert [check_document(d) for d in docs] == expected
    # And through the byte-level entry point (JSON escapes keep NULs out of the bytes).
    raw = json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")
    try:
        via_bytes = parse_bytes(raw, name="c.json", fmt="chat")
    except BadInput as exc:
        assert not expected or "not text" in str(exc)  # lone surrogates are not UTF-8
    else:
        assert [d.text for d in via_bytes] == [d.text for d in docs]


# --- LoCoMo ---------------------------------------------------------------------------------

turn = st.fixed_dictionaries(
    {"speaker": json_nasty, "text": json_nasty, "dia_id": st.text(max_size=5)},
    optional={"blip_caption": json_nasty},
)
session_dates = st.one_of(
    st.datetimes(min_value=datetime(1900, 1, 1)).map(
        lambda d: f"{(d.hour % 12) or 12}:{d.minute:02d} {'pm' if d.hour >= 12 else 'am'} on {d.day} {d:%B}, {d.year}"
    ),
    json_nasty,
)


@st.composite
def locomo_samples(draw):
    samples = []
    for i in range(draw(st.integers(1, 2))):
        conv = {"speaker_a": draw(json_nasty), "speaker_b": draw(json_nasty)}
        for n in draw(st.sets(st.integers(1, 12), max_size=4)):
            conv[f"session_{n}"] = draw(st.lists(turn, max_size=5))
            if draw(st.booleans()):
                conv[f"session_{n}_date_time"] = draw(session_dates)
        conv[f"session_{99}_date_time"] = "1:00 pm on 1 May, 2023"  # a date with no session
        samples.append({"sample_id": f"conv-{i}", "conversation": conv, "qa": []})
    return samples


def expected_locomo_turn(t):
    body = normalize(t["text"])
    caption = normalize(t.get("blip_caption") or "")
    if not body.strip() and not caption.strip():
        return None
    out = f"{label(t['speaker']) or 'unknown'}: " + (body if body.strip() else "")
    if caption.strip():
        out += (" [shares a photo: " if body.strip() else "[shares a photo: ") + caption + "]"
    return normalize(out).strip()  # the line is scrubbed as one


@given(locomo_samples())
@SETTINGS
def test_locomo_spans(samples):
    docs = locomo.parse_json(samples, name="l.json")
    expected = []
    for sample in samples:
        conv = sample["conversation"]
        for n in sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k)):
            turns = [e for e in map(expected_locomo_turn, conv[f"session_{n}"]) if e]
            if turns:
                expected.append(turns)
    assert [check_document(d) for d in docs] == expected
    for doc in docs:
        header_end = doc.text.index("\n\n") + 2
        assert doc.text.startswith(f"Session {doc.meta['session']}")
        assert doc.chunks[0].start == header_end


# --- LongMemEval ----------------------------------------------------------------------------

lme_turn = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "Assistant"]), "content": json_nasty},
    optional={"has_answer": st.booleans()},
)


@st.composite
def lme_questions(draw):
    questions = []
    for qi in range(draw(st.integers(1, 3))):
        count = draw(st.integers(0, 4))
        questions.append({
            "question_id": f"q{qi}",
            "haystack_session_ids": [draw(st.sampled_from(["a", "b", "c", "answer_d"])) for _ in range(count)],
            "haystack_dates": [draw(st.one_of(st.just("2023/04/20 (Thu) 09:10"), json_nasty)) for _ in range(count)],
            "haystack_sessions": [draw(st.lists(lme_turn, max_size=4)) for _ in range(count)],
        })
    return questions


@given(lme_questions())
@SETTINGS
def test_longmemeval_spans(questions):
    docs = longmemeval.parse_json(questions, name="q.json")
    for doc in docs:
        got = check_document(doc)
        sid = doc.meta["session_id"]
        for c, piece in zip(doc.chunks, got):
            assert c.message_id.startswith(f"{sid}:")
            assert piece.startswith(f"{c.role}: ")
    ids = [d.external_id for d in docs]
    assert len(ids) == len(set(ids))


# --- Markdown / text ------------------------------------------------------------------------

md_lines = st.lists(
    st.one_of(
        nasty,
        st.tuples(st.sampled_from(["# ", "## ", "### ", "#"]), nasty).map("".join),
        st.sampled_from(["```", "```py", "~~~", "---", "===", "- item", "1. one", "", "  indented"]),
        st.lists(st.sampled_from(["Long", "sentence.", "words", "here!", "x" * 30, "\u00e9t\u00e9"]),
                 max_size=40).map(" ".join),
    ),
    max_size=30,
)
line_endings = st.sampled_from(["\n", "\r\n", "\r"])


@given(md_lines, line_endings, st.sampled_from([20, 60, 1500]), st.booleans())
@SETTINGS
def test_markdown_and_text_spans(lines, newline, max_chars, markdown):
    source = newline.join(lines)
    parse = text.parse_markdown if markdown else text.parse_text
    docs = parse(source, name="n.md", max_chars=max_chars)
    if not normalize(source).strip():
        assert docs == []
        return
    [doc] = docs
    got = check_document(doc, max_chars)
    # Every non-whitespace character is in exactly one chunk, in order.
    assert nonws("".join(got)) == nonws(doc.text) == nonws(normalize(source))
    check_splits(doc, max_chars)


# --- code -----------------------------------------------------------------------------------

_valid_python = st.sampled_from([
    "def f(x):\n    return x\n", "@deco\n", "@deco(1)\n", "# comment\n", "\n", "\n\n",
    "class C:\n    '''doc'''\n    def m(self):\n        pass\n", "async def g():\n    await h()\n",
    "if x:\n    y = 1\n", "import os\n", "s = '\\d'\n",
])
py_snippets = st.one_of(
    _valid_python,
    _valid_python,
    _valid_python,
    nasty.map(lambda s: f"s = {s!r}\n"),  # valid Python holding hostile text
    st.sampled_from(["x = (\n", "    1\n", ")\n", "\t\n", "#!/bin/sh\n"]),
    nasty,  # usually a syntax error: the fallback path
)


source_code = st.one_of(
    # Parses: symbols, decorators, comments and hostile string literals.
    st.lists(st.one_of(_valid_python, nasty.map(lambda s: f"s = {s!r}\n")), max_size=25).map("".join),
    # Anything goes: mostly the syntax-error fallback.
    st.lists(py_snippets, max_size=25).map("".join),
)


@given(source_code, line_endings,
       st.sampled_from([30, 1500]), st.sampled_from(["m.py", "m.js", "m.go", "Makefile"]))
@SETTINGS
def test_code_spans(source, newline, max_chars, name):
    source = source.replace("\n", newline)
    docs = code.parse_code(source, name=name, max_chars=max_chars)
    if not normalize(source).strip():
        assert docs == []
        return
    [doc] = docs
    got = check_document(doc, max_chars)
    assert nonws("".join(got)) == nonws(doc.text) == nonws(normalize(source))
    check_splits(doc, max_chars)
    for c in doc.chunks:
        if c.kind == "code_symbol":
            assert c.meta["symbol_kind"] in ("function", "class")


# --- e-mail ---------------------------------------------------------------------------------

mail_text = st.lists(pieces, max_size=12).map("".join).filter(lambda s: not re.search("[\ud800-\udfff]", s))
header_value = mail_text.map(lambda s: " ".join(s.replace("\x00", "").split()))
body_lines = st.lists(
    st.one_of(mail_text, mail_text.map(lambda s: "> " + s),
              st.sampled_from(["On Mon, 6 May 2024, Bob <b@x> wrote:", "-- ", "", ">", "-----Original Message-----"])),
    max_size=15,
)


@st.composite
def raw_emails(draw):
    headers = [f"From: {draw(header_value) or 'a@example.org'}"]
    for key in ("To", "Subject", "Date", "Message-ID"):
        if draw(st.booleans()):
            headers.append(f"{key}: {draw(header_value)}")
    html = draw(st.booleans())
    headers.append(f"Content-Type: text/{'html' if html else 'plain'}; charset=utf-8")
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    body = newline.join(draw(body_lines))
    return (newline.join(headers) + newline + newline + body).encode("utf-8")


@given(st.lists(raw_emails(), min_size=1, max_size=3), st.booleans())
@SETTINGS
def test_email_spans(messages, as_mbox):
    if as_mbox:
        raw = b"".join(b"From sender@example.org Mon May  6 18:02:00 2024\n" + m + b"\n\n" for m in messages)
        docs = email_format.parse_mbox(raw, name="m.mbox")
    else:
        docs = email_format.parse_eml(messages[0], name="m.eml")
    for doc in docs:
        if not doc.chunks:  # an empty body: header block only
            continue
        got = check_document(doc)
        body_start = doc.text.index("\n\n") + 2 if not doc.text.startswith("\n") else 1
        assert nonws("".join(got)) == nonws(doc.text[body_start:])
        assert all(c.kind in ("message", "quote") for c in doc.chunks)
