"""The memlens command line (ARCHITECTURE.md, "Command line contract").

Exit status: 0 success, 2 bad input (one line on stderr, nothing written), 1 internal error,
3 some inputs failed (ingest: each is listed with its reason; the others were ingested),
75 (EX_TEMPFAIL) busy: a database locked by another program or process past the busy timeout
(one line, nothing written: try again).
With --json exactly one JSON document goes to stdout; progress and logs go to stderr.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads: one BLAS thread (PERF.md)
os.environ.setdefault("OMP_NUM_THREADS", "1")

from engine import __version__  # noqa: E402
from engine.bench import DATASETS as BENCH_DATASETS
from engine.errors import BadInput, Busy, MemlensError
from engine.ingest.model import FORMATS
from engine.scope import SCOPE_TYPES, Scope
from engine.settings import default_db_path
from engine.settings import value as setting_value

INGEST_FORMATS = ("auto", *FORMATS)
EXTRACT_MODES = ("none", "auto", "heuristic", "llm")
EX_TEMPFAIL = 75  # sysexits.h: a temporary failure, the caller may retry
EXIT_SOME_FAILED = 3


# Options a command may take before its name as well as after it (`memlens --db X ingest ...`,
# as git and sqlite-utils take them): (dest, flag).
GLOBAL_OPTIONS = (("db", "--db"), ("json", "--json"), ("user", "--user"), ("agent", "--agent"))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse prints usage + exits 2; keep it one line
        # main() prefixes "memlens: "; a sub-command's parser names the command once
        command = self.prog.removeprefix("memlens").strip()
        raise BadInput(f"{command}: {message}" if command else message)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, default=None, help="database file (default: $MEMLENS_DB or the user data dir)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def _scoped(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", default=None, help="user id (default: 'default')")
    p.add_argument("--agent", default=None, help="agent id (default: 'default')")
    p.add_argument("--scope", default=None, metavar="TYPE:ID",
                   help=f"scope within the user/agent ({'|'.join(SCOPE_TYPES)}:ID; default agent:<agent>)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memlens", description="Inspect an AI agent's long-term memory.")
    parser.add_argument("--version", action="version", version=f"memlens {__version__}")
    parser.add_argument("--db", type=Path, default=argparse.SUPPRESS,
                        help="database file, for the commands that take one (here or after the command)")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="one JSON document on stdout, for the commands that print one")
    parser.add_argument("--user", default=argparse.SUPPRESS, help="user id, for the scoped commands")
    parser.add_argument("--agent", default=argparse.SUPPRESS, help="agent id, for the scoped commands")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    _add_commands(sub)
    _globals_either_side(sub)
    return parser


def _globals_either_side(sub) -> None:
    """A sub-command's own --db/--json/--user/--agent must not overwrite what was given before its
    name, so theirs default to "not given"; parse() fills in the defaults afterwards."""
    for p in sub.choices.values():
        taken: dict[str, Any] = {}
        for action in p._actions:
            for dest, flag in GLOBAL_OPTIONS:
                if flag in action.option_strings:
                    taken[dest] = action.default
                    action.default = argparse.SUPPRESS
        p.set_defaults(_globals=taken)


def parse(argv: list[str]) -> argparse.Namespace:
    """argv -> the command's arguments; global options may stand before the command or after it."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["gui", *argv])
    taken = args.__dict__.pop("_globals")
    for dest, flag in GLOBAL_OPTIONS:
        if dest in taken:
            if not hasattr(args, dest):
                setattr(args, dest, taken[dest])  # given on neither side: the command's own default
        elif hasattr(args, dest):
            raise BadInput(f"{args.command} does not take {flag}")
    return args


