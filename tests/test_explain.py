"""The step-time model (orchestrator/explain): hand-computed cases against the formulas' sources,
the fit recovering parameters it generated, the published v5.1 405B GB200 systems, `plan`'s
model at Azure's 2,048-VM 405B config, and `azbench explain` (published, run, CPU smoke run).

Sources of the hand computations:
- FLOPs per token 6N + 12·L·h·s: Kaplan et al. 2020 §2.1 (6N), Chowdhery et al. 2022 (PaLM)
  Appendix B (12·L·H·Q·T with H·Q = h, T = s).
- Interleaved 1F1B bubble (p − 1)/(v·m): Narayanan et al. 2021 (SC'21) §2.2.
- Ring collectives: nccl-tests doc/PERFORMANCE.md: busbw = algbw·2(n−1)/n for all_reduce,
  algbw·(n−1)/n for all_gather and reduce_scatter; algbw = size / time.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.explain import account, model
from orchestrator.explain.fit import GLOBAL, fit, fitted_params
from orchestrator.explain.model import (
    ALPHA_IB_S, ALPHA_NVLINK_S, IB_EFFICIENCY, Hardware, Params, StepConfig, bubble_fraction,
    dp_chunks, flops_per_token, group_time, predict, ring_time, terms,
)
from orchestrator.explain.published import hardware_of, modelled, scales
from orchestrator.hardware.catalog import lookup
from orchestrator.models import Cluster
from orchestrator.store.database import Store
from orchestrator.store.schema import ResultRow, RunRow
from tests.cli_helpers import azbench_in_process

HW = Hardware(peak_tflops=1000.0, gpus_per_node=8, domain_nodes=1, nvlink_busbw_gbs=400.0,
              ib_gbs_per_gpu=50.0)


def test_flops_per_token_is_6n_plus_palms_attention_term() -> None:
    c = StepConfig(benchmark="llama31_405b", params=405e9, layers=126, d_model=16384, seq_len=8192,
                   gbs=1152, mbs=1, gpus=512, tp=4, pp=8, cp=2, vp=8)
    # 6 x 405e9 = 2.43e12; 12 x 126 x 16,384 x 8,192 = 202,937,204,736
    assert flops_per_token(c) == pytest.approx(2.43e12 + 202_937_204_736, rel=1e-12)
    lora = replace(c, benchmark="llama2_70b_lora", params=70e9, layers=80, d_model=8192,
                   trainable_params=44_564_480)
    # frozen base: 4N + 2 N_train + 12 L h s = 2.8e11 + 89,128,960 + 64,424,509,440
    assert flops_per_token(lora) == pytest.approx(2.8e11 + 89_128_960 + 64_424_509_440, rel=1e-12)


@pytest.mark.parametrize("pp,vp,m,expected", [(8, 8, 16, 7 / 128), (4, 1, 8, 3 / 8), (1, 1, 4, 0.0),
                                              (8, 1, 1, 7.0)])
def test_bubble_is_p_minus_1_over_v_m(pp: int, vp: int, m: int, expected: float) -> None:
    assert bubble_fraction(pp, vp, m) == pytest.approx(expected)


def test_ring_all_reduce_and_all_gather_times_follow_nccl_tests_bus_bandwidth() -> None:
    # 1 GB over 8 ranks at 100 GB/s busbw: all_reduce 2*7/8 * 1e9 / 1e11 = 17.5 ms; all_gather 8.75 ms
    assert ring_time(1e9, 8, 100.0, "ar") == pytest.approx(0.0175)
    assert ring_time(1e9, 8, 100.0, "ag") == pytest.approx(0.00875)
    # with a latency of 10 us per step: 2(n-1) = 14 steps for all_reduce
    assert ring_time(1e9, 8, 100.0, "ar", 1e-5) == pytest.approx(0.0175 + 14e-5)
    assert ring_time(1e9, 1, 100.0, "ar") == 0.0


def test_a_group_in_one_domain_is_an_nvlink_ring_and_one_member_per_domain_an_infiniband_ring() -> None:
    inside = group_time(1e9, 8, 1, HW)
    assert inside == pytest.approx(1e9 * 7 / 8 / 400e9 + 7 * ALPHA_NVLINK_S)
    across = group_time(1e9, 16, 16, HW)
    assert across == pytest.approx(1e9 * 15 / 16 / (HW.inter_gbs * 1e9) + 15 * ALPHA_IB_S)
    # 4 domains of 8: the NVLink ring over 8, then 1/8 of the data over 4 domains
    two_level = group_time(1e9, 32, 4, HW)
    assert two_level == pytest.approx(1e9 * 7 / 8 / 400e9 + 7 * ALPHA_NVLINK_S
                                      + 1e9 / 8 * 3 / 4 / (HW.inter_gbs * 1e9) + 3 * ALPHA_IB_S)


def test_the_parts_add_up_to_the_step_and_compute_is_flops_over_the_achieved_rate() -> None:
    c = StepConfig(benchmark="gpt3", params=175e9, layers=96, d_model=12288, seq_len=2048, gbs=2048,
                   mbs=2, gpus=512, tp=4, pp=8, vp=4)
    p = Params(slowdown=2.0, elementwise_s=0.0, tp_exposed=0.5, tp_exposed_plain=1.0, cp_exposed=0.5,
               pp_exposed=0.5, dp_exposed=0.5, opt_s_per_gb=0.01, other_s=0.01)
    b = predict(c, HW, p)
    assert b.step_s == pytest.approx(sum(b.components.values()))
    assert set(b.components) == set(model.COMPONENTS)
    # the weight GEMMs (6N) at the run's peak, causal attention (6·L·h·s) at the BF16 peak (this
    # HW has none: the run's), each at its own achieved share (2.0 and attention_slowdown 1.0)
    assert model.gemm_flops_per_token(c) == 6 * 175e9
    assert model.attention_flops_per_token(c) == 6 * 96 * 12288 * 2048
    assert flops_per_token(c) == 6 * 175e9 + 12 * 96 * 12288 * 2048  # MFU's count is unchanged
    gemm, attention = (2048 * 2048 * f(c) for f in (model.gemm_flops_per_token, model.attention_flops_per_token))
    assert b.components["compute"] == pytest.approx(gemm / 512 / (1000e12 / 2.0) + attention / 512 / 1000e12)
    halved = predict(c, replace(HW, bf16_peak_tflops=500.0), replace(p, attention_slowdown=1.5))
    assert halved.components["compute"] - b.components["compute"] == pytest.approx(
        attention / 512 / 500e12 * 1.5 - attention / 512 / 1000e12)
    m = 2048 // (16 * 2)  # DP = 512 / 32 = 16
    assert b.components["pp_bubble"] == pytest.approx(b.components["compute"] * 7 / (4 * m))
    assert b.terms.leaves_domain == ["pp", "dp"]  # 8 GPUs per domain: TP 4 stays, PP and DP leave


def test_the_fit_recovers_the_parameters_it_generated_the_steps_with() -> None:
    pool = modelled()
    truth = fitted_params()
    synthetic = []
    for s in pool:
        params, _ = truth.params_for(s.group, s.round)
        assert s.config is not None and s.hardware is not None
        synthetic.append(replace(s, step_s=predict(s.config, s.hardware, params).step_s))
    again = fit(synthetic)
    for group, value in truth.slowdown.items():
        assert again.slowdown[group] == pytest.approx(value, rel=1e-3), group
    for name in GLOBAL:
        assert again.shared[name] == pytest.approx(truth.shared[name], rel=1e-2, abs=1e-6), name
    for round_name, value in truth.overhead.items():
        assert again.overhead[round_name] == pytest.approx(value, rel=1e-2, abs=1e-5), round_name


def test_each_round_has_its_own_overhead_and_a_later_round_follows_the_trend() -> None:
    f = replace(fitted_params(), overhead={"v4.1": 0.08, "v5.0": 0.06}, round_counts={"v4.1": 3, "v5.0": 5})
    assert f.overhead_for("v5.0") == (0.06, "fitted on 5 scale(s) of v5.0")
    assert f.overhead_for(None)[0] == 0.06  # plan and azbench's own runs: the newest round's software
    later, why = f.overhead_for("v5.1")  # 60 ms x (60 / 80)
    assert later == pytest.approx(0.045) and "ratio" in why
    assert f.params_for(("h100", "fp8"), "v4.1")[0].other_s == 0.08
    assert f.overhead_for("v4.0")[0] == 0.08 and f.overhead_for("v4.0")[1] == "the nearest fitted round's (v4.1)"
    flat = replace(f, overhead={"v4.1": 0.05, "v5.0": 0.06})  # never extrapolated upward
    assert flat.overhead_for("v5.1")[0] == pytest.approx(0.06)
    rows = {str(r["name"]): r for r in f.table()}
    assert rows["other_s: fixed per-step overhead of the round's software [v4.1]"]["value"] == 0.08


def test_exposed_dp_is_one_chunk_when_the_backward_keeps_up_and_the_queue_when_not() -> None:
    # Megatron Bridge, "Communication Overlap": one DP chunk exposed; chunks = VP with PP, layers without
    c = StepConfig(benchmark="llama31_8b", params=8e9, layers=32, d_model=4096, seq_len=8192, gbs=64,
                   mbs=1, gpus=64)
    assert dp_chunks(c) == 32 and dp_chunks(replace(c, pp=4, vp=5, gbs=256)) == 5
    t = terms(c, HW)
    chunk = t.dp_raw / 32
    assert t.dp_overlap == pytest.approx(2 / 3 / 32)  # one layer's backward of the one microbatch
    slow_net = chunk * 32 / 2  # b = chunk / 2 when the compute is half the chunk time x 32 x 3/2 ...
    b = t.dp_overlap * slow_net
    assert model.exposed_dp(t, slow_net) == pytest.approx(chunk + 31 * (chunk - b))
    assert model.exposed_dp(t, 1e9) == pytest.approx(chunk)  # a long backward hides all but one
    pp = terms(replace(c, pp=4, vp=5, gbs=256), HW)  # m = 256 / 16 = 16 >= PP: 4 microbatch-chunks
    assert pp.dp_overlap == pytest.approx(2 / 3 * 4 / (16 * 5))


def test_a_dp_collective_the_config_does_not_overlap_is_exposed_whole() -> None:
    # Megatron's OVERLAP_GRAD_REDUCE / OVERLAP_PARAM_GATHER off: the reduce-scatter runs after the
    # backward (the all-gather before the forward) as one call, nothing to hide it behind
    c = StepConfig(benchmark="llama31_8b", params=8e9, layers=32, d_model=4096, seq_len=8192, gbs=64,
                   mbs=1, gpus=64)
    rs = group_time(c.params * 2, 64, 8, HW)  # BF16 gradients over 8 nodes of 8
    ag = group_time(c.params * 2, 64, 8, HW)  # BF16 parameters (no FP8 gather)
    params = Params(slowdown=2.0, elementwise_s=0.0, tp_exposed=0.5, tp_exposed_plain=1.0, cp_exposed=0.5,
                    pp_exposed=0.5, dp_exposed=0.5, opt_s_per_gb=0.0, other_s=0.0)
    both = predict(c, HW, params)
    assert both.terms.dp_raw == pytest.approx(rs + ag) and both.terms.dp_serial == 0.0
    assert both.components["dp_comm"] == pytest.approx(model.exposed_dp(both.terms, both.components["compute"]) * 0.5)
    no_rs = predict(replace(c, overlap_grad_reduce=False), HW, params)
    assert no_rs.terms.dp_raw == pytest.approx(ag) and no_rs.terms.dp_serial == pytest.approx(rs)
    assert no_rs.components["dp_comm"] == pytest.approx(
        rs + model.exposed_dp(no_rs.terms, no_rs.components["compute"]) * 0.5)
    neither = predict(replace(c, overlap_grad_reduce=False, overlap_param_gather=False), HW, params)
    assert neither.components["dp_comm"] == pytest.approx(rs + ag)  # no fitted exposure applies
    assert neither.step_s > no_rs.step_s > both.step_s
    # the plan reads the switches from the config (-p), and its layout says which it used
    on = account.plan_explain("llama31_405b", "gb200", 2048)
    off = account.plan_explain("llama31_405b", "gb200", 2048, {"OVERLAP_GRAD_REDUCE": "False"})
    assert on.layout["overlap_grad_reduce"] is True and off.layout["overlap_grad_reduce"] is False
    assert off.components["dp_comm"] > 4 * on.components["dp_comm"]
    assert account.not_overlapped(on.layout) == ""


def test_plan_says_which_dp_collective_a_config_leaves_unoverlapped(tmp_path: Path) -> None:
    r = azbench_in_process("plan", "llama31_405b", "--sku", "gb200", "--nodes", "2048",
                           "-p", "OVERLAP_GRAD_REDUCE=False", home=tmp_path, env={"COLUMNS": "400"})
    assert r.code == 0, r.err
    (line,) = [x for x in r.out.splitlines() if x.startswith("step model at 2,048 nodes")]
    assert "DP reduce-scatter (OVERLAP_GRAD_REDUCE off) not overlapped: exposed whole" in line
    assert "all-gather (" not in line  # only the reduce-scatter is off...
    assert "Megatron-LM refuses OVERLAP_PARAM_GATHER without OVERLAP_GRAD_REDUCE" in line  # ...which Megatron refuses
    both = azbench_in_process("plan", "llama31_405b", "--sku", "gb200", "--nodes", "2048", "-p",
                              "OVERLAP_GRAD_REDUCE=False", "-p", "OVERLAP_PARAM_GATHER=False",
                              home=tmp_path, env={"COLUMNS": "400"})
    assert both.code == 0, both.err
    assert ("DP reduce-scatter (OVERLAP_GRAD_REDUCE off) and all-gather (OVERLAP_PARAM_GATHER off) not "
            "overlapped: exposed whole)" in both.out) and "refuses" not in both.out


def test_plan_says_whose_software_overhead_the_step_model_costs(tmp_path: Path) -> None:
    """gpt3's 1,344-VM scale is Azure's v3.1 config; plan costs every config on the newest fitted
    round's per-step overhead, and says so (the JSON and the terminal)."""
    newest = fitted_params().overhead_for(None)
    e = account.plan_explain("gpt3", "h100", 1344)
    assert e.overhead_source == newest[1] and e.components["other"] == pytest.approx(newest[0])
    assert e.layout["vp"] == 12  # conf/custom.yaml's default: the config sets no INTERLEAVED_PIPELINE
    r = azbench_in_process("plan", "gpt3", "--sku", "h100", "--nodes", "1344", home=tmp_path,
                           env={"COLUMNS": "400"})
    assert r.code == 0, r.err
    assert f"step model's other: the software's per-step overhead, {newest[1]}" in r.out.splitlines()


