"""How the store reaches its database: the URL, the SQLite file (private, WAL) or PostgreSQL
server, the migration on open, one connection per transaction, and the driver's errors as
StoreError. Also the few query helpers every table family uses (matching, fetch, inserted_id).
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects.postgresql import Insert as PgInsert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import Insert as SqliteInsert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, SQLAlchemyError

from orchestrator import paths
from orchestrator.errors import StoreError
from orchestrator.store.schema import (
    BaselineRow,
    ClusterRow,
    ResultRow,
    RunRow,
    current_version,
    migrate,
    refuse_non_sqlite_file,
)

if TYPE_CHECKING:  # the DB-API connection SQLAlchemy hands _sqlite_on_connect
    import sqlite3

DB_URL_ENV = "AZBENCH_DB_URL"
DB_FILENAME = "azbench.db"
BUSY_TIMEOUT_MS = 15_000
_WRITE = "azbench_write"
# Serialises concurrent first opens on PostgreSQL (SQLite gets this from BEGIN IMMEDIATE).
_PG_MIGRATION_LOCK = 0x617A62656E6368
_M = TypeVar("_M", ClusterRow, RunRow, BaselineRow, ResultRow)
# psycopg repeats the host and port we already name: keep only the server's own reason.
_PG_PREFIX = r'^connection failed: connection to server at "[^"]*", port \d+ failed: '


class StoreBase:
    """A handle on the database: opening, migrating, connections and transactions. The table
    families (store.records, store.measurements) build on it; store.database.Store is all of them."""

    def __init__(self, engine: Engine, where: str) -> None:
        self._engine = engine
        self.where = where  # file path or host:port/db, never a password
        self._local = threading.local()

    @classmethod
    def open(cls, url: str | None = None) -> Self:
        """Open (creating and migrating as needed) the store at `url`, $AZBENCH_DB_URL or home."""
        url = url or os.environ.get(DB_URL_ENV) or None
        if url is None:
            store = cls._open_sqlite(paths.ensure_home() / DB_FILENAME)
        elif (parsed := _parse_url(url)).get_backend_name() == "sqlite":
            store = cls._open_sqlite(Path(str(parsed.database)))
        else:
            store = cls._open_postgres(parsed)
        try:
            store._migrate()
        except BaseException:
            store.close()
            raise
        return store

    @property
    def backend(self) -> str:
        return self._engine.dialect.name

    def schema_version(self) -> int:
        with self._conn() as conn:
            return current_version(conn)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Make the store calls inside one all-or-nothing write. Nesting joins the outer one.

        Keep it short: on SQLite it holds the database's write lock until it ends.
        """
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self._conn(write=True) as conn:
            self._local.conn = conn
            try:
                yield
            finally:
                self._local.conn = None

    @classmethod
    def _open_sqlite(cls, path: Path) -> Self:
        refuse_non_sqlite_file(path)
        _private_file(path)
        url = sa.engine.URL.create("sqlite", database=str(path))
        engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return cls(engine, str(path))

    @classmethod
    def _open_postgres(cls, url: sa.engine.URL) -> Self:
        where = f"{url.host or 'localhost'}:{url.port or 5432}"
        try:
            engine = sa.create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 10})
        except ModuleNotFoundError:
            raise StoreError("PostgreSQL needs psycopg 3: pip install azbench[postgres]") from None
        store = cls(engine, f"{where}/{url.database or ''}")
        try:
            engine.connect().close()
        except SQLAlchemyError as exc:
            engine.dispose()
            reason = _reason(exc, url.password)
            raise StoreError(f"cannot connect to PostgreSQL at {where}: {reason}") from None
        return store

    def _migrate(self) -> None:
        with self._conn(write=True) as conn:
            if self.backend == "postgresql":
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK)))
            migrate(conn, where=self.where, whole_file=self.backend == "sqlite")
        if self.backend == "sqlite":
            # Persistent in the file, so set once, and only now that the file is known ours.
            raw = self._engine.raw_connection()
            try:
                raw.cursor().execute("PRAGMA journal_mode=WAL")
            finally:
                raw.close()

    @contextmanager
    def _conn(self, write: bool = False) -> Iterator[Connection]:
        joined = getattr(self._local, "conn", None)
        try:
            if joined is not None:
                yield joined
                return
            with self._engine.connect() as conn:
                conn.execution_options(**{_WRITE: write})
                with conn.begin():
                    yield conn
        except SQLAlchemyError as exc:
            raise self._error(exc) from None

    def _error(self, exc: SQLAlchemyError) -> StoreError:
        reason = _reason(exc, self._engine.url.password)
        if isinstance(exc, IntegrityError):
            return StoreError(f"store write rejected ({self.where}): {reason}")
        if "file is not a database" in reason or "malformed" in reason:
            return StoreError(f"{self.where} is not an azbench database ({reason})")
        if isinstance(exc, OperationalError) and "locked" in reason:
            return StoreError(f"{self.where} is locked by another writer: {reason}")
        return StoreError(f"store error ({self.where}): {reason}")

    def _insert(self, table: sa.Table) -> PgInsert | SqliteInsert:
        """INSERT with this backend's ON CONFLICT (both dialects spell it the same)."""
        return pg_insert(table) if self.backend == "postgresql" else sqlite_insert(table)


