"""One lm15 message dict (``message_to_dict``) -> a model message, and a request's ``system`` prompt -> the
first message, role ``system``. Each role carries only the kinds of parts lm15 allows it."""

from __future__ import annotations

from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import check_keys, expect_object, fail, get_list, get_str, kind_of
from dspy_rdf.sources.lm15.fields import LM15_KEY, continuation_states, with_lm15
from dspy_rdf.sources.lm15.parts import part_from_lm15

__all__ = ["message_from_lm15", "system_message"]

_ROLES = ("user", "assistant", "tool", "developer")
# What lm15's constructors allow where (types.py: _validate_message_parts, PromptPart).
_PROTOCOL_PARTS = frozenset({"tool_call", "tool_result", "thinking", "refusal", "citation"})


def _check_part_allowed(role: str, raw: Any, path: str) -> None:
    """Refuse what lm15 refuses: each role (and the system prompt) carries only its own kinds of parts."""
    if not isinstance(raw, dict):
        return  # the part reader says what is wrong with it
    kind = raw.get("type")
    if not isinstance(kind, str):
        return  # the part reader names what is wrong with its type
    if role == "tool" and kind != "tool_result":
        raise fail(f"{path}.type", f"an lm15 tool message carries only tool_result parts, got {kind!r}")
    if role == "assistant" and kind == "tool_result":
        raise fail(f"{path}.type", "an lm15 assistant message cannot carry a tool_result part")
    if role in ("user", "developer", "system"):
        if kind in _PROTOCOL_PARTS:
            raise fail(f"{path}.type", f"an lm15 {role} prompt cannot carry a {kind} part")
        if kind == "data" and raw.get("probabilities") is not None:
            raise fail(f"{path}.probabilities", "input data parts carry a value only (lm15 INV-052)")


def message_from_lm15(value: Any, path: str = "message") -> m.LMMessage:
    """Turn one lm15 message dict (``message_to_dict``) into a model message."""
    d = expect_object(value, path)
    check_keys(d, frozenset({"role", "parts", "continuation"}), path, "an lm15 message")
    role = get_str(d, "role", path, required=True)
    if role not in _ROLES:
        hint = "; a system prompt is Request.system in lm15" if role == "system" else ""
        raise fail(f"{path}.role", f"unknown lm15 role {role!r}; expected one of {', '.join(_ROLES)}{hint}")
    raw_parts = get_list(d, "parts", path, required=True)
    if not raw_parts:
        raise fail(f"{path}.parts", "an lm15 message needs at least one part")
    for i, raw in enumerate(raw_parts):
        _check_part_allowed(role, raw, f"{path}.parts[{i}]")
    continuation = continuation_states(d, path)
    return m.LMMessage(
        role=role,
        parts=[part_from_lm15(p, f"{path}.parts[{i}]") for i, p in enumerate(raw_parts)],
        metadata=with_lm15({}, {"continuation": continuation} if continuation else {}),
    )


def system_message(value: Any, path: str) -> m.LMMessage:
    """An lm15 ``Request.system`` (a string or a list of parts) -> a ``system`` message, noting which it was."""
    if isinstance(value, str):
        if not value:
            raise fail(path, "must not be empty")
        return m.LMMessage(role="system", parts=[m.LMTextPart(text=value)], metadata={LM15_KEY: {"system": "string"}})
    if not isinstance(value, list) or not value:
        raise fail(path, f"expected a string or a non-empty list of parts, got {kind_of(value)}")
    for i, raw in enumerate(value):
        _check_part_allowed("system", raw, f"{path}[{i}]")
    parts = [part_from_lm15(p, f"{path}[{i}]") for i, p in enumerate(value)]
    return m.LMMessage(role="system", parts=parts, metadata={LM15_KEY: {"system": "parts"}})
