"""Check mllog + metrics + compliance against real MLPerf result logs and their known figures.

The expected figures come from /work/shared/mlperf-logs/expected-scores.jsonl (computed by an
independent stdlib script and cross-checked with mlperf_logging's result_summarizer).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.results import metrics
from orchestrator.results.checkpool import check_log
from orchestrator.results.mllog import RunSummary, parse_file, parse_lines

MINUTES_TOL = 1e-5  # expected minutes are rounded to 6 decimals
EFF_TOL = 1e-5


def _expected(logs: Path) -> tuple[list[dict], list[dict], list[dict]]:
    rows = [json.loads(ln) for ln in (logs / "expected-scores.jsonl").read_text().splitlines()
            if ln.strip()]
    files = [r for r in rows if r.get("kind") == "result_file"]
    series = [s for r in rows if "scaling_series" in r for s in r["scaling_series"]]
    systems = [r for r in rows if "score_minutes" in r and "kind" not in r]
    return files, systems, series


def _folder(logs: Path, rnd: str, submitter: str, system: str, bench: str) -> Path:
    return logs / rnd / submitter / "results" / system / bench


def _system_figures(logs: Path, row: dict) -> dict:
    """Parse one system's result files and compute what expected-scores.jsonl states."""
    folder = _folder(logs, row["round"], row["submitter"], row["system"], row["benchmark"])
    runs = [parse_file(p) for p in sorted(folder.glob("result_*.txt"))]
    minutes = [metrics.time_to_train_minutes(s) for s in runs]
    scaling = folder / "scaling.json"
    factor = json.loads(scaling.read_text())["scaling_factor"] if scaling.is_file() else 1.0
    raw = metrics.mlperf_score(minutes, row["benchmark"])
    official = metrics.mlperf_score(minutes, row["benchmark"], scaling_factor=factor)
    desc = json.loads((logs / row["round"] / row["submitter"] / "systems" /
                       f"{row['system']}.json").read_text())
    gpus = int(desc["number_of_nodes"]) * int(desc["accelerators_per_node"])
    rate = metrics.scored_throughput_per_minute([s.last_eval_progress for s in runs], minutes, raw)
    return {"runs": runs, "raw": raw, "official": official, "factor": factor, "gpus": gpus,
            "rate": rate}


def test_every_result_file_matches_expected(shared_logs: Path):
    files, _, _ = _expected(shared_logs)
    assert len(files) == 22
    for row in files:
        path = _folder(shared_logs, row["round"], row["submitter"], row["system"],
                       row["benchmark"]) / row["file"]
        s: RunSummary = parse_file(path)
        where = f"{row['system']}/{row['file']}"
        assert s.status == row["status"], where
        assert (s.run_start_ms, s.run_stop_ms) == (row["run_start_ms"], row["run_stop_ms"]), where
        assert s.minutes == pytest.approx(row["run_minutes"], abs=MINUTES_TOL), where
        assert s.global_batch_size == row["global_batch_size"], where
        assert s.seed == row["seed"], where
        assert s.last_eval_progress == row["progress_to_converge"], where
        assert s.progress_key == row["progress_key"], where
        assert s.eval_points[-1].value == row["last_eval_accuracy"], where
        assert (s.benchmark, s.submitter, s.platform) == (
            row["benchmark_logged"], row["org_logged"], row["platform_logged"]), where
        assert (s.bad_lines, s.truncated, s.resume_step) == (0, False, None), where
        assert s.mllog_lines + s.other_lines == s.lines_total, where


def test_fast_path_agrees_with_the_line_path_on_a_real_log(shared_logs: Path):
    path = _folder(shared_logs, "v3.1", "Azure+NVIDIA", "ND_H100_v5_n1344_pytorch",
                   "gpt3") / "result_0.txt"
    with open(path, "rb") as fh:
        assert parse_file(path) == parse_lines(fh)


def test_per_system_scores_match_expected(shared_logs: Path):
    _, systems, _ = _expected(shared_logs)
    assert len(systems) == 5
    for row in systems:
        fig = _system_figures(shared_logs, row)
        where = f"{row['system']}/{row['benchmark']}"
        got_minutes = sorted(m for m in (s.minutes for s in fig["runs"]) if m is not None)
        assert got_minutes == pytest.approx(row["run_minutes"], abs=MINUTES_TOL), where
        raw, official = fig["raw"], fig["official"]
        assert (raw.runs_used, raw.runs_required, raw.converged) == (
            row["runs"], row["required_runs"], row["converged_runs"]), where
        assert raw.official and official.official, where
        assert raw.value_minutes == pytest.approx(row["score_minutes"], abs=MINUTES_TOL), where
        assert official.value_minutes == pytest.approx(row["official_score_minutes"],
                                                       abs=MINUTES_TOL), where
        assert fig["factor"] == (row["rcp_scaling_factor"] or 1.0), where
        assert fig["gpus"] == row["gpus"], where
        assert fig["rate"] == pytest.approx(row["throughput_per_minute"], abs=2e-3), where


