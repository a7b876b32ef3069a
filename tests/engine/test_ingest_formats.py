"""Importers on small hand-written fixtures (tests/fixtures/data), and every refusal path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import BadInput, UnknownFormat
from engine.ingest.detect import FORMATS, iter_source_files, parse_bytes, parse_path
from engine.ingest.formats import chat, code, locomo, longmemeval, text
from engine.ingest.formats import email as email_format
from engine.ingest.model import CHUNK_KINDS, TRUST_LABELS, ParsedDocument
from engine.ingest.normalize import decode, normalize
from engine.timeutil import to_iso, to_utc_iso

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def texts(doc: ParsedDocument) -> list[str]:
    return [doc.chunk_text(c) for c in doc.chunks]


def assert_well_formed(docs: list[ParsedDocument]) -> None:
    for doc in docs:
        assert normalize(doc.text) == doc.text
        assert doc.trust in TRUST_LABELS
        end = 0
        for chunk in doc.chunks:
            assert chunk.kind in CHUNK_KINDS
            assert chunk.trust is None or chunk.trust in TRUST_LABELS
            assert end <= chunk.start < chunk.end <= len(doc.text)
            piece = doc.chunk_text(chunk)
            assert piece == piece.strip()
            end = chunk.end


# --- normalize ------------------------------------------------------------------------------


def test_normalize_does_only_what_it_says():
    assert normalize("\ufeffa\r\nb\rc") == "a\nb\nc"
    assert normalize("e\u0301") == "\u00e9"  # NFC
    assert normalize("a\x00b\x07c\td\n") == "abc\td\n"
    assert normalize("  two  spaces  ") == "  two  spaces  "  # no whitespace collapsing
    assert normalize("e\x00\u0301") == "\u00e9"  # controls go before NFC: idempotent
    assert normalize("\x00\ufeffx") == "x"
    assert normalize("lone \ud83d surrogate") == "lone \ufffd surrogate"
    assert normalize("\ud83d\ude00") == "\U0001f600"


def test_decode_accepts_utf8_bom_and_utf16():
    assert decode("héllo".encode()) == "héllo"
    assert decode(b"\xef\xbb\xbfhi") == "hi"
    assert decode("hé".encode("utf-16")) == "hé"  # Python writes a BOM
    assert decode(b"\xfe\xff" + "hé".encode("utf-16-be")) == "hé"
    with pytest.raises(BadInput, match=r"^x\.txt: not text: not valid UTF-8"):
        decode("caf\xe9".encode("latin-1"), "x.txt")
    with pytest.raises(BadInput, match=r"^x: binary file: contains NUL bytes$"):
        decode(b"ab\x00cd", "x")
    with pytest.raises(BadInput, match=r"^x: binary file: looks like a PNG image$"):
        decode(b"\x89PNG\r\n\x1a\nrest", "x")
    with pytest.raises(BadInput, match=r"binary file: \d+% control bytes"):
        decode(bytes(range(1, 9)) * 20, "x")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-01T10:00:00Z", "2024-05-01T10:00:00Z"),
        ("2024-05-01T12:00:00+02:00", "2024-05-01T10:00:00Z"),
        ("2024-05-01 10:00:00.123456", "2024-05-01T10:00:00Z"),
        ("2024-05-01", "2024-05-01T00:00:00Z"),
        (1714557600, "2024-05-01T10:00:00Z"),
        (1714557600000, "2024-05-01T10:00:00Z"),
        ("1714557600", "2024-05-01T10:00:00Z"),
        ("yesterday", None),
        (None, None),
        (True, None),
        (1e300, None),
    ],
)
def test_to_utc_iso(value, expected):
    assert to_utc_iso(value) == expected


# --- chat -----------------------------------------------------------------------------------


def test_chat_list_of_messages():
    [doc] = parse_path(DATA / "chat_messages.json")
    assert_well_formed([doc])
    assert doc.source_type == "chat" and doc.trust == "user"
    assert doc.uri == str((DATA / "chat_messages.json").resolve())
    assert doc.external_id == doc.uri  # single-document file without an id
    assert doc.title == "chat_messages.json"
    assert texts(doc) == [
        "system: You are a helpful travel assistant.",
        "Priya: I'm flying to Lisbon on 12 June and I'm vegetarian.",
        "assistant: Noted: vegetarian, Lisbon on 12 June.",
        "tool: weather(Lisbon) = 24C",  # the image part is left out
        "user: Thanks!\nBook the train too.",
    ]
    assert "\n\n".join(texts(doc)) == doc.text
    assert [c.role for c in doc.chunks] == ["system", "user", "assistant", "tool", "user"]
    assert [c.trust for c in doc.chunks] == ["assistant", "user", "assistant", "tool", "user"]
    assert [c.speaker for c in doc.chunks] == ["system", "Priya", "assistant", "tool", "user"]
    assert [c.message_id for c in doc.chunks] == ["0", "1", "2", "4", "m-final"]
    assert [c.source_time for c in doc.chunks] == [
        None, "2024-05-01T10:00:00Z", "2024-05-01T10:00:05Z", "2024-05-01T10:02:00Z", None,
    ]
    assert doc.source_time == "2024-05-01T10:00:00Z"
    assert doc.meta["skipped"] == 1
    assert all(c.kind == "message" for c in doc.chunks)


def test_chat_object_with_messages():
    [doc] = parse_path(DATA / "chat_object.json")
    assert_well_formed([doc])
    assert doc.external_id == "trip-planning"
    assert doc.title == "Trip planning"
    assert texts(doc) == [
        "user: My sister Ana lives in Porto.",
        "assistant: Good to know. Shall I plan a stop in Porto?",
    ]
    assert doc.source_time == "2024-03-02T08:30:00Z"  # naive times are read as UTC
    assert doc.meta["skipped"] == 1  # whitespace-only content


def test_chat_list_of_conversations():
    docs = parse_path(DATA / "chat_conversations.json")
    assert_well_formed(docs)
    assert [d.external_id for d in docs] == ["c1", "c2"]
    assert [d.title for d in docs] == ["Coffee", "chat_conversations.json [c2]"]
    assert docs[1].source_time == "2024-02-11T23:45:00Z"  # -05:00 converted to UTC
    assert texts(docs[1]) == ["user: My dog is called Biscuit."]


def test_chat_rejects_non_object_messages():
    with pytest.raises(BadInput, match=r"^c\.json: message list: message 1 is not a JSON object$"):
        parse_bytes(b'{"messages": [{"role": "user", "content": "hi"}, 3]}', name="c.json")
    with pytest.raises(BadInput, match=r"^c\.json: conversation b: message 0 is not a JSON object$"):
        parse_bytes(b'[{"id": "a", "messages": []}, {"id": "b", "messages": [[]]}]', name="c.json")
    with pytest.raises(UnknownFormat, match=r"^c\.json: --format chat cannot read this file: not chat JSON: item 1"):
        parse_bytes(b'[{"role": "user", "content": "hi"}, 3]', name="c.json", fmt="chat")


def test_one_role_rule_for_files_live_turns_and_mcp(tmp_path):
    """A chat file, add_turns and MCP's memory_add accept the same roles and refuse the same ones."""
    from typing import get_args

    from engine.memory import MemoryEngine
    from engine.scope import Scope

    assert set(get_args(chat.Role)) == set(chat.ROLE_TRUST)  # every accepted role has its trust
    with pytest.raises(BadInput, match=r"^c\.json: message list: message 1: role must be user, assistant, system or "
                                       r"tool \(or human, ai, model, developer, function\), got 'wizard'$"):
        parse_bytes(b'[{"role": "user", "content": "hi"}, {"role": "wizard", "content": "abracadabra"}]',
                    name="c.json")
    docs = parse_bytes(b'[{"role": "Human", "content": "hi"}, {"name": "Priya", "content": "no role"}]', name="c.json")
    assert [(c.role, c.trust) for c in docs[0].chunks] == [("human", "user"), (None, None)]
    with MemoryEngine(tmp_path / "m.db", llm=False) as mem:
        scope = Scope.default(user="ana")
        for bad in ({"role": "wizard", "content": "x"}, {"content": "x"}):
            with pytest.raises(BadInput, match="role must be user, assistant, system or tool"):
                mem.add_turns(bad, scope=scope, extract="none")
        mem.add_turns({"role": "ai", "content": "noted"}, scope=scope, extract="none")
        assert mem.counts(scope)["memories"] == 1


