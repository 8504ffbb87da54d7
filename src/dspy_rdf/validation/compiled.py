"""The fast engine: the shapes compiled to SPARQL, run inside pyoxigraph (or on a SPARQL server).

pySHACL (:mod:`dspy_rdf.validation.reference`) stays the reference; this engine gives the same results (same focus
nodes, rules, constraint components and severities; differential tests over every constraint) orders of magnitude
faster, on the store itself, without copying the triples into rdflib.

Design:

- :func:`compile_shapes` reads the shapes of a directory (:func:`dspy_rdf.validation.shapes.load_shapes`: the
  generated shapes, the hand-written rules and the class hierarchy) once per process and turns each shape into a
  few SPARQL SELECT queries that return only results:

  - per property path, one *value* query over the values of that path, with one boolean per constraint of every
    property shape on it (``sh:datatype``, ``sh:nodeKind``, ``sh:class``, ``sh:in``, ``sh:min/maxInclusive``,
    ``sh:min/maxExclusive``, ``sh:pattern``, ``sh:min/maxLength``, and ``sh:maxCount``);
  - per node shape, one *count* query over its focus nodes for every ``sh:minCount`` of its property shapes, and one
    *closed* query for every ``sh:closed true`` shape (every predicate outside the paths and ``sh:ignoredProperties``);
  - each ``sh:sparql`` SELECT constraint as written (``$this`` is the same variable as ``?this`` in SPARQL, so it is
    simply left unbound), wrapped in ``GRAPH ?g``; the focus nodes it returns are then kept only if they are
    targets of the shape. Where the constraint also has a ``dspyrule:storeSelect`` (an equivalent query written for
    a whole store: sub-SELECTs that Oxigraph hash-joins, ``MINUS``; see ``shapes/dspy.rules.ttl``), that runs instead.

  Targets (``sh:targetClass``) and ``sh:class`` use the subclass closure of the hierarchy, written into the queries
  as ``VALUES`` lists. Datatype checks reject ill-formed lexical forms, as pySHACL does.
- every query runs with ``GRAPH ?g`` over all the named graphs of a store (or a batch of them, ``VALUES ?g``), so
  one query execution validates many traces at once and each result row names its trace; nothing joins across
  graphs. :func:`validate_graphs_fast` runs them over a whole embedded store, or over slices of its traces copied
  into memory (bounded memory), in ``workers`` forked processes; on a remote store, through
  :meth:`~dspy_rdf.store.TraceStore.select`.
- numbers beyond what the store computes with (Oxigraph: integers beyond 64 bits, decimals beyond 128 bits with 18
  fraction digits) are valid values it cannot compare or add: the value queries flag the traces that hold one, and
  those traces are validated by the reference engine instead, so the results never depend on the store's number
  range.

A known difference from pySHACL, not reachable with what the writer produces: ``rdfs:subClassOf`` triples inside the
data are not used for targets (pySHACL would use them).
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import rdflib
from rdflib.collection import Collection
from rdflib.namespace import RDF, RDFS, SH, XSD

from dspy_rdf.rdf import vocab as v
from dspy_rdf.store.base import mapped_number, term_from_json
from dspy_rdf.store.http import RemoteTruncatedError
from dspy_rdf.validation.reference import validate_graph_pyshacl
from dspy_rdf.validation.report import Severity, Violation, rule_name
from dspy_rdf.validation.shapes import STORE_SELECT as STORE_SELECT_IRI
from dspy_rdf.validation.shapes import load_shapes, subclass_closure
from dspy_rdf.validation.units import TraceGraphs

__all__ = ["WHOLE_STORE_MAX_TRIPLES", "Check", "CompiledShapes", "compile_shapes", "validate_graphs_fast", "wrap_in_graph"]

G = "?dspyrdf_g"  # the graph variable of every compiled query (a name no hand-written rule uses)
STORE_SELECT = rdflib.URIRef(STORE_SELECT_IRI)
STORE_GRAPH = "graph"  # the graph variable of a store form
_STORE_GRAPH_OPEN = re.compile(r"\bGRAPH\s+\?" + STORE_GRAPH + r"\s*\{")
BEYOND_RANGE = "dspy-rdf:BeyondNativeRange"
"""The pseudo-component of a value-query flag that marks a number the store cannot compute with (not a result)."""

# Shape predicates that do not constrain anything.
_IGNORED = {
    SH.description, SH.order, SH.defaultValue, SH.name, SH.group, SH.message, SH.severity, SH.deactivated,
    RDFS.comment, RDFS.label, RDF.type, SH.property, SH.path, SH.targetClass, SH.closed, SH.ignoredProperties,
    SH.sparql, SH.prefixes, SH.declare,
}
_VALUE_PARAMS = {
    SH.datatype, SH.nodeKind, SH["class"], SH["in"], SH.minInclusive, SH.maxInclusive, SH.minExclusive,
    SH.maxExclusive, SH.pattern, SH.flags, SH.minLength, SH.maxLength,
}
_COUNT_PARAMS = {SH.minCount, SH.maxCount}
_NODE_KIND_TESTS: dict[rdflib.term.Node, str] = {
    SH.IRI: "isIRI(?value)", SH.Literal: "isLiteral(?value)", SH.BlankNode: "isBlank(?value)",
    SH.BlankNodeOrIRI: "(isBlank(?value) || isIRI(?value))",
    SH.BlankNodeOrLiteral: "(isBlank(?value) || isLiteral(?value))",
    SH.IRIOrLiteral: "(isIRI(?value) || isLiteral(?value))",
}


# --- compiled form ---------------------------------------------------------------------------------------------

_FlagUser = tuple[str, frozenset[str], str, str, str]
"""A property shape's use of a flag of a value check: ``(shape, targets, component, severity, message)``."""