def _add_commands(sub) -> None:

    p = sub.add_parser("gui", help="open the inspector")
    _common(p)

    p = sub.add_parser("demo", help="build the demo database from resources/demo and open it")
    _common(p)
    p.add_argument("--no-gui", action="store_true", help="only build it")
    p.add_argument("--rebuild", action="store_true", help="delete an existing file at --db first")

    p = sub.add_parser("ingest", help="ingest chat logs, benchmark files, notes, email and code")
    _common(p)
    _scoped(p)
    p.add_argument("paths", nargs="+", help="files or directories")
    p.add_argument("--format", default="auto", choices=INGEST_FORMATS)
    p.add_argument("--extract", default="auto", choices=EXTRACT_MODES,
                   help="fact extraction: auto (the LLM endpoint if configured, else heuristic), llm, heuristic, none")
    p.add_argument("--embedder", default=None, choices=("local", "openai", "hashing"),
                   help="override $MEMLENS_EMBEDDER")

    p = sub.add_parser("show", help="one record with its provenance")
    _common(p)
    _scoped(p)
    p.add_argument("kind", choices=("memory", "fact", "document", "chunk"))
    p.add_argument("id", type=int)

    p = sub.add_parser("export", help="all memories, facts, relations and sources of a scope")
    _common(p)
    _scoped(p)
    p.add_argument("--format", default="json", choices=("json", "csv"))
    p.add_argument("--out", type=Path, default=None,
                   help="json: a file (default stdout); csv: a folder, or FILE.zip, with one CSV per table")

    p = sub.add_parser("reembed", help="re-embed vectors made by another model (runs in the foreground)")
    _common(p)
    p.add_argument("--embedder", default=None, choices=("local", "openai", "hashing"))

    p = sub.add_parser("status", help="what the database holds")
    _common(p)
    _scoped(p)

    p = sub.add_parser("facts", help="facts, current or with their history")
    _common(p)
    _scoped(p)
    p.add_argument("--subject", default=None)
    p.add_argument("--history", action="store_true", help="include superseded, expired and retracted versions")

    p = sub.add_parser("profile", help="the static and dynamic profile with the facts behind each line")
    _common(p)
    _scoped(p)
    p.add_argument("--budget", type=int, default=400, help="token budget (default 400)")

    p = sub.add_parser("conflicts", help="the review queue")
    _common(p)
    _scoped(p)
    p.add_argument("--all", action="store_true", help="include resolved conflicts")

    p = sub.add_parser("resolve", help="resolve a conflict")
    _common(p)
    _scoped(p)
    p.add_argument("id", type=int)
    p.add_argument("--keep", required=True, help="a fact id of the conflict, or a | b | both | none")
    p.add_argument("--note", default=None)

    for name, helptext in (("undo", "undo a curation command (default: the latest)"),
                           ("redo", "redo an undone curation command (default: the latest)")):
        p = sub.add_parser(name, help=helptext)
        _common(p)
        _scoped(p)
        p.add_argument("id", type=int, nargs="?", default=None)

    p = sub.add_parser("forget", help="forget a memory (soft, with a reason)")
    _common(p)
    _scoped(p)
    p.add_argument("id", type=int, help="memory id (or a fact id with --fact)")
    p.add_argument("--fact", action="store_true", help="the id is a fact id")
    p.add_argument("--reason", default="forgotten by operator")

    p = sub.add_parser("retract", help="retract a document and everything only it supports")
    _common(p)
    _scoped(p)
    p.add_argument("document", type=int)
    p.add_argument("--dry-run", action="store_true", help="show the cascade without applying it")
    p.add_argument("--note", default=None)

    p = sub.add_parser("recall", help="run the traced recall pipeline (an operator what-if: changes no memory)")
    _common(p)
    _scoped(p)
    p.add_argument("query")
    p.add_argument("--k", type=int, default=None,
                   help="sources (default: the recipe's, 10); a fact and the turn it was read from share one")
    p.add_argument("--as-of", default=None, metavar="TIME", help="answer as of this ISO-8601 world and belief time")
    p.add_argument("--recipe", default=None, help="default, offline, lexical, vector, rrf")
    p.add_argument("--budget", type=int, default=None, help="context token budget (default 800)")
    p.add_argument("--off", default=None, metavar="FEATURES",
                   help="comma-separated retrieval features to switch off (memlens bench ablate lists them)")
    p.add_argument("--on", default=None, metavar="FEATURES",
                   help="comma-separated features the recipe leaves off, switched on (e.g. same_slot)")
    p.add_argument("--explain", type=int, default=None, metavar="MEMORY_ID",
                   help="why was this memory retrieved, dropped, or never a candidate?")

    p = sub.add_parser("trace", help="a stored retrieval trace: every candidate and its fate")
    _common(p)
    _scoped(p)
    p.add_argument("id", type=int, nargs="?", default=None, help="trace id (default: list recent traces)")

    p = sub.add_parser("perf", help="measure the recall pipeline at scale: a synthetic store, or real turns and "
                                    "questions from benchmark files (--data)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--memories", type=int, default=None,
                   help="store size (synthetic default 100,000; with --data: the files' sessions, copied to reach N)")
    p.add_argument("--data", action="append", default=None, metavar="FILE",
                   help="LongMemEval or LoCoMo file(s): a store of their real sessions, queried with their questions")
    p.add_argument("--vector-cache", default=None, metavar="PATH",
                   help="with --data: the vector cache file (default: vectors.db in the user cache folder; a "
                        "bench run's DB.bench/vectors.db reuses what it embedded)")
    p.add_argument("--embedder", default="local", choices=("local", "openai", "hashing"),
                   help="with --data: the embedder (hashing: tests only)")
    p.add_argument("--keep", default=None, metavar="PATH",
                   help="with --data: keep the store at PATH, and measure it again next time instead of rebuilding")
    p.add_argument("--origin", default="bench", choices=("bench", "agent"),
                   help="with --data: whose recalls (agent: a real client's, each counting the usage of its results)")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--dims", type=int, default=384)
    p.add_argument("--workdir", default=None, help="where the temporary DB goes (default: the system temp dir)")

    p = sub.add_parser("bench", help=f"run a retrieval benchmark ({', '.join(BENCH_DATASETS)}), report a run, "
                                     "ablate the retrieval features on folds, fit their weights, "
                                     "or say why gold evidence misses the top k (misses)")
    _common(p)
    p.add_argument("dataset", choices=(*BENCH_DATASETS, "report", "ablate", "fit", "misses"))
    p.add_argument("run", nargs="?", type=int, default=None, help="for report: the run id")
    p.add_argument("--data", default=None, action="append",
                   help="the dataset file, ConvoMem also a folder of them (fit, ablate: repeat for several, ablate then "
                        "pools their folds; updates: "
                        "default the bundled resources/bench/updates.json)")
    p.add_argument("--k", default="1,3,5,10", help="comma-separated cut-offs (default 1,3,5,10; misses: the largest)")
    p.add_argument("--limit", type=int, default=None, help="at most this many questions")
    p.add_argument("--recipe", default="offline", help="retrieval recipe (default offline: no LLM stages)")
    p.add_argument("--workers", type=int, default=1, help="containers in parallel processes")
    p.add_argument("--executor", default=None, help="processes (default) or dask://HOST:PORT")
    p.add_argument("--extract", default=None, choices=EXTRACT_MODES,
                   help="fact extraction in containers (default none; updates: heuristic, as a new user's default "
                        "ingestion without an endpoint)")
    p.add_argument("--embedder", default=None, choices=("local", "openai", "hashing"))
    p.add_argument("--resume", type=int, default=None, metavar="RUN", help="finish an interrupted run")
    p.add_argument("--answer", action="store_true",
                   help="also answer each question (ANSWER model) and judge it (JUDGE model) through the endpoint")
    p.add_argument("--against", type=int, default=None, help="for report: compare with this run")
    p.add_argument("--out", default=None, help="for report and ablate: write the JSON and Markdown into this folder")
    p.add_argument("--fresh", action="store_true", help="rebuild containers instead of reusing cached ones")
    p.add_argument("--set", default=None, action="append", metavar="NAME=VALUE", dest="settings",
                   help="change a number or switch of the recipe for every recall of the run (repeat for several; "
                        "e.g. restatement_pool=10): a what-if that reuses the containers")
    p.add_argument("--blind", action="store_true",
                   help="for updates and misses on it: also run the blind part (left out by default: a check read once, "
                        "as aggregates)")
    p.add_argument("--off", default=None, metavar="FEATURES",
                   help="comma-separated retrieval features to switch off in the recipe (see bench ablate)")
    p.add_argument("--on", default=None, metavar="FEATURES",
                   help="comma-separated features the recipe leaves off, switched on (e.g. same_slot)")
    p.add_argument("--folds", default=None, choices=("conversation", "type", "half", "batch"),
                   help="for ablate: leave-one-out folds (default: conversations for LoCoMo, types for LongMemEval, "
                        "the dev and heldout parts for updates, never its blind part; batch: updates' dev batches dev:tidy and "
                        "each dev:w<N>'s halves dev:w<N>a, dev:w<N>b beside heldout)")
    p.add_argument("--features", default=None, help="for ablate: comma-separated feature names (default: all)")
    p.add_argument("--sweep", default=None, metavar="NAME=V1,V2,...",
                   help="for ablate: instead of switching features off, answer under each value of one recipe "
                        "setting and choose it on leave-one-fold-out folds (e.g. slot_similarity=0.3,0.4,0.5)")
    p.add_argument("--metric", default=None, help="for ablate: the metric key (default turn_evidence_recall@10; "
                                                  "current_first@1 for updates)")
    p.add_argument("--rounds", type=int, default=2, help="for fit: fit / answer again rounds (neighbours follow the weights)")
    p.add_argument("--no-cv", action="store_true", help="for fit: skip the leave-one-fold-out figures")
    p.add_argument("--model", default="weights", choices=("weights", "rerank", "order"),
                   help="for fit: the fusion weights and prior strengths (default), the learned re-ranker "
                        "(learned_rerank: resources/recipes/rerank.json), or the learned order of a speaker's "
                        "statements (learned_order: resources/recipes/order.json, on an updates file)")
    p.add_argument("--write", action="store_true",
                   help="for fit: store the weights fitted on all the files where the recipes load them")

    p = sub.add_parser("snapshot", help="render every inspector pane offscreen to PNG")
    p.add_argument("--db", type=Path, default=None, help="database to show (default: a sample built on the fly)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--out", type=Path, required=True, help="directory for the PNG files")
    p.add_argument("--size", default="1280x800", help="window size WIDTHxHEIGHT (default 1280x800)")
    p.add_argument("--test-connection", action="store_true",
                   help="press Settings' Test connection first (calls the endpoint $MEMLENS_LLM_BASE_URL names)")

    p = sub.add_parser("log", help="the curation audit log")
    _common(p)
    _scoped(p)
    p.add_argument("--limit", type=int, default=50)

    p = sub.add_parser("mcp", help="serve the memory of one user/agent to an MCP client over stdio")
    p.add_argument("--db", type=Path, default=None, help="database file, created if missing "
                                                          "(default: $MEMLENS_DB or the user data dir)")
    _scoped(p)
    p.add_argument("--extract", default="auto", choices=EXTRACT_MODES,
                   help="fact extraction for memory_add: auto (the LLM endpoint if configured, else heuristic), "
                        "llm, heuristic, none")
    p.add_argument("--embedder", default=None, choices=("local", "openai", "hashing"),
                   help="override $MEMLENS_EMBEDDER")

    p = sub.add_parser("import", help="import another memory system's database, read-only (neoagent)")
    _common(p)
    p.add_argument("system", choices=("neoagent",), help="the system that wrote the database")
    p.add_argument("path", type=Path, help="its SQLite file (opened read-only, never written)")
    p.add_argument("--user", default=None, help="only this NeoAgent user id (default: every user)")
    p.add_argument("--agent", default=None,
                   help="only this NeoAgent agent id; 'none' for rows without an agent (default: every agent)")
    p.add_argument("--wait", type=float, default=5.0, metavar="SECONDS",
                   help="how long to wait while NeoAgent holds the file locked or keeps changing it; then exit 75"
                        " (default 5)")
    p.add_argument("--embedder", default=None, choices=("local", "openai", "hashing"),
                   help="override $MEMLENS_EMBEDDER")
    _add_health_parser(sub)


