"""The whole data model as ordered user_version migrations (ARCHITECTURE.md, "Data model").

Migration N brings a database from user_version N-1 to N inside one transaction. Never edit a
released step: add a new one. Every table that holds user data carries the four scope columns,
and every index that serves reads leads with them so scoped queries stay index-only.
"""

from __future__ import annotations

from typing import Any

import apsw
import apsw.fts5

APPLICATION_ID = 0x4D4C4E53  # "MLNS"
# How FTS5 splits and stems memory and chunk text; queries are split by the same tokenizer
# (RecallReads.fts_tokens). Changing it needs a migration that rebuilds both indexes.
FTS_TOKENIZER = ("porter", ("unicode61", "remove_diacritics", "2"))

SCOPE_COLS = """
    user_id    TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    scope_type TEXT NOT NULL CHECK (scope_type IN ('agent','conversation','task','channel','shared')),
    scope_id   TEXT NOT NULL"""

_V1 = f"""
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE documents (
    id            INTEGER PRIMARY KEY,{SCOPE_COLS},
    source_type   TEXT NOT NULL,
    uri           TEXT,
    external_id   TEXT,
    title         TEXT,
    text          TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    trust         TEXT NOT NULL CHECK (trust IN ('user','assistant','tool','external')),
    source_time   TEXT,
    ingested_at   TEXT NOT NULL,
    retracted_at  TEXT,
    retract_reason TEXT,
    version       INTEGER NOT NULL DEFAULT 1,
    previous_id   INTEGER REFERENCES documents(id),
    replaced_at   TEXT,
    meta          TEXT NOT NULL DEFAULT '{{}}'
) STRICT;
CREATE INDEX documents_identity ON documents(user_id, agent_id, scope_type, scope_id, uri, external_id, version);
CREATE INDEX documents_hash ON documents(user_id, agent_id, scope_type, scope_id, content_hash);

CREATE TABLE chunks (
    id            INTEGER PRIMARY KEY,{SCOPE_COLS},
    document_id   INTEGER NOT NULL REFERENCES documents(id),
    ordinal       INTEGER NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('message','window','heading','paragraph','quote','code_symbol','split')),
    start         INTEGER NOT NULL,
    "end"         INTEGER NOT NULL,
    text          TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    speaker       TEXT,
    role          TEXT,
    message_id    TEXT,
    source_time   TEXT,
    trust         TEXT NOT NULL,
    quotes_chunk_id INTEGER REFERENCES chunks(id),
    meta          TEXT NOT NULL DEFAULT '{{}}',
    CHECK (start >= 0 AND "end" > start)
) STRICT;
CREATE INDEX chunks_document ON chunks(document_id, ordinal);
CREATE INDEX chunks_message ON chunks(user_id, agent_id, scope_type, scope_id, message_id);

CREATE TABLE memories (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    kind            TEXT NOT NULL CHECK (kind IN ('episode','fact','summary')),
    text            TEXT NOT NULL,
    category        TEXT,
    importance      REAL NOT NULL DEFAULT 0.5,
    confidence      REAL NOT NULL DEFAULT 1.0,
    trust           TEXT NOT NULL CHECK (trust IN ('user','assistant','tool','external')),
    is_static       INTEGER NOT NULL DEFAULT 0,
    source_time     TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    forget_after    TEXT,
    forgotten_at    TEXT,
    forget_reason   TEXT,
    retracted_at    TEXT,
    access_count    INTEGER NOT NULL DEFAULT 0,
    last_accessed_at TEXT,
    strength        REAL NOT NULL DEFAULT 1.0,
    pinned          INTEGER NOT NULL DEFAULT 0,
    content_hash    TEXT NOT NULL,
    extraction_method TEXT,
    external_ref    TEXT
) STRICT;
CREATE INDEX memories_scope ON memories(user_id, agent_id, scope_type, scope_id, kind, id);
CREATE INDEX memories_hash ON memories(user_id, agent_id, scope_type, scope_id, content_hash);
CREATE INDEX memories_time ON memories(user_id, agent_id, scope_type, scope_id, source_time);
CREATE INDEX memories_baseline ON memories(user_id, agent_id, scope_type, scope_id, kind, pinned, importance);

CREATE TABLE facts (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    memory_id       INTEGER NOT NULL REFERENCES memories(id),
    subject         TEXT NOT NULL,
    predicate       TEXT NOT NULL,
    object          TEXT NOT NULL,
    subject_key     TEXT NOT NULL,
    predicate_key   TEXT NOT NULL,
    object_key      TEXT NOT NULL,
    relation        TEXT NOT NULL DEFAULT 'new' CHECK (relation IN ('new','updates','extends','derives')),
    status          TEXT NOT NULL DEFAULT 'active'
                    CHECK (status IN ('active','superseded','expired','needs_review','retracted')),
    confidence      REAL NOT NULL,
    importance      REAL NOT NULL DEFAULT 0.5,
    category        TEXT,
    is_static       INTEGER NOT NULL DEFAULT 0,
    valid_from      TEXT,
    valid_to        TEXT,
    learned_at      TEXT NOT NULL,
    invalidated_at  TEXT,
    forget_after    TEXT,
    supersedes_fact_id INTEGER REFERENCES facts(id),
    evidence        TEXT,
    evidence_unverified INTEGER NOT NULL DEFAULT 0,
    source_count    INTEGER NOT NULL DEFAULT 1,
    extraction_method TEXT NOT NULL,
    extractor_model TEXT,
    prompt_version  TEXT,
    rule            TEXT,
    reason          TEXT,
    external_ref    TEXT
) STRICT;
CREATE INDEX facts_key ON facts(user_id, agent_id, scope_type, scope_id, subject_key, predicate_key, status);
CREATE INDEX facts_memory ON facts(memory_id);
CREATE INDEX facts_status ON facts(user_id, agent_id, scope_type, scope_id, status);

CREATE TABLE memory_relations (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    src_memory_id   INTEGER NOT NULL REFERENCES memories(id),
    dst_memory_id   INTEGER NOT NULL REFERENCES memories(id),
    type            TEXT NOT NULL CHECK (type IN ('updates','extends','derives')),
    confidence      REAL NOT NULL DEFAULT 1.0,
    evidence_chunk_id INTEGER REFERENCES chunks(id),
    created_by      TEXT NOT NULL CHECK (created_by IN ('extractor','operator','import')),
    rule            TEXT,
    reason          TEXT,
    created_at      TEXT NOT NULL,
    removed_at      TEXT
) STRICT;
CREATE INDEX relations_src ON memory_relations(src_memory_id);
CREATE INDEX relations_dst ON memory_relations(dst_memory_id);

CREATE TABLE memory_sources (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    memory_id       INTEGER NOT NULL REFERENCES memories(id),
    chunk_id        INTEGER NOT NULL REFERENCES chunks(id),
    document_id     INTEGER NOT NULL REFERENCES documents(id),
    start           INTEGER NOT NULL,
    "end"           INTEGER NOT NULL,
    relevance       REAL NOT NULL DEFAULT 1.0,
    created_at      TEXT NOT NULL,
    CHECK (start >= 0 AND "end" >= start),
    UNIQUE (memory_id, chunk_id, start, "end")
) STRICT;
CREATE INDEX sources_chunk ON memory_sources(chunk_id);
CREATE INDEX sources_document ON memory_sources(document_id);

CREATE TABLE entities (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    name            TEXT NOT NULL,
    canonical       TEXT NOT NULL,
    kind            TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    UNIQUE (user_id, agent_id, scope_type, scope_id, canonical, kind)
) STRICT;

CREATE TABLE entity_mentions (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    entity_id       INTEGER NOT NULL REFERENCES entities(id),
    memory_id       INTEGER NOT NULL REFERENCES memories(id),
    chunk_id        INTEGER REFERENCES chunks(id),
    start           INTEGER,
    "end"           INTEGER
) STRICT;
CREATE INDEX mentions_entity ON entity_mentions(entity_id, memory_id);
CREATE INDEX mentions_memory ON entity_mentions(memory_id);

CREATE TABLE embeddings (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    owner_type      TEXT NOT NULL CHECK (owner_type IN ('memory','chunk')),
    owner_id        INTEGER NOT NULL,
    vector          BLOB NOT NULL,
    provider        TEXT NOT NULL,
    model           TEXT NOT NULL,
    dims            INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    embed_ms        REAL,
    stale           INTEGER NOT NULL DEFAULT 0,
    UNIQUE (owner_type, owner_id)
) STRICT;
CREATE INDEX embeddings_scope ON embeddings(user_id, agent_id, scope_type, scope_id, owner_type);
CREATE INDEX embeddings_stale ON embeddings(stale) WHERE stale = 1;

CREATE TABLE retrieval_traces (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    origin          TEXT NOT NULL CHECK (origin IN ('operator','agent','bench')),
    query_text      TEXT,
    query_hash      TEXT NOT NULL,
    recipe          TEXT NOT NULL,
    k               INTEGER NOT NULL,
    as_of           TEXT,
    params          TEXT NOT NULL DEFAULT '{{}}',
    plan            TEXT,
    rerank          TEXT,
    stages          TEXT NOT NULL DEFAULT '[]',
    timings         TEXT NOT NULL DEFAULT '{{}}',
    context_text    TEXT,
    context_tokens  INTEGER,
    result_count    INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL
) STRICT;
CREATE INDEX traces_scope ON retrieval_traces(user_id, agent_id, scope_type, scope_id, id);

CREATE TABLE trace_candidates (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    trace_id        INTEGER NOT NULL REFERENCES retrieval_traces(id) ON DELETE CASCADE,
    memory_id       INTEGER NOT NULL,
    channels        TEXT NOT NULL DEFAULT '{{}}',
    components      TEXT NOT NULL DEFAULT '{{}}',
    score           REAL,
    rank            INTEGER,
    dropped_stage   TEXT,
    drop_reason     TEXT,
    drop_detail     TEXT,
    tokens          INTEGER
) STRICT;
CREATE INDEX trace_candidates_trace ON trace_candidates(trace_id, rank);
CREATE INDEX trace_candidates_memory ON trace_candidates(memory_id);

CREATE TABLE conflicts (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    fact_a_id       INTEGER NOT NULL REFERENCES facts(id),
    fact_b_id       INTEGER REFERENCES facts(id),  -- NULL: a single fact held for review
    rule            TEXT NOT NULL,
    reason          TEXT,
    status          TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open','resolved','dismissed')),
    resolution      TEXT,
    created_at      TEXT NOT NULL,
    resolved_at     TEXT,
    curation_id     INTEGER
) STRICT;
CREATE INDEX conflicts_status ON conflicts(user_id, agent_id, scope_type, scope_id, status);

CREATE TABLE curation_log (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    command         TEXT NOT NULL,
    target_type     TEXT,
    target_id       INTEGER,
    before          TEXT NOT NULL DEFAULT '{{}}',
    after           TEXT NOT NULL DEFAULT '{{}}',
    actor           TEXT NOT NULL,
    note            TEXT,
    created_at      TEXT NOT NULL,
    undone_at       TEXT,
    undo_of         INTEGER REFERENCES curation_log(id)
) STRICT;
CREATE INDEX curation_scope ON curation_log(user_id, agent_id, scope_type, scope_id, id);

CREATE TABLE extraction_queue (
    id              INTEGER PRIMARY KEY,{SCOPE_COLS},
    document_id     INTEGER NOT NULL REFERENCES documents(id),
    first_ordinal   INTEGER NOT NULL,
    last_ordinal    INTEGER NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending','done','failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (document_id, first_ordinal, last_ordinal)
) STRICT;
CREATE INDEX extraction_queue_status ON extraction_queue(status, id);

CREATE TABLE llm_calls (
    id              INTEGER PRIMARY KEY,
    user_id         TEXT,
    agent_id        TEXT,
    scope_type      TEXT,
    scope_id        TEXT,
    task            TEXT NOT NULL,
    model           TEXT,
    request_hash    TEXT NOT NULL,
    request         TEXT,
    response        TEXT,
    ok              INTEGER NOT NULL,
    error           TEXT,
    prompt_tokens   INTEGER,
    completion_tokens INTEGER,
    latency_ms      REAL,
    cost_estimate   REAL,
    created_at      TEXT NOT NULL
) STRICT;
CREATE INDEX llm_calls_hash ON llm_calls(request_hash);

CREATE TABLE bench_runs (
    id              INTEGER PRIMARY KEY,
    dataset         TEXT NOT NULL,
    data_path       TEXT,
    sha256          TEXT NOT NULL,
    split           TEXT,
    recipe          TEXT NOT NULL,
    k_values        TEXT NOT NULL,
    embedder        TEXT,
    models          TEXT NOT NULL DEFAULT '{{}}',
    prompt_hashes   TEXT NOT NULL DEFAULT '{{}}',
    git_commit      TEXT,
    config          TEXT NOT NULL DEFAULT '{{}}',
    status          TEXT NOT NULL DEFAULT 'running' CHECK (status IN ('running','done','failed','cancelled')),
    sample_count    INTEGER NOT NULL DEFAULT 0,
    failures        INTEGER NOT NULL DEFAULT 0,
    metrics         TEXT,
    by_category     TEXT,
    latency_ms      TEXT,
    context_tokens  TEXT,
    started_at      TEXT NOT NULL,
    finished_at     TEXT
) STRICT;

CREATE TABLE bench_items (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES bench_runs(id) ON DELETE CASCADE,
    container       TEXT NOT NULL,
    question_id     TEXT NOT NULL,
    question        TEXT,
    category        TEXT,
    gold            TEXT NOT NULL DEFAULT '{{}}',
    retrieved       TEXT NOT NULL DEFAULT '[]',
    metrics         TEXT NOT NULL DEFAULT '{{}}',
    latency_ms      REAL,
    context_tokens  INTEGER,
    trace_id        INTEGER,
    trace_db        TEXT,
    status          TEXT NOT NULL DEFAULT 'done' CHECK (status IN ('done','failed','skipped')),
    error           TEXT,
    answer          TEXT,
    judge           TEXT,
    UNIQUE (run_id, question_id)
) STRICT;
"""


