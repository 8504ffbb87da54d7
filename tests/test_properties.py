"""Property-based tests (hypothesis): arbitrary valid DSPy 3.3 JSON of every source kind survives RDF.

The strategies build DSPy 3.3 JSON (what ``model_dump(mode="json")`` writes, with optional fields present or
absent, nulls where DSPy dumps them) and read it with :func:`dspy_rdf.trace_from_json`, so every trace is one
the validating reader accepts. Media parts have exactly one non-empty source, citations at least one of text,
title or url, responses at least one output, and timestamps are ISO 8601 date-times, as DSPy 3.3 requires.
Text is any Unicode without lone surrogates (those are rejected on purpose, see ``tests/test_hostile.py``).

Properties:

1. export -> parse gives back the same trace and IRI, in every RDF format;
2. the exported graph conforms to the SHACL shapes and rules (for traces that also keep the cross-node integrity
   rules, which DSPy does not enforce: see :func:`well_formed`);
3. exporting is deterministic: the same N-Quads bytes twice, and after ``trace_to_json`` -> ``trace_from_json``
   (auto-detected) and after a trip through RDF, the same trace, IRI and bytes.

Two library bugs they found (JSON-LD rewrote timestamps; negative token counts were read but did not conform) are
fixed; their minimal inputs stay attached with ``@example`` (``JSONLD_TIMESTAMP_BUG``, ``NEGATIVE_TOKENS_BUG``).

The examples are derandomized so CI is stable; set ``DSPY_RDF_HYPOTHESIS_RANDOM=1`` to explore new ones and
``DSPY_RDF_HYPOTHESIS_FACTOR=10`` to run ten times as many (the default run, without ``--slow``, tries 0.4 of them:
``conftest.examples``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from decimal import Decimal
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyoxigraph as ox
import pytest
from conftest import examples
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from dspy_rdf import (
    RdfFormat,
    parse_traces,
    serialize_traces,
    trace_from_json,
    trace_iri,
    trace_to_json,
    validate_traces,
)
from dspy_rdf.analytics.catalog import bind_parameters, get_query, list_queries
from dspy_rdf.rdf.formats import encode_trace_figures
from dspy_rdf.rdf.writer import TraceFigures, stored_form
from dspy_rdf.rdf.vocab import DSPY, RDF_TYPE
from dspy_rdf.store.base import STATS_FACTS
from dspy_rdf.store.ledger import LEDGER, STALE_MAXIMUM, STATS_COLUMNS, STATS_QUERY, Ledger, reads_maxima, stale_maxima
from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.model import PART_TYPES, USAGE_TOKEN_FIELDS
from dspy_rdf.canonical.redact import DEFAULT_REDACTOR
from dspy_rdf.sources.dspy33 import ENTRY_DERIVED, ENTRY_FIELDS

_RANDOM = os.environ.get("DSPY_RDF_HYPOTHESIS_RANDOM") == "1"


def _settings(max_examples: int) -> settings:
    return settings(
        max_examples=examples(max_examples),
        deadline=None,
        derandomize=not _RANDOM,
        database=None if not _RANDOM else settings.default.database,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )


# --- text and JSON values ------------------------------------------------------------------------------------

HOSTILE = [
    "",
    " ",
    "with space",
    'quote " and \\ backslash',
    "<angle> & #hash %25 {braces} |pipe| ^caret `tick`",
    "new\nline and cr\r and tab\t",
    "nul\x00byte",
    "caf\u00e9",
    "cafe\u0301",
    "emoji \U0001f600\U0001f469\u200d\U0001f469\u200d\U0001f467 and \u2028 line separator",
    "\ufeffbom",
    '"""triple""" \'\'\'quotes\'\'\'',
    "_:blank <urn:x> .",
    "@prefix x: <y> .",
    '{"@context": null, "@id": "x"}',
    "\U0010ffff\ufffe",
]

_CHARS = st.characters(blacklist_categories=("Cs",))
TEXT = st.one_of(st.sampled_from(HOSTILE), st.text(alphabet=_CHARS, max_size=12))
NONEMPTY = st.one_of(st.sampled_from([h for h in HOSTILE if h]), st.text(alphabet=_CHARS, min_size=1, max_size=12))
BIG_INT = st.integers(min_value=-(10**40 - 1), max_value=10**40 - 1)
INT = st.one_of(st.integers(min_value=-5, max_value=100_000), BIG_INT)
FLOAT = st.floats(allow_nan=False, allow_infinity=False)
DECIMAL = st.one_of(st.floats(min_value=-1e15, max_value=1e15, allow_nan=False), st.integers(min_value=-(10**15), max_value=10**15))
"""Numbers of the decimal slots (cost, temperature, top_p): the range every store keeps exactly; a number beyond 20
digits before the point is refused by the writer (test_a_decimal_beyond_what_stores_keep_is_refused_by_name)."""
JSON_SCALAR = st.one_of(st.none(), st.booleans(), INT, FLOAT, TEXT)
JSON = st.recursive(
    JSON_SCALAR,
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(TEXT, children, max_size=3)),
    max_leaves=8,
)
JSON_OBJ = st.dictionaries(TEXT, JSON, max_size=3)


def nullable(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """A value, or the ``null`` DSPy dumps for an unset optional field."""
    return st.one_of(st.none(), strategy)


def obj(required: dict | None = None, **optional: st.SearchStrategy) -> st.SearchStrategy[dict]:
    """A JSON object with the required keys and any subset of the optional ones."""
    return st.fixed_dictionaries(required or {}, optional=optional)


# --- parts ---------------------------------------------------------------------------------------------------

_SOURCES = ("data", "url", "file_id", "path")


@st.composite
def _one_source(draw: st.DrawFn) -> dict:
    """Exactly one non-empty media source (DSPy's ``_validate_one_source``); the others absent or null."""
    chosen = draw(st.sampled_from(_SOURCES))
    out = {chosen: draw(NONEMPTY)}
    for key in _SOURCES:
        if key != chosen and draw(st.booleans()):
            out[key] = None
    return out


def _media_part(kind: str, **extra: st.SearchStrategy) -> st.SearchStrategy[dict]:
    base = obj({"type": st.just(kind)}, metadata=JSON_OBJ, media_type=nullable(TEXT), **extra)
    return st.builds(lambda b, s: {**b, **s}, base, _one_source())


@st.composite
def _document_part(draw: st.DrawFn) -> dict:
    part = draw(obj({"type": st.just("document")}, metadata=JSON_OBJ, media_type=nullable(TEXT), citations=JSON_OBJ,
                    title=nullable(TEXT), context=nullable(TEXT)))
    if draw(st.booleans()):
        part.update(draw(_one_source()))
        if draw(st.booleans()):
            part["source"] = None
    else:
        part["source"] = draw(st.dictionaries(TEXT, JSON, min_size=1, max_size=3))  # DSPy: non-empty when given
        for key in _SOURCES:
            if draw(st.booleans()):
                part[key] = None
    return part


@st.composite
def _citation_part(draw: st.DrawFn) -> dict:
    part = draw(obj({"type": st.just("citation")}, metadata=JSON_OBJ, text=nullable(TEXT), title=nullable(TEXT), url=nullable(TEXT)))
    if all(part.get(k) is None for k in ("text", "title", "url")):
        part[draw(st.sampled_from(("text", "title", "url")))] = draw(TEXT)
    return part


LEAF_PARTS = {
    "text": obj({"type": st.just("text"), "text": TEXT}, metadata=JSON_OBJ),
    "image": _media_part("image", detail=st.sampled_from([None, "low", "high", "auto"])),
    "audio": _media_part("audio"),
    "video": _media_part("video"),
    "document": _document_part(),
    "binary": _media_part("binary", filename=nullable(TEXT)),
    "tool_call": obj(
        {"type": st.just("tool_call"), "name": TEXT}, id=nullable(TEXT), args=JSON_OBJ, provider_data=JSON_OBJ, metadata=JSON_OBJ
    ),
    "thinking": obj({"type": st.just("thinking"), "text": TEXT}, redacted=st.booleans(), metadata=JSON_OBJ),
    "citation": _citation_part(),
    "refusal": obj({"type": st.just("refusal"), "text": TEXT}, metadata=JSON_OBJ),
}


def _tool_result(content: st.SearchStrategy) -> st.SearchStrategy[dict]:
    return obj(
        {"type": st.just("tool_result")},
        call_id=nullable(TEXT),
        name=nullable(TEXT),
        content=st.lists(content, max_size=3),
        is_error=st.booleans(),
        provider_data=JSON_OBJ,
        metadata=JSON_OBJ,
    )


PART = st.recursive(st.one_of(*LEAF_PARTS.values()), _tool_result, max_leaves=5)
PARTS_BY_KIND = {**LEAF_PARTS, "tool_result": _tool_result(PART)}
assert set(PARTS_BY_KIND) == set(PART_TYPES)
PARTS = st.lists(PART, max_size=3)

# --- messages, requests, responses, history entries --------------------------------------------------------

ROLE = st.one_of(st.sampled_from(["system", "user", "assistant", "tool", "developer"]), TEXT)
MESSAGE = obj({"role": ROLE, "parts": PARTS}, name=nullable(TEXT), metadata=JSON_OBJ)
TOOL_SPEC = obj(
    {"name": TEXT},
    type=st.just("function"),
    description=nullable(TEXT),
    parameters=JSON_OBJ,
    strict=nullable(st.booleans()),
    metadata=JSON_OBJ,
    provider_data=JSON_OBJ,
)
CONFIG = obj(
    temperature=nullable(DECIMAL),
    max_tokens=nullable(INT),
    top_p=nullable(DECIMAL),
    stop=nullable(st.lists(TEXT, max_size=3)),
    n=nullable(INT),
    logprobs=nullable(st.one_of(st.booleans(), INT)),
    response_format=JSON,
    reasoning=nullable(obj(effort=nullable(TEXT), max_tokens=nullable(INT), summary=nullable(TEXT))),
    tool_choice=nullable(
        obj(mode=st.sampled_from(["auto", "required", "none"]), allowed=nullable(st.lists(TEXT, max_size=3)), parallel=nullable(st.booleans()))
    ),
    cache=nullable(obj(enabled=nullable(st.booleans()), rollout_id=nullable(st.one_of(INT, TEXT)))),
    prompt_cache=nullable(obj(enabled=nullable(st.booleans()), key=nullable(TEXT))),
    extensions=JSON_OBJ,
)
REQUEST = obj(
    {"model": TEXT, "messages": st.lists(MESSAGE, max_size=3)},
    tools=st.lists(TOOL_SPEC, max_size=2),
    config=nullable(CONFIG),
    metadata=JSON_OBJ,
)

_USAGE_KNOWN = set(USAGE_TOKEN_FIELDS) | {"details", "metadata"}


@st.composite
def _usage(draw: st.DrawFn) -> dict:
    usage = draw(obj(details=JSON_OBJ, metadata=JSON, **{name: nullable(INT) for name in USAGE_TOKEN_FIELDS}))
    # LMUsage allows extra fields; they are kept in extra_fields.
    usage.update(draw(st.dictionaries(TEXT.filter(lambda k: k not in _USAGE_KNOWN), JSON, max_size=2)))
    return usage


FINISH_REASON = st.one_of(st.sampled_from(["stop", "length", "tool_calls", "content_filter", "error"]), TEXT)
OUTPUT = obj(
    parts=PARTS,
    finish_reason=nullable(FINISH_REASON),
    truncated=st.booleans(),
    logprobs=JSON,
    provider_data=JSON_OBJ,
    metadata=JSON_OBJ,
)
RESPONSE = obj(
    {"outputs": st.lists(OUTPUT, min_size=1, max_size=2)},
    model=nullable(TEXT),
    usage=nullable(_usage()),
    cost=nullable(DECIMAL),
    cache_hit=st.booleans(),
    response_id=nullable(TEXT),
    provider_data=JSON_OBJ,
    metadata=JSON_OBJ,
)

_ZONES = [None, timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8)), timezone(timedelta(0))]


