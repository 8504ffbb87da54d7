"""Model -> RDF: N-Quads text written directly from the canonical model.

This is the hot path of every export, so it formats N-Quads lines with plain string operations instead of
building rdflib or pyoxigraph terms (see ``bench/bench_mapping.py`` and ``docs/benchmarks.md``). Every other
format is produced from this text by :mod:`dspy_rdf.rdf.formats`.

Each node is typed with its most specific schema class; ``name`` is ``rdfs:label``; JSON-valued slots are one
``rdf:JSON`` literal of canonical JSON; ordered items carry ``dspy:position``; a JSON object slot that is
empty (DSPy's default) is left out, like any ``None`` value.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING, Any, TypeGuard

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.identity import DEFAULT_BASE, check_base, content_digest, content_payload, order_key, trace_key
from dspy_rdf.rdf import vocab as v

if TYPE_CHECKING:
    from dspy_rdf.canonical.redact import Redactor

__all__ = ["DERIVED_FACTS_VERSION", "MAX_LITERAL_BYTES", "ModuleFigures", "ToolFigures", "TraceFigures", "TraceTotals", "UsageFigures", "decimal_text", "duration_bucket", "part_ref_iri", "stored_form", "trace_lines", "write_trace"]

DERIVED_FACTS_VERSION = 4
"""The version of the derived facts written with each trace (``dspy:derived_facts_version``). 2 added the exception
facts (refusals, unanswered and unoffered tool calls, orphan tool results, duplicate call ids) that the canned
queries looking for exceptions start from, 3 the duration buckets of tool executions (``dspy:duration_bucket``) that
the slowest executions and the latency percentiles are looked up by, 4 the trace's ``dspy:order_key`` that the
queries listing traces order by and the names of its unanswered tools (``dspy:unanswered_tools``); a version only ever adds facts, so that ``dspy-rdf migrate`` brings an
older trace up to date by adding the trace's triples to its graph."""

MAX_LITERAL_BYTES = 16_000_000
"""The longest literal written, in bytes of its N-Quads text: pyoxigraph (the embedded store, and every RDF file this
package reads back) refuses a token over 16 MiB, so a trace holding a longer value is refused by name instead."""


def _iri(value: str) -> str:
    return f"<{value}>"


_TYPE = _iri(v.RDF_TYPE)
_JSON_DT = "^^" + _iri(v.RDF_JSON)
_INT_DT = "^^" + _iri(v.XSD_INTEGER)
_DATETIME_DT = "^^" + _iri(v.XSD_DATETIME)
_DATE_DT = "^^" + _iri(v.XSD_DATE)
_DECIMAL_DT = "^^" + _iri(v.XSD_DECIMAL)
_TRUE = '"true"^^' + _iri(v.XSD_BOOLEAN)
_FALSE = '"false"^^' + _iri(v.XSD_BOOLEAN)


class _P:
    """Predicate IRIs in N-Quads form, one attribute per slot."""

    def __getattr__(self, slot: str) -> str:
        value = _iri(v.slot_iri(slot))
        setattr(self, slot, value)
        return value


P = _P()
C = {name: _iri(v.class_iri(name)) for name in (
    "Trace", "LMHistoryEntry", "LMRequest", "LMResponse", "LMMessage", "LMToolSpec", "LMConfig",
    "LMReasoningConfig", "LMToolChoice", "LMCacheConfig", "LMPromptCacheConfig", "LMUsage", "LMOutput",
    "ModuleCall", "LMCall", "ToolExecution", "ToolCall", "ToolResult", "UsageSummary", "EvaluateCall", "CompileCall",
    "ExampleResult", "ProgramCandidate", "TrainingExample",
    *(cls.__name__ for cls in m.PART_CLASSES.values()),
)}
_PART_TYPE_LITERAL = {kind: f'"{kind}"' for kind in m.PART_CLASSES}


def _s(text: str) -> str:
    """A plain string literal in N-Quads form."""
    if '"' in text or "\\" in text or "\n" in text or "\r" in text:
        text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{text}"'


def _json_text(value: Any) -> str:
    """Canonical JSON: keys sorted, no spaces, non-ASCII characters as they are."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _j(value: Any) -> str:
    """An rdf:JSON literal of canonical JSON."""
    return _s(_json_text(value)) + _JSON_DT


def _int(value: int) -> str:
    return f'"{value}"' + _INT_DT


_DECIMAL_LIMIT = Decimal(10) ** 20
"""Decimal numbers are written below this magnitude: pyoxigraph computes with decimals of up to 20 digits before the
point (and 18 after: a trace keeps 15, :data:`dspy_rdf.canonical.model.DECIMAL_PLACES`)."""


def _exact(value: float | int | Decimal) -> Decimal:
    """The decimal a number of a trace stands for (a float: its shortest text, ``1e-05`` -> ``0.00001``)."""
    return value if isinstance(value, Decimal) else Decimal(repr(value) if isinstance(value, float) else value)


def _decimal(value: float | int | Decimal, slot: str) -> str:
    """An ``xsd:decimal`` literal of the number's exact decimal text, in the form every store keeps (no exponent, no
    trailing zeros). A number that is not finite, or has more than 20 digits before the point, has no such form: it
    raises ``ValueError`` naming ``slot``."""
    number = _exact(value)
    if not number.is_finite() or abs(number) >= _DECIMAL_LIMIT:
        raise ValueError(f"{slot} {value!r} cannot be written as a decimal number that every store keeps (finite, at most 20 digits before the point)")
    return f'"{decimal_text(number)}"' + _DECIMAL_DT


def decimal_text(number: Decimal) -> str:
    """The text of an ``xsd:decimal`` as every store keeps it: no exponent, no trailing zeros (``-0`` is ``0``)."""
    text = format(number, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def seconds_between(start: str, end: str) -> Decimal | None:
    """The seconds from one ISO 8601 date-time to another, exact to the microsecond; None when either is not a
    date-time or only one of them has a UTC offset (they cannot be compared)."""
    try:
        begin, finish = datetime.fromisoformat(start), datetime.fromisoformat(end)
    except (TypeError, ValueError):
        return None
    if (begin.tzinfo is None) != (finish.tzinfo is None):
        return None
    delta = finish - begin
    return Decimal(delta.days * 86400 + delta.seconds) + Decimal(delta.microseconds).scaleb(-6)


def duration_bucket(seconds: Decimal, digits: int = 3) -> Decimal:
    """``seconds`` rounded down to three significant digits (``dspy:duration_bucket``), or ``digits``: 0.012345 ->
    0.0123, 1234.5 -> 1230, -0.012345 -> -0.0124. Rounding down onto a grid that is finer for smaller numbers keeps the
    order: a longer duration never has a smaller bucket, so the slowest executions are in the highest buckets."""
    if not seconds:
        return Decimal(0)
    step = seconds.adjusted() - (digits - 1)
    return seconds.scaleb(-step).to_integral_value(rounding=ROUND_FLOOR).scaleb(step)


@dataclass(frozen=True)
class UsageFigures:
    """The LM calls of one trace that requested one model on one day, as its ``UsageSummary`` states them (a sum that
    no call reports is 0 here: ``usage_calls`` and ``priced_calls`` say how many calls the sums are of)."""

    lm_calls: int
    priced_calls: int
    usage_calls: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost: Decimal


@dataclass(frozen=True)
class TraceTotals:
    """The trace's own counts, as its derived facts state them (``dspy:lm_call_count`` and the rest; a sum no call
    reports is 0 here), and the triples its graph holds: what ``stats`` adds up over the store."""

    lm_calls: int
    tool_calls: int
    tool_executions: int
    tool_results: int
    messages: int
    usage_calls: int
    input_tokens: int
    output_tokens: int
    priced_calls: int
    cost: Decimal
    triples: int


@dataclass(frozen=True)
class TraceFigures:
    """What one trace adds to the store-wide figures some canned queries read (:mod:`dspy_rdf.store.ledger` keeps
    their sums), taken from the triples the writer writes for the trace, so that they count what the store holds:
    ``usage`` by (model, day or None), the parts of each ``part_type`` (nested ones too), and the outputs of each
    finish reason (None: not recorded) with how many of them were truncated."""

    usage: dict[tuple[str, str | None], UsageFigures]
    part_kinds: dict[str, int]
    finish_reasons: dict[str | None, tuple[int, int]]
    tools: dict[str, ToolFigures]
    arguments: dict[tuple[str, str], tuple[int, int, int]]
    """Each tool and the canonical JSON of the arguments it was asked or run with (``"{}"``: none) with the calls,
    tool-call parts and tool executions that carried them: ``(calls, parts, executions)``, calls counted as in
    :class:`ToolFigures` (an execution answering a part is no call of its own)."""
    tool_results: dict[str, tuple[int, int]]
    """Each tool's calls that got a result (a tool-result part answering it, or an execution), and how many of those
    failed (an error result, or an execution that raised): ``(results, errors)``."""
    modules: dict[str, ModuleFigures]
    """The LM calls each kind of module made directly, by the class of the module call they are made in ("": none)."""
    offered_tools: dict[str, int]
    """Each tool a request offers (``dspy:tools``), with the number of requests offering it."""
    framework_tools: tuple[str, ...]
    """The tools DSPy's own modules added in the trace (``dspy:framework_tools``)."""
    latencies: dict[tuple[str, Decimal], int]
    """The timed executions of each tool in each ``dspy:duration_bucket`` (the ledger adds up each bucket's range:
    :func:`duration_bucket` with one digit)."""
    conversation: tuple[int, int]
    """The trace's ``dspy:message_count`` and ``dspy:lm_call_count``."""
    totals: TraceTotals


