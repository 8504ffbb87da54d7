"""RDF formats: writing traces in each format, and reading any of them back as traces."""

from __future__ import annotations

import enum
import io
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

import pyoxigraph as ox

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import RdfInputError, TraceInputError
from dspy_rdf.canonical.identity import DEFAULT_BASE, check_base
from dspy_rdf.canonical.redact import DEFAULT_REDACTOR, Redactor
from dspy_rdf.rdf import RDF_SUFFIXES
from dspy_rdf.rdf import vocab as v
from dspy_rdf.rdf.reader import traces_from_quads
from dspy_rdf.rdf.terms import rdflib_term
from dspy_rdf.rdf.writer import TraceFigures, trace_lines, write_trace
from dspy_rdf.resources import jsonld_context_path

__all__ = ["RdfFormat", "encode_trace", "encode_trace_figures", "parse_traces", "serialize_traces", "write_traces"]


class RdfFormat(enum.Enum):
    """Output formats, by the name the CLI takes (``--format``)."""

    TURTLE = "ttl"
    N_TRIPLES = "nt"
    N_QUADS = "nq"
    TRIG = "trig"
    JSON_LD = "jsonld"

    @property
    def oxigraph(self) -> ox.RdfFormat:
        """The same format as pyoxigraph names it."""
        return _OX_FORMAT[self]

    @property
    def has_graphs(self) -> bool:
        """Whether the format keeps one named graph per trace."""
        return self in (RdfFormat.N_QUADS, RdfFormat.TRIG, RdfFormat.JSON_LD)

    @classmethod
    def from_path(cls, path: Path) -> RdfFormat:
        """Guess a format from a file name extension, or raise ``ValueError`` listing the known ones."""
        suffix = path.suffix.lower()
        if suffix == ".json":  # an RDF output named .json is JSON-LD
            return cls.JSON_LD
        if suffix not in RDF_SUFFIXES:
            known = ", ".join(f".{f.value}" for f in cls)
            raise ValueError(f"cannot tell the RDF format of {path} from its extension; use one of {known}")
        return cls(RDF_SUFFIXES[suffix])


_OX_FORMAT = {
    RdfFormat.TURTLE: ox.RdfFormat.TURTLE,
    RdfFormat.N_TRIPLES: ox.RdfFormat.N_TRIPLES,
    RdfFormat.N_QUADS: ox.RdfFormat.N_QUADS,
    RdfFormat.TRIG: ox.RdfFormat.TRIG,
    RdfFormat.JSON_LD: ox.RdfFormat.JSON_LD,
}


def serialize_traces(
    traces: Iterable[m.Trace],
    format: RdfFormat = RdfFormat.N_QUADS,
    *,
    base: str = DEFAULT_BASE,
    redactor: Redactor | None = DEFAULT_REDACTOR,
) -> bytes:
    """Serialize traces in ``format`` (secrets redacted, see :func:`write_traces`); formats with graphs put each
    trace in the named graph of its IRI."""
    buffer = io.BytesIO()
    write_traces(traces, buffer, format, base=base, redactor=redactor)
    return buffer.getvalue()


def write_traces(
    traces: Iterable[m.Trace],
    handle: BinaryIO,
    format: RdfFormat = RdfFormat.N_QUADS,
    *,
    base: str = DEFAULT_BASE,
    batch: int = 500,
    on_error: Callable[[TraceInputError], None] | None = None,
    redactor: Redactor | None = DEFAULT_REDACTOR,
) -> int:
    """Write traces to a binary file handle as they come, ``batch`` traces at a time; return how many were written.

    A trace whose IRI was already written (the same content seen again) is written once: its first occurrence
    wins. A trace that cannot be written as RDF (a lone UTF-16 surrogate in its text, NaN in a JSON value, ...)
    raises :class:`TraceInputError` naming the node and property, or, with ``on_error``, is passed to it and
    skipped. Memory stays bounded by one batch (and the set of IRIs written) for every format, JSON-LD too: one
    document whose ``@graph`` array gets the named graphs of each batch as they come. Turtle and TriG batches each
    start with their ``@prefix`` lines, which the formats allow. Secrets are redacted first by ``redactor`` (:mod:`dspy_rdf.canonical.redact`; ``None``
    keeps everything).
    """
    check_base(base)
    count = 0
    written: set[str] = set()
    pending: list[bytes] = []
    jsonld = _JsonLdWriter(handle) if format is RdfFormat.JSON_LD else None
    for trace in traces:
        try:
            iri, data = encode_trace(trace, base=base, graph=format.has_graphs, redactor=redactor)
        except TraceInputError as exc:
            if on_error is None:
                raise
            on_error(exc)
            continue
        if iri in written:
            continue
        written.add(iri)
        pending.append(data)
        count += 1
        if count % batch == 0:
            if jsonld is not None:
                jsonld.write(b"".join(pending))
            else:
                handle.write(_encode(b"".join(pending), format))
            pending = []
    if jsonld is not None:
        jsonld.close(b"".join(pending))
    elif pending:
        handle.write(_encode(b"".join(pending), format))
    return count


def encode_trace(
    trace: m.Trace,
    *,
    base: str = DEFAULT_BASE,
    graph: bool = True,
    redactor: Redactor | None = None,
    iri: str | None = None,
    digest: str | None = None,
) -> tuple[str, bytes]:
    """One trace (its secrets removed by ``redactor``) as UTF-8 N-Quads (or N-Triples) bytes; raise
    :class:`TraceInputError` naming the node and property of text that is not valid Unicode (a lone surrogate),
    which no RDF syntax can hold. ``iri`` and ``digest``: what :func:`~dspy_rdf.rdf.writer.stored_form` gave the trace."""
    iri, lines = trace_lines(trace, base=base, graph=graph, redactor=redactor, iri=iri, digest=digest)
    return iri, _utf8(iri, lines)


