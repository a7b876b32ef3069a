"""E-mail: .eml (one message) and .mbox (many), read with the stdlib `email` package and
email.policy.default.

One document per message. Its text is a header block ("From: ...\\nTo: ...\\nDate: ...\\n
Subject: ...\\n\\n", lines for absent headers left out; the block is not a chunk) followed by
the plain-text body (or the HTML body converted crudely to text). The body is cut into the
new text (kind "message") and quoted history (kind "quote": "> " lines, "On ... wrote:"
attributions, everything after "-----Original Message-----"), each quote pointing at the
message chunk it belongs to through quotes_ordinal. A signature after "-- " stays in the
message chunk.
"""

from __future__ import annotations

import email
import email.message
import email.policy
import email.utils
import html
import re
from pathlib import PurePath

from engine.errors import BadInput, UnknownFormat
from engine.ingest.model import ParsedDocument
from engine.ingest.normalize import DocumentBuilder, label, line_spans, normalize
from engine.timeutil import to_utc_iso

_HEADERS = ("From", "To", "Cc", "Date", "Subject")
_IDENTIFYING = ("from", "to", "subject", "date", "message-id")
_ATTRIBUTION_START = re.compile(r"^\s*On\s.*", re.IGNORECASE)
_WROTE = re.compile(r"\bwrote:\s*$", re.IGNORECASE)
_ORIGINAL = re.compile(
    r"^\s*(?:-{2,}\s*(?:Original Message|Forwarded message)\s*-{2,}|_{20,})\s*$", re.IGNORECASE
)
# An mbox "From " separator line: at the start of the file or after a blank line.
_MBOX_FROM = re.compile(rb"(?:\A|(?<=\n\n)|(?<=\r\n\r\n))From ")
# mboxrd escapes body lines "From ..." as ">From ..." (and ">From" as ">>From"): undo one level.
_UNESCAPE_FROM = re.compile(rb"^>(>*From )", re.MULTILINE)
_HEADER_LINE = re.compile(rb"^[!-9;-~]+:", re.MULTILINE)


# --- HTML -> text (crude, on purpose) --------------------------------------------------------

