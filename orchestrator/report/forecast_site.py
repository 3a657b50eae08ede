"""The forecast box of a benchmark page on the report site: what the page shows beside each of
`azbench plan`'s curves (forecast.curve), the node counts its "what would N nodes give?" input
takes (as forecast.plan.check_nodes decides them), and the one line a page shows without a curve."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.forecast.curve import CurveData
from orchestrator.forecast.points import check_benchmark, series_points
from orchestrator.hardware.catalog import gpu_skus, lookup
from orchestrator.results.published import catalog_gpu
from orchestrator.store.schema import ResultRow


def forecast_box(c: CurveData) -> dict[str, Any]:
    """What the page shows beside one curve: the caption, the input's first node count and what
    node counts the size takes."""
    racks = c.node_steps != [1]
    return {"gpu": c.gpu, "label": lookup(c.gpu).label, "sku_short": c.sku_short,
            "caption": c.caption.replace("stored (marked *)", "stored (the stars)"),
            "default_nodes": default_nodes(c),
            "steps_note": (f"whole {lookup(c.gpu).rack_name}s: a multiple of {c.node_steps[0]} or "
                           f"{' or '.join(str(s) for s in c.node_steps[1:])} VMs, or fewer than "
                           f"{c.node_steps[0]} in one rack" if racks else "")}


def node_count_ok(c: CurveData, nodes: int) -> bool:
    """A node count the size can have, as forecast.plan.check_nodes decides it: any on one-VM
    NVLink domains; on GB200 whole racks (a multiple of one of node_steps) or one partial rack."""
    if nodes < 1:
        return False
    return c.node_steps == [1] or nodes < c.node_steps[0] or any(nodes % s == 0 for s in c.node_steps)


def default_nodes(c: CurveData) -> int:
    """The input's first value: the largest measured scale in nodes, up to a valid count."""
    nodes = max(1, math.ceil(c.basis.high_gpus / c.gpus_per_node))
    while not node_count_ok(c, nodes):
        nodes += 1
    return nodes


def no_curve_line(bench: str, stored: Sequence[ResultRow]) -> str:
    """The one line a benchmark page shows where no GPU has a curve, saying what is measured."""
    try:
        key = check_benchmark(bench)
    except ConfigError:
        return (f"No forecast curve for {bench}: it is not a benchmark of MLPerf's published record "
                "and has no required run count, so nothing is fitted.")
    measured = []
    for row in gpu_skus():
        gpu = catalog_gpu(row.name)
        if gpu is not None and (scales := series_points(key, gpu, stored).scales):
            measured.append(f"{row.short} at {', '.join(f'{g:,}' for g in scales)} GPUs")
    return (f"No forecast curve for {bench}: a curve needs results at two GPU counts or more on one "
            "GPU (published or stored), and " + (f"there are fewer: {'; '.join(measured)}." if measured
                                                 else "none are on a catalog GPU."))
