"""How much one turn and one file may hold (README, "Limits"). Above these, ingestion refuses
with a one-line reason before anything is written.

Every step of ingestion is linear in its input, so these bound time and memory rather than
guard against a blow-up: a 4-million-character turn is stored, embedded and read for facts in
roughly 15 s here, and a file is read whole into memory before it is parsed.
"""

from __future__ import annotations

from engine.errors import BadInput

MAX_TURN_CHARS = 4_000_000  # one chat message (memory_add, a chat JSON file)
MAX_FILE_BYTES = 256 * 1024 * 1024  # one input file (ingest, import, benchmark data)


def check_turn(text: str, where: str) -> None:
    if len(text) > MAX_TURN_CHARS:
        raise BadInput(f"{where} has {len(text):,} characters; a turn may hold at most {MAX_TURN_CHARS:,} "
                       "(split it into several turns)")


def check_file_size(size: int, name: str) -> None:
    if size > MAX_FILE_BYTES:
        raise BadInput(f"{name}: {size:,} bytes; memlens reads at most {MAX_FILE_BYTES:,} bytes "
                       f"({MAX_FILE_BYTES // 2**20} MiB) from one file (split it)")