@dataclass(frozen=True)
class Check:
    """One compiled SPARQL query and how to read its rows.

    ``kind`` is ``"value"`` (rows ``this, value`` and one boolean ``?c0, ?c1, ...`` per entry of ``flag_users``,
    each the ``(shape, targets, component, severity, message)`` that use that flag), ``"count"`` (rows ``this`` and
    one boolean per entry of ``flags``, each ``(component, path, severity, message)``), ``"closed"`` (rows
    ``this, t, path, value``: candidate triples of focus nodes of closed shapes, decided per shape by ``closed``) or
    ``"sparql"`` (a hand-written ``sh:sparql`` constraint: rows ``this`` and optionally ``value``, ``path``).
    ``text`` is the query with a ``#V#`` marker wherever a batch's
    ``VALUES ?g`` goes; ``store_text`` (sparql checks with a ``dspyrule:storeSelect``) is the query run instead
    over all the graphs, its graph variable ``?graph``.
    """

    kind: str
    shape: str
    text: str
    flags: tuple[tuple[str, str | None, str, str], ...] = ()
    flag_users: tuple[tuple[_FlagUser, ...], ...] = ()
    path: str | None = None
    severity: str = "Violation"
    message: str = ""
    targets: frozenset[str] = frozenset()
    closed: tuple[tuple[str, frozenset[str], frozenset[str], str], ...] = ()
    store_text: str | None = None

    def query(self, graphs: Sequence[str] | None = None) -> str:
        """The SPARQL query over the named graphs ``graphs`` (all named graphs when ``None``)."""
        variable = "?" + self.graph_variable
        values = "" if graphs is None else f"VALUES {variable} {{ " + " ".join(f"<{g}>" for g in graphs) + " } "
        return (self.text if self.store_text is None else self.store_text).replace("#V#", values)

    @property
    def graph_variable(self) -> str:
        """The name of the variable that holds each row's graph in :meth:`query`."""
        return G[1:] if self.store_text is None else STORE_GRAPH


@dataclass(frozen=True)
class CompiledShapes:
    """Every compiled check, the shape files read, and what could not be compiled (empty when all was)."""

    checks: tuple[Check, ...]
    files: tuple[str, ...]
    unsupported: tuple[str, ...] = ()
    prefixes: dict[str, str] = field(default_factory=dict)


# --- SPARQL text helpers ------------------------------------------------------------------------------------------


def _t(term: rdflib.term.Node) -> str:
    """SPARQL text of an rdflib IRI or literal."""
    if isinstance(term, rdflib.URIRef):
        return f"<{term}>"
    if isinstance(term, rdflib.Literal):
        return term.n3()
    raise ValueError(f"cannot write {term!r} into a query")


def _same_term(term: rdflib.term.Node) -> str:
    """``?value`` is ``term``. A string is compared by datatype and text: Virtuoso 7 never finds a stored string
    sameTerm as a string constant of the query."""
    if isinstance(term, rdflib.Literal) and term.language is None and term.datatype in (None, XSD.string):
        return f"(isLiteral(?value) && sameTerm(datatype(?value), <{XSD.string}>) && STR(?value) = {rdflib.Literal(str(term)).n3()})"
    return f"sameTerm(?value, {_t(term)})"


def _values(var: str, iris: Iterable[str]) -> str:
    iris = sorted(iris)
    if len(iris) == 1:
        return ""
    return f"VALUES {var} {{ " + " ".join(f"<{c}>" for c in iris) + " }"


def _typed(var: str, classes: Iterable[str], tvar: str) -> str:
    """``var`` has an rdf:type among ``classes``."""
    classes = sorted(classes)
    if len(classes) == 1:
        return f"{var} a <{classes[0]}> ."
    return f"{var} a {tvar} . {_values(tvar, classes)}"


_NUMERIC_DT = {str(XSD[n]) for n in (
    "integer", "decimal", "double", "float", "int", "long", "short", "byte", "nonNegativeInteger",
    "positiveInteger", "negativeInteger", "nonPositiveInteger", "unsignedInt", "unsignedLong", "unsignedShort",
    "unsignedByte",
)}
_CAST_DT = {str(XSD.dateTime), str(XSD.date), str(XSD.time)}
# The lexical forms of the unbounded XSD number types: a value of such a form beyond the store's native range is valid
# (isNumeric is false for it in Oxigraph).
_UNBOUNDED_LEXICAL = {
    str(XSD.integer): r"^[+-]?[0-9]+$",
    str(XSD.decimal): r"^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)$",
}


def _datatype_ok(dt: str) -> str:
    same = f"sameTerm(datatype(?value), <{dt}>)"
    if dt in _UNBOUNDED_LEXICAL:
        return f'{same} && (isNumeric(?value) || REGEX(STR(?value), "{_UNBOUNDED_LEXICAL[dt]}"))'
    if dt in _NUMERIC_DT:
        return f"{same} && isNumeric(?value)"
    if dt == str(XSD.boolean):
        return f"{same} && (?value = true || ?value = false)"
    if dt in _CAST_DT:
        return f"{same} && <{dt}>(?value) = ?value"
    if dt == str(RDFS.Literal):
        return "isLiteral(?value)"
    return f"isLiteral(?value) && {same}"


def _beyond_range(dt: str) -> str:
    """A valid number of the unbounded type ``dt`` that the store cannot compute with."""
    return f'sameTerm(datatype(?value), <{dt}>) && !isNumeric(?value) && REGEX(STR(?value), "{_UNBOUNDED_LEXICAL[dt]}")'


def _focus_subquery(targets: Iterable[str]) -> str:
    """The focus nodes of a shape in each graph, as a subquery (pyoxigraph joins subqueries by hashing, which is
    far faster here than its nested-loop join of triple patterns)."""
    return f"{{ SELECT DISTINCT {G} ?this WHERE {{ #V# GRAPH {G} {{ {_typed('?this', targets, '?dspyrdf_t')} }} }} }}"


