"""The interactive report site (`azbench report --html DIR`), built from the shared MLPerf logs
(when ../shared is here) plus a synthetic history of five nightly pipeline runs, the last one
regressed; checked as files and then in Debian's headless Chromium through chromium-driver:
charts render, links, sorting and filters work, nothing overflows at 1280 px, the history marks
the regression and the compare view shows deltas.

A second site holds many systems (issue 31): the synthetic 15-system tree of
testsupport/mlperf_tree.py plus the shared logs, 20 systems; or, locally, any MLPerf tree named by
AZBENCH_REPORT_TREE (e.g. the 267 NVIDIA v5.1 logs). Its layout is checked by bounding boxes
(testsupport/site_layout.py): no legend over a plot area, no overlapping or repeated tick labels,
no plot area narrower than 300 px at 1,280 px; and one colour per system on every page, the
systems key, the compare page's defaults and its URL, steps (not samples) on step-time axes, no
path of this machine in any page.

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
from testsupport.mlperf_tree import MANY, write_tree
from testsupport.site_layout import LAYOUT_JS, READY_JS

ROOT = Path(__file__).resolve().parents[1]
DAY0 = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)
NIGHTS = 5
SLOW_NIGHT = 5  # this night's runs are 40% slower: a regression against nightly-1


def _result(run_id: str, nodes: int, minutes: float, step: float, night: int, log: Path) -> ResultRow:
    steps = [[i, step * (3 if i == 1 else 1) * (1 + 0.01 * (i % 5))] for i in range(1, 41)]
    summary = {"step_times": steps, "eval_steps": [], "eval_points": [[100.0 * nodes, 0.9, 0]]}
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
    bl.set_baseline(store, "nightly", bl.collect(store, bl.Selection(sweep_ids=("nightly-1",))))


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
    flt.send_keys("16 GPUs step")
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
    assert cells["MLPerf score (min)"].startswith("-")  # 2 nodes train faster (issue 31: the
    # metric is the MLPerf score, x scaling, where it was the raw mean called "score (min)")
    runs = browser.find_element(By.CSS_SELECTOR, "section[data-kind='runs']")
    ra, rb = (Select(runs.find_element(By.CSS_SELECTOR, s)) for s in (".pick-a", ".pick-b"))
    ra.select_by_visible_text("smoke | azbench/1xND_H100_v5 | run 0")
    rb.select_by_visible_text(f"smoke | azbench/1xND_H100_v5 | run {2 * (SLOW_NIGHT - 1)}")
    deltas = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[3].text
              for r in runs.find_elements(By.CSS_SELECTOR, "tbody tr")}
    assert deltas["minutes"] == "+39.3%"  # the slow night's first run against night 1's


def test_until_is_inclusive_of_its_day_and_bad_dates_are_config_errors() -> None:
    from orchestrator.cli.common import parse_date
    from orchestrator.errors import ConfigError

    end = parse_date("--until", "2026-11-03", end_of_day=True)
    assert end == datetime(2026, 11, 3, 23, 59, 59, 999999, tzinfo=timezone.utc)
    assert parse_date("--until", "2026-11-03T12:00", end_of_day=True) == \
        datetime(2026, 11, 3, 12, tzinfo=timezone.utc)
    with pytest.raises(ConfigError, match="--until: 'yesterday' is not a date"):
        parse_date("--until", "yesterday")


def test_speedup_chart_between_skus() -> None:
    """Neither the shared logs nor the synthetic nights have two SKUs at one size: the spec."""
    from orchestrator.report import figures
    from orchestrator.report.build import SkuSpeedup
    from orchestrator.report.labels import cut_apart

    pair = SkuSpeedup(benchmark="llama31_8b", workers=8, sku_a="Standard_ND96isr_H100_v5",
                      sku_b="Standard_ND96isr_H200_v5", system_a="v5.1/A/a", system_b="v5.1/B/b",
                      minutes_a=30.0, minutes_b=20.0, speedup=1.5, speedup_per_gpu=1.5,
                      speedup_per_dollar=1.2, round_a="v5.1", round_b="v5.1")
    fig = figures.sku_speedup([pair])
    assert fig is not None and figures.sku_speedup([]) is None
    # horizontal bars (issue 31: long labels): the values are x, the labels y; both systems named
    assert [t["x"] for t in fig["data"]] == [[1.5], [1.2]]
    whole = "llama31_8b 8 GPUs: v5.1/B/b (ND96isr_H200_v5) vs v5.1/A/a (ND96isr_H100_v5)"
    assert fig["data"][0]["y"] == cut_apart([whole], figures.BAR_LABEL_CHARS)
    assert fig["data"][0]["customdata"] == [pair.text] and "v5.1/B/b" in pair.text and "v5.1/A/a" in pair.text
    assert all(t["orientation"] == "h" for t in fig["data"])
    # no legend entry without data (issue 47): no price, no "per dollar" trace
    unpriced = figures.sku_speedup([pair.model_copy(update={"speedup_per_dollar": None})])
    assert unpriced is not None and [t["name"] for t in unpriced["data"]] == ["speedup"]
    mixed = figures.sku_speedup([pair.model_copy(update={"round_a": "v5.0", "mixed_rounds": True})])
    assert mixed is not None and mixed["data"][0]["y"][0].endswith("[mixed rounds]")


def test_log_excerpt_keeps_head_and_tail(tmp_path: Path) -> None:
    from orchestrator.report.site import log_excerpt

    log = tmp_path / "big.log"
    log.write_text("".join(f"line {i} " + "x" * 80 + "\n" for i in range(500)))  # ~45 kB
    text = log_excerpt(str(log), lines=3) or ""
    assert text.splitlines()[0].startswith("line 0 ") and text.splitlines()[-1].startswith("line 499 ")
    assert "bytes in all" in text and log_excerpt(str(tmp_path / "gone.log")) is None


# -- many systems (issue 31) ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def many_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(site, home) of many systems: AZBENCH_REPORT_TREE when set (a real MLPerf tree), else
    the synthetic 15-system tree plus the shared logs; built through the CLI."""
    tmp = tmp_path_factory.mktemp("many")
    home = tmp / "home"
    home.mkdir()
    env = {**os.environ, "AZBENCH_HOME": str(home), "CI": "true"}
    env.pop("AZBENCH_DB_URL", None)
    from orchestrator.results.importer import import_path

    real = os.environ.get("AZBENCH_REPORT_TREE")
    with Store.open(f"sqlite:///{home / 'azbench.db'}") as store:
        if real:
            assert import_path(store, Path(real)).imported
        else:
            assert import_path(store, write_tree(tmp / "tree")).imported
            if (SHARED / "mlperf-logs").is_dir():
                assert import_path(store, SHARED / "mlperf-logs").imported
    out = tmp / "site"
    _cli(["report", "--html", str(out)], env)
    yield out, home