@dataclass(frozen=True)
class ModuleFigures:
    """The LM calls made directly in one kind of module in one trace: how many, how many have a duration, the sum of
    their durations and the longest (a call without a duration counting as 0), in seconds as written
    (``dspy:duration``)."""

    lm_calls: int
    timed_calls: int
    total_seconds: Decimal
    max_seconds: Decimal


@dataclass(frozen=True)
class ToolFigures:
    """The calls of one tool in one trace: ``asked_calls``, the calls asked for in tool-call parts (parts sharing a
    call id are one call; a part without one is a call of its own), ``parts``, those parts, ``executions``, the tool
    executions of program runs, and ``unasked_executions``, those that answer no part (a call of their own)."""

    asked_calls: int
    parts: int
    executions: int
    unasked_executions: int
    failed_executions: int
    """Executions whose tool result is an error, or that raised."""
    timed_executions: int
    """Executions with a duration."""


class _UsageGroup:
    """The LM calls of one trace that requested one model on one day (a ``UsageSummary``); sums stay None until a
    response reports the value."""

    __slots__ = ("calls", "priced", "counted", "input_tokens", "output_tokens", "total_tokens", "cost")

    def __init__(self) -> None:
        self.calls = 0
        self.priced = 0
        self.counted = 0  # calls whose token usage is known
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.total_tokens: int | None = None
        self.cost: Decimal | None = None  # exact sums of the costs as written, with no binary noise

    def add(self, response: m.LMResponse | None) -> None:
        self.calls += 1
        if response is None:
            return
        if response.cost is not None:
            self.priced += 1
            self.cost = _exact(response.cost) if self.cost is None else self.cost + _exact(response.cost)
        if _knows_tokens(response.usage):
            self.count(response.usage, 1)

    def count(self, u: m.LMUsage, calls: int) -> None:
        """Add the tokens of ``calls`` LM calls, reported together in ``u``."""
        self.counted += calls
        if u.input_tokens is not None:
            self.input_tokens = (self.input_tokens or 0) + u.input_tokens
        if u.output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + u.output_tokens
        if u.total_tokens is not None:
            self.total_tokens = (self.total_tokens or 0) + u.total_tokens


def _knows_tokens(u: m.LMUsage | None) -> TypeGuard[m.LMUsage]:
    """Whether a usage reports how many tokens a call took (an ``LMUsage`` with no count says nothing)."""
    return u is not None and (u.input_tokens is not None or u.output_tokens is not None or u.total_tokens is not None)


_FRAMEWORK_TOOLS = {"ReAct": "finish", "CodeAct": "finish", "ReActV2": "submit"}
"""The tool each of DSPy's agent modules adds itself (see the schema's ``framework_tools``)."""


def framework_tools(trace: m.Trace) -> list[str]:
    """The names of the tools DSPy's own modules added in this trace (see the schema's ``framework_tools``)."""
    names = {_FRAMEWORK_TOOLS[call.module_class] for call in trace.calls if isinstance(call, m.ModuleCall) and call.module_class in _FRAMEWORK_TOOLS}
    if trace.source_format == "react_trajectory":
        names.add("finish")
    elif trace.source_format == "dspy_history" and any(
        part.part_type == "tool_call" and part.name == "submit" for message in trace.messages for part in message.parts
    ):
        names.add("submit")  # a dspy.ReActV2 trajectory (its own submit tool ends it)
    return sorted(names)