def test_405b_scaling_efficiencies_match_expected(shared_logs: Path):
    _, systems, series = _expected(shared_logs)
    (s405,) = [s for s in series if s["benchmark"] == "llama31_405b"]
    figs = {f"{r['round']}/{r['submitter']}/{r['system']}": _system_figures(shared_logs, r)
            for r in systems if r["benchmark"] == "llama31_405b"}
    assert len(s405["comparisons"]) == 3
    for cmp in s405["comparisons"]:
        small, large = figs[cmp["small"]], figs[cmp["large"]]
        strong = metrics.strong_scaling_efficiency(
            small["raw"].value_minutes, small["gpus"], large["raw"].value_minutes, large["gpus"])
        strong_official = metrics.strong_scaling_efficiency(
            small["official"].value_minutes, small["gpus"],
            large["official"].value_minutes, large["gpus"])
        weak = metrics.throughput_scaling(small["rate"] / small["gpus"],
                                          large["rate"] / large["gpus"])
        spd = metrics.speedup(small["raw"].value_minutes, large["raw"].value_minutes)
        assert strong == pytest.approx(cmp["strong_scaling_efficiency"], abs=EFF_TOL)
        assert strong_official == pytest.approx(cmp["strong_scaling_efficiency_official_scores"],
                                                abs=EFF_TOL)
        assert weak == pytest.approx(cmp["weak_scaling_efficiency"], abs=EFF_TOL)
        assert spd == pytest.approx(cmp["speedup"], abs=EFF_TOL)
    # README headline figures, to the precision printed there.
    n64 = figs["v5.0/NVIDIA/eos-dfw_n64_ngc25.01_nemo"]
    n256 = figs["v5.0/NVIDIA/eos-dfw_n256_ngc25.01_nemo"]
    assert round(metrics.strong_scaling_efficiency(
        n64["raw"].value_minutes, 512, n256["raw"].value_minutes, 2048), 6) == 0.958480


def test_step_times_of_the_405b_runs(shared_logs: Path):
    """The first step and the steps right after each eval are marked and left out."""
    path = _folder(shared_logs, "v5.0", "NVIDIA", "eos-dfw_n64_ngc25.01_nemo", "llama31_405b")
    s = parse_file(path / "result_0.txt")
    assert s.step_time_source == "tracked_stats" and len(s.step_times) == 240
    assert len(s.eval_steps) == 6 - 1 and s.step_times[0].step == 1152  # no step after last eval
    st = metrics.step_time_stats(s.step_times, s.eval_steps)
    assert st is not None and st.count == 240 - 1 - 5
    assert 54.0 < st.median < 56.0 and st.cv < 0.05


def test_compliance_checker_on_real_logs(shared_logs: Path):
    """Two runs only (the checker is slow): both logs really pass their 3.1.0 rules, the GPT-3
    one despite its placeholder submitter fields."""
    bert = _folder(shared_logs, "v3.1", "Azure", "ND_H100_v5_pytorch", "bert") / "result_0.txt"
    gpt3 = _folder(shared_logs, "v3.1", "Azure+NVIDIA", "ND_H100_v5_n1344_pytorch",
                   "gpt3") / "result_2.txt"
    for log in (bert, gpt3):
        verdict = check_log(log, "v3.1")
        assert verdict.ok, verdict.messages
        assert verdict.ruleset == "3.1.0" and any("SUCCESS" in m for m in verdict.messages)


# --- compliance wrapper behaviour that needs no real checker run -------------------------------

def test_round_folders_map_to_rulesets():
    from orchestrator.errors import ConfigError
    from orchestrator.results.compliance import ruleset_for, supported_rulesets

    assert [ruleset_for(r) for r in ("v3.1", "5.0", "6.0.0", "v5.1.0")] == \
        ["3.1.0", "5.0.0", "6.0.0", "5.1.0"]
    with pytest.raises(ConfigError):
        ruleset_for("latest")
    assert {"3.1.0", "5.0.0"} <= set(supported_rulesets())


def test_unknown_ruleset_and_missing_log(tmp_path: Path):
    from orchestrator.errors import NotFoundError

    log = tmp_path / "result_0.txt"
    log.write_text(":::MLLOG {}\n")
    verdict = check_log(log, "v99.9")
    assert not verdict.ok and verdict.ruleset == "99.9.0"
    assert verdict.messages == ["ruleset 99.9.0 not supported by installed mlperf_logging"]
    with pytest.raises(NotFoundError):
        check_log(tmp_path / "absent.txt", "v3.1")


def test_a_broken_log_fails_with_the_checker_reasons(tmp_path: Path):
    from tests.test_mllog import ev

    log = tmp_path / "result_0.txt"
    log.write_text("\n".join([ev("submission_benchmark", "bert"), ev("init_start")]) + "\n")
    verdict = check_log(log, "v3.1", timeout_s=120)
    assert not verdict.ok
    assert any("run_start" in m for m in verdict.messages)
    assert len(verdict.messages) <= 20


