"""`azbench fabric`: what the network did. `fabric inspect FILE...` reads nccl-tests outputs and
NCCL_DEBUG=INFO logs (fabric/inspection.py); `fabric test` runs the collectives as Slurm jobs
and stores them (fabric/runner.py). Both print every verdict with its evidence and exit
errors.EXIT_FABRIC when one fails."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from orchestrator.cli.common import JsonOpt, OutputFormat, OutputOpt, QueryOpt, app, make_console, \
    make_table, open_store, output, say
from orchestrator.errors import EXIT_CODES, EXIT_FABRIC
from orchestrator.cli.common import check_number
from orchestrator.clusters import lifecycle
from orchestrator.fabric.inspection import FileReport, TransportReport, inspect_files
from orchestrator.fabric.judge import Check, RunReport, human_size
from orchestrator.specs.run import parse_node_list

if TYPE_CHECKING:
    from orchestrator.fabric.runner import FabricOutcome

_FAILS = f"Exits {EXIT_FABRIC} ({EXIT_CODES[EXIT_FABRIC]})."
fabric_app = typer.Typer(help="What the network did: run collectives as a benchmark, read what others ran. "
                              + _FAILS, no_args_is_help=True, rich_markup_mode=None)
app.add_typer(fabric_app, name="fabric")


@fabric_app.command("inspect", help=(
    "Read nccl-tests outputs (any collective, in- and out-of-place) and NCCL_DEBUG=INFO logs (alone or "
    "inside a run's log): collective, ranks, hosts, GPUs per host, busbw per size, peak busbw, the "
    "'Avg bus bandwidth' line, wrong values; NCCL's network, GPUDirect RDMA, HCAs and the transport of "
    "each inter-node channel. Channels over NET/Socket and wrong values fail; busbw below the SKU's "
    "warn level (judged at the baseline's size, or the largest size measured, never the Avg line) "
    "warns. " + _FAILS))
def fabric_inspect(files: list[Path] = typer.Argument(..., help="nccl-tests outputs or logs with NCCL INFO lines."),
                   sku: Optional[str] = typer.Option(None, "--sku", help="Judge against this VM size "
                                                     "(default: the catalog size of the GPU the output names)."),
                   as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
                   query: Optional[str] = QueryOpt) -> None:
    out = output(as_json, fmt, query)
    reports = inspect_files(files, sku)
    if not out.rich:
        out.emit(reports)
    else:
        for report in reports:
            _print_file(report)
    if any(r.verdict == "fail" for r in reports):
        raise typer.Exit(EXIT_FABRIC)


@fabric_app.command("test", help=(
    "Run collectives (all_reduce, all_gather, reduce_scatter, alltoall, sendrecv) as Slurm jobs, one "
    "job per node count, at message sizes up to the SKU's baseline size: nccl-tests from the image on "
    "GPU sizes (NCCL_DEBUG=INFO kept for the transport check), torch.distributed (gloo) with two ranks "
    "per node on CPU ones (labelled CPU, no baseline). Each collective's run is stored as a fabric "
    "result (`azbench report` lists and draws them) and judged: NET/Socket channels and wrong values "
    "fail, busbw below the SKU's warn level warns. " + _FAILS))
def fabric_test(cluster: Optional[str] = typer.Option(None, "--cluster", help="Cluster name (default: the only one up)."),
                nodes: Optional[str] = typer.Option(None, "--nodes", help="Node counts, comma-separated: 1,2,4."),
                collectives: str = typer.Option("all_reduce,all_gather,reduce_scatter,alltoall,sendrecv",
                                                "--collectives", help="Which collectives, comma-separated."),
                racks: bool = typer.Option(False, "--racks", help="Also one test inside each NVLink rack "
                                           "(leaf switch), then one across racks with one node of each."),
                poll: float = typer.Option(1.0, "--poll", min=0.05, help="Seconds between scheduler polls."),
                as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
                query: Optional[str] = QueryOpt) -> None:
    check_number("--poll", poll, 0.05, 3600)
    out = output(as_json, fmt, query)
    counts = parse_node_list(nodes) if nodes else []
    names = [c.strip() for c in collectives.split(",") if c.strip()]
    from orchestrator.fabric.runner import fabric_test as run_fabric_test  # lazy: +SQLAlchemy on `fabric inspect` (0.4 s), which opens no store
    with open_store() as store:
        found = lifecycle.require_cluster(cluster, store)
        with lifecycle.connect(found) as access:
            outcome = run_fabric_test(found, access, store, node_counts=counts, collectives=names, racks=racks,
                          poll_interval=poll)
    if not out.rich:
        out.emit(_outcome_json(outcome))
    else:
        _print_outcome(outcome)
    if outcome.verdict == "fail":
        raise typer.Exit(EXIT_FABRIC)


def _outcome_json(outcome: FabricOutcome) -> dict[str, object]:
    return {"cluster": outcome.cluster, "sku": outcome.sku, "device": outcome.device,
            "collectives": outcome.collectives, "verdict": outcome.verdict,
            "jobs": [{"scope": j.scope, "nodes": j.nodes, "nodelist": j.nodelist, "job_id": j.job_id,
                      "state": j.state, "stored": j.stored, "runs": j.runs, "errors": j.errors,
                      "checks": j.checks, "verdict": j.verdict} for j in outcome.jobs]}


def _print_outcome(outcome: FabricOutcome) -> None:
    w = say  # file names, GPU names, NCCL's version and evidence come from the file
    rows = [[j.scope, j.job_id or "-", r["collective"] or "unnamed", _known(r["ranks"]), _known(r["hosts"]),
             r["gpus_per_host"] or "-",
             _num(r["peak_busbw"]), r["peak_size"] or "-", _num(r["busbw_at_largest"]), r["largest_size"] or "-",
             r["wrong"] if r["wrong"] is not None else "not checked", r["verdict"]]
            for j in outcome.jobs for r in j.runs]
    make_console().print(make_table(f"Fabric test on {outcome.cluster} ({outcome.sku}, {outcome.device})",
                                    ["scope", "job", "collective", "ranks", "hosts", "GPUs/host", "peak busbw GB/s",
                                     "at", "busbw at largest GB/s", "largest", "wrong", "verdict"], rows))
    stored = sum(len(j.stored) for j in outcome.jobs)
    w(f"stored {stored} fabric result(s); `azbench report` lists them under fabric\n")
    for job in outcome.jobs:
        for error in job.errors:
            w(f"  [fail] {job.scope}: {error}\n")
        for check in _unique(job.checks):
            w(f"  [{check.status}] {job.scope}: {check.check}: {check.evidence}\n")
    w(f"verdict: {outcome.verdict}\n")


def _known(value: object) -> object:
    """A count as the output states it: "unknown" where it does not, never 0."""
    return "unknown" if value is None else value


def _num(value: object) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else "-"


def _print_file(report: FileReport) -> None:
    w = say  # file names, GPU names, NCCL's version and evidence come from the file
    w(f"{report.file}: {report.kind}; judged against "
      f"{report.sku or 'no catalog size'} ({report.sku_basis})\n")
    if report.runs:
        make_console().print(make_table("", ["collective", "ranks", "hosts", "GPUs/host", "peak busbw GB/s",
                                             "at size", "Avg bus bandwidth line", "wrong", "verdict"],
                                        [_run_cells(r) for r in report.runs]))
        for run in report.runs:
            sizes = ", ".join(f"{_size(p['size'])} {p['busbw']:g}" for p in run.busbw
                              if isinstance(p.get("size"), int) and p.get("busbw") is not None)
            w(f"  busbw per size ({run.collective or 'unnamed'}): {sizes or 'none measured'}\n")
            w(f"  collective {run.collective}: read from {run.collective_basis}\n" if run.collective
              else f"  collective not known: {run.collective_basis or 'the output does not say'}\n")
    if report.transport is not None:
        w(f"  {_transport_line(report.transport)}\n")
    for check in _unique(report.checks):
        w(f"  [{check.status}] {check.check}: {check.evidence}\n")
    for note in report.notes:
        w(f"  note: {note}\n")
    w(f"verdict: {report.verdict}\n\n")


def _run_cells(run: RunReport) -> list[object]:
    ranks = "unknown" if run.ranks is None else f"{'at least ' if run.ranks_at_least else ''}{run.ranks}"
    hosts = "unknown" if run.hosts is None else f"{'at least ' if run.ranks_at_least else ''}{run.hosts}"
    return [run.collective or "unnamed", ranks, hosts,
            run.gpus_per_host or "-",
            f"{run.peak_busbw:g}" if run.peak_busbw is not None else "-",
            _size(run.peak_size) if run.peak_size is not None else "-",
            f"{run.avg_busbw_line:g}" if run.avg_busbw_line is not None else "not in the output",
            run.wrong if run.wrong is not None else "not checked", run.verdict]


def _transport_line(t: TransportReport) -> str:
    gdr = {True: "yes", False: "no", None: "not said"}[t.gdr]
    channels = ", ".join(f"{n} via {k}" for k, n in sorted(t.channels.items())) or "no inter-node channel lines"
    rccl = f" (RCCL {t.rccl_version})" if t.rccl_version else ""
    return (f"NCCL {t.nccl_version or '(version not logged)'}{rccl}: network {', '.join(t.network) or 'not logged'}; "
            f"plugin {t.plugin or 'not logged'}; GPUDirect RDMA {gdr}; HCAs {', '.join(t.hcas) or 'not logged'}; "
            f"channels: {channels}")


def _unique(checks: list[Check]) -> list[Check]:
    """Each (check, status, evidence) once: a file's transport check repeats per run."""
    seen: dict[tuple[str, str, str], Check] = {}
    for c in checks:
        seen.setdefault((c.check, c.status, c.evidence), c)
    return list(seen.values())


def _size(n: int | float | None) -> str:
    return human_size(int(n)) if n is not None else "-"


__all__ = ["fabric_app", "fabric_inspect", "fabric_test"]
