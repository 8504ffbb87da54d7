"""OpenAI Chat Completions payloads -> the canonical model, checked against DSPy 3.3.1 itself.

The fixtures ``tests/data/openai_*.json`` were written by DSPy's and LiteLLM's own code
(``tests/data/make_fixtures_openai.py``). For each, DSPy's own reading (``LMRequest.from_call`` for a request
payload, ``completion_to_lm_response`` for a response) dumped with ``model_dump(mode="json")`` must equal
ours written as DSPy 3.3 JSON, once the documented places where dspy-rdf keeps what DSPy drops are removed.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import dspy33_types

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.sources.dspy33 import request_to_json, response_to_json
from dspy_rdf.sources.openai_chat import (
    config_from_kwargs,
    detect_openai,
    exchange_from_openai,
    message_from_openai,
    request_from_openai,
    response_from_openai,
    tool_call_from_provider,
    tools_from_openai,
    usage_from_openai,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM (imported by DSPy) stays offline

DATA = Path(__file__).parent / "data"
REQUEST_FILES = sorted(p.name for p in DATA.glob("openai_request_*.json"))
RESPONSE_FILES = sorted(p.name for p in DATA.glob("openai_response_*.json"))
EXCHANGE_FILES = sorted(p.name for p in DATA.glob("openai_exchange_*.json"))


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def test_fixture_counts() -> None:
    # The suite must not shrink silently when a fixture goes missing.
    assert REQUEST_FILES == [
        "openai_request_all_parts.json",
        "openai_request_media.json",
        "openai_request_react.json",
        "openai_request_tool_loop.json",
    ]
    assert RESPONSE_FILES == [
        "openai_response_logprobs.json",
        "openai_response_text_completion.json",
        "openai_response_tool_loop.json",
    ]
    assert EXCHANGE_FILES == ["openai_exchange_tool_loop.json"]


# --- DSPy's own reading, and the places where dspy-rdf keeps more -------------------------------------------


def dspy_request(payload: dict[str, Any]) -> dict[str, Any]:
    types = dspy33_types()
    LMRequest = types.LMRequest

    rest = {k: v for k, v in payload.items() if k not in ("model", "messages", "tools")}
    request = LMRequest.from_call(model=payload["model"], messages=payload["messages"], tools=payload.get("tools"), **rest)
    return request.model_dump(mode="json")


def dspy_response(payload: dict[str, Any], model: str) -> dict[str, Any]:
    dspy33_types()  # DSPy 3.3's own conversions are the reference (skips on DSPy 3.4)
    from dspy.clients.openai_format import completion_to_lm_response
    types = dspy33_types()
    LMRequest = types.LMRequest

    return completion_to_lm_response(payload, LMRequest(model=model, messages=[])).model_dump(mode="json")


def strip_kept_request(ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Remove what dspy-rdf keeps and DSPy drops from a request's JSON; return it and how much was removed."""
    ours = copy.deepcopy(ours)
    removed = 0
    for message, their_message in zip(ours["messages"], theirs["messages"], strict=True):
        removed += message["metadata"].pop("provider_data", None) is not None
        for part, their_part in zip(message["parts"], their_message["parts"], strict=True):
            if "legacy_content_block" in part["metadata"] and "legacy_content_block" not in their_part["metadata"]:
                del part["metadata"]["legacy_content_block"]
                removed += 1
            if part["type"] == "tool_call" and part["provider_data"]:
                part["provider_data"] = {}  # DSPy's request reader keeps no provider data on tool calls
                removed += 1
    return ours, removed


CITATION_CANDIDATES = ("cited_text", "text", "supported_text", "document_title", "title")


