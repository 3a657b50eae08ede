"""`azbench prepare`: the staging job (licence-gated items verified, public data through MLCommons'
R2 path, the container built once per digest), checksummed and resumable, end to end on the local
Slurm cluster against a loopback HTTP server (http.server, started and stopped here) that serves a
small dataset in the R2 metadata format, and a stub image builder (no docker/enroot there)."""

from __future__ import annotations

import hashlib
import http.server
import re
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from orchestrator.clusters import lifecycle
from orchestrator.errors import PreflightError
from orchestrator.recipes.catalog import DataItem, Recipe, list_recipes
from orchestrator.models import ContainerBuild
from orchestrator.runs.launch import container_build, stage_request
from orchestrator.slurm.staging import render_stage
from orchestrator.runs.prepare import check_staged, prepare

SHARD0 = b"c4 shard 0\n" * 4096
SHARD1 = b"c4 shard 1\n" * 512
WEIGHTS = b"licence-gated weights\n"
ORIGIN = "https://training.mlcommons-storage.org"
BUILD = ContainerBuild(recipe="stagetest", repo="mlcommons/training_results_v5.1",
                       commit="441d65f4445cd59687466533fd9f55399136e7a4",
                       path="NVIDIA/benchmarks/llama31_8b/implementations/nemo", arch="x86_64")


def _recipe() -> Recipe:
    return Recipe.model_validate({
        "name": "stagetest", "benchmark": "llama31_8b", "description": "prepare test",
        "required_runs": 1, "target": {"metric": "x", "value": 1.0}, "skus": ["local"],
        "launch": {"command": "true"}, "source": "test",
        "mlperf": {
            "framework": "none", "implementation": "none", "container": {"image": "none"},
            "scales": {},
            "data": [
                {"name": "c4", "kind": "dataset", "path": "{data_root}/stagetest/c4",
                 "mount": "/data", "r2": {".": f"{ORIGIN}/metadata/tinyds.uri"},
                 "source": "test: the R2 metadata format",
                 "checksums": {"shard0.txt": hashlib.sha256(SHARD0).hexdigest()}},
                {"name": "weights", "kind": "checkpoint", "path": "{data_root}/stagetest/weights",
                 "mount": "/ckpt", "source": "test",
                 "gated": {"licence": "Test Licence", "get": "ask the test", "files": ["model/w.bin"]},
                 "checksums": {"model/w.bin": hashlib.sha256(WEIGHTS).hexdigest()}},
                {"name": "extras", "kind": "checkpoint", "path": "{data_root}/stagetest/extras",
                 "mount": "/extras", "source": "test", "optional": True,
                 "gated": {"licence": "Other Licence", "get": "not needed", "files": ["e.bin"]}},
            ]}})


@pytest.fixture
def r2_server(tmp_path: Path) -> Iterator[int]:
    """A bucket laid out as MLCommons' (mlcommons/r2-downloader@239a355 mlc-r2-downloader.sh):
    metadata/<name>.uri holds the dataset's base URL, metadata/<name>.md5 lists its files."""
    served = tmp_path / "served"
    (served / "metadata").mkdir(parents=True)
    (served / "datasets/tinyds/sub").mkdir(parents=True)
    (served / "datasets/tinyds/shard0.txt").write_bytes(SHARD0)
    (served / "datasets/tinyds/sub/shard1.txt").write_bytes(SHARD1)
    # The real host in the metadata: the job must rewrite it to the mirror (AZBENCH_R2_ORIGIN).
    (served / "metadata/tinyds.uri").write_text(f"{ORIGIN}/datasets/tinyds\n")
    (served / "metadata/tinyds.md5").write_text(
        f"{hashlib.md5(SHARD0).hexdigest()}  ./shard0.txt\n{hashlib.md5(SHARD1).hexdigest()}  sub/shard1.txt\n")
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


# -- the job as text ---------------------------------------------------------------------------

