"""One lm15 part dict (``part_to_dict``) -> a model part: text, the five media kinds, tool calls and
results, thinking, refusals, citations, and data parts (kept as their JSON text). Unknown kinds and fields
are rejected by name, and lm15's own invariants for each kind are checked."""

from __future__ import annotations

import json
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import check_keys, expect_object, fail, get_bool, get_json_object, get_list, get_str
from dspy_rdf.sources.lm15.fields import LM15_KEY, continuation_states, get_choice, get_text, with_lm15

__all__ = ["LM15_PART_TYPES", "part_from_lm15"]

_MEDIA_KINDS = ("image", "audio", "video", "document", "binary")
_SOURCES = ("data", "url", "file_id", "path")

_PART_KEYS: dict[str, frozenset[str]] = {
    "text": frozenset({"type", "text", "continuation"}),
    **{kind: frozenset({"type", "media_type", *_SOURCES, "continuation"}) for kind in _MEDIA_KINDS},
    "tool_call": frozenset({"type", "id", "name", "input", "continuation"}),
    "tool_result": frozenset({"type", "id", "name", "content", "is_error", "continuation"}),
    "thinking": frozenset({"type", "text", "continuation"}),
    "refusal": frozenset({"type", "text", "continuation"}),
    "citation": frozenset({"type", "text", "url", "title", "continuation"}),
    "data": frozenset({"type", "value", "probabilities", "method", "continuation"}),
}
_PART_KEYS["image"] = _PART_KEYS["image"] | {"detail"}

LM15_PART_TYPES: tuple[str, ...] = tuple(_PART_KEYS)
"""Every lm15 part kind, in the order of lm15's ``PartType``."""

# What lm15's ToolResultPart refuses to contain (types.py: ToolResultPart).
_TOOL_RESULT_FORBIDDEN = frozenset({"tool_call", "tool_result", "thinking", "refusal"})
_JUDGMENT_METHODS = ("provider_classification", "candidate_sequence_likelihood")


def part_from_lm15(value: Any, path: str = "part") -> m.LMPart:
    """Turn one lm15 part dict (``part_to_dict``) into a model part; unknown kinds are rejected by name."""
    d = expect_object(value, path)
    kind = d.get("type")
    if not isinstance(kind, str) or (keys := _PART_KEYS.get(kind)) is None:
        raise fail(f"{path}.type", f"unknown lm15 part type {kind!r}; expected one of {', '.join(LM15_PART_TYPES)}")
    check_keys(d, keys, path, f"an lm15 {kind} part")
    continuation = continuation_states(d, path)
    extras: dict[str, Any] = {"continuation": continuation} if continuation else {}
    metadata = with_lm15({}, extras)
    if kind == "text":
        return m.LMTextPart(text=get_str(d, "text", path, required=True), metadata=metadata)
    if kind == "refusal":
        return m.LMRefusalPart(text=get_text(d, "text", path, required=True), metadata=metadata)
    if kind == "thinking":
        text = get_str(d, "text", path, required=True)
        return m.LMThinkingPart(text=text, redacted=text == "" and bool(continuation), metadata=metadata)
    if kind == "citation":
        part = m.LMCitationPart(
            text=get_text(d, "text", path), title=get_text(d, "title", path), url=get_text(d, "url", path), metadata=metadata
        )
        if part.text is None and part.title is None and part.url is None:
            raise fail(path, "an lm15 citation part needs at least one of text, title or url")
        return part
    if kind == "tool_call":
        return m.LMToolCallPart(
            call_id=get_text(d, "id", path, required=True),
            name=get_text(d, "name", path, required=True),
            args=get_json_object(d, "input", path),
            metadata=metadata,
        )
    if kind == "tool_result":
        return m.LMToolResultPart(
            call_id=get_text(d, "id", path, required=True),
            name=get_text(d, "name", path),
            content=_tool_result_content(d, path),
            is_error=get_bool(d, "is_error", path, default=False),
            metadata=metadata,
        )
    if kind == "data":
        return _data_part(d, path, extras)
    return _media_part(kind, d, path, metadata)


def _media_part(kind: str, d: dict[str, Any], path: str, metadata: dict[str, Any]) -> m.LMPart:
    fields: dict[str, Any] = {"media_type": get_text(d, "media_type", path, required=True)}
    sources = {key: get_text(d, key, path) for key in _SOURCES}
    given = [key for key, source in sources.items() if source is not None]
    if len(given) != 1:
        raise fail(path, f"an lm15 {kind} part needs exactly one of data, url, file_id or path, got {len(given)}")
    fields.update(sources)
    if kind == "image":
        fields["detail"] = get_choice(d, "detail", path, ("low", "high", "auto"))
    return m.PART_CLASSES[kind](metadata=metadata, **fields)


def _tool_result_content(d: dict[str, Any], path: str) -> list[m.LMPart]:
    raw = d.get("content")
    if isinstance(raw, str) and raw:
        return [m.LMTextPart(text=raw)]  # lm15's reader takes a non-empty string as one text part
    content = []
    for i, item in enumerate(get_list(d, "content", path, required=True)):
        p = f"{path}.content[{i}]"
        kind = item.get("type") if isinstance(item, dict) else None
        if isinstance(kind, str) and kind in _TOOL_RESULT_FORBIDDEN:
            raise fail(f"{p}.type", f"an lm15 tool result cannot contain a {kind} part")
        if kind == "data" and item.get("probabilities") is not None:
            raise fail(f"{p}.probabilities", "input data parts carry a value only (lm15 INV-052)")
        content.append(part_from_lm15(item, p))
    if not content:
        raise fail(f"{path}.content", "an lm15 tool result needs at least one part")
    return content


def _data_part(d: dict[str, Any], path: str, extras: dict[str, Any]) -> m.LMTextPart:
    if "value" not in d:
        raise fail(f"{path}.value", "is required (null is a value; absence is not)")
    try:
        text = json.dumps(d["value"], ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise fail(f"{path}.value", f"is not a JSON value: {exc}") from None
    probabilities = d.get("probabilities")
    method = get_choice(d, "method", path, _JUDGMENT_METHODS)
    if probabilities is not None:
        _check_probabilities(probabilities, f"{path}.probabilities")
    if (method is None) != (probabilities is None):
        raise fail(path, "an lm15 data part has method exactly when it has probabilities")
    lm15: dict[str, Any] = {"type": "data"}
    if probabilities is not None:
        lm15.update(probabilities=probabilities, method=method)
    return m.LMTextPart(text=text, metadata={LM15_KEY: {**lm15, **extras}})


def _check_probabilities(value: Any, path: str) -> None:
    if not isinstance(value, dict) or not value:
        raise fail(path, "expected a non-empty object of field -> {key: probability}")
    for name, dist in value.items():
        if not isinstance(dist, dict) or not dist:
            raise fail(f"{path}.{name}", "expected a non-empty object of key -> probability")
        for key, prob in dist.items():
            if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not (0.0 <= prob <= 1.0):
                raise fail(f"{path}.{name}.{key}", f"expected a probability in [0, 1], got {prob!r}")