def test_chat_content_parts():
    assert chat.content_text([{"type": "text", "text": "a"}, "b", {"type": "image_url"}]) == "a\nb"
    assert chat.content_text([{"type": "text", "text": {"value": "v"}}]) == "v"
    assert chat.content_text(None) == "" and chat.content_text(7) == "7"


# --- LoCoMo ---------------------------------------------------------------------------------


def test_locomo_sessions():
    docs = parse_path(DATA / "locomo_tiny.json")
    assert_well_formed(docs)
    # session_3 has a date key but no turn list: no document for it.
    assert [d.external_id for d in docs] == ["conv-test:session_1", "conv-test:session_2"]
    first = docs[0]
    assert first.source_type == "locomo" and first.trust == "user"
    assert first.text.startswith("Session 1 (2023-05-08 13:56)\n\n")
    assert first.source_time == "2023-05-08T13:56:00Z"
    assert first.meta == {
        "sample_id": "conv-test", "session": 1, "speakers": ["Jonas", "Marisol"],
        "date_raw": "1:56 pm on 8 May, 2023", "skipped": 0,
    }
    assert first.title == "conv-test session 1: Jonas & Marisol"
    assert texts(first) == [
        "Jonas: Hi Marisol! I finally finished the bookshelf I was building.",
        "Marisol: Nice! Here is my new pottery. [shares a photo: a photo of a blue ceramic bowl on a table]",
        "Jonas: That bowl looks great.",
    ]
    assert first.chunks[0].start == len("Session 1 (2023-05-08 13:56)\n\n")  # header is no chunk
    assert [c.message_id for c in first.chunks] == ["D1:1", "D1:2", "D1:3"]
    assert {c.role for c in first.chunks} == {"user"}
    assert [c.speaker for c in first.chunks] == ["Jonas", "Marisol", "Jonas"]
    assert {c.source_time for c in first.chunks} == {"2023-05-08T13:56:00Z"}
    assert first.chunks[1].meta["blip_caption"] == "a photo of a blue ceramic bowl on a table"
    assert docs[1].meta["skipped"] == 1  # the empty turn
    assert docs[1].source_time == "2023-06-20T09:05:00Z"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00Z"),
        ("12:09 am on 13 September, 2023", "2023-09-13T00:09:00Z"),
        ("12:30 pm on 1 Jan, 2022", "2022-01-01T12:30:00Z"),
        ("29.12.2023, 00:51:12", "2023-12-29T00:51:12Z"),  # REALTALK: day first
        ("4.1.2024, 18:02", "2024-01-04T18:02:00Z"),
        ("31.02.2024, 10:00:00", None),
        ("not a date", None),
    ],
)
def test_locomo_dates(raw, expected):
    parsed = locomo.parse_session_date(raw)
    assert (to_iso(parsed) if parsed else None) == expected