def _many_pages(site: Path) -> list[Path]:
    systems = sorted((site / "system").glob("*.html"))
    sampled = [p for p in systems if "n64" in p.name or "ngpu512" in p.name][:2] + systems[:2]
    return [site / "index.html", *sorted((site / "bench").glob("*.html")), site / "compare.html",
            site / "history.html", *sampled]


def test_many_systems_site_has_no_local_paths_and_every_system(many_site: tuple[Path, Path]) -> None:
    """One page per stored system: the synthetic tree's 15, plus the shared logs' where ../shared
    is beside the checkout (a clone without it has only the 15; the count is read, not assumed)."""
    site, home = many_site
    systems = list((site / "system").glob("*.html"))
    with Store.open(f"sqlite:///{home / 'azbench.db'}") as store:
        stored = {r.system for r in store.list_results()}
    assert len(systems) == len(stored)
    if not os.environ.get("AZBENCH_REPORT_TREE"):
        assert len(stored) >= len(MANY) + (4 if (SHARED / "mlperf-logs").is_dir() else 0)
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert str(home) not in text and str(home.parent) not in text, page  # portable
        assert "/tmp/" not in text and "/home/" not in text, page


def test_many_systems_layout_holds(browser: Any, many_site: tuple[Path, Path]) -> None:
    """Bounding boxes on every benchmark page, the overview, compare, history and system pages:
    no legend over a plot area, no colliding or repeated ticks, plot areas >= 300 px wide."""
    from selenium.webdriver.support.ui import WebDriverWait

    site, _ = many_site
    problems: list[str] = []
    for page in _many_pages(site):
        browser.get(page.as_uri())
        WebDriverWait(browser, 90).until(lambda d: d.execute_script(READY_JS))
        _fits(browser)
        problems += browser.execute_script(LAYOUT_JS)
        if page.name == "index.html":
            _shot(browser, "overview")
        elif page.parent.name == "bench" and "llama31_405b" in page.name:
            _shot(browser, "benchmark")
    assert problems == []


