"""Running compiled checks in one process: each check's query in a pyoxigraph store or on a SPARQL server, its rows
read into results (:data:`Row`), and those results turned into :class:`~dspy_rdf.validation.report.Violation` s."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyoxigraph as ox

from dspy_rdf.rdf import vocab as v
from dspy_rdf.store.base import mapped_number, term_from_json
from dspy_rdf.store.http import RemoteTruncatedError
from dspy_rdf.validation.compiled import Check, CompiledShapes, G, path_text
from dspy_rdf.validation.report import Severity, Violation, rule_name
from dspy_rdf.validation.units import TraceGraphs

__all__ = ["Row", "Runner", "run_slice", "to_violations"]


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
        ``None``). A row whose component is :data:`~dspy_rdf.validation.compiled.BEYOND_RANGE` marks a graph holding
        a number the store cannot compute with."""
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
        query = check.query(graphs)
        if check.kind == "closed":
            return self._closed_rows(check, query)
        if check.kind == "value":
            return self._value_rows(check, query)
        if check.kind == "count":
            return self._count_rows(check, query)
        return self._sparql_rows(check, query)

    def _closed_rows(self, check: Check, query: str) -> list[tuple]:
        out: list[tuple] = []
        for row in self.rows(query):
            t, path = row["t"].value, row["path"].value
            for shape, targets, allowed, severity in check.closed:
                if t in targets and path not in allowed:
                    out.append((row[G[1:]].value, row["this"], path, row["value"], "ClosedConstraintComponent", severity, check.message, shape))
        return out

    def _value_rows(self, check: Check, query: str) -> list[tuple]:
        out: list[tuple] = []
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
        return out

    def _count_rows(self, check: Check, query: str) -> list[tuple]:
        out: list[tuple] = []
        for row in self.rows(query):
            g = row[G[1:]].value
            for i, (component, path, severity, message) in enumerate(check.flags):
                if _truthy(row.get(f"c{i}")):
                    out.append((g, row["this"], path, None, component, severity, message, check.shape))
        return out

    def _sparql_rows(self, check: Check, query: str) -> list[tuple]:
        out: list[tuple] = []
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


def run_slice(compiled: CompiledShapes, source: ox.Store, names: Sequence[str]) -> list[Row]:
    """Results in the named graphs ``names`` of ``source``, copied into an in-memory store and validated there."""
    copy = ox.Store()
    for name in names:
        copy.extend(source.quads_for_pattern(None, None, None, ox.NamedNode(name)))
    return Runner(compiled, oxigraph=copy).run_batch(None)


def to_violations(rows: Iterable[Row], graphs: TraceGraphs) -> list[Violation]:
    """The violations of ``rows`` (results of the graphs of ``graphs``), each result once."""
    seen = set()
    out = []
    for graph, focus, path, value, component, severity, message, shape in rows:
        key = (graph, focus, path, value, component, shape)
        if key in seen:
            continue
        seen.add(key)
        shown_path = path_text(path) if path else None
        message = message.replace("{this}", f"<{focus}>").replace("{path}", shown_path or "").replace("{value}", value or "")
        out.append(Violation(
            focus_node=focus, path=shown_path, value=value, constraint=component, message=message,
            severity=Severity(severity), trace=graphs.label(graph), rule=rule_name(shape),
        ))
    return out