def _value_check(p: str, entries: list[tuple]) -> Check:
    """One query for the value constraints (and ``sh:maxCount``) of every property shape on path ``p``: the values
    of ``p`` are scanned once, whatever the number of shapes that constrain them.

    Identical constraint expressions are evaluated once; each flag ``?cN`` is restricted to the types of the shapes
    that use it. ``flag_users`` holds, per flag, the ``(shape, targets, component, severity, message)`` that use it."""
    extras: dict[tuple, int] = {}
    exprs: dict[str, list[_FlagUser]] = {}
    all_types: set[str] = set()
    for shape, targets, flags, meta, extra in entries:
        all_types |= targets
        rename = {}
        for j, key in enumerate(extra):
            rename[f"?dspyrdf_ok{j})"] = f"?dspyrdf_x{extras.setdefault(key, len(extras))})"
        for expr, (component, path, severity, message) in zip(flags, meta):
            for old, new in rename.items():
                expr = expr.replace(old, new)
            exprs.setdefault(expr, []).append((shape, targets, component, severity, message))
    joins = []
    for key, j in extras.items():
        if key[0] == "class":
            typed = _typed("?dspyrdf_y", key[1], "?dspyrdf_c")
            joins.append(f"OPTIONAL {{ SELECT DISTINCT {G} (?dspyrdf_y AS ?value) (true AS ?dspyrdf_x{j}) WHERE {{ #V# GRAPH {G} {{ {typed} }} }} }}")
        else:
            joins.append(
                f"OPTIONAL {{ SELECT {G} ?this (true AS ?dspyrdf_x{j}) WHERE {{ #V# GRAPH {G} {{ ?this <{p}> ?dspyrdf_v }} }} "
                f"GROUP BY {G} ?this HAVING (COUNT(DISTINCT ?dspyrdf_v) > {key[1]}) }}"
            )
    binds = []
    flag_meta: list[tuple[_FlagUser, ...]] = []
    for i, (expr, users) in enumerate(exprs.items()):
        types = set().union(*(u[1] for u in users))
        guard = "" if types == all_types else "?t IN (" + ", ".join(f"<{t}>" for t in sorted(types)) + ") && "
        binds.append(f"BIND({guard}{expr} AS ?c{i})")
        flag_meta.append(tuple(users))
    cs = " ".join(f"?c{i}" for i in range(len(binds)))
    body = (
        f"{{ SELECT DISTINCT {G} ?this ?t WHERE {{ #V# GRAPH {G} {{ ?this a ?t }} {_values('?t', all_types) or 'VALUES ?t { <' + next(iter(all_types)) + '> }'} }} }}\n"
        f"{{ SELECT {G} ?this ?value WHERE {{ #V# GRAPH {G} {{ ?this <{p}> ?value }} }} }}"
    )
    for n, join in enumerate(joins):
        # each further OPTIONAL joins the result of the ones before as a sub-SELECT: Virtuoso 7 loses the matches
        # of an OPTIONAL on ?value when another OPTIONAL (on ?this) follows it in the same group
        body = (body if n == 0 else f"{{ SELECT * WHERE {{\n{body}\n}} }}") + "\n" + join
    text = (
        f"SELECT DISTINCT {G} ?this ?t ?value {cs} WHERE {{\n"
        + body + "\n" + "\n".join(binds) + "\nFILTER(" + " || ".join(f"?c{i}" for i in range(len(binds))) + ")\n}"
    )
    return Check(kind="value", shape="", path=p, text=text, flag_users=tuple(flag_meta))


def _closed_check(closed_shapes: list[tuple[str, frozenset[str], frozenset[str], str]]) -> Check:
    """One query for every closed shape: each triple of a focus node whose predicate some closed shape of the
    node's type does not allow (one scan of the triples, whatever the number of closed shapes)."""
    allowed_by_type: dict[str, frozenset[str]] = {}
    for _, targets, allowed, _ in closed_shapes:
        for t in targets:
            allowed_by_type[t] = allowed_by_type[t] & allowed if t in allowed_by_type else allowed
    types = " ".join(f"<{t}>" for t in sorted(allowed_by_type))
    pairs = " ".join(f"(<{t}> <{p}> true)" for t, allowed in sorted(allowed_by_type.items()) for p in sorted(allowed))
    # A left join with a table of allowed (type, predicate) pairs, keeping the rows it leaves unmatched, is a hash
    # anti-join: one scan of the triples (MINUS against the table, the same on Oxigraph, is an internal error of
    # Virtuoso 7's compiler, SP031).
    text = (
        f"SELECT {G} ?this ?t ?path ?value WHERE {{\n"
        f"{{ SELECT {G} ?this ?t WHERE {{ #V# GRAPH {G} {{ ?this a ?t }} VALUES ?t {{ {types} }} }} }}\n"
        f"{{ SELECT {G} ?this ?path ?value WHERE {{ #V# GRAPH {G} {{ ?this ?path ?value }} }} }}\n"
        f"OPTIONAL {{ VALUES (?t ?path ?dspyrdf_allowed) {{ {pairs} }} }}\nFILTER(!BOUND(?dspyrdf_allowed))\n}}"
    )
    return Check(kind="closed", shape="", text=text, closed=tuple(closed_shapes), message="Node {this} is closed. It cannot have value: {value}")


def _not(expr: str) -> str:
    return f"!COALESCE({expr}, false)"


# --- compiler ---------------------------------------------------------------------------------------------------


def _local(iri: str) -> str:
    return re.split(r"[#/]", iri)[-1]


def _severity(graph: rdflib.Graph, node) -> str:
    value = graph.value(node, SH.severity)
    return _local(str(value)) if value is not None else "Violation"


def _is_deactivated(graph: rdflib.Graph, node) -> bool:
    value = graph.value(node, SH.deactivated)
    return value is not None and bool(getattr(value, "value", False))