REALTALK = DATA / "realtalk" / "Chat_1_Ana_Ben.json"  # written to REALTALK's published shape


def test_realtalk_chat_reads_as_locomo_with_message_times():
    docs = parse_path(REALTALK)
    assert_well_formed(docs)
    assert [d.external_id for d in docs] == ["Chat_1_Ana_Ben:session_1", "Chat_1_Ana_Ben:session_2"]
    first = docs[0]
    assert first.source_type == "locomo" and first.meta["speakers"] == ["Ana", "Ben"]
    assert first.source_time == "2023-12-29T23:51:12Z"
    # clean_text, not the raw text with its emoji; a photo with no words keeps its caption
    assert texts(first) == [
        "Ana: hey how was ur weekend",
        "Ben: so good, went bouldering at the new gym",
        "Ben: [shares a photo: a climbing wall with colourful holds]",
        "Ana: omg nice. i ran my first 10k yesterday",
    ]
    # each message keeps its own time: the last one was sent after midnight
    assert [c.source_time for c in first.chunks] == [
        "2023-12-29T23:51:12Z", "2023-12-29T23:55:40Z", "2023-12-29T23:56:02Z", "2023-12-30T00:20:05Z"]
    assert first.chunks[2].meta["img_url"] == ["https://example.test/wall.jpg"]


def test_realtalk_session_without_date_is_dated_by_its_first_message():
    (doc,) = parse_path(DATA / "realtalk" / "Chat_2_Cai_Dev.json")
    assert doc.source_time == "2024-01-02T07:10:00Z"
    assert doc.text.startswith("Session 1 (2024-01-02 07:10)")


