"""Oracle: for traces without JSON-valued slots, the graph dspy-rdf writes is isomorphic to what
linkml-runtime's generic ``rdflib_dumper`` writes from the same objects with the same identifiers.

rdflib_dumper runs on instances of the Pydantic classes that LinkML's ``gen-pydantic`` generates from the
schema. It gives blank nodes to objects without an identifier slot, so the comparison turns dspy-rdf's
minted node IRIs (all but the trace's) into blank nodes; rdflib's isomorphism check does the rest.
"""

from __future__ import annotations

import dataclasses
import types

import pytest
import rdflib
from conftest import FIXTURE_FILES, load
from linkml.generators.pydanticgen import PydanticGenerator
from linkml_runtime import SchemaView
from linkml_runtime.dumpers import rdflib_dumper
from rdflib.compare import isomorphic

from dspy_rdf import trace_from_json, trace_iri
from dspy_rdf.canonical import model
from dspy_rdf.rdf.terms import rdflib_graph as graph_from_ntriples
from dspy_rdf.rdf.vocab import slot_iri
from dspy_rdf.rdf.writer import trace_lines
from dspy_rdf.resources import schema_path


@pytest.fixture(scope="module")
def generated():
    module = types.ModuleType("dspy_generated")
    exec(PydanticGenerator(str(schema_path())).serialize(), module.__dict__)  # noqa: S102 - LinkML's own generated code
    return module, SchemaView(str(schema_path()))


def _as_linkml(value, generated_module, position=None, **identity):
    """The canonical model as instances of the generated Pydantic classes (position = list index)."""
    if dataclasses.is_dataclass(value):
        data = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if item is None or item == {} or item == model.LMConfig():  # an all-default config is written as none
                continue
            if isinstance(item, list):
                item = [_as_linkml(x, generated_module, i) for i, x in enumerate(item)]
                if not item:
                    continue
            else:
                item = _as_linkml(item, generated_module)
            data[field.name] = item
        if hasattr(value, "part_type"):
            data["part_type"] = value.part_type
        if position is not None:
            data["position"] = position
        data.update(identity)
        return getattr(generated_module, type(value).__name__)(**data)
    return value


def _has_json_values(trace) -> bool:
    _, lines = trace_lines(trace, graph=False)
    return any("<http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON>" in line for line in lines)


def _normalized(graph: rdflib.Graph, keep: str) -> rdflib.Graph:
    """Blank nodes for minted IRIs; plain literals for xsd:string (the same RDF 1.1 term)."""
    bnodes: dict = {}

    def term(t):
        if isinstance(t, rdflib.URIRef) and str(t).startswith(keep + "/"):
            return bnodes.setdefault(t, rdflib.BNode())
        if isinstance(t, rdflib.Literal) and t.datatype == rdflib.XSD.string:
            return rdflib.Literal(str(t))
        return t

    out = rdflib.Graph()
    for s, p, o in graph:
        out.add((term(s), p, term(o)))
    return out


CASES = [name for name in FIXTURE_FILES if not _has_json_values(trace_from_json(load(name)))]


def test_there_are_traces_without_json_values_to_compare():
    assert len(CASES) >= 5, CASES


@pytest.mark.parametrize("name", CASES)
def test_graph_is_isomorphic_to_linkml_runtime_rdflib_dumper(generated, name):
    module, view = generated
    trace = trace_from_json(load(name))
    iri = trace_iri(trace)
    obj = _as_linkml(trace, module, id=iri)
    theirs = rdflib_dumper.as_rdf_graph(obj, schemaview=view, prefix_map={"urn": "urn:"})
    ours = graph_from_ntriples("".join(trace_lines(trace, graph=False)[1]))
    derived = {rdflib.URIRef(slot_iri(name)) for name in view.all_slots() if "derived" in (view.get_slot(name).in_subset or [])}
    derived.add(rdflib.URIRef(slot_iri("answers")))  # derived on tool-result parts (slot_usage), the only place here
    summaries = set(ours.objects(None, rdflib.URIRef(slot_iri("usage_summaries"))))  # derived nodes, type and all
    for triple in [t for t in ours if t[1] in derived or t[0] in summaries]:  # facts the writer adds; the model objects do not hold them
        ours.remove(triple)
    a, b = _normalized(ours, iri), _normalized(theirs, iri)
    assert len(a) == len(b)
    assert isomorphic(a, b), set(map(str, (a - b))) ^ set(map(str, (b - a)))
