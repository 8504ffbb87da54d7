"""The ledger: store-wide figures kept as traces are put and removed, so that the canned queries that add up every
execution (tokens and cost per model and per day, part kinds, finish reasons, tool calls, tools offered and never
called) read a few hundred rows instead of every trace, and those after the slowest, the longest or a percentile
(slowest tool executions, tool latency percentiles, longest conversations) look up only the nodes that can be in
their answer.

Each write of a batch of traces adds one *entry*: a named graph ``urn:dspy-rdf:ledger:<random>`` holding the number
of traces it covers (``ledger:entry_traces``) and one row per figure and key with the batch's sums (the usage of each
model and day, the parts of each kind, the outputs of each finish reason, the calls and executions of each tool and
of each tool with each arguments, those that got a result and those that failed, the requests offering each tool, the
traces where DSPy's own modules added a tool, the traces of each size, each tool's timed executions per duration
bucket and range of buckets, and the counts ``stats`` shows: LM calls, tool calls, messages, usage, cost and triples).
Removing a trace adds an entry with its figures negated. An entry is written with its batch (in the same load on the
embedded store), and entries are only ever added, so writers on several machines never contend for one counter.
Every store folds its entries into one every few hundred writes
(:attr:`~dspy_rdf.store.base.TraceStore.fold_every`) and at the end of an export: the embedded store when it is
compacted (:meth:`~dspy_rdf.store.embedded.EmbeddedStore.optimize`), a server's when ``dspy-rdf export`` ends.

The figures of a trace are what the writer wrote for it (:class:`~dspy_rdf.rdf.writer.TraceFigures`), so a query over
the ledger gives the rows of the same query over the triples; tests prove it on every store. The ledger is *current*
when its entries cover as many traces as the store holds. A store written by an earlier release, or by a program that
wrote traces some other way, is not: the canned queries then read the triples (the ``scan/`` versions of the queries)
until ``dspy-rdf migrate`` builds the ledger again from the stored traces.

The ledger's terms are not part of the ``dspy:`` vocabulary: they are the store's own index, in its own graphs, which
neither ``dump`` nor any listing of traces shows.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from dspy_rdf.rdf import vocab as v
from dspy_rdf.rdf.writer import DERIVED_FACTS_VERSION, TraceFigures, decimal_text, duration_bucket

__all__ = ["LEDGER", "LEDGER_VERSION", "UPGRADABLE_VERSIONS", "STALE_COUNTS", "STATS_COLUMNS", "STATS_QUERY", "WITHOUT_STATS", "WITHOUT_ARGUMENTS", "TOOL_RANGE_KEYED", "tool_range_key", "ARGUMENTS_QUERY", "ENTRIES", "ENTRY_VERSIONS", "stale_counts_entry", "REPLACED", "STALE_MAXIMUM", "ARGUMENT_ROWS_KEPT", "ARGUMENT_TEXT_KEPT", "ARGUMENT_ROWS_HELD", "ARGUMENTS_DROPPED", "Ledger", "entry_query", "reads_arguments", "reads_maxima", "stale_maxima"]

LEDGER = v.LEDGER
"""The namespace of the ledger's terms (properties, and the names of its graphs and rows)."""

LEDGER_VERSION = 5
"""The figures an entry holds (``ledger:version`` of each entry). A release that keeps more figures raises it: a ledger
with an entry of another version is not current (the figures it lacks would read as none), so the queries read the
triples until ``dspy-rdf migrate`` counts the store again."""

UPGRADABLE_VERSIONS = frozenset({2, 3, 4})
"""Earlier versions whose entries hold every figure of :data:`LEDGER_VERSION` but those ``migrate`` reads from the
triples in a few queries instead of reading every trace back (:meth:`~dspy_rdf.store.base.TraceStore.upgrade_ledger`):
the ``argument`` figure (each tool's calls by arguments: :data:`WITHOUT_ARGUMENTS`), and the counts ``stats`` shows
(:data:`WITHOUT_STATS`); or that lack only what follows from their own rows (version 4: the ``tool_range`` key of
:data:`TOOL_RANGE_KEYED`), which the sum written by the upgrade holds."""

