"""The ledger: store-wide figures kept as traces are put and removed, so that the canned queries that add up every
execution (tokens and cost per model and per day, part kinds, finish reasons, tool calls, tools offered and never
called) read a few hundred rows instead of every trace.

Each write of a batch of traces adds one *entry*: a named graph ``urn:dspy-rdf:ledger:<random>`` holding the number
of traces it covers (``ledger:entry_traces``) and one row per figure and key with the batch's sums (the usage of each
model and day, the parts of each kind, the outputs of each finish reason, the calls of each tool, the requests
offering each tool, the traces where DSPy's own modules added a tool). Removing a trace adds an entry with its
figures negated. An entry is written with its batch (in the same load on the embedded store), and entries are only
ever added, so writers on several machines never contend for one counter. The embedded store folds its entries into
one when it is compacted (:meth:`~dspy_rdf.store.embedded.EmbeddedStore.optimize`, after every export).

The figures of a trace are what the writer wrote for it (:class:`~dspy_rdf.rdf.writer.TraceFigures`), so a query over
the ledger gives the rows of the same query over the triples; tests prove it on every store. The ledger is *current*
when its entries cover as many traces as the store holds. A store written by an earlier release, or by a program that
wrote traces some other way, is not: the canned queries then read the triples (the ``scan/`` versions of the queries)
until ``dspy-rdf migrate`` builds the ledger again from the stored traces.

The ledger's terms are not part of the ``dspy:`` vocabulary: they are the store's own index, in its own graphs, which
neither ``dump`` nor any listing of traces shows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from dspy_rdf.rdf.writer import TraceFigures

__all__ = ["LEDGER", "LEDGER_GRAPHS", "Ledger", "ledger_rows_query"]

LEDGER = "urn:dspy-rdf:ledger:"
"""The namespace of the ledger's terms (properties, and the names of its graphs and rows)."""

LEDGER_GRAPHS = f"FILTER(STRSTARTS(STR(?entry), {LEDGER!r}))".replace("'", '"')
"""A filter that keeps the ledger's graphs (``?entry``)."""

_XSD = "http://www.w3.org/2001/XMLSchema#"

# Figure -> (key columns, value columns). A key column may be unbound (None): a finish reason not recorded, a model
# call with no day. Values are integers except ``cost`` (an exact decimal).
FIGURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "usage": (("model", "day"), ("lm_calls", "priced_calls", "usage_calls", "input_tokens", "output_tokens", "total_tokens", "cost")),
    "part_kind": (("part_type",), ("parts", "traces")),
    "finish_reason": (("finish_reason",), ("outputs", "traces", "truncated")),
    "tool": (("tool",), ("asked_calls", "parts", "executions", "unasked_executions")),
    "offered_tool": (("offered_tool",), ("requests", "traces")),
    "framework_tool": (("framework_tool",), ("traces",)),
}  # fmt: skip
"""The figures the ledger keeps, each with the columns that key its rows and the columns it sums."""

_DECIMAL_COLUMNS = frozenset({"cost"})


def _literal(value: Any) -> str:
    if isinstance(value, Decimal) or isinstance(value, float):
        text = format(Decimal(value), "f")
        if "." not in text:
            text += ".0"
        return f'"{text}"^^<{_XSD}decimal>'
    if isinstance(value, int):
        return f'"{value}"^^<{_XSD}integer>'
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


class Ledger:
    """Sums of figures over some traces: what one entry of the ledger holds (``traces``: how many it covers)."""

    def __init__(self) -> None:
        self.traces = 0
        self.rows: dict[tuple[str, tuple[str | None, ...]], list[Any]] = {}

    def _add(self, figure: str, key: tuple[str | None, ...], values: Iterable[Any]) -> None:
        row = self.rows.get((figure, key))
        if row is None:
            self.rows[(figure, key)] = list(values)
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
            self._add("tool", (tool,), (sign * calls.asked_calls, sign * calls.parts, sign * calls.executions, sign * calls.unasked_executions))
        for tool, requests in figures.offered_tools.items():
            self._add("offered_tool", (tool,), (sign * requests, sign))
        for tool in figures.framework_tools:
            self._add("framework_tool", (tool,), (sign,))

    def merge(self, other: Ledger) -> None:
        """Add the sums of another entry."""
        self.traces += other.traces
        for (figure, key), values in other.rows.items():
            self._add(figure, key, values)

    def __bool__(self) -> bool:
        return self.traces != 0 or any(any(values) for values in self.rows.values())

    def nquads(self, graph: str | None = None, *, quads: bool = True) -> tuple[str, bytes]:
        """This entry as N-Quads in its own graph (a new name unless ``graph`` is given), or as the N-Triples of that
        graph with ``quads=False``: ``(graph, data)``. Rows are named IRIs, so that a request sent twice writes the
        same triples once."""
        graph = graph or f"{LEDGER}{uuid.uuid4().hex}"
        tail = f" <{graph}> .\n" if quads else " .\n"
        lines = [f"<{graph}> <{LEDGER}entry_traces> {_literal(self.traces)}{tail}"]
        for n, ((figure, key), values) in enumerate(sorted(self.rows.items(), key=lambda item: (item[0][0], tuple(k or "" for k in item[0][1])))):
            if not any(values):
                continue
            row = f"<{graph}/row/{n}>"
            keys, columns = FIGURES[figure]
            lines.append(f"{row} <{LEDGER}figure> {_literal(figure)}{tail}")
            for column, value in zip(keys, key):
                if value is not None:
                    lines.append(f"{row} <{LEDGER}{column}> {_literal(value)}{tail}")
            for column, value in zip(columns, values):
                lines.append(f"{row} <{LEDGER}{column}> {_literal(Decimal(value) if column in _DECIMAL_COLUMNS else value)}{tail}")
        return graph, "".join(lines).encode("utf-8")

    @classmethod
    def from_rows(cls, rows: Iterable[dict[str, str]]) -> Ledger:
        """The sum of the entries whose triples :func:`ledger_rows_query` returns (each term as its text: ``entry``,
        ``row``, ``p``, ``o``)."""
        ledger = cls()
        nodes: dict[str, dict[str, Any]] = {}
        for row in rows:
            if row["row"] == row["entry"]:
                if row["p"] == f"{LEDGER}entry_traces":
                    ledger.traces += int(Decimal(row["o"]))
                continue
            nodes.setdefault(row["row"], {})[row["p"].removeprefix(LEDGER)] = row["o"]
        for node in nodes.values():
            figure = node.get("figure")
            if figure not in FIGURES:
                continue
            keys, columns = FIGURES[figure]
            # a server may hand an integer back as a decimal ("2.0"): every value is read as a decimal first
            values = [Decimal(node.get(c, "0")) if c in _DECIMAL_COLUMNS else int(Decimal(node.get(c, "0"))) for c in columns]
            ledger._add(figure, tuple(node.get(k) for k in keys), values)
        return ledger


def ledger_rows_query() -> str:
    """Every triple of the ledger's entries: ``?entry ?row ?p ?o``."""
    return f"SELECT ?entry ?row ?p ?o WHERE {{ GRAPH ?entry {{ ?row ?p ?o }} {LEDGER_GRAPHS} }}"
