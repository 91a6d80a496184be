"""JupyterLab in real headless Chromium: open the trace-diff notebook, run all cells, check that
plotly figures and the trace-diff widget render, and that the widget responds to a dropdown
change and a button click. Offline: every request that is not to the local server is refused
and the test fails if any was attempted.

Needs Debian's ``chromium`` (/usr/bin/chromium, or $WORKBENCH_CHROMIUM) and the Python
``playwright`` package (its own browser download is not used); jupyterlab, ipykernel,
ipywidgets/jupyterlab_widgets and plotly (whose package ships the JupyterLab renderer).
Set WORKBENCH_SCREENSHOT=path.png to keep a screenshot.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("WORKBENCH_CHROMIUM", "/usr/bin/chromium")
NOTEBOOK = "trace_diff.ipynb"
TRACES = ("ref-h200-kvwrite-unfused-nsys", "ref-h200-kvwrite-fused-nsys")
LOCAL = {"127.0.0.1", "localhost", "::1", "[::1]"}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, deadline: float, proc: subprocess.Popen, log: Path) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"jupyter lab exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"jupyter lab did not answer at {url}:\n{log.read_text()[-4000:]}")


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server on 127.0.0.1 (random port, token) serving a copy of the notebook
    and the traces it reads; stopped (its whole process group) at the end."""
    pytest.importorskip("playwright.sync_api")
    pytest.importorskip("jupyterlab")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(REPO / "notebooks" / NOTEBOOK, root / "notebooks" / NOTEBOOK)
    for name in TRACES:
        shutil.copytree(REPO / "traces" / name, root / "traces" / name)
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # No news / update toasts (they would ask to fetch from the internet).
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, WORKBENCH_TRACES=str(root / "traces"), WORKBENCH_PREFER_LIVE="0",
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "lab-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), PYTHONUNBUFFERED="1")
    log = tmp_path / "lab.log"
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.news_url=None",
           "--LabApp.extension_manager=readonly"] + (["--allow-root"] if os.geteuid() == 0 else [])
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/api/status?token={token}", time.monotonic() + 90, proc, log)
        yield {"url": f"http://127.0.0.1:{port}", "token": token, "log": log}
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


def _kernel_idle(page) -> bool:
    return page.evaluate("""() => {
        const app = window.jupyterapp;
        const w = app && app.shell.currentWidget;
        const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
        return !!k && k.status === 'idle';
    }""")


def _wait(pred, timeout: float, what: str, page=None, step: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
            if last:
                return last
        except Exception as e:  # the page may be mid-render
            last = e
        (page.wait_for_timeout(step * 1000) if page is not None else time.sleep(step))
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def test_trace_diff_notebook_in_jupyterlab(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    blocked: list[str] = []

    def route(r):
        u = urlparse(r.request.url)
        if u.scheme in ("data", "blob", "about") or (u.hostname or "") in LOCAL:
            return r.continue_()
        blocked.append(r.request.url)
        return r.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
            "--disable-quic", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/*", route)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{lab['url']}/lab/tree/notebooks/{NOTEBOOK}?token={lab['token']}", timeout=90_000)
            page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
            _wait(lambda: _kernel_idle(page), 90, "the kernel to start and go idle", page)

            # Run all; on a freshly started JupyterLab the first request can be dropped: retry
            # until a cell shows it is queued or has run ("[*]" or "[1]").
            started = lambda: page.evaluate("""() => [...document.querySelectorAll('.jp-InputPrompt')]
                .some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))""")  # noqa: E731
            for attempt in range(3):
                page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
                try:
                    _wait(started, 30, "the cells to start running", page)
                    break
                except AssertionError:
                    if attempt == 2:
                        raise
            # The last cell prints the results marker once everything above has run.
            _wait(lambda: page.locator(".jp-OutputArea-output", has_text="WORKBENCH_RESULT").count() > 0, 150,
                  "the notebook to finish (WORKBENCH_RESULT marker)", page)
            assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                                has_text="Traceback").count() == 0

            # A plotly figure rendered by JupyterLab's plotly extension (no CDN).
            page.wait_for_selector(".jp-OutputArea-output .js-plotly-plot .main-svg", timeout=60_000)
            widget = page.locator(".wb-trace-diff").first
            widget.wait_for(timeout=60_000)
            widget.scroll_into_view_if_needed()
            # The notebook selected layer_03/kv_write and drew its timeline in A and B.
            _wait(lambda: widget.locator(".js-plotly-plot").count() == 3, 60, "bars + 2 timelines in the widget", page)
            assert "layer_03/kv_write" in widget.locator(".wb-alignments").inner_text()
            titles = widget.locator(".gtitle").all_text_contents()
            assert any("A vs B: layer_03/kv_write" in t for t in titles), titles
            assert any("15 kernels" in t for t in titles) and any("1 kernel," in t for t in titles), titles

            # Respond to a click: pick layer 5 in the dropdown (options: all, layer 0..7, ranges).
            scope = widget.locator("select").nth(2)
            scope.select_option(index=6)
            _wait(lambda: any("A vs B: layer 5" in t for t in widget.locator(".gtitle").all_text_contents()), 60,
                  "the bars to redraw for layer 5", page)
            _wait(lambda: "layer_05/attention" in widget.locator(".wb-alignments").inner_text(), 30,
                  "the alignment table of layer 5", page)
            assert widget.locator(".js-plotly-plot").count() == 1  # timelines cleared on a new selection
            widget.locator("button", has_text="show timeline").click()
            _wait(lambda: widget.locator(".js-plotly-plot").count() == 3, 60, "the timelines of layer 5", page)
            _wait(lambda: sum("step_0/layer_05" in t for t in widget.locator(".gtitle").all_text_contents()) == 2, 30,
                  "timeline titles for layer 5 in A and B", page)
            shot = os.environ.get("WORKBENCH_SCREENSHOT")
            if shot:  # the widget's top, then its timelines
                widget.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
                page.screenshot(path=shot)
                widget.locator(".js-plotly-plot").last.scroll_into_view_if_needed()
                page.screenshot(path=shot.replace(".png", "-timeline.png"))
        finally:
            browser.close()
    assert not blocked, f"requests to the internet were attempted: {blocked[:5]}"
    assert not [e for e in errors if "plotly" in e.lower() or "widget" in e.lower()], errors
