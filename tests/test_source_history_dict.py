"""Legacy ``lm.history`` dicts (DSPy 2.5 to 3.4) -> ``LMHistoryEntry``, checked against DSPy 3.3.1 itself.

The fixtures are real histories: ``history_dicts_dspy<version>.json`` written by
``tests/data/make_fixtures_history.py`` under DSPy 2.5.43, 2.6.27, 3.0.4, 3.3.1 and 3.4.1,
``dummylm_react_history_dicts.json`` (DSPy 3.3.1) and ``dspy341_history_dicts.json`` (DSPy 3.4.1, with lm15
requests). For every entry, DSPy 3.3.1's own conversion (``LMRequest.from_call`` +
``lm_response_from_legacy_outputs`` + usage/cost/response_model) must equal ours, once the documented kept
data is removed.
"""

from __future__ import annotations

import copy
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import dspy33_types

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.sources.dspy33 import entry_to_json, request_to_json, response_to_json
from dspy_rdf.sources.history_dict import FILLED_KEY, LEGACY_UUID_NAMESPACE, entry_from_history_dict, is_history_dict

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM (imported by DSPy) stays offline

DATA = Path(__file__).parent / "data"
FILES = {
    "history_dicts_dspy2.5.43.json": 5,
    "history_dicts_dspy2.6.27.json": 5,
    "history_dicts_dspy3.0.4.json": 6,
    "history_dicts_dspy3.3.1.json": 6,
    "history_dicts_dspy3.4.1.json": 6,
    "dummylm_react_history_dicts.json": 3,
    "dspy341_history_dicts.json": 7,
}
# DummyLM up to DSPy 3.0 records neither the model nor the time; the tests supply both.
SUPPLIED = {"model": "dummy", "timestamp": "2024-09-30T12:00:00"}


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


CASES = [(name, index) for name in FILES for index in range(len(load(name)))]


def test_fixture_counts() -> None:
    assert sorted(p.name for p in DATA.glob("history_dicts_dspy*.json")) == sorted(n for n in FILES if n.startswith("history_dicts_"))
    assert {name: len(load(name)) for name in FILES} == FILES
    assert len(CASES) == 38


def entry(name: str, index: int) -> dict[str, Any]:
    return load(name)[index]


def read(name: str, index: int) -> m.LMHistoryEntry:
    return entry_from_history_dict(entry(name, index), f"[{index}]", **SUPPLIED)


# --- DSPy's own conversion ------------------------------------------------------------------------------------


def live_tool_calls(outputs: list[Any]) -> list[Any]:
    """Outputs with each tool call that ``json.dumps(default=str)`` wrote as text turned back into the LiteLLM
    object DSPy had in hand (the fixture is ours, so evaluating it with only LiteLLM's classes is safe)."""
    from litellm.types.utils import ChatCompletionMessageToolCall, Function

    classes = {"ChatCompletionMessageToolCall": ChatCompletionMessageToolCall, "Function": Function}
    live = []
    for output in outputs:
        if isinstance(output, dict) and output.get("tool_calls"):
            calls = [eval(c, {"__builtins__": {}}, classes) if isinstance(c, str) else c for c in output["tool_calls"]]  # noqa: S307
            output = {**output, "tool_calls": calls}
        live.append(output)
    return live


