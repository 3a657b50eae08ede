"""The report site's fabric page (fabric.html): the fabric charts (report/fabric_figures.py) and
one table row per stored collective run with its verdict and evidence, as plain data; report/
site.py turns the rows into its table cells and adds the page when the report has fabric results."""

from __future__ import annotations

from typing import Any

from orchestrator.report.build import Report
from orchestrator.report.fabric_figures import fabric_charts
from orchestrator.report.figures import Figure
from orchestrator.fabric.judge import human_size
from orchestrator.fabric.locate import SCOPE as LOCATE_SCOPE

PATH = "fabric.html"
TEMPLATE = "fabric.html.j2"
HEADER = ["cluster (SKU, device)", "scope", "collective", "nodes", "ranks", "hosts", "GPUs/host",
          "peak busbw GB/s", "busbw at largest GB/s", "expected GB/s", "wrong", "verdict", "evidence"]
CellData = tuple[str, "str | float | None", str, str]  # text, sort value, css class, tooltip
_CLS = {"fail": "bad", "warn": "warn", "ok": "good", "not checked": "muted"}


def fabric_page_parts(report: Report) -> tuple[dict[str, Any], list[list[CellData]], dict[str, Figure]]:
    """(the template's context, the table's rows, the figures) of fabric.html."""
    charts = fabric_charts(report.fabric, report.fabric_scaling)
    lines = report.fabric
    counts = {"runs": len(lines), "series": len({ln.label for ln in lines}),
              "fail": sum(1 for ln in lines if ln.verdict == "fail"),
              "warn": sum(1 for ln in lines if ln.verdict == "warn")}
    rows: list[list[CellData]] = []
    for ln in lines:
        if ln.expected:
            expected: CellData = (f"{ln.expected.expected_gbps:g} (warn {ln.expected.warn_gbps:g})",
                                  ln.expected.expected_gbps, "", ln.expected.source)
        else:
            expected = ("none: CPU (gloo)" if ln.device == "CPU" else "none published", None, "muted", "")
        evidence = "; ".join(f"{c.check} {c.status}: {c.evidence}" for c in ln.checks if c.status != "not checked")
        rows.append([(ln.label, ln.label, "", ""), (ln.scope or "-", ln.scope, "", ""),
                     (ln.collective or "unnamed", ln.collective, "", ""), _int(ln.nodes),
                     _count(ln.ranks, ln.ranks_at_least), _count(ln.hosts, ln.ranks_at_least), _int(ln.gpus_per_host), _at(ln.peak_busbw, ln.peak_size),
                     _at(ln.busbw_at_largest, ln.largest_size), expected,
                     ("not checked", None, "muted", "") if ln.wrong is None else _int(ln.wrong),
                     (ln.verdict, ln.verdict, _CLS[ln.verdict], ""), (evidence or "nothing judged", None, "", "")])
    ctx = {"counts": counts, "scaling": [k for k in charts if k.startswith("fabric-nodes-")],
           "by_size": [k for k in charts if k.startswith("fabric-size-")], "located": located(report)}
    return ctx, rows, charts


def located(report: Report) -> list[dict[str, str]]:
    """`fabric locate`'s stored collectives (pairs, re-pairs, racks), slowest first: the ranked list."""
    runs = [ln for ln in report.fabric if (ln.scope or "").startswith(LOCATE_SCOPE + " ")]
    runs.sort(key=lambda ln: (ln.busbw_at_largest is None, ln.busbw_at_largest or 0.0))
    return [{"what": (ln.scope or "")[len(LOCATE_SCOPE) + 1:], "cluster": ln.label,
             "busbw": "not measured" if ln.busbw_at_largest is None else f"{ln.busbw_at_largest:.4g} GB/s"}
            for ln in runs]


def _at(value: float | None, size: int | None) -> CellData:
    if value is None:
        return ("-", None, "", "")
    return (f"{value:.4g}" + (f" ({human_size(size)})" if size else ""), value, "num", "")


def _count(value: int | None, at_least: bool) -> CellData:
    """Ranks or hosts as the output states them: "unknown" when it does not, never 0."""
    if value is None:
        return ("unknown", None, "muted", "the output does not state it")
    return (f"at least {value}" if at_least else str(value), value, "num",
            "rank lines were left out of the output" if at_least else "")


def _int(value: int | None) -> CellData:
    return ("-", None, "", "") if value is None else (str(value), value, "num", "")
