"""Many small MLPerf result logs in a submission tree, for the import's hostile-input tests and
benchmarks: `<root>/<round>/Org/results/sys_NNNN/bert/result_N.txt`, ten logs per system (each
system with its `Org/systems/sys_NNNN.json`), each five MLLOG lines (benchmark, batch size,
run_start, one eval, run_stop) and different bytes (its times move by one millisecond per log),
so every log is a new result."""

from __future__ import annotations

import json
from pathlib import Path


def _line(key: str, time_ms: int, value: object = None, **meta: object) -> str:
    body = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key,
            "value": value, "metadata": {"file": "train.py", "lineno": 1, **meta}}
    return ":::MLLOG " + json.dumps(body) + "\n"


def write_small_logs(root: Path, count: int, round_name: str = "v5.1") -> Path:
    """Write `count` logs under `root`; returns `<root>/<round>`."""
    top = root / round_name
    systems = top / "Org" / "systems"
    systems.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        folder = top / "Org" / "results" / f"sys_{i // 10:04d}" / "bert"
        if not folder.is_dir():
            folder.mkdir(parents=True)
            (systems / f"sys_{i // 10:04d}.json").write_text(json.dumps(
                {"submitter": "Org", "number_of_nodes": "1", "accelerators_per_node": "8",
                 "accelerator_model_name": "NVIDIA H100-SXM5-80GB"}))
        t0 = 1_700_000_000_000 + i
        (folder / f"result_{i % 10}.txt").write_text(
            _line("submission_benchmark", t0, "bert") + _line("global_batch_size", t0, 64)
            + _line("run_start", t0 + 1000) + _line("eval_accuracy", t0 + 60_000, 0.9, samples_count=1024)
            + _line("run_stop", t0 + 121_000, status="success"))
    return top


def write_long_log(path: Path, lines: int, *, width: int = 0) -> Path:
    """A log of `lines` MLLOG step lines (each padded to `width` characters when given) between
    a run_start and a run_stop: a forgery that costs whoever reads it line by line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pad = "x" * max(width - 150, 0)
    step = _line("tracked_stats", 1_700_000_001_000, {"step_time": 1.0, "pad": pad}, step=1)
    with path.open("w") as fh:
        fh.write(_line("submission_benchmark", 1_700_000_000_000, "bert")
                 + _line("run_start", 1_700_000_000_500))
        for _ in range(lines // 1000):
            fh.write(step * 1000)
        fh.write(step * (lines % 1000))
        fh.write(_line("run_stop", 1_700_000_060_000, status="success"))
    return path
