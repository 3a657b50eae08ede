"""`azbench fabric test`: collectives as a benchmark, run as Slurm jobs and stored like results.

One job per node count (and with `racks`, one inside each NVLink rack, then one across racks with
one node of each): the chosen collectives one after another at message sizes up to the SKU's
baseline size. On GPU sizes each is nccl-tests' `<collective>_perf` from the image (Azure's HPC
images ship it in /opt/nccl-tests/build) with NCCL_DEBUG=INFO and the SKU's network settings, so
NCCL's own log says which transport it used; on CPU sizes (the local cluster, the D-series
rehearsal) azbench's gloo runner (templates/fabric_collectives.py) with two ranks per node,
labelled CPU, with no baseline. Each collective's run becomes one stored FabricResultRow
(fabric/stored.py) and is judged by fabric/judge.py. Everything goes through the
cluster's Launcher (its `gate` part: jobs on chosen nodes).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal

from orchestrator.errors import ConfigError, LaunchError, MissingCapability
from orchestrator.hardware.catalog import GpuSku, lookup
from orchestrator.models import Cluster, FabricTestPlan, JobRef, JobState, utcnow
from orchestrator.fabric.judge import Check, Status, expected_for, human_size, run_checks, worst, worst_of
from orchestrator.fabric.nccltests import COLLECTIVES, NcclRun
from orchestrator.fabric.reading import read_bytes
from orchestrator.fabric.stored import run_rows
from orchestrator.slurm.conf import natural_key
from orchestrator.seams import Access, LauncherParts
from orchestrator.store.database import Store

NCCL_TESTS = "/opt/nccl-tests/build/all_reduce_perf"  # where Azure's Ubuntu-HPC images ship it (the gate runs it)
NCCL_TESTS_DIR = str(PurePosixPath(NCCL_TESTS).parent)
CPU_RANKS_PER_NODE = 2  # so that one node measures something (two ranks talk over loopback)
# CPU sizes: 1 KiB to 1 MiB by 4 is six sizes, seconds per collective on two shared cores.
CPU_SIZES = ("1K", "1M", 4)
# GPU sizes: nccl-tests' README sweep (-b 8 ... -f 2) up to the SKU's baseline size.
GPU_MIN, GPU_FACTOR = "8", 2
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class FabricJob:
    """One fabric test job and what it stored."""

    scope: str
    nodes: int
    nodelist: list[str] = field(default_factory=list)
    job_id: str | None = None
    state: str = ""
    stored: list[int] = field(default_factory=list)
    runs: list[dict[str, object]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    @property
    def verdict(self) -> Status:
        return "fail" if self.errors else worst(self.checks)


@dataclass
class FabricOutcome:
    cluster: str
    sku: str
    device: str
    collectives: list[str]
    jobs: list[FabricJob] = field(default_factory=list)

    @property
    def verdict(self) -> Status:
        return worst_of(j.verdict for j in self.jobs)


def check_collectives(names: Sequence[str]) -> tuple[str, ...]:
    """The collectives asked for, in COLLECTIVES' order; ConfigError naming an unknown one."""
    unknown = [n for n in names if n not in COLLECTIVES]
    if unknown:
        raise ConfigError(f"--collectives: {', '.join(unknown)} unknown (choose from {', '.join(COLLECTIVES)})")
    return tuple(c for c in COLLECTIVES if c in set(names))


def sizes_for(row: GpuSku) -> tuple[str, str, int]:
    """(min, max, factor): CPU_SIZES on CPU sizes; GPU sizes sweep up to the baseline's size."""
    if not row.gpus_per_vm:
        return CPU_SIZES
    base = row.nccl.message if row.nccl is not None else "16G"
    return GPU_MIN, base, GPU_FACTOR


