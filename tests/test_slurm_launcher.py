"""SlurmLauncher and its sbatch template: golden scripts, the state table, batched polling,
cancel idempotence, safe log fetching. Runs against testsupport.fake_runner.FakeRunner (no Slurm needed);
the rendered script is also executed for real with stub srun/scontrol on PATH.

Regenerate the golden files after an intended template change with AZBENCH_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError, LaunchError, RemoteError
from orchestrator.models import AttemptSpec, Cluster, ExecResult, JobRef, JobState
from orchestrator.slurm.launcher import SlurmLauncher
from orchestrator.slurm.batch import parse_sbatch_id, render_sbatch
from orchestrator.slurm.states import (
    SLURM_STATES,
    expand_hostlist,
    map_state,
    parse_elapsed,
    parse_exit_code,
)
from testsupport.fake_runner import FakeRunner
from testsupport.golden import check_golden

GOLDEN = Path(__file__).parent / "golden"
NASTY = {
    "SUBST": "$(touch /tmp/azbench-pwned) `id`",
    "QUOTES": "it's \"quoted\" \\ back",
    "SEMI": "a; echo pwned; b && c | d",
    "NEWLINE": "line1\nline2",
    "GLOB": "* ? [x]",
    "EMPTY": "",
    "UNICODE": "naïve ☃",
}


def plain_attempt(**over) -> AttemptSpec:
    base = dict(run_id="smoke-001", attempt=1, recipe="smoke", nodes=1,
                run_dir="/shared/runs/smoke-001", command="python train.py --steps 10")
    return AttemptSpec(**(base | over))


def big_attempt(**over) -> AttemptSpec:
    base = dict(run_id="llama-042", attempt=3, recipe="llama2_70b_lora", nodes=4, tasks_per_node=8,
                gpus_per_node=8, run_dir="/shared/runs/llama-042", time_limit_min=125,
                command="./run_and_time.sh --config 'config_DGXH100_4x8.sh'",
                exclude=["node7", "node9"], resume=True, env=NASTY)
    return AttemptSpec(**(base | over))


def cluster(**over) -> Cluster:
    return Cluster(**({"name": "c1", "provider": "local", "sku": "cpu", "nodes": 4} | over))


# -- the batch script ------------------------------------------------------------------------

def test_golden_plain_one_node():
    check_golden(GOLDEN / "sbatch_1node.sh", render_sbatch(plain_attempt()))


def test_golden_four_nodes_exclude_resume_nasty_env():
    check_golden(GOLDEN / "sbatch_4node_resume.sh", render_sbatch(big_attempt(), partition="gpu"))


def test_script_directives():
    script = render_sbatch(big_attempt(), partition="gpu")
    for line in ["#SBATCH --job-name=azbench-llama-042-a3", "#SBATCH --nodes=4",
                 "#SBATCH --ntasks-per-node=8", "#SBATCH --time=02:05:00", "#SBATCH --no-requeue",
                 "#SBATCH --output=/shared/runs/llama-042/attempt-3/slurm-%j.out",
                 "#SBATCH --partition=gpu", "#SBATCH --exclude=node7,node9", "#SBATCH --gpus-per-node=8"]:
        assert line in script.splitlines()
    plain = render_sbatch(plain_attempt())
    assert "--partition" not in plain and "--exclude" not in plain and "--gpus-per-node" not in plain
    assert "--resume" not in plain and "--resume" in script


@pytest.mark.parametrize("attempt", [plain_attempt(), big_attempt()])
def test_script_is_valid_bash(attempt, tmp_path):
    path = tmp_path / "job.sbatch"
    path.write_text(render_sbatch(attempt))
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("over", [
    {"run_id": "a b"}, {"run_id": "x;rm"}, {"run_dir": "relative/dir"}, {"run_dir": "/a b"},
    {"run_dir": "/runs/%j"}, {"exclude": ["node1 --uid=0"]}, {"env": {"BAD-NAME": "x"}},
    {"env": {"X;Y": "1"}}, {"nodes": 0}, {"time_limit_min": 0},
])
def test_render_refuses_unsafe_values(over):
    with pytest.raises(ConfigError):
        render_sbatch(plain_attempt(**over))


def _cksum(text: str) -> int:
    out = subprocess.run(["cksum"], input=text, capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def _stub_bin(tmp_path: Path) -> Path:
    """srun and scontrol stand-ins: srun runs its command as rank 0 with -l style prefixes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(
        "#!/bin/bash\nif [[ $1 == -o ]]; then echo \"NodeName=$4 Arch=x86_64 NodeAddr=10.9.0.3 "
        "NodeHostName=$4\"; else printf 'node3\\nnode4\\n'; fi\n")
    (bin_dir / "srun").write_text(
        "#!/bin/bash\nwhile [[ $# -gt 0 && $1 == -* ]]; do shift; done\n"
        "SLURM_PROCID=0 \"$@\" 2>&1 | sed 's/^/0: /'\nexit ${PIPESTATUS[0]}\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


def _execute(tmp_path: Path, attempt: AttemptSpec) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "job.sbatch"
    script.write_text(render_sbatch(attempt))
    (Path(attempt.run_dir) / f"attempt-{attempt.attempt}").mkdir(parents=True)
    env = {"PATH": f"{_stub_bin(tmp_path)}:{os.environ['PATH']}", "SLURM_JOB_ID": "123457",
           "SLURM_JOB_NODELIST": "node[3-4]", "SLURM_JOB_NUM_NODES": "2", "HOME": str(tmp_path)}
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)