WITHOUT_STATS = frozenset({2})
"""Earlier versions whose entries lack the ``stats`` figure."""

WITHOUT_ARGUMENTS = frozenset({2, 3})
"""Earlier versions whose entries lack the ``argument`` figure."""

TOOL_RANGE_KEYED = frozenset({"latency", "latency_range"})
"""The figures whose rows also carry ``ledger:tool_range``: one IRI per tool and range of duration buckets
(:func:`tool_range_key`), the same in every entry. ``tool_latency_per_tool`` reads the range holding a percentile
from the ``latency_range`` rows, then looks the buckets of that range up by this key: a lookup of a hundred rows at
most, where a lookup by the range's value reads the rows of every tool in that range (0.16 s against 0.08 s for
that step at a million LM calls)."""

STALE_COUNTS = f"{LEDGER}stale-counts"
"""An entry counting no trace and of no version (so the ledger is not current while it is stored), written before
traces are written again with this release's derived facts (:meth:`~dspy_rdf.store.base.TraceStore.refresh`): they
gain triples, and move to another version of the facts, which the ledger's ``stats`` counts do not know. ``migrate``
reads those counts again (:meth:`~dspy_rdf.store.base.TraceStore.upgrade_ledger`) and removes it. One graph name, so
that each refresh writes the same triples again."""

_XSD = "http://www.w3.org/2001/XMLSchema#"

STATS_COLUMNS = (
    "traces", "lm_calls", "tool_calls", "tool_executions", "tool_results", "messages", "usage_calls", "input_tokens",
    "output_tokens", "priced_calls", "cost", "triples",
)  # fmt: skip
"""The counts the ``stats`` figure sums (each column ``stats_<name>``), by the version of the derived facts the traces
were written with: what :meth:`~dspy_rdf.store.base.TraceStore.stats` reads instead of every trace."""

# Figure -> (key columns, value columns). A key column may be unbound (None): a finish reason not recorded, a model
# call with no day. Values are integers except ``cost`` (an exact decimal).
FIGURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "usage": (("model", "day"), ("lm_calls", "priced_calls", "usage_calls", "input_tokens", "output_tokens", "total_tokens", "cost")),
    "part_kind": (("part_type",), ("parts", "traces")),
    "finish_reason": (("finish_reason",), ("outputs", "traces", "truncated")),
    "tool": (("tool",), ("asked_calls", "parts", "executions", "unasked_executions", "failed_executions", "timed_executions")),
    "argument": (("argument_tool", "arguments"), ("calls", "parts", "executions", "traces")),
    "latency": (("latency_tool", "range", "bucket"), ("executions",)),
    "latency_range": (("range_tool", "range"), ("executions",)),
    "conversation": (("conversation_messages", "conversation_lm_calls"), ("traces",)),
    "tool_result": (("result_tool",), ("results", "errors")),
    "module": (("module_class",), ("lm_calls", "timed_calls", "total_seconds")),
    "module_max": (("max_module_class",), ("max_seconds", "at_max")),
    "module_removal": (("removed_module_class",), ("removed_max_seconds", "removed_at_max")),
    "offered_tool": (("offered_tool",), ("requests", "traces")),
    "framework_tool": (("framework_tool",), ("traces",)),
    "stats": (("stats_facts_version",), tuple(f"stats_{name}" for name in STATS_COLUMNS)),
}  # fmt: skip
"""The figures the ledger keeps, each with the columns that key its rows and the columns it sums."""

_DECIMAL_COLUMNS = frozenset({"cost", "total_seconds", "max_seconds", "removed_max_seconds", "bucket", "range", "stats_cost"})
_INTEGER_KEYS = frozenset({"conversation_messages", "conversation_lm_calls", "stats_facts_version"})

ENTRIES = (
    f"SELECT (COUNT(?entry) AS ?entries) (SUM(?n) AS ?covered) (COUNT(?current) AS ?current_entries) WHERE {{ GRAPH ?entry "
    f"{{ ?entry <{LEDGER}entry_traces> ?n OPTIONAL {{ ?entry <{LEDGER}version> ?current FILTER(STR(?current) = \"{LEDGER_VERSION}\") }} }} }}"
)
"""The ledger's entries, the traces they count, and the entries holding the figures of :data:`LEDGER_VERSION`."""

