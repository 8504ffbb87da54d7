"""``dspy-rdf mcp``: a trace store as tools for agents, over the Model Context Protocol.

Six tools, each a thin call of the library:

- ``list_queries``: the named queries of :mod:`dspy_rdf.analytics.catalog`, their questions and parameters;
- ``run_query``: one of them, parameters bound as ``dspy-rdf query NAME --param NAME=VALUE`` binds them;
- ``run_sparql``: your own SELECT or ASK, refused by :func:`~dspy_rdf.analytics.catalog.check_user_sparql` as
  ``dspy-rdf query --sparql`` refuses it (updates, ``SERVICE``, server pragmas and functions), with a timeout;
- ``describe_schema``: the schema's classes and slots with their descriptions, read from the SHACL shapes generated
  from ``schema/dspy.yaml`` (so the base install needs no LinkML);
- ``get_trace``: one trace as TriG, Turtle, N-Quads, or the canonical JSON ``dspy-rdf to-json`` writes;
- ``validate``: SHACL over the store or one trace, the report of ``dspy-rdf validate --store``.

Rows come back as JSON objects, at most ``max_rows`` of them, and an answer cut there says so (``truncated``). An
error (a query that is not valid SPARQL, an update, an unknown query, parameter or trace) is a tool error of one line.

The store is opened read-only for each call and closed after it, so that an export can write it between calls
(pyoxigraph cannot read a store that another process writes) and each call sees what is stored now.

Transports: stdio (the default) and streamable HTTP on ``/mcp``. Over HTTP the server binds to 127.0.0.1; any other
host needs a token (``--token`` or ``$DSPY_RDF_TOKEN``), and then every request must carry
``Authorization: Bearer <token>`` (401 otherwise). The token is never printed.

The ``mcp`` package is an optional dependency: ``pip install 'dspy-rdf[mcp]'``.

>>> tools = StoreTools(store="no-such-store")
>>> [query["name"] for query in tools.list_queries()][:2]
['candidate_gains', 'candidate_lineage']
"""

from __future__ import annotations

import contextlib
import hmac
import io
import json
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from dspy_rdf.analytics.catalog import QueryResult, check_user_sparql, get_query, list_queries, run_query, traces_to_migrate
from dspy_rdf.canonical.errors import DspyRdfError
from dspy_rdf.canonical.identity import DEFAULT_BASE, is_absolute_iri
from dspy_rdf.canonical.redact import DEFAULT_REDACTOR
from dspy_rdf.rdf.vocab import DSPY
from dspy_rdf.service.server import check_binding
from dspy_rdf.store import TraceStore, check_trace_iri, open_store

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = [
    "DEFAULT_ROW_LIMIT",
    "DEFAULT_TIMEOUT",
    "MAX_RUNNING_CALLS",
    "MAX_ROW_LIMIT",
    "TOKEN_ENV",
    "TRACE_FORMATS",
    "StoreTools",
    "build_server",
    "require_bearer_token",
    "run_server",
]

DEFAULT_ROW_LIMIT = 200
"""Rows a query answers with unless the call asks for another number."""
MAX_ROW_LIMIT = 10_000
"""The most rows one call may ask for: an agent's context is the limit, not the store."""
DEFAULT_TIMEOUT = 30.0
"""Seconds a query may run before the call fails."""
MAX_RUNNING_CALLS = 4
"""Calls that may run at once, those past their timeout included (their work runs on until the store ends it)."""
DEFAULT_MAX_CHARS = 200_000
"""The longest trace text ``get_trace`` returns unless asked for more."""
DEFAULT_MAX_RESULTS = 50
"""Validation results ``validate`` returns unless asked for another number."""
TOKEN_ENV = "DSPY_RDF_TOKEN"
"""The environment variable holding the HTTP transport's token (safer than ``--token``, which ``ps`` shows)."""
TRACE_FORMATS = ("trig", "turtle", "nquads", "json")
"""What ``get_trace`` writes a trace as."""

_INSTALL_HINT = "the MCP server needs the mcp package: pip install 'dspy-rdf[mcp]'"

