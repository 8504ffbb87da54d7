"""The traces of an RDF file with named graphs (N-Quads, TriG, JSON-LD), read one named graph at a time.

Every dspy-rdf writer puts a trace's quads together, and a trace carries the digest of its content
(``dspy:content_digest``), so a file is read in one streaming pass: a run of quads of one graph whose trace has the
content its digest names is whole, and is yielded at once, holding nothing more. RDF has no order, though: a file
sorted otherwise, shuffled, or merged from two dumps may spread a graph over the file. A graph that a run does not
hold whole (or that has no digest to tell, as dspy-rdf 0.1.0 wrote) is read in a second pass over the file, which
sorts the quads of such graphs by graph into temporary files of a few megabytes each, read one at a time, so memory
stays bounded whatever the order.

A graph whose quads were read whole and come again further on is checked in that pass too: quads repeated (a file
merged from two dumps of one store) are fine, others are named and left out. In N-Quads, one statement per line, a
line that is not valid is named and skipped, and a graph around it that is not whole is left out rather than stored
in part; in TriG and JSON-LD reading stops at the first error.

JSON-LD is read with pyoxigraph's streaming parser, which holds one object at a time when the keys come in the order
of the JSON-LD streaming profile, as this package writes them; a document in another order (its ``@context`` last)
stops that parser, and is read again from its start with the parser that holds the whole document.
"""

from __future__ import annotations

import io
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyoxigraph as ox

from dspy_rdf.canonical.errors import RdfInputError
from dspy_rdf.canonical.model import Trace
from dspy_rdf.rdf.formats import RdfFormat
from dspy_rdf.rdf.reader import is_ledger_graph, traces_from_quads

__all__ = ["MAX_BAD_LINES", "GraphRead", "graph_traces"]

MAX_BAD_LINES = 100
"""Lines of an N-Quads file that are not valid, each named and skipped, before reading the file stops."""

_BUCKET_BYTES = 4 << 20  # of the input, in each temporary file of the second pass
_MAX_BUCKETS = 512  # temporary files open at once
_PARSER_PREFIX = re.compile(r"^Parser error at line \d+ between columns (\d+) and (\d+): ")


@dataclass(frozen=True, slots=True)
class GraphRead:
    """A trace read from the file, or why something could not be read (with the line, where one is known)."""

    trace: Trace | None = None
    error: str | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class _BadLine:
    line: int
    reason: str


class _Restart:
    """The input is read again from its start (JSON-LD not in the streaming order): quads read so far come again."""


Graph = ox.NamedNode | ox.BlankNode | ox.DefaultGraph


def _name(graph: Graph) -> str:
    return f"graph <{graph.value}>" if isinstance(graph, ox.NamedNode) else "the default graph" if isinstance(
        graph, ox.DefaultGraph) else f"graph _:{graph.value}"  # fmt: skip


class _QuadFile:
    """The quads of one input, read as often as needed; in N-Quads a line that is not valid is skipped."""

    def __init__(self, open_input: Callable[[], BinaryIO], fmt: RdfFormat) -> None:
        self.open_input = open_input
        self.fmt = fmt
        self.streaming = fmt is RdfFormat.JSON_LD  # until the streaming parser fails (see the module docstring)
        self.handle: BinaryIO | None = None
        self.size = 0  # of the input, in bytes

    def quads(self) -> Iterator[ox.Quad | _BadLine | _Restart]:
        line_based = self.fmt is RdfFormat.N_QUADS
        bad = 0
        with self.open_input() as handle:
            self.handle = handle
            self.size = handle.seek(0, io.SEEK_END)
            start, lines_before = 0, 0
            while True:
                handle.seek(start)
                try:
                    if self.streaming:
                        try:
                            yield from ox.parse(handle, ox.RdfFormat.STREAMING_JSON_LD)
                            return
                        except (SyntaxError, MemoryError):
                            self.streaming = False
                            handle.seek(0)
                            yield _Restart()
                    yield from ox.parse(handle, self.fmt.oxigraph)
                    return
                except MemoryError:  # pyoxigraph's parser holds one token of at most 16 MiB
                    long_line = _first_long_line(handle, start)
                    bad += 1
                    if long_line is None or not line_based:
                        line = lines_before + (long_line[0] if long_line else 1)
                        yield _BadLine(line, "a value longer than the 16 MiB the RDF parser reads: reading stopped here")
                        return
                    yield _BadLine(lines_before + long_line[0], "a value longer than the 16 MiB the RDF parser reads")
                    start, lines_before = long_line[1], lines_before + long_line[0]
                    continue
                except SyntaxError as exc:
                    relative = exc.lineno or 1
                    columns = _PARSER_PREFIX.match(str(exc))
                    reason = _PARSER_PREFIX.sub("", str(exc))
                    if columns is not None:
                        reason += f" (columns {columns.group(1)}-{columns.group(2)})"
                    bad += 1
                    yield _BadLine(lines_before + relative, reason)
                    if not line_based or exc.lineno is None:
                        return
                    if bad >= MAX_BAD_LINES:
                        yield _BadLine(lines_before + relative, f"{MAX_BAD_LINES} lines are not valid: reading stopped here")
                        return
                    handle.seek(start)
                    for _ in range(relative):
                        handle.readline()
                    start, lines_before = handle.tell(), lines_before + relative

    def position(self) -> int:
        """Bytes of the input read so far (all of it once the input is closed)."""
        return self.size if self.handle is None or self.handle.closed else self.handle.tell()


_LONGEST_TOKEN = 16 << 20  # pyoxigraph's parser buffer