def test_script_runs_with_exact_env_and_tees_mllog(tmp_path):
    run_dir = tmp_path / "run"
    attempt = big_attempt(run_dir=str(run_dir), command='env -0 > "$AZBENCH_ATTEMPT_DIR/env.bin"; echo ":::MLLOG {}"')
    result = _execute(tmp_path, attempt)
    assert result.returncode == 0, result.stderr
    pairs = (run_dir / "attempt-3" / "env.bin").read_bytes().decode().split("\0")
    seen = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
    for key, value in NASTY.items():
        assert seen[key] == value
    assert seen["MASTER_ADDR"] == "10.9.0.3" and seen["MASTER_PORT"] == str(20000 + (123457 + _cksum("")) % 10000)
    assert seen["AZBENCH_CHECKPOINT_DIR"] == f"{run_dir}/checkpoints" and seen["AZBENCH_ATTEMPT"] == "3"
    log = (run_dir / "attempt-3" / "train.log").read_text()
    assert '0: :::MLLOG {} --resume' in log.splitlines()
    assert log.startswith(":::DLPAL azbench 123457 2 node[3-4]") and "rc=0" in log
    assert (run_dir / "checkpoints").is_dir() and not Path("/tmp/azbench-pwned").exists()


def test_script_exit_code_is_the_commands(tmp_path):
    result = _execute(tmp_path, plain_attempt(run_dir=str(tmp_path / "r"), command="echo hi; exit 3"))
    assert result.returncode == 3
    assert "rc=3" in (tmp_path / "r" / "attempt-1" / "train.log").read_text()


# -- the state table and field parsers --------------------------------------------------------

@pytest.mark.parametrize("native,state", sorted(SLURM_STATES.items()))
def test_every_state_row(native, state):
    assert map_state(native) is state


@pytest.mark.parametrize("native,state", [
    ("CANCELLED by 0", JobState.CANCELLED), ("CANCELLED+", JobState.CANCELLED),
    ("running", JobState.RUNNING), ("DEADLINE", JobState.TIMEOUT), ("CONFIGURING", JobState.PENDING),
    ("REQUEUED", JobState.PENDING), ("SOMETHING_NEW", JobState.UNKNOWN), ("", JobState.UNKNOWN),
])
def test_state_variants(native, state):
    assert map_state(native) is state


def test_table_reaches_every_job_state():
    assert set(SLURM_STATES.values()) == set(JobState) - {JobState.UNKNOWN}


@pytest.mark.parametrize("field,code", [("0:0", 0), ("1:0", 1), ("0:9", 137), ("2:15", 143), ("", None), ("x", None),
                                        ("0", 0), ("768", 3), ("15", 143), ("9", 137)])
def test_exit_codes(field, code):
    assert parse_exit_code(field) == code


@pytest.mark.parametrize("field,seconds", [("00:00:05", 5), ("01:02:03", 3723), ("1-00:00:01", 86401),
                                           ("05:06", 306), ("00:01.500", 1.5), ("INVALID", None), ("", None)])
