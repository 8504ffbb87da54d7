"""The one interface of trace stores (:class:`TraceStore`) and what every store shares.

A store keeps one named graph per trace. :meth:`TraceStore.put` writes traces, each into the named graph of its IRI,
whole or not at all. A trace IRI is the hash of the trace's content, so a trace already stored is left as it is:
exporting the same input twice leaves exactly the same quads, and a stored trace is never removed, not even for a
moment, by exporting it again (an export killed at any point loses nothing that was stored before it). The trace
seen again in another input (at another position, ``source_index``, which the content hash leaves out) is left as it
was first stored, with its first ``source_index``. :meth:`TraceStore.select` runs a SPARQL query and returns SPARQL 1.1 JSON results, the same
structure from every store, so that analytics give identical answers on every store. :meth:`TraceStore.delete`,
:meth:`TraceStore.trace_iris`, :meth:`TraceStore.stats` and :meth:`TraceStore.dump` complete it. The stores are
:class:`~dspy_rdf.store.embedded.EmbeddedStore` (pyoxigraph on disk) and :class:`~dspy_rdf.store.remote.RemoteStore`
(any SPARQL 1.1 server).
"""

from __future__ import annotations

import io
import os
import queue
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import pyoxigraph as ox

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import DspyRdfError, RdfInputError, TraceInputError
from dspy_rdf.canonical.identity import DEFAULT_BASE, check_base, is_absolute_iri
from dspy_rdf.canonical.redact import DEFAULT_REDACTOR, Redactor
from dspy_rdf.rdf import vocab as v
from dspy_rdf.rdf.formats import RdfFormat, encode_trace_figures, parse_traces
from dspy_rdf.rdf.writer import DERIVED_FACTS_VERSION, TraceFigures, stored_form
from dspy_rdf.store.ledger import (
    ARGUMENT_ROWS_HELD,
    ARGUMENT_ROWS_KEPT,
    ARGUMENTS_DROPPED,
    ARGUMENTS_QUERY,
    ENTRIES,
    ENTRY_VERSIONS,
    LEDGER,
    LEDGER_VERSION,
    REPLACED,
    STALE_COUNTS,
    STALE_MAXIMUM,
    STATS_COLUMNS,
    STATS_QUERY,
    UPGRADABLE_VERSIONS,
    WITHOUT_ARGUMENTS,
    WITHOUT_STATS,
    Ledger,
    entry_query,
    stale_counts_entry,
    stale_maxima,
)

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

__all__ = [
    "DEFAULT_STORE",
    "STORE_ENV",
    "EncodedTrace",
    "PutReport",
    "QUIET_STATS",
    "STATS",
    "STATS_FACTS",
    "SparqlEngine",
    "SparqlJson",
    "StoreError",
    "StoreLockedError",
    "TraceStore",
    "check_trace_iri",
    "encode_traces",
    "failed_query_message",
    "term_from_json",
    "term_json",
    "term_value",
]

DEFAULT_STORE = Path(".dspy-rdf") / "store"
"""Where the embedded store lives when neither ``--store`` nor ``$DSPY_RDF_STORE`` says otherwise."""
STORE_ENV = "DSPY_RDF_STORE"

SparqlJson = dict[str, Any]
"""SPARQL 1.1 Query Results JSON: ``{"head": {"vars": [...]}, "results": {"bindings": [...]}}``."""


class StoreError(DspyRdfError, OSError):
    """A store could not be opened, read or written; the message says which store and what failed."""

    report: PutReport
    """Only on an error that stopped :meth:`TraceStore.put`: what it wrote before."""


class StoreLockedError(StoreError):
    """The embedded store is open for writing in another process."""


def check_trace_iri(iri: str) -> str:
    """``iri`` when it is a whole (absolute) IRI, as trace graphs are named; else a ``ValueError`` saying so (a
    trace given by a part of its IRI, or mistyped, is refused before anything is read, written or deleted)."""
    if not is_absolute_iri(iri):
        raise ValueError(f"{iri!r} is not a trace IRI: give the whole IRI, as `dspy-rdf dump` or a query shows it")
    return iri


_SERVICE_CALL = re.compile(r"(?i)\bSERVICE\s+(SILENT\s+)?<([^<>\s]*)>")


def failed_query_message(sparql: str, detail: str, where: str) -> str:
    """One line saying that a query failed while it ran ``where`` (``on the server``, ``on the store at DIR``) and
    why (``detail``), naming the query's ``SERVICE`` calls when it has any: what fails while a query runs is mostly
    one of them (an endpoint that cannot be reached), and the error the engine gives does not say which."""
    services = list(dict.fromkeys(iri for silent, iri in _SERVICE_CALL.findall(sparql) if not silent))
    if len(services) == 1:
        return f"the SERVICE call to <{services[0]}> failed {where}: {detail}"
    if services:
        return f"one of the SERVICE calls (to {', '.join(f'<{iri}>' for iri in services)}) failed {where}: {detail}"
    return f"the query failed {where}: {detail}"


class SparqlEngine(str, Enum):
    """The engine that answers a store's queries, where a canned query has a version planned for it
    (``analytics/queries/<engine>/``)."""

    OXIGRAPH = "oxigraph"
    VIRTUOSO = "virtuoso"
    OTHER = "other"


_LEDGER_WRITES_STARTING = threading.Lock()


def _new_ledger_writes_lock() -> None:
    global _LEDGER_WRITES_STARTING
    _LEDGER_WRITES_STARTING = threading.Lock()  # held by a thread of the parent at the fork, it would stay held here


os.register_at_fork(after_in_child=_new_ledger_writes_lock)


@dataclass
class _LedgerWrites:
    """Writes of ledger entries since a store's last fold (:meth:`TraceStore._ledger_entry_written`)."""

    count: int = 0
    counting: threading.Lock = field(default_factory=threading.Lock)
    folding: threading.Lock = field(default_factory=threading.Lock)
    owner: int = field(default_factory=os.getpid)  # a forked process starts its own: a lock held by a thread of the
    # parent at the fork stays held in the child, where that thread does not exist


@dataclass
class PutReport:
    """What :meth:`TraceStore.put` did: IRIs written (in input order), already stored (left as they were), traces
    that could not be written, as ``(iri, why)`` (``iri`` is empty when it could not be computed; ``why`` names it
    then), and the number of triples written."""

    written: list[str] = field(default_factory=list)
    already_stored: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    triples: int = 0


@dataclass(frozen=True)
class EncodedTrace:
    """One trace as N-Quads bytes, all in the graph of its IRI, its number of triples, and what it adds to the
    store's ledger (:mod:`dspy_rdf.store.ledger`; ``None``: not known, and the ledger then stops being current)."""

    iri: str
    data: bytes
    triples: int
    figures: TraceFigures | None = None


