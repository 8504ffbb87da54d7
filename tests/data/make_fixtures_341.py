"""Regenerate the DSPy 3.4.1 (vendored lm15) fixtures in tests/data/ from real DSPy 3.4.1 objects and runs.

Made by DSPy 3.4.1 (its vendored lm15, ``dspy.lm15``); run it with a Python that has exactly that version:

    /work/venv34/bin/python tests/data/make_fixtures_341.py

Files written (all prefixed ``dspy341_``):

- ``dspy341_lm15_request.json``, ``dspy341_lm15_response.json``: lm15 ``Request``/``Response`` objects
  built with lm15's own classes, covering every lm15 part kind, function and builtin tools, a ``Config``
  with every field set, a ``Usage`` with every count, logprobs and adaptations; serialized with lm15's
  ``request_to_dict`` / ``response_to_dict(include_provider_data=True)``.
- ``dspy341_lm15_request_system_text.json``: the other spellings a ``Config`` and a ``Request`` can have
  (``system`` as a string, ``cache.prefix_until_index``, ``reasoning.effort="off"``, ``tool_choice.mode="none"``).
- ``dspy341_lm15_message.json``: ``message_to_dict`` of an assistant message with message-level continuation.
- ``dspy341_lm15_part_<kind>.json``: ``request_to_dict`` of a request with a string ``system`` and one message
  holding one part, one file per lm15 part kind (12, ``dspy.lm15.types.PART_TYPES``).
- ``dspy341_history_dicts.json``: ``lm.history`` of real DSPy 3.4.1 programs run offline, dumped as a user
  would: ``json.dumps(lm.history, default=lm15_default)``. A 3.4.1 history entry is a plain dict whose values
  are JSON except three: ``response`` (an lm15 ``Response``), ``request`` (an lm15 ``Request``, present only
  when the caller passed an explicit ``Request``) and ``adaptations`` (a tuple of lm15 ``Adaptation``, present
  only when the wire got something other than what was asked). ``lm15_default`` writes each with lm15's own
  serde (``response_to_dict(..., include_provider_data=True)`` as DSPy's own response cache does,
  ``request_to_dict``, ``adaptation_to_dict``); everything else is already JSON. The runs:

  1. ``dspy.ReAct`` with two tools (``divide`` raises ZeroDivisionError) driven by ``dspy.utils.DummyLM``
     (4 entries);
  2. a ``dspy.Predict`` with a ``dspy.ToolCalls`` output under ``ChatAdapter(use_native_function_calling=True)``
     on a ``dspy.LM`` whose custom engine is lm15's real OpenAI Chat adapter over lm15's scripted
     ``FakeTransport`` (no network), so the model answers with native tool calls (1 entry);
  3. two explicit ``lm(Request)`` calls on that LM: a native tool call (with a ``top_k`` the Chat wire drops,
     so lm15 records an adaptation) and the follow-up with the tool result (2 entries).

``dspy341_react_trajectory.json`` is the ``trajectory`` of the ReAct prediction of run 1.

After writing, the script reads each file back and checks that ``dspy_rdf.sources.lm15.lm15_to_json`` gives
the same JSON for the live objects, which exercises dspy-rdf's live-object path under DSPy 3.4.1.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from importlib.metadata import version
from pathlib import Path
from typing import Any

if __name__ != "__main__" and version("dspy") != "3.4.1":
    # pytest --doctest-modules collects this script in the DSPy 3.3.1 test environment; it has no doctests.
    import pytest

    pytest.skip("make_fixtures_341.py runs under DSPy 3.4.1 only", allow_module_level=True)

import dspy  # noqa: E402
from dspy._vendor.lm15.adaptation import Adaptation, adaptation_to_dict
from dspy._vendor.lm15.serde import message_to_dict, request_to_dict, response_to_dict
from dspy._vendor.lm15.testing import FakeResponse, FakeTransport
from dspy.lm15 import (
    AudioPart,
    BinaryPart,
    BuiltinTool,
    CacheConfig,
    CitationPart,
    Config,
    ContinuationState,
    DataPart,
    DocumentPart,
    FunctionTool,
    ImagePart,
    Message,
    OpenAIChatLM,
    Reasoning,
    RefusalPart,
    Request,
    Response,
    TextPart,
    ThinkingPart,
    TokenLogprob,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
    TopLogprob,
    Usage,
    VideoPart,
)

HERE = Path(__file__).parent


def _import_lm15_source():
    """dspy_rdf.sources.lm15 from this checkout, without running dspy_rdf/__init__.py: that imports the RDF
    stack (rdflib, pyoxigraph), which the DSPy 3.4.1 environment need not have, and this module needs only
    dspy_rdf.canonical.model, dspy_rdf.canonical.errors and dspy_rdf.sources.dspy33."""
    package = types.ModuleType("dspy_rdf")
    package.__path__ = [str(HERE.parents[1] / "src" / "dspy_rdf")]
    sys.modules.setdefault("dspy_rdf", package)
    return importlib.import_module("dspy_rdf.sources.lm15")


lm15_to_json = _import_lm15_source().lm15_to_json

assert dspy.__version__ == "3.4.1", dspy.__version__

CALL_ID = 'call 1 "quoted" <x>\n#%'

PARTS: dict[str, Any] = {
    "text": TextPart(text='Héllo, "world" \\ <tag> #1\nline 2 — 🙂'),
    "image": ImagePart(url="https://example.com/cat.png", media_type="image/png", detail="high"),
    "audio": AudioPart(data="UklGRiQAAABXQVZF", media_type="audio/wav"),
    "video": VideoPart(file_id="file-video-1", media_type="video/webm"),
    "document": DocumentPart(path="/tmp/report.pdf", media_type="application/pdf"),
    "binary": BinaryPart(data="AAECAw==", media_type="application/octet-stream"),
    "tool_call": ToolCallPart(
        id=CALL_ID,
        name="search web",
        input={"query": "DSPy ünïcödé", "limit": 12345678901234567890, "filters": {"deep": [[{"x": ""}]]}},
        continuation=ContinuationState(provider="gemini", kind="thought_signature", data={"value": "c2ln"}),
    ),
    "tool_result": ToolResultPart(
        id=CALL_ID,
        name="search web",
        content=(TextPart(text="result text"), ImagePart(data="iVBORw0KGgo=", media_type="image/png"), DataPart(value={"hits": 3})),
        is_error=True,
    ),
    "thinking": ThinkingPart(
        text="Let me think: 2 + 2 = 4.",
        continuation=ContinuationState(provider="anthropic", kind="thinking_signature", data={"signature": "sig-1"}),
    ),
    "refusal": RefusalPart(text="I can't help with that."),
    "citation": CitationPart(url="https://example.com/doc#p1", title="Source", text="quoted passage"),
    "data": DataPart(value={"label": "positive", "scores": [0.9, None, True]}),
}
"""One part of each lm15 kind (``dspy.lm15.types.PART_TYPES``), every optional field set somewhere."""

ROLE_OF_PART = {
    **dict.fromkeys(("text", "image", "audio", "video", "document", "binary", "data"), "user"),
    **dict.fromkeys(("tool_call", "thinking", "refusal", "citation"), "assistant"),
    "tool_result": "tool",
}

SEARCH = FunctionTool(
    name="search web",
    description="Search the web.",
    parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)


def request_with_everything() -> Request:
    return Request(
        model="openai/gpt-4o-mini",
        system=(TextPart(text="You are terse."), DataPart(value={"policy": "v2"})),
        messages=(
            Message(role="developer", parts=(TextPart(text="Answer in English."),)),
            Message(role="user", parts=tuple(PARTS[k] for k in ("text", "image", "audio", "video", "document", "binary", "data"))),
            Message(
                role="assistant",
                parts=(PARTS["thinking"], PARTS["tool_call"], PARTS["citation"], PARTS["refusal"]),
                continuation=ContinuationState(provider="openai", kind="response_item", data={"id": "msg_1"}),
            ),
            Message(role="tool", parts=(PARTS["tool_result"],)),
        ),
        tools=(SEARCH, FunctionTool(name="noop"), BuiltinTool(name="web_search", config={"search_context_size": "low"})),
        config=Config(
            max_tokens=512,
            temperature=0.7,
            top_p=0.95,
            top_k=40,
            stop=("\n\n", "END"),
            response_format={"type": "json_schema", "name": "verdict", "strict": True,
                             "schema": {"type": "object", "properties": {"label": {"enum": ["positive", "negative"]}}}},
            tool_choice=ToolChoice(mode="required", allowed=("search web",), parallel=False),
            reasoning=Reasoning(effort="high", thinking_budget=1024, summary="detailed"),
            cache=CacheConfig(mode="auto", retention="long", key="prefix-1", prefix="history", resource="cachedContents/abc"),
            seed=42,
            frequency_penalty=0.5,
            presence_penalty=-0.25,
            service_tier="flex",
            user_id="u-1",
            store=False,
            logprobs=0,
            probabilities="if_available",
            extensions={"parallel_tool_calls": False, "metadata": {"team": "qa"}},
        ),
    )


def request_other_spellings() -> Request:
    return Request(
        model="anthropic/claude-sonnet-4-5",
        system="Be brief.",
        messages=(Message.user("Hi"),),
        config=Config(
            reasoning=Reasoning(effort="off"),
            tool_choice=ToolChoice(mode="none"),
            cache=CacheConfig(mode="auto", prefix_until_index=0),
            logprobs=3,
        ),
    )


def response_with_everything() -> Response:
    return Response(
        id="chatcmpl-123",
        model="gpt-4o-mini-2024-07-18",
        message=Message(
            role="assistant",
            parts=(
                PARTS["thinking"],
                ThinkingPart(text="", continuation=ContinuationState(provider="anthropic", kind="redacted_thinking", data={"data": "EuYBCkQ="})),
                PARTS["text"],
                PARTS["tool_call"],
                PARTS["citation"],
                PARTS["refusal"],
                DataPart(value={"label": "positive"}, probabilities={"label": {"positive": 0.875, "negative": 0.125}},
                         method="candidate_sequence_likelihood"),
                ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
            ),
            continuation=ContinuationState(provider="openai", kind="response_item", data={"id": "msg_2"}),
        ),
        finish_reason="length",
        usage=Usage(
            input_tokens=1200,
            output_tokens=34,
            total_tokens=1234,
            cache_read_tokens=1000,
            cache_write_tokens=0,
            reasoning_tokens=10,
            input_audio_tokens=3,
            output_audio_tokens=4,
        ),
        logprobs=(
            TokenLogprob(token="Hi", logprob=-0.01, bytes=(72, 105), token_id=13347,
                         top=(TopLogprob(token="Hi", logprob=-0.01), TopLogprob(token="Hello", logprob=-4.5, bytes=(72,), token_id=9906))),
        ),
        logprobs_complete=False,
        provider_data={"system_fingerprint": "fp_1", "service_tier": "flex"},
        adaptations=(
            Adaptation(field="config.top_k", action="dropped", reason="the Chat Completions wire has no top_k", asked=40),
            Adaptation(field="config.temperature", action="clamped", reason="this wire's ceiling is 1", asked=1.5, applied=1.0),
        ),
    )


# --- real DSPy 3.4.1 runs -----------------------------------------------------------------------------


def _chat_body(call_index: int, message: dict[str, Any], finish_reason: str, usage: dict[str, Any]) -> FakeResponse:
    """An OpenAI Chat Completions response body, as lm15's real OpenAI Chat adapter parses it."""
    body = {
        "id": f"chatcmpl-{call_index}",
        "object": "chat.completion",
        "created": 1763820000 + call_index,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", **message}}],
        "usage": usage,
    }
    return FakeResponse(200, json.dumps(body).encode())


