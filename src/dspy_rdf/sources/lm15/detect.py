"""Which lm15 object a parsed JSON value is. :func:`detect_lm15` answers only for JSON that carries a mark
DSPy 3.3 JSON and OpenAI JSON never have: a response's singular ``message`` with ``parts`` next to
``finish_reason``; a request's ``system`` key, lm15-only config knobs, a builtin tool; ``continuation``; a
``data`` part; a tool call's ``input``; a tool result's ``id``. JSON without such a mark (a text-only message, a
bare text or image part) reads the same either way and is left to the DSPy 3.3 reader: the answer is None. For
JSON known to be lm15 (a forced format, a live object), :func:`lm15_kind` answers by shape alone."""

from __future__ import annotations

from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.sources.lm15.config import CACHE_KEYS
from dspy_rdf.sources.lm15.parts import LM15_PART_TYPES

__all__ = ["detect_lm15", "lm15_kind"]

# lm15 Config knobs with no DSPy 3.3 slot (the config reader keeps them in LMConfig.extensions["lm15"]), so a
# config that sets one was written by lm15.
_CONFIG_KNOBS_WITHOUT_SLOT = (
    "top_k",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "service_tier",
    "user_id",
    "store",
)
_CONFIG_MARKS = frozenset({*_CONFIG_KNOBS_WITHOUT_SLOT, "probabilities"})


def _part_marked(part: Any) -> bool:
    """Whether a part dict has a field or kind that only lm15 writes."""
    if not isinstance(part, dict):
        return False
    kind = part.get("type")
    return (
        "continuation" in part
        or (kind == "data" and "value" in part)
        or (kind == "tool_call" and "input" in part)
        or (kind == "tool_result" and "id" in part)
    )


def _message_shaped(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and isinstance(message.get("role"), str)
        and isinstance(message.get("parts"), list)
        and "content" not in message
    )


def _message_marked(message: Any) -> bool:
    return "continuation" in message or any(_part_marked(p) for p in message["parts"])


def _config_marked(config: Any) -> bool:
    if not isinstance(config, dict):
        return False
    reasoning, cache = config.get("reasoning"), config.get("cache")
    return (
        bool(_CONFIG_MARKS & config.keys())
        or (isinstance(reasoning, dict) and "thinking_budget" in reasoning)
        or (isinstance(cache, dict) and bool(CACHE_KEYS & cache.keys()))
    )


def detect_lm15(value: Any) -> m.SourceKind | None:
    """Say which lm15 object a parsed JSON value is (``lm_request``, ``lm_response``, ``lm_message`` or
    ``lm_part``) when it carries a mark only lm15 writes, else None; never raises."""
    if not isinstance(value, dict):
        return None
    message = value.get("message")
    if "finish_reason" in value and _message_shaped(message) and not ({"outputs", "choices"} & value.keys()):
        return "lm_response"
    messages = value.get("messages")
    if "model" in value and isinstance(messages, list) and messages and all(map(_message_shaped, messages)):
        tools = value.get("tools")
        marked = (
            "system" in value
            or _config_marked(value.get("config"))
            or (isinstance(tools, list) and any(isinstance(t, dict) and t.get("type") == "builtin" for t in tools))
            or any(map(_message_marked, messages))
        )
        return "lm_request" if marked else None
    if _message_shaped(value):
        return "lm_message" if _message_marked(value) else None
    if isinstance(value.get("type"), str) and value.get("type") in LM15_PART_TYPES and _part_marked(value):
        return "lm_part"
    return None


def lm15_kind(value: Any) -> m.SourceKind | None:
    """Say which lm15 object a JSON value has the shape of, marks or not, for a value already known to be lm15
    JSON (a forced ``lm15`` format, or what :func:`lm15_to_json` returned); never raises. Unlike
    :func:`detect_lm15` it also answers for JSON that DSPy 3.3 could have written the same way."""
    if not isinstance(value, dict):
        return None
    if "finish_reason" in value and _message_shaped(value.get("message")):
        return "lm_response"
    messages = value.get("messages")
    if "model" in value and isinstance(messages, list) and all(map(_message_shaped, messages)):
        return "lm_request"
    if _message_shaped(value):
        return "lm_message"
    if isinstance(value.get("type"), str):
        return "lm_part"  # the reader names an unknown part type
    return None