def _add_health_parser(sub) -> None:
    p = sub.add_parser("health", help="what is wrong with this memory: every store-health check and its items")
    _common(p)
    _scoped(p)
    p.add_argument("--check", action="append", default=None, metavar="NAME",
                   help="only this check (repeatable; default: all, and the counts join the trend)")
    p.add_argument("--limit", type=int, default=200, help="items per check (default 200; counts are always total)")
    p.add_argument("--offset", type=int, default=0, help="skip this many items per check (paging)")
    p.add_argument("--synthetic", type=int, default=None, metavar="N",
                   help="instead of --db: time every check on a synthetic N-memory store with provenance")
    p.add_argument("--keep", type=Path, default=None, help="with --synthetic: keep that store at this new path")
    p.add_argument("--workdir", default=None, help="with --synthetic: where the temporary store goes")


def _scope(args: argparse.Namespace) -> Scope:
    scope = Scope.default(args.user, args.agent)
    if getattr(args, "scope", None):
        kind, sep, sid = args.scope.partition(":")
        if not sep or not sid:
            raise BadInput(f"--scope must look like TYPE:ID, got {args.scope!r}")
        scope = Scope(scope.user_id, scope.agent_id, kind, sid)
    return scope


def _db_path(args: argparse.Namespace) -> Path:
    return args.db if args.db is not None else default_db_path()


def _emit(args: argparse.Namespace, payload: Any, text: str) -> None:
    if args.json:
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
    else:
        sys.stdout.write(text.rstrip("\n") + "\n")