TraceFormat = Literal["trig", "turtle", "nquads", "json"]
T = TypeVar("T")


def _import_mcp() -> None:
    """Fail with the install hint, in one line, when the optional ``mcp`` package (2.x) is missing."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:  # mcp missing, or mcp 1.x (FastMCP, before MCPServer)
        raise ImportError(_INSTALL_HINT) from None


# --- the tools, without MCP --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreTools:
    """What the MCP tools do, callable without MCP: each method opens the store read-only (``store`` as ``--store``
    takes it: a directory, a URL, or None for the default store), answers with JSON-ready values and closes it.
    Errors are :class:`ValueError` or :class:`~dspy_rdf.canonical.errors.DspyRdfError` with a one-line message."""

    store: str | None = None
    row_limit: int = DEFAULT_ROW_LIMIT
    timeout: float = DEFAULT_TIMEOUT

    @contextlib.contextmanager
    def opened(self) -> Iterator[TraceStore]:
        """The store, open read-only for one call."""
        with open_store(self.store or None, read_only=True) as store:
            yield store

    def list_queries(self) -> list[dict[str, Any]]:
        """Every named query: name, question, notes and parameters (name, type, default, description)."""
        return [
            {
                "name": q.name, "question": q.question, "notes": q.notes,
                "parameters": [{"name": p.name, "type": p.type, "default": p.default, "description": p.description} for p in q.parameters],
            }
            for q in list_queries()
        ]

    def run_query(self, name: str, params: dict[str, str | int] | None = None, max_rows: int | None = None) -> dict[str, Any]:
        """The rows of the named query ``name`` with ``params`` bound (values as ``--param`` gives them: text)."""
        get_query(name)  # a name, never SPARQL text, which catalog.run_query would run (unknown: ValueError naming them)
        limit = self._limit(max_rows)
        # --param gives every value as text; an int from JSON is read the same way (limit=5, framework_tools=1)
        bound = {key: value if isinstance(value, str) else str(value) for key, value in (params or {}).items()}
        with self.opened() as store:
            result = run_query(store, name, bound)
        return rows_answer(result, limit)

    def run_sparql(self, sparql: str, max_rows: int | None = None) -> dict[str, Any]:
        """The rows of a read-only SPARQL query (SELECT or ASK), refused as ``dspy-rdf query --sparql`` refuses it."""
        try:
            check_user_sparql(sparql)
        except ValueError as exc:  # federation stays refused here: no call can allow it
            raise ValueError(str(exc).partition("; allow it with --allow-federation")[0]) from None
        limit = self._limit(max_rows)
        deadline = time.monotonic() + self.timeout
        with self.opened() as store:
            raw = select_rows(store, sparql, limit, deadline)
            result = QueryResult.from_json(raw, sparql)
            result.to_migrate = traces_to_migrate(store)
        return rows_answer(result, limit)

    def describe_schema(self, class_name: str | None = None) -> dict[str, Any]:
        """The schema's classes (name, IRI, description, parents, slot names) or, given ``class_name``, that class
        with each slot's description, range, whether it is required and whether it holds several values."""
        classes = schema_classes()
        if class_name is None:
            return {
                "namespace": DSPY, "prefix": "dspy",
                "classes": [{k: v for k, v in c.items() if k != "slots"} | {"slots": [s["name"] for s in c["slots"]]} for c in classes.values()],
                "note": "call describe_schema with class_name for the slots' descriptions and ranges",
            }
        wanted = class_name.removeprefix("dspy:").rpartition("/")[2]
        if wanted not in classes:
            raise ValueError(f"no class {class_name!r} in the schema; its classes: {', '.join(classes)}")
        return classes[wanted]

    def get_trace(self, trace: str, format: TraceFormat = "trig", max_chars: int = DEFAULT_MAX_CHARS) -> dict[str, Any]:
        """One trace, by IRI or by key (``content-…``, ``run-…``), as text in ``format``."""
        if format not in TRACE_FORMATS:
            raise ValueError(f"unknown trace format {format!r} (expected one of {', '.join(TRACE_FORMATS)})")
        with self.opened() as store:
            iri = resolve_trace(store, trace)
            if format == "json":
                from dspy_rdf.sources.tracejson import trace_to_json

                [(_, found)] = list(store.traces([iri]))
                text = json.dumps(trace_to_json(found), indent=2, ensure_ascii=False) + "\n"
            else:
                buffer = io.BytesIO()
                store.dump(buffer, traces=[iri], trig=format != "nquads")
                text = buffer.getvalue().decode("utf-8")
                if format == "turtle":
                    text = _turtle(buffer.getvalue())
        if len(text) > max_chars:
            raise ValueError(
                f"trace {iri} is {len(text):,} characters as {format}, more than max_chars ({max_chars:,}); ask for "
                "more, or query the parts you need with run_sparql"
            )
        return {"trace": iri, "format": format, "text": text}

    def validate(self, trace: str | None = None, engine: str = "fast", max_results: int = DEFAULT_MAX_RESULTS) -> dict[str, Any]:
        """SHACL validation of the store (or of one trace): the summary, counts and the first ``max_results`` results."""
        from dspy_rdf.validation import Severity, engine_for, validate_store

        if max_results < 0:
            raise ValueError(f"max_results must be 0 or more, not {max_results}")
        chosen = engine_for(engine)  # an unknown engine is refused before the store is read
        with self.opened() as store:
            traces = [resolve_trace(store, trace)] if trace is not None else None
            # workers=1: validate in this process; forking worker processes from a server's threads is not safe
            report = validate_store(store, traces=traces, engine=chosen, workers=1)
            where = f"the store at {store.location}"
        counts = report.counts()
        results = [x.to_dict() for x in report.violations]
        answer: dict[str, Any] = {
            "summary": report.nothing_found(where) or report.summary(),
            "conforms": report.conforms and report.validated > 0,
            "traces_validated": len(report.traces),
            "prov_views_validated": len(report.views),
            "violation_count": counts[Severity.VIOLATION],
            "warning_count": counts[Severity.WARNING],
            "info_count": counts[Severity.INFO],
            "results": results[:max_results],
            "truncated": len(results) > max_results,
        }
        if answer["truncated"]:
            answer["note"] = f"the first {max_results} of {len(results)} results; ask for more with max_results"
        return answer

    def _limit(self, max_rows: int | None) -> int:
        limit = self.row_limit if max_rows is None else max_rows
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_ROW_LIMIT:
            raise ValueError(f"max_rows must be an integer from 1 to {MAX_ROW_LIMIT:,}, not {max_rows!r}")
        return limit


