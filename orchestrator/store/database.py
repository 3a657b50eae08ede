"""The results store: typed reads and writes of clusters, runs, attempts, results, events and
baselines.

`Store.open()` picks the database (SQLite file `$AZBENCH_HOME/azbench.db` by default, PostgreSQL
when `AZBENCH_DB_URL=postgresql+psycopg://...`), refuses anything that is not an azbench
database without touching it, and migrates the schema forward (see store.schema). Every method
takes and returns pydantic row models; every write is one transaction, and `transaction()`
groups several writes into one. Failures surface as StoreError (NotFoundError for a missing row).
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, SQLAlchemyError

from orchestrator import paths
from orchestrator.errors import NotFoundError, StoreError
from orchestrator.models import (
    ATTEMPT_MOVES,
    CLUSTER_MOVES,
    RUN_MOVES,
    Cluster,
    ClusterState,
    legal_move,
    utcnow,
)
from orchestrator.store.schema import (
    SCHEMA_VERSION,
    AttemptRow,
    BaselineRow,
    ClusterRow,
    EventRow,
    FabricResultRow,
    ResultRow,
    RunRow,
    attempt_row,
    attempt_values,
    attempts,
    baselines,
    clusters,
    current_version,
    event_row,
    events,
    fabric_results,
    migrate,
    refuse_non_sqlite_file,
    results,
    runs,
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


class Store:
    """A handle on the results store. Use one per thread; close() when done."""

    def __init__(self, engine: Engine, where: str) -> None:
        self._engine = engine
        self.where = where  # file path or host:port/db, never a password
        self._local = threading.local()

    @classmethod
    def open(cls, url: str | None = None) -> Store:
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

    def __enter__(self) -> Store:
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

    # -- clusters -------------------------------------------------------------------------

    def save_cluster(self, cluster: Cluster, spec_json: str | None = None,
                     plan_json: str | None = None, owner: str | None = None) -> ClusterRow:
        """Insert or update by name; StoreError for a state change CLUSTER_MOVES does not allow.
        spec_json/plan_json/owner=None keep the stored ones; created_at is kept."""
        now = utcnow()
        terminated = cluster.state == ClusterState.TERMINATED
        values = dict(
            name=cluster.name, provider=cluster.provider, sku=cluster.sku, nodes=cluster.nodes,
            region=cluster.region, state=cluster.state.value, spec_json=spec_json, plan_json=plan_json,
            cluster_json=cluster.model_dump_json(), created_at=cluster.created_at,
            updated_at=now, terminated_at=now if terminated else None, owner=owner,
        )  # fmt: skip
        ins = self._insert(clusters).values(**values)
        new = ins.excluded
        keep_first_end = sa.func.coalesce(clusters.c.terminated_at, new.terminated_at)
        update = {c: new[c] for c in ("provider", "sku", "nodes", "region", "state")}
        update |= {"cluster_json": new.cluster_json, "updated_at": new.updated_at}
        update["spec_json"] = sa.func.coalesce(new.spec_json, clusters.c.spec_json)
        update["plan_json"] = sa.func.coalesce(new.plan_json, clusters.c.plan_json)
        update["owner"] = sa.func.coalesce(new.owner, clusters.c.owner)
        update["terminated_at"] = sa.case(
            (new.state == ClusterState.TERMINATED.value, keep_first_end), else_=sa.null()
        )
        with self._conn(write=True) as conn:
            old = _fetch(conn, clusters, ClusterRow, name=cluster.name)
            if old is not None:
                _check_move("cluster", cluster.name, CLUSTER_MOVES, old.state, cluster.state)
            conn.execute(ins.on_conflict_do_update(index_elements=["name"], set_=update))
            row = _fetch(conn, clusters, ClusterRow, name=cluster.name)
            assert row is not None  # just written, in this transaction
            return row

    def forget_cluster(self, name: str) -> None:
        """Delete the record of a cluster that was never created (only a PROVISIONING one)."""
        where = (clusters.c.name == name) & (clusters.c.state == ClusterState.PROVISIONING.value)
        with self._conn(write=True) as conn:
            conn.execute(clusters.delete().where(where))

    def get_cluster(self, name: str) -> ClusterRow | None:
        with self._conn() as conn:
            return _fetch(conn, clusters, ClusterRow, name=name)

    def list_clusters(self, include_terminated: bool = False) -> list[ClusterRow]:
        gone = ClusterState.TERMINATED.value
        live = sa.true() if include_terminated else clusters.c.state != gone
        query = sa.select(clusters).where(live).order_by(clusters.c.created_at, clusters.c.name)
        with self._conn() as conn:
            return [ClusterRow.model_validate(r._asdict()) for r in conn.execute(query)]

    def set_cluster_state(self, name: str, state: ClusterState) -> ClusterRow:
        with self.transaction():
            row = self.get_cluster(name)
            if row is None:
                raise NotFoundError(f"cluster {name!r} is not in the store")
            return self.save_cluster(row.cluster.model_copy(update={"state": state}))

    # -- runs -----------------------------------------------------------------------------

    def create_run(self, run: RunRow) -> RunRow:
        with self._conn(write=True) as conn:
            conn.execute(runs.insert().values(**run.model_dump()))
        return run

    def update_run(self, id: str, **fields: object) -> RunRow:
        """Change some fields of run `id` (validated as a RunRow); updated_at defaults to now."""
        if "id" in fields:
            raise ValueError("a run's id cannot change")
        fields.setdefault("updated_at", utcnow())
        with self._conn(write=True) as conn:
            current = _fetch(conn, runs, RunRow, id=id)
            if current is None:
                raise NotFoundError(f"run {id!r} is not in the store")
            updated = RunRow.model_validate({**current.model_dump(), **fields})
            _check_move("run", id, RUN_MOVES, current.state, updated.state)
            values = updated.model_dump(include=set(fields))
            conn.execute(runs.update().where(runs.c.id == id).values(**values))
        return updated

    def get_run(self, id: str) -> RunRow | None:
        with self._conn() as conn:
            return _fetch(conn, runs, RunRow, id=id)

    def list_runs(
        self,
        cluster: str | None = None,
        sweep_id: str | None = None,
        states: Iterable[str] | None = None,
    ) -> list[RunRow]:
        query = _matching(runs, cluster=cluster, sweep_id=sweep_id)
        query = query.order_by(runs.c.created_at, runs.c.id)
        if states is not None:
            query = query.where(runs.c.state.in_(list(states)))
        with self._conn() as conn:
            return [RunRow.model_validate(r._asdict()) for r in conn.execute(query)]

    # -- attempts -------------------------------------------------------------------------

    def add_attempt(self, attempt: AttemptRow) -> AttemptRow:
        values = attempt_values(attempt)
        with self._conn(write=True) as conn:
            new_id = _new_id(conn.execute(attempts.insert().values(**values)))
        return attempt.model_copy(update={"id": new_id})

    def update_attempt(self, run_id: str, attempt: int, **fields: object) -> AttemptRow:
        """Change some fields of attempt number `attempt` of run `run_id`."""
        if {"id", "run_id", "attempt"} & set(fields):
            raise ValueError("an attempt's id, run_id and attempt number cannot change")
        where = (attempts.c.run_id == run_id) & (attempts.c.attempt == attempt)
        with self._conn(write=True) as conn:
            row = conn.execute(sa.select(attempts).where(where)).first()
            if row is None:
                raise NotFoundError(f"attempt {attempt} of run {run_id!r} is not in the store")
            current = attempt_row(row)
            updated = AttemptRow.model_validate({**current.model_dump(), **fields})
            _check_move(f"attempt {attempt} of run", run_id, ATTEMPT_MOVES, current.state, updated.state)
            values = {k: v for k, v in attempt_values(updated).items() if k in fields}
            conn.execute(attempts.update().where(where).values(**values))
        return updated

    def list_attempts(self, run_id: str) -> list[AttemptRow]:
        query = sa.select(attempts).where(attempts.c.run_id == run_id).order_by(attempts.c.attempt)
        with self._conn() as conn:
            return [attempt_row(r) for r in conn.execute(query)]

    # -- results --------------------------------------------------------------------------

    def add_result(self, result: ResultRow) -> tuple[int, bool]:
        """Store a result once: returns (id, True) when new, (existing id, False) for its hash."""
        with self._conn(write=True) as conn:
            return self._add_result(conn, result)

    def add_results(self, rows: Iterable[ResultRow], keep_ids: bool = False) -> list[tuple[int, bool]]:
        """add_result for each row in ONE transaction: all are stored or none is. keep_ids: a
        row keeps its id where no stored row has it (results pulled from another home keep
        theirs); the rows whose ids are taken are numbered after, once the others are in."""
        rows = list(rows)
        with self._conn(write=True) as conn:
            added: list[tuple[int, bool] | None] = [
                self._keep_id(conn, row) if keep_ids and row.id is not None else None for row in rows]
            if any(a is not None and a[1] for a in added) and self.backend == "postgresql":
                conn.execute(sa.text("SELECT setval(pg_get_serial_sequence('results', 'id'), "
                                     "(SELECT MAX(id) FROM results))"))  # number after the kept ids
            rest = [i for i, a in enumerate(added) if a is None]
            for i, outcome in zip(rest, self._add_many(conn, [rows[i] for i in rest])):
                added[i] = outcome
            return [a for a in added if a is not None]

    def list_results(
        self,
        benchmark: str | None = None,
        system: str | None = None,
        cluster: str | None = None,
        since: datetime | None = None,
        source: Literal["run", "import"] | None = None,
        until: datetime | None = None,
    ) -> list[ResultRow]:
        """Stored results, oldest first; `since` and `until` bound created_at (both inclusive)."""
        query = _matching(results, benchmark=benchmark, system=system, source=source)
        query = query.order_by(results.c.created_at, results.c.id)
        if since is not None:
            query = query.where(results.c.created_at >= since)
        if until is not None:
            query = query.where(results.c.created_at <= until)
        if cluster is not None:  # imported results have no run, so no cluster
            query = query.join(runs, runs.c.id == results.c.run_id).where(runs.c.cluster == cluster)
        with self._conn() as conn:
            return [ResultRow.model_validate(r._asdict()) for r in conn.execute(query)]

    def get_result(self, id: int) -> ResultRow | None:
        """One stored result by id (one row read), or None."""
        with self._conn() as conn:
            return _fetch(conn, results, ResultRow, id=id)

    def results_by_hash(self, hashes: Iterable[str]) -> dict[str, ResultRow]:
        """The stored results among `hashes` (content sha256), by hash: what an import skips."""
        wanted = sorted(set(hashes))
        found: dict[str, ResultRow] = {}
        with self._conn() as conn:
            for start in range(0, len(wanted), 500):  # under SQLite's bound on query variables
                query = sa.select(results).where(results.c.content_hash.in_(wanted[start:start + 500]))
                for r in conn.execute(query):
                    row = ResultRow.model_validate(r._asdict())
                    found[row.content_hash] = row
        return found

    def refile_results(self, rows: Iterable[ResultRow]) -> int:
        """Set the round, ruleset and compliance verdict of stored results (by id) to the rows'
        (an import told the round its files did not name: `results import --round`); returns
        how many were updated."""
        changed = 0
        with self._conn(write=True) as conn:
            for row in rows:
                if row.id is None:
                    continue
                done = conn.execute(results.update().where(results.c.id == row.id).values(
                    round=row.round, ruleset=row.ruleset, compliance_ok=row.compliance_ok,
                    compliance_json=row.compliance_json))
                changed += done.rowcount or 0
        return changed

    def result_names(self, field: Literal["benchmark", "system", "cluster"]) -> list[str]:
        """The distinct values of one field over the stored results, sorted (cluster: the
        clusters their runs ran on; imported results have none)."""
        column = runs.c.cluster if field == "cluster" else results.c[field]
        query = sa.select(column).distinct().where(column.is_not(None))
        if field == "cluster":
            query = query.select_from(results.join(runs, runs.c.id == results.c.run_id))
        with self._conn() as conn:
            return sorted(str(v) for v in conn.execute(query).scalars())

    # -- fabric results -------------------------------------------------------------------

    def add_fabric_results(self, rows: Iterable[FabricResultRow]) -> list[tuple[int, bool]]:
        """Store each collective's run once, all in ONE transaction: (id, True) when new, (the
        stored id, False) for a hash already stored."""
        out = []
        with self._conn(write=True) as conn:
            for row in rows:
                stmt = (self._insert(fabric_results).values(**row.model_dump(exclude={"id"}))
                        .on_conflict_do_nothing(index_elements=["content_hash"]).returning(fabric_results.c.id))
                new_id = conn.execute(stmt).scalar()
                if new_id is None:
                    query = sa.select(fabric_results.c.id).where(fabric_results.c.content_hash == row.content_hash)
                    out.append((int(conn.execute(query).scalar_one()), False))
                else:
                    out.append((int(new_id), True))
        return out

    def list_fabric_results(self, cluster: str | None = None, collective: str | None = None,
                            since: datetime | None = None, until: datetime | None = None) -> list[FabricResultRow]:
        """Stored collective runs, oldest first; `since`/`until` bound created_at (inclusive)."""
        query = _matching(fabric_results, cluster=cluster, collective=collective)
        query = query.order_by(fabric_results.c.created_at, fabric_results.c.id)
        if since is not None:
            query = query.where(fabric_results.c.created_at >= since)
        if until is not None:
            query = query.where(fabric_results.c.created_at <= until)
        with self._conn() as conn:
            return [FabricResultRow.model_validate(r._asdict()) for r in conn.execute(query)]

    # -- events ---------------------------------------------------------------------------

    def add_event(self, ev: EventRow) -> EventRow:
        values = ev.model_dump(exclude={"id", "data"})
        values["data_json"] = ev.data.to_json()  # JSON only here, at the SQL edge
        with self._conn(write=True) as conn:
            new_id = _new_id(conn.execute(events.insert().values(**values)))
        return ev.model_copy(update={"id": new_id})

    def list_events(
        self, run_id: str | None = None, cluster: str | None = None, limit: int = 200
    ) -> list[EventRow]:
        """The latest `limit` events matching, oldest first."""
        query = _matching(events, run_id=run_id, cluster=cluster)
        query = query.order_by(events.c.id.desc()).limit(limit)
        with self._conn() as conn:
            rows = list(conn.execute(query))
        return [event_row(r) for r in reversed(rows)]

    # -- baselines ------------------------------------------------------------------------

    def save_baseline(self, row: BaselineRow) -> BaselineRow:
        """Insert or replace the baseline `row.name` in one transaction; a replaced one keeps
        its created_at. Returns the row as stored."""
        values = row.model_dump(exclude={"name", "created_at"})
        with self._conn(write=True) as conn:
            old = _fetch(conn, baselines, BaselineRow, name=row.name)
            if old is None:
                conn.execute(baselines.insert().values(name=row.name, created_at=row.created_at,
                                                       **values))
            else:
                conn.execute(baselines.update().where(baselines.c.name == row.name).values(**values))
            stored = conn.execute(_matching(baselines, name=row.name)).one()
        return BaselineRow.model_validate(stored._asdict())

    def get_baseline(self, name: str) -> BaselineRow | None:
        with self._conn() as conn:
            return _fetch(conn, baselines, BaselineRow, name=name)

    def list_baselines(self) -> list[BaselineRow]:
        """Every baseline, by name."""
        with self._conn() as conn:
            rows = conn.execute(sa.select(baselines).order_by(baselines.c.name))
            return [BaselineRow.model_validate(r._asdict()) for r in rows]

    def delete_baseline(self, name: str) -> bool:
        """Delete the baseline `name`; False when there was none."""
        with self._conn(write=True) as conn:
            return bool(conn.execute(baselines.delete().where(baselines.c.name == name)).rowcount)

    # -- plumbing -------------------------------------------------------------------------

    @classmethod
    def _open_sqlite(cls, path: Path) -> Store:
        refuse_non_sqlite_file(path)
        _private_file(path)
        url = sa.engine.URL.create("sqlite", database=str(path))
        engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return cls(engine, str(path))

    @classmethod
    def _open_postgres(cls, url: sa.engine.URL) -> Store:
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

    def _insert(self, table: sa.Table) -> Any:
        return (pg_insert if self.backend == "postgresql" else sqlite_insert)(table)

    def _add_result(self, conn: Connection, result: ResultRow) -> tuple[int, bool]:
        values = result.model_dump(exclude={"id"})
        stmt = (
            self._insert(results)
            .values(**values)
            .on_conflict_do_nothing(index_elements=["content_hash"])
            .returning(results.c.id)
        )
        new_id = conn.execute(stmt).scalar()
        if new_id is not None:
            return int(new_id), True
        query = sa.select(results.c.id).where(results.c.content_hash == result.content_hash)
        return int(conn.execute(query).scalar_one()), False

    def _add_many(self, conn: Connection, rows: list[ResultRow]) -> list[tuple[int, bool]]:
        """_add_result for many rows, a few hundred per INSERT (10,000 rows one by one took
        most of an import): new rows come back from RETURNING, the rest are looked up."""
        stmt = (self._insert(results).on_conflict_do_nothing(index_elements=["content_hash"])
                .returning(results.c.id, results.c.content_hash))
        inserted: dict[str, int] = {}
        for start in range(0, len(rows), 500):
            batch = [r.model_dump(exclude={"id"}) for r in rows[start:start + 500]]
            inserted.update((h, int(i)) for i, h in conn.execute(stmt, batch))
        others = sorted({r.content_hash for r in rows} - inserted.keys())
        stored: dict[str, int] = {}
        for start in range(0, len(others), 500):
            query = sa.select(results.c.id, results.c.content_hash).where(
                results.c.content_hash.in_(others[start:start + 500]))
            stored.update((h, int(i)) for i, h in conn.execute(query))
        out: list[tuple[int, bool]] = []
        for r in rows:  # a hash twice in `rows`: the first is the new one
            if r.content_hash in inserted:
                out.append((inserted.pop(r.content_hash), True))
                stored[r.content_hash] = out[-1][0]
            else:
                out.append((stored[r.content_hash], False))
        return out

    def _keep_id(self, conn: Connection, result: ResultRow) -> tuple[int, bool] | None:
        """Store `result` under its own id: (id, True); (the stored id, False) when its hash is
        stored; None when another row has the id."""
        stored = conn.execute(sa.select(results.c.id).where(results.c.content_hash == result.content_hash)).scalar()
        if stored is not None:
            return int(stored), False
        if result.id is None or conn.execute(sa.select(results.c.id).where(results.c.id == result.id)).scalar():
            return None
        conn.execute(results.insert().values(**result.model_dump()))
        return result.id, True


def _new_id(result: sa.CursorResult[Any]) -> int:
    """The primary key an INSERT made (SQLite and PostgreSQL both report it)."""
    key = result.inserted_primary_key
    if key is None or key[0] is None:
        raise StoreError("the database did not report the new row's id")
    return int(key[0])


def _check_move(what: str, name: str, table: dict[str, frozenset[str]], old: str, new: str) -> None:
    """StoreError unless `old` may become `new` (models.*_MOVES)."""
    if not legal_move(table, old, new):
        raise StoreError(f"{what} {name!r}: refusing the state change {_label(old)} -> {_label(new)} "
                         "(not an allowed transition)")


def _label(state: str) -> str:
    return state.value if isinstance(state, Enum) else state


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


def _matching(table: sa.Table, **equal: object) -> sa.Select[Any]:
    """SELECT * FROM table WHERE each non-None keyword equals its column."""
    conds = [table.c[name] == value for name, value in equal.items() if value is not None]
    return sa.select(table).where(*conds)


def _fetch(conn: Connection, table: sa.Table, model: type[_M], **equal: object) -> _M | None:
    row = conn.execute(_matching(table, **equal)).first()
    return model.model_validate(row._asdict()) if row else None


def _reason(exc: BaseException, password: str | None) -> str:
    """The driver's first line of complaint, with the password (if any) blanked out."""
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    text = " ".join(lines[0].split()) if lines else type(orig).__name__
    text = re.sub(_PG_PREFIX, "", text)
    return text.replace(password, "***") if password else text


__all__ = ["AttemptRow", "BaselineRow", "ClusterRow", "EventRow", "FabricResultRow", "ResultRow", "RunRow", "SCHEMA_VERSION",
           "Store"]
