"""An lm15 ``Config`` dict -> ``LMConfig``: the sampling settings, stop, response format, tool choice,
reasoning and provider prompt cache in their canonical slots, each checked as lm15's constructors check it;
the knobs DSPy 3.3 has no slot for under ``extensions["lm15"]``."""

from __future__ import annotations

from typing import Any, Literal

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import check_keys, expect_object, fail, get_bool, get_float, get_int, get_json_object, kind_of
from dspy_rdf.sources.lm15.fields import LM15_KEY, get_choice, get_count, get_text, with_lm15

__all__ = ["CACHE_KEYS", "config_from_lm15"]

_TOOL_CHOICE_MODES: tuple[Literal["auto", "required", "none"], ...] = ("auto", "required", "none")
_REASONING_EFFORTS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
_REASONING_SUMMARIES = ("auto", "concise", "detailed")
_PROBABILITY_POLICIES = ("off", "if_available", "required")
_CONFIG_KEYS = frozenset(
    {"max_tokens", "temperature", "top_p", "top_k", "stop", "response_format", "tool_choice", "reasoning", "cache"}
    | {"seed", "frequency_penalty", "presence_penalty", "service_tier", "user_id", "store", "logprobs"}
    | {"probabilities", "extensions"}
)
CACHE_KEYS = frozenset({"mode", "retention", "key", "prefix_until_index", "prefix", "resource"})
"""The fields of lm15's provider prompt cache settings (``Config.cache``)."""


