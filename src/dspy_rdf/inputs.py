"""Reading trace inputs from files: one JSON value per ``.json`` file, one per line of a ``.jsonl`` file, and the
traces RDF files hold (``.nq``, ``.trig``, ``.ttl``, ``.nt``, ``.jsonld``, and a ``.json`` file of JSON-LD), such as a
capture's ``runs.nq`` or an earlier export.

Any JSON shape :func:`dspy_rdf.sources.tracejson.trace_from_json` understands is accepted, detected per value, or forced
with ``source_format``. Most values hold one trace; an MLflow search page or list, or an OTLP export, holds several,
and an OTLP trace may be spread over several lines (:class:`dspy_rdf.sources.tracejson.TraceStream` puts it together). JSON
Lines are streamed line by line, so a file of any size is never read into memory at once (an OTLP trace is kept
only until its root span has been read); ``progress`` is called with the number of bytes consumed after each line.
A JSON Lines file can be read again from where an interrupted load stood (``start``, a :class:`ResumePoint` an item
gave: the end of a line after which no trace is left half read).
Errors name the file, the line and the field; a trace that cannot be read is skipped and the others are read.
RDF with named graphs (N-Quads, TriG, JSON-LD) is streamed too, one named graph at a time, in any order of its quads
(:mod:`dspy_rdf.rdf.quadfiles`); Turtle and N-Triples are read whole.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.model import SourceFormat, Trace
from dspy_rdf.rdf import RDF_SUFFIXES
from dspy_rdf.sources.tracejson import TraceStream

__all__ = ["JSONL_SUFFIXES", "RDF_SUFFIXES", "InputItem", "ResumePoint", "is_json_ld", "parse_json", "read_traces"]

JSONL_SUFFIXES = (".jsonl", ".ndjson")


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a JSON Lines file can be read again from, with nothing before it left half read: the byte ``offset``
    after ``line``, and the number of items (traces and errors) before it, which numbers the traces after it as a
    whole read does (``source_index``)."""

    offset: int
    line: int
    items: int


@dataclass(frozen=True, slots=True)
class InputItem:
    """One trace read from a file, or the error that stopped it from being read; ``resume`` is set on the last item
    of a JSON Lines line after which no trace is half read (an OTLP trace whose spans are still coming)."""

    source: str
    line: int | None
    trace: Trace | None
    error: TraceInputError | None
    resume: ResumePoint | None = None


_BOM = b"\xef\xbb\xbf"


