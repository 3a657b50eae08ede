"""The interactive report site (`azbench report --html DIR`), built from the shared MLPerf logs
(when ../shared is here) plus a synthetic history of five nightly pipeline runs, the last one
regressed; checked as files and then in Debian's headless Chromium through chromium-driver:
charts render, links, sorting and filters work, nothing overflows at 1280 px, the history marks
the regression and the compare view shows deltas.

Set AZBENCH_UPDATE_SCREENSHOTS=1 to rewrite the screenshots in docs/screenshots/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from orchestrator.pipelines import baselines as bl
from orchestrator.pipelines.history import build_history, history_from_store
from orchestrator.store.database import Store
from orchestrator.store.schema import AttemptRow, EventRow, ResultRow, RunRow
from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[1]
DAY0 = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)
NIGHTS = 5
SLOW_NIGHT = 5  # this night's runs are 40% slower: a regression against nightly-1


def _result(run_id: str, nodes: int, minutes: float, step: float, night: int, log: Path) -> ResultRow:
    steps = [[i, step * (3 if i == 1 else 1) * (1 + 0.01 * (i % 5))] for i in range(1, 41)]
    summary = {"step_times": steps, "eval_steps": [], "eval_points": [[100.0 * nodes, 0.9]]}
    return ResultRow(content_hash=run_id, run_id=run_id, source="run", system=f"{nodes}xND_H100_v5",
                     benchmark="smoke", status="success", converged=True, minutes=minutes,
                     nodes=nodes, gpus=8 * nodes, sku="Standard_ND96isr_H100_v5",
                     summary_json=json.dumps(summary), submitter="azbench", log_path=str(log),
                     created_at=DAY0 + timedelta(days=night - 1, hours=1))


def seed_history(store: Store, logs: Path) -> None:
    """Nightly pipeline runs 1..5 (sweep nightly-N), 1 and 2 nodes x 2 repeats each; night 5 slow;
    one run of night 3 needed a retry. Baseline 'nightly' comes from night 1."""
    logs.mkdir(parents=True, exist_ok=True)
    with store.transaction():  # one commit, not one per row
        _seed_nights(store, logs)
    bl.set_baseline(store, "nightly", bl.collect(store, sweep_ids=["nightly-1"]))


def _seed_nights(store: Store, logs: Path) -> None:
    for night in range(1, NIGHTS + 1):
        slow = 1.4 if night == SLOW_NIGHT else 1.0 + 0.005 * night
        for nodes in (1, 2):
            for rep in range(2):
                run_id = f"n{night}-{nodes}n-{rep}"
                when = DAY0 + timedelta(days=night - 1)
                store.create_run(RunRow(id=run_id, sweep_id=f"nightly-{night}", cluster="gpu",
                                        recipe="smoke", benchmark="smoke", nodes=nodes,
                                        repeat_index=rep, state="succeeded", created_at=when))
                tries = 2 if (night, nodes, rep) == (3, 2, 0) else 1
                for k in range(1, tries + 1):
                    store.add_attempt(AttemptRow(
                        run_id=run_id, attempt=k, job_id=str(100 + k),
                        state="failed" if k < tries else "succeeded",
                        failure_class="nccl_timeout" if k < tries else None,
                        excluded_nodes=["gpu-node-3"] if k > 1 else [],
                        started_at=when, ended_at=when + timedelta(minutes=20)))
                store.add_event(EventRow(kind="health_gate", run_id=run_id, cluster="gpu",
                                         message="gate", data={"busbw_gbps": 180.0 + night}))
                log = logs / f"{run_id}.log"
                log.write_text("".join(f":::MLLOG {{\"key\": \"step\", \"value\": {i}}}\n"
                                       for i in range(60)), encoding="utf-8")
                store.add_result(_result(run_id, nodes, (10.0 / nodes) * slow * (1 + 0.01 * rep),
                                         0.5 * slow * (1 + 0.01 * rep), night, log))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The site of the shared logs (when present) plus the synthetic history, through the CLI."""
    tmp = tmp_path_factory.mktemp("site")
    env = {**os.environ, "AZBENCH_HOME": str(tmp / "home"), "CI": "true"}
    env.pop("AZBENCH_DB_URL", None)
    (tmp / "home").mkdir()
    with Store.open(f"sqlite:///{tmp / 'home' / 'azbench.db'}") as store:
        seed_history(store, tmp / "logs")
        if (SHARED / "mlperf-logs").is_dir():  # in-process: the CLI's import is tested elsewhere
            from orchestrator.results.importer import import_path

            assert import_path(store, SHARED / "mlperf-logs").imported
    out = tmp / "site"
    proc = _cli(["report", "--html", str(out)], env)
    assert "wrote" in proc.stderr
    yield out


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


