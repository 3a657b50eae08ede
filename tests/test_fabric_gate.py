"""The gate's fabric checks (fabric/gate.py, templates/fabric_node_check.py): GPU and HCA
counts against the SKU, and on GB200 the IMEX service, domain and channel, the GPUs' fabric state
and one NVLink domain per rack; a failing check rerun before it counts, a failure on every node an
image or harness fault; the boot-time count and `up` replacing a short VM; and on emulated Azure
GB200 VMs, an IMEX-down node and a node short of a GPU found through NVIDIA's tools' output."""

from __future__ import annotations

import base64
import copy
import gzip
import importlib.util
import json
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.errors import ProvisionError
from orchestrator.hardware.catalog import lookup
from orchestrator.models import Cluster, ExecResult, NodeInfo
from orchestrator.paths import templates_dir
from orchestrator.providers.azure import boot
from orchestrator.fabric.gate import gate_fabric, parse_facts
from orchestrator.fabric.judge import judge_nodes as judge
from orchestrator.runs.fleet_gate import fabric_verdict, gate_nodes
from orchestrator.seams import Access, Capabilities
from testsupport.vm_emulator import can_emulate

TOOLS = Path(__file__).parent / "data" / "fabric_tools"
CHECK = templates_dir() / "fabric_node_check.py"
GB200, H100 = lookup("gb200"), lookup("h100")