STATS_QUERY = (
    f"SELECT ?version {' '.join(f'(SUM(?{name}) AS ?{name})' for name in STATS_COLUMNS)} WHERE {{ GRAPH ?entry {{ "
    f"?row <{LEDGER}stats_facts_version> ?version ; {' ; '.join(f'<{LEDGER}stats_{name}> ?{name}' for name in STATS_COLUMNS)} }} }} "
    "GROUP BY ?version"
)
"""The ``stats`` rows of the ledger summed by the version of the derived facts (read only while the ledger is
current: no entry is replaced by a sum still being written)."""

ARGUMENTS_QUERY = """PREFIX dspy: <https://w3id.org/lmodel/dspy/>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
SELECT ?tool ?args ?calls ?parts ?executions ?traces
WHERE {
  {
    SELECT ?tool (COALESCE(STR(?json), "{}") AS ?args) (SUM(?is_call) AS ?calls) (SUM(?call_parts) AS ?parts)
           (SUM(?call_executions) AS ?executions) (COUNT(DISTINCT ?trace) AS ?traces)
    WHERE {
      {
        SELECT ?tool ?json ?trace ?key (MAX(?counted) AS ?is_call) (SUM(?is_part) AS ?call_parts) (SUM(?is_execution) AS ?call_executions)
        WHERE {
          {
            SELECT ?trace ?node (COUNT(?part_typed) AS ?is_part) (COUNT(?call_typed) AS ?is_execution) (COUNT(?asked) AS ?answering)
                   (SAMPLE(?label) AS ?name) (SAMPLE(?j) AS ?json) (SAMPLE(?id) AS ?call_id)
            WHERE {
              {
                GRAPH ?trace {
                  { ?node a dspy:LMToolCallPart BIND(1 AS ?part_typed) } UNION { ?node a dspy:ToolCall BIND(1 AS ?call_typed) }
                  UNION { ?node rdfs:label ?label } UNION { ?node dspy:args ?j } UNION { ?node dspy:call_id ?id }
                }
              } UNION {
                { SELECT ?trace ?execution ?asked WHERE { GRAPH ?trace { ?execution dspy:answers ?asked } } }
                { SELECT ?execution ?node WHERE { GRAPH ?trace { ?execution dspy:tool_call ?node } } }
              }
            }
            GROUP BY ?trace ?node
          }
          FILTER(?is_part + ?is_execution > 0)
          BIND(STR(?name) AS ?tool)
          BIND(IF(?is_part > 0, COALESCE(?call_id, ?node), ?node) AS ?key)
          BIND(IF(?is_part > 0 || ?answering = 0, 1, 0) AS ?counted)
        }
        GROUP BY ?tool ?json ?trace ?key
      }
    }
    GROUP BY ?tool ?json
  }
}
ORDER BY ?tool ?args"""
"""The ``argument`` figure read from the triples (what ``migrate`` gives a ledger of an earlier version): the calls,
parts, executions and traces of each tool with each arguments, as the scan version of the canned query
``tool_argument_frequency`` counts them (without its limit, DSPy's own tools included), in a stable order for paging."""

ARGUMENT_ROWS_KEPT = 5_000
"""The most rows of the ``argument`` figure (one per tool and distinct arguments) an entry keeps, and so, once the
entries are folded into one, the store. Arguments are often free text (a search query, a path), where a row per
distinct arguments is a row per call: an entry that would hold more holds none and says so
(``ledger:without_arguments``), and while any entry says so the query reads the triples (:data:`ARGUMENTS_DROPPED`).
A fold keeps the mark (the traces it counts include some whose rows were left out), so the query reads the triples
from then on, as it did before the ledger kept arguments; only a ledger counted again from every trace (``migrate``
of a ledger that is not current) loses it, where the store then holds few enough distinct arguments. Reading the
rows costs about 0.1 ms each on the embedded store: the bound keeps the query over them under about 0.5 s, and a
fold's memory bounded."""

