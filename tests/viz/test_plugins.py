"""User workloads as plugins: ``module:attribute`` references, factories and entry points, each
with real modules written to disk (and a real installed distribution for the entry point), run
through the real engines; every mistake a user can make is one line."""

import importlib
import os
import sys

import pytest

torch = pytest.importorskip("torch")

from helpers import REPO, run_cli  # noqa: E402
from workbench import engines, workloads  # noqa: E402
from workbench.errors import WorkbenchError  # noqa: E402
from workbench.capturing.run import generate  # noqa: E402
from workbench.workloads.contract import CONTRACT  # noqa: E402


# A two-layer model with what the eager engine needs (workloads/contract.py) and no more: no
# KV cache, so `rows` only bounds the positions and `rows_for` is constant.
TINY = '''
import types

import torch

from workbench.workloads import Option, Presentation


class Instance:
    def __init__(self, variant, device):
        gen = torch.Generator().manual_seed(variant["seed"])
        hidden, vocab = variant["hidden"], variant["vocab"]
        self.device = torch.device(device)
        self.ctx, self.rows = variant["ctx"], variant["rows"]
        self.embed = torch.randn(vocab, hidden, generator=gen).to(self.device)
        self.w1 = (torch.randn(hidden, hidden, generator=gen) / hidden ** 0.5).to(self.device)
        self.w2 = (torch.randn(hidden, vocab, generator=gen) / hidden ** 0.5).to(self.device)
        self.prompt = torch.randint(vocab, (self.ctx,), generator=gen).to(self.device)
        self.info = {"dtype": "float32"}

    def rows_for(self, cached):
        return self.rows

    def forward(self, tokens, positions, rows):
        x = torch.relu(self.embed[tokens] @ self.w1)
        return (x @ self.w2)[-1:]


class Tiny:
    # Plain values stand for Option(default=value).
    options = {"hidden": Option(16, None, "width"), "vocab": 32, "ctx": 5, "rows": 64, "seed": 0}
    presentation = Presentation(regions=("net",))

    def create(self, variant, device):
        return Instance(variant, device)


WORKLOAD = Tiny()
NAMESPACE = types.SimpleNamespace(workload=WORKLOAD)


def factory():
    return Tiny()


def returns_int():
    return 3


def raises():
    raise RuntimeError("no GPU budget\\nsecond line")


class OnlyOptions:
    options = {}


NOT_A_WORKLOAD = 3
BAD_OPTIONS = types.SimpleNamespace(options=[1, 2], create=lambda variant, device: None)
'''


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("plugins")
    (root / "tinywl.py").write_text(TINY)
    (root / "brokenwl.py").write_text("raise RuntimeError('import-time failure')\n")
    # Imported only when the entry point is used: its flag proves listing names imports nothing.
    (root / "myplugmod.py").write_text("import tinywl\n\nWORKLOAD = tinywl.Tiny()\n")
    dist = root / "myplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[workbench.workloads]\nmyplug = myplugmod:WORKLOAD\n"
                                           "myplug_broken = nosuchmod:WORKLOAD\n")
    return root


@pytest.fixture(autouse=True)
def plugins_on_path(plugin_dir, monkeypatch):
    """The plugin directory on sys.path for one test, and a plugin cache of its own, so a test
    sees only the plugins it loads."""
    monkeypatch.syspath_prepend(str(plugin_dir))
    monkeypatch.setattr(workloads.registry, "_PLUGINS", {})
    monkeypatch.delitem(sys.modules, "myplugmod", raising=False)


def test_reference_to_a_workload_object_or_factory():
    by_object = workloads.get("tinywl:WORKLOAD")
    assert workloads.get("tinywl:WORKLOAD") is by_object  # cached per reference
    for ref in ("tinywl:factory", "tinywl:Tiny", "tinywl:NAMESPACE.workload"):
        found = workloads.get(ref)
        assert set(found.options) == set(by_object.options) and found.presentation.regions == ("net",)
    # Plain option values became Options, so variants parse like the built-in workload's.
    assert workloads.get("tinywl:factory").options["vocab"] == workloads.Option(32)
    assert workloads.resolve("tinywl:Tiny", {"ctx": "4"}) == {"hidden": 16, "vocab": 32, "ctx": 4, "rows": 64,
                                                              "seed": 0}
    with pytest.raises(WorkbenchError, match="unknown variant key"):
        workloads.resolve("tinywl:Tiny", {"layers": "2"})


def test_entry_point_is_listed_without_import_and_loaded_on_use():
    assert {"decoder", "myplug", "myplug_broken"} <= set(workloads.names())
    assert "myplugmod" not in sys.modules
    assert workloads.presentation("myplug") is workloads.NO_PRESENTATION  # a figure imports nothing
    assert "myplugmod" not in sys.modules
    assert workloads.resolve("myplug", {"hidden": "8"})["hidden"] == 8
    assert "myplugmod" in sys.modules
    assert workloads.presentation("myplug").regions == ("net",)
    with pytest.raises(WorkbenchError) as err:
        workloads.get("myplug_broken")
    assert str(err.value) == ("workload myplug_broken: entry point myplug_broken (nosuchmod:WORKLOAD) of "
                              "distribution myplug 0.1: cannot import module nosuchmod: No module named 'nosuchmod'")


