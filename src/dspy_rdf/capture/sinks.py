"""Where live capture puts finished runs: in memory, appended to a file, or into a trace store.

:class:`MemorySink` keeps runs in a list. :class:`FileSink` (N-Quads or JSON Lines) and :class:`StoreSink` (the
embedded store or a SPARQL server) hand each run to a process of their own (:mod:`dspy_rdf.capture.background`), which
redacts, encodes and writes it, so that the program only hands runs over; ``background=False`` writes each run before
``write`` returns. Nothing here imports DSPy: the writer process makes these sinks without loading DSPy and its
LM libraries (a second or more of start-up, and LiteLLM's network fetch of its price list).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import DspyRdfError
from dspy_rdf.canonical.identity import DEFAULT_BASE, check_base
from dspy_rdf.canonical.redact import DEFAULT_REDACTOR, Redactor
from dspy_rdf.capture.base import Sink
from dspy_rdf.capture.runs import RecordedRun, build_trace, loss_note

if TYPE_CHECKING:
    from dspy_rdf.store import TraceStore

__all__ = ["FileSink", "MemorySink", "Sink", "StoreSink", "as_sink"]

logger = logging.getLogger(__name__)


class _PlainSink(Sink):
    """A user's object with a ``write(trace)`` method (and maybe ``flush``, ``close``), as a :class:`Sink`."""

    def __init__(self, target: Any) -> None:
        if not callable(getattr(target, "write", None)):
            raise TypeError(f"a sink needs a write(trace) method; {type(target).__name__} has none")
        self.target = target
        self.builds_runs = bool(getattr(target, "builds_runs", False))

    def __repr__(self) -> str:
        return repr(self.target)

    def write(self, run: m.Trace | RecordedRun) -> None:
        self.target.write(run)

    def flush(self, timeout: float | None = None) -> bool:
        flush = getattr(self.target, "flush", None)
        return True if flush is None else bool(flush(timeout))

    def close(self) -> None:
        close = getattr(self.target, "close", None)
        if close is not None:
            close()


def as_sink(target: Any) -> Sink:
    """``target`` as a :class:`Sink`: itself when it is one, else its ``write`` (``flush``, ``close``) wrapped."""
    return target if isinstance(target, Sink) else _PlainSink(target)


def _tell(on_losses: Callable[[str], None] | None, note: str) -> None:
    """Say what building a run noted: to the recorder's ``on_losses`` when it set one, else to the log."""
    if on_losses is not None:
        on_losses(note)
    else:
        logger.warning("dspy-rdf: %s", note)


class MemorySink(Sink):
    """Keeps finished runs in :attr:`traces` (for notebooks and tests).

    A run is handed over as the recorder noted it (plain data, see :class:`~dspy_rdf.capture.runs.RecordedRun`) and built into
    its trace when :attr:`traces` is next read (or the recorder's :attr:`~dspy_rdf.capture.recorder.TraceRecorder.errors`, or
    :meth:`flush`), so that the program's call pays only for recording it; what building notes of a run (values not
    kept exactly) goes to ``on_losses``, which the recorder sets. A trace handed over built is kept as it is."""

    builds_runs = True
    """Runs handed over as recorded are built here, later (see the class docstring)."""

    def __init__(self, traces: list[m.Trace] | None = None) -> None:
        self._traces: list[m.Trace] = traces if traces is not None else []
        self._waiting: list[m.Trace | RecordedRun] = []  # handed over since the last flush, in the order they finished
        self._lock = threading.Lock()  # held only to hand a run over or take the waiting ones: a write never waits for a build
        self._flushing = threading.RLock()  # one flush at a time, its notes said before another flush returns
        self.on_losses: Callable[[str], None] | None = None

    def __repr__(self) -> str:
        return f"MemorySink({len(self._traces) + len(self._waiting)} runs)"

    @property
    def traces(self) -> list[m.Trace]:
        """The finished runs' traces, in the order they finished: the list itself, which holds built traces only (runs
        that finish later join it when this is next read); clearing it drops them."""
        self.flush()
        return self._traces

    @traces.setter
    def traces(self, traces: list[m.Trace]) -> None:
        self.flush()
        self._traces = traces

    def write(self, run: m.Trace | RecordedRun) -> None:
        """Keep one finished run (built when :attr:`traces` is next read)."""
        with self._lock:
            self._waiting.append(run)

    def flush(self, timeout: float | None = None) -> bool:
        """Build every run handed over since the last flush and add it to :attr:`traces`, saying what building noted
        to ``on_losses`` (before another flush, or a read of :attr:`traces`, returns); always True."""
        with self._flushing:
            with self._lock:
                waiting, self._waiting = self._waiting, []
            if not waiting:
                return True
            built = [run if isinstance(run, m.Trace) else build_trace(run) for run in waiting]
            self._traces.extend(built)
            for run, trace in zip(waiting, built):
                if run is not trace and (note := loss_note(trace)) is not None:
                    _tell(self.on_losses, note)
        return True

    def close(self) -> None:
        """Build every run handed over (see :meth:`flush`); the sink keeps taking runs."""
        self.flush()


