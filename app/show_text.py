"""`memlens show KIND ID` for a reader: the record, where it came from, what it replaced.

The JSON form (`--json`) is MemoryEngine.show()'s document; this is the same content as text:
a heading line, the fields that say why the record exists and whether it still holds, and each
source span quoted as it stands in its document (indented, every line of it).
"""

from __future__ import annotations

from typing import Any

QUOTE = "    | "
LIST_LIMIT = 20  # chunks of a document, sources of a memory: the rest is counted


def _quote(text: str) -> list[str]:
    return [QUOTE + line for line in (text or "").splitlines() or [""]]


def _when(label: str, value: Any) -> str | None:
    return f"{label} {value}" if value else None


def _join(*parts: str | None) -> str:
    return " · ".join(p for p in parts if p)


def _title(title: Any) -> str:
    return f'"{title}"' if title else "(untitled)"


def _span(row: dict[str, Any]) -> str:
    chunk = f", chunk {row['chunk_id']}" if row.get("chunk_id") is not None else ""
    return f"[{row['start']}, {row['end']}){chunk}"


def _more(rows: list[Any], noun: str) -> list[str]:
    extra = len(rows) - LIST_LIMIT
    return [f"  ... {extra} more {noun} (--json has them all)"] if extra > 0 else []


def _times(times: list[dict[str, Any]]) -> list[str]:
    return [f"    time {t['text']!r} ({t['kind']}): {t['window_start']} .. {t['window_end']}" for t in times]


def _memory(d: dict[str, Any]) -> list[str]:
    m = d["memory"]
    lines = [f"memory {m['id']} · {m['kind']}" + (f" · {m['category']}" if m.get("category") else ""),
             "  " + _join(f"trust {m['trust']}", f"confidence {m['confidence']:.2f}",
                          f"importance {m['importance']:.2f}", "pinned" if m.get("pinned") else None,
                          "static" if m.get("is_static") else None, m.get("extraction_method")),
             "  " + _join(_when("source time", m.get("source_time")), _when("stored", m.get("created_at")),
                          _when("recalled", m.get("access_count") and f"{m['access_count']} times"))]
    if m.get("forgotten_at"):
        lines.append(f"  forgotten {m['forgotten_at']}: {m.get('forget_reason') or 'no reason given'}")
    elif m.get("forget_after"):
        lines.append(f"  expires {m['forget_after']}")
    if m.get("retracted_at"):
        lines.append(f"  retracted {m['retracted_at']} (its source was retracted)")
    lines += ["text:", *_quote(m["text"])]
    sources = d.get("sources") or []
    lines.append(f"sources ({len(sources)}):" if sources else "sources: none")
    for s in sources[:LIST_LIMIT]:
        same = s["text"] == m["text"]  # an episode is its span, word for word
        lines.append(f"  document {s['document_id']} {_title(s.get('document_title'))} ({s['source_type']}) {_span(s)}"
                     + (": the text above" if same else ""))
        lines += ([] if same else _quote(s["text"])) + _times(s.get("times") or [])
    lines += _more(sources, "sources")
    entities = d.get("entities") or []
    if entities:
        names = sorted({(e["name"], e["kind"]) for e in entities})
        lines.append("entities: " + ", ".join(f"{n} ({k})" for n, k in names))
    emb = d.get("embedding")
    lines.append("embedding: " + (f"{emb['provider']}/{emb['model']} ({emb['dims']}d)"
                                  + (", stale: re-embedded in the background" if emb.get("stale") else "")
                                  if emb else "none"))
    return lines


