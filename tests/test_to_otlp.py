"""Traces written back as OTLP JSON with the GenAI conventions: what MLflow, Phoenix and Langfuse ingest, and what
``export --from otlp`` reads back to the same traces, except the fields each trace lists as not carried."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import re

import dspy
import pytest
from conftest import DATA, PART_KINDS, load
from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from traced_programs import run_programs

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.identity import content_digest, content_payload, execution_id, trace_iri
from dspy_rdf.capture.recorder import MemorySink, TraceRecorder
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.interop.otlp import LOST, differences, trace_to_resource_spans
from dspy_rdf.rdf.formats import RdfFormat, parse_traces, serialize_traces
from dspy_rdf.sources.tracejson import trace_from_json, traces_from_json
from dspy_rdf.store import EmbeddedStore

IMPORTED = sorted(p.relative_to(DATA).as_posix() for d in ("mlflow", "otlp") for p in (DATA / d).iterdir() if p.suffix in (".json", ".jsonl"))
KINDS = {
    "history_dicts_dspy3.3.1.json": "lm_history",
    "history_entry_all_parts.json": "lm_history_entry",
    "openai_exchange_tool_loop.json": "request_response",
    "openai_request_react.json": "lm_request",
    "openai_response_logprobs.json": "lm_response",
}


@pytest.fixture(scope="module")
def recorded() -> list[m.Trace]:
    """The three programs of traced_programs.py recorded live (real dspy.LM, TraceRecorder)."""
    sink = MemorySink()
    with dspy.context(callbacks=[TraceRecorder(sink)]):
        run_programs()
    assert len(sink.traces) == 3
    return sink.traces


def round_trip(trace: m.Trace) -> tuple[m.Trace, list[dict[str, str]], dict]:
    """The trace read back from its export, what the export listed as not carried, and the export."""
    resource_spans, lost = trace_to_resource_spans(trace)
    export = json.loads(json.dumps({"resourceSpans": [resource_spans]}))
    [back] = traces_from_json(export)
    return back, lost, export


def assert_back_but_for_what_is_listed(trace: m.Trace, back: m.Trace, lost: list[dict[str, str]]) -> None:
    trace = dataclasses.replace(trace, source_index=None)
    assert all(x["reason"] == LOST for x in lost)
    assert back.losses == [*trace.losses, *lost]
    assert differences(trace, back) == [x["field"] for x in lost] + (["losses"] if lost else [])
    # one execution is one trace: a run keeps its IRI (the id of its execution), other traces that of their content
    same_iri = not lost or execution_id(trace) is not None
    assert (trace_iri(back) == trace_iri(trace)) == same_iri
    assert (back_digest := content_digest(content_payload(back))) == content_digest(content_payload(trace)) or lost, back_digest


def pattern(field: str) -> str:
    return re.sub(r"\[\d+\]", "[i]", field)


def test_every_case_is_collected():
    assert len(IMPORTED) == 8 and len(KINDS) == 5 and len(PART_KINDS) == 11


def test_a_recorded_run_comes_back_from_its_export_except_the_fields_it_lists(recorded):
    lost_kinds = set()
    for trace in recorded:
        back, lost, _ = round_trip(trace)
        assert_back_but_for_what_is_listed(trace, back, lost)
        lost_kinds |= {pattern(x["field"]) for x in lost}
    # what the GenAI conventions have no attribute for, in a run of the real dspy.LM
    assert lost_kinds == {
        "calls[i].entry.extra_fields",  # LiteLLM's raw response DSPy keeps in the history entry
        "calls[i].entry.response.usage.extra_fields",  # prompt_tokens_details, completion_tokens_details
        "calls[i].returned_tool_calls",  # which LM tool-call parts a module returned as dspy.ToolCalls
    }


def test_a_run_without_such_fields_comes_back_as_the_same_graph(recorded):
    for trace in recorded:
        trace = copy.deepcopy(trace)
        for call in trace.calls:
            if isinstance(call, m.LMCall):
                call.entry.extra_fields = {}
                call.entry.response.usage.extra_fields = {}
            if isinstance(call, m.ModuleCall):
                call.returned_tool_calls = []
        back, lost, _ = round_trip(trace)
        assert lost == [] and back == trace and trace_iri(back) == trace_iri(trace)
        assert serialize_traces([back]) == serialize_traces([trace])


@pytest.mark.parametrize("name", IMPORTED)
def test_an_imported_trace_comes_back_from_its_export_except_the_fields_it_lists(name):
    for item in read_traces(DATA / name):
        back, lost, _ = round_trip(item.trace)
        assert_back_but_for_what_is_listed(item.trace, back, lost)
        # MLflow's LM cache flag; a model type OpenInference and the GenAI conventions do not record, which comes back "chat"
        assert {pattern(x["field"]) for x in lost} <= {"calls[i].entry.request.config.cache", "calls[i].entry.model_type"}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_history_entries_requests_and_responses_come_back_as_themselves(name):
    trace = trace_from_json(load(name))
    assert trace.source_kind == KINDS[name]
    back, lost, _ = round_trip(trace)
    assert (back.source_kind, back.source_format) == (trace.source_kind, trace.source_format)
    assert_back_but_for_what_is_listed(trace, back, lost)


@pytest.mark.parametrize("kind", PART_KINDS)
def test_every_part_kind_crosses_the_genai_conventions_exactly(kind):
    part = trace_from_json(load(f"part_{kind}.json")).request.messages[0].parts[0]
    entry = m.LMHistoryEntry(
        request=m.LMRequest(model="openai/gpt-4o-mini", messages=[m.LMMessage(role="user", parts=[part], metadata={"turn": 1})]),
        response=m.LMResponse(outputs=[m.LMOutput(parts=[part], finish_reason="stop")], model="openai/gpt-4o-mini"),
        timestamp="2026-01-01T00:00:00", uuid="u-1", model_type="chat",
    )
    trace = m.Trace(source_kind="lm_history_entry", entries=[entry])
    back, lost, export = round_trip(trace)
    assert lost == [] and back == trace
    [span] = export["resourceSpans"][0]["scopeSpans"][0]["spans"]
    attributes = {a["key"]: a["value"] for a in span["attributes"]}
    genai = json.loads(attributes["gen_ai.input.messages"]["stringValue"])[0]["parts"][0]["type"]
    assert genai == {"text": "text", "thinking": "reasoning", "tool_call": "tool_call", "tool_result": "tool_call_response",
                     "refusal": "refusal", "citation": "citation"}.get(kind, genai)
    assert genai in ("text", "reasoning", "tool_call", "tool_call_response", "refusal", "citation", "blob", "uri", "file", "document")


def spans_of(export: dict) -> list[dict]:
    return [s for rs in export["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def attributes_of(span: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_lm_calls_are_chat_spans_and_tool_executions_carry_the_call_id(recorded):
    native = recorded[2]
    _, _, export = round_trip(native)
    spans = spans_of(export)
    assert [s["name"] for s in spans] == [
        "invoke_workflow CallTools", "invoke_workflow Predict", "chat openai/gpt-4o-mini",
        "execute_tool add", "execute_tool divide",
    ]
    chat = attributes_of(spans[2])
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.provider.name"] == "openai"
    assert [p["type"] for msg in json.loads(chat["gen_ai.input.messages"]) for p in msg["parts"]] == ["text", "text"]
    [output] = json.loads(chat["gen_ai.output.messages"])
    assert [(p["type"], p["id"], p["arguments"]) for p in output["parts"]] == [("tool_call", "call_add", {"a": 1, "b": 2}), ("tool_call", "call_div", {"a": 1, "b": 0})]
    assert [t["name"] for t in json.loads(chat["gen_ai.tool.definitions"])] == ["add", "divide"]
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == ("10", "20")
    add, divide = (attributes_of(s) for s in spans[3:])
    # DSPy's tool callbacks do not see the call id; the export writes the id of the part the execution answered
    assert (add["gen_ai.tool.call.id"], add["gen_ai.tool.call.arguments"], add["gen_ai.tool.call.result"]) == ("call_add", '{"a":1,"b":2}', "3")
    assert (divide["gen_ai.tool.call.id"], add["dspy_rdf.pairing"]) == ("call_div", "name_and_args")
    assert spans[4]["status"] == {"code": 2, "message": "ZeroDivisionError: division by zero"}
    assert spans[4]["events"][0]["name"] == "exception"
    assert "dspy_rdf.source_format" in attributes_of(spans[0])


def test_the_root_span_carries_the_session_and_the_user_and_they_come_back_exactly(recorded):
    trace = dataclasses.replace(copy.deepcopy(recorded[2]), session_id="conversation 1", user_id="alice")
    back, lost, export = round_trip(trace)
    spans = spans_of(export)
    keys = ("session.id", "gen_ai.conversation.id", "user.id")
    carried = [{k: v for k, v in attributes_of(span).items() if k in keys} for span in spans]
    assert "parentSpanId" not in spans[0] and carried[0] == {"session.id": "conversation 1", "gen_ai.conversation.id": "conversation 1", "user.id": "alice"}
    assert all(c == {} for c in carried[1:])  # the root span only
    assert_back_but_for_what_is_listed(trace, back, lost)
    assert (back.session_id, back.user_id) == ("conversation 1", "alice") and "session_id" not in {x["field"] for x in lost}
    assert serialize_traces([back]) != serialize_traces([dataclasses.replace(back, session_id=None)])


def test_the_export_is_an_export_trace_service_request(recorded):
    _, _, export = round_trip(recorded[1])
    # OTLP/JSON writes ids as hex; protobuf's JSON mapping (what json_format parses) as base64
    proto_json = copy.deepcopy(export)
    for span in spans_of(proto_json):
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in span:
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    request = Parse(json.dumps(proto_json), ExportTraceServiceRequest())
    spans = request.resource_spans[0].scope_spans[0].spans
    assert len(spans) == len(recorded[1].calls) == 13
    assert spans[0].trace_id.hex() == spans_of(export)[0]["traceId"] and len(spans[0].span_id) == 8
    assert {a.key for a in spans[2].attributes} >= {"gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages"}
    assert spans[0].start_time_unix_nano < spans[0].end_time_unix_nano
    assert request.resource_spans[0].scope_spans[0].scope.name == "dspy-rdf"


def test_to_otlp_writes_rdf_files_and_stores_and_refuses_what_holds_no_call(tmp_path, capsys, recorded):
    rdf = tmp_path / "traces.nq"
    part = m.Trace(source_kind="lm_part", parts=[m.LMTextPart(text="hello")])
    rdf.write_bytes(serialize_traces([*recorded, part]))
    assert main(["to-otlp", str(rdf), "-o", str(tmp_path / "out.json")]) == 1
    out, err = capsys.readouterr()
    assert out.strip() == f"wrote 3 trace(s) to {tmp_path / 'out.json'} (OTLP JSON); 3 with fields the GenAI conventions cannot carry, listed in their losses; 1 not written"
    assert err.strip() == f"not written: {trace_iri(part)}: a lm_part trace holds no LM call or tool execution to write as spans"
    store = str(tmp_path / "store")
    assert main(["export", str(tmp_path / "out.json"), "--store", store]) == 0
    assert main(["to-otlp", "--store", store, "-o", str(tmp_path / "again.jsonl")]) == 0
    lines = (tmp_path / "again.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(len(json.loads(line)["resourceSpans"]) == 1 for line in lines)
    assert "wrote 3 trace(s)" in capsys.readouterr().out
    # the second export lost nothing more: what the first could not carry is already listed
    with EmbeddedStore(tmp_path / "store", read_only=True) as s:
        stored = {trace.calls[0].dspy_call_id: trace for _, trace in s.traces()}
    for item in read_traces(tmp_path / "again.jsonl"):
        before = stored[item.trace.calls[0].dspy_call_id]
        assert differences(before, dataclasses.replace(item.trace, source_index=before.source_index)) == []


def test_to_otlp_says_what_it_needs(tmp_path, capsys):
    assert main(["to-otlp", "-o", str(tmp_path / "x.json")]) == 2
    assert "give RDF FILEs or --store" in capsys.readouterr().err
    assert main(["to-otlp", str(tmp_path / "missing.nq"), "-o", str(tmp_path / "x.json")]) == 2
    assert "missing.nq" in capsys.readouterr().err


def test_the_export_round_trips_through_rdf_too(recorded, tmp_path):
    rdf = tmp_path / "t.trig"
    rdf.write_bytes(serialize_traces(recorded, RdfFormat.TRIG))
    assert main(["to-otlp", str(rdf), "-o", str(tmp_path / "o.json")]) == 0
    assert main(["export", str(tmp_path / "o.json"), "-o", str(tmp_path / "back.trig")]) == 0
    back = {t.started_at: t for _, t in parse_traces(tmp_path / "back.trig")}
    for trace in recorded:
        again = back[trace.started_at]
        assert again.source_format == "dspy_callback" and len(again.calls) == len(trace.calls)


def test_a_trace_whose_time_no_store_keeps_is_skipped_by_name_and_the_others_are_written(tmp_path, capsys):
    """9999-12-31T23:59:59-14:00 is year 10000 in UTC: the graph is named and skipped, the others go (exit 1)."""
    import re as regex

    good = tmp_path / "good.nq"
    assert main(["export", str(DATA / "crosspath" / "capture.jsonl"), "-o", str(good)]) == 0
    text = good.read_text(encoding="utf-8")
    first_graph = text.splitlines()[0].rsplit(" ", 2)[-2]
    late = "".join(
        regex.sub(r'"[0-9T:.Z-]+"\^\^<http://www.w3.org/2001/XMLSchema#dateTime>', '"9999-12-31T23:59:59-14:00"^^<http://www.w3.org/2001/XMLSchema#dateTime>', line) + "\n"
        if line.rsplit(" ", 2)[-2] == first_graph else line + "\n"
        for line in text.splitlines()
    )
    (tmp_path / "late.nq").write_text(late, encoding="utf-8")
    capsys.readouterr()
    assert main(["to-otlp", str(tmp_path / "late.nq"), "-o", str(tmp_path / "out.json")]) == 1
    out, err = capsys.readouterr()
    assert f"graph {first_graph}: '9999-12-31T23:59:59-14:00' is not a date-time of the years 1 to 9999 (in UTC)" in err
    assert "wrote 2 trace(s)" in out and "1 bad input(s) skipped" in out and "Traceback" not in err
