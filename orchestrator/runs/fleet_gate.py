"""The scale health gate on a cluster: the use case behind `azbench health` and the attempt's gate.

`gate_cluster`/`gate_nodes` pick the nodes (one node listing) and the leaf switches (one
topology call), run runs/fleet.py's rounds through LauncherProber (one job step of
templates/health_probe.sh per round, or per chunk of nodes on an emulated cluster; on GPU SKUs
the group collectives are nccl-tests runs, one per group, side by side), then drain what was
flagged. Everything goes through the cluster's Launcher (`health_gate` and `node_control`
capabilities), so the same code serves the local cluster and an SSH login node.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence

from orchestrator.hardware.catalog import lookup
from orchestrator.errors import ConfigError, LaunchError, MissingCapability
from orchestrator.models import Cluster
from orchestrator.paths import templates_dir
from orchestrator.runs.fleet import (
    GATE_MIN_EFFECT,
    FleetReport,
    GateOptions,
    Probe,
    Verdict,
    candidate_nodes,
    check_fleet,
    parse_nccl_round,
    parse_probes,
)
from orchestrator.fabric.gate import FabricGate, gate_fabric
from orchestrator.fabric.judge import Finding
from orchestrator.fabric.runner import NCCL_TESTS
from orchestrator.runs.grouptest import GroupOutcome, GroupTest
from orchestrator.seams import Access, Launcher
from orchestrator.slurm.conf import compress_hostlist, natural_key

PROBE_SCRIPT = "health_probe.sh"
FABRIC_SCRIPT = "fabric_node_check.py"  # the GPU nodes' fabric facts (fabric/gate.py judges them)
AHC_PATH = "/opt/azurehpc/test/azurehpc-health-checks/run-health-checks.sh"
# all_reduce_perf at one message size: the SKU's published baseline size (catalog.NcclBaseline,
# 16G on every ND size). Small messages measure latency, not bandwidth, and flag healthy nodes.
NCCL_MESSAGE = "16G"
NCCL_ARGS = ("-b", NCCL_MESSAGE, "-e", NCCL_MESSAGE, "-f", "2", "-g", "1")
INJECT_VARS = ("AZBENCH_HEALTH_SLOW_NODES", "AZBENCH_HEALTH_BAD_NODES", "AZBENCH_HEALTH_SLOW_FACTOR")
# Nodes per job step on a cluster whose nodes share this machine's cores: one step over 2,048
# emulated nodes overran munge's credential lifetime (300 s), while steps of 256 nodes one after
# another finish in about a tenth of the time each.
EMULATED_STEP_NODES = 256


class LauncherProber:
    """Runs the probe as one job step over the nodes (one task each) through a Launcher."""

    def __init__(self, launcher: Launcher, cluster: Cluster, opts: GateOptions, *,
                 ahc: str | None = None) -> None:
        self.launcher, self.cluster, self.opts = launcher, cluster, opts
        self.workdir = cluster.workdir or "/tmp"
        self.script = f"{self.workdir.rstrip('/')}/azbench-health/{PROBE_SCRIPT}"
        self.ahc = ahc
        self.calls = 0
        self._staged = False

    def probe(self, nodes: Sequence[str]) -> dict[str, Probe]:
        """Probe lines of `nodes`: one step, or one per chunk of max_nodes_per_step."""
        self._stage()
        size = self.opts.max_nodes_per_step or len(nodes)
        probes: dict[str, Probe] = {}
        for i in range(0, len(nodes), max(size, 1)):
            chunk = nodes[i:i + size]
            self.calls += 1
            result = self.launcher.run_on_nodes(chunk, self.argv(), timeout_s=self.opts.round_timeout_s,
                                                env=injected())
            found = parse_probes(result.stdout)
            if not found and not result.ok:
                raise LaunchError(f"health probe failed on {compress_hostlist(list(chunk))}: "
                                  f"{_last_line(result.stderr)}")
            probes.update(found)
        return probes

    def argv(self) -> list[str]:
        args = ["sh", self.script, "--dir", self.workdir, "--reps", str(self.opts.reps),
                "--iters", str(self.opts.iters), "--link-gbps", f"{self.opts.link_gbps:g}"]
        return args + (["--ahc", self.ahc] if self.ahc else [])

    def nccl(self, tests: Sequence[GroupTest]) -> list[GroupOutcome]:
        """One all_reduce_perf per group, all groups of the round side by side (one call)."""
        self.calls += 1
        outputs = self.launcher.run_groups([t.nodes for t in tests], [NCCL_TESTS, *nccl_args(self.opts)],
                                           gpus_per_node=self.opts.gpus_per_node,
                                           timeout_s=self.opts.round_timeout_s)
        return parse_nccl_round(outputs, self.opts)

    def _stage(self) -> None:
        if not self._staged:
            self.launcher.stage_file(templates_dir() / PROBE_SCRIPT, self.script)
            self._staged = True


def fabric_probe(launcher: Launcher, cluster: Cluster, opts: GateOptions,
                 imex: bool) -> Callable[[Sequence[str]], str]:
    """A probe of the fabric checks (templates/fabric_node_check.py, staged once) on the nodes it
    is given, one job step per chunk as the health probe; their combined output."""
    script = f"{(cluster.workdir or '/tmp').rstrip('/')}/azbench-health/{FABRIC_SCRIPT}"
    staged: list[bool] = []

    def probe(nodes: Sequence[str]) -> str:
        if not staged:
            launcher.stage_file(templates_dir() / FABRIC_SCRIPT, script)
            staged.append(True)
        size = opts.max_nodes_per_step or len(nodes)
        argv = ["python3", script, *(["--imex"] if imex else [])]
        return "\n".join(launcher.run_on_nodes(nodes[i:i + size], argv, timeout_s=opts.round_timeout_s,
                                               env=injected()).stdout for i in range(0, len(nodes), max(size, 1)))
    return probe


def nccl_args(opts: GateOptions) -> list[str]:
    """all_reduce_perf's arguments at the gate's message size."""
    return ["-b", opts.nccl_message, "-e", opts.nccl_message, "-f", "2", "-g", "1"]


def drain(launcher: Launcher, verdicts: Sequence[Verdict]) -> list[str]:
    """Drain each flagged node with its reasons ("azbench: ..."); returns the nodes drained."""
    by_node: dict[str, list[str]] = {}
    for v in verdicts:
        by_node.setdefault(v.node, []).append(v.reason)
    if not by_node:
        return []
    launcher.drain({node: "azbench: " + "; ".join(reasons) for node, reasons in by_node.items()})
    return sorted(by_node, key=natural_key)


def undrain(cluster: Cluster, access: Access, node: str) -> None:
    """Return a drained node to service; ConfigError when it is unknown or not drained."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", node):
        raise ConfigError(f"--undrain: {node!r} is not a node name")
    _require(access.caps.node_control, cluster, access, "return nodes to service")
    try:
        access.launcher.resume([node])
    except ConfigError as exc:
        raise ConfigError(f"--undrain: {exc.message}") from None


