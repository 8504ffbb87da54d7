"""Package namespaces whose public names are imported when first used (PEP 562), not with the package.

The command line imports only what its command needs, so that it starts fast and a Ctrl-C at its start is its own;
the capture package's writer process starts without importing the recorder.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (type checkers take it as theirs)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def lazy_exports(
    namespace: dict[str, Any], homes: dict[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """The ``__getattr__``, ``__dir__`` and ``__all__`` of the package whose ``globals()`` is ``namespace``: it
    re-exports the names of ``homes`` (module -> names) and imports a module when one of its names is first read."""
    module_of = {name: module for module, names in homes.items() for name in names}
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *module_of})

    return __getattr__, __dir__, list(module_of)
