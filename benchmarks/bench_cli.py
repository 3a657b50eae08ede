"""CLI start-up: `azbench --help` against bare `python -c pass`, measured in the same run.

Target: `azbench --help` under 0.3 s wall on a 2-core machine, with no Azure SDK, SQLAlchemy or
matplotlib import on that path. Run: python benchmarks/bench_cli.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import best_of, emit, run_cmd  # noqa: E402

HEAVY = ("azure", "sqlalchemy", "matplotlib", "paramiko", "torch", "mlperf_logging")


def heavy_imports(argv: list[str]) -> list[str]:
    code = ("import sys, runpy; sys.argv = " + repr(["azbench", *argv]) + "\n"
            "try:\n    runpy.run_module('orchestrator', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(','.join(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    loaded = set(out.strip().splitlines()[-1].split(",")) if out.strip() else set()
    return sorted(m for m in HEAVY if m in loaded)


def main() -> None:
    base_best, base_med = best_of(run_cmd([sys.executable, "-c", "pass"]), 7)
    emit("python_startup", base_best, "s", median=round(base_med, 4))
    for args in (["--help"], ["catalog", "--json"],
                 ["up", "--dry-run", "--provider", "azure", "--sku", "gb200", "--nodes", "2048",
                  "--region", "eastus", "--json"]):
        best, med = best_of(run_cmd([sys.executable, "-m", "orchestrator", *args]), 7)
        emit("azbench " + " ".join(args[:2]), best, "s", median=round(med, 4),
             ratio_vs_python=round(best / base_best, 2), overhead_s=round(best - base_best, 4),
             target_s=0.3 if args == ["--help"] else None, heavy_imports=heavy_imports(args))


if __name__ == "__main__":
    main()
