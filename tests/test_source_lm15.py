"""DSPy 3.4.1 lm15 JSON -> the canonical model (``dspy_rdf.sources.lm15``).

The fixtures are real DSPy 3.4.1 output (``tests/data/make_fixtures_341.py``); this environment has DSPy 3.3.1,
so the tests read the JSON and never import lm15. Every result is written as DSPy 3.3 JSON and validated by
DSPy 3.3.1's own pydantic models: the mapping gives a valid 3.3 contract.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import dspy33_types

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.sources.dspy33 import request_from_json, request_to_json, response_from_json, response_to_json
from dspy_rdf.sources.lm15 import (
    LM15_PART_TYPES,
    detect_lm15,
    lm15_kind,
    lm15_to_json,
    message_from_lm15,
    part_from_lm15,
    request_from_lm15,
    response_from_lm15,
)

DATA = Path(__file__).parent / "data"
LM15_PART_KINDS = (
    "text",
    "image",
    "audio",
    "video",
    "document",
    "binary",
    "tool_call",
    "tool_result",
    "thinking",
    "refusal",
    "citation",
    "data",
)
FIXTURE_KINDS = {
    **{f"dspy341_lm15_part_{kind}.json": "lm_request" for kind in LM15_PART_KINDS},
    "dspy341_lm15_request.json": "lm_request",
    "dspy341_lm15_request_system_text.json": "lm_request",
    "dspy341_lm15_response.json": "lm_response",
    "dspy341_lm15_message.json": "lm_message",
}
HISTORY = "dspy341_history_dicts.json"
CALL_ID = 'call 1 "quoted" <x>\n#%'
TOOL_ARGS = {"query": "DSPy ünïcödé", "limit": 12345678901234567890, "filters": {"deep": [[{"x": ""}]]}}
TEXT = 'Héllo, "world" \\ <tag> #1\nline 2 — 🙂'


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def read(value: Any, kind: str) -> Any:
    """Read lm15 JSON of the given kind into the canonical model."""
    return {
        "lm_request": request_from_lm15,
        "lm_response": response_from_lm15,
        "lm_message": message_from_lm15,
        "lm_part": part_from_lm15,
    }[kind](value)


def as_dspy33_json(obj: Any) -> tuple[dict[str, Any], type]:
    """The DSPy 3.3 JSON of a canonical object and the DSPy 3.3.1 model that must accept it (a message or
    part goes inside a one-message request)."""
    types = dspy33_types()
    if isinstance(obj, m.LMResponse):
        return response_to_json(obj), types.LMResponse
    if isinstance(obj, m.LMMessage):
        obj = m.LMRequest(model="m", messages=[obj])
    elif not isinstance(obj, m.LMRequest):
        obj = m.LMRequest(model="m", messages=[m.LMMessage(role="assistant", parts=[obj])])
    return request_to_json(obj), types.LMRequest


def test_the_fixture_set_is_complete() -> None:
    """Every lm15 fixture on disk is tested here, and none is missing: the suite cannot silently shrink."""
    assert LM15_PART_TYPES == LM15_PART_KINDS
    assert len(FIXTURE_KINDS) == 16
    assert {p.name for p in DATA.glob("dspy341_lm15_*.json")} == set(FIXTURE_KINDS)
    assert len(load(HISTORY)) == 7
    assert len(BAD_INPUTS) == 35
    assert len(NOT_LM15) == 10


# --- every fixture file -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURE_KINDS))
def test_detects_the_kind_of_every_fixture(name: str) -> None:
    assert detect_lm15(load(name)) == FIXTURE_KINDS[name]


@pytest.mark.parametrize("name", sorted(FIXTURE_KINDS))
def test_shape_kind_of_every_fixture(name: str) -> None:
    """For JSON known to be lm15, the kind by shape alone: also for its messages and unmarked parts."""
    value = load(name)
    assert lm15_kind(value) == FIXTURE_KINDS[name]
    for message in value.get("messages", []):
        assert lm15_kind(message) == "lm_message"
        assert {lm15_kind(part) for part in message["parts"]} == {"lm_part"}


@pytest.mark.parametrize("name", sorted(FIXTURE_KINDS))
def test_every_fixture_is_a_valid_dspy33_contract(name: str) -> None:
    obj = read(load(name), FIXTURE_KINDS[name])
    data, dspy_model = as_dspy33_json(obj)
    validated = dspy_model.model_validate(data)
    assert validated.model_dump(mode="json") == data  # DSPy 3.3.1 takes it as written: nothing coerced
    back = request_from_json(data) if dspy_model.__name__ == "LMRequest" else response_from_json(data)
    assert as_dspy33_json(back)[0] == data


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")
    else:
        yield path, value


@pytest.mark.parametrize("name", sorted(FIXTURE_KINDS))
def test_no_lm15_value_is_dropped(name: str) -> None:
    """Every scalar of the lm15 JSON is somewhere in the DSPy 3.3 JSON: as a value, or inside the JSON text of
    a data part. The exceptions: cache.mode becomes prompt_cache.enabled, and a response's message role is
    always ``assistant`` (lm15 refuses any other), which an output implies."""
    lm15 = load(name)
    dspy33, _ = as_dspy33_json(read(lm15, FIXTURE_KINDS[name]))
    values = {json.dumps(v) for _, v in _leaves(dspy33)}
    texts = [v for _, v in _leaves(dspy33) if isinstance(v, str)]
    for path, value in _leaves(lm15):
        if path.endswith(".cache.mode") or path == ".message.role":
            continue
        token = json.dumps(value, ensure_ascii=False)
        assert json.dumps(value) in values or any(token in text for text in texts), (path, value)


# --- every part kind -------------------------------------------------------------------------------------------

ROLE_OF_PART = {
    **dict.fromkeys(("text", "image", "audio", "video", "document", "binary", "data"), "user"),
    **dict.fromkeys(("tool_call", "thinking", "refusal", "citation"), "assistant"),
    "tool_result": "tool",
}
THINKING_SIGNATURE = [{"provider": "anthropic", "kind": "thinking_signature", "data": {"signature": "sig-1"}}]
GEMINI_SIGNATURE = [{"provider": "gemini", "kind": "thought_signature", "data": {"value": "c2ln"}}]

EXPECTED_PARTS: dict[str, tuple[type, dict[str, Any]]] = {
    "text": (m.LMTextPart, {"text": TEXT, "metadata": {}}),
    "image": (m.LMImagePart, {"media_type": "image/png", "url": "https://example.com/cat.png", "data": None, "detail": "high"}),
    "audio": (m.LMAudioPart, {"media_type": "audio/wav", "data": "UklGRiQAAABXQVZF", "url": None}),
    "video": (m.LMVideoPart, {"media_type": "video/webm", "file_id": "file-video-1", "data": None}),
    "document": (m.LMDocumentPart, {"media_type": "application/pdf", "path": "/tmp/report.pdf", "source": None}),
    "binary": (m.LMBinaryPart, {"media_type": "application/octet-stream", "data": "AAECAw==", "filename": None}),
    "tool_call": (
        m.LMToolCallPart,
        {"call_id": CALL_ID, "name": "search web", "args": TOOL_ARGS, "metadata": {"lm15": {"continuation": GEMINI_SIGNATURE}}},
    ),
    "tool_result": (m.LMToolResultPart, {"call_id": CALL_ID, "name": "search web", "is_error": True, "metadata": {}}),
    "thinking": (
        m.LMThinkingPart,
        {"text": "Let me think: 2 + 2 = 4.", "redacted": False, "metadata": {"lm15": {"continuation": THINKING_SIGNATURE}}},
    ),
    "refusal": (m.LMRefusalPart, {"text": "I can't help with that.", "metadata": {}}),
    "citation": (m.LMCitationPart, {"text": "quoted passage", "title": "Source", "url": "https://example.com/doc#p1"}),
    "data": (m.LMTextPart, {"text": '{"label": "positive", "scores": [0.9, null, true]}', "metadata": {"lm15": {"type": "data"}}}),
}
# Bare parts with nothing only lm15 writes read the same as DSPy 3.3 (or OpenAI) parts, so detection leaves them.
BARE_PART_KIND = {
    kind: "lm_part" if kind in ("tool_call", "tool_result", "thinking", "data") else None for kind in LM15_PART_KINDS
}


@pytest.mark.parametrize("kind", LM15_PART_KINDS)
def test_reads_every_part_kind(kind: str) -> None:
    request = request_from_lm15(load(f"dspy341_lm15_part_{kind}.json"))
    system, message = request.messages
    assert (system.role, system.parts, system.metadata) == ("system", [m.LMTextPart(text="One part.")], {"lm15": {"system": "string"}})
    assert message.role == ROLE_OF_PART[kind]
    [part] = message.parts
    cls, fields = EXPECTED_PARTS[kind]
    assert type(part) is cls
    assert {key: getattr(part, key) for key in fields} == fields
    if kind == "tool_result":
        assert [type(p) for p in part.content] == [m.LMTextPart, m.LMImagePart, m.LMTextPart]
        assert part.content[0].text == "result text"
        assert part.content[2] == m.LMTextPart(text='{"hits": 3}', metadata={"lm15": {"type": "data"}})


@pytest.mark.parametrize("kind", LM15_PART_KINDS)
def test_bare_parts(kind: str) -> None:
    bare = load(f"dspy341_lm15_part_{kind}.json")["messages"][0]["parts"][0]
    assert detect_lm15(bare) == BARE_PART_KIND[kind]
    in_request = request_from_lm15(load(f"dspy341_lm15_part_{kind}.json")).messages[1].parts[0]
    assert part_from_lm15(bare) == in_request


# --- whole objects: concrete values -------------------------------------------------------------------------------


def test_request_with_everything() -> None:
    request = request_from_lm15(load("dspy341_lm15_request.json"))
    assert request.model == "openai/gpt-4o-mini"
    assert [msg.role for msg in request.messages] == ["system", "developer", "user", "assistant", "tool"]
    system, developer, user, assistant, tool = request.messages
    assert system.metadata == {"lm15": {"system": "parts"}}
    assert [p.text for p in system.parts] == ["You are terse.", '{"policy": "v2"}']
    assert developer.parts == [m.LMTextPart(text="Answer in English.")]
    assert [p.part_type for p in user.parts] == ["text", "image", "audio", "video", "document", "binary", "text"]
    assert [p.part_type for p in assistant.parts] == ["thinking", "tool_call", "citation", "refusal"]
    assert assistant.metadata == {"lm15": {"continuation": [{"provider": "openai", "kind": "response_item", "data": {"id": "msg_1"}}]}}
    call, result = assistant.parts[1], tool.parts[0]
    assert (call.call_id, call.name, call.args) == (CALL_ID, "search web", TOOL_ARGS)
    assert (result.call_id, result.is_error) == (call.call_id, True)
    assert [(t.name, t.tool_type, t.description) for t in request.tools] == [
        ("search web", "function", "Search the web."),
        ("noop", "function", None),
    ]
    assert request.tools[1].parameters == {"type": "object", "properties": {}}
    assert request.metadata == {
        "lm15": {"builtin_tools": [{"position": 2, "type": "builtin", "name": "web_search", "config": {"search_context_size": "low"}}]}
    }
    c = request.config
    assert (c.max_tokens, c.temperature, c.top_p, c.stop, c.logprobs, c.n, c.cache) == (512, 0.7, 0.95, ["\n\n", "END"], 0, None, None)
    assert c.response_format["type"] == "json_schema" and c.response_format["name"] == "verdict"
    assert c.tool_choice == m.LMToolChoice(mode="required", allowed=["search web"], parallel=False)
    assert c.reasoning == m.LMReasoningConfig(effort="high", max_tokens=1024, summary="detailed")
    assert c.prompt_cache == m.LMPromptCacheConfig(enabled=True, key="prefix-1")
    assert c.extensions == {
        "parallel_tool_calls": False,
        "metadata": {"team": "qa"},
        "lm15": {
            "top_k": 40,
            "seed": 42,
            "frequency_penalty": 0.5,
            "presence_penalty": -0.25,
            "service_tier": "flex",
            "user_id": "u-1",
            "store": False,
            "probabilities": "if_available",
            "cache": {"retention": "long", "prefix": "history", "resource": "cachedContents/abc"},
        },
    }


def test_request_other_spellings() -> None:
    request = request_from_lm15(load("dspy341_lm15_request_system_text.json"))
    assert request.model == "anthropic/claude-sonnet-4-5"
    assert [(msg.role, [p.text for p in msg.parts], msg.metadata) for msg in request.messages] == [
        ("system", ["Be brief."], {"lm15": {"system": "string"}}),
        ("user", ["Hi"], {}),
    ]
    c = request.config
    assert (c.reasoning, c.tool_choice) == (m.LMReasoningConfig(effort="off"), m.LMToolChoice(mode="none"))
    assert (c.prompt_cache, c.logprobs, c.stop, c.temperature) == (m.LMPromptCacheConfig(enabled=True), 3, None, None)
    assert c.extensions == {"lm15": {"cache": {"prefix_until_index": 0}}}
    assert request.tools == [] and request.metadata == {}


def test_response_with_everything() -> None:
    response = response_from_lm15(load("dspy341_lm15_response.json"))
    assert (response.response_id, response.model) == ("chatcmpl-123", "gpt-4o-mini-2024-07-18")
    assert (response.cost, response.cache_hit) == (None, False)
    [output] = response.outputs
    assert [p.part_type for p in output.parts] == ["thinking", "thinking", "text", "tool_call", "citation", "refusal", "text", "image"]
    thinking, hidden, text, call, citation, refusal, data, image = output.parts
    assert (thinking.redacted, hidden.text, hidden.redacted) == (False, "", True)
    assert hidden.metadata["lm15"]["continuation"][0]["kind"] == "redacted_thinking"
    assert text.text == TEXT and (call.call_id, call.args) == (CALL_ID, TOOL_ARGS)
    assert (citation.url, refusal.text) == ("https://example.com/doc#p1", "I can't help with that.")
    assert json.loads(data.text) == {"label": "positive"}
    assert data.metadata == {
        "lm15": {"type": "data", "probabilities": {"label": {"positive": 0.875, "negative": 0.125}}, "method": "candidate_sequence_likelihood"}
    }
    assert (image.media_type, image.data) == ("image/png", "iVBORw0KGgo=")
    assert (output.finish_reason, output.truncated) == ("length", True)
    assert output.logprobs[0]["token"] == "Hi"
    assert output.logprobs[0]["top"][1] == {"token": "Hello", "logprob": -4.5, "bytes": [72], "token_id": 9906}
    assert output.metadata == {
        "lm15": {"continuation": [{"provider": "openai", "kind": "response_item", "data": {"id": "msg_2"}}], "logprobs_complete": False}
    }
    assert response.usage == m.LMUsage(
        input_tokens=1200,
        output_tokens=34,
        total_tokens=1234,
        prompt_tokens=1200,
        completion_tokens=34,
        reasoning_tokens=10,
        cache_read_tokens=1000,
        cache_write_tokens=0,
        input_audio_tokens=3,
        output_audio_tokens=4,
    )
    assert [a["field"] for a in response.metadata["lm15"]["adaptations"]] == ["config.top_k", "config.temperature"]
    assert response.metadata["lm15"]["adaptations"][1] == {
        "field": "config.temperature", "action": "clamped", "reason": "this wire's ceiling is 1", "asked": 1.5, "applied": 1.0
    }
    assert response.provider_data == {"system_fingerprint": "fp_1", "service_tier": "flex"}


def test_message() -> None:
    message = message_from_lm15(load("dspy341_lm15_message.json"))
    assert message.role == "assistant" and len(message.parts) == 8
    assert message.metadata == {"lm15": {"continuation": [{"provider": "openai", "kind": "response_item", "data": {"id": "msg_2"}}]}}


# --- the DSPy 3.4.1 history -----------------------------------------------------------------------------------------

ENTRY_KEYS = {"prompt", "messages", "kwargs", "response", "outputs", "usage", "cost", "timestamp", "uuid", "model"}
ENTRY_KEYS |= {"response_model", "model_type"}
CUSTOM_ENGINE_COST = {"kind": "unknown", "reason": "custom engine has no pricing provider"}


def test_history_entries_of_dspy341() -> None:
    """What DSPy 3.4.1 records: its ``response`` (and ``request``, when there is one) read as lm15 JSON."""
    types = dspy33_types()
    LMRequest, LMResponse = types.LMRequest, types.LMResponse
    history = load(HISTORY)
    extra_keys = [{"cost_details"}, {"cost_details", "request", "adaptations"}, {"cost_details", "request"}]
    assert [set(e) - ENTRY_KEYS for e in history] == [set()] * 4 + extra_keys
    for entry in history:
        assert detect_lm15(entry) is None and detect_lm15(entry["response"]) == "lm_response"
        response = response_from_lm15(entry["response"])
        LMResponse.model_validate(response_to_json(response))
        if "request" in entry:
            assert detect_lm15(entry["request"]) == "lm_request"
            LMRequest.model_validate(request_to_json(request_from_lm15(entry["request"])))
    react, (native, asked, answered) = history[:4], history[4:]

    # dspy.ReAct on DummyLM: add, divide (raises), finish, then the extraction; DummyLM reports zero usage.
    responses = [response_from_lm15(e["response"]) for e in react]
    assert [r.model for r in responses] == ["dummy"] * 4
    assert ["\nadd\n" in r.outputs[0].parts[0].text for r in responses] == [True, False, False, False]
    assert "\ndivide\n" in responses[1].outputs[0].parts[0].text
    assert responses[0].usage.total_tokens == 0 and responses[0].response_id is None
    assert "Execution error in divide" in react[2]["messages"][-1]["content"]
    assert "ZeroDivisionError" in react[2]["messages"][-1]["content"]

    # Native tool calls through a custom engine (lm15's OpenAI Chat adapter on a scripted transport).
    response = response_from_lm15(native["response"])
    call = response.outputs[0].parts[1]
    assert (call.call_id, call.name, call.args) == ("call_w1", "weather", {"city": "Paris"})
    assert (response.response_id, response.usage.input_tokens, response.outputs[0].finish_reason) == ("chatcmpl-1", 210, "tool_call")
    assert native["kwargs"]["tools"][0]["function"]["name"] == "weather"
    assert [e["cost_details"] for e in history[4:]] == [CUSTOM_ENGINE_COST] * 3

    # Explicit lm15 Requests: the wire dropped top_k, and lm15 said so on the response and the entry.
    request = request_from_lm15(asked["request"])
    assert [msg.role for msg in request.messages] == ["system", "user"]
    assert [t.name for t in request.tools] == ["weather"] and request.config.extensions == {"lm15": {"top_k": 5}}
    response = response_from_lm15(asked["response"])
    assert response.metadata["lm15"]["adaptations"] == asked["adaptations"]
    assert asked["adaptations"][0]["field"] == "config.top_k" and asked["adaptations"][0]["action"] == "dropped"
    assert (response.usage.cache_read_tokens, response.usage.reasoning_tokens) == (10, 3)
    assert response.provider_data["id"] == "chatcmpl-2"
    follow_up = request_from_lm15(answered["request"])
    assert [msg.role for msg in follow_up.messages] == ["system", "user", "assistant", "tool"]
    result = follow_up.messages[3].parts[0]
    assert (result.call_id, result.content, result.is_error) == ("call_w1", [m.LMTextPart(text="sunny")], False)
    assert response_from_lm15(answered["response"]).outputs[0].parts == [m.LMTextPart(text="It is sunny in Paris.")]


# --- detection leaves everything else alone ---------------------------------------------------------------------------

NOT_LM15 = {
    "DSPy 3.3 request": load("request_all_parts.json"),
    "DSPy 3.3 response": load("response_all_parts.json"),
    "DSPy 3.3 history entry": load("history_entry_all_parts.json"),
    "DSPy 3.3 history": load("react_history.json"),
    "DSPy 3.3 message": load("request_all_parts.json")["messages"][2],
    "sparse DSPy 3.3 request": {"model": "m", "messages": [{"role": "user", "parts": [{"type": "text", "text": "Hi"}]}]},
    "OpenAI chat request": {"model": "gpt-4o", "messages": [{"role": "system", "content": "Hi"}], "temperature": 0},
    "OpenAI chat completion": {
        "id": "c",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}],
    },
    "OpenAI text content part": {"type": "text", "text": "Hi"},
    "DSPy 3.4.1 history entry": load(HISTORY)[5],
}


@pytest.mark.parametrize("name", sorted(NOT_LM15))
def test_does_not_claim_other_json(name: str) -> None:
    assert detect_lm15(NOT_LM15[name]) is None


def test_the_shared_dspy_repo_request_is_not_lm15() -> None:
    """A real DSPy 3.3 request from DSPy's own test snapshots (shared/fixtures, beside the repository)."""
    from conftest import dspy33_types, load_shared

    assert detect_lm15(load_shared("dspy_repo_rlm_lm_request.json")) is None


