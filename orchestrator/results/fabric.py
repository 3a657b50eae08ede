"""Fabric verdicts: what a collective's numbers and NCCL's own log say about the network, judged
once here (`fabric inspect`, `fabric test`, the report and the site all show these).

The checks, each with its evidence:

- transport: a communicator whose inter-node channels run over NET/Socket fails (NCCL fell back
  to TCP sockets: read from the "via NET/..." channel lines, never guessed from the number of
  hosts); channels all over IB (or a plugin such as IBext) pass; a log without channel lines is
  "not checked".
- wrong values: any #wrong element fails (nccl-tests' correctness check, `-c`).
- busbw: below the SKU's warn level (hardware.catalog's NcclBaseline) warns. It is judged at
  the baseline's message size when the run reached it, else at the largest size measured, and
  only for the baseline's collective (all_reduce_perf); never from the "Avg bus bandwidth" line,
  which averages every size, small latency-bound ones included. A size without a baseline (the
  local CPU node, or a GPU the catalog does not know) is "not checked", and says so.

A failure is a failure whatever else passed; a warning alone is not a failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import Field

from orchestrator.hardware.catalog import GpuSku, NcclBaseline, gpu_row
from orchestrator.models import Frozen
from orchestrator.results.nccl_log import NcclTransport
from orchestrator.results.nccltests import NcclRun, SizeRow, parse_size

Status = Literal["ok", "warn", "fail", "not checked"]
_RANK = {"not checked": 0, "ok": 1, "warn": 2, "fail": 3}
BASELINE_COLLECTIVE = "all_reduce"  # NcclBaseline figures are all_reduce_perf busbw (catalog.py)


class Check(Frozen):
    """One verdict: which check, its status, and the evidence it rests on."""

    check: str
    status: Status
    evidence: str


class Expected(Frozen):
    """The SKU's published figure a busbw is set against: expected (or, without one, the warn
    level), the warn level, the message size, what it was measured over, and its source."""

    sku: str
    expected_gbps: float
    warn_gbps: float
    message: str
    size: int
    scope: str
    source: str


def worst(checks: Iterable[Check]) -> Status:
    """The verdict of several checks: fail > warn > ok > not checked."""
    return worst_of(c.status for c in checks)


def worst_of(statuses: Iterable[Status]) -> Status:
    found = list(statuses)
    return max(found, key=lambda s: _RANK[s]) if found else "not checked"


def expected_for(sku: GpuSku | None) -> Expected | None:
    """The SKU's all-reduce baseline, or None (no GPU, or nothing published)."""
    base: NcclBaseline | None = sku.nccl if sku is not None and sku.gpus_per_vm else None
    if sku is None or base is None:
        return None
    return Expected(sku=sku.name, expected_gbps=base.reference_gbps, warn_gbps=base.warn_gbps,
                    message=base.message, size=parse_size(base.message), scope=base.scope, source=base.source)


def judged_size(run: NcclRun, expected: Expected | None) -> SizeRow | None:
    """The size a run's busbw is judged at: the baseline's size when measured, else the largest."""
    if expected is not None and (row := run.at(expected.size)) is not None:
        return row
    return run.largest


def busbw_check(run: NcclRun, expected: Expected | None, *, device: str = "GPU") -> Check:
    """busbw at the judged size against the warn level (see the module docstring)."""
    if device == "CPU":
        return Check(check="busbw", status="not checked",
                     evidence="CPU collectives (gloo): no published baseline to judge them against")
    if run.collective != BASELINE_COLLECTIVE:
        return Check(check="busbw", status="not checked",
                     evidence=f"the catalog's baseline is all_reduce_perf busbw; this run is "
                              f"{run.collective or 'an unnamed collective'}")
    if expected is None:
        return Check(check="busbw", status="not checked",
                     evidence="no published all-reduce baseline for this size (see `azbench catalog`)")
    row = judged_size(run, expected)
    if row is None or row.busbw is None:
        return Check(check="busbw", status="not checked", evidence="the output has no measured size")
    where = (f"at {_bytes(row.size)}" + ("" if row.size == expected.size
                                          else f", the largest size measured (the baseline's is {expected.message})"))
    status: Status = "warn" if row.busbw < expected.warn_gbps else "ok"
    relation = "below" if status == "warn" else "at or above"
    return Check(check="busbw", status=status,
                 evidence=f"{row.busbw:g} GB/s {where}, {relation} the warn level {expected.warn_gbps:g} GB/s "
                          f"of {expected.sku} ({expected.scope}; {expected.source})")


