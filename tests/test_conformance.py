"""pySHACL with the LinkML-generated shapes: valid traces conform; each kind of defect is reported readably."""

from __future__ import annotations

import pytest
import rdflib
from conftest import FIXTURE_FILES, load

from dspy_rdf import trace_from_json, validate_graph, validate_traces
from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.terms import rdflib_graph as graph_from_ntriples
from dspy_rdf.rdf.writer import trace_lines

DSPY = rdflib.Namespace("https://w3id.org/lmodel/dspy/")


def test_every_fixture_conforms(fixture_json):
    report = validate_traces([trace_from_json(fixture_json)])
    assert report.conforms, str(report)


def test_the_bundled_traces_conform():
    traces = [item.trace for item in read_traces(bundled_traces_path())]
    assert len(traces) == 9
    assert validate_traces(traces).conforms


def _tool_call_graph() -> tuple[rdflib.Graph, rdflib.URIRef]:
    iri, lines = trace_lines(trace_from_json(load("part_tool_call.json")), graph=False)
    graph = graph_from_ntriples("".join(lines))
    assert validate_graph(graph).conforms
    return graph, rdflib.URIRef(f"{iri}/request/message/0/part/0")


def _break_missing_name(g, part):
    g.remove((part, rdflib.RDFS.label, None))


def _break_part_type(g, part):
    g.set((part, DSPY.part_type, rdflib.Literal("text")))


def _break_datatype(g, part):
    g.set((part, DSPY.position, rdflib.Literal("first")))


def _break_closed_shape(g, part):
    g.add((part, DSPY.not_in_schema, rdflib.Literal("surprise")))


def _break_part_class(g, part):
    message = next(g.subjects(DSPY.parts, part))
    g.add((message, DSPY.parts, message))  # an LMMessage is not an LMPart


@pytest.mark.parametrize(
    ("breaker", "constraint", "path", "words"),
    [
        (_break_missing_name, "MinCountConstraintComponent", "rdfs:label", "Less than 1 values"),
        (_break_part_type, "InConstraintComponent", "dspy:part_type", "not in"),
        (_break_datatype, "DatatypeConstraintComponent", "dspy:position", "not Literal with datatype"),
        (_break_closed_shape, "ClosedConstraintComponent", "dspy:not_in_schema", "Closed"),
        (_break_part_class, "ClassConstraintComponent", "dspy:parts", "not have class"),
    ],
    ids=["missing name", "wrong part_type", "wrong datatype", "unknown property", "wrong class in parts"],
)
def test_each_defect_is_reported_with_a_readable_message(breaker, constraint, path, words):
    graph, part = _tool_call_graph()
    breaker(graph, part)
    graph.bind("dspy", str(DSPY))
    report = validate_graph(graph)
    assert not report.conforms
    found = [v for v in report.violations if v.constraint == constraint]
    assert found, str(report)
    assert found[0].path == path
    assert words.lower() in found[0].message.lower()
    assert path in str(found[0]) and found[0].focus_node in str(found[0])
