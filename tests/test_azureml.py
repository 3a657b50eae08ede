"""Azure ML back end: golden REST bodies of the AmlCompute and command jobs azure-ai-ml builds, the
provider driven through the real MLClient against a loopback fake ARM, the launcher against a
stateful fake MLClient (status sequences, failures, log download), the monitor's retry path on
Azure ML states, and the CLI's plan and one-line errors.

Regenerate the golden files after an intended change with AZBENCH_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from orchestrator.providers.azureml import provider as P
from orchestrator.providers.azureml.cluster import WORKDIR
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import ConfigError, LaunchError, NotFoundError, PreflightError
from orchestrator.models import AttemptSpec, Cluster, JobRef, JobState
from orchestrator.providers.azureml import launcher as L
from tests.cli_helpers import azbench, one_line_error
from testsupport.fake_azureml import FakeML
from testsupport.fake_arm import SUB, FakeArm, StubCredential, allow_plain_http_policy, default_catalogue
from testsupport.golden import check_golden

GOLDEN = Path(__file__).parent / "golden"
SMOKE_DIR = Path(__file__).resolve().parents[1] / "recipes" / "smoke"
RUN_DIR = "/tmp/azbench/runs/r1"


def check_json_golden(name: str, data: Any) -> None:
    check_golden(GOLDEN / name, json.dumps(data, indent=2, sort_keys=True) + "\n")


def spec(**kw: Any) -> ClusterSpec:
    base = {"name": "bench", "provider": "azureml", "sku": "h100", "nodes": 4, "region": "eastus",
            "azureml": {"workspace": "ws1", "resource_group": "rg1", "subscription_id": SUB}}
    return ClusterSpec.model_validate({**base, **kw})


def cluster(sku: str = "Standard_ND96isr_H100_v5") -> Cluster:
    return Cluster(name="bench", provider="azureml", sku=sku, nodes=4, region="eastus",
                   workdir=WORKDIR, properties={"compute": "bench", "workspace": "ws1"})


def attempt(recipe: str = "smoke", n: int = 1, nodes: int = 2, resume: bool = False) -> AttemptSpec:
    """An attempt as runs/attempts builds it: an MLPerf recipe's image, MPI, data and config env."""
    from orchestrator.recipes.catalog import get_recipe
    from orchestrator.runs.attempts import container_fields
    fields = container_fields(get_recipe(recipe), cluster().sku, nodes)
    env = {**fields.pop("env", {}), "AZBENCH_SMOKE_THREADS": "1"}
    return AttemptSpec(run_id="r1", attempt=n, recipe=recipe, nodes=nodes, run_dir=RUN_DIR,
                       command=f"python3 {RUN_DIR}/recipe/train.py --ckpt-dir {RUN_DIR}/checkpoints",
                       env=env, resume=resume, time_limit_min=15,
                       tasks_per_node=1, gpus_per_node=8, **fields)


def job_body(job: Any) -> dict[str, Any]:
    """The REST body, with the two fields that are local objects until upload made stable."""
    body = job._to_job()._to_rest_object().as_dict()
    props = body["properties"]
    props["codeId"] = "<recipe dir>" if Path(props["codeId"]).is_dir() else props["codeId"]
    props["environmentId"] = f"<anonymous environment, image {job.environment.image}>"
    return body


# -- golden REST bodies -------------------------------------------------------------------------

def test_golden_compute_body():
    s = spec(azureml={"workspace": "ws1", "min_instances": 1, "idle_seconds": 600}, tags={"team": "perf"})
    body = P.build_compute(s, "alice")._to_rest_object().as_dict()
    check_json_golden("azureml_compute_h100.json", body)
    scale = body["properties"]["properties"]["scaleSettings"]
    assert scale == {"maxNodeCount": 4, "minNodeCount": 1, "nodeIdleTimeBeforeScaleDown": "PT10M"}


def test_golden_smoke_job_is_pytorch_with_one_process_per_gpu():
    body = job_body(L.build_job(attempt(n=2, resume=True), SMOKE_DIR, cluster()))
    check_json_golden("azureml_job_smoke.json", body)
    p = body["properties"]
    assert p["distribution"] == {"distributionType": "PyTorch", "processCountPerInstance": 8}
    assert p["resources"]["instanceCount"] == 2 and p["resources"]["shmSize"] == "256g"
    assert p["environmentVariables"]["AZBENCH_RESUME"] == "1"
    assert p["environmentVariables"]["AZBENCH_SMOKE_THREADS"] == "1"
    assert p["outputs"]["checkpoints"]["uri"].endswith("/azbench/r1/checkpoints")  # shared by attempts
    assert "--resume" in p["command"] and body["name"] == "azbench-r1-a2"
    assert p["environmentId"].endswith(f"{L.DEFAULT_IMAGE}>")


