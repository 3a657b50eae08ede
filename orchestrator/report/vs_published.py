"""A stored score beside the published record: the nearest published MLPerf result for the same
benchmark and GPU (results.published), with the delta and the configuration that produced it.

The neighbour follows results.published.nearest: closed division, the same GPU count when
published, else the count closest in log space; ties go to the newest round, then the fastest
score. A stored result that is itself a published one (an imported submission) is never its own
neighbour: its row of the vendored table is kept apart as `published_score_minutes`, the score
MLCommons published for it, so the report can show that azbench's headline score equals it.
"""

from __future__ import annotations

from pydantic import Field

from orchestrator import formats
from orchestrator.models import Frozen
from orchestrator.results.published import (
    PublishedResult,
    canonical_benchmark,
    closest,
    load_published,
    series,
)


class PublishedNeighbour(Frozen):
    """The published result nearest to a stored score, and how the stored score compares."""

    round: str
    submitter: str
    system: str
    division: str
    accelerator: str
    gpus: int
    score_minutes: float = Field(description="the published score (olympic mean x scaling)")
    same_gpus: bool = Field(description="published at the stored score's GPU count")
    delta: float | None = Field(None, description="stored score / published score - 1 "
                                                  "(+: the stored score is slower)")

    @property
    def config(self) -> str:
        """'v5.1 NVIDIA tyche_ngpu512_ngc25.09_nemo (512 GPUs)'."""
        return f"{self.round} {self.submitter} {self.system} ({formats.count(self.gpus)} GPUs)"


def candidates(benchmark: str, gpu_alias: str | None, accelerator: str | None,
               division: str | None = "closed") -> list[PublishedResult]:
    """Published results of `benchmark` on the same GPU: by catalog alias (every spelling of an
    H100 SXM) when the GPU has one, else by the exact accelerator name (a GB300 result matches
    GB300 results)."""
    if gpu_alias:
        return series(benchmark, gpu_alias, division)
    bench = canonical_benchmark(benchmark)
    return [r for r in load_published() if accelerator and r.accelerator == accelerator
            and r.benchmark_key == bench and (division is None or r.division == division)]


def published_row(benchmark: str, gpu_alias: str | None, accelerator: str | None,
                  round_name: str | None, submitter: str | None,
                  system: str | None) -> PublishedResult | None:
    """The vendored table's row for this very result (same round, submitter folder, system
    folder and benchmark), when the stored result is a published one."""
    if not (round_name and submitter and system):
        return None
    return next((r for r in candidates(benchmark, gpu_alias, accelerator, division=None)
                 if r.round == round_name and r.org == submitter and r.system == system), None)


def neighbour(benchmark: str, gpu_alias: str | None, accelerator: str | None, gpus: int | None,
              score: float | None, itself: PublishedResult | None = None
              ) -> PublishedNeighbour | None:
    """The nearest published closed-division result on the same GPU, leaving `itself` out; None
    without a GPU, a GPU count, or any published result."""
    if not gpus:
        return None
    best = closest([r for r in candidates(benchmark, gpu_alias, accelerator) if r != itself], gpus)
    if best is None:
        return None
    delta = score / best.score_minutes - 1 if score is not None and best.score_minutes else None
    return PublishedNeighbour(
        round=best.round, submitter=best.submitter, system=best.system, division=best.division,
        accelerator=best.accelerator, gpus=best.accelerators, score_minutes=best.score_minutes,
        same_gpus=best.accelerators == gpus, delta=delta)
