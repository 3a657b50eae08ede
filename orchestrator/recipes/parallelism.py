"""Parallel layouts for MLPerf recipes: check them, derive them for new scales, place them on Azure.

A layout obeys the relations of NVIDIA's MLPerf configs (../shared/docs/mlperf-notes.md §8):
MP = TP·PP·CP, DP = GPUs / MP, MINIBS = GBS / DP, grad-accum = MINIBS / MBS. Placement keeps tensor
and context parallel groups inside the NVLink domain (one VM on ND H100/H200 v5; an NVL72 rack of
18 VMs on ND GB200 v6), carries data parallelism over InfiniBand, and for GB200 computes the Slurm
`--segment` (SEGMENT = TP·PP·CP / GPUs per VM) that keeps every model-parallel group inside one
rack. A size's NCCL/UCX settings are its catalog row's (`network_profile`); what Azure's fabric
cannot honour is here (FABRIC_RULES). Pure functions; every refusal is one ConfigError line.
"""

from __future__ import annotations

import math
import re

from pydantic import Field

from orchestrator.hardware.catalog import GpuSku, NetworkProfile
from orchestrator.hardware.layout import default_vms_per_rack
from orchestrator.errors import ConfigError
from orchestrator.formats import count
from orchestrator.models import FabricOverride, Frozen
from orchestrator.recipes.rank_order import DEFAULT_ORDER, DIMS, Span, spans

WEAK_RULE = ("weak scaling from the listed {base}-node config (the nearest listed scale): same "
             "TP/PP/CP/VP, micro batch and "
             "gradient accumulation (per-GPU work constant); DP = GPUs/(TP*PP*CP), "
             "GBS = DP*MBS*grad-accum; walltime grows by base GBS/GBS when GBS shrinks")


LAYOUT_FIELDS = ("tp", "pp", "cp", "vp", "dp", "mbs", "gbs", "minibs", "grad_accum")


class Layout(Frozen):
    """One checked parallel layout for a GPU count."""

    tp: int
    pp: int
    cp: int
    vp: int | None
    dp: int
    mbs: int
    gbs: int

    @property
    def mp(self) -> int:
        return self.tp * self.pp * self.cp

    @property
    def gpus(self) -> int:
        return self.mp * self.dp

    @property
    def minibs(self) -> int:
        return self.gbs // self.dp

    @property
    def grad_accum(self) -> int:
        return self.gbs // (self.dp * self.mbs)


class GbsRule(Frozen):
    """Global-batch limits of one ruleset. `max`/`rcp_min`: the RCP batch range; `min`: a hard floor."""

    min: int | None = Field(None, ge=1)
    rcp_min: int | None = Field(None, ge=1)
    max: int | None = Field(None, ge=1)
    multiple_of: int = Field(1, ge=1)


class ScaleConfig(Frozen):
    """One listed scale of a recipe on one SKU (NVIDIA config_*.sh equivalents), with its source."""

    nodes: int = Field(ge=1)
    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    cp: int = Field(1, ge=1)
    vp: int | None = Field(None, ge=1)
    mbs: int = Field(ge=1)
    gbs: int = Field(ge=1)
    walltime_min: int = Field(ge=1)
    source: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    # The submission's config_*.sh sourced before azbench's values (path under recipes/configs/
    # <recipe>/): the published config at this scale, or for an estimate the one it scales from.
    config: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]*/config_[A-Za-z0-9._+-]*\.sh$")
    # Layout field -> variable name where this scale's implementation differs from the recipe's.
    env_names: dict[str, str] = Field(default_factory=dict)

    @property
    def estimate(self) -> bool:
        """True when no submission used this exact layout (its source says "azbench estimate")."""
        return self.source.startswith("azbench estimate")

    def layout(self, gpus_per_vm: int, what: str) -> Layout:
        return make_layout(gpus=self.nodes * gpus_per_vm, tp=self.tp, pp=self.pp, cp=self.cp,
                           vp=self.vp, mbs=self.mbs, gbs=self.gbs, what=what)


class Choice(Frozen):
    """The chosen layout: a listed config (derived False) or WEAK_RULE applied to `base`."""

    layout: Layout
    base: ScaleConfig
    derived: bool
    rule: str | None = None
    walltime_min: int


