"""Spooled span exports -> program runs in the store, as ``export --from otlp`` would write them.

One thread takes the exports in spool order, their spans as the receiver read them, gathers each trace's spans
(:class:`~dspy_rdf.sources.otlp.OtlpAssembly`), and builds a trace once its root span has come and its spans have
stopped coming for ``grace`` seconds (exports of many processes interleave, so, unlike in a file, how many came since
says nothing); a trace whose root never comes is built as it is after ``orphan`` seconds, as the end of a file would.

Making the traces of the spans gathered, redacting and encoding them (nearly all the work) happens in worker
processes, which get the spans (they pickle small) and give back N-Quads, so that the other cores do it while this
process reads requests, gathers spans and commits (``bench/bench_serve.py`` measures it against ``export`` of the same
spans from a file; the store's commits, here as there, are what limits). Batches are small, so that every worker has
some and the last commit is short; a commit takes the batches that follow, waiting for those being built, up to about
as many triples as a batch of ``export`` holds, and stores them as one batch of the store (in the embedded store one
bulk load: RocksDB compacts the files of each, and smaller or split commits made it compact twice what ``export``
does). Traces are committed in the order they were gathered.
After each commit, the spool's checkpoint moves to the first record of the traces not yet in the store (gathering, or
built and not committed), so a restart reads again exactly what is not stored. A store that fails (a server down, a
full disk) is retried with the same traces; the spool holds everything meanwhile.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.identity import DEFAULT_BASE
from dspy_rdf.service.receiver import ReadSpan
from dspy_rdf.service.spool import Spool
from dspy_rdf.sources.base import Read
from dspy_rdf.sources.otlp import GatheredTrace, LateSpansError, OtlpAssembly
from dspy_rdf.store.base import EncodedTrace, TraceStore, encode_traces

__all__ = ["BuilderCounts", "TraceBuilder"]

_TICK = 0.2  # seconds between looks for traces whose spans stopped coming
_RETRY = 1.0  # seconds before a put the store failed is tried again
_IN_FLIGHT = 16  # batches of gathered traces being built or waiting for the store, at most
_RECORDS_PER_BATCH = 256  # spooled exports taken in at once
_COMMIT_TRIPLES = 100_000  # a commit takes batches up to this many triples (as export), waiting for any being built
_TRACES_PER_BATCH = 64  # traces built by a worker at once: small enough that every worker has some, and the last
# commit is short


def _worker_start() -> None:
    """In a worker process: leave Ctrl-C and SIGTERM to the server (which stops the pool), and end with it if it
    is killed (Linux: the parent's death signal), so that no worker outlives the server holding its files."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: a worker of a killed server ends when its pipe closes
        pass


Built = EncodedTrace | str | None
"""A gathered trace as a worker gives it back: encoded, why it cannot be stored, or None for a repeat of one before it."""


def _built(gathered: list[GatheredTrace], base: str) -> list[Built]:
    """Make, redact and encode the traces of gathered spans (in a worker process), each as :data:`Built`."""
    out: list[Built] = []
    seen: set[str] = set()
    for item in gathered:
        where = f"spool record {item.line}: " if item.line is not None else ""  # as item.read() names it
        try:
            read = item.read()
            if read.trace is None:
                out.append(where + str(read.error).split("\n")[0])
                continue
            encoded = next(iter(encode_traces([read.trace], base=base)))
        except Exception as exc:  # noqa: BLE001 - a fault of this code on one trace must not stop the receiver
            # its type only: the message of an unexpected error may quote the trace's text before redaction
            out.append(f"{where}a trace was not stored: dspy-rdf failed on it ({type(exc).__name__}); please report it")
            continue
        if isinstance(encoded, EncodedTrace):
            out.append(None if encoded.iri in seen else encoded)
            seen.add(encoded.iri)
        else:
            out.append(f"{where}a trace was not stored: {encoded[1]}")
    return out


def _triples(built: Iterable[Built]) -> int:
    """The triples of the encoded traces among ``built``."""
    return sum(item.triples for item in built if isinstance(item, EncodedTrace))


@dataclass
class _Batch:
    """Traces gathered together, on their way to the store: the worker's answer, and the first spool record they need."""

    gathered: list[GatheredTrace]
    building: Future[list[Built]] | None
    first_record: int


@dataclass
class BuilderCounts:
    """What the builder has done since it started: traces written, already stored (read again after a restart, or
    sent twice), not readable or refused by the store (with the latest reasons), and traces still gathering."""

    written: int = 0
    already_stored: int = 0
    failed: int = 0
    late_spans: int = 0
    repeated_spans: int = 0
    gathering: int = 0
    store_errors: int = 0
    recent_errors: deque[str] = field(default_factory=lambda: deque(maxlen=20))


class TraceBuilder:
    """The thread that turns spooled exports into stored program runs (see the module docstring). ``workers`` is
    the number of worker processes that build, redact and encode traces (0: the committer thread does it); by default
    one per core, at most four (past that the store's commits, in this process, are what limits)."""

    def __init__(
        self,
        store: TraceStore,
        spool: Spool,
        *,
        grace: float = 2.0,
        orphan: float = 600.0,
        base: str = DEFAULT_BASE,
        workers: int | None = None,
        log: Callable[[str], None] = lambda message: None,
    ) -> None:
        self.store = store
        self.spool = spool
        self.grace = grace
        self.orphan = orphan
        self.base = base
        self.workers = min(4, os.cpu_count() or 1) if workers is None else workers
        self.log = log
        self.counts = BuilderCounts()
        self._assembly = OtlpAssembly(live=True)
        self._queue: queue.Queue[tuple[int, list[ReadSpan]] | None] = queue.Queue()
        self._last_record = spool.checkpoint - 1  # the last record taken into the assembly
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dspy-rdf trace builder", daemon=True)
        self._idle = threading.Condition()
        self._busy = 0  # records submitted and not yet taken in
        self._batches: deque[_Batch] = deque()  # built, not yet committed, in build order
        self._pool: ProcessPoolExecutor | None = None
        # Commits run in a thread of their own, so that building the next traces overlaps committing these (the
        # store's writes run outside the GIL); the builder waits only when too many batches are waiting.
        self._committer = threading.Thread(target=self._commit_batches, name="dspy-rdf trace committer", daemon=True)
        self._batch_ready = threading.Condition()
        self._oldest_gathering: int | None = None  # the first record of the traces still gathering
        self._gave_up = False  # stopping while the store kept failing
        self._done_building = False
        self._stored_spans_in: dict[str, tuple[int, int]] = {}  # stored traces: their first and last spool records

    def start(self) -> None:
        """Start the worker process and the thread (call it before starting other threads: see below)."""
        if self.workers > 0:
            # Forked, and at once (a first job waited for), before this process starts threads of its own (the
            # builder's, the HTTP server's): a spawned process would import the program's main module again, which a
            # script without a ``__main__`` guard would run a second time.
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"), initializer=_worker_start)
            try:
                self._pool.submit(int).result(timeout=60)
            except Exception as exc:  # noqa: BLE001 - no worker process here: this thread encodes
                self._error(f"no worker process ({type(exc).__name__}: {exc}); building traces here")
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
        self._thread.start()
        self._committer.start()

    def already_stored(self, trace_ids: set[str]) -> None:
        """Tell the builder, before it starts, which traces of the spool the store holds already (see
        :meth:`~dspy_rdf.sources.otlp.OtlpAssembly.already_stored`)."""
        self._assembly.already_stored(trace_ids)

    def submit(self, record: int, spans: list[ReadSpan]) -> None:
        """Take the spans of one spooled export (in record order)."""
        with self._idle:
            self._busy += 1
        self._queue.put((record, spans))

    def stop(self, timeout: float = 60.0) -> None:
        """Stop after the exports already submitted are taken in and the traces built are stored; traces still
        gathering stay in the spool for the next start."""
        self._stopping.set()
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout)
        with self._batch_ready:
            self._batch_ready.notify_all()
        if self._committer.is_alive():
            self._committer.join(timeout)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def wait_idle(self, timeout: float | None = None, *, settled: bool = False) -> bool:
        """Wait until every export submitted has been taken in and the traces it completed are stored, and, if
        ``settled``, until no trace is still gathering (each waits out its grace); True when that happened within
        ``timeout``."""
        with self._idle:
            return self._idle.wait_for(
                lambda: self._busy == 0 and not self._batches and (not settled or self.counts.gathering == 0), timeout
            )

    # --- the thread ---------------------------------------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        while not stopping:
            taken: list[tuple[int, list[ReadSpan]]] = []
            try:
                item = self._queue.get(timeout=_TICK)
                while True:
                    if item is None:
                        stopping = True
                        break
                    taken.append(item)
                    if len(taken) >= _RECORDS_PER_BATCH:
                        break
                    item = self._queue.get_nowait()
            except queue.Empty:
                pass
            reads: list[Read] = []
            gathered: list[GatheredTrace] = []
            for record, spans in taken:
                reads += self._guarded(lambda: list(self._assembly.add_spans(spans, record)))
            if not stopping:
                gathered = self._assembly.idle_gathered(self.grace, self.orphan)
            with self._batch_ready:
                if taken:
                    self._last_record = taken[-1][0]
                self._count(reads)
                self._build(gathered)
                self._oldest_gathering = self._assembly.oldest_line()
                self.counts.gathering = self._assembly.waiting
                self.counts.repeated_spans = self._assembly.repeated_spans
                self._batch_ready.notify_all()
                # too many batches waiting for the store: wait for it rather than hold them all in memory
                self._batch_ready.wait_for(lambda: len(self._batches) <= _IN_FLIGHT or self._gave_up)
            if not self._batches:
                self._advance()
            with self._idle:
                self._busy -= len(taken)
                self._idle.notify_all()
        with self._batch_ready:
            self._done_building = True
            self._batch_ready.notify_all()

    def _guarded(self, read: Callable[[], list[Read]]) -> list[Read]:
        try:
            return read()
        except (ValueError, TypeError, OverflowError, KeyError, AttributeError, RecursionError) as exc:
            if isinstance(exc, TraceInputError):
                return [Read(error=exc)]
            what = "nested too deeply" if isinstance(exc, RecursionError) else f"{type(exc).__name__}: {str(exc)[:200]}"
            return [Read(error=TraceInputError(f"an export could not be read ({what})"))]

    def _count(self, reads: list[Read]) -> None:
        """Count and name what the assembly refused: late spans, and exports it could not read."""
        for read in reads:
            if isinstance(read.error, LateSpansError):
                self.counts.late_spans += read.error.spans
                self._error(str(read.error).split("\n")[0])
                # its late spans are in the spool too: read again after a restart, they must not become a trace
                # of their own (-1: the trace began before any record this knows of)
                line = read.error.line if read.error.line is not None else self._last_record + 1
                first, last = self._stored_spans_in.get(read.error.trace_id, (-1, line))
                self._stored_spans_in[read.error.trace_id] = (first, max(last, line))
            elif read.error is not None:
                self.counts.failed += 1
                where = f"spool record {read.line}: " if read.line is not None else ""
                self._error(where + str(read.error).split("\n")[0])

    def _build(self, gathered: list[GatheredTrace]) -> None:
        """Hand the traces gathered to the worker processes, in batches."""
        for start in range(0, len(gathered), _TRACES_PER_BATCH):
            batch = gathered[start:start + _TRACES_PER_BATCH]
            building = None
            if self._pool is not None:
                try:
                    building = self._pool.submit(_built, batch, self.base)
                except RuntimeError as exc:  # a worker process died (BrokenProcessPool): the committer builds from now on
                    self._error(f"the worker processes stopped ({exc}); building here")
                    self._pool = None
            first = min(g.first_line if g.first_line is not None else self._last_record + 1 for g in batch)
            self._batches.append(_Batch(batch, building, first))

    def _commit_batches(self) -> None:
        """The committer thread: store the batches in the order gathered, each once it is built, those that follow
        with it up to :data:`_COMMIT_TRIPLES` (one batch of the store: fewer, larger commits keep up with a fast sender
        and leave RocksDB less to compact)."""
        while True:
            with self._batch_ready:
                self._batch_ready.wait_for(lambda: bool(self._batches) or self._done_building)
                if not self._batches:
                    return
                head = self._batches[0]
            taken = [(head, self._built_of(head))]
            with self._batch_ready:
                following = list(self._batches)[1:]
            triples = _triples(taken[0][1])
            for batch in following:  # the next batches, up to a commit's size, waiting for those being built
                if triples >= _COMMIT_TRIPLES:
                    break
                taken.append((batch, self._built_of(batch)))
                triples += _triples(taken[-1][1])
            encoded: list[EncodedTrace] = []
            spans_in: dict[str, tuple[int, int]] = {}  # input trace id -> the first and last spool records of its spans
            for batch, builts in taken:
                for gathered, built in zip(batch.gathered, builts, strict=True):
                    if isinstance(built, EncodedTrace):
                        encoded.append(built)
                        first = gathered.first_line if gathered.first_line is not None else batch.first_record
                        spans_in[gathered.trace_id] = (first, gathered.line if gathered.line is not None else first)
                    elif built is not None:
                        self.counts.failed += 1
                        self._error(built)
            if not self._put(encoded):
                with self._batch_ready:
                    self._gave_up = True  # stopping while the store fails: the checkpoint stays before these traces
                    self._batch_ready.notify_all()
                return
            with self._batch_ready:
                for _ in taken:
                    self._batches.popleft()
                for trace_id, (first, last) in spans_in.items():
                    known = self._stored_spans_in.get(trace_id, (first, last))
                    self._stored_spans_in[trace_id] = (min(known[0], first), max(known[1], last))
                self._batch_ready.notify_all()
            self._advance()
            with self._idle:
                self._idle.notify_all()

    def _built_of(self, batch: _Batch) -> list[Built]:
        """A batch's traces as a worker built them (waiting for it), or built here when the workers failed."""
        try:
            if batch.building is not None:
                return batch.building.result()
        except Exception as exc:  # noqa: BLE001 - a worker died or failed: build here
            # its type only: an error the worker met may quote a trace's text before redaction
            self._error(f"a worker process failed ({type(exc).__name__}); building here")
            self._pool = None
        return _built(batch.gathered, self.base)

    def _advance(self) -> None:
        """Move the spool's checkpoint to the first record a trace not yet stored needs, naming the stored traces
        that have spans from there on (read again after a restart, their spans are left out)."""
        with self._batch_ready:
            needed = [line for line in (self._oldest_gathering, *(b.first_record for b in self._batches)) if line is not None]
            checkpoint = min(needed) if needed else self._last_record + 1
            # stored traces whose spans end before the checkpoint will never be read again
            self._stored_spans_in = {t: (f, last) for t, (f, last) in self._stored_spans_in.items() if last >= checkpoint}
            straddling = [t for t, (first, _) in self._stored_spans_in.items() if first < checkpoint]
        try:
            self.spool.advance(checkpoint, straddling)
        except OSError as exc:
            self._error(f"the spool checkpoint could not be written: {exc}")

    def _put(self, encoded: list[EncodedTrace]) -> bool:
        """Put encoded traces, trying again while the store fails; False when asked to stop before it took them."""
        while True:
            try:
                # one batch, as gathered (the ramp of put's batches, meant for a long export, split each commit)
                size = _triples(encoded)
                report = self.store.put(encoded, base=self.base, batch_triples=size, first_batch_triples=size)
            except OSError as exc:  # the store (disk, server): the spool holds the spans, so try again
                self.counts.store_errors += 1
                self._error(f"the store failed, retrying in {_RETRY:g} s: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
                if self._stopping.wait(_RETRY):
                    return False
                continue
            self.counts.written += len(report.written)
            self.counts.already_stored += len(report.already_stored)
            for iri, why in report.failed:
                self.counts.failed += 1
                self._error(f"{iri or 'a trace'} was not stored: {why}")
            return True

    def _error(self, message: str) -> None:
        self.counts.recent_errors.append(message)
        self.log(message)
