"""Wait, after ARM, until the VMs have booted: cloud-init done on the head, every node idle in Slurm.

ARM's "Succeeded" only means the VMs exist; cloud-init then installs and joins Slurm. `wait_booted`
reaches the head over SSH with the host key pinned from cloud-init (never trust on first use),
and polls, in one command per round: the head's cloud-init status, the failure notes the boot
steps write (templates' azbench-step: /var/lib/azbench/boot-failed on the head,
/shared/azbench/boot/<host>.failed from the nodes), and Slurm's node list. It fails with one line naming
the VM and the step, or, at the deadline, naming what is still missing. A GPU node whose boot-time
fabric check found it short of GPUs or HCAs (templates/fabric_node_check.py: "fabric check
failed: ...") is a ShortNodeError, which `up` answers by replacing the VM (azure/provider.py)
before Slurm lists it. `parse_probe` is pure.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from orchestrator.errors import ProvisionError, RemoteError
from orchestrator.models import Cluster, ExecResult
from orchestrator.slurm.commands import node_states_argv
from orchestrator.hosts.remote import SshRunner

SEP = "--azbench--"
FABRIC_MARK = "fabric check failed: "  # what templates/fabric_node_check.py --boot writes
PROBE = (f"cloud-init status 2>/dev/null | sed -n 's/^status: //p'; echo {SEP}; "
         "cat /var/lib/azbench/boot-failed 2>/dev/null; "
         "grep -sH . /shared/azbench/boot/*.failed 2>/dev/null; "
         f"echo {SEP}; {shlex.join(node_states_argv())} 2>/dev/null; echo {SEP}; "
         "cloud-init status --long 2>/dev/null | sed -n '/^detail:/,$p' | sed -n 2p")


class ProbeRunner(Protocol):
    """What the wait needs of a connection to the head (remote.SshRunner, or a test's fake)."""

    def run(self, cmd: str, timeout: float = 60.0) -> ExecResult: ...

    def close(self) -> None: ...


@dataclass
class BootProbe:
    head_status: str = ""              # cloud-init's: running | done | error | ''
    head_failure: str = ""             # the head's azbench-step note
    node_failures: dict[str, str] = field(default_factory=dict)
    node_states: dict[str, str] = field(default_factory=dict)
    head_detail: str = ""              # cloud-init status --long's first detail line


def parse_probe(text: str) -> BootProbe:
    parts = (text.split(SEP) + ["", "", "", ""])[:4]
    probe = BootProbe(head_status=parts[0].strip(), head_detail=parts[3].strip())
    for line in parts[1].strip().splitlines():
        if ".failed:" in line:
            path, _, note = line.partition(":")
            probe.node_failures[path.rsplit("/", 1)[-1].removesuffix(".failed")] = note.strip()
        elif line.strip():
            probe.head_failure = line.strip()
    for line in parts[2].strip().splitlines():
        fields = line.split()
        if len(fields) == 2:
            probe.node_states[fields[0]] = fields[1]
    return probe


class ShortNodeError(ProvisionError):
    """Nodes whose boot-time fabric check found them short (GPUs, InfiniBand HCAs): `short`
    maps each to its reason. A ProvisionError: a caller that cannot replace VMs fails with it."""

    def __init__(self, short: dict[str, str]) -> None:
        self.short = dict(short)
        first, why = next(iter(self.short.items()))
        super().__init__(f"VM {first}: {why}" + (f" (and {len(short) - 1} more)" if len(short) > 1 else ""),
                         hint="`up` replaces such a VM; this one was not replaced")


def verdict(probe: BootProbe, head: str, nodes: list[str]) -> str | None:
    """'ready', or None to keep waiting; raises ProvisionError for a failed boot, ShortNodeError
    when every failed node failed only its fabric check."""
    if probe.head_failure or probe.head_status == "error":
        why = probe.head_failure or probe.head_detail or "see /var/log/cloud-init.log"
        raise ProvisionError(f"VM {head}: {why}",
                             hint="ssh to the head and read /var/log/cloud-init-output.log")
    failed = {n: probe.node_failures[n] for n in nodes if n in probe.node_failures}
    if failed and all(why.startswith(FABRIC_MARK) for why in failed.values()):
        raise ShortNodeError(failed)
    for node in nodes:
        if node in probe.node_failures:
            raise ProvisionError(f"VM {node}: {probe.node_failures[node]}",
                                 hint="its /var/log/cloud-init-output.log has the step's output")
    ready = probe.head_status == "done" and all(
        probe.node_states.get(n, "").rstrip("*") in ("idle", "allocated", "mixed") for n in nodes)
    return "ready" if ready else None


def wait_booted(cluster: Cluster, head: str, *, timeout_s: float, poll_s: float = 5.0,
                runner_factory: Callable[[Cluster], ProbeRunner] | None = None,
                progress: Callable[[str], None] | None = None) -> None:
    """Block until the cluster has booted, at most `timeout_s`; ProvisionError otherwise."""
    factory = runner_factory or _ssh_runner
    deadline = time.monotonic() + timeout_s
    probe, last_error = BootProbe(), ""
    runner: ProbeRunner | None = None
    try:
        while True:
            try:
                runner = runner or factory(cluster)
                result = runner.run(PROBE, timeout=60)
                probe, last_error = parse_probe(result.stdout), ""
                if verdict(probe, head, cluster.node_names) == "ready":
                    return
            except RemoteError as exc:
                if "does not match the pinned key" in str(exc):
                    raise ProvisionError(f"VM {head} presents another SSH host key than the one azbench "
                                         "injected through cloud-init: cloud-init did not apply the "
                                         "custom data") from None
                _close(runner)
                last_error, runner = str(exc), None
            if time.monotonic() >= deadline:
                raise ProvisionError(_timeout_line(cluster, head, timeout_s, probe, last_error))
            if progress:
                progress(_progress_line(probe, cluster.node_names, last_error))
            time.sleep(poll_s)
    finally:
        _close(runner)


def _timeout_line(cluster: Cluster, head: str, timeout_s: float, probe: BootProbe, error: str) -> str:
    if error and not probe.head_status:
        return f"cluster '{cluster.name}' did not boot within {timeout_s:g} s: head {head} unreachable ({error})"
    missing = [n for n in cluster.node_names if probe.node_states.get(n, "").rstrip("*") not in ("idle", "allocated", "mixed")]
    what = [f"head {head} cloud-init {probe.head_status or 'unknown'}"] if probe.head_status != "done" else []
    if missing:
        states = ", ".join(f"{n}={probe.node_states.get(n, 'not registered')}" for n in missing[:5])
        what.append(f"nodes not idle in Slurm: {states}" + (" ..." if len(missing) > 5 else ""))
    return f"cluster '{cluster.name}' did not boot within {timeout_s:g} s: " + "; ".join(what)


def _progress_line(probe: BootProbe, nodes: list[str], error: str) -> str:
    if error:
        return f"waiting for the head: {error}"
    idle = sum(1 for n in nodes if probe.node_states.get(n, "").rstrip("*") == "idle")
    return f"head cloud-init {probe.head_status or 'starting'}; {idle}/{len(nodes)} nodes idle in Slurm"


def _ssh_runner(cluster: Cluster) -> ProbeRunner:
    if cluster.ssh is None:  # to_cluster leaves it unset without a head address or the keys
        raise ProvisionError(f"cluster '{cluster.name}' has no SSH login to wait for its boot with",
                             hint="rerun up: it records the head's address and pins its host key")
    return SshRunner(cluster.ssh, env=dict(cluster.env), connect_attempts=1)


def _close(runner: ProbeRunner | None) -> None:
    if runner is not None:
        try:
            runner.close()
        except Exception:  # noqa: BLE001 - closing a dead connection must not hide the real error
            pass
