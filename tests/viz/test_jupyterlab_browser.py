"""Every notebook in JupyterLab in real headless Chromium: opened, run top to bottom, and checked
for what a user sees: no error output, no stderr box, no blank dropdown, plotly figures
rendered with no overlapping text (from the DOM, by the figure test's probe: tick labels inside
their figure, off plot areas, titles, the legend and each other), the answer on the first screen
(scrolled to the top: the question, the ``Answer:`` line and half the first figure, 300 px of a
tall one, within the first viewport; that screen is kept as a screenshot), and in the widgets, a selection
answered with its timeline right under the controls (bounding boxes) and a spinner while the
kernel works. The kernel must import this checkout's package. Offline: every request that is
not to the local server is refused and the test fails if any was attempted. On a failure the
page is saved as a screenshot under the test's tmp dir (its path is printed).

One JupyterLab and one browser serve all notebooks, one after the other (each kernel shut down
before the next starts: the CI machine has two cores). Needs Debian's ``chromium``
(/usr/bin/chromium, or $WORKBENCH_CHROMIUM) and the Python ``playwright`` package (its own
browser download is not used); jupyterlab, ipykernel, ipywidgets/jupyterlab_widgets and plotly
(whose package ships the JupyterLab renderer). Set WORKBENCH_SCREENSHOT=DIR to keep, there, each
notebook's first screen and a picture of each widget after its selection.
"""

from __future__ import annotations

import json
import os
import re
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

