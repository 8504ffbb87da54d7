"""SHACL validation of traces: one verdict, whatever the input, the engine or the entry point.

The shapes are the LinkML-generated ones (``shapes/dspy.shacl.ttl``), the hand-written integrity rules
(``shapes/dspy.rules.ttl``, SHACL-SPARQL) and the class hierarchy (``shapes/dspy.classes.ttl``).

Every input is first cut into traces (:mod:`dspy_rdf.validation.units`): a trace is validated in a graph of its own,
because the rules relate nodes of one trace and must never join two. Two engines then validate those graphs and
return the same :class:`ValidationReport`:

- :attr:`Engine.FAST` (default): the shapes compiled to SPARQL (:mod:`dspy_rdf.validation.compiled`) and run inside
  pyoxigraph or on the SPARQL server (:mod:`dspy_rdf.validation.running`, :mod:`dspy_rdf.validation.fast`), tens to
  hundreds of times faster than pySHACL;
- :attr:`Engine.PYSHACL`: pySHACL over each trace (:mod:`dspy_rdf.validation.reference`), the reference.

PROV-O views of traces (graphs without a trace that use PROV-O, as ``dspy-rdf prov`` writes them, named
``<trace IRI>/prov``) found in an input are validated too, with the PROV shapes (:mod:`dspy_rdf.validation.views`),
and reported in the same report.

Both implement :class:`ValidationEngine` (:mod:`dspy_rdf.validation.engines`), as an engine of another package does:
``engine=`` takes a built-in engine, the name of a registered or installed one, or an engine object.

Entry points: :func:`validate_traces` (traces of the canonical model, exported as ``export`` would, secrets
redacted), :func:`validate_graph` (an rdflib graph or dataset), :func:`validate_dataset` (a pyoxigraph dataset),
:func:`validate_files` (JSON, JSON Lines and RDF files, as ``dspy-rdf validate`` reads them) and
:func:`validate_store` (an embedded store or a SPARQL server).

>>> from dspy_rdf import trace_from_json
>>> trace = trace_from_json({"model": "m", "messages": [{"role": "user", "parts": [{"type": "text", "text": "Hi"}]}]})
>>> report = validate_traces([trace])
>>> report.conforms, report.validated
(True, 1)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pyoxigraph as ox
import rdflib

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.identity import DEFAULT_BASE
from dspy_rdf.canonical.redact import DEFAULT_REDACTOR, Redactor
from dspy_rdf.rdf.terms import oxigraph_term
from dspy_rdf.validation.compiled import compile_shapes
from dspy_rdf.validation.engines import (
    Engine,
    EngineChoice,
    FastEngine,
    PyshaclEngine,
    ValidationEngine,
    engine_for,
    engine_names,
    register_engine,
)
from dspy_rdf.validation.reference import PyshaclEngineError
from dspy_rdf.validation.report import Severity, ValidationReport, Violation, merge_reports, node_label, rule_name
from dspy_rdf.validation.shapes import CLASSES_FILE, RULES_FILE, SHAPES_FILE
from dspy_rdf.validation.units import TraceGraphBuilder, TraceGraphs, dataset_graphs, store_graphs
from dspy_rdf.validation.views import validate_views

if TYPE_CHECKING:
    from dspy_rdf.canonical.model import SourceFormat
    from dspy_rdf.store import TraceStore

__all__ = [
    "CLASSES_FILE",
    "RULES_FILE",
    "SHAPES_FILE",
    "Engine",
    "EngineChoice",
    "FastEngine",
    "PyshaclEngine",
    "PyshaclEngineError",
    "Severity",
    "ValidationEngine",
    "ValidationReport",
    "Violation",
    "compile_shapes",
    "engine_for",
    "engine_names",
    "node_label",
    "register_engine",
    "rule_name",
    "validate_dataset",
    "validate_files",
    "validate_graph",
    "validate_store",
    "validate_traces",
]

Progress = Callable[[int], None]


def _run(
    parts: Iterable[TraceGraphs],
    *,
    engine: EngineChoice,
    shapes: str | Path | None,
    progress: Progress | None,
    slices: bool | None = None,
    workers: int = 2,
) -> ValidationReport:
    """Validate each part: traces with the chosen engine, PROV-O views with the PROV shapes."""
    chosen = engine_for(engine)
    reports = []
    for graphs in parts:
        if graphs.prov:
            found = validate_views(graphs, progress=None)  # progress counts traces: views are not among them
            views = tuple(graphs.label(name) or name for name in graphs.names)
            reports.append(ValidationReport(violations=tuple(found), views=views))
            continue
        found = chosen.validate(graphs, shapes=shapes, progress=progress, slices=slices, workers=workers) if graphs.names else []
        traces, untraced = graphs.traces()
        reports.append(ValidationReport(violations=tuple(found), traces=tuple(traces), untraced_graphs=untraced, other_graphs=graphs.other_graphs))
    return merge_reports(reports)


def _selected(parts: list[TraceGraphs], traces: list[str] | None) -> list[TraceGraphs]:
    """The parts with only the traces (or views) ``traces`` kept; a name that is in none is a ``ValueError``."""
    if traces is not None:
        missing = set(traces)
        for graphs in parts:
            missing &= set(graphs.select(traces))
        if missing:
            ordered = [name for name in dict.fromkeys(traces) if name in missing]
            more = f" (and {len(ordered) - 1} more)" if len(ordered) > 1 else ""
            raise ValueError(f"no trace {ordered[0]} in the input{more}")
    return parts


def validate_traces(
    traces: Iterable[m.Trace],
    *,
    base: str = DEFAULT_BASE,
    engine: EngineChoice = Engine.FAST,
    redactor: Redactor | None = DEFAULT_REDACTOR,
    shapes: str | Path | None = None,
) -> ValidationReport:
    """Validate traces of the canonical model as ``export`` writes them: redacted by ``redactor`` (the default, as
    exports; ``None`` keeps everything), each under the IRI export gives it (``base`` + content key)."""
    from dspy_rdf.rdf.formats import encode_trace

    builder = TraceGraphBuilder()
    for trace in traces:
        iri, data = encode_trace(trace, base=base, redactor=redactor)
        builder.add_trace(iri, data)
    return _run([builder.build()], engine=engine, shapes=shapes, progress=None).redacted(redactor)


def validate_graph(
    graph: rdflib.Graph, *, engine: EngineChoice = Engine.FAST, shapes: str | Path | None = None, redactor: Redactor | None = None
) -> ValidationReport:
    """Validate an rdflib graph (or dataset: its named graphs are traces, its default graph is cut by trace).

    rdflib's parsers rewrite some ill-formed literals as they read them (an ``xsd:boolean`` that is neither true nor
    false becomes ``"false"``): to validate a file as it is written, use :func:`validate_files`."""
    builder = TraceGraphBuilder()
    blank_nodes: dict[str, ox.BlankNode] = {}
    default_id = getattr(rdflib.graph, "DATASET_DEFAULT_GRAPH_ID", None)
    if isinstance(graph, rdflib.ConjunctiveGraph):
        for context in graph.contexts():
            triples = [tuple(oxigraph_term(t, blank_nodes) for t in triple) for triple in context]
            named = isinstance(context.identifier, rdflib.URIRef) and context.identifier != default_id
            builder.add_graph(str(context.identifier) if named else None, triples)  # type: ignore[arg-type]
    else:
        builder.add_graph(None, [tuple(oxigraph_term(t, blank_nodes) for t in triple) for triple in graph])  # type: ignore[misc]
    return _run(builder.parts(), engine=engine, shapes=shapes, progress=None).redacted(redactor)


def validate_dataset(
    dataset: ox.Store,
    *,
    traces: list[str] | None = None,
    engine: EngineChoice = Engine.FAST,
    progress: Progress | None = None,
    shapes: str | Path | None = None,
    redactor: Redactor | None = None,
) -> ValidationReport:
    """Validate a pyoxigraph dataset held in memory (parsed N-Quads, TriG, Turtle, ...): each named graph is a trace
    (cut when it holds several) or a PROV-O view, the default graph is cut by trace. ``traces`` selects some traces
    (or views) by IRI."""
    parts = _selected(dataset_graphs(dataset), traces)
    return _run(parts, engine=engine, shapes=shapes, progress=progress).redacted(redactor)


def validate_store(
    store: TraceStore,
    *,
    traces: list[str] | None = None,
    engine: EngineChoice = Engine.FAST,
    progress: Progress | None = None,
    slices: bool | None = None,
    workers: int = 2,
    shapes: str | Path | None = None,
    redactor: Redactor | None = DEFAULT_REDACTOR,
) -> ValidationReport:
    """Validate the traces of a store (every graph that holds one, or the trace IRIs ``traces``) and its PROV-O
    views (the graphs without a trace that use the PROV-O namespace; chosen by ``traces`` too, by graph name).

    The fast engine runs inside the store (two worker processes on an embedded store; ``slices`` chooses between
    whole-store queries and slices of 1,000 traces copied into memory, see
    :func:`dspy_rdf.validation.fast.validate_graphs_fast`); pySHACL fetches each trace's graph on its own, so
    memory is bounded by the largest trace. A graph that holds several traces, and an embedded store's default
    graph, are cut by trace in memory. ``progress`` is called with the number of graphs validated since its last call.
    Values and messages of the report are redacted by ``redactor``, as exports are.
    """
    parts = store_graphs(store, list(dict.fromkeys(traces)) if traces is not None else None)
    return _run(parts, engine=engine, shapes=shapes, progress=progress, slices=slices, workers=workers).redacted(redactor)


def _holds_json_ld(raw: bytes) -> bool:
    """Whether a ``.json`` file's bytes are JSON-LD (an ``@context`` or ``@graph`` at the top) rather than DSPy JSON."""
    import json

    from dspy_rdf.inputs import is_json_ld

    try:
        return is_json_ld(json.loads(raw))
    except (ValueError, RecursionError):
        return False  # not JSON at all: read_traces says why


