"""Program runs (``source_kind`` ``program_run``) <-> JSON.

DSPy has no object for a whole program run, so a run is written as a dspy-rdf envelope: the run's own fields and
its ``calls`` in start order, each call tagged ``"call": "module" | "lm" | "tool" | "evaluate" | "compile"``, LM
history entries as DSPy 3.3
JSON, and references as indices into ``calls`` (``parent_call``, ``decided_by``) or as
``{"call": i, "output": o, "part": p}`` (``answers``; ``output`` is null for a module's ``dspy.ToolCalls``).
"""

from __future__ import annotations

from typing import Any, Literal

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import check_datetime, check_keys, expect_object, fail, get_bool, get_float, get_int, get_json_object, get_list, get_str, kind_of
from dspy_rdf.sources import dspy33

__all__ = ["call_from_json", "call_to_json", "run_from_json", "run_to_json"]

_CALL_TYPE = {m.ModuleCall: "module", m.LMCall: "lm", m.ToolExecution: "tool", m.EvaluateCall: "evaluate", m.CompileCall: "compile"}
_COMMON = ("call", "started_at", "ended_at", "dspy_call_id", "parent_call", "error")
_EVALUATE_FIELDS = ("metric", "program_class", "program_fingerprint")
_COMPILE_FIELDS = ("program_class", "student_fingerprint", "program_fingerprint")
_KEYS = {
    "module": frozenset({*_COMMON, "module_class", "module_class_path", "input_summary", "output_summary", "tool_calls", "returned_tool_calls", "usage"}),
    "lm": frozenset({*_COMMON, "model", "entry"}),
    "tool": frozenset({*_COMMON, "tool_call", "tool_result", "answers", "decided_by", "pairing"}),
    "evaluate": frozenset({*_COMMON, *_EVALUATE_FIELDS, "devset_size", "score", "example_results"}),
    "compile": frozenset({*_COMMON, *_COMPILE_FIELDS, "optimizer_class", "input_summary", "candidates", "training_examples"}),
}
_RESULT_KEYS = frozenset({"example", "prediction", "score", "program_call", "error"})
_CANDIDATE_KEYS = frozenset({"program_fingerprint", "parent_candidates", "state_changes", "score"})
_TRAINING_KEYS = frozenset({"example"})
_RUN_KEYS = frozenset(
    {"dspy_rdf_kind", "source_format", "source_trace_id", "session_id", "user_id", "dspy_version", "started_at", "ended_at", "calls",
     "redactions", "losses"}
)
_PAIRINGS: tuple[Literal["call_id", "name_and_args", "preceding_lm_call"], ...] = ("call_id", "name_and_args", "preceding_lm_call")


def run_to_json(trace: m.Trace) -> dict[str, Any]:
    """Write a program-run trace as its JSON envelope."""
    out: dict[str, Any] = {
        "dspy_rdf_kind": "program_run",
        "source_format": trace.source_format,
        **({"source_trace_id": trace.source_trace_id} if trace.source_trace_id is not None else {}),
        **({"session_id": trace.session_id} if trace.session_id is not None else {}),
        **({"user_id": trace.user_id} if trace.user_id is not None else {}),
        "dspy_version": trace.dspy_version,
        "started_at": trace.started_at,
        "ended_at": trace.ended_at,
        "calls": [call_to_json(c) for c in trace.calls],
    }
    if trace.redactions:
        out["redactions"] = dict(trace.redactions)
    if trace.losses:
        out["losses"] = [dict(x) for x in trace.losses]
    return out


def _ref_json(ref: m.PartRef) -> dict[str, int | None]:
    return {"call": ref.call, "output": ref.output, "part": ref.part}


