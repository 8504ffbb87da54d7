"""Derived facts the writer adds (schema subset ``derived``): per-trace totals and result-to-call links,
checked against values computed here from the model objects."""

from __future__ import annotations

import pyoxigraph as ox
import pytest
from conftest import load

from dspy_rdf.canonical import model as m
from dspy_rdf.rdf import vocab as v
from dspy_rdf.rdf.formats import RdfFormat, parse_traces, serialize_traces
from dspy_rdf.sources.tracejson import trace_from_json

FIXTURES = [
    "history_entry_all_parts.json",
    "request_all_parts.json",
    "response_all_parts.json",
    "react_history.json",
    "dspy341_history_dicts.json",
    "dspy341_lm15_request.json",
    "openai_exchange_tool_loop.json",
    "dspy341_react_trajectory.json",
]


def walk_parts(parts: list[m.LMPart]):
    for part in parts:
        yield part
        if isinstance(part, m.LMToolResultPart):
            yield from walk_parts(part.content)


def all_parts(trace: m.Trace):
    requests = [e.request for e in trace.entries] + ([trace.request] if trace.request else [])
    responses = [e.response for e in trace.entries] + ([trace.response] if trace.response else [])
    messages = [msg for r in requests for msg in r.messages] + trace.messages
    for message in messages:
        yield from walk_parts(message.parts)
    for response in responses:
        for output in response.outputs:
            yield from walk_parts(output.parts)
    yield from walk_parts(trace.parts)


def store_of(trace: m.Trace) -> ox.Store:
    store = ox.Store()
    store.load(serialize_traces([trace], RdfFormat.N_QUADS), ox.RdfFormat.N_QUADS)
    return store


def value(store: ox.Store, slot: str):
    found = list(store.quads_for_pattern(None, ox.NamedNode(v.slot_iri(slot)), None))
    assert len(found) <= 1
    return None if not found else found[0].object.value


@pytest.mark.parametrize("name", FIXTURES)
def test_per_trace_totals_equal_what_the_trace_holds(name):
    trace = trace_from_json(load(name))
    store = store_of(trace)
    parts = list(all_parts(trace))
    responses = [e.response for e in trace.entries] + ([trace.response] if trace.response else [])
    requests = [e.request for e in trace.entries] + ([trace.request] if trace.request else [])
    assert int(value(store, "lm_call_count")) == len(trace.entries) + (1 if trace.request or trace.response else 0)
    assert int(value(store, "message_count")) == sum(len(r.messages) for r in requests) + len(trace.messages)
    # the tool ReAct adds itself (its finish, in a ReAct trajectory) is not the program's: not counted
    own = {"finish"} if trace.source_format == "react_trajectory" else set()
    calls = [p for p in parts if isinstance(p, m.LMToolCallPart) and p.name not in own]
    # tool calls as users count them: a call id is one call, however many parts carry it (a replayed conversation)
    distinct = len({p.call_id for p in calls if p.call_id is not None}) + sum(p.call_id is None for p in calls)
    assert int(value(store, "tool_call_count")) == distinct
    assert int(value(store, "tool_execution_count")) == 0
    assert value(store, "framework_tools") == ("finish" if own else None)
    assert int(value(store, "tool_result_count")) == sum(isinstance(p, m.LMToolResultPart) for p in parts)
    inputs = [r.usage.input_tokens for r in responses if r.usage and r.usage.input_tokens is not None]
    assert value(store, "input_tokens_total") == (str(sum(inputs)) if inputs else None)
    costs = [r.cost for r in responses if r.cost is not None]
    assert (value(store, "cost_total") is None) == (not costs)
    if costs:
        assert float(value(store, "cost_total")) == pytest.approx(sum(costs))


def lm_calls(trace: m.Trace):
    """(request, response, timestamp) of each LM call of the trace, including those of a program run."""
    entries = list(trace.entries) + [c.entry for c in trace.calls if isinstance(c, m.LMCall) and c.entry is not None]
    calls = [(e.request, e.response, e.timestamp) for e in entries]
    if trace.request is not None:
        calls.append((trace.request, trace.response, None))
    return calls