class Placement(Frozen):
    """Where each parallel dimension runs, and the Slurm topology request that makes it so.
    `links` says nvlink or infiniband per dimension, from `spans` (recipes/rank_order.py: the
    nodes and racks its groups touch under `order`); `scale_out` says in one sentence what
    crosses the scale-out fabric; `warnings` name a latency-critical dimension (TP, CP, PP)
    that leaves its NVLink domain."""

    nvlink_domain_gpus: int
    mp_gpus: int
    links: dict[str, str]
    segment: int | None = None
    racks: int | None = None
    notes: list[str] = Field(default_factory=list)
    order: str = DEFAULT_ORDER
    order_source: str = ""
    rack_vms: int = 1
    spans: dict[str, Span] = Field(default_factory=dict)
    scale_out: str = ""
    warnings: list[str] = Field(default_factory=list)


def make_layout(*, gpus: int, tp: int, pp: int, cp: int, vp: int | None, mbs: int, gbs: int,
                what: str) -> Layout:
    """The layout for `gpus`, or a one-line ConfigError naming the broken relation."""
    mp = tp * pp * cp
    if min(tp, pp, cp, mbs, gbs) < 1 or (vp is not None and vp < 1):
        raise ConfigError(f"{what}: parallel sizes and batches must be at least 1")
    if gpus < mp:
        raise ConfigError(f"{what}: one model replica needs TP*PP*CP = {tp}*{pp}*{cp} = {mp} GPUs, "
                          f"only {gpus} requested")
    if gpus % mp:
        raise ConfigError(f"{what}: {gpus} GPUs is not a multiple of TP*PP*CP = {tp}*{pp}*{cp} = {mp}")
    dp = gpus // mp
    if gbs % (dp * mbs):
        raise ConfigError(f"{what}: global batch {gbs} is not divisible by DP*MBS = {dp}*{mbs}")
    grad_accum = gbs // (dp * mbs)
    # Megatron's interleaved schedule runs microbatches in groups of PP.
    if vp and vp > 1 and grad_accum % pp:
        raise ConfigError(f"{what}: interleaved pipeline (VP {vp}) needs grad-accum {grad_accum} "
                          f"to be a multiple of PP {pp}")
    return Layout(tp=tp, pp=pp, cp=cp, vp=vp, dp=dp, mbs=mbs, gbs=gbs)


def derive_weak(base: Layout, gpus: int, what: str) -> Layout:
    """`base` at `gpus`: same model parallelism, MBS and grad-accum; DP and GBS scale (WEAK_RULE)."""
    if gpus < base.mp or gpus % base.mp:
        make_layout(gpus=gpus, tp=base.tp, pp=base.pp, cp=base.cp, vp=base.vp, mbs=base.mbs,
                    gbs=base.gbs, what=what)  # raises the MP message
    dp = gpus // base.mp
    return make_layout(gpus=gpus, tp=base.tp, pp=base.pp, cp=base.cp, vp=base.vp, mbs=base.mbs,
                       gbs=dp * base.mbs * base.grad_accum, what=what)


def choose(configs: list[ScaleConfig], gpus_per_vm: int, nodes: int, what: str) -> Choice:
    """The listed config for `nodes`, else WEAK_RULE from the nearest listed config that divides."""
    for config in configs:
        if config.nodes == nodes:
            return Choice(layout=config.layout(gpus_per_vm, what), base=config, derived=False,
                          walltime_min=config.walltime_min)
    gpus = nodes * gpus_per_vm
    fits = [c for c in configs if c.tp * c.pp * c.cp <= gpus and gpus % (c.tp * c.pp * c.cp) == 0]
    if not fits:
        raise ConfigError(_no_fit(min(configs, key=lambda c: (c.tp * c.pp * c.cp, c.nodes)),
                                  gpus_per_vm, nodes, what))
    # The listed scale nearest by ratio (ties: the smaller), so a sweep around a published point
    # (Azure's 112 vs 128 racks) keeps that point's per-GPU work.
    base = min(fits, key=lambda c: (abs(math.log(c.nodes / nodes)), c.nodes))
    base_layout = base.layout(gpus_per_vm, what)
    layout = derive_weak(base_layout, gpus, what)
    walltime = math.ceil(base.walltime_min * max(1.0, base_layout.gbs / layout.gbs))
    return Choice(layout=layout, base=base, derived=True, walltime_min=walltime,
                  rule=WEAK_RULE.format(base=base.nodes))


