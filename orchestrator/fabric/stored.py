"""Collective runs as stored results: an nccl-tests run (from `azbench fabric test`'s job, or a
file `results import` reads) into a store.FabricResultRow, and a stored row back into the same
NcclRun the judge saw (`run_of`), so the report and the site judge it as `fabric inspect` does.

One row per collective run; unique by the sha256 of the output it came from and the run's
place in it, so importing the same file twice stores it once. `sizes_json` holds
{"sizes": [per size: size, busbw (the better), busbw_oop, busbw_ip, algbw, time_us, wrong,
wrong_oop, wrong_ip], "run": the facts the judge reads that have no column (how the collective
was read, ranks as stated or None, "at least", GPUs per host, the GPU, versions)}; rows written
before that hold the bare list, read as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field

from orchestrator.fabric.inspection import FileReport, device_of, judge_reading
from orchestrator.fabric.judge import Status, size_point
from orchestrator.fabric.nccl_log import NcclTransport
from orchestrator.fabric.nccltests import NcclRun, SizeRow, looks_like_output
from orchestrator.fabric.reading import FIRST_BLOCK, read_file
from orchestrator.models import Frozen
from orchestrator.results.files import open_regular
from orchestrator.store.database import FabricResultRow, Store

GLOO = "torch.distributed gloo"
NCCL_TESTS = "nccl-tests"


class SizePoint(Frozen):
    """One message size of a stored run (out-of-place and in-place apart where stored)."""

    size: int = Field(description="bytes")
    busbw: float | None = None
    busbw_oop: float | None = None
    busbw_ip: float | None = None
    algbw: float | None = None
    time_us: float | None = None
    wrong: int | None = None
    wrong_oop: int | None = None
    wrong_ip: int | None = None


class RunFacts(Frozen):
    """What the judge reads of a run that has no column of its own."""

    collective_basis: str = ""
    ranks: int | None = None
    ranks_at_least: bool = False
    hosts: int | None = None
    gpus_per_host: int | None = None
    gpu: str = ""
    version: str | None = None
    rccl_version: str | None = None
    wrong_dropped: int = 0
    rows_dropped: int = 0
    sku_basis: str = ""


def _stored(row: FabricResultRow) -> tuple[list[SizePoint], RunFacts | None]:
    data = json.loads(row.sizes_json or "[]")
    if isinstance(data, list):  # rows written before the run's facts were kept
        return [SizePoint.model_validate(p) for p in data], None
    return ([SizePoint.model_validate(p) for p in data.get("sizes", [])],
            RunFacts.model_validate(data.get("run") or {}))


def sizes_of(row: FabricResultRow) -> list[SizePoint]:
    return _stored(row)[0]


def facts_of(row: FabricResultRow) -> RunFacts:
    """The run's facts; for an older row, what its columns say."""
    facts = _stored(row)[1]
    return facts if facts is not None else RunFacts(ranks=row.ranks or None, hosts=row.hosts or None,
                                                    gpus_per_host=row.gpus_per_host)


def run_of(row: FabricResultRow) -> NcclRun:
    """The stored run as the judge saw it when it was stored (in- and out-of-place apart)."""
    points, facts = sizes_of(row), facts_of(row)
    sizes = [SizeRow(size=p.size, algbw=p.algbw, time_us=p.time_us,
                     busbw_oop=p.busbw_oop if p.busbw_oop is not None or p.busbw_ip is not None else p.busbw,
                     busbw_ip=p.busbw_ip,
                     wrong_oop=p.wrong_oop if p.wrong_oop is not None or p.wrong_ip is not None else p.wrong,
                     wrong_ip=p.wrong_ip) for p in points]
    return NcclRun(collective=row.collective, collective_basis=facts.collective_basis, version=facts.version,
                   rccl_version=facts.rccl_version, ranks=facts.ranks, ranks_at_least=facts.ranks_at_least,
                   hosts=facts.hosts, gpus_per_host=facts.gpus_per_host, gpu=facts.gpu, sizes=sizes,
                   avg_busbw=row.avg_busbw_gbps, wrong_dropped=facts.wrong_dropped, rows_dropped=facts.rows_dropped)


