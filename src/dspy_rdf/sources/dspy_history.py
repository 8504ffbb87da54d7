"""``dspy.History`` (``dspy.ReActV2``'s trajectory), ``dspy.ReActV2`` predictions, and ``dspy.ToolCalls`` /
``dspy.ToolCallResults`` <-> messages of the canonical model.

The JSON read here is what pydantic writes for these DSPy 3.3 types (``model_dump(mode="json")``):

- a ``dspy.History``: ``{"messages": [event, ...]}``; a ``ReActV2`` event holds the step's input fields (the
  first step), ``next_thought``, ``tool_calls`` (a ``dspy.ToolCalls``: ``{"tool_calls": [{"name", "args"}, ...],
  "tool_call_results": {"tool_call_results": [{"call_id", "name", "value", "is_error"}, ...]}}``; DSPy's own
  serializer leaves the calls' ids out, the results keep them) and, in the last step, the output fields the
  ``submit`` tool returned; a ``History`` of any other program holds signature fields only;
- a ``ReActV2`` prediction: its output fields, ``history`` and ``termination_reason``;
- a ``dspy.ToolCalls`` value (with or without its results) or a ``dspy.ToolCallResults`` value alone.

Each event becomes, in order: a ``user`` message with one text part per input field, an ``assistant`` message
with the thought (a text part) and the tool calls (tool-call parts, their call id taken from the call or else from
its result), a ``tool`` message with the results (tool-result parts: ``is_error``, the value as a text part,
JSON text for a value that is not a string), and an ``assistant`` message with the output fields. Every part and
message carries ``metadata["dspy_history"]`` (the event and the field it came from), so :func:`history_to_json`
gives back the very same JSON. A prediction's output fields and ``termination_reason`` end the messages.
"""

from __future__ import annotations

import json
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import expect_object, fail, get_list, kind_of
from dspy_rdf.sources.base import ReadOptions, Source

__all__ = ["SOURCE", "history_to_json", "is_history_json", "messages_from_history"]

KEY = "dspy_history"
"""The metadata key that says where a message or part came from."""

_THOUGHT, _CALLS, _RESULTS = "next_thought", "tool_calls", "tool_call_results"
_PREDICTION_KEYS = ("history", "termination_reason")


# --- detection ----------------------------------------------------------------------------------------------------


def _is_tool_call(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("name"), str) and ("args" in value or "arguments" in value)


def _is_tool_calls(value: Any) -> bool:
    """A ``dspy.ToolCalls`` as its JSON: ``tool_calls`` (a list of calls) and optionally ``tool_call_results``."""
    return (
        isinstance(value, dict)
        and _CALLS in value
        and value.keys() <= {_CALLS, _RESULTS}
        and isinstance(value[_CALLS], list)
        and all(map(_is_tool_call, value[_CALLS]))
    )


def _is_results(value: Any) -> bool:
    return isinstance(value, dict) and value.keys() == {_RESULTS} and isinstance(value[_RESULTS], list)


def _is_history(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.keys() == {"messages"}
        and isinstance(value["messages"], list)
        and all(isinstance(e, dict) and "role" not in e and "parts" not in e for e in value["messages"])
    )


def is_history_json(value: Any) -> bool:
    """Whether ``value`` is one of the JSON shapes of this module (see the module docstring). Never raises."""
    if _is_history(value):  # a ReActV2 trajectory, or the conversation turns of any other program
        return True
    if isinstance(value, dict) and all(k in value for k in _PREDICTION_KEYS):
        return _is_history(value["history"]) and isinstance(value["termination_reason"], (str, type(None)))
    return _is_tool_calls(value) or _is_results(value)


# --- JSON -> messages -------------------------------------------------------------------------------------------------


def _text(value: Any, meta: dict[str, Any]) -> m.LMTextPart:
    if isinstance(value, str):
        return m.LMTextPart(text=value, metadata={KEY: meta})
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        raise fail(meta.get("field", ""), f"expected a JSON value, got {kind_of(value)}") from None
    return m.LMTextPart(text=text, metadata={KEY: {**meta, "json": True}})


