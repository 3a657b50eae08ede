"""Ownership that outlives a slow rival, and decoys that steer nothing (issue 48, points 1-2), with
two people's real CLIs against the fake ARM over HTTPS and no custom role (self_expiry: false,
so tags decide, as they would on Azure).

Bob's `up z1` starts first, but its group PUT reaches ARM only after Alice's `up z1` has
finished (the fake holds it): ARM answers it 200 and its body replaces the group's tags, owner
and creator nonce included. The proof of creation is where that one write cannot reach: the
tags of the cluster's resources, which only the `up` that got 201 Created wrote, after it. Then
Bob plants a decoy group `aaa-z1` carrying the cluster's tag and Alice's copied tags, with a
VNet in it. Alice's cluster stays Alice's: Bob's adopt and down write nothing, Alice's status
names her, her extend writes only inside azbench-z1, her rerun of `up` exits 0, and once
expired her sweep deletes azbench-z1 and reports the decoy, never writing it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.cli_helpers import CliResult, azbench, one_line_error
from tests.fixtures.arm import ALICE, BOB

WRITES = ("PUT", "PATCH", "POST", "DELETE")
SPEC = """name: z1
provider: azure
sku: h100
nodes: 1
region: eastus
azure:
  boot_timeout_s: 0
  polling_interval: 0.2
  self_expiry: false
"""
PAST = "2020-01-01T00:00:00Z"


def _start(args: list[str], home: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    import os
    full = {**os.environ, **env, "AZBENCH_HOME": str(home)}
    full.pop("AZBENCH_DEBUG", None)
    return subprocess.Popen([sys.executable, "-m", "orchestrator", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=full)


def _writes(fake: Any, oid: str, since: int = 0) -> list[str]:
    return [f"{e.method} {e.status} {e.path}" for e in fake.since(since) if e.principal == oid and e.method in WRITES]


def _clients(fake: Any, oid: str) -> Any:
    from orchestrator.providers.azure.clients import AzureClients
    from testsupport.fake_arm import SUB, StubCredential
    return AzureClients(credential=StubCredential(oid=oid), subscription_id=SUB, base_url=fake.base_url,
                        polling_interval=0.05)


def test_a_slow_loser_and_a_decoy_leave_the_cluster_its_creators(tls_principals: Any, tmp_path: Path) -> None:
    from testsupport.fake_arm import SUB
    fake, env = tls_principals
    spec = tmp_path / "z1.yaml"
    spec.write_text(SPEC)
    alice_home, bob_home = tmp_path / "alice", tmp_path / "bob"
    group_key = f"/subscriptions/{SUB}/resourcegroups/azbench-z1"

    # Bob's group PUT is held at ARM until Alice's whole `up` has finished.
    held = fake.hold("PUT", "/resourcegroups/azbench-z1", seconds=240)
    slow = _start(["up", "-f", str(spec), "--yes"], bob_home, env["bob"])
    deadline = time.monotonic() + 120
    while held.arrived < 1 and slow.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert held.arrived == 1, "Bob's group PUT never reached ARM"
    won = azbench("up", "-f", str(spec), "--yes", home=alice_home, env=env["alice"])
    assert won.code == 0, won.err
    assert held.release is not None
    held.release.set()
    out, err = slow.communicate(timeout=300)
    lost = CliResult(slow.returncode, out, err)

    puts = [(e.principal, e.status) for e in fake.log if e.method == "PUT" and e.path.lower() == group_key]
    assert puts == [(ALICE, 201), (BOB, 200)]
    assert lost.code == 4
    line = one_line_error(lost)
    assert "the name 'z1' is taken" in line and "already holds that run's resources" in line
    assert [w.split(" /")[0] for w in _writes(fake, BOB)] == ["PUT 200"]  # nothing after its one PUT
    # The precondition of the attack: Bob's PUT replaced the group's owner tags.
    assert fake.resources[group_key]["tags"]["azbench-owner"] == BOB

    # A decoy group sorted first, with Alice's copied tags (read off her VNet) and a VNet inside.
    bob = _clients(fake, BOB)
    vnet = next(r for k, r in fake.resources.items() if k.lower().startswith(group_key + "/")
                and "virtualnetworks" in k.lower())
    copied = dict(vnet["tags"])
    bob.resources.resource_groups.create_or_update("aaa-z1", {"location": "eastus", "tags": copied})
    bob.network.virtual_networks.begin_create_or_update("aaa-z1", "z1-vnet", {
        "location": "eastus", "tags": copied,
        "properties": {"addressSpace": {"addressPrefixes": ["10.9.0.0/16"]}}}).result()

    # Bob may not take Alice's cluster: adopt and down refuse and write nothing.
    mark = fake.mark()
    adopt = azbench("adopt", "z1", home=bob_home, env=env["bob"])
    assert adopt.code != 0
    assert f"created by principal {ALICE}" in one_line_error(adopt)
    down = azbench("down", "z1", "--yes", home=bob_home, env=env["bob"])
    assert down.code != 0
    assert _writes(fake, BOB, mark) == []

    # Alice's status names her; her extend writes only inside her own group.
    status = azbench("status", "z1", "-o", "json", home=alice_home, env=env["alice"])
    assert status.code == 0, status.err
    assert json.loads(status.out)["cloud"]["owner"] == ALICE
    mark = fake.mark()
    extend = azbench("extend", "z1", "--hours", "2", home=alice_home, env=env["alice"])
    assert extend.code == 0, extend.err
    written = _writes(fake, ALICE, mark)
    assert written and all(w.split(" ", 2)[2].lower().startswith(group_key) for w in written), written
    # `up` rerun on a healthy cluster exits 0, and writes nothing outside the group either.
    mark = fake.mark()
    rerun = azbench("up", "-f", str(spec), "--yes", home=alice_home, env=env["alice"])
    assert rerun.code == 0, rerun.err
    assert all(w.split(" ", 2)[2].lower().startswith(group_key) for w in _writes(fake, ALICE, mark))

    # Expired, with the decoy still there: Alice's sweep deletes her cluster, reports the decoy.
    alice = _clients(fake, ALICE)
    alice.resources.tags.begin_update_at_scope(f"/subscriptions/{SUB}/resourceGroups/azbench-z1",
                                               {"operation": "Merge", "properties": {"tags": {
                                                   "azbench-expires": PAST}}}).result()
    mark = fake.mark()
    swept = azbench("sweep", "--yes", home=alice_home, env=env["alice"])
    assert swept.code == 0, swept.err
    assert group_key not in fake.resources
    assert any(k.lower().endswith("/resourcegroups/aaa-z1") for k in fake.resources)
    assert "decoy" in swept.out and "aaa-z1" in swept.out, swept.out
    assert not [w for w in _writes(fake, ALICE, mark) if "aaa-z1" in w.lower()]
