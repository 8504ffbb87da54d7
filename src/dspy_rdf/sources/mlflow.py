"""MLflow traces as JSON -> program runs.

What MLflow writes a trace as, read from MLflow's own code (``mlflow/entities/trace.py``, ``trace_info.py``,
``trace_info_v2.py``, ``span.py``, ``mlflow/cli/traces.py``):

=================================  ==================================================================================
shape                              what it is
=================================  ==================================================================================
``{"info": {...}, "data":          one trace, ``Trace.to_json()`` / ``to_dict()``; MLflow 3's ``info`` has
{"spans": [...]}}``                ``trace_id``, ``trace_location``, ``request_time``, ``state``, ``trace_metadata``,
                                   ``tags``; MLflow 2's has ``request_id``, ``experiment_id``, ``timestamp_ms``,
                                   ``status``, ``request_metadata``, ``tags``
``[trace, ...]``                   a list of traces (``[t.to_dict() for t in mlflow.search_traces(return_type="list")]``)
``{"traces": [...],                a page of ``mlflow traces search --output json``
"next_page_token": ...}``
=================================  ==================================================================================

A JSON Lines file may hold any of these per line. MLflow 3's spans have base64 ``trace_id`` / ``span_id`` /
``parent_span_id`` and ``start_time_unix_nano``, a ``status`` object and events with ``time_unix_nano``; MLflow 2's
spans have a ``context`` (hex ids), ``parent_id``, ``start_time``, ``status_code``, ``status_message`` and events with
``timestamp``. Attribute values are JSON text (MLflow encodes each value it sets) and are decoded as MLflow decodes
them. The spans become a program run (:mod:`dspy_rdf.sources.spans`); the trace keeps MLflow's trace id
(``source_trace_id``) and the session and user of its metadata (:data:`SESSION_METADATA`, :data:`USER_METADATA`), and
the trace's other metadata, tags and location, which no slot holds, are listed in ``losses``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import expect_object, fail, get_list, kind_of
from dspy_rdf.sources.base import Assembly, Read, ReadOptions, Source
from dspy_rdf.sources.live import loss
from dspy_rdf.sources.spans import Span, SpanStatus, hex_id, mlflow_value, nanoseconds, run_from_spans

__all__ = ["SESSION_METADATA", "SOURCE", "USER_METADATA", "is_mlflow_trace", "trace_from_mlflow"]

SESSION_METADATA = "mlflow.trace.session"
"""The trace metadata key of the session MLflow 3 records (``mlflow.tracing.constant.TraceMetadataKey.TRACE_SESSION``,
set by ``mlflow.update_current_trace(session_id=...)`` and ``mlflow.tracing.context(session_id=...)``)."""
USER_METADATA = "mlflow.trace.user"
"""The trace metadata key of the user the request was made for (``TraceMetadataKey.TRACE_USER``; not ``mlflow.user``,
the developer who created the trace)."""

_V3_INFO = frozenset({"trace_id", "trace_location", "request_time", "state"})
_V2_INFO = frozenset({"request_id", "timestamp_ms", "status"})
_STATUS = {
    "STATUS_CODE_OK": SpanStatus.OK,
    "OK": SpanStatus.OK,
    "STATUS_CODE_ERROR": SpanStatus.ERROR,
    "ERROR": SpanStatus.ERROR,
    "STATUS_CODE_UNSET": SpanStatus.UNSET,
    "UNSET": SpanStatus.UNSET,
}
# info fields that say nothing the spans do not (ids, times, previews of the root's inputs and outputs)
_INFO_READ = frozenset({
    "trace_id", "request_id", "request_time", "timestamp_ms", "execution_duration", "execution_duration_ms",
    "execution_time_ms", "state", "status", "request_preview", "response_preview", "client_request_id",
})


def is_mlflow_trace(value: Any) -> bool:
    """Whether ``value`` is one MLflow trace as JSON (MLflow 2 or 3): ``info`` with MLflow's ids and times, and
    ``data`` with ``spans``. Never raises."""
    if not isinstance(value, dict) or not isinstance(value.get("info"), dict) or not isinstance(value.get("data"), dict):
        return False
    keys = value["info"].keys()
    return (_V3_INFO <= keys or _V2_INFO <= keys) and isinstance(value["data"].get("spans", []), list)


def _is_page(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("traces"), list) and value.keys() <= {"traces", "next_page_token"}


def _items(value: Any) -> list[tuple[str, Any]]:
    """The traces a value holds, each with its path."""
    if _is_page(value):
        return [(f"traces[{i}]", t) for i, t in enumerate(value["traces"])]
    if isinstance(value, list):
        return [(f"[{i}]", t) for i, t in enumerate(value)]
    return [("", value)]


def _decoded(attributes: Any, path: str) -> dict[str, Any]:
    """Attribute values decoded as MLflow decodes them (:func:`~dspy_rdf.sources.spans.mlflow_value`)."""
    d = expect_object(attributes if attributes is not None else {}, path)
    return {key: mlflow_value(value, f"{path}.{key}") for key, value in d.items()}


def _span(value: Any, path: str) -> Span:
    d = expect_object(value, path)
    if "context" in d:  # MLflow 2
        context = expect_object(d["context"], f"{path}.context")
        trace_id = hex_id(context.get("trace_id"), f"{path}.context.trace_id", 16)
        span_id = hex_id(context.get("span_id"), f"{path}.context.span_id", 8)
        parent = d.get("parent_id")
        start, end = d.get("start_time"), d.get("end_time")
        status, message = d.get("status_code"), d.get("status_message") or ""
        events = [(e.get("name"), e.get("attributes")) for e in get_list(d, "events", path) if isinstance(e, dict)]
        parent_path, start_path = f"{path}.parent_id", f"{path}.start_time"
    else:
        trace_id = hex_id(d.get("trace_id"), f"{path}.trace_id", 16)
        span_id = hex_id(d.get("span_id"), f"{path}.span_id", 8)
        parent = d.get("parent_span_id")
        start, end = d.get("start_time_unix_nano"), d.get("end_time_unix_nano")
        status_obj = d.get("status") or {}
        status_obj = expect_object(status_obj, f"{path}.status")
        status, message = status_obj.get("code"), status_obj.get("message") or ""
        events = [(e.get("name"), e.get("attributes")) for e in get_list(d, "events", path) if isinstance(e, dict)]
        parent_path, start_path = f"{path}.parent_span_id", f"{path}.start_time_unix_nano"
    name = d.get("name")
    if not isinstance(name, str):
        raise fail(f"{path}.name", f"expected a string, got {kind_of(name)}")
    start_ns = nanoseconds(start, start_path)
    if start_ns is None:
        raise fail(start_path, "is required")
    code = _STATUS.get(status if isinstance(status, str) else "UNSET") if status is None or isinstance(status, str) else None
    if code is None:
        raise fail(f"{path}.status", f"unknown status code {status!r}")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=None if not parent else hex_id(parent, parent_path, 8),
        name=name,
        start_ns=start_ns,
        end_ns=nanoseconds(end, start_path.replace("start", "end")),
        attributes=_decoded(d.get("attributes"), f"{path}.attributes"),
        path=path,
        status=code,
        status_message=message if isinstance(message, str) else str(message),
        events=[(str(n), _decoded(a, f"{path}.events")) for n, a in events],
        links=len(get_list(d, "links", path)),
    )


def trace_from_mlflow(value: Any, path: str = "") -> m.Trace:
    """One MLflow trace (MLflow 2 or 3 JSON) as a program run; errors name the field under ``path``."""
    prefix = f"{path}." if path else ""
    d = expect_object(value, path or "trace")
    info = expect_object(d.get("info"), f"{prefix}info")
    data = expect_object(d.get("data"), f"{prefix}data")
    trace_id = info.get("trace_id", info.get("request_id"))
    if not isinstance(trace_id, str):
        raise fail(f"{prefix}info.trace_id", "is required")
    raw_spans = data.get("spans")
    if not isinstance(raw_spans, list):
        raise fail(f"{prefix}data.spans", f"expected a list, got {kind_of(raw_spans)}")
    if not raw_spans:
        raise fail(f"{prefix}data.spans", "the trace has no spans (searched with --no-include-spans?)")
    spans = [_span(s, f"{prefix}data.spans[{i}]") for i, s in enumerate(raw_spans)]
    session, user, metadata_read = _session_and_user(info, f"{prefix}info")
    held = sorted(k for k, v in info.items() if k not in _INFO_READ and v not in (None, {}, [], "") and k != metadata_read)
    losses = [loss("info", f"no slot holds MLflow's {', '.join(held)}")] if held else []
    others = sorted(k for k in data if k not in ("spans", "request", "response"))  # MLflow 2 copies the root's inputs and outputs
    if others:
        losses.append(loss("data", f"no slot holds {', '.join(others)}"))
    return run_from_spans(spans, source_format="mlflow", source_trace_id=trace_id, losses=losses, session=session, user=user)


def _session_and_user(info: dict[str, Any], path: str) -> tuple[tuple[str, str] | None, tuple[str, str] | None, str | None]:
    """The session and user MLflow keeps in a trace's metadata (:data:`SESSION_METADATA`, :data:`USER_METADATA`), each
    as ``(where, id)``, and the name of the metadata field when they are all it holds (then nothing of it is lost)."""
    key = "trace_metadata" if "trace_metadata" in info else "request_metadata"
    metadata = info.get(key)
    if not isinstance(metadata, dict):
        return None, None, None
    found: list[tuple[str, str] | None] = []
    for name in (SESSION_METADATA, USER_METADATA):
        value = metadata.get(name)
        if value is not None and not isinstance(value, str):
            raise fail(f"{path}.{key}.{name}", f"expected a string, got {kind_of(value)}")
        found.append((f"{path}.{key}.{name}", value) if value and value.strip() else None)
    only_ours = metadata.keys() <= {SESSION_METADATA, USER_METADATA}
    return found[0], found[1], key if only_ours else None


class _Traces(Assembly):
    """Each trace of each value (a trace, a list, a search page), read on its own."""

    def add(self, value: Any, kind: m.SourceKind, line: int | None) -> Iterator[Read]:
        for path, item in _items(value):
            try:
                yield Read(trace=trace_from_mlflow(item, path), line=line)
            except TraceInputError as exc:
                yield Read(error=exc.located(line=line), line=line)


class _MLflow(Source):
    format = "mlflow"
    description = "an MLflow trace as JSON (Trace.to_json(), MLflow 2 or 3), a list of them, or an `mlflow traces search --output json` page"

    def detect(self, value: Any) -> m.SourceKind | None:
        if is_mlflow_trace(value):
            return "program_run"
        if _is_page(value) and all(map(is_mlflow_trace, value["traces"])):
            return "program_run"
        if isinstance(value, list) and value and all(map(is_mlflow_trace, value)):
            return "program_run"
        return None

    def shape(self, value: Any) -> m.SourceKind | None:
        return "program_run" if isinstance(value, (dict, list)) else None

    def read(self, value: Any, kind: m.SourceKind, options: ReadOptions) -> m.Trace:
        items = _items(value)
        if len(items) != 1:
            raise TraceInputError(f"this value holds {len(items)} MLflow traces, not one")
        return trace_from_mlflow(items[0][1], items[0][0])

    def assembly(self, options: ReadOptions) -> Assembly:
        return _Traces()


SOURCE = _MLflow()
"""MLflow traces (MLflow 2 and 3 JSON)."""
