"""`azbench ssh NAME [-- COMMAND]` on the local cluster, through the real sshd with the real OpenSSH
client, refusing a wrong host key; and the pinned ssh command line built for an Azure head."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from orchestrator.providers.ssh.provider import SshProvider
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.providers.ssh.settings import SshSettings
from orchestrator.models import Cluster, ClusterState, SshTarget
from orchestrator.store.database import Store
from tests.cli_helpers import azbench, one_line_error

needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client not installed")


def save(cluster: Cluster) -> None:
    with Store.open() as store:
        store.save_cluster(cluster)


def ssh_cluster(sshd, local_cluster, name="viassh", **overrides) -> Cluster:
    opts = dict(host=sshd.host, port=sshd.port, user=sshd.user, key_path=sshd.client_key,
                host_key=sshd.host_key_line, workdir=local_cluster.workdir, env=dict(local_cluster.env))
    spec = ClusterSpec(name=name, provider="ssh", sku="local", nodes=4, ssh=SshSettings(**{**opts, **overrides}))
    cluster = SshProvider(connect_timeout=5).up(spec)
    save(cluster)
    return cluster


@pytest.mark.integration
def test_ssh_on_the_local_cluster_runs_the_command_here_with_its_env(local_cluster, azbench_home):
    save(local_cluster.model_copy(update={"name": "loc"}))
    result = azbench("ssh", "loc", "--", "sinfo", "-h", "-o", "%D;", "echo", "$SLURM_CONF", home=azbench_home)
    assert result.code == 0, result.err
    assert result.out.split() == ["4", local_cluster.env["SLURM_CONF"]]
    failed = azbench("ssh", "loc", "--", "exit 3", home=azbench_home)
    assert failed.code == 3  # the command's own exit status


@needs_ssh
@pytest.mark.integration
def test_ssh_through_sshd_runs_a_command_with_the_pinned_key(sshd, local_cluster, azbench_home):
    cluster = ssh_cluster(sshd, local_cluster)
    result = azbench("ssh", "viassh", "--", "sinfo -h -o %D && echo $SLURM_CONF", home=azbench_home)
    assert result.code == 0, result.err
    assert result.out.split() == ["4", local_cluster.env["SLURM_CONF"]]
    known = azbench_home / "clusters/viassh/ssh_known_hosts"
    assert known.read_text() == f"[127.0.0.1]:{sshd.port} {sshd.host_key_line}\n"
    assert stat.S_IMODE(known.stat().st_mode) == 0o600
    line = azbench("ssh", "viassh", "--print", home=azbench_home).out
    assert "-o StrictHostKeyChecking=yes" in line and f"-o UserKnownHostsFile={known}" in line
    assert cluster.ssh.known_hosts != known  # the up-time pin is the source; ssh gets its own file


@needs_ssh
@pytest.mark.integration
def test_ssh_refuses_a_wrong_host_key_and_runs_nothing(sshd, local_cluster, azbench_home, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    wrong = " ".join((tmp_path / "other.pub").read_text().split()[:2])
    cluster = ssh_cluster(sshd, local_cluster, name="spoofed")
    cluster.ssh.known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {wrong}\n")  # the pin now disagrees
    marker = tmp_path / "ran"
    result = azbench("ssh", "spoofed", "--", f"touch {marker}", home=azbench_home)
    assert result.code == 5
    assert "does not match the pinned key" in one_line_error(result)
    assert not marker.exists()


@needs_ssh
def test_the_openssh_client_itself_refuses_a_wrong_key(sshd, local_cluster, azbench_home, tmp_path):
    """Second line of defence: ssh with the same options, without azbench's paramiko check."""
    from orchestrator.clusters.shell import head_command
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} " + " ".join((tmp_path / "other.pub").read_text().split()[:2]) + "\n")
    cluster = Cluster(name="raw", provider="ssh", sku="Local_CPU", nodes=1, state=ClusterState.READY,
                      ssh=SshTarget(host=sshd.host, port=sshd.port, user=sshd.user, key_path=sshd.client_key,
                                    known_hosts=known))
    marker = tmp_path / "ran"
    cmd = head_command(cluster, [f"touch {marker}"])
    proc = subprocess.run(cmd.argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert proc.returncode == 255 and not marker.exists()


def test_azure_head_command_pins_the_injected_host_key(azbench_home):
    from orchestrator.providers.azure import cloudinit as ci
    from orchestrator.clusters.shell import head_command
    if shutil.which("ssh") is None:
        pytest.skip("OpenSSH client not installed")
    cdir = azbench_home / "clusters/az"
    sec = ci.load_or_create_secrets(cdir)
    known = ci.write_known_hosts(cdir, "20.0.0.10", sec.host_public_key)
    assert stat.S_IMODE(known.stat().st_mode) == 0o600
    cluster = Cluster(name="az", provider="azure", sku="Standard_ND96isr_H100_v5", nodes=2, state=ClusterState.READY,
                      env={"A": "x y"},
                      ssh=SshTarget(host="20.0.0.10", user="azureuser", key_path=sec.admin_key_path, known_hosts=known))
    cmd = head_command(cluster, ["squeue", "-u", "me"])
    pinned = cdir / "ssh_known_hosts"
    assert pinned.read_text() == "20.0.0.10 " + " ".join(sec.host_public_key.split()[:2]) + "\n"
    argv = cmd.argv
    assert argv[argv.index("-i") + 1] == str(sec.admin_key_path) and argv[argv.index("-l") + 1] == "azureuser"
    assert f"UserKnownHostsFile={pinned}" in argv and "StrictHostKeyChecking=yes" in argv
    assert argv[-3:] == ["20.0.0.10", "--", "export A='x y'; squeue -u me"]


def test_ssh_without_a_head_is_not_available(azbench_home):
    save(Cluster(name="ml", provider="azureml", sku="Standard_ND96isr_H100_v5", nodes=1, state=ClusterState.READY))
    result = azbench("ssh", "ml", home=azbench_home)
    assert result.code == 7 and "has no head node" in one_line_error(result)
    missing = azbench("ssh", "nosuch", home=azbench_home)
    assert missing.code == 2 and "no cluster named 'nosuch'" in one_line_error(missing)


def test_local_head_is_this_machine():
    from orchestrator.clusters.shell import head_command
    cluster = Cluster(name="l", provider="local", sku="Local_CPU", nodes=1, workdir=str(Path("/tmp")),
                      env={"SLURM_CONF": "/x/slurm.conf"})
    cmd = head_command(cluster, ["sinfo"])
    assert cmd.argv == ["bash", "-c", "sinfo"] and cmd.env == {"SLURM_CONF": "/x/slurm.conf"}
    assert cmd.cwd == Path("/tmp") and "this machine" in cmd.where
