"""The scale health gate's logic (`azbench health`): probe every node, corner bad ones in group
rounds, flag stragglers; pure over a Prober (runs/fleet_gate.py runs it through the cluster's
launcher and drains).

One gate = rounds of one job step each (templates/health_probe.sh, one task per node):

1. Round 1 runs on every candidate node: the built-in per-node checks (free disk, available
   memory, Azure's azurehpc-health-checks output where it is installed), the throughput probe,
   and one collective per leaf switch (rack) group, all racks side by side.
2. Later rounds halve the failing groups (runs/grouptest.py) until single nodes remain.
3. Throughput stragglers are scored with robust statistics (runs/fleet_stats.py: a median/MAD
   z-score below -z_limit and at least `tolerance` below the median) and probed again, twice,
   beside reference nodes from the middle of the fleet in the same step; only a node that is an
   outlier in every probe is flagged (one noisy sample, or a burst of load, never drains a node).

Every finding is a Verdict naming node, check, measured value and threshold. Unless more than
`max_bad_fraction` of the nodes would be flagged (then it is the fabric, and nothing is drained),
flagged nodes are drained (Slurm reason "azbench: ..."), which keeps every later run off
them (the attempt's node choice skips drained nodes); `undrain` returns one.

On emulated CPU nodes the collective is modelled (see the probe script): the search itself sees
only one outcome per group, the minimum link bandwidth of its members, as NCCL tests would
print one bus bandwidth per group.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Protocol, Sequence

from orchestrator.errors import ConfigError
from orchestrator.fabric.judge import round_busbw
from orchestrator.models import NodeInfo
from orchestrator.runs.fleet_stats import OutlierRule, confirmed, controls, suspects
from orchestrator.runs.grouptest import GroupOutcome, GroupTest, SearchResult, racks_of, search
from orchestrator.slurm.conf import natural_key
from orchestrator.slurm.states import expand_hostlist

_PROBE = re.compile(r"AZBENCH_PROBE (.*)$")
_AHC = re.compile(r"AZBENCH_AHC (.*)$")
# NHC (which azurehpc-health-checks is built on) reports a failed check as
# "ERROR:  nhc:  Health check failed:  <what>".
_AHC_FAIL = re.compile(r"ERROR:\s+nhc:\s+Health check failed:\s*(.*)$")


@dataclass(frozen=True)
class Probe:
    """One node's probe line."""

    node: str
    disk_gb: float
    mem_gb: float
    ops_per_s: float
    link_gbps: float
    link_ok: bool
    ahc_failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """A finding: `status` is "fail" (broken) or "slow" (a straggler)."""

    node: str
    check: str
    status: str
    value: float | None
    threshold: float | None
    unit: str = ""
    detail: str = ""

    @property
    def reason(self) -> str:
        value = "none" if self.value is None else f"{self.value:.4g}{self.unit}"
        limit = "" if self.threshold is None else f" (threshold {self.threshold:.4g}{self.unit})"
        return f"{self.check} {self.status}: {value}{limit}" + (f"; {self.detail}" if self.detail else "")


# The gate's practical-significance floor for throughput (see runs/fleet_stats.py): a node is a
# straggler only when it is also at least this fraction below the median. An injected slow node
# runs at half speed; the widest healthy spread measured on 256 emulated nodes under two CPU hogs
# is in benchmarks/results/bench_detector.jsonl.
GATE_MIN_EFFECT = 0.15


@dataclass(frozen=True)
class GateOptions:
    """The thresholds. `link_gbps` is the healthy link's bus bandwidth: the SKU's published
    all-reduce baseline on GPU SKUs (catalog.NcclBaseline), a nominal 100 on emulated nodes;
    `link_fail_fraction` of it is the collective's threshold (the baseline's warn level).
    `tolerance` is the straggler floor (OutlierRule.min_effect), `z_limit` its z cut."""

    tolerance: float = GATE_MIN_EFFECT
    z_limit: float = 4.0
    confirm_probes: int = 2
    controls: int = 8
    min_disk_gb: float = 1.0
    min_mem_gb: float = 0.5
    link_gbps: float = 100.0
    link_fail_fraction: float = 0.75
    rack_size: int = 18
    max_bad_fraction: float = 0.1
    reps: int = 5
    iters: int = 20000
    round_timeout_s: float = 600.0
    # Nodes per probe step (0: the whole round in one); fleet_gate sets it for emulated nodes.
    max_nodes_per_step: int = 0
    # How a group's collective is judged: "model" (emulated CPU nodes: the probes' modelled
    # links), "nccl" (GPU nodes: nccl-tests all_reduce_perf per group, in parallel), or "none"
    # (GPU nodes without nccl-tests: no group rounds beyond the first, which always passes).
    collective: str = "model"
    gpus_per_node: int = 0
    nccl_message: str = "16G"


