"""Layout checks of the report site's charts in a real browser, by element bounding boxes.

`LAYOUT_JS` runs in the page (selenium's execute_script) after every chart is drawn and returns
one line per problem: a legend over a plot area, an axis title or another legend's text; tick
labels of one axis that overlap or repeat ("100%, 100%"); a title under plotly's toolbar; a plot
area narrower than MIN_PLOT_PX (or lower than MIN_PLOT_HEIGHT_PX). `layout_js(px)` is the same
check with another smallest plot width (a phone's, PHONE_PLOT_PX at 390 px). Hidden charts (a
closed drill-down) are skipped. Used by
tests/test_report_site.py on CI's synthetic many-system site and by
benchmarks/bench_report_site.py on a real tree (the 267 NVIDIA v5.1 logs).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

MIN_PLOT_PX = 300
PHONE_PLOT_PX = 240  # a 390 px phone: the chart is the width of the screen, less the y axis
MIN_PLOT_HEIGHT_PX = 150
WAIT_S = 90

_LAYOUT_JS = """
const MIN_W = %d, MIN_H = %d;
const problems = [];
const box = el => { const b = el.getBoundingClientRect();
  return {l: b.left, t: b.top, r: b.right, b: b.bottom, w: b.width, h: b.height}; };
const hit = (a, b, tol) => Math.min(a.r, b.r) - Math.max(a.l, b.l) > tol &&
  Math.min(a.b, b.b) - Math.max(a.t, b.t) > tol;
const shown = el => { const b = el.getBoundingClientRect();
  return b.width > 0 && b.height > 0 && (el.textContent || '').trim() !== ''; };
for (const c of document.querySelectorAll('.chart')) {
  if (!c.offsetParent || c.closest('details:not([open])') || !c.querySelector('.main-svg')) continue;
  const name = (c.id || c.dataset.fig || 'chart') + ' (' + location.pathname.split('/').slice(-2).join('/') + ')';
  const plots = [...c.querySelectorAll('.nsewdrag')].map(box);
  for (const p of plots) {
    if (p.w < MIN_W) problems.push(`${name}: plot area ${Math.round(p.w)} px wide (< ${MIN_W})`);
    if (p.h < MIN_H) problems.push(`${name}: plot area ${Math.round(p.h)} px high (< ${MIN_H})`);
  }
  const title = c.querySelector('.g-gtitle'), toolbar = c.querySelector('.modebar');
  if (title && toolbar && shown(title) && hit(box(title), box(toolbar), 0.5)) {
    problems.push(`${name}: the title '${title.textContent}' runs under the toolbar`);
  }
  const legend = c.querySelector('g.legend');
  const lb = legend ? box(legend) : null;
  if (lb && lb.w > 0 && lb.h > 0) {
    for (const p of plots) if (hit(lb, p, 1)) problems.push(`${name}: the legend covers the plot area`);
    for (const sel of ['.g-xtitle', '.g-ytitle', '.g-gtitle', '.xtick text', '.ytick text']) {
      for (const t of c.querySelectorAll(sel)) {
        if (shown(t) && hit(lb, box(t), 1)) problems.push(`${name}: the legend covers ${sel} '${t.textContent}'`);
      }
    }
  }
  for (const layer of c.querySelectorAll('.xaxislayer-above, .yaxislayer-above')) {
    const ticks = [...layer.querySelectorAll('text')].filter(shown);
    const seen = new Set();
    for (const t of ticks) {
      if (seen.has(t.textContent)) problems.push(`${name}: tick label '${t.textContent}' repeats`);
      seen.add(t.textContent);
    }
    for (let i = 0; i < ticks.length; i++) for (let j = i + 1; j < ticks.length; j++) {
      if (hit(box(ticks[i]), box(ticks[j]), 0.5)) {
        problems.push(`${name}: tick labels '${ticks[i].textContent}' and '${ticks[j].textContent}' overlap`);
      }
    }
  }
}
return problems;
"""


def layout_js(min_plot_px: int = MIN_PLOT_PX) -> str:
    """LAYOUT_JS with another smallest plot-area width (PHONE_PLOT_PX on a phone)."""
    return _LAYOUT_JS % (min_plot_px, MIN_PLOT_HEIGHT_PX)


LAYOUT_JS = layout_js()

READY_JS = ("return [...document.querySelectorAll('.chart')]"
            ".filter(c => c.offsetParent && !c.closest('details:not([open])'))"
            ".every(c => c.dataset.rendered === '1')")


def page_problems(driver: WebDriver, page: Path) -> list[str]:
    """Open `page`, wait until every visible chart is drawn, return its layout problems."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, WAIT_S).until(lambda d: d.execute_script(READY_JS))
    found = driver.execute_script(LAYOUT_JS)
    return [str(p) for p in found] if isinstance(found, list) else [f"{page}: no answer"]


