"""`azbench results`: the stored results: list, show, import MLPerf logs and nccl-tests
outputs, and push or pull the archive."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional, TextIO

import typer

from orchestrator import formats
from orchestrator.cli.common import (
    Col,
    JsonOpt,
    OutputFormat,
    OutputOpt,
    QueryOpt,
    app,
    check_filter,
    fit_table,
    make_console,
    open_store,
    output,
    output_width,
    say,
)
from orchestrator.errors import NotFoundError
from orchestrator.fabric.stored import import_nccl_tests, is_nccl_tests_file
from orchestrator.report.build import group_label, group_results, names_system
from orchestrator.results import archive  # archive.push, .pull: read when the command runs
from orchestrator.results.importer import ImportProgress, import_path
from orchestrator.results.summary import summary_of
from orchestrator.safetext import clean
from orchestrator.store.database import Store
from orchestrator.store.schema import ResultRow

results_app = typer.Typer(help="Stored results: list, show, import MLPerf logs.", no_args_is_help=True,
                          rich_markup_mode=None)
app.add_typer(results_app, name="results")

def _report_width() -> int:
    """$COLUMNS when set, else the terminal's width up to 100, else (piped) 100."""
    return output_width() if "COLUMNS" in os.environ else min(100, output_width())


def _with_system(store: Store, system: Optional[str], **filters: Any) -> list[ResultRow]:
    """store.list_results(**filters) of the system `system` names: a stored system name, or a
    label as the report prints it ('v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo', report.build.names_system)."""
    if system is None or "/" not in system:
        return store.list_results(system=system, **filters)
    return [r for r in store.list_results(**filters) if names_system(r, system)]


def _check_filters(store: Store, benchmark: Optional[str] = None, system: Optional[str] = None,
                   cluster: Optional[str] = None) -> bool:
    """After a selection came back empty: False when nothing is stored at all; else a name
    filter that matches no stored result is a NotFoundError (exit 2) naming the stored names and
    the nearest, and True when each name is stored (the filters together select nothing)."""
    benchmarks = store.result_names("benchmark")
    if not benchmarks:
        return False
    check_filter("benchmark", benchmark, benchmarks)
    if system is not None and "/" in system:  # a label: any stored result it names, else the labels
        everything = store.list_results()
        if not any(names_system(r, system) for r in everything):
            check_filter("system", system, sorted(group_label(key) for key in group_results(everything)))
    elif system is not None:
        check_filter("system", system, store.result_names("system"))
    if cluster is not None:
        check_filter("cluster", cluster, store.result_names("cluster"))
    return True


@results_app.command("list")
def results_list(benchmark: Optional[str] = typer.Option(None, "--benchmark", help="Only this benchmark."),
                 system: Optional[str] = typer.Option(None, "--system", help="Only this system."),
                 as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
                 query: Optional[str] = QueryOpt) -> None:
    """Stored results, one line each. A --benchmark or --system that names nothing stored
    exits 2 with the stored names and the nearest."""
    out = output(as_json, fmt, query)
    with open_store() as store:
        rows = _with_system(store, system, benchmark=benchmark)
        if not rows:
            _check_filters(store, benchmark=benchmark, system=system)
    if not out.rich:
        return out.emit([r.model_dump(mode="json", exclude={"summary_json"}) for r in rows])
    # No cell cut: at a narrow width the columns read last are left out, and named.
    columns = [Col("id", 0, wrap=False), Col("benchmark", 0, wrap=False), Col("system", 0, wrap=False),
               Col("status", 1, wrap=False), Col("minutes", 0, wrap=False), Col("nodes", 2, wrap=False),
               Col("GPUs", 1, wrap=False), Col("resumed", 3, wrap=False), Col("source", 2, wrap=False),
               Col("run", 3, wrap=False)]
    width = _report_width()
    table, left_out = fit_table("Results", columns, [
        [r.id, r.benchmark, r.system, r.status, formats.fixed(r.minutes, 3), formats.count(r.nodes),
         formats.count(r.gpus), "yes" if r.resumed else "", r.source, r.run_id] for r in rows], width)
    console = make_console()
    console.width = width
    console.print(table)
    if left_out:
        console.print(f"left out at {width} columns: {', '.join(left_out)} (-o json or --query has them)",
                      markup=False)


