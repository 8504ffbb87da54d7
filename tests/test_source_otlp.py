"""OpenTelemetry spans (OTLP JSON and JSON Lines) read as program runs, in every attribute vocabulary side by side.

The fixtures are real (``tests/data/otlp/make_fixtures_otlp.py``): OpenInference's DSPy instrumentor and MLflow's
OpenTelemetry GenAI export recording the three programs of ``traced_programs.py`` through the OpenTelemetry SDK, and
the GenAI conventions' own examples (``make_fixtures_genai_spec.py``)."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from conftest import DATA, examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_source_mlflow import LM, calls_of

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.identity import trace_iri
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.formats import RdfFormat, parse_traces, serialize_traces
from dspy_rdf.sources import ReadOptions
from dspy_rdf.sources.otlp import GRACE_LINES, SOURCE
from dspy_rdf.sources.tracejson import trace_from_json, trace_to_json, traces_from_json
from dspy_rdf.store import EmbeddedStore
from dspy_rdf.validation import validate_traces

OTLP = DATA / "otlp"
FILES = sorted(p.name for p in OTLP.iterdir() if p.suffix in (".json", ".jsonl"))
PROGRAMS = ["mlflow_genai_dspy331.json", "openinference_dspy331.json", "openinference_dspy331_batches.jsonl"]


def test_every_otlp_fixture_is_collected():
    assert FILES == ["genai_semconv_examples.json", *PROGRAMS]


def runs(name: str) -> list[m.Trace]:
    items = list(read_traces(OTLP / name))
    assert all(i.error is None for i in items), [str(i.error) for i in items]
    return [i.trace for i in items]


@pytest.mark.parametrize("name", PROGRAMS)
def test_each_trace_is_one_program_run_with_the_calls_the_program_made(name):
    predict, react, native = runs(name)
    assert {(t.source_kind, t.source_format) for t in (predict, react, native)} == {("program_run", "otlp")}
    mlflow = name.startswith("mlflow")
    # MLflow's GenAI translation names a dspy.Predict generate_content (read as the Predict it is) and a plain module
    # CHAIN; it writes no span for ReAct's finish tool, which OpenInference records
    predict_module = ("module", "Predict")
    assert calls_of(predict) == [predict_module, LM]
    finish = [] if mlflow else [("tool", "finish")]
    assert calls_of(react) == [
        ("module", "ReAct"), predict_module, LM, ("tool", "add"), predict_module, LM, ("tool", "divide"), predict_module, LM,
        *finish, ("module", "CHAIN" if mlflow else "ChainOfThought"), predict_module, LM,
    ]
    assert calls_of(native) == [("module", "CHAIN" if mlflow else "CallTools"), predict_module, LM, ("tool", "add"), ("tool", "divide")]
    divide = native.calls[4]
    assert divide.error == "ZeroDivisionError: division by zero" and divide.tool_result.is_error
    for trace in (predict, react, native):
        assert len(trace.source_trace_id) == 32 and validate_traces([trace]).conforms


def test_openinference_lm_spans_hold_the_call_and_tool_executions_are_relinked_by_name_and_arguments():
    _, react, native = runs("openinference_dspy331.json")
    entry = native.calls[2].entry
    assert [tool.name for tool in entry.request.tools] == ["add", "divide"]
    assert [(p.call_id, p.args) for p in entry.response.outputs[0].parts] == [("call_add", {"a": 1, "b": 2}), ("call_div", {"a": 1, "b": 0})]
    assert [(c.pairing, c.answers) for c in native.calls[3:]] == [
        ("name_and_args", m.PartRef(call=2, output=0, part=0)), ("name_and_args", m.PartRef(call=2, output=0, part=1)),
    ]
    assert [c.pairing for c in react.calls if isinstance(c, m.ToolExecution)] == ["preceding_lm_call"] * 3
    assert react.calls[3].tool_call.args == {"a": 2, "b": 3}  # OpenInference binds Tool.__call__(**kwargs) as {"kwargs": ...}


def test_the_flattened_openinference_messages_say_what_the_dspy_payload_says():
    value = json.loads((OTLP / "openinference_dspy331.json").read_text())
    for span in value["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        if span["name"].endswith("LM.__call__"):
            span["attributes"] = [a for a in span["attributes"] if a["key"] not in ("input.value", "output.value")]
    flat = traces_from_json(value)
    for full, only_flat in zip(runs("openinference_dspy331.json"), flat):
        for a, b in zip(full.calls, only_flat.calls):
            if isinstance(a, m.LMCall) and not any(isinstance(p, m.LMToolCallPart) for p in a.entry.response.outputs[0].parts):
                assert b.entry.request.messages == a.entry.request.messages
                assert b.entry.response.outputs[0].parts == a.entry.response.outputs[0].parts
                assert b.model == a.model == "openai/gpt-4o-mini"


def test_the_same_spans_in_one_export_or_over_eight_lines_give_the_same_traces():
    whole, lines = runs("openinference_dspy331.json"), runs("openinference_dspy331_batches.jsonl")
    assert len((OTLP / "openinference_dspy331_batches.jsonl").read_text().splitlines()) == 8
    assert [trace_iri(t) for t in whole] == [trace_iri(t) for t in lines]
    assert [i.line for i in read_traces(OTLP / "openinference_dspy331_batches.jsonl")] == [1, 7, 8]


def batches(copies: int) -> list[dict]:
    """The eight exports of the batches fixture, repeated ``copies`` times with fresh trace ids."""
    lines = (OTLP / "openinference_dspy331_batches.jsonl").read_text().splitlines()
    ids = sorted({s["traceId"] for line in lines for r in json.loads(line)["resourceSpans"]
                  for sc in r["scopeSpans"] for s in sc["spans"]})
    out = []
    for copy_number in range(copies):
        for line in lines:
            for number, trace_id in enumerate(ids):
                line = line.replace(trace_id, f"{copy_number:08x}{number:024x}")
            out.append(json.loads(line))
    return out


def test_a_trace_is_kept_only_while_its_spans_may_still_come():
    assembly = SOURCE.assembly(ReadOptions())
    waiting, read = [], 0
    for number, export in enumerate(batches(12), start=1):
        read += len(list(assembly.add(export, "program_run", number)))
        waiting.append(len(assembly.pending))
    read += len(list(assembly.finish()))
    assert read == 36
    # memory is bounded by the grace window, not by the length of the file: 96 exports, never more than a few waiting
    assert max(waiting) <= 3 + GRACE_LINES and waiting[-1] > 0


def test_a_child_span_exported_after_its_root_joins_its_trace(tmp_path):
    """Exporters batch spans by end time: a child may be sent in the export after its root's."""
    whole = json.loads((OTLP / "openinference_dspy331.json").read_text())
    spans = whole["resourceSpans"][0]["scopeSpans"][0]["spans"]
    first = spans[0]["traceId"]
    root = next(s for s in spans if s["traceId"] == first and not s.get("parentSpanId"))
    children = [s for s in spans if s["traceId"] == first and s is not root]

    def export(chosen: list[dict]) -> str:
        value = copy.deepcopy(whole)
        value["resourceSpans"][0]["scopeSpans"][0]["spans"] = chosen
        del value["resourceSpans"][1:]
        return json.dumps(value)

    late = tmp_path / "late.jsonl"
    late.write_text(export([root, *children[1:]]) + "\n" + export(children[:1]) + "\n")
    on_time = tmp_path / "on_time.jsonl"
    on_time.write_text(export([root, *children]) + "\n")
    (a,), (b,) = read_traces(late), read_traces(on_time)
    assert a.error is None and len(a.trace.calls) == len(b.trace.calls) > 0
    assert trace_iri(a.trace) == trace_iri(b.trace)

    # a span that comes once the trace has been read is named, not made into a second trace
    filler = export([])
    too_late = tmp_path / "too_late.jsonl"
    too_late.write_text("\n".join([export([root, *children[1:]]), *[filler] * GRACE_LINES, export(children[:1])]) + "\n")
    reads = list(read_traces(too_late))
    assert [r.error is None for r in reads] == [True, False]
    assert f"1 span(s) of trace {a.trace.source_trace_id}" in str(reads[1].error) and f"too_late.jsonl:{GRACE_LINES + 2}:" in str(reads[1].error)


