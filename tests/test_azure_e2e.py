"""The Azure path end to end: the real SDKs and CLI against the booting fake ARM server.

Every VM ARM creates boots the real cloud-init on azbench's customData in its own namespaces
(testsupport/vm_emulator.py). One cluster, one test (a boot-mode `up` is the expensive part):
`up` of a D4s_v5 head + 3 nodes, waiting until Slurm is idle; SSH to the head with the host key
pinned from cloud-init (a wrong pin is refused); self-healing (issue 23): `health --replace`
with one injected bad node drains it (and, with --report-to-azure, skips the Guest Health
report an emulated VM cannot make: no Hyper-V KVP), deletes its scale-set instance in ARM (delete instances),
restores the set's capacity, and the new VM boots through the same cloud-init and joins Slurm
under its new computer name (a FUTURE slot of slurm.conf) and passes its gate; `run smoke
--nodes 3` through Slurm into the results store; `status` shows the nodes; `resize` 3 -> 4 -> 2
(the shrink parks: deallocated VMs stop) with ARM's running instances and Slurm's idle nodes
matching each time (a shrink under a running job is
refused without --force); `down` stops every emulated VM process and leaves the fake empty. A
failing boot step fails `up` with one line naming the VM and the step. Needs root and network
namespaces; skips with the reason otherwise.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from orchestrator.clusters import lifecycle
from orchestrator.providers.azure import boot as boot
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
nodes: 3
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


SET = "reh-cpu-00"


def _instances(fake: FakeArm) -> list[str]:
    """The scale set's running VMs (computer names) as ARM lists them (a parked, deallocated one
    is not running), checked against the VMs running."""
    booted = sorted(n for n in fake.fabric.vms if n.startswith(SET))
    key = fake._vmss_key(SET)
    off = fake.deallocated.get(key, set())
    listed = [f"{SET}_{i}" for i in fake.instances.get(key, range(fake.resources[key]["sku"]["capacity"]))
              if i not in off]
    assert sorted(listed) == booted, "ARM's instances and the running VMs differ"
    return sorted(f"{SET}-{int(n.rsplit('_', 1)[1]):06d}" for n in booted)


def _sinfo(fake: FakeArm) -> dict[str, str]:
    out = fake.fabric.exec("reh-head", ["sinfo", "-h", "-N", "-o", "%N %T"])
    assert out.returncode == 0, out.stderr
    return dict(line.split() for line in out.stdout.splitlines())


def _wait_sinfo(fake: FakeArm, done, timeout_s: float = 120.0) -> None:
    """Poll sinfo on the head until done(states), at most timeout_s (an event, not a speed: it
    returns as soon as the states show; the caller asserts)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if done(set(_sinfo(fake).values())):
            return
        time.sleep(0.2)