def test_golden_mlperf_job_is_mpi_with_data_inputs_and_recipe_image():
    job = L.build_job(attempt("llama2_70b_lora", nodes=8), SMOKE_DIR, cluster())
    body = job_body(job)
    check_json_golden("azureml_job_llama2_70b_lora.json", body)
    p = body["properties"]
    assert p["distribution"] == {"distributionType": "Mpi", "processCountPerInstance": 8}
    assert {k: v["mode"] for k, v in p["inputs"].items()} == {"govreport": "ReadOnlyMount",
                                                              "model": "ReadOnlyMount"}
    assert job.environment.image.startswith("myregistry.azurecr.io/mlperf-nvidia/")  # not enroot's '#'
    assert p["environmentVariables"]["TP"] == "4"


def test_a_missing_recipe_dir_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        L.build_job(attempt(), tmp_path / "nope", cluster())


# -- the state table ----------------------------------------------------------------------------

def test_every_azure_ml_status_has_a_row():
    from azure.ai.ml.operations._run_history_constants import RunHistoryConstants
    statuses = (RunHistoryConstants.IN_PROGRESS_STATUSES + RunHistoryConstants.POST_PROCESSING_STATUSES
                + RunHistoryConstants.TERMINAL_STATUSES)
    assert {str(s) for s in statuses} <= set(L.AZUREML_STATES)
    terminal = {str(s) for s in RunHistoryConstants.TERMINAL_STATUSES}
    assert {k for k, v in L.AZUREML_STATES.items() if v.terminal} == terminal


@pytest.mark.parametrize("native, state", [
    ("Provisioning", JobState.PENDING), ("Running", JobState.RUNNING),
    ("Finalizing", JobState.COMPLETING), ("Completed", JobState.COMPLETED),
    ("Failed", JobState.FAILED), ("Canceled", JobState.CANCELLED),
    ("NotResponding", JobState.NODE_FAIL), ("Paused", JobState.PREEMPTED), ("Weird", JobState.UNKNOWN)])
def test_state_rows(native, state):
    assert L.map_state(native) == state


# -- provider: the real MLClient against a loopback fake ARM -----------------------------------

class FakeAml(FakeArm):
    """FakeArm plus Azure ML's per-location usages; workspaces and computes use FakeArm's PUT/GET/DELETE."""

    def __init__(self) -> None:
        super().__init__()
        self.aml_usages: list[dict[str, Any]] = []

    def _route(self, method, path, query, body, headers):  # type: ignore[override]
        if "/microsoft.machinelearningservices/locations/" in path.lower() and path.lower().endswith("/usages"):
            return 200, {}, {"value": self.aml_usages}
        return super()._route(method, path, query, body, headers)

    def add_workspace(self, rg: str = "rg1", ws: str = "ws1") -> None:
        group = f"/subscriptions/{SUB}/resourcegroups/{rg}"
        self.resources[group] = {"id": group, "name": rg, "location": "eastus", "properties": {},
                                 "type": "Microsoft.Resources/resourceGroups"}
        key = f"{group}/providers/microsoft.machinelearningservices/workspaces/{ws}"
        self.resources[key] = {"id": key, "name": ws, "location": "eastus", "properties": {},
                               "type": "Microsoft.MachineLearningServices/workspaces"}

    def set_quota(self, free_vcpus: int) -> None:
        def row(label: str) -> dict[str, Any]:
            return {"currentValue": 0, "limit": free_vcpus, "unit": "Count",
                    "name": {"value": label, "localizedValue": label}}
        self.aml_usages = [row("Standard NDSH100v5 Family Cluster Dedicated vCPUs"),
                           row("Standard NDISRH200V5 Family Cluster Dedicated vCPUs"), row(P.TOTAL_QUOTA)]

    def compute(self, name: str = "bench") -> dict[str, Any] | None:
        return self.of_type("workspaces/computes").get(name)


@pytest.fixture(scope="module")
def arm():
    fake = FakeAml().start()
    yield fake
    fake.stop()