def test_mlflow_genai_export_of_dspy_keeps_calls_tools_and_errors_but_no_messages():
    _, react, native = runs("mlflow_genai_dspy331.json")
    # MLflow's translation drops the messages of DSPy's LM spans (its converter reads OpenAI's shape only)
    assert all(c.entry is None for c in react.calls if isinstance(c, m.LMCall))
    assert [c.tool_call.name for c in native.calls if isinstance(c, m.ToolExecution)] == ["add", "divide"]  # not "Tool.add"
    assert [(c.pairing, c.decided_by) for c in native.calls if isinstance(c, m.ToolExecution)] == [("preceding_lm_call", 2)] * 2
    held = " ".join(x["reason"] for x in native.losses)
    assert "gen_ai.usage.input_tokens" not in held and "cache, max_tokens, model_type, temperature" in held
    # MLflow reports the run's usage on its top-level module only: that module call's usage
    assert (native.calls[0].usage.input_tokens, native.calls[0].usage.output_tokens) == (10, 20)


def semconv() -> dict[str, m.Trace]:
    return {t.losses[0]["reason"].split("semantic-conventions ")[1]: t for t in runs("genai_semconv_examples.json")}


def test_the_conventions_own_examples_read_into_calls_parts_and_usage():
    examples = semconv()
    assert len(examples) == 10
    calls = examples["Tool calls (functions): GenAI client spans when content capturing is enabled on span attributes"].calls
    first, tool, second = calls
    assert first.entry.response.outputs[0].parts[0] == m.LMToolCallPart(name="get_weather", call_id="call_VSPygqKTWdrhaFErNvMV18Yl", args={"location": "Paris"})
    assert (tool.tool_call.call_id, tool.pairing, tool.answers) == ("call_VSPygqKTWdrhaFErNvMV18Yl", "call_id", m.PartRef(call=0, output=0, part=0))
    result = second.entry.request.messages[2].parts[0]
    assert (result.call_id, result.content) == ("call_VSPygqKTWdrhaFErNvMV18Yl", [m.LMTextPart(text="rainy, 57°F")])
    usage = second.entry.response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (97, 52, 149)
    assert (second.entry.request.config.max_tokens, second.entry.response.model) == (200, "gpt-4-0613")
    [media] = examples["Multimodal chat completion"].calls
    kinds = [(p.part_type, p.media_type, p.url or p.file_id or p.data) for p in media.entry.request.messages[0].parts[1:]]
    assert kinds[:2] == [("image", "image/png", kinds[0][2]), ("video", "video/mp4", "gs://my-bucket/my-video.mp4")]
    assert [k[0] for k in kinds] == ["image", "video", "binary", "image", "image", "audio"]
    [reasoning] = examples["Chat completion with reasoning (content enabled)"].calls
    assert [p.part_type for p in reasoning.entry.response.outputs[0].parts] == ["thinking", "text"]
    [instructions] = examples["System instructions along with chat history (content enabled)"].calls
    assert instructions.entry.request.messages[0].parts[0].text == "You must never tell jokes"
    # content capture off: the call, its usage and its settings, without messages
    [quiet] = examples["Simple chat completion: GenAI client span when content capturing is disabled"].calls
    assert (quiet.entry.request.messages, quiet.entry.response.usage.output_tokens, quiet.entry.response.outputs[0].finish_reason) == ([], 47, "stop")


