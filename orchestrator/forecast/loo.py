"""Leave-one-out: how wrong the model is on points it did not see, and the interval that follows.

leave_one_out(points): hold out each measured GPU count in turn (every point at that count,
all rounds), fit the rest, and keep the error at each held-out point: ln(predicted/measured),
with how far outside the remaining points' range it lay (in doublings).

The interval: the 80% quantile (COVERAGE) of |error| / (1 + WIDEN·distance), over the series'
own leave-one-out errors (weight 1 each) and a pool of errors from other series (weight
POOL_WEIGHT in all, spread evenly); the half-width at a prediction is that quantile x
(1 + WIDEN·its distance), in log space: [T·e^-h, T·e^h]. So a series that the model fits
closely gets a narrow band, one with scattered points a wide one, a series with few points
borrows the record's typical error, and every doubling past the data adds WIDEN to the width.

validate_series(points, pool) is the honest version the benchmark runs: each held-out count is
predicted, and its interval built, from the other counts only (its own errors come from a
leave-one-out over the rest), with a pool that must not contain the series itself.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from orchestrator.errors import ConfigError
from orchestrator.forecast.model import Fit, fit_points
from orchestrator.forecast.points import Point
from orchestrator.models import Frozen

COVERAGE = 0.8  # the interval's nominal coverage
WIDEN = 1.0  # the half-width grows by this fraction per doubling beyond the measured range
POOL_WEIGHT = 10.0  # the pool's weight, in points, against the series' own errors
MIN_SCALES = 3  # a series with fewer measured GPU counts has no leave-one-out to speak of (no pool errors)


@dataclass(frozen=True)
class Residual:
    """One held-out point: ln(predicted / measured) and its distance outside the range (doublings)."""

    gpus: int
    group: str
    log_error: float
    distance: float


class Held(Frozen):
    """A held-out point of the benchmark's leave-one-out: measured, predicted and its interval."""

    series: str
    gpus: int
    group: str
    label: str
    measured: float
    predicted: float
    low: float
    high: float
    extrapolation: float

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted / self.measured - 1.0

    @property
    def inside(self) -> bool:
        return self.low <= self.measured <= self.high


class LooSummary(Frozen):
    """The leave-one-out figures over some held-out points."""

    series: int
    points: int
    median_abs_error: float
    worst_abs_error: float
    coverage: float
    nominal_coverage: float = COVERAGE

    def line(self) -> str:
        return (f"median abs error {self.median_abs_error:.1%}, worst {self.worst_abs_error:.1%}, "
                f"coverage {self.coverage:.1%}")


def leave_one_out(points: Sequence[Point]) -> list[Residual]:
    """The error at each point when its GPU count is held out (counts whose rest cannot be fitted,
    i.e. fewer than two other counts, are skipped)."""
    # Errors are scaled by the distance outside the data only: the width they give is then
    # widened, per prediction, by the distance to the nearest measured count (Fit.distance),
    # inside the data too, so a count far from every measured one is not called certain.
    return [Residual(gpus=p.gpus, group=p.group, distance=fit.outside(p.gpus),
                     log_error=fit.log_minutes(p.gpus, p.group) - math.log(p.minutes))
            for _, held, _, fit in _folds(points) for p in held]


def half_width(own: Sequence[Residual], pool: Sequence[Residual], distance: float) -> float:
    """The interval's half-width in ln units at `distance` doublings past the data."""
    values = [(abs(r.log_error) / (1.0 + WIDEN * r.distance), 1.0) for r in own]
    if pool:
        values += [(abs(r.log_error) / (1.0 + WIDEN * r.distance), POOL_WEIGHT / len(pool)) for r in pool]
    if not values:
        raise ConfigError("no leave-one-out errors to size an interval with")
    return _weighted_quantile(values, COVERAGE) * (1.0 + WIDEN * distance)


def validate_series(name: str, points: Sequence[Point], pool: Sequence[Residual]) -> list[Held]:
    """Each measured GPU count predicted from the others, with its interval built without it."""
    held: list[Held] = []
    for gpus, here, rest, fit in _folds(points):
        h = half_width(leave_one_out(rest), pool, fit.distance(gpus))
        for p in here:
            centre = fit.log_minutes(gpus, p.group)
            held.append(Held(series=name, gpus=gpus, group=p.group, label=p.label, measured=p.minutes,
                             predicted=math.exp(centre), low=math.exp(centre - h),
                             high=math.exp(centre + h), extrapolation=fit.extrapolation(gpus)))
    return held


def summarize(held: Sequence[Held]) -> LooSummary:
    """Median and worst |predicted/measured - 1|, and the share inside their interval."""
    if not held:
        raise ConfigError("no held-out points to summarize")
    errors = [abs(h.error) for h in held]
    return LooSummary(series=len({h.series for h in held}), points=len(held),
                      median_abs_error=statistics.median(errors), worst_abs_error=max(errors),
                      coverage=sum(h.inside for h in held) / len(held))


def _folds(points: Sequence[Point]) -> Iterator[tuple[int, list[Point], list[Point], Fit]]:
    """Each measured GPU count held out in turn: (count, its points, the rest, the rest's fit);
    counts whose rest has fewer than two GPU counts (nothing to fit) are skipped."""
    for gpus in sorted({p.gpus for p in points}):
        rest = [p for p in points if p.gpus != gpus]
        if len({p.gpus for p in rest}) < 2:
            continue
        yield gpus, [p for p in points if p.gpus == gpus], rest, fit_points(rest)


def _weighted_quantile(values: Sequence[tuple[float, float]], q: float) -> float:
    """The smallest value whose cumulative weight reaches q of the total."""
    ordered = sorted(values)
    total = sum(w for _, w in ordered)
    acc = 0.0
    for value, weight in ordered:
        acc += weight
        if acc >= q * total - 1e-12:
            return value
    return ordered[-1][0]
