"""The vendored table of published MLPerf Training results and its loader (results/published.py).

The table is built by hand with recipes/published/generate.py; these tests read the committed
file, check its arithmetic and the accelerator mapping, the lookups on synthetic rows, and that
the rows for the systems in the shared MLPerf logs carry the scores expected-scores.jsonl gives.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from orchestrator.hardware.catalog import accelerator_names, lookup
from orchestrator.paths import recipes_dir
from orchestrator.results import published
from orchestrator.results.published import PublishedResult, catalog_gpu, load_published, nearest, series

SHARED = Path(__file__).resolve().parents[2] / "shared"
DATA = recipes_dir() / published.DATA_FILE
ROUNDS = ("v3.0", "v3.1", "v4.0", "v4.1", "v5.0", "v5.1")


def test_the_loader_reads_the_vendored_file() -> None:
    rows = load_published()
    assert len(rows) > 500
    assert all(isinstance(r, PublishedResult) for r in rows)
    assert {r.round for r in rows} == set(ROUNDS)
    assert load_published() == rows  # cached, and a fresh list each call
    assert load_published() is not rows
    for r in rows:
        assert r.accelerators == r.nodes * r.accelerators_per_node
        assert r.division in ("closed", "open")
        assert r.repo == f"mlcommons/training_results_{r.round}" and len(r.commit) == 40
        assert 0 <= r.runs_dropped <= (4 if r.benchmark == "unet3d" else 1)
        assert r.result_files >= 3


def test_every_score_is_the_mean_times_the_scaling_factor() -> None:
    for r in load_published():
        assert r.mean_minutes > 0 and r.scaling_factor > 0
        assert r.score_minutes == r.mean_minutes * r.scaling_factor, (r.round, r.org, r.system, r.benchmark)


def test_availability_folds_to_the_mlperf_categories() -> None:
    assert {r.category for r in load_published()} <= {"available", "preview", "rdi"}
    for raw, category in (("Available cloud", "available"), ("onprem", "available"), ("Preview", "preview"),
                          ("Research, Development, or Internal (RDI)", "rdi"), ("cloud", "available")):
        assert _row(8, 1.0).model_copy(update={"availability": raw}).category == category


def test_one_row_per_published_result() -> None:
    keys = [(r.round, r.org, r.system, r.benchmark) for r in load_published()]
    assert len(keys) == len(set(keys))


def test_the_file_is_small_and_ships_with_the_recipes() -> None:
    assert DATA.is_file() and DATA.stat().st_size < 1_000_000
    assert DATA.parent.name == "published" and DATA.parent.parent == recipes_dir()


def test_attribution_names_every_source_commit() -> None:
    text = (DATA.parent / "ATTRIBUTION.md").read_text()
    assert "Apache" in text
    for repo, commit in {(r.repo, r.commit) for r in load_published()}:
        assert f"https://github.com/{repo} | {commit}" in text


# -- accelerator names -> catalog --------------------------------------------------------------

@pytest.mark.parametrize(("name", "gpu"), [
    ("NVIDIA H100-SXM5-80GB", "h100"),
    ("NVIDIA H100-SXM-80GB", "h100"),
    ("NVIDIA H100 80GB HBM3", "h100"),
    ("NVIDIA H100-PCIe-80GB", None),
    ("H100 NVL Tensor Core GPU (PCIe)", None),
    ("NVIDIA H100-SXM5-96GB", None),
    ("NVIDIA H200-SXM5-141GB", "h200"),
    ("NVIDIA H200-SXM-141GB", "h200"),
    ("NVIDIA H200-NVL-141GB", None),
    ("NVIDIA Blackwell GPU (GB200)", "gb200"),
    ("NVIDIA GB200", "gb200"),
    ("NVIDIA Blackwell GPU (B200-SXM-180GB)", None),
    ("NVIDIA B200-SXM-180GB", None),
    ("NVIDIA Blackwell Ultra GPU (GB300)", "gb300"),
    ("NVIDIA Blackwell Ultra GPU (B300-SXM-270GB)", None),
    ("NVIDIA H200 NVL 141GB", None),
    ("AMD Instinct MI300X 192GB HBM3", "mi300x"),
    ("AMD Instinct MI325X 256GB HBM3E", None),
    ("TPU-v5p", None),
    ("N/A", None),
    # catalog names and aliases resolve too; CPU sizes and strangers do not
    ("h100", "h100"), ("ND GB200 v6", "gb200"), ("Standard_ND96isr_H200_v5", "h200"),
    ("Standard_D4s_v5", None), ("local", None), ("Some Future GPU", None), ("", None), (None, None),
])
def test_catalog_gpu(name: str | None, gpu: str | None) -> None:
    assert catalog_gpu(name) == gpu


def test_every_mapped_name_is_a_catalog_gpu() -> None:
    for name, gpu in accelerator_names().items():
        if gpu is not None:
            row = lookup(gpu)
            assert row.gpus_per_vm > 0 and row.aliases[0] == gpu, name


def test_every_accelerator_in_the_table_is_in_the_mapping() -> None:
    names = {r.accelerator for r in load_published()}
    known = accelerator_names()
    assert names <= set(known), sorted(names - set(known))
    gpus = {catalog_gpu(n) for n in names}
    assert {"h100", "h200", "gb200", "gb300", "mi300x"} <= gpus


# -- nearest() and series() on synthetic rows ----------------------------------------------------

def _row(gpus: int, score: float, rnd: str = "v5.0", bench: str = "llama31_405b",
         acc: str = "NVIDIA H100-SXM5-80GB", division: str = "closed", org: str = "NVIDIA") -> PublishedResult:
    per_node = 8 if gpus >= 8 else gpus
    return PublishedResult(
        round=rnd, org=org, submitter=org, division=division, availability="Available cloud",
        system=f"sys_{gpus}_{rnd}_{score}", system_name="s", accelerator=acc, accelerators_per_node=per_node,
        nodes=gpus // per_node, accelerators=gpus, host_processor="cpu", framework="fw", benchmark=bench,
        result_files=3, runs_required=3, runs_dropped=0, mean_minutes=score, scaling_factor=1.0,
        score_minutes=score, repo=f"mlcommons/training_results_{rnd}", commit="0" * 40)


@pytest.fixture
def synthetic(monkeypatch: pytest.MonkeyPatch) -> list[PublishedResult]:
    rows = [_row(8, 900.0), _row(64, 120.0), _row(512, 20.0),
            _row(64, 110.0, rnd="v4.1"), _row(64, 125.0, rnd="v5.1"), _row(64, 100.0, rnd="v5.1", org="Other"),
            _row(64, 50.0, acc="NVIDIA H100-PCIe-80GB"),
            _row(64, 60.0, division="open"),
            _row(16, 300.0, acc="NVIDIA H100-SXM-80GB", rnd="v3.1"),
            _row(8, 40.0, bench="ssd", acc="NVIDIA H200-SXM5-141GB", rnd="v4.1"),
            _row(16, 25.0, bench="retinanet", acc="NVIDIA H200-SXM5-141GB", rnd="v5.1")]
    monkeypatch.setattr(published, "_rows", lambda: tuple(rows))
    return rows


def test_nearest_prefers_the_same_gpu_count_newest_round_then_fastest(synthetic: list) -> None:
    hit = nearest("llama31_405b", "h100", 64)
    assert hit is not None and (hit.accelerators, hit.round, hit.score_minutes) == (64, "v5.1", 100.0)


def test_nearest_else_takes_the_closest_count_in_log_space(synthetic: list) -> None:
    # 200 GPUs: 64 is closer on a line (136 vs 312) but 512 is closer in log space (0.94 vs 1.14)
    assert nearest("llama31_405b", "h100", 200).accelerators == 512
    assert nearest("llama31_405b", "h100", 12).accelerators == 16     # log 12/8 = 0.41 > log 16/12 = 0.29
    assert nearest("llama31_405b", "h100", 1).accelerators == 8
    assert nearest("llama31_405b", "h100", 100_000).accelerators == 512


def test_nearest_matches_by_gpu_not_by_spelling(synthetic: list) -> None:
    # H100-SXM-80GB (v3.1) and H100-SXM5-80GB are one GPU; the PCIe card and the open row are not here
    assert nearest("llama31_405b", "NVIDIA H100-SXM5-80GB", 16).round == "v3.1"
    assert nearest("llama31_405b", "Standard_ND96isr_H100_v5", 16).round == "v3.1"
    assert all(r.score_minutes not in (50.0, 60.0) for r in series("llama31_405b", "h100"))
    assert nearest("llama31_405b", "h100", 64, division="open").score_minutes == 60.0
    assert 60.0 in [r.score_minutes for r in series("llama31_405b", "h100", division=None)]


def test_nearest_and_series_follow_renamed_benchmarks(synthetic: list) -> None:
    assert [r.benchmark for r in series("retinanet", "h200")] == ["ssd", "retinanet"]
    assert nearest("retinanet", "h200", 8).benchmark == "ssd"
    assert nearest("ssd", "h200", 16).benchmark == "retinanet"


def test_nothing_matches(synthetic: list) -> None:
    assert nearest("llama31_405b", "gb200", 64) is None
    assert nearest("bert", "h100", 8) is None
    assert nearest("llama31_405b", "NVIDIA Blackwell GPU (B200-SXM-180GB)", 8) is None
    assert series("llama31_405b", "Some Future GPU") == []


def test_series_is_ordered_by_gpus_then_round(synthetic: list) -> None:
    rows = series("llama31_405b", "h100")
    assert [r.accelerators for r in rows] == sorted(r.accelerators for r in rows)
    assert [(r.round, r.score_minutes) for r in rows if r.accelerators == 64] == [
        ("v4.1", 110.0), ("v5.0", 120.0), ("v5.1", 100.0), ("v5.1", 125.0)]


def test_nearest_on_the_real_table() -> None:
    hit = nearest("llama31_405b", "h100", 2048)
    assert hit is not None and hit.accelerators == 2048 and hit.benchmark == "llama31_405b"
    assert hit.gpu == "h100"
    assert all(r.gpu == "gb200" for r in series("llama31_405b", "gb200"))
    assert len(series("llama2_70b_lora", "h100")) > 5


# -- cross-check against the shared MLPerf logs ----------------------------------------------------

def _shared() -> Path:
    logs = SHARED / "mlperf-logs"
    if not (logs / "expected-scores.jsonl").is_file():
        pytest.skip(f"{logs} is absent (the shared MLPerf logs are not checked out beside the repo)")
    return logs


def test_rows_for_the_shared_logs_have_the_expected_published_scores() -> None:
    logs = _shared()
    expected = {(e["round"], e["submitter"], e["system"], e["benchmark"]): e
                for e in map(json.loads, (logs / "expected-scores.jsonl").read_text().splitlines())
                if "official_score_minutes" in e}
    folders = sorted(logs.glob("v*/*/results/*/*/"))
    assert len(folders) == len(expected) == 5
    table = {(r.round, r.org, r.system, r.benchmark): r for r in load_published()}
    for folder in folders:
        key = (folder.parts[-5], folder.parts[-4], folder.parts[-2], folder.parts[-1])
        row, want = table.get(key), expected[key]
        assert row is not None, f"no table row for {key}"
        # expected-scores.jsonl rounds minutes to 6 decimals
        assert row.score_minutes == pytest.approx(want["official_score_minutes"], abs=1e-6), key
        assert row.mean_minutes == pytest.approx(want["score_minutes"], abs=1e-6), key
        assert row.scaling_factor == (want["rcp_scaling_factor"] or 1.0), key
        scaling = folder / "scaling.json"
        if scaling.is_file():
            assert row.scaling_factor == json.loads(scaling.read_text())["scaling_factor"]
        assert row.result_files == want["runs"] == len(list(folder.glob("result_*.txt")))
        assert (row.accelerators, row.nodes, row.accelerators_per_node, row.accelerator) == (
            want["gpus"], want["nodes"], want["accelerators_per_node"], want["accelerator"]), key
        assert row.runs_required == want["required_runs"]


def test_the_summarizer_scores_a_shared_folder_as_the_table_says() -> None:
    """mlperf_logging's own per-folder scoring (what the generator calls) on the bert folder."""
    logs = _shared()
    from mlperf_logging.result_summarizer import result_summarizer as rs

    folder = logs / "v3.1" / "Azure" / "results" / "ND_H100_v5_pytorch" / "bert"
    score, _, scaling = rs._compute_strong_score_standalone("bert", None, False, str(folder), "training", "3.1.0")
    row = next(r for r in load_published()
               if (r.round, r.org, r.system, r.benchmark) == ("v3.1", "Azure", "ND_H100_v5_pytorch", "bert"))
    assert math.isclose(row.score_minutes, score, rel_tol=1e-12) and row.scaling_factor == scaling