ARGUMENT_TEXT_KEPT = 1_000_000
"""The most characters of argument text the rows of an entry's ``argument`` figure hold, all rows together: a few
thousand rows of long arguments (a document, a program) are left out as many short ones are."""

ARGUMENT_ROWS_HELD = 4 * ARGUMENT_ROWS_KEPT
"""The most rows of the ``argument`` figure a sum of entries holds in memory while it is added up: past that, it
leaves them out (a sum whose entries include removals can shrink again, so it keeps more than it would write)."""

ARGUMENTS_DROPPED = f"SELECT ?entry WHERE {{ GRAPH ?entry {{ ?entry <{LEDGER}without_arguments> ?dropped }} }} LIMIT 1"
"""An entry that left out its ``argument`` rows (:data:`ARGUMENT_ROWS_KEPT`): the figure does not cover every trace."""

ENTRY_VERSIONS = f"SELECT ?entry ?n ?version WHERE {{ GRAPH ?entry {{ ?entry <{LEDGER}entry_traces> ?n OPTIONAL {{ ?entry <{LEDGER}version> ?version }} }} }}"
"""Each entry of the ledger with the traces it counts and its version (unbound: written before versions)."""

REPLACED = f"SELECT DISTINCT ?entry WHERE {{ GRAPH ?sum {{ ?sum <{LEDGER}replaces> ?entry }} GRAPH ?entry {{ ?entry <{LEDGER}entry_traces> ?n }} FILTER(?entry != <{STALE_COUNTS}>) }}"
"""The entries that an entry holding their sum replaces but that are still stored: a fold (or a rebuild) writes the
sum first, naming the entries it replaces, then removes them one by one, so that no step holds them all in memory.
Until the last is removed the ledger is not current (the queries read the triples); a fold that was stopped midway is
finished by the next one (:meth:`~dspy_rdf.store.base.TraceStore.fold_ledger`), and the sum of the entries never
counts a replaced one. The :data:`STALE_COUNTS` marker is never one: a sum that counted
the traces again replaced the marker of its time, and the same graph written again later marks counts stale again."""

_MAXIMA = frozenset({"module_max", "module_removal"})
"""Figures that entries merge by their largest value (and how many traces hold it), not by a sum. A maximum cannot be
taken out again: a removal records the largest value it took away and how many traces held it (``module_removal``),
and the ledger is not current while removals took away every trace holding the largest value kept
(:func:`stale_maxima`)."""

STALE_MAXIMUM = (
    f"SELECT ?module ?value ?holders ?removed WHERE {{ GRAPH ?entry {{ "
    f"{{ ?row <{LEDGER}max_module_class> ?module ; <{LEDGER}max_seconds> ?value ; <{LEDGER}at_max> ?holders BIND(0 AS ?removed) }} UNION "
    f"{{ ?row <{LEDGER}removed_module_class> ?module ; <{LEDGER}removed_max_seconds> ?value ; <{LEDGER}removed_at_max> ?holders BIND(1 AS ?removed) }} }} }}"
)
"""The rows of the ledger's maxima, kept and removed, for :func:`stale_maxima`."""


def reads_arguments(sparql: str) -> bool:
    """Whether a query reads the ledger's ``argument`` figure."""
    return "ledger:argument_tool" in sparql or f"<{LEDGER}argument_tool>" in sparql


def reads_maxima(sparql: str) -> bool:
    """Whether a query reads one of the ledger's maxima (a ``max_`` property of the ledger)."""
    return "ledger:max_" in sparql or f"<{LEDGER}max_" in sparql


