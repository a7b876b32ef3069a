"""`memlens mcp`: the memory engine served to an agent over MCP (stdio), with the official SDK.

One server process serves one scope: the user/agent (and optional scope) it was started with.
Nothing a client sends can name another scope, so an agent can only read and change its own
memories. Tools:

    memory_add      store turns (one, or a batch); extract and reconcile facts; the ids it made
    memory_recall   cited context + ranked results + trace id (origin "agent": usage is
                    reinforced, only a hash of the query is kept)
    memory_profile  what is known about the user, each line with the facts behind it
    memory_forget   soft-forget a memory with a reason (logged as actor "agent", undoable)
    memory_explain  why a memory was or was not recalled for a query (read-only, not stored)

Resources: memlens://profile and memlens://memory/{memory_id}.

Every constraint a tool enforces is in its input schema (role values, k's bounds, id ranges,
non-empty strings; memory_add's one turn or a batch in its field descriptions), so a client
model can see it. Errors the client can
fix (an argument outside the schema, unknown ids, a bad time) come back as a tool error result
with one line, "Error executing tool <name>: <what is wrong>"; a database another process
holds locked past the busy timeout says "busy, retry"; anything else is logged with its
traceback on stderr and reported as "Error executing tool <name>" (the SDK's wording). stdout
is the protocol: the SDK's stdio transport points file descriptor 1 at stderr while it serves,
and every log line goes to stderr.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.gui import settle_gc
from engine import __version__
from engine.errors import BadInput, DatabaseBusy, MemlensError
from engine.ingest.formats.chat import Role
from engine.ingest.limits import MAX_TURN_CHARS
from engine.memory import MemoryEngine
from engine.scope import Scope
from engine.timeutil import normalise_iso

log = logging.getLogger("memlens.mcp")

SERVER_NAME = "memlens"
MAX_K = 100  # a recall result is pasted into a prompt; more than this is a mistake, not a wish
MAX_ID = 2**63 - 1  # SQLite's largest row id
TEXT = {"min_length": 1, "pattern": r"\S"}  # a string with at least one character that is not whitespace
# memory_add's one rule across fields (one turn or a batch, not both) is said in its descriptions,
# not with oneOf/anyOf/allOf/not/if at the schema's root: Anthropic's, OpenAI's, Google's and
# Azure's APIs reject a tool whose input schema has them there, and the client then loses the
# whole session (or silently drops the tool).
BUSY = "busy, retry: another memlens process holds the database's write lock (nothing was written)"
WORKERS = 4  # engine calls in flight at once (a recall need not wait for a slow LLM extraction)
INSTRUCTIONS = """\
Long-term memory for user {user} and agent {agent}, kept by memlens in one local SQLite file.
Before answering, call memory_recall with the user's question and use the returned context
(each line cites its memory id). After each exchange, call memory_add with the new turns so
that facts about the user are extracted and kept current. memory_profile summarises what is
known; memory_forget removes a memory the user wants gone; memory_explain says why a memory
was or was not recalled."""


class Turn(BaseModel):
    """One chat message, as in OpenAI's chat format."""

    model_config = ConfigDict(extra="ignore")  # tool_calls, ids, ... of a pasted transcript

    role: Role = Field(description="who wrote the message")
    content: str | None = Field(description="the message text (a message without text is skipped)",
                                max_length=MAX_TURN_CHARS)
    name: str | None = Field(default=None, description="the speaker's name (default: the role)")
    timestamp: str | None = Field(default=None, description="ISO-8601 time of the message (default: now)")


