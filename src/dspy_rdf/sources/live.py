"""Live DSPy objects as JSON data, converted the way their own libraries write them.

A running DSPy program holds its traces as live objects: ``lm.history`` dicts holding LiteLLM ``ModelResponse`` and
``ChatCompletionMessageToolCall`` objects (DSPy's legacy path with ``dspy.LM``), lm15 ``Request`` and ``Response``
objects (DSPy 3.4), typed ``LMHistoryEntry`` models (DSPy 3.3 under ``experimental=True``), ``dspy.ToolCalls``,
``dspy.History``, ``dspy.Prediction``. :func:`json_data` turns any of them into plain JSON data (what the readers of
:mod:`dspy_rdf.sources` take): pydantic models with ``model_dump(mode="json")``, lm15 objects with lm15's own serde,
DSPy's ``Example`` and ``Prediction`` as their fields, a pydantic model class (a ``response_format``) as the JSON
schema the provider is sent for it. A value that has no JSON form is kept as its text, and the
place and the reason are added to ``losses`` (which a trace records in ``losses``), so that nothing is dropped
silently.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

__all__ = ["MAX_DEPTH", "builtin_value", "is_lm15", "json_data", "json_key", "loss", "text_of", "unicode_text"]

MAX_DEPTH = 200
"""Deeper values are kept as their text (a live object graph can be cyclic)."""


def is_lm15(obj: Any) -> bool:
    """Whether ``obj`` is an object of lm15 (DSPy 3.4's vendored LM library)."""
    module = type(obj).__module__
    return module.startswith("dspy._vendor.lm15") or module.split(".")[0] == "lm15"


def loss(field: str, reason: str) -> dict[str, str]:
    """One record of what could not be carried exactly: where (a dotted path) and why."""
    return {"field": field or "(the value)", "reason": reason}


def json_data(value: Any, *, path: str = "", losses: list[dict[str, str]] | None = None) -> Any:
    """``value`` as JSON data (dicts with string keys, lists, strings, numbers, booleans, null); see the module
    docstring. What had to be kept as text is appended to ``losses`` (when given) as :func:`loss` records."""
    return _convert(value, path, losses if losses is not None else [], 0)


def builtin_value(value: Any) -> Any:
    """A string, integer or float of a subclass (a ``str`` or ``int`` enum member, a library's own string type) as the
    plain value it holds; anything else as it is. Recorded runs hold plain values only: they go to a process that
    cannot import the program's classes, and their JSON is the value, not the member's name."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or not isinstance(value, (str, int, float)):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    return int.__int__(value) if isinstance(value, int) else float.__float__(value)


def json_key(key: Any, path: str, losses: list[dict[str, str]]) -> str:
    """A dict key as JSON text: a string as the text it holds (a string enum member as its value), anything else as
    its ``str`` (see :func:`text_of`)."""
    if isinstance(key, str):
        return unicode_text(builtin_value(key), path, losses)
    return text_of(key, path, losses)


def unicode_text(text: str, path: str, losses: list[dict[str, str]]) -> str:
    """``text`` as RDF and UTF-8 can hold it: a lone UTF-16 surrogate (half of a character, e.g. an emoji cut by a
    token limit) has no encoding, so it becomes U+FFFD and the place is added to ``losses``."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Through UTF-16: a pair of surrogates that makes one character is kept as that character.
        losses.append(loss(path, "lone UTF-16 surrogate(s), which no Unicode text can hold, replaced by U+FFFD"))
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def text_of(value: Any, path: str, losses: list[dict[str, str]], *, use_repr: bool = False) -> str:
    """``str(value)`` (or ``repr``), never raising: a live object whose text cannot be read is named by its type, and
    the place added to ``losses``; the text is made storable with :func:`unicode_text`."""
    try:
        text = repr(value) if use_repr else str(value)
        if not isinstance(text, str):
            raise TypeError(f"__{'repr' if use_repr else 'str'}__ returned {type(text).__name__}")
    except Exception as exc:  # noqa: BLE001 - a live object's __str__ can raise anything; the run must still be kept
        losses.append(loss(path, f"the text of a {type(value).__name__} could not be read ({type(exc).__name__}); its type is kept"))
        return f"<{type(value).__name__} whose text could not be read: {type(exc).__name__}>"
    return unicode_text(text, path, losses)


def _text(value: Any, path: str, losses: list[dict[str, str]], why: str) -> str:
    text = text_of(value, path, losses)
    losses.append(loss(path, why))
    return text


def _convert(value: Any, path: str, losses: list[dict[str, str]], depth: int) -> Any:
    kind = type(value)
    if kind is str:
        return value if value.isascii() else unicode_text(value, path, losses)
    if value is None or kind is int or kind is bool:
        return value
    if isinstance(value, str):
        return unicode_text(builtin_value(value), path, losses)
    if isinstance(value, (bool, int)):
        return builtin_value(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return builtin_value(value)
        return _text(value, path, losses, f"{value!r} is not a JSON number; kept as text")
    if depth >= MAX_DEPTH:
        return _text(value, path, losses, f"nested more than {MAX_DEPTH} levels deep; kept as text")
    # Strings, integers, booleans and None inside a container are taken as they are without a call of their own: live
    # capture converts every LM call's history entry while the program waits, and most of an entry is such leaves.
    # A leaf's path is made only for a loss.
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = k if type(k) is str and k.isascii() else json_key(k, path, losses)
            leaf = type(v)
            if (leaf is str and v.isascii()) or v is None or leaf is int or leaf is bool:
                out[key] = v
            else:
                out[key] = _convert(v, f"{path}.{key}" if path else key, losses, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        out_list = []
        for i, v in enumerate(value):
            leaf = type(v)
            if (leaf is str and v.isascii()) or v is None or leaf is int or leaf is bool:
                out_list.append(v)
            else:
                out_list.append(_convert(v, f"{path}[{i}]", losses, depth + 1))
        return out_list
    try:
        return _convert_object(value, path, losses, depth)
    except Exception as exc:  # noqa: BLE001 - a live object that fails to convert (toDict, asdict, a set's items)
        return _text(value, path, losses, f"a {type(value).__qualname__} could not be converted ({type(exc).__name__}); kept as its text")


def _response_format(model: type) -> Any:
    """A pydantic model class given as an LM call's ``response_format`` (DSPy's JSONAdapter passes its output model):
    what the provider is sent for it, LiteLLM's ``json_schema`` form (the class's own JSON schema where LiteLLM is not
    installed)."""
    try:
        from litellm.utils import type_to_response_format_param
    except ImportError:
        return {"type": "json_schema", "json_schema": {"name": model.__name__, "schema": model.model_json_schema()}}  # type: ignore[attr-defined]
    return type_to_response_format_param(model)


def _convert_object(value: Any, path: str, losses: list[dict[str, str]], depth: int) -> Any:
    if isinstance(value, type) and callable(getattr(value, "model_json_schema", None)):
        return _convert(_response_format(value), path, losses, depth + 1)
    if is_lm15(value):
        from dspy_rdf.sources.lm15 import lm15_to_json

        try:
            return _convert(lm15_to_json(value)[1], path, losses, depth + 1)
        except (ValueError, TypeError, ImportError):
            pass  # an lm15 value that is not a request, response, message or part (a config, a tool): its fields
    if hasattr(value, "model_dump") and callable(value.model_dump):
        try:
            dumped = value.model_dump(mode="json")
        except Exception:  # noqa: BLE001 - pydantic raises its own errors for fields it cannot write as JSON
            try:
                dumped = value.model_dump()
            except Exception:  # noqa: BLE001
                return _text(value, path, losses, f"a {type(value).__name__} that pydantic cannot dump; kept as text")
        return _convert(dumped, path, losses, depth + 1)
    if hasattr(value, "toDict") and callable(value.toDict):  # dspy.Example, dspy.Prediction
        return _convert(value.toDict(), path, losses, depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _convert(dataclasses.asdict(value), path, losses, depth + 1)
    if isinstance(value, (set, frozenset)):
        return _convert(sorted(value, key=repr), path, losses, depth + 1)
    if isinstance(value, bytes):
        return _text(value, path, losses, "bytes are not JSON; kept as their text")
    return _text(value, path, losses, f"a {type(value).__module__}.{type(value).__qualname__} is not JSON; kept as its text")
