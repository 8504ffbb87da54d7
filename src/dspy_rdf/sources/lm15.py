"""DSPy 3.4's ``dspy.lm15`` objects and their JSON (lm15's own serde) -> the canonical model.

DSPy 3.4 replaced the 3.3 typed LM objects with the lm15 library it vendors (``dspy.lm15``). This module
reads the JSON that lm15's serde writes (``request_to_dict``, ``response_to_dict``, ``message_to_dict``,
``part_to_dict``) strictly: unknown fields, part kinds and roles are rejected by name, every bad value
raises :class:`~dspy_rdf.canonical.errors.TraceInputError` with its dotted field path, and the invariants lm15's
constructors check (one media source, a non-empty refusal, no tool call in a user message, cache mode
``off`` alone, ...) are checked too. Nothing is dropped: what has a canonical slot goes there, the rest is
kept under the key ``"lm15"`` of the nearest JSON slot. It needs no DSPy; :func:`lm15_to_json` turns live
lm15 objects into that JSON with lm15's own serde (DSPy >= 3.4).

lm15 -> canonical (``m`` is :mod:`dspy_rdf.canonical.model`):

===================================  ==================================================================
lm15 JSON field                      canonical slot
===================================  ==================================================================
Request.model                        LMRequest.model
Request.system (string)              first message, role ``system``, one LMTextPart;
                                     its ``metadata["lm15"] = {"system": "string"}``
Request.system (list of parts)       first message, role ``system``, those parts;
                                     its ``metadata["lm15"] = {"system": "parts"}``
Request.messages                     LMRequest.messages (after the system message)
Request.tools[i] FunctionTool        LMToolSpec(name, description, parameters); tool_type ``function``
Request.tools[i] BuiltinTool         LMRequest.metadata["lm15"]["builtin_tools"]: lm15's tool JSON
                                     plus ``"position": i`` (DSPy 3.3 tool specs are functions only)
Config.max_tokens/temperature/top_p  LMConfig.max_tokens/temperature/top_p
Config.stop                          LMConfig.stop
Config.response_format               LMConfig.response_format
Config.logprobs (count)              LMConfig.logprobs
Config.tool_choice                   LMConfig.tool_choice (mode, allowed, parallel)
Config.reasoning                     LMConfig.reasoning: effort, thinking_budget -> max_tokens, summary
Config.cache (provider prompt cache) LMConfig.prompt_cache: enabled = (mode == "auto"), key;
                                     retention, prefix, prefix_until_index, resource ->
                                     LMConfig.extensions["lm15"]["cache"]
Config.top_k, seed,                  LMConfig.extensions["lm15"][<same name>]
frequency_penalty, presence_penalty,
service_tier, user_id, store,
probabilities
Config.extensions                    LMConfig.extensions (its own key ``lm15`` is reserved, so refused)
Message.role / parts                 LMMessage.role / parts
*.continuation (message or part)     ``metadata["lm15"]["continuation"]`` of that message or part,
                                     as ``[{"provider", "kind", "data"}, ...]``
TextPart.text                        LMTextPart.text
ImagePart/AudioPart/VideoPart/       LMImagePart/LMAudioPart/LMVideoPart/LMDocumentPart/LMBinaryPart:
DocumentPart/BinaryPart              media_type, data, url, file_id, path; detail (image)
ToolCallPart.id / name / input       LMToolCallPart.call_id / name / args
ToolResultPart.id / name / content / LMToolResultPart.call_id / name / content / is_error
is_error
ThinkingPart.text                    LMThinkingPart.text; redacted = (text == "" and continuation):
                                     lm15's spelling of hidden thinking (MAP-7 rule 11)
RefusalPart.text                     LMRefusalPart.text
CitationPart.url / title / text      LMCitationPart.url / title / text
DataPart.value                       LMTextPart.text = the value as JSON text (``json.dumps(value,
                                     ensure_ascii=False)``, as DSPy 3.4 hands data parts to adapters),
                                     ``metadata["lm15"] = {"type": "data"}`` plus ``probabilities`` and
                                     ``method`` when present; ``json.loads(text)`` gives the value back
Response.id                          LMResponse.response_id
Response.model                       LMResponse.model
Response.message                     LMResponse.outputs[0].parts (one output: lm15 has one message);
                                     its continuation -> outputs[0].metadata["lm15"]["continuation"]
Response.finish_reason               outputs[0].finish_reason (lm15's word); truncated = (== "length")
Response.logprobs                    outputs[0].logprobs, lm15's token list verbatim
Response.logprobs_complete (false)   outputs[0].metadata["lm15"]["logprobs_complete"]
Response.usage                       LMUsage: the eight counts by name; prompt_tokens/completion_tokens
                                     filled from input/output as DSPy 3.3 does; absent or ``{}`` -> None
Response.adaptations                 LMResponse.metadata["lm15"]["adaptations"], lm15's dicts verbatim
Response.provider_data               LMResponse.provider_data
===================================  ==================================================================

Detection (:func:`detect_lm15`) answers only for JSON that carries a mark DSPy 3.3 JSON and OpenAI JSON
never have: a response's singular ``message`` with ``parts`` next to ``finish_reason``; a request's
``system`` key, lm15-only config knobs, a builtin tool; ``continuation``; a ``data`` part; a tool call's
``input``; a tool result's ``id``. JSON without such a mark (a text-only message, a bare text or image
part) reads the same either way and is left to the DSPy 3.3 reader: the answer is None. For JSON known to be
lm15 (a forced format, a live object), :func:`lm15_kind` answers by shape alone.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypeVar, overload

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import check_keys, expect_object, fail, get_bool, get_float, get_int, get_json_object, get_list, get_str, kind_of
from dspy_rdf.sources.base import ReadOptions, Source

__all__ = [
    "LM15_KEY",
    "SOURCE",
    "LM15_PART_TYPES",
    "detect_lm15",
    "lm15_kind",
    "lm15_to_json",
    "message_from_lm15",
    "part_from_lm15",
    "request_from_lm15",
    "response_from_lm15",
]

LM15_KEY = "lm15"
"""The key under which lm15 fields without a canonical slot are kept in a JSON slot."""

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

_ROLES = ("user", "assistant", "tool", "developer")
# What lm15's constructors allow where (types.py: _validate_message_parts, ToolResultPart, PromptPart).
_PROTOCOL_PARTS = frozenset({"tool_call", "tool_result", "thinking", "refusal", "citation"})
_TOOL_RESULT_FORBIDDEN = frozenset({"tool_call", "tool_result", "thinking", "refusal"})
_JUDGMENT_METHODS = ("provider_classification", "candidate_sequence_likelihood")
_FINISH_REASONS = ("stop", "length", "tool_call", "content_filter", "error")
_TOOL_CHOICE_MODES: tuple[Literal["auto", "required", "none"], ...] = ("auto", "required", "none")
_REASONING_EFFORTS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
_REASONING_SUMMARIES = ("auto", "concise", "detailed")
_PROBABILITY_POLICIES = ("off", "if_available", "required")
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
_CONFIG_KEYS = frozenset(
    {"max_tokens", "temperature", "top_p", "top_k", "stop", "response_format", "tool_choice", "reasoning", "cache"}
    | {"seed", "frequency_penalty", "presence_penalty", "service_tier", "user_id", "store", "logprobs"}
    | {"probabilities", "extensions"}
)
# lm15 Config knobs with no DSPy 3.3 slot; kept in LMConfig.extensions["lm15"] under the same names.
_CONFIG_KNOBS_WITHOUT_SLOT = (
    "top_k",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "service_tier",
    "user_id",
    "store",
)
_CACHE_KEYS = frozenset({"mode", "retention", "key", "prefix_until_index", "prefix", "resource"})
_REQUEST_KEYS = frozenset({"model", "messages", "system", "tools", "config"})
_RESPONSE_KEYS = frozenset(
    {"id", "model", "message", "finish_reason", "usage", "logprobs", "logprobs_complete", "adaptations"}
    | {"provider_data"}
)


# --- small checks --------------------------------------------------------------------------------------


@overload
def _text(d: dict[str, Any], key: str, path: str, *, required: Literal[True]) -> str: ...
@overload
def _text(d: dict[str, Any], key: str, path: str, *, required: bool = False) -> str | None: ...
def _text(d: dict[str, Any], key: str, path: str, *, required: bool = False) -> str | None:
    """A string that lm15 requires to be non-empty when present."""
    value = get_str(d, key, path, required=required)
    if value == "":
        raise fail(f"{path}.{key}", "must not be empty")
    return value


_Choice = TypeVar("_Choice", bound=str)


def _choice(
    d: dict[str, Any], key: str, path: str, allowed: tuple[_Choice, ...], *, default: _Choice | None = None
) -> _Choice | None:
    value = get_str(d, key, path, default=default)
    if value is not None and value not in allowed:
        raise fail(f"{path}.{key}", f"expected one of {', '.join(allowed)}, got {value!r}")
    return value


def _count(d: dict[str, Any], key: str, path: str, *, minimum: int = 0) -> int | None:
    value = get_int(d, key, path)
    if value is not None and value < minimum:
        raise fail(f"{path}.{key}", f"must be at least {minimum}, got {value}")
    return value


def _strings(value: Any, path: str) -> list[str]:
    """A list of non-empty strings; a bare string is one element, as lm15's reader takes it (INV-020)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise fail(path, f"expected a list of strings, got {kind_of(value)}")
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item:
            raise fail(f"{path}[{i}]", f"expected a non-empty string, got {kind_of(item)}")
    return list(items)


