"""OpenAI Chat Completions payloads (requests, responses, request/response pairs) -> the canonical model.

The mapping is DSPy 3.3.1's own, re-implemented without DSPy so the package works without it: a request
payload reads as ``LMRequest.from_call(model=..., messages=..., tools=..., **rest)`` reads it
(``LMMessage.normalize_parts``, ``_parts_from_openai_content``, ``_tool_call_from_openai``,
``_coerce_tool_spec``, ``LMConfig.from_kwargs``), a response as
``dspy.clients.openai_format.completion_to_lm_response`` reads it (``choice_to_lm_output``,
``provider_tool_call_to_part``, ``citation_to_part``, ``usage_from_response``). The differential tests in
``tests/test_source_openai.py`` compare both with DSPy itself.

Where DSPy silently drops data, the typed fields hold what DSPy would hold and the rest is kept, always in
the same documented places (and nowhere else):

=====================================================  ===================================================
what DSPy drops                                        where it is kept
=====================================================  ===================================================
a request content block's keys DSPy does not read      ``part.metadata["legacy_content_block"]``: the whole
(an image's ``detail``, a text block's                 block, under DSPy's own key for "re-emit this block
``cache_control``, a document's ``citations`` next     verbatim" (``part_to_openai_blocks`` honours it)
to a string ``source``, a second media source, ...)
a message's keys with no ``LMMessage`` field           ``message.metadata["provider_data"]`` (null values
(``refusal``, ``audio``, ``cache_control``, ...;       are dropped: they carry nothing)
DSPy rejects such a message)
a request tool call's extra keys (``index``,           ``part.provider_data``, where DSPy's writer puts
``extra_content``, a non-``function`` ``type``,        them back (``assistant_tool_call_to_openai``);
unused ``id``) and its function's extra keys           function extras under ``provider_data["function"]``
tool-call ``arguments`` that are not a JSON object     ``args`` is ``{}`` as in DSPy;
(DSPy: ``{}``, silently)                               ``provider_data["raw_arguments"]`` and
                                                       ``provider_data["arguments_parse_error"]``
a citation's second text, title or url                 ``citation.metadata[<its key>]``
(``cited_text`` wins over ``text``, ...)
a response's top-level keys (``object``, ``created``,  ``response.provider_data``
``system_fingerprint``, ``service_tier``, ...)
a choice's keys (``index``, ...) and its message's     ``output.provider_data``; the message's keys under
keys (``refusal``, ``annotations``, ``audio``,         ``output.provider_data["message"]`` (``role`` only
``thinking_blocks``, the rest of                       when it is not ``assistant``; nulls dropped)
``provider_specific_fields``, ...)
response content blocks DSPy skips                     ``output.provider_data["message"]["unmapped_content"]``:
                                                       ``[{"position": i, "block": ...}]``
=====================================================  ===================================================

Deliberate differences from DSPy, where DSPy would build a broken object, refuse valid input or guess:
a tool call without a function name is an error (DSPy makes a tool call named ``""``); ``stop`` may be a
string as OpenAI allows (DSPy's ``LMConfig`` accepts only a list; the string becomes a one-item list);
message keys DSPy rejects are kept as said above; a response ``content`` that is neither a string nor a list
of blocks, and a content block without the value its type needs, are errors (DSPy writes their ``str()``);
numbers and flags must have their JSON type (no ``"0.5"`` for a temperature, which pydantic would coerce).
A tool call that ``json.dumps(..., default=str)`` wrote as the ``str()`` of a LiteLLM object
(``ChatCompletionMessageToolCall(function=Function(arguments='{}', name='f'), id='c', type='function')``) is
read back by parsing that text with :mod:`ast` (never evaluating it); the text itself is kept in
``provider_data["repr"]``.
"""

from __future__ import annotations

import ast
import json
import mimetypes
from typing import Any, Literal
from urllib.parse import urlparse

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import expect_object, fail, get_bool, get_float, get_int, get_json_object, get_str, kind_of
from dspy_rdf.sources.base import ReadOptions, Source
from dspy_rdf.sources.dspy33 import check_logprobs, check_stop, part_from_json, usage_from_json

__all__ = [
    "SOURCE",
    "citation_from_provider",
    "config_from_kwargs",
    "detect_openai",
    "exchange_from_openai",
    "message_from_openai",
    "messages_from_openai",
    "parts_from_openai_content",
    "request_from_openai",
    "response_from_openai",
    "tool_call_from_provider",
    "tools_from_openai",
    "usage_from_openai",
]

LEGACY_BLOCK_KEY = "legacy_content_block"
"""Part metadata key (DSPy's own) holding a request content block that the typed part cannot reproduce."""

_MISSING = object()


# --- detection ------------------------------------------------------------------------------------------


def _is_openai_message(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("role"), str)
        and "parts" not in value
        and ("content" in value or "tool_calls" in value)
    )


def _is_openai_request(value: Any) -> bool:
    if not isinstance(value, dict) or "outputs" in value or not isinstance(value.get("model"), str):
        return False
    messages = value.get("messages")
    return isinstance(messages, list) and bool(messages) and all(map(_is_openai_message, messages))


def _is_openai_response(value: Any) -> bool:
    return isinstance(value, dict) and (value.get("object") == "chat.completion" or isinstance(value.get("choices"), list))


