"""Named SPARQL analytics over a trace store, with safe parameters and plain-text, CSV, TSV and JSON output.

The library is the ``.rq`` files shipped in ``dspy_rdf/analytics/queries/``, one question each. A file starts with a
comment header::

    # Question: which arguments were passed to a tool most often?
    # Parameters:
    #   tool (string, none) - only this tool
    #   limit (int, 20) - at most this many rows

(or ``# Parameters: none``). Every pattern sits inside ``GRAPH ?trace { ... }`` (one named graph per trace,
so the queries need no union default graph and never join across traces) and uses the derived facts of the
mapping (``dspy:answers``, the per-trace counts) rather than joins on call-id strings.

A query may have other versions, with the same header and the same rows: ``queries/scan/`` reads the triples, for a
query that reads the store's ledger when the ledger does not cover every trace; ``queries/<engine>/`` (for now
``virtuoso/``) is planned for how that engine evaluates it, and runs on the stores it answers
(:attr:`~dspy_rdf.store.TraceStore.sparql_engine`).

Parameters are never pasted into query text as the user wrote them:

- a parameterised query holds an inline data block whose variables are its parameters, with ``UNDEF`` for
  each, e.g. ``VALUES (?tool) { (UNDEF) }`` (the same block more than once where sub-SELECTs need the parameters
  apart: each is bound alike). As written that is valid SPARQL meaning "no filter"; binding a
  parameter replaces its ``UNDEF`` by the value serialised as one RDF term by :func:`sparql_term` (a literal
  escaped by pyoxigraph, re-parsed to check that it reads back as the same term), so the value is always
  data: it can neither end the literal nor add syntax. The block sent keeps only the parameters that are set,
  and is left out when none is (the same meaning: ``UNDEF`` constrains nothing; Virtuoso 7 joins an ``UNDEF`` row
  wrongly after a ``BIND``);
- ``date`` values must be ``YYYY-MM-DD`` and become ``xsd:date`` literals, ``int`` values become
  ``xsd:integer`` literals, both after validation;
- a ``limit`` parameter is validated as a non-negative integer and only that integer replaces the number of
  the query's ``LIMIT`` lines (a line of its own, at the start: the final one, and that of a top-N subquery) and of
  any ``VALUES (?limit) { (N) }`` line (a sub-SELECT that compares counts with the limit).

Unknown parameter names and invalid values raise :class:`ValueError` naming the parameter and the expected
type.

Raw SPARQL from a user (:func:`run_query` with query text) is checked by :func:`check_user_sparql`; see there.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import date
from importlib import resources
from typing import TYPE_CHECKING, Any, cast

from dspy_rdf.analytics.terminal import terminal_text

if TYPE_CHECKING:  # the store and pyoxigraph are imported when a query runs: `dspy-rdf --help` needs FORMATS only
    import pyoxigraph as ox

    from dspy_rdf.store import SparqlEngine, SparqlJson, TraceStore

__all__ = [
    "FORMATS",
    "UNKNOWN",
    "NamedQuery",
    "Parameter",
    "QueryResult",
    "bind_parameters",
    "check_user_sparql",
    "get_query",
    "list_queries",
    "migrate_warning",
    "query_form",
    "run_query",
    "sparql_term",
    "traces_to_migrate",
]

FORMATS = ("table", "csv", "tsv", "json")
"""Output formats of :meth:`QueryResult.format`."""

PARAMETER_TYPES = ("string", "date", "int", "class")
_XSD = "http://www.w3.org/2001/XMLSchema#"
_EXPECTED = {
    "string": "a string",
    "class": "a class name (Predict) or a qualified one (dspy.predict.predict.Predict)",
    "date": "a date written YYYY-MM-DD",
    "int": "an integer",
    "limit": "a non-negative integer",
}


# --- the library ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parameter:
    """One parameter of a named query; ``default`` is None when unset means "no filter"."""

    name: str
    type: str
    default: str | None
    description: str

    @property
    def is_limit(self) -> bool:
        return self.name == "limit"


@dataclass(frozen=True)
class NamedQuery:
    """A query of the library: its name (the file name), the question it answers, its parameters and text."""

    name: str
    question: str
    parameters: tuple[Parameter, ...]
    text: str
    notes: str = ""
    unknown: tuple[str, ...] = ()
    """Columns whose unbound cells mean that the traces do not say (shown as ``unknown``, never as 0 or blank)."""
    scan: str | None = None
    """For a query that reads the store's ledger (:mod:`dspy_rdf.store.ledger`): the same query over the triples
    (``queries/scan/``), run instead when the ledger does not cover every trace of the store."""
    engine_versions: tuple[tuple[SparqlEngine, str], ...] = ()
    """The same query planned for one engine's evaluation (``queries/<engine>/``), run on a store of that engine:
    the same rows, in a time the other text would not give there."""

    def parameter(self, name: str) -> Parameter:
        for p in self.parameters:
            if p.name == name:
                return p
        expected = ", ".join(p.name for p in self.parameters) or "none"
        raise ValueError(f"query {self.name!r} has no parameter {name!r} (its parameters: {expected})")


_PARAM_LINE = re.compile(r"^#\s+([a-z_][a-z0-9_]*)\s+\((\w+),\s*([^)]*)\)\s+-\s+(.+)$")
_VALUES_BLOCK = re.compile(r"^[ \t]*VALUES[ \t]*\(((?:[ \t]*\?[a-z_][a-z0-9_]*)+)[ \t]*\)[ \t]*\{[ \t]*\(((?:[ \t]*UNDEF)+)[ \t]*\)[ \t]*\}[ \t]*$", re.M)
_LIMIT_LINE = re.compile(r"^LIMIT[ \t]+(\d+)[ \t]*$", re.M)
_LIMIT_VALUE = re.compile(r"^([ \t]*VALUES \(\?limit\) \{ \()(\d+)(\) \})[ \t]*$", re.M)
_INDENTED_LIMIT = re.compile(r"^[ \t]+LIMIT[ \t]+\d+", re.M | re.I)


def _parse(name: str, text: str) -> NamedQuery:
    """Read the header of one ``.rq`` file and check that its parameters match its data block and LIMIT."""
    question = ""
    params: list[Parameter] = []
    notes: list[str] = []
    unknown: list[str] = []
    section = None
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        body = line[1:].strip()
        if body.startswith("Question:"):
            question, section = body[len("Question:"):].strip(), "question"
        elif body.startswith("Parameters:"):
            rest = body[len("Parameters:"):].strip()
            if rest not in ("", "none", "none."):
                raise ValueError(f"query {name}: write parameters one a line under '# Parameters:'")
            section = "parameters"
        elif body.startswith("Unknown:"):
            unknown += body[len("Unknown:"):].split()
            section = None
        elif body.startswith("Notes:"):
            notes.append(body[len("Notes:"):].strip())
            section = "notes"
        elif section == "parameters" and (match := _PARAM_LINE.match(line)):
            pname, ptype, default, description = match.groups()
            if ptype not in PARAMETER_TYPES:
                raise ValueError(f"query {name}: parameter {pname} has unknown type {ptype!r}")
            params.append(Parameter(pname, ptype, None if default.strip() == "none" else default.strip(), description.strip()))
        elif section == "notes":
            notes.append(body)
        elif section == "question" and body:
            question += " " + body
    if not question:
        raise ValueError(f"query {name}: no '# Question:' header")
    blocks = _VALUES_BLOCK.findall(text)
    data_params = [p.name for p in params if not p.is_limit]
    if data_params:
        if not blocks:
            raise ValueError(f"query {name}: expected a parameter block VALUES (...) {{ (UNDEF ...) }}")
        for block in blocks:
            variables = [v.strip()[1:] for v in block[0].split()]
            if variables != data_params or len(block[1].split()) != len(variables):
                raise ValueError(f"query {name}: a VALUES block binds {variables}, the header declares {data_params}")
    elif blocks:
        raise ValueError(f"query {name}: a VALUES parameter block but no parameters in the header")
    limits = _LIMIT_LINE.findall(text)
    limit = next((p for p in params if p.is_limit), None)
    if limit is not None:
        values = [match.group(2) for match in _LIMIT_VALUE.finditer(text)]
        if limit.type != "int" or not limits or any(found != limit.default for found in limits + values):
            raise ValueError(f"query {name}: the limit parameter needs 'LIMIT {limit.default}' lines (the final one, and any of a top-N subquery)")
        if _INDENTED_LIMIT.search(text):  # the parameter would not reach it
            raise ValueError(f"query {name}: every LIMIT line starts at the beginning of its line, where the limit parameter replaces it")
    return NamedQuery(name, question, tuple(params), text, " ".join(notes), tuple(unknown))


def _library() -> dict[str, NamedQuery]:
    from dspy_rdf.store.base import SparqlEngine  # the engines a query may have a version for

    folder = resources.files("dspy_rdf.analytics") / "queries"

    def texts(directory: str) -> dict[str, str]:
        return {entry.name: entry.read_text(encoding="utf-8") for entry in (folder / directory).iterdir() if entry.name.endswith(".rq")}

    # other versions of a query, by folder: over the triples (scan/), and planned for one engine (virtuoso/, ...)
    versions = {"scan": texts("scan")} | {engine.value: texts(engine.value) for engine in SparqlEngine if (folder / engine.value).is_dir()}
    for entry in folder.iterdir():  # a folder named for no engine would be a version no store ever runs
        if entry.is_dir() and entry.name not in versions and not entry.name.startswith(("_", ".")):
            raise ValueError(f"queries/{entry.name}/ is named for no engine (one of: {', '.join(engine.value for engine in SparqlEngine)}) and is not scan/")
    out = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".rq"):
            continue
        name = entry.name[:-3]
        query = _parse(name, entry.read_text(encoding="utf-8"))
        found = {directory: held.pop(entry.name) for directory, held in versions.items() if entry.name in held}
        for directory, text in found.items():
            other = _parse(name, text)
            if other.parameters != query.parameters or other.unknown != query.unknown:
                raise ValueError(f"query {name}: its {directory}/ version declares other parameters or unknown columns")
        scan = found.pop("scan", None)
        out[name] = replace(query, scan=scan, engine_versions=tuple((SparqlEngine(directory), text) for directory, text in found.items()))
    for directory, left in versions.items():
        if left:
            raise ValueError(f"queries/{directory}/{sorted(left)[0]} is a version of no query")
    return out


_CACHE: dict[str, NamedQuery] | None = None


def _queries() -> dict[str, NamedQuery]:
    global _CACHE
    if _CACHE is None:
        _CACHE = _library()
    return _CACHE


def list_queries() -> list[NamedQuery]:
    """Every named query of the library, sorted by name."""
    return list(_queries().values())


def get_query(name: str) -> NamedQuery:
    """The named query ``name``; ValueError listing the known names when there is none."""
    try:
        return _queries()[name]
    except KeyError:
        raise ValueError(f"no query named {name!r}; known queries: {', '.join(_queries())}") from None


# --- safe parameters --------------------------------------------------------------------------------------

_CHECK_STORE: ox.Store | None = None


def sparql_term(value: Any, type: str = "string") -> str:
    """``value`` as one SPARQL RDF term (``string`` -> plain literal, ``class`` -> the plain literal of a class's name
    (``dspy.predict.predict.Predict`` -> ``Predict``), ``date`` -> ``xsd:date``, ``int`` -> ``xsd:integer``).

    Strings are escaped by pyoxigraph's N-Triples serialisation of a literal (``\\"``, ``\\\\``, ``\\n`` ..., other
    control characters as ``\\uXXXX``), which is also SPARQL syntax. The result is then parsed back by
    pyoxigraph's SPARQL parser (as the single value of an inline data block, on an empty in-memory store) and
    must read back as exactly the same term, so a value the escaping did not neutralise is refused instead of
    being run. Raises ValueError for a value that is not of the type.
    """
    import pyoxigraph as ox

    if type in ("string", "class"):
        if not isinstance(value, str):
            raise ValueError(f"expected {_EXPECTED[type]}, got {value!r}")
        # a module is counted under its class's name, whatever recorded it: a qualified name means that name
        term = ox.Literal(value.rpartition(".")[2] if type == "class" else value)
    elif type == "date":
        if isinstance(value, date):
            value = value.isoformat()
        if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            raise ValueError(f"expected {_EXPECTED['date']}, got {value!r}")
        try:
            date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"expected {_EXPECTED['date']}, got {value!r} (no such day)") from None
        term = ox.Literal(value, datatype=ox.NamedNode(_XSD + "date"))
    elif type == "int":
        term = ox.Literal(str(_int(value, "int")), datatype=ox.NamedNode(_XSD + "integer"))
    else:
        raise ValueError(f"unknown parameter type {type!r} (expected one of {', '.join(PARAMETER_TYPES)})")
    text = str(term)
    global _CHECK_STORE
    if _CHECK_STORE is None:
        _CHECK_STORE = ox.Store()
    try:
        solutions = cast("ox.QuerySolutions", _CHECK_STORE.query(f"SELECT ?v WHERE {{ VALUES ?v {{ {text} }} }}"))
        [solution] = list(solutions)
        back = solution["v"]
    except (SyntaxError, ValueError):
        back = None
    if back != term:
        raise ValueError(f"cannot write {value!r} safely as a SPARQL literal")
    return text


def _int(value: Any, type: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected {_EXPECTED[type]}, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"[+-]?\d{1,18}", value.strip()):
        number = int(value.strip())
    else:
        raise ValueError(f"expected {_EXPECTED[type]}, got {value!r}")
    if type == "limit" and number < 0:
        raise ValueError(f"expected {_EXPECTED[type]}, got {value!r}")
    return number


def bind_parameters(query: NamedQuery, params: dict[str, Any] | None = None) -> str:
    """The text of ``query`` with ``params`` bound (see the module docstring); defaults fill unset parameters."""
    params = dict(params or {})
    for name in params:
        query.parameter(name)  # ValueError for an unknown name
    text = query.text
    data_params = [p for p in query.parameters if not p.is_limit]
    if data_params:
        bound: list[tuple[str, str]] = []  # (variable, term) of the parameters given a value
        for p in data_params:
            value = params.get(p.name, p.default)
            if value is None:
                continue
            try:
                bound.append((p.name, sparql_term(value, p.type)))
            except ValueError as exc:
                raise ValueError(f"parameter {p.name!r} of query {query.name!r}: {exc}") from None
        variables = " ".join(f"?{name}" for name, _ in bound)
        block = f"VALUES ({variables}) {{ ({' '.join(term for _, term in bound)}) }}" if bound else "# no parameter set"

        def bind(match: re.Match[str]) -> str:
            return match.group(0)[: len(match.group(0)) - len(match.group(0).lstrip())] + block

        text = _VALUES_BLOCK.sub(bind, text)  # every block (checked when the library was read)
    for p in query.parameters:
        if p.is_limit and p.name in params:
            try:
                number = _int(params[p.name], "limit")
            except ValueError as exc:
                raise ValueError(f"parameter {p.name!r} of query {query.name!r}: {exc}") from None
            text = _LIMIT_LINE.sub(f"LIMIT {number}", text)
            text = _LIMIT_VALUE.sub(lambda match: f"{match.group(1)}{number}{match.group(3)}", text)
    return text


# --- raw user SPARQL --------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
      (?P<comment>\#[^\n\r]*)
    | (?P<string>'''(?:[^'\\]|\\.|'(?!''))*'''|\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'(?:[^'\\\n\r]|\\.)*'|"(?:[^"\\\n\r]|\\.)*")
    | (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
    | (?P<var>[?$][A-Za-z0-9_\u00B7-\uFFFF]+)
    | (?P<pname>(?:[A-Za-z\u00C0-\uFFFF][\w.\-\u00B7-\uFFFF]*)?:(?:[\w\-\u00B7-\uFFFF:%.]|\\.)*)
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<space>\s+)
    | (?P<other>.)
    """,
    re.X | re.S,
)
_UPDATE_WORDS = {"INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH", "USING"}
_ALLOWED_DATASET_SCHEMES = ("http://", "https://", "urn:")
_SERVER_PROCEDURES = ("bif:", "sql:")  # Virtuoso's built-in functions and SQL procedures (bif:http_get fetches a URL)
_UNICODE_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")


