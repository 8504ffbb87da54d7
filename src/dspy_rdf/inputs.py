"""Reading trace inputs from files: one JSON value per ``.json`` file, one per line of a ``.jsonl`` file.

JSON Lines are streamed line by line, so a file of any size is never read into memory at once. Errors
name the file, the line and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dspy_rdf.dspy33 import trace_from_json
from dspy_rdf.errors import TraceInputError
from dspy_rdf.model import Trace

__all__ = ["InputItem", "read_traces"]


@dataclass(frozen=True, slots=True)
class InputItem:
    """One trace read from a file, or the error that stopped it from being read."""

    source: str
    line: int | None
    trace: Trace | None
    error: TraceInputError | None


def _decode(text: str, source: str, line: int | None) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceInputError(f"not valid JSON: {exc.msg} at column {exc.colno}", source=source, line=line or exc.lineno) from None


def read_traces(path: Path) -> Iterator[InputItem]:
    """Yield the traces of a ``.json`` or ``.jsonl`` file, one :class:`InputItem` per object."""
    source = str(path)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        with path.open("rb") as handle:
            index = 0
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise TraceInputError(f"not UTF-8 text (byte {exc.start + 1})", source=source, line=number) from None
                    trace = trace_from_json(_decode(text, source, number), source_index=index)
                    yield InputItem(source, number, trace, None)
                except TraceInputError as exc:
                    yield InputItem(source, number, None, exc.located(source=source, line=number))
                index += 1
        return
    try:
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceInputError(f"not UTF-8 text (byte {exc.start + 1})", source=source) from None
        yield InputItem(source, None, trace_from_json(_decode(text, source, None)), None)
    except TraceInputError as exc:
        yield InputItem(source, None, None, exc.located(source=source))