# -- the files ----------------------------------------------------------------------------------


def test_site_is_self_contained(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    names = {p.relative_to(site).as_posix() for p in pages}
    assert {"index.html", "history.html", "compare.html", "bench/smoke.html"} <= names
    assert any(n.startswith("system/") for n in names)
    assert (site / "assets" / "plotly-basic.min.js").stat().st_size > 500_000
    assert "MIT" in (site / "assets" / "LICENSE-plotly.js.txt").read_text()
    for page in pages:
        text = page.read_text()
        # nothing fetched from the network: every script and stylesheet is a relative path
        for ref in re.findall(r'(?:src|href)="([^"#]+)"', text):
            assert not re.match(r"^[a-z]+:", ref), f"{page}: {ref}"
            assert (page.parent / ref).resolve().is_file(), f"{page}: broken link {ref}"


def test_system_page_drills_down_to_attempts_and_log(site: Path) -> None:
    page = (site / "system" / "azbench-2xND_H100_v5.html").read_text()
    assert "nccl_timeout" in page and "gpu-node-3" in page  # night 3's retried run
    assert "Log excerpt" in page and "&#34;key&#34;: &#34;step&#34;" in page  # escaped log text
    assert page.count('class="run"') == NIGHTS * 2


def test_history_marks_the_slow_night_only() -> None:
    """Pure: compare's verdicts per night against the band from night 1."""
    from tempfile import TemporaryDirectory

    with TemporaryDirectory() as tmp, Store.open(f"sqlite:///{tmp}/h.db") as store:
        seed_history(store, Path(tmp) / "logs")
        base = bl.get_baseline(store, "nightly")
        hist = build_history(store.list_results(), store.list_runs(), base)
        until = build_history(store.list_results(), store.list_runs(), base,
                              until=DAY0 + timedelta(days=SLOW_NIGHT - 2))
        stored = history_from_store(store)  # the latest baseline, with the gate's bandwidth
    ttt = next(s for s in hist.series if s.metric == "time_to_train" and s.nodes == 2)
    assert [p.occasion for p in ttt.points] == [f"pipeline run nightly-{n}" for n in range(1, 6)]
    assert [p.occasion for p in ttt.regressions] == [f"pipeline run nightly-{SLOW_NIGHT}"]
    assert ttt.band is not None and ttt.band[0] < ttt.points[0].value < ttt.band[1]
    assert all(len(s.points) == SLOW_NIGHT - 1 and not s.regressions for s in until.series)
    assert stored.baseline == "nightly"
    bw = [s for s in stored.series if s.metric == "allreduce_busbw"]
    assert [len(s.points) for s in bw] == [NIGHTS, NIGHTS] and all(s.band for s in bw)


# -- in the browser -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (the test extra) is absent")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("Debian's chromium and chromium-driver are not installed (infra/setup.sh)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-dev-shm-usage", "--window-size=1280,1000",
                f"--user-data-dir={tmp_path_factory.mktemp('chrome-profile')}"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(options=opts, service=Service(driver))
    drv.set_page_load_timeout(120)
    try:
        yield drv
    finally:
        drv.quit()


def _open(drv: Any, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    drv.get(page.as_uri())
    WebDriverWait(drv, 90).until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('.chart:not(.lazy)')]"
        ".every(c => c.dataset.rendered === '1')"))


