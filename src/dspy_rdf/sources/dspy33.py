"""DSPy 3.3 JSON (``model_dump(mode="json")``) and DSPy 3.3 objects <-> the canonical model.

:func:`trace_from_json` reads an ``LMHistoryEntry``, ``LMRequest``, ``LMResponse`` or a list of history
entries, checks every field, and rejects unknown part kinds and unknown fields by name (DSPy's models
forbid extras, except ``LMUsage`` and ``LMHistoryEntry``, whose extras are kept in ``extra_fields``).
:func:`trace_to_json` writes exactly what DSPy 3.3's ``model_dump(mode="json")`` writes for the same
object, so a round trip gives back equal JSON. Neither needs DSPy installed; :func:`trace_from_dspy` and
:func:`trace_to_dspy` convert live DSPy objects.
"""

from __future__ import annotations

from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import (
    check_datetime,
    check_keys,
    expect_object,
    fail,
    get_bool,
    get_float,
    get_int,
    get_json_object,
    get_list,
    get_str,
    kind_of,
)
from dspy_rdf.canonical.schema_tables import CLASS_SLOTS
from dspy_rdf.sources.base import ReadOptions, Source

__all__ = ["ENTRY_DERIVED", "ENTRY_FIELDS", "SOURCE", "detect_kind", "dspy33_types", "is_typed_entry", "trace_from_dspy", "trace_from_json", "trace_to_dspy", "trace_to_json"]

_SOURCE_KEYS = ("media_type", "data", "url", "file_id", "path")


# --- reading -----------------------------------------------------------------------------------------


_DSPY_NAMES = {"part_type": "type", "tool_type": "type"}
"""Slots that DSPy 3.3 names otherwise (the schema avoids bare ``type`` and ``id``)."""
_NOT_DSPY = frozenset({"position", "answers", "extra_fields"})
"""Slots dspy-rdf adds to DSPy's classes: a list item's place, the derived link from a tool result to its call, and
the keys of an entry that DSPy keeps beside its fields."""


def _dspy_keys(cls: str, **renamed: str) -> frozenset[str]:
    """The keys of DSPy 3.3's JSON for a class of the schema: its slots under DSPy's names."""
    names = {**_DSPY_NAMES, **renamed}
    return frozenset(names.get(slot, slot) for slot in CLASS_SLOTS[cls] if slot not in _NOT_DSPY)


_PART_KEYS: dict[str, frozenset[str]] = {
    kind: _dspy_keys(cls.__name__, call_id="id") if kind == "tool_call" else _dspy_keys(cls.__name__)
    for kind, cls in m.PART_CLASSES.items()
}
"""The keys of each kind of part (a tool call's ``call_id`` is DSPy's ``id``; a tool result's keeps its name)."""


