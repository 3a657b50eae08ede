"""The forecast curve of one benchmark on one GPU, as a typed model a report page embeds: the
fitted time-to-train with its 80% interval sampled over the reach (MAX_EXTRAPOLATION either
side of the measured GPU counts), the points it stands on (published and stored, marked), and
every parameter a page's "what would N nodes give?" input needs to evaluate the same model
without fetching anything (`evaluate` is the reference that input mirrors).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from orchestrator.errors import ConfigError
from orchestrator.forecast.basis import MAX_EXTRAPOLATION, Basis
from orchestrator.forecast.plan import runs_required, scaling_order
from orchestrator.forecast.series import fitted_series
from orchestrator.hardware.catalog import gpu_skus
from orchestrator.hardware.layout import rack_sizes
from pydantic import Field

from orchestrator.models import Frozen
from orchestrator.results.published import catalog_gpu
from orchestrator.store.schema import ResultRow

SAMPLES = 64


class CurveSample(Frozen):
    """The curve at one GPU count: predicted minutes and the 80% interval."""

    gpus: float
    minutes: float
    low: float
    high: float
    extrapolation: float


class ScalingPoint(Frozen):
    """A measured score's GPU count and the RCP scaling factor in it."""

    gpus: int
    factor: float
    label: str


class CurveData(Frozen):
    """One benchmark x GPU size, ready to embed: samples for the line and band, the points for
    the markers, the basis (parameters, interval, points' provenance, text) for the input."""

    benchmark: str
    gpu: str
    sku: str
    sku_short: str
    gpus_per_node: int
    node_steps: list[int]
    min_gpus: float
    max_gpus: float
    runs_required: int
    price_per_vm_hour_usd: float | None
    scaling: list[ScalingPoint] = Field(default_factory=list, description="the measured scores' "
                                        "RCP factors, in tie order: a count's runs are priced at "
                                        "the predicted score / the nearest one's (forecast.plan)")
    basis: Basis
    samples: list[CurveSample]
    caption: str


def benchmark_curve(benchmark: str, sku: str, stored: Sequence[ResultRow] = (),
                    samples: int = SAMPLES) -> CurveData:
    """The curve of `benchmark` on `sku` (a size or alias: "gb200"), stored results included
    (they set the level and are marked). ConfigError when there is nothing to fit."""
    series = fitted_series(benchmark, sku, stored)
    row, fit, basis = series.sku, series.fit, series.basis()
    low, high = fit.low / MAX_EXTRAPOLATION, fit.high * MAX_EXTRAPOLATION
    grid = sorted({*(low * (high / low) ** (i / (samples - 1)) for i in range(samples)), *map(float, fit.scales)})
    points = [CurveSample(gpus=g, extrapolation=fit.extrapolation(g), **_triple(series.interval(g)))
              for g in grid]
    return CurveData(
        benchmark=series.benchmark, gpu=series.gpu, sku=row.name, sku_short=row.short, gpus_per_node=row.gpus_per_vm,
        node_steps=list(rack_sizes(row)),
        min_gpus=low, max_gpus=high,
        runs_required=runs_required(series.benchmark), price_per_vm_hour_usd=row.price_per_hour_usd,
        scaling=[ScalingPoint(gpus=p.gpus, factor=p.scaling_factor, label=p.label)
                 for p in scaling_order(series.points.points)],
        basis=basis, samples=points, caption=basis.text[0])


def benchmark_curves(benchmark: str, stored: Sequence[ResultRow] = ()) -> list[CurveData]:
    """The curve of `benchmark` on every catalog GPU size that has one (two measured GPU counts or
    more, published or stored); sizes without enough data are skipped."""
    out = []
    for row in gpu_skus():
        if catalog_gpu(row.name) is None:
            continue
        try:
            out.append(benchmark_curve(benchmark, row.name, stored))
        except ConfigError:
            continue
    return out


def evaluate(basis: Basis, gpus: float) -> tuple[float, float, float]:
    """(predicted, low, high) minutes at `gpus` from the basis' parameters alone: what a page's
    script computes (the same as the plan's rows; tests/test_forecast_curve.py holds them equal).

    u = log2(gpus); e = u clamped to [log2 low_gpus, log2 high_gpus]; v = e held at the vertex
    on the rising side (a2 > 0: min(e, vertex); a2 < 0: max(e, vertex)); x = v - center;
    ln T = a0 + a1·x + a2·x² + offsets[level] + s·(u - e), s = min(a1 + 2·a2·x, 0), or 0 where
    v != e; the 80% interval is ln T ± (half_width_ln·(1 + widen·d) + new_round_ln), d the
    doublings from u to the nearest measured count (measured_gpus)."""
    a0, a1, a2 = basis.coefficients
    u = math.log2(gpus)
    e = min(max(u, math.log2(basis.low_gpus)), math.log2(basis.high_gpus))
    turn = basis.vertex_log2_gpus
    v = e if turn is None else min(e, turn) if a2 > 0 else max(e, turn)
    x = v - basis.center_log2_gpus
    slope = 0.0 if v != e else min(a1 + 2.0 * a2 * x, 0.0)
    centre = a0 + a1 * x + a2 * x * x + basis.offsets.get(basis.level, 0.0) + slope * (u - e)
    near = min((abs(u - math.log2(g)) for g in basis.measured_gpus), default=abs(u - e))
    within = basis.interval.half_width_ln * (1.0 + basis.interval.widen_per_doubling * near)
    r = basis.interval.new_round_ln
    h = within + r  # forward.combined
    return math.exp(centre), math.exp(centre - h), math.exp(centre + h)


def _triple(values: tuple[float, float, float]) -> dict[str, float]:
    minutes, low, high = values
    return {"minutes": minutes, "low": low, "high": high}
