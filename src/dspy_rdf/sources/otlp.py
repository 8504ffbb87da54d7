"""OpenTelemetry spans as OTLP JSON -> program runs.

OTLP JSON is what the OpenTelemetry Collector's file exporter writes (one ``ExportTraceServiceRequest`` per line) and
what ``google.protobuf.json_format.MessageToDict`` makes of the SDK's encoded spans: ``{"resourceSpans": [{"resource":
{"attributes": [...]}, "scopeSpans": [{"scope": {...}, "spans": [...]}]}]}``. Both spellings of its fields are read
(``resourceSpans`` and protobuf's ``resource_spans``), ids as hex (OTLP/JSON) or base64 (protobuf's JSON), 64-bit
integers as numbers or text, enums by name or number, attribute values of every ``AnyValue`` kind. A JSON list of such
requests is read too.

The spans of one trace (one ``traceId``) become one program run (:mod:`dspy_rdf.sources.spans`), whose attributes are
read in every vocabulary side by side (:mod:`dspy_rdf.sources.conventions`); the trace keeps its id
(``source_trace_id``, 32 hex digits). One export may hold many traces, and one trace may be spread over several
exports (several lines of a JSON Lines file): a trace is complete once its root span (no parent) has been read and
:data:`GRACE_LINES` more exports have brought no span of it (an exporter may send a child span after its root, in the
next batch), so a file of any size is read keeping only the traces still arriving; those left when the input ends are
read as they are, and spans of a trace that come later than that are named and left out. The resource's attributes
and the instrumentation scope, which no slot holds, are listed in ``losses``. MLflow encodes each attribute value it
sets as JSON text: spans of MLflow's tracer (scope ``mlflow...``) and ``mlflow.*`` attributes are decoded as MLflow
decodes them.
"""

from __future__ import annotations

import base64
import math
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import expect_object, fail, get_list, kind_of
from dspy_rdf.sources.base import Assembly, Read, ReadOptions, Source
from dspy_rdf.sources.live import loss
from dspy_rdf.sources.spans import OWN, Span, SpanStatus, hex_id, mlflow_value, nanoseconds, run_from_spans

__all__ = ["SOURCE", "GatheredTrace", "LateSpansError", "OtlpAssembly", "decode_any_value", "is_otlp", "spans_from_otlp", "spans_from_proto"]

_STATUS = {
    "STATUS_CODE_UNSET": SpanStatus.UNSET,
    "STATUS_CODE_OK": SpanStatus.OK,
    "STATUS_CODE_ERROR": SpanStatus.ERROR,
    0: SpanStatus.UNSET,
    1: SpanStatus.OK,
    2: SpanStatus.ERROR,
}
_EXPORTER_RESOURCE = frozenset({"service.name", "telemetry.sdk.name", "telemetry.sdk.language", "telemetry.sdk.version"})
_UPPER = re.compile(r"([A-Z])")


def _get(d: dict[str, Any], camel: str) -> Any:
    """A field by its OTLP/JSON (lowerCamelCase) name or its protobuf (snake_case) name."""
    if camel in d:
        return d[camel]
    return d.get(_UPPER.sub(lambda x: "_" + x.group(1).lower(), camel))


def is_otlp(value: Any) -> bool:
    """Whether ``value`` is an OTLP JSON export (``resourceSpans``), or a non-empty list of them. Never raises."""
    if isinstance(value, list):
        return bool(value) and all(map(is_otlp, value))
    return isinstance(value, dict) and isinstance(_get(value, "resourceSpans"), list)


