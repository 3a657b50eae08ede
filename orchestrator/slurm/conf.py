"""Render slurm.conf from one Jinja template (templates/slurm.conf.j2) and typed parameters.

The same template serves the local provider (several slurmd on one host, own munged socket) and
Azure cloud-init (one slurmd per VM, GPUs as gres); SlurmConfParams is the whole contract.
"""

from __future__ import annotations

import re

from pydantic import Field, computed_field

from orchestrator.models import Frozen
from orchestrator.templating import render

TEMPLATE = "slurm.conf.j2"
_SAFE = re.compile(r"^[A-Za-z0-9_./:@%+=,\-\[\]]+$")


class SlurmNode(Frozen):
    """One NodeName line. `port` is set when several slurmd share a host."""

    name: str
    # None leaves NodeHostname out: Slurm then takes the NodeName (slurm.conf(5), NodeHostname
    # "By default, the NodeHostname will be identical in value to NodeName"). Several slurmd on
    # one host (each started with `-N name`, reached at NodeAddr:Port) need no shared hostname,
    # and a shared one costs every daemon a walk of one hash chain per node on start
    # (read_config.c _push_to_hashtbls appends at the chain's tail, slurm-22-05-8-1): quadratic.
    hostname: str | None = None
    addr: str
    port: int | None = None
    cpus: int = Field(1, ge=1)
    gpus: int = Field(0, ge=0)
    real_memory: int | None = Field(None, ge=1, description="MiB")
    # FUTURE: a slot defined for later (a replacement or a resize), hidden, never contacted and
    # never scheduled until its slurmd registers (then idle); every daemon already knows its
    # address. The local provider starts every node this way (see its module docstring).
    state: str = Field("UNKNOWN", pattern=r"^(UNKNOWN|FUTURE)$")


class NodeLine(Frozen):
    """One NodeName line for one or more nodes: a run of nodes that share host, address and
    hardware and listen on consecutive ports folds into `NodeName=node[1-2048] ... Port=[a-b]`.
    One line instead of 2,048 keeps slurm.conf parsing (done by every slurmd and every job step
    on an emulated cluster) from growing with the square of the node count."""

    names: str
    hostname: str | None
    addr: str
    port: str | None = None
    cpus: int
    gpus: int
    real_memory: int | None
    state: str = "UNKNOWN"


def node_lines(nodes: list[SlurmNode]) -> list[NodeLine]:
    """Fold runs of same-host nodes with consecutive names and ports (see NodeLine)."""
    runs: list[list[SlurmNode]] = []
    for node in nodes:
        prev = runs[-1][-1] if runs else None
        if prev is not None and _continues(prev, node):
            runs[-1].append(node)
        else:
            runs.append([node])
    lines = []
    for run in runs:
        first, last = run[0], run[-1]
        port = None if first.port is None else (
            str(first.port) if len(run) == 1 else f"[{first.port}-{last.port}]")
        lines.append(NodeLine(names=compress_hostlist([n.name for n in run]), hostname=first.hostname,
                              addr=first.addr, port=port, cpus=first.cpus, gpus=first.gpus,
                              real_memory=first.real_memory, state=first.state))
    return lines


def _continues(prev: SlurmNode, node: SlurmNode) -> bool:
    if prev.port is None or node.port != prev.port + 1:
        return False  # one slurmd per host (Azure): one line per node, as before
    same = (prev.hostname, prev.addr, prev.cpus, prev.gpus, prev.real_memory, prev.state) == \
        (node.hostname, node.addr, node.cpus, node.gpus, node.real_memory, node.state)
    a, b = re.fullmatch(r"(.*?)(\d+)", prev.name), re.fullmatch(r"(.*?)(\d+)", node.name)
    return bool(same and a and b and a.group(1) == b.group(1) and not b.group(2).startswith("0")
                and int(b.group(2)) == int(a.group(2)) + 1)