def test_realtalk_list_of_chats_gets_one_sample_id_each():
    chat = json.loads(REALTALK.read_text(encoding="utf-8"))
    docs = locomo.parse_json([chat, chat], name="chats.json")
    assert [d.external_id for d in docs] == [
        "chats_0:session_1", "chats_0:session_2", "chats_1:session_1", "chats_1:session_2"]


# --- LongMemEval ----------------------------------------------------------------------------


def test_longmemeval_sessions_deduplicated():
    docs = parse_path(DATA / "longmemeval_s_tiny.json")
    assert_well_formed(docs)
    assert [d.external_id for d in docs] == ["answer_s1", "sharegpt_x1", "ultrachat_9"]
    answer, shared, _ = docs
    assert answer.source_type == "longmemeval"
    assert answer.source_time == "2023-04-20T09:10:00Z"
    assert answer.meta["question_ids"] == ["q_one"] and answer.meta["session_id"] == "answer_s1"
    assert texts(answer) == ["user: I adopted a cat and named her Pepper.", "assistant: Pepper is a lovely name!"]
    assert [c.meta for c in answer.chunks] == [{"has_answer": True}, {"has_answer": False}]
    assert [c.trust for c in answer.chunks] == ["user", "assistant"]
    assert [c.message_id for c in answer.chunks] == ["answer_s1:0", "answer_s1:1"]
    # One document for the session both questions share; the first date wins.
    assert shared.meta["question_ids"] == ["q_one", "q_two_abs"]
    assert shared.meta["times"] == ["2023-04-21T14:14:00Z", "2023-01-03T03:39:00Z"]
    assert shared.source_time == "2023-04-21T14:14:00Z"
    # The empty assistant turn is skipped but turn indexes keep their original numbers.
    assert [c.message_id for c in shared.chunks] == ["sharegpt_x1:0", "sharegpt_x1:2"]
    assert shared.chunks[0].meta == {}  # no has_answer key in the source


def test_longmemeval_same_id_different_content_kept_apart():
    q = {
        "question_id": "q",
        "haystack_session_ids": ["s", "s"],
        "haystack_dates": ["2023/01/01 (Sun) 10:00", "2023/01/02 (Mon) 10:00"],
        "haystack_sessions": [[{"role": "user", "content": "one"}], [{"role": "user", "content": "two"}]],
    }
    docs = longmemeval.parse_json([q], name="x.json")
    assert [d.external_id for d in docs] == ["s", "s#2"]
    assert {d.meta["session_id"] for d in docs} == {"s"}


def test_longmemeval_parallel_lists_must_match():
    q = {"haystack_session_ids": ["a", "b"], "haystack_dates": ["x"], "haystack_sessions": [[], []]}
    with pytest.raises(BadInput, match=r"^lme\.json: question 0: .*differ in length$"):
        parse_bytes(json.dumps([q]).encode(), name="lme.json")


def test_longmemeval_date():
    assert longmemeval.parse_haystack_date("2023/04/20 (Thu) 09:10") == "2023-04-20T09:10:00Z"
    assert longmemeval.parse_haystack_date("garbage") is None


# --- Markdown and text ----------------------------------------------------------------------


def test_markdown_structure():
    [doc] = parse_path(DATA / "garden.md")
    assert_well_formed([doc])
    assert doc.source_type == "markdown" and doc.trust == "external"
    assert doc.title == "Garden notes"
    kinds = [c.kind for c in doc.chunks]
    assert kinds == [
        "heading", "paragraph", "heading", "paragraph", "heading", "split", "split",
        "heading", "paragraph", "paragraph", "heading", "paragraph",
    ]
    chunk_texts = texts(doc)
    assert chunk_texts[0] == "# Garden notes"
    # The list is one block, continuation line included.
    assert chunk_texts[3] == "- Monday: weeding\n- Wednesday: watering\n  (both beds)\n- Saturday: harvest"
    assert doc.chunks[3].meta == {"heading_path": ["Garden notes", "Schedule"], "block": "list"}
    # The fenced block is whole although it contains a blank line.
    fence = doc.chunks[8]
    assert chunk_texts[8].startswith("```python\n") and chunk_texts[8].endswith("```")
    assert "\n\n    return" in chunk_texts[8]
    assert fence.meta == {"heading_path": ["Garden notes", "Rules", "Tools"], "block": "code", "info": "python"}
    # A setext heading resets the path to level 2.
    assert chunk_texts[10] == "Setext heading\n--------------"
    assert doc.chunks[11].meta["heading_path"] == ["Garden notes", "Setext heading"]