def test_one_colour_per_system_on_every_page_and_the_key_hides_it(
        browser: Any, many_site: tuple[Path, Path]) -> None:
    from selenium.webdriver.common.by import By

    site, _ = many_site
    colours: dict[str, set[str]] = {}
    colour_js = ("return [...document.querySelectorAll('.chart')].filter(c => c.data).flatMap("
                 "c => c.data.filter(t => t.meta && t.marker && t.marker.color)"
                 ".map(t => [t.meta, t.marker.color]))")
    for page in [site / "index.html", *sorted((site / "bench").glob("*.html"))]:
        _open(browser, page)
        for label, colour in browser.execute_script(colour_js):
            colours.setdefault(label, set()).add(colour)
    assert len(colours) >= 15
    assert all(len(c) == 1 for c in colours.values()), colours  # one colour, every page
    assert len({next(iter(c)) for c in colours.values()}) == len(colours)  # all different
    _open(browser, site / "bench" / "llama31_405b.html")
    cell = browser.find_elements(By.CSS_SELECTOR, "#systems-key td[data-system]")[0]
    label = cell.get_attribute("data-system")
    visible = ("return [...document.querySelectorAll('.chart')].filter(c => c.data).flatMap("
               "c => c.data.filter(t => t.meta === arguments[0]).map(t => t.visible !== false))")
    assert browser.execute_script(visible, label) and all(browser.execute_script(visible, label))
    cell.find_element(By.CSS_SELECTOR, ".swatch").click()
    assert not any(browser.execute_script(visible, label))
    cell.find_element(By.CSS_SELECTOR, ".swatch").click()
    assert all(browser.execute_script(visible, label))


