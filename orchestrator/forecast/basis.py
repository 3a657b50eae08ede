"""What a prediction stands on, as data: the points, the fitted curve's parameters, the interval's
width and where it came from, and the same said in a few lines a user reads.

`Band` sizes the interval of one series once (loo.half_width at distance 0, then x (1 + WIDEN x
distance) per prediction); `Basis` is the serialisable account the plan and the curve carry, with
every parameter a page needs to evaluate the model itself (see curve.evaluate).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator import formats
from orchestrator.forecast.forward import combined
from orchestrator.forecast.loo import COVERAGE, POOL_WEIGHT, WIDEN, Residual, half_width, leave_one_out
from orchestrator.forecast.model import SHRINK, Fit, vertex
from orchestrator.forecast.points import STORED, TUNED_FACTOR, LeftOut, Point, SeriesPoints, group_order
from orchestrator.models import Frozen

MAX_EXTRAPOLATION = 4.0  # past the largest (or below the smallest) measured GPU count


@dataclass(frozen=True)
class Band:
    """The interval of one series: `q` the ln half-width inside the measured range, from `own`
    leave-one-out errors of the series and `pool_errors` errors of `pool_series` other series."""

    q: float
    own: int
    pool_series: int
    pool_errors: int
    new_round: float = 0.0

    def half_width(self, distance: float) -> float:
        return combined(self.q * (1.0 + WIDEN * distance), self.new_round)

    def interval(self, fit: Fit, gpus: float) -> tuple[float, float, float]:
        """(predicted, low, high) minutes at `gpus`."""
        centre, h = fit.log_minutes(gpus), self.half_width(fit.distance(gpus))
        return math.exp(centre), math.exp(centre - h), math.exp(centre + h)


def band_for(series: SeriesPoints, pool: Sequence[Residual], pool_size: tuple[int, int],
             new_round: float = 0.0) -> Band:
    """The band of `series` against `pool` (other series only): its width comes from
    leave-one-out fits, never from the series' own fit; `new_round` (ln) is forward's term for a
    prediction at a published round's level (0 at the level of stored results)."""
    own = leave_one_out(series.points)
    return Band(q=half_width(own, pool, 0.0), own=len(own), pool_series=pool_size[0],
                pool_errors=pool_size[1], new_round=new_round)


class IntervalBasis(Frozen):
    coverage: float = COVERAGE
    half_width_ln: float
    widen_per_doubling: float = WIDEN
    new_round_ln: float = 0.0
    own_errors: int
    pool_series: int
    pool_errors: int


class Basis(Frozen):
    """The model behind every prediction of one series, with its points.

    ln T(N) = coefficients[0] + coefficients[1]·x + coefficients[2]·x² + offsets[level],
    x = log2(N) − center_log2_gpus, with log2(N) held at vertex_log2_gpus (the parabola's turn,
    brought into the measured range; None for a line) on the side where the curve would rise,
    and continued as its tangent (never rising) outside [low_gpus, high_gpus]. The 80% interval
    is ×/÷ exp(half_width_ln·(1 + widen·d) + new_round_ln), d the doublings to the
    nearest measured count (inside the range too), new_round_ln forward's new-round term (0 at
    the level of stored results).
    curve.evaluate computes it from these fields alone."""

    benchmark: str
    gpu: str
    formula: str
    degree: int
    center_log2_gpus: float
    coefficients: list[float]
    offsets: dict[str, float]
    level: str
    vertex_log2_gpus: float | None
    low_gpus: int
    high_gpus: int
    measured_gpus: list[int]
    max_extrapolation: float = MAX_EXTRAPOLATION
    interval: IntervalBasis
    points: list[Point]
    left_out: list[LeftOut] = []
    text: list[str]


def basis_of(series: SeriesPoints, fit: Fit, band: Band) -> Basis:
    return Basis(
        benchmark=series.benchmark, gpu=series.gpu, formula=_formula(fit.degree), degree=fit.degree,
        center_log2_gpus=fit.center, coefficients=list(fit.coef), offsets=dict(fit.offsets),
        level=fit.level, vertex_log2_gpus=vertex(fit), low_gpus=fit.low, high_gpus=fit.high,
        measured_gpus=fit.scales,
        interval=IntervalBasis(half_width_ln=band.q, new_round_ln=band.new_round, own_errors=band.own, pool_series=band.pool_series,
                               pool_errors=band.pool_errors),
        points=list(series.points), left_out=list(series.left_out), text=_text(series, fit, band))


def _formula(degree: int) -> str:
    shape = {2: "a parabola on log-log (scaling efficiency changes with scale)",
             1: "a straight line on log-log (a power law, T ∝ N^a1)"}.get(degree, "a constant")
    return f"ln T = level[round] + {shape}; x = log2 GPUs"


def _text(series: SeriesPoints, fit: Fit, band: Band) -> list[str]:
    points = fit.points
    by_group = Counter(p.group for p in points)
    groups = ", ".join(f"{g}: {by_group[g]}" for g in sorted(by_group, key=group_order))
    published = sum(p.source == "published" for p in points)
    stored = len(points) - published
    what = f"{published} published" + (f" + {stored} stored (marked *)" if stored else "")
    level = ("your stored results" if fit.level == STORED else f"round {fit.level}")
    lines = [
        f"stands on {what} points at {len(fit.scales)} GPU counts, {fit.low:,}-{fit.high:,} GPUs "
        f"({groups}); predictions at the level of {level} ({by_group[fit.level]} point(s))",
        f"curve: {_formula(fit.degree)}, one level per round (shrunk to the common one, weight "
        f"{SHRINK:g}); past the data the tangent, never rising",
        f"interval: {COVERAGE:.0%} from leave-one-out errors ({band.own} of this series, "
        f"{band.pool_errors} of {band.pool_series} other series, weighted as {POOL_WEIGHT:g} points), ×/÷ "
        f"{math.exp(band.q):.2f} at a measured count, +{WIDEN:.0%} width per doubling from the nearest one"
        + (f"; a new software round adds ×/÷ {math.exp(band.new_round):.2f} in quadrature (the "
           f"{COVERAGE:.0%} quantile of the level shifts between published rounds)" if band.new_round else
           "; at your stored results' level no new-round term"),
        f"points: per GPU count and round the fastest closed, available result; more than "
        f"{TUNED_FACTOR:g}x the fastest at a count left out ({_results(len(series.left_out))} left out "
        f"in all, listed in --json)",
    ]
    return lines


def _results(n: int) -> str:
    return f"{n} result" + ("" if n == 1 else "s")


def point_lines(points: Sequence[Point]) -> list[str]:
    """One line per point: GPUs, minutes, group and label (stored marked *)."""
    return [f"{'*' if p.source == 'stored' else ' '} {formats.count(p.gpus):>7} GPUs {formats.fixed(p.minutes, 2):>9} min  {p.label}"
            + (f" ({p.note})" if p.note else "") for p in sorted(points, key=lambda p: (p.gpus, group_order(p.group)))]
