"""The forecast model: time-to-train against GPU count, on log-log, one level per group.

    log T(N) = level[group] + a1·(u − ū) + a2·(u − ū)²,   u = log2 N

a straight line (a power law T ∝ N^a1) through two or three measured GPU counts, a parabola
from four on (scaling efficiency that falls, or rises, with scale, as the larger global batch
of a larger run changes the samples to converge: MLPerf's table has no batch size, so that
effect is in the curve, not a separate term). Every group (a published round, or "stored") has
its own level over the shared shape, shrunk towards the common one with weight SHRINK (a round
with one point still gets most of its own level; a round with none gets the common level).

Outside the measured GPU counts the curve goes on as its tangent at the nearest edge, and it
never rises: where the parabola would turn up, the time stays at its lowest value (more GPUs
are never predicted to be slower; they stop paying). Fitted by least squares (numpy), no
weights: each point is one published or stored score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from orchestrator.errors import ConfigError
from orchestrator.forecast.points import STORED, Point, group_order

SHRINK = 0.3  # ridge weight pulling each group's level to the common one
MIN_SCALES_FOR_CURVATURE = 4


@dataclass(frozen=True)
class Fit:
    """A fitted curve: `coef` = (a0, a1, a2) around `center` (mean log2 GPUs of the points),
    `offsets` per group, predictions at `level`'s offset; `low`/`high` the measured GPU counts'
    range (the curve's support)."""

    points: tuple[Point, ...]
    center: float
    coef: tuple[float, float, float]
    offsets: dict[str, float]
    level: str
    low: int
    high: int

    @property
    def degree(self) -> int:
        return 2 if self.coef[2] else 1 if self.coef[1] else 0

    @property
    def scales(self) -> list[int]:
        return sorted({p.gpus for p in self.points})

    def log_minutes(self, gpus: float, group: str | None = None) -> float:
        """ln T at `gpus` at the level of `group` (default: the fit's level)."""
        u = math.log2(gpus)
        edge = min(max(u, math.log2(self.low)), math.log2(self.high))
        value = self._curve(_clamped(self, edge)) + self._edge_slope(edge) * (u - edge)
        return value + self.offsets.get(group or self.level, 0.0)

    def minutes(self, gpus: float, group: str | None = None) -> float:
        return math.exp(self.log_minutes(gpus, group))

    def distance(self, gpus: float) -> float:
        """How far `gpus` lies from the nearest measured count, in doublings (0 at a measured
        count): past the range, the doublings past its edge; inside it, to the nearer of the
        measured counts on each side (a count 3 doublings from each is 3 doublings from the
        data, and its interval widens as far). What the interval widens with."""
        u = math.log2(gpus)
        return float(min(abs(u - math.log2(s)) for s in self.scales))

    def outside(self, gpus: float) -> float:
        """How far `gpus` lies outside the measured range, in doublings (0 inside)."""
        u = math.log2(gpus)
        return max(0.0, u - math.log2(self.high), math.log2(self.low) - u)

    def extrapolation(self, gpus: float) -> float:
        """`gpus` over the largest measured count (or the smallest over `gpus`); 1 inside."""
        return float(2.0 ** self.outside(gpus))

    def _curve(self, u: float) -> float:
        x = u - self.center
        return self.coef[0] + self.coef[1] * x + self.coef[2] * x * x

    def _edge_slope(self, u: float) -> float:
        """The tangent's slope at the edge `u`, never rising (0 where the curve is held)."""
        if _clamped(self, u) != u:
            return 0.0
        return min(self.coef[1] + 2.0 * self.coef[2] * (u - self.center), 0.0)


def fit_points(points: Sequence[Point], level: str | None = None) -> Fit:
    """The least-squares fit over `points` (two distinct GPU counts at least). Predictions are
    made at `level`: default "stored" when there are stored points, else the newest round."""
    scales = sorted({p.gpus for p in points})
    if len(scales) < 2:
        have = f"only {scales[0]} GPUs" if scales else "no points"
        raise ConfigError(f"a curve needs results at two GPU counts at least, and there are {have}")
    groups = sorted({p.group for p in points}, key=group_order)
    level = level or (STORED if STORED in groups else groups[-1])
    u = np.array([math.log2(p.gpus) for p in points])
    y = np.array([math.log(p.minutes) for p in points])
    center = float(u.mean())
    degree = 2 if len(scales) >= MIN_SCALES_FOR_CURVATURE else 1
    columns = [np.ones_like(u)] + [(u - center) ** d for d in range(1, degree + 1)]
    columns += [np.array([1.0 if p.group == g else 0.0 for p in points]) for g in groups]
    design = np.column_stack(columns)
    ridge = np.zeros((len(groups), design.shape[1]))
    for i in range(len(groups)):
        ridge[i, 1 + degree + i] = SHRINK
    solution, *_ = np.linalg.lstsq(np.vstack([design, ridge]),
                                   np.concatenate([y, np.zeros(len(groups))]), rcond=None)
    beta = [float(b) for b in solution]
    coef = (beta[0], beta[1], beta[2] if degree == 2 else 0.0)
    offsets = {g: beta[1 + degree + i] for i, g in enumerate(groups)}
    return Fit(points=tuple(points), center=center, coef=coef, offsets=offsets, level=level,
               low=scales[0], high=scales[-1])


def vertex(fit: Fit) -> float | None:
    """log2 GPUs where the parabola turns, brought into the measured range (None for a line):
    the curve holds its value there on the side where it would rise, so more GPUs never take
    longer."""
    a1, a2 = fit.coef[1], fit.coef[2]
    if a2 == 0.0:
        return None
    return min(max(fit.center - a1 / (2.0 * a2), math.log2(fit.low)), math.log2(fit.high))


def _clamped(fit: Fit, u: float) -> float:
    """u, held at the vertex on the side where the parabola rises (after it when it opens
    upwards, before it when it opens downwards)."""
    turn = vertex(fit)
    if turn is None:
        return u
    return min(u, turn) if fit.coef[2] > 0 else max(u, turn)