def test_the_table_has_at_least_40_modelled_scales_over_the_four_llm_benchmarks() -> None:
    pool = modelled()
    assert len(pool) >= 40
    assert {s.benchmark for s in pool} == {"gpt3", "llama2_70b_lora", "llama31_8b", "llama31_405b"}
    assert all(s.why_not for s in scales() if s.hardware is None)  # never predicted without a row


@pytest.mark.parametrize("system", ["tyche_ngpu512_ngc25.09_nemo", "hsg_ngpu2560_ngc25.09_nemo",
                                    "hsg_ngpu5120_ngc25.09_nemo"])
def test_the_v51_405b_gb200_systems_are_predicted_within_8_percent(system: str) -> None:
    s = next(x for x in scales() if x.system == system and x.benchmark == "llama31_405b")
    e = account.report_summary("v5.1", "NVIDIA", system, "llama31_405b", s.step_s)
    assert e is not None and e.predicted_step_s is not None and e.error is not None
    assert abs(e.error) <= 0.08, (system, e.error)
    assert sum(e.components.values()) == pytest.approx(e.predicted_step_s, rel=0.01)
    assert {"compute", "pp_bubble", "dp_comm"} <= set(e.components)


def test_plan_model_at_azures_2048_vm_405b_config() -> None:
    at = {n: account.plan_explain("llama31_405b", "gb200", n) for n in (2048, 1792)}
    e = at[2048]
    assert e.layout["tp"] == 4 and e.layout["pp"] == 8 and e.layout["vp"] == 8 and e.layout["cp"] == 2
    assert e.layout["gbs"] == 1024
    assert e.predicted_step_s is not None and abs(e.predicted_step_s - 1.27) / 1.27 <= 0.10
    assert e.leaves_nvlink_domain == ["DP"]  # TP, CP and PP stay in the rack
    # exposed DP: one chunk of the DP collectives (dp_raw / VP, Megatron Bridge's "Communication
    # Overlap" page) on ND GB200 v6's 4 x 400 Gb/s per 4 GPUs, about 59 ms; on the seed's Fairwater
    # fabric (100 GB/s per GPU, seed 004) the same config's chunk is within 2x of Azure's ~20 ms
    resolved = account.resolve_config("llama31_405b", "gb200", 2048)
    config = account.from_resolved(resolved)
    hw = hardware_of(lookup("gb200"), config.precision)
    assert hw is not None and resolved.placement is not None
    hw = replace(hw, domain_nodes=resolved.placement.rack_vms)
    params, _ = fitted_params().params_for(("gb200", config.precision))
    chunk = terms(config, hw).dp_raw / 8
    assert e.components["dp_comm"] == pytest.approx(chunk * params.dp_exposed)
    assert e.cross_domain_gbs == pytest.approx(50 * IB_EFFICIENCY) and "ND GB200 v6" in e.cross_domain_source
    seed = account.plan_explain("llama31_405b", "gb200", 2048, cross_domain_gbs=100.0)
    assert 0.010 <= seed.components["dp_comm"] <= 0.040 < e.components["dp_comm"]
    assert seed.cross_domain_source == "--cross-domain-gbs" and seed.predicted_step_s is not None
    assert seed.predicted_step_s < e.predicted_step_s
    assert at[1792].predicted_step_s is not None
    assert abs(at[1792].predicted_step_s - e.predicted_step_s) < 0.010
    tp8 = account.plan_explain("llama31_405b", "gb200", 2048, {"TENSOR_MODEL_PARALLEL": "8"})
    assert tp8.layout["tp"] == 8 and tp8.layout["dp"] == 64
    assert "PP" in tp8.leaves_nvlink_domain and tp8.links["pp"].startswith("InfiniBand")


