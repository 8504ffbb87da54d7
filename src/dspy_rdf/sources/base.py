"""The contract every source of traces follows.

A source is one family of JSON shapes that DSPy, a provider or a tracing tool writes (one
:data:`~dspy_rdf.model.SourceFormat`). It answers three questions, and nothing else knows its shapes:

- :meth:`Source.detect`: which object is this value, when it carries a mark that only this family writes? (``None``
  otherwise; never raises);
- :meth:`Source.shape`: which object has this value the shape of, for a value the user said is of this family
  (``--from``; ``None`` when it has none of its shapes; never raises);
- :meth:`Source.read`: the canonical trace of a value of a given kind, or a
  :class:`~dspy_rdf.errors.TraceInputError` naming the offending field.

:mod:`dspy_rdf.sources` lists the sources in the order they are asked (:data:`dspy_rdf.sources.SOURCES`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from dspy_rdf import model as m

__all__ = ["ReadOptions", "Source"]


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """What a reader may be told besides the value: a model and a timestamp to fill in where DSPy versions did not
    record them (history dicts of DSPy 2.5.0 to 2.5.3, ``DummyLM`` before 3.2)."""

    model: str | None = None
    timestamp: str | None = None


class Source(ABC):
    """One family of shapes (see the module docstring)."""

    format: m.SourceFormat
    """The ``source_format`` its traces record."""
    description: str
    """What it reads, in words for error messages (``a DSPy 3.4 lm15 Request, Response, Message or part``)."""

    @abstractmethod
    def detect(self, value: Any) -> m.SourceKind | None:
        """The kind of object ``value`` is, when it carries a mark only this family writes; never raises."""

    def shape(self, value: Any) -> m.SourceKind | None:
        """The kind of object ``value`` has the shape of, for a value said to be of this family; never raises."""
        return self.detect(value)

    @abstractmethod
    def read(self, value: Any, kind: m.SourceKind, options: ReadOptions) -> m.Trace:
        """The trace of ``value`` (an object of ``kind``); :class:`~dspy_rdf.errors.TraceInputError` naming the field."""
