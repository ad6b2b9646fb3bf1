"""The history database's schema: its tables, the version table, and the migrations that bring an older database
up to date (docs/history.md, "Schema").

The schema's version is the number of migrations applied; :data:`MIGRATIONS` is append-only, so a database written
by any earlier tinyhil opens (its missing migrations run in one transaction) and one written by a later tinyhil is
refused, never rewritten.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from tinyhil.errors import InvalidArgument

__all__ = ["BUSY_TIMEOUT_MS", "MIGRATIONS", "SCHEMA_VERSION", "HistoryVersionError", "open_history", "schema_version"]

BUSY_TIMEOUT_MS: Final = 5_000  # how long a statement waits for another process's write lock before it gives up

# Migration N (1-based) brings a database from version N - 1 to version N.
MIGRATIONS: Final[tuple[str, ...]] = (
    # 1: runs and their attempts
    """
    CREATE TABLE schema_version (version INTEGER NOT NULL);
    INSERT INTO schema_version (version) VALUES (0);
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL UNIQUE,
        suite TEXT NOT NULL,
        started REAL NOT NULL,
        finished REAL NOT NULL,
        command TEXT NOT NULL,
        version TEXT NOT NULL,
        revision TEXT,
        hosts TEXT NOT NULL,
        map_hash TEXT,
        report TEXT NOT NULL,
        exitstatus INTEGER NOT NULL,
        complete INTEGER NOT NULL
    );
    CREATE TABLE attempts (
        id INTEGER PRIMARY KEY,
        run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        test TEXT NOT NULL,
        target TEXT NOT NULL,
        board TEXT NOT NULL,
        host TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        final INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        flaky INTEGER NOT NULL,
        quarantined INTEGER NOT NULL,
        infrastructure TEXT,
        duration_s REAL NOT NULL,
        started REAL,
        message TEXT NOT NULL
    );
    CREATE INDEX attempts_by_run ON attempts (run, final);
    CREATE INDEX runs_by_suite ON runs (suite, started);
    """,
    # 2: board health changes, and attempts by board for the infrastructure-failure rate
    """
    CREATE TABLE board_health (
        id INTEGER PRIMARY KEY,
        run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        board TEXT NOT NULL,
        host TEXT NOT NULL,
        at REAL NOT NULL,
        state TEXT NOT NULL,
        reason TEXT NOT NULL
    );
    CREATE INDEX board_health_by_board ON board_health (board, at);
    CREATE INDEX attempts_by_board ON attempts (board, run);
    """,
)
SCHEMA_VERSION: Final = len(MIGRATIONS)


class HistoryVersionError(InvalidArgument):
    """A history database written by a later tinyhil (its schema version is above :data:`SCHEMA_VERSION`)."""


def schema_version(connection: sqlite3.Connection) -> int:
    """The version of the open database's schema: 0 for a new, empty one."""
    found = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'")
    if found.fetchone() is None:
        return 0
    row = connection.execute("SELECT version FROM schema_version").fetchone()
    return int(row[0]) if row is not None else 0


def _migrate(connection: sqlite3.Connection, path: Path, *, upto: int) -> None:
    """Apply the migrations the database lacks, up to version ``upto``, in one transaction (none: no write lock
    taken, so opening a database another process is writing does not wait)."""
    if schema_version(connection) == upto:
        return
    connection.execute("BEGIN IMMEDIATE")  # the write lock first: two processes never migrate at once
    try:
        version = schema_version(connection)
        if version > SCHEMA_VERSION:
            raise HistoryVersionError(
                f"history {path}: schema version {version}, expected at most {SCHEMA_VERSION} (written by a later "
                "tinyhil; upgrade tinyhil or pass --history with another file)"
            )
        for number in range(version + 1, upto + 1):
            for statement in MIGRATIONS[number - 1].split(";"):
                if statement.strip():
                    connection.execute(statement)
            connection.execute("UPDATE schema_version SET version = ?", (number,))
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def open_history(path: Path, *, upto: int = SCHEMA_VERSION) -> sqlite3.Connection:
    """The history database at ``path`` (made, with its folder, when missing), in WAL mode with a busy timeout, its
    schema migrated to version ``upto`` (the current one unless a test builds an older database).

    Raises:
        HistoryVersionError: the database's schema is newer than this tinyhil's.
        sqlite3.Error, OSError: the file cannot be made, opened or written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA foreign_keys = ON")
        _migrate(connection, path, upto=upto)
    except BaseException:
        connection.close()
        raise
    return connection
