"""ARM errors by HTTP status first (issue 21, point 1), throttling within a budget, tokens kept.

Against the fake ARM (testsupport/fake_arm.py), which answers a missing role assignment as
Microsoft.Authorization does (404 RoleAssignmentNotFound) and throttles with 429 + Retry-After.
Retry-After waits are recorded, not slept (ThrottleBudget.sleep), so 20 throttled writes cost
no wall time; the waits asked for are asserted instead.
"""

from __future__ import annotations

import json

import pytest

from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.providers.azure_shared.errors import (
    ArmErrorClass,
    ThrottleBudgetSpent,
    arm_error,
    classify,
    is_not_found,
)
from orchestrator.providers.azure.resources import rid
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import PreflightError, ProvisionError
from testsupport.fake_arm import SUB

INGRESS = "203.0.113.7/32"
VMSS_00 = "virtualMachineScaleSets/h100t-gpu-00"


def spec_for(name="h100t", nodes=2, **azure) -> ClusterSpec:
    opts = {"ssh_ingress_cidr": INGRESS, "max_vms_per_scale_set": 2, "boot_timeout_s": 0, **azure}
    return ClusterSpec(name=name, provider="azure", sku="h100", nodes=nodes, region="eastus", azure=opts)


def up(clients, spec, **kw):
    p = AzureProvider(clients, capacity_wait_s=0, **kw)
    return p.up(spec, p.plan(spec))


@pytest.fixture
def waits(clients):
    """The Retry-After waits the throttling policy asked for, in order (nothing is slept)."""
    asked: list[float] = []
    clients.throttle.sleep = asked.append
    return asked


def test_status_decides_before_the_code():
    assert classify(404, "RoleAssignmentNotFound") is ArmErrorClass.NOT_FOUND
    assert classify(404, "AnyRpSaysItDifferently") is ArmErrorClass.NOT_FOUND
    assert classify(429, "OperationNotAllowed", "x", ()) is ArmErrorClass.THROTTLED
    assert classify(503, "ServiceUnavailable") is ArmErrorClass.TRANSIENT
    assert classify(409, "AnotherOperationInProgress") is ArmErrorClass.CONFLICT
    assert classify(409, "SkuNotAvailable") is ArmErrorClass.SKU_UNAVAILABLE
    assert classify(409, "OperationNotAllowed", "exceeding approved standardNDSH100v5Family Cores quota") \
        is ArmErrorClass.QUOTA
    assert classify(200, "AllocationFailed") is ArmErrorClass.CAPACITY  # an async operation's failure


def test_a_missing_role_assignment_is_the_authorization_rps_404_and_reads_as_gone(fake, clients, azbench_home):
    from azure.core.exceptions import HttpResponseError
    scope = rid(SUB, "azbench-h100t")
    clients.resources.resource_groups.create_or_update("azbench-h100t", {"location": "eastus"})
    with pytest.raises(HttpResponseError) as err:
        clients.authorization.role_assignments.get(scope, "00000000-0000-0000-0000-000000000001")
    assert (err.value.status_code, arm_error(err.value).code) == (404, "RoleAssignmentNotFound")
    assert is_not_found(err.value)


def test_up_with_self_expiry_creates_the_assignment_and_a_rerun_reads_it(fake, clients, azbench_home):
    up(clients, spec_for())  # self-expiry is on by default
    reads = [e for e in fake.log if "roleassignments" in e.path.lower()]
    # In a group this `up` just made (ARM's 201) there is none to read (issue 39: requests).
    assert [(e.method, e.status) for e in reads] == [("PUT", 201)]
    up(clients, spec_for())
    reads = [e for e in fake.log if "roleassignments" in e.path.lower()]
    assert [(e.method, e.status) for e in reads] == [("PUT", 201), ("GET", 200)]


