"""Errors of dspy-rdf: each subclasses a built-in exception and says what is wrong and where.

A message may quote the offending value: it is redacted as exports are (:mod:`dspy_rdf.canonical.redact`), so that no secret
reaches a terminal or a log through an error.
"""

from __future__ import annotations


def shown(text: str) -> str:
    """Text as an error message may show it: with the secrets the default redaction patterns find replaced."""
    from dspy_rdf.canonical.redact import DEFAULT_REDACTOR  # redact imports the model: not needed until an error is made

    return DEFAULT_REDACTOR.redact_text(text)


class DspyRdfError(Exception):
    """Base class of every error dspy-rdf raises on purpose."""


class TraceInputError(DspyRdfError, ValueError):
    """A trace input (DSPy JSON, a dict, a JSONL line) does not have the expected shape.

    ``source`` names the file (or ``<input>``), ``line`` the JSONL line (1-based) when there is one, and
    ``field`` the dotted path of the offending value inside the object (``request.messages[0].role``).
    """

    def __init__(self, message: str, *, source: str = "<input>", line: int | None = None, field: str = "") -> None:
        self.reason = shown(message)
        self.source = source
        self.line = line
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        at = f", field {self.field}" if self.field else ""
        return f"{shown(where + at)}: {self.reason}"  # a file name or a key can hold a secret too

    def located(self, *, source: str | None = None, line: int | None = None) -> TraceInputError:
        """Return the same error with the file and line filled in."""
        return TraceInputError(
            self.reason,
            source=source if source is not None else self.source,
            line=line if line is not None else self.line,
            field=self.field,
        )


class RdfInputError(DspyRdfError, ValueError):
    """RDF input cannot be read back as traces: bad syntax, or a graph that does not follow the schema.

    ``node`` is the IRI of the offending node and ``prop`` the property, when known.
    """

    def __init__(self, message: str, *, source: str = "<input>", node: str = "", prop: str = "") -> None:
        self.reason = shown(message)
        self.source = source
        self.node = node
        self.prop = prop
        where = source + (f", node <{node}>" if node else "") + (f", property <{prop}>" if prop else "")
        super().__init__(f"{shown(where)}: {self.reason}")  # an IRI can hold a secret too


class ReportError(DspyRdfError, OSError):
    """An HTML report cannot be written: ``path`` is the report folder, the message says why and what to do."""

    def __init__(self, message: str, *, path: str = "") -> None:
        self.path = path
        super().__init__(message)
