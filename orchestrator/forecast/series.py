"""One benchmark on one GPU size, ready to predict: the size checked, the points chosen, the curve
fitted and the interval sized; or a one-line ConfigError saying what is missing. The planner
(plan) and the report's curve (curve) both start here, so they predict the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.forecast import record
from orchestrator.forecast.basis import Band, Basis, band_for, basis_of
from orchestrator.forecast.model import Fit, fit_points
from orchestrator.forecast.points import STORED, SeriesPoints, check_benchmark, series_points
from orchestrator.hardware.catalog import GpuSku, gpu_skus, lookup
from orchestrator.results.published import catalog_gpu
from orchestrator.store.schema import ResultRow


@dataclass(frozen=True)
class Series:
    """A fitted series: the size, its points, the fit and its interval band."""

    sku: GpuSku
    points: SeriesPoints
    fit: Fit
    band: Band

    @property
    def benchmark(self) -> str:
        return self.points.benchmark

    @property
    def gpu(self) -> str:
        return self.points.gpu

    def interval(self, gpus: float) -> tuple[float, float, float]:
        """(predicted, low, high) minutes at `gpus`."""
        return self.band.interval(self.fit, gpus)

    def basis(self) -> Basis:
        return basis_of(self.points, self.fit, self.band)


def fitted_series(benchmark: str, sku: str, stored: Sequence[ResultRow] = ()) -> Series:
    """`benchmark` on `sku` with the published and `stored` results; ConfigError for an unknown
    benchmark, a size without GPUs, or fewer than two measured GPU counts."""
    row, gpu = gpu_sku(sku)
    bench = check_benchmark(benchmark)
    points = series_points(bench, gpu, stored)
    fit = fit_series(points, row)
    band = band_for(points, record.pool(exclude=(bench, gpu)), record.pool_size(exclude=(bench, gpu)),
                    new_round=0.0 if fit.level == STORED else record.round_term())
    return Series(sku=row, points=points, fit=fit, band=band)


def gpu_sku(name: str) -> tuple[GpuSku, str]:
    """The catalog row of a GPU size and its GPU's alias; ConfigError for a size without GPUs."""
    row = lookup(name)
    gpu = catalog_gpu(row.name)
    if not row.gpus_per_vm or gpu is None:
        raise ConfigError(f"SKU '{name[:60]}' ({row.short}) has no GPU: nothing to forecast",
                          hint=f"use a GPU size: {', '.join(r.key for r in gpu_skus())} "
                               "(see `azbench catalog`)")
    return row, gpu


def fit_series(series: SeriesPoints, sku: GpuSku) -> Fit:
    """The series' fit, or a one-line ConfigError saying what is missing."""
    if not series.points:
        others = [f"{s.gpu} ({len(s.scales)} GPU counts)" for s in record.all_series()
                  if s.benchmark == series.benchmark]
        raise NotFoundError(f"no published or stored {series.benchmark} results on {sku.short}: nothing to fit",
                            hint=f"published for {series.benchmark}: {', '.join(others) or 'none'}")
    if len(series.scales) < 2:
        only = series.points[0]
        raise ConfigError(f"{series.benchmark} on {sku.short} was measured at one GPU count only "
                          f"({only.gpus:,} GPUs: {only.label}, {only.minutes:.2f} min): a curve needs two")
    return fit_points(series.points)
