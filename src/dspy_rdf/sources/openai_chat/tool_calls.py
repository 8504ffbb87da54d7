"""Tool calls -> ``LMToolCallPart``: a request message's ``tool_calls`` as DSPy's ``_tool_call_from_openai``
reads them, and a provider response's (or a legacy history output's) as DSPy's ``provider_tool_call_to_part``
builds them, including one written as the ``str()`` of a LiteLLM object. Arguments that are not a JSON object
give ``{}`` and are kept in ``provider_data``."""

from __future__ import annotations

import ast
import json
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import expect_object, fail, kind_of
from dspy_rdf.sources.openai_chat.values import drop_nulls

__all__ = ["request_tool_calls", "tool_call_from_provider"]


def _parse_arguments(raw: Any, *, strict_object: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tool-call arguments -> (args, provider_data additions). Unusable arguments give ``{}`` (as DSPy) and are
    kept under ``raw_arguments`` with the reason under ``arguments_parse_error``."""
    if isinstance(raw, dict):
        return dict(raw), {}
    if isinstance(raw, str):
        if not raw and not strict_object:
            return {}, {}  # DSPy's request reader reads "" as no arguments
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as error:
            return {}, {"raw_arguments": raw, "arguments_parse_error": str(error)}
        if isinstance(parsed, dict):
            return parsed, {}
        return {}, {"raw_arguments": raw, "arguments_parse_error": f"arguments are JSON {kind_of(parsed)}, not an object"}
    return {}, {"raw_arguments": raw, "arguments_parse_error": f"arguments are {kind_of(raw)}, not a JSON object"}


def _request_tool_call(value: Any, path: str) -> m.LMToolCallPart:
    """One ``tool_calls`` item of a request message, as DSPy's ``_tool_call_from_openai`` reads it."""
    if not isinstance(value, dict):
        raise fail(path, f"expected a tool call object, got {kind_of(value)}")
    function = value.get("function", {})
    provider_data: dict[str, Any] = {}
    if not isinstance(function, dict):
        provider_data["function"] = function
        function = {}
    name = function.get("name") or value.get("name")
    if not isinstance(name, str) or not name:
        raise fail(f"{path}.function.name", "a tool call needs a function name")
    # The top-level keys DSPy reads; any other (or an unread alternative) is kept in provider_data.
    used = {"function", "call_id" if value.get("call_id") else "id"}
    if not function.get("name"):
        used.add("name")
    raw = function.get("arguments")
    if raw is None:
        raw = value.get("arguments", {})
        used.add("arguments")
    if value.get("type", "function") == "function":
        used.add("type")
    args, diagnostics = _parse_arguments(raw, strict_object=False)
    call_id = value.get("call_id") or value.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise fail(f"{path}.id", f"expected a string, got {kind_of(call_id)}")
    provider_data.update(drop_nulls({k: v for k, v in value.items() if k not in used}))
    function_extras = drop_nulls({k: v for k, v in function.items() if k not in ("name", "arguments")})
    if function_extras:
        provider_data["function"] = function_extras
    provider_data.update(diagnostics)
    return m.LMToolCallPart(name=name, call_id=call_id, args=args, provider_data=provider_data)


def request_tool_calls(value: Any, path: str) -> list[m.LMToolCallPart]:
    """A request message's ``tool_calls`` (None is none) -> tool-call parts, in order."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(path, f"expected a list of tool calls, got {kind_of(value)}")
    return [_request_tool_call(tc, f"{path}[{i}]") for i, tc in enumerate(value)]


def _parse_repr(text: str, path: str) -> dict[str, Any]:
    """The ``str()`` of a LiteLLM/pydantic object (``Name(key=value, ...)``) -> a dict, by parsing, never
    evaluating: only calls with keyword arguments, literals, lists and dicts are accepted."""

    def convert(node: ast.AST) -> Any:
        if isinstance(node, ast.Call) and not node.args and all(k.arg for k in node.keywords):
            return {k.arg: convert(k.value) for k in node.keywords}
        if isinstance(node, ast.List):
            return [convert(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]  # a None key is a ** unpacking, which is refused below
            if len(keys) == len(node.keys):
                return {convert(k): convert(v) for k, v in zip(keys, node.values, strict=True)}
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (str, int, float, bool))):
            return node.value
        raise ValueError(f"unsupported syntax {type(node).__name__}")

    try:
        tree = ast.parse(text.strip(), mode="eval")
        result = convert(tree.body)
    except (SyntaxError, ValueError) as error:
        raise fail(path, f"a tool call given as text must be the str() of a tool-call object; could not read it: {error}") from None
    if not isinstance(tree.body, ast.Call) or not isinstance(result, dict):
        raise fail(path, "a tool call given as text must be the str() of a tool-call object such as ChatCompletionMessageToolCall(...)")
    return result


def tool_call_from_provider(value: Any, path: str) -> m.LMToolCallPart:
    """A tool call of a provider response (or of a legacy history output) -> ``LMToolCallPart``, as DSPy's
    ``provider_tool_call_to_part`` builds it: ``provider_data`` is the whole tool call object, plus
    ``raw_arguments`` / ``arguments_parse_error`` when the arguments are not a JSON object (``args`` is then
    ``{}``). A tool call without a function name is an error."""
    provider_extra: dict[str, Any] = {}
    if isinstance(value, str):
        # json.dumps(history, default=str) wrote the LiteLLM object as its str(); DSPy's model_dump of the
        # live object would have dropped its null fields, so they are dropped here too.
        provider_extra["repr"] = value
        value = drop_nulls(_parse_repr(value, path))
        if isinstance(value.get("function"), dict):
            value["function"] = drop_nulls(value["function"])
    d = expect_object(value, path)
    function = d.get("function", {})
    if not isinstance(function, dict):
        function = {}
    name = function.get("name") or d.get("name")
    if not isinstance(name, str) or not name:
        raise fail(f"{path}.function.name", "a tool call needs a function name")
    raw = function.get("arguments", d.get("arguments", "{}"))
    args, diagnostics = _parse_arguments(raw, strict_object=True)
    call_id = d.get("call_id") or d.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise fail(f"{path}.id", f"expected a string, got {kind_of(call_id)}")
    return m.LMToolCallPart(name=name, call_id=call_id, args=args, provider_data={**d, **provider_extra, **diagnostics})
