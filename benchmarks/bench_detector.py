"""Health-gate detector precision and recall (issue 23, point 3), on a busy machine.

Two CPU hogs (`stress-ng --cpu 2`, stopped by pid at the end) run throughout. Then:

1. **Real trials** on an emulated local Slurm cluster of N nodes (default 256): each trial injects
   0-3 nodes at random, each slow (half speed and half link, AZBENCH_HEALTH_SLOW_NODES) or bad
   (its collectives fail, AZBENCH_HEALTH_BAD_NODES), runs the gate's rounds through the cluster's
   Slurm (drains nothing) and counts injected nodes found and healthy nodes flagged. Every probe
   value is recorded: it is the noise model of part 2.
2. **Simulated trials** driven by that measured noise (the real cluster is too slow for hundreds
   of trials here): a probe source draws each healthy node's throughput from the real round-1
   spread (bootstrap of value/median) and each re-probe's load level from the real re-probes'
   reference drift, at N and at 2,048 nodes. Injections as in part 1, plus "cpu-slow" nodes
   (0.6x throughput, healthy link) that only the throughput statistic can find. The same trials
   are judged by the old rule (25 % below the median, best of 2 probes) as the baseline.

Figures are JSON lines (benchmarks/harness.emit); nothing is asserted. Needs slurm-wlm, munge and
stress-ng. Run: python benchmarks/bench_detector.py [--real-trials 20] [--sim-trials 300]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import emit  # noqa: E402
from orchestrator.results.stragglers import find_stragglers  # noqa: E402
from orchestrator.runs.fleet import GateOptions, Probe, check_fleet  # noqa: E402
from orchestrator.slurm.conf import natural_key  # noqa: E402


@dataclass
class Tally:
    trials: int = 0
    injected: int = 0
    found: int = 0
    healthy_flagged: int = 0
    trials_with_fp: int = 0
    missed: list[str] = field(default_factory=list)
    false: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, injected: set[str], flagged: set[str], seconds: float = 0.0) -> None:
        self.trials += 1
        self.injected += len(injected)
        self.found += len(injected & flagged)
        fp = flagged - injected
        self.healthy_flagged += len(fp)
        self.trials_with_fp += bool(fp)
        self.missed += sorted(injected - flagged)
        self.false += sorted(fp)
        self.seconds.append(seconds)

    def figures(self) -> dict[str, object]:
        flagged = self.found + self.healthy_flagged
        return {"trials": self.trials, "injected": self.injected, "found": self.found,
                "recall": round(self.found / self.injected, 4) if self.injected else None,
                "precision": round(self.found / flagged, 4) if flagged else None,
                "healthy_flagged": self.healthy_flagged, "trials_with_false_positive": self.trials_with_fp,
                "missed": self.missed[:10], "false_positives": self.false[:10]}


def inject(rng: random.Random, nodes: Sequence[str], kinds: Sequence[str]) -> dict[str, str]:
    """0-3 distinct nodes, each of a kind drawn from `kinds`."""
    chosen = rng.sample(list(nodes), rng.randint(0, 3))
    return {n: rng.choice(kinds) for n in chosen}


# -- part 1: the real cluster ---------------------------------------------------------------------

class Recording:
    """Wraps a prober: keeps every probe's values (node -> ops/s) in call order."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.rounds: list[dict[str, float]] = []

    def probe(self, nodes):
        out = self.inner.probe(nodes)
        self.rounds.append({n: p.ops_per_s for n, p in out.items()})
        return out


def real_trials(n: int, trials: int, rng: random.Random) -> tuple[list[float], list[float]]:
    """Run the trials; returns the noise model: round-1 value/median of healthy nodes, and the
    re-probes' reference drift (reference median in the re-probe / same nodes' round-1 median)."""
    home = Path(tempfile.mkdtemp(prefix="azb-detector-"))
    os.environ["AZBENCH_HOME"] = str(home)
    from orchestrator.clusters.lifecycle import connect
    from orchestrator.providers.local.provider import LocalProvider
    from orchestrator.specs.cluster import load_cluster_spec
    from orchestrator.runs.fleet_gate import LauncherProber, options_for
    provider = LocalProvider()
    spec = load_cluster_spec(None, {"name": "detector", "nodes": n})
    start = time.perf_counter()
    cluster = provider.up(spec, provider.plan(spec))
    emit(f"detector_local_up_{n}_nodes", time.perf_counter() - start, "s", load=_load())
    tally, spread, drift = Tally(), [], []
    try:
        with connect(cluster) as access:
            nodes = sorted(access.launcher.node_states(), key=natural_key)
            switches = access.launcher.leaf_switches()
            opts = options_for(cluster, access)
            for _ in range(trials):
                injected = inject(rng, nodes, ("slow", "bad"))
                os.environ["AZBENCH_HEALTH_SLOW_NODES"] = ",".join(k for k, v in injected.items() if v == "slow")
                os.environ["AZBENCH_HEALTH_BAD_NODES"] = ",".join(k for k, v in injected.items() if v == "bad")
                prober = Recording(LauncherProber(access.launcher, cluster, opts))
                t0 = time.perf_counter()
                report = check_fleet(prober, nodes, switches, opts)
                tally.add(set(injected), set(report.bad_nodes), time.perf_counter() - t0)
                spread += _spread(prober.rounds[0], set(injected))
                drift += _drift(prober.rounds, set(injected), report.suspects)
                old = [s.node for s in find_stragglers(prober.rounds[0], 0.25)
                       if s.node not in injected]
                emit("detector_real_trial", time.perf_counter() - t0, "s", nodes=n,
                     injected=injected, flagged=report.bad_nodes, suspects=report.suspects,
                     probe_rounds=report.probe_rounds, old_rule_round1_healthy_suspects=old,
                     load=_load())
    finally:
        for var in ("AZBENCH_HEALTH_SLOW_NODES", "AZBENCH_HEALTH_BAD_NODES"):
            os.environ.pop(var, None)
        provider.down(cluster)
    spread_sorted = sorted(spread)
    emit(f"detector_real_{n}_nodes", tally.figures()["recall"] or 0.0, "recall",
         **tally.figures(), median_trial_s=round(statistics.median(tally.seconds), 1),
         healthy_spread_p001=round(_quantile(spread_sorted, 0.001), 3),
         healthy_spread_p01=round(_quantile(spread_sorted, 0.01), 3),
         healthy_spread_min=round(spread_sorted[0], 3), samples=len(spread_sorted),
         hogs="stress-ng --cpu 2")
    return spread, drift


