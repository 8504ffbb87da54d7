"""Traces -> OpenTelemetry spans as OTLP JSON, with the GenAI semantic conventions, for MLflow, Phoenix or Langfuse.

Each trace becomes the spans of one OpenTelemetry trace (its ``source_trace_id`` when it is one, else 32 hex digits of
its content key), written as OTLP/JSON (ids as hex, as the OpenTelemetry Collector writes them), or sent to an OTLP/HTTP
receiver as protobuf or JSON (:func:`push_otlp`). The spans follow the semantic conventions 1.41.0 (their ``schemaUrl``)
and name their kind for OpenInference too (``openinference.span.kind``, which Phoenix shows):

=================  ============================================================================================
call               span
=================  ============================================================================================
LM call            ``chat {model}`` (``text_completion`` for DSPy's ``text`` model type), kind CLIENT, LLM: ``gen_ai.request.model``,
                   ``gen_ai.provider.name``, ``gen_ai.input.messages``, ``gen_ai.output.messages`` (typed parts,
                   :mod:`dspy_rdf.sources.genai`), ``gen_ai.tool.definitions``, ``gen_ai.request.*`` (temperature,
                   max_tokens, top_p, stop_sequences, choice.count, seed, top_k, frequency and presence penalties),
                   ``gen_ai.response.id`` / ``.model`` / ``.finish_reasons``, ``gen_ai.usage.*``, the cost as
                   OpenInference's ``llm.cost.total`` (GenAI has no key for it); each output
                   message has the ``finish_reason`` the schema requires (the GenAI enum's value, ``unknown``
                   when the trace has none)
tool execution     ``execute_tool {name}``, TOOL: ``gen_ai.tool.name``, ``gen_ai.tool.call.id`` (its own, else the id of
                   the tool-call part it answered), ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``
module call        ``invoke_workflow {module class}``, CHAIN: ``gen_ai.workflow.name``; its input and output summaries as
                   OpenInference's ``input.value`` / ``output.value`` (JSON), which Phoenix and Langfuse show
evaluation,        ``evaluate {program}`` (EVALUATOR) / ``compile {optimizer}`` (CHAIN), operation
compilation        ``invoke_workflow``, the call in ``dspy_rdf.call_json`` (no convention describes them); an
                   evaluation's scores also as ``gen_ai.evaluation.result`` events (``gen_ai.evaluation.name``: the
                   metric, ``gen_ai.evaluation.score.value``, ``error.type``), each example's on the program call it
                   scored, the whole evaluation's on its own span
=================  ============================================================================================

The root span carries the trace's session as ``session.id`` (OpenTelemetry, OpenInference) and
``gen_ai.conversation.id`` (GenAI), and its user as ``user.id``, what Phoenix, Langfuse and MLflow group traces by.
A failed call has status ERROR with the error as its message, and an ``exception`` event (``exception.type``,
``exception.message``). A few ``dspy_rdf.*`` attributes carry what no convention has a key for and a program run
needs to be read back as itself: the root span's trace fields (``source_format``, ``source_kind``, ``source_trace_id``,
``dspy_version``, ``redactions``, ``losses``), each call's ``call_id`` (DSPy's), a history entry's ``entry.uuid``,
``entry.timestamp`` and ``entry.filled``, the outputs' own finish reasons where the messages hold the enum's
(``outputs``), and a tool execution's ``pairing`` (with ``call_id_of_part`` when its
``gen_ai.tool.call.id`` is the id of the part it answered: DSPy's tool callbacks never see one). History entries, requests and responses (``lm_history``,
``request_response``, ...) are written as their LM calls; messages, parts and trajectories, which hold no call, are
refused.

Reading the export back (``dspy-rdf export --from otlp``) gives the same trace, except what the conventions cannot
carry: each export reads its own spans back, compares, and lists every field that would not come back (a request's
``extensions``, a response's ``provider_data``, usage ``details``, a module's ``tool_calls``, ...) in the
trace's ``losses``, which the root span carries; so the trace read back records exactly what it lost.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Iterable, Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any, BinaryIO

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import DspyRdfError
from dspy_rdf.canonical.identity import trace_key
from dspy_rdf.sources.base import ReadOptions
from dspy_rdf.sources.genai import messages_to_genai, output_to_genai, tools_to_genai
from dspy_rdf.sources.history_dict import FILLED_KEY
from dspy_rdf.sources.live import loss
from dspy_rdf.sources.otlp import SOURCE as OTLP_SOURCE
from dspy_rdf.sources.run_json import call_to_json
from dspy_rdf.sources.spans import EVALUATION_EVENT, OWN, ns_from_iso

__all__ = [
    "LOST", "MISSING_PROTO", "PROTOCOLS", "SCHEMA_URL", "SCOPE_NAME", "SEMCONV_VERSION", "OtlpExportError", "OtlpPushError", "OtlpReport",
    "differences", "export_request_bytes", "genai_finish_reason", "push_otlp", "shown_url", "trace_to_resource_spans", "traces_url", "write_otlp",
]  # fmt: skip

SCOPE_NAME = "dspy-rdf"
"""The instrumentation scope of the spans dspy-rdf writes."""

SEMCONV_VERSION = "1.41.0"
"""The OpenTelemetry semantic conventions the spans follow: the last release that holds the GenAI conventions (they
moved to a repository of their own afterwards), whose ``gen-ai-output-messages.json`` requires ``finish_reason``."""

SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
"""The ``schemaUrl`` of the resource and scope spans dspy-rdf writes."""

MISSING_PROTO = "OTLP/protobuf is encoded by the opentelemetry-proto package: pip install 'dspy-rdf[otlp]' (or --protocol json)"
"""What to say when ``opentelemetry-proto`` (and so protobuf) is not installed."""

LOST = "the OTLP export cannot carry it: the OpenTelemetry GenAI conventions have no attribute for it"
"""The reason recorded in ``losses`` for a field an export does not carry."""

_INTERNAL, _CLIENT = 1, 3  # SpanKind; OTLP/JSON writes enums as numbers
_OK, _ERROR = 1, 2  # StatusCode
_COMMON = ("call", "started_at", "ended_at", "dspy_call_id", "parent_call", "error")
# The GenAI FinishReason enum (gen-ai-output-messages.json) for the reasons OpenAI, LiteLLM, Anthropic, Gemini and
# Bedrock give; the schema also takes any other string, so a reason not listed here is written as it is.
_GENAI_FINISH_REASONS = {
    "stop": "stop", "end_turn": "stop", "stop_sequence": "stop", "eos": "stop", "complete": "stop", "finish_reason_stop": "stop",
    "length": "length", "max_tokens": "length", "model_length": "length", "max_output_tokens": "length",
    "content_filter": "content_filter", "safety": "content_filter", "recitation": "content_filter", "blocklist": "content_filter",
    "prohibited_content": "content_filter", "spii": "content_filter", "refusal": "content_filter", "guardrail_intervened": "content_filter",
    "tool_calls": "tool_call", "tool_call": "tool_call", "function_call": "tool_call", "tool_use": "tool_call",
    "error": "error", "malformed_function_call": "error",
}  # fmt: skip
UNKNOWN_FINISH_REASON = "unknown"
"""The ``finish_reason`` of an output whose reason the trace does not know: the schema requires the key and takes
any string; none of its enum values says "not recorded"."""
# OpenInference's span kinds (what Phoenix shows and filters on), by the call a span records
_OPENINFERENCE_KINDS = {m.LMCall: "LLM", m.ToolExecution: "TOOL", m.ModuleCall: "CHAIN", m.EvaluateCall: "EVALUATOR"}
_EXTENSIONS_TO_GENAI = {"seed": "seed", "top_k": "top_k", "frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty"}


class OtlpExportError(DspyRdfError, ValueError):
    """A trace that cannot be written as spans (it holds no call); ``kind`` is its source kind."""

    def __init__(self, message: str, *, kind: str) -> None:
        self.kind = kind
        super().__init__(message)


def _value(value: Any) -> dict[str, Any]:
    """A Python value as an OTLP ``AnyValue``."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": value}