def test_elapsed(field, seconds):
    assert parse_elapsed(field) == seconds


@pytest.mark.parametrize("field,hosts", [
    ("node[1-3,7]", ["node1", "node2", "node3", "node7"]), ("gpu-[08-10],login", ["gpu-08", "gpu-09", "gpu-10", "login"]),
    ("None assigned", []), ("", []), ("node1", ["node1"]), ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
])
def test_hostlists(field, hosts):
    assert expand_hostlist(field) == hosts


@pytest.mark.parametrize("stdout,job_id", [("123\n", "123"), ("456;cluster\n", "456"), ("warn\n789\n", "789")])
def test_sbatch_id(stdout, job_id):
    assert parse_sbatch_id(stdout) == job_id


@pytest.mark.parametrize("stdout", ["", "\n", "Submitted batch job\n", "12a;x"])
def test_sbatch_id_garbage(stdout):
    with pytest.raises(LaunchError):
        parse_sbatch_id(stdout)


# -- submit ----------------------------------------------------------------------------------

def test_submit_stages_writes_and_submits(tmp_path):
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "train.py").write_text("print('hi')\n")
    fake = FakeRunner()
    fake.on("mkdir -p")
    fake.on("sbatch --parsable", stdout="4242;c1\n")
    launcher = SlurmLauncher(fake, cluster(env={"SLURM_CONF": "/x/slurm.conf"}, partition="debug"))
    ref = launcher.submit(plain_attempt(), recipe_dir=recipe)
    assert ref == JobRef(cluster="c1", job_id="4242", backend="slurm", run_dir="/shared/runs/smoke-001")
    assert [c.kind for c in fake.calls] == ["run", "put", "put", "run"]
    assert fake.files["/shared/runs/smoke-001/recipe/train.py"] == b"print('hi')\n"
    script = fake.files["/shared/runs/smoke-001/attempt-1/job.sbatch"].decode()
    assert script == render_sbatch(plain_attempt(), partition="debug")
    assert fake.commands[-1] == ("export SLURM_CONF=/x/slurm.conf; "
                                 "sbatch --parsable /shared/runs/smoke-001/attempt-1/job.sbatch")


def test_submit_skips_a_recipe_already_staged(tmp_path):
    fake = FakeRunner()
    fake.on("mkdir -p", stdout="staged\n")
    fake.on("sbatch", stdout="7\n")
    ref = SlurmLauncher(fake, cluster(workdir="/home/u/azbench")).submit(
        plain_attempt(run_dir="runs/r1", attempt=2), recipe_dir=tmp_path)
    assert ref.run_dir == "/home/u/azbench/runs/r1"
    assert [c.remote for c in fake.calls if c.kind == "put"] == ["/home/u/azbench/runs/r1/attempt-2/job.sbatch"]


def test_submit_failure_is_one_line_launch_error():
    fake = FakeRunner()
    fake.on("mkdir -p")
    fake.on("sbatch", exit_code=1,
            stderr="sbatch: error: Batch job submission failed: Requested node configuration is not available\n")
    with pytest.raises(LaunchError) as info:
        SlurmLauncher(fake, cluster()).submit(plain_attempt())
    assert "Requested node configuration is not available" in str(info.value)
    assert "\n" not in str(info.value)


def test_submit_unreachable_host_raises_remote_error():
    fake = FakeRunner()
    fake.fail_next(1)
    with pytest.raises(RemoteError):
        SlurmLauncher(fake, cluster()).submit(plain_attempt())
    assert fake.count("sbatch") == 0


# -- poll ------------------------------------------------------------------------------------

def refs(*ids: str) -> list[JobRef]:
    return [JobRef(cluster="c1", job_id=i, run_dir=f"/r/{i}") for i in ids]


SACCT_FOUR = """\
11|COMPLETED|0:0|node[1-2]|00:01:05|None
12|FAILED|1:0|node3|00:00:07|NonZeroExitCode
13|CANCELLED by 0|0:9|node4|00:00:03|None
14|PENDING|0:0|None assigned|00:00:00|Resources
"""


