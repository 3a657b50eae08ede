"""An import tells each log's round from its own files (issue 38, point 4) and reads each log
once (point 6): the round folder's vX.Y (a clone's `training_results_v5.1`), the log's ruleset
key, or any vX.Y folder above; a log already stored is neither parsed nor checked again; and the
import says how far it got."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from orchestrator.results import checkpool, compliance, importer
from orchestrator.results.importer import ImportProgress, import_path, round_in_name
from orchestrator.store.database import Store
from tests.test_importer import mllog, synthetic_log

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def store(azbench_home: Path):
    s = Store.open()
    yield s
    s.close()


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(log name's folder, ruleset) of every log handed to the checker; each one passes."""
    seen: list[tuple[str, str]] = []

    def fake(jobs, **_kw):
        seen.extend((job.log.parent.name, job.ruleset) for job in jobs)
        return [compliance.Verdict(ok=True, ruleset=job.ruleset) for job in jobs]
    monkeypatch.setattr(checkpool, "check_logs", fake)
    return seen


def clone(root: Path, submitter: str = "Cisco", benchmark: str = "bert", log: str | None = None) -> Path:
    """<root>/<submitter>/results/sys_a/<benchmark>/result_0.txt, as a results repository's
    clone has it (no vX.Y folder between the clone's root and the submitter)."""
    bench = root / submitter / "results" / "sys_a" / benchmark
    bench.mkdir(parents=True)
    (bench / "result_0.txt").write_text(log or synthetic_log(benchmark))
    systems = root / submitter / "systems"
    systems.mkdir(parents=True)
    (systems / "sys_a.json").write_text(json.dumps({"number_of_nodes": "1", "accelerators_per_node": "8"}))
    return bench


@pytest.mark.parametrize(("name", "found"), [
    ("v5.1", "v5.1"), ("training_results_v5.1", "v5.1"), ("mlperf-v3.1.0", "v3.1.0"),
    ("results_v4.0_final", "v4.0"), ("ND_H100_v5", None), ("nemo2v5.1", None), ("v5.1.2.3", None),
    ("hsg_ngpu5120_ngc25.09_nemo", None), ("V5.1", None),
])
def test_a_round_is_a_vX_Y_standing_on_its_own_in_a_folder_name(name: str, found: str | None) -> None:
    assert round_in_name(name) == found


@pytest.mark.parametrize("entry", ["", "Cisco", "Cisco/results/sys_a/bert",
                                   "Cisco/results/sys_a/bert/result_0.txt"])
def test_a_clone_of_a_results_repository_keeps_its_round_from_any_entry(
        store: Store, tmp_path: Path, checked: list[tuple[str, str]], entry: str) -> None:
    root = tmp_path / "training_results_v5.1"
    clone(root)
    summary = import_path(store, root / entry, check_compliance=True)
    (item,) = summary.imported
    assert (item.round, item.compliance_ok) == ("v5.1", True)
    assert checked == [("bert", "5.1.0")] and summary.warnings == []
    (row,) = store.list_results()
    assert (row.round, row.ruleset, row.submitter) == ("v5.1", "5.1.0", "Cisco")


def test_the_logs_own_ruleset_key_gives_the_round_when_the_path_does_not(
        store: Store, tmp_path: Path, checked: list[tuple[str, str]]) -> None:
    log = mllog("submission_ruleset", "5.0.0") + synthetic_log()
    clone(tmp_path / "results-repo", log=log)
    (item,) = import_path(store, tmp_path / "results-repo", check_compliance=True).imported
    assert item.round == "v5.0" and checked == [("bert", "5.0.0")]


def test_a_vX_Y_folder_above_the_clone_gives_the_round(
        store: Store, tmp_path: Path, checked: list[tuple[str, str]]) -> None:
    clone(tmp_path / "v4.1" / "mlperf")
    (item,) = import_path(store, tmp_path / "v4.1" / "mlperf" / "Cisco", check_compliance=True).imported
    assert item.round == "v4.1" and checked == [("bert", "4.1.0")]