@pytest.fixture
def fake(arm, monkeypatch):
    monkeypatch.setenv("AZUREML_CURRENT_CLOUD", "AzureCloud")  # MLClient sets it; restored after
    for key in [k for k in arm.resources]:
        del arm.resources[key]
    arm.log.clear()
    arm.add_workspace()
    default_catalogue(arm)
    arm.set_quota(100_000)
    return arm


def provider(fake: FakeAml) -> P.AzureMLProvider:
    from orchestrator.providers.azure.clients import AzureClients
    policy = allow_plain_http_policy()

    def ml(target: P.AmlTarget) -> Any:  # the production factory, aimed at the fake
        target = P.AmlTarget(target.subscription_id, target.resource_group, target.workspace, fake.base_url)
        return P.default_ml_client(target, StubCredential(), per_call_policies=[policy],
                                   polling_interval=0.01, retry_total=0)

    def clients(target: P.AmlTarget) -> Any:
        return AzureClients(credential=StubCredential(), subscription_id=SUB, base_url=fake.base_url,
                            per_call_policies=[policy], polling_interval=0.01, retry_total=0)

    return P.AzureMLProvider(ml, clients, owner="alice")


def test_up_creates_then_adopts_then_down_deletes_idempotently(fake):
    prov, s = provider(fake), spec()
    c = prov.up(s, prov.plan(s))
    body = fake.compute()["properties"]
    assert body["computeType"] == "AmlCompute" and body["properties"]["vmSize"] == "Standard_ND96isr_H100_v5"
    assert body["properties"]["scaleSettings"]["maxNodeCount"] == 4
    assert fake.compute()["tags"]["azbench-cluster"] == "bench"
    assert c.properties.owned is True and c.nodes == 4 and c.workdir == WORKDIR
    puts = fake.count("PUT", "/computes/")
    again = prov.up(s, prov.plan(s))
    assert fake.count("PUT", "/computes/") == puts and again.properties.compute == "bench"
    assert prov.describe("bench", s) is not None  # the spec says which workspace (plan keeps nothing)
    prov.down(c)
    assert fake.compute() is None and prov.describe("bench", s) is None
    prov.down(c)  # missing is success


def test_unknown_workspace_is_not_found(fake):
    prov, s = provider(fake), spec(azureml={"workspace": "nosuch", "resource_group": "rg1",
                                            "subscription_id": SUB})
    with pytest.raises(NotFoundError, match="workspace 'nosuch' not found") as err:
        prov.up(s, prov.plan(s))
    assert err.value.exit_code == 2 and fake.count("PUT") == 0


def test_size_not_offered_and_short_quota_fail_preflight_before_any_put(fake):
    fake.skus["eastus"] = [r for r in fake.skus["eastus"] if r["name"] != "Standard_ND96isr_H100_v5"]
    fake.set_quota(96)
    prov, s = provider(fake), spec()
    with pytest.raises(PreflightError) as err:
        prov.up(s, prov.plan(s))
    msg = err.value.message
    assert "Standard_ND96isr_H100_v5 is not offered in eastus" in msg
    assert "Azure ML quota standardNDSH100v5Family in eastus: need 384 vCPUs, 96 free" in msg
    assert err.value.exit_code == 3 and fake.count("PUT") == 0


def test_a_foreign_compute_of_another_size_is_not_adopted(fake):
    prov, s = provider(fake), spec(sku="h200")
    prov.up(s, prov.plan(s))
    fake.compute()["tags"] = {}  # someone else's now
    with pytest.raises(ConfigError, match="is Standard_ND96isr_H200_v5, not Standard_ND96isr_H100_v5"):
        prov.up(spec(), prov.plan(spec()))


@pytest.mark.parametrize("kw, message", [
    ({"sku": "gb200", "nodes": 18}, "not allowed for provider 'azureml'"),
    ({"azureml": {"workspace": "w", "min_instances": 5}}, "min_instances 5 exceeds nodes 4"),
])
def test_plan_rejects_bad_input(kw, message):
    with pytest.raises(ConfigError, match=message):
        P.AzureMLProvider().plan(spec(**kw))


def test_long_cluster_names_get_a_short_stable_compute_name():
    name = P.compute_name("a-very-long-cluster-name-for-aml")
    assert len(name) <= 16 and name == P.compute_name("a-very-long-cluster-name-for-aml")


# -- launcher: a stateful fake MLClient ---------------------------------------------------------

def launcher() -> tuple[L.AzureMLLauncher, FakeML]:
    ml = FakeML()
    return L.AzureMLLauncher(cluster(), ml), ml


