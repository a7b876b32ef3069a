"""Text that reads as an instruction to the AI (a prompt injection), in one place.

Two levels. INSTRUCTION is unambiguous ("ignore previous instructions", "system prompt", chat
markup): no fact is read from a chunk that holds it, whoever wrote it. WEAK_INSTRUCTION is
phrasing a person may use innocently ("you must", "the user likes", "send me the"): a sentence
holding it is not read as a fact, and external text (documents, mail, tools) holding it is never
stored as a fact at all. The heuristic extractor, reconciliation and the store-health check all
ask here, so they agree on what an injection is.
"""

from __future__ import annotations

import re

INSTRUCTION = re.compile(
    r"(?i)ignore\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?(?:previous|prior|above|earlier|preceding)\s+"
    r"(?:instructions?|prompts?|messages?|rules?)"
    r"|disregard\s+(?:all\s+|any\s+)?(?:the\s+|your\s+)?(?:previous|prior|above|earlier)"
    r"|forget\s+(?:all\s+)?(?:your|the|previous)\s+(?:instructions|rules)"
    r"|system\s+prompt|\bassistant\s*:|(?:^|\n)\s*(?:system|ai|bot)\s*:"
    r"|the\s+user\s+(?:wants|would\s+like|asked)\s+you\s+to|<\|im_(?:start|end)\|>|\[/?INST\]"
    r"|<\|?(?:system|assistant)\|?>"
    r"|\byou\s+are\s+now\b|\byou\s+(?:are\s+required\s+to|will\s+now)\b|\bnew\s+instructions\b"
    r"|\bdeveloper\s+mode\b|\bjailbreak"
    r"|\b(?:add|store|save|write|put|record)\s+(?:this|the\s+following|that)\b[^.\n]{0,40}\bmemor(?:y|ies)\b"
    r"|\bupdate\s+(?:your|the\s+user'?s?)\s+(?:memory|memories|profile)\b"
)
WEAK_INSTRUCTION = re.compile(
    r"(?i)\byou\s+(?:must|should)\b|\byou\s+will\s+(?:always|never)\b|\bfrom\s+now\s+on,?\s+(?:you|always|never)\b"
    r"|\bas\s+an\s+ai\b|\bremember\s+that\s+the\s+user\b|\bthe\s+user\s+(?:is|has|lives|works|likes|prefers|wants)\b"
    r"|\b(?:AI|assistant|chatbot|model),?\s+(?:please\s+)?(?:note|remember|record)\b"
    r"|\bdisregard\s+(?:the|all)\b|\bdo\s+not\s+tell\b|\bforward\s+(?:this|all|the)\b|\bsend\s+(?:me|us)\s+(?:the|your)\b"
)


def instruction_span(text: str, *, external: bool = True) -> tuple[int, int] | None:
    """Where text first reads as an instruction to the AI ([start, end) of the phrase), or None.
    External text is held to both levels; anyone else's only to the unambiguous one."""
    m = INSTRUCTION.search(text)
    if m is None and external:
        m = WEAK_INSTRUCTION.search(text)
    return (m.start(), m.end()) if m else None