class _Writer:
    __slots__ = (
        "out", "tail", "lm_calls", "messages", "tool_calls", "tool_results", "input_tokens", "output_tokens", "cost", "usage",
        "subtrees", "executions", "unasked_executions", "tool_call_total", "usage_calls", "priced_calls", "framework", "counted_parts",
        "call_parts", "answered_parts", "refusals", "unoffered", "duplicated", "part_kinds", "finish_reasons",
        "offered", "tool_runs", "latencies", "failed_results", "tool_executions", "module_of", "module_calls", "carried_args",
    )  # fmt: skip

    def __init__(self, tail: str) -> None:
        self.out: list[str] = []
        self.tail = tail
        # Gathered while writing, for the derived facts (schema subset ``derived``) written at the end of a trace.
        self.lm_calls = 0
        self.messages = 0
        self.tool_calls: dict[str | None, list[str]] = {}  # call id -> tool-call part nodes
        self.tool_results: list[tuple[str, str | None]] = []  # (tool-result part node, call id)
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cost: Decimal | None = None
        self.usage: dict[tuple[str, str | None], _UsageGroup] = {}  # (model, day or None) -> its LM calls
        self.subtrees: list[tuple[int, str]] = []  # (position, node) of the calls whose descendants are totalled
        self.executions = 0
        self.unasked_executions = 0
        self.tool_call_total = 0  # dspy:tool_call_count, once the derived facts are written
        self.usage_calls = 0  # LM calls whose token usage is known
        self.priced_calls = 0  # LM calls whose cost is known
        self.framework: frozenset[str] = frozenset()  # the tools DSPy's own modules added, not counted as the program's
        self.counted_parts: dict[str | None, int] = {}  # call id -> tool-call parts of the program's own tools
        # For the exception facts: every tool-call part (node, tool name, call id), the parts tool executions answer,
        # the refusal parts, and the tool-call parts naming a tool their request does not offer or sharing a call id
        # with another part of the same holder.
        self.call_parts: list[tuple[str, str, str | None]] = []
        self.answered_parts: set[str] = set()
        self.refusals = 0
        self.unoffered: list[str] = []
        self.duplicated: list[str] = []
        # For the store-wide figures (TraceFigures): parts by part_type, outputs by finish reason -> [outputs, truncated].
        self.part_kinds: dict[str, int] = {}
        self.finish_reasons: dict[str | None, list[int]] = {}
        self.offered: dict[str, int] = {}  # tool name -> requests offering it
        self.tool_runs: dict[str, list[int]] = {}  # tool name -> [executions, answering no part, failed, timed]
        self.latencies: dict[tuple[str, Decimal], int] = {}  # (tool name, duration bucket) -> timed executions
        self.failed_results: set[str] = set()  # the tool-result parts that are errors
        self.tool_executions: list[tuple[str, str, str | None, bool]] = []  # (node, tool, part it answers, failed)
        self.module_of: dict[int, str] = {}  # position of a module call -> its module class
        self.module_calls: dict[str, ModuleFigures] = {}  # module class ("": none) -> its direct LM calls
        # (tool, arguments as canonical JSON, call key, is a part, counts as a call) of each tool-call part and execution
        self.carried_args: list[tuple[str, str, str, bool, bool]] = []

    def figures(self) -> TraceFigures:
        """What this trace adds to the store-wide figures (call once the trace is written)."""
        usage = {
            key: UsageFigures(
                group.calls, group.priced, group.counted, group.input_tokens or 0, group.output_tokens or 0,
                group.total_tokens or 0, group.cost if group.cost is not None else Decimal(0),
            )
            for key, group in self.usage.items()
        }  # fmt: skip
        reasons = {reason: (outputs, truncated) for reason, (outputs, truncated) in self.finish_reasons.items()}
        asked: dict[str, set[str]] = {}  # tool -> its calls: call ids, and the nodes of parts without one
        parts: dict[str, int] = {}
        for node, name, call_id in self.call_parts:
            asked.setdefault(name, set()).add(node if call_id is None else "id:" + call_id)
            parts[name] = parts.get(name, 0) + 1
        tools = {
            name: ToolFigures(len(asked.get(name, ())), parts.get(name, 0), *self.tool_runs.get(name, (0, 0, 0, 0)))
            for name in parts.keys() | self.tool_runs.keys()
        }
        return TraceFigures(
            usage, dict(self.part_kinds), reasons, tools, self.argument_figures(), self.result_figures(), dict(self.module_calls), dict(self.offered),
            tuple(sorted(self.framework)), dict(self.latencies), (self.messages, self.lm_calls),
            TraceTotals(
                self.lm_calls, self.tool_call_total, self.executions, len(self.tool_results), self.messages, self.usage_calls,
                self.input_tokens or 0, self.output_tokens or 0, self.priced_calls,
                self.cost if self.cost is not None else Decimal(0), len(self.out),
            ),
        )  # fmt: skip

    def argument_figures(self) -> dict[tuple[str, str], tuple[int, int, int]]:
        """The calls, parts and executions of each tool with each arguments, as the trace's triples tell them: a
        part's call is its call id (else the part), an execution is a call unless it answers a part."""
        keys: dict[tuple[str, str], set[str]] = {}
        counts: dict[tuple[str, str], list[int]] = {}
        for tool, args, key, is_part, is_call in self.carried_args:
            row = counts.get((tool, args))
            if row is None:
                row = counts[(tool, args)] = [0, 0, 0]
                keys[(tool, args)] = set()
            if is_call:
                keys[(tool, args)].add(key)
            row[1 if is_part else 2] += 1
        return {pair: (len(keys[pair]), parts, executions) for pair, (_, parts, executions) in counts.items()}

    def result_figures(self) -> dict[str, tuple[int, int]]:
        """The calls of each tool that got a result, and those that failed, as the trace's triples tell them: a call
        is its tool (the name of the part asked, or of the execution) and its call id (else the part asked, else the
        execution), answered by the tool-result parts with that call id (dspy:answers) and by executions."""
        asked = {node: (name, call_id) for node, name, call_id in self.call_parts}
        calls: dict[tuple[str, str], bool] = {}  # (tool, call) -> failed
        for result, call_id in self.tool_results:
            if call_id is not None:
                for part in self.tool_calls.get(call_id, ()):
                    call = (asked[part][0], "id:" + call_id)
                    calls[call] = calls.get(call, False) or result in self.failed_results
        # an execution's call is the call id of the part it answers, whatever kind of part that is (as the query reads
        # dspy:call_id of the node dspy:answers names): a tool-result part has one too
        ids = {node: call_id for node, call_id in self.tool_results} | {node: call_id for node, _, call_id in self.call_parts}
        for node, tool, answered, failed in self.tool_executions:
            answered_id = ids.get(answered) if answered is not None else None
            call = (tool, "id:" + answered_id if answered_id is not None else answered or node)
            calls[call] = calls.get(call, False) or failed
        out: dict[str, tuple[int, int]] = {}
        for (tool, _), failed in calls.items():
            results, errors = out.get(tool, (0, 0))
            out[tool] = (results + 1, errors + failed)
        return out

    # Each method writes one node and returns nothing; ``s`` is the node's IRI in N-Quads form.

    def trace(self, trace: m.Trace, iri: str, digest: str) -> None:
        add = self.out.append
        t = self.tail
        s = _iri(iri)
        own_tools = framework_tools(trace)
        self.framework = frozenset(own_tools)
        self.module_of = {i: call.module_class for i, call in enumerate(trace.calls) if isinstance(call, m.ModuleCall)}
        add(f"{s} {_TYPE} {C['Trace']}{t}")
        add(f"{s} {P.content_digest} {_s(digest)}{t}")
        add(f"{s} {P.source_kind} {_s(trace.source_kind)}{t}")
        add(f"{s} {P.source_format} {_s(trace.source_format)}{t}")
        if trace.source_index is not None:
            add(f"{s} {P.source_index} {_int(trace.source_index)}{t}")
        if trace.dspy_version is not None:
            add(f"{s} {P.dspy_version} {_s(trace.dspy_version)}{t}")
        if trace.source_trace_id is not None:
            add(f"{s} {P.source_trace_id} {_s(trace.source_trace_id)}{t}")
        if trace.session_id is not None:
            add(f"{s} {P.session_id} {_s(trace.session_id)}{t}")
        if trace.user_id is not None:
            add(f"{s} {P.user_id} {_s(trace.user_id)}{t}")
        if trace.started_at is not None:
            add(f"{s} {P.started_at} {_s(trace.started_at)}{_DATETIME_DT}{t}")
        if trace.ended_at is not None:
            add(f"{s} {P.ended_at} {_s(trace.ended_at)}{_DATETIME_DT}{t}")
        if trace.redactions:
            add(f"{s} {P.redactions} {_j(trace.redactions)}{t}")
        if trace.losses:
            add(f"{s} {P.losses} {_j(trace.losses)}{t}")
        for i, message in enumerate(trace.messages):
            self.message(message, f"{iri}/message/{i}", i, s)
        self.parts(trace.parts, iri, s)
        for i, call in enumerate(trace.calls):
            self.call(call, iri, i, s)
        if self.subtrees:
            self.subtree_totals(trace.calls)
        if any(isinstance(call, m.ModuleCall) and _knows_tokens(call.usage) for call in trace.calls):
            self.module_usage(trace.calls)
        for i, entry in enumerate(trace.entries):
            child = f"{iri}/entry/{i}"
            add(f"{s} {P.entries} <{child}>{t}")
            self.entry(entry, child, i)
        if trace.request is not None:
            add(f"{s} {P.request} <{iri}/request>{t}")
            self.request(trace.request, f"{iri}/request")
        if trace.response is not None:
            add(f"{s} {P.response} <{iri}/response>{t}")
            self.response(trace.response, f"{iri}/response")
        if trace.request is not None or trace.response is not None:
            self.lm_calls += 1
        if trace.request is not None:
            self.unoffered_calls(trace.request, f"{iri}/request", trace.response, f"{iri}/response")
            self.count_usage(trace.request.model, None, trace.response)
        elif trace.response is not None:
            self.count_response(trace.response)
        for name in own_tools:
            add(f"{s} {P.framework_tools} {_s(name)}{t}")
        self.derived(s, iri)

    def count_usage(self, model: str, timestamp: str | None, response: m.LMResponse | None) -> None:
        """Add one LM call to its (model, day) group of the trace's usage summaries, and its usage and cost, when
        known, to the trace's counts of the calls they are known for."""
        day = timestamp.partition("T")[0] if timestamp is not None else None
        group = self.usage.get((model, day))
        if group is None:
            group = self.usage[(model, day)] = _UsageGroup()
        group.add(response)
        if response is not None:
            self.count_response(response)

    def count_response(self, response: m.LMResponse) -> None:
        """Count a response whose usage or cost is known (a call whose model is unknown has no usage group)."""
        if response.cost is not None:
            self.priced_calls += 1
        if _knows_tokens(response.usage):
            self.usage_calls += 1

    def module_usage(self, calls: list[m.Call]) -> None:
        """The usage a recorder reported for a module call as a whole (MLflow's autolog: the top-level module only)
        counts for the LM calls below it, when none of them reports its own: in the trace's totals, and in their
        usage group when they all fall in one (a group of several models or days cannot split it)."""
        covered_by: set[int] = set()
        for index, call in enumerate(calls):
            if not isinstance(call, m.ModuleCall) or not _knows_tokens(call.usage) or index in covered_by:
                continue
            # the calls it counts for: those below that returned (one that raised took no tokens DSPy could count)
            below = [c for i, c in enumerate(calls) if isinstance(c, m.LMCall) and c.error is None and i != index and _below(calls, i, index)]
            if not below or any(c.entry is not None and _knows_tokens(c.entry.response.usage) for c in below):
                continue
            covered_by.update(i for i, c in enumerate(calls) if _below(calls, i, index))  # an inner module's is part of it
            u = call.usage
            self.usage_calls += len(below)
            if u.input_tokens is not None:
                self.input_tokens = (self.input_tokens or 0) + u.input_tokens
            if u.output_tokens is not None:
                self.output_tokens = (self.output_tokens or 0) + u.output_tokens
            groups = {_group_key(c) for c in below}
            if len(groups) == 1 and (key := groups.pop()) in self.usage:
                self.usage[key].count(u, len(below))

    def subtree_totals(self, calls: list[m.Call]) -> None:
        """The derived totals of the LM calls below each evaluation and compilation of a program run."""
        add = self.out.append
        t = self.tail
        for position, node in self.subtrees:
            group = _UsageGroup()
            for index, call in enumerate(calls):
                if isinstance(call, m.LMCall) and index != position and _below(calls, index, position):
                    group.add(call.entry.response if call.entry is not None else None)
            add(f"{node} {P.subtree_lm_calls} {_int(group.calls)}{t}")
            if group.input_tokens is not None:
                add(f"{node} {P.subtree_input_tokens} {_int(group.input_tokens)}{t}")
            if group.output_tokens is not None:
                add(f"{node} {P.subtree_output_tokens} {_int(group.output_tokens)}{t}")
            if group.cost is not None:
                add(f"{node} {P.subtree_cost} {_decimal(group.cost, 'subtree_cost')}{t}")

    def derived(self, s: str, iri: str) -> None:
        add = self.out.append
        t = self.tail
        add(f"{s} {P.lm_call_count} {_int(self.lm_calls)}{t}")
        add(f"{s} {P.message_count} {_int(self.messages)}{t}")
        # tool calls as users count them: parts sharing a call id are one call (a call replayed in a conversation),
        # and an execution that answers no part (ReAct asks in text fields) is a call of its own
        parts = sum(1 if call_id is not None else count for call_id, count in self.counted_parts.items())
        self.tool_call_total = parts + self.unasked_executions
        add(f"{s} {P.tool_call_count} {_int(self.tool_call_total)}{t}")
        add(f"{s} {P.tool_result_count} {_int(len(self.tool_results))}{t}")
        add(f"{s} {P.tool_execution_count} {_int(self.executions)}{t}")
        add(f"{s} {P.usage_call_count} {_int(self.usage_calls)}{t}")
        add(f"{s} {P.priced_call_count} {_int(self.priced_calls)}{t}")
        if self.input_tokens is not None:
            add(f"{s} {P.input_tokens_total} {_int(self.input_tokens)}{t}")
        if self.output_tokens is not None:
            add(f"{s} {P.output_tokens_total} {_int(self.output_tokens)}{t}")
        if self.cost is not None:
            add(f"{s} {P.cost_total} {_decimal(self.cost, 'cost_total')}{t}")
        for i, ((model, day), group) in enumerate(sorted(self.usage.items(), key=lambda item: (item[0][0], item[0][1] or ""))):
            us = f"<{iri}/usage_summary/{i}>"
            add(f"{s} {P.usage_summaries} {us}{t}")
            add(f"{us} {_TYPE} {C['UsageSummary']}{t}")
            add(f"{us} {P.summary_model} {_s(model)}{t}")
            if day is not None:
                add(f"{us} {P.summary_day} {_s(day)}{_DATE_DT}{t}")
            add(f"{us} {P.summary_lm_calls} {_int(group.calls)}{t}")
            add(f"{us} {P.summary_priced_calls} {_int(group.priced)}{t}")
            add(f"{us} {P.summary_usage_calls} {_int(group.counted)}{t}")
            for slot, value in (
                (P.summary_input_tokens, group.input_tokens),
                (P.summary_output_tokens, group.output_tokens),
                (P.summary_total_tokens, group.total_tokens),
            ):
                if value is not None:
                    add(f"{us} {slot} {_int(value)}{t}")
            if group.cost is not None:
                add(f"{us} {P.summary_cost} {_decimal(group.cost, 'summary_cost')}{t}")
        calls = self.tool_calls
        for result, call_id in self.tool_results:
            if call_id is not None:
                for call in calls.get(call_id, ()):
                    add(f"{result} {P.answers} {call}{t}")
        add(f"{s} {P.derived_facts_version} {_int(DERIVED_FACTS_VERSION)}{t}")
        add(f"{s} {P.order_key} {_s(order_key(iri))}{t}")
        self.exceptions(s)

    def entry(self, entry: m.LMHistoryEntry, iri: str, position: int | None) -> None:
        add = self.out.append
        t = self.tail
        s = f"<{iri}>"
        self.lm_calls += 1
        add(f"{s} {_TYPE} {C['LMHistoryEntry']}{t}")
        if position is not None:
            add(f"{s} {P.position} {_int(position)}{t}")
        add(f"{s} {P.request} <{iri}/request>{t}")
        add(f"{s} {P.response} <{iri}/response>{t}")
        add(f"{s} {P.timestamp} {_s(entry.timestamp)}{_DATETIME_DT}{t}")
        add(f"{s} {P.uuid} {_s(entry.uuid)}{t}")
        if entry.model_type is not None:
            add(f"{s} {P.model_type} {_s(entry.model_type)}{t}")
        if entry.extra_fields:
            add(f"{s} {P.extra_fields} {_j(entry.extra_fields)}{t}")
        self.request(entry.request, f"{iri}/request")
        self.response(entry.response, f"{iri}/response")
        self.unoffered_calls(entry.request, f"{iri}/request", entry.response, f"{iri}/response")
        self.count_usage(entry.request.model, entry.timestamp, entry.response)

    def request(self, request: m.LMRequest, iri: str) -> None:
        add = self.out.append
        t = self.tail
        s = f"<{iri}>"
        add(f"{s} {_TYPE} {C['LMRequest']}{t}")
        add(f"{s} {P.model} {_s(request.model)}{t}")
        if request.metadata:
            add(f"{s} {P.metadata} {_j(request.metadata)}{t}")
        for i, message in enumerate(request.messages):
            self.message(message, f"{iri}/message/{i}", i, s)
        for name in {tool.name for tool in request.tools}:
            self.offered[name] = self.offered.get(name, 0) + 1
        for i, tool in enumerate(request.tools):
            child = f"{iri}/tool/{i}"
            add(f"{s} {P.tools} <{child}>{t}")
            ts = f"<{child}>"
            add(f"{ts} {_TYPE} {C['LMToolSpec']}{t}")
            add(f"{ts} {P.position} {_int(i)}{t}")
            add(f"{ts} {P.tool_type} {_s(tool.tool_type)}{t}")
            add(f"{ts} {P.name} {_s(tool.name)}{t}")
            if tool.description is not None:
                add(f"{ts} {P.description} {_s(tool.description)}{t}")
            if tool.parameters:
                add(f"{ts} {P.parameters} {_j(tool.parameters)}{t}")
            if tool.strict is not None:
                add(f"{ts} {P.strict} {_TRUE if tool.strict else _FALSE}{t}")
            if tool.metadata:
                add(f"{ts} {P.metadata} {_j(tool.metadata)}{t}")
            if tool.provider_data:
                add(f"{ts} {P.provider_data} {_j(tool.provider_data)}{t}")
        self.config(request.config, f"{iri}/config", s)

    def message(self, message: m.LMMessage, iri: str, position: int, parent: str) -> None:
        add = self.out.append
        t = self.tail
        s = f"<{iri}>"
        self.messages += 1
        add(f"{parent} {P.messages} {s}{t}")
        add(f"{s} {_TYPE} {C['LMMessage']}{t}")
        add(f"{s} {P.position} {_int(position)}{t}")
        add(f"{s} {P.role} {_s(message.role)}{t}")
        if message.name is not None:
            add(f"{s} {P.name} {_s(message.name)}{t}")
        if message.metadata:
            add(f"{s} {P.metadata} {_j(message.metadata)}{t}")
        self.parts(message.parts, iri, s)

    def call(self, call: m.Call, trace_iri: str, position: int, parent: str) -> None:
        add = self.out.append
        t = self.tail
        iri = f"{trace_iri}/call/{position}"
        s = f"<{iri}>"
        add(f"{parent} {P.calls} {s}{t}")
        add(f"{s} {_TYPE} {C[type(call).__name__]}{t}")
        add(f"{s} {P.position} {_int(position)}{t}")
        add(f"{s} {P.started_at} {_s(call.started_at)}{_DATETIME_DT}{t}")
        duration = None
        if call.ended_at is not None:
            add(f"{s} {P.ended_at} {_s(call.ended_at)}{_DATETIME_DT}{t}")
            duration = seconds_between(call.started_at, call.ended_at)
            if duration is not None:
                add(f"{s} {P.duration} {_decimal(duration, 'duration')}{t}")
        if call.dspy_call_id is not None:
            add(f"{s} {P.dspy_call_id} {_s(call.dspy_call_id)}{t}")
        if call.parent_call is not None:
            add(f"{s} {P.parent_call} <{trace_iri}/call/{call.parent_call}>{t}")
        if call.error is not None:
            add(f"{s} {P.error} {_s(call.error)}{t}")
        if isinstance(call, m.ModuleCall):
            add(f"{s} {P.module_class} {_s(call.module_class)}{t}")
            if call.module_class_path is not None:
                add(f"{s} {P.module_class_path} {_s(call.module_class_path)}{t}")
            if call.usage is not None:
                add(f"{s} {P.usage} <{iri}/usage>{t}")
                self.usage_node(call.usage, f"<{iri}/usage>")
            if call.input_summary is not None:
                add(f"{s} {P.input_summary} {_j(call.input_summary)}{t}")
            if call.output_summary is not None:
                add(f"{s} {P.output_summary} {_j(call.output_summary)}{t}")
            self.parts(call.tool_calls, iri, s, "tool_calls", "tool_call")
            for ref in call.returned_tool_calls:
                add(f"{s} {P.returned_tool_calls} <{part_ref_iri(trace_iri, ref)}>{t}")
        elif isinstance(call, m.EvaluateCall):
            for slot in ("metric", "program_class", "program_fingerprint"):
                if (value := getattr(call, slot)) is not None:
                    add(f"{s} {getattr(P, slot)} {_s(value)}{t}")
            if call.devset_size is not None:
                add(f"{s} {P.devset_size} {_int(call.devset_size)}{t}")
            if call.score is not None:
                add(f"{s} {P.score} {_score(call.score)}{t}")
            for i, result in enumerate(call.example_results):
                rs = f"<{iri}/example_result/{i}>"
                add(f"{s} {P.example_results} {rs}{t}")
                add(f"{rs} {_TYPE} {C['ExampleResult']}{t}")
                add(f"{rs} {P.position} {_int(i)}{t}")
                if result.example is not None:
                    add(f"{rs} {P.example} {_j(result.example)}{t}")
                if result.prediction is not None:
                    add(f"{rs} {P.prediction} {_j(result.prediction)}{t}")
                if result.score is not None:
                    add(f"{rs} {P.score} {_score(result.score)}{t}")
                if result.program_call is not None:
                    add(f"{rs} {P.program_call} <{trace_iri}/call/{result.program_call}>{t}")
                if result.error is not None:
                    add(f"{rs} {P.error} {_s(result.error)}{t}")
            self.subtrees.append((position, s))
        elif isinstance(call, m.CompileCall):
            add(f"{s} {P.optimizer_class} {_s(call.optimizer_class)}{t}")
            if call.input_summary is not None:
                add(f"{s} {P.input_summary} {_j(call.input_summary)}{t}")
            for slot in ("program_class", "student_fingerprint", "program_fingerprint"):
                if (value := getattr(call, slot)) is not None:
                    add(f"{s} {getattr(P, slot)} {_s(value)}{t}")
            for i, candidate in enumerate(call.candidates):
                cs = f"<{iri}/candidate/{i}>"
                add(f"{s} {P.candidates} {cs}{t}")
                add(f"{cs} {_TYPE} {C['ProgramCandidate']}{t}")
                add(f"{cs} {P.position} {_int(i)}{t}")
                add(f"{cs} {P.program_fingerprint} {_s(candidate.program_fingerprint)}{t}")
                for made_from in candidate.parent_candidates:
                    add(f"{cs} {P.parent_candidates} <{iri}/candidate/{made_from}>{t}")
                if candidate.state_changes is not None:
                    add(f"{cs} {P.state_changes} {_j(candidate.state_changes)}{t}")
                if candidate.score is not None:
                    add(f"{cs} {P.score} {_score(candidate.score)}{t}")
            for i, training in enumerate(call.training_examples):
                es = f"<{iri}/training_example/{i}>"
                add(f"{s} {P.training_examples} {es}{t}")
                add(f"{es} {_TYPE} {C['TrainingExample']}{t}")
                add(f"{es} {P.position} {_int(i)}{t}")
                if training.example is not None:
                    add(f"{es} {P.example} {_j(training.example)}{t}")
            self.subtrees.append((position, s))
        elif isinstance(call, m.LMCall):
            module = self.module_of.get(call.parent_call, "") if call.parent_call is not None else ""
            seconds = duration if duration is not None else Decimal(0)  # as the query reads it: COALESCE(?seconds, 0)
            made = self.module_calls.get(module)
            self.module_calls[module] = ModuleFigures(1, int(duration is not None), seconds, seconds) if made is None else ModuleFigures(
                made.lm_calls + 1, made.timed_calls + (duration is not None), made.total_seconds + seconds, max(made.max_seconds, seconds)
            )  # fmt: skip
            if call.model is not None:
                add(f"{s} {P.model} {_s(call.model)}{t}")
            if call.entry is not None:
                add(f"{s} {P.entry} <{iri}/entry>{t}")
                self.entry(call.entry, f"{iri}/entry", None)
            else:  # it failed before DSPy recorded an entry: an LM call all the same, its usage and cost unknown
                self.lm_calls += 1
                if call.model is not None:
                    self.count_usage(call.model, call.started_at, None)
        elif isinstance(call, m.ToolExecution):
            tc = call.tool_call
            runs = self.tool_runs.get(tc.name)
            if runs is None:
                runs = self.tool_runs[tc.name] = [0, 0, 0, 0]
            runs[0] += 1
            runs[1] += call.answers is None
            if duration is not None:
                runs[3] += 1
                bucket = duration_bucket(duration)
                add(f"{s} {P.duration_bucket} {_decimal(bucket, 'duration_bucket')}{t}")
                self.latencies[(tc.name, bucket)] = self.latencies.get((tc.name, bucket), 0) + 1
            if tc.name not in self.framework:
                self.executions += 1
                if call.answers is None:
                    self.unasked_executions += 1
            cs = f"<{iri}/tool_call>"
            add(f"{s} {P.tool_call} {cs}{t}")
            add(f"{cs} {_TYPE} {C['ToolCall']}{t}")
            add(f"{cs} {P.name} {_s(tc.name)}{t}")
            add(f"{s} {P.tool_name} {_s(tc.name)}{t}")
            if tc.call_id is not None:
                add(f"{cs} {P.call_id} {_s(tc.call_id)}{t}")
            args = _json_text(tc.args) if tc.args else "{}"
            if tc.args:
                add(f"{cs} {P.args} {_s(args)}{_JSON_DT}{t}")
            self.carried_args.append((tc.name, args, cs, False, call.answers is None))
            if (r := call.tool_result) is not None:
                rs = f"<{iri}/tool_result>"
                add(f"{s} {P.tool_result} {rs}{t}")
                add(f"{rs} {_TYPE} {C['ToolResult']}{t}")
                if r.name is not None:
                    add(f"{rs} {P.name} {_s(r.name)}{t}")
                if r.call_id is not None:
                    add(f"{rs} {P.call_id} {_s(r.call_id)}{t}")
                if r.result is not None:
                    add(f"{rs} {P.result} {_j(r.result)}{t}")
                if r.is_error is not None:
                    add(f"{rs} {P.is_error} {_TRUE if r.is_error else _FALSE}{t}")
                if r.error is not None:
                    add(f"{rs} {P.error} {_s(r.error)}{t}")
                if r.provider_data:
                    add(f"{rs} {P.provider_data} {_j(r.provider_data)}{t}")
                if r.metadata:
                    add(f"{rs} {P.metadata} {_j(r.metadata)}{t}")
            answered_part = None
            if (answered := call.answers) is not None:
                answered_part = f"<{part_ref_iri(trace_iri, answered)}>"
                self.answered_parts.add(answered_part)
                add(f"{s} {P.answers} {answered_part}{t}")
            failed = (r is not None and r.is_error is True) or call.error is not None
            runs[2] += failed
            self.tool_executions.append((s, tc.name, answered_part, failed))
            if call.decided_by is not None:
                add(f"{s} {P.decided_by} <{trace_iri}/call/{call.decided_by}>{t}")
            if call.pairing is not None:
                add(f"{s} {P.pairing} {_s(call.pairing)}{t}")

    def config(self, c: m.LMConfig, iri: str, parent: str) -> None:
        lines: list[str] = []
        add = lines.append
        t = self.tail
        s = f"<{iri}>"
        if c.temperature is not None:
            add(f"{s} {P.temperature} {_decimal(c.temperature, 'temperature')}{t}")
        if c.max_tokens is not None:
            add(f"{s} {P.max_tokens} {_int(c.max_tokens)}{t}")
        if c.top_p is not None:
            add(f"{s} {P.top_p} {_decimal(c.top_p, 'top_p')}{t}")
        if c.stop is not None:
            add(f"{s} {P.stop} {_j(c.stop)}{t}")
        if c.n is not None:
            add(f"{s} {P.n} {_int(c.n)}{t}")
        if c.logprobs is not None:
            add(f"{s} {P.logprobs} {_j(c.logprobs)}{t}")
        if c.response_format is not None:
            add(f"{s} {P.response_format} {_j(c.response_format)}{t}")
        if c.extensions:
            add(f"{s} {P.extensions} {_j(c.extensions)}{t}")
        if (r := c.reasoning) is not None:
            rs = f"<{iri}/reasoning>"
            add(f"{s} {P.reasoning} {rs}{t}")
            add(f"{rs} {_TYPE} {C['LMReasoningConfig']}{t}")
            if r.effort is not None:
                add(f"{rs} {P.effort} {_s(r.effort)}{t}")
            if r.max_tokens is not None:
                add(f"{rs} {P.max_tokens} {_int(r.max_tokens)}{t}")
            if r.summary is not None:
                add(f"{rs} {P.summary} {_s(r.summary)}{t}")
        if (tc := c.tool_choice) is not None:
            cs = f"<{iri}/tool_choice>"
            add(f"{s} {P.tool_choice} {cs}{t}")
            add(f"{cs} {_TYPE} {C['LMToolChoice']}{t}")
            add(f"{cs} {P.mode} {_s(tc.mode)}{t}")
            if tc.allowed is not None:
                add(f"{cs} {P.allowed} {_j(tc.allowed)}{t}")
            if tc.parallel is not None:
                add(f"{cs} {P.parallel} {_TRUE if tc.parallel else _FALSE}{t}")
        if (cache := c.cache) is not None:
            cs = f"<{iri}/cache>"
            add(f"{s} {P.cache} {cs}{t}")
            add(f"{cs} {_TYPE} {C['LMCacheConfig']}{t}")
            if cache.enabled is not None:
                add(f"{cs} {P.enabled} {_TRUE if cache.enabled else _FALSE}{t}")
            if cache.rollout_id is not None:
                add(f"{cs} {P.rollout_id} {_j(cache.rollout_id)}{t}")
        if (pc := c.prompt_cache) is not None:
            cs = f"<{iri}/prompt_cache>"
            add(f"{s} {P.prompt_cache} {cs}{t}")
            add(f"{cs} {_TYPE} {C['LMPromptCacheConfig']}{t}")
            if pc.enabled is not None:
                add(f"{cs} {P.enabled} {_TRUE if pc.enabled else _FALSE}{t}")
            if pc.key is not None:
                add(f"{cs} {P.key} {_s(pc.key)}{t}")
        if lines:  # an all-default config is the same as no config, as in DSPy
            out = self.out
            out.append(f"{parent} {P.config} {s}{t}")
            out.append(f"{s} {_TYPE} {C['LMConfig']}{t}")
            out.extend(lines)

    def response(self, r: m.LMResponse, iri: str) -> None:
        add = self.out.append
        t = self.tail
        s = f"<{iri}>"
        add(f"{s} {_TYPE} {C['LMResponse']}{t}")
        if r.model is not None:
            add(f"{s} {P.model} {_s(r.model)}{t}")
        if r.cost is not None:
            add(f"{s} {P.cost} {_decimal(r.cost, 'cost')}{t}")
            self.cost = _exact(r.cost) if self.cost is None else self.cost + _exact(r.cost)
        add(f"{s} {P.cache_hit} {_TRUE if r.cache_hit else _FALSE}{t}")
        if r.response_id is not None:
            add(f"{s} {P.response_id} {_s(r.response_id)}{t}")
        if r.provider_data:
            add(f"{s} {P.provider_data} {_j(r.provider_data)}{t}")
        if r.metadata:
            add(f"{s} {P.metadata} {_j(r.metadata)}{t}")
        for i, output in enumerate(r.outputs):
            child = f"{iri}/output/{i}"
            os_ = f"<{child}>"
            add(f"{s} {P.outputs} {os_}{t}")
            add(f"{os_} {_TYPE} {C['LMOutput']}{t}")
            add(f"{os_} {P.position} {_int(i)}{t}")
            if output.finish_reason is not None:
                add(f"{os_} {P.finish_reason} {_s(output.finish_reason)}{t}")
            add(f"{os_} {P.truncated} {_TRUE if output.truncated else _FALSE}{t}")
            reason = self.finish_reasons.get(output.finish_reason)
            if reason is None:
                reason = self.finish_reasons[output.finish_reason] = [0, 0]
            reason[0] += 1
            reason[1] += bool(output.truncated)
            if output.logprobs is not None:
                add(f"{os_} {P.logprobs} {_j(output.logprobs)}{t}")
            if output.provider_data:
                add(f"{os_} {P.provider_data} {_j(output.provider_data)}{t}")
            if output.metadata:
                add(f"{os_} {P.metadata} {_j(output.metadata)}{t}")
            self.parts(output.parts, child, os_)
        if (u := r.usage) is not None:
            us = f"<{iri}/usage>"
            add(f"{s} {P.usage} {us}{t}")
            if u.input_tokens is not None:
                self.input_tokens = (self.input_tokens or 0) + u.input_tokens
            if u.output_tokens is not None:
                self.output_tokens = (self.output_tokens or 0) + u.output_tokens
            self.usage_node(u, us)

    def usage_node(self, u: m.LMUsage, us: str) -> None:
        """An ``LMUsage`` node (``us``: its IRI in N-Quads form)."""
        add = self.out.append
        t = self.tail
        add(f"{us} {_TYPE} {C['LMUsage']}{t}")
        for name in m.USAGE_TOKEN_FIELDS:
            value = getattr(u, name)
            if value is not None:
                add(f"{us} {getattr(P, name)} {_int(value)}{t}")
        if u.details:
            add(f"{us} {P.details} {_j(u.details)}{t}")
        if u.metadata is not None:
            add(f"{us} {P.metadata} {_j(u.metadata)}{t}")
        if u.extra_fields:
            add(f"{us} {P.extra_fields} {_j(u.extra_fields)}{t}")

    def parts(self, parts: Sequence[m.LMPart], iri: str, parent: str, slot: str = "parts", segment: str = "part") -> None:
        add = self.out.append
        t = self.tail
        link = getattr(P, slot)
        held_ids: dict[str, list[str]] = {}  # call id -> the tool-call parts held here (directly) that have it
        for i, part in enumerate(parts):
            child = f"{iri}/{segment}/{i}"
            s = f"<{child}>"
            add(f"{parent} {link} {s}{t}")
            add(f"{s} {_TYPE} {C[type(part).__name__]}{t}")
            add(f"{s} {P.part_type} {_PART_TYPE_LITERAL[part.part_type]}{t}")
            self.part_kinds[part.part_type] = self.part_kinds.get(part.part_type, 0) + 1
            add(f"{s} {P.position} {_int(i)}{t}")
            if part.metadata:
                add(f"{s} {P.metadata} {_j(part.metadata)}{t}")
            if part.part_type == "text" or part.part_type == "refusal":
                add(f"{s} {P.text} {_s(part.text)}{t}")
                if part.part_type == "refusal":
                    self.refusals += 1
            elif part.part_type == "tool_call":
                self.tool_calls.setdefault(part.call_id, []).append(s)
                self.call_parts.append((s, part.name, part.call_id))
                if part.call_id is not None and slot == "parts":
                    held_ids.setdefault(part.call_id, []).append(s)
                if part.name not in self.framework:
                    self.counted_parts[part.call_id] = self.counted_parts.get(part.call_id, 0) + 1
                add(f"{s} {P.name} {_s(part.name)}{t}")
                if part.call_id is not None:
                    add(f"{s} {P.call_id} {_s(part.call_id)}{t}")
                args = _json_text(part.args) if part.args else "{}"
                if part.args:
                    add(f"{s} {P.args} {_s(args)}{_JSON_DT}{t}")
                self.carried_args.append((part.name, args, s if part.call_id is None else "id:" + part.call_id, True, True))
                if part.provider_data:
                    add(f"{s} {P.provider_data} {_j(part.provider_data)}{t}")
            elif part.part_type == "tool_result":
                self.tool_results.append((s, part.call_id))
                if part.is_error:
                    self.failed_results.add(s)
                if part.call_id is not None:
                    add(f"{s} {P.call_id} {_s(part.call_id)}{t}")
                if part.name is not None:
                    add(f"{s} {P.name} {_s(part.name)}{t}")
                add(f"{s} {P.is_error} {_TRUE if part.is_error else _FALSE}{t}")
                if part.provider_data:
                    add(f"{s} {P.provider_data} {_j(part.provider_data)}{t}")
                self.parts(part.content, child, s, "content", "content")
            elif part.part_type == "thinking":
                add(f"{s} {P.text} {_s(part.text)}{t}")
                add(f"{s} {P.redacted} {_TRUE if part.redacted else _FALSE}{t}")
            elif part.part_type == "citation":
                if part.text is not None:
                    add(f"{s} {P.text} {_s(part.text)}{t}")
                if part.title is not None:
                    add(f"{s} {P.title} {_s(part.title)}{t}")
                if part.url is not None:
                    add(f"{s} {P.url} {_s(part.url)}{t}")
            else:
                add(f"{s} {P.media_type} {_s(part.media_type)}{t}")
                if part.data is not None:
                    add(f"{s} {P.data} {_s(part.data)}{t}")
                if part.url is not None:
                    add(f"{s} {P.url} {_s(part.url)}{t}")
                if part.file_id is not None:
                    add(f"{s} {P.file_id} {_s(part.file_id)}{t}")
                if part.path is not None:
                    add(f"{s} {P.path} {_s(part.path)}{t}")
                if part.part_type == "image":
                    if part.detail is not None:
                        add(f"{s} {P.detail} {_s(part.detail)}{t}")
                elif part.part_type == "binary":
                    if part.filename is not None:
                        add(f"{s} {P.filename} {_s(part.filename)}{t}")
                elif part.part_type == "document":
                    if part.source is not None:
                        add(f"{s} {P.source} {_j(part.source)}{t}")
                    if part.citations:
                        add(f"{s} {P.citations} {_j(part.citations)}{t}")
                    if part.title is not None:
                        add(f"{s} {P.title} {_s(part.title)}{t}")
                    if part.context is not None:
                        add(f"{s} {P.context} {_s(part.context)}{t}")
        for same_id in held_ids.values():
            if len(same_id) > 1:
                self.duplicated.extend(same_id)

    def unoffered_calls(self, request: m.LMRequest, request_iri: str, response: m.LMResponse | None, response_iri: str) -> None:
        """Note the tool-call parts of the request's messages and of the response's outputs that name a tool the
        request does not offer, when it offers tools."""
        if not request.tools:
            return
        offered = {tool.name for tool in request.tools}
        holders = [(f"{request_iri}/message/{i}", message.parts) for i, message in enumerate(request.messages)]
        if response is not None:
            holders += [(f"{response_iri}/output/{i}", output.parts) for i, output in enumerate(response.outputs)]
        for holder, parts in holders:
            for i, part in enumerate(parts):
                if part.part_type == "tool_call" and part.name not in offered:
                    self.unoffered.append(f"<{holder}/part/{i}>")

    def exceptions(self, s: str) -> None:
        """The derived facts that name what is exceptional in the trace, each written only where there is such a
        thing: a store without any answers the queries looking for them at once."""
        add = self.out.append
        t = self.tail
        if self.refusals:
            add(f"{s} {P.refusal_count} {_int(self.refusals)}{t}")
        calls = self.tool_calls
        answered_ids = {call_id for _, call_id in self.tool_results if call_id is not None and call_id in calls}
        # a call is its parts with the same tool name and call id (or a part without a call id alone); it is
        # unanswered when no tool result has its call id and no tool execution answers any of its parts
        groups: dict[tuple[str, str], list[str]] = {}
        for part, name, call_id in self.call_parts:
            if call_id not in answered_ids:
                groups.setdefault((name, part if call_id is None else "id:" + call_id), []).append(part)
        answered = self.answered_parts
        unanswered_tools: set[str] = set()
        for (name, _), parts in groups.items():
            if not any(part in answered for part in parts):
                unanswered_tools.add(name)
                for part in parts:
                    add(f"{s} {P.unanswered_tool_call_parts} {part}{t}")
        for name in sorted(unanswered_tools):
            add(f"{s} {P.unanswered_tools} {_s(name)}{t}")
        for result, call_id in self.tool_results:
            if call_id is None or call_id not in calls:
                add(f"{s} {P.orphan_tool_result_parts} {result}{t}")
        for part in self.unoffered:
            add(f"{s} {P.unoffered_tool_call_parts} {part}{t}")
        for part in self.duplicated:
            add(f"{s} {P.duplicate_call_id_parts} {part}{t}")