def recorded_react_run() -> m.Trace:
    """A real DSPy ReAct run (DummyLM) recorded by the capture callback: its LM calls sit under dspy:calls."""
    import dspy
    from dspy.utils import DummyLM

    from dspy_rdf.capture.recorder import MemorySink, TraceRecorder

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    lm = DummyLM([
        {"next_thought": "Add.", "next_tool_name": "add", "next_tool_args": {"a": 1, "b": 2}},
        {"next_thought": "Done.", "next_tool_name": "finish", "next_tool_args": {}},
        {"reasoning": "1 + 2 = 3", "answer": "3"},
    ])  # fmt: skip
    sink = MemorySink()
    with dspy.context(lm=lm, callbacks=[TraceRecorder(sink)]):
        dspy.ReAct("question -> answer", tools=[add])(question="1 + 2?")
    [trace] = sink.traces
    return trace


@pytest.mark.parametrize("name", FIXTURES + ["program run"])
def test_usage_summaries_group_lm_calls_by_model_and_day(name):
    trace = recorded_react_run() if name == "program run" else trace_from_json(load(name))
    expected: dict[tuple[str, str | None], list] = {}
    for request, response, timestamp in lm_calls(trace):
        row = expected.setdefault((request.model, timestamp and timestamp.split("T")[0]), [0, 0, [], [], [], []])
        row[0] += 1
        if response is not None:
            row[1] += response.cost is not None
            for i, value in enumerate((response.usage and response.usage.input_tokens, response.usage and response.usage.output_tokens,
                                       response.usage and response.usage.total_tokens, response.cost)):
                if value is not None:
                    row[2 + i].append(value)
    store = store_of(trace)
    rows = store.query(
        "PREFIX dspy: <https://w3id.org/lmodel/dspy/> SELECT ?m ?d ?n ?p ?i ?o ?t ?c WHERE { ?trace dspy:usage_summaries ?s . "
        "?s a dspy:UsageSummary ; dspy:summary_model ?m ; dspy:summary_lm_calls ?n ; dspy:summary_priced_calls ?p . "
        "OPTIONAL { ?s dspy:summary_day ?d } OPTIONAL { ?s dspy:summary_input_tokens ?i } OPTIONAL { ?s dspy:summary_output_tokens ?o } "
        "OPTIONAL { ?s dspy:summary_total_tokens ?t } OPTIONAL { ?s dspy:summary_cost ?c } }",
        use_default_graph_as_union=True,
    )
    got = {}
    for row in rows:
        get = lambda k: None if row[k] is None else row[k].value  # noqa: E731
        assert row["d"] is None or row["d"].datatype.value == v.XSD + "date"
        got[(get("m"), get("d"))] = [int(get("n")), int(get("p")), get("i"), get("o"), get("t"), get("c")]
    assert got.keys() == expected.keys()
    # a lone response names no requested model; a trajectory or message list holds no LM call
    assert expected or trace.source_kind in ("lm_response", "trajectory", "lm_message", "lm_part")
    for key, (calls, priced, inputs, outputs, totals, costs) in expected.items():
        assert got[key][:2] == [calls, priced], key
        for value, seen in zip(got[key][2:5], (inputs, outputs, totals)):
            assert value == (str(sum(seen)) if seen else None), key
        assert (got[key][5] is None) == (not costs) and (not costs or float(got[key][5]) == pytest.approx(sum(costs)))


