"""Spans -> a program run: the span-tree logic that MLflow traces and OTLP exports share.

A tracing tool records a DSPy program run as a tree of spans. :func:`run_from_spans` turns the spans of one trace
(:class:`Span`, which :mod:`dspy_rdf.sources.mlflow` and :mod:`dspy_rdf.sources.otlp` build from their JSON) into one
``program_run`` trace:

- each span is a call of a kind (:func:`dspy_rdf.sources.conventions.call_kind`): LM spans become LM calls with their
  history entry (messages, parts, tool calls, tools offered, usage), tool spans tool executions, the others module
  calls (class, input and output summaries); a DSPy adapter's spans (``ChatAdapter.format``, ``.parse``, ``.__call__``)
  are not calls of a run and are left out, their children going to their parent; OpenInference's second span for a
  ``dspy.Predict`` (``Predict(Signature).forward`` inside ``Predict.forward``) is the same module call;
- calls are in start order, each with its parent call; times are ``xsd:dateTime`` in UTC, to the nanosecond;
- an error is the span's status message, else its exception event's ``Type: message``;
- tool executions are linked to the LM's tool-call parts by call id, else by tool name and arguments within the
  parent span, else to the preceding LM call (:mod:`dspy_rdf.canonical.pairing`), and ``pairing`` says which;
- what no slot holds (unread attributes, events, links, stack traces, adapter spans) is listed in ``losses``, by span
  id, so that the list does not depend on where the trace sat in its file.
- the trace's session and user are the first ``session.id`` / ``gen_ai.conversation.id`` and ``user.id`` attributes
  found, the root span's first (:data:`SESSION_KEYS`, :data:`USER_KEYS`); a span naming another one is listed in
  ``losses``.

A span whose parent is missing is a top-level call (and listed); a parent cycle, and spans nested deeper than
:data:`MAX_SPAN_DEPTH`, are errors naming the span. Traces that dspy-rdf wrote itself (:mod:`dspy_rdf.interop.otlp`) carry
their own fields in ``dspy_rdf.*`` attributes of their root span and come back as the trace that was written.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Literal

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import fail, kind_of
from dspy_rdf.canonical.pairing import pair_tool_executions, tool_call_parts, within
from dspy_rdf.sources.conventions import BOOKKEEPING, Attributes, CallKind, call_kind, class_of, error_text, lm_facts, module_facts, tool_facts
from dspy_rdf.sources.live import loss

__all__ = ["MAX_SPAN_DEPTH", "OWN", "SESSION_KEYS", "Span", "SpanStatus", "USER_KEYS", "hex_id", "iso_from_ns", "mlflow_value", "nanoseconds", "ns_from_iso", "run_from_spans"]

MAX_SPAN_DEPTH = 256
"""Spans nested deeper than this are refused (a clear error, never a crash)."""

OWN = "dspy_rdf."
EVALUATION_EVENT = "gen_ai.evaluation.result"
"""The GenAI conventions' event for one evaluation score of an operation."""
"""Prefix of the attributes dspy-rdf writes for what no convention has a key for."""

_OWN_TRACE_KEYS = ("source_format", "source_kind", "source_trace_id", "dspy_version", "redactions", "losses")
_Pairing = Literal["call_id", "name_and_args", "preceding_lm_call"]
_PAIRINGS: tuple[_Pairing, ...] = ("call_id", "name_and_args", "preceding_lm_call")


class SpanStatus(Enum):
    """A span's status code."""

    UNSET = "UNSET"
    OK = "OK"
    ERROR = "ERROR"