def _one_line(text: str, width: int) -> str:
    """A list entry stays on its line: line breaks and runs of spaces become one space, and what
    does not fit ends in an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def _progress(fraction: float, message: str) -> None:
    sys.stderr.write(f"\r[{fraction:6.1%}] {message[:60]:<60}")
    sys.stderr.flush()


def cmd_ingest(args: argparse.Namespace) -> int:
    from engine.embed import make_embedder
    from engine.ingest.sources import collect_sources
    from engine.memory import MemoryEngine

    scope = _scope(args)
    # Every input is read and parsed before the DB is touched: a named file that fails refuses the
    # run; a file found in a directory fails alone (listed with its reason).
    sources = collect_sources(args.paths, fmt=args.format)
    embedder = make_embedder(args.embedder)
    with MemoryEngine(_db_path(args), embedder=embedder) as engine:
        report = engine.ingest_sources(sources, scope=scope, extract=args.extract,
                                       progress=None if args.json else _progress)
        engine.wait_for_background()
    if not args.json:
        sys.stderr.write("\n")
    d = report.as_dict()
    lines = [f"ingested {d['documents']} documents, {d['chunks']} chunks, {d['memories']} memories, "
             f"{d['facts']} facts; {d['unchanged']} unchanged, {d['skipped'] - d['unchanged']} files skipped, "
             f"{d['failed']} failed in {d['seconds']:.2f}s"]
    lines += [f"  {f['status']:<8} {f['path']}: {f['reason']}" for f in d["files"] if f["reason"]]
    ex = d.get("extraction")
    if ex and ex["windows"]:
        lines.append(f"extracted {ex['windows']} windows ({ex['failed_windows']} failed, {ex['llm_calls']} model "
                     f"calls): {ex['facts_inserted']} new facts")
        if ex["errors"]:
            lines.append(f"first failure: {ex['errors'][0]}")
        if ex.get("stopped"):
            lines.append(ex["stopped"])
    _emit(args, d, "\n".join(lines))
    return EXIT_SOME_FAILED if report.failed else 0


def _given_scope(args: argparse.Namespace) -> bool:
    return any(getattr(args, name, None) for name in ("user", "agent", "scope"))


def _note_scope(args: argparse.Namespace, engine) -> None:
    """A command run without --user/--agent/--scope says on stderr which scope it used and which
    others the file holds, so a 0 on a full database is never a silent mystery."""
    if _given_scope(args):
        return
    scope = _scope(args)
    others = [(s, n) for s, n in engine.scope_sizes() if s != scope]
    if others:
        sys.stderr.write(f"memlens: scope {_scope_label(scope)} (the default; choose with --user/--agent/--scope); "
                         "this file also holds " + ", ".join(f"{_scope_label(s)} ({n} memories)"
                                                             for s, n in others[:8])
                         + (f" and {len(others) - 8} more" if len(others) > 8 else "") + "\n")


def _scope_label(scope: Scope) -> str:
    label = f"--user {scope.user_id} --agent {scope.agent_id}"
    if (scope.scope_type, scope.scope_id) != ("agent", scope.agent_id):
        label += f" --scope {scope.scope_type}:{scope.scope_id}"
    return label


def _open_existing(args: argparse.Namespace):
    from engine.memory import MemoryEngine

    path = _db_path(args)
    if not path.exists():
        raise BadInput(f"{path}: no such database (ingest something first, or pass --db)")
    engine = MemoryEngine(path, create=False)
    if hasattr(args, "user"):
        _note_scope(args, engine)
    return engine


def cmd_show(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        record = engine.show(args.kind, args.id, scope=_scope(args))
    from .show_text import show_text

    _emit(args, record, show_text(args.kind, record))
    return 0


def _csv_text(rows: list[dict]) -> str:
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()})
    return out.getvalue()


def cmd_export(args: argparse.Namespace) -> int:
    from engine.files import open_private, private_dir, write_private

    out, as_csv = args.out, args.format == "csv"
    if as_csv and out is None:
        raise BadInput("export --format csv writes one CSV per table: give --out FOLDER or --out FILE.zip")
    to_folder = as_csv and out.suffix.lower() != ".zip"
    if out is not None and out.exists() and out.is_dir() != to_folder:
        raise BadInput(f"{out}: already exists and is {'a folder' if out.is_dir() else 'a file'}")
    with _open_existing(args) as engine:
        data = engine.export(_scope(args))
    if not as_csv:
        text = json.dumps(data, ensure_ascii=False, default=str) + "\n"
        if out is None:
            sys.stdout.write(text)
            return 0
        write_private(out, text)
    elif to_folder:
        private_dir(out)
        for table, rows in data.items():
            write_private(out / f"{table}.csv", _csv_text(rows))
    else:
        import zipfile

        with open_private(out, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            for table, rows in data.items():
                zf.writestr(f"{table}.csv", _csv_text(rows))
    counts = {table: len(rows) for table, rows in data.items()}
    _emit(args, {"out": str(out), "format": args.format, "tables": counts},
          f"wrote {len(counts)} tables as {args.format.upper()} to {out}: "
          + ", ".join(f"{t} ({n} rows)" for t, n in counts.items()))
    return 0


def cmd_reembed(args: argparse.Namespace) -> int:
    from engine.embed import make_embedder
    from engine.memory import MemoryEngine

    path = _db_path(args)
    if not path.exists():
        raise BadInput(f"{path}: no such database")
    with MemoryEngine(path, embedder=make_embedder(args.embedder), create=False, background_reembed=False) as engine:
        _ = engine.embedder  # records the model and marks other vectors stale
        n = engine.reembed_stale()
    _emit(args, {"reembedded": n}, f"re-embedded {n} vectors")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        scope = _scope(args)
        counts = engine.counts(scope)
        size = engine.path.stat().st_size
        sizes = engine.scope_sizes()
        exposed = engine.exposure()
    payload = {"db": str(engine.path), "bytes": size, "scope": scope.as_dict(), "counts": counts,
               "scopes": [s.as_dict() | {"memories": n} for s, n in sizes], "readable_by_others": exposed}
    chosen = "" if _given_scope(args) else " (the default: no --user/--agent/--scope given)"
    lines = [f"{engine.path} ({size:,} bytes)"]
    if exposed:
        lines.append(f"  warning: {exposed}")
    lines.append(f"scope {_scope_label(scope)}{chosen}:")
    lines += [f"  {k}: {v}" for k, v in counts.items()]
    others = [(s, n) for s, n in sizes if s != scope]
    if others:
        lines.append("other scopes in this file:")
        lines += [f"  {_scope_label(s)}: {n} memories" for s, n in others]
    _emit(args, payload, "\n".join(lines))
    return 0


FACT_FIELDS = ("id", "memory_id", "subject", "predicate", "object", "status", "relation", "confidence", "valid_from",
               "valid_to", "learned_at", "invalidated_at", "supersedes_fact_id", "category", "is_static", "trust",
               "evidence", "evidence_unverified", "extraction_method", "rule", "reason", "forget_after")


def _fact_json(f: dict) -> dict:
    return {k: f.get(k) for k in FACT_FIELDS}


def cmd_facts(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        facts = [_fact_json(f) for f in engine.facts(_scope(args), subject=args.subject, history=args.history)]
    lines = [f"{f['id']:>6} [{f['status']}] {f['subject']} {f['predicate']} {f['object']}"
             f" (conf {f['confidence']:.2f}, {f['rule']})" for f in facts]
    _emit(args, {"facts": facts}, "\n".join(lines) or "no facts")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        profile = engine.profile(_scope(args), budget=args.budget).as_dict()
    text = ["Static:"] + [f"  {x['text']}  (facts {x['fact_ids']})" for x in profile["static"]]
    text += ["Dynamic:"] + [f"  {x['text']}  (facts {x['fact_ids']})" for x in profile["dynamic"]]
    _emit(args, profile, "\n".join(text))
    return 0


def cmd_conflicts(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        rows = engine.conflicts(_scope(args), status=None if args.all else "open")
    out = [{"id": c["id"], "fact_ids": [f for f in (c["fact_a_id"], c["fact_b_id"]) if f], "rule": c["rule"],
            "reason": c["reason"], "status": c["status"], "resolution": c["resolution"],
            "created_at": c["created_at"]} for c in rows]
    _emit(args, {"conflicts": out},
          "\n".join(f"{c['id']:>5} [{c['status']}] facts {c['fact_ids']}: {c['rule']} - {c['reason']}" for c in out)
          or "no open conflicts")
    return 0


def _curation_out(args, result) -> int:
    d = result.as_dict()
    _emit(args, d, json.dumps(d, indent=2, ensure_ascii=False, default=str))
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        scope = _scope(args)
        keep = args.keep
        if keep.isdigit():
            conflict = engine.conflict(scope, args.id)
            if conflict is None:
                raise BadInput(f"no conflict {args.id} in this scope")
            ids = {conflict["fact_a_id"]: "a", conflict["fact_b_id"]: "b"}
            if int(keep) not in ids:
                raise BadInput(f"fact {keep} is not part of conflict {args.id} (facts {list(k for k in ids if k)})")
            keep = ids[int(keep)]
        return _curation_out(args, engine.curator(scope).resolve(args.id, keep, note=args.note))


def cmd_undo(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        cur = engine.curator(_scope(args))
        result = cur.undo(args.id) if args.command == "undo" else cur.redo(args.id)
        return _curation_out(args, result)


def cmd_forget(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        scope = _scope(args)
        mid = args.id
        if args.fact:
            fact = engine.fact(scope, args.id)
            if fact is None:
                raise BadInput(f"no fact {args.id} in this scope")
            mid = fact["memory_id"]
        return _curation_out(args, engine.curator(scope).forget(mid, reason=args.reason))


def cmd_retract(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        return _curation_out(args, engine.curator(_scope(args)).retract(args.document, dry_run=args.dry_run,
                                                                        note=args.note))


def cmd_recall(args: argparse.Namespace) -> int:
    from engine.embed import make_embedder
    from engine.memory import MemoryEngine

    path = _db_path(args)
    if not path.exists():
        raise BadInput(f"{path}: no such database")
    scope = _scope(args)
    with MemoryEngine(path, embedder=make_embedder(), create=False) as engine:
        _note_scope(args, engine)
        kwargs = {"k": args.k, "as_of": args.as_of, "recipe": args.recipe, "budget": args.budget,
                  **_switches(args)}
        if args.explain is not None:
            out = engine.explain(args.query, args.explain, scope=scope, **kwargs)
            _emit(args, out, f"memory {out['memory_id']}: {out['verdict']} - {out['detail']}")
            return 0
        result = engine.recall(args.query, scope=scope, **kwargs)
    d = result.as_dict()
    if result.not_stored:
        sys.stderr.write(f"memlens: the trace was not stored: {result.not_stored}\n")
    text = [f"trace {d['trace_id']}  ({d['timings_ms']['total']:.1f} ms, {d['context']['tokens']} tokens)"]
    text += [f"{r['rank']:>3}. [{r['score']:.3f}] m{r['memory_id']} {_one_line(r['text'], 140)}"
             + (f"  (with m{r['shares_place_with']}: same source)" if r.get("shares_place_with") else "")
             + (f"\n       [{r['updated_by']['label']}]" if r.get("updated_by") else "")
             for r in d["results"]]
    _emit(args, d, "\n".join(text))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        scope = _scope(args)
        if args.id is None:
            rows = engine.traces(scope)
            _emit(args, {"traces": rows}, "\n".join(
                f"{r['id']:>6} {r['created_at']} {r['origin']:<8} {r['result_count']:>3} results  "
                f"{_one_line(r['query_text'] or '(hashed)', 80)}" for r in rows) or "no traces")
            return 0
        t = engine.trace(args.id, scope=scope)
    lines = [f"trace {t['id']}: {t['query'] or '(agent query, hashed)'}"]
    lines += [f"  {s['name']:<10} {s['in']:>5} -> {s['out']:<5} {s['ms']:.2f} ms" for s in t["stages"]]
    for c in t["candidates"][:40]:
        fate = f"rank {c['rank']}" if c["rank"] else f"{c['dropped']['stage']}:{c['dropped']['reason']}"
        lines.append(f"  m{c['memory_id']:<7} {c['score'] or 0:.3f} {fate:<22} {','.join(c['channels'])}")
    _emit(args, t, "\n".join(lines))
    return 0


def cmd_perf(args: argparse.Namespace) -> int:
    from engine.bench.perf import run_perf

    if (args.memories is not None and args.memories < 1) or args.queries < 1:
        raise BadInput("--memories and --queries must be positive")
    progress = None if args.json else _progress
    if args.data:
        from engine.bench.scale import run_data_perf
        from engine.paths import cache_dir

        out = run_data_perf(args.data, args.memories, args.queries, workdir=args.workdir, embedder=args.embedder,
                            vector_cache=args.vector_cache or cache_dir() / "vectors.db", keep=args.keep,
                            progress=progress, origin=args.origin)
    else:
        out = run_perf(args.memories or 100_000, args.queries, dims=args.dims, workdir=args.workdir, progress=progress)
    if not args.json:
        sys.stderr.write("\n")
    t, c = out["total_ms"], out["cpu_ms"]
    _emit(args, out, f"{out['memories']:,} memories, {out['queries']} queries: total p50 {t['p50']} ms, "
                     f"p95 {t['p95']} ms, p99 {t['p99']} ms (CPU p50 {c['p50']}, p95 {c['p95']} ms); vector "
                     f"recall@10 {out['vector_recall_at_10']}; build {out['build_seconds']} s; DB {out['db_bytes']:,} "
                     f"bytes; peak RSS {out['peak_rss_bytes']:,}")
    return 0


_CURRENT_TRUTH = ("current_first@1", "current_top@1", "keep_first@1", "keep_top@1", "history@3",
                  "false_supersession", "ku_latest_first", "ku_previous_first")


def cmd_bench(args: argparse.Namespace) -> int:
    from engine.bench.runner import report, run_benchmark
    from engine.memory import MemoryEngine

    if args.settings and args.dataset in ("report", "ablate", "fit", "misses"):
        raise BadInput(f"--set changes the recipe of a benchmark run, not of bench {args.dataset}")
    if args.dataset == "report":
        if args.run is None:
            raise BadInput("bench report needs a run id")
        with _open_existing(args) as engine:
            out = report(engine, args.run, args.against)
        if args.out:
            from engine.files import private_dir, write_private

            folder = private_dir(args.out)
            write_private(folder / f"run-{args.run}.json",
                          json.dumps({k: v for k, v in out.items() if k != "markdown"}, indent=2, default=str))
            write_private(folder / f"run-{args.run}.md", out["markdown"])
        _emit(args, out, out["markdown"])
        return 0
    if not args.data and args.dataset == "updates":
        from engine.bench.datasets import updates_default_path

        args.data = [str(updates_default_path())]
    if not args.data:
        raise BadInput(f"bench {args.dataset} needs --data FILE")
    if args.dataset == "ablate" and len(args.data) > 1:
        return _bench_ablate(args)
    if args.dataset == "fit":
        return _bench_fit(args)
    if len(args.data) > 1:
        raise BadInput(f"bench {args.dataset} takes one --data FILE")
    args.data = args.data[0]
    if args.dataset == "ablate":
        return _bench_ablate(args)
    if args.dataset == "misses":
        return _bench_misses(args)
    try:
        ks = [int(x) for x in args.k.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"--k must be comma-separated integers, got {args.k!r}") from None
    from engine.bench.datasets import default_extract
    from engine.retrieve.recipes import parse_settings

    extract = args.extract or default_extract(args.dataset)
    settings = parse_settings(args.settings or ())  # before the database is opened: bad input writes nothing
    with MemoryEngine(_db_path(args), llm=args.answer) as engine:
        out = run_benchmark(engine, args.dataset, args.data, k_values=ks, limit=args.limit, recipe=args.recipe,
                            workers=args.workers, embedder=args.embedder, extract=extract,
                            executor=args.executor, resume_run=args.resume, qa=args.answer, fresh=args.fresh,
                            off=_features(args.off) if args.off else (), on=_features(args.on) if args.on else (),
                            progress=None if args.json else _progress, blind=args.blind,
                            settings=settings)
    if not args.json:
        sys.stderr.write("\n")
    _emit(args, out, _bench_text(out) + _truth_text(out))
    return 0


def _switches(args: argparse.Namespace) -> dict[str, list[str]]:
    """recall's --off (besides what the recipe leaves off) and --on (what it leaves off, taken back)."""
    from engine.retrieve.recipes import switched_off

    if not (args.off or args.on):
        return {}
    return {"off": switched_off(args.recipe, _features(args.off) if args.off else (),
                                _features(args.on) if args.on else ())}


