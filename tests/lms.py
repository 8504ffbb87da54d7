"""The real ``dspy.LM``, run offline: LiteLLM's ``mock_response`` / ``mock_tool_calls`` answer instead of a provider,
so every call goes through DSPy's real LM path (LiteLLM ``completion``, a real ``ModelResponse``, cost from LiteLLM's
local price map, ``lm.history`` written as DSPy writes it for real providers)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM would fetch its price map at import

import dspy  # noqa: E402

MODEL = "openai/gpt-4o-mini"


def fields(**values: str) -> str:
    """A ChatAdapter answer: ``[[ ## name ## ]]`` sections, then ``[[ ## completed ## ]]``."""
    return "".join(f"[[ ## {name} ## ]]\n{value}\n\n" for name, value in values.items()) + "[[ ## completed ## ]]"


def tool_call(call_id: str, name: str, arguments: str) -> dict:
    """One OpenAI tool call, as ``mock_tool_calls`` takes it."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class ScriptedLM(dspy.LM):
    """A real ``dspy.LM`` whose answers come from a script, one per call: a string is a text answer, a list is the
    tool calls of an answer with no text."""

    def __init__(self, script: list[str | list[dict]], **kwargs) -> None:
        super().__init__(MODEL, cache=False, **kwargs)
        self.script = list(script)

    def forward(self, prompt=None, messages=None, **kwargs):
        step = self.script.pop(0)
        if isinstance(step, str):
            kwargs["mock_response"] = step
        else:
            kwargs["mock_response"] = ""
            kwargs["mock_tool_calls"] = step
        return super().forward(prompt=prompt, messages=messages, **kwargs)


class EchoLM(dspy.LM):
    """A real ``dspy.LM`` that answers every question with its last word (``answer`` field), for evaluations."""

    def __init__(self, **kwargs) -> None:
        super().__init__(MODEL, cache=False, **kwargs)

    def forward(self, prompt=None, messages=None, **kwargs):
        question = messages[-1]["content"].split("[[ ## question ## ]]")[-1].split("\n\n")[0].strip()
        kwargs["mock_response"] = fields(answer=question.split()[-1])
        return super().forward(prompt=prompt, messages=messages, **kwargs)
