"""SHACL conformance of exported traces, with pySHACL, the LinkML-generated shapes and the hand-written rules.

The shapes (``shapes/dspy.shacl.ttl``, generated), the cross-node integrity rules (``shapes/dspy.rules.ttl``,
hand-written SHACL-SPARQL) and the class hierarchy (``shapes/dspy.classes.ttl``) are parsed once per process. The
hierarchy goes in as pySHACL's ``ont_graph`` so that ``sh:class dspy:LMPart`` accepts every part class.

Every trace is validated in a graph of its own (the rules relate nodes of one trace and must never join two), so
memory is bounded by the largest trace. pySHACL is the reference engine; :func:`validate_store` uses
:mod:`dspy_rdf.fastshacl` by default (``engine="fast"``), which returns the same result objects.

A :class:`Violation` names its trace, the node as a path a person can follow (``entry 0 › request › message 2 ›
part 1``), the rule (the shape's local name: ``LMResponse`` for a generated shape, ``ToolResultAnswersCall`` for a
rule), the property, the value and the message. A :class:`ValidationReport` groups them (:meth:`~ValidationReport.by_trace`)
and renders them as text, JSON or a SHACL validation report graph in Turtle.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import pyoxigraph as ox
import rdflib

from dspy_rdf import model as m
from dspy_rdf import vocab as v
from dspy_rdf.identity import DEFAULT_BASE
from dspy_rdf.resources import shapes_dir
from dspy_rdf.writer import trace_lines

if TYPE_CHECKING:
    from dspy_rdf.store import TraceStore

__all__ = [
    "RULES_FILE",
    "SHAPES_FILE",
    "ValidationReport",
    "Violation",
    "graph_from_ntriples",
    "node_label",
    "rule_name",
    "validate_dataset",
    "validate_graph",
    "validate_store",
    "validate_traces",
]

_SH = rdflib.Namespace("http://www.w3.org/ns/shacl#")
SHAPES_FILE = "dspy.shacl.ttl"
"""The LinkML-generated shapes (never edited by hand)."""
RULES_FILE = "dspy.rules.ttl"
"""The hand-written cross-node integrity rules (SHACL-SPARQL)."""
CLASSES_FILE = "dspy.classes.ttl"
RULES_NAMESPACE = "https://w3id.org/lmodel/dspy/rules/"

_SEGMENT_WORDS = {"tool_call": "tool call", "tool_result": "tool result", "tool_calls": "tool calls", "prompt_cache": "prompt cache"}


def node_label(focus_node: str, trace: str | None) -> str:
    """The node as a path a person can follow: ``entry 0 › request › message 2 › part 1`` (``trace`` for the trace
    itself). Node IRIs are the trace IRI plus the node's path (:mod:`dspy_rdf.writer`); any other IRI is itself."""
    if trace is None or not focus_node.startswith(trace):
        return focus_node
    rest = focus_node[len(trace):]
    if not rest:
        return "trace"
    if not rest.startswith("/"):
        return focus_node
    words: list[str] = []
    for segment in rest.strip("/").split("/"):
        if segment.isdigit() and words:
            words[-1] = f"{words[-1]} {segment}"
        else:
            words.append(_SEGMENT_WORDS.get(segment, segment.replace("_", " ")))
    return " › ".join(words)


def rule_name(shape: str) -> str:
    """The rule of a shape IRI: its local name (``LMResponse``, ``ToolResultAnswersCall``)."""
    return re.split(r"[#/]", shape.rstrip("/#"))[-1] or shape


