"""Bring-up of a local cluster makes the same scheduler round trips at any size (issue 23, point 5).

The local provider's `up` runs against fake daemons and clients (shell and Python scripts, no
Slurm needed), each Slurm client call appended to a log, at 4 and at 32 nodes. Counted, not
timed: the count must not grow with the node count (the 2,048-node figures and the RPCs
slurmctld receives are in benchmarks/bench_scale.py --up-only).

What the fakes model, and from where:
- munged creates its socket at --socket (munged(8)); `up` waits for that file.
- slurmctld listens on SlurmctldPort (slurm.conf(5)); `up` reads the kernel's socket table.
- slurmd, started with `-N name`, opens its port and writes its pid to SlurmdPidFile, `%n`
  replaced by the node name (slurm.conf(5); slurmd.c main(): _create_msg_socket(), then
  create_pidfile(), then the registration thread, slurm-22-05-8-1).
- the node listing fails while slurmctld does not answer ("Unable to contact slurm
  controller"), else prints "name state" per node (sinfo(1), `-o "%N %T"`): a node is idle
  once its slurmd is up, as registration follows at once; a FUTURE node not registered yet is
  not listed ("will not be seen using any Slurm commands", slurm.conf(5) State=FUTURE). A
  registration modelled as instant keeps the count free of races.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from orchestrator import paths
from orchestrator.providers.local import proc
from orchestrator.providers.local import provider as local_mod
from tests.fixtures.slurm import local_spec

SH_DAEMON_MUNGED = """#!/bin/sh
for a in "$@"; do case "$a" in --socket=*) : > "${a#--socket=}";; esac; done
exec sleep 600
"""
SH_SLURMD = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -N) node="$2"; shift;; -f) conf="$2"; shift;; esac; shift; done
pidfile=$(sed -n 's/^SlurmdPidFile=//p' "$conf" | sed "s/%n/$node/")
echo $$ > "$pidfile"
: > "$FAKE_SLURM_DIR/up/$node"
exec sleep 600
"""
PY_SLURMCTLD = """#!{python}
import os, re, socket, sys, time
conf = open(sys.argv[sys.argv.index("-f") + 1]).read()
port = int(re.search(r"^SlurmctldPort=(\\d+)", conf, re.M).group(1))
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen()
open(os.environ["FAKE_SLURM_DIR"] + "/slurmctld-listens", "w").close()
time.sleep(600)
"""
SH_CLIENT = """#!/bin/sh
echo "$(basename "$0") $*" >> "$FAKE_SLURM_DIR/calls.log"
[ -e "$FAKE_SLURM_DIR/slurmctld-listens" ] || { echo "Unable to contact slurm controller" >&2; exit 1; }
if [ "$(basename "$0")" = sinfo ]; then
  for f in "$FAKE_SLURM_DIR"/up/*; do [ -e "$f" ] && echo "$(basename "$f") idle"; done
fi
exit 0
"""


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch) -> Path:
    bindir, state = tmp_path / "bin", tmp_path / "fake-slurm"
    bindir.mkdir()
    state.mkdir()
    scripts = {"munged": SH_DAEMON_MUNGED, "slurmd": SH_SLURMD,
               "slurmctld": PY_SLURMCTLD.format(python=sys.executable),
               "sinfo": SH_CLIENT, "scontrol": SH_CLIENT}
    for name, text in scripts.items():
        (bindir / name).write_text(text)
        (bindir / name).chmod(stat.S_IRWXU)
    monkeypatch.setattr(local_mod, "find_binaries", lambda: {n: str(bindir / n) for n in scripts})
    monkeypatch.setenv("FAKE_SLURM_DIR", str(state))
    return state


def _up_and_count(state_dir: Path, nodes: int) -> list[str]:
    """Slurm client calls of one `up` at `nodes` nodes, then `down`; no fake daemon left."""
    (state_dir / "up").mkdir()
    (state_dir / "calls.log").write_text("")
    provider = local_mod.LocalProvider()
    spec = local_spec(f"count{nodes}", nodes)
    cluster = provider.up(spec, provider.plan(spec))
    try:
        assert cluster.node_names == [f"node{i}" for i in range(1, nodes + 1)]
        calls = (state_dir / "calls.log").read_text().splitlines()
    finally:
        state = local_mod.load_state(paths.cluster_dir(spec.name))
        provider.down(cluster)
    assert state is not None and len(state.daemons) == nodes + 2
    assert not [d.pid for d in state.daemons.values() if proc.alive(d.pid, d.start_time)]
    (state_dir / "up").rename(state_dir / f"up-{nodes}")
    (state_dir / "slurmctld-listens").unlink()
    return calls


@pytest.mark.parametrize("slurmctld_first_up_to", [local_mod.SLURMCTLD_FIRST_UP_TO, 0],
                         ids=["slurmctld-first", "slurmd-first"])
def test_up_makes_the_same_scheduler_calls_at_4_and_32_nodes(fake_slurm, azbench_home, monkeypatch,
                                                             slurmctld_first_up_to):
    monkeypatch.setattr(local_mod, "SLURMCTLD_FIRST_UP_TO", slurmctld_first_up_to)
    small = _up_and_count(fake_slurm, 4)
    large = _up_and_count(fake_slurm, 32)
    assert small == large == ["sinfo -h -N -p local -o %N %T"]  # one listing for every node
    assert len(os.listdir(fake_slurm / "up-32")) == 32  # every slurmd did start
