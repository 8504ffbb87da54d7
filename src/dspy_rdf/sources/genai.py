"""The OpenTelemetry GenAI semantic conventions' message JSON <-> the canonical model, both ways.

``gen_ai.input.messages``, ``gen_ai.output.messages`` and ``gen_ai.system_instructions`` hold messages of typed parts;
``gen_ai.tool.definitions`` the tools offered. Part kinds map one to one where the conventions have one:

==================  ===========================================================================================
model part          GenAI part
==================  ===========================================================================================
text                ``{"type": "text", "content"}``
thinking            ``{"type": "reasoning", "content"}``
tool_call           ``{"type": "tool_call", "id", "name", "arguments"}``
tool_result         ``{"type": "tool_call_response", "id", "response"}``: the text of a result of one text part,
                    else its parts as GenAI parts
image, audio,       by where the content is: ``{"type": "blob", "modality", "mime_type", "content"}`` (data),
video, document,    ``"uri"`` (url; a local path too, marked ``"dspy_source": "path"``) or ``"file"`` (file id);
binary              ``modality`` is the kind (``image``, ``audio``, ``video``, ``document``, ``binary``)
refusal, citation   the conventions' generic part: ``{"type": "refusal", "content"}``, ``{"type": "citation", ...}``
==================  ===========================================================================================

The conventions' JSON schemas allow additional properties on messages, parts and tool definitions, so every field of
the model that has no property of its own is written as an additional property under its model name (an image's
``detail``, a tool call's ``provider_data``, a tool result's ``name`` and ``is_error``, every ``metadata``) and read
back: parts and messages cross without loss. Reading other producers' JSON, additional properties the model has no
field for are kept in the part's or message's ``metadata["gen_ai"]``; ``server_tool_call`` and
``server_tool_call_response`` parts become tool-call and tool-result parts holding the whole part in
``provider_data``; a part of a type the conventions do not define is refused by name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import expect_object, fail, get_json_object, get_str, kind_of

__all__ = [
    "EXTRA_KEY",
    "messages_from_genai",
    "messages_to_genai",
    "output_from_genai",
    "output_to_genai",
    "part_from_genai",
    "part_to_genai",
    "tools_from_genai",
    "tools_to_genai",
]

EXTRA_KEY = "gen_ai"
"""``metadata`` key holding the additional properties of another producer's message or part that the model has no
field for."""

_MEDIA: dict[str, type[m.LMImagePart | m.LMAudioPart | m.LMVideoPart | m.LMDocumentPart | m.LMBinaryPart]] = {
    "image": m.LMImagePart,
    "audio": m.LMAudioPart,
    "video": m.LMVideoPart,
    "document": m.LMDocumentPart,
    "binary": m.LMBinaryPart,
}
# Fields of a media part that are written as additional properties (the source fields are the part's type).
_MEDIA_EXTRAS = {
    "image": ("detail", "metadata"),
    "audio": ("metadata",),
    "video": ("metadata",),
    "document": ("source", "citations", "title", "context", "metadata"),
    "binary": ("filename", "metadata"),
}
_SOURCE_TYPES = {"blob": "data", "uri": "url", "file": "file_id"}
_SOURCE_KEYS = {"blob": "content", "uri": "uri", "file": "file_id"}
_PATH_MARK = "dspy_source"


# --- model -> GenAI ---------------------------------------------------------------------------------------


def _with(out: dict[str, Any], part: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """``out`` with the fields ``names`` of ``part`` that differ from their defaults, as additional properties."""
    for name in names:
        value = getattr(part, name)
        if value not in (None, {}, False):
            out[name] = value
    return out


def part_to_genai(part: m.LMPart) -> dict[str, Any]:
    """One part as a GenAI message part (see the module docstring)."""
    if isinstance(part, m.LMTextPart):
        return _with({"type": "text", "content": part.text}, part, ("metadata",))
    if isinstance(part, m.LMThinkingPart):
        return _with({"type": "reasoning", "content": part.text}, part, ("redacted", "metadata"))
    if isinstance(part, m.LMToolCallPart):
        out: dict[str, Any] = {"type": "tool_call", "id": part.call_id, "name": part.name, "arguments": part.args}
        return _with(out, part, ("provider_data", "metadata"))
    if isinstance(part, m.LMToolResultPart):
        content = part.content
        if not content:
            response: Any = None
        elif len(content) == 1 and isinstance(content[0], m.LMTextPart) and not content[0].metadata:
            response = content[0].text
        elif len(content) == 1 and isinstance(content[0], m.LMTextPart) and content[0].metadata == {"json": True}:
            response = json.loads(content[0].text)  # a JSON response, read as text
        else:
            response = [part_to_genai(p) for p in content]
        out = {"type": "tool_call_response", "id": part.call_id, "response": response}
        return _with(out, part, ("name", "is_error", "provider_data", "metadata"))
    if isinstance(part, m.LMRefusalPart):
        return _with({"type": "refusal", "content": part.text}, part, ("metadata",))
    if isinstance(part, m.LMCitationPart):
        return _with({"type": "citation"}, part, ("text", "title", "url", "metadata"))
    kind = part.part_type
    out = {"modality": kind, "mime_type": part.media_type}
    if part.data is not None:
        out = {"type": "blob", **out, "content": part.data}
    elif part.url is not None:
        out = {"type": "uri", **out, "uri": part.url}
    elif part.file_id is not None:
        out = {"type": "file", **out, "file_id": part.file_id}
    elif part.path is not None:
        out = {"type": "uri", **out, "uri": part.path, _PATH_MARK: "path"}
    else:  # a document given by a provider-shaped source object only
        out = {"type": kind, "mime_type": part.media_type}
    return _with(out, part, _MEDIA_EXTRAS[kind])


def messages_to_genai(messages: list[m.LMMessage]) -> list[dict[str, Any]]:
    """Messages as ``gen_ai.input.messages``."""
    out = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role, "parts": [part_to_genai(p) for p in message.parts]}
        out.append(_with(item, message, ("name", "metadata")))
    return out


def output_to_genai(output: m.LMOutput) -> dict[str, Any]:
    """One generated candidate as an item of ``gen_ai.output.messages``."""
    item: dict[str, Any] = {"role": "assistant", "parts": [part_to_genai(p) for p in output.parts]}
    if output.finish_reason is not None:
        item["finish_reason"] = output.finish_reason
    if output.truncated and output.finish_reason != "length":
        item["truncated"] = True
    return _with(item, output, ("logprobs", "provider_data", "metadata"))


def tools_to_genai(tools: list[m.LMToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as ``gen_ai.tool.definitions``."""
    out = []
    for tool in tools:
        item: dict[str, Any] = {"type": tool.tool_type, "name": tool.name}
        if tool.description is not None:
            item["description"] = tool.description
        if tool.parameters:
            item["parameters"] = tool.parameters
        out.append(_with(item, tool, ("strict", "metadata", "provider_data")))
    return out