@results_app.command("show")
def results_show(result_id: int = typer.Argument(..., help="Result id (see azbench results list)."),
                 as_json: bool = JsonOpt,
                 fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """One stored result with its parsed log summary."""
    out = output(as_json, fmt, query)
    with open_store() as store:
        row = store.get_result(result_id)
    if row is None:
        raise NotFoundError(f"no result with id {result_id}", hint="see `azbench results list`")
    data = row.model_dump(mode="json")
    data["summary"] = json.loads(data.pop("summary_json") or "null")
    if not out.rich:
        return out.emit(data)
    summary = summary_of(row)
    for key in ("id", "benchmark", "system", "status", "minutes", "nodes", "gpus", "global_batch_size",
                "resumed", "source", "run_id", "log_path", "compliance_ok"):
        sys.stdout.write(clean(f"{key:18} {data.get(key)}") + "\n")
    if row.summary_json is None:  # nothing parsed was kept: no count is a claim
        sys.stdout.write(f"{'log summary':18} not recorded\n")
        return
    sys.stdout.write(f"{'steps timed':18} {len(summary.step_times)}\n"
                     f"{'eval points':18} {len(summary.eval_points)}\n"
                     f"{'bad lines':18} {summary.bad_lines}\n")


@results_app.command("import")
def results_import(path: Path = typer.Argument(..., help="Submission tree, results folder, run dir, log file, or an nccl-tests output."),
                   compliance: bool = typer.Option(True, "--compliance/--no-compliance",
                                                   help="Run mlperf_logging's compliance checker with "
                                                   "each log's round's ruleset (default); a log that "
                                                   "fails is scored as not converged, as the result "
                                                   "summarizer does."),
                   round_name: Optional[str] = typer.Option(
                       None, "--round", help="The MLPerf round of every log (v5.1), for a tree "
                       "whose folders do not name it (a clone in tr51/): its score can then be "
                       "checked and official. Stored results without a round get it."),
                   sku: Optional[str] = typer.Option(None, "--sku", help="An nccl-tests output: judge it "
                                                     "against this VM size (default: the catalog size of "
                                                     "the GPU the output names), as `fabric inspect --sku`."),
                   as_json: bool = JsonOpt,
                   fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Import MLPerf result logs, or an nccl-tests output as a fabric result (idempotent: the same
    file twice is one result). Each MLPerf log is
    checked for compliance unless --no-compliance: a failing run is excluded as MLPerf's result
    summarizer excludes it, so a score the summarizer would not give is not reported official."""
    out = output(as_json, fmt, query)
    if is_nccl_tests_file(path):  # a collective's output: a fabric result (`azbench fabric`)
        with open_store() as store:
            fabric = import_nccl_tests(store, path, sku)
        if not out.rich:
            return out.emit(fabric)
        say(f"imported {fabric.imported} nccl-tests run(s) ({', '.join(fabric.collectives)}), "
            f"{fabric.duplicates} already stored, from {path}: see `azbench report` (fabric)\n"
            f"judged against {fabric.sku or 'no catalog size'} ({fabric.sku_basis}): "
            f"verdict {fabric.verdict}, as `azbench fabric inspect` gives\n")
        return
    meter = ImportMeter(sys.stderr)
    try:
        with open_store() as store:
            summary = import_path(store, path, check_compliance=compliance, progress=meter,
                                  round_name=round_name)
    finally:
        meter.close()
    if not out.rich:
        return out.emit(summary)
    say(f"imported {len(summary.imported)} result(s), {len(summary.duplicates)} already stored, "
                     f"{len(summary.warnings)} warning(s) from {path}\n")
    if summary.refiled:
        sys.stdout.write(f"filed {len(summary.refiled)} stored result(s) without a round as "
                         f"{summary.refiled[0].round} (--round)\n")
    for why, n in sorted(summary.skipped_reasons().items()):
        sys.stdout.write(f"skipped {n} log(s): {why}\n")
    for warning in summary.warnings:  # paths and messages hold folder names: no controls
        sys.stderr.write(clean(f"warning: {warning.path}: {warning.message}") + "\n")


class ImportMeter:
    """An import's progress on stderr: one line rewritten in place on a terminal (files read,
    checked, stored, time left), plain lines in a log (CI) at each stage and every 10 s.
    Nothing for an import that ends within 2 s, so a quick one (or a one-line error) stays so."""

    QUIET_S, EVERY_S, REDRAW_S = 2.0, 10.0, 0.1

    def __init__(self, stream: TextIO) -> None:
        self._out = stream
        self._tty = stream.isatty()
        self._last = 0.0
        self._stage = ""
        self._drawn = False

    def __call__(self, p: ImportProgress) -> None:
        if p.elapsed_s < self.QUIET_S or p.stage == "done":
            return
        now = time.monotonic()
        changed, self._stage = p.stage != self._stage, p.stage
        if self._tty:
            if changed or now - self._last >= self.REDRAW_S:
                width = shutil.get_terminal_size().columns - 1
                self._out.write("\r\x1b[K" + import_line(p)[:width])
                self._drawn = True
        elif changed or now - self._last >= self.EVERY_S:
            self._out.write(import_line(p) + "\n")
        else:
            return
        self._out.flush()
        self._last = now

    def close(self) -> None:
        """Clear the terminal's progress line (before the summary or an error is printed)."""
        if self._drawn:
            self._out.write("\r\x1b[K")
            self._out.flush()
            self._drawn = False


def import_line(p: ImportProgress) -> str:
    """'read 289/289 logs (22 already stored), parsed 267/267, checked 40/267, about 12 s left'."""
    new = p.found - p.skipped
    parts = [f"read {p.read:,}/{p.found:,} logs" + (f" ({p.skipped:,} already stored)" if p.skipped else "")]
    if p.stage != "read":
        parts.append(f"parsed {p.parsed:,}/{new:,}")
    if p.stage in ("check", "store") and p.to_check:
        parts.append(f"checked {p.checked:,}/{p.to_check:,}")
    if p.stage == "store":
        parts.append(f"storing {new:,}")
    if p.left_s is not None and p.stage in ("read", "check"):
        parts.append(f"about {p.left_s:,.0f} s left" if p.left_s >= 1 else "under 1 s left")
    return ", ".join(parts)


AccountOpt = typer.Option(..., "--account", help="Blob service URL, e.g. https://ACCOUNT.blob.core.windows.net "
                          "(key from $AZURE_STORAGE_KEY, else az login / managed identity).")
ContainerOpt = typer.Option(..., "--container", help="Blob container (created when missing).")


@results_app.command("push")
def results_push(account: str = AccountOpt, container: str = ContainerOpt, as_json: bool = JsonOpt,
                                                                           fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Archive raw logs (content-hashed) and a store snapshot to Azure Blob Storage; idempotent."""
    out = output(as_json, fmt, query)

    with open_store() as store:
        summary = archive.push(store, archive.AzureContainer(account, container))
    if not out.rich:
        return out.emit(asdict(summary))
    sys.stdout.write(f"uploaded {len(summary.uploaded)} blob(s), {summary.bytes_uploaded:,} bytes; "
                     f"{summary.skipped} already there\n")
    for path in summary.missing_logs:
        sys.stderr.write(clean(f"warning: {path}: log no longer on disk, not archived") + "\n")
    for path in summary.refused_logs:
        sys.stderr.write(clean(f"warning: {path}: outside this home's log folders (archive/, "
                               "runs/): not read, not uploaded") + "\n")


@results_app.command("pull")
def results_pull(account: str = AccountOpt, container: str = ContainerOpt,
                 into: Path = typer.Option(Path("azbench-archive"), "--into", help="Folder for the logs and snapshot.json."),
                 do_import: bool = typer.Option(True, "--import/--no-import", help="Add the snapshot's results to the local store."),
                 as_json: bool = JsonOpt,
                 fmt: Optional[OutputFormat] = OutputOpt, query: Optional[str] = QueryOpt) -> None:
    """Download archived logs and the latest store snapshot (and import its results)."""
    out = output(as_json, fmt, query)

    remote = archive.AzureContainer(account, container)
    if do_import:
        with open_store() as store:
            summary = archive.pull(remote, into, store)
    else:
        summary = archive.pull(remote, into)
    if not out.rich:
        return out.emit(asdict(summary))
    say(f"downloaded {len(summary.downloaded)} file(s) into {into}, {summary.skipped} already there; "
                     f"imported {summary.imported_results} result(s)\n")
