"""`memlens mcp` end to end: the official SDK's client over stdio against a real server process.

Each test spawns `python -m app.cli mcp` (hashing embedder, no model endpoint unless the test
starts the scripted one) and drives it with mcp.client.stdio.stdio_client + ClientSession.
stdio_client shuts the process down (close stdin, wait, then kill the process tree) when its
context exits, also on failure, so no server outlives its test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client

from engine.memory import MemoryEngine
from engine.scope import Scope

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"memory_add", "memory_recall", "memory_profile", "memory_forget", "memory_explain"}
ANA = Scope.default("ana", "travel-bot")
TIMEOUT = 120  # seconds for a whole scenario: a hung server fails the test instead of the suite

CONVERSATION = [
    {"role": "user", "content": "Hi! I'm Ana. I live in Berlin and I work as a nurse.",
     "timestamp": "2024-01-10T09:00:00Z"},
    {"role": "assistant", "content": "Nice to meet you, Ana. How can I help with your trip?",
     "timestamp": "2024-01-10T09:00:05Z"},
    {"role": "user", "content": "I love hiking and I am allergic to peanuts.", "timestamp": "2024-01-10T09:01:00Z"},
]


def server_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """What the server process gets on top of the SDK's safe defaults (HOME, PATH, ...)."""
    return {
        "PYTHONPATH": str(ROOT),
        "MEMLENS_EMBEDDER": "hashing",
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "MEMLENS_SETTINGS_FILE": str(tmp_path / "settings.conf"),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


@asynccontextmanager
async def mcp_session(tmp_path: Path, db: Path, *args: str, env: dict[str, str] | None = None
                      ) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "app.cli", "mcp", "--db", str(db), *args],
                                   env=server_env(tmp_path, **(env or {})), cwd=str(ROOT))
    # The server's stderr (its log) goes to a file the test can read afterwards.
    with open(tmp_path / "server-stderr.log", "a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def run(scenario, *args: Any) -> Any:
    async def bounded():
        with anyio.fail_after(TIMEOUT):
            return await scenario(*args)

    return anyio.run(bounded)


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool call that must succeed: its structured result."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {result.content}"
    assert result.structured_content is not None
    # The text content mirrors the structured result (clients that only read text see the same).
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def call_error(session: ClientSession, tool: str, **arguments: Any) -> str:
    """A tool call that must fail as a tool error: its one-line message."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    text = result.content[0].text
    assert "\n" not in text and "Traceback" not in text, text
    return text


def server_log(tmp_path: Path) -> str:
    path = tmp_path / "server-stderr.log"
    return path.read_text(encoding="utf-8") if path.exists() else ""


# -- discovery ------------------------------------------------------------------------------------
def test_lists_tools_and_resources(tmp_path):
    async def scenario():
        async with mcp_session(tmp_path, tmp_path / "m.db") as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            resources = [str(r.uri) for r in (await s.list_resources()).resources]
            templates = [t.uri_template for t in (await s.list_resource_templates()).resource_templates]
            return tools, resources, templates

    tools, resources, templates = run(scenario)
    assert set(tools) == TOOLS
    for name, required in {"memory_recall": ["query"], "memory_forget": ["memory_id", "reason"],
                           "memory_explain": ["query", "memory_id"]}.items():
        assert sorted(tools[name].input_schema.get("required", [])) == sorted(required)
        assert tools[name].description
    add_schema = tools["memory_add"].input_schema
    add = add_schema["properties"]
    assert {"role", "content", "name", "timestamp", "messages", "conversation"} <= set(add)
    # Every constraint the tools enforce is stated in the schema a client model sees.
    roles = ["user", "assistant", "system", "tool", "human", "ai", "model", "developer", "function"]
    assert add["role"]["anyOf"][0]["enum"] == roles
    assert add_schema["$defs"]["Turn"]["properties"]["role"]["enum"] == roles
    assert add["content"]["anyOf"][0]["maxLength"] == 4_000_000 and add["messages"]["anyOf"][0]["minItems"] == 1
    assert "not allowed with messages" in add["role"]["description"] and "never with them" in add["messages"]["description"]
    for tool in tools.values():  # model APIs refuse a tool whose schema composes at its root
        assert not {"oneOf", "anyOf", "allOf", "not", "if"} & set(tool.input_schema), tool.name
    k = tools["memory_recall"].input_schema["properties"]["k"]
    assert (k["default"], k["minimum"], k["maximum"]) == (10, 1, 100)
    for name in ("memory_forget", "memory_explain"):
        mid = tools[name].input_schema["properties"]["memory_id"]
        assert (mid["minimum"], mid["maximum"]) == (1, 2**63 - 1)
    for name, field in (("memory_recall", "query"), ("memory_forget", "reason"), ("memory_explain", "query")):
        assert tools[name].input_schema["properties"][field]["minLength"] == 1
    assert "memlens://profile" in resources
    assert "memlens://memory/{memory_id}" in templates
    assert "Traceback" not in server_log(tmp_path)


# -- the agent's round trip -----------------------------------------------------------------------
def test_add_recall_profile_explain_forget(tmp_path):
    db = tmp_path / "m.db"

    async def scenario():
        out: dict[str, Any] = {}
        async with mcp_session(tmp_path, db, "--user", "ana", "--agent", "travel-bot", "--extract", "heuristic") as s:
            out["batch"] = await call(s, "memory_add", messages=CONVERSATION, conversation="trip planning")
            out["one"] = await call(s, "memory_add", role="user", content="I moved to Lisbon last month.",
                                    timestamp="2024-06-01T10:00:00Z")
            out["recall"] = await call(s, "memory_recall", query="Where does Ana live?", k=5)
            out["profile"] = await call(s, "memory_profile")
            out["profile_resource"] = json.loads((await s.read_resource("memlens://profile")).contents[0].text)
            fact_mid = out["one"]["fact_memory_ids"][0]
            out["memory_resource"] = json.loads((await s.read_resource(f"memlens://memory/{fact_mid}")).contents[0].text)
            out["explain"] = await call(s, "memory_explain", query="Where does Ana live?", memory_id=fact_mid)
            out["forget"] = await call(s, "memory_forget", memory_id=fact_mid, reason="the user asked to forget it")
            out["after"] = await call(s, "memory_recall", query="Where does Ana live?", k=5)
            out["again"] = await call_error(s, "memory_forget", memory_id=fact_mid, reason="twice")
        return out

    out = run(scenario)
    # the server closed the engine on its own when stdin closed (not killed): no WAL left behind
    assert db.exists() and not db.with_name("m.db-wal").exists()
    batch, one = out["batch"], out["one"]
    # ids of what was created: a document, one episodic memory per turn, facts with their memories
    assert isinstance(batch["document_id"], int) and len(batch["memory_ids"]) == 3
    assert batch["fact_ids"] and len(batch["fact_memory_ids"]) == len(batch["fact_ids"])
    assert batch["extraction"]["windows"] == 1 and batch["extraction"]["failed_windows"] == 0
    assert one["document_id"] != batch["document_id"] and len(one["memory_ids"]) == 1
    # "moved to Lisbon" updates "lives in Berlin": the older fact is reported as superseded
    assert one["superseded_fact_ids"] and set(one["superseded_fact_ids"]) <= set(batch["fact_ids"])

    recall = out["recall"]
    assert isinstance(recall["trace_id"], int) and recall["trace_id"] > 0
    assert "Lisbon" in recall["context"] and recall["tokens"] > 0
    by_id = {r["memory_id"]: r for r in recall["results"]}
    top = by_id[one["fact_memory_ids"][0]]  # the current fact (the hashing embedder decides its rank)
    assert "Lisbon" in top["text"]
    assert top["fact"]["object"].lower().startswith("lisbon")
    assert [h["object"] for h in top["history"]] == ["Berlin"]
    assert top["source"]["document_id"] == one["document_id"]  # the citation: the turn it came from
    assert f"m{top['memory_id']}" in recall["context"]
    assert all("shares_place_with" in r for r in recall["results"])  # k counts sources: says which share one

    profile = out["profile"]
    assert any("Lisbon" in line["text"] and line["fact_ids"] for line in profile["static"] + profile["dynamic"])
    assert "Lisbon" in profile["text"] and "nurse" in profile["text"]
    assert out["profile_resource"] == profile
    assert out["memory_resource"]["memory"]["id"] == top["memory_id"]
    assert out["memory_resource"]["sources"][0]["text"] == "I moved to Lisbon last month."

    assert out["explain"]["verdict"] == "retrieved" and out["explain"]["memory_id"] == top["memory_id"]
    assert "trace_id" not in out["explain"]  # an agent's what-if is not stored
    assert out["forget"]["command"] == "forget" and out["forget"]["memory_id"] == top["memory_id"]
    assert top["memory_id"] not in [r["memory_id"] for r in out["after"]["results"]]
    assert "already forgotten" in out["again"]

    # What the recalls left in the file: usage reinforced, the query only as a hash.
    with MemoryEngine(db, create=False, llm=False) as engine:
        for r in recall["results"]:
            assert engine.store.memory(ANA, r["memory_id"]).access_count >= 1
        trace = engine.trace(recall["trace_id"], scope=ANA)
        assert trace["origin"] == "agent" and trace["query"] is None and trace["query_hash"]
        traces = engine.store.traces(ANA)
        assert len(traces) == 2  # the two recalls; explain stored nothing
        assert all(t["query_text"] is None for t in traces)
        log = engine.curation_log(ANA, limit=5)
        assert log[0]["command"] == "forget" and log[0]["actor"] == "agent"
    assert b"Where does Ana live" not in db.read_bytes()
    assert "Traceback" not in server_log(tmp_path)


# -- bad arguments --------------------------------------------------------------------------------
def test_bad_arguments_are_one_line_tool_errors(tmp_path):
    async def scenario():
        out: dict[str, Any] = {}
        async with mcp_session(tmp_path, tmp_path / "m.db", "--user", "ana", "--agent", "travel-bot") as s:
            added = await call(s, "memory_add", role="user", content="I live in Porto.")
            out["empty query"] = await call_error(s, "memory_recall", query="   ")
            out["k=0"] = await call_error(s, "memory_recall", query="Porto", k=0)
            out["k=1000"] = await call_error(s, "memory_recall", query="Porto", k=1000)
            out["k=ten"] = await call_error(s, "memory_recall", query="Porto", k="ten")
            out["forget 2**70"] = await call_error(s, "memory_forget", memory_id=2**70, reason="x")
            out["explain 0"] = await call_error(s, "memory_explain", query="Porto", memory_id=0)
            out["bad batch role"] = await call_error(s, "memory_add", messages=[{"role": "bob", "content": "x"}])
            out["empty batch"] = await call_error(s, "memory_add", messages=[])
            out["bad as_of"] = await call_error(s, "memory_recall", query="Porto", as_of="last tuesday")
            out["forget unknown"] = await call_error(s, "memory_forget", memory_id=999999, reason="x")
            out["forget no reason"] = await call_error(s, "memory_forget", memory_id=added["memory_ids"][0],
                                                       reason=" ")
            out["explain unknown"] = await call_error(s, "memory_explain", query="Porto", memory_id=999999)
            out["add nothing"] = await call_error(s, "memory_add")
            out["add both"] = await call_error(s, "memory_add", role="user", content="x",
                                               messages=[{"role": "user", "content": "y"}])
            out["bad role"] = await call_error(s, "memory_add", role="narrator", content="Once upon a time")
            out["bad timestamp"] = await call_error(s, "memory_add", role="user", content="hi", timestamp="soon")
            out["empty turn"] = await call_error(s, "memory_add", role="user", content="  ")
            with pytest.raises(MCPError) as missing:
                await s.read_resource("memlens://memory/999999")
            out["resource"] = missing.value.message
            # the server is still fine after all that
            out["ok"] = await call(s, "memory_recall", query="Porto")
        return out

    out = run(scenario)
    assert "query must not be empty or blank" in out["empty query"]
    assert "k must be at least 1, got 0" in out["k=0"]
    assert "k must be at most 100, got 1000" in out["k=1000"]
    assert "k must be an integer" in out["k=ten"]
    assert "as_of 'last tuesday' is not an ISO-8601 time" in out["bad as_of"]
    assert "no memory 999999" in out["forget unknown"] and "no memory 999999" in out["explain unknown"]
    assert f"memory_id must be at most {2**63 - 1}" in out["forget 2**70"]
    assert "memory_id must be at least 1, got 0" in out["explain 0"]
    assert "reason must not be empty" in out["forget no reason"]
    assert "give a turn" in out["add nothing"] and "not both" in out["add both"]
    assert "role must be one of 'user', 'assistant', 'system', 'tool', 'human', 'ai', 'model', 'developer' or " \
           "'function', got 'narrator'" in out["bad role"]
    assert "messages.0.role must be one of" in out["bad batch role"]
    assert "messages must not be empty" in out["empty batch"]
    assert "timestamp 'soon'" in out["bad timestamp"]
    assert "content must not be empty or blank" in out["empty turn"]
    assert "no memory 999999" in out["resource"]
    for case, text in out.items():
        if case in ("ok", "resource"):
            continue
        # One prefix (the SDK's), no pydantic documentation link, no exception class names.
        assert text.startswith("Error executing tool memory_") and text.count("Error executing tool") == 1, text
        assert text.count("memory_") == 1 or case in ("forget 2**70", "explain 0"), text
        assert "pydantic" not in text and "http" not in text and "Error:" not in text, text
    assert "Porto" in out["ok"]["context"]
    assert "Traceback" not in server_log(tmp_path)


# -- concurrency ----------------------------------------------------------------------------------
def test_concurrent_calls_on_one_session(tmp_path):
    """The client may send requests without waiting; the server runs them on its worker threads."""
    async def scenario():
        adds: list[dict] = []
        recalls: list[dict] = []
        async with mcp_session(tmp_path, tmp_path / "m.db", "--user", "ana") as s:
            await call(s, "memory_add", role="user", content="I keep a bonsai called Kenji.")

            async def add(i: int) -> None:
                adds.append(await call(s, "memory_add", role="user", content=f"Note {i}: my locker code is {i}{i}7."))

            async def recall(i: int) -> None:
                recalls.append(await call(s, "memory_recall", query=f"bonsai {i}"))

            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(add, i)
                    tg.start_soon(recall, i)
            final = await call(s, "memory_recall", query="locker code", k=20)
        return adds, recalls, final

    adds, recalls, final = run(scenario)
    ids = [mid for a in adds for mid in a["memory_ids"]]
    assert len(adds) == 8 and len(set(ids)) == 8
    assert len(recalls) == 8 and all("Kenji" in r["context"] for r in recalls)
    assert len({r["trace_id"] for r in recalls}) == 8
    assert set(ids) <= {r["memory_id"] for r in final["results"]}


# -- scope ----------------------------------------------------------------------------------------
def test_a_server_only_sees_its_own_user(tmp_path):
    db = tmp_path / "m.db"

    async def scenario():
        async with mcp_session(tmp_path, db, "--user", "ana", "--agent", "travel-bot") as s:
            ana = await call(s, "memory_add", role="user", content="My passport number ends in 4471 and I live in Oslo.")
        async with mcp_session(tmp_path, db, "--user", "bob", "--agent", "travel-bot") as s:
            bob_recall = await call(s, "memory_recall", query="Oslo passport")
            bob_profile = await call(s, "memory_profile")
            forget = await call_error(s, "memory_forget", memory_id=ana["memory_ids"][0], reason="not yours")
            explain = await call_error(s, "memory_explain", query="Oslo", memory_id=ana["memory_ids"][0])
            with pytest.raises(MCPError):
                await s.read_resource(f"memlens://memory/{ana['memory_ids'][0]}")
            await call(s, "memory_add", role="user", content="I live in Lima.")
            bob_own = await call(s, "memory_recall", query="Where do I live?")
        async with mcp_session(tmp_path, db, "--user", "ana", "--agent", "travel-bot") as s:
            ana_recall = await call(s, "memory_recall", query="Where do I live?")
        return ana, bob_recall, bob_profile, forget, explain, bob_own, ana_recall

    ana, bob_recall, bob_profile, forget, explain, bob_own, ana_recall = run(scenario)
    assert bob_recall["results"] == [] and "Oslo" not in bob_recall["context"]
    assert bob_profile["static"] == [] and bob_profile["dynamic"] == []
    assert "no memory" in forget and "no memory" in explain
    assert "Lima" in bob_own["context"] and "Oslo" not in bob_own["context"]
    assert "Oslo" in ana_recall["context"] and "Lima" not in ana_recall["context"]


# -- extraction failures --------------------------------------------------------------------------
def test_failing_extraction_keeps_the_turn(tmp_path, openai_server):
    openai_server.chat_responder = lambda request: "this is not JSON {"  # every extraction call fails
    env = {"MEMLENS_LLM_BASE_URL": openai_server.base_url, "MEMLENS_LLM_MODEL": "test-model"}
    db = tmp_path / "m.db"

    async def scenario():
        async with mcp_session(tmp_path, db, "--user", "ana", "--extract", "llm", env=env) as s:
            first = await call(s, "memory_add", role="user", content="I live in Madrid and I teach chemistry.")
            second = await call(s, "memory_add", role="user", content="I have two cats.")
            recall = await call(s, "memory_recall", query="Madrid chemistry")
        return first, second, recall

    first, second, recall = run(scenario)
    assert len(first["memory_ids"]) == 1 and first["fact_ids"] == []
    assert first["extraction"]["failed_windows"] == 1 and first["extraction"]["errors"]
    # the failed window stayed queued: the next call retried it along with its own
    assert second["extraction"]["windows"] == 2 and second["extraction"]["failed_windows"] == 2
    assert first["memory_ids"][0] in [r["memory_id"] for r in recall["results"]]
    assert len([r for r in openai_server.requests if r.path.endswith("/chat/completions")]) == 3
    assert "extraction failed" in server_log(tmp_path)  # logged on stderr, not on the protocol stream


# -- start-up errors ------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["not a database", "llm without endpoint"])
def test_startup_errors_exit_2_with_one_line(tmp_path, case):
    db = tmp_path / "m.db"
    args = ["--db", str(db)]
    if case == "not a database":
        db.write_text("hello, I am a text file\n", encoding="utf-8")
    else:
        args += ["--extract", "llm"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLENS_LLM", "OPENAI_"))}
    env.update(server_env(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "app.cli", "mcp", *args], cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memlens: "), proc.stderr
    if case == "not a database":
        assert db.read_text(encoding="utf-8") == "hello, I am a text file\n"
    else:
        assert "needs an endpoint" in lines[0] and not db.exists()


# -- a database another process holds -----------------------------------------------------------
def test_a_held_write_lock_is_busy_retry_and_reads_still_answer(tmp_path, monkeypatch):
    """In process (the SDK's server object, the real tool code): another process holds the lock."""
    from mcp.server.mcpserver.exceptions import ToolError

    import engine.store.db as db_module
    from app.mcp_server import MemoryTools, build_server, open_workers
    from engine.embed.hashing import HashingEmbedder
    from tests.fixtures.lock_holder import hold_write_lock

    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_MS", 300)
    db = tmp_path / "m.db"
    engine = MemoryEngine(db, embedder=HashingEmbedder(), llm=None)
    pool = open_workers(engine, 2)
    try:
        server = build_server(MemoryTools(engine, ANA, extract="heuristic"), pool)

        async def scenario():
            await server.call_tool("memory_add", {"role": "user", "content": "I live in Porto."})
            with hold_write_lock(db):
                with pytest.raises(ToolError) as busy:
                    await server.call_tool("memory_add", {"role": "user", "content": "I moved to Lisbon."})
                profile = await server.call_tool("memory_profile", {})
            return str(busy.value), profile

        message, profile = run(scenario)
        assert message.startswith("Error executing tool memory_add: busy, retry")
        assert "\n" not in message
        assert "Porto" in json.dumps(profile.structured_content)
    finally:
        pool.shutdown(wait=True)
        engine.close()
