"""Write ``tests/data/history_dicts_dspy<version>.json``: a real ``lm.history`` of the installed DSPy (2.5 to 3.4).

    python tests/data/make_fixtures_history.py

Run it with the Python of a venv that has the DSPy version to record (``/work/venv25/bin/python`` with
``dspy==2.5.43``, ``/work/venv26`` with ``dspy==2.6.27``, ``/work/venv30`` with ``dspy==3.0.4``, this
project's venv for 3.3.1, ``/work/venv34`` with ``dspy==3.4.1``). Everything runs offline:

1. ``dspy.utils.DummyLM`` drives a ``dspy.Predict`` and a ``dspy.ReAct`` with one tool. (DummyLM writes
   its own history entries, which up to DSPy 3.1 lack ``uuid``, ``timestamp`` and ``model``.)
2. A real ``dspy.LM("openai/gpt-4o-mini")`` whose provider call is LiteLLM's own ``mock_response`` /
   ``mock_tool_calls`` (``litellm.completion`` is wrapped to add them, so no request leaves the machine)
   answers a ``dspy.Predict``, and, where DSPy has ``dspy.ToolCalls``, a native tool call under
   ``ChatAdapter(use_native_function_calling=True)`` (DSPy 3.0+). In DSPy 3.4 the LM is given
   ``engine="litellm"`` (its default engine is lm15's own). These entries are what ``dspy.LM`` really writes:
   ``response`` is a LiteLLM ``ModelResponse``, ``usage`` comes from it, tool calls are LiteLLM objects.

Both histories are dumped the way a user would: ``json.dumps(lm.history, default=str)``; so LiteLLM objects
(``response``, tool calls) become their ``str()``.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from importlib.metadata import version
from pathlib import Path

# LiteLLM would otherwise try to download its model price map; the bundled copy is the same data.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
import litellm  # noqa: E402
from dspy.utils.dummies import DummyLM  # noqa: E402  (``dspy.utils`` is shadowed in DSPy 2.5)

HERE = Path(__file__).parent
DSPY_VERSION = version("dspy")


def answer(**fields: str) -> str:
    """A ChatAdapter-formatted completion that fills the given output fields."""
    body = "".join(f"[[ ## {name} ## ]]\n{value}\n\n" for name, value in fields.items())
    return body + "[[ ## completed ## ]]"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def weather(city: str) -> str:
    """Get the weather of a city."""
    return "sunny"


def dummy_lm_history() -> list:
    """A Predict and a ReAct with one tool, driven by DummyLM."""
    lm = DummyLM(
        [
            {"answer": "Paris"},
            {"next_thought": "I should add.", "next_tool_name": "add", "next_tool_args": {"a": 2, "b": 3}},
            {"next_thought": "Done.", "next_tool_name": "finish", "next_tool_args": {}},
            {"reasoning": "2 + 3 = 5", "answer": "5"},
        ]
    )
    with dspy.context(lm=lm):
        dspy.Predict("question -> answer")(question="What is the capital of France?")
        dspy.ReAct("question -> answer", tools=[add])(question="What is 2 + 3?")
    return list(lm.history)


def litellm_lm_history() -> list:
    """A real dspy.LM whose provider replies come from LiteLLM's mock_response / mock_tool_calls."""
    replies = [{"mock_response": answer(answer="Paris")}]
    native_tools = hasattr(dspy, "ToolCalls") and "use_native_function_calling" in inspect.signature(dspy.ChatAdapter).parameters
    if native_tools:
        tool_call = {"id": "call_w1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
        # LiteLLM >= 1.80 routes any call with tools through its MCP handler, which imports the optional
        # ``mcp`` package; a mocked call needs none of it.
        replies.append(
            {"mock_response": answer(answer="Checking the weather."), "mock_tool_calls": [tool_call], "_skip_mcp_handler": True}
        )
    script = iter(replies)
    real_completion = litellm.completion

    def scripted_completion(*args, **kwargs):
        kwargs.update(next(script))
        return real_completion(*args, **kwargs)

    litellm.completion = scripted_completion
    try:
        # DSPy 3.4 calls providers through its own lm15 engine by default; LiteLLM is one engine choice.
        engine = {"engine": "litellm"} if "engine" in inspect.signature(dspy.LM).parameters else {}
        lm = dspy.LM("openai/gpt-4o-mini", cache=False, temperature=0.0, max_tokens=200, **engine)
        with dspy.context(lm=lm):
            dspy.Predict("question -> answer")(question="What is the capital of France?")
        if native_tools:

            class Ask(dspy.Signature):
                """Answer the question, calling tools when needed."""

                question: str = dspy.InputField()
                tools: list[dspy.Tool] = dspy.InputField()
                answer: str = dspy.OutputField()
                tool_calls: dspy.ToolCalls = dspy.OutputField()

            with dspy.context(lm=lm, adapter=dspy.ChatAdapter(use_native_function_calling=True)):
                dspy.Predict(Ask)(question="What is the weather in Paris?", tools=[dspy.Tool(weather)])
    finally:
        litellm.completion = real_completion
    return list(lm.history)


def main() -> None:
    history = dummy_lm_history() + litellm_lm_history()
    text = json.dumps(history, default=str, indent=1, ensure_ascii=False) + "\n"
    target = HERE / f"history_dicts_dspy{DSPY_VERSION}.json"
    target.write_text(text, encoding="utf-8")
    print(f"wrote {len(history)} entries to {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
