"""Every benchmark of the MLPerf Training rounds azbench imports has model facts, each with its
source, so every score gets an MFU (issue 47, point 3): DLRM-DCNv2, RetinaNet and R-GAT (their
recipes' `model:` blocks), BERT, ResNet-50, 3D U-Net and Stable Diffusion
(recipes/published/model_facts.yaml). Their logs carry no step time, only a throughput
(samples/s): the step is GBS / throughput ("tracked_throughput").

Inputs: the shared logs (../shared/mlperf-logs) and local mirrors of
mlcommons/training_results_vX (../.mirror, or $AZBENCH_MIRRORS); each test skips without them."""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

import pytest

from orchestrator.hardware.catalog import lookup
from orchestrator.recipes.catalog import model_facts
from orchestrator.report.build import build_report
from orchestrator.results.importer import import_path
from orchestrator.results.mllog import parse_lines
from orchestrator.results.published import canonical_benchmark
from orchestrator.store.database import Store
from tests.fixtures.mirrors import mirrors


MIRRORS = mirrors()
SHARED_LOGS = Path(__file__).resolve().parents[2] / "shared" / "mlperf-logs"
ROUNDS = ("v4.0", "v4.1", "v5.0", "v5.1")
V51 = "441d65f4445cd59687466533fd9f55399136e7a4"  # recipes/configs/ATTRIBUTION.md


def _repo(round_name: str) -> Path:
    return MIRRORS / f"mlcommons+training_results_{round_name}" / "repo"


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def _mirror_benchmarks(repo: Path) -> set[str]:
    """<submitter>/results/<system>/<benchmark>/ folders at the mirror's HEAD."""
    names = _git(repo, "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines()
    return {parts[3] for parts in (n.split("/") for n in names)
            if len(parts) >= 5 and parts[1] == "results" and parts[4].startswith("result_")}


def _assert_has_facts(benchmarks: set[str], where: str) -> None:
    facts = model_facts()
    assert benchmarks, where
    for bench in sorted(benchmarks):
        f = facts.get(bench.lower()) or facts.get(canonical_benchmark(bench.lower()))
        assert f is not None, f"{where}: no model facts for {bench}"
        assert f.source.strip(), bench
        assert f.flops_per_token() * f.seq_len > 1e6, bench  # a training FLOP count per sample
        if f.sample_flops is not None:
            assert f.seq_len == 1 and f.sample_flops_method.strip(), bench


def test_every_benchmark_in_the_shared_logs_has_model_facts() -> None:
    if not SHARED_LOGS.is_dir():
        pytest.skip(f"{SHARED_LOGS} is absent")
    found = {p.parent.name for p in SHARED_LOGS.glob("*/*/results/*/*/result_*.txt")}
    _assert_has_facts(found, str(SHARED_LOGS))


@pytest.mark.parametrize("round_name", ROUNDS)
def test_every_benchmark_in_a_published_round_has_model_facts(round_name: str) -> None:
    repo = _repo(round_name)
    if not repo.is_dir():
        pytest.skip(f"no mirror of mlcommons/training_results_{round_name} at {repo}")
    _assert_has_facts(_mirror_benchmarks(repo), round_name)


# -- hand computations of the counted FLOPs ------------------------------------------------------


def test_dlrm_dcnv2_flops_per_sample_by_hand() -> None:
    """Bottom MLP 13-512-256-128, 3 cross layers of rank 512 on 27 x 128, top MLP
    3456-1024-1024-512-256-1 (NVIDIA's hugectr train.py), 2 x MACs x 3."""
    d = 27 * 128
    macs = (13 * 512 + 512 * 256 + 256 * 128) + 3 * (d * 512 + 512 * d) \
        + (d * 1024 + 1024 * 1024 + 1024 * 512 + 512 * 256 + 256 * 1)
    assert macs == 16_030_464
    assert model_facts()["dlrm_dcnv2"].sample_flops == 6 * macs


def test_retinanet_flops_per_image_by_hand() -> None:
    """ResNeXt50-32x4d + FPN + heads at 800x800; the frozen stem and layer1 run forward only."""
    def conv(cin: int, cout: int, k: int, side: int, groups: int = 1) -> int:
        return cin // groups * cout * k * k * side * side

    frozen = conv(3, 64, 7, 400)
    cin = 64
    for b in range(3):  # layer1 at 200x200, width 128
        frozen += conv(cin, 128, 1, 200) + conv(128, 128, 3, 200, 32) + conv(128, 256, 1, 200) \
            + (conv(cin, 256, 1, 200) if b == 0 else 0)
        cin = 256
    trained, outs = 0, []
    for planes, blocks, side in ((128, 4, 100), (256, 6, 50), (512, 3, 25)):
        width, out = planes * 2, planes * 4
        for b in range(blocks):
            before = side * 2 if b == 0 else side
            trained += conv(cin, width, 1, before) + conv(width, width, 3, side, 32) \
                + conv(width, out, 1, side) + (conv(cin, out, 1, side) if b == 0 else 0)
            cin = out
        outs.append((out, side))
    trained += sum(conv(c, 256, 1, s) + conv(256, 256, 3, s) for c, s in outs)  # FPN P3-P5
    trained += conv(256, 256, 3, 13) + conv(256, 256, 3, 7)  # P6, P7 from P5
    locations = 100**2 + 50**2 + 25**2 + 13**2 + 7**2
    trained += locations * (8 * 9 * 256 * 256 + 9 * 256 * 9 * 264 + 9 * 256 * 9 * 4)
    assert model_facts()["retinanet"].sample_flops == 2 * frozen + 6 * trained
    assert 1.16e12 < 2 * frozen + 6 * trained < 1.18e12


def test_resnet50_is_4_09_gmacs_and_rgat_counts_its_tree() -> None:
    facts = model_facts()
    assert facts["resnet"].sample_flops == pytest.approx(6 * 4.089e9, rel=1e-3)
    hops = [1, 15, 150, 750]  # fan-out 15, 10, 5 from the seed
    projections = sum(hops) * 1024 * 512 + sum(hops[:3]) * 512 * 512 + sum(hops[:2]) * 512 * 512
    edges = sum(hops[1:]) + sum(hops[1:3]) + hops[1]
    logits = (sum(hops) + sum(hops[:3]) + sum(hops[:3]) + sum(hops[:2]) + sum(hops[:2]) + 1) * 512
    assert facts["rgat"].sample_flops == 6 * (projections + edges * 512 + logits + 512 * 2983)
    assert facts["gnn"] == facts["rgat"] and facts["ssd"] == facts["retinanet"]  # v4.x names


# -- the MFU from a throughput-only log ----------------------------------------------------------


def _event(t: int, key: str, value: object = None, **meta: object) -> str:
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME",
                                     "key": key, "value": value, "metadata": meta})


