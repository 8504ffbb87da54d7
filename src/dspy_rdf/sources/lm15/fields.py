"""The field readers lm15's JSON needs beyond :mod:`dspy_rdf.canonical.fields`: strings lm15 requires to be
non-empty, a choice among lm15's words, counts with a minimum, continuation states, and the ``"lm15"`` key
under which a field without a canonical slot is kept."""

from __future__ import annotations

from typing import Any, Literal, TypeVar, overload

from dspy_rdf.canonical.fields import check_keys, expect_object, fail, get_int, get_json_object, get_list, get_str

__all__ = ["LM15_KEY", "continuation_states", "get_choice", "get_count", "get_text", "with_lm15"]

LM15_KEY = "lm15"
"""The key under which lm15 fields without a canonical slot are kept in a JSON slot."""


@overload
def get_text(d: dict[str, Any], key: str, path: str, *, required: Literal[True]) -> str: ...
@overload
def get_text(d: dict[str, Any], key: str, path: str, *, required: bool = False) -> str | None: ...
def get_text(d: dict[str, Any], key: str, path: str, *, required: bool = False) -> str | None:
    """A string that lm15 requires to be non-empty when present."""
    value = get_str(d, key, path, required=required)
    if value == "":
        raise fail(f"{path}.{key}", "must not be empty")
    return value


_Choice = TypeVar("_Choice", bound=str)


def get_choice(
    d: dict[str, Any], key: str, path: str, allowed: tuple[_Choice, ...], *, default: _Choice | None = None
) -> _Choice | None:
    """One of lm15's words for a setting, from ``allowed``; ``default`` when the key is absent."""
    value = get_str(d, key, path, default=default)
    if value is not None and value not in allowed:
        raise fail(f"{path}.{key}", f"expected one of {', '.join(allowed)}, got {value!r}")
    return value


def get_count(d: dict[str, Any], key: str, path: str, *, minimum: int = 0) -> int | None:
    """An integer count of at least ``minimum``, or None when absent."""
    value = get_int(d, key, path)
    if value is not None and value < minimum:
        raise fail(f"{path}.{key}", f"must be at least {minimum}, got {value}")
    return value


def with_lm15(metadata: dict[str, Any], extras: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` with ``extras`` under the lm15 key, or unchanged when there are none."""
    return {**metadata, LM15_KEY: extras} if extras else metadata


def continuation_states(d: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """lm15's continuation states, normalized to what lm15 itself writes back."""
    states = []
    for i, raw in enumerate(get_list(d, "continuation", path)):
        p = f"{path}.continuation[{i}]"
        state = expect_object(raw, p)
        check_keys(state, frozenset({"provider", "kind", "data"}), p, "an lm15 continuation state")
        states.append(
            {
                "provider": get_text(state, "provider", p, required=True),
                "kind": get_text(state, "kind", p, required=True),
                "data": get_json_object(state, "data", p),
            }
        )
    return states
