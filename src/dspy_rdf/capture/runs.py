"""A recorded program run as plain data, and the trace it becomes.

The recorder (:mod:`dspy_rdf.capture.recorder`) notes each call of a run as it starts and ends, and converts the live values it
keeps to JSON data then (summaries, tool arguments, each LM call's history entry, the tool calls a module returned).
What is left once the run has ended needs no live object: reading each history entry into the canonical model,
linking returned tool calls to the parts that hold them, pairing tool executions with what asked for them, and
writing times as ``xsd:dateTime``. A :class:`RecordedRun` holds the run at that point and :func:`build_trace` does
the rest, later: when a ``MemorySink``'s traces are read, in a sink's writer process, or in the program for an
``on_run`` callback, so that the program's calls pay only for recording the run. Nothing here imports DSPy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import kind_of
from dspy_rdf.canonical.identity import canonical_json
from dspy_rdf.canonical.pairing import pair_tool_executions, tool_call_parts, within
from dspy_rdf.sources.dspy33 import entry_from_json, is_typed_entry
from dspy_rdf.sources.history_dict import entry_from_history_dict
from dspy_rdf.sources.live import loss

__all__ = ["RecordedRun", "ReturnedCall", "build_trace", "loss_note"]


@dataclass(frozen=True, slots=True)
class ReturnedCall:
    """A ``dspy.ToolCall`` a module returned (in a ``dspy.ToolCalls``), as plain data."""

    name: str
    call_id: str | None
    args: Any


@dataclass
class RecordedRun:
    """A program run as the recorder noted it (see the module docstring).

    ``calls`` are the calls in the order they started, each a record of builtins only (cheap to make, and to hand to a
    writer process): the call's JSON form (:func:`dspy_rdf.sources.run_json.call_to_json`: ``"call"`` says its kind, then the
    model's fields) without its times, which are in ``starts`` and ``ends`` (epoch seconds; an end of None for a call
    that did not end), nor an LM call's history entry, which is in ``entries`` (call index -> the entry as JSON data);
    ``returned`` holds the tool calls each module call returned; ``losses`` what was kept as text or left out while
    recording, and where; ``session_id`` and ``user_id`` the session and user the recorder was given when the run
    started."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    ends: list[float | None] = field(default_factory=list)
    entries: dict[int, Any] = field(default_factory=dict)
    returned: dict[int, list[ReturnedCall]] = field(default_factory=dict)
    losses: list[dict[str, str]] = field(default_factory=list)
    dspy_version: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    trace: m.Trace | None = field(default=None, repr=False, compare=False)
    """The trace once built (:func:`build_trace`)."""


def build_trace(run: RecordedRun) -> m.Trace:
    """The ``program_run`` trace of a recorded run. It never raises: a run that cannot be built (a bug of ours) is
    kept without its LM history entries, and says so in its losses.

    A run is built once (building takes values the readers refuse out of its entries, and gives its calls their
    parts): a second call, e.g. when a run is written again after its batch failed, returns the same trace."""
    if run.trace is None:
        try:
            run.trace = _built(run)
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not lose the run: keep what every call recorded
            run.trace = _bare(run, f"{type(exc).__name__}: {exc}")
    return run.trace


def loss_note(trace: m.Trace) -> str | None:
    """One line saying which values of a built run were not kept exactly, or None when all were."""
    if not trace.losses:
        return None
    where = ", ".join(x["field"] for x in trace.losses[:3]) + (" ..." if len(trace.losses) > 3 else "")
    return f"a run of {len(trace.calls)} calls was recorded with {len(trace.losses)} value(s) not kept exactly ({where}; the trace lists them in losses)"


def _iso(seconds: float) -> str:
    return m.utc_datetime(seconds)


def _calls(run: RecordedRun) -> list[m.Call]:
    """The run's calls as model objects, with their times (no LM history entry yet)."""
    return [
        _call(record, _iso(started), None if ended is None else _iso(ended))
        for record, started, ended in zip(run.calls, run.starts, run.ends)
    ]


