"""Every shape a DSPy user holds a trace in, behind one contract (:class:`~dspy_rdf.sources.base.Source`) and one
registry.

:data:`SOURCES` lists the sources in the order detection asks them: the shapes with marks of their own first, DSPy
3.3's typed JSON (which has none) last. Adding a source is one module with a ``SOURCE`` and one line here; its
``format`` is a value of the schema's ``TraceSourceFormat`` enumeration (the vocabulary the shapes check, regenerated
with ``python -m dspy_rdf.generate``), which the model's ``SourceFormat`` lists too (``tests/test_schema.py`` keeps
the three in step). Detection, reading, ``--from`` and writing back (``dspy-rdf to-json``) all go through the
source.
"""

from __future__ import annotations

from dspy_rdf.canonical import model as m
from dspy_rdf.sources import dspy33, dspy_history, history_dict, lm15, mlflow, openai_chat, otlp, trajectory
from dspy_rdf.sources.base import Assembly, Read, ReadOptions, Source

__all__ = ["SOURCES", "Assembly", "Read", "ReadOptions", "Source", "source_for"]

SOURCES: tuple[Source, ...] = (
    mlflow.SOURCE,
    otlp.SOURCE,
    trajectory.SOURCE,
    lm15.SOURCE,
    history_dict.SOURCE,
    dspy_history.SOURCE,
    openai_chat.SOURCE,
    dspy33.SOURCE,
)
"""The sources, in detection order."""

_BY_FORMAT = {source.format: source for source in SOURCES}


def source_for(source_format: m.SourceFormat) -> Source | None:
    """The source of a ``source_format``, or None for formats no source reads (``dspy_callback``: dspy-rdf's own)."""
    return _BY_FORMAT.get(source_format)
