"""``dspy.ReAct`` trajectories <-> messages of the canonical model.

A ReAct prediction's ``trajectory`` is a dict of ``thought_i``, ``tool_name_i``, ``tool_args_i`` and
``observation_i`` (DSPy 2.5 to 3.4). Step ``i`` becomes two messages:

- an ``assistant`` message: an ``LMTextPart`` with the thought (when there is one) and an ``LMToolCallPart``
  with the tool name and arguments, whose call id is ``react-step-<i>`` (ReAct has no provider call ids);
- a ``tool`` message: an ``LMToolResultPart`` answering that call id, its content one ``LMTextPart`` with the
  observation. ``is_error`` is true when ReAct wrote ``Execution error in <tool>: ...`` for a tool that raised.

Every part carries ``metadata["react_step"] = i``; an observation that is not a string is written as JSON text
and marked ``metadata["observation_json"] = True``, and ``tool_args`` that are not an object are kept in
``provider_data["raw_args"]``, so :func:`trajectory_to_json` gives back the very same dict. Steps keep their
numbers, so a trajectory that ReAct truncated (its first steps removed) keeps its gaps.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import kind_of
from dspy_rdf.sources.base import ReadOptions, Source

__all__ = ["SOURCE", "call_id_for_step", "is_trajectory", "messages_from_trajectory", "trajectory_to_json"]

_KEY = re.compile(r"(thought|tool_name|tool_args|observation)_(0|[1-9][0-9]*)")
_FIELDS = ("thought", "tool_name", "tool_args", "observation")
ERROR_PREFIX = "Execution error in "


def call_id_for_step(step: int) -> str:
    """The call id that links step ``step``'s tool call and its result."""
    return f"react-step-{step}"


def is_trajectory(value: Any) -> bool:
    """Whether ``value`` is a non-empty dict whose keys are all ReAct trajectory keys."""
    return isinstance(value, dict) and bool(value) and all(isinstance(k, str) and _KEY.fullmatch(k) for k in value)


def _steps(value: dict[str, Any]) -> dict[int, dict[str, Any]]:
    steps: dict[int, dict[str, Any]] = {}
    for key, item in value.items():
        match = _KEY.fullmatch(key) if isinstance(key, str) else None
        if match is None:
            raise TraceInputError(
                "not a ReAct trajectory key; expected thought_<i>, tool_name_<i>, tool_args_<i> or observation_<i>",
                field=str(key),
            )
        steps.setdefault(int(match.group(2)), {})[match.group(1)] = item
    return dict(sorted(steps.items()))


def messages_from_trajectory(value: Any) -> list[m.LMMessage]:
    """Turn a ReAct trajectory dict into assistant/tool message pairs, one pair per step."""
    if not isinstance(value, dict):
        raise TraceInputError(f"a ReAct trajectory is a JSON object, got {kind_of(value)}")
    messages: list[m.LMMessage] = []
    for step, fields in _steps(value).items():
        tag = {"react_step": step}
        name = fields.get("tool_name")
        if not isinstance(name, str):
            what = "is missing" if name is None else f"must be a string, got {kind_of(name)}"
            raise TraceInputError(f"the tool name of step {step} {what}", field=f"tool_name_{step}")
        parts: list[m.LMPart] = []
        if "thought" in fields:
            thought = fields["thought"]
            if not isinstance(thought, str):
                raise TraceInputError(f"expected a string, got {kind_of(thought)}", field=f"thought_{step}")
            parts.append(m.LMTextPart(text=thought, metadata=dict(tag)))
        args = fields.get("tool_args", {})
        call = m.LMToolCallPart(name=name, call_id=call_id_for_step(step), metadata=dict(tag))
        if isinstance(args, dict):
            call.args = args
        else:
            call.provider_data = {"raw_args": args}
        parts.append(call)
        messages.append(m.LMMessage(role="assistant", parts=parts))
        if "observation" in fields:
            messages.append(m.LMMessage(role="tool", parts=[_result(step, name, fields["observation"])]))
    return messages


def _result(step: int, name: str, observation: Any) -> m.LMToolResultPart:
    metadata: dict[str, Any] = {"react_step": step}
    if isinstance(observation, str):
        text = observation
    else:
        try:
            text = json.dumps(observation, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            text = repr(observation)  # a live object ReAct kept as is; its text is all that can be stored
        else:
            metadata["observation_json"] = True
    return m.LMToolResultPart(
        call_id=call_id_for_step(step),
        name=name,
        content=[m.LMTextPart(text=text)],
        is_error=isinstance(observation, str) and observation.startswith(f"{ERROR_PREFIX}{name}:"),
        metadata=metadata,
    )


def trajectory_to_json(messages: list[m.LMMessage]) -> dict[str, Any]:
    """Rebuild the trajectory dict that :func:`messages_from_trajectory` read."""
    out: dict[str, Any] = {}
    for message in messages:
        for part in message.parts:
            step = part.metadata.get("react_step")
            if isinstance(part, m.LMTextPart):
                out[f"thought_{step}"] = part.text
            elif isinstance(part, m.LMToolCallPart):
                out[f"tool_name_{step}"] = part.name
                out[f"tool_args_{step}"] = part.provider_data["raw_args"] if "raw_args" in part.provider_data else part.args
            elif isinstance(part, m.LMToolResultPart):
                text = "".join(p.text for p in part.content if isinstance(p, m.LMTextPart))
                out[f"observation_{step}"] = json.loads(text) if part.metadata.get("observation_json") else text
    return out


class _Trajectory(Source):
    format = "react_trajectory"
    description = "a dspy.ReAct trajectory (thought_i, tool_name_i, tool_args_i, observation_i)"

    def detect(self, value: Any) -> m.SourceKind | None:
        return "trajectory" if is_trajectory(value) else None

    def shape(self, value: Any) -> m.SourceKind | None:
        return "trajectory" if isinstance(value, dict) else None

    written_kinds = frozenset({"trajectory"})

    def read(self, value: Any, kind: m.SourceKind, options: ReadOptions) -> m.Trace:
        return m.Trace(source_kind="trajectory", source_format=self.format, messages=messages_from_trajectory(value))

    def write(self, trace: m.Trace) -> Any:
        return trajectory_to_json(trace.messages)


SOURCE = _Trajectory()
"""dspy.ReAct trajectories."""