@st.composite
def _timestamp(draw: st.DrawFn) -> str:
    """An ISO 8601 date-time as DSPy writes it (``datetime.now().isoformat()``), with or without an offset or ``Z``."""
    when = draw(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)))
    when = when.replace(tzinfo=draw(st.sampled_from(_ZONES)))
    text = when.isoformat(timespec=draw(st.sampled_from(["auto", "seconds", "milliseconds", "microseconds"])))
    if text.endswith("+00:00") and draw(st.booleans()):
        text = text[: -len("+00:00")] + "Z"
    return text


_ENTRY_KEYS = ENTRY_FIELDS | ENTRY_DERIVED


@st.composite
def _entry(draw: st.DrawFn) -> dict:
    entry = draw(
        obj(
            {"request": REQUEST, "response": RESPONSE, "timestamp": _timestamp(), "uuid": st.one_of(st.uuids().map(str), NONEMPTY)},
            model_type=nullable(st.one_of(st.sampled_from(["chat", "text", "responses"]), TEXT)),
        )
    )
    # LMHistoryEntry allows extra fields; they are kept in extra_fields.
    entry.update(draw(st.dictionaries(TEXT.filter(lambda k: k not in _ENTRY_KEYS), JSON, max_size=2)))
    return entry


ENTRY = _entry()

