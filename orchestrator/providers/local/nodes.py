"""The local cluster's daemons, node by node: each emulated node's slurmd started (many at once,
up when its pid file holds its pid), waited idle, retired (DOWN, then FUTURE), killed and
restarted; Slurm's node states; the state.json of a running cluster.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Collection, Sequence
from pathlib import Path

from orchestrator import paths
from orchestrator.errors import ProvisionError
from orchestrator.models import Cluster
from orchestrator.providers.local import proc
from orchestrator.providers.local.cluster import PARTITION, STATE_FILE, Daemon, LocalState, load_state, save_state
from orchestrator.providers.local.props import LocalProps
from orchestrator.slurm.commands import CONTROL, NODE_LIST, down_argv, find_binaries, node_states_argv, retire_argv
from orchestrator.slurm.conf import compress_hostlist, natural_key


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


def _cluster_dir(cluster: Cluster) -> Path:
    """Where `up` put the cluster (its record's, else the default: a provisional record)."""
    return Path(cluster.properties_as(LocalProps).cluster_dir or paths.cluster_dir(cluster.name))


def _state_for(cluster: Cluster) -> LocalState:
    cdir = _cluster_dir(cluster)
    state = load_state(cdir)
    if state is None:
        raise ProvisionError(f"local cluster '{cluster.name}' is not running (no {cdir / STATE_FILE})")
    return state


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