def compile_shapes(directory: str | Path | None = None, *, store_forms: bool = True) -> CompiledShapes:
    """Compile the shapes in ``directory`` (default: the package's shapes) into SPARQL checks; cached per process.

    ``store_forms=False`` runs every ``sh:sparql`` constraint's ``sh:select`` even where it has a
    ``dspyrule:storeSelect`` (the tests compare the two)."""
    return _compile(str(load_shapes(directory).directory), store_forms)


@lru_cache(maxsize=8)
def _compile(directory: str, store_forms: bool = True) -> CompiledShapes:
    shapes = load_shapes(directory)
    graph, classes, files = shapes.graph, shapes.classes, shapes.files
    closure = subclass_closure(classes + graph)
    checks: list[Check] = []
    unsupported: list[str] = []

    node_shapes = set(graph.subjects(RDF.type, SH.NodeShape)) | set(graph.subjects(SH.targetClass, None))
    node_shapes |= set(graph.subjects(SH.property, None)) | set(graph.subjects(SH.sparql, None))
    closed_shapes: list[tuple[str, frozenset[str], frozenset[str], str]] = []  # shape, targets, allowed, severity
    by_path: dict[str, list[tuple]] = {}  # path -> (shape, targets, flag expressions, flag meta, extra joins)
    for shape in sorted(node_shapes, key=str):
        if _is_deactivated(graph, shape):
            continue
        name = str(shape)
        for param in set(graph.predicates(shape, None)):
            if param not in _IGNORED and param not in _VALUE_PARAMS and param not in _COUNT_PARAMS:
                unsupported.append(f"{name}: {param} is not compiled")
        targets: set[str] = set()
        for cls in graph.objects(shape, SH.targetClass):
            targets |= closure(str(cls))
        if not targets:
            if graph.value(shape, SH.path) is None and not any(graph.subjects(SH.property, shape)):
                unsupported.append(f"{name}: no sh:targetClass (other targets are not compiled)")
            continue
        focus = _focus_subquery(targets)
        severity = _severity(graph, shape)

        property_shapes = [ps for ps in graph.objects(shape, SH.property) if not _is_deactivated(graph, ps)]
        if graph.value(shape, SH.path) is not None:  # a property shape with its own targets
            property_shapes.append(shape)
        allowed: set[str] = set()
        min_parts: list[str] = []
        min_meta: list[tuple[str, str | None, str, str]] = []
        for ps in sorted(property_shapes, key=lambda x: str(graph.value(x, SH.path))):
            path = graph.value(ps, SH.path)
            if not isinstance(path, rdflib.URIRef):
                unsupported.append(f"{name}: property shape with a non-IRI sh:path {path!r} is not compiled")
                continue
            allowed.add(str(path))
            p = str(path)
            ps_severity = _severity(graph, ps)
            for param in set(graph.predicates(ps, None)):
                if param not in _IGNORED and param not in _VALUE_PARAMS and param not in _COUNT_PARAMS:
                    unsupported.append(f"{name} {p}: {param} is not compiled")
            flags: list[str] = []
            meta: list[tuple[str, str | None, str, str]] = []
            extra: list[tuple] = []

            def add(component: str, expr: str, message: str) -> None:
                flags.append(expr)
                meta.append((component, p, ps_severity, message))

            dt = graph.value(ps, SH.datatype)
            if dt is not None:
                add("DatatypeConstraintComponent", _not(_datatype_ok(str(dt))), f"Value is not Literal with datatype {_path_text(str(dt))}")
                if str(dt) in _UNBOUNDED_LEXICAL:
                    add(BEYOND_RANGE, _beyond_range(str(dt)), "")
            kind = graph.value(ps, SH.nodeKind)
            if kind is not None:
                test = _NODE_KIND_TESTS[kind]
                add("NodeKindConstraintComponent", _not(test), f"Value is not of Node Kind {kind}")
            for cls in sorted(graph.objects(ps, SH["class"]), key=str):
                extra.append(("class", closure(str(cls))))
                add("ClassConstraintComponent", f"!BOUND(?dspyrdf_ok{len(extra) - 1})", f"Value does not have class {cls}")
            in_list = graph.value(ps, SH["in"])
            if in_list is not None:
                members = list(Collection(graph, in_list))
                test = " || ".join(_same_term(x) for x in members) or "false"
                add("InConstraintComponent", _not(test), f"Value not in list {[str(x) for x in members]}")
            for param, op, comp in (
                (SH.minInclusive, ">=", "MinInclusiveConstraintComponent"),
                (SH.maxInclusive, "<=", "MaxInclusiveConstraintComponent"),
                (SH.minExclusive, ">", "MinExclusiveConstraintComponent"),
                (SH.maxExclusive, "<", "MaxExclusiveConstraintComponent"),
            ):
                for bound in graph.objects(ps, param):
                    add(comp, _not(f"isLiteral(?value) && ?value {op} {_t(bound)}"), f"Value is not {op} {bound}")
            for param, op, comp in ((SH.minLength, ">=", "MinLengthConstraintComponent"), (SH.maxLength, "<=", "MaxLengthConstraintComponent")):
                for bound in graph.objects(ps, param):
                    add(comp, _not(f"!isBlank(?value) && STRLEN(STR(?value)) {op} {int(str(bound))}"), f"Value length is not {op} {bound}")
            for pattern in graph.objects(ps, SH.pattern):
                flags_lit = graph.value(ps, SH.flags)
                more = f", {_t(rdflib.Literal(str(flags_lit)))}" if flags_lit is not None else ""
                add(
                    "PatternConstraintComponent",
                    _not(f"!isBlank(?value) && REGEX(STR(?value), {_t(rdflib.Literal(str(pattern)))}{more})"),
                    f"Value does not match pattern {pattern!r}",
                )
            max_count = graph.value(ps, SH.maxCount)
            if max_count is not None:
                n = int(str(max_count))
                extra.append(("max", n))
                add("MaxCountConstraintComponent", f"BOUND(?dspyrdf_ok{len(extra) - 1})", f"More than {n} values on {{this}}->{{path}}")
            if flags:
                by_path.setdefault(p, []).append((name, frozenset(targets), flags, meta, extra))
            min_count = graph.value(ps, SH.minCount)
            if min_count is not None and int(str(min_count)) > 0:
                n = int(str(min_count))
                j = len(min_parts)
                having = "" if n == 1 else f" HAVING (COUNT(DISTINCT ?dspyrdf_m) >= {n})"
                min_parts.append(
                    f"OPTIONAL {{ SELECT {G} ?this (true AS ?dspyrdf_has{j}) WHERE {{ #V# GRAPH {G} {{ ?this <{p}> ?dspyrdf_m }} }} "
                    f"GROUP BY {G} ?this{having} }}"
                )
                min_meta.append(("MinCountConstraintComponent", p, ps_severity, f"Less than {n} values on {{this}}->{{path}}"))
            checks.extend(_sparql_checks(graph, ps, name, targets, p, store_forms, unsupported))
        if min_parts:
            binds = "\n".join(f"BIND(!BOUND(?dspyrdf_has{i}) AS ?c{i})" for i in range(len(min_parts)))
            cs = " ".join(f"?c{i}" for i in range(len(min_parts)))
            text = (
                f"SELECT DISTINCT {G} ?this {cs} WHERE {{\n{focus}\n" + "\n".join(min_parts)
                + f"\n{binds}\nFILTER(" + " || ".join(f"?c{i}" for i in range(len(min_parts))) + ")\n}"
            )
            checks.append(Check(kind="count", shape=name, text=text, flags=tuple(min_meta)))
        closed = graph.value(shape, SH.closed)
        if isinstance(closed, rdflib.Literal) and bool(closed.value):
            ignored = graph.value(shape, SH.ignoredProperties)
            if ignored is not None:
                allowed |= {str(x) for x in Collection(graph, ignored)}
            closed_shapes.append((name, frozenset(targets), frozenset(allowed), severity))
        if graph.value(shape, SH.path) is None:
            checks.extend(_sparql_checks(graph, shape, name, targets, None, store_forms, unsupported))
    for p, entries in sorted(by_path.items()):
        checks.append(_value_check(p, entries))
    if closed_shapes:
        checks.append(_closed_check(closed_shapes))
    prefixes = {p: str(ns) for p, ns in graph.namespaces()}
    return CompiledShapes(checks=tuple(checks), files=tuple(str(p) for p in files), unsupported=tuple(unsupported), prefixes=prefixes)


