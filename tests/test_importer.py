"""Results import: the shared MLPerf logs reproduce every published figure through the store and
the report; re-import is idempotent; bad input fails whole with a clear message or imports with
a warning, and a failed import leaves nothing behind (store or archive)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError, NotFoundError, StoreError
from orchestrator.report.build import build_report
from orchestrator.results.importer import ImportSummary, import_path
from orchestrator.store.database import ResultRow, RunRow, Store

BERT = "v3.1/Azure/results/ND_H100_v5_pytorch/bert"
GPT3 = "v3.1/Azure+NVIDIA/results/ND_H100_v5_n1344_pytorch/gpt3"


@pytest.fixture
def store(azbench_home: Path):
    s = Store.open()
    yield s
    s.close()


@pytest.fixture
def imported(store: Store, shared_logs: Path) -> tuple[Store, ImportSummary]:
    return store, import_path(store, shared_logs)


def expected(shared_logs: Path) -> list[dict]:
    lines = (shared_logs / "expected-scores.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def rows_by_source(store: Store, summary: ImportSummary) -> dict[tuple[str, ...], ResultRow]:
    """(round, submitter, system, benchmark, file name) -> stored row."""
    by_id = {r.id: r for r in store.list_results()}
    out = {}
    for item in summary.imported + summary.duplicates:
        parts = Path(item.path).parts
        out[(parts[-6], parts[-5], parts[-3], parts[-2], parts[-1])] = by_id[item.result_id]
    return out


def mllog(key: str, value: object = None, time_ms: int = 0, **meta: object) -> str:
    body = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key,
            "value": value, "metadata": {"file": "t.py", "lineno": 1, **meta}}
    return ":::MLLOG " + json.dumps(body) + "\n"


def synthetic_log(benchmark: str = "bert", *, run_start: bool = True, minutes: float = 2.0,
                  status: str = "success", platform: str = "1xTEST") -> str:
    t0 = 1_700_000_000_000
    text = mllog("submission_benchmark", benchmark, t0) + mllog("submission_org", "Org", t0)
    text += mllog("submission_platform", platform, t0) + mllog("global_batch_size", 64, t0)
    if run_start:
        text += mllog("run_start", None, t0 + 1000)
    text += mllog("eval_accuracy", 0.9, t0 + 60_000, samples_count=1024)
    stop = t0 + 1000 + int(minutes * 60_000)
    return text + mllog("run_stop", None, stop, status=status)


def submission(root: Path, logs: dict[str, str], *, benchmark: str = "bert",
               system: str = "sys_a", systems_json: bool = True) -> Path:
    """root/v9.9/Org/results/<system>/<benchmark>/<name> for each log (+ systems json)."""
    bench = root / "v9.9" / "Org" / "results" / system / benchmark
    bench.mkdir(parents=True)
    for name, text in logs.items():
        (bench / name).write_text(text)
    if systems_json:
        sysdir = root / "v9.9" / "Org" / "systems"
        sysdir.mkdir(parents=True)
        (sysdir / f"{system}.json").write_text(json.dumps(
            {"submitter": "Org", "number_of_nodes": "2", "accelerators_per_node": "8",
             "accelerator_model_name": "NVIDIA H100-SXM5-80GB", "system_name": "test"}))
    return bench


def assert_nothing_stored(store: Store, archive: Path) -> None:
    assert store.list_results() == []
    assert not archive.exists() or list(archive.iterdir()) == []


# -- the shared logs: every expected figure ----------------------------------------------------


def test_every_result_file_matches_expected(imported, shared_logs: Path) -> None:
    store, summary = imported
    assert summary.warnings == [] and summary.duplicates == []
    rows = rows_by_source(store, summary)
    files = [e for e in expected(shared_logs) if e.get("kind") == "result_file"]
    assert len(files) == len(rows) == 22
    for e in files:
        row = rows[(e["round"], e["submitter"], e["system"], e["benchmark"], e["file"])]
        assert row.minutes == pytest.approx(e["run_minutes"], abs=0.01), e["file"]
        assert row.status == e["status"] and row.converged
        assert row.global_batch_size == e["global_batch_size"]
        assert row.run_start_ms == e["run_start_ms"] and row.run_stop_ms == e["run_stop_ms"]
        assert row.submitter == e["submitter"]  # not SUBMISSION_ORG_PLACEHOLDER (gpt3 run 2)
        assert row.ruleset == e["round"][1:] + ".0" and row.source == "import"


def test_report_reproduces_system_scores(imported, shared_logs: Path) -> None:
    store, _ = imported
    report = build_report(store.list_results())
    groups = {(g.round, g.submitter, g.system, g.benchmark): g for g in report.groups}
    systems = [e for e in expected(shared_logs) if "score_minutes" in e]
    assert len(systems) == len(groups) == 5
    for e in systems:
        g = groups[(e["round"], e["submitter"], e["system"], e["benchmark"])]
        assert (g.runs, g.required_runs, g.converged) == (e["runs"], e["required_runs"],
                                                          e["converged_runs"])
        assert (g.nodes, g.gpus) == (e["nodes"], e["gpus"])
        assert g.score_raw_minutes == pytest.approx(e["score_minutes"], abs=0.01)
        assert g.score_minutes == pytest.approx(e["official_score_minutes"], abs=0.01)
        assert g.scaling_factor == pytest.approx(e["rcp_scaling_factor"] or 1.0)
        assert g.throughput_per_minute == pytest.approx(e["throughput_per_minute"], rel=1e-6)
        # imported without the checker: a verdict is never a default (issue 47), so not official
        assert g.compliance == "not checked" and not g.official
        assert not g.partial and g.resumed_runs == []


def test_report_reproduces_scaling_efficiencies(imported, shared_logs: Path) -> None:
    store, _ = imported
    report = build_report(store.list_results())
    series = next(e for e in expected(shared_logs) if "scaling_series" in e)["scaling_series"]
    want = {(c["small"], c["large"]): c for s in series for c in s["comparisons"]}
    got = {(s.small, s.large): s for s in report.strong_scaling}
    assert set(got) == set(want)
    for key, c in want.items():
        s = got[key]
        assert (s.workers_small, s.workers_large) == (c["gpus_small"], c["gpus_large"])
        assert s.efficiency == pytest.approx(c["strong_scaling_efficiency"], abs=1e-3)
        assert s.efficiency_scaled == pytest.approx(
            c["strong_scaling_efficiency_official_scores"], abs=1e-3)
        assert s.throughput_efficiency == pytest.approx(c["weak_scaling_efficiency"], abs=1e-3)
        assert s.speedup == pytest.approx(c["speedup"], rel=1e-5)
    # the README's headline figures, written out
    effs = sorted(round(s.efficiency, 4) for s in report.strong_scaling)
    assert effs == [0.7342, 0.766, 0.9585]
    tputs = sorted(round(s.throughput_efficiency or 0, 4) for s in report.strong_scaling)
    assert tputs == [0.8565, 0.8936, 0.9585]
    # the 405B series changes GBS per GPU: its step times are no weak-scaling measure
    assert report.weak_scaling == [] and any("batch per GPU differs" in n for n in report.notes)


def test_import_twice_is_idempotent_and_archives_raw_bytes(imported, shared_logs: Path,
                                                           azbench_home: Path) -> None:
    store, first = imported
    again = import_path(store, shared_logs)
    assert len(again.imported) == 0 and len(again.duplicates) == 22
    assert len(store.list_results()) == 22
    one = store.list_results(benchmark="gpt3")[0]
    log = Path(one.log_path or "")
    assert log.parent == azbench_home / "archive" and log.name == f"{one.content_hash}.log"
    assert hashlib.sha256(log.read_bytes()).hexdigest() == one.content_hash
    assert len(list(log.parent.iterdir())) == 22  # no temp files left


@pytest.mark.parametrize("entry", [
    "v3.1/Azure+NVIDIA", "v3.1/Azure+NVIDIA/results/ND_H100_v5_n1344_pytorch", GPT3,
    GPT3 + "/result_2.txt",
])
def test_any_entry_point_finds_its_context(store: Store, shared_logs: Path, entry: str) -> None:
    summary = import_path(store, shared_logs / entry)
    assert summary.warnings == []
    for row in store.list_results():
        assert (row.round, row.submitter, row.system, row.benchmark, row.ruleset) == (
            "v3.1", "Azure+NVIDIA", "ND_H100_v5_n1344_pytorch", "gpt3", "3.1.0")
        assert (row.nodes, row.gpus, row.sku) == (1344, 10752, "Standard_ND96isr_H100_v5")
    assert len(store.list_results()) == (1 if entry.endswith(".txt") else 3)


# -- bad input -----------------------------------------------------------------------------------


def test_nonexistent_path(store: Store, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        import_path(store, tmp_path / "nope", archive_dir=tmp_path / "arch")
    assert_nothing_stored(store, tmp_path / "arch")


def test_empty_dir(store: Store, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFoundError, match=r"no MLPerf result logs \(result_N.txt\)"):
        import_path(store, tmp_path / "empty", archive_dir=tmp_path / "arch")
    assert_nothing_stored(store, tmp_path / "arch")


def test_binary_garbage_fails_the_whole_import(store: Store, tmp_path: Path) -> None:
    bench = submission(tmp_path, {"result_0.txt": synthetic_log()})
    (bench / "result_1.txt").write_bytes(bytes(range(256)) * 40)
    with pytest.raises(ConfigError, match=r"result_1.txt is not an MLPerf result log \(binary"):
        import_path(store, tmp_path, archive_dir=tmp_path / "arch")
    assert_nothing_stored(store, tmp_path / "arch")


def test_mixed_benchmarks_in_one_folder(store: Store, tmp_path: Path) -> None:
    submission(tmp_path, {"result_0.txt": synthetic_log("bert"),
                          "result_1.txt": synthetic_log("gpt3")})
    with pytest.raises(ConfigError, match=r"mixes benchmarks \(bert: result_0.txt; gpt3: "):
        import_path(store, tmp_path, archive_dir=tmp_path / "arch")
    assert_nothing_stored(store, tmp_path / "arch")


def test_store_failure_removes_the_new_archive_copies(store: Store, tmp_path: Path,
                                                      monkeypatch) -> None:
    submission(tmp_path, {"result_0.txt": synthetic_log()})

    def refuse(rows):
        raise StoreError("disk full")
    monkeypatch.setattr(store, "add_results", refuse)
    with pytest.raises(StoreError, match="disk full"):
        import_path(store, tmp_path, archive_dir=tmp_path / "arch")
    assert list((tmp_path / "arch").iterdir()) == []


def test_log_without_run_start_imports_as_incomplete(store: Store, tmp_path: Path) -> None:
    submission(tmp_path, {"result_0.txt": synthetic_log(run_start=False)})
    summary = import_path(store, tmp_path, archive_dir=tmp_path / "arch")
    (row,) = store.list_results()
    assert (row.status, row.converged, row.minutes) == ("incomplete", False, None)
    assert [w.message for w in summary.warnings] == [
        "no run_start in the log: imported as incomplete (not converged)"]


def test_log_cut_mid_line_imports_with_a_warning(store: Store, tmp_path: Path,
                                                 shared_logs: Path) -> None:
    raw = (shared_logs / BERT / "result_0.txt").read_bytes()
    cut = raw[: raw.index(b'"key": "run_stop"') + 5]  # inside the run_stop line
    submission(tmp_path, {"result_0.txt": cut.decode()})
    summary = import_path(store, tmp_path, archive_dir=tmp_path / "arch")
    (row,) = store.list_results()
    assert (row.status, row.converged) == ("incomplete", False)
    messages = " | ".join(w.message for w in summary.warnings)
    assert "no run_stop" in messages and "ends mid-line" in messages


def test_missing_systems_json_imports_with_unknown_gpus(store: Store, tmp_path: Path) -> None:
    submission(tmp_path, {"result_0.txt": synthetic_log(platform="2xTEST")}, systems_json=False)
    summary = import_path(store, tmp_path, archive_dir=tmp_path / "arch")
    (row,) = store.list_results()
    assert row.gpus is None and row.nodes == 2  # nodes from the logged "2xTEST" platform
    (warning,) = summary.warnings
    assert "systems/sys_a.json is missing: GPUs unknown" in warning.message


def test_folder_name_wins_over_logged_benchmark(store: Store, tmp_path: Path) -> None:
    submission(tmp_path, {"result_0.txt": synthetic_log("gpt3")}, benchmark="bert")
    summary = import_path(store, tmp_path, archive_dir=tmp_path / "arch")
    assert store.list_results()[0].benchmark == "bert"
    assert "submission_benchmark 'gpt3' but sits in folder 'bert'" in summary.warnings[0].message
    assert store.list_results()[0].gpus == 16  # "2" nodes x "8" per node, strings in the json


def test_azbench_run_dir_takes_the_last_started_attempt(store: Store, tmp_path: Path) -> None:
    run = tmp_path / "r1"
    (run / "attempt-1").mkdir(parents=True)
    (run / "attempt-2").mkdir()
    (run / "attempt-1" / "train.log").write_text(synthetic_log("smoke", status="aborted"))
    second = synthetic_log("smoke", platform="2xLocal_CPU").replace(
        ":::MLLOG", "0: :::MLLOG")  # srun -l prefixes
    (run / "attempt-2" / "train.log").write_text(
        ":::DLPAL azbench 17 2 node[1-2] local smoke\n" + second)
    store.create_run(RunRow(id="r1", cluster="c1", recipe="smoke", benchmark="smoke", nodes=2))
    summary = import_path(store, run, archive_dir=tmp_path / "arch")
    (row,) = store.list_results(cluster="c1")  # linked to its stored run
    assert (row.benchmark, row.system, row.sku, row.nodes, row.gpus) == (
        "smoke", "2xLocal_CPU", "Local_CPU", 2, 0)
    assert row.converged and summary.imported[0].path.endswith("attempt-2/train.log")
    assert "1 earlier attempt(s); imported attempt-2" in summary.warnings[0].message


def test_compliance_verdict_is_stored(store: Store, tmp_path: Path, monkeypatch) -> None:
    from orchestrator.results import checkpool, compliance
    seen = []

    def fake_check(jobs, **_kw):
        seen.extend(job.ruleset for job in jobs)
        return [compliance.Verdict(ok=False, ruleset=job.ruleset, messages=["ERROR: x"]) for job in jobs]
    monkeypatch.setattr(checkpool, "check_logs", fake_check)
    submission(tmp_path, {"result_0.txt": synthetic_log()})
    summary = import_path(store, tmp_path, archive_dir=tmp_path / "arch", check_compliance=True)
    (row,) = store.list_results()
    assert seen == ["9.9.0"] and row.compliance_ok is False
    assert json.loads(row.compliance_json or "{}")["messages"] == ["ERROR: x"]
    assert "did not pass" in summary.warnings[0].message


def test_real_compliance_checker_on_one_log(store: Store, shared_logs: Path) -> None:
    pytest.importorskip("mlperf_logging")
    import_path(store, shared_logs / BERT / "result_8.txt", check_compliance=True)
    (row,) = store.list_results()
    verdict = json.loads(row.compliance_json or "{}")
    assert row.compliance_ok is True and verdict["ruleset"] == "3.1.0"