from helpers import REPO, TRACES
from test_browser_figures import PROBE

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("WORKBENCH_CHROMIUM", "/usr/bin/chromium")
NOTEBOOKS = ("trace_diff", "quickstart", "fusion", "bucketing", "your_model", "tensorrt", "trace_sets")
# What the notebooks read beside them (``../tests/data``, ``../benchmarks/results``): linked into
# the lab's root, read only.
BESIDE = ("tests", "benchmarks")
LOCAL = {"127.0.0.1", "localhost", "::1", "[::1]"}
# "Right under" the controls: the output area's own padding, nothing in between.
NEXT_TO_PX = 48


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


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 (random port, token) serving copies of the notebooks
    (running them must not write outputs into the repository's), the repository's traces as
    their store; stopped (its whole process group) at the end."""
    pytest.importorskip("playwright.sync_api")
    pytest.importorskip("jupyterlab")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "root"
    (root / "notebooks").mkdir(parents=True)
    for name in NOTEBOOKS:
        shutil.copy(REPO / "notebooks" / f"{name}.ipynb", root / "notebooks")
    for folder in BESIDE:
        (root / folder).symlink_to(REPO / folder, target_is_directory=True)
    settings = tmp / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # No news / update toasts (they would ask to fetch from the internet).
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    # Every cell rendered, not only those scrolled into view: each output is checked.
    tracker = tmp / "lab-settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port, token = _free_port(), secrets.token_hex(16)
    # The kernels inherit this environment: PYTHONPATH makes them import this checkout's package.
    env = dict(os.environ, PYTHONPATH=str(REPO), WORKBENCH_TRACES=str(TRACES),
               JUPYTERLAB_SETTINGS_DIR=str(tmp / "lab-settings"), JUPYTERLAB_WORKSPACES_DIR=str(tmp / "lab-workspaces"),
               JUPYTER_RUNTIME_DIR=str(tmp / "runtime"), PYTHONUNBUFFERED="1")
    env.pop("MPLBACKEND", None)
    log = tmp / "lab.log"
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


@pytest.fixture(scope="module")
def page(lab):
    """One Chromium page on the lab, every request off the local server refused and listed."""
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
            pg = browser.new_page(viewport={"width": 1400, "height": 1000})
            pg.route("**/*", route)
            pg.page_errors = []
            pg.blocked = blocked
            pg.on("pageerror", lambda e: pg.page_errors.append(str(e)))
            pg.goto(f"{lab['url']}/lab?token={lab['token']}", timeout=90_000)
            # Polled, not awaited: a promise held across the lab's start-up can be lost with its page.
            pg.wait_for_function("""() => {
                const app = window.jupyterapp;
                if (!app || !app.commands.hasCommand('docmanager:open')) return false;
                if (!window.__wbHooked) { window.__wbHooked = true; app.restored.then(() => { window.__wbRestored = true; }); }
                return window.__wbRestored === true;
            }""", timeout=90_000)
            yield pg
        finally:
            browser.close()


def _wait(pred, timeout: float, what: str, page, step: float = 0.25):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
            if last:
                return last
        except Exception as e:  # the page may be mid-render
            last = e
        page.wait_for_timeout(step * 1000)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def _open(page, name: str) -> str:
    """Open notebooks/NAME.ipynb in the lab; the DOM id of its panel."""
    return page.evaluate("""async (path) => {
        const w = await window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'});
        await w.context.ready;
        await w.sessionContext.ready;
        return w.id;
    }""", f"notebooks/{name}.ipynb")


def _kernel_idle(page, pid: str) -> bool:
    return page.evaluate("""(pid) => {
        const w = [...window.jupyterapp.shell.widgets('main')].find(x => x.id === pid);
        const k = w && w.sessionContext.session && w.sessionContext.session.kernel;
        return !!k && k.status === 'idle';
    }""", pid)


def _run_all(page, panel, pid: str) -> None:
    # On a freshly started kernel the first request can be dropped: retry until a cell shows it
    # is queued or has run ("[*]" or "[1]").
    started = lambda: panel.locator(".jp-InputPrompt").evaluate_all(  # noqa: E731
        "els => els.some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))")
    for attempt in range(3):
        page.evaluate("(pid) => { window.jupyterapp.shell.activateById(pid);"
                      " return window.jupyterapp.commands.execute('notebook:run-all-cells'); }", pid)
        try:
            _wait(started, 30, "the cells to start running", page)
            return
        except AssertionError:
            if attempt == 2:
                raise


def _finished(page, pid: str) -> bool:
    """Run All is over: the kernel idle and every code cell run, or one stopped it with an error."""
    return page.evaluate("""(pid) => {
        const w = [...window.jupyterapp.shell.widgets('main')].find(x => x.id === pid);
        const k = w && w.sessionContext.session && w.sessionContext.session.kernel;
        if (!k || k.status !== 'idle') return false;
        const cells = w.content.model.cells;
        let pending = false, failed = false;
        for (let i = 0; i < cells.length; i++) {
            const c = cells.get(i);
            if (c.type !== 'code') continue;
            if (c.executionCount === null) pending = true;
            for (let j = 0; j < c.outputs.length; j++)
                if (c.outputs.get(j).toJSON().output_type === 'error') failed = true;
        }
        return failed || !pending;
    }""", pid)


def _kernel_says(page, pid: str, code: str) -> str:
    """What ``code`` prints when the notebook's kernel runs it (outside the notebook's cells)."""
    return page.evaluate("""async ([pid, code]) => {
        const w = [...window.jupyterapp.shell.widgets('main')].find(x => x.id === pid);
        const f = w.sessionContext.session.kernel.requestExecute({code, silent: false, store_history: false});
        let out = '';
        f.onIOPub = (msg) => { if (msg.header.msg_type === 'stream') out += msg.content.text; };
        await f.done;
        return out;
    }""", [pid, code])


def _scroll_to_top(page, panel) -> None:
    panel.locator(".jp-WindowedPanel-outer").first.evaluate("el => { el.scrollTop = 0; }")
    page.wait_for_timeout(300)


def _figure_problems(page, panel) -> list[str]:
    """What reads badly in the open notebook's plotly figures, found by the figure test's own
    probe (``test_browser_figures.PROBE``: text clipped or over other text, tick labels, rotated
    ones by their drawn outline, inside the figure and off plot areas, titles, the legend and each
    other; bars inside their plot area), each line led by the figure's title. Only one notebook
    is open at a time, so the page's figures are its own; scrolled to the top, they read top to
    bottom as the probe expects."""
    _scroll_to_top(page, panel)
    found = page.evaluate(PROBE, None)
    titles = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')]"
                           ".map(p => (p.querySelector('.gtitle') || {}).textContent || '(untitled)')")
    return [re.sub(r"^figure (\d+)", lambda m: f"figure {m[1]} ({titles[int(m[1])]})", p) for p in found["problems"]]


def _first_screen(page, panel, name: str, tmp_path: Path) -> None:
    """Scrolled to the top, the first viewport shows the question, the answer line and at least half
    of the first figure (300 px of a tall one); the screen is kept as ``NAME-first-screen.png``
    (and in $WORKBENCH_SCREENSHOT)."""
    _scroll_to_top(page, panel)
    height = page.viewport_size["height"]
    question = panel.locator(".jp-MarkdownOutput", has_text="Question:").first
    answer = panel.locator(".jp-OutputArea .jp-RenderedMarkdown", has_text="Answer:").first
    figure = panel.locator(".jp-OutputArea .js-plotly-plot").first
    shot = tmp_path / f"{name}-first-screen.png"
    page.screenshot(path=str(shot))
    keep = os.environ.get("WORKBENCH_SCREENSHOT")
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)
    q, a, f = (x.bounding_box() for x in (question, answer, figure))
    print(f"{name}: first screen {shot}: question at {q['y']:.0f}, answer {a['y']:.0f}-{a['y'] + a['height']:.0f}, "
          f"figure {f['y']:.0f}-{f['y'] + f['height']:.0f} of {height}px")
    assert q["y"] >= 0 and a["y"] + a["height"] <= height, f"{name}: the answer is not on the first screen ({a})"
    shown = min(f["height"] / 2, 300)  # half the figure, or 300 px of a tall one
    assert f["y"] + shown <= height, f"{name}: less than {shown:.0f} px of the first figure on the first screen ({f})"


def _errors(page, pid: str) -> list[str]:
    """The error outputs of the notebook's cells (from its model, not from what is rendered)."""
    return page.evaluate("""(pid) => {
        const w = [...window.jupyterapp.shell.widgets('main')].find(x => x.id === pid);
        const cells = w.content.model.cells, out = [];
        for (let i = 0; i < cells.length; i++) {
            const c = cells.get(i);
            if (c.type !== 'code') continue;
            for (let j = 0; j < c.outputs.length; j++) {
                const o = c.outputs.get(j).toJSON();
                if (o.output_type === 'error') out.push(`cell ${i}: ${o.ename}: ${o.evalue}`);
            }
        }
        return out;
    }""", pid)


