"""The records of what azbench did: clusters, runs, their attempts, and the events of both.

State changes are checked against models' *_MOVES tables: the store refuses a change they do not
allow (StoreError), so a bug that skips a step fails loudly instead of recording what did not
happen.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

import sqlalchemy as sa

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
from orchestrator.store.engine import StoreBase, fetch, inserted_id, matching
from orchestrator.store.schema import (
    AttemptRow,
    ClusterRow,
    EventRow,
    RunRow,
    attempt_row,
    attempt_values,
    attempts,
    clusters,
    event_row,
    events,
    runs,
)


class Records(StoreBase):
    """Clusters, runs, attempts and events (see store.database.Store)."""

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
        update: dict[str, sa.ColumnElement[Any]] = {c: new[c] for c in ("provider", "sku", "nodes", "region", "state")}
        update |= {"cluster_json": new.cluster_json, "updated_at": new.updated_at}
        update["spec_json"] = sa.func.coalesce(new.spec_json, clusters.c.spec_json)
        update["plan_json"] = sa.func.coalesce(new.plan_json, clusters.c.plan_json)
        update["owner"] = sa.func.coalesce(new.owner, clusters.c.owner)
        update["terminated_at"] = sa.case(
            (new.state == ClusterState.TERMINATED.value, keep_first_end), else_=sa.null()
        )
        with self._conn(write=True) as conn:
            old = fetch(conn, clusters, ClusterRow, name=cluster.name)
            if old is not None:
                _check_move("cluster", cluster.name, CLUSTER_MOVES, old.state, cluster.state)
            conn.execute(ins.on_conflict_do_update(index_elements=["name"], set_=update))
            row = fetch(conn, clusters, ClusterRow, name=cluster.name)
            assert row is not None  # just written, in this transaction
            return row

    def forget_cluster(self, name: str) -> None:
        """Delete the record of a cluster that was never created (only a PROVISIONING one)."""
        where = (clusters.c.name == name) & (clusters.c.state == ClusterState.PROVISIONING.value)
        with self._conn(write=True) as conn:
            conn.execute(clusters.delete().where(where))

    def get_cluster(self, name: str) -> ClusterRow | None:
        with self._conn() as conn:
            return fetch(conn, clusters, ClusterRow, name=name)

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
            current = fetch(conn, runs, RunRow, id=id)
            if current is None:
                raise NotFoundError(f"run {id!r} is not in the store")
            updated = RunRow.model_validate({**current.model_dump(), **fields})
            _check_move("run", id, RUN_MOVES, current.state, updated.state)
            values = updated.model_dump(include=set(fields))
            conn.execute(runs.update().where(runs.c.id == id).values(**values))
        return updated

    def get_run(self, id: str) -> RunRow | None:
        with self._conn() as conn:
            return fetch(conn, runs, RunRow, id=id)

    def list_runs(
        self,
        cluster: str | None = None,
        sweep_id: str | None = None,
        states: Iterable[str] | None = None,
    ) -> list[RunRow]:
        query = matching(runs, cluster=cluster, sweep_id=sweep_id)
        query = query.order_by(runs.c.created_at, runs.c.id)
        if states is not None:
            query = query.where(runs.c.state.in_(list(states)))
        with self._conn() as conn:
            return [RunRow.model_validate(r._asdict()) for r in conn.execute(query)]

    # -- attempts -------------------------------------------------------------------------

    def add_attempt(self, attempt: AttemptRow) -> AttemptRow:
        values = attempt_values(attempt)
        with self._conn(write=True) as conn:
            new_id = inserted_id(conn.execute(attempts.insert().values(**values)))
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

    # -- events ---------------------------------------------------------------------------

    def add_event(self, ev: EventRow) -> EventRow:
        values = ev.model_dump(exclude={"id", "data"})
        values["data_json"] = ev.data.to_json()  # JSON only here, at the SQL edge
        with self._conn(write=True) as conn:
            new_id = inserted_id(conn.execute(events.insert().values(**values)))
        return ev.model_copy(update={"id": new_id})

    def list_events(
        self, run_id: str | None = None, cluster: str | None = None, limit: int = 200
    ) -> list[EventRow]:
        """The latest `limit` events matching, oldest first."""
        query = matching(events, run_id=run_id, cluster=cluster)
        query = query.order_by(events.c.id.desc()).limit(limit)
        with self._conn() as conn:
            rows = list(conn.execute(query))
        return [event_row(r) for r in reversed(rows)]


def _check_move(what: str, name: str, table: dict[str, frozenset[str]], old: str, new: str) -> None:
    """StoreError unless `old` may become `new` (models.*_MOVES)."""
    if not legal_move(table, old, new):
        raise StoreError(f"{what} {name!r}: refusing the state change {_label(old)} -> {_label(new)} "
                         "(not an allowed transition)")


def _label(state: str) -> str:
    return state.value if isinstance(state, Enum) else state

