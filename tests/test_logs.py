"""`azbench logs`: byte-exact following of a growing log on Slurm (a UTF-8 character split across
two reads, undecodable bytes), and Azure ML logs through azure-ai-ml (a running job streams, a
finished one is downloaded, reading a running job without --follow says why it cannot)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.providers.azureml.launcher import AzureMLLauncher
from orchestrator.errors import MissingCapability
from orchestrator.models import AttemptSpec, Cluster, JobRef
from orchestrator.paths import RunLayout
from orchestrator.runs import logview
from orchestrator.seams import Access
from orchestrator.slurm.launcher import SlurmLauncher
from orchestrator.store.database import Store
from orchestrator.store.schema import AttemptRow, RunRow
from testsupport.fake_azureml import USER_LOG, FakeML
from testsupport.fake_runner import FakeRunner

SMOKE_DIR = Path(__file__).resolve().parents[1] / "recipes" / "smoke"
LAYOUT = RunLayout("/shared/azbench/runs/r1")
SLURM = Cluster(name="c", provider="local", sku="Local_CPU", nodes=1, workdir="/shared/azbench")
AML = Cluster(name="bench", provider="azureml", sku="Standard_ND96isr_H100_v5", nodes=2,
              workdir="/tmp/azbench")


@pytest.fixture
def store(azbench_home):
    with Store.open() as s:
        s.create_run(RunRow(id="r1", cluster="c", recipe="smoke", benchmark="smoke", nodes=1,
                            state="running", run_dir=LAYOUT.run_dir))
        s.add_attempt(AttemptRow(run_id="r1", attempt=1, job_id="7", state="running"))
        yield s


def test_follow_counts_raw_bytes_so_a_split_character_and_bad_bytes_survive(store, monkeypatch):
    log = LAYOUT.train_log(1)
    runner = FakeRunner(files={log: b"step 1 \xc3"})  # the first byte of "é" only
    growth = [b"step 1 \xc3\xa9t\xe9\n", b"step 1 \xc3\xa9t\xe9\nstep 2 \xe2\x9c\x93\n"]

    def sleep(_: float) -> None:  # the log grows between two reads, mid-character first
        if growth:
            runner.files[log] = growth.pop(0)
        else:
            store.update_run("r1", state="succeeded")

    access = Access(launcher=SlurmLauncher(runner, SLURM), shell=runner)
    monkeypatch.setattr(logview, "connect", lambda cluster: access)
    from orchestrator.models import ClusterState
    store.save_cluster(SLURM.model_copy(update={"state": ClusterState.READY}))
    seen: list[str] = []
    logview.stream_log(store, "r1", seen.append, follow=True, sleep=sleep)
    assert "".join(seen) == "step 1 ét\ufffd\nstep 2 \u2713\n"
    reads = [c for c in runner.calls if c.kind == "read"]
    assert len(reads) >= 3 and all(c.remote == log for c in reads)


def aml_launcher() -> tuple[AzureMLLauncher, FakeML]:
    ml = FakeML()
    return AzureMLLauncher(AML, ml), ml


def submit(lau: AzureMLLauncher) -> JobRef:
    spec = AttemptSpec(run_id="r1", attempt=1, recipe="smoke", nodes=2,
                       run_dir="/tmp/azbench/runs/r1", command="python3 train.py")
    return lau.submit(spec, SMOKE_DIR)


def test_azure_ml_follow_streams_a_running_job_through_azure_ai_ml():
    lau, ml = aml_launcher()
    ref = submit(lau)
    ml.jobs.scripts[ref.job_id] = ["Running", "Running", "Running", "Completed"]
    ml.jobs.stream_chunks[ref.job_id] = [":::MLLOG {\"key\": \"run_start\"}\n", "step 1\n"]
    got: list[bytes] = []
    end = lau.follow(ref, "/tmp/azbench/runs/r1/attempt-1/train.log", got.append, stop=lambda: False)
    text = b"".join(got).decode()
    assert text.startswith(f"RunId: {ref.job_id}\n") and ":::MLLOG" in text and "step 1" in text
    assert "Execution Summary" in text and end == len(b"".join(got))
    assert ("stream", ref.job_id) in ml.jobs.calls


def test_azure_ml_without_follow_says_it_cannot_read_a_running_job():
    lau, ml = aml_launcher()
    ref = submit(lau)
    ml.jobs.scripts[ref.job_id] = ["Running"]
    path = "/tmp/azbench/runs/r1/attempt-1/train.log"
    with pytest.raises(MissingCapability, match="without following it"):
        lau.follow(ref, path, lambda _: None, stop=lambda: True)
    with pytest.raises(MissingCapability, match="running job's log piecemeal"):
        lau.tail(path)
    assert ("stream", ref.job_id) not in ml.jobs.calls


def test_azure_ml_finished_job_log_comes_from_its_download():
    lau, ml = aml_launcher()
    ref = submit(lau)
    ml.jobs.scripts[ref.job_id] = ["Completed"]
    ml.jobs.logs[ref.job_id] = {USER_LOG: "line one\nline two\n"}
    path = "/tmp/azbench/runs/r1/attempt-1/train.log"
    assert lau.tail(path) == b"line one\nline two\n"
    assert lau.tail(path, nbytes=9) == b"line two\n"
    got: list[bytes] = []
    assert lau.follow(ref, path, got.append, stop=lambda: True, offset=9) == 18
    assert got == [b"line two\n"]