def _first_long_line(handle: BinaryIO, start: int) -> tuple[int, int] | None:
    """The number (from ``start``) of the first line there longer than a token may be, and the offset after it."""
    handle.seek(start)
    number, length, offset = 1, 0, start
    while chunk := handle.read(1 << 20):
        at = 0
        while (newline := chunk.find(b"\n", at)) >= 0:
            if length + newline - at >= _LONGEST_TOKEN - 64:
                return number, offset + newline + 1
            number, length, at = number + 1, 0, newline + 1
        length += len(chunk) - at
        offset += len(chunk)
    return (number, offset) if length >= _LONGEST_TOKEN - 64 else None


def _whole(pairs: list[tuple[str, Trace]]) -> bool:
    """Whether the quads read of a graph hold all of its traces: each has the content its digest names. Quads of a
    trace's graph that hold no trace node yet are not whole either."""
    from dspy_rdf.canonical.identity import content_digest, content_payload

    return bool(pairs) and all(t.content_digest is not None and t.content_digest == content_digest(content_payload(t)) for _, t in pairs)


def graph_traces(
    open_input: Callable[[], BinaryIO], fmt: RdfFormat, *, source: str, progress: Callable[[int], None] | None = None
) -> Iterator[GraphRead]:
    """Yield the traces of an RDF input with named graphs, whatever the order of its quads (see the module docstring).

    ``open_input`` opens the input from its start (it is called again for a second pass); ``progress`` is called with
    the number of bytes consumed during the first pass."""
    quad_file = _QuadFile(open_input, fmt)
    done: set[Graph] = set()
    later: dict[Graph, bool] = {}  # graphs read in the second pass -> whether their trace was read whole before
    suspect: set[Graph] = set()  # graphs next to a line that is not valid
    any_bad_line = False
    group: list[ox.Quad] = []
    consumed = 0
    after_bad_line = False

    def flush() -> Iterator[GraphRead]:
        nonlocal consumed
        if group and is_ledger_graph(group[0].graph_name):
            group.clear()  # a store's ledger, which a dump may carry: not a trace
        if group:
            graph = group[0].graph_name
            if graph in done:
                later.setdefault(graph, True)
            elif graph not in later:
                try:
                    pairs = traces_from_quads(group, source=source)
                except RdfInputError:
                    pairs = None
                if pairs is not None and _whole(pairs):
                    done.add(graph)
                    for _, trace in pairs:
                        yield GraphRead(trace)
                else:
                    later[graph] = False
            group.clear()
        if progress is not None and (position := quad_file.position()) > consumed:  # JSON-LD read again goes back
            progress(position - consumed)
            consumed = position

    for quad in quad_file.quads():
        if isinstance(quad, _Restart):
            group.clear()  # its graph comes again whole; the graphs read already are checked in the second pass
            continue
        if isinstance(quad, _BadLine):
            any_bad_line = True
            if group:
                suspect.add(group[-1].graph_name)
            yield from flush()
            yield GraphRead(error=f"not valid {fmt.value}: {quad.reason}", line=quad.line)
            after_bad_line = True
            continue
        if after_bad_line:
            suspect.add(quad.graph_name)
            after_bad_line = False
        if group and quad.graph_name != group[0].graph_name:
            yield from flush()
        group.append(quad)
    yield from flush()
    if later:
        yield from _second_pass(quad_file, later, suspect if any_bad_line else set(), source)


def _second_pass(quad_file: _QuadFile, later: dict[Graph, bool], suspect: set[Graph], source: str) -> Iterator[GraphRead]:
    # The quads of the graphs left for this pass are sorted into temporary N-Quads files by graph, a few megabytes of
    # the input in each, which are then read one at a time: memory holds one such file, whatever the input's size.
    buckets = max(1, min(_MAX_BUCKETS, len(later), -(-quad_file.size // _BUCKET_BYTES)))
    bucket_of = {graph: number % buckets for number, graph in enumerate(later)}
    with tempfile.TemporaryDirectory(prefix="dspy-rdf-quads-") as directory:
        paths = [Path(directory) / f"{number}.nq" for number in range(buckets)]
        handles = [path.open("w", encoding="utf-8") for path in paths]
        try:
            for quad in quad_file.quads():
                if isinstance(quad, ox.Quad) and (number := bucket_of.get(quad.graph_name)) is not None:
                    handles[number].write(f"{quad} .\n")  # a quad's text is its N-Quads statement
        finally:
            for handle in handles:
                handle.close()
        for path in paths:
            by_graph: dict[Graph, dict[ox.Quad, None]] = {}
            for quad in ox.parse(path=path, format=ox.RdfFormat.N_QUADS):
                by_graph.setdefault(quad.graph_name, {})[quad] = None  # a quad repeated is one quad
            path.unlink()
            for graph, quads in by_graph.items():
                yield from _read_whole(graph, list(quads), read_before=later[graph], suspect=graph in suspect, source=source)


def _read_whole(graph: Graph, quads: list[ox.Quad], *, read_before: bool, suspect: bool, source: str) -> Iterator[GraphRead]:
    try:
        pairs, problem = traces_from_quads(quads, source=source), None
    except RdfInputError as exc:
        pairs, problem = [], exc.reason
    if read_before:
        if problem is not None or not _whole(pairs):
            yield GraphRead(error=f"{_name(graph)}: quads further on in the file change its trace, which was read whole "
                                  f"before them ({problem or 'its digest does not match'}); they were left out")  # fmt: skip
        return  # the same quads again: its trace was read
    if suspect and (problem is not None or not _whole(pairs)):
        yield GraphRead(error=f"{_name(graph)}: next to a line that is not valid, and not a whole trace "
                              f"({problem or 'its digest does not match'}): left out rather than stored in part")  # fmt: skip
        return
    if problem is not None:
        yield GraphRead(error=f"{_name(graph)}: {problem}")
        return
    for _, trace in pairs:
        yield GraphRead(trace)