def part_from_json(value: Any, path: str) -> m.LMPart:
    """Turn one DSPy part dict into a model part; unknown kinds are rejected by name."""
    d = expect_object(value, path)
    kind = d.get("type")
    if not isinstance(kind, str) or (keys := _PART_KEYS.get(kind)) is None:
        raise fail(f"{path}.type", f"unknown part type {kind!r}; expected one of {', '.join(m.PART_TYPES)}")
    check_keys(d, keys, path, f"a {kind} part")
    metadata = get_json_object(d, "metadata", path)
    if kind == "text":
        return m.LMTextPart(text=get_str(d, "text", path, required=True), metadata=metadata)
    if kind == "tool_call":
        return m.LMToolCallPart(
            name=get_str(d, "name", path, required=True),
            call_id=get_str(d, "id", path),
            args=get_json_object(d, "args", path),
            provider_data=get_json_object(d, "provider_data", path),
            metadata=metadata,
        )
    if kind == "tool_result":
        return m.LMToolResultPart(
            call_id=get_str(d, "call_id", path),
            name=get_str(d, "name", path),
            content=[part_from_json(p, f"{path}.content[{i}]") for i, p in enumerate(get_list(d, "content", path))],
            is_error=get_bool(d, "is_error", path, default=False),
            provider_data=get_json_object(d, "provider_data", path),
            metadata=metadata,
        )
    if kind == "thinking":
        return m.LMThinkingPart(
            text=get_str(d, "text", path, required=True), redacted=get_bool(d, "redacted", path, default=False), metadata=metadata
        )
    if kind == "refusal":
        return m.LMRefusalPart(text=get_str(d, "text", path, required=True), metadata=metadata)
    if kind == "citation":
        part = m.LMCitationPart(
            text=get_str(d, "text", path), title=get_str(d, "title", path), url=get_str(d, "url", path), metadata=metadata
        )
        if part.text is None and part.title is None and part.url is None:
            raise fail(path, "a citation part needs at least one of text, title or url")
        return part
    cls = m.PART_CLASSES[kind]
    fields: dict[str, Any] = {key: get_str(d, key, path) for key in _SOURCE_KEYS}
    if fields["media_type"] is None:
        del fields["media_type"]  # the class default, as in DSPy
    if kind == "document":
        source = d.get("source")
        if source is not None and not isinstance(source, dict):
            raise fail(f"{path}.source", f"expected a JSON object, got {kind_of(source)}")
        fields.update(
            source=source,
            citations=get_json_object(d, "citations", path),
            title=get_str(d, "title", path),
            context=get_str(d, "context", path),
        )
    elif kind == "image":
        detail = get_str(d, "detail", path)
        if detail not in (None, "low", "high", "auto"):
            raise fail(f"{path}.detail", f"expected low, high or auto, got {detail!r}")
        fields["detail"] = detail
    elif kind == "binary":
        fields["filename"] = get_str(d, "filename", path)
    return cls(metadata=metadata, **fields)


def _parts(d: dict[str, Any], path: str, *, required: bool = False) -> list[m.LMPart]:
    return [part_from_json(p, f"{path}.parts[{i}]") for i, p in enumerate(get_list(d, "parts", path, required=required))]


_MESSAGE_KEYS = _dspy_keys("LMMessage")
_TOOL_KEYS = _dspy_keys("LMToolSpec")
_CONFIG_KEYS = _dspy_keys("LMConfig")
_REQUEST_KEYS = _dspy_keys("LMRequest")
_OUTPUT_KEYS = _dspy_keys("LMOutput")
_RESPONSE_KEYS = _dspy_keys("LMResponse")
ENTRY_FIELDS = _dspy_keys("LMHistoryEntry")
# LMHistoryEntry drops these derived keys on input (see its drop_derived_fields validator).
ENTRY_DERIVED = frozenset({"outputs", "usage", "cost", "model", "prompt", "messages", "kwargs", "response_model"})


def message_from_json(value: Any, path: str) -> m.LMMessage:
    """Turn one DSPy ``LMMessage`` dict into a model message."""
    d = expect_object(value, path)
    check_keys(d, _MESSAGE_KEYS, path, "a message")
    return m.LMMessage(
        role=get_str(d, "role", path, required=True),
        parts=_parts(d, path, required=True),
        name=get_str(d, "name", path),
        metadata=get_json_object(d, "metadata", path),
    )


def _tool_spec(value: Any, path: str) -> m.LMToolSpec:
    d = expect_object(value, path)
    check_keys(d, _TOOL_KEYS, path, "a tool spec")
    tool_type = get_str(d, "type", path, default="function")
    if tool_type != "function":
        raise fail(f"{path}.type", f"expected 'function', got {tool_type!r}")
    return m.LMToolSpec(
        name=get_str(d, "name", path, required=True),
        description=get_str(d, "description", path),
        parameters=get_json_object(d, "parameters", path),
        strict=get_bool(d, "strict", path),
        metadata=get_json_object(d, "metadata", path),
        provider_data=get_json_object(d, "provider_data", path),
    )


def _sub(d: dict[str, Any], key: str, path: str, keys: frozenset[str]) -> dict[str, Any] | None:
    value = d.get(key)
    if value is None:
        return None
    sub = expect_object(value, f"{path}.{key}")
    check_keys(sub, keys, f"{path}.{key}", key.replace("_", " ") + " settings")
    return sub


