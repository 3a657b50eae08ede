"""Typed provider properties: Cluster.properties is one model per provider (its `kind` is the
provider's name). Rows stored before that (a plain dict, no kind) load into the right model;
Azure's describe builds the same record as up (one to_cluster), so a cluster recorded through
describe stays in the spot report; properties_as refuses the wrong kind."""

from __future__ import annotations

import json
import sqlite3

import pytest

from orchestrator.models import Cluster, ClusterState
from orchestrator.providers.azureml.props import AzureMLProps
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.fake.props import FakeProps
from orchestrator.providers.local.props import LocalProps
from orchestrator.providers.ssh.props import SshProps
from orchestrator.store.database import AttemptRow, RunRow, Store
from tests.cli_helpers import azbench
from tests.test_azure_provider import provider, spec_for, up
from testsupport.fake_arm import STUB_OID, SUB, default_catalogue

# properties as azbench wrote them before they were typed, one row per provider
LEGACY = {
    "local": ({"cluster_dir": "/h/clusters/l", "jobcomp_file": "/h/clusters/l/log/jobcomp.txt",
               "slurmctld_log": "/h/clusters/l/log/slurmctld.log", "slurmctld_port": 6817},
              LocalProps(cluster_dir="/h/clusters/l", jobcomp_file="/h/clusters/l/log/jobcomp.txt",
                         slurmctld_log="/h/clusters/l/log/slurmctld.log", slurmctld_port=6817)),
    "ssh": ({"cpus_per_node": 96, "gpus_per_node": 8, "usable_nodes": 2, "cluster_dir": "/h/clusters/s"},
            SshProps(cpus_per_node=96, gpus_per_node=8, usable_nodes=2, cluster_dir="/h/clusters/s")),
    "azure": ({"resource_group": "azbench-a", "subscription_id": SUB, "arm_endpoint": "https://arm",
               "head_ip": "20.0.0.1", "head_private_ip": "10.0.0.4", "scale_sets": "a-gpu-00,a-gpu-01",
               "image": "p:o:s:v", "owner": "me", "expires": "2030-01-01T00:00:00Z", "priority": "spot",
               "eviction_policy": "delete", "spot_restore_timeout": 600},
              AzureProps(resource_group="azbench-a", subscription_id=SUB, arm_endpoint="https://arm",
                         head_ip="20.0.0.1", head_private_ip="10.0.0.4", scale_sets=["a-gpu-00", "a-gpu-01"],
                         image="p:o:s:v", owner="me", expires="2030-01-01T00:00:00Z", priority="spot",
                         eviction_policy="delete", spot_restore_timeout=600)),
    # `image`: the key the Azure ML launcher once read and nothing wrote; it is dropped
    "azureml": ({"workspace": "ws", "resource_group": "rg", "subscription_id": SUB, "arm_endpoint": None,
                 "compute": "bench", "owned": True, "min_instances": 0, "image": "old"},
                AzureMLProps(workspace="ws", resource_group="rg", subscription_id=SUB, compute="bench",
                             owned=True, min_instances=0)),
    "fake": ({"resources": 7}, FakeProps(resources=7)),
}


def legacy_row(name: str, provider: str, props: dict) -> str:
    return json.dumps({"name": name, "provider": provider, "sku": "Standard_ND96isr_H100_v5", "nodes": 2,
                       "state": "ready", "created_at": "2026-01-01T00:00:00Z", "properties": props})


@pytest.mark.parametrize("provider_name", sorted(LEGACY))
def test_a_legacy_row_in_sqlite_loads_into_its_providers_model(provider_name, azbench_home):
    props, expected = LEGACY[provider_name]
    with Store.open() as store:
        store.save_cluster(Cluster(name="old", provider=provider_name, sku="Standard_ND96isr_H100_v5", nodes=2))
    # what an azbench from before typed properties left in the row
    with sqlite3.connect(azbench_home / "azbench.db") as conn:
        conn.execute("UPDATE clusters SET cluster_json = ? WHERE name = 'old'",
                     (legacy_row("old", provider_name, props),))
    with Store.open() as store:
        cluster = store.get_cluster("old").cluster
    assert cluster.properties == expected and cluster.properties.kind == provider_name
    again = Cluster.model_validate_json(cluster.model_dump_json())  # and it round-trips typed
    assert again == cluster


def test_a_record_without_properties_gets_its_providers_empty_model():
    assert Cluster(name="p", provider="azure", sku="x", nodes=0).properties == AzureProps()
    assert Cluster(name="p", provider="local", sku="x", nodes=0, properties={}).properties == LocalProps()


def test_properties_of_another_provider_are_refused():
    with pytest.raises(ValueError, match="cannot hold AzureProps"):
        Cluster(name="p", provider="local", sku="x", nodes=1, properties=AzureProps())
    with pytest.raises(ValueError):
        Cluster(name="p", provider="local", sku="x", nodes=1, properties={"kind": "azure"})


