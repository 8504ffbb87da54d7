"""Legacy ``lm.history`` entries (plain dicts, DSPy 2.5 to 3.4) -> ``LMHistoryEntry`` of the canonical model.

Until DSPy 3.3 typed its history, and again in 3.4, an ``lm.history`` entry is a dict. What it holds
depends on the version that wrote it (read from each version's ``dspy/clients/lm.py`` / ``base_lm.py``):

============================  ==============================================================================
DSPy                          keys of an entry
============================  ==============================================================================
2.5.0 - 2.5.3                 prompt, messages, kwargs, response, outputs, usage, cost
2.5.4 - 2.5.43                + timestamp, uuid, model, model_type
2.6.0 - 3.3.x                 + response_model
3.4.x                         + cost_details (when priced), request (an lm15 ``Request``, for an explicit
                              request call), adaptations (when lm15 changed what was asked)
``DummyLM`` up to 3.1.x       prompt, messages, kwargs, outputs, usage (the number 0), cost (0)
============================  ==============================================================================

The reading follows DSPy 3.3.1's own conversion of such an entry: the request is
``LMRequest.from_call(model=model, prompt=prompt, messages=messages, **kwargs)`` (a ``tools`` kwarg gives
the tool specs, the rest :func:`~dspy_rdf.sources.openai_chat.config_from_kwargs`), or, for a DSPy 3.4
entry whose ``request`` is an lm15 ``Request`` dict, lm15's reader
(:func:`dspy_rdf.sources.lm15.request_from_lm15`; its ``kwargs`` then hold only ``cache``/``rollout_id``,
which become ``config.cache``); the response is ``lm_response_from_legacy_outputs(outputs, request)`` with
``usage``, ``cost`` and ``response_model`` (else the request's model, as DSPy) set on it.
``tests/test_source_history_dict.py`` compares both with DSPy itself, entry by entry.

Nothing is dropped: every other key is kept in ``extra_fields`` under its own name (``cost_details``,
``adaptations``, ``rollout_id``, unknown keys), except these, renamed so that they cannot clash with
``LMHistoryEntry``'s own fields when the entry is written back as DSPy 3.3 JSON:

=========================  ====================================================================================
legacy key                 kept as
=========================  ====================================================================================
response                   ``extra_fields["provider_response"]``: the provider's raw response (in a real
                           history a LiteLLM object, which ``json.dumps(default=str)`` writes as its str();
                           in DSPy 3.4 an lm15 Response dict), unchanged
usage (not an object)      ``extra_fields["legacy_usage"]``: DummyLM's placeholder ``0``; ``response.usage``
                           is then None, as it is for ``{}`` or null
prompt (with messages)     ``extra_fields["legacy_prompt"]``, only when it is not just the text of the one
                           user message DSPy 2.5 built from it
request (not an object)    ``extra_fields["lm15_request"]`` (the str() of an lm15 Request: unreadable)
kwargs (next to request)   ``extra_fields["legacy_kwargs"]``, only when it holds more than cache/rollout_id
=========================  ====================================================================================

The DSPy 3.4 ``messages`` next to an lm15 ``request`` are a display copy DSPy derives from that request, so
they are not read again.

Fields an old entry lacks: a missing ``uuid`` is derived, deterministically, as the uuid5 of the entry's
canonical JSON (sorted keys, no spaces) in the namespace :data:`LEGACY_UUID_NAMESPACE`, so identical
entries get identical uuids. A missing ``model`` (2.5.0 - 2.5.3, DummyLM before 3.2) or ``timestamp`` cannot be
derived from anything in the entry: it raises :class:`~dspy_rdf.canonical.errors.TraceInputError` unless the caller
passes ``model=`` / ``timestamp=``. Every field filled in so is listed in
``extra_fields["dspy_rdf_filled"]`` (``{"uuid": "derived", "model": "given", "timestamp": "given"}``).
"""

from __future__ import annotations

import json
import re
import uuid as uuid_lib
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import check_datetime, expect_object, fail, get_float, get_str, kind_of
from dspy_rdf.sources.base import ReadOptions, Source
from dspy_rdf.sources.dspy33 import entry_from_json, is_typed_entry
from dspy_rdf.sources.openai_chat import (
    citation_from_provider,
    config_from_kwargs,
    messages_from_openai,
    tool_call_from_provider,
    tools_from_openai,
    usage_from_openai,
)

