"""The embedded store: a persistent pyoxigraph (RocksDB) store in a directory, one named graph per trace.

Writes go in batches of whole traces, each written all or nothing: small batches as one pyoxigraph transaction
(``Store.load``), large ones with pyoxigraph's bulk loader, which since pyoxigraph 0.5 is atomic too (it writes the
batch's index files first, then ingests them into RocksDB in one step that a crash cannot split) and skips the
write-ahead log and memtables that make transactions on disk about three times slower. A trace that is already
stored is not written again (trace IRIs are content hashes: the stored graph holds the same trace), so a reader sees
no trace or the whole trace, never a part of one. ``bulk=True`` uses the bulk loader for every batch, however small.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import pyoxigraph as ox

from dspy_rdf.rdf import vocab as v
from dspy_rdf.store.base import EncodedTrace, SparqlEngine, SparqlJson, StoreError, StoreLockedError, TraceStore, check_trace_iri, failed_query_message, term_json
from dspy_rdf.store.ledger import LEDGER, Ledger
from dspy_rdf.store.locks import ReadWriteLock

__all__ = ["EmbeddedStore"]


_REMOVALS_PER_FLUSH = 8
"""Entries of the ledger removed by a fold between two flushes of RocksDB's memtables (an entry of a large batch holds
about 12,000 quads: a fold of 90 entries without flushes raised resident memory by 300 MB)."""

_BULK_MIN_TRIPLES = 5_000
"""Embedded batches this large go through the bulk loader; smaller ones are a transaction, which writes no files."""


def _malloc_trim() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing elsewhere).

    The bulk loader's threads allocate in several of glibc's malloc arenas, and pages freed there stay in the
    process: resident memory then grew with every batch of an export (+30% for 10x the input), though nothing
    held them. Trimmed after each bulk batch, it stays within +20% (docs/benchmarks.md)."""
    if _LIBC_TRIM is not None:
        _LIBC_TRIM(0)


def _libc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


_LIBC_TRIM = _libc_trim()


def writing_process(path: Path) -> int | None:
    """The process id of a process that has the store at ``path`` open for writing, read from ``/proc/locks`` (the
    write lock RocksDB holds on the store's ``LOCK`` file), or None (none, or not on Linux).

    Testing the lock with ``fcntl`` would open the ``LOCK`` file, and closing it would drop every lock this process
    holds on it, including that of a store it has open for writing: ``/proc/locks`` is only read."""
    try:
        info = (path / "LOCK").stat()
        locks = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    for line in locks.splitlines():
        # "1: POSIX  ADVISORY  WRITE 12345 fe:00:1234567 0 EOF"; a blocked request reads "1: -> POSIX ..."
        fields = line.split()
        if len(fields) >= 6 and fields[1] in ("POSIX", "OFDLCK", "FLOCK") and fields[3] == "WRITE" and fields[5] == device:
            return int(fields[4]) if fields[4].isdigit() else -1
    return None