def test_properties_as_the_wrong_model_raises_naming_both():
    cluster = Cluster(name="l", provider="local", sku="Local_CPU", nodes=1,
                      properties=LocalProps(cluster_dir="/x"))
    assert cluster.properties_as(LocalProps).cluster_dir == "/x"
    with pytest.raises(TypeError, match=r"cluster 'l' \(provider 'local'\) has properties LocalProps, "
                                        r"not AzureProps"):
        cluster.properties_as(AzureProps)


@pytest.mark.parametrize("azure", [{}, {"priority": "spot", "eviction_policy": "delete", "max_price": 40.5,
                                        "spot_restore_timeout": 600}], ids=["regular", "spot"])
def test_azure_describe_builds_the_record_up_built(fake, clients, azbench_home, azure):
    spec = spec_for(**azure)
    p, made = up(clients, spec)
    described = provider(clients).describe(spec.name)  # a fresh provider: only ARM to go on
    assert described == made
    props = made.properties_as(AzureProps)
    assert props.resource_group == "azbench-h100t" and props.subscription_id == SUB
    assert props.head_ip and props.head_private_ip and props.image and props.owner == STUB_OID
    assert props.scale_sets == [s.name for s in p.plan(spec).scale_sets] and made.ssh is not None
    assert made.cost_per_hour_usd == p.plan(spec).cost_per_hour_usd
    if azure:
        assert (props.priority, props.eviction_policy, props.spot_restore_timeout) == ("spot", "delete", 600)
    else:
        assert props.priority == "regular" and props.eviction_policy is None


def test_azure_describe_keeps_the_creation_time_of_the_first_up(fake, clients, azbench_home):
    _, first = up(clients, spec_for())
    _, rerun = up(clients, spec_for())
    assert rerun.created_at == first.created_at == provider(clients).describe("h100t").created_at


def test_the_spot_report_counts_a_cluster_recorded_through_describe(fake, clients, azbench_home):
    up(clients, spec_for(priority="spot"))
    described = provider(clients).describe("h100t")
    with Store.open() as store:
        store.save_cluster(described)
        store.create_run(RunRow(id="r1", cluster="h100t", recipe="smoke", benchmark="smoke", nodes=3,
                                state="succeeded"))
        store.add_attempt(AttemptRow(run_id="r1", attempt=1, state="succeeded",
                                     started_at=described.created_at, ended_at=described.created_at))
    result = azbench("report", "--json", home=azbench_home)
    assert result.code == 0, result.err
    lines = json.loads(result.out)["preemptions"]
    assert [(x["run_id"], x["spot"]) for x in lines] == [("r1", True)]


def test_a_provisional_azure_record_carries_what_down_needs(azbench_home, monkeypatch):
    from orchestrator.providers.azure.provider import AzureProvider
    monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", SUB)
    monkeypatch.setenv("AZURE_RESOURCE_MANAGER_ENDPOINT", "https://arm.example/")
    spec = spec_for(priority="spot")
    p = AzureProvider()
    pending = p.provisional(spec, p.plan(spec))
    assert pending.state == ClusterState.PROVISIONING
    props = pending.properties_as(AzureProps)
    assert (props.subscription_id, props.arm_endpoint, props.resource_group) == (
        SUB, "https://arm.example", "azbench-h100t")
    assert props.priority == "spot" and props.scale_sets


@pytest.fixture
def fake_aml(monkeypatch):
    """tests/test_azureml.py's fake Azure ML workspace (its own server here)."""
    from tests.test_azureml import FakeAml
    monkeypatch.setenv("AZUREML_CURRENT_CLOUD", "AzureCloud")  # MLClient sets it; restored after
    server = FakeAml().start()
    server.add_workspace()
    default_catalogue(server)
    server.set_quota(100_000)
    yield server
    server.stop()


def test_azureml_down_from_a_provisional_record_deletes_only_a_compute_made_for_it(fake_aml):
    from tests import test_azureml as T
    prov, s = T.provider(fake_aml), T.spec()
    pending = prov.provisional(s, prov.plan(s))
    props = pending.properties_as(AzureMLProps)
    assert (props.workspace, props.compute, props.owned) == ("ws1", "bench", None)
    prov.up(s, prov.plan(s))
    fake_aml.compute()["tags"] = {}  # someone else's compute of that name: never deleted
    prov.down(pending)
    assert fake_aml.compute() is not None
    fake_aml.compute()["tags"] = {"azbench-cluster": "bench"}  # the one a crashed up made
    prov.down(pending)
    assert fake_aml.compute() is None
    prov.down(pending)  # missing is success
