"""Chat JSON (ARCHITECTURE.md "Chat JSON accepted by ingest").

Accepted shapes: a list of messages `[{"role", "content", "name"?, "timestamp"?}]`; an
object `{"messages": [...]}`; a list of conversations `[{"id", "title"?, "messages": [...]}]`.
A timestamp may also sit under `created_at`, `time` or `create_time` (ISO-8601 or epoch).
`content` may be a string or a list of OpenAI content parts (their text parts are joined).

One document per conversation, one chunk per message: "<speaker>: <content>", messages
joined by a blank line. Messages with no text are skipped and counted in meta["skipped"].
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any, Literal

from engine.errors import BadInput, UnknownFormat
from engine.ingest.limits import check_turn
from engine.ingest.model import ParsedDocument
from engine.ingest.normalize import DocumentBuilder, decode, label, normalize
from engine.timeutil import to_utc_iso

# The one rule for a message's role, wherever a turn comes from (a chat file, add_turns, MCP's
# memory_add): user, assistant, system or tool, or another exporter's name for one of them
# (LangChain's human/ai, Gemini's model, OpenAI's developer/function). Anything else is refused.
Role = Literal["user", "assistant", "system", "tool", "human", "ai", "model", "developer", "function"]
# the trust each role gives its turn (a key for every Role: tests/engine/test_ingest_formats.py)
ROLE_TRUST: dict[str, str] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "system": "assistant",  # written by the agent's operator/developer, not by the user
    "developer": "assistant",
    "tool": "tool",
    "function": "tool",
}
TIME_KEYS = ("timestamp", "created_at", "time", "create_time")
SHAPE_HELP = (
    'expected a list of messages, {"messages": [...]} or a list of conversations '
    '[{"id", "messages": [...]}]'
)


def trust_for_role(role: str | None) -> str | None:
    """user -> user, assistant -> assistant, tool -> tool, system -> assistant; an unknown
    role -> None (the chunk takes the document's trust)."""
    return ROLE_TRUST.get(role) if role else None


def role_label(value: Any) -> str | None:
    """A role as a lower-case label ("User " -> "user"), None if absent. Lower-casing comes
    before normalising: str.lower() can produce sequences that are not NFC."""
    if value is None:
        return None
    return label(str(value).lower()) or None


def checked_role(value: Any, where: str, *, required: bool = False) -> str | None:
    """role_label(value), refused with BadInput unless it is a Role. Without a role: None, unless
    `required` (a file's message may name only its speaker; a live turn must say who wrote it)."""
    role = role_label(value) if isinstance(value, str) or not required else None
    if (role is None and required) or (role is not None and role not in ROLE_TRUST):
        raise BadInput(f"{where}: role must be user, assistant, system or tool (or human, ai, model, developer, "
                       f"function), got {value!r}")
    return role


def content_text(content: Any) -> str:
    """A message's text: a string as is; OpenAI content parts -> their text parts joined by
    newlines (images, audio and other non-text parts are left out)."""
    if content is None or isinstance(content, bool):
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (int, float)):
        return str(content)
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, dict):  # Assistants API: {"text": {"value": ...}}
                    text = text.get("value")
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(t for t in texts if t)
    return ""


def first_time(message: dict[str, Any]) -> tuple[str | None, Any]:
    """(ISO UTC or None, the raw value) from the first time key present."""
    for key in TIME_KEYS:
        if message.get(key) is not None:
            return to_utc_iso(message[key]), message[key]
    return None, None


def _conversations(data: Any, name: str) -> list[tuple[dict[str, Any], list[Any], int | None]]:
    """(conversation object, its messages, index in a list of conversations or None)."""
    if isinstance(data, dict):
        messages = data.get("messages")
        if not isinstance(messages, list):
            raise UnknownFormat(f"{name}: not chat JSON: object without a \"messages\" list; {SHAPE_HELP}")
        return [(data, messages, None)]
    if not isinstance(data, list):
        raise UnknownFormat(f"{name}: not chat JSON: top level is {type(data).__name__}; {SHAPE_HELP}")
    if not data:
        raise BadInput(f"{name}: empty JSON list: nothing to ingest")
    if isinstance(data[0], dict) and "messages" in data[0]:
        out: list[tuple[dict[str, Any], list[Any], int | None]] = []
        for i, conv in enumerate(data):
            if not isinstance(conv, dict) or not isinstance(conv.get("messages"), list):
                raise UnknownFormat(
                    f"{name}: not chat JSON: item {i} of the list of conversations has no "
                    '"messages" list'
                )
            out.append((conv, conv["messages"], i))
        return out
    for i, message in enumerate(data):
        if not isinstance(message, dict) or not ("role" in message or "content" in message):
            raise UnknownFormat(
                f"{name}: not chat JSON: item {i} is not a message (no \"role\"/\"content\"); "
                f"{SHAPE_HELP}"
            )
    return [({}, data, None)]


def parse_json(data: Any, *, name: str) -> list[ParsedDocument]:
    """Chat JSON already loaded -> one ParsedDocument per conversation (empty ones dropped)."""
    conversations = _conversations(data, name)
    multi = len(conversations) > 1 or conversations[0][2] is not None
    docs = []
    for conv, messages, index in conversations:
        conv_id = conv.get("id", conv.get("conversation_id"))
        conv_id = label(conv_id) if conv_id is not None else None
        where = f"conversation {conv_id or index}" if multi else "message list"
        builder = DocumentBuilder()
        skipped = 0
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                raise BadInput(f"{name}: {where}: message {i} is not a JSON object")
            role = checked_role(message.get("role"), f"{name}: {where}: message {i}")
            raw = content_text(message.get("content"))
            check_turn(raw, f"{name}: {where}: message {i}")
            content = normalize(raw)
            if not content.strip():
                skipped += 1
                continue
            speaker = label(message.get("name")) or role or "unknown"
            when, raw_time = first_time(message)
            msg_id = message.get("id")
            if len(builder):
                builder.add("\n\n", normalized=True)
            start, end = builder.add(f"{speaker}: {content}")  # one piece, scrubbed as a line: DocumentBuilder.add
            meta = {}
            if when is None and raw_time is not None:
                meta["time_raw"] = str(raw_time)
            builder.add_chunk(
                start,
                end,
                "message",
                speaker=speaker,
                role=role,
                message_id=label(msg_id) if msg_id is not None else str(i),
                source_time=when,
                trust=trust_for_role(role),
                meta=meta,
            )
        if not builder.chunks:
            continue
        conv_time = next((c.source_time for c in builder.chunks if c.source_time), None)
        if conv_time is None:
            conv_time = first_time(conv)[0]
        external_id = conv_id
        if external_id is None and multi:
            external_id = f"conversation_{index}"
        base = PurePath(name).name or name
        title = label(conv.get("title")) or (f"{base} [{external_id}]" if multi else base)
        docs.append(
            builder.build(
                source_type="chat",
                trust="user",
                title=title,
                source_time=conv_time,
                external_id=external_id,
                meta={"skipped": skipped, "messages": len(messages)},
            )
        )
    return docs


def parse(raw: bytes | str, *, name: str) -> list[ParsedDocument]:
    """Chat JSON bytes/text -> documents (malformed JSON -> BadInput with line:col)."""
    text = decode(raw, name) if isinstance(raw, bytes) else raw
    return parse_json(load_json(text, name), name=name)


def load_json(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{name}: malformed JSON at line {exc.lineno}:{exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise BadInput(f"{name}: malformed JSON: nested too deeply") from None