def inserted_id(result: sa.CursorResult[Any]) -> int:
    """The primary key an INSERT made (SQLite and PostgreSQL both report it)."""
    key = result.inserted_primary_key
    if key is None or key[0] is None:
        raise StoreError("the database did not report the new row's id")
    return int(key[0])


def _parse_url(url: str) -> sa.engine.URL:
    try:
        parsed = sa.engine.make_url(url)
    except ArgumentError:
        raise StoreError("not a database URL: want sqlite:///FILE or postgresql://") from None
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return parsed.set(drivername="postgresql+psycopg")  # psycopg 3 is what we ship with
    if backend != "sqlite" or not parsed.database or parsed.database == ":memory:":
        raise StoreError("unsupported database URL: want sqlite:///FILE or postgresql+psycopg://")
    return parsed


def _private_file(path: Path) -> None:
    """The database file is the owner's alone (0600), like the SSH keys beside it: created so
    when missing, tightened when an older azbench left it 0644. SQLite gives its -wal and -shm
    files the database file's mode; ones already there are tightened too. A file this user
    does not own (a shared store) is left as it is."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc.strerror or exc}") from None
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            st = file.stat()
            if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
                file.chmod(stat.S_IMODE(st.st_mode) & 0o700)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreError(f"cannot make {file} private: {exc.strerror or exc}") from None


def _sqlite_on_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
    # We issue BEGIN ourselves (see _sqlite_on_begin): pysqlite's implicit transactions skip
    # DDL, which would make migrations non-atomic.
    dbapi_conn.isolation_level = None
    dbapi_conn.execute("PRAGMA foreign_keys=ON")
    dbapi_conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


def _sqlite_on_begin(conn: Connection) -> None:
    # Writers take the write lock up front: a deferred transaction that reads and then writes
    # can hit SQLITE_BUSY without waiting when another writer got there first.
    write = conn.get_execution_options().get(_WRITE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def matching(table: sa.Table, **equal: object) -> sa.Select[Any]:
    """SELECT * FROM table WHERE each non-None keyword equals its column."""
    conds = [table.c[name] == value for name, value in equal.items() if value is not None]
    return sa.select(table).where(*conds)


def fetch(conn: Connection, table: sa.Table, model: type[_M], **equal: object) -> _M | None:
    row = conn.execute(matching(table, **equal)).first()
    return model.model_validate(row._asdict()) if row else None


def _reason(exc: BaseException, password: str | None) -> str:
    """The driver's first line of complaint, with the password (if any) blanked out."""
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    text = " ".join(lines[0].split()) if lines else type(orig).__name__
    text = re.sub(_PG_PREFIX, "", text)
    return text.replace(password, "***") if password else text


