"""Which OpenAI Chat Completions payload a parsed JSON value is: a request, a response, or a
``{request, response}`` pair; answered from the value's shape alone, without reading it."""

from __future__ import annotations

from typing import Any

__all__ = ["detect_openai"]


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