def test_poll_is_one_sacct_call_for_four_jobs():
    fake = FakeRunner(strict=True)
    fake.on("sacct ", stdout=SACCT_FOUR)
    launcher = SlurmLauncher(fake, cluster())
    got = launcher.poll(refs("11", "12", "13", "14"))
    assert launcher.sacct_calls == 1 and len(fake.calls) == 1 and launcher.squeue_calls == 0
    assert "-j 11,12,13,14 " in fake.commands[0] and "--parsable2 --noheader -X" in fake.commands[0]
    assert {k: v.state for k, v in got.items()} == {"11": JobState.COMPLETED, "12": JobState.FAILED,
                                                     "13": JobState.CANCELLED, "14": JobState.PENDING}
    assert got["11"].nodes == ["node1", "node2"] and got["11"].elapsed_s == 65 and got["11"].exit_code == 0
    assert got["12"].exit_code == 1 and got["13"].exit_code == 137 and got["14"].reason == "Resources"
    assert got["13"].native_state == "CANCELLED by 0" and got["14"].nodes == []


def test_poll_falls_back_to_one_squeue_call_for_missing_ids():
    fake = FakeRunner(strict=True)
    fake.on("sacct ", stdout="21|RUNNING|0:0|node1|00:00:09|None\n22|COMPLETED|0:0|node2|00:00:01|None\n")
    fake.on("squeue ", stdout="23|PENDING|0|(null)|0:00|BeginTime|\n")
    launcher = SlurmLauncher(fake, cluster())
    got = launcher.poll(refs("21", "22", "23", "24"))
    assert launcher.sacct_calls == 1 and launcher.squeue_calls == 1
    assert "-j 23,24 " in fake.commands[1] and "--states=all" in fake.commands[1]
    assert got["23"].nodes == [] and got["23"].exit_code is None  # Slurm's "0" before the end
    assert got["23"].state is JobState.PENDING and got["23"].reason == "BeginTime"
    assert got["24"].state is JobState.UNKNOWN and got["21"].state is JobState.RUNNING


def test_poll_without_accounting_uses_squeue_for_all():
    fake = FakeRunner()
    fake.on("sacct ", exit_code=1, stderr="sacct: error: Slurm accounting storage is disabled\n")
    # Real squeue -O output from slurm 22.05 (no accounting): raw wait status, M:SS time used.
    fake.on("squeue ", stdout="31|COMPLETED|0|node[1-2]|0:03|None|\n32|RUNNING|0|node3|1:02:03|None|\n"
                              "33|FAILED|768|node1|0:00|NonZeroExitCode|\n34|CANCELLED|15|node[1-2]|0:16|None|\n")
    got = SlurmLauncher(fake, cluster()).poll(refs("31", "32", "33", "34"))
    assert got["31"].state is JobState.COMPLETED and got["31"].nodes == ["node1", "node2"]
    assert got["32"].state is JobState.RUNNING and got["32"].elapsed_s == 3723
    assert (got["33"].state, got["33"].exit_code, got["33"].reason) == (JobState.FAILED, 3, "NonZeroExitCode")
    assert (got["34"].state, got["34"].exit_code) == (JobState.CANCELLED, 143)


def test_poll_ignores_sacct_noise_and_keeps_last_duplicate():
    fake = FakeRunner()
    fake.on("sacct ", stdout="Slurm accounting storage is disabled\n41|PENDING|0:0|None assigned|00:00:00|BeginTime\n"
                             "41|RUNNING|0:0|node2|00:00:04|None\n99|FAILED|1:0|x|00:00:01|None\n")
    got = SlurmLauncher(fake, cluster()).poll(refs("41"))
    assert list(got) == ["41"] and got["41"].state is JobState.RUNNING


def test_poll_when_both_tools_fail_reports_unknown_with_reason():
    fake = FakeRunner()
    fake.on("sacct ", exit_code=1, stderr="sacct: error: slurm_persist_conn_open_without_init\n")
    fake.on("squeue ", exit_code=1, stderr="slurm_load_jobs error: Unable to contact slurm controller\n")
    got = SlurmLauncher(fake, cluster()).poll(refs("51"))
    assert got["51"].state is JobState.UNKNOWN and "Unable to contact slurm controller" in got["51"].reason


def test_poll_of_nothing_calls_nothing():
    fake = FakeRunner(strict=True)
    assert SlurmLauncher(fake, cluster()).poll([]) == {} and fake.calls == []