def strip_kept_response(ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Remove what dspy-rdf keeps and DSPy drops from a response's JSON; return it and how much was removed."""
    ours = copy.deepcopy(ours)
    removed = bool(ours["provider_data"])
    ours["provider_data"] = {}
    for output, their_output in zip(ours["outputs"], theirs["outputs"], strict=True):
        removed += bool(output["provider_data"])
        output["provider_data"] = {}
        for part, their_part in zip(output["parts"], their_output["parts"], strict=True):
            if part["type"] == "citation":
                for key in CITATION_CANDIDATES:
                    if key in part["metadata"] and key not in their_part["metadata"]:
                        del part["metadata"][key]
                        removed += 1
            if part["type"] == "tool_call" and "repr" in part["provider_data"] and "repr" not in their_part["provider_data"]:
                del part["provider_data"]["repr"]
                removed += 1
    return ours, removed


def request_payloads() -> list[tuple[str, dict[str, Any]]]:
    payloads = [(name, load(name)) for name in REQUEST_FILES]
    payloads += [(f"{name}:request", load(name)["request"]) for name in EXCHANGE_FILES]
    return payloads


def response_payloads() -> list[tuple[str, dict[str, Any]]]:
    payloads = [(name, load(name)) for name in RESPONSE_FILES]
    payloads += [(f"{name}:response", load(name)["response"]) for name in EXCHANGE_FILES]
    return payloads


REQUEST_CASES = request_payloads()
RESPONSE_CASES = response_payloads()
assert len(REQUEST_CASES) == 5 and len(RESPONSE_CASES) == 4


@pytest.mark.parametrize(("name", "payload"), REQUEST_CASES, ids=[n for n, _ in REQUEST_CASES])
def test_request_matches_dspy(name: str, payload: dict[str, Any]) -> None:
    pytest.importorskip("dspy")
    theirs = dspy_request(payload)
    ours, _ = strip_kept_request(request_to_json(request_from_openai(payload)), theirs)
    assert ours == theirs


@pytest.mark.parametrize(("name", "payload"), RESPONSE_CASES, ids=[n for n, _ in RESPONSE_CASES])
def test_response_matches_dspy(name: str, payload: dict[str, Any]) -> None:
    pytest.importorskip("dspy")
    theirs = dspy_response(payload, "openai/requested-model")
    ours, _ = strip_kept_response(response_to_json(response_from_openai(payload, request_model="openai/requested-model")), theirs)
    assert ours == theirs


@pytest.mark.parametrize(("name", "payload"), REQUEST_CASES, ids=[n for n, _ in REQUEST_CASES])
def test_request_json_is_valid_dspy(name: str, payload: dict[str, Any]) -> None:
    """What we build (kept data included) is a valid DSPy 3.3 request that dumps back unchanged."""
    dspy_types = dspy33_types()
    ours = request_to_json(request_from_openai(payload))
    assert dspy_types.LMRequest.model_validate(ours).model_dump(mode="json") == ours


@pytest.mark.parametrize(("name", "payload"), RESPONSE_CASES, ids=[n for n, _ in RESPONSE_CASES])
def test_response_json_is_valid_dspy(name: str, payload: dict[str, Any]) -> None:
    dspy_types = dspy33_types()
    ours = response_to_json(response_from_openai(payload))
    assert dspy_types.LMResponse.model_validate(ours).model_dump(mode="json") == ours


def test_kept_data_is_exactly_what_dspy_drops() -> None:
    pytest.importorskip("dspy")
    payload = load("openai_request_all_parts.json")
    ours = request_to_json(request_from_openai(payload))
    _, removed = strip_kept_request(ours, dspy_request(payload))
    assert removed == 3  # the image's detail, the document's citations, the tool call's extra keys
    image, _, _, document, _ = ours["messages"][1]["parts"]
    assert image["detail"] is None  # as DSPy: the typed field stays empty ...
    assert image["metadata"]["legacy_content_block"]["image_url"]["detail"] == "high"  # ... and the block is kept
    assert document["metadata"]["legacy_content_block"]["citations"] == {"enabled": True}
    tool_call = ours["messages"][2]["parts"][1]
    assert tool_call["provider_data"] == {"index": 0, "raw": {"type": "function"}}
    response = load("openai_response_tool_loop.json")
    _, removed = strip_kept_response(response_to_json(response_from_openai(response)), dspy_response(response, "m"))
    assert removed == 3  # the response's own keys, choice 0 (index), choice 1 (index, refusal, annotations)


# --- detection -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", REQUEST_FILES + RESPONSE_FILES + EXCHANGE_FILES)
def test_detects_each_fixture(name: str) -> None:
    expected = "openai_" + name.split("_")[1]
    assert detect_openai(load(name)) == expected


NOT_OPENAI = [
    "request_all_parts.json",
    "response_all_parts.json",
    "history_entry_all_parts.json",
    "part_text.json",
    "part_tool_call.json",
    "dspy341_lm15_request.json",
    "dspy341_lm15_response.json",
]


@pytest.mark.parametrize("name", NOT_OPENAI)
def test_does_not_claim_other_formats(name: str) -> None:
    assert detect_openai(load(name)) is None


def test_does_not_claim_history_entries_or_junk() -> None:
    assert detect_openai(load("dummylm_react_history_dicts.json")[0]) is None  # messages + model, but outputs
    assert all(detect_openai(e["request"]) is None for e in load("react_history.json"))  # DSPy 3.3 typed
    for junk in (None, 3, "text", [], {}, {"model": "m", "messages": []}, {"request": {}, "response": {}}, {"model": "m", "messages": [1]}):
        assert detect_openai(junk) is None


def test_dspy33_typed_history_entry_to_dict_is_not_claimed() -> None:
    dspy_types = dspy33_types()
    entry = dspy_types.LMHistoryEntry.model_validate(load("history_entry_all_parts.json"))
    assert detect_openai(entry.to_dict(mode="json")) is None


# --- concrete readings ---------------------------------------------------------------------------------------


def test_tool_loop_request_pairs_calls_and_results_in_order() -> None:
    request = request_from_openai(load("openai_request_tool_loop.json"))
    assert [msg.role for msg in request.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert request.messages[1].name == "alice"
    assistant = request.messages[2]
    assert [type(p).__name__ for p in assistant.parts] == ["LMTextPart", "LMToolCallPart", "LMToolCallPart"]
    calls = assistant.parts[1:]
    assert [(c.call_id, c.name, c.args) for c in calls] == [("call_w1", "weather", {"city": "Paris"}), ("call_t1", "local_time", {"city": "Paris"})]
    results = [msg.parts[0] for msg in request.messages[3:]]
    assert all(isinstance(r, m.LMToolResultPart) for r in results)
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert [r.name for r in results] == ["weather", "local_time"]
    assert [r.content[0].text for r in results] == ["sunny, 21 C", "14:05"]
    assert [t.name for t in request.tools] == ["weather", "local_time"]
    assert request.tools[0].strict is True
    config = request.config
    assert config.tool_choice == m.LMToolChoice(mode="auto", parallel=True)
    assert config.reasoning == m.LMReasoningConfig(effort="low")
    assert (config.temperature, config.max_tokens, config.stop, config.n, config.logprobs) == (0.2, 300, ["END"], 1, True)
    assert config.extensions == {"seed": 7, "top_logprobs": 2}


def test_all_parts_request_config_and_tools() -> None:
    request = request_from_openai(load("openai_request_all_parts.json"))
    config = request.config
    assert config.tool_choice == m.LMToolChoice(mode="required", allowed=["search web"], parallel=False)
    assert config.prompt_cache == m.LMPromptCacheConfig(key="prefix-1")
    assert config.reasoning == m.LMReasoningConfig(effort="high")
    assert config.extensions == {"seed": 42, "user": "u-1"}
    assert request.tools[0].provider_data == {"cache_control": {"type": "ephemeral"}}
    tool_message = request.messages[3]
    assert tool_message.role == "tool" and tool_message.parts[0].call_id == 'call 1 "quoted" <x>\n#%'
    assert [type(p).__name__ for p in tool_message.parts[0].content] == ["LMTextPart", "LMImagePart"]
    assert request.messages[4].parts == [m.LMTextPart(text="")]


def test_tool_loop_response() -> None:
    response = response_from_openai(load("openai_response_tool_loop.json"))
    assert response.response_id == "chatcmpl-tool-1" and response.model == "gpt-4o-mini-2024-07-18"
    assert response.provider_data == {"object": "chat.completion", "created": 1763820000, "system_fingerprint": "fp_44709d6fcb"}
    first, second = response.outputs
    assert [p.part_type for p in first.parts] == ["thinking", "text", "tool_call", "tool_call", "citation", "citation"]
    assert first.parts[0].text == "Two tools are needed."
    assert first.finish_reason == "tool_calls" and not first.truncated
    good, bad = first.parts[2:4]
    assert (good.call_id, good.name, good.args) == ("call_w1", "weather", {"city": "Paris"})
    assert (bad.call_id, bad.args, bad.provider_data["raw_arguments"]) == ("call_t1", {}, '{"city": "Par')
    assert "arguments_parse_error" in bad.provider_data
    citation = first.parts[4]
    assert (citation.text, citation.title) == ("Paris is sunny.", "Forecast")
    assert citation.metadata == {"type": "char_location", "document_index": 0, "start_char_index": 0, "end_char_index": 15}
    assert second.parts == [] and second.finish_reason == "content_filter"
    assert second.provider_data["message"]["refusal"] == "I can't share that."
    assert second.provider_data["message"]["annotations"][0]["type"] == "url_citation"
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (120, 40, 160)
    assert (usage.prompt_tokens, usage.completion_tokens) == (120, 40)
    assert usage.reasoning_tokens is None  # as DSPy: the details stay details
    assert usage.extra_fields["prompt_tokens_details"]["cached_tokens"] == 64
    assert usage.extra_fields["completion_tokens_details"]["reasoning_tokens"] == 12


def test_logprobs_and_text_completion_responses() -> None:
    response = response_from_openai(load("openai_response_logprobs.json"))
    output = response.outputs[0]
    assert output.truncated and output.finish_reason == "length"
    assert [t["token"] for t in output.logprobs["content"]] == ["Sun", "ny"]
    text = response_from_openai(load("openai_response_text_completion.json"))
    assert text.outputs[0].parts == [m.LMTextPart(text="Paris.")]
    assert text.usage.total_tokens == 7


def test_exchange() -> None:
    request, response = exchange_from_openai(load("openai_exchange_tool_loop.json"))
    assert request.model == "openai/gpt-4o-mini"
    assert response.outputs[0].parts[2].call_id == request.messages[2].parts[1].call_id == "call_w1"
    payload = load("openai_exchange_tool_loop.json")
    del payload["response"]["model"]
    assert exchange_from_openai(payload)[1].model == "openai/gpt-4o-mini"  # DSPy: the request's model


CONFIG_KWARGS = [
    {},
    {"temperature": 0, "max_tokens": 10, "top_p": 1, "n": 3, "logprobs": 2, "stop": ["a", "b"]},
    {"reasoning_effort": "medium"},
    {"reasoning": {"effort": "high", "summary": "auto"}, "reasoning_effort": None},
    {"reasoning": "low", "reasoning_effort": "high"},
    {"tool_choice": "none"},
    {"tool_choice": {"type": "function", "function": {"name": "f"}}, "parallel_tool_calls": True},
    {"tool_choice": {"mode": "auto", "parallel": True}, "parallel_tool_calls": None},
    {"parallel_tool_calls": False},
    {"cache": False},
    {"cache": {"enabled": True}, "rollout_id": 3},
    {"rollout_id": "r-1"},
    {"prompt_cache": True, "prompt_cache_key": "k"},
    {"prompt_cache": {"prompt_cache_key": "k2"}},
    {"extensions": {"seed": 1, "user": "x"}, "user": "y", "metadata": {"a": 1}, "response_format": {"type": "json_object"}},
]


@pytest.mark.parametrize("kwargs", CONFIG_KWARGS, ids=[str(i) for i in range(len(CONFIG_KWARGS))])
def test_config_matches_dspy(kwargs: dict[str, Any]) -> None:
    dspy_types = dspy33_types()
    theirs = dspy_types.LMConfig.from_kwargs(**copy.deepcopy(kwargs)).model_dump(mode="json")
    ours = request_to_json(m.LMRequest(model="m", config=config_from_kwargs(kwargs, "kwargs")))["config"]
    assert ours == theirs


def test_config_reads_a_stop_string_as_a_list() -> None:
    assert config_from_kwargs({"stop": "\n"}, "kwargs").stop == ["\n"]


def test_extra_message_keys_and_blocks_are_kept() -> None:
    message = message_from_openai(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}],
            "refusal": None,
            "audio": None,
            "reasoning_content": "hmm",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[1, 2]"}, "extra_content": {"sig": "x"}}
            ],
        },
        "messages[0]",
    )
    text, call = message.parts
    assert text.text == "Hi" and text.metadata["legacy_content_block"]["cache_control"] == {"type": "ephemeral"}
    assert message.metadata == {"provider_data": {"reasoning_content": "hmm"}}  # nulls carry nothing
    assert call.args == {} and call.provider_data["raw_arguments"] == "[1, 2]"
    assert call.provider_data["extra_content"] == {"sig": "x"}