def test_markdown_oversized_paragraph_split_at_sentences():
    [doc] = parse_path(DATA / "garden.md")
    splits = [c for c in doc.chunks if c.kind == "split"]
    assert len(splits) == 2
    for c in splits:
        assert c.end - c.start <= text.MAX_CHARS
        assert c.meta["heading_path"] == ["Garden notes", "Rules"]
        assert c.meta["parts"] == 2
    assert doc.chunk_text(splits[0]).endswith(".")  # cut at a sentence end
    assert doc.text[splits[0].end].isspace()
    paragraph = doc.text[splits[0].start : splits[1].end]
    assert " ".join(texts(doc)[5:7]) == paragraph


def test_split_never_cuts_words_except_giant_ones():
    source = "alpha beta gamma delta epsilon zeta eta theta"
    pieces = text.split_span(source, 0, len(source), 12)
    assert [source[s:e] for s, e in pieces] == ["alpha beta", "gamma delta", "epsilon zeta", "eta theta"]
    giant = "x" * 25 + " tails"
    pieces = text.split_span(giant, 0, len(giant), 10)
    assert [giant[s:e] for s, e in pieces] == ["x" * 10, "x" * 10, "x" * 5, "tails"]


def test_plain_text_paragraphs():
    [doc] = parse_path(DATA / "notes.txt")
    assert_well_formed([doc])
    assert doc.source_type == "text" and doc.title == "notes.txt"
    assert texts(doc) == [
        "Shopping list for the weekend:\neggs, flour, oat milk.",
        "Call the plumber about the kitchen tap\nbefore Friday.",
        "The car is due for a service in March.",
    ]
    assert {c.kind for c in doc.chunks} == {"paragraph"}


def test_crlf_text_offsets_are_into_normalised_text():
    [doc] = parse_bytes(b"\xef\xbb\xbfFirst line\r\nsame para\r\n\r\nSecond\r\n", name="n.txt")
    assert doc.text == "First line\nsame para\n\nSecond\n"
    assert texts(doc) == ["First line\nsame para", "Second"]


# --- e-mail ---------------------------------------------------------------------------------


def test_eml_reply_with_quote_and_attachment():
    [doc] = parse_path(DATA / "reply.eml")
    assert_well_formed([doc])
    assert doc.source_type == "email" and doc.trust == "external"
    assert doc.text.startswith(
        "From: Lena Ortiz <lena@example.org>\nTo: Sam Whitfield <sam@example.net>\n"
        "Date: Tue, 07 May 2024 09:15:00 +0200\nSubject: Re: Café meeting on Thursday\n\n"
    )
    assert doc.title == "Re: Café meeting on Thursday"
    assert doc.source_time == "2024-05-07T07:15:00Z"
    assert doc.external_id == "<reply-1@example.org>"
    assert doc.meta["in_reply_to"] == "<orig-1@example.net>"
    assert doc.meta["references"] == ["<orig-0@example.net>", "<orig-1@example.net>"]
    assert doc.meta["attachments"] == ["budget.csv"]
    message, quote = doc.chunks
    assert message.kind == "message" and quote.kind == "quote"
    body = doc.chunk_text(message)
    assert body.startswith("Thursday works for me.")
    assert body.endswith("-- \nLena Ortiz\nFinance team")  # the signature stays
    assert message.speaker == "Lena Ortiz <lena@example.org>"
    assert message.message_id == "<reply-1@example.org>"
    assert message.source_time == "2024-05-07T07:15:00Z"
    assert message.meta == {
        "from": "Lena Ortiz <lena@example.org>", "to": "Sam Whitfield <sam@example.net>",
        "subject": "Re: Café meeting on Thursday", "attachments": ["budget.csv"],
    }
    assert doc.chunk_text(quote) == (
        "On Mon, 6 May 2024 at 18:02, Sam Whitfield <sam@example.net> wrote:\n"
        "> Can we meet at the café on Thursday at 10?\n>\n> Sam"
    )
    assert quote.quotes_ordinal == 0


