"""The local provider: a real multi-node Slurm cluster emulated on this machine.

`up` starts the cluster's own munged, one slurmctld and one slurmd per emulated node, waits
until Slurm lists every node idle, and records the pids it started (with their start times) in
state.json; `down` stops exactly those and keeps the logs. Replacement and resize start the
slurmd of spare slots that slurm.conf defines in state FUTURE. Why FUTURE slots rather than
dynamic nodes, and the start order that keeps slurmctld to one registration per node:
docs/local-provider.md.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Collection, Sequence

from orchestrator import paths
from orchestrator.providers.base import ProviderBase
from orchestrator.providers.local.cluster import (
    PARTITION,
    SKU,
    STATE_FILE,
    Daemon,
    LocalState,
    load_state,
    save_state,
    to_cluster,
)
from orchestrator.providers.local import links as netlinks
from orchestrator.providers.local import proc
from orchestrator.hosts.remote import LocalRunner
from orchestrator.errors import CapacityError, ConfigError, ProvisionError
from orchestrator.models import Cluster, ClusterState, Plan, PlannedResource, ScaleSetPlan
from orchestrator.providers.local.props import LocalProps
from orchestrator.seams import Access, Capabilities
from orchestrator.slurm.commands import (CLIENTS, CONTROL, DAEMONS, INSTALL_HINT, NODE_LIST, find_binaries,
                                         down_argv, first_node_command, node_states_argv, retire_argv)
from orchestrator.slurm.launcher import SlurmLauncher
from orchestrator.slurm.conf import (SlurmConfParams, SlurmNode, compress_hostlist, natural_key,
                                     render_slurm_conf, tree_topology)
from orchestrator.providers.local.settings import LocalSettings
from orchestrator.specs.cluster import ClusterSpec

RACK_SIZE = 18  # ND-series VMs per rack (leaf switch), as the Azure provider assumes
RACKS_PER_SCALE_SET = 5  # 90 VMs: a scale set of at most 100, in whole racks


def spare_slots(nodes: int) -> int:
    """FUTURE node slots in slurm.conf beyond the nodes `up` starts: room for replacements and
    growth without restarting Slurm (one folded NodeName line; no daemon until used)."""
    return max(8, nodes // 4)
# A Unix socket path may hold 107 bytes; slurmd puts step sockets deep inside its spool dir.
_MAX_RUNTIME_PREFIX = 56


class LocalProvider(ProviderBase):
    """Provider for `--provider local`; see the module docstring."""

    name = "local"
    caps = Capabilities(shell=True, head_here=True, emulated_nodes=True,
                        restores_capacity=True, replaces_nodes=True, resizes=True) | SlurmLauncher.caps

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
        return Access(launcher=SlurmLauncher(runner, cluster), shell=runner, caps=self.caps,
                      python=python, closers=[runner.close], notes=_link_notes(links))

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


def kill_node(cluster: Cluster, node: str) -> None:
    """Simulate a node crash: SIGKILL its slurmd, its job steps and their tasks."""
    state = _state_for(cluster)
    daemon = state.daemons.get(f"slurmd:{node}")
    if daemon is None:
        raise ProvisionError(f"local cluster '{cluster.name}' has no node {node}")
    victims = [(daemon.pid, daemon.start_time)]
    victims += [(pid, proc.start_time(pid) or 0)
                for pid in proc.step_pids(f"{state.cluster_dir}:{node}", exact=True)]
    proc.terminate(victims, grace_s=0.0)


def _await_eviction(state: LocalState, nodes: Collection[str], wait_s: float) -> None:
    """Until the nodes' slurmd is dead (the emulated eviction has landed), at most `wait_s`."""
    daemons = [d for d in (state.daemons.get(f"slurmd:{n}") for n in nodes) if d is not None]
    try:
        proc.wait_for(lambda: not any(proc.alive(d.pid, d.start_time) for d in daemons),
                      wait_s, 0.1, lambda: None, "eviction")
    except TimeoutError:
        pass  # not evicted after all: the nodes are restored (resumed) as they are


