"""The Azure path end to end: the real SDKs and CLI against the booting fake ARM server.

Every VM ARM creates boots the real cloud-init on azbench's customData in its own namespaces
(testsupport/vm_emulator.py). Covers: `up` of a D4s_v5 head + 2 nodes, waiting until Slurm is idle;
SSH to the head with the host key pinned from cloud-init (a wrong pin is refused); `run smoke
--nodes 1,2` through Slurm into the results store; `status` shows the nodes; `down` stops every
emulated VM process and leaves the fake empty. A failing boot step fails `up` with one line
naming the VM and the step. Needs root and network namespaces; skips with the reason otherwise.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from orchestrator.clusters import lifecycle
from orchestrator.clusters.providers.azure import boot as boot
from orchestrator.errors import ProvisionError
from orchestrator.models import Cluster, ClusterState
from orchestrator.store.database import Store
from tests.cli_helpers import azbench
from testsupport.fake_arm import SUB, FakeArm, StubCredential, allow_plain_http_policy, default_catalogue, env_for
from testsupport.vm_emulator import can_emulate

REASON = can_emulate()
needs_vms = pytest.mark.skipif(REASON is not None, reason=REASON or "")
SPEC = """name: {name}
provider: azure
sku: d4s_v5
nodes: 2
region: eastus
azure:
  polling_interval: 0.2
  boot_timeout_s: 300
