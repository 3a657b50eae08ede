"""Azure replace and resize against the fake ARM (VMs not booted, so no Slurm: join_timeout_s 0;
tests/test_azure_e2e.py boots them): what ARM is asked, the slots slurm.conf defines as the
limit, and the quota preflight before growing."""

from __future__ import annotations

import pytest

from orchestrator.providers.azure_shared.tags import TAG_SLOTS
from orchestrator.errors import CapacityError
from tests.test_azure_provider import spec_for, up


def _writes(fake, since: int) -> list[str]:
    return [f"{e.method} {e.path.rsplit('/', 2)[-2]}/{e.path.rsplit('/', 1)[-1]}" for e in fake.log[since:]
            if e.method in ("PUT", "PATCH", "POST", "DELETE") and e.path.lower().startswith("/subscriptions/")]


def test_replace_deletes_the_instance_and_restores_capacity_under_the_next_id(fake, clients, azbench_home):
    p, cluster = up(clients, spec_for(nodes=3), join_timeout_s=0)
    assert fake.of_type("virtualMachineScaleSets")["h100t-gpu-00"]["tags"][TAG_SLOTS] == "10"  # 2 + 8 spare
    mark = len(fake.log)
    new = p.replace_node(cluster, "h100t-gpu-00-000000")
    assert new == "h100t-gpu-00-000002"
    assert _writes(fake, mark) == ["POST h100t-gpu-00/delete", "PATCH virtualMachineScaleSets/h100t-gpu-00",
                                   "PATCH tags/default"]  # the set's next instance id, noted
    described = p.describe("h100t")
    assert described is not None and sorted(described.node_names) == \
        ["h100t-gpu-00-000001", "h100t-gpu-00-000002", "h100t-gpu-01-000000"]


def test_resize_grows_within_the_slots_after_the_quota_check_and_shrinks_by_parking(fake, clients, azbench_home):
    p, cluster = up(clients, spec_for(nodes=3), join_timeout_s=0)
    mark = len(fake.log)
    grown = p.resize(cluster, 5)
    assert len(grown.node_names) == 5 and any("/usages" in e.path for e in fake.log[mark:])
    mark = len(fake.log)
    shrunk = p.resize(grown, 3, ["h100t-gpu-00-000000", "h100t-gpu-01-000000"])
    assert sorted(shrunk.node_names) == sorted(set(grown.node_names) - {"h100t-gpu-00-000000", "h100t-gpu-01-000000"})
    # Parked (deallocated, ids kept for a grow) and noted on each set's tags; nothing deleted.
    assert sorted(_writes(fake, mark)) == ["PATCH tags/default", "PATCH tags/default",
                                           "POST h100t-gpu-00/deallocate", "POST h100t-gpu-01/deallocate"]
    assert fake.of_type("virtualMachineScaleSets")["h100t-gpu-00"]["tags"]["azbench-parked"] == "0"


def test_growing_past_the_slots_or_the_quota_changes_nothing(fake, clients, azbench_home):
    p, cluster = up(clients, spec_for(nodes=3, max_vms_per_scale_set=100), join_timeout_s=0)
    mark = len(fake.log)
    # With Slurm to join (join_timeout_s > 0) no set can be added: slurm.conf defines `up`'s sets.
    p.join_timeout_s = 1
    with pytest.raises(CapacityError, match="can add 8 more VMs, not 9.*slurm.conf defines no spare set"):
        p.resize(cluster, 3 + 9)  # one set of 3 VMs, 11 slots (3 + 8): 8 more at most
    p.join_timeout_s = 0
    for row in fake.usages["eastus"]:
        row["currentValue"] = row["limit"]  # the subscription's vCPUs are all used
    with pytest.raises(CapacityError, match="cannot add 1 x Standard_ND96isr_H100_v5: quota"):
        p.resize(cluster, 4)
    assert _writes(fake, mark) == []


def test_a_vm_that_lands_beyond_the_slots_is_deleted_again(fake, clients, azbench_home):
    p, cluster = up(clients, spec_for(nodes=3), join_timeout_s=0)
    fake.resources[fake._vmss_key("h100t-gpu-00")]["tags"][TAG_SLOTS] = "2"  # full: no room
    key = fake._vmss_key("h100t-gpu-01")
    fake.resources[key]["tags"][TAG_SLOTS] = "3"
    fake._instance_ids(key)
    fake._next_instance[key] = 5  # ids 1-4 were used and deleted earlier: Azure gives 5 next
    with pytest.raises(CapacityError, match="beyond the 3 slots"):
        p.resize(cluster, 4)
    assert fake.instances[key] == [0], "the VM that could not join was deleted"
