"""The seams between azbench's packages: the protocols one side calls and the other implements.

- Runner: commands and files on one host (LocalRunner, SshRunner in hosts/remote.py).
- Launcher: jobs, logs and nodes of one cluster's scheduler (SlurmLauncher in slurm/launcher.py,
  AzureMLLauncher in providers/azureml/launcher.py).
- Capabilities and Access: what `Provider.connect(cluster)` hands to the code above the
  providers (the Provider protocol itself is in providers/base.py: it takes a
  ClusterSpec). Code above the providers asks `caps`, never a provider's name, and never probes
  an object with getattr. A capability that is absent answers MissingCapability (exit 7), typed
  and in one line, never a silent failure.

A type checker proves the implementations conform; tests/test_contracts_*.py prove behaviour.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Protocol

from orchestrator.errors import ConfigError
from orchestrator.models import (AttemptSpec, ExecResult, FabricTestPlan, HealthCheckPlan, JobRef, JobStatus,
                                 NodeInfo, StageRequest)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def command_line(cmd: str | Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The shell text for `cmd` with every env value exported first (see env_exports)."""
    text = cmd if isinstance(cmd, str) else shlex.join(cmd)
    return env_exports(env or {}) + text


def env_exports(env: Mapping[str, object], end: str = "; ") -> str:
    """`export KEY=value` for each variable, each followed by `end`, sorted by name (as Jinja's
    dictsort: case-insensitive), every value shlex-quoted: the one place azbench writes an
    environment into shell text (remote commands, and the batch templates' `exports` filter)."""
    return "".join(f"export {shell_name(key)}={shlex.quote(str(value))}{end}"
                   for key, value in sorted(env.items(), key=lambda kv: (kv[0].lower(), kv[0])))


def shell_name(name: str) -> str:
    """`name` if it is a valid shell variable name; ConfigError otherwise (a name that is not
    one would break the export, or smuggle shell text into it)."""
    if not _ENV_NAME.fullmatch(name):
        raise ConfigError(f"environment variable name {name!r} is not a valid shell name")
    return name