@dataclass(frozen=True, slots=True)
class Violation:
    """One SHACL result: the node, the property path, the offending value, the constraint and its message; the
    trace (named graph) it is in, the node as a readable path (``node``, computed from the IRIs when not given) and
    the rule (shape) that reported it."""

    focus_node: str
    path: str | None
    value: str | None
    constraint: str
    message: str
    severity: str
    trace: str | None = None
    node: str = ""
    rule: str = ""

    def __post_init__(self) -> None:
        if not self.node or self.node == self.focus_node:
            object.__setattr__(self, "node", node_label(self.focus_node, self.trace))

    def __str__(self) -> str:
        where = f"<{self.focus_node}>" + (f" {self.path}" if self.path else "")
        value = f" (value {self.value})" if self.value is not None else ""
        return f"{where}: {self.message}{value} [{self.constraint}]"

    def to_dict(self) -> dict[str, Any]:
        """The violation as a JSON-ready dict."""
        return {
            "trace": self.trace, "node": self.node, "focus_node": self.focus_node, "rule": self.rule,
            "path": self.path, "value": self.value, "constraint": self.constraint, "severity": self.severity,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """Outcome of validating traces: ``conforms``, the violations found, and pySHACL's report graph when there is
    one graph (``None`` otherwise: :meth:`to_turtle` then builds a standard ``sh:ValidationReport``). ``traces``
    lists the traces validated, when known."""

    conforms: bool
    violations: tuple[Violation, ...]
    report_graph: rdflib.Graph | None = None
    traces: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.conforms:
            return "conforms"
        return "\n".join(str(x) for x in self.violations)

    def by_trace(self) -> dict[str | None, list[Violation]]:
        """The violations grouped by trace IRI (``None``: not in a known trace), traces in sorted order."""
        groups: dict[str | None, list[Violation]] = {}
        for x in sorted(self.violations, key=_order):
            groups.setdefault(x.trace, []).append(x)
        return groups

    def to_text(self) -> str:
        """Plain words, grouped by trace and, within a trace, by rule."""
        n = len(self.traces)
        of = f" of {n} trace(s)" if n else ""
        if not self.violations:
            return f"conforms: {n} trace(s), no violations" if n else "conforms"
        groups = self.by_trace()
        lines = [f"{len(self.violations)} violation(s) in {len(groups)} trace(s){of}" + ("" if not self.conforms else " (none of severity Violation)")]
        for trace, found in groups.items():
            lines.append("")
            lines.append(f"trace {trace}" if trace is not None else "outside any trace")
            by_rule: dict[str, list[Violation]] = {}
            for x in found:
                by_rule.setdefault(x.rule or x.constraint, []).append(x)
            for rule, items in by_rule.items():
                lines.append(f"  rule {rule} ({len(items)})")
                for x in items:
                    lines.append(f"    - at {x.node}" + (f" <{x.focus_node}>" if x.node != x.focus_node else ""))
                    if trace is not None:
                        lines.append(f"      trace: {trace}")
                    if x.path:
                        lines.append(f"      property: {x.path}")
                    if x.value is not None:
                        lines.append(f"      value: {x.value}")
                    lines.append(f"      {x.severity.lower()}: {x.message} [{x.constraint}]")
        return "\n".join(lines)

    def to_json(self, *, indent: int | None = 2) -> str:
        """The report as JSON: ``conforms``, counts, and the violations grouped by trace."""
        groups = self.by_trace()
        doc = {
            "conforms": self.conforms,
            "traces_validated": len(self.traces) if self.traces else None,
            "violation_count": len(self.violations),
            "traces": [
                {"trace": trace, "violation_count": len(found), "violations": [x.to_dict() for x in found]}
                for trace, found in groups.items()
            ],
        }
        return json.dumps(doc, indent=indent, ensure_ascii=False)

    def to_graph(self) -> rdflib.Graph:
        """The SHACL validation report graph: pySHACL's own when there is one, else one built from the violations."""
        if self.report_graph is not None and (None, rdflib.RDF.type, _SH.ValidationReport) in self.report_graph:
            return self.report_graph
        return _report_graph(self.conforms, self.violations)

    def to_turtle(self) -> str:
        """:meth:`to_graph` as Turtle."""
        graph = self.to_graph()
        graph.bind("sh", str(_SH))
        for prefix, namespace in v.PREFIXES.items():
            graph.bind(prefix, namespace)
        graph.bind("dspyrule", RULES_NAMESPACE)
        return graph.serialize(format="turtle")


def _order(x: Violation) -> tuple:
    return (x.trace or "", x.rule, x.focus_node, x.path or "", x.constraint, x.value or "")


_NSM = None


def _expand(text: str) -> rdflib.URIRef:
    global _NSM
    if _NSM is None:
        _NSM = rdflib.Graph().namespace_manager
        for prefix, namespace in v.PREFIXES.items():
            _NSM.bind(prefix, namespace, override=True)
    if text.startswith("<") and text.endswith(">"):
        return rdflib.URIRef(text[1:-1])
    try:
        return rdflib.URIRef(_NSM.expand_curie(text))
    except ValueError:
        return rdflib.URIRef(text)


def _value_term(text: str) -> rdflib.term.Node:
    if text.startswith('"'):
        from rdflib.util import from_n3

        try:
            return from_n3(text)
        except Exception:  # an unusual lexical form: keep the text
            return rdflib.Literal(text)
    if text.startswith("_:"):
        return rdflib.BNode(text[2:])
    return rdflib.URIRef(text)


def _report_graph(conforms: bool, violations: Iterable[Violation]) -> rdflib.Graph:
    """A standard ``sh:ValidationReport`` graph of violations (from any engine)."""
    graph = rdflib.Graph()
    report = rdflib.BNode()
    graph.add((report, rdflib.RDF.type, _SH.ValidationReport))
    graph.add((report, _SH.conforms, rdflib.Literal(conforms)))
    for x in violations:
        result = rdflib.BNode()
        graph.add((report, _SH.result, result))
        graph.add((result, rdflib.RDF.type, _SH.ValidationResult))
        graph.add((result, _SH.focusNode, _value_term(x.focus_node)))
        if x.path:
            graph.add((result, _SH.resultPath, _expand(x.path)))
        if x.value is not None:
            graph.add((result, _SH.value, _value_term(x.value)))
        graph.add((result, _SH.sourceConstraintComponent, _SH[x.constraint]))
        graph.add((result, _SH.resultSeverity, _SH[x.severity]))
        graph.add((result, _SH.resultMessage, rdflib.Literal(x.message)))
        if x.rule:
            shape = RULES_NAMESPACE + x.rule if x.constraint == "SPARQLConstraintComponent" else v.DSPY + x.rule
            graph.add((result, _SH.sourceShape, rdflib.URIRef(shape)))
    return graph


@lru_cache(maxsize=1)
def _shapes() -> tuple[rdflib.Graph, rdflib.Graph]:
    """The shapes graph (generated shapes plus the hand-written rules) and the class hierarchy."""
    directory = shapes_dir()
    shapes = rdflib.Graph().parse(directory / SHAPES_FILE, format="turtle")
    shapes.parse(directory / RULES_FILE, format="turtle")
    classes = rdflib.Graph().parse(directory / CLASSES_FILE, format="nt")
    return shapes, classes


@lru_cache(maxsize=1)
def _node_shape_of() -> dict[rdflib.term.Node, str]:
    """Each shape (node shape, property shape) -> the rule name of its node shape."""
    shapes, _ = _shapes()
    out: dict[rdflib.term.Node, str] = {}
    for node_shape in set(shapes.subjects(rdflib.RDF.type, _SH.NodeShape)) | set(shapes.subjects(_SH.targetClass, None)):
        if isinstance(node_shape, rdflib.URIRef):
            name = rule_name(str(node_shape))
            out[node_shape] = name
            for ps in shapes.objects(node_shape, _SH.property):
                out[ps] = name
    return out


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


def _trace_of(focus: str, traces: list[str]) -> str | None:
    best = None
    for t in traces:
        if (focus == t or focus.startswith(t + "/")) and (best is None or len(t) > len(best)):
            best = t
    return best


@lru_cache(maxsize=256)
def _prepared(text: str):
    from rdflib.plugins.sparql import prepareQuery

    return prepareQuery(text)


class _Graph(rdflib.Graph):
    """An rdflib graph that parses each SPARQL text once per process: pySHACL runs a rule's query once per focus
    node, and parsing, not evaluating, is most of rdflib's time on a trace-sized graph (8x faster overall)."""

    def query(self, query_object, *args, **kwargs):
        if isinstance(query_object, str):
            query_object = _prepared(query_object)
        return super().query(query_object, *args, **kwargs)


def _pyshacl(graph: rdflib.Graph, *, trace: str | None = None, owned: bool = False) -> tuple[bool, list[Violation], rdflib.Graph, list[str]]:
    """pySHACL over ``graph`` (copied unless ``owned``: the class hierarchy is added to it, as pySHACL's
    ``ont_graph`` mixing would do, so that it validates in place with the caching query above)."""
    import pyshacl

    shapes, classes = _shapes()
    if not owned or not isinstance(graph, _Graph):
        data = _Graph()
        data.namespace_manager = graph.namespace_manager
        for triple in graph:
            data.add(triple)
        graph = data
    for triple in classes:
        graph.add(triple)
    conforms, report, _ = pyshacl.validate(
        graph, shacl_graph=shapes, inference="none", advanced=True, allow_warnings=False, inplace=True
    )
    if not isinstance(report, rdflib.Graph):  # pySHACL refused the shapes (e.g. MINUS in a SHACL-SPARQL query)
        from dspy_rdf.errors import DspyRdfError

        raise DspyRdfError(f"pySHACL could not use the shapes: {getattr(report, 'message', report)}")
    traces = [trace] if trace is not None else sorted(str(t) for t in graph.subjects(rdflib.RDF.type, rdflib.URIRef(v.class_iri("Trace"))))
    rules = _node_shape_of()
    nsm = graph.namespace_manager
    for prefix, namespace in v.PREFIXES.items():
        if prefix not in dict(nsm.namespaces()):
            nsm.bind(prefix, namespace)
    violations = []
    for result in report.subjects(rdflib.RDF.type, _SH.ValidationResult):
        path = report.value(result, _SH.resultPath)
        focus = str(report.value(result, _SH.focusNode))
        shape = report.value(result, _SH.sourceShape)
        violations.append(
            Violation(
                focus_node=focus,
                path=nsm.normalizeUri(path) if isinstance(path, rdflib.URIRef) else None,
                value=_node_text(report.value(result, _SH.value)),
                constraint=str(report.value(result, _SH.sourceConstraintComponent)).rsplit("#", 1)[-1],
                message=str(report.value(result, _SH.resultMessage) or ""),
                severity=str(report.value(result, _SH.resultSeverity)).rsplit("#", 1)[-1],
                trace=trace if trace is not None else _trace_of(focus, traces),
                rule=rules.get(shape, rule_name(str(shape)) if isinstance(shape, rdflib.URIRef) else ""),
            )
        )
    violations.sort(key=lambda x: (x.focus_node, x.path or "", x.constraint))
    return bool(conforms), violations, report, traces


def validate_graph(graph: rdflib.Graph, *, trace: str | None = None) -> ValidationReport:
    """Validate an rdflib graph against the generated shapes and the rules.

    The rules relate nodes of one trace, so two traces in one graph could join (on a shared tool call id, say). A
    graph of several exported traces (every subject IRI extends one ``dspy:Trace`` IRI, as the writer mints them)
    is therefore split and each trace validated alone; any other graph is validated as it is, each violation given
    the trace whose IRI its node's IRI extends. ``trace`` names the graph's one trace.
    """
    found = sorted(str(t) for t in graph.subjects(rdflib.RDF.type, rdflib.URIRef(v.class_iri("Trace"))))
    if trace is not None or len(found) < 2:
        conforms, violations, report, traces = _pyshacl(graph, trace=trace)
        return ValidationReport(conforms=conforms, violations=tuple(violations), report_graph=report, traces=tuple(traces))
    # Several exported traces in one graph (every subject IRI under one trace IRI): split it by trace and validate
    # each alone, so that no rule joins two traces. Any other graph is validated as it is.
    parts: dict[str, _Graph] = {name: _Graph() for name in found}
    for triple in graph:
        owner = _trace_of(str(triple[0]), found) if isinstance(triple[0], rdflib.URIRef) else None
        if owner is None:
            conforms, violations, report, traces = _pyshacl(graph)
            return ValidationReport(conforms=conforms, violations=tuple(violations), report_graph=report, traces=tuple(traces))
        parts[owner].add(triple)

    def each():
        for name, part in parts.items():
            ok, violations, _, _ = _pyshacl(part, trace=name, owned=True)
            yield ok, violations, [name]

    return _combine(each())


def _combine(parts: Iterable[tuple[bool, list[Violation], list[str]]]) -> ValidationReport:
    conforms = True
    violations: list[Violation] = []
    traces: list[str] = []
    for ok, found, names in parts:
        conforms = conforms and ok
        violations += found
        traces += names
    violations.sort(key=_order)
    return ValidationReport(conforms=conforms, violations=tuple(violations), report_graph=None, traces=tuple(traces))


def _bound(graph: rdflib.Graph) -> rdflib.Graph:
    for prefix, namespace in v.PREFIXES.items():
        graph.bind(prefix, namespace)
    return graph


def validate_traces(traces: Iterable[m.Trace], *, base: str = DEFAULT_BASE) -> ValidationReport:
    """Export traces and validate each (in a graph of its own) against the generated shapes and the rules."""

    def each():
        seen: set[str] = set()
        for trace in traces:
            iri, lines = trace_lines(trace, base=base, graph=False)
            if iri in seen:
                continue
            seen.add(iri)
            data = "".join(lines).encode("utf-8")
            ok, found, _, _ = _pyshacl(_graph_of(ox.parse(data, ox.RdfFormat.N_TRIPLES)), trace=iri, owned=True)
            yield ok, found, [iri]

    return _combine(each())


def _graph_of(quads: Iterable[ox.Quad]) -> rdflib.Graph:
    graph = _Graph()
    add = graph.add
    for q in quads:
        add((rdflib_term(q.subject), rdflib.URIRef(q.predicate.value), rdflib_term(q.object)))
    return _bound(graph)


def validate_dataset(dataset: ox.Store, *, traces: list[str] | None = None, progress: Callable[[int], None] | None = None) -> ValidationReport:
    """Validate an in-memory pyoxigraph dataset (parsed N-Quads, TriG, Turtle, ...): each named graph as one trace,
    and the default graph, if it holds triples, as one graph of its own (its traces found by ``dspy:Trace``)."""
    names = traces if traces is not None else sorted(g.value for g in dataset.named_graphs() if isinstance(g, ox.NamedNode))

    def each():
        for name in names:
            graph = ox.NamedNode(name)
            if not dataset.contains_named_graph(graph):
                raise ValueError(f"no trace {name} in the input")
            ok, found, _, _ = _pyshacl(_graph_of(dataset.quads_for_pattern(None, None, None, graph)), trace=name, owned=True)
            if progress is not None:
                progress(1)
            yield ok, found, [name]
        if traces is None:
            default = list(dataset.quads_for_pattern(None, None, None, ox.DefaultGraph()))
            if default:
                ok, found, _, found_traces = _pyshacl(_graph_of(default), owned=True)
                yield ok, found, found_traces

    return _combine(each())


def validate_store(
    store: TraceStore,
    *,
    traces: list[str] | None = None,
    progress: Callable[[int], None] | None = None,
    engine: str = "fast",
    slices: bool | None = None,
) -> ValidationReport:
    """Validate the traces of a store (all, or the IRIs ``traces``) against the shapes and the rules, trace by trace.

    The default engine, ``"fast"``, is :func:`dspy_rdf.fastshacl.validate_store`: the shapes compiled to SPARQL and
    run inside the store (two worker processes on an embedded store), with the same verdicts as pySHACL (differential
    tests) at tens of times its speed. With ``engine="pyshacl"`` (the reference) each trace's named graph is fetched on its own (``quads_for_pattern``
    on an embedded store, a Graph Store ``GET`` on a remote one) and validated by pySHACL, so memory is bounded by
    the largest trace. ``progress`` is called with the number of traces validated since its last call. Both engines
    return the same result objects. ``slices`` chooses how the fast engine runs on an embedded store (see
    :func:`dspy_rdf.fastshacl.validate_store`); the pyshacl engine ignores it.
    """
    if engine != "pyshacl":
        from dspy_rdf.fastshacl import validate_store as fast

        return fast(store, traces=traces, progress=progress, engine=engine, slices=slices)
    from dspy_rdf.store import StoreError

    names = list(dict.fromkeys(traces)) if traces is not None else store.trace_iris()
    oxigraph = getattr(store, "oxigraph", None)

    def fetch(name: str) -> rdflib.Graph:
        if oxigraph is not None:
            graph = ox.NamedNode(name)
            if not oxigraph.contains_named_graph(graph):
                raise StoreError(f"no trace {name} in the store at {store.location}")
            return _graph_of(oxigraph.quads_for_pattern(None, None, None, graph))
        import io

        buffer = io.BytesIO()
        store.dump(buffer, traces=[name])
        data = buffer.getvalue()
        if not data.strip():
            raise StoreError(f"no trace {name} in the store at {store.location}")
        return _graph_of(ox.parse(data, ox.RdfFormat.N_QUADS))

    def each():
        for name in names:
            ok, found, _, _ = _pyshacl(fetch(name), trace=name, owned=True)
            if progress is not None:
                progress(1)
            yield ok, found, [name]

    return _combine(each())