def rows_answer(result: QueryResult, limit: int) -> dict[str, Any]:
    """A query's answer as a tool gives it: its columns, at most ``limit`` rows as objects, and whether it was cut."""
    records = result.records()
    answer: dict[str, Any] = {"columns": result.columns, "rows": records[:limit], "row_count": min(len(records), limit), "truncated": len(records) > limit}
    if answer["truncated"]:
        answer["note"] = f"truncated: only the first {limit} rows; ask for more with max_rows (up to {MAX_ROW_LIMIT:,}), or narrow the query"
    if (warning := result.migrate_warning()) is not None:
        answer["warning"] = warning
    return answer


def select_rows(store: TraceStore, sparql: str, limit: int, deadline: float) -> dict[str, Any]:
    """SPARQL 1.1 JSON results of ``sparql``, with at most ``limit`` + 1 rows (one more tells that there were more).

    The embedded store reads rows as the query makes them, so a huge answer is never held whole and a query still
    making rows past ``deadline`` stops; a SPARQL server answers whole (it has its own timeout), cut afterwards."""
    return store.select(sparql, limit=limit + 1, deadline=deadline)


def resolve_trace(store: TraceStore, trace: str) -> str:
    """The IRI of the stored trace ``trace`` names: its IRI, or its key (``content-…``, ``run-…``) under the default
    base or any other base the store uses; ValueError when the store holds no such trace."""
    trace = trace.strip()
    if is_absolute_iri(trace):
        iri = check_trace_iri(trace)
        if not store.missing_traces([iri]):
            return iri
    else:
        if not store.missing_traces([DEFAULT_BASE + trace]):
            return DEFAULT_BASE + trace
        # a store written with another --base: the key ends the IRI
        found = [iri for iri in store.trace_iris() if iri.endswith(trace) and iri[: -len(trace)][-1:] in (":", "/", "#")]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise ValueError(f"{trace!r} ends {len(found)} trace IRIs; give the whole IRI")
    raise ValueError(f"no trace {trace} in the store (run_query longest_conversations lists trace IRIs)")