# --- GenAI -> model ---------------------------------------------------------------------------------------


def _rest(d: dict[str, Any], known: set[str], metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` with the additional properties of ``d`` outside ``known`` kept under :data:`EXTRA_KEY`."""
    extra = {k: v for k, v in d.items() if k not in known and v is not None}
    if extra:
        metadata = {**metadata, EXTRA_KEY: extra}
    return metadata


def _arguments(value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tool-call arguments as (args, provider_data): an object as it is, a JSON text of an object parsed, anything
    else kept in ``provider_data["raw_args"]``."""
    if isinstance(value, dict):
        return value, {}
    if value is None:
        return {}, {}
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return parsed, {}
    return {}, {"raw_args": value}


def part_from_genai(value: Any, path: str) -> m.LMPart:
    """One GenAI message part as a model part (see the module docstring); an unknown part type is refused by name."""
    d = expect_object(value, path)
    kind = get_str(d, "type", path, required=True)
    metadata = get_json_object(d, "metadata", path)
    if kind in ("text", "reasoning", "refusal"):
        text = get_str(d, "content", path, required=True)
        if kind == "text":
            return m.LMTextPart(text=text, metadata=_rest(d, {"type", "content", "metadata"}, metadata))
        if kind == "refusal":
            return m.LMRefusalPart(text=text, metadata=_rest(d, {"type", "content", "metadata"}, metadata))
        redacted = d.get("redacted", False)
        if not isinstance(redacted, bool):
            raise fail(f"{path}.redacted", f"expected true or false, got {kind_of(redacted)}")
        return m.LMThinkingPart(text=text, redacted=redacted, metadata=_rest(d, {"type", "content", "redacted", "metadata"}, metadata))
    if kind == "tool_call":
        args, raw = _arguments(d.get("arguments"))
        known = {"type", "id", "name", "arguments", "provider_data", "metadata"}
        return m.LMToolCallPart(
            name=get_str(d, "name", path, required=True),
            call_id=get_str(d, "id", path),
            args=args,
            provider_data={**get_json_object(d, "provider_data", path), **raw},
            metadata=_rest(d, known, metadata),
        )
    if kind == "tool_call_response":
        response = d.get("response", d.get("result"))
        if isinstance(response, list) and response and all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in response):
            content = [part_from_genai(p, f"{path}.response[{i}]") for i, p in enumerate(response)]
        elif isinstance(response, str):
            content = [m.LMTextPart(text=response)]
        elif response is None:
            content = []
        else:
            content = [m.LMTextPart(text=json.dumps(response, ensure_ascii=False), metadata={"json": True})]
        is_error = d.get("is_error", False)
        if not isinstance(is_error, bool):
            raise fail(f"{path}.is_error", f"expected true or false, got {kind_of(is_error)}")
        known = {"type", "id", "response", "result", "name", "is_error", "provider_data", "metadata"}
        return m.LMToolResultPart(
            call_id=get_str(d, "id", path),
            name=get_str(d, "name", path),
            content=content,
            is_error=is_error,
            provider_data=get_json_object(d, "provider_data", path),
            metadata=_rest(d, known, metadata),
        )
    if kind == "server_tool_call":
        return m.LMToolCallPart(name=get_str(d, "name", path, required=True), call_id=get_str(d, "id", path), provider_data={"server_tool_call": d})
    if kind == "server_tool_call_response":
        return m.LMToolResultPart(call_id=get_str(d, "id", path), provider_data={"server_tool_call_response": d})
    if kind == "citation":
        known = {"type", "text", "title", "url", "metadata"}
        fields = {k: get_str(d, k, path) for k in ("text", "title", "url")}
        return m.LMCitationPart(**fields, metadata=_rest(d, known, metadata))
    if kind in _SOURCE_TYPES or kind == "document":
        return _media_from_genai(d, kind, path, metadata)
    raise fail(
        f"{path}.type",
        f"unknown part type {kind!r}; expected one of text, reasoning, tool_call, tool_call_response, server_tool_call, "
        "server_tool_call_response, blob, uri, file, refusal, citation, document",
    )


def _media_from_genai(d: dict[str, Any], kind: str, path: str, metadata: dict[str, Any]) -> m.LMPart:
    modality = get_str(d, "modality", path) or ("document" if kind == "document" else "binary")
    cls = _MEDIA.get(modality, m.LMBinaryPart)
    part_kind = cls.part_type
    fields: dict[str, Any] = {}
    if (media_type := get_str(d, "mime_type", path)) is not None:
        fields["media_type"] = media_type
    known = {"type", "modality", "mime_type", "metadata", _PATH_MARK, *_MEDIA_EXTRAS[part_kind]}
    if kind in _SOURCE_TYPES:
        key = _SOURCE_KEYS[kind]
        known.add(key)
        target = "path" if kind == "uri" and d.get(_PATH_MARK) == "path" else _SOURCE_TYPES[kind]
        fields[target] = get_str(d, key, path, required=True)
    for name in _MEDIA_EXTRAS[part_kind]:
        if name != "metadata" and d.get(name) is not None:
            fields[name] = d[name]
    if part_kind == "image" and fields.get("detail") not in (None, "low", "high", "auto"):
        raise fail(f"{path}.detail", f"expected low, high or auto, got {fields['detail']!r}")
    for name in ("source", "citations"):
        if name in fields:
            expect_object(fields[name], f"{path}.{name}")
    for name in ("title", "context", "filename"):
        if name in fields and not isinstance(fields[name], str):
            raise fail(f"{path}.{name}", f"expected a string, got {kind_of(fields[name])}")
    metadata = _rest(d, known, metadata)
    if cls is m.LMBinaryPart and modality != "binary":
        metadata = {**metadata, EXTRA_KEY: {**metadata.get(EXTRA_KEY, {}), "modality": modality}}
    return cls(**fields, metadata=metadata)


def _parts(d: dict[str, Any], path: str) -> list[m.LMPart]:
    parts = d.get("parts")
    if parts is None:
        return []
    if not isinstance(parts, list):
        raise fail(f"{path}.parts", f"expected a list, got {kind_of(parts)}")
    return [part_from_genai(p, f"{path}.parts[{i}]") for i, p in enumerate(parts)]


def _objects(value: Any, path: str, what: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The objects of a JSON list, each with its path."""
    if not isinstance(value, list):
        raise fail(path, f"expected a list of {what}, got {kind_of(value)}")
    for i, raw in enumerate(value):
        yield f"{path}[{i}]", expect_object(raw, f"{path}[{i}]")


def messages_from_genai(value: Any, path: str) -> list[m.LMMessage]:
    """``gen_ai.input.messages`` (a list of ``{"role", "parts"}``) as model messages."""
    out = []
    for mp, d in _objects(value, path, "messages"):
        metadata = _rest(d, {"role", "parts", "name", "metadata"}, get_json_object(d, "metadata", mp))
        out.append(m.LMMessage(role=get_str(d, "role", mp, required=True), parts=_parts(d, mp), name=get_str(d, "name", mp), metadata=metadata))
    return out


def output_from_genai(value: Any, path: str) -> m.LMOutput:
    """One item of ``gen_ai.output.messages`` as a generated candidate."""
    d = expect_object(value, path)
    finish = get_str(d, "finish_reason", path)
    truncated = d.get("truncated", False)
    if not isinstance(truncated, bool):
        raise fail(f"{path}.truncated", f"expected true or false, got {kind_of(truncated)}")
    known = {"role", "parts", "finish_reason", "truncated", "logprobs", "provider_data", "metadata"}
    metadata = _rest(d, known, get_json_object(d, "metadata", path))
    role = get_str(d, "role", path)
    if role not in (None, "assistant"):
        metadata = {**metadata, EXTRA_KEY: {**metadata.get(EXTRA_KEY, {}), "role": role}}
    return m.LMOutput(
        parts=_parts(d, path),
        finish_reason=finish,
        truncated=truncated or finish == "length",
        logprobs=d.get("logprobs"),
        provider_data=get_json_object(d, "provider_data", path),
        metadata=metadata,
    )


def tools_from_genai(value: Any, path: str) -> list[m.LMToolSpec]:
    """``gen_ai.tool.definitions`` as tool specs (OpenAI's nested ``{"type": "function", "function": {...}}`` too)."""
    out = []
    for tp, d in _objects(value, path, "tool definitions"):
        if isinstance(d.get("function"), dict) and "name" not in d:  # the OpenAI shape some producers write
            d = {"type": d.get("type", "function"), **d["function"]}
        strict = d.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise fail(f"{tp}.strict", f"expected true or false, got {kind_of(strict)}")
        known = {"type", "name", "description", "parameters", "strict", "metadata", "provider_data"}
        out.append(m.LMToolSpec(
            name=get_str(d, "name", tp, required=True),
            tool_type=get_str(d, "type", tp) or "function",
            description=get_str(d, "description", tp),
            parameters=get_json_object(d, "parameters", tp),
            strict=strict,
            metadata=_rest(d, known, get_json_object(d, "metadata", tp)),
            provider_data=get_json_object(d, "provider_data", tp),
        ))
    return out