def _features(text: str) -> list[str]:
    return [f.strip() for f in text.split(",") if f.strip()]


def _bench_fit(args: argparse.Namespace) -> int:
    if args.model == "rerank":
        return _bench_fit_rerank(args)
    if args.model == "order":
        return _bench_fit_order(args)
    from engine.bench.fit import markdown, run_fit, write_weights
    from engine.memory import MemoryEngine
    from engine.retrieve.recipes import FITTED_WEIGHTS

    with MemoryEngine(_db_path(args), llm=False) as engine:
        out = run_fit(engine, args.data, recipe=args.recipe, folds=args.folds, workers=args.workers,
                      embedder=args.embedder, extract=args.extract or "none", rounds=args.rounds, limit=args.limit,
                      cross_validate=not args.no_cv, progress=None if args.json else _progress)
    if not args.json:
        sys.stderr.write("\n")
    if args.write:
        out["written"] = str(write_weights(out, FITTED_WEIGHTS))
    if args.out:
        _write_report(args.out, "fit", out, markdown(out))
    _emit(args, out, markdown(out))
    return 0


def _write_report(out_dir: str, stem: str, doc: dict, md: str) -> None:
    """A bench report's JSON and Markdown, `<stem>.json` and `<stem>.md`, in the private folder `out_dir`."""
    from engine.files import private_dir, write_private

    folder = private_dir(out_dir)
    write_private(folder / f"{stem}.json", json.dumps(doc, indent=2, sort_keys=True) + "\n")
    write_private(folder / f"{stem}.md", md)


