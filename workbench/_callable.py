"""Let ``workbench.capture(...)``, ``workbench.report(...)`` and ``workbench.annotate(...)``
be called although each name is also a submodule.

Importing a submodule binds its name on the parent package to the module, shadowing any
function of that name, so the module itself is made callable: calling it calls the function.
"""

from __future__ import annotations

import sys
import types


class _CallableModule(types.ModuleType):
    _target = ""

    def __call__(self, *args, **kwargs):
        return getattr(self, self._target)(*args, **kwargs)


def install(module_name: str, function_name: str) -> None:
    module = sys.modules[module_name]
    module.__class__ = type(f"{function_name}_module", (_CallableModule,), {"_target": function_name})
