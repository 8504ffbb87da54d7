"""Deterministic, safe IRIs: the same trace gives the same graph, and no input text reaches an IRI."""

from __future__ import annotations

import pyoxigraph as ox
import pytest

from conftest import load
from dspy_rdf import RdfFormat, parse_traces, serialize_traces, trace_from_json, trace_iri, verify_trace_iri
from dspy_rdf.identity import DEFAULT_BASE, KEY_PREFIX
from dspy_rdf.writer import trace_lines

HOSTILE = ["a b", 'quote"d', "<angle>", "hash#frag", "per%20cent", "new\nline", "nul\x00byte", "e\u0301", "é", "🙂", "back\\slash", "}{", ""]


def test_exporting_the_same_trace_twice_gives_the_identical_graph():
    data = load("history_entry_all_parts.json")
    first = serialize_traces([trace_from_json(data)], RdfFormat.N_QUADS)
    second = serialize_traces([trace_from_json(load("history_entry_all_parts.json"))], RdfFormat.N_QUADS)
    assert first == second
    assert trace_iri(trace_from_json(data)).startswith(DEFAULT_BASE + KEY_PREFIX)


def test_a_changed_trace_gets_another_iri_and_verify_notices():
    data = load("part_text.json")
    trace = trace_from_json(data)
    iri = trace_iri(trace)
    assert verify_trace_iri(trace, iri)
    data["messages"][0]["parts"][0]["text"] += "!"
    assert not verify_trace_iri(trace_from_json(data), iri)


@pytest.mark.parametrize("text", HOSTILE, ids=repr)
def test_hostile_tool_names_and_call_ids_stay_out_of_iris(text):
    data = load("part_tool_call.json")
    data["messages"][0]["parts"][0].update(name=text, id=text)
    trace = trace_from_json(data)
    iri, lines = trace_lines(trace)
    quads = list(ox.parse("".join(lines).encode("utf-8"), ox.RdfFormat.N_QUADS))
    iris = {t.value for q in quads for t in (q.subject, q.object, q.graph_name) if isinstance(t, ox.NamedNode)}
    assert all(i.startswith(iri) or i.startswith("https://w3id.org/lmodel/dspy/") for i in iris)
    [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.TURTLE), RdfFormat.TURTLE)
    assert back.request.messages[0].parts[0].name == text
    assert back.request.messages[0].parts[0].call_id == text


def test_the_base_iri_is_configurable_and_checked():
    trace = trace_from_json(load("part_text.json"))
    assert trace_iri(trace, base="https://example.org/traces/").startswith("https://example.org/traces/sha256-")
    nq = serialize_traces([trace], RdfFormat.N_QUADS, base="https://example.org/traces/")
    [(iri, _)] = parse_traces(nq, RdfFormat.N_QUADS)
    assert iri.startswith("https://example.org/traces/")
    with pytest.raises(ValueError, match="not an absolute IRI"):
        serialize_traces([trace], RdfFormat.N_QUADS, base="no scheme here")
