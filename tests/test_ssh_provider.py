"""The ssh provider against the session's local Slurm cluster, reached through the real sshd."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import paths
from orchestrator.providers.ssh.provider import SshProvider
from orchestrator.hosts.remote import SshRunner
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.providers.ssh.settings import SshSettings
from orchestrator.errors import ConfigError, ProvisionError
from orchestrator.models import ClusterState


def _spec(sshd, local_cluster=None, **overrides) -> ClusterSpec:
    fields = dict(host=sshd.host, port=sshd.port, user=sshd.user, key_path=sshd.client_key,
                  host_key=sshd.host_key_line,
                  workdir=local_cluster.workdir if local_cluster else "/tmp",
                  env=dict(local_cluster.env) if local_cluster else {})
    return ClusterSpec(name="viassh", provider="ssh", sku="local", nodes=4,
                       ssh=SshSettings(**{**fields, **overrides}))


@pytest.mark.integration
def test_up_through_sshd_finds_the_partition_and_nodes(sshd, local_cluster, azbench_home):
    provider = SshProvider(connect_timeout=5)
    spec = _spec(sshd, local_cluster)
    plan = provider.plan(spec)
    assert plan.provider == "ssh" and plan.cost_per_hour_usd is None and plan.resources == []
    cluster = provider.up(spec, plan)
    assert (cluster.provider, cluster.state, cluster.partition) == ("ssh", ClusterState.READY, "local")
    assert cluster.node_names == ["node1", "node2", "node3", "node4"]
    assert cluster.properties.gpus_per_node == 0 and cluster.properties.cpus_per_node == 1
    assert cluster.env == local_cluster.env and cluster.workdir == local_cluster.workdir
    pinned = paths.cluster_dir("viassh") / "known_hosts"
    assert cluster.ssh.known_hosts == pinned
    assert pinned.read_text().startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 ")
    assert pinned.stat().st_mode & 0o077 == 0
    with SshRunner(cluster.ssh, cluster.env, connect_timeout=5) as runner:
        assert runner.run("sinfo -h -o %D").stdout.strip() == "4"
    assert provider.describe("viassh") == cluster

    provider.down(cluster)
    assert provider.describe("viassh") is None and not pinned.exists()
    provider.down(cluster)  # idempotent, and the remote cluster is untouched:
    assert Path(local_cluster.env["SLURM_CONF"]).exists()


@pytest.mark.integration
def test_user_known_hosts_file_is_used_as_is(sshd, local_cluster, azbench_home):
    spec = _spec(sshd, local_cluster, host_key=None, known_hosts=sshd.known_hosts)
    cluster = SshProvider(connect_timeout=5).up(spec)
    assert cluster.ssh.known_hosts == sshd.known_hosts


@pytest.mark.integration
def test_unknown_partition_is_a_provision_error(sshd, local_cluster, azbench_home):
    spec = _spec(sshd, local_cluster, partition="gpu")
    with pytest.raises(ProvisionError, match=r"has no partition 'gpu' \(partitions: local\)"):
        SshProvider(connect_timeout=5).up(spec)


def test_missing_host_key_is_a_config_error(sshd, azbench_home):
    spec = _spec(sshd, host_key=None, known_hosts=None)
    with pytest.raises(ConfigError, match="no pinned host key"):
        SshProvider().up(spec)
    assert "no host key given" in SshProvider().plan(spec).preflight[0]


def test_malformed_host_key_is_a_config_error(sshd, azbench_home):
    with pytest.raises(ConfigError, match="not a public key line"):
        SshProvider().up(_spec(sshd, host_key="ssh-ed25519 not-base64!"))
