"""The account a reader sees: a config's predicted step, part by part, beside the measured one,
and the gap in words.

`explain_config` predicts any StepConfig on a catalog row (a recipe's config at a scale, a
published system's, a run's); `explain_published` finds a published scale in the vendored table;
`report_summary` is the small object `report -o json` carries per group. What the model cannot
take (a benchmark without architecture facts, a size without a peak or an NVLink busbw, a CPU
node) comes back with `predicted_step_s` None and the reasons in `not_predicted`: never a number
the model has none for.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from typing import Any

from pydantic import Field

from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.explain.fit import fitted_params
from orchestrator.explain.model import (
    ALPHA_IB_S, ALPHA_NVLINK_S, ARCH, COMPONENTS, IB_EFFICIENCY, Hardware, StepConfig, inter_rate_from_busbw,
    predict,
)
from orchestrator.explain.published import (
    DATA_FILE, Scale, hardware_of, missing_hardware, model_facts, scales, steps_to_train,
)
from orchestrator.hardware.catalog import GpuSku, find, lookup
from orchestrator.models import Frozen
from orchestrator.paths import recipes_dir
from orchestrator.recipes.catalog import ResolvedConfig, resolve
from orchestrator.recipes.configs import config_flag
from orchestrator.recipes.rank_order import order_from

# Parts a gap statement names: the largest differences first, at most this many.
GAP_PARTS = 3
ASSUMPTIONS = (f"InfiniBand collectives reach {IB_EFFICIENCY:.0%} of line rate between NVLink "
               f"domains (azbench's assumption; a stored fabric test replaces it); latency "
               f"{ALPHA_NVLINK_S * 1e6:g} us per ring step on NVLink, {ALPHA_IB_S * 1e6:g} us on "
               "InfiniBand")


class Explained(Frozen):
    """One step explained: the parts (seconds, adding up to predicted_step_s), the measured step
    when there is one, the error, the layout and links, and the parameters used."""

    subject: str
    benchmark: str
    gpus: int | None = None
    predicted_step_s: float | None = None
    measured_step_s: float | None = None
    measured_stats: dict[str, float] = Field(default_factory=dict, description="the measured "
                                             "step's statistics (results.metrics.StepStats): count, p95, ...")
    components: dict[str, float] = Field(default_factory=dict)
    error: float | None = Field(None, description="(predicted - measured) / measured")
    layout: dict[str, object] = Field(default_factory=dict)
    links: dict[str, str] = Field(default_factory=dict)
    leaves_nvlink_domain: list[str] = Field(default_factory=list)
    compute_rate: str = ""
    hardware: str = ""
    cross_domain_gbs: float | None = Field(None, description="the rate (GB/s per GPU) collectives "
                                           "were costed at between NVLink domains")
    cross_domain_source: str = ""
    overhead_source: str = Field("", description="where `other`, the software's per-step overhead, "
                                 "comes from (which round's scales)")
    parameters: list[dict[str, object]] = Field(default_factory=list)
    gap: str = ""
    not_predicted: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class ReportExplain(Frozen):
    """What `report -o json` carries per group (`explain`)."""

    predicted_step_s: float | None
    measured_step_s: float | None
    components: dict[str, float]
    error: float | None
    not_predicted: list[str] = Field(default_factory=list)
    source: str = ""


def from_resolved(r: ResolvedConfig) -> StepConfig:
    """The model's view of a resolved recipe config (`run --dry-run`'s, `plan`'s)."""
    facts = model_facts().get(r.benchmark_key) or model_facts().get(r.recipe)
    if facts is None:
        raise ConfigError(f"recipe '{r.recipe}' has no model facts (its model: block): no step model")
    if facts.sample_flops is not None:  # DLRM, RetinaNet, R-GAT: FLOPs per sample, no transformer
        raise ConfigError(f"recipe '{r.recipe}' is not a transformer: the step model covers "
                          "transformer recipes only")
    env = {**r.config_env, **r.env}
    order, _ = order_from(env)
    # The effective values win over the resolved layout: a -p TENSOR_MODEL_PARALLEL=8 is exported
    # after the config, so the job runs it; DP follows from the GPUs, the global batch stays.
    size = {k: _env_int(env, names, default) for k, (names, default) in {
        "tp": (("TENSOR_MODEL_PARALLEL", "TP"), r.tp), "pp": (("PIPELINE_MODEL_PARALLEL", "PP"), r.pp),
        "cp": (("CONTEXT_PARALLEL", "CP"), r.cp), "vp": (("INTERLEAVED_PIPELINE", "VP"), r.vp or 1),
        "mbs": (("MICRO_BATCH_SIZE", "MBS"), r.mbs or 1)}.items()}
    return StepConfig(
        benchmark=r.benchmark_key, params=facts.params, layers=facts.layers, d_model=facts.d_model,
        seq_len=facts.seq_len, gbs=r.gbs or 1, mbs=size["mbs"], gpus=r.gpus, tp=size["tp"],
        pp=size["pp"], cp=size["cp"], vp=size["vp"] if size["pp"] > 1 else 1, precision=r.precision or facts.precision, trainable_params=facts.trainable_params,
        tp_overlap=config_flag(env.get("TP_COMM_OVERLAP"), True),
        fp8_param_gather=config_flag(env.get("FP8_PARAM_GATHER")) or (r.precision == "fp4"), order=order,
        # every published config azbench vendors sets both True, and the fit assumes them
        overlap_grad_reduce=config_flag(env.get("OVERLAP_GRAD_REDUCE"), True),
        overlap_param_gather=config_flag(env.get("OVERLAP_PARAM_GATHER"), True))


