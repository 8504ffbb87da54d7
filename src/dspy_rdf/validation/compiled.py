"""The fast engine's compiler: the shapes turned into SPARQL checks (:class:`Check`), once per process.

pySHACL (:mod:`dspy_rdf.validation.reference`) stays the reference; the fast engine gives the same results (same
focus nodes, rules, constraint components and severities; differential tests over every constraint) orders of
magnitude faster, on the store itself, without copying the triples into rdflib. The checks are run by
:mod:`dspy_rdf.validation.running`, over a whole store or slices of it by :mod:`dspy_rdf.validation.fast`.

:func:`compile_shapes` reads the shapes of a directory (:func:`dspy_rdf.validation.shapes.load_shapes`: the generated
shapes, the hand-written rules and the class hierarchy) and turns each shape into a few SPARQL SELECT queries that
return only results:

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
as ``VALUES`` lists. Datatype checks reject ill-formed lexical forms, as pySHACL does. Every query runs with
``GRAPH ?g`` over all the named graphs of a store (or a batch of them, ``VALUES ?g``), so one query execution
validates many traces at once and each result row names its trace; nothing joins across graphs. A number beyond
what the store computes with (Oxigraph: integers beyond 64 bits, decimals beyond 128 bits with 18 fraction digits)
is a valid value it cannot compare or add: the value queries flag it (:data:`BEYOND_RANGE`).

A known difference from pySHACL, not reachable with what the writer produces: ``rdfs:subClassOf`` triples inside the
data are not used for targets (pySHACL would use them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import rdflib
from rdflib.collection import Collection
from rdflib.namespace import RDF, RDFS, SH, XSD

from dspy_rdf.rdf import vocab as v
from dspy_rdf.validation.shapes import STORE_SELECT as STORE_SELECT_IRI
from dspy_rdf.validation.shapes import load_shapes, subclass_closure
from dspy_rdf.validation.xsd import DATE_LEXICAL, DATE_TIME_LEXICAL

__all__ = ["BEYOND_RANGE", "Check", "CompiledShapes", "G", "compile_shapes", "path_text", "wrap_in_graph"]

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


_PathEntry = tuple[str, frozenset[str], list[str], list[tuple[str, str | None, str, str]], list[tuple]]
"""A property shape's part of the value check of its path: ``(shape, targets, flag expressions, flag meta, extra
joins)``, each flag's meta ``(component, path, severity, message)``."""
_ClosedShape = tuple[str, frozenset[str], frozenset[str], str]
"""A closed shape: ``(shape, targets, allowed predicates, severity)``."""


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


_SUMMABLE_LIMIT = 2**62
"""Integers the store adds exactly: the rules add two counts (``UsageTotal``), and two integers below 2^62 in magnitude
never leave Oxigraph's 64 bits, where a sum that does is no value at all (so no violation)."""


def _beyond_range(dt: str) -> str:
    """A valid number of the unbounded type ``dt`` that the store cannot compute with, or (an integer) one it could
    not add exactly to another."""
    beyond = f'!isNumeric(?value) && REGEX(STR(?value), "{_UNBOUNDED_LEXICAL[dt]}")'
    if dt == str(XSD.integer):
        beyond = f"({beyond}) || (isNumeric(?value) && ABS(?value) >= {_SUMMABLE_LIMIT})"
    return f"sameTerm(datatype(?value), <{dt}>) && ({beyond})"


# The lexical forms of the date and time types, which XSD does not bound (any year, any fraction of a second): a value
# of such a form the store cannot read (Oxigraph: more than 18 fraction digits, years beyond about 10^11) is valid.
_DATE_LEXICAL = {str(XSD.dateTime): DATE_TIME_LEXICAL, str(XSD.date): DATE_LEXICAL}


def _date_beyond_range(dt: str) -> str:
    """A value of the date or time type ``dt`` that the store refuses and XSD's grammar takes (one whose day is past
    its month's end too: the reference engine then reports it)."""
    return f'sameTerm(datatype(?value), <{dt}>) && {_not(_datatype_ok(dt))} && REGEX(STR(?value), "^{_DATE_LEXICAL[dt]}$")'


def _focus_subquery(targets: Iterable[str]) -> str:
    """The focus nodes of a shape in each graph, as a subquery (pyoxigraph joins subqueries by hashing, which is
    far faster here than its nested-loop join of triple patterns)."""
    return f"{{ SELECT DISTINCT {G} ?this WHERE {{ #V# GRAPH {G} {{ {_typed('?this', targets, '?dspyrdf_t')} }} }} }}"


def _value_check(p: str, entries: list[_PathEntry]) -> Check:
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
    joins = [_extra_join(p, key, j) for key, j in extras.items()]
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


