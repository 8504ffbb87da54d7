"""Small value helpers the OpenAI readers share: dropping null values, splitting a data URI, guessing a
media type from a URL, and checking the strings that name a media source or hold text."""

from __future__ import annotations

import mimetypes
from typing import Any
from urllib.parse import urlparse

from dspy_rdf.canonical.fields import fail, kind_of

__all__ = ["drop_nulls", "guess_media_type", "source_str", "split_data_uri", "text_value"]


def drop_nulls(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without its null values, which carry nothing worth keeping."""
    return {k: v for k, v in d.items() if v is not None}


def split_data_uri(value: str) -> tuple[str, str]:
    """DSPy's ``_split_data_uri``: (media type, payload); a value that is no data URI is kept whole."""
    if not value.startswith("data:") or "," not in value:
        return "application/octet-stream", value
    header, data = value.split(",", 1)
    return header.removeprefix("data:").split(";", 1)[0], data


def guess_media_type(url: str, default: str) -> str:
    """The media type the extension of a URL's path names, else ``default``."""
    return mimetypes.guess_type(urlparse(url).path)[0] or default


def source_str(value: Any, path: str) -> str:
    """A non-empty string naming a media source (its data, URL, file id or path); else an error at ``path``."""
    if not isinstance(value, str):
        raise fail(path, f"expected a string, got {kind_of(value)}")
    if not value:
        raise fail(path, "must be non-empty")
    return value


def text_value(value: Any, path: str) -> str:
    """A string of text, empty or not; else an error at ``path``."""
    if not isinstance(value, str):
        raise fail(path, f"expected a string, got {kind_of(value)}")
    return value