def genai_finish_reason(reason: str | None, truncated: bool = False) -> str:
    """A finish reason as the GenAI ``FinishReason`` value: a known provider reason mapped onto the enum, another
    string as it is, none ``length`` for a truncated output, else ``unknown``."""
    if reason is None:
        return "length" if truncated else UNKNOWN_FINISH_REASON
    return _GENAI_FINISH_REASONS.get(reason.lower(), reason)


def _output_messages(outputs: list[m.LMOutput]) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """``gen_ai.output.messages``, each with the ``finish_reason`` the schema requires, and, when one of them is not
    the output's own, every output's own finish reason and truncation (``dspy_rdf.outputs``) to read it back as it
    was."""
    messages, own = [], []
    for output in outputs:
        item = output_to_genai(output)
        item["finish_reason"] = genai_finish_reason(output.finish_reason, output.truncated)
        messages.append(item)
        own.append({"finish_reason": output.finish_reason, "truncated": output.truncated})
    written = [(item["finish_reason"], item["finish_reason"] == "length" or item.get("truncated", False)) for item in messages]
    same = all((o["finish_reason"], o["truncated"]) == w for o, w in zip(own, written))
    return messages, None if same else own


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _attributes(items: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in items.items() if v is not None]


def _hex(text: str, digits: int) -> str:
    value = hashlib.sha256(text.encode("utf-8")).hexdigest()[:digits]
    return value if value.strip("0") else "1".rjust(digits, "0")