def decode_any_value(value: Any, path: str) -> Any:
    """An OTLP ``AnyValue`` as plain JSON data (``{"stringValue": "x"}`` -> ``"x"``, ``kvlistValue`` -> an object,
    ``intValue`` text -> an integer, ``bytesValue`` -> its base64 text, ``{}`` -> null)."""
    d = expect_object(value, path)
    if not d:
        return None
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        found = _get(d, key)
        if found is not None:
            return found
    found = _get(d, "intValue")
    if found is not None:
        if isinstance(found, str) and re.fullmatch(r"-?[0-9]{1,19}", found) and -(2**63) <= int(found) < 2**63:
            return int(found)
        if isinstance(found, int) and not isinstance(found, bool) and -(2**63) <= found < 2**63:
            return found
        shown = found if not isinstance(found, (str, int)) or len(str(found)) <= 40 else f"{str(found)[:40]}…"
        raise fail(f"{path}.intValue", f"expected a 64-bit integer, got {shown!r}")
    found = _get(d, "arrayValue")
    if found is not None:
        values = get_list(expect_object(found, f"{path}.arrayValue"), "values", f"{path}.arrayValue")
        return [decode_any_value(v, f"{path}.arrayValue.values[{i}]") for i, v in enumerate(values)]
    found = _get(d, "kvlistValue")
    if found is not None:
        return _key_values(expect_object(found, f"{path}.kvlistValue").get("values") or [], f"{path}.kvlistValue.values")
    raise fail(path, f"unknown attribute value {', '.join(sorted(map(str, d)))}; expected an OTLP AnyValue")


def _key_values(items: Any, path: str) -> dict[str, Any]:
    if not isinstance(items, list):
        raise fail(path, f"expected a list of key-values, got {kind_of(items)}")
    out = {}
    for i, item in enumerate(items):
        kv = expect_object(item, f"{path}[{i}]")
        key = kv.get("key")
        if not isinstance(key, str):
            raise fail(f"{path}[{i}].key", f"expected a string, got {kind_of(key)}")
        out[key] = decode_any_value(kv.get("value") or {}, f"{path}[{i}].value")
    return out


def _span(d: dict[str, Any], path: str, trace_id: str, mlflow_scope: bool) -> Span:
    span_id = hex_id(_get(d, "spanId"), f"{path}.spanId", 8)
    parent = _get(d, "parentSpanId")
    name = d.get("name")
    if not isinstance(name, str):
        raise fail(f"{path}.name", f"expected a string, got {kind_of(name)}")
    start = nanoseconds(_get(d, "startTimeUnixNano"), f"{path}.startTimeUnixNano")
    if start is None:
        raise fail(f"{path}.startTimeUnixNano", "is required")
    attributes = _key_values(d.get("attributes") or [], f"{path}.attributes")
    attributes = {
        k: mlflow_value(v, f"{path}.attributes.{k}") if mlflow_scope or k.startswith("mlflow.") else v for k, v in attributes.items()
    }
    status = expect_object(d.get("status") or {}, f"{path}.status")
    raw_code = status.get("code", 0)
    code = _STATUS.get(raw_code) if isinstance(raw_code, (str, int)) else None
    if code is None:
        raise fail(f"{path}.status.code", f"unknown status code {status.get('code')!r}")
    events = []
    for i, raw in enumerate(get_list(d, "events", path)):
        event = expect_object(raw, f"{path}.events[{i}]")
        events.append((str(event.get("name", "")), _key_values(event.get("attributes") or [], f"{path}.events[{i}].attributes")))
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=hex_id(parent, f"{path}.parentSpanId", 8) if parent else None,
        name=name,
        start_ns=start,
        end_ns=nanoseconds(_get(d, "endTimeUnixNano"), f"{path}.endTimeUnixNano"),
        attributes=attributes,
        path=path,
        status=code,
        status_message=str(status.get("message") or ""),
        events=events,
        links=len(get_list(d, "links", path)),
    )


@dataclass
class _Pending:
    """The spans of one trace read so far."""

    spans: list[Span] = field(default_factory=list)
    resource: set[str] = field(default_factory=set)
    scopes: set[str] = field(default_factory=set)
    error: TraceInputError | None = None
    line: int | None = None
    first_line: int | None = None  # the line (or spool record) that brought its first span
    span_ids: set[str] = field(default_factory=set)
    complete: bool = False
    last_seen: int = 0  # the number of the export (value) that last brought a span of it
    last_time: float = 0.0  # time.monotonic() when a span of it last came