@pytest.mark.parametrize("ref", ["tinywl:WORKLOAD", "tinywl:factory", "myplug"])
def test_plugin_runs_on_the_eager_engine(ref):
    engine = engines.build(ref, workloads.resolve(ref, {"seed": "3"}), "eager", "cpu")
    logits, tokens = generate(engine, 2, keep=True)
    assert logits.shape == (3, 32) and len(tokens) == 3
    assert engine.info["engine"] == "eager" and engine.info["dtype"] == "float32"


def test_instance_lacking_what_the_engine_uses_is_one_line():
    ref = "tinywl:WORKLOAD"
    with pytest.raises(WorkbenchError) as err:
        engines.build(ref, workloads.resolve(ref, {}), "compile", "cpu")
    assert err.value.where == f"workload {ref}"
    assert err.value.problem.startswith("its instance (Instance) has no `regions` (the compile engine needs it: ")
    assert "\n" not in str(err.value)
    # The same table documents every kind the engines know.
    from workbench.vocabulary import ENGINE_KINDS

    assert set(CONTRACT) == set(ENGINE_KINDS)
    assert "regions" in CONTRACT["compile"] and "regions" not in CONTRACT["eager"]


@pytest.mark.parametrize("ref, problem", [
    ("nosuchpkg.mod:factory", "cannot import module nosuchpkg.mod: No module named 'nosuchpkg'"),
    ("brokenwl:WORKLOAD", "importing module brokenwl failed: RuntimeError: import-time failure"),
    ("tinywl:MISSING", "module tinywl has no attribute MISSING"),
    ("tinywl:NAMESPACE.missing", "tinywl:NAMESPACE has no attribute missing"),
    ("tinywl:raises", "tinywl:raises() raised RuntimeError: no GPU budget"),
    ("tinywl:returns_int", "tinywl:returns_int returned int, not a workload "
                           "(a workload has `options` and `create(variant, device)`)"),
    ("tinywl:OnlyOptions", "tinywl:OnlyOptions returned OnlyOptions, not a workload: it has no "
                           "`create(variant, device)` (a workload has `options` and `create(variant, device)`)"),
    ("tinywl:NOT_A_WORKLOAD", "tinywl:NOT_A_WORKLOAD is int, not a workload "
                              "(a workload has `options` and `create(variant, device)`)"),
    ("tinywl:BAD_OPTIONS", "`options` is list, not a mapping of name -> Option (or default value)"),
    ("tinywl:", "bad reference: expected module:attribute"),
    (":WORKLOAD", "bad reference: expected module:attribute"),
    ("tinywl:WORKLOAD:x", "bad reference: expected module:attribute"),
    ("tiny wl:WORKLOAD", "bad reference: expected module:attribute"),
    ("nosuchname", "unknown workload (known: "),
])
def test_bad_reference_is_one_line(ref, problem):
    with pytest.raises(WorkbenchError) as err:
        workloads.get(ref)
    assert err.value.where == f"workload {ref}"
    assert err.value.problem.startswith(problem)
    assert "\n" not in str(err.value)


def test_presentation_never_imports_a_plugin(plugin_dir):
    (plugin_dir / "lazywl.py").write_text("import tinywl\n\nWORKLOAD = tinywl.Tiny()\n")
    meta = {"capture": {"workload": "lazywl:WORKLOAD"}}
    assert workloads.presentation_of(meta) is workloads.NO_PRESENTATION
    assert "lazywl" not in sys.modules
    importlib.import_module("lazywl")
    assert workloads.presentation_of(meta).regions == ("net",)
    # Loaded, but not a workload: figures still draw, with the empty presentation.
    assert workloads.presentation_of({"workload": "lazywl:missing"}) is workloads.NO_PRESENTATION


def test_cli_capture_of_a_missing_plugin_is_one_line(tmp_path):
    done = run_cli("capture", "nosuchpkg.mod:factory", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "workbench: workload nosuchpkg.mod:factory: cannot import module nosuchpkg.mod: No module named 'nosuchpkg'"]


def test_cli_captures_a_plugin(tmp_path, plugin_dir):
    store = tmp_path / "store"
    done = run_cli("capture", "tinywl:WORKLOAD", "--variant", "ctx=4", "--name", "tiny", "--device", "cpu",
                   "--steps", "1", "--repeats", "1", "--warmup", "1", "--quiet", root=store, cwd=tmp_path,
                   env={"PYTHONPATH": os.pathsep.join([str(REPO), str(plugin_dir)])})
    assert done.returncode == 0, done.stderr
    assert (store / "tiny").is_dir()
