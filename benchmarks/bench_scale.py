"""Scale figures on one machine (issue 14): an emulated cluster of N nodes (default 2,048).

- `up` wall time and memory (sum of the daemons' PSS, and the machine's used-memory delta);
- the health gate: wall time, group rounds and probe sruns to find 2 injected slow nodes and
  1 bad node (targets: rounds <= 2*log2(N)), and whether exactly those were flagged;
- the monitor's poll of a job holding every node: scheduler calls per poll (target 1) and the
  CPU time azbench spends per poll (parse included), and sinfo's node table (2,048 rows) parse;
- `down` wall time.
- `--up-only [--baseline REF]`: only `up` and `down`, profiled (issue 23, point 5): wall time per
  phase (slurmd start, slurmctld start, wait for idle), CPU time of azbench, of its Slurm client
  calls, of every slurmd and of slurmctld (from /proc: independent of how busy the machine is),
  the Slurm client calls azbench made (counted by wrapping subprocess.run), and the RPCs
  slurmctld received (its own statistics: node registrations per node). With `--baseline REF`
  the same figures for the code at git REF (e.g. main), measured first in the same run.
The machine's load average is printed beside the figures (it is shared). Needs slurm-wlm and
munge. Run: python benchmarks/bench_scale.py [N] [--up-only [--baseline REF]]
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The code under test: this checkout, or (for the --baseline child) another tree of the repo.
sys.path.insert(0, os.environ.get("AZB_BENCH_CODE", str(REPO)))
sys.path.insert(1, str(REPO))

from benchmarks.harness import emit  # noqa: E402

SLOW = ("node17", "node1900")
BAD = "node777"


def main() -> None:
    args = sys.argv[1:]
    if "--profile-up-child" in args:
        return profile_up_child(int(args[0]), args[args.index("--profile-up-child") + 1])
    if "--up-only" in args:
        n = int(args[0]) if args and args[0].isdigit() else 2048
        baseline = args[args.index("--baseline") + 1] if "--baseline" in args else None
        return up_only(n, baseline)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    home = Path(tempfile.mkdtemp(prefix="azb-scale-"))
    os.environ["AZBENCH_HOME"] = str(home)
    from orchestrator.providers.local.provider import LocalProvider, load_state
    from orchestrator.specs.cluster import load_cluster_spec
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
    from orchestrator.runs import fleet_gate
    from orchestrator.slurm.conf import natural_key
    slow = [s for s in SLOW if int(s[4:]) <= n] or ["node3"]
    bad = BAD if int(BAD[4:]) <= n else "node5"
    os.environ["AZBENCH_HEALTH_SLOW_NODES"] = ",".join(slow)
    os.environ["AZBENCH_HEALTH_BAD_NODES"] = bad
    cpu0, start = time.process_time(), time.perf_counter()
    from orchestrator.clusters.lifecycle import connect
    with connect(cluster) as access:
        report = fleet_gate.gate_cluster(cluster, access)
    wall = time.perf_counter() - start
    expected = sorted([*slow, bad], key=natural_key)
    emit(f"health_gate_{n}_nodes", wall, "s", load=_load(), group_rounds=report.group_rounds,
         rounds_target=round(2 * math.log2(n), 1), group_tests=report.group_tests,
         probe_rounds=report.probe_rounds, flagged=report.bad_nodes, expected=expected,
         exact=report.bad_nodes == expected, drained=report.drained,
         azbench_cpu_s=round(time.process_time() - cpu0, 3),
         median_ops_per_s=report.median_ops_per_s)


def polls(cluster, n: int) -> None:
    """A job over every node (its batch step runs on one node only: cheap), polled 20 times."""
    from orchestrator.hosts.remote import LocalRunner
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


def up_only(n: int, baseline: str | None) -> None:
    """`up` + `down` at n nodes, profiled in a child process each: first the code at git
    `baseline` (exported to a temp dir), then this checkout; one JSON line each."""
    runs = []
    if baseline:
        tree = Path(tempfile.mkdtemp(prefix="azb-baseline-"))
        archive = subprocess.run(["git", "-C", str(REPO), "archive", baseline], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        runs.append((f"baseline {baseline}", tree))
    runs.append(("this checkout", REPO))
    for label, code in runs:
        out = subprocess.run([sys.executable, __file__, str(n), "--profile-up-child", label],
                             env={**os.environ, "AZB_BENCH_CODE": str(code)},
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.stderr.write(out.stdout + out.stderr)
            raise SystemExit(f"profiled up of {label} failed")
        fig = json.loads(out.stdout.strip().splitlines()[-1])
        emit(f"local_up_{n}_nodes_profiled", fig.pop("wall_s"), "s", code=label, **fig)
        if code != REPO:
            shutil.rmtree(code, ignore_errors=True)


def profile_up_child(n: int, label: str) -> None:
    """One profiled up + down (see up_only); prints one JSON object."""
    home = Path(tempfile.mkdtemp(prefix="azb-upprof-"))
    os.environ["AZBENCH_HOME"] = str(home)
    import orchestrator
    from orchestrator import paths
    from orchestrator.providers.local import proc
    from orchestrator.providers.local import provider as local
    from orchestrator.specs.cluster import load_cluster_spec
    calls: dict[str, int] = {}
    real_run = subprocess.run

    def counting_run(argv, *a, **k):  # every Slurm client call azbench makes goes through here
        prog = os.path.basename(argv[0] if isinstance(argv, list) else str(argv).split()[0])
        calls[prog] = calls.get(prog, 0) + 1
        return real_run(argv, *a, **k)

    phases: dict[str, float] = {}
    t0 = time.perf_counter()

    def timed(name: str, fn):
        def wrapper(*a, **k):
            start = time.perf_counter()
            phases.setdefault(f"{name}_starts_at_s", round(start - t0, 2))
            try:
                return fn(*a, **k)
            finally:
                phases[f"{name}_s"] = round(phases.get(f"{name}_s", 0) + time.perf_counter() - start, 2)
        return wrapper

    subprocess.run = counting_run  # the module object: every Slurm client call of the provider
    local._start_nodes = timed("slurmd_start", local._start_nodes)
    local.LocalProvider._wait_ready = timed("wait_idle", local.LocalProvider._wait_ready)
    provider = local.LocalProvider()
    spec = load_cluster_spec(None, {"name": "upprof", "nodes": n})
    load0, cpu0 = _load(), os.times()
    cluster = provider.up(spec, provider.plan(spec))
    wall, cpu1, load1 = time.perf_counter() - t0, os.times(), _load()
    subprocess.run = real_run
    state = local.load_state(paths.cluster_dir(spec.name))
    slurmd_ms = [_cpu_ms(d.pid) for k, d in state.daemons.items() if k.startswith("slurmd:")]
    ctld = Path(f"/proc/{state.daemons['slurmctld'].pid}/stat").read_text().rsplit(")", 1)[1].split()
    rpcs = _rpc_counts(state.conf)
    try:
        figures = dict(
            wall_s=round(wall, 2), **phases,
            azbench_cpu_s=round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 2),
            client_cpu_s=round(cpu1.children_user + cpu1.children_system
                               - cpu0.children_user - cpu0.children_system, 2),
            slurmd_start_cpu_ms_each=round(sum(slurmd_ms) / max(len(slurmd_ms), 1), 1),
            slurmctld_cpu_s=round((int(ctld[11]) + int(ctld[12])) / os.sysconf("SC_CLK_TCK"), 2),
            scheduler_calls=sum(calls.values()), scheduler_calls_by_program=calls,
            scheduler_calls_per_node=round(sum(calls.values()) / n, 4),
            registrations_per_node=round(rpcs.get("MESSAGE_NODE_REGISTRATION_STATUS", 0) / n, 3),
            rpcs_received=rpcs, load_before=load0, load_after=load1,
            code_path=str(Path(orchestrator.__file__).parents[1]))
    finally:
        start = time.perf_counter()
        provider.down(cluster)
        left = [d.pid for d in state.daemons.values() if proc.alive(d.pid, d.start_time)]
        proc.terminate([(d.pid, d.start_time) for d in state.daemons.values()], grace_s=0)
    cpu2 = os.times()  # the daemons were our children: reaped by down, their CPU (all threads) is here
    daemons = cpu2.children_user + cpu2.children_system - cpu1.children_user - cpu1.children_system
    figures.update(down_s=round(time.perf_counter() - start, 1), daemons_left_after_down=len(left),
                   daemons_cpu_s=round(daemons, 1), total_cpu_s=round(
                       daemons + figures["azbench_cpu_s"] + figures["client_cpu_s"], 1))
    shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(figures))


def _cpu_ms(pid: int) -> float:
    """CPU time of a live process's main thread, in ms (/proc/PID/schedstat: ns on CPU; proc(5)):
    for slurmd, its start-up (parse, plugins, node table, topology)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e6
    except (OSError, ValueError, IndexError):
        return 0.0


def _rpc_counts(conf: str) -> dict[str, int]:
    """RPCs slurmctld has received, by message type (sdiag(1), "Remote Procedure Call statistics
    by message type")."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, env={**os.environ, "SLURM_CONF": conf})
    section = out.stdout.split("by message type")[-1].split("by user")[0]
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^\s*(\w+)\s+\(\s*\d+\)\s+count:(\d+)", section, re.M)}


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
