"""Write the OpenAI Chat Completions fixtures ``tests/data/openai_*.json`` with DSPy 3.3.1's and LiteLLM's own code.

    .venv/bin/python tests/data/make_fixtures_openai.py

Nothing here is written by hand in OpenAI's shape:

- request payloads are ``dspy.clients.openai_format.to_openai_chat_request(request)`` of typed DSPy 3.3.1
  requests: the request of ``request_all_parts.json`` (its path-based document swapped for the same bytes
  as ``data``, since DSPy reads the file at conversion time), the first request of ``react_history.json``,
  a native tool-calling loop, and a media request covering every OpenAI content block DSPy writes;
- responses are LiteLLM ``ModelResponse`` / ``TextCompletionResponse`` objects (tool calls, refusal,
  ``reasoning_content``, Anthropic-style citations in ``provider_specific_fields``, OpenAI ``annotations``,
  logprobs, usage with ``prompt_tokens_details`` / ``completion_tokens_details``) dumped with
  ``.model_dump()``, as a user stores them;
- ``openai_exchange_tool_loop.json`` pairs a request payload with the response to it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
from dspy.clients.openai_format import to_openai_chat_request  # noqa: E402
from dspy.core.types import (  # noqa: E402
    LMAudioPart,
    LMBinaryPart,
    LMConfig,
    LMDocumentPart,
    LMImagePart,
    LMMessage,
    LMReasoningConfig,
    LMRequest,
    LMTextPart,
    LMToolCallPart,
    LMToolChoice,
    LMToolResultPart,
    LMToolSpec,
    LMVideoPart,
)
from litellm.types.utils import (  # noqa: E402
    ChatCompletionMessageToolCall,
    ChatCompletionTokenLogprob,
    ChoiceLogprobs,
    Choices,
    CompletionTokensDetailsWrapper,
    Function,
    Message,
    ModelResponse,
    PromptTokensDetailsWrapper,
    TextChoices,
    TextCompletionResponse,
    TopLogprob,
    Usage,
)

HERE = Path(__file__).parent
assert dspy.__version__ == "3.3.1", dspy.__version__

WEATHER = LMToolSpec(
    name="weather",
    description="Get the weather of a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    strict=True,
)
TIME = LMToolSpec(name="local_time", parameters={"type": "object", "properties": {"city": {"type": "string"}}})


def load(name: str) -> Any:
    return json.loads((HERE / name).read_text(encoding="utf-8"))


def request_all_parts() -> LMRequest:
    """``request_all_parts.json``, with its document read from data instead of a local path."""
    request = LMRequest.model_validate(load("request_all_parts.json"))
    for message in request.messages:
        for index, part in enumerate(message.parts):
            if isinstance(part, LMDocumentPart) and part.path is not None:
                message.parts[index] = part.model_copy(update={"path": None, "data": "JVBERi0xLjQK"})
    return request


def tool_loop_request() -> LMRequest:
    """A native tool-calling turn: two parallel calls answered by two tool messages."""
    calls = [
        LMToolCallPart(id="call_w1", name="weather", args={"city": "Paris"}),
        LMToolCallPart(id="call_t1", name="local_time", args={"city": "Paris"}),
    ]
    return LMRequest(
        model="openai/gpt-4o-mini",
        messages=[
            LMMessage(role="system", parts=[LMTextPart(text="Use tools when needed.")]),
            LMMessage(role="user", parts=[LMTextPart(text="Weather and time in Paris?")], name="alice"),
            LMMessage(role="assistant", parts=[LMTextPart(text="Let me check both."), *calls]),
            LMMessage(role="tool", parts=[LMToolResultPart(call_id="call_w1", name="weather", content=[LMTextPart(text="sunny, 21 C")])]),
            LMMessage(role="tool", parts=[LMToolResultPart(call_id="call_t1", name="local_time", content=[LMTextPart(text="14:05")])]),
        ],
        tools=[WEATHER, TIME],
        config=LMConfig(
            temperature=0.2,
            max_tokens=300,
            stop=["END"],
            n=1,
            logprobs=True,
            reasoning=LMReasoningConfig(effort="low"),
            tool_choice=LMToolChoice(mode="auto", parallel=True),
            extensions={"seed": 7, "top_logprobs": 2},
        ),
    )


def media_request() -> LMRequest:
    """One user message with every OpenAI content block DSPy's writer produces."""
    return LMRequest(
        model="openai/gpt-4o",
        messages=[
            LMMessage(
                role="user",
                parts=[
                    LMTextPart(text="Describe all of these."),
                    LMImagePart(data="iVBORw0KGgo=", media_type="image/png", detail="low"),
                    LMImagePart(url="https://example.com/photo.jpg"),
                    LMAudioPart(data="SUQzBAAAAAAA", media_type="audio/mpeg"),
                    LMBinaryPart(file_id="file-abc", filename="notes.txt"),
                    LMBinaryPart(url="https://example.com/blob.bin", filename="blob.bin"),
                    LMDocumentPart(source={"type": "text", "media_type": "text/plain", "data": "Plain text doc."}, title="Doc", citations={"enabled": True}),
                    LMDocumentPart(url="https://example.com/paper.pdf", title="Paper", context="Background"),
                    LMVideoPart(data="AAAAIGZ0eXA=", media_type="video/mp4"),
                ],
            )
        ],
        config=LMConfig(response_format={"type": "json_object"}, prompt_cache=None),
    )