@dataclass
class FleetReport:
    checked: list[str]
    verdicts: list[Verdict] = field(default_factory=list)
    group_rounds: int = 0
    group_tests: int = 0
    probe_rounds: int = 0
    median_ops_per_s: float | None = None
    suspects: list[str] = field(default_factory=list)
    fabric: str = ""
    drained: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def bad_nodes(self) -> list[str]:
        return sorted({v.node for v in self.verdicts}, key=natural_key)


class Prober(Protocol):
    """What the gate's rounds run on (runs/fleet_gate.LauncherProber on a cluster; fakes in tests)."""

    def probe(self, nodes: Sequence[str]) -> dict[str, Probe]:
        """One probe line per node of `nodes` that answered (a silent node is absent)."""
        ...

    def nccl(self, tests: Sequence[GroupTest]) -> list[GroupOutcome]:
        """One outcome per group test, in order, from a real collective run per group side by
        side; check_fleet calls it only when GateOptions.collective is "nccl"."""
        ...


def parse_probes(text: str) -> dict[str, Probe]:
    """Probe lines (a job step may prefix "N: ") with each node's azurehpc-health-checks failures."""
    probes: dict[str, Probe] = {}
    ahc: dict[str, list[str]] = {}
    for line in text.splitlines():
        if (m := _AHC.search(line)) is not None:
            node, _, rest = m.group(1).partition(" ")
            if (fail := _AHC_FAIL.search(rest)) is not None:
                ahc.setdefault(node, []).append(fail.group(1).strip())
            continue
        if (m := _PROBE.search(line)) is None:
            continue
        fields = dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv)
        node = fields.get("node", "")
        if node:
            probes[node] = Probe(node, _num(fields.get("disk_gb")), _num(fields.get("mem_gb")),
                                 _num(fields.get("ops_per_s")), _num(fields.get("link_gbps")),
                                 fields.get("link") == "ok")
    return {n: Probe(**{**p.__dict__, "ahc_failures": tuple(ahc.get(n, ()))})
            for n, p in probes.items()}


def group_outcome(test: GroupTest, probes: Mapping[str, Probe], opts: GateOptions) -> GroupOutcome:
    """A ring collective runs at its slowest link and fails if any member fails or is silent."""
    limit = opts.link_gbps * opts.link_fail_fraction
    silent = [n for n in test.nodes if n not in probes]
    failed = [n for n in test.nodes if n in probes and not probes[n].link_ok]
    size = f"{len(test.nodes)}-node collective"
    if silent or failed:
        return GroupOutcome(False, None, limit, f"{size} failed")
    busbw = min(probes[n].link_gbps for n in test.nodes)
    return GroupOutcome(busbw >= limit, busbw, limit, f"{size} bus bandwidth, GB/s")


def node_verdicts(nodes: Iterable[str], probes: Mapping[str, Probe], opts: GateOptions) -> list[Verdict]:
    """The built-in per-node checks on round 1's probes."""
    out = []
    for node in nodes:
        p = probes.get(node)
        if p is None:
            out.append(Verdict(node, "probe", "fail", None, None, detail="no report: node hung or died"))
            continue
        if not p.disk_gb >= opts.min_disk_gb:
            out.append(Verdict(node, "disk", "fail", p.disk_gb, opts.min_disk_gb, " GB", "free disk"))
        if not p.mem_gb >= opts.min_mem_gb:
            out.append(Verdict(node, "memory", "fail", p.mem_gb, opts.min_mem_gb, " GB", "MemAvailable"))
        out += [Verdict(node, "azurehpc-health-checks", "fail", None, None, detail=why)
                for why in p.ahc_failures]
    return out


