"""Why an attempt failed: the one failure-class table and a pure classifier over what we saw.

`FAILURES` is the table readers check first: each class says whether it is infrastructure
(retried, the suspect nodes excluded) or the user's (code, config, convergence: never retried).
`classify()` turns a job's final status, the watch loop's verdict, the tail of its logs and the
nodes' states into one `Failure` with its suspect nodes and the evidence line. Precedence: the
run's deadline, then a spot eviction notice (a node of the job drained with PREEMPT_REASON by the
spot agent, templates/spot_agent.py), then a hang azbench cancelled, then Slurm's own verdict
(NODE_FAIL, TIMEOUT, ...), then nodes that went down under the job, then hardware/fabric lines in
the log, then the application's exit. Everything here is pure, so every row is unit-tested without a cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, Mapping, Sequence

from orchestrator.models import JobState, named_nodes


class FailureClass(str, Enum):
    NODE_FAIL = "node_fail"
    NODE_LOST = "node_lost"
    BOOT_FAIL = "boot_fail"
    PREEMPTED = "preempted"
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out_of_memory"
    HANG = "hang"
    NCCL_ERROR = "nccl_error"
    IB_ERROR = "ib_error"
    XID_ERROR = "xid_error"
    ECC_ERROR = "ecc_error"
    HEALTH_GATE = "health_gate"
    SCHEDULER_LOST = "scheduler_lost"
    PORT_IN_USE = "port_in_use"
    CONFIG_ERROR = "config_error"
    APP_ERROR = "app_error"
    NOT_CONVERGED = "not_converged"
    DEADLINE = "deadline"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class FailureInfo:
    category: str  # "infra" (retryable, per RetryPolicy.on) or "user"
    meaning: str

    @property
    def retryable(self) -> bool:
        return self.category == "infra"


F = FailureClass
# THE table. Infra failures are retried with their suspect nodes excluded; user failures stop.
FAILURES: dict[FailureClass, FailureInfo] = {
    F.NODE_FAIL: FailureInfo("infra", "Slurm ended the job NODE_FAIL: a node stopped responding"),
    F.NODE_LOST: FailureInfo("infra", "a node of the job went down or stopped responding"),
    F.BOOT_FAIL: FailureInfo("infra", "Slurm could not boot/configure the job's nodes"),
    F.PREEMPTED: FailureInfo("infra", "the job was preempted (a spot eviction notice or the scheduler)"),
    F.TIMEOUT: FailureInfo("infra", "the job hit its Slurm time limit"),
    F.OUT_OF_MEMORY: FailureInfo("infra", "Slurm killed the job for host memory (OUT_OF_MEMORY)"),
    F.HANG: FailureInfo("infra", "no new training step for hang_timeout: cancelled"),
    F.NCCL_ERROR: FailureInfo("infra", "NCCL/collective error or timeout in the log"),
    F.IB_ERROR: FailureInfo("infra", "InfiniBand error (link down, retry exceeded) in the log"),
    F.XID_ERROR: FailureInfo("infra", "GPU XID error in the log"),
    F.ECC_ERROR: FailureInfo("infra", "GPU ECC error in the log"),
    F.HEALTH_GATE: FailureInfo("infra", "the pre-run health gate left too few healthy nodes"),
    F.SCHEDULER_LOST: FailureInfo("infra", "the scheduler forgot the job and it left no exit"),
    F.PORT_IN_USE: FailureInfo("infra", "the rendezvous port was taken on the master node"),
    F.CONFIG_ERROR: FailureInfo("user", "the recipe rejected its configuration (exit 2)"),
    F.APP_ERROR: FailureInfo("user", "the application exited non-zero (a code error)"),
    F.NOT_CONVERGED: FailureInfo("user", "the run finished without reaching its target"),
    F.DEADLINE: FailureInfo("user", "the run used up its max_duration"),
    F.CANCELLED: FailureInfo("user", "the job was cancelled outside azbench's retry logic"),
}

STATE_CLASSES: dict[JobState, FailureClass] = {
    JobState.NODE_FAIL: F.NODE_FAIL,
    JobState.BOOT_FAIL: F.BOOT_FAIL,
    JobState.PREEMPTED: F.PREEMPTED,
    JobState.TIMEOUT: F.TIMEOUT,
    JobState.OUT_OF_MEMORY: F.OUT_OF_MEMORY,
    JobState.CANCELLED: F.CANCELLED,
}

# Log evidence, most specific first. Each names the node through a job step's "R: " rank prefix or a
# node name on the line. CUDA OOM is the user's batch size, not the machine: not retried.
LOG_PATTERNS: list[tuple[re.Pattern[str], FailureClass]] = [
    (re.compile(r"\bXid\b[^\n]*?\b\d+\b|NVRM: Xid", re.I), F.XID_ERROR),
    (re.compile(r"uncorrectable ECC|ECC error|double bit ECC|DBE error", re.I), F.ECC_ERROR),
    (re.compile(r"IBV_WC_RETRY_EXC_ERR|transport retry counter exceeded|ibv_\w+ failed|"
                r"\bIB\b[^\n]*link (is )?down|mlx5[^\n]*(port|link)[^\n]*down", re.I), F.IB_ERROR),
    (re.compile(r"NCCL error|ncclSystemError|ncclInternalError|ncclRemoteError|NCCL WARN[^\n]*"
                r"(timeout|timed out)|Watchdog caught collective operation timeout", re.I),
     F.NCCL_ERROR),
    (re.compile(r"Node failure on (?P<node>[\w.-]+)|DUE TO NODE FAILURE", re.I), F.NODE_LOST),
    (re.compile(r"EADDRINUSE|address already in use", re.I), F.PORT_IN_USE),
]
# The drain reason the spot agent (templates/spot_agent.py) gives a node on an eviction notice.
PREEMPT_REASON = "azbench-preempt"
# Classes whose suspects are not excluded from the retry: an evicted node is not a bad node, and
# the provider gives its capacity back (same name after deallocate) before the next attempt.
NOT_EXCLUDED: frozenset[FailureClass] = frozenset({F.PREEMPTED})
_CONFIG_LINE = re.compile(r"application error|invalid (argument|config)|usage: ", re.I)
_CUDA_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError", re.I)
_RANK_PREFIX = re.compile(r"^\s*(\d+): ")


@dataclass(frozen=True)
class Failure:
    cls: FailureClass
    suspects: tuple[str, ...] = ()
    evidence: str = ""

    @property
    def info(self) -> FailureInfo:
        return FAILURES[self.cls]

    @property
    def retryable(self) -> bool:
        return self.info.retryable

    def describe(self) -> str:
        where = f" on {', '.join(self.suspects)}" if self.suspects else ""
        why = f": {self.evidence}" if self.evidence else ""
        return f"{self.cls.value}{where} ({self.info.meaning}){why}"


@dataclass(frozen=True)
class Observation:
    """What the runner saw of one finished (or cancelled) attempt."""

    state: JobState
    exit_code: int | None = None
    nodes: Sequence[str] = ()
    log_tail: str = ""
    down_nodes: Iterable[str] = ()
    tasks_per_node: int = 1
    hung: bool = False
    deadline: bool = False
    converged: bool | None = None
    preempted_nodes: Iterable[str] = ()
    extra: Mapping[str, str] = field(default_factory=dict)


def classify(obs: Observation) -> Failure | None:
    """The failure behind `obs`, or None when the attempt succeeded."""
    if obs.deadline:
        return Failure(F.DEADLINE)
    preempted = tuple(n for n in obs.nodes if n in set(obs.preempted_nodes))
    if preempted and not (obs.state == JobState.COMPLETED and obs.exit_code in (0, None)):
        return Failure(F.PREEMPTED, preempted, f"spot eviction notice on {', '.join(preempted)}")
    if obs.hung:
        return Failure(F.HANG, _down(obs))
    if obs.state == JobState.COMPLETED and (obs.exit_code in (0, None)):
        return None if obs.converged is not False else Failure(F.NOT_CONVERGED)
    state_cls = STATE_CLASSES.get(obs.state)
    if state_cls is not None and state_cls != F.CANCELLED:
        suspects = _down(obs) or _log_nodes(obs, F.NODE_LOST)
        return Failure(state_cls, suspects, _state_evidence(obs))
    if _down(obs):
        return Failure(F.NODE_LOST, _down(obs), "node(s) down under the job")
    hit = scan_log(obs.log_tail, obs.nodes, obs.tasks_per_node)
    if hit is not None:
        return hit
    if state_cls == F.CANCELLED:
        return Failure(F.CANCELLED, (), _state_evidence(obs))
    if obs.state == JobState.UNKNOWN:
        return Failure(F.SCHEDULER_LOST, (), "not listed by the scheduler and no exit recorded")
    return _app_failure(obs)


def scan_log(text: str, nodes: Sequence[str], tasks_per_node: int = 1) -> Failure | None:
    """The first infrastructure signature in a log (most specific class first), with its node."""
    lines = text.splitlines()
    for pattern, cls in LOG_PATTERNS:
        matches = [(line, m) for line in lines if (m := pattern.search(line))]
        if not matches:
            continue
        suspects: list[str] = []
        for line, m in matches:
            node = _line_node(line, m, nodes, tasks_per_node)
            if node and node not in suspects:
                suspects.append(node)
        return Failure(cls, tuple(suspects), _clip(matches[0][0]))
    return None


def preempted_nodes(reasons: Mapping[str, str]) -> list[str]:
    """Nodes whose Slurm reason is the spot agent's drain reason ({node: reason} from the node listing)."""
    return sorted(n for n, why in reasons.items() if why.startswith(PREEMPT_REASON))