def _turtle(trig: bytes) -> str:
    """One trace's TriG as Turtle: its triples, without the graph name."""
    import pyoxigraph as ox

    from dspy_rdf.rdf.vocab import PREFIXES

    triples = [quad.triple for quad in ox.parse(trig, format=ox.RdfFormat.TRIG)]
    return (ox.serialize(triples, format=ox.RdfFormat.TURTLE, prefixes=PREFIXES) or b"").decode("utf-8")


# --- the schema, from the generated SHACL shapes -----------------------------------------------------------

_SH = "http://www.w3.org/ns/shacl#"
_SLOTS_QUERY = f"""
PREFIX sh: <{_SH}>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
SELECT ?class ?comment ?path ?description ?datatype ?range ?min ?max ?order ?value WHERE {{
  ?shape a sh:NodeShape ; sh:targetClass ?class .
  OPTIONAL {{ ?shape rdfs:comment ?comment }}
  OPTIONAL {{
    ?shape sh:property ?property . ?property sh:path ?path . FILTER(isIRI(?path))
    OPTIONAL {{ ?property sh:description ?description }}
    OPTIONAL {{ ?property sh:datatype ?datatype }}
    OPTIONAL {{ ?property sh:class ?range }}
    OPTIONAL {{ ?property sh:minCount ?min }}
    OPTIONAL {{ ?property sh:maxCount ?max }}
    OPTIONAL {{ ?property sh:order ?order }}
    OPTIONAL {{ ?property sh:in/rdf:rest*/rdf:first ?value }}
  }}
}}"""


@lru_cache(maxsize=1)
def schema_classes() -> dict[str, dict[str, Any]]:
    """The schema's classes by name, each with its IRI, description, parents and slots, read from the generated shapes
    (``shapes/dspy.shacl.ttl``: one node shape per class, one property shape per slot) and class hierarchy."""
    import pyoxigraph as ox

    from dspy_rdf.canonical.schema_tables import SLOT_URIS
    from dspy_rdf.rdf.vocab import XSD
    from dspy_rdf.resources import shapes_dir
    from dspy_rdf.validation.shapes import CLASSES_FILE, SHAPES_FILE

    graph = ox.Store()
    graph.load(path=str(shapes_dir() / SHAPES_FILE), format=ox.RdfFormat.TURTLE)
    graph.load(path=str(shapes_dir() / CLASSES_FILE), format=ox.RdfFormat.N_TRIPLES)
    slot_names = {iri: name for name, iri in SLOT_URIS.items()}

    def short(iri: str) -> str:
        for namespace in (DSPY, XSD, "https://w3id.org/linkml/"):
            if iri.startswith(namespace):
                return iri[len(namespace):]
        return iri

    classes: dict[str, dict[str, Any]] = {}
    slots: dict[tuple[str, str], dict[str, Any]] = {}
    for row in graph.query(_SLOTS_QUERY):  # type: ignore[union-attr]  # a SELECT gives solutions
        iri = row["class"].value
        if not iri.startswith(DSPY):  # linkml:Any, the range of JSON-valued slots, is no class of the schema
            continue
        name = short(iri)
        if name not in classes:
            comment = row["comment"]
            classes[name] = {"name": name, "iri": iri, "description": comment.value if comment else None, "parents": [], "slots": []}
        if row["path"] is None:
            continue
        path = row["path"].value
        key = (name, path)
        if key not in slots:
            datatype, range_, order = row["datatype"], row["range"], row["order"]
            minimum, maximum, description = row["min"], row["max"], row["description"]
            slots[key] = {
                "name": slot_names.get(path, short(path)), "iri": path,
                "description": description.value if description else None,
                "range": short((range_ or datatype).value) if (range_ or datatype) else "any JSON value",
                "required": minimum is not None and int(minimum.value) > 0,
                "multivalued": maximum is None or int(maximum.value) > 1,
                "order": int(order.value) if order else 0,
            }
            classes[name]["slots"].append(slots[key])
        if row["value"] is not None:
            slots[key].setdefault("values", []).append(row["value"].value)
    subclass = ox.NamedNode("http://www.w3.org/2000/01/rdf-schema#subClassOf")
    for quad in graph.quads_for_pattern(None, subclass, None):
        if not isinstance(quad.subject, ox.NamedNode) or not isinstance(quad.object, ox.NamedNode):
            continue
        child, parent = short(quad.subject.value), short(quad.object.value)
        if child in classes:
            classes[child]["parents"].append(parent)
    for described in classes.values():
        described["parents"].sort()
        described["slots"].sort(key=lambda s: (s["order"], s["name"]))
        for slot in described["slots"]:
            del slot["order"]
            if "values" in slot:
                slot["values"].sort()
    return dict(sorted(classes.items()))


