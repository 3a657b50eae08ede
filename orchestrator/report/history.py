"""History: every baseline metric over time (one point per pipeline run or import), as data.

The report floor cannot import pipelines/, so the history arrives built: pipelines.history
collects the points and runs `compare` against the active baseline, then hands this typed value
to the site (orchestrator.report.site), which draws the band and marks the regressions.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from orchestrator.hardware.catalog import bare_name
from orchestrator.models import Frozen


class HistoryPoint(Frozen):
    """One occasion's value of one metric at one scale, and its verdict against the baseline."""

    when: datetime
    occasion: str = Field(description="'pipeline run <sweep id>' or 'import <date>'")
    value: float = Field(description="mean of the samples")
    samples: list[float] = Field(default_factory=list)
    verdict: str | None = Field(None, description="compare's verdict; None without a baseline")
    change: float | None = Field(None, description="(value - baseline mean) / baseline mean")
    confidence: float | None = None


class HistorySeries(Frozen):
    benchmark: str
    sku: str | None = None
    nodes: int
    metric: str
    metric_label: str
    better: str = Field(description="'lower' or 'higher'")
    baseline: str | None = None
    baseline_mean: float | None = None
    band: tuple[float, float] | None = Field(None, description="baseline mean -/+ max_change")
    max_change: float = 0.0
    points: list[HistoryPoint] = Field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.benchmark} {self.nodes}x{bare_name(self.sku or '?')}"

    @property
    def regressions(self) -> list[HistoryPoint]:
        return [p for p in self.points if p.verdict == "regression"]


class History(Frozen):
    baseline: str | None = Field(None, description="the active baseline the band comes from")
    since: datetime | None = None
    until: datetime | None = None
    series: list[HistorySeries] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
