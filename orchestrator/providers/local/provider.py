"""The local provider: a real multi-node Slurm cluster emulated on this machine.

`up` starts the cluster's own munged, one slurmctld and one slurmd per emulated node, waits
until Slurm lists every node idle, and records the pids it started (with their start times) in
state.json; `down` stops exactly those and keeps the logs. Replacement and resize start the
slurmd of spare slots that slurm.conf defines in state FUTURE. Why FUTURE slots rather than
dynamic nodes, and the start order that keeps slurmctld to one registration per node:
docs/local-provider.md.

Beside it: layout.py (names, spare slots, folders, ports, topology, links) and nodes.py (each
node's slurmd started, waited idle, retired, killed, restarted); their names are re-exported.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import sys
from pathlib import Path
from collections.abc import Collection, Sequence

from orchestrator import paths
from orchestrator.providers.base import ProviderBase, ProviderParts, SetChange
from orchestrator.providers.local.cluster import (
    PARTITION,
    SKU,
    STATE_FILE,
    LocalState,
    load_state,
    save_state,
    to_cluster,
)
from orchestrator.providers.local import links as netlinks
from orchestrator.providers.local import proc
from orchestrator.providers.local.layout import (RACK_SIZE, RACKS_PER_SCALE_SET, _build_links, _layout, _link_notes,
                                                 _slots, _topology_text, node_names, spare_slots)
from orchestrator.providers.local.nodes import (_await_eviction, _check_alive, _cluster_dir, _daemon_env, _retire,
                                                _spawn, _start_nodes, _state_for, _wait_idle, _write_munge_key,
                                                kill_node, node_states, restart_node, start_parallelism)
from orchestrator.hosts.remote import LocalRunner
from orchestrator.errors import CapacityError, ConfigError, ProvisionError
from orchestrator.models import Cluster, ClusterState, Plan, PlannedResource, ScaleSetPlan
from orchestrator.seams import Access, Traits
from orchestrator.slurm.commands import CLIENTS, DAEMONS, INSTALL_HINT, NODE_LIST, find_binaries
from orchestrator.slurm.launcher import SlurmLauncher
from orchestrator.slurm.conf import SlurmConfParams, SlurmNode, compress_hostlist, natural_key, render_slurm_conf
from orchestrator.providers.local.settings import LocalSettings
from orchestrator.specs.cluster import ClusterSpec


class LocalProvider(ProviderBase):
    """Provider for `--provider local`; see the module docstring."""

    name = "local"
    traits = Traits(shell=True, head_here=True, emulated_nodes=True)

    def __init__(self, *, ready_timeout_s: float = 60.0, poll_s: float = 0.2,
                 grace_s: float = 5.0) -> None:
        self.ready_timeout_s = ready_timeout_s
        self.poll_s = poll_s
        self.grace_s = grace_s

    def plan(self, spec: ClusterSpec) -> Plan:
        nodes = node_names(spec.nodes)
        cpus = spec.section(LocalSettings).cpus_per_node
        warnings = []
        if spec.nodes * cpus > (os.cpu_count() or 1):
            warnings.append(f"{spec.nodes} nodes x {cpus} CPUs share {os.cpu_count()} cores "
                            "(the partition oversubscribes)")
        return Plan(
            cluster=spec.name, provider="local", sku=SKU, region=None, nodes=spec.nodes,
            gpus_per_node=0, total_gpus=0,
            scale_sets=[ScaleSetPlan(name=compress_hostlist(nodes), vms=spec.nodes, gpus=0)],
            resources=[
                PlannedResource(kind="munged", name=f"{spec.name}-munged",
                                properties={"socket": "private, under the cluster dir"}),
                PlannedResource(kind="slurmctld", name=f"{spec.name}-slurmctld",
                                properties={"port": "chosen at up"}),
                PlannedResource(kind="slurmd", name=compress_hostlist(nodes), count=spec.nodes,
                                properties={"port": "chosen at up", "cpus": cpus}),
            ],
            cost_per_hour_usd=0.0, cost_is_estimate=False,
            preflight=[f"binaries on PATH or in /usr/sbin: {', '.join((*DAEMONS, *CLIENTS))}"],
            warnings=warnings)

    def up(self, spec: ClusterSpec, plan: Plan | None = None) -> Cluster:
        """Start the cluster, or adopt it when its daemons are alive and Slurm answers."""
        bins = find_binaries()
        cdir = paths.cluster_dir(spec.name)
        wanted = node_names(spec.nodes)
        faults = netlinks.parse_faults(os.environ.get(netlinks.FAULTS_VAR, ""), wanted)  # before anything starts
        state = load_state(cdir)
        if state is not None:
            # Replacements rename nodes, so the shape is the node count, not the names.
            same_shape = len(state.nodes) == len(wanted) and state.cpus_per_node == spec.section(LocalSettings).cpus_per_node
            if same_shape and self._healthy(state, bins):
                return to_cluster(state)
            self._stop(state)  # half-dead or resized: stop our own pids, then start afresh
        try:
            state = self._start(spec, cdir, bins)
            if netlinks.wanted():
                _build_links(state, faults, bins)
            self._wait_ready(state, bins)
        except ProvisionError:
            leftover = load_state(cdir)  # saved as each daemon started: stop what did start
            if leftover is not None:
                self._stop(leftover)
            raise
        return to_cluster(state)

    def describe(self, name: str, spec: ClusterSpec | None = None) -> Cluster | None:
        state = load_state(paths.cluster_dir(name))
        if state is None:
            return None
        alive = [proc.alive(d.pid, d.start_time) for d in state.daemons.values()]
        if not any(alive):
            return None
        cluster = to_cluster(state)
        return cluster if all(alive) else cluster.model_copy(update={"state": ClusterState.FAILED})

    def down(self, cluster: Cluster) -> None:
        """Stop the daemons `up` started; idempotent. Keeps log/, slurm.conf and shared/."""
        cdir = _cluster_dir(cluster)
        state = load_state(cdir)
        if state is None:
            return
        self._stop(state)
        netlinks.teardown(state.links)
        (cdir / "bin" / "python").unlink(missing_ok=True)
        runtime = Path(state.runtime_dir)
        if runtime.is_dir() and (runtime.is_relative_to(cdir) or runtime.name.startswith("azbench-")):
            shutil.rmtree(runtime, ignore_errors=True)
        shutil.rmtree(cdir / "slurm-state", ignore_errors=True)
        (cdir / "munge.key").unlink(missing_ok=True)
        (cdir / STATE_FILE).unlink(missing_ok=True)

    def connect(self, cluster: Cluster) -> Access:
        """Commands run here with the cluster's environment; recipes run on this interpreter."""
        runner = LocalRunner(env=dict(cluster.env))
        state = load_state(_cluster_dir(cluster))
        links = state.links if state is not None else netlinks.Links()
        wrapper = _cluster_dir(cluster) / "bin" / "python"
        python = str(wrapper) if links.built and wrapper.exists() else sys.executable
        return Access(launcher=SlurmLauncher(runner, cluster), shell=runner, traits=self.traits,
                      python=python, closers=[runner.close], notes=_link_notes(links))

    def parts(self) -> ProviderParts:
        """Resize (spare slots) and healing (restart a killed node, replace one by a spare)."""
        return ProviderParts(traits=self.traits, resizer=self, healer=self)

    def kill_node(self, cluster: Cluster, node: str) -> None:
        kill_node(cluster, node)

    def restore_capacity(self, cluster: Cluster, nodes: Collection[str] = (),
                         timeout_s: float | None = None, evict_wait_s: float = 0.0) -> list[str]:
        """After an emulated spot eviction (a killed node): wait (at most `evict_wait_s`) until
        those nodes' slurmd is dead, start it again and wait (at most `timeout_s`, default 60 s)
        until each accepts connections on its port, as a replacement VM is back once its slurmd
        answers; the caller then resumes them in Slurm. A job step sent to a node whose slurmd
        was still starting failed its launch."""
        state = _state_for(cluster)
        cdir = Path(state.cluster_dir)
        _await_eviction(state, nodes, evict_wait_s)
        started = []
        for node in nodes:
            key = f"slurmd:{node}"
            daemon = state.daemons.get(key)
            if daemon is not None and not proc.alive(daemon.pid, daemon.start_time):
                state.daemons[key] = _spawn(cdir, f"slurmd-{node}",
                                            {**_daemon_env(state), proc.NODE_MARKER: f"{cdir}:{node}"},
                                            daemon.argv)
                started.append(node)
        save_state(state)
        waiting = {state.node_ports[node]: node for node in started}  # port -> node, until it listens

        def all_listen() -> bool:
            for port in proc.listening(waiting):
                waiting.pop(port)
            return not waiting

        def check() -> None:
            for node in waiting.values():
                _check_alive(state, f"slurmd:{node}")

        try:
            proc.wait_for(all_listen, timeout_s or 60.0, 0.1, check, "slurmd ports")
        except TimeoutError:
            late = sorted(waiting.values(), key=natural_key)
            raise ProvisionError(f"slurmd of {compress_hostlist(late)} ('{cluster.name}') did not listen on "
                                 f"port {', '.join(str(state.node_ports[n]) for n in late)} within "
                                 f"{timeout_s or 60.0:g} s") from None
        return list(state.nodes)

    def replace_node(self, cluster: Cluster, node: str, timeout_s: float | None = None) -> str:
        """Retire `node` and bring the next spare slot up in its place (module docstring);
        the new node's name, once Slurm shows it idle."""
        state = _state_for(cluster)
        if node not in state.nodes:
            raise ConfigError(f"local cluster '{cluster.name}' has no node {node!r} in service")
        if not state.spares:
            raise CapacityError(f"local cluster '{cluster.name}' has no spare node slot left",
                                hint="`azbench down` and `up` again to get fresh slots")
        bins = find_binaries()
        new = state.spares.pop(0)
        _retire(state, [node], bins)
        _start_nodes(state, [new])
        state.nodes = sorted([n for n in state.nodes if n != node] + [new], key=natural_key)
        state.retired.append(node)
        save_state(state)
        _wait_idle(state, [new], bins, timeout_s or 60.0)
        return new

    def resize(self, cluster: Cluster, nodes: int, remove: Sequence[str] = (),
               timeout_s: float | None = None) -> Cluster:
        """Grow by starting spare slots (the cluster's "quota": CapacityError beyond them), or
        shrink by retiring `remove` (killed, state FUTURE); the cluster as now described."""
        state = _state_for(cluster)
        bins = find_binaries()
        have = len(state.nodes)
        if nodes > have:
            if nodes - have > len(state.spares):
                raise CapacityError(f"local cluster '{cluster.name}' can grow to at most "
                                    f"{have + len(state.spares)} nodes (its slurm.conf slots)",
                                    hint="`azbench down` and `up` again at the new size")
            fresh, state.spares = state.spares[:nodes - have], state.spares[nodes - have:]
            _start_nodes(state, fresh)
            state.nodes = sorted(state.nodes + fresh, key=natural_key)
            save_state(state)
            _wait_idle(state, fresh, bins, timeout_s or max(60.0, len(fresh) / 20))
        elif nodes < have:
            unknown = [n for n in remove if n not in state.nodes]
            if unknown or len(remove) != have - nodes:
                raise ConfigError(f"shrinking '{cluster.name}' to {nodes} needs {have - nodes} of its "
                                  f"nodes to remove, got {', '.join(remove) or 'none'}")
            _retire(state, remove, bins)
            state.nodes = [n for n in state.nodes if n not in set(remove)]
            state.retired += list(remove)
            save_state(state)
        return to_cluster(state)

    def resize_preview(self, cluster: Cluster, nodes: int, remove: Sequence[str] = ()) -> list[SetChange]:
        """The one node group, now and after; reads this machine's state file only."""
        have = len(_state_for(cluster).nodes)
        return [] if nodes == have else [SetChange(cluster.name, have, nodes)]

    def restart_node(self, cluster: Cluster, node: str, timeout_s: float = 60.0) -> None:
        restart_node(cluster, node, timeout_s=timeout_s)

    # -- internals --------------------------------------------------------------------------

    def _start(self, spec: ClusterSpec, cdir: Path, bins: dict[str, str]) -> LocalState:
        state = _layout(spec, cdir)
        conf = Path(state.conf)
        conf.write_text(render_slurm_conf(_conf_params(state, spec)))
        (conf.parent / "topology.conf").write_text(_topology_text(state))
        env = _daemon_env(state)
        _write_munge_key(cdir / "munge.key")
        rt = Path(state.runtime_dir)
        socket_path = rt / "munge" / "munge.socket"
        state.daemons["munged"] = _spawn(cdir, "munged", env, [
            bins["munged"], "-F", "--force", f"--socket={socket_path}",
            f"--key-file={cdir / 'munge.key'}", f"--pid-file={rt / 'munge' / 'munged.pid'}",
            f"--log-file={cdir / 'log' / 'munged.log'}", f"--seed-file={rt / 'munge' / 'munged.seed'}"])
        save_state(state)
        try:
            proc.wait_for(socket_path.exists, 10.0, self.poll_s / 4,
                          lambda: _check_alive(state, "munged"), "munged socket")
        except TimeoutError:
            raise ProvisionError(f"munged of '{state.name}' did not create {socket_path} within "
                                 f"10 s:\n{proc.tail(Path(state.daemons['munged'].log))}")
        slurmd_timeout = max(self.ready_timeout_s, len(state.nodes) / 10)
        if not slurmctld_first(len(state.nodes)):  # module docstring, "Bring-up"
            _start_nodes(state, state.nodes, bins["slurmd"], timeout_s=slurmd_timeout)
        state.daemons["slurmctld"] = _spawn(cdir, "slurmctld", env,
                                            [bins["slurmctld"], "-D", "-i", "-f", str(conf)])
        save_state(state)
        try:
            proc.wait_for(lambda: state.slurmctld_port in proc.listening([state.slurmctld_port]),
                          max(self.ready_timeout_s, 10.0), 0.05,
                          lambda: _check_alive(state, "slurmctld"), "slurmctld port",
                          max_poll_s=0.4)  # the socket table holds a line per slurmd port
        except TimeoutError:
            raise ProvisionError(
                f"slurmctld of '{state.name}' did not listen on port {state.slurmctld_port} within "
                f"{max(self.ready_timeout_s, 10.0):g} s; last lines of slurmctld.log:\n"
                + proc.tail(Path(state.cluster_dir) / "log" / "slurmctld.log")) from None
        if slurmctld_first(len(state.nodes)):
            _start_nodes(state, state.nodes, bins["slurmd"], timeout_s=slurmd_timeout)
        return state

    def _wait_ready(self, state: LocalState, bins: dict[str, str]) -> None:
        """Every slurmd is up and slurmctld listens: ask the node listing (one call for all
        nodes) until each node is idle, the pause doubling up to 2 s, so the number of calls
        depends on how long registration takes, never on the node count."""
        last: dict[str, str] = {}
        timeout = self.ready_timeout_s

        def ready() -> bool:
            last.clear()
            last.update(node_states(state, bins[NODE_LIST]))
            return len(last) == len(state.nodes) and all(s == "idle" for s in last.values())

        def check() -> None:
            for key in state.daemons:
                _check_alive(state, key)

        try:
            proc.wait_for(ready, timeout, self.poll_s, check, "idle nodes", max_poll_s=2.0)
        except TimeoutError:
            seen = ", ".join(f"{n}={s}" for n, s in sorted(last.items())) or f"{NODE_LIST} did not answer"
            raise ProvisionError(
                f"local cluster '{state.name}' did not become ready within "
                f"{timeout:g} s ({seen}); last lines of slurmctld.log:\n"
                + proc.tail(Path(state.cluster_dir) / "log" / "slurmctld.log")) from None

    def _healthy(self, state: LocalState, bins: dict[str, str]) -> bool:
        if not all(proc.alive(d.pid, d.start_time) for d in state.daemons.values()):
            return False
        return len(node_states(state, bins[NODE_LIST])) == len(state.nodes)

    def _stop(self, state: LocalState) -> None:
        steps = proc.step_pids(f"{state.cluster_dir}:")
        records = [(d.pid, d.start_time) for d in state.daemons.values()]
        proc.terminate(records + [(pid, proc.start_time(pid) or 0) for pid in steps], self.grace_s)