def _v1(conn: apsw.Connection) -> None:
    conn.execute(_V1)
    tokenize = [FTS_TOKENIZER[0], *FTS_TOKENIZER[1]]
    apsw.fts5.Table.create(
        conn, "memories_fts", ["text"], content="memories", content_rowid="id",
        tokenize=tokenize, generate_triggers=True,
    )
    apsw.fts5.Table.create(
        conn, "chunks_fts", ["text"], content="chunks", content_rowid="id",
        tokenize=tokenize, generate_triggers=True,
    )
    # Document frequencies per term, so recall can leave out terms too common to rank anything
    # (PERF.md: an OR over common words costs 40-900 ms at 100k-1M rows).
    conn.execute("CREATE VIRTUAL TABLE memories_fts_vocab USING fts5vocab(memories_fts, row)")
    # The generated update triggers fire on ANY column change; usage reinforcement touches
    # memories.access_count on every agent recall, so narrow them to the indexed column.
    for table in ("memories", "chunks"):
        trigger = f"fts5sync_{table}_to_{table}_fts_update"
        (sql,) = conn.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (trigger,)).fetchone() or ("",)
        narrowed = sql.replace(f'after update on "{table}"', f'after update of "text" on "{table}"')
        assert narrowed != sql, "apsw changed its trigger text; revisit the FTS update trigger"
        conn.execute(f'DROP TRIGGER "{trigger}"')
        conn.execute(narrowed)


