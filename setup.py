"""C accelerators (the rest of the package metadata is in pyproject.toml).

Two read one trace format's bytes each into columns without holding the GIL; the importers
fall back to their pure-Python readers wherever an accelerator declines a file, and
everywhere when it could not be built (optional: an install without a C compiler still
works, several times slower on large traces). The third searches sorted columns for the
trace model, the fourth nests each thread's ranges in one pass, the fifth adds up each
range's kernels in one pass (numpy does each of those three where they are not built).

Where the compiler is the GCC release that made the committed profiles
(``workbench/trace/pgo/``, made by ``scripts/pgo_profiles.py`` from real captures) and a
source is the one profiled, it is compiled with them: the scanners' branches are laid out
for the paths real traces take (about 15% off a large import). Anywhere else it is compiled
as usual.
"""

import functools
import hashlib
import json
import os
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

_FLAGS = ["-O2", "-std=c11"]
_PGO = Path("workbench/trace/pgo")
# WORKBENCH_PGO=generate: instrumented, to make the profiles (scripts/pgo_profiles.py);
# =check: a function the profile does not describe is an error, and nothing falls back
# (tests/test_pgo_profiles.py).
_MODE = os.environ.get("WORKBENCH_PGO", "")


@functools.cache
def _gcc_version(cc: str) -> str | None:
    try:
        verbose = subprocess.run([cc, "-v"], capture_output=True, text=True, timeout=30).stderr
        version = subprocess.run([cc, "-dumpfullversion"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return version.strip() if "gcc version" in verbose else None  # clang answers too, as "clang version"


def _profile_flags(module: str) -> list[str]:
    """GCC names a static function's profile after the compilation's dump name, by default
    made from the object file's path (a temporary directory under pip): the same name, given,
    in both the profiling and the profiled build, relative to the project root, makes the
    profile apply to any checkout. It also is where the profile is written and read."""
    return ["-dumpdir", f"{_PGO}/", "-dumpbase", module]


@functools.cache
def _profiles() -> dict:
    try:
        return json.loads((_PGO / "profiles.json").read_text())
    except (OSError, ValueError):
        return {}


class BuildExt(build_ext):
    def build_extension(self, ext):
        module = ext.name.rsplit(".", 1)[-1]
        plain = list(ext.extra_compile_args)
        if _MODE == "generate":
            ext.extra_compile_args = plain + ["-fprofile-generate", "-fprofile-update=atomic", *_profile_flags(module)]
            ext.extra_link_args = [*ext.extra_link_args, "-fprofile-generate"]
            return super().build_extension(ext)
        profile = self._profile(ext, module)
        if profile is None:
            return super().build_extension(ext)
        missing = ["-Werror=missing-profile"] if _MODE == "check" else ["-Wno-missing-profile"]
        ext.extra_compile_args = plain + ["-fprofile-use", "-fprofile-partial-training", *missing,
                                          *_profile_flags(module)]
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001 - whatever went wrong, the plain build is the answer
            if _MODE == "check":
                raise
            print(f"{ext.name}: the profile did not apply ({e}); compiling without it")
            ext.extra_compile_args = plain
            return super().build_extension(ext)
        print(f"{ext.name}: compiled with the profile {profile}")

    def _profile(self, ext, module: str) -> Path | None:
        """The committed profile of ext, where this compiler and ext's source are the ones it
        was made with (GCC ignores, or refuses, a profile of other code or another release)."""
        made = _profiles()
        (source,) = ext.sources
        entry = made.get("profiles", {}).get(module, {})
        gcda = _PGO / f"{module}.gcda"
        if not gcda.is_file() or entry.get("source") != source:
            return None
        if entry.get("sha256") != hashlib.sha256(Path(source).read_bytes()).hexdigest():
            return None
        cc = getattr(self.compiler, "compiler_so", None)  # a Unix compiler's command line
        if not cc or _gcc_version(cc[0]) != made.get("gcc"):
            return None
        return gcda


setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=[
        Extension("workbench.trace._sqlite_pages", ["workbench/trace/_sqlite_pages.c"], extra_compile_args=_FLAGS,
                  optional=True),
        Extension("workbench.trace._kineto_scan", ["workbench/trace/_kineto_scan.c"], extra_compile_args=_FLAGS,
                  optional=True),
        Extension("workbench.trace._sorted_search", ["workbench/trace/_sorted_search.c"], extra_compile_args=_FLAGS,
                  optional=True),
        Extension("workbench.trace._range_stack", ["workbench/trace/_range_stack.c"], extra_compile_args=_FLAGS,
                  optional=True),
        Extension("workbench.trace._group_totals", ["workbench/trace/_group_totals.c"], extra_compile_args=_FLAGS,
                  optional=True),
    ],
)