def test_the_stored_checks_are_what_the_model_gives_today() -> None:
    from orchestrator.explain.validate import checks_document
    from orchestrator.paths import recipes_dir
    stored = json.loads((recipes_dir() / account.CHECKS_FILE).read_text())
    assert stored == json.loads(json.dumps(checks_document())), "rerun benchmarks/bench_explain.py"


def test_explain_a_published_system_as_json_and_a_bad_one_in_one_line(tmp_path: Path) -> None:
    r = azbench_in_process("explain", "--system", "v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo",
                           "--benchmark", "llama31_405b", "-o", "json", home=tmp_path)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["measured_step_s"] == pytest.approx(2.22759)
    assert sum(doc["components"].values()) == pytest.approx(doc["predicted_step_s"])
    assert doc["gap"].startswith("measured 2.23 s, predicted")
    bad = azbench_in_process("explain", "--system", "nope", "--benchmark", "gpt3", home=tmp_path)
    assert bad.code == 2 and bad.err.count("\n") == 1 and "no published gpt3 scale" in bad.err


def test_explain_on_a_cpu_smoke_run_says_not_predicted_and_why(tmp_path: Path) -> None:
    home = tmp_path / "home"
    import os
    old = os.environ.get("AZBENCH_HOME")
    os.environ["AZBENCH_HOME"] = str(home)
    try:
        with Store.open() as store:
            store.save_cluster(Cluster(name="local", provider="local", sku="Local_CPU", nodes=2))
            store.create_run(RunRow(id="r1", cluster="local", recipe="smoke", benchmark="smoke", nodes=2))
    finally:
        if old is None:
            os.environ.pop("AZBENCH_HOME", None)
        else:
            os.environ["AZBENCH_HOME"] = old
    r = azbench_in_process("explain", "r1", home=home)
    assert r.code == 0, r.err
    assert "predicted step: not predicted" in r.out
    assert "no model of 'smoke'" in r.out or "cannot be modelled" in r.out
    assert "has no GPU" in r.out
    j = azbench_in_process("explain", "r1", "-o", "json", home=home)
    doc = json.loads(j.out)
    assert doc["predicted_step_s"] is None and doc["components"] == {} and doc["not_predicted"]


