"""The contract every source of traces follows.

A source is one family of JSON shapes that DSPy, a provider or a tracing tool writes (one
:data:`~dspy_rdf.canonical.model.SourceFormat`). It answers three questions, and nothing else knows its shapes:

- :meth:`Source.detect`: which object is this value, when it carries a mark that only this family writes? (``None``
  otherwise; never raises);
- :meth:`Source.shape`: which object has this value the shape of, for a value the user said is of this family
  (``--from``; ``None`` when it has none of its shapes; never raises);
- :meth:`Source.read`: the canonical trace of a value of a given kind, or a
  :class:`~dspy_rdf.canonical.errors.TraceInputError` naming the offending field;
- :meth:`Source.write`: for the kinds in :attr:`Source.written_kinds`, the family's own JSON of a trace it read,
  which ``read`` gives back equal (``dspy-rdf to-json`` writes a trace back in the shape it came from); a trace of
  another kind is written as canonical DSPy 3.3 JSON.

Most shapes hold one trace per JSON value. Tracing tools write several (an MLflow search page, an OTLP export of
many traces), and an OTLP file exporter may spread one trace over several JSON Lines. So a value is read through
:meth:`Source.assembly`, one :class:`Assembly` per input: it is given the input's values in order and yields a
:class:`Read` for each trace as soon as it is complete (and each trace that failed, with the field that failed),
then what remains when the input ends. The default assembly reads each value as the one trace of :meth:`Source.read`.

:mod:`dspy_rdf.sources` lists the sources in the order they are asked (:data:`dspy_rdf.sources.SOURCES`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError

__all__ = ["Assembly", "Read", "ReadOptions", "Source"]


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """What a reader may be told besides the value: a model and a timestamp to fill in where DSPy versions did not
    record them (history dicts of DSPy 2.5.0 to 2.5.3, ``DummyLM`` before 3.2)."""

    model: str | None = None
    timestamp: str | None = None


@dataclass(frozen=True, slots=True)
class Read:
    """One trace read from an input, or the error that stopped it; ``line`` is the JSON Lines line it was completed
    on (None for a ``.json`` file), ``first_line`` the line it began on where it spans several (OTLP spans), and
    ``input_id`` the id the input gave it where it has one (an OpenTelemetry trace id)."""

    trace: m.Trace | None = None
    error: TraceInputError | None = None
    line: int | None = None
    first_line: int | None = None
    input_id: str | None = None


class Assembly(ABC):
    """The traces of one input, from its JSON values given in order (see the module docstring)."""

    @abstractmethod
    def add(self, value: Any, kind: m.SourceKind, line: int | None) -> Iterator[Read]:
        """The traces that ``value`` (an object of ``kind``, on JSON Lines line ``line``) completes, or their errors."""

    def finish(self) -> Iterator[Read]:
        """What remains when the input ends (traces still waiting for more values); nothing by default."""
        return iter(())

    @property
    def waiting(self) -> int:
        """The number of traces begun and not read yet (that :meth:`finish` would read); none by default."""
        return 0


class _EachValue(Assembly):
    """Each value is one trace."""

    def __init__(self, source: Source, options: ReadOptions) -> None:
        self.source = source
        self.options = options

    def add(self, value: Any, kind: m.SourceKind, line: int | None) -> Iterator[Read]:
        try:
            yield Read(trace=self.source.read(value, kind, self.options), line=line)
        except TraceInputError as exc:
            yield Read(error=exc.located(line=line), line=line)


class Source(ABC):
    """One family of shapes (see the module docstring)."""

    format: m.SourceFormat
    """The ``source_format`` its traces record."""
    description: str
    """What it reads, in words for error messages (``a DSPy 3.4 lm15 Request, Response, Message or part``)."""
    written_kinds: frozenset[str] = frozenset()
    """The kinds :meth:`write` writes in this family's own JSON."""

    @abstractmethod
    def detect(self, value: Any) -> m.SourceKind | None:
        """The kind of object ``value`` is, when it carries a mark only this family writes; never raises."""

    def shape(self, value: Any) -> m.SourceKind | None:
        """The kind of object ``value`` has the shape of, for a value said to be of this family; never raises."""
        return self.detect(value)

    @abstractmethod
    def read(self, value: Any, kind: m.SourceKind, options: ReadOptions) -> m.Trace:
        """The trace of ``value`` (an object of ``kind``); :class:`~dspy_rdf.canonical.errors.TraceInputError` naming the field."""

    def write(self, trace: m.Trace) -> Any:
        """This family's own JSON of ``trace`` (of a kind in :attr:`written_kinds`), which :meth:`read` reads back to an
        equal trace."""
        raise NotImplementedError(f"{self.format} writes no JSON of its own for a {trace.source_kind}")

    def assembly(self, options: ReadOptions) -> Assembly:
        """A reader of one input's values, in order (see the module docstring); by default each value is one trace."""
        return _EachValue(self, options)
