"""What was measured: scored MLPerf results, collective (fabric) results and the performance
baselines chosen from them. A result is stored once, by its content hash."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from orchestrator.store.engine import StoreBase, fetch, matching
from orchestrator.store.schema import (
    BaselineRow,
    FabricResultRow,
    ResultRow,
    baselines,
    fabric_results,
    results,
    runs,
)


class Measurements(StoreBase):
    """Results, fabric results and baselines (see store.database.Store)."""

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
        query = matching(results, benchmark=benchmark, system=system, source=source)
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
            return fetch(conn, results, ResultRow, id=id)

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
        query = matching(fabric_results, cluster=cluster, collective=collective)
        query = query.order_by(fabric_results.c.created_at, fabric_results.c.id)
        if since is not None:
            query = query.where(fabric_results.c.created_at >= since)
        if until is not None:
            query = query.where(fabric_results.c.created_at <= until)
        with self._conn() as conn:
            return [FabricResultRow.model_validate(r._asdict()) for r in conn.execute(query)]

    # -- baselines ------------------------------------------------------------------------

    def save_baseline(self, row: BaselineRow) -> BaselineRow:
        """Insert or replace the baseline `row.name` in one transaction; a replaced one keeps
        its created_at. Returns the row as stored."""
        values = row.model_dump(exclude={"name", "created_at"})
        with self._conn(write=True) as conn:
            old = fetch(conn, baselines, BaselineRow, name=row.name)
            if old is None:
                conn.execute(baselines.insert().values(name=row.name, created_at=row.created_at,
                                                       **values))
            else:
                conn.execute(baselines.update().where(baselines.c.name == row.name).values(**values))
            stored = conn.execute(matching(baselines, name=row.name)).one()
        return BaselineRow.model_validate(stored._asdict())

    def get_baseline(self, name: str) -> BaselineRow | None:
        with self._conn() as conn:
            return fetch(conn, baselines, BaselineRow, name=name)

    def list_baselines(self) -> list[BaselineRow]:
        """Every baseline, by name."""
        with self._conn() as conn:
            rows = conn.execute(sa.select(baselines).order_by(baselines.c.name))
            return [BaselineRow.model_validate(r._asdict()) for r in rows]

    def delete_baseline(self, name: str) -> bool:
        """Delete the baseline `name`; False when there was none."""
        with self._conn(write=True) as conn:
            return bool(conn.execute(baselines.delete().where(baselines.c.name == name)).rowcount)

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