class _Background(Sink):
    """What FileSink and StoreSink share: writing in a process of their own (:mod:`dspy_rdf.capture.background`) unless told
    not to. A run comes as a trace, or as the recorder noted it (a :class:`~dspy_rdf.capture.runs.RecordedRun`, built into
    its trace where it is written). Two callbacks the recorder sets: ``on_failure(run, reason)`` receives each run that
    could not be written, ``on_losses(note)`` says of a run built here that some of its values were not kept exactly."""

    redactor: Redactor | None

    def _start(self, spec: tuple, background: bool) -> None:
        self.on_failure: Callable[[m.Trace | RecordedRun, str], None] | None = None
        self.on_losses: Callable[[str], None] | None = None
        self._writer = None
        if not background:
            return
        try:
            pickle.dumps(self.redactor)
        except Exception:  # noqa: BLE001 - a redactor with a callback of its own: written here, where it lives
            return
        from dspy_rdf.capture.background import BackgroundWriter, BackgroundWriterError

        try:
            self._writer = BackgroundWriter(spec, fallback=self._fallback, on_failure=self._failed, on_note=self._noted)
        except BackgroundWriterError as exc:
            raise _sink_error(exc) from None

    def _fallback(self) -> Any:
        """The same sink writing in this process (the writer process is gone), telling this one's recorder."""
        sink = self._synchronous()
        sink.on_losses = self._noted
        return sink

    @property
    def builds_runs(self) -> bool:  # type: ignore[override]  # read-only here: it follows the writer process; Sink's may be set
        """Whether runs handed over as recorded are built into traces elsewhere (by the writer process)."""
        return self.writes_later

    def _noted(self, note: str) -> None:
        _tell(self.on_losses, note)

    def _trace_of(self, run: m.Trace | RecordedRun) -> m.Trace:
        """A run as its trace, built here when it comes as recorded (see the class docstring)."""
        if isinstance(run, m.Trace):
            return run
        trace = build_trace(run)
        if (note := loss_note(trace)) is not None:
            self._noted(note)
        return trace

    @property
    def writes_later(self) -> bool:
        """Whether runs are written by a process of the sink's own, after ``write`` returns (read them after
        :meth:`flush`); otherwise each is written before ``write`` returns."""
        return self._writer is not None and self._writer.in_this_process

    @property
    def writer_pid(self) -> int | None:
        """The process id of the sink's writer process (to watch what it costs), or None when runs are written in this
        process."""
        return None if self._writer is None else self._writer.pid

    def _synchronous(self) -> Any:
        raise NotImplementedError

    def _failed(self, run: m.Trace | RecordedRun, reason: str) -> None:
        if self.on_failure is not None:
            self.on_failure(run, reason)
        else:
            logger.warning("dspy-rdf: a run could not be written (%s)", reason)

    def write(self, run: m.Trace | RecordedRun) -> None:
        """Hand one run (a trace, or a run as recorded) over to the writer process (or write it now, without one)."""
        if self._writer is not None:
            self._writer.submit(run)
        else:
            self._write_now(self._trace_of(run))

    def _write_now(self, trace: m.Trace) -> None:
        raise NotImplementedError

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every run handed over is written (failures go to the recorder); False on timeout."""
        return True if self._writer is None else self._writer.flush(timeout)

    def close(self) -> None:
        """Write what is pending and stop the writer process (a second close does nothing)."""
        if self._writer is not None:
            self._writer.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def append_whole(path: Path, data: bytes) -> None:
    """Append ``data`` (one run) to the file at ``path``, whole or not at all: when a write fails part way (a full
    disk), what it wrote is cut off again, so that the file ends with the last whole run and stays readable, and the
    error is raised (the recorder keeps the run). An unfinished record left at the end by a process killed while it
    wrote (no line feed after it) is cut off first: every record of these files ends with one."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        if size and os.pread(fd, 1, size - 1) != b"\n":
            size = _last_whole_record(fd, size)
            os.ftruncate(fd, size)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except BaseException:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def _last_whole_record(fd: int, size: int) -> int:
    """The length of the file up to its last line feed (0 when it has none)."""
    end = size
    while end > 0:
        start = max(0, end - 65536)
        chunk = os.pread(fd, end - start, start)
        found = chunk.rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def _sink_error(exc: Any) -> Exception:
    """The error the writer process's sink raised, as the same class when it is one of ours or a built-in one."""
    import builtins

    from dspy_rdf import store
    from dspy_rdf.canonical import errors

    for module in (store, errors, builtins):
        kind = getattr(module, exc.kind, None)
        if isinstance(kind, type) and issubclass(kind, Exception):
            return kind(exc.message)
    return DspyRdfError(exc.message)


