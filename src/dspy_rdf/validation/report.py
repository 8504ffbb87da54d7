"""What validation finds and how it is shown: :class:`Severity`, :class:`Violation`, :class:`ValidationReport`.

Every engine returns the same objects. A :class:`Violation` is one SHACL validation result of any severity: the
trace it is in, the node as a path a person can follow (``entry 0 › request › message 2 › part 1``), the rule (the
shape's local name: ``LMResponse`` for a generated shape, ``ToolResultAnswersCall`` for a hand-written rule), the
property, the value, the constraint component, the severity and the message. A :class:`ValidationReport` groups them
(:meth:`~ValidationReport.by_trace`) and renders them as text, JSON or a SHACL validation report graph in Turtle.

A result in a PROV-O view of a trace (a graph ``<trace IRI>/prov``, checked with the PROV shapes) is a
:class:`Violation` like any other, its ``trace`` the view's graph: the report lists the views it validated
(:attr:`ValidationReport.views`) and shows their results as those of a PROV view.
"""

from __future__ import annotations

import enum
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import rdflib

from dspy_rdf.rdf import vocab as v
from dspy_rdf.validation.shapes import RULES_NAMESPACE

if TYPE_CHECKING:
    from dspy_rdf.canonical.redact import Redactor

__all__ = ["Severity", "ValidationReport", "Violation", "node_label", "rule_name"]

SH = rdflib.Namespace("http://www.w3.org/ns/shacl#")
PROV_SHAPES_NAMESPACE = "https://w3id.org/lmodel/dspy/prov-shapes/"
"""The namespace of the shapes of PROV-O views (``shapes/prov/prov.shacl.ttl``)."""


class Severity(enum.StrEnum):
    """The severity of a validation result, as SHACL names it (``sh:Violation``, ``sh:Warning``, ``sh:Info``).

    ``Violation``: the record is broken or inconsistent (a required value missing, a wrong type, a gap in positions,
    totals that do not add up). ``Warning``: the record is sound, and it shows the model or the program behaving
    unexpectedly (a tool call naming a tool its request did not offer). ``Info``: for information only.
    """

    VIOLATION = "Violation"
    WARNING = "Warning"
    INFO = "Info"

    @property
    def rank(self) -> int:
        """2 for Violation, 1 for Warning, 0 for Info: a result fails a threshold when its rank is at least the threshold's."""
        return {"Violation": 2, "Warning": 1, "Info": 0}[self.value]

    @classmethod
    def from_iri(cls, iri: str) -> Severity:
        """The severity of ``sh:Violation`` / ``sh:Warning`` / ``sh:Info`` (an IRI or its local name)."""
        local = re.split(r"[#/]", iri)[-1]
        try:
            return cls(local)
        except ValueError:
            raise ValueError(f"unknown SHACL severity {iri!r}; expected sh:Violation, sh:Warning or sh:Info") from None


_SEGMENT_WORDS = {"tool_call": "tool call", "tool_result": "tool result", "tool_calls": "tool calls", "prompt_cache": "prompt cache"}