# --- the MCP server ----------------------------------------------------------------------------------------

_INSTRUCTIONS = """\
Tools over a store of DSPy traces (LM calls, messages, parts, tool calls and results, usage and cost) kept as RDF
with the dspy: vocabulary (https://w3id.org/lmodel/dspy/), one named graph per trace, whose name is the trace IRI.
Start with list_queries and run_query (named, tested questions); describe_schema says which classes and properties
there are, for your own read-only SPARQL with run_sparql (put patterns inside GRAPH ?trace { ... }). get_trace
fetches one trace; validate checks traces against the SHACL shapes. Unknown values (tokens, cost) are null, never 0."""
_INSTRUCTIONS = " ".join(_INSTRUCTIONS.split())  # one paragraph: clients show it as they wrap it


_MESSAGE_CHARS = 1000


def _one_line(error: BaseException) -> str:
    """An error as the tool returns it: one line, secrets redacted as the command line redacts its messages."""
    text = " ".join(str(error).split()) or type(error).__name__
    if len(text) > _MESSAGE_CHARS:  # pyoxigraph's syntax errors list every token it expected
        text = text[: _MESSAGE_CHARS - 1] + "…"
    return DEFAULT_REDACTOR.redact_text(text)


def _arguments_message(error: Any) -> str:
    """A pydantic ValidationError of a tool's arguments in one line: ``missing argument 'name'; argument 'max_rows':
    Input should be a valid integer``."""
    parts = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"])
        parts.append(f"missing argument {where!r}" if item["type"] == "missing" else f"argument {where!r}: {item['msg']}")
    return "; ".join(parts) or "invalid arguments"


