"""Cost at list price: what a group's results cost on Azure, per result (the runs one MLPerf
score needs: results.definitions.cost_per_result), per run, for all its runs and for all its
attempts (failed ones included), with the price's source in the note.

A result on a catalog size (azbench's runs, Azure submissions) is priced as its nodes x the
size's price per VM-hour. A result on another system whose GPU an Azure size has (an NVIDIA DGX
H100, a GB200 NVL72) is priced as the same GPUs on Azure: ceil(GPUs / GPUs per VM) VMs of that
size. `--price SKU=USD_PER_HOUR` (parse_price) overrides the catalog's price per VM-hour.
Nothing is priced at zero: a missing price or count leaves the figures blank and says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from orchestrator import formats
from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.hardware.catalog import gpu_skus, lookup
from orchestrator.models import Frozen
from orchestrator.report.gpus import GpuMatch
from orchestrator.results import metrics
from orchestrator.results.definitions import cost_per_result, cost_per_run
from orchestrator.store.schema import AttemptRow, ResultRow, RunRow

Prices = Mapping[str, float]  # catalog size name -> USD per VM-hour (overrides)


class GroupCost(Frozen):
    """The cost fields of a report group (GroupReport takes them as they are)."""

    price_per_vm_hour: float | None = None
    priced_vms: int | None = None
    system_price_per_hour: float | None = None
    cost_per_result_usd: float | None = None
    cost_per_run_usd: float | None = None
    cost_all_runs_usd: float | None = None
    cost_all_attempts_usd: float | None = None
    cost_note: str = ""
    price_source: str = ""


def price_example() -> str:
    """An example of --price from the catalog: the first GPU size with a list price, at it."""
    row = next((r for r in gpu_skus() if r.price_per_hour_usd is not None), None)
    return f"{row.key}={row.price_per_hour_usd:.2f}" if row and row.price_per_hour_usd else "KEY=USD"


def parse_price(text: str) -> tuple[str, float]:
    """'SKU=USD_PER_HOUR' (a size name or alias) -> (catalog size name, USD per VM-hour)."""
    sku, sep, value = text.partition("=")
    if not sep or not sku.strip():
        raise ConfigError(f"--price '{text}': expected SKU=USD_PER_HOUR, e.g. {price_example()}")
    try:
        row = lookup(sku.strip())
    except NotFoundError as exc:
        raise ConfigError(f"--price '{text}': {exc.message}", hint=exc.hint) from None
    try:
        usd = float(value)
    except ValueError:
        usd = math.nan
    if not math.isfinite(usd) or usd <= 0:
        raise ConfigError(f"--price '{text}': '{value}' is not a positive price per VM-hour in USD")
    return row.name, usd


def group_cost(rows: Sequence[ResultRow], gpu: GpuMatch, nodes: int | None, gpus: int | None,
               raw_minutes: float | None, runs: Sequence[RunRow] | None,
               attempts: Sequence[AttemptRow] | None, prices: Prices | None = None,
               runs_for_score: int | None = None) -> GroupCost:
    """List-price cost per result (results.definitions.cost_per_result: the `runs_for_score`
    runs one MLPerf score needs, each at its own minutes; `rows` in launch order), per run (one
    run as long as the raw olympic mean), of all runs, and of all attempts (azbench's own runs,
    failed attempts included)."""
    out = _priced(gpu, nodes, gpus, prices)
    vms, price = out.priced_vms, out.price_per_vm_hour
    if vms is None or price is None:
        return out
    per_run = [metrics.run_cost_usd(metrics.node_hours(vms, r.minutes * 60), price)
               for r in rows if r.minutes]
    update: dict[str, object] = {"cost_all_runs_usd": sum(per_run)}
    if raw_minutes is not None:
        update["cost_per_run_usd"] = cost_per_run(raw_minutes, vms, price)
    if runs_for_score:
        result = cost_per_result([r.minutes for r in rows if not r.resumed], runs_for_score, vms, price)
        update["cost_per_result_usd"] = result.usd
        update["cost_note"] = f"{out.cost_note}; per result: {result.note}"
    else:
        update["cost_note"] = (f"{out.cost_note}; per result: unknown, the benchmark has no "
                               "required run count")
    if gpu.exact and runs is not None and attempts is not None:
        spent = _attempts_cost(rows, runs, attempts, price)
        if spent is not None:
            update["cost_all_attempts_usd"] = spent
    return out.model_copy(update=update)


def _priced(gpu: GpuMatch, nodes: int | None, gpus: int | None, prices: Prices | None) -> GroupCost:
    """The price per VM-hour and the VM count a group is priced at, with the note that says
    so; where either is unknown, the figures blank and the note saying why."""
    row = gpu.row
    if row is not None and not row.is_azure_size:  # an emulated local node: nothing to price
        return GroupCost(cost_note="no price (local)")
    if row is None:
        return GroupCost(cost_note=f"cost unknown: {gpu.note or 'no catalog size'}")
    override = (prices or {}).get(row.name)
    price = override if override is not None else row.price_per_hour_usd
    source = "--price" if override is not None else row.price_source
    if price is None:
        return GroupCost(cost_note=f"cost unknown: no list price for {row.name} "
                                   f"(give one with --price {row.key}=USD)",
                         price_source=source)
    vms = nodes if gpu.exact else (math.ceil(gpus / row.gpus_per_vm)
                                   if gpus and row.gpus_per_vm else None)
    if not vms:
        why = "unknown node count" if gpu.exact else "GPU count unknown"
        return GroupCost(price_per_vm_hour=price, cost_note=f"cost unknown: {why}",
                         price_source=source)
    what = f"{formats.count(vms)} x {row.short}" if gpu.exact else \
        f"{formats.count(gpus)} {gpu.label} as {formats.count(vms)} x {row.short} on Azure"
    dated = f", read {row.price_date}" if row.price_date and override is None else ""
    return GroupCost(price_per_vm_hour=price, priced_vms=vms, system_price_per_hour=vms * price,
                     price_source=source,
                     cost_note=f"list-price estimate: {what} at ${price:,.2f}/VM-hour"
                               f"{' (--price)' if override is not None else dated}")


def _attempts_cost(rows: Sequence[ResultRow], runs: Sequence[RunRow], attempts: Sequence[AttemptRow],
                   price: float) -> float | None:
    """What every attempt of the rows' runs cost (failed ones included); None without one timed."""
    run_nodes = {r.id: r.nodes for r in runs}
    ids = {r.run_id for r in rows if r.run_id}
    spans = [(run_nodes[a.run_id], (a.ended_at - a.started_at).total_seconds(), price)
             for a in attempts if a.run_id in ids and a.run_id in run_nodes
             and a.started_at and a.ended_at]
    return metrics.result_cost_usd(spans) if spans else None