def react_request() -> LMRequest:
    return LMRequest.model_validate(load("react_history.json")[0]["request"])


def tool_loop_response() -> ModelResponse:
    """A chat completion with two choices: tool calls with reasoning and citations, then a refusal."""
    tool_calls = [
        ChatCompletionMessageToolCall(id="call_w1", type="function", function=Function(name="weather", arguments='{"city": "Paris"}')),
        ChatCompletionMessageToolCall(id="call_t1", type="function", function=Function(name="local_time", arguments='{"city": "Par')),
    ]
    first = Message(
        role="assistant",
        content="Checking the weather and the time.",
        tool_calls=tool_calls,
        reasoning_content="Two tools are needed.",
        provider_specific_fields={
            "citations": [
                [{"type": "char_location", "cited_text": "Paris is sunny.", "document_index": 0, "document_title": "Forecast",
                  "start_char_index": 0, "end_char_index": 15}],
                [{"type": "web_search_result_location", "url": "https://example.com/time", "title": "Time", "cited_text": "14:05"}],
            ]
        },
    )
    second = Message(role="assistant", content=None)
    second.refusal = "I can't share that."  # litellm's Message keeps OpenAI's refusal as a plain attribute
    second.annotations = [{"type": "url_citation", "url_citation": {"url": "https://example.com/policy", "title": "Policy", "start_index": 0, "end_index": 5}}]
    return ModelResponse(
        id="chatcmpl-tool-1",
        created=1763820000,
        model="gpt-4o-mini-2024-07-18",
        object="chat.completion",
        system_fingerprint="fp_44709d6fcb",
        choices=[
            Choices(index=0, finish_reason="tool_calls", message=first),
            Choices(index=1, finish_reason="content_filter", message=second),
        ],
        usage=Usage(
            prompt_tokens=120,
            completion_tokens=40,
            total_tokens=160,
            prompt_tokens_details=PromptTokensDetailsWrapper(cached_tokens=64, audio_tokens=0),
            completion_tokens_details=CompletionTokensDetailsWrapper(reasoning_tokens=12, audio_tokens=0, accepted_prediction_tokens=0, rejected_prediction_tokens=0),
        ),
    )


def logprobs_response() -> ModelResponse:
    """A plain text chat completion with logprobs, cut by the length limit."""
    logprobs = ChoiceLogprobs(
        content=[
            ChatCompletionTokenLogprob(token="Sun", logprob=-0.02, bytes=[83, 117, 110], top_logprobs=[TopLogprob(token="Sun", logprob=-0.02, bytes=[83, 117, 110])]),
            ChatCompletionTokenLogprob(token="ny", logprob=-0.5, bytes=[110, 121], top_logprobs=[]),
        ]
    )
    return ModelResponse(
        id="chatcmpl-text-1",
        created=1763820001,
        model="gpt-4o-mini-2024-07-18",
        choices=[Choices(index=0, finish_reason="length", message=Message(role="assistant", content="Sunny"), logprobs=logprobs)],
        usage=Usage(prompt_tokens=9, completion_tokens=2, total_tokens=11),
    )


def text_completion_response() -> TextCompletionResponse:
    """A legacy text completion (``choices[].text``), which DSPy's ``completion_to_lm_response`` also reads."""
    response = TextCompletionResponse(
        id="cmpl-1",
        created=1763820002,
        model="gpt-3.5-turbo-instruct",
        choices=[TextChoices(index=0, text="Paris.", finish_reason="stop", logprobs=None)],
    )
    response.usage = Usage(prompt_tokens=5, completion_tokens=2, total_tokens=7)
    return response


def dump(response: Any) -> Any:
    # LiteLLM's models mix pydantic fields and plain attributes; model_dump() is what users store.
    return json.loads(json.dumps(response.model_dump(), default=str))


def write(name: str, value: Any) -> None:
    (HERE / name).write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    write("openai_request_all_parts.json", to_openai_chat_request(request_all_parts()))
    write("openai_request_tool_loop.json", to_openai_chat_request(tool_loop_request()))
    write("openai_request_media.json", to_openai_chat_request(media_request()))
    write("openai_request_react.json", to_openai_chat_request(react_request()))
    write("openai_response_tool_loop.json", dump(tool_loop_response()))
    write("openai_response_logprobs.json", dump(logprobs_response()))
    write("openai_response_text_completion.json", dump(text_completion_response()))
    write(
        "openai_exchange_tool_loop.json",
        {"request": to_openai_chat_request(tool_loop_request()), "response": dump(tool_loop_response())},
    )


if __name__ == "__main__":
    main()
