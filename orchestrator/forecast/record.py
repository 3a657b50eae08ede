"""The published record as the forecast sees it: every benchmark x catalog GPU series, and the
pool of leave-one-out errors over those with MIN_SCALES measured GPU counts or more.

The pool sizes every interval (loo.half_width): a prediction for one series borrows the typical
error of the method on all the others. Computed once per process from the vendored table.
"""

from __future__ import annotations

from functools import lru_cache

from orchestrator.forecast.forward import forward_cases
from orchestrator.forecast.forward import round_term as _round_term
from orchestrator.forecast.loo import MIN_SCALES, Residual, leave_one_out
from orchestrator.forecast.points import SeriesPoints, series_points
from orchestrator.results.published import load_published



def all_series() -> list[SeriesPoints]:
    """Every published benchmark x catalog GPU series (closed, available, tuned; see points)."""
    return list(_series())


def checked_series() -> list[SeriesPoints]:
    """The series with MIN_SCALES or more measured GPU counts: those the benchmark checks."""
    return [s for s in _series() if len(s.scales) >= MIN_SCALES]


def pool(exclude: tuple[str, str] | None = None) -> list[Residual]:
    """Leave-one-out errors of every checked series but `exclude` ((benchmark, gpu))."""
    return [r for key, residuals in _pool() if key != exclude for r in residuals]


def pool_size(exclude: tuple[str, str] | None = None) -> tuple[int, int]:
    """(series, errors) in the pool without `exclude`."""
    kept = [residuals for key, residuals in _pool() if key != exclude]
    return len(kept), sum(len(r) for r in kept)


@lru_cache(maxsize=1)
def round_term() -> float:
    """The new-round term (ln) of every interval at a published round's level, from every
    forward case of the record (forecast.forward)."""
    return _round_term(forward_cases(all_series()))


@lru_cache(maxsize=1)
def _series() -> tuple[SeriesPoints, ...]:
    keys = sorted({(r.benchmark_key, r.gpu) for r in load_published() if r.gpu})
    found = (series_points(bench, gpu) for bench, gpu in keys if gpu is not None)
    return tuple(s for s in found if s.points)


@lru_cache(maxsize=1)
def _pool() -> tuple[tuple[tuple[str, str], tuple[Residual, ...]], ...]:
    return tuple(((s.benchmark, s.gpu), tuple(leave_one_out(s.points))) for s in checked_series())