def detect_openai(value: Any) -> str | None:
    """Say which OpenAI Chat Completions object a parsed JSON value is, or None; never raises.

    ``"openai_request"``: ``model`` and a non-empty ``messages`` list in OpenAI form (each message has
    ``role`` and ``content`` or ``tool_calls``, none has DSPy 3.3's ``parts``), and not a legacy
    ``lm.history`` entry (no ``outputs``). ``"openai_response"``: ``object: "chat.completion"`` or a
    ``choices`` list. ``"openai_exchange"``: exactly ``{"request": <request>, "response": <response>}``.
    """
    if not isinstance(value, dict):
        return None
    if value.keys() == {"request", "response"}:
        if _is_openai_request(value["request"]) and _is_openai_response(value["response"]):
            return "openai_exchange"
        return None
    if _is_openai_response(value):
        return "openai_response"
    if _is_openai_request(value):
        return "openai_request"
    return None


# --- small helpers --------------------------------------------------------------------------------------


def _drop_nulls(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _split_data_uri(value: str) -> tuple[str, str]:
    """DSPy's ``_split_data_uri``: (media type, payload); a value that is no data URI is kept whole."""
    if not value.startswith("data:") or "," not in value:
        return "application/octet-stream", value
    header, data = value.split(",", 1)
    return header.removeprefix("data:").split(";", 1)[0], data


def _guess_media_type(url: str, default: str) -> str:
    return mimetypes.guess_type(urlparse(url).path)[0] or default


def _source_str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise fail(path, f"expected a string, got {kind_of(value)}")
    if not value:
        raise fail(path, "must be non-empty")
    return value


def _text_value(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise fail(path, f"expected a string, got {kind_of(value)}")
    return value


def _with_block(part: m.LMPart, block: dict[str, Any], lossy: bool) -> m.LMPart:
    if lossy and LEGACY_BLOCK_KEY not in part.metadata:
        part.metadata = {**part.metadata, LEGACY_BLOCK_KEY: dict(block)}
    return part


def _parse_arguments(raw: Any, *, strict_object: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tool-call arguments -> (args, provider_data additions). Unusable arguments give ``{}`` (as DSPy) and are
    kept under ``raw_arguments`` with the reason under ``arguments_parse_error``."""
    if isinstance(raw, dict):
        return dict(raw), {}
    if isinstance(raw, str):
        if not raw and not strict_object:
            return {}, {}  # DSPy's request reader reads "" as no arguments
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as error:
            return {}, {"raw_arguments": raw, "arguments_parse_error": str(error)}
        if isinstance(parsed, dict):
            return parsed, {}
        return {}, {"raw_arguments": raw, "arguments_parse_error": f"arguments are JSON {kind_of(parsed)}, not an object"}
    return {}, {"raw_arguments": raw, "arguments_parse_error": f"arguments are {kind_of(raw)}, not a JSON object"}


# --- request content --------------------------------------------------------------------------------------


def _coerce_part(value: Any, path: str) -> m.LMPart:
    """DSPy's ``_coerce_part`` for JSON: a string is text, an object with ``type`` is a DSPy 3.3 part."""
    if isinstance(value, str):
        return m.LMTextPart(text=value)
    if isinstance(value, dict):
        if "type" not in value:
            raise fail(path, "a content block needs a type")
        return part_from_json(value, path)
    raise fail(path, f"expected a string or a content block, got {kind_of(value)}")


def parts_from_openai_content(content: Any, path: str) -> list[m.LMPart]:
    """An OpenAI message ``content`` (None, a string, a block or a list of blocks) -> parts, as DSPy reads it.

    Blocks: ``text``, ``image_url``, ``input_audio``, ``file``, ``document``, ``video``, and DSPy 3.3 part
    dicts (``{"type": "image", "url": ...}``); any other type is an error naming the field.
    """
    if content is None:
        return []
    if isinstance(content, str):
        return [m.LMTextPart(text=content)]
    if not isinstance(content, list):
        return [_coerce_part(content, path)]
    return [_content_block(item, f"{path}[{i}]") for i, item in enumerate(content)]


def _content_block(item: Any, path: str) -> m.LMPart:
    if not isinstance(item, dict):
        return _coerce_part(item, path)
    kind = item.get("type")
    if kind == "text":
        metadata = item.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise fail(f"{path}.metadata", f"expected a JSON object, got {kind_of(metadata)}")
        part: m.LMPart = m.LMTextPart(text=_text_value(item.get("text", ""), f"{path}.text"), metadata=dict(metadata))
        return _with_block(part, item, bool(item.keys() - {"type", "text", "metadata"}))
    if kind == "image_url":
        image = item.get("image_url", {})
        if not isinstance(image, dict):
            raise fail(f"{path}.image_url", f"expected a JSON object, got {kind_of(image)}")
        if image.get("url") is None:
            raise fail(f"{path}.image_url.url", "is required")
        part = _image_from_source(image["url"], f"{path}.image_url.url")
        return _with_block(part, item, bool(item.keys() - {"type", "image_url"} or image.keys() - {"url"}))
    if kind == "input_audio":
        audio = item.get("input_audio", {})
        part, used = _audio_part(audio, f"{path}.input_audio")
        return _with_block(part, item, bool(item.keys() - {"type", "input_audio"} or audio.keys() - used))
    if kind == "file":
        file = item.get("file", {})
        part, used = _binary_part(file, f"{path}.file")
        return _with_block(part, item, bool(item.keys() - {"type", "file"} or file.keys() - used))
    if kind == "document":
        part, used = _document_part(item, path)
        return _with_block(part, item, bool(item.keys() - used))
    if kind == "video":
        video = item.get("video", {})
        part, used = _video_part(video, f"{path}.video")
        return _with_block(part, item, bool(item.keys() - {"type", "video"} or video.keys() - used))
    return _coerce_part(item, path)


def _image_from_source(source: Any, path: str) -> m.LMImagePart:
    source = _source_str(source, path)
    if source.startswith("data:"):
        media_type, data = _split_data_uri(source)
        return m.LMImagePart(data=_source_str(data, path), media_type=media_type)
    return m.LMImagePart(url=source, media_type=_guess_media_type(source, "image/png"))


def _audio_part(audio: Any, path: str) -> tuple[m.LMAudioPart, set[str]]:
    if not isinstance(audio, dict):
        raise fail(path, f"expected a JSON object, got {kind_of(audio)}")
    audio_format = audio.get("format") or "wav"
    if not isinstance(audio_format, str):
        raise fail(f"{path}.format", f"expected a string, got {kind_of(audio_format)}")
    media_type = audio_format if "/" in audio_format else f"audio/{audio_format}"
    for key in ("data", "url", "file_id", "path"):
        if audio.get(key) is None:
            continue
        value = _source_str(audio[key], f"{path}.{key}")
        if key == "data" and value.startswith("data:"):
            # the data URI's media type wins, so a declared format is not used
            media_type, value = _split_data_uri(value)
            return m.LMAudioPart(data=_source_str(value, f"{path}.data"), media_type=media_type), {"data"}
        part = m.LMAudioPart(media_type=media_type)
        setattr(part, key, value)  # the one source given, by its name
        return part, {key, "format"}
    raise fail(path, "an input_audio block needs data, url, file_id or path")


def _binary_part(file: Any, path: str) -> tuple[m.LMBinaryPart, set[str]]:
    if not isinstance(file, dict):
        raise fail(path, f"expected a JSON object, got {kind_of(file)}")
    filename = get_str(file, "filename", path)
    if file.get("file_data") is not None:
        file_data = _source_str(file["file_data"], f"{path}.file_data")
        media_type, data = _split_data_uri(file_data)
        part = m.LMBinaryPart(data=_source_str(data, f"{path}.file_data"), media_type=media_type, filename=filename)
        # DSPy itself keeps the block when a part cannot hold it: file_data next to file_id, or file_data
        # that is no data URI (a URL), whose media type would otherwise be invented.
        if file.get("file_id") is not None or not file_data.startswith("data:"):
            part.metadata = {LEGACY_BLOCK_KEY: {"type": "file", "file": dict(file)}}
            return part, set(file)
        return part, {"file_data", "filename"}
    if file.get("data") is not None:
        media_type, data = _split_data_uri(_source_str(file["data"], f"{path}.data"))
        return m.LMBinaryPart(data=_source_str(data, f"{path}.data"), media_type=media_type, filename=filename), {"data", "filename"}
    if file.get("file_id") is not None:
        return m.LMBinaryPart(file_id=_source_str(file["file_id"], f"{path}.file_id"), filename=filename), {"file_id", "filename"}
    raise fail(path, "a file block needs file_data, data or file_id")


def _document_part(item: dict[str, Any], path: str) -> tuple[m.LMDocumentPart, set[str]]:
    title, context = get_str(item, "title", path), get_str(item, "context", path)
    used = {"type", "title", "context"}
    media_type = item.get("media_type") or "application/pdf"
    if not isinstance(media_type, str):
        raise fail(f"{path}.media_type", f"expected a string, got {kind_of(media_type)}")
    for key in ("data", "url", "file_id", "path"):
        if item.get(key) is not None:
            value = _source_str(item[key], f"{path}.{key}")
            part = m.LMDocumentPart(media_type=media_type, title=title, context=context)
            setattr(part, key, value)  # the one source given, by its name
            return part, used | {key, "media_type"}
    source = item.get("source")
    if isinstance(source, dict):
        if not source:
            raise fail(f"{path}.source", "must be non-empty")
        citations = item.get("citations") or {}
        if not isinstance(citations, dict):
            raise fail(f"{path}.citations", f"expected a JSON object, got {kind_of(citations)}")
        return m.LMDocumentPart(source=source, citations=citations, title=title, context=context), used | {"source", "citations"}
    if isinstance(source, str):
        source = _source_str(source, f"{path}.source")
        if source.startswith("data:"):
            media, data = _split_data_uri(source)
            part = m.LMDocumentPart(data=_source_str(data, f"{path}.source"), media_type=media, title=title, context=context)
        elif urlparse(source).scheme in {"http", "https"}:
            part = m.LMDocumentPart(url=source, media_type=_guess_media_type(source, media_type), title=title, context=context)
        else:
            part = m.LMDocumentPart(file_id=source, media_type=media_type, title=title, context=context)
        used.add("source")
        if item.get("media_type") in (None, part.media_type):
            used.add("media_type")  # a declared media type that the data URI or URL overrode is lost
        return part, used
    if source is not None:
        raise fail(f"{path}.source", f"expected a string or a JSON object, got {kind_of(source)}")
    raise fail(path, "a document block needs a source (or data, url, file_id or path)")


def _video_part(video: Any, path: str) -> tuple[m.LMVideoPart, set[str]]:
    if not isinstance(video, dict):
        raise fail(path, f"expected a JSON object, got {kind_of(video)}")
    media_type = video.get("media_type") or "video/mp4"
    if not isinstance(media_type, str):
        raise fail(f"{path}.media_type", f"expected a string, got {kind_of(media_type)}")
    for key in ("data", "url", "file_id", "path"):
        if video.get(key) is None:
            continue
        value = _source_str(video[key], f"{path}.{key}")
        if key == "data" and value.startswith("data:"):
            media, value = _split_data_uri(value)
            used = {"data", "media_type"} if video.get("media_type") in (None, media) else {"data"}
            return m.LMVideoPart(data=_source_str(value, f"{path}.data"), media_type=media), used
        part = m.LMVideoPart(media_type=media_type)
        setattr(part, key, value)  # the one source given, by its name
        return part, {key, "media_type"}
    raise fail(path, "a video block needs data, url, file_id or path")


# --- request tool calls, messages, tools ------------------------------------------------------------------


def _request_tool_call(value: Any, path: str) -> m.LMToolCallPart:
    """One ``tool_calls`` item of a request message, as DSPy's ``_tool_call_from_openai`` reads it."""
    if not isinstance(value, dict):
        raise fail(path, f"expected a tool call object, got {kind_of(value)}")
    function = value.get("function", {})
    provider_data: dict[str, Any] = {}
    if not isinstance(function, dict):
        provider_data["function"] = function
        function = {}
    name = function.get("name") or value.get("name")
    if not isinstance(name, str) or not name:
        raise fail(f"{path}.function.name", "a tool call needs a function name")
    # The top-level keys DSPy reads; any other (or an unread alternative) is kept in provider_data.
    used = {"function", "call_id" if value.get("call_id") else "id"}
    if not function.get("name"):
        used.add("name")
    raw = function.get("arguments")
    if raw is None:
        raw = value.get("arguments", {})
        used.add("arguments")
    if value.get("type", "function") == "function":
        used.add("type")
    args, diagnostics = _parse_arguments(raw, strict_object=False)
    call_id = value.get("call_id") or value.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise fail(f"{path}.id", f"expected a string, got {kind_of(call_id)}")
    provider_data.update(_drop_nulls({k: v for k, v in value.items() if k not in used}))
    function_extras = _drop_nulls({k: v for k, v in function.items() if k not in ("name", "arguments")})
    if function_extras:
        provider_data["function"] = function_extras
    provider_data.update(diagnostics)
    return m.LMToolCallPart(name=name, call_id=call_id, args=args, provider_data=provider_data)


def _request_tool_calls(value: Any, path: str) -> list[m.LMToolCallPart]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(path, f"expected a list of tool calls, got {kind_of(value)}")
    return [_request_tool_call(tc, f"{path}[{i}]") for i, tc in enumerate(value)]


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
            parts = [_coerce_part(p, f"{path}.parts[{i}]") for i, p in enumerate(raw_parts)]
        else:
            parts = parts_from_openai_content(rest.pop("content", None), f"{path}.content")
        if "tool_calls" in rest:
            parts.extend(_request_tool_calls(rest.pop("tool_calls"), f"{path}.tool_calls"))
        name = get_str(d, "name", path)
        rest.pop("name", None)
    extras = _drop_nulls(rest)
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


# --- config ------------------------------------------------------------------------------------------------

_KNOWN_CONFIG_KEYS = frozenset(
    {
        "temperature",
        "max_tokens",
        "top_p",
        "stop",
        "n",
        "logprobs",
        "response_format",
        "reasoning",
        "reasoning_effort",
        "tool_choice",
        "parallel_tool_calls",
        "cache",
        "rollout_id",
        "prompt_cache",
        "prompt_cache_key",
        "extensions",
    }
)


def _config_data(value: Any, path: str, *, str_field: str | None = None, bool_field: str | None = None) -> dict[str, Any]:
    """DSPy's ``_config_data``: None, an object, or the one scalar shorthand a group allows."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    if str_field is not None and isinstance(value, str):
        return {str_field: value}
    if bool_field is not None and isinstance(value, bool):
        return {bool_field: value}
    wanted = "an object" + (" or a string" if str_field else "") + (" or true/false" if bool_field else "")
    raise fail(path, f"expected {wanted}, got {kind_of(value)}")


def _group(data: dict[str, Any], allowed: frozenset[str], path: str, what: str) -> dict[str, Any]:
    extra = data.keys() - allowed
    if extra:
        raise fail(path, f"unknown field(s) {', '.join(sorted(map(str, extra)))} in {what}; expected only {', '.join(sorted(allowed))}")
    return data


def _reasoning(value: Any, effort: Any, path: str) -> m.LMReasoningConfig:
    data = _config_data(value, path, str_field="effort")
    if "reasoning_effort" in data and "effort" not in data:
        data["effort"] = data.pop("reasoning_effort")
    if effort is not _MISSING:
        data["effort"] = effort  # DSPy applies reasoning_effort even when it is null
    _group(data, frozenset({"effort", "max_tokens", "summary"}), path, "reasoning settings")
    return m.LMReasoningConfig(effort=get_str(data, "effort", path), max_tokens=get_int(data, "max_tokens", path), summary=get_str(data, "summary", path))


_TOOL_CHOICE_MODES: tuple[Literal["auto", "required", "none"], ...] = ("auto", "required", "none")


def _tool_choice(value: Any, parallel: Any, path: str) -> m.LMToolChoice:
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("function"), dict):
        # OpenAI's "call exactly this function"; DSPy: mode required with that one tool allowed
        data: dict[str, Any] = {"mode": "required", "allowed": [value["function"].get("name", "")]}
    else:
        data = _config_data(value, path, str_field="mode")
    if "parallel_tool_calls" in data and "parallel" not in data:
        data["parallel"] = data.pop("parallel_tool_calls")
    if parallel is not _MISSING:
        data["parallel"] = parallel
    _group(data, frozenset({"mode", "allowed", "parallel"}), path, "tool choice")
    mode = get_str(data, "mode", path, default="auto")
    if mode is None or mode not in _TOOL_CHOICE_MODES:
        raise fail(f"{path}.mode", f"expected auto, required or none, got {mode!r}")
    allowed = data.get("allowed")
    if allowed is not None and not (isinstance(allowed, list) and all(isinstance(a, str) for a in allowed)):
        raise fail(f"{path}.allowed", "expected a list of tool names")
    return m.LMToolChoice(mode=mode, allowed=allowed, parallel=get_bool(data, "parallel", path))


def _cache(value: Any, rollout_id: Any, path: str) -> m.LMCacheConfig:
    data = _config_data(value, path, bool_field="enabled")
    if rollout_id is not _MISSING:
        data["rollout_id"] = rollout_id
    _group(data, frozenset({"enabled", "rollout_id"}), path, "cache settings")
    rollout = data.get("rollout_id")
    if rollout is not None and (isinstance(rollout, bool) or not isinstance(rollout, (int, str))):
        raise fail(f"{path}.rollout_id", f"expected an integer or a string, got {kind_of(rollout)}")
    return m.LMCacheConfig(enabled=get_bool(data, "enabled", path), rollout_id=rollout)


def _prompt_cache(value: Any, key: Any, path: str) -> m.LMPromptCacheConfig:
    data = _config_data(value, path, bool_field="enabled")
    if "prompt_cache_key" in data and "key" not in data:
        data["key"] = data.pop("prompt_cache_key")
    if key is not _MISSING:
        data["key"] = key
    _group(data, frozenset({"enabled", "key"}), path, "prompt cache settings")
    return m.LMPromptCacheConfig(enabled=get_bool(data, "enabled", path), key=get_str(data, "key", path))


def config_from_kwargs(kwargs: dict[str, Any], path: str) -> m.LMConfig:
    """Call keyword arguments -> an ``LMConfig``, with the semantics of DSPy's ``LMConfig.from_kwargs``.

    ``reasoning_effort`` -> ``reasoning.effort``; ``tool_choice`` (``"auto"``, ``{"type": "function",
    "function": {"name": n}}`` -> required + allowed ``[n]``, or DSPy's object) with ``parallel_tool_calls``
    -> ``tool_choice``; ``cache`` / ``rollout_id`` -> ``cache``; ``prompt_cache`` / ``prompt_cache_key`` ->
    ``prompt_cache``; ``stop`` a string or a list; every other key into ``extensions`` (next to an explicit
    ``extensions`` object, which the keys override). Field paths are ``<path>.<key>``.
    """
    d = expect_object(kwargs, path)
    extensions = d.get("extensions") or {}
    if not isinstance(extensions, dict):
        raise fail(f"{path}.extensions", f"expected a JSON object, got {kind_of(extensions)}")
    extensions = dict(extensions)
    data: dict[str, Any] = {}
    for key, value in d.items():
        if key == "extensions":
            continue
        if key in _KNOWN_CONFIG_KEYS:
            data[key] = value
        else:
            extensions[key] = value
    config = m.LMConfig(
        temperature=get_float(data, "temperature", path),
        max_tokens=get_int(data, "max_tokens", path),
        top_p=get_float(data, "top_p", path),
        n=get_int(data, "n", path),
        response_format=data.get("response_format"),
        extensions=extensions,
    )
    stop = data.get("stop")
    if isinstance(stop, str):
        stop = [stop]  # OpenAI allows one stop string; DSPy's LMConfig holds a list
    config.stop = check_stop(stop, f"{path}.stop", "expected a string or a list of strings")
    config.logprobs = check_logprobs(data.get("logprobs"), f"{path}.logprobs")
    if "reasoning_effort" in data:
        effort = data["reasoning_effort"]
        if data.get("reasoning") is not None or effort is not None:
            config.reasoning = _reasoning(data.get("reasoning"), effort, f"{path}.reasoning")
    elif data.get("reasoning") is not None:
        config.reasoning = _reasoning(data["reasoning"], _MISSING, f"{path}.reasoning")
    parallel = data.get("parallel_tool_calls", _MISSING)
    if data.get("tool_choice") is not None or parallel not in (_MISSING, None):
        config.tool_choice = _tool_choice(data.get("tool_choice"), parallel, f"{path}.tool_choice")
    rollout_id = data.get("rollout_id", _MISSING)
    if data.get("cache") is not None or rollout_id not in (_MISSING, None):
        config.cache = _cache(data.get("cache"), rollout_id, f"{path}.cache")
    key = data.get("prompt_cache_key", _MISSING)
    if data.get("prompt_cache") is not None or key not in (_MISSING, None):
        config.prompt_cache = _prompt_cache(data.get("prompt_cache"), key, f"{path}.prompt_cache")
    return config


# --- requests -----------------------------------------------------------------------------------------------


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


# --- responses ----------------------------------------------------------------------------------------------


def usage_from_openai(value: Any, path: str) -> m.LMUsage | None:
    """An OpenAI ``usage`` object -> ``LMUsage`` as DSPy builds it (``LMUsage(**usage)``): the token counts by
    name with DSPy's alias filling (input <-> prompt, output <-> completion, total), and every other key
    (``prompt_tokens_details``, ``completion_tokens_details``, ...) kept verbatim as an extra field. None
    stays None."""
    if value is None:
        return None
    return usage_from_json(expect_object(value, path), path)


def _parse_repr(text: str, path: str) -> dict[str, Any]:
    """The ``str()`` of a LiteLLM/pydantic object (``Name(key=value, ...)``) -> a dict, by parsing, never
    evaluating: only calls with keyword arguments, literals, lists and dicts are accepted."""

    def convert(node: ast.AST) -> Any:
        if isinstance(node, ast.Call) and not node.args and all(k.arg for k in node.keywords):
            return {k.arg: convert(k.value) for k in node.keywords}
        if isinstance(node, ast.List):
            return [convert(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]  # a None key is a ** unpacking, which is refused below
            if len(keys) == len(node.keys):
                return {convert(k): convert(v) for k, v in zip(keys, node.values, strict=True)}
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (str, int, float, bool))):
            return node.value
        raise ValueError(f"unsupported syntax {type(node).__name__}")

    try:
        tree = ast.parse(text.strip(), mode="eval")
        result = convert(tree.body)
    except (SyntaxError, ValueError) as error:
        raise fail(path, f"a tool call given as text must be the str() of a tool-call object; could not read it: {error}") from None
    if not isinstance(tree.body, ast.Call) or not isinstance(result, dict):
        raise fail(path, "a tool call given as text must be the str() of a tool-call object such as ChatCompletionMessageToolCall(...)")
    return result


def tool_call_from_provider(value: Any, path: str) -> m.LMToolCallPart:
    """A tool call of a provider response (or of a legacy history output) -> ``LMToolCallPart``, as DSPy's
    ``provider_tool_call_to_part`` builds it: ``provider_data`` is the whole tool call object, plus
    ``raw_arguments`` / ``arguments_parse_error`` when the arguments are not a JSON object (``args`` is then
    ``{}``). A tool call without a function name is an error."""
    provider_extra: dict[str, Any] = {}
    if isinstance(value, str):
        # json.dumps(history, default=str) wrote the LiteLLM object as its str(); DSPy's model_dump of the
        # live object would have dropped its null fields, so they are dropped here too.
        provider_extra["repr"] = value
        value = _drop_nulls(_parse_repr(value, path))
        if isinstance(value.get("function"), dict):
            value["function"] = _drop_nulls(value["function"])
    d = expect_object(value, path)
    function = d.get("function", {})
    if not isinstance(function, dict):
        function = {}
    name = function.get("name") or d.get("name")
    if not isinstance(name, str) or not name:
        raise fail(f"{path}.function.name", "a tool call needs a function name")
    raw = function.get("arguments", d.get("arguments", "{}"))
    args, diagnostics = _parse_arguments(raw, strict_object=True)
    call_id = d.get("call_id") or d.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise fail(f"{path}.id", f"expected a string, got {kind_of(call_id)}")
    return m.LMToolCallPart(name=name, call_id=call_id, args=args, provider_data={**d, **provider_extra, **diagnostics})


_CITATION_FIELDS = ("cited_text", "text", "supported_text", "document_title", "title", "url")


def _first_of(d: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, Any]:
    """``d[k1] or d[k2] or ...`` as Python evaluates it, with the key the value came from."""
    for key in keys[:-1]:
        if d.get(key):
            return key, d[key]
    return keys[-1], d.get(keys[-1])


def citation_from_provider(value: Any, path: str) -> m.LMCitationPart:
    """A provider citation -> ``LMCitationPart`` as DSPy's ``citation_to_part`` builds it: text from
    ``cited_text``/``text``/``supported_text``, title from ``document_title``/``title``, ``url``, the other
    keys in ``metadata``. A losing candidate (a ``text`` next to a ``cited_text``) is kept in ``metadata``
    under its own key. Anything but an object is read as its text."""
    if not isinstance(value, dict):
        value = {"text": value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}
    for key in _CITATION_FIELDS:
        if value.get(key) is not None and not isinstance(value[key], str):
            raise fail(f"{path}.{key}", f"expected a string, got {kind_of(value[key])}")
    metadata = {k: v for k, v in value.items() if k not in _CITATION_FIELDS}
    text_key, text = _first_of(value, ("cited_text", "text", "supported_text"))
    title_key, title = _first_of(value, ("document_title", "title"))
    for key in _CITATION_FIELDS[:5]:
        if value.get(key) is not None and key not in (text_key, title_key):
            metadata[key] = value[key]  # a candidate DSPy did not pick: kept, not dropped
    url = value.get("url")
    if text is None and title is None and url is None:
        raise fail(path, "a citation needs at least one of cited_text, text, supported_text, document_title, title or url")
    return m.LMCitationPart(text=text, title=title, url=url, metadata=metadata)


def _response_content_parts(content: Any, path: str, unmapped: list[dict[str, Any]]) -> list[m.LMPart]:
    """DSPy's ``message_content_to_parts``: a string, or a list of typed blocks (skipped ones go to
    ``unmapped``)."""
    if isinstance(content, str):
        return [m.LMTextPart(text=content)]
    if not isinstance(content, list):
        raise fail(path, f"expected a string or a list of content blocks, got {kind_of(content)}")
    parts: list[m.LMPart] = []
    for i, item in enumerate(content):
        p = f"{path}[{i}]"
        kind = item.get("type") if isinstance(item, dict) else None
        kind = kind if isinstance(kind, str) or kind is None else repr(kind)  # a list or object names no part kind
        text = item.get("text") if isinstance(item, dict) else None
        if kind in ("text", "output_text", "input_text") or (text is not None and kind is None):
            parts.append(m.LMTextPart(text=_text_value(text, f"{p}.text")))
        elif kind in ("refusal", "output_refusal"):
            refusal = item.get("refusal") or item.get("text") or item.get("content")
            parts.append(m.LMRefusalPart(text=_text_value(refusal, f"{p}.refusal")))
        elif kind in ("image", "output_image", "image_url"):
            parts.append(_output_image(item, p))
        elif kind in ("audio", "output_audio", "input_audio"):
            parts.append(_output_audio(item, p))
        elif kind in ("file", "output_file", "input_file"):
            parts.append(_output_file(item, p))
        elif kind in ("tool_call", "function_call"):
            parts.append(tool_call_from_provider(item, p))
        else:
            unmapped.append({"position": i, "block": item})
    return parts


def _media_fields(data: dict[str, Any], path: str, default_media_type: str, data_keys: tuple[str, ...]) -> dict[str, Any]:
    media_type = data.get("media_type") or data.get("mime_type") or default_media_type
    b64 = next((data[k] for k in data_keys if data.get(k)), None)
    if b64 is not None:
        b64 = _source_str(b64, path)
        if b64.startswith("data:"):
            media_type, b64 = _split_data_uri(b64)
        return {"data": b64, "media_type": media_type}
    return {"media_type": media_type}


def _output_image(item: dict[str, Any], path: str) -> m.LMImagePart:
    image_url = item.get("image_url")
    if isinstance(image_url, dict):
        image_url = image_url.get("url")
    source = image_url or item.get("url")
    fields = _media_fields(item, path, "image/png", ("b64_json", "data"))
    detail = item.get("detail")
    if detail not in (None, "low", "high", "auto"):
        raise fail(f"{path}.detail", f"expected low, high or auto, got {detail!r}")
    if "data" in fields:
        return m.LMImagePart(detail=detail, **fields)
    if source is not None:
        return m.LMImagePart(url=_source_str(source, f"{path}.url"), detail=detail, **fields)
    if item.get("file_id") is not None:
        return m.LMImagePart(file_id=_source_str(item["file_id"], f"{path}.file_id"), detail=detail, **fields)
    raise fail(path, "an image output needs data, url or file_id")


def _output_audio(item: dict[str, Any], path: str) -> m.LMAudioPart:
    audio = item["audio"] if isinstance(item.get("audio"), dict) else item
    fields = _media_fields(audio, path, "audio/wav", ("data", "b64_json"))
    if "data" in fields:
        return m.LMAudioPart(**fields)
    if audio.get("url") is not None:
        return m.LMAudioPart(url=_source_str(audio["url"], f"{path}.url"), **fields)
    if audio.get("file_id") is not None:
        return m.LMAudioPart(file_id=_source_str(audio["file_id"], f"{path}.file_id"), **fields)
    raise fail(path, "an audio output needs data, url or file_id")


def _output_file(item: dict[str, Any], path: str) -> m.LMBinaryPart:
    file = item["file"] if isinstance(item.get("file"), dict) else item
    fields = _media_fields(file, path, "application/octet-stream", ("file_data", "data"))
    filename = get_str(file, "filename", path)
    if "data" in fields:
        return m.LMBinaryPart(filename=filename, **fields)
    if file.get("url") is not None:
        return m.LMBinaryPart(url=_source_str(file["url"], f"{path}.url"), filename=filename, **fields)
    file_id = file.get("file_id") or file.get("id")
    if file_id is not None:
        return m.LMBinaryPart(file_id=_source_str(file_id, f"{path}.file_id"), filename=filename, **fields)
    raise fail(path, "a file output needs data, url or file_id")


def _choice_citations(message: dict[str, Any], path: str) -> tuple[list[m.LMCitationPart], dict[str, Any] | None]:
    """DSPy's ``extract_citations_from_choice``: LiteLLM's ``provider_specific_fields.citations`` (a list of
    citations or of lists of them). Returns the parts and what is left of ``provider_specific_fields``.
    DSPy drops every citation when one cannot be read; then the whole field is kept instead."""
    fields = message.get("provider_specific_fields")
    if not isinstance(fields, dict):
        return [], fields
    raw = fields.get("citations")
    if not isinstance(raw, list):
        return [], fields
    flat = [c for item in raw for c in (item if isinstance(item, list) else [item])]
    try:
        parts = [citation_from_provider(c, f"{path}.provider_specific_fields.citations") for c in flat]
    except TraceInputError:
        return [], fields
    return parts, {k: v for k, v in fields.items() if k != "citations"}


_MESSAGE_READ = frozenset({"reasoning_content", "content", "tool_calls", "provider_specific_fields"})
_CHOICE_READ = frozenset({"message", "finish_reason", "logprobs"})


def _output(value: Any, path: str) -> m.LMOutput:
    """One choice -> one ``LMOutput``, as DSPy's ``choice_to_lm_output``: thinking, content, tool calls,
    citations, in that order; ``truncated`` when ``finish_reason`` is ``length``."""
    choice = expect_object(value, path)
    parts: list[m.LMPart] = []
    provider_data = _drop_nulls({k: v for k, v in choice.items() if k not in _CHOICE_READ and k != "text"})
    message = choice.get("message")
    if message is not None:
        p = f"{path}.message"
        msg = expect_object(message, p)
        unmapped: list[dict[str, Any]] = []
        reasoning = msg.get("reasoning_content")
        if reasoning:
            parts.append(m.LMThinkingPart(text=_text_value(reasoning, f"{p}.reasoning_content")))
        content = msg.get("content")
        if content:
            parts.extend(_response_content_parts(content, f"{p}.content", unmapped))
        tool_calls = msg.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            raise fail(f"{p}.tool_calls", f"expected a list of tool calls, got {kind_of(tool_calls)}")
        parts.extend(tool_call_from_provider(tc, f"{p}.tool_calls[{i}]") for i, tc in enumerate(tool_calls))
        citations, specific = _choice_citations(msg, p)
        parts.extend(citations)
        kept = {k: v for k, v in msg.items() if k not in _MESSAGE_READ}
        if specific:
            kept["provider_specific_fields"] = specific
        if kept.get("role") == "assistant":
            del kept["role"]
        kept = _drop_nulls(kept)
        if unmapped:
            kept["unmapped_content"] = unmapped
        if kept:
            provider_data["message"] = kept
        if choice.get("text") is not None:
            provider_data["text"] = choice["text"]
    else:
        text = choice.get("text")
        if text:
            parts.extend(_response_content_parts(text, f"{path}.text", []))
    finish_reason = get_str(choice, "finish_reason", path)
    return m.LMOutput(
        parts=parts,
        finish_reason=finish_reason,
        truncated=finish_reason == "length",
        logprobs=choice.get("logprobs"),
        provider_data=provider_data,
    )


_RESPONSE_READ = frozenset({"choices", "model", "usage", "id", "cache_hit"})


def response_from_openai(value: Any, path: str = "response", *, request_model: str | None = None) -> m.LMResponse:
    """An OpenAI Chat (or text) Completions response -> a model response, as DSPy's
    ``completion_to_lm_response`` builds it: one output per choice, in order; ``id`` -> ``response_id``;
    ``model`` (else ``request_model``); ``usage``; ``cache_hit`` (LiteLLM's). Other keys are kept in
    ``provider_data``. The cost is not in the payload (LiteLLM keeps it outside), so it stays None."""
    d = expect_object(value, path)
    choices = d.get("choices") or []
    if not isinstance(choices, list):
        raise fail(f"{path}.choices", f"expected a list, got {kind_of(choices)}")
    if not choices:
        raise fail(f"{path}.choices", "a response needs at least one choice")
    model = get_str(d, "model", path) or request_model
    return m.LMResponse(
        outputs=[_output(c, f"{path}.choices[{i}]") for i, c in enumerate(choices)],
        model=model,
        usage=usage_from_openai(d.get("usage"), f"{path}.usage"),
        cache_hit=get_bool(d, "cache_hit", path, default=False),
        response_id=get_str(d, "id", path),
        provider_data=_drop_nulls({k: v for k, v in d.items() if k not in _RESPONSE_READ}),
    )


def exchange_from_openai(value: Any, path: str = "") -> tuple[m.LMRequest, m.LMResponse]:
    """``{"request": <payload>, "response": <completion>}`` -> (request, response); the response's model
    defaults to the request's, as in DSPy."""
    d = expect_object(value, path or "exchange")
    extra = d.keys() - {"request", "response"}
    if extra:
        raise fail(path or "exchange", f"unknown field(s) {', '.join(sorted(map(str, extra)))}; expected only request and response")
    prefix = f"{path}." if path else ""
    for key in ("request", "response"):
        if d.get(key) is None:
            raise fail(f"{prefix}{key}", "is required")
    request = request_from_openai(d["request"], f"{prefix}request")
    return request, response_from_openai(d["response"], f"{prefix}response", request_model=request.model)


_KINDS: dict[str, m.SourceKind] = {"openai_request": "lm_request", "openai_response": "lm_response", "openai_exchange": "request_response"}


class _OpenAIChat(Source):
    format = "openai_chat"
    description = "an OpenAI chat-completions request or response, or {request, response}"

    def detect(self, value: Any) -> m.SourceKind | None:
        return _KINDS.get(detect_openai(value) or "")

    def read(self, value: Any, kind: m.SourceKind, options: ReadOptions) -> m.Trace:
        trace = m.Trace(source_kind=kind, source_format=self.format)
        if kind == "request_response":
            trace.request, trace.response = exchange_from_openai(value)
        elif kind == "lm_request":
            trace.request = request_from_openai(value)
        else:
            trace.response = response_from_openai(value)
        return trace


SOURCE = _OpenAIChat()
"""OpenAI chat-completions payloads."""
