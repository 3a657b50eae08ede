"""The `azbench pipeline run` use case: up -> health -> runs -> report -> compare -> down.

A PipelineSpec (YAML) names a cluster, optional SKUs (one cluster each, one after another), a
matrix of recipes x node counts x repeats, the retry and health policies, and a baseline with
per-metric tolerances. `run_pipeline` brings each cluster up, runs the matrix (the health gate
runs before every attempt inside orchestrator.runs), and tears the cluster down on EVERY exit
path: success, an error, Ctrl-C, or SIGTERM/SIGHUP from a CI runner (turned into an exception
here, and deferred while teardown runs). The cluster's `azbench-expires` tag, tightened to the
pipeline's timeout, is the net for a SIGKILL. Then it reports, compares with the baseline and
returns a PipelineResult; what the results mean (cases, comparison, baseline update, Markdown)
is orchestrator.pipeline_results' job.
"""

from __future__ import annotations

import inspect
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator,
                      model_validator)

from orchestrator.baselines import Comparison, Tolerances
from orchestrator.errors import AzbenchError, ConfigError
from orchestrator.models import FINAL_RUN_STATES, ClusterState, utcnow
from orchestrator.pipeline_results import PipelineResult, PipelineSummary, ScaleCase, StageRecord
from orchestrator.specs import ClusterSpec, HealthPolicy, RetryPolicy, RunSpec, parse_duration
from orchestrator.yamlio import load_yaml, validation_error_to_config_error

if TYPE_CHECKING:
    from orchestrator.store import Store

EXIT_RUN_FAILED, EXIT_REGRESSION = 5, 8
_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MatrixEntry(_Strict):
    recipe: str
    nodes: list[StrictInt] = Field(default_factory=lambda: [1], min_length=1)
    repeats: StrictInt = Field(1, ge=1, le=100)
    params: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @field_validator("nodes")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        if any(n <= 0 for n in value):
            raise ValueError("node counts must be positive")
        return value


class BaselinePolicy(_Strict):
    """Compare with baseline `name`; `update` says when this pipeline's results replace it."""

    name: str | None = None
    update: Literal["never", "if-missing", "on-pass", "always"] = "if-missing"
    tolerances: Tolerances = Field(default_factory=Tolerances)