def plans(cluster: Cluster, row: GpuSku, *, scopes: Sequence[tuple[str, int, Sequence[str]]],
          collectives: Sequence[str], python: str, stamp: str) -> list[FabricTestPlan]:
    """One job per (scope, node count, exact nodes or none) on `cluster`."""
    gpus = row.gpus_per_vm
    lo, hi, factor = sizes_for(row)
    root = f"{(cluster.workdir or '/tmp').rstrip('/')}/azbench-fabric"
    env = {**dict(row.network.env), "NCCL_DEBUG": "INFO"} if gpus else {}
    out = []
    for i, (_, nodes, nodelist) in enumerate(scopes):
        test_id = _SAFE.sub("-", f"{stamp}-{i}-n{nodes}")
        out_dir = f"{root}/{test_id}"
        out.append(FabricTestPlan(
            test_id=test_id, nodes=nodes, nodelist=tuple(nodelist), out_dir=out_dir,
            tasks_per_node=gpus or CPU_RANKS_PER_NODE, gpus_per_node=gpus, collectives=tuple(collectives),
            min_size=lo, max_size=hi, step_factor=factor, iters=20 if gpus else 5, warmup=5 if gpus else 1,
            time_limit_min=(10 * len(collectives)) if gpus else 10,
            nccl_tests_dir=NCCL_TESTS_DIR if gpus else "", python="" if gpus else python,
            script="" if gpus else f"{out_dir}/fabric_collectives.py",
            env=tuple(sorted(env.items())), partition=cluster.partition))
    return out


def scopes_for(node_counts: Sequence[int], racks: dict[str, list[str]] | None,
               usable: Sequence[str]) -> list[tuple[str, int, list[str]]]:
    """(label, nodes, exact nodes or []) per job: each node count (Slurm picks the nodes), then
    with `racks` each rack's usable nodes and one usable node of each rack together."""
    out: list[tuple[str, int, list[str]]] = []
    for n in node_counts:
        if n < 1 or n > len(usable):
            raise ConfigError(f"--nodes: {n} nodes asked, the cluster has {len(usable)} usable")
        out.append((f"{n} node{'s' if n != 1 else ''}", n, []))
    if racks is not None:
        ok = set(usable)
        inside = {name: sorted((n for n in members if n in ok), key=natural_key) for name, members in racks.items()}
        inside = {name: members for name, members in inside.items() if members}
        for name, members in inside.items():
            out.append((f"inside rack {name}", len(members), members))
        if len(inside) > 1:
            firsts = [members[0] for members in inside.values()]
            out.append((f"across {len(firsts)} racks (one node each)", len(firsts), firsts))
    return out


def fabric_test(cluster: Cluster, access: Access, store: Store, *, node_counts: Sequence[int],
                collectives: Sequence[str] = COLLECTIVES, racks: bool = False, poll_interval: float = 1.0,
                timeout_s: float | None = None, clock: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], None] = time.sleep) -> FabricOutcome:
    """Run the jobs one after another, store every collective's run, judge each."""
    parts = access.launcher.parts()
    if (gate := parts.gate) is None:
        raise MissingCapability(cluster.name, access.launcher.backend, "run the fabric test on chosen nodes")
    chosen = check_collectives(collectives)
    if not chosen:
        raise ConfigError("--collectives: name at least one collective")
    row = lookup(cluster.sku)
    scopes = _scopes(cluster, access, parts, node_counts, racks)
    if row.gpus_per_vm:
        _require_nccl_tests(access, chosen)
    stamp = f"{cluster.name}-{utcnow():%Y%m%dT%H%M%S}"
    device: Literal["GPU", "CPU"] = "GPU" if row.gpus_per_vm else "CPU"
    outcome = FabricOutcome(cluster=cluster.name, sku=row.name, device=device, collectives=list(chosen))
    expected = expected_for(row)
    for (scope, nodes, nodelist), plan in zip(scopes, plans(cluster, row, scopes=scopes, collectives=chosen,
                                                             python=access.python, stamp=stamp)):
        job = FabricJob(scope=scope, nodes=nodes, nodelist=list(nodelist))
        outcome.jobs.append(job)
        ref = gate.run_fabric_test(plan)
        job.job_id = ref.job_id
        limit = timeout_s if timeout_s is not None else plan.time_limit_min * 60 + 600
        state = _wait(access, ref, limit, poll_interval, clock, sleep)
        job.state = state.value if state else f"cancelled after {limit:g}s"
        reading = read_bytes(access.launcher.tail(plan.output(ref.job_id)), plan.output(ref.job_id), name_hint="")
        runs = [r for r in reading.runs if r.sizes]
        log = reading.log
        found = {r.collective for r in runs}
        job.errors = [f"{c}: no result in the job's output (job {ref.job_id} {job.state})"
                      for c in chosen if c not in found]
        rows = run_rows(reading.sha256, runs, log, source="test", device=device, cluster=cluster.name, sku=row.name,
                        scope=scope, nodes=nodes, job_id=ref.job_id, log_path=plan.output(ref.job_id))
        job.stored = [i for i, _ in store.add_fabric_results(rows)]
        for run in runs:
            checks = run_checks(run, log, expected, device=device)
            job.checks += checks
            job.runs.append(_run_summary(run, checks, device))
    return outcome


