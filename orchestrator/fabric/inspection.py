"""`azbench fabric inspect FILE...`: read what others ran (nccl-tests outputs, NCCL_DEBUG=INFO
logs, alone or inside a run's log) and judge it (fabric/judge.py's checks).

A file may hold nccl-tests runs, NCCL INFO lines, or both (an nccl-tests run with NCCL_DEBUG=INFO
set, or a training log). Every run in it is reported with the file's transport facts; a file with
NCCL lines and no run is reported as a log alone. A file with neither is a ConfigError naming it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from orchestrator.errors import ConfigError
from orchestrator.fabric.judge import Check, RunReport, Status, expected_for, run_checks, run_report, \
    sku_of, transport_check, worst
from orchestrator.fabric.nccl_log import NcclTransport
from orchestrator.fabric.nccltests import NcclRun
from orchestrator.fabric.reading import Reading, read_file, read_text
from orchestrator.models import Frozen


class TransportReport(Frozen):
    """The NCCL log's facts as `fabric inspect` prints them."""

    nccl_version: str | None = None
    network: list[str] = Field(default_factory=list, description="'Using network' (IB, Socket, a plugin's name)")
    plugin: str | None = None
    gdr: bool | None = Field(None, description="GPUDirect RDMA in use (None: the log does not say)")
    hcas: list[str] = Field(default_factory=list)
    channels: dict[str, int] = Field(default_factory=dict, description="inter-node channel ends per transport")
    hosts: int = 0
    rccl_version: str | None = None


class FileReport(Frozen):
    """One inspected file: its runs, its transport, every check and the file's verdict."""

    file: str
    kind: str = Field(description="nccl-tests, nccl-log, or nccl-tests+nccl-log")
    sku: str | None = None
    sku_basis: str = ""
    runs: list[RunReport] = Field(default_factory=list)
    transport: TransportReport | None = None
    checks: list[Check] = Field(default_factory=list)
    verdict: Status = "not checked"
    notes: list[str] = Field(default_factory=list, description="what the reading left out (lines cut)")


def transport_report(log: NcclTransport) -> TransportReport:
    nets = log.networks or [f"{n} (from its channel lines)" for n in dict.fromkeys(c.net for c in log.channels)]
    return TransportReport(nccl_version=log.nccl_version, network=nets, plugin=log.plugin, gdr=log.gdr,
                           hcas=log.hcas, channels=log.by_transport, hosts=len(log.hosts),
                           rccl_version=log.rccl_version)


def judge_reading(reading: Reading, sku: str | None = None) -> FileReport:
    """The report of one read output: the one judge (fabric.judge) over every run, against the
    row `sku` names or the one its GPU names. `results import` stores what this judges."""
    runs, log, name = reading.runs, reading.log, reading.name
    if not runs and not log.info_lines:
        raise ConfigError(f"{name}: neither an nccl-tests output (no 'nThread ... nGpus' header or size table) "
                          "nor an NCCL_DEBUG=INFO log (no 'NCCL INFO' lines)")
    kind = "+".join(k for k, has in (("nccl-tests", runs), ("nccl-log", log.info_lines)) if has)
    row, basis = sku_of([r.gpu for r in runs], sku)
    expected = expected_for(row)
    reports = [run_report(r, run_checks(r, log, expected, device=device_of(r))) for r in runs]
    checks = [c for r in reports for c in r.checks] if reports else [transport_check(log)]
    return FileReport(file=name, kind=kind, sku=row.name if row else None, sku_basis=basis, runs=reports,
                      transport=transport_report(log) if log.info_lines else None, checks=checks,
                      verdict=worst(checks), notes=reading.notes)


def inspect_text(name: str, text: str, sku: str | None = None) -> FileReport:
    """The report of one file's text (`name` names it; its last part is the collective's last hint)."""
    return judge_reading(read_text(text, name, Path(name).name), sku)


def inspect_files(paths: list[Path], sku: str | None = None) -> list[FileReport]:
    return [judge_reading(read_file(p), sku) for p in paths]


def device_of(run: NcclRun) -> str:
    """CPU for azbench's own gloo runner (its rank lines name the device "cpu"), else GPU."""
    return "CPU" if run.gpu.lower().startswith("cpu") else "GPU"