def _fits(drv: Any) -> None:
    """Nothing wider than the 1280 px window: the page and every table inside its box."""
    width = drv.execute_script("return window.innerWidth")
    assert width == 1280
    assert drv.execute_script("return document.documentElement.scrollWidth") <= width
    wide = drv.execute_script(
        "return [...document.querySelectorAll('.table-wrap, .chart')]"
        ".filter(e => e.offsetParent && e.scrollWidth > e.clientWidth + 1).map(e => e.id || e.className)")
    assert wide == []


def _shot(drv: Any, name: str) -> None:
    if os.environ.get("AZBENCH_UPDATE_SCREENSHOTS") == "1":
        out = ROOT / "docs" / "screenshots"
        out.mkdir(parents=True, exist_ok=True)
        height = drv.execute_script("return Math.min(document.body.scrollHeight, 2400)")
        drv.set_window_size(1280, height + 140)
        drv.save_screenshot(str(out / f"{name}.png"))
        drv.set_window_size(1280, 1000)


def test_overview_charts_render_and_table_sorts_and_filters(browser: Any, site: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _open(browser, site / "index.html")
    charts = browser.find_elements(By.CSS_SELECTOR, ".chart")
    assert len(charts) >= 3 and all(c.find_elements(By.CSS_SELECTOR, "svg.main-svg") for c in charts)
    _fits(browser)
    _shot(browser, "overview")
    rows = "return [...document.querySelectorAll('#scores tbody tr:not(.hidden)')].map(r => r.cells[1].textContent)"
    before = browser.execute_script(rows)
    browser.find_element(By.CSS_SELECTOR, "#scores th[data-col='1']").click()
    asc = browser.execute_script(rows)
    assert asc == sorted(before, key=str.lower)
    browser.find_element(By.CSS_SELECTOR, "#scores th[data-col='1']").click()
    assert browser.execute_script(rows) == asc[::-1]
    browser.find_element(By.CSS_SELECTOR, "input[data-table='scores']").send_keys("2xND")
    assert browser.execute_script(rows) == ["azbench/2xND_H100_v5"]
    # a score's system link goes to the system page
    browser.find_element(By.LINK_TEXT, "azbench/2xND_H100_v5").click()
    WebDriverWait(browser, 90).until(lambda d: d.current_url.endswith("system/azbench-2xND_H100_v5.html"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "azbench/2xND_H100_v5"


def test_system_page_run_drill_down(browser: Any, site: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _open(browser, site / "system" / "azbench-2xND_H100_v5.html")
    _fits(browser)
    _shot(browser, "system")
    run = browser.find_element(By.ID, "run-smoke-4")
    assert run.get_attribute("open") is None
    browser.find_element(By.CSS_SELECTOR, "a[href='#run-smoke-4']").click()  # runs table -> run
    WebDriverWait(browser, 90).until(lambda d: d.execute_script(
        "return document.querySelector('#run-smoke-4 .chart').dataset.rendered === '1'"))
    assert "nccl_timeout" in run.text and "Log excerpt" in run.text
    _fits(browser)


def test_history_band_and_regression_marked(browser: Any, site: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, site / "history.html")
    _fits(browser)
    _shot(browser, "history")
    traces = browser.execute_script(
        "return [...document.querySelectorAll('.chart')].filter(c => c.layout.title.text"
        ".startsWith('smoke')).map(c => c.data.map(t => t.name || ''))")
    assert len(traces) == 7  # 1 and 2 nodes x time to train, step time, busbw; weak scaling at 2
    assert all(any(n.startswith("baseline nightly") for n in t) for t in traces)
    assert any("regression" in t for t in traces)
    assert browser.find_elements(By.CSS_SELECTOR, "td.v-regression")
    flt = browser.find_element(By.CSS_SELECTOR, "input.filter-charts")
    flt.send_keys("2xND step")
    shown = browser.execute_script("return [...document.querySelectorAll('.chart-box')]"
                                   ".filter(b => !b.classList.contains('hidden')).length")
    assert shown == 1


def test_compare_view_shows_deltas(browser: Any, site: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _open(browser, site / "compare.html")
    _fits(browser)
    section = browser.find_element(By.CSS_SELECTOR, "section[data-kind='systems']")
    a, b = (Select(section.find_element(By.CSS_SELECTOR, s)) for s in (".pick-a", ".pick-b"))
    keys = [o.text for o in a.options]
    a.select_by_visible_text(next(k for k in keys if k.startswith("smoke | azbench/1x")))
    b.select_by_visible_text(next(k for k in keys if k.startswith("smoke | azbench/2x")))
    cells = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[3].text
             for r in section.find_elements(By.CSS_SELECTOR, "tbody tr")}
    assert cells["GPUs"] == "+100.0%"
    assert cells["score (min)"].startswith("-")  # 2 nodes train faster
    runs = browser.find_element(By.CSS_SELECTOR, "section[data-kind='runs']")
    ra, rb = (Select(runs.find_element(By.CSS_SELECTOR, s)) for s in (".pick-a", ".pick-b"))
    ra.select_by_visible_text("smoke | azbench/1xND_H100_v5 | run 0")
    rb.select_by_visible_text(f"smoke | azbench/1xND_H100_v5 | run {2 * (SLOW_NIGHT - 1)}")
    deltas = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[3].text
              for r in runs.find_elements(By.CSS_SELECTOR, "tbody tr")}
    assert deltas["minutes"] == "+39.3%"  # the slow night's first run against night 1's
    _shot(browser, "compare")


def test_until_is_inclusive_of_its_day_and_bad_dates_are_config_errors() -> None:
    from orchestrator.cli.results import _parse_date
    from orchestrator.errors import ConfigError

    end = _parse_date("--until", "2026-11-03", end_of_day=True)
    assert end == datetime(2026, 11, 3, 23, 59, 59, 999999, tzinfo=timezone.utc)
    assert _parse_date("--until", "2026-11-03T12:00", end_of_day=True) == \
        datetime(2026, 11, 3, 12, tzinfo=timezone.utc)
    with pytest.raises(ConfigError, match="--until: 'yesterday' is not a date"):
        _parse_date("--until", "yesterday")


def test_speedup_chart_between_skus() -> None:
    """Neither the shared logs nor the synthetic nights have two SKUs at one size: the spec."""
    from orchestrator.report import figures
    from orchestrator.report.build import SkuSpeedup

    pair = SkuSpeedup(benchmark="llama31_8b", workers=8, sku_a="Standard_ND96isr_H100_v5",
                      sku_b="Standard_ND96isr_H200_v5", system_a="a", system_b="b", minutes_a=30.0,
                      minutes_b=20.0, speedup=1.5, speedup_per_gpu=1.5, speedup_per_dollar=1.2)
    fig = figures.sku_speedup([pair])
    assert fig is not None and figures.sku_speedup([]) is None
    assert [t["y"] for t in fig["data"]] == [[1.5], [1.2]]
    assert fig["data"][0]["x"] == ["llama31_8b 8 GPUs: ND96isr_H200_v5 vs ND96isr_H100_v5"]


def test_log_excerpt_keeps_head_and_tail(tmp_path: Path) -> None:
    from orchestrator.report.site import log_excerpt

    log = tmp_path / "big.log"
    log.write_text("".join(f"line {i} " + "x" * 80 + "\n" for i in range(500)))  # ~45 kB
    text = log_excerpt(str(log), lines=3) or ""
    assert text.splitlines()[0].startswith("line 0 ") and text.splitlines()[-1].startswith("line 499 ")
    assert "bytes in all" in text and log_excerpt(str(tmp_path / "gone.log")) is None
