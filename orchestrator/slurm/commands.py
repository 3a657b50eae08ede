"""Every Slurm command line azbench sends, built in one place, values shlex-quoted.

Pure functions returning shell text (or an argv): the Slurm launcher runs them through a Runner,
the providers that stand up or adopt a Slurm cluster (local, ssh, azure's boot wait) run the
node listing. Outside slurm/ no module spells a Slurm command: this file and the launcher are the
only places (tests/test_layout.py checks it).
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence

from orchestrator.errors import PreflightError

# The programs a cluster on this machine needs (the local provider): Slurm's daemons and client
# tools, and munge for authentication.
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sinfo", "scontrol")
INSTALL_HINT = "slurm/munge not found: apt-get install slurm-wlm munge"
NODE_LIST = "sinfo"  # named in messages about a node listing that failed
CONTROL = "scontrol"  # the client that changes node states (find_binaries key)

SACCT_FORMAT = "JobID,State,ExitCode,NodeList,Elapsed,Reason"
# The same six columns from squeue (-O "name:" = no padding, "|" = suffix); exit_code is the raw
# wait status and TimeUsed the elapsed time. Needed in full because without an accounting
# database (the local cluster) sacct answers nothing and squeue is the only source.
SQUEUE_FORMAT = "JobID:|,State:|,exit_code:|,NodeList:|,TimeUsed:|,Reason:|"
SINFO_FORMAT = "%N|%T|%E"
# The partition listing an ssh cluster is adopted from: node, partition, CPUs, GRES, state.
PARTITIONS_FORMAT = "%N|%P|%c|%G|%T"
q = shlex.quote


def find_binaries() -> dict[str, str]:
    """Absolute paths of the Slurm and munge programs, or PreflightError with the install hint."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = {name: shutil.which(name, path=search) for name in (*DAEMONS, *CLIENTS)}
    if not all(found.values()):
        raise PreflightError(INSTALL_HINT)
    return {name: str(path) for name, path in found.items()}


# -- jobs ------------------------------------------------------------------------------------

def submit(script_path: str) -> str:
    return f"sbatch --parsable {q(script_path)}"


def cancel(job_id: str) -> str:
    return f"scancel {q(job_id)}"


def accounting(ids: Sequence[str]) -> str:
    return f"sacct --parsable2 --noheader -X -j {q(','.join(ids))} -o {SACCT_FORMAT}"


def queue(ids: Sequence[str]) -> str:
    # --states=all: a job that just ended is still in slurmctld's memory (MinJobAge) and squeue
    # shows it only when asked for every state.
    return f"squeue -h --states=all -j {q(','.join(ids))} -O {q(SQUEUE_FORMAT)}"


def job_by_name(name: str) -> str:
    return f"squeue -h --states=all --name={q(name)} -o %i"


# -- nodes -----------------------------------------------------------------------------------

def node_states() -> str:
    return f"sinfo -h -N -o {q(SINFO_FORMAT)}"


def node_states_argv(binary: str = "sinfo", partition: str | None = None) -> list[str]:
    """`node state` pairs, one per line (local clusters' readiness, Azure's boot wait)."""
    return [binary, "-h", "-N", *(["-p", partition] if partition else []), "-o", "%N %T"]


def partitions_argv() -> list[str]:
    return ["sinfo", "-h", "-N", "-o", PARTITIONS_FORMAT]


def drain(reasons: Mapping[str, str]) -> str:
    """One shell line draining every node with its own reason (at most 240 characters)."""
    return " && ".join(f"scontrol update nodename={q(node)} state=DRAIN reason={q(why[:240])}"
                       for node, why in reasons.items())


def resume(nodes: Sequence[str]) -> str:
    return f"scontrol update nodename={q(','.join(nodes))} state=RESUME"


def first_node_command(binary: str = CONTROL) -> str:
    """Shell text printing the first node of the job a task runs in (SLURM_JOB_NODELIST expanded)."""
    return f'{q(binary)} show hostnames "${{SLURM_JOB_NODELIST:-}}" 2>/dev/null | head -n 1'


def down_argv(nodes: Sequence[str], reason: str, binary: str = "scontrol") -> list[str]:
    """Mark nodes DOWN (what a job still on them gets killed by) before they are retired."""
    return [binary, "update", f"nodename={','.join(nodes)}", "state=DOWN", f"reason={reason[:240]}"]