def _extra_join(p: str, key: tuple, j: int) -> str:
    """The OPTIONAL of a value check that binds ``?dspyrdf_xJ``: on each value of one of the classes ``key[1]``
    (``key[0]`` ``"class"``: ``sh:class``), else on each focus node with more than ``key[1]`` values of ``p``
    (``sh:maxCount``)."""
    if key[0] == "class":
        typed = _typed("?dspyrdf_y", key[1], "?dspyrdf_c")
        return f"OPTIONAL {{ SELECT DISTINCT {G} (?dspyrdf_y AS ?value) (true AS ?dspyrdf_x{j}) WHERE {{ #V# GRAPH {G} {{ {typed} }} }} }}"
    return (
        f"OPTIONAL {{ SELECT {G} ?this (true AS ?dspyrdf_x{j}) WHERE {{ #V# GRAPH {G} {{ ?this <{p}> ?dspyrdf_v }} }} "
        f"GROUP BY {G} ?this HAVING (COUNT(DISTINCT ?dspyrdf_v) > {key[1]}) }}"
    )


def _count_check(shape: str, targets: Iterable[str], min_counts: list[tuple[str, int, str]]) -> Check:
    """One query over the focus nodes of ``shape`` for every ``sh:minCount`` of its property shapes, each
    ``(path, minimum, severity)``."""
    parts = []
    meta: list[tuple[str, str | None, str, str]] = []
    for j, (p, n, severity) in enumerate(min_counts):
        having = "" if n == 1 else f" HAVING (COUNT(DISTINCT ?dspyrdf_m) >= {n})"
        parts.append(
            f"OPTIONAL {{ SELECT {G} ?this (true AS ?dspyrdf_has{j}) WHERE {{ #V# GRAPH {G} {{ ?this <{p}> ?dspyrdf_m }} }} "
            f"GROUP BY {G} ?this{having} }}"
        )
        meta.append(("MinCountConstraintComponent", p, severity, f"Less than {n} values on {{this}}->{{path}}"))
    binds = "\n".join(f"BIND(!BOUND(?dspyrdf_has{i}) AS ?c{i})" for i in range(len(parts)))
    cs = " ".join(f"?c{i}" for i in range(len(parts)))
    text = (
        f"SELECT DISTINCT {G} ?this {cs} WHERE {{\n{_focus_subquery(targets)}\n" + "\n".join(parts)
        + f"\n{binds}\nFILTER(" + " || ".join(f"?c{i}" for i in range(len(parts))) + ")\n}"
    )
    return Check(kind="count", shape=shape, text=text, flags=tuple(meta))


def _closed_check(closed_shapes: list[_ClosedShape]) -> Check:
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


_PREFIXES = dict(v.PREFIXES)


@lru_cache(maxsize=4096)
def path_text(iri: str) -> str:
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
    graph = shapes.graph
    compiler = _Compiler(graph, subclass_closure(shapes.classes + graph), store_forms)
    for shape in sorted(_node_shapes(graph), key=str):
        compiler.node_shape(shape)
    # the checks of one shape first, in the order of the shapes; then those shared by all: per path, closed shapes
    checks = compiler.checks + [_value_check(p, entries) for p, entries in sorted(compiler.by_path.items())]
    if compiler.closed_shapes:
        checks.append(_closed_check(compiler.closed_shapes))
    prefixes = {p: str(ns) for p, ns in graph.namespaces()}
    files = tuple(str(p) for p in shapes.files)
    return CompiledShapes(checks=tuple(checks), files=files, unsupported=tuple(compiler.unsupported), prefixes=prefixes)


def _node_shapes(graph: rdflib.Graph) -> set:
    """Every shape that can have focus nodes of its own: node shapes, and property shapes with targets."""
    node_shapes = set(graph.subjects(RDF.type, SH.NodeShape)) | set(graph.subjects(SH.targetClass, None))
    return node_shapes | set(graph.subjects(SH.property, None)) | set(graph.subjects(SH.sparql, None))


