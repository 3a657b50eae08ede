"""slurm.conf rendering: golden files for the local 4-node cluster and a GPU cluster, hostlists.

Regenerate the golden files after an intended template change with AZBENCH_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import getpass
import os
import socket
from pathlib import Path

import pytest

from orchestrator.providers.local.provider import LocalState, _conf_params
from orchestrator.slurm.conf import SlurmConfParams, SlurmNode, compress_hostlist, render_slurm_conf
from tests.fixtures.slurm import local_spec
from testsupport.golden import check_golden

GOLDEN = Path(__file__).parent / "golden"


def test_golden_local_four_nodes(tmp_path):
    cdir = tmp_path / "clusters" / "local4"
    nodes = ["node1", "node2", "node3", "node4"]
    state = LocalState(name="local4", cluster_dir=str(cdir), runtime_dir=str(cdir / "run"),
                       conf=str(cdir / "slurm.conf"), workdir=str(cdir / "shared"),
                       jobcomp_file=str(cdir / "log" / "jobcomp.txt"), nodes=nodes,
                       cpus_per_node=1, slurmctld_port=17000,
                       node_ports={n: 17001 + i for i, n in enumerate(nodes)})
    text = render_slurm_conf(_conf_params(state, local_spec("local4", 4)))
    user = "root" if os.geteuid() == 0 else getpass.getuser()
    host = socket.gethostname().split(".")[0]
    text = (text.replace(str(cdir), "<CLUSTER_DIR>").replace(f"={host}", "=<HOST>")
            .replace(f"={user}\n", "=<USER>\n"))
    check_golden(GOLDEN / "slurm.conf.local4", text)


def test_golden_gpu_cluster_one_slurmd_per_vm():
    params = SlurmConfParams(
        cluster_name="h100x2", controller_host="head", controller_addr="10.40.0.4",
        state_dir="/var/spool/slurmctld", spool_dir="/var/spool/slurmd", log_dir="/var/log/slurm",
        pid_dir="/run/slurm", slurm_user="slurm", partition="gpu", oversubscribe="EXCLUSIVE",
        topology_plugin="topology/tree", select_params="CR_Core_Memory",
        nodes=[SlurmNode(name=f"gpu{i}", hostname=f"gpu{i}", addr=f"10.40.1.{i}", cpus=96, gpus=8,
                         real_memory=1800000) for i in (1, 2)])
    check_golden(GOLDEN / "slurmconf.gpu2", render_slurm_conf(params))


def test_values_that_would_break_the_file_are_refused():
    params = SlurmConfParams(cluster_name="c", controller_host="h", controller_addr="127.0.0.1",
                             state_dir="/tmp/with space", spool_dir="/s", log_dir="/l",
                             pid_dir="/p", nodes=[SlurmNode(name="n1", hostname="h", addr="a")])
    with pytest.raises(ValueError, match="with space"):
        render_slurm_conf(params)


@pytest.mark.parametrize("names, expected", [
    (["node1", "node2", "node3", "node4"], "node[1-4]"),
    (["node1", "node3", "node4", "gpu7"], "node[1,3-4],gpu7"),
    (["login"], "login"),
    (["n01", "n02"], "n01,n02"),
])
def test_compress_hostlist(names, expected):
    assert compress_hostlist(names) == expected


def test_node_names_sort_by_their_numbers():
    from orchestrator.slurm.conf import natural_key
    names = ["node10", "gpu2", "node2", "node1", "gpu10", "rack2-node3", "rack10-node1", "rack2-node12"]
    assert sorted(names, key=natural_key) == ["gpu2", "gpu10", "node1", "node2", "node10", "rack2-node3",
                                              "rack2-node12", "rack10-node1"]


def test_consecutive_ports_fold_into_one_node_line_and_gaps_split_it():
    from orchestrator.slurm.conf import node_lines
    nodes = [SlurmNode(name=f"node{i}", hostname="h", addr="127.0.0.1", port=9000 + i) for i in range(1, 5)]
    nodes.append(SlurmNode(name="node5", hostname="h", addr="127.0.0.1", port=9100))  # port gap
    nodes.append(SlurmNode(name="node7", hostname="h", addr="127.0.0.1", port=9101))  # name gap
    lines = node_lines(nodes)
    assert [(ln.names, ln.port) for ln in lines] == [("node[1-4]", "[9001-9004]"), ("node5", "9100"),
                                                   ("node7", "9101")]
    azure = [SlurmNode(name=f"gpu{i}", hostname=f"gpu{i}", addr=f"gpu{i}") for i in (1, 2)]
    assert [ln.names for ln in node_lines(azure)] == ["gpu1", "gpu2"]  # one slurmd per VM: as before


def test_tree_topology_has_racks_of_18_in_scale_sets_under_a_top_switch():
    from orchestrator.slurm.conf import tree_topology
    lines = tree_topology([f"node{i}" for i in range(1, 201)])
    assert lines[0] == "SwitchName=rack1 Nodes=node[1-18]"
    assert "SwitchName=rack12 Nodes=node[199-200]" in lines
    assert "SwitchName=ss1 Switches=rack[1-5]" in lines and "SwitchName=ss3 Switches=rack[11-12]" in lines
    assert lines[-1] == "SwitchName=top Switches=ss[1-3]"
    assert tree_topology(["a1", "a2"]) == ["SwitchName=rack1 Nodes=a[1-2]"]
    assert tree_topology([f"n{i}" for i in range(1, 21)])[-1] == "SwitchName=top Switches=rack[1-2]"


def test_port_block_is_consecutive_and_skips_a_port_in_use():
    import socket

    from orchestrator.providers.local import proc as localproc
    block = localproc.free_port_block(64)
    assert block == list(range(block[0], block[0] + 64))
    assert localproc.PORT_BLOCK_RANGE[0] <= block[0] and block[-1] < localproc.PORT_BLOCK_RANGE[1]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", block[10]))
        busy.listen()
        assert not localproc._bindable(range(block[0], block[-1] + 1))


def test_local_spare_slots_are_future_nodes_with_ports_and_racks(tmp_path, monkeypatch):
    from orchestrator.providers.local import provider
    from orchestrator.providers.local.provider import _topology_text, spare_slots
    cdir = tmp_path / "c"
    nodes, spares = ["node1", "node2", "node3"], [f"node{i}" for i in range(4, 12)]
    state = LocalState(name="c", cluster_dir=str(cdir), runtime_dir=str(cdir / "run"),
                       conf=str(cdir / "slurm.conf"), workdir=str(cdir / "shared"),
                       jobcomp_file=str(cdir / "j"), nodes=nodes, spares=spares, cpus_per_node=1,
                       slurmctld_port=17000, node_ports={n: 17001 + i for i, n in enumerate(nodes + spares)})
    # Where slurmctld starts first, nodes in service are FUTURE too (until they register).
    text = render_slurm_conf(_conf_params(state, local_spec("c", 3)))
    lines = [ln for ln in text.splitlines() if ln.startswith(("NodeName=", "PartitionName="))]
    assert lines[0].startswith("NodeName=node[1-11] ") and "Port=[17001-17011]" in lines[0] and "State=FUTURE" in lines[0]
    assert "Nodes=node[1-11]" in lines[1]
    # Where the slurmd start first (large clusters), nodes in service are UNKNOWN.
    monkeypatch.setattr(provider, "SLURMCTLD_FIRST_UP_TO", 2)
    text = render_slurm_conf(_conf_params(state, local_spec("c", 3)))
    lines = [ln for ln in text.splitlines() if ln.startswith(("NodeName=", "PartitionName="))]
    assert lines[0].startswith("NodeName=node[1-3] ") and "Port=[17001-17003]" in lines[0] and "State=UNKNOWN" in lines[0]
    assert lines[1].startswith("NodeName=node[4-11] ") and "Port=[17004-17011]" in lines[1] and "State=FUTURE" in lines[1]
    assert "Nodes=node[1-11]" in lines[2]
    assert "SwitchName=rack1 Nodes=node[1-11]" in _topology_text(state)  # spares have a rack too
    assert spare_slots(3) == 8 and spare_slots(2048) == 512
    with pytest.raises(ValueError):
        SlurmNode(name="n", hostname="h", addr="a", state="DOWN")
