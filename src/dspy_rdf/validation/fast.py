"""The fast engine's entry point, :func:`validate_graphs_fast`: the compiled checks run over a whole store or over
slices of its traces copied into memory, in this process or in forked worker processes (their start, signals and
end), with progress counted in graphs.

A trace holding a number beyond what the store computes with (flagged by the value checks, see
:data:`~dspy_rdf.validation.compiled.BEYOND_RANGE`) is validated by the reference engine instead, so the results
never depend on the store's number range.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from dspy_rdf.validation.compiled import BEYOND_RANGE, CompiledShapes, compile_shapes
from dspy_rdf.validation.reference import validate_graph_pyshacl
from dspy_rdf.validation.report import Violation
from dspy_rdf.validation.running import Row, Runner, run_slice, to_violations
from dspy_rdf.validation.shapes import load_shapes
from dspy_rdf.validation.units import TraceGraphs

__all__ = ["WHOLE_STORE_MAX_TRIPLES", "validate_graphs_fast"]


# --- worker processes -------------------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _die_with(parent: int) -> None:
    """End this process when ``parent`` dies, however it dies (``kill -9`` included): Linux's parent-death signal,
    and a check that the parent did not die before it was set. Elsewhere the worker ends when its pipe closes."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError, TypeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def _worker_init(path: str, shapes: str | None, parent: int) -> None:
    # A terminal sends Ctrl-C to every process of the group: the parent decides what it means (and stops the workers),
    # a worker only ends when it is told to, quietly. The signals were blocked when it was forked (see _worker_pool).
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    _WORKER["store"] = ox.Store.read_only(path)
    _WORKER["compiled"] = compile_shapes(shapes)


def _worker_run(graphs: list[str] | None, checks: list[int]) -> list[Row]:
    return Runner(_WORKER["compiled"], oxigraph=_WORKER["store"]).run_batch(graphs, checks)


def _worker_slice(names: list[str]) -> list[Row]:
    return run_slice(_WORKER["compiled"], _WORKER["store"], names)


_PARALLEL_MIN_TRACES = 500  # below this, starting worker processes costs more than it saves
WHOLE_STORE_MAX_TRIPLES = 10_000_000
"""Above this many triples, :func:`validate_graphs_fast` validates an embedded store in slices by default
(whole-store queries peaked at ~0.9 GB per worker on 7.6 M triples)."""


