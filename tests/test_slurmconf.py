"""slurm.conf rendering: golden files for the local 4-node cluster and a GPU cluster, hostlists.

Regenerate the golden files after an intended template change with AZBENCH_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import getpass
import os
import socket
from pathlib import Path

import pytest

from orchestrator.clusters.providers.local import LocalState, _conf_params
from orchestrator.slurm.conf import SlurmConfParams, SlurmNode, compress_hostlist, render_slurm_conf
from tests.fixtures.slurm import local_spec

GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("AZBENCH_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; rerun with AZBENCH_UPDATE_GOLDEN=1 if intended"


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
    check_golden("slurm.conf.local4", text)


def test_golden_gpu_cluster_one_slurmd_per_vm():
    params = SlurmConfParams(
        cluster_name="h100x2", controller_host="head", controller_addr="10.40.0.4",
        state_dir="/var/spool/slurmctld", spool_dir="/var/spool/slurmd", log_dir="/var/log/slurm",
        pid_dir="/run/slurm", slurm_user="slurm", partition="gpu", oversubscribe="EXCLUSIVE",
        topology_plugin="topology/tree", select_params="CR_Core_Memory",
        nodes=[SlurmNode(name=f"gpu{i}", hostname=f"gpu{i}", addr=f"10.40.1.{i}", cpus=96, gpus=8,
                         real_memory=1800000) for i in (1, 2)])
    check_golden("slurmconf.gpu2", render_slurm_conf(params))


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
