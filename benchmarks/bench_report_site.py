"""Report speed and shape: `azbench report --html DIR` and the terminal summary over MLPerf trees.

Prints JSON lines (and writes them to benchmarks/results/bench_report_site.jsonl) and never
asserts. Usage:

    python benchmarks/bench_report_site.py [TREE ...] [--layout] [--out FILE]

Data sets: the shared logs (../shared/mlperf-logs, when present) and each TREE given, e.g. all
267 NVIDIA v5.1 logs (`git archive` of mlcommons/training_results_v5.1's NVIDIA/results and
NVIDIA/systems under a folder named v5.1). Per data set, imported beforehand into a fresh store:

- report_site: `azbench report --html DIR` end to end through the CLI, best of REPEATS (target
  < 5 s); baseline measured in the same run: `azbench report --json`, the same store reads and
  report without the site, so the ratio is what the site costs on this machine today;
- report_terminal: the default `azbench report` (lines, widest line; target < 80 lines within
  100 columns);
- report_figures: cost coverage on H100/H200/GB200 scores, headline scores equal to the vendored
  table's published scores, scores with a published neighbour;
- site_layout (--layout; Debian chromium + chromium-driver): the bounding-box checks of
  testsupport/site_layout.py on every page, the number of problems (target 0).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import best_of, emit, run_cmd  # noqa: E402
from orchestrator.report.build import Report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LOGS = ROOT.parent / "shared" / "mlperf-logs"
OUT = ROOT / "benchmarks" / "results" / "bench_report_site.jsonl"
TARGET_S = 5.0
REPEATS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description="azbench report: site and terminal speed and shape")
    parser.add_argument("trees", nargs="*", type=Path, help="MLPerf trees besides the shared logs")
    parser.add_argument("--layout", action="store_true", help="also the site's layout checks (chromium)")
    parser.add_argument("--out", type=Path, default=OUT, help="where the JSON lines go")
    args = parser.parse_args()
    out: Path = args.out
    sets = ([("shared_logs", DEFAULT_LOGS)] if DEFAULT_LOGS.is_dir() else []) + \
        [(t.name, t) for t in args.trees]
    records = []
    for name, tree in sets:
        records += bench(name, tree, layout=args.layout)
    if not sets:
        records.append(emit("report_site", math.nan, "s", skipped=f"{DEFAULT_LOGS} is absent"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def bench(name: str, tree: Path, *, layout: bool) -> list[dict[str, object]]:
    from orchestrator.recipes.catalog import model_facts
    from orchestrator.report.build import build_report
    from orchestrator.results.importer import import_path
    from orchestrator.store.database import Store

    records = []
    with tempfile.TemporaryDirectory(prefix="azbench-bench-") as tmp:
        env = {**os.environ, "AZBENCH_HOME": tmp, "COLUMNS": "100"}
        env.pop("AZBENCH_DB_URL", None)
        with Store.open(f"sqlite:///{tmp}/azbench.db") as store:
            imported = len(import_path(store, tree, archive_dir=Path(tmp) / "archive").imported)
            results = store.list_results()
        cli = [sys.executable, "-m", "orchestrator", "report"]
        site_best, site_median = best_of(run_cmd([*cli, "--html", f"{tmp}/site"], env), REPEATS)
        json_best, _ = best_of(run_cmd([*cli, "--json"], env), REPEATS)
        site = Path(tmp) / "site"
        files = [p for p in site.rglob("*") if p.is_file()]
        records.append(emit(
            f"report_site_{name}", site_best, "s", target_s=TARGET_S,
            median_s=round(site_median, 4), results=imported, pages=sum(
                1 for p in files if p.suffix == ".html"), mb=round(sum(
                    p.stat().st_size for p in files) / 1e6, 2),
            baseline_report_json_s=round(json_best, 4),
            ratio_to_json=round(site_best / json_best, 2)))
        text = subprocess.run(cli, capture_output=True, text=True, env=env, check=True).stdout
        lines = text.splitlines()
        records.append(emit(f"report_terminal_{name}", len(lines), "lines", target_lines=80,
                            widest=max(map(len, lines)), target_columns=100))
        report = build_report(results, model_facts=model_facts())
        records.append(emit(f"report_figures_{name}", len(report.groups), "scores",
                            **_figures(report)))
        if layout:
            records.append(_layout(name, site))
    return records


def _figures(report: Report) -> dict[str, object]:
    groups = [g for g in report.groups if g.score_minutes is not None]
    azure_gpus = [g for g in groups if g.gpu_type in ("H100", "H200", "GB200")]
    published = [g for g in groups if g.published_score_minutes is not None]
    equal = [g for g in published if math.isclose(g.score_minutes or 0, g.published_score_minutes
                                                  or 0, rel_tol=1e-9)]
    return {"h100_h200_gb200_scores": len(azure_gpus),
            "with_cost": sum(1 for g in azure_gpus if g.cost_per_result_usd is not None),
            "published_results": len(published), "headline_equals_published": len(equal),
            "with_published_neighbour": sum(1 for g in groups if g.published is not None),
            "gpu_types": sorted({g.gpu_type or "?" for g in groups})}


def _layout(name: str, site: Path) -> dict[str, object]:
    import shutil
    import time

    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        return emit(f"site_layout_{name}", math.nan, "problems", skipped="no chromium")
    from testsupport.site_layout import chromium, site_problems

    pages = [site / "index.html", *sorted((site / "bench").glob("*.html")), site / "compare.html",
             site / "history.html", *sorted((site / "system").glob("*.html"))]
    with tempfile.TemporaryDirectory(prefix="azbench-chrome-") as profile:
        driver = chromium(profile=Path(profile))
        start = time.perf_counter()
        try:
            found = site_problems(driver, pages)
        finally:
            driver.quit()
    problems = [p for ps in found.values() for p in ps]
    return emit(f"site_layout_{name}", len(problems), "problems", target=0, pages=len(pages),
                seconds=round(time.perf_counter() - start, 1), first=problems[:5])


if __name__ == "__main__":
    main()