def test_explain_prints_a_hostile_run_id_without_its_control_characters(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path))
    hostile = "r\x1b]0;pwn\x07\u202e"
    with Store.open() as store:
        store.save_cluster(Cluster(name="local", provider="local", sku="Local_CPU", nodes=2))
        store.create_run(RunRow(id=hostile, cluster="local", recipe="smoke", benchmark="smoke", nodes=2))
    r = azbench_in_process("explain", hostile, home=tmp_path)
    assert r.code == 0, r.err
    assert r.out.startswith("run r]0;pwn (smoke") and not any(ch in r.out for ch in "\x1b\x07\u202e")


def test_a_result_row_type_is_what_the_report_hook_reads() -> None:
    # the report matches a group to the table by (round, submitter, system, benchmark)
    assert account.report_summary("v5.1", "NVIDIA", "not-a-system", "llama31_405b", 1.0) is None
    assert "run_id" in ResultRow.model_fields
    assert lookup("gb200").peak_tflops("fp4")


MIRRORS = Path(os.environ.get("AZBENCH_MIRRORS", Path(__file__).resolve().parents[2] / ".mirror"))
V51 = MIRRORS / "mlcommons+training_results_v5.1" / "repo"
V51_COMMIT = "441d65f4445cd59687466533fd9f55399136e7a4"