def _no_fit(config: ScaleConfig, gpus_per_vm: int, nodes: int, what: str) -> str:
    mp = config.tp * config.pp * config.cp
    step = max(1, math.ceil(mp / gpus_per_vm))
    shape = f"TP*PP*CP = {config.tp}*{config.pp}*{config.cp} = {mp} GPUs"
    if nodes * gpus_per_vm < mp:
        return f"{what}: one model replica needs {shape}, at least {step} VMs"
    return f"{what}: {nodes * gpus_per_vm} GPUs do not divide into replicas of {shape}; use a multiple of {step} nodes"


def pick_ruleset(rulesets: list[str], ruleset: str | None, benchmark: str) -> str | None:
    """`ruleset` if the benchmark is part of it, the newest valid one when None; else ConfigError."""
    if ruleset is None:
        return max(rulesets, key=_version) if rulesets else None
    if ruleset not in rulesets:
        raise ConfigError(f"'{benchmark}' is not an MLPerf Training {ruleset} benchmark "
                          f"(valid rulesets: {', '.join(rulesets) or 'none'})")
    return ruleset


def _version(ruleset: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in ruleset.split("."))


def validate_scales(configs: list[ScaleConfig], sku: GpuSku, label: str) -> None:
    """Every listed config obeys the layout relations and fits the SKU's topology."""
    if len({c.nodes for c in configs}) != len(configs):
        raise ConfigError(f"{label}: a node count is listed twice")
    for config in configs:
        what = f"{label} {config.nodes} nodes"
        place(config.layout(sku.gpus_per_vm, what), sku, config.nodes)


def check_gbs(rule: GbsRule | None, gbs: int, label: str, source: str) -> list[str]:
    """Warnings for a legal-but-risky GBS; ConfigError for one the ruleset's checkers reject."""
    if rule is None:
        return []
    if rule.min is not None and gbs < rule.min:
        raise ConfigError(f"{label}: global batch {gbs} is below the ruleset minimum {rule.min}")
    if gbs % rule.multiple_of:
        raise ConfigError(f"{label}: global batch {gbs} must be a multiple of {rule.multiple_of}")
    if rule.max is not None and gbs > rule.max:
        raise ConfigError(f"{label}: global batch {gbs} exceeds the largest reference convergence "
                          f"point ({rule.max}); the RCP checker would demand new RCPs")
    if rule.rcp_min is not None and gbs < rule.rcp_min:
        return [f"{label}: global batch {gbs} is below the smallest RCP batch {rule.rcp_min}; the "
                f"RCP checker passes it only if it converges no faster than that RCP ({source})"]
    return []


def override_layout(layout: Layout, names: dict[str, str], overrides: dict[str, str], gpus: int,
                    what: str) -> Layout:
    """`layout` with the -p values of its fields (`names`: layout field -> the implementation's
    variable) applied, so the plan is the layout the script runs: TP, PP, CP, VP and MBS as given,
    GBS as given (or MINIBS x the new DP), else kept; DP and MINIBS follow (make_layout)."""
    by_var = {var: field for field, var in names.items()}
    given: dict[str, int] = {}
    for var, text in overrides.items():
        field = by_var.get(var)
        if field is None or field in ("dp", "grad_accum"):
            continue
        if not re.fullmatch(r"[0-9]{1,9}", text.strip()):
            raise ConfigError(f"-p {var}={text[:40]}: {field.upper()} must be a whole number")
        given[field] = int(text)
    if not given:
        return layout
    tp, pp, cp = given.get("tp", layout.tp), given.get("pp", layout.pp), given.get("cp", layout.cp)
    vp = given.get("vp", layout.vp)
    mp = tp * pp * cp
    dp = gpus // mp if mp and gpus % mp == 0 else None
    gbs = given.get("gbs") or ((given["minibs"] * dp) if "minibs" in given and dp else layout.gbs)
    return make_layout(gpus=gpus, tp=tp, pp=pp, cp=cp, vp=vp, mbs=given.get("mbs", layout.mbs),
                       gbs=gbs, what=f"{what} with -p {', '.join(f'{names[f]}={v}' for f, v in given.items())}")


