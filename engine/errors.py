"""One root exception for the engine; the CLI maps BadInput to exit status 2 and Busy to 75."""

from __future__ import annotations


class MemlensError(Exception):
    """Root of every error the engine raises on purpose."""


class BadInput(MemlensError):
    """The caller gave us something we refuse: nothing was written. Exit status 2."""


class NotAMemlensDatabase(BadInput):
    """The file exists but is not a memlens database (or is corrupt)."""


class DatabaseTooNew(BadInput):
    """The file was written by a newer memlens whose schema this code does not know."""


class UnknownFormat(BadInput):
    """No importer recognises the input, or the one asked for with --format cannot read it."""


class ScopeError(MemlensError):
    """A read or write was attempted without a complete scope, or across scopes."""


class EmbedderError(MemlensError):
    """The embedder could not produce vectors (missing model file, endpoint failure)."""


class Busy(MemlensError):
    """A temporary failure: a database stayed locked by another program. Retry later; exit status 75
    (EX_TEMPFAIL from sysexits.h), nothing written."""


class DatabaseBusy(Busy):
    """Another process held the memlens database's write lock past the busy timeout (nothing was
    written by the refused call); the MCP server answers "busy, retry"."""


class Cancelled(MemlensError):
    """A long operation stopped because should_stop() said so."""