class PipelineSpec(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    cluster: ClusterSpec
    skus: list[str] = Field(default_factory=list, description="one cluster per SKU, in turn")
    matrix: list[MatrixEntry] = Field(min_length=1)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    health: HealthPolicy = Field(default_factory=HealthPolicy)
    time_limit_min: StrictInt | None = Field(None, ge=1)
    baseline: BaselinePolicy = Field(default_factory=BaselinePolicy)
    timeout: int = Field(6 * 3600, description="the whole pipeline; sets the expires tag")

    _duration = field_validator("timeout", mode="before")(classmethod(lambda cls, v: parse_duration(v)))

    @model_validator(mode="before")
    @classmethod
    def _cluster_defaults(cls, data: Any) -> Any:
        """cluster.name defaults to the pipeline's name, cluster.nodes to the largest scale."""
        if not isinstance(data, dict) or not isinstance(data.get("cluster", {}), dict):
            return data
        cluster = dict(data.get("cluster") or {})
        cluster.setdefault("name", data.get("name"))
        scales = [n for e in data.get("matrix") or [] if isinstance(e, dict)
                  for n in e.get("nodes") or [1] if isinstance(n, int)]
        cluster.setdefault("nodes", max(scales, default=1))
        return {**data, "cluster": cluster}


class PipelineInterrupted(BaseException):
    """SIGINT/SIGTERM/SIGHUP arrived: unwinds like KeyboardInterrupt so teardown runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def load_pipeline_spec(path: Path) -> PipelineSpec:
    """PipelineSpec from YAML; errors name `file:line`."""
    data, lines = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a mapping of keys at the top level")
    try:
        return PipelineSpec.model_validate(data)
    except ConfigError:
        raise
    except ValidationError as exc:
        raise validation_error_to_config_error(exc, str(path), lines) from None


def cluster_specs(spec: PipelineSpec) -> list[ClusterSpec]:
    """One ClusterSpec per SKU (named <cluster>-<sku>), expiring one hour after the timeout."""
    from orchestrator.catalog import lookup
    expires_h = spec.timeout / 3600 + 1.0
    base = spec.cluster.model_copy(update={"azure": spec.cluster.azure.model_copy(
        update={"expires_hours": min(spec.cluster.azure.expires_hours, expires_h)})})
    if not spec.skus:
        return [base]
    out = []
    for sku in spec.skus:
        row = lookup(sku)
        tag = (row.aliases[0] if row.aliases else row.name).lower().replace("_", "-")
        data = base.model_dump() | {"sku": row.name, "name": f"{base.name}-{tag}"[:39].rstrip("-")}
        out.append(ClusterSpec.model_validate(data))
    return out


def run_specs(spec: PipelineSpec, cluster: str) -> list[RunSpec]:
    extra = {"time_limit_min": spec.time_limit_min} if spec.time_limit_min else {}
    return [RunSpec(recipe=e.recipe, cluster=cluster, nodes=list(e.nodes), repeats=e.repeats,
                    params=dict(e.params), retry=spec.retry, health=spec.health, **extra)
            for e in spec.matrix]


@dataclass
class _State:
    """What the pipeline has done so far; teardown and the summary read it."""

    spec: PipelineSpec
    store: Store
    on_line: Callable[[str], None] | None
    started: datetime = field(default_factory=utcnow)
    stages: list[StageRecord] = field(default_factory=list)
    clusters: dict[str, str] = field(default_factory=dict)
    skus: dict[str, str | None] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)
    sweeps: list[str] = field(default_factory=list)
    stop: AzbenchError | None = None
    signum: int | None = None
    quiet: bool = False  # teardown running: signals are noted, never raised

    def line(self, text: str) -> None:
        if self.on_line:
            self.on_line(text)

    @contextmanager
    def stage(self, name: str, cluster: str | None = None) -> Iterator[StageRecord]:
        rec = StageRecord(stage=name, cluster=cluster)
        self.stages.append(rec)
        self.line(f"[{self.spec.name}] {name}{f' {cluster}' if cluster else ''}: started")
        t0 = time.monotonic()
        try:
            yield rec
        except PipelineInterrupted:
            rec.status = "interrupted"
            raise
        except AzbenchError as exc:
            rec.status, rec.message = "failed", str(exc)
            raise
        finally:
            rec.seconds = round(time.monotonic() - t0, 3)
            self.line(f"[{self.spec.name}] {name}{f' {cluster}' if cluster else ''}: {rec.status}"
                      f"{f' ({rec.message})' if rec.message else ''} in {rec.seconds:.1f}s")
            self._event(rec)

    def _event(self, rec: StageRecord) -> None:
        from orchestrator.store_schema import EventRow
        try:
            self.store.add_event(EventRow(kind="pipeline", cluster=rec.cluster,
                                          message=f"{self.spec.name} {rec.stage}: {rec.status}",
                                          data=rec.model_dump(mode="json")))
        except AzbenchError:
            pass  # history is best effort; teardown must not depend on it


def run_pipeline(spec: PipelineSpec, store: Store, *, on_line: Callable[[str], None] | None = None,
                 on_progress: Callable[[Any], None] | None = None,
                 on_event: Callable[[Any], None] | None = None,
                 poll_interval: float = 1.0) -> PipelineResult:
    """Run the whole pipeline; never raises for a failed stage (see summary.status/exit_code).
    Every cluster it brought up (or adopted) is down when this returns."""
    st = _State(spec, store, on_line)
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


def _one_cluster(st: _State, cspec: ClusterSpec, on_progress, on_event, poll: float) -> None:
    from orchestrator import lifecycle
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
        st.signum = st.signum or getattr(exc, "signum", signal.SIGINT)
        _cancel_live(st, cspec.name)
    except AzbenchError as exc:
        st.stop = exc
    finally:
        _teardown(st, cspec)


def _run_entry(st: _State, rspec: RunSpec, on_progress, on_event, poll: float) -> None:
    from orchestrator.runs import run_sweep
    kwargs: dict[str, Any] = {"spec": rspec, "store": st.store, "on_progress": on_progress,
                              "poll_interval": poll}
    if on_event is not None and "on_event" in inspect.signature(run_sweep).parameters:
        kwargs["on_event"] = on_event
    scales = ",".join(map(str, rspec.nodes))
    with st.stage(f"runs {rspec.recipe} nodes={scales} x{rspec.repeats}", rspec.cluster) as rec:
        outcomes = run_sweep(**kwargs)
        st.run_ids += [o.run_id for o in outcomes]
        row = st.store.get_run(outcomes[0].run_id) if outcomes else None
        if row is not None and row.sweep_id and row.sweep_id not in st.sweeps:
            st.sweeps.append(row.sweep_id)
        bad = [o for o in outcomes if o.state != "succeeded"]
        rec.message = f"{len(outcomes) - len(bad)}/{len(outcomes)} runs succeeded"
        if bad:
            rec.status = "failed"


def _health_stage(st: _State, cluster: str) -> None:
    """Summarise the gates that ran before every attempt (health runs inside each run)."""
    with st.stage("health", cluster) as rec:
        # Listed right after this cluster's `up`: the gates ran before the runs they guard.
        ups = [i for i, g in enumerate(st.stages) if g.stage == "up" and g.cluster == cluster]
        st.stages.insert(ups[-1] + 1 if ups else len(st.stages) - 1, st.stages.pop())
        if not st.spec.health.enabled:
            rec.status, rec.message = "skipped", "health.enabled is false"
            return
        gates = [e for rid in st.run_ids for e in st.store.list_events(run_id=rid)
                 if e.kind == "health_gate" and st.store.get_run(rid).cluster == cluster]
        excluded = sorted({n for e in gates for n in (e.data.get("failed") or {})})
        bw = [e.data["busbw_gbps"] for e in gates if isinstance(e.data.get("busbw_gbps"), (int, float))]
        rec.message = (f"{len(gates)} gate(s) before attempts, nodes failed: "
                       f"{', '.join(excluded) or 'none'}"
                       + (f", all-reduce busbw {min(bw):.3g}-{max(bw):.3g} GB/s" if bw else ""))


def _cancel_live(st: _State, cluster: str) -> None:
    """scancel and mark cancelled the unfinished runs this pipeline started on `cluster`."""
    from orchestrator.runs import cancel_runs
    live = [r.id for r in st.store.list_runs(cluster=cluster)
            if r.state not in FINAL_RUN_STATES and r.created_at >= st.started]
    if not live:
        return
    with st.stage("cancel", cluster) as rec:
        try:
            jobs = cancel_runs(st.store, live)
            rec.message = f"cancelled {len(live)} run(s), Slurm job(s) {', '.join(jobs) or 'none'}"
        except AzbenchError as exc:
            rec.status, rec.message = "failed", str(exc)


def _teardown(st: _State, cspec: ClusterSpec) -> None:
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


def down_cluster(cspec: ClusterSpec, store: Store) -> str:
    """Tear down `cspec`'s cluster, idempotently; also one whose `up` was cut short before the
    store knew it (the provider's describe finds it). Returns the final state."""
    from orchestrator import lifecycle
    from orchestrator.providers import get_provider
    if store.get_cluster(cspec.name) is None:
        found = get_provider(cspec.provider).describe(cspec.name)
        if found is None:
            return "not created"
        store.save_cluster(found, cspec.model_dump_json())
    lifecycle.down(cspec.name, store)
    return ClusterState.TERMINATED.value


def _finish(st: _State, analyse: bool = True) -> PipelineResult:
    from orchestrator.pipeline_results import analyse as analyse_results
    report, comparison, cases, updated = analyse_results(st, with_results=analyse)
    status, code, message = _verdict(st, cases, comparison)
    summary = PipelineSummary(
        pipeline=st.spec.name, status=status, exit_code=code, message=message,
        started_at=st.started, ended_at=utcnow(), clusters=dict(st.clusters), sweeps=list(st.sweeps),
        stages=list(st.stages), cases=cases, baseline=st.spec.baseline.name,
        baseline_updated=updated, comparison=comparison.to_json_data() if comparison else None)
    st.line(f"[{st.spec.name}] {status}: {message}")
    return PipelineResult(summary=summary, report=report, comparison=comparison)


def _verdict(st: _State, cases: Sequence[ScaleCase], cmp: Comparison | None) -> tuple[Any, int, str]:
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
def _signals_raise(st: _State) -> Iterator[None]:
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
def _signals_deferred(st: _State) -> Iterator[None]:
    previous, st.quiet = st.quiet, True
    try:
        yield
    finally:
        st.quiet = previous