def test_mbox_two_messages():
    docs = parse_path(DATA / "two.mbox")
    assert_well_formed(docs)
    assert [d.external_id for d in docs] == ["<orig-1@example.net>", "<reply-1@example.org>"]
    # The mboxrd ">From" escape is undone and the line is not taken for a quote.
    assert texts(docs[0]) == ["Can we meet at the cafe on Thursday at 10?\n\nFrom the office we can walk there."]
    # HTML-only message converted to text; <style> content dropped, entities decoded.
    assert texts(docs[1]) == ["Thursday works & I'll bring the sheet.\nSee you there."]
    assert docs[1].meta["body_type"] == "html"


def test_email_interleaved_quotes_and_outlook_history():
    raw = (
        b"From: a@example.org\nSubject: s\n\n"
        b"> question one?\nAnswer one.\n\n> question two?\nAnswer two.\n\n"
        b"-----Original Message-----\nFrom: b@example.org\nSent: Monday\n\nold text\n"
    )
    [doc] = email_format.parse_eml(raw, name="x.eml")
    assert [(c.kind, doc.chunk_text(c), c.quotes_ordinal) for c in doc.chunks] == [
        ("quote", "> question one?", 1),
        ("message", "Answer one.", None),
        ("quote", "> question two?", 1),
        ("message", "Answer two.", None),
        ("quote", "-----Original Message-----\nFrom: b@example.org\nSent: Monday\n\nold text", 3),
    ]


def test_eml_without_headers_is_refused():
    with pytest.raises(UnknownFormat, match=r"^n\.txt: --format email cannot read this file: not an e-mail"):
        parse_bytes(b"just some words\n", name="n.txt", fmt="email")


# --- code -----------------------------------------------------------------------------------


def test_python_symbols():
    [doc] = parse_path(DATA / "sample.py")
    assert_well_formed([doc])
    assert doc.source_type == "code" and doc.trust == "external"
    assert doc.meta["language"] == "python"
    symbols = [c for c in doc.chunks if c.kind == "code_symbol"]
    assert [(c.meta["symbol"], c.meta["symbol_kind"], c.meta["lineno"]) for c in symbols] == [
        ("greet", "function", 13), ("Counter", "class", 17), ("fetch", "function", 30),
    ]
    greet = doc.chunk_text(symbols[0])
    assert greet.startswith("# Greets someone politely.\n# Used by the CLI.\n@functools.lru_cache")
    assert greet.endswith('return f"Hello, {name}!"')
    assert doc.chunk_text(symbols[2]).startswith("@staticmethod\n@functools.wraps(greet)\nasync def fetch")
    assert "def bump" in doc.chunk_text(symbols[1])
    paragraphs = [doc.chunk_text(c) for c in doc.chunks if c.kind == "paragraph"]
    assert paragraphs[0].startswith("#!/usr/bin/env python3") and paragraphs[0].endswith('DEFAULT_NAME = "world"')
    assert paragraphs[-1].startswith('if __name__ == "__main__":')


def test_python_syntax_error_falls_back_to_blocks():
    source = "def broken(:\n    pass\n\nx = 1\n"
    [doc] = code.parse_code(source, name="bad.py")
    assert doc.meta["syntax_error"].startswith("line 1:")
    assert [doc.chunk_text(c) for c in doc.chunks] == ["def broken(:\n    pass\n\nx = 1"]  # merged
    [doc] = code.parse_code(source, name="bad.py", max_chars=15)
    assert [doc.chunk_text(c) for c in doc.chunks] == ["def broken(:", "pass", "x = 1"]
    assert [c.kind for c in doc.chunks] == ["split", "split", "paragraph"]


def test_python_invalid_escape_does_not_warn():
    [doc] = code.parse_code('import re\n\n\ndef f():\n    return re.compile("\\d")\n', name="w.py")
    assert [c.kind for c in doc.chunks] == ["paragraph", "code_symbol"]


def test_js_blocks_merged_and_split():
    [doc] = parse_path(DATA / "sample.js")
    assert_well_formed([doc])
    assert doc.meta["language"] == "javascript"
    assert [c.kind for c in doc.chunks] == ["paragraph"]  # 13 short lines merge into one chunk
    [small] = code.parse_code((DATA / "sample.js").read_text(), name="s.js", max_chars=120)
    assert all(c.end - c.start <= 120 for c in small.chunks)
    assert len(small.chunks) > 1
    assert all(small.text[c.end] == "\n" for c in small.chunks[:-1] if c.kind == "split")