def _calls_and_results(value: Any, event: int, path: str) -> tuple[list[m.LMToolCallPart], list[m.LMToolResultPart] | None]:
    d = expect_object(value, path)
    raw_results = d.get(_RESULTS)
    results: list[Any] | None = None
    if raw_results is not None:
        results = get_list(expect_object(raw_results, f"{path}.{_RESULTS}"), _RESULTS, f"{path}.{_RESULTS}", required=True)
    calls = []
    for i, raw in enumerate(get_list(d, _CALLS, path)):
        cp = f"{path}.{_CALLS}[{i}]"
        c = expect_object(raw, cp)
        if not isinstance(c.get("name"), str):
            raise fail(f"{cp}.name", "is required")
        args = c.get("args", c.get("arguments", {}))
        meta: dict[str, Any] = {"event": event}
        call_id = c.get("id")
        if call_id is None and results is not None and i < len(results) and isinstance(results[i], dict):
            call_id, meta["id_from_result"] = results[i].get("call_id"), True
        if "arguments" in c and "args" not in c:
            meta["arguments_key"] = True
        part = m.LMToolCallPart(name=c["name"], call_id=call_id if isinstance(call_id, str) else None, metadata={KEY: meta})
        if isinstance(args, dict):
            part.args = args
        else:
            part.provider_data = {"raw_args": args}
        calls.append(part)
    if results is None:
        return calls, None
    parts = []
    for i, raw in enumerate(results):
        rp = f"{path}.{_RESULTS}.{_RESULTS}[{i}]"
        r = expect_object(raw, rp)
        is_error = r.get("is_error", False)
        if not isinstance(is_error, bool):
            raise fail(f"{rp}.is_error", f"expected true or false, got {kind_of(is_error)}")
        name = r.get("name")
        if not isinstance(name, str):
            raise fail(f"{rp}.name", "is required")
        call_id = r.get("call_id")
        if call_id is not None and not isinstance(call_id, str):
            raise fail(f"{rp}.call_id", f"expected a string, got {kind_of(call_id)}")
        content: list[m.LMPart] = [_text(r.get("value"), {"event": event, "field": "value"})] if "value" in r else []
        parts.append(m.LMToolResultPart(call_id=call_id, name=name, content=content, is_error=is_error, metadata={KEY: {"event": event}}))
    return calls, parts


def _event_messages(event: dict[str, Any], index: int, outputs: set[str], path: str) -> list[m.LMMessage]:
    inputs = [(k, v) for k, v in event.items() if k not in (_THOUGHT, _CALLS) and k not in outputs]
    finals = [(k, v) for k, v in event.items() if k not in (_THOUGHT, _CALLS) and k in outputs]
    messages = []
    parts: list[m.LMPart]
    if inputs:
        parts = [_text(v, {"event": index, "field": k}) for k, v in inputs]
        messages.append(m.LMMessage(role="user", parts=parts, metadata={KEY: {"event": index, "fields": "inputs"}}))
    if _THOUGHT in event or _CALLS in event:
        parts = []
        if _THOUGHT in event:
            parts.append(_text(event[_THOUGHT], {"event": index, "field": _THOUGHT}))
        results = None
        if _CALLS in event:
            calls, results = _calls_and_results(event[_CALLS], index, f"{path}.{_CALLS}")
            parts += calls
        meta = {"event": index, "fields": "step", **({"results": results is not None} if _CALLS in event else {})}
        messages.append(m.LMMessage(role="assistant", parts=parts, metadata={KEY: meta}))
        if results:
            messages.append(m.LMMessage(role="tool", parts=list(results), metadata={KEY: {"event": index, "fields": "results"}}))
    if finals:
        parts = [_text(v, {"event": index, "field": k}) for k, v in finals]
        messages.append(m.LMMessage(role="assistant", parts=parts, metadata={KEY: {"event": index, "fields": "outputs"}}))
    return messages


