"""A stateful stand-in for azure-ai-ml's MLClient, as far as azbench's Azure ML launcher uses it.

Jobs (create_or_update, get, begin_cancel, download, stream) and compute (list_nodes), with
per-job status scripts (one step per `get`), user logs and results to hand out, failure switches
and a call history. Each behaviour follows the SDK (azure-ai-ml 1.35):

- `get` of an unknown job raises azure.core's ResourceNotFoundError with status 404
  (JobOperations.get -> the REST 404; azbench treats any 404 as "gone").
- `download` raises JobException for a job that is not in a terminal state
  (azure/ai/ml/operations/_job_operations.py, JobOperations.download: "Download is allowed only
  in states ..."), and writes logs under `artifacts/` and named outputs under
  `named-outputs/<name>/` (the same function's artifact_directory_name/output_directory_name).
- `stream` prints "RunId: <name>" and "Web View: <url>", then each new piece of the job's
  streamable user logs as it grows, until the run is no longer in progress, then an
  "Execution Summary" block; for a Failed job it raises JobException after printing
  (azure/ai/ml/operations/_job_ops_helper.py, stream_logs_until_completion with
  raise_exception_on_failed_job=True). It writes to sys.stdout, which is why azbench redirects it.
- Terminal states: Completed, Failed, Canceled, NotResponding, Paused
  (azure/ai/ml/operations/_run_history_constants.py, RunHistoryConstants.TERMINAL_STATUSES).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

TERMINAL = ("Completed", "Failed", "Canceled", "NotResponding", "Paused")
USER_LOG = "artifacts/user_logs/std_log_process_0.txt"


def not_found(what: str) -> Exception:
    from azure.core.exceptions import ResourceNotFoundError
    exc = ResourceNotFoundError(f"{what} not found")
    exc.status_code = 404
    return exc


class FakeJobs:
    """MLClient.jobs with per-job status scripts (one step per get), cancel, download, history.

    `logs[name]` maps a path under the download folder (artifacts/..., named-outputs/results/...)
    to its text; `stream_chunks[name]` is what the job's user log grows by while it is streamed,
    one piece per poll."""

    def __init__(self) -> None:
        self.jobs: dict[str, Any] = {}
        self.scripts: dict[str, list[str]] = {}
        self.logs: dict[str, dict[str, str]] = {}
        self.stream_chunks: dict[str, list[str]] = {}
        self.calls: list[tuple[str, str]] = []
        self.create_error: Exception | None = None

    def create_or_update(self, job: Any) -> Any:
        self.calls.append(("create", job.name))
        if self.create_error:
            raise self.create_error
        self.jobs[job.name] = job
        self.scripts.setdefault(job.name, ["Queued", "Running", "Completed"])
        return job

    def get(self, name: str) -> Any:
        self.calls.append(("get", name))
        if name not in self.jobs:
            raise not_found(name)
        script = self.scripts[name]
        status = script.pop(0) if len(script) > 1 else script[0]
        return SimpleNamespace(name=name, status=status)

    def begin_cancel(self, name: str) -> Any:
        self.calls.append(("cancel", name))
        self.scripts[name] = ["CancelRequested", "Canceled"]

    def download(self, name: str, *, download_path: str, output_name: str | None = None) -> None:
        from azure.ai.ml.exceptions import JobException
        self.calls.append(("download", f"{name}:{output_name or 'logs'}"))
        if self.scripts[name][0] not in TERMINAL:
            raise JobException(message="not terminal", no_personal_data_message="not terminal")
        sub = "named-outputs/results" if output_name == "results" else "artifacts"
        for rel, text in self.logs.get(name, {}).items():
            if rel.startswith(sub + "/"):
                path = Path(download_path) / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)

    def stream(self, name: str) -> None:
        from azure.ai.ml.exceptions import JobException
        self.calls.append(("stream", name))
        if name not in self.jobs:
            raise not_found(name)
        out = sys.stdout
        out.write(f"RunId: {name}\nWeb View: https://ml.azure.com/runs/{name}\n")
        chunks = list(self.stream_chunks.get(name, []))
        status = self.get(name).status
        while status not in TERMINAL:
            if chunks:
                piece = chunks.pop(0)
                out.write(piece)
                logs = self.logs.setdefault(name, {})
                logs[USER_LOG] = logs.get(USER_LOG, "") + piece
            status = self.get(name).status
        for piece in chunks:  # what the job wrote in its last moments
            out.write(piece)
        out.write(f"\nExecution Summary\n=================\nRunId: {name}\n")
        if status == "Failed":
            raise JobException(message=f"Exception: job {name} failed",
                               no_personal_data_message="job failed")


class FakeML:
    """The MLClient: `jobs` as above, `compute.list_nodes` over `nodes`."""

    def __init__(self) -> None:
        self.jobs = FakeJobs()
        self.nodes: list[Any] = []
        self.compute = SimpleNamespace(list_nodes=lambda name: list(self.nodes))