def _below(calls: list[m.Call], index: int, ancestor: int) -> bool:
    """Whether ``calls[index]`` descends from ``calls[ancestor]`` (parent links; a cycle, which the reader refuses,
    ends the walk)."""
    current = calls[index].parent_call
    seen = 0
    while current is not None and seen <= len(calls):
        if current == ancestor:
            return True
        current = calls[current].parent_call
        seen += 1
    return False


def _group_key(call: m.LMCall) -> tuple[str | None, str | None]:
    """The (model, day) usage group of an LM call of a run."""
    if call.entry is not None:
        return call.entry.request.model, call.entry.timestamp.partition("T")[0]
    return call.model, call.started_at.partition("T")[0]


def _score(value: float | int | bool) -> str:
    """A score as ``xsd:decimal`` (a boolean metric's value as 1 or 0)."""
    return _decimal(int(value) if isinstance(value, bool) else value, "score")


def part_ref_iri(trace_iri: str, ref: m.PartRef) -> str:
    """The IRI of the tool-call part a :class:`~dspy_rdf.canonical.model.PartRef` points at."""
    if ref.output is None:
        return f"{trace_iri}/call/{ref.call}/tool_call/{ref.part}"
    return f"{trace_iri}/call/{ref.call}/entry/response/output/{ref.output}/part/{ref.part}"