def _span(attributes: dict, **extra) -> dict:
    return {
        "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "openai.chat",
        "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
        "attributes": [{"key": k, "value": v} for k, v in attributes.items()], **extra,
    }


def _export(*spans) -> dict:
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}]}]}


def test_legacy_flattened_prompt_and_completion_are_read():
    attributes = {
        "gen_ai.system": {"stringValue": "openai"},
        "gen_ai.request.model": {"stringValue": "gpt-4o"},
        "gen_ai.prompt.0.role": {"stringValue": "user"},
        "gen_ai.prompt.0.content": {"stringValue": "Weather in Paris?"},
        "gen_ai.completion.0.role": {"stringValue": "assistant"},
        "gen_ai.completion.0.finish_reason": {"stringValue": "tool_calls"},
        "gen_ai.completion.0.tool_calls.0.id": {"stringValue": "call_1"},
        "gen_ai.completion.0.tool_calls.0.name": {"stringValue": "get_weather"},
        "gen_ai.completion.0.tool_calls.0.arguments": {"stringValue": '{"city": "Paris"}'},
        "gen_ai.usage.prompt_tokens": {"intValue": "12"},
        "gen_ai.usage.completion_tokens": {"intValue": 7},
    }
    [call] = trace_from_json(_export(_span(attributes))).calls
    assert call.entry.request.messages[0].parts == [m.LMTextPart(text="Weather in Paris?")]
    output = call.entry.response.outputs[0]
    assert (output.finish_reason, output.parts) == ("tool_calls", [m.LMToolCallPart(name="get_weather", call_id="call_1", args={"city": "Paris"})])
    assert (call.entry.response.usage.input_tokens, call.entry.response.usage.total_tokens) == (12, 19)