class ScriptedOpenAIChatEngine:
    """A DSPy 3.4 custom engine: lm15's real OpenAI Chat adapter over lm15's scripted FakeTransport (no I/O).

    It declares native function calling, so DSPy's adapters send tools natively and the model's tool calls
    come back as lm15 ``ToolCallPart`` objects through the real wire parser.
    """

    supports_function_calling = True

    def __init__(self, bodies: list[FakeResponse]) -> None:
        self.adapter = OpenAIChatLM(api_key="offline-fixture-key", transport=FakeTransport(bodies))

    def complete(self, request: Request) -> Response:
        return self.adapter.complete(request)

    def stream(self, request: Request):
        return self.adapter.stream(request)

    def close(self) -> None:
        pass


def react_run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A real dspy.ReAct run with two tools, one of which raises, driven by DummyLM: its history and trajectory."""

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def divide(a: int, b: int) -> float:
        """Divide a by b."""
        return a / b

    lm = dspy.utils.DummyLM(
        [
            {"next_thought": "Add first.", "next_tool_name": "add", "next_tool_args": {"a": 2, "b": 3}},
            {"next_thought": "Now divide by zero.", "next_tool_name": "divide", "next_tool_args": {"a": 5, "b": 0}},
            {"next_thought": "That failed; finish.", "next_tool_name": "finish", "next_tool_args": {}},
            {"reasoning": "2 + 3 = 5", "answer": "5"},
        ]
    )
    with dspy.context(lm=lm):
        prediction = dspy.ReAct("question -> answer", tools=[add, divide])(question="What is 2 + 3, divided by 0?")
    return lm.history, prediction.trajectory


def native_tool_calling_history() -> list[dict[str, Any]]:
    """Native tool calls: a dspy.Predict under ChatAdapter(use_native_function_calling=True), then two
    explicit lm15 Request calls (tool call, then the tool result) on the same LM."""
    tool_call = {"id": "call_w1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
    engine = ScriptedOpenAIChatEngine(
        [
            _chat_body(1, {"content": "[[ ## answer ## ]]\nChecking the weather.\n\n[[ ## completed ## ]]", "tool_calls": [tool_call]},
                       "tool_calls", {"prompt_tokens": 210, "completion_tokens": 25, "total_tokens": 235}),
            _chat_body(2, {"content": None, "tool_calls": [tool_call]}, "tool_calls",
                       {"prompt_tokens": 52, "completion_tokens": 12, "total_tokens": 64,
                        "prompt_tokens_details": {"cached_tokens": 10}, "completion_tokens_details": {"reasoning_tokens": 3}}),
            _chat_body(3, {"content": "It is sunny in Paris."}, "stop", {"prompt_tokens": 70, "completion_tokens": 8, "total_tokens": 78}),
        ]
    )
    lm = dspy.LM("openai/gpt-4o-mini", engine=engine, cache=False)

    def weather(city: str) -> str:
        """Get the weather of a city."""
        return "sunny"

    class Ask(dspy.Signature):
        """Answer the question, calling tools when needed."""

        question: str = dspy.InputField()
        tools: list[dspy.Tool] = dspy.InputField()
        answer: str = dspy.OutputField()
        tool_calls: dspy.ToolCalls = dspy.OutputField()

    with dspy.context(lm=lm, adapter=dspy.ChatAdapter(use_native_function_calling=True)):
        prediction = dspy.Predict(Ask)(question="What is the weather in Paris?", tools=[dspy.Tool(weather)])
    assert prediction.tool_calls.tool_calls[0].name == "weather", prediction

    weather_tool = FunctionTool(
        name="weather",
        description="Get the weather of a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    question = Message.user("What is the weather in Paris?")
    first = Request(
        model=lm.model,
        system="Use tools when needed.",
        messages=(question,),
        tools=(weather_tool,),
        config=Config(temperature=0.0, top_k=5, tool_choice=ToolChoice(mode="auto")),
    )
    answer = lm(first)
    call = answer.tool_calls[0]
    follow_up = Request(
        model=lm.model,
        system="Use tools when needed.",
        messages=(question, answer.message, Message.tool(call.id, weather(**call.input))),
        tools=(weather_tool,),
        config=Config(temperature=0.0),
    )
    lm(follow_up)
    return lm.history


def lm15_default(obj: Any) -> Any:
    """The ``default=`` a user passes to ``json.dumps(lm.history, ...)`` in DSPy 3.4.1: lm15's own serde."""
    if isinstance(obj, Response):
        return response_to_dict(obj, include_provider_data=True)
    if isinstance(obj, Request):
        return request_to_dict(obj)
    if isinstance(obj, Adaptation):
        return adaptation_to_dict(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def write(name: str, value: Any) -> Any:
    """Write one fixture and return what a reader of the file gets back."""
    text = json.dumps(value, indent=1, ensure_ascii=False, default=lm15_default) + "\n"
    (HERE / name).write_text(text, encoding="utf-8")
    return json.loads(text)


def check_live(kind: str, obj: Any, written: Any) -> None:
    """dspy-rdf's live-object path gives exactly lm15's JSON for the same object."""
    got_kind, got = lm15_to_json(obj)
    assert got_kind == kind, (got_kind, kind)
    assert json.loads(json.dumps(got, ensure_ascii=False)) == written, (kind, got, written)


def main() -> None:
    request, other, response = request_with_everything(), request_other_spellings(), response_with_everything()
    check_live("lm_request", request, write("dspy341_lm15_request.json", request_to_dict(request)))
    check_live("lm_request", other, write("dspy341_lm15_request_system_text.json", request_to_dict(other)))
    check_live(
        "lm_response", response, write("dspy341_lm15_response.json", response_to_dict(response, include_provider_data=True))
    )
    message = response.message
    check_live("lm_message", message, write("dspy341_lm15_message.json", message_to_dict(message)))
    for kind, part in PARTS.items():
        single = Request(model="m", system="One part.", messages=(Message(role=ROLE_OF_PART[kind], parts=(part,)),))
        written = write(f"dspy341_lm15_part_{kind}.json", request_to_dict(single))
        check_live("lm_request", single, written)
        check_live("lm_message", single.messages[0], written["messages"][0])
        check_live("lm_part", part, written["messages"][0]["parts"][0])

    react, trajectory = react_run()
    write("dspy341_react_trajectory.json", trajectory)
    history = react + native_tool_calling_history()
    written = write("dspy341_history_dicts.json", history)
    for entry, dumped in zip(history, written, strict=True):
        check_live("lm_response", entry["response"], dumped["response"])
        if "request" in entry:
            check_live("lm_request", entry["request"], dumped["request"])


if __name__ == "__main__":
    main()