def test_shape_kind_leaves_history_entries_and_openai_alone() -> None:
    for name in ("DSPy 3.4.1 history entry", "OpenAI chat request", "OpenAI chat completion", "DSPy 3.3 history"):
        assert lm15_kind(NOT_LM15[name]) is None


@pytest.mark.parametrize(
    "value",
    [
        None,
        [],
        "x",
        3,
        {},
        {"message": 5, "finish_reason": 1},
        {"model": 1, "messages": [1, None]},
        {"role": "user", "parts": [None, 5]},
        {"type": ["x"]},
        {"model": "m", "messages": [{"role": "user", "parts": "x"}]},
    ],
)
def test_detection_never_raises(value: Any) -> None:
    assert detect_lm15(value) is None
    lm15_kind(value)


def test_every_dspy33_part_fixture_is_left_alone() -> None:
    for kind in m.PART_TYPES:
        value = load(f"part_{kind}.json")
        assert detect_lm15(value) is None and detect_lm15(value["messages"][0]["parts"][0]) is None


# --- bad input: a TraceInputError naming the field ------------------------------------------------------------


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Any], None]:
    def apply(doc: Any) -> None:
        *head, last = path
        for key in head:
            doc = doc[key]
        doc[last] = value

    return apply


def _apply(path: tuple[Any, ...], action: Callable[[Any], None]) -> Callable[[Any], None]:
    def apply(doc: Any) -> None:
        for key in path:
            doc = doc[key]
        action(doc)

    return apply


