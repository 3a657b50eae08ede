"""Forecast: predicted time-to-train and cost at any scale, before anyone pays for a run.

Owns: the points a prediction stands on (published MLPerf Training results from the vendored
table, and the user's stored results, which set the level and are marked: points), the model
(time against GPU count on log-log, a straight line or a parabola, one level per round:
model), its honest interval and the leave-one-out check against the published record (loo),
the planner's table over node counts with cost, quota, a target time and a budget (plan), and
the curve a report page embeds (curve). Pure: returns data and raises ConfigError; the CLI prints.
May import: the base, explain/, hardware/, recipes/, results/ and store/ (the ResultRow type only).
Exposes: points.series_points, model.fit_points, loo.leave_one_out/validate_series/summarize,
plan.make_plan, curve.benchmark_curve/benchmark_curves.
"""
