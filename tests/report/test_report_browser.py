"""The HTML report in real headless Chromium with networking off: figures render, an injected
script in a range or kernel name does not run and shows as text, nothing is fetched.

Needs the Python ``playwright`` package and a Chromium binary (Debian ``chromium`` at
/usr/bin/chromium, or ``$WORKBENCH_CHROMIUM``); skipped without them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import workbench as wb

from test_report import EVIL, EVIL2, evil_pair

pytestmark = pytest.mark.browser

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
        "--disable-quic"]


def _chromium() -> str:
    exe = os.environ.get("WORKBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(exe).is_file():
        pytest.skip("no Chromium binary (apt-get install chromium, or set WORKBENCH_CHROMIUM)")
    return exe


def test_html_report_in_headless_chromium(tmp_path):
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    exe = _chromium()
    root = tmp_path / "store"
    a, b = evil_pair(root, tmp_path)
    out = tmp_path / "report.html"
    wb.report(a, b, root=root, html=out)

    requests, dialogs, errors = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
            page = context.new_page()

            def route(r):
                if r.request.url.startswith("file://"):
                    r.continue_()
                else:  # the report must need nothing from a network
                    requests.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(out.as_uri(), wait_until="load")
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
            n_figs = page.locator("div.plot").count()
            page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {n_figs}",
                                   timeout=60_000)
            rendered = page.locator(".js-plotly-plot").count()
            bars = page.locator(".js-plotly-plot g.point").count()
            # The injected names are visible as literal text, in tables and in the kernel diff.
            shown = page.locator("code", has_text=EVIL)
            n_shown = shown.count()
            visible = shown.first.is_visible()
            body_text = page.inner_text("body")
            # Plotly drew the range name as text too (tick or legend), not as markup.
            svg_text = page.evaluate("Array.from(document.querySelectorAll('.js-plotly-plot text'))"
                                     ".map(t => t.textContent).join('\\n')")
            injected = page.evaluate("window.__pwned === undefined && document.querySelectorAll('script').length")
            page.screenshot(path=str(tmp_path / "report.png"))
        finally:
            browser.close()

    assert dialogs == [], f"a script from a trace ran: {dialogs}"
    assert requests == [], f"the report tried to fetch: {requests}"
    assert errors == [], errors
    assert n_figs >= 4 and rendered == n_figs  # every figure rendered (plotly adds .js-plotly-plot)
    assert bars > 0
    assert n_shown >= 3 and visible  # per-layer table header, range table, kernel diff
    assert EVIL in body_text
    assert EVIL in svg_text  # e.g. the per-layer figure title / legend name the range literally
    # Only the page's own scripts exist: plotly.js and one per figure (no injected <script>).
    assert injected == 1 + n_figs
    assert (tmp_path / "report.png").stat().st_size > 10_000
    _ = EVIL2