def test_submit_then_poll_follows_the_status_sequence():
    lau, ml = launcher()
    ref = lau.submit(attempt(), SMOKE_DIR)
    assert ref == JobRef(cluster="bench", job_id="azbench-r1-a1", backend="azureml", run_dir=RUN_DIR)
    job = ml.jobs.jobs["azbench-r1-a1"]
    assert job.compute == "bench" and job.resources.instance_count == 2
    states = [lau.poll([ref])[ref.job_id].state for _ in range(3)]
    assert states == [JobState.PENDING, JobState.RUNNING, JobState.COMPLETED]
    assert lau.poll([ref])[ref.job_id].exit_code == 0


def test_submit_adopts_a_job_a_crashed_azbench_already_created():
    lau, ml = launcher()
    lau.submit(attempt(), SMOKE_DIR)
    lau.submit(attempt(), SMOKE_DIR)
    assert [c for c in ml.jobs.calls if c[0] == "create"] == [("create", "azbench-r1-a1")]


def test_a_rejected_submit_is_a_launch_error():
    from azure.ai.ml.exceptions import ValidationException
    lau, ml = launcher()
    ml.jobs.create_error = ValidationException(message="compute bench not found",
                                               no_personal_data_message="x")
    with pytest.raises(LaunchError, match="rejected job azbench-r1-a1: compute bench not found"):
        lau.submit(attempt(), SMOKE_DIR)


def test_a_vanished_job_polls_unknown_and_cancel_is_idempotent():
    lau, ml = launcher()
    gone = JobRef(cluster="bench", job_id="azbench-r9-a1", backend="azureml")
    assert lau.poll([gone])[gone.job_id].state == JobState.UNKNOWN
    lau.cancel(gone)
    ref = lau.submit(attempt(), SMOKE_DIR)
    lau.cancel(ref)
    assert ("cancel", ref.job_id) in ml.jobs.calls
    assert [lau.poll([ref])[ref.job_id].state for _ in range(2)] == [JobState.COMPLETING, JobState.CANCELLED]
    lau.cancel(ref)  # already ended: no second cancel
    assert ml.jobs.calls.count(("cancel", ref.job_id)) == 1


def test_fetch_logs_writes_train_log_from_rank_zero_for_every_attempt(tmp_path):
    lau, ml = launcher()
    for n, status in ((1, "NotResponding"), (2, "Completed"), (3, "Running")):
        lau.submit(attempt(n=n), SMOKE_DIR)
        ml.jobs.scripts[f"azbench-r1-a{n}"] = [status]
        ml.jobs.logs[f"azbench-r1-a{n}"] = {
            "artifacts/user_logs/std_log_process_0.txt": f":::MLLOG attempt {n}\nAZBENCH_ATTEMPT_STOP 1 rc=0\n",
            "artifacts/user_logs/std_log_process_1.txt": "rank 1\n",
            "named-outputs/results/metrics/result.json": "{}"}
    written = lau.fetch_logs(JobRef(cluster="bench", job_id="-", run_dir=RUN_DIR), tmp_path)
    assert (tmp_path / "attempt-2" / "train.log").read_text().startswith(":::MLLOG attempt 2")
    assert (tmp_path / "attempt-1" / "user_logs" / "std_log_process_1.txt").exists()
    assert (tmp_path / "attempt-1" / "metrics" / "result.json").exists()
    assert not (tmp_path / "attempt-3").exists()  # still running: nothing to download yet
    assert all(p.is_relative_to(tmp_path.resolve()) for p in written) and len(written) == 8


def test_node_states_mark_unusable_nodes_down():
    lau, ml = launcher()
    ml.nodes = [SimpleNamespace(node_id="tvm-1", node_state="running"),
                SimpleNamespace(node_id="tvm-2", node_state="unusable")]
    infos = lau.node_states()
    assert infos["tvm-1"].usable and not infos["tvm-2"].usable