class EmbeddedStore(TraceStore):
    """A persistent pyoxigraph store in a directory (created if missing, unless ``create=False``).

    ``read_only=True`` opens it for queries only; several processes may read it at once. A store that a process
    (this one included) has open for writing cannot be read meanwhile: pyoxigraph's read-only mode does not support
    a concurrent writer, so :class:`StoreLockedError` says which process to wait for.
    """

    fold_names_replaced = True  # see _replace_entries
    concurrent_queries = True  # see ReadWriteLock
    writer_threads = 1  # one bulk load at a time: two at once hold twice the memory for no measurable gain

    def __init__(self, path: str | Path, *, read_only: bool = False, create: bool = True) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"{self.path} is a file, not a store directory")
        if self.path.is_dir() and not (self.path / "CURRENT").is_file() and any(self.path.iterdir()):
            # Never turn a directory of other files into a store (nor read one as a store).
            raise StoreError(f"{self.path} is not a dspy-rdf store (it holds other files); give a new or empty directory")
        try:
            if (read_only or not create) and (not self.path.is_dir() or not (self.path / "CURRENT").is_file()):
                raise StoreError(f"no store at {self.path} (export traces into it first)")
            if read_only:
                writer = writing_process(self.path)
                if writer is not None:
                    raise StoreLockedError(
                        f"the store at {self.path} is being written by process {writer} (an export?); it can be read once "
                        "that is done (pyoxigraph cannot read a store that another process is writing)"
                    )
                self._store = ox.Store.read_only(str(self.path))
            else:
                self.path.mkdir(parents=True, exist_ok=True)
                self._store = ox.Store(str(self.path))
        except RuntimeError as exc:  # RocksDB: e.g. a store another process is still creating, or not a store
            raise StoreError(f"cannot open the store at {self.path}: {exc} (is it still being created, or not a dspy-rdf store?)") from None
        except OSError as exc:
            if isinstance(exc, StoreError):
                raise
            if "lock" in str(exc).lower():
                raise StoreLockedError(
                    f"the store at {self.path} is locked: it is open for writing in another process (another dspy-rdf export?); wait for it to finish"
                ) from None
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from None
        self.read_only = read_only
        self._read_only_trace_count: int | None = None
        # A fold is several transactions (see _replace_ledger): queries wait for one under way, so that none reads the
        # ledger halfway (a fold runs in the thread of a write, a query in any other); queries run beside each other.
        self._ledger_lock = ReadWriteLock()
        if not read_only:
            # Index files of a bulk batch that a killed export built but never ingested: never part of the store,
            # only disk space. Holding the write lock, no other process can be building such files now.
            for leftover in self.path.glob("bulk-*.sst"):
                if leftover.name[5:-4].isdigit():  # pyoxigraph names them bulk-<random u128>.sst
                    leftover.unlink(missing_ok=True)

    def __getattr__(self, name: str) -> object:
        if name == "_store":  # only looked up here once close() removed it
            raise StoreError(f"the store at {self.path} is closed")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def oxigraph(self) -> ox.Store:
        """The underlying :class:`pyoxigraph.Store`."""
        return self._store

    def _write_batch(self, batch: list[EncodedTrace], *, bulk: bool) -> list[tuple[str, str]]:
        data = b"".join(item.data for item in batch)
        try:
            # Both are all or nothing for the batch (see the module docstring). lenient: skip re-validating IRIs and
            # language tags, which the writer already validated (parsing twice as fast).
            if bulk or sum(item.triples for item in batch) >= _BULK_MIN_TRIPLES:
                self._store.bulk_load(data, ox.RdfFormat.N_QUADS, lenient=True)
                del data
                _malloc_trim()
            else:
                self._store.load(data, ox.RdfFormat.N_QUADS, lenient=True)
        except OSError as exc:
            raise StoreError(f"writing to the store at {self.path} failed: {exc}") from None
        if batch and batch[-1].iri.startswith(LEDGER):
            self._ledger_entry_written()
        return []  # pyoxigraph keeps every term the writer writes

    def _stored(self, iris: list[str]) -> set[str]:
        return {iri for iri in iris if self._store.contains_named_graph(ox.NamedNode(iri))}

    def select(self, sparql: str, *, limit: int | None = None, deadline: float | None = None) -> SparqlJson:
        """Run a SPARQL query with pyoxigraph; return SPARQL 1.1 JSON results (at most ``limit`` rows; TimeoutError
        when rows are still coming at ``deadline``, a ``time.monotonic()`` value: see :meth:`TraceStore.select`).

        A query pyoxigraph cannot run (bad syntax, a function it does not have) is a ``ValueError``; one that fails
        while it runs (a ``SERVICE`` endpoint that cannot be reached, the disk) is a :class:`StoreError`."""
        with self._ledger_lock.reading():
            return self._select(sparql, limit=limit, deadline=deadline)

    def _select(self, sparql: str, *, limit: int | None, deadline: float | None) -> SparqlJson:
        try:
            result = self._store.query(sparql)
            if isinstance(result, ox.QueryBoolean):
                return {"head": {}, "boolean": bool(result)}
            if not isinstance(result, ox.QuerySolutions):
                raise ValueError("expected a SELECT or ASK query, got a CONSTRUCT or DESCRIBE query")
            names = [var.value for var in result.variables]
            bindings: list[dict[str, Any]] = []
            for solution in result:
                if limit is not None and len(bindings) >= limit:
                    break
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError("the query was still making rows at its deadline")
                bindings.append({name: term_json(term) for name in names if (term := solution[name]) is not None})
        except SyntaxError as exc:
            raise ValueError(f"not a valid SPARQL query: {exc}") from None
        except RuntimeError as exc:  # pyoxigraph's evaluation errors, e.g. "The custom function <...> is not supported"
            raise ValueError(f"the query cannot be run on the embedded store: {exc}") from None
        except (StoreError, TimeoutError):
            raise
        except OSError as exc:  # a SERVICE call that failed, or the store's files
            raise StoreError(failed_query_message(sparql, str(exc), f"on the store at {self.path}")) from None
        return {"head": {"vars": names}, "results": {"bindings": bindings}}

    def construct(self, sparql: str) -> bytes:
        """Run a SPARQL CONSTRUCT query with pyoxigraph; return N-Triples."""
        with self._ledger_lock.reading():
            return self._construct(sparql)

    def _construct(self, sparql: str) -> bytes:
        try:
            result = self._store.query(sparql)
            if not isinstance(result, ox.QueryTriples):
                raise ValueError("expected a CONSTRUCT or DESCRIBE query")
            return ox.serialize(result, format=ox.RdfFormat.N_TRIPLES) or b""
        except SyntaxError as exc:
            raise ValueError(f"not a valid SPARQL query: {exc}") from None
        except RuntimeError as exc:
            raise ValueError(f"the query cannot be run on the embedded store: {exc}") from None
        except StoreError:
            raise
        except OSError as exc:
            raise StoreError(failed_query_message(sparql, str(exc), f"on the store at {self.path}")) from None

    _IN_PLACE_CHUNK = 5_000  # no request to size: an update is held in memory, one over 375,000 traces peaked at 2 GB

    def _trace_count(self) -> int:
        # A store opened read-only sees the data as it was when opened: its traces are counted once (a query then
        # checks the ledger's coverage without counting again, 0.15-0.25 s at a million LM calls)
        if not self.read_only:
            return super()._trace_count()
        if self._read_only_trace_count is None:
            self._read_only_trace_count = super()._trace_count()
        return self._read_only_trace_count

    def _update_graphs(self, sparql: str) -> None:
        try:
            self._store.update(sparql)
        except OSError as exc:
            raise StoreError(f"could not update the store at {self.path}: {exc}") from None
        self._release_write_buffers()  # each update fills the memtables, which RocksDB lets grow to its own limit

    def _forget_derived_facts_version(self, iris: list[str]) -> None:
        version = ox.NamedNode(v.slot_iri("derived_facts_version"))
        for iri in iris:
            graph = ox.NamedNode(iri)
            for quad in list(self._store.quads_for_pattern(graph, version, None, graph)):
                self._store.remove(quad)

    def _delete_graph(self, iri: str) -> bool:
        graph = ox.NamedNode(check_trace_iri(iri))
        if not self._store.contains_named_graph(graph):
            return False
        self._store.remove_graph(graph)
        return True

    def _delete_with_entry(self, iri: str, removed: Ledger) -> bool:
        if not self._store.contains_named_graph(ox.NamedNode(check_trace_iri(iri))):
            return False
        self._update([iri], removed)
        return True

    def fold_ledger(self) -> int:
        """See :meth:`TraceStore.fold_ledger`; queries wait while it runs."""
        with self._ledger_lock.writing():
            return super().fold_ledger()

    def _replace_ledger(self, old: list[str], ledger: Ledger) -> None:
        with self._ledger_lock.writing():
            self._replace_entries(old, ledger)

    def _replace_entries(self, old: list[str], ledger: Ledger) -> None:
        # Not one transaction: pyoxigraph holds a transaction's every change in memory, and the entries of a large
        # export hold a row per tool and duration bucket (an export of 100k LM calls peaked at 0.7 GB folding them in
        # one). The sum names the entries it replaces, which the ledger's readers then leave out (REPLACED).
        graph, data = ledger.nquads(replaces=old)
        try:
            self._store.load(data, ox.RdfFormat.N_QUADS, lenient=True)  # a few rows per key: no bulk loader's buffers
            for n, entry in enumerate(old, 1):
                self._store.remove_graph(ox.NamedNode(entry))
                if n % _REMOVALS_PER_FLUSH == 0:  # each removal leaves a tombstone per quad and index in a memtable
                    self._release_write_buffers()
        except OSError as exc:
            raise StoreError(f"writing to the store at {self.path} failed: {exc}") from None
        self._release_write_buffers()

    def _release_write_buffers(self) -> None:
        """Write RocksDB's memtables to files and hand their memory back. Bulk loads bypass them, but every other
        write (a fold, a removal, a small batch) fills one per index, and each grows until RocksDB's own limit before it
        is written out (docs/benchmarks.md: an export of 1M LM calls peaks at 0.9 GB with this during and after
        every fold, 1.02 GB when a fold was one transaction and nothing flushed)."""
        try:
            self._store.flush()
        except OSError as exc:
            raise StoreError(f"flushing the store at {self.path} failed: {exc}") from None
        _malloc_trim()

    def _update(self, drop: list[str], entry: Ledger) -> None:
        """Remove the graphs ``drop`` and write the ledger entry ``entry`` in one transaction."""
        steps = [f"DROP SILENT GRAPH <{name}>" for name in drop]
        if entry:
            graph, data = entry.nquads(quads=False)
            steps.append(f"INSERT DATA {{ GRAPH <{graph}> {{ {data.decode('utf-8')} }} }}")
        try:
            self._store.update(" ;\n".join(steps))
        except OSError as exc:
            raise StoreError(f"writing to the store at {self.path} failed: {exc}") from None

    def dump(self, handle: BinaryIO, *, traces: list[str] | None = None, trig: bool = False) -> int:
        fmt = ox.RdfFormat.TRIG if trig else ox.RdfFormat.N_QUADS
        names = traces if traces is not None else self.trace_iris()
        missing = self.missing_traces(names) if traces is not None else []
        if missing:  # every trace checked before anything is written
            raise StoreError(f"no trace {missing[0]} in the store at {self.path}")
        for iri in names:
            graph = ox.NamedNode(iri)
            quads = self._store.quads_for_pattern(None, None, None, graph)
            handle.write(ox.serialize(quads, format=fmt, prefixes=v.PREFIXES if trig else None) or b"")
        return len(names)

    @property
    def sparql_engine(self) -> SparqlEngine:
        return SparqlEngine.OXIGRAPH

    def optimize(self) -> None:
        """Compact the store's files (RocksDB compaction). Worth it after large loads, above all ``bulk`` ones: on
        100k LM calls it made canned queries 2 to 5 times faster (``docs/benchmarks.md``)."""
        self.fold_ledger()  # its rows are read by every query over the ledger: one entry instead of one per batch
        try:
            self._store.optimize()
        except OSError as exc:
            raise StoreError(f"optimizing the store at {self.path} failed: {exc}") from None

    def close(self) -> None:
        """Flush what is in memory to the store's files and release the store (a second close does nothing)."""
        store = self.__dict__.pop("_store", None)
        if store is None:
            return
        self._stop_commit_threads()
        try:
            if not self.read_only:
                store.flush()
        except OSError as exc:
            raise StoreError(f"flushing the store at {self.path} failed: {exc}") from None
        finally:
            del store  # releases the lock, even when the flush failed