def test_openinference_tools_and_token_counts_are_read():
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    attributes = {
        "openinference.span.kind": {"stringValue": "LLM"},
        "llm.model_name": {"stringValue": "gpt-4o"},
        "llm.input_messages.0.message.role": {"stringValue": "user"},
        "llm.input_messages.0.message.contents.0.message_content.type": {"stringValue": "text"},
        "llm.input_messages.0.message.contents.0.message_content.text": {"stringValue": "Look"},
        "llm.input_messages.0.message.contents.1.message_content.type": {"stringValue": "image"},
        "llm.input_messages.0.message.contents.1.message_content.image.image.url": {"stringValue": "https://x/cat.png"},
        "llm.output_messages.0.message.role": {"stringValue": "assistant"},
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": {"stringValue": "c1"},
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": {"stringValue": "get_weather"},
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": {"stringValue": '{"city": "Paris"}'},
        "llm.tools.0.tool.json_schema": {"stringValue": json.dumps(tool)},
        "llm.token_count.prompt": {"intValue": "30"},
        "llm.token_count.completion": {"intValue": "5"},
        "llm.token_count.total": {"intValue": "35"},
        "llm.invocation_parameters": {"stringValue": '{"temperature": 0.2}'},
    }
    [call] = trace_from_json(_export(_span(attributes))).calls
    request, response = call.entry.request, call.entry.response
    assert [p.part_type for p in request.messages[0].parts] == ["text", "image"] and request.messages[0].parts[1].url == "https://x/cat.png"
    assert ([t.name for t in request.tools], request.config.temperature) == (["get_weather"], 0.2)
    assert response.outputs[0].parts == [m.LMToolCallPart(name="get_weather", call_id="c1", args={"city": "Paris"})]
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.total_tokens) == (30, 5, 35)
    assert not call.entry.request.config.extensions


@pytest.mark.parametrize(
    "change, field, message",
    [
        (lambda s: s.update(spanId="xyz"), "spans[0].spanId", "expected a 8-byte id"),
        (lambda s: s.update(startTimeUnixNano="soon"), "spans[0].startTimeUnixNano", "expected nanoseconds"),
        (lambda s: s["attributes"].append({"key": "k", "value": {"mapValue": 1}}), "spans[0].attributes[2].value", "unknown attribute value mapValue"),
        (lambda s: s["attributes"].append({"key": "gen_ai.input.messages", "value": {"stringValue": '[{"role": "user", "parts": [{"type": "hologram"}]}]'}}),
         "attributes.gen_ai.input.messages[0].parts[0].type", "unknown part type 'hologram'"),
        (lambda s: s.update(status={"code": 7}), "spans[0].status.code", "unknown status code 7"),
    ],
)
def test_a_bad_span_is_named_by_its_field(change, field, message):
    span = _span({"gen_ai.operation.name": {"stringValue": "chat"}, "gen_ai.request.model": {"stringValue": "m"}})
    change(span)
    with pytest.raises(TraceInputError, match=message) as info:
        trace_from_json(_export(span))
    assert info.value.field.endswith(field)


