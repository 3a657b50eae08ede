"""Collective runs as stored results: an nccl-tests run (from `azbench fabric test`'s job, or a
file `results import` reads) into a store.FabricResultRow, and a stored row back into typed
sizes and NCCL transport facts for the report.

One row per collective run; unique by the sha256 of the output it came from and the run's
place in it, so importing the same file twice stores it once.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import Field

from orchestrator.models import Frozen
from orchestrator.fabric.judge import size_point
from orchestrator.fabric.inspection import read_text
from orchestrator.results.files import open_regular
from orchestrator.fabric.nccl_log import NcclTransport, parse_log
from orchestrator.fabric.nccltests import NcclRun, looks_like_output, parse_runs
from orchestrator.store.database import FabricResultRow, Store

GLOO = "torch.distributed gloo"
NCCL_TESTS = "nccl-tests"


class SizePoint(Frozen):
    """One message size of a stored run."""

    size: int = Field(description="bytes")
    busbw: float | None = None
    algbw: float | None = None
    time_us: float | None = None
    wrong: int | None = None


def sizes_of(row: FabricResultRow) -> list[SizePoint]:
    return [SizePoint.model_validate(p) for p in json.loads(row.sizes_json or "[]")]


def transport_of(row: FabricResultRow) -> NcclTransport | None:
    return NcclTransport.model_validate_json(row.transport_json) if row.transport_json else None


def run_rows(text: str, runs: list[NcclRun], log: NcclTransport | None, *, source: Literal["test", "import"],
             device: Literal["GPU", "CPU"], cluster: str | None = None, sku: str | None = None,
             scope: str | None = None, nodes: int | None = None, job_id: str | None = None,
             log_path: str | None = None) -> list[FabricResultRow]:
    """The rows for `runs`, all parsed from `text` (whose NCCL facts are `log`)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    transport = log.model_dump_json() if log is not None and log.info_lines else None
    return [FabricResultRow(
        content_hash=f"{digest}:{i}", source=source, cluster=cluster, sku=sku, device=device,
        backend=GLOO if device == "CPU" else NCCL_TESTS, collective=run.collective, scope=scope,
        nodes=nodes if nodes is not None else run.hosts, ranks=run.ranks, hosts=run.hosts,
        gpus_per_host=run.gpus_per_host if device == "GPU" else None, wrong=run.wrong,
        avg_busbw_gbps=run.avg_busbw, sizes_json=json.dumps([size_point(s) for s in run.sizes]),
        transport_json=transport, job_id=job_id, log_path=log_path) for i, run in enumerate(runs)]


class FabricImport(Frozen):
    """What `results import` did with an nccl-tests output."""

    source: str
    imported: int = 0
    duplicates: int = 0
    collectives: list[str] = Field(default_factory=list)


def is_nccl_tests_file(path: Path) -> bool:
    """True for a regular file holding an nccl-tests run (its "# nThread ... nGpus" header)."""
    if not path.is_file():  # a folder, a FIFO, a device: the MLPerf import says what it is
        return False
    with open_regular(path, "file") as handle:
        head = handle.read(1 << 16).decode("utf-8", errors="replace")
    return looks_like_output(head)


def import_nccl_tests(store: Store, path: Path, sku: str | None = None) -> FabricImport:
    """Store every run of an nccl-tests output (with the file's NCCL facts), once."""
    text = read_text(path)
    runs = [r for r in parse_runs(text, name_hint=path.name) if r.sizes]
    log = parse_log(text)
    rows = run_rows(text, runs, log, source="import", device="GPU", sku=sku, log_path=str(path.resolve()))
    added = store.add_fabric_results(rows)
    return FabricImport(source=str(path), imported=sum(1 for _, new in added if new),
                        duplicates=sum(1 for _, new in added if not new),
                        collectives=[r.collective or "unnamed" for r in runs])