@dataclass(slots=True)
class Span:
    """One span as read from its JSON: ids as hex, times in nanoseconds since the epoch, attribute values as the
    producer wrote them (MLflow's JSON-encoded values decoded), events as
    ``(name, attributes)``; ``path`` says where it is in the input, for errors."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int | None
    attributes: dict[str, Any]
    path: str
    status: SpanStatus = SpanStatus.UNSET
    status_message: str = ""
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    links: int = 0

    def __reduce__(self) -> tuple[type[Span], tuple[Any, ...]]:
        # A live receiver sends gathered spans to worker processes: rebuilt from their fields, a span unpickles in
        # a third of the time the slots dataclass's own state protocol takes.
        return (type(self), (self.trace_id, self.span_id, self.parent_id, self.name, self.start_ns, self.end_ns, self.attributes,
                       self.path, self.status, self.status_message, self.events, self.links))  # fmt: skip


def hex_id(value: Any, path: str, size: int) -> str:
    """A trace id (16 bytes) or span id (8 bytes) as lowercase hex, from hex (OTLP/JSON, MLflow 2, ``0x``-prefixed or
    not) or base64 (protobuf's JSON, MLflow 3); an error naming ``path`` otherwise."""
    if not isinstance(value, str) or not value:
        raise fail(path, f"expected an id, got {kind_of(value)}")
    text = value.removeprefix("0x")
    if len(text) == size * 2 and re.fullmatch(r"[0-9a-fA-F]+", text):
        return text.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise fail(path, f"expected a {size}-byte id as {size * 2} hex digits or base64, got {value!r}")
    return raw.hex()


def nanoseconds(value: Any, path: str) -> int | None:
    """A time in nanoseconds since the epoch, an integer or its text (as JSON writes 64-bit integers); None stays None."""
    if value is None:
        return None
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,40}", value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < _YEAR_10000_NS:
            raise fail(path, f"{value} nanoseconds since the epoch is not a time of the years 1970 to 9999")
        return value
    shown = value if not isinstance(value, str) or len(value) <= 40 else f"{value[:40]}…"
    raise fail(path, f"expected nanoseconds since the epoch, got {shown!r}")


_YEAR_10000_NS = 253402300800 * 10**9
"""Nanoseconds since the epoch of 10000-01-01T00:00:00Z: a time a trace can keep is before it."""


def mlflow_value(value: Any, path: str) -> Any:
    """An attribute value MLflow set, decoded as MLflow's ``Span.get_attribute`` decodes it: JSON text parsed, other
    text kept as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value
    except RecursionError:
        raise fail(path, "JSON nested too deeply to read") from None


def iso_from_ns(ns: int) -> str:
    """Nanoseconds since the epoch as a canonical UTC date-time (:func:`~dspy_rdf.canonical.model.canonical_datetime`: to the
    microsecond, what every store keeps)."""
    seconds, fraction = divmod(ns, 10**9)
    text = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    if fraction // 1000:
        text += "." + f"{fraction // 1000:06d}".rstrip("0")
    return text + "Z"


def ns_from_iso(text: str) -> int:
    """An ISO 8601 date-time as nanoseconds since the epoch, exactly (digits beyond the ninth are dropped); one
    without an offset is taken as UTC."""
    main, dot, rest = text.replace("Z", "+00:00").partition(".")
    digits = ""
    if dot:
        count = len(rest) - len(rest.lstrip("0123456789"))
        digits, rest = rest[:count], rest[count:]
        main += rest
    moment = datetime.fromisoformat(main)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    whole = int(moment.timestamp())
    return whole * 10**9 + int((digits + "000000000")[:9])


def _depths(spans: dict[str, Span]) -> dict[str, int]:
    """Each span's depth (0 for a root or a span whose parent is missing); cycles and excessive depth are errors."""
    depth: dict[str, int] = {}
    for start in spans:
        chain = []
        current: str | None = start
        while current is not None and current not in depth:
            if current in chain:
                raise fail(f"{spans[current].path}.parentSpanId", f"span {current} is its own ancestor (a cycle of parent span ids)")
            chain.append(current)
            if len(chain) > MAX_SPAN_DEPTH + 1:
                raise fail(spans[start].path, f"spans nested more than {MAX_SPAN_DEPTH} levels deep")
            parent = spans[current].parent_id
            current = parent if parent in spans else None
        base = -1 if current is None else depth[current]
        for offset, span_id in enumerate(reversed(chain), start=1):
            depth[span_id] = base + offset
            if depth[span_id] > MAX_SPAN_DEPTH:
                raise fail(spans[span_id].path, f"spans nested more than {MAX_SPAN_DEPTH} levels deep")
    return depth


def _attributes(span: Span) -> Attributes:
    return Attributes(span.attributes, f"{span.path}.attributes")


