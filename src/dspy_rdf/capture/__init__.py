"""Live capture of DSPy program runs: the recorder (:mod:`.recorder`, a DSPy callback), the runs it records
(:mod:`.runs`), where runs go (:mod:`.base`: the :class:`Sink` contract, which a user's own sink subclasses; :mod:`.sinks`: memory, files, stores) and the
writer process that writes them off the program's thread (:mod:`.background`).

>>> from dspy_rdf.capture import TraceRecorder, FileSink
"""

from __future__ import annotations

from dspy_rdf.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dspy_rdf.capture.base import Sink
    from dspy_rdf.capture.recorder import TraceRecorder, program_fingerprint, summarize
    from dspy_rdf.capture.sinks import FileSink, MemorySink, StoreSink, as_sink

_HOMES = {
    "dspy_rdf.capture.recorder": ("TraceRecorder", "program_fingerprint", "summarize"),
    "dspy_rdf.capture.base": ("Sink",),
    "dspy_rdf.capture.sinks": ("FileSink", "MemorySink", "StoreSink", "as_sink"),
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _HOMES)