# Every DSPy 3.3 source kind, as the JSON DSPy dumps for it.
DSPY33_JSON = {
    "lm_history_entry": ENTRY,
    "lm_history": st.lists(ENTRY, min_size=1, max_size=2),
    "lm_request": REQUEST,
    "lm_response": RESPONSE,
    "lm_message": MESSAGE,
    "lm_part": st.one_of(*PARTS_BY_KIND.values()),
}
ANY_DSPY33_JSON = st.one_of(*DSPY33_JSON.values())


def read(value) -> object:
    """The trace of generated DSPy 3.3 JSON (the validating reader accepts it, or the strategy is wrong)."""
    note(f"input JSON: {json.dumps(value, ensure_ascii=True)}")
    trace = trace_from_json(value, source_format="dspy33")
    assert trace.source_format == "dspy33"
    return trace


# --- traces that also keep the cross-node integrity rules (shapes/dspy.rules.ttl) ----------------------------


def _walk_parts(parts: list, visit) -> None:
    for part in parts:
        visit(part)
        if part.get("type") == "tool_result":
            _walk_parts(part.get("content") or [], visit)


def _fix_parts(parts: list, offered: list[str]) -> None:
    """Unique tool-call ids among siblings, tool calls naming an offered tool, error results with content."""
    seen: set[str] = set()
    for i, part in enumerate(parts):
        if part.get("type") == "tool_call":
            if part.get("id") is not None:
                while part["id"] in seen:
                    part["id"] += f"#{i}"
                seen.add(part["id"])
            if offered:
                part["name"] = offered[i % len(offered)]

    def error_content(part: dict) -> None:
        if part.get("type") == "tool_result" and part.get("is_error") and not part.get("content"):
            part["content"] = [{"type": "text", "text": "error"}]

    _walk_parts(parts, error_content)