REQ, RESP = "dspy341_lm15_request.json", "dspy341_lm15_response.json"
USER, ASSISTANT, TOOL = ("messages", 1), ("messages", 2), ("messages", 3)
A_TOOL_CALL = {"type": "tool_call", "id": "c", "name": "n", "input": {}}

BAD_INPUTS: dict[str, tuple[str, Callable[[Any], None], str, str]] = {
    "unknown part type": (
        REQ,
        _set((*USER, "parts", 0, "type"), "hologram"),
        "request.messages[1].parts[0].type",
        "unknown lm15 part type 'hologram'",
    ),
    "3.3 args on a tool call": (
        REQ,
        _set((*ASSISTANT, "parts", 1, "args"), {}),
        "request.messages[2].parts[1]",
        "unknown field(s) args",
    ),
    "tool call input not an object": (
        REQ,
        _set((*ASSISTANT, "parts", 1, "input"), [1]),
        "request.messages[2].parts[1].input",
        "expected a JSON object, got a list",
    ),
    "tool call without id": (
        REQ,
        _apply((*ASSISTANT, "parts", 1), lambda d: d.pop("id")),
        "request.messages[2].parts[1].id",
        "is required",
    ),
    "image with two sources": (
        REQ,
        _set((*USER, "parts", 1, "data"), "AAAA"),
        "request.messages[1].parts[1]",
        "exactly one of data, url, file_id or path",
    ),
    "system role message": (
        REQ,
        _set(("messages", 0, "role"), "system"),
        "request.messages[0].role",
        "a system prompt is Request.system",
    ),
    "text in a tool message": (
        REQ,
        _set((*TOOL, "parts"), [{"type": "text", "text": "x"}]),
        "request.messages[3].parts[0].type",
        "only tool_result parts",
    ),
    "tool call in a user message": (
        REQ,
        _apply((*USER, "parts"), lambda d: d.append(A_TOOL_CALL)),
        "request.messages[1].parts[7].type",
        "cannot carry a tool_call part",
    ),
    "thinking in a tool result": (
        REQ, _apply((*TOOL, "parts", 0, "content"), lambda d: d.append({"type": "thinking", "text": "x"})),
        "request.messages[3].parts[0].content[3].type", "cannot contain a thinking part",
    ),
    "continuation without provider": (
        REQ,
        _apply((*ASSISTANT, "continuation", 0), lambda d: d.pop("provider")),
        "request.messages[2].continuation[0].provider",
        "is required",
    ),
    "data part without value": (
        REQ,
        _apply((*USER, "parts", 6), lambda d: d.pop("value")),
        "request.messages[1].parts[6].value",
        "is required",
    ),
    "temperature not a number": (
        REQ,
        _set(("config", "temperature"), "hot"),
        "request.config.temperature",
        "expected a number, got a string",
    ),
    "3.3 config key n": (REQ, _set(("config", "n"), 2), "request.config", "unknown field(s) n"),
    "reserved extensions key": (
        REQ,
        _set(("config", "extensions", "lm15"), {}),
        "request.config.extensions.lm15",
        "is reserved",
    ),
    "unknown reasoning effort": (
        REQ,
        _set(("config", "reasoning", "effort"), "extreme"),
        "request.config.reasoning.effort",
        "got 'extreme'",
    ),
    "tool choice names a missing tool": (
        REQ,
        _set(("config", "tool_choice", "allowed"), ["nope"]),
        "request.config.tool_choice.allowed",
        "nope",
    ),
    "duplicate tool name": (
        REQ,
        _set(("tools", 1, "name"), "search web"),
        "request.tools[1].name",
        "duplicate tool name",
    ),
    "builtin tool with a description": (
        REQ,
        _set(("tools", 2, "description"), "x"),
        "request.tools[2]",
        "unknown field(s) description",
    ),
    "cache off with a key": (
        REQ,
        _set(("config", "cache", "mode"), "off"),
        "request.config.cache",
        "mode off takes no",
    ),
    "OpenAI text response format": (
        REQ,
        _set(("config", "response_format"), {"type": "text"}),
        "request.config.response_format.type",
        "got 'text'",
    ),
    "system not text or parts": (
        REQ,
        _set(("system",), 5),
        "request.system",
        "expected a string or a non-empty list of parts",
    ),
    "OpenAI finish reason": (
        RESP,
        _set(("finish_reason",), "tool_calls"),
        "response.finish_reason",
        "got 'tool_calls'",
    ),
    "usage count as a string": (
        RESP,
        _set(("usage", "input_tokens"), "1200"),
        "response.usage.input_tokens",
        "expected an integer, got a string",
    ),
    "negative usage count": (RESP, _set(("usage", "output_tokens"), -1), "response.usage.output_tokens", "at least 0"),
    "3.3 usage key": (RESP, _set(("usage", "prompt_tokens"), 3), "response.usage", "unknown field(s) prompt_tokens"),
    "3.3 outputs key": (RESP, _set(("outputs",), []), "response", "unknown field(s) outputs"),
    "user message as a response": (
        RESP,
        _set(("message",), {"role": "user", "parts": [{"type": "text", "text": "x"}]}),
        "response.message.role",
        "role 'assistant'",
    ),
    "unknown adaptation action": (
        RESP,
        _set(("adaptations", 0, "action"), "ignored"),
        "response.adaptations[0].action",
        "got 'ignored'",
    ),
    "logprob bytes not integers": (
        RESP,
        _set(("logprobs", 0, "bytes"), ["a"]),
        "response.logprobs[0].bytes",
        "non-negative integers",
    ),
    "probability above one": (
        RESP, _set(("message", "parts", 6, "probabilities", "label", "positive"), 2),
        "response.message.parts[6].probabilities.label.positive", "in [0, 1]",
    ),
    "thinking text not a string": (
        RESP,
        _set(("message", "parts", 0, "text"), 5),
        "response.message.parts[0].text",
        "expected a string, got an integer",
    ),
    "3.3 name on a message": ("dspy341_lm15_message.json", _set(("name",), "bob"), "message", "unknown field(s) name"),
    "part not an object": (
        "dspy341_lm15_part_refusal.json",
        _set(("messages", 0, "parts", 0), "no"),
        "request.messages[0].parts[0]",
        "expected a JSON object",
    ),
    "empty refusal": (
        "dspy341_lm15_part_refusal.json",
        _set(("messages", 0, "parts", 0, "text"), ""),
        "request.messages[0].parts[0].text",
        "must not be empty",
    ),
    "empty citation": (
        "dspy341_lm15_part_citation.json",
        _set(("messages", 0, "parts", 0), {"type": "citation"}),
        "request.messages[0].parts[0]",
        "at least one of text, title or url",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_names_the_field(case: str) -> None:
    name, mutate, field, reason = BAD_INPUTS[case]
    doc = copy.deepcopy(load(name))
    mutate(doc)
    with pytest.raises(TraceInputError) as caught:
        read(doc, FIXTURE_KINDS[name])
    assert caught.value.field == field
    assert reason in caught.value.reason


# --- live objects and imports -----------------------------------------------------------------------------------


def test_live_objects_need_dspy34() -> None:
    if importlib.util.find_spec("dspy.lm15") is not None:
        pytest.skip("DSPy >= 3.4 is installed; make_fixtures_341.py checks lm15_to_json against lm15's serde")
    with pytest.raises(ImportError, match=r"pip install 'dspy>=3\.4'"):
        lm15_to_json(object())


def test_module_does_not_import_dspy() -> None:
    """The package works without DSPy: importing the lm15 source must not import it."""
    src = Path(__file__).parents[1] / "src" / "dspy_rdf"
    code = (
        "import sys, types, importlib\n"
        f"package = types.ModuleType('dspy_rdf'); package.__path__ = [{str(src)!r}]; sys.modules['dspy_rdf'] = package\n"
        "importlib.import_module('dspy_rdf.sources.lm15')\n"
        "assert 'dspy' not in sys.modules, sorted(k for k in sys.modules if k.startswith('dspy'))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