def test_the_monitor_retries_a_not_responding_job_and_not_a_failed_one():
    from orchestrator.specs.run import RetryPolicy
    from orchestrator.runs.failures import Observation, classify
    from orchestrator.runs.monitor import Action, AttemptRecord, decide_retry, watch
    decisions = {}
    for final in ("NotResponding", "Failed"):
        lau, ml = launcher()
        ref = lau.submit(attempt(), SMOKE_DIR)
        ml.jobs.scripts[ref.job_id] = ["Queued", "Running", final]
        clock = SimpleNamespace(now=0.0)
        status, action = watch(ref, lau, lambda: (None, None, None), run_id="r1", attempt=1, nodes=2,
                               hang_timeout=1e6, deadline_s=1e6, clock=lambda c=clock: c.now,
                               sleep=lambda s, c=clock: setattr(c, "now", c.now + s))
        assert action == Action.DONE
        failure = classify(Observation(state=status.state, exit_code=status.exit_code,
                                       log_tail="Traceback: ValueError" if final == "Failed" else ""))
        decisions[final] = decide_retry([AttemptRecord(1, failure)], RetryPolicy(), 0.0)
    assert decisions["NotResponding"].retry and decisions["NotResponding"].resume
    assert not decisions["Failed"].retry


def test_access_gives_azureml_clusters_the_azureml_launcher_and_no_shell():
    from orchestrator.clusters.lifecycle import connect
    from orchestrator.errors import MissingCapability
    access = connect(cluster())
    assert access.shell is None and access.launcher.parts().gate is None
    assert isinstance(access.launcher, L.AzureMLLauncher)
    from orchestrator.runs.fleet_gate import undrain
    with pytest.raises(MissingCapability, match="cannot return nodes to service"):  # typed, never a silent 127
        undrain(cluster(), access, "n1")


# -- CLI ---------------------------------------------------------------------------------------

def test_cli_dry_run_shows_the_compute_plan(azbench_home):
    result = azbench("up", "--provider", "azureml", "--sku", "h100", "--nodes", "4", "--region", "eastus",
                     "--dry-run", "--json", home=azbench_home)
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    (res,) = plan["resources"]
    assert res["kind"] == P.COMPUTE_KIND and res["properties"]["max_instances"] == 4
    assert plan["total_gpus"] == 32 and any("Azure ML quota" in c for c in plan["preflight"])


def test_the_sizes_azure_ml_takes_are_the_catalog_rows_marked_for_it(azbench_home):
    """Issue 44: no second home for sizes. GB300's row is marked `aml_compute`, so it plans."""
    from orchestrator.hardware import catalog
    assert [r.key for r in catalog.aml_compute_skus()] == ["h100", "h200", "gb300"]
    result = azbench("up", "--provider", "azureml", "--sku", "gb300", "--nodes", "2", "--region", "eastus",
                     "--dry-run", "--json", home=azbench_home)
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    assert plan["sku"] == "Standard_ND128isr_GB300_v6" and plan["total_gpus"] == 8
    assert plan["resources"][0]["properties"]["size"] == "Standard_ND128isr_GB300_v6"


def test_a_row_unmarked_for_azure_ml_is_refused_in_one_line(tmp_path, monkeypatch):
    """The mark is read from the row: the same H100 row with `aml_compute: false` in a copy of
    sizes.yaml is refused (one line, exit 2) and the message names what is marked instead."""
    import yaml

    from orchestrator.hardware import catalog
    from tests.cli_helpers import azbench_in_process
    data = yaml.safe_load(catalog.SIZES_FILE.read_text(encoding="utf-8"))
    for row in data["sizes"]:
        if row["name"] == "Standard_ND96isr_H100_v5":
            row["aml_compute"] = False
    sizes = tmp_path / "sizes.yaml"
    sizes.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    monkeypatch.setattr(catalog, "SIZES_FILE", sizes)
    result = azbench_in_process("up", "--provider", "azureml", "--sku", "h100", "--nodes", "2", "--region",
                                "eastus", "--dry-run", home=tmp_path / "home")
    assert result.code == 2
    line = one_line_error(result)
    assert "size Standard_ND96isr_H100_v5 is not allowed for provider 'azureml'" in line
    assert "use h200 or gb300" in line and "aml_compute: false" in line


@pytest.mark.parametrize("args, code, message", [
    (["--sku", "gb200", "--nodes", "18", "--dry-run"], 2, "not allowed for provider 'azureml'"),
    (["--sku", "h100", "--nodes", "0", "--dry-run"], 2, "--nodes: must be between 1 and 100000, got 0"),
    (["--sku", "h100", "--nodes", "2", "--yes"], 2, "no Azure ML workspace: set"),
])
def test_cli_bad_input_is_one_line(azbench_home, args, code, message):
    env = {k: "" for k in ("AZURE_SUBSCRIPTION_ID", P.WORKSPACE_ENV, P.GROUP_ENV)}
    result = azbench("up", "--provider", "azureml", "--region", "eastus", *args, home=azbench_home, env=env)
    assert result.code == code
    assert message in one_line_error(result)