def _fix_usage(usage: dict | None, nonnegative: bool) -> None:
    if not usage:
        return
    if nonnegative:
        for name in USAGE_TOKEN_FIELDS:
            if isinstance(usage.get(name), int):
                usage[name] = abs(usage[name])
    # DSPy's alias filling (LMUsage.fill_aliases), then total = input + output when all three are there.
    tokens_in = usage.get("input_tokens") if usage.get("input_tokens") is not None else usage.get("prompt_tokens")
    tokens_out = usage.get("output_tokens") if usage.get("output_tokens") is not None else usage.get("completion_tokens")
    if tokens_in is not None and tokens_out is not None and usage.get("total_tokens") is not None:
        usage["total_tokens"] = tokens_in + tokens_out


def _fix_exchange(request: dict | None, response: dict | None, nonnegative: bool) -> None:
    offered = [t["name"] for t in (request or {}).get("tools") or []]
    for message in (request or {}).get("messages") or []:
        _fix_parts(message["parts"], offered)
    for output in (response or {}).get("outputs") or []:
        _fix_parts(output.get("parts") or [], offered)
    _fix_usage((response or {}).get("usage"), nonnegative)


def well_formed(value, *, nonnegative_tokens: bool = True):
    """A copy of generated DSPy 3.3 JSON that keeps the integrity rules, which DSPy itself does not enforce: total
    tokens = input + output, tool-call ids unique within a message or output, tool calls naming a tool the
    request offers (when it offers any), error results with content. ``nonnegative_tokens`` also makes token counts
    non-negative (see ``test_negative_token_counts_are_read_but_do_not_conform``)."""
    value = copy.deepcopy(value)
    entries = value if isinstance(value, list) else [value] if "request" in value and "response" in value else []
    for entry in entries:
        _fix_exchange(entry["request"], entry["response"], nonnegative_tokens)
    if not entries:
        if "outputs" in value:
            _fix_exchange(None, value, nonnegative_tokens)
        elif "messages" in value:
            _fix_exchange(value, None, nonnegative_tokens)
        elif "parts" in value:
            _fix_parts(value["parts"], [])
        else:
            _fix_parts([value], [])
    return value


def as_dspy_writes_timestamps(value):
    """A copy whose entry timestamps are as DSPy 3.3 writes them: ``datetime.now().isoformat()`` (no offset; six
    fractional digits, or none)."""
    value = copy.deepcopy(value)
    for entry in value if isinstance(value, list) else [value] if "timestamp" in value else []:
        entry["timestamp"] = datetime.fromisoformat(entry["timestamp"]).replace(tzinfo=None).isoformat()
    return value


# --- the bugs these properties found (minimal inputs) ------------------------------------------------------------