def _scopes(cluster: Cluster, access: Access, parts: LauncherParts, node_counts: Sequence[int],
            racks: bool) -> list[tuple[str, int, list[str]]]:
    """The jobs to run, as scopes_for makes them from the usable nodes (and, with `racks`, the
    leaf switches). Raises MissingCapability where racks are asked of a launcher that cannot
    list them, ConfigError where the cluster has none or nothing was asked."""
    if racks and parts.nodes is None:
        raise MissingCapability(cluster.name, access.launcher.backend, "list its racks (leaf switches)")
    usable = sorted((n for n, info in access.launcher.node_states().items() if info.usable), key=natural_key)
    groups = parts.nodes.leaf_switches() if racks and parts.nodes is not None else None
    if racks and not groups:
        raise ConfigError(f"--racks: cluster '{cluster.name}' has no racks in its topology")
    scopes = scopes_for(node_counts, groups, usable)
    if not scopes:
        raise ConfigError("give --nodes, --racks or both")
    return scopes


def _require_nccl_tests(access: Access, chosen: Sequence[str]) -> None:
    """ConfigError naming each chosen collective's nccl-tests binary missing on the login node
    (checked only where there is a login shell)."""
    if access.shell is None:
        return
    missing = [c for c in chosen if not access.shell.run(f"test -x {NCCL_TESTS_DIR}/{c}_perf", timeout=60).ok]
    if missing:
        raise ConfigError(f"nccl-tests not found on the login node: {', '.join(f'{c}_perf' for c in missing)} "
                          f"missing in {NCCL_TESTS_DIR} (Azure's HPC images ship it there)")


def _run_summary(run: NcclRun, checks: list[Check], device: str) -> dict[str, object]:
    peak, largest = run.peak, run.largest
    return {"collective": run.collective, "ranks": run.ranks, "hosts": run.hosts,
            "gpus_per_host": run.gpus_per_host if device == "GPU" else None,
            "peak_busbw": peak.busbw if peak else None, "peak_size": human_size(peak.size) if peak else None,
            "largest_size": human_size(largest.size) if largest else None,
            "busbw_at_largest": largest.busbw if largest else None, "wrong": run.wrong,
            "verdict": worst(checks)}


def _wait(access: Access, ref: JobRef, timeout: float, interval: float, clock: Callable[[], float],
          sleep: Callable[[float], None]) -> JobState | None:
    """The job's final state, or None after cancelling it at `timeout`."""
    deadline = clock() + timeout
    while clock() < deadline:
        status = access.launcher.poll([ref])[ref.job_id]
        if status.state.terminal:
            return status.state
        sleep(interval)
    try:
        access.launcher.cancel(ref)
    except LaunchError:
        pass  # the output read next says what it did; a cancel that failed changes nothing there
    return None


__all__ = ["fabric_test", "FabricOutcome", "FabricJob", "check_collectives", "scopes_for", "plans"]