def test_the_job_verifies_gated_items_first_and_downloads_through_r2() -> None:
    script = render_stage(stage_request(_recipe(), data_root="/shared/mlperf",
                                        r2_origin="http://127.0.0.1:8000"))
    verify, stage = script.index("\nverify weights "), script.index("\nstage c4 ")
    assert verify < stage, "licence-gated items are checked before any long download"
    assert f"'mlc_r2 -d . {ORIGIN}/metadata/tinyds.uri'" in script
    assert "MLC_R2_ORIGIN=http://127.0.0.1:8000\n" in script
    assert f"'{hashlib.sha256(SHARD0).hexdigest()}  shard0.txt\n'" in script
    assert "\nverify extras /shared/mlperf/stagetest/extras e.bin '' 1\n" in script  # optional
    assert "enroot" not in script, "no container section without a ContainerBuild"


def test_hostile_origins_and_bad_items_are_refused() -> None:
    from orchestrator.errors import ConfigError
    with pytest.raises(ConfigError, match="is not scheme://host"):
        render_stage(stage_request(_recipe(), r2_origin="http://x;rm -rf /"))
    base = {"name": "x", "kind": "dataset", "path": "{data_root}/x", "mount": "/x", "source": "s"}
    with pytest.raises(ValueError, match="exactly one of stage, r2, gated"):
        DataItem.model_validate({**base, "stage": "true", "r2": {".": f"{ORIGIN}/metadata/a.uri"}})
    with pytest.raises(ValueError, match="not an https URL of a .uri"):
        DataItem.model_validate({**base, "r2": {".": "http://evil/metadata/a.uri"}})
    with pytest.raises(ValueError, match="not a plain relative path"):
        DataItem.model_validate({**base, "gated": {"licence": "l", "get": "g", "files": ["../etc"]}})
    with pytest.raises(ValueError, match="after runs only after r2 downloads"):
        DataItem.model_validate({**base, "stage": "true", "after": "true"})
    with pytest.raises(ValueError, match="not a sha256 hex digest"):
        DataItem.model_validate({**base, "stage": "true", "checksums": {"a": "nothex"}})


def test_every_recipe_cites_where_its_r2_uris_and_gated_items_come_from() -> None:
    seen = steps = 0
    for recipe in list_recipes():
        for item in recipe.mlperf.data if recipe.mlperf else []:
            for uri in item.r2.values():
                seen += 1
                assert uri.startswith(f"{ORIGIN}/metadata/"), (recipe.name, uri)
            if item.r2 or item.gated:
                assert re.search(r"mlcommons/training\S*@[0-9a-f]{40} \S+\.(md|MD|sh)", item.source), \
                    (recipe.name, item.name, "source must name repository@commit and the file")
            if item.gated:
                assert "place it on the cluster's shared filesystem under /d/" in item.instructions("/d")
            for step in item.steps:
                steps += 1
                assert re.search(r"mlcommons/training\S*@[0-9a-f]{40} \S+\.(md|MD|sh|sub)", step.source), \
                    (recipe.name, item.name, step.name, "a step cites repository@commit and the file")
    assert seen >= 10
    assert steps >= 10, "FLUX.1, LoRA, GPT-3, R-GAT and DLRM prepare in the container"


def test_the_container_is_cached_by_digest_of_the_pinned_implementation() -> None:
    build = container_build("llama31_8b", "gb200", 2)
    assert build is not None and build.arch == "arm64"
    assert build.path == "NVIDIA/benchmarks/llama31_8b/implementations/nemo"
    assert build.commit == "441d65f4445cd59687466533fd9f55399136e7a4"
    assert build.squashfs("/s") == f"/s/containers/llama31_8b-{build.digest}.sqsh"
    other = build.model_copy(update={"arch": "x86_64"})
    assert other.digest != build.digest, "another architecture is another squashfs"
    script = render_stage(stage_request("llama31_8b", container=build))
    assert 'if [ -s "$SQSH" ]; then' in script and 'mv -f "$SQSH.partial" "$SQSH"' in script
    assert "docker build" in script and 'enroot import -o "$out" "dockerd://$tag"' in script


