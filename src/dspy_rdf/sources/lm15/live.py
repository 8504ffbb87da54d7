"""Live lm15 objects (DSPy >= 3.4) -> the JSON lm15's own serde writes for them, which the readers here
take; DSPy is imported only when this is called, so the package works without it."""

from __future__ import annotations

from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError

__all__ = ["lm15_to_json"]


def lm15_to_json(obj: Any) -> tuple[m.SourceKind, Any]:
    """Return ``(kind, json)`` for a live lm15 ``Request``, ``Response``, ``Message`` or part, written by lm15's
    own serde (a response with its ``provider_data``, so nothing is left out). Needs DSPy >= 3.4."""
    try:
        from dspy import lm15
        from dspy._vendor.lm15 import serde
    except ImportError as exc:
        raise ImportError("reading live lm15 objects needs DSPy 3.4's bundled lm15: pip install 'dspy>=3.4'") from exc
    part_classes = (
        lm15.TextPart,
        lm15.ImagePart,
        lm15.AudioPart,
        lm15.VideoPart,
        lm15.DocumentPart,
        lm15.BinaryPart,
        lm15.ToolCallPart,
        lm15.ToolResultPart,
        lm15.ThinkingPart,
        lm15.RefusalPart,
        lm15.CitationPart,
        lm15.DataPart,
    )
    if isinstance(obj, lm15.Request):
        return "lm_request", serde.request_to_dict(obj)
    if isinstance(obj, lm15.Response):
        return "lm_response", serde.response_to_dict(obj, include_provider_data=True)
    if isinstance(obj, lm15.Message):
        return "lm_message", serde.message_to_dict(obj)
    if isinstance(obj, part_classes):
        return "lm_part", serde.part_to_dict(obj)
    raise TraceInputError(f"expected an lm15 Request, Response, Message or part, got {type(obj).__name__}")
