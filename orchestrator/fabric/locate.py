"""`azbench fabric locate`: run the rounds of fabric/locate_plan.py on a cluster and name the nodes
that make the fabric slow.

Each collective round is one call of the launcher's `run_groups` (one job step per group, all side
by side, as the health gate's NCCL rounds): on GPU sizes nccl-tests' all_reduce_perf at the row's
baseline message, on CPU sizes azbench's gloo runner (templates/fabric_collectives.py, one rank per
node, so every byte crosses the node's link) at LOCAL_MESSAGE. The per-node round is the gate's:
the scheduler's node states, and on GPU sizes GPU and HCA counts (fabric/gate.py, through the
`probe` the caller gives: runs/locate.py passes the gate's). Suspects are drained only through the
`drain` the caller gives (runs/locate.py: the gate's own path, runs/fleet_gate.drain).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from orchestrator.errors import ConfigError, MissingCapability
from orchestrator.hardware.catalog import GpuSku, lookup
from orchestrator.models import Cluster, NodeInfo
from orchestrator.paths import templates_dir
from orchestrator.fabric.gate import gate_fabric
from orchestrator.fabric.locate_plan import (Collective, Round, Suspect, conclude, controls, judge, judge_against,
                                             pairs, repairs, round_reference)
from orchestrator.fabric.nccltests import parse_runs, parse_size
from orchestrator.fabric.runner import NCCL_TESTS
from orchestrator.seams import Access
from orchestrator.slurm.conf import natural_key

RUNNER = "fabric_collectives.py"
PAIR_SCRIPT = "fabric_pair.sh"
# CPU sizes: one size, large enough that a shaped link (tens of Mbit/s) takes a measurable time
# and small enough that a healthy pair on loopback finishes in milliseconds.
LOCAL_MESSAGE = "1M"
LOCAL_ITERS, LOCAL_WARMUP = 5, 1
ROUND_TIMEOUT_S = 600.0


@dataclass
class LocateReport:
    cluster: str
    sku: str
    device: str
    nodes: list[str]
    rounds: list[Round] = field(default_factory=list)
    suspects: list[Suspect] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    drained: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def tests(self) -> int:
        """Collectives run (the per-node round's checks are not collectives)."""
        return sum(len(r.tests) for r in self.rounds)


Probe = Callable[[Sequence[str]], str]
Drain = Callable[[list[Suspect]], list[str]]
Record = Callable[[Collective, str], None]  # a collective and the output it printed
SCOPE = "locate"  # the stored runs' scope starts with it: "locate pair node7+node8"


def locate(cluster: Cluster, access: Access, *, nodes: Sequence[str] | None = None, probe: Probe | None = None,
           drain: Drain | None = None, record: Record | None = None, timeout_s: float = ROUND_TIMEOUT_S,
           clock: Callable[[], float] = time.monotonic) -> LocateReport:
    """The rounds on `nodes` (default: every node), suspects named only on evidence they measured.
    `probe`: the gate's fabric probe (GPU sizes); `drain`: drains the suspects, None never;
    `record`: keeps each collective's output (runs/locate.py stores it as a fabric result)."""
    if not access.caps.health_gate:
        raise MissingCapability(cluster.name, access.launcher.backend, "run collectives on chosen nodes")
    start = clock()
    row = lookup(cluster.sku)
    states = access.launcher.node_states()
    chosen = list(nodes) if nodes else sorted(states, key=natural_key)
    unknown = [n for n in chosen if n not in states]
    if unknown:
        raise ConfigError(f"--nodes: {unknown[0]} is not a node of cluster '{cluster.name}'")
    report = LocateReport(cluster=cluster.name, sku=row.name, device="GPU" if row.gpus_per_vm else "CPU",
                          nodes=chosen, notes=list(access.notes))
    good = _per_node(row, chosen, states, report, probe, clock)
    run = _round_runner(cluster, access, row, timeout_s, record)
    racks = access.launcher.leaf_switches() if row.nvlink_domain_vms > 1 and access.caps.node_control else {}
    racks = {k: [n for n in v if n in good] for k, v in racks.items() if any(n in good for n in v)}
    # The row's figure: the threshold the gate applies to its node groups (catalog.NcclBaseline).
    expected = row.nccl.warn_gbps if row.nccl is not None else None
    if len(racks) > 1:
        _rack_round(report, racks, run, expected, clock)
    if len(good) < 2:
        report.notes.append("fewer than two nodes passed the per-node check: no collective to run")
    else:
        # NVL72 pairs cross racks, where the row publishes no figure (its scope): the median only.
        _pair_rounds(report, good, racks if len(racks) > 1 else None, run,
                     expected if row.nvlink_domain_vms <= 1 else None, clock)
    if drain is not None and report.suspects:
        report.drained = drain([s for s in report.suspects if s.node in states])
    report.wall_s = clock() - start
    return report


def _rack_round(report: LocateReport, racks: dict[str, list[str]], run: Callable[[list[Collective]], None],
                expected: float | None, clock: Callable[[], float]) -> None:
    """One all_reduce inside each rack, all at once. A slow rack is NVLink inside it; the pairs
    then test the scale-out links. Which node of the rack is not measured here: said, not named
    (the gate's halving inside a rack corners it)."""
    rack_round = Round(index=len(report.rounds) + 1, kind="racks",
                       tests=[Collective(nodes=tuple(m), kind="rack") for m in racks.values() if len(m) > 1])
    _timed(rack_round, run, clock)
    judge(rack_round.tests, expected)
    report.rounds.append(rack_round)
    report.unconfirmed += [f"all_reduce inside the rack of {t.nodes[0]}..{t.nodes[-1]} {_g(t.busbw)} below "
                           f"{_g(t.floor)}: NVLink inside that rack; which node is not measured here "
                           "(`azbench health` corners it by halving); not named"
                           for t in rack_round.tests if t.slow]


def _pair_rounds(report: LocateReport, good: list[str], racks: dict[str, list[str]] | None,
                 run: Callable[[list[Collective]], None], expected: float | None, clock: Callable[[], float]) -> None:
    """The pairs round, then the re-pairs of its slow pairs (and the odd node out) against its median."""
    matched, left = pairs(good, racks)
    pair_round = Round(index=len(report.rounds) + 1, kind="pairs",
                       tests=[Collective(nodes=p, kind="pair") for p in matched])
    _timed(pair_round, run, clock)
    median = judge(pair_round.tests, expected)
    report.rounds.append(pair_round)
    slow = [t for t in pair_round.tests if t.slow]
    fine = [n for t in pair_round.tests if t.slow is False for n in t.nodes]
    retests: list[Collective] = []
    for chunk in repairs(slow, fine, left):
        checks = controls(chunk, fine)
        again = Round(index=len(report.rounds) + 1, kind="re-pairs", tests=chunk + checks)
        _timed(again, run, clock)
        reference = round_reference(median, checks)
        if reference != median:
            again.notes.append(f"judged against this round's known-good pairs ({_g(reference)}), slower than "
                               f"the pairs round's median ({_g(median)}): the host was busier")
        judge_against(again.tests, reference, expected)
        report.rounds.append(again)
        retests += chunk
    if (slow or left) and not fine:
        report.notes.append("no pair passed: nothing to re-pair against, no node named")
    found, unconfirmed = conclude(slow, retests)
    report.unconfirmed += unconfirmed
    report.suspects += found


def _per_node(row: GpuSku, chosen: list[str], states: dict[str, NodeInfo], report: LocateReport,
              probe: Probe | None, clock: Callable[[], float]) -> list[str]:
    """Round 1: the scheduler's state of each node, and on GPU sizes the gate's fabric facts."""
    t0 = clock()
    first = Round(index=1, kind="per-node")
    bad: dict[str, str] = {}
    for node in chosen:
        info = states[node]
        if not info.usable:
            bad[node] = f"node state {info.state}" + (f" ({info.reason})" if info.reason else "") + ": not usable"
    first.notes.append(f"node states of {len(chosen)} nodes: {len(bad)} not usable")
    if row.gpus_per_vm and probe is not None:
        gate = gate_fabric(probe, [n for n in chosen if n not in bad], row, None)
        for f in gate.findings:
            bad.setdefault(f.node, f"{f.check}: {f.evidence}")
        if gate.fault:
            first.notes.append(f"on every node, so no node named for it: {gate.fault}")
        first.notes.append(f"GPU and HCA counts (the gate's fabric checks) on {len(chosen) - len(bad)} nodes")
    elif row.gpus_per_vm:
        first.notes.append("GPU and HCA counts not checked (no probe)")
    else:
        first.notes.append("no GPUs or HCAs on this size: GPU and HCA counts not checked")
    report.suspects += [Suspect(node=n, evidence=why, busbw=None, expected=None) for n, why in bad.items()]
    first.wall_s = clock() - t0
    report.rounds.append(first)
    return [n for n in chosen if n not in bad]


def _round_runner(cluster: Cluster, access: Access, row: GpuSku, timeout_s: float,
                  record: Record | None) -> Callable[[list[Collective]], None]:
    """Runs one round's tests side by side and fills in each test's busbw (or error)."""
    gpus = row.gpus_per_vm
    if gpus:
        message = row.nccl.message if row.nccl is not None else "16G"
        argv = [NCCL_TESTS, "-b", message, "-e", message, "-f", "2", "-g", "1"]
    else:
        work = f"{(cluster.workdir or '/tmp').rstrip('/')}/azbench-locate"
        runner, wrapper = f"{work}/{RUNNER}", f"{work}/{PAIR_SCRIPT}"
        access.launcher.stage_file(templates_dir() / RUNNER, runner)
        access.launcher.stage_file(templates_dir() / PAIR_SCRIPT, wrapper)
        message = LOCAL_MESSAGE
        argv = ["sh", wrapper, access.python, runner, "--collectives", "all_reduce", "-b", message, "-e", message,
                "-f", "2", "-n", str(LOCAL_ITERS), "-w", str(LOCAL_WARMUP), "--timeout", str(int(timeout_s))]
    size = parse_size(message)

    def run(tests: list[Collective]) -> None:
        outputs = access.launcher.run_groups([t.nodes for t in tests], argv, gpus_per_node=gpus, timeout_s=timeout_s)
        for test, text in zip(tests, outputs):
            runs = [r for r in parse_runs(text) if r.sizes]
            point = runs[0].at(size) or runs[0].largest if runs else None
            if record is not None and runs:
                record(test, text)
            test.busbw = point.busbw if point is not None else None
            if test.busbw is None:
                lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
                test.error = (lines[-1][:200] if lines else "no output") + " (nothing measured)"
    return run


def scope_of(test: Collective) -> str:
    """The stored scope of a locate collective: "locate pair node7+node8"."""
    return f"{SCOPE} {test.kind} {'+'.join(test.nodes)}"


def _timed(round_: Round, run: Callable[[list[Collective]], None], clock: Callable[[], float]) -> None:
    t0 = clock()
    if round_.tests:
        run(round_.tests)
    round_.wall_s = clock() - t0


def _g(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.4g} GB/s"


__all__ = ["LocateReport", "locate", "LOCAL_MESSAGE", "SCOPE", "scope_of"]
