"""History: every baseline metric over time (one point per pipeline run or import), as data.

The report floor cannot import pipelines/, so the history arrives built: pipelines.history
collects the points and runs `compare` against the active baseline, then hands this typed value
to the site (orchestrator.report.site), which draws the band and marks the regressions.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from orchestrator import formats
from orchestrator.models import Frozen
from orchestrator.report.gpus import match_gpu

# Fewer points than this is no trend: such a series is a table row, not a chart.
MIN_CHART_POINTS = 3


class HistoryPoint(Frozen):
    """One occasion's value of one metric at one scale, and its verdict against the baseline."""

    when: datetime
    occasion: str = Field(description="'pipeline run <sweep id>' or 'import <date>'")
    value: float = Field(description="the metric's figure (results.definitions): the MLPerf "
                                     "score for time to train, the median step for step time")
    samples: list[float] = Field(default_factory=list)
    verdict: str | None = Field(None, description="compare's verdict; None without a baseline")
    change: float | None = Field(None, description="(value - baseline mean) / baseline mean")
    confidence: float | None = None
    partial: str | None = Field(None, description="set when the occasion has fewer runs than a "
                                "score needs: `value` is their mean (runs), not a time to train")


class HistorySeries(Frozen):
    benchmark: str
    sku: str | None = None
    nodes: int
    gpus: int | None = Field(None, description="GPUs at this scale (the results' own count)")
    metric: str
    metric_label: str
    better: str = Field(description="'lower' or 'higher'")
    baseline: str | None = None
    baseline_mean: float | None = Field(None, description="the baseline's figure of the metric")
    band: tuple[float, float] | None = Field(None, description="baseline mean -/+ max_change")
    max_change: float = 0.0
    points: list[HistoryPoint] = Field(default_factory=list)

    @property
    def label(self) -> str:
        """"llama31_405b · GB200 · 512 GPUs (128 nodes)": the benchmark, the GPU type as a
        reader names it (report.gpus) and the scale (formats.scale)."""
        return f"{self.benchmark} · {match_gpu(self.sku).label} · {formats.scale(self.gpus, self.nodes)}"

    @property
    def charted(self) -> bool:
        """Whether the series is a chart (MIN_CHART_POINTS or more points) or table rows."""
        return len(self.points) >= MIN_CHART_POINTS

    @property
    def regressions(self) -> list[HistoryPoint]:
        return [p for p in self.points if p.verdict == "regression"]


class History(Frozen):
    baseline: str | None = Field(None, description="the active baseline the band comes from")
    since: datetime | None = None
    until: datetime | None = None
    series: list[HistorySeries] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