class _Files:
    """A Launcher's tail over a dict of the cluster's files (check_staged reads only that)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def tail(self, path: str, *, offset: int = 0, nbytes: int | None = None) -> bytes:
        return self.files.get(path, b"")


def test_run_refuses_in_one_line_when_the_container_is_not_built() -> None:
    staged = {"/r/stagetest/c4/.azbench-staged": b"x", "/r/stagetest/weights/.azbench-staged": b"x"}
    launcher = _Files(staged)
    check_staged(_recipe(), launcher, "c1", data_root="/r")  # type: ignore[arg-type]  # extras optional
    with pytest.raises(PreflightError) as caught:
        check_staged(_recipe(), launcher, "c1", data_root="/r", container=BUILD,  # type: ignore[arg-type]
                     prepare_args=" --nodes 2")
    assert str(caught.value) == (f"stagetest: container {BUILD.squashfs('/r')} is not built (from "
                                 f"{BUILD.repo} {BUILD.path}/Dockerfile) (azbench prepare stagetest "
                                 "--cluster c1 --nodes 2)")
    launcher.files[BUILD.squashfs("/r")] = b"hsqs"
    check_staged(_recipe(), launcher, "c1", data_root="/r", container=BUILD)  # type: ignore[arg-type]


# -- end to end on the local cluster ------------------------------------------------------------

@pytest.mark.integration
def test_prepare_stages_verifies_builds_and_resumes_on_the_local_cluster(local_cluster, r2_server,
                                                                         tmp_path: Path) -> None:
    root = str(tmp_path / "mlperf")
    calls = tmp_path / "builder-calls"
    builder = tmp_path / "stub-builder"
    builder.write_text(f'#!/bin/bash\necho "$2 $3 $4 $5" >>{calls}\nprintf "hsqs stub" >"$1"\n')
    builder.chmod(0o755)
    origin = f"http://127.0.0.1:{r2_server}"
    lines: list[str] = []
    kw = dict(data_root=root, container=BUILD, builder=str(builder), r2_origin=origin,
              poll_interval=0.3, timeout_s=300, on_progress=lines.append)
    with lifecycle.connect(local_cluster) as access:
        with pytest.raises(PreflightError, match="dataset 'c4' is not staged under .* \\(and 2 more\\)"):
            check_staged(_recipe(), access.launcher, "local", data_root=root, container=BUILD)
        first = prepare(_recipe(), access.launcher, **kw)  # type: ignore[arg-type]
        # The gated item is missing (with where to put it); the rest is staged; the job fails.
        states = [(i.name, i.state) for i in first.items]
        assert states == [("c4", "staged"), ("weights", "missing"), ("extras", "missing"),
                          ("container", "staged")]
        assert not first.ok and first.job_state == "failed"
        assert [i.name for i in first.missing_gated] == ["weights"]
        assert f"under {root}/stagetest/weights so that model/w.bin exist" in first.items[1].instructions
        c4 = Path(root) / "stagetest/c4"
        assert (c4 / "shard0.txt").read_bytes() == SHARD0
        assert (c4 / "sub/shard1.txt").read_bytes() == SHARD1 and (c4 / "tinyds.md5").is_file()
        assert (c4 / ".azbench-staged").is_file()
        assert Path(BUILD.squashfs(root)).read_bytes() == b"hsqs stub"
        assert calls.read_text() == f"{BUILD.digest} {BUILD.repo} {BUILD.commit} {BUILD.path}\n"
        # Progress: every line of the job's output, once, in order.
        assert lines[lines.index(f"c4: staging into {c4}"):][1:3] == ["  [1/2] shard0.txt",
                                                                       "  [2/2] sub/shard1.txt"]
        assert len(lines) == len(set(lines))
        assert lines[-1] == ("1 item(s) you must provide (licence-gated or made in the container) "
                             "missing: see the lines above")
        # The user places the weights; the rerun keeps the download and the squashfs.
        (Path(root) / "stagetest/weights/model").mkdir(parents=True)
        (Path(root) / "stagetest/weights/model/w.bin").write_bytes(WEIGHTS)
        second = prepare(_recipe(), access.launcher, **kw)  # type: ignore[arg-type]
        check_staged(_recipe(), access.launcher, "local", data_root=root, container=BUILD)  # run may go
    assert [(i.name, i.state) for i in second.items] == [
        ("c4", "already staged"), ("weights", "staged"), ("extras", "missing"),
        ("container", "already staged")]
    assert second.ok and second.job_state == "completed"
    assert len(calls.read_text().splitlines()) == 1, "the squashfs for this digest is never rebuilt"


# -- the CLI ------------------------------------------------------------------------------------

def test_cli_prints_one_instruction_line_per_missing_gated_item_and_exits_3(monkeypatch, tmp_path):
    """`azbench prepare` on a job whose gated items are missing: each gets one line saying where
    to get it and where to place it (also in --json), the error is one line, exit 3."""
    import contextlib
    import json

    from orchestrator.clusters import lifecycle as lc
    from orchestrator.models import Cluster
    from orchestrator.runs import prepare as prep
    from tests.cli_helpers import azbench_in_process, one_line_error

    recipe = _recipe()
    seen: dict[str, object] = {}

    def fake_prepare(r, launcher, **kw):
        seen.update(kw)
        items = [prep.ItemStatus(name=d.name, kind=d.kind, path=d.host_path("/shared/mlperf"),
                                 state="missing" if d.gated else "staged", gated=d.gated is not None,
                                 optional=d.optional,
                                 instructions=d.instructions("/shared/mlperf") if d.gated else "")
                 for d in recipe.mlperf.data]  # type: ignore[union-attr]
        return prep.PrepareResult(recipe=r.name, job_id="7", job_state="failed",
                                  output="/shared/mlperf/staging/stagetest-7.out", items=items)

    cluster = Cluster(name="c1", provider="ssh", sku="Standard_ND96isr_H100_v5", nodes=8,
                      workdir="/shared/azbench")
    monkeypatch.setattr(prep, "prepare", fake_prepare)
    monkeypatch.setattr("orchestrator.recipes.catalog.get_recipe", lambda name: recipe)
    monkeypatch.setattr(lc, "require_cluster", lambda name, store: cluster)
    monkeypatch.setattr(lc, "reachable", lambda name, store: cluster)  # prepare logs in: it asks this
    monkeypatch.setattr(lc, "connect", lambda c: contextlib.nullcontext(type("A", (), {"launcher": None})()))
    env = {"AZBENCH_R2_ORIGIN": "http://127.0.0.1:9", "AZBENCH_IMAGE_BUILDER": "/opt/stub"}
    text = azbench_in_process("prepare", "stagetest", "--cluster", "c1", "--no-image",
                              home=tmp_path, env=env)
    assert text.code == 3
    assert one_line_error(text).endswith("prepare stagetest: 1 item(s) you must provide are missing: weights "
                                         "(place them as printed above, then rerun prepare)")
    lines = [line for line in text.out.splitlines() if "missing: " in line]
    assert lines == [f"missing: {recipe.mlperf.data[1].instructions('/shared/mlperf')}",  # type: ignore[union-attr]
                     f"optional, missing: {recipe.mlperf.data[2].instructions('/shared/mlperf')}"]  # type: ignore[union-attr]
    assert seen["r2_origin"] == "http://127.0.0.1:9" and seen["builder"] == "/opt/stub"
    assert seen["container"] is None  # --no-image
    as_json = azbench_in_process("prepare", "stagetest", "--cluster", "c1", "--no-image", "--json",
                                 home=tmp_path, env=env)
    assert as_json.code == 3
    items = json.loads(as_json.out)["items"]
    assert [i["name"] for i in items if i["instructions"]] == ["weights", "extras"]
    # Without --no-image the container comes from the scale the cluster resolves to; none here.
    no_scale = azbench_in_process("prepare", "stagetest", "--cluster", "c1", home=tmp_path, env=env)
    assert no_scale.code == 2
    assert "prepare stagetest: no container for 8 x Standard_ND96isr_H100_v5: " in one_line_error(no_scale)
    assert one_line_error(no_scale).endswith("(give --sku and --nodes of the runs to come, or --no-image)")


def _mlc_r2(script: str, workdir: Path, origin: str, uri: str) -> "subprocess.CompletedProcess[str]":
    """Run the job's own mlc_r2 function (cut from the rendered script) in `workdir`."""
    import subprocess
    functions = script[script.index("r2_url() {"):script.index("# check_sums DEST")]
    return subprocess.run(["bash", "-c", f'set -euo pipefail\nMLC_R2_ORIGIN={origin}\n{functions}\n'
                           'mlc_r2 -d "$1" "$2"', "mlc_r2", str(workdir), uri],
                          capture_output=True, text=True, timeout=60)