# --- sh:sparql ------------------------------------------------------------------------------------------------------


def _prefix_declarations(graph: rdflib.Graph, constraint) -> str:
    out = []
    for holder in graph.objects(constraint, SH.prefixes):
        for decl in graph.objects(holder, SH.declare):
            prefix = graph.value(decl, SH.prefix)
            namespace = graph.value(decl, SH.namespace)
            if prefix is not None and namespace is not None:
                out.append(f"PREFIX {prefix}: <{namespace}>")
    return "\n".join(out)


_TOKEN = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^\'\\]|\\.|\'(?!\'\'))*\'\'\'|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|<[^<>"{}|^`\\\s]*>|#[^\n]*|[{}]|\S', re.S)


def wrap_in_graph(query: str) -> str:
    """``query`` (a SELECT) with its WHERE group wrapped in ``GRAPH ?g``, ``?g`` projected and grouped on, and a
    ``#V# `` marker where a batch's ``VALUES ?g`` goes."""
    depth = 0
    start = end = None
    select_at = None
    for m in _TOKEN.finditer(query):
        tok = m.group(0)
        if select_at is None and tok[0] in "sS" and query[m.start():m.start() + 6].upper() == "SELECT":
            select_at = m.start()
        if tok == "{":
            if depth == 0 and start is None:
                start = m.start()
            depth += 1
        elif tok == "}":
            depth -= 1
            if depth == 0 and start is not None and end is None:
                end = m.start()
    if select_at is None or start is None or end is None:
        raise ValueError("cannot find the WHERE clause of a sh:sparql query")
    head = query[:start]
    proj = re.match(r"(?is)(\s*SELECT\s+(?:DISTINCT\s+|REDUCED\s+)?)(.*)", head[select_at:])
    assert proj is not None
    if proj.group(2).lstrip().startswith("*"):
        new_head = head
    else:
        new_head = head[:select_at] + proj.group(1) + G + " " + proj.group(2)
    tail = query[end + 1:]
    tail = re.sub(r"(?i)\bGROUP\s+BY\b", f"GROUP BY {G}", tail, count=1)
    return f"{new_head}{{\n#V# GRAPH {G} {{\n{query[start + 1:end]}\n}}\n}}{tail}"


def _sparql_checks(
    graph: rdflib.Graph, shape, name: str, targets: set[str], path: str | None, store_forms: bool, unsupported: list[str]
) -> list[Check]:
    out = []
    for constraint in graph.objects(shape, SH.sparql):
        if _is_deactivated(graph, constraint):
            continue
        select = graph.value(constraint, SH.select)
        if select is None:
            continue
        prefixes = _prefix_declarations(graph, constraint) + "\n"
        store_select = graph.value(constraint, STORE_SELECT) if store_forms else None
        store_text = None
        if store_select is not None:
            store_text = prefixes + _with_path(str(store_select), path)
            if not re.search(r"(?is)\bSELECT\s+(?:DISTINCT\s+|REDUCED\s+)?[^{]*\?" + STORE_GRAPH + r"\b", store_text):
                unsupported.append(f"{name}: its dspyrule:storeSelect does not project ?{STORE_GRAPH} (the graph of each row)")
                store_text = None
            else:
                # a batch's VALUES goes in front of every GRAPH, so that each scan reads only the batch's graphs
                store_text = _STORE_GRAPH_OPEN.sub(lambda m: "#V# " + m.group(0), store_text)
        message = graph.value(constraint, SH.message) or graph.value(shape, SH.message)
        out.append(Check(
            kind="sparql", shape=name, text=wrap_in_graph(prefixes + _with_path(str(select), path)), path=path,
            severity=_severity(graph, constraint) if graph.value(constraint, SH.severity) is not None else _severity(graph, shape),
            message=str(message) if message is not None else "",
            targets=frozenset(targets), store_text=store_text,
        ))
    return out


