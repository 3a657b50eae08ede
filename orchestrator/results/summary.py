"""A stored result's run summary read back as data: the RunSummary JSON a ResultRow keeps, and
the step times that count (without the first step and the first step after each eval, §10.4).

Shared by the report (step-time statistics, the site's charts) and the pipelines' baselines (per-run median
step time), so that both read a summary the same way.
"""

from __future__ import annotations

import json
from typing import Any

from orchestrator.store.schema import ResultRow


def summary_of(row: ResultRow) -> dict[str, Any]:
    """The stored RunSummary as plain JSON data ({} when absent or unreadable)."""
    try:
        data = json.loads(row.summary_json) if row.summary_json else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def kept_step_times(summary: dict[str, Any]) -> list[float]:
    """Step seconds without the first step and the first step after each eval (§10.4).

    Whole block durations (step_time_source "block": no per-step key and no samples count) are
    not step times: none are kept, and the report says why."""
    if summary.get("step_time_source") == "block":
        return []
    after_eval = set(summary.get("eval_steps") or [])
    return [float(sec) for pos, (step, sec) in enumerate(summary.get("step_times") or [])
            if pos > 0 and step not in after_eval]