def _boot_states(fake: FakeArm, timeout_s: float = 120.0) -> dict[str, dict]:
    """Every VM's boot state once all have finished (done or failed), or as they are at the bound."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = {n: fake.fabric.boot_state(n) for n in fake.fabric.vms}
        if all(s.get("rc") is not None for s in states.values()) or time.monotonic() > deadline:
            return states
        time.sleep(0.2)


@pytest.mark.integration
@pytest.mark.timeout(600)  # ~5 min on 2 busy cores (the grow back adds ~30 s): the default 300 s is tight
@needs_vms
def test_up_heal_run_resize_status_down_on_emulated_vms(booting_fake, tmp_path):
    fake, home = booting_fake, tmp_path / "home"
    env = env_for(fake, fake.fabric.gateway)
    spec = tmp_path / "rehearsal.yaml"
    spec.write_text(SPEC.format(name="reh"))
    timings = {}

    def timed(label: str, *args: str, timeout: float = 600, extra: dict | None = None):
        t0 = time.monotonic()
        try:
            return azbench(*args, home=home, env={**env, **(extra or {})}, timeout=timeout)
        finally:
            timings[label] = time.monotonic() - t0

    up = timed("up", "up", "-f", str(spec), "--yes")
    assert up.code == 0, up.err
    assert "cluster 'reh' up: 3 x Standard_D4s_v5" in up.out
    assert sorted(fake.fabric.vms) == ["reh-cpu-00_0", "reh-cpu-00_1", "reh-cpu-00_2", "reh-head"]
    # `up` waits for the head's cloud-init and every node idle in Slurm; slurmd is a node's last
    # runcmd step, but cloud-init's final modules run after it, so a node may still be finishing.
    states = _boot_states(fake)
    assert all(s == {"stage": "done", "rc": 0} for s in states.values()), states
    assert _instances(fake) == sorted(_sinfo(fake)) == [f"{SET}-00000{i}" for i in range(3)]
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

    # -- replace: the gate drains the bad node; ARM deletes its instance and makes a new one.
    bad, new = f"{SET}-000001", f"{SET}-000003"  # the next instance id: Azure never reuses one
    mark = len(fake.log)
    health = timed("health --replace", "health", "reh", "--replace", "--report-to-azure", "--json",
                   extra={"AZBENCH_HEALTH_BAD_NODES": bad})
    assert health.code == 0, health.out + health.err
    report = json.loads(health.out)
    assert report["drained"] == [bad]
    # Guest Health Reporting needs the host's name from Hyper-V KVP, which an emulated VM lacks.
    [ghr] = report["reported"]
    assert (ghr["node"], ghr["status"]) == (bad, "skipped") and "PhysicalHostName" in ghr["detail"]
    assert fake.impacts == {}
    [rep] = report["replacements"]
    assert (rep["node"], rep["new_node"], rep["status"]) == (bad, new, "replaced")
    deletes = [e for e in fake.log[mark:] if e.method == "POST" and e.path.endswith(f"{SET}/delete")]
    assert len(deletes) == 1, "the bad instance is deleted through delete instances"
    assert _instances(fake) == sorted(_sinfo(fake)) == [f"{SET}-000000", f"{SET}-000002", new]
    assert set(_sinfo(fake).values()) == {"idle"}
    arm = sum(1 for e in fake.log[mark:] if e.path.lower().startswith("/subscriptions/"))

    run = timed("run", "run", "smoke", "--nodes", "3", "-p", "target=0.6", "--poll", "0.3", "--json", timeout=900)
    assert run.code == 0, run.err
    rows = json.loads(run.out)
    runs = rows["runs"] if isinstance(rows, dict) else rows
    assert [(r["nodes"], r["state"]) for r in runs] == [(3, "succeeded")]
    results = azbench("results", "list", "--json", home=home, env=env)
    assert results.code == 0 and "smoke" in results.out

    status = azbench("status", "reh", "--json", home=home, env=env)
    assert status.code == 0, status.err
    nodes = {n["name"]: n["state"] for n in json.loads(status.out)["nodes"]}  # (its history names the bad one)
    assert new in nodes and bad not in nodes and "idle" in nodes.values()

    # -- resize 3 -> 4: the next instance id, a FUTURE slot that turns idle.
    grow = timed("resize 4", "resize", "reh", "--nodes", "4", "--yes", "--json")
    assert grow.code == 0, grow.err
    four = _instances(fake)
    assert json.loads(grow.out)["after"] == 4 and len(four) == 4 and f"{SET}-000004" in four
    assert sorted(_sinfo(fake)) == four and set(_sinfo(fake).values()) == {"idle"}

    # -- a job on every node: a shrink is refused without --force and changes nothing.
    hold = fake.fabric.exec("reh-head", ["su", "azureuser", "-c", "sbatch -N 4 --wrap 'sleep 120' -o /dev/null"])
    assert hold.returncode == 0, hold.stderr
    _wait_sinfo(fake, lambda states: "allocated" in states)
    refused = timed("resize refused", "resize", "reh", "--nodes", "2")
    assert refused.code != 0 and "a job runs on" in refused.err
    assert _instances(fake) == four
    fake.fabric.exec("reh-head", ["scancel", "-u", "azureuser"])
    _wait_sinfo(fake, lambda states: states == {"idle"})

    # -- resize 4 -> 2: drained, retired in Slurm (FUTURE: gone from sinfo), parked in ARM
    # (deallocated: their VMs stop, their instance ids wait for a grow).
    shrink = timed("resize 2", "resize", "reh", "--nodes", "2", "--json")
    assert shrink.code == 0, shrink.err
    removed, two = json.loads(shrink.out)["removed"], _instances(fake)
    assert len(two) == 2 and len(removed) == 2 and not set(removed) & set(two)
    assert sorted(_sinfo(fake)) == two and set(_sinfo(fake).values()) == {"idle"}

    # -- resize 2 -> 4 (issue 39): the parked VMs start again under the same ids and names, boot,
    # and their FUTURE slots turn idle again; nothing is created, nothing deleted.
    mark = fake.mark()
    back = timed("resize 4 again", "resize", "reh", "--nodes", "4", "--yes", "--json")
    assert back.code == 0, back.err
    assert _instances(fake) == four and sorted(_sinfo(fake)) == four
    assert set(_sinfo(fake).values()) == {"idle"}
    writes = [f"{e.method} {e.path.rsplit('/', 1)[-1]}" for e in fake.since(mark)
              if e.method in ("PUT", "PATCH", "POST", "DELETE") and not e.sign_in]
    assert writes == ["POST start", "PATCH default"], writes  # started, and the parked tag updated

    down = timed("down", "down", "reh", "--yes")  # issue 32: down asks on azure
    assert down.code == 0, down.err
    assert fake.fabric.vms == {}
    assert [k for k in fake.resources if "/providers/" in k or k.endswith("azbench-reh")] == []
    assert [p for p in pids if Path(f"/proc/{p}").exists()] == []
    print(f"replacement: {timings['health --replace']:.1f} s (gate + replace + gate), {arm} ARM requests")
    print("wall time (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))


def _assert_wrong_pin_is_refused(cdir: Path, head_ip: str) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from orchestrator.hosts.remote import SshRunner
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
    from orchestrator.providers.azure import cloudinit as ci
    from orchestrator.providers.azure.provider import AzureProvider
    from orchestrator.providers.azure.clients import AzureClients
    from orchestrator.specs.cluster import ClusterSpec
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
        provider = AzureProvider(clients, capacity_wait_s=0)
        monkeypatch.setattr(lifecycle, "get_provider", lambda name, **kw: provider)
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
