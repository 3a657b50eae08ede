"""An import's progress: how far each stage is (ImportProgress), told at each stage and at most
every 50 ms, with an estimate of the time left from the rate of the stage under way."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ImportProgress:
    """Where an import stands, for a progress line: logs found, read (hashed), skipped as
    already stored, parsed, compliance-checked and stored; the stage it is in; seconds so far
    and the estimated seconds left (None until there is a rate to go by)."""

    stage: Literal["read", "parse", "check", "store", "done"]
    found: int
    read: int = 0
    skipped: int = 0
    parsed: int = 0
    to_check: int = 0
    checked: int = 0
    stored: int = 0
    elapsed_s: float = 0.0
    left_s: float | None = None


ProgressFn = Callable[[ImportProgress], None]


class Meter:
    """Counts an import's steps and tells `progress` (at each stage and at most every 50 ms:
    10,000 logs make 30,000 steps), with an estimate of the time left."""

    EVERY_S = 0.05

    def __init__(self, progress: ProgressFn | None) -> None:
        self._progress = progress
        self._start = time.monotonic()
        self._check_start = 0.0
        self._told = 0.0
        self.work_total = self.work_done = 0  # MLLOG lines to check, and checked: the ETA's unit
        self.stage = "read"
        self.counts = dict.fromkeys(("found", "read", "skipped", "parsed", "to_check", "checked",
                                     "stored"), 0)

    def step(self, stage: str | None = None, **counts: int) -> None:
        """Add `counts`, enter `stage` if given, and tell `progress` (always on a new stage)."""
        for key, n in counts.items():
            self.counts[key] += n
        now = time.monotonic()
        if stage is not None:
            self.stage = stage
            if stage == "check":
                self._check_start = now
        elif now - self._told < self.EVERY_S:
            return
        if self._progress is not None:
            self._told = now
            self._progress(self.snapshot(now))

    def snapshot(self, now: float) -> ImportProgress:
        """Where the import stands at `now` (time.monotonic())."""
        return ImportProgress(stage=self.stage, elapsed_s=now - self._start,  # type: ignore[arg-type]
                              left_s=self._left(now), **self.counts)

    def _left(self, now: float) -> float | None:
        """Seconds left, from the rate of the stage under way (checking dominates)."""
        read, found = self.counts["read"], self.counts["found"]
        if self.stage == "read" and read:
            return (now - self._start) / read * (found - read)
        if self.stage == "check" and self.work_done:  # by lines: a 12,000-line log is not a 300
            return (now - self._check_start) / self.work_done * (self.work_total - self.work_done)
        return 0.0 if self.stage == "done" else None
