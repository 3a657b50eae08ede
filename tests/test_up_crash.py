"""`up` stores the cluster PROVISIONING, with its plan, before the first create: a kill -9 in the
middle of a real `azbench up` against the fake ARM (the real SDKs over TLS) leaves that record,
and `azbench down NAME` deletes everything from it. Also: a rerun of `up` keeps the first
creation time, and an `up` refused before creating anything leaves the store as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from orchestrator.models import ClusterState, Plan
from orchestrator.providers.azure.props import AzureProps
from orchestrator.store.database import Store
from tests.cli_helpers import azbench, one_line_error
from testsupport.fake_arm import SUB, FakeArm, default_catalogue, env_for

SPEC = """\
name: {name}
provider: azure
sku: d4s_v5
nodes: 2
region: eastus
azure:
  polling_interval: 0.05
  boot_timeout_s: 0
  self_expiry: false
"""


@pytest.fixture
def slow_fake(tmp_path):
    """The fake ARM over TLS whose long-running operations never finish until told to."""
    fake = FakeArm(polls_to_finish=1_000_000, tls_dir=tmp_path / "tls").start()
    default_catalogue(fake)
    yield fake
    fake.stop()


def _store(home):
    os.environ["AZBENCH_HOME"] = str(home)
    try:
        return Store.open()
    finally:
        del os.environ["AZBENCH_HOME"]


def test_kill_9_during_up_leaves_a_provisioning_record_that_down_deletes_from(slow_fake, tmp_path):
    fake, home = slow_fake, tmp_path / "home"
    env = {**os.environ, **env_for(fake, "203.0.113.7"), "AZBENCH_HOME": str(home)}
    spec = tmp_path / "c.yaml"
    spec.write_text(SPEC.format(name="killed"))
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "up", "-f", str(spec), "--yes"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not any(e.method == "PUT" and "/resourceGroups/azbench-killed/providers/" in e.path
                  for e in list(fake.log)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "up never created a resource in its group"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # mid-up: its first resource's long-running create is open
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    with _store(home) as store:
        row = store.get_cluster("killed")
        assert row is not None and row.state == ClusterState.PROVISIONING
        assert Plan.model_validate_json(row.plan_json or "{}").nodes == 2
        props = row.cluster.properties_as(AzureProps)  # what down needs to find the resources
        assert (props.subscription_id, props.arm_endpoint, props.resource_group) == (
            SUB, fake.base_url, "azbench-killed")
    assert any(r.get("tags", {}).get("azbench-cluster") == "killed" for r in fake.resources.values())

    fake.polls_to_finish = 1  # ARM works again; the killed client's own operations stay open
    # ARM answers a 202 with Retry-After (docs: learn.microsoft.com/azure/azure-resource-manager/
    # management/async-operations), which the SDK's poller waits instead of its 30 s default.
    fake.retry_after = "1"
    # down finds the subscription and ARM endpoint in the record, not in the environment
    bare = {k: v for k, v in env_for(fake, "203.0.113.7").items()
            if k not in ("AZURE_SUBSCRIPTION_ID", "AZURE_RESOURCE_MANAGER_ENDPOINT")}
    down = azbench("down", "killed", "--yes", home=home, env=bare)  # issue 32: down asks on azure
    assert down.code == 0, down.err
    left = [k for k, r in fake.resources.items() if r.get("tags", {}).get("azbench-cluster") == "killed"]
    assert left == []
    with _store(home) as store:
        assert store.get_cluster("killed").state == ClusterState.TERMINATED


def test_a_rerun_of_up_keeps_the_first_creation_time(azbench_home):
    first = azbench("up", "--provider", "fake", "--sku", "h100", "--nodes", "2", "--region", "eastus",
                    "--name", "again", home=azbench_home)
    assert first.code == 0, first.err
    with _store(azbench_home) as store:
        created = store.get_cluster("again").cluster.created_at
    time.sleep(0.01)  # a different clock reading, were it taken again
    second = azbench("up", "--provider", "fake", "--sku", "h100", "--nodes", "2", "--region", "eastus",
                     "--name", "again", home=azbench_home)
    assert second.code == 0, second.err
    with _store(azbench_home) as store:
        row = store.get_cluster("again")
        assert row.cluster.created_at == created and row.created_at == created
        assert row.state == ClusterState.READY


def test_an_up_refused_before_creating_anything_leaves_the_store_as_it_was(azbench_home):
    refused = azbench("up", "--provider", "fake", "--sku", "h100", "--nodes", "2", "--region", "eastus",
                      "--name", "nope", home=azbench_home, env={"AZBENCH_FAKE_FAIL": "quota"})
    assert refused.code == 3 and "quota" in one_line_error(refused)
    with _store(azbench_home) as store:
        assert store.get_cluster("nope") is None