def _plotly_outputs(page, pid: str) -> int:
    """How many outputs of the notebook's cells are plotly figures (widgets' own not counted)."""
    return page.evaluate("""(pid) => {
        const w = [...window.jupyterapp.shell.widgets('main')].find(x => x.id === pid);
        const cells = w.content.model.cells;
        let n = 0;
        for (let i = 0; i < cells.length; i++) {
            const c = cells.get(i);
            if (c.type !== 'code') continue;
            for (let j = 0; j < c.outputs.length; j++)
                if ('application/vnd.plotly.v1+json' in (c.outputs.get(j).toJSON().data || {})) n++;
        }
        return n;
    }""", pid)


def _close(page, pid: str) -> None:
    page.evaluate("""async (pid) => {
        const w = [...window.jupyterapp.shell.widgets('main')].find(x => x.id === pid);
        if (!w) return;
        await w.sessionContext.shutdown();
        w.context.model.dirty = false;
        w.dispose();
    }""", pid)


def _blank_dropdowns(panel) -> list[str]:
    return panel.locator(".jp-OutputArea select").evaluate_all(
        "els => els.filter(s => s.selectedIndex < 0 || !s.options[s.selectedIndex].textContent.trim())"
        ".map(s => (s.closest('.widget-dropdown') || s).textContent.trim() || '(unnamed)')")


