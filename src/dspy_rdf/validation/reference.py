"""The reference engine: pySHACL over each trace's graph, copied into rdflib.

Each trace is validated in a graph of its own (memory is bounded by the largest trace), with the class hierarchy
added to the data graph (what pySHACL's ``ont_graph`` mixing would do, without its copy) so that ``sh:class
dspy:LMPart`` accepts every part class.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator

import pyoxigraph as ox
import rdflib

from dspy_rdf.canonical.errors import DspyRdfError
from dspy_rdf.rdf import vocab as v
from dspy_rdf.rdf.terms import rdflib_term
from dspy_rdf.validation.report import SH, Severity, Violation, rule_name
from dspy_rdf.validation.shapes import Shapes
from dspy_rdf.validation.units import TraceGraphs
from dspy_rdf.validation.xsd import xsd_reading

__all__ = ["PyshaclEngineError", "validate_graph_pyshacl", "validate_graphs_pyshacl"]


class PyshaclEngineError(DspyRdfError, RuntimeError):
    """pySHACL failed on a trace (not a finding about the data: a fault of pySHACL or of the shapes). ``trace`` names it."""

    def __init__(self, message: str, *, trace: str | None) -> None:
        self.trace = trace
        super().__init__(message)


@lru_cache(maxsize=256)
def _prepared(text: str):
    from rdflib.plugins.sparql import prepareQuery

    return prepareQuery(text)


class _CachingGraph(rdflib.Graph):
    """An rdflib graph that parses each SPARQL text once per process: pySHACL runs a rule's query once per focus
    node, and parsing, not evaluating, is most of rdflib's time on a trace-sized graph (8x faster overall)."""

    def query(self, query_object, *args, **kwargs):
        if isinstance(query_object, str):
            query_object = _prepared(query_object)
        return super().query(query_object, *args, **kwargs)


def _shape_rules(shapes: Shapes) -> dict[rdflib.term.Node, str]:
    """Each shape (node shape, property shape, SPARQL constraint) -> the rule name of its node shape."""
    graph = shapes.graph
    out: dict[rdflib.term.Node, str] = {}
    node_shapes = set(graph.subjects(rdflib.RDF.type, SH.NodeShape)) | set(graph.subjects(SH.targetClass, None))
    for node_shape in node_shapes:
        if isinstance(node_shape, rdflib.URIRef):
            name = rule_name(str(node_shape))
            out[node_shape] = name
            for ps in graph.objects(node_shape, SH.property):
                out[ps] = name
    return out


_RULES: dict[str, dict[rdflib.term.Node, str]] = {}

def _xsd_term(term: ox.NamedNode | ox.BlankNode | ox.Literal | rdflib.term.Node) -> rdflib.term.Node:
    """The rdflib term of a term, a literal read as XSD reads it (see ``xsd``): a form XSD refuses marked ill-typed
    (what rdflib does itself for ``"abc"^^xsd:integer``), so that ``sh:datatype`` reports it, and a date or dateTime
    given its exact value and XSD's order."""
    node = term if isinstance(term, rdflib.term.Node) else rdflib_term(term)
    if isinstance(node, rdflib.Literal) and node.datatype is not None:
        reading = xsd_reading(str(node), str(node.datatype))
        if reading is not None:
            well_typed, value = reading
            if not well_typed or value is not None:
                # rdflib has no public way to say so; these are the two slots its own ill-typed literals set
                node._ill_typed = not well_typed
                node._value = value
    return node


def _node_text(node: rdflib.term.Node | None) -> str | None:
    if node is None:
        return None
    return node.n3() if isinstance(node, rdflib.Literal) else str(node)


@contextmanager
def _quiet_literal_warnings() -> Iterator[None]:
    """rdflib logs a traceback for every ill-formed literal it meets (``"abc"^^xsd:integer``); such a value is a finding
    of the shapes (sh:datatype), reported as such, so the log lines are noise on the user's terminal."""
    logger = logging.getLogger("rdflib.term")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"(Serializing|Parsing) weird", category=UserWarning)
            yield
    finally:
        logger.setLevel(level)


def validate_graph_pyshacl(triples: Iterable[tuple], *, trace: str | None, shapes: Shapes) -> list[Violation]:
    """pySHACL over one trace's triples (rdflib or pyoxigraph terms); the results are reported in ``trace``."""
    with _quiet_literal_warnings():
        return _validate(triples, trace=trace, shapes=shapes)


def _validate(triples: Iterable[tuple], *, trace: str | None, shapes: Shapes) -> list[Violation]:
    import pyshacl

    graph = _CachingGraph()
    for prefix, namespace in v.PREFIXES.items():
        graph.bind(prefix, namespace)
    add = graph.add
    for s, p, o in triples:
        if isinstance(s, (ox.NamedNode, ox.BlankNode)):
            add((rdflib_term(s), rdflib.URIRef(p.value), _xsd_term(o)))
        else:
            add((s, p, _xsd_term(o)))
    for triple in shapes.classes:
        add(triple)
    try:
        _, report, _ = pyshacl.validate(
            graph, shacl_graph=shapes.graph, inference="none", advanced=True, allow_warnings=True, inplace=True
        )
    except (RecursionError, TypeError, ValueError, AttributeError) as exc:
        raise PyshaclEngineError(f"pySHACL failed on trace {trace}: {type(exc).__name__}: {exc}", trace=trace) from None
    if not isinstance(report, rdflib.Graph):  # pySHACL refused the shapes (e.g. MINUS in a SHACL-SPARQL query)
        raise PyshaclEngineError(f"pySHACL could not use the shapes: {getattr(report, 'message', report)}", trace=trace)
    rules = _RULES.setdefault(str(shapes.directory), _shape_rules(shapes))
    nsm = graph.namespace_manager
    out = []
    for result in report.subjects(rdflib.RDF.type, SH.ValidationResult):
        path = report.value(result, SH.resultPath)
        shape = report.value(result, SH.sourceShape)
        out.append(
            Violation(
                focus_node=str(report.value(result, SH.focusNode)),
                path=nsm.normalizeUri(path) if isinstance(path, rdflib.URIRef) else None,
                value=_node_text(report.value(result, SH.value)),
                constraint=str(report.value(result, SH.sourceConstraintComponent)).rsplit("#", 1)[-1],
                message=str(report.value(result, SH.resultMessage) or ""),
                severity=Severity.from_iri(str(report.value(result, SH.resultSeverity))),
                trace=trace,
                rule="" if shape is None else rules.get(shape, rule_name(str(shape)) if isinstance(shape, rdflib.URIRef) else ""),
            )
        )
    return out


def validate_graphs_pyshacl(
    graphs: TraceGraphs, *, shapes: Shapes, progress: Callable[[int], None] | None = None
) -> list[Violation]:
    """pySHACL over each graph of ``graphs`` in turn; ``progress`` is called with 1 after each."""
    out: list[Violation] = []
    for name in graphs.names:
        quads = graphs.quads(name)
        out += validate_graph_pyshacl(((q.subject, q.predicate, q.object) for q in quads), trace=graphs.label(name), shapes=shapes)
        if progress is not None:
            progress(1)
    return out
