"""Long-term memory for a Python agent with memlens: add turns, recall, profile, explain, forget.

    .venv/bin/python examples/agent_memory.py            # the bundled local embedding model (offline)
    MEMLENS_EMBEDDER=hashing .venv/bin/python examples/agent_memory.py   # no model at all (instant)

(the Python memlens is installed in: in a checkout, the venv `make install` made)

With MEMLENS_LLM_BASE_URL (and MEMLENS_LLM_MODEL) set, facts are extracted by that model;
without, by the offline heuristic extractor. The database lives in a temporary directory;
open it afterwards with `memlens gui --db PATH` to see why each memory was stored.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

try:
    from engine.memory import MemoryEngine
except ModuleNotFoundError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    try:
        from engine.memory import MemoryEngine
    except ModuleNotFoundError as exc:  # a Python without memlens's dependencies
        sys.exit(f"agent_memory.py: no module {exc.name!r} in {sys.executable}: run it with the Python memlens is "
                 "installed in, e.g. .venv/bin/python examples/agent_memory.py")
from engine.scope import Scope

CONVERSATION = [
    # (role, text, ISO-8601 time): two sessions, months apart
    ("user", "Hi, I'm Ana. I live in Berlin and I work as a nurse.", "2024-01-10T09:00:00Z"),
    ("assistant", "Nice to meet you, Ana! How can I help?", "2024-01-10T09:00:04Z"),
    ("user", "I love hiking, and I'm allergic to peanuts.", "2024-01-10T09:01:00Z"),
    ("assistant", "Noted: hiking, and no peanuts in any recipe I suggest.", "2024-01-10T09:01:03Z"),
    ("user", "Big news: I moved to Lisbon last week!", "2024-06-02T18:30:00Z"),
    ("assistant", "Congratulations on the move to Lisbon!", "2024-06-02T18:30:05Z"),
]


def main() -> int:
    scope = Scope.default(user="ana", agent="travel-bot")  # whose memory every call reads and writes
    with tempfile.TemporaryDirectory(prefix="memlens-example-") as tmp:
        db = Path(tmp) / "agent-memory.db"
        with MemoryEngine(db) as memory:  # thread-safe: one engine may serve every agent thread
            # 1. After each exchange, hand the new turns to memory (here: one call per session).
            for session in (CONVERSATION[:4], CONVERSATION[4:]):
                added = memory.add_turns([{"role": r, "content": t, "timestamp": ts} for r, t, ts in session],
                                         scope=scope, conversation="travel chat")
                print(f"stored turns as memories {added.memory_ids}; new facts {added.fact_ids}"
                      f"{'; replaced facts ' + str(added.superseded_fact_ids) if added.superseded_fact_ids else ''}")

            # 2. Before answering, recall. origin="agent" strengthens what is used and keeps only
            #    a hash of the query in the trace.
            question = "Where does the user live now, and are there foods to avoid?"
            result = memory.recall(question, scope=scope, origin="agent", k=5)
            print(f"\nrecall trace {result.trace.id}: context for the prompt "
                  f"({result.context_tokens} tokens, each line cites its memory):")
            print(result.context_text)

            # 3. The profile: what is known, each line backed by facts.
            profile = memory.profile(scope)
            print("\nprofile:")
            for line in profile.lines():
                print(f"  {line.text}  (facts {line.fact_ids})")

            # 4. Why was the top memory recalled? (read-only)
            top = result.results[0]["memory_id"]
            why = memory.explain(question, top, scope=scope, k=5, persist=False)
            print(f"\nexplain m{top}: {why['verdict']} - {why['detail']}")

            # 5. Forget on request: soft, logged, undoable by the operator in the inspector.
            done = memory.curator(scope, actor="agent").forget(top, reason="example: the user asked")
            print(f"forgot m{top} (curation log entry {done.log_id})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
