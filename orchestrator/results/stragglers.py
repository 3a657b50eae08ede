"""Stragglers: nodes whose throughput falls below the cluster's median by more than a tolerance.

One rule serves the health gate's per-node probe (operations per second, higher is better) and a
run's per-node step times (seconds per step, lower is better): a node is slow when it is worse
than the median of all nodes by more than `tolerance` (a fraction: 0.25 = 25 %). The median, not
the mean, so a few slow nodes cannot drag the reference towards themselves. Pure.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Mapping

DEFAULT_TOLERANCE = 0.25


@dataclass(frozen=True)
class Straggler:
    node: str
    value: float
    threshold: float
    median: float

    @property
    def off_median(self) -> float:
        """How far from the median, as a signed fraction (-0.5 = half the median's throughput)."""
        return self.value / self.median - 1 if self.median else 0.0


@dataclass(frozen=True)
class Spread:
    """Per-node spread of one quantity: min, median, max and the node at the slow end."""

    nodes: int
    low: float
    median: float
    high: float
    slowest: str

    @property
    def ratio(self) -> float:
        """Slow end over median: 1.0 means no spread."""
        return self.high / self.median if self.median else math.inf


def threshold(median: float, tolerance: float, *, higher_is_better: bool) -> float:
    return median * (1 - tolerance) if higher_is_better else median * (1 + tolerance)


def find_stragglers(values: Mapping[str, float], tolerance: float = DEFAULT_TOLERANCE, *,
                    higher_is_better: bool = True) -> list[Straggler]:
    """Nodes worse than the median by more than `tolerance`, worst first. NaN values are
    ignored (the probe could not measure: the caller reports that node separately)."""
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be a fraction between 0 and 1, got {tolerance}")
    clean = {n: v for n, v in values.items() if not math.isnan(v)}
    if len(clean) < 2:
        return []
    median = statistics.median(clean.values())
    limit = threshold(median, tolerance, higher_is_better=higher_is_better)
    slow = [Straggler(n, v, limit, median) for n, v in clean.items()
            if (v < limit if higher_is_better else v > limit)]
    return sorted(slow, key=lambda s: s.value if higher_is_better else -s.value)


def spread(times: Mapping[str, float]) -> Spread | None:
    """Min/median/max of per-node times (lower is better) and the slowest node; None if empty."""
    clean = {n: v for n, v in times.items() if not math.isnan(v)}
    if not clean:
        return None
    slowest = max(clean, key=lambda n: clean[n])
    return Spread(len(clean), min(clean.values()), statistics.median(clean.values()),
                  max(clean.values()), slowest)