def call_to_json(call: m.Call) -> dict[str, Any]:
    """One call of a run as JSON, tagged by its type; references are indices into the run's calls."""
    out: dict[str, Any] = {
        "call": _CALL_TYPE[type(call)],
        "started_at": call.started_at,
        "ended_at": call.ended_at,
        "dspy_call_id": call.dspy_call_id,
        "parent_call": call.parent_call,
        "error": call.error,
    }
    if isinstance(call, m.ModuleCall):
        out.update(
            module_class=call.module_class,
            input_summary=call.input_summary,
            output_summary=call.output_summary,
            tool_calls=[dspy33.part_to_json(p) for p in call.tool_calls],
        )
        if call.returned_tool_calls:
            out["returned_tool_calls"] = [_ref_json(ref) for ref in call.returned_tool_calls]
        if call.module_class_path is not None:
            out["module_class_path"] = call.module_class_path
        if call.usage is not None:
            out["usage"] = dspy33.usage_to_json(call.usage)
    elif isinstance(call, m.EvaluateCall):
        out.update({name: getattr(call, name) for name in _EVALUATE_FIELDS})
        out.update(
            devset_size=call.devset_size,
            score=call.score,
            example_results=[
                {"example": r.example, "prediction": r.prediction, "score": r.score, "program_call": r.program_call, "error": r.error}
                for r in call.example_results
            ],
        )
    elif isinstance(call, m.CompileCall):
        out.update(optimizer_class=call.optimizer_class, input_summary=call.input_summary)
        out.update({name: getattr(call, name) for name in _COMPILE_FIELDS})
        out["candidates"] = [
            {"program_fingerprint": c.program_fingerprint, "parent_candidates": c.parent_candidates, "state_changes": c.state_changes, "score": c.score}
            for c in call.candidates
        ]
        out["training_examples"] = [{"example": e.example} for e in call.training_examples]
    elif isinstance(call, m.LMCall):
        out.update(model=call.model, entry=None if call.entry is None else dspy33.entry_to_json(call.entry))
    else:
        r = call.tool_result
        ref = call.answers
        out.update(
            tool_call={"name": call.tool_call.name, "call_id": call.tool_call.call_id, "args": call.tool_call.args},
            tool_result=None
            if r is None
            else {
                "name": r.name,
                "call_id": r.call_id,
                "result": r.result,
                "is_error": r.is_error,
                "error": r.error,
                "provider_data": r.provider_data,
                "metadata": r.metadata,
            },
            answers=None if ref is None else _ref_json(ref),
            decided_by=call.decided_by,
            pairing=call.pairing,
        )
    return out


def run_from_json(value: Any, path: str = "") -> m.Trace:
    """Read a program-run JSON envelope back as a trace; references are checked against the calls."""
    d = expect_object(value, path or "run")
    check_keys(d, _RUN_KEYS, path or "run", "a program run")
    source_format = get_str(d, "source_format", "run", default="dspy_callback")
    if source_format is None or source_format not in m.SOURCE_FORMATS:
        raise TraceInputError(f"unknown source format {source_format!r}", field="source_format")
    raw_calls = get_list(d, "calls", "run")
    calls = [call_from_json(c, f"calls[{i}]", len(raw_calls)) for i, c in enumerate(raw_calls)]
    return m.Trace(
        source_kind="program_run",
        source_format=source_format,
        dspy_version=get_str(d, "dspy_version", "run"),
        source_trace_id=get_str(d, "source_trace_id", "run"),
        session_id=_identifier(d, "session_id"),
        user_id=_identifier(d, "user_id"),
        started_at=_time(d, "started_at", "run"),
        ended_at=_time(d, "ended_at", "run"),
        calls=calls,
        redactions=redactions_from_json(d.get("redactions"), "redactions"),
        losses=losses_from_json(d.get("losses"), "losses"),
    )


def _identifier(d: dict[str, Any], key: str) -> str | None:
    """A session or user id: text with a character other than white space (an empty id is written as none)."""
    value = get_str(d, key, "run")
    if value is not None and not value.strip():
        raise TraceInputError(f"an empty {key.replace('_', ' ')}; leave the key out when there is none", field=key)
    return value


