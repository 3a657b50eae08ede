"""The published step times the model is fitted and checked on: recipes/published/step_times.csv
(recipes/published/step_times.py builds it from the MLCommons trees; ATTRIBUTION.md beside it),
read back as typed scales, each with its StepConfig and the catalog row's Hardware.

A scale is one (round, submitter, system, benchmark) at its GPU count. An accelerator no Azure
size has but published MLPerf results run on (B200) is read from recipes/published/published_gpus.csv
(datasheet figures, each with its source): it is predicted and checked like a catalog GPU, never
offered to `up` or `plan`. Scales whose accelerator has neither, or no peak at its precision, or
whose benchmark has no model facts, are kept with the reason they are not modelled
(`Scale.why_not`), never guessed.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from functools import lru_cache

from orchestrator.errors import NotFoundError
from orchestrator.explain.model import ARCH, IB_EFFICIENCY, Hardware, StepConfig
from orchestrator.hardware.catalog import GpuSku, by_accelerator, find
from orchestrator.models import ModelFacts
from orchestrator.paths import recipes_dir
from orchestrator.recipes.catalog import get_recipe
from orchestrator.recipes.configs import config_flag
from orchestrator.recipes.rank_order import order_from
from orchestrator.results.published import load_published, round_key

DATA_FILE = "published/step_times.csv"
GPUS_FILE = "published/published_gpus.csv"
GEMM_FILE = "published/gemm_rates.csv"
HBM_FILE = "published/hbm_bandwidth.csv"


@dataclass(frozen=True)
class Scale:
    """One published scale: who, on what, its config and its measured median step."""

    round: str
    submitter: str
    system: str
    benchmark: str
    accelerator: str
    gpus: int
    step_s: float
    config_path: str
    config: StepConfig | None
    hardware: Hardware | None
    gpu_key: str | None
    why_not: str = ""

    @property
    def label(self) -> str:
        return f"{self.round}/{self.submitter}/{self.system}"

    @property
    def system_key(self) -> tuple[str, str, str]:
        return (self.round, self.submitter, self.system)

    @property
    def group(self) -> tuple[str, str]:
        """What the compute rate is fitted per: (catalog GPU, precision)."""
        return (self.gpu_key or "", self.config.precision if self.config else "")


@dataclass(frozen=True)
class PublishedGpu:
    """An accelerator of published results that no catalog size has (published_gpus.csv)."""

    key: str
    gpus_per_node: int
    peaks: dict[str, float]
    nvlink_busbw_gbs: float
    ib_gbps_per_gpu: float
    source: str

    def hardware(self, precision: str) -> Hardware | None:
        peak = self.peaks.get(precision)
        if not peak:
            return None
        return Hardware(peak_tflops=peak, gpus_per_node=self.gpus_per_node, domain_nodes=1,
                        nvlink_busbw_gbs=self.nvlink_busbw_gbs, ib_gbs_per_gpu=self.ib_gbps_per_gpu / 8.0,
                        bf16_peak_tflops=self.peaks.get("bf16"),
                        source=f"{self.key} (no Azure size; recipes/{GPUS_FILE}): {peak:g} TFLOP/s dense "
                               f"{precision}; {self.source}",
                        inter_source=f"recipes/{GPUS_FILE}: {self.key}'s InfiniBand ({self.ib_gbps_per_gpu:g} "
                                     f"Gb/s per GPU) at {IB_EFFICIENCY:.0%} (azbench's assumption)")


@lru_cache(maxsize=1)
def published_gpus() -> dict[str, PublishedGpu]:
    """MLPerf accelerator name -> its datasheet figures, for accelerators no catalog size has."""
    path = recipes_dir() / GPUS_FILE
    if not path.is_file():
        return {}
    with path.open(newline="") as fh:
        return {r["accelerator"]: PublishedGpu(
            key=r["gpu"], gpus_per_node=int(r["gpus_per_node"]),
            peaks={p: float(r[f"peak_tflops_{p}"]) for p in ("bf16", "fp8", "fp4") if r[f"peak_tflops_{p}"]},
            nvlink_busbw_gbs=float(r["nvlink_busbw_gbs"]), ib_gbps_per_gpu=float(r["ib_gbps_per_gpu"]),
            source=r["source"]) for r in csv.DictReader(fh)}


def peak_of(gpu: str, precision: str) -> float | None:
    """A GPU key's dense peak at `precision`: its catalog row's, else published_gpus.csv's."""
    row = find(gpu)
    if row is not None:
        return row.peak_tflops(precision)
    extra = next((g for g in published_gpus().values() if g.key == gpu), None)
    return extra.peaks.get(precision) if extra is not None else None