__all__ = ["FILLED_KEY", "LEGACY_UUID_NAMESPACE", "SOURCE", "entry_from_history_dict", "finish_reasons", "is_history_dict", "output_from_legacy"]

LEGACY_UUID_NAMESPACE = uuid_lib.uuid5(uuid_lib.NAMESPACE_URL, "urn:dspy-rdf:legacy-history-entry")
"""The uuid5 namespace of the uuids derived for entries that have none."""

FILLED_KEY = "dspy_rdf_filled"
"""``extra_fields`` key listing the canonical fields dspy-rdf filled in: ``{field: "derived" | "given"}``."""

# Keys every version writes; an entry needs outputs and something that says what was asked.
_ASKED_KEYS = frozenset({"prompt", "messages", "request"})
_READ_KEYS = frozenset(
    {"prompt", "messages", "kwargs", "response", "outputs", "usage", "cost", "timestamp", "uuid", "model"}
    | {"response_model", "model_type", "request"}
)
_RENAMED = ("provider_response", "legacy_usage", "legacy_prompt", "lm15_request", "legacy_kwargs", FILLED_KEY)


def is_history_dict(value: Any) -> bool:
    """Whether ``value`` is a legacy ``lm.history`` entry dict (DSPy 2.5 to 3.4): ``outputs`` next to
    ``messages``, ``prompt`` or ``request``, and not DSPy 3.3 typed ``LMHistoryEntry`` JSON. Never raises."""
    return (
        isinstance(value, dict)
        and "outputs" in value
        and bool(_ASKED_KEYS & value.keys())
        and not is_typed_entry(value)
    )


def output_from_legacy(value: Any, path: str) -> m.LMOutput:
    """One legacy output (what ``lm(...)`` returned) -> ``LMOutput``, as DSPy's ``lm_output_from_legacy_output``.

    A string is one text part; null is an empty output; an object gives, in order, a text part (``text``,
    when non-empty), a thinking part (``reasoning_content``), tool-call parts (``tool_calls``), citation
    parts (``citations``), and ``logprobs``. Its other keys, which DSPy drops, are kept in
    ``provider_data``.
    """
    if isinstance(value, str):
        return m.LMOutput(parts=[m.LMTextPart(text=value)])
    if value is None:
        return m.LMOutput()
    if not isinstance(value, dict):
        raise fail(path, f"expected a string, an object or null, got {kind_of(value)}")
    parts: list[m.LMPart] = []
    text = value.get("text")
    if text:
        if not isinstance(text, str):
            raise fail(f"{path}.text", f"expected a string, got {kind_of(text)}")
        parts.append(m.LMTextPart(text=text))
    reasoning = value.get("reasoning_content")
    if reasoning:
        if not isinstance(reasoning, str):
            raise fail(f"{path}.reasoning_content", f"expected a string, got {kind_of(reasoning)}")
        parts.append(m.LMThinkingPart(text=reasoning))
    for key, read in (("tool_calls", tool_call_from_provider), ("citations", citation_from_provider)):
        items = value.get(key) or []
        if not isinstance(items, list):
            raise fail(f"{path}.{key}", f"expected a list, got {kind_of(items)}")
        parts.extend(read(item, f"{path}.{key}[{i}]") for i, item in enumerate(items))
    read_keys = ("text", "reasoning_content", "tool_calls", "citations", "logprobs")
    extras = {k: v for k, v in value.items() if k not in read_keys and v is not None}
    return m.LMOutput(parts=parts, logprobs=value.get("logprobs"), provider_data=extras)


_FINISH_REASON_REPR = re.compile(r"finish_reason='([^'\\]*)'")


def finish_reasons(response: Any, outputs: int) -> list[str | None]:
    """The finish reason of each output, from the provider's raw response the entry kept (``response``), which DSPy's
    own reading of legacy entries leaves out: choices of a chat completion (a dict, as a live ``ModelResponse``
    dumps, or its ``str()``, as ``json.dumps(history, default=str)`` writes it), or an lm15 response's
    ``finish_reason`` (DSPy 3.4). Nones where the response does not say, or does not have one choice per output."""
    found: list[Any] = []
    if isinstance(response, dict):
        choices = response.get("choices")
        if isinstance(choices, list):
            found = [c.get("finish_reason") if isinstance(c, dict) else None for c in choices]
        elif "finish_reason" in response:
            found = [response.get("finish_reason")]
    elif isinstance(response, str) and response.startswith("ModelResponse("):
        found = _FINISH_REASON_REPR.findall(response)
    if len(found) != outputs or not all(isinstance(x, str) or x is None for x in found):
        return [None] * outputs
    return found