def test_up_survives_20_consecutive_429s_on_a_scale_set_write(fake, clients, azbench_home, waits):
    fake.add_fault("throttle", path_contains=VMSS_00, times=20)
    cluster = up(clients, spec_for())
    assert cluster.nodes == 2
    puts = [e.status for e in fake.log if e.method == "PUT" and e.path.endswith(VMSS_00)]
    assert puts == [429] * 20 + [201]
    assert waits == [1.0] * 20  # each Retry-After: 1 honoured, none counted as azure-core's retries
    assert clients.throttle.throttled == {f"PUT {VMSS_00}": 20}


def test_the_throttling_budget_ends_up_with_one_line_naming_what_and_how_long(fake, clients, azbench_home, waits):
    fake.add_fault("throttle", path_contains=VMSS_00, times=20, retry_after_s=2)
    with pytest.raises(ThrottleBudgetSpent) as err:
        up(clients, spec_for(throttle_budget_s=5))
    text = str(err.value)
    assert "\n" not in text and err.value.exit_code == 4
    assert f"PUT {VMSS_00} x3" in text and "for 4 s in all" in text and "5 s throttling budget" in text
    assert "azure.throttle_budget_s" in text
    assert waits == [2.0, 2.0]
    assert fake.count("PUT", VMSS_00) == 3  # stopped when the next wait no longer fitted


def test_a_throttled_poll_keeps_the_continuation_token_and_the_rerun_resumes(fake, clients, azbench_home, waits):
    # Every operation poll is throttled and the budget ends while the creates are in flight.
    fault = fake.add_fault("throttle", method="GET", path_contains="/operations/", times=1000)
    with pytest.raises(ThrottleBudgetSpent):
        up(clients, spec_for(throttle_budget_s=3))
    kept = json.loads((azbench_home / "clusters/h100t/azure-lro.json").read_text())
    assert kept  # the in-flight creates' tokens survive the failure
    fault.times = 0
    events = []
    up(clients, spec_for(), progress=events.append)
    resumed = {e.name for e in events if e.action == "resumed"}
    assert resumed == {key.rsplit("/", 1)[1] for key in kept}
    puts = {}
    for e in fake.log:
        if e.method == "PUT" and e.status in (200, 201):
            puts[e.path.lower()] = puts.get(e.path.lower(), 0) + 1
    assert set(puts.values()) == {1}  # resumed, never PUT twice


def test_a_runtime_conflict_is_exit_4_with_the_code_and_resource(fake, clients, azbench_home):
    fake.add_fault("sku", path_contains=VMSS_00)
    with pytest.raises(ProvisionError) as err:
        up(clients, spec_for())
    assert not isinstance(err.value, PreflightError) and err.value.exit_code == 4
    assert str(err.value).startswith(f"create {VMSS_00.replace('/', ' ')}: HTTP 409 SkuNotAvailable:")


def test_a_poll_that_fails_with_5xx_resumes_the_operation_from_its_token(tmp_path, monkeypatch):
    """azure-core's bounded 5xx retries ran out while polling: the operation may still be
    running, so it is resumed from its continuation token, not PUT again (and the token stays
    saved until it ends)."""
    from azure.core.exceptions import HttpResponseError
    from azure.mgmt.network.models import NetworkSecurityGroup

    from orchestrator.providers.azure.clients import AzureClients
    from orchestrator.providers.azure.lro import Reporter, TokenStore, ensure
    from testsupport.fake_arm import StubCredential

    class Poller:
        def __init__(self, fail: bool) -> None:
            self.fail = fail

        def done(self) -> bool:
            return True

        def wait(self, timeout: float) -> None:
            return None

        def continuation_token(self) -> str:
            return "token-1"

        def result(self):
            if self.fail:
                err = HttpResponseError(message="(InternalServerError) busy")
                err.status_code = 500
                raise err
            return NetworkSecurityGroup({"location": "eastus", "properties": {"provisioningState": "Succeeded"}})

    class Ops:
        def __init__(self) -> None:
            self.calls: list[tuple] = []

        def begin_create_or_update(self, rg, name, body, continuation_token=None):
            self.calls.append((body, continuation_token))
            return Poller(fail=continuation_token is None)

    ops = Ops()
    tokens = TokenStore(tmp_path / "lro.json")
    events = []
    clients = AzureClients(credential=StubCredential(), subscription_id="00000000-0000-0000-0000-000000000000",
                           polling_interval=0.0)
    monkeypatch.setattr(clients, "_ops", lambda kind: ops)  # the NSG operation group, faked
    got = ensure(clients, "rg", "Microsoft.Network/networkSecurityGroups", "nsg", lambda: {"x": 1},
                 seen=None, tokens=tokens, report=Reporter(events.append))
    assert (got.state, got.location) == ("Succeeded", "eastus")
    assert ops.calls == [({"x": 1}, None), (None, "token-1")]  # one PUT, then a resume
    assert [e.action for e in events] == ["creating", "resumed", "created"]
    assert tokens.get("Microsoft.Network/networkSecurityGroups/nsg") is None  # it ended: dropped