# JSON-LD export goes through rdflib, which rewrites xsd:dateTime literals to Python's isoformat: "Z" becomes
# "+00:00", "-00:00" becomes "+00:00", ".000" is dropped, ".123" becomes ".123000", ".1234567" loses its 7th digit.
# The timestamp is kept as text in the model (and the IRI hashes it), so the trace read back is another trace.
JSONLD_TIMESTAMP_BUG = {"request": {"model": "", "messages": []}, "response": {"outputs": [{}]}, "timestamp": "2000-01-01T00:00:00Z", "uuid": "u"}

# DSPy and the reader accept negative token counts; the shapes required the derived totals to be >= 0.
NEGATIVE_TOKENS_BUG = {"outputs": [{}], "usage": {"input_tokens": -1}}

# --- properties ----------------------------------------------------------------------------------------------

# JSON-LD goes through rdflib and is much slower than the others.
_EXAMPLES = {RdfFormat.N_TRIPLES: 100, RdfFormat.N_QUADS: 100, RdfFormat.TURTLE: 100, RdfFormat.TRIG: 100, RdfFormat.JSON_LD: 30}


def _check_round_trip(trace, fmt: RdfFormat) -> None:
    expected = DEFAULT_REDACTOR(trace)  # export redacts secrets; generated text essentially never holds one
    [(iri, back)] = parse_traces(serialize_traces([trace], fmt), fmt)
    assert back == expected
    assert iri == trace_iri(expected)


@pytest.mark.parametrize(
    "fmt", list(RdfFormat), ids=lambda f: f.value
)
def test_export_then_parse_gives_back_the_same_trace(fmt):
    @_settings(_EXAMPLES[fmt])
    @given(value=ANY_DSPY33_JSON, source_index=st.none() | st.integers(min_value=0, max_value=10**12))
    @example(value=JSONLD_TIMESTAMP_BUG, source_index=None)
    def check(value, source_index):
        trace = read(value)
        trace.source_index = source_index
        _check_round_trip(trace, fmt)

    check()


@_settings(_EXAMPLES[RdfFormat.JSON_LD])
@given(value=ANY_DSPY33_JSON)
def test_jsonld_round_trips_timestamps_as_dspy_writes_them(value):
    """JSON-LD, everything else arbitrary, with timestamps as DSPy itself writes them (which rdflib keeps)."""
    _check_round_trip(read(as_dspy_writes_timestamps(value)), RdfFormat.JSON_LD)


@pytest.mark.parametrize("kind", list(DSPY33_JSON))
def test_every_source_kind_round_trips_through_nquads(kind):
    @_settings(25)
    @given(value=DSPY33_JSON[kind])
    def check(value):
        trace = read(value)
        assert trace.source_kind == kind
        _check_round_trip(trace, RdfFormat.N_QUADS)

    check()


@pytest.mark.parametrize("kind", PART_TYPES)
def test_every_part_kind_round_trips_through_turtle(kind):
    @_settings(15)
    @given(value=PARTS_BY_KIND[kind])
    def check(value):
        trace = read(value)
        assert trace.parts[0].part_type == kind
        _check_round_trip(trace, RdfFormat.TURTLE)

    check()


@_settings(60)
@given(value=ANY_DSPY33_JSON)
def test_the_exported_graph_conforms_to_the_shapes(value):
    report = validate_traces([read(well_formed(value))])
    assert report.conforms, str(report)


@_settings(10)
@given(value=ANY_DSPY33_JSON)
@example(value=NEGATIVE_TOKENS_BUG)
def test_negative_token_counts_are_violations(value):
    """The same traces with token counts of any sign, as DSPy and the reader accept them: a negative count breaks the
    schema's minimum (and nothing else), a trace without one conforms."""
    from dspy_rdf.canonical.identity import model_json

    trace = read(well_formed(value, nonnegative_tokens=False))

    def negative(node) -> bool:
        if isinstance(node, dict):
            return any(k in USAGE_TOKEN_FIELDS and isinstance(v, int) and v < 0 or negative(v) for k, v in node.items())
        return isinstance(node, list) and any(map(negative, node))

    report = validate_traces([trace])
    assert report.conforms == (not negative(model_json(trace))), str(report)
    assert all(x.constraint.endswith("MinInclusiveConstraintComponent") for x in report.violations), str(report)


@_settings(200)
@given(value=ANY_DSPY33_JSON)
def test_exporting_twice_gives_the_same_graph(value):
    trace = read(value)
    first = serialize_traces([trace], RdfFormat.N_QUADS)
    assert serialize_traces([trace], RdfFormat.N_QUADS) == first
    # The JSON a trace is written back as reads (auto-detected) to the same trace, IRI and graph.
    again = trace_from_json(json.loads(json.dumps(trace_to_json(trace))))
    assert again == trace
    assert trace_iri(again) == trace_iri(trace)
    assert serialize_traces([again], RdfFormat.N_QUADS) == first
    # So does the trace read back from the graph.
    [(_, back)] = parse_traces(first, RdfFormat.N_QUADS)
    assert serialize_traces([back], RdfFormat.N_QUADS) == first


