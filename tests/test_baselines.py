"""Baselines: samples from stored results, the store table (schema v3), Welch's t-test, verdicts,
and the `azbench baseline` / `azbench compare` commands (exit 8 on a regression)."""

from __future__ import annotations

import json
import math
import random
from datetime import datetime, timedelta, timezone

import pytest

from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.models import utcnow
from orchestrator.pipelines import baselines as bl
from orchestrator.store.database import Store
from orchestrator.store.schema import SCHEMA_VERSION, EventRow, ResultRow, RunRow
from tests.cli_helpers import CliResult, one_line_error


def invoke(args: list[str]) -> CliResult:
    """The real CLI in a subprocess, as CI runs it: no terminal on stdin, CI=true."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "CI": "true"}
    env.pop("AZBENCH_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True,
                          text=True, env=env, stdin=subprocess.DEVNULL, timeout=120)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def _result(run_id: str, nodes: int, minutes: float, step: float, *, converged: bool = True,
            resumed: bool = False, n: int = 0) -> ResultRow:
    steps = [[i, step * (3 if i == 1 else 1)] for i in range(1, 31)]  # first step is slow: dropped
    summary = {"step_times": steps, "eval_steps": [], "eval_points": [[100.0 * nodes, 0.9, 0]]}
    return ResultRow(content_hash=f"{run_id}-{n}", run_id=run_id, source="run", system=f"{nodes}xLocal_CPU",
                     benchmark="smoke", status="success" if converged else "aborted",
                     converged=converged, minutes=minutes, nodes=nodes, gpus=0, sku="Local_CPU",
                     resumed=resumed, summary_json=json.dumps(summary), submitter="azbench")


def _sweep(store: Store, sweep: str, rows: list[tuple[int, float, float]], busbw: float | None = None
           ) -> list[str]:
    """Store a sweep of runs with one result each: rows of (nodes, minutes, step seconds)."""
    ids = []
    for i, (nodes, minutes, step) in enumerate(rows):
        run_id = f"{sweep}-r{i}"
        store.create_run(RunRow(id=run_id, sweep_id=sweep, cluster="c", recipe="smoke",
                                benchmark="smoke", nodes=nodes, repeat_index=i, state="succeeded"))
        store.add_result(_result(run_id, nodes, minutes, step, n=i))
        if busbw is not None:
            store.add_event(EventRow(kind="health_gate", run_id=run_id, cluster="c", message="gate",
                                     data={"busbw_gbps": busbw + i * 0.01}))
        ids.append(run_id)
    return ids


# -- pure maths -------------------------------------------------------------------------------


def test_stdlib_welch_matches_scipy_and_known_values():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = random.Random(7)
    for _ in range(25):
        a = [rng.gauss(1.0, 0.2) for _ in range(rng.randint(2, 8))]
        b = [rng.gauss(1.2, 0.4) for _ in range(rng.randint(2, 8))]
        want = float(scipy_stats.ttest_ind(a, b, equal_var=False).pvalue)
        assert bl.welch_p_value(a, b, use_scipy=False) == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert bl.welch_p_value(a, b) == pytest.approx(want, rel=1e-12)


def test_student_t_tail_matches_tables():
    # t = 12.706 is the two-sided 5 % point at df = 1; 2.228 at df = 10; 1.96 as df -> inf
    assert bl.student_t_two_sided_p(12.706, 1) == pytest.approx(0.05, abs=1e-4)
    assert bl.student_t_two_sided_p(2.228, 10) == pytest.approx(0.05, abs=1e-4)
    assert bl.student_t_two_sided_p(1.96, 1e6) == pytest.approx(0.05, abs=1e-4)
    assert bl.student_t_two_sided_p(0.0, 5) == pytest.approx(1.0)


def test_welch_edge_cases():
    assert bl.welch_p_value([1.0], [1.0, 2.0]) is None  # one sample: no test
    assert bl.welch_p_value([1.0, 1.0], [1.0, 1.0]) == 1.0  # no spread, same mean
    assert bl.welch_p_value([1.0, 1.0], [2.0, 2.0]) == 0.0  # no spread, different means


@pytest.mark.parametrize("metric,base,cur,verdict", [
    ("step_time", [1.0, 1.02, 0.98], [1.5, 1.52, 1.49], "regression"),
    ("step_time", [1.0, 1.02, 0.98], [0.7, 0.71, 0.69], "improvement"),
    ("step_time", [1.0, 1.02, 0.98], [1.05, 1.04, 1.06], "within"),
    ("step_time", [1.0, 2.0, 0.5], [1.4, 2.9, 0.6], "noise"),  # +36 % but the spread swamps it
    ("step_time", [1.0], [1.5], "regression"),  # n < 2: tolerance alone decides
    ("weak_scaling_efficiency", [0.9, 0.91], [0.6, 0.61], "regression"),  # higher is better
    ("allreduce_busbw", [400.0, 401.0], [470.0, 471.0], "improvement"),
    ("time_to_train", [], [1.0], "new"),
    ("time_to_train", [1.0], [], "missing"),
])
def test_metric_delta_verdicts(metric, base, cur, verdict):
    def entry(samples: list[float]) -> bl.BaselineEntry | None:
        return bl.BaselineEntry(benchmark="smoke", sku="Local_CPU", nodes=2,
                                metrics={metric: samples}) if samples else None

    d = bl.metric_delta(("smoke", "Local_CPU", 2), metric, entry(base), entry(cur),
                        bl.Tolerance(max_change=0.1))
    assert d.verdict == verdict
    if base and cur:
        assert d.change == pytest.approx((sum(cur) / len(cur) - sum(base) / len(base)) / (sum(base) / len(base)))
    if len(base) > 1 and len(cur) > 1:
        assert 0.0 <= d.confidence <= 1.0 and d.confidence == pytest.approx(1 - d.p_value)


def test_tolerance_shorthands_and_bad_values():
    t = bl.Tolerances.model_validate({"step_time": "5%", "time_to_train": 0.2,
                                      "allreduce_busbw": {"max_change": 0.3, "min_confidence": 0.99}})
    assert t.step_time.max_change == pytest.approx(0.05) and t.time_to_train.max_change == 0.2
    assert t.allreduce_busbw.min_confidence == 0.99 and t.weak_scaling_efficiency.max_change == 0.1
    with pytest.raises(ValueError):
        bl.Tolerances.model_validate({"step_tme": 0.1})
    with pytest.raises(ValueError):
        bl.Tolerance(max_change=0)


def test_entries_from_results_per_scale():
    rows = [_result("a", 1, 1.0, 0.10, n=1), _result("b", 1, 1.2, 0.12, n=2),
            _result("c", 2, 0.6, 0.20, n=3), _result("d", 2, None, 0.25, converged=False, n=4),
            _result("e", 2, 0.5, 0.5, resumed=True, n=5)]
    entries = bl.entries_from(rows, {"a": 5.0, "c": 4.0})
    one, two = entries
    assert (one.nodes, two.nodes) == (1, 2)
    assert one.metrics["time_to_train"] == [1.0, 1.2]
    assert one.metrics["step_time"] == pytest.approx([0.10, 0.12])  # slow first step dropped
    assert two.metrics["time_to_train"] == [0.6]  # unconverged run has no time to train
    # a resumed run has no time to train, but its steps ran: they count for step time, as in
    # the report (results.definitions.step_time)
    assert two.metrics["step_time"] == pytest.approx([0.20, 0.25, 0.5])
    # the figures: the MLPerf score (partial: the plain mean of the converged runs) and the
    # median of every kept step, pooled; E_weak on those medians, per run for the t-test
    assert one.value("time_to_train") == pytest.approx(1.1) and two.value("time_to_train") == 0.6
    assert one.value("step_time") == pytest.approx(0.11) and two.value("step_time") == pytest.approx(0.25)
    assert two.metrics["weak_scaling_efficiency"] == pytest.approx([0.11 / 0.20, 0.11 / 0.25, 0.11 / 0.5])
    assert two.value("weak_scaling_efficiency") == pytest.approx(0.11 / 0.25)
    assert "weak_scaling_efficiency" not in one.metrics and two.base_nodes == 1
    assert one.metrics["allreduce_busbw"] == [5.0] and two.metrics["allreduce_busbw"] == [4.0]
    assert two.runs == ["c", "d", "e"]


def test_weak_scaling_where_the_work_per_gpu_differs_is_absent_with_the_reason():
    """llama31_405b on GB200 (issue 38): 1,152 per 512 GPUs against 960 per 2,560. The report
    refuses that pair; the baseline, compare and history leave it out and say why."""
    def row(run: str, nodes: int, gbs: int, step: float, k: int) -> ResultRow:
        r = _result(run, nodes, 60.0, step, n=k)
        return r.model_copy(update={"benchmark": "llama31_405b", "sku": "NVIDIA Blackwell GPU (GB200)",
                                    "gpus": nodes * 4, "global_batch_size": gbs,
                                    "system": f"gb200_n{nodes}", "run_start_ms": k})
    rows = [row(f"s{k}", 128, 1152, 17.29, k) for k in range(3)]
    rows += [row(f"b{k}", 640, 960, 3.19, k + 3) for k in range(3)]
    small, big = bl.entries_from(rows)
    assert "weak_scaling_efficiency" not in big.metrics and big.value("weak_scaling_efficiency") is None
    why = big.refused["weak_scaling_efficiency"]
    assert why.startswith("not defined against 512 GPUs (128 nodes): batch per GPU differs "
                          "(1,152/512 = 2.25 vs 960/2,560 = 0.375)")
    base = bl.Baseline(name="b", entries=[small, big])
    result = bl.compare(base, [small, big])
    assert not [d for d in result.deltas if d.metric == "weak_scaling_efficiency"]
    assert any("weak_scaling_efficiency" in n and "batch per GPU differs" in n for n in result.notes)
    assert result.to_json_data()["notes"] == result.notes
    from orchestrator.pipelines.history import build_history
    hist = build_history(rows, [], base)
    assert not [s for s in hist.series if s.metric == "weak_scaling_efficiency"]
    assert any("batch per GPU differs" in n for n in hist.notes)
    # the same pair in the report: refused with the same reason
    from orchestrator.report.build import build_report
    report = build_report(rows)
    assert not report.weak_scaling and any(why.split(": ", 1)[1] in n for n in report.notes)


# -- store ------------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def db_url(request: pytest.FixtureRequest, azbench_home) -> str | None:
    """None for SQLite (the default file under $AZBENCH_HOME), else a fresh PostgreSQL db."""
    return None if request.param == "sqlite" else request.getfixturevalue("pg_database_url")


def test_baseline_roundtrip_in_store(db_url):
    with Store.open(db_url) as store:
        assert store.schema_version() == SCHEMA_VERSION == 6
        _sweep(store, "s1", [(1, 1.0, 0.1), (1, 1.1, 0.11), (2, 0.6, 0.2)], busbw=3.0)
        entries = bl.collect(store, bl.Selection(sweep_ids=("s1",)))
        assert entries[0].metrics["allreduce_busbw"] == pytest.approx([3.0, 3.01])
        first = bl.set_baseline(store, "nightly", entries, {"sweeps": ["s1"]})
        again = bl.set_baseline(store, "nightly", entries[:1], {"sweeps": ["s1"]})
        assert again.created_at == first.created_at and again.updated_at >= first.updated_at
        assert [e.nodes for e in bl.get_baseline(store, "nightly").entries] == [1]
        assert [b.name for b in bl.list_baselines(store)] == ["nightly"]
        with pytest.raises(ConfigError):
            bl.set_baseline(store, "bad name!", entries)
        with pytest.raises(ConfigError, match="empty"):
            bl.set_baseline(store, "empty", [])
        with pytest.raises(NotFoundError):
            bl.collect(store, bl.Selection(sweep_ids=("nosuch",)))
        bl.delete_baseline(store, "nightly")
        with pytest.raises(NotFoundError):
            bl.get_baseline(store, "nightly")


def test_v2_database_migrates_to_the_latest_keeping_rows(azbench_home, tmp_path):
    import sqlalchemy as sa

    from orchestrator.store.schema import migrate
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        migrate(conn, target=2)
        conn.exec_driver_sql("INSERT INTO events (ts, kind, message) VALUES ('2026-01-01 00:00:00', 'x', 'kept')")
    engine.dispose()
    with Store.open(url) as store:
        assert store.schema_version() == SCHEMA_VERSION  # v3 baselines, v4 plan_json
        assert [e.message for e in store.list_events()] == ["kept"]
        assert bl.list_baselines(store) == []


# -- CLI --------------------------------------------------------------------------------------


def test_cli_baseline_set_show_compare_exit_8(azbench_home):
    with Store.open() as store:
        _sweep(store, "s20260101-000000-aaaaaa", [(1, 1.0, 0.10), (1, 1.02, 0.102), (2, 0.6, 0.2), (2, 0.61, 0.2)])
    made = invoke(["baseline", "set", "nightly", "--json"])
    assert made.code == 0, made.err
    assert [e["nodes"] for e in json.loads(made.out)["entries"]] == [1, 2]
    assert "nightly" in invoke(["baseline", "list"]).out
    shown = invoke(["baseline", "show", "nightly"])
    assert shown.code == 0 and "median step time" in shown.out
    replace = invoke(["baseline", "set", "nightly"])  # exists; no terminal and no --yes
    assert replace.code == 2 and "--yes" in one_line_error(replace)
    with Store.open() as store:  # a newer sweep, 50 % slower at 2 nodes
        _sweep(store, "s20260102-000000-bbbbbb", [(1, 1.01, 0.101), (1, 1.0, 0.1), (2, 0.9, 0.3), (2, 0.91, 0.305)])
    same = invoke(["compare", "nightly", "--sweep", "s20260101-000000-aaaaaa", "--json"])
    assert same.code == 0 and json.loads(same.out)["regressions"] == []
    slow = invoke(["compare", "nightly", "--json"])  # default: the newest sweep
    assert slow.code == 8, slow.err
    data = json.loads(slow.out)
    bad = {(d["nodes"], d["metric"]) for d in data["deltas"] if d["verdict"] == "regression"}
    assert bad == {(2, "time_to_train"), (2, "step_time"), (2, "weak_scaling_efficiency")}
    assert "regression" in one_line_error(slow)
    loose = invoke(["compare", "nightly", "-t", "step_time=80%", "-t", "time_to_train=80%",
                    "-t", "weak_scaling_efficiency=80%"])
    assert loose.code == 0, loose.err
    md = invoke(["compare", "nightly", "--markdown"])
    assert md.code == 8 and "| smoke · local CPU · 2 nodes | median step time (s) |" in md.out
    assert invoke(["compare", "nightly", "-t", "bogus=1"]).code == 2
    assert invoke(["compare", "nosuch"]).code == 2
    deleted = invoke(["baseline", "delete", "nightly", "--yes"])
    assert deleted.code == 0 and invoke(["baseline", "show", "nightly"]).code == 2


def test_set_from_filters_and_since(azbench_home):
    with Store.open() as store:
        _sweep(store, "s1", [(1, 1.0, 0.1)])
    later = (utcnow() + timedelta(days=1)).strftime("%Y-%m-%d")
    none = invoke(["baseline", "set", "b", "--since", later])
    assert none.code == 2 and "empty" in one_line_error(none)
    ok = invoke(["baseline", "set", "b", "--cluster", "c", "--benchmark", "smoke"])
    assert ok.code == 0 and "smoke · local CPU · 1 node" in ok.out
    assert math.isclose(json.loads(invoke(["baseline", "show", "b", "--json"]).out)
                        ["entries"][0]["metrics"]["time_to_train"][0], 1.0)
    # the source keeps what was selected, and only that (issue 37: a typed selection)
    assert json.loads(invoke(["baseline", "show", "b", "--json"]).out)["source"] == {"cluster": "c", "benchmark": "smoke"}
    when = datetime(2026, 11, 1, tzinfo=timezone.utc)
    assert bl.Selection(sweep_ids=("s1",), since=when).source() == {"sweep_ids": ["s1"], "since": str(when)}
