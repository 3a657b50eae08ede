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
from orchestrator.models import Frozen
from orchestrator.fabric.judge import Check, RunReport, Status, expected_for, run_checks, run_report, \
    sku_of, transport_check, worst
from orchestrator.results.files import read_small
from orchestrator.fabric.nccl_log import NcclTransport, parse_log
from orchestrator.fabric.nccltests import NcclRun, parse_runs

FILE_LIMIT = 256 * 2 ** 20  # bytes read of one file: a 4,096-rank NCCL INFO log is tens of MB


class TransportReport(Frozen):
    """The NCCL log's facts as `fabric inspect` prints them."""

    nccl_version: str | None = None
    network: list[str] = Field(default_factory=list, description="'Using network' (IB, Socket, a plugin's name)")
    plugin: str | None = None
    gdr: bool | None = Field(None, description="GPUDirect RDMA in use (None: the log does not say)")
    hcas: list[str] = Field(default_factory=list)
    channels: dict[str, int] = Field(default_factory=dict, description="inter-node channel ends per transport")
    hosts: int = 0


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


def transport_report(log: NcclTransport) -> TransportReport:
    nets = log.networks or [f"{n} (from its channel lines)" for n in dict.fromkeys(c.net for c in log.channels)]
    return TransportReport(nccl_version=log.nccl_version, network=nets, plugin=log.plugin, gdr=log.gdr,
                           hcas=log.hcas, channels=log.by_transport, hosts=len(log.hosts))


def read_text(path: Path) -> str:
    return read_small(path, FILE_LIMIT, "fabric output").decode("utf-8", errors="replace")


def inspect_text(name: str, text: str, sku: str | None = None) -> FileReport:
    """The report of one file's text (`name` names it and hints at the collective)."""
    runs = parse_runs(text, name_hint=Path(name).name)
    log = parse_log(text)
    if not runs and not log.info_lines:
        raise ConfigError(f"{name}: neither an nccl-tests output (no '# nThread ... nGpus' header) nor an "
                          "NCCL_DEBUG=INFO log (no 'NCCL INFO' lines)")
    kind = "+".join(k for k, has in (("nccl-tests", runs), ("nccl-log", log.info_lines)) if has)
    row, basis = sku_of([r.gpu for r in runs], sku)
    expected = expected_for(row)
    reports = [run_report(r, run_checks(r, log, expected, device=_device(r))) for r in runs]
    checks = [c for r in reports for c in r.checks] if reports else [transport_check(log)]
    return FileReport(file=name, kind=kind, sku=row.name if row else None, sku_basis=basis, runs=reports,
                      transport=transport_report(log) if log.info_lines else None, checks=checks,
                      verdict=worst(checks))


def inspect_files(paths: list[Path], sku: str | None = None) -> list[FileReport]:
    return [inspect_text(str(p), read_text(p), sku) for p in paths]


def _device(run: NcclRun) -> str:
    """CPU for azbench's own gloo runner (its rank lines name the device "cpu"), else GPU."""
    return "CPU" if run.gpu.lower().startswith("cpu") else "GPU"