def place(layout: Layout, sku: GpuSku, nodes: int, *, order: str = DEFAULT_ORDER,
          order_source: str = "", span_racks: bool = False) -> Placement:
    """Each dimension's groups from the rank order (recipes/rank_order.py), ranks on nodes in
    blocks of GPUs per VM, nodes in racks as `up` builds them: its link (NVLink inside one domain,
    else InfiniBand), spans, the scale-out sentence and warnings; TP must fit the NVLink domain;
    GB200: --segment and rack count, never more racks than the plan of `nodes` holds (else a
    ConfigError naming the nearest counts that fit). A model-parallel group larger than a rack is
    refused unless `span_racks` (a -p override asked for it: its warnings say which groups leave
    the rack)."""
    per_vm = sku.gpus_per_vm
    domain = per_vm * sku.nvlink_domain_vms
    name = f"{sku.short} ({domain} GPUs per NVLink domain)"
    if layout.tp > domain or domain % layout.tp:
        raise ConfigError(f"TP {layout.tp} does not fit the NVLink domain of {name}: "
                          f"tensor-parallel traffic must stay on NVLink")
    notes: list[str] = []
    segment, racks = None, None
    rack_vms = 1
    if sku.nvlink_domain_vms > 1:
        segment, racks = _rack_packing(layout.mp, sku, nodes, span_racks)
        rack_vms = default_vms_per_rack(nodes, sku) or sku.nvlink_domain_vms
    sizes = {"tp": layout.tp, "cp": layout.cp, "pp": layout.pp, "dp": layout.dp}
    found = spans(sizes, order, max(per_vm, 1), rack_vms)
    # One NVLink domain: one VM on ND v5 sizes, one rack (of the layout's VMs) on NVL72.
    reach = {d: (s.racks if sku.nvlink_domain_vms > 1 else s.nodes) for d, s in found.items()}
    links = {d: "nvlink" if reach[d] <= 1 else "infiniband" for d in DIMS}
    if links["cp"] == "infiniband":
        notes.append(f"context-parallel groups span {found['cp'].nodes} VMs over InfiniBand "
                     f"(TP*CP = {layout.tp * layout.cp} > {domain}), as in NVIDIA's published 405B configs for 8-GPU nodes")
    where = "rack" if sku.nvlink_domain_vms > 1 else "VM"
    inside = f"one rack of {rack_vms} VMs" if sku.nvlink_domain_vms > 1 else f"one VM of {per_vm} GPUs"
    warnings = [f"{d.upper()} {sizes[d]} leaves its NVLink domain ({inside}): its groups span {found[d].nodes} nodes"
                + (f" in {found[d].racks} racks" if sku.nvlink_domain_vms > 1 else "")
                + f" over InfiniBand (members {found[d].stride} ranks apart in rank order {order}: "
                + f"{order_source or 'Megatron-core default'})" for d in ("tp", "cp", "pp") if links[d] == "infiniband"]
    if segment is not None and racks is not None:
        too_big, note = _segments(layout, sku, nodes, segment, racks, rack_vms)
        warnings += too_big
        notes.append(note)
    return Placement(nvlink_domain_gpus=domain, mp_gpus=layout.mp, links=links,
                     segment=segment if segment and segment > 1 else None, racks=racks, notes=notes,
                     order=order, order_source=order_source, rack_vms=rack_vms, spans=found,
                     scale_out=_scale_out(found, links, where, domain, sku.nvlink_domain_vms > 1), warnings=warnings)