def test_a_malformed_trace_is_skipped_and_the_others_in_its_export_import(tmp_path, capsys):
    value = json.loads((OTLP / "openinference_dspy331.json").read_text())
    broken = copy.deepcopy(value)
    spans = broken["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["startTimeUnixNano"] = "later"  # a span of the first trace
    path = tmp_path / "export.json"
    path.write_text(json.dumps(broken))
    assert main(["export", str(path), "-o", str(tmp_path / "out.nq")]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == f"skipped {path}, field resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano: expected nanoseconds since the epoch, got 'later'"
    assert len(list(read_traces(tmp_path / "export.json"))) == 3


def test_a_span_whose_parent_is_missing_is_a_top_level_call_and_is_listed():
    value = json.loads((OTLP / "openinference_dspy331.json").read_text())
    spans = value["resourceSpans"][0]["scopeSpans"][0]["spans"]
    predict_trace = spans[0]["traceId"]
    value["resourceSpans"][0]["scopeSpans"][0]["spans"] = [s for s in spans if s["traceId"] == predict_trace and s.get("parentSpanId")]
    [trace] = traces_from_json(value)
    assert [c.parent_call for c in trace.calls] == [None, 0]
    assert any("is not in the input; it is a top-level call here" in x["reason"] for x in trace.losses)


def test_reimporting_the_same_file_adds_nothing(tmp_path):
    store = str(tmp_path / "store")
    seen = []
    for _ in range(2):
        assert main(["export", str(OTLP / "openinference_dspy331_batches.jsonl"), "--store", store]) == 0
        with EmbeddedStore(tmp_path / "store", read_only=True) as s:
            seen.append((s.trace_iris(), s.stats()))
    assert seen[0] == seen[1] and len(seen[0][0]) == 3
    before = seen[0][1]
    assert main(["export", str(OTLP / "openinference_dspy331.json"), "--store", store]) == 0  # the same spans, one export
    with EmbeddedStore(tmp_path / "store", read_only=True) as s:
        assert s.stats() == before


def test_an_unrecognised_value_lists_the_new_shapes(tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text('{"resource_spanz": []}')
    assert main(["export", str(path), "-o", str(tmp_path / "o.nq")]) == 1
    err = capsys.readouterr().err
    assert "an MLflow trace as JSON" in err and "OpenTelemetry spans as OTLP JSON" in err


def test_forcing_otlp_on_another_shape_says_so(tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text('"text"')
    assert main(["export", str(path), "--from", "otlp", "-o", str(tmp_path / "o.nq")]) == 1
    assert "this is not OpenTelemetry spans as OTLP JSON" in capsys.readouterr().err


def test_a_trace_read_from_otlp_keeps_its_identity_through_rdf_and_json():
    for trace in runs("openinference_dspy331.json"):
        trace = dataclasses.replace(trace, source_index=None)
        [(iri, back)] = parse_traces(serialize_traces([trace], RdfFormat.N_QUADS), RdfFormat.N_QUADS)
        assert back == trace and iri == trace_iri(trace)
        assert trace_from_json(json.loads(json.dumps(trace_to_json(trace)))) == trace


def test_json_in_an_attribute_nested_too_deeply_to_read_is_named():
    deep = "[" * 100_000 + "]" * 100_000
    span = _span({"gen_ai.operation.name": {"stringValue": "chat"}, "gen_ai.input.messages": {"stringValue": deep}})
    with pytest.raises(TraceInputError, match="JSON nested too deeply to read") as info:
        trace_from_json(_export(span))
    assert info.value.field.endswith("attributes.gen_ai.input.messages")


KEYS = [
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions", "gen_ai.request.model",
    "gen_ai.request.max_tokens", "gen_ai.request.stop_sequences", "gen_ai.response.finish_reasons", "gen_ai.usage.input_tokens",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.id", "gen_ai.operation.name", "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments", "llm.tools.0.tool.json_schema", "llm.token_count.prompt",
    "llm.invocation_parameters", "input.value", "output.value", "openinference.span.kind", "gen_ai.prompt", "gen_ai.completion.0.content",
    "mlflow.spanInputs", "mlflow.spanOutputs", "mlflow.spanType", "mlflow.chat.tokenUsage", "mlflow.chat.tools", "dspy_rdf.source_kind",
    "dspy_rdf.losses", "dspy_rdf.pairing", "dspy_rdf.call", "dspy_rdf.call_json", "dspy_rdf.entry.filled",
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["", "x", "chat", "text", "tool_call", "LLM", "evaluate", "lm_history"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["role", "parts", "type", "content", "name", "messages", "id"]), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=st.lists(st.tuples(st.integers(0, 31), st.sampled_from(KEYS), JSON, st.booleans()), min_size=1, max_size=4))
def test_any_attribute_value_gives_a_trace_or_an_error_naming_its_field(changes):
    value = json.loads(OPENINFERENCE_TEXT)
    spans = value["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for index, key, new, as_text in changes:
        encoded = {"stringValue": json.dumps(new)} if as_text or not isinstance(new, (str, bool, int)) else (
            {"stringValue": new} if isinstance(new, str) else {"boolValue": new} if isinstance(new, bool) else {"intValue": str(new)})
        spans[index]["attributes"].append({"key": key, "value": encoded})
    try:
        traces_from_json(value)
    except TraceInputError as exc:
        assert exc.field and "\n" not in str(exc)


OPENINFERENCE_TEXT = (OTLP / "openinference_dspy331.json").read_text()