def run_from_spans(
    spans: list[Span],
    *,
    source_format: m.SourceFormat,
    source_trace_id: str | None,
    losses: list[dict[str, str]] | None = None,
    session: tuple[str, str] | None = None,
    user: tuple[str, str] | None = None,
) -> m.Trace:
    """The program run that the spans of one trace record (see the module docstring), read from ``source_format``.
    ``losses`` are what the caller could not carry already (a trace's metadata, resource attributes); ``session`` and
    ``user`` are ``(where, id)`` the recorder kept for the whole trace (MLflow's trace metadata), which the spans'
    attributes do not override (:func:`_session_and_user`)."""
    if not spans:
        raise TraceInputError("a trace without spans")
    losses = list(losses or [])
    by_id: dict[str, Span] = {}
    order: dict[str, int] = {}
    for i, span in enumerate(spans):
        if span.span_id in by_id:
            raise fail(f"{span.path}.spanId", f"span id {span.span_id} is used twice in trace {span.trace_id}")
        by_id[span.span_id] = span
        order[span.span_id] = i
    depth = _depths(by_id)
    for span in spans:
        if span.parent_id is not None and span.parent_id not in by_id:
            losses.append(loss(f"span {span.span_id}.parent", f"its parent span {span.parent_id} is not in the input; it is a top-level call here"))

    attrs = {span_id: _attributes(span) for span_id, span in by_id.items()}
    session_id, user_id = _session_and_user(by_id, attrs, depth, order, session, user, losses)
    kinds = {span_id: call_kind(attrs[span_id], span.name) for span_id, span in by_id.items()}
    # the call each span belongs to: itself, or (adapter spans, OpenInference's inner Predict span) its parent's
    kept: dict[str, str | None] = {}
    adapters: list[str] = []
    for span_id in sorted(by_id, key=lambda s: depth[s]):
        span = by_id[span_id]
        parent = span.parent_id if span.parent_id in by_id else None
        owner = kept.get(parent) if parent is not None else None
        if kinds[span_id] is CallKind.ADAPTER:
            adapters.append(span.name)
            kept[span_id] = owner
        elif kinds[span_id] is CallKind.MODULE and parent is not None and _same_module_call(span, by_id[parent], kinds[parent]):
            kept[span_id] = owner
            attrs[span_id].read.update(attrs[span_id].values)  # the outer span says it all
        else:
            kept[span_id] = span_id
    if adapters:
        names = ", ".join(sorted(set(adapters)))
        losses.append(loss("spans", f"{len(adapters)} DSPy adapter span(s) ({names}) are not calls of a program run; left out"))

    # start order, a parent before its children
    calls_order = _start_order([s for s in by_id if kept[s] == s], by_id, depth, order, kept)
    index = {span_id: i for i, span_id in enumerate(calls_order)}
    calls: list[m.Call] = []
    starts: list[int] = []
    ends: list[int | None] = []
    own_pairing: dict[int, tuple[m.ToolExecution, _Pairing, str | None]] = {}
    for span_id in calls_order:
        span = by_id[span_id]
        a = attrs[span_id]
        parent = span.parent_id if span.parent_id in by_id else None
        owner = kept[parent] if parent is not None else None
        call = _call(span, a, kinds[span_id], len(calls_order), losses)
        call.parent_call = index[owner] if owner is not None else None
        if isinstance(call, m.ToolExecution):
            pairing = a.text(OWN + "pairing")
            if pairing is not None:
                if pairing not in _PAIRINGS:
                    raise fail(a.where(OWN + "pairing"), f"unknown pairing {pairing!r}; expected one of {', '.join(_PAIRINGS)}")
                own_pairing[len(calls)] = (call, pairing, call.tool_call.call_id)
                if a.get(OWN + "call_id_of_part") is True:
                    call.tool_call.call_id = None  # written only to say which part it answered
        calls.append(call)
        starts.append(span.start_ns)
        ends.append(span.end_ns)
        unread = a.unread(BOOKKEEPING)
        if unread:
            losses.append(loss(f"span {span_id}.attributes", f"no slot holds {', '.join(unread)}"))
    # dspy-rdf's own export repeats each evaluation's scores as GenAI evaluation events; the evaluation call holds them
    written_here = any(s.parent_id is None and OWN + "source_format" in s.attributes for s in spans)
    known_events = {"exception", EVALUATION_EVENT} if written_here else {"exception"}
    for span_id in by_id:
        if kept[span_id] != span_id:
            continue
        span = by_id[span_id]
        others = [name for name, _ in span.events if name not in known_events]
        if others:
            losses.append(loss(f"span {span_id}.events", f"no slot holds the events {', '.join(others)}"))
        if any("exception.stacktrace" in attributes for name, attributes in span.events if name == "exception"):
            losses.append(loss(f"span {span_id}.events.exception", "the stack trace is not carried (the error keeps the exception's type and message)"))
        if span.links:
            losses.append(loss(f"span {span_id}.links", f"no slot holds its {span.links} link(s) to other spans"))
    _pair_own(calls, own_pairing)
    pair_tool_executions(calls, starts, ends)

    if not calls:
        raise fail(spans[0].path, f"trace {spans[0].trace_id} holds no call: its {len(spans)} span(s) are a DSPy adapter's")
    roots = [i for i, call in enumerate(calls) if call.parent_call is None]
    root_ends = [end for i in roots if (end := ends[i]) is not None]
    trace = m.Trace(
        source_kind="program_run",
        source_format=source_format,
        source_trace_id=source_trace_id,
        calls=calls,
        started_at=iso_from_ns(min(starts[i] for i in roots)),
        ended_at=iso_from_ns(max(root_ends)) if len(root_ends) == len(roots) else None,  # None while a root has not ended
        losses=losses,
        session_id=session_id,
        user_id=user_id,
    )
    root_attrs = [attrs[s] for s in calls_order if kept[s] == s and index[s] in roots]
    return _own_trace(trace, root_attrs)