def _with_path(text: str, path: str | None) -> str:
    return text if path is None else re.sub(r"\$PATH\b", f"<{path}>", text)


# --- running --------------------------------------------------------------------------------------------------------


_PREFIXES = dict(v.PREFIXES)


@lru_cache(maxsize=4096)
def _path_text(iri: str) -> str:
    """A path as the reference engine reports it (``dspy:slot``, ``rdfs:label``, ...)."""
    best = None
    for prefix, namespace in _PREFIXES.items():
        if iri.startswith(namespace) and (best is None or len(namespace) > len(best[1])):
            local = iri[len(namespace):]
            if local and re.fullmatch(r"[A-Za-z_][\w.-]*", local) and not local.endswith("."):
                best = (prefix, namespace)
    if best is None:
        # rdflib's default bindings (rdf, rdfs, xsd, ...), which the reference engine's graphs have too
        for prefix, namespace in rdflib.Graph().namespace_manager.namespaces():
            if iri.startswith(str(namespace)) and iri[len(str(namespace)):] and prefix:
                return f"{prefix}:{iri[len(str(namespace)):]}"
        return f"<{iri}>"
    return f"{best[0]}:{iri[len(best[1]):]}"


def _term_text(term: ox.NamedNode | ox.BlankNode | ox.Literal | None) -> str | None:
    if term is None:
        return None
    if isinstance(term, ox.Literal):
        return str(term)  # N-Triples, as the reference engine writes values (rdflib's n3())
    return term.value


def _truthy(term: ox.Literal | None) -> bool:
    return term is not None and term.value in ("true", "1")


Row = tuple[str, str, str | None, str | None, str, str, str, str]
"""A result as text: ``(graph, focus node, path IRI, value, component, severity, message, shape)``."""


class Runner:
    """Runs compiled checks over batches of graphs, against a pyoxigraph store or a remote store."""

    def __init__(self, compiled: CompiledShapes, *, oxigraph: ox.Store | None = None, remote: Any = None) -> None:
        self.compiled = compiled
        self.oxigraph = oxigraph
        self.remote = remote

    def rows(self, query: str) -> Iterable[dict[str, Any]]:
        if self.oxigraph is not None:
            result = self.oxigraph.query(query)
            assert isinstance(result, ox.QuerySolutions)  # every compiled query is a SELECT
            names = [var.value for var in result.variables]
            for solution in result:
                yield {name: solution[name] for name in names}
        else:
            for b in self.remote.select(query)["results"]["bindings"]:
                yield {name: term_from_json(term) for name, term in b.items()}

    def types_of(self, graph: str, node: ox.NamedNode | ox.BlankNode) -> set[str]:
        if self.oxigraph is not None:
            quads = self.oxigraph.quads_for_pattern(node, ox.NamedNode(v.RDF_TYPE), None, ox.NamedNode(graph))
            return {q.object.value for q in quads if not isinstance(q.object, ox.Triple)}  # a quoted triple is no class
        if not isinstance(node, ox.NamedNode):
            return set()
        rows = self.remote.select(f"SELECT ?t WHERE {{ GRAPH <{graph}> {{ <{node.value}> a ?t }} }}")["results"]["bindings"]
        return {r["t"]["value"] for r in rows}

    def _retyped_by_server(self, path: str, value: Any) -> bool:
        """Whether a remote server changed the datatype of an integral number the mapping wrote (Virtuoso 7 reads an
        integer beyond 32 bits as a decimal): its datatype check then reports the server, not the data."""
        return self.remote is not None and self.remote.retypes_numbers and mapped_number(ox.NamedNode(path), value) != value

    def run_batch(self, graphs: Sequence[str] | None, checks: Iterable[int] | None = None) -> list[Row]:
        """Results in one batch of graphs (all graphs when ``None``) of the checks of the given indexes (all when
        ``None``). A row whose component is :data:`BEYOND_RANGE` marks a graph holding a number the store cannot
        compute with."""
        out: list[tuple] = []
        for index in range(len(self.compiled.checks)) if checks is None else checks:
            out.extend(self._rows_in_parts(self.compiled.checks[index], graphs))
        return [(g, focus.value, path, _term_text(value), *rest) for g, focus, path, value, *rest in out]

    def _rows_in_parts(self, check: Check, graphs: Sequence[str] | None) -> list[tuple]:
        """The results of ``check`` in ``graphs``; where a server cuts the answer at its row cap, the graphs are
        checked in halves (the results of one graph beyond the cap are an error that says so)."""
        try:
            return self._rows(check, graphs)
        except RemoteTruncatedError:  # only a remote store cuts answers
            names = list(graphs) if graphs is not None else self.remote.trace_iris()
            if len(names) <= 1:
                raise
            half = len(names) // 2
            return self._rows_in_parts(check, names[:half]) + self._rows_in_parts(check, names[half:])

    def _rows(self, check: Check, graphs: Sequence[str] | None) -> list[tuple]:
        """The results of one check in ``graphs`` (all graphs when ``None``), as (graph, focus, path, value term, ...)."""
        out: list[tuple] = []
        query = check.query(graphs)
        if check.kind == "closed":
            for row in self.rows(query):
                t, path = row["t"].value, row["path"].value
                for shape, targets, allowed, severity in check.closed:
                    if t in targets and path not in allowed:
                        out.append((row[G[1:]].value, row["this"], path, row["value"], "ClosedConstraintComponent", severity, check.message, shape))
        elif check.kind == "value":
            value_path = check.path
            assert value_path is not None  # a value check is of one path
            seen_count: set[tuple] = set()
            for row in self.rows(query):
                g, this, t = row[G[1:]].value, row["this"], row["t"].value
                for i, users in enumerate(check.flag_users):
                    if not _truthy(row.get(f"c{i}")):
                        continue
                    for shape, targets, component, severity, message in users:
                        if t not in targets:
                            continue
                        if component == "MaxCountConstraintComponent":
                            key = (g, this, shape)
                            if key in seen_count:
                                continue
                            seen_count.add(key)
                            out.append((g, this, check.path, None, component, severity, message, shape))
                        elif component == "DatatypeConstraintComponent" and self._retyped_by_server(value_path, row["value"]):
                            continue
                        else:
                            out.append((g, this, check.path, row["value"], component, severity, message, shape))
        elif check.kind == "count":
            for row in self.rows(query):
                g = row[G[1:]].value
                for i, (component, path, severity, message) in enumerate(check.flags):
                    if _truthy(row.get(f"c{i}")):
                        out.append((g, row["this"], path, None, component, severity, message, check.shape))
        else:  # sparql
            for row in self.rows(query):
                g = row.get(check.graph_variable)
                this = row.get("this")
                if g is None or this is None:
                    continue
                if not (self.types_of(g.value, this) & check.targets):
                    continue
                path_term = row.get("path")
                path = path_term.value if isinstance(path_term, ox.NamedNode) else check.path
                value = row.get("value")
                if value is None and check.path is None:
                    value = this
                message = check.message
                for name, term in row.items():
                    if term is not None:
                        message = message.replace("{?" + name + "}", term.value).replace("{$" + name + "}", term.value)
                out.append((g.value, this, path, value, "SPARQLConstraintComponent", check.severity, message, check.shape))
        return out