def test_tool_spec_forms() -> None:
    nested, flat = tools_from_openai(
        [
            {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}, "x-extra": 1}, "cache_control": {}},
            {"name": "b", "description": "flat", "vendor": True},
        ],
        "tools",
    )
    assert (nested.name, nested.parameters, nested.provider_data) == ("a", {"type": "object"}, {"cache_control": {}, "x-extra": 1})
    assert (flat.name, flat.description, flat.provider_data) == ("b", "flat", {"vendor": True})


def test_usage() -> None:
    assert usage_from_openai(None, "usage") is None
    usage = usage_from_openai({"input_tokens": 3, "output_tokens": 4}, "usage")
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (3, 4, 7)


def test_tool_call_written_as_its_str_is_parsed_not_evaluated() -> None:
    text = "ChatCompletionMessageToolCall(function=Function(arguments='{\"a\": 1}', name='f'), id='c1', type='function')"
    call = tool_call_from_provider(text, "outputs[0].tool_calls[0]")
    assert (call.name, call.call_id, call.args) == ("f", "c1", {"a": 1})
    assert call.provider_data["repr"] == text
    with pytest.raises(TraceInputError) as info:
        tool_call_from_provider("__import__('os').system('echo no')", "outputs[0].tool_calls[0]")
    assert info.value.field == "outputs[0].tool_calls[0]"