STATS = {
    "traces": "traces (one per named graph)",
    "lm_calls": "LM calls (history entries, failed calls of program runs, lone requests or responses)",
    "tool_calls": "tool calls (tool-call parts, one per call id, plus tool executions no part asked for, as ReAct's; not DSPy's own finish and submit)",
    "tool_executions": "tool executions (dspy.Tool calls recorded in program runs; not DSPy's own finish and submit)",
    "tool_results": "tool-result parts (results sent back to a model)",
    "messages": "messages (of every request)",
    "usage_calls": "LM calls whose token usage is known",
    "input_tokens": "input tokens (of those calls; unknown when none reports them)",
    "output_tokens": "output tokens (of those calls; unknown when none reports them)",
    "priced_calls": "LM calls whose cost is known",
    "cost": "cost in US dollars (of those calls; unknown when none reports it)",
    "triples": "triples",
    "to_migrate": "traces written by an earlier release, without this release's keys or derived facts (run dspy-rdf migrate)",
    "ledger_uncounted": "traces by which the ledger's count differs from the store's: the queries that add up every execution, and these counts, read the triples (run dspy-rdf migrate)",
}
"""What :meth:`TraceStore.stats` counts, in words."""
QUIET_STATS = frozenset({"to_migrate", "ledger_uncounted"})
"""The counts of :data:`STATS` worth showing only when they are not 0 (something to do)."""

STATS_FACTS = {
    "lm_calls": "lm_call_count", "tool_calls": "tool_call_count", "tool_executions": "tool_execution_count",
    "tool_results": "tool_result_count", "messages": "message_count", "usage_calls": "usage_call_count",
    "input_tokens": "input_tokens_total", "output_tokens": "output_tokens_total", "priced_calls": "priced_call_count",
    "cost": "cost_total",
}  # fmt: skip
"""The per-trace derived fact each sum of :meth:`TraceStore.stats` adds up."""
_UNKNOWN_UNLESS = {"input_tokens": "usage_calls", "output_tokens": "usage_calls", "cost": "priced_calls"}
"""Sums that are unknown (None), not 0, when no LM call reports them."""

_VALUES_BATCH = 200
"""Graph names per ``VALUES`` block of a query."""

_FIRST_BATCH_TRIPLES = 50_000
"""The first batch of :meth:`TraceStore.put`; each next one is twice as large, up to ``batch_triples``."""

_LOOKUP_CHUNK = 200
"""Traces whose IRIs :meth:`TraceStore.put` looks up in the store at once (one query on a server)."""


def encode_traces(
    traces: Iterable[m.Trace], *, base: str, redactor: Redactor | None = DEFAULT_REDACTOR
) -> Iterator[EncodedTrace | tuple[str, str]]:
    """Each trace (redacted) as N-Quads bytes in its own graph, or
    ``("", reason)`` when it cannot be written as RDF; repeats dropped."""
    seen: set[str] = set()
    for trace in traces:
        try:
            iri, form, digest = stored_form(trace, base=base, redactor=redactor)
            if iri in seen:
                continue
            seen.add(iri)
            data, figures = encode_trace_figures(form, iri=iri, digest=digest)
        except TraceInputError as exc:  # the message names the trace when its IRI could be computed
            yield "", str(exc)
            continue
        yield EncodedTrace(iri, data, data.count(b"\n"), figures)