def _segments(layout: Layout, sku: GpuSku, nodes: int, segment: int, racks: int,
              rack_vms: int) -> tuple[list[str], str]:
    """On a rack-scale SKU: (a warning when a model-parallel group is larger than one rack,
    the note on segments, groups per rack, VMs left idle and racks)."""
    warnings: list[str] = []
    per_rack = rack_vms // segment
    idle = rack_vms - per_rack * segment
    group = max(1, layout.mp // sku.gpus_per_vm)
    if group > segment:
        warnings.append(f"a model-parallel group (TP*PP*CP = {layout.tp}*{layout.pp}*{layout.cp} = "
                        f"{layout.mp} GPUs, {group} VMs) is larger than one rack of {rack_vms} VMs: "
                        f"each spans {group // segment} racks in segments of {segment} VMs "
                        f"(--segment={segment})")
    note = ((f"{nodes // segment} segments of {segment} VM(s) ({nodes // group} model-parallel groups "
             f"of {group})" if group > segment else f"{nodes // segment} model-parallel groups of {segment} VM(s)")
            + f", {per_rack} per "
            f"{rack_vms}-VM rack ({idle} VM(s) per rack left idle): {racks} rack(s)"
            + (f" of the {sku.nvlink_domain_vms} an {sku.rack_name} holds" if rack_vms < sku.nvlink_domain_vms else ""))
    return warnings, note


def _scale_out(found: dict[str, Span], links: dict[str, str], where: str, domain: int, racks: bool) -> str:
    """One sentence: which dimensions' traffic crosses the InfiniBand scale-out fabric, how far."""
    out = [d for d in DIMS if links[d] == "infiniband"]
    stay = [d.upper() for d in DIMS if links[d] == "nvlink" and found[d].size > 1]
    if not out:
        return f"Nothing crosses the scale-out fabric: every group stays inside one NVLink {where} ({domain} GPUs)."
    reach = ", ".join(f"{d.upper()} (groups of {found[d].size} over {found[d].nodes} nodes"
                      + (f" in {found[d].racks} racks" if racks else "") + ")" for d in out)
    kept = (f"; {', '.join(stay)} {'stays' if len(stay) == 1 else 'stay'} on NVLink inside one {where}"
            if stay else "")
    return f"Over the InfiniBand scale-out fabric: {reach}{kept}."


def nvidia_config_env(layout: Layout, placement: Placement, sku: GpuSku, nodes: int,
                      ruleset: str | None, walltime: int, names: dict[str, str]) -> dict[str, str]:
    """NVIDIA config_*.sh variables (mlperf-notes §8) for a layout; `names` maps layout fields."""
    values = {field: getattr(layout, field) for field in LAYOUT_FIELDS}
    shape = f"tp{layout.tp}pp{layout.pp}cp{layout.cp}"
    env = {"DGXNNODES": str(nodes), "DGXNGPU": str(sku.gpus_per_vm),
           "DGXSYSTEM": f"azbench_{sku.short.replace(' ', '_')}_{nodes}x{sku.gpus_per_vm}x"
                        f"{layout.minibs}x{shape}",
           "WALLTIME_RUNANDTIME": str(walltime), "NEXP": "1"}
    if ruleset:
        env["MLPERF_RULESET"] = ruleset
    if placement.segment:
        env["SEGMENT"] = str(placement.segment)
    env.update({var: str(values[field]) for field, var in names.items() if values[field] is not None})
    return env


def _rack_packing(mp: int, sku: GpuSku, nodes: int, span_racks: bool = False) -> tuple[int, int]:
    """(VMs per Slurm segment, racks needed) on a multi-VM NVLink domain. Racks hold as many VMs
    as a plan of `nodes` builds (hardware.layout.default_vms_per_rack: 18, 16, or one partial
    rack below 18). A model-parallel group is one segment; one larger than a rack (`span_racks`)
    is cut into the largest segments that divide it and fit a rack. ConfigError when the
    segments need more racks than the plan holds, naming the nearest node counts that fit."""
    per_vm, domain = sku.gpus_per_vm, sku.nvlink_domain_vms
    if mp > per_vm * domain and not span_racks:
        raise ConfigError(f"a model-parallel group of TP*PP*CP = {mp} GPUs ({math.ceil(mp / per_vm)} "
                          f"VMs) would span {sku.short} {sku.rack_name}s ({domain} VMs = "
                          f"{per_vm * domain} GPUs each)")
    if (mp > per_vm and mp % per_vm) or (mp < per_vm and per_vm % mp):
        raise ConfigError(f"a model-parallel group of {mp} GPUs does not tile {sku.short} VMs "
                          f"of {per_vm} GPUs")
    group = max(1, mp // per_vm)
    rack_vms = default_vms_per_rack(nodes, sku) or domain
    if group > rack_vms and not span_racks:
        raise ConfigError(f"a model-parallel group of {group} VMs does not fit the racks of "
                          f"{rack_vms} VMs a {nodes}-VM {sku.short} cluster is built in")
    segment = _segment(group, rack_vms)
    racks, held = _racks(nodes, segment, rack_vms)
    if racks > held:
        near = fitting_counts(nodes, group, sku)
        raise ConfigError(f"{count(nodes)} {sku.short} VMs are built as {count(held)} {sku.rack_name}(s) of "
                          f"{rack_vms} VMs; {count(nodes // segment)} segments of {segment} VMs (whole "
                          f"model-parallel groups of {group} VM(s)) fit {rack_vms // segment} per rack and would "
                          f"need {count(racks)} racks"
                          + (f"; nearest counts that fit: {' or '.join(count(n) for n in near)}" if near else ""))
    return segment, racks


def _segment(group: int, rack_vms: int) -> int:
    """The Slurm segment for model-parallel groups of `group` VMs in racks of `rack_vms`: the group
    itself when it fits one rack, else the largest divisor of it that does."""
    return next(s for s in range(min(group, rack_vms), 0, -1) if group % s == 0)


def _racks(nodes: int, segment: int, rack_vms: int) -> tuple[int, int]:
    """(racks the segments need, racks a plan of `nodes` holds) at `rack_vms` VMs a rack."""
    need = math.ceil((nodes // segment) / (rack_vms // segment))
    return need, max(1, nodes // rack_vms)


def fitting_counts(nodes: int, group: int, sku: GpuSku, reach: int = 4096) -> tuple[int, ...]:
    """The nearest node counts below and above `nodes` whose racks (as a plan builds them) hold
    whole model-parallel groups of `group` VMs without more racks than the plan has."""
    def fits(n: int) -> bool:
        rack_vms = default_vms_per_rack(n, sku)
        if not rack_vms or n % group:
            return False
        need, held = _racks(n, _segment(group, rack_vms), rack_vms)
        return need <= held
    below = next((n for n in range(nodes - 1, 0, -1) if fits(n)), None)
    above = next((n for n in range(nodes + 1, nodes + reach) if fits(n)), None)
    return tuple(n for n in (below, above) if n is not None)


def network_profile(sku: GpuSku) -> NetworkProfile:
    """The NCCL/UCX environment and mounts a job gets on `sku`: its catalog row's (an empty one,
    with the reason in its source, on sizes without a fabric)."""
    return sku.network


# What NVIDIA's configs ask of Eos' fabric that an Azure cluster cannot give, and what azbench
# sets instead (after the config is sourced). SHARP's in-network reductions (NCCL's CollNet, and
# NeMo's SHARP flag that turns on NCCL's SHARP plugin) need an Aggregation Manager on the
# InfiniBand subnet manager; on Azure the fabric and its subnet manager are Azure's, and azbench
# sets none up (Azure's own NCCL guidance for ND v5 sets no CollNet/SHARP: ai-infrastructure-on-
# azure examples/dgx_benchmarking/slurm/README.md). SBATCH_NETWORK is an input variable of Slurm's
# batch-submit command (its man page, INPUT ENVIRONMENT VARIABLES: read "upon startup"): exported
# inside the batch script it changes nothing, and the --network=sharp it stands for is Eos' Slurm
# switch plugin.
_SHARP_WHY = ("SHARP/CollNet in-network reductions need a SHARP Aggregation Manager on the "
              "InfiniBand fabric; Azure runs the fabric's subnet manager and azbench sets none up")
FABRIC_RULES: dict[str, tuple[str | None, str]] = {
    "NCCL_COLLNET_ENABLE": ("0", _SHARP_WHY),
    "SHARP": ("False", _SHARP_WHY),
    "USE_SHARP": ("False", _SHARP_WHY),
    "SBATCH_NETWORK": (None, "Slurm reads SBATCH_NETWORK only when a batch job is submitted (the "
                             "batch-submit man page, input environment variables): set inside the "
                             "batch script it does nothing, and --network=sharp is Eos' Slurm "
                             "switch plugin"),
}
_OFF = ("", "0", "false", "no", "none")


def fabric_overrides(sku: GpuSku, env: dict[str, str], sources: dict[str, str]) -> list[FabricOverride]:
    """The settings of an effective environment an Azure size's fabric cannot honour
    (FABRIC_RULES), each with where the config asked for it; none off Azure's GPU sizes."""
    if not (sku.is_azure_size and sku.gpus_per_vm):
        return []
    out = []
    for name, (value, why) in FABRIC_RULES.items():
        if name in env and env[name].strip().lower() not in _OFF:
            out.append(FabricOverride(name=name, value=value, why=why,
                                      asked=f"{name}={env[name]} [{sources.get(name, 'azbench')}]"))
    return out
