"""Published MLPerf Training results: the vendored table read back as typed rows, and lookups.

The table (recipes/published/training_results.csv) has one row per published result (round,
submitter, system, benchmark) of the mlcommons/training_results_v* repositories, scored by
mlperf_logging's result_summarizer; recipes/published/generate.py builds it by hand and
recipes/published/ATTRIBUTION.md names the sources. The report puts a run beside `nearest()`;
the planner fits time-to-train against scale over `series()`.

Accelerators are matched through `catalog_gpu()`: an MLPerf `accelerator_model_name`, exactly as a
system JSON spells it, maps to the key (first alias) of the catalog size with that GPU, as the
size's row lists it (hardware/sizes.yaml `mlperf.accelerators`), or to None where the catalog
lists it under no Azure size (`no_azure_size`) or does not know it. Benchmarks are matched by their
current key: the logs of rounds up to v4.1 say "ssd" for RetinaNet and "gnn" for R-GAT.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from functools import lru_cache

from orchestrator.hardware.catalog import by_accelerator, find
from orchestrator.models import Frozen
from orchestrator.paths import recipes_dir

DATA_FILE = "published/training_results.csv"

# Old benchmark keys (as the logs of earlier rounds say) -> the current key.
BENCHMARK_ALIASES: dict[str, str] = {"ssd": "retinanet", "gnn": "rgat", "mask": "maskrcnn"}


def catalog_gpu(accelerator: str | None) -> str | None:
    """The key of the catalog GPU size (its first alias) for an MLPerf accelerator name, or for a
    catalog size name or alias; None when unknown or when no catalog size has that GPU."""
    row = by_accelerator(accelerator) or find(accelerator)
    return row.key if row is not None and row.gpus_per_vm else None


def canonical_benchmark(key: str) -> str:
    return BENCHMARK_ALIASES.get(key, key)


def round_key(name: str) -> tuple[int, ...]:
    """"v5.1" -> (5, 1), for ordering rounds."""
    return tuple(int(part) for part in name.lstrip("v").split(".") if part.isdigit())


class PublishedResult(Frozen):
    """One published result: a system's olympic-mean time-to-train on one benchmark.

    `mean_minutes` is the olympic mean over the result files the summarizer accepted;
    `score_minutes` = mean_minutes x scaling_factor (scaling.json, 1.0 when absent) is the
    published score. `system` is the results folder (= system JSON basename) under `org`."""

    round: str
    org: str
    submitter: str
    division: str
    availability: str
    system: str
    system_name: str
    accelerator: str
    accelerators_per_node: int
    nodes: int
    accelerators: int
    host_processor: str
    framework: str
    benchmark: str
    result_files: int
    runs_required: int
    runs_dropped: int
    mean_minutes: float
    scaling_factor: float
    score_minutes: float
    repo: str
    commit: str

    @property
    def gpu(self) -> str | None:
        """The catalog alias of this result's accelerator (see catalog_gpu)."""
        return catalog_gpu(self.accelerator)

    @property
    def benchmark_key(self) -> str:
        """The current benchmark key ("ssd" results are "retinanet", "gnn" ones "rgat")."""
        return canonical_benchmark(self.benchmark)

    @property
    def category(self) -> str:
        """The system JSON's status folded to MLPerf's categories: "available", "preview" or "rdi"
        (the raw `availability` is spelled many ways: "onprem", "Available Cloud", "cloud", ...)."""
        status = self.availability.lower()
        if "preview" in status:
            return "preview"
        if "research" in status or "rdi" in status:
            return "rdi"
        return "available"

    @property
    def complete(self) -> bool:
        """As many result files as the benchmark requires (an official-looking score)."""
        return self.result_files >= self.runs_required


@lru_cache(maxsize=1)
def _rows() -> tuple[PublishedResult, ...]:
    path = recipes_dir() / DATA_FILE
    with path.open(encoding="utf-8", newline="") as handle:
        return tuple(PublishedResult.model_validate(row) for row in csv.DictReader(handle))


def load_published() -> list[PublishedResult]:
    """Every row of the vendored table (read once, then cached)."""
    return list(_rows())


def series(benchmark: str, accelerator: str, division: str | None = "closed") -> list[PublishedResult]:
    """The results for one benchmark on one GPU (catalog alias, size name or MLPerf accelerator
    name), in `division` (None: both), by GPU count, then round, then score."""
    gpu = catalog_gpu(accelerator)
    if gpu is None:
        return []
    bench = canonical_benchmark(benchmark)
    rows = [row for row in _rows() if row.gpu == gpu and row.benchmark_key == bench
            and (division is None or row.division == division)]
    return sorted(rows, key=lambda r: (r.accelerators, round_key(r.round), r.score_minutes))


def nearest(benchmark: str, accelerator: str, gpus: int,
            division: str | None = "closed") -> PublishedResult | None:
    """The published result to put beside a run of `benchmark` on `gpus` GPUs of `accelerator`:
    the same GPU count if published, else the count closest in log space (|log a - log gpus|).
    Ties go to the newest round, then the fastest score. None when nothing matches."""
    return closest(series(benchmark, accelerator, division), gpus)


def closest(rows: Sequence[PublishedResult], gpus: int) -> PublishedResult | None:
    """Of `rows`, the one at the GPU count closest to `gpus` in log space (the same count
    first); ties go to the newest round, then the fastest score. None for no rows."""
    if not rows:
        return None
    want = math.log(max(gpus, 1))

    def rank(row: PublishedResult) -> tuple[float, tuple[int, ...], float]:
        distance = abs(math.log(max(row.accelerators, 1)) - want)
        return (distance, tuple(-part for part in round_key(row.round)), row.score_minutes)

    return min(rows, key=rank)