def site_problems(driver: WebDriver, pages: Iterable[Path]) -> dict[str, list[str]]:
    """{page name: problems} for each page (an empty list where the page is clean)."""
    return {page.name if page.parent.name not in ("bench", "system") else
            f"{page.parent.name}/{page.name}": page_problems(driver, page) for page in pages}


def chromium(width: int = 1280, height: int = 1000, profile: Path | None = None,
             phone: bool = False) -> WebDriver:
    """A headless Debian chromium through chromium-driver at `width` x `height` CSS px; `phone`:
    as a phone of that width (Chrome's device emulation: a desktop window is never narrower
    than about 500 px)."""
    import shutil

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--disable-dev-shm-usage", f"--window-size={width},{height}",
                *([f"--user-data-dir={profile}"] if profile else [])):
        opts.add_argument(arg)
    if phone:
        opts.add_experimental_option("mobileEmulation", {"deviceMetrics": {
            "width": width, "height": height, "pixelRatio": 1}})
    driver = webdriver.Chrome(options=opts, service=Service(shutil.which("chromedriver") or ""))
    driver.set_page_load_timeout(120)
    return driver


PHONE_PX = 390  # a phone's viewport (390 x 844, as an iPhone 12 to 15 has it)

_PHONE_JS = """
const W = window.innerWidth, problems = [];
if (document.documentElement.scrollWidth > W)
  problems.push('page ' + document.documentElement.scrollWidth + ' px wide at ' + W + ' px');
const shown = e => e.offsetParent !== null && !e.closest('details:not([open])');
for (const r of document.querySelectorAll('tr')) {
  if (!shown(r)) continue;
  const h = r.getBoundingClientRect().height;
  if (h > 60 && !r.textContent.trim()) problems.push('blank table row ' + Math.round(h) + ' px tall');
}
for (const c of document.querySelectorAll('.chart')) {
  if (!shown(c)) continue;
  const b = c.getBoundingClientRect();
  for (const t of c.querySelectorAll('.gtitle')) {
    const tb = t.getBoundingClientRect();
    if (tb.width && (tb.left < b.left - 1 || tb.right > b.right + 1))
      problems.push((c.id || 'chart') + ': title ' + Math.round(tb.width) + ' px in a ' + Math.round(b.width) + ' px chart');
  }
}
return problems;
"""


def phone_problems(driver: WebDriver, pages: Iterable[Path]) -> dict[str, list[str]]:
    """{page: problems} on a phone (`driver` from chromium(PHONE_PX, 844, phone=True)): the page
    wider than the screen (tables scroll in their own box, .table-wrap; nothing else may), a
    blank table row, a chart title wider than its chart."""
    from selenium.webdriver.support.ui import WebDriverWait

    found: dict[str, list[str]] = {}
    for page in pages:
        driver.get(page.as_uri())
        WebDriverWait(driver, WAIT_S).until(lambda d: d.execute_script(READY_JS))
        answer = driver.execute_script(_PHONE_JS)
        found[page.name if page.parent.name not in ("bench", "system") else
              f"{page.parent.name}/{page.name}"] = [str(p) for p in answer] if isinstance(answer, list) else ["no answer"]
    return found