class _CommonFields(TypedDict):
    started_at: str
    ended_at: str | None
    dspy_call_id: str | None
    parent_call: int | None
    error: str | None


def _call(record: dict[str, Any], started_at: str, ended_at: str | None) -> m.Call:
    """One recorded call as its model object (the recorder made the record: its fields are already checked)."""
    common: _CommonFields = {
        "started_at": started_at,
        "ended_at": ended_at,
        "dspy_call_id": record.get("dspy_call_id"),
        "parent_call": record.get("parent_call"),
        "error": record.get("error"),
    }
    kind = record["call"]
    if kind == "module":
        return m.ModuleCall(
            module_class=record["module_class"], module_class_path=record.get("module_class_path"), input_summary=record.get("input_summary"),
            output_summary=record.get("output_summary"), **common,
        )  # fmt: skip
    if kind == "lm":
        return m.LMCall(model=record.get("model"), **common)
    if kind == "tool":
        result = record.get("tool_result")
        return m.ToolExecution(
            tool_call=m.ToolCall(**record["tool_call"]), tool_result=None if result is None else m.ToolResult(**result), **common
        )
    if kind == "evaluate":
        return m.EvaluateCall(
            metric=record.get("metric"), program_class=record.get("program_class"),
            program_fingerprint=record.get("program_fingerprint"), devset_size=record.get("devset_size"),
            score=record.get("score"), example_results=[m.ExampleResult(**r) for r in record.get("example_results", ())],
            **common,
        )  # fmt: skip
    if kind == "compile":
        return m.CompileCall(
            optimizer_class=record["optimizer_class"], input_summary=record.get("input_summary"),
            program_class=record.get("program_class"), student_fingerprint=record.get("student_fingerprint"),
            program_fingerprint=record.get("program_fingerprint"),
            candidates=[m.ProgramCandidate(**c) for c in record.get("candidates", ())],
            training_examples=[m.TrainingExample(**e) for e in record.get("training_examples", ())], **common,
        )  # fmt: skip
    raise ValueError(f"a recorded call of unknown kind {kind!r}")


def _trace(run: RecordedRun, calls: list[m.Call], losses: list[dict[str, str]]) -> m.Trace:
    root = calls[0]
    return m.Trace(
        source_kind="program_run",
        source_format="dspy_callback",
        dspy_version=run.dspy_version,
        started_at=root.started_at,
        ended_at=root.ended_at,
        calls=calls,
        losses=losses,
        session_id=run.session_id,
        user_id=run.user_id,
    )


def _built(run: RecordedRun) -> m.Trace:
    losses = list(run.losses)
    calls = _calls(run)
    for index, data in run.entries.items():
        call = calls[index]
        assert isinstance(call, m.LMCall)  # the recorder keeps history entries of LM calls only
        entry = call.entry = _history_entry(data, f"calls[{index}].entry", losses)
        if entry is not None:
            entry.timestamp = _in_utc(entry.timestamp)
    _link_returned_tool_calls(calls, run.returned)
    pair_tool_executions(calls, run.starts, run.ends)
    return _trace(run, calls, losses)


def _in_utc(timestamp: str) -> str:
    """A history entry's time in UTC: DSPy writes the local time of the program without an offset, and the program's
    machine (whose time zone this process shares) knows which one it was, so that the entries of a recorded run fall
    on the same days as its calls and as the same run imported from spans."""
    if timestamp.endswith("Z"):
        return timestamp
    try:
        return m.format_datetime(datetime.fromisoformat(timestamp).astimezone())  # a naive time is local time
    except (ValueError, OverflowError, OSError):
        return timestamp


def _bare(run: RecordedRun, why: str) -> m.Trace:
    """The run without its LM history entries (the calls, their times and summaries), when building it failed."""
    return _trace(run, _calls(run), [*run.losses, loss("calls", f"the run could not be converted ({why}); its LM history entries were left out")])