class _Compiler:
    """One compilation under way: the shapes graph and class hierarchy it reads, and what it has compiled so far.

    Each node shape adds its own checks (count, ``sh:sparql``) to ``checks`` at once; the constraints that share a
    query with other shapes wait in ``by_path`` (value checks) and ``closed_shapes`` until every shape is read."""

    def __init__(self, graph: rdflib.Graph, closure: Callable[[str], frozenset[str]], store_forms: bool) -> None:
        self.graph = graph
        self.closure = closure
        self.store_forms = store_forms
        self.checks: list[Check] = []
        self.unsupported: list[str] = []
        self.by_path: dict[str, list[_PathEntry]] = {}
        self.closed_shapes: list[_ClosedShape] = []

    def node_shape(self, shape) -> None:
        """Compile one node shape (or property shape with targets of its own) and its property shapes."""
        if _is_deactivated(self.graph, shape):
            return
        name = str(shape)
        self._note_unsupported(shape, name)
        targets = self._targets(shape, name)
        if not targets:
            return
        allowed: set[str] = set()
        min_counts: list[tuple[str, int, str]] = []
        for ps, p in self._property_shapes(shape, name):
            allowed.add(p)
            severity = _severity(self.graph, ps)
            self._note_unsupported(ps, f"{name} {p}")
            self._value_constraints(ps, p, name, targets, severity)
            min_count = _min_count(self.graph, ps)
            if min_count > 0:
                min_counts.append((p, min_count, severity))
            self.checks.extend(_sparql_checks(self.graph, ps, name, targets, p, self.store_forms, self.unsupported))
        if min_counts:
            self.checks.append(_count_check(name, targets, min_counts))
        self._closed(shape, name, targets, allowed)
        if self.graph.value(shape, SH.path) is None:
            self.checks.extend(_sparql_checks(self.graph, shape, name, targets, None, self.store_forms, self.unsupported))

    def _note_unsupported(self, node, label: str) -> None:
        for param in set(self.graph.predicates(node, None)):
            if param not in _IGNORED and param not in _VALUE_PARAMS and param not in _COUNT_PARAMS:
                self.unsupported.append(f"{label}: {param} is not compiled")

    def _value_constraints(self, ps, p: str, name: str, targets: set[str], severity: str) -> None:
        """Add the value constraints of property shape ``ps`` of ``name`` to the value check of its path ``p``."""
        flags, extra = _value_flags(self.graph, ps, self.closure)
        if not flags:
            return
        meta: list[tuple[str, str | None, str, str]] = [(component, p, severity, message) for component, _, message in flags]
        self.by_path.setdefault(p, []).append((name, frozenset(targets), [expr for _, expr, _ in flags], meta, extra))

    def _targets(self, shape, name: str) -> set[str]:
        """The classes whose instances are the focus nodes of ``shape``: its ``sh:targetClass`` and their subclasses."""
        targets: set[str] = set()
        for cls in self.graph.objects(shape, SH.targetClass):
            targets |= self.closure(str(cls))
        # a property shape without targets is compiled as part of the node shapes that hold it
        if not targets and self.graph.value(shape, SH.path) is None and not any(self.graph.subjects(SH.property, shape)):
            self.unsupported.append(f"{name}: no sh:targetClass (other targets are not compiled)")
        return targets

    def _property_shapes(self, shape, name: str) -> Iterator[tuple[rdflib.term.Node, str]]:
        """The active property shapes of ``shape`` (itself too when it has a path) with their paths, by path."""
        graph = self.graph
        property_shapes = [ps for ps in graph.objects(shape, SH.property) if not _is_deactivated(graph, ps)]
        if graph.value(shape, SH.path) is not None:  # a property shape with its own targets
            property_shapes.append(shape)
        for ps in sorted(property_shapes, key=lambda x: str(graph.value(x, SH.path))):
            path = graph.value(ps, SH.path)
            if not isinstance(path, rdflib.URIRef):
                self.unsupported.append(f"{name}: property shape with a non-IRI sh:path {path!r} is not compiled")
                continue
            yield ps, str(path)

    def _closed(self, shape, name: str, targets: set[str], paths: set[str]) -> None:
        """Note ``shape`` for the closed check if it is ``sh:closed``: only ``paths`` and its ignored properties allowed."""
        closed = self.graph.value(shape, SH.closed)
        if not (isinstance(closed, rdflib.Literal) and bool(closed.value)):
            return
        allowed = set(paths)
        ignored = self.graph.value(shape, SH.ignoredProperties)
        if ignored is not None:
            allowed |= {str(x) for x in Collection(self.graph, ignored)}
        self.closed_shapes.append((name, frozenset(targets), frozenset(allowed), _severity(self.graph, shape)))


def _min_count(graph: rdflib.Graph, ps) -> int:
    value = graph.value(ps, SH.minCount)
    return 0 if value is None else int(str(value))


# --- value constraints --------------------------------------------------------------------------------------------

_Flag = tuple[str, str, str]
"""A value constraint compiled: ``(component, expression true of a ?value that breaks it, message)``."""