@_settings(100)
@given(value=st.floats(min_value=-1e15, max_value=1e15, allow_nan=False))
def test_a_decimal_slot_keeps_a_number_to_15_places_and_writes_that_exactly(value):
    """A cost is kept to 15 places after the point (what every store keeps): the model rounds once, the writer writes
    that number's exact decimal text, and reading it back gives the same number again."""
    from dspy_rdf.canonical import model as m

    response = m.LMResponse(outputs=[m.LMOutput()], cost=value)
    assert response.cost == round(value, 15) and abs(response.cost - value) <= 5e-16 + abs(value) * 1e-15
    trace = m.Trace(source_kind="lm_response", source_format="dspy33", response=response)
    [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.N_QUADS), RdfFormat.N_QUADS)
    assert back.response.cost == response.cost and back == trace


@pytest.mark.parametrize("value", [1e20, -1e20, 1e300, float("inf"), float("nan")])
def test_a_decimal_beyond_what_stores_keep_is_refused_by_name(value):
    from dspy_rdf.canonical import model as m
    from dspy_rdf.canonical.errors import TraceInputError

    trace = m.Trace(source_kind="lm_response", source_format="dspy33", response=m.LMResponse(outputs=[m.LMOutput()], cost=value))
    with pytest.raises(TraceInputError, match=r"cost .* cannot be written as a decimal number that every store keeps"):
        serialize_traces([trace], RdfFormat.N_QUADS)


# --- the exception facts the writer derives give the canned queries' rows over raw triples ------------------

RAW_QUERIES = Path(__file__).parent / "data" / "raw_queries"
_FEW = st.sampled_from(["a", "b", None])  # tool names and call ids from a few values: calls repeat, answer, miss


@st.composite
def _colliding(draw: st.DrawFn, value):
    """``value`` with every tool name and call id redrawn from a few values, so that generated traces repeat call
    ids in one message, answer some calls and leave others unanswered, and call tools their request does not offer."""
    value = copy.deepcopy(value)

    def visit(node) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            kind = node.get("type")
            if kind == "tool_call":
                node["name"] = draw(_FEW) or "c"
                node["id"] = draw(_FEW)
            elif kind == "tool_result":
                node["call_id"] = draw(_FEW)
            for spec in node.get("tools") or []:  # a request's tools
                spec["name"] = draw(_FEW) or "c"
            for item in node.values():
                visit(item)

    visit(value)
    return value


def _rows(store: ox.Store, sparql: str, sampled: str | None = None) -> list[tuple]:
    """The rows of a query, the column ``sampled`` (a value SAMPLE() picks from a group) left out."""
    result = store.query(sparql)
    keep = [i for i, var in enumerate(result.variables) if var.value != sampled]
    return [tuple(None if row[i] is None else str(row[i]) for i in keep) for row in result]


# Traces made of what the exception queries look at: several tool calls, results and refusals in a message or
# output (results holding calls and refusals too), requests offering tools or not, entries and conversations.
_EXCEPTION_PART = st.one_of(
    LEAF_PARTS["tool_call"], LEAF_PARTS["tool_call"], LEAF_PARTS["refusal"], LEAF_PARTS["text"],
    _tool_result(st.one_of(LEAF_PARTS["tool_call"], LEAF_PARTS["refusal"])),
)  # fmt: skip
_EXCEPTION_PARTS = st.lists(_EXCEPTION_PART, min_size=1, max_size=5)
_EXCEPTION_REQUEST = obj(
    {"model": TEXT, "messages": st.lists(obj({"role": ROLE, "parts": _EXCEPTION_PARTS}), min_size=1, max_size=3)},
    tools=st.lists(TOOL_SPEC, min_size=1, max_size=2),
)
_EXCEPTION_RESPONSE = obj({"outputs": st.lists(obj(parts=_EXCEPTION_PARTS), min_size=1, max_size=2)})
_EXCEPTION_ENTRY = obj(
    {"request": _EXCEPTION_REQUEST, "response": _EXCEPTION_RESPONSE, "timestamp": st.sampled_from(["2025-01-31T12:00:00Z", "2025-02-01T08:30:00"]),
     "uuid": st.uuids().map(str)}
)  # fmt: skip
_EXCEPTION_HISTORY = st.lists(_EXCEPTION_ENTRY, min_size=1, max_size=3)
EXCEPTION_JSON = st.one_of(  # mostly LM calls, where requests offer tools
    _EXCEPTION_HISTORY, _EXCEPTION_HISTORY, _EXCEPTION_ENTRY, _EXCEPTION_ENTRY, _EXCEPTION_REQUEST, _EXCEPTION_RESPONSE,
    obj({"role": ROLE, "parts": _EXCEPTION_PARTS}), ANY_DSPY33_JSON,
)  # fmt: skip