def check_fleet(prober: Prober, nodes: Sequence[str], switches: Mapping[str, list[str]],
                opts: GateOptions = GateOptions(), clock: Callable[[], float] = time.monotonic) -> FleetReport:
    """Run the gate's rounds on `nodes` and return every verdict (drains nothing)."""
    started = clock()
    report = FleetReport(checked=list(nodes))
    first: dict[str, Probe] = {}

    def run_round(tests: list[GroupTest]) -> list[GroupOutcome]:
        wanted = sorted({n for t in tests for n in t.nodes}, key=natural_key)
        probes = prober.probe(wanted)
        report.probe_rounds += 1
        report.group_tests += len(tests)
        if not first:
            first.update(probes)
        if opts.collective == "nccl":
            return prober.nccl(tests)
        if opts.collective == "none":
            return [GroupOutcome(True, None, None, "no collective test available") for _ in tests]
        return [group_outcome(t, probes, opts) for t in tests]

    found = search(racks_of(nodes, dict(switches), opts.rack_size), run_round)
    report.group_rounds = found.round_count
    report.verdicts = node_verdicts(nodes, first, opts) + _collective_verdicts(found, first)
    report.verdicts += _confirmed_stragglers(prober, report, first, opts)
    flagged = report.bad_nodes
    if len(flagged) > max(1, math.floor(opts.max_bad_fraction * len(nodes))):
        report.fabric = (f"{len(flagged)} of {len(nodes)} nodes flagged (more than "
                         f"{opts.max_bad_fraction:.0%}): a fabric-wide problem, not single nodes")
    report.seconds = clock() - started
    return report


def _collective_verdicts(found: SearchResult, first: Mapping[str, Probe]) -> list[Verdict]:
    # A node silent in round 1 already has its "probe" verdict: one reason is enough.
    return [Verdict(node, "collective", "fail" if out.value is None else "slow", out.value,
                    out.threshold, " GB/s", out.detail + f" (found in round {_round_of(found, node)})")
            for node, out in found.bad.items() if node in first]


def _round_of(found: SearchResult, node: str) -> int:
    return max(i + 1 for i, tests in enumerate(found.rounds) for t, _ in tests if node in t.members)


def outlier_rule(opts: GateOptions) -> OutlierRule:
    return OutlierRule(z_limit=opts.z_limit, min_effect=opts.tolerance,
                       gross_effect=max(OutlierRule.gross_effect, opts.tolerance),
                       confirm_probes=opts.confirm_probes, controls=opts.controls)


def _confirmed_stragglers(prober: Prober, report: FleetReport, first: Mapping[str, Probe],
                          opts: GateOptions) -> list[Verdict]:
    """Robust-z suspects of round 1, re-probed beside reference nodes; the confirmed ones."""
    rule = outlier_rule(opts)
    ops = {n: p.ops_per_s for n, p in first.items()}
    found, fleet = suspects(ops, rule)
    report.median_ops_per_s = _median(ops)
    report.suspects = [s.node for s in found]
    if not found or fleet is None:
        return []
    names = [s.node for s in found]
    reference = controls(ops, names, rule.controls)
    again = []
    for _ in range(rule.confirm_probes):
        probes = prober.probe(sorted({*names, *reference}, key=natural_key))
        report.probe_rounds += 1
        again.append({n: p.ops_per_s for n, p in probes.items()})
    out = []
    for s in found:
        ok, scores = confirmed(s, fleet, again, s.node, reference, rule)
        if ok:
            best = max(scores, key=lambda x: x.effect)
            threshold = best.median * (1 - rule.min_effect)
            out.append(Verdict(s.node, "throughput", "slow", best.value, threshold, " ops/s",
                               f"{best.effect:+.0%} vs median {best.median:.4g}, z {best.z:.1f} "
                               f"(limit -{rule.z_limit:g}, floor {rule.min_effect:.0%}; "
                               f"outlier in all {len(scores)} probes)"))
    return out


def parse_nccl_round(outputs: Sequence[str], opts: GateOptions) -> list[GroupOutcome]:
    """One outcome per group from its nccl-tests all_reduce_perf output, its busbw read by the
    fabric's one judge (fabric.judge.round_busbw); a group with none failed."""
    limit = opts.link_gbps * opts.link_fail_fraction
    out = []
    for text in outputs:
        busbw, what = round_busbw(text, opts.nccl_message)
        out.append(GroupOutcome(busbw is not None and busbw >= limit, busbw, limit, what))
    return out


def candidate_nodes(infos: Mapping[str, NodeInfo], only: str | None) -> list[str]:
    """Usable nodes in natural order, restricted to the hostlist `only` when given."""
    usable = [n for n, info in infos.items() if info.usable]
    if only:
        wanted = expand_hostlist(only)
        unknown = [n for n in wanted if n not in infos]
        if unknown:
            raise ConfigError(f"--nodes: {', '.join(unknown[:5])} not in the cluster")
        usable = [n for n in usable if n in set(wanted)]
    return sorted(usable, key=natural_key)


def _median(values: Mapping[str, float]) -> float | None:
    clean = [v for v in values.values() if not math.isnan(v)]
    return statistics.median(clean) if clean else None


def _num(text: str | None) -> float:
    try:
        return float(text) if text is not None else math.nan
    except ValueError:
        return math.nan


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