def test_mlc_r2_keeps_good_files_refetches_bad_ones_and_refuses_escaping_paths(r2_server, tmp_path):
    script = render_stage(stage_request(_recipe()))
    origin, uri = f"http://127.0.0.1:{r2_server}", f"{ORIGIN}/metadata/tinyds.uri"
    dest = tmp_path / "dest"
    (dest / "sub").mkdir(parents=True)
    (dest / "shard0.txt").write_bytes(SHARD0)  # already complete: kept
    (dest / "sub/shard1.txt").write_bytes(b"truncated")  # a broken earlier download: fetched again
    (dest / "sub/shard1.txt.part").write_bytes(SHARD1[:100])  # a partial one: continued, or
    # fetched afresh where the server has no byte ranges (http.server has none)
    done = _mlc_r2(script, dest, origin, uri)
    assert done.returncode == 0, done.stderr
    assert (dest / "sub/shard1.txt").read_bytes() == SHARD1 and not (dest / "sub/shard1.txt.part").exists()
    # The bucket's md5 list is checked: a file that differs from it fails the item.
    served = tmp_path / "served/datasets/tinyds/sub/shard1.txt"
    served.write_bytes(b"tampered\n")
    (dest / "sub/shard1.txt").unlink()
    bad = _mlc_r2(script, dest, origin, uri)
    assert bad.returncode != 0 and "shard1.txt: FAILED" in bad.stdout + bad.stderr
    # A list naming a path outside the item's folder is refused before anything is fetched.
    (tmp_path / "served/metadata/tinyds.md5").write_text(f"{'0' * 32}  ../escape.txt\n")
    (dest / "tinyds.md5").unlink()
    escape = _mlc_r2(script, dest, origin, uri)
    assert escape.returncode != 0 and "refusing path ../escape.txt" in escape.stderr
    assert not (tmp_path / "escape.txt").exists()