def _next_to(controls, target) -> tuple[bool, dict, dict]:
    """Whether ``target`` starts right under ``controls`` or right beside them."""
    c, t = controls.bounding_box(), target.bounding_box()
    under = 0 <= t["y"] - (c["y"] + c["height"]) <= NEXT_TO_PX
    beside = abs(t["y"] - c["y"]) <= NEXT_TO_PX and t["x"] >= c["x"] + c["width"] - 1
    return under or beside, c, t


def _watch_spinner(page) -> None:
    page.evaluate("""() => {
        window.__wbSpinner = false;
        if (window.__wbObserver) window.__wbObserver.disconnect();
        window.__wbObserver = new MutationObserver(() => {
            if (document.querySelector('.wb-working')) window.__wbSpinner = true;
        });
        window.__wbObserver.observe(document.body, {subtree: true, childList: true, characterData: true});
    }""")


def _select_and_draw(page, widget, pick, what: str) -> None:
    """Pick a layer / range / instance with ``pick()``, click "show timeline", and check the
    answer: the spinner was shown, the timeline sits next to the controls, above the rest."""
    _watch_spinner(page)
    t0 = time.monotonic()
    pick()
    t1 = time.monotonic()
    widget.locator("button", has_text="show timeline").click()
    timeline = widget.locator(".wb-timeline .js-plotly-plot").first
    _wait(lambda: timeline.count() and timeline.locator(".main-svg").count(), 60, f"the timeline of {what}", page, 0.05)
    t2 = time.monotonic()
    _wait(lambda: "answered in" in widget.locator(".wb-done").inner_text(), 30, "the status line's answer", page)
    print(f"{what}: in the browser, pick -> redrawn {t1 - t0:.2f}s, click -> timeline drawn {t2 - t1:.2f}s; "
          f"the kernel's last answer: {widget.locator('.wb-done').inner_text()}")
    assert page.evaluate("() => window.__wbSpinner"), f"{what}: no spinner while the kernel worked"
    keep = os.environ.get("WORKBENCH_SCREENSHOT")
    if keep:  # a directory: the widget after the answer, for a look at its layout
        widget.screenshot(path=str(Path(keep) / f"{what.split(',')[0].replace(' ', '-')}.png"))
    ok, c, t = _next_to(widget.locator(".wb-controls").first, timeline)
    assert ok, f"{what}: the timeline at {t} is not next to the controls at {c}"


def _trace_diff_widget(page, panel) -> None:
    widget = panel.locator(".wb-trace-diff").first
    widget.wait_for(timeout=60_000)
    widget.scroll_into_view_if_needed()
    # The notebook selected layer_03/kv_write and drew its timeline in A and B from code.
    _wait(lambda: widget.locator(".js-plotly-plot").count() == 3, 60, "bars + 2 timelines in the widget", page)
    assert "layer_03/kv_write" in widget.locator(".wb-alignments").inner_text()
    titles = widget.locator(".gtitle").all_text_contents()
    assert any("A vs B: layer_03/kv_write" in t for t in titles), titles
    assert any("15 kernels" in t for t in titles) and any("1 kernel," in t for t in titles), titles
    scope = widget.locator("select").nth(2)  # A, B, layer / range: all, layer 0, 1, ...

    def pick():
        scope.select_option(index=6)
        _wait(lambda: any("A vs B: layer 5" in t for t in widget.locator(".gtitle").all_text_contents()), 60,
              "the bars to redraw for layer 5", page, 0.05)
        _wait(lambda: "layer_05/attention" in widget.locator(".wb-alignments").inner_text(), 30,
              "the alignment table of layer 5", page)
        assert widget.locator(".wb-timeline .js-plotly-plot").count() == 0  # cleared on a new selection

    _select_and_draw(page, widget, pick, "trace diff, layer 5")
    _wait(lambda: widget.locator(".wb-timeline .js-plotly-plot").count() == 2, 30, "the timelines of A and B", page)
    # Each side draws layer 5 of its typical decode step (viz.select): the step may differ.
    _wait(lambda: sorted(t[:2] for t in widget.locator(".wb-timeline .gtitle").all_text_contents()
                         if re.search(r"step_\d+/layer_05 ", t)) == ["A:", "B:"],
          30, "timeline titles for layer 5 in A and B", page)
    bars = widget.locator(".js-plotly-plot").filter(has_text="A vs B").first
    assert widget.locator(".wb-timeline").bounding_box()["y"] < bars.bounding_box()["y"]


