"""The forecast checked against the published record: leave-one-out over every benchmark x
catalog GPU series with three or more published GPU counts.

Each GPU count of a series is held out in turn (every round's point at that count), predicted
from the other counts, and its 80% interval built without it: from a leave-one-out over the
remaining counts and a pool of errors from the *other* series only (forecast.loo.validate_series).
Prints one JSON line per series, a baseline measured in the same run (ideal linear scaling from
the nearest measured count, T_near x N_near / N: what a planner without a model would do), the
time `azbench plan` takes, the figures over the held-out points within the planner's reach
(4x past the data; farther ones are held out too, the planner refuses them), and as its last
two lines:

    median abs error X%, worst Y%, coverage Z%
    forward median abs error X%, worst Y%, coverage Z%

(Z: the share of held-out points inside their 80% interval). The second scores forward in time
(forecast.forward): for every round R of every series, fit on the rounds before R and predict R,
its interval built as the planner builds it at a published round's level (the leave-one-out
width from earlier rounds and the new-round term from earlier rounds' level shifts), with one
line per round before the last two. The figures are kept in benchmarks/results/bench_plan.jsonl
and every held-out point in bench_plan_points.csv (forward ones with series "forward:...").
Targets (issues 33, 38): median under 15%, coverage at least 70%, forward too. Never asserts.

Usage: python benchmarks/bench_plan.py [--no-write]
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import best_of, emit, run_cmd  # noqa: E402
from orchestrator.forecast import record  # noqa: E402
from orchestrator.forecast.basis import MAX_EXTRAPOLATION  # noqa: E402
from orchestrator.forecast.forward import forward_cases, level_shifts, round_term, validate_forward  # noqa: E402
from orchestrator.forecast.points import group_order  # noqa: E402
from orchestrator.forecast.loo import Held, summarize, validate_series  # noqa: E402
from orchestrator.forecast.points import Point  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_MEDIAN = 0.15
TARGET_COVERAGE = 0.70


def main() -> None:
    write = "--no-write" not in sys.argv[1:]
    held: list[Held] = []
    records = []
    naive: list[float] = []
    for series in record.checked_series():
        name = f"{series.benchmark}/{series.gpu}"
        mine = validate_series(name, series.points, record.pool(exclude=(series.benchmark, series.gpu)))
        held += mine
        naive += _naive_errors(series.points)
        s = summarize(mine)
        records.append(emit(f"plan_loo {name}", s.median_abs_error, "abs error (median)",
                            worst=round(s.worst_abs_error, 4), coverage=round(s.coverage, 4), points=s.points,
                            scales=len(series.scales), gpus=f"{series.scales[0]}-{series.scales[-1]}"))
    total = summarize(held)
    inside = [h for h in held if h.extrapolation == 1.0]
    reach = summarize([h for h in held if h.extrapolation <= MAX_EXTRAPOLATION])
    outside = [h for h in held if h.extrapolation > 1.0]
    records.append(emit("plan_loo_naive_baseline", statistics.median(naive), "abs error (median)",
                        worst=round(max(naive), 4), points=len(naive),
                        what="ideal linear scaling from the nearest measured GPU count"))
    records.append(emit("plan_cli_s", _cli_seconds(), "s", command="azbench plan llama31_405b --sku gb200 "
                        "--target-minutes 15 --no-stored", target_s=2.0))
    records.append(emit("plan_loo", total.median_abs_error, "abs error (median)",
                        worst=round(total.worst_abs_error, 4), coverage=round(total.coverage, 4),
                        series=total.series, points=total.points,
                        coverage_inside=round(sum(h.inside for h in inside) / len(inside), 4),
                        points_inside=len(inside),
                        coverage_extrapolated=round(sum(h.inside for h in outside) / max(len(outside), 1), 4),
                        points_extrapolated=len(outside),
                        within_4x_median=round(reach.median_abs_error, 4), within_4x_worst=round(reach.worst_abs_error, 4),
                        within_4x_coverage=round(reach.coverage, 4), within_4x_points=reach.points,
                        target_median=TARGET_MEDIAN, target_coverage=TARGET_COVERAGE))
    cases = forward_cases(record.all_series())
    ahead = validate_forward(cases)
    for name in sorted({h.group for h in ahead}, key=group_order):
        mine = summarize([h for h in ahead if h.group == name])
        earlier = [c for c in cases if group_order(c.round) < group_order(name)]
        records.append(emit(f"plan_forward {name}", mine.median_abs_error, "abs error (median)",
                            worst=round(mine.worst_abs_error, 4), coverage=round(mine.coverage, 4),
                            points=mine.points, series=mine.series,
                            new_round_term_ln=round(round_term(earlier), 4)))
    forward = summarize(ahead)
    records.append(emit("plan_forward", forward.median_abs_error, "abs error (median)",
                        worst=round(forward.worst_abs_error, 4), coverage=round(forward.coverage, 4),
                        series=forward.series, points=forward.points,
                        planner_new_round_term_ln=round(round_term(cases), 4),
                        level_shifts=len(level_shifts(cases)),
                        target_median=TARGET_MEDIAN, target_coverage=TARGET_COVERAGE))
    if write:
        _keep(records, held + [h.model_copy(update={"series": f"forward:{h.series}"}) for h in ahead])
    sys.stdout.write(total.line() + "\n")
    sys.stdout.write("forward " + forward.line() + "\n")


def _naive_errors(points: list[Point]) -> list[float]:
    """|error| of ideal linear scaling from the nearest other measured count (in log distance;
    the newest round's point there), for the same held-out points."""
    out = []
    for p in points:
        others = [q for q in points if q.gpus != p.gpus]
        if len({q.gpus for q in others}) < 2:
            continue
        near = min(others, key=lambda q: (abs(math.log(q.gpus / p.gpus)), [-int(x) for x in
                                                                          q.group.lstrip("v").split(".")
                                                                          if x.isdigit()]))
        out.append(abs(near.minutes * near.gpus / p.gpus / p.minutes - 1.0))
    return out


def _cli_seconds() -> float:
    with tempfile.TemporaryDirectory(prefix="azbench-bench-plan-") as tmp:
        import os
        env = {**os.environ, "AZBENCH_HOME": tmp}
        env.pop("AZBENCH_DB_URL", None)
        best, _ = best_of(run_cmd([sys.executable, "-m", "orchestrator", "plan", "llama31_405b", "--sku", "gb200",
                                   "--target-minutes", "15", "--no-stored"], env), 3)
    return best


def _keep(records: list[dict[str, object]], held: list[Held]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_plan.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with (RESULTS / "bench_plan_points.csv").open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["series", "gpus", "round", "point", "measured_min", "predicted_min", "low_min",
                      "high_min", "error", "inside", "extrapolation"])
        for h in held:
            out.writerow([h.series, h.gpus, h.group, h.label, f"{h.measured:.4f}", f"{h.predicted:.4f}",
                          f"{h.low:.4f}", f"{h.high:.4f}", f"{h.error:+.4f}", int(h.inside),
                          f"{h.extrapolation:.3f}"])


if __name__ == "__main__":
    main()
