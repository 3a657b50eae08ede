""""Lost" has one definition: goodput's lost work (goodput.run), the seconds of training a failed
attempt did past what it kept. The report's attempt history and spot section format that figure,
as `run` and `goodput` print it; the store's own `lost_seconds` (the step times past the kept
step) is only one of goodput's inputs, never shown as "lost" beside it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from orchestrator.goodput.run import breakdown, lost_work_by_attempt, read_log
from orchestrator.store.schema import AttemptRow, RunRow


def lost_work(runs: Sequence[RunRow], attempts: Sequence[AttemptRow],
              run_ids: Collection[str]) -> dict[tuple[str, int], float]:
    """{(run, attempt): lost work in seconds} of every failed attempt of the runs `run_ids`, from
    the same rows and fetched logs `azbench goodput RUN` reads (goodput.run.run_goodput)."""
    by_run: dict[str, list[AttemptRow]] = {}
    for a in attempts:
        by_run.setdefault(a.run_id, []).append(a)
    out: dict[tuple[str, int], float] = {}
    for run in runs:
        tries = by_run.get(run.id)
        if run.id not in run_ids or not tries:
            continue
        g = breakdown(run, tries, {a.attempt: read_log(run.id, a.attempt) for a in tries}, None)
        out.update({(run.id, n): seconds for n, seconds in lost_work_by_attempt(g).items()})
    return out