SESSION_KEYS = ("session.id", "gen_ai.conversation.id")
"""Span attributes that name the session a trace belongs to, in the order they are read: OpenTelemetry's and
OpenInference's ``session.id`` (MLflow's OTLP export writes it too), then the GenAI conventions' ``gen_ai.conversation.id``."""
USER_KEYS = ("user.id",)
"""Span attributes that name the user: OpenTelemetry's and OpenInference's ``user.id``."""


def _identifier(a: Attributes, key: str) -> str | None:
    """A session or user id attribute as text (an integer id as its digits), marked as read; an empty or blank one is
    none, as OpenInference and MLflow treat it."""
    value = a.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if value is not None and not isinstance(value, str):
        raise fail(a.where(key), f"expected a string, got {kind_of(value)}")
    return value if value and value.strip() else None


def _shown(text: str) -> str:
    return repr(text if len(text) <= 200 else f"{text[:200]}…")


def _session_and_user(
    by_id: dict[str, Span],
    attrs: dict[str, Attributes],
    depth: dict[str, int],
    order: dict[str, int],
    session: tuple[str, str] | None,
    user: tuple[str, str] | None,
    losses: list[dict[str, str]],
) -> tuple[str | None, str | None]:
    """The session and user of a trace. Instrumentations set them on the root span (MLflow's export) or on every span
    (OpenInference's ``using_session``); the first one found wins: the recorder's own record of the trace (``session``,
    ``user``), then the root spans', then the other spans' in start order, each span's ``session.id`` before its
    ``gen_ai.conversation.id``. A span that names another one is not an error (the run is still one execution): each
    other id is listed in ``losses`` with the span that named it."""
    ranked = sorted(by_id, key=lambda s: (depth[s] > 0, by_id[s].start_ns, depth[s], order[s]))
    chosen: list[str | None] = []
    for what, keys, given in (("session", SESSION_KEYS, session), ("user", USER_KEYS, user)):
        found = [given] if given is not None and given[1].strip() else []
        for span_id in ranked:
            a = attrs[span_id]
            found += [(f"span {span_id}.attributes.{key}", value) for key in keys if (value := _identifier(a, key)) is not None]
        first = found[0][1] if found else None
        others: dict[str, str] = {}
        for where, value in found:
            if value != first:
                others.setdefault(value, where)
        for value, where in others.items():
            losses.append(loss(where, f"names the {what} {_shown(value)}; the trace's {what} is {_shown(first or '')}, the first one named (the root span's, else the first span's)"))
        chosen.append(first)
    return chosen[0], chosen[1]


