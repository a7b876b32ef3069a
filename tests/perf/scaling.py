"""Ingestion time against input size: a repeated fact and a long text file, through `memlens ingest`.

    python -m tests.perf.scaling [--repeat 1000,2000,6000] [--text-mb 1,10] [--embedder hashing] [--json]

--repeat N: a chat file of N turns in which every user turn states the same fact ("My favourite
colour is blue.") and every assistant turn answers "Noted." (extraction confirms the fact again in
every window). --text-mb M: a plain-text file of M million characters of prose paragraphs. Each
file is ingested into a fresh database with heuristic extraction by a separate `memlens ingest
--json` process; the figures are its own "seconds" (which include extraction), "embed_seconds",
"extract_seconds" and the process's wall time. Linear work shows as seconds growing with the
size, not faster. Prints figures; asserts nothing. The machine may be shared: compare sizes
within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WORDS = ("the a of to and in that it was for on with as his her they at be this from have or by one had not but "
         "what all were when we there can an your which their said if do will each about how up out them then she "
         "many some so these would other into has more two like him see time could no make than first been its "
         "who now people my made over did down only way find use may water long little very after words called "
         "just where most know").split()
NAMES = ("Alice", "Bob", "Carol Smith", "Dr. Ana Lima", "New York", "Lisbon", "Paris")


def repeated_fact(path: Path, turns: int) -> Path:
    messages = [{"role": "user", "content": "My favourite colour is blue."} if i % 2 == 0 else
                {"role": "assistant", "content": "Noted."} for i in range(turns)]
    path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    return path


def prose(path: Path, chars: int, seed: int = 7) -> Path:
    rng = random.Random(seed)
    paragraphs, size = [], 0
    while size < chars:
        sentences = []
        for _ in range(rng.randint(3, 8)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(6, 20))]
            if rng.random() < 0.3:
                words.insert(rng.randint(0, len(words)), rng.choice(NAMES))
            sentence = " ".join(words)
            sentences.append(sentence[0].upper() + sentence[1:] + ".")
        paragraph = " ".join(sentences)
        paragraphs.append(paragraph)
        size += len(paragraph) + 2
    path.write_text("\n\n".join(paragraphs)[:chars], encoding="utf-8")
    return path


def ingest(source: Path, work: Path, embedder: str) -> dict[str, Any]:
    db = work / f"{source.stem}.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMLENS_EMBEDDER": embedder,
           "XDG_DATA_HOME": str(work / "xdg"), "MEMLENS_SETTINGS_FILE": str(work / "s.conf")}
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "app.cli", "ingest", str(source), "--db", str(db),
                           "--extract", "heuristic", "--json"], env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        return {"file": source.name, "error": proc.stderr.strip()[-300:]}
    d = json.loads(proc.stdout)
    ex = d["extraction"] or {}
    return {"file": source.name, "bytes": source.stat().st_size, "chunks": d["chunks"],
            "seconds": d["seconds"], "embed_seconds": d["embed_seconds"], "extract_seconds": d["extract_seconds"],
            "wall_seconds": round(wall, 2), "facts_inserted": ex.get("facts_inserted"),
            "facts_reinforced": ex.get("facts_reinforced")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.perf.scaling", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", default="1000,2000,6000", help="turn counts ('' for none)")
    parser.add_argument("--text-mb", default="1,10", help="text sizes in millions of characters ('' for none)")
    parser.add_argument("--embedder", default="hashing", choices=("hashing", "local"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="memlens-scaling-") as tmp:
        work = Path(tmp)
        for n in [int(x) for x in args.repeat.split(",") if x.strip()]:
            rows.append({"case": f"{n} turns repeating one fact",
                         **ingest(repeated_fact(work / f"repeat-{n}.json", n), work, args.embedder)})
        for mb in [float(x) for x in args.text_mb.split(",") if x.strip()]:
            rows.append({"case": f"{mb:g} MB text file",
                         **ingest(prose(work / f"text-{mb:g}mb.txt", int(mb * 1_000_000)), work, args.embedder)})
    if args.json:
        print(json.dumps({"embedder": args.embedder, "runs": rows}))
    else:
        for row in rows:
            print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
