"""The pre-run health gate: a job across the nodes a run may use, and its verdicts.

Before every attempt azbench picks the usable nodes it may run on (never a suspect), has the
launcher run the gate job there (`Launcher.run_health_check` with a HealthCheckPlan:
templates/health_check.py per task: disk, memory, and on GPU SKUs GPU count, ECC, XID in dmesg
and IB port state; then an all-reduce bus-bandwidth test, NCCL on GPUs or gloo on CPUs, against
the catalog's expected_busbw_gbps with HealthPolicy's warn/fail fractions; on GPU sizes with a
published baseline, catalog.NcclBaseline's message size, expected figure, warn level and replace
level instead), and reads one verdict per node. The run is then pinned to the healthy checked
nodes (everything else is excluded), and each failed node's reason is returned for the store.
The plan, parsing and node choice are pure; `run_gate` does the round trip through the launcher.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from orchestrator.hardware.catalog import lookup
from orchestrator.specs.run import HealthPolicy
from orchestrator.models import Cluster, HealthCheckPlan, JobRef, JobState, NodeInfo
from orchestrator.paths import RunLayout
from orchestrator.seams import Launcher, lacks
from orchestrator.slurm.conf import natural_key

_LINE = re.compile(r"AZBENCH_HEALTH (\{.*\})\s*$")


@dataclass(frozen=True)
class CheckLine:
    node: str
    check: str
    status: str
    value: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class GateResult:
    """Verdicts of one gate job. `failed` maps node -> reason; `fabric` is a cluster-wide fault."""

    checked: tuple[str, ...]
    failed: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    fabric: str = ""
    busbw_gbps: float | None = None
    job_id: str | None = None
    seconds: float = 0.0

    @property
    def healthy(self) -> list[str]:
        return [n for n in self.checked if n not in self.failed]


def choose_nodes(infos: Mapping[str, NodeInfo], exclude: Sequence[str], wanted: int) -> list[str]:
    """The usable nodes to gate for a run of `wanted` nodes: never excluded, a spare or two
    beyond `wanted` (so one bad node does not starve the run), in natural name order."""
    spare = max(1, math.ceil(wanted / 8))
    usable = sorted((n for n, info in infos.items() if info.usable and n not in set(exclude)),
                    key=natural_key)
    return usable[: wanted + spare]


def parse_gate_output(text: str, checked: Sequence[str], job_state: JobState | None = None) -> GateResult:
    """Verdicts from the job's output. A node with a failing check, or silent while others
    reported, fails; a collective that failed everywhere, or busbw under the fail fraction, is
    a fabric fault (no single node to blame)."""
    lines = [CheckLine(**json.loads(m.group(1))) for m in map(_LINE.search, text.splitlines()) if m]
    failed: dict[str, str] = {}
    warnings: list[str] = []
    for line in lines:
        if line.node in checked and line.status == "fail" and line.check != "allreduce":
            failed.setdefault(line.node, f"{line.check}: {line.detail or line.value}")
        elif line.status == "warn":
            warnings.append(f"{line.node} {line.check}: {line.detail}")
    reported = {ln.node for ln in lines}
    collective_failed = {ln.node for ln in lines if ln.check == "allreduce" and ln.status == "fail"}
    silent = [n for n in checked if n not in reported]
    for node in silent if reported else []:
        failed.setdefault(node, "no report from the health check (node hung or died)")
    fabric = ""
    busbw = next((ln for ln in lines if ln.check == "allreduce_busbw"), None)
    if not reported:
        fabric = f"the health job printed no verdict (job {job_state.value if job_state else '?'})"
    elif collective_failed and not silent and collective_failed >= set(checked) - set(failed):
        fabric = "all-reduce failed on every node: " + next(
            ln.detail for ln in lines if ln.check == "allreduce")
    elif busbw is not None and busbw.status == "fail":
        fabric = f"all-reduce busbw {busbw.value} {busbw.detail}"
    return GateResult(checked=tuple(checked), failed=failed, warnings=tuple(warnings),
                      fabric=fabric, busbw_gbps=busbw.value if busbw else None)


def health_plan(*, run_id: str, attempt: int, nodes: Sequence[str], out_dir: str, script: str,
                check_dir: str, python: str, sku: str, policy: HealthPolicy,
                partition: str | None = None, size_mb: float = 4.0) -> HealthCheckPlan:
    """The gate's job for these nodes and SKU: the catalog's expected bus bandwidth with the
    policy's fractions, or on GPU sizes with a published baseline its message size, expected
    figure and warn level (fractions the spec sets win)."""
    row = lookup(sku)
    expected, warn_frac, fail_frac = row.expected_busbw_gbps or 0, policy.busbw_warn_fraction, policy.busbw_fail_fraction
    if row.nccl is not None and row.gpus_per_vm:  # the published baseline: its size, expected and warn
        base, chosen = row.nccl, policy.model_fields_set  # fractions the spec sets win
        expected, size_mb = base.reference_gbps, base.message_mb
        if "busbw_warn_fraction" not in chosen:
            warn_frac = base.warn_fraction
        if base.replace_gbps and "busbw_fail_fraction" not in chosen:
            fail_frac = base.replace_gbps / base.reference_gbps
    return HealthCheckPlan(
        run_id=run_id, attempt=attempt, nodes=tuple(nodes), out_dir=out_dir, script=script,
        check_dir=check_dir, python=python, gpus_per_node=row.gpus_per_vm, ib_ports=row.ib_links,
        expected_busbw=expected, warn_frac=round(warn_frac, 4), fail_frac=round(fail_frac, 4),
        size_mb=size_mb, collective_timeout=max(10, min(policy.timeout // 2, 120)),
        time_limit_min=max(1, math.ceil(policy.timeout / 60)), partition=partition)


def run_gate(launcher: Launcher, cluster: Cluster, *, run_id: str, attempt: int, run_dir: str,
             python: str, nodes: Sequence[str], policy: HealthPolicy, poll_interval: float = 0.5,
             on_submit: Callable[[str], None] | None = None,
             clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> GateResult:
    """Submit the gate on `nodes`, wait (at most policy.timeout), return the verdicts."""
    started = clock()
    layout = RunLayout(run_dir)
    plan = health_plan(
        run_id=run_id, attempt=attempt, nodes=nodes, out_dir=layout.health_dir(attempt),
        script=layout.health_script, check_dir=run_dir, python=python, sku=cluster.sku,
        policy=policy, partition=cluster.partition)
    if (gate := launcher.parts().gate) is None:
        raise lacks(launcher, cluster.name, "run the health gate on chosen nodes", "gate")
    ref = gate.run_health_check(plan)
    if on_submit:
        on_submit(ref.job_id)
    state = _wait(launcher, ref, policy.timeout, poll_interval, clock, sleep)
    out = launcher.tail(plan.output(ref.job_id)).decode(errors="replace")
    result = parse_gate_output(out, list(nodes), state)
    if state is None:
        result = GateResult(result.checked, result.failed, result.warnings,
                            result.fabric or f"the health job ran past {policy.timeout}s")
    return GateResult(result.checked, result.failed, result.warnings, result.fabric,
                      result.busbw_gbps, ref.job_id, clock() - started)


def _wait(launcher: Launcher, ref: JobRef, timeout: float, interval: float, clock: Callable[[], float],
          sleep: Callable[[float], None]) -> JobState | None:
    """The gate job's final state, or None after cancelling it at `timeout`."""
    deadline = clock() + timeout
    while clock() < deadline:
        status = launcher.poll([ref])[ref.job_id]
        if status.state.terminal:
            return status.state
        sleep(interval)
    launcher.cancel(ref)
    return None
