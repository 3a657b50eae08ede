"""A stored result's run summary read back as its model: the RunSummary JSON a ResultRow keeps,
validated into `RunSummary` (readers use attributes, so a renamed field fails the type check
instead of blanking a chart), and the step times that count (without the first step and the
first step after each eval, §10.4).

Shared by the report (step-time statistics, the site's charts) and the pipelines' baselines (per-run median
step time), so that both read a summary the same way.
"""

from __future__ import annotations

import functools

from pydantic import ValidationError

from orchestrator.results.mllog import RunSummary
from orchestrator.store.schema import ResultRow

EMPTY = RunSummary()


def summary_of(row: ResultRow) -> RunSummary:
    """The stored RunSummary (an empty one when absent or unreadable: every field its default)."""
    return _parsed(row.summary_json) if row.summary_json else EMPTY


@functools.lru_cache(maxsize=512)  # a report reads each row's summary several times (charts, stats)
def _parsed(text: str) -> RunSummary:
    try:
        return RunSummary.model_validate_json(text)
    except ValidationError:
        return EMPTY


def kept_step_times(summary: RunSummary) -> list[float]:
    """Step seconds without the first step and the first step after each eval (§10.4).

    Whole block durations (step_time_source "block": no per-step key and no samples count) are
    not step times: none are kept, and the report says why. Throughput windows (each a mean over
    many steps, "tracked_throughput") are all kept."""
    if summary.step_time_source == "block":
        return []
    if summary.step_time_source == "tracked_throughput":  # window means: no first step to drop
        return [float(t.seconds) for t in summary.step_times]
    after_eval = set(summary.eval_steps)
    return [float(t.seconds) for pos, t in enumerate(summary.step_times) if pos > 0 and t.step not in after_eval]
