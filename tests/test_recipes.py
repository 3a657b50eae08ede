"""The MLPerf recipe catalog: config choice, published scales, placement, refusals, golden scripts.

Golden files under tests/golden/recipes/ are the exact launch scripts for every recipe x SKU at its
smallest and largest listed scale, plus each recipe's data-staging job. Regenerate them after an
intended change with AZBENCH_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.hardware import catalog
from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.recipes import catalog as R
from orchestrator.runs import launch as L
from orchestrator.slurm.launcher import attempt_script
from orchestrator.slurm.staging import render_stage
from orchestrator.recipes.parallelism import Layout, make_layout, place
from orchestrator.templating import render
from testsupport.golden import check_golden

GOLDEN = Path(__file__).parent / "golden" / "recipes"
MLPERF = ["dlrm_dcnv2", "flux1", "gpt3", "llama2_70b_lora", "llama31_405b", "llama31_8b",
          "retinanet", "rgat"]


def _cases() -> list[tuple[str, str, int]]:
    cases = []
    for name in MLPERF:
        recipe = R.get_recipe(name)
        for sku in recipe.skus:
            nodes = [c.nodes for c in recipe.scales_for(sku)]
            cases += [(name, sku, n) for n in sorted({nodes[0], nodes[-1]})]
    return cases


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


# -- the catalog ---------------------------------------------------------------------------------

def test_every_recipe_loads_and_smoke_is_unchanged():
    names = [r.name for r in R.list_recipes()]
    assert names == sorted(MLPERF + ["smoke"])
    smoke = R.get_recipe("smoke")
    assert smoke.mlperf is None and smoke.rulesets == []
    command = R.render_command(smoke, run_dir="/w/r1", nodes=2, python="python3")
    assert command.startswith("python3 /w/r1/recipe/train.py ") and "{" not in command


@pytest.mark.parametrize("name", MLPERF)
def test_mlperf_recipes_name_rulesets_targets_runs_and_sources(name):
    recipe = R.get_recipe(name)
    assert recipe.rulesets and set(recipe.mlperf.gbs_rules) == set(recipe.rulesets)
    assert recipe.required_runs in (3, 5, 10)
    assert recipe.mlperf.container.image and recipe.mlperf.data
    for sku in recipe.skus:
        assert len(recipe.scales_for(sku)) >= 2
        assert all(c.source for c in recipe.scales_for(sku))


def test_required_runs_and_targets_follow_mlperf_notes():
    expected = {"llama31_405b": (3, 5.6, "min"), "gpt3": (3, 2.69, "min"),
                "retinanet": (5, 0.34, "max"), "llama31_8b": (10, 3.3, "min"),
                "llama2_70b_lora": (10, 0.925, "min"), "flux1": (10, 0.586, "min"),
                "dlrm_dcnv2": (10, 0.80275, "max"), "rgat": (10, 0.72, "max")}
    for name, (runs, value, direction) in expected.items():
        recipe = R.get_recipe(name)
        assert (recipe.required_runs, recipe.target.value, recipe.target.direction) == \
            (runs, value, direction), name


# -- published scales reproduce their parallelism ------------------------------------------------

PUBLISHED = [
    # recipe, sku, nodes, ruleset, (tp, pp, cp, vp, dp, mbs, gbs, grad_accum)
    ("llama31_405b", "gb200", 2048, "6.0.0", (4, 8, 2, 8, 128, 1, 1024, 8)),   # Azure v6.0
    ("llama31_405b", "gb200", 640, "5.1.0", (4, 8, 2, 8, 40, 1, 960, 24)),     # NVIDIA v5.1 hsg
    ("llama31_405b", "gb200", 128, "5.1.0", (4, 8, 2, 8, 8, 1, 1152, 144)),    # NVIDIA v5.1 tyche_ngpu512
    ("gpt3", "h100", 64, "4.1.0", (4, 8, 1, 6, 16, 2, 2048, 64)),              # NVIDIA v4.1 eos_n64
    ("llama2_70b_lora", "h100", 8, "4.1.0", (4, 1, 2, None, 8, 1, 8, 1)),      # NVIDIA v4.1 eos_n8
    ("llama31_405b", "h100", 1024, "5.0.0", (8, 8, 2, 8, 64, 1, 1536, 24)),    # NVIDIA v5.0 Eos
    ("llama31_405b", "h100", 256, "5.0.0", (8, 8, 2, 8, 16, 1, 1152, 72)),
    ("llama31_405b", "h100", 64, "5.0.0", (8, 8, 2, 8, 4, 1, 1152, 288)),
    ("gpt3", "h100", 1344, "3.1.0", (4, 8, 1, 12, 336, 1, 2688, 8)),           # Azure+NVIDIA v3.1 (VP: custom.yaml default)
    ("llama2_70b_lora", "h200", 64, "4.1.0", (4, 1, 2, None, 64, 1, 64, 1)),   # Azure v4.1
]


@pytest.mark.parametrize("name,sku,nodes,ruleset,expected", PUBLISHED)
def test_published_scales_reproduce_their_parallelism(name, sku, nodes, ruleset, expected):
    r = R.resolve(name, sku, nodes, ruleset)
    assert (r.tp, r.pp, r.cp, r.vp, r.dp, r.mbs, r.gbs, r.grad_accum) == expected
    assert r.tp * r.pp * r.cp * r.dp == r.gpus == nodes * catalog.lookup(sku).gpus_per_vm
    assert not r.derived and r.rule is None


def test_azure_v60_405b_is_128_racks_with_segment_16_and_dp_nodes_over_16():
    r = R.resolve("llama31_405b", "gb200", 2048)
    assert r.gpus == 8192 and r.dp == 2048 // 16 and r.minibs == 8
    assert r.placement.segment == 16 and r.placement.racks == 128
    assert r.placement.links == {"tp": "nvlink", "cp": "nvlink", "pp": "nvlink", "dp": "infiniband"}
    # SEGMENT goes to --segment, not to the environment: the v5.1 scripts do not read it.
    assert "SEGMENT" not in r.env and r.env["DGXNNODES"] == "2048" and r.env["MINIBS"] == "8"
    # Below the smallest 6.0.0 RCP batch (1152): legal, flagged.
    assert len(r.warnings) == 2 and "below the smallest RCP batch 1152" in r.warnings[0]
    # An estimate scaled from NVIDIA's 1,280-node config: its LR/MAX_STEPS are flagged.
    assert "is an estimate" in r.warnings[1] and "config_GB200_1280x4x16" in r.warnings[1]


def test_published_batch_and_grad_accum_match_the_shared_logs(shared_logs):
    cases = {"v5.0/NVIDIA/results/eos-dfw_n64_ngc25.01_nemo/llama31_405b": ("llama31_405b", "h100", 64),
             "v5.0/NVIDIA/results/eos-dfw_n256_ngc25.01_nemo/llama31_405b": ("llama31_405b", "h100", 256),
             "v5.0/NVIDIA/results/eos-dfw_n1024_ngc25.01_nemo/llama31_405b": ("llama31_405b", "h100", 1024),
             "v3.1/Azure+NVIDIA/results/ND_H100_v5_n1344_pytorch/gpt3": ("gpt3", "h100", 1344)}
    for folder, (name, sku, nodes) in cases.items():
        logged = _logged(shared_logs / folder / "result_0.txt",
                         ("global_batch_size", "gradient_accumulation_steps"))
        r = R.resolve(name, sku, nodes)
        assert (r.gbs, r.grad_accum) == (logged["global_batch_size"],
                                        int(logged["gradient_accumulation_steps"])), folder


def _logged(path: Path, keys: tuple[str, ...]) -> dict:
    found: dict = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if ":::MLLOG " not in line:
                continue
            event = json.loads(line.split(":::MLLOG ", 1)[1])
            if event["key"] in keys and event["key"] not in found:
                found[event["key"]] = event["value"]
            if len(found) == len(keys):
                return found
    raise AssertionError(f"{path} lacks {keys}")


# -- derived configs -------------------------------------------------------------------------------

def test_weak_scaling_derivation_keeps_per_gpu_work_and_says_so():
    r = R.resolve("llama31_405b", "gb200", 1792)  # Azure's 112-rack weak-scaling point
    assert r.derived and r.base_nodes == 2048
    assert (r.tp, r.pp, r.cp, r.vp, r.mbs, r.grad_accum) == (4, 8, 2, 8, 1, 8)
    assert (r.gpus, r.dp, r.gbs) == (7168, 112, 896) and r.placement.racks == 112
    assert r.rule.startswith("weak scaling from the listed 2048-node config")
    assert "DERIVED config" in attempt_script(L.launch_attempt(r, "/shared/runs/x"))


def test_derivation_below_the_smallest_listed_scale_grows_walltime():
    r = R.resolve("llama31_405b", "h100", 32)
    assert r.derived and r.base_nodes == 64
    assert (r.dp, r.gbs, r.grad_accum) == (2, 576, 288)
    assert r.walltime_min == 840  # 420 min x 1152/576: same samples, half the batch
    assert any("below the smallest RCP batch" in w for w in r.warnings)


def test_exact_config_wins_over_derivation():
    r = R.resolve("llama31_405b", "h100", 256)
    assert not r.derived and r.gbs == 1152 and r.source.startswith("NVIDIA v5.0 eos-dfw_n256")


# -- refusals: one clear line each ----------------------------------------------------------------

REFUSALS = [
    (("llama4_2t", "h100", 8, None), NotFoundError, "unknown recipe 'llama4_2t' (known recipes: "),
    (("llama31_405b", "a100", 8, None), NotFoundError, "unknown SKU 'a100'"),
    (("gpt3", "gb200", 18, None), ConfigError,
     "recipe 'gpt3' does not support ND GB200 v6 (supported: h100, h200)"),
    (("llama31_405b", "mi300x", 64, None), ConfigError,
     "recipe 'llama31_405b' does not support ND MI300X v5 (supported: h100, h200, gb200)"),
    (("llama31_405b", "h100", 1, None), ConfigError,
     "llama31_405b on 1 x ND H100 v5: one model replica needs TP*PP*CP = 8*8*2 = 128 GPUs, "
     "at least 16 VMs"),
    (("llama31_405b", "h100", 100, None), ConfigError,
     "llama31_405b on 100 x ND H100 v5: 800 GPUs do not divide into replicas of TP*PP*CP = "
     "8*8*2 = 128 GPUs; use a multiple of 16 nodes"),
    (("llama31_405b", "gb200", 100, None), ConfigError,
     "llama31_405b on 100 x ND GB200 v6: 400 GPUs do not divide into replicas of TP*PP*CP = "
     "4*8*2 = 64 GPUs; use a multiple of 16 nodes"),
    (("llama31_405b", "h100", 64, "4.1.0"), ConfigError,
     "'llama31_405b' is not an MLPerf Training 4.1.0 benchmark (valid rulesets: 5.0.0, 5.1.0, 6.0.0)"),
    (("gpt3", "h100", 1344, "5.0.0"), ConfigError,
     "'gpt3' is not an MLPerf Training 5.0.0 benchmark (valid rulesets: 3.0.0, 3.1.0, 4.0.0, 4.1.0)"),
    (("llama2_70b_lora", "h200", 256, None), ConfigError,
     "llama2_70b_lora on 256 x ND H200 v5 (ruleset 4.1.0): global batch 256 exceeds the largest "
     "reference convergence point (128); the RCP checker would demand new RCPs"),
    (("llama31_405b", "h100", 0, None), ConfigError, "node count must be at least 1, got 0"),
]


@pytest.mark.parametrize("args,error,message", REFUSALS)
def test_invalid_requests_fail_with_one_clear_line(args, error, message):
    with pytest.raises(error) as exc:
        L.describe_launch(*args)
    assert one_line(exc).startswith(message)


def test_run_path_check_request_refuses_405b_on_one_node():
    with pytest.raises(ConfigError) as exc:
        R.check_request(R.get_recipe("llama31_405b"), "Standard_ND96isr_H100_v5", 1, 4)
    assert "at least 16 VMs" in one_line(exc)


def test_model_parallel_group_that_would_span_racks_is_refused():
    layout = make_layout(gpus=512, tp=4, pp=16, cp=2, vp=None, mbs=1, gbs=512, what="x")
    with pytest.raises(ConfigError) as exc:
        place(layout, catalog.lookup("gb200"), 128)
    assert one_line(exc) == ("a model-parallel group of TP*PP*CP = 128 GPUs (32 VMs) would span "
                             "ND GB200 v6 NVL72 racks (18 VMs = 72 GPUs each)")


def test_recipe_listing_a_rack_spanning_config_fails_to_load(tmp_path, monkeypatch):
    text = (Path(R.get_recipe("llama31_8b").source).read_text()
            .replace("tp: 2, pp: 1, cp: 4, mbs: 1, gbs: 64", "tp: 4, pp: 8, cp: 4, mbs: 1, gbs: 8"))
    monkeypatch.setattr(R, "recipes_dir", lambda: tmp_path)
    (tmp_path / "bad8b.yaml").write_text(text)
    R.get_recipe.cache_clear()
    try:
        with pytest.raises(ConfigError) as exc:
            R.get_recipe("bad8b")
    finally:
        R.get_recipe.cache_clear()
    assert "would span ND GB200 v6 NVL72 racks" in one_line(exc)


def test_tensor_parallel_beyond_the_vm_is_refused_on_h100():
    layout = Layout(tp=16, pp=1, cp=1, vp=None, dp=1, mbs=1, gbs=1)
    with pytest.raises(ConfigError) as exc:
        place(layout, catalog.lookup("h100"), 2)
    assert one_line(exc).startswith("TP 16 does not fit the NVLink domain of ND H100 v5 (8 GPUs")


def test_broken_layout_relations_name_the_relation():
    with pytest.raises(ConfigError, match=r"global batch 100 is not divisible by DP\*MBS = 8\*1"):
        make_layout(gpus=64, tp=8, pp=1, cp=1, vp=None, mbs=1, gbs=100, what="x")
    with pytest.raises(ConfigError, match="needs grad-accum 4 to be a multiple of PP 8"):
        make_layout(gpus=128, tp=8, pp=8, cp=2, vp=8, mbs=1, gbs=4, what="x")


# -- placement and environment in the scripts ------------------------------------------------------

def test_h100_scripts_carry_the_ndv5_topology_file_and_no_segment():
    script = L.describe_launch("llama31_405b", "h100", 64).script
    assert "export NCCL_TOPO_FILE=/opt/microsoft/ndv5-topo.xml" in script
    assert "/opt/microsoft:/opt/microsoft:ro" in script
    assert "--segment" not in script
    assert "#SBATCH --ntasks-per-node=8" in script


def test_gb200_scripts_pass_segment_to_sbatch_and_srun_and_set_mnnvl():
    script = L.describe_launch("llama31_405b", "gb200", 2048).script
    assert "#SBATCH --segment=16" in script and "  --segment=16 \\" in script
    assert "export NCCL_MNNVL_ENABLE=1" in script and "NCCL_TOPO_FILE" not in script
    assert "#SBATCH --ntasks-per-node=4" in script
    # The squashfs `prepare` builds from the arm64 implementation's Dockerfile (models.ContainerBuild).
    build = L.container_build("llama31_405b", "gb200", 2048)
    assert build is not None and build.arch == "arm64"
    assert f"CONT={build.squashfs()}\n" in script


def test_image_override_and_hostile_values_are_quoted_or_refused():
    preview = L.describe_launch("llama31_8b", "h100", 1, image="x; touch /tmp/pwned")
    assert "CONT='x; touch /tmp/pwned'" in preview.script
    resolved = R.resolve("llama31_8b", "h100", 1)
    with pytest.raises(ConfigError, match="has characters azbench will not put"):
        attempt_script(L.launch_attempt(resolved, "/runs/a b"))
    with pytest.raises(ConfigError, match="has characters azbench will not put"):
        attempt_script(L.launch_attempt(resolved, "/runs/x"), partition="gpu;id")


def test_smoke_preview_is_the_launchers_own_script():
    preview = L.describe_launch("smoke", "local", 2)
    assert preview.stage_script is None and preview.resolved.dp == 2
    assert "bash -c " in preview.script and "--container-image" not in preview.script
    check_golden(GOLDEN / "smoke__local__2.sh", preview.script)


# -- golden files -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,sku,nodes", _cases())
def test_golden_launch_script(name, sku, nodes):
    preview = L.describe_launch(name, sku, nodes)
    check_golden(GOLDEN / f"{name}__{sku}__{nodes}.sh", preview.script)


@pytest.mark.parametrize("name", MLPERF)
def test_golden_stage_data_script(name):
    # With the container of the recipe's first listed scale: the build sequence is checked as text
    # (no docker/enroot on the local cluster; test_prepare.py runs the caching with a stub builder).
    recipe = R.get_recipe(name)
    sku = recipe.skus[0]
    build = L.container_build(recipe, sku, recipe.scales_for(sku)[0].nodes)
    check_golden(GOLDEN / f"stage__{name}.sh", render_stage(L.stage_request(name, container=build)))


# Stage scripts with another scale's container where the in-container steps differ by
# implementation (LoRA's steps are NVIDIA v5.1's: GB200 runs them, the v4.1 H100 container above
# reports them missing).
STAGE_EXTRA = [("llama2_70b_lora", "gb200", 2)]


@pytest.mark.parametrize("name,sku,nodes", STAGE_EXTRA)
def test_golden_stage_data_script_of_another_implementation(name, sku, nodes):
    build = L.container_build(name, sku, nodes)
    check_golden(GOLDEN / f"stage__{name}__{sku}.sh", render_stage(L.stage_request(name, container=build)))


def test_every_golden_script_is_valid_bash():
    scripts = sorted(GOLDEN.glob("*.sh"))
    assert len(scripts) == len(_cases()) + len(MLPERF) + len(STAGE_EXTRA) + 1
    result = subprocess.run(["bash", "-c", 'for f in "$@"; do bash -n "$f" || exit 1; done', "x",
                             *map(str, scripts)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_run_and_time_wrapper_writes_mllog_and_result_line(tmp_path):
    wrapper = render(
        "run_and_time.sh.j2", command="echo ':::MLLOG {\"key\": \"run_start\"}'", benchmark="llama31_8b", recipe="t")
    script = tmp_path / "rat.sh"
    script.write_text(wrapper.replace("/results/", f"{tmp_path}/"))
    env = {**os.environ, "SLURM_PROCID": "0"}
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    log = (tmp_path / "mllog_rank0.log").read_text().splitlines()
    assert log[0].startswith("RUNANDTIME_START ") and log[1] == ':::MLLOG {"key": "run_start"}'
    assert log[2].startswith("RUNANDTIME_STOP ") and log[3].startswith("RESULT,llama31_8b,,")
