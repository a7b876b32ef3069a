"""A small, healthy memory for the store-health tests, built only through engine APIs: a chat with
facts grounded in their turns (one derived from two premises, one plan that expires in the
future), an external email that holds no instruction, and a second user's scope. Every health
check reports nothing on it; each test plants one problem on a private copy."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from engine.consolidate import consolidate
from engine.embed.hashing import HashingEmbedder
from engine.extract.model import Candidate, SourceChunk
from engine.ingest.model import ParsedChunk, ParsedDocument
from engine.memory import MemoryEngine
from engine.scope import Scope

ANA = Scope.default("ana", "bot")
BOB = Scope.default("bob", "bot")
EMB = HashingEmbedder(64)
NOW = "2024-06-01T00:00:00Z"  # the checks' "now": the plan below is still ahead of it

# (speaker, role, line, [(predicate, object, evidence, confidence, relation, premises, forget_after)])
TURNS = [
    ("Ana", "user", "I live in Berlin and I work at Siemens as an engineer.",
     [("lives_in", "Berlin", "I live in Berlin", 0.8, "new", [], None),
      ("works_at", "Siemens", "I work at Siemens", 0.8, "new", [], None)]),
    ("assistant", "assistant", "Good to know that you are settled in Berlin.", []),
    ("Ana", "user", "I have a dog named Rex and he loves long walks along the river.",
     [("has_pet", "Rex", "I have a dog named Rex", 0.8, "new", [], None),
      ("walks_dog_at", "the river", "he loves long walks along the river", 0.7, "derives",
       ["Ana has pet Rex.", "Ana lives in Berlin."], None)]),
    ("Ana", "user", "My sister Lea visits me every summer with her kids.",
     [("sibling_of", "Lea", "My sister Lea", 0.8, "new", [], None)]),
    ("Ana", "user", "I plan to visit Lisbon in September with my sister.",
     [("plans_to", "visit Lisbon in September", "I plan to visit Lisbon in September", 0.7, "new", [],
       "2024-10-01T00:00:00Z")]),
]


def chat_document(turns, *, external_id: str = "c1", uri: str = "chat://ana") -> ParsedDocument:
    parts, chunks, pos = [], [], 0
    for i, (speaker, role, line, _facts) in enumerate(turns):
        text = f"{speaker}: {line}"
        chunks.append(ParsedChunk(pos, pos + len(text), "message", speaker=speaker, role=role, message_id=f"{external_id}:{i}",
                                  source_time=f"2024-03-{i + 1:02d}T09:00:00Z",
                                  trust="user" if role == "user" else "assistant"))
        parts.append(text)
        pos += len(text) + 1
    return ParsedDocument(text="\n".join(parts), source_type="chat", trust="user", uri=uri, title="Chat with Ana",
                          source_time="2024-03-01T09:00:00Z", external_id=external_id, chunks=chunks)


def email_document(body: str, *, external_id: str, subject: str = "Hello") -> ParsedDocument:
    header = f"From: Ben <ben@example.org>\nSubject: {subject}\n\n"
    text = header + body
    return ParsedDocument(text=text, source_type="email", trust="external", uri=f"mail://{external_id}", title=subject,
                          source_time="2024-03-10T09:00:00Z", external_id=external_id,
                          chunks=[ParsedChunk(len(header), len(text), "message", speaker="Ben <ben@example.org>",
                                              source_time="2024-03-10T09:00:00Z", trust="external")])


def add_chat(engine: MemoryEngine, scope: Scope, turns, **doc) -> int:
    """Ingest the turns as one chat document, then consolidate their facts; returns the document id."""
    did = engine.ingest_documents([chat_document(turns, **doc)], scope=scope).document_ids[0]
    for ch, (_speaker, _role, _line, facts) in zip(engine.store.chunks_of(scope, did), turns):
        view = SourceChunk(ch.id, did, ch.text, ch.start, ch.end, ch.speaker, ch.role, ch.trust, ch.source_time)
        batch = [(view, Candidate(text=f"Ana {p.replace('_', ' ')} {o}.", subject="Ana", predicate=p, object=o,
                                  evidence=ev, confidence=c, relation=rel, premises=list(prem), forget_after=fa,
                                  category="plan" if p == "plans_to" else "other"))
                 for p, o, ev, c, rel, prem, fa in facts]
        if batch:
            consolidate(engine.store, scope, EMB, batch)
    return did


def build(path: Path) -> Path:
    with open_engine(path) as engine:
        add_chat(engine, ANA, TURNS)
        engine.ingest_documents([email_document("Hi Ana, the climbing group meets on Thursday at the hall.",
                                                external_id="mail-1")], scope=ANA)
        add_chat(engine, BOB, TURNS[:1], uri="chat://bob")
    return path


def open_engine(path: Path) -> MemoryEngine:
    return MemoryEngine(path, embedder=EMB, llm=False, background_reembed=False)


@contextlib.contextmanager
def copy_of(template: Path, tmp_path: Path):
    path = tmp_path / "health.db"
    shutil.copy(template, path)
    engine = open_engine(path)
    try:
        yield engine
    finally:
        engine.close()


def fact(engine: MemoryEngine, scope: Scope, predicate: str, obj: str) -> dict:
    return next(f for f in engine.facts(scope, history=True) if f["predicate"] == predicate and f["object"] == obj)
