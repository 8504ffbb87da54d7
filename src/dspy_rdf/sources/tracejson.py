"""Traces <-> JSON and live DSPy objects: the one entry point for every DSPy shape a user holds.

:func:`trace_from_json` reads a parsed JSON value of any supported shape and says where it is wrong;
:func:`trace_from_dspy` does the same for live DSPy objects. Both detect the shape, or take
``source_format=`` to force one:

================  =======================================================================  =====================
source_format     what                                                                     source_kind
================  =======================================================================  =====================
dspy33            DSPy 3.3 typed objects / ``model_dump(mode="json")``                     entry, history, request,
                                                                                           response, message, part
lm15              DSPy 3.4 ``dspy.lm15`` objects / their serde JSON                        request, response,
                                                                                           message, part
history_dict      ``lm.history`` entries as dicts, DSPy 2.5 to 3.4 (one, or a list)        entry, history
openai_chat       OpenAI chat-completions request, response, or ``{request, response}``    request, response,
                                                                                           request_response
react_trajectory  ``dspy.ReAct`` ``Prediction.trajectory``                                 trajectory
dspy_callback     a program run recorded by :class:`dspy_rdf.capture.recorder.TraceRecorder`        program_run
mlflow            MLflow traces (MLflow 2 and 3 JSON, lists, ``mlflow traces search``       program_run (one per
                  pages)                                                                   MLflow trace)
otlp              OpenTelemetry spans as OTLP JSON (GenAI, OpenInference, MLflow and       program_run (one per
                  legacy attributes)                                                       trace id)
================  =======================================================================  =====================

:func:`trace_to_json` writes a trace as JSON that :func:`trace_from_json` reads back to an equal trace: DSPy 3.3
JSON for the kinds DSPy has an object for (so a trace read from lm15, history dicts or OpenAI payloads comes
out as the equivalent DSPy 3.3 objects), the original dict for a trajectory, and a small dspy-rdf envelope
(``{"dspy_rdf_kind": ...}``) for ``request_response`` and ``program_run``, which DSPy has no object for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import check_keys, kind_of
from dspy_rdf.sources import SOURCES, Assembly, Read, ReadOptions, dspy33, source_for
from dspy_rdf.sources.live import is_lm15, json_data
from dspy_rdf.sources.run_json import losses_from_json, redactions_from_json

__all__ = ["TraceStream", "detect_source", "trace_from_dspy", "trace_from_json", "trace_to_dspy", "trace_to_json", "traces_from_json"]

ENVELOPE_KEY = "dspy_rdf_kind"
_ENVELOPE_KINDS = ("request_response", "program_run")
_CONTENT = "content"


# --- detection ---------------------------------------------------------------------------------------------


def _envelope(value: Any) -> tuple[m.SourceFormat, m.SourceKind] | None:
    """(source_format, source_kind) of a dspy-rdf envelope (``{"dspy_rdf_kind": ...}``), or None."""
    if not isinstance(value, dict) or ENVELOPE_KEY not in value:
        return None
    kind, fmt = value[ENVELOPE_KEY], value.get("source_format", "dspy33")
    if fmt in m.SOURCE_FORMATS and (kind in _ENVELOPE_KINDS or (kind in m.SOURCE_KINDS and _CONTENT in value)):
        return fmt, kind
    return None


def detect_source(value: Any) -> tuple[m.SourceFormat, m.SourceKind]:
    """Say which DSPy shape a parsed JSON value is, as ``(source_format, source_kind)``, or raise
    :class:`TraceInputError` listing the shapes that are understood."""
    if isinstance(value, dict) and ENVELOPE_KEY in value:
        found = _envelope(value)
        if found is None:
            raise TraceInputError(f"field {ENVELOPE_KEY}: {value.get(ENVELOPE_KEY)!r} is not a dspy-rdf trace kind of a known source format")
        return found
    for source in SOURCES:
        if (kind := source.detect(value)) is not None:
            return source.format, kind
    if isinstance(value, list) and not value:
        raise TraceInputError("an empty list holds no history entries")
    if isinstance(value, dict):
        keys = ", ".join(sorted(map(str, value))[:10]) or "none"
        what = f"a JSON object with keys {keys}"
    elif isinstance(value, list):
        what = "a list whose items are not all lm.history entries"
    else:
        what = kind_of(value)
    shapes = "; ".join(source.description for source in sorted(SOURCES, key=lambda source: source is not dspy33.SOURCE))
    raise TraceInputError(f"cannot tell what DSPy object this is ({what}); expected {shapes}")


# --- JSON -> trace -----------------------------------------------------------------------------------------


class TraceStream:
    """The traces of one input, from its parsed JSON values given in order (one value of a ``.json`` file, or each
    line of a ``.jsonl`` file): :meth:`add` yields a :class:`~dspy_rdf.sources.Read` for each trace a value completes
    (or the error that stopped it), :meth:`finish` what remains at the end of the input (an OTLP trace whose spans
    were still arriving). Each value's shape is detected, or forced with ``source_format``; ``model`` and
    ``timestamp`` are as for :func:`trace_from_json`."""

    def __init__(self, *, source_format: m.SourceFormat | None = None, model: str | None = None, timestamp: str | None = None) -> None:
        self.source_format = source_format
        self.options = ReadOptions(model=model, timestamp=timestamp)
        self._assemblies: dict[str, Assembly] = {}

    def add(self, value: Any, line: int | None = None) -> Iterator[Read]:
        """The traces ``value`` (read on JSON Lines line ``line``) completes, each as a :class:`~dspy_rdf.sources.Read`."""
        try:
            fmt, kind = detect_source(value) if self.source_format is None else _kind_within(value, self.source_format)
            if isinstance(value, dict) and ENVELOPE_KEY in value:
                yield Read(trace=_read_envelope(value, fmt, kind), line=line)
                return
            source = source_for(fmt)
            if source is None:
                raise TraceInputError(f"a {kind} cannot be read as {fmt}")
        except TraceInputError as exc:
            yield Read(error=exc.located(line=line), line=line)
            return
        assembly = self._assemblies.get(fmt)
        if assembly is None:
            assembly = self._assemblies[fmt] = source.assembly(self.options)
        try:
            yield from assembly.add(value, kind, line)
        except (ValueError, TypeError, OverflowError, KeyError, AttributeError, RecursionError) as exc:
            if isinstance(exc, TraceInputError):
                raise
            # a value no reader check foresaw: this input is skipped, named, and the others are read
            what = "nested too deeply" if isinstance(exc, RecursionError) else f"{type(exc).__name__}: {str(exc)[:200]}"
            yield Read(error=TraceInputError(f"this value could not be read ({what})").located(line=line), line=line)

    @property
    def waiting(self) -> int:
        """The number of traces begun and not read yet (an OTLP trace whose spans are still coming)."""
        return sum(assembly.waiting for assembly in self._assemblies.values())

    def finish(self) -> Iterator[Read]:
        """The traces still waiting for more values when the input ends."""
        for assembly in self._assemblies.values():
            yield from assembly.finish()


def traces_from_json(
    value: Any, *, source_format: m.SourceFormat | None = None, model: str | None = None, timestamp: str | None = None
) -> list[m.Trace]:
    """Read every trace a parsed JSON value holds (an MLflow search page or an OTLP export hold several); the first
    trace that cannot be read raises :class:`TraceInputError`. Options as for :func:`trace_from_json`."""
    stream = TraceStream(source_format=source_format, model=model, timestamp=timestamp)
    traces = []
    for read in [*stream.add(value), *stream.finish()]:
        if read.error is not None:
            raise read.error
        assert read.trace is not None  # a Read without an error holds its trace
        traces.append(read.trace)
    return traces


def trace_from_json(
    value: Any,
    *,
    source_format: m.SourceFormat | None = None,
    source_index: int | None = None,
    model: str | None = None,
    timestamp: str | None = None,
) -> m.Trace:
    """Read one parsed JSON value of any supported DSPy shape as a trace.

    ``source_format`` forces the reader (see the module docstring) instead of detecting the shape. ``model``
    and ``timestamp`` fill in history-dict entries from DSPy versions that did not record them (DSPy 2.5.0 to
    2.5.3, and ``DummyLM`` up to 3.1); what was filled in is recorded in the entry's ``extra_fields``. A value that
    holds several traces (an MLflow search page, an OTLP export) is refused: read it with :func:`traces_from_json`.
    """
    traces = traces_from_json(value, source_format=source_format, model=model, timestamp=timestamp)
    if len(traces) != 1:
        raise TraceInputError(f"this value holds {len(traces)} traces, not one; read it with traces_from_json (or read_traces for a file)")
    traces[0].source_index = source_index
    return traces[0]


def _kind_within(value: Any, source_format: m.SourceFormat) -> tuple[m.SourceFormat, m.SourceKind]:
    if source_format not in m.SOURCE_FORMATS:
        raise TraceInputError(f"unknown source format {source_format!r}; expected one of {', '.join(m.SOURCE_FORMATS)}")
    found = _envelope(value)
    if found is not None and found[0] == source_format:
        return found
    source = source_for(source_format)
    kind = source.shape(value) if source is not None else None
    if kind is None:
        what = source.description if source is not None else "a dspy-rdf program run"
        raise TraceInputError(f"this is not {what} (forced with --from {source_format})")
    return source_format, kind


def _read_envelope(value: dict[str, Any], fmt: m.SourceFormat, kind: m.SourceKind) -> m.Trace:
    """A dspy-rdf envelope: canonical (DSPy 3.3) JSON of content read from another shape, or a kind DSPy has no
    object for (``request_response``, ``program_run``)."""
    if kind == "program_run":
        from dspy_rdf.sources.run_json import run_from_json

        trace = run_from_json(value)
        trace.source_format = fmt
        return trace
    if kind == "request_response" and _CONTENT not in value:
        check_keys(value, frozenset({ENVELOPE_KEY, "source_format", "redactions", "losses", "request", "response"}), "", "a dspy-rdf trace envelope")
        trace = m.Trace(source_kind=kind, source_format=fmt)
        trace.request = dspy33.request_from_json(value.get("request"), "request")
        trace.response = dspy33.response_from_json(value.get("response"), "response")
        trace.redactions = redactions_from_json(value.get("redactions"), "redactions")
        trace.losses = losses_from_json(value.get("losses"), "losses")
        return trace
    check_keys(value, frozenset({ENVELOPE_KEY, "source_format", "redactions", "losses", _CONTENT}), "", "a dspy-rdf trace envelope")
    source = source_for(fmt)
    if source is not None and kind in source.written_kinds:  # the content is the source's own JSON
        trace = source.read(value[_CONTENT], kind, ReadOptions())
    else:
        trace = dspy33.trace_from_json(value[_CONTENT])
    if trace.source_kind != kind:
        raise TraceInputError(f"field {_CONTENT}: holds a {trace.source_kind}, but {ENVELOPE_KEY} says {kind}")
    trace.redactions = redactions_from_json(value.get("redactions"), "redactions")
    trace.losses = losses_from_json(value.get("losses"), "losses")
    trace.source_format = fmt
    return trace


# --- trace -> JSON -----------------------------------------------------------------------------------------


def trace_to_json(trace: m.Trace) -> Any:
    """Write a trace as JSON that :func:`trace_from_json` reads back to an equal trace."""
    kind = trace.source_kind
    if kind == "program_run":
        from dspy_rdf.sources.run_json import run_to_json

        return run_to_json(trace)
    marks = {}  # what a trace records about its own making, kept in the envelope
    if trace.redactions:
        marks["redactions"] = trace.redactions
    if trace.losses:
        marks["losses"] = trace.losses
    if kind == "request_response":
        if trace.request is None or trace.response is None:
            raise ValueError("a request_response trace needs both its request and its response to be written as JSON")
        return {
            ENVELOPE_KEY: kind,
            "source_format": trace.source_format,
            "request": dspy33.request_to_json(trace.request),
            "response": dspy33.response_to_json(trace.response),
            **marks,
        }
    source = source_for(trace.source_format)
    if source is not None and kind in source.written_kinds:  # back in the shape it came from
        content = source.write(trace)
        if not marks:
            return content
    else:
        # Canonical (DSPy 3.3) JSON of content read from another shape, in an envelope that keeps where it came from,
        # so that exporting to-json's output gives the same trace and IRI.
        content = dspy33.trace_to_json(trace)
    return {ENVELOPE_KEY: kind, "source_format": trace.source_format, _CONTENT: content, **marks}


# --- live DSPy objects -------------------------------------------------------------------------------------


def trace_from_dspy(obj: Any, *, source_format: m.SourceFormat | None = None) -> m.Trace:
    """Read live DSPy objects of any supported version as a trace.

    Accepts DSPy 3.3 typed objects (``LMHistoryEntry``, ``LMRequest``, ``LMResponse``, ``LMMessage``, any part),
    DSPy 3.4 lm15 objects (a ``(request, response)`` pair too), ``lm.history`` (typed entries and dicts, mixed, or
    the LM itself), a ``dspy.ReAct`` prediction (its trajectory), a ``dspy.ReActV2`` prediction (its history), a
    ``dspy.History``, ``dspy.ToolCalls`` and ``dspy.ToolCallResults``. Live objects are first converted to JSON data
    the way their libraries write them (:func:`dspy_rdf.sources.live.json_data`); a value that has no JSON form is kept as
    its text and listed in the trace's ``losses``.
    """
    if hasattr(obj, "history") and hasattr(obj, "forward") and isinstance(obj.history, list):
        obj = obj.history  # a DSPy LM: its history
    if hasattr(obj, "trajectory") and isinstance(getattr(obj, "trajectory"), dict):
        obj = obj.trajectory  # a ReAct Prediction
    if isinstance(obj, (list, tuple)) and _is_lm15_call(obj):
        # an lm15 call kept as (request, response), in either order
        by_class = {type(item).__name__: item for item in obj}
        if by_class.keys() == {"Request", "Response"}:
            obj = {"request": by_class["Request"], "response": by_class["Response"]}
    if isinstance(obj, (list, tuple)) and len(obj) > 1 and all(_is_lm15_call(item) for item in obj):
        raise TraceInputError(
            f"this holds {len(obj)} LM calls (lm15 requests with their responses), and a trace holds one: read each "
            "(request, response) with trace_from_dspy, or record the program with dspy_rdf.capture.recorder.TraceRecorder"
        )
    if not (isinstance(obj, (dict, list, tuple)) or hasattr(obj, "model_dump") or hasattr(obj, "toDict") or is_lm15(obj)):
        raise TraceInputError(
            f"cannot read a {type(obj).__name__} as a DSPy trace; expected a DSPy 3.3 or 3.4 LM object (history entry, "
            "request, response, message, part), an LM or its history, a dspy.ReAct or dspy.ReActV2 prediction, a "
            "dspy.History, or dspy.ToolCalls"
        )
    losses: list[dict[str, str]] = []
    data = json_data(obj, losses=losses)
    if is_lm15(obj) and source_format is None:
        source_format = "lm15"
    trace = trace_from_json(data, source_format=source_format)
    trace.losses = losses
    return trace


def _is_lm15_call(value: Any) -> bool:
    """Whether ``value`` is one live lm15 LM call: a (request, response) pair, or a ``{"request", "response"}`` dict."""
    if isinstance(value, (list, tuple)):
        return len(value) == 2 and all(map(is_lm15, value))
    if isinstance(value, dict) and value.keys() == {"request", "response"}:
        return all(map(is_lm15, value.values()))
    return False


def trace_to_dspy(trace: m.Trace) -> Any:
    """Build the DSPy 3.3 object(s) a trace holds (requires ``dspy>=3.3``); kinds DSPy has no object for raise ValueError."""
    if trace.source_kind in ("lm_message", "lm_part"):
        import pydantic

        types = dspy33.dspy33_types()
        LMMessage, LMPart = types.LMMessage, types.LMPart
        data = dspy33.trace_to_json(trace)
        if trace.source_kind == "lm_message":
            return LMMessage.model_validate(data)
        return pydantic.TypeAdapter(LMPart).validate_python(data)
    if trace.source_kind in ("request_response", "trajectory", "program_run"):
        raise ValueError(f"DSPy has no object for a {trace.source_kind} trace; use trace_to_json")
    return dspy33.trace_to_dspy(trace)
