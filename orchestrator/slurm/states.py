"""Reading Slurm's answers: the one Slurm state -> JobState table and the sacct/squeue/sinfo parsers.

Pure functions over command output, so every row of the table and every odd field format is
unit-tested without a cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.models import JobState, NodeInfo

S = JobState
# Slurm's long state names (sacct State, squeue %T) -> azbench's JobState. Anything absent is
# UNKNOWN. sacct adds detail after a space ("CANCELLED by 0"): only the first word is looked up.
SLURM_STATES: dict[str, JobState] = {
    "PENDING": S.PENDING,
    "CONFIGURING": S.PENDING,  # nodes booting: the job has not started its script yet
    "REQUEUED": S.PENDING,  # we submit --no-requeue, but an admin may requeue by hand
    "REQUEUE_HOLD": S.PENDING,
    "REQUEUE_FED": S.PENDING,
    "RESIZING": S.PENDING,
    "RESV_DEL_HOLD": S.PENDING,
    "RUNNING": S.RUNNING,
    "SUSPENDED": S.RUNNING,  # still holds its nodes and will resume: not an end state
    "STOPPED": S.RUNNING,  # SIGSTOPped by an admin; same reasoning
    "COMPLETING": S.COMPLETING,
    "SIGNALING": S.COMPLETING,
    "STAGE_OUT": S.COMPLETING,
    "COMPLETED": S.COMPLETED,
    "FAILED": S.FAILED,
    "SPECIAL_EXIT": S.FAILED,
    "CANCELLED": S.CANCELLED,
    "REVOKED": S.CANCELLED,  # federation: a sibling cluster ran it instead
    "TIMEOUT": S.TIMEOUT,
    "DEADLINE": S.TIMEOUT,  # --deadline passed: for azbench, the same as running out of time
    "NODE_FAIL": S.NODE_FAIL,
    "PREEMPTED": S.PREEMPTED,
    "OUT_OF_MEMORY": S.OUT_OF_MEMORY,
    "BOOT_FAIL": S.BOOT_FAIL,
}

_EMPTY_FIELDS = {"", "None", "None assigned", "(null)", "n/a"}


def map_state(native: str) -> JobState:
    """JobState for a Slurm state string such as "RUNNING", "CANCELLED by 0" or "CANCELLED+"."""
    words = native.strip().split()
    if not words:
        return JobState.UNKNOWN
    return SLURM_STATES.get(words[0].rstrip("+").upper(), JobState.UNKNOWN)


def parse_exit_code(field: str) -> int | None:
    """One shell-style status from sacct's "code:signal" ("1:0" -> 1, "0:9" -> 137 = 128 + 9)
    or from squeue's raw wait status ("768" -> 3, "15" -> 143)."""
    text = field.strip()
    match = re.fullmatch(r"(\d+):(\d+)", text)
    if match:
        code, signal = int(match.group(1)), int(match.group(2))
    elif text.isdigit():
        code, signal = int(text) >> 8 & 0xFF, int(text) & 0x7F
    else:
        return None
    return 128 + signal if signal else code


def parse_elapsed(field: str) -> float | None:
    """Slurm durations "[D-][HH:]MM:SS[.fff]" -> seconds; None for INVALID/UNLIMITED/empty."""
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", field.strip())
    if not match:
        return None
    days, hours, minutes, seconds = match.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)


def expand_hostlist(hostlist: str) -> list[str]:
    """Expand Slurm's compressed host lists: "node[1-3,7],gpu-[08-09]" -> node1..3, node7, gpu-08..09."""
    if hostlist.strip() in _EMPTY_FIELDS:
        return []
    hosts: list[str] = []
    for part in _split_top_level(hostlist.strip()):
        hosts.extend(_expand_one(part))
    return hosts


def clean_reason(field: str) -> str:
    return "" if field.strip() in _EMPTY_FIELDS else field.strip()


@dataclass(frozen=True)
class SlurmRow:
    """One job as sacct or squeue reported it, before it becomes a JobStatus."""

    job_id: str
    native_state: str
    exit_code: int | None
    nodes: list[str]
    elapsed_s: float | None
    reason: str


def parse_jobs(stdout: str, wanted: set[str]) -> dict[str, SlurmRow]:
    """Rows of JobID|State|ExitCode|NodeList|Elapsed|Reason, from sacct or squeue (see the
    launcher's SACCT_FORMAT and SQUEUE_FORMAT; squeue ends each line with one more "|").

    Lines that are not rows for a wanted id (warnings such as "accounting storage is disabled")
    are ignored. A requeued job may appear twice: the last row wins.
    """
    rows: dict[str, SlurmRow] = {}
    for line in stdout.splitlines():
        fields = line.removesuffix("|").split("|", 5)
        if len(fields) != 6 or fields[0].strip() not in wanted:
            continue
        job_id, state, exit_code, nodes, elapsed, reason = (f.strip() for f in fields)
        rows[job_id] = SlurmRow(
            job_id,
            state,
            parse_exit_code(exit_code),
            expand_hostlist(nodes),
            parse_elapsed(elapsed),
            clean_reason(reason),
        )
    return rows


def parse_sinfo(stdout: str) -> dict[str, NodeInfo]:
    """Rows of `sinfo -h -N -o "%N|%T|%E"`; a node listed once per partition is kept once."""
    nodes: dict[str, NodeInfo] = {}
    for line in stdout.splitlines():
        fields = line.split("|", 2)
        if len(fields) != 3 or not fields[0].strip():
            continue
        name, raw, reason = (f.strip() for f in fields)
        # sinfo suffixes: "*" not responding, "~" powered off, "#" powering up, "%" powering down,
        # "!" pending power down, "$" maintenance reservation, "@" pending reboot, "^" rebooting.
        base = raw.rstrip("*~#%!$@^").lower()
        nodes[name] = NodeInfo(name, base, clean_reason(reason), responding=not raw.endswith("*"))
    return nodes


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p]


def _expand_one(pattern: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    out: list[str] = []
    for item in match.group(1).split(","):
        lo, _, hi = item.partition("-")
        if not hi:
            values = [lo]
        else:
            width = len(lo) if lo.startswith("0") else 0
            values = [str(n).zfill(width) for n in range(int(lo), int(hi) + 1)]
        for value in values:
            out.extend(_expand_one(f"{head}{value}{tail}"))
    return out


_SWITCH = re.compile(r"SwitchName=(\S+)\s+Level=(\d+).*?\bNodes=(\S+)")


def parse_leaf_switches(text: str) -> dict[str, list[str]]:
    """Leaf switches (Level=0) and their nodes from the topology listing (commands.topology)."""
    return {m.group(1): expand_hostlist(m.group(3)) for m in map(_SWITCH.search, text.splitlines())
            if m and m.group(2) == "0"}