def build_server(tools: StoreTools) -> MCPServer:
    """The MCP server whose tools call ``tools``: every expected error (bad SPARQL, an update, an unknown query,
    parameter or trace, a store that cannot be read) becomes a tool error of one line."""
    _import_mcp()
    from importlib.metadata import PackageNotFoundError, version

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations
    from pydantic import ValidationError

    try:
        installed = version("dspy-rdf")
    except PackageNotFoundError:  # run from a checkout that was not installed
        installed = ""

    class Server(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                # arguments that do not match a tool's parameters: pydantic's report spans lines and links to its docs
                if isinstance(exc.__cause__, ValidationError):
                    raise ToolError(f"Error executing tool {name}: {_arguments_message(exc.__cause__)}") from exc.__cause__
                raise

    server: MCPServer = Server("dspy-rdf", instructions=_INSTRUCTIONS, version=installed, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    running = threading.BoundedSemaphore(MAX_RUNNING_CALLS)

    async def call(function: Callable[[], T], *, timeout: float | None = None) -> T:
        import anyio

        # A call past its timeout gets its answer (an error) at once, but the store's work cannot be stopped: it runs
        # on in its thread until the store ends it. So that such calls cannot pile up and hold every core, no more
        # than MAX_RUNNING_CALLS run at once, finished or abandoned.
        if not running.acquire(blocking=False):
            raise ToolError(
                f"{MAX_RUNNING_CALLS} calls are still running (one past its timeout runs on until the store has finished "
                "it); try again in a moment, with a narrower query"
            )

        def run() -> T:
            try:
                return function()
            finally:
                running.release()

        try:
            with anyio.fail_after(timeout):
                # the store's work runs in a thread (pyoxigraph lets go of the GIL while it evaluates), so that the
                # server answers meanwhile and the timeout can end the call
                return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except TimeoutError:
            raise ToolError(f"the query ran longer than the timeout of {tools.timeout:g} s, so there is no answer; narrow it or add a LIMIT") from None
        except (ValueError, DspyRdfError, OSError, ImportError) as exc:
            raise ToolError(_one_line(exc)) from None

    @server.tool(annotations=read_only)
    async def list_queries() -> list[dict[str, Any]]:
        """List the named analytics queries of the store: for each, its name, the question it answers, notes, and its
        parameters (name, type: string | int | date (YYYY-MM-DD) | class, default, description). A parameter whose
        default is null means "no filter". Run one with run_query."""
        return await call(tools.list_queries)

    @server.tool(annotations=read_only)
    async def run_query(name: str, params: dict[str, str | int] | None = None, max_rows: int | None = None) -> dict[str, Any]:
        """Run a named query (see list_queries) and return its rows as JSON objects by column.

        name: the query's name, e.g. "tool_calls_per_tool" or "tokens_cost_per_model_day".
        params: its parameters by name, e.g. {"tool": "search"} or {"since": "2026-01-01", "limit": 5}; values are
        bound as RDF literals, never pasted into the query. An unknown name or a value of the wrong type is an error.
        max_rows: at most this many rows (default 200, at most 10000); "truncated" is true when there were more.
        A null cell means unknown (not recorded), never 0."""
        return await call(partial(tools.run_query, name, params, max_rows), timeout=tools.timeout)

    @server.tool(annotations=read_only)
    async def run_sparql(sparql: str, max_rows: int | None = None) -> dict[str, Any]:
        """Run your own read-only SPARQL 1.1 query (SELECT or ASK) on the store and return its rows as JSON objects.

        Each trace is one named graph: write patterns inside GRAPH ?trace { ... }. Prefix dspy: is
        <https://w3id.org/lmodel/dspy/>; describe_schema lists the classes and properties. Refused: updates (INSERT,
        DELETE, LOAD, DROP, ...), SERVICE, FROM with non-http(s)/urn IRIs, server pragmas and functions. The query is
        stopped after the server's timeout (30 s by default).
        max_rows: at most this many rows (default 200, at most 10000); "truncated" is true when there were more."""
        return await call(partial(tools.run_sparql, sparql, max_rows), timeout=tools.timeout)

    @server.tool(annotations=read_only)
    async def describe_schema(class_name: str | None = None) -> dict[str, Any]:
        """Describe the dspy: schema the traces follow.

        Without class_name: every class with its IRI, description, parent classes and slot (property) names.
        With class_name (e.g. "LMToolCallPart" or "dspy:Trace"): that class's slots, each with its IRI, description,
        range (a datatype such as string, integer, decimal, dateTime, or a class), whether it is required, whether
        it holds several values, and its allowed values when it has a fixed set."""
        return await call(partial(tools.describe_schema, class_name))

    @server.tool(annotations=read_only)
    async def get_trace(trace: str, format: TraceFormat = "trig", max_chars: int = DEFAULT_MAX_CHARS) -> dict[str, Any]:
        """Fetch one stored trace.

        trace: its IRI (urn:dspy-rdf:trace:content-… or …:run-…, as queries return it in their trace column) or
        its key alone (content-…, run-…).
        format: "trig" (its named graph, default), "turtle" (its triples), "nquads", or "json" (the canonical
        JSON of the trace, as dspy-rdf to-json writes it).
        max_chars: a longer trace is an error saying its size (default 200000); ask for more, or use run_sparql."""
        return await call(partial(tools.get_trace, trace, format, max_chars))

    @server.tool(annotations=read_only)
    async def validate(trace: str | None = None, engine: str = "fast", max_results: int = DEFAULT_MAX_RESULTS) -> dict[str, Any]:
        """Validate the store's traces (or one trace) against the SHACL shapes and integrity rules, as
        dspy-rdf validate --store does.

        trace: one trace's IRI or key; without it, every trace of the store.
        engine: "fast" (the shapes compiled to SPARQL, default) or "pyshacl" (the reference engine, slower).
        max_results: at most this many results (default 50); "truncated" is true when there were more.
        Returns the one-line summary, conforms, counts per severity (violation, warning, info) and the results
        (trace, node, rule, property path, value, severity, message)."""
        return await call(partial(tools.validate, trace, engine, max_results))

    return server


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]


def require_bearer_token(app: ASGIApp, token: str) -> ASGIApp:
    """``app`` answering 401 to every HTTP request that does not carry ``Authorization: Bearer <token>``."""
    expected = token.encode("utf-8")

    async def guarded(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]], send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] == "http":
            given = next((value for name, value in scope.get("headers", []) if name.lower() == b"authorization"), b"")
            scheme, _, credentials = given.partition(b" ")
            # compare_digest: the time taken does not tell how much of a guess was right
            if scheme.lower() != b"bearer" or not hmac.compare_digest(credentials.strip(), expected):
                await send({
                    "type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"www-authenticate", b'Bearer realm="dspy-rdf"')],
                })
                await send({"type": "http.response.body", "body": b"401 Unauthorized: send Authorization: Bearer <token>\n"})
                return
        await app(scope, receive, send)

    return guarded