# --- detection and errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("chat_messages.json", "chat"),
        ("chat_object.json", "chat"),
        ("chat_conversations.json", "chat"),
        ("locomo_tiny.json", "locomo"),
        ("realtalk/Chat_1_Ana_Ben.json", "locomo"),
        ("longmemeval_s_tiny.json", "longmemeval"),
        ("garden.md", "markdown"),
        ("notes.txt", "text"),
        ("reply.eml", "email"),
        ("two.mbox", "email"),
        ("sample.py", "code"),
        ("sample.js", "code"),
    ],
)
def test_auto_detection(filename, expected):
    docs = parse_path(DATA / filename)
    assert {d.source_type for d in docs} == {expected}
    assert {d.uri for d in docs} == {str((DATA / filename).resolve())}
    ids = [d.external_id for d in docs]
    assert None not in ids and len(set(ids)) == len(ids)


def test_mbox_detected_without_extension(tmp_path):
    target = tmp_path / "inbox"
    target.write_bytes((DATA / "two.mbox").read_bytes())
    assert [d.source_type for d in parse_path(target)] == ["email", "email"]


def test_extensionless_json_and_text(tmp_path):
    target = tmp_path / "export"
    target.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    assert parse_path(target)[0].source_type == "chat"
    target.write_text("[citation needed] is a phrase.\n")
    assert parse_path(target)[0].source_type == "text"


def test_jsonl_chat(tmp_path):
    target = tmp_path / "c.jsonl"
    target.write_text('{"role": "user", "content": "a"}\n\n{"role": "assistant", "content": "b"}\n')
    assert texts(parse_path(target)[0]) == ["user: a", "assistant: b"]
    target.write_text('{"role": "user", "content": "a"}\n{"role": \n')
    with pytest.raises(BadInput, match=r"malformed JSON at line 2:\d+"):
        parse_path(target)