def hardware_of(row: GpuSku, precision: str, inter_busbw_gbs: float | None = None) -> Hardware | None:
    """The model's view of a catalog row at `precision`; None when the row lacks a peak or an
    NVLink busbw (the model then says "not predicted")."""
    peak = row.peak_tflops(precision)
    if not peak or not row.expected_busbw_gbps or not row.gpus_per_vm:
        return None
    ib = row.ib_links * row.ib_gbps_per_link / 8.0 / row.gpus_per_vm
    return Hardware(peak_tflops=peak, gpus_per_node=row.gpus_per_vm,
                    domain_nodes=row.nvlink_domain_vms, nvlink_busbw_gbs=row.expected_busbw_gbps,
                    ib_gbs_per_gpu=ib, inter_busbw_gbs=inter_busbw_gbs, bf16_peak_tflops=row.peak_tflops("bf16"),
                    source=f"{row.short}: {peak:g} TFLOP/s dense {precision} ({row.peak_source}); "
                           f"NVLink busbw {row.expected_busbw_gbps:g} GB/s ({row.busbw_source}); "
                           f"InfiniBand {row.ib_links} x {row.ib_gbps_per_link} Gb/s per VM",
                    inter_source=f"catalog: {row.short}'s InfiniBand ({row.ib_links} x {row.ib_gbps_per_link} "
                                 f"Gb/s per {row.gpus_per_vm} GPUs) at {IB_EFFICIENCY:.0%} (azbench's assumption)")


def missing_hardware(row: GpuSku | None, precision: str) -> str:
    if row is None:
        return (f"no catalog size (hardware/sizes.yaml) or recipes/{GPUS_FILE} row has this "
                "accelerator")
    if not row.peak_tflops(precision):
        return f"the catalog row {row.short} has no dense {precision} peak"
    return f"the catalog row {row.short} has no NVLink busbw (expected_busbw_gbps)"


@lru_cache(maxsize=1)
def gemm_rates() -> dict[tuple[str, str], tuple[float, str]]:
    """(catalog GPU key, precision) -> (dense GEMM TFLOP/s azbench's GPU check measured, where):
    recipes/published/gemm_rates.csv; empty when the file is absent."""
    path = recipes_dir() / GEMM_FILE
    if not path.is_file():
        return {}
    with path.open(newline="") as fh:
        return {(r["gpu"], r["precision"]): (float(r["tflops"]), f"{r['shape']} on {r['date']}: {r['source']}")
                for r in csv.DictReader(fh)}


@lru_cache(maxsize=1)
def hbm_bandwidth() -> dict[str, tuple[float, str]]:
    """Catalog GPU key -> (HBM bandwidth per GPU in TB/s, datasheet): recipes/published/hbm_bandwidth.csv
    (with the dense peak it gives a GPU's balance, what fit.py transfers a share of peak along)."""
    path = recipes_dir() / HBM_FILE
    if not path.is_file():
        return {}
    with path.open(newline="") as fh:
        return {r["gpu"]: (float(r["hbm_tbs"]), r["source"]) for r in csv.DictReader(fh)}


@lru_cache(maxsize=1)
def model_facts() -> dict[str, ModelFacts]:
    """The recipes' `model:` blocks by benchmark (the facts the step model reads; not
    recipes.catalog.model_facts, which also sources every vendored config for MFU's precisions)."""
    facts: dict[str, ModelFacts] = {}
    for name in ARCH:  # the benchmarks the model covers, each a recipe of the same name
        try:
            recipe = get_recipe(name)
        except NotFoundError:
            continue
        if recipe.model is not None:
            facts[recipe.benchmark.lower()] = recipe.model
    return facts


@lru_cache(maxsize=1)
def scales() -> tuple[Scale, ...]:
    """Every row of the vendored table; ConfigError-free (bad rows say why_not)."""
    facts = model_facts()
    out = []
    with (recipes_dir() / DATA_FILE).open(newline="") as fh:
        for r in csv.DictReader(fh):
            out.append(_scale(r, facts.get(r["benchmark"])))
    return tuple(out)


