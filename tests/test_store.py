"""The results store, run whole against SQLite and a real PostgreSQL server (same tests, both)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from orchestrator.errors import NotFoundError, StoreError
from orchestrator.models import Cluster, ClusterState, SshTarget
from orchestrator.store.database import (
    SCHEMA_VERSION,
    AttemptRow,
    BaselineRow,
    EventRow,
    ResultRow,
    RunRow,
    Store,
)
from orchestrator.store.events import SpotRestoreData
from orchestrator.store.schema import meta, migrate

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)]
UTC = timezone.utc


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, azbench_home: Path) -> str | None:
    """None for SQLite (the default file under $AZBENCH_HOME), else a fresh PostgreSQL db."""
    if request.param == "sqlite":
        return None
    return request.getfixturevalue("pg_database_url")


@pytest.fixture
def store(db_url: str | None):
    s = Store.open(db_url)
    yield s
    s.close()


def raw_engine(db_url: str | None) -> sa.Engine:
    """An engine that bypasses Store, to fake old or foreign databases."""
    if db_url is None:
        home = Path(os.environ["AZBENCH_HOME"])
        home.mkdir(parents=True, exist_ok=True)
        return sa.create_engine(f"sqlite:///{home / 'azbench.db'}")
    return sa.create_engine(db_url)


def a_cluster(name: str = "c1", **kw) -> Cluster:
    ssh = SshTarget(host="127.0.0.1", port=2222, user="azb", key_path=Path("/k/id"),
                    known_hosts=Path("/k/known_hosts"))  # fmt: skip
    return Cluster(name=name, provider="local", sku="Standard_ND96isr_H100_v5", nodes=2,
                   region="eastus", node_names=["n1", "n2"], ssh=ssh, env={"A": "1"},
                   **kw)  # fmt: skip


def a_run(id: str = "r1", **kw) -> RunRow:
    return RunRow(**{"id": id, "cluster": "c1", "recipe": "smoke", "benchmark": "smoke",
                     "nodes": 2, **kw})  # fmt: skip


def a_result(hash_: str, **kw) -> ResultRow:
    base = dict(content_hash=hash_, source="import", benchmark="bert", system="ND_H100_v5x8",
                status="success", converged=True, minutes=5.25, run_start_ms=1_717_000_000_123,
                run_stop_ms=1_717_000_315_456, gpus=64, nodes=8, compliance_ok=None)  # fmt: skip
    return ResultRow(**{**base, **kw})


# -- round trips ------------------------------------------------------------------------------


def test_cluster_round_trip_and_state(store: Store) -> None:
    cluster = a_cluster()
    saved = store.save_cluster(cluster, '{"name": "c1"}')
    got = store.get_cluster("c1")
    assert got == saved and got.cluster == cluster
    assert got.created_at.tzinfo is not None and got.terminated_at is None
    assert store.get_cluster("nope") is None

    ready = store.save_cluster(cluster.model_copy(update={"state": ClusterState.READY}))
    assert ready.spec_json == '{"name": "c1"}'  # None keeps the stored spec
    assert ready.created_at == saved.created_at and ready.state == ClusterState.READY

    gone = store.set_cluster_state("c1", ClusterState.TERMINATED)
    assert gone.terminated_at is not None and gone.cluster.state == ClusterState.TERMINATED
    assert store.list_clusters() == []
    assert [c.name for c in store.list_clusters(include_terminated=True)] == ["c1"]
    with pytest.raises(NotFoundError):
        store.set_cluster_state("nope", ClusterState.READY)


def test_run_round_trip_update_and_filters(store: Store) -> None:
    store.create_run(a_run("r1", sweep_id="s1"))
    store.create_run(a_run("r2", sweep_id="s1", cluster="c2"))
    store.create_run(a_run("r3"))
    assert store.get_run("r1") == a_run("r1", sweep_id="s1").model_copy(
        update={"created_at": store.get_run("r1").created_at,
                "updated_at": store.get_run("r1").updated_at})  # fmt: skip
    before = store.get_run("r1")
    after = store.update_run("r1", state="running", job_id="42")
    assert (after.state, after.job_id) == ("running", "42")
    assert after.updated_at >= before.updated_at
    assert store.get_run("r1") == after
    assert [r.id for r in store.list_runs(sweep_id="s1")] == ["r1", "r2"]
    assert [r.id for r in store.list_runs(cluster="c1")] == ["r1", "r3"]
    assert [r.id for r in store.list_runs(states=["running"])] == ["r1"]
    with pytest.raises(ValidationError):
        store.update_run("r1", no_such_field=1)
    with pytest.raises(NotFoundError):
        store.update_run("missing", state="x")
    with pytest.raises(StoreError):
        store.create_run(a_run("r1"))  # duplicate id


def test_attempts_round_trip(store: Store) -> None:
    store.create_run(a_run())
    first = store.add_attempt(AttemptRow(run_id="r1", attempt=1, job_id="7", state="running"))
    store.add_attempt(
        AttemptRow(run_id="r1", attempt=2, excluded_nodes=["n2"], resumed_from_step=300)
    )
    assert first.id is not None
    ended = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    done = store.update_attempt("r1", 1, state="failed", failure_class="node", lost_steps=12,
                                lost_seconds=33.5, ended_at=ended)  # fmt: skip
    listed = store.list_attempts("r1")
    assert listed[0] == done and listed[0].ended_at == ended
    assert listed[1].excluded_nodes == ["n2"] and listed[1].resumed_from_step == 300
    with pytest.raises(StoreError):
        store.add_attempt(AttemptRow(run_id="r1", attempt=2))  # UNIQUE(run_id, attempt)
    with pytest.raises(StoreError):
        store.add_attempt(AttemptRow(run_id="no-such-run", attempt=1))  # foreign key
    with pytest.raises(NotFoundError):
        store.update_attempt("r1", 9, state="x")
    assert len(store.list_attempts("r1")) == 2


def test_add_result_is_idempotent_by_hash(store: Store) -> None:
    row = a_result("h1", scaling_factor=1.5, summary_json='{"a": 1}')
    new_id, created = store.add_result(row)
    assert created is True
    assert store.add_result(row) == (new_id, False)
    assert store.add_result(a_result("h1", minutes=99.0)) == (new_id, False)
    [got] = store.list_results()
    assert got == row.model_copy(update={"id": new_id})
    assert got.run_start_ms == 1_717_000_000_123 and got.compliance_ok is None
    assert store.get_result(new_id) == got and store.get_result(new_id + 1) is None  # one row read


def test_add_results_is_all_or_nothing(store: Store) -> None:
    bad = a_result("h2", source="run", run_id="no-such-run")  # violates the foreign key
    with pytest.raises(StoreError):
        store.add_results([a_result("h1"), bad, a_result("h3")])
    assert store.list_results() == []
    outcome = store.add_results([a_result("h1"), a_result("h3"), a_result("h1")])
    assert [c for _, c in outcome] == [True, True, False] and outcome[0][0] == outcome[2][0]
    assert len(store.list_results()) == 2


def test_list_results_filters(store: Store) -> None:
    store.create_run(a_run("r1"))
    store.create_run(a_run("r2", cluster="c2"))
    old = datetime(2024, 1, 1, tzinfo=UTC)
    store.add_results([
        a_result("a", source="run", run_id="r1", created_at=old),
        a_result("b", source="run", run_id="r2", benchmark="llama2_70b_lora"),
        a_result("c", system="other"),
    ])  # fmt: skip
    hashes = lambda rows: sorted(r.content_hash for r in rows)  # noqa: E731
    assert hashes(store.list_results(benchmark="bert")) == ["a", "c"]
    assert hashes(store.list_results(system="other")) == ["c"]
    assert hashes(store.list_results(cluster="c1")) == ["a"]
    assert hashes(store.list_results(source="run")) == ["a", "b"]
    assert hashes(store.list_results(since=old + timedelta(days=1))) == ["b", "c"]
    assert hashes(store.list_results(until=old + timedelta(days=1))) == ["a"]
    assert hashes(store.list_results(since=old, until=old)) == ["a"]  # both bounds inclusive


def test_events_filters_limit_and_data(store: Store) -> None:
    for i in range(5):
        run_id = "r1" if i % 2 else None
        data = {"nodes": [f"n{i}"], "hosts": ["h1"]}
        store.add_event(EventRow(kind="spot_restore", message=f"m{i}", cluster="c1", run_id=run_id, data=data))
    assert [e.message for e in store.list_events(limit=3)] == ["m2", "m3", "m4"]
    assert [e.message for e in store.list_events(run_id="r1")] == ["m1", "m3"]
    assert len(store.list_events(cluster="c1")) == 5 and store.list_events(cluster="c9") == []
    assert store.list_events(limit=1)[0].data == SpotRestoreData(nodes=["n4"], hosts=["h1"])


def test_baselines_save_replace_keeping_created_at_list_and_delete(store: Store) -> None:
    t0, t1 = datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 6, 2, tzinfo=UTC)
    first = store.save_baseline(BaselineRow(name="b", source_json="{}", data_json="[1]",
                                            created_at=t0, updated_at=t0))
    assert first.created_at == t0 and first.data_json == "[1]"
    again = store.save_baseline(BaselineRow(name="b", source_json='{"s": 1}', data_json="[2]",
                                            created_at=t1, updated_at=t1))
    assert (again.created_at, again.updated_at, again.data_json) == (t0, t1, "[2]")
    store.save_baseline(BaselineRow(name="a", source_json="{}", data_json="[]"))
    assert [b.name for b in store.list_baselines()] == ["a", "b"]
    assert store.get_baseline("b") == again and store.get_baseline("nope") is None
    assert store.delete_baseline("b") and not store.delete_baseline("b")
    assert store.get_baseline("b") is None


def test_timestamps_are_utc_and_naive_ones_refused(store: Store) -> None:
    plus2 = timezone(timedelta(hours=2))
    started = datetime(2025, 6, 1, 12, 0, tzinfo=plus2)
    store.create_run(a_run())
    store.add_attempt(AttemptRow(run_id="r1", attempt=1, started_at=started))
    [got] = store.list_attempts("r1")
    assert got.started_at == started and got.started_at.utcoffset() == timedelta(0)
    with pytest.raises(StoreError, match="naive datetime"):
        store.add_event(EventRow(kind="x", ts=datetime(2025, 1, 1)))


def test_transaction_commits_or_rolls_back_together(store: Store) -> None:
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.create_run(a_run("r1"))
            store.add_attempt(AttemptRow(run_id="r1", attempt=1))
            raise RuntimeError("crash between writes")
    assert store.get_run("r1") is None and store.list_attempts("r1") == []
    with store.transaction():
        store.create_run(a_run("r1"))
        with store.transaction():  # nested joins the outer one
            store.add_attempt(AttemptRow(run_id="r1", attempt=1))
        assert store.get_run("r1") is not None  # reads inside see the pending writes
    assert len(store.list_attempts("r1")) == 1


def test_two_stores_write_concurrently(db_url: str | None) -> None:
    one, two = Store.open(db_url), Store.open(db_url)
    errors: list[BaseException] = []

    def writer(s: Store, prefix: str) -> None:
        try:
            for i in range(15):
                s.add_result(a_result(f"{prefix}{i}"))
                s.add_event(EventRow(kind="w", message=f"{prefix}{i}"))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s, p)) for s, p in ((one, "a"), (two, "b"))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(one.list_results()) == len(two.list_results()) == 30
        assert len(two.list_events(limit=100)) == 30
    finally:
        one.close()
        two.close()


# -- schema versions --------------------------------------------------------------------------


def test_migrates_a_v1_database(db_url: str | None) -> None:
    engine = raw_engine(db_url)
    with engine.begin() as conn:
        migrate(conn, target=1)
        conn.execute(sa.text("INSERT INTO runs (id, cluster, recipe, benchmark, nodes, "
                             "repeat_index, state, created_at, updated_at) VALUES ('old', 'c1', "
                             "'smoke', 'smoke', 1, 0, 'succeeded', :t, :t)"),  # fmt: skip
                     {"t": datetime(2025, 1, 1)})
    with engine.connect() as conn:
        assert conn.execute(sa.select(meta.c.value)).scalar_one() == "1"
        assert "ix_results_benchmark_system" not in _indexes(conn)
    engine.dispose()
    with Store.open(db_url) as s:
        assert s.schema_version() == SCHEMA_VERSION == 6
        assert s.get_run("old").state == "succeeded"
        assert s.get_cluster("none") is None  # v4's plan_json column is there to read
    engine = raw_engine(db_url)
    with engine.connect() as conn:
        assert {"ix_results_benchmark_system", "ix_events_run_id"} <= _indexes(conn)
    engine.dispose()


def test_refuses_a_newer_schema(db_url: str | None) -> None:
    Store.open(db_url).close()
    engine = raw_engine(db_url)
    with engine.begin() as conn:
        conn.execute(meta.update().values(value="99"))
    engine.dispose()
    before = _db_bytes(db_url)
    with pytest.raises(StoreError) as err:
        Store.open(db_url)
    assert str(err.value) == (
        f"database schema v99 is newer than this azbench (v{SCHEMA_VERSION}): upgrade azbench"
    )
    assert _db_bytes(db_url) == before


def _indexes(conn: sa.Connection) -> set[str]:
    return {i["name"] for t in ("results", "events") for i in sa.inspect(conn).get_indexes(t)}


def _db_bytes(db_url: str | None) -> bytes | None:
    return None if db_url else (Path(os.environ["AZBENCH_HOME"]) / "azbench.db").read_bytes()


# -- SQLite files -----------------------------------------------------------------------------


@pytest.mark.parametrize("content", [os.urandom(4096), b"just some notes\nnot a db\n" * 50])
def test_corrupt_file_is_refused_untouched(azbench_home: Path, content: bytes) -> None:
    azbench_home.mkdir()
    db = azbench_home / "azbench.db"
    db.write_bytes(content)
    with pytest.raises(StoreError) as err:
        Store.open()
    assert str(err.value) == f"{db} is not an azbench database (file is not a database)"
    assert db.read_bytes() == content
    assert sorted(p.name for p in azbench_home.iterdir()) == ["azbench.db"]


def test_damaged_sqlite_file_is_refused_untouched(azbench_home: Path) -> None:
    azbench_home.mkdir()
    db = azbench_home / "azbench.db"
    content = b"SQLite format 3\x00" + os.urandom(8192)
    db.write_bytes(content)
    with pytest.raises(StoreError, match=r"is not an azbench database \("):
        Store.open()
    assert db.read_bytes() == content


def test_foreign_sqlite_database_is_refused_untouched(azbench_home: Path) -> None:
    azbench_home.mkdir()
    db = azbench_home / "azbench.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")
    content = db.read_bytes()
    with pytest.raises(StoreError, match="not an azbench database"):
        Store.open()
    assert db.read_bytes() == content


def test_unwritable_home_is_a_store_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("AZBENCH_HOME", str(blocker / "home"))  # parent is a file: even root fails
    monkeypatch.delenv("AZBENCH_DB_URL", raising=False)
    with pytest.raises(StoreError, match="is not writable"):
        Store.open()


def test_sqlite_file_is_wal_with_foreign_keys(azbench_home: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    Store.open().close()
    with sqlite3.connect(azbench_home / "azbench.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other = tmp_path / "elsewhere.db"
    monkeypatch.setenv("AZBENCH_DB_URL", f"sqlite:///{other}")
    with Store.open() as s:
        assert s.where == str(other) and s.schema_version() == SCHEMA_VERSION


# -- PostgreSQL -------------------------------------------------------------------------------


@pytest.mark.integration
def test_postgres_selected_by_env(pg_database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = pg_database_url.replace("postgresql+psycopg://", "postgresql://")
    monkeypatch.setenv("AZBENCH_DB_URL", plain)  # a bare postgresql:// means psycopg 3 too
    with Store.open() as s:
        assert s.backend == "postgresql" and s.schema_version() == SCHEMA_VERSION
        assert "@" not in s.where and ":" in s.where


def test_postgres_unreachable_names_host_port_not_password() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connection refused
        with pytest.raises(StoreError) as err:
            Store.open(f"postgresql+psycopg://u:hunter2-secret@127.0.0.1:{port}/db")
    assert f"127.0.0.1:{port}" in str(err.value) and "hunter2-secret" not in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.integration
def test_postgres_wrong_password_is_not_echoed(pg_server) -> None:
    url = pg_server.url.replace(pg_server.password, "wrong-pass-xyz")
    with pytest.raises(StoreError) as err:
        Store.open(url)
    assert f"127.0.0.1:{pg_server.port}" in str(err.value)
    assert "wrong-pass-xyz" not in str(err.value) and pg_server.password not in str(err.value)


@pytest.mark.parametrize("url", ["mysql://u@h/db", "::not a url::"])
def test_unsupported_url_is_a_store_error(url: str) -> None:
    with pytest.raises(StoreError):
        Store.open(url)


def test_the_store_refuses_a_state_change_the_machines_do_not_allow(store: Store) -> None:
    from orchestrator.models import AttemptState, ClusterState, RunState
    store.create_run(a_run())
    store.update_run("r1", state=RunState.SUBMITTING)
    store.update_run("r1", state="running")
    store.update_run("r1", state="running")  # staying put is allowed
    store.update_run("r1", state=RunState.SUCCEEDED)
    with pytest.raises(StoreError, match="refusing the state change succeeded -> running"):
        store.update_run("r1", state="running")  # a finished run is never revived
    with pytest.raises(ValidationError):
        store.update_run("r1", state="done")  # not a state at all
    assert store.get_run("r1").state is RunState.SUCCEEDED
    store.add_attempt(AttemptRow(run_id="r1", attempt=1, state=AttemptState.WAITING))
    with pytest.raises(StoreError, match="waiting -> succeeded"):
        store.update_attempt("r1", 1, state="succeeded")  # never submitted
    cluster = a_cluster("c9")
    store.save_cluster(cluster.model_copy(update={"state": ClusterState.TERMINATED}))
    with pytest.raises(StoreError, match="terminated -> ready"):
        store.save_cluster(cluster.model_copy(update={"state": ClusterState.READY}))
    store.save_cluster(cluster.model_copy(update={"state": ClusterState.PROVISIONING}), plan_json="{}")
    assert store.get_cluster("c9").plan_json == "{}"


def test_results_show_reads_one_result_not_every_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: `results show ID` listed every stored result to find one."""
    from tests.cli_helpers import azbench_in_process
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path))
    with Store.open() as st:
        new_id, _ = st.add_result(a_result("h1"))
        st.add_result(a_result("h2"))

    def listed(*args: object, **kwargs: object) -> list[ResultRow]:
        raise AssertionError("results show listed every result")
    monkeypatch.setattr(Store, "list_results", listed)
    shown = azbench_in_process("results", "show", str(new_id), "--json", home=tmp_path)
    assert shown.code == 0 and json.loads(shown.out)["id"] == new_id
    missing = azbench_in_process("results", "show", "999", home=tmp_path)
    assert missing.code == 2 and "no result with id 999" in missing.err
