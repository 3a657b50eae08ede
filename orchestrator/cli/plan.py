"""`azbench plan BENCHMARK --sku S`: predicted time-to-train, cost and quota over node counts
(forecast.plan), before anyone pays for a run.

The command builds one `forecast.plan.ForecastPlan` (a pydantic model) and renders it: `-o json`
(`--json`), `-o tsv` and `--query` go through the CLI's shared output helper over the model's
JSON form; the table's columns and cells come from `forecast.render.plan_table(plan)`.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from orchestrator.cli.common import (
    JsonOpt,
    OutputFormat,
    OutputOpt,
    QueryOpt,
    app,
    check_number,
    make_console,
    make_table,
    open_store,
    output,
)


@app.command()
def plan(
    benchmark: str = typer.Argument(..., help="MLPerf benchmark key, e.g. llama31_405b, gpt3, bert."),
    sku: str = typer.Option(..., "--sku", help="VM size or alias: h100, h200, gb200."),
    nodes: Optional[str] = typer.Option(None, "--nodes", help="Node counts, comma-separated (default: the "
                                        "recipe's scales and a ladder of powers of two; GB200 in racks)."),
    target_minutes: Optional[float] = typer.Option(None, "--target-minutes", help="Mark the cheapest count "
                                                   "predicted to train within M minutes."),
    budget: Optional[float] = typer.Option(None, "--budget", help="Mark the fastest count whose predicted "
                                           "cost per result is within USD."),
    extrapolate: bool = typer.Option(False, "--extrapolate", help="Allow predictions more than 4x past the "
                                     "measured GPU counts."),
    no_stored: bool = typer.Option(False, "--no-stored", help="Ignore stored results: published ones only."),
    as_json: bool = JsonOpt,
    fmt: Optional[OutputFormat] = OutputOpt,
    query: Optional[str] = QueryOpt,
) -> None:
    """Predicted time-to-train (with an 80% interval), cost per result, cost per hour,
    strong-scaling efficiency and quota, per node count, from published MLPerf results and your
    stored ones. Every prediction says which points it stands on and how far it extrapolates."""
    from orchestrator.forecast.plan import PlanRequest, make_plan
    from orchestrator.forecast.points import check_benchmark, stored_keys
    from orchestrator.forecast.render import plan_lines, plan_table, plan_title
    from orchestrator.specs.run import parse_node_list
    out = output(as_json, fmt, query)
    check_number("--target-minutes", target_minutes, 1e-3, 1e7)
    check_number("--budget", budget, 1e-2, 1e12)
    counts = tuple(parse_node_list(nodes)) if nodes is not None else None
    bench = check_benchmark(benchmark)
    stored = []
    if not no_stored:
        with open_store() as store:
            stored = [r for key in stored_keys(bench) for r in store.list_results(benchmark=key)]
    result = make_plan(PlanRequest(benchmark=bench, sku=sku, nodes=counts, target_minutes=target_minutes,
                                   budget_usd=budget, extrapolate=extrapolate, stored=tuple(stored)))
    if not out.rich:
        return out.emit(result)
    columns, rows = plan_table(result)
    console = make_console()
    console.print(make_table(plan_title(result), columns, rows))
    console.file.flush()
    sys.stdout.write("".join(f"{line}\n" for line in plan_lines(result)))
