"""A `status` list that reconciles, and commands on a deleted cluster (issue 39, points 6, 8
and 11's head price), against the fake ARM: Alice's clusters, one deleted behind her back."""

from __future__ import annotations

import json

import pytest

from orchestrator.models import ClusterState
from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.store.database import Store
from orchestrator.store.schema import RunRow
from tests.fixtures.hangup import hangup_server
from tests.cli_helpers import run_cli


def spec_for(name: str, nodes: int = 1, **azure) -> ClusterSpec:
    return ClusterSpec(name=name, provider="azure", sku="h100", nodes=nodes, region="eastus",
                       azure={"ssh_ingress_cidr": "203.0.113.7/32", "boot_timeout_s": 0, "self_expiry": False,
                              **azure})


def up(principals, name: str, **azure):
    from orchestrator.clusters import lifecycle
    principals.act_as("alice")
    with Store.open() as store:
        return lifecycle.up(spec_for(name, **azure), store).cluster


@pytest.fixture
def three(principals):
    """`kept` (ready), `gone` (ready in the record; its group deleted by someone else's sweep)
    and `broken` (its head failed to allocate: FAILED, its GPU scale set still there)."""
    from orchestrator.errors import ProvisionError
    fake = principals.fake
    up(principals, "kept")
    up(principals, "gone")
    principals.clients("bob").resources.resource_groups.begin_delete("azbench-gone").result()
    fake.add_fault("allocation", method="PUT", path_contains="virtualMachines/broken-head", times=1)
    with pytest.raises(ProvisionError):
        up(principals, "broken")
    principals.act_as("alice")
    return fake


def test_the_list_is_arms_state_with_one_listing_for_every_cluster(three, capsys):
    fake = three
    mark = fake.mark()
    code, out, err = run_cli(capsys, "status", "-o", "json")
    assert code == 0, err
    arm = [f"{e.method} {e.path.rsplit('/', 1)[-1]}" for e in fake.since(mark)]
    assert arm == ["GET resourcegroups", "GET resources"]  # one listing of each kind, for all three
    shown = json.loads(out)
    state = {c["name"]: c["state"] for c in shown["clusters"]}
    assert state == {"kept": "ready", "gone": "terminated", "broken": "failed"}
    cost = shown["cost_so_far_usd"]
    assert cost["gone"] is None and shown["expires_in_s"]["gone"] is None
    assert cost["kept"] is not None
    assert cost["broken"] is not None and cost["broken"] >= 0  # its GPU scale set still bills
    assert shown["billed_per_hour_usd"]["broken"] == pytest.approx(98.32, abs=0.01)  # 1 x H100, no head
    with Store.open() as store:
        assert store.get_cluster("gone").state == ClusterState.TERMINATED  # the record followed ARM
    code, out, err = run_cli(capsys, "status")
    row = next(line for line in out.splitlines() if " gone " in line or line.startswith("│ gone"))
    assert "terminated" in row and "$" not in row


def test_commands_on_a_deleted_cluster_say_so_in_one_line_with_no_login(three, capsys, tmp_path):
    with hangup_server() as (port, hits):
        with Store.open() as store:
            row = store.get_cluster("gone")
            c = row.cluster
            from orchestrator.models import SshTarget
            target = SshTarget(host="127.0.0.1", port=port, user="azureuser", key_path=tmp_path / "k",
                               known_hosts=tmp_path / "kh")
            store.save_cluster(c.model_copy(update={"ssh": target}))
            store.create_run(RunRow(id="r1", cluster="gone", recipe="smoke", benchmark="smoke", nodes=1,
                                  repeat_index=0, state="running"))
        for args in (("ssh", "gone", "--", "true"), ("health", "gone"), ("run", "smoke", "--cluster", "gone"),
                     ("logs", "r1")):
            code, out, err = run_cli(capsys, *args)
            assert code == 2, (args, err)
            assert err.count("\n") == 1 and "cluster 'gone' is down (terminated)" in err, (args, err)
        assert hits == []  # no SSH attempt


def test_status_and_the_down_question_price_the_heads_own_size(principals, capsys):
    """A D16s_v5 head is priced as one ($0.768/h, the catalog's), not as the default D8s_v5."""
    up(principals, "big-head", head_size="Standard_D16s_v5")
    code, out, err = run_cli(capsys, "status", "big-head", "-o", "json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["billed_per_hour_usd"]["big-head"] == pytest.approx(98.32 + 0.768, abs=0.001)
    code, out, err = run_cli(capsys, "down", "big-head")
    assert code == 2 and "head Standard_D16s_v5 at $0.768/h" in err