def run_server(
    store: str | None = None,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    row_limit: int = DEFAULT_ROW_LIMIT,
    timeout: float = DEFAULT_TIMEOUT,
) -> None:
    """Serve the store ``store`` (as ``--store`` takes it) over MCP until stopped: on stdio, or over streamable HTTP
    at ``http://host:port/mcp``. Checks the options and that the store can be read before serving; errors are
    :class:`ValueError`, :class:`ImportError` (mcp missing) or :class:`~dspy_rdf.store.StoreError`, one line each."""
    if transport not in ("stdio", "http"):
        raise ValueError(f"unknown transport {transport!r} (expected stdio or http)")
    if transport == "http":
        check_binding(host, token)  # the rule of `dspy-rdf serve`: beyond this machine, only with a token
    elif token is not None:
        raise ValueError("--token applies to --transport http only")
    if not 0 < row_limit <= MAX_ROW_LIMIT:
        raise ValueError(f"the row limit must be from 1 to {MAX_ROW_LIMIT:,}, not {row_limit}")
    if not timeout > 0:
        raise ValueError(f"the timeout must be more than 0 seconds, not {timeout:g}")
    tools = StoreTools(store=store or None, row_limit=row_limit, timeout=timeout)
    with tools.opened() as opened:  # a store that cannot be read is said now, not at the first call
        location = opened.location
    server = build_server(tools)
    import anyio

    if transport == "stdio":
        print(f"serving the store at {location} over MCP on stdio", file=sys.stderr)
        anyio.run(server.run_stdio_async)
        return
    import uvicorn

    app: ASGIApp = server.streamable_http_app(streamable_http_path="/mcp", host=host)  # type: ignore[assignment]
    if token:
        app = require_bearer_token(app, token)
    shown = f"[{host}]" if ":" in host else host
    print(f"serving the store at {location} over MCP on http://{shown}:{port}/mcp" + (" (bearer token required)" if token else ""), file=sys.stderr)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve)
