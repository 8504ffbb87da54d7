"""dspy-rdf: DSPy traces as linked data.

Read what DSPy records (DSPy 3.3 typed objects, DSPy 3.4 lm15 objects, ``lm.history`` dicts from DSPy 2.5 on,
OpenAI chat payloads, ReAct trajectories, or whole program runs captured live with
:class:`dspy_rdf.capture.TraceRecorder`) into one canonical model, write it as RDF with the ``dspy:`` vocabulary
(``https://w3id.org/lmodel/dspy/``), read it back losslessly, and check it with the SHACL shapes generated from
the LinkML schema.

>>> from dspy_rdf import trace_from_json, serialize_traces, parse_traces, trace_to_json, RdfFormat
>>> data = {"model": "m", "messages": [{"role": "user", "parts": [{"type": "text", "text": "Hi"}]}]}
>>> trace = trace_from_json(data)
>>> turtle = serialize_traces([trace], RdfFormat.TURTLE)
>>> b'dspy:text "Hi"' in turtle
True
>>> [(iri, back)] = parse_traces(turtle, RdfFormat.TURTLE)
>>> trace_to_json(back)["messages"][0]["parts"][0]["text"]
'Hi'
"""

from __future__ import annotations

from dspy_rdf.lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing with the package (type checkers take it as theirs)
if TYPE_CHECKING:
    from dspy_rdf.analytics import list_queries, run_query
    from dspy_rdf.canonical.errors import DspyRdfError, RdfInputError, TraceInputError
    from dspy_rdf.canonical.identity import DEFAULT_BASE, canonical_json, trace_iri, trace_key, verify_trace_iri
    from dspy_rdf.canonical.model import SOURCE_FORMATS, SOURCE_KINDS, Trace
    from dspy_rdf.capture import FileSink, MemorySink, Sink, StoreSink, TraceRecorder
    from dspy_rdf.inputs import InputItem, read_traces
    from dspy_rdf.outputs import open_output
    from dspy_rdf.rdf.formats import RdfFormat, parse_traces, serialize_traces, write_traces
    from dspy_rdf.rdf.writer import trace_lines
    from dspy_rdf.sources.tracejson import detect_source, trace_from_dspy, trace_from_json, trace_to_dspy, trace_to_json
    from dspy_rdf.store import TraceStore, open_store
    from dspy_rdf.validation import Engine, Severity, ValidationReport, Violation, validate_graph, validate_traces

_HOMES = {
    # read: any file, or any object DSPy gives, into the canonical model
    "dspy_rdf.inputs": ("InputItem", "read_traces"),
    "dspy_rdf.sources.tracejson": ("detect_source", "trace_from_dspy", "trace_from_json", "trace_to_dspy", "trace_to_json"),
    "dspy_rdf.canonical.model": ("SOURCE_FORMATS", "SOURCE_KINDS", "Trace"),
    "dspy_rdf.canonical.identity": ("DEFAULT_BASE", "canonical_json", "trace_iri", "trace_key", "verify_trace_iri"),
    # write: RDF in any format, to files written whole or not at all
    "dspy_rdf.rdf.formats": ("RdfFormat", "parse_traces", "serialize_traces", "write_traces"),
    "dspy_rdf.rdf.writer": ("trace_lines",),
    "dspy_rdf.outputs": ("open_output",),
    # store, query, validate
    "dspy_rdf.store": ("TraceStore", "open_store"),
    "dspy_rdf.analytics": ("list_queries", "run_query"),
    "dspy_rdf.validation": ("Engine", "Severity", "ValidationReport", "Violation", "validate_graph", "validate_traces"),
    # capture: record DSPy programs as they run
    "dspy_rdf.capture": ("TraceRecorder", "FileSink", "MemorySink", "Sink", "StoreSink"),
    # what goes wrong
    "dspy_rdf.canonical.errors": ("DspyRdfError", "RdfInputError", "TraceInputError"),
}
"""The module each public name comes from, in the order of a user's journey. They are imported when first used
(PEP 562), not with the package: the command line imports only what its command needs, so that it starts fast and a
Ctrl-C at its start is its own."""

__getattr__, __dir__, __all__ = lazy_exports(globals(), _HOMES)
