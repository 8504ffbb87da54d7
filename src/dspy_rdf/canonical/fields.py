"""Reading JSON fields with errors that name the field: the checks every source reader shares.

Each helper takes a dict, a key and the dotted path of the dict (``request.messages[0]``) and raises
:class:`~dspy_rdf.canonical.errors.TraceInputError` naming ``path.key`` and what was expected when the value is not of the
expected kind.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal, overload

from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.model import canonical_datetime

__all__ = [
    "check_datetime",
    "check_keys",
    "expect_object",
    "fail",
    "get_bool",
    "get_float",
    "get_int",
    "get_json_object",
    "get_list",
    "get_str",
    "kind_of",
]


def fail(path: str, message: str) -> TraceInputError:
    """The error to raise for the value at ``path``."""
    return TraceInputError(message, field=path)


def expect_object(value: Any, path: str) -> dict[str, Any]:
    """``value`` if it is a JSON object."""
    if not isinstance(value, dict):
        raise fail(path, f"expected a JSON object, got {kind_of(value)}")
    return value


def kind_of(value: Any) -> str:
    """What a JSON value is, in words (``a list``, ``null``)."""
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer", float: "a number"}.get(
        type(value), type(value).__name__
    )


def check_keys(d: dict[str, Any], allowed: frozenset[str], path: str, what: str) -> None:
    """Refuse fields of ``d`` outside ``allowed``, naming them."""
    extra = d.keys() - allowed
    if extra:
        names = ", ".join(sorted(map(str, extra)))
        raise fail(path, f"unknown field(s) {names} on {what}; expected only {', '.join(sorted(allowed))}")


@overload
def get_str(d: dict[str, Any], key: str, path: str, *, required: Literal[True], default: str | None = None) -> str: ...
@overload
def get_str(d: dict[str, Any], key: str, path: str, *, required: bool = False, default: str | None = None) -> str | None: ...
def get_str(d: dict[str, Any], key: str, path: str, *, required: bool = False, default: str | None = None) -> str | None:
    """A string field (``default`` when absent or null; an error when ``required``)."""
    value = d.get(key, default)
    if value is None:
        if required:
            raise fail(f"{path}.{key}", "is required")
        return None
    if not isinstance(value, str):
        raise fail(f"{path}.{key}", f"expected a string, got {kind_of(value)}")
    return value


def get_int(d: dict[str, Any], key: str, path: str) -> int | None:
    """An integer field (booleans are not integers here)."""
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(f"{path}.{key}", f"expected an integer, got {kind_of(value)}")
    return value


def get_float(d: dict[str, Any], key: str, path: str) -> float | None:
    """A number field, as a float."""
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(f"{path}.{key}", f"expected a number, got {kind_of(value)}")
    try:
        return float(value)
    except OverflowError:
        raise fail(f"{path}.{key}", f"the number has {len(str(abs(value)))} digits, too large for a double") from None


# xsd:dateTime's lexical form (what the graph holds), which every ISO 8601 date-time DSPy writes has.
_DATETIME = re.compile(r"-?\d{4,}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
_CANONICAL = re.compile(r"\d{4}-\d\d-\d\dT(?:[01]\d|2[0-3]):\d\d:\d\d(?:\.\d{0,5}[1-9])?Z?")


def check_datetime(value: str, path: str) -> str:
    """``value`` in its canonical form (:func:`~dspy_rdf.canonical.model.canonical_datetime`) if it is an ISO 8601 /
    ``xsd:dateTime`` date-time of years 1 to 9999 (in UTC too), else raise naming ``path``."""
    canonical = canonical_datetime(value) if isinstance(value, str) and _DATETIME.fullmatch(value) else None
    try:
        valid = canonical is not None and _CANONICAL.fullmatch(canonical) is not None and bool(datetime.fromisoformat(canonical.removesuffix("Z")))
    except ValueError:
        valid = False
    if not valid or canonical is None:
        raise fail(path, f"expected an ISO 8601 date-time of years 1 to 9999 such as 2025-01-31T12:00:00 or 2025-01-31T12:00:00Z, got {value!r}")
    return canonical


@overload
def get_bool(d: dict[str, Any], key: str, path: str, *, default: bool) -> bool: ...
@overload
def get_bool(d: dict[str, Any], key: str, path: str, *, default: None = None) -> bool | None: ...
def get_bool(d: dict[str, Any], key: str, path: str, *, default: bool | None = None) -> bool | None:
    """A boolean field."""
    value = d.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise fail(f"{path}.{key}", f"expected true or false, got {kind_of(value)}")
    return value


def get_json_object(d: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    """A JSON-object field (``{}`` when absent or null)."""
    value = d.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(f"{path}.{key}", f"expected a JSON object, got {kind_of(value)}")
    return value


def get_list(d: dict[str, Any], key: str, path: str, *, required: bool = False) -> list[Any]:
    """A list field (``[]`` when absent or null; an error when ``required``)."""
    value = d.get(key)
    if value is None:
        if required:
            raise fail(f"{path}.{key}", "is required")
        return []
    if not isinstance(value, list):
        raise fail(f"{path}.{key}", f"expected a list, got {kind_of(value)}")
    return value
