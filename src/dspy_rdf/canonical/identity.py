"""Trace identity: the key a trace is stored under, and the digest of its content.

One execution is one trace, whatever path it took into a store. A trace's IRI is a base (``urn:dspy-rdf:trace:`` by
default) followed by its key, and the key is one of two kinds:

- ``run-`` + 32 hex digits, for a program run: the SHA-256 of the id of the execution it records, the same for every
  recording of that execution. That id is the DSPy call id of the run's top-level call (every callback of one call
  sees the same id, so two recorders of one program, or a run captured live and also kept as JSON, give one key), or,
  for a run recorded without DSPy's call ids (MLflow, OpenTelemetry), the trace id of the tool that recorded it, read
  as an OpenTelemetry trace id where it is one (MLflow 3's ``tr-<hex>`` and the ``traceId`` of its OTLP export are one
  trace). Which recording of an execution a store keeps is the first one put into it.
- ``content-`` + 32 hex digits, for everything else (history entries, requests, responses, messages, parts,
  trajectories, and a run that carries no id): the first 32 hex digits of the trace's content digest.

The content digest (``sha256:`` + 64 hex digits, written with each trace as ``dspy:content_digest``) is the SHA-256 of
the canonical JSON of the trace's model (:func:`model_json`: each object with its class and the fields that differ
from their defaults; the source index, which says where in an input file a trace was, left out). It depends on the
canonical model only, never on how a source writes its JSON back, and the model keeps every value in the one form that
every store and serializer gives back (times in UTC with a canonical fraction, decimals to 15 places, see
:mod:`dspy_rdf.canonical.model`), so a trace read back from any store, file format or OTLP export has the same digest and key.
``tests/test_identity.py`` pins one key per source format: a change here that re-keys stored data fails it.

Every other node's IRI is the trace IRI followed by the node's path (``/entry/0/request/message/1/part/0``): no text
from the trace ever reaches an IRI, so any input is safe. Keys of dspy-rdf 0.1.0 (``sha256-`` + 32 hex digits, a hash
of the trace's JSON) are recognised (:data:`LEGACY_KEY_PREFIX`): ``dspy-rdf migrate`` brings a store to these keys.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from dspy_rdf.canonical import model as m

__all__ = [
    "CONTENT_KEY_PREFIX",
    "DEFAULT_BASE",
    "DIGEST_PREFIX",
    "LEGACY_KEY_PREFIX",
    "RUN_KEY_PREFIX",
    "canonical_json",
    "check_base",
    "content_digest",
    "content_payload",
    "execution_id",
    "is_absolute_iri",
    "key_of_iri",
    "model_json",
    "order_key",
    "order_key_sparql",
    "short_hash",
    "trace_iri",
    "trace_key",
    "verify_trace_iri",
]

DEFAULT_BASE = "urn:dspy-rdf:trace:"
"""Default prefix of trace IRIs; pass ``base=`` (or ``--base``) to put traces under your own namespace."""

RUN_KEY_PREFIX = "run-"
"""Keys of program runs, from the id of the execution they record."""
CONTENT_KEY_PREFIX = "content-"
"""Keys of every other trace, from its content digest."""
LEGACY_KEY_PREFIX = "sha256-"
"""Keys of dspy-rdf 0.1.0 (a hash of the trace's JSON), which ``dspy-rdf migrate`` replaces."""
DIGEST_PREFIX = "sha256:"
_KEY_HEX_DIGITS = 32
_KEY = re.compile(r"(run-|content-|sha256-)[0-9a-f]{32}\Z")

# An absolute IRI (scheme ":" ...) without the characters N-Quads forbids inside <...>.
_ABSOLUTE_IRI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\x00-\x20<>\"{}|^`\\]*\Z")
_OTEL_TRACE_ID = re.compile(r"[0-9a-f]{32}")


def is_absolute_iri(text: str) -> bool:
    """Whether ``text`` is an absolute IRI (a scheme, ``:``, then no character N-Quads forbids inside ``<...>``)."""
    return _ABSOLUTE_IRI.match(text) is not None


