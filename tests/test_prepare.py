"""`azbench prepare`: the staging job, checksummed and resumable, end to end on the local Slurm
cluster against a loopback HTTP server (http.server, started and stopped here)."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from orchestrator.clusters import lifecycle
from orchestrator.recipes.catalog import Recipe
from orchestrator.runs.launch import render_stage_data
from orchestrator.errors import PreflightError
from orchestrator.runs.prepare import check_staged, prepare

PAYLOAD = b"c4 shard 0\n" * 4096
TOKENIZER = b'{"vocab": 128256}\n'


def _recipe(port: int, tokenizer_sha: str) -> Recipe:
    base = f"http://127.0.0.1:{port}"
    return Recipe.model_validate({
        "name": "stagetest", "benchmark": "llama31_8b", "description": "prepare test",
        "required_runs": 1, "target": {"metric": "x", "value": 1.0}, "skus": ["local"],
        "launch": {"command": "true"}, "source": "test",
        "mlperf": {
            "framework": "none", "implementation": "none", "container": {"image": "none"},
            "scales": {},
            "data": [
                {"name": "c4", "kind": "dataset", "path": "{data_root}/stagetest/c4",
                 "mount": "/data", "stage": f"curl -fsS -C - -o shard0.txt {base}/shard0.txt",
                 "checksums": {"shard0.txt": hashlib.sha256(PAYLOAD).hexdigest()}},
                {"name": "tokenizer", "kind": "tokenizer", "path": "{data_root}/stagetest/tok",
                 "mount": "/tok", "stage": f"curl -fsS -o tokenizer.json {base}/tokenizer.json",
                 "checksums": {"tokenizer.json": tokenizer_sha}},
            ]}})


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[int]:
    served = tmp_path / "served"
    served.mkdir()
    (served / "shard0.txt").write_bytes(PAYLOAD)
    (served / "tokenizer.json").write_bytes(TOKENIZER)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_the_staging_job_checks_sums_before_it_marks_an_item() -> None:
    script = render_stage_data(_recipe(1, "0" * 64), data_root="/shared/mlperf", import_image=False)
    assert "sha256sum --quiet -c .azbench-sha256" in script and "enroot" not in script
    assert f"'{hashlib.sha256(PAYLOAD).hexdigest()}  shard0.txt\n'" in script


def test_bad_checksums_are_refused_when_the_recipe_loads() -> None:
    with pytest.raises(ValueError, match="not a sha256 hex digest"):
        _recipe(1, "nothex")


@pytest.mark.integration
def test_prepare_stages_checks_and_resumes_on_the_local_cluster(local_cluster, http_server,
                                                                  tmp_path: Path) -> None:
    root = str(tmp_path / "mlperf")
    wrong = hashlib.sha256(b"another file").hexdigest()
    with lifecycle.connect(local_cluster) as access:
        with pytest.raises(PreflightError, match="dataset 'c4' is not staged under .* \\(and 1 more\\)"):
            check_staged(_recipe(http_server, wrong), access.launcher, "local", data_root=root)
        first = prepare(_recipe(http_server, wrong), access.launcher, data_root=root,
                        import_image=False, poll_interval=0.3, timeout_s=300)
        # The dataset is staged; the tokenizer's checksum does not match: no marker, job failed.
        assert [(i.name, i.state) for i in first.items] == [("c4", "staged"),
                                                            ("tokenizer", "checksum mismatch")]
        assert not first.ok and first.job_state == "failed"
        assert (Path(root) / "stagetest/c4/shard0.txt").read_bytes() == PAYLOAD
        assert (Path(root) / "stagetest/c4/.azbench-staged").is_file()
        assert not (Path(root) / "stagetest/tok/.azbench-staged").exists()
        # Rerun with the right checksum: the staged item is skipped, the other one finishes.
        right = hashlib.sha256(TOKENIZER).hexdigest()
        second = prepare(_recipe(http_server, right), access.launcher, data_root=root,
                         import_image=False, poll_interval=0.3, timeout_s=300)
        check_staged(_recipe(http_server, right), access.launcher, "local", data_root=root)  # run may go
    assert [(i.name, i.state) for i in second.items] == [("c4", "already staged"),
                                                         ("tokenizer", "staged")]
    assert second.ok and second.job_state == "completed"
    assert (Path(root) / "stagetest/tok/.azbench-staged").is_file()
