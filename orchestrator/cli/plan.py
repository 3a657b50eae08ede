"""`azbench plan BENCHMARK --sku S`: predicted time-to-train, cost and quota over node counts
(forecast.plan), before anyone pays for a run.

The command builds one `forecast.plan.ForecastPlan` (a pydantic model) and renders it: `-o json`
(`--json`), `-o tsv` and `--query` go through the CLI's shared output helper over the model's
JSON form; the table's columns and cells come from `forecast.render.plan_table(plan)`.
"""

from __future__ import annotations

import sys
import textwrap
from typing import Optional

import typer

from orchestrator.cli.common import (
    Col,
    JsonOpt,
    OutputFormat,
    OutputOpt,
    QueryOpt,
    app,
    check_number,
    fit_table,
    make_console,
    open_store,
    output,
)
from orchestrator.cli.common import parse_params
from orchestrator.cli.common import output_width
from orchestrator.forecast.plan import ForecastPlan, PlanRequest, make_plan
from orchestrator.forecast.points import check_benchmark, stored_keys
from orchestrator.forecast.render import plan_lines, plan_table, plan_title
from orchestrator.report.cost import parse_price
from orchestrator.specs.run import parse_node_list


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
    price: list[str] = typer.Option([], "--price", help="Override a list price: SKU=USD_PER_VM_HOUR, e.g. "
                                    "gb300=140 (repeatable), as report --price does."),
    param: list[str] = typer.Option([], "--param", "-p", help="Recipe parameter KEY=VALUE for the step "
                                    "model's config (e.g. TENSOR_MODEL_PARALLEL=8), as `run` takes it."),
    cross_domain_gbs: Optional[float] = typer.Option(None, "--cross-domain-gbs", help="The rate, GB/s per "
                                                     "GPU, a collective reaches between NVLink domains (a "
                                                     "fabric test's, or another fabric's) in place of the "
                                                     "catalog's line rate x 85% in the step model."),
    as_json: bool = JsonOpt,
    fmt: Optional[OutputFormat] = OutputOpt,
    query: Optional[str] = QueryOpt,
) -> None:
    """Predicted time-to-train (with an 80% interval), cost per result, cost per hour,
    strong-scaling efficiency and quota, per node count, from published MLPerf results and your
    stored ones. Every prediction says which points it stands on and how far it extrapolates."""
    out = output(as_json, fmt, query)
    check_number("--target-minutes", target_minutes, 1e-3, 1e7)
    check_number("--budget", budget, 1e-2, 1e12)
    check_number("--cross-domain-gbs", cross_domain_gbs, 1e-3, 1e5)
    counts = tuple(parse_node_list(nodes)) if nodes is not None else None
    bench = check_benchmark(benchmark)
    prices = dict(parse_price(p) for p in price)
    stored = []
    if not no_stored:
        with open_store() as store:
            stored = [r for key in stored_keys(bench) for r in store.list_results(benchmark=key)]
    params = tuple((k, str(v)) for k, v in parse_params(param).items())
    result = make_plan(PlanRequest(benchmark=bench, sku=sku, nodes=counts, target_minutes=target_minutes,
                                   budget_usd=budget, extrapolate=extrapolate, stored=tuple(stored),
                                   prices=prices, params=params, cross_domain_gbs=cross_domain_gbs))
    if not out.rich:
        return out.emit(result)
    _print_plan(result)


def _print_plan(result: ForecastPlan) -> None:
    """The plan's table fitted to the terminal, then its lines (what each prediction stands on)
    wrapped to the same width."""
    columns, rows = plan_table(result)
    width = _width()
    table, left_out = fit_table(plan_title(result), [_column(c) for c in columns], rows, width)
    console = make_console()
    console.width = width
    console.print(table)
    console.file.flush()
    lines = list(plan_lines(result))
    if left_out:
        lines.insert(0, f"left out at {width} columns: {', '.join(left_out)} (a wider terminal, "
                        "-o json or --query has every column)")
    sys.stdout.write("".join(f"{part}\n" for line in lines
                             for part in textwrap.wrap(line, width, subsequent_indent="    ",
                                                       break_long_words=False, break_on_hyphens=False)
                             or [""]))


# The plan's columns by what a reader needs first (0): the count, the prediction, its cost, the
# mark; then the interval, what it stands on and the measured score; cost per hour, racks,
# strong-scaling efficiency and quota are left out first on a narrow terminal.
_RANKS = {"nodes": 0, "GPUs": 0, "predicted min": 0, "$/result": 0, "mark": 0,
          "80% interval": 1, "stands on": 2, "measured min": 2, "cost/h": 3, "racks": 4,
          "quota vCPUs": 5}
_WRAPS = {"stands on", "measured min", "racks"}


def _column(header: str) -> Col:
    rank = _RANKS.get(header, 4 if header.startswith("strong eff.") else 3)
    return Col(header, rank, wrap=header in _WRAPS or header.startswith("strong eff."))


def _width() -> int:
    """$COLUMNS when set, else the terminal's width, else (a pipe, a file) 100."""
    return output_width()