def tree_topology(names: list[str], rack_size: int = 18, racks_per_set: int = 5) -> list[str]:
    """topology.conf lines for topology/tree: a leaf switch per `rack_size` nodes (in order),
    a switch per scale set over `racks_per_set` racks, and a top switch over the sets (over the
    racks when there is one set)."""
    racks = [names[i:i + rack_size] for i in range(0, len(names), rack_size)]
    lines = [f"SwitchName=rack{r + 1} Nodes={compress_hostlist(rack)}" for r, rack in enumerate(racks)]
    sets = [list(range(1, len(racks) + 1))[i:i + racks_per_set]
            for i in range(0, len(racks), racks_per_set)]
    if len(racks) == 1:
        return lines
    if len(sets) == 1:  # every switch must reach every other one, or no job spans two racks
        return lines + [f"SwitchName=top Switches={compress_hostlist([f'rack{r}' for r in sets[0]])}"]
    lines += [f"SwitchName=ss{s + 1} Switches={compress_hostlist([f'rack{r}' for r in members])}"
              for s, members in enumerate(sets)]
    lines.append(f"SwitchName=top Switches={compress_hostlist([f'ss{s + 1}' for s in range(len(sets))])}")
    return lines


class SlurmConfParams(Frozen):
    """Everything slurm.conf depends on. Paths are absolute paths on the cluster's hosts."""

    cluster_name: str
    controller_host: str
    controller_addr: str
    slurmctld_port: int = 6817
    slurmd_port: int = 6818
    state_dir: str
    spool_dir: str
    log_dir: str
    pid_dir: str
    slurm_user: str = "slurm"
    slurmd_user: str = "root"
    auth_socket: str | None = None
    jobcomp_file: str | None = None
    nodes: list[SlurmNode] = Field(min_length=1)
    partition: str = "batch"
    oversubscribe: str = Field("FORCE", pattern=r"^(FORCE|YES|NO|EXCLUSIVE)(:\d+)?$")
    slurmd_timeout: int = Field(10, ge=1)
    message_timeout: int = Field(5, ge=1)
    kill_wait: int = Field(5, ge=0)
    min_job_age: int = Field(600, ge=2)
    multiple_slurmd: bool = False
    topology_plugin: str | None = None
    select_params: str = "CR_Core"
    slurmd_parameters: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def node_list(self) -> str:
        return compress_hostlist([n.name for n in self.nodes])

    @computed_field  # type: ignore[prop-decorator]
    @property
    def node_lines(self) -> list[NodeLine]:
        return node_lines(self.nodes)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gres_types(self) -> str | None:
        return "gpu" if any(n.gpus for n in self.nodes) else None


def render_slurm_conf(params: SlurmConfParams) -> str:
    """The slurm.conf text. Raises ValueError for a value that would break the file's syntax."""
    _check_values(params)
    return render(TEMPLATE, p=params)


_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> list[int | str]:
    """The order node names read in, numbers by value: node2 before node10 (sorted(..., key=natural_key))."""
    return [int(p) if p.isdigit() else p for p in _DIGITS.split(name)]


def compress_hostlist(names: list[str]) -> str:
    """Slurm hostlist syntax: ['node1','node2','node3','gpu7'] -> 'node[1-3],gpu7'."""
    groups: dict[str, list[tuple[int, str]]] = {}
    order: list[str] = []
    plain: list[str] = []
    for name in names:
        match = re.fullmatch(r"(.*?)(\d+)", name)
        if not match:
            plain.append(name)
            continue
        prefix, digits = match.groups()
        if prefix not in groups:
            groups[prefix] = []
            order.append(prefix)
        groups[prefix].append((int(digits), digits))
    parts = [_compress_group(prefix, groups[prefix]) for prefix in order]
    return ",".join(parts + plain)


def _compress_group(prefix: str, numbers: list[tuple[int, str]]) -> str:
    # Only unpadded numbers are folded into ranges; zero-padded names stay as they are.
    if len(numbers) == 1 or any(d != str(n) for n, d in numbers):
        return ",".join(prefix + d for _, d in numbers)
    values = sorted({n for n, _ in numbers})
    ranges: list[str] = []
    start = prev = values[0]
    tail: list[int | None] = [*values[1:], None]
    for value in tail:
        if value is not None and value == prev + 1:
            prev = value
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return f"{prefix}[{','.join(ranges)}]"


def _check_values(params: SlurmConfParams) -> None:
    # slurm.conf has no quoting: a space or '#' in a value silently changes the meaning.
    values = [params.cluster_name, params.controller_host, params.controller_addr,
              params.state_dir, params.spool_dir, params.log_dir, params.pid_dir,
              params.slurm_user, params.slurmd_user, params.partition, params.auth_socket or "x",
              params.jobcomp_file or "x"]
    for node in params.nodes:
        values += [node.name, node.hostname or node.name, node.addr]
    for value in values:
        if not _SAFE.match(value):
            raise ValueError(f"slurm.conf value {value!r} contains a space, '#' or another "
                             "character slurm.conf cannot hold")