def _same_module_call(span: Span, parent: Span, parent_kind: CallKind) -> bool:
    """OpenInference wraps ``dspy.Predict.forward`` in a span of its own (``Predict(Signature).forward``) inside the
    span of the module call (``Predict.forward``): both are one call."""
    return parent_kind is CallKind.MODULE and "(" in span.name and class_of(span.name) == class_of(parent.name) and parent.name.endswith(".forward")


def _start_order(span_ids: list[str], by_id: dict[str, Span], depth: dict[str, int], order: dict[str, int], kept: dict[str, str | None]) -> list[str]:
    """The calls' spans by start time (then depth, then input order), each after the call it belongs under."""
    def key(s: str) -> tuple[int, int, int]:
        return (by_id[s].start_ns, depth[s], order[s])

    def owner(s: str) -> str | None:
        parent = by_id[s].parent_id
        return kept.get(parent) if parent in by_id else None

    waiting: dict[str | None, list[str]] = {}
    for s in span_ids:
        waiting.setdefault(owner(s), []).append(s)
    heap = [(key(s), s) for s in waiting.pop(None, [])]
    heapq.heapify(heap)
    out = []
    while heap:
        _, s = heapq.heappop(heap)
        out.append(s)
        for child in waiting.pop(s, []):
            heapq.heappush(heap, (key(child), child))
    return out


def _own_outputs(a: Attributes, outputs: list[m.LMOutput]) -> None:
    """The finish reasons and truncation dspy-rdf's export recorded as they were (``dspy_rdf.outputs``) where
    ``gen_ai.output.messages`` holds the GenAI enum's value, or ``unknown`` for a reason the trace did not have."""
    if not a.has(OWN + "outputs"):
        return
    own = a.structured(OWN + "outputs")
    if not isinstance(own, list) or len(own) != len(outputs) or not all(isinstance(o, dict) for o in own):
        raise fail(a.where(OWN + "outputs"), "expected a list of {finish_reason, truncated}, one per output message")
    for output, item in zip(outputs, own):
        reason, truncated = item.get("finish_reason"), item.get("truncated")
        if not (reason is None or isinstance(reason, str)) or not isinstance(truncated, bool):
            raise fail(a.where(OWN + "outputs"), "expected a finish_reason (text or null) and truncated (true or false)")
        output.finish_reason, output.truncated = reason, truncated


def _call(span: Span, a: Attributes, kind: CallKind, count: int, losses: list[dict[str, str]]) -> m.Call:
    """The call one span records."""
    error = error_text(span.status is SpanStatus.ERROR, span.status_message, span.events)
    common: dict[str, Any] = {
        "started_at": iso_from_ns(span.start_ns),
        "ended_at": None if span.end_ns is None else iso_from_ns(span.end_ns),
        "dspy_call_id": a.text(OWN + "call_id"),
        "error": error,
    }
    if kind in (CallKind.EVALUATE, CallKind.COMPILE):
        from dspy_rdf.sources.run_json import call_from_json  # imported late: run_json reads LM entries with the sources

        data = a.structured(OWN + "call_json")
        if not isinstance(data, dict):
            raise fail(a.where(OWN + "call_json"), "an evaluation or compilation span of dspy-rdf needs its call as a JSON object")
        a.get(OWN + "call")
        call = call_from_json({**data, "call": kind.value, **common, "parent_call": None}, a.where(OWN + "call_json"), count)
        return call
    if kind is CallKind.LM:
        timestamp = iso_from_ns(span.end_ns if span.end_ns is not None else span.start_ns)
        facts = lm_facts(a, span.trace_id, span.span_id, timestamp)
        losses.extend(loss(f"span {span.span_id}", why) for why in facts.losses)
        entry = facts.entry
        if entry is not None:
            _own_outputs(a, entry.response.outputs)
        if error is not None and entry is not None:
            # as DSPy records it (and live capture): a call that raised has no history entry, and no response
            losses.append(loss(f"span {span.span_id}", "the LM call failed: no history entry is kept for it (DSPy records none for a call that raised), so neither is the request the span holds"))
            entry = None
        return m.LMCall(model=facts.model, entry=entry, **common)
    if kind is CallKind.TOOL:
        tool = tool_facts(a, span.name)
        losses.extend(loss(f"span {span.span_id}", why) for why in tool.losses)
        failed = error is not None
        result = m.ToolResult(name=tool.name, result=None if failed else tool.result, is_error=failed, error=error)
        return m.ToolExecution(tool_call=m.ToolCall(name=tool.name, call_id=tool.call_id, args=tool.args), tool_result=result, **common)
    module_class, inputs, outputs, usage = module_facts(a, span.name)
    return m.ModuleCall(
        module_class=module_class, module_class_path=a.text(OWN + "module_class_path"), input_summary=inputs, output_summary=outputs,
        usage=usage, **common,
    )  # fmt: skip


