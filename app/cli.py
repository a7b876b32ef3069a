"""The memlens command line (ARCHITECTURE.md, "Command line contract").

Exit status: 0 success, 2 bad input (one line on stderr, nothing written), 1 internal error.
With --json exactly one JSON document goes to stdout; progress and logs go to stderr.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from engine import __version__
from engine.errors import BadInput, MemlensError
from engine.scope import SCOPE_TYPES, Scope

from .settings import default_db_path

INGEST_FORMATS = ("auto", "chat", "locomo", "longmemeval", "markdown", "text", "email", "code")
EXTRACT_MODES = ("none",)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse prints usage + exits 2; keep it one line
        raise BadInput(f"{self.prog}: {message}")


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
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p = sub.add_parser("gui", help="open the inspector")
    _common(p)

    p = sub.add_parser("ingest", help="ingest chat logs, benchmark files, notes, email and code")
    _common(p)
    _scoped(p)
    p.add_argument("paths", nargs="+", help="files or directories")
    p.add_argument("--format", default="auto", choices=INGEST_FORMATS)
    p.add_argument("--extract", default="none", choices=EXTRACT_MODES,
                   help="fact extraction (only 'none' until the facts issue lands)")
    p.add_argument("--embedder", default=None, choices=("local", "openai", "hashing"),
                   help="override $MEMLENS_EMBEDDER")

    p = sub.add_parser("show", help="one record with its provenance")
    _common(p)
    _scoped(p)
    p.add_argument("kind", choices=("memory", "document", "chunk"))
    p.add_argument("id", type=int)

    p = sub.add_parser("export", help="all memories, facts, relations and sources of a scope")
    _common(p)
    _scoped(p)
    p.add_argument("--format", default="json", choices=("json", "csv"))

    p = sub.add_parser("reembed", help="re-embed vectors made by another model (runs in the foreground)")
    _common(p)
    p.add_argument("--embedder", default=None, choices=("local", "openai", "hashing"))

    p = sub.add_parser("status", help="what the database holds")
    _common(p)
    _scoped(p)
    return parser


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


def _progress(fraction: float, message: str) -> None:
    sys.stderr.write(f"\r[{fraction:6.1%}] {message[:60]:<60}")
    sys.stderr.flush()


def cmd_ingest(args: argparse.Namespace) -> int:
    from engine.embed import make_embedder
    from engine.memory import MemoryEngine, parse_sources

    scope = _scope(args)
    docs = parse_sources(args.paths, fmt=args.format)  # all input validated before the DB is touched
    embedder = make_embedder(args.embedder)
    with MemoryEngine(_db_path(args), embedder=embedder) as engine:
        report = engine.ingest_documents(docs, scope=scope, progress=None if args.json else _progress)
        engine.wait_for_background()
    if not args.json:
        sys.stderr.write("\n")
    d = report.as_dict()
    _emit(args, d, (f"ingested {d['documents']} documents, {d['chunks']} chunks, {d['memories']} memories; "
                    f"{d['skipped']} unchanged, {d['failed']} failed in {d['seconds']:.2f}s"))
    return 0


def _open_existing(args: argparse.Namespace):
    from engine.memory import MemoryEngine

    path = _db_path(args)
    if not path.exists():
        raise BadInput(f"{path}: no such database (ingest something first, or pass --db)")
    return MemoryEngine(path, create=False)


def cmd_show(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        record = engine.show(args.kind, args.id, scope=_scope(args))
    _emit(args, record, json.dumps(record, indent=2, ensure_ascii=False, default=str))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with _open_existing(args) as engine:
        data = engine.export(_scope(args))
    if args.format == "json":
        sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
        return 0
    # CSV: one section per table, each with its own header, separated by a "# table" line.
    out = io.StringIO()
    for table, rows in data.items():
        out.write(f"# {table}\n")
        if rows:
            writer = csv.DictWriter(out, fieldnames=list(rows[0].keys()))
            writer.writeheader()
            for row in rows:
                writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()})
    sys.stdout.write(out.getvalue())
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
        scopes = [s.as_dict() for s in engine.store.scopes()]
    payload = {"db": str(engine.path), "bytes": size, "scope": scope.as_dict(), "counts": counts, "scopes": scopes}
    _emit(args, payload, "\n".join([f"{engine.path} ({size:,} bytes)"] + [f"  {k}: {v}" for k, v in counts.items()]))
    return 0


def cmd_gui(args: argparse.Namespace) -> int:
    from .gui import run

    return run(_db_path(args))


COMMANDS = {"ingest": cmd_ingest, "show": cmd_show, "export": cmd_export, "reembed": cmd_reembed,
            "status": cmd_status, "gui": cmd_gui}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            args = build_parser().parse_args(["gui", *argv])
        return COMMANDS[args.command](args)
    except BadInput as exc:
        sys.stderr.write(f"memlens: {exc}\n")
        return 2
    except MemlensError as exc:
        sys.stderr.write(f"memlens: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("memlens: interrupted\n")
        return 130
    except Exception as exc:  # an internal error: one line, the traceback only on request
        if os.environ.get("MEMLENS_DEBUG"):
            raise
        sys.stderr.write(f"memlens: internal error: {exc.__class__.__name__}: {exc} (set MEMLENS_DEBUG=1 for details)\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
