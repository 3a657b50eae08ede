"""The scale health gate over Slurm: the use case behind `azbench health` and the attempt's gate.

`gate_cluster`/`gate_nodes` pick the nodes (one sinfo) and the leaf switches (one `scontrol show
topology`), run runs/fleet.py's rounds through SlurmProber (one `srun` of templates/
health_probe.sh per round, or per chunk of nodes on an emulated cluster; on GPU SKUs the group
collectives are nccl-tests runs, one per group, side by side), then drain what was flagged with
`scontrol update ... state=DRAIN reason="azbench: ..."`. Every command goes through a Runner,
so the same code serves the local cluster and an SSH login node; every value is shlex-quoted.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shlex
from pathlib import Path
from typing import Mapping, Sequence

from orchestrator.errors import ConfigError, LaunchError
from orchestrator.paths import templates_dir
from orchestrator.results.stragglers import DEFAULT_TOLERANCE
from orchestrator.runs.fleet import (
    FleetReport,
    GateOptions,
    Probe,
    Verdict,
    candidate_nodes,
    check_fleet,
    natural,
    parse_leaf_switches,
    parse_nccl_round,
    parse_probes,
)
from orchestrator.runs.grouptest import GroupOutcome, GroupTest
from orchestrator.slurm.conf import compress_hostlist

PROBE_SCRIPT = "health_probe.sh"
AHC_PATH = "/opt/azurehpc/test/azurehpc-health-checks/run-health-checks.sh"
NCCL_TESTS = "/opt/nccl-tests/build/all_reduce_perf"  # where Azure's Ubuntu-HPC images ship it
INJECT_VARS = ("AZBENCH_HEALTH_SLOW_NODES", "AZBENCH_HEALTH_BAD_NODES", "AZBENCH_HEALTH_SLOW_FACTOR")


class SlurmProber:
    """Runs the probe as one srun over the nodes (one task each) through a Runner."""

    def __init__(self, runner, cluster, opts: GateOptions, *, ahc: str | None = None) -> None:
        self.runner, self.cluster, self.opts = runner, cluster, opts
        self.script = f"{(cluster.workdir or '/tmp').rstrip('/')}/azbench-health/{PROBE_SCRIPT}"
        self.ahc = ahc
        self.calls = 0
        self._staged = False

    def probe(self, nodes: Sequence[str]) -> dict[str, Probe]:
        """Probe lines of `nodes`: one srun, or one per chunk of max_nodes_per_srun."""
        self._stage()
        size = self.opts.max_nodes_per_srun or len(nodes)
        probes: dict[str, Probe] = {}
        for i in range(0, len(nodes), max(size, 1)):
            chunk = nodes[i:i + size]
            self.calls += 1
            result = self.runner.run(self.command(chunk), timeout=self.opts.round_timeout_s)
            found = parse_probes(result.stdout)
            if not found and not result.ok:
                raise LaunchError(f"health probe srun failed on {compress_hostlist(list(chunk))}: "
                                  f"{_last_line(result.stderr)}")
            probes.update(found)
        return probes

    def command(self, nodes: Sequence[str]) -> str:
        q = shlex.quote
        n = len(nodes)
        part = f" --partition={q(self.cluster.partition)}" if self.cluster.partition else ""
        args = (f"--dir {q(self.cluster.workdir or '/tmp')} --reps {self.opts.reps} "
                f"--iters {self.opts.iters} --link-gbps {self.opts.link_gbps:g}"
                + (f" --ahc {q(self.ahc)}" if self.ahc else ""))
        minutes = max(1, math.ceil(self.opts.round_timeout_s / 60))
        return (env_prefix(self.cluster.env) + injection_exports()
                + f"srun --nodes={n} --ntasks={n} --ntasks-per-node=1 --nodelist="
                  f"{q(compress_hostlist(list(nodes)))}{part} --job-name=azbench-health "
                  f"--time={minutes} --kill-on-bad-exit=0 --quiet sh {q(self.script)} {args}")

    def nccl(self, tests: Sequence[GroupTest]) -> list[GroupOutcome]:
        """One all_reduce_perf per group, all groups of the round side by side (one shell call)."""
        self.calls += 1
        result = self.runner.run(nccl_round_command(tests, self.cluster, self.opts),
                                 timeout=self.opts.round_timeout_s)
        return parse_nccl_round(result.stdout, len(tests), self.opts)

    def _stage(self) -> None:
        if self._staged:
            return
        made = self.runner.run(f"mkdir -p {shlex.quote(str(Path(self.script).parent))}", timeout=60)
        if not made.ok:
            raise LaunchError(f"cannot create {Path(self.script).parent}: {_last_line(made.stderr)}")
        self.runner.put(templates_dir() / PROBE_SCRIPT, self.script)
        self._staged = True



def nccl_round_command(tests: Sequence[GroupTest], cluster, opts: GateOptions,
                       binary: str = NCCL_TESTS) -> str:
    """Shell text: every group's all_reduce_perf in the background, then one line per group,
    `AZBENCH_GROUP <i> <avg bus bandwidth GB/s or empty>`. Untested on GPUs so far."""
    q, g = shlex.quote, max(opts.gpus_per_node, 1)
    minutes = max(1, math.ceil(opts.round_timeout_s / 60))
    part = f" --partition={q(cluster.partition)}" if cluster.partition else ""
    out = "${TMPDIR:-/tmp}/azbench-nccl-$$"
    lines = [env_prefix(cluster.env) + f"mkdir -p {out}"]
    for i, t in enumerate(tests):
        lines.append(
            f"srun --nodes={len(t.nodes)} --nodelist={q(compress_hostlist(list(t.nodes)))}{part} "
            f"--ntasks-per-node={g} --gpus-per-node={g} --job-name=azbench-nccl --time={minutes} "
            f"--kill-on-bad-exit=1 --quiet {q(binary)} -b 1G -e 1G -f 2 -g 1 > {out}/{i} 2>&1 &")
    lines.append("wait")
    lines.append(f"for i in $(seq 0 {len(tests) - 1}); do echo \"AZBENCH_GROUP $i $(sed -n "
                 f"'s/^# *Avg bus bandwidth *: *//p' {out}/$i | tail -n 1)\"; done; rm -rf {out}")
    return "\n".join(lines)



def drain(runner, env: Mapping[str, str], verdicts: Sequence[Verdict]) -> list[str]:
    """`scontrol update ... state=DRAIN reason="azbench: ..."` for each flagged node, in one
    shell call; returns the nodes drained."""
    by_node: dict[str, list[str]] = {}
    for v in verdicts:
        by_node.setdefault(v.node, []).append(v.reason)
    if not by_node:
        return []
    cmds = [f"scontrol update nodename={shlex.quote(node)} state=DRAIN "
            f"reason={shlex.quote(('azbench: ' + '; '.join(reasons))[:240])}"
            for node, reasons in by_node.items()]
    result = runner.run(env_prefix(env) + " && ".join(cmds), timeout=120)
    if not result.ok:
        raise LaunchError(f"draining {', '.join(by_node)} failed: {_last_line(result.stderr)}")
    return sorted(by_node, key=natural)


def undrain(runner, env: Mapping[str, str], node: str) -> None:
    """Return a drained node to service (`state=RESUME`)."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", node):
        raise ConfigError(f"--undrain: {node!r} is not a node name")
    result = runner.run(env_prefix(env) + f"scontrol update nodename={shlex.quote(node)} state=RESUME",
                        timeout=60)
    if not result.ok:
        msg = _last_line(result.stderr)
        if "invalid node name" in msg.lower():
            raise ConfigError(f"--undrain: no node {node} in the cluster")
        if "invalid node state" in msg.lower():
            raise ConfigError(f"--undrain: {node} is not drained or down (nothing to return)")
        raise LaunchError(f"undrain {node} failed: {msg}")