def test_report_json_explains_the_published_v51_405b_gb200_logs(tmp_path: Path) -> None:
    """The published logs themselves (a mirror of mlcommons/training_results_v5.1 where there is
    one), imported and reported: `explain` per group within 8 % of the measured median step."""
    import subprocess

    from orchestrator.recipes.catalog import model_facts
    from orchestrator.report.build import build_report
    from orchestrator.results.importer import import_path
    if not (V51 / "HEAD").exists():
        pytest.skip(f"no mirror of mlcommons/training_results_v5.1 at {V51}")
    systems = ("tyche_ngpu512_ngc25.09_nemo", "hsg_ngpu2560_ngc25.09_nemo", "hsg_ngpu5120_ngc25.09_nemo")
    tree = tmp_path / "tree" / "v5.1" / "NVIDIA"
    for system in systems:
        folder = tree / "results" / system / "llama31_405b"
        folder.mkdir(parents=True)
        for k in range(3):
            folder.joinpath(f"result_{k}.txt").write_bytes(subprocess.run(
                ["git", "-C", str(V51), "show", f"{V51_COMMIT}:NVIDIA/results/{system}/llama31_405b/result_{k}.txt"],
                capture_output=True, check=True).stdout)
        (tree / "systems").mkdir(exist_ok=True)
        (tree / "systems" / f"{system}.json").write_bytes(subprocess.run(
            ["git", "-C", str(V51), "show", f"{V51_COMMIT}:NVIDIA/systems/{system}.json"],
            capture_output=True, check=True).stdout)
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        import_path(store, tmp_path / "tree", archive_dir=tmp_path / "archive", check_compliance=False)
        report = build_report(store.list_results(), model_facts=model_facts())
    finally:
        store.close()
    doc = json.loads(report.model_dump_json())
    seen = 0
    for g in doc["groups"]:
        e = g["explain"]
        assert e is not None, g["system"]
        assert e["measured_step_s"] == pytest.approx(g["step_stats"]["median"])
        assert abs(e["error"]) <= 0.08, (g["system"], e["error"])
        assert sum(e["components"].values()) == pytest.approx(e["predicted_step_s"], rel=0.01)
        seen += 1
    assert seen == 3


