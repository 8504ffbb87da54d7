"""The engines that validate trace graphs: one contract, the two built-in engines, and the registry that holds them
with those of other packages.

An engine is an object with a ``name`` and a :meth:`ValidationEngine.validate` method that takes the traces to
validate (:class:`~dspy_rdf.validation.units.TraceGraphs`: each trace one named graph, in a pyoxigraph store or on a
SPARQL server) and returns the :class:`~dspy_rdf.validation.report.Violation` s it finds. Cutting inputs into traces,
redaction and the report are the same for every engine, so an engine only decides what is wrong. An engine of
another package plugs in by :func:`register_engine` or by an entry point of the ``dspy_rdf.engines`` group (see
:mod:`dspy_rdf.plugins`); ``validate_*(engine=...)`` and ``dspy-rdf validate --engine NAME`` then take it as they take
a built-in one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from dspy_rdf.plugins import ENGINES_GROUP, load_plugin, plugin_names
from dspy_rdf.validation.fast import validate_graphs_fast
from dspy_rdf.validation.reference import validate_graphs_pyshacl
from dspy_rdf.validation.report import Violation
from dspy_rdf.validation.shapes import load_shapes
from dspy_rdf.validation.units import TraceGraphs

__all__ = ["Engine", "EngineChoice", "FastEngine", "PyshaclEngine", "ValidationEngine", "engine_for", "engine_names", "register_engine"]


class Engine(enum.StrEnum):
    """The built-in engines; both give the same results."""

    FAST = "fast"
    """The shapes compiled to SPARQL, run inside the store (default)."""
    PYSHACL = "pyshacl"
    """pySHACL over each trace: the reference."""


@runtime_checkable
class ValidationEngine(Protocol):
    """What validates trace graphs: ``validate`` returns the violations (of any severity) found in ``graphs``.

    ``shapes`` is a shapes file to use instead of the shipped shapes (None: the shipped ones); ``progress``, when
    given, is called with the number of graphs done since its last call, adding up to ``len(graphs.names)``;
    ``workers`` and ``slices`` are hints an engine may ignore (processes to use; whether to validate a large embedded
    store in slices held in memory)."""

    name: str

    def validate(
        self,
        graphs: TraceGraphs,
        *,
        shapes: str | Path | None,
        progress: Callable[[int], None] | None,
        workers: int,
        slices: bool | None,
    ) -> list[Violation]: ...


class FastEngine:
    """The shapes compiled to SPARQL (:mod:`dspy_rdf.validation.compiled`) and run inside pyoxigraph or on the
    SPARQL server (:mod:`dspy_rdf.validation.fast`)."""

    name = Engine.FAST.value

    def validate(
        self,
        graphs: TraceGraphs,
        *,
        shapes: str | Path | None,
        progress: Callable[[int], None] | None,
        workers: int,
        slices: bool | None,
    ) -> list[Violation]:
        return validate_graphs_fast(graphs, shapes=shapes, progress=progress, slices=slices, workers=workers)


class PyshaclEngine:
    """pySHACL over each trace in turn (:mod:`dspy_rdf.validation.reference`): the reference."""

    name = Engine.PYSHACL.value

    def validate(
        self, graphs: TraceGraphs, *, shapes: str | Path | None, progress: Callable[[int], None] | None, **hints: object
    ) -> list[Violation]:
        # one trace at a time in this process: the workers and slices hints do not apply
        return validate_graphs_pyshacl(graphs, shapes=load_shapes(shapes), progress=progress)


_ENGINES: dict[str, ValidationEngine] = {Engine.FAST.value: FastEngine(), Engine.PYSHACL.value: PyshaclEngine()}

EngineChoice = Engine | str | ValidationEngine
"""What ``engine=`` takes: a built-in engine, the name of a registered or installed one, or an engine object."""


def register_engine(engine: ValidationEngine) -> None:
    """Make ``engine`` available by its name, as the built-in engines are."""
    if not isinstance(engine, ValidationEngine):
        raise TypeError(f"{engine!r} is not a validation engine: it needs a name and a validate() method")
    _ENGINES[engine.name] = engine


def engine_names() -> list[str]:
    """The engines that can be named: the built-in ones first, then those registered or installed."""
    builtin = [engine.value for engine in Engine]
    others = sorted((set(_ENGINES) | set(plugin_names(ENGINES_GROUP))) - set(builtin))
    return builtin + others


def engine_for(choice: EngineChoice) -> ValidationEngine:
    """The engine ``choice`` names (an installed package's engine is loaded on first use; its entry point may name
    an engine object, or a class made with no arguments)."""
    if isinstance(choice, ValidationEngine):
        return choice
    name = str(choice)
    if name not in _ENGINES:
        found = load_plugin(ENGINES_GROUP, name)
        if found is None:
            raise ValueError(f"no validation engine {name!r}; the engines are: {', '.join(engine_names())}")
        engine = found() if isinstance(found, type) else found
        if not isinstance(engine, ValidationEngine):
            raise ValueError(f"the validation engine {name!r} has no name and validate() method ({type(engine).__name__})")
        _ENGINES[name] = engine
    return _ENGINES[name]