def injected() -> dict[str, str]:
    """The test switches set in this process, passed on to the probes (also over SSH)."""
    return {k: os.environ[k] for k in INJECT_VARS if os.environ.get(k)}


def options_for(cluster: Cluster, access: Access, tolerance: float = GATE_MIN_EFFECT) -> GateOptions:
    """Thresholds for this cluster's SKU: on GPU SKUs the published all-reduce baseline
    (catalog.NcclBaseline: message size, expected bus bandwidth, warn level as the threshold)."""
    row = lookup(cluster.sku)
    opts = GateOptions(tolerance=tolerance, gpus_per_node=row.gpus_per_vm,
                       max_nodes_per_step=EMULATED_STEP_NODES if access.caps.emulated_nodes else 0)
    base = row.nccl if row.gpus_per_vm else None
    if base is not None:
        return dataclasses.replace(opts, link_gbps=base.reference_gbps,
                                   link_fail_fraction=base.warn_fraction, nccl_message=base.message)
    if row.gpus_per_vm and row.expected_busbw_gbps:
        return dataclasses.replace(opts, link_gbps=float(row.expected_busbw_gbps))
    return opts


def gate_cluster(cluster: Cluster, access: Access, *, only: str | None = None,
                 tolerance: float = GATE_MIN_EFFECT, drain_bad: bool = True) -> FleetReport:
    """`azbench health`: the usable nodes (one node listing), restricted to `only`, then gate_nodes."""
    _require(access.caps.health_gate, cluster, access, "run the health gate")
    nodes = candidate_nodes(access.launcher.node_states(), only)
    if not nodes:
        raise ConfigError(f"cluster '{cluster.name}' has no usable node to check")
    return gate_nodes(access, cluster, nodes, tolerance=tolerance, drain_bad=drain_bad)


def gate_nodes(access: Access, cluster: Cluster, nodes: Sequence[str], *,
               tolerance: float = GATE_MIN_EFFECT, drain_bad: bool = True,
               with_ahc: bool = True) -> FleetReport:
    """The gate on `nodes` (leaf switches from one topology call), then drain what it flagged
    unless it is a fabric-wide fault or `drain_bad` is False. Also run before every attempt,
    there without azurehpc-health-checks (`with_ahc`), whose full suite takes minutes."""
    opts = options_for(cluster, access, tolerance)
    gpus = lookup(cluster.sku).gpus_per_vm
    ahc = AHC_PATH if gpus and with_ahc else None
    if gpus:  # real collectives on GPU nodes: nccl-tests where installed, else none
        has = access.shell is not None and access.shell.run(f"test -x {NCCL_TESTS}", timeout=60).ok
        opts = dataclasses.replace(opts, collective="nccl" if has else "none")
    launcher = access.launcher
    switches = launcher.leaf_switches() if access.caps.node_control else {}
    fabric: FabricGate | None = None
    if gpus:  # GPU and HCA counts, and on multi-VM NVLink sizes IMEX and the fabric (fabric_gate)
        row = lookup(cluster.sku)
        fabric = gate_fabric(fabric_probe(launcher, cluster, opts, row.nvlink_domain_vms > 1), nodes, row,
                             switches or None)
    rest = [n for n in nodes if fabric is None or n not in set(fabric.flagged)]
    report = (check_fleet(LauncherProber(launcher, cluster, opts, ahc=ahc), rest, switches, opts) if rest
              else FleetReport(checked=[]))
    if fabric is not None:
        report.checked = list(nodes)
        report.verdicts = [fabric_verdict(f) for f in fabric.findings] + report.verdicts
        if fabric.fault:
            report.fabric = fabric.fault + (f"; {report.fabric}" if report.fabric else "")
    if drain_bad and not report.fabric and access.caps.node_control:
        report.drained = drain(launcher, report.verdicts)
    return report


def _require(present: bool, cluster: Cluster, access: Access, what: str) -> None:
    if not present:
        raise MissingCapability(cluster.name, access.launcher.backend, what)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


__all__ = ["LauncherProber", "drain", "undrain", "gate_cluster", "gate_nodes", "options_for"]


def fabric_verdict(f: Finding) -> Verdict:
    """A fabric finding as the fleet report's verdict (a failed check, with its evidence)."""
    return Verdict(f.node, f.check, "fail", f.value, f.threshold, detail=f.evidence)