def test_a_throughput_only_log_gives_step_times_of_gbs_over_throughput() -> None:
    lines = [_event(1, "submission_benchmark", "retinanet"), _event(2, "global_batch_size", 256),
             _event(10, "run_start"),
             _event(20, "tracked_stats", {"throughput": 4000.0, "max_memory_usage": 20.5}, step=1),
             _event(30, "tracked_stats", {"throughput": 3200.0}, step=2),
             _event(40, "run_stop", status="success")]
    s = parse_lines(lines)
    assert s.step_time_source == "tracked_throughput"
    assert [t.seconds for t in s.step_times] == [256 / 4000.0, 256 / 3200.0]


def test_published_throughput_logs_get_the_hand_computed_mfu(tmp_path: Path) -> None:
    """NVIDIA's v5.1 8-GPU GB200 dlrm_dcnv2, retinanet and rgat: the report's MFU equals
    F x median(logged throughput) / GPUs / dense BF16 peak, by hand from the logs' lines."""
    repo = _repo("v5.1")
    if not repo.is_dir():
        pytest.skip(f"no mirror of mlcommons/training_results_v5.1 at {repo}")
    cases = {"dlrm_dcnv2": "tyche_ngpu8_ngc25.03_hugectr", "retinanet": "tyche_ngpu8_ngc25.04_pytorch",
             "rgat": "tyche_ngpu8_ngc25.03_dgl"}
    tree = tmp_path / "tree"
    rates: dict[str, list[float]] = {}
    for bench, system in cases.items():
        folder = tree / "v5.1" / "NVIDIA" / "results" / system / bench
        folder.mkdir(parents=True)
        names = [n for n in _git(repo, "ls-tree", "--name-only", f"{V51}:NVIDIA/results/{system}/{bench}")
                 .decode().split() if n.startswith("result_")]
        for name in names:
            raw = _git(repo, "show", f"{V51}:NVIDIA/results/{system}/{bench}/{name}")
            (folder / name).write_bytes(raw)
            for line in raw.decode().splitlines():
                if '"tracked_stats"' in line and '"throughput"' in line:
                    rates.setdefault(bench, []).append(
                        json.loads(line.split(":::MLLOG ", 1)[1])["value"]["throughput"])
        systems = tree / "v5.1" / "NVIDIA" / "systems"
        systems.mkdir(parents=True, exist_ok=True)
        (systems / f"{system}.json").write_bytes(_git(repo, "show", f"{V51}:NVIDIA/systems/{system}.json"))
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        import_path(store, tree, archive_dir=tmp_path / "archive", check_compliance=False)
        report = build_report(store.list_results(), model_facts=model_facts())
    finally:
        store.close()
    peak = lookup("gb200").peak_tflops_bf16
    assert peak
    by_bench = {g.benchmark: g for g in report.groups}
    for bench in cases:
        g = by_bench[bench]
        f = model_facts()[bench].sample_flops
        assert f is not None and g.gpus == 8 and g.mfu_precision == "bf16"
        gbs = g.global_batch_size
        assert gbs
        median = statistics.median(gbs / r for r in rates[bench])  # every run's windows, pooled
        assert g.mfu == pytest.approx(f * gbs / median / 8 / (peak * 1e12), rel=1e-9), bench
        assert g.mfu is not None and 0.01 < g.mfu < 0.6, (bench, g.mfu)
