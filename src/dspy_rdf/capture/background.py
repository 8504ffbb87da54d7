"""Writing captured runs in a process of its own, so that a program pays only for handing each run over.

Redacting, encoding and writing a run (to N-Quads, JSON Lines or a store) costs about a millisecond, a store's commit
several; done in the program's own thread it would cost more than recording the run. A :class:`BackgroundWriter`
starts ``python -m dspy_rdf.capture.background`` (a plain child process: nothing of the program's ``__main__`` is imported
again there, unlike ``multiprocessing``), sends it each run as a pickle over a pipe, and the child writes it with an
ordinary synchronous sink (:class:`~dspy_rdf.capture.sinks.FileSink` or :class:`~dspy_rdf.capture.sinks.StoreSink` with
``background=False``, named by the spec the parent sends first, so that this module imports no sink), in order,
answering with the runs written ("done") and the reason each other run failed. Runs that arrived while one was being
written go to a store sink together (one atomic write, one answer); a file sink's runs are confirmed one by one as
they are written, so that a child killed in the middle leaves no written run unconfirmed.

Nothing handed over is lost: a run the child could not write is given back to ``on_failure`` (the recorder keeps it in
``unwritten``); when the child dies, the runs it had not confirmed and every later run are written in the program's
own process instead; :meth:`BackgroundWriter.flush` waits until every run handed over is written, and at exit every
writer still open is flushed and closed. A process forked from the program writes in its own process too (the pipe
belongs to the process that started the child).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from dspy_rdf.capture.base import Sink

__all__ = ["ANSWER_SECONDS", "PIPE_BYTES", "UNANSWERED_RUNS", "BackgroundWriter", "BackgroundWriterError"]

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<Q")
PIPE_BYTES = 1 << 20  # room for a few dozen runs, so the program rarely waits on the child
UNANSWERED_RUNS = 32
ANSWER_SECONDS = 1.0
"""The child's answers are read when a run is handed over while more than :data:`UNANSWERED_RUNS` runs wait for one,
or :data:`ANSWER_SECONDS` after they were last read (and by ``flush`` and ``close``): reading them at every run cost
the program about as much as pickling it, while a failure is still told at the next run of a program whose runs come
seconds apart. The answers to that many runs (a few dozen bytes each, more for a failure's reason) fit in the answers
pipe many times over, so the child seldom waits for room (and never for long: a program that finds its own pipe full
reads the answers)."""
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class BackgroundWriterError(RuntimeError):
    """The writer process could not make its sink (``kind`` is the error class it raised, ``message`` its text)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _send(handle: IO[bytes], message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    handle.write(_HEADER.pack(len(data)) + data)
    handle.flush()


class _Inbox:
    """The messages arriving on a pipe, each end's reader: the child can also ask without waiting (to take together
    the runs already there), which a buffered file object cannot tell."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.ended = False
        # Read into one buffer made once: ``os.read(fd, n)`` allocates n bytes on every call, which for a pipe-sized n
        # costs more than the message it brings.
        self._chunk = memoryview(bytearray(PIPE_BYTES))

    def next(self, *, wait: bool = True, timeout: float | None = None) -> Any:
        """The next message; None at the end of the stream (then ``ended`` is true), or when none is there yet
        (``wait=False``) or came within ``timeout`` seconds."""
        while True:
            if len(self.buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self.buffer)
                if len(self.buffer) >= _HEADER.size + size:
                    data = bytes(self.buffer[_HEADER.size : _HEADER.size + size])
                    del self.buffer[: _HEADER.size + size]
                    return pickle.loads(data)  # noqa: S301 - only ever from the other end of our own pipe
            if self.ended:
                return None
            if (not wait or timeout is not None) and not select.select([self.fd], [], [], timeout if wait else 0)[0]:
                return None
            size = os.readv(self.fd, [self._chunk])
            if not size:
                self.ended = True
                return None
            self.buffer += self._chunk[:size]


_OPEN: weakref.WeakSet[BackgroundWriter] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for writer in list(_OPEN):
        with contextlib.suppress(Exception):
            writer.close()


class _WriterGone(Exception):
    """The child's end of the answers pipe closed: it ended (or was killed)."""


def _run_of(message: bytes) -> Any:
    """The run a pickled ``("run", number, run)`` message hands over."""
    return pickle.loads(message)[2]  # noqa: S301 - pickled by this process, a moment ago


class BackgroundWriter:
    """A child process that writes runs with the sink ``spec`` describes (see :func:`make_sink`).

    ``fallback()`` makes the same sink in this process, for when the child is gone; ``on_failure(trace, reason)``
    receives each run that could not be written and ``on_note(text)`` what the child's sink said of a run it wrote
    (that some of its values were not kept exactly), both in the program's thread that flushes, closes, or hands a
    run over when the answers are read (see :data:`ANSWER_SECONDS`). Raises :class:`BackgroundWriterError` when the child cannot make its sink (a locked store, a bad path),
    with the error the sink raised.

    No thread of the program's own waits for the child's answers: they are read (without waiting) when a run is
    handed over while many runs wait for theirs or some time after they were last read (:data:`ANSWER_SECONDS`), and
    by ``flush`` and ``close``. A thread woken for each answer, like any thread that wakes while the
    program runs, costs the program more CPU than handing the run over.
    """

    def __init__(
        self, spec: tuple, *, fallback: Callable[[], Any], on_failure: Callable[[Any, str], None], on_note: Callable[[str], None]
    ) -> None:
        self.fallback = fallback
        self.on_failure = on_failure
        self.on_note = on_note
        self._pid = os.getpid()
        # Held for every exchange with the child (the order of runs, reading answers, the switch to writing here).
        # Reentrant: ``on_failure`` runs under it and may hand a run over or flush.
        self._lock = threading.RLock()
        # Sequence number -> a run not yet confirmed, kept as the message that handed it over (its pickle). Not as
        # the run: a run waits here until the child confirms it, long enough for the garbage collector to move its
        # objects to the old generation, and those the collector's full passes walk (a store's slower writes then
        # cost the program a full collection every few dozen runs). Unpickled again only if the child fails it.
        self._pending: dict[int, bytes] = {}
        self._sequence = 0
        self._confirmed = 0  # the highest flush marker answered
        self._local: Sink | None = None  # the sink in this process, once the child is gone
        self._answers_read = time.monotonic()  # when the child's answers were last read
        self._closed = False
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "dspy_rdf.capture.background"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, close_fds=True,
        )  # fmt: skip
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None  # both are pipes
        with contextlib.suppress(OSError):
            fcntl.fcntl(stdin.fileno(), _F_SETPIPE_SZ, PIPE_BYTES)
        try:
            _send(stdin, spec)
            self._answers = _Inbox(stdout.fileno())
            answer = self._answers.next()
        except OSError:
            answer = None
        if answer is None or answer[0] != "ready":
            self._process.kill()
            self._process.wait()
            if answer is None:
                raise BackgroundWriterError("OSError", "the writer process ended before it was ready")
            raise BackgroundWriterError(answer[1], answer[2])
        # Runs are written to the pipe without blocking: when it is full, the answers are read meanwhile (see _send).
        self._stdin = stdin.fileno()
        os.set_blocking(self._stdin, False)
        _OPEN.add(self)

    # --- the program's side --------------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The writer process's id while it writes this program's runs; None once runs are written here instead."""
        return self._process.pid if self.in_this_process else None

    @property
    def in_this_process(self) -> bool:
        """Whether runs submitted here go to the child: in the process that started it, until it is gone or closed."""
        return os.getpid() == self._pid and self._local is None and not self._closed

    def submit(self, trace: Any) -> None:
        """Hand one run over (written in order); returns at once unless the pipe is full."""
        with self._lock:
            if self.in_this_process:
                self._sequence += 1
                message = pickle.dumps(("run", self._sequence, trace), protocol=pickle.HIGHEST_PROTOCOL)
                self._pending[self._sequence] = message
                try:
                    if len(self._pending) > UNANSWERED_RUNS or time.monotonic() - self._answers_read > ANSWER_SECONDS:
                        self._read_answers()
                    self._send_pickled(message)
                    return
                except (OSError, ValueError, _WriterGone):  # the child is gone (BrokenPipeError), or the pipe closed
                    self._take_over()
                    return
        self._write_here(trace)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every run handed over so far is written (or given to ``on_failure``); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            return False
        try:
            if not self.in_this_process:
                return True
            self._sequence += 1
            marker = self._sequence
            try:
                self._send(("flush", marker))
                return self._read_answers(until=marker, deadline=deadline)
            except (OSError, ValueError, _WriterGone):
                self._take_over()
                return True
        finally:
            self._lock.release()

    def close(self) -> None:
        """Write what is pending, stop the child (it closes its sink) and wait for it; idempotent."""
        with self._lock:
            if self._closed or os.getpid() != self._pid:
                return
            self._closed = True
            if self._local is None:
                with contextlib.suppress(OSError, ValueError, _WriterGone):
                    self._send(("close",))
                    self._read_answers(until=-1)  # every answer, up to "closed"
                assert self._process.stdin is not None  # a pipe
                with contextlib.suppress(OSError):
                    self._process.stdin.close()
                if self._pending:  # the child ended without confirming these: write them here
                    self._take_over()
            self._process.wait()
        _OPEN.discard(self)
        if self._local is not None:
            self._local.close()

    # --- talking to the child (with self._lock held) -------------------------------------------------------------

    def _send(self, message: object) -> None:
        """Write one message whole. While the pipe is full, the child's answers are read: the child may itself be
        waiting for room in its answers pipe, and then neither side would move."""
        self._send_pickled(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def _send_pickled(self, data: bytes) -> None:
        """:meth:`_send` for a message already pickled."""
        rest = memoryview(_HEADER.pack(len(data)) + data)
        while rest:
            try:
                rest = rest[os.write(self._stdin, rest) :]
            except BlockingIOError:
                readable, _, _ = select.select([self._answers.fd], [self._stdin], [])
                if readable:
                    self._read_answers()

    def _read_answers(self, until: int | None = None, deadline: float | None = None) -> bool:
        """Handle the child's answers: those already there, or, with ``until``, every answer up to the flush marker
        ``until`` (-1: up to "closed"), waiting until ``deadline`` (a ``time.monotonic()`` value); False when the
        deadline came first. Raises :class:`_WriterGone` when the child's end is closed."""
        self._answers_read = time.monotonic()
        while True:
            if until is not None and until >= 0 and self._confirmed >= until:
                return True
            timeout = None if until is None or deadline is None else max(0.0, deadline - time.monotonic())
            try:
                answer = self._answers.next(wait=until is not None, timeout=timeout)
            except (pickle.UnpicklingError, EOFError) as exc:
                raise _WriterGone from exc
            if answer is None:
                if self._answers.ended:
                    raise _WriterGone
                return until is None
            kind = answer[0]
            if kind == "done":
                for number in answer[1]:
                    self._pending.pop(number, None)
                for note in answer[2]:
                    self.on_note(note)
            elif kind == "failed":
                message = self._pending.pop(answer[1], None)
                if message is not None:
                    self.on_failure(_run_of(message), answer[2])
            elif kind == "flushed":
                self._confirmed = max(self._confirmed, answer[1])
            elif kind == "closed":
                return True

    def _take_over(self) -> None:
        """The child is gone: from now on runs are written in this process, starting with those it did not confirm.
        Called with ``self._lock`` held."""
        if self._local is None:
            log.warning("dspy-rdf: the writer process ended; runs are written in the program's process from now on")
            with contextlib.suppress(Exception):
                self._process.kill()
            try:
                self._local = self.fallback()
            except Exception as exc:  # noqa: BLE001 - the runs go back to the recorder instead
                for trace in self._take_pending():
                    self.on_failure(trace, f"{type(exc).__name__}: {exc}")
                return
        for trace in self._take_pending():
            self._write_here(trace)

    def _take_pending(self) -> list[Any]:
        pending, self._pending = [_run_of(self._pending[n]) for n in sorted(self._pending)], {}
        return pending

    def _write_here(self, trace: Any) -> None:
        if self._local is None:
            self._local = self.fallback()
        try:
            self._local.write(trace)
        except Exception as exc:  # noqa: BLE001 - given back to the recorder
            self.on_failure(trace, f"{type(exc).__name__}: {exc}")


# --- the child's side --------------------------------------------------------------------------------------------


def make_sink(spec: tuple[str, dict[str, Any]]) -> Sink:
    """The synchronous sink a spec describes: ``("module:Class", keyword arguments)``, made by calling that class."""
    import importlib

    where, options = spec
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)(**options)


_BATCH_RUNS = 64  # runs written together at most, so that answers keep coming under a long backlog


def _write_runs(sink: Sink, runs: list[tuple[int, Any]], notes: list[str], stdout: BinaryIO) -> None:
    """Write runs, together when the sink can (``write_many``: one atomic store write, answered with one "done"); else,
    or if it refuses any, each on its own, answered as it is written ("done", or "failed" with the reason). A "done"
    carries what the sink noted meanwhile (``notes``, which its ``on_losses`` fills)."""
    together = False
    if len(runs) > 1:
        try:
            together = sink.write_many([run for _, run in runs])
        except Exception:  # noqa: BLE001, S110 - each run again on its own, so that each failure is its own
            pass
        if not together:
            del notes[:]  # the runs built for the batch are built again below, and noted then
    if not together:
        for number, run in runs:  # each answered once written: a child killed mid-batch leaves none unconfirmed
            try:
                sink.write(run)
            except Exception as exc:  # noqa: BLE001 - the run goes back to the program, which notes what it builds
                del notes[:]
                _send(stdout, ("failed", number, f"{type(exc).__name__}: {exc}"))
            else:
                _send(stdout, ("done", [number], notes[:]))
                del notes[:]
        return
    _send(stdout, ("done", [number for number, _ in runs], notes[:]))
    del notes[:]


def _serve() -> None:
    # Ctrl-C in a terminal reaches the whole process group: the program decides when to stop, and this process
    # writes what it was given until the program closes the pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Batch scheduling: woken by a run arriving in its pipe, this process must not take the CPU from the program
    # that is still writing it (Linux would otherwise often run it at once on the program's CPU, and the program's
    # write would wait for it to convert and write the whole run).
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    inbox, stdout = _Inbox(sys.stdin.fileno()), sys.stdout.buffer
    spec = inbox.next()
    if spec is None:
        return
    try:
        sink = make_sink(spec)
    except Exception as exc:  # noqa: BLE001 - said to the parent, which raises it
        _send(stdout, ("error", type(exc).__name__, str(exc)))
        return
    notes: list[str] = []
    sink.on_losses = notes.append
    _send(stdout, ("ready",))
    try:
        message = inbox.next()
        while message is not None and message[0] != "close":
            if message[0] == "flush":
                _send(stdout, ("flushed", message[1]))
                message = inbox.next()
                continue
            runs = [(message[1], message[2])]
            while len(runs) < _BATCH_RUNS and (message := inbox.next(wait=False)) is not None and message[0] == "run":
                runs.append((message[1], message[2]))
            _write_runs(sink, runs, notes, stdout)
            if message is None or message[0] == "run":
                message = inbox.next()
    finally:
        sink.close()
    _send(stdout, ("closed",))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):  # the program's Ctrl-C reaches its child too
        _serve()