def test_forced_format_overrides_extension(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("# Title\n\nBody.\n")
    assert parse_path(target)[0].source_type == "text"
    assert parse_path(target, fmt="markdown")[0].source_type == "markdown"
    assert parse_path(target, fmt="code")[0].meta["language"] == "text"
    assert parse_path(DATA / "chat_object.json", fmt="chat")[0].source_type == "chat"


def test_missing_path():
    with pytest.raises(BadInput, match=r"^/no/such/file\.json: no such file$"):
        parse_path(Path("/no/such/file.json"))


def test_directory(tmp_path):
    with pytest.raises(BadInput, match=r"is a directory"):
        parse_path(tmp_path)


def test_empty_file(tmp_path):
    target = tmp_path / "e.md"
    target.write_bytes(b"")
    with pytest.raises(BadInput, match=r"e\.md: empty file$"):
        parse_path(target)
    target.write_bytes(b" \n\t\r\n")
    with pytest.raises(BadInput, match=r"e\.md: empty file \(only whitespace\)$"):
        parse_path(target)


def test_binary_file(tmp_path):
    target = tmp_path / "photo.txt"
    target.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(BadInput, match=r"photo\.txt: binary file: looks like a PNG image$"):
        parse_path(target)
    target.write_bytes(b"text\x00with a nul")
    with pytest.raises(BadInput, match=r"binary file: contains NUL bytes$"):
        parse_path(target)


def test_not_utf8(tmp_path):
    target = tmp_path / "latin.txt"
    target.write_bytes("café".encode("latin-1"))
    with pytest.raises(BadInput, match=r"latin\.txt: not text: not valid UTF-8 \(byte 0xe9 at offset 3\)"):
        parse_path(target)


def test_malformed_json_has_line_and_column():
    with pytest.raises(BadInput, match=r"^bad\.json: malformed JSON at line 2:19: ") as info:
        parse_bytes(b'[\n  {"role": "user" "content": "x"}\n]', name="bad.json")
    assert "\n" not in str(info.value)
    assert not isinstance(info.value, UnknownFormat)


@pytest.mark.parametrize(
    ("payload", "shape"),
    [
        ({"foo": 1}, "an object with keys foo"),
        ([1, 2], "a list of int"),
        ([{"question": "?"}], "a list of objects with keys question"),
        (42, "a JSON int"),
    ],
)
def test_unknown_json_shape(payload, shape):
    with pytest.raises(UnknownFormat, match=rf"^u\.json: JSON of an unknown shape \({shape}\); expected"):
        parse_bytes(json.dumps(payload).encode(), name="u.json")


def test_empty_json_list():
    with pytest.raises(BadInput, match=r"^l\.json: empty JSON list"):
        parse_bytes(b"[]", name="l.json")


@pytest.mark.parametrize("fmt", ["locomo", "longmemeval", "chat"])
def test_forced_json_format_that_does_not_fit(fmt):
    with pytest.raises(UnknownFormat, match=rf"^x\.json: --format {fmt} cannot read this file: not "):
        parse_bytes(json.dumps({"foo": []}).encode(), name="x.json", fmt=fmt)


def test_forced_json_format_on_non_json():
    with pytest.raises(UnknownFormat, match=r"^n\.md: --format locomo cannot read this file: malformed JSON"):
        parse_bytes(b"# Not JSON\n", name="n.md", fmt="locomo")


def test_unknown_format_name():
    with pytest.raises(UnknownFormat, match=r"^x\.txt: unknown format 'pdf'"):
        parse_bytes(b"hello", name="x.txt", fmt="pdf")


def test_nothing_to_ingest():
    with pytest.raises(BadInput, match=r"^c\.json: nothing to ingest"):
        parse_bytes(b'{"messages": [{"role": "user", "content": ""}]}', name="c.json")


def test_error_messages_are_one_line():
    with pytest.raises(BadInput) as info:
        parse_bytes(json.dumps([{"haystack_sessions": [[]], "haystack_session_ids": ["a\nb"],
                                 "haystack_dates": []}]).encode(), name="m.json")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("m.json: ")


def test_formats_constant():
    assert FORMATS == ("chat", "locomo", "longmemeval", "markdown", "text", "email", "code")


def test_iter_source_files(tmp_path):
    (tmp_path / "a.md").write_text("# A\n")
    (tmp_path / ".hidden.md").write_text("# H\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("x = 1\n")
    (tmp_path / "sub" / "blob.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "c.js").write_text("x")
    found = [p.relative_to(tmp_path).as_posix() for p in iter_source_files(tmp_path)]
    assert found == ["a.md", "sub/b.py"]
    assert list(iter_source_files(tmp_path / "a.md")) == [tmp_path / "a.md"]


# --- secrets across the "<speaker>: <text>" join -------------------------------------------

# Neither half is a secret on its own; joined, "password: hunter2xyz9" is one (the scrubber
# passes "password" and "hunter2xyz9" alone, and redacts the line).
_SECRET_TURNS = {
    "chat": lambda: chat.parse_json(
        {"messages": [{"role": "user", "name": "password", "content": "hunter2xyz9"}]}, name="c.json"),
    "locomo": lambda: locomo.parse_json(
        [{"sample_id": "s", "conversation": {"session_1": [
            {"speaker": "password", "dia_id": "D1:1", "text": "hunter2xyz9"},
            {"speaker": "PIN", "dia_id": "D1:2", "text": "4821 on a card", "blip_caption": "a bank card"}]}}], name="l.json"),
    "longmemeval": lambda: longmemeval.parse_json(
        [{"question_id": "q", "haystack_session_ids": ["a"], "haystack_dates": [None],
          "haystack_sessions": [[{"role": "password", "content": "hunter2xyz9"}]]}], name="q.json"),
}


@pytest.mark.parametrize("fmt", sorted(_SECRET_TURNS))
def test_a_secret_made_by_joining_speaker_and_text_is_scrubbed(fmt):
    from engine.extract.secrets import scrub

    assert scrub("password")[0] == "password" and scrub("hunter2xyz9")[0] == "hunter2xyz9"
    (doc,) = _SECRET_TURNS[fmt]()
    assert "hunter2xyz9" not in doc.text and "4821" not in doc.text
    assert scrub(doc.text)[0] == doc.text  # what is stored is what the scrubber passes
    assert_well_formed([doc])
    for chunk in doc.chunks:  # spans stay exact and the line still names its speaker
        assert doc.text[chunk.start:chunk.end] == doc.chunk_text(chunk)
        assert doc.chunk_text(chunk).startswith(f"{chunk.speaker}: [secret:")
