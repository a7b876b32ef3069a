"""Prompt module v2: extract-v1, plus the value an update replaced.

An update that names what it replaced ("I switched from VS Code to Neovim", "sold the Golf and
bought a Tesla", "I left Acme and joined Globex", "I'm not vegetarian anymore") lets reconcile
retire exactly that value, even for predicates that hold several values at once, and keep it as
history when nothing held it yet. The prompt also says what is not a change: someone else's,
a plan or hypothetical, a visit, and a change the speaker takes back. v1 stays for the facts it
produced (their prompt_version says which one did).
"""

from __future__ import annotations

import copy
from typing import Any

from ..extract.model import Candidate, SourceChunk
from . import extract_v1

VERSION = "extract-v2"
TASK = extract_v1.TASK
SCHEMA_NAME = extract_v1.SCHEMA_NAME

SCHEMA: dict[str, Any] = copy.deepcopy(extract_v1.SCHEMA)
_ITEM = SCHEMA["properties"]["memories"]["items"]
_ITEM["required"] = [*_ITEM["required"], "replaces"]
_ITEM["properties"]["replaces"] = {"type": ["string", "null"]}

SYSTEM = extract_v1.SYSTEM.replace(
    '- relation: "updates" when the speaker states a change',
    '- replaces: for an update, the earlier value it replaces when the text names it ("I switched from VS Code '
    'to Neovim" -> "VS Code"; "sold the Golf and bought a Tesla" -> "Golf"; "I left Acme and joined Globex" -> '
    '"Acme"; "I quit tennis, only padel now" -> "tennis"); for an ending with no new value ("I quit smoking", '
    '"I\'m not vegetarian anymore") give object "not <value>" and replaces "<value>"; else null;\n'
    '- relation: "updates" when the speaker states a change',
) + """

Not a change of the speaker's facts, so never "updates": someone else's change ("my sister moved to
Paris"), a plan or hypothetical ("I might move to Rome", "if I leave Acme"), a visit or one-off ("I was
in Porto last week", "we rented a Jeep"), and a change taken back ("actually we're staying in Berlin":
the earlier value still holds; return it as "new")."""
assert "replaces:" in SYSTEM, "the v1 prompt's relation line moved: update the anchor above"


def build_messages(window: list[SourceChunk]) -> list[dict[str, str]]:
    messages = extract_v1.build_messages(window)
    messages[0] = {"role": "system", "content": SYSTEM}
    return messages


def parse(data: dict[str, Any], window: list[SourceChunk], *, model: str | None) -> list[tuple[SourceChunk, Candidate]]:
    """v1's reading of the response, plus each update's replaced value."""
    out = []
    for chunk, item in extract_v1.items(data, window):
        cand = extract_v1.candidate(item, model, VERSION)
        old = item.get("replaces")
        if cand.relation == "updates" and isinstance(old, str) and old.strip():
            cand.replaces = old.strip()
            cand.replaces_text = f"{cand.subject} had {cand.replaces} before."
        out.append((chunk, cand))
    return out
