"""The results store: typed reads and writes of clusters, runs, attempts, results, events and
baselines.

`Store.open()` picks the database (SQLite file `$AZBENCH_HOME/azbench.db` by default, PostgreSQL
when `AZBENCH_DB_URL=postgresql+psycopg://...`), refuses anything that is not an azbench
database without touching it, and migrates the schema forward (see store.schema). Every method
takes and returns pydantic row models; every write is one transaction, and `transaction()`
groups several writes into one. Failures surface as StoreError (NotFoundError for a missing row).
"""

from __future__ import annotations

from orchestrator.store.engine import BUSY_TIMEOUT_MS, DB_FILENAME, DB_URL_ENV
from orchestrator.store.measurements import Measurements
from orchestrator.store.records import Records
from orchestrator.store.schema import (
    SCHEMA_VERSION,
    AttemptRow,
    BaselineRow,
    ClusterRow,
    EventRow,
    FabricResultRow,
    ResultRow,
    RunRow,
)


class Store(Records, Measurements):
    """A handle on the results store. Use one per thread; close() when done.

    Its methods come by table family: store.records (clusters, runs, attempts, events),
    store.measurements (results, fabric results, baselines), over store.engine (open,
    transaction, close)."""


__all__ = ["BUSY_TIMEOUT_MS", "DB_FILENAME", "DB_URL_ENV", "SCHEMA_VERSION", "AttemptRow", "BaselineRow",
           "ClusterRow", "EventRow", "FabricResultRow", "ResultRow", "RunRow", "Store"]