def node_label(focus_node: str, trace: str | None) -> str:
    """The node as a path a person can follow: ``entry 0 › request › message 2 › part 1`` (``trace`` for the trace
    itself). Node IRIs are the trace IRI plus the node's path (:mod:`dspy_rdf.rdf.writer`); any other IRI is itself."""
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
    """One SHACL validation result (of any severity): the node, the property path, the offending value, the constraint
    component and its message; the trace it is in (``None``: triples outside any trace), the node as a readable path
    (``node``, computed from the IRIs when not given) and the rule (shape) that reported it."""

    focus_node: str
    path: str | None
    value: str | None
    constraint: str
    message: str
    severity: Severity
    trace: str | None = None
    node: str = ""
    rule: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.severity, Severity):
            object.__setattr__(self, "severity", Severity.from_iri(str(self.severity)))
        if not self.node or self.node == self.focus_node:
            object.__setattr__(self, "node", node_label(self.focus_node, self.trace))

    def __str__(self) -> str:
        where = f"<{self.focus_node}>" + (f" {self.path}" if self.path else "")
        value = f" (value {self.value})" if self.value is not None else ""
        return f"{self.severity.value.lower()}: {where}: {self.message}{value} [{self.constraint}]"

    def key(self) -> tuple[str | None, str, str, str, Severity]:
        """``(trace, focus node, rule, constraint component, severity)``: what identifies a result across engines."""
        return (self.trace, self.focus_node, self.rule, self.constraint, self.severity)

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return {
            "trace": self.trace, "node": self.node, "focus_node": self.focus_node, "rule": self.rule, "path": self.path,
            "value": self.value, "constraint": self.constraint, "severity": self.severity.value, "message": self.message,
        }


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` on one line: line breaks and other control characters escaped (``\\n``, ``\\x1b``), so that a value
    from a trace can never forge lines of a report."""
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return _CONTROL.sub(lambda m: named.get(m.group(), f"\\u{ord(m.group()):04x}"), text)


def _order(x: Violation) -> tuple:
    return (x.trace or "", -x.severity.rank, x.rule, x.focus_node, x.path or "", x.constraint, x.value or "", x.message)


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """The outcome of validating traces: every result found (:attr:`violations`, any severity, sorted), the traces
    validated (:attr:`traces`), the PROV-O views validated (:attr:`views`, the names of their graphs), how many
    graphs of triples outside any trace were validated on their own (:attr:`untraced_graphs`) and how many graphs
    of a store held neither a trace nor a view and were not validated (:attr:`other_graphs`).

    :attr:`conforms` is true when no result has severity Violation (warnings do not break a record);
    :meth:`fails` applies another threshold. A report that validated no trace and no view (nothing at all, or only
    triples outside any trace) conforms, as SHACL says of an empty graph, but :meth:`fails` is true and the text says
    what the input held instead (:meth:`nothing_found`).
    """

    violations: tuple[Violation, ...]
    traces: tuple[str, ...] = ()
    untraced_graphs: int = 0
    views: tuple[str, ...] = ()
    other_graphs: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "violations", tuple(sorted(self.violations, key=_order)))

    @property
    def conforms(self) -> bool:
        """No result of severity Violation."""
        return not any(x.severity is Severity.VIOLATION for x in self.violations)

    @property
    def validated(self) -> int:
        """How many traces, PROV-O views and graphs outside any trace were validated."""
        return len(self.traces) + len(self.views) + self.untraced_graphs

    def counts(self) -> dict[Severity, int]:
        """The number of results of each severity (every severity present, 0 when none)."""
        found = Counter(x.severity for x in self.violations)
        return {s: found.get(s, 0) for s in Severity}

    def fails(self, threshold: Severity = Severity.VIOLATION) -> bool:
        """Whether a result of ``threshold``'s severity or higher was found, or no trace and no view was validated."""
        return not (self.traces or self.views) or any(x.severity.rank >= threshold.rank for x in self.violations)

    def nothing_found(self, where: str = "the input") -> str | None:
        """One line saying what ``where`` (``"prov.nq"``, ``"the store at ..."``) held instead of traces and PROV
        views, when no trace and no view was validated; None when one was."""
        if self.traces or self.views:
            return None
        others = self.untraced_graphs + self.other_graphs
        if not others:
            return f"no traces and no PROV views in {where}: found no data"
        found = f"found {others} graph{'s' if others > 1 else ''} of other data (no dspy:Trace node, no PROV-O triples)"
        if self.violations:
            found += f"; checked on their own with the trace shapes: {len(self.violations)} result(s)"
        return f"no traces and no PROV views in {where}: {found}"

    def __str__(self) -> str:
        if not self.violations:
            return "conforms" if self.traces or self.views else "no trace or PROV view validated"
        return "\n".join(str(x) for x in self.violations)

    def by_trace(self) -> dict[str | None, list[Violation]]:
        """The results grouped by trace IRI (``None``: outside any trace), traces in sorted order."""
        groups: dict[str | None, list[Violation]] = {}
        for x in self.violations:
            groups.setdefault(x.trace, []).append(x)
        return groups

    def summary(self) -> str:
        """One line: what was validated (traces, and PROV views when there were any) and what was found."""
        nothing = self.nothing_found()
        if nothing is not None:
            return nothing
        counts = self.counts()
        verdict = "does not conform" if not self.conforms else "conforms"
        found = ", ".join(f"{n} {s.value.lower()}(s)" for s, n in counts.items() if n)
        if not self.views:
            what = f"{len(self.traces)} trace(s)"
            if self.untraced_graphs:
                what += f" and {self.untraced_graphs} graph(s) of triples outside any trace"
            return f"conforms: {what}, no violations" if not self.violations else f"{verdict}: {found} in {len(self.by_trace())} of {what}"
        # with views, each kind counted on its own: "1 of 3 PROV view(s)"
        views = set(self.views)
        groups = self.by_trace()
        kinds = [
            (sum(1 for g in groups if g is not None and g not in views), len(self.traces), "trace(s)"),
            (sum(1 for g in groups if g in views), len(self.views), "PROV view(s)"),
            (1 if None in groups else 0, self.untraced_graphs, "graph(s) of triples outside any trace"),
        ]
        if not self.violations:
            counted = [f"{total} {noun}" for _, total, noun in kinds if total or noun == "trace(s)"]
            return f"conforms: {_and(counted)}, no violations"
        counted = [f"{hit} of {total} {noun}" for hit, total, noun in kinds if total]
        if not self.traces:
            counted.append("0 trace(s)")
        return f"{verdict}: {found} in {_and(counted)}"

    def to_text(self) -> str:
        """Plain words: the summary, then the results grouped by trace (or PROV view) and, within one, by rule."""
        lines = [self.summary()]
        views = set(self.views)
        for trace, found in self.by_trace().items():
            lines.append("")
            kind = "PROV view" if trace in views else "trace"
            lines.append(f"{kind} {one_line(trace)}" if trace is not None else "outside any trace")
            by_rule: dict[str, list[Violation]] = {}
            for x in found:
                by_rule.setdefault(x.rule or x.constraint, []).append(x)
            for rule, items in by_rule.items():
                severities = sorted({x.severity for x in items}, key=lambda s: -s.rank)
                lines.append(f"  rule {rule} ({len(items)} {'/'.join(s.value.lower() for s in severities)})")
                for x in items:
                    lines.append(f"    - at {one_line(x.node)}" + (f" <{one_line(x.focus_node)}>" if x.node != x.focus_node else ""))
                    if trace is not None:
                        lines.append(f"      {kind}: {one_line(trace)}")
                    if x.path:
                        lines.append(f"      property: {x.path}")
                    if x.value is not None:
                        lines.append(f"      value: {one_line(x.value)}")
                    lines.append(f"      {x.severity.value.lower()}: {one_line(x.message)} [{x.constraint}]")
        return "\n".join(lines)

    def to_json(self, *, indent: int | None = 2) -> str:
        """The report as JSON: ``conforms``, counts per severity, and the results grouped by trace and by PROV view
        (a result's ``trace`` is the graph it is in: a trace, or a view)."""
        counts = self.counts()
        views = set(self.views)
        groups = self.by_trace()
        doc = {
            "conforms": self.conforms,
            "traces_validated": len(self.traces),
            "prov_views_validated": len(self.views),
            "untraced_graphs_validated": self.untraced_graphs,
            "nothing_validated": self.validated == 0,
            "violation_count": counts[Severity.VIOLATION],
            "warning_count": counts[Severity.WARNING],
            "info_count": counts[Severity.INFO],
            "traces": [
                {"trace": trace, "result_count": len(found), "results": [x.to_dict() for x in found]}
                for trace, found in groups.items() if trace not in views
            ],
            "prov_views": [
                {"view": view, "result_count": len(found), "results": [x.to_dict() for x in found]}
                for view, found in groups.items() if view in views
            ],
        }
        return json.dumps(doc, indent=indent, ensure_ascii=False)

    def to_graph(self) -> rdflib.Graph:
        """The SHACL validation report graph (``sh:ValidationReport``) of the results. ``sh:conforms`` follows SHACL:
        false when there is any result, whatever its severity."""
        graph = rdflib.Graph()
        report = rdflib.BNode()
        graph.add((report, rdflib.RDF.type, SH.ValidationReport))
        graph.add((report, SH.conforms, rdflib.Literal(not self.violations)))
        views = set(self.views)
        for x in self.violations:
            result = rdflib.BNode()
            graph.add((report, SH.result, result))
            graph.add((result, rdflib.RDF.type, SH.ValidationResult))
            graph.add((result, SH.focusNode, _value_term(x.focus_node)))
            if x.path:
                graph.add((result, SH.resultPath, _expand(x.path)))
            if x.value is not None:
                graph.add((result, SH.value, _value_term(x.value)))
            graph.add((result, SH.sourceConstraintComponent, SH[x.constraint]))
            graph.add((result, SH.resultSeverity, SH[x.severity.value]))
            graph.add((result, SH.resultMessage, rdflib.Literal(x.message)))
            if x.rule:
                if x.trace in views:
                    shape = PROV_SHAPES_NAMESPACE + x.rule
                elif x.constraint == "SPARQLConstraintComponent":
                    shape = RULES_NAMESPACE + x.rule
                else:
                    shape = v.DSPY + x.rule
                graph.add((result, SH.sourceShape, rdflib.URIRef(shape)))
        return graph

    def to_turtle(self) -> str:
        """:meth:`to_graph` as Turtle."""
        graph = self.to_graph()
        graph.bind("sh", str(SH))
        for prefix, namespace in v.PREFIXES.items():
            graph.bind(prefix, namespace)
        graph.bind("dspyrule", RULES_NAMESPACE)
        if self.views:
            graph.bind("prov", "http://www.w3.org/ns/prov#")
            graph.bind("dspyprov", PROV_SHAPES_NAMESPACE)
        return graph.serialize(format="turtle")

    def redacted(self, redactor: Redactor | None) -> ValidationReport:
        """The same report with secrets in values and messages replaced as exports replace them (``None``: unchanged).

        Values of JSON literals are redacted as JSON (by field name and by pattern), any other text by pattern."""
        if redactor is None:
            return self
        out = []
        for x in self.violations:
            value = None if x.value is None else redactor.redact_term_text(x.value)
            message = redactor.redact_text(x.message)
            out.append(x if value == x.value and message == x.message else replace(x, value=value, message=message))
        return replace(self, violations=tuple(out))


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def merge_reports(reports: Iterable[ValidationReport]) -> ValidationReport:
    """One report of several (traces and views validated in parts)."""
    violations: list[Violation] = []
    traces: list[str] = []
    views: list[str] = []
    untraced = others = 0
    for report in reports:
        violations += report.violations
        traces += report.traces
        views += report.views
        untraced += report.untraced_graphs
        others += report.other_graphs
    return ValidationReport(
        violations=tuple(violations), traces=tuple(dict.fromkeys(traces)), untraced_graphs=untraced,
        views=tuple(dict.fromkeys(views)), other_graphs=others,
    )


_NSM: rdflib.namespace.NamespaceManager | None = None


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


class _IllTypedLiteralWarnings(logging.Filter):
    """Drops rdflib's warning (with a traceback) that a literal's lexical form is not valid for its datatype."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to convert Literal lexical form")


_ILL_TYPED = _IllTypedLiteralWarnings()


def _value_term(text: str) -> rdflib.term.Node:
    if text.startswith('"'):
        from rdflib.util import from_n3

        # A value a report quotes is often ill-typed (``"abc"^^xsd:integer``): that is what is reported, and rdflib
        # keeps its lexical form; its warning would only be noise on stderr.
        logger = logging.getLogger("rdflib.term")
        logger.addFilter(_ILL_TYPED)
        try:
            term = from_n3(text)
        except Exception:  # an unusual lexical form that rdflib's N3 reader rejects: keep the text
            return rdflib.Literal(text)
        finally:
            logger.removeFilter(_ILL_TYPED)
        # quoted text reads as a literal; from_n3 answers a str or None only for other forms
        return term if isinstance(term, rdflib.term.Node) else rdflib.Literal(text)
    if text.startswith("_:"):
        return rdflib.BNode(text[2:])
    return rdflib.URIRef(text)
