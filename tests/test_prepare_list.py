"""`azbench prepare --list` (issue 30, point 2): every published scale is staged by prepare, or
listed with the one thing the user must do first; gated items are checked against what the
implementation itself lists (expected-mounts*.csv, in the vendored PATHS.txt)."""

from __future__ import annotations

from orchestrator.recipes.catalog import get_recipe
from orchestrator.recipes.configs import paths_manifest
from orchestrator.runs.launch import stage_request
from orchestrator.runs.prepare import stage_plans
from orchestrator.slurm.staging import render_stage
from tests.cli_helpers import azbench_in_process, one_line_error


def test_every_scale_is_planned_and_every_user_step_says_what_to_run_or_where_to_place() -> None:
    plans = stage_plans()
    assert len(plans) == 52 and sum(p.published for p in plans) == 33
    for p in plans:
        assert p.command.startswith(f"azbench prepare {p.recipe} --cluster CLUSTER --sku ")
        for step in p.user:
            assert "`" in step or "place it" in step, f"{p.recipe} x{p.nodes}: {step}"
    needs_user = {(p.recipe, p.sku, p.nodes) for p in plans if p.user}
    assert {r for r, _, _ in needs_user} == {"llama31_405b", "llama2_70b_lora"}
    azure = next(p for p in plans if p.recipe == "llama2_70b_lora" and p.nodes == 64)
    assert azure.published and azure.implementation == "v4.1_Azure_nemo"
    assert any("nvcr.io/nvdlfwea" in u and "`docker login nvcr.io`" in u for u in azure.user)
    assert any("govreport: made in the container (download, convert)" == a for a in azure.automatic)


def test_lora_v41_scales_stage_their_own_layout_with_their_container() -> None:
    for sku, nodes in (("h100", 1), ("h100", 8), ("h200", 1), ("h200", 64)):
        from orchestrator.runs.launch import container_build
        build = container_build("llama2_70b_lora", sku, nodes)
        assert build is not None
        script = render_stage(stage_request("llama2_70b_lora", container=build))
        assert "python scripts/download_model.py --model_dir /data/model" in script
        assert "python scripts/convert_model.py" in script and "not from" not in script
        assert "govreport_v5_1" not in script  # the v5.1 layout is not staged with a v4.1 container


def test_the_405b_checkpoint_sizes_are_nvidias_expected_mounts() -> None:
    item = next(d for d in get_recipe("llama31_405b").mlperf.data if d.gated)  # type: ignore[union-attr]
    expected = {f.detail.split()[0]: int(f.detail.split()[1]) for f in paths_manifest(
        "llama31_405b", "v5.1_NVIDIA_hsg_ngpu2560_ngc25.09_nemo/config_GB200_640x4x24xtp4pp8cp2_cg_fp4.sh")
        if f.kind == "expect" and f.path == "LOAD_CHECKPOINT_405B"}
    assert {f"405b/{k}": v for k, v in expected.items() if f"405b/{k}" in item.sizes} == item.sizes
    assert len(item.sizes) == 6
    script = render_stage(stage_request("llama31_405b"))
    assert "625703140948  405b/weights/__0_0.distcp" in script and "md5sum --quiet -c" in script


def test_openimages_comes_through_the_reference_downloader_in_the_container() -> None:
    item = next(d for d in get_recipe("retinanet").mlperf.data if d.name == "openimages")  # type: ignore[union-attr]
    assert item.gated is None and item.steps[0].name == "download"
    assert "./public-scripts/download_openimages_mlperf.sh -d /workspace/ssd_dataset/open-images-v6" in item.steps[0].run


def test_prepare_list_on_the_cli(tmp_path) -> None:
    done = azbench_in_process("prepare", "--list", "llama31_405b", home=tmp_path)
    assert done.code == 0, done.err
    assert "llama31_405b ND GB200 v6 x640 (published, v5.1_NVIDIA_hsg_ngpu2560_ngc25.09_nemo)" in done.out
    assert "x2048 (estimate" in done.out and "you first: checkpoint" in done.out
    bare = azbench_in_process("prepare", "llama31_405b", home=tmp_path)
    assert bare.code != 0 and "--list" in one_line_error(bare)


def test_a_download_command_is_called_checked_only_where_the_recipe_lists_checksums() -> None:
    from orchestrator.runs.prepare import _how
    backbone = next(d for d in get_recipe("retinanet").mlperf.data if d.name == "backbone")  # type: ignore[union-attr]
    assert not backbone.checksums
    assert _how(backbone, None) == ("backbone: its download command (no sha256 list in the recipe: "
                                    "only the command's own checks)")
    listed = backbone.model_copy(update={"checksums": {"hub/checkpoints/x.pth": "0" * 64}})
    assert _how(listed, None) == "backbone: its download command (sha256-checked)"


def test_a_size_the_recipe_does_not_know_is_named_not_rounded_into_a_total(tmp_path) -> None:
    """LoRA v4.1 knows govreport's size (0.2 GB) but not the 70B model's: the listing names it."""
    azure = next(p for p in stage_plans("llama2_70b_lora") if p.nodes == 64)
    assert azure.size_gb == 0.2 and azure.unsized == ["model"] and not azure.size_complete
    whole = next(p for p in stage_plans("dlrm_dcnv2") if p.nodes == 8)
    assert whole.unsized == [] and whole.size_complete
    shown = azbench_in_process("prepare", "--list", "llama2_70b_lora", home=tmp_path)
    assert shown.code == 0, shown.err
    assert "llama2_70b_lora ND H200 v5 x64 (published, v4.1_Azure_nemo): 0.2 GB + model: size unknown\n" in shown.out