def messages_from_history(value: Any) -> list[m.LMMessage]:
    """The messages of any JSON shape of this module (see the module docstring)."""
    d = expect_object(value, "history")
    if _is_tool_calls(d) or _is_results(d):
        wrapped = d if _CALLS in d else {_CALLS: [], _RESULTS: d}
        messages = _event_messages({_CALLS: wrapped}, 0, set(), "")
        shape = "tool_calls" if _CALLS in d else "tool_call_results"
        messages[0].metadata[KEY]["shape"] = shape
        return messages
    prediction = "messages" not in d
    history = expect_object(d["history"], "history") if prediction else d
    events = get_list(history, "messages", "history" if prediction else "", required=True)
    outputs = {k for k in d if k not in _PREDICTION_KEYS} if prediction else set()
    if not prediction:
        # a ReActV2 history alone: the output fields are what its submit tool returned
        for event in events:
            if isinstance(event, dict) and _is_tool_calls(event.get(_CALLS)):
                for call in event[_CALLS][_CALLS]:
                    if call.get("name") == "submit" and isinstance(call.get("args"), dict):
                        outputs |= set(call["args"])
    messages = []
    for i, event in enumerate(events):
        messages += _event_messages(expect_object(event, f"messages[{i}]"), i, outputs, f"messages[{i}]")
    if prediction:
        fields = [(k, v) for k, v in d.items() if k not in _PREDICTION_KEYS]
        parts: list[m.LMPart] = [_text(v, {"field": k}) for k, v in fields]
        meta = {"prediction": True, "termination_reason": d["termination_reason"], "events": len(events)}
        messages.append(m.LMMessage(role="assistant", parts=parts, metadata={KEY: meta}))
    return messages


# --- messages -> JSON ---------------------------------------------------------------------------------------------


def _value(part: m.LMPart) -> Any:
    assert isinstance(part, m.LMTextPart)
    return json.loads(part.text) if part.metadata[KEY].get("json") else part.text


def history_to_json(messages: list[m.LMMessage]) -> Any:
    """Rebuild the JSON that :func:`messages_from_history` read."""
    events: dict[int, dict[str, Any]] = {}
    prediction: dict[str, Any] | None = None
    shape = None
    for message in messages:
        meta = message.metadata[KEY]
        if meta.get("prediction"):
            prediction = {"termination_reason": meta["termination_reason"], **{p.metadata[KEY]["field"]: _value(p) for p in message.parts}}
            events.update({i: {} for i in range(meta["events"]) if i not in events})
            continue
        event = events.setdefault(meta["event"], {})
        shape = meta.get("shape", shape)
        if meta["fields"] in ("inputs", "outputs"):
            event.update((p.metadata[KEY]["field"], _value(p)) for p in message.parts)
        elif meta["fields"] == "step":
            calls = []
            for part in message.parts:
                if isinstance(part, m.LMToolCallPart):
                    call: dict[str, Any] = {} if part.metadata[KEY].get("id_from_result") or part.call_id is None else {"id": part.call_id}
                    call["name"] = part.name
                    args = part.provider_data["raw_args"] if "raw_args" in part.provider_data else part.args
                    call["arguments" if part.metadata[KEY].get("arguments_key") else "args"] = args
                    calls.append(call)
                else:
                    event[_THOUGHT] = _value(part)
            if "results" in meta:
                event[_CALLS] = {_CALLS: calls}
                if meta["results"]:
                    event[_CALLS][_RESULTS] = {_RESULTS: []}
        else:  # results
            results = event[_CALLS][_RESULTS][_RESULTS]
            for part in message.parts:
                assert isinstance(part, m.LMToolResultPart)  # a results message holds tool results only
                result: dict[str, Any] = {"call_id": part.call_id, "name": part.name}
                if part.content:
                    result["value"] = _value(part.content[0])
                result["is_error"] = part.is_error
                results.append(result)
    if shape is not None:
        value = events[0][_CALLS]
        return value[_RESULTS] if shape == "tool_call_results" else value
    history = {"messages": [events[i] for i in sorted(events)]}
    if prediction is None:
        return history
    termination = prediction.pop("termination_reason")
    return {**prediction, "history": history, "termination_reason": termination}


class _DspyHistory(Source):
    format = "dspy_history"
    description = "a dspy.History (dspy.ReActV2's trajectory), a dspy.ReActV2 prediction, or dspy.ToolCalls / ToolCallResults"

    def detect(self, value: Any) -> m.SourceKind | None:
        return "trajectory" if is_history_json(value) else None

    def shape(self, value: Any) -> m.SourceKind | None:
        return "trajectory" if isinstance(value, dict) else None

    written_kinds = frozenset({"trajectory"})

    def read(self, value: Any, kind: m.SourceKind, options: ReadOptions) -> m.Trace:
        return m.Trace(source_kind="trajectory", source_format=self.format, messages=messages_from_history(value))

    def write(self, trace: m.Trace) -> Any:
        return history_to_json(trace.messages)


SOURCE = _DspyHistory()
"""``dspy.History``, ``dspy.ReActV2`` predictions, ``dspy.ToolCalls`` and ``dspy.ToolCallResults``."""
