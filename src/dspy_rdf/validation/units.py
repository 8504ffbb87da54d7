"""The traces to validate: any input turned into one named graph per trace.

Every rule relates nodes of one trace, so validating two traces as one graph would join them (a tool result of one
trace "answering" a tool call of another with the same call id). Every input is therefore cut into traces first:

- a named graph is one trace (a store keeps one trace per graph, named by its IRI), unless it holds several
  ``dspy:Trace`` nodes, or none: then it is cut like the default graph (with none, its triples are outside any trace);
- the default graph (Turtle, N-Triples, or quads without a graph name) is cut by trace: a node belongs to the trace
  whose IRI its own IRI extends (``<trace>/entry/0/request``: the writer mints node IRIs so), and a node with no
  such IRI (a blank node, a hand-made IRI) to every trace that reaches it through its links; with one trace node,
  the whole graph is that trace;
- triples that belong to no trace are validated together, as one graph outside any trace;
- a graph that holds no ``dspy:Trace`` node and uses the PROV-O namespace is a PROV-O view of a trace (what
  ``dspy-rdf prov`` writes, :func:`is_prov_view`): it is kept whole, apart from the
  traces (:attr:`TraceGraphs.prov`), and validated with the PROV shapes.

A cut graph becomes one named graph per trace in an in-memory store (:class:`TraceGraphs`), so both engines see the
same units, whatever the input. A unit's *label* is the trace reports name: its trace IRI, the name of the stored
graph it is, or ``None`` outside any trace; a view's label is the name of its graph.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyoxigraph as ox

from dspy_rdf.rdf import vocab as v
from dspy_rdf.rdf.reader import is_ledger_graph

if TYPE_CHECKING:
    from dspy_rdf.store import TraceStore

__all__ = [
    "DEFAULT_GRAPH_VIEW",
    "PROV_NAMESPACE",
    "PROV_VIEW_SUFFIX",
    "UNTRACED_GRAPH_PREFIX",
    "TraceGraphBuilder",
    "TraceGraphs",
    "dataset_graphs",
    "is_prov_view",
    "split_by_trace",
    "store_graphs",
]

UNTRACED_GRAPH_PREFIX = "urn:x-dspy-rdf:untraced:"
"""Names of the in-memory graphs that hold triples outside any trace."""
PROV_NAMESPACE = "http://www.w3.org/ns/prov#"
PROV_VIEW_SUFFIX = "/prov"
"""What ends the name of a trace's PROV-O view graph, ``<trace IRI>/prov`` (as ``dspy-rdf prov`` writes it)."""
DEFAULT_GRAPH_VIEW = "urn:x-dspy-rdf:default-graph:prov"
"""The in-memory graph of a PROV-O view read from a default graph (reported as ``(default graph)``)."""

_TYPE = ox.NamedNode(v.RDF_TYPE)
_TRACE = ox.NamedNode(v.class_iri("Trace"))
_KEPT_AS_IS = frozenset({v.XSD_STRING, v.RDF_JSON, v.RDF + "langString"})
"""Datatypes whose literals a store keeps as they are written (text): no need to look for a canonical form."""

# A quoted triple (RDF 1.2) as subject or object is kept as an opaque node: it has no IRI that names its trace.
Triple = tuple[ox.NamedNode | ox.BlankNode | ox.Triple, ox.NamedNode, ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple]


