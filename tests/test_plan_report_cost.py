"""Plan and report agree on cost per result within 2 % at every measured scale (issue 47, point 3),
on real published logs: the shared logs (../shared/mlperf-logs: BERT, GPT-3, 405B at 64, 256
and 1,024 H100 nodes) and, where a mirror is, every llama31_405b result of
mlcommons/training_results_v5.0 and v5.1. At every group the report prices, `plan` at the same
size and count, with the store's rows, gives its predicted cost per result (the runs' wall times
at the predicted score) and the measured one; both are the report's figure to 2 %.

v5.0's 405B at 256 H100 nodes is the case that failed: one of its three runs took 69.96 min
where the score (the olympic mean) is 60.17, so the report's cost is 5 % above 3 x the score;
the plan now keeps the measured runs' spread."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.forecast.plan import PlanRequest, make_plan
from orchestrator.recipes.catalog import model_facts
from orchestrator.report.build import GroupReport, Report, build_report
from orchestrator.results.importer import import_path
from orchestrator.store.database import Store
from tests.fixtures.mirrors import mirrors
from orchestrator.store.schema import ResultRow

SHARED_LOGS = Path(__file__).resolve().parents[2] / "shared" / "mlperf-logs"
ROUNDS = {"v5.0": "0fdc28f013256aea84fa36fdaf1e0fa46094b18c", "v5.1": "441d65f4445cd59687466533fd9f55399136e7a4"}


def _copy_405b(tree: Path, round_name: str) -> int:
    """Every llama31_405b result folder of the round's mirror (and its systems' JSON) under
    tree/<round>/; 0 where there is no mirror."""
    repo = mirrors() / f"mlcommons+training_results_{round_name}" / "repo"
    if not repo.is_dir():
        return 0
    commit = ROUNDS[round_name]

    def git(*args: str) -> bytes:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout

    names = git("ls-tree", "-r", "--name-only", commit).decode().splitlines()
    wanted = [n for n in names if n.split("/")[1:2] == ["results"] and "/llama31_405b/" in n
              and n.rsplit("/", 1)[-1].startswith(("result_", "scaling.json"))]
    systems = {"/".join((n.split("/")[0], "systems", n.split("/")[2] + ".json")) for n in wanted}
    for name in wanted + sorted(systems & set(names)):
        target = tree / round_name / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(git("show", f"{commit}:{name}"))
    return len(wanted)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, list[ResultRow]]:
    if not SHARED_LOGS.is_dir():
        pytest.skip(f"{SHARED_LOGS} is absent")
    tmp = tmp_path_factory.mktemp("cost")
    tree = tmp / "tree"
    for round_name in ROUNDS:
        _copy_405b(tree, round_name)
    with Store.open(f"sqlite:///{tmp / 'db.sqlite'}") as store:
        import_path(store, SHARED_LOGS, archive_dir=tmp / "archive")
        if tree.is_dir():
            import_path(store, tree, archive_dir=tmp / "archive")
        rows = store.list_results()
    return build_report(rows, model_facts=model_facts()), rows


def _named(report: Report, benchmark: str, measured_by: str) -> GroupReport:
    """The report's group of the result the plan names ("stored: v5.0/NVIDIA/sys" or, for a
    published one, "v5.0 NVIDIA sys", whose stored copy is that group)."""
    if measured_by.startswith("stored: "):
        return next(g for g in report.groups if g.benchmark == benchmark and g.label == measured_by[8:])
    round_name, system = measured_by.split()[0], measured_by.split()[-1]
    return next(g for g in report.groups if g.benchmark == benchmark and g.system == system
                and g.label.startswith(round_name + "/"))


def test_plan_and_report_agree_on_cost_per_result_at_every_measured_scale(
        measured: tuple[Report, list[ResultRow]]) -> None:
    """At every count a group was measured at, the plan's measured cost per result (priced with
    the report's function) is the report's for the result it names, to 2 %; where the plan's
    curve meets that score (to 2 %), so does its predicted cost per result."""
    report, rows = measured
    scales: set[tuple[str, str, int]] = set()
    predicted = 0
    for g in report.groups:
        if g.cost_per_result_usd is None or not g.catalog_size or not g.priced_vms:
            continue
        stored = tuple(r for r in rows if r.benchmark == g.benchmark)
        (row,) = make_plan(PlanRequest(benchmark=g.benchmark, sku=g.catalog_size, nodes=(g.priced_vms,),
                                       extrapolate=True, stored=stored)).rows
        where = f"{g.benchmark} {g.label} on {g.priced_vms} x {g.catalog_size}"
        assert row.measured_by and row.measured_cost_per_result_usd is not None, where
        named = _named(report, g.benchmark, row.measured_by)
        assert named.gpus == g.gpus and named.cost_per_result_usd is not None, where
        assert row.measured_cost_per_result_usd == pytest.approx(named.cost_per_result_usd, rel=0.02), where
        if row.minutes == pytest.approx(named.score_minutes, rel=0.02):
            assert row.cost_per_result_usd == pytest.approx(named.cost_per_result_usd, rel=0.02), where
            predicted += 1
        scales.add((g.benchmark, g.catalog_size, g.priced_vms))
    assert len(scales) >= 5 and predicted >= 5, (scales, predicted)


def test_a_slow_run_the_score_drops_still_costs_in_the_plan(
        measured: tuple[Report, list[ResultRow]]) -> None:
    """405B at 256 H100 nodes (v5.0 eos-dfw_n256): runs of 59.91, 60.17 and 69.96 min; the
    score's runs x score would be 5 % under the report's sum of the three."""
    report, rows = measured
    g = next(x for x in report.groups if x.system == "eos-dfw_n256_ngc25.01_nemo")
    assert g.cost_per_result_usd is not None and g.priced_vms == 256
    price = g.cost_per_result_usd / ((59.90615 + 60.167017 + 69.9621) / 60 * 256)
    three_scores = 3 * 60.167017 / 60 * 256 * price
    assert three_scores < 0.96 * g.cost_per_result_usd  # the old formula: 5 % under
    (row,) = make_plan(PlanRequest(benchmark="llama31_405b", sku=g.catalog_size or "", nodes=(256,),
                                   extrapolate=True, stored=tuple(rows))).rows
    assert row.measured_cost_per_result_usd == pytest.approx(g.cost_per_result_usd, rel=1e-9)
    assert row.cost_per_result_usd == pytest.approx(g.cost_per_result_usd, rel=0.02)
