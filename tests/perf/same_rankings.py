"""Do two benchmark runs rank every question alike? For speed work that must change no ranking.

    python -m tests.perf.same_rankings A.db RUN_A B.db RUN_B

Reads bench_items of run RUN_A in A.db and run RUN_B in B.db (read-only; the runs of two code
versions, each on its own --db) and prints how many questions have the same `ranking` and
`retrieved` (memory ids and their message ids) in both, and which differ. Exit status 1 when any does.
"""

from __future__ import annotations

import sys

import apsw


def _items(db: str, run: int) -> dict[str, tuple[str, str]]:
    conn = apsw.Connection(f"file:{db}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        return {q: (ranking, retrieved) for q, ranking, retrieved in conn.execute(
            "SELECT question_id, ranking, retrieved FROM bench_items WHERE run_id = ?", (run,))}
    finally:
        conn.close()


def main(argv: list[str]) -> int:
    if len(argv) != 4 or not argv[1].isdigit() or not argv[3].isdigit():
        print("usage: python -m tests.perf.same_rankings A.db RUN_A B.db RUN_B", file=sys.stderr)
        return 2
    a, b = _items(argv[0], int(argv[1])), _items(argv[2], int(argv[3]))
    if not a or not b:
        print(f"no questions in run {argv[1] if not a else argv[3]}", file=sys.stderr)
        return 2
    differ = sorted(q for q in a.keys() & b.keys() if a[q] != b[q])
    alone = sorted(a.keys() ^ b.keys())
    same = len(a.keys() & b.keys()) - len(differ)
    print(f"{len(a)} / {len(b)} questions: {same} identical (ranking and retrieved), {len(differ)} differ,"
          f" {len(alone)} in one run only")
    for q in differ[:20]:
        print(f"  differs: {q}")
    return 1 if differ or alone else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