def _unescape_codepoints(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        try:
            return chr(int(match.group(1) or match.group(2), 16))
        except ValueError:  # beyond U+10FFFF
            return match.group(0)

    return _UNICODE_ESCAPE.sub(one, text)


def _tokens(text: str) -> list[tuple[str, str]]:
    return [(m.lastgroup or "other", m.group()) for m in _TOKEN.finditer(text) if m.lastgroup not in ("space", "comment")]


MAX_NESTING = 128
"""The deepest nesting of brackets (``{ ( [``) raw SPARQL may have: a parser reads nested groups by recursion, and a
query nested thousands deep overflows its stack (pyoxigraph's, in the process that asked)."""


def _check_nesting(tokens: list[tuple[str, str]]) -> None:
    depth = 0
    for kind, value in tokens:
        if kind != "other":
            continue
        if value in "{([":
            depth += 1
            if depth > MAX_NESTING:
                raise ValueError(f"the query nests brackets more than {MAX_NESTING} deep, which is refused (no query needs it)")
        elif value in "})]":
            depth -= 1


def _check_tokens(tokens: list[tuple[str, str]], allow_federation: bool) -> None:
    _check_nesting(tokens)
    prefixes: dict[str, str] = {}
    for i, (kind, value) in enumerate(tokens):
        if kind in ("iri", "pname"):
            declared = kind == "pname" and value.split(":", 1)[0] in prefixes and not (i > 0 and tokens[i - 1][1].upper() == "PREFIX")
            iri = value[1:-1] if kind == "iri" else prefixes[value.split(":", 1)[0]] + value.split(":", 1)[1] if declared else value
            if iri.lower().startswith(_SERVER_PROCEDURES):
                raise ValueError(
                    f"{value} is refused: Virtuoso runs bif: and sql: names as its own functions and procedures, "
                    "which can fetch URLs (bif:http_get) and write"
                )
            continue
        if kind != "word":
            continue
        word = value.upper()
        if word == "PREFIX" and i + 2 < len(tokens) and tokens[i + 1][0] == "pname" and tokens[i + 2][0] == "iri":
            prefixes[tokens[i + 1][1][:-1]] = tokens[i + 2][1][1:-1]
        elif word in _UPDATE_WORDS:
            raise ValueError(f"only read-only queries (SELECT, ASK) are run: {value} is an update")
        elif word == "DEFINE":
            raise ValueError(
                "DEFINE (a Virtuoso pragma) is refused: a pragma can make the server fetch URLs and write what it "
                "fetched into the store (get:soft, input:grab-*) or change how it runs the query"
            )
        elif word == "SERVICE" and not allow_federation:
            raise ValueError("SERVICE (federated query to another endpoint) is refused; allow it with --allow-federation (allow_federation=True in Python)")
        elif word == "FROM" and not allow_federation:
            j = i + 1
            if j < len(tokens) and tokens[j][0] == "word" and tokens[j][1].upper() == "NAMED":
                j += 1
            if j >= len(tokens):
                raise ValueError("FROM without a graph IRI")
            kind_j, target = tokens[j]
            if kind_j == "iri":
                iri = target[1:-1]
            elif kind_j == "pname" and target.split(":", 1)[0] in prefixes:
                prefix, local = target.split(":", 1)
                iri = prefixes[prefix] + local
            else:
                raise ValueError(f"FROM {target}: write the graph as a full <IRI>")
            if not iri.startswith(_ALLOWED_DATASET_SCHEMES):
                raise ValueError(
                    f"FROM <{iri}> is refused: only http(s): and urn: graph IRIs are allowed (a server may read "
                    "other IRIs, such as file:, from its own disk); allow it with --allow-federation (allow_federation=True in Python)"
                )


_QUERY_FORMS = ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")


def query_form(text: str) -> str:
    """The form of a SPARQL query (``SELECT``, ``ASK``, ``CONSTRUCT`` or ``DESCRIBE``): its first keyword of those
    outside comments, strings and IRIs; ValueError when it has none (an update, or not SPARQL)."""
    for kind, value in _tokens(_unescape_codepoints(text)):
        if kind == "word" and value.upper() in _QUERY_FORMS:
            return value.upper()
    raise ValueError("not a SPARQL query: no SELECT, ASK, CONSTRUCT or DESCRIBE")


def check_user_sparql(text: str, *, allow_federation: bool = False) -> None:
    """Refuse raw SPARQL that reaches beyond the store; ValueError saying what and why.

    Refused: updates (``INSERT``, ``DELETE``, ``LOAD``, ``DROP`` ... the store only runs SELECT and ASK), server
    pragmas (Virtuoso's ``DEFINE get:soft "replace"`` fetches a URL and writes it into the store), the server's own
    functions and procedures (Virtuoso's ``bif:`` and ``sql:`` names: ``bif:http_get`` fetches a URL), and,
    unless ``allow_federation``: ``SERVICE`` (the server would query another endpoint) and ``FROM`` /
    ``FROM NAMED`` with a graph IRI that is not ``http(s):`` or ``urn:`` (trace graphs are ``urn:`` IRIs; some
    servers dereference other IRIs such as ``file:``), including relative IRIs and prefixed names whose prefix
    is not declared.

    How: pyoxigraph has no public SPARQL parser (only ``Store.query``, which would run the query), so this is a
    careful lexical check on the SPARQL token grammar: comments, string literals (all four quotings, with
    escapes) and ``<IRI>``s are consumed as whole tokens, variables and prefixed names too, so a keyword counts
    only where the grammar would read a keyword (``"SERVICE"`` in a string, ``?service`` or ``ex:load`` do not).
    SPARQL processes ``\\uXXXX`` escapes before parsing (``SERVIC\\u0045`` is ``SERVICE``), so the text is checked
    both as written and with those escapes decoded; the store then parses the same text it would have parsed
    anyway. The check errs on the side of refusing.
    """
    for variant in {text, _unescape_codepoints(text)}:
        _check_tokens(_tokens(variant), allow_federation)


# --- results ----------------------------------------------------------------------------------------------


UNKNOWN = "unknown"
"""How an unbound cell of a column that says unknowns (:attr:`NamedQuery.unknown`) is shown in tables, CSV and TSV."""


def _cell(value: Any, unknown: bool = False) -> str:
    if value is None:
        return UNKNOWN if unknown else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def migrate_warning(to_migrate: int, store: str | None = None, *, missing_from: str = "these rows") -> str | None:
    """One line telling that ``to_migrate`` traces of an earlier release may be missing from an answer and how to
    bring them up to date (``store``: the store as ``--store`` names it); None when there are none."""
    if not to_migrate:
        return None
    many = to_migrate != 1
    where = f" --store {shlex.quote(store)}" if store else ""
    return (
        f"{to_migrate} trace{'s' if many else ''} of this store {'were' if many else 'was'} written by an earlier release of dspy-rdf "
        f"and may be missing from {missing_from}: run `dspy-rdf migrate{where}` to bring {'them' if many else 'it'} up to date"
    )


@dataclass
class QueryResult:
    """The answer to one query: column names, rows of Python values (None when unbound), and the SPARQL JSON."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    raw: SparqlJson = field(repr=False)
    sparql: str = field(default="", repr=False)
    unknown: frozenset[str] = frozenset()
    """Columns where None means that the traces do not say (shown as ``unknown``)."""
    to_migrate: int = 0
    """Traces of the store that an earlier release wrote, which the rows may leave out (their derived facts are of an
    earlier version) until ``dspy-rdf migrate`` brings them up to date: :meth:`migrate_warning` says so."""

    def migrate_warning(self, store: str | None = None) -> str | None:
        """One line telling that the rows may leave out :attr:`to_migrate` traces and how to fix it (``store``: the
        store as ``--store`` names it), or None when every trace is of this release."""
        return migrate_warning(self.to_migrate, store)

    @classmethod
    def from_json(cls, raw: SparqlJson, sparql: str = "", unknown: tuple[str, ...] | frozenset[str] = ()) -> QueryResult:
        from dspy_rdf.store import term_value

        if "boolean" in raw:
            return cls(["boolean"], [(bool(raw["boolean"]),)], raw, sparql)
        columns = list(raw["head"].get("vars", []))
        rows = [tuple(term_value(b.get(c)) for c in columns) for b in raw["results"]["bindings"]]
        return cls(columns, rows, raw, sparql, frozenset(unknown))

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts by column name."""
        return [dict(zip(self.columns, row)) for row in self.rows]

    def to_dataframe(self):
        """The rows as a pandas DataFrame (needs pandas)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("QueryResult.to_dataframe needs pandas: pip install pandas") from None
        return pd.DataFrame.from_records(self.rows, columns=self.columns)

    def to_table(self, *, max_width: int = 60) -> str:
        """An aligned plain-text table; line breaks in cells shown as ``\\n``, cells cut to ``max_width`` characters,
        except IRIs: they are shown whole, so that one can be pasted (into ``--trace``, ``dspy-rdf delete``)."""

        def show(value: Any, iri: bool, unknown: bool) -> str:
            if isinstance(value, float):  # sums of costs carry binary noise (0.00035879999999999994); csv/json keep it
                value = float(format(value, ".12g"))
            text = terminal_text(_cell(value, unknown).replace("\r", "\\r").replace("\n", "\\n").replace("\t", " "))
            return text if iri or len(text) <= max_width else text[: max_width - 1] + "…"

        bindings = self.raw.get("results", {}).get("bindings", [])
        if len(bindings) != len(self.rows):  # a boolean answer, or a result made by hand: no term types to go by
            bindings = [{}] * len(self.rows)
        body = [
            [show(v, (b.get(c) or {}).get("type") == "uri", c in self.unknown) for c, v in zip(self.columns, row)]
            for row, b in zip(self.rows, bindings)
        ]
        widths = [max([len(c)] + [len(r[i]) for r in body]) for i, c in enumerate(self.columns)]
        def number(value: Any) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool)

        numeric = [
            any(number(r[i]) for r in self.rows) and all(number(r[i]) or r[i] is None for r in self.rows) for i in range(len(self.columns))
        ]

        def line(cells: list[str]) -> str:
            return "  ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric)).rstrip()

        out = [line(list(self.columns)), "  ".join("-" * w for w in widths)]
        out += [line(r) for r in body]
        out.append(f"({len(self.rows)} row{'s' if len(self.rows) != 1 else ''})")
        return "\n".join(out)

    def to_csv(self) -> str:
        """RFC 4180 CSV with a header line; unbound cells empty (``unknown`` in a column that says unknowns)."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        writer.writerow(self.columns)
        writer.writerows([[_cell(v, c in self.unknown) for c, v in zip(self.columns, row)] for row in self.rows])
        return buffer.getvalue()

    def to_tsv(self) -> str:
        """Tab-separated values with a header line; ``\\``, tab, line feed and carriage return escaped as ``\\\\ \\t \\n \\r``."""

        def esc(value: Any, unknown: bool) -> str:
            return _cell(value, unknown).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")

        lines = ["\t".join(self.columns)] + ["\t".join(esc(v, c in self.unknown) for c, v in zip(self.columns, row)) for row in self.rows]
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        """The SPARQL 1.1 Query Results JSON, as returned by the store."""
        return json.dumps(self.raw, indent=2, ensure_ascii=False) + "\n"

    def format(self, fmt: str = "table") -> str:
        """The result in one of :data:`FORMATS`."""
        if fmt == "table":
            return self.to_table() + "\n"
        if fmt == "csv":
            return self.to_csv()
        if fmt == "tsv":
            return self.to_tsv()
        if fmt == "json":
            return self.to_json()
        raise ValueError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def run_query(
    store: TraceStore,
    name_or_sparql: str,
    params: dict[str, Any] | None = None,
    *,
    allow_federation: bool = False,
    check_migration: bool = True,
) -> QueryResult:
    """Run a named query of the library (with ``params``) or raw SPARQL text (checked by :func:`check_user_sparql`).

    A single word is taken as a query name (ValueError listing the names when unknown); anything else as SPARQL.
    With ``check_migration`` the result says how many traces of the store an earlier release wrote
    (:attr:`QueryResult.to_migrate`: the rows may leave them out), from the ledger's counts when it is current.
    """
    text = name_or_sparql.strip()
    unknown: tuple[str, ...] = ()
    ledger_current: bool | None = None
    answer: SparqlJson | None = None
    if _NAME.fullmatch(text):
        query = get_query(text)
        if query.engine_versions and (planned := dict(query.engine_versions).get(store.sparql_engine)) is not None:
            query = replace(query, text=planned)
        sparql, unknown = bind_parameters(query, params), query.unknown
        if query.scan is not None:
            ledger_current, answer = _answer_over_the_ledger(store, query, sparql)
            if not ledger_current:  # the ledger does not cover every trace: read the triples
                sparql = bind_parameters(replace(query, text=query.scan), params)
    else:
        if params:
            raise ValueError("parameters apply to named queries only; raw SPARQL takes none")
        check_user_sparql(name_or_sparql, allow_federation=allow_federation)
        sparql = name_or_sparql
    result = QueryResult.from_json(answer if answer is not None else store.select(sparql), sparql, unknown)
    if check_migration:
        result.to_migrate = traces_to_migrate(store, ledger_covers=True if ledger_current else None)
    return result


def _answer_over_the_ledger(store: TraceStore, query: NamedQuery, sparql: str) -> tuple[bool, SparqlJson | None]:
    """Whether the ledger covers every trace for ``query`` (a canned query over it) and, when it does, the answer of
    ``sparql`` (None: to be asked again).

    On a store that runs queries at once, the query runs beside the check, which counts the trace nodes (0.2-0.3 s at
    a million LM calls, a third of the query it guards). Its answer is kept only when the ledger is current and held
    the same entries before the query and after the check: any write, removal, fold or upgrade meanwhile adds or
    replaces an entry, and the query is then asked again. When the ledger is not current the answer is dropped, after
    waiting for the query (a query over an older ledger, lacking what it looks up, ends at once; over a ledger short
    of a few traces it runs in full before the scan starts)."""
    from dspy_rdf.store.ledger import reads_arguments, reads_maxima

    def covered() -> bool:
        return store.ledger_is_current(maxima=reads_maxima(query.text), arguments=reads_arguments(query.text))

    if not store.concurrent_queries:
        return (True, store.select(sparql)) if covered() else (False, None)
    entries = store.ledger_entries()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dspy-rdf-query") as pool:
        early = pool.submit(store.select, sparql)
        if not covered():
            early.exception()  # waited for, and dropped with any error it met
            return False, None
        answer = early.result()
    return True, answer if store.ledger_entries() == entries else None


def traces_to_migrate(store: TraceStore, *, ledger_covers: bool | None = None) -> int:
    """:meth:`~dspy_rdf.store.TraceStore.traces_to_migrate`, or 0 when the store cannot count them: the count only
    adds a warning to an answer the store gave already, which a failure to count must not take away."""
    from dspy_rdf.store import StoreError

    try:
        return store.traces_to_migrate(ledger_covers=ledger_covers)
    except StoreError:
        return 0
