"""The rehearsal: every recipe x SKU x scale rendered as `run` would, every path its
implementation's own files name checked against the job's mounts, the image and what `prepare`
stages (orchestrator/runs/rehearsal.py, recipes/configs/*/PATHS.txt). Offline: the manifest is
vendored; the test that compares it with the published tree runs where the mirror is."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from orchestrator.recipes.catalog import get_recipe, list_recipes
from orchestrator.recipes.configs import configs_dir, paths_manifest
from orchestrator.runs import rehearsal
from orchestrator.runs.rehearsal import rehearse

SCALES = [(r.name, sku, s.nodes) for r in list_recipes() if r.mlperf
          for sku, scales in r.mlperf.scales.items() for s in scales]
MIRRORS = Path(__file__).resolve().parents[2] / ".mirror"


def test_the_rehearsal_covers_every_scale_of_the_catalog() -> None:
    done = rehearsal.rehearse_all()
    assert {(r.recipe, r.nodes, r.sku) for r in done} == \
        {(n, nodes, get_sku_short(sku)) for n, sku, nodes in SCALES}
    assert len(done) == len(SCALES) == 52
    assert sum(len(r.checks) for r in done) > 700


def get_sku_short(sku: str) -> str:
    from orchestrator.hardware.catalog import lookup
    return lookup(sku).short


@pytest.mark.parametrize(("recipe", "sku", "nodes"), SCALES)
def test_every_path_the_implementation_names_resolves(recipe: str, sku: str, nodes: int) -> None:
    r = rehearse(recipe, sku, nodes)
    bad = [f"{c.where}: {c.problem}" for c in r.unresolved]
    assert not bad, f"{recipe} {sku} x{nodes}:\n" + "\n".join(bad)
    kinds = {c.kind for c in r.checks}
    assert "mount" in kinds and "open" in kinds


def test_the_published_mounts_the_issue_named_are_mounted_now() -> None:
    dlrm = rehearse("dlrm_dcnv2", "gb200", 16)
    val = next(c for c in dlrm.checks if c.expanded == "/data_val/val_data.bin")
    assert val.ok and "val_data.bin" in val.resolved and val.where.endswith("train.py:270")
    gpt3 = rehearse("gpt3", "h100", 64)
    tok = next(c for c in gpt3.checks if c.kind == "open" and c.expanded == "/workspace/llm/tokenizer.model")
    assert tok.ok and "spm/tokenizer.model" in tok.resolved
    for name, sku, nodes in (("gpt3", "h100", 1344), ("llama31_405b", "gb200", 640), ("llama31_8b", "gb200", 18)):
        npy = [c for c in rehearse(name, sku, nodes).checks if c.expanded == "/npy_index"]
        assert npy and all(c.ok and "scratch" in c.resolved for c in npy), name


def test_the_rehearsal_catches_a_missing_mount_and_an_unstaged_file(monkeypatch) -> None:
    recipe = get_recipe("dlrm_dcnv2")
    assert recipe.mlperf is not None
    item = recipe.mlperf.data[0]
    broken = recipe.model_copy(update={"mlperf": recipe.mlperf.model_copy(update={
        "data": [item.model_copy(update={"also": {}, "files": ["train_data.bin"]})]})})
    monkeypatch.setattr(rehearsal, "get_recipe", lambda name: broken)
    monkeypatch.setattr("orchestrator.runs.launch.get_recipe", lambda name: broken)
    problems = [c.problem for c in rehearse("dlrm_dcnv2", "gb200", 16).unresolved]
    assert any("mounts ${DATADIR_VAL} at /data_val; the job mounts nothing there" in p for p in problems)
    assert any(p.startswith("/data_val/val_data.bin is in no container mount") for p in problems)


def test_every_waiver_is_used_and_cites_the_implementation() -> None:
    used = {(c.where.split("/")[2], c.path) for r in rehearsal.rehearse_all() for c in r.checks
            if c.resolved.startswith("waived:")}
    for recipe in list_recipes():
        for key, why in (recipe.mlperf.waive.items() if recipe.mlperf else []):
            path = key.split(":", 1)[1] if ":" in key else key
            assert (recipe.name, path) in used, f"{recipe.name}: waiver {key} is never used"
            assert any(w in why for w in ("line", ".py", ".sh", "README")), f"{key}: no source in {why!r}"


def _vendor():  # recipes/configs/vendor.py, the script that wrote PATHS.txt
    spec = importlib.util.spec_from_file_location("vendor", configs_dir() / "vendor.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("recipe", "config"), [
    ("dlrm_dcnv2", "v5.1_NVIDIA_hugectr/config_GB200_16x4x2112.sh"),
    ("gpt3", "v4.1_NVIDIA_eos_n64_ngc24.09_nemo/config_DGXH100_64x8x128x4x8_mbs2.sh"),
    ("llama2_70b_lora", "v4.1_Azure_nemo/config_DGXH200_64x8x2xtp4pp1cp2.sh"),
])
def test_the_manifest_is_what_the_published_tree_says(recipe: str, config: str) -> None:
    """Reads the published source itself (a local mirror of mlcommons/training_results_vX),
    not our copy: the rows vendor.py extracts from it now equal the vendored PATHS.txt."""
    vendor = _vendor()
    rows = [r for r in (configs_dir() / "ATTRIBUTION.md").read_text().splitlines()
            if f"| {recipe}/{config.split('/')[0]}/PATHS.txt |" in r]
    assert rows, "no ATTRIBUTION.md row for the manifest"
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    repo = MIRRORS / f"mlcommons+{cells[1].split('/')[1]}" / "repo"
    if not repo.is_dir():
        pytest.skip(f"no mirror of {cells[1]} at {repo}")
    impl = cells[3].split(" ")[0].rstrip("/")
    files = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", cells[2], impl + "/"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    vendor.git = lambda r, *args: subprocess.run(  # read the pinned commit, not HEAD
        ["git", "-C", str(r), *[a.replace("HEAD:", f"{cells[2]}:") for a in args]],
        capture_output=True, text=True, check=True).stdout
    vendored = [f for f in files if vendor.SHARED.search(f)] + [f"{impl}/{Path(config).name}"]
    fresh = vendor.paths_manifest(repo, impl, files, vendored)
    ours = [(f.kind, f.path, f.where, f.detail) for f in paths_manifest(recipe, config)]
    assert [tuple(r) + ("",) * (4 - len(r)) for r in fresh] == ours


FABRIC = ("NCCL_COLLNET_ENABLE", "SHARP", "USE_SHARP", "SBATCH_NETWORK")


def test_recipes_show_warns_on_every_sharp_and_collnet_setting_with_its_line(tmp_path) -> None:
    from orchestrator.recipes.catalog import resolve
    from tests.cli_helpers import azbench_in_process
    carrying = []
    for recipe, sku, nodes in SCALES:
        r = resolve(recipe, sku, nodes)
        effective = {**r.config_env, **r.env}
        asked = {k for k in FABRIC if effective.get(k, "").lower() not in ("", "0", "false")}
        assert {f.name for f in r.fabric} == asked, (recipe, sku, nodes)
        if asked:
            carrying.append((recipe, sku, nodes, asked))
    assert {(r, s, n) for r, s, n, _ in carrying} == {
        ("dlrm_dcnv2", "h100", 8), ("dlrm_dcnv2", "h200", 8), ("llama2_70b_lora", "h100", 8),
        ("retinanet", "h100", 8), ("retinanet", "h100", 32), ("retinanet", "h200", 32)}
    shown = azbench_in_process("recipes", "show", "dlrm_dcnv2", "--sku", "h100", "--nodes", "8", home=tmp_path)
    assert shown.code == 0, shown.err
    folder = "recipes/configs/dlrm_dcnv2/v4.1_NVIDIA_eos_n8_ngc24.06_merlin_hugectr"
    assert f"warning: NCCL_COLLNET_ENABLE=1 [{folder}/config_DGXH100_8x8x2112.sh:32]: " in shown.out
    assert f"warning: SBATCH_NETWORK=sharp [{folder}/config_DGXH100_8x8x2112.sh:31]: " in shown.out
    assert "export NCCL_COLLNET_ENABLE=0" in shown.out and "unset SBATCH_NETWORK" in shown.out
    assert "rehearsal: " in shown.out and "all resolved" in shown.out
    assert "by a waiver" not in shown.out  # DLRM's 7 paths resolve without one
    waived = azbench_in_process("recipes", "show", "retinanet", "--sku", "h100", "--nodes", "8", home=tmp_path)
    assert ("rehearsal: 13 paths recipes/configs/retinanet/v4.1_NVIDIA_eos_n8_ngc24.09_pytorch names, all resolved "
            "(3 of them by a waiver that cites the implementation)") in waived.out


def test_the_readme_table_lists_every_scale_as_prepare_list_does() -> None:
    from orchestrator.runs.prepare import stage_plans
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:4])
            for line in readme.splitlines() if line.startswith("| ") and ": v" in line and "published" in line
            or line.startswith("| ") and "| estimate: " in line}
    want = {(p.recipe, p.sku.split()[1], str(p.nodes), f"{'published' if p.published else 'estimate'}: "
             f"{p.implementation}") for p in stage_plans()}
    assert rows == want


LORA_V41 = [(sku, s.nodes) for sku, scales in (get_recipe("llama2_70b_lora").mlperf.scales.items())  # type: ignore[union-attr]
            for s in scales if (s.config or "").startswith("v4.1")]


@pytest.mark.parametrize(("sku", "nodes"), LORA_V41)
def test_lora_jobs_create_the_index_folders_its_run_sub_creates(sku: str, nodes: int) -> None:
    """The v4.1 LoRA run.sub creates ${LOGDIR}/data_index/{train,val} before launch (mounted at
    /results) and its YAML indexes there (megatron_gpt_peft_tuning_config.yaml:148 and :172):
    the rendered job creates both in the attempt folder mounted at /results, before the timed step."""
    from orchestrator.models import AttemptSpec
    from orchestrator.recipes.catalog import resolve
    from orchestrator.runs.launch import container_run
    from orchestrator.slurm.container import render_container_launch
    recipe = get_recipe("llama2_70b_lora")
    assert recipe.mlperf is not None
    resolved = resolve(recipe, sku, nodes)
    facts = paths_manifest("llama2_70b_lora", resolved.vendored or "")
    made = {f.container: f.where for f in facts if f.kind == "mkdir" and f.container}
    opened = {f.path for f in facts if f.kind == "open"}
    for split in ("train", "val"):
        assert made[f"/results/data_index/{split}"] in ("run.sub:93", "run.sub:94")
        assert f"/results/data_index/{split}" in opened  # the YAML indexes there
    job = container_run(recipe, recipe.mlperf, resolved)
    assert job.make_dirs == ["/results/data_index/train", "/results/data_index/val"]
    script = render_container_launch(AttemptSpec(run_id="r1", attempt=2, recipe="llama2_70b_lora", run_dir="/shared/runs/r1",
                                                 command="", nodes=nodes, container=job), job)
    line = "mkdir -p /shared/runs/r1/attempt-2/data_index/train /shared/runs/r1/attempt-2/data_index/val"
    assert line in script.splitlines()
    assert "--container-mounts=\"$MOUNTS\"" in script and "/shared/runs/r1/attempt-2:/results" in script
    assert script.index(line) < script.index("srun -l --kill-on-bad-exit=1")
    checks = [c for c in rehearse("llama2_70b_lora", sku, nodes).checks if c.kind == "mkdir"]
    assert {c.expanded for c in checks if "the job creates it before launch" in c.resolved} == \
        {"/results/data_index/train", "/results/data_index/val"}


def test_the_rehearsal_catches_a_folder_run_sub_creates_that_the_job_does_not(monkeypatch) -> None:
    monkeypatch.setattr("orchestrator.runs.launch.made_dirs", lambda recipe, config: [])
    problems = [c for c in rehearse("llama2_70b_lora", "h200", 64).unresolved]
    assert sorted(c.expanded for c in problems) == ["/results/data_index/train", "/results/data_index/val"]
    assert all(c.where.endswith("v4.1_Azure_nemo/run.sub:94") for c in problems)
    assert "creates /results/data_index/train in the container before launch" in problems[-2].problem


def _published_impls() -> list[tuple[str, str, str]]:
    """(recipe, tag, ATTRIBUTION.md row) of every vendored PATHS.txt."""
    out = []
    for line in (configs_dir() / "ATTRIBUTION.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0].endswith("/PATHS.txt"):
            recipe, tag, _ = cells[0].split("/")
            out.append((recipe, tag, line))
    return out


@pytest.mark.parametrize(("recipe", "tag", "row"), _published_impls(), ids=lambda v: v if "|" not in v else "")
def test_every_folder_a_published_run_sub_creates_before_launch_is_in_the_manifest(recipe: str, tag: str,
                                                                                     row: str) -> None:
    """Reads each implementation's published run.sub (a local mirror of the training_results
    repository, at the vendored commit) with a plain scan, independent of vendor.py: every line
    before the timed srun that runs `mkdir -p` has its `mkdir` rows in PATHS.txt, one per folder,
    so the rehearsal checks every folder the implementation creates before launch."""
    cells = [c.strip() for c in row.strip("|").split("|")]
    repo = MIRRORS / f"mlcommons+{cells[1].split('/')[1]}" / "repo"
    if not repo.is_dir():
        pytest.skip(f"no mirror of {cells[1]} at {repo}")
    impl = cells[3].split(" ")[0].rstrip("/")
    text = subprocess.run(["git", "-C", str(repo), "show", f"{cells[2]}:{impl}/run.sub"],
                          capture_output=True, text=True, check=True).stdout
    lines = text.splitlines()
    timed = next(n for n, line in enumerate(lines, 1) if "run_and_time" in line and not line.lstrip().startswith("#"))
    while lines[timed - 2].rstrip().endswith("\\"):  # the srun's first line
        timed -= 1
    want: dict[int, int] = {}
    for n, line in enumerate(lines[:timed - 1], 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        for part in code.split("mkdir -p")[1:]:
            args = part.replace('"', " ").split(";")[0].split("&&")[0].split(")")[0].split()
            want[n] = want.get(n, 0) + len(args)
    config = next((configs_dir() / recipe / tag).glob("config_*.sh")).name
    facts = [f for f in paths_manifest(recipe, f"{tag}/{config}") if f.kind == "mkdir"]
    got: dict[int, int] = {}
    for f in facts:
        n = int(f.where.split(":")[1])
        got[n] = got.get(n, 0) + 1
    assert got == want
    assert want, "every vendored run.sub creates at least its log folder before launch"
