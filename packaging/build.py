"""Build the one-dir PyInstaller bundle (dist/memlens/) and prove it works: `make package`.

    python packaging/build.py                 # build + desktop files + smoke check
    python packaging/build.py --smoke-only    # check an existing dist/memlens
    python packaging/build.py --no-smoke      # build only (not what `make package` does)

Run it with the project venv's Python (PyInstaller comes from the `package` extra). The smoke
check runs the *bundled* launcher from a temporary folder with a clean environment (offscreen
Qt, no MEMLENS_RESOURCES, no PYTHONPATH, a throwaway settings file), so it only passes when
the bundle carries everything itself:

1. `memlens --version` prints the source tree's version;
2. `memlens ingest` of a chat and a note the check writes, with the bundled int8 model
   (onnxruntime + tokenizers), apsw/FTS5 and the heuristic extractor;
3. `memlens recall` finds the fact it should (faiss + the model at query time), ranking the
   same memories with the same scores as the source tree does on the same database;
4. `memlens bench locomo --workers 2` on the bundled demo benchmark (spawned worker processes);
   `memlens mcp`: an MCP stdio session (initialize, tools/list, a memory_recall call);
5. `memlens demo --no-gui` builds the demo database from the bundled corpus;
6. `memlens snapshot --db` on both databases writes window.png and one PNG per pane; each must
   be non-blank, the set must equal the source tree's, and each must match the source tree's
   own snapshot of the same database (a pane whose imports broke in the bundle renders blank
   or shows an error, and so differs).

It also checks that no test, development tool or virtualenv went into the bundle. Any failure
exits non-zero. The bundle size and the build time are printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGING = ROOT / "packaging"
SPEC = PACKAGING / "memlens.spec"
APP_ID = "io.github.memlens.Memlens"
ICON_SIZES = (16, 32, 48, 64, 128, 256, 512)

# Modules that must never be in the bundle (tests and development tools).
FORBIDDEN_MODULES = ("tests", "pytest", "_pytest", "pytestqt", "hypothesis", "importlinter", "grimp")
# How different a bundled pane snapshot may be from the source tree's (fraction of pixels).
MAX_PANE_DIFF = 0.01


class SmokeFailure(Exception):
    pass


def log(message: str) -> None:
    sys.stderr.write(f"[package] {message}\n")
    sys.stderr.flush()


def source_version() -> str:
    text = (ROOT / "engine" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.M)
    if not match:
        raise SystemExit("engine/__init__.py has no __version__")
    return match.group(1)


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# -- build -------------------------------------------------------------------------------------

def build(dist: Path, work: Path) -> float:
    try:
        import PyInstaller  # noqa: F401
    except ImportError:
        raise SystemExit("PyInstaller is not installed in this Python: pip install -e '.[package]'") from None
    start = time.monotonic()
    cmd = [sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
           "--distpath", str(dist), "--workpath", str(work), str(SPEC)]
    log(" ".join(cmd))
    subprocess.run(cmd, cwd=ROOT, check=True)
    return time.monotonic() - start


def add_desktop_files(bundle: Path) -> None:
    """share/ beside the launcher, laid out like a prefix: copy it into ~/.local/share or /usr/share."""
    share = bundle / "share"
    if share.exists():
        shutil.rmtree(share)
    (share / "applications").mkdir(parents=True)
    (share / "metainfo").mkdir(parents=True)
    shutil.copyfile(PACKAGING / "memlens.desktop", share / "applications" / f"{APP_ID}.desktop")
    shutil.copyfile(PACKAGING / f"{APP_ID}.metainfo.xml", share / "metainfo" / f"{APP_ID}.metainfo.xml")
    for size in ICON_SIZES:
        target = share / "icons" / "hicolor" / f"{size}x{size}" / "apps"
        target.mkdir(parents=True)
        shutil.copyfile(ROOT / "resources" / "icons" / f"memlens-{size}.png", target / f"{APP_ID}.png")


# -- checks ------------------------------------------------------------------------------------

def check_contents(bundle: Path, work: Path) -> None:
    internal = bundle / "_internal"
    res = internal / "resources"
    needed = [res / "fonts" / "DejaVuSans.ttf", res / "fonts" / "DejaVuSansMono.ttf",
              res / "models" / "all-MiniLM-L6-v2-int8" / "model.onnx",
              res / "models" / "all-MiniLM-L6-v2-int8" / "tokenizer.json",
              res / "models" / "all-MiniLM-L6-v2-int8" / "SHA256SUMS",
              res / "demo" / "curated-facts.json", res / "demo" / "bench-demo.json"]
    needed += [res / "icons" / f"memlens-{s}.png" for s in ICON_SIZES]
    missing = [str(p.relative_to(bundle)) for p in needed if not p.is_file()]
    if missing:
        raise SmokeFailure(f"missing from the bundle: {missing}")
    for name in (".venv", "tests", ".git", ".pytest_cache", ".hypothesis", "memlens.egg-info"):
        if (internal / name).exists():
            raise SmokeFailure(f"the bundle carries {name}/")
    # The pure-Python modules live in the PYZ archive; its table of contents is in the work dir.
    toc = work / "memlens" / "PYZ-00.toc"
    if toc.is_file():
        names = set(re.findall(r"\('([\w.]+)',", toc.read_text(encoding="utf-8", errors="replace")))
        bad = sorted(n for n in names if n.split(".")[0] in FORBIDDEN_MODULES)
        if bad:
            raise SmokeFailure(f"development modules in the bundle: {bad[:10]}")
        for required in ("app.cli", "app.snapshot", "engine.memory", "engine.embed.local", "ui.main_window"):
            if required not in names:
                raise SmokeFailure(f"{required} is not in the bundle")


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMLENS_", "PYTHON", "OPENAI_", "QT_", "VIRTUAL_ENV", "LD_LIBRARY_PATH"))}
    env.update({
        "QT_QPA_PLATFORM": "offscreen",
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "MEMLENS_SETTINGS_FILE": str(home / "settings.conf"),
    })
    return env


def run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    log("$ " + " ".join(str(c) for c in cmd))
    proc = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SmokeFailure(f"{Path(cmd[0]).name} {' '.join(map(str, cmd[1:3]))} exited {proc.returncode}:\n"
                           f"{proc.stderr.strip()[-3000:]}")
    return proc.stdout


CHAT = [
    {"role": "user", "name": "Lena", "content": "Hi, I'm Lena. I live in Hamburg and I work at Airbus as an engineer.",
     "timestamp": "2024-05-01T09:00:00Z"},
    {"role": "assistant", "content": "Nice to meet you, Lena!", "timestamp": "2024-05-01T09:00:10Z"},
    {"role": "user", "name": "Lena", "content": "Update: I moved to Lisbon last week. I also adopted a dog named Pixel.",
     "timestamp": "2024-06-12T18:30:00Z"},
    {"role": "user", "name": "Lena", "content": "I like sailing and I'm planning a trip to Porto in August.",
     "timestamp": "2024-06-20T08:15:00Z"},
]
CLI = "import sys; from app.cli import main; sys.exit(main(sys.argv[1:]))"  # the source tree's CLI
NOTE = ("# Lena's notes\n\nPixel is a border collie. He loves the beach at Cascais.\n\n"
        "## Work\n\nShip the wing-load report by Friday.\n")


def smoke(bundle: Path) -> dict:
    exe = bundle / "memlens"
    if not os.access(exe, os.X_OK):
        raise SmokeFailure(f"{exe} is missing or not executable")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="memlens-smoke-") as tmp_name:
        tmp = Path(tmp_name)
        env = clean_env(tmp / "home")

        out = run([exe, "--version"], env, tmp).strip()
        if out != f"memlens {source_version()}":
            raise SmokeFailure(f"--version printed {out!r}, expected 'memlens {source_version()}'")

        data = tmp / "input"
        data.mkdir()
        (data / "lena.json").write_text(json.dumps({"messages": CHAT}), encoding="utf-8")
        (data / "notes.md").write_text(NOTE, encoding="utf-8")
        db = tmp / "smoke.db"
        ingest = json.loads(run([exe, "ingest", data / "lena.json", data / "notes.md", "--db", db,
                                 "--extract", "heuristic", "--json"], env, tmp))
        if ingest["documents"] != 2 or ingest["memories"] < 5 or ingest["failed"]:
            raise SmokeFailure(f"ingest made {ingest}")
        status = json.loads(run([exe, "status", "--db", db, "--json"], env, tmp))
        query = ["recall", "Which city does Lena live in now?", "--db", db, "--json"]
        recall = json.loads(run([exe, *query], env, tmp))
        texts = [r["text"] for r in recall["results"]]
        if not any("Lisbon" in t for t in texts):
            raise SmokeFailure(f"recall did not find Lisbon: {texts}")
        # The source tree, on the same database, must rank the same memories with the same scores:
        # the bundle runs the same model, tokenizer and index, not merely something that works.
        src_env = dict(env, PYTHONPATH=str(ROOT))
        source = json.loads(run([sys.executable, "-c", CLI, *query], src_env, tmp))
        ours = [(r["memory_id"], r["score"]) for r in recall["results"]]
        theirs = [(r["memory_id"], r["score"]) for r in source["results"]]
        if [m for m, _ in ours] != [m for m, _ in theirs] or any(
                abs(a - b) > 1e-3 for (_, a), (_, b) in zip(ours, theirs)):
            raise SmokeFailure(f"recall differs from the source tree's: {ours} != {theirs}")

        bench_data = bundle / "_internal" / "resources" / "demo" / "bench-demo.json"
        bench = json.loads(run([exe, "bench", "locomo", "--data", bench_data, "--workers", "2",
                                "--db", tmp / "bench.db", "--json"], env, tmp))
        if bench["status"] != "done" or bench["failures"] or not bench["questions"]:
            raise SmokeFailure(f"bench run: status {bench['status']}, {bench['failures']} failures")

        mcp = mcp_session(exe, db, env, tmp)

        demo_db = tmp / "demo.db"
        demo = json.loads(run([exe, "demo", "--no-gui", "--db", demo_db, "--json"], env, tmp))
        if not demo.get("documents") or not demo.get("facts"):
            raise SmokeFailure(f"demo database: {demo}")

        panes = {}
        for label, path in (("smoke", db), ("demo", demo_db)):
            frozen_png = tmp / f"png-{label}-bundle"
            files = json.loads(run([exe, "snapshot", "--out", frozen_png, "--db", path, "--json"], env, tmp))["files"]
            # The same snapshot from the source tree, run by this Python, for comparison.
            source_png = tmp / f"png-{label}-source"
            run([sys.executable, "-c", CLI, "snapshot", "--out", source_png, "--db", path, "--json"], src_env, tmp)
            panes[label] = compare_snapshots(frozen_png, source_png, [Path(f).name for f in files])
    return {"seconds": round(time.monotonic() - started, 1), "ingest": ingest, "status": status["counts"],
            "recall_top": texts[:3], "bench_questions": bench["questions"], "mcp": mcp, "demo": demo,
            "snapshots": panes}


def mcp_session(exe: Path, db: Path, env: dict[str, str], cwd: Path, timeout: float = 120) -> dict:
    """`memlens mcp` over stdio: initialize, list the tools, call memory_recall (newline-delimited JSON-RPC)."""
    import threading

    log(f"$ {exe} mcp --db {db}  (initialize, tools/list, tools/call memory_recall)")
    proc = subprocess.Popen([str(exe), "mcp", "--db", str(db), "--extract", "heuristic"], env=env, cwd=cwd,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()

    def ask(msg_id: int, method: str, params: dict | None = None) -> dict:
        request = {"jsonrpc": "2.0", "id": msg_id, "method": method, **({"params": params} if params else {})}
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SmokeFailure(f"memlens mcp closed during {method}: {proc.stderr.read()[-2000:]}")
            reply = json.loads(line)
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise SmokeFailure(f"memlens mcp {method}: {reply['error']}")
                return reply["result"]

    try:
        init = ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "memlens-smoke", "version": "0"}})
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        tools = sorted(t["name"] for t in ask(2, "tools/list")["tools"])
        if "memory_recall" not in tools:
            raise SmokeFailure(f"memlens mcp lists no memory_recall tool: {tools}")
        called = ask(3, "tools/call", {"name": "memory_recall", "arguments": {"query": "Where does Lena live?"}})
        text = json.dumps(called)
        if called.get("isError") or "Lisbon" not in text:
            raise SmokeFailure(f"memlens mcp memory_recall: {text[:500]}")
    finally:
        timer.cancel()
        if proc.stdin and not proc.stdin.closed:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            stream.close()
    return {"protocol": init.get("protocolVersion"), "tools": tools}


def _pixels(path: Path):
    import numpy as np
    from PySide6.QtGui import QImage

    img = QImage(str(path))
    if img.isNull():
        raise SmokeFailure(f"{path.name} is not a readable PNG")
    img = img.convertToFormat(QImage.Format.Format_RGB32)
    w, h = img.width(), img.height()
    arr = np.frombuffer(img.constBits(), dtype=np.uint8, count=img.sizeInBytes())
    return arr.reshape(h, img.bytesPerLine() // 4, 4)[:, :w, :3].copy()


def compare_snapshots(frozen: Path, source: Path, frozen_files: list[str]) -> dict[str, dict]:
    import numpy as np

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    _app = QGuiApplication.instance() or QGuiApplication([sys.argv[0]])  # noqa: F841 - QImage needs it
    expected = sorted(p.name for p in source.glob("*.png"))
    got = sorted(p.name for p in frozen.glob("*.png"))
    if got != expected or sorted(frozen_files) != expected:
        raise SmokeFailure(f"the bundle's snapshot wrote {got}, the source tree's {expected}")
    if "window.png" not in got or len(got) < 2:
        raise SmokeFailure(f"too few snapshots: {got}")
    report = {}
    for name in expected:
        a, b = _pixels(frozen / name), _pixels(source / name)
        flat = a.reshape(-1, 3)
        colours, counts = np.unique(flat, axis=0, return_counts=True)
        dominant = counts.max() / flat.shape[0]
        if len(colours) < 16 or dominant > 0.985:
            raise SmokeFailure(f"{name} is blank ({len(colours)} colours, {dominant:.1%} one colour)")
        if a.shape != b.shape:
            raise SmokeFailure(f"{name}: {a.shape[1]}x{a.shape[0]} in the bundle, {b.shape[1]}x{b.shape[0]} from source")
        differ = float((np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=2) > 32).mean())
        if differ > MAX_PANE_DIFF:
            raise SmokeFailure(f"{name} differs from the source tree's snapshot in {differ:.1%} of its pixels")
        report[name] = {"colours": int(len(colours)), "differs": round(differ, 4)}
    return report


# -- main --------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="output folder (default dist/)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "pyinstaller", help="PyInstaller work folder")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--smoke-only", action="store_true", help="check an existing bundle, do not build")
    group.add_argument("--no-smoke", action="store_true", help="build without the smoke check")
    args = parser.parse_args(argv)
    bundle = args.dist.resolve() / "memlens"
    work = args.work.resolve()

    build_seconds = None
    if not args.smoke_only:
        build_seconds = build(args.dist.resolve(), work)
        add_desktop_files(bundle)
        log(f"built {bundle} in {build_seconds:.0f} s")
    result: dict = {"bundle": str(bundle), "bytes": dir_size(bundle) if bundle.is_dir() else 0}
    if build_seconds is not None:
        result["build_seconds"] = round(build_seconds, 1)
    if not args.no_smoke:
        try:
            check_contents(bundle, work)
            result["smoke"] = smoke(bundle)
        except (SmokeFailure, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as exc:
            log(f"SMOKE CHECK FAILED: {exc}")
            return 1
        log(f"smoke check passed in {result['smoke']['seconds']} s")
    summary = f"bundle {bundle}: {human(result['bytes'])}"
    if build_seconds is not None:
        summary += f", built in {build_seconds:.0f} s"
    print(json.dumps(result, indent=2))
    log(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