def test_trim_messages_keeps_the_useful_lines():
    from orchestrator.results.compliance import trim_messages

    out = "INFO - Running compliance on file: x\n" + "\n".join(
        f"WARNING - problem {i}\n------------------------------" for i in range(30)) + \
        "\nERROR - FAILED\n** Logging output also at y\n"
    msgs = trim_messages(out)
    assert len(msgs) == 20 and msgs[0] == "WARNING - problem 0"
    assert msgs[-2] == "... 12 more lines" and msgs[-1] == "ERROR - FAILED"


def test_checker_timeout_is_a_failed_verdict(tmp_path: Path):
    log = tmp_path / "result_0.txt"
    log.write_text(":::MLLOG {}\n")
    verdict = check_log(log, "v3.1", timeout_s=0.001)  # no worker answers within a millisecond
    assert not verdict.ok and verdict.messages == ["compliance checker timed out after 0.001 s"]


# MFU by hand (mlperf-notes 10.3), from published model facts and the logs' own step times:
# F = 6N + 12*L*d*s FLOPs per token; MFU = F * GBS * s / step / (GPUs * dense peak).
# Step times: the median of every `train_step_time(ing)` value in the three logs of each system
# (`grep -o 'train_step_tim[a-z]*": [0-9.]*' result_*.txt | sort -n`): 55.1338 s and 0.947273 s.
# The report leaves out step 0 and post-eval steps, which moves the median by less than 1%.
HAND_MFU = {
    # Llama 3.1 405B (Meta: 405B parameters, 126 layers, width 16,384), seq 8192, GBS 1152,
    # 64 nodes x 8 H100 = 512 GPUs; H100 SXM dense peaks: FP8 1,979, BF16 989 TFLOP/s.
    "eos-dfw_n64_ngc25.01_nemo": ((6 * 405e9 + 12 * 126 * 16384 * 8192) * 1152 * 8192
                                  / 55.1338 / 512, "fp8", 1979.0),
    # GPT-3 175B (Brown et al.: 96 layers, width 12,288), seq 2048, GBS 2688, 10,752 H100 GPUs.
    "ND_H100_v5_n1344_pytorch": ((6 * 175e9 + 12 * 96 * 12288 * 2048) * 2688 * 2048
                                 / 0.947273 / 10752, "fp8", 1979.0),
}


def test_mfu_of_the_shared_logs_matches_a_hand_calculation(shared_logs: Path, tmp_path: Path):
    from orchestrator.recipes.catalog import model_facts
    from orchestrator.report.build import build_report
    from orchestrator.report.render import to_json, to_markdown
    from orchestrator.results.importer import import_path
    from orchestrator.store.database import Store
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        import_path(store, shared_logs, archive_dir=tmp_path / "archive")
        report = build_report(store.list_results(), model_facts=model_facts())
    finally:
        store.close()
    groups = {g.system: g for g in report.groups}
    for system, (flops_per_gpu, precision, peak) in HAND_MFU.items():
        g = groups[system]
        assert g.mfu_precision == precision and g.mfu_peak_tflops == peak
        assert g.model_tflops_per_gpu == pytest.approx(flops_per_gpu / 1e12, rel=0.01), system
        assert g.mfu == pytest.approx(flops_per_gpu / (peak * 1e12), rel=0.01), system
        assert g.mfu_bf16 == pytest.approx(flops_per_gpu / 989e12, rel=0.01), system
    # roughly 44% of FP8 for 405B on 512 H100, 29% for GPT-3 on 10,752: sane, not a unit slip
    assert 0.40 < groups["eos-dfw_n64_ngc25.01_nemo"].mfu < 0.50
    assert 0.25 < groups["ND_H100_v5_n1344_pytorch"].mfu < 0.35
    # BERT (issue 47.3): facts from recipes/published/model_facts.yaml, the step GBS / the
    # logged throughput (no step time logged), 256 real tokens a packed sequence: by hand
    # F = 6 x 302,309,376 + 12 x 24 x 1,024 x 256 per token, x 768 x 256 tokens a step
    bert = groups["ND_H100_v5_pytorch"]
    assert bert.step_stats is not None and "logged throughput" in bert.step_time_source
    f_bert = 6 * 302_309_376 + 12 * 24 * 1024 * 256
    assert bert.mfu == pytest.approx(f_bert * 768 * 256 / bert.step_stats.median / 8 / 989e12, rel=1e-6)
    assert bert.mfu_precision == "bf16" and 0.40 < bert.mfu < 0.55
    data = {g["system"]: g for g in json.loads(to_json(report))["groups"]}
    assert data["eos-dfw_n64_ngc25.01_nemo"]["mfu"] == pytest.approx(
        HAND_MFU["eos-dfw_n64_ngc25.01_nemo"][0] / 1979e12, rel=0.01)
    assert data["ND_H100_v5_pytorch"]["mfu"] == bert.mfu and data["ND_H100_v5_pytorch"]["mfu_note"]
    md = to_markdown(report)
    assert "| model TF/s/GPU | MFU | MFU bf16 |" in md and "% (fp8) |" in md
