"""The parallelism map from the rank order (recipes/rank_order.py, recipes/parallelism.place):
Megatron-core's own group construction read from its source (NVIDIA/Megatron-LM
megatron/core/parallel_state.py, core 0.20.0 at d98e8a64, where a mirror is), the order switch
NVIDIA's implementation reads (TP_PP_DP_MAPPING), and 405B on 2,048 GB200 VMs with and without it."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.recipes.catalog import check_params, get_recipe, resolve
from orchestrator.recipes.rank_order import DEFAULT_ORDER, TP_PP_DP_ORDER, groups, order_from, span, strides
from tests.cli_helpers import azbench_in_process

MIRRORS = Path(__file__).resolve().parents[2] / ".mirror"
MEGATRON = MIRRORS / "NVIDIA+Megatron-LM" / "repo"
MEGATRON_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"  # core_v0.15.0rc7-2333, package_info 0.20.0
MLPERF_V51 = MIRRORS / "mlcommons+training_results_v5.1" / "repo"
MLPERF_V51_COMMIT = "441d65f4445cd59687466533fd9f55399136e7a4"


def test_megatrons_docstring_example() -> None:
    # generate_masked_orthogonal_rank_groups' docstring: parallel_size [tp, dp, pp] = [2, 3, 4]
    # in order tp-dp-pp, the dp groups: dp_group[0] = [0, 2, 4], dp_group[1] = [1, 3, 5], ...,
    # dp_group[7] = [19, 21, 23].
    dp = groups({"tp": 2, "dp": 3, "pp": 4}, "tp-dp-pp", "dp")
    assert dp[0] == [0, 2, 4] and dp[1] == [1, 3, 5] and dp[7] == [19, 21, 23] and len(dp) == 8
    # and its 'tp-pp-dp' 2-2-2 example: the dp groups are [[0, 4], [1, 5], [2, 6], [3, 7]].
    assert groups({"tp": 2, "pp": 2, "dp": 2}, "tp-pp-dp", "dp") == [[0, 4], [1, 5], [2, 6], [3, 7]]


def _megatron() -> dict[str, Any]:
    """Megatron-core's RankGenerator and generate_masked_orthogonal_rank_groups, compiled from its
    own source at MEGATRON_COMMIT (the rest of parallel_state.py needs torch.distributed)."""
    if not MEGATRON.is_dir():
        pytest.skip(f"no mirror of NVIDIA/Megatron-LM at {MEGATRON}")
    source = subprocess.run(["git", "-C", str(MEGATRON), "show", f"{MEGATRON_COMMIT}:megatron/core/parallel_state.py"],
                            capture_output=True, text=True, check=True).stdout
    tree = ast.parse(source)
    wanted = [n for n in tree.body if getattr(n, "name", "") in ("generate_masked_orthogonal_rank_groups",
                                                                    "RankGenerator")]
    assert len(wanted) == 2
    namespace: dict[str, Any] = {}
    exec(compile("from typing import List, Optional\n", "<typing>", "exec"), namespace)  # noqa: S102
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "parallel_state.py", "exec"), namespace)  # noqa: S102
    return namespace


@pytest.mark.parametrize("order", [DEFAULT_ORDER, TP_PP_DP_ORDER])
@pytest.mark.parametrize("tp,cp,pp,dp", [(4, 2, 8, 4), (8, 2, 4, 2), (2, 1, 4, 8), (4, 1, 1, 16), (1, 4, 2, 3)])
def test_groups_are_megatron_cores_own(order: str, tp: int, cp: int, pp: int, dp: int) -> None:
    ns = _megatron()
    gen = ns["RankGenerator"](tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order=order)
    sizes = {"tp": tp, "cp": cp, "pp": pp, "dp": dp}
    for dim in ("tp", "cp", "pp", "dp"):
        assert groups(sizes, order, dim) == gen.get_ranks(dim), (dim, order)


def test_the_mapping_switch_is_what_megatron_and_nvidias_implementation_read() -> None:
    if not MEGATRON.is_dir():
        pytest.skip(f"no mirror of NVIDIA/Megatron-LM at {MEGATRON}")
    init = subprocess.run(["git", "-C", str(MEGATRON), "show", f"{MEGATRON_COMMIT}:megatron/training/initialize.py"],
                          capture_output=True, text=True, check=True).stdout
    assert f"order='{DEFAULT_ORDER}' if not args.use_tp_pp_dp_mapping else '{TP_PP_DP_ORDER}'" in init
    if not MLPERF_V51.is_dir():
        pytest.skip(f"no mirror of mlcommons/training_results_v5.1 at {MLPERF_V51}")
    impl = "NVIDIA/benchmarks/llama31_405b/implementations/hsg_ngpu5120_ngc25.09_nemo"
    conf = subprocess.run(["git", "-C", str(MLPERF_V51), "show", f"{MLPERF_V51_COMMIT}:{impl}/conf/custom.yaml"],
                          capture_output=True, text=True, check=True).stdout
    assert "use_tp_pp_dp_mapping: ${oc.decode:${oc.env:TP_PP_DP_MAPPING,False}}" in conf
    pretrain = subprocess.run(["git", "-C", str(MLPERF_V51), "show", f"{MLPERF_V51_COMMIT}:{impl}/pretrain.py"],
                              capture_output=True, text=True, check=True).stdout
    assert "use_tp_pp_dp_mapping=use_tp_pp_dp_mapping," in pretrain


def test_order_from_the_effective_environment() -> None:
    assert order_from({"TP_PP_DP_MAPPING": "True"}, {"TP_PP_DP_MAPPING": "config_common.sh:95"}) == (
        TP_PP_DP_ORDER, "TP_PP_DP_MAPPING=True [config_common.sh:95]")
    assert order_from({"TP_PP_DP_MAPPING": "False"})[0] == DEFAULT_ORDER
    assert order_from({}) == (DEFAULT_ORDER, "Megatron-core's default; TP_PP_DP_MAPPING unset")
    # Default order: pipeline stages sit DP*TP*CP ranks apart; with the mapping, TP*CP.
    sizes = {"tp": 4, "cp": 2, "pp": 8, "dp": 128}
    assert strides(sizes, DEFAULT_ORDER)["pp"] == 4 * 2 * 128 and strides(sizes, TP_PP_DP_ORDER)["pp"] == 8
    assert span(sizes, TP_PP_DP_ORDER, "dp", 4, 16).racks == 128


def test_405b_on_2048_gb200_keeps_tp_cp_pp_on_nvlink_and_dp_on_infiniband() -> None:
    r = resolve("llama31_405b", "gb200", 2048)
    p = r.placement
    assert p is not None and p.order == TP_PP_DP_ORDER and p.rack_vms == 16
    assert "config_common.sh:95" in p.order_source  # read from the vendored config, not assumed
    assert p.links == {"tp": "nvlink", "cp": "nvlink", "pp": "nvlink", "dp": "infiniband"}
    assert {d: (s.nodes, s.racks) for d, s in p.spans.items()} == {
        "tp": (1, 1), "cp": (2, 1), "pp": (8, 1), "dp": (128, 128)}
    assert p.scale_out == ("Over the InfiniBand scale-out fabric: DP (groups of 128 over 128 nodes in 128 racks); "
                           "TP, CP, PP stay on NVLink inside one rack.")
    assert p.warnings == [] and not any("leaves its NVLink domain" in w for w in r.warnings)


def test_without_the_mapping_pipeline_stages_cross_racks() -> None:
    r = resolve("llama31_405b", "gb200", 2048, env={"TP_PP_DP_MAPPING": "False"})
    p = r.placement
    assert p is not None and p.order == DEFAULT_ORDER
    assert p.links["pp"] == "infiniband" and p.spans["pp"].racks == 8 and p.spans["pp"].stride == 1024
    assert p.links["tp"] == p.links["cp"] == "nvlink"
    assert r.env["TP_PP_DP_MAPPING"] == "False" and r.env_sources["TP_PP_DP_MAPPING"].startswith("-p on the command line")
    [warning] = [w for w in r.warnings if "leaves its NVLink domain" in w]
    assert warning.startswith("PP 8 leaves its NVLink domain (one rack of 16 VMs): its groups span 8 nodes in 8 racks")


def test_run_dry_run_and_recipes_show_print_the_map(tmp_path: Path) -> None:
    dry = azbench_in_process("run", "llama31_405b", "--sku", "gb200", "--nodes", "2048", "--dry-run",
                             "-p", "TP_PP_DP_MAPPING=False", home=tmp_path)
    assert dry.code == 0, dry.err
    assert "PP infiniband (8 nodes, 8 racks)" in dry.out and "warning: PP 8 leaves its NVLink domain" in dry.out
    assert dry.out.index("source \"$AZBENCH_ATTEMPT_DIR/submission-config/\"config_GB200") < \
        dry.out.index("export TP_PP_DP_MAPPING=False")  # after the config, so it wins
    data = json.loads(azbench_in_process("run", "llama31_405b", "--sku", "gb200", "--nodes", "2048", "--dry-run",
                                         "--json", home=tmp_path).out)
    placement = data[0]["resolved"]["placement"]
    assert placement["links"] == {"tp": "nvlink", "cp": "nvlink", "pp": "nvlink", "dp": "infiniband"}
    assert placement["spans"]["dp"] == {"size": 128, "stride": 64, "nodes": 128, "racks": 128}
    assert placement["scale_out"].startswith("Over the InfiniBand scale-out fabric: DP")
    shown = azbench_in_process("recipes", "show", "llama31_405b", "--sku", "h100", "--nodes", "64", home=tmp_path)
    assert shown.code == 0, shown.err
    # ND H100 v5: one VM is the NVLink domain; NVIDIA's v5.0 405B config has CP 2 and PP 8 across VMs.
    assert "warning: CP 2 leaves its NVLink domain (one VM of 8 GPUs)" in shown.out
    assert "warning: PP 8 leaves its NVLink domain (one VM of 8 GPUs)" in shown.out
    assert "placement: rank order tp-cp-ep-dp-pp (Megatron-core's default; TP_PP_DP_MAPPING unset)" in shown.out


def test_mlperf_parameters_are_environment_variables_the_implementation_reads() -> None:
    recipe = get_recipe("llama31_405b")
    assert check_params(recipe, {"TP_PP_DP_MAPPING": False}) == {"TP_PP_DP_MAPPING": "False"}
    with pytest.raises(ConfigError, match="takes environment variables"):
        check_params(recipe, {"target": "5"})
    with pytest.raises(ConfigError, match="-p NOT_READ: .* does not read it"):
        resolve("llama31_405b", "gb200", 2048, env={"NOT_READ": "1"})
