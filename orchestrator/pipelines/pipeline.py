"""The `azbench pipeline run` use case: up -> health -> runs -> report -> compare -> down.

A PipelineSpec (YAML) names a cluster, optional SKUs (one cluster each, one after another), a
matrix of recipes x node counts x repeats, the retry and health policies, and a baseline with
per-metric tolerances. `run_pipeline` brings each cluster up, runs the matrix (the health gate
runs before every attempt inside orchestrator.runs.execute), and tears the cluster down on EVERY exit
path: success, an error, Ctrl-C, or SIGTERM/SIGHUP from a CI runner (turned into an exception
here, and deferred while teardown runs). The cluster's `azbench-expires` tag, tightened to the
pipeline's timeout, is the net for a SIGKILL. Then it reports, compares with the baseline and
returns a PipelineResult; what the results mean (cases, comparison, baseline update, Markdown)
is orchestrator.pipelines.results' job.
"""

from __future__ import annotations

import inspect
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from orchestrator.specs.cluster import ClusterSpec
from orchestrator.specs.run import RunSpec
from orchestrator.errors import AzbenchError, RegressionError, RunFailedError
from orchestrator.models import FINAL_RUN_STATES, ClusterState, RunState, utcnow
from orchestrator.pipelines.baselines import Comparison
from orchestrator.pipelines.progress import PipelineInterrupted, Progress
from orchestrator.pipelines.results import PipelineResult, PipelineSummary, ScaleCase
from orchestrator.pipelines.spec import PipelineSpec, cluster_specs, load_pipeline_spec, run_specs  # noqa: F401
from orchestrator.clusters import lifecycle
from orchestrator.runs import execute  # by module: tests replace execute.run_sweep
from orchestrator.goodput.cluster import cluster_goodput
from orchestrator.store.events import GateData
from orchestrator.pipelines.results import analyse as analyse_results

if TYPE_CHECKING:
    from orchestrator.runs.attempts import RunEvent
    from orchestrator.runs.monitor import Progress as RunProgress
    from orchestrator.store.database import Store

# What a run reports as it goes (runs.monitor.Progress) and its state changes (runs.attempts.RunEvent).
OnProgress = Callable[["RunProgress"], None]
OnEvent = Callable[["RunEvent"], None]

EXIT_RUN_FAILED, EXIT_REGRESSION = RunFailedError.exit_code, RegressionError.exit_code
_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # POSIX: azbench runs on Linux


def run_pipeline(spec: PipelineSpec, store: Store, *, on_line: Callable[[str], None] | None = None,
                 on_progress: OnProgress | None = None, on_event: OnEvent | None = None,
                 poll_interval: float = 1.0) -> PipelineResult:
    """Run the whole pipeline; never raises for a failed stage (see summary.status/exit_code).
    Every cluster it brought up (or adopted) is down when this returns."""
    st = Progress(spec, store, on_line)
    with _signals_raise(st):
        for cspec in cluster_specs(spec):
            _one_cluster(st, cspec, on_progress, on_event, poll_interval)
            if st.stop is not None or st.signum is not None:
                break
        try:
            return _finish(st, analyse=st.signum is None)
        except PipelineInterrupted as exc:  # during report/compare: clusters are already down
            st.signum = exc.signum
            return _finish(st, analyse=False)


def _one_cluster(st: Progress, cspec: ClusterSpec, on_progress: OnProgress | None, on_event: OnEvent | None,
                 poll: float) -> None:
    st.skus[cspec.name] = cspec.sku
    st.clusters[cspec.name] = "planned"
    try:
        with st.stage("up", cspec.name) as rec:
            up = lifecycle.up(cspec, st.store)
            st.clusters[cspec.name] = "ready"
            rec.message = f"{'adopted' if up.adopted else 'created'} {cspec.nodes} x {cspec.sku}"
        for rspec in run_specs(st.spec, cspec.name):
            _run_entry(st, rspec, on_progress, on_event, poll)
        _health_stage(st, cspec.name)
    except (PipelineInterrupted, KeyboardInterrupt) as exc:
        st.signum = st.signum or (exc.signum if isinstance(exc, PipelineInterrupted) else signal.SIGINT)
        _cancel_live(st, cspec.name)
    except AzbenchError as exc:
        st.stop = exc
    finally:
        _teardown(st, cspec)


def _run_entry(st: Progress, rspec: RunSpec, on_progress: OnProgress | None, on_event: OnEvent | None,
               poll: float) -> None:
    kwargs: dict[str, Any] = {"spec": rspec, "store": st.store, "on_progress": on_progress,
                              "poll_interval": poll}
    if on_event is not None and "on_event" in inspect.signature(execute.run_sweep).parameters:
        kwargs["on_event"] = on_event
    scales = ",".join(map(str, rspec.nodes))
    with st.stage(f"runs {rspec.recipe} nodes={scales} x{rspec.repeats}", rspec.cluster) as rec:
        outcomes = execute.run_sweep(**kwargs)
        st.run_ids += [o.run_id for o in outcomes]
        row = st.store.get_run(outcomes[0].run_id) if outcomes else None
        if row is not None and row.sweep_id and row.sweep_id not in st.sweeps:
            st.sweeps.append(row.sweep_id)
        bad = [o for o in outcomes if o.state != RunState.SUCCEEDED]
        rec.message = f"{len(outcomes) - len(bad)}/{len(outcomes)} runs succeeded"
        if bad:
            rec.status = "failed"