def test_run_on_a_slurm_cluster_refuses_until_data_and_container_are_staged(tmp_path):
    """`azbench run` of an MLPerf recipe on a cluster with a shell (the fake provider: Slurm
    launcher, files read on this machine) refuses before submitting, in one line that counts the
    container squashfs among what is missing and names the prepare command for that scale."""
    from tests.cli_helpers import azbench_in_process, one_line_error
    up = azbench_in_process("up", "--provider", "fake", "--name", "pf", "--sku", "h100", "--nodes",
                            "8", "--region", "eastus", home=tmp_path)
    assert up.code == 0, up.err
    run = azbench_in_process("run", "llama31_8b", "--cluster", "pf", "--nodes", "1", home=tmp_path)
    assert run.code == 3
    assert one_line_error(run).endswith(
        "llama31_8b: dataset 'c4-preprocessed' is not staged under /shared/mlperf/llama31_8b/c4 "
        "(and 2 more) (azbench prepare llama31_8b --cluster pf --nodes 1)")


# -- in-container steps ------------------------------------------------------------------------

def _steps_recipe() -> Recipe:
    """_recipe() with two in-container steps on the downloaded c4 (the second fails while
    /data/FAIL exists) and an item made by a step alone, as LoRA's GovReport is."""
    spec = _recipe().model_dump()
    c4, weights = spec["mlperf"]["data"][0], spec["mlperf"]["data"][1]
    c4["steps"] = [
        {"name": "convert", "run": "wc -c </data/shard0.txt >/data/converted.txt",
         "source": "test: a conversion as a README runs it in the container"},
        {"name": "index", "run": "test ! -e /data/FAIL && ls /data/sub >/data/index.txt",
         "source": "test"}]
    made = {"name": "made", "kind": "dataset", "path": "{data_root}/stagetest/made",
            "mount": "/made", "source": "test",
            "steps": [{"name": "download", "run": "echo made >/out/made.txt",
                       "mounts": {".": "/out", "{data_root}/stagetest/c4": "/data"},
                       "source": "test: a download_dataset.py run in the container"}]}
    spec["mlperf"]["data"] = [c4, weights, made]
    return Recipe.model_validate(spec)


# A stand-in for pyxis (no enroot on the local cluster): logs each call and runs the command with
# every container path of --container-mounts (HOST:PATH,...) replaced by its host folder.
RUNNER = r'''#!/bin/bash
echo "$(basename "$1")|$2|$3|$4" >>"$CALLS"
cmd=$4
IFS=, read -ra pairs <<<"$2"
for pair in "${pairs[@]}"; do cmd=${cmd//"${pair#*:}"/"${pair%%:*}"}; done
bash -e -c "$cmd"
'''