def check_stop(stop: Any, path: str, expected: str) -> list[str] | None:
    """A config's ``stop``: a list of strings or None (``expected`` says what the caller accepts)."""
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise fail(path, expected)
    return stop


def check_logprobs(logprobs: Any, path: str) -> bool | int | None:
    """A config's ``logprobs``: a boolean, a count or None."""
    if logprobs is not None and not isinstance(logprobs, (bool, int)):
        raise fail(path, f"expected a boolean or an integer, got {kind_of(logprobs)}")
    return logprobs


def _config(value: Any, path: str) -> m.LMConfig:
    if value is None:
        return m.LMConfig()
    d = expect_object(value, path)
    check_keys(d, _CONFIG_KEYS, path, "a config")
    config = m.LMConfig(
        temperature=get_float(d, "temperature", path),
        max_tokens=get_int(d, "max_tokens", path),
        top_p=get_float(d, "top_p", path),
        n=get_int(d, "n", path),
        response_format=d.get("response_format"),
        extensions=get_json_object(d, "extensions", path),
    )
    config.stop = check_stop(d.get("stop"), f"{path}.stop", "expected a list of strings")
    config.logprobs = check_logprobs(d.get("logprobs"), f"{path}.logprobs")
    if (r := _sub(d, "reasoning", path, frozenset({"effort", "max_tokens", "summary"}))) is not None:
        p = f"{path}.reasoning"
        config.reasoning = m.LMReasoningConfig(
            effort=get_str(r, "effort", p), max_tokens=get_int(r, "max_tokens", p), summary=get_str(r, "summary", p)
        )
    if (t := _sub(d, "tool_choice", path, frozenset({"mode", "allowed", "parallel"}))) is not None:
        p = f"{path}.tool_choice"
        mode = get_str(t, "mode", p, default="auto")
        match mode:  # a match, unlike `in`, narrows the string to the mode literals
            case "auto" | "required" | "none":
                pass
            case _:
                raise fail(f"{p}.mode", f"expected auto, required or none, got {mode!r}")
        allowed = t.get("allowed")
        if allowed is not None and not (isinstance(allowed, list) and all(isinstance(a, str) for a in allowed)):
            raise fail(f"{p}.allowed", "expected a list of tool names")
        config.tool_choice = m.LMToolChoice(mode=mode, allowed=allowed, parallel=get_bool(t, "parallel", p))
    if (c := _sub(d, "cache", path, frozenset({"enabled", "rollout_id"}))) is not None:
        p = f"{path}.cache"
        rollout_id = c.get("rollout_id")
        if rollout_id is not None and (isinstance(rollout_id, bool) or not isinstance(rollout_id, (int, str))):
            raise fail(f"{p}.rollout_id", f"expected an integer or a string, got {kind_of(rollout_id)}")
        config.cache = m.LMCacheConfig(enabled=get_bool(c, "enabled", p), rollout_id=rollout_id)
    if (pc := _sub(d, "prompt_cache", path, frozenset({"enabled", "key"}))) is not None:
        p = f"{path}.prompt_cache"
        config.prompt_cache = m.LMPromptCacheConfig(enabled=get_bool(pc, "enabled", p), key=get_str(pc, "key", p))
    return config


def request_from_json(value: Any, path: str = "request") -> m.LMRequest:
    """Turn a DSPy ``LMRequest`` dict into a model request."""
    d = expect_object(value, path)
    check_keys(d, _REQUEST_KEYS, path, "a request")
    return m.LMRequest(
        model=get_str(d, "model", path, required=True),
        messages=[message_from_json(x, f"{path}.messages[{i}]") for i, x in enumerate(get_list(d, "messages", path, required=True))],
        tools=[_tool_spec(x, f"{path}.tools[{i}]") for i, x in enumerate(get_list(d, "tools", path))],
        config=_config(d.get("config"), f"{path}.config"),
        metadata=get_json_object(d, "metadata", path),
    )