def _derived_uuid(value: dict[str, Any]) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return str(uuid_lib.uuid5(LEGACY_UUID_NAMESPACE, canonical))


def _prompt_is_redundant(prompt: Any, messages: Any) -> bool:
    """DSPy 2.5 logged ``messages = messages or [{"role": "user", "content": prompt}]`` next to the prompt."""
    return (
        isinstance(messages, list)
        and len(messages) == 1
        and isinstance(messages[0], dict)
        and messages[0].get("role") == "user"
        and messages[0].get("content") == prompt
    )


def _request_from_call(d: dict[str, Any], path: str, prefix: str, model: str, extra: dict[str, Any]) -> m.LMRequest:
    """The request as ``LMRequest.from_call(model=..., prompt=..., messages=..., **kwargs)`` builds it."""
    kwargs = d.get("kwargs")
    if kwargs is None:
        kwargs = {}
    kwargs = dict(expect_object(kwargs, f"{prefix}kwargs"))
    tools = tools_from_openai(kwargs.pop("tools", None), f"{prefix}kwargs.tools")
    config = config_from_kwargs(kwargs, f"{prefix}kwargs")
    prompt, messages = d.get("prompt"), d.get("messages")
    if messages is not None:
        parsed = messages_from_openai(messages, f"{prefix}messages")
        if prompt is not None and not _prompt_is_redundant(prompt, messages):
            extra["legacy_prompt"] = prompt
    else:
        # DSPy: a prompt (or nothing at all) is one user message with one text part
        text = get_str(d, "prompt", path) or ""
        parsed = [m.LMMessage(role="user", parts=[m.LMTextPart(text=text)])]
    return m.LMRequest(model=model, messages=parsed, tools=tools, config=config)


def _request_from_lm15(d: dict[str, Any], prefix: str, extra: dict[str, Any]) -> m.LMRequest:
    from dspy_rdf.sources.lm15 import request_from_lm15  # imported late: lm15 support is a sibling module

    request = request_from_lm15(d["request"], f"{prefix}request")
    kwargs = d.get("kwargs")
    if kwargs is None:
        kwargs = {}
    kwargs = expect_object(kwargs, f"{prefix}kwargs")
    # DSPy 3.4 accepts only cache and rollout_id next to an explicit Request: its memoization controls,
    # which DSPy 3.3 records as config.cache.
    if kwargs.keys() <= {"cache", "rollout_id"}:
        cache = config_from_kwargs(dict(kwargs), f"{prefix}kwargs").cache
        if cache is not None:
            request.config.cache = cache
    else:
        extra["legacy_kwargs"] = kwargs
    return request


def _usage(value: Any, path: str, extra: dict[str, Any]) -> m.LMUsage | None:
    if isinstance(value, dict):
        return usage_from_openai(value, path) if value else None
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        extra["legacy_usage"] = value  # DummyLM's placeholder: not a usage record
        return None
    raise fail(path, f"expected a usage object, got {kind_of(value)}")