def spans_from_otlp(value: Any, path: str = "") -> Iterator[tuple[str, Span | TraceInputError, set[str], str]]:
    """Every span of an OTLP JSON export, as ``(trace id, span or the error reading it, resource attribute keys,
    scope)``; a span whose trace id cannot be read raises."""
    prefix = f"{path}." if path else ""
    d = expect_object(value, path or "export")
    resource_spans = _get(d, "resourceSpans")
    if not isinstance(resource_spans, list):
        raise fail(f"{prefix}resourceSpans", f"expected a list, got {kind_of(resource_spans)}")
    for r, raw in enumerate(resource_spans):
        rp = f"{prefix}resourceSpans[{r}]"
        rs = expect_object(raw, rp)
        resource = expect_object(rs.get("resource") or {}, f"{rp}.resource")
        resource_keys = set(_key_values(resource.get("attributes") or [], f"{rp}.resource.attributes"))
        scope_spans = _get(rs, "scopeSpans")
        if scope_spans is None:
            scope_spans = _get(rs, "instrumentationLibrarySpans") or []
        if not isinstance(scope_spans, list):
            raise fail(f"{rp}.scopeSpans", f"expected a list, got {kind_of(scope_spans)}")
        for s, raw_scope in enumerate(scope_spans):
            sp = f"{rp}.scopeSpans[{s}]"
            ss = expect_object(raw_scope, sp)
            scope = expect_object(ss.get("scope") or _get(ss, "instrumentationLibrary") or {}, f"{sp}.scope")
            scope_name = str(scope.get("name") or "")
            scope_text = " ".join(str(x) for x in (scope.get("name"), scope.get("version")) if x)
            spans = ss.get("spans") or []
            if not isinstance(spans, list):
                raise fail(f"{sp}.spans", f"expected a list, got {kind_of(spans)}")
            for i, raw_span in enumerate(spans):
                p = f"{sp}.spans[{i}]"
                span = expect_object(raw_span, p)
                trace_id = hex_id(_get(span, "traceId"), f"{p}.traceId", 16)
                try:
                    read: Span | TraceInputError = _span(span, p, trace_id, scope_name.startswith("mlflow"))
                except TraceInputError as exc:
                    read = exc
                yield trace_id, read, resource_keys, scope_text


def _proto_value(value: Any) -> Any:
    """An ``AnyValue`` message as :func:`decode_any_value` reads protobuf's JSON of it (bytes as base64 text, a
    non-finite double as the text JSON gives it, an empty value as None)."""
    which = value.WhichOneof("value")
    if which == "string_value":  # nearly every attribute
        return value.string_value
    if which is None:
        return None
    if which == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _proto_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    found = getattr(value, which)
    if which == "double_value" and not math.isfinite(found):
        return "NaN" if math.isnan(found) else "Infinity" if found > 0 else "-Infinity"
    return found


def _proto_attributes(items: Any, path: str) -> dict[str, Any]:
    out = {}
    for i, kv in enumerate(items):
        if not kv.key:  # protobuf's JSON leaves an empty key out, and the JSON reader refuses a missing one
            raise fail(f"{path}[{i}].key", f"expected a string, got {kind_of(None)}")
        out[kv.key] = _proto_value(kv.value)
    return out


def _proto_id(raw: bytes, path: str, size: int) -> str:
    return raw.hex() if len(raw) == size else hex_id(base64.b64encode(raw).decode("ascii") if raw else None, path, size)