def usage_from_json(value: Any, path: str) -> m.LMUsage | None:
    """A DSPy ``LMUsage`` dict (extras kept), with DSPy's alias filling (prompt/input, completion/output, total)."""
    if value is None:
        return None
    d = expect_object(value, path)
    # Each count by name, in the order of m.USAGE_TOKEN_FIELDS: mypy checks a `**` dict against every parameter.
    usage = m.LMUsage(
        input_tokens=get_int(d, "input_tokens", path),
        output_tokens=get_int(d, "output_tokens", path),
        total_tokens=get_int(d, "total_tokens", path),
        prompt_tokens=get_int(d, "prompt_tokens", path),
        completion_tokens=get_int(d, "completion_tokens", path),
        reasoning_tokens=get_int(d, "reasoning_tokens", path),
        cache_read_tokens=get_int(d, "cache_read_tokens", path),
        cache_write_tokens=get_int(d, "cache_write_tokens", path),
        input_audio_tokens=get_int(d, "input_audio_tokens", path),
        output_audio_tokens=get_int(d, "output_audio_tokens", path),
        details=get_json_object(d, "details", path),
    )
    extras = {k: v for k, v in d.items() if k not in m.USAGE_TOKEN_FIELDS and k != "details"}
    if "metadata" in extras:
        usage.metadata = extras.pop("metadata")
    usage.extra_fields = extras
    # The same alias filling as DSPy's LMUsage.fill_aliases, so sparse input reads as DSPy reads it.
    if usage.input_tokens is None and usage.prompt_tokens is not None:
        usage.input_tokens = usage.prompt_tokens
    if usage.output_tokens is None and usage.completion_tokens is not None:
        usage.output_tokens = usage.completion_tokens
    if usage.prompt_tokens is None and usage.input_tokens is not None:
        usage.prompt_tokens = usage.input_tokens
    if usage.completion_tokens is None and usage.output_tokens is not None:
        usage.completion_tokens = usage.output_tokens
    if usage.total_tokens is None and usage.input_tokens is not None and usage.output_tokens is not None:
        usage.total_tokens = usage.input_tokens + usage.output_tokens
    return usage


def response_from_json(value: Any, path: str = "response") -> m.LMResponse:
    """Turn a DSPy ``LMResponse`` dict into a model response."""
    d = expect_object(value, path)
    check_keys(d, _RESPONSE_KEYS, path, "a response")
    outputs = []
    for i, raw in enumerate(get_list(d, "outputs", path, required=True)):
        p = f"{path}.outputs[{i}]"
        o = expect_object(raw, p)
        check_keys(o, _OUTPUT_KEYS, p, "an output")
        outputs.append(
            m.LMOutput(
                parts=_parts(o, p),
                finish_reason=get_str(o, "finish_reason", p),
                truncated=get_bool(o, "truncated", p, default=False),
                logprobs=o.get("logprobs"),
                provider_data=get_json_object(o, "provider_data", p),
                metadata=get_json_object(o, "metadata", p),
            )
        )
    if not outputs:
        raise fail(f"{path}.outputs", "a response needs at least one output")
    return m.LMResponse(
        outputs=outputs,
        model=get_str(d, "model", path),
        usage=usage_from_json(d.get("usage"), f"{path}.usage"),
        cost=get_float(d, "cost", path),
        cache_hit=get_bool(d, "cache_hit", path, default=False),
        response_id=get_str(d, "response_id", path),
        provider_data=get_json_object(d, "provider_data", path),
        metadata=get_json_object(d, "metadata", path),
    )


def entry_from_json(value: Any, path: str = "") -> m.LMHistoryEntry:
    """Turn a DSPy ``LMHistoryEntry`` dict into a model history entry."""
    d = expect_object(value, path or "entry")
    prefix = f"{path}." if path else ""
    p = path or "entry"
    return m.LMHistoryEntry(
        request=request_from_json(_required(d, "request", p), f"{prefix}request"),
        response=response_from_json(_required(d, "response", p), f"{prefix}response"),
        timestamp=check_datetime(get_str(d, "timestamp", p, required=True), f"{prefix}timestamp"),
        uuid=get_str(d, "uuid", p, required=True),
        model_type=get_str(d, "model_type", p),
        extra_fields={k: v for k, v in d.items() if k not in ENTRY_FIELDS and k not in ENTRY_DERIVED},
    )