def _health_stage(st: Progress, cluster: str) -> None:
    """Summarise the gates that ran before every attempt (health runs inside each run)."""
    with st.stage("health", cluster) as rec:
        # Listed right after this cluster's `up`: the gates ran before the runs they guard.
        ups = [i for i, g in enumerate(st.stages) if g.stage == "up" and g.cluster == cluster]
        st.stages.insert(ups[-1] + 1 if ups else len(st.stages) - 1, st.stages.pop())
        if not st.spec.health.enabled:
            rec.status, rec.message = "skipped", "health.enabled is false"
            return
        mine = [rid for rid in st.run_ids if (r := st.store.get_run(rid)) is not None and r.cluster == cluster]
        gates = [e.data for rid in mine for e in st.store.list_events(run_id=rid) if isinstance(e.data, GateData)]
        excluded = sorted({n for g in gates for n in g.failed})
        bw = [g.busbw_gbps for g in gates if g.busbw_gbps is not None]
        rec.message = (f"{len(gates)} gate(s) before attempts, nodes failed: "
                       f"{', '.join(excluded) or 'none'}"
                       + (f", all-reduce busbw {min(bw):.3g}-{max(bw):.3g} GB/s" if bw else ""))


def _cancel_live(st: Progress, cluster: str) -> None:
    """Cancel (through the launcher) and mark cancelled the unfinished runs this pipeline started on `cluster`."""
    live = [r.id for r in st.store.list_runs(cluster=cluster)
            if r.state not in FINAL_RUN_STATES and r.created_at >= st.started]
    if not live:
        return
    with st.stage("cancel", cluster) as rec:
        try:
            jobs = execute.cancel_runs(st.store, live)
            rec.message = f"cancelled {len(live)} run(s), Slurm job(s) {', '.join(jobs) or 'none'}"
        except AzbenchError as exc:
            rec.status, rec.message = "failed", str(exc)


def _teardown(st: Progress, cspec: ClusterSpec) -> None:
    """down, whatever happened, with signals deferred until it is done."""
    with _signals_deferred(st):
        try:
            with st.stage("down", cspec.name) as rec:
                st.clusters[cspec.name] = down_cluster(cspec, st.store)
                if st.clusters[cspec.name] == "not created":
                    rec.status, rec.message = "skipped", "nothing was created"
        except AzbenchError as exc:
            st.clusters[cspec.name] = "down failed: " + str(exc)
            st.stop = st.stop or exc
        _goodput_line(st, cspec.name)


def _goodput_line(st: Progress, cluster: str) -> None:
    """Where the cluster's money went, in one line, for the log and the summary (its record is
    final once down); nothing for a cluster never created."""
    if st.store.get_cluster(cluster) is None:
        return
    try:
        st.goodput[cluster] = cluster_goodput(st.store, cluster).line
    except AzbenchError as exc:  # a summary line must not fail the teardown
        st.goodput[cluster] = f"not computed: {exc}"
    st.line(f"[{st.spec.name}] {cluster}: {st.goodput[cluster]}")


def down_cluster(cspec: ClusterSpec, store: Store) -> str:
    """Tear down `cspec`'s cluster, idempotently; also one whose `up` was cut short before the
    store knew it (the provider's describe finds it). Returns the final state."""
    if store.get_cluster(cspec.name) is None and not lifecycle.record_if_live(cspec, store):
        return "not created"
    lifecycle.down(cspec.name, store)
    return ClusterState.TERMINATED.value


def _finish(st: Progress, analyse: bool = True) -> PipelineResult:
    report, comparison, cases, updated = analyse_results(st, with_results=analyse)
    status, code, message = _verdict(st, cases, comparison)
    summary = PipelineSummary(
        pipeline=st.spec.name, status=status, exit_code=code, message=message,
        started_at=st.started, ended_at=utcnow(), clusters=dict(st.clusters), sweeps=list(st.sweeps),
        stages=list(st.stages), cases=cases, baseline=st.spec.baseline.name,
        baseline_updated=updated, comparison=comparison.to_json_data() if comparison else None,
        goodput=dict(st.goodput))
    st.line(f"[{st.spec.name}] {status}: {message}")
    return PipelineResult(summary=summary, report=report, comparison=comparison)


def _verdict(st: Progress, cases: Sequence[ScaleCase], cmp: Comparison | None) -> tuple[Any, int, str]:
    """Interrupted > an error that stopped the pipeline > failed runs > regressions > passed."""
    if st.signum is not None:
        name = signal.Signals(st.signum).name
        return "interrupted", 128 + st.signum, f"interrupted by {name}; clusters torn down"
    if st.stop is not None:
        return "failed", st.stop.exit_code, f"{st.stop.kind}: {st.stop}"
    failed = sum(len(c.failed) for c in cases)
    if failed:
        return "failed", EXIT_RUN_FAILED, f"{failed} of {len(st.run_ids)} runs failed"
    if cmp is not None and cmp.regressions:
        return "regressed", EXIT_REGRESSION, "; ".join(d.describe() for d in cmp.regressions)
    note = f", {len(cmp.improvements)} improvement(s)" if cmp and cmp.improvements else ""
    return "passed", 0, f"{len(st.run_ids)} runs succeeded, no regression{note}"


@contextmanager
def _signals_raise(st: Progress) -> Iterator[None]:
    """SIGTERM/SIGHUP/SIGINT raise PipelineInterrupted once; later ones are only noted, and
    none raises while a teardown runs, so nothing cuts a teardown short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        first = st.signum is None
        st.signum = st.signum or signum
        st.line(f"[{st.spec.name}] received {signal.Signals(signum).name}: tearing down")
        if first and not st.quiet:
            raise PipelineInterrupted(signum)

    watched = (*_SIGNALS, signal.SIGINT)
    old = {s: signal.getsignal(s) for s in watched}
    for s in watched:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def _signals_deferred(st: Progress) -> Iterator[None]:
    previous, st.quiet = st.quiet, True
    try:
        yield
    finally:
        st.quiet = previous