# -- cancel ----------------------------------------------------------------------------------

@pytest.mark.parametrize("result", [
    ExecResult(exit_code=0),
    ExecResult(exit_code=1, stderr="scancel: error: Kill job error on job id 5: Job/step already completing or completed\n"),
    ExecResult(exit_code=1, stderr="scancel: error: Kill job error on job id 5: Invalid job id specified\n"),
])
def test_cancel_is_idempotent(result):
    fake = FakeRunner()
    fake.on("scancel ", respond=lambda cmd: result)
    launcher = SlurmLauncher(fake, cluster())
    launcher.cancel(refs("5")[0])
    launcher.cancel(refs("5")[0])
    assert fake.commands == ["scancel 5", "scancel 5"]


def test_cancel_real_failure_raises():
    fake = FakeRunner()
    fake.on("scancel ", exit_code=1, stderr="scancel: error: Unable to contact slurm controller\n")
    with pytest.raises(LaunchError, match="Unable to contact"):
        SlurmLauncher(fake, cluster()).cancel(refs("5")[0])


# -- fetch_logs ------------------------------------------------------------------------------

def _fetcher(names: list[str]) -> tuple[FakeRunner, SlurmLauncher]:
    fake = FakeRunner()
    fake.on("cd /r/9 && find ", stdout="".join(f"{n}\0" for n in names))
    for name in names:
        fake.files[f"/r/9/{name}"] = f"content of {name}".encode()
    return fake, SlurmLauncher(fake, cluster())


def test_fetch_logs_copies_every_attempt_file(tmp_path):
    names = ["attempt-1/train.log", "attempt-1/slurm-9.out", "attempt-2/sub/rank1.log"]
    fake, launcher = _fetcher(names)
    written = launcher.fetch_logs(refs("9")[0], tmp_path / "dest")
    assert written == [tmp_path / "dest" / n for n in names]
    assert (tmp_path / "dest/attempt-2/sub/rank1.log").read_text() == "content of attempt-2/sub/rank1.log"
    assert [c.remote for c in fake.calls if c.kind == "get"] == [f"/r/9/{n}" for n in names]


@pytest.mark.parametrize("evil", ["/etc/passwd", "../outside", "attempt-1/../../outside", "attempt-1/./x",
                                  "checkpoints/model.pt", "attempt-1", "attempt-1//x", "attempt-1/a\nb",
                                  "attempt-x/y", "attempt-1\\..\\..\\x"])
def test_fetch_logs_refuses_escaping_names(tmp_path, evil):
    fake, launcher = _fetcher(["attempt-1/train.log", evil])
    with pytest.raises(LaunchError, match="refusing"):
        launcher.fetch_logs(refs("9")[0], tmp_path / "dest")
    assert not any(c.kind == "get" for c in fake.calls)  # nothing copied before the check
    assert not (tmp_path / "outside").exists()


def test_fetch_logs_refuses_a_symlink_in_dest_pointing_outside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "attempt-1").symlink_to(outside)
    fake, launcher = _fetcher(["attempt-1/train.log"])
    with pytest.raises(LaunchError, match="resolves outside"):
        launcher.fetch_logs(refs("9")[0], dest)
    assert list(outside.iterdir()) == []


def test_fetch_logs_listing_failure():
    fake = FakeRunner()
    fake.on("cd ", exit_code=1, stderr="bash: cd: /r/9: No such file or directory\n")
    with pytest.raises(LaunchError, match="No such file"):
        SlurmLauncher(fake, cluster()).fetch_logs(refs("9")[0], Path("/nonexistent-unused"))


# -- node states -----------------------------------------------------------------------------

def test_node_states_one_call():
    fake = FakeRunner(strict=True)
    fake.on("sinfo -h -N", stdout="node1|idle|none\nnode2|down*|Not responding\nnode3|drained|bad gpu\n"
                                  "node4|mixed|none\nnode1|idle|none\n")
    nodes = SlurmLauncher(fake, cluster()).node_states()
    assert len(fake.calls) == 1 and list(nodes) == ["node1", "node2", "node3", "node4"]
    assert nodes["node2"].state == "down" and not nodes["node2"].responding and nodes["node2"].reason == "Not responding"
    assert [n for n, info in nodes.items() if not info.usable] == ["node2", "node3"]


