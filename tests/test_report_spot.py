"""The report's spot section: preemptions, lost work and the cost saved against pay-as-you-go."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from orchestrator.hardware.catalog import SPOT_PRICE_FRACTION, lookup
from orchestrator.report.build import build_report
from orchestrator.report.render import to_json, to_markdown
from orchestrator.store.database import AttemptRow, RunRow

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
H100 = "Standard_ND96isr_H100_v5"


def attempt(run: str, n: int, minutes: float, failure: str | None = None, lost: int | None = None,
            lost_s: float | None = None) -> AttemptRow:
    start = T0 + timedelta(hours=n)
    return AttemptRow(run_id=run, attempt=n, state="failed" if failure else "succeeded",
                      failure_class=failure, started_at=start, ended_at=start + timedelta(minutes=minutes),
                      lost_steps=lost, lost_seconds=lost_s)


def test_spot_section_counts_preemptions_lost_work_and_saving():
    runs = [RunRow(id="r1", cluster="spotty", recipe="smoke", benchmark="smoke", nodes=2, state="succeeded"),
            RunRow(id="r2", cluster="regular", recipe="smoke", benchmark="smoke", nodes=1, state="succeeded"),
            RunRow(id="r3", cluster="local", recipe="smoke", benchmark="smoke", nodes=2, state="succeeded")]
    attempts = [attempt("r1", 1, 30, "preempted", 1, 2.5), attempt("r1", 2, 30, "preempted", 0, 0.0),
                attempt("r1", 3, 60), attempt("r2", 1, 60),
                attempt("r3", 1, 6, "preempted", 1, 0.4), attempt("r3", 2, 6)]
    rep = build_report([], runs, attempts, spot_clusters={"spotty": H100})
    by_run = {x.run_id: x for x in rep.preemptions}
    assert sorted(by_run) == ["r1", "r3"]  # r2: not spot, never preempted
    r1 = by_run["r1"]
    # lost work is goodput's (report.lost): with no fetched log it saw no training to lose, so
    # 0 s, not the store's 2.5 s (tests/test_report_lost.py compares the two with logs)
    assert (r1.attempts, r1.preemptions, r1.lost_steps, r1.lost_seconds, r1.node_hours) == (3, 2, 1, 0.0, 4.0)
    payg = lookup(H100).price_per_hour_usd
    spot = round(payg * SPOT_PRICE_FRACTION, 2)
    assert r1.cost_payg_usd == round(4 * payg, 2) and r1.cost_spot_usd == round(4 * spot, 2)
    assert r1.saved_usd == round(4 * (payg - spot), 2) and r1.saved_usd > 0
    r3 = by_run["r3"]
    assert r3.spot is False and r3.preemptions == 1 and r3.saved_usd is None  # local: no price
    md = to_markdown(rep)
    assert "Spot preemptions and cost saved" in md and f"{SPOT_PRICE_FRACTION:.0%}" in md
    assert f"{r1.saved_usd:,.2f}" in md
    assert '"preemptions": 2' in to_json(rep)


def test_no_spot_section_without_spot_runs_or_preemptions():
    runs = [RunRow(id="r2", cluster="regular", recipe="smoke", benchmark="smoke", nodes=1, state="succeeded")]
    rep = build_report([], runs, [attempt("r2", 1, 60)])
    assert rep.preemptions == [] and "Spot preemptions" not in to_markdown(rep)
