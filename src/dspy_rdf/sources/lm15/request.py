"""An lm15 request dict (``request_to_dict``) -> ``LMRequest``: the system prompt and messages, function
tools as tool specs (builtin tools kept as lm15's JSON), and the config; a tool choice may name only tools
the request has."""

from __future__ import annotations

from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.fields import check_keys, expect_object, fail, get_json_object, get_list, get_str
from dspy_rdf.sources.lm15.config import config_from_lm15
from dspy_rdf.sources.lm15.fields import get_choice, get_text, with_lm15
from dspy_rdf.sources.lm15.messages import message_from_lm15, system_message

__all__ = ["request_from_lm15"]

_REQUEST_KEYS = frozenset({"model", "messages", "system", "tools", "config"})


def _tools(d: dict[str, Any], path: str) -> tuple[list[m.LMToolSpec], list[dict[str, Any]]]:
    """Function tools as tool specs, builtin tools as JSON with their position in lm15's list."""
    specs: list[m.LMToolSpec] = []
    builtins: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, raw in enumerate(get_list(d, "tools", path)):
        p = f"{path}.tools[{i}]"
        tool = expect_object(raw, p)
        tool_type = get_choice(tool, "type", p, ("function", "builtin"), default="function")
        name = get_text(tool, "name", p, required=True)
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


def request_from_lm15(value: Any, path: str = "request") -> m.LMRequest:
    """Turn an lm15 request dict (``request_to_dict``) into a model request."""
    d = expect_object(value, path)
    check_keys(d, _REQUEST_KEYS, path, "an lm15 request")
    model = get_text(d, "model", path, required=True)
    raw_messages = get_list(d, "messages", path, required=True)
    if not raw_messages:
        raise fail(f"{path}.messages", "an lm15 request needs at least one message")
    messages = [] if d.get("system") is None else [system_message(d["system"], f"{path}.system")]
    messages += [message_from_lm15(x, f"{path}.messages[{i}]") for i, x in enumerate(raw_messages)]
    tools, builtins = _tools(d, path)
    config = config_from_lm15(d.get("config"), f"{path}.config")
    names = {t.name for t in tools} | {b["name"] for b in builtins}
    if config.tool_choice is not None and (missing := sorted(set(config.tool_choice.allowed or ()) - names)):
        raise fail(f"{path}.config.tool_choice.allowed", f"names tools the request lacks: {', '.join(missing)}")
    return m.LMRequest(
        model=model,
        messages=messages,
        tools=tools,
        config=config,
        metadata=with_lm15({}, {"builtin_tools": builtins} if builtins else {}),
    )
