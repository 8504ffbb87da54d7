"""Lossless round trips: DSPy 3.3 JSON -> RDF (every format) -> model -> DSPy JSON and DSPy objects."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURE_FILES, PART_KINDS, dspy33_types, load

from dspy_rdf import RdfFormat, parse_traces, serialize_traces, trace_from_dspy, trace_from_json, trace_to_dspy, trace_to_json
from dspy_rdf.cli.demo import bundled_traces_path


def test_every_part_kind_has_a_fixture():
    assert len(FIXTURE_FILES) == len(PART_KINDS) + 4
    kinds = {load(f"part_{kind}.json")["messages"][0]["parts"][0]["type"] for kind in PART_KINDS}
    assert kinds == set(PART_KINDS)


@pytest.mark.parametrize("fmt", list(RdfFormat), ids=lambda f: f.value)
def test_json_survives_a_round_trip_through_every_format(fixture_json, fmt):
    trace = trace_from_json(fixture_json)
    [(iri, back)] = parse_traces(serialize_traces([trace], fmt), fmt)
    assert trace_to_json(back) == fixture_json
    assert back == trace


def test_dspy_objects_survive_a_round_trip(fixture_json):
    types = dspy33_types()
    LMHistoryEntry, LMRequest, LMResponse = types.LMHistoryEntry, types.LMRequest, types.LMResponse
    if isinstance(fixture_json, list):
        objects = [LMHistoryEntry.model_validate(e) for e in fixture_json]
    elif "uuid" in fixture_json:
        objects = LMHistoryEntry.model_validate(fixture_json)
    elif "messages" in fixture_json:
        objects = LMRequest.model_validate(fixture_json)
    else:
        objects = LMResponse.model_validate(fixture_json)
    trace = trace_from_dspy(objects)
    [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.N_QUADS), RdfFormat.N_QUADS)
    rebuilt = trace_to_dspy(back)
    assert rebuilt == objects


def test_the_shared_dspy_repo_request_survives_a_round_trip():
    from conftest import load_shared

    data = load_shared("dspy_repo_rlm_lm_request.json")
    [(_, back)] = parse_traces(serialize_traces([trace_from_json(data)], RdfFormat.TURTLE), RdfFormat.TURTLE)
    assert trace_to_json(back) == data


def test_edge_values_survive_exactly():
    data = load("part_tool_call.json")
    part = data["messages"][0]["parts"][0]
    part["args"] = {"empty": "", "big": 10**40, "neg": -(10**39), "float": 1e-300, "uni": "e\u0301 é 🙂", "nested": [[[{"k": [None]}]]]}
    part["id"] = ""
    data["messages"][0]["parts"].append({"type": "text", "metadata": {}, "text": ""})
    [(_, back)] = parse_traces(serialize_traces([trace_from_json(data)], RdfFormat.N_QUADS), RdfFormat.N_QUADS)
    assert trace_to_json(back)["messages"][0]["parts"][0]["args"] == part["args"]
    assert trace_to_json(back)["messages"][0]["parts"][0]["id"] == ""
    assert trace_to_json(back)["messages"][0]["parts"][1]["text"] == ""


def test_a_jsonl_file_keeps_its_order_through_rdf():
    from dspy_rdf import read_traces

    items = list(read_traces(bundled_traces_path()))
    assert len(items) == 9 and all(item.error is None for item in items)
    traces = [item.trace for item in items]
    back = [t for _, t in parse_traces(serialize_traces(traces, RdfFormat.TRIG), RdfFormat.TRIG)]
    assert back == traces