# --- bad input: TraceInputError with the field path ----------------------------------------------------------

BAD_REQUESTS = [
    ({"model": "m", "messages": {"role": "user"}}, "request.messages"),
    ({"model": "m"}, "request.messages"),
    ({"messages": []}, "request.model"),
    ({"model": "m", "messages": ["hi"]}, "request.messages[0]"),
    ({"model": "m", "messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}]},
     "request.messages[0].tool_calls[0].function.name"),
    ({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "hologram", "data": "x"}]}]},
     "request.messages[0].content[1].type"),
    ({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"detail": "low"}}]}]},
     "request.messages[0].content[0].image_url.url"),
    ({"model": "m", "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"format": "wav"}}]}]},
     "request.messages[0].content[0].input_audio"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"}, "request.tool_choice.mode"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "request.temperature"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": [1]}, "request.stop"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"description": "no name"}}]},
     "request.tools[0].function.name"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "custom", "custom": {"name": "c"}}]},
     "request.tools[0].type"),
]


@pytest.mark.parametrize(("payload", "field"), BAD_REQUESTS, ids=[f for _, f in BAD_REQUESTS])
def test_bad_request_names_the_field(payload: dict[str, Any], field: str) -> None:
    with pytest.raises(TraceInputError) as info:
        request_from_openai(payload)
    assert info.value.field == field


BAD_RESPONSES = [
    ({"choices": []}, "response.choices"),
    ({"choices": "x"}, "response.choices"),
    ({"choices": [{"message": {"tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}}]},
     "response.choices[0].message.tool_calls[0].function.name"),
    ({"choices": [{"message": {"content": 5}}]}, "response.choices[0].message.content"),
    ({"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "many"}}, "response.usage.prompt_tokens"),
]


@pytest.mark.parametrize(("payload", "field"), BAD_RESPONSES, ids=[f for _, f in BAD_RESPONSES])
def test_bad_response_names_the_field(payload: dict[str, Any], field: str) -> None:
    with pytest.raises(TraceInputError) as info:
        response_from_openai(payload)
    assert info.value.field == field