def test_compare_defaults_to_one_benchmark_and_keeps_the_choice_in_the_url(
        browser: Any, many_site: tuple[Path, Path]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    site, _ = many_site
    _open(browser, site / "compare.html")
    sec = browser.find_element(By.CSS_SELECTOR, "section[data-kind='systems']")
    a, b = (Select(sec.find_element(By.CSS_SELECTOR, s)) for s in (".pick-a", ".pick-b"))
    first_a, first_b = a.first_selected_option.text, b.first_selected_option.text
    assert first_a != first_b and first_a.split(" | ")[0] == first_b.split(" | ")[0]
    rows = [r.find_elements(By.TAG_NAME, "td") for r in sec.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert rows[0][0].text == "MLPerf score (min)" and rows[1][0].text == "cost per result ($)"
    score, gpus = rows[0][3], rows[2]
    if gpus[1].text != gpus[2].text:  # a time across GPU counts: neither better nor worse
        assert score.get_attribute("class") == "" and "(different GPU counts)" in score.text
    elif score.text not in ("-", "+0.0%"):  # lower is better: a negative delta is green
        assert score.get_attribute("class") == ("better" if score.text.startswith("-") else "worse")
    assert browser.execute_script("return document.getElementById('compare-steps-systems')"
                                  ".dataset.rendered") == "1"
    # pick two others; the address says which, and opening that address picks them again
    keys = [o.text for o in a.options]
    bench = "llama31_405b" if any(k.startswith("llama31_405b | ") for k in keys) else \
        keys[-1].split(" | ")[0]
    pair = [k for k in keys if k.startswith(bench + " | ")][-2:]
    a.select_by_visible_text(pair[0])
    b.select_by_visible_text(pair[-1])
    url = browser.current_url
    assert "#" in url and "a=" in url and "b=" in url
    _open(browser, site / "index.html")  # away, then back through the address alone
    _open_url(browser, url)
    sec = browser.find_element(By.CSS_SELECTOR, "section[data-kind='systems']")
    a, b = (Select(sec.find_element(By.CSS_SELECTOR, s)) for s in (".pick-a", ".pick-b"))
    assert (a.first_selected_option.text, b.first_selected_option.text) == (pair[0], pair[-1])
    _shot(browser, "compare")


def test_step_time_axis_is_in_steps(browser: Any, many_site: tuple[Path, Path]) -> None:
    """NVIDIA's v5.0 NeMo logs (and the synthetic ND_H100_v5_n64) log the step as a sample
    count; the chart counts steps."""
    site, _ = many_site
    page = next((p for p in (site / "system").glob("*ND_H100_v5_n64_nemo.html")), None) or \
        next((p for p in (site / "system").glob("*eos-dfw_n64*.html")), None)
    if page is None:
        pytest.skip("no system whose log gives the step as a sample count")
    _open(browser, page)
    axis = browser.execute_script(
        "const c = document.querySelector('[data-fig^=\"steps-llama31_405b\"]');"
        "return [c.layout.xaxis.title.text, Math.max(...c.data.flatMap(t => t.x))]")
    assert axis[0] == "step" and axis[1] < 1000  # steps, where the log says 46,080 samples


def test_history_dates_imported_logs_by_their_own_timestamps(tmp_path: Path) -> None:
    """Pure: an imported log counts on the day it ran, not the day it was imported; a series of
    one point is listed, not charted."""
    from orchestrator.report.build import build_report
    from orchestrator.report.site import write_site
    from orchestrator.results.importer import import_path

    with Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}") as store:
        import_path(store, write_tree(tmp_path / "tree"), archive_dir=tmp_path / "archive")
        results, runs = store.list_results(), store.list_runs()
    hist = build_history(results, runs, None)
    occasions = {p.occasion for s in hist.series for p in s.points}
    assert occasions and all(o.startswith("logs of 2025-09-") for o in occasions), occasions
    multi = [s for s in hist.series if len(s.points) >= 3]
    site = tmp_path / "site"
    write_site(build_report(results), results, site, history=hist)
    page = (site / "history.html").read_text()
    assert page.count('class="chart-box"') == len(multi)
    single = len(hist.series) - len(multi)
    assert not single or f"Series with fewer than 3 points ({single})" in page


def _open_url(drv: Any, url: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    drv.get(url)
    WebDriverWait(drv, 90).until(lambda d: d.execute_script(READY_JS))


# -- the forecast curve on a benchmark page (issue 33, point 4) --------------------------------------

FORECAST_ROWS = {  # benchmark: (system, sku, nodes, gpus, minutes of each run)
    "gpt3": ("64xND_H100_v5", "Standard_ND96isr_H100_v5", 64, 512, [60.0, 61.0, 62.0]),
    "llama31_405b": ("128xND_GB200_v6", "Standard_ND128isr_NDR_GB200_v6", 128, 512, [80.0, 82.0, 84.0]),
    "llama2_70b_lora": ("1xND_H100_v5", "Standard_ND96isr_H100_v5", 1, 8, [30.0 + i for i in range(10)]),
    "smoke": ("1xND_H100_v5", "Standard_ND96isr_H100_v5", 1, 8, [10.0, 10.5, 11.0]),  # one count: no curve
}


def forecast_rows() -> list[ResultRow]:
    """A small synthetic store: a score per benchmark at one GPU count (smoke has no other)."""
    return [ResultRow(content_hash=f"{bench}-{i}", source="run", system=system, benchmark=bench,
                      status="success", converged=True, minutes=m, run_start_ms=1_000 * i, nodes=nodes,
                      gpus=gpus, sku=sku, created_at=DAY0)
            for bench, (system, sku, nodes, gpus, runs) in FORECAST_ROWS.items()
            for i, m in enumerate(runs)]


@pytest.fixture(scope="module")
def forecast_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from orchestrator.report.build import build_report
    from orchestrator.report.site import write_site

    out = tmp_path_factory.mktemp("forecast") / "site"
    rows = forecast_rows()
    write_site(build_report(rows), rows, out)
    return out


def _embedded(page: Path, script_id: str) -> Any:
    text = page.read_text()
    found = re.search(rf'<script type="application/json" id="{script_id}">(.*?)</script>', text, re.S)
    return json.loads(found.group(1)) if found else None


def test_benchmark_page_embeds_the_curves_behind_the_points(forecast_site: Path) -> None:
    """The page's JSON is benchmark_curves' (the stored rows included); per GPU one chart: the band
    first, then the line, then the published rounds and the stored system in its key colour."""
    from orchestrator.forecast.curve import benchmark_curves
    from orchestrator.forecast.plan import check_nodes
    from orchestrator.hardware.catalog import lookup
    from orchestrator.report.site import default_nodes

    rows = forecast_rows()
    page = forecast_site / "bench" / "llama31_405b.html"
    data = _embedded(page, "forecast-data")
    curves = benchmark_curves("llama31_405b", stored=rows)
    assert data == {c.gpu: c.model_dump(mode="json") for c in curves}
    assert sorted(data) == ["gb200", "h100", "h200"]
    figures = _embedded(page, "figures")
    gb200 = figures["forecast-gb200"]["data"]
    assert [t["name"] for t in gb200] == ["80% low", "80% interval", "fit (level yours)", "past the data",
                                          "published v5.1", "published v5.0", "stored (yours)"]
    assert gb200[1]["fill"] == "tonexty" and gb200[3]["line"]["dash"] == "dot"
    star = gb200[-1]
    assert star["meta"] == "128xND_GB200_v6" and star["x"] == [512] and star["marker"]["symbol"] == "star"
    swatch = re.search(r'data-system="128xND_GB200_v6"><span class="swatch" style="background: (#\w+)"',
                       page.read_text())
    assert swatch and star["marker"]["color"] == swatch.group(1)  # the system's colour on every chart
    assert [t["name"] for t in figures["forecast-h100"]["data"]][-1] == "published v5.0"  # no stored point
    assert "GB200: stands on 9 published + 1 stored (the stars) points" in page.read_text()
    for c in curves:  # the input opens on a count the size can have: the largest measured, in nodes
        check_nodes(lookup(c.sku), default_nodes(c))
        assert f'value="{default_nodes(c)}" aria-label="nodes of {c.sku_short}"' in page.read_text()
    assert default_nodes(next(c for c in curves if c.gpu == "gb200")) == 1280  # 5,120 GPUs: 80 racks of 16
    lora = _embedded(forecast_site / "bench" / "llama2_70b_lora.html", "forecast-data")
    assert sorted(lora) == ["gb200", "gb300", "h100", "h200", "mi300x"]
    assert lora["mi300x"]["price_per_vm_hour_usd"] is None and lora["gb300"]["price_per_vm_hour_usd"] is None


def test_a_benchmark_without_a_curve_says_so_in_one_line(forecast_site: Path) -> None:
    page = (forecast_site / "bench" / "smoke.html").read_text()
    line = re.search(r'<p class="muted" id="forecast-none">(.*?)</p>', page)
    assert line and line.group(1) == (
        "No forecast curve for smoke: a curve needs results at two GPU counts or more on one GPU "
        "(published or stored), and there are fewer: ND H100 v5 at 8 GPUs.")
    assert 'id="forecast-data"' not in page and "forecast-" not in json.dumps(_embedded(
        forecast_site / "bench" / "smoke.html", "figures"))


def _ask(drv: Any, gpu: str, nodes: str) -> dict[str, Any]:
    """Type `nodes` into the input under `gpu`'s curve; what the page shows."""
    return dict(drv.execute_script(
        "const box = document.getElementById('forecast-' + arguments[0]);"
        "const input = box.querySelector('input.forecast-nodes'); input.value = arguments[1];"
        "input.dispatchEvent(new Event('input'));"
        "const out = box.querySelector('output'); return {...out.dataset, text: out.textContent};", gpu, nodes))


def test_what_would_n_nodes_give_computes_what_the_plan_computes(browser: Any, forecast_site: Path) -> None:
    """The page's script against forecast.curve.evaluate and forecast.plan.make_plan: minutes and
    interval (to 1e-12), cost per result, the 4x refusal's text, GB200's racks."""
    from selenium.webdriver.common.by import By

    from orchestrator.errors import ConfigError
    from orchestrator.forecast.basis import Basis
    from orchestrator.forecast.curve import evaluate
    from orchestrator.forecast.plan import PlanRequest, check_nodes, make_plan
    from orchestrator.hardware.catalog import lookup

    rows = tuple(r for r in forecast_rows() if r.benchmark == "llama31_405b")
    page = forecast_site / "bench" / "llama31_405b.html"
    _open(browser, page)
    _fits(browser)
    data = _embedded(page, "forecast-data")
    # as a user types it: the answer changes, and the chart marks the count
    box = browser.find_element(By.ID, "forecast-gb200")
    field = box.find_element(By.CSS_SELECTOR, "input.forecast-nodes")
    field.clear()
    field.send_keys("640")
    shown = box.find_element(By.TAG_NAME, "output")
    assert shown.get_attribute("data-state") == "ok" and "640 nodes = 2,560 GPUs, 40 racks of 16 VMs" in shown.text
    assert browser.execute_script("return document.getElementById('chart-forecast-gb200').layout.shapes[0].x0") == 2560
    asked = {"gb200": (17, 72, 144, 640, 2048, 4608), "h100": (16, 64, 300, 1344, 4096), "h200": (16, 64, 100, 512)}
    for gpu, counts in asked.items():
        basis = Basis.model_validate(data[gpu]["basis"])
        sku = data[gpu]["sku"]
        plan = make_plan(PlanRequest(benchmark="llama31_405b", sku=sku, nodes=counts, stored=rows))
        for row in plan.rows:
            got = _ask(browser, gpu, str(row.nodes))
            assert got["state"] == "ok", got
            minutes = (float(got["minutes"]), float(got["low"]), float(got["high"]))
            assert minutes == pytest.approx(evaluate(basis, row.gpus), rel=1e-12)
            assert minutes == pytest.approx((row.minutes, row.low, row.high), rel=1e-12)
            assert got["text"].startswith(f"{row.minutes:,.2f} min [{row.low:,.2f}-{row.high:,.2f}]")
            assert f"({row.stands_on})" in got["text"]
            assert float(got["cost_usd"]) == pytest.approx(row.cost_per_result_usd, rel=1e-12)
            assert f"cost per result: ${row.cost_per_result_usd:,.0f} " in got["text"]
        # past 4x: refused with the CLI's reason
        step = data[gpu]["node_steps"][0]
        top = step * (4 * basis.high_gpus // (step * data[gpu]["gpus_per_node"]) + 1)  # just past 4x
        with pytest.raises(ConfigError) as refused:
            make_plan(PlanRequest(benchmark="llama31_405b", sku=sku, nodes=(top,), stored=rows))
        got = _ask(browser, gpu, str(top))
        assert got["state"] == "refused" and "minutes" not in got
        assert got["text"] == refused.value.message.replace(f"--nodes {top}:", f"{top} nodes:")
    # GB200 node counts: whole racks (of 18 or 16) or one partial rack, as check_nodes decides
    gb200 = lookup("gb200")
    for nodes in range(1, 150):
        try:
            check_nodes(gb200, nodes)
            valid = True
        except ConfigError:
            valid = False
        answer = browser.execute_script("return window.azbenchForecast.answer("
                                        "window.azbenchForecast.curves.gb200, arguments[0])", nodes)
        assert (answer["state"] != "invalid") == valid, nodes
    assert _ask(browser, "gb200", "20")["text"].startswith(
        "20 nodes: ND GB200 v6 comes in NVL72 racks of 18 VMs: 20 nodes is not a whole number of racks")
    assert _ask(browser, "gb200", "2.5")["state"] == "invalid"


def test_the_page_script_evaluates_and_formats_as_python_does(browser: Any, forecast_site: Path) -> None:
    """Every benchmark page's curves, at every sample and at counts between: the script's evaluate
    against Python's, and its number formatting against Python's (ties round half to even); a size
    without a price says its cost is unknown."""
    from orchestrator.forecast.basis import Basis
    from orchestrator.forecast.curve import evaluate

    for page in sorted((forecast_site / "bench").glob("*.html")):
        data = _embedded(page, "forecast-data")
        if not data:
            continue
        _open(browser, page)
        for gpu, curve in data.items():
            basis = Basis.model_validate(curve["basis"])
            counts = [s["gpus"] for s in curve["samples"]] + [g * 1.37 for g in basis.measured_gpus] + [1, 3, 7]
            got = browser.execute_script(
                "const f = window.azbenchForecast, b = f.curves[arguments[0]].basis;"
                "return arguments[1].map(g => f.evaluate(b, g))", gpu, counts)
            for g, js in zip(counts, got):
                assert js == pytest.approx(list(evaluate(basis, g)), rel=1e-12), (page.name, gpu, g)
    values = [4.25, 0.125, 2.5, 3.5, 1234567.5, 0.05, 9.995, 1e-3, 21760 / 5120, 12.0, 98.32 * 3]
    for digits in (0, 1, 2):
        js = browser.execute_script("return arguments[0].map(v => window.azbenchForecast.fixed(v, arguments[1]))",
                                    values, digits)
        assert js == [f"{v:,.{digits}f}" for v in values]
    _open(browser, forecast_site / "bench" / "llama2_70b_lora.html")
    got = _ask(browser, "mi300x", "4")
    assert got["state"] == "ok" and "cost_usd" not in got
    assert got["text"].endswith("cost per result: unknown (the catalog has no list price for ND MI300X v5)")


def test_forecast_pages_layout_holds(browser: Any, forecast_site: Path) -> None:
    """The layout checks of testsupport/site_layout.py on every benchmark page with curves (up to
    four GPUs, published rounds and a stored point in the legend) and on the one without."""
    from testsupport.site_layout import site_problems

    pages = sorted((forecast_site / "bench").glob("*.html"))
    found = site_problems(browser, pages)
    assert found == {f"bench/{p.name}": [] for p in pages}
    for page in pages:
        _open(browser, page)
        _fits(browser)


def test_shared_logs_benchmark_page_draws_their_curve(browser: Any, site: Path) -> None:
    """The site of the shared logs: NVIDIA's v5.0 Llama 3.1 405B logs on H100 are the published
    v5.0 results themselves, so the H100 curve counts them once, as published points (each stored
    copy listed as left out, with the published result it copies), at round v5.0's level; the
    page's answer is evaluate's on that basis."""
    from orchestrator.forecast.basis import Basis
    from orchestrator.forecast.curve import benchmark_curves, evaluate

    if not (SHARED / "mlperf-logs").is_dir():
        pytest.skip(f"{SHARED / 'mlperf-logs'} is absent")
    with Store.open(f"sqlite:///{site.parent / 'home' / 'azbench.db'}") as store:
        rows = store.list_results()
    page = site / "bench" / "llama31_405b.html"
    data = _embedded(page, "forecast-data")
    assert data == {c.gpu: c.model_dump(mode="json") for c in benchmark_curves("llama31_405b", stored=rows)}
    h100 = data["h100"]
    assert not [p for p in h100["basis"]["points"] if p["source"] == "stored"]
    copies = [x for x in h100["basis"]["left_out"] if "a stored copy of the published v5.0 NVIDIA" in x["reason"]]
    assert copies and h100["basis"]["level"] == "v5.0"
    _open(browser, page)
    _fits(browser)
    names = browser.execute_script("return document.getElementById('chart-forecast-h100').data.map(t => t.name)")
    assert names[:2] == ["80% low", "80% interval"] and "stored (yours)" not in names
    assert browser.execute_script(LAYOUT_JS) == []
    got = _ask(browser, "h100", "128")
    assert got["state"] == "ok"
    assert [float(got[k]) for k in ("minutes", "low", "high")] == pytest.approx(
        evaluate(Basis.model_validate(h100["basis"]), 1024), rel=1e-12)


# -- history a person can read (issue 38, point 7) ---------------------------------------------------


def _series(values: list[float], *, baseline: float | None = None, gpus: int | None = 512,
            sku: str = "NVIDIA Blackwell GPU (GB200)") -> Any:
    from orchestrator.report.history import HistoryPoint, HistorySeries
    points = [HistoryPoint(when=DAY0 + timedelta(days=i), occasion=f"logs of day {i}", value=v,
                           samples=[v], verdict="within" if baseline else None,
                           change=(v - baseline) / baseline if baseline else None)
              for i, v in enumerate(values)]
    return HistorySeries(benchmark="llama31_405b", sku=sku, nodes=128, gpus=gpus, metric="time_to_train",
                         metric_label="time to train (min)", better="lower",
                         baseline="b1" if baseline else None, baseline_mean=baseline,
                         band=(baseline * 0.9, baseline * 1.1) if baseline else None,
                         max_change=0.1 if baseline else 0.0, points=points)


def test_history_axes_hold_the_noise_band_or_start_at_zero() -> None:
    """Values 0.006 % apart (230.675 to 230.69 min) read flat: with a baseline the axis is the
    change against its mean in percent and always holds the whole tolerance band (±10 %);
    without one it starts at zero. The issue's charts auto-scaled to ±0.3 %."""
    from orchestrator.report import figures as figs
    noisy = [230.675, 230.69, 230.68, 230.687]
    banded = figs.history(_series(noisy, baseline=230.68))
    axis = banded["layout"]["yaxis"]
    assert axis["range"][0] <= -10 and axis["range"][1] >= 10 and axis["ticksuffix"] == "%"
    line = next(t for t in banded["data"] if t.get("name") == "this scale")
    assert max(abs(v) for v in line["y"]) < 0.01  # percent: under 0.01 % either way
    assert {t.get("name") for t in banded["data"]} >= {"tolerance ±10%", "baseline b1 mean 230.7"}
    plain = figs.history(_series(noisy))["layout"]["yaxis"]
    assert plain["range"][0] == 0 and plain["range"][1] > 230.69 and plain["rangemode"] == "tozero"


def test_history_labels_count_gpus_and_nodes_and_short_series_are_rows(tmp_path: Path) -> None:
    from orchestrator.report.history import HistorySeries
    s = _series([1.0, 2.0, 3.0])
    assert s.label == "llama31_405b · GB200 · 512 GPUs (128 nodes)" and s.charted
    assert _series([1.0], gpus=8).model_copy(update={"nodes": 1}).label == "llama31_405b · GB200 · 8 GPUs (1 node)"
    assert not _series([1.0, 2.0]).charted
    unknown = HistorySeries(benchmark="smoke", nodes=4, metric="step_time", metric_label="s", better="lower")
    assert unknown.label == "smoke · ? · 4 nodes"
    with Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}") as store:  # the count: the results' own
        seed_history(store, tmp_path / "logs")
        hist = build_history(store.list_results(), store.list_runs(), None)
    assert {s.label for s in hist.series} == {"smoke · H100 · 8 GPUs (1 node)", "smoke · H100 · 16 GPUs (2 nodes)"}
    from orchestrator.report import figures as figs
    figure = figs.history(hist.series[0])
    assert figure["layout"]["title"]["text"].startswith("smoke · H100 · 8 GPUs (1 node)<br>")


def test_history_titles_clear_the_toolbar_and_a_phone_gets_one_column(site: Path, tmp_path: Path) -> None:
    """At 1,280 px and on a 390 px phone: no chart title under plotly's toolbar, no legend over
    a plot or an axis title, no colliding ticks; on the phone one chart per row across the
    screen, legends under the plots, nothing wider than the screen."""
    pytest.importorskip("selenium.webdriver", reason="selenium (the test extra) is absent")
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        pytest.skip("Debian's chromium and chromium-driver are not installed (infra/setup.sh)")
    from testsupport.site_layout import PHONE_PLOT_PX, chromium, layout_js, page_problems

    wide = chromium(profile=tmp_path / "wide")
    try:
        assert page_problems(wide, site / "history.html") == []
    finally:
        wide.quit()
    phone = chromium(390, 844, profile=tmp_path / "phone", phone=True)
    try:
        phone.get((site / "history.html").as_uri())
        from selenium.webdriver.support.ui import WebDriverWait

        from testsupport.site_layout import READY_JS
        WebDriverWait(phone, 90).until(lambda d: d.execute_script(READY_JS))
        assert phone.execute_script("return window.innerWidth") == 390
        assert phone.execute_script("return document.documentElement.scrollWidth") <= 390
        assert phone.execute_script(layout_js(PHONE_PLOT_PX)) == []
        boxes = phone.execute_script(
            "return [...document.querySelectorAll('.chart-box')].map(b => {"
            "const r = b.getBoundingClientRect(); return [r.left, r.width]; })")
        assert len(boxes) == 7 and len({round(left) for left, _ in boxes}) == 1  # one column
        assert all(width > 0.9 * 370 for _, width in boxes)
        legends = phone.execute_script(
            "return [...document.querySelectorAll('.chart')].map(c => [c.querySelector('g.legend')"
            ".getBoundingClientRect().top, c.querySelector('.nsewdrag').getBoundingClientRect().bottom])")
        assert all(top > plot_bottom for top, plot_bottom in legends)  # under the plot
    finally:
        phone.quit()


def test_every_page_fits_a_phone(many_site: tuple[Path, Path], site: Path, tmp_path: Path) -> None:
    """At 390 px (a phone): no page wider than the screen (long paths wrap, tables scroll in
    their own box), no blank table row, no chart title wider than its chart; the index leads
    with best-per-benchmark and folds the rest."""
    pytest.importorskip("selenium.webdriver", reason="selenium (the test extra) is absent")
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        pytest.skip("Debian's chromium and chromium-driver are not installed (infra/setup.sh)")
    from testsupport.site_layout import PHONE_PX, chromium, phone_problems

    pages = sorted({*_many_pages(many_site[0]), *site.rglob("*.html")})
    phone = chromium(PHONE_PX, 844, profile=tmp_path / "phone", phone=True)
    try:
        found = phone_problems(phone, pages)
        assert {k: v for k, v in found.items() if v} == {}
        phone.get((site / "index.html").as_uri())
        folds = phone.execute_script("return [...document.querySelectorAll('details.fold')].map(d => d.open)")
        assert folds and not any(folds)  # folded on a phone (open on a wide screen)
        shown = phone.execute_script("return [...document.querySelectorAll('main .table-block')]"
                                     ".filter(b => !b.closest('details:not([open])')).map(b => b.id)")
        assert set(shown) <= {"best-block"}  # best-per-benchmark leads; the rest is folded
    finally:
        phone.quit()
