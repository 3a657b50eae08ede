"""Every call the azureml backend makes through azure-ai-ml's MLClient, as typed functions.

With records.py this is the backend's SDK edge (tests/test_layout.py holds the rest to it): each
function makes one call on an MLClient operation group (`compute`, `jobs`, `workspaces`) and
answers with a record of records.py or nothing; what the SDK raises goes up unchanged, for the
caller's `arm_call` (and the launcher's own MlException handling) to classify. The entities sent
(an AmlCompute, a command job) are built by the provider and the launcher, which golden-test
their REST bodies. Long-running operations are waited on here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.providers.azure_shared.records import QuotaRow
from orchestrator.providers.azureml.records import AmlComputeInfo, ComputeNode, JobInfo, compute, job, node, quota_row

if TYPE_CHECKING:
    from azure.ai.ml import MLClient
    from azure.ai.ml.entities import AmlCompute, Job


def read_workspace(ml: MLClient, name: str) -> None:
    """GET the workspace: raises the SDK's not-found error when it does not exist."""
    ml.workspaces.get(name)


def read_compute(ml: MLClient, name: str) -> AmlComputeInfo:
    """Raises the SDK's not-found error when the workspace has no compute of that name."""
    return compute(ml.compute.get(name))


def create_compute(ml: MLClient, entity: AmlCompute) -> AmlComputeInfo:
    """Create (or update) the compute and wait: the compute as the service then has it."""
    return compute(ml.compute.begin_create_or_update(entity).result())


def delete_compute(ml: MLClient, name: str) -> None:
    """Delete the compute and wait."""
    ml.compute.begin_delete(name).result()


def compute_usages(ml: MLClient, region: str) -> list[QuotaRow]:
    """Azure ML's vCPU quotas in `region`, under their REST labels (records.quota_row)."""
    return [quota_row(u) for u in ml.compute.list_usage(location=region)]


def compute_nodes(ml: MLClient, name: str) -> list[ComputeNode]:
    """The compute's current nodes (none while it is scaled to zero)."""
    return [node(n) for n in ml.compute.list_nodes(name)]


def read_job(ml: MLClient, name: str) -> JobInfo:
    """Raises the SDK's not-found error when the workspace has no job of that name."""
    return job(ml.jobs.get(name))


def submit_job(ml: MLClient, entity: Job) -> None:
    ml.jobs.create_or_update(entity)


def cancel_job(ml: MLClient, name: str) -> None:
    """Ask for the cancel; does not wait for it."""
    ml.jobs.begin_cancel(name)


def stream_job(ml: MLClient, name: str) -> None:
    """azure-ai-ml's log stream: prints the job's user logs to sys.stdout until the job ends."""
    ml.jobs.stream(name)


def download_job(ml: MLClient, name: str, path: str, output_name: str | None = None) -> None:
    """The job's logs (or, given `output_name`, that named output) under `path`."""
    if output_name is None:
        ml.jobs.download(name, download_path=path)
    else:
        ml.jobs.download(name, download_path=path, output_name=output_name)
