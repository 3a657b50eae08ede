"""Ingest speed: azbench's mllog.parse_file against mlperf_logging's mlp_parser.parse_file.

Prints JSON lines and never asserts. Usage: python benchmarks/bench_ingest.py [LOGS_DIR]
Targets: >= 20x faster than mlp_parser on the 2.6 MB GPT-3 log; all shared logs in < 2 s.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.results.mllog import parse_file  # noqa: E402

DEFAULT_LOGS = Path(__file__).resolve().parents[2] / "shared" / "mlperf-logs"
GPT3 = "v3.1/Azure+NVIDIA/results/ND_H100_v5_n1344_pytorch/gpt3/result_0.txt"
REPEATS = 3


def best_of(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def bench_gpt3(log: Path) -> None:
    from mlperf_logging.compliance_checker import mlp_parser

    mb = log.stat().st_size / 1e6
    ours = best_of(lambda: parse_file(log))
    # mlp_parser needs a ruleset; 3.1.0 is the log's own round.
    theirs = best_of(lambda: mlp_parser.parse_file(str(log), ruleset="3.1.0"))
    emit(bench="ingest_gpt3", file=GPT3, mb=round(mb, 3), lines=parse_file(log).lines_total,
         azbench_s=round(ours, 5), mlp_parser_s=round(theirs, 5),
         speedup=round(theirs / ours, 1), azbench_mb_per_s=round(mb / ours, 1),
         mlp_parser_mb_per_s=round(mb / theirs, 1))


def bench_all(logs: Path) -> None:
    files = sorted(logs.rglob("result_*.txt"))
    mb = sum(f.stat().st_size for f in files) / 1e6
    total = best_of(lambda: [parse_file(f) for f in files])
    emit(bench="ingest_all_shared_logs", files=len(files), mb=round(mb, 3),
         seconds=round(total, 4), mb_per_s=round(mb / total, 1), target_s=2.0)


def main() -> int:
    logs = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_LOGS
    if not (logs / GPT3).is_file():
        emit(bench="ingest", skipped=f"shared MLPerf logs not found under {logs}")
        return 0
    bench_gpt3(logs / GPT3)
    bench_all(logs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
