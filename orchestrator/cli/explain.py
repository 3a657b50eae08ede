"""`azbench explain`: where each second of a training step goes (orchestrator/explain), predicted
from the config and set against the measured step, for a run of yours or a published system.

    azbench explain RUN_ID
    azbench explain --system LABEL --benchmark B [--gpus N]
    azbench explain --list | --params

`-o json|tsv` and `--query` go through the CLI's shared output helper over the Explained model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import typer
from pydantic import ValidationError

from orchestrator.cli.common import (
    JsonOpt, OutputFormat, OutputOpt, QueryOpt, app, make_console, make_table, open_store, output, say,
)
from orchestrator.errors import ConfigError
from orchestrator.specs.run import RunSpec
from orchestrator.explain import account
from orchestrator.explain.account import Explained
from orchestrator.explain.fit import fitted_params
from orchestrator.results.definitions import step_time
from orchestrator.store.schema import FabricResultRow

@app.command()
def explain(
    run_id: Optional[str] = typer.Argument(None, help="A run id (azbench status lists them)."),
    system: Optional[str] = typer.Option(None, "--system", help="A published system: its name or "
                                         "round/submitter/system, e.g. v5.1/NVIDIA/tyche_ngpu512_ngc25.09_nemo."),
    benchmark: Optional[str] = typer.Option(None, "--benchmark", help="With --system: the benchmark."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="With --system: the GPU count, when it has several."),
    list_scales: bool = typer.Option(False, "--list", help="List the published scales the model reads."),
    show_params: bool = typer.Option(False, "--params", help="Show the fitted parameters and their data."),
    as_json: bool = JsonOpt,
    fmt: Optional[OutputFormat] = OutputOpt,
    query: Optional[str] = QueryOpt,
) -> None:
    """The predicted step, part by part (compute, tp/cp/ep comm, pp bubble and p2p, dp comm,
    optimizer, other: they add up to it), the measured median step and the gap, naming the
    largest parts. What the model cannot predict reads "not predicted", with why."""
    out = output(as_json, fmt, query)
    if list_scales:
        return out.emit(account.listing())
    if show_params:
        return out.emit(fitted_params().table())
    if (run_id is None) == (system is None):
        raise ConfigError("give a RUN_ID or --system LABEL --benchmark B (not both)")
    if system is not None:
        if not benchmark:
            raise ConfigError("--system needs --benchmark")
        found = account.explain_published(system, benchmark, gpus)
    else:
        assert run_id is not None
        found = [_run(run_id)]
    if not out.rich:
        return out.emit(found if len(found) > 1 else found[0])
    for e in found:
        _print(e)


def _run(run_id: str) -> Explained:
    with open_store() as store:
        run = store.get_run(run_id)
        if run is None:
            raise ConfigError(f"no run '{run_id}' in the store", hint="azbench status lists clusters and their runs")
        cluster = store.get_cluster(run.cluster)
        if cluster is None:
            raise ConfigError(f"run '{run_id}': its cluster '{run.cluster}' is not in the store")
        rows = [r for r in store.list_results(benchmark=run.benchmark) if r.run_id == run_id]
        fabric = _stored_inter_busbw(store.list_fabric_results(cluster=run.cluster), cluster.sku)
    stats = step_time(rows)
    params: dict[str, str] = {}
    if run.spec_json:
        try:
            params = {k: str(v) for k, v in RunSpec.model_validate_json(run.spec_json).params.items()}
        except ValidationError:
            raise ConfigError(f"run '{run_id}': its stored spec does not read as a run spec") from None
    figures = ({k: float(v) for k, v in stats.model_dump().items() if isinstance(v, (int, float))}
               if stats else None)
    return account.explain_run(run_id, run.recipe, run.nodes, cluster.sku,
                               stats.median if stats else None, stats.count if stats else 0, params,
                               fabric=fabric, stats=figures)


def _stored_inter_busbw(rows: Sequence[FabricResultRow], sku: str) -> tuple[float, int, int, str] | None:
    """The newest stored GPU all-reduce/reduce-scatter test that spans more than one node: its
    average busbw (GB/s), ranks, hosts and what it was."""
    picked = [r for r in rows if r.device == "GPU" and (r.hosts or 0) > 1 and r.avg_busbw_gbps
              and (r.collective or "").replace("-", "_") in ("all_reduce", "reduce_scatter", "allreduce")]
    if not picked:
        return None
    r = picked[-1]
    return (float(r.avg_busbw_gbps or 0.0), r.ranks, r.hosts,
            f"{r.collective} on {r.hosts} nodes, {r.created_at:%Y-%m-%d}")


def _stats(e: Explained) -> str:
    st = e.measured_stats
    if not st:
        return ""
    return (f" (median of {int(st.get('count', 0)):,} kept steps; p95 {st.get('p95', 0.0):.4g} s, "
            f"min {st.get('min', 0.0):.4g} s, max {st.get('max', 0.0):.4g} s)")


def _print(e: Explained) -> None:
    console = make_console()
    w = say  # run ids, system and config names come from the store and result folders: cleaned
    w(f"{e.subject}\n")
    if e.predicted_step_s is None:
        w("predicted step: not predicted\n")
        for why in e.not_predicted:
            w(f"  - {why}\n")
        w(f"measured step: {f'{e.measured_step_s:.4g} s' if e.measured_step_s is not None else 'not measured'}"
          f"{_stats(e)}\n")
        for note in e.notes:
            w(f"note: {note}\n")
        return
    total = e.predicted_step_s
    rows = [[k, f"{v:.4f}", f"{v / total:.1%}" if total else ""] for k, v in e.components.items()]
    rows.append(["predicted step", f"{total:.4f}", "100%"])
    if e.measured_step_s is not None:
        rows.append(["measured step (median)", f"{e.measured_step_s:.4f}", f"{e.error:+.1%} error" if e.error is not None else ""])

    console.print(make_table("Where the step goes (seconds)", ["part", "seconds", "share"], rows))
    console.file.flush()
    if e.measured_stats:
        w(f"measured step{_stats(e)}\n")
    layout = ", ".join(f"{k.upper()} {v}" for k, v in e.layout.items() if k in ("tp", "pp", "cp", "vp", "dp", "mbs", "gbs"))
    w(f"layout: {layout}; {e.layout.get('precision')}; rank order {e.layout.get('order')}\n")
    if serial := account.not_overlapped(e.layout):
        w(f"{serial}\n")
    w("links: " + "; ".join(f"{k.upper()} {v}" for k, v in e.links.items()) + "\n")
    if e.leaves_nvlink_domain:
        w(f"leaves the NVLink domain: {', '.join(e.leaves_nvlink_domain)}\n")
    w(f"gap: {e.gap}\n")
    w(f"compute rate: {e.compute_rate}\n")
    for note in e.notes:
        w(f"note: {note}\n")