def _scale(r: dict[str, str], facts: ModelFacts | None) -> Scale:
    row = by_accelerator(r["accelerator"])
    extra = published_gpus().get(r["accelerator"]) if row is None else None
    precision = r["precision"]
    key = row.key if row is not None else extra.key if extra is not None else None
    hw: Hardware | None = None
    if not precision:  # step_times.py could not read it: never guessed as BF16
        why = ("precision not known: its config sources a helper the submission does not have "
               "(recipes/published/step_times.py)")
    elif extra is not None:
        hw = extra.hardware(precision)
        why = "" if hw is not None else f"recipes/{GPUS_FILE} has no dense {precision} peak for {extra.key}"
    else:
        hw = hardware_of(row, precision) if row is not None else None
        why = "" if hw is not None else missing_hardware(row, precision)
    config = None
    if facts is None:
        why = why or f"no model facts for {r['benchmark']}"
    else:
        order, _ = order_from({"TP_PP_DP_MAPPING": r["tp_pp_dp_mapping"]} if r["tp_pp_dp_mapping"] else {})
        config = StepConfig(
            benchmark=r["benchmark"], params=facts.params, layers=facts.layers,
            d_model=facts.d_model, seq_len=int(r["seq_len"] or facts.seq_len), gbs=int(r["gbs"]),
            mbs=int(r["mbs"]), gpus=int(r["gpus"]), tp=int(r["tp"]), pp=int(r["pp"]),
            cp=int(r["cp"]), vp=int(r["vp"] or 1), ep=int(r["ep"] or 1), precision=precision,
            trainable_params=facts.trainable_params,
            tp_overlap=config_flag(r["tp_overlap"]), order=order,
            fp8_param_gather=precision != "bf16" and r["benchmark"] != "llama2_70b_lora")
        why = why or (config.problem() or "")
        if hw is not None and row is not None and row.nvlink_domain_vms > 1 and not why:
            # NVIDIA's multi-VM NVLink configs set SEGMENT (whole model-parallel groups per rack,
            # recipes/parallelism.py): a rack holds as many whole groups as fit.
            group_vms = -(-config.tp * config.pp * config.cp // max(row.gpus_per_vm, 1))
            if group_vms <= row.nvlink_domain_vms:
                hw = replace(hw, domain_nodes=row.nvlink_domain_vms // group_vms * group_vms)
    return Scale(round=r["round"], submitter=r["submitter"], system=r["system"],
                 benchmark=r["benchmark"], accelerator=r["accelerator"], gpus=int(r["gpus"]),
                 step_s=float(r["step_s"]), config_path=r["config"], config=config,
                 hardware=hw, gpu_key=key if hw is not None else None,
                 why_not=why)


def modelled() -> list[Scale]:
    """The scales the model can take, each published log set once: a scale whose step time,
    benchmark and GPU count equal an earlier row's (the same logs under another submitter folder
    or round, e.g. v4.0 smc, smc-ac-power and smc-dc-power) is left out of the fit and the checks,
    so a held-out system is never fitted on its own copy."""
    out: list[Scale] = []
    seen: set[tuple[str, int, float]] = set()
    for s in scales():
        key = (s.benchmark, s.gpus, s.step_s)
        if not s.why_not and key not in seen:
            out.append(s)
        seen.add(key)
    return out


@dataclass(frozen=True)
class StepsToTrain:
    """How many steps a score takes at a global batch, from published scores and steps."""

    steps: float
    source: str


def steps_to_train(benchmark: str, gbs: int) -> StepsToTrain | None:
    """Step-equivalents of one published score (score minutes x 60 / median step: evaluation and
    the rest of the timed run included) at the published global batch nearest `gbs` (newest
    round first), scaled by that batch / `gbs` (the same samples to the target: an assumption;
    the RCPs ask somewhat more samples of a larger batch). None without a published pair."""
    scores = {(r.round, r.org, r.system, r.benchmark_key): r.score_minutes for r in load_published()}
    pairs = []
    for s in scales():
        score = scores.get((s.round, s.submitter, s.system, s.benchmark))
        if s.benchmark == benchmark and s.config is not None and score:
            pairs.append((s, score * 60.0 / s.step_s))
    if not pairs:
        return None
    nearest = min(abs(math.log(p[0].config.gbs / gbs)) for p in pairs if p[0].config)
    close = [p for p in pairs if p[0].config and abs(abs(math.log(p[0].config.gbs / gbs)) - nearest) < 1e-9]
    newest = max(round_key(p[0].round) for p in close)
    picked = [p for p in close if round_key(p[0].round) == newest]
    s, equiv = sorted(picked, key=lambda p: p[1])[len(picked) // 2]
    assert s.config is not None
    steps = equiv * s.config.gbs / gbs
    return StepsToTrain(steps=steps, source=(
        f"{equiv:.0f} step-equivalents of {s.label}'s published score at GBS {s.config.gbs} "
        f"(score / median step), x {s.config.gbs}/{gbs}: the same samples to the target assumed"))
