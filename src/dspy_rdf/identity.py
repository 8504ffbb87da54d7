"""Deterministic identity of traces: canonical JSON, trace keys and trace IRIs.

A trace's key is ``sha256-`` followed by the first 32 hex digits of the SHA-256 of the canonical JSON of the
trace (:func:`dspy_rdf.tracejson.trace_to_json`: DSPy 3.3 JSON for DSPy's own objects), prefixed by its source
kind, and by its source format when that is not ``dspy33`` (so a request read from lm15 and the same request
read from DSPy 3.3 JSON are two traces, each saying where it came from). The
algorithm is tagged in the key (``sha256-``) so that a later change of algorithm gives keys that cannot be
mistaken for these; :func:`verify_trace_iri` recomputes a key. Every other node's IRI is the trace IRI
followed by the node's path (``/entry/0/request/message/1/part/0``): no text from the trace ever reaches an
IRI, so any input is safe.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from dspy_rdf.model import Trace

__all__ = [
    "DEFAULT_BASE",
    "KEY_PREFIX",
    "canonical_json",
    "check_base",
    "is_absolute_iri",
    "key_from_payload",
    "trace_iri",
    "trace_key",
    "trace_payload",
    "verify_trace_iri",
]

DEFAULT_BASE = "urn:dspy-rdf:trace:"
"""Default prefix of trace IRIs; pass ``base=`` (or ``--base``) to put traces under your own namespace."""

KEY_PREFIX = "sha256-"
_KEY_HEX_DIGITS = 32

# An absolute IRI (scheme ":" ...) without the characters N-Quads forbids inside <...>.
_ABSOLUTE_IRI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\x00-\x20<>\"{}|^`\\]*\Z")


def is_absolute_iri(text: str) -> bool:
    """Whether ``text`` is an absolute IRI (a scheme, ``:``, then no character N-Quads forbids inside ``<...>``)."""
    return _ABSOLUTE_IRI.match(text) is not None


def canonical_json(value: Any) -> str:
    """Serialize a JSON value canonically: sorted keys, no insignificant white space, UTF-8 text kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def trace_payload(trace: Trace) -> str:
    """The text a trace's key is the hash of: its kind (and format) and its canonical JSON."""
    from dspy_rdf.tracejson import trace_to_json

    kind = trace.source_kind if trace.source_format == "dspy33" else f"{trace.source_format}/{trace.source_kind}"
    return kind + "\n" + canonical_json(trace_to_json(trace))


def key_from_payload(payload: str) -> str:
    """The key (``sha256-`` + 32 hex digits) of a :func:`trace_payload`."""
    digest = hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()
    return KEY_PREFIX + digest[:_KEY_HEX_DIGITS]


def trace_key(trace: Trace) -> str:
    """Return the content key of a trace (``sha256-`` + 32 hex digits); the source index is not part of it."""
    return key_from_payload(trace_payload(trace))


def check_base(base: str) -> str:
    """Return ``base`` if it can prefix trace IRIs, else raise ``ValueError`` saying why."""
    if not is_absolute_iri(base):
        raise ValueError(
            f"base IRI {base!r} is not an absolute IRI usable as a prefix "
            "(it needs a scheme such as https: or urn:, and no spaces, quotes, <, >, {, }, |, ^, ` or backslash)"
        )
    return base


def trace_iri(trace: Trace, *, base: str = DEFAULT_BASE) -> str:
    """Return the IRI of a trace: ``base`` followed by its content key."""
    return base + trace_key(trace)


def verify_trace_iri(trace: Trace, iri: str, *, base: str = DEFAULT_BASE) -> bool:
    """Recompute a trace's key and say whether ``iri`` is the IRI it should have under ``base``."""
    return iri == trace_iri(trace, base=base)
