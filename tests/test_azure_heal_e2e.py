"""Self-healing on Azure end to end (issue 23): the real SDKs and CLI against the booting fake ARM.

One 3-node D4s_v5 cluster (every VM boots the real cloud-init in its own namespaces,
testsupport/vm_emulator.py) goes through:
- `azbench health --replace` with one injected bad node: the gate drains it, its scale-set
  instance is deleted in ARM (delete instances), the set's capacity is restored, the new VM
  boots through the same cloud-init and joins Slurm under its new computer name (a FUTURE slot
  of slurm.conf), passes its gate, and a smoke run then uses 3 nodes;
- `azbench resize` 3 -> 4 -> 2, with ARM's instances and Slurm's idle nodes matching each time
  (and refused while a job runs on a node it would remove, without --force);
- `down`, after which ARM holds nothing and no emulated VM process is left.
Needs root and network namespaces; skips with the reason otherwise.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cli_helpers import azbench
from tests.test_azure_e2e import booting_fake  # noqa: F401  (the fixture)
from testsupport.fake_arm import FakeArm, env_for
from testsupport.vm_emulator import can_emulate

REASON = can_emulate()
SPEC = """name: {name}
provider: azure
sku: d4s_v5
nodes: 3
region: eastus
azure:
  polling_interval: 0.2
  boot_timeout_s: 300
"""
SET = "heal-cpu-00"


def _instances(fake: FakeArm) -> list[str]:
    """The scale set's VMs as ARM lists them (computer names), and as the fabric runs them."""
    booted = sorted(n for n in fake.fabric.vms if n.startswith(SET))
    key = fake._vmss_key(SET)
    listed = [f"{SET}_{i}" for i in fake.instances.get(key, range(fake.resources[key]["sku"]["capacity"]))]
    assert sorted(listed) == booted, "ARM's instances and the running VMs differ"
    return sorted(f"{SET}-{int(n.rsplit('_', 1)[1]):06d}" for n in booted)


def _sinfo(fake: FakeArm) -> dict[str, str]:
    out = fake.fabric.exec("heal-head", ["sinfo", "-h", "-N", "-o", "%N %T"])
    assert out.returncode == 0, out.stderr
    return dict(line.split() for line in out.stdout.splitlines())


def _arm_requests(fake: FakeArm, since: int) -> int:
    return sum(1 for e in fake.log[since:] if e.path.lower().startswith("/subscriptions/"))


@pytest.mark.integration
@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_replace_resize_and_down_on_emulated_vms(booting_fake, tmp_path):  # noqa: F811
    fake, home = booting_fake, tmp_path / "home"
    env = env_for(fake, fake.fabric.gateway)
    spec = tmp_path / "heal.yaml"
    spec.write_text(SPEC.format(name="heal"))
    up = azbench("up", "-f", str(spec), "--yes", home=home, env=env, timeout=600)
    assert up.code == 0, up.err
    first = _instances(fake)
    assert first == [f"{SET}-00000{i}" for i in range(3)]
    assert set(_sinfo(fake).values()) == {"idle"} and sorted(_sinfo(fake)) == first
    pids = [pid for name in list(fake.fabric.vms) for pid in fake.fabric.live_pids(name)]

    # -- replace: the gate drains the bad node; ARM deletes its instance and makes a new one.
    bad = f"{SET}-000001"
    mark, t0 = len(fake.log), time.monotonic()
    health = azbench("health", "heal", "--replace", "--json", home=home, timeout=600,
                     env={**env, "AZBENCH_HEALTH_BAD_NODES": bad})
    seconds = time.monotonic() - t0
    assert health.code == 0, health.out + health.err
    report = json.loads(health.out)
    assert report["drained"] == [bad]
    [rep] = report["replacements"]
    new = f"{SET}-000003"  # the next instance id: Azure never reuses one
    assert (rep["node"], rep["new_node"], rep["status"]) == (bad, new, "replaced")
    deletes = [e for e in fake.log[mark:] if e.method == "POST" and e.path.endswith(f"{SET}/delete")]
    assert len(deletes) == 1, "the bad instance is deleted through delete instances"
    assert _instances(fake) == sorted([f"{SET}-000000", f"{SET}-000002", new])
    nodes = _sinfo(fake)
    assert sorted(nodes) == _instances(fake) and set(nodes.values()) == {"idle"}
    print(f"replacement: {seconds:.1f} s wall, {_arm_requests(fake, mark)} ARM requests")

    run = azbench("run", "smoke", "--nodes", "3", "--json", home=home, env=env, timeout=600)
    assert run.code == 0, run.err
    runs = json.loads(run.out)
    runs = runs["runs"] if isinstance(runs, dict) else runs
    assert [(r["nodes"], r["state"]) for r in runs] == [(3, "succeeded")]

    # -- resize 3 -> 4: a fifth instance id, a FUTURE slot that turns idle.
    grow = azbench("resize", "heal", "--nodes", "4", "--json", home=home, env=env, timeout=600)
    assert grow.code == 0, grow.err
    assert json.loads(grow.out)["after"] == 4
    four = _instances(fake)
    assert len(four) == 4 and f"{SET}-000004" in four
    assert sorted(_sinfo(fake)) == four and set(_sinfo(fake).values()) == {"idle"}

    # -- a job on the nodes a shrink would remove: refused without --force, nothing changed.
    hold = fake.fabric.exec("heal-head", ["su", "azureuser", "-c", "sbatch -N 4 --wrap 'sleep 60' -o /dev/null"])
    assert hold.returncode == 0, hold.stderr
    for _ in range(50):
        if "allocated" in _sinfo(fake).values():
            break
        time.sleep(0.2)
    refused = azbench("resize", "heal", "--nodes", "2", home=home, env=env, timeout=300)
    assert refused.code != 0 and "a job runs on" in refused.err
    assert _instances(fake) == four
    fake.fabric.exec("heal-head", ["scancel", "-u", "azureuser"])
    for _ in range(100):
        if set(_sinfo(fake).values()) == {"idle"}:
            break
        time.sleep(0.2)

    # -- resize 4 -> 2: drained, retired in Slurm (FUTURE: gone from sinfo), deleted in ARM.
    shrink = azbench("resize", "heal", "--nodes", "2", "--json", home=home, env=env, timeout=600)
    assert shrink.code == 0, shrink.err
    removed = json.loads(shrink.out)["removed"]
    two = _instances(fake)
    assert len(two) == 2 and not set(removed) & set(two)
    assert sorted(_sinfo(fake)) == two and set(_sinfo(fake).values()) == {"idle"}

    down = azbench("down", "heal", home=home, env=env, timeout=600)
    assert down.code == 0, down.err
    assert fake.fabric.vms == {}
    assert [k for k in fake.resources if "/providers/" in k or k.endswith("azbench-heal")] == []
    assert [p for p in pids if Path(f"/proc/{p}").exists()] == []