def transport_of(row: FabricResultRow) -> NcclTransport | None:
    return NcclTransport.model_validate_json(row.transport_json) if row.transport_json else None


def run_rows(digest: str, runs: list[NcclRun], log: NcclTransport | None, *, source: Literal["test", "import"],
             device: Literal["GPU", "CPU"], cluster: str | None = None, sku: str | None = None,
             sku_basis: str = "", scope: str | None = None, nodes: int | None = None, job_id: str | None = None,
             log_path: str | None = None) -> list[FabricResultRow]:
    """The rows for `runs`, all read from one output whose sha256 is `digest` (and whose NCCL
    facts are `log`). Ranks and hosts the output does not state are kept as None in the run's
    facts; the columns (NOT NULL since v5) then hold 0, which no reader shows."""
    if len(digest) != 64:  # the output's sha256 (reading.Reading.sha256), never the output itself
        raise ValueError(f"run_rows takes the output's sha256 hex digest, not {len(digest)} characters of text")
    transport = log.model_dump_json() if log is not None and log.info_lines else None
    out = []
    for i, run in enumerate(runs):
        per_host = run.gpus_per_host if device == "GPU" else None
        facts = RunFacts(collective_basis=run.collective_basis, ranks=run.ranks, ranks_at_least=run.ranks_at_least,
                         hosts=run.hosts, gpus_per_host=per_host, gpu=run.gpu, version=run.version,
                         rccl_version=run.rccl_version, wrong_dropped=run.wrong_dropped,
                         rows_dropped=run.rows_dropped, sku_basis=sku_basis)
        out.append(FabricResultRow(
            content_hash=f"{digest}:{i}", source=source, cluster=cluster, sku=sku, device=device,
            backend=GLOO if device == "CPU" else NCCL_TESTS, collective=run.collective, scope=scope,
            nodes=nodes if nodes is not None else run.hosts, ranks=run.ranks or 0, hosts=run.hosts or 0,
            gpus_per_host=per_host, wrong=run.wrong, avg_busbw_gbps=run.avg_busbw,
            sizes_json=json.dumps({"sizes": [size_point(s) for s in run.sizes], "run": facts.model_dump()}),
            transport_json=transport, job_id=job_id, log_path=log_path))
    return out


class FabricImport(Frozen):
    """What `results import` did with an nccl-tests output, and the verdict the one judge gave
    it (the report and the site show the same, read back from the stored rows)."""

    source: str
    imported: int = 0
    duplicates: int = 0
    collectives: list[str] = Field(default_factory=list)
    sku: str | None = None
    sku_basis: str = ""
    verdict: Status = "not checked"
    inspected: FileReport | None = None


def is_nccl_tests_file(path: Path) -> bool:
    """True for a regular file holding an nccl-tests run (its "nThread ... nGpus" header or a
    size table) in its first block."""
    if not path.is_file():  # a folder, a FIFO, a device: the MLPerf import says what it is
        return False
    with open_regular(path, "file") as handle:
        head = handle.read(FIRST_BLOCK)
    if b"\0" in head:
        return False  # not text: the MLPerf import refuses it in one line
    return looks_like_output(head.decode("utf-8", errors="replace"))


def import_nccl_tests(store: Store, path: Path, sku: str | None = None) -> FabricImport:
    """Store every run of an nccl-tests output (with the file's NCCL facts), once, against the
    row `sku` names or the one its GPU names: what `fabric inspect` judges, stored."""
    reading = read_file(path)
    report = judge_reading(reading, sku)
    runs = [r for r in reading.runs if r.sizes]
    devices = {device_of(r) for r in runs}
    device: Literal["GPU", "CPU"] = "CPU" if devices == {"CPU"} else "GPU"
    rows = run_rows(reading.sha256, runs, reading.log, source="import", device=device, sku=report.sku,
                    sku_basis=report.sku_basis, log_path=str(path.resolve()))
    added = store.add_fabric_results(rows)
    return FabricImport(source=str(path), imported=sum(1 for _, new in added if new),
                        duplicates=sum(1 for _, new in added if not new),
                        collectives=[r.collective or "unnamed" for r in runs], sku=report.sku,
                        sku_basis=report.sku_basis, verdict=report.verdict, inspected=report)
