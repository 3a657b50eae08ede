""""Lost" has one definition (issue 47, point 5): the report's attempt history and spot section
print goodput's lost work for the same run, not the store's second sum (the step times past the
kept step: 9.5 s here, where goodput counts the kept checkpoint to the failure, 10 s)."""

from __future__ import annotations

from orchestrator.goodput.run import lost_work_by_attempt, run_goodput
from orchestrator.report.build import build_report
from orchestrator.report.render import to_markdown
from orchestrator.store.database import Store
from tests.test_goodput import killed_after_checkpoint_lines, store_run_with_logs


def _store_with_logs(failure_class: str) -> tuple[list, list]:
    attempts, lines = killed_after_checkpoint_lines()
    attempts[0] = attempts[0].model_copy(update={"failure_class": failure_class})
    with Store.open() as store:
        store_run_with_logs(store, attempts, lines)
        return store.list_runs(), store.list_attempts("r1")


def test_attempt_history_prints_goodputs_lost_work(azbench_home) -> None:
    runs, attempts = _store_with_logs("node_fail")
    with Store.open() as store:
        want = lost_work_by_attempt(run_goodput(store, "r1"))
    assert want == {1: 10.0} and attempts[0].lost_seconds == 9.5  # two figures stored; one shown
    report = build_report([], runs, attempts)
    got = {a.attempt: a.lost_seconds for a in report.attempt_history}
    assert got == {1: want[1], 2: None}
    text = to_markdown(report)
    assert "lost work s" in text and "| 10.0 |" in text and "9.5" not in text


def test_spot_section_prints_goodputs_lost_work(azbench_home) -> None:
    runs, attempts = _store_with_logs("preempted")
    with Store.open() as store:
        want = sum(lost_work_by_attempt(run_goodput(store, "r1")).values())
    report = build_report([], runs, attempts, spot_clusters={"c1": "h100"})
    [line] = report.preemptions
    assert line.preemptions == 1 and line.lost_seconds == want == 10.0
    assert "9.5" not in to_markdown(report)


def test_a_preempted_spot_run_in_both_tables_has_its_logs_read_once(azbench_home, monkeypatch) -> None:
    import orchestrator.report.lost as lost_module

    runs, attempts = _store_with_logs("preempted")
    reads: list[tuple[str, int]] = []
    real = lost_module.read_log

    def counted(run_id: str, attempt: int):  # type: ignore[no-untyped-def]
        reads.append((run_id, attempt))
        return real(run_id, attempt)
    monkeypatch.setattr(lost_module, "read_log", counted)
    report = build_report([], runs, attempts, spot_clusters={"c1": "h100"})
    [line] = report.preemptions
    history = {a.attempt: a.lost_seconds for a in report.attempt_history}
    assert line.lost_seconds == history[1] == 10.0  # the same figure in both tables
    assert sorted(reads) == [("r1", 1), ("r1", 2)]  # each attempt's log read once, not once a table
