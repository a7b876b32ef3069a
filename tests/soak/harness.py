"""The soak test: writers and readers on one database file, writers killed at random.

    python -m tests.soak.harness --seconds 300 [--readers 2] [--json]     (make soak)

For `seconds`, on one database:
- an MCP writer: `memlens mcp` driven by the official SDK's client over stdio, sending
  memory_add calls one after another (each a turn with a unique token);
- a CLI writer: `memlens ingest DIR` in a loop over a directory that gains a file each round
  (and holds a long note written in several transactions, a binary and an unreadable JSON file,
  which must be skipped and failed alone); now and then a memory_add carries a long turn;
- readers: processes polling as the inspector does (tests/soak/reader.py) and `memlens status`
  runs, each counting every refusal;
- chaos: every few seconds one writer process gets SIGKILL (the MCP server is restarted, the
  CLI loop goes on).

Afterwards: `PRAGMA integrity_check` is ok; every memory_add the server acknowledged and every
file of an ingest that finished is in the database, whole; no reader was ever refused. A call
or an ingest cut by a kill may be there or not, but never in part.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[2]
MCP_SCOPE = ("ana", "bot")
CLI_SCOPE = ("ana", "files")
CALL_TIMEOUT_S = 90
BIG_TURN_EVERY = 40  # every 40th memory_add carries BIG_TURN_CHARS (the old code held the lock for seconds)
BIG_TURN_CHARS = 300_000
BIG_FILE_PARAGRAPHS = 2500  # the inbox's long note: more chunks than one write transaction takes


@dataclass
class Soak:
    work: Path
    seconds: float
    readers: int = 2
    kill_every: tuple[float, float] = (2.0, 6.0)
    seed: int = 18
    db: Path = field(init=False)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[str, list[int]] = field(default_factory=dict)  # token -> memory ids the server returned
    cut_calls: int = 0
    mcp_errors: list[str] = field(default_factory=list)
    mcp_pid: int | None = None
    ingest: subprocess.Popen | None = None
    ingests: dict[str, int] = field(default_factory=dict)  # outcome -> count
    ingest_errors: list[str] = field(default_factory=list)
    committed_files: set[str] = field(default_factory=set)  # tokens of files an ingest finished
    kills: dict[str, int] = field(default_factory=lambda: {"mcp": 0, "ingest": 0})
    kill_times: list[float] = field(default_factory=list)
    wal_max: int = 0
    status_runs: int = 0
    status_refusals: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.db = self.work / "soak.db"
        self.files = self.work / "inbox"
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMLENS_EMBEDDER": "hashing",
                    "XDG_DATA_HOME": str(self.work / "xdg"), "MEMLENS_SETTINGS_FILE": str(self.work / "s.conf")}
        self.rng = random.Random(self.seed)

    # -- the MCP writer ---------------------------------------------------------------------------
    async def mcp_writer(self) -> None:
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        pidfile = self.work / "mcp.pid"
        # The shell writes its pid and execs the server, so the pid is the server's (for SIGKILL).
        command = (f'echo $$ > "{pidfile}"; exec "{sys.executable}" -m app.cli mcp --db "{self.db}" '
                   f"--user {MCP_SCOPE[0]} --agent {MCP_SCOPE[1]} --extract heuristic")
        params = StdioServerParameters(command="/bin/sh", args=["-c", command], env=self.env, cwd=str(ROOT))
        n = 0
        with open(self.work / "mcp-stderr.log", "a", encoding="utf-8") as errlog:
            while not self.stop.is_set():
                pidfile.unlink(missing_ok=True)
                try:
                    async with stdio_client(params, errlog=errlog) as (read, write):
                        async with ClientSession(read, write) as session:
                            with anyio.fail_after(CALL_TIMEOUT_S):
                                await session.initialize()
                            self.mcp_pid = int(pidfile.read_text())
                            while not self.stop.is_set():
                                n += 1
                                token = uuid.uuid4().hex[:12]
                                content = (f"Soak turn {n} token {token}: I visited city number {n} "
                                           f"with Ana Lima and I love hiking.")
                                if n % BIG_TURN_EVERY == 0:  # now and then a long one (a pasted log)
                                    content += " Then Bob Smith walked along the river." * (BIG_TURN_CHARS // 38)
                                with anyio.fail_after(CALL_TIMEOUT_S):
                                    result = await session.call_tool("memory_add", {"role": "user",
                                                                                    "content": content})
                                text = result.content[0].text if result.content else ""
                                if result.is_error:
                                    if "busy, retry" not in text:
                                        self.mcp_errors.append(text[:300])
                                    continue
                                with self.lock:
                                    self.acked[token] = result.structured_content["memory_ids"]
                except Exception as exc:  # noqa: BLE001 - a killed server cuts the session
                    if not self.stop.is_set() and self.mcp_pid is None:
                        self.mcp_errors.append(f"session: {type(exc).__name__}: {exc}"[:300])
                    self.cut_calls += 1
                finally:
                    self.mcp_pid = None

    # -- the CLI writer ---------------------------------------------------------------------------
    def prepare_inbox(self) -> None:
        self.files.mkdir()
        (self.files / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(512))
        (self.files / "settings.json").write_text('{"theme": "dark"}', encoding="utf-8")
        token = uuid.uuid4().hex[:12]
        body = "\n\n".join(f"Entry {p} ({token}): I walked with Ana Lima to the harbour in Lisbon."
                            for p in range(BIG_FILE_PARAGRAPHS))
        (self.files / f"note-0000-{token}.md").write_text(f"# A long log\n\n{body}\n", encoding="utf-8")

    def add_file(self, i: int) -> str:
        token = uuid.uuid4().hex[:12]
        body = "\n\n".join(f"Paragraph {p} of note {i} ({token}): Ana Lima met Bob in Lisbon on day {p}."
                           for p in range(self.rng.randint(5, 60)))
        (self.files / f"note-{i:04d}-{token}.md").write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")
        return token

    def cli_writer(self) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            self.add_file(i)
            tokens = {p.stem.rsplit("-", 1)[1] for p in self.files.glob("note-*.md")}
            cmd = [sys.executable, "-m", "app.cli", "ingest", str(self.files), "--db", str(self.db),
                   "--user", CLI_SCOPE[0], "--agent", CLI_SCOPE[1], "--extract", "heuristic", "--json"]
            with self.lock:
                self.ingest = subprocess.Popen(cmd, env=self.env, cwd=ROOT, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True)
            out, err = self.ingest.communicate()
            code = self.ingest.returncode
            with self.lock:
                self.ingest = None
            outcome = {0: "ok", 3: "some failed", 75: "busy", -signal.SIGKILL: "killed"}.get(code, f"exit {code}")
            self.ingests[outcome] = self.ingests.get(outcome, 0) + 1
            if outcome == "some failed":
                files = {Path(f["path"]).name: f for f in json.loads(out)["files"]}
                bad = [n for n, f in files.items() if (f["status"] == "failed") != (n == "settings.json")
                       or (n == "photo.png") != (f["status"] == "skipped")]
                if bad:
                    self.ingest_errors.append(f"unexpected file outcomes: {bad}")
                self.committed_files |= tokens
            elif outcome not in ("busy", "killed"):
                self.ingest_errors.append(f"{outcome}: {err.strip()[-300:]}")

    # -- readers and chaos ------------------------------------------------------------------------
    def status_reader(self) -> None:
        while not self.stop.is_set():
            if self.db.exists():
                proc = subprocess.run([sys.executable, "-m", "app.cli", "status", "--db", str(self.db), "--json"],
                                      env=self.env, cwd=ROOT, capture_output=True, text=True)
                self.status_runs += 1
                if proc.returncode != 0:
                    self.status_refusals.append(f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
            self.stop.wait(0.5)

    def wal_watch(self) -> None:
        wal = Path(f"{self.db}-wal")
        while not self.stop.wait(0.2):
            try:
                self.wal_max = max(self.wal_max, wal.stat().st_size)
            except OSError:
                pass

    def chaos(self) -> None:
        while not self.stop.wait(self.rng.uniform(*self.kill_every)):
            target = self.rng.choice(("mcp", "ingest"))
            with self.lock:
                pid = self.mcp_pid if target == "mcp" else (self.ingest.pid if self.ingest else None)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGKILL)
                self.kills[target] += 1
                self.kill_times.append(time.time())
            except ProcessLookupError:
                pass

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self.prepare_inbox()
        stopfile = self.work / "stop"
        readers = [subprocess.Popen([sys.executable, "-m", "tests.soak.reader", str(self.db), str(stopfile),
                                     str(self.work / f"reader-{r}.json")], env=self.env, cwd=ROOT)
                   for r in range(self.readers)]
        threads = [threading.Thread(target=t, daemon=True) for t in (self.cli_writer, self.status_reader, self.chaos,
                                                                 self.wal_watch)]
        for t in threads:
            t.start()
        started = time.monotonic()

        async def writer_for_a_while() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.mcp_writer)
                await anyio.sleep(self.seconds)
                self.stop.set()
                with self.lock:
                    if self.mcp_pid:
                        os.kill(self.mcp_pid, signal.SIGKILL)  # end the session the hard way, once more
                tg.cancel_scope.deadline = anyio.current_time() + CALL_TIMEOUT_S

        anyio.run(writer_for_a_while)
        for t in threads:
            t.join(timeout=CALL_TIMEOUT_S * 2)
        stopfile.touch()
        reader_stats = []
        for r, proc in enumerate(readers):
            proc.wait(timeout=120)
            path = self.work / f"reader-{r}.json"
            reader_stats.append(json.loads(path.read_text()) if path.exists() else {"refusals": ["no summary"]})
        return self.verify(time.monotonic() - started, reader_stats)

    def verify(self, seconds: float, readers: list[dict]) -> dict[str, Any]:
        from engine.embed.hashing import HashingEmbedder
        from engine.memory import MemoryEngine
        from engine.scope import Scope

        # One clean ingest finishes what a killed one left: every file of the inbox is then there.
        final = subprocess.run([sys.executable, "-m", "app.cli", "ingest", str(self.files), "--db", str(self.db),
                                "--user", CLI_SCOPE[0], "--agent", CLI_SCOPE[1], "--json"],
                               env=self.env, cwd=ROOT, capture_output=True, text=True)
        problems: list[str] = []
        if final.returncode != 3:
            problems.append(f"final ingest exit {final.returncode}: {final.stderr.strip()[-300:]}")
        mcp, cli = Scope.default(*MCP_SCOPE), Scope.default(*CLI_SCOPE)
        with MemoryEngine(self.db, embedder=HashingEmbedder(), llm=None, create=False) as engine:
            st = engine.store
            integrity = st.db.integrity_check()
            for token, ids in self.acked.items():
                texts = [m.text if (m := st.memory(mcp, mid)) else None for mid in ids]
                if not texts or any(t is None or token not in t for t in texts):
                    problems.append(f"acknowledged memory_add {token} is missing (memories {ids})")
            docs = engine.export(cli)["documents"]
            stored = {d["uri"].rsplit("-", 1)[1].removesuffix(".md") for d in docs
                      if not d["replaced_at"] and d["uri"] and Path(d["uri"]).name.startswith("note-")}
            on_disk = {p.stem.rsplit("-", 1)[1] for p in self.files.glob("note-*.md")}
            if self.committed_files - stored:
                problems.append(f"files of finished ingests missing: {sorted(self.committed_files - stored)[:5]}")
            if on_disk - stored:
                problems.append(f"files missing after the final ingest: {sorted(on_disk - stored)[:5]}")
            for scope in (mcp, cli):
                for d in engine.export(scope)["documents"]:
                    if d["content_hash"].startswith("partial:"):
                        problems.append(f"document {d['id']} left partial")
                    chunks = st.chunks_of(scope, d["id"])
                    if not d["replaced_at"] and (not chunks or any(not st.memories_of_chunk(scope, c.id)
                                                                   for c in chunks)):
                        problems.append(f"document {d['id']} is incomplete")
            counts = {"mcp_memories": engine.counts(mcp)["memories"], "file_documents": len(stored)}
        refusals = [r for s in readers for r in s["refusals"]] + self.status_refusals
        problems += [f"reader refused: {r}" for r in refusals[:10]]
        problems += [f"memory_add failed: {e}" for e in self.mcp_errors[:10]]
        problems += [f"ingest: {e}" for e in self.ingest_errors[:10]]
        if integrity != "ok":
            problems.append(f"integrity_check: {integrity}")
        return {
            "seconds": round(seconds, 1), "integrity": integrity, "problems": problems,
            "memory_add_acknowledged": len(self.acked), "memory_add_cut_by_kill": self.cut_calls,
            "ingest_runs": self.ingests, "files_committed": len(self.committed_files), "kills": self.kills,
            "reader_rounds": sum(s.get("rounds", 0) for s in readers),
            "reader_opens": sum(s.get("opens", 0) for s in readers),
            "reader_recalls": sum(s.get("recalls", 0) for s in readers),
            "reader_max_ms": {k: max(s.get("max_ms", {}).get(k, 0) for s in readers)
                              for k in sorted({k for s in readers for k in s.get("max_ms", {})})},
            "status_runs": self.status_runs, "reader_refusals": len(refusals), **counts,
            # reads slower than a second: (operation, ms, seconds since the last SIGKILL before it)
            "reader_slow": [(name, ms, round(at - max((k for k in self.kill_times if k <= at), default=at), 1),
                             *stages) for s in readers for name, ms, at, *stages in s.get("slow", [])][:20],
            "wal_bytes_max": self.wal_max,
            "wal_bytes_end": Path(f"{self.db}-wal").stat().st_size if Path(f"{self.db}-wal").exists() else 0,
        }


def run_soak(seconds: float, work: Path | None = None, **kwargs: Any) -> dict[str, Any]:
    if work is not None:
        return Soak(Path(work), seconds, **kwargs).run()
    with tempfile.TemporaryDirectory(prefix="memlens-soak-") as tmp:
        return Soak(Path(tmp), seconds, **kwargs).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak.harness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    out = run_soak(args.seconds, readers=args.readers)
    if args.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")
    return 1 if out["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
