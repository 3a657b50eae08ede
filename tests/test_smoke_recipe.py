"""The runnable smoke recipe (recipes/smoke/train.py), driven as real processes on this machine.

One process and two processes over gloo on 127.0.0.1 train to the default target; their MLLOG
stdout is decoded with plain json (not orchestrator.results.mllog) and checked for the keys and shapes
azbench's parser relies on. Checkpoint/resume, the bad-hyperparameter exit, and the hang and
failure switches are exercised on short runs. The two full runs dominate the time (~40 s).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

TRAIN = Path(__file__).resolve().parents[1] / "recipes" / "smoke" / "train.py"
MICRO_BATCH = 32  # train.py's default --batch-size
MLLOG = ":::MLLOG "
# Launch variables the harness itself may carry (pytest inside a Slurm job, a torchrun shell).
SCRUB = ("SLURM_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_", "TORCHELASTIC_", "AZBENCH_SMOKE_",
         "AZBENCH_PLATFORM")


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict]:
        return [json.loads(line.split(MLLOG, 1)[1]) for line in self.stdout.splitlines() if MLLOG in line]

    def keyed(self, key: str) -> list[dict]:
        return [e for e in self.events if e["key"] == key]

    def value(self, key: str) -> object:
        (event,) = self.keyed(key)
        return event["value"]

    def steps(self) -> list[int]:
        return [e["metadata"]["step"] for e in self.keyed("tracked_stats")]

    def accuracy_at(self, step: int) -> float:
        (event,) = [e for e in self.keyed("eval_accuracy") if e["metadata"]["step"] == step]
        return event["value"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}
    env.update(extra)
    return env


def _run(args: list[str], cwd: Path, timeout: float = 180, **env: str) -> Run:
    done = subprocess.run([sys.executable, str(TRAIN), *args], cwd=cwd, env=_env(**env),
                          capture_output=True, text=True, timeout=timeout)
    return Run(done.returncode, done.stdout, done.stderr)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_world(world: int, args: list[str], cwd: Path, timeout: float = 180) -> list[Run]:
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, str(TRAIN), *args], cwd=cwd, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=_env(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK="0",
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
             for r in range(world)]
    runs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            runs.append(Run(p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return runs


@pytest.fixture(scope="module")
def one_proc(tmp_path_factory) -> tuple[Run, Path]:
    cwd = tmp_path_factory.mktemp("smoke1")
    run = _run(["--ckpt-dir", str(cwd / "ckpt")], cwd)
    assert run.rc == 0, run.stderr
    return run, cwd / "ckpt"


@pytest.fixture(scope="module")
def two_proc(tmp_path_factory) -> list[Run]:
    cwd = tmp_path_factory.mktemp("smoke2")
    runs = _run_world(2, ["--ckpt-dir", str(cwd / "ckpt"), "--dist-timeout", "60"], cwd)
    assert [r.rc for r in runs] == [0, 0], [r.stderr for r in runs]
    return runs


def _assert_converged_run(run: Run, world: int) -> None:
    assert run.keyed("run_start") and run.keyed("run_stop")
    (stop,) = run.keyed("run_stop")
    assert stop["event_type"] == "INTERVAL_END" and stop["metadata"]["status"] == "success"
    target = run.value("target_accuracy")
    assert run.keyed("eval_accuracy")[-1]["value"] >= target > 0.5
    assert all(e["value"] < target for e in run.keyed("eval_accuracy")[:-1])
    gbs = run.value("global_batch_size")
    assert gbs == MICRO_BATCH * world
    assert run.value("submission_platform") == f"{world}xLocal_CPU"
    final = stop["metadata"]["samples_count"] // gbs
    assert run.steps() == list(range(1, final + 1))
    for e in run.keyed("tracked_stats"):
        assert e["event_type"] == "POINT_IN_TIME"
        assert set(e["value"]) == {"train_step_time"} and e["value"]["train_step_time"] > 0
        assert e["metadata"]["samples_count"] == e["metadata"]["step"] * gbs
    assert f"status=success steps={final} " in run.stdout


def test_one_process_reaches_target(one_proc) -> None:
    run, _ = one_proc
    _assert_converged_run(run, world=1)
    assert run.value("init_checkpoint_step") == 0 and not run.keyed("resumed_from_checkpoint")


def test_mllog_lines_have_the_official_shape(one_proc) -> None:
    run, _ = one_proc
    for event in run.events:
        assert list(event) == ["namespace", "time_ms", "event_type", "key", "value", "metadata"]
        assert event["metadata"]["file"] == "train.py" and event["metadata"]["lineno"] > 0
    keys = [e["key"] for e in run.events]
    for key in ("submission_benchmark", "submission_org", "submission_division", "submission_status",
                "cache_clear", "init_start", "init_stop", "gradient_accumulation_steps", "opt_name",
                "opt_base_learning_rate", "seed", "train_samples", "eval_samples",
                "max_sequence_length", "block_start", "block_stop", "eval_start", "eval_stop"):
        assert key in keys, key
    assert keys.index("init_stop") < keys.index("run_start") < keys.index("tracked_stats")
    assert run.value("submission_benchmark") == "smoke" and run.value("submission_org") == "azbench"
    assert all("samples_count" in e["metadata"] for e in run.keyed("eval_accuracy"))


def test_one_process_keeps_the_two_newest_checkpoints(one_proc) -> None:
    run, ckpt = one_proc
    last = max(run.steps())
    newest = last - last % 20
    assert sorted(p.name for p in ckpt.iterdir()) == [
        f"ckpt_step{newest - 20:08d}.pt", f"ckpt_step{newest:08d}.pt"]


def test_two_processes_reach_target(two_proc) -> None:
    rank0, rank1 = two_proc
    _assert_converged_run(rank0, world=2)
    assert MLLOG not in rank1.stdout


def test_resume_continues_from_the_newest_complete_checkpoint(one_proc, tmp_path) -> None:
    ckpt = tmp_path / "ckpt"
    first = _run(["--ckpt-dir", str(ckpt), "--max-steps", "40"], tmp_path)
    assert first.rc == 3 and first.keyed("run_stop")[0]["metadata"]["status"] == "aborted"
    (ckpt / ".ckpt_step00000060.pt.tmp.999").write_bytes(b"torn write")  # never matched
    (ckpt / "ckpt_step00000099.pt").write_bytes(b"not a checkpoint")  # skipped as unreadable
    resumed = _run(["--ckpt-dir", str(ckpt), "--resume"], tmp_path)
    assert resumed.rc == 0, resumed.stderr
    assert "skipping unreadable checkpoint" in resumed.stderr
    assert resumed.value("resumed_from_checkpoint") == 40
    assert resumed.value("init_checkpoint_step") == 40
    assert resumed.steps()[0] == 41
    assert resumed.keyed("run_stop")[0]["metadata"]["status"] == "success"
    fresh, _ = one_proc
    # Same data stream, restored model/optimizer/RNG: the curve matches the uninterrupted run.
    assert resumed.accuracy_at(50) == pytest.approx(fresh.accuracy_at(50), abs=1e-6)
    assert resumed.steps()[-1] == fresh.steps()[-1]


@pytest.mark.parametrize("lr", ["-1", "nan"])
def test_bad_learning_rate_is_an_application_error(tmp_path, lr) -> None:
    run = _run([f"--lr={lr}", "--ckpt-dir", str(tmp_path / "ckpt")], tmp_path, timeout=60)
    assert run.rc == 2
    assert re.search(r"application error: --lr must be a finite number > 0", run.stderr)
    assert not run.keyed("run_start") and not (tmp_path / "ckpt").exists()


def test_hang_switch_stops_progress_until_the_watchdog(tmp_path) -> None:
    # The watchdog counts from the start of run(), so model set-up and two steps must fit in
    # --max-seconds + grace: 11 s did not beside two CPU hogs (the watchdog fired before step 3).
    # The hang is forever, so this test always lasts the full 41 s; it is the price of not
    # depending on the machine's speed.
    run = _run(["--max-seconds", "40", "--watchdog-grace", "1", "--ckpt-every", "0"], tmp_path,
               timeout=180, AZBENCH_SMOKE_HANG_AT_STEP="3")
    assert run.rc == 124
    assert "injected hang at step 3" in run.stderr and "watchdog" in run.stderr
    assert run.steps() == [1, 2] and not run.keyed("run_stop")


def test_fail_switch_exits_nonzero_and_step_sleep_is_timed(tmp_path) -> None:
    run = _run(["--ckpt-every", "0"], tmp_path, timeout=90,
               AZBENCH_SMOKE_FAIL_AT_STEP="4", AZBENCH_SMOKE_STEP_SLEEP="0.3")
    assert run.rc == 1 and "injected failure at step 4" in run.stderr
    assert run.steps() == [1, 2, 3] and not run.keyed("run_stop")
    # The sleep sits inside the timed step, so a slowed run shows up in train_step_time.
    assert all(e["value"]["train_step_time"] >= 0.3 for e in run.keyed("tracked_stats"))