def _bench_fit_rerank(args: argparse.Namespace) -> int:
    from engine.bench.rerank_fit import markdown, run_rerank_fit, write_model
    from engine.memory import MemoryEngine

    with MemoryEngine(_db_path(args), llm=False) as engine:
        out = run_rerank_fit(engine, args.data or [], recipe=args.recipe, workers=args.workers,
                             embedder=args.embedder, extract=args.extract or "none", limit=args.limit,
                             progress=None if args.json else _progress)
    return _fit_done(args, "rerank", out, write_model, markdown)


def _bench_fit_order(args: argparse.Namespace) -> int:
    from engine.bench.datasets import updates_default_path
    from engine.bench.order_fit import markdown, run_order_fit, write_model
    from engine.memory import MemoryEngine

    data = args.data or [str(updates_default_path())]
    if len(data) != 1:
        raise BadInput("--model order is fitted on one updates file")
    with MemoryEngine(_db_path(args), llm=False) as engine:
        out = run_order_fit(engine, data[0], recipe=args.recipe, workers=args.workers, embedder=args.embedder,
                            extract=args.extract, progress=None if args.json else _progress)
    return _fit_done(args, "order", out, write_model, markdown)


def _fit_done(args: argparse.Namespace, name: str, out: dict[str, Any], write_model: Callable[[dict[str, Any]], Any],
              markdown: Callable[[dict[str, Any]], str]) -> int:
    """A learned stage's fit is done: --write stores its model, --out its report, then print it."""
    if not args.json:
        sys.stderr.write("\n")
    if args.write:
        out["written"] = str(write_model(out))
    if args.out:
        _write_report(args.out, name, out, markdown(out))
    _emit(args, out, markdown(out))
    return 0