def _env_int(env: dict[str, str], names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = env.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return default


def explain_config(c: StepConfig, row: GpuSku | None, *, subject: str, measured_s: float | None = None,
                   inter_busbw_gbs: float | None = None, fabric_note: str = "",
                   rack_vms: int | None = None, round_name: str | None = None,
                   cross_domain_gbs: float | None = None) -> Explained:
    """`c` on the catalog row `row`, predicted with the fitted parameters on `round_name`'s
    software (None: the newest round's). `cross_domain_gbs` (the rate a collective reaches
    between NVLink domains, GB/s per GPU: `plan --cross-domain-gbs`) replaces the catalog
    estimate in the prediction; `inter_busbw_gbs` (a stored fabric test's) re-predicts the step
    in the gap, which says what it changes."""
    why = _why_not(c, row)
    if why or row is None:
        return Explained(subject=subject, benchmark=c.benchmark, gpus=c.gpus, measured_step_s=measured_s,
                         layout=_layout(c), not_predicted=why, notes=[ASSUMPTIONS])
    hw = hardware_of(row, c.precision)
    assert hw is not None
    if rack_vms and row.nvlink_domain_vms > 1:  # the racks `up` builds (16 or 18 VMs)
        hw = replace(hw, domain_nodes=rack_vms)
    if cross_domain_gbs is not None:
        hw = replace(hw, inter_busbw_gbs=cross_domain_gbs, inter_source="--cross-domain-gbs")
    return _explain_on(c, hw, row.key, subject=subject, measured_s=measured_s, round_name=round_name,
                       refit_gbs=inter_busbw_gbs, fabric_note=fabric_note)


def _explain_on(c: StepConfig, hw: Hardware, gpu: str, *, subject: str, measured_s: float | None,
                round_name: str | None, refit_gbs: float | None = None, fabric_note: str = "") -> Explained:
    """`c` on `hw` (GPU key `gpu`): the prediction, its parts, links and the gap."""
    fitted = fitted_params()
    params, how = fitted.params_for((gpu, c.precision), round_name)
    _, overhead_how = fitted.overhead_for(round_name)
    b = predict(c, hw, params)
    step = b.step_s
    error = (step - measured_s) / measured_s if measured_s else None
    refit = None
    if refit_gbs is not None:
        refit = (predict(c, replace(hw, inter_busbw_gbs=refit_gbs), params), refit_gbs, fabric_note)
    links = {d: ("NVLink (one domain)" if n <= 1 else f"InfiniBand ({n} NVLink domains)")
             for d, n in b.terms.domains.items() if getattr(c, d) > 1}
    return Explained(
        subject=subject, benchmark=c.benchmark, gpus=c.gpus, predicted_step_s=step,
        measured_step_s=measured_s, components=dict(b.components), error=error, layout=_layout(c),
        links=links, leaves_nvlink_domain=[d.upper() for d in b.terms.leaves_domain],
        compute_rate=how, hardware=hw.source, cross_domain_gbs=hw.inter_gbs,
        cross_domain_source=hw.inter_source, overhead_source=overhead_how, parameters=fitted.table(),
        gap=gap_statement(step, measured_s, b.components, hw, refit),
        notes=[ASSUMPTIONS, f"other: the per-step overhead of the software, {overhead_how}",
               f"parameters fitted on {fitted.scales} published scales of "
               f"{fitted.systems} systems (recipes/{DATA_FILE})"])


def gap_statement(predicted: float, measured: float | None, parts: dict[str, float], hw: Hardware,
                  refit: tuple[object, float, str] | None = None) -> str:
    """"measured 1.41 s, predicted 1.29 s: +9 %; the largest parts: ..."; with a stored fabric
    figure, the step re-predicted on it."""
    top = sorted(((k, v) for k, v in parts.items() if v > 0), key=lambda kv: -kv[1])[:GAP_PARTS]
    named = ", ".join(f"{k} {v:.3g} s" for k, v in top)
    dp = (f"; dp_comm {parts.get('dp_comm', 0.0):.3g} s exposed on {hw.inter_gbs:.0f} GB/s "
          f"cross-domain busbw ({hw.inter_source})")
    if measured is None:
        head = f"predicted {predicted:.3g} s, not measured; the largest parts: {named}"
    else:
        gap = (measured - predicted) / predicted
        head = (f"measured {measured:.3g} s, predicted {predicted:.3g} s: {gap:+.1%} "
                f"({'slower' if gap > 0 else 'faster'} than the model); the largest parts: {named}")
    tail = ""
    if refit is not None:
        b, busbw, note = refit
        new = getattr(b, "step_s")
        tail = (f"; your stored fabric test ({note}) gives {busbw:.0f} GB/s between domains: "
                f"re-predicted with it, {new:.3g} s")
    return head + dp + tail


def explain_published(system: str, benchmark: str, gpus: int | None = None) -> list[Explained]:
    """The published scales of `system` (its name, or round/submitter/system) on `benchmark`."""
    found = [s for s in scales() if s.benchmark == benchmark and _names(s, system)
             and (gpus is None or s.gpus == gpus)]
    if not found:
        raise ConfigError(f"no published {benchmark} scale of system '{system}'"
                          + (f" at {gpus} GPUs" if gpus else "")
                          + f" in recipes/{DATA_FILE}", hint="azbench explain --list shows them")
    return [_explain_scale(s) for s in found]


def report_summary(round_name: str | None, submitter: str | None, system: str, benchmark: str,
                   measured_s: float | None) -> ReportExplain | None:
    """The report's `explain` for a group: a published scale of the table (matched by round,
    submitter, system and benchmark), against the group's own measured median; None when the
    table has no such scale."""
    for s in scales():
        if (s.benchmark == benchmark and s.system == system
                and (round_name is None or s.round == round_name)
                and (submitter is None or s.submitter == submitter)):
            e = _explain_scale(s, measured_s)
            return ReportExplain(predicted_step_s=e.predicted_step_s, measured_step_s=measured_s,
                                 components=e.components, error=e.error, not_predicted=e.not_predicted,
                                 source=f"{s.label} config {s.config_path} (recipes/{DATA_FILE})")
    return None


def explain_run(run_id: str, recipe: str, nodes: int, sku: str, measured_s: float | None,
                steps: int, params: dict[str, str] | None = None,
                fabric: tuple[float, int, int, str] | None = None,
                stats: dict[str, float] | None = None) -> Explained:
    """A run of azbench's own: its recipe's config at its scale on its cluster's size (what
    `run --dry-run` resolves, with the run's -p values), against its measured median step."""
    row = find(sku)
    subject = f"run {run_id} ({recipe} on {nodes} x {row.short if row else sku})"
    measured_note = (f"measured: the median of {steps} kept step(s) (results.definitions.step_time)"
                     if measured_s is not None else "measured: no step times stored for this run")
    try:
        resolved = resolve_config(recipe, sku, nodes, params)
        config = from_resolved(resolved)
    except (ConfigError, NotFoundError) as exc:
        why = [f"the recipe's config at this scale cannot be modelled: {getattr(exc, 'message', str(exc))}"]
        if row is not None and not row.gpus_per_vm:
            why.append(f"{row.short} has no GPU: no achieved FLOP rate, NVLink or InfiniBand to "
                       "cost a step on")
        what = ("what it can say: the measured step and its statistics (report, results show); "
                "what it cannot: compute, communication or bubble of a CPU or unmodelled recipe")
        return Explained(subject=subject, benchmark=recipe, measured_step_s=measured_s,
                         measured_stats=dict(stats or {}), not_predicted=why, notes=[measured_note, what])
    rack_vms = resolved.placement.rack_vms if resolved.placement else None
    inter, note = _stored_rate(fabric, row, config.precision, rack_vms)
    out = explain_config(config, row, subject=subject, measured_s=measured_s,
                         inter_busbw_gbs=inter, fabric_note=note, rack_vms=rack_vms)
    return out.model_copy(update={"measured_stats": dict(stats or {}),
                                  "notes": [*out.notes, measured_note,
                                            f"config: {resolved.config or resolved.source}"]})


def _stored_rate(fabric: tuple[float, int, int, str] | None, row: GpuSku | None, precision: str,
                 rack_vms: int | None) -> tuple[float | None, str]:
    """The cross-domain rate a stored fabric test implies (model.inter_rate_from_busbw), and what
    the test was; (None, "") without a test or when it implies nothing."""
    if fabric is None or row is None:
        return None, ""
    hw = hardware_of(row, precision)
    if hw is None:
        return None, ""
    busbw, ranks, hosts, what = fabric
    per_domain = rack_vms or row.nvlink_domain_vms
    domains = max(1, -(-hosts // max(per_domain, 1)))
    rate = inter_rate_from_busbw(busbw, ranks, domains, hw)
    if rate is None:
        return None, ""
    return rate, f"{what}: busbw {busbw:.0f} GB/s, {rate:.0f} GB/s per GPU between domains"


def resolve_config(recipe: str, sku: str, nodes: int, params: dict[str, str] | None = None) -> ResolvedConfig:
    return resolve(recipe, sku, nodes, env=dict(params or {}))


def listing() -> list[dict[str, object]]:
    """Every published scale the table holds, and whether the model takes it."""
    return [{"system": s.label, "benchmark": s.benchmark, "gpus": s.gpus, "measured_step_s": s.step_s,
             "modelled": not s.why_not, "why_not": s.why_not} for s in scales()]


def _explain_scale(s: Scale, measured_s: float | None = None) -> Explained:
    measured = s.step_s if measured_s is None else measured_s
    subject = f"{s.label} {s.benchmark} at {s.gpus} GPUs"
    if s.config is None or s.why_not:
        return Explained(subject=subject, benchmark=s.benchmark, gpus=s.gpus, measured_step_s=measured,
                         not_predicted=[s.why_not])
    assert s.hardware is not None and s.gpu_key is not None  # a modelled scale has both
    out = _explain_on(s.config, s.hardware, s.gpu_key, subject=subject, measured_s=measured,
                      round_name=s.round)
    return out.model_copy(update={"notes": [*out.notes, f"config: {s.config_path}; measured: the "
                                            f"median step of the published logs (recipes/{DATA_FILE}); "
                                            "the parameters were fitted with this scale in the data "
                                            "(benchmarks/bench_explain.py holds it out)"]})


def _names(s: Scale, system: str) -> bool:
    return system in (s.system, s.label) or s.label.endswith("/" + system)


def _why_not(c: StepConfig, row: GpuSku | None) -> list[str]:
    out = []
    if c.benchmark not in ARCH:
        out.append(f"no model of '{c.benchmark}': the step model covers the Megatron-style LLM "
                   f"benchmarks {', '.join(sorted(ARCH))}")
    if row is None:
        out.append("no catalog size for this hardware")
    elif not row.gpus_per_vm:
        out.append(f"{row.short} has no GPU: no achieved FLOP rate, NVLink or InfiniBand to cost a step on")
    elif hardware_of(row, c.precision) is None:
        out.append(missing_hardware(row, c.precision))
    problem = c.problem() if c.benchmark in ARCH else None
    if problem:
        out.append(problem)
    return out


def not_overlapped(layout: dict[str, object]) -> str:
    """What a layout's DP overlap switches leave on the critical path whole, as views say it
    ('' when both overlap)."""
    off = [f"{what} ({switch.upper()} off)" for what, switch in
           (("reduce-scatter", "overlap_grad_reduce"), ("all-gather", "overlap_param_gather"))
           if layout.get(switch) is False]
    if not off:
        return ""
    said = f"DP {' and '.join(off)} not overlapped: exposed whole"
    if layout.get("overlap_grad_reduce") is False and layout.get("overlap_param_gather") is not False:
        # megatron/training/arguments.py: "--overlap-grad-reduce should be turned on when using
        # --overlap-param-gather"; costed as given, but the user should know
        said += " (Megatron-LM refuses OVERLAP_PARAM_GATHER without OVERLAP_GRAD_REDUCE)"
    return said


def _layout(c: StepConfig) -> dict[str, object]:
    return {"tp": c.tp, "pp": c.pp, "cp": c.cp, "vp": c.vp, "ep": c.ep, "dp": c.dp if c.gpus else None,
            "mbs": c.mbs, "gbs": c.gbs, "microbatches": c.microbatches if c.dp else None,
            "seq_len": c.seq_len, "precision": c.precision, "order": c.order,
            "tp_comm_overlap": c.tp_overlap, "overlap_grad_reduce": c.overlap_grad_reduce,
            "overlap_param_gather": c.overlap_param_gather}


__all__ = ["COMPONENTS", "Explained", "from_resolved", "not_overlapped", "ReportExplain", "explain_config", "explain_published",
           "report_summary", "listing"]


class PlanExplain(Frozen):
    """What `plan -o json` carries per node count (`explain`): the model's step for the recipe's
    config at that scale, its parts, its time to train (step x steps to train) and the band the
    model's leave-one-out error gives it."""

    predicted_step_s: float | None = None
    components: dict[str, float] = Field(default_factory=dict)
    layout: dict[str, object] = Field(default_factory=dict)
    links: dict[str, str] = Field(default_factory=dict)
    leaves_nvlink_domain: list[str] = Field(default_factory=list)
    model_minutes: float | None = None
    model_low: float | None = None
    model_high: float | None = None
    steps_to_train: float | None = None
    steps_source: str = ""
    config: str = ""
    cross_domain_gbs: float | None = Field(None, description="the rate (GB/s per GPU) collectives "
                                           "were costed at between NVLink domains")
    cross_domain_source: str = ""
    overhead_source: str = Field("", description="where `other`, the software's per-step overhead, "
                                 "comes from: the newest fitted round's, whatever round the config is")
    not_predicted: list[str] = Field(default_factory=list)


def plan_explain(recipe: str, sku: str, nodes: int, params: dict[str, str] | None = None,
                 cross_domain_gbs: float | None = None) -> PlanExplain:
    """The model at one plan row: the recipe's config at `nodes` (with -p values), on `sku`;
    `cross_domain_gbs` in place of the catalog's rate between NVLink domains."""
    try:
        resolved = resolve_config(recipe, sku, nodes, params)
        config = from_resolved(resolved)
    except (ConfigError, NotFoundError) as exc:
        return PlanExplain(not_predicted=[f"no config to model: {getattr(exc, 'message', str(exc))}"])
    e = explain_config(config, lookup(sku), subject=f"{recipe} on {nodes} x {sku}",
                       rack_vms=resolved.placement.rack_vms if resolved.placement else None,
                       cross_domain_gbs=cross_domain_gbs)
    if e.predicted_step_s is None:
        return PlanExplain(layout=e.layout, not_predicted=e.not_predicted)
    steps = steps_to_train(config.benchmark, config.gbs)
    band = model_band(config.benchmark)
    minutes = steps.steps * e.predicted_step_s / 60.0 if steps else None
    return PlanExplain(
        predicted_step_s=e.predicted_step_s, components=e.components, layout=e.layout, links=e.links,
        leaves_nvlink_domain=e.leaves_nvlink_domain, model_minutes=minutes,
        model_low=minutes * (1 - band) if minutes is not None else None,
        model_high=minutes * (1 + band) if minutes is not None else None,
        steps_to_train=steps.steps if steps else None,
        steps_source=steps.source if steps else "no published score and step of this benchmark",
        config=resolved.config or resolved.source, cross_domain_gbs=e.cross_domain_gbs,
        cross_domain_source=e.cross_domain_source, overhead_source=e.overhead_source)


def model_band(benchmark: str | None = None) -> float:
    """The model's relative band: its leave-one-out p90 error over the published scales of
    `benchmark` (all of them when it has fewer than 5), as benchmarks/bench_explain.py last wrote
    it to recipes/published/step_model_checks.json (tests/test_explain.py checks it is current)."""
    checks = _checks()
    row = checks.get("by_benchmark", {}).get(benchmark or "", {})
    if row and row.get("scales", 0) >= 5:
        return float(row["p90"])
    return float(checks["leave_one_out"]["p90"])


CHECKS_FILE = "published/step_model_checks.json"


@lru_cache(maxsize=1)
def _checks() -> dict[str, Any]:
    path = recipes_dir() / CHECKS_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"recipes/{CHECKS_FILE} is unreadable ({exc})",
                          hint="rerun python benchmarks/bench_explain.py") from None
    return data if isinstance(data, dict) else {}
