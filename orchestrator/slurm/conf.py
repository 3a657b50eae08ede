"""Render slurm.conf from one Jinja template (templates/slurm.conf.j2) and typed parameters.

The same template serves the local provider (several slurmd on one host, own munged socket) and
Azure cloud-init (one slurmd per VM, GPUs as gres); SlurmConfParams is the whole contract.
"""

from __future__ import annotations

import re

import jinja2
from pydantic import BaseModel, ConfigDict, Field, computed_field

from orchestrator.paths import templates_dir

TEMPLATE = "slurm.conf.j2"
_SAFE = re.compile(r"^[A-Za-z0-9_./:@%+=,\-\[\]]+$")


class SlurmNode(BaseModel):
    """One NodeName line. `port` is set when several slurmd share a host."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    hostname: str
    addr: str
    port: int | None = None
    cpus: int = Field(1, ge=1)
    gpus: int = Field(0, ge=0)
    real_memory: int | None = Field(None, ge=1, description="MiB")


class SlurmConfParams(BaseModel):
    """Everything slurm.conf depends on. Paths are absolute paths on the cluster's hosts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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
    def gres_types(self) -> str | None:
        return "gpu" if any(n.gpus for n in self.nodes) else None


def render_slurm_conf(params: SlurmConfParams) -> str:
    """The slurm.conf text. Raises ValueError for a value that would break the file's syntax."""
    _check_values(params)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    return env.get_template(TEMPLATE).render(p=params)


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
    for value in values[1:] + [None]:  # type: ignore[list-item]
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
        values += [node.name, node.hostname, node.addr]
    for value in values:
        if not _SAFE.match(value):
            raise ValueError(f"slurm.conf value {value!r} contains a space, '#' or another "
                             "character slurm.conf cannot hold")
