"""MLflow traces (MLflow 2 and 3 JSON, lists, search pages, JSON Lines) read as program runs.

The fixtures are real: ``mlflow.dspy.autolog()`` recording the three programs of ``traced_programs.py`` (Predict, ReAct
with a failing tool, native tool calling) on the real ``dspy.LM``, read back from a SQLite and a file tracking store
(``tests/data/mlflow/make_fixtures_mlflow.py``)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import DATA

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.identity import trace_iri
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.formats import RdfFormat, parse_traces, serialize_traces
from dspy_rdf.sources.spans import MAX_SPAN_DEPTH
from dspy_rdf.sources.tracejson import TraceStream, trace_from_json, trace_to_json, traces_from_json
from dspy_rdf.store import EmbeddedStore
from dspy_rdf.validation import validate_traces

MLFLOW = DATA / "mlflow"
FILES = sorted(p.name for p in MLFLOW.iterdir() if p.suffix in (".json", ".jsonl"))
SHAPES = ["Predict", "ReAct", "CallTools"]


def test_every_mlflow_fixture_is_collected():
    assert FILES == ["mlflow2_file_store_list.json", "mlflow3_file_store_list.json", "mlflow3_search_page.json", "mlflow3_sqlite_traces.jsonl"]


def calls_of(trace: m.Trace) -> list[tuple[str, str | None]]:
    """Each call as (kind, what): module class, model, or tool name."""
    out = []
    for call in trace.calls:
        if isinstance(call, m.ModuleCall):
            out.append(("module", call.module_class))
        elif isinstance(call, m.LMCall):
            out.append(("lm", call.model))
        else:
            out.append(("tool", call.tool_call.name))
    return out


def runs(name: str) -> list[m.Trace]:
    items = list(read_traces(MLFLOW / name))
    assert [i.error for i in items] == [None, None, None]
    return [i.trace for i in items]


LM = ("lm", "openai/gpt-4o-mini")


@pytest.mark.parametrize("name", FILES)
def test_each_trace_is_one_program_run_with_the_calls_the_program_made(name):
    predict, react, native = runs(name)
    assert {(t.source_kind, t.source_format) for t in (predict, react, native)} == {("program_run", "mlflow")}
    assert calls_of(predict) == [("module", "Predict"), LM]
    # MLflow's DSPy callback records no span for ReAct's own finish tool
    assert calls_of(react) == [
        ("module", "ReAct"), ("module", "Predict"), LM, ("tool", "add"), ("module", "Predict"), LM, ("tool", "divide"),
        ("module", "Predict"), LM, ("module", "ChainOfThought"), ("module", "Predict"), LM,
    ]
    assert calls_of(native) == [("module", "CallTools"), ("module", "Predict"), LM, ("tool", "add"), ("tool", "divide")]
    assert [c.parent_call for c in native.calls] == [None, 0, 1, 0, 0]
    for trace in (predict, react, native):
        assert trace.source_trace_id and trace.started_at == trace.calls[0].started_at
        assert validate_traces([trace]).conforms


@pytest.mark.parametrize("name", FILES)
def test_lm_spans_hold_messages_parts_tool_calls_and_tools_offered(name):
    predict, _, native = runs(name)
    entry = predict.calls[1].entry
    assert [msg.role for msg in entry.request.messages] == ["system", "user"]
    assert "[[ ## question ## ]]\n2 + 2?" in entry.request.messages[1].parts[0].text
    assert entry.response.outputs[0].parts[0].text.startswith("[[ ## answer ## ]]\n4")
    entry = native.calls[2].entry
    assert [tool.name for tool in entry.request.tools] == ["add", "divide"]
    assert entry.request.tools[0].parameters["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    parts = entry.response.outputs[0].parts
    assert [(p.call_id, p.name, p.args) for p in parts] == [("call_add", "add", {"a": 1, "b": 2}), ("call_div", "divide", {"a": 1, "b": 0})]
    assert entry.extra_fields["dspy_rdf_filled"] == {"uuid": "derived", "timestamp": "derived"}


@pytest.mark.parametrize("name", FILES)
def test_tool_executions_are_linked_to_the_tool_calls_that_asked_for_them(name):
    _, react, native = runs(name)
    add, divide = (c for c in native.calls if isinstance(c, m.ToolExecution))
    # MLflow's tool spans carry no call id: paired by tool name and arguments within the parent span
    assert (add.pairing, add.answers) == ("name_and_args", m.PartRef(call=2, output=0, part=0))
    assert (divide.pairing, divide.answers) == ("name_and_args", m.PartRef(call=2, output=0, part=1))
    assert (add.tool_result.result, add.tool_result.is_error) == (3, False)
    assert divide.error == divide.tool_result.error == "ZeroDivisionError: division by zero" and divide.tool_result.is_error
    # ReAct asks for tools in text fields: linked to the LM call that decided
    tools = [(i, c) for i, c in enumerate(react.calls) if isinstance(c, m.ToolExecution)]
    assert [(c.pairing, c.decided_by) for _, c in tools] == [("preceding_lm_call", 2), ("preceding_lm_call", 5)]


def test_losses_name_what_mlflow_records_that_no_slot_holds():
    predict, _, native = runs("mlflow3_sqlite_traces.jsonl")
    reasons = {x["field"]: x["reason"] for x in predict.losses}
    assert reasons["info"] == "no slot holds MLflow's tags, trace_location, trace_metadata"
    assert "2 DSPy adapter span(s) (ChatAdapter.format, ChatAdapter.parse)" in reasons["spans"]
    root = next(k for k, v in reasons.items() if "signature" in v)
    assert reasons[root] == "no slot holds signature"  # the run's token usage, on its top-level module, is its usage
    assert predict.calls[0].usage is not None and (predict.calls[0].usage.input_tokens, predict.calls[0].usage.output_tokens) == (10, 20)
    stack = [x for x in native.losses if x["field"].endswith("events.exception")]
    assert len(stack) == 1 and "stack trace" in stack[0]["reason"]


def test_mlflow_2_and_3_record_the_same_runs():
    shapes = {name: [calls_of(t) for t in runs(name)] for name in FILES}
    assert len({json.dumps(s) for s in shapes.values()}) == 1
    assert runs("mlflow2_file_store_list.json")[0].source_trace_id.isalnum()  # MLflow 2's request id
    assert runs("mlflow3_sqlite_traces.jsonl")[0].source_trace_id.startswith("tr-")


def test_a_trace_has_one_identity_wherever_it_is_written():
    # the search page and the JSON Lines hold the same three traces of one tracking store
    page = runs("mlflow3_search_page.json")
    lines = runs("mlflow3_sqlite_traces.jsonl")
    assert [trace_iri(t) for t in page] == [trace_iri(t) for t in lines]
    one = json.loads((MLFLOW / "mlflow3_sqlite_traces.jsonl").read_text().splitlines()[1])
    assert trace_iri(trace_from_json(one)) == trace_iri(lines[1])


def test_reimporting_the_same_file_adds_nothing(tmp_path):
    results = []
    for _ in range(2):
        assert main(["export", str(MLFLOW / "mlflow3_search_page.json"), "--store", str(tmp_path / "store")]) == 0
        with EmbeddedStore(tmp_path / "store", read_only=True) as store:
            results.append((store.trace_iris(), store.stats()["triples"]))
    assert results[0] == results[1] and len(results[0][0]) == 3


def test_a_trace_round_trips_through_rdf_and_its_json_envelope():
    for trace in runs("mlflow2_file_store_list.json"):
        trace = dataclasses.replace(trace, source_index=None)
        [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.TRIG), RdfFormat.TRIG)
        assert back == trace
        again = trace_from_json(json.loads(json.dumps(trace_to_json(trace))))
        assert again == trace and trace_iri(again) == trace_iri(trace)


def test_a_malformed_trace_is_skipped_with_file_line_and_field_and_the_others_import(tmp_path, capsys):
    lines = (MLFLOW / "mlflow3_sqlite_traces.jsonl").read_text().splitlines()
    bad = json.loads(lines[1])
    bad["data"]["spans"][3]["span_id"] = "not an id"
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(bad), lines[2]]) + "\n")
    assert main(["export", str(path), "-o", str(tmp_path / "out.nq")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"skipped {path}:2, field data.spans[3].span_id: expected a 8-byte id as 16 hex digits or base64, got 'not an id'"]
    assert len(parse_traces(tmp_path / "out.nq")) == 2


def test_a_bad_trace_in_a_search_page_names_its_place_and_the_others_import():
    page = json.loads((MLFLOW / "mlflow3_search_page.json").read_text())
    del page["traces"][0]["data"]["spans"][1]["name"]
    items = list(TraceStream().add(page))
    assert [i.error is None for i in items] == [False, True, True]
    assert items[0].error.field == "traces[0].data.spans[1].name"
    with pytest.raises(TraceInputError, match="traces\\[0\\].data.spans\\[1\\].name"):
        traces_from_json(page)


def _chain(depth: int) -> dict:
    spans = [
        {"trace_id": "AAAAAAAAAAAAAAAAAAAAAQ==", "span_id": f"{i + 1:016x}", "parent_span_id": f"{i:016x}" if i else None,
         "name": f"M{i}.forward", "start_time_unix_nano": 1000 + i, "end_time_unix_nano": 5000 - i,
         "status": {"code": "STATUS_CODE_OK", "message": ""}, "attributes": {"mlflow.spanType": '"CHAIN"'}, "events": []}
        for i in range(depth)
    ]
    return {"info": {"trace_id": "tr-1", "trace_location": {}, "request_time": "x", "state": "OK"}, "data": {"spans": spans}}


def test_nesting_deeper_than_the_bound_is_refused_with_a_clear_error():
    trace = trace_from_json(_chain(MAX_SPAN_DEPTH))
    assert len(trace.calls) == MAX_SPAN_DEPTH and trace.calls[-1].parent_call == MAX_SPAN_DEPTH - 2
    with pytest.raises(TraceInputError, match=f"spans nested more than {MAX_SPAN_DEPTH} levels deep"):
        trace_from_json(_chain(MAX_SPAN_DEPTH + 2))


def test_a_cycle_of_parent_spans_is_refused():
    value = _chain(3)
    value["data"]["spans"][0]["parent_span_id"] = f"{3:016x}"
    with pytest.raises(TraceInputError, match="is its own ancestor") as info:
        trace_from_json(value)
    assert info.value.field.startswith("data.spans[")


def test_a_value_of_several_traces_is_not_one_trace():
    page = json.loads((MLFLOW / "mlflow3_search_page.json").read_text())
    with pytest.raises(TraceInputError, match="holds 3 traces, not one; read it with traces_from_json"):
        trace_from_json(page)
    assert len(traces_from_json(page)) == 3


def test_an_lm_span_of_another_library_reads_its_openai_payload_tools_and_usage():
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    attributes = {
        "mlflow.traceRequestId": '"tr-2"',
        "mlflow.spanType": '"CHAT_MODEL"',
        "mlflow.message.format": '"openai"',
        "mlflow.spanInputs": json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "Weather in Paris?"}], "temperature": 0.1}),
        "mlflow.spanOutputs": json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-2024", "choices": [
            {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}}]}),
        "mlflow.chat.tools": json.dumps([tool]),
        "mlflow.chat.tokenUsage": json.dumps({"input_tokens": 12, "output_tokens": 5, "total_tokens": 17}),
        "mlflow.llm.model": '"gpt-4o"',
    }
    span = {"trace_id": "AAAAAAAAAAAAAAAAAAAAAg==", "span_id": "AAAAAAAAAAE=", "parent_span_id": None, "name": "Completions",
            "start_time_unix_nano": 1, "end_time_unix_nano": 2, "status": {"code": "STATUS_CODE_OK"}, "attributes": attributes, "events": []}
    value = {"info": {"trace_id": "tr-2", "trace_location": {}, "request_time": "x", "state": "OK"}, "data": {"spans": [span]}}
    [call] = trace_from_json(value).calls
    request, response = call.entry.request, call.entry.response
    assert (call.model, request.config.temperature, [t.name for t in request.tools]) == ("gpt-4o", 0.1, ["get_weather"])
    assert response.outputs[0].finish_reason == "tool_calls" and response.outputs[0].parts[0].call_id == "c1"
    assert (response.usage.input_tokens, response.usage.total_tokens, response.response_id, response.model) == (12, 17, "chatcmpl-1", "gpt-4o-2024")