@_settings(300)
@given(values=st.lists(EXCEPTION_JSON.flatmap(_colliding), min_size=1, max_size=3), data=st.data())
def test_the_exception_facts_give_the_rows_of_the_queries_over_raw_triples(values, data):
    """Every query that looks for exceptions starts from facts the writer derives; over generated traces (tool
    names and call ids from a few values) each gives the rows the same query gives over the raw triples, with and
    without its parameters."""
    traces = [read(as_dspy_writes_timestamps(value)) for value in values]
    store = ox.Store()
    store.load(serialize_traces(traces, RdfFormat.N_QUADS), ox.RdfFormat.N_QUADS)
    for path in sorted(RAW_QUERIES.glob("*.rq")):
        canned = get_query(path.stem)
        raw = dataclasses.replace(canned, text=path.read_text(encoding="utf-8"))
        params: dict[str, str] = {"limit": data.draw(st.sampled_from(["1", "2", "100000", "100000"]), label=f"{path.stem} limit")}
        names = {p.name for p in canned.parameters}
        if "tool" in names and data.draw(st.booleans(), label=f"{path.stem} tool given"):
            params["tool"] = data.draw(st.sampled_from(["a", "b", "c"]), label=f"{path.stem} tool")
        if "framework_tools" in names:
            params["framework_tools"] = data.draw(st.sampled_from(["0", "1"]), label=f"{path.stem} framework_tools")
        # an orphan result's tool is one of its parts' names, whichever SAMPLE() meets first
        sampled = "tool" if path.stem == "orphan_tool_results" else None
        assert _rows(store, bind_parameters(canned, params), sampled) == _rows(store, bind_parameters(raw, params), sampled), path.stem


# --- the store's ledger gives the rows of the queries over the triples -----------------------------------------

LEDGER_QUERIES = [query for query in list_queries() if query.scan is not None]


def _ledgered_store(traces: list[m.Trace], data: st.DataObject) -> ox.Store:
    """The traces in a store with their ledger entry, then some of them removed (their graphs dropped, their figures
    taken out by an entry of their own)."""
    store = ox.Store()
    written: dict[str, TraceFigures] = {}
    entry = Ledger()
    for trace in traces:
        iri, stored, digest = stored_form(trace)
        nquads, figures = encode_trace_figures(stored, iri=iri, digest=digest)
        if iri not in written:
            written[iri] = figures
            entry.add(figures)
            store.load(nquads, ox.RdfFormat.N_QUADS)
    store.load(entry.nquads()[1], ox.RdfFormat.N_QUADS)
    removed = data.draw(st.lists(st.sampled_from(sorted(written)), unique=True, max_size=len(written) - 1), label="removed")
    if removed:
        taken = Ledger()
        for iri in removed:
            store.remove_graph(ox.NamedNode(iri))
            taken.add(written[iri], sign=-1)
        store.load(taken.nquads()[1], ox.RdfFormat.N_QUADS)
    return store


@_settings(200)
@given(values=st.lists(st.one_of(EXCEPTION_JSON, ANY_DSPY33_JSON), min_size=1, max_size=4), data=st.data())
def test_the_ledger_gives_the_rows_of_the_queries_over_the_triples(values, data):
    """Each query that adds up the store's ledger gives the rows its scan version gives over the triples, for
    generated traces, after some of them are removed (their graphs dropped, their figures taken out by an entry of
    their own) too."""
    store = _ledgered_store([read(as_dspy_writes_timestamps(value)) for value in values], data)
    assert LEDGER_QUERIES
    stale = stale_maxima({var.value: term.value for var, term in zip(row.variables, row) if term is not None} for row in store.query(STALE_MAXIMUM))  # type: ignore[union-attr]
    for query in LEDGER_QUERIES:
        if stale and reads_maxima(query.text):
            continue  # a maximum whose holders were removed: the catalog reads the triples (the scan version)
        scan = dataclasses.replace(query, text=query.scan)
        assert _rows(store, bind_parameters(query, {})) == _rows(store, bind_parameters(scan, {})), query.name
    assert _ledger_stats(store) == _stats_over_triples(store)