def infra_retryable(cls: FailureClass, on: Iterable[str]) -> bool:
    """True when the policy's `on` list covers this class's category."""
    return FAILURES[cls].category in set(on)


# -- helpers ------------------------------------------------------------------------------


def _down(obs: Observation) -> tuple[str, ...]:
    down = set(obs.down_nodes)
    return tuple(n for n in obs.nodes if n in down)


def _log_nodes(obs: Observation, cls: FailureClass) -> tuple[str, ...]:
    hit = scan_log(obs.log_tail, obs.nodes, obs.tasks_per_node)
    return hit.suspects if hit is not None and hit.cls == cls else ()


def _line_node(line: str, match: re.Match[str], nodes: Sequence[str], per_node: int) -> str | None:
    named = match.groupdict().get("node")
    if named and named in nodes:
        return named
    for node in nodes:
        if re.search(rf"\b{re.escape(node)}\b", line):
            return node
    rank = _RANK_PREFIX.match(line)
    if rank and nodes:
        index = int(rank.group(1)) // max(per_node, 1)
        return nodes[index] if index < len(nodes) else None
    return None


def _app_failure(obs: Observation) -> Failure:
    code = obs.exit_code
    config_line = next((ln for ln in obs.log_tail.splitlines() if _CONFIG_LINE.search(ln)), "")
    if code == 2 or config_line:
        return Failure(F.CONFIG_ERROR, (), _clip(config_line) or f"exit {code}")
    oom = next((ln for ln in obs.log_tail.splitlines() if _CUDA_OOM.search(ln)), "")
    if oom:
        return Failure(F.APP_ERROR, (), _clip(oom))
    last_error = next((ln for ln in reversed(obs.log_tail.splitlines())
                       if re.search(r"error|exception|traceback", ln, re.I)), "")
    return Failure(F.APP_ERROR, (), _clip(last_error) or f"exit {code}")


def _state_evidence(obs: Observation) -> str:
    return f"Slurm state {obs.state.value}" + (f", exit {obs.exit_code}" if obs.exit_code else "")


def _clip(line: str, limit: int = 200) -> str:
    line = _RANK_PREFIX.sub("", line.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def with_named_suspects(failure: Failure, text: str = "") -> Failure:
    """`failure`, its suspects those its evidence (or `text`, the stored line) names when it has
    none of its own: a node the evidence names is the one the retry leaves out."""
    if failure.suspects or failure.cls in NOT_EXCLUDED or not failure.retryable:
        return failure
    named = named_nodes(f"{failure.evidence}\n{text}")
    return Failure(failure.cls, named, failure.evidence) if named else failure


def lost_work(step_times: Sequence[tuple[int, float]], kept_step: int | None) -> tuple[int, float]:
    """(steps, seconds of step time) a failed attempt trained past the checkpoint the next attempt
    resumes from (`kept_step`; None = from scratch, so everything is lost)."""
    kept = kept_step or 0
    lost = [(step, sec) for step, sec in step_times if step > kept]
    last = max((step for step, _ in step_times), default=kept)
    return max(last - kept, 0), round(sum(sec for _, sec in lost), 3)
