"""The results store's schema: its tables, the migrations that build them, and the row models.

The Table objects describe the *latest* schema and are what store.database queries. `MIGRATIONS` is
the ordered list of (version, step) pairs that brings any older database up to
`SCHEMA_VERSION`; `migrate()` applies the missing steps inside the caller's transaction and
records the version in the `meta` table; `current_version()` and `refuse_non_sqlite_file()`
refuse, untouched, a database that is not ours. Column types behave identically on SQLite and
PostgreSQL. The pydantic row models (ClusterRow, RunRow, ...) are the typed rows the Store API
takes and returns; they are re-exported by orchestrator.store.database (EventRow, with its
payloads, lives in store.events and is re-exported here).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.engine import Connection, Dialect

from orchestrator.errors import StoreError
from orchestrator.models import AttemptState, Cluster, ClusterState, RunState, utcnow
from orchestrator.store.events import EventRow as EventRow  # re-exported beside the other row models
from orchestrator.store.events import stored_payload

SCHEMA_VERSION = 6
VERSION_KEY = "schema_version"
SQLITE_MAGIC = b"SQLite format 3\x00"


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend.

    PostgreSQL keeps TIMESTAMPTZ; SQLite has no time zones and hands back naive values, so we
    store UTC there and re-attach the zone on the way out. Naive input is refused: a naive
    timestamp is a bug at the caller, and guessing its zone would silently shift results.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value.isoformat()} given to the store: use UTC")
        value = value.astimezone(timezone.utc)
        # SQLite compares these as text: a uniform naive-UTC format keeps ordering correct.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


# Autoincrementing ids: BIGINT on PostgreSQL, but SQLite only autoincrements an INTEGER rowid.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

metadata = sa.MetaData()

meta = sa.Table(
    "meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

clusters = sa.Table(
    "clusters",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("provider", sa.String(32), nullable=False),
    sa.Column("sku", sa.String(128), nullable=False),
    sa.Column("nodes", sa.Integer, nullable=False),
    sa.Column("region", sa.String(64)),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("spec_json", sa.Text),
    sa.Column("plan_json", sa.Text),  # v4: the plan `up` stored, PROVISIONING, before creating anything
    sa.Column("cluster_json", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Column("terminated_at", UTCDateTime),
    sa.Column("owner", sa.String(256)),  # v6: who pays (the Azure principal, or $USER)
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("sweep_id", sa.String(128)),
    sa.Column("cluster", sa.String(128), nullable=False),
    sa.Column("recipe", sa.String(128), nullable=False),
    sa.Column("benchmark", sa.String(128), nullable=False),
    sa.Column("nodes", sa.Integer, nullable=False),
    sa.Column("repeat_index", sa.Integer, nullable=False),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("spec_json", sa.Text),
    sa.Column("job_id", sa.String(64)),
    sa.Column("run_dir", sa.Text),
    sa.Column("message", sa.Text),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Column("owner", sa.String(256)),  # v6: its cluster's owner when it was created
)

attempts = sa.Table(
    "attempts",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("job_id", sa.String(64)),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("failure_class", sa.String(64)),
    sa.Column("excluded_nodes", sa.Text, nullable=False),  # JSON list of node names
    sa.Column("resumed_from_step", sa.BigInteger),
    sa.Column("lost_steps", sa.BigInteger),
    sa.Column("lost_seconds", sa.Float),
    sa.Column("message", sa.Text),
    sa.Column("started_at", UTCDateTime),
    sa.Column("ended_at", UTCDateTime),
    sa.Column("gate_started_at", UTCDateTime),  # v6: its health gate began (goodput)
    sa.Column("submitted_at", UTCDateTime),  # v6: handed to the scheduler (goodput)
    sa.UniqueConstraint("run_id", "attempt", name="uq_attempts_run_attempt"),
)

results = sa.Table(
    "results",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("content_hash", sa.String(128), nullable=False, unique=True),
    sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.id")),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("round", sa.String(32)),
    sa.Column("submitter", sa.String(128)),
    sa.Column("system", sa.String(256)),
    sa.Column("benchmark", sa.String(128), nullable=False),
    sa.Column("ruleset", sa.String(32)),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("converged", sa.Boolean, nullable=False),
    sa.Column("minutes", sa.Float),
    sa.Column("run_start_ms", sa.BigInteger),
    sa.Column("run_stop_ms", sa.BigInteger),
    sa.Column("global_batch_size", sa.Integer),
    sa.Column("nodes", sa.Integer),
    sa.Column("gpus", sa.Integer),
    sa.Column("sku", sa.String(128)),
    sa.Column("resumed", sa.Boolean, nullable=False),
    sa.Column("scaling_factor", sa.Float),
    sa.Column("summary_json", sa.Text),
    sa.Column("compliance_ok", sa.Boolean),
    sa.Column("compliance_json", sa.Text),
    sa.Column("log_path", sa.Text),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.CheckConstraint("source IN ('run', 'import')", name="ck_results_source"),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("ts", UTCDateTime, nullable=False),
    sa.Column("cluster", sa.String(128)),
    sa.Column("run_id", sa.String(128)),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("data_json", sa.Text),
)

baselines = sa.Table(
    "baselines",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("source_json", sa.Text, nullable=False),  # how it was chosen (sweeps, filters)
    sa.Column("data_json", sa.Text, nullable=False),  # per benchmark x scale metric samples
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

# v5: collectives as a benchmark (`azbench fabric test`, nccl-tests outputs imported): one row per
# collective run, its sizes and NCCL's transport facts as JSON (fabric/stored.py's shape).
fabric_results = sa.Table(
    "fabric_results",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("content_hash", sa.String(128), nullable=False, unique=True),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("cluster", sa.String(128)),
    sa.Column("sku", sa.String(128)),
    sa.Column("device", sa.String(8), nullable=False),  # GPU or CPU
    sa.Column("backend", sa.String(64), nullable=False),  # nccl-tests, or torch.distributed gloo
    sa.Column("collective", sa.String(64)),
    sa.Column("scope", sa.String(256)),  # which nodes: "4 nodes", "rack nvl-...", "across 8 racks"
    sa.Column("nodes", sa.Integer),
    sa.Column("ranks", sa.Integer, nullable=False),
    sa.Column("hosts", sa.Integer, nullable=False),
    sa.Column("gpus_per_host", sa.Integer),
    sa.Column("wrong", sa.BigInteger),
    sa.Column("avg_busbw_gbps", sa.Float),  # nccl-tests' "Avg bus bandwidth" line, kept as printed
    sa.Column("sizes_json", sa.Text, nullable=False),
    sa.Column("transport_json", sa.Text),
    sa.Column("job_id", sa.String(64)),
    sa.Column("log_path", sa.Text),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.CheckConstraint("source IN ('test', 'import')", name="ck_fabric_results_source"),
)

TABLES = (meta, clusters, runs, attempts, results, events, baselines, fabric_results)
TABLE_NAMES = frozenset(t.name for t in TABLES)


# The tables as v1 created them (v4 added clusters.plan_json, v6 the owners and the attempts'
# gate and submit times): v1 must build exactly v1, so that the later steps apply to a fresh
# database as they do to an old one.
_V1_LATER = {"clusters": {"plan_json", "owner"}, "runs": {"owner"},
             "attempts": {"gate_started_at", "submitted_at"}}
_v1_metadata = sa.MetaData()


def _as_v1(table: sa.Table) -> sa.Table:
    """`table` without the columns later steps added, in the v1 metadata: its other columns
    (foreign keys kept) and its named unique and check constraints."""
    later = _V1_LATER.get(table.name, set())
    columns = [sa.Column(c.name, c.type, *(sa.ForeignKey(fk.target_fullname) for fk in c.foreign_keys),
                         primary_key=c.primary_key, nullable=c.nullable, unique=c.unique,
                         autoincrement=c.autoincrement)
               for c in table.columns if c.name not in later]
    constraints: list[sa.Constraint] = []
    for k in table.constraints:
        if isinstance(k, sa.UniqueConstraint):
            constraints.append(sa.UniqueConstraint(*(c.name for c in k.columns), name=k.name))
        elif isinstance(k, sa.CheckConstraint):
            constraints.append(sa.CheckConstraint(k.sqltext, name=k.name))
    return sa.Table(table.name, _v1_metadata, *columns, *constraints)


_clusters_v1, _runs_v1, _attempts_v1 = (_as_v1(t) for t in (clusters, runs, attempts))


def _v1_initial(conn: Connection) -> None:
    # results and events are still v1 exactly: later steps only added indexes, a table, and
    # the columns frozen out above.
    _v1_metadata.create_all(conn)
    metadata.create_all(conn, tables=[results, events])


def _v2_indexes(conn: Connection) -> None:
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_results_benchmark_system ON results (benchmark, system)"
    )
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_events_run_id ON events (run_id)")


def _v3_baselines(conn: Connection) -> None:
    metadata.create_all(conn, tables=[baselines])  # performance baselines (orchestrator.pipelines.baselines)


def _v4_plan(conn: Connection) -> None:
    conn.exec_driver_sql("ALTER TABLE clusters ADD COLUMN plan_json TEXT")


def _v5_fabric(conn: Connection) -> None:
    metadata.create_all(conn, tables=[fabric_results])  # `azbench fabric test` and imported nccl-tests


def _v6_goodput(conn: Connection) -> None:
    """Owners (team cost) and the attempt marks goodput reads (orchestrator.goodput)."""
    conn.exec_driver_sql("ALTER TABLE clusters ADD COLUMN owner VARCHAR(256)")
    conn.exec_driver_sql("ALTER TABLE runs ADD COLUMN owner VARCHAR(256)")
    kind = sa.DateTime(timezone=True).compile(dialect=conn.dialect)  # as UTCDateTime's impl
    for column in ("gate_started_at", "submitted_at"):
        conn.exec_driver_sql(f"ALTER TABLE attempts ADD COLUMN {column} {kind}")


MIGRATIONS: list[tuple[int, Callable[[Connection], None]]] = [
    (1, _v1_initial),
    (2, _v2_indexes),
    (3, _v3_baselines),
    (4, _v4_plan),
    (5, _v5_fabric),
    (6, _v6_goodput),
]


def migrate(
    conn: Connection,
    *,
    target: int = SCHEMA_VERSION,
    where: str = "database",
    whole_file: bool = False,
) -> int:
    """Bring the database on `conn` up to `target` inside the caller's transaction.

    Returns the version found before migrating (0 for an empty database). Raises StoreError
    for a database written by a newer azbench, or one that is not ours (see current_version).
    """
    found = current_version(conn, where=where, whole_file=whole_file)
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"database schema v{found} is newer than this azbench (v{SCHEMA_VERSION}): "
            "upgrade azbench"
        )
    if found == 0:
        meta.create(conn, checkfirst=True)
    for version, step in MIGRATIONS:
        if found < version <= target:
            step(conn)
            _set_version(conn, version)
    return found


def current_version(conn: Connection, *, where: str = "database", whole_file: bool = False) -> int:
    """The schema version recorded in `meta`, or 0 when the database has no azbench tables.

    Without `meta`, any of our table names means someone else's database; with `whole_file`
    (a SQLite file is all ours), so does any table at all.
    """
    names = set(sa.inspect(conn).get_table_names()) - {"sqlite_sequence"}
    if "meta" not in names:
        if whole_file and names - TABLE_NAMES:
            raise StoreError(f"{where} is not an azbench database (it holds other tables)")
        clash = sorted(names & TABLE_NAMES)
        if clash:
            raise StoreError(
                f"{where} is not an azbench database (tables {', '.join(clash)} without a version)"
            )
        return 0
    row = conn.execute(sa.select(meta.c.value).where(meta.c.key == VERSION_KEY)).first()
    try:
        return int(row[0]) if row is not None else 0
    except ValueError:
        raise StoreError(f"database schema version {row[0] if row is not None else ''!r} "
                         "is not a number") from None


def refuse_non_sqlite_file(path: Path) -> None:
    """Raise StoreError, touching nothing, when `path` exists but is no SQLite file."""
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if head and head != SQLITE_MAGIC:
        raise StoreError(f"{path} is not an azbench database (file is not a database)")


def _set_version(conn: Connection, version: int) -> None:
    updated = conn.execute(
        meta.update().where(meta.c.key == VERSION_KEY).values(value=str(version))
    )
    if updated.rowcount == 0:
        conn.execute(meta.insert().values(key=VERSION_KEY, value=str(version)))


# -- row models: what the Store API takes and returns -----------------------------------


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClusterRow(_Row):
    """One cluster; `cluster` rebuilds the models.Cluster that was saved."""

    name: str
    provider: str
    sku: str
    nodes: int
    region: str | None = None
    state: ClusterState
    spec_json: str | None = None
    plan_json: str | None = None
    cluster_json: str
    created_at: datetime
    updated_at: datetime
    terminated_at: datetime | None = None
    owner: str | None = None  # None: recorded before owners were (v6)

    @property
    def cluster(self) -> Cluster:
        return Cluster.model_validate_json(self.cluster_json)


class RunRow(_Row):
    """One benchmark run (one recipe x nodes x repeat); its attempts are AttemptRows."""

    id: str
    sweep_id: str | None = None
    cluster: str
    recipe: str
    benchmark: str
    nodes: int
    repeat_index: int = 0
    state: RunState = RunState.PENDING
    spec_json: str | None = None
    job_id: str | None = None
    run_dir: str | None = None
    message: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    owner: str | None = None  # its cluster's owner (None: recorded before owners were, v6)


class AttemptRow(_Row):
    """One scheduler job for a run; a retry is a new attempt number."""

    id: int | None = None
    run_id: str
    attempt: int
    job_id: str | None = None
    state: AttemptState = AttemptState.PENDING
    failure_class: str | None = None
    excluded_nodes: list[str] = Field(default_factory=list)
    resumed_from_step: int | None = None
    lost_steps: int | None = None
    lost_seconds: float | None = None
    message: str | None = None
    started_at: datetime | None = None  # its row was made (before its gate and submit)
    ended_at: datetime | None = None
    gate_started_at: datetime | None = None  # its health gate began (None: no gate)
    submitted_at: datetime | None = None  # handed to the scheduler


class ResultRow(_Row):
    """One scored MLPerf result, from our own run or imported; unique by `content_hash`."""

    id: int | None = None
    content_hash: str
    run_id: str | None = None
    source: Literal["run", "import"]
    round: str | None = None
    submitter: str | None = None
    system: str | None = None
    benchmark: str
    ruleset: str | None = None
    status: str
    converged: bool
    minutes: float | None = None
    run_start_ms: int | None = None
    run_stop_ms: int | None = None
    global_batch_size: int | None = None
    nodes: int | None = None
    gpus: int | None = None
    sku: str | None = None
    resumed: bool = False
    scaling_factor: float | None = None
    summary_json: str | None = None
    compliance_ok: bool | None = None
    compliance_json: str | None = None
    log_path: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class BaselineRow(_Row):
    """One named performance baseline as stored: how it was chosen and its samples, both JSON
    (their shape is orchestrator.pipelines.baselines', the store keeps them as written)."""

    name: str
    source_json: str
    data_json: str
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class FabricResultRow(_Row):
    """One collective's run stored as a result (`azbench fabric test`, or an imported nccl-tests
    output); unique by `content_hash`. `sizes_json` holds per size: size (bytes), time_us, algbw,
    busbw, wrong (fabric/stored.py writes and reads it); `transport_json` NCCL's log facts."""

    id: int | None = None
    content_hash: str
    source: Literal["test", "import"]
    cluster: str | None = None
    sku: str | None = None
    device: Literal["GPU", "CPU"]
    backend: str
    collective: str | None = None
    scope: str | None = None
    nodes: int | None = None
    ranks: int
    hosts: int
    gpus_per_host: int | None = None
    wrong: int | None = None
    avg_busbw_gbps: float | None = None
    sizes_json: str
    transport_json: str | None = None
    job_id: str | None = None
    log_path: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


def attempt_values(attempt: AttemptRow) -> dict[str, Any]:
    """The column values of `attempt` for an INSERT or UPDATE of `attempts`: the SQL edge, read
    only by store.database (excluded_nodes as its JSON text). Reads return AttemptRow (attempt_row)."""
    values = attempt.model_dump(exclude={"id"})
    values["excluded_nodes"] = json.dumps(attempt.excluded_nodes)
    return values


def attempt_row(row: sa.Row[Any]) -> AttemptRow:
    """A stored attempt, its excluded_nodes parsed from their JSON text."""
    data = row._asdict()
    data["excluded_nodes"] = json.loads(data["excluded_nodes"] or "[]")
    return AttemptRow.model_validate(data)


def event_row(row: sa.Row[Any]) -> EventRow:
    """A stored event, its data typed by store.events.stored_payload (any row an azbench wrote reads)."""
    data = row._asdict()
    text = data.pop("data_json")
    return EventRow.model_validate({**data, "data": stored_payload(data["kind"], text)})
