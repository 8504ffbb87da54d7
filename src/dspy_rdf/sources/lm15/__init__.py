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

Where each part is: :mod:`.parts`, :mod:`.messages`, :mod:`.request` (with :mod:`.config` for its
``Config``) and :mod:`.response` read lm15's JSON, with the field readers they share in :mod:`.fields`;
:mod:`.detect` says which lm15 object a JSON value is; :mod:`.live` turns live lm15 objects into that JSON.
This module holds the source itself and the ``{request, response}`` pair.
"""

from __future__ import annotations

from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.sources.base import ReadOptions, Source
from dspy_rdf.sources.lm15.detect import detect_lm15, lm15_kind
from dspy_rdf.sources.lm15.fields import LM15_KEY
from dspy_rdf.sources.lm15.live import lm15_to_json
from dspy_rdf.sources.lm15.messages import message_from_lm15
from dspy_rdf.sources.lm15.parts import LM15_PART_TYPES, part_from_lm15
from dspy_rdf.sources.lm15.request import request_from_lm15
from dspy_rdf.sources.lm15.response import response_from_lm15

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