@pytest.mark.parametrize("name", FIXTURES)
def test_each_tool_result_answers_every_tool_call_with_its_call_id(name):
    trace = trace_from_json(load(name))
    store = store_of(trace)
    parts = list(all_parts(trace))
    calls_by_id: dict[str, int] = {}
    for part in parts:
        if isinstance(part, m.LMToolCallPart) and part.call_id is not None:
            calls_by_id[part.call_id] = calls_by_id.get(part.call_id, 0) + 1
    expected = sum(calls_by_id.get(p.call_id, 0) for p in parts if isinstance(p, m.LMToolResultPart) and p.call_id is not None)
    answers = list(store.quads_for_pattern(None, ox.NamedNode(v.slot_iri("answers")), None))
    assert len(answers) == expected
    label = ox.NamedNode(v.slot_iri("call_id"))
    for quad in answers:
        [result_id] = store.quads_for_pattern(quad.subject, label, None)
        [call_id] = store.quads_for_pattern(quad.object, label, None)
        assert result_id.object == call_id.object


def test_some_fixture_has_answered_tool_calls():
    # The link test above must not pass vacuously.
    traces = [trace_from_json(load(name)) for name in FIXTURES]
    assert sum(len(list(store_of(t).quads_for_pattern(None, ox.NamedNode(v.slot_iri("answers")), None))) for t in traces) >= 3


@pytest.mark.parametrize("name", FIXTURES)
def test_derived_facts_are_ignored_when_reading_back(name):
    trace = trace_from_json(load(name))
    [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.TURTLE), RdfFormat.TURTLE)
    assert back == trace


@pytest.mark.parametrize(
    ("started_at", "ended_at", "seconds"),
    [
        ("2031-01-01T10:00:00+00:00", "2031-01-01T10:00:01.25+00:00", "1.25"),
        ("2030-12-31T23:59:59.5+00:00", "2031-01-01T00:00:00.75+00:00", "1.25"),  # across midnight, month and year
        ("2031-03-01T10:00:00+02:00", "2031-03-01T08:00:00.000001+00:00", "0.000001"),  # different offsets, one instant
        ("2031-01-01T10:00:00", "2031-01-01T10:00:00.5", "0.5"),  # both without offset
        ("2031-01-01T10:00:05+00:00", "2031-01-01T10:00:00+00:00", "-5"),  # an end before the start is kept as it is
        ("2031-01-01T10:00:00+00:00", "2031-01-01T10:00:01", None),  # one offset only: not comparable
        ("2031-01-01T10:00:00+00:00", "not a time", None),
        ("2031-01-01T10:00:00+00:00", None, None),
    ],
)
def test_a_call_duration_is_the_exact_seconds_between_its_times(started_at, ended_at, seconds):
    trace = m.Trace(
        source_kind="program_run",
        source_format="dspy_callback",
        calls=[m.ToolExecution(tool_call=m.ToolCall(name="t"), started_at=started_at, ended_at=ended_at)],
    )
    store = store_of(trace)
    assert value(store, "duration") == seconds
    if seconds is not None:
        (quad,) = store.quads_for_pattern(None, ox.NamedNode(v.slot_iri("duration")), None)
        assert quad.object.datatype == ox.NamedNode(v.XSD_DECIMAL)


def test_a_tool_execution_states_the_name_of_the_tool_it_ran():
    trace = m.Trace(
        source_kind="program_run",
        source_format="dspy_callback",
        calls=[
            m.ToolExecution(tool_call=m.ToolCall(name=name), started_at="2031-01-01T10:00:00+00:00")
            for name in ("search", "lookup", "search")
        ],
    )
    store = store_of(trace)
    tool_name = ox.NamedNode(v.slot_iri("tool_name"))
    tool_call = ox.NamedNode(v.slot_iri("tool_call"))
    label = ox.NamedNode(v.slot_iri("name"))
    stated = {}
    for quad in store.quads_for_pattern(None, tool_name, None):
        [call] = store.quads_for_pattern(quad.subject, tool_call, None)
        [name] = store.quads_for_pattern(call.object, label, None)
        assert quad.object == name.object == ox.Literal(name.object.value)
        stated[quad.subject.value] = quad.object.value
    assert sorted(stated.values()) == ["lookup", "search", "search"]
    [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.TURTLE), RdfFormat.TURTLE)
    assert back == trace