class TraceStore(ABC):
    """A store of traces, one named graph per trace."""

    location: str

    @property
    def retypes_numbers(self) -> bool:
        """Whether the store changes the datatype of integral numbers it keeps (some SPARQL servers do)."""
        return False

    # --- what each store implements ---------------------------------------------------------------------

    @abstractmethod
    def _write_batch(self, batch: list[EncodedTrace], *, bulk: bool) -> list[tuple[str, str]]:
        """Write whole traces, none of which is stored yet, each all or nothing; return the traces the store refused
        (``(iri, why)``: a server that does not accept a value of the trace), which are not written."""

    @abstractmethod
    def _stored(self, iris: list[str]) -> set[str]:
        """Which of these trace graphs the store holds."""

    @abstractmethod
    def select(self, sparql: str, *, limit: int | None = None, deadline: float | None = None) -> SparqlJson:
        """Run a SPARQL SELECT (or ASK) query; return SPARQL 1.1 JSON results: at most ``limit`` rows when given, and
        :class:`TimeoutError` when rows are still coming at ``deadline`` (a ``time.monotonic()`` value) where the
        store can tell (the embedded store reads rows as the query makes them; a server answers whole)."""

    @abstractmethod
    def construct(self, sparql: str) -> bytes:
        """Run a SPARQL CONSTRUCT query; return its triples as N-Triples."""

    @abstractmethod
    def _delete_graph(self, iri: str) -> bool:
        """Remove a graph; return whether it was there."""

    @abstractmethod
    def dump(self, handle: BinaryIO, *, traces: list[str] | None = None, trig: bool = False) -> int:
        """Write the whole store (or the given traces) as N-Quads, or TriG; return the number of traces written."""

    def close(self) -> None:
        """Release the store (flush and unlock); the store object is unusable afterwards."""

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- shared behaviour -----------------------------------------------------------------------------------

    writer_threads = 1
    """How many batches this store commits at once (each still all or nothing)."""

    concurrent_queries = False
    """Whether queries from several threads run at once (not one after the other): ``run_query`` then runs a query
    over the ledger beside the check that the ledger covers every trace."""

    @property
    def sparql_engine(self) -> SparqlEngine:
        """The engine that answers this store's queries (a server's is known once it answered)."""
        return SparqlEngine.OTHER

    fold_names_replaced = False
    """Whether a fold's sum names the entries it replaces (so that a fold stopped midway is finished by the next one);
    a store whose sums do not fold only a current ledger."""

    fold_every = 256
    """The store folds its ledger's entries into one after this many writes of an entry (live capture writes one per
    run, an export one per batch), so that the queries over the ledger read a bounded number of rows however long a
    writer runs."""

    def _ledger_entry_written(self) -> None:
        """Count one write of a ledger entry; after :attr:`fold_every` of them, fold the ledger. A store's commit
        threads write at once: a fold already under way in this process is not started again."""
        state = self.__dict__.get("_ledger_writes")
        if state is None or state.owner != os.getpid():
            with _LEDGER_WRITES_STARTING:  # two commit threads' first writes share one counter
                state = self.__dict__.get("_ledger_writes")
                if state is None or state.owner != os.getpid():
                    state = self.__dict__["_ledger_writes"] = _LedgerWrites()
        with state.counting:
            state.count += 1
            if state.count < self.fold_every:
                return
            state.count = 0
        if state.folding.acquire(blocking=False):
            try:
                self.fold_ledger()
            except StoreError:
                # The batch that called is stored, and so are the entries: a fold that failed (a server gone
                # meanwhile) only leaves more entries to read, or the ledger not current until the next fold or
                # migrate. Reporting the batch as failed would be wrong.
                pass
            finally:
                state.folding.release()

    def _commit_threads(self) -> ThreadPoolExecutor:
        """The threads that commit this store's batches: started by its first :meth:`put` in this process and kept
        until :meth:`close`. RocksDB (the embedded store) writes more slowly for every thread that ever wrote to it:
        with a thread started for each ``put``, live capture's commits of one run each grew from 4 ms to 60 ms over
        300 runs (docs/benchmarks.md)."""
        owner, pool = self.__dict__.get("_commit_pool", (None, None))
        if pool is None or owner != os.getpid():  # a forked process has none of its parent's threads
            from concurrent.futures import ThreadPoolExecutor  # only stores that are written to need it

            pool = ThreadPoolExecutor(max_workers=max(1, self.writer_threads), thread_name_prefix="dspy-rdf-store-writer")
            self.__dict__["_commit_pool"] = (os.getpid(), pool)
        return pool

    def _stop_commit_threads(self) -> None:
        """End the threads of :meth:`_commit_threads` (each store's ``close`` calls it)."""
        owner, pool = self.__dict__.pop("_commit_pool", (None, None))
        if pool is not None and owner == os.getpid():
            pool.shutdown(wait=True)

    def put(
        self,
        traces: Iterable[m.Trace | EncodedTrace],
        *,
        base: str = DEFAULT_BASE,
        bulk: bool = False,
        batch_triples: int = 100_000,
        first_batch_triples: int = _FIRST_BATCH_TRIPLES,
        progress: Callable[[int], None] | None = None,
        redactor: Redactor | None = DEFAULT_REDACTOR,
        origin: Callable[[], tuple[str, int | None]] | None = None,
        settled: Callable[[int, list[str]], None] | None = None,
    ) -> PutReport:
        """Write traces, each into the named graph of its IRI, in batches of whole traces; leave the traces already
        stored as they are (see the module docstring).

        Batches start at ``first_batch_triples`` (small: the first traces are committed soon) and double up to
        ``batch_triples``; a caller whose items are one batch already gives both its size. ``progress``
        is called with the number of traces of each batch once it is stored. Secrets are redacted first by
        ``redactor`` (:mod:`dspy_rdf.canonical.redact`; ``None`` keeps everything). Traces that cannot be written are listed
        in :attr:`PutReport.failed`, by the file and line ``origin`` gives (called as each trace is taken, it names
        where the trace came from); the others are written regardless. Exceptions from the store itself (disk,
        network) propagate after what was written before them is reported in the exception's ``report``
        attribute, so a caller can say which traces were not written.

        Memory stays bounded by a few batches whatever the number of traces: a committed batch is dropped, only its
        IRIs are kept for the report.

        An item may also be an :class:`EncodedTrace`, as :func:`encode_traces` gives it (redacted and encoded already,
        for instance by another process): it is written as it is.

        ``settled`` is called, in order, as the items are done with: ``settled(n, iris)`` says that the first ``n``
        items taken are all written, already stored, failed or repeats, ``iris`` naming the traces written last (a
        load that is stopped can then start again after the ``n``-th item, :mod:`dspy_rdf.journal`).
        """
        check_base(base)
        report = PutReport()
        # Reading and encoding (Python) overlap with committing (pyoxigraph or the network, outside the GIL): writer
        # threads commit earlier batches while this thread encodes the next; at most two batches wait in between.
        batches: queue.Queue[tuple[int, list[EncodedTrace], int] | None] = queue.Queue(maxsize=2)
        failure: list[BaseException] = []
        done: dict[int, tuple[list[str], int, list[tuple[str, str]]]] = {}  # batch number -> (IRIs written, triples, refused)
        lock = threading.Lock()
        taken_by: dict[int, int] = {}  # batch number -> the items taken when it was queued (all settled once it is)
        told = 0  # batches whose items ``settled`` was told of

        def tell() -> None:
            """Tell ``settled`` of the batches committed in order (called holding ``lock``)."""
            nonlocal told
            while told in done and told in taken_by:
                settled(taken_by.pop(told), done[told][0])  # type: ignore[misc]
                told += 1

        def commit(number: int, batch: list[EncodedTrace], taken: int) -> None:
            try:
                entry = self._ledger_entry(batch)
                refused = self._write_batch(batch + entry, bulk=bulk) if batch else []
                if refused:
                    gone = {iri for iri, _ in refused}
                    if entry and entry[-1].iri not in gone:  # the part of its entry that counts the traces is stored
                        if any(iri.startswith(LEDGER) for iri in gone):
                            # some of its rows are not: take the count out again, so that the ledger is not current
                            # (the queries read the triples) until migrate counts the store again
                            self._write_ledger(self._count_only(-len(batch)))
                        else:  # take the refused traces out again
                            self._write_ledger(self._ledger_of([item for item in batch if item.iri in gone], sign=-1))
                    refused = [(iri, why) for iri, why in refused if not iri.startswith(LEDGER)]
            except StoreError as exc:
                # A remote store writes a batch in several requests and says which of its traces it wrote before failing.
                written = set(getattr(exc, "written", ()))
                with lock:
                    done[number] = ([e.iri for e in batch if e.iri in written], sum(e.triples for e in batch if e.iri in written), [])
                raise
            out = {iri for iri, _ in refused}
            with lock:
                done[number] = ([e.iri for e in batch if e.iri not in out], sum(e.triples for e in batch if e.iri not in out), refused)
                if progress is not None:
                    progress(len(batch))
                if settled is not None:
                    taken_by[number] = taken
                    tell()

        def writer() -> None:
            while (job := batches.get()) is not None:
                if not failure:
                    try:
                        commit(*job)
                    except BaseException as exc:  # handed to the caller's thread below
                        failure.append(exc)
            batches.put(None)  # for the next writer

        pending: list[EncodedTrace] = []
        size, number, limit = 0, 0, max(1, min(first_batch_triples, batch_triples))

        def located(exc: TraceInputError, where: tuple[str, int | None] | None) -> str:
            return str(exc.located(source=where[0], line=where[1]) if where is not None and exc.source == "<input>" else exc)

        def encode(chunk: list[tuple[str, m.Trace | EncodedTrace, str, tuple[str, int | None] | None, int]]) -> None:
            """Encode the traces of a chunk the store does not hold yet, and queue full batches."""
            nonlocal pending, size, number, limit
            stored = self._stored([iri for iri, _, _, _, _ in chunk])
            for iri, form, digest, where, taken in chunk:
                if iri in stored:
                    report.already_stored.append(iri)
                    continue
                if isinstance(form, EncodedTrace):
                    pending.append(form)
                else:
                    try:
                        data, figures = encode_trace_figures(form, iri=iri, digest=digest)  # already redacted by stored_form
                    except TraceInputError as exc:
                        report.failed.append((iri, located(exc, where)))
                        continue
                    pending.append(EncodedTrace(iri, data, data.count(b"\n"), figures))
                size += pending[-1].triples
                if size >= limit:
                    batches.put((number, pending, taken))
                    pending, size, number, limit = [], 0, number + 1, min(2 * limit, batch_triples)

        writers: list[Future[None]] = []
        try:
            pool = self._commit_threads()
            for _ in range(max(1, self.writer_threads)):
                writers.append(pool.submit(writer))  # only submitted writers are waited for
            seen: set[str] = set()
            chunk: list[tuple[str, m.Trace | EncodedTrace, str, tuple[str, int | None] | None, int]] = []
            taken = 0  # items taken from ``traces``
            for trace in traces:
                taken += 1
                if failure:
                    break
                where = origin() if origin is not None else None
                form: m.Trace | EncodedTrace
                if isinstance(trace, EncodedTrace):
                    iri, form, digest = trace.iri, trace, ""
                else:
                    try:
                        iri, form, digest = stored_form(trace, base=base, redactor=redactor)
                    except TraceInputError as exc:  # the message names the trace when its IRI could be computed
                        report.failed.append(("", located(exc, where)))
                        continue
                if iri in seen:  # the same trace again in this input: written once
                    continue
                seen.add(iri)
                chunk.append((iri, form, digest, where, taken))
                if len(chunk) >= _LOOKUP_CHUNK:
                    encode(chunk)
                    chunk = []
            if chunk and not failure:
                encode(chunk)
            if not failure and (pending or settled is not None):
                # a writer commits it, so that an interrupt here cannot split it (empty: it settles the items after
                # the last batch, all already stored or failed)
                batches.put((number, pending, taken))
        except StoreError as exc:  # looking up which traces are stored failed: reported like a failed write
            failure.append(exc)
        finally:
            batches.put(None)  # even on an interrupt: the batches being committed finish whole
            for done_writer in writers:
                done_writer.result()
        for number in sorted(done):  # input order, whichever writer finished first
            iris, triples, refused = done[number]
            report.written += iris
            report.triples += triples
            report.failed += refused
        if failure:
            error = failure[0]
            if isinstance(error, StoreError):
                error.report = report
            raise error
        return report

    def delete(self, iri: str) -> bool:
        """Remove a trace's graph; return whether it was there. The trace is read first, so that the ledger takes its
        figures out (a graph that cannot be read as traces is removed all the same, and the ledger then stops being
        current, which ``migrate`` mends)."""
        if self.missing_traces([iri]):
            return False
        removed = Ledger()
        for figures in self._stored_figures(iri):
            removed.add(figures, -1)
        return self._delete_with_entry(iri, removed)

    def _stored_figures(self, iri: str) -> list[TraceFigures]:
        """The figures of the traces a graph holds, read back (none for a graph this release cannot read as traces)."""
        try:
            return [encode_trace_figures(trace, iri=iri, digest="")[1] for _, trace in self.traces([iri])]
        except (RdfInputError, TraceInputError):
            return []

    def _delete_with_entry(self, iri: str, removed: Ledger) -> bool:
        """Remove a trace's graph, then write the ledger entry that takes its figures out (a store that can do both in
        one step overrides this)."""
        if not self._delete_graph(iri):
            return False
        self._write_ledger(removed)
        return True

    # --- the ledger (dspy_rdf.store.ledger) ----------------------------------------------------------------------

    @staticmethod
    def _ledger_of(items: list[EncodedTrace], sign: int = 1) -> Ledger:
        """The figures of these traces, summed (negated with ``sign=-1``); every item must know its figures."""
        ledger = Ledger()
        for item in items:
            assert item.figures is not None
            ledger.add(item.figures, sign)
        return ledger

    def _ledger_entry(self, batch: list[EncodedTrace]) -> list[EncodedTrace]:
        """The ledger entry of a batch, as one more graph to write with it; none when a trace of the batch does not
        know its figures (the ledger then stops being current)."""
        if not batch or any(item.figures is None for item in batch):
            return []
        return self._ledger_entry_of(self._ledger_of(batch))

    @staticmethod
    def _count_only(traces: int) -> Ledger:
        """An entry that only counts traces (no figures)."""
        ledger = Ledger()
        ledger.traces = traces
        return ledger

    def _write_ledger(self, ledger: Ledger) -> None:
        """Write one entry of the ledger on its own (a removal, a correction)."""
        if ledger:
            self._write_batch(self._ledger_entry_of(ledger), bulk=False)

    def _entry_bounds(self) -> tuple[int, int]:
        """The most bytes and triples one write of a ledger entry may hold (0: no bound): a larger entry is written as
        several (:meth:`~dspy_rdf.store.ledger.Ledger.split`)."""
        return 0, 0

    def _ledger_entry_of(self, ledger: Ledger) -> list[EncodedTrace]:
        """The entry's graphs, the one that counts the traces last: a write stopped before it, or refused, leaves the
        ledger not current rather than current with rows missing."""
        parts = ledger.split(*self._entry_bounds())
        out = []
        for part in parts[1:] + parts[:1]:
            graph, data = part.nquads()
            out.append(EncodedTrace(graph, data, data.count(b"\n")))
        return out

    def ledger(self) -> Ledger:
        """The sum of every entry of the ledger, read one entry at a time (memory: one entry, whatever their number);
        entries that a sum replaces (a fold stopped midway) are not counted."""
        replaced = set(self._replaced_entries())
        return self._sum_of([entry for entry in self.ledger_entries() if entry not in replaced])

    def _sum_of(self, entries: list[str]) -> Ledger:
        """The sum of these entries of the ledger, read one at a time (its ``argument`` rows left out once they are
        more than :data:`~dspy_rdf.store.ledger.ARGUMENT_ROWS_HELD`, so that free-text arguments do not all stay in
        memory; writing the sum applies the smaller bound of an entry)."""
        total = Ledger()
        for entry in entries:
            total.merge(Ledger.from_rows(entry, self._entry_rows(entry)))
            total = total.bounded(ARGUMENT_ROWS_HELD)
        return total

    def _entry_rows(self, entry: str) -> list[dict[str, str]]:
        """The triples of one entry of the ledger, each term as its text (``row``, ``p``, ``o``)."""
        rows = self.select(entry_query(entry))["results"]["bindings"]
        return [{name: term["value"] for name, term in row.items()} for row in rows]

    def ledger_dump(self, *, trig: bool = False) -> bytes:
        """The ledger, summed into one entry, as N-Quads (or TriG): what ``dump --with-ledger`` adds after the traces,
        so that a server bulk-loading the dump holds a ledger covering them (no ``migrate``). Readers of a dump take
        only its traces: a store that loads it again through ``export`` counts them into its own ledger."""
        _, data = self.ledger().nquads()
        if not trig:
            return data
        return ox.serialize(ox.parse(data, format=ox.RdfFormat.N_QUADS), format=ox.RdfFormat.TRIG) or b""

    def ledger_entries(self) -> list[str]:
        """Names of the ledger's graphs, sorted."""
        return self._graph_names(f"GRAPH ?g {{ ?g <{LEDGER}entry_traces> ?n }}")

    def ledger_is_current(self, *, maxima: bool = False, arguments: bool = False) -> bool:
        """Whether the ledger covers every trace of the store (as many traces as the store holds) with the figures of
        this release (:data:`~dspy_rdf.store.ledger.LEDGER_VERSION`), so that the canned queries can read it instead of
        the triples: two counts (about 10 ms per 40,000 traces on the embedded store) and a look at the entries.
        With ``maxima``, also whether its maxima are known (no removals took away every trace holding the largest
        value kept), for a query that reads them; with ``arguments``, whether it keeps every trace's calls by
        arguments (no entry left them out: :data:`~dspy_rdf.store.ledger.ARGUMENT_ROWS_KEPT`)."""
        covered, outdated = self._ledger_state()
        if outdated or covered != self._trace_count():
            return False
        if arguments and self.select(ARGUMENTS_DROPPED)["results"]["bindings"]:
            return False
        if not maxima:
            return True
        rows = self.select(STALE_MAXIMUM)["results"]["bindings"]
        return not stale_maxima({name: term["value"] for name, term in row.items()} for row in rows)

    def _ledger_state(self) -> tuple[int, bool]:
        """The number of traces the ledger's entries count, and whether an entry holds the figures of another version
        or a sum replaces entries still stored (a fold not finished)."""
        row = self._one_row(ENTRIES, "entries")
        entries, current = (int(term_value(row.get(name)) or 0) for name in ("entries", "current_entries"))
        return int(term_value(row.get("covered")) or 0), current != entries or bool(self._replaced_entries())

    def _replaced_entries(self) -> list[str]:
        """The entries a sum replaces that are still stored (:data:`~dspy_rdf.store.ledger.REPLACED`)."""
        return sorted(self._column(REPLACED, "entry"))

    def _finish_replacing(self) -> None:
        """Remove the entries a sum replaces that a fold stopped midway left stored."""
        for entry in self._replaced_entries():
            self._delete_graph(entry)

    def rebuild_ledger(self, progress: Callable[[int], None] | None = None) -> int:
        """Count every stored trace again into one new ledger entry and remove the old ones (what ``migrate`` does
        when the ledger is not current); return the number of traces counted. ``progress`` is called with 1 per
        trace graph read."""
        self._finish_replacing()
        old = self.ledger_entries()
        ledger = Ledger()
        # a trace without this release's derived facts lacks what queries over the ledger look up (its duration
        # buckets): not counted, so that the ledger is not current while the store holds one
        outdated = set(self.traces_with_outdated_facts())
        for n, iri in enumerate(self.trace_iris(), 1):
            for figures in self._stored_figures(iri) if iri not in outdated else ():  # nor a graph this release cannot read
                ledger.add(figures)
            if n % 1_000 == 0:
                ledger = ledger.bounded()  # only adding: rows past the bound now are past it at the end
            if progress is not None:
                progress(1)
        self._replace_ledger(old, ledger)
        return ledger.traces

    def upgrade_ledger(self) -> int | None:
        """Bring a ledger that an earlier release kept (:data:`~dspy_rdf.store.ledger.UPGRADABLE_VERSIONS`: every
        figure of this release but a few) to this release without reading every trace back: its sums, with the
        figures it lacks read from the triples (each tool's calls by arguments, in one grouped scan; where the
        ``stats`` counts are missing or stale, the sum of every trace's derived facts and a count of the traces'
        triples; no listing of graphs), as one new entry replacing the old ones. Done only when the old ledger covers
        every trace and every trace carries this release's derived facts; return the number of traces the new entry
        counts, or ``None`` when there was nothing to upgrade or it could not be (:meth:`rebuild_ledger` then counts
        every trace again)."""
        self._finish_replacing()
        rows = self.select(ENTRY_VERSIONS)["results"]["bindings"]
        stale = any(row["entry"]["value"] == STALE_COUNTS for row in rows)
        versions = {term_value(row.get("version")) for row in rows if row["entry"]["value"] != STALE_COUNTS}
        if not rows or (versions <= {LEDGER_VERSION} and not stale) or not versions <= {LEDGER_VERSION, *UPGRADABLE_VERSIONS}:
            return None
        old = [row["entry"]["value"] for row in rows]
        covered = sum(int(term_value(row["n"])) for row in rows)
        recount = stale or bool(versions & WITHOUT_STATS)
        counts = self._stats_from_triples(exact=True, listings=False, count_triples=recount)
        if covered != counts["traces"] or counts["to_migrate"]:
            return None
        ledger = self._sum_of([entry for entry in old if entry != STALE_COUNTS])
        if recount:
            ledger.set_stats(DERIVED_FACTS_VERSION, {name: counts[name] or 0 for name in STATS_COLUMNS})
        if versions & WITHOUT_ARGUMENTS:
            ledger.set_arguments(self._argument_figures_from_triples())
        self._replace_ledger(old, ledger)
        return ledger.traces

    def _argument_figures_from_triples(self) -> list[tuple[str, str, int, int, int, int]]:
        """The ``argument`` figure of the ledger read from the triples (:data:`~dspy_rdf.store.ledger.ARGUMENTS_QUERY`),
        page by page where the store caps its answers; no more than one row past what an entry keeps
        (:data:`~dspy_rdf.store.ledger.ARGUMENT_ROWS_KEPT`), which is enough to know that it keeps none."""
        wanted = ARGUMENT_ROWS_KEPT + 1
        rows: list[dict[str, Any]] = []
        while len(rows) < wanted:
            page = min(wanted - len(rows), self.page_rows or wanted)
            found, _ = self._select_page(f"{ARGUMENTS_QUERY} LIMIT {page} OFFSET {len(rows)}")
            rows += found
            if not found or self.page_rows is None:
                break  # a server is asked until a page comes back empty: one may cut an answer without saying so

        def count(row: dict[str, Any], name: str) -> int:
            return int(term_value(row[name]))

        return [
            (str(term_value(row["tool"])), str(term_value(row["args"])), count(row, "calls"), count(row, "parts"), count(row, "executions"), count(row, "traces"))
            for row in rows
        ]

    def fold_ledger(self) -> int:
        """Replace the ledger's entries by one holding their sums (the same figures, fewer rows to read); return the
        number of entries folded (none while an entry holds the figures of another version, which only ``migrate``
        replaces)."""
        self._finish_replacing()
        if not self.fold_names_replaced and not self.ledger_is_current():
            return 0  # a fold stopped midway (the sum and some of its entries stored): left to migrate, not added up again
        old = self.ledger_entries()
        if len(old) < 2 or self._ledger_state()[1]:
            return 0
        self._replace_ledger(old, self._sum_of(old))  # exactly these: an entry written meanwhile stays as it is
        return len(old)

    def _replace_ledger(self, old: list[str], ledger: Ledger) -> None:
        """Write ``ledger`` as new entries, the part that counts the traces first, then remove the entries ``old`` one
        at a time: until the last is removed the traces are counted twice, so the ledger is not current (a step
        stopped midway leaves it so until ``migrate``; the embedded store, whose folds run unattended, names the
        entries a sum replaces instead: see its ``_replace_ledger``)."""
        parts = self._ledger_entry_of(ledger)
        self._write_batch(parts[-1:] + parts[:-1], bulk=False)  # the count first: the traces counted twice meanwhile
        for entry in old:
            self._delete_graph(entry)

    # --- listings: paged where a server caps the rows of an answer ------------------------------------------------

    page_rows: int | None = None
    """Rows per page of the listings (:meth:`trace_iris`, :meth:`graphs_with_several_traces`); ``None``: a listing is
    one query (a store that answers every row)."""

    all_graphs_pattern = "GRAPH ?g { }"
    """A pattern that binds ``?g`` to every named graph (pyoxigraph lists its graphs for an empty ``GRAPH`` pattern)."""

    def _select_page(self, sparql: str) -> tuple[list[dict[str, Any]], bool]:
        """The rows of one query and whether the store says it cut them (a server's row cap)."""
        return self.select(sparql)["results"]["bindings"], False

    def _graph_names(self, pattern: str) -> list[str]:
        """The distinct graph names ``?g`` that ``pattern`` binds, sorted. A store with :attr:`page_rows` is read page
        by page, each page the names after the last one read (``STR(?g) >``) in ``STR(?g)`` order, until a page
        comes back empty: a server that cuts an answer at fewer rows than asked, saying so or not, cannot drop a name."""
        if self.page_rows is None:
            rows, _ = self._select_page(f"SELECT DISTINCT ?g WHERE {{ {pattern} }}")
            return sorted({b["g"]["value"] for b in rows if b.get("g", {}).get("type") == "uri"})
        found: list[str] = []
        last: str | None = None
        while True:
            after = "" if last is None else f"FILTER(STR(?g) > {ox.Literal(last)})"
            rows, _ = self._select_page(
                f"SELECT ?g WHERE {{ {{ SELECT DISTINCT ?g WHERE {{ {pattern} }} }} {after} }} ORDER BY STR(?g) LIMIT {self.page_rows}"
            )
            names = [b["g"]["value"] for b in rows if b.get("g", {}).get("type") == "uri"]
            if not names:
                return sorted(set(found))
            found += names
            last = names[-1]

    def _graphs_holding_dspy_nodes(self, names: list[str]) -> list[str]:
        """Which of these graphs hold a node of a ``dspy:`` class."""
        found: list[str] = []
        for start in range(0, len(names), _VALUES_BATCH):
            batch = " ".join(f"<{name}>" for name in names[start:start + _VALUES_BATCH])
            found += self._graph_names(f"VALUES ?g {{ {batch} }} GRAPH ?g {{ ?node a ?class }} FILTER(STRSTARTS(STR(?class), \"{v.DSPY}\"))")
        return found

    def graph_names(self) -> list[str]:
        """Names of every named graph of the store, sorted: its traces, and any other graph (PROV-O views written
        beside them, a server's own graphs)."""
        return self._graph_names(self.all_graphs_pattern)

    def graphs_using(self, names: list[str], namespace: str) -> list[str]:
        """Which of these graphs hold a triple whose predicate, or whose class (``rdf:type``), is in ``namespace``."""
        prefix = ox.Literal(namespace)
        found: list[str] = []
        for start in range(0, len(names), _VALUES_BATCH):
            batch = " ".join(f"<{name}>" for name in names[start:start + _VALUES_BATCH])
            found += self._graph_names(
                f"VALUES ?g {{ {batch} }} GRAPH ?g {{ ?s ?p ?o }} "
                f"FILTER(STRSTARTS(STR(?p), {prefix}) || (?p = <{v.RDF_TYPE}> && isIRI(?o) && STRSTARTS(STR(?o), {prefix})))"
            )
        return sorted(found)

    def _graphs_with_trace_nodes(self) -> list[str]:
        """The named graphs that hold a ``dspy:Trace`` node, sorted."""
        return self._graph_names(f"GRAPH ?g {{ ?t a <{v.class_iri('Trace')}> }}")

    def _graphs_without_trace_nodes(self, with_trace_nodes: Iterable[str] | None = None) -> list[str]:
        """The named graphs that hold no ``dspy:Trace`` node (a server's own graphs, broken or hand-made traces):
        every graph less ``with_trace_nodes`` (listed here when not given). Two listings and a difference taken here:
        the same as one query with ``MINUS``, which Virtuoso 7 had not answered after 10 minutes at 37,500 traces,
        where the two listings take about 25 s."""
        holding = set(self._graphs_with_trace_nodes() if with_trace_nodes is None else with_trace_nodes)
        return [name for name in self._graph_names(self.all_graphs_pattern) if name not in holding]

    def missing_traces(self, iris: Iterable[str]) -> list[str]:
        """Those of ``iris`` (whole IRIs, :func:`check_trace_iri`) of which the store holds no trace graph, in order."""
        wanted = list(dict.fromkeys(check_trace_iri(iri) for iri in iris))
        stored: set[str] = set()
        for start in range(0, len(wanted), _LOOKUP_CHUNK):
            stored |= self._stored(wanted[start:start + _LOOKUP_CHUNK])
        return [iri for iri in wanted if iri not in stored]

    def trace_iris(self) -> list[str]:
        """Names of the graphs that hold traces, sorted: every graph with a node of a ``dspy:`` class (a trace is
        stored in the graph named by its IRI; a graph named otherwise, or holding a broken trace, is listed too, and
        a server's own graphs are not).

        Two cheap scans instead of one expensive one (the class of every node of the store, compared as text, took a
        minute at 100k LM calls): the graphs holding a ``dspy:Trace`` node, then, among the few graphs without one,
        those holding a node of another ``dspy:`` class."""
        found = set(self._graphs_with_trace_nodes())
        found.update(self._graphs_holding_dspy_nodes(self._graphs_without_trace_nodes(found)))
        return sorted(found)

    def traces(self, iris: list[str] | None = None) -> Iterator[tuple[str, m.Trace]]:
        """Read the store's traces back, one named graph at a time (so memory is bounded by the largest trace):
        ``(IRI, trace)`` pairs, of ``iris`` or of every trace (:meth:`trace_iris`)."""
        for iri in iris if iris is not None else self.trace_iris():
            buffer = io.BytesIO()
            self.dump(buffer, traces=[iri])
            yield from parse_traces(buffer.getvalue(), RdfFormat.N_QUADS, source=iri)

    def graphs_with_several_traces(self) -> list[str]:
        """Names of the graphs that hold more than one ``dspy:Trace`` node (not what ``export`` writes: loaded by other
        means), sorted."""
        return self._graph_names(
            f"{{ SELECT ?g WHERE {{ GRAPH ?g {{ ?trace a <{v.class_iri('Trace')}> }} }} GROUP BY ?g HAVING (COUNT(DISTINCT ?trace) > 1) }}"
        )

    def traces_with_outdated_facts(self) -> list[str]:
        """Names of the trace graphs whose trace was written with derived facts of an earlier version than
        :data:`~dspy_rdf.rdf.writer.DERIVED_FACTS_VERSION` (or none), sorted: :meth:`refresh` brings them up to date."""
        d = v.DSPY
        # one scan of each property grouped by graph (an OPTIONAL beside the type pattern is matched per trace)
        return self._graph_names(
            f"{{ SELECT ?g (MAX(?version) AS ?facts) WHERE {{ GRAPH ?g {{ {{ ?g a <{d}Trace> BIND(0 AS ?version) }} "
            f"UNION {{ ?g <{d}derived_facts_version> ?version }} }} }} GROUP BY ?g }} FILTER(?facts < {DERIVED_FACTS_VERSION})"
        )

    def refresh(self, traces: list[EncodedTrace]) -> list[tuple[str, str]]:
        """Write stored traces into their graphs again as this release writes them (``traces``: each encoded with
        its stored IRI and nothing redacted again), so that they gain the derived facts of this release, in one write
        of whole traces, all or nothing as :meth:`put` writes a batch; return the traces the store refused
        (``(iri, why)``), left as they were. A version of the derived facts only adds facts, so this adds the triples
        a graph lacks and keeps the others; the graph's old ``derived_facts_version`` is removed first, so that a
        trace carries one version (a stop in between leaves a trace without a version, which the next refresh
        finds). Write a few hundred traces at a time: one write per trace grows the embedded store's memory by
        about half a megabyte a trace. The traces gain triples the ledger's ``stats`` counts do not know: the
        ledger is not current (:data:`~dspy_rdf.store.ledger.STALE_COUNTS`) until ``migrate`` reads them again."""
        data = stale_counts_entry()
        self._write_batch([EncodedTrace(STALE_COUNTS, data, 1)], bulk=False)
        self._forget_derived_facts_version([item.iri for item in traces])
        return self._write_batch(traces, bulk=False)

    def traces_with_facts_version(self, version: int) -> list[str]:
        """Names of the trace graphs whose trace carries derived facts of exactly ``version``, sorted."""
        d = v.DSPY
        return self._graph_names(f"{{ SELECT ?g WHERE {{ GRAPH ?g {{ ?g <{d}derived_facts_version> ?version }} FILTER(?version = {int(version)}) }} }}")

    def add_facts_in_place(self, iris: list[str], update: str) -> None:
        """Run ``update``, a SPARQL Update over the trace graphs ``iris`` (its ``{graphs}`` replaced by their IRIs, for
        a ``VALUES ?g`` block) that adds derived facts computed from the graphs' own triples, without reading any
        trace back; as :meth:`refresh` does, the ledger's ``stats`` counts are marked not current first (the traces
        gain triples). The update may run again on a graph it ran on: it sends the graphs :attr:`_IN_PLACE_CHUNK`
        at a time."""
        self._write_batch([EncodedTrace(STALE_COUNTS, stale_counts_entry(), 1)], bulk=False)
        for start in range(0, len(iris), self._IN_PLACE_CHUNK):
            graphs = " ".join(f"<{check_trace_iri(iri)}>" for iri in iris[start:start + self._IN_PLACE_CHUNK])
            self._update_graphs(update.replace("{graphs}", graphs))

    _IN_PLACE_CHUNK = _VALUES_BATCH
    """Graphs an update of :meth:`add_facts_in_place` names: a server's ``VALUES`` block, as the other requests name them."""

    def _update_graphs(self, sparql: str) -> None:
        """Run a SPARQL Update over trace graphs (what :meth:`add_facts_in_place` does)."""
        raise StoreError(f"the store {self.location} cannot add a fact to a trace's graph: export the traces into a new store instead")

    def _forget_derived_facts_version(self, iris: list[str]) -> None:
        """Remove the ``derived_facts_version`` triple of these trace graphs (what :meth:`refresh` does first)."""
        raise StoreError(f"the store {self.location} cannot remove a fact from a trace's graph: export the traces into a new store instead")

    def stats(self, *, from_triples: bool = False) -> dict[str, Any]:
        """Counts over the trace graphs (:data:`STATS` says what each counts): the graphs :meth:`trace_iris` lists,
        never a server's own graphs. Tokens and cost are None (unknown) when no LM call reports them; ``to_migrate``
        counts the traces written by an earlier release (dspy-rdf 0.1.0's keys, or derived facts of an earlier
        :data:`~dspy_rdf.rdf.writer.DERIVED_FACTS_VERSION`), which ``dspy-rdf migrate`` brings to this release.

        While the ledger is current (:meth:`ledger_is_current`) the counts are its sums, a few rows, as the canned
        queries read it; else, or with ``from_triples``, they are read from every trace (a scan of each derived fact
        and of the graphs: 81 s on Virtuoso at a million LM calls, against 0.03 s). Both give the same counts (tests
        prove it), except that the ledger counts the triples of the traces it was given, not those of a graph holding
        a broken trace beside them (``validate`` reports such a graph)."""
        if not from_triples:
            counts = self._stats_from_ledger()
            if counts is not None:
                return counts
        return self._stats_from_triples()

    def _stats_from_ledger(self, *, covers: bool = False) -> dict[str, Any] | None:
        """:meth:`stats` from the ledger's ``stats`` rows; ``None`` when the ledger is not current (``covers``: the
        caller knows that it covers every trace, which is then not counted again)."""
        covered, outdated_ledger = self._ledger_state()
        traces = covered if covers else self._trace_count()
        if outdated_ledger or covered != traces:
            return None
        rows = self.select(STATS_QUERY)["results"]["bindings"]
        sums: dict[str, Decimal] = dict.fromkeys(STATS_COLUMNS, Decimal(0))
        outdated = Decimal(0)
        for row in rows:
            for name in STATS_COLUMNS:
                sums[name] += Decimal(row[name]["value"]) if name in row else Decimal(0)
            version = term_value(row.get("version"))  # a server may hand the integer back as a decimal
            if not isinstance(version, (int, float, Decimal)) or version < DERIVED_FACTS_VERSION:
                outdated += Decimal(row["traces"]["value"]) if "traces" in row else Decimal(0)
        if sums["traces"] != traces:
            return None
        counts: dict[str, Any] = {name: int(sums[name]) for name in STATS_COLUMNS if name != "cost"}
        counts["cost"] = float(sums["cost"])
        for name, known in _UNKNOWN_UNLESS.items():
            if counts[known] == 0:
                counts[name] = None
        counts["to_migrate"] = int(outdated)
        counts["ledger_uncounted"] = 0
        return {name: counts[name] for name in STATS}

    def traces_to_migrate(self, *, ledger_covers: bool | None = None) -> int:
        """The number of traces an earlier release wrote (derived facts of an earlier
        :data:`~dspy_rdf.rdf.writer.DERIVED_FACTS_VERSION`, or none), which the queries reading this release's derived
        facts miss until ``dspy-rdf migrate`` brings them up to date.

        Read from the ledger's ``stats`` rows (a few rows) when the ledger covers every trace, else counted over the
        triples (a scan of one fact: about 0.6 s at a million LM calls). Whether it covers them is checked as
        :meth:`ledger_is_current` checks it (a count of the traces: 0.15-0.25 s at a million LM calls, once per
        read-only embedded store), unless the caller knows: ``ledger_covers=True`` after
        :meth:`ledger_is_current` said so, ``False`` to count over the triples."""
        if ledger_covers is not False and (counts := self._stats_from_ledger(covers=bool(ledger_covers))) is not None:
            return int(counts["to_migrate"])
        d = v.DSPY
        if not self.select(f"ASK {{ GRAPH ?g {{ ?g a <{d}Trace> }} }}").get("boolean"):
            return 0
        query = (
            f"SELECT (COUNT(?t) AS ?traces) (SUM(IF(COALESCE(?facts, 0) >= {DERIVED_FACTS_VERSION}, 1, 0)) AS ?current) "
            f"WHERE {{ GRAPH ?g {{ {{ ?g a <{d}Trace> BIND(1 AS ?t) }} UNION {{ ?g <{d}derived_facts_version> ?facts }} }} }}"
        )
        row = self._one_row(query, "traces")
        return max(0, int(term_value(row.get("traces")) or 0) - int(term_value(row.get("current")) or 0))

    def _trace_count(self) -> int:
        """The number of ``dspy:Trace`` nodes, each in the graph it names (what the ledger's coverage is compared with)."""
        return int(self._one_row(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH ?g {{ ?g a <{v.class_iri('Trace')}> }} }}", "n")["n"]["value"])

    def _stats_from_triples(self, *, exact: bool = False, listings: bool = True, count_triples: bool = True) -> dict[str, Any]:
        """:meth:`stats` read from every trace (``exact``: the cost as the exact decimal sum, not a float). Without
        ``listings``, the triples are those of the graphs named by their trace node (one join, the ledger's count),
        not also those of graphs holding a broken trace: finding those takes a scan of the store grouped by graph
        (Virtuoso at 1M LM calls: 72 s, against 10 s for the rest). Without ``count_triples`` they are not counted (None)."""
        d = v.DSPY
        # One scan per derived fact (a UNION) rather than a join per trace: see the notes of the canned queries.
        sums = " ".join(f"(SUM(COALESCE(?{name}_v, 0)) AS ?{name})" for name in STATS_FACTS)
        scans = " ".join(f"UNION {{ ?g <{d}{fact}> ?{name}_v }}" for name, fact in STATS_FACTS.items())
        # traces written before digests, or before this release's derived facts: to migrate
        digests = f"UNION {{ ?g <{d}content_digest> ?digest }} UNION {{ ?g <{d}derived_facts_version> ?facts }}"
        current = f"(SUM(IF(COALESCE(?facts, 0) >= {DERIVED_FACTS_VERSION}, 1, 0)) AS ?current)"
        query = (
            f"SELECT (COUNT(?t) AS ?traces) (COUNT(?digest) AS ?digested) {current} {sums} "
            f"WHERE {{ GRAPH ?g {{ {{ ?g a <{d}Trace> BIND(1 AS ?t) }} {scans} {digests} }} }}"
        )
        row = self._one_row(query, "traces")
        counts: dict[str, Any] = {"traces": int(row["traces"]["value"]) if "traces" in row else 0}
        legacy = counts["traces"] - (int(row["digested"]["value"]) if "digested" in row else 0)
        outdated = counts["traces"] - (int(row["current"]["value"]) if "current" in row else 0)
        for name in STATS_FACTS:
            value = term_value(row.get(name))
            counts[name] = 0 if value is None else value if name == "cost" else int(value)
        for name, known in _UNKNOWN_UNLESS.items():
            if counts[known] == 0:
                counts[name] = None
        if counts["cost"] is not None and not exact:
            counts["cost"] = float(counts["cost"])
        triples: int | None
        if not count_triples:
            triples = None
        elif listings:
            # Triples of the trace graphs: those of every graph, less those of the graphs that hold no trace (usually
            # none; a server's own graphs), so that no scan joins each triple with its graph.
            triples = self._count_triples(None)
            others = self._graphs_without_trace_nodes()
            holding = set(self._graphs_holding_dspy_nodes(others))
            triples -= self._count_triples([name for name in others if name not in holding])
        else:
            triples = int(self._one_row(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH ?g {{ ?g a <{d}Trace> }} GRAPH ?g {{ ?s ?p ?o }} }}", "n")["n"]["value"])
        counts["triples"] = triples
        counts["to_migrate"] = max(legacy, outdated, 0)
        covered, outdated_ledger = self._ledger_state()  # an entry of another version: every trace is to count again
        counts["ledger_uncounted"] = counts["traces"] if outdated_ledger else abs(counts["traces"] - covered)
        return counts

    def _count_triples(self, graphs: list[str] | None) -> int:
        """The number of triples in these named graphs (all of them when ``None``)."""
        if graphs is None:
            return int(self._one_row("SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }", "n")["n"]["value"])
        total = 0
        for start in range(0, len(graphs), _VALUES_BATCH):
            batch = " ".join(f"<{name}>" for name in graphs[start:start + _VALUES_BATCH])
            total += int(self._one_row(f"SELECT (COUNT(*) AS ?n) WHERE {{ VALUES ?g {{ {batch} }} GRAPH ?g {{ ?s ?p ?o }} }}", "n")["n"]["value"])
        return total

    def _column(self, sparql: str, needed: str) -> list[str]:
        """The values of the variable ``needed`` in every row of a query; a :class:`StoreError` when a row lacks it
        (a server's answer of another shape)."""
        rows = self.select(sparql)["results"]["bindings"]
        values = [row.get(needed, {}).get("value") if isinstance(row, dict) else None for row in rows]
        if not all(isinstance(value, str) for value in values):
            raise StoreError(f"the store {self.location} answered with a row without ?{needed}: not a SPARQL store this can use")
        return values  # type: ignore[return-value]

    def _one_row(self, sparql: str, needed: str) -> dict[str, Any]:
        """The one row of an aggregate query, holding the variable ``needed`` as an integer; a :class:`StoreError`
        saying what the store answered instead (a server's answer of another shape)."""
        rows = self.select(sparql)["results"]["bindings"]
        value = rows[0].get(needed, {}).get("value") if len(rows) == 1 and isinstance(rows[0], dict) else None
        if not isinstance(value, str) or not value.lstrip("-").isdigit():
            raise StoreError(f"the store {self.location} answered a count with {len(rows)} row(s) and no integer ?{needed}: not a SPARQL store this can use")
        return rows[0]