def restart_node(cluster: Cluster, node: str, *, timeout_s: float = 60.0) -> None:
    """Start a killed node's slurmd again and wait until Slurm shows it idle."""
    state = _state_for(cluster)
    key = f"slurmd:{node}"
    if key not in state.daemons:
        raise ProvisionError(f"local cluster '{cluster.name}' has no node {node}")
    bins = find_binaries()
    daemon = state.daemons[key]
    if not proc.alive(daemon.pid, daemon.start_time):
        cdir = Path(state.cluster_dir)
        state.daemons[key] = _spawn(cdir, f"slurmd-{node}",
                                    {**_daemon_env(state), proc.NODE_MARKER: f"{cdir}:{node}"},
                                    daemon.argv)
        save_state(state)
    try:
        proc.wait_for(lambda: node_states(state, bins[NODE_LIST]).get(node) == "idle",
                      timeout_s, 0.2, lambda: _check_alive(state, key), f"{node} idle")
    except TimeoutError:
        raise ProvisionError(f"node {node} of '{cluster.name}' did not return to idle within "
                             f"{timeout_s:g} s") from None


def node_names(count: int, first: int = 1) -> list[str]:
    return [f"node{i}" for i in range(first, first + count)]


# Up to this many nodes, slurmctld starts before the slurmd (module docstring, "Bring-up").
# Measured on 2 cores (bench_scale.py --up-only): at 300 nodes slurmctld first took 3.0 s and
# slurmd first 5.0 s (their registration retry waits a second, and slurmctld starts after);
# at 1,024 both took 14-16 s and 24-26 s of CPU, slurmctld first with 1.2 registrations per
# node; at 2,048 slurmd first saved a tenth of the CPU and 0.6-0.8 registrations per node.
SLURMCTLD_FIRST_UP_TO = 1024


def slurmctld_first(nodes: int) -> bool:
    return nodes <= SLURMCTLD_FIRST_UP_TO


def start_parallelism() -> int:
    """How many slurmd may be starting at once: 16 per core. Each start is CPU-bound (it builds
    the whole node table), so a few per core keep an idle machine busy; but each slurmd is a
    session of its own, and so its own CPU scheduling group (sched(7), autogroup): on a machine
    others keep busy, 4 at a time got a small share and took 111 s for 2,048 nodes where
    starting all at once took 66 s. The bound still keeps thousands from forking at once."""
    return 16 * (os.cpu_count() or 1)


def _start_nodes(state: LocalState, nodes: Sequence[str], slurmd: str | None = None, *,
                 timeout_s: float = 60.0, parallel: int | None = None) -> None:
    """Start each node's slurmd (its spool dir made first), at most `parallel` (default
    `start_parallelism()`) still starting at a time, and return once every one is up, recorded
    in the state as it goes. Up = its pid file holds its pid: slurmd writes the file right after
    it opens its listening socket (slurmd.c main(), `_create_msg_socket()` then
    `create_pidfile()`, slurm-22-05-8-1), waited for as a file event (proc.DirWatch). Local
    files only: no scheduler round trip."""
    cdir, env, rt = Path(state.cluster_dir), _daemon_env(state), Path(state.runtime_dir)
    binary = slurmd or find_binaries()["slurmd"]
    limit = max(1, parallel or start_parallelism())
    todo, starting = list(nodes), dict[str, int]()
    deadline = time.monotonic() + timeout_s
    next_check = time.monotonic() + 0.5
    watch = proc.DirWatch(rt)  # the pid files' directory (_slurmd_pidfile)
    changed: set[str] | None = None  # pid file names an event named; None: look at every one
    by_pidfile: dict[str, str] = {}  # pid file name -> node
    try:
        while todo or starting:
            while todo and len(starting) < limit:
                node = todo.pop(0)
                (rt / "spool" / node).mkdir(parents=True, exist_ok=True, mode=0o700)
                _slurmd_pidfile(state, node).unlink(missing_ok=True)  # a killed slurmd's leftover
                daemon = state.daemons[f"slurmd:{node}"] = _spawn(
                    cdir, f"slurmd-{node}", {**env, proc.NODE_MARKER: f"{cdir}:{node}"},
                    [binary, "-D", "-N", node, "-f", state.conf])
                starting[node] = daemon.pid
                by_pidfile[_slurmd_pidfile(state, node).name] = node
            look = list(starting) if changed is None else \
                [n for n in map(by_pidfile.get, changed) if n is not None and n in starting]
            for node in look:
                if proc.pidfile_names(_slurmd_pidfile(state, node), starting[node]):
                    del starting[node]
            changed = set()
            if not starting or (todo and len(starting) < limit):
                continue
            now = time.monotonic()
            if now >= next_check:  # a slurmd that died starting never writes its pid file
                for node in starting:
                    _check_alive(state, f"slurmd:{node}")
                next_check, changed = now + 0.5, None  # and look at every pid file again
            if now > deadline:
                raise ProvisionError(f"slurmd of {compress_hostlist(sorted(starting, key=natural_key))} "
                                     f"('{state.name}') did not start within {timeout_s:g} s")
            named = watch.wait(0.5)
            changed = None if named is None or changed is None else changed | named
    finally:
        watch.close()
        save_state(state)