def test_a_measured_busbw_gives_back_the_cross_domain_rate_it_was_made_with() -> None:
    # 4 domains of 8: a collective costed with a 30 GB/s inter rate, read back as nccl-tests' busbw
    hw = replace(HW, inter_busbw_gbs=30.0)
    size, n = 8e9, 32
    t = group_time(size, n, 4, hw) - (7 * ALPHA_NVLINK_S + 3 * ALPHA_IB_S)
    busbw = size * (n - 1) / n / t / 1e9
    assert model.inter_rate_from_busbw(busbw, n, 4, HW) == pytest.approx(30.0, rel=1e-9)
    assert model.inter_rate_from_busbw(busbw, n, 1, HW) is None


def test_the_site_stacks_the_parts_beside_the_measured_step_and_markdown_lists_them() -> None:
    from orchestrator.report import figures
    from orchestrator.report.build import GroupReport
    from orchestrator.report.render import sections
    e = account.ReportExplain(predicted_step_s=1.2, measured_step_s=1.3,
                              components={"compute": 1.0, "pp_bubble": 0.15, "dp_comm": 0.05, "cp_comm": 0.0},
                              error=-0.1 / 1.3)
    g = GroupReport(benchmark="llama31_405b", system="sys", runs=1, required_runs=3, converged=1, explain=e)
    none = GroupReport(benchmark="llama31_405b", system="other", runs=1, required_runs=3, converged=1)
    fig = figures.explain([g, none])
    assert fig is not None and fig["layout"]["barmode"] == "stack"
    parts = [t for t in fig["data"] if t.get("offsetgroup") == "model"]
    assert [t["name"] for t in parts] == ["compute", "pp_bubble", "dp_comm"]  # zero parts left out
    assert sum(t["x"][0] for t in parts) == pytest.approx(1.2)
    (measured,) = [t for t in fig["data"] if t.get("offsetgroup") == "measured"]
    assert measured["x"] == [1.3] and len(measured["y"]) == 1  # the unexplained group is not drawn
    assert figures.explain([none]) is None
    from orchestrator.report.build import Report
    report = Report(groups=[g, none])
    (title, header, rows), = [s for s in sections(report) if s[0].startswith("The step explained")]
    assert header[2:5] == ["measured step (s)", "model step (s)", "error"] and len(rows) == 1
    assert rows[0][2] == "1.3000" and rows[0][3] == "1.2000"