def _required(d: dict[str, Any], key: str, path: str) -> Any:
    if d.get(key) is None:
        raise fail(f"{path}.{key}", "is required")
    return d[key]


def detect_kind(value: Any) -> m.SourceKind:
    """Say which DSPy 3.3 object a JSON value is, or raise :class:`TraceInputError`."""
    if isinstance(value, list):
        return "lm_history"
    if isinstance(value, dict):
        if "request" in value and "response" in value:
            return "lm_history_entry"
        if "messages" in value and "model" in value:
            return "lm_request"
        if "outputs" in value:
            return "lm_response"
        if "role" in value and "parts" in value:
            return "lm_message"
        if isinstance(value.get("type"), str) and value.get("type") in m.PART_CLASSES:
            return "lm_part"
        keys = ", ".join(sorted(map(str, value))[:8]) or "none"
        raise TraceInputError(
            "not a DSPy 3.3 LMHistoryEntry (request, response, timestamp, uuid), LMRequest (model, messages), "
            f"LMResponse (outputs), LMMessage (role, parts) or LMPart (type); its keys are: {keys}"
        )
    raise TraceInputError(f"expected a JSON object or a list of history entries, got {kind_of(value)}")


def trace_from_json(value: Any, *, source_index: int | None = None) -> m.Trace:
    """Read one DSPy 3.3 JSON value (history entry, request, response, message, part, or list of entries) as a trace."""
    kind = detect_kind(value)
    if kind == "lm_history_entry":
        return m.Trace(source_kind=kind, entries=[entry_from_json(value)], source_index=source_index)
    if kind == "lm_history":
        entries = [entry_from_json(e, f"[{i}]") for i, e in enumerate(value)]
        return m.Trace(source_kind=kind, entries=entries, source_index=source_index)
    if kind == "lm_request":
        return m.Trace(source_kind=kind, request=request_from_json(value, "request"), source_index=source_index)
    if kind == "lm_message":
        return m.Trace(source_kind=kind, messages=[message_from_json(value, "message")], source_index=source_index)
    if kind == "lm_part":
        return m.Trace(source_kind=kind, parts=[part_from_json(value, "part")], source_index=source_index)
    return m.Trace(source_kind=kind, response=response_from_json(value, "response"), source_index=source_index)


# --- writing (the exact layout of DSPy 3.3's model_dump(mode="json")) ---------------------------------


def part_to_json(part: m.LMPart) -> dict[str, Any]:
    """Write a model part as DSPy 3.3 dumps it."""
    # The tag is compared on the part itself, not through a local copy, so that mypy narrows the part's class.
    out: dict[str, Any] = {"type": part.part_type, "metadata": part.metadata}
    if part.part_type == "text" or part.part_type == "refusal":
        out["text"] = part.text
    elif part.part_type == "tool_call":
        out.update(id=part.call_id, name=part.name, args=part.args, provider_data=part.provider_data)
    elif part.part_type == "tool_result":
        out.update(
            call_id=part.call_id,
            name=part.name,
            content=[part_to_json(p) for p in part.content],
            is_error=part.is_error,
            provider_data=part.provider_data,
        )
    elif part.part_type == "thinking":
        out.update(text=part.text, redacted=part.redacted)
    elif part.part_type == "citation":
        out.update(text=part.text, title=part.title, url=part.url)
    else:
        out.update(media_type=part.media_type, data=part.data, url=part.url, file_id=part.file_id, path=part.path)
        if part.part_type == "image":
            out["detail"] = part.detail
        elif part.part_type == "binary":
            out["filename"] = part.filename
        elif part.part_type == "document":
            out.update(source=part.source, citations=part.citations, title=part.title, context=part.context)
    return out


