"""Goodput on the real local Slurm cluster, as a user sees it: a cluster brought up by `up`
(lifecycle, so its provisioning is an event with its span), a 2-node smoke run whose node is
killed after its first checkpoint (the run resumes elsewhere), then `azbench goodput RUN -o json`
and `azbench goodput --cluster NAME -o json` through the CLI, the report site's timeline of that
run, and `azbench down` printing where the cluster's money went.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from orchestrator.specs.run import RetryPolicy, RunSpec
from orchestrator.store.database import Store
from tests.cli_helpers import azbench
from tests.fixtures.slurm import local_spec, wait_all_idle

pytestmark = pytest.mark.integration

NAME = "goodput"
QUICK = {"target": 0.6, "max_seconds": 120}


@pytest.fixture(scope="module")
def cluster_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    """A private 3-node cluster brought up by lifecycle.up in its own $AZBENCH_HOME (its nodes
    get killed); down at the end, idempotently."""
    from orchestrator.clusters import lifecycle
    from orchestrator.errors import PreflightError
    home = tmp_path_factory.mktemp("azb-goodput")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AZBENCH_HOME", str(home))
        patch.delenv("AZBENCH_DB_URL", raising=False)
        patch.setenv("AZBENCH_OWNER", "team-a")
        with Store.open() as store:
            try:
                cluster = lifecycle.up(local_spec(NAME, 3, slurmd_timeout=5), store).cluster
            except PreflightError as exc:
                pytest.skip(str(exc))
        try:
            wait_all_idle(cluster)
            yield home, cluster
        finally:
            with Store.open() as store:
                lifecycle.down(NAME, store)


@pytest.fixture(scope="module")
def killed_run(cluster_home: tuple[Path, Any]) -> str:
    """A 2-node smoke run whose last node is killed once the run is past its first checkpoint
    (step 20, of one every 20): it fails NODE_FAIL and resumes from step 20 elsewhere."""
    from orchestrator.clusters.lifecycle import connect
    from orchestrator.models import JobRef
    from orchestrator.providers.local.provider import kill_node, restart_node
    from orchestrator.runs.execute import run_sweep
    home, cluster = cluster_home
    victim: list[str] = []
    with pytest.MonkeyPatch.context() as patch, Store.open() as store:
        patch.setenv("AZBENCH_SMOKE_STEP_SLEEP", "0.1")  # checkpoints ~4 s apart

        def kill_after_checkpoint() -> None:
            launcher = connect(cluster).launcher
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and not victim:
                for run in store.list_runs():
                    log = Path(f"{run.run_dir}/attempt-1/train.log")
                    text = log.read_text() if log.exists() else ""
                    steps = re.findall(r'"step": (\d+)', text)
                    if run.job_id and '"azbench_checkpoint"' in text and steps and int(steps[-1]) >= 26:
                        nodes = launcher.poll([JobRef(cluster=NAME, job_id=run.job_id)])[run.job_id].nodes
                        victim.append(nodes[-1])
                        kill_node(cluster, nodes[-1])
                        return
                time.sleep(0.1)

        killer = threading.Thread(target=kill_after_checkpoint, daemon=True)
        killer.start()
        try:
            [out] = run_sweep(RunSpec(recipe="smoke", cluster=NAME, nodes=[2], params=QUICK,
                                      retry=RetryPolicy(backoff_s=0.5)), store, poll_interval=0.3)
        finally:
            killer.join(5)
            if victim:
                restart_node(cluster, victim[0])
    assert victim, "the job never got past its first checkpoint"
    assert out.state == "succeeded", out.message
    wait_all_idle(cluster)
    return out.run_id


def test_the_killed_node_is_excluded_and_the_run_resumes_from_the_newest_checkpoint(
        cluster_home: tuple[Path, Any], killed_run: str) -> None:
    from orchestrator.slurm.states import expand_hostlist
    home, _ = cluster_home
    with Store.open(f"sqlite:///{home / 'azbench.db'}") as store:
        run = store.get_run(killed_run)
        first, second = store.list_attempts(killed_run)
        [result] = store.list_results(cluster=NAME)

    def used(attempt: int) -> list[str]:
        text = Path(f"{run.run_dir}/attempt-{attempt}/train.log").read_text()
        return expand_hostlist(re.search(r":::DLPAL azbench \d+ \d+ (\S+)", text).group(1))

    assert first.failure_class in ("node_fail", "node_lost")
    [victim] = [n for n in used(1) if n in second.excluded_nodes]
    assert victim not in used(2)
    assert second.resumed_from_step == 20  # the newest complete checkpoint
    assert 0 < first.lost_steps <= 20 and first.lost_seconds > 0  # at most one interval lost
    assert '"key": "resumed_from_checkpoint", "value": 20' in Path(f"{run.run_dir}/attempt-2/train.log").read_text()
    assert result.resumed and result.converged and result.run_id == killed_run


def goodput_json(home: Path, *args: str) -> dict[str, Any]:
    res = azbench("goodput", *args, "-o", "json", home=home)
    assert res.code == 0, res.err
    data: dict[str, Any] = json.loads(res.out)
    return data


def test_a_run_killed_after_its_first_checkpoint(cluster_home: tuple[Path, Any], killed_run: str) -> None:
    home, _ = cluster_home
    g = goodput_json(home, killed_run)
    cats = g["categories"]
    assert all(isinstance(v, (int, float)) for v in cats.values())
    assert sum(cats.values()) == pytest.approx(g["wall_s"], rel=0.01)
    assert cats["lost_work"] > 0 and cats["restart_overhead"] > 0
    # every source of a real run is there: the gate, the queue, init, training, evals, checkpoints
    for name in ("health_gate", "init", "training", "evaluation", "checkpoint", "teardown"):
        assert cats[name] > 0, name
    assert 0 < g["goodput"] < 1 and g["goodput"] == pytest.approx(cats["training"] / g["wall_s"], abs=1e-3)
    assert len(g["attempts"]) == 2
    failure = g["attempts"][0]["failure"]
    assert failure["failure_class"] in ("node_fail", "node_lost") and failure["evidence"]
    assert g["attempts"][1]["failure"] is None and g["attempts"][1]["resumed_from_step"] == 20
    assert failure["lost_work_s"] == pytest.approx(cats["lost_work"], abs=0.01)
    [cause] = g["causes"]
    assert cause["failure_class"] == failure["failure_class"] and cause["failures"] == 1
    assert set(g["cost_usd"]) == set(cats) and g["owner"] == "team-a"
    table = azbench("goodput", killed_run, home=home)
    assert table.code == 0 and failure["failure_class"] in table.out and "lost_work" in table.out


def test_the_cluster_life_adds_up_with_a_cost_per_category(cluster_home: tuple[Path, Any], killed_run: str) -> None:
    home, _ = cluster_home
    c = goodput_json(home, "--cluster", NAME)
    cats = c["categories"]
    assert c["live"] and sum(cats.values()) == pytest.approx(c["wall_s"], rel=0.01)
    assert cats["provisioning"] > 0 and cats["training"] > 0 and cats["idle"] > 0 and cats["lost_work"] > 0
    assert set(c["cost_usd"]) == set(cats) == set(c["gpu_hours"])  # local nodes cost $0 and have no GPU
    assert [r["run_id"] for r in c["runs"]] == [killed_run]
    owners = goodput_json(home, "--by", "owner")
    assert [o["owner"] for o in owners] == ["team-a"] and owners[0]["runs"] == 1


def test_the_site_draws_the_run_timeline(cluster_home: tuple[Path, Any], killed_run: str, tmp_path: Path) -> None:
    home, _ = cluster_home
    res = azbench("report", "--html", str(tmp_path / "site"), home=home)
    assert res.code == 0, res.err
    page = (tmp_path / "site" / "goodput.html").read_text()
    figures = json.loads(re.search(r'<script type="application/json" id="figures">(.*?)</script>', page, re.S).group(1))
    timeline = figures[f"timeline-{killed_run}"]
    lanes = {y for trace in timeline["data"] for y in trace.get("y", [])}
    assert lanes >= {"attempt 1", "attempt 2"}
    names = {trace.get("name") for trace in timeline["data"]}
    assert {"training", "lost work", "restart overhead"} <= names
    assert any("node_fail" in str(trace.get("text")) or "node_lost" in str(trace.get("text"))
               for trace in timeline["data"])


def test_down_says_where_the_money_went(cluster_home: tuple[Path, Any], killed_run: str) -> None:
    home, _ = cluster_home
    res = azbench("down", NAME, home=home)
    assert res.code == 0, res.err
    assert re.search(rf"^{NAME}: \$0\.00 spent over [\d.,]+ (min|h) \(list price\): .*% training", res.out, re.M)
    c = goodput_json(home, "--cluster", NAME)
    assert not c["live"] and c["categories"]["teardown"] > 0
    assert sum(c["categories"].values()) == pytest.approx(c["wall_s"], rel=0.01)
