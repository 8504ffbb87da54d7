"""OpenAI Chat Completions payloads (requests, responses, request/response pairs) -> the canonical model.

The mapping is DSPy 3.3.1's own, re-implemented without DSPy so the package works without it: a request
payload reads as ``LMRequest.from_call(model=..., messages=..., tools=..., **rest)`` reads it
(``LMMessage.normalize_parts``, ``_parts_from_openai_content``, ``_tool_call_from_openai``,
``_coerce_tool_spec``, ``LMConfig.from_kwargs``), a response as
``dspy.clients.openai_format.completion_to_lm_response`` reads it (``choice_to_lm_output``,
``provider_tool_call_to_part``, ``citation_to_part``, ``usage_from_response``). The differential tests in
``tests/test_source_openai.py`` compare both with DSPy itself.

Where DSPy silently drops data, the typed fields hold what DSPy would hold and the rest is kept, always in
the same documented places (and nowhere else):

=====================================================  ===================================================
what DSPy drops                                        where it is kept
=====================================================  ===================================================
a request content block's keys DSPy does not read      ``part.metadata["legacy_content_block"]``: the whole
(an image's ``detail``, a text block's                 block, under DSPy's own key for "re-emit this block
``cache_control``, a document's ``citations`` next     verbatim" (``part_to_openai_blocks`` honours it)
to a string ``source``, a second media source, ...)
a message's keys with no ``LMMessage`` field           ``message.metadata["provider_data"]`` (null values
(``refusal``, ``audio``, ``cache_control``, ...;       are dropped: they carry nothing)
DSPy rejects such a message)
a request tool call's extra keys (``index``,           ``part.provider_data``, where DSPy's writer puts
``extra_content``, a non-``function`` ``type``,        them back (``assistant_tool_call_to_openai``);
unused ``id``) and its function's extra keys           function extras under ``provider_data["function"]``
tool-call ``arguments`` that are not a JSON object     ``args`` is ``{}`` as in DSPy;
(DSPy: ``{}``, silently)                               ``provider_data["raw_arguments"]`` and
                                                       ``provider_data["arguments_parse_error"]``
a citation's second text, title or url                 ``citation.metadata[<its key>]``
(``cited_text`` wins over ``text``, ...)
a response's top-level keys (``object``, ``created``,  ``response.provider_data``
``system_fingerprint``, ``service_tier``, ...)
a choice's keys (``index``, ...) and its message's     ``output.provider_data``; the message's keys under
keys (``refusal``, ``annotations``, ``audio``,         ``output.provider_data["message"]`` (``role`` only
``thinking_blocks``, the rest of                       when it is not ``assistant``; nulls dropped)
``provider_specific_fields``, ...)
response content blocks DSPy skips                     ``output.provider_data["message"]["unmapped_content"]``:
                                                       ``[{"position": i, "block": ...}]``
=====================================================  ===================================================

Deliberate differences from DSPy, where DSPy would build a broken object, refuse valid input or guess:
a tool call without a function name is an error (DSPy makes a tool call named ``""``); ``stop`` may be a
string as OpenAI allows (DSPy's ``LMConfig`` accepts only a list; the string becomes a one-item list);
message keys DSPy rejects are kept as said above; a response ``content`` that is neither a string nor a list
of blocks, and a content block without the value its type needs, are errors (DSPy writes their ``str()``);
numbers and flags must have their JSON type (no ``"0.5"`` for a temperature, which pydantic would coerce).
A tool call that ``json.dumps(..., default=str)`` wrote as the ``str()`` of a LiteLLM object
(``ChatCompletionMessageToolCall(function=Function(arguments='{}', name='f'), id='c', type='function')``) is
read back by parsing that text with :mod:`ast` (never evaluating it); the text itself is kept in
``provider_data["repr"]``.

Where each part is: :mod:`.detect` tells the three payloads apart; :mod:`.request` reads a request's
messages and tools, with :mod:`.content` for its content blocks and :mod:`.config` for its call settings;
:mod:`.response` reads a response's choices, usage and citations; :mod:`.tool_calls` reads the tool calls
of both; :mod:`.values` holds the small value helpers they share. This module holds the source itself and
the ``{request, response}`` pair.
"""

from __future__ import annotations

from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import expect_object, fail
from dspy_rdf.sources.base import ReadOptions, Source
from dspy_rdf.sources.openai_chat.config import config_from_kwargs
from dspy_rdf.sources.openai_chat.content import parts_from_openai_content
from dspy_rdf.sources.openai_chat.detect import detect_openai
from dspy_rdf.sources.openai_chat.request import message_from_openai, messages_from_openai, request_from_openai, tools_from_openai
from dspy_rdf.sources.openai_chat.response import citation_from_provider, response_from_openai, usage_from_openai
from dspy_rdf.sources.openai_chat.tool_calls import tool_call_from_provider

__all__ = [
    "SOURCE",
    "citation_from_provider",
    "config_from_kwargs",
    "detect_openai",
    "exchange_from_openai",
    "message_from_openai",
    "messages_from_openai",
    "parts_from_openai_content",
    "request_from_openai",
    "response_from_openai",
    "tool_call_from_provider",
    "tools_from_openai",
    "usage_from_openai",
]


def exchange_from_openai(value: Any, path: str = "") -> tuple[m.LMRequest, m.LMResponse]:
    """``{"request": <payload>, "response": <completion>}`` -> (request, response); the response's model
    defaults to the request's, as in DSPy."""
    d = expect_object(value, path or "exchange")
    extra = d.keys() - {"request", "response"}
    if extra:
        raise fail(path or "exchange", f"unknown field(s) {', '.join(sorted(map(str, extra)))}; expected only request and response")
    prefix = f"{path}." if path else ""
    for key in ("request", "response"):
        if d.get(key) is None:
            raise fail(f"{prefix}{key}", "is required")
    request = request_from_openai(d["request"], f"{prefix}request")
    return request, response_from_openai(d["response"], f"{prefix}response", request_model=request.model)


_KINDS: dict[str, m.SourceKind] = {"openai_request": "lm_request", "openai_response": "lm_response", "openai_exchange": "request_response"}


class _OpenAIChat(Source):
    format = "openai_chat"
    description = "an OpenAI chat-completions request or response, or {request, response}"

    def detect(self, value: Any) -> m.SourceKind | None:
        return _KINDS.get(detect_openai(value) or "")

    def read(self, value: Any, kind: m.SourceKind, options: ReadOptions) -> m.Trace:
        trace = m.Trace(source_kind=kind, source_format=self.format)
        if kind == "request_response":
            trace.request, trace.response = exchange_from_openai(value)
        elif kind == "lm_request":
            trace.request = request_from_openai(value)
        else:
            trace.response = response_from_openai(value)
        return trace


SOURCE = _OpenAIChat()
"""OpenAI chat-completions payloads."""