def encode_trace_figures(trace: m.Trace, *, iri: str, digest: str) -> tuple[bytes, TraceFigures]:
    """A trace as it is stored (redacted already; its IRI and digest from :func:`~dspy_rdf.rdf.writer.stored_form`)
    as N-Quads bytes (see :func:`encode_trace`), and what it adds to the store-wide figures a store's ledger sums."""
    lines, figures = write_trace(trace, iri=iri, digest=digest)
    return _utf8(iri, lines), figures


def _utf8(iri: str, lines: list[str]) -> bytes:
    try:
        return "".join(lines).encode("utf-8")
    except UnicodeEncodeError:
        for line in lines:
            try:
                line.encode("utf-8")
            except UnicodeEncodeError as exc:
                node, prop = line.split(" ", 2)[:2]
                raise TraceInputError(
                    f"trace {iri}: text with a lone UTF-16 surrogate ({line[exc.start]!r}) cannot be stored as RDF",
                    field=f"node {node}, property {prop}",
                ) from None
        raise  # pragma: no cover - the whole text failed to encode, so one of its lines does


def _encode(text: bytes, format: RdfFormat) -> bytes:
    if format in (RdfFormat.N_QUADS, RdfFormat.N_TRIPLES):
        return text
    syntax = ox.RdfFormat.N_QUADS if format.has_graphs else ox.RdfFormat.N_TRIPLES
    out = ox.serialize(ox.parse(text, syntax), format=format.oxigraph, prefixes=v.PREFIXES)
    assert out is not None  # given no output, serialize returns the bytes
    return out


class _JsonLdWriter:
    """One JSON-LD document written batch by batch: the LinkML-generated context once, then each trace's named graph
    (compacted by rdflib, which keeps typed literals' lexical forms as DSPy wrote them: see
    :func:`dspy_rdf.rdf.terms.rdflib_term`) as one item of the top-level ``@graph`` array."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.context = json.loads(jsonld_context_path().read_text(encoding="utf-8"))["@context"]
        self.graphs = 0
        head = json.dumps({"@context": self.context}, indent=2, ensure_ascii=False)
        self.handle.write(head[: head.rindex("}")].rstrip().encode("utf-8") + b',\n  "@graph": [')

    def write(self, nquads: bytes) -> None:
        """Append the named graphs of these N-Quads."""
        for graph in self._graphs(nquads):
            self.handle.write(b",\n    " if self.graphs else b"\n    ")
            self.handle.write(json.dumps(graph, ensure_ascii=False).encode("utf-8"))
            self.graphs += 1

    def close(self, nquads: bytes) -> None:
        """Append the last graphs and end the document."""
        self.write(nquads)
        self.handle.write(b"\n  ]\n}\n")

    def _graphs(self, nquads: bytes) -> list[dict]:
        if not nquads:
            return []
        import rdflib

        dataset = rdflib.Dataset()
        for q in ox.parse(nquads, ox.RdfFormat.N_QUADS):
            graph = dataset.graph(rdflib.URIRef(q.graph_name.value))
            graph.add((rdflib_term(q.subject), rdflib.URIRef(q.predicate.value), rdflib_term(q.object)))
        document = json.loads(dataset.serialize(format="json-ld", context=self.context, auto_compact=True))
        document.pop("@context", None)
        # rdflib writes several named graphs as items of "@graph", and a single one as the document itself.
        graphs = document["@graph"] if set(document) == {"@graph"} else [document]
        return [_streaming_order(graph) for graph in graphs]


_FIRST_KEYS = ("@type", "id", "@id")


def _streaming_order(graph: dict) -> dict:
    """A named graph object with its keys in the order of the JSON-LD streaming profile (a node's type and id before
    its properties, a graph's id before its nodes), so that a streaming parser holds one node at a time."""

    def node(value: dict) -> dict:
        first = [key for key in _FIRST_KEYS if key in value]
        return {**{key: value[key] for key in first}, **{k: v for k, v in value.items() if k not in first}}

    nodes = graph.get("@graph")
    ordered = node(graph)
    if isinstance(nodes, list):
        ordered["@graph"] = [node(n) if isinstance(n, dict) else n for n in nodes]
        ordered = {**{k: v for k, v in ordered.items() if k != "@graph"}, "@graph": ordered["@graph"]}
    return ordered


def parse_traces(data: bytes | Path, format: RdfFormat | None = None, *, source: str | None = None) -> list[tuple[str, m.Trace]]:
    """Read traces back from RDF in any supported format; return ``(trace IRI, trace)`` pairs."""
    if isinstance(data, Path):
        source = source or str(data)
        format = format or RdfFormat.from_path(data)
        data = data.read_bytes()
    source = source or "<input>"
    if format is None:
        raise ValueError("parse_traces needs a format when given bytes")
    try:
        quads = list(ox.parse(data, RdfFormat(format).oxigraph))
    except SyntaxError as exc:
        raise RdfInputError(f"not valid {format.value}: {exc}", source=source) from None
    except MemoryError:  # pyoxigraph's parser holds one token of at most 16 MiB
        raise RdfInputError("a value longer than the 16 MiB the RDF parser reads", source=source) from None
    return traces_from_quads(quads, source=source)
