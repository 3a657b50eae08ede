"""Scale figures on one machine (issue 14): an emulated cluster of N nodes (default 2,048).

- `up` wall time and memory (sum of the daemons' PSS, and the machine's used-memory delta);
- the health gate: wall time, group rounds and probe sruns to find 2 injected slow nodes and
  1 bad node (targets: rounds <= 2*log2(N)), and whether exactly those were flagged;
- the monitor's poll of a job holding every node: scheduler calls per poll (target 1) and the
  CPU time azbench spends per poll (parse included), and sinfo's node table (2,048 rows) parse;
- `down` wall time.
The machine's load average is printed beside the figures (it is shared). Needs slurm-wlm and
munge. Run: python benchmarks/bench_scale.py [N]
"""

from __future__ import annotations

import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import emit  # noqa: E402

SLOW = ("node17", "node1900")
BAD = "node777"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    home = Path(tempfile.mkdtemp(prefix="azb-scale-"))
    os.environ["AZBENCH_HOME"] = str(home)
    from orchestrator.clusters.providers.local import LocalProvider, load_state
    from orchestrator.clusters.specs import load_cluster_spec
    from orchestrator import paths
    report_parse(n)
    provider = LocalProvider()
    spec = load_cluster_spec(None, {"name": "scale", "nodes": n})
    used0 = _used_mib()
    start = time.perf_counter()
    cluster = provider.up(spec, provider.plan(spec))
    emit(f"local_up_{n}_nodes", time.perf_counter() - start, "s", target_s=60, load=_load())
    try:
        state = load_state(paths.cluster_dir(spec.name))
        emit(f"local_memory_{n}_nodes", _pss_mib(state) / 1024, "GiB",
             used_delta_gib=round((_used_mib() - used0) / 1024, 2), daemons=len(state.daemons),
             note="sum of PSS of munged, slurmctld and every slurmd")
        gate(cluster, n)
        polls(cluster, n)
    finally:
        start = time.perf_counter()
        provider.down(cluster)
        emit(f"local_down_{n}_nodes", time.perf_counter() - start, "s")


def gate(cluster, n: int) -> None:
    from orchestrator.runs import fleet, fleet_gate
    slow = [s for s in SLOW if int(s[4:]) <= n] or ["node3"]
    bad = BAD if int(BAD[4:]) <= n else "node5"
    os.environ["AZBENCH_HEALTH_SLOW_NODES"] = ",".join(slow)
    os.environ["AZBENCH_HEALTH_BAD_NODES"] = bad
    cpu0, start = time.process_time(), time.perf_counter()
    from orchestrator.clusters.lifecycle import connect
    with connect(cluster) as access:
        report = fleet_gate.gate_cluster(cluster, access)
    wall = time.perf_counter() - start
    expected = sorted([*slow, bad], key=fleet.natural)
    emit(f"health_gate_{n}_nodes", wall, "s", load=_load(), group_rounds=report.group_rounds,
         rounds_target=round(2 * math.log2(n), 1), group_tests=report.group_tests,
         probe_rounds=report.probe_rounds, flagged=report.bad_nodes, expected=expected,
         exact=report.bad_nodes == expected, drained=report.drained,
         azbench_cpu_s=round(time.process_time() - cpu0, 3),
         median_ops_per_s=report.median_ops_per_s)


def polls(cluster, n: int) -> None:
    """A job over every node (its batch step runs on one node only: cheap), polled 20 times."""
    from orchestrator.clusters.remote import LocalRunner
    from orchestrator.models import JobRef
    from orchestrator.slurm.launcher import SlurmLauncher
    runner = LocalRunner(env=dict(cluster.env))
    launcher = SlurmLauncher(runner, cluster)
    usable = sum(info.usable for info in launcher.node_states().values())
    out = runner.run(f"sbatch --parsable -N {usable} -o /dev/null --wrap 'sleep 300'")
    job_id = out.stdout.strip().split(";")[0]
    ref = JobRef(cluster=cluster.name, job_id=job_id)
    deadline = time.monotonic() + 120
    while launcher.poll([ref])[job_id].state.value != "running" and time.monotonic() < deadline:
        time.sleep(0.5)  # the first poll also learns that sacct has no database
    calls0 = launcher.sacct_calls + launcher.squeue_calls
    cpu0, kids0, start, count = time.process_time(), _children_cpu(), time.perf_counter(), 20
    for _ in range(count):
        status = launcher.poll([ref])[job_id]
    emit(f"poll_{n}_nodes", (launcher.sacct_calls + launcher.squeue_calls - calls0) / count,
         "scheduler calls per poll", target=1,
         azbench_cpu_ms_per_poll=round((time.process_time() - cpu0) / count * 1000, 2),
         squeue_cpu_ms_per_poll=round((_children_cpu() - kids0) / count * 1000, 2),
         wall_ms_per_poll=round((time.perf_counter() - start) / count * 1000, 1),
         nodes_in_status=len(status.nodes), state=status.state.value, load=_load())
    cpu0 = time.process_time()
    infos = launcher.node_states()
    emit(f"sinfo_{n}_nodes", (time.process_time() - cpu0) * 1000, "ms CPU (call + parse)",
         rows=len(infos))
    runner.run(f"scancel {job_id}")


def report_parse(n: int, blocks: int = 80) -> None:
    """Parse and report a smoke-shaped log of `blocks` eval blocks whose per-node step-time
    event lists all `n` nodes (the biggest thing a 2,048-node run adds to its log)."""
    import json

    from orchestrator.report.build import build_report
    from orchestrator.results.mllog import parse_lines
    from orchestrator.store.schema import ResultRow

    def line(key: str, value: object, t: int, **md: object) -> str:
        body = {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key,
                "value": value, "metadata": md}
        return ":::MLLOG " + json.dumps(body)
    lines, t = [line("run_start", None, 0)], 0
    for b in range(blocks):
        for step in range(b * 25 + 1, b * 25 + 26):
            t += 10
            lines.append(line("tracked_stats", {"train_step_time": 0.01}, t, step=step))
        lines.append(line("azbench_node_step_time", {f"node{i}": 0.01 + (i == 17) * 0.01
                                                     for i in range(1, n + 1)}, t, step=step))
        lines.append(line("eval_accuracy", 0.1 + b / blocks, t, samples_count=step * 32))
    lines.append(line("run_stop", None, t + 1, status="success"))
    start = time.perf_counter()
    summary = parse_lines(lines)
    parsed = time.perf_counter() - start
    row = ResultRow(content_hash="x", source="run", system="local", benchmark="smoke",
                    status="success", converged=True, minutes=1.0,
                    summary_json=summary.model_dump_json())
    start = time.perf_counter()
    report = build_report([row])
    emit(f"report_{n}_nodes", time.perf_counter() - start, "s", parse_s=round(parsed, 4),
         log_mib=round(sum(map(len, lines)) / 2**20, 2), blocks=blocks,
         slowest=report.groups[0].run_lines[0].slowest_node)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _pss_mib(state) -> float:
    total = 0
    for d in state.daemons.values():
        try:
            for line in open(f"/proc/{d.pid}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def _used_mib() -> int:
    info = dict(line.split(":", 1) for line in open("/proc/meminfo"))
    kib = lambda key: int(info[key].split()[0])  # noqa: E731
    return (kib("MemTotal") - kib("MemAvailable")) // 1024


def _load() -> str:
    return open("/proc/loadavg").read().split(" ", 3)[:3].__str__()


if __name__ == "__main__":
    main()
