"""Reading the command line: the parser every ``workbench`` command uses, and the checked types
of its options.

Each value is checked while the command line is read, before anything is opened, run or
stored, by the same rule the API applies (a trace name by the store's, a layer regex by
``analysis.layers``' ...), so a bad one ends the command in one line naming it, exit 2. The
parser's own complaints (an unknown option, a value not among the choices, a missing
argument) are one line too, not a usage block.
"""

from __future__ import annotations

import argparse
import re
from typing import Callable

from ..errors import WorkbenchError

_REQUIRED = re.compile(r"the following arguments are required: (.+)$")


class Parser(argparse.ArgumentParser):
    """``argparse`` with one-line errors: raised as :class:`WorkbenchError` (naming the
    subcommand), which ``cli.main`` prints and exits 2 on; its subcommands' parsers are of
    this class too. ``needs``: what the command takes, in words (``two traces, ...``), said
    with the command's synopsis when something it requires is missing."""

    def __init__(self, *args, needs: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.needs = needs

    def error(self, message: str):
        where = self.prog.split(" ", 1)[1] if " " in self.prog else "command line"
        missing = _REQUIRED.match(message)
        if missing:
            message = self._required(missing.group(1).split(", "))
        raise WorkbenchError(where, message)

    def _required(self, listed: list[str]) -> str:
        """``FIX is required: report takes two traces, ... (workbench report BASE FIX [MORE ...])``:
        what is missing by the names the synopsis gives it, what the command takes, and its
        synopsis (positionals and required options only: the rest is in ``--help``)."""
        names = {_listed_as(a): _shown(a) for a in self._actions}
        missing = [names.get(n, n) for n in listed]
        words = [_synopsis(a) for a in self._actions if not a.option_strings]
        words += [_synopsis(a) for a in self._actions if a.option_strings and a.required]
        said = f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} required"
        command = self.prog.split(" ", 1)[-1]
        takes = f": {command} takes {self.needs}" if self.needs else ""
        return f"{said}{takes} ({self.prog} {' '.join(words)})"


def _listed_as(action) -> str:
    """How argparse names ``action`` in its "arguments are required" list."""
    if action.option_strings:
        return "/".join(action.option_strings)
    return action.metavar if isinstance(action.metavar, str) else action.dest


def _shown(action) -> str:
    """``action`` as the synopsis shows it: an option by its longest name, a positional by its
    metavar (else its name in capitals; a command list as COMMAND)."""
    if action.option_strings:
        return max(action.option_strings, key=len)
    return action.metavar if isinstance(action.metavar, str) else action.dest.upper()


def _synopsis(action) -> str:
    """``BASE``, ``[MORE ...]``, ``VARIANT [VARIANT ...]``, ``--chrome OUT``."""
    shown = _shown(action)
    if action.option_strings:
        return f"{shown} {action.metavar or action.dest.upper()}"
    return {"?": f"[{shown}]", "*": f"[{shown} ...]", "+": f"{shown} [{shown} ...]"}.get(action.nargs, shown)


def count(option: str, minimum: int = 1) -> Callable[[str], int]:
    """A whole number of at least ``minimum`` for ``option``; ``-1`` or ``1.5`` is refused
    rather than read as something else."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise WorkbenchError(f"{option} {text}", f"expected a whole number of at least {minimum}")
        return value

    return parse


def _checked(option: str, kind: str) -> Callable[[str], str]:
    """A type that checks the text by the rule of ``kind`` (see :func:`_check`) and keeps it;
    its refusal is said of ``option`` and the value given, whatever the rule's module calls it."""

    def parse(text: str) -> str:
        try:
            _check(kind, text)
        except WorkbenchError as e:
            raise WorkbenchError(f"{option} {text!r}", e.problem) from None
        return text

    return parse


