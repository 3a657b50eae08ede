"""Tiny benchmark harness: time things, print one JSON line per figure, never assert.

Each figure carries its target and, where it has one, the baseline measured in the same run,
so a reader sees the ratio without trusting numbers from another machine or day.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any, Callable


def emit(name: str, value: float, unit: str, **extra: Any) -> dict[str, Any]:
    record = {"benchmark": name, "value": round(value, 6), "unit": unit, **extra}
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()
    return record


def best_of(fn: Callable[[], Any], repeats: int = 5) -> tuple[float, float]:
    """(best, median) wall seconds of `fn` over `repeats` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def run_cmd(argv: list[str], env: dict[str, str] | None = None) -> Callable[[], None]:
    def call() -> None:
        subprocess.run(argv, check=True, capture_output=True, env=env)
    return call