def _slurmd_pidfile(state: LocalState, node: str) -> Path:
    """SlurmdPidFile of `node` (slurm.conf: `<pid_dir>/slurmd-%n.pid`, pid_dir = runtime dir)."""
    return Path(state.runtime_dir) / f"slurmd-{node}.pid"


def _retire(state: LocalState, nodes: Sequence[str], bins: dict[str, str]) -> None:
    """Kill the nodes' slurmd and steps, then hide them in Slurm (state FUTURE)."""
    victims = []
    for node in nodes:
        daemon = state.daemons.pop(f"slurmd:{node}", None)
        if daemon is not None:
            victims.append((daemon.pid, daemon.start_time))
        victims += [(pid, proc.start_time(pid) or 0)
                    for pid in proc.step_pids(f"{state.cluster_dir}:{node}", exact=True)]
    proc.terminate(victims, grace_s=0.0)
    env = {**os.environ, "SLURM_CONF": state.conf}

    def control(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)

    # Slurm refuses FUTURE for a node that still holds a job: DOWN first (which ends the job
    # there, as losing the VM would), then FUTURE once the job has left it.
    control(down_argv(list(nodes), "azbench: retired", bins[CONTROL]))
    out = None
    for _ in range(50):
        out = control(retire_argv(list(nodes), bins[CONTROL]))
        if out.returncode == 0:
            return
        time.sleep(0.2)
    why = out.stderr.strip()[-300:] if out is not None else ""
    raise ProvisionError(f"could not retire {', '.join(nodes)} in Slurm: {why}")


def _wait_idle(state: LocalState, nodes: Sequence[str], bins: dict[str, str], timeout_s: float) -> None:
    def check() -> None:
        for node in nodes:
            _check_alive(state, f"slurmd:{node}")

    def listing() -> dict[str, str]:
        return node_states(state, bins[NODE_LIST])

    try:
        proc.wait_for(lambda: all(listing().get(n) == "idle" for n in nodes),
                      timeout_s, 0.2, check, "idle nodes", max_poll_s=2.0)
    except TimeoutError:
        raise ProvisionError(f"{', '.join(nodes)} of '{state.name}' did not become idle within "
                             f"{timeout_s:g} s") from None


def node_states(state: LocalState, binary: str = NODE_LIST) -> dict[str, str]:
    """{node: Slurm state} ('idle', 'down*', ...); empty when slurmctld does not answer."""
    try:
        out = subprocess.run(node_states_argv(binary, PARTITION),
                             capture_output=True, text=True, timeout=10,
                             env={**os.environ, "SLURM_CONF": state.conf})
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0:
        return {}
    pairs = (line.split() for line in out.stdout.splitlines())
    return {p[0]: p[1] for p in pairs if len(p) == 2}


def _build_links(state: LocalState, faults: dict[str, netlinks.LinkFault], bins: dict[str, str]) -> None:
    """Each node (spare slots too, so a replacement has one) its own link; the cluster's python
    enters it (providers/local/links.py). Where links cannot be built, the notes say so."""
    tag = hashlib.sha256(state.cluster_dir.encode()).hexdigest()[:6]
    state.links = netlinks.build(tag, [*state.nodes, *state.spares], faults)
    if not state.links.built and faults:
        state.links.notes.append(f"{netlinks.FAULTS_VAR} asked for "
                                 + ", ".join(f"{n}={f.text()}" for n, f in faults.items())
                                 + ": those links could not be shaped")
    if state.links.built:
        netlinks.write_python(Path(state.cluster_dir) / "bin" / "python", sys.executable, state.links,
                              first_node_command(bins.get(CONTROL, CONTROL)))
    save_state(state)