def leaf_switches(runner, env: Mapping[str, str]) -> dict[str, list[str]]:
    """The cluster's leaf switches from Slurm's topology; empty when it has none."""
    result = runner.run(env_prefix(env) + "scontrol show topology", timeout=60)
    return parse_leaf_switches(result.stdout) if result.ok else {}



def env_prefix(env: Mapping[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}; " for k, v in sorted(env.items()))


def injection_exports() -> str:
    """The test switches set in this process, passed on to the probes (also over SSH)."""
    return env_prefix({k: os.environ[k] for k in INJECT_VARS if os.environ.get(k)})



def options_for(cluster, tolerance: float = DEFAULT_TOLERANCE) -> GateOptions:
    """Thresholds for this cluster's SKU: the catalog's bus bandwidth on GPU SKUs."""
    from orchestrator.clusters.catalog import lookup
    row = lookup(cluster.sku)
    link = row.expected_busbw_gbps if row.gpus_per_vm and row.expected_busbw_gbps else 100.0
    return GateOptions(tolerance=tolerance, link_gbps=float(link),
                       max_nodes_per_srun=256 if cluster.provider == "local" else 0,
                       gpus_per_node=row.gpus_per_vm)


def gate_cluster(cluster, *, only: str | None = None, tolerance: float = DEFAULT_TOLERANCE,
                 drain_bad: bool = True, runner=None) -> FleetReport:
    """`azbench health`: the usable nodes (one sinfo), restricted to `only`, then gate_nodes."""
    from orchestrator.runs.access import launcher_for, runner_for
    runner = runner or runner_for(cluster)
    nodes = candidate_nodes(launcher_for(cluster, runner).node_states(), only)
    if not nodes:
        raise ConfigError(f"cluster '{cluster.name}' has no usable node to check")
    return gate_nodes(runner, cluster, nodes, tolerance=tolerance, drain_bad=drain_bad)


def gate_nodes(runner, cluster, nodes: Sequence[str], *, tolerance: float = DEFAULT_TOLERANCE,
               drain_bad: bool = True, with_ahc: bool = True) -> FleetReport:
    """The gate on `nodes` (leaf switches from one scontrol call), then drain what it flagged
    unless it is a fabric-wide fault or `drain_bad` is False. Also run before every attempt,
    there without azurehpc-health-checks (`with_ahc`), whose full suite takes minutes."""
    from orchestrator.clusters.catalog import lookup
    opts = options_for(cluster, tolerance)
    gpus = lookup(cluster.sku).gpus_per_vm
    ahc = AHC_PATH if gpus and with_ahc else None
    if gpus:  # real collectives on GPU nodes: nccl-tests where installed, else none
        has = runner.run(f"test -x {shlex.quote(NCCL_TESTS)}", timeout=60).ok
        opts = dataclasses.replace(opts, collective="nccl" if has else "none")
    report = check_fleet(SlurmProber(runner, cluster, opts, ahc=ahc), nodes,
                         leaf_switches(runner, cluster.env), opts)
    if drain_bad and not report.fabric:
        report.drained = drain(runner, cluster.env, report.verdicts)
    return report


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""