@dataclass
class TraceGraphs:
    """Traces to validate, each one named graph, in a pyoxigraph store (``oxigraph``: in memory, or on disk at
    ``path``) or on a SPARQL server (``remote``). ``names`` are the graphs to validate; ``labels`` maps a graph to the
    trace reports name where that is not the graph itself (``None``: triples outside any trace). ``complete`` is
    false once :meth:`select` chose some of them (an engine then reads only those, rather than everything);
    ``writable`` says that the on-disk store is open for writing (flushed before other processes read it). ``prov``
    says that the graphs are PROV-O views, validated with the PROV shapes rather than by a trace engine;
    ``other_graphs`` counts the graphs of a store that hold neither a trace nor a view (not validated)."""

    names: list[str]
    labels: dict[str, str | None] = field(default_factory=dict)
    oxigraph: ox.Store | None = None
    remote: TraceStore | None = None
    path: Path | None = None
    complete: bool = True
    writable: bool = False
    prov: bool = False
    other_graphs: int = 0
    as_written: dict[str, list[Triple]] = field(default_factory=dict)
    """The graphs of a file whose literals the in-memory store rewrote to its canonical forms (``"00"`` to ``"0"``,
    ``xsd:int`` to ``xsd:integer``, ``"1"^^xsd:boolean`` to ``true``), with their triples as the file holds them:
    an engine validates these, not the store's forms."""

    def label(self, graph: str) -> str | None:
        """The trace a result in ``graph`` is reported in."""
        return self.labels.get(graph, graph)

    def quads(self, graph: str) -> list[ox.Quad]:
        """The quads of one graph (in that graph)."""
        name = ox.NamedNode(graph)
        if graph in self.as_written:
            return [ox.Quad(s, p, o, name) for s, p, o in self.as_written[graph]]
        if self.oxigraph is not None:
            return list(self.oxigraph.quads_for_pattern(None, None, None, name))
        assert self.remote is not None
        import io

        buffer = io.BytesIO()
        self.remote.dump(buffer, traces=[graph])
        return [ox.Quad(q.subject, q.predicate, q.object, name) for q in ox.parse(buffer.getvalue(), ox.RdfFormat.N_QUADS)]

    def traces(self) -> tuple[list[str], int]:
        """The traces validated (labels that name one, in order) and the number of graphs outside any trace."""
        labels = [self.label(name) for name in self.names]
        return [x for x in labels if x is not None], sum(1 for x in labels if x is None)

    def select(self, wanted: Iterable[str]) -> list[str]:
        """Keep only the graphs whose trace is one of ``wanted``; return the wanted traces that none is."""
        wanted = list(dict.fromkeys(wanted))
        keep = set(wanted)
        self.names = [name for name in self.names if self.label(name) in keep]
        self.complete = False
        found = {self.label(name) for name in self.names}
        return [name for name in wanted if name not in found]


def is_prov_view(triples: Iterable[Triple]) -> bool:
    """Whether the triples of one graph are a PROV-O view of a trace: no ``dspy:Trace`` node, and a predicate or class
    of the PROV-O namespace used (a graph named ``<trace IRI>/prov`` that uses none is other data: there would be
    nothing for the PROV shapes to check in it)."""
    uses_prov = False
    for _, p, o in triples:
        if p == _TYPE and o == _TRACE:
            return False
        if p.value.startswith(PROV_NAMESPACE) or (p == _TYPE and isinstance(o, ox.NamedNode) and o.value.startswith(PROV_NAMESPACE)):
            uses_prov = True
    return uses_prov


def _trace_of_iri(iri: str, traces: set[str]) -> str | None:
    """The longest trace IRI that ``iri`` is, or extends with ``/...``."""
    if iri in traces:
        return iri
    cut = len(iri)
    while (cut := iri.rfind("/", 0, cut)) > 0:
        if iri[:cut] in traces:
            return iri[:cut]
    return None


def split_by_trace(triples: list[Triple]) -> list[tuple[str | None, list[Triple]]]:
    """Cut the triples of one graph by trace (see the module docstring): ``(trace IRI or None, triples)`` pairs, the
    traces sorted, the triples outside any trace last. A node reached from several traces is in each of them."""
    traces = {s.value for s, p, o in triples if p == _TYPE and o == _TRACE and isinstance(s, ox.NamedNode)}
    if len(traces) <= 1:
        return [(next(iter(traces), None), triples)] if triples else []
    owners: dict[object, set[str]] = {}
    fixed: set[object] = set()  # nodes whose IRI says their trace
    links: dict[object, set[object]] = defaultdict(set)
    for s, _, o in triples:
        if s not in owners:
            owner = _trace_of_iri(s.value, traces) if isinstance(s, ox.NamedNode) else None
            owners[s] = {owner} if owner is not None else set()
            if owner is not None:
                fixed.add(s)
        if not isinstance(o, ox.Literal):
            links[s].add(o)
    # nodes without an IRI of their trace belong to every trace that reaches them
    queue = deque(fixed)
    while queue:
        node = queue.popleft()
        for target in links.get(node, ()):
            found = owners.get(target)
            if found is None or target in fixed or owners[node] <= found:
                continue
            found |= owners[node]
            queue.append(target)
    units: dict[str | None, list[Triple]] = {name: [] for name in sorted(traces)}
    outside: list[Triple] = []
    for triple in triples:
        found = owners[triple[0]]
        if not found:
            outside.append(triple)
        for owner in found:
            units[owner].append(triple)
    out: list[tuple[str | None, list[Triple]]] = [(name, part) for name, part in units.items() if part]
    if outside:
        out.append((None, outside))
    return out