# -- integration: the real local cluster -----------------------------------------------------

@pytest.mark.integration
def test_two_node_attempt_on_the_local_cluster(request, tmp_path):
    pytest.importorskip("orchestrator.providers.local", reason="local provider not built yet")
    import time

    from orchestrator.hosts.remote import LocalRunner

    cluster = request.getfixturevalue("local_cluster")
    launcher = SlurmLauncher(LocalRunner(env=cluster.env), cluster)
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "README").write_text("staged\n")
    run_dir = f"{cluster.workdir.rstrip('/')}/runs/launcher-it-{os.getpid()}"
    attempt = AttemptSpec(run_id=f"launcher-it-{os.getpid()}", attempt=1, recipe="smoke", nodes=2,
                          run_dir=run_dir, time_limit_min=2,
                          command="bash -c 'echo \":::MLLOG {}\" ; hostname'")
    ref = launcher.submit(attempt, recipe_dir=recipe)
    deadline = time.monotonic() + 120
    status = launcher.poll([ref])[ref.job_id]
    while not status.state.terminal and time.monotonic() < deadline:
        time.sleep(0.5)  # polling a real slurmctld
        status = launcher.poll([ref])[ref.job_id]
    assert status.state is JobState.COMPLETED, status
    assert status.exit_code == 0 and len(status.nodes) == 2
    written = launcher.fetch_logs(ref, tmp_path / "logs")
    names = {p.relative_to(tmp_path / "logs").as_posix() for p in written}
    assert {"attempt-1/train.log", "attempt-1/job.sbatch", f"attempt-1/slurm-{ref.job_id}.out"} <= names
    log = (tmp_path / "logs" / "attempt-1" / "train.log").read_text().splitlines()
    assert sorted(line for line in log if line.endswith(":::MLLOG {}")) == ["0: :::MLLOG {}", "1: :::MLLOG {}"]
    assert launcher.poll([ref])[ref.job_id].state is JobState.COMPLETED
    launcher.cancel(ref)  # cancelling a finished job is not an error


def test_disabled_accounting_is_remembered_so_each_poll_is_one_call():
    fake = FakeRunner()
    fake.on("sacct ", exit_code=1, stderr="sacct: error: Slurm accounting storage is disabled\n")
    fake.on("squeue ", stdout="7|RUNNING|0|node1|0:05|None|\n")
    launcher = SlurmLauncher(fake, cluster())
    for _ in range(3):
        assert launcher.poll(refs("7"))["7"].state is JobState.RUNNING
    assert (launcher.sacct_calls, launcher.squeue_calls) == (1, 3)


# -- --segment only where the cluster's Slurm has topology/block ---------------------------------

@pytest.mark.parametrize("answer, kept, note", [
    (ExecResult(exit_code=0, stdout="slurm 24.05.4\n"), True, None),
    (ExecResult(exit_code=0, stdout="slurm 23.02.7\n"), False, "this cluster's Slurm (23.02) has no topology/block"),
    (ExecResult(exit_code=127, stderr="sbatch: not found\n"), False,
     "this cluster's Slurm version could not be read (sbatch --version)"),
])
def test_segment_is_dropped_with_a_note_saying_what_was_read(answer, kept, note):
    from orchestrator.runs.launch import launch_attempt
    from orchestrator.recipes.catalog import resolve
    attempt = launch_attempt(resolve("llama31_405b", "gb200", 128), "/shared/runs/r1", run_id="r1")
    assert attempt.container is not None and attempt.container.segment == 16
    fake = FakeRunner()
    fake.on("sbatch --version", respond=lambda _cmd: answer)
    fake.on("mkdir -p")
    fake.on("sbatch --parsable", stdout="77\n")
    launcher = SlurmLauncher(fake, cluster(sku="gb200", nodes=128))
    launcher.submit(attempt)
    launcher.submit(attempt.model_copy(update={"attempt": 2}))
    assert sum("sbatch --version" in c for c in fake.commands) == 1  # asked once per launcher
    script = fake.files["/shared/runs/r1/attempt-1/job.sbatch"].decode()
    assert ("#SBATCH --segment=16" in script) is kept
    if note:
        assert f"# no --segment: {note}" in script and "(0.00)" not in script