def _trace_id(trace: m.Trace) -> str:
    """The OpenTelemetry trace id: the trace's own when it has one (an MLflow ``tr-`` id holds one), else derived."""
    own = (trace.source_trace_id or "").removeprefix("tr-").lower()
    if re.fullmatch(r"[0-9a-f]{32}", own) and own.strip("0"):
        return own
    return _hex(trace_key(trace), 32)


def _calls(trace: m.Trace) -> list[m.Call]:
    """The calls to write: a run's own, or the LM calls a history, an entry, a request or a response holds."""
    kind = trace.source_kind
    if kind == "program_run":
        return trace.calls
    if kind in ("lm_history", "lm_history_entry"):
        return [m.LMCall(started_at=e.timestamp, ended_at=e.timestamp, model=e.request.model, entry=e) for e in trace.entries]
    if kind in ("request_response", "lm_request", "lm_response"):
        request = trace.request or m.LMRequest(model=(trace.response.model if trace.response else None) or "unknown")
        response = trace.response or m.LMResponse(outputs=[])
        entry = m.LMHistoryEntry(request=request, response=response, timestamp="", uuid="")
        return [m.LMCall(started_at="1970-01-01T00:00:00+00:00", model=request.model, entry=entry)]
    raise OtlpExportError(f"a {kind} trace holds no LM call or tool execution to write as spans", kind=kind)


def _lm(call: m.LMCall, synthetic: bool) -> tuple[str, int, dict[str, Any]]:
    entry = call.entry
    model = entry.request.model if entry is not None else call.model
    operation = "text_completion" if entry is not None and entry.model_type == "text" else "chat"
    attrs: dict[str, Any] = {"gen_ai.operation.name": operation, "gen_ai.request.model": model}
    if model and "/" in model:
        attrs["gen_ai.provider.name"] = model.split("/", 1)[0]
    if entry is None:
        return f"{operation} {model}", _CLIENT, attrs
    request, response = entry.request, entry.response
    config = request.config
    attrs.update({
        "gen_ai.request.temperature": config.temperature,
        "gen_ai.request.max_tokens": config.max_tokens,
        "gen_ai.request.top_p": config.top_p,
        "gen_ai.request.stop_sequences": config.stop,
        "gen_ai.request.choice.count": config.n,
    })
    for key, name in _EXTENSIONS_TO_GENAI.items():
        value = config.extensions.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            attrs[f"gen_ai.request.{name}"] = value
    if request.messages:
        attrs["gen_ai.input.messages"] = _json(messages_to_genai(request.messages))
    if request.tools:
        attrs["gen_ai.tool.definitions"] = _json(tools_to_genai(request.tools))
    if response.outputs:
        messages, own_outputs = _output_messages(response.outputs)
        attrs["gen_ai.output.messages"] = _json(messages)
        if own_outputs is not None:
            attrs[OWN + "outputs"] = _json(own_outputs)
        if all(o.finish_reason is not None for o in response.outputs):
            attrs["gen_ai.response.finish_reasons"] = [item["finish_reason"] for item in messages]
    attrs["gen_ai.response.id"] = response.response_id
    if response.model != request.model:
        attrs["gen_ai.response.model"] = response.model
    attrs.update(_usage_attributes(response.usage))
    if response.cost is not None:  # no GenAI key for it; OpenInference's, which Phoenix shows
        attrs["llm.cost.total"] = response.cost
    if not synthetic:
        attrs[OWN + "entry.uuid"] = entry.uuid
        attrs[OWN + "entry.timestamp"] = entry.timestamp
        filled = entry.extra_fields.get(FILLED_KEY)
        if filled:
            attrs[OWN + "entry.filled"] = _json(filled)
    return f"{operation} {model}", _CLIENT, attrs


