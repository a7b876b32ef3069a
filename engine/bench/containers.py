"""Benchmark containers that are built once and reused while nothing that made them changes.

A container (one LoCoMo conversation, one LongMemEval question's haystack) costs its embedding
time to build and nothing to query, so recipe comparisons, ablations and weight fits would
spend almost all their time re-embedding the same text. A built container is kept under a key
of everything that decides its content:

- the container's raw JSON (so a question shared by two files is one container),
- the embedder's model and dimensions, the extraction mode and the extraction prompt version,
- the code that turns sources into rows: a hash of the source files of ingestion, extraction,
  consolidation, embedding and the schema. Any edit there is a new key; nothing to remember to
  bump, and a stale container can never be read as a fresh one.

Cached containers are read-only: a run queries a private copy (recall writes traces).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import private_dir

if TYPE_CHECKING:
    from ..store.vector_cache import VectorCacheFile

_ENGINE = Path(__file__).resolve().parents[1]
# What decides a container's rows. Retrieval (engine/retrieve) does not: it reads them.
# Every entry must exist (tests/bench/test_runner.py): consolidate.py became a package, and the
# store writes from mixins beside store.py; a path that names nothing hashes nothing.
_DEFINITION_PATHS = ("ingest", "extract", "embed", "consolidate", "reconcile.py", "statements.py", "timeexpr.py",
                     "names.py", "changes.py", "retrieve/query.py", "store", "records.py", "scope.py", "timeutil.py",
                     "tokens.py")
COMPLETE_KEY = "bench_container_key"


@lru_cache(maxsize=1)
def ingestion_definition() -> str:
    """A hash of the source that turns documents into stored memories (see the module doc)."""
    h = hashlib.sha256()
    for rel in _DEFINITION_PATHS:
        path = _ENGINE / rel
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            if f.is_file():
                h.update(str(f.relative_to(_ENGINE)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def container_key(spec: dict[str, Any], *, embedder_model: str, embedder_dims: int) -> str:
    from ..prompts import extract_v2

    raw = json.dumps(spec["raw"], sort_keys=True, ensure_ascii=False).encode("utf-8")
    parts = {"raw": hashlib.sha256(raw).hexdigest(), "format": spec["format"], "container": spec["container"],
             "embedder": embedder_model, "dims": embedder_dims, "extract": spec.get("extract") or "none",
             "prompt": extract_v2.VERSION if spec.get("extract") in ("llm", "auto") else None,
             "code": ingestion_definition()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def cache_dir_for(db_path: str | os.PathLike[str]) -> Path:
    return Path(str(db_path) + ".bench") / "containers"


def vector_cache_path(containers_dir: Path) -> Path:
    """The run's vector cache (engine/embed/cache.py), beside the containers it helps build."""
    return containers_dir.parent / "vectors.db"


_VECTOR_CACHES: dict[Path, VectorCacheFile | None] = {}


def vector_cache(path: Path) -> VectorCacheFile | None:
    """This process's connection to the vector cache at `path`, or None when the file cannot be
    used (not an SQLite file, a read-only folder): the run then embeds everything, as before,
    and says so once on stderr."""
    import sys

    import apsw

    from ..store.vector_cache import VectorCacheFile

    if path not in _VECTOR_CACHES:
        try:
            _VECTOR_CACHES[path] = VectorCacheFile(path)
        except (apsw.Error, OSError) as exc:
            sys.stderr.write(f"memlens: vector cache {path} not used ({exc.__class__.__name__}: {exc})\n")
            _VECTOR_CACHES[path] = None
    return _VECTOR_CACHES[path]


def fold_vector_cache(source: Path, target: Path) -> None:
    """Move the vectors of a run's own cache file (a --fresh run's) into the shared cache at
    `target`, replacing what it held for the same texts, and delete the run's file. When the
    shared file cannot be used, the run's vectors are only deleted (the next run computes them)."""
    import sys

    import apsw

    own = _VECTOR_CACHES.pop(source, None)
    if own is not None:
        own.close()
    if source.is_file():
        shared = vector_cache(target)
        if shared is not None:
            try:
                shared.absorb(source)
            except apsw.Error as exc:
                sys.stderr.write(f"memlens: this run's vectors not kept in {target} ({exc.__class__.__name__}: {exc})\n")
    _remove(source)


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def cached(cache: Path, key: str) -> Path | None:
    path = cache / f"{key}.db"
    return path if path.is_file() else None


def store_built(cache: Path, key: str, built: Path) -> Path:
    """Move a fully built, closed container into the cache (atomically: a crash leaves no half file)."""
    private_dir(cache)
    target = cache / f"{key}.db"
    os.replace(built, target)
    return target


def private_copy(source: Path, dest: Path) -> None:
    """A copy of a closed cached container to query (and write traces into)."""
    _remove(dest)
    private_dir(dest.parent)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, suffix=".part")
    os.close(fd)
    shutil.copyfile(source, tmp)
    os.replace(tmp, dest)


def build_path(cache: Path, key: str) -> Path:
    """Where a container is built before it enters the cache (same filesystem, unique name)."""
    private_dir(cache)
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=f"{key}.", suffix=".building")
    os.close(fd)
    os.unlink(tmp)
    return Path(tmp)


def discard(path: Path) -> None:
    _remove(path)


def settle(path: Path) -> None:
    """Fold a closed container's write-ahead log into the file, so the one file is the whole
    container (copied while nothing has it open)."""
    from ..store.db import fold_wal

    fold_wal(path)