def test_a_stored_fabric_test_re_predicts_the_step_in_the_gap() -> None:
    from orchestrator.explain.published import hardware_of
    row = lookup("gb200")
    hw = hardware_of(row, "fp4")
    assert hw is not None
    hw16 = replace(hw, domain_nodes=16, inter_busbw_gbs=10.0)  # a slow fabric: 10 GB/s per GPU between racks
    ranks, domains = 1024, 16
    size = 16e9
    t = group_time(size, ranks, domains, hw16) - ((ranks // domains - 1) * ALPHA_NVLINK_S + (domains - 1) * ALPHA_IB_S)
    busbw = size * (ranks - 1) / ranks / t / 1e9
    e = account.explain_run("r9", "llama31_405b", 2048, "gb200", 1.41, 1000,
                            fabric=(busbw, ranks, 256, "all_reduce on 256 nodes"))
    assert e.predicted_step_s is not None
    assert "re-predicted with it" in e.gap and "10 GB/s between domains" in e.gap
    again = float(e.gap.rsplit("re-predicted with it, ", 1)[1].split(" s")[0])
    assert again > e.predicted_step_s  # a slower cross-rack rate exposes more dp_comm
    assert e.gap.startswith("measured 1.41 s, predicted")


def test_explain_a_gpu_run_with_its_stored_steps(tmp_path: Path) -> None:
    """A run of the 405B recipe on 128 GB200 VMs (the tyche_ngpu512 config) with 21 stored steps:
    the prediction for that config beside the median of the kept steps (step 0 dropped)."""
    from orchestrator.results.mllog import RunSummary, StepTime
    home = tmp_path / "home"
    old = os.environ.get("AZBENCH_HOME")
    os.environ["AZBENCH_HOME"] = str(home)
    steps = [StepTime(0, 60.0)] + [StepTime(i, 17.0 + 0.01 * i) for i in range(1, 21)]
    try:
        with Store.open() as store:
            store.save_cluster(Cluster(name="gb", provider="fake", sku="Standard_ND128isr_NDR_GB200_v6", nodes=128))
            store.create_run(RunRow(id="r2", cluster="gb", recipe="llama31_405b", benchmark="llama31_405b", nodes=128))
            store.add_result(ResultRow(content_hash="h", run_id="r2", source="run", benchmark="llama31_405b",
                                       status="success", converged=True, nodes=128, gpus=512,
                                       sku="Standard_ND128isr_NDR_GB200_v6",
                                       summary_json=RunSummary(benchmark="llama31_405b", step_times=steps,
                                                               step_time_source="tracked_stats").model_dump_json()))
    finally:
        if old is None:
            os.environ.pop("AZBENCH_HOME", None)
        else:
            os.environ["AZBENCH_HOME"] = old
    r = azbench_in_process("explain", "r2", "-o", "json", home=home)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["measured_step_s"] == pytest.approx(17.105)  # the median of steps 1..20
    assert doc["measured_stats"]["count"] == 20
    assert doc["layout"]["tp"] == 4 and doc["layout"]["gbs"] == 1152 and doc["layout"]["precision"] == "fp4"
    assert abs(doc["error"]) < 0.08 and doc["gap"].startswith("measured 17.1 s")
    text = azbench_in_process("explain", "r2", home=home)
    assert "median of 20 kept steps" in text.out and "measured step (median)" in text.out


def test_the_gpu_checks_gemm_rate_bounds_the_share_of_its_gpu_and_a_borrowed_rate() -> None:
    # recipes/published/gemm_rates.csv: one H200, FP8 1,412.9 TFLOP/s of the 1,979 dense peak
    floor = 1979.0 / 1412.9
    pool = [s for s in modelled() if s.group == ("h200", "fp8")]
    assert pool
    # steps half as long would want a share of about twice the fitted one: the bound holds it
    fast = fit([replace(s, step_s=s.step_s * 0.5) for s in modelled()])
    assert fast.slowdown[("h200", "fp8")] == pytest.approx(floor, rel=1e-9)
    # a borrowed rate: H100 FP8 at 91 % of peak would give H200 FP8 the same; the bound says 71 %
    borrowed = replace(fitted_params(), slowdown={("h100", "fp8"): 1.1}, counts={})
    params, how = borrowed.params_for(("h200", "fp8"))
    assert params.slowdown == pytest.approx(floor)
    assert "capped at the GPU check's GEMM rate (71% of peak)" in how
    # --params names the bound and its source
    rows = {str(r["name"]): r for r in fitted_params().table()}
    bound = rows["bound: share of dense peak at most the measured GEMM rate [h200 fp8]"]
    assert bound["value"] == pytest.approx(1412.9 / 1979.0, abs=1e-4) and "gpu_check.jsonl" in str(bound["data"])


def test_a_config_that_sources_its_helpers_from_configs_reads_their_fp8(tmp_path: Path) -> None:
    """NVIDIA's v4.1 LoRA entry configs source `$(dirname $0)/config_common.sh` (FP8=True) that
    the submission keeps in configs/: the table builder puts it beside them, so the row reads FP8."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "step_times", Path(__file__).resolve().parents[1] / "recipes" / "published" / "step_times.py")
    assert spec is not None and spec.loader is not None
    step_times = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(step_times)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "config_common.sh").write_text("export FP8=True\n")
    (tmp_path / "config_DGXH100_8x8x1xtp4pp1cp2.sh").write_text(
        'source $(dirname ${BASH_SOURCE[0]})/config_common.sh\nexport TP=4\nexport FP8_DPA=1\n')
    before = step_times.source(tmp_path, "config_DGXH100_8x8x1xtp4pp1cp2.sh", "8", "8")
    assert step_times.precision(before) == "bf16"  # the helper not found: what the table once read
    assert before[step_times.MISSING].split() == ["config_common.sh"]
    assert step_times._precision_read(before) == ""  # now: not known, never guessed
    step_times._helpers_beside(tmp_path)
    after = step_times.source(tmp_path, "config_DGXH100_8x8x1xtp4pp1cp2.sh", "8", "8")
    assert step_times.precision(after) == "fp8" and after["FP8_DPA"] == "1"
    v41 = [s for s in scales() if s.round == "v4.1" and s.submitter == "NVIDIA"
           and s.benchmark == "llama2_70b_lora" and s.config is not None]
    assert v41 and {s.config.precision for s in v41 if s.config} == {"fp8"}
    # University of Florida's v5.1 configs source a config_common.sh their folder lacks: not modelled
    uf = [s for s in scales() if s.submitter == "University-of-Florida"]
    assert uf and all(s.why_not.startswith("precision not known") for s in uf)


def test_a_gpu_or_precision_without_scales_takes_the_balance_line_of_the_fitted_groups() -> None:
    # two fitted groups, one scale each: H100 FP8 at slowdown 2.0 (x = 1,979 / 3.35), H200 FP8 at
    # 1.5 (x = 1,979 / 4.8); the line through them, read at GB200 FP8 (5,000 / 8) and FP4 (10,000 / 8)
    x100, x200 = 1979.0 / 3.35, 1979.0 / 4.8
    f = replace(fitted_params(), slowdown={("h100", "fp8"): 2.0, ("h200", "fp8"): 1.5},
                counts={("h100", "fp8"): 1, ("h200", "fp8"): 1})
    def line(x: float) -> float:
        return 1.5 + 0.5 * (x - x200) / (x100 - x200)
    fp8, how = f.params_for(("gb200", "fp8"))
    assert fp8.slowdown == pytest.approx(line(625.0)) and "balance line" in how
    fp4, _ = f.params_for(("gb200", "fp4"))
    assert fp4.slowdown == pytest.approx(line(1250.0)) and fp4.slowdown > fp8.slowdown
    # one fitted group: no line; the same GPU's achieved rate at the new precision's peak
    one = replace(f, slowdown={("gb200", "fp8"): 2.0}, counts={("gb200", "fp8"): 1})
    alone, why = one.params_for(("gb200", "fp4"))
    assert alone.slowdown == pytest.approx(4.0) and "achieved rate" in why


def test_plan_takes_another_fabrics_cross_domain_rate_and_says_where_it_came_from(tmp_path: Path) -> None:
    args = ("plan", "llama31_405b", "--sku", "gb200", "--nodes", "2048", "--no-stored", "-o", "json",
            "--query", "rows[0].explain")
    catalog = azbench_in_process(*args, home=tmp_path)
    faster = azbench_in_process(*args, "--cross-domain-gbs", "100", home=tmp_path)
    assert catalog.code == 0 and faster.code == 0, catalog.err + faster.err
    a, b = json.loads(catalog.out), json.loads(faster.out)
    assert a["cross_domain_source"].startswith("catalog: ND GB200 v6") and b["cross_domain_gbs"] == 100.0
    # only DP leaves the rack: the faster fabric shortens dp_comm and nothing on NVLink
    assert b["components"]["dp_comm"] < a["components"]["dp_comm"]
    assert b["components"]["tp_comm"] == a["components"]["tp_comm"]
    # the terminal's step-model line says which rate dp_comm stands on
    shown = azbench_in_process(*args[:6], "--cross-domain-gbs", "100", home=tmp_path)
    assert shown.code == 0, shown.err
    assert re.search(r"dp_comm [0-9.]+ s on 100 GB/s per GPU between NVLink domains \(--cross-domain-gbs\)",
                     " ".join(shown.out.split()))
    bad = azbench_in_process(*args, "--cross-domain-gbs", "-5", home=tmp_path)
    assert bad.code == 2 and bad.err.count("\n") == 1 and "--cross-domain-gbs" in bad.err


def test_an_accelerator_no_azure_size_has_is_predicted_from_its_datasheet_row() -> None:
    from orchestrator.explain.published import peak_of
    from orchestrator.hardware.catalog import find

    b200 = [s for s in modelled() if s.gpu_key == "b200"]
    assert len(b200) >= 10 and {s.round for s in b200} == {"v4.1", "v5.0", "v5.1"}
    assert all(s.hardware is not None and s.hardware.peak_tflops == 4500.0 for s in b200)  # all FP8
    assert find("b200") is None  # recipes/published/published_gpus.csv is no size: never for up or plan
    assert peak_of("b200", "fp4") == 9000.0 and peak_of("h100", "fp8") == 1979.0 and peak_of("x", "fp8") is None
    [e] = account.explain_published("v5.0/Oracle/8xBM.GPU.B200.8", "llama2_70b_lora")
    assert e.predicted_step_s is not None and e.error is not None and abs(e.error) < 0.12
    assert "published_gpus.csv" in e.hardware and "(recipes/published/published_gpus.csv: b200's InfiniBand" in e.gap