def test_steps_render_as_quoted_srun_calls_after_the_build_with_chained_keys() -> None:
    script = render_stage(stage_request(_steps_recipe(), data_root="/r", container=BUILD))
    build, first = script.index('echo "container: building into $SQSH"'), script.index("\nstep c4/convert ")
    assert build < first, "steps run after the container is built"
    assert ('srun --nodes=1 --ntasks=1 --container-image="$1" --container-mounts="$2" '
            '--container-workdir="$3" \\\n    bash -e -c "$4"') in script
    assert ("\nstep c4/index /r/stagetest/c4 /r/stagetest/c4/.azbench-step-index /r/stagetest/c4:/data "
            "/workspace 'test ! -e /data/FAIL && ls /data/sub >/data/index.txt' "
            "/r/stagetest/c4/tinyds.md5 /r/stagetest/c4/.azbench-step-convert 0\n") in script
    assert ("\nstep made/download /r/stagetest/made /r/stagetest/made/.azbench-step-download "
            "/r/stagetest/made:/out,/r/stagetest/c4:/data /workspace 'echo made >/out/made.txt' '' '' 1\n"
            ) in script
    assert "\nstage made " not in script, "an item made by steps alone has no download"
    # A step taken from another implementation: skipped where the item has its own download,
    # missing where the step alone makes the item; run does not require a skipped one.
    spec = _steps_recipe().model_dump()
    for item in spec["mlperf"]["data"]:
        for st in item.get("steps") or []:
            st["implementations"] = ["NVIDIA/benchmarks/other/implementations/x"]
    other = Recipe.model_validate(spec)
    text = render_stage(stage_request(other, data_root="/r", container=BUILD))
    assert (f"\necho 'c4/convert: skipped: only for NVIDIA/benchmarks/other/implementations/x, "
            f"not {BUILD.path}'\n") in text
    assert "\necho 'made/download: missing in /r/stagetest/made: azbench has this step from" in text
    assert "\nstep " not in text
    marked = {f"/r/stagetest/{n}/.azbench-staged": b"x" for n in ("c4", "weights", "made")}
    marked[BUILD.squashfs("/r")] = b"hsqs"
    check_staged(other, _Files(marked), "c1", data_root="/r", container=BUILD)  # type: ignore[arg-type]
    with pytest.raises(PreflightError, match="step 'convert' has not run in the container"):
        check_staged(_steps_recipe(), _Files(marked), "c1", data_root="/r", container=BUILD)  # type: ignore[arg-type]
    # Without a container (--no-image) a step not yet done is reported missing, never run.
    assert 'SQSH=""' in render_stage(stage_request(_steps_recipe(), container=None))
    with pytest.raises(ValueError, match="not '.', a plain relative path"):
        DataItem.model_validate({"name": "x", "kind": "dataset", "path": "{data_root}/x", "mount": "/x",
                                 "steps": [{"name": "s", "run": "true", "source": "s",
                                            "mounts": {"../etc": "/x"}}]})
    with pytest.raises(ValueError, match="exactly one of stage, r2, gated or only steps"):
        DataItem.model_validate({"name": "x", "kind": "dataset", "path": "{data_root}/x", "mount": "/x"})


