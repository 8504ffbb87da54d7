"""What a span's attributes say, under each attribute vocabulary tracing tools write, read side by side.

Four vocabularies describe LM, tool and module spans; a span may carry several (MLflow's OpenTelemetry export keeps
attributes of its own next to the GenAI ones), and each fact is taken from the first that has it:

=====================  =====================================================================================
vocabulary             keys read
=====================  =====================================================================================
dspy-rdf's own         ``dspy_rdf.*``: what a program run holds that no convention has a key for (the call id
                       DSPy gave a call, a history entry's uuid and timestamp, evaluations and compilations, how a
                       tool execution was paired); written by :mod:`dspy_rdf.interop.otlp`
OpenTelemetry GenAI    ``gen_ai.operation.name``, ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
                       ``gen_ai.system_instructions`` (typed parts, :mod:`dspy_rdf.sources.genai`),
                       ``gen_ai.tool.definitions``, ``gen_ai.request.*``, ``gen_ai.response.*``, ``gen_ai.usage.*``,
                       ``gen_ai.tool.name`` / ``.call.id`` / ``.call.arguments`` / ``.call.result``,
                       ``gen_ai.workflow.name``, ``gen_ai.agent.name``
MLflow                 ``mlflow.spanType``, ``mlflow.spanInputs`` / ``mlflow.spanOutputs`` (DSPy's own LM call
                       payload when ``mlflow.message.format`` is ``dspy``, else an OpenAI chat request and response),
                       ``mlflow.chat.tokenUsage``, ``mlflow.chat.tools``, ``mlflow.llm.model``; the LM's keyword
                       arguments MLflow's DSPy autolog sets as plain attributes
OpenInference          ``openinference.span.kind``, ``input.value`` / ``output.value`` (DSPy's LM call payload for
                       its DSPy instrumentor), the flattened ``llm.input_messages.N.message.*`` /
                       ``llm.output_messages.N.message.*`` (``tool_calls.M.tool_call.*``, ``contents``),
                       ``llm.tools.N.tool.json_schema``, ``llm.token_count.*``, ``llm.invocation_parameters``,
                       ``llm.model_name`` / ``llm.provider``, ``llm.cost.total``, ``tool.name``, ``tool_call.*``
legacy GenAI           ``gen_ai.prompt`` / ``gen_ai.completion`` (JSON text, or flattened
                       ``gen_ai.prompt.N.role`` / ``.content`` / ``.tool_calls.M.*``),
                       ``gen_ai.usage.prompt_tokens`` / ``completion_tokens``
=====================  =====================================================================================

A trace's session and user are not facts of one call: :mod:`dspy_rdf.sources.spans` reads them from any span of the
trace (``session.id``, ``gen_ai.conversation.id``, ``user.id``; the root span's first).

Messages in OpenAI's chat form (DSPy's payloads, OpenInference's and the legacy flattened keys, once nested again)
are read by :mod:`dspy_rdf.sources.openai_chat` and DSPy's ``lm.history`` reader
(:mod:`dspy_rdf.sources.history_dict`), so they mean what they mean everywhere else. An attribute no reader took is
reported by :meth:`Attributes.unread`, for the trace's ``losses``.
"""

from __future__ import annotations

import json
import re
import uuid as uuid_lib
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.fields import expect_object, fail, kind_of
from dspy_rdf.sources.dspy33 import usage_from_json
from dspy_rdf.sources.genai import messages_from_genai, output_from_genai, part_from_genai, tools_from_genai
from dspy_rdf.sources.history_dict import FILLED_KEY, entry_from_history_dict
from dspy_rdf.sources.openai_chat import (
    config_from_kwargs,
    detect_openai,
    messages_from_openai,
    request_from_openai,
    response_from_openai,
    tools_from_openai,
)

__all__ = [
    "BOOKKEEPING",
    "ENTRY_UUID_NAMESPACE",
    "OPERATION_MODEL_TYPES",
    "Attributes",
    "CallKind",
    "LMFacts",
    "ToolFacts",
    "call_kind",
    "class_of",
    "decode_json",
    "error_text",
    "lm_facts",
    "module_facts",
    "tool_facts",
]

ENTRY_UUID_NAMESPACE = uuid_lib.uuid5(uuid_lib.NAMESPACE_URL, "urn:dspy-rdf:span-history-entry")
"""The uuid5 namespace of the history-entry uuids derived from a trace id and a span id, for LM spans that record none."""