def _positive_id(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
        raise BadInput(f"{what} must be an integer from 1 to {MAX_ID}, got {value!r}")
    return value


_PHRASES = {
    "greater_than_equal": "must be at least {ge}", "less_than_equal": "must be at most {le}",
    "greater_than": "must be more than {gt}", "less_than": "must be less than {lt}",
    "literal_error": "must be one of {expected}", "string_too_short": "must not be empty",
    "string_pattern_mismatch": "must not be empty or blank", "too_short": "must not be empty",
    "too_long": "must hold at most {max_length} items",
    "missing": "is required", "string_too_long": "must be at most {max_length} characters long",
    "int_parsing": "must be an integer", "int_type": "must be an integer",
    "int_from_float": "must be a whole number", "string_type": "must be a string", "list_type": "must be a list",
    "model_type": "must be an object", "model_attributes_type": "must be an object", "dict_type": "must be an object",
}


def describe_validation(exc: ValidationError) -> str:
    """pydantic's errors as one line a model can act on: "k must be at most 100, got 500"."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "the arguments"
        template = _PHRASES.get(err["type"])
        try:
            phrase = template.format(**err.get("ctx", {})) if template else err["msg"][:1].lower() + err["msg"][1:]
        except (KeyError, IndexError):
            phrase = err["msg"]
        got = "" if err["type"] == "missing" else f", got {str(repr(err.get('input')))[:60]}"
        parts.append(f"{where} {phrase}{got}")
    return "; ".join(parts)


class MemoryTools:
    """The tools' work, synchronous and MCP-free: one engine, one scope, one extraction mode."""

    def __init__(self, engine: MemoryEngine, scope: Scope, *, extract: str = "auto") -> None:
        self.engine = engine
        self.scope = scope
        self.extract = extract

    def add(self, role: str | None, content: str | None, name: str | None, timestamp: str | None,
            messages: list[Turn] | None, conversation: str | None) -> dict[str, Any]:
        if messages is not None:
            if role is not None or content is not None or name is not None or timestamp is not None:
                raise BadInput("give either one turn (role, content, ...) or messages, not both")
            batch = [m.model_dump(exclude_none=True) for m in messages]
        elif role is None or content is None:
            raise BadInput("give a turn (role and content) or a list of messages")
        else:
            turn = {"role": role, "content": content, "name": name, "timestamp": timestamp}
            batch = [{k: v for k, v in turn.items() if v is not None}]
        added = self.engine.add_turns(batch, scope=self.scope, extract=self.extract, conversation=conversation,
                                      via="mcp")
        if added.extraction and added.extraction.get("failed_windows"):
            log.warning("memory_add: extraction failed (the turns are stored, the window stays queued): %s",
                        "; ".join(added.extraction.get("errors") or []))
        return added.as_dict()

    def recall(self, query: str, k: int, as_of: str | None) -> dict[str, Any]:
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise BadInput(f"k must be between 1 and {MAX_K}, got {k!r}")
        if as_of:
            try:
                normalise_iso(as_of)
            except ValueError:
                raise BadInput(f"as_of {as_of!r} is not an ISO-8601 time (e.g. 2024-05-01T10:00:00Z)") from None
        d = self.engine.recall(query, scope=self.scope, k=k, as_of=as_of or None, origin="agent").as_dict()
        return {"trace_id": d["trace_id"], "context": d["context"]["text"], "tokens": d["context"]["tokens"],
                "results": [{key: r[key] for key in ("memory_id", "rank", "score", "text", "kind", "trust", "fact",
                                                     "history", "source", "shares_place_with")}
                            for r in d["results"]],
                "timings_ms": d["timings_ms"],
                **({"trace_not_stored": d["trace_not_stored"]} if "trace_not_stored" in d else {})}

    def profile(self) -> dict[str, Any]:
        p = self.engine.profile(self.scope).as_dict()
        lines = [x["text"] for x in p["static"]] + [x["text"] for x in p["dynamic"]]
        return {"static": p["static"], "dynamic": p["dynamic"], "text": "\n".join(lines)}

    def forget(self, memory_id: int, reason: str) -> dict[str, Any]:
        _positive_id(memory_id, "memory_id")
        if not isinstance(reason, str) or not reason.strip():
            raise BadInput("reason must not be empty")
        return self.engine.curator(self.scope, actor="agent").forget(memory_id, reason=reason.strip()).as_dict()

    def explain(self, query: str, memory_id: int) -> dict[str, Any]:
        _positive_id(memory_id, "memory_id")
        # persist=False: an explain is a what-if, and an agent's query text is never stored.
        out = self.engine.explain(query, memory_id, scope=self.scope, persist=False)
        out.pop("trace_id", None)
        return out

    def memory(self, memory_id: str) -> dict[str, Any]:
        try:
            mid = int(memory_id)
        except ValueError:
            raise BadInput(f"no memory {memory_id} in this scope") from None
        return self.engine.show("memory", _positive_id(mid, "memory id"), scope=self.scope)


def open_workers(engine: MemoryEngine, workers: int = WORKERS) -> ThreadPoolExecutor:
    """The threads every engine call runs on, each with its connection opened now.

    A fixed pool rather than the SDK's anyio worker threads: those exit after 10 s idle and
    new ones open new connections, which the engine keeps until close() (a long session would
    pile up file handles), and a connection opened while another thread writes can fail.
    """
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memlens-mcp")
    ready = threading.Barrier(workers)

    def open_connection(_: int) -> None:
        engine.store.db.connection()
        ready.wait(timeout=30)  # every task holds its thread until all have one: `workers` threads

    list(pool.map(open_connection, range(workers)))
    return pool


def build_server(tools: MemoryTools, pool: ThreadPoolExecutor):
    """An MCPServer whose tools and resources run `tools` on `pool`, in the tools' scope."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError

    class Server(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            try:
                return await super().call_tool(name, arguments, context)
            except UnexpectedToolError:
                raise
            except ToolError as exc:
                if isinstance(exc.__cause__, ValidationError):  # the SDK's text is many lines and a URL
                    raise ToolError(f"Error executing tool {name}: {describe_validation(exc.__cause__)}") \
                        from exc.__cause__
                raise

    scope = tools.scope
    server = Server(
        SERVER_NAME,
        title="memlens memory",
        version=__version__,
        instructions=INSTRUCTIONS.format(user=scope.user_id, agent=scope.agent_id),
        log_level="WARNING",
    )

    async def run(tool: str, fn, *args: Any) -> Any:
        """fn(*args) on the pool; a deliberate engine error -> a one-line tool error for the model."""
        # The SDK puts "Error executing tool <name>: " in front of the message itself.
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, functools.partial(fn, *args))
        except BadInput as exc:
            raise ToolError(str(exc)) from None
        except DatabaseBusy as exc:
            log.warning("%s: %s", tool, exc)
            raise ToolError(BUSY) from None
        except MemlensError as exc:
            log.warning("%s failed: %s", tool, exc)
            raise ToolError(str(exc)) from None

    @server.tool()
    async def memory_add(
        role: Annotated[Role | None, Field(
            description="one turn: who wrote it; required with content, not allowed with messages")] = None,
        content: Annotated[str | None, Field(
            description="one turn: the message text; required with role, not allowed with messages",
            max_length=MAX_TURN_CHARS, **TEXT)] = None,
        name: Annotated[str | None, Field(description="one turn: the speaker's name (default: the role)",
                                          **TEXT)] = None,
        timestamp: Annotated[str | None, Field(
            description="one turn: ISO-8601 time or epoch seconds (default: now)")] = None,
        messages: Annotated[list[Turn] | None, Field(
            description="a batch of turns, oldest first; instead of role/content/name/timestamp, never with them",
            min_length=1)] = None,
        conversation: Annotated[str | None, Field(
            description="a label for the conversation these turns belong to")] = None,
    ) -> dict[str, Any]:
        """Remember chat turns: store them, extract facts about the user and reconcile them with
        what is already known (updates supersede older facts). Give one turn (role + content,
        optionally name and timestamp) or a batch (messages), not both. Returns the document id,
        the memory id of each stored turn, the facts inserted, reinforced and superseded, and
        the extraction summary. A failing extraction does not fail the call: the turns are kept
        and extraction is retried later."""
        return await run("memory_add", tools.add, role, content, name, timestamp, messages, conversation)

    @server.tool()
    async def memory_recall(
        query: Annotated[str, Field(description="what to remember, e.g. the user's question", **TEXT)],
        k: Annotated[int, Field(description="at most this many sources; a fact and the turn it was read from "
                                            "share one", ge=1, le=MAX_K)] = 10,
        as_of: Annotated[str | None, Field(
            description="answer as the memory stood at this ISO-8601 time (default: now)")] = None,
    ) -> dict[str, Any]:
        """Recall memories relevant to a query. Returns `context` (ready to paste into a prompt:
        one line per memory, each citing its memory id, source and date), the ranked `results`
        (memory id, score, text, fact with its validity and earlier versions, and the source
        span it is grounded in) and the `trace_id` of this retrieval. Recalled memories count
        as used (this strengthens them); the query text itself is not stored."""
        return await run("memory_recall", tools.recall, query, k, as_of)

    @server.tool()
    async def memory_profile() -> dict[str, Any]:
        """What is known about the user: `static` lines (stable facts) and `dynamic` lines (current
        state), each with the ids of the facts behind it, and `text` (the lines ready for a prompt)."""
        return await run("memory_profile", tools.profile)

    @server.tool()
    async def memory_forget(
        memory_id: Annotated[int, Field(description="the memory to forget (an id from memory_recall)",
                                        ge=1, le=MAX_ID)],
        reason: Annotated[str, Field(description="why, e.g. 'the user asked to forget it'", **TEXT)],
    ) -> dict[str, Any]:
        """Forget a memory: it is no longer recalled or shown in the profile. Soft and logged (the
        operator can review and undo it in memlens). Returns the curation log entry."""
        return await run("memory_forget", tools.forget, memory_id, reason)

    @server.tool()
    async def memory_explain(
        query: Annotated[str, Field(description="the query to explain", **TEXT)],
        memory_id: Annotated[int, Field(description="the memory that was (or was not) recalled", ge=1, le=MAX_ID)],
    ) -> dict[str, Any]:
        """Why was this memory recalled for this query, or why not? Returns a verdict (retrieved,
        below_cut, dropped, never_candidate), a one-line detail, and the per-channel ranks and
        score components. Read-only: changes no memory and stores nothing."""
        return await run("memory_explain", tools.explain, query, memory_id)

    @server.resource("memlens://profile", name="profile", mime_type="application/json",
                     description="the user's profile: static and dynamic lines with the facts behind them")
    async def profile_resource() -> str:
        return json.dumps(await run("profile", tools.profile), ensure_ascii=False)

    @server.resource("memlens://memory/{memory_id}", name="memory", mime_type="application/json",
                     description="one memory with its source spans, entities and embedding metadata")
    async def memory_resource(memory_id: str) -> str:
        try:
            record = await run("memory", tools.memory, memory_id)
        except ToolError as exc:
            raise ResourceNotFoundError(str(exc)) from None
        return json.dumps(record, ensure_ascii=False, default=str)

    return server


def serve(db_path: Path, scope: Scope, *, extract: str = "auto", embedder: str | None = None) -> int:
    """Open the engine, check the configuration, and serve MCP over stdio until stdin closes."""
    from engine.consolidate.runner import resolve_mode
    from engine.embed import make_embedder
    from engine.llm import LLMConfig

    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                            format="memlens mcp %(levelname)s %(name)s: %(message)s")
    # "--extract llm" without an endpoint fails now, before the file is touched, not on every call.
    resolve_mode(extract, LLMConfig.from_env())
    engine = MemoryEngine(db_path, embedder=make_embedder(embedder))
    try:
        _ = engine.embedder  # load the model before the first call (and fail here if it is missing)
        pool = open_workers(engine)
        settle_gc()  # what start-up made leaves the collector's full passes, as in the inspector
        try:
            server = build_server(MemoryTools(engine, scope, extract=extract), pool)
            log.info("serving %s for %s over stdio", engine.path, scope.as_dict())
            server.run("stdio")
        finally:
            pool.shutdown(wait=True)  # a call still running finishes before the engine closes
    finally:
        engine.close()
    return 0