def _violations(rows: Iterable[Row], graphs: TraceGraphs) -> list[Violation]:
    seen = set()
    out = []
    for graph, focus, path, value, component, severity, message, shape in rows:
        key = (graph, focus, path, value, component, shape)
        if key in seen:
            continue
        seen.add(key)
        path_text = _path_text(path) if path else None
        message = message.replace("{this}", f"<{focus}>").replace("{path}", path_text or "").replace("{value}", value or "")
        out.append(Violation(
            focus_node=focus, path=path_text, value=value, constraint=component, message=message,
            severity=Severity(severity), trace=graphs.label(graph), rule=rule_name(shape),
        ))
    return out


# --- worker processes -------------------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _die_with(parent: int) -> None:
    """End this process when ``parent`` dies, however it dies (``kill -9`` included): Linux's parent-death signal,
    and a check that the parent did not die before it was set. Elsewhere the worker ends when its pipe closes."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError, TypeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def _worker_init(path: str, shapes: str | None, parent: int) -> None:
    # A terminal sends Ctrl-C to every process of the group: the parent decides what it means (and stops the workers),
    # a worker only ends when it is told to, quietly. The signals were blocked when it was forked (see _worker_pool).
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    _WORKER["store"] = ox.Store.read_only(path)
    _WORKER["compiled"] = compile_shapes(shapes)


def _worker_run(graphs: list[str] | None, checks: list[int]) -> list[Row]:
    return Runner(_WORKER["compiled"], oxigraph=_WORKER["store"]).run_batch(graphs, checks)


def _worker_slice(names: list[str]) -> list[Row]:
    return _run_slice(_WORKER["compiled"], _WORKER["store"], names)


def _run_slice(compiled: CompiledShapes, source: ox.Store, names: Sequence[str]) -> list[Row]:
    """Results in the named graphs ``names`` of ``source``, copied into an in-memory store and validated there."""
    copy = ox.Store()
    for name in names:
        copy.extend(source.quads_for_pattern(None, None, None, ox.NamedNode(name)))
    return Runner(compiled, oxigraph=copy).run_batch(None)


_PARALLEL_MIN_TRACES = 500  # below this, starting worker processes costs more than it saves
WHOLE_STORE_MAX_TRIPLES = 10_000_000
"""Above this many triples, :func:`validate_graphs_fast` validates an embedded store in slices by default
(whole-store queries peaked at ~0.9 GB per worker on 7.6 M triples)."""


@contextmanager
def _worker_pool(path: Path, workers: int, shapes: str | Path | None) -> Iterator[Executor]:
    """``workers`` forked processes that each open the store at ``path`` read-only. They ignore Ctrl-C: when the
    block ends early (an error, a KeyboardInterrupt), the workers are killed rather than waited for and the work not
    started is dropped, so that a second Ctrl-C never finds this process waiting on a worker."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    before = set(multiprocessing.active_children())
    executor = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=_worker_init,
        initargs=(str(path), None if shapes is None else str(shapes), os.getpid()),
    )
    try:
        # The workers are forked by the first submit: with SIGINT and SIGTERM blocked, so that neither reaches a
        # worker before it has chosen to ignore Ctrl-C (the executor's own thread, started there, keeps them blocked,
        # which leaves them to the main thread).
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            executor.submit(int)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        yield executor
    except BaseException:
        for process in set(multiprocessing.active_children()) - before:
            process.kill()
        # The executor's thread sees its workers gone and ends at once: waiting for it here, not at exit, where
        # Python would wake it while it closes its pipe ("Bad file descriptor").
        executor.shutdown(wait=True, cancel_futures=True)
        raise
    executor.shutdown()


