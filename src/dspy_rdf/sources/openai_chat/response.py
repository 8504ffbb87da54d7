"""An OpenAI Chat (or text) Completions response -> ``LMResponse``, as DSPy's ``completion_to_lm_response``
builds it: one output per choice (thinking, content blocks, tool calls, citations), the usage, and every key
DSPy does not read kept in ``provider_data``."""

from __future__ import annotations

import json
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import expect_object, fail, get_bool, get_str, kind_of
from dspy_rdf.sources.dspy33 import usage_from_json
from dspy_rdf.sources.openai_chat.tool_calls import tool_call_from_provider
from dspy_rdf.sources.openai_chat.values import drop_nulls, source_str, split_data_uri, text_value

__all__ = ["citation_from_provider", "response_from_openai", "usage_from_openai"]


def usage_from_openai(value: Any, path: str) -> m.LMUsage | None:
    """An OpenAI ``usage`` object -> ``LMUsage`` as DSPy builds it (``LMUsage(**usage)``): the token counts by
    name with DSPy's alias filling (input <-> prompt, output <-> completion, total), and every other key
    (``prompt_tokens_details``, ``completion_tokens_details``, ...) kept verbatim as an extra field. None
    stays None."""
    if value is None:
        return None
    return usage_from_json(expect_object(value, path), path)


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
            parts.append(m.LMTextPart(text=text_value(text, f"{p}.text")))
        elif kind in ("refusal", "output_refusal"):
            refusal = item.get("refusal") or item.get("text") or item.get("content")
            parts.append(m.LMRefusalPart(text=text_value(refusal, f"{p}.refusal")))
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
        b64 = source_str(b64, path)
        if b64.startswith("data:"):
            media_type, b64 = split_data_uri(b64)
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
        return m.LMImagePart(url=source_str(source, f"{path}.url"), detail=detail, **fields)
    if item.get("file_id") is not None:
        return m.LMImagePart(file_id=source_str(item["file_id"], f"{path}.file_id"), detail=detail, **fields)
    raise fail(path, "an image output needs data, url or file_id")


def _output_audio(item: dict[str, Any], path: str) -> m.LMAudioPart:
    audio = item["audio"] if isinstance(item.get("audio"), dict) else item
    fields = _media_fields(audio, path, "audio/wav", ("data", "b64_json"))
    if "data" in fields:
        return m.LMAudioPart(**fields)
    if audio.get("url") is not None:
        return m.LMAudioPart(url=source_str(audio["url"], f"{path}.url"), **fields)
    if audio.get("file_id") is not None:
        return m.LMAudioPart(file_id=source_str(audio["file_id"], f"{path}.file_id"), **fields)
    raise fail(path, "an audio output needs data, url or file_id")


def _output_file(item: dict[str, Any], path: str) -> m.LMBinaryPart:
    file = item["file"] if isinstance(item.get("file"), dict) else item
    fields = _media_fields(file, path, "application/octet-stream", ("file_data", "data"))
    filename = get_str(file, "filename", path)
    if "data" in fields:
        return m.LMBinaryPart(filename=filename, **fields)
    if file.get("url") is not None:
        return m.LMBinaryPart(url=source_str(file["url"], f"{path}.url"), filename=filename, **fields)
    file_id = file.get("file_id") or file.get("id")
    if file_id is not None:
        return m.LMBinaryPart(file_id=source_str(file_id, f"{path}.file_id"), filename=filename, **fields)
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
    provider_data = drop_nulls({k: v for k, v in choice.items() if k not in _CHOICE_READ and k != "text"})
    message = choice.get("message")
    if message is not None:
        p = f"{path}.message"
        msg = expect_object(message, p)
        unmapped: list[dict[str, Any]] = []
        reasoning = msg.get("reasoning_content")
        if reasoning:
            parts.append(m.LMThinkingPart(text=text_value(reasoning, f"{p}.reasoning_content")))
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
        kept = drop_nulls(kept)
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
        provider_data=drop_nulls({k: v for k, v in d.items() if k not in _RESPONSE_READ}),
    )