_MAX_LEFT_OUT = 20
"""Values of one history entry left out, at most, before the whole entry is (a reader that refuses many is lost)."""


def _history_entry(data: Any, path: str, losses: list[dict[str, str]]) -> m.LMHistoryEntry | None:
    """The canonical form of one ``lm.history`` entry (as JSON data), read by the reader of its shape. A value the
    reader refuses (a setting that was NaN and is kept as text where a number belongs) is left out of ``data`` and
    listed in ``losses``, and the entry read again, so that one odd value does not cost the entry's messages,
    response and usage; an entry no reader takes is left out and listed in ``losses``."""
    for _ in range(_MAX_LEFT_OUT + 1):
        try:
            if is_typed_entry(data):
                return entry_from_json(data, path)
            if isinstance(data, dict):
                return entry_from_history_dict(data, path)
            raise TraceInputError(f"expected an lm.history entry, got {kind_of(data)}", field=path)
        except TraceInputError as exc:
            inside = exc.field[len(path) + 1 :] if exc.field.startswith(path + ".") else ""
            left_out = _leave_out(data, inside) if inside else _ABSENT
            if left_out is _ABSENT:
                losses.append(loss(path, f"the LM history entry could not be read ({exc.reason}); left out"))
                return None
            shown = canonical_json(left_out) if not isinstance(left_out, str) else left_out
            shown = shown if len(shown) <= 200 else shown[:200] + "…"
            losses.append(loss(exc.field, f"{exc.reason}; the value {shown!r} was left out"))
    losses.append(loss(path, f"the LM history entry could not be read (more than {_MAX_LEFT_OUT} values refused); left out"))
    return None


_ABSENT = object()
_STEP = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def _leave_out(data: Any, where: str) -> Any:
    """Remove the value at the dotted path ``where`` (``kwargs.temperature``, ``messages[0].content``) from ``data``
    and return it; :data:`_ABSENT` (and ``data`` unchanged) when there is no value there."""
    steps = [int(index) if index else key for index, key in _STEP.findall(where)]
    parent = data
    for step in steps[:-1]:
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            return _ABSENT
    last = steps[-1] if steps else None
    if isinstance(parent, dict) and isinstance(last, str) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and isinstance(last, int) and 0 <= last < len(parent):
        return parent.pop(last)
    return _ABSENT


def _link_returned_tool_calls(calls: list[m.Call], returned: dict[int, list[ReturnedCall]]) -> None:
    """Point each module call's returned tool calls at the tool-call parts of the LM responses below it that hold
    them (same call id, else same name and arguments): one native tool call is one part. A returned call no
    response holds (an adapter parsed it from text) becomes a tool-call part of the module call itself."""
    claimed: set[m.PartRef] = set()
    for index in sorted(returned):
        module = calls[index]
        assert isinstance(module, m.ModuleCall)  # only module calls return tool calls
        parts = [pair for i in range(index + 1, len(calls)) if within(calls, i, index) for pair in tool_call_parts(calls[i], i)]
        refs: list[m.PartRef] = []
        own: list[m.LMToolCallPart] = []
        for tool_call in returned[index]:
            match = None
            for ref, part in parts:
                if ref in claimed or part.name != tool_call.name:
                    continue
                if tool_call.call_id is not None and part.call_id == tool_call.call_id:
                    match = ref
                    break
                if match is None and part.args == tool_call.args and (tool_call.call_id is None or part.call_id is None):
                    match = ref
            if match is not None:
                claimed.add(match)
                refs.append(match)
            else:
                args = tool_call.args if isinstance(tool_call.args, dict) else {}
                own.append(m.LMToolCallPart(name=tool_call.name, call_id=tool_call.call_id, args=args))
        module.returned_tool_calls = sorted(refs, key=m.PartRef.order)
        module.tool_calls = own