def test_the_round_folder_wins_over_the_log_and_says_so(
        store: Store, tmp_path: Path, checked: list[tuple[str, str]]) -> None:
    clone(tmp_path / "v5.1", log=mllog("submission_ruleset", "5.0.0") + synthetic_log())
    summary = import_path(store, tmp_path / "v5.1", check_compliance=True)
    assert summary.imported[0].round == "v5.1" and checked == [("bert", "5.1.0")]
    assert [w.message for w in summary.warnings] == [
        "log says ruleset 5.0.0 but sits in round folder v5.1: checked and filed as v5.1"]


def test_a_log_whose_round_cannot_be_told_says_why(
        store: Store, tmp_path: Path, checked: list[tuple[str, str]]) -> None:
    bench = clone(tmp_path / "results-repo")
    summary = import_path(store, tmp_path / "results-repo", check_compliance=True)
    assert checked == [] and summary.imported[0].round is None
    (warning,) = summary.warnings
    assert warning.path == str(bench / "result_0.txt")
    assert warning.message == (
        f"compliance not checked: round unknown: no vX.Y folder in {tmp_path} or above, and no "
        "submission_ruleset, ruleset or mlperf_version key in the log: give --round")


def test_a_stored_log_is_neither_parsed_nor_checked_again(
        store: Store, tmp_path: Path, checked: list[tuple[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "training_results_v5.1"
    clone(root)
    clone(root, submitter="Dell", benchmark="gpt3")
    first = import_path(store, root, check_compliance=True)
    parsed: list[Path] = []
    real = importer.parse_file
    monkeypatch.setattr(importer, "parse_file", lambda p: parsed.append(p) or real(p))
    checked.clear()
    again = import_path(store, root, check_compliance=True)
    assert parsed == [] and checked == [] and again.imported == []
    # what scripts read: each duplicate names the stored result, its round, its verdict and why
    assert [(d.result_id, d.round, d.compliance_ok, d.skipped) for d in again.duplicates] == [
        (first.imported[0].result_id, "v5.1", True, "already stored (same bytes, same folder)"),
        (first.imported[1].result_id, "v5.1", True, "already stored (same bytes, same folder)")]


def test_the_same_bytes_in_another_folder_are_that_folders_result_too(
        store: Store, tmp_path: Path, checked: list[tuple[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Dell's v5.1 retinanet and rgat logs are byte-identical for two systems: each system keeps
    its result; the bytes are archived once; a copy in the same folder is a duplicate, named."""
    root = tmp_path / "training_results_v5.1"
    bench = clone(root)
    first = import_path(store, root, check_compliance=True, archive_dir=tmp_path / "archive")
    shutil.copytree(root / "Cisco", root / "Copy")  # the same bytes under another submitter
    (bench / "result_1.txt").write_bytes((bench / "result_0.txt").read_bytes())  # and in its folder
    parsed: list[Path] = []
    real = importer.parse_file
    monkeypatch.setattr(importer, "parse_file", lambda p: parsed.append(p) or real(p))
    checked.clear()
    again = import_path(store, root, check_compliance=True, archive_dir=tmp_path / "archive")
    (new,) = again.imported
    assert new.submitter == "Copy" and new.system == "sys_a" and new.round == "v5.1"
    assert new.result_id != first.imported[0].result_id and checked == [("bert", "5.1.0")]
    assert parsed == [root / "Copy" / "results" / "sys_a" / "bert" / "result_0.txt"]
    assert sorted(d.skipped or "" for d in again.duplicates) == [
        "already stored (same bytes, same folder)", "already stored (same bytes, same folder)"]
    assert len(list((tmp_path / "archive").glob("*.log"))) == 1  # the bytes, once
    rows = store.list_results()
    assert sorted(r.submitter or "" for r in rows) == ["Cisco", "Copy"]
    assert rows[0].log_path == rows[1].log_path


def test_a_second_copy_in_one_import_is_a_duplicate_of_the_first(
        store: Store, tmp_path: Path, checked: list[tuple[str, str]]) -> None:
    root = tmp_path / "v5.1"
    bench = clone(root)
    (bench / "result_1.txt").write_bytes((bench / "result_0.txt").read_bytes())
    shutil.copytree(root / "Cisco", root / "Copy")
    summary = import_path(store, root, check_compliance=True)
    assert len(checked) == 2 and len(summary.imported) == 2  # Cisco's and Copy's
    assert len(summary.duplicates) == 2
    for dup in summary.duplicates:  # result_1 of each folder: result_0's bytes, in its folder
        assert dup.path.endswith("result_1.txt") and dup.skipped == (
            "same bytes as result_0.txt in the same folder")
        assert dup.result_id == next(i.result_id for i in summary.imported
                                     if i.submitter == dup.submitter)


def test_a_new_log_beside_a_stored_one_of_another_benchmark_is_refused(
        store: Store, tmp_path: Path) -> None:
    from orchestrator.errors import ConfigError
    bench = clone(tmp_path / "v5.1")
    import_path(store, tmp_path / "v5.1")
    (bench / "result_1.txt").write_text(synthetic_log("gpt3"))
    with pytest.raises(ConfigError, match=r"mixes benchmarks \(bert: result_0.txt; gpt3: result_1.txt\)"):
        import_path(store, tmp_path / "v5.1")


def test_progress_goes_read_parse_check_store_done_with_its_counts(
        store: Store, tmp_path: Path, checked: list[tuple[str, str]]) -> None:
    root = tmp_path / "v5.1"
    clone(root)
    clone(root, submitter="Dell", log=synthetic_log(minutes=3.0))
    import_path(store, root / "Cisco")  # one stored already
    seen: list[ImportProgress] = []
    import_path(store, root, check_compliance=True, progress=seen.append)
    stages = [p.stage for p in seen]
    assert stages == sorted(stages, key=["read", "parse", "check", "store", "done"].index)
    last = seen[-1]
    assert (last.stage, last.found, last.read, last.skipped, last.parsed) == ("done", 2, 2, 1, 1)
    assert (last.to_check, last.checked, last.stored, last.left_s) == (1, 0, 1, 0.0)


def test_the_cli_meter_is_quiet_for_a_quick_import_and_plain_without_a_terminal() -> None:
    from orchestrator.cli.results import ImportMeter, import_line
    out = io.StringIO()
    meter = ImportMeter(out)
    meter(ImportProgress(stage="read", found=289, read=3, elapsed_s=0.5, left_s=1.0))
    assert out.getvalue() == ""  # under 2 s: nothing
    meter(ImportProgress(stage="check", found=289, read=289, skipped=22, parsed=267,
                         to_check=267, checked=40, elapsed_s=3.0, left_s=12.4))
    meter(ImportProgress(stage="check", found=289, read=289, skipped=22, parsed=267,
                         to_check=267, checked=41, elapsed_s=3.1, left_s=12.3))  # < 10 s later
    meter.close()
    assert out.getvalue() == ("read 289/289 logs (22 already stored), parsed 267/267, "
                              "checked 40/267, about 12 s left\n")
    assert import_line(ImportProgress(stage="store", found=5, read=5, parsed=5, to_check=5,
                                      checked=5, elapsed_s=9)) == \
        "read 5/5 logs, parsed 5/5, checked 5/5, storing 5"


def test_the_cli_meter_redraws_one_line_on_a_terminal_and_clears_it() -> None:
    from orchestrator.cli.results import ImportMeter

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True
    out = Tty()
    meter = ImportMeter(out)
    meter(ImportProgress(stage="parse", found=10, read=10, parsed=2, elapsed_s=2.5))
    meter(ImportProgress(stage="check", found=10, read=10, parsed=10, to_check=10, checked=1,
                         elapsed_s=2.6, left_s=0.5))
    meter.close()
    text = out.getvalue()
    assert "\n" not in text and text.endswith("\r\x1b[K")
    assert text.count("\r\x1b[K") == 3 and "checked 1/10, under 1 s left" in text
