"""Opening, validating and migrating a memlens database; one connection per thread.

apsw.bestpractice.apply(recommended) turns on WAL, foreign keys, strict quoting and more on
every connection it sees. Before any connection is made to an existing file we read its
SQLite header ourselves, so a file that is not ours is refused without a single byte of it
changing (WAL would otherwise be switched on in someone else's database).

Opening never takes the write lock. WAL lets readers work while another process writes, and
bestpractice's optimize hook (`pragma optimize` at open, which may ANALYZE) would throw that
away: while an agent's long ingestion held the lock, every other memlens process failed to
open the file. Statistics are refreshed the way apsw's docs suggest for long-lived
connections instead: `pragma optimize` when the database is closed, and at most once an hour
after a commit, each time only if the lock is free at that moment (never waiting for it).

A write lock held by another process for longer than the busy timeout is a temporary
failure, DatabaseBusy (the CLI exits 75, EX_TEMPFAIL; the MCP server says "busy, retry"),
not bad input.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import apsw.bestpractice

from ..errors import DatabaseBusy, DatabaseTooNew, NotAMemlensDatabase
from ..files import create_private, exposure, private_dir
from .schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

_BEST_PRACTICE_APPLIED = False
_APPLY_LOCK = threading.Lock()
BUSY_TIMEOUT_MS = 5000  # other processes (an agent over MCP, a CLI ingest) write too
OPEN_RETRY_S = 0.02  # between attempts to open a connection SQLite answered busy without waiting
OPTIMIZE_EVERY_S = 3600.0  # a long-lived connection refreshes planner statistics this often


def connection_busy_timeout_long(connection: apsw.Connection) -> None:
    """(apply() treats functions named connection_* as per-connection hooks.) bestpractice's
    100 ms is too short here: the inspector, the CLI and an MCP agent write the same file."""
    connection.set_busy_timeout(BUSY_TIMEOUT_MS)


def _apply_best_practice() -> None:
    global _BEST_PRACTICE_APPLIED
    with _APPLY_LOCK:
        if not _BEST_PRACTICE_APPLIED:
            hooks = tuple(connection_busy_timeout_long if h is apsw.bestpractice.connection_busy_timeout else h
                          for h in apsw.bestpractice.recommended
                          if h is not apsw.bestpractice.connection_optimize)  # see the module docstring
            apsw.bestpractice.apply(hooks)
            _BEST_PRACTICE_APPLIED = True


def busy_message(path: Path | str) -> str:
    return (f"{path}: busy: another process held the write lock for more than {BUSY_TIMEOUT_MS / 1000:g} s "
            "(nothing was written); retry")


def _read_header(path: Path) -> tuple[bytes, int, int] | None:
    """(magic, user_version, application_id) from the file header, or None for an empty file."""
    with open(path, "rb") as fh:
        head = fh.read(100)
    if not head:
        return None
    if len(head) < 100:
        return (head[:16], 0, 0)
    user_version, = struct.unpack(">I", head[60:64])
    application_id, = struct.unpack(">I", head[68:72])
    return head[:16], user_version, application_id


def check_file(path: Path) -> None:
    """Refuse, without writing, a file that is not an empty or memlens SQLite database."""
    if not path.exists():
        return
    if path.is_dir():
        raise NotAMemlensDatabase(f"{path}: is a directory, not a database file")
    header = _read_header(path)
    if header is None:
        return  # a zero-byte file: SQLite treats it as an empty database
    magic, user_version, application_id = header
    if magic != b"SQLite format 3\x00":
        raise NotAMemlensDatabase(f"{path}: not a memlens database (not an SQLite file)")
    if application_id == APPLICATION_ID:
        if user_version > SCHEMA_VERSION:
            raise DatabaseTooNew(
                f"{path}: written by a newer memlens (schema {user_version}, this one knows "
                f"{SCHEMA_VERSION}); upgrade memlens to open it"
            )
        return
    # The header may be stale while a WAL holds the real first page (a crash before checkpoint):
    # look through SQLite, read-only, which the best-practice hooks leave untouched.
    try:
        probe = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            probe.set_busy_timeout(BUSY_TIMEOUT_MS)  # another process may be creating it right now
            # one statement, one snapshot: read one by one, a creator committing in between made
            # a new memlens file look like another application's (application id 0, tables)
            app_id, version, tables = probe.execute(
                "SELECT (SELECT application_id FROM pragma_application_id),"
                " (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema)"
            ).fetchone() or (0, 0, 0)
        finally:
            probe.close()
    except apsw.BusyError:
        raise DatabaseBusy(busy_message(path)) from None
    except apsw.Error as exc:
        raise NotAMemlensDatabase(f"{path}: not a memlens database ({exc.__class__.__name__})") from None
    if app_id == APPLICATION_ID:
        if version > SCHEMA_VERSION:
            raise DatabaseTooNew(
                f"{path}: written by a newer memlens (schema {version}, this one knows {SCHEMA_VERSION})"
            )
        return
    if app_id != 0 or version != 0 or tables:
        raise NotAMemlensDatabase(f"{path}: not a memlens database (an SQLite file of another application)")


def fold_wal(path: Path | str) -> None:
    """Fold a closed database's write-ahead log into its file and leave it in rollback-journal
    mode, so the one file is the whole database (for copying while nothing has it open)."""
    conn = apsw.Connection(str(path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


class Database:
    """A memlens database file: per-thread connections and one process-wide writer lock."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, readonly: bool = False) -> None:
        self.path = Path(path) if str(path) != ":memory:" else Path(":memory:")
        self.readonly = readonly
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._all: list[apsw.Connection] = []
        self._all_lock = threading.Lock()
        self._closed = False
        self._writing: apsw.Connection | None = None  # the connection inside write(), if any
        self._optimized_at = time.monotonic()
        self.generation = 0  # commits made through this object (data_version only sees other connections')
        if str(self.path) != ":memory:":
            if not self.path.exists() and not create:
                raise NotAMemlensDatabase(f"{self.path}: no such database")
            check_file(self.path)
            if create and not readonly and not self.path.exists():
                private_dir(self.path.parent)
                create_private(self.path)  # 0600 before SQLite opens it; its -wal and -shm follow
        _apply_best_practice()
        conn = self.connection()
        if not readonly:
            self._migrate(conn)
        else:
            version = conn.pragma("user_version")
            if version != SCHEMA_VERSION:
                raise DatabaseTooNew(f"{self.path}: schema {version}, expected {SCHEMA_VERSION}")

    # -- connections -----------------------------------------------------------------------
    def connection(self) -> apsw.Connection:
        if self._closed:
            raise RuntimeError("database is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            flags = apsw.SQLITE_OPEN_READONLY if self.readonly else (
                apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
            )
            try:
                conn = self._open(flags)
            except apsw.Error as exc:
                raise NotAMemlensDatabase(f"{self.path}: cannot open ({exc})") from None
            conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _open(self, flags: int) -> apsw.Connection:
        """A connection, its best-practice hooks run (WAL among them). Where waiting could deadlock,
        SQLite answers busy at once instead of calling the busy handler: two processes switching one
        new file to WAL together both hold a shared lock and want the exclusive one. Opening is
        retried until the busy timeout, as a wait on the lock would have been."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                return apsw.Connection(str(self.path), flags=flags)
            except apsw.BusyError:
                if time.monotonic() >= deadline:
                    raise DatabaseBusy(busy_message(self.path)) from None
                time.sleep(OPEN_RETRY_S)

    @contextlib.contextmanager
    def write(self, *, durable: bool = True, diagnostic: bool = False) -> Iterator[apsw.Connection]:
        """The single writer: one transaction, serialised across the threads of this process.

        durable=False (a retrieval trace: a diagnostic record, written by every recall) commits
        without waiting for the disk (synchronous=NORMAL for this one commit). It is as safe
        against a crash of memlens as any commit, and stays consistent through a power cut,
        which can lose it (and only it, or other such commits): the next durable commit syncs
        everything before it. Measured here: the sync is 3 ms typical, 30 ms at p95, more than
        the rest of a recall.

        diagnostic=True: the transaction writes only records about the data (a trace, a cache of a
        memory's parse, an agent's usage counts, which Store.writer puts into the kept rows), never
        a memory, fact, source or anything else recall reads as data, so data_key() stays as it was
        (caches of memory rows survive a recall's trace commit)."""
        if self.readonly:
            raise RuntimeError("database opened read-only")
        conn = self.connection()
        with self._write_lock:
            if conn.in_transaction:  # nested: a savepoint inside the caller's transaction
                if not diagnostic:
                    self._local.data_written = True
                with conn:
                    yield conn
                return
            self._local.data_written = not diagnostic
            changes_before = conn.total_changes()
            sync = None
            if not durable:
                sync = conn.pragma("synchronous")
                conn.pragma("synchronous", "NORMAL")
            try:
                # IMMEDIATE takes the write lock up front (waiting up to the busy timeout): a deferred
                # transaction that read first would fail at once with BUSY when another process had
                # committed in between, and no timeout can help it.
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except apsw.BusyError:
                    raise DatabaseBusy(busy_message(self.path)) from None
                self._writing = conn  # interrupt() leaves this connection alone until it has committed
                try:
                    with conn:
                        yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                if not self._local.data_written:  # only diagnostic rows: not a change of the data
                    self._local.diagnostic_changes = (getattr(self._local, "diagnostic_changes", 0)
                                                      + conn.total_changes() - changes_before)
            finally:
                self._writing = None
                if sync is not None:
                    conn.pragma("synchronous", sync)
            self.generation += 1  # committed: caches keyed on (data_version, generation) are stale
        if time.monotonic() - self._optimized_at > OPTIMIZE_EVERY_S:
            self.optimize()

    def count_as_data(self) -> None:
        """The open transaction of this thread writes data after all (data_key moves at its commit),
        though begun as diagnostic."""
        self._local.data_written = True

    def optimize(self) -> bool:
        """`pragma optimize` if the write lock is free right now (it may ANALYZE, which writes);
        never waits for the lock. True if it ran."""
        if self.readonly or self._closed:
            return False
        self._optimized_at = time.monotonic()
        conn = self.connection()
        if not self._write_lock.acquire(blocking=False):
            return False
        try:
            if conn.in_transaction:
                return False
            conn.set_busy_timeout(0)
            try:
                # 0x10000: judge every table, not only those this connection queried (close() may run
                # on a thread that never read); tables whose size has not changed much are skipped.
                conn.pragma("optimize", 0x10002)
                return True
            except (apsw.BusyError, apsw.ReadOnlyError):
                return False
            finally:
                conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        finally:
            self._write_lock.release()

    def interrupt(self) -> int:
        """Stop the statements running on this database's connections, in whatever thread (apsw's
        Connection.interrupt: each raises apsw.InterruptError there). A write transaction in
        progress is left to finish: the caller has asked it to stop, and it stops at its next
        check without rolling back work it was about to commit. Returns how many connections
        were interrupted (statements that start afterwards run as usual)."""
        with self._all_lock:
            conns = [c for c in self._all if c is not self._writing]
        for conn in conns:
            with contextlib.suppress(apsw.Error):
                conn.interrupt()
        return len(conns)

    def exposure(self) -> str | None:
        """A one-line warning when other users of this machine can read the file, else None."""
        return None if str(self.path) == ":memory:" else exposure(self.path)

    def data_version(self) -> int:
        """Changes when another connection commits; cheap, for cache invalidation."""
        return self.connection().data_version()

    def data_key(self) -> tuple[int, int]:
        """Changes after any change of the data seen from this thread's connection: another
        connection's commit (data_version), or a row this connection wrote (its total_changes),
        except in diagnostic transactions (write(diagnostic=True)). A raw write outside write()
        counts too. For caches of rows recall reads, which every recall's trace commit would
        otherwise empty."""
        conn = self.connection()
        # the pragma, not Connection.data_version() (SQLITE_FCNTL_DATA_VERSION), which also counts
        # this connection's own commits
        return (int(conn.pragma("data_version")), conn.total_changes() - getattr(self._local, "diagnostic_changes", 0))

    def change_key(self) -> tuple[int, int]:
        """Changes after any commit, ours (generation) or another connection's (data_version)."""
        return (self.connection().data_version(), self.generation)

    def close(self) -> None:
        if self._closed:
            return
        with contextlib.suppress(apsw.Error, RuntimeError):
            self.optimize()
        self._closed = True
        with self._all_lock:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(apsw.Error):
                conn.close()
        self._local = threading.local()

    # -- schema ----------------------------------------------------------------------------
    def _check_version(self, conn: apsw.Connection) -> int:
        version = conn.pragma("user_version")
        if version > SCHEMA_VERSION:
            raise DatabaseTooNew(f"{self.path}: schema {version} is newer than {SCHEMA_VERSION}")
        if version and conn.pragma("application_id") != APPLICATION_ID:
            raise NotAMemlensDatabase(f"{self.path}: not a memlens database")
        return version

    def _migrate(self, conn: apsw.Connection) -> None:
        with self._write_lock:
            if self._check_version(conn) == SCHEMA_VERSION:
                return  # the usual case: a read, no lock
            # Two processes may create or upgrade the same file at once: the version is read again
            # under the write lock, so only one of them runs the steps.
            with self.write():
                for step in range(self._check_version(conn), SCHEMA_VERSION):
                    with conn:
                        MIGRATIONS[step](conn)
                        conn.pragma("application_id", APPLICATION_ID)
                        conn.pragma("user_version", step + 1)

    def integrity_check(self) -> str:
        return ";".join(row[0] for row in self.connection().execute("PRAGMA integrity_check"))