class CallKind(Enum):
    """What a span is a call of."""

    LM = "lm"
    TOOL = "tool"
    MODULE = "module"
    ADAPTER = "adapter"  # a DSPy adapter's format, parse or call: not a call of a program run (DSPy has no callback for it)
    EVALUATE = "evaluate"
    COMPILE = "compile"


def decode_json(text: str, path: str) -> Any:
    """Parse JSON text found in an attribute; :class:`TraceInputError` naming ``path`` when it is not JSON or nests too
    deeply for Python to read."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise fail(path, f"not valid JSON: {exc}") from None
    except RecursionError:
        raise fail(path, "JSON nested too deeply to read") from None


class Attributes:
    """A span's attributes, remembering which a reader took (:meth:`unread` lists the others). ``path`` names the
    attributes in errors."""

    def __init__(self, values: dict[str, Any], path: str) -> None:
        self.values = values
        self.path = path
        self.read: set[str] = set()

    def has(self, key: str) -> bool:
        """Whether the span has ``key`` (with a value other than null)."""
        return self.values.get(key) is not None

    def get(self, key: str) -> Any:
        """The value of ``key`` (None when absent), marked as read."""
        if key in self.values:
            self.read.add(key)
        return self.values.get(key)

    def structured(self, key: str) -> Any:
        """The value of ``key`` with JSON text parsed (conventions allow structured values or their JSON text)."""
        value = self.get(key)
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
            except RecursionError:
                raise fail(self.where(key), "JSON nested too deeply to read") from None
        return value

    def text(self, key: str) -> str | None:
        """A string attribute (a non-string value is an error naming it)."""
        value = self.get(key)
        if value is not None and not isinstance(value, str):
            raise fail(self.where(key), f"expected a string, got {kind_of(value)}")
        return value

    def integer(self, key: str) -> int | None:
        """An integer attribute (integers written as text accepted, as OTLP JSON writes them)."""
        value = self.get(key)
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,19}", value):
            return int(value)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise fail(self.where(key), f"expected an integer, got {kind_of(value)}")
        if value is not None and not -(2**63) <= value < 2**63:
            raise fail(self.where(key), f"expected a 64-bit integer, got one of {len(str(abs(value)))} digits")
        return value

    def number(self, key: str) -> float | None:
        """A number attribute."""
        value = self.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise fail(self.where(key), f"expected a number, got {kind_of(value)}")
        if isinstance(value, int) and abs(value) > 2**1023:
            raise fail(self.where(key), f"the number has {len(str(abs(value)))} digits, too large for a double")
        return None if value is None else float(value)

    def with_prefix(self, prefix: str) -> dict[str, Any]:
        """Every attribute under ``prefix`` (``llm.input_messages.``), keyed by the rest of its name, marked as read."""
        found = {k[len(prefix):]: v for k, v in self.values.items() if k.startswith(prefix)}
        self.read.update(prefix + k for k in found)
        return found

    def has_prefix(self, prefix: str) -> bool:
        """Whether any attribute starts with ``prefix``."""
        return any(k.startswith(prefix) for k in self.values)

    def where(self, key: str) -> str:
        """The path of attribute ``key`` for errors."""
        return f"{self.path}.{key}" if self.path else key

    def unread(self, ignored: frozenset[str] = frozenset()) -> list[str]:
        """The attributes no reader took, but those in ``ignored``, sorted."""
        return sorted(k for k in self.values if k not in self.read and k not in ignored)


# Attributes that say what the span is or repeat what another one says: taking them loses nothing.
BOOKKEEPING = frozenset({
    "mlflow.traceRequestId", "mlflow.spanType", "mlflow.spanLogLevel", "mlflow.message.format", "mlflow.llm.provider",
    "openinference.span.kind", "input.mime_type", "output.mime_type", "llm.provider", "llm.system",
    "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.system",
})
"""Attributes that say what kind of span it is or who provided the model: the call's kind and model say it."""