def validate_files(
    paths: Iterable[Path],
    *,
    traces: list[str] | None = None,
    engine: EngineChoice = Engine.FAST,
    base: str = DEFAULT_BASE,
    redactor: Redactor | None = DEFAULT_REDACTOR,
    source_format: SourceFormat | None = None,
    fill_model: str | None = None,
    fill_timestamp: str | None = None,
    on_skip: Callable[[TraceInputError], None] | None = None,
    progress: Progress | None = None,
    shapes: str | Path | None = None,
) -> ValidationReport:
    """Validate files as ``dspy-rdf validate`` does: JSON and JSON Lines traces (any shape ``export`` reads) exported
    as ``export`` would (redacted, the same trace IRIs); RDF files (``.ttl``, ``.nt``, ``.nq``, ``.trig``,
    ``.jsonld``) as they are, cut by trace, and the PROV-O views in them (``dspy-rdf prov``) with the PROV shapes. A
    bad JSON trace is passed to ``on_skip`` (raised without it); a file that cannot be read raises
    ``FileNotFoundError`` or ``ValueError`` naming it."""
    from dspy_rdf.inputs import JSONL_SUFFIXES, RDF_SUFFIXES, read_traces
    from dspy_rdf.rdf.formats import RdfFormat, encode_trace

    builder = TraceGraphBuilder()
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file")
        suffix = path.suffix.lower()
        fmt = RdfFormat(RDF_SUFFIXES[suffix]).oxigraph if suffix in RDF_SUFFIXES else None
        raw = path.read_bytes() if suffix == ".json" else None
        if raw is not None and _holds_json_ld(raw):
            fmt = ox.RdfFormat.JSON_LD  # what `export -o x.json` writes: its triples are validated as they are
        if fmt is None and suffix in (".json", *JSONL_SUFFIXES):
            items = read_traces(path, source_format=source_format, model=fill_model, timestamp=fill_timestamp)
            for item in items:
                try:
                    if item.error is not None:
                        raise item.error
                    assert item.trace is not None
                    iri, data = encode_trace(item.trace, base=base, redactor=redactor)
                except TraceInputError as exc:
                    if on_skip is None:
                        raise
                    on_skip(exc if exc.source != "<input>" else exc.located(source=str(path), line=item.line))
                    continue
                builder.add_trace(iri, data)
            continue
        if fmt is None:
            known = ", ".join(sorted({".json", *JSONL_SUFFIXES, *RDF_SUFFIXES}))
            raise ValueError(f"{path}: cannot tell what this file holds from its extension; use one of {known}")
        try:
            builder.add_quads(ox.parse(raw if raw is not None else path.read_bytes(), fmt))
        except SyntaxError as exc:
            raise ValueError(f"{path}: not valid RDF: {exc}") from None
    parts = _selected(builder.parts(), traces)
    return _run(parts, engine=engine, shapes=shapes, progress=progress).redacted(redactor)