def dspy_entry(value: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(request JSON or None for an lm15 request, response JSON) as DSPy 3.3.1 converts a legacy entry."""
    dspy33_types()  # DSPy 3.3's own conversions are the reference (skips on DSPy 3.4)
    from dspy.clients.openai_format import lm_response_from_legacy_outputs
    types = dspy33_types()
    LMRequest, LMUsage = types.LMRequest, types.LMUsage

    if isinstance(value.get("request"), dict):
        request = LMRequest(model=value["request"]["model"], messages=[])
        request_json = None
    else:
        messages = value.get("messages")
        prompt = value.get("prompt") if messages is None else None  # DSPy 2.5 logs both; messages were sent
        kwargs = copy.deepcopy(value.get("kwargs") or {})
        request = LMRequest.from_call(model=value.get("model") or SUPPLIED["model"], prompt=prompt, messages=messages, **kwargs)
        request_json = request.model_dump(mode="json")
    response = lm_response_from_legacy_outputs(live_tool_calls(value["outputs"]), request)
    usage = value.get("usage")
    response = response.model_copy(
        update={
            "usage": LMUsage(**usage) if isinstance(usage, dict) and usage else None,
            "cost": value.get("cost"),
            "model": value.get("response_model") or request.model,
        }
    )
    return request_json, response.model_dump(mode="json")


def strip_kept(response: dict[str, Any]) -> dict[str, Any]:
    """Remove the two places where our response keeps more than DSPy: the text of a tool call that was
    written as its str() (DSPy's live object had no such text), and the finish reasons read from the provider's
    response (DSPy's own reading of a legacy entry leaves them out)."""
    response = copy.deepcopy(response)
    for output in response["outputs"]:
        output["finish_reason"], output["truncated"] = None, False
        for part in output["parts"]:
            if part["type"] == "tool_call":
                part["provider_data"].pop("repr", None)
    return response


@pytest.mark.parametrize(("name", "index"), CASES, ids=[f"{n}[{i}]" for n, i in CASES])
def test_matches_dspy(name: str, index: int) -> None:
    pytest.importorskip("dspy")
    value = entry(name, index)
    ours = read(name, index)
    their_request, their_response = dspy_entry(value)
    if their_request is not None:
        assert request_to_json(ours.request) == their_request
    assert strip_kept(response_to_json(ours.response)) == their_response


@pytest.mark.parametrize(("name", "index"), CASES, ids=[f"{n}[{i}]" for n, i in CASES])
def test_is_a_valid_dspy33_entry(name: str, index: int) -> None:
    """The entry we build, kept data included, is valid DSPy 3.3 JSON that DSPy dumps back unchanged."""
    dspy_types = dspy33_types()
    ours = entry_to_json(read(name, index))
    assert dspy_types.LMHistoryEntry.model_validate(ours).model_dump(mode="json") == ours


@pytest.mark.parametrize(("name", "index"), CASES, ids=[f"{n}[{i}]" for n, i in CASES])
def test_is_detected_and_nothing_is_dropped(name: str, index: int) -> None:
    value = entry(name, index)
    assert is_history_dict(value)
    extra = read(name, index).extra_fields
    read_keys = {"prompt", "messages", "kwargs", "outputs", "usage", "cost", "timestamp", "uuid", "model", "response_model", "model_type", "request"}
    for key in value.keys() - read_keys:
        assert extra["provider_response" if key == "response" else key] == value[key]


# --- what each version writes ----------------------------------------------------------------------------------


def test_keys_per_version() -> None:
    dummy = {"prompt", "messages", "kwargs", "outputs", "usage", "cost"}
    lm_25 = dummy | {"response", "timestamp", "uuid", "model", "model_type"}
    assert set(entry("history_dicts_dspy2.5.43.json", 0)) == dummy
    assert set(entry("history_dicts_dspy2.5.43.json", 4)) == lm_25
    assert set(entry("history_dicts_dspy2.6.27.json", 0)) == dummy
    assert set(entry("history_dicts_dspy2.6.27.json", 4)) == lm_25 | {"response_model"}
    assert set(entry("history_dicts_dspy3.0.4.json", 5)) == lm_25 | {"response_model"}
    assert set(entry("history_dicts_dspy3.3.1.json", 0)) == lm_25 | {"response_model"}
    assert set(entry("dspy341_history_dicts.json", 5)) == lm_25 | {"response_model", "cost_details", "request", "adaptations"}


def test_dummylm_entry_without_model_time_or_uuid() -> None:
    value = entry("history_dicts_dspy2.6.27.json", 1)
    with pytest.raises(TraceInputError) as info:
        entry_from_history_dict(value, "[1]")
    assert info.value.field == "[1].model"
    with pytest.raises(TraceInputError) as info:
        entry_from_history_dict(value, "[1]", model="dummy")
    assert info.value.field == "[1].timestamp"
    ours = entry_from_history_dict(value, "[1]", **SUPPLIED)
    assert ours.request.model == ours.response.model == "dummy"
    assert ours.timestamp == SUPPLIED["timestamp"]
    assert ours.extra_fields[FILLED_KEY] == {"model": "given", "timestamp": "given", "uuid": "derived"}
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert ours.uuid == str(uuid.uuid5(LEGACY_UUID_NAMESPACE, canonical))
    assert entry_from_history_dict(copy.deepcopy(value), **SUPPLIED).uuid == ours.uuid  # deterministic
    assert ours.extra_fields["legacy_usage"] == 0 and ours.response.usage is None
    assert ours.response.cost == 0.0
    assert ours.request.config.temperature == 0.0 and ours.request.config.max_tokens == 1000
    assert [msg.role for msg in ours.request.messages] == ["system", "user"]
    assert ours.response.outputs[0].parts[0].text.startswith("[[ ## next_thought ## ]]\nI should add.")


def test_recorded_fields_are_used_as_they_are() -> None:
    ours = read("history_dicts_dspy3.3.1.json", 4)
    value = entry("history_dicts_dspy3.3.1.json", 4)
    # the time as every store keeps it: its fraction without trailing zeros (DSPy's local time keeps no offset)
    assert value["timestamp"].endswith("0") and ours.timestamp == value["timestamp"].rstrip("0")
    assert (ours.uuid, ours.model_type) == (value["uuid"], "chat")
    assert FILLED_KEY not in ours.extra_fields
    assert ours.request.model == "openai/gpt-4o-mini" and ours.response.model == value["response_model"]
    assert ours.extra_fields["provider_response"].startswith("ModelResponse(")
    usage = ours.response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (10, 20, 30)
    assert ours.response.cost == value["cost"]


@pytest.mark.parametrize("name", ["history_dicts_dspy3.0.4.json", "history_dicts_dspy3.3.1.json", "history_dicts_dspy3.4.1.json"])
def test_native_tool_call_written_as_text(name: str) -> None:
    ours = read(name, 5)
    assert [t.name for t in ours.request.tools] == ["weather"]
    text, call = ours.response.outputs[0].parts
    assert text.text.startswith("[[ ## answer ## ]]")
    assert (call.call_id, call.name, call.args) == ("call_w1", "weather", {"city": "Paris"})
    assert call.provider_data["repr"].startswith("ChatCompletionMessageToolCall(")


def test_dspy34_entry_with_lm15_request() -> None:
    pytest.importorskip("dspy_rdf.sources.lm15")
    ours = read("dspy341_history_dicts.json", 5)
    value = entry("dspy341_history_dicts.json", 5)
    assert ours.request.messages[0].role == "system" and ours.request.messages[0].parts[0].text == "Use tools when needed."
    assert [t.name for t in ours.request.tools] == ["weather"]
    assert ours.request.config.temperature == 0.0
    assert ours.extra_fields["adaptations"] == value["adaptations"]
    assert ours.extra_fields["cost_details"] == value["cost_details"]
    call = ours.response.outputs[0].parts[0]
    assert (call.call_id, call.name, call.args) == ("call_w1", "weather", {"city": "Paris"})
    assert ours.response.usage.extra_fields["prompt_tokens_details"] == {"cached_tokens": 10}
    follow_up = read("dspy341_history_dicts.json", 6).request
    assert [msg.role for msg in follow_up.messages] == ["system", "user", "assistant", "tool"]
    assert follow_up.messages[3].parts[0].call_id == follow_up.messages[2].parts[0].call_id == "call_w1"


def test_dspy34_cache_kwargs_next_to_a_request() -> None:
    pytest.importorskip("dspy_rdf.sources.lm15")
    value = {**entry("dspy341_history_dicts.json", 6), "kwargs": {"cache": False, "rollout_id": 2}}
    assert entry_from_history_dict(value).request.config.cache == m.LMCacheConfig(enabled=False, rollout_id=2)
    value["kwargs"] = {"cache": False, "num_retries": 3}
    ours = entry_from_history_dict(value)
    assert ours.request.config.cache is None and ours.extra_fields["legacy_kwargs"] == {"cache": False, "num_retries": 3}


def test_prompt_only_and_prompt_with_messages() -> None:
    base = {"outputs": ["4"], "kwargs": {"stop": "\n"}, "model": "m", "timestamp": "2024-09-01T00:00:00", "uuid": "u"}
    ours = entry_from_history_dict({**base, "prompt": "2+2?", "messages": None})
    assert ours.request.messages == [m.LMMessage(role="user", parts=[m.LMTextPart(text="2+2?")])]
    assert ours.request.config.stop == ["\n"]
    # DSPy 2.5 logged the user message it built from the prompt next to the prompt: nothing to keep
    redundant = entry_from_history_dict({**base, "prompt": "2+2?", "messages": [{"role": "user", "content": "2+2?"}]})
    assert "legacy_prompt" not in redundant.extra_fields
    other = entry_from_history_dict({**base, "prompt": "other", "messages": [{"role": "user", "content": "2+2?"}]})
    assert other.extra_fields["legacy_prompt"] == "other"
    assert entry_from_history_dict({**base, "empty": True, "prompt": None, "outputs": []}).response.outputs[0].metadata == {
        "empty_legacy_outputs": True
    }


def test_legacy_output_objects() -> None:
    base = {"messages": [{"role": "user", "content": "q"}], "model": "m", "timestamp": "2025-01-01T00:00:00", "uuid": "u"}
    output = {
        "text": "a",
        "reasoning_content": "r",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        "citations": [{"cited_text": "x", "text": "y", "url": "https://e.x"}],
        "logprobs": {"content": []},
        "finish_reason": "stop",
    }
    out = entry_from_history_dict({**base, "outputs": [output, None]}).response.outputs
    assert [p.part_type for p in out[0].parts] == ["text", "thinking", "tool_call", "citation"]
    assert out[0].parts[3].text == "x" and out[0].parts[3].metadata == {"text": "y"}
    assert out[0].logprobs == {"content": []} and out[0].provider_data == {"finish_reason": "stop"}
    assert out[1].parts == []


# --- detection ---------------------------------------------------------------------------------------------------


def test_dspy33_typed_entries_are_not_claimed() -> None:
    assert not is_history_dict(load("history_entry_all_parts.json"))
    assert not any(is_history_dict(e) for e in load("react_history.json"))
    for junk in (None, [], "x", {}, {"outputs": []}, {"messages": []}, load("openai_request_tool_loop.json"), load("dspy341_lm15_request.json")):
        assert not is_history_dict(junk)
    with pytest.raises(TraceInputError):
        entry_from_history_dict(load("history_entry_all_parts.json"))


def test_dspy33_to_dict_is_not_claimed() -> None:
    dspy_types = dspy33_types()
    typed = dspy_types.LMHistoryEntry.model_validate(load("history_entry_all_parts.json"))
    assert not is_history_dict(typed.to_dict(mode="json"))
    for raw in load("react_history.json"):
        assert not is_history_dict(dspy_types.LMHistoryEntry.model_validate(raw).to_dict(mode="json"))


# --- bad input ------------------------------------------------------------------------------------------------------

BASE = {"messages": [{"role": "user", "content": "q"}], "outputs": ["a"], "model": "m", "timestamp": "2025-01-01T00:00:00", "uuid": "u"}
BAD = [
    ({**BASE, "messages": "q"}, "[2].messages"),
    ({**BASE, "outputs": "a"}, "[2].outputs"),
    ({**BASE, "outputs": [3]}, "[2].outputs[0]"),
    ({**BASE, "outputs": [{"tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}]}, "[2].outputs[0].tool_calls[0].function.name"),
    ({**BASE, "outputs": [{"tool_calls": ["not a tool call"]}]}, "[2].outputs[0].tool_calls[0]"),
    ({**BASE, "outputs": [{"citations": [{"type": "x"}]}]}, "[2].outputs[0].citations[0]"),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "sticker", "id": 1}]}]}, "[2].messages[0].content[0].type"),
    ({**BASE, "messages": [{"role": "assistant", "content": None, "tool_calls": [{"function": {}}]}]}, "[2].messages[0].tool_calls[0].function.name"),
    ({**BASE, "kwargs": {"tools": {"name": "f"}}}, "[2].kwargs.tools"),
    ({**BASE, "kwargs": {"max_tokens": "many"}}, "[2].kwargs.max_tokens"),
    ({**BASE, "usage": "lots"}, "[2].usage"),
    ({**BASE, "cost": "free"}, "[2].cost"),
    ({**BASE, "timestamp": 5}, "[2].timestamp"),
    ({k: v for k, v in BASE.items() if k != "outputs"}, "[2].outputs"),
    ({**BASE, "provider_response": 1, "response": 2}, "[2]"),
]


@pytest.mark.parametrize(("value", "field"), BAD, ids=[f"{i}:{f}" for i, (_, f) in enumerate(BAD)])
def test_bad_entry_names_the_field(value: dict[str, Any], field: str) -> None:
    with pytest.raises(TraceInputError) as info:
        entry_from_history_dict(value, "[2]")
    assert info.value.field == field