class Runner(Protocol):
    """Commands and files on one host. `run` never raises for a non-zero exit (that is data in
    ExecResult); every method raises RemoteError when the host cannot be reached, its host key
    is wrong, or the timeout passes."""

    def run(self, cmd: str | Sequence[str], timeout: float = 60.0) -> ExecResult:
        """Run a shell command (a str is passed to the shell as is; a sequence is shlex-quoted)."""
        ...

    def put(self, local: Path, remote: str) -> None:
        """Copy a local file or directory tree to `remote` (created, parents too)."""
        ...

    def get(self, remote: str, local: Path) -> None:
        """Copy a remote file to `local`."""
        ...

    def read(self, remote: str, offset: int = 0, limit: int | None = None) -> bytes:
        """The bytes of a remote file from `offset` (negative: that many bytes before its end),
        at most `limit` of them; b"" when the file does not exist (yet)."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """What a cluster can do, declared by its provider (and its launcher's backend).

    The provider suite (tests/test_contracts_providers.py) checks every flag against behaviour:
    an operation whose flag is False raises MissingCapability.
    """

    spends_money: bool = False  # `up` starts billing: it asks first and honours the cost cap
    expires: bool = False  # a deadline the cluster enforces itself; `extend` moves it
    restores_capacity: bool = False  # after a spot eviction the provider brings the nodes back
    live_node_states: bool = False  # the cloud lists the nodes and their states, no login needed
    replaces_nodes: bool = False  # a bad node can be swapped for a fresh one
    resizes: bool = False  # a live cluster grows or shrinks (`azbench resize`)
    reports_hosts: bool = False  # a drained node can be reported to the cloud as faulty (Azure GHR)
    sweeps: bool = False  # the cloud is searched for expired clusters to delete (`azbench sweep`)
    shell: bool = False  # commands run on a login node: Access.shell is a Runner
    head_here: bool = False  # the head node is this machine (`azbench ssh` runs here)
    emulated_nodes: bool = False  # the nodes share this machine's cores (probe them in chunks)
    live_logs: bool = False  # the launcher reads a running job's log: progress and hang detection
    health_gate: bool = False  # the launcher runs the gate job, the fabric test and job steps on chosen nodes
    node_control: bool = False  # the launcher drains and resumes nodes and knows their switches
    stages_data: bool = False  # the launcher runs `azbench prepare`'s job on the shared file system

    def __or__(self, other: Capabilities) -> Capabilities:
        return Capabilities(**{f.name: getattr(self, f.name) or getattr(other, f.name)
                               for f in fields(self)})

    def names(self) -> list[str]:
        """The capabilities that are present, by name (for --json and messages)."""
        return [f.name for f in fields(self) if getattr(self, f.name)]


class Launcher(Protocol):
    """Everything runs/ needs of a cluster's scheduler. Paths name files on the cluster (see
    paths.RunLayout); every call that can fail raises LaunchError or RemoteError, and one whose
    capability the backend lacks raises MissingCapability."""

    backend: str
    caps: Capabilities  # the launcher side: live_logs, health_gate, node_control, stages_data

    # -- jobs -----------------------------------------------------------------------------
    def submit(self, attempt: AttemptSpec, recipe_dir: Path | None = None) -> JobRef:
        """Stage the recipe and submit one attempt; returns once the scheduler accepted it."""
        ...

    def find(self, name: str) -> JobRef | None:
        """The newest job called `name` (adopting what a crashed azbench submitted), or None."""
        ...

    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobStatus]:
        """States of many jobs in one scheduler call, keyed by job id."""
        ...

    def cancel(self, ref: JobRef) -> None:
        """Cancel; idempotent (a job that already ended counts as cancelled)."""
        ...

    # -- logs -----------------------------------------------------------------------------
    def fetch_logs(self, ref: JobRef, dest: Path) -> list[Path]:
        """Copy the run's attempt logs into `dest` (never outside it); the files written."""
        ...

    def tail(self, path: str, *, offset: int = 0, nbytes: int | None = None) -> bytes:
        """Bytes of a job's file from `offset`, or its last `nbytes`; b"" while it is absent."""
        ...

    def follow(self, ref: JobRef, path: str, sink: Callable[[bytes], None], *,
               stop: Callable[[], bool], offset: int = 0, interval: float = 1.0,
               sleep: Callable[[float], None] | None = None) -> int:
        """Hand every new byte of `path` to `sink` until `stop()` is true and nothing is left;
        returns the offset reached."""
        ...

    # -- jobs the launcher writes itself (runs/ passes data, never script text) -------------
    def run_health_check(self, plan: HealthCheckPlan) -> JobRef:
        """Copy the check script to plan.script and submit the gate job on exactly plan.nodes
        (capability `health_gate`); its output lands at plan.output(job id)."""
        ...

    def run_fabric_test(self, plan: FabricTestPlan) -> JobRef:
        """Submit `azbench fabric test`'s job (capability `health_gate`: jobs on chosen nodes)
        with the CPU runner copied to plan.script where it has one; its output lands at
        plan.output(job id)."""
        ...

    def stage(self, request: StageRequest) -> JobRef:
        """Submit the staging job on one node (capability `stages_data`); its output lands at
        request.output(job_id)."""
        ...

    # -- nodes ----------------------------------------------------------------------------
    def node_states(self) -> dict[str, NodeInfo]:
        """Every node's state and reason, in one call."""
        ...

    def drain(self, reasons: Mapping[str, str]) -> list[str]:
        """Take each node out of service with its reason; the nodes drained."""
        ...

    def resume(self, nodes: Sequence[str]) -> None:
        """Return drained (or evicted) nodes to service."""
        ...

    def leaf_switches(self) -> dict[str, list[str]]:
        """The cluster's leaf switches and their nodes; empty when it models none."""
        ...

    def stage_file(self, local: Path, remote: str) -> None:
        """Copy a file onto the cluster's shared file system."""
        ...

    def run_on_nodes(self, nodes: Sequence[str], argv: Sequence[str], *, timeout_s: float,
                     env: Mapping[str, str] | None = None) -> ExecResult:
        """Run `argv` once on each node (one task per node, all at once); its combined output."""
        ...

    def run_groups(self, groups: Sequence[Sequence[str]], argv: Sequence[str], *, gpus_per_node: int,
                   timeout_s: float) -> list[str]:
        """Run `argv` over each node group (one task per GPU), all groups side by side; the
        output of each group, in order."""
        ...

    def latest_checkpoint(self, run_dir: str) -> int | None:
        """The highest step among the run's complete checkpoints, or None."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...


@dataclass
class Access:
    """A connected cluster: its launcher, its login shell if it has one, what it can do, and the
    Python that runs recipes on its nodes. Close it when done (it holds connections)."""

    launcher: Launcher
    shell: Runner | None
    caps: Capabilities
    python: str = "python3"
    closers: list[Callable[[], None]] = field(default_factory=list, repr=False)
    # What the backend says about how its nodes' measurements relate to real hardware (the local
    # cluster: whether each node has its own link, and what could not be shaped); views print it.
    notes: list[str] = field(default_factory=list)

    def close(self) -> None:
        for close in self.closers:
            close()

    def __enter__(self) -> Access:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