class FileSink(_Background):
    """Appends each finished run to a file: N-Quads (``.nq``, one named graph per run) or JSON Lines (``.jsonl``,
    one run per line, which ``dspy-rdf export`` reads back). Each run is written with one ``write`` call.

    By default runs are built from what the recorder kept, redacted, encoded and written by a process of its own (see
    :mod:`dspy_rdf.capture.background`), so the program only hands them over: call :meth:`flush` (or :meth:`close`, or use ``with``) before reading the file
    in the same program; at exit it is done anyway. ``background=False`` writes each run before ``write`` returns.
    """

    def __init__(
        self, path: str | Path, *, base: str = DEFAULT_BASE, redactor: Redactor | None = DEFAULT_REDACTOR, background: bool = True
    ) -> None:
        self.path = Path(path)
        self.redactor = redactor
        suffix = self.path.suffix.lower()
        if suffix not in (".nq", ".jsonl"):
            raise ValueError(f"{self.path}: a capture file is appended to, so it must be N-Quads (.nq) or JSON Lines (.jsonl)")
        self.base = check_base(base)
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        options = {"path": str(self.path.resolve()), "base": self.base, "redactor": redactor, "background": False}
        self._start(("dspy_rdf.capture.sinks:FileSink", options), background)

    def __repr__(self) -> str:
        return f"FileSink({str(self.path)!r})"

    def _synchronous(self) -> FileSink:
        return FileSink(self.path, base=self.base, redactor=self.redactor, background=False)

    def _write_now(self, trace: m.Trace) -> None:
        """Append one run, its secrets redacted (see :mod:`dspy_rdf.canonical.redact`)."""
        # The redactor walks a trace only when its canonical JSON (which the trace IRI needs anyway) may hold a
        # secret: walking every run cost more than writing it.
        if self.path.suffix.lower() == ".nq":
            from dspy_rdf.rdf.writer import trace_lines

            text = "".join(trace_lines(trace, base=self.base, redactor=self.redactor)[1])
        else:
            from dspy_rdf.sources.tracejson import trace_to_json

            text = json.dumps(trace_to_json(trace), ensure_ascii=False)
            if self.redactor is not None and self.redactor.may_hold_secrets(text):
                redacted = self.redactor(trace)
                if redacted is not trace:
                    text = json.dumps(trace_to_json(redacted), ensure_ascii=False)
            text += "\n"
        with self._lock:
            append_whole(self.path, text.encode("utf-8"))