# --- validating ---------------------------------------------------------------------------------------------------------


def validate_graphs_fast(
    graphs: TraceGraphs,
    *,
    shapes: str | Path | None = None,
    progress: Callable[[int], None] | None = None,
    workers: int = 2,
    batch_size: int = 1000,
    slices: bool | None = None,
) -> list[Violation]:
    """Validate the graphs of ``graphs`` with the compiled shapes; ``progress`` is called in graph units, its calls
    adding up to the number of graphs.

    Two ways to run the compiled queries on an embedded store on disk, both with ``workers`` forked processes when
    the store was opened read-only (each opens it read-only too; pyoxigraph holds the GIL while it evaluates, so
    threads would not help; a store open for writing is validated in this process):

    - *whole store* (``slices=False``): each compiled query runs once over every graph (``GRAPH ?g``) and the
      workers share out the queries; the fastest, but the hash joins hold whole-store scans, so memory grows with
      the store (167 MB per worker at 10k LM calls, 880 MB at 100k). ``progress`` advances as the queries
      complete, each by its share of the graphs.
    - *slices* (``slices=True``): the graphs of ``batch_size`` traces at a time are copied into an in-memory store
      and every compiled query runs there; memory is bounded by one slice, whatever the size of the store (peak
      per worker 166 MB at 10k LM calls, 408 MB at 100k, mostly RocksDB's blocks of the open store), at about half
      the speed. ``progress`` advances by each slice.

    The default (``None``) slices when the store holds more than :data:`WHOLE_STORE_MAX_TRIPLES` triples or when
    some graphs were selected (copying a few graphs beats restricting every scan to them), and runs the whole store
    otherwise. A store in memory runs its queries directly; a remote store runs them on the server,
    through :meth:`~dspy_rdf.store.TraceStore.select`, one at a time (over all graphs, or ``batch_size`` graphs per
    run, ``VALUES ?g``, for a selection).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    compiled = compile_shapes(shapes)
    names = list(graphs.names)
    wanted = set(names)
    oxigraph = graphs.oxigraph
    pool = None
    path = graphs.path
    # Worker processes open the store read-only, which pyoxigraph says is undefined while another instance writes to
    # it (RocksDB compactions delete files a reader is about to open): only a store opened read-only is shared.
    if workers > 1 and path is not None and oxigraph is not None and not graphs.writable and len(names) >= _PARALLEL_MIN_TRACES:
        pool = partial(_worker_pool, path, workers, shapes)
    if slices is None:
        slices = not graphs.complete or (path is not None and oxigraph is not None and len(oxigraph) > WHOLE_STORE_MAX_TRIPLES)
    if oxigraph is not None and slices:
        rows = _validate_slices(compiled, oxigraph, names, progress, batch_size, pool)
    else:
        selection = None if graphs.complete or oxigraph is not None else names
        rows = _validate_queries(compiled, graphs, selection, len(names), progress, batch_size, pool)
    beyond = {row[0] for row in rows if row[4] == BEYOND_RANGE}
    kept = [row for row in rows if row[0] in wanted and row[0] not in beyond]
    found = _violations(kept, graphs)
    if beyond & wanted:
        # numbers beyond the store's range: these traces go to the reference engine (see the module docstring)
        reference = load_shapes(shapes)
        for name in sorted(beyond & wanted):
            triples = ((q.subject, q.predicate, q.object) for q in graphs.quads(name))
            found += validate_graph_pyshacl(triples, trace=graphs.label(name), shapes=reference)
    return found


def _validate_slices(compiled: CompiledShapes, oxigraph: ox.Store, names: list[str], progress, batch_size: int, pool) -> list[Row]:
    slices = [names[i:i + batch_size] for i in range(0, len(names), batch_size)]
    rows: list[Row] = []
    with pool() if pool is not None else nullcontext() as executor:
        results = executor.map(_worker_slice, slices) if executor is not None else (_run_slice(compiled, oxigraph, x) for x in slices)
        for names_done, found in zip(slices, results):
            rows.extend(found)
            if progress is not None:
                progress(len(names_done))
    return rows


def _validate_queries(
    compiled: CompiledShapes, graphs: TraceGraphs, selection: list[str] | None, total: int, progress, batch_size: int, pool
) -> list[Row]:
    batches: list[list[str] | None] = [None] if selection is None else [selection[i:i + batch_size] for i in range(0, len(selection), batch_size)]
    sizes = [total] if selection is None else [len(b) for b in batches]  # type: ignore[arg-type]
    n_checks = len(compiled.checks)
    rows: list[Row] = []
    if pool is not None:
        # the heaviest queries first, so that the workers finish together
        order = sorted(range(n_checks), key=lambda i: (compiled.checks[i].kind != "closed", compiled.checks[i].kind != "value"))
        with pool() as executor:
            for batch, size in zip(batches, sizes):
                futures = [executor.submit(_worker_run, batch, [i]) for i in order]
                for future, share in zip(futures, _shares(batch, size, n_checks)):
                    rows.extend(future.result())
                    if progress is not None and share:
                        progress(share)
        return rows
    runner = Runner(compiled, oxigraph=graphs.oxigraph, remote=graphs.remote)
    for batch, size in zip(batches, sizes):
        for index, share in enumerate(_shares(batch, size, n_checks)):
            rows.extend(runner.run_batch(batch, [index]))
            if progress is not None and share:
                progress(share)
    return rows


def _shares(batch: Sequence[str] | None, size: int, checks: int) -> list[int]:
    """How far each of ``checks`` completed checks advances a progress bar counted in graphs: a batch of graphs is
    done when its last check is, the whole store (``batch`` None) advances by an even share per check."""
    if batch is not None:
        return [0] * (checks - 1) + [size] if checks else []
    return [size * (i + 1) // checks - size * i // checks for i in range(checks)]