def _explorer_widget(page, panel) -> None:
    widget = panel.locator(".wb-trace-explorer").first
    widget.wait_for(timeout=60_000)
    widget.scroll_into_view_if_needed()
    instance = widget.locator(".wb-controls select").first
    labels = instance.locator("option").all_text_contents()
    target = next(i for i, label in enumerate(labels) if label.strip().endswith("layer_03/kv_write"))
    _select_and_draw(page, widget, lambda: instance.select_option(index=target), "explorer, layer_03/kv_write")
    _wait(lambda: any("layer_03/kv_write" in t for t in widget.locator(".wb-timeline .gtitle").all_text_contents()), 30,
          "the explorer's timeline title", page)


WIDGETS = {"trace_diff": _trace_diff_widget, "quickstart": _explorer_widget}


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_in_jupyterlab(page, name, tmp_path):
    pid = None
    try:
        t0 = time.monotonic()
        pid = _open(page, name)
        panel = page.locator(f"#{pid}")
        panel.locator(".jp-Cell").first.wait_for(timeout=60_000)
        _wait(lambda: _kernel_idle(page, pid), 90, "the kernel to start and go idle", page)
        _run_all(page, panel, pid)
        _wait(lambda: _finished(page, pid), 420, "the notebook to finish (every cell run, the kernel idle)", page, 1)
        print(f"{name}: ran in {time.monotonic() - t0:.1f}s")
        assert _errors(page, pid) == []
        assert panel.locator(".jp-OutputArea-output", has_text="Traceback").count() == 0
        stderr = panel.locator('[data-mime-type="application/vnd.jupyter.stderr"]')
        assert stderr.count() == 0, f"a stderr box: {stderr.all_inner_texts()}"
        imported = _kernel_says(page, pid, "import workbench; print(workbench.__file__)")
        assert imported.startswith(str(REPO / "workbench")), f"the kernel imported {imported}"
        # Plotly figures rendered by JupyterLab's plotly extension (no CDN), every one of them.
        figures = panel.locator(".jp-OutputArea .js-plotly-plot")
        want = _plotly_outputs(page, pid)
        rendered = lambda: figures.evaluate_all(  # noqa: E731
            "els => els.map(e => !!e.querySelector('.main-svg') + ':' + e.getBoundingClientRect().height)")
        _wait(lambda: len(rendered()) >= want > 0 and all(x.startswith("true") for x in rendered()) or rendered(),
              60, f"the {want} figures to render", page)
        _first_screen(page, panel, name, tmp_path)
        if name in WIDGETS:
            WIDGETS[name](page, panel)
        problems = _figure_problems(page, panel)
        assert not problems, "figures that read badly:\n" + "\n".join(problems)
        assert _blank_dropdowns(panel) == []
        assert not page.blocked, f"requests to the internet were attempted: {page.blocked[:5]}"
        assert not [e for e in page.page_errors if "plotly" in e.lower() or "widget" in e.lower()], page.page_errors
    except BaseException:
        shot = tmp_path / f"{name}-failure.png"
        page.screenshot(path=str(shot), full_page=True)
        if os.environ.get("WORKBENCH_SCREENSHOT"):
            shutil.copy(shot, Path(os.environ["WORKBENCH_SCREENSHOT"]) / shot.name)
        print(f"screenshot of the failure: {shot}")
        raise
    finally:
        if pid is not None:
            _close(page, pid)
