"""Extensions that other packages offer through entry points, found the way rdflib finds its plugins.

A package registers a store for a URL scheme in the ``dspy_rdf.stores`` group and a validation engine in the
``dspy_rdf.engines`` group of its metadata, for example in its ``pyproject.toml``::

    [project.entry-points."dspy_rdf.stores"]
    mystore = "mypackage.store:open_mystore"      # --store mystore://...

    [project.entry-points."dspy_rdf.engines"]
    myshacl = "mypackage.engine:MyEngine"         # --engine myshacl

The built-in stores and engines are registered in the same tables, so a plugin is opened, listed and chosen the way
a built-in is. Entry points are read only when a name is not among the registered ones: opening the default store
or running the default engine reads no package metadata.
"""

from __future__ import annotations

from typing import Any

from dspy_rdf.canonical.errors import DspyRdfError

STORES_GROUP = "dspy_rdf.stores"
ENGINES_GROUP = "dspy_rdf.engines"


class PluginError(DspyRdfError):
    """An entry point that does not load; ``group``, ``name`` and ``target`` say which."""

    def __init__(self, group: str, name: str, target: str, reason: str) -> None:
        self.group = group
        self.name = name
        self.target = target
        self.reason = reason
        super().__init__(f"the {group} plugin {name!r} ({target}) does not load: {reason}")


def plugin_names(group: str) -> list[str]:
    """The names the installed packages register in an entry-point group."""
    from importlib.metadata import entry_points  # ~18 ms of imports, paid only when a plugin is looked for

    return sorted({point.name for point in entry_points(group=group)})


def load_plugin(group: str, name: str) -> Any | None:
    """The object an installed package registers under ``name`` in ``group`` (None when none does); a plugin that
    fails to import is a :class:`PluginError` naming it, never a traceback from inside it."""
    from importlib.metadata import entry_points

    for point in entry_points(group=group, name=name):
        try:
            return point.load()
        except Exception as exc:  # any error of a third-party import: say whose it is
            raise PluginError(group, name, point.value, f"{type(exc).__name__}: {exc}") from exc
    return None
