"""RDF terms between pyoxigraph (the store, the parsers, the fast paths) and rdflib (pySHACL, JSON-LD compaction)."""

from __future__ import annotations

import pyoxigraph as ox
import rdflib

from dspy_rdf.rdf import vocab as v

__all__ = ["oxigraph_term", "rdflib_graph", "rdflib_term"]


def rdflib_term(term: ox.NamedNode | ox.Literal | ox.BlankNode) -> rdflib.term.Node:
    """The rdflib term for a pyoxigraph term (``xsd:string`` literals become plain literals; lexical forms are kept
    as they are, ill-formed ones included)."""
    if isinstance(term, ox.NamedNode):
        return rdflib.URIRef(term.value)
    if isinstance(term, ox.BlankNode):
        return rdflib.BNode(term.value)
    if term.language:
        return rdflib.Literal(term.value, lang=term.language)
    if term.datatype.value == v.XSD_STRING:
        return rdflib.Literal(term.value)
    return rdflib.Literal(term.value, datatype=rdflib.URIRef(term.datatype.value), normalize=False)


def oxigraph_term(term: rdflib.term.Node, blank_nodes: dict[str, ox.BlankNode]) -> ox.NamedNode | ox.Literal | ox.BlankNode:
    """The pyoxigraph term for an rdflib term; rdflib blank nodes map to fresh pyoxigraph ones through ``blank_nodes``
    (their identifiers need not be valid in pyoxigraph)."""
    if isinstance(term, rdflib.URIRef):
        return ox.NamedNode(str(term))
    if isinstance(term, rdflib.BNode):
        node = blank_nodes.get(str(term))
        if node is None:
            node = blank_nodes[str(term)] = ox.BlankNode()
        return node
    if isinstance(term, rdflib.Literal):
        if term.language:
            return ox.Literal(str(term), language=term.language)
        if term.datatype is not None:
            return ox.Literal(str(term), datatype=ox.NamedNode(str(term.datatype)))
        return ox.Literal(str(term))
    raise ValueError(f"cannot store the RDF term {term!r} (a variable or a quoted triple?)")


def rdflib_graph(data: str | bytes) -> rdflib.Graph:
    """An rdflib graph of N-Triples (or N-Quads, graph names dropped), parsed by pyoxigraph: rdflib's own N-Triples
    parser is quadratic in literal length; pyoxigraph's is not."""
    text = data.encode("utf-8") if isinstance(data, str) else data
    graph = rdflib.Graph()
    add = graph.add
    for q in ox.parse(text, ox.RdfFormat.N_QUADS):
        add((rdflib_term(q.subject), rdflib.URIRef(q.predicate.value), rdflib_term(q.object)))
    return graph
