"""SHACL conformance of exported traces, with pySHACL and the LinkML-generated shapes.

The shapes (``shapes/dspy.shacl.ttl``) and the class hierarchy (``shapes/dspy.classes.ttl``) are parsed
once per process. The hierarchy goes in as pySHACL's ``ont_graph`` so that ``sh:class dspy:LMPart``
accepts every part class.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import pyoxigraph as ox
import rdflib

from dspy_rdf import model as m
from dspy_rdf import vocab as v
from dspy_rdf.identity import DEFAULT_BASE
from dspy_rdf.resources import shapes_dir
from dspy_rdf.writer import trace_lines

__all__ = ["ValidationReport", "Violation", "graph_from_ntriples", "validate_graph", "validate_traces"]

_SH = rdflib.Namespace("http://www.w3.org/ns/shacl#")


@dataclass(frozen=True, slots=True)
class Violation:
    """One SHACL result: the node, the property path, the offending value, the constraint and its message."""

    focus_node: str
    path: str | None
    value: str | None
    constraint: str
    message: str
    severity: str

    def __str__(self) -> str:
        where = f"<{self.focus_node}>" + (f" {self.path}" if self.path else "")
        value = f" (value {self.value})" if self.value is not None else ""
        return f"{where}: {self.message}{value} [{self.constraint}]"


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """Outcome of validating a graph: ``conforms`` and the violations found."""

    conforms: bool
    violations: tuple[Violation, ...]
    report_graph: rdflib.Graph

    def __str__(self) -> str:
        if self.conforms:
            return "conforms"
        return "\n".join(str(x) for x in self.violations)


@lru_cache(maxsize=1)
def _shapes() -> tuple[rdflib.Graph, rdflib.Graph]:
    directory = shapes_dir()
    shapes = rdflib.Graph().parse(directory / "dspy.shacl.ttl", format="turtle")
    classes = rdflib.Graph().parse(directory / "dspy.classes.ttl", format="nt")
    return shapes, classes


def rdflib_term(term: ox.NamedNode | ox.Literal | ox.BlankNode) -> rdflib.term.Node:
    """The rdflib term for a pyoxigraph term (xsd:string literals become plain literals)."""
    if isinstance(term, ox.NamedNode):
        return rdflib.URIRef(term.value)
    if isinstance(term, ox.BlankNode):
        return rdflib.BNode(term.value)
    if term.language:
        return rdflib.Literal(term.value, lang=term.language)
    if term.datatype.value == v.XSD_STRING:
        return rdflib.Literal(term.value)
    return rdflib.Literal(term.value, datatype=rdflib.URIRef(term.datatype.value))


def graph_from_ntriples(text: str | bytes) -> rdflib.Graph:
    """Build an rdflib graph from N-Triples (or N-Quads, graph names dropped), parsed by pyoxigraph.

    rdflib's own N-Triples parser is quadratic in literal length; pyoxigraph's is not.
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    graph = rdflib.Graph()
    add = graph.add
    for q in ox.parse(data, ox.RdfFormat.N_QUADS):
        add((rdflib_term(q.subject), rdflib.URIRef(q.predicate.value), rdflib_term(q.object)))
    return graph


def _node_text(node) -> str | None:
    if node is None:
        return None
    return str(node) if not isinstance(node, rdflib.Literal) else node.n3()


def validate_graph(graph: rdflib.Graph) -> ValidationReport:
    """Validate an rdflib graph of traces against the generated shapes."""
    import pyshacl

    shapes, classes = _shapes()
    conforms, report, _ = pyshacl.validate(
        graph, shacl_graph=shapes, ont_graph=classes, inference="none", advanced=True, allow_warnings=False
    )
    violations = []
    for result in report.subjects(rdflib.RDF.type, _SH.ValidationResult):
        path = report.value(result, _SH.resultPath)
        violations.append(
            Violation(
                focus_node=str(report.value(result, _SH.focusNode)),
                path=graph.namespace_manager.normalizeUri(path) if isinstance(path, rdflib.URIRef) else None,
                value=_node_text(report.value(result, _SH.value)),
                constraint=str(report.value(result, _SH.sourceConstraintComponent)).rsplit("#", 1)[-1],
                message=str(report.value(result, _SH.resultMessage) or ""),
                severity=str(report.value(result, _SH.resultSeverity)).rsplit("#", 1)[-1],
            )
        )
    violations.sort(key=lambda x: (x.focus_node, x.path or "", x.constraint))
    return ValidationReport(conforms=bool(conforms), violations=tuple(violations), report_graph=report)


def validate_traces(traces: Iterable[m.Trace], *, base: str = DEFAULT_BASE) -> ValidationReport:
    """Export traces and validate the result against the generated shapes."""
    text = "".join(line for trace in traces for line in trace_lines(trace, base=base, graph=False)[1])
    graph = graph_from_ntriples(text)
    for prefix, namespace in v.PREFIXES.items():
        graph.bind(prefix, namespace)
    return validate_graph(graph)