def _spread(values: dict[str, float], injected: set[str]) -> list[float]:
    healthy = [v for n, v in values.items() if n not in injected and math.isfinite(v)]
    med = statistics.median(healthy)
    return [v / med for v in healthy]


def _drift(rounds: list[dict[str, float]], injected: set[str], suspects: list[str]) -> list[float]:
    """Reference drift of each confirmation re-probe (the rounds after the group rounds that
    probe suspects plus references)."""
    if not suspects:
        return []
    first = rounds[0]
    out = []
    for probe in rounds[1:]:
        if set(suspects) <= set(probe) and len(probe) <= len(suspects) + 8:
            ref = [n for n in probe if n not in suspects and n not in injected and n in first]
            if ref:
                out.append(statistics.median(probe[r] for r in ref) / statistics.median(first[r] for r in ref))
    return out


# -- part 2: the simulated probe source ---------------------------------------------------------

class SimFabric:
    """Probe values drawn from the measured noise: each probe draws every node's value/median
    afresh from `spread` and one load level for the whole step from `drift` (1.0 in round 1)."""

    def __init__(self, nodes: list[str], injected: dict[str, str], spread: list[float],
                 drift: list[float], rng: random.Random) -> None:
        self.nodes, self.injected, self.spread, self.drift, self.rng = nodes, injected, spread, drift, rng
        self.calls = 0

    def probe(self, nodes):
        self.calls += 1
        level = 1.0 if self.calls == 1 or not self.drift else self.rng.choice(self.drift)
        out = {}
        for node in nodes:
            kind = self.injected.get(node)
            cpu = 0.5 if kind == "slow" else 0.6 if kind == "cpu-slow" else 1.0
            link = 50.0 if kind == "slow" else 100.0
            ops = 5e7 * level * cpu * self.rng.choice(self.spread)
            out[node] = Probe(node, 80.0, 20.0, ops, link, kind != "bad")
        return out


def old_rule(fabric: SimFabric, report_first: dict[str, float], rng_flagged: set[str]) -> set[str]:
    """The detector before issue 23 on the same trial: collective/probe verdicts as now, and a
    throughput straggler when 25 % below the round-1 median, confirmed by the best of 2 probes."""
    slow = find_stragglers(report_first, 0.25)
    again = fabric.probe([s.node for s in slow]) if slow else {}
    confirmed = {s.node for s in slow
                 if max(s.value, again[s.node].ops_per_s if s.node in again else math.nan) < s.threshold}
    return rng_flagged | confirmed


def sim_trials(n: int, trials: int, spread: list[float], drift: list[float], rng: random.Random) -> None:
    nodes = [f"node{i}" for i in range(1, n + 1)]
    new, old, cpu_only = Tally(), Tally(), Tally()
    for _ in range(trials):
        injected = inject(rng, nodes, ("slow", "bad", "cpu-slow"))
        fabric = SimFabric(nodes, injected, spread, drift, rng)
        recording = Recording(fabric)
        report = check_fleet(recording, nodes, {}, GateOptions())
        flagged = set(report.bad_nodes)
        new.add(set(injected), flagged)
        cpu = {k for k, v in injected.items() if v == "cpu-slow"}
        cpu_only.add(cpu, {v.node for v in report.verdicts if v.check == "throughput"} & cpu)
        not_throughput = {v.node for v in report.verdicts if v.check != "throughput"}
        old.add(set(injected), old_rule(fabric, recording.rounds[0], not_throughput))
    emit(f"detector_sim_{n}_nodes", new.figures()["recall"] or 0.0, "recall", **new.figures(),
         cpu_slow_recall=cpu_only.figures()["recall"], noise_samples=len(spread),
         drift_samples=len(drift), rule="median/MAD z < -4 and >= 15 % below, confirmed twice beside 8 references")
    emit(f"detector_sim_{n}_nodes_old_rule", old.figures()["recall"] or 0.0, "recall", **old.figures(),
         rule="25 % below the median, best of 2 probes (before issue 23), same trials")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--real-trials", type=int, default=20)
    ap.add_argument("--sim-trials", type=int, default=300)
    ap.add_argument("--seed", type=int, default=23)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    hogs = subprocess.Popen(["stress-ng", "--cpu", "2", "--quiet"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        time.sleep(2)  # let the hogs load the machine before the cluster starts
        spread, drift = real_trials(args.nodes, args.real_trials, rng)
    finally:
        hogs.terminate()  # by pid: stress-ng stops its workers on SIGTERM
        hogs.wait(timeout=30)
    for n in (args.nodes, 2048):
        sim_trials(n, args.sim_trials if n == args.nodes else max(args.sim_trials // 4, 20),
                   spread, drift or [1.0], rng)


def _quantile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