def _value_flags(graph: rdflib.Graph, ps, closure: Callable[[str], frozenset[str]]) -> tuple[list[_Flag], list[tuple]]:
    """The flags of property shape ``ps`` in the value check of its path, and the joins they read (``?dspyrdf_okN``
    is bound by the Nth: one per ``sh:class``, then one for ``sh:maxCount``)."""
    extra: list[tuple] = []
    flags = _datatype_flags(graph, ps) + _node_kind_flags(graph, ps)
    flags += _class_flags(graph, ps, closure, extra)
    flags += _in_flags(graph, ps) + _range_flags(graph, ps) + _length_flags(graph, ps) + _pattern_flags(graph, ps)
    flags += _max_count_flags(graph, ps, extra)
    return flags, extra


def _datatype_flags(graph: rdflib.Graph, ps) -> list[_Flag]:
    dt = graph.value(ps, SH.datatype)
    if dt is None:
        return []
    message = f"Value is not Literal with datatype {path_text(str(dt))}"
    flags = [("DatatypeConstraintComponent", _not(_datatype_ok(str(dt))), message)]
    if str(dt) in _UNBOUNDED_LEXICAL:
        flags.append((BEYOND_RANGE, _beyond_range(str(dt)), ""))
    if str(dt) in _DATE_LEXICAL:
        flags.append((BEYOND_RANGE, _date_beyond_range(str(dt)), ""))
    return flags


def _node_kind_flags(graph: rdflib.Graph, ps) -> list[_Flag]:
    kind = graph.value(ps, SH.nodeKind)
    if kind is None:
        return []
    return [("NodeKindConstraintComponent", _not(_NODE_KIND_TESTS[kind]), f"Value is not of Node Kind {kind}")]


def _class_flags(graph: rdflib.Graph, ps, closure: Callable[[str], frozenset[str]], extra: list[tuple]) -> list[_Flag]:
    flags = []
    for cls in sorted(graph.objects(ps, SH["class"]), key=str):
        extra.append(("class", closure(str(cls))))
        flags.append(("ClassConstraintComponent", f"!BOUND(?dspyrdf_ok{len(extra) - 1})", f"Value does not have class {cls}"))
    return flags


def _in_flags(graph: rdflib.Graph, ps) -> list[_Flag]:
    in_list = graph.value(ps, SH["in"])
    if in_list is None:
        return []
    members = list(Collection(graph, in_list))
    test = " || ".join(_same_term(x) for x in members) or "false"
    return [("InConstraintComponent", _not(test), f"Value not in list {[str(x) for x in members]}")]


_RANGES = (
    (SH.minInclusive, ">=", "MinInclusiveConstraintComponent"),
    (SH.maxInclusive, "<=", "MaxInclusiveConstraintComponent"),
    (SH.minExclusive, ">", "MinExclusiveConstraintComponent"),
    (SH.maxExclusive, "<", "MaxExclusiveConstraintComponent"),
)
_LENGTHS = ((SH.minLength, ">=", "MinLengthConstraintComponent"), (SH.maxLength, "<=", "MaxLengthConstraintComponent"))


def _range_flags(graph: rdflib.Graph, ps) -> list[_Flag]:
    return [
        (component, _not(f"isLiteral(?value) && ?value {op} {_t(bound)}"), f"Value is not {op} {bound}")
        for param, op, component in _RANGES
        for bound in graph.objects(ps, param)
    ]


def _length_flags(graph: rdflib.Graph, ps) -> list[_Flag]:
    return [
        (component, _not(f"!isBlank(?value) && STRLEN(STR(?value)) {op} {int(str(bound))}"), f"Value length is not {op} {bound}")
        for param, op, component in _LENGTHS
        for bound in graph.objects(ps, param)
    ]


def _pattern_flags(graph: rdflib.Graph, ps) -> list[_Flag]:
    flags_lit = graph.value(ps, SH.flags)
    more = f", {_t(rdflib.Literal(str(flags_lit)))}" if flags_lit is not None else ""
    return [
        (
            "PatternConstraintComponent",
            _not(f"!isBlank(?value) && REGEX(STR(?value), {_t(rdflib.Literal(str(pattern)))}{more})"),
            f"Value does not match pattern {pattern!r}",
        )
        for pattern in graph.objects(ps, SH.pattern)
    ]


def _max_count_flags(graph: rdflib.Graph, ps, extra: list[tuple]) -> list[_Flag]:
    max_count = graph.value(ps, SH.maxCount)
    if max_count is None:
        return []
    n = int(str(max_count))
    extra.append(("max", n))
    return [("MaxCountConstraintComponent", f"BOUND(?dspyrdf_ok{len(extra) - 1})", f"More than {n} values on {{this}}->{{path}}")]


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
    select_at, start, end = _where_group(query)
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


def _where_group(query: str) -> tuple[int, int, int]:
    """Where the first SELECT of ``query`` starts, and its WHERE group's opening and closing braces (braces inside
    strings, IRIs and comments skipped)."""
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
    return select_at, start, end


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