def parse_json(raw: bytes, source: str, line: int | None = None) -> object:
    """One JSON value from UTF-8 bytes, read strictly: a key given twice in an object, NaN or Infinity are
    :class:`TraceInputError` naming ``source`` and ``line`` (Python's json would keep the last value, or a float no
    JSON reader gives), so every way traces come in (a file, the receiver) reads the same bytes the same way."""
    # A byte order mark is not JSON, but Windows tools write one at the start of UTF-8 files: it is skipped.
    skipped = len(_BOM) if raw.startswith(_BOM) else 0
    try:
        text = raw[skipped:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceInputError(f"not UTF-8 text (byte {skipped + exc.start + 1})", source=source, line=line) from None
    if not text or text.isspace():  # a .json file with nothing in it (JSON Lines skip their blank lines)
        raise TraceInputError("empty: the file holds no JSON value", source=source, line=line)
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise TraceInputError(
            f"the key {exc.key!r} appears twice in one JSON object (JSON readers would silently keep only one of its values)",
            source=source, line=line,
        ) from None
    except json.JSONDecodeError as exc:
        raise TraceInputError(f"not valid JSON: {exc.msg} at column {exc.colno}", source=source, line=line or exc.lineno) from None
    except RecursionError:
        raise TraceInputError("JSON nested too deeply to read", source=source, line=line) from None
    except ValueError as exc:  # NaN/Infinity (below), or an integer longer than Python converts (4300 digits)
        raise TraceInputError(f"not valid JSON: {exc}", source=source, line=line) from None


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return value


def _reject_constant(name: str) -> object:
    # Python's json reads NaN and Infinity, but they are not JSON and rdf:JSON literals could not hold them.
    raise ValueError(f"{name} is not a JSON number (JSON has no NaN or Infinity)")


def is_json_ld(value: object) -> bool:
    """Whether a JSON value is a JSON-LD document (what ``export -o x.json`` writes) rather than DSPy JSON."""
    if isinstance(value, list):
        return bool(value) and all(isinstance(item, dict) and ("@id" in item or "@graph" in item) for item in value)
    return isinstance(value, dict) and ("@context" in value or "@graph" in value)


def read_traces(
    path: str | Path,
    *,
    source_format: SourceFormat | None = None,
    progress: Callable[[int], None] | None = None,
    model: str | None = None,
    timestamp: str | None = None,
    start: ResumePoint | None = None,
) -> Iterator[InputItem]:
    """Yield the traces of a ``.json``, ``.jsonl`` or RDF file, one :class:`InputItem` per trace (or per trace, line,
    value or graph that could not be read); a JSON Lines file from ``start`` on when given (the bytes before it count
    as read for ``progress``).

    ``source_format``, ``model`` and ``timestamp`` are passed to :func:`dspy_rdf.sources.tracejson.trace_from_json` (JSON
    inputs only: an RDF file's traces are read as they were written). Each JSON trace's ``source_index`` is its
    position among the file's items; a ``.json`` file that holds one trace gives it none.
    """
    path = Path(path)
    source = str(path)
    rdf = RDF_SUFFIXES.get(path.suffix.lower())
    if rdf is not None:
        if source_format is not None:
            raise ValueError(f"{path}: --from ({source_format}) applies to JSON inputs; an RDF file's traces are read as written")
        yield from _rdf_items(path, rdf, progress)
        return
    if start is not None and path.suffix.lower() not in JSONL_SUFFIXES:
        raise ValueError(f"{path}: only a JSON Lines file is read from a resume point")
    stream = TraceStream(source_format=source_format, model=model, timestamp=timestamp)
    index = 0 if start is None else start.items

    def items(reads) -> Iterator[InputItem]:
        nonlocal index
        for read in reads:
            if read.trace is not None:
                read.trace.source_index = index
                yield InputItem(source, read.line, read.trace, None)
            else:
                yield InputItem(source, read.line, None, read.error.located(source=source))
            index += 1

    if path.suffix.lower() in JSONL_SUFFIXES:
        with path.open("rb") as handle:
            offset, first = 0, 1
            if start is not None:
                handle.seek(start.offset)
                offset, first = start.offset, start.line + 1
                if progress is not None:
                    progress(start.offset)
            for number, raw in enumerate(handle, start=first):
                offset += len(raw)
                if progress is not None:
                    progress(len(raw))
                if not raw.strip():
                    continue
                try:
                    value = parse_json(raw, source, number)
                except TraceInputError as exc:
                    found = [InputItem(source, number, None, exc.located(source=source, line=number))]
                    index += 1
                else:
                    found = list(items(stream.add(value, number)))
                if found and not stream.waiting:  # the line's last item: nothing before it is left half read
                    found[-1] = replace(found[-1], resume=ResumePoint(offset, number, index))
                yield from found
        yield from items(stream.finish())
        return
    try:
        raw = path.read_bytes()
        if progress is not None:
            progress(len(raw))
        value = parse_json(raw, source, None)
    except TraceInputError as exc:
        yield InputItem(source, None, None, exc.located(source=source))
        return
    if source_format is None and is_json_ld(value):
        yield from _rdf_items(path, "jsonld", None, data=raw)
        return
    found = list(items([*stream.add(value), *stream.finish()]))
    if len(found) == 1 and found[0].trace is not None:
        found[0].trace.source_index = None  # a file of one trace: its index says nothing
    yield from found


def _rdf_items(path: Path, rdf: str, progress: Callable[[int], None] | None, *, data: bytes | None = None) -> Iterator[InputItem]:
    """The traces of an RDF file: formats with named graphs one graph at a time, Turtle and N-Triples whole."""
    from dspy_rdf.canonical.errors import RdfInputError
    from dspy_rdf.rdf.formats import RdfFormat, parse_traces

    source, fmt = str(path), RdfFormat(rdf)

    def failed(message: str) -> InputItem:
        return InputItem(source, None, None, TraceInputError(message, source=source))

    if not fmt.has_graphs:
        try:
            raw = path.read_bytes()
            if progress is not None:
                progress(len(raw))
            pairs = parse_traces(raw, fmt, source=source)
        except RdfInputError as exc:
            yield failed(exc.reason if exc.source == source else str(exc))
            return
        for _, trace in pairs:
            yield InputItem(source, None, trace, None)
        return
    from dspy_rdf.rdf.quadfiles import graph_traces

    def open_input() -> BinaryIO:
        return io.BytesIO(data) if data is not None else path.open("rb")

    for read in graph_traces(open_input, fmt, source=source, progress=progress):
        if read.trace is not None:
            yield InputItem(source, None, read.trace, None)
        else:
            assert read.error is not None  # a GraphRead without a trace holds an error
            yield InputItem(source, read.line, None, TraceInputError(read.error, source=source, line=read.line))