def _usage_attributes(usage: m.LMUsage | None) -> dict[str, Any]:
    """A usage as ``gen_ai.usage.*`` attributes."""
    if usage is None:
        return {}
    return {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
        "gen_ai.usage.reasoning.output_tokens": usage.reasoning_tokens,
    }


def _answered_call_id(calls: list[m.Call], execution: m.ToolExecution) -> str | None:
    ref = execution.answers
    if execution.tool_call.call_id is not None or ref is None:
        return execution.tool_call.call_id
    holder = calls[ref.call]
    if ref.output is None and isinstance(holder, m.ModuleCall) and ref.part < len(holder.tool_calls):
        return holder.tool_calls[ref.part].call_id
    if isinstance(holder, m.LMCall) and holder.entry is not None and ref.output is not None:
        parts = holder.entry.response.outputs[ref.output].parts
        if ref.part < len(parts) and isinstance(part := parts[ref.part], m.LMToolCallPart):
            return part.call_id
    return None


def _span_content(calls: list[m.Call], call: m.Call, synthetic: bool) -> tuple[str, int, dict[str, Any]]:
    """The name, kind and attributes of one call's span."""
    if isinstance(call, m.LMCall):
        return _lm(call, synthetic)
    if isinstance(call, m.ToolExecution):
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool_call.name,
            "gen_ai.tool.call.id": _answered_call_id(calls, call),
            "gen_ai.tool.call.arguments": _json(call.tool_call.args),
            OWN + "pairing": call.pairing,
        }
        if call.tool_call.call_id is None and attrs["gen_ai.tool.call.id"] is not None:
            attrs[OWN + "call_id_of_part"] = True  # the id of the part it answered; the execution had none
        result = call.tool_result
        if result is not None and not result.is_error and result.result is not None:
            attrs["gen_ai.tool.call.result"] = _json(result.result)
        return f"execute_tool {call.tool_call.name}", _INTERNAL, attrs
    if isinstance(call, m.ModuleCall):
        attrs = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": call.module_class, OWN + "module_class_path": call.module_class_path}
        attrs.update(_usage_attributes(call.usage))
        for key, value in (("input", call.input_summary), ("output", call.output_summary)):
            if value is not None:
                attrs[f"{key}.value"] = _json(value)
                attrs[f"{key}.mime_type"] = "application/json"
        return f"invoke_workflow {call.module_class}", _INTERNAL, attrs
    kind = "evaluate" if isinstance(call, m.EvaluateCall) else "compile"
    data = {k: v for k, v in call_to_json(call).items() if k not in _COMMON}
    what = call.program_class if isinstance(call, m.EvaluateCall) else call.optimizer_class
    # the GenAI conventions have no operation for either: both run the program as a workflow
    return f"{kind} {what}", _INTERNAL, {"gen_ai.operation.name": "invoke_workflow", OWN + "call": kind, OWN + "call_json": _json(data)}


