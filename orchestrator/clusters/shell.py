"""`azbench ssh`: how to open a shell, or run one command, on a cluster's head node.

SSH-reached clusters (azure, ssh): the system OpenSSH client, trusting only the pinned host key.
`head_command` writes `ssh_known_hosts` (0600) in the cluster's directory from the key pinned at
`up` (never trust on first use) and builds `ssh` with StrictHostKeyChecking=yes,
UserKnownHostsFile=that file, no global known_hosts, the cluster's key only, BatchMode (no
prompts). `check_head` first connects once through paramiko with the same pin, so a wrong host
key, a refused key or an unreachable head is one clear RemoteError before OpenSSH starts.
A command is shell text run by the head's login shell, as with ssh (`azbench ssh c -- hostname`),
after the cluster's environment (e.g. SLURM_CONF) is exported.

Local clusters have no sshd: their "head" is this machine, where slurmctld runs. The command (or
an interactive $SHELL) runs here through bash, with the cluster's environment exported and the
cluster's workdir as the current directory, so Slurm's commands talk to that cluster.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator import paths
from orchestrator.seams import command_line
from orchestrator.clusters.lifecycle import parts
from orchestrator.backends import require_extra
from orchestrator.errors import MissingCapability, NotAvailableError, RemoteError
from orchestrator.models import Cluster, SshTarget
from orchestrator.hosts.remote import SshRunner

KNOWN_HOSTS = "ssh_known_hosts"


@dataclass(frozen=True)
class HeadCommand:
    """What to execute here: argv, extra environment, working directory, and a label."""

    argv: list[str]
    where: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None


def head_command(cluster: Cluster, command: list[str]) -> HeadCommand:
    """The command line for `azbench ssh NAME [-- COMMAND]` (an interactive shell without one)."""
    if cluster.ssh is not None:
        return _ssh_command(cluster, cluster.ssh, command)
    traits = parts(cluster).traits
    if traits.head_here:
        return _local_command(cluster, command)
    if traits.shell:  # it has a login node; this home lacks its key and pinned host key
        raise MissingCapability(cluster.name, cluster.provider,
                                f"open a shell: this home has no SSH login for it (no keys in "
                                f"{paths.cluster_dir(cluster.name)}; a cluster adopted from another home "
                                "has its head, but not the keys `up` made)",
                                hint="run `azbench ssh` from the home that ran `up`, or copy its cluster folder here")
    raise MissingCapability(cluster.name, cluster.provider, "open a shell: it has no head node to log in to",
                            hint="its jobs run through its provider's API; see azbench logs")


def check_head(cluster: Cluster, connect_timeout: float = 15.0) -> None:
    """One paramiko connection with the pinned key: RemoteError naming a wrong or unpinned host
    key, a refused login key, or an unreachable head. No-op for local clusters."""
    if cluster.ssh is None:
        return
    target = cluster.ssh.model_copy(update={"known_hosts": pinned_known_hosts(cluster)})
    with SshRunner(target, connect_timeout=connect_timeout, connect_attempts=1) as runner:
        runner.run("true", timeout=connect_timeout)


def pinned_known_hosts(cluster: Cluster) -> Path:
    """`ssh_known_hosts` (0600) holding only the head's pinned key(s), from the stored pin."""
    require_extra("ssh")
    import paramiko
    target = _target(cluster)
    name = target.host if target.port == 22 else f"[{target.host}]:{target.port}"
    try:
        stored = paramiko.HostKeys(str(target.known_hosts))
    except (OSError, paramiko.SSHException) as exc:
        raise RemoteError(f"cannot read the pinned host key of cluster '{cluster.name}' "
                          f"({target.known_hosts}): {exc}") from None
    keys = stored.lookup(name)
    if not keys:
        raise RemoteError(f"no host key is pinned for {name} in {target.known_hosts}: refusing to connect "
                          "(azbench never trusts on first use)")
    cdir = paths.cluster_dir(cluster.name)
    cdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = cdir / KNOWN_HOSTS
    lines = "".join(f"{name} {key.get_name()} {key.get_base64()}\n" for key in keys.values())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(lines)
    os.chmod(path, 0o600)  # an older file keeps its mode through O_TRUNC
    return path


def _ssh_command(cluster: Cluster, target: SshTarget, command: list[str]) -> HeadCommand:
    ssh = shutil.which("ssh")
    if ssh is None:
        raise NotAvailableError("the OpenSSH client (ssh) is not installed",
                                hint="apt-get install openssh-client")
    known = pinned_known_hosts(cluster)
    argv = [ssh, "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known}",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "UpdateHostKeys=no", "-o", "BatchMode=yes",
            "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=15", "-o", "LogLevel=ERROR",
            "-i", str(target.key_path), "-p", str(target.port), "-l", target.user]
    if command:
        argv += [target.host, "--", command_line(" ".join(command), dict(cluster.env))]
    elif cluster.env:  # a login shell with the cluster's environment exported first
        argv += ["-t", target.host, "--", command_line('exec "${SHELL:-/bin/bash}" -l', dict(cluster.env))]
    else:
        argv.append(target.host)
    return HeadCommand(argv=argv, where=f"{target.user}@{target.host}:{target.port}")


def _local_command(cluster: Cluster, command: list[str]) -> HeadCommand:
    cwd = Path(cluster.workdir) if cluster.workdir and Path(cluster.workdir).is_dir() else None
    if command:
        argv = ["bash", "-c", " ".join(command)]
    else:
        argv = [os.environ.get("SHELL") or "/bin/bash", "-i"]
    return HeadCommand(argv=argv, where="this machine (local cluster)", env=dict(cluster.env), cwd=cwd)


def _target(cluster: Cluster) -> SshTarget:
    if cluster.ssh is None:
        raise NotAvailableError(f"cluster '{cluster.name}' is not reached over SSH")
    return cluster.ssh


def describe(cmd: HeadCommand) -> str:
    """The command as one shell-quoted line (for --dry-run style output and logs)."""
    return shlex.join(cmd.argv)
