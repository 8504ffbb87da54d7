"""The PROV-O view of traces: activities, the entities they used and generated, their order, and the software agents.

The view is one SPARQL CONSTRUCT shipped with the package (``prov.rq`` beside this module, :data:`PROV_VIEW`), run on any store,
one trace at a time, so that each trace's view goes into a named graph of its own, ``<trace IRI>/prov``, beside the
trace's graph (the trace's own graph is never changed: its IRI is the hash of its content). What it says:

- LM calls, tool executions and module calls of a program run, and the history entries of other traces, are
  ``prov:Activity`` with ``prov:startedAtTime`` / ``prov:endedAtTime``;
- an LM call ``prov:used`` the messages of its request, and its response and the response's tool-call parts
  ``prov:wasGeneratedBy`` it; it ``prov:wasAssociatedWith`` its model, a ``prov:SoftwareAgent``
  (``urn:dspy-rdf:model:<name>``), as the program run's top-level call is with the program
  (``urn:dspy-rdf:program:<module class>``);
- a tool execution ``prov:used`` the tool-call part it answered, or the response of the LM call that decided it
  (``dspy.ReAct``), and its result ``prov:wasGeneratedBy`` it;
- each LM call or tool execution ``prov:wasInformedBy`` the one before it;
- the user a run was made for (``dspy:user_id``) is a ``prov:Agent`` (``urn:dspy-rdf:user:<id>``): the run's top-level
  call ``prov:wasAssociatedWith`` it (role ``urn:dspy-rdf:role:user``), and the program ``prov:actedOnBehalfOf`` it,
  qualified by a ``prov:Delegation`` whose ``prov:hadActivity`` is that call;
- every call of a run in a session (``dspy:session_id``) ``dcterms:isPartOf`` the session, a ``prov:Entity``
  (``urn:dspy-rdf:session:<id>``) labelled with its id.

So generic PROV queries work on DSPy traces, e.g. everything an answer was derived from::

    ?answer prov:wasGeneratedBy/prov:wasInformedBy*/prov:used ?source

:data:`PROV_SHAPES` (``shapes/prov/prov.shacl.ttl``, apart from the shapes of traces) checks a view with pySHACL (:func:`validate_prov`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import pyoxigraph as ox

from dspy_rdf.resources import shapes_dir
from dspy_rdf.store.base import StoreError, TraceStore, check_trace_iri

__all__ = ["PROV", "PROV_SHAPES", "PROV_VIEW", "prov_graph_name", "prov_view", "validate_prov", "view_parts", "write_prov"]

PROV = "http://www.w3.org/ns/prov#"
PROV_VIEW = Path(__file__).parent / "prov.rq"
"""The CONSTRUCT query that builds the view of one trace graph (``?g``, written in as the graph's IRI)."""
_GRAPH_VARIABLE = re.compile(r"\?g\b")
PROV_SHAPES = shapes_dir() / "prov" / "prov.shacl.ttl"
"""SHACL shapes of the view."""


def prov_graph_name(trace_iri: str) -> str:
    """The named graph that holds a trace's PROV-O view."""
    return f"{trace_iri}/prov"


def _query_for(trace_iri: str, view: str) -> str:
    """The view of one trace: ``?g`` written as the trace's IRI. Bound by ``VALUES`` instead, pyoxigraph ran the
    view's grouped subquery over every graph of the store for each trace (``prov`` took time in the square of the
    number of traces, docs/benchmarks.md); a constant graph reads only that trace's quads."""
    return _GRAPH_VARIABLE.sub(f"<{check_trace_iri(trace_iri)}>", view)


def prov_view(store: TraceStore, traces: Iterable[str] | None = None) -> Iterator[tuple[str, list[ox.Triple]]]:
    """``(trace IRI, triples of its PROV-O view)`` for each trace of the store (or the given ones), in order. Given
    traces are checked first, before any view is built: one that is not a whole IRI is a ``ValueError``, one the store
    does not hold a :class:`~dspy_rdf.store.base.StoreError` naming it."""
    if traces is not None:
        traces = list(traces)
        missing = store.missing_traces(traces)
        if missing:
            raise StoreError(f"no trace {missing[0]} in the store at {store.location}")
    view = PROV_VIEW.read_text(encoding="utf-8")
    parts: list[str] | None = None  # the view in parts, once a server refused it whole
    for iri in traces if traces is not None else store.trace_iris():
        if parts is None:
            try:
                data = store.construct(_query_for(iri, view))
                yield iri, list(ox.parse(data, format=ox.RdfFormat.N_TRIPLES)) if data else []
                continue
            except StoreError:
                # A server may refuse the whole query by its own estimate of its cost (Virtuoso: "The estimated
                # execution time ... exceeds the limit", which grows with the store, not with the trace). Each part
                # of the view is a small query; if one fails too, that error is the one to report.
                parts = view_parts(view)
        triples: dict[ox.Triple, None] = {}
        for part in parts:
            data = store.construct(_query_for(iri, part))
            triples.update(dict.fromkeys(ox.parse(data, format=ox.RdfFormat.N_TRIPLES)) if data else {})
        yield iri, list(triples)


_BRANCHES = re.compile(r"^(?P<head>.*?WHERE \{\n  GRAPH \?g \{\n)(?P<body>.*)(?P<tail>\n  \}\n\}\s*)$", re.DOTALL)


def view_parts(view: str) -> list[str]:
    """The view as several CONSTRUCT queries, one per branch of its ``UNION`` (the same template over one branch
    gives that branch's triples; together, the view's)."""
    found = _BRANCHES.match(view)
    if found is None:
        return [view]
    branches = found["body"].split("\n    UNION\n")
    return [found["head"] + branch + found["tail"] for branch in branches]


def write_prov(
    store: TraceStore, handle: BinaryIO, *, traces: Iterable[str] | None = None, trig: bool = False, progress: Callable[[int], None] | None = None
) -> int:
    """Write the view of each trace into its graph ``<trace IRI>/prov`` as N-Quads (or TriG); return the number of
    traces."""
    from dspy_rdf.rdf import vocab as v

    prefixes = {**v.PREFIXES, "prov": PROV} if trig else None
    count = 0
    for iri, triples in prov_view(store, traces):
        graph = ox.NamedNode(prov_graph_name(iri))
        quads = [ox.Quad(t.subject, t.predicate, t.object, graph) for t in triples]
        handle.write(ox.serialize(quads, format=ox.RdfFormat.TRIG if trig else ox.RdfFormat.N_QUADS, prefixes=prefixes) or b"")
        count += 1
        if progress is not None:
            progress(1)
    return count


def validate_prov(triples: Iterable[ox.Triple]) -> tuple[bool, str]:
    """Check a view with pySHACL against :data:`PROV_SHAPES`; return ``(conforms, report text)``."""
    import pyshacl
    import rdflib

    from dspy_rdf.rdf.terms import rdflib_term

    graph = rdflib.Graph()
    for t in triples:
        subject, obj = t.subject, t.object
        assert not isinstance(subject, ox.Triple) and not isinstance(obj, ox.Triple)  # a PROV view quotes no triples
        graph.add((rdflib_term(subject), rdflib.URIRef(t.predicate.value), rdflib_term(obj)))
    shapes = rdflib.Graph().parse(PROV_SHAPES, format="turtle")
    conforms, _, text = pyshacl.validate(graph, shacl_graph=shapes, advanced=True)
    return bool(conforms), str(text)