def _dump(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in names}


def message_to_json(message: m.LMMessage) -> dict[str, Any]:
    """Write a model message as DSPy 3.3 dumps it."""
    return {"role": message.role, "parts": [part_to_json(p) for p in message.parts], "name": message.name, "metadata": message.metadata}


def request_to_json(request: m.LMRequest) -> dict[str, Any]:
    """Write a model request as DSPy 3.3 dumps it."""
    c = request.config
    config = _dump(c, ("temperature", "max_tokens", "top_p", "stop", "n", "logprobs", "response_format"))
    config["reasoning"] = None if c.reasoning is None else _dump(c.reasoning, ("effort", "max_tokens", "summary"))
    config["tool_choice"] = None if c.tool_choice is None else _dump(c.tool_choice, ("mode", "allowed", "parallel"))
    config["cache"] = None if c.cache is None else _dump(c.cache, ("enabled", "rollout_id"))
    config["prompt_cache"] = None if c.prompt_cache is None else _dump(c.prompt_cache, ("enabled", "key"))
    config["extensions"] = c.extensions
    return {
        "model": request.model,
        "messages": [message_to_json(msg) for msg in request.messages],
        "tools": [
            {
                "type": t.tool_type,
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "strict": t.strict,
                "metadata": t.metadata,
                "provider_data": t.provider_data,
            }
            for t in request.tools
        ],
        "config": config,
        "metadata": request.metadata,
    }


def usage_to_json(u: m.LMUsage) -> dict[str, Any]:
    """Write a model usage as DSPy 3.3 dumps an ``LMUsage`` (extras at the top level)."""
    usage = _dump(u, m.USAGE_TOKEN_FIELDS)
    usage["details"] = u.details
    if u.metadata is not None:
        usage["metadata"] = u.metadata
    usage.update(u.extra_fields)
    return usage


def response_to_json(response: m.LMResponse) -> dict[str, Any]:
    """Write a model response as DSPy 3.3 dumps it."""
    usage = None if response.usage is None else usage_to_json(response.usage)
    return {
        "model": response.model,
        "outputs": [
            {
                "parts": [part_to_json(p) for p in o.parts],
                "finish_reason": o.finish_reason,
                "truncated": o.truncated,
                "logprobs": o.logprobs,
                "provider_data": o.provider_data,
                "metadata": o.metadata,
            }
            for o in response.outputs
        ],
        "usage": usage,
        "cost": response.cost,
        "cache_hit": response.cache_hit,
        "response_id": response.response_id,
        "provider_data": response.provider_data,
        "metadata": response.metadata,
    }


def entry_to_json(entry: m.LMHistoryEntry) -> dict[str, Any]:
    """Write a model history entry as DSPy 3.3 dumps it."""
    return {
        "request": request_to_json(entry.request),
        "response": response_to_json(entry.response),
        "timestamp": entry.timestamp,
        "uuid": entry.uuid,
        "model_type": entry.model_type,
        **entry.extra_fields,
    }


def trace_to_json(trace: m.Trace) -> Any:
    """Write a trace back as the DSPy 3.3 JSON it was read from (same kind of object, same fields)."""
    kind = trace.source_kind
    if kind == "lm_history_entry":
        return entry_to_json(trace.entries[0])
    if kind == "lm_history":
        return [entry_to_json(e) for e in trace.entries]
    if kind == "lm_request":
        if trace.request is None:
            raise ValueError("an lm_request trace without its request has no DSPy 3.3 JSON form")
        return request_to_json(trace.request)
    if kind == "lm_message":
        return message_to_json(trace.messages[0])
    if kind == "lm_part":
        return part_to_json(trace.parts[0])
    if kind == "lm_response":
        if trace.response is None:
            raise ValueError("an lm_response trace without its response has no DSPy 3.3 JSON form")
        return response_to_json(trace.response)
    raise ValueError(f"a {kind} trace has no DSPy 3.3 JSON form; use dspy_rdf.sources.tracejson.trace_to_json")