def canonical_json(value: Any) -> str:
    """Serialize a JSON value canonically: sorted keys, no insignificant white space, UTF-8 text kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def short_hash(text: str) -> str:
    """``sha256-`` and the first 32 hex digits of the SHA-256 of ``text`` (a program's fingerprint)."""
    return "sha256-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_KEY_HEX_DIGITS]


# --- the canonical JSON of the model ---------------------------------------------------------------------------------

_CLASS_KEY = "@"
_NOT_CONTENT: dict[type, frozenset[str]] = {m.Trace: frozenset({"source_index", "content_digest"})}
"""Fields that say where a trace was read from, not what it holds.

A trace's session and user (``session_id``, ``user_id``) are content: they describe the execution (this run was made
in that conversation, for that user), every recorder that knows them records the same text, and a stored trace whose
session or user was changed or lost must fail its digest like any other changed value. They do not decide a program
run's key, which comes from the execution's id (:func:`execution_id`): a live capture and an MLflow import of one run
are one trace whether or not both recorded the session. A trace without them has the digest it always had (a field
at its default, None, is not written into :func:`model_json`)."""
_MODEL_TYPES = frozenset({name for name, obj in vars(m).items() if is_dataclass(obj)} | {"LMPart", "Call"})
_CONVERTERS: dict[type, Any] = {}
"""Per model class, the function that writes its objects as :func:`model_json` does: made once from the class's
fields, with each comparison to a default written out (the digest is computed for every trace written, and a generic
walk over the fields took twice as long as the trace's JSON)."""


def _converter(cls: type) -> Any:
    left_out = _NOT_CONTENT.get(cls, frozenset())
    env: dict[str, Any] = {"_model_json": model_json, "_CLASS": cls.__name__}
    lines = ["def convert(obj):", f"    out = {{{_CLASS_KEY!r}: _CLASS}}"]
    for i, f in enumerate(fields(cls)):
        if f.name in left_out:
            continue
        nested = any(word in _MODEL_TYPES for word in re.findall(r"\w+", str(f.type)))
        value = "_model_json(v)" if nested else "v"
        lines.append(f"    v = obj.{f.name}")
        if f.default is MISSING and f.default_factory is MISSING:  # required: always there
            lines.append(f"    out[{f.name!r}] = {value}")
        elif f.default is None:
            lines.append(f"    if v is not None: out[{f.name!r}] = {value}")
        elif f.default is not MISSING:  # a constant: False, a media type, a tool type
            env[f"_D{i}"] = f.default
            lines.append(f"    if v != _D{i} or type(v) is not type(_D{i}): out[{f.name!r}] = {value}")
        elif f.default_factory in (dict, list):  # an empty dict or list, DSPy's default: absent
            lines.append(f"    if v or type(v) is not {f.default_factory.__name__}: out[{f.name!r}] = {value}")
        elif f.default_factory is not MISSING:  # what is left: an object made by a factory (a request's default config)
            env[f"_D{i}"] = f.default_factory()
            lines.append(f"    if v != _D{i}: out[{f.name!r}] = {value}")
    lines.append("    return out")
    exec("\n".join(lines), env)  # noqa: S102 - code made here from the model's own field names
    _CONVERTERS[cls] = env["convert"]
    return env["convert"]


def model_json(value: Any) -> Any:
    """A model object as JSON data in one canonical shape: ``{"@": class name, field: value, ...}`` with the fields
    whose values differ from their defaults (so that a field added to the model later leaves the digest of every
    trace that does not use it as it was), lists of model objects item by item, JSON values as they are."""
    kind = type(value)
    convert = _CONVERTERS.get(kind)
    if convert is not None:
        return convert(value)
    if kind is list:
        return [model_json(item) for item in value] if value and (type(value[0]) in _CONVERTERS or is_dataclass(value[0])) else value
    if is_dataclass(kind):
        return _converter(kind)(value)
    return value


def content_payload(trace: m.Trace) -> str:
    """The text a trace's content digest is the hash of: the canonical JSON of its :func:`model_json`."""
    return json.dumps(model_json(trace), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_digest(payload: str) -> str:
    """The content digest (``sha256:`` + 64 hex digits) of a :func:`content_payload`."""
    return DIGEST_PREFIX + hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


# --- keys ------------------------------------------------------------------------------------------------------------


def execution_id(trace: m.Trace) -> str | None:
    """The id of the execution a program run records (see the module docstring), or None for a trace that is not a
    run or carries no id: ``dspy-call:<id>`` (the DSPy call id of its top-level call), ``otel-trace:<32 hex>`` (an
    OpenTelemetry trace id, MLflow 3's ``tr-`` ids included), or ``trace:<source format>:<id>`` (another recorder's
    trace id)."""
    if trace.source_kind != "program_run":
        return None
    root = next((call for call in trace.calls if call.parent_call is None), None)
    if root is not None and root.dspy_call_id:
        return "dspy-call:" + root.dspy_call_id
    own = trace.source_trace_id
    if not own:
        return None
    hex_id = own.lower().removeprefix("tr-")
    if _OTEL_TRACE_ID.fullmatch(hex_id) and hex_id.strip("0"):
        return "otel-trace:" + hex_id
    return f"trace:{trace.source_format}:{own}"


def trace_key(trace: m.Trace, digest: str | None = None) -> str:
    """The key of a trace (``run-`` or ``content-`` + 32 hex digits, see the module docstring); ``digest`` is its
    :func:`content_digest` when the caller has it already."""
    ran = execution_id(trace)
    if ran is not None:
        return RUN_KEY_PREFIX + hashlib.sha256(ran.encode("utf-8", "surrogatepass")).hexdigest()[:_KEY_HEX_DIGITS]
    if digest is None:
        digest = content_digest(content_payload(trace))
    return CONTENT_KEY_PREFIX + digest[len(DIGEST_PREFIX):][:_KEY_HEX_DIGITS]


def key_of_iri(iri: str) -> str | None:
    """The key a trace IRI ends in (this release's or 0.1.0's), or None when it ends in none."""
    found = _KEY.search(iri)
    return found.group(0) if found is not None and iri.endswith(found.group(0)) else None


ORDER_KEY_CHARACTERS = 15
"""The length of a trace's ``dspy:order_key``: pyoxigraph keeps a literal of at most 15 bytes inline in its indexes."""


def order_key(iri: str) -> str:
    """The ``dspy:order_key`` of the trace named ``iri``: the first letter of its key's kind and the key's first 14
    hex digits (``c…`` for a content key, ``r…`` for a run key), which order as the keys do; for an IRI that ends in
    no key, its last segment (after its last ``/`` or ``:``) cut to 15 characters."""
    key = key_of_iri(iri)
    if key is not None:
        kind, _, digits = key.partition("-")
        return kind[0] + digits[: ORDER_KEY_CHARACTERS - 1]
    return re.split(r"[:/]", iri)[-1][:ORDER_KEY_CHARACTERS]


def order_key_sparql(iri: str, key: str) -> str:
    """SPARQL that binds the variable ``key`` to the :func:`order_key` of the IRI bound to the variable ``iri`` (two
    ``BIND`` lines; ``iri`` + ``_text`` names the IRI's text): how the queries that read every trace and ``migrate``'s
    update compute it, with REGEX, SUBSTR, STRLEN and IF only, which every engine has."""
    text = f"{iri}_text"
    kind = f'IF(REGEX({text}, "run-[0-9a-f]{{32}}$"), "r", IF(REGEX({text}, "content-[0-9a-f]{{32}}$"), "c", "s"))'
    from_key = f"CONCAT({kind}, SUBSTR({text}, STRLEN({text}) - 31, {ORDER_KEY_CHARACTERS - 1}))"
    otherwise = f'SUBSTR(REPLACE({text}, "^.*[:/]", ""), 1, {ORDER_KEY_CHARACTERS})'
    return (
        f"BIND(STR({iri}) AS {text})\n"
        f'BIND(IF(REGEX({text}, "(run|content|sha256)-[0-9a-f]{{32}}$"), {from_key}, {otherwise}) AS {key})'
    )


def check_base(base: str) -> str:
    """Return ``base`` if it can prefix trace IRIs, else raise ``ValueError`` saying why."""
    if not is_absolute_iri(base):
        raise ValueError(
            f"base IRI {base!r} is not an absolute IRI usable as a prefix "
            "(it needs a scheme such as https: or urn:, and no spaces, quotes, <, >, {, }, |, ^, ` or backslash)"
        )
    return base


def trace_iri(trace: m.Trace, *, base: str = DEFAULT_BASE) -> str:
    """Return the IRI of a trace: ``base`` followed by its key."""
    return base + trace_key(trace)


def verify_trace_iri(trace: m.Trace, iri: str, *, base: str = DEFAULT_BASE) -> bool:
    """Recompute a trace's key and say whether ``iri`` is the IRI it should have under ``base``."""
    return iri == trace_iri(trace, base=base)
