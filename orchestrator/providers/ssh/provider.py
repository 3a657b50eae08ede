"""The ssh provider: adopt an existing Slurm cluster (CycleCloud, on-prem) reached over SSH.

`up` pins the login node's host key, connects with key auth, checks that Slurm lists its nodes and
reads the partition's nodes, CPUs and GPUs; it creates nothing. `down` only forgets the cluster
(the local record and the known_hosts file azbench wrote); it never touches the remote side.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from orchestrator import paths
from orchestrator.hardware import catalog
from orchestrator.providers.base import ProviderBase
from orchestrator.providers.ssh.cluster import RECORD, SlurmNodeRow, cluster_dir, load, save, to_cluster
from orchestrator.hosts.remote import SshRunner
from orchestrator.seams import Access, Capabilities, Runner
from orchestrator.slurm import commands
from orchestrator.slurm.launcher import SlurmLauncher
from orchestrator.errors import ConfigError, NotAvailableError, ProvisionError
from orchestrator.models import Cluster, ExecResult, Plan, ScaleSetPlan, SshTarget
from orchestrator.providers.ssh.settings import SshSettings
from orchestrator.specs.cluster import ClusterSpec

if TYPE_CHECKING:
    import paramiko

_GRES_GPU = re.compile(r"(?:^|,)gpu(?::[^:,()]+)?:(\d+)")
_UNUSABLE = ("down", "drain", "fail", "maint", "unknown", "future", "inval")

RunnerFactory = Callable[[SshTarget, dict[str, str]], Runner]


class SshProvider(ProviderBase):
    """Provider for `--provider ssh`; see the module docstring."""

    name = "ssh"
    caps = Capabilities(shell=True) | SlurmLauncher.caps

    def __init__(self, runner_factory: RunnerFactory | None = None, *,
                 connect_timeout: float = 10.0) -> None:
        self._factory = runner_factory or (
            lambda target, env: SshRunner(target, env, connect_timeout=connect_timeout))

    def plan(self, spec: ClusterSpec) -> Plan:
        opts = _options(spec)
        gpus = _sku_gpus(spec.sku)
        partition = opts.partition or "the default partition"
        pin = (f"pin the host key given in the spec into {paths.cluster_dir(spec.name) / 'known_hosts'}"
               if opts.host_key else f"use the pinned host keys in {opts.known_hosts}"
               if opts.known_hosts else "no host key given: up will refuse to connect")
        return Plan(
            cluster=spec.name, provider="ssh", sku=spec.sku, region=None, nodes=spec.nodes,
            gpus_per_node=gpus, total_gpus=gpus * spec.nodes,
            scale_sets=[ScaleSetPlan(name=opts.partition or "default", vms=spec.nodes, gpus=gpus)],
            resources=[], cost_per_hour_usd=None,
            preflight=[pin,
                       f"connect to ssh://{opts.user}@{opts.host}:{opts.port} with key {opts.key_path}",
                       "list Slurm's partitions and nodes there (with the spec's env exported)",
                       f"{partition} has at least {spec.nodes} nodes; read CPUs and GPUs per node",
                       f"use {opts.workdir} as the shared run directory"],
            warnings=["azbench creates nothing on an ssh cluster and down only forgets it"])

    def up(self, spec: ClusterSpec, plan: Plan | None = None) -> Cluster:
        opts = _options(spec)
        target = SshTarget(host=opts.host, port=opts.port, user=opts.user,
                           key_path=Path(opts.key_path).expanduser(),
                           known_hosts=pin_host_key(spec))
        runner = self._factory(target, dict(opts.env))
        try:
            result = runner.run(commands.partitions_argv(), timeout=60)
        finally:
            runner.close()
        partition, nodes = _partition_nodes(result, opts.partition, _url(target))
        usable = [n for n in nodes if not n["state"].startswith(_UNUSABLE)]
        if len(nodes) < spec.nodes:
            raise ProvisionError(f"partition '{partition}' on {_url(target)} has {len(nodes)} "
                                 f"nodes; the spec asks for {spec.nodes}")
        cluster = to_cluster(spec, target, partition, nodes, usable=len(usable))
        save(cluster)
        return cluster

    def describe(self, name: str, spec: ClusterSpec | None = None) -> Cluster | None:
        """The record `up` saved (ssh/cluster.py), or None once `down` forgot the cluster."""
        return load(name)

    def connect(self, cluster: Cluster) -> Access:
        return connect(self, cluster)

    def down(self, cluster: Cluster) -> None:
        """Forget the cluster: remove the local record and the known_hosts azbench wrote."""
        cdir = cluster_dir(cluster)
        (cdir / RECORD).unlink(missing_ok=True)
        if cluster.ssh is not None and cluster.ssh.known_hosts == cdir / "known_hosts":
            cluster.ssh.known_hosts.unlink(missing_ok=True)


def connect(provider: SshProvider, cluster: Cluster) -> Access:
    """One pinned SSH connection to the login node, opened on first use, shared by the
    launcher and the shell."""
    if cluster.ssh is None:
        raise NotAvailableError(f"cluster '{cluster.name}' has no SSH login recorded",
                                hint=f"azbench up -f <its spec> --name {cluster.name}")
    runner = provider._factory(cluster.ssh, dict(cluster.env))
    return Access(launcher=SlurmLauncher(runner, cluster), shell=runner, caps=provider.caps,
                  python=cluster.env.get("AZBENCH_PYTHON", "python3"), closers=[runner.close])


def pin_host_key(spec: ClusterSpec) -> Path:
    """The known_hosts file to trust: ssh.host_key written out, or ssh.known_hosts."""
    opts = _options(spec)
    if opts.host_key is not None:
        name = opts.host if opts.port == 22 else f"[{opts.host}]:{opts.port}"
        entry = _parse_host_key(name, opts.host_key)
        cdir = paths.cluster_dir(spec.name)
        cdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = cdir / "known_hosts"
        path.touch(mode=0o600, exist_ok=True)
        line = entry.to_line()
        if line is None:  # paramiko writes nothing for an entry with no valid key
            raise ConfigError(f"ssh.host_key for {opts.host} holds no usable key")
        path.write_text(line)
        return path
    if opts.known_hosts:
        path = Path(opts.known_hosts).expanduser()
        if not path.is_file():
            raise ConfigError(f"ssh.known_hosts {path} does not exist")
        return path
    raise ConfigError(
        f"ssh cluster '{spec.name}' has no pinned host key: set ssh.host_key to the login node's "
        "public host key line (e.g. the content of /etc/ssh/ssh_host_ed25519_key.pub) or "
        "ssh.known_hosts to a known_hosts file that lists it; azbench never trusts on first use")


def _parse_host_key(name: str, line: str) -> paramiko.hostkeys.HostKeyEntry:
    # imported here: paramiko is the [ssh] extra, and `caps` (sweep asks every backend's) must
    # load this module without it
    import paramiko

    parts = line.split()
    try:
        entry = paramiko.hostkeys.HostKeyEntry.from_line(" ".join([name, *parts[:2]]))
    except Exception:  # paramiko raises InvalidHostKey (a bare Exception) for bad base64
        entry = None
    if entry is None or entry.key is None:
        raise ConfigError("ssh.host_key is not a public key line such as 'ssh-ed25519 AAAA...'")
    return entry


def _partition_nodes(result: ExecResult, wanted: str | None, url: str) -> tuple[str, list[SlurmNodeRow]]:
    if not result.ok:
        reason = (result.stderr.strip() or result.stdout.strip() or f"exit {result.exit_code}")
        raise ProvisionError(f"{commands.NODE_LIST} failed on {url}: {reason.splitlines()[0]}")
    by_partition: dict[str, list[SlurmNodeRow]] = {}
    default = None
    for line in result.stdout.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 5:
            continue
        name, part, cpus, gres, state = fields
        if part.endswith("*"):
            part = default = part[:-1]
        match = _GRES_GPU.search(gres)
        by_partition.setdefault(part, []).append(
            SlurmNodeRow(name=name, cpus=int(cpus) if cpus.isdigit() else 0,
                         gpus=int(match.group(1)) if match else 0, state=state))
    chosen = wanted or default
    if chosen is None or chosen not in by_partition:
        known = ", ".join(sorted(by_partition)) or "none"
        what = f"partition '{wanted}'" if wanted else "a default partition"
        raise ProvisionError(f"{url} has no {what} (partitions: {known})")
    return chosen, by_partition[chosen]


def _options(spec: ClusterSpec) -> SshSettings:
    if SshSettings.KEY not in spec.sections:
        raise ConfigError(f"cluster '{spec.name}' uses provider 'ssh' but has no 'ssh:' section "
                          "(host, user, key_path, workdir)")
    return spec.section(SshSettings)


def _sku_gpus(sku: str | None) -> int:
    row = catalog.find(sku)
    return row.gpus_per_vm if row is not None else 0


def _url(target: SshTarget) -> str:
    return f"ssh://{target.user}@{target.host}:{target.port}"
