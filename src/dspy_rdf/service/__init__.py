"""Long-running services over a store: ``dspy-rdf serve`` (:mod:`.server`: an OTLP receiver whose spool, :mod:`.spool`,
makes what it acknowledges durable, a builder, :mod:`.builder`, that stores traces as ``export --from otlp`` does, and
a read-only SPARQL endpoint), the capture sink that sends runs to it (:mod:`.sink`), and ``dspy-rdf mcp``
(:mod:`.mcp`: the store's queries, schema, traces and validation as tools for agents).

>>> from dspy_rdf.service import OtlpSink, ServeOptions, TraceServer
"""

from __future__ import annotations

from dspy_rdf.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dspy_rdf.service.server import ServeOptions, TraceServer
    from dspy_rdf.service.sink import OtlpSink

_HOMES = {
    "dspy_rdf.service.server": ("ServeOptions", "TraceServer"),
    "dspy_rdf.service.sink": ("OtlpSink",),
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _HOMES)
