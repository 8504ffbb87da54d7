"""The contract of a sink: where a recorder puts each finished run. Built-in sinks (:mod:`dspy_rdf.capture.sinks`) and
a user's own follow it alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dspy_rdf.canonical import model as m
    from dspy_rdf.capture.runs import RecordedRun

__all__ = ["Sink"]


class Sink:
    """Where a :class:`~dspy_rdf.capture.recorder.TraceRecorder` puts finished runs: the contract every sink follows, built-in
    or a user's own (subclass it and implement :meth:`write`; a plain object with a ``write(trace)`` method is taken
    too, as if it subclassed this).

    A recorder hands each finished run to :meth:`write` as its :class:`~dspy_rdf.canonical.model.Trace`, or, for a sink whose
    :attr:`builds_runs` is true, as the plain record the recorder kept (:class:`~dspy_rdf.capture.runs.RecordedRun`), which
    the sink builds into its trace later or elsewhere (:func:`~dspy_rdf.capture.runs.build_trace`), so that the program pays
    only for recording. A sink that writes later tells the recorder through the two callbacks the recorder sets:
    :attr:`on_failure` for a run it could not write, :attr:`on_losses` for what building a run noted.
    """

    builds_runs: bool = False
    """Whether :meth:`write` takes runs as recorded and builds them itself."""
    on_failure: Callable[[m.Trace | RecordedRun, str], None] | None = None
    """Set by the recorder: called with each run the sink could not write and why; the recorder keeps the run."""
    on_losses: Callable[[str], None] | None = None
    """Set by the recorder: called with one line for each run built here whose values were not all kept exactly."""

    def write(self, run: m.Trace | RecordedRun) -> None:
        """Keep one finished run; raising keeps it in the recorder's ``unwritten``."""
        raise NotImplementedError

    def write_many(self, runs: list[m.Trace | RecordedRun]) -> bool:
        """Write several runs together, all or none; False when they were not (this default: the caller then writes
        them one by one with :meth:`write`)."""
        return False

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every run handed over is written; False on timeout."""
        return True

    def close(self) -> None:
        """Write what is pending and release what the sink holds."""