def _proto_span(d: Any, path: str, trace_id: str, mlflow_scope: bool) -> Span:
    """One ``Span`` message, read as :func:`_span` reads protobuf's JSON of it."""
    span_id = _proto_id(d.span_id, f"{path}.spanId", 8)
    if not d.name:
        raise fail(f"{path}.name", f"expected a string, got {kind_of(None)}")
    start = nanoseconds(d.start_time_unix_nano or None, f"{path}.startTimeUnixNano")
    if start is None:  # 0, which protobuf's JSON leaves out
        raise fail(f"{path}.startTimeUnixNano", "is required")
    attributes = _proto_attributes(d.attributes, f"{path}.attributes")
    attributes = {
        k: mlflow_value(v, f"{path}.attributes.{k}") if mlflow_scope or k.startswith("mlflow.") else v for k, v in attributes.items()
    }
    code = _STATUS.get(d.status.code)
    if code is None:
        raise fail(f"{path}.status.code", f"unknown status code {d.status.code!r}")
    events = [(e.name, _proto_attributes(e.attributes, f"{path}.events[{i}].attributes")) for i, e in enumerate(d.events)]
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=_proto_id(d.parent_span_id, f"{path}.parentSpanId", 8) if d.parent_span_id else None,
        name=d.name,
        start_ns=start,
        end_ns=nanoseconds(d.end_time_unix_nano, f"{path}.endTimeUnixNano") if d.end_time_unix_nano else None,
        attributes=attributes,
        path=path,
        status=code,
        status_message=d.status.message,
        events=events,
        links=len(d.links),
    )


def spans_from_proto(request: Any) -> Iterator[tuple[str, Span | TraceInputError, set[str], str]]:
    """Every span of an ``ExportTraceServiceRequest`` message (``opentelemetry-proto``), as :func:`spans_from_otlp`
    reads the same request written as JSON, read from the message's fields directly (protobuf's JSON mapping, the
    other way, costs more than reading the spans)."""
    for r, rs in enumerate(request.resource_spans):
        rp = f"resourceSpans[{r}]"
        resource_keys = set(_proto_attributes(rs.resource.attributes, f"{rp}.resource.attributes"))
        for s, ss in enumerate(rs.scope_spans):
            sp = f"{rp}.scopeSpans[{s}]"
            scope_name = ss.scope.name
            scope_text = " ".join(x for x in (ss.scope.name, ss.scope.version) if x)
            for i, span in enumerate(ss.spans):
                p = f"{sp}.spans[{i}]"
                trace_id = _proto_id(span.trace_id, f"{p}.traceId", 16)
                try:
                    read: Span | TraceInputError = _proto_span(span, p, trace_id, scope_name.startswith("mlflow"))
                except TraceInputError as exc:
                    read = exc
                yield trace_id, read, resource_keys, scope_text


@dataclass
class GatheredTrace:
    """The spans of one trace as an assembly gathered them, not read yet. :meth:`read` makes the trace of them, the
    larger part of the work, which a live receiver does in worker processes: this pickles smaller than the trace."""

    trace_id: str
    spans: list[Span]
    resource: set[str]
    scopes: set[str]
    error: TraceInputError | None
    line: int | None  # the line (or spool record) that brought its last span
    first_line: int | None  # and its first

    def read(self) -> Read:
        """The trace (or the error that stops it), as the assembly reading it itself gives it."""
        line, first = self.line, self.first_line
        if self.error is not None:
            return Read(error=self.error.located(line=line), line=line, first_line=first, input_id=self.trace_id)
        try:
            return Read(trace=self._run(), line=line, first_line=first, input_id=self.trace_id)
        except TraceInputError as exc:
            return Read(error=exc.located(line=line), line=line, first_line=first, input_id=self.trace_id)

    def _run(self) -> m.Trace:
        losses = []
        own = any(s.parent_id is None and OWN + "source_format" in s.attributes for s in self.spans)
        resource = sorted(self.resource - (_EXPORTER_RESOURCE if own else set()))
        scopes = sorted(x for x in self.scopes if x and not (own and x.startswith("dspy-rdf")))
        if resource or scopes:
            what = [f"the resource attributes {', '.join(resource)}"] if resource else []
            what += [f"the instrumentation scope {', '.join(scopes)}"] if scopes else []
            losses.append(loss("resource", f"no slot holds {' and '.join(what)}"))
        return run_from_spans(self.spans, source_format="otlp", source_trace_id=self.trace_id, losses=losses)


GRACE_LINES = 4
"""Exports (lines of a JSON Lines file) a trace whose root span has come waits for more of its spans before it is read."""


READ_IDS_KEPT = 100_000
"""Ids of read traces remembered to name their late spans; older ones are forgotten, keeping memory bounded."""

