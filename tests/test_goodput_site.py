"""The report site's goodput page (`azbench report --html DIR`, goodput.html) in Debian's headless
Chromium: a store with one cluster (up, a 2-node run whose first attempt died after a
checkpoint, down) gives a stacked bar for the cluster and, when the run's row opens, its timeline:
two attempt lanes of coloured spans and the failure marked with its class; the system page's
runs table carries the run's goodput beside its time to train, linked to that timeline; nothing
overflows at 1,280 px.

Set AZBENCH_UPDATE_SCREENSHOTS=1 to rewrite docs/screenshots/goodput.png.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from orchestrator import paths
from orchestrator.models import ClusterState
from orchestrator.results.ingest import result_from_run
from orchestrator.store.database import Store
from orchestrator.store.schema import EventRow
from tests.cli_helpers import azbench
from tests.test_goodput import at, cluster, killed_after_checkpoint_lines, store_run_with_logs
from tests.test_report_site import _fits, _open, _shot, browser  # noqa: F401  (the browser fixture)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("goodput-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AZBENCH_HOME", str(home))
        patch.delenv("AZBENCH_DB_URL", raising=False)
        attempts, lines = killed_after_checkpoint_lines()
        with Store.open() as store:
            store_run_with_logs(store, attempts, lines, cluster().model_copy(update={"created_at": at(-60)}),
                                owner="alice")
            store.add_event(EventRow(kind="up", cluster="c1", ts=at(-5), message="up",
                                     data={"started_at": at(-60).isoformat()}))
            c = store.get_cluster("c1")
            assert c is not None
            store.add_event(EventRow(kind="down", cluster="c1", ts=at(130), message="down",
                                     data={"started_at": at(110).isoformat()}))
            patch.setattr("orchestrator.store.records.utcnow", lambda: at(130))  # its end, as `down` stamps it
            store.save_cluster(c.cluster.model_copy(update={"state": ClusterState.TERMINATED}))
            result = result_from_run(paths.local_train_log("r1", 2), run_id="r1", cluster=c.cluster, nodes=2,
                                     benchmark="smoke")
            store.add_result(result.model_copy(update={"created_at": at(90)}))
    out = tmp_path_factory.mktemp("goodput-site") / "site"
    res = azbench("report", "--html", str(out), home=home)
    assert res.code == 0, res.err
    return out


def figures(page: Path) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="figures">(.*?)</script>', page.read_text(), re.S)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    return data


def test_the_page_holds_a_bar_per_cluster_and_a_timeline_per_run(site: Path) -> None:
    figs = figures(site / "goodput.html")
    bars = figs["clusters"]
    assert {t["name"] for t in bars["data"]} >= {"provisioning", "training", "idle", "teardown", "lost work"}
    assert all(t["y"] == ["c1"] for t in bars["data"])
    c1 = next(t for t in bars["data"] if t["name"] == "provisioning")
    assert c1["x"] == [pytest.approx(100 * 55 / 190, abs=0.01)]  # up's span -60..-5 of its 190 s life
    assert sum(t["x"][0] for t in bars["data"]) == pytest.approx(100, abs=0.1)  # shares of its wall time
    timeline = figs["timeline-r1"]
    spans = [t for t in timeline["data"] if t["type"] == "bar"]
    assert {y for t in spans for y in t["y"]} == {"attempt 1", "attempt 2"}
    lost = next(t for t in spans if t["name"] == "lost work")
    assert lost["y"] == ["attempt 1"] and lost["base"] == [30.0] and lost["x"] == [10.0]
    [marks] = [t for t in timeline["data"] if t["type"] == "scatter"]
    assert marks["text"] == ["node_fail"] and marks["x"] == [40.0]
    text = (site / "goodput.html").read_text()
    assert "attempt 1 failed: <b>node_fail</b>" in text and "Slurm state node_fail" in text


def test_the_system_page_puts_goodput_beside_time_to_train(site: Path) -> None:
    [page] = (site / "system").glob("*.html")
    text = page.read_text()
    header = re.search(r'<table class="sortable" id="runs-smoke">.*?</thead>', text, re.S)
    assert header is not None and "<th data-col=\"2\" title=\"sort by minutes\">minutes</th><th data-col=\"3\" " \
        "title=\"sort by goodput\">goodput</th>" in header.group(0)
    assert 'href="../goodput.html#run-r1"' in text


def test_the_timeline_draws_in_the_browser(browser: Any, site: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _open(browser, site / "goodput.html")
    bar = browser.find_element(By.ID, "chart-clusters")
    assert bar.find_elements(By.CSS_SELECTOR, "svg.main-svg") and "c1" in bar.text
    _fits(browser)
    browser.find_element(By.CSS_SELECTOR, "a[href='#run-r1']").click()  # the runs table -> its timeline
    WebDriverWait(browser, 90).until(lambda d: d.execute_script(
        "return document.querySelector('#run-r1 .chart').dataset.rendered === '1'"))
    chart = browser.find_element(By.ID, "chart-timeline-r1")
    assert "attempt 1" in chart.text and "attempt 2" in chart.text and "node_fail" in chart.text
    assert len(chart.find_elements(By.CSS_SELECTOR, "g.trace.bars path")) >= 8  # the spans are drawn
    assert "lost work" in chart.text and "restart overhead" in chart.text  # the legend
    _fits(browser)
    _shot(browser, "goodput")


def test_the_system_page_link_opens_the_timeline(browser: Any, site: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    [page] = (site / "system").glob("*.html")
    _open(browser, page)
    browser.find_element(By.CSS_SELECTOR, "a[href='../goodput.html#run-r1']").click()
    WebDriverWait(browser, 90).until(lambda d: d.current_url.endswith("goodput.html#run-r1"))
    WebDriverWait(browser, 90).until(lambda d: d.execute_script(
        "var c = document.querySelector('#run-r1 .chart'); return !!c && c.dataset.rendered === '1'"))
    assert browser.find_element(By.ID, "run-r1").get_attribute("open") is not None


def test_the_goodput_page_fits_a_phone(site: Path, tmp_path: Path) -> None:
    """At 390 px: nothing wider than the screen, no blank table row, titles inside charts."""
    pytest.importorskip("selenium.webdriver", reason="selenium (the test extra) is absent")
    import shutil

    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        pytest.skip("Debian's chromium and chromium-driver are not installed (infra/setup.sh)")
    from testsupport.site_layout import PHONE_PX, chromium, phone_problems

    phone = chromium(PHONE_PX, 844, profile=tmp_path / "phone", phone=True)
    try:
        found = phone_problems(phone, [site / "goodput.html", *sorted((site / "system").glob("*.html"))])
        assert {k: v for k, v in found.items() if v} == {}
    finally:
        phone.quit()