def stored_form(trace: m.Trace, *, base: str = DEFAULT_BASE, redactor: Redactor | None = None) -> tuple[str, m.Trace, str]:
    """The IRI a trace is written under, the trace as it is written (its secrets removed by ``redactor``) and its
    content digest, without writing it: what a store needs to tell whether it already holds the trace. The trace's
    canonical JSON, which the digest needs anyway, tells the redactor cheaply whether there can be any secret. Raises
    :class:`TraceInputError` for a trace that cannot be written (see :func:`trace_lines`)."""
    with _unwritable(""):
        payload = content_payload(trace)
        if redactor is not None and redactor.may_hold_secrets(payload):
            redacted = redactor(trace)
            if redacted is not trace:
                trace, payload = redacted, content_payload(redacted)
        digest = content_digest(payload)
        return check_base(base) + trace_key(trace, digest), trace, digest


def trace_lines(
    trace: m.Trace,
    *,
    base: str = DEFAULT_BASE,
    graph: bool = True,
    iri: str | None = None,
    redactor: Redactor | None = None,
    digest: str | None = None,
) -> tuple[str, list[str]]:
    """Write one trace as N-Quads lines (or N-Triples lines with ``graph=False``); return ``(trace IRI, lines)``.

    With ``graph=True`` every quad is in the named graph whose name is the trace IRI. ``iri`` overrides the trace's
    own IRI (used when reading back a graph whose IRI is already known, or given by :func:`stored_form` with its
    ``digest``). ``redactor`` removes secrets first (:mod:`dspy_rdf.canonical.redact`). A trace that cannot be written (JSON
    nested deeper than Python writes, NaN or Infinity in a JSON value, an integer too long to write) raises
    :class:`TraceInputError` naming it.
    """
    if iri is None:
        iri, trace, digest = stored_form(trace, base=base, redactor=redactor)
    else:
        if redactor is not None:
            trace = redactor(trace)
        if digest is None:
            with _unwritable(iri):
                digest = content_digest(content_payload(trace))
    lines, _ = write_trace(trace, iri=iri, digest=digest, graph=graph)
    return iri, lines