# ---------------------------------------------------------------- issue 32, point 13
def test_a_scope_lock_says_so_and_a_group_being_deleted_is_its_own_class():
    assert classify(409, "ScopeLocked") == ArmErrorClass.LOCKED
    assert classify(409, "ResourceGroupBeingDeleted") == ArmErrorClass.DELETING
    assert classify(403, "AuthorizationFailed") == ArmErrorClass.DENIED
    assert classify(404, "SubscriptionNotFound") == ArmErrorClass.NO_SUBSCRIPTION  # not "gone"
    assert classify(404, "ResourceGroupNotFound") == ArmErrorClass.NOT_FOUND
    from orchestrator.providers.azure_shared.errors import HINTS
    assert "management lock" in HINTS[ArmErrorClass.LOCKED] and "wait" not in HINTS[ArmErrorClass.LOCKED]


def test_an_unknown_subscription_is_a_config_error_with_no_write(fake, azbench_home):
    from orchestrator.errors import ConfigError
    from orchestrator.providers.azure.clients import AzureClients
    from testsupport.fake_arm import StubCredential, allow_plain_http_policy, arm_writes
    other = AzureClients(credential=StubCredential(), subscription_id="11111111-2222-3333-4444-555555555555",
                         base_url=fake.base_url, per_call_policies=[allow_plain_http_policy()],
                         polling_interval=0.01, retry_backoff_factor=0.01)
    with pytest.raises(ConfigError, match="SubscriptionNotFound: The subscription '11111111-2222-3333-4444-"
                                          "555555555555' could not be found") as err:
        up(other, spec_for())
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    assert arm_writes(fake) == 0


def test_a_rerun_after_a_kill_reads_the_resource_before_any_sleep(fake, clients, azbench_home, monkeypatch):
    """Issue 32, point 13: the rerun of a killed `up` that has no continuation token (the kill
    came between PUT and saving it) read the resource only after one polling interval (30 s by
    default). Now the first read comes at once."""
    from orchestrator.providers.azure import lro
    slept: list[float] = []
    monkeypatch.setattr(lro.time, "sleep", lambda s: slept.append(s))
    up(clients, spec_for(nodes=1))
    clients.polling_interval = 30.0
    key = next(k for k in fake.resources if k.endswith("/virtualmachinescalesets/h100t-gpu-00"))
    fake.resources[key]["properties"]["provisioningState"] = "Creating"  # as the killed run left it
    real, reads = fake.handle, []

    group_list = key.split("/providers/")[0] + "/resources"  # the rerun's first read: the group's listing

    def handle(method, path, body, headers):  # ARM finishes it after the rerun's first read
        if method == "GET" and path.lower().split("?")[0] in (key, group_list):
            if reads:
                fake.resources[key]["properties"]["provisioningState"] = "Succeeded"
            reads.append(1)
        return real(method, path, body, headers)
    monkeypatch.setattr(fake, "handle", handle)
    events = []
    up(clients, spec_for(nodes=1), progress=events.append)
    assert ("waiting", "h100t-gpu-00") in [(e.action, e.name) for e in events]
    assert 30.0 not in slept and len(reads) == 2  # observed Creating, then found done at once
