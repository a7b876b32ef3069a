"""Importers of other memory systems' databases (as opposed to engine/ingest, which reads sources).

An importer maps another system's records (memories, facts with their history, provenance, entities,
retrieval telemetry) onto memlens's data model, keeping the other system's ids as external refs so
that re-importing is idempotent. The mapping is pure; the SQL it needs lives in engine/store/.

- `neoagent`: NeoAgent's SQLite memory (design/NEOAGENT-SCHEMA.md), `memlens import neoagent PATH`.
"""

from __future__ import annotations

IMPORTERS = ("neoagent",)

__all__ = ["IMPORTERS"]