def _spans(trace: m.Trace, losses: list[dict[str, str]]) -> list[dict[str, Any]]:
    calls = _calls(trace)
    synthetic = trace.source_kind in ("request_response", "lm_request", "lm_response")  # no history entry of their own
    trace_id = _trace_id(trace)
    span_ids = [_hex(f"{trace_id}/{i}", 16) for i in range(len(calls))]
    spans = []
    root_done = False
    for i, call in enumerate(calls):
        name, kind, attrs = _span_content(calls, call, synthetic)
        attrs["openinference.span.kind"] = _OPENINFERENCE_KINDS.get(type(call), "CHAIN")
        attrs[OWN + "call_id"] = call.dspy_call_id
        if call.parent_call is None and not root_done:
            root_done = True
            attrs.update({
                OWN + "source_format": trace.source_format,
                OWN + "source_kind": None if trace.source_kind == "program_run" else trace.source_kind,
                OWN + "source_trace_id": trace.source_trace_id,
                OWN + "dspy_version": trace.dspy_version,
                OWN + "redactions": _json(trace.redactions) if trace.redactions else None,
                OWN + "losses": _json(losses) if losses else None,
                # the session in both conventions that name one (OpenTelemetry/OpenInference, GenAI), and the user
                "session.id": trace.session_id,
                "gen_ai.conversation.id": trace.session_id,
                "user.id": trace.user_id,
            })
        start = ns_from_iso(call.started_at) if call.started_at else 0
        span: dict[str, Any] = {"traceId": trace_id, "spanId": span_ids[i]}
        if call.parent_call is not None:
            span["parentSpanId"] = span_ids[call.parent_call]
        span.update({"name": name, "kind": kind, "startTimeUnixNano": str(start)})
        if call.ended_at:
            span["endTimeUnixNano"] = str(ns_from_iso(call.ended_at))
        span["attributes"] = _attributes(attrs)
        if call.error is not None:
            kind_text, _, message = call.error.partition(": ")
            event_attrs = {"exception.type": kind_text, "exception.message": message or None}
            span["events"] = [{"timeUnixNano": span.get("endTimeUnixNano", str(start)), "name": "exception", "attributes": _attributes(event_attrs)}]
            span["status"] = {"code": _ERROR, "message": call.error}
        else:
            span["status"] = {"code": _OK} if not isinstance(call, m.ToolExecution) or call.tool_result is not None else {}
        spans.append(span)
    for i, call in enumerate(calls):
        if isinstance(call, m.EvaluateCall):
            _evaluation_events(call, spans, i)
    return spans


def _evaluation_events(call: m.EvaluateCall, spans: list[dict[str, Any]], index: int) -> None:
    """An evaluation's scores as GenAI ``gen_ai.evaluation.result`` events: each example's on the span of the program
    call it scored (the operation evaluated), the whole evaluation's on its own span."""
    name = call.metric or "metric"

    def event(span: dict[str, Any], score: float | None, error: str | None = None) -> None:
        attrs = {"gen_ai.evaluation.name": name, "gen_ai.evaluation.score.value": score, "error.type": error.partition(": ")[0] if error else None}
        at = span.get("endTimeUnixNano", span["startTimeUnixNano"])
        span.setdefault("events", []).append({"timeUnixNano": at, "name": EVALUATION_EVENT, "attributes": _attributes(attrs)})

    for result in call.example_results:
        if result.score is None and result.error is None:
            continue
        target = result.program_call if result.program_call is not None and 0 <= result.program_call < len(spans) else index
        event(spans[target], result.score, result.error)
    if call.score is not None:
        event(spans[index], call.score)


def _version() -> str | None:
    try:
        return version("dspy-rdf")
    except PackageNotFoundError:  # run from a source tree that was not installed
        return None


def _resource_spans(spans: list[dict[str, Any]]) -> dict[str, Any]:
    scope = {"name": SCOPE_NAME, **({"version": v} if (v := _version()) else {})}
    return {
        "resource": {"attributes": _attributes({"service.name": SCOPE_NAME})},
        "scopeSpans": [{"scope": scope, "spans": spans, "schemaUrl": SCHEMA_URL}],
        "schemaUrl": SCHEMA_URL,
    }


def _same_instant(before: Any, after: Any) -> bool:
    try:
        return ns_from_iso(before) == ns_from_iso(after)
    except (TypeError, ValueError):
        return False