def term_json(term: ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple) -> dict[str, str]:
    """One RDF term as a SPARQL 1.1 JSON results term (``xsd:string`` literals without a datatype)."""
    if isinstance(term, ox.NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, ox.BlankNode):
        return {"type": "bnode", "value": term.value}
    if isinstance(term, ox.Literal):
        out = {"type": "literal", "value": term.value}
        if term.language:
            out["xml:lang"] = term.language
        elif term.datatype.value != v.XSD_STRING:
            out["datatype"] = term.datatype.value
        return out
    raise ValueError(f"unsupported RDF term in a query result: {term!r}")


_DECIMAL_PREDICATES = frozenset(v.slot_iri(slot) for slot in v.DECIMAL_SLOTS)
_XSD_INTEGER = ox.NamedNode(v.XSD_INTEGER)
_XSD_DECIMAL = ox.NamedNode(v.XSD_DECIMAL)


def mapped_number(predicate: Any, term: Any) -> Any:
    """An integral number in the datatype the mapping wrote it in, which the server may have changed (Virtuoso 7
    keeps ``"2"^^xsd:decimal`` as an integer, and an integer beyond 32 bits read from N-Triples as a decimal): the
    mapping writes ``xsd:decimal`` for the :data:`~dspy_rdf.rdf.vocab.DECIMAL_SLOTS` only, integers everywhere else.
    ``predicate`` is the term of the property whose value ``term`` is."""
    if not isinstance(term, ox.Literal) or term.datatype not in (_XSD_INTEGER, _XSD_DECIMAL):
        return term
    wanted = _XSD_DECIMAL if predicate.value in _DECIMAL_PREDICATES else _XSD_INTEGER
    if term.datatype == wanted or "." in term.value.rstrip("0").rstrip(".") and wanted == _XSD_INTEGER:
        return term
    return ox.Literal(term.value.split(".")[0] if wanted == _XSD_INTEGER else term.value, datatype=wanted)


def term_from_json(term: dict[str, str] | None) -> ox.NamedNode | ox.BlankNode | ox.Literal | None:
    """One SPARQL 1.1 JSON results term as a pyoxigraph term (``None`` for an unbound variable)."""
    if term is None:
        return None
    kind = term["type"]
    if kind == "uri":
        return ox.NamedNode(term["value"])
    if kind == "bnode":
        return ox.BlankNode(term["value"])
    if "xml:lang" in term:
        return ox.Literal(term["value"], language=term["xml:lang"])
    if "datatype" in term:
        return ox.Literal(term["value"], datatype=ox.NamedNode(term["datatype"]))
    return ox.Literal(term["value"])


_NUMERIC = {v.XSD_INTEGER: int, "http://www.w3.org/2001/XMLSchema#decimal": float, v.XSD_DOUBLE: float}


def term_value(term: dict[str, str] | None) -> Any:
    """A Python value for one SPARQL JSON result term: numbers and booleans typed, everything else its text."""
    if term is None:
        return None
    datatype = term.get("datatype")
    if datatype in _NUMERIC:
        return _NUMERIC[datatype](term["value"])
    if datatype == v.XSD_BOOLEAN:
        return term["value"] in ("true", "1")
    return term["value"]
