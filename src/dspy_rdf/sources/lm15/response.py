"""An lm15 response dict (``response_to_dict``) -> ``LMResponse`` with one output (lm15 has one message):
finish reason, token log-probabilities, usage, adaptations and provider data."""

from __future__ import annotations

from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import check_keys, expect_object, fail, get_bool, get_float, get_json_object, get_list, get_str, kind_of
from dspy_rdf.sources.lm15.fields import LM15_KEY, get_choice, get_count, get_text, with_lm15
from dspy_rdf.sources.lm15.messages import message_from_lm15

__all__ = ["response_from_lm15"]

_FINISH_REASONS = ("stop", "length", "tool_call", "content_filter", "error")
_ADAPTATION_ACTIONS = ("dropped", "clamped", "substituted", "client_side", "satisfied", "defaulted")
_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "input_audio_tokens",
    "output_audio_tokens",
)
_RESPONSE_KEYS = frozenset(
    {"id", "model", "message", "finish_reason", "usage", "logprobs", "logprobs_complete", "adaptations"}
    | {"provider_data"}
)


def _usage(value: Any, path: str) -> m.LMUsage | None:
    if value is None:
        return None
    d = expect_object(value, path)
    check_keys(d, frozenset(_USAGE_FIELDS), path, "lm15 usage")
    counts = {key: get_count(d, key, path) for key in _USAGE_FIELDS}
    if all(v is None for v in counts.values()):
        return None  # lm15's Usage() means "nothing reported"
    if counts["total_tokens"] is None and counts["input_tokens"] is not None and counts["output_tokens"] is not None:
        counts["total_tokens"] = counts["input_tokens"] + counts["output_tokens"]  # as lm15's Usage computes it
    return m.LMUsage(
        input_tokens=counts["input_tokens"],
        output_tokens=counts["output_tokens"],
        total_tokens=counts["total_tokens"],
        cache_read_tokens=counts["cache_read_tokens"],
        cache_write_tokens=counts["cache_write_tokens"],
        reasoning_tokens=counts["reasoning_tokens"],
        input_audio_tokens=counts["input_audio_tokens"],
        output_audio_tokens=counts["output_audio_tokens"],
        # DSPy 3.3's LMUsage keeps prompt/completion as aliases of input/output.
        prompt_tokens=counts["input_tokens"],
        completion_tokens=counts["output_tokens"],
    )


def _logprobs(value: Any, path: str) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise fail(path, f"expected a list of token log-probabilities, got {kind_of(value)}")
    for i, raw in enumerate(value):
        _token_logprob(raw, f"{path}[{i}]", top=True)
    return value


def _token_logprob(value: Any, path: str, *, top: bool) -> None:
    d = expect_object(value, path)
    keys = frozenset({"token", "logprob", "bytes", "token_id"} | ({"top"} if top else set()))
    check_keys(d, keys, path, "a token log-probability")
    get_str(d, "token", path, required=True)
    if get_float(d, "logprob", path) is None:
        raise fail(f"{path}.logprob", "is required")
    get_count(d, "token_id", path)
    raw_bytes = d.get("bytes")
    if raw_bytes is not None and not (
        isinstance(raw_bytes, list)
        and all(isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in raw_bytes)
    ):
        raise fail(f"{path}.bytes", "expected a list of non-negative integers")
    for i, alternative in enumerate(get_list(d, "top", path) if top else ()):
        _token_logprob(alternative, f"{path}.top[{i}]", top=False)


def _adaptations(value: Any, path: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(path, f"expected a list of adaptations, got {kind_of(value)}")
    for i, raw in enumerate(value):
        p = f"{path}[{i}]"
        d = expect_object(raw, p)
        check_keys(d, frozenset({"field", "action", "reason", "asked", "applied"}), p, "an lm15 adaptation")
        get_text(d, "field", p, required=True)
        get_text(d, "reason", p, required=True)
        if get_choice(d, "action", p, _ADAPTATION_ACTIONS) is None:
            raise fail(f"{p}.action", "is required")
    return value


def response_from_lm15(value: Any, path: str = "response") -> m.LMResponse:
    """Turn an lm15 response dict (``response_to_dict``) into a model response with one output."""
    d = expect_object(value, path)
    check_keys(d, _RESPONSE_KEYS, path, "an lm15 response")
    if d.get("message") is None:
        raise fail(f"{path}.message", "is required")
    message = message_from_lm15(d["message"], f"{path}.message")
    if message.role != "assistant":
        raise fail(f"{path}.message.role", f"an lm15 response message has role 'assistant', got {message.role!r}")
    finish_reason = get_choice(d, "finish_reason", path, _FINISH_REASONS)
    if finish_reason is None:
        raise fail(f"{path}.finish_reason", "is required")
    complete = get_bool(d, "logprobs_complete", path, default=True)
    output_extras = dict(message.metadata.get(LM15_KEY, {}))
    if not complete:
        output_extras["logprobs_complete"] = False
    output = m.LMOutput(
        parts=message.parts,
        finish_reason=finish_reason,
        truncated=finish_reason == "length",
        logprobs=_logprobs(d.get("logprobs"), f"{path}.logprobs"),
        metadata=with_lm15({}, output_extras),
    )
    adaptations = _adaptations(d.get("adaptations"), f"{path}.adaptations")
    return m.LMResponse(
        outputs=[output],
        model=get_text(d, "model", path, required=True),
        usage=_usage(d.get("usage"), f"{path}.usage"),
        response_id=get_text(d, "id", path),
        provider_data=get_json_object(d, "provider_data", path),
        metadata=with_lm15({}, {"adaptations": adaptations} if adaptations else {}),
    )
