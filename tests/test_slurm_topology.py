"""topology.conf for NVL72 racks (issue 23): topology/block on Slurm >= 23.11, topology/tree
before (golden text for both), the version choice (the node image's Slurm), and a replacement
taking its predecessor's place in the rack's block, installed on the head with a reconfigure."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.hardware.catalog import lookup
from orchestrator.providers.azure import cloudinit as ci
from orchestrator.models import Cluster, ClusterState, ExecResult, ScaleSetPlan
from orchestrator.slurm import topology as topo
from orchestrator.slurm.launcher import SlurmLauncher
from testsupport.golden import check_golden

GOLDEN = Path(__file__).parent / "golden"
RACKS = {"r0": [f"gb-{i:06d}" for i in range(3)], "r1": [f"gb-{i:06d}" for i in range(3, 6)],
         "spare0": ["gb-000006", "gb-000007", "gb-000008"]}


@pytest.mark.parametrize("version,plugin,golden", [((23, 11), topo.BLOCK, "topology-block.conf"),
                                                   ((22, 5), topo.TREE, "topology-tree.conf")])
def test_racks_render_as_blocks_on_23_11_and_as_leaf_switches_before(version, plugin, golden):
    got_plugin, lines = topo.rack_topology(RACKS, version)
    assert got_plugin == plugin
    check_golden(GOLDEN / golden, "\n".join(lines) + "\n")


def test_block_needs_slurm_23_11_and_an_unknown_version_gets_tree():
    assert [topo.supports_block(v) for v in [(21, 8), (22, 5), (23, 2), (23, 11), (24, 11)]] == \
        [False, False, False, True, True]
    assert topo.supports_block(None) is False
    # The node image decides: Ubuntu 24.04 (Ubuntu-HPC 2404*) ships 23.11; others are not assumed.
    assert ci.image_slurm({"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2404-arm64"}) == (23, 11)
    assert ci.image_slurm({"sku": "2204"}) is None and ci.image_slurm(None) is None
    sets = [ScaleSetPlan(name="g-00", vms=36, gpus=144, racks=2)]
    assert ci.slurm_params("g", "10.0.0.4", lookup("gb200"), sets, (23, 11)).topology_plugin == topo.BLOCK
    assert ci.slurm_params("g", "10.0.0.4", lookup("gb200"), sets, (22, 5)).topology_plugin == topo.TREE
    lines, _ = ci.topology(lookup("gb200"), sets, (22, 5))
    assert lines[-1] == "SwitchName=top Switches=g-00-rack0,g-00-rack1,g-00-spare0,g-00-spare1"


def test_a_replacement_takes_its_predecessors_place_in_the_block():
    _, lines = topo.rack_topology(RACKS, (23, 11))
    text = "# topology\n" + "\n".join(lines) + "\n"
    swapped = topo.swap(text, "gb-000004", "gb-000006")
    assert swapped.splitlines() == [
        "# topology",
        "BlockName=r0 Nodes=gb-000000,gb-000001,gb-000002",
        "BlockName=r1 Nodes=gb-000003,gb-000006,gb-000005",
        "BlockName=spare0 Nodes=gb-000004,gb-000007,gb-000008"]
    assert topo.swap(swapped, "gb-000004", "gb-000006") == text  # a swap undone is the original
    assert topo.expand_hostlist("n[1-3,7],gb-000001,c[08-10]") == \
        ["n1", "n2", "n3", "n7", "gb-000001", "c08", "c09", "c10"]


class _Head:
    """A head node's shell as the launcher sees it: files and the commands run, recorded."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files, self.commands, self.put_text = files, [], {}

    def run(self, cmd, timeout=60.0):
        self.commands.append(cmd)
        return ExecResult(exit_code=0, stdout="", stderr="")

    def put(self, local: Path, remote: str) -> None:
        self.put_text[remote] = local.read_text()

    def read(self, remote: str, offset: int = 0, limit=None) -> bytes:
        if remote not in self.files:
            raise FileNotFoundError(remote)
        return self.files[remote].encode()

    def get(self, remote, local):
        raise NotImplementedError

    def close(self) -> None:
        pass


def test_the_launcher_installs_the_swapped_topology_as_admin_and_reconfigures():
    _, lines = topo.rack_topology(RACKS, (23, 11))
    head = _Head({ci.TOPOLOGY_FILES[0]: "\n".join(lines) + "\n"})
    cluster = Cluster(name="g", provider="azure", sku="Standard_ND128isr_NDR_GB200_v6", nodes=6,
                      state=ClusterState.READY, node_names=RACKS["r0"] + RACKS["r1"])
    launcher = SlurmLauncher(head, cluster, admin="sudo -n")
    assert launcher.swap_topology("gb-000004", "gb-000006", ci.TOPOLOGY_FILES) is True
    [(staged, text)] = head.put_text.items()
    assert "BlockName=r1 Nodes=gb-000003,gb-000006,gb-000005" in text
    [cmd] = head.commands
    assert cmd.startswith("sudo -n sh -c ") and cmd.count("install -m 0644") == 2
    assert all(path in cmd for path in ci.TOPOLOGY_FILES) and "scontrol reconfigure" in cmd and staged in cmd
    # No topology file (a CPU size): nothing is run.
    assert SlurmLauncher(_Head({}), cluster, admin="sudo -n").swap_topology("a", "b", ci.TOPOLOGY_FILES) is False