def _check(kind: str, text: str) -> None:
    """The rule of the module that uses a value of ``kind``, imported only when such a value is
    read: the command line starts without pandas and the rest."""
    if kind == "regex":
        from ..patterns import compile_regex

        compile_regex(text, "regex")
    elif kind == "layer regex":  # compiles, has a group
        from ..analysis.layers import layer_pattern

        layer_pattern(text)
    elif kind == "name":
        from ..trace.store import check_name

        check_name(text)
    elif kind == "gate":
        from ..analysis.gates import parse_gate

        parse_gate(text)
    elif kind == "query":  # one read-only statement
        from ..trace.sql import check_query

        check_query(text, "query")
    elif kind == "device":  # cpu, cuda, cuda:N
        from ..devices import check_device

        check_device(text)
    elif kind == "backend":
        from ..devices import check_backend

        check_backend(text)
    elif kind == "engine":
        from ..engines import check_kind

        check_kind(text)
    elif kind == "assignment":  # KEY=VALUE
        from ..workloads import parse_assignments

        parse_assignments([text])
    else:
        raise LookupError(f"no rule for {kind!r}")  # a mistake here, not the user's: argparse lets it through


def regex(option: str) -> Callable[[str], str]:
    """A regular expression that compiles."""
    return _checked(option, "regex")


def trace_name(option: str) -> Callable[[str], str]:
    """A name the store takes for a trace or set (``trace.store.check_name``)."""
    return _checked(option, "name")


layer_regex = _checked("--layer-regex", "layer regex")
gate = _checked("--fail-if", "gate")
query = _checked("query", "query")
device = _checked("--device", "device")
backend = _checked("--backend", "backend")
engine = _checked("--engine", "engine")
assignment = _checked("--variant", "assignment")


# Option groups several commands share.

def add_global_args(p, *, in_command: bool = False) -> None:
    """``--root``, ``--threads`` and ``--layers``, which every command takes before its name or
    after it (``workbench --root D summary X`` and ``workbench summary X --root D`` alike): the
    one definition, added to the top-level parser and to each command's. Given after the
    command, a value replaces one given before it; not given there (``SUPPRESS``), the one
    before stays."""
    default = argparse.SUPPRESS if in_command else None
    p.add_argument("--root", default=default, help="trace store directory (default: $WORKBENCH_TRACES or ./traces)")
    p.add_argument("--threads", type=count("--threads"), default=default,
                   help="most threads an import uses (default: one per available CPU)")
    p.add_argument("--layers", type=count("--layers"), default=default,
                   help="layers per step to expect where an import infers steps and layers from the kernel "
                        "stream (a trace with no ranges around its kernels): a hint to that search")


def import_options(args):
    """The import options of a CLI run: its --threads and --layers, and memory handed back to
    the system as it is freed (the process does nothing but this command)."""
    from ..trace import ImportOptions

    return ImportOptions(threads=args.threads, memory="release", layers=args.layers)


def add_phase_args(s) -> None:
    """--step-regex / --prefill-regex: which ranges are steps and which are prefill."""
    s.add_argument("--step-regex", default=None, type=regex("--step-regex"),
                   help="ranges that are steps, at any depth (default: ^(step|ProfilerStep); a trace without "
                        "any takes each model call as a step)")
    s.add_argument("--prefill-regex", default=None, type=regex("--prefill-regex"),
                   help="ranges that are prefill work (default: ^prefill)")


def apply_phase_args(trace, args) -> None:
    from ..analysis.steps import set_phases

    set_phases(trace, args.step_regex, args.prefill_regex)


def add_executor_args(s) -> None:
    """Where a trace set's per-member work runs (:mod:`workbench.sets.executors`)."""
    from ..sets.executors import EXECUTORS

    s.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="where a trace set's per-member work runs: local processes, or Ray (default local)")
    s.add_argument("--workers", type=count("--workers"), default=None,
                   help="local worker processes (default: one per CPU; 1: in this process), or the CPUs of a Ray "
                        "instance started here")
    s.add_argument("--ray-address", default=None,
                   help="the Ray cluster to join (auto, ray://HEAD:10001; default $RAY_ADDRESS, else a local instance)")


def executor_of(args):
    from ..sets.executors import Executor

    return Executor(args.executor, args.workers, args.ray_address)
