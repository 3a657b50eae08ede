"""Forward in time: fit on the rounds before R, predict round R. What a planner faces when the
next round's software arrives, which leave-one-out (loo) never asks: there every held-out count
is predicted at the level of a round the fit has seen.

A forward case is one point of round R of a series, predicted by the fit of that series' points
from earlier rounds only (two GPU counts at least), at the level of its newest earlier round,
with the leave-one-out half-width sized from earlier rounds only (the series' own errors and a
pool of other series' errors, both before R).

The new-round term: a new round moves a series' whole level (software gets faster, most of all in
a GPU's first rounds), an error that every point of the round shares and that leave-one-out
cannot see. The interval of a prediction at a published round's level is `sqrt(h² + r²)` in ln
units, `h` the leave-one-out half-width and `r` the COVERAGE quantile of the level shifts seen so
far: per (series, round) of the forward cases, |mean ln(predicted / measured)|, each shift
weighted once. `validate_forward` sizes `r` for round R from the shifts of earlier rounds only;
the planner (`record.round_term`) from every shift in the record.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.forecast.loo import COVERAGE, MIN_SCALES, Held, Residual, half_width, leave_one_out
from orchestrator.forecast.model import fit_points
from orchestrator.forecast.points import SeriesPoints, group_order


@dataclass(frozen=True)
class ForwardCase:
    """One point of `round` predicted from the series' earlier rounds: `log_error` is
    ln(predicted / measured), `within` the leave-one-out half-width (ln) at its distance."""

    series: str
    round: str
    gpus: int
    label: str
    measured: float
    log_error: float
    within: float
    extrapolation: float


def combined(within: float, new_round: float) -> float:
    """The half-width (ln) of a prediction for a new round: the two terms added. A new round
    moves a whole series at once (a new precision, a new software stack: v5.1's GB200 405B is
    FP4, its v5.0 FP8), so its shift is not an error independent of the curve's, and adding
    them in quadrature called v5.1's LoRA and 405B on GB200 certain (forward coverage 68 %)."""
    return within + new_round


def forward_cases(series: Sequence[SeriesPoints]) -> list[ForwardCase]:
    """Every point of every round R of every series that has two GPU counts in earlier rounds,
    predicted from those rounds only (its interval's pool too)."""
    pools: dict[str, list[tuple[tuple[str, str], list[Residual]]]] = {}
    cases: list[ForwardCase] = []
    for s in series:
        rounds = sorted({p.group for p in s.points}, key=group_order)
        for target in rounds[1:]:
            before = [p for p in s.points if group_order(p.group) < group_order(target)]
            if len({p.gpus for p in before}) < 2:
                continue
            fit = fit_points(before)
            if target not in pools:
                pools[target] = _pool_before(series, target)
            pool = [r for key, rs in pools[target] if key != (s.benchmark, s.gpu) for r in rs]
            own = leave_one_out(before)
            if not own and not pool:
                continue
            for p in s.points:
                if p.group != target:
                    continue
                cases.append(ForwardCase(
                    series=f"{s.benchmark}/{s.gpu}", round=target, gpus=p.gpus, label=p.label,
                    measured=p.minutes, log_error=fit.log_minutes(p.gpus) - math.log(p.minutes),
                    within=half_width(own, pool, fit.distance(p.gpus)),
                    extrapolation=fit.extrapolation(p.gpus)))
    return cases


def level_shifts(cases: Sequence[ForwardCase]) -> list[float]:
    """|mean ln(predicted / measured)| per (series, round): how far each new round moved its
    series' level, ascending."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for c in cases:
        groups[(c.series, c.round)].append(c.log_error)
    return sorted(abs(statistics.fmean(errors)) for errors in groups.values())


def round_term(cases: Sequence[ForwardCase]) -> float:
    """The new-round half-width term (ln): the COVERAGE quantile of the cases' level shifts
    (the smallest shift at least COVERAGE of them reach); 0 when there are no cases."""
    shifts = level_shifts(cases)
    if not shifts:
        return 0.0
    return shifts[min(len(shifts) - 1, max(0, math.ceil(COVERAGE * len(shifts)) - 1))]


def validate_forward(cases: Sequence[ForwardCase]) -> list[Held]:
    """Each forward case with the interval the planner would have drawn then: the leave-one-out
    half-width and a new-round term sized from the cases of earlier rounds only."""
    held: list[Held] = []
    for case in cases:
        earlier = [c for c in cases if group_order(c.round) < group_order(case.round)]
        h = combined(case.within, round_term(earlier))
        predicted = case.measured * math.exp(case.log_error)
        held.append(Held(series=case.series, gpus=case.gpus, group=case.round, label=case.label,
                         measured=case.measured, predicted=predicted, low=predicted * math.exp(-h),
                         high=predicted * math.exp(h), extrapolation=case.extrapolation))
    return held


def _pool_before(series: Sequence[SeriesPoints], target: str) -> list[tuple[tuple[str, str], list[Residual]]]:
    """Leave-one-out errors of each series restricted to rounds before `target` (those with
    MIN_SCALES GPU counts there)."""
    out = []
    for s in series:
        before = [p for p in s.points if group_order(p.group) < group_order(target)]
        if len({p.gpus for p in before}) >= MIN_SCALES:
            out.append(((s.benchmark, s.gpu), leave_one_out(before)))
    return out
