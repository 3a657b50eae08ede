"""Report site speed: `azbench report --html DIR` over every shared MLPerf log.

Prints JSON lines and never asserts. Usage: python benchmarks/bench_report_site.py [LOGS_DIR]
Target: the site of the 22 shared logs (import done beforehand) in < 5 s wall, end to end
through the CLI. Baselines measured in the same run: `azbench report --json` (the same store
reads and report, no site), and the static HTML page with matplotlib PNGs (render.write_html)
that the site replaces.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import best_of, emit, run_cmd  # noqa: E402

DEFAULT_LOGS = Path(__file__).resolve().parents[2] / "shared" / "mlperf-logs"
TARGET_S = 5.0
REPEATS = 3


def main() -> None:
    logs = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_LOGS
    if not logs.is_dir():
        emit("report_site_shared_logs", float("nan"), "s", skipped=f"{logs} is absent")
        return
    from orchestrator.recipes.catalog import model_facts
    from orchestrator.report.build import build_report
    from orchestrator.report.render import write_html
    from orchestrator.report.site import write_site
    from orchestrator.results.importer import import_path
    from orchestrator.store.database import Store

    with tempfile.TemporaryDirectory(prefix="azbench-bench-") as tmp:
        env = {**os.environ, "AZBENCH_HOME": tmp}
        env.pop("AZBENCH_DB_URL", None)
        os.environ.update(AZBENCH_HOME=tmp)
        os.environ.pop("AZBENCH_DB_URL", None)
        with Store.open() as store:
            summary = import_path(store, logs)
            results = store.list_results()
        cli = [sys.executable, "-m", "orchestrator", "report"]
        site_best, site_median = best_of(run_cmd([*cli, "--html", f"{tmp}/site"], env), REPEATS)
        json_best, _ = best_of(run_cmd([*cli, "--json"], env), REPEATS)
        report = build_report(results, model_facts=model_facts())
        write_best, _ = best_of(lambda: write_site(report, results, Path(tmp) / "site2"), REPEATS)
        png_best, _ = best_of(lambda: write_html(report, results, Path(tmp) / "png"), 1)
        files = sum(1 for p in (Path(tmp) / "site").rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in (Path(tmp) / "site").rglob("*") if p.is_file())
    emit("report_site_shared_logs", site_best, "s", target_s=TARGET_S, median_s=round(site_median, 4),
         results=len(summary.imported), files=files, mb=round(size / 1e6, 2),
         baseline_report_json_s=round(json_best, 4), ratio_to_json=round(site_best / json_best, 2))
    emit("write_site_in_process", write_best, "s", baseline_png_page_s=round(png_best, 4))


if __name__ == "__main__":
    main()