LIVE_SPAN_IDS_KEPT = 10_000
"""Traces whose span ids a live receiver remembers after reading them, to take an exporter's retry as one."""


class LateSpansError(TraceInputError):
    """Spans of a trace that came after the trace was read; they are left out."""

    def __init__(self, message: str, *, trace_id: str, spans: int, source: str = "<input>", line: int | None = None) -> None:
        super().__init__(message, source=source, line=line)
        self.trace_id = trace_id
        self.spans = spans

    def located(self, *, source: str | None = None, line: int | None = None) -> TraceInputError:
        """The same error, of the same class, with the file and line filled in."""
        return LateSpansError(
            self.reason, trace_id=self.trace_id, spans=self.spans,
            source=source if source is not None else self.source, line=line if line is not None else self.line,
        )  # fmt: skip


class OtlpAssembly(Assembly):
    """The traces of one input; a trace is read once its root span has come and :data:`GRACE_LINES` more exports
    brought none of its spans (see the module docstring).

    A live receiver (``live=True``), whose exports may stop coming, calls :meth:`idle`: it reads the traces whose
    spans have stopped coming for a while, and :meth:`oldest_line` says which line (spool record) the traces still waiting
    began at, so that a restart can read the input again from there."""

    def __init__(self, *, live: bool = False) -> None:
        self.pending: dict[str, _Pending] = {}
        self.values = 0
        # A live receiver (``live``) reads a trace by time only (:meth:`idle`): exports from many processes interleave,
        # so counting them says nothing of one trace. Spans an exporter sends again (a retry after a lost answer)
        # are taken once; a span that comes after its trace was read is named and left out, as in a file.
        self.live = live
        self.read_spans: dict[str, frozenset[str]] = {}
        self.stored_ids: set[str] = set()
        self.repeated_spans = 0  # spans taken once already, or of a trace the store holds
        # traces read lately: spans of theirs that come later are named and left out (bounded: a long file's ids)
        self.read_ids: dict[str, None] = {}
        self.late: dict[str, int] = {}

    def add(self, value: Any, kind: m.SourceKind, line: int | None) -> Iterator[Read]:
        exports = [(f"[{i}]", v) for i, v in enumerate(value)] if isinstance(value, list) else [("", value)]
        yield from self.add_spans((read for path, export in exports for read in spans_from_otlp(export, path)), line)

    def add_spans(self, spans: Iterable[tuple[str, Span | TraceInputError, set[str], str]], line: int | None) -> Iterator[Read]:
        """Take the spans of one export, as :func:`spans_from_otlp` reads them (a receiver that has read them already
        hands them over as they are); yield the traces they complete, as :meth:`add` does."""
        self.values += 1
        now = time.monotonic()
        try:
            for trace_id, span, resource, scope in spans:
                if trace_id in self.stored_ids:  # read again after a restart: the store holds the trace
                    self.repeated_spans += 1
                    continue
                if trace_id in self.read_ids:
                    if self.live and isinstance(span, Span) and span.span_id in self.read_spans.get(trace_id, ()):
                        self.repeated_spans += 1  # an exporter sent it again (a retry): already read
                    else:
                        self.late[trace_id] = self.late.get(trace_id, 0) + 1
                    continue
                pending = self.pending.get(trace_id)
                if pending is None:
                    pending = self.pending[trace_id] = _Pending(first_line=line)
                pending.line = line
                pending.last_seen = self.values
                pending.last_time = now
                pending.resource |= resource
                pending.scopes.add(scope)
                if isinstance(span, TraceInputError):
                    pending.error = pending.error or span
                    continue
                if self.live:
                    if span.span_id in pending.span_ids:  # an exporter's retry of a span this trace has
                        self.repeated_spans += 1
                        continue
                    pending.span_ids.add(span.span_id)
                pending.spans.append(span)
                if span.parent_id is None:
                    pending.complete = True
        except TraceInputError as exc:
            yield Read(error=exc.located(line=line), line=line)
        for trace_id, count in self.late.items():
            if self.live:
                message = (f"{count} span(s) of trace {trace_id} came after the trace was built from the spans before them "
                           "(no span of it had come for the grace period); they were left out (give a longer --grace)")
            else:
                message = (f"{count} span(s) of trace {trace_id} came more than {GRACE_LINES} exports after its root span, "
                           "once it had been read; they were left out (export a trace's spans closer together)")
            yield Read(error=LateSpansError(message, trace_id=trace_id, spans=count).located(line=line), line=line)
        self.late.clear()
        if self.live:
            return
        waited = [t for t, p in self.pending.items() if p.complete and self.values - p.last_seen >= GRACE_LINES]
        for trace_id in waited:
            yield self._read(trace_id)

    def _read(self, trace_id: str) -> Read:
        return self._take(trace_id).read()

    def _take(self, trace_id: str) -> GatheredTrace:
        """Take a trace's spans out of the gathering, remembering it as read."""
        self.read_ids[trace_id] = None
        if len(self.read_ids) > READ_IDS_KEPT:
            del self.read_ids[next(iter(self.read_ids))]
        pending = self.pending.pop(trace_id)
        if self.live:  # the span ids of the traces read lately, to tell a retry from a late span
            self.read_spans[trace_id] = frozenset(pending.span_ids)
            if len(self.read_spans) > LIVE_SPAN_IDS_KEPT:
                del self.read_spans[next(iter(self.read_spans))]
        return GatheredTrace(trace_id, pending.spans, pending.resource, pending.scopes, pending.error, pending.line, pending.first_line)

    def finish(self) -> Iterator[Read]:
        for trace_id in list(self.pending):
            yield self._read(trace_id)

    def idle(self, grace: float, orphan: float, now: float | None = None) -> Iterator[Read]:
        """Read the traces whose root span has come and no span of which came in the last ``grace`` seconds, and
        those without a root span none of whose spans came in the last ``orphan`` seconds (read as they are, as
        the end of a file reads them)."""
        for gathered in self.idle_gathered(grace, orphan, now):
            yield gathered.read()

    def idle_gathered(self, grace: float, orphan: float, now: float | None = None) -> list[GatheredTrace]:
        """The traces :meth:`idle` would read, gathered and not read yet (see :class:`GatheredTrace`)."""
        now = time.monotonic() if now is None else now
        waited = [t for t, p in self.pending.items() if now - p.last_time >= (grace if p.complete else orphan)]
        return [self._take(trace_id) for trace_id in waited]

    def already_stored(self, trace_ids: Iterable[str]) -> None:
        """Leave out, without a word, the spans of these traces: a receiver that reads its spool again after a restart
        learns from the store which traces it has already stored (some of their spans may come after the point it
        reads again from)."""
        self.stored_ids.update(trace_ids)

    def oldest_line(self) -> int | None:
        """The first line (spool record) of the traces still waiting, or None when none waits."""
        lines = [p.first_line for p in self.pending.values() if p.first_line is not None]
        return min(lines) if lines else None

    @property
    def waiting(self) -> int:
        """The number of traces whose spans are still being gathered."""
        return len(self.pending)


class _OTLP(Source):
    format = "otlp"
    description = "OpenTelemetry spans as OTLP JSON (resourceSpans -> scopeSpans -> spans), or a list of such exports"

    def detect(self, value: Any) -> m.SourceKind | None:
        return "program_run" if is_otlp(value) else None

    def shape(self, value: Any) -> m.SourceKind | None:
        return "program_run" if isinstance(value, (dict, list)) else None

    def read(self, value: Any, kind: m.SourceKind, options: ReadOptions) -> m.Trace:
        assembly = OtlpAssembly()
        reads = [*assembly.add(value, kind, None), *assembly.finish()]
        if len(reads) != 1:
            raise TraceInputError(f"this value holds {len(reads)} OpenTelemetry traces, not one")
        if reads[0].error is not None:
            raise reads[0].error
        trace = reads[0].trace
        assert trace is not None  # a Read without an error holds its trace
        return trace

    def assembly(self, options: ReadOptions) -> Assembly:
        return OtlpAssembly()


SOURCE = _OTLP()
"""OpenTelemetry spans as OTLP JSON."""
