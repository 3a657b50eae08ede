"""Robust outlier statistics for the health gate: median/MAD z-scores, and the confirmation rule.

A fixed fraction of the median ("25 % below is slow") drains a healthy node whenever the fleet's
own spread is wider than that fraction (a busy machine, a noisy neighbour), and misses a slow
node when the spread is narrow. The gate instead scores each node against the spread the fleet
shows in the same measurement:

    sigma = max(1.4826 * MAD, sigma_floor * |median|)      z = (value - median) / sigma

1.4826 * MAD estimates the standard deviation of normal data while ignoring up to half the sample
as outliers (Rousseeuw & Croux, "Alternatives to the Median Absolute Deviation", JASA 1993; the
same "robust variant: median and MAD" that Azure's fleet runbook recommends,
github.com/Azure/ai-infrastructure-on-azure skills/ai-infra/references/outlier_detection.md).
`sigma_floor` keeps a fleet of identical values (MAD 0) from turning a 1 % difference into an
infinite z. A node is a *suspect* when z < -z_limit AND it is worse than the median by at least
`min_effect` (a practical-significance floor: a statistically clear 3 % dip on a quiet machine is
not a broken node). A node worse than the median by `gross_effect` (half speed) or more is a
suspect whatever the spread: when the fleet's noise is so wide that half speed sits within
z_limit sigmas, the z score can no longer rank nodes, while the confirmation below still guards
against a one-off. z_limit defaults to 4.0, stricter than the runbook's -3.0 "drain" line
because one gate scores up to thousands of nodes: at 2,048 nodes a -3 cut would pick ~3 healthy
nodes per gate under normal noise, -4 about 0.06.

A suspect is drained only when *confirmed*: it is probed again (`confirm_probes` times) together
with `controls` healthy reference nodes in the same job step, and it must be an outlier in every
probe, judged against the controls' median of that same probe (so a burst of load that slows
everything during the re-probe slows the reference too and clears the suspect). Pure.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Mapping, Sequence

MAD_SCALE = 1.4826  # 1 / Phi^-1(3/4): MAD -> standard deviation for normal data


@dataclass(frozen=True)
class OutlierRule:
    """When a value is an outlier (lower is worse unless `higher_is_better` is False)."""

    z_limit: float = 4.0
    min_effect: float = 0.15
    gross_effect: float = 0.5
    sigma_floor: float = 0.02
    higher_is_better: bool = True
    confirm_probes: int = 2
    controls: int = 8

    def __post_init__(self) -> None:
        if not self.z_limit > 0:
            raise ValueError(f"z_limit must be positive, got {self.z_limit}")
        if not 0 <= self.min_effect < 1:
            raise ValueError(f"min_effect must be a fraction in [0, 1), got {self.min_effect}")
        if not self.min_effect <= self.gross_effect <= 1:
            raise ValueError(f"gross_effect must be a fraction in [min_effect, 1], got {self.gross_effect}")
        if not self.sigma_floor > 0:
            raise ValueError(f"sigma_floor must be positive, got {self.sigma_floor}")


@dataclass(frozen=True)
class Center:
    """A sample's robust center and spread."""

    median: float
    sigma: float
    n: int

    @property
    def relative_sigma(self) -> float:
        return self.sigma / abs(self.median) if self.median else math.inf


@dataclass(frozen=True)
class Score:
    """One node's value against a center: its robust z and its signed deficit (-0.5: half as good)."""

    node: str
    value: float
    median: float
    sigma: float
    z: float
    effect: float


def center(values: Sequence[float], sigma_floor: float = OutlierRule.sigma_floor) -> Center | None:
    """Median and MAD-based sigma of the finite values; None when fewer than 3 (no spread known)."""
    clean = [v for v in values if math.isfinite(v)]
    if len(clean) < 3:
        return None
    med = statistics.median(clean)
    mad = statistics.median(abs(v - med) for v in clean)
    return Center(med, max(MAD_SCALE * mad, sigma_floor * abs(med)), len(clean))


def score(node: str, value: float, c: Center, rule: OutlierRule) -> Score:
    """`value` scored so that worse is negative, whatever the direction of the quantity."""
    sign = 1.0 if rule.higher_is_better else -1.0
    z = sign * (value - c.median) / c.sigma
    effect = sign * (value / c.median - 1) if c.median else 0.0
    return Score(node, value, c.median, c.sigma, z, effect)


def is_outlier(s: Score, rule: OutlierRule) -> bool:
    """Worse than the center by at least min_effect and either by more than z_limit sigmas or by
    gross_effect or more (NaN: no)."""
    return s.effect <= -rule.min_effect and (s.z < -rule.z_limit or s.effect <= -rule.gross_effect)


def suspects(values: Mapping[str, float], rule: OutlierRule = OutlierRule()) -> tuple[list[Score], Center | None]:
    """The outliers of one measurement over the fleet, worst first, and the fleet's center."""
    c = center(list(values.values()), rule.sigma_floor)
    if c is None:
        return [], None
    found = [s for n, v in values.items() if math.isfinite(v)
             for s in [score(n, v, c, rule)] if is_outlier(s, rule)]
    return sorted(found, key=lambda s: s.z), c


def controls(values: Mapping[str, float], exclude: Sequence[str], count: int) -> list[str]:
    """The `count` nodes closest to the median (never an excluded one): the reference the
    confirmation probe measures beside the suspects."""
    c = center(list(values.values()))
    if c is None or count <= 0:
        return []
    skip = set(exclude)
    ranked = sorted((n for n, v in values.items() if n not in skip and math.isfinite(v)),
                    key=lambda n: (abs(values[n] - c.median), n))
    return ranked[:count]


def confirmed(first: Score, fleet: Center, again: Sequence[Mapping[str, float]], node: str,
              reference: Sequence[str], rule: OutlierRule) -> tuple[bool, list[Score]]:
    """Whether `node` stays an outlier in every re-probe in `again`, each judged against that
    probe's reference median with the fleet's relative spread. A re-probe where the node or
    every reference is silent does not confirm (nothing measured)."""
    scores = [first]
    for probe in again:
        value = probe.get(node, math.nan)
        ref = [probe[r] for r in reference if r in probe and math.isfinite(probe[r])]
        if not math.isfinite(value) or not ref:
            return False, scores
        med = statistics.median(ref)
        c = Center(med, max(fleet.relative_sigma * abs(med), rule.sigma_floor * abs(med)), len(ref))
        s = score(node, value, c, rule)
        scores.append(s)
        if not is_outlier(s, rule):
            return False, scores
    return True, scores
