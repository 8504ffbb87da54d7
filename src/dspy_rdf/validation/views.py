"""PROV-O views of traces (what ``dspy-rdf prov`` writes beside them, one graph ``<trace IRI>/prov`` each), validated
with the PROV shapes (``shapes/prov/``).

Which graphs are views is decided where inputs are cut into units (:func:`dspy_rdf.validation.units.is_prov_view`).
The PROV shapes target the subjects of ``prov:wasGeneratedBy`` and use alternative paths, which the compiled engine
does not compile, so views are validated by the reference engine (pySHACL), one view at a time, whatever engine
validates the traces. A result is reported in the view's graph, at the node named as in its trace (``call 3``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dspy_rdf.resources import shapes_dir
from dspy_rdf.validation.reference import validate_graph_pyshacl
from dspy_rdf.validation.report import Violation, node_label
from dspy_rdf.validation.shapes import load_shapes
from dspy_rdf.validation.units import PROV_VIEW_SUFFIX, TraceGraphs

__all__ = ["PROV_SHAPES_DIR", "validate_views"]

PROV_SHAPES_DIR: Path = shapes_dir() / "prov"
"""The directory of the shapes of PROV-O views (every ``*.ttl`` in it)."""


def validate_views(graphs: TraceGraphs, *, progress: Callable[[int], None] | None = None) -> list[Violation]:
    """The results of the PROV shapes on each view of ``graphs`` (reported in the view's graph); ``progress`` is
    called with 1 after each view."""
    shapes = load_shapes(PROV_SHAPES_DIR)
    out: list[Violation] = []
    for name in graphs.names:
        view = graphs.label(name) or name
        trace = view.removesuffix(PROV_VIEW_SUFFIX) if view.endswith(PROV_VIEW_SUFFIX) else None
        found = validate_graph_pyshacl(((q.subject, q.predicate, q.object) for q in graphs.quads(name)), trace=view, shapes=shapes)
        out += [replace(x, node=node_label(x.focus_node, trace)) if trace is not None else x for x in found]
        if progress is not None:
            progress(1)
    return out
