"""The cluster's own expiry: the head's managed identity and role, the agent's ticks, `extend`.

The agent (templates/expiry_agent.py, what the head runs from its systemd timer) is driven
against the fake ARM with its real ManagedIdentityCredential, which gets its token from a fake
IMDS endpoint on loopback; the fake ARM holds that token to the scopes of the identity's role
assignments, so these tests also show what the role assignment `up` made allows and forbids.
The agent's config is the one `up` wrote into the head's cloud-init.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import importlib.util
import json
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from orchestrator.hardware.catalog import lookup
from orchestrator.providers.azure import cloudinit as ci
from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.providers.azure.expiry import agent_context, move_expiry
from orchestrator.providers.azure.roles import CONTRIBUTOR_ROLE
from orchestrator.providers.azure.roles import EXPIRY_ACTIONS, role_definition_guid
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import AzbenchError, ProvisionError
from orchestrator.models import ScaleSetPlan
from orchestrator.paths import templates_dir
from testsupport.fake_arm import STUB_OID, SUB, allow_plain_http_policy
from testsupport.fake_imds import FakeImds
from testsupport.golden import check_golden

GOLDEN = Path(__file__).parent / "golden"
STEP = "/usr/local/sbin/azbench-step"  # every runcmd step runs under it (it names a failing step)
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=timezone.utc)
MI_ENV = ("IDENTITY_ENDPOINT", "IDENTITY_HEADER", "IDENTITY_SERVER_THUMBPRINT", "IMDS_ENDPOINT", "MSI_ENDPOINT",
          "MSI_SECRET", "AZURE_CLIENT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_POD_IDENTITY_AUTHORITY_HOST")


def load_agent():
    spec = importlib.util.spec_from_file_location("expiry_agent", templates_dir() / "expiry_agent.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["expiry_agent"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


agent = load_agent()


def up(clients, name="exp", **azure):
    spec = ClusterSpec(name=name, provider="azure", sku="h100", nodes=1, region="eastus",
                       azure={"ssh_ingress_cidr": "203.0.113.7/32", "boot_timeout_s": 0, **azure})
    provider = AzureProvider(clients, capacity_wait_s=0)
    provider.opts.now = lambda: T0  # expires at T0 + expires_hours
    return provider.up(spec, provider.plan(spec))


def head_cloud_init(fake, name="exp") -> dict:
    vm = fake.of_type("virtualMachines")[f"{name}-head"]
    return yaml.safe_load(gzip.decompress(base64.b64decode(vm["properties"]["osProfile"]["customData"])))


def role_assignments(fake) -> list[tuple[str, dict]]:
    return [(k, r) for k, r in fake.resources.items() if "/roleassignments/" in k]


def role_definitions(fake) -> dict[str, dict]:
    return fake.of_type("roleDefinitions")


OWNER_ROLE = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"


@pytest.fixture
def head(fake, clients, tmp_path, monkeypatch):
    """Cluster 'exp' (6 h, idle 30 min) and the agent as its head would run it: config from the
    head's cloud-init, token from the head identity's (fake) IMDS, state in tmp_path."""
    up(clients, expires_hours=6, idle_minutes=30)
    principal = fake.of_type("virtualMachines")["exp-head"]["identity"]["principalId"]
    imds = FakeImds(arm=fake, principal_id=principal).start()
    for name in MI_ENV:
        monkeypatch.delenv(name, raising=False)
    for key, value in imds.env.items():
        monkeypatch.setenv(key, value)
    files = {f["path"]: f for f in head_cloud_init(fake)["write_files"]}
    cfg = agent.Config(**json.loads(files["/etc/azbench/expiry.json"]["content"]))
    cfg = dataclasses.replace(cfg, state_dir=str(tmp_path / "state"))
    client = agent.make_client(cfg, per_call_policies=[allow_plain_http_policy()], polling_interval=0.01,
                               retry_total=0)
    yield cfg, client, imds
    imds.stop()


def group_exists(fake, rg="azbench-exp") -> bool:
    return f"/subscriptions/{SUB}/resourcegroups/{rg}" in fake.resources


# ---------------------------------------------------------------- identity and role
def test_up_gives_the_head_an_identity_allowed_on_its_own_group_only(fake, clients, azbench_home):
    """Issue 32, point 6: the head's role is a custom one that reads and deletes its own group,
    assignable there only: never Contributor or Owner."""
    up(clients)
    vm = fake.of_type("virtualMachines")["exp-head"]
    assert vm["identity"]["type"] == "SystemAssigned"
    (key, role), = role_assignments(fake)
    assert key.startswith(f"/subscriptions/{SUB}/resourcegroups/azbench-exp/providers/microsoft.authorization/")
    props = role["properties"]
    assert props["principalId"] == vm["identity"]["principalId"]
    assert props["principalType"] == "ServicePrincipal"
    guid = role_definition_guid(SUB, "azbench-exp")
    assert props["roleDefinitionId"] == f"/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{guid}"
    assert not props["roleDefinitionId"].endswith((CONTRIBUTOR_ROLE, OWNER_ROLE))
    (definition,) = role_definitions(fake).values()
    dprops = definition["properties"]
    assert dprops["type"] == "CustomRole" and dprops["roleName"] == f"azbench self-expiry {SUB}/azbench-exp"
    assert dprops["assignableScopes"] == [f"/subscriptions/{SUB}/resourceGroups/azbench-exp"]
    assert [a for p in dprops["permissions"] for a in p["actions"]] == list(EXPIRY_ACTIONS)
    assert all(a.endswith(("/read", "/delete")) for a in EXPIRY_ACTIONS)  # nothing that creates or starts
    before = len(fake.log)
    up(clients)  # a rerun reads the definition and the assignment and sends no PUT
    assert [e.method for e in fake.log[before:] if e.method != "GET"] == []


def test_the_contributor_fallback_is_explicit(fake, clients, azbench_home):
    up(clients, self_expiry_role="contributor")
    (_, role), = role_assignments(fake)
    assert role["properties"]["roleDefinitionId"].endswith(CONTRIBUTOR_ROLE)
    assert role_definitions(fake) == {}


def test_a_caller_who_may_not_define_roles_learns_it_before_any_vm(fake, clients, azbench_home):
    from testsupport.fake_arm import STUB_OID
    fake.no_role_writes.add(STUB_OID)  # e.g. a Contributor on the subscription
    with pytest.raises(AzbenchError, match="AuthorizationFailed") as err:
        up(clients)
    assert "azure.self_expiry_role: contributor" in str(err.value) and "\n" not in str(err.value)
    assert err.value.exit_code == 4
    assert [e.path.rsplit("/", 1)[-1] for e in fake.log if e.method == "PUT"] == \
        ["azbench-exp", role_definition_guid(SUB, "azbench-exp")]  # the group, then the role: refused
    assert fake.of_type("virtualMachines") == {} and fake.of_type("virtualMachineScaleSets") == {}


@pytest.mark.parametrize("setup, code", [
    (lambda fake: setattr(fake, "custom_role_limit", 0), "RoleDefinitionLimitExceeded"),
    (lambda fake: fake.resources.__setitem__(
        f"/subscriptions/{SUB}/providers/microsoft.authorization/roledefinitions/someone-elses",
        {"name": "someone-elses", "type": "Microsoft.Authorization/roleDefinitions",
         "properties": {"roleName": f"azbench self-expiry {SUB}/azbench-exp", "type": "CustomRole"}}),
     "RoleDefinitionWithSameNameExists"),
])
def test_role_definition_refusals_are_one_line_with_what_to_do(fake, clients, azbench_home, setup, code):
    setup(fake)
    with pytest.raises(AzbenchError, match=code) as err:
        up(clients)
    assert "\n" not in str(err.value) and ("5000" in str(err.value) or "az role definition delete" in str(err.value))
    assert fake.of_type("virtualMachines") == {}


def test_the_head_identity_cannot_create_anything_in_its_own_group(fake, clients, head):
    """Root on the head holds the identity's token: with it, ARM lets it read and delete the
    group, but a PUT of a new VM (billable) in that very group is refused."""
    from azure.core.exceptions import HttpResponseError
    _, client, imds = head
    token = imds.token
    status, _, body = fake.handle("PUT", f"/subscriptions/{SUB}/resourceGroups/azbench-exp/providers/"
                                  "Microsoft.Compute/virtualMachines/miner?api-version=2024-07-01",
                                  json.dumps({"location": "eastus"}).encode(), {"authorization": f"Bearer {token}"})
    assert status == 403 and body["error"]["code"] == "AuthorizationFailed"
    assert "Microsoft.Compute/virtualMachines/write" in body["error"]["message"]
    with pytest.raises(HttpResponseError, match="AuthorizationFailed"):
        client.resource_groups.create_or_update("azbench-new", {"location": "eastus"})


def test_down_after_self_expiry_removes_the_custom_role(fake, clients, head):
    cfg, client, _ = head
    assert agent.tick(cfg, client, T0 + timedelta(hours=6), busy=True).action == "delete"
    assert list(role_definitions(fake)) == [role_definition_guid(SUB, "azbench-exp")]  # outside the group
    cluster = AzureProvider(clients).describe("exp")
    assert cluster is None
    from orchestrator.models import Cluster, ClusterState
    from orchestrator.providers.azure.props import AzureProps
    record = Cluster(name="exp", provider="azure", sku="h100", nodes=1, state=ClusterState.READY,
                     properties=AzureProps(subscription_id=SUB, resource_group="azbench-exp"))
    AzureProvider(clients).down(record)
    assert fake.resources == {}


def test_self_expiry_off_means_no_identity_no_role_no_agent(fake, clients, azbench_home):
    up(clients, self_expiry=False)
    assert "identity" not in fake.of_type("virtualMachines")["exp-head"]
    assert role_assignments(fake) == []
    assert "/etc/azbench/expiry.json" not in {f["path"] for f in head_cloud_init(fake)["write_files"]}


def test_an_adopted_head_without_identity_is_a_one_line_error(fake, clients, azbench_home):
    up(clients, self_expiry=False)
    # Read from the VM's own GET (the listing never carries it); never "delete the head VM".
    with pytest.raises(ProvisionError, match="reports no system-assigned identity \\(read with its own GET\\)") as err:
        up(clients)
    assert "delete the head" not in str(err.value) and "az vm identity assign" in str(err.value)


def test_the_head_identity_can_delete_its_own_cluster_and_nothing_else(fake, clients, head):
    cfg, client, imds = head
    up(clients, "other")
    other = dataclasses.replace(cfg, cluster="other", resource_group="azbench-other")
    from azure.core.exceptions import HttpResponseError
    with pytest.raises(HttpResponseError, match="AuthorizationFailed"):
        agent.tick(other, client, T0 + timedelta(days=30), busy=False)
    assert group_exists(fake, "azbench-other")
    assert imds.requests and imds.requests[0]["resource"] == [fake.base_url]
    assert agent.tick(cfg, client, T0 + timedelta(days=30), busy=False).action == "delete"
    assert not group_exists(fake) and group_exists(fake, "azbench-other")


# ---------------------------------------------------------------- the agent's ticks
def test_an_unexpired_busy_cluster_is_left_alone(fake, head):
    cfg, client, _ = head
    for minutes in (0, 45, 90, 300):
        decision = agent.tick(cfg, client, T0 + timedelta(minutes=minutes), busy=True)
        assert decision.action == "keep", decision
    assert group_exists(fake)
    assert fake.count("DELETE") == 0


def test_an_expired_cluster_is_deleted_even_when_busy(fake, head):
    cfg, client, _ = head
    assert agent.tick(cfg, client, T0 + timedelta(hours=5, minutes=59), busy=True).action == "keep"
    decision = agent.tick(cfg, client, T0 + timedelta(hours=6), busy=True)
    assert (decision.action, decision.reason) == ("delete", "expired at 2030-01-01T18:00:00Z")
    # The role assignment went with the group; the custom role is the directory's (down removes it).
    assert not group_exists(fake) and [r["name"] for r in fake.resources.values()] == list(role_definitions(fake))


def test_an_idle_cluster_is_deleted_after_idle_minutes(fake, head):
    cfg, client, _ = head
    assert agent.tick(cfg, client, T0, busy=False).action == "keep"  # starts the idle clock
    assert agent.tick(cfg, client, T0 + timedelta(minutes=20), busy=True).action == "keep"  # a job: reset
    assert agent.tick(cfg, client, T0 + timedelta(minutes=49), busy=None).action == "keep"  # squeue failed
    decision = agent.tick(cfg, client, T0 + timedelta(minutes=50), busy=False)
    assert (decision.action, decision.reason) == ("delete", "idle for 30 min (limit 30 min)")
    assert [r["name"] for r in fake.resources.values()] == list(role_definitions(fake))


def test_extend_moves_the_deadline_the_agent_reads(fake, clients, head):
    cfg, client, _ = head
    scopes = move_expiry(clients, "exp", T0 + timedelta(hours=10))
    assert len(scopes) == len([r for r in fake.resources.values() if "tags" in r])
    assert {r["tags"]["azbench-expires"] for r in fake.resources.values() if "tags" in r} == {"2030-01-01T22:00:00Z"}
    assert {r["tags"]["azbench-owner"] for r in fake.resources.values() if "tags" in r} == {STUB_OID}  # merged
    assert agent.tick(cfg, client, T0 + timedelta(hours=9), busy=True).action == "keep"
    assert agent.tick(cfg, client, T0 + timedelta(hours=10), busy=True).action == "delete"


def test_a_group_not_tagged_for_the_cluster_is_never_deleted(fake, head):
    cfg, client, _ = head
    wrong = dataclasses.replace(cfg, cluster="someone-else")
    decision = agent.tick(wrong, client, T0 + timedelta(days=9), busy=False)
    assert decision.action == "keep" and "never deleted on a guess" in decision.reason
    assert group_exists(fake)


def test_main_prints_one_line_per_tick(fake, head, tmp_path, monkeypatch, capsys):
    cfg, _, _ = head
    path = tmp_path / "expiry.json"
    path.write_text(json.dumps(dataclasses.asdict(cfg)))
    real = agent.make_client
    monkeypatch.setattr(agent, "make_client", lambda c: real(c, per_call_policies=[allow_plain_http_policy()]))
    assert agent.main(["--config", str(path)]) == 0
    assert capsys.readouterr().out.startswith("azbench-expiry: exp: keep: ")
    monkeypatch.setattr(agent, "make_client", real)  # https is enforced for bearer tokens: one error line
    assert agent.main(["--config", str(path)]) == 1
    assert capsys.readouterr().out.count("\n") == 1


def test_slurm_busy_reads_squeue():
    def fake_run(out, code=0):
        return lambda *a, **k: subprocess.CompletedProcess(a, code, stdout=out, stderr="")
    assert agent.slurm_busy(fake_run("12\n13\n")) is True
    assert agent.slurm_busy(fake_run("")) is False
    assert agent.slurm_busy(fake_run("", 1)) is None


# ---------------------------------------------------------------- the head's cloud-init
def test_head_cloud_init_with_the_expiry_agent_matches_golden(tmp_path):
    from tests.test_azure_provider import FIXED
    sets = [ScaleSetPlan(name="h100t-gpu-00", vms=2, gpus=16)]
    ctx = agent_context("h100t", SUB, "azbench-h100t", "https://management.azure.com", 45)
    text = ci.head_cloud_init("h100t", lookup("h100"), sets, "10.40.0.4", "10.40.0.0/16", FIXED, expiry=ctx)
    check_golden(GOLDEN / "cloud-init-head.h100-expiry.yaml", text)
    doc = yaml.safe_load(text)
    files = {f["path"]: f for f in doc["write_files"]}
    assert json.loads(files["/etc/azbench/expiry.json"]["content"])["idle_minutes"] == 45
    assert files["/usr/local/lib/azbench/expiry_agent.py"]["content"] == (templates_dir() / "expiry_agent.py").read_text()
    assert "OnUnitActiveSec=2min" in files["/etc/systemd/system/azbench-expiry.timer"]["content"]
    assert doc["runcmd"][-1] == [STEP, "bash", "/usr/local/lib/azbench/install-expiry.sh"]
    if shutil.which("cloud-init"):
        path = tmp_path / "c.yaml"
        path.write_text(text)
        check = subprocess.run(["cloud-init", "schema", "--config-file", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
