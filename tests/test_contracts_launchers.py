"""The Launcher contract (seams.Launcher), proven against both launchers.

slurm: SlurmLauncher over a LocalRunner on a real two-node local Slurm cluster of this module's
own (it drains a node, so it never touches the session's cluster). azureml: AzureMLLauncher over
testsupport/fake_azureml.FakeML, the stateful stand-in for azure-ai-ml's MLClient.

The contract: each launcher class has every member of the protocol with the protocol's
signature; a submitted job is found by name, polls to a terminal state, and cancelling it after
the end is harmless; its log comes back byte for byte (fetch_logs and tail). The optional parts
(seams.LauncherParts) run per component: each part's test is parametrized over the launchers that
have it (PARTS), every other part is None, and a caller that needs an absent part answers
MissingCapability (one line, naming the cluster: seams.lacks), never a silent empty answer or
exit 127; a running job's log is tailed exactly where the launcher has `live_logs`.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, cast

import pytest

from orchestrator.providers.azureml.launcher import AzureMLLauncher
from orchestrator.errors import MissingCapability
from orchestrator.models import (AttemptSpec, Cluster, ExecResult, FabricTestPlan, HealthCheckPlan, JobRef,
                                 JobState, JobStatus, StageRequest)
from orchestrator.paths import RunLayout, job_name
from orchestrator.seams import (Checkpoints, GateJobs, Launcher, LauncherParts, LiveLogs, NodeControl, Staging,
                                lacks)
from orchestrator.slurm.launcher import SlurmLauncher

LAUNCHERS = (SlurmLauncher, AzureMLLauncher)
# Each part's Protocol (seams.LauncherParts' fields).
PART_TYPES = {"gate": GateJobs, "nodes": NodeControl, "staging": Staging, "checkpoints": Checkpoints,
              "live_logs": LiveLogs}
# The parts each launcher has (by its backend); every other part is None. Azure ML places a
# job's nodes itself (no gate, step or drain on chosen nodes), mounts a job's data from the
# workspace's datastore (nothing to stage), resumes from its datastore itself, and streams a
# running job's log only whole (`follow`).
PARTS = {"slurm": tuple(PART_TYPES), "azureml": ()}
# Bytes a job writes to its log: multi-byte UTF-8 and a byte that is not UTF-8 at all.
PAYLOAD = "contract na\\303\\257ve \\342\\230\\203 \\377 end"
PAYLOAD_BYTES = "contract naïve ☃ ".encode() + b"\xff end"


# -- static: the classes have the protocol's shape -------------------------------------------

def _protocol_methods() -> dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in vars(Launcher).items()
            if callable(fn) and not name.startswith("_")}


def _shape(sig: inspect.Signature) -> list[tuple[str, Any, bool]]:
    return [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in sig.parameters.values()]


# Every protocol method, and the test that holds each launcher to it.
COVERED = {"submit": "submit_then_find", "find": "submit_then_find", "poll": "poll_reaches_a_terminal_state",
           "cancel": "cancel_of_a_*", "fetch_logs": "fetch_logs_*", "tail": "tail_of_*",
           "follow": "follow_of_a_finished_job_*", "node_states": "node_states_list_the_nodes",
           "parts": "the_parts_are_the_declared_ones_*", "close": "the fixture's teardown"}
# Every part's methods, and the test that holds each launcher with the part to them.
PART_COVERED = {"gate": "gate_jobs_run_on_chosen_nodes", "nodes": "node_control_*",
                "staging": "staging_runs_the_prepare_job", "checkpoints": "checkpoints_*",
                "live_logs": "live_logs_tail_a_running_job_exactly"}


def test_every_protocol_method_has_a_contract_test() -> None:
    assert set(_protocol_methods()) == set(COVERED)


def test_every_part_has_a_contract_test_and_its_protocol_is_what_runs_needs() -> None:
    assert set(PART_COVERED) == set(PART_TYPES) == {f.name for f in fields(LauncherParts) if f.name != "why_absent"}
    methods = {n for proto in PART_TYPES.values() for n in vars(proto) if not n.startswith("_")}
    assert {"run_health_check", "run_fabric_test", "run_on_nodes", "run_groups", "stage_file", "drain", "resume",
            "leaf_switches", "stage", "latest_checkpoint", "tail"} <= methods


def test_the_protocol_is_what_runs_needs() -> None:
    assert {"submit", "find", "poll", "cancel", "fetch_logs", "tail", "follow", "node_states", "parts"} <= \
        set(_protocol_methods())


@pytest.mark.parametrize("cls", LAUNCHERS, ids=lambda c: c.__name__)
def test_the_class_has_every_protocol_member_with_its_signature(cls: type) -> None:
    for name, sig in _protocol_methods().items():
        impl = getattr(cls, name, None)
        assert callable(impl), f"{cls.__name__} lacks {name}"
        assert _shape(inspect.signature(impl)) == _shape(sig), f"{cls.__name__}.{name} signature"
    backend = getattr(cls, "backend", None)
    assert isinstance(backend, str) and backend
    assert set(Launcher.__annotations__) == {"backend"}


# -- one harness per launcher ----------------------------------------------------------------

@dataclass
class LH:
    """A launcher on its cluster, and what the contract needs to drive and observe it."""

    backend: str
    launcher: Launcher
    cluster: Cluster
    recipe: Path
    run_dir: str
    start: Callable[[AttemptSpec, bool], JobRef]  # submit; True: the job keeps running
    wait: Callable[[JobRef, Callable[[JobStatus], bool]], JobStatus]
    log: Callable[[JobRef, int], bytes]  # the bytes the job's log holds on the cluster
    finish: Callable[[JobRef], None]  # let a running job end on its own
    payload: bytes  # PAYLOAD as the job's log holds it

    def attempt(self, k: int, command: str) -> AttemptSpec:
        return AttemptSpec(run_id=Path(self.run_dir).name, attempt=k, recipe="smoke", nodes=1,
                           run_dir=self.run_dir, command=command, time_limit_min=2)


def _poller(launcher: Launcher, *, pause: float, limit: float) -> Callable[..., JobStatus]:
    def wait(ref: JobRef, until: Callable[[JobStatus], bool]) -> JobStatus:
        deadline = time.monotonic() + limit
        status = launcher.poll([ref])[ref.job_id]
        while not until(status) and time.monotonic() < deadline:
            time.sleep(pause)
            status = launcher.poll([ref])[ref.job_id]
        return status
    return wait


def _slurm(tmp: Path, request: pytest.FixtureRequest) -> Iterator[LH]:
    from orchestrator.hosts.remote import LocalRunner
    from tests.fixtures.slurm import local_spec, private_cluster
    for cluster, _home in private_cluster(request.getfixturevalue("tmp_path_factory"),
                                          local_spec("ctr-launch", 2)):
        launcher = SlurmLauncher(LocalRunner(env=dict(cluster.env)), cluster)
        run_dir = f"{cluster.workdir}/runs/ctr-{os.getpid()}"
        attempts: dict[str, int] = {}

        def start(attempt: AttemptSpec, keep_running: bool) -> JobRef:
            if keep_running:  # until the test lets it end (or cancels it)
                attempt = attempt.model_copy(update={"command": attempt.command + (
                    f"; while [ ! -e {run_dir}/release-{attempt.attempt} ]; do sleep 0.1; done")})
            ref = launcher.submit(attempt, recipe_dir=tmp)
            attempts[ref.job_id] = attempt.attempt
            return ref

        def log(ref: JobRef, k: int) -> bytes:
            return Path(RunLayout(run_dir).attempt_dir(k), "train.log").read_bytes()

        def finish(ref: JobRef) -> None:
            Path(run_dir, f"release-{attempts[ref.job_id]}").touch()

        yield LH("slurm", launcher, cluster, tmp, run_dir, start,
                 _poller(launcher, pause=0.2, limit=60), log, finish, PAYLOAD_BYTES)
        launcher.close()


def _azureml(tmp: Path, request: pytest.FixtureRequest) -> Iterator[LH]:
    from types import SimpleNamespace

    from testsupport.fake_azureml import USER_LOG, FakeML
    ml = FakeML()
    ml.nodes = [SimpleNamespace(node_id="tvm-1", node_state="idle"),
                SimpleNamespace(node_id="tvm-2", node_state="running")]
    cluster = Cluster(name="ctr-aml", provider="azureml", sku="Standard_ND96isr_H100_v5", nodes=2,
                      region="eastus", workdir="/tmp/azbench", properties={"compute": "ctr-aml"})
    launcher = AzureMLLauncher(cluster, cast(Any, ml))  # the fake stands in for MLClient
    run_dir = f"/tmp/azbench/runs/ctr-{os.getpid()}"
    payload = PAYLOAD_BYTES.decode(errors="replace").encode()  # the fake keeps logs as text

    def start(attempt: AttemptSpec, keep_running: bool) -> JobRef:
        name = job_name(attempt.run_id, attempt.attempt)
        # What the job prints, as Azure ML keeps it: rank 0's user log (bytes as its text holds).
        ml.jobs.logs[name] = {USER_LOG: f"0: {payload.decode()}\n"}
        ml.jobs.scripts[name] = ["Queued", "Running"] if keep_running else ["Queued", "Running", "Completed"]
        return launcher.submit(attempt, recipe_dir=tmp)

    def log(ref: JobRef, k: int) -> bytes:
        return ml.jobs.logs[ref.job_id][USER_LOG].encode()

    def finish(ref: JobRef) -> None:
        ml.jobs.scripts[ref.job_id] = ["Finalizing", "Completed"]

    yield LH("azureml", launcher, cluster, tmp, run_dir, start,
             _poller(launcher, pause=0.0, limit=5), log, finish, payload)


def _param(name: str) -> Any:
    return pytest.param(name, marks=pytest.mark.integration) if name == "slurm" else name


def having(part: str, present: bool = True) -> pytest.MarkDecorator:
    """The test runs on the launchers that have `part` (or, `present` False, that lack it)."""
    return pytest.mark.parametrize("lh", [_param(n) for n in PARTS if (part in PARTS[n]) == present], indirect=True)


@pytest.fixture(scope="module", params=[_param("slurm"), "azureml"])
def lh(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LH]:
    recipe = tmp_path_factory.mktemp("ctr-recipe")
    (recipe / "train.py").write_text("print('staged')\n")
    yield from {"slurm": _slurm, "azureml": _azureml}[request.param](recipe, request)


@pytest.fixture(scope="module")
def done(lh: LH) -> tuple[JobRef, JobStatus]:
    """Attempt 1: a job that printed PAYLOAD and ended, with its last status."""
    ref = lh.start(lh.attempt(1, f"printf '{PAYLOAD}\\n'"), False)
    return ref, lh.wait(ref, lambda s: s.state.terminal)


# -- jobs ------------------------------------------------------------------------------------

def test_submit_then_find_returns_the_job(lh: LH, done: tuple[JobRef, JobStatus]) -> None:
    ref, _ = done
    assert ref.cluster == lh.cluster.name and ref.backend == lh.backend == lh.launcher.backend
    found = lh.launcher.find(job_name(Path(lh.run_dir).name, 1))
    assert found is not None and found.job_id == ref.job_id
    assert lh.launcher.find(job_name("ctr-nosuch-run", 1)) is None


def test_poll_reaches_a_terminal_state(lh: LH, done: tuple[JobRef, JobStatus]) -> None:
    ref, status = done
    assert status.state is JobState.COMPLETED, status
    assert status.exit_code == 0 and status.ref.job_id == ref.job_id
    again = lh.launcher.poll([ref])
    assert list(again) == [ref.job_id] and again[ref.job_id].state is JobState.COMPLETED


def test_poll_of_no_job_is_empty(lh: LH) -> None:
    assert lh.launcher.poll([]) == {}


def test_cancel_of_a_finished_job_is_harmless(lh: LH, done: tuple[JobRef, JobStatus]) -> None:
    ref, _ = done
    lh.launcher.cancel(ref)
    lh.launcher.cancel(ref)
    assert lh.launcher.poll([ref])[ref.job_id].state is JobState.COMPLETED


def test_cancel_of_a_running_job_ends_it(lh: LH) -> None:
    ref = lh.start(lh.attempt(3, "echo started"), True)
    running = lh.wait(ref, lambda s: s.state is JobState.RUNNING)
    assert running.state is JobState.RUNNING, running
    lh.launcher.cancel(ref)
    ended = lh.wait(ref, lambda s: s.state.terminal)
    assert ended.state is JobState.CANCELLED, ended
    lh.launcher.cancel(ref)  # idempotent


# -- logs ------------------------------------------------------------------------------------

def test_fetch_logs_returns_the_exact_bytes_of_the_log(lh: LH, done: tuple[JobRef, JobStatus], tmp_path: Path) -> None:
    ref, _ = done
    written = lh.launcher.fetch_logs(ref, tmp_path / "logs")
    train = tmp_path / "logs" / "attempt-1" / "train.log"
    assert train in written and all(p.is_relative_to(tmp_path / "logs") for p in written)
    assert train.read_bytes() == lh.log(ref, 1)
    assert b"0: " + lh.payload + b"\n" in train.read_bytes()


def test_tail_of_a_finished_job_is_exact_from_an_offset_and_from_the_end(lh: LH, done: tuple[JobRef, JobStatus]) -> None:
    ref, _ = done
    path = f"{RunLayout(lh.run_dir).attempt_dir(1)}/train.log"
    whole = lh.log(ref, 1)
    assert lh.launcher.tail(path) == whole
    assert lh.launcher.tail(path, offset=5) == whole[5:]
    assert lh.launcher.tail(path, nbytes=7) == whole[-7:]


def test_follow_of_a_finished_job_hands_over_every_byte_once(lh: LH, done: tuple[JobRef, JobStatus]) -> None:
    ref, _ = done
    path = f"{RunLayout(lh.run_dir).attempt_dir(1)}/train.log"
    got: list[bytes] = []
    reached = lh.launcher.follow(ref, path, got.append, stop=lambda: True, offset=3,
                                 sleep=lambda s: pytest.fail("a finished job's log needs no wait"))
    assert b"".join(got) == lh.log(ref, 1)[3:] and reached == len(lh.log(ref, 1))


@having("live_logs")
def test_live_logs_tail_a_running_job_exactly(lh: LH) -> None:
    live = lh.launcher.parts().live_logs
    assert live is not None
    ref = lh.start(lh.attempt(2, f"printf '{PAYLOAD}\\n'"), True)
    path = f"{RunLayout(lh.run_dir).attempt_dir(2)}/train.log"
    try:
        running = lh.wait(ref, lambda s: s.state is JobState.RUNNING)
        assert running.state is JobState.RUNNING, running
        deadline = time.monotonic() + 120  # returns as soon as the payload shows
        while lh.payload not in live.tail(path) and time.monotonic() < deadline:
            time.sleep(0.1)  # a real job writing its log
        now = live.tail(path)
        assert lh.payload in now and b"AZBENCH_ATTEMPT_STOP" not in now
        assert live.tail(path, offset=len(now)) == lh.log(ref, 2)[len(now):]
    finally:
        lh.finish(ref)
        assert lh.wait(ref, lambda s: s.state.terminal).state is JobState.COMPLETED


@having("live_logs", present=False)
def test_without_live_logs_a_running_jobs_tail_is_missing_capability(lh: LH) -> None:
    ref = lh.start(lh.attempt(2, f"printf '{PAYLOAD}\\n'"), True)
    path = f"{RunLayout(lh.run_dir).attempt_dir(2)}/train.log"
    try:
        running = lh.wait(ref, lambda s: s.state is JobState.RUNNING)
        assert running.state is JobState.RUNNING, running
        _assert_missing(lambda: lh.launcher.tail(path), lh)
    finally:
        lh.finish(ref)
        assert lh.wait(ref, lambda s: s.state.terminal).state is JobState.COMPLETED


# -- nodes and the rest of the protocol ------------------------------------------------------

def test_node_states_list_the_nodes(lh: LH) -> None:
    nodes = lh.launcher.node_states()
    expected = lh.cluster.node_names or ["tvm-1", "tvm-2"]
    assert sorted(nodes) == sorted(expected)
    assert all(info.name == name and info.state and info.usable for name, info in nodes.items())


def test_the_parts_are_the_declared_ones_and_every_other_part_is_none(lh: LH) -> None:
    own = lh.launcher.parts()
    assert isinstance(own, LauncherParts) and sorted(own.names()) == sorted(PARTS[lh.backend])
    for name, proto in PART_TYPES.items():
        part = getattr(own, name)
        if name not in PARTS[lh.backend]:
            assert part is None, name
            continue
        members = {n for n in vars(proto) if not n.startswith("_")}
        for member in members:  # the part has the protocol's methods with their signatures
            assert _shape(inspect.signature(getattr(part, member))) == \
                _shape(inspect.signature(getattr(proto, member)).replace(
                    parameters=list(inspect.signature(getattr(proto, member)).parameters.values())[1:])), member


_NEEDED = {"gate": "run the health gate on chosen nodes", "nodes": "drain nodes",
           "staging": "stage data on a shared file system"}


@pytest.mark.parametrize(("lh", "part"), [pytest.param(n, part, marks=_param(n).marks if n == "slurm" else ())
                                          for n in PARTS for part in _NEEDED if part not in PARTS[n]],
                         indirect=["lh"])
def test_an_absent_part_answers_one_line_with_the_launchers_reason(lh: LH, part: str) -> None:
    what = _NEEDED[part]
    error = lacks(lh.launcher, lh.cluster.name, what, part)
    assert "\n" not in str(error) and lh.cluster.name in str(error) and error.exit_code == 7
    assert error.hint, "the launcher says why it lacks the part"


@having("nodes")
def test_node_control_leaf_switches_cover_the_nodes_then_drain_and_resume(lh: LH, tmp_path: Path) -> None:
    control = lh.launcher.parts().nodes
    assert control is not None
    switches = control.leaf_switches()
    assert sorted(n for members in switches.values() for n in members) == sorted(lh.cluster.node_names)
    node = sorted(lh.launcher.node_states())[0]
    _check_works(lh, "drain", control.drain({node: "contract test"}), node, "")
    control.resume([node])
    _check_works(lh, "resume", None, node, "")


@having("checkpoints")
def test_checkpoints_the_latest_complete_step(lh: LH) -> None:
    checkpoints = lh.launcher.parts().checkpoints
    assert checkpoints is not None
    ckpt = Path(RunLayout(lh.run_dir).checkpoints)
    ckpt.mkdir(parents=True, exist_ok=True)
    for name in ("step-10.pt", "step-20.pt", "step-30.pt.tmp", ".step-40.pt"):
        (ckpt / name).write_text("x")
    assert checkpoints.latest_checkpoint(lh.run_dir) == 20


@having("staging")
def test_staging_runs_the_prepare_job(lh: LH) -> None:
    staging = lh.launcher.parts().staging
    assert staging is not None
    node = sorted(lh.launcher.node_states())[0]
    result = staging.stage(StageRequest(recipe="ctr", data_root=f"{lh.run_dir}/data"))
    _check_works(lh, "stage", result, node, "")


@having("gate")
def test_gate_jobs_run_on_chosen_nodes(lh: LH, tmp_path: Path) -> None:
    gate = lh.launcher.parts().gate
    assert gate is not None
    node = sorted(lh.launcher.node_states())[0]
    local = tmp_path / "staged.txt"
    local.write_bytes(b"staged \xff\n")
    remote = f"{lh.run_dir}/stage/staged.txt"
    calls: dict[str, Callable[[], Any]] = {
        "run_health_check": lambda: gate.run_health_check(_health_plan(lh, node)),
        "run_fabric_test": lambda: gate.run_fabric_test(_fabric_plan(lh, node)),
        "run_on_nodes": lambda: gate.run_on_nodes([node], ["echo", "step-ok"], timeout_s=60),
        "run_groups": lambda: gate.run_groups([[node]], ["echo", "group-ok"], gpus_per_node=0, timeout_s=60),
        "stage_file": lambda: gate.stage_file(local, remote),
    }
    assert set(calls) == {n for n in vars(GateJobs) if not n.startswith("_")}
    for method, call in calls.items():
        _check_works(lh, method, call(), node, remote)


def _check_works(lh: LH, method: str, result: Any, node: str, remote: str) -> None:
    if method == "run_health_check":
        assert isinstance(result, JobRef)
        assert lh.wait(result, lambda s: s.state.terminal).state is JobState.COMPLETED
        out = Path(_health_plan(lh, node).output(result.job_id)).read_text()
        assert f'"node": "{node}", "check": "disk"' in out and "AZBENCH_HEALTH_STOP" in out, out
    elif method == "run_fabric_test":  # one node, two gloo ranks: a real collective
        assert isinstance(result, JobRef)
        assert lh.wait(result, lambda s: s.state.terminal).state is JobState.COMPLETED
        out = Path(_fabric_plan(lh, node).output(result.job_id)).read_text()
        assert "# Collective test starting: all_reduce_perf" in out and "# Out of bounds values : 0 OK" in out, out
    elif method == "stage":  # nothing to stage: the job only says so
        assert isinstance(result, JobRef)
        assert lh.wait(result, lambda s: s.state.terminal).state is JobState.COMPLETED
        staged = Path(StageRequest(recipe="ctr", data_root=f"{lh.run_dir}/data").output(result.job_id))
        assert staged.read_text().endswith(f"staged ctr under {lh.run_dir}/data\n")
    elif method == "run_on_nodes":
        assert isinstance(result, ExecResult) and result.exit_code == 0, result
        assert "step-ok" in result.stdout
    elif method == "run_groups":
        assert len(result) == 1 and "group-ok" in result[0], result
    elif method == "stage_file":
        assert Path(remote).read_bytes() == b"staged \xff\n"
    elif method == "drain":
        assert result == [node]
        assert lh.launcher.node_states()[node].state.startswith("drain")
    elif method == "resume":
        assert lh.launcher.node_states()[node].state == "idle"  # no longer drained
        deadline = time.monotonic() + 90  # an event, not a speed: returns as soon as it is usable
        while not lh.launcher.node_states()[node].usable and time.monotonic() < deadline:
            time.sleep(0.2)  # Slurm counts a resumed node as not responding until its next ping
        assert lh.launcher.node_states()[node].usable


def _health_plan(lh: LH, node: str) -> HealthCheckPlan:
    """The gate on one CPU node, quick: a small all-reduce (a single rank), a short limit."""
    layout = RunLayout(lh.run_dir)
    return HealthCheckPlan(run_id=layout.run_id, attempt=9, nodes=(node,), out_dir=layout.health_dir(9),
                           script=layout.health_script, check_dir=lh.run_dir, python=sys.executable,
                           gpus_per_node=0, ib_ports=0, expected_busbw=0, warn_frac=0.8, fail_frac=0.5,
                           size_mb=0.1, collective_timeout=30, time_limit_min=2)


def _fabric_plan(lh: LH, node: str) -> FabricTestPlan:
    """The fabric test on one CPU node: all_reduce at two small sizes, two gloo ranks."""
    return FabricTestPlan(test_id="contract", nodes=1, nodelist=(node,), out_dir=f"{lh.run_dir}/fabric",
                          tasks_per_node=2, gpus_per_node=0, collectives=("all_reduce",), min_size="1K",
                          max_size="4K", step_factor=4, iters=2, warmup=1, time_limit_min=2,
                          python=sys.executable, script=f"{lh.run_dir}/fabric/fabric_collectives.py")


def _assert_missing(call: Callable[[], Any], lh: LH) -> None:
    with pytest.raises(MissingCapability) as info:
        call()
    text = str(info.value)
    assert "\n" not in text and lh.cluster.name in text and info.value.exit_code == 7