def _ledger_stats(store: ox.Store) -> dict[str, Decimal]:
    """The ledger's ``stats`` rows, summed over every version of the derived facts."""
    sums = dict.fromkeys(STATS_COLUMNS, Decimal(0))
    for row in store.query(STATS_QUERY):  # type: ignore[union-attr]
        for name in STATS_COLUMNS:
            sums[name] += Decimal(row[name].value) if row[name] is not None else Decimal(0)
    return sums


def _stats_over_triples(store: ox.Store) -> dict[str, Decimal]:
    """What ``stats`` counts, read here from the triples: the trace graphs, their triples, their derived facts."""
    sums = dict.fromkeys(STATS_COLUMNS, Decimal(0))
    wanted = {f"{DSPY}{fact}": name for name, fact in STATS_FACTS.items()}
    for quad in store:
        graph = quad.graph_name
        if not isinstance(graph, ox.NamedNode) or graph.value.startswith(LEDGER):
            continue
        sums["triples"] += 1
        if quad.subject == graph:
            if quad.predicate.value == RDF_TYPE and quad.object.value == f"{DSPY}Trace":
                sums["traces"] += 1
            elif quad.predicate.value in wanted:
                sums[wanted[quad.predicate.value]] += Decimal(quad.object.value)
    return sums


# --- latencies: the duration buckets find the slowest executions and the percentiles ------------------------------

# microseconds of every magnitude, with ties (a few values drawn often), zero, and a clock that went backwards
_MICROSECONDS = st.one_of(
    st.sampled_from([0, 1, 99, 100, 999, 1000, 12345, 99999, 100000, 1_000_000, 1_000_001, 9_999_999]),
    st.integers(min_value=-2_000_000, max_value=-1),
    st.integers(min_value=0, max_value=5_000_000_000),
    st.integers(min_value=10_000, max_value=10_500),
)
_EXECUTION = st.tuples(st.sampled_from(["a", "b", "finish"]), st.one_of(st.none(), _MICROSECONDS), st.booleans())


def _timed_run(executions: list[tuple[str, int | None, bool]], react: bool) -> m.Trace:
    """A program run whose tool executions took these microseconds (None: no end), some raising; ``react``: a ReAct
    run, whose ``finish`` tool DSPy adds."""
    start = datetime(2032, 3, 1, 12, tzinfo=timezone.utc)
    calls: list[m.Call] = []
    if react:
        calls.append(m.ModuleCall(module_class="ReAct", started_at=start.isoformat()))
    for n, (tool, micros, fails) in enumerate(executions):
        began = start + timedelta(minutes=n)
        calls.append(m.ToolExecution(
            tool_call=m.ToolCall(name=tool, args={"n": n}), started_at=began.isoformat(),
            ended_at=None if micros is None else (began + timedelta(microseconds=micros)).isoformat(),
            error="Boom" if fails else None, parent_call=0 if react else None,
        ))  # fmt: skip
    return m.Trace(source_kind="program_run", source_format="dspy_callback", calls=calls, started_at=start.isoformat())


@_settings(150)
@given(runs=st.lists(st.tuples(st.lists(_EXECUTION, min_size=1, max_size=30), st.booleans()), min_size=1, max_size=4), data=st.data())
def test_the_duration_buckets_give_the_slowest_executions_and_the_percentiles_of_every_execution(runs, data):
    """slowest_tool_executions and tool_latency_per_tool, which look up a few duration buckets the ledger points to,
    give the rows their scan versions give over every execution, for latencies of every magnitude (ties, zero, a
    negative one), any limit and tool, after removals too."""
    store = _ledgered_store([_timed_run(executions, react) for executions, react in runs], data)
    for name in ("slowest_tool_executions", "tool_latency_per_tool"):
        query = get_query(name)
        params: dict[str, str] = {}
        if name == "slowest_tool_executions":
            params["limit"] = data.draw(st.sampled_from(["1", "2", "5", "1000"]), label="limit")
        if data.draw(st.booleans(), label=f"{name} tool given"):
            params["tool"] = data.draw(st.sampled_from(["a", "b", "finish"]), label=f"{name} tool")
        params["framework_tools"] = data.draw(st.sampled_from(["0", "1"]), label=f"{name} framework_tools")
        scan = dataclasses.replace(query, text=query.scan)
        assert _rows(store, bind_parameters(query, params)) == _rows(store, bind_parameters(scan, params)), name