def _check() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("fabric_node_check", CHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the node check reads NVIDIA's and the OFED tools' own output --------------------------------

def test_the_check_reads_imex_ctl_ibstat_and_nvidia_smi_as_published() -> None:
    check = _check()
    table = check.parse_imex_table((TOOLS / "imex-ctl-N_p6e-gb200_18_nodes.txt").read_text())
    assert len(table["nodes"]) == 18 and {n["status"] for n in table["nodes"]} == {"READY"}
    assert table["nodes"][10] == {"index": 10, "address": "172.31.54.95", "status": "READY"}
    assert table["not_connected"] == [] and table["domain"] == "UP"
    assert check.parse_ibstat((TOOLS / "ibstat_nccl-1591.txt").read_text()) == [{"name": "mlx5_5", "active": True}]
    assert check.parse_fabric((TOOLS / "nvidia-smi-q_fabric_manager_guide.txt").read_text()) == [
        {"state": "Completed", "status": "Success"}]
    # An Ethernet function of an mlx5 device (Azure's accelerated networking) is not an IB HCA.
    eth = "CA 'mlx5_an0'\n\tPort 1:\n\t\tState: Active\n\t\tLink layer: Ethernet\n"
    assert check.parse_ibstat(eth) == []


def test_a_degraded_imex_table_names_what_is_not_connected() -> None:
    text = (TOOLS / "imex-ctl-N_p6e-gb200_18_nodes.txt").read_text()
    # The same domain with node 3 down, as the guide's legend writes it: I, and not READY.
    down = text.replace("Node #3   - 172.31.49.228   - READY", "Node #3   - 172.31.49.228   - UNAVAILABLE")
    lines = down.splitlines()
    for i, line in enumerate(lines):
        cells = line.split()
        if len(cells) == 19 and cells[0].isdigit():
            cells = ["I" if (int(cells[0]) == 3 or j == 3) else c for j, c in enumerate(cells[1:])]
            lines[i] = f"      {line.split()[0]:>2}        " + "   ".join(cells)
    table = _check().parse_imex_table("\n".join(lines).replace("Domain State: UP", "Domain State: DEGRADED"))
    assert table["domain"] == "DEGRADED" and [n["address"] for n in table["nodes"] if n["status"] != "READY"] == [
        "172.31.49.228"]
    assert [3, 0, "I"] in table["not_connected"] and [0, 3, "I"] in table["not_connected"]


# -- judging ------------------------------------------------------------------------------------

def _facts(node: str, ip: str, *, gpus: int = 4, hcas: int = 4, imex: bool = True, channel: bool = True,
           clique: str = "7", state: str = "Completed", peers: Sequence[tuple[str, bool]] = ()) -> dict[str, Any]:
    table = None
    if imex:
        nodes = [{"index": i, "address": a, "status": "READY" if up else "UNAVAILABLE"} for i, (a, up) in enumerate(peers)]
        broken = [[i, j, "I"] for i, (_, a) in enumerate(peers) for j, (_, b) in enumerate(peers) if not (a and b)]
        table = {"nodes": nodes, "not_connected": broken, "domain": "UP" if not broken else "DEGRADED"}
    return {"node": node, "addresses": [ip], "gpus": {"count": gpus, "names": ["NVIDIA GB200"] * gpus},
            "hcas": [{"name": f"mlx5_{i}", "active": True} for i in range(hcas)], "hca_source": "ibstat",
            "imex": {"service": "active" if imex else "inactive", "table": table,
                     "table_error": "" if imex else "the local IMEX service is not running", "channel": channel,
                     "fabric": [{"state": state, "status": "Success", "clique": clique, "uuid": "5e0c7a11"}] * gpus}}


def _rack(bad: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    peers = [(f"10.9.0.{10 + i}", i != 1) for i in range(4)]  # node2's IMEX is down
    facts = {f"node{i + 1}": _facts(f"node{i + 1}", f"10.9.0.{10 + i}", peers=peers) for i in range(4)}
    facts["node2"] = _facts("node2", "10.9.0.11", imex=False)
    facts["node3"] = _facts("node3", "10.9.0.12", gpus=3, peers=peers)
    facts["node4"] = _facts("node4", "10.9.0.13", clique="9", peers=peers)
    facts.update(bad or {})
    return facts


def test_gb200_checks_flag_the_down_imex_node_not_those_that_see_it() -> None:
    facts = _rack()
    found = {(f.node, f.check): f.evidence for f in judge(facts, sorted(facts), GB200, {"rack0": sorted(facts)})}
    assert set(found) == {("node2", "imex_service"), ("node2", "imex_domain"), ("node3", "gpu_count"),
                          ("node4", "nvlink_domain")}
    assert found[("node2", "imex_service")] == "systemctl is-active nvidia-imex: inactive"
    assert "10.9.0.11 (node2) not READY or not connected: node1 lists it UNAVAILABLE" in found[("node2", "imex_domain")]
    assert found[("node3", "gpu_count")] == "nvidia-smi lists 3 of 4 GPUs"
    assert found[("node4", "nvlink_domain")] == ("ClusterUUID.CliqueId 5e0c7a11.9 differs from rack rack0's "
                                                 "5e0c7a11.7 (on 3 of its 4 nodes)")


def test_h100_checks_counts_and_no_imex() -> None:
    facts = {"n1": _facts("n1", "10.0.0.1", gpus=8, hcas=8, imex=False),
             "n2": _facts("n2", "10.0.0.2", gpus=8, hcas=7, imex=False)}
    found = judge(facts, ["n1", "n2"], H100, {})
    assert [(f.node, f.check, f.evidence) for f in found] == [
        ("n2", "ib_hcas", "ibstat lists 7 of 8 InfiniBand HCAs (mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6)")]


def _probe(rounds: list[dict[str, dict[str, Any]]]):  # type: ignore[no-untyped-def]
    calls: list[list[str]] = []

    def probe(nodes: Sequence[str]) -> str:
        facts = rounds[min(len(calls), len(rounds) - 1)]
        calls.append(list(nodes))
        return "\n".join(f"{n}: AZBENCH_FABRIC {json.dumps(facts[n])}" for n in nodes if n in facts)
    return probe, calls


def test_a_failing_check_is_rerun_and_only_a_repeat_failure_counts() -> None:
    first = _rack()
    first["node1"] = _facts("node1", "10.9.0.10", channel=False, peers=[(f"10.9.0.{10 + i}", i != 1) for i in range(4)])
    probe, calls = _probe([first, _rack()])  # the channel was there on the second look
    gate = gate_fabric(probe, sorted(first), GB200, {"rack0": sorted(first)})
    assert calls == [["node1", "node2", "node3", "node4"], ["node1", "node2", "node3", "node4"]] and gate.rounds == 2
    assert gate.flagged == ["node2", "node3", "node4"] and not gate.fault
    assert not any(f.node == "node1" for f in gate.findings)
    verdict = next(fabric_verdict(f) for f in gate.findings if f.check == "gpu_count")
    assert verdict.reason == "gpu_count fail: 3 (threshold 4); nvidia-smi lists 3 of 4 GPUs"


def test_a_failure_on_every_node_is_an_image_or_harness_fault_and_flags_nothing() -> None:
    peers = [(f"10.9.0.{10 + i}", True) for i in range(3)]
    facts = {f"node{i + 1}": _facts(f"node{i + 1}", f"10.9.0.{10 + i}", channel=False, peers=peers) for i in range(3)}
    probe, calls = _probe([facts])
    gate = gate_fabric(probe, sorted(facts), GB200)
    assert len(calls) == 2 and gate.findings == []
    assert gate.fault.startswith("imex_channel failed on every node checked (3 of 3): an image or harness fault")
    assert "channel0 does not exist" in gate.fault


class _Launcher:
    """Stands in for a Slurm launcher: the fabric check's and the health probe's lines per node,
    drains recorded. (The real round trip runs on emulated VMs below.)"""

    backend = "fake"
    caps = Capabilities(health_gate=True, node_control=True)

    def __init__(self, facts: dict[str, dict[str, Any]]) -> None:
        self.facts, self.drained, self.staged = facts, {}, []  # type: ignore[var-annotated]

    def node_states(self) -> dict[str, NodeInfo]:
        return {n: NodeInfo(name=n, state="idle") for n in self.facts}

    def leaf_switches(self) -> dict[str, list[str]]:
        return {"rack0": sorted(self.facts)}

    def stage_file(self, local: Path, remote: str) -> None:
        self.staged.append(remote)

    def run_on_nodes(self, nodes: Sequence[str], argv: Sequence[str], *, timeout_s: float,
                     env: Any = None) -> ExecResult:
        if argv[0] == "python3":
            return ExecResult(exit_code=0, stdout="\n".join(f"AZBENCH_FABRIC {json.dumps(self.facts[n])}" for n in nodes))
        return ExecResult(exit_code=0, stdout="\n".join(
            f"AZBENCH_PROBE node={n} disk_gb=100 mem_gb=100 ops_per_s=1e6 link_gbps=450 link=ok" for n in nodes))

    def drain(self, reasons: dict[str, str]) -> list[str]:
        self.drained.update(reasons)
        return list(reasons)


def test_the_gate_drains_what_failed_twice_and_nothing_on_a_harness_fault() -> None:
    h100 = Cluster(name="g", provider="fake", sku="Standard_ND96isr_H100_v5", nodes=3,
                   node_names=["n1", "n2", "n3"], workdir="/w")
    facts = {f"n{i}": _facts(f"n{i}", f"10.0.0.{i}", gpus=8, hcas=8, imex=False) for i in (1, 2, 3)}
    facts["n2"]["gpus"] = {"count": 7, "names": ["NVIDIA H100 80GB HBM3"] * 7}
    launcher = _Launcher(facts)
    access = Access(launcher=launcher, shell=None, caps=launcher.caps)  # type: ignore[arg-type]
    report = gate_nodes(access, h100, ["n1", "n2", "n3"], with_ahc=False)
    assert report.drained == ["n2"] and not report.fabric
    assert launcher.drained["n2"].startswith("azbench: gpu_count fail: 7 (threshold 8); nvidia-smi lists 7 of 8 GPUs")
    assert launcher.staged == ["/w/azbench-health/fabric_node_check.py", "/w/azbench-health/health_probe.sh"]
    every = {n: copy.deepcopy(f) for n, f in facts.items()}
    for f in every.values():
        f["hcas"] = []
    bad = _Launcher(every)
    report = gate_nodes(Access(launcher=bad, shell=None, caps=bad.caps), h100, ["n1", "n2", "n3"],  # type: ignore[arg-type]
                        with_ahc=False)
    assert bad.drained == {} and report.drained == []
    assert "ib_hcas failed on every node checked (3 of 3): an image or harness fault" in report.fabric


# -- at boot: the count, and `up` replacing a short VM -------------------------------------------

def test_a_node_short_at_boot_is_a_short_node_error_others_fail_up() -> None:
    note = "fabric check failed: nvidia-smi lists 3 of 4 GPUs"
    probe = boot.parse_probe(f"done\n{boot.SEP}\n/shared/azbench/boot/c-gpu-00-000002.failed:{note}\n"
                             f"{boot.SEP}\nc-gpu-00-000001 idle\n{boot.SEP}\n")
    with pytest.raises(boot.ShortNodeError) as short:
        boot.verdict(probe, "c-head", ["c-gpu-00-000001", "c-gpu-00-000002"])
    assert short.value.short == {"c-gpu-00-000002": note}
    other = boot.parse_probe(f"done\n{boot.SEP}\n/shared/azbench/boot/x.failed:cloud-init runcmd step 'y' failed\n"
                             f"{boot.SEP}\n{boot.SEP}\n")
    with pytest.raises(ProvisionError) as plain:
        boot.verdict(other, "c-head", ["x"])
    assert not isinstance(plain.value, boot.ShortNodeError)


def test_up_replaces_a_short_vm_before_slurm_lists_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.providers.azure.provider import AzureProvider
    provider = AzureProvider()
    cluster = Cluster(name="c", provider="azure", sku="Standard_ND128isr_NDR_GB200_v6", nodes=2,
                      node_names=["c-gpu-00-000000", "c-gpu-00-000001"])
    waits: list[list[str]] = []

    def wait_booted(c: Cluster, head: str, **_: Any) -> None:
        waits.append(list(c.node_names))
        if len(waits) == 1:
            raise boot.ShortNodeError({"c-gpu-00-000001": "fabric check failed: nvidia-smi lists 3 of 4 GPUs"})

    replaced: list[str] = []
    monkeypatch.setattr(boot, "wait_booted", wait_booted)
    def replace_node(c: object, node: str, timeout_s: float | None = None) -> str:
        replaced.append(node)
        return "c-gpu-00-000002"

    monkeypatch.setattr(provider, "replace_node", replace_node)
    done = provider._boot(cluster, 60)
    assert replaced == ["c-gpu-00-000001"] and done.node_names == ["c-gpu-00-000000", "c-gpu-00-000002"]
    assert waits == [["c-gpu-00-000000", "c-gpu-00-000001"], ["c-gpu-00-000000", "c-gpu-00-000002"]]
    # Every VM short: an image fault, nothing replaced.
    monkeypatch.setattr(boot, "wait_booted", lambda c, head, **_: (_ for _ in ()).throw(boot.ShortNodeError(
        {n: "fabric check failed: ibstat lists 0 of 4 InfiniBand HCAs (none)" for n in c.node_names})))
    replaced.clear()
    with pytest.raises(ProvisionError, match="every VM failed its fabric check at boot .* an image fault"):
        provider._boot(cluster, 60)
    assert replaced == []


# -- on emulated Azure GB200 VMs -----------------------------------------------------------------

needs_vms = pytest.mark.skipif(can_emulate() is not None, reason=can_emulate() or "")


@pytest.mark.integration
@needs_vms
def test_the_gb200_gate_finds_an_imex_down_node_and_a_short_gpu_count_on_emulated_vms(tmp_path: Path) -> None:
    """Three emulated GB200 VMs of one NVLink domain boot the node check as cloud-init would:
    gb-1's IMEX service is down, gb-2 has 3 of its 4 GPUs. The gate, reading what the emulated
    nvidia-smi, ibstat, systemctl and nvidia-imex-ctl print, flags exactly those two."""
    from testsupport.vm_emulator import Fabric, GpuVm, VmSpec
    fabric = Fabric(tmp_path / "fabric")
    names, hosts = ["gb-0", "gb-1", "gb-2"], [f"c-gpu-00-00000{i}" for i in range(3)]
    for name in names:
        fabric.nvlink[name] = ("5e0c7a11-1111-4222-8333-444455556666", 7)
    fabric.gpu["gb-1"] = GpuVm(imex=False)
    fabric.gpu["gb-2"] = GpuVm(gpus=3)
    user_data = {"write_files": [{"path": "/usr/local/sbin/azbench-fabric-check", "permissions": "0755",
                                  "content": CHECK.read_text()}],
                 "runcmd": [["mkdir", "-p", "/shared/azbench"],
                            ["sh", "-c", "/usr/local/sbin/azbench-fabric-check --boot --gpus 4 --hcas 4 > "
                                         "/var/log/azbench-fabric-check.log; true"]]}
    data = base64.b64encode(gzip.compress(("#cloud-config\n" + yaml.safe_dump(user_data)).encode())).decode()
    try:
        for i, name in enumerate(names):
            fabric.boot(VmSpec(name=name, hostname=hosts[i], private_ip=f"10.9.0.{10 + i}", prefix_len=24,
                               public_ip=None, custom_data=data, admin_user="azureuser", ssh_keys=[],
                               size="Standard_ND128isr_NDR_GB200_v6", vcpus=4))
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not all(fabric.boot_state(n).get("stage") == "done" for n in names):
            time.sleep(0.5)
        assert all(fabric.boot_state(n).get("stage") == "done" for n in names), [fabric.boot_state(n) for n in names]
        boot_notes = {n: fabric.exec(n, ["cat", f"/shared/azbench/boot/{hosts[i]}.failed"]).stdout
                      for i, n in enumerate(names)}
        by_host = dict(zip(hosts, names))

        def probe(nodes: Sequence[str]) -> str:
            return "\n".join(fabric.exec(by_host[h], ["python3", "/usr/local/sbin/azbench-fabric-check", "--imex"]).stdout
                             for h in nodes)
        raw = probe(hosts)
        gate = gate_fabric(probe, hosts, GB200, {"rack0": hosts})
    finally:
        fabric.close()
    assert boot_notes == {"gb-0": "", "gb-1": "", "gb-2": "fabric check failed: nvidia-smi lists 3 of 4 GPUs\n"}
    facts = parse_facts(raw)
    assert facts["c-gpu-00-000000"]["imex"]["table"]["domain"] == "DEGRADED"  # as gb-0 sees gb-1
    assert facts["c-gpu-00-000000"]["imex"]["channel"] is True and len(facts["c-gpu-00-000000"]["hcas"]) == 4
    found = {(f.node, f.check): f.evidence for f in gate.findings}
    assert set(found) == {("c-gpu-00-000001", "imex_service"), ("c-gpu-00-000001", "imex_domain"),
                          ("c-gpu-00-000002", "gpu_count")}, found
    assert found[("c-gpu-00-000001", "imex_service")] == "systemctl is-active nvidia-imex: inactive"
    assert "10.9.0.11 (c-gpu-00-000001) not READY or not connected" in found[("c-gpu-00-000001", "imex_domain")]
    assert found[("c-gpu-00-000002", "gpu_count")] == "nvidia-smi lists 3 of 4 GPUs"
    assert gate.rounds == 2 and not gate.fault
