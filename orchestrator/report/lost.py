""""Lost" has one definition: goodput's lost work (goodput.run), the seconds of training a failed
attempt did past what it kept. The report's attempt history and spot section format that figure,
as `run` and `goodput` print it; the store's own `lost_seconds` (the step times past the kept
step) is only one of goodput's inputs, never shown as "lost" beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.goodput.run import breakdown, lost_work_by_attempt, read_log
from orchestrator.store.schema import AttemptRow, RunRow


class LostWork:
    """{(run, attempt): lost work in seconds} of the failed attempts of `runs`, from the same rows
    and fetched logs `azbench goodput RUN` reads (goodput.run.run_goodput). A run's logs are read
    the first time one of its attempts is asked for, and once: the attempt history and the spot
    section of one report share one of these."""

    def __init__(self, runs: Sequence[RunRow], attempts: Sequence[AttemptRow]) -> None:
        self._runs = {run.id: run for run in runs}
        self._tries: dict[str, list[AttemptRow]] = {}
        for a in attempts:
            self._tries.setdefault(a.run_id, []).append(a)
        self._done: dict[str, dict[int, float]] = {}

    def of(self, run_id: str, attempt: int) -> float | None:
        """The attempt's lost work, or None when it did not fail (or the run is not known)."""
        if run_id not in self._done:
            run, tries = self._runs.get(run_id), self._tries.get(run_id)
            if run is None or not tries:
                self._done[run_id] = {}
            else:
                g = breakdown(run, tries, {a.attempt: read_log(run.id, a.attempt) for a in tries}, None)
                self._done[run_id] = lost_work_by_attempt(g)
        return self._done[run_id].get(attempt)
