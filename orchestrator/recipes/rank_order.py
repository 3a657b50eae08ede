"""Which ranks share a parallel group, from the rank order the implementation uses, and where those
groups land: ranks on nodes as Slurm places them, nodes in racks as `up` lays them out.

Megatron-core builds every group from one rank order (megatron/core/parallel_state.py,
RankGenerator and generate_masked_orthogonal_rank_groups, NVIDIA/Megatron-LM core 0.20.0 at
d98e8a64): global_rank = sum(index[d] * stride[d]) with the strides the running products of the
sizes in that order, and a group of dimension d holds the ranks that differ only in index[d].
Its default order is "tp-cp-ep-dp-pp" (initialize_model_parallel's `order`); Megatron's
--use-tp-pp-dp-mapping, which NVIDIA's NeMo MLPerf implementations set from TP_PP_DP_MAPPING
(conf/custom.yaml `use_tp_pp_dp_mapping: ${oc.env:TP_PP_DP_MAPPING,False}`, passed to
MegatronStrategy in pretrain.py), makes it "tp-cp-ep-pp-dp" (megatron/training/initialize.py).
So by default pipeline stages sit DP*TP*CP ranks apart; with the mapping, TP*CP.

Ranks to nodes: one task per GPU, block distribution (Slurm's default: a node's GPUs take
consecutive ranks). Nodes to racks: the job's nodes in order, `rack_vms` to a rack (hardware/
layout.py: 16 or 18 VMs per GB200 NVL72 rack; one VM per NVLink domain on ND H100/H200 v5).
Pure arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pydantic import Field

from orchestrator.models import Frozen
from orchestrator.recipes.configs import config_flag

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
TP_PP_DP_ORDER = "tp-cp-ep-pp-dp"
MAPPING_VAR = "TP_PP_DP_MAPPING"
DIMS = ("tp", "cp", "pp", "dp")


class Span(Frozen):
    """How far one dimension's groups reach: the most nodes and racks any group touches."""

    size: int
    stride: int = Field(description="ranks between two members of a group")
    nodes: int
    racks: int


def order_from(env: Mapping[str, str], sources: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(rank order, why): TP_PP_DP_MAPPING true gives "tp-cp-ep-pp-dp", else Megatron's default."""
    value = env.get(MAPPING_VAR)
    where = (sources or {}).get(MAPPING_VAR, "")
    if config_flag(value):
        return TP_PP_DP_ORDER, f"{MAPPING_VAR}={value}" + (f" [{where}]" if where else "")
    said = f"{MAPPING_VAR}={value}" + (f" [{where}]" if where else "") if value is not None else f"{MAPPING_VAR} unset"
    return DEFAULT_ORDER, f"Megatron-core's default; {said}"


def strides(sizes: Mapping[str, int], order: str) -> dict[str, int]:
    """Each dimension's stride in `order` (the running product of the sizes before it)."""
    out, step = {}, 1
    for dim in order.split("-"):
        out[dim] = step
        step *= sizes.get(dim, 1)
    return out


def groups(sizes: Mapping[str, int], order: str, dim: str) -> list[list[int]]:
    """The rank groups of `dim`, in Megatron's order: group g enumerates the other dimensions'
    indices (the first in `order` fastest), a group's members `dim`'s index."""
    names = order.split("-")
    step = strides(sizes, order)
    others = [d for d in names if d != dim]
    count = math.prod(sizes.get(d, 1) for d in others)
    out = []
    for g in range(count):
        base, rest = 0, g
        for d in others:
            rest, index = divmod(rest, sizes.get(d, 1))
            base += index * step[d]
        out.append([base + k * step[dim] for k in range(sizes.get(dim, 1))])
    return out


def span(sizes: Mapping[str, int], order: str, dim: str, gpus_per_node: int, rack_vms: int) -> Span:
    """The most nodes and racks any `dim` group touches (block placement, racks of `rack_vms`)."""
    per_node, per_rack = max(gpus_per_node, 1), max(gpus_per_node, 1) * max(rack_vms, 1)
    nodes = racks = 1
    for members in groups(sizes, order, dim):
        nodes = max(nodes, len({r // per_node for r in members}))
        racks = max(racks, len({r // per_rack for r in members}))
    return Span(size=sizes.get(dim, 1), stride=strides(sizes, order)[dim], nodes=nodes, racks=racks)


def spans(sizes: Mapping[str, int], order: str, gpus_per_node: int, rack_vms: int) -> dict[str, Span]:
    return {dim: span(sizes, order, dim, gpus_per_node, rack_vms) for dim in DIMS}
