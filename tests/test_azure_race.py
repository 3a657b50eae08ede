"""A creation no one can take over (issue 39, point 1), raced for real: two people's CLIs
(two service principals, two homes) run `up dup` against the fake ARM over HTTPS, and the
group PUT is slow enough that both find the group absent.

ARM answers the PUT 201 Created to the request that made the group and 200 OK to the one
that found it (https://learn.microsoft.com/rest/api/resources/resource-groups/create-or-update,
Responses); the 200 replaced the group's tags. The loser stops with no further write and says
the name is taken; the winner reads the tags again before it reports success, restores its own
and records that someone else wrote them. Neither `adopt` nor `down` of the loser then touches
the winner's cluster without --force, even when the owner tags name the loser."""

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
SPEC = """name: dup
provider: azure
sku: h100
nodes: 1
region: eastus
azure:
  boot_timeout_s: 0
  polling_interval: 0.2
"""


def _start(args: list[str], home: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    import os
    full = {**os.environ, **env, "AZBENCH_HOME": str(home)}
    full.pop("AZBENCH_DEBUG", None)
    return subprocess.Popen([sys.executable, "-m", "orchestrator", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=full)


def _done(proc: subprocess.Popen[str]) -> CliResult:
    out, err = proc.communicate(timeout=300)
    return CliResult(proc.returncode, out, err)


def _writes(fake: Any, oid: str) -> list[str]:
    return [f"{e.method} {e.status} {e.path.rsplit('/', 1)[-1]}" for e in fake.log
            if e.principal == oid and e.method in WRITES]


def test_two_ups_of_one_name_the_second_stops_and_the_first_keeps_its_cluster(tls_principals: Any,
                                                                             tmp_path: Path) -> None:
    fake, env = tls_principals
    spec = tmp_path / "dup.yaml"
    spec.write_text(SPEC)
    alice_home, bob_home = tmp_path / "alice", tmp_path / "bob"
    # The group PUT is slow: Alice's is held until Bob's has arrived too (as two PUTs 0.3 s apart
    # both fall inside one 2.5 s PUT, whatever pace two processes start at); then ARM answers
    # them in the order they came: 201 to Alice, 200 to Bob.
    slow = fake.add_latency("PUT", "/resourcegroups/azbench-dup", 120.0, times=2, together=2)
    first = _start(["up", "-f", str(spec), "--yes"], alice_home, env["alice"])
    deadline = time.monotonic() + 120
    while slow.arrived < 1 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # Alice's group PUT is in flight
    time.sleep(0.3)
    second = _start(["up", "-f", str(spec), "--yes"], bob_home, env["bob"])
    won, lost = _done(first), _done(second)

    assert won.code == 0, won.err
    assert "cluster 'dup' up: 1 x Standard_ND96isr_H100_v5" in won.out
    # ARM's answers: Alice's PUT created the group, Bob's found it.
    puts = [(e.principal, e.status) for e in fake.log if e.method == "PUT" and e.path.lower().endswith("/azbench-dup")]
    assert puts[:2] == [(ALICE, 201), (BOB, 200)]
    # The loser: one line, the name is taken, and nothing written after its group PUT.
    assert lost.code == 4
    line = one_line_error(lost)
    # Bob's PUT came 0.2 s after Alice's 201: her group held nothing yet, so Bob cannot tell a
    # race from his own lost 201 and says both (issue 48); either way he wrote nothing else.
    assert "ARM answered 200, not 201 Created" in line and "stopped before writing anything else" in line
    assert _writes(fake, BOB) == ["PUT 200 azbench-dup"]
    assert "`azbench down" not in line.replace("never `azbench down", "")
    # The winner put its own tags back and says someone else wrote them.
    group = fake.resources["/subscriptions/00000000-0000-0000-0000-0000000000aa/resourcegroups/azbench-dup"]
    installation = (alice_home / "installation-id").read_text().strip()
    assert group["tags"]["azbench-owner"] == ALICE and group["tags"]["azbench-installation"] == installation
    assert "restored" in won.err and BOB in won.err
    status = azbench("status", "dup", "-o", "json", home=alice_home, env=env["alice"])
    assert status.code == 0, status.err
    shown = json.loads(status.out)
    assert shown["cloud"]["owner"] == ALICE
    kinds = [e["kind"] for e in shown["events"]]
    assert "up_interference" in kinds and kinds[-1] == "up"
    interference = next(e for e in shown["events"] if e["kind"] == "up_interference")
    assert BOB in interference["message"] and "restored" in interference["message"]

    # Bob keeps no record, and may not take the cluster over: adopt refuses, down finds nothing.
    before = len(_writes(fake, BOB))
    adopt = azbench("adopt", "dup", home=bob_home, env=env["bob"])
    assert adopt.code == 2
    assert f"created by principal {ALICE}" in one_line_error(adopt) and "--force" in one_line_error(adopt)
    down = azbench("down", "dup", "--yes", home=bob_home, env=env["bob"])
    assert down.code == 2 and "no cluster named 'dup'" in one_line_error(down)
    assert len(_writes(fake, BOB)) == before
    assert "azbench-dup" in {r["name"] for r in fake.resources.values()}


def test_owner_tags_naming_you_do_not_make_another_principals_cluster_yours(tls_principals: Any,
                                                                           tmp_path: Path) -> None:
    """Bob rewrites the owner tags of Alice's cluster to name himself (anyone with Tag
    Contributor may): his `adopt` and `down` still need --force, because ARM says Alice made
    its custom role (its createdBy), and no tag can say otherwise."""
    from orchestrator.providers.azure.clients import AzureClients
    from testsupport.fake_arm import SUB, StubCredential
    fake, env = tls_principals
    spec = tmp_path / "mine.yaml"
    spec.write_text(SPEC.replace("name: dup", "name: mine"))
    made = azbench("up", "-f", str(spec), "--yes", home=tmp_path / "alice", env=env["alice"])
    assert made.code == 0, made.err
    bob_home = tmp_path / "bob"
    bob = AzureClients(credential=StubCredential(oid=BOB), subscription_id=SUB, base_url=fake.base_url,
                       polling_interval=0.05)
    forged = {"azbench-owner": BOB, "azbench-installation": "bobs-laptop"}
    bob.resources.tags.begin_update_at_scope(f"/subscriptions/{SUB}/resourceGroups/azbench-mine",
                                             {"operation": "Merge", "properties": {"tags": forged}}).result()
    before = len(_writes(fake, BOB))
    refused = azbench("adopt", "mine", home=bob_home, env=env["bob"])
    assert refused.code == 2 and f"created by principal {ALICE}" in one_line_error(refused)
    forced = azbench("adopt", "mine", "--force", home=bob_home, env=env["bob"])
    assert forced.code == 0, forced.err
    down = azbench("down", "mine", "--yes", home=bob_home, env=env["bob"])
    assert down.code == 2
    assert f"created by principal {ALICE}" in one_line_error(down) and "--force" in one_line_error(down)
    assert len(_writes(fake, BOB)) == before  # reads only: the cluster stands
    assert "azbench-mine" in {r["name"] for r in fake.resources.values()}