def losses_from_json(value: Any, path: str) -> list[dict[str, str]]:
    """The ``losses`` record of a trace: ``[{"field": ..., "reason": ...}]``."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(path, f"expected a list, got {kind_of(value)}")
    out = []
    for i, item in enumerate(value):
        d = expect_object(item, f"{path}[{i}]")
        check_keys(d, frozenset({"field", "reason"}), f"{path}[{i}]", "a loss record")
        out.append({"field": get_str(d, "field", f"{path}[{i}]", required=True), "reason": get_str(d, "reason", f"{path}[{i}]", required=True)})
    return out


def redactions_from_json(value: Any, path: str) -> dict[str, int]:
    """The ``redactions`` record of a trace envelope: kinds of secret to counts."""
    if value is None:
        return {}
    d = expect_object(value, path)
    for kind, count in d.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise TraceInputError(f"expected a positive count of redacted {kind!r} secrets", field=f"{path}.{kind}")
    return dict(d)


def _time(d: dict[str, Any], key: str, path: str, *, required: bool = False) -> str | None:
    """A date-time field, in its canonical form."""
    value = get_str(d, key, path, required=required)
    return None if value is None else check_datetime(value, f"{path}.{key}")


def _index(d: dict[str, Any], key: str, path: str, count: int) -> int | None:
    value = get_int(d, key, path)
    if value is not None and not 0 <= value < count:
        raise TraceInputError(f"refers to call {value}, but the run has calls 0..{count - 1}", field=f"{path}.{key}")
    return value


def call_from_json(value: Any, path: str, count: int) -> m.Call:
    """Read one call of a run (of ``count`` calls, which its references are checked against) back from its JSON."""
    d = expect_object(value, path)
    kind = d.get("call")
    if kind not in _KEYS:
        raise TraceInputError(f"unknown call type {kind!r}; expected one of {', '.join(_KEYS)}", field=f"{path}.call")
    check_keys(d, _KEYS[kind], path, f"a {kind} call")
    common: dict[str, Any] = {
        "started_at": _time(d, "started_at", path, required=True),
        "ended_at": _time(d, "ended_at", path),
        "dspy_call_id": get_str(d, "dspy_call_id", path),
        "parent_call": _index(d, "parent_call", path, count),
        "error": get_str(d, "error", path),
    }
    if kind == "module":
        return m.ModuleCall(
            module_class=get_str(d, "module_class", path, required=True),
            module_class_path=get_str(d, "module_class_path", path),
            usage=None if d.get("usage") is None else dspy33.usage_from_json(d["usage"], f"{path}.usage"),
            input_summary=d.get("input_summary"),
            output_summary=d.get("output_summary"),
            tool_calls=[_tool_call_part(p, f"{path}.tool_calls[{i}]") for i, p in enumerate(get_list(d, "tool_calls", path))],
            returned_tool_calls=[
                _part_ref(r, f"{path}.returned_tool_calls[{i}]", count) for i, r in enumerate(get_list(d, "returned_tool_calls", path))
            ],
            **common,
        )
    if kind == "evaluate":
        results = []
        for i, r in enumerate(get_list(d, "example_results", path)):
            rp = f"{path}.example_results[{i}]"
            r = expect_object(r, rp)
            check_keys(r, _RESULT_KEYS, rp, "an example result")
            results.append(m.ExampleResult(
                example=r.get("example"), prediction=r.get("prediction"), score=get_float(r, "score", rp),
                program_call=_index(r, "program_call", rp, count), error=get_str(r, "error", rp),
            ))
        return m.EvaluateCall(
            metric=get_str(d, "metric", path),
            program_class=get_str(d, "program_class", path),
            program_fingerprint=get_str(d, "program_fingerprint", path),
            devset_size=get_int(d, "devset_size", path),
            score=get_float(d, "score", path),
            example_results=results,
            **common,
        )
    if kind == "compile":
        return m.CompileCall(
            optimizer_class=get_str(d, "optimizer_class", path, required=True),
            input_summary=d.get("input_summary"),
            program_class=get_str(d, "program_class", path),
            student_fingerprint=get_str(d, "student_fingerprint", path),
            program_fingerprint=get_str(d, "program_fingerprint", path),
            candidates=_candidates(get_list(d, "candidates", path), path),
            training_examples=_training_examples(get_list(d, "training_examples", path), path),
            **common,
        )
    if kind == "lm":
        entry = d.get("entry")
        return m.LMCall(
            model=get_str(d, "model", path), entry=None if entry is None else dspy33.entry_from_json(entry, f"{path}.entry"), **common
        )
    tc = expect_object(d.get("tool_call"), f"{path}.tool_call")
    check_keys(tc, frozenset({"name", "call_id", "args"}), f"{path}.tool_call", "a tool call")
    tool_call = m.ToolCall(
        name=get_str(tc, "name", f"{path}.tool_call", required=True),
        call_id=get_str(tc, "call_id", f"{path}.tool_call"),
        args=get_json_object(tc, "args", f"{path}.tool_call"),
    )
    decided_by = _index(d, "decided_by", path, count)
    pairing = get_str(d, "pairing", path)
    if pairing is not None and pairing not in _PAIRINGS:
        raise TraceInputError(f"unknown pairing {pairing!r}; expected one of {', '.join(_PAIRINGS)}", field=f"{path}.pairing")
    execution = m.ToolExecution(tool_call=tool_call, decided_by=decided_by, pairing=pairing, **common)
    if (r := d.get("tool_result")) is not None:
        rp = f"{path}.tool_result"
        r = expect_object(r, rp)
        check_keys(r, frozenset({"name", "call_id", "result", "is_error", "error", "provider_data", "metadata"}), rp, "a tool result")
        execution.tool_result = m.ToolResult(
            name=get_str(r, "name", rp),
            call_id=get_str(r, "call_id", rp),
            result=r.get("result"),
            is_error=get_bool(r, "is_error", rp),
            error=get_str(r, "error", rp),
            provider_data=get_json_object(r, "provider_data", rp),
            metadata=get_json_object(r, "metadata", rp),
        )
    if (a := d.get("answers")) is not None:
        execution.answers = _part_ref(a, f"{path}.answers", count)
    return execution


def _part_ref(value: Any, path: str, count: int) -> m.PartRef:
    a = expect_object(value, path)
    check_keys(a, frozenset({"call", "output", "part"}), path, "a part reference")
    call, part = get_int(a, "call", path), get_int(a, "part", path)
    if call is None or part is None:
        raise TraceInputError("a part reference needs call and part", field=path)
    if not 0 <= call < count:
        raise TraceInputError(f"refers to call {call}, but the run has calls 0..{count - 1}", field=f"{path}.call")
    return m.PartRef(call=call, output=get_int(a, "output", path), part=part)


def _tool_call_part(value: Any, path: str) -> m.LMToolCallPart:
    """A module call's own tool call: a tool_call part, as the schema's ``tool_calls`` range says."""
    part = dspy33.part_from_json(value, path)
    if not isinstance(part, m.LMToolCallPart):
        raise fail(f"{path}.type", f"expected a tool_call part, got a {part.part_type} part")
    return part


def _candidates(items: list[Any], path: str) -> list[m.ProgramCandidate]:
    """A compilation's candidates; a parent is the index of another candidate of the list."""
    out = []
    for i, item in enumerate(items):
        cp = f"{path}.candidates[{i}]"
        item = expect_object(item, cp)
        check_keys(item, _CANDIDATE_KEYS, cp, "a program candidate")
        parents = []
        for k, parent in enumerate(get_list(item, "parent_candidates", cp)):
            if isinstance(parent, bool) or not isinstance(parent, int) or not 0 <= parent < len(items) or parent == i:
                raise fail(f"{cp}.parent_candidates[{k}]", f"expected the index of another candidate (0 to {len(items) - 1}), found {parent!r}")
            parents.append(parent)
        out.append(m.ProgramCandidate(
            program_fingerprint=get_str(item, "program_fingerprint", cp, required=True),
            parent_candidates=parents, state_changes=item.get("state_changes"), score=get_float(item, "score", cp),
        ))  # fmt: skip
    return out


def _training_examples(items: list[Any], path: str) -> list[m.TrainingExample]:
    out = []
    for i, item in enumerate(items):
        ep = f"{path}.training_examples[{i}]"
        item = expect_object(item, ep)
        check_keys(item, _TRAINING_KEYS, ep, "a training example")
        out.append(m.TrainingExample(example=item.get("example")))
    return out