def _bench_ablate(args: argparse.Namespace) -> int:
    """bench ablate: each feature switched off on folds, or (--sweep) one recipe number chosen on them."""
    from engine.bench.ablate import markdown, run_ablation, run_pooled_ablation, run_sweep, write_report
    from engine.memory import MemoryEngine
    from engine.retrieve.recipes import parse_sweep

    if args.sweep:
        if isinstance(args.data, list):
            raise BadInput("--sweep takes one --data file")
        if args.features or args.off:
            raise BadInput("--sweep answers under the recipe's own features (--on may add some); drop --features / --off")
        parse_sweep(args.sweep)  # before the database is opened: bad input writes nothing
    features = _features(args.features) if args.features else None
    common = {"metric": args.metric, "recipe": args.recipe, "workers": args.workers,
              "on": _features(args.on) if args.on else [],
              "embedder": args.embedder, "extract": args.extract, "limit": args.limit, "fresh": args.fresh,
              "progress": None if args.json else _progress}
    with MemoryEngine(_db_path(args), llm=False) as engine:
        if args.sweep:
            out = run_sweep(engine, args.data, sweep=args.sweep, folds=args.folds, **common)
        elif isinstance(args.data, list):  # several files: pooled folds (each file's own)
            if args.folds:
                raise BadInput("--folds applies to one --data file; a pooled ablation uses each file's own folds")
            out = run_pooled_ablation(engine, args.data, features=features, **common)
        else:
            out = run_ablation(engine, args.data, features=features, folds=args.folds, **common)
    if not args.json:
        sys.stderr.write("\n")
    if args.out:
        out["files"] = [str(p) for p in write_report(out, args.out)]
    _emit(args, out, markdown(out))
    return 0


def _bench_misses(args: argparse.Namespace) -> int:
    from engine.bench.misses import markdown, run_misses
    from engine.memory import MemoryEngine

    try:  # the largest cut-off: misses are counted against the top k
        k = max(int(x) for x in args.k.split(",") if x.strip())
    except ValueError:
        raise BadInput(f"--k must be comma-separated integers, got {args.k!r}") from None
    with MemoryEngine(_db_path(args), llm=False) as engine:
        out = run_misses(engine, args.data, recipe=args.recipe, k=k, workers=args.workers, embedder=args.embedder,
                         extract=args.extract, limit=args.limit, off=_features(args.off) if args.off else [],
                         on=_features(args.on) if args.on else [], blind=args.blind)
    if args.out:
        from engine.files import private_dir, write_private

        folder = private_dir(args.out)
        write_private(folder / "misses.json", json.dumps(out, indent=2) + "\n")
        write_private(folder / "misses.md", markdown(out))
    _emit(args, out, markdown(out))
    return 0


def _truth_text(out: dict) -> str:
    """Current truth (memlens bench updates, LongMemEval knowledge updates): overall and per half."""
    from engine.bench.datasets import UPDATE_SPLITS

    m = out.get("metrics") or {}
    lines = [f"  {k}: {m[k]:.4f}" for k in _CURRENT_TRUTH if m.get(k) is not None]
    for split in UPDATE_SPLITS:  # the updates benchmark's parts: tuned on dev, reported on each
        vals = (out.get("by_category") or {}).get(split)
        if vals:
            lines.append(f"  {split}: " + ", ".join(f"{k} {vals[k]:.4f}" for k in _CURRENT_TRUTH if k in vals))
    from engine.bench.runner import false_rules_text, misses_text

    if false := false_rules_text(out):
        lines.append(f"  false supersessions by rule (questions): {false}")
    if missed := misses_text(out):
        lines.append(f"  misses of first@1 by cause (questions): {missed}")
    return ("\n  current truth:\n" + "\n".join(lines)) if lines else ""


def _bench_text(out: dict) -> str:
    """The headline figures at k 5 and 10 (`bench report` has them all): the default scoring
    first, the others beside it."""
    from engine.bench.runner import score_rows

    scores = out["scores"]
    order = [out["scoring"], *(n for n in scores if n != out["scoring"])]
    headline = ("recall_any@", "recall_all@", "ndcg_any@", "evidence_recall@")
    rows = [(k, v) for k, v in score_rows(scores, order)
            if k.endswith(("@5", "@10")) and k.split("_", 1)[1].startswith(headline)]
    width = max((len(k) for k, _ in rows), default=10)
    lines = [f"run {out['run_id']} ({out['questions']} questions, {out['failures']} failed); "
             f"scoring {out['scoring']} (default)" + "".join(f", {n} beside it" for n in order[1:]),
             *(f"  {n}: {out['labels'][n]}" for n in order),
             "  " + "metric".ljust(width) + "".join(f"  {n:>10}" for n in order)]
    for key, values in rows:
        cells = ("–" if v == "" else "not scored" if v is None else f"{v:.4f}" for v in values)
        lines.append("  " + key.ljust(width) + "".join(f"  {c:>10}" for c in cells))
    return "\n".join(lines)