"""


@pytest.fixture
def booting_fake(tmp_path):
    from testsupport.vm_emulator import Fabric
    fabric = Fabric(tmp_path / "fabric")
    fake = FakeArm(fabric=fabric, tls_dir=tmp_path / "tls").start()
    default_catalogue(fake)
    yield fake
    fake.stop()  # stops the fabric: every VM still alive, and its namespaces


def _vm_pids(fake: FakeArm) -> list[int]:
    return [pid for name in list(fake.fabric.vms) for pid in fake.fabric.live_pids(name)]


@needs_vms
def test_up_run_status_down_on_emulated_vms(booting_fake, tmp_path):
    fake, home = booting_fake, tmp_path / "home"
    env = env_for(fake, fake.fabric.gateway)
    spec = tmp_path / "rehearsal.yaml"
    spec.write_text(SPEC.format(name="reh"))
    timings = {}

    t0 = time.monotonic()
    up = azbench("up", "-f", str(spec), "--yes", home=home, env=env, timeout=600)
    timings["up"] = time.monotonic() - t0
    assert up.code == 0, up.err
    assert "cluster 'reh' up: 2 x Standard_D4s_v5" in up.out
    assert sorted(fake.fabric.vms) == ["reh-cpu-00_0", "reh-cpu-00_1", "reh-head"]
    assert all(fake.fabric.boot_state(n) == {"stage": "done", "rc": 0} for n in fake.fabric.vms)
    pids = _vm_pids(fake)
    assert pids, "the emulated VMs run processes"

    # The pinned host key is the one azbench injected, and the head's sshd serves exactly it.
    cdir = home / "clusters" / "reh"
    head_ip = fake.of_type("publicIPAddresses")["reh-head-ip"]["properties"]["ipAddress"]
    injected = (cdir / "ssh_host_ed25519_key.pub").read_text().split()[1]
    assert (cdir / "known_hosts").read_text() == f"{head_ip} ssh-ed25519 {injected}\n"
    served = fake.fabric.exec("reh-head", ["cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout.split()[1]
    assert served == injected
    _assert_wrong_pin_is_refused(cdir, head_ip)

    t0 = time.monotonic()
    run = azbench("run", "smoke", "--nodes", "1,2", "--json", home=home, env=env, timeout=900)
    timings["run"] = time.monotonic() - t0
    assert run.code == 0, run.err
    rows = json.loads(run.out)
    runs = rows["runs"] if isinstance(rows, dict) else rows
    assert sorted((r["nodes"], r["state"]) for r in runs) == [(1, "succeeded"), (2, "succeeded")]
    results = azbench("results", "list", "--json", home=home, env=env)
    assert results.code == 0 and "smoke" in results.out

    status = azbench("status", "reh", "--json", home=home, env=env)
    assert status.code == 0, status.err
    assert "reh-cpu-00-000000" in status.out and "reh-cpu-00-000001" in status.out and "idle" in status.out

    t0 = time.monotonic()
    down = azbench("down", "reh", home=home, env=env, timeout=600)
    timings["down"] = time.monotonic() - t0
    assert down.code == 0, down.err
    assert fake.fabric.vms == {}
    assert [k for k in fake.resources if "/providers/" in k or k.endswith("azbench-reh")] == []
    assert [p for p in pids if Path(f"/proc/{p}").exists()] == []
    print("wall time (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))


def _assert_wrong_pin_is_refused(cdir: Path, head_ip: str) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from orchestrator.clusters.remote import SshRunner
    from orchestrator.errors import RemoteError
    from orchestrator.models import SshTarget
    other = Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    wrong = cdir / "known_hosts.wrong"
    wrong.write_text(f"{head_ip} {other}\n")
    runner = SshRunner(SshTarget(host=head_ip, port=22, user="azureuser", key_path=cdir / "id_ed25519",
                                 known_hosts=wrong), connect_attempts=1)
    with pytest.raises(RemoteError, match="does not match the pinned key"):
        runner.run("true")
    runner.close()


@needs_vms
def test_a_failing_boot_step_fails_up_with_one_line_naming_vm_and_step(tmp_path, azbench_home, monkeypatch):
    from orchestrator.clusters.providers.azure import cloudinit as ci
    from orchestrator.clusters.providers.azure import AzureProvider
    from orchestrator.clusters.providers.azure.clients import AzureClients
    from orchestrator.clusters.specs import ClusterSpec
    from testsupport.vm_emulator import Fabric
    templates = tmp_path / "templates"
    shutil.copytree(ci.templates_dir(), templates)
    head = templates / "cloud-init-head.yaml.j2"
    good = "[/usr/local/sbin/azbench-step, systemctl, enable, --now, slurmctld]"
    assert good in head.read_text()
    head.write_text(head.read_text().replace(good, good.replace("slurmctld]", "slurmctldd]")))
    monkeypatch.setattr(ci, "templates_dir", lambda: templates)
    fake = FakeArm(fabric=Fabric(tmp_path / "fabric")).start()
    try:
        default_catalogue(fake)
        clients = AzureClients(credential=StubCredential(), subscription_id=SUB, base_url=fake.base_url,
                               per_call_policies=[allow_plain_http_policy()], polling_interval=0.05)
        spec = ClusterSpec(name="bad", provider="azure", sku="d4s_v5", nodes=1, region="eastus",
                           azure={"ssh_ingress_cidr": f"{fake.fabric.gateway}/32", "boot_timeout_s": 240,
                                  "self_expiry": False})
        provider = AzureProvider(clients, capacity_wait_s=0, owner="tester")
        monkeypatch.setattr(lifecycle, "get_provider", lambda name, progress=None: provider)
        azbench_home.mkdir(parents=True, exist_ok=True)
        with Store.open(f"sqlite:///{azbench_home / 'azbench.db'}") as store:
            with pytest.raises(ProvisionError) as err:
                lifecycle.up(spec, store)
            line = str(err.value)
            assert "\n" not in line
            assert line.startswith("VM bad-head: cloud-init runcmd step 'systemctl enable --now slurmctldd' failed")
            # What was created is recorded (FAILED), so `down` finds it: nothing is left billing.
            assert "`azbench down bad` deletes them" in line
            assert store.get_cluster("bad").state == ClusterState.FAILED
            assert sorted(fake.fabric.vms) == ["bad-cpu-00_0", "bad-head"]
            lifecycle.down("bad", store)
            assert store.get_cluster("bad").state == ClusterState.TERMINATED
        assert fake.fabric.vms == {}
        assert [k for k in fake.resources if "/providers/" in k or k.endswith("azbench-bad")] == []
    finally:
        fake.stop()


# ---------------------------------------------------------------- the boot probe (pure)
def _cluster(nodes: list[str]) -> Cluster:
    return Cluster(name="c", provider="azure", sku="Standard_D4s_v5", nodes=len(nodes),
                   state=ClusterState.READY, node_names=nodes, partition="gpu", workdir="/shared/azbench")


def test_probe_ready_only_when_head_done_and_every_node_idle():
    text = f"done\n{boot.SEP}\n{boot.SEP}\nc-n0 idle\nc-n1 down*\n{boot.SEP}\n"
    probe = boot.parse_probe(text)
    assert probe.node_states == {"c-n0": "idle", "c-n1": "down*"}
    assert boot.verdict(probe, "c-head", ["c-n0", "c-n1"]) is None
    probe.node_states["c-n1"] = "idle"
    assert boot.verdict(probe, "c-head", ["c-n0", "c-n1"]) == "ready"


def test_probe_names_the_node_whose_step_failed():
    text = (f"done\n{boot.SEP}\n/shared/azbench/boot/c-n1.failed:cloud-init runcmd step 'mount' failed (exit 32)\n"
            f"{boot.SEP}\nc-n0 idle\n{boot.SEP}\n")
    with pytest.raises(ProvisionError, match=r"^VM c-n1: cloud-init runcmd step 'mount' failed \(exit 32\)"):
        boot.verdict(boot.parse_probe(text), "c-head", ["c-n0", "c-n1"])


def test_head_cloud_init_error_without_a_step_note_uses_cloud_inits_detail():
    text = f"error\n{boot.SEP}\n{boot.SEP}\n{boot.SEP}\n('scripts-user', RuntimeError('Runparts: 1 failures'))\n"
    with pytest.raises(ProvisionError, match=r"^VM c-head: \('scripts-user'"):
        boot.verdict(boot.parse_probe(text), "c-head", ["c-n0"])


def test_wait_is_bounded_and_says_what_is_missing():
    class Runner:
        def run(self, cmd, timeout=60):
            from orchestrator.models import ExecResult
            return ExecResult(exit_code=0, stdout=f"done\n{boot.SEP}\n{boot.SEP}\nc-n0 idle\n{boot.SEP}\n", stderr="")

        def close(self):
            pass

    with pytest.raises(ProvisionError) as err:
        boot.wait_booted(_cluster(["c-n0", "c-n1"]), "c-head", timeout_s=0, poll_s=0,
                         runner_factory=lambda c: Runner())
    assert str(err.value) == "cluster 'c' did not boot within 0 s: nodes not idle in Slurm: c-n1=not registered"


def test_wait_without_an_ssh_login_fails_with_one_line():
    # A cluster record with no SSH login (no head address, or the keys are gone) used to reach
    # SshRunner(None) and died with AttributeError on its first connect, not a ProvisionError.
    with pytest.raises(ProvisionError, match=r"^cluster 'c' has no SSH login"):
        boot.wait_booted(_cluster(["c-n0"]), "c-head", timeout_s=0, poll_s=0)