def _pair_own(calls: list[m.Call], own: dict[int, tuple[m.ToolExecution, _Pairing, str | None]]) -> None:
    """Executions dspy-rdf exported (each by its index in ``calls``) say how they were paired and, by call id, which
    part they answered."""
    claimed: set[m.PartRef] = set()
    for index, (execution, pairing, call_id) in own.items():
        if pairing == "preceding_lm_call" or call_id is None:
            continue  # found again from the calls' times, as it was found first
        for i in reversed(range(index)):
            if not within(calls, i, execution.parent_call):
                continue
            match = next((ref for ref, part in tool_call_parts(calls[i], i) if part.call_id == call_id and ref not in claimed), None)
            if match is not None:
                claimed.add(match)
                execution.answers, execution.pairing = match, pairing
                break


def _own_trace(trace: m.Trace, roots: list[Attributes]) -> m.Trace:
    """The trace dspy-rdf wrote, when the root span carries its ``dspy_rdf.*`` trace fields."""
    a = next((r for r in roots if r.has(OWN + "source_format")), None)
    if a is None:
        return trace
    from dspy_rdf.sources.run_json import losses_from_json, redactions_from_json  # imported late, as in _call

    values = {key: a.get(OWN + key) for key in _OWN_TRACE_KEYS}
    source_format = values["source_format"]
    if source_format not in m.SOURCE_FORMATS:
        raise fail(a.where(OWN + "source_format"), f"unknown source format {source_format!r}")
    trace.source_format = source_format
    trace.source_trace_id = values["source_trace_id"]
    trace.dspy_version = values["dspy_version"]
    for key in ("redactions", "losses"):
        if isinstance(values[key], str):
            try:
                values[key] = json.loads(values[key])
            except ValueError:
                raise fail(a.where(OWN + key), "expected JSON") from None
    trace.redactions = redactions_from_json(values["redactions"], a.where(OWN + "redactions"))
    trace.losses = losses_from_json(values["losses"], a.where(OWN + "losses"))
    kind = values["source_kind"] or "program_run"
    if kind == "program_run":
        return trace
    entries = [c.entry for c in trace.calls if isinstance(c, m.LMCall) and c.entry is not None]
    match kind:  # a match, unlike `in`, narrows kind to the kinds it names
        case "lm_history" | "lm_history_entry":
            if kind == "lm_history_entry" and len(entries) != 1:
                raise fail(a.where(OWN + "source_kind"), f"an lm_history_entry trace needs one LM call span, found {len(entries)}")
            return m.Trace(
                source_kind=kind, source_format=source_format, entries=entries, redactions=trace.redactions, losses=trace.losses,
                session_id=trace.session_id, user_id=trace.user_id,
            )  # fmt: skip
        case "request_response" | "lm_request" | "lm_response":
            if len(entries) != 1:
                raise fail(a.where(OWN + "source_kind"), f"a {kind} trace needs one LM call span, found {len(entries)}")
            out = m.Trace(
                source_kind=kind, source_format=source_format, redactions=trace.redactions, losses=trace.losses,
                session_id=trace.session_id, user_id=trace.user_id,
            )  # fmt: skip
            if kind != "lm_response":
                out.request = entries[0].request
            if kind != "lm_request":
                out.response = entries[0].response
            return out
    raise fail(a.where(OWN + "source_kind"), f"dspy-rdf does not write {kind!r} traces as spans")
