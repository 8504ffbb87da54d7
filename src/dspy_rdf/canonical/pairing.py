"""Linking a program run's tool executions to what asked for them.

DSPy's tool callbacks, MLflow's DSPy autolog and OpenInference's DSPy instrumentor record a tool execution without
the provider's tool-call id, so the link from an execution to the tool-call part it answered is inferred, the same
way whoever recorded the run: among the calls of the execution's own parent call (its module call, or its parent
span), the latest unclaimed tool-call part with the execution's call id (``pairing`` ``call_id``), else with its tool
name and arguments (``name_and_args``); when no part matches (``dspy.ReAct`` asks for tools in text fields), the last
LM call of that parent call that ended before the execution started (``preceding_lm_call``, in ``decided_by``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from dspy_rdf.canonical import model as m

__all__ = ["pair_tool_executions", "tool_call_parts", "within"]


def within(calls: Sequence[m.Call], index: int, ancestor: int | None) -> bool:
    """Whether ``calls[index]`` is ``ancestor`` or below it (everything is below a missing ancestor)."""
    if ancestor is None:
        return True
    current: int | None = index
    while current is not None:
        if current == ancestor:
            return True
        current = calls[current].parent_call
    return False


def tool_call_parts(call: m.Call, index: int) -> list[tuple[m.PartRef, m.LMToolCallPart]]:
    """The tool-call parts a call holds, with their references: a module call's own ``tool_calls``, an LM call's
    response parts."""
    if isinstance(call, m.ModuleCall):
        return [(m.PartRef(call=index, output=None, part=p), part) for p, part in enumerate(call.tool_calls)]
    if isinstance(call, m.LMCall) and call.entry is not None:
        return [
            (m.PartRef(call=index, output=o, part=p), part)
            for o, output in enumerate(call.entry.response.outputs)
            for p, part in enumerate(output.parts)
            if isinstance(part, m.LMToolCallPart)
        ]
    return []


def pair_tool_executions(calls: Sequence[m.Call], starts: Sequence[Any], ends: Sequence[Any | None]) -> None:
    """Set ``answers``/``decided_by`` and ``pairing`` on each tool execution of a run (see the module docstring).

    ``starts`` and ``ends`` are the calls' start and end times in any comparable form (epoch seconds, nanoseconds);
    an end of None is a call that did not end. Executions that already say how they were paired are left as they are.
    """
    claimed: set[m.PartRef] = {c.answers for c in calls if isinstance(c, m.ToolExecution) and c.answers is not None}
    for index, call in enumerate(calls):
        if not isinstance(call, m.ToolExecution) or call.pairing is not None:
            continue
        scope = [i for i in range(index) if within(calls, i, call.parent_call)]
        wanted = call.tool_call
        best: tuple[m.PartRef, Literal["call_id", "name_and_args"]] | None = None
        for i in reversed(scope):
            for ref, part in tool_call_parts(calls[i], i):
                if ref in claimed or part.name != wanted.name:
                    continue
                if wanted.call_id is not None and part.call_id == wanted.call_id:
                    best = (ref, "call_id")
                elif part.args == wanted.args:
                    best = best or (ref, "name_and_args")
                if best is not None and best[1] == "call_id":
                    break
            if best is not None:
                break
        if best is not None:
            claimed.add(best[0])
            call.answers, call.pairing = best
            continue
        for i in reversed(scope):
            lm = calls[i]
            lm_ended = ends[i]
            if isinstance(lm, m.LMCall) and lm_ended is not None and lm_ended <= starts[index]:
                call.decided_by, call.pairing = i, "preceding_lm_call"
                break