# Up to this many nodes, slurmctld starts before the slurmd (module docstring, "Bring-up").
# Measured on 2 cores (bench_scale.py --up-only): at 300 nodes slurmctld first took 3.0 s and
# slurmd first 5.0 s (their registration retry waits a second, and slurmctld starts after);
# at 1,024 both took 14-16 s and 24-26 s of CPU, slurmctld first with 1.2 registrations per
# node; at 2,048 slurmd first saved a tenth of the CPU and 0.6-0.8 registrations per node.
SLURMCTLD_FIRST_UP_TO = 1024


def slurmctld_first(nodes: int) -> bool:
    return nodes <= SLURMCTLD_FIRST_UP_TO


def _conf_params(state: LocalState, spec: ClusterSpec) -> SlurmConfParams:
    host = socket.gethostname().split(".")[0]
    user = "root" if os.geteuid() == 0 else getpass.getuser()
    cdir, rt = Path(state.cluster_dir), Path(state.runtime_dir)
    spares = set(state.spares)
    # How nodes in service start out (module docstring, "Bring-up"): FUTURE where slurmctld
    # starts first, UNKNOWN where it starts last, so that its ping asks a slurmd that gave up
    # waiting for it (and backs off, up to 128 s: slurmd.c _registration_engine) to register.
    first = "FUTURE" if slurmctld_first(len(state.nodes)) else "UNKNOWN"
    return SlurmConfParams(
        cluster_name=state.name, controller_host=host, controller_addr="127.0.0.1",
        slurmctld_port=state.slurmctld_port, state_dir=str(cdir / "slurm-state"),
        spool_dir=str(rt / "spool"), log_dir=str(cdir / "log"), pid_dir=str(rt),
        slurm_user=user, slurmd_user=user, auth_socket=str(rt / "munge" / "munge.socket"),
        jobcomp_file=state.jobcomp_file, partition=PARTITION,
        slurmd_timeout=spec.section(LocalSettings).slurmd_timeout, multiple_slurmd=True,
        # Thousands of daemons on two cores answer slowly: a short timeout reads as lost nodes.
        message_timeout=5 if len(state.nodes) <= 256 else 30,
        topology_plugin="topology/tree",
        slurmd_parameters="config_overrides",
        # No NodeHostname (SlurmNode.hostname): slurmd is started with `-N name`, found at its port.
        nodes=[SlurmNode(name=n, addr="127.0.0.1", port=state.node_ports[n],
                         cpus=state.cpus_per_node, state="FUTURE" if n in spares else first)
               for n in _slots(state)])


__all__ = ["LocalProvider", "LocalState", "kill_node", "restart_node", "find_binaries", "node_states",
           "load_state", "save_state", "INSTALL_HINT", "RACK_SIZE", "RACKS_PER_SCALE_SET", "STATE_FILE", "spare_slots",
           "start_parallelism"]
