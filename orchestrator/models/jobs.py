"""What a scheduler and a runner report: a command's outcome, a submitted job and its status, a
node's state, and the node names a failure's evidence spells out."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from pydantic import Field

from orchestrator.models.base import Frozen


class ExecResult(Frozen):
    """Outcome of one command on a Runner."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class JobState(str, Enum):
    """azbench's view of a scheduler job; launchers map their native states into it."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETING = "completing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    NODE_FAIL = "node_fail"
    PREEMPTED = "preempted"
    OUT_OF_MEMORY = "out_of_memory"
    BOOT_FAIL = "boot_fail"
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        return self not in _ACTIVE


_ACTIVE = {JobState.PENDING, JobState.RUNNING, JobState.COMPLETING, JobState.UNKNOWN}

# Node states (Slurm's node-state vocabulary, which other launchers map into) that mean "do not
# schedule benchmark work here".
BAD_NODE_STATES = frozenset(
    {"down", "drained", "draining", "drain", "fail", "failing", "future", "inval", "unknown",
     "not_responding", "power_down", "powered_down", "powering_down", "reboot_issued"}
)


@dataclass(frozen=True)
class NodeInfo:
    """One node as its scheduler reports it. `state` is the base state ("down" from Slurm's "down*")."""

    name: str
    state: str
    reason: str = ""
    responding: bool = True

    @property
    def usable(self) -> bool:
        return self.responding and self.state not in BAD_NODE_STATES


class JobRef(Frozen):
    """A submitted job: enough to poll, cancel and fetch it after a restart of azbench."""

    cluster: str
    job_id: str
    backend: str = "slurm"
    run_dir: str = ""


class JobStatus(Frozen):
    ref: JobRef
    state: JobState
    native_state: str = ""
    exit_code: int | None = None
    nodes: list[str] = Field(default_factory=list)
    reason: str = ""
    elapsed_s: float | None = None


_NODE_IN_TEXT = re.compile(r"\b[A-Za-z][\w-]*node[\w-]*?\d+\b|\bnode\d+\b")


def named_nodes(text: str) -> tuple[str, ...]:
    """The node names a failure's evidence spells out ("node3", "gpu-node-3"), first seen first:
    the one rule behind the retry's exclusions (runs.failures) and goodput's failure.nodes."""
    return tuple(dict.fromkeys(_NODE_IN_TEXT.findall(text or "")))