def retire_argv(nodes: Sequence[str], binary: str = "scontrol") -> list[str]:
    """Take nodes out of the cluster for good: state FUTURE hides them from sinfo and the
    scheduler while slurm.conf still defines them (Slurm cannot forget a static node without
    a restart; scontrol(1), "FUTURE")."""
    return [binary, "update", f"nodename={','.join(nodes)}", "state=FUTURE"]


def retire(nodes: Sequence[str], reason: str, tries: int = 50) -> str:
    """Shell text: DOWN (ends a job still on the nodes), then FUTURE, retried every 0.2 s while
    the job is leaving (Slurm refuses FUTURE for a node that still holds one)."""
    down, future = shlex.join(down_argv(nodes, reason)), shlex.join(retire_argv(nodes))
    return (f"{down} && for i in $(seq {tries}); do {future} 2>/dev/null && exit 0; sleep 0.2; done; "
            f"{future}")


def as_admin(cmd: str, prefix: str) -> str:
    """`cmd` run through `prefix` (e.g. "sudo -n") as one shell, or `cmd` itself without one."""
    return f"{prefix} sh -c {q(cmd)}" if prefix else cmd


def version() -> str:
    """The cluster's Slurm version ("slurm 22.05.8"): --segment and topology/block need 23.11."""
    return "sbatch --version"


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) from `sbatch --version` output ("slurm 23.11.4"), None if it is not one."""
    import re
    m = re.search(r"slurm(?:-wlm)?\s+(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def reconfigure() -> str:
    """slurmctld and every slurmd re-read slurm.conf and topology.conf (scontrol(1) "reconfigure")."""
    return "scontrol reconfigure"


def topology() -> str:
    return "scontrol show topology"


def step(nodes: Sequence[str], argv: Sequence[str], *, partition: str | None, timeout_s: float,
         job_name: str, hostlist: str) -> str:
    """One task per node on exactly `nodes` (a job step of its own allocation)."""
    n = len(nodes)
    part = f" --partition={q(partition)}" if partition else ""
    minutes = max(1, math.ceil(timeout_s / 60))
    return (f"srun --nodes={n} --ntasks={n} --ntasks-per-node=1 --nodelist={q(hostlist)}{part} "
            f"--job-name={q(job_name)} --time={minutes} --kill-on-bad-exit=0 --quiet "
            + shlex.join(argv))


def group_steps(hostlists: Sequence[str], counts: Sequence[int], argv: Sequence[str], *,
                partition: str | None, gpus_per_node: int, timeout_s: float, job_name: str) -> str:
    """Shell text: one step per node group in the background (a task per GPU), then, in order,
    `AZBENCH_GROUP <i>` and that group's output lines, so one call serves a whole round."""
    g = max(gpus_per_node, 1)
    minutes = max(1, math.ceil(timeout_s / 60))
    part = f" --partition={q(partition)}" if partition else ""
    # A CPU cluster has no GPU to ask for: srun refuses --gpus-per-node there (one task per node).
    gpus = f" --gpus-per-node={gpus_per_node}" if gpus_per_node > 0 else ""
    out = "${TMPDIR:-/tmp}/azbench-groups-$$"
    lines = [f"mkdir -p {out}"]
    for i, (hosts, n) in enumerate(zip(hostlists, counts)):
        lines.append(f"srun --nodes={n} --nodelist={q(hosts)}{part} --ntasks-per-node={g}{gpus} "
                     f"--job-name={q(job_name)} --time={minutes} "
                     f"--kill-on-bad-exit=1 --quiet {shlex.join(argv)} > {out}/{i} 2>&1 &")
    lines.append("wait")
    lines.append(f"for i in $(seq 0 {len(hostlists) - 1}); do echo \"AZBENCH_GROUP $i\"; "
                 f"cat {out}/$i; done; rm -rf {out}")
    return "\n".join(lines)


def split_groups(text: str, count: int) -> list[str]:
    """The per-group outputs of `group_steps`, in order (empty for a group that printed nothing)."""
    outputs = [""] * count
    current = None
    for line in text.splitlines(keepends=True):
        if line.startswith("AZBENCH_GROUP "):
            index = line.split()[1]
            current = int(index) if index.isdigit() and int(index) < count else None
        elif current is not None:
            outputs[current] += line
    return outputs
