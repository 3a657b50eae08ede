"""How nodes lay out on Azure-shaped capacity: scale sets (one InfiniBand fabric each, at most
`max_vms_per_scale_set` VMs, 100 by default) and multi-VM NVLink racks (whole racks per set, of
the sizes the catalog row's `rack_layouts` allow).

Applies the IB design rules of azure-notes.md §2. Pure arithmetic over the catalog: the azure
backend's plan and resize, and the fake backend's plan, use it.
"""

from __future__ import annotations

import math

from orchestrator.errors import ConfigError
from orchestrator.hardware.catalog import GpuSku, lookup
from orchestrator.models import Cluster, ScaleSetPlan


def scale_set_layout(cluster: str, nodes: int, sku: GpuSku, cap: int = 100,
                     vms_per_rack: int | None = None) -> tuple[list[ScaleSetPlan], list[str]]:
    """Split `nodes` into scale sets (one InfiniBand fabric each) of at most `cap` VMs, named
    <cluster>-gpu-NN (or -cpu-NN), as even as possible; GB200 sets hold whole racks of
    `vms_per_rack` VMs (default: default_vms_per_rack). The warnings say what a user must know
    about the layout."""
    warnings: list[str] = []
    if cap > 100:
        warnings.append(f"max_vms_per_scale_set {cap} > 100: only valid if Azure support raised "
                        "your single-placement-group limit")
    if sku.nvlink_domain_vms > 1:
        groups, per_rack = _rack_groups(nodes, sku, cap, vms_per_rack)
        if per_rack < sku.nvlink_domain_vms:
            warnings.append(f"{nodes // per_rack} {sku.rack_name}s x {per_rack} VMs: "
                            f"{sku.nvlink_domain_vms - per_rack} of {sku.nvlink_domain_vms} slots per "
                            "rack stay free")
    else:
        groups, per_rack = _spread(nodes, cap), None
    role = "gpu" if sku.gpus_per_vm else "cpu"
    sets = [ScaleSetPlan(name=f"{cluster}-{role}-{i:02d}", vms=vms, gpus=vms * sku.gpus_per_vm,
                         racks=(vms // per_rack) if per_rack else None)
            for i, vms in enumerate(groups)]
    if len(sets) > 1 and sku.ib_links:
        warnings.append(f"{len(sets)} scale sets: InfiniBand RDMA is only guaranteed inside one "
                        "scale set; the health gate's all-reduce test checks the fabric across them")
    return sets, warnings


def rack_sizes(sku: GpuSku) -> tuple[int, ...]:
    """The VMs per NVLink rack a whole-rack layout may use: the row's `rack_layouts` (a full rack
    first; ND GB200 v6 also 16, as Azure's record run did); (1,) for sizes without multi-VM
    NVLink domains."""
    return sku.rack_layouts if sku.nvlink_domain_vms > 1 and sku.rack_layouts else (1,)


def rack_unit(cluster: Cluster) -> int:
    """The VMs a resize of `cluster` adds or removes at a time: one whole NVLink rack of its own
    layout, the rack size its record keeps (else as scale_set_layout picks it for its node
    count: a full rack when they are whole racks, else the smallest layout), 1 without NVLink
    racks."""
    sku = lookup(cluster.sku)
    if sku.nvlink_domain_vms <= 1:
        return 1
    return cluster.properties.rack_size() or default_vms_per_rack(cluster.nodes, sku) or rack_sizes(sku)[-1]


def valid_counts_near(nodes: int, unit: int) -> tuple[int, ...]:
    """The node counts nearest `nodes` that are whole multiples of `unit` (at least one unit)."""
    below = max(unit, nodes // unit * unit)
    above = below + unit if below <= nodes else below
    return tuple(sorted({below, above}))


def _rack_groups(nodes: int, sku: GpuSku, cap: int, vms_per_rack: int | None) -> tuple[list[int], int]:
    rack = sku.nvlink_domain_vms
    per_rack = vms_per_rack or default_vms_per_rack(nodes, sku)
    if per_rack is None or nodes % per_rack:
        raise ConfigError(
            f"{sku.short} comes in {sku.rack_name}s of {rack} VMs: {nodes} nodes is not a whole "
            f"number of racks",
            hint=f"use a multiple of {' or of '.join(str(n) for n in rack_sizes(sku))}, or set "
                 "azure.vms_per_rack")
    racks_per_set = cap // per_rack
    if racks_per_set == 0:
        raise ConfigError(f"azure.vms_per_rack {per_rack} exceeds max_vms_per_scale_set {cap}")
    racks = nodes // per_rack
    return [r * per_rack for r in _spread(racks, racks_per_set)], per_rack


def default_vms_per_rack(nodes: int, sku: GpuSku) -> int | None:
    """VMs per NVLink rack a plan uses when azure.vms_per_rack is not set: the first of the row's
    rack_layouts that divides `nodes` (full racks of 18, else on GB200 racks of 16, as Azure's
    128-rack v6.0 record run), else, below one rack, one partial rack of `nodes` VMs: NVIDIA's published 2- and 4-node GB200 systems
    ran that way (mlcommons/training_results_v5.1 NVIDIA/systems/tyche_ngpu8_*.json and
    tyche_ngpu16_*.json: number_of_nodes 2 and 4, system_name "Tyche (1x NVIDIA GB200 NVL72)").
    None when no rack size divides `nodes`; 1 for sizes without multi-VM NVLink domains."""
    rack = sku.nvlink_domain_vms
    if rack <= 1:
        return 1
    for candidate in rack_sizes(sku):
        if nodes % candidate == 0:
            return candidate
    return nodes if 0 < nodes < rack else None


def _spread(total: int, cap: int) -> list[int]:
    """Split `total` into the fewest parts of at most `cap`, as even as possible."""
    parts = math.ceil(total / cap)
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]
