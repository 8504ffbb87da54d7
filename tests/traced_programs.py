"""The DSPy programs the tests and the MLflow and OpenTelemetry fixtures record, run offline on the real ``dspy.LM``
(:mod:`lms`): a ``dspy.Predict``, a ``dspy.ReAct`` whose second tool raises, and native tool calling (the model asks
for two tools in one response; the module runs them, one raises); the tools and the LM scripts they use."""

from __future__ import annotations

import dspy
from lms import ScriptedLM, fields, tool_call

QUESTION_PREDICT = "2 + 2?"
QUESTION_REACT = "2 + 3, then / 0?"
QUESTION_NATIVE = "1 + 2, and 1 / 0"

REACT = [
    fields(next_thought="Add first.", next_tool_name="add", next_tool_args='{"a": 2, "b": 3}'),
    fields(next_thought="Now divide by zero.", next_tool_name="divide", next_tool_args='{"a": 5, "b": 0}'),
    fields(next_thought="Done.", next_tool_name="finish", next_tool_args="{}"),
    fields(reasoning="2 + 3 = 5", answer="5"),
]
NATIVE = [[tool_call("call_add", "add", '{"a": 1, "b": 2}'), tool_call("call_div", "divide", '{"a": 1, "b": 0}')]]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


class CallTools(dspy.Module):
    """A model asks for tools natively (parallel calls in one response) through a ``dspy.ToolCalls`` output; the
    module runs them (``divide`` by zero raises, and its message is the result)."""

    def __init__(self, tools=(add, divide)) -> None:
        super().__init__()
        self.tools = {t.name: t for t in map(dspy.Tool, tools)}
        self.predict = dspy.Predict("question: str, tools: list[dspy.Tool] -> tool_calls: dspy.ToolCalls")

    def forward(self, question: str):
        results = []
        for call in self.predict(question=question, tools=list(self.tools.values())).tool_calls.tool_calls:
            try:
                results.append(self.tools[call.name](**call.args))
            except ZeroDivisionError as err:
                results.append(str(err))
        return dspy.Prediction(results=results)


def run_programs() -> None:
    """Run the three programs, one trace each: Predict, ReAct with a failing tool, native tool calling."""
    with dspy.context(lm=ScriptedLM([fields(answer="4")])):
        dspy.Predict("question -> answer")(question=QUESTION_PREDICT)
    with dspy.context(lm=ScriptedLM(REACT)):
        dspy.ReAct("question -> answer", tools=[add, divide])(question=QUESTION_REACT)
    with dspy.context(lm=ScriptedLM(NATIVE), adapter=dspy.ChatAdapter(use_native_function_calling=True)):
        CallTools()(question=QUESTION_NATIVE)


CONVERSATIONS = [("conversation-1", "alice", ["2 + 2?", "And times 3?"]), ("conversation-2", "bob", ["Capital of France?"])]
"""Two sessions of a question-answering program: (session id, user id, the questions of its turns, in order)."""
ANSWERS = {"2 + 2?": "4", "And times 3?": "12", "Capital of France?": "Paris"}


def run_turn(question: str) -> None:
    """One turn of a conversation: a ``dspy.Predict`` run on the real ``dspy.LM``."""
    with dspy.context(lm=ScriptedLM([fields(answer=ANSWERS[question])])):
        dspy.Predict("question -> answer")(question=question)