def _strings(value: Any, path: str) -> list[str]:
    """A list of non-empty strings; a bare string is one element, as lm15's reader takes it (INV-020)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise fail(path, f"expected a list of strings, got {kind_of(value)}")
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item:
            raise fail(f"{path}[{i}]", f"expected a non-empty string, got {kind_of(item)}")
    return list(items)


def _sub(d: dict[str, Any], key: str, path: str, keys: frozenset[str]) -> dict[str, Any] | None:
    if d.get(key) is None:
        return None
    sub = expect_object(d[key], f"{path}.{key}")
    check_keys(sub, keys, f"{path}.{key}", f"lm15 {key.replace('_', ' ')} settings")
    return sub


def _number(d: dict[str, Any], key: str, path: str, low: float, high: float) -> float | None:
    value = get_float(d, key, path)
    if value is not None and not (low <= value <= high):
        raise fail(f"{path}.{key}", f"must be in [{low:g}, {high:g}], got {value:g}")
    return value


def _response_format(d: dict[str, Any], path: str) -> dict[str, Any] | None:
    """lm15's two shapes (INV-050): ``{"type": "json_object"}`` or ``{"type": "json_schema", "schema", "name"?,
    "strict"?}``; provider-native spellings belong in extensions."""
    value = get_json_object(d, "response_format", path)
    if not value:
        return None
    p = f"{path}.response_format"
    shape = get_choice(value, "type", p, ("json_object", "json_schema"))
    if shape is None:
        raise fail(f"{p}.type", "is required")
    if shape == "json_object":
        check_keys(value, frozenset({"type"}), p, "a json_object response format")
        return value
    check_keys(value, frozenset({"type", "schema", "name", "strict"}), p, "a json_schema response format")
    if not isinstance(value.get("schema"), dict):
        raise fail(f"{p}.schema", f"expected a JSON object, got {kind_of(value.get('schema'))}")
    get_text(value, "name", p)
    get_bool(value, "strict", p)
    return value


def config_from_lm15(value: Any, path: str) -> m.LMConfig:
    """An lm15 config dict (None is the default config) -> an ``LMConfig``; the knobs DSPy 3.3 has no slot for
    are kept in ``extensions["lm15"]`` under their own names."""
    if value is None:
        return m.LMConfig()
    d = expect_object(value, path)
    check_keys(d, _CONFIG_KEYS, path, "an lm15 config")
    extensions = get_json_object(d, "extensions", path)
    if LM15_KEY in extensions:
        raise fail(f"{path}.extensions.{LM15_KEY}", "is reserved for the lm15 config fields DSPy 3.3 has no slot for")
    extras: dict[str, Any] = {
        "top_k": get_count(d, "top_k", path, minimum=1),
        "seed": get_int(d, "seed", path),
        "frequency_penalty": _number(d, "frequency_penalty", path, -2, 2),
        "presence_penalty": _number(d, "presence_penalty", path, -2, 2),
        "service_tier": get_text(d, "service_tier", path),
        "user_id": get_text(d, "user_id", path),
        "store": get_bool(d, "store", path),
        "probabilities": get_choice(d, "probabilities", path, _PROBABILITY_POLICIES),
    }
    stop = _strings(d["stop"], f"{path}.stop") if d.get("stop") is not None else []
    config = m.LMConfig(
        max_tokens=get_count(d, "max_tokens", path, minimum=1),
        temperature=_number(d, "temperature", path, 0, 2),
        top_p=_number(d, "top_p", path, 0, 1),
        stop=stop or None,  # lm15's empty stop tuple means none
        logprobs=get_count(d, "logprobs", path),
        response_format=_response_format(d, path),
    )
    if (t := _sub(d, "tool_choice", path, frozenset({"mode", "allowed", "parallel"}))) is not None:
        config.tool_choice = _tool_choice(t, f"{path}.tool_choice")
    if (r := _sub(d, "reasoning", path, frozenset({"effort", "thinking_budget", "summary"}))) is not None:
        config.reasoning = _reasoning(r, f"{path}.reasoning")
    if (c := _sub(d, "cache", path, CACHE_KEYS)) is not None:
        config.prompt_cache, extras["cache"] = _cache(c, f"{path}.cache")
    extras = {k: v for k, v in extras.items() if v is not None}
    config.extensions = with_lm15(dict(extensions), extras)
    return config


def _tool_choice(d: dict[str, Any], path: str) -> m.LMToolChoice:
    allowed = _strings(d["allowed"], f"{path}.allowed") if d.get("allowed") is not None else []
    mode = get_choice(d, "mode", path, _TOOL_CHOICE_MODES, default="auto")
    if mode is None:  # a null mode: the default stands only for an absent one
        raise fail(f"{path}.mode", "expected one of auto, required, none, got None")
    tool_choice = m.LMToolChoice(mode=mode, allowed=allowed or None, parallel=get_bool(d, "parallel", path))
    if tool_choice.mode == "none" and (allowed or tool_choice.parallel is not None):
        raise fail(path, "an lm15 tool choice of mode none takes no allowed tools and no parallel setting")
    return tool_choice


def _reasoning(d: dict[str, Any], path: str) -> m.LMReasoningConfig:
    reasoning = m.LMReasoningConfig(
        effort=get_choice(d, "effort", path, _REASONING_EFFORTS),
        max_tokens=get_count(d, "thinking_budget", path, minimum=1),
        summary=get_choice(d, "summary", path, _REASONING_SUMMARIES),
    )
    if reasoning.effort is None:
        raise fail(f"{path}.effort", "is required")
    if reasoning.effort == "off" and (reasoning.max_tokens or reasoning.summary):
        raise fail(path, "lm15 reasoning effort off takes no thinking_budget and no summary")
    return reasoning


def _cache(d: dict[str, Any], path: str) -> tuple[m.LMPromptCacheConfig, dict[str, Any] | None]:
    """lm15's provider prompt cache -> the prompt cache config, and its settings that have no slot (None when
    there are none)."""
    mode = get_choice(d, "mode", path, ("auto", "off"), default="auto")
    prompt_cache = m.LMPromptCacheConfig(enabled=mode == "auto", key=get_text(d, "key", path))
    settings = {
        "retention": get_choice(d, "retention", path, ("short", "long")),
        "prefix": get_choice(d, "prefix", path, ("stable", "history")),
        "prefix_until_index": get_count(d, "prefix_until_index", path),
        "resource": get_text(d, "resource", path),
    }
    kept = {k: v for k, v in settings.items() if v is not None} or None
    if mode == "off" and (kept or prompt_cache.key):
        raise fail(path, "lm15 cache mode off takes no retention, key, prefix, prefix_until_index or resource")
    if kept is not None and "prefix" in kept and "prefix_until_index" in kept:
        raise fail(path, "lm15 cache takes prefix or prefix_until_index, not both")
    return prompt_cache, kept