_TIMES = f"""
CREATE TABLE chunk_times (
    id           INTEGER PRIMARY KEY,{SCOPE_COLS},
    chunk_id     INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    start        INTEGER NOT NULL,  -- offsets inside the chunk's text (a chunk keeps them when it moves)
    "end"        INTEGER NOT NULL,
    text         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    window_start TEXT NOT NULL,     -- the world time it names, [window_start, window_end)
    window_end   TEXT NOT NULL,
    CHECK (start >= 0 AND "end" > start AND window_end > window_start)
) STRICT;
CREATE INDEX chunk_times_chunk ON chunk_times(chunk_id);
"""


def _v2_chunk_times(conn: apsw.Connection) -> None:
    """Times said inside chunks ("last Saturday", "in May"), resolved at ingestion (issue 16);
    chunks already stored are resolved here, so old databases answer dated questions too."""
    from ..timeexpr import stored_rows

    conn.execute(_TIMES)
    rows: list[tuple[Any, ...]] = []
    for cid, u, a, st, si, text, source_time in conn.execute(
            "SELECT id, user_id, agent_id, scope_type, scope_id, text, source_time FROM chunks"):
        rows.extend((u, a, st, si, cid, *r) for r in stored_rows(text, source_time))
    conn.executemany(
        'INSERT INTO chunk_times(user_id, agent_id, scope_type, scope_id, chunk_id, start, "end", text, kind,'
        " window_start, window_end) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)


def _v3_health_counts(conn: apsw.Connection) -> None:
    """The store-health trend (issue 23): how many items each check found, at each run."""
    conn.execute(f"""
CREATE TABLE health_counts (
    id         INTEGER PRIMARY KEY,{SCOPE_COLS},
    taken_at   TEXT NOT NULL,
    occasion   TEXT NOT NULL,  -- what recorded it: open, ingest, health ("trigger" is an SQL keyword)
    counts     TEXT NOT NULL
) STRICT;
CREATE INDEX health_counts_scope ON health_counts(user_id, agent_id, scope_type, scope_id, id);
""")


def _v4_bench_scores(conn: apsw.Connection) -> None:
    """Benchmark runs scored under several schemes (issue 17, engine/bench/scoring.py): each scheme's summary
    per run and per-question metrics per item; the default scheme's stay in `metrics` /
    `by_category`. `ranking` keeps an item's whole turn ranking, so it can be scored again."""
    conn.execute("ALTER TABLE bench_runs ADD COLUMN scores TEXT NOT NULL DEFAULT '{}'")
    conn.execute("ALTER TABLE bench_items ADD COLUMN scores TEXT NOT NULL DEFAULT '{}'")
    conn.execute("ALTER TABLE bench_items ADD COLUMN ranking TEXT NOT NULL DEFAULT '[]'")


_VECTOR_CHANGES = """
CREATE TABLE vector_changes (n INTEGER NOT NULL) STRICT;
INSERT INTO vector_changes(n) VALUES (0);
CREATE TRIGGER vector_changes_insert AFTER INSERT ON embeddings BEGIN UPDATE vector_changes SET n = n + 1; END;
CREATE TRIGGER vector_changes_update AFTER UPDATE ON embeddings BEGIN UPDATE vector_changes SET n = n + 1; END;
CREATE TRIGGER vector_changes_delete AFTER DELETE ON embeddings BEGIN UPDATE vector_changes SET n = n + 1; END;
"""


def _v5_vector_changes(conn: apsw.Connection) -> None:
    """A counter every change to `embeddings` bumps, from any writer in any process (issue 21):
    the vector index asks it (one row) after each commit instead of re-counting the vectors of
    its scope, which every recall's trace commit made it do (a scan of all vectors, tens of ms
    at 1M memories)."""
    conn.execute(_VECTOR_CHANGES)


def _v6_name_keys(conn: apsw.Connection) -> None:
    """Entity keys by engine.names.name_key, the key facts and the speaker prior use (issue 20):
    mentions were keyed by a second canonicaliser that kept curly quotes and mail addresses.
    Entities whose new keys meet are merged into the oldest, their mentions moved to it."""
    from ..names import name_key

    groups: dict[tuple[Any, ...], list[tuple[int, str]]] = {}
    for eid, u, a, st, si, name, canonical, kind in conn.execute(
            "SELECT id, user_id, agent_id, scope_type, scope_id, name, canonical, kind FROM entities ORDER BY id"):
        groups.setdefault((u, a, st, si, name_key(name) or canonical, kind), []).append((eid, canonical))
    rekey = []
    for slot, rows in groups.items():
        key = slot[4]
        keeper = next((eid for eid, canonical in rows if canonical == key), rows[0][0])
        for eid, _ in rows:
            if eid != keeper:
                conn.execute("UPDATE entity_mentions SET entity_id = ? WHERE entity_id = ?", (keeper, eid))
                conn.execute("DELETE FROM entities WHERE id = ?", (eid,))
        if dict(rows)[keeper] != key:
            rekey.append((key, keeper))
    # Through a key no name can have first: a row may take the key another row is about to give up.
    conn.executemany("UPDATE entities SET canonical = char(1) || id WHERE id = ?", [(eid,) for _, eid in rekey])
    conn.executemany("UPDATE entities SET canonical = ? WHERE id = ?", rekey)


def _v7_trace_rows_by_trace(conn: apsw.Connection) -> None:
    """Trace candidates are read by trace only (issue 21): no query looks them up by memory, and
    the index on memory_id made every recall's trace commit dirty one page per candidate (a few
    hundred pages a trace at 100k memories, against a dozen for the rows themselves), so the WAL
    filled and checkpointed every few recalls: most of the trace write's tail."""
    conn.execute("DROP INDEX IF EXISTS trace_candidates_memory")


def _v8_recall_cpu(conn: apsw.Connection) -> None:
    """Two savings of recall's CPU (issue 21). memory_clauses: a turn's parsed clauses
    (engine.statements.clauses of its text without the speaker), kept beside its memory: a fresh
    process, as every LongMemEval container's is, parsed its long turns again at its first recall
    (a quarter of that recall's CPU). Written at ingestion and by recall; read only when both the
    text's digest and the rules' version match. The row goes with its memory."""
    conn.execute(
        "CREATE TABLE memory_clauses ("
        " memory_id INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,"
        " text_hash BLOB NOT NULL,"  # engine.statements.text_digest of the parsed text
        " rules     TEXT NOT NULL,"  # engine.statements.RULES_VERSION
        " clauses   TEXT NOT NULL"  # engine.statements.encode_clauses
        ") STRICT")
    # A trace's candidates as one JSON array, a row [memory id, channels, components, score, rank,
    # dropped stage, drop reason, drop detail, tokens] each in the order recall met them, instead of
    # a trace_candidates row each (issue 21): a JSON text and a 14-column insert per candidate were
    # a sixth of a recall's CPU. Traces written before (and by the NeoAgent import) keep their rows.
    # Since, the column holds {"components": names, "rows": [...]} (a row's components as values in
    # the names' order, or its own dict); RecallReads.trace reads both forms.
    conn.execute("ALTER TABLE retrieval_traces ADD COLUMN candidate_rows TEXT")


def _v9_slot_readings(conn: apsw.Connection) -> None:
    """A turn's question-independent same_slot readings (engine.statements.slot_readings, by
    variant) kept beside its parsed clauses (issue 21): a fresh process read every pooled turn
    again at its first recall, about a third of same_slot's CPU in LoCoMo dev's slowest recalls
    (2.7 of 8.4 ms, tests.perf.recall_split). Written at ingestion (the default variant) and by recall with the trace; read under
    the same digest and rules as the clauses."""
    conn.execute("ALTER TABLE memory_clauses ADD COLUMN readings TEXT")


def _v10_clause_vectors(conn: apsw.Connection) -> None:
    """The vectors of a turn's clauses that recall embedded (the current-truth rules compare
    clauses with the question and each other), kept beside its parse under the embedder's model:
    a fresh process embedded them again, most of a CLI recall's CPU on a LongMemEval S haystack
    (score stage 1047-1099 -> 202-243 ms; issue 21; benchmark runs embed through their vector
    cache and barely gain). Written by recall with the trace;
    read under the same digest and rules as the clauses and only for the same model; gone with
    the memory, as the rest of the row."""
    conn.execute("ALTER TABLE memory_clauses ADD COLUMN vectors_model TEXT")
    conn.execute("ALTER TABLE memory_clauses ADD COLUMN vectors BLOB")
    conn.execute("ALTER TABLE memory_clauses ADD COLUMN vector_at TEXT")


MIGRATIONS = [_v1, _v2_chunk_times, _v3_health_counts, _v4_bench_scores, _v5_vector_changes, _v6_name_keys,
              _v7_trace_rows_by_trace, _v8_recall_cpu, _v9_slot_readings, _v10_clause_vectors]
SCHEMA_VERSION = len(MIGRATIONS)