def wrong_check(run: NcclRun) -> Check:
    wrong = run.wrong
    if wrong is None:
        return Check(check="wrong values", status="not checked", evidence="#wrong not reported (run with -c 1)")
    if wrong:
        bad = [s for s in run.sizes if s.wrong]
        return Check(check="wrong values", status="fail",
                     evidence=f"{wrong} wrong element(s) at {len(bad)} size(s), first at {_bytes(bad[0].size)}")
    return Check(check="wrong values", status="ok", evidence=f"0 wrong elements over {len(run.sizes)} size(s)")


def transport_check(log: NcclTransport | None, *, device: str = "GPU") -> Check:
    """NET/Socket channels fail; every inter-node channel over IB (or a plugin) passes."""
    if device == "CPU":
        return Check(check="transport", status="not checked",
                     evidence="CPU collectives (gloo): no NCCL transport to read")
    if log is None or not log.info_lines:
        return Check(check="transport", status="not checked", evidence="no NCCL_DEBUG=INFO lines")
    if not log.channels:
        return Check(check="transport", status="not checked",
                     evidence=f"no inter-node channel lines among {log.info_lines} NCCL INFO lines "
                              "(one node, or the channels were not logged)")
    total = len(log.channels)
    sockets = log.socket_channels
    if sockets:
        first = sockets[0]
        return Check(check="transport", status="fail",
                     evidence=f"{len(sockets)} of {total} inter-node channel ends via NET/Socket (TCP sockets, "
                              f"not InfiniBand): e.g. {first.host}: '{first.line}'")
    kinds = ", ".join(f"{n} via {t}" for t, n in sorted(log.by_transport.items()))
    return Check(check="transport", status="ok", evidence=f"{total} inter-node channel ends: {kinds}")


def run_checks(run: NcclRun, log: NcclTransport | None, expected: Expected | None, *,
               device: str = "GPU") -> list[Check]:
    return [transport_check(log, device=device), wrong_check(run), busbw_check(run, expected, device=device)]


def sku_of(run_gpus: Sequence[str], sku: str | None) -> tuple[GpuSku | None, str]:
    """The catalog row to judge against: `sku` when given, else the one whose GPU the output
    names (gpu_row); with how it was chosen."""
    if sku:
        from orchestrator.hardware.catalog import lookup
        row = lookup(sku)
        return row, f"--sku {sku}"
    for name in run_gpus:
        found = gpu_row(name)
        if found is not None:
            return found, f"from the GPU the output names ('{name}'; --sku overrides)"
    named = next((n for n in run_gpus if n), "")
    return None, (f"no catalog size has the GPU '{named}'" if named else "the output names no GPU")


class RunReport(Frozen):
    """One nccl-tests run as `fabric inspect` and the report show it."""

    collective: str | None
    ranks: int
    hosts: int
    gpus_per_host: int | None
    gpu: str = ""
    busbw: list[dict[str, float | int | None]] = Field(default_factory=list,
                                                        description="per size: size (bytes), busbw, algbw, time_us, wrong")
    peak_busbw: float | None = None
    peak_size: int | None = None
    avg_busbw_line: float | None = Field(None, description="nccl-tests' '# Avg bus bandwidth' (a mean over every size: not judged)")
    wrong: int | None = None
    checks: list[Check] = Field(default_factory=list)
    verdict: Status = "not checked"


def run_report(run: NcclRun, checks: list[Check]) -> RunReport:
    peak = run.peak
    return RunReport(collective=run.collective, ranks=run.ranks, hosts=run.hosts, gpus_per_host=run.gpus_per_host,
                     gpu=run.gpu, busbw=[size_point(s) for s in run.sizes],
                     peak_busbw=peak.busbw if peak else None, peak_size=peak.size if peak else None,
                     avg_busbw_line=run.avg_busbw, wrong=run.wrong, checks=checks, verdict=worst(checks))


def size_point(s: SizeRow) -> dict[str, float | int | None]:
    return {"size": s.size, "busbw": s.busbw, "algbw": s.algbw if s.algbw is not None else s.algbw_ip,
            "time_us": s.time_us if s.time_us is not None else s.time_us_ip, "wrong": s.wrong}


def _bytes(n: int) -> str:
    for unit, size in (("G", 2 ** 30), ("M", 2 ** 20), ("K", 2 ** 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n} B"


def human_size(n: int) -> str:
    """A byte count as nccl-tests' arguments write it (16G, 512K, 8 B)."""
    return _bytes(n)
