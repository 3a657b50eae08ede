"""The report's fabric section: every stored collective run (`azbench fabric test`, imported
nccl-tests outputs) with its busbw per size, its verdict, and the SKU's expected figure with its
source; and, per cluster and collective, busbw at the largest size against node count.

The numbers are the stored rows' (fabric/stored.py); the verdicts are fabric/judge.py's
checks, computed here from the same rows (one rule, one home). CPU runs (gloo) are labelled CPU
and have no expected figure. Pure: rows in, models out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from pydantic import Field

from orchestrator.hardware.catalog import find
from orchestrator.models import Frozen
from orchestrator.fabric.judge import (BASELINE_COLLECTIVE, Check, Expected, Status, expected_for, human_size,
                                         run_checks, worst_of)
from orchestrator.fabric.stored import SizePoint, facts_of, run_of, sizes_of, transport_of
from orchestrator.store.schema import FabricResultRow


class FabricLine(Frozen):
    """One stored collective run as the report shows it."""

    id: int | None
    source: str
    cluster: str | None = None
    sku: str | None = None
    device: str
    backend: str
    collective: str | None = None
    scope: str | None = None
    nodes: int | None = None
    ranks: int | None = Field(None, description="None: the output does not say (never 0)")
    ranks_at_least: bool = False
    hosts: int | None = None
    gpus_per_host: int | None = None
    collective_basis: str = Field("", description="how the collective was read (a line, the table, the file name)")
    busbw: list[SizePoint] = Field(default_factory=list, description="per size: size (bytes), busbw, algbw, time_us, wrong")
    wrong: int | None = None
    peak_busbw: float | None = None
    peak_size: int | None = None
    largest_size: int | None = None
    busbw_at_largest: float | None = None
    avg_busbw_line: float | None = Field(None, description="nccl-tests' '# Avg bus bandwidth' line, as printed (not judged)")
    expected: Expected | None = Field(None, description="the SKU's published all-reduce figure and its source; "
                                                        "None on CPU and for sizes without one")
    network: list[str] = Field(default_factory=list)
    gdr: bool | None = None
    channels: dict[str, int] = Field(default_factory=dict)
    checks: list[Check] = Field(default_factory=list)
    verdict: Status = "not checked"
    job_id: str | None = None
    created_at: datetime | None = None

    @property
    def label(self) -> str:
        """Cluster (or the imported file's SKU) and device: one series of the charts."""
        return f"{self.cluster or 'imported'} ({self.sku or 'unknown size'}, {self.device})"


class FabricScalingPoint(Frozen):
    nodes: int
    busbw: float
    size: int
    verdict: Status
    scope: str | None = None


class FabricScaling(Frozen):
    """busbw at the largest size measured against node count, for one cluster and collective."""

    label: str
    collective: str
    device: str
    points: list[FabricScalingPoint]
    expected: Expected | None = None


def fabric_lines(rows: Sequence[FabricResultRow]) -> list[FabricLine]:
    return [fabric_line(r) for r in rows]


def fabric_line(row: FabricResultRow) -> FabricLine:
    points, run = sizes_of(row), run_of(row)
    sku = find(row.sku)
    expected = expected_for(sku) if row.device == "GPU" else None
    log = transport_of(row)
    checks = run_checks(run, log, expected, device=row.device)
    peak, largest = run.peak, run.largest
    nets = (log.networks or list(dict.fromkeys(c.net for c in log.channels))) if log else []
    return FabricLine(
        id=row.id, source=row.source, cluster=row.cluster, sku=row.sku, device=row.device, backend=row.backend,
        collective=row.collective, scope=row.scope, nodes=row.nodes, ranks=run.ranks,
        ranks_at_least=run.ranks_at_least, hosts=run.hosts, gpus_per_host=run.gpus_per_host,
        collective_basis=facts_of(row).collective_basis, busbw=points, wrong=run.wrong,
        peak_busbw=peak.busbw if peak else None, peak_size=peak.size if peak else None,
        largest_size=largest.size if largest else None, busbw_at_largest=largest.busbw if largest else None,
        avg_busbw_line=row.avg_busbw_gbps,
        expected=expected if row.collective == BASELINE_COLLECTIVE else None,
        network=nets, gdr=log.gdr if log else None, channels=log.by_transport if log else {},
        checks=checks, verdict=worst_of(c.status for c in checks), job_id=row.job_id, created_at=row.created_at)


def fabric_scaling(lines: Sequence[FabricLine]) -> list[FabricScaling]:
    """Per (cluster/SKU/device, collective): the latest run at each node count, by node count."""
    series: dict[tuple[str, str, str], dict[int, FabricLine]] = defaultdict(dict)
    for line in lines:  # oldest first: a later run at the same node count replaces an earlier one
        if line.nodes is None or line.busbw_at_largest is None or not line.collective:
            continue
        series[(line.label, line.collective, line.device)][line.nodes] = line
    out = []
    for (label, collective, device), by_nodes in sorted(series.items()):
        points = [FabricScalingPoint(nodes=n, busbw=ln.busbw_at_largest or 0.0, size=ln.largest_size or 0,
                                     verdict=ln.verdict, scope=ln.scope)
                  for n, ln in sorted(by_nodes.items())]
        first = next(iter(by_nodes.values()))
        out.append(FabricScaling(label=label, collective=collective, device=device, points=points,
                                 expected=first.expected))
    return out


def fabric_section(lines: Sequence[FabricLine]) -> tuple[str, list[str], list[list[str]]]:
    """The Markdown/HTML table: one row per stored run, every verdict with its evidence."""
    header = ["cluster (SKU, device)", "scope", "collective", "nodes", "ranks", "hosts", "GPUs/host",
              "peak busbw GB/s (size)", "busbw at largest GB/s (size)", "expected GB/s (source)", "wrong",
              "verdict", "evidence"]
    rows = [[ln.label, ln.scope or "-", ln.collective or "unnamed", _i(ln.nodes),
             ("at least " if ln.ranks_at_least else "") + _i(ln.ranks, "unknown"), _i(ln.hosts, "unknown"),
             _i(ln.gpus_per_host), _at(ln.peak_busbw, ln.peak_size), _at(ln.busbw_at_largest, ln.largest_size),
             (f"{ln.expected.expected_gbps:g} (warn {ln.expected.warn_gbps:g}; {ln.expected.source})"
              if ln.expected else ("none: CPU (gloo)" if ln.device == "CPU" else "none published")),
             "not checked" if ln.wrong is None else str(ln.wrong), ln.verdict,
             "; ".join(f"{c.check} {c.status}: {c.evidence}" for c in ln.checks if c.status != "not checked")
             or "nothing judged"]
            for ln in lines]
    return "Fabric (collectives: azbench fabric test, imported nccl-tests)", header, rows


def _at(value: float | None, size: int | None) -> str:
    return "-" if value is None else f"{value:g}" + (f" ({human_size(size)})" if size else "")


def _i(value: int | None, missing: str = "-") -> str:
    return missing if value is None else str(value)
