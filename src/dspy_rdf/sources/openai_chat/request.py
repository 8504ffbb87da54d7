"""An OpenAI Chat Completions request -> ``LMRequest``, as DSPy's ``LMRequest.from_call`` reads it: the
messages (their content through :mod:`.content`, their tool calls through :mod:`.tool_calls`), the tool
specs, and every other key as call settings (:mod:`.config`)."""

from __future__ import annotations

from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import expect_object, fail, get_bool, get_json_object, get_str, kind_of
from dspy_rdf.sources.openai_chat.config import config_from_kwargs
from dspy_rdf.sources.openai_chat.content import coerce_part, parts_from_openai_content
from dspy_rdf.sources.openai_chat.tool_calls import request_tool_calls
from dspy_rdf.sources.openai_chat.values import drop_nulls

__all__ = ["message_from_openai", "messages_from_openai", "request_from_openai", "tools_from_openai"]


def message_from_openai(value: Any, path: str) -> m.LMMessage:
    """One OpenAI chat message -> a model message, as DSPy's ``LMMessage.normalize_parts`` reads it.

    A ``tool`` message becomes one ``LMToolResultPart`` (``tool_call_id`` -> ``call_id``, ``name``,
    ``content``); other messages get their ``content`` parts then their ``tool_calls``. Keys with no
    ``LMMessage`` field are kept in ``metadata["provider_data"]``.
    """
    d = expect_object(value, path)
    role = get_str(d, "role", path, required=True)
    metadata = dict(get_json_object(d, "metadata", path))
    rest = {k: v for k, v in d.items() if k not in ("role", "metadata")}
    name: str | None = None
    if role == "tool" and "parts" not in d:
        call_id = get_str(d, "tool_call_id", path)
        result = m.LMToolResultPart(
            call_id=call_id,
            name=get_str(d, "name", path),
            content=parts_from_openai_content(rest.pop("content", None), f"{path}.content"),
        )
        rest.pop("tool_call_id", None)
        rest.pop("name", None)
        parts: list[m.LMPart] = [result]
    else:
        if "parts" in d:
            raw_parts = rest.pop("parts")
            if not isinstance(raw_parts, list):
                raise fail(f"{path}.parts", f"expected a list, got {kind_of(raw_parts)}")
            parts = [coerce_part(p, f"{path}.parts[{i}]") for i, p in enumerate(raw_parts)]
        else:
            parts = parts_from_openai_content(rest.pop("content", None), f"{path}.content")
        if "tool_calls" in rest:
            parts.extend(request_tool_calls(rest.pop("tool_calls"), f"{path}.tool_calls"))
        name = get_str(d, "name", path)
        rest.pop("name", None)
    extras = drop_nulls(rest)
    if extras:
        if "provider_data" in metadata:
            raise fail(f"{path}.metadata.provider_data", "is reserved for the message's extra OpenAI fields")
        metadata["provider_data"] = extras
    return m.LMMessage(role=role, parts=parts, name=name, metadata=metadata)


def messages_from_openai(messages: Any, path: str) -> list[m.LMMessage]:
    """An OpenAI ``messages`` list -> model messages, in order."""
    if not isinstance(messages, list):
        raise fail(path, f"expected a list of messages, got {kind_of(messages)}")
    return [message_from_openai(msg, f"{path}[{i}]") for i, msg in enumerate(messages)]


_TOOL_SPEC_FIELDS = frozenset({"type", "name", "description", "parameters", "strict", "metadata", "provider_data"})


def _tool_spec(value: Any, path: str) -> m.LMToolSpec:
    d = expect_object(value, path)
    if "function" in d:
        # OpenAI's nested form; DSPy folds every extra (outer or inner) into provider_data.
        tool_type = d.get("type", "function")
        if tool_type != "function":
            raise fail(f"{path}.type", f"expected 'function', got {tool_type!r}")
        p = f"{path}.function"
        function = expect_object(d["function"], p)
        provider_data = {k: v for k, v in d.items() if k not in ("type", "function")}
        provider_data.update({k: v for k, v in function.items() if k not in ("name", "description", "parameters", "strict")})
        return m.LMToolSpec(
            name=get_str(function, "name", p, required=True),
            description=get_str(function, "description", p),
            parameters=get_json_object(function, "parameters", p),
            strict=get_bool(function, "strict", p),
            provider_data=provider_data,
        )
    tool_type = d.get("type", "function")
    if tool_type != "function":
        raise fail(f"{path}.type", f"expected 'function', got {tool_type!r}")
    extras = {k: v for k, v in d.items() if k not in _TOOL_SPEC_FIELDS}
    return m.LMToolSpec(
        name=get_str(d, "name", path, required=True),
        description=get_str(d, "description", path),
        parameters=get_json_object(d, "parameters", path),
        strict=get_bool(d, "strict", path),
        metadata=get_json_object(d, "metadata", path),
        provider_data={**get_json_object(d, "provider_data", path), **extras},
    )


def tools_from_openai(tools: Any, path: str) -> list[m.LMToolSpec]:
    """OpenAI ``tools`` (nested ``{"type": "function", "function": {...}}`` or flat) -> tool specs, as DSPy's
    ``_coerce_tool_spec`` reads them: extras go to ``provider_data``. None is no tools."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise fail(path, f"expected a list of tools, got {kind_of(tools)}")
    return [_tool_spec(t, f"{path}[{i}]") for i, t in enumerate(tools)]


def request_from_openai(value: Any, path: str = "request") -> m.LMRequest:
    """An OpenAI Chat Completions request payload -> a model request, as
    ``LMRequest.from_call(model=..., messages=..., tools=..., **everything_else)`` reads it."""
    d = expect_object(value, path)
    if "messages" not in d:
        raise fail(f"{path}.messages", "is required")
    rest = {k: v for k, v in d.items() if k not in ("model", "messages", "tools")}
    return m.LMRequest(
        model=get_str(d, "model", path, required=True),
        messages=messages_from_openai(d["messages"], f"{path}.messages"),
        tools=tools_from_openai(d.get("tools"), f"{path}.tools"),
        config=config_from_kwargs(rest, path),
    )
