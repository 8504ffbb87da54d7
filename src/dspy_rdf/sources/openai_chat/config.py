"""Call keyword arguments -> ``LMConfig``, as DSPy's ``LMConfig.from_kwargs`` reads them: the sampling
settings, reasoning, tool choice, cache and prompt cache (each from its object or its shorthand keys), and
every other key in ``extensions``."""

from __future__ import annotations

from typing import Any, Literal

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import expect_object, fail, get_bool, get_float, get_int, get_str, kind_of
from dspy_rdf.sources.dspy33 import check_logprobs, check_stop

__all__ = ["config_from_kwargs"]

_MISSING = object()
"""A key that is absent, which DSPy reads differently from a key set to null."""

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