def write_trace(trace: m.Trace, *, iri: str, digest: str, graph: bool = True) -> tuple[list[str], TraceFigures]:
    """The lines of :func:`trace_lines` for a trace as it is stored (redacted already, its IRI and digest known), and
    what it adds to the store-wide figures (:class:`TraceFigures`)."""
    with _unwritable(iri):
        writer = _Writer(f" <{iri}> .\n" if graph else " .\n")
        writer.trace(trace, iri, digest)
    if max(map(len, writer.out), default=0) * 4 > MAX_LITERAL_BYTES:  # 4 bytes per character at most
        _refuse_long_literals(iri, writer.out)
    return writer.out, writer.figures()


def _refuse_long_literals(iri: str, lines: list[str]) -> None:
    for line in lines:
        if len(line) * 4 <= MAX_LITERAL_BYTES:
            continue
        node, prop, rest = line.split(" ", 2)
        size = len(rest.encode("utf-8", "surrogatepass"))
        if size > MAX_LITERAL_BYTES:
            raise TraceInputError(
                f"trace {iri}: a value of {size / 1e6:.1f} MB is longer than the {MAX_LITERAL_BYTES / 1e6:.0f} MB a "
                "literal may have (RDF parsers such as pyoxigraph's refuse longer ones): shorten it or leave it out",
                field=f"node {node}, property {prop}",
            )


@contextmanager
def _unwritable(iri: str) -> Iterator[None]:
    """Turn what json.dumps and deep recursion raise for a trace that cannot be written into a TraceInputError."""
    try:
        yield
    except RecursionError:
        raise TraceInputError(f"trace {iri}: a JSON value is nested too deeply to write".replace(" :", ":")) from None
    except TraceInputError:
        raise
    except ValueError as exc:
        if "base IRI" in str(exc):
            raise
        # json.dumps: NaN/Infinity (not JSON) or an integer longer than Python writes (4300 digits)
        if "JSON compliant" in str(exc):
            what = "a JSON value holds NaN or Infinity, which JSON cannot represent"
        elif "integer string conversion" in str(exc):
            what = f"a JSON value holds an integer longer than Python writes as text ({sys.get_int_max_str_digits()} digits)"
        else:
            what = str(exc)
        raise TraceInputError(f"trace {iri}: {what}".replace(" :", ":")) from None
