"""`azbench plan`: the table, the marks, --json, stored results, and bad input as one line and
exit 2 (in-process through the CLI's own main, as a user runs it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orchestrator.store.database import Store
from orchestrator.store.schema import ResultRow
from tests.cli_helpers import azbench, azbench_in_process, one_line_error


def test_the_issue_example_prints_the_table_marks_a_count_and_its_points(tmp_path: Path) -> None:
    result = azbench_in_process("plan", "llama31_405b", "--sku", "gb200", "--target-minutes", "15",
                                home=tmp_path, env={"COLUMNS": "220"})  # every column, no cell wrapped
    assert result.code == 0, result.err
    out = result.out
    assert "llama31_405b on ND GB200 v6" in out and "<- target" in out
    answer = next(line for line in out.splitlines() if line.startswith("15 min predicted: "))
    nodes = answer.removeprefix("15 min predicted: ").split(" nodes")[0]
    assert any(line.startswith(f"│ {nodes} ") and re.search(r"<- target +│$", line) for line in out.splitlines()), out
    assert "stands on 9 published points at 8 GPU counts, 256-5,120 GPUs" in out
    assert "v5.1 NVIDIA hsg_ngpu5120_ngc25.09_nemo" in out  # the points, by name
    assert "standardNDISRGB200V6NDRFamily" in out and "list-price estimate" in out
    assert "1.6x past 5,120 GPUs" in out  # how far the 2,048-VM row extrapolates


def test_json_is_the_plan_model(tmp_path: Path) -> None:
    result = azbench_in_process("plan", "gpt3", "--sku", "h100", "--nodes", "64,1344", "--json", home=tmp_path)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert [r["nodes"] for r in data["rows"]] == [64, 1344]
    assert data["runs_required"] == 3 and data["price_per_vm_hour_usd"] == 98.32
    assert data["basis"]["points"] and data["basis"]["interval"]["coverage"] == 0.8
    row = data["rows"][1]
    assert row["position"] == "measured" and row["measured_by"] == "v4.0 NVIDIA eos-dfw_n1344_ngc24.04_nemo"
    assert row["vcpus"] == 1344 * 96 and row["quota_family"] == "standardNDSH100v5Family"


def test_stored_results_are_marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path))
    monkeypatch.delenv("AZBENCH_DB_URL", raising=False)
    with Store.open() as store:
        store.add_results([ResultRow(content_hash=f"r{i}", source="run", system="64xND_H100_v5", benchmark="gpt3",
                                     status="success", converged=True, minutes=m, run_start_ms=i, nodes=64,
                                     gpus=512, sku="Standard_ND96isr_H100_v5") for i, m in enumerate((60, 61, 62))])
    result = azbench_in_process("plan", "gpt3", "--sku", "h100", "--nodes", "64", home=tmp_path)
    assert result.code == 0, result.err
    assert "61.00*" in result.out and "your 1 stored result(s)" in result.out
    assert "* " in result.out and "stored: 64xND_H100_v5" in result.out
    ignored = azbench_in_process("plan", "gpt3", "--sku", "h100", "--nodes", "64", "--no-stored", home=tmp_path)
    assert "61.00*" not in ignored.out and "stored:" not in ignored.out


@pytest.mark.parametrize("args, message", [
    (("plan", "llama99", "--sku", "gb200"), "config error: unknown benchmark 'llama99'"),
    (("plan", "gpt3", "--sku", "h900"), "not found: unknown SKU 'h900'"),
    (("plan", "gpt3", "--sku", "d4s_v5"), "has no GPU"),
    (("plan", "gpt3", "--sku", "h100", "--nodes", "0"), "--nodes: node counts must be between 1"),
    (("plan", "gpt3", "--sku", "h100", "--nodes", "8,x"), "--nodes: 'x' is not a whole number"),
    (("plan", "gpt3", "--sku", "h100", "--nodes", ""), "--nodes: '' is not a whole number"),
    (("plan", "llama31_405b", "--sku", "gb200", "--nodes", "100"), "not a whole number of racks"),
    (("plan", "llama31_405b", "--sku", "gb200", "--nodes", "5760"),
     "is 4.5x the largest measured scale (5,120 GPUs) of llama31_405b on ND GB200 v6; predictions stop at 4x"),
    (("plan", "llama31_405b", "--sku", "gb200", "--target-minutes", "-1"), "--target-minutes: must be between"),
    (("plan", "llama31_405b", "--sku", "gb200", "--budget", "nan"), "--budget: must be between"),
    (("plan", "llama2_70b_lora", "--sku", "mi300x", "--budget", "1000"), "--budget needs a price"),
    (("plan", "llama31_8b", "--sku", "h200"), "measured at one GPU count only"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = azbench_in_process(*args, home=tmp_path)
    assert result.code == 2, (result.out, result.err)
    line = one_line_error(result)
    assert line.startswith("azbench: ") and message in line, line


def test_extrapolate_answers_past_4x(tmp_path: Path) -> None:
    result = azbench_in_process("plan", "llama31_405b", "--sku", "gb200", "--nodes", "5760", "--extrapolate",
                                home=tmp_path, env={"COLUMNS": "220"})
    assert result.code == 0, result.err
    assert "4.5x past 5,120 GPUs" in result.out


def test_a_real_process_refuses_with_one_line(tmp_path: Path) -> None:
    result = azbench("plan", "llama31_405b", "--sku", "gb200", "--nodes", "8192", home=tmp_path)
    assert result.code == 2
    assert "predictions stop at 4x (pass --extrapolate to see it anyway)" in one_line_error(result)


def test_output_and_query_go_through_the_shared_helper(tmp_path: Path) -> None:
    """-o tsv after --query prints the marked rows' node counts, one per line, no header; a bad
    query is one line and exit 2."""
    marked = azbench_in_process("plan", "llama31_405b", "--sku", "gb200", "--target-minutes", "15",
                                "--query", "rows[?length(marks) > `0`].nodes", "-o", "tsv", home=tmp_path)
    assert marked.code == 0, marked.err
    as_json = json.loads(azbench_in_process("plan", "llama31_405b", "--sku", "gb200", "--target-minutes", "15",
                                            "-o", "json", home=tmp_path).out)
    expected = [str(r["nodes"]) for r in as_json["rows"] if r["marks"]]
    assert expected and marked.out.split() == expected
    bad = azbench_in_process("plan", "llama31_405b", "--sku", "gb200", "--query", "rows[?", home=tmp_path)
    assert bad.code == 2 and "--query" in one_line_error(bad)


@pytest.mark.parametrize("width", [100, 80])
def test_plan_is_readable_at_the_terminal_width(tmp_path: Path, width: int) -> None:
    """Issue 38: at 100 columns the table cut its cells ('$58,…') and the lines under it ran to
    206 columns. Now no line is wider than the terminal, no cell is cut, and the columns left out
    are named (-o json has them all)."""
    from rich.cells import cell_len
    result = azbench_in_process("plan", "llama31_405b", "--sku", "gb200", home=tmp_path,
                                env={"COLUMNS": str(width)})
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert max(cell_len(line.rstrip()) for line in lines) <= width
    table = [line for line in lines if line.startswith(("│", "┃"))]
    assert table and not any("…" in line for line in table)
    costs = re.findall(r"\$[\d,]+", "\n".join(table))
    assert len(costs) == 12 and all(re.fullmatch(r"\$\d{1,3}(,\d{3})+", c) for c in costs)  # whole
    at = next(i for i, line in enumerate(lines) if line.startswith(f"left out at {width} columns: "))
    left = " ".join([lines[at], *[line.strip() for line in lines[at + 1:at + 3] if line.startswith("    ")]])
    assert "quota vCPUs" in left and "nodes" not in left.split("(")[0]
    wide = azbench_in_process("plan", "llama31_405b", "--sku", "gb200", home=tmp_path, env={"COLUMNS": "220"})
    assert "left out at" not in wide.out and "quota vCPUs" in wide.out