class TraceGraphBuilder:
    """Collects quads of any input into an in-memory store with one named graph per trace (see the module docstring).

    A trace seen in two inputs (the same IRI) is one graph: its triples are merged, as a store would merge them.
    """

    def __init__(self) -> None:
        self._store = ox.Store()
        self._labels: dict[str, str | None] = {}
        self._order: dict[str, None] = {}
        self._untraced = 0
        self._as_written: dict[str, list[Triple]] = {}
        self._views: TraceGraphBuilder | None = None

    def add_graph(self, name: str | None, triples: list[Triple]) -> None:
        """Add the triples of one input graph (``name`` None: a default graph), cut by trace where needed; a PROV-O
        view is kept whole, apart from the traces."""
        if not triples:
            return
        if is_prov_view(triples):
            if self._views is None:
                self._views = TraceGraphBuilder()
            self._views._add(name or DEFAULT_GRAPH_VIEW, name or "(default graph)", triples)
            return
        traces = sum(1 for s, p, o in triples if p == _TYPE and o == _TRACE)
        if name is not None and traces == 1:
            self._add(name, name, triples)
            return
        for trace, part in split_by_trace(triples):
            if trace is None:
                self._untraced += 1
                self._add(f"{UNTRACED_GRAPH_PREFIX}{self._untraced}", None, part)
            else:
                self._add(trace, trace, part)

    def add_quads(self, quads: Iterable[ox.Quad]) -> None:
        """Add the quads of one input (a file, a dataset), graph by graph; a store's ledger, which a dump may carry
        (``dump --with-ledger``), is the store's index, not data to validate."""
        graphs: dict[str | None, list[Triple]] = defaultdict(list)
        for q in quads:
            if is_ledger_graph(q.graph_name):
                continue
            name = q.graph_name.value if isinstance(q.graph_name, (ox.NamedNode, ox.BlankNode)) else None
            graphs[name].append((q.subject, q.predicate, q.object))
        for name, triples in graphs.items():
            self.add_graph(name, triples)

    def add_trace(self, iri: str, nquads: bytes) -> bool:
        """Add one exported trace (its N-Quads, all in the graph of its IRI) unless a trace with that IRI was added
        already: the same content seen again is one trace, as ``export`` writes it once. Return whether it was added."""
        if iri in self._order:
            return False
        self._store.load(nquads, ox.RdfFormat.N_QUADS, lenient=True)
        self._labels.setdefault(iri, iri)
        self._order.setdefault(iri, None)
        return True

    def _add(self, graph: str, label: str | None, triples: list[Triple]) -> None:
        node = ox.NamedNode(graph)
        earlier = list(self._store.quads_for_pattern(None, None, None, node)) if graph in self._order else []
        self._store.extend(ox.Quad(s, p, o, node) for s, p, o in triples)
        if graph in self._as_written:
            self._as_written[graph].extend(triples)
        elif self._rewritten(node, triples):  # the graph's earlier parts were kept as written: start from them
            self._as_written[graph] = [(q.subject, q.predicate, q.object) for q in earlier] + list(triples)
        self._labels.setdefault(graph, label)
        self._order.setdefault(graph, None)

    def _rewritten(self, node: ox.NamedNode, triples: list[Triple]) -> bool:
        """Whether the store keeps a literal of ``triples`` in another form than the input's (its canonical one)."""
        written = {o for _, _, o in triples if isinstance(o, ox.Literal) and o.datatype.value not in _KEPT_AS_IS}
        if not written:
            return False
        kept = {q.object for q in self._store.quads_for_pattern(None, None, None, node) if isinstance(q.object, ox.Literal)}
        return not written <= kept

    def build(self) -> TraceGraphs:
        """The traces collected, in the order they were first seen."""
        labels = {graph: label for graph, label in self._labels.items() if label != graph}
        return TraceGraphs(names=list(self._order), labels=labels, oxigraph=self._store, as_written=self._as_written)

    def parts(self) -> list[TraceGraphs]:
        """The traces collected (:meth:`build`), then the PROV-O views when there were any (in a store of their own)."""
        if self._views is None:
            return [self.build()]
        views = self._views.build()
        views.prov = True
        return [self.build(), views]