def stale_maxima(rows: Iterable[dict[str, str]]) -> list[str]:
    """The keys whose maximum is no longer known: removals (``removed`` 1) took away as many traces holding the largest
    value kept as the ledger kept (rows of :data:`STALE_MAXIMUM`, each term as its text)."""
    kept: dict[str, tuple[Decimal, int]] = {}
    removed: dict[str, dict[Decimal, int]] = {}
    for row in rows:
        value, holders = Decimal(row["value"]), int(Decimal(row["holders"]))
        if row["removed"] == "1":
            at = removed.setdefault(row["module"], {})
            at[value] = at.get(value, 0) + holders
        else:
            best = kept.get(row["module"])
            kept[row["module"]] = _larger(best, (value, holders)) if best is not None else (value, holders)
    return sorted(key for key, (value, holders) in kept.items() if removed.get(key, {}).get(value, 0) >= holders)


def _larger(one: tuple[Decimal, int], other: tuple[Decimal, int]) -> tuple[Decimal, int]:
    """Two (largest value, traces holding it) pairs merged."""
    if one[0] == other[0]:
        return one[0], one[1] + other[1]
    return one if one[0] > other[0] else other


def _literal(value: Any) -> str:
    if isinstance(value, Decimal) or isinstance(value, float):
        # the text the writer gives a decimal: a bucket is joined to the executions'
        text = decimal_text(Decimal(value))
        return f'"{text}"^^<{_XSD}decimal>'
    if isinstance(value, int):
        return f'"{value}"^^<{_XSD}integer>'
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def tool_range_key(tool: str, span: Decimal) -> str:
    """The IRI naming one tool's range of duration buckets (``ledger:tool_range``): the same for the same tool name
    and range in every entry, whatever text the range was read back as."""
    digest = hashlib.sha256(f"{tool}\x1f{decimal_text(Decimal(span))}".encode()).hexdigest()[:32]
    return f"{LEDGER}tool-range/{digest}"