def cmd_log(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        rows = engine.curation_log(_scope(args), limit=args.limit)
    out = [{k: r[k] for k in ("id", "command", "target_type", "target_id", "actor", "note", "created_at", "undone_at",
                              "undo_of")} | {"rows": {t: len(v) for t, v in r["before"].get("rows", {}).items()}}
           for r in rows]
    _emit(args, {"log": out}, "\n".join(
        f"{r['id']:>5} {r['created_at']} {r['actor']:<9} {r['command']:<11} {r['target_type'] or ''} "
        f"{r['target_id'] or ''}{'  (undone)' if r['undone_at'] else ''}" for r in out) or "empty log")
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    from .snapshot import snapshot

    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        raise BadInput(f"--size must look like 1280x800, got {args.size!r}") from None
    paths = snapshot(args.out, db_path=args.db, size=(width, height), test_connection=args.test_connection)
    _emit(args, {"files": [str(p) for p in paths]}, "\n".join(str(p) for p in paths))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp_server import serve

    return serve(_db_path(args), _scope(args), extract=args.extract, embedder=args.embedder)


def _need_display() -> None:
    """Before Qt loads: without a reachable display it would abort the process (SIGABRT)."""
    from .display import display_problem

    problem = display_problem()
    if problem:
        raise BadInput(problem)


def cmd_gui(args: argparse.Namespace) -> int:
    _need_display()
    from .gui import run

    # No --db and no database yet: the first run builds the demo from resources/demo.
    return run(_db_path(args), demo_if_missing=args.db is None and "MEMLENS_DB" not in os.environ)


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import build_demo

    path = _db_path(args)
    if not args.no_gui:
        _need_display()  # before the build: it would be for nothing
    if path.exists() and args.rebuild:
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    if not path.exists():
        info = build_demo(path, progress=None if args.json else _progress)
        if not args.json:
            sys.stderr.write("\n")
    else:
        info = {"path": str(path), "existing": True}
    if args.no_gui:
        _emit(args, info, f"demo database at {path}: " + ", ".join(f"{k} {v}" for k, v in info.items() if k != "path"))
        return 0
    from .gui import run

    return run(path)


COMMANDS = {"demo": cmd_demo, "ingest": cmd_ingest, "show": cmd_show, "export": cmd_export, "reembed": cmd_reembed,
            "status": cmd_status, "gui": cmd_gui, "facts": cmd_facts, "profile": cmd_profile,
            "conflicts": cmd_conflicts, "resolve": cmd_resolve, "undo": cmd_undo, "redo": cmd_undo,
            "forget": cmd_forget, "retract": cmd_retract, "log": cmd_log, "recall": cmd_recall, "trace": cmd_trace,
            "perf": cmd_perf, "bench": cmd_bench}

COMMANDS["snapshot"] = cmd_snapshot
COMMANDS["mcp"] = cmd_mcp


def cmd_import(args: argparse.Namespace) -> int:
    from engine.embed import make_embedder
    from engine.importers.neoagent import import_neoagent, open_source
    from engine.memory import MemoryEngine

    source = open_source(args.path, wait=args.wait)  # validated before the memlens DB is created or touched
    try:
        embedder = make_embedder(args.embedder)
        with MemoryEngine(_db_path(args), embedder=embedder) as engine:
            report = import_neoagent(engine, source, user=args.user, agent=args.agent,
                                     progress=None if args.json else _progress)
            engine.wait_for_background()
    finally:
        source.close()
    if not args.json:
        sys.stderr.write("\n")
    _emit(args, report.as_dict(), report.summary())
    return 0


COMMANDS["import"] = cmd_import


def cmd_health(args: argparse.Namespace) -> int:
    from engine.health import CHECKS

    if args.limit < 0 or args.offset < 0:
        raise BadInput("--limit and --offset must not be negative")
    for name in args.check or ():
        if name not in CHECKS:
            raise BadInput(f"unknown health check {name!r} (one of {', '.join(CHECKS)})")
    if args.synthetic is not None:
        from engine.bench.perf import run_health_perf

        if args.synthetic < 2:
            raise BadInput("--synthetic needs at least 2 memories")
        out = run_health_perf(args.synthetic, workdir=args.workdir, keep=str(args.keep) if args.keep else None,
                              progress=None if args.json else _progress)
        if not args.json:
            sys.stderr.write("\n")
        lines = [f"{out['memories']:,} memories (built in {out['build_seconds']} s): every check in "
                 f"{out['seconds']['first']} s, again in {out['seconds']['second']} s"]
        lines += [f"  {n:<26} {c['count']:>7,}  {c['seconds']:>7.3f} s" for n, c in out["checks"].items()]
        _emit(args, out, "\n".join(lines))
        return 0
    if args.keep is not None:
        raise BadInput("--keep goes with --synthetic")
    with _open_existing(args) as engine:
        report = engine.health(_scope(args), checks=args.check, limit=args.limit, offset=args.offset,
                               record=None if args.check else "cli")
    d = report.as_dict()
    lines = [f"store health of {_scope(args).user_id}/{_scope(args).agent_id} in {d['seconds']:.2f} s"]
    for name, c in d["checks"].items():
        lines.append(f"{c['count']:>7,}  {name:<26} {c['title']}")
        lines += [f"           - {item['summary']}" for item in c["items"][:5]]
        if c["count"] > 5 and c["items"]:
            lines.append(f"           ... {c['count'] - min(5, len(c['items'])):,} more (--check {name} --json)")
    _emit(args, d, "\n".join(lines))
    return 0


COMMANDS["health"] = cmd_health


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
        return COMMANDS[args.command](args)
    except BadInput as exc:
        sys.stderr.write(f"memlens: {exc}\n")
        return 2
    except Busy as exc:  # DatabaseBusy too
        sys.stderr.write(f"memlens: {exc}\n")
        return EX_TEMPFAIL
    except MemlensError as exc:
        sys.stderr.write(f"memlens: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("memlens: interrupted\n")
        return 130
    except Exception as exc:  # an internal error: one line, the traceback only on request
        import apsw

        if isinstance(exc, apsw.BusyError):  # a lock met outside Database.write(), e.g. by a read
            sys.stderr.write(f"memlens: busy: the database is locked by another process ({exc}); retry\n")
            return EX_TEMPFAIL
        if setting_value("debug"):
            raise
        sys.stderr.write(f"memlens: internal error: {exc.__class__.__name__}: {exc} (set MEMLENS_DEBUG=1 for details)\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