def differences(before: Any, after: Any, path: str = "") -> list[str]:
    """The paths of the fields where two traces (or parts of them) differ, field by field down to JSON values. Call
    and run times are compared as instants: spans hold nanoseconds, written back in UTC (``+00:00``), and an RDF store
    keeps the value of an ``xsd:dateTime``, not how it was written (``Z``)."""
    if path.endswith(("started_at", "ended_at")) and isinstance(before, str) and isinstance(after, str) and _same_instant(before, after):
        return []
    if dataclasses.is_dataclass(before) and type(before) is type(after):
        out = []
        for f in dataclasses.fields(before):
            if not f.compare:  # what a trace was read with (its stored digest), not what it holds
                continue
            out += differences(getattr(before, f.name), getattr(after, f.name), f"{path}.{f.name}" if path else f.name)
        return out
    if (
        isinstance(before, list) and isinstance(after, list) and len(before) == len(after)
        and any(dataclasses.is_dataclass(x) for x in before)
    ):
        return [p for i, (x, y) in enumerate(zip(before, after)) for p in differences(x, y, f"{path}[{i}]")]
    return [] if before == after else [path or "(the trace)"]


def trace_to_resource_spans(trace: m.Trace) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """One trace as the ``resourceSpans`` item of an OTLP export, and what it does not carry (also written in the
    root span's ``dspy_rdf.losses``, after the trace's own ``losses``)."""
    first = _resource_spans(_spans(trace, trace.losses))
    back = OTLP_SOURCE.read({"resourceSpans": [first]}, "program_run", ReadOptions())
    lost = [
        loss(p, LOST)
        for p in differences(dataclasses.replace(trace, losses=[], source_index=None), dataclasses.replace(back, losses=[], source_index=None))
    ]
    if not lost:
        return first, []
    return _resource_spans(_spans(trace, [*trace.losses, *lost])), lost


@dataclasses.dataclass
class OtlpReport:
    """What :func:`write_otlp` wrote or :func:`push_otlp` sent: how many traces (and spans), how many of them with
    fields the export cannot carry, the traces it could not write (their IRIs, with why), and what the receiver
    rejected (OTLP partial success: the count of spans and its messages), and how many requests were sent again after
    the receiver asked to wait (429, 502, 503, 504)."""

    written: int = 0
    lossy: int = 0
    refused: list[tuple[str, OtlpExportError]] = dataclasses.field(default_factory=list)
    spans: int = 0
    requests: int = 0
    rejected_spans: int = 0
    rejections: list[str] = dataclasses.field(default_factory=list)
    retried: int = 0


def _exported(traces: Iterable[tuple[str, m.Trace]], report: OtlpReport) -> Iterator[dict[str, Any]]:
    """The ``resourceSpans`` item of each trace that holds a call, counted in ``report``; the others are listed in
    its ``refused``."""
    for iri, trace in traces:
        try:
            resource_spans, lost = trace_to_resource_spans(trace)
        except OtlpExportError as exc:
            report.refused.append((iri, exc))
            continue
        report.written += 1
        report.lossy += bool(lost)
        report.spans += sum(len(s["spans"]) for s in resource_spans["scopeSpans"])
        yield resource_spans