def _link_notes(links: netlinks.Links) -> list[str]:
    """What a view says about the nodes' links: their own (with faults), or why none were built."""
    if links.built:
        return [f"each node has its own link (veth on a bridge, namespaces {links.prefix}-*)"] + links.notes
    return list(links.notes) or ["nodes share this machine's loopback: no node has a link of its own "
                                 f"(set {netlinks.LINKS_VAR}=1 or {netlinks.FAULTS_VAR} at up, as root)"]


def _cluster_dir(cluster: Cluster) -> Path:
    """Where `up` put the cluster (its record's, else the default: a provisional record)."""
    return Path(cluster.properties_as(LocalProps).cluster_dir or paths.cluster_dir(cluster.name))


def _state_for(cluster: Cluster) -> LocalState:
    cdir = _cluster_dir(cluster)
    state = load_state(cdir)
    if state is None:
        raise ProvisionError(f"local cluster '{cluster.name}' is not running (no {cdir / STATE_FILE})")
    return state


def _layout(spec: ClusterSpec, cdir: Path) -> LocalState:
    cdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    runtime = cdir / "run"
    if len(str(runtime)) > _MAX_RUNTIME_PREFIX:
        digest = hashlib.sha256(str(cdir).encode()).hexdigest()[:12]
        runtime = Path("/tmp", f"azbench-{os.getuid()}-{digest}")
    nodes = node_names(spec.nodes)
    spares = node_names(spare_slots(spec.nodes), first=spec.nodes + 1)
    for sub in [runtime / "munge", *(runtime / "spool" / n for n in nodes)]:
        sub.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name in ("log", "slurm-state", "shared"):
        (cdir / name).mkdir(exist_ok=True)
    # One block of consecutive ports, so slurm.conf holds one NodeName line (see slurm/conf.py).
    ports = proc.free_ports(1) + proc.free_port_block(len(nodes) + len(spares))
    return LocalState(
        name=spec.name, cluster_dir=str(cdir), runtime_dir=str(runtime),
        conf=str(cdir / "slurm.conf"), workdir=str(cdir / "shared"),
        jobcomp_file=str(cdir / "log" / "jobcomp.txt"), nodes=nodes, spares=spares,
        cpus_per_node=spec.section(LocalSettings).cpus_per_node, slurmctld_port=ports[0],
        node_ports=dict(zip(nodes + spares, ports[1:])))


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


def _topology_text(state: LocalState) -> str:
    """topology.conf as the Azure provider would model it: 18-node racks in scale sets."""
    return ("# Slurm topology of local cluster \"" + state.name + "\": a leaf switch per 18 nodes "
            "(a rack), a switch per 5 racks (a scale set), a top switch.\n"
            + "\n".join(tree_topology(_slots(state), RACK_SIZE, RACKS_PER_SCALE_SET)) + "\n")


def _slots(state: LocalState) -> list[str]:
    """Every node slot slurm.conf defines: in service, retired and spare, in name order."""
    return sorted({*state.nodes, *state.retired, *state.spares}, key=natural_key)


def _daemon_env(state: LocalState) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": state.conf, proc.CLUSTER_MARKER: state.cluster_dir}


def _spawn(cdir: Path, name: str, env: dict[str, str], argv: list[str]) -> Daemon:
    log = cdir / "log" / f"{name}.out"
    pid, started = proc.spawn(argv, log, env, cwd=cdir)
    return Daemon(pid=pid, start_time=started, argv=argv, log=str(log))


def _check_alive(state: LocalState, key: str) -> None:
    daemon = state.daemons[key]
    if not proc.alive(daemon.pid, daemon.start_time):
        raise ProvisionError(f"{key} of local cluster '{state.name}' exited during start-up; "
                             f"last lines of {daemon.log}:\n{proc.tail(Path(daemon.log))}")


def _write_munge_key(path: Path) -> None:
    if path.exists():
        return
    # 128 random bytes (what `mungekey` makes by default), created 0600 before any byte is written.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(os.urandom(128))


__all__ = ["LocalProvider", "LocalState", "kill_node", "restart_node", "find_binaries", "node_states",
           "load_state", "save_state", "INSTALL_HINT"]