def test_a_step_runs_again_when_its_input_changes_and_not_otherwise(tmp_path: Path) -> None:
    """The job's own step function (cut from the rendered script), with the stub runner."""
    import subprocess
    script = render_stage(stage_request(_steps_recipe(), data_root=str(tmp_path), container=BUILD))
    functions = script[script.index("run_in_container() {"):script.index("\n# c4/convert")]
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "in.md5").write_text("a\n")
    runner = tmp_path / "runner"
    runner.write_text(RUNNER)
    runner.chmod(0o755)
    calls = tmp_path / "calls"

    def step() -> str:
        done = subprocess.run(
            ["bash", "-c", f'set -euo pipefail\nMISSING=0\nSQSH=/x.sqsh\nAZBENCH_CONTAINER_RUNNER={runner}\n'
             f'{functions}\nstep d/s "$1" "$1/.azbench-step-s" "$1:/d" /w "date >>/d/runs" "$1/in.md5" "" 0',
             "step", str(dest)], capture_output=True, text=True, timeout=30, env={"CALLS": str(calls),
                                                                               "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert step() == f"d/s: staging into {dest} in the container\nd/s: staged in {dest}"
    assert step() == f"d/s: already staged in {dest}"
    (dest / "in.md5").write_text("b\n")  # the data was downloaded again with other content
    assert step().endswith(f"d/s: staged in {dest}")
    assert len((dest / "runs").read_text().splitlines()) == 2
    assert calls.read_text().splitlines()[0] == f"x.sqsh|{dest}:/d|/w|date >>/d/runs"


@pytest.mark.integration
def test_prepare_runs_in_container_steps_once_and_resumes_after_a_failed_one(local_cluster, r2_server,
                                                                              tmp_path: Path) -> None:
    root = str(tmp_path / "mlperf")
    builder, runner, calls = tmp_path / "stub-builder", tmp_path / "stub-runner", tmp_path / "calls"
    builder.write_text('#!/bin/bash\nprintf "hsqs stub" >"$1"\n')
    runner.write_text(RUNNER.replace('"$CALLS"', str(calls)))
    for program in (builder, runner):
        program.chmod(0o755)
    recipe = _steps_recipe()
    (Path(root) / "stagetest/weights/model").mkdir(parents=True)
    (Path(root) / "stagetest/weights/model/w.bin").write_bytes(WEIGHTS)
    (Path(root) / "stagetest/c4").mkdir(parents=True)
    (Path(root) / "stagetest/c4/FAIL").write_text("")
    lines: list[str] = []
    kw = dict(data_root=root, container=BUILD, builder=str(builder), runner=str(runner),
              r2_origin=f"http://127.0.0.1:{r2_server}", poll_interval=0.3, timeout_s=300,
              on_progress=lines.append)
    c4 = Path(root) / "stagetest/c4"
    with lifecycle.connect(local_cluster) as access:
        first = prepare(recipe, access.launcher, **kw)  # type: ignore[arg-type]
        states = {i.name: i.state for i in first.items}
        assert states["c4/convert"] == "staged" and states["c4/index"] == "staging failed"
        assert states["made/download"] == "not reached" and first.job_state == "failed"
        assert (c4 / "converted.txt").read_text().strip() == str(len(SHARD0))
        assert f"c4/index: staging into {c4} in the container" in lines
        with pytest.raises(PreflightError) as refused:
            check_staged(recipe, access.launcher, "local", data_root=root, container=BUILD)
        assert f"dataset 'made' is not staged under {root}/stagetest/made (and 2 more)" in str(refused.value)
        (Path(root) / "stagetest/made").mkdir()
        (Path(root) / "stagetest/made/.azbench-staged").write_text("x")  # only the steps are left
        with pytest.raises(PreflightError, match="dataset 'c4': step 'index' has not run in the "
                           f"container \\(no {c4}/.azbench-step-index\\) \\(and 1 more\\)"):
            check_staged(recipe, access.launcher, "local", data_root=root, container=BUILD)
        (Path(root) / "stagetest/made/.azbench-staged").unlink()
        (c4 / "FAIL").unlink()
        second = prepare(recipe, access.launcher, **kw)  # type: ignore[arg-type]
        check_staged(recipe, access.launcher, "local", data_root=root, container=BUILD)  # run may go
        third = prepare(recipe, access.launcher, **kw)  # type: ignore[arg-type]
    assert [(i.name, i.state) for i in second.items] == [
        ("c4", "already staged"), ("weights", "already staged"), ("made", "staged"),
        ("container", "already staged"), ("c4/convert", "already staged"), ("c4/index", "staged"),
        ("made/download", "staged")]
    assert second.ok and third.ok
    assert {i.state for i in third.items} == {"already staged"}
    assert (c4 / "index.txt").read_text() == "shard1.txt\n"
    assert (Path(root) / "stagetest/made/made.txt").read_text() == "made\n"
    assert (Path(root) / "stagetest/made/.azbench-staged").is_file()
    ran = [line.split("|")[3] for line in calls.read_text().splitlines()]
    assert ran == ["wc -c </data/shard0.txt >/data/converted.txt",
                   "test ! -e /data/FAIL && ls /data/sub >/data/index.txt",
                   "test ! -e /data/FAIL && ls /data/sub >/data/index.txt", "echo made >/out/made.txt"]
    assert calls.read_text().splitlines()[0].split("|")[:3] == [
        BUILD.squashfs(root).rsplit("/", 1)[1], f"{c4}:/data", "/workspace"]