# --- live DSPy objects -----------------------------------------------------------------------------------


def trace_from_dspy(obj: Any) -> m.Trace:
    """Read a DSPy 3.3 ``LMHistoryEntry``, ``LMRequest``, ``LMResponse`` or a list of entries as a trace."""
    if isinstance(obj, (list, tuple)):
        return trace_from_json([_dump_dspy(e) for e in obj])
    return trace_from_json(_dump_dspy(obj))


def _dump_dspy(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, dict):
        return obj
    raise TraceInputError(f"expected a DSPy LMHistoryEntry, LMRequest or LMResponse, got {type(obj).__name__}")


def dspy33_types() -> Any:
    """DSPy 3.3's typed LM objects (``dspy.core.types``), or an ``ImportError`` saying what to do instead: DSPy 3.4
    removed them (installing this package's ``dspy`` extra would not bring them back)."""
    try:
        import dspy.core.types as types
    except ImportError as exc:
        try:
            from importlib.metadata import version

            installed = version("dspy")
        except Exception:  # noqa: BLE001 - no DSPy at all
            installed = None
        if installed is None:
            message = "building DSPy objects needs DSPy 3.3: pip install 'dspy>=3.3.1,<3.4'"
        else:
            message = (
                f"DSPy {installed} has no dspy.core.types (DSPy 3.3's typed LM objects, which DSPy 3.4 replaced by "
                "dspy.lm15): use trace_to_json(trace) for the same content as DSPy 3.3 JSON"
            )
        raise ImportError(message) from exc
    return types


def trace_to_dspy(trace: m.Trace) -> Any:
    """Build the DSPy 3.3 object(s) a trace holds (requires ``dspy>=3.3,<3.4``; see :func:`dspy33_types`)."""
    types = dspy33_types()
    LMHistoryEntry, LMRequest, LMResponse = types.LMHistoryEntry, types.LMRequest, types.LMResponse
    data = trace_to_json(trace)
    if trace.source_kind == "lm_history":
        return [LMHistoryEntry.model_validate(e) for e in data]
    cls = {"lm_history_entry": LMHistoryEntry, "lm_request": LMRequest, "lm_response": LMResponse}[trace.source_kind]
    return cls.model_validate(data)


def is_typed_entry(value: Any) -> bool:
    """DSPy 3.3's ``LMHistoryEntry`` JSON (``model_dump`` or ``to_dict``): a request object and a response with
    ``outputs``. Never raises."""
    if not isinstance(value, dict):
        return False
    response = value.get("response")
    return isinstance(value.get("request"), dict) and isinstance(response, dict) and "outputs" in response


def _is_pair(value: Any) -> bool:
    if not isinstance(value, dict) or value.keys() != {"request", "response"}:
        return False
    request, response = value["request"], value["response"]
    return isinstance(request, dict) and "messages" in request and isinstance(response, dict) and "outputs" in response


class _Dspy33(Source):
    format = "dspy33"
    description = "a DSPy 3.3 LMHistoryEntry, LMRequest, LMResponse, LMMessage or LMPart (or a list of history entries)"

    def detect(self, value: Any) -> m.SourceKind | None:
        if isinstance(value, list):
            return "lm_history" if value and all(map(is_typed_entry, value)) else None
        if _is_pair(value):
            return "request_response"
        try:
            return detect_kind(value)
        except TraceInputError:
            return None

    written_kinds = frozenset({"lm_history_entry", "lm_history", "lm_request", "lm_response", "lm_message", "lm_part"})

    def read(self, value: Any, kind: m.SourceKind, options: ReadOptions) -> m.Trace:
        if kind == "request_response":
            return m.Trace(source_kind=kind, request=request_from_json(value["request"]), response=response_from_json(value["response"]))
        return trace_from_json(value)

    def write(self, trace: m.Trace) -> Any:
        return trace_to_json(trace)


SOURCE = _Dspy33()
"""DSPy 3.3's typed LM objects, as ``model_dump(mode="json")`` writes them."""