def _fact(d: dict[str, Any]) -> list[str]:
    f = d["fact"]
    made = d.get("created_by") or {}
    lines = [f"fact {f['id']} [{f['status']}] {f['subject']} {f['predicate']} {f['object']} (memory {f['memory_id']})",
             "  " + _join(f"confidence {f['confidence']:.2f}", f"trust {f.get('trust')}" if f.get("trust") else None,
                          f"category {f['category']}" if f.get("category") else None, f"relation {f['relation']}"),
             "  " + _join(f"valid {f.get('valid_from') or '?'} .. {f.get('valid_to') or 'now'}",
                          _when("learned", f.get("learned_at")), _when("invalidated", f.get("invalidated_at")),
                          _when("expires", f.get("forget_after"))),
             f"  stored by {made.get('rule')} ({made.get('method')}"
             + (f", {made['model']}" if made.get("model") else "") + f"): {made.get('reason') or ''}".rstrip()]
    retired = d.get("retired_by")
    if retired:
        lines.append(f"  replaced by fact {retired['fact_id']} ({retired['rule']}): {retired['reason']}")
    versions = d.get("versions") or []
    if len(versions) > 1:
        lines.append("versions (oldest first):")
        lines += [f"  {'*' if v['id'] == f['id'] else ' '} fact {v['id']} [{v['status']}] {v['object']}  "
                  + _join(f"valid {v.get('valid_from') or '?'} .. {v.get('valid_to') or 'now'}",
                          _when("learned", v.get("learned_at")), v.get("rule")) for v in versions]
    evidence = d.get("evidence") or []
    lines.append(f"evidence ({len(evidence)}):" if evidence else "evidence: none")
    for e in evidence[:LIST_LIMIT]:
        lines.append(f"  document {e['document_id']} {_title(e.get('document_title'))} ({e['source_type']}, "
                     f"trust {e['trust']}) {_span(e)}" + (" RETRACTED" if e.get("retracted") else ""))
        lines += _quote(e["text"])
    lines += _more(evidence, "evidence spans")
    for r in d.get("relations") or []:
        lines.append(f"relation: memory {r['src_memory_id']} {r['type']} memory {r['dst_memory_id']} "
                     f"({r.get('rule') or r.get('created_by')}: {r.get('reason') or ''})".rstrip())
    for c in d.get("conflicts") or []:
        lines.append(f"conflict {c['id']} [{c['status']}] facts {c['fact_a_id']} and {c['fact_b_id']}: "
                     f"{c['rule']} - {c['reason']}")
    return lines


def _document(d: dict[str, Any]) -> list[str]:
    doc = d["document"]
    chunks = d.get("chunks") or []
    prev = doc.get("previous_id")
    previous = f" · version {doc['version']} (replaces document {prev})" if prev else ""
    lines = [f"document {doc['id']} {_title(doc.get('title'))} · {doc['source_type']} · trust {doc['trust']}"
             + previous,
             "  " + _join(_when("source time", doc.get("source_time")), _when("ingested", doc.get("ingested_at")),
                          _when("RETRACTED", doc.get("retracted_at")), _when("replaced", doc.get("replaced_at")),
                          f"{len(doc.get('text') or ''):,} characters")]
    if doc.get("uri"):
        lines.append(f"  from {doc['uri']}")
    lines.append(f"chunks ({len(chunks)}):")
    for c in chunks[:LIST_LIMIT]:
        first = " ".join((c.get("text") or "").split())
        lines.append(f"  chunk {c['id']} {c['kind']} [{c['start']}, {c['end']}): {first[:90]}"
                     + ("…" if len(first) > 90 else ""))
    return lines + _more(chunks, "chunks")


def _chunk(d: dict[str, Any]) -> list[str]:
    c, doc = d["chunk"], d["document"]
    lines = [f"chunk {c['id']} · {c['kind']} · document {doc['id']} {_title(doc.get('title'))} "
             f"({doc['source_type']}) [{c['start']}, {c['end']})",
             "  " + _join(_when("speaker", c.get("speaker")), _when("role", c.get("role")),
                          _when("trust", c.get("trust")), _when("time", c.get("source_time")),
                          _when("message", c.get("message_id"))),
             "text (the document's own characters):", *_quote(d.get("span_text") or "")]
    lines += _times(d.get("times") or [])
    ids = d.get("memory_ids") or []
    lines.append("memories: " + (", ".join(str(i) for i in ids) if ids else "none"))
    return lines


RENDERERS = {"memory": _memory, "fact": _fact, "document": _document, "chunk": _chunk}


def show_text(kind: str, record: dict[str, Any]) -> str:
    """MemoryEngine.show(kind, ...)'s record as lines for a terminal."""
    return "\n".join(RENDERERS[kind](record))