def _with_lm15(metadata: dict[str, Any], extras: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` with ``extras`` under the lm15 key, or unchanged when there are none."""
    return {**metadata, LM15_KEY: extras} if extras else metadata


def _continuation(d: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """lm15's continuation states, normalized to what lm15 itself writes back."""
    states = []
    for i, raw in enumerate(get_list(d, "continuation", path)):
        p = f"{path}.continuation[{i}]"
        state = expect_object(raw, p)
        check_keys(state, frozenset({"provider", "kind", "data"}), p, "an lm15 continuation state")
        states.append(
            {
                "provider": _text(state, "provider", p, required=True),
                "kind": _text(state, "kind", p, required=True),
                "data": get_json_object(state, "data", p),
            }
        )
    return states


# --- parts -----------------------------------------------------------------------------------------------


def part_from_lm15(value: Any, path: str = "part") -> m.LMPart:
    """Turn one lm15 part dict (``part_to_dict``) into a model part; unknown kinds are rejected by name."""
    d = expect_object(value, path)
    kind = d.get("type")
    if not isinstance(kind, str) or (keys := _PART_KEYS.get(kind)) is None:
        raise fail(f"{path}.type", f"unknown lm15 part type {kind!r}; expected one of {', '.join(LM15_PART_TYPES)}")
    check_keys(d, keys, path, f"an lm15 {kind} part")
    continuation = _continuation(d, path)
    extras: dict[str, Any] = {"continuation": continuation} if continuation else {}
    metadata = _with_lm15({}, extras)
    if kind == "text":
        return m.LMTextPart(text=get_str(d, "text", path, required=True), metadata=metadata)
    if kind == "refusal":
        return m.LMRefusalPart(text=_text(d, "text", path, required=True), metadata=metadata)
    if kind == "thinking":
        text = get_str(d, "text", path, required=True)
        return m.LMThinkingPart(text=text, redacted=text == "" and bool(continuation), metadata=metadata)
    if kind == "citation":
        part = m.LMCitationPart(
            text=_text(d, "text", path), title=_text(d, "title", path), url=_text(d, "url", path), metadata=metadata
        )
        if part.text is None and part.title is None and part.url is None:
            raise fail(path, "an lm15 citation part needs at least one of text, title or url")
        return part
    if kind == "tool_call":
        return m.LMToolCallPart(
            call_id=_text(d, "id", path, required=True),
            name=_text(d, "name", path, required=True),
            args=get_json_object(d, "input", path),
            metadata=metadata,
        )
    if kind == "tool_result":
        return m.LMToolResultPart(
            call_id=_text(d, "id", path, required=True),
            name=_text(d, "name", path),
            content=_tool_result_content(d, path),
            is_error=get_bool(d, "is_error", path, default=False),
            metadata=metadata,
        )
    if kind == "data":
        return _data_part(d, path, extras)
    return _media_part(kind, d, path, metadata)


def _media_part(kind: str, d: dict[str, Any], path: str, metadata: dict[str, Any]) -> m.LMPart:
    fields: dict[str, Any] = {"media_type": _text(d, "media_type", path, required=True)}
    sources = {key: _text(d, key, path) for key in _SOURCES}
    given = [key for key, source in sources.items() if source is not None]
    if len(given) != 1:
        raise fail(path, f"an lm15 {kind} part needs exactly one of data, url, file_id or path, got {len(given)}")
    fields.update(sources)
    if kind == "image":
        fields["detail"] = _choice(d, "detail", path, ("low", "high", "auto"))
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
    method = _choice(d, "method", path, _JUDGMENT_METHODS)
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


# --- messages --------------------------------------------------------------------------------------------


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
    continuation = _continuation(d, path)
    return m.LMMessage(
        role=role,
        parts=[part_from_lm15(p, f"{path}.parts[{i}]") for i, p in enumerate(raw_parts)],
        metadata=_with_lm15({}, {"continuation": continuation} if continuation else {}),
    )


def _system_message(value: Any, path: str) -> m.LMMessage:
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


# --- requests ---------------------------------------------------------------------------------------------


def _tools(d: dict[str, Any], path: str) -> tuple[list[m.LMToolSpec], list[dict[str, Any]]]:
    """Function tools as tool specs, builtin tools as JSON with their position in lm15's list."""
    specs: list[m.LMToolSpec] = []
    builtins: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, raw in enumerate(get_list(d, "tools", path)):
        p = f"{path}.tools[{i}]"
        tool = expect_object(raw, p)
        tool_type = _choice(tool, "type", p, ("function", "builtin"), default="function")
        name = _text(tool, "name", p, required=True)
        if name in seen:
            raise fail(f"{p}.name", f"duplicate tool name {name!r}")
        seen.add(name)
        if tool_type == "builtin":
            check_keys(tool, frozenset({"type", "name", "config"}), p, "an lm15 builtin tool")
            get_json_object(tool, "config", p)
            builtins.append({"position": i, **tool})  # lm15's JSON verbatim, and where it stood in the list
            continue
        check_keys(tool, frozenset({"type", "name", "description", "parameters"}), p, "an lm15 function tool")
        # lm15's FunctionTool default when the JSON has no parameters.
        parameters = get_json_object(tool, "parameters", p) if "parameters" in tool else {"type": "object", "properties": {}}
        specs.append(m.LMToolSpec(name=name, description=get_str(tool, "description", p), parameters=parameters))
    return specs, builtins


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
    shape = _choice(value, "type", p, ("json_object", "json_schema"))
    if shape is None:
        raise fail(f"{p}.type", "is required")
    if shape == "json_object":
        check_keys(value, frozenset({"type"}), p, "a json_object response format")
        return value
    check_keys(value, frozenset({"type", "schema", "name", "strict"}), p, "a json_schema response format")
    if not isinstance(value.get("schema"), dict):
        raise fail(f"{p}.schema", f"expected a JSON object, got {kind_of(value.get('schema'))}")
    _text(value, "name", p)
    get_bool(value, "strict", p)
    return value


def _config(value: Any, path: str) -> m.LMConfig:
    if value is None:
        return m.LMConfig()
    d = expect_object(value, path)
    check_keys(d, _CONFIG_KEYS, path, "an lm15 config")
    extensions = get_json_object(d, "extensions", path)
    if LM15_KEY in extensions:
        raise fail(f"{path}.extensions.{LM15_KEY}", "is reserved for the lm15 config fields DSPy 3.3 has no slot for")
    extras: dict[str, Any] = {
        "top_k": _count(d, "top_k", path, minimum=1),
        "seed": get_int(d, "seed", path),
        "frequency_penalty": _number(d, "frequency_penalty", path, -2, 2),
        "presence_penalty": _number(d, "presence_penalty", path, -2, 2),
        "service_tier": _text(d, "service_tier", path),
        "user_id": _text(d, "user_id", path),
        "store": get_bool(d, "store", path),
        "probabilities": _choice(d, "probabilities", path, _PROBABILITY_POLICIES),
    }
    stop = _strings(d["stop"], f"{path}.stop") if d.get("stop") is not None else []
    config = m.LMConfig(
        max_tokens=_count(d, "max_tokens", path, minimum=1),
        temperature=_number(d, "temperature", path, 0, 2),
        top_p=_number(d, "top_p", path, 0, 1),
        stop=stop or None,  # lm15's empty stop tuple means none
        logprobs=_count(d, "logprobs", path),
        response_format=_response_format(d, path),
    )
    if (t := _sub(d, "tool_choice", path, frozenset({"mode", "allowed", "parallel"}))) is not None:
        p = f"{path}.tool_choice"
        allowed = _strings(t["allowed"], f"{p}.allowed") if t.get("allowed") is not None else []
        tool_mode = _choice(t, "mode", p, _TOOL_CHOICE_MODES, default="auto")
        if tool_mode is None:  # a null mode: the default stands only for an absent one
            raise fail(f"{p}.mode", "expected one of auto, required, none, got None")
        config.tool_choice = m.LMToolChoice(
            mode=tool_mode,
            allowed=allowed or None,
            parallel=get_bool(t, "parallel", p),
        )
        if config.tool_choice.mode == "none" and (allowed or config.tool_choice.parallel is not None):
            raise fail(p, "an lm15 tool choice of mode none takes no allowed tools and no parallel setting")
    if (r := _sub(d, "reasoning", path, frozenset({"effort", "thinking_budget", "summary"}))) is not None:
        p = f"{path}.reasoning"
        config.reasoning = m.LMReasoningConfig(
            effort=_choice(r, "effort", p, _REASONING_EFFORTS),
            max_tokens=_count(r, "thinking_budget", p, minimum=1),
            summary=_choice(r, "summary", p, _REASONING_SUMMARIES),
        )
        if config.reasoning.effort is None:
            raise fail(f"{p}.effort", "is required")
        if config.reasoning.effort == "off" and (config.reasoning.max_tokens or config.reasoning.summary):
            raise fail(p, "lm15 reasoning effort off takes no thinking_budget and no summary")
    if (c := _sub(d, "cache", path, _CACHE_KEYS)) is not None:
        p = f"{path}.cache"
        mode = _choice(c, "mode", p, ("auto", "off"), default="auto")
        config.prompt_cache = m.LMPromptCacheConfig(enabled=mode == "auto", key=_text(c, "key", p))
        cache_extras = {
            "retention": _choice(c, "retention", p, ("short", "long")),
            "prefix": _choice(c, "prefix", p, ("stable", "history")),
            "prefix_until_index": _count(c, "prefix_until_index", p),
            "resource": _text(c, "resource", p),
        }
        extras["cache"] = {k: v for k, v in cache_extras.items() if v is not None} or None
        if mode == "off" and (extras["cache"] or config.prompt_cache.key):
            raise fail(p, "lm15 cache mode off takes no retention, key, prefix, prefix_until_index or resource")
        if "prefix" in (extras["cache"] or {}) and "prefix_until_index" in extras["cache"]:
            raise fail(p, "lm15 cache takes prefix or prefix_until_index, not both")
    extras = {k: v for k, v in extras.items() if v is not None}
    config.extensions = _with_lm15(dict(extensions), extras)
    return config


def request_from_lm15(value: Any, path: str = "request") -> m.LMRequest:
    """Turn an lm15 request dict (``request_to_dict``) into a model request."""
    d = expect_object(value, path)
    check_keys(d, _REQUEST_KEYS, path, "an lm15 request")
    model = _text(d, "model", path, required=True)
    raw_messages = get_list(d, "messages", path, required=True)
    if not raw_messages:
        raise fail(f"{path}.messages", "an lm15 request needs at least one message")
    messages = [] if d.get("system") is None else [_system_message(d["system"], f"{path}.system")]
    messages += [message_from_lm15(x, f"{path}.messages[{i}]") for i, x in enumerate(raw_messages)]
    tools, builtins = _tools(d, path)
    config = _config(d.get("config"), f"{path}.config")
    names = {t.name for t in tools} | {b["name"] for b in builtins}
    if config.tool_choice is not None and (missing := sorted(set(config.tool_choice.allowed or ()) - names)):
        raise fail(f"{path}.config.tool_choice.allowed", f"names tools the request lacks: {', '.join(missing)}")
    return m.LMRequest(
        model=model,
        messages=messages,
        tools=tools,
        config=config,
        metadata=_with_lm15({}, {"builtin_tools": builtins} if builtins else {}),
    )


# --- responses ----------------------------------------------------------------------------------------------


def _usage(value: Any, path: str) -> m.LMUsage | None:
    if value is None:
        return None
    d = expect_object(value, path)
    check_keys(d, frozenset(_USAGE_FIELDS), path, "lm15 usage")
    counts = {key: _count(d, key, path) for key in _USAGE_FIELDS}
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
    _count(d, "token_id", path)
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
        _text(d, "field", p, required=True)
        _text(d, "reason", p, required=True)
        if _choice(d, "action", p, _ADAPTATION_ACTIONS) is None:
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
    finish_reason = _choice(d, "finish_reason", path, _FINISH_REASONS)
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
        metadata=_with_lm15({}, output_extras),
    )
    adaptations = _adaptations(d.get("adaptations"), f"{path}.adaptations")
    return m.LMResponse(
        outputs=[output],
        model=_text(d, "model", path, required=True),
        usage=_usage(d.get("usage"), f"{path}.usage"),
        response_id=_text(d, "id", path),
        provider_data=get_json_object(d, "provider_data", path),
        metadata=_with_lm15({}, {"adaptations": adaptations} if adaptations else {}),
    )


# --- detection ------------------------------------------------------------------------------------------------

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
        or (isinstance(cache, dict) and bool(_CACHE_KEYS & cache.keys()))
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


# --- live lm15 objects --------------------------------------------------------------------------------------------


def lm15_to_json(obj: Any) -> tuple[m.SourceKind, Any]:
    """Return ``(kind, json)`` for a live lm15 ``Request``, ``Response``, ``Message`` or part, written by lm15's
    own serde (a response with its ``provider_data``, so nothing is left out). Needs DSPy >= 3.4."""
    try:
        from dspy import lm15
        from dspy._vendor.lm15 import serde
    except ImportError as exc:
        raise ImportError("reading live lm15 objects needs DSPy 3.4's bundled lm15: pip install 'dspy>=3.4'") from exc
    part_classes = (
        lm15.TextPart,
        lm15.ImagePart,
        lm15.AudioPart,
        lm15.VideoPart,
        lm15.DocumentPart,
        lm15.BinaryPart,
        lm15.ToolCallPart,
        lm15.ToolResultPart,
        lm15.ThinkingPart,
        lm15.RefusalPart,
        lm15.CitationPart,
        lm15.DataPart,
    )
    if isinstance(obj, lm15.Request):
        return "lm_request", serde.request_to_dict(obj)
    if isinstance(obj, lm15.Response):
        return "lm_response", serde.response_to_dict(obj, include_provider_data=True)
    if isinstance(obj, lm15.Message):
        return "lm_message", serde.message_to_dict(obj)
    if isinstance(obj, part_classes):
        return "lm_part", serde.part_to_dict(obj)
    raise TraceInputError(f"expected an lm15 Request, Response, Message or part, got {type(obj).__name__}")


def _pair(value: Any, *, marked: bool) -> bool:
    """``{"request": <lm15 Request>, "response": <lm15 Response>}``, as lm15's serde writes the two halves of one call."""
    if not isinstance(value, dict) or value.keys() != {"request", "response"}:
        return False
    request, response = value["request"], value["response"]
    if lm15_kind(request) != "lm_request" or lm15_kind(response) != "lm_response":
        return False
    return not marked or detect_lm15(response) == "lm_response" or detect_lm15(request) == "lm_request"


class _Lm15(Source):
    format = "lm15"
    description = "a DSPy 3.4 lm15 Request, Response, Message or part, or {request, response}"

    def detect(self, value: Any) -> m.SourceKind | None:
        return "request_response" if _pair(value, marked=True) else detect_lm15(value)

    def shape(self, value: Any) -> m.SourceKind | None:
        return "request_response" if _pair(value, marked=False) else lm15_kind(value)

    def read(self, value: Any, kind: m.SourceKind, options: ReadOptions) -> m.Trace:
        trace = m.Trace(source_kind=kind, source_format=self.format)
        if kind == "request_response":
            trace.request = request_from_lm15(value["request"], "request")
            trace.response = response_from_lm15(value["response"], "response")
        elif kind == "lm_request":
            trace.request = request_from_lm15(value)
        elif kind == "lm_response":
            trace.response = response_from_lm15(value)
        elif kind == "lm_message":
            trace.messages = [message_from_lm15(value, "message")]
        else:
            trace.parts = [part_from_lm15(value, "part")]
        return trace


SOURCE = _Lm15()
"""DSPy 3.4's lm15 objects, as lm15's serde writes them."""