class Ledger:
    """Sums of figures over some traces: what one entry of the ledger holds (``traces``: how many it covers)."""

    def __init__(self) -> None:
        self.traces = 0
        self.rows: dict[tuple[str, tuple[Any, ...]], list[Any]] = {}
        self.without_arguments = False
        """Whether the traces counted include some whose ``argument`` rows were left out (:data:`ARGUMENT_ROWS_KEPT`)."""

    def _add(self, figure: str, key: tuple[Any, ...], values: Iterable[Any]) -> None:
        row = self.rows.get((figure, key))
        if row is None:
            self.rows[(figure, key)] = list(values)
        else:
            values = list(values)
            if figure in _MAXIMA:
                row[:] = _larger((row[0], row[1]), (values[0], values[1]))
            else:
                for i, value in enumerate(values):
                    row[i] += value

    def add(self, figures: TraceFigures, sign: int = 1) -> None:
        """Count one trace (``sign=-1``: take one away)."""
        self.traces += sign
        for (model, day), usage in figures.usage.items():
            self._add("usage", (model, day), (sign * usage.lm_calls, sign * usage.priced_calls, sign * usage.usage_calls,
                      sign * usage.input_tokens, sign * usage.output_tokens, sign * usage.total_tokens, sign * usage.cost))  # fmt: skip
        for kind, parts in figures.part_kinds.items():
            self._add("part_kind", (kind,), (sign * parts, sign))
        for reason, (outputs, truncated) in figures.finish_reasons.items():
            self._add("finish_reason", (reason,), (sign * outputs, sign, sign * truncated))
        for tool, calls in figures.tools.items():
            self._add("tool", (tool,), (sign * calls.asked_calls, sign * calls.parts, sign * calls.executions, sign * calls.unasked_executions,
                      sign * calls.failed_executions, sign * calls.timed_executions))  # fmt: skip
        for (tool, args), (asked, carried, ran) in figures.arguments.items():
            self._add("argument", (tool, args), (sign * asked, sign * carried, sign * ran, sign))
        for (tool, bucket), executions in figures.latencies.items():
            span = duration_bucket(bucket, 1)  # the one-digit range of buckets a percentile is looked for in first
            self._add("latency", (tool, span, bucket), (sign * executions,))
            self._add("latency_range", (tool, span), (sign * executions,))
        for tool, (results, errors) in figures.tool_results.items():
            self._add("tool_result", (tool,), (sign * results, sign * errors))
        for tool, requests in figures.offered_tools.items():
            self._add("offered_tool", (tool,), (sign * requests, sign))
        for tool in figures.framework_tools:
            self._add("framework_tool", (tool,), (sign,))
        self._add("conversation", figures.conversation, (sign,))
        totals = figures.totals
        self._add("stats", (DERIVED_FACTS_VERSION,), (sign, *(sign * getattr(totals, name) for name in STATS_COLUMNS[1:])))
        for module, made in figures.modules.items():
            self._add("module", (module,), (sign * made.lm_calls, sign * made.timed_calls, sign * made.total_seconds))
            self._add("module_max" if sign > 0 else "module_removal", (module,), (made.max_seconds, 1))

    def set_stats(self, facts_version: int, counts: dict[str, Any]) -> None:
        """Make the ``stats`` figure these counts (:data:`STATS_COLUMNS`) of traces written with this version of the
        derived facts, in place of any it holds."""
        for key in [key for key in self.rows if key[0] == "stats"]:
            del self.rows[key]
        self.rows[("stats", (facts_version,))] = [Decimal(str(counts[name])) if name == "cost" else int(counts[name]) for name in STATS_COLUMNS]

    def set_arguments(self, rows: Iterable[tuple[str, str, int, int, int, int]]) -> None:
        """Make the ``argument`` figure these rows ``(tool, arguments, calls, parts, executions, traces)``
        (:data:`ARGUMENTS_QUERY`), in place of any it holds."""
        for key in [key for key in self.rows if key[0] == "argument"]:
            del self.rows[key]
        for tool, args, *values in rows:
            self._add("argument", (tool, args), values)
        self.without_arguments = False

    def bounded(self, most: int | None = None) -> Ledger:
        """This entry as it is written: without its ``argument`` rows, and saying so, where it holds more than
        ``most`` of them (:data:`ARGUMENT_ROWS_KEPT` unless given) or more argument text than
        :data:`ARGUMENT_TEXT_KEPT` (in the same proportion), or counts traces whose rows were left out before."""
        limit = ARGUMENT_ROWS_KEPT if most is None else most
        kept = [key for (figure, key), values in self.rows.items() if figure == "argument" and any(values)]
        text = sum(len(args) for _, args in kept)
        if not self.without_arguments and len(kept) <= limit and text <= ARGUMENT_TEXT_KEPT * limit // ARGUMENT_ROWS_KEPT:
            return self
        out = Ledger()
        out.traces = self.traces
        out.rows = {key: values for key, values in self.rows.items() if key[0] != "argument"}
        out.without_arguments = True
        return out

    def merge(self, other: Ledger) -> None:
        """Add the sums of another entry."""
        self.traces += other.traces
        self.without_arguments = self.without_arguments or other.without_arguments
        for (figure, key), values in other.rows.items():
            self._add(figure, key, values)

    def __bool__(self) -> bool:
        return self.traces != 0 or self.without_arguments or any(any(values) for values in self.rows.values())

    def nquads(self, graph: str | None = None, *, quads: bool = True, replaces: Iterable[str] = ()) -> tuple[str, bytes]:
        """This entry as N-Quads in its own graph (a new name unless ``graph`` is given), or as the N-Triples of that
        graph with ``quads=False``: ``(graph, data)``; ``replaces``: the entries whose sum it is (:data:`REPLACED`).
        Rows are named IRIs, so that a request sent twice writes the same triples once."""
        graph = graph or f"{LEDGER}{uuid.uuid4().hex}"
        tail = f" <{graph}> .\n" if quads else " .\n"
        entry = self.bounded()
        lines = [f"<{graph}> <{LEDGER}entry_traces> {_literal(entry.traces)}{tail}", f"<{graph}> <{LEDGER}version> {_literal(LEDGER_VERSION)}{tail}"]
        lines += [f"<{graph}> <{LEDGER}replaces> <{name}>{tail}" for name in replaces]
        if entry.without_arguments:
            lines.append(f"<{graph}> <{LEDGER}without_arguments> {_literal(1)}{tail}")
        for n, ((figure, key), values) in enumerate(sorted(entry.rows.items(), key=lambda item: (item[0][0], tuple("" if k is None else str(k) for k in item[0][1])))):
            if not any(values) and figure not in _MAXIMA:
                continue
            row = f"<{graph}/row/{n}>"
            keys, columns = FIGURES[figure]
            lines.append(f"{row} <{LEDGER}figure> {_literal(figure)}{tail}")
            for column, value in zip(keys, key):
                if value is not None:
                    lines.append(f"{row} <{LEDGER}{column}> {_literal(value)}{tail}")
            if figure in TOOL_RANGE_KEYED and key[0] is not None and key[1] is not None:
                lines.append(f"{row} <{LEDGER}tool_range> <{tool_range_key(key[0], key[1])}>{tail}")
            for column, value in zip(columns, values):
                lines.append(f"{row} <{LEDGER}{column}> {_literal(Decimal(value) if column in _DECIMAL_COLUMNS else value)}{tail}")
        return graph, "".join(lines).encode("utf-8")

    def split(self, max_bytes: int = 0, max_triples: int = 0) -> list[Ledger]:
        """This entry as entries whose sums add up to it (the first counts the traces), each of at most about
        ``max_bytes`` of N-Quads and ``max_triples`` triples (0: no bound), for a server that takes requests of a
        bounded size: a batch with many tools and duration buckets makes an entry larger than any of its traces."""
        whole = self.bounded()
        _, data = whole.nquads()
        if (not max_bytes or len(data) <= max_bytes) and (not max_triples or data.count(b"\n") <= max_triples):
            return [whole]
        head = len(Ledger().nquads()[1])
        parts: list[Ledger] = []
        current, size, count = Ledger(), head, 2
        for key, values in whole.rows.items():
            one = Ledger()
            one.rows[key] = values
            row = one.nquads()[1]
            row_bytes, row_triples = len(row) - head, row.count(b"\n") - 2
            if current.rows and ((max_bytes and size + row_bytes > 0.9 * max_bytes) or (max_triples and count + row_triples > max_triples)):
                parts.append(current)
                current, size, count = Ledger(), head, 2
            current.rows[key] = values
            size, count = size + row_bytes, count + row_triples
        parts.append(current)
        parts[0].traces = whole.traces
        parts[0].without_arguments = whole.without_arguments
        return parts

    @classmethod
    def from_rows(cls, entry: str, rows: Iterable[dict[str, str]]) -> Ledger:
        """The entry ``entry`` (a graph name) from its triples (:func:`entry_query`; each term as its text: ``row``,
        ``p``, ``o``)."""
        ledger = cls()
        nodes: dict[str, dict[str, Any]] = {}
        for row in rows:
            if row["row"] == entry:
                if row["p"] == f"{LEDGER}entry_traces":
                    ledger.traces += int(Decimal(row["o"]))
                elif row["p"] == f"{LEDGER}without_arguments":
                    ledger.without_arguments = True
                continue
            nodes.setdefault(row["row"], {})[row["p"].removeprefix(LEDGER)] = row["o"]
        for node in nodes.values():
            figure = node.get("figure")
            if figure not in FIGURES:
                continue
            keys, columns = FIGURES[figure]
            # a server may hand an integer back as a decimal ("2.0"): every value is read as a decimal first
            values = [Decimal(node.get(c, "0")) if c in _DECIMAL_COLUMNS else int(Decimal(node.get(c, "0"))) for c in columns]
            key = tuple(
                (Decimal(node[k]) if k in _DECIMAL_COLUMNS else int(Decimal(node[k])) if k in _INTEGER_KEYS else node[k]) if k in node else None
                for k in keys
            )
            ledger._add(figure, key, values)
        return ledger


def stale_counts_entry() -> bytes:
    """The N-Quads of the :data:`STALE_COUNTS` entry."""
    return f"<{STALE_COUNTS}> <{LEDGER}entry_traces> {_literal(0)} <{STALE_COUNTS}> .\n".encode()


def entry_query(entry: str) -> str:
    """The triples of one entry of the ledger: ``?row ?p ?o``."""
    return f"SELECT ?row ?p ?o WHERE {{ GRAPH <{entry}> {{ ?row ?p ?o }} }}"
