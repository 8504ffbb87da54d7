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

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing with the package (type checkers take it as theirs)
if TYPE_CHECKING:
    from typing import Any

    from dspy_rdf.errors import DspyRdfError, RdfInputError, TraceInputError
    from dspy_rdf.formats import RdfFormat, parse_traces, serialize_traces, write_traces
    from dspy_rdf.identity import DEFAULT_BASE, canonical_json, trace_iri, trace_key, verify_trace_iri
    from dspy_rdf.inputs import InputItem, read_traces
    from dspy_rdf.model import SOURCE_FORMATS, SOURCE_KINDS, Trace
    from dspy_rdf.tracejson import detect_source, trace_from_dspy, trace_from_json, trace_to_dspy, trace_to_json
    from dspy_rdf.validation import Engine, Severity, ValidationReport, Violation, validate_graph, validate_traces
    from dspy_rdf.writer import trace_lines

_HOMES = {
    "dspy_rdf.errors": ("DspyRdfError", "RdfInputError", "TraceInputError"),
    "dspy_rdf.formats": ("RdfFormat", "parse_traces", "serialize_traces", "write_traces"),
    "dspy_rdf.identity": ("DEFAULT_BASE", "canonical_json", "trace_iri", "trace_key", "verify_trace_iri"),
    "dspy_rdf.inputs": ("InputItem", "read_traces"),
    "dspy_rdf.model": ("SOURCE_FORMATS", "SOURCE_KINDS", "Trace"),
    "dspy_rdf.tracejson": ("detect_source", "trace_from_dspy", "trace_from_json", "trace_to_dspy", "trace_to_json"),
    "dspy_rdf.validation": ("Engine", "Severity", "ValidationReport", "Violation", "validate_graph", "validate_traces"),
    "dspy_rdf.writer": ("trace_lines",),
}
"""The module each public name comes from. They are imported when first used (PEP 562), not with the package: the
command line imports only what its command needs, so that it starts fast and a Ctrl-C at its start is its own."""

_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'dspy_rdf' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "DEFAULT_BASE",
    "DspyRdfError",
    "Engine",
    "InputItem",
    "RdfFormat",
    "RdfInputError",
    "SOURCE_FORMATS",
    "SOURCE_KINDS",
    "Severity",
    "Trace",
    "TraceInputError",
    "ValidationReport",
    "Violation",
    "canonical_json",
    "detect_source",
    "parse_traces",
    "read_traces",
    "serialize_traces",
    "trace_from_dspy",
    "trace_from_json",
    "trace_iri",
    "trace_key",
    "trace_lines",
    "trace_to_dspy",
    "trace_to_json",
    "validate_graph",
    "validate_traces",
    "verify_trace_iri",
    "write_traces",
]
