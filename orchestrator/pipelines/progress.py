"""What a running pipeline has done so far: its stages, clusters, runs and why it stopped.

`Progress` is written by orchestrator.pipelines.pipeline as the stages run, and read by
orchestrator.pipelines.results to build the summary; every stage is also an event in the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from orchestrator.errors import AzbenchError
from orchestrator.models import utcnow
from orchestrator.pipelines.spec import PipelineSpec
from orchestrator.store.events import StageRecord  # the stage's record is its event's data
from orchestrator.store.schema import EventRow

if TYPE_CHECKING:
    from orchestrator.store.database import Store


class PipelineInterrupted(BaseException):
    """SIGINT/SIGTERM/SIGHUP arrived: unwinds like KeyboardInterrupt so teardown runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass
class Progress:
    """What the pipeline has done so far; teardown and the summary read it."""

    spec: PipelineSpec
    store: Store
    on_line: Callable[[str], None] | None
    started: datetime = field(default_factory=utcnow)
    stages: list[StageRecord] = field(default_factory=list)
    clusters: dict[str, str] = field(default_factory=dict)
    skus: dict[str, str | None] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)
    sweeps: list[str] = field(default_factory=list)
    goodput: dict[str, str] = field(default_factory=dict)  # cluster -> its one-line goodput, once down
    stop: AzbenchError | None = None
    signum: int | None = None
    quiet: bool = False  # teardown running: signals are noted, never raised

    def line(self, text: str) -> None:
        if self.on_line:
            self.on_line(text)

    @contextmanager
    def stage(self, name: str, cluster: str | None = None) -> Iterator[StageRecord]:
        rec = StageRecord(stage=name, cluster=cluster)
        self.stages.append(rec)
        self.line(f"[{self.spec.name}] {name}{f' {cluster}' if cluster else ''}: started")
        t0 = time.monotonic()
        try:
            yield rec
        except PipelineInterrupted:
            rec.status = "interrupted"
            raise
        except AzbenchError as exc:
            rec.status, rec.message = "failed", str(exc)
            raise
        finally:
            rec.seconds = round(time.monotonic() - t0, 3)
            self.line(f"[{self.spec.name}] {name}{f' {cluster}' if cluster else ''}: {rec.status}"
                      f"{f' ({rec.message})' if rec.message else ''} in {rec.seconds:.1f}s")
            self._event(rec)

    def _event(self, rec: StageRecord) -> None:
        try:
            self.store.add_event(EventRow(kind="pipeline", cluster=rec.cluster,
                                          message=f"{self.spec.name} {rec.stage}: {rec.status}",
                                          data=rec))
        except AzbenchError:
            pass  # history is best effort; teardown must not depend on it