class StoreSink(_Background):
    """Puts each finished run into a trace store as its own named graph: the embedded store in a directory, or a
    SPARQL 1.1 server for an ``http(s)://`` URL (see :func:`dspy_rdf.store.open_store`), or a store already open.

    Each run is one atomic write (:meth:`~dspy_rdf.store.TraceStore.put`), so analytics and ``dspy-rdf validate
    --store`` see whole runs only. Given a directory or a URL, the store is opened and written by a process of its
    own (see :mod:`dspy_rdf.capture.background`; ``background=False`` opens it here and writes each run before ``write``
    returns; a store given open is written here). The embedded store is locked while the sink holds it open:
    :meth:`close` it (or use ``with``) before running ``dspy-rdf`` commands on the same directory. A run that cannot
    be written goes back to the recorder, which keeps it in ``unwritten`` and reports it in ``errors``.
    """

    def __init__(
        self,
        store: TraceStore | str | Path | None = None,
        *,
        base: str = DEFAULT_BASE,
        redactor: Redactor | None = DEFAULT_REDACTOR,
        background: bool = True,
    ) -> None:
        from dspy_rdf.store import TraceStore, default_store_target, open_store

        self.base = check_base(base)
        self.redactor = redactor
        self._lock = threading.Lock()
        given = isinstance(store, TraceStore)
        target = None if given else store if isinstance(store, Path) else str(store) if store else default_store_target()
        self._target = target
        self._owned = not given
        self.store: TraceStore | None = store if isinstance(store, TraceStore) else None
        options = {"store": target, "base": self.base, "redactor": redactor, "background": False}
        self._start(("dspy_rdf.capture.sinks:StoreSink", options), background and not given)
        if self._writer is None and not given:
            self.store = open_store(target)

    def __repr__(self) -> str:
        where = str(self._target) if self._target is not None else str(getattr(self.store, "location", "a store"))
        scheme, sep, rest = where.partition("://")
        if sep and "@" in rest.partition("/")[0]:  # never show credentials given in a URL
            where = f"{scheme}://***@{rest.split('@', 1)[1]}"
        return f"StoreSink({where!r})"

    def _synchronous(self) -> StoreSink:
        return StoreSink(self._target, base=self.base, redactor=self.redactor, background=False)

    def _write_now(self, trace: m.Trace) -> None:
        """Store one run (its secrets redacted); a run already stored (the same IRI) is left as it is."""
        store = self.store
        assert store is not None  # opened here when there is no writer process
        with self._lock:
            report = store.put([trace], base=self.base, redactor=self.redactor)
        if report.failed:
            iri, why = report.failed[0]
            raise DspyRdfError(f"the run {iri or f'started at {trace.started_at}'} was not stored: {why}")

    def write_many(self, runs: list[m.Trace | RecordedRun]) -> bool:
        """Store several runs in one atomic write (a store's commit costs nearly the same for one run as for many);
        False when the store refused any of them, which :meth:`write` then tells apart one by one (those stored are
        kept as they are). The writer process uses it for the runs that wait together."""
        traces = [self._trace_of(run) for run in runs]
        store = self.store
        assert store is not None  # opened here when there is no writer process
        with self._lock:
            report = store.put(traces, base=self.base, redactor=self.redactor)
        return not report.failed

    def close(self) -> None:
        """Write what is pending, then close the store if this sink opened it (a second close does nothing)."""
        super().close()
        if self._owned and self.store is not None:
            self.store.close()
