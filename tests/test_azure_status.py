"""`azbench status NAME` without SSH (issue 21 point 6): ARM's view of the cluster (VM and
scale-set states, instances, cost so far, expiry) through Provider.live_view, then Slurm's
view when the head answers and "head unreachable: <reason>" when it does not; never a traceback."""

from __future__ import annotations

import json
import socket

import pytest

from orchestrator.clusters import lifecycle
from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.store.database import Store
from tests.cli_helpers import azbench
from tests.fixtures.hangup import hangup_server
from testsupport.fake_arm import STUB_OID, FakeArm, arm_writes, default_catalogue, env_for

SPEC = """\
name: st
provider: azure
sku: d4s_v5
nodes: 2
region: eastus
azure:
  polling_interval: 0.05
  boot_timeout_s: 0
  self_expiry: false
  ssh_ingress_cidr: 203.0.113.7/32
"""


def test_live_view_reads_states_instances_and_tags_without_writing(fake, clients, azbench_home):
    spec = ClusterSpec(name="lv", provider="azure", sku="h100", nodes=3, region="eastus",
                       azure={"ssh_ingress_cidr": "203.0.113.7/32", "max_vms_per_scale_set": 2,
                              "boot_timeout_s": 0})
    p = AzureProvider(clients, capacity_wait_s=0)
    cluster = p.up(spec, p.plan(spec))
    fake.evict("lv-gpu-00", [1], policy="deallocate")
    writes = arm_writes(fake)
    view = p.live_view(cluster)
    assert arm_writes(fake) == writes
    assert view.exists and (view.instances, view.running) == (3, 2) and view.owner == STUB_OID
    assert [(r.kind, r.name, r.state) for r in view.resources] == [
        ("VM", "lv-head", "Succeeded"), ("scale set", "lv-gpu-00", "Succeeded"), ("scale set", "lv-gpu-01", "Succeeded")]
    assert view.resources[1].detail == "Standard_ND96isr_H100_v5, capacity 2: 1 deallocated, 1 running"
    assert view.expires is not None and view.created is not None
    p.down(cluster)
    assert not p.live_view(cluster).exists


@pytest.fixture
def tls_fake(tmp_path):
    fake = FakeArm(polls_to_finish=1, tls_dir=tmp_path / "tls").start()
    default_catalogue(fake)
    fake.retry_after = "0"
    yield fake
    fake.stop()


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def hangup_port():
    """A loopback port that accepts and at once closes: paramiko's transport thread then fails
    reading the SSH banner (what an sshd not yet up, or a firewall reset, looks like)."""
    with hangup_server() as (port, _hits):
        yield port


def test_status_shows_arms_view_and_an_unreachable_head_in_one_line(tls_fake, tmp_path, monkeypatch,
                                                                     hangup_port):
    from orchestrator.specs.cluster import load_cluster_spec
    home = tmp_path / "home"
    env = env_for(tls_fake, "203.0.113.7")
    for key, value in {**env, "AZBENCH_HOME": str(home)}.items():
        monkeypatch.setenv(key, value)
    spec = tmp_path / "c.yaml"
    spec.write_text(SPEC)
    with Store.open() as store:  # `up` in this process (the CLI's own path): the real SDKs over TLS
        c = lifecycle.up(load_cluster_spec(spec), store).cluster
        # the head's address: a loopback port that hangs up before the SSH banner
        store.save_cluster(c.model_copy(update={"ssh": c.ssh.model_copy(
            update={"host": "127.0.0.1", "port": hangup_port})}))
    writes = arm_writes(tls_fake)
    shown = azbench("status", "st", home=home, env=env)
    assert shown.code == 0 and shown.err == "" and "Traceback" not in shown.out, shown.err
    assert "st-head" in shown.out and "st-cpu-00" in shown.out and "2 listed, 2 running" in shown.out
    assert [line for line in shown.out.splitlines() if line.startswith("head unreachable: cannot reach")]
    data = json.loads(azbench("status", "st", "--json", home=home, env=env).out)
    assert data["cloud"]["exists"] and data["cloud"]["instances"] == 2
    assert data["head"].startswith("head unreachable: cannot reach") and data["nodes"] == []
    assert data["cost_so_far_usd"]["st"] is not None and data["expires_in_s"]["st"] > 0
    assert arm_writes(tls_fake) == writes  # status only reads


def test_cluster_status_never_raises_when_the_cloud_is_unreachable(azbench_home, monkeypatch):
    from orchestrator.providers.azure.clients import AzureClients
    from orchestrator.models import Cluster, ClusterState
    from orchestrator.providers.azure.props import AzureProps
    from testsupport.fake_arm import StubCredential
    dead = AzureClients(credential=StubCredential(), subscription_id="00000000-0000-0000-0000-0000000000aa",
                        base_url=f"https://127.0.0.1:{_closed_port()}", retry_total=0)
    monkeypatch.setattr(lifecycle, "get_provider", lambda name, **kw: AzureProvider(dead))
    cluster = Cluster(name="gone", provider="azure", sku="Standard_D4s_v5", nodes=1, region="eastus",
                      state=ClusterState.READY, properties=AzureProps(resource_group="azbench-gone"))
    out = lifecycle.cluster_status(cluster)  # azure-core's ServiceRequestError is no AzbenchError
    assert out.cloud is None and out.cloud_note.startswith("cloud view unavailable: ")
    assert out.head.startswith("head unreachable: ") and "\n" not in out.cloud_note + out.head