@contextmanager
def _worker_pool(path: Path, workers: int, shapes: str | Path | None) -> Iterator[Executor]:
    """``workers`` forked processes that each open the store at ``path`` read-only. They ignore Ctrl-C: when the
    block ends early (an error, a KeyboardInterrupt), the workers are killed rather than waited for and the work not
    started is dropped, so that a second Ctrl-C never finds this process waiting on a worker."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    before = set(multiprocessing.active_children())
    executor = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=_worker_init,
        initargs=(str(path), None if shapes is None else str(shapes), os.getpid()),
    )
    try:
        # The workers are forked by the first submit: with SIGINT and SIGTERM blocked, so that neither reaches a
        # worker before it has chosen to ignore Ctrl-C (the executor's own thread, started there, keeps them blocked,
        # which leaves them to the main thread).
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            executor.submit(int)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        yield executor
    except BaseException:
        for process in set(multiprocessing.active_children()) - before:
            process.kill()
        # The executor's thread sees its workers gone and ends at once: waiting for it here, not at exit, where
        # Python would wake it while it closes its pipe ("Bad file descriptor").
        executor.shutdown(wait=True, cancel_futures=True)
        raise
    executor.shutdown()


# --- validating ---------------------------------------------------------------------------------------------------------


def validate_graphs_fast(
    graphs: TraceGraphs,
    *,
    shapes: str | Path | None = None,
    progress: Callable[[int], None] | None = None,
    workers: int = 2,
    batch_size: int = 1000,
    slices: bool | None = None,
) -> list[Violation]:
    """Validate the graphs of ``graphs`` with the compiled shapes; ``progress`` is called in graph units, its calls
    adding up to the number of graphs.

    Two ways to run the compiled queries on an embedded store on disk, both with ``workers`` forked processes when
    the store was opened read-only (each opens it read-only too; pyoxigraph holds the GIL while it evaluates, so
    threads would not help; a store open for writing is validated in this process):

    - *whole store* (``slices=False``): each compiled query runs once over every graph (``GRAPH ?g``) and the
      workers share out the queries; the fastest, but the hash joins hold whole-store scans, so memory grows with
      the store (167 MB per worker at 10k LM calls, 880 MB at 100k). ``progress`` advances as the queries
      complete, each by its share of the graphs.
    - *slices* (``slices=True``): the graphs of ``batch_size`` traces at a time are copied into an in-memory store
      and every compiled query runs there; memory is bounded by one slice, whatever the size of the store (peak
      per worker 166 MB at 10k LM calls, 408 MB at 100k, mostly RocksDB's blocks of the open store), at about half
      the speed. ``progress`` advances by each slice.

    The default (``None``) slices when the store holds more than :data:`WHOLE_STORE_MAX_TRIPLES` triples or when
    some graphs were selected (copying a few graphs beats restricting every scan to them), and runs the whole store
    otherwise. A store in memory runs its queries directly; a remote store runs them on the server,
    through :meth:`~dspy_rdf.store.TraceStore.select`, one at a time (over all graphs, or ``batch_size`` graphs per
    run, ``VALUES ?g``, for a selection).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    compiled = compile_shapes(shapes)
    names = list(graphs.names)
    oxigraph = graphs.oxigraph
    pool = _pool_for(graphs, len(names), workers, shapes)
    if slices is None:
        slices = _slices_by_default(graphs)
    if oxigraph is not None and slices:
        rows = _validate_slices(compiled, oxigraph, names, progress, batch_size, pool)
    else:
        selection = None if graphs.complete or oxigraph is not None else names
        rows = _validate_queries(compiled, graphs, selection, len(names), progress, batch_size, pool)
    return _violations_in(rows, graphs, set(names), shapes)


def _pool_for(
    graphs: TraceGraphs, traces: int, workers: int, shapes: str | Path | None
) -> Callable[[], AbstractContextManager[Executor]] | None:
    """What starts the worker processes for ``traces`` traces of ``graphs`` (None: validate in this process)."""
    path = graphs.path
    # Worker processes open the store read-only, which pyoxigraph says is undefined while another instance writes to
    # it (RocksDB compactions delete files a reader is about to open): only a store opened read-only is shared.
    if workers > 1 and path is not None and graphs.oxigraph is not None and not graphs.writable and traces >= _PARALLEL_MIN_TRACES:
        return partial(_worker_pool, path, workers, shapes)
    return None


def _slices_by_default(graphs: TraceGraphs) -> bool:
    """Whether to validate ``graphs`` in slices when the caller does not say (see :func:`validate_graphs_fast`)."""
    oxigraph = graphs.oxigraph
    return not graphs.complete or (graphs.path is not None and oxigraph is not None and len(oxigraph) > WHOLE_STORE_MAX_TRIPLES)


def _violations_in(rows: list[Row], graphs: TraceGraphs, wanted: set[str], shapes: str | Path | None) -> list[Violation]:
    """The violations of ``rows`` in the graphs ``wanted``; those of a graph with a number beyond the store's range,
    or of a file's graph whose literals the store rewrote, found by the reference engine on its triples as written
    instead (see the module docstring)."""
    beyond = {row[0] for row in rows if row[4] == BEYOND_RANGE} | set(graphs.as_written)
    kept = [row for row in rows if row[0] in wanted and row[0] not in beyond]
    found = to_violations(kept, graphs)
    if beyond & wanted:
        reference = load_shapes(shapes)
        for name in sorted(beyond & wanted):
            triples = ((q.subject, q.predicate, q.object) for q in graphs.quads(name))
            found += validate_graph_pyshacl(triples, trace=graphs.label(name), shapes=reference)
    return found


def _validate_slices(compiled: CompiledShapes, oxigraph: ox.Store, names: list[str], progress, batch_size: int, pool) -> list[Row]:
    slices = [names[i:i + batch_size] for i in range(0, len(names), batch_size)]
    rows: list[Row] = []
    with pool() if pool is not None else nullcontext() as executor:
        results = executor.map(_worker_slice, slices) if executor is not None else (run_slice(compiled, oxigraph, x) for x in slices)
        for names_done, found in zip(slices, results):
            rows.extend(found)
            if progress is not None:
                progress(len(names_done))
    return rows


def _validate_queries(
    compiled: CompiledShapes, graphs: TraceGraphs, selection: list[str] | None, total: int, progress, batch_size: int, pool
) -> list[Row]:
    batches: list[list[str] | None] = [None] if selection is None else [selection[i:i + batch_size] for i in range(0, len(selection), batch_size)]
    sizes = [total] if selection is None else [len(b) for b in batches]  # type: ignore[arg-type]
    n_checks = len(compiled.checks)
    rows: list[Row] = []
    if pool is not None:
        # the heaviest queries first, so that the workers finish together
        order = sorted(range(n_checks), key=lambda i: (compiled.checks[i].kind != "closed", compiled.checks[i].kind != "value"))
        with pool() as executor:
            for batch, size in zip(batches, sizes):
                futures = [executor.submit(_worker_run, batch, [i]) for i in order]
                for future, share in zip(futures, _shares(batch, size, n_checks)):
                    rows.extend(future.result())
                    if progress is not None and share:
                        progress(share)
        return rows
    runner = Runner(compiled, oxigraph=graphs.oxigraph, remote=graphs.remote)
    for batch, size in zip(batches, sizes):
        for index, share in enumerate(_shares(batch, size, n_checks)):
            rows.extend(runner.run_batch(batch, [index]))
            if progress is not None and share:
                progress(share)
    return rows


def _shares(batch: Sequence[str] | None, size: int, checks: int) -> list[int]:
    """How far each of ``checks`` completed checks advances a progress bar counted in graphs: a batch of graphs is
    done when its last check is, the whole store (``batch`` None) advances by an even share per check."""
    if batch is not None:
        return [0] * (checks - 1) + [size] if checks else []
    return [size * (i + 1) // checks - size * i // checks for i in range(checks)]