def dataset_graphs(dataset: ox.Store) -> list[TraceGraphs]:
    """The traces of an in-memory pyoxigraph dataset (its named graphs and its default graph), cut by trace, and its
    PROV-O views (:meth:`TraceGraphBuilder.parts`)."""
    builder = TraceGraphBuilder()
    for graph in sorted(dataset.named_graphs(), key=lambda g: g.value):
        if isinstance(graph, ox.NamedNode):
            builder.add_graph(graph.value, [(q.subject, q.predicate, q.object) for q in dataset.quads_for_pattern(None, None, None, graph)])
    builder.add_graph(None, [(q.subject, q.predicate, q.object) for q in dataset.quads_for_pattern(None, None, None, ox.DefaultGraph())])
    return builder.parts()


def store_graphs(store: TraceStore, traces: list[str] | None = None) -> list[TraceGraphs]:
    """The traces of a store: its trace graphs where they are (on disk or on the server), and, in memory, the graphs
    that hold several traces and an embedded store's default graph, cut by trace; then its PROV-O views where they
    are (the graphs without a trace that use the PROV-O namespace). ``traces`` selects
    some traces or views (a view by its graph's name); one that is in none raises
    :class:`~dspy_rdf.store.StoreError`."""
    from dspy_rdf.store import EmbeddedStore, StoreError
    from dspy_rdf.store.ledger import LEDGER

    names = store.trace_iris()
    shared = set(store.graphs_with_several_traces())
    alone = [name for name in names if name not in shared]
    known = set(names)
    # the store's ledger (its own index, dspy_rdf.store.ledger) is neither a trace nor another graph of the user's
    others = [name for name in store.graph_names() if name not in known and not name.startswith(LEDGER)]
    views = sorted(store.graphs_using(others, PROV_NAMESPACE))
    if isinstance(store, EmbeddedStore):  # read in place, in this process's pyoxigraph
        oxigraph = store.oxigraph
        in_place = TraceGraphs(names=alone, oxigraph=oxigraph, path=store.path, writable=not store.read_only)
        view_part = TraceGraphs(names=views, oxigraph=oxigraph, path=store.path, writable=not store.read_only, prov=True)
    else:
        oxigraph = None
        in_place = TraceGraphs(names=alone, remote=store)
        view_part = TraceGraphs(names=views, remote=store, prov=True)
    in_place.other_graphs = len(others) - len(views)
    parts = [in_place]
    builder = TraceGraphBuilder()
    cut = False
    for name in sorted(shared):
        builder.add_graph(name, [(q.subject, q.predicate, q.object) for q in in_place.quads(name)])
        cut = True
    if oxigraph is not None:
        default = [(q.subject, q.predicate, q.object) for q in oxigraph.quads_for_pattern(None, None, None, ox.DefaultGraph())]
        if default:
            builder.add_graph(None, default)
            cut = True
    if cut:
        parts += builder.parts()
    parts.append(view_part)
    if traces is not None:
        missing = set(dict.fromkeys(traces))
        for part in parts:
            missing &= set(part.select(traces))
        if missing:
            first = next(name for name in traces if name in missing)
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise StoreError(f"no trace {first} in the store at {store.location}{more}")
    return [part for part in parts if part.names or part.other_graphs]