_LM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
OPERATION_MODEL_TYPES: dict[str | None, str | None] = {"chat": "chat", "text_completion": "text", "generate_content": None}
"""An LM span's ``gen_ai.operation.name`` -> the history entry's ``model_type`` (DSPy's ``chat`` or ``text``; MLflow
names an LM span of no known type ``generate_content``)."""
_MODULE_OPERATIONS = frozenset({"invoke_agent", "invoke_workflow", "create_agent", "embeddings", "retrieval"})
# MLflow 2 numbers the spans of one trace that share a name: ChatAdapter.format_1
_ADAPTER_NAME = re.compile(r"\w*Adapter\.(?:format|parse|__call__|acall)(?:_\d+)?")
_MLFLOW_LM_TYPES = frozenset({"CHAT_MODEL", "LLM"})
_MESSAGE_KEYS = (
    "mlflow.chat.messages", "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "mlflow.spanInputs",
    "mlflow.spanOutputs", "input.value", "output.value", "gen_ai.prompt", "gen_ai.completion",
)
_MESSAGE_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "gen_ai.prompt.", "gen_ai.completion.")
# an LM span of the GenAI conventions records a call when it has its messages, or (content capture off) what the
# response said
_GENAI_EXCHANGE_KEYS = (
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.response.id",
    "gen_ai.response.finish_reasons", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
)


def _mlflow_type(a: Attributes) -> str | None:
    value = a.values.get("mlflow.spanType")
    return value if isinstance(value, str) else None


