"""`make check-llm` (after tests/llm_check/check_llm.sh has installed the server and the model): memlens
against a real llama.cpp server with a small model, every LLM stage, and a report of what each did.

What it checks is the protocol and the failure handling, not the quality of the answers: a
135M-parameter model extracts poorly and answers worse. It starts llama-cpp-python's
OpenAI-compatible server on 127.0.0.1, first with Gemma 3 270M (the pretrained model, whose GGUF
has no chat template: llama.cpp falls back to llama-2's) to record what such a server does with
memlens' calls, then with SmolLM2-135M-Instruct (its own template) for the stages:

1. extraction: `memlens ingest resources/demo/chats --extract llm` (the CLI, as a user runs it);
2. recall: one query with the planner and the reranker forced on (weak_top_score 2.0, so the
   cheap result always counts as weak), with the default recipe's 8 s timeout for them, then the
   same query allowing them 120 s (a CPU server shared with other work is slow);
3. `memlens bench locomo --answer` on the first few LoCoMo dev questions (answer and judge).

For each stage the report gives the requests made (from llm_calls: every request memlens sent
is a row, a refused mode or a truncated first answer included), how many were answered, the
failures by kind, the fallbacks taken (a structured-output mode refused, a truncated answer asked
again, a stage's deterministic fallback), the structured-output modes, tokens and latency.

It exits 0 when the protocol held: every stage made its requests and every one is in llm_calls
with a typed outcome; every reply accepted re-validates against its schema; no stage failed on
transport or HTTP errors alone (connection, unknown model, HTTP status); the planner and the
reranker ran; every bench question has an item. Poor answers never fail it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.bench.runner import BENCH_SCOPE  # noqa: E402
from engine.llm import ERRORS, LLMClient, LLMConfig, describe_failure, parse_reply  # noqa: E402
from engine.llm_check import check_endpoint  # noqa: E402
from engine.memory import MemoryEngine  # noqa: E402
from engine.scope import Scope  # noqa: E402

MODEL_ALIAS = "smollm2-135m-instruct"
PROBE_ALIAS = "gemma3-270m"
# The stages' per-call timeout (MEMLENS_LLM_TIMEOUT): a 135M model on one shared core writes
# ~10 tokens/s, so a full extraction answer (1024 tokens) takes minutes, not the default 60 s.
STAGE_TIMEOUT_S = 300
DEMO_CHATS = ROOT / "resources" / "demo" / "chats"
RECALL_QUERY = "What did Ana decide about the trip, and who is coming with her?"
TRANSPORT = ("connection", "unknown_model")  # with http_*: the protocol itself failed
KNOWN = {e for e in ERRORS if e != "http_<status>"}


def log(msg: str) -> None:
    print(f"check-llm: {msg}", file=sys.stderr, flush=True)


# -- the server ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """llama-cpp-python's OpenAI-compatible server as a child process on 127.0.0.1."""

    def __init__(self, python: str, model_file: str, alias: str, log_path: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        cmd = [python, "-m", "llama_cpp.server", "--model", model_file, "--model_alias", alias,
               "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "8192",
               # one thread: on two cores shared with other work, ggml's two OpenMP threads spin
               # on each other and generation was 7-14x slower (1.2 against 8-16 tokens/s)
               "--n_threads", "1", "--n_threads_batch", "1"]
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.started = time.perf_counter()

    def wait_ready(self, timeout: float = 180.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"check-llm: the server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as r:  # noqa: S310 - loopback
                    return [m["id"] for m in json.load(r)["data"]]
            except OSError:
                time.sleep(0.5)
        raise SystemExit(f"check-llm: the server did not answer /v1/models within {timeout:g} s")

    def alive(self) -> None:
        if self.proc.poll() is not None:
            raise SystemExit(f"check-llm: the server died (exit status {self.proc.returncode}); see {self.log_path}")

    def stop(self) -> None:
        """Terminate it (a generation a client gave up on may still run: then kill it)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def raw_chat(base_url: str, body: dict) -> tuple[int, str]:
    """One request straight to the server (no memlens client): what it really sends back."""
    req = urllib.request.Request(base_url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:  # noqa: S310 - loopback
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _error_message(body: str) -> str:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body


# -- the stages ------------------------------------------------------------------------------------


def memlens(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "memlens"), *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=3600)
    return proc.returncode, proc.stdout, proc.stderr


def calls_of(db: Path, scope: Scope) -> list[dict]:
    with MemoryEngine(db, create=False, llm=False, background_reembed=False) as eng:
        return sorted(eng.store.llm_calls(scope, limit=100_000), key=lambda c: c["id"])


def mode_of(row: dict) -> str:
    request = json.loads(row["request"]) if row.get("request") else {}
    fmt = request.get("response_format")
    return fmt["type"] if fmt else "prompt"


def schema_of(row: dict) -> dict | None:
    request = json.loads(row["request"])
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["schema"]
    if fmt.get("type") == "json_object":
        return fmt["schema"]
    text = request["messages"][-1]["content"]
    return json.loads(text.rsplit("JSON schema:\n", 1)[1])


def summarise(name: str, rows: list[dict], fallbacks: list[str], outcome: list[str]) -> dict:
    kinds = Counter((r["error"] or "").split(":")[0] for r in rows if not r["ok"])
    lat = [r["latency_ms"] for r in rows if r["latency_ms"] is not None]
    retried = [r for r in rows if r["error"] and "asking again" in r["error"]]
    modes = Counter(mode_of(r) for r in rows)
    return {"stage": name, "requests": len(rows), "calls": len(rows) - len(retried),
            "answered": sum(1 for r in rows if r["ok"]), "failures": dict(kinds.most_common()),
            "fallbacks": [f"{r['error'].split('; ')[-1]}" for r in retried] + fallbacks,
            "modes": dict(modes), "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in rows),
            "completion_tokens": sum(r["completion_tokens"] or 0 for r in rows),
            "latency_ms": {"p50": round(statistics.median(lat)) if lat else None,
                           "max": round(max(lat)) if lat else None, "total": round(sum(lat))},
            "outcome": outcome}


def protocol_problems(s: dict, rows: list[dict]) -> list[str]:
    out = []
    if not rows:
        out.append(f"{s['stage']}: no request was recorded in llm_calls")
    for r in rows:
        kind = (r["error"] or "").split(":")[0]
        if not r["ok"] and kind not in KNOWN and not kind.startswith("http_"):
            out.append(f"{s['stage']}: llm_calls {r['id']} has an untyped error {r['error']!r}")
        if r["ok"]:
            _, error, detail = parse_reply(r["response"] or "", schema_of(r))
            if error:
                out.append(f"{s['stage']}: llm_calls {r['id']} was accepted but does not validate: {detail}")
    transport = [r for r in rows if not r["ok"] and ((r["error"] or "").split(":")[0] in TRANSPORT
                                                     or (r["error"] or "").startswith("http_"))]
    if rows and len(transport) == len(rows):
        out.append(f"{s['stage']}: every request failed on the protocol: {rows[-1]['error']}")
    return out


def recall_stage(db: Path, scope: Scope, base_url: str, llm_timeout: float | None, label: str,
                 seen: int) -> tuple[dict, list[dict], list[str]]:
    t0 = time.perf_counter()
    overrides = {"weak_top_score": 2.0} | ({} if llm_timeout is None else {"llm_timeout_s": llm_timeout})
    with LLMClient(LLMConfig(base_url=base_url, model=MODEL_ALIAS, timeout=STAGE_TIMEOUT_S)) as client, \
            MemoryEngine(db, create=False, llm=client, background_reembed=False) as eng:
        res = eng.recall(RECALL_QUERY, scope=scope, **overrides)
    trace = res.trace
    rows = [r for r in calls_of(db, scope) if r["id"] > seen]
    stages = {st["name"]: st for st in trace.stages}
    fallbacks = [f"{n}: {stages[n]['fallback']}" for n in ("plan", "rerank") if stages.get(n, {}).get("fallback")]
    outcome, problems = [], []
    for name, part in (("planner", trace.plan), ("reranker", trace.rerank)):
        if part is None:
            outcome.append(f"{name}: did not run")
            problems.append(f"recall: the {name} did not run")
        elif part.get("ok"):
            extra = (f"{len(part.get('variants', []))} variants, intent {part.get('intent')}" if name == "planner"
                     else f"{len(part.get('order', []))} of {len(part.get('candidates', []))} ranked, "
                          f"{len(part.get('ignored_ids', []))} invented ids ignored")
            outcome.append(f"{name}: ok in {part['latency_ms'] / 1000:.1f} s ({part.get('mode')}): {extra}")
        else:
            outcome.append(f"{name}: {describe_failure(part.get('error'), part.get('detail'))}")
    outcome.append(f"{len(res.results)} results; {time.perf_counter() - t0:.0f} s wall")
    return summarise(f"recall, planner + reranker with {label}", rows, fallbacks, outcome), rows, problems


def main() -> int:
    # a stop (make interrupted, CI's end) still stops the server: finally blocks run
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server-python", required=True)
    ap.add_argument("--model-file", required=True, help="the instruct model the stages run on")
    ap.add_argument("--probe-model-file", required=True, help="the model only probed (Gemma 3 270M base)")
    ap.add_argument("--questions", type=int, default=4, help="LoCoMo dev questions for bench --answer")
    ap.add_argument("--data", default=os.environ.get("MEMLENS_SHARED_DATA", str(ROOT.parent / "shared" / "data")),
                    help="the shared dev data folder (with locomo-dev.json)")
    ap.add_argument("--keep", default=None, help="keep the databases and server logs in this folder")
    args = ap.parse_args()
    locomo = Path(args.data) / "locomo-dev.json"
    if not locomo.is_file():
        raise SystemExit(f"check-llm: {locomo}: no such file (pass --data or set MEMLENS_SHARED_DATA)")
    work = Path(args.keep or tempfile.mkdtemp(prefix="memlens-check-llm-"))
    work.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    report: dict = {"model": f"{Path(args.model_file).name} as {MODEL_ALIAS!r}", "work": str(work), "stages": [],
                    "load": [os.getloadavg()[0]]}

    # 0. the model issue 22 tried, and what its server does with memlens' calls
    log(f"probing {Path(args.probe_model_file).name} ...")
    plain = Server(args.server_python, args.probe_model_file, PROBE_ALIAS, work / "server-probe.log")
    try:
        listed = plain.wait_ready()
        fallback_template = "Using fallback chat format" in plain.log_path.read_text(errors="replace")
        status, body = raw_chat(plain.base_url, {"model": PROBE_ALIAS, "max_tokens": 16,
                                                 "messages": [{"role": "user", "content": "Say hello."}]})
        text = json.loads(body)["choices"][0]["message"]["content"] if status == 200 else ""
        status_s, body_s = raw_chat(plain.base_url, {"model": PROBE_ALIAS, "messages": [{"role": "user", "content": "x"}],
                                                     "response_format": {"type": "json_schema", "json_schema": {
                                                         "name": "x", "schema": {"type": "object"}}}})
        status_u, _ = raw_chat(plain.base_url, {"model": "no-such-model", "max_tokens": 1,
                                                "messages": [{"role": "user", "content": "Say hello."}]})
        with LLMClient(LLMConfig(base_url=plain.base_url, model=PROBE_ALIAS, max_retries=0)) as client:
            r = client.complete_json("ANSWER", [{"role": "user", "content": "Where does Ana live? She lives in Lisbon."}],
                                     "answer", {"type": "object", "additionalProperties": False, "required": ["answer"],
                                                "properties": {"answer": {"type": "string"}}}, max_tokens=24)
        plain.alive()
    finally:
        plain.stop()
    report["server"] = {
        "model probed": f"{Path(args.probe_model_file).name} as {PROBE_ALIAS!r} (pretrained, not instruction-tuned)",
        "/v1/models": listed,
        "chat template": "none in the GGUF: llama-2 fallback" if fallback_template else "the model's own",
        "plain chat": "an empty message" if status == 200 and not text.strip() else f"HTTP {status}: {text[:60]!r}",
        "response_format json_schema": f"HTTP {status_s}" + "".join(
            f": {m.group(1)}" for m in [re.search(r"'msg': \"([^\"]+)\"", _error_message(body_s))] if m),
        "an unknown model name": f"HTTP {status_u}" + (": served by the one model anyway" if status_u == 200 else ""),
        "memlens' client": f"{'ok' if r.ok else describe_failure(r.error, r.detail)} after {r.requests} requests "
                           f"({'; '.join(r.fallbacks) or 'no fallback'})",
    }

    # 1-3. the stages, on the instruct model
    log(f"server with {Path(args.model_file).name} ...")
    server = Server(args.server_python, args.model_file, MODEL_ALIAS, work / "server.log")
    problems: list[str] = []
    try:
        server.wait_ready()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMLENS_"))}
        env.update({"MEMLENS_LLM_BASE_URL": server.base_url, "MEMLENS_LLM_MODEL": MODEL_ALIAS,
                    "MEMLENS_LLM_TIMEOUT": str(STAGE_TIMEOUT_S), "QT_QPA_PLATFORM": "offscreen"})
        log("Test connection ...")
        probe = check_endpoint(LLMConfig(base_url=server.base_url, model=MODEL_ALIAS))
        report["server"]["Test connection (instruct model)"] = [
            f"{c['task']}: {'ok' if c['ok'] else c['line']} ({c['mode']}, {c['latency_ms'] / 1000:.1f} s)"
            for c in probe["calls"]]

        db = work / "demo.db"
        scope = Scope.default(None, None)
        log("1/3 extraction: memlens ingest resources/demo/chats --extract llm ...")
        t0 = time.perf_counter()
        code, out, err = memlens(["ingest", str(DEMO_CHATS), "--extract", "llm", "--db", str(db), "--json"], env)
        if code != 0:
            raise SystemExit(f"check-llm: memlens ingest failed ({code}): {err.strip()[-500:]}")
        server.alive()
        ex = json.loads(out)["extraction"]
        rows = calls_of(db, scope)
        s = summarise("extraction", rows, [f"{ex['failed_windows']} windows left queued for the next run"]
                      if ex["failed_windows"] else [],
                      [f"{ex['windows']} windows, {ex['failed_windows']} failed, {ex['facts_inserted']} facts stored, "
                       f"{ex['candidates_skipped']} candidates skipped by reconciliation",
                       f"{time.perf_counter() - t0:.0f} s wall"] + ([ex["stopped"]] if ex.get("stopped") else []))
        report["stages"].append(s)
        problems += protocol_problems(s, rows)
        seen = rows[-1]["id"] if rows else 0

        for llm_timeout in (None, 120.0):
            label = "the recipe's 8 s" if llm_timeout is None else f"{llm_timeout:g} s"
            log(f"2/3 recall with planner and reranker ({label}) ...")
            s, rows, trouble = recall_stage(db, scope, server.base_url, llm_timeout, label, seen)
            server.alive()
            seen = max([seen] + [r["id"] for r in rows])
            report["stages"].append(s)
            problems += trouble + protocol_problems(s, rows)

        log(f"3/3 memlens bench locomo --answer --limit {args.questions} ...")
        t0 = time.perf_counter()
        bench_db = work / "bench.db"
        code, out, err = memlens(["bench", "locomo", "--data", str(locomo), "--limit", str(args.questions),
                                  "--answer", "--db", str(bench_db), "--json"], env)
        if code != 0:
            raise SystemExit(f"check-llm: memlens bench failed ({code}): {err.strip()[-500:]}")
        server.alive()
        bench = json.loads(out)
        with MemoryEngine(bench_db, create=False, llm=False, background_reembed=False) as eng:
            from engine.store import bench as bench_sql

            items = bench_sql.items(eng.store, bench["run_id"])
        rows = []
        for container in sorted({it["trace_db"] for it in items if it.get("trace_db")}):
            rows += calls_of(Path(container), Scope.default(*BENCH_SCOPE))
        answered = [it for it in items if it.get("answer") is not None]
        judged = [it for it in items if "qa_correct" in (it.get("metrics") or {})]
        no_answer = len(items) - len(answered)
        fallbacks = ([f"{no_answer} questions without an answer: no judgement, scored as not answered"]
                     if no_answer else [])
        s = summarise("bench --answer (answer + judge)", rows, fallbacks,
                      [f"{len(items)} questions, {len(answered)} answered, {len(judged)} judged "
                       f"(qa_accuracy {bench['metrics'].get('qa_accuracy')}: meaningless for a 135M model)",
                       f"{time.perf_counter() - t0:.0f} s wall"])
        report["stages"].append(s)
        problems += protocol_problems(s, rows)
        if len(items) != bench["questions"] or bench["questions"] < 1:
            problems.append("bench: not every question has an item")
    finally:
        server.stop()
    report["seconds"] = round(time.perf_counter() - t_all)
    report["load"].append(os.getloadavg()[0])
    report["problems"] = problems
    (work / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(render(report))
    return 1 if problems else 0


def render(r: dict) -> str:
    out = ["memlens check-llm: a real llama.cpp server, every LLM stage",
           "This checks the protocol and the failure handling, not quality: a 135M model extracts and",
           "answers poorly, and that is not what is measured here.",
           f"model: {r['model']}   work folder: {r['work']}", "", "The server as found:"]
    for k, v in r["server"].items():
        if isinstance(v, list):
            out.append(f"  {k}:")
            out += [f"    {line}" for line in v]
        else:
            out.append(f"  {k}: {v}")
    for s in r["stages"]:
        lat = s["latency_ms"]
        out += ["", f"{s['stage']}:",
                f"  calls {s['calls']}, requests {s['requests']}, answered {s['answered']}, "
                f"failed {s['requests'] - s['answered']}",
                "  failures by kind: " + (", ".join(f"{k} {n}" for k, n in s["failures"].items()) or "none"),
                "  fallbacks: " + ("; ".join(s["fallbacks"]) or "none"),
                "  structured output: " + ", ".join(f"{k} {n}" for k, n in s["modes"].items()),
                f"  tokens: {s['prompt_tokens']} prompt, {s['completion_tokens']} completion",
                f"  latency per request: p50 {lat['p50']} ms, max {lat['max']} ms, total {lat['total']} ms"]
        out += [f"  {line}" for line in s["outcome"]]
    out += ["", f"{r['seconds']} s in all; load average {r['load'][0]:.1f} at the start, {r['load'][1]:.1f} at the end "
            f"on {os.cpu_count()} cores (the machine is shared: times are not figures of memlens)",
            "PROTOCOL OK" if not r["problems"] else "PROTOCOL PROBLEMS:\n  " + "\n  ".join(r["problems"])]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
