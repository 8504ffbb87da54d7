"""dspy.ReAct trajectories: each step is a tool call and its result, linked by call id, in order."""

from __future__ import annotations

import json

import dspy
import pytest
from conftest import DATA
from dspy.utils import DummyLM

from dspy_rdf import RdfFormat, TraceInputError, parse_traces, serialize_traces, trace_from_dspy, trace_from_json, trace_to_json, validate_traces
from dspy_rdf.canonical import model as m


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


@pytest.fixture(scope="module")
def prediction() -> dspy.Prediction:
    """A real dspy.ReAct prediction: add, then a tool that raises, then finish."""
    lm = DummyLM(
        [
            {"next_thought": "Add first.", "next_tool_name": "add", "next_tool_args": {"a": 2, "b": 3}},
            {"next_thought": "Now divide.", "next_tool_name": "divide", "next_tool_args": {"a": 5, "b": 0}},
            {"next_thought": "Finish.", "next_tool_name": "finish", "next_tool_args": {}},
            {"reasoning": "r", "answer": "5"},
        ]
    )
    with dspy.context(lm=lm):
        return dspy.ReAct("question -> answer", tools=[add, divide])(question="2 + 3, then / 0?")


def test_each_step_is_a_tool_call_and_its_result_linked_by_call_id(prediction):
    trace = trace_from_dspy(prediction)
    assert (trace.source_kind, trace.source_format) == ("trajectory", "react_trajectory")
    assert [msg.role for msg in trace.messages] == ["assistant", "tool"] * 3
    calls = [p for msg in trace.messages for p in msg.parts if isinstance(p, m.LMToolCallPart)]
    results = [p for msg in trace.messages for p in msg.parts if isinstance(p, m.LMToolResultPart)]
    assert [(c.name, c.args) for c in calls] == [("add", {"a": 2, "b": 3}), ("divide", {"a": 5, "b": 0}), ("finish", {})]
    assert [c.call_id for c in calls] == [r.call_id for r in results] == ["react-step-0", "react-step-1", "react-step-2"]
    assert [r.is_error for r in results] == [False, True, False]
    assert results[1].content[0].text.startswith("Execution error in divide: ")
    assert trace.messages[0].parts[0].text == "Add first."


def test_a_trajectory_round_trips_through_rdf_and_back_to_the_same_dict(prediction):
    trace = trace_from_dspy(prediction)
    [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.TURTLE), RdfFormat.TURTLE)
    assert back == trace
    assert trace_to_json(back) == json.loads(json.dumps(prediction.trajectory))
    assert validate_traces([trace]).conforms


def test_a_truncated_trajectory_keeps_its_step_numbers_and_non_string_observations():
    trajectory = {"thought_3": "t", "tool_name_3": "lookup", "tool_args_3": {"k": "v"}, "observation_3": {"rows": [1, 2]}}
    trace = trace_from_json(trajectory)
    assert trace.messages[0].parts[1].call_id == "react-step-3"
    assert trace.messages[1].parts[0].content[0].text == '{"rows": [1, 2]}'
    assert trace_to_json(trace) == trajectory


@pytest.mark.parametrize(
    "trajectory, field",
    [({"thought_0": "t", "tool_args_0": {}}, "tool_name_0"), ({"thought_0": 5, "tool_name_0": "x"}, "thought_0")],
)
def test_a_broken_trajectory_names_the_key(trajectory, field):
    with pytest.raises(TraceInputError) as info:
        trace_from_json(trajectory, source_format="react_trajectory")
    assert info.value.field == field


def test_the_dspy_341_react_trajectory_fixture_reads(tmp_path):
    path = DATA / "dspy341_react_trajectory.json"
    trajectory = json.loads(path.read_text(encoding="utf-8"))
    trace = trace_from_json(trajectory)
    assert trace.source_kind == "trajectory" and trace_to_json(trace) == trajectory
    assert any(isinstance(p, m.LMToolResultPart) and p.is_error for msg in trace.messages for p in msg.parts)
