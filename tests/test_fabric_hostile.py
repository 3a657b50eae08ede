"""Hostile fabric outputs, bounded (issue 48, point 7): a 200,000-space line, 1 M table rows, a
5,000-digit number and a file of NUL bytes. Each is answered in one line or read in bounded
memory; nothing here is timed (benchmarks/bench_fabric_parse.py prints the times and memory as
ratios). The 1 M-row case runs `fabric inspect` in a child process under an address-space cap, so
a parser that keeps every row (2.1 GB before) fails it."""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import EXIT_FABRIC, ConfigError
from orchestrator.fabric.nccltests import MAX_DIGITS, MAX_ROWS, parse_runs
from orchestrator.fabric.reading import FIRST_BLOCK, LINE_MAX, read_stream, read_text
from tests.cli_helpers import azbench_in_process, one_line_error

ROOT = Path(__file__).resolve().parents[1]
HEADER = ("# Collective test starting: all_reduce_perf\n"
          "# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor)\n"
          + "".join(f"#  Rank {r:2d} Group  0 Pid {r} on node{r // 8} device  {r % 8} [0x1b] NVIDIA H100 80GB HBM3\n"
                    for r in range(16))
          + "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
            "   busbw #wrong\n")
ROW = "{:>12}  {:>12}     float     sum      -1   1806.7  297.16  {:.2f}      {}   1835.9  292.43  576.74      0\n"


def write_rows(path: Path, rows: int) -> None:
    """An all_reduce table of `rows` sizes (8 bytes apart), one of them slow and one wrong."""
    with path.open("w") as fh:
        fh.write(HEADER)
        for i in range(rows):
            size = 8 * (i + 1)
            fh.write(ROW.format(size, size // 4, 1.5 if i == rows // 2 else 586.06, 3 if i == rows - 7 else 0))
        fh.write("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 585.1\n")


@pytest.mark.parametrize("line", [
    " " * 200_000,
    "#" + " " * 200_000 + "x",
    " " * 200_000 + "# Collective test starting: all_reduce_perf",
    "#  Rank  0 Group  0 Pid 1 on h device  0 [0x1] " + " " * 200_000 + "GPU",
    "h:1:2 [0] NCCL INFO Using network " + " " * 200_000 + "IB",
    "h:1:2 [0] NCCL INFO NET/IB : Using " + "[0]" * 70_000,
])
def test_a_200k_character_line_is_read_to_its_bound_and_the_rest_still_parsed(line: str) -> None:
    text = HEADER + line + "\n" + ROW.format(1024, 256, 586.06, 0)
    reading = read_text(text, "long.txt")
    [run] = reading.runs
    assert [s.size for s in run.sizes] == [1024] and run.collective == "all_reduce" and run.ranks == 16
    assert reading.cut_lines == 1 and f"over {LINE_MAX} bytes" in reading.notes[0]


def test_a_line_of_200k_spaces_is_one_line_exit_2_at_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "spaces.txt"
    path.write_text(" " * 200_000 + "\n")
    result = azbench_in_process("fabric", "inspect", str(path), home=tmp_path)
    assert result.code == 2 and "neither an nccl-tests output" in one_line_error(result)


def test_a_5000_digit_number_is_refused_in_one_line_naming_the_line(tmp_path: Path) -> None:
    for i, bad in enumerate(("1" * 5000 + " 2 float sum -1 1 1 1 0 1 1 1 0",
                             "# nThread 1 nGpus 1 minBytes " + "9" * 5000 + " maxBytes 8",
                             "#  Rank " + "7" * 5000 + " Group 0 Pid 1 on h device 0 [0x1] GPU",
                             "8 2 float sum -1 1.5 " + "3" * 5000 + " 1 0 1 1 1 0")):
        path = tmp_path / f"digits{i}.txt"
        path.write_text(HEADER + bad + "\n")
        result = azbench_in_process("fabric", "inspect", str(path), home=tmp_path)
        error = one_line_error(result)
        assert result.code == 2 and str(path) in error and f"(at most {MAX_DIGITS})" in error, error
        assert "internal error" not in error
        imported = azbench_in_process("results", "import", str(path), home=tmp_path)
        assert imported.code == 2 and f"(at most {MAX_DIGITS})" in one_line_error(imported)


class _Counting(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.read_bytes += len(data)
        return data


def test_a_file_with_nul_in_its_first_block_is_refused_without_reading_the_rest(tmp_path: Path) -> None:
    handle = _Counting(b"# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n\0" + b"\0" * (8 * FIRST_BLOCK))
    with pytest.raises(ConfigError, match=r"nul\.bin: not a text file \(a NUL byte at offset 42"):
        read_stream(handle, "nul.bin")
    assert handle.read_bytes == FIRST_BLOCK
    path = tmp_path / "zeros.out"
    path.write_bytes(b"\0" * (4 * FIRST_BLOCK))
    for args in (("fabric", "inspect", str(path)), ("results", "import", str(path))):
        result = azbench_in_process(*args, home=tmp_path)
        assert result.code == 2 and "internal error" not in one_line_error(result)
    inspected = one_line_error(azbench_in_process("fabric", "inspect", str(path), home=tmp_path))
    assert "not a text file" in inspected


def test_rows_over_the_cap_are_counted_and_what_a_verdict_needs_is_kept() -> None:
    rows = MAX_ROWS + 500
    text = HEADER + "".join(ROW.format(8 * (i + 1), 2 * (i + 1), 1.5 if i == rows - 3 else 586.06,
                                       3 if i == rows - 7 else 0) for i in range(rows))
    [run] = parse_runs(text)
    assert run.rows_read == rows and run.rows_dropped == rows - len(run.sizes) > 0
    assert run.wrong == 3  # a wrong element in a dropped row still counts
    assert run.largest is not None and run.largest.size == 8 * rows  # the largest size is kept
    assert run.peak is not None and run.peak.busbw == 586.06


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is Linux's")
def test_a_million_rows_are_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "rows.txt"
    write_rows(path, 1_000_000)
    assert path.stat().st_size > 100 << 20
    cap = 600 << 20  # the interpreter and azbench's imports take about 300 MB of address space

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = {**os.environ, "AZBENCH_HOME": str(tmp_path / "home")}
    env.pop("AZBENCH_DB_URL", None)
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "fabric", "inspect", str(path), "-o", "json"],
                          capture_output=True, text=True, env=env, cwd=ROOT, preexec_fn=limit, timeout=900)
    assert proc.returncode == EXIT_FABRIC, proc.stderr[-2000:]  # the wrong element fails it
    [report] = json.loads(proc.stdout)
    [run] = report["runs"]
    assert run["rows_dropped"] == 1_000_000 - len(run["busbw"]) and run["wrong"] == 3
    assert run["collective"] == "all_reduce" and run["ranks"] == 16 and report["verdict"] == "fail"
    wrong = next(c for c in run["checks"] if c["check"] == "wrong values")
    assert wrong["evidence"].startswith("3 wrong element(s) at 1 size(s) kept, first at 7999952 B")