def entry_from_history_dict(
    value: Any, path: str = "", *, model: str | None = None, timestamp: str | None = None
) -> m.LMHistoryEntry:
    """Read one legacy ``lm.history`` entry dict as an ``LMHistoryEntry`` (see the module docstring).

    ``model`` and ``timestamp`` are used only when the entry has none (DSPy 2.5.0 - 2.5.3 and DummyLM
    before 3.2 write neither); without them such an entry is an error. Errors name the field by its dotted path,
    prefixed by ``path`` (``[3].messages[0].content``).
    """
    p = path or "entry"
    prefix = f"{path}." if path else ""
    d = expect_object(value, p)
    if is_typed_entry(d):
        raise fail(p, "this is a DSPy 3.3 typed LMHistoryEntry (request + response with outputs); read it as DSPy 3.3 JSON")
    if "outputs" not in d:
        raise fail(f"{prefix}outputs", "is required: a history entry records what the LM returned")
    clash = sorted(k for k in _RENAMED if k in d)
    if clash:
        raise fail(p, f"field(s) {', '.join(clash)} would be overwritten by the legacy fields kept under those names")
    extra: dict[str, Any] = {k: v for k, v in d.items() if k not in _READ_KEYS}
    filled: dict[str, str] = {}

    if isinstance(d.get("request"), dict):
        request = _request_from_lm15(d, prefix, extra)
    else:
        if d.get("request") is not None:
            extra["lm15_request"] = d["request"]
        model_name = get_str(d, "model", p)
        if model_name is None:
            if model is None:
                raise fail(f"{prefix}model", "the entry does not say which model was called (DSPy 2.5.0-2.5.3 and DummyLM before 3.2 omit it); give one with --fill-model (model= in Python)")
            model_name, filled["model"] = model, "given"
        request = _request_from_call(d, p, prefix, model_name, extra)

    raw_outputs = d["outputs"]
    if not isinstance(raw_outputs, list):
        raise fail(f"{prefix}outputs", f"expected a list, got {kind_of(raw_outputs)}")
    outputs = [output_from_legacy(o, f"{prefix}outputs[{i}]") for i, o in enumerate(raw_outputs)]
    if not outputs:
        outputs = [m.LMOutput(metadata={"empty_legacy_outputs": True})]  # DSPy's marker for "returned nothing"
    for output, reason in zip(outputs, finish_reasons(d.get("response"), len(raw_outputs))):
        output.finish_reason = reason
        output.truncated = reason == "length"
    response = m.LMResponse(
        outputs=outputs,
        model=get_str(d, "response_model", p) or request.model,
        usage=_usage(d.get("usage"), f"{prefix}usage", extra),
        cost=get_float(d, "cost", p),
    )
    if "response" in d:
        extra["provider_response"] = d["response"]

    entry_timestamp = get_str(d, "timestamp", p)
    if entry_timestamp is None:
        if timestamp is None:
            raise fail(f"{prefix}timestamp", "the entry does not say when it was recorded (DSPy 2.5.0-2.5.3 and DummyLM before 3.2 omit it); give one with --fill-timestamp (timestamp= in Python)")
        entry_timestamp, filled["timestamp"] = check_datetime(timestamp, "--fill-timestamp"), "given"
    else:
        entry_timestamp = check_datetime(entry_timestamp, f"{prefix}timestamp")
    entry_uuid = get_str(d, "uuid", p)
    if entry_uuid is None:
        entry_uuid, filled["uuid"] = _derived_uuid(d), "derived"
    if filled:
        extra[FILLED_KEY] = filled
    return m.LMHistoryEntry(
        request=request,
        response=response,
        timestamp=entry_timestamp,
        uuid=entry_uuid,
        model_type=get_str(d, "model_type", p),
        extra_fields=extra,
    )



class _HistoryDict(Source):
    format = "history_dict"
    description = "an lm.history entry dict (or a list of them, typed entries mixed in), DSPy 2.5 to 3.4"

    def detect(self, value: Any) -> m.SourceKind | None:
        if isinstance(value, list):
            # one dspy.LM writes dicts and, for calls under experimental=True, typed entries into one history
            entries = value and all(is_history_dict(e) or is_typed_entry(e) for e in value)
            return "lm_history" if entries and any(map(is_history_dict, value)) else None
        return "lm_history_entry" if is_history_dict(value) else None

    def shape(self, value: Any) -> m.SourceKind | None:
        if isinstance(value, list):
            return "lm_history"
        return "lm_history_entry" if isinstance(value, dict) else None

    def read(self, value: Any, kind: m.SourceKind, options: ReadOptions) -> m.Trace:
        model, timestamp = options.model, options.timestamp
        if kind == "lm_history":
            if not isinstance(value, list):
                raise fail("", f"expected a list of history entries, got {kind_of(value)}")
            entries = [
                entry_from_json(e, f"[{i}]") if is_typed_entry(e) else entry_from_history_dict(e, f"[{i}]", model=model, timestamp=timestamp)
                for i, e in enumerate(value)
            ]
        else:
            entries = [entry_from_history_dict(value, model=model, timestamp=timestamp)]
        return m.Trace(source_kind=kind, source_format=self.format, entries=entries)


SOURCE = _HistoryDict()
"""``lm.history`` entries as dicts, every DSPy version."""