def _is_lm_payload(a: Attributes) -> bool:
    """Whether the span carries an LM call's messages or model under any vocabulary."""
    return (
        any(a.has(k) for k in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.request.model", "mlflow.llm.model", "mlflow.chat.messages"))
        or a.values.get("mlflow.message.format") is not None
        or any(a.has_prefix(p) for p in _MESSAGE_PREFIXES)
        or a.has("gen_ai.prompt")
        or a.has("llm.model_name")
    )


def _operation(a: Attributes) -> str | None:
    value = a.values.get("gen_ai.operation.name")
    return value if isinstance(value, str) else None


def call_kind(a: Attributes, name: str) -> CallKind:
    """What ``a`` span named ``name`` is a call of (see the module docstring); every span is one of them."""
    own = a.values.get("dspy_rdf.call")
    if own in ("evaluate", "compile"):
        return CallKind(own)
    if _ADAPTER_NAME.fullmatch(name) or _mlflow_type(a) == "PARSER" or _operation(a) == "PARSER":
        return CallKind.ADAPTER
    mlflow_type = _mlflow_type(a)
    if mlflow_type is not None:
        if mlflow_type == "TOOL":
            return CallKind.TOOL
        # MLflow's DSPy autolog gives dspy.Predict modules the LLM type too; an LM call says which model it called
        if mlflow_type == "CHAT_MODEL" or mlflow_type == "LLM" and (_is_lm_payload(a) or isinstance(a.values.get("model"), str)):
            return CallKind.LM
        return CallKind.MODULE
    operation = _operation(a)
    if operation == "execute_tool":
        return CallKind.TOOL
    if operation in _LM_OPERATIONS:
        # MLflow's GenAI translation names a dspy.Predict module generate_content too: it has no model
        return CallKind.LM if _is_lm_payload(a) else CallKind.MODULE
    if operation in _MODULE_OPERATIONS:
        return CallKind.MODULE
    kind = a.values.get("openinference.span.kind")
    if kind == "LLM":
        return CallKind.LM
    if kind == "TOOL":
        return CallKind.TOOL
    if kind is None and operation is None and (_is_lm_payload(a) or a.has("gen_ai.system")):
        return CallKind.LM  # an LM span that does not name its operation (the legacy conventions did not)
    return CallKind.MODULE


# --- span names ------------------------------------------------------------------------------------------------

_METHOD_SUFFIX = re.compile(r"\.(?:forward|aforward|__call__|acall)(?:_\d+)?\Z")
_OPERATION_PREFIX = re.compile(r"(?:invoke_agent|invoke_workflow|execute_tool|chat|text_completion|generate_content) ")


def class_of(name: str) -> str:
    """The class a span name says was called: ``ReAct.forward`` -> ``ReAct``, ``Predict(QA).forward`` -> ``Predict``,
    ``invoke_agent ReAct.forward`` -> ``ReAct``, MLflow 2's ``Predict.forward_1`` -> ``Predict``."""
    name = _OPERATION_PREFIX.sub("", name, count=1)
    name = _METHOD_SUFFIX.sub("", name)
    return re.sub(r"\(\w*\)\Z", "", name) or name


# --- modules ---------------------------------------------------------------------------------------------------


def _payload(a: Attributes, mlflow_key: str, oi_key: str) -> Any:
    """A module's or tool's inputs or outputs: MLflow's JSON value, or OpenInference's value (JSON when it parses)."""
    if a.has(mlflow_key):
        return a.get(mlflow_key)
    if a.has(oi_key):
        return a.structured(oi_key)
    return None


def module_facts(a: Attributes, name: str) -> tuple[str, Any, Any, m.LMUsage | None]:
    """(module class, input summary, output summary, usage) of a module span; the usage is what the recorder reported
    for the LM calls within the module as a whole (MLflow's autolog: on the top-level module only)."""
    workflow = a.text("gen_ai.workflow.name")
    module = workflow if workflow is not None else class_of(a.text("gen_ai.agent.name") or name)
    if workflow is None and module == "generate_content" and _operation(a) == "generate_content":
        # MLflow's GenAI translation names a span by the operation its span type maps to, and MLflow's DSPy autolog
        # gives the LLM type to dspy.Predict modules only (an LM call has a model, and is an LM span)
        module = "Predict"
    return module, _payload(a, "mlflow.spanInputs", "input.value"), _payload(a, "mlflow.spanOutputs", "output.value"), _usage(a)


# --- tools -----------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class ToolFacts:
    """What a tool span says about the execution."""

    name: str
    call_id: str | None
    args: dict[str, Any]
    result: Any
    losses: list[str] = field(default_factory=list)


def tool_facts(a: Attributes, name: str) -> ToolFacts:
    """The tool, call id, arguments and result of a tool span."""
    tool = a.text("gen_ai.tool.name") or a.text("tool.name") or a.text("tool_call.function.name")
    # MLflow's DSPy autolog names the span Tool.<name> and sets the tool's name as a plain attribute; its GenAI
    # translation takes the span name for gen_ai.tool.name
    mlflow_name = a.values.get("name")
    if isinstance(mlflow_name, str) and (tool is None and _mlflow_type(a) == "TOOL" or tool == f"Tool.{mlflow_name}"):
        tool = a.get("name")
    tool = tool or re.sub(r"\ATool\.", "", class_of(name))
    call_id = a.text("gen_ai.tool.call.id") or a.text("tool_call.id")
    losses = []
    if a.has("gen_ai.tool.call.arguments"):
        raw = a.structured("gen_ai.tool.call.arguments")
    elif a.has("mlflow.spanInputs"):
        raw = a.get("mlflow.spanInputs")
    elif a.has("input.value"):
        raw = a.structured("input.value")
        if isinstance(raw, dict) and raw.keys() == {"kwargs"} and isinstance(raw["kwargs"], dict):
            raw = raw["kwargs"]  # OpenInference binds dspy.Tool.__call__(**kwargs) as {"kwargs": {...}}
    else:
        raw = a.structured("tool_call.function.arguments")
    if raw is None:
        args: dict[str, Any] = {}
    elif isinstance(raw, dict):
        args = raw
    else:
        args = {}
        losses.append(f"the arguments are not an object ({kind_of(raw)}); left out")
    if a.has("gen_ai.tool.call.result"):
        result = a.structured("gen_ai.tool.call.result")
    else:
        result = _payload(a, "mlflow.spanOutputs", "output.value")
    return ToolFacts(name=tool, call_id=call_id, args=args, result=result, losses=losses)


# --- LM calls --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class LMFacts:
    """What an LM span says: the model, and the history entry when it holds a request or a response."""

    model: str | None
    entry: m.LMHistoryEntry | None
    losses: list[str] = field(default_factory=list)


def _unflatten(flat: dict[str, Any]) -> Any:
    """Dotted keys (``0.message.tool_calls.1.tool_call.id``) nested again; objects whose keys are all numbers are
    lists in that order."""
    root: dict[str, Any] = {}
    for key, value in flat.items():
        node = root
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = value
    return _lists(root)


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    items = {k: _lists(v) for k, v in node.items()}
    if items and all(k.isdigit() for k in items):
        return [items[k] for k in sorted(items, key=int)]
    return items


def _openinference_message(d: Any, path: str) -> dict[str, Any]:
    """One OpenInference message (``message.role``, ``message.content``, ``message.contents``,
    ``message.tool_calls``, ``message.tool_call_id``, ``message.name``) in OpenAI's chat form."""
    d = expect_object(d, path)
    msg = expect_object(d.get("message", d), path)
    out: dict[str, Any] = {"role": msg.get("role", "user")}
    if msg.get("contents") is not None:
        blocks = []
        for i, item in enumerate(msg["contents"] if isinstance(msg["contents"], list) else []):
            content = expect_object(item, f"{path}.message.contents.{i}").get("message_content", item)
            content = expect_object(content, f"{path}.message.contents.{i}")
            if content.get("type") == "image":
                url = ((content.get("image") or {}).get("image") or {}).get("url")
                blocks.append({"type": "image_url", "image_url": {"url": url}})
            else:
                blocks.append({"type": "text", "text": content.get("text", "")})
        out["content"] = blocks
    else:
        out["content"] = msg.get("content")
    for key in ("name", "tool_call_id"):
        if msg.get(key) is not None:
            out[key] = msg[key]
    calls = msg.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = []
        for i, raw in enumerate(calls):
            call = expect_object(raw, f"{path}.message.tool_calls.{i}")
            call = expect_object(call.get("tool_call", call), f"{path}.message.tool_calls.{i}")
            function = given if isinstance(given := call.get("function"), dict) else {}
            arguments = function.get("arguments", call.get("arguments", "{}"))
            out["tool_calls"].append({
                "id": call.get("id"),
                "type": "function",
                "function": {"name": function.get("name", call.get("name")), "arguments": arguments},
            })
    return out


def _flattened_messages(a: Attributes, prefix: str) -> list[dict[str, Any]] | None:
    """Messages under flattened keys (OpenInference's ``llm.input_messages.``, the legacy ``gen_ai.prompt.``), or the
    legacy JSON text of a whole ``gen_ai.prompt`` / ``gen_ai.completion``, in OpenAI's chat form."""
    flat = a.with_prefix(prefix)
    if flat:
        items = _unflatten(flat)
        if not isinstance(items, list):
            raise fail(a.where(prefix.rstrip(".")), "expected numbered messages (0, 1, ...)")
        return [_openinference_message(item, a.where(f"{prefix}{i}")) for i, item in enumerate(items)]
    whole = prefix.rstrip(".")
    if prefix.startswith("gen_ai.") and a.has(whole):
        value = a.structured(whole)
        if isinstance(value, str):
            role = "user" if whole == "gen_ai.prompt" else "assistant"
            return [{"role": role, "content": value}]
        if isinstance(value, dict):
            value = [value]
        if isinstance(value, list):
            return [_openinference_message(item, f"{a.where(whole)}[{i}]") for i, item in enumerate(value)]
        raise fail(a.where(whole), f"expected messages, got {kind_of(value)}")
    return None


def _usage(a: Attributes) -> m.LMUsage | None:
    """Token usage under any vocabulary: ``gen_ai.usage.*``, MLflow's ``mlflow.chat.tokenUsage``, OpenInference's
    ``llm.token_count.*``."""
    found: dict[str, int | None] = {}
    for key, name in (
        ("gen_ai.usage.input_tokens", "input_tokens"),
        ("gen_ai.usage.output_tokens", "output_tokens"),
        ("gen_ai.usage.prompt_tokens", "prompt_tokens"),
        ("gen_ai.usage.completion_tokens", "completion_tokens"),
        ("gen_ai.usage.cache_read.input_tokens", "cache_read_tokens"),
        ("gen_ai.usage.cache_creation.input_tokens", "cache_write_tokens"),
        ("gen_ai.usage.reasoning.output_tokens", "reasoning_tokens"),
        ("llm.token_count.prompt", "prompt_tokens"),
        ("llm.token_count.completion", "completion_tokens"),
        ("llm.token_count.total", "total_tokens"),
        ("llm.token_count.prompt_details.cache_read", "cache_read_tokens"),
        ("llm.token_count.prompt_details.cache_write", "cache_write_tokens"),
        ("llm.token_count.completion_details.reasoning", "reasoning_tokens"),
    ):
        if a.has(key) and name not in found:
            found[name] = a.integer(key)
    if not found and a.has("mlflow.chat.tokenUsage"):
        usage = expect_object(a.get("mlflow.chat.tokenUsage"), a.where("mlflow.chat.tokenUsage"))
        names = {"cache_read_input_tokens": "cache_read_tokens", "cache_creation_input_tokens": "cache_write_tokens"}
        found = {names.get(k, k): v for k, v in usage.items()}
    return usage_from_json(found, a.where("usage")) if found else None


def _model(a: Attributes) -> str | None:
    model = next((a.text(key) for key in ("gen_ai.request.model", "mlflow.llm.model") if a.has(key)), None)
    # MLflow's DSPy autolog sets the LM's model as a plain attribute too
    if isinstance(a.values.get("model"), str) and (model is None and _mlflow_type(a) is not None or a.values["model"] == model):
        return a.text("model")
    if model is not None:
        return model
    name = a.text("llm.model_name") if a.has("llm.model_name") else None
    if name is not None:
        provider = a.values.get("llm.provider")
        # OpenInference splits a LiteLLM model id ("openai/gpt-4o-mini") into provider and name: join them again
        return f"{provider}/{name}" if isinstance(provider, str) and provider and "/" not in name else name
    return None


def _genai_config(a: Attributes) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for key, name in (
        ("gen_ai.request.temperature", "temperature"),
        ("gen_ai.request.max_tokens", "max_tokens"),
        ("gen_ai.request.top_p", "top_p"),
        ("gen_ai.request.stop_sequences", "stop"),
        ("gen_ai.request.choice.count", "n"),
        ("gen_ai.request.seed", "seed"),
        ("gen_ai.request.top_k", "top_k"),
        ("gen_ai.request.frequency_penalty", "frequency_penalty"),
        ("gen_ai.request.presence_penalty", "presence_penalty"),
    ):
        if a.has(key):
            value = a.get(key)
            numeric = name in ("max_tokens", "n", "seed", "top_k") and isinstance(value, str) and re.fullmatch(r"[0-9]{1,19}", value)
            kwargs[name] = int(value) if numeric else value
    return kwargs


def _outputs_from_genai(a: Attributes) -> list[m.LMOutput]:
    raw = a.structured("gen_ai.output.messages")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise fail(a.where("gen_ai.output.messages"), f"expected a list of messages, got {kind_of(raw)}")
    return [output_from_genai(o, f"{a.where('gen_ai.output.messages')}[{i}]") for i, o in enumerate(raw)]


def _genai_exchange(a: Attributes, model: str) -> tuple[m.LMRequest, m.LMResponse]:
    messages: list[m.LMMessage] = []
    if a.has("gen_ai.system_instructions"):
        raw = a.structured("gen_ai.system_instructions")
        where = a.where("gen_ai.system_instructions")
        if isinstance(raw, str):
            raw = [{"type": "text", "content": raw}]
        if not isinstance(raw, list):
            raise fail(where, f"expected a list of parts, got {kind_of(raw)}")
        parts = [part_from_genai(p, f"{where}[{i}]") for i, p in enumerate(raw)]
        messages.append(m.LMMessage(role="system", parts=parts, metadata={"gen_ai": {"system_instructions": True}}))
    if a.has("gen_ai.input.messages"):
        messages += messages_from_genai(a.structured("gen_ai.input.messages"), a.where("gen_ai.input.messages"))
    tools = tools_from_genai(a.structured("gen_ai.tool.definitions"), a.where("gen_ai.tool.definitions")) if a.has("gen_ai.tool.definitions") else []
    request = m.LMRequest(model=model, messages=messages, tools=tools, config=config_from_kwargs(_genai_config(a), a.where("gen_ai.request")))
    outputs = _outputs_from_genai(a)
    reasons = a.get("gen_ai.response.finish_reasons")
    if isinstance(reasons, list) and not outputs:
        outputs = [m.LMOutput() for _ in reasons]  # content capture off: one output per finish reason, without parts
    if isinstance(reasons, list) and len(reasons) == len(outputs):
        for output, reason in zip(outputs, reasons):
            if output.finish_reason is None and isinstance(reason, str):
                output.finish_reason = reason
                output.truncated = output.truncated or reason == "length"
    response = m.LMResponse(outputs=outputs or [m.LMOutput()], model=a.text("gen_ai.response.model"), response_id=a.text("gen_ai.response.id"))
    return request, response


def _dspy_payload(a: Attributes) -> tuple[dict[str, Any], Any] | None:
    """DSPy's own LM call payload, when the span holds it: the call's arguments (``messages`` or ``prompt``, and the
    keyword arguments) and what it returned (a list of outputs). MLflow's DSPy autolog and OpenInference's DSPy
    instrumentor both record it."""
    message_format = a.values.get("mlflow.message.format")
    inputs = a.values.get("mlflow.spanInputs")
    # MLflow 3 says the format; MLflow 2 does not, and DSPy's payload is the one whose outputs are a list
    dspy_shaped = isinstance(inputs, dict) and bool({"messages", "prompt"} & inputs.keys()) and isinstance(a.values.get("mlflow.spanOutputs"), list)
    if _mlflow_type(a) is not None and (message_format == "dspy" or message_format is None and dspy_shaped):
        if not isinstance(inputs, dict):
            return None
        a.get("mlflow.spanInputs")
        kwargs = {k: v for k, v in inputs.items() if k not in ("messages", "prompt", "items", "request")}
        # the LM's own keyword arguments, which MLflow sets as plain attributes
        for key, value in a.values.items():
            if "." not in key and key not in ("model", "model_type"):
                kwargs.setdefault(key, a.get(key))
        call = {"messages": inputs.get("messages"), "prompt": inputs.get("prompt"), "kwargs": kwargs}
        return call, a.get("mlflow.spanOutputs")
    if a.values.get("openinference.span.kind") == "LLM" and a.has("input.value"):
        inputs = a.structured("input.value")
        if not isinstance(inputs, dict) or not ({"messages", "prompt"} & inputs.keys()):
            a.read.discard("input.value")
            return None
        kwargs = given if isinstance(given := inputs.get("kwargs"), dict) else {}
        if a.has("llm.invocation_parameters"):
            params = a.structured("llm.invocation_parameters")
            if isinstance(params, dict):
                kwargs = {**params, **kwargs}  # the LM's keyword arguments, then the call's
        outputs = a.structured("output.value") if a.has("output.value") else None
        return {"messages": inputs.get("messages"), "prompt": inputs.get("prompt"), "kwargs": kwargs}, outputs
    return None


def _openai_exchange(a: Attributes, model: str) -> tuple[m.LMRequest, m.LMResponse] | None:
    """MLflow's inputs and outputs of an LM span of another library (OpenAI's chat request and response)."""
    inputs, outputs = a.values.get("mlflow.spanInputs"), a.values.get("mlflow.spanOutputs")
    # detect_openai finds a request in a dict only
    if not isinstance(inputs, dict) or (detect_openai(inputs) != "openai_request" and not isinstance(inputs.get("messages"), list)):
        return None
    a.get("mlflow.spanInputs")
    request = request_from_openai({"model": model, **inputs}, a.where("mlflow.spanInputs"))
    if detect_openai(outputs) == "openai_response":
        a.get("mlflow.spanOutputs")
        response = response_from_openai(outputs, a.where("mlflow.spanOutputs"), request_model=request.model)
    else:
        response = m.LMResponse(outputs=[m.LMOutput()])
    return request, response


def _flattened_exchange(a: Attributes, model: str) -> tuple[m.LMRequest, m.LMResponse] | None:
    """OpenInference's flattened messages, or the legacy ``gen_ai.prompt`` / ``gen_ai.completion``."""
    for inputs_prefix, outputs_prefix in (("llm.input_messages.", "llm.output_messages."), ("gen_ai.prompt.", "gen_ai.completion.")):
        inputs = _flattened_messages(a, inputs_prefix)
        outputs = _flattened_messages(a, outputs_prefix)
        if inputs is None and outputs is None:
            continue
        tools: list[m.LMToolSpec] = []
        if a.has_prefix("llm.tools."):
            schemas = _unflatten(a.with_prefix("llm.tools."))
            for i, item in enumerate(schemas if isinstance(schemas, list) else []):
                raw = ((item or {}).get("tool") or {}).get("json_schema") if isinstance(item, dict) else None
                spec = decode_json(raw, a.where(f"llm.tools.{i}.tool.json_schema")) if isinstance(raw, str) else raw
                tools += tools_from_openai([spec], a.where(f"llm.tools.{i}.tool.json_schema"))
        params = a.structured("llm.invocation_parameters") if a.has("llm.invocation_parameters") else {}
        params = {k: v for k, v in (params if isinstance(params, dict) else {}).items() if k not in ("tools", "model")}
        config = config_from_kwargs({**params, **_genai_config(a)}, a.where("llm.invocation_parameters"))
        request = m.LMRequest(model=model, messages=messages_from_openai(inputs or [], a.where(inputs_prefix.rstrip("."))), tools=tools, config=config)
        reasons = {i: a.values.get(f"{outputs_prefix}{i}.finish_reason") for i in range(len(outputs or []))}
        generated = messages_from_openai([{**msg, "role": msg.get("role") or "assistant"} for msg in outputs or []], a.where(outputs_prefix.rstrip(".")))
        response = m.LMResponse(outputs=[
            m.LMOutput(parts=msg.parts, finish_reason=reasons[i] if isinstance(reasons[i], str) else None, truncated=reasons[i] == "length")
            for i, msg in enumerate(generated)
        ] or [m.LMOutput()])
        response.model = a.text("gen_ai.response.model")
        response.response_id = a.text("gen_ai.response.id")
        return request, response
    return None


def lm_facts(a: Attributes, trace_id: str, span_id: str, timestamp: str) -> LMFacts:
    """The model and the history entry of an LM span. The entry's ``uuid`` and ``timestamp`` are dspy-rdf's own
    attributes when the span has them, else derived (a uuid5 of the trace and span ids; the span's end) and marked in
    ``extra_fields["dspy_rdf_filled"]``."""
    model = _model(a)
    losses: list[str] = []
    filled: dict[str, str] = {}
    entry_uuid = a.text("dspy_rdf.entry.uuid")
    if entry_uuid is None:
        entry_uuid, filled["uuid"] = str(uuid_lib.uuid5(ENTRY_UUID_NAMESPACE, f"{trace_id}/{span_id}")), "derived"
    entry_time = a.text("dspy_rdf.entry.timestamp")
    if entry_time is None:
        entry_time, filled["timestamp"] = timestamp, "derived"
    if a.has("dspy_rdf.entry.filled"):
        own = a.structured("dspy_rdf.entry.filled")
        filled = expect_object(own, a.where("dspy_rdf.entry.filled"))
    model_type = OPERATION_MODEL_TYPES.get(_operation(a))
    if model_type is None and isinstance(a.values.get("model_type"), str) and _mlflow_type(a) is not None:
        model_type = a.get("model_type")
    entry = None
    dspy_call = None if a.has("gen_ai.input.messages") or a.has("gen_ai.output.messages") else _dspy_payload(a)
    unknown = "the span does not say which model was called; recorded as 'unknown'"
    if dspy_call is not None:
        call, outputs = dspy_call
        if model is None:
            model = "unknown"
            losses.append(unknown)
        history = {**call, "outputs": outputs if isinstance(outputs, list) else [], "model": model, "model_type": model_type,
                   "timestamp": entry_time, "uuid": entry_uuid}
        if outputs is not None and not isinstance(outputs, list):
            losses.append(f"the LM's outputs are not a list ({kind_of(outputs)}); left out")
        entry = entry_from_history_dict(history, a.path)
        entry.response.usage = _usage(a)
    else:
        exchange = None
        if any(a.has(k) for k in _GENAI_EXCHANGE_KEYS):
            exchange = _genai_exchange(a, model or "unknown")
        elif a.has("mlflow.spanInputs"):
            exchange = _openai_exchange(a, model or "unknown")
        if exchange is None:
            exchange = _flattened_exchange(a, model or "unknown")
        if exchange is not None:
            if model is None:
                model = "unknown"
                losses.append(unknown)
            request, response = exchange
            usage = _usage(a)  # read (and so taken) even when the response's own usage says more
            if response.usage is None:
                response.usage = usage
            entry = m.LMHistoryEntry(request=request, response=response, timestamp=entry_time, uuid=entry_uuid, model_type=model_type)
    if entry is not None:
        if a.has("mlflow.chat.tools"):  # MLflow's ChatTool list, OpenAI's shape: the tools offered, when the call does not say
            tools = tools_from_openai(a.structured("mlflow.chat.tools"), a.where("mlflow.chat.tools"))
            entry.request.tools = entry.request.tools or tools
        if a.has("llm.cost.total"):
            entry.response.cost = a.number("llm.cost.total")
        if entry.response.model is None:
            entry.response.model = entry.request.model
        if filled:
            entry.extra_fields[FILLED_KEY] = filled
        # the other vocabularies' copies of the same messages say nothing more
        for key in _MESSAGE_KEYS:
            a.get(key)
        for prefix in _MESSAGE_PREFIXES:
            a.with_prefix(prefix)
    else:
        for key in ("uuid", "timestamp", "filled"):
            a.read.discard(f"dspy_rdf.entry.{key}")
    return LMFacts(model=model, entry=entry, losses=losses)


def error_text(failed: bool, message: str, events: list[tuple[str, dict[str, Any]]]) -> str | None:
    """The error of a span that ``failed`` (status ERROR): its status message, else its exception event as
    ``Type: message``; None for a span that did not fail."""
    if not failed:
        return None
    for name, attributes in events:
        if name == "exception":
            kind, text = attributes.get("exception.type"), attributes.get("exception.message")
            found = f"{kind}: {text}" if kind and text else str(kind or text or "exception")
            return message or found
    return message or "error"
