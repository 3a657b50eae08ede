"""Fabric outputs, bounded (issue 48, point 7): time and peak memory of `fabric inspect` on the
hostile cases, as ratios. Prints one JSON line per case and never asserts.

Usage: python benchmarks/bench_fabric_parse.py [ROWS]   (ROWS: the big table, default 1,000,000)

Cases, each in its own process (peak RSS from os.wait4's rusage, address space capped at 2 GiB so
a regression fails fast):
- `cli_baseline`: `fabric inspect` of a 20-line output: the floor under every figure;
- `spaces_200k`: one line of 200,000 spaces (quadratic before: 40,000 took 5.5 s). Target < 1 s
  of parsing: read `over_baseline_s` (its seconds minus the baseline's);
- `spaces_doubling`: 400,000 spaces: `doubling_ratio` is its parse time over the 200,000 case's
  (about 1 when linear in the line's bound; 4 was the quadratic pattern);
- `rows_N` and `rows_N/2`: an N-row table (1 M rows is ~110 MB; 2.1 GB of RSS before):
  `rss_over_file` (peak RSS / file size; 31 before), `rss_ratio_to_half` (about 1 when memory
  is flat in the rows), `time_ratio_to_half` (about 2 when time is linear);
- `digits_5000`, `nul_500mb`: one-line refusals (exit 2); the NUL file is 500 MB of zeros, read
  only to its first block (42 s before): `over_baseline_s` should be ~0.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness import emit  # noqa: E402

AS_LIMIT = 2 << 30
HEADER = ("# Collective test starting: all_reduce_perf\n"
          "# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor)\n"
          + "".join(f"#  Rank {r:2d} Group  0 Pid {r} on node{r // 8} device  {r % 8} [0x1b] NVIDIA H100 80GB HBM3\n"
                    for r in range(16))
          + "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
            "   busbw #wrong\n")
ROW = "{:>12}  {:>12}     float     sum      -1   1806.7  297.16  586.06      0   1835.9  292.43  576.74      0\n"


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def measure(path: Path, env: dict[str, str]) -> dict[str, float | int]:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "fabric", "inspect", str(path), "-o", "json"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_cap, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    return {"seconds": round(time.perf_counter() - start, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "exit": os.waitstatus_to_exitcode(status)}


def write_rows(path: Path, rows: int) -> None:
    with path.open("w") as fh:
        fh.write(HEADER)
        for i in range(rows):
            fh.write(ROW.format(8 * (i + 1), 2 * (i + 1)))
        fh.write("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 585.1\n")


def main() -> int:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory(prefix="azbench-fabric-bench-") as name:
        tmp = Path(name)
        env = {**os.environ, "AZBENCH_HOME": str(tmp / "home")}
        env.pop("AZBENCH_DB_URL", None)
        small = tmp / "small.txt"
        write_rows(small, 1)
        base = measure(small, env)
        emit("fabric_cli_baseline", float(base["cpu_s"]), "cpu_s", **base)

        def over(result: dict[str, float | int]) -> float:
            return round(float(result["cpu_s"]) - float(base["cpu_s"]), 3)

        spaces = {}
        for n in (200_000, 400_000):
            path = tmp / f"spaces{n}.txt"
            path.write_text(HEADER + " " * n + "# Collective test starting: x\n" + ROW.format(8, 2))
            spaces[n] = measure(path, env)
            emit(f"fabric_spaces_{n}", float(spaces[n]["cpu_s"]), "cpu_s", over_baseline_s=over(spaces[n]),
                 target_over_baseline_s=1.0, **spaces[n])
        emit("fabric_spaces_doubling", max(over(spaces[400_000]), 0.001) / max(over(spaces[200_000]), 0.001),
             "ratio", note="parse time at 400k spaces over 200k: ~1 bounded, ~4 quadratic")

        results = {}
        for n in (rows // 2, rows):
            path = tmp / f"rows{n}.txt"
            write_rows(path, n)
            size_mb = path.stat().st_size / 2 ** 20
            results[n] = measure(path, env)
            emit(f"fabric_rows_{n}", float(results[n]["cpu_s"]), "cpu_s", file_mb=round(size_mb, 1),
                 rss_over_file=round(float(results[n]["peak_rss_mb"]) / size_mb, 3),
                 us_per_row=round(over(results[n]) / n * 1e6, 2), **results[n])
            path.unlink()
        half, full = results[rows // 2], results[rows]
        emit("fabric_rows_ratio", round(float(full["peak_rss_mb"]) / float(half["peak_rss_mb"]), 3), "ratio",
             rss_ratio_to_half=round(float(full["peak_rss_mb"]) / float(half["peak_rss_mb"]), 3),
             time_ratio_to_half=round(max(over(full), 0.001) / max(over(half), 0.001), 3),
             note="rss ~1: flat in the rows; time ~2: linear")

        digits = tmp / "digits.txt"
        digits.write_text(HEADER + "1" * 5000 + " 2 float sum -1 1 1 1 0 1 1 1 0\n")
        result = measure(digits, env)
        emit("fabric_digits_5000", float(result["cpu_s"]), "cpu_s", over_baseline_s=over(result), **result)
        nul = tmp / "nul.bin"
        with nul.open("wb") as fh:
            fh.truncate(500 << 20)  # 500 MB of NUL (sparse: writing it is not what is measured)
        result = measure(nul, env)
        emit("fabric_nul_500mb", float(result["cpu_s"]), "cpu_s", over_baseline_s=over(result), **result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