_DROP = re.compile(r"<(script|style|head|title)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_BREAK = re.compile(r"<\s*(br|/p|/div|/li|/tr|/h[1-6]|/blockquote|/table|hr)\b[^>]*>", re.IGNORECASE)
_ITEM = re.compile(r"<\s*li\b[^>]*>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def html_to_text(markup: str) -> str:
    """Tags dropped, block ends turned into line breaks, entities unescaped."""
    text = _COMMENT.sub("", markup)
    text = _DROP.sub("", text)
    text = _BREAK.sub("\n", text)
    text = _ITEM.sub("\n- ", text)
    text = _TAG.sub("", text)
    text = html.unescape(text)
    text = "\n".join(line.strip() for line in text.replace("\r", "").split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# --- one message ----------------------------------------------------------------------------


def _header(msg: email.message.Message, key: str) -> str:
    try:
        value = msg.get(key)
    except Exception:  # noqa: BLE001 - a malformed header must not sink the whole file
        value = None
    if value is None:
        return ""
    try:
        return label(str(value))
    except Exception:  # noqa: BLE001
        return ""


def _payload_text(part: email.message.Message) -> str:
    try:
        content = part.get_content()  # type: ignore[attr-defined]
        if isinstance(content, bytes):
            return content.decode("utf-8", "replace")
        return content if isinstance(content, str) else ""
    except (LookupError, UnicodeError, AttributeError, ValueError, KeyError):
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            return payload.decode("utf-8", "replace")
        return payload if isinstance(payload, str) else ""


def _body(msg: email.message.EmailMessage) -> tuple[str, str]:
    """(body text, "plain" | "html" | "none")."""
    try:
        part = msg.get_body(preferencelist=("plain", "html"))
    except (KeyError, AttributeError):  # pragma: no cover - defensive
        part = None
    if part is None:
        if msg.is_multipart() or msg.get_content_maintype() != "text":
            return "", "none"  # e.g. a single-part PDF: its name is in meta["attachments"]
        part = msg
    text = _payload_text(part)
    if part.get_content_type() == "text/html":
        return html_to_text(text), "html"
    return text, "plain"


def _attachments(msg: email.message.Message) -> list[str]:
    names = []
    for part in msg.walk():
        if part.is_multipart():
            continue
        filename = part.get_filename()
        if filename or part.get_content_disposition() == "attachment":
            names.append(label(filename) or part.get_content_type())
    return names


def _segments(text: str, base: int) -> list[tuple[str, int, int, str | None]]:
    """Body lines -> (kind, start, end, attribution) runs, kind "message" or "quote"."""
    spans = line_spans(text)
    lines = [text[s:e] for s, e in spans]
    n = len(lines)
    is_quote = [False] * n
    attribution: dict[int, str] = {}
    i = 0
    while i < n:
        line = lines[i]
        if _ORIGINAL.match(line):
            for k in range(i, n):
                is_quote[k] = True
            attribution[i] = line.strip()
            break
        if line.lstrip().startswith(">"):
            is_quote[i] = True
        elif _ATTRIBUTION_START.match(line):
            # "On <date>, <who> wrote:" on one line, or wrapped onto the next one or two.
            for k in range(i, min(i + 3, n)):
                if _WROTE.search(lines[k]):
                    nxt = k + 1
                    while nxt < n and not lines[nxt].strip():
                        nxt += 1
                    if nxt >= n or lines[nxt].lstrip().startswith(">"):
                        for m in range(i, k + 1):
                            is_quote[m] = True
                        attribution[i] = " ".join(" ".join(lines[i : k + 1]).split())
                        i = k
                    break
        i += 1
    # Blank lines between two quote lines belong to the quote.
    previous_quoted = [False] * n  # is the nearest non-blank line above a quote line?
    last = False
    for i in range(n):
        previous_quoted[i] = last
        if lines[i].strip():
            last = is_quote[i]
    following = False
    for i in range(n - 1, -1, -1):
        if lines[i].strip():
            following = is_quote[i]
        elif previous_quoted[i] and following:
            is_quote[i] = True
    runs: list[tuple[str, int, int, str | None]] = []
    for i in range(n):
        kind = "quote" if is_quote[i] else "message"
        start, end = spans[i]
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1], base + end, runs[-1][3] or attribution.get(i))
        else:
            runs.append((kind, base + start, base + end, attribution.get(i)))
    return runs


def parse_message(msg: email.message.EmailMessage, *, name: str, index: int | None = None) -> ParsedDocument:
    """One parsed message -> one document."""
    headers = {key: _header(msg, key) for key in _HEADERS}
    message_id = _header(msg, "Message-ID") or None
    in_reply_to = _header(msg, "In-Reply-To") or None
    references = _header(msg, "References").split()
    raw_date = headers["Date"]
    when = None
    if raw_date:
        try:
            when = to_utc_iso(email.utils.parsedate_to_datetime(raw_date))
        except (TypeError, ValueError, IndexError):
            when = to_utc_iso(raw_date)
    body, body_type = _body(msg)
    attachments = _attachments(msg)
    builder = DocumentBuilder()
    for key in _HEADERS:
        if headers[key]:
            builder.add(f"{key}: ", normalized=True)
            builder.add(headers[key], normalized=True)
            builder.add("\n", normalized=True)
    builder.add("\n", normalized=True)
    body_text = normalize(body)
    body_start, _ = builder.add(body_text, normalized=True)
    meta = {
        "from": headers["From"] or None,
        "to": headers["To"] or None,
        "subject": headers["Subject"] or None,
        "attachments": attachments,
    }
    runs = _segments(body_text, body_start)
    message_ordinals: list[int] = []
    quotes = []
    for kind, start, end, attribution in runs:
        if kind == "message":
            message_ordinals.append(len(builder.chunks))
            builder.add_chunk(
                start, end, "message",
                speaker=headers["From"] or None,
                message_id=message_id,
                source_time=when,
                meta=dict(meta),
            )
        else:
            chunk_meta = dict(meta)
            if attribution:
                chunk_meta["attribution"] = attribution
            quotes.append(builder.add_chunk(start, end, "quote", meta=chunk_meta))
    doc = builder.build(
        source_type="email",
        trust="external",
        title=headers["Subject"] or PurePath(name).name or name,
        source_time=when,
        external_id=message_id or (f"{name}#{index}" if index is not None else None),
        meta={**meta, "cc": headers["Cc"] or None, "date": raw_date or None, "message_id": message_id,
              "in_reply_to": in_reply_to, "references": references, "body_type": body_type},
    )
    # Ordinals are positions in doc.chunks, known only once empty chunks are gone: a quote
    # belongs to the nearest message chunk before it (or the first one after, for a reply
    # written below the quote).
    ordinal = {id(c): i for i, c in enumerate(doc.chunks)}
    messages = [ordinal[id(c)] for c in doc.chunks if c.kind == "message"]
    for quote in quotes:
        if id(quote) not in ordinal:
            continue
        mine = ordinal[id(quote)]
        before = [m for m in messages if m < mine]
        quote.quotes_ordinal = before[-1] if before else (messages[0] if messages else None)
    return doc


# --- files ------------------------------------------------------------------------------------


def _has_headers(raw: bytes) -> bool:
    head = raw.lstrip()[:4096]
    block = re.split(rb"\r?\n\r?\n", head, maxsplit=1)[0]
    found = {m.group(0)[:-1].lower().decode("ascii", "replace") for m in _HEADER_LINE.finditer(block)}
    return any(h in found for h in _IDENTIFYING)


def is_mbox(raw: bytes) -> bool:
    """Starts with an mbox "From " envelope line followed by header lines."""
    if not raw.startswith(b"From "):
        return False
    first, _, rest = raw.partition(b"\n")
    return _has_headers(rest)


def parse_eml(raw: bytes, *, name: str) -> list[ParsedDocument]:
    """One RFC 5322 message -> one document."""
    if is_mbox(raw):
        return parse_mbox(raw, name=name)
    if not _has_headers(raw):
        raise UnknownFormat(f"{name}: not an e-mail message: no From/To/Subject/Date/Message-ID header")
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    return [parse_message(msg, name=name)]


def split_mbox(raw: bytes) -> list[bytes]:
    """An mbox file -> the raw messages, envelope "From " lines removed and mboxrd ">From "
    escapes undone. A separator is a "From " line at the start of the file or after a blank
    line (mbox writers always leave one). That is stricter than `mailbox.mbox`, which splits
    at any "From " line and so cuts a message whose body has an unescaped "From " line in
    two; `mailbox` also wants a path, and importers take bytes."""
    starts = [m.start() for m in _MBOX_FROM.finditer(raw)]
    messages = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(raw)
        chunk = raw[start:end]
        _, _, chunk = chunk.partition(b"\n")  # the envelope line
        messages.append(_UNESCAPE_FROM.sub(rb"\1", chunk))
    return messages


def parse_mbox(raw: bytes, *, name: str) -> list[ParsedDocument]:
    """An mbox file -> one document per message."""
    if not raw.startswith(b"From "):
        raise UnknownFormat(f"{name}: not an mbox file: it does not start with a \"From \" line")
    docs = []
    for index, chunk in enumerate(split_mbox(raw)):
        msg = email.message_from_bytes(chunk, policy=email.policy.default)
        if not isinstance(msg, email.message.EmailMessage):  # pragma: no cover
            raise BadInput(f"{name}: message {index} could not be parsed")
        docs.append(parse_message(msg, name=name, index=index))
    return docs