def write_otlp(traces: Iterable[tuple[str, m.Trace]], handle: BinaryIO, *, lines: bool) -> OtlpReport:
    """Write ``(IRI, trace)`` pairs (as :func:`~dspy_rdf.rdf.formats.parse_traces` and
    :meth:`~dspy_rdf.store.TraceStore.traces` give them) as OTLP JSON to a binary handle: one export request holding
    every trace, or, with ``lines``, one request per trace per line (OTLP JSON Lines, as the OpenTelemetry Collector's
    file exporter writes them, streamed trace by trace). Traces that hold no call are not written; the report lists
    them."""
    report = OtlpReport()
    gathered: list[dict[str, Any]] = []
    for resource_spans in _exported(traces, report):
        if lines:
            handle.write((_json({"resourceSpans": [resource_spans]}) + "\n").encode("utf-8"))
        else:
            gathered.append(resource_spans)
    if not lines:
        handle.write((json.dumps({"resourceSpans": gathered}, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
    return report


# --- sending to an OTLP/HTTP receiver ---------------------------------------------------------------------------

PROTOCOLS = {"protobuf": "application/x-protobuf", "json": "application/json"}
"""The OTLP/HTTP encodings :func:`push_otlp` sends, with their content types."""

_BATCH_SPANS = 1000  # spans per request: whole traces are sent together, and a request is closed past this many


_RETRYABLE = frozenset({429, 502, 503, 504})
"""The HTTP answers after which OTLP/HTTP says a request may be sent again."""


def _retry_delay(retry_after: str | None, attempt: int) -> float:
    """Seconds to wait before sending again: the receiver's ``Retry-After`` in seconds (at most 60), else 1, 2, 4 ..."""
    if retry_after is not None and retry_after.strip().isdigit():
        return min(float(retry_after.strip()), 60.0)
    return min(2.0**attempt, 60.0)


class OtlpPushError(DspyRdfError, ValueError):
    """A push the receiver did not take: it could not be reached, or it answered with an HTTP error."""


def _proto_json(resource_spans: list[dict[str, Any]]) -> dict[str, Any]:
    """An export request in protobuf's JSON mapping: OTLP/JSON writes trace and span ids as hex, the mapping (what
    ``json_format`` parses) as base64 of their bytes; parsed as written, the hex would be decoded as base64 and give
    ids of the wrong length."""
    import base64

    def ids(span: dict[str, Any]) -> dict[str, Any]:
        out = dict(span)
        for key in ("traceId", "spanId", "parentSpanId"):
            if out.get(key):
                out[key] = base64.b64encode(bytes.fromhex(out[key])).decode("ascii")
        return out

    return {
        "resourceSpans": [
            {**rs, "scopeSpans": [{**ss, "spans": [ids(s) for s in ss["spans"]]} for ss in rs["scopeSpans"]]} for rs in resource_spans
        ]
    }


def export_request_bytes(resource_spans: list[dict[str, Any]]) -> bytes:
    """``resourceSpans`` items as a serialized OTLP ``ExportTraceServiceRequest`` (protobuf); needs
    ``opentelemetry-proto`` (:data:`MISSING_PROTO` otherwise, as an ImportError)."""
    try:
        from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError as exc:
        raise ImportError(MISSING_PROTO) from exc
    request = ParseDict(_proto_json(resource_spans), ExportTraceServiceRequest())
    return request.SerializeToString()


def shown_url(url: str) -> str:
    """The endpoint as messages show it: without user info or query, which may carry credentials."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


def traces_url(endpoint: str) -> str:
    """The URL to POST to: ``endpoint`` as given, or, when it has no path, its ``/v1/traces`` (what OTLP exporters
    append to a base endpoint)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(endpoint)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise ValueError(f"--endpoint {shown_url(endpoint) if '://' in endpoint else endpoint!r}: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--endpoint must be an http:// or https:// URL, e.g. http://127.0.0.1:4318/v1/traces (got {shown_url(endpoint)!r})")
    if parts.path in ("", "/"):
        parts = parts._replace(path="/v1/traces")
    return urlunsplit(parts)


def _partial_success(body: bytes, content_type: str, protocol: str) -> tuple[int, str]:
    """The rejected span count and error message of an ``ExportTraceServiceResponse`` (0 and "" for an empty body or
    one that is not such a response: receivers may answer 200 with nothing, or with a page)."""
    if not body.strip():
        return 0, ""
    if "json" in content_type or protocol == "json" and "protobuf" not in content_type:
        try:
            doc = json.loads(body)
        except ValueError:
            return 0, ""
        partial = doc.get("partialSuccess") or doc.get("partial_success") if isinstance(doc, dict) else None
        if not isinstance(partial, dict):
            return 0, ""
        rejected = partial.get("rejectedSpans", partial.get("rejected_spans", 0))
        message = partial.get("errorMessage", partial.get("error_message", ""))
        # OTLP/JSON writes an int64 as a string
        count = int(rejected) if isinstance(rejected, (int, str)) and str(rejected).isdigit() else 0
        return count, message if isinstance(message, str) else ""
    try:
        from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
    except ImportError:
        return 0, ""
    try:
        response = ExportTraceServiceResponse.FromString(body)
    except DecodeError:
        return 0, ""
    return response.partial_success.rejected_spans, response.partial_success.error_message


def _excerpt(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    text = " ".join(text.split())
    return (text[:300] + "...") if len(text) > 300 else text


def push_otlp(
    traces: Iterable[tuple[str, m.Trace]],
    endpoint: str,
    *,
    headers: dict[str, str] | None = None,
    protocol: str = "protobuf",
    gzip: bool = False,
    timeout: float = 30.0,
    retries: int = 5,
) -> OtlpReport:
    """POST ``(IRI, trace)`` pairs to an OTLP/HTTP traces endpoint (``.../v1/traces``) as export requests of whole
    traces (about a thousand spans each), encoded as ``protocol`` (``protobuf``: ``ExportTraceServiceRequest`` with
    ids as bytes; ``json``: OTLP/JSON as :func:`write_otlp` writes it), gzipped if asked, with ``headers`` (never
    shown in errors: they carry tokens). Partial success is read from each response: the report counts the rejected
    spans and keeps the receiver's messages. Raises :class:`OtlpPushError` when the receiver cannot be reached or
    answers with an HTTP error, saying how many traces it had taken before."""
    import gzip as gzip_module

    import httpx

    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown OTLP protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")
    url = traces_url(endpoint)
    if protocol == "protobuf":
        export_request_bytes([])  # the missing package is said before any trace is read
    sent_headers = {**(headers or {}), "Content-Type": PROTOCOLS[protocol]}
    if gzip:
        sent_headers["Content-Encoding"] = "gzip"
    report = OtlpReport()
    taken = 0  # traces the receiver has taken

    def send(client: httpx.Client, batch: list[dict[str, Any]]) -> None:
        nonlocal taken
        body = export_request_bytes(batch) if protocol == "protobuf" else _json({"resourceSpans": batch}).encode("utf-8")
        if gzip:
            body = gzip_module.compress(body)
        before = f" ({taken} trace(s) were taken before)" if taken else ""
        try:
            response = client.post(url, content=body, headers=sent_headers)
            for attempt in range(retries):
                if response.status_code not in _RETRYABLE:
                    break
                time.sleep(_retry_delay(response.headers.get("Retry-After"), attempt))
                report.retried += 1
                response = client.post(url, content=body, headers=sent_headers)
        except httpx.ConnectError as exc:
            raise OtlpPushError(f"could not connect to {shown_url(url)}: {exc}{before}") from None
        except httpx.TimeoutException:
            raise OtlpPushError(f"no answer from {shown_url(url)} within {timeout:g} s{before}") from None
        except httpx.HTTPError as exc:
            said = str(exc).replace(url, shown_url(url))  # the URL as given may hold credentials
            raise OtlpPushError(f"sending to {shown_url(url)} failed: {type(exc).__name__}: {said}{before}") from None
        if not response.is_success:
            said = _excerpt(response.content) if "protobuf" not in response.headers.get("content-type", "") else ""
            raise OtlpPushError(
                f"{shown_url(url)} answered HTTP {response.status_code} {response.reason_phrase}"
                + (f" (after {retries} retries)" if response.status_code in _RETRYABLE and retries else "")
                + (f": {said}" if said else "") + before
            )
        report.requests += 1
        taken += len(batch)
        rejected, message = _partial_success(response.content, response.headers.get("content-type", ""), protocol)
        report.rejected_spans += rejected
        if message:
            report.rejections.append(message)

    with httpx.Client(timeout=timeout, follow_redirects=False) as client:
        batch: list[dict[str, Any]] = []
        spans = 0
        for resource_spans in _exported(traces, report):
            batch.append(resource_spans)
            spans += sum(len(s["spans"]) for s in resource_spans["scopeSpans"])
            if spans >= _BATCH_SPANS:
                send(client, batch)
                batch, spans = [], 0
        if batch:
            send(client, batch)
    return report
