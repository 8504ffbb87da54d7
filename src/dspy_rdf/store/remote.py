"""A trace store on any SPARQL 1.1 server: queries by the SPARQL 1.1 Protocol, writes by SPARQL 1.1 Update or the
Graph Store Protocol, dumps by the Graph Store Protocol.

Writes (:class:`WriteMethod`) send many traces per request, each request holding whole traces and at most
``request_bytes`` (a trace larger than that goes alone): on Oxigraph, N-Quads ``POST``-ed to the dataset (its Graph
Store endpoint without a graph, through Oxigraph's atomic bulk loader); on every other server one SPARQL 1.1
``INSERT DATA`` with a ``GRAPH`` block per trace, which a server runs as one transaction. A request is written whole
or not at all, so a reader sees a trace whole or not at all. Both only add triples: since a stored graph is a
function of its name (:mod:`dspy_rdf.store.base`), a request sent twice (a retry) or by two exports at once adds the
same triples, and no two versions of a trace can be merged. A trace the server refuses (a value it cannot keep) is
written alone to tell which, and reported in :attr:`~dspy_rdf.store.base.PutReport.failed`. ``WriteMethod.GRAPH``
(one ``PUT`` per trace) remains for servers that only speak the Graph Store Protocol.

Queries are ``POST``-ed form-encoded (``query=...``) with ``Accept: application/sparql-results+json``. A server that
cuts an answer at a row cap and says so (Virtuoso: ``X-SPARQL-MaxRows``) makes :meth:`RemoteStore.select` fail
(:class:`RemoteTruncatedError`) rather than return part of the rows; the store's own listings page through every
answer (:meth:`~dspy_rdf.store.base.TraceStore.trace_iris`), so no row cap drops a trace, whether the server says
it cut or not. Dumps ``GET`` each trace's graph, check its triple count against a ``COUNT`` query (Virtuoso cuts
Graph Store answers at its row cap too, silently) and read what a cut answer left out with ``SELECT`` pages; the
quads are written as the embedded store writes them (the same canonical literals: a server may write
``2031-01-01T10:00:03.500Z`` for the ``2031-01-01T10:00:03.5Z`` pyoxigraph writes), so a dump from a server equals
the embedded store's, quad for quad.

Endpoints (see ``docs/remote-stores.md``): the URL given to :class:`RemoteStore` is turned into a query, an update
and a Graph Store endpoint by :func:`endpoints_for`; each can be overridden by a keyword argument or by
``$DSPY_RDF_QUERY_URL``, ``$DSPY_RDF_UPDATE_URL``, ``$DSPY_RDF_GSP_URL``.

Credentials come only from the environment: ``$DSPY_RDF_STORE_USER`` + ``$DSPY_RDF_STORE_PASSWORD`` (HTTP basic
auth, or digest with ``$DSPY_RDF_STORE_AUTH=digest``) or ``$DSPY_RDF_STORE_TOKEN`` (``Authorization: Bearer``).
A URL with credentials in it (``http://user:secret@host``, ``?access-token=...``) is refused, and no message,
log line or ``repr`` ever shows a credential. Retries, redirects and errors: :mod:`dspy_rdf.store.http`.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from enum import Enum
from typing import Any, BinaryIO
from urllib.parse import urlsplit, urlunsplit

import httpx
import pyoxigraph as ox

from dspy_rdf.rdf import vocab as v
from dspy_rdf.store.base import (
    EncodedTrace,
    SparqlEngine,
    SparqlJson,
    StoreError,
    TraceStore,
    check_trace_iri,
    failed_query_message,
    mapped_number,
    term_from_json,
)
from dspy_rdf.store.http import (
    SPARQL_JSON,
    FailedWhileAnswering,
    HttpClient,
    MalformedAnswer,
    RemoteAuthError,
    RemoteConnectionError,
    RemoteEvaluationError,
    RemoteHTTPError,
    RemoteQueryError,
    RemoteResultError,
    RemoteStoreError,
    RemoteTimeoutError,
    RemoteTLSError,
    RemoteTruncatedError,
    check_url,
    env_number,
    message_after_partial_answer,
    safe_url,
)
from dspy_rdf.store.ledger import LEDGER

__all__ = [
    "GSP_URL_ENV",
    "QUERY_URL_ENV",
    "UPDATE_URL_ENV",
    "WRITE_ENV",
    "RemoteAuthError",
    "RemoteConnectionError",
    "RemoteEvaluationError",
    "RemoteHTTPError",
    "RemoteQueryError",
    "RemoteResultError",
    "RemoteStore",
    "RemoteStoreError",
    "RemoteTLSError",
    "RemoteTimeoutError",
    "RemoteTruncatedError",
    "WriteMethod",
    "endpoints_for",
    "safe_url",
]

QUERY_URL_ENV = "DSPY_RDF_QUERY_URL"
UPDATE_URL_ENV = "DSPY_RDF_UPDATE_URL"
GSP_URL_ENV = "DSPY_RDF_GSP_URL"
WRITE_ENV = "DSPY_RDF_STORE_WRITE"
REQUEST_BYTES_ENV = "DSPY_RDF_STORE_REQUEST_BYTES"
TIMEOUT_ENV = "DSPY_RDF_STORE_TIMEOUT"
CONNECT_TIMEOUT_ENV = "DSPY_RDF_STORE_CONNECT_TIMEOUT"
MAX_ATTEMPTS_ENV = "DSPY_RDF_STORE_MAX_ATTEMPTS"

DEFAULT_TIMEOUT = 60.0
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_MAX_ATTEMPTS = 5
PAGE_ROWS = 10_000
"""Rows per page of the listings: Virtuoso's stock ``ResultSetMaxRows`` (and its limit on sorted answers)."""
_VALUES_CHUNK = 200

N_TRIPLES = "application/n-triples"
N_QUADS = "application/n-quads"
SPARQL_UPDATE = "application/sparql-update"
_NOT_IN_IRI = re.compile(r'[\x00-\x20<>"{}|^`\\]')
_CONTROL = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]")


class WriteMethod(str, Enum):
    """How :meth:`RemoteStore.put` sends traces (``$DSPY_RDF_STORE_WRITE``; see the module documentation)."""

    AUTO = "auto"
    """``QUADS`` on Oxigraph, ``GRAPH`` on Virtuoso, ``UPDATE`` on any other server (told by its ``Server`` header).
    Virtuoso 7 runs ``INSERT DATA`` at a quarter of the rate of Graph Store ``PUT`` s and compiles at most about 1,000
    triples in one (SP031), so it gets one ``PUT`` per trace (measured: ``bench/bench_remote.py``)."""
    QUADS = "quads"
    """N-Quads of many traces ``POST``-ed to the Graph Store endpoint without a graph (Oxigraph, Fuseki)."""
    UPDATE = "update"
    """One SPARQL 1.1 ``INSERT DATA`` per request, a ``GRAPH`` block per trace: any SPARQL 1.1 Update server."""
    GRAPH = "graph"
    """One Graph Store Protocol ``PUT`` per trace."""


DEFAULT_REQUEST_BYTES = {WriteMethod.QUADS: 16 << 20, WriteMethod.UPDATE: 4 << 20}
"""The default bound on a write request's body: Virtuoso refuses SPARQL text of more than about 10 MB."""
UPDATE_REQUEST_TRIPLES = 800
"""The most triples of one ``INSERT DATA`` (Virtuoso 7 compiles no update that makes more than 10,000 lines of SQL:
about 1,000 triples)."""


def endpoints_for(url: str) -> tuple[str, str, str]:
    """The (query, update, Graph Store) endpoints for the URL of a server, by the shape of its path.

    >>> endpoints_for("http://localhost:7878")  # Oxigraph server
    ('http://localhost:7878/query', 'http://localhost:7878/update', 'http://localhost:7878/store')
    >>> endpoints_for("http://localhost:7878/query")
    ('http://localhost:7878/query', 'http://localhost:7878/update', 'http://localhost:7878/store')
    >>> endpoints_for("http://localhost:3030/ds")  # Fuseki dataset
    ('http://localhost:3030/ds/query', 'http://localhost:3030/ds/update', 'http://localhost:3030/ds/data')
    >>> endpoints_for("http://localhost:3030/ds/sparql")
    ('http://localhost:3030/ds/sparql', 'http://localhost:3030/ds/update', 'http://localhost:3030/ds/data')
    >>> endpoints_for("http://localhost:7200/repositories/traces")  # GraphDB, RDF4J
    ('http://localhost:7200/repositories/traces', 'http://localhost:7200/repositories/traces/statements', 'http://localhost:7200/repositories/traces/rdf-graphs/service')
    >>> endpoints_for("http://localhost:8890/sparql-auth")  # Virtuoso
    ('http://localhost:8890/sparql-auth', 'http://localhost:8890/sparql-auth', 'http://localhost:8890/sparql-graph-crud-auth')
    """
    parts = urlsplit(url)
    path = parts.path.rstrip("/")

    def at(new_path: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, new_path, "", ""))

    match = re.fullmatch(r"(.*/repositories/[^/]+)(/.*)?", path)
    if match:
        repo = match.group(1)
        return at(repo), at(repo + "/statements"), at(repo + "/rdf-graphs/service")
    if path in ("/sparql", "/sparql-auth"):
        crud = "/sparql-graph-crud-auth" if path.endswith("-auth") else "/sparql-graph-crud"
        return at(path), at(path), at(crud)
    head, _, last = path.rpartition("/")
    if last in ("query", "sparql"):
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, "")), at(head + "/update"), at(head + ("/data" if head else "/store"))
    return at(path + "/query"), at(path + "/update"), at(path + ("/data" if path else "/store"))



# --- the store -------------------------------------------------------------------------------------------------


class RemoteStore(TraceStore):
    """Traces on a SPARQL 1.1 server, one named graph per trace (see the module documentation).

    ``url`` is the server (``http://host:7878``) or its query endpoint; ``query_url``, ``update_url`` and
    ``gsp_url`` override the endpoints derived from it (default: ``$DSPY_RDF_QUERY_URL`` and so on). ``write`` is
    how traces are sent (default: ``$DSPY_RDF_STORE_WRITE``, else :attr:`WriteMethod.AUTO`) and ``request_bytes``
    the bound on a write request's body (default: ``$DSPY_RDF_STORE_REQUEST_BYTES``, else
    :data:`DEFAULT_REQUEST_BYTES`). ``timeout`` is the read/write timeout and ``connect_timeout`` the connect
    timeout, in seconds (default: ``$DSPY_RDF_STORE_TIMEOUT``, ``$DSPY_RDF_STORE_CONNECT_TIMEOUT``, else 60 and 10);
    ``max_attempts`` counts the first try (default: ``$DSPY_RDF_STORE_MAX_ATTEMPTS``, else 5); the n-th retry
    waits about ``backoff * 2**(n-1)`` seconds, at most ``max_wait`` (also the cap on ``Retry-After``).
    ``transport`` is passed to httpx (tests).

    ``bulk`` is ignored: every request is atomic on the server anyway.
    """

    @property
    def writer_threads(self) -> int:  # type: ignore[override]
        """Requests at once: two (the server parses one while the next is encoded and sent), four when each request
        holds one trace (Graph Store ``PUT``s, Virtuoso's way), where waiting for each answer is much of the time
        (``bench/bench_remote.py``: 1.24x the rate of one request at a time on Virtuoso 7, 1.3x on Oxigraph; eight
        at once add little more)."""
        return 4 if self._write_method() is WriteMethod.GRAPH else 2

    page_rows = PAGE_ROWS
    all_graphs_pattern = "GRAPH ?g { ?s ?p ?o }"  # Virtuoso binds nothing for an empty GRAPH pattern

    def _graphs_without_trace_nodes(self, with_trace_nodes: Iterable[str] | None = None) -> list[str]:
        # Listing every graph to take the trace graphs away reads the whole store once per page of names (Virtuoso
        # at 1M LM calls: not done after 15 minutes); one scan grouped by graph names the few without a trace node
        # (14.5 s there), paged as any listing in case they are many.
        has_trace_node = f"IF(?p = <{v.RDF_TYPE}> && ?o = <{v.class_iri('Trace')}>, 1, 0)"
        return self._graph_names(
            f"{{ SELECT ?g WHERE {{ GRAPH ?g {{ ?s ?p ?o }} BIND({has_trace_node} AS ?trace_node) }} GROUP BY ?g HAVING (SUM(?trace_node) = 0) }}"
        )

    def __init__(
        self,
        url: str,
        *,
        query_url: str | None = None,
        update_url: str | None = None,
        gsp_url: str | None = None,
        write: WriteMethod | str | None = None,
        request_bytes: int | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        max_attempts: int | None = None,
        backoff: float = 0.5,
        max_wait: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        check_url(url, "store URL")
        self.location = safe_url(url)
        derived = endpoints_for(url)
        env = os.environ
        self.query_url = check_url(query_url or env.get(QUERY_URL_ENV) or derived[0], "query endpoint")
        self.update_url = check_url(update_url or env.get(UPDATE_URL_ENV) or derived[1], "update endpoint")
        self.gsp_url = check_url(gsp_url or env.get(GSP_URL_ENV) or derived[2], "Graph Store endpoint")
        chosen = write if write is not None else env.get(WRITE_ENV) or WriteMethod.AUTO
        try:
            self.write = WriteMethod(chosen)
        except ValueError:
            raise StoreError(f"${WRITE_ENV} must be one of {', '.join(m.value for m in WriteMethod)}, not {chosen!r}") from None
        self.request_bytes = request_bytes if request_bytes is not None else env_number(REQUEST_BYTES_ENV, 0, int) or None
        if self.request_bytes is not None and self.request_bytes < 1:
            raise StoreError(f"request_bytes must be positive, not {self.request_bytes}")
        self.timeout = timeout if timeout is not None else env_number(TIMEOUT_ENV, DEFAULT_TIMEOUT)
        self.connect_timeout = connect_timeout if connect_timeout is not None else env_number(CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT)
        attempts = max_attempts if max_attempts is not None else env_number(MAX_ATTEMPTS_ENV, DEFAULT_MAX_ATTEMPTS, int)
        self._http = HttpClient(
            timeout=self.timeout, connect_timeout=self.connect_timeout, max_attempts=attempts, backoff=backoff, max_wait=max_wait,
            transport=transport,
        )
        self.max_attempts = attempts
        self.auth_kind = self._http.auth_scheme
        self._engine_asked = False  # whether sparql_engine asked the server once already

    def __repr__(self) -> str:
        return (
            f"RemoteStore(query={safe_url(self.query_url)!r}, update={safe_url(self.update_url)!r}, "
            f"gsp={safe_url(self.gsp_url)!r}, auth={self.auth_kind.value!r})"
        )

    @property
    def server(self) -> str | None:
        """What the server says it is (its ``Server`` header), once it answered."""
        return self._http.server

    @property
    def sparql_engine(self) -> SparqlEngine:
        """Virtuoso or Oxigraph by the ``Server`` header of the server's answers (asked once with ``ASK {}`` if none
        came yet; a server, or a proxy before it, that sends no such header is OTHER)."""
        if self.server is None and not self._engine_asked:
            self._engine_asked = True
            with contextlib.suppress(StoreError):  # a server that does not answer fails the query that follows
                self.select("ASK {}")
        server = (self.server or "").lower()
        if "virtuoso" in server:
            return SparqlEngine.VIRTUOSO
        return SparqlEngine.OXIGRAPH if "oxigraph" in server else SparqlEngine.OTHER

    @property
    def retypes_numbers(self) -> bool:
        """Whether the server changes the datatype of integral numbers it keeps (Virtuoso 7: ``"2"^^xsd:decimal``
        becomes an integer, an integer beyond 32 bits a decimal); what it gives back is then read in the datatype
        the mapping writes (:func:`~dspy_rdf.store.base.mapped_number`)."""
        return "virtuoso" in (self.server or "").lower()

    def _graph_url(self, iri: str) -> httpx.URL:
        return httpx.URL(self.gsp_url).copy_merge_params({"graph": iri})

    # --- SPARQL ----------------------------------------------------------------------------------------------

    def _query(self, sparql: str) -> tuple[SparqlJson, int | None]:
        def read(response: httpx.Response) -> tuple[SparqlJson, int | None]:
            try:
                return self._http.results(response)
            except FailedWhileAnswering as exc:
                raise FailedWhileAnswering(failed_query_message(sparql, str(exc), "on the server")) from None

        return self._http.request(
            "POST", self.query_url, idempotent=True, data={"query": sparql}, headers={"Accept": SPARQL_JSON}, is_query=True, read=read
        )

    def select(self, sparql: str, *, limit: int | None = None, deadline: float | None = None) -> SparqlJson:
        """Run a SPARQL SELECT (or ASK) query on the server; return SPARQL 1.1 JSON results, normalized like the embedded store's
        (at most ``limit`` rows, cut here; ``deadline`` is the server's own business: its answer comes whole).

        A success answer whose body is not SPARQL JSON results (truncated, an HTML page from a proxy, JSON of another
        shape) is retried like a network error, then raised as :class:`RemoteResultError`: it is never read as "no
        rows". An answer the server says it cut at its row cap raises :class:`RemoteTruncatedError`.
        """
        results, cap = self._query(sparql)
        if cap is not None:
            shown = safe_url(self.query_url)
            raise RemoteTruncatedError(
                f"POST {shown}: the server cut the answer at {cap} rows (Virtuoso: ResultSetMaxRows in the [SPARQL] section "
                "of virtuoso.ini); ask for fewer rows or raise the cap",
                method="POST", url=shown, max_rows=cap,
            )
        if limit is not None and "results" in results:
            results["results"]["bindings"] = results["results"]["bindings"][:limit]
        return results

    def _select_page(self, sparql: str) -> tuple[list[dict[str, Any]], bool]:
        results, cap = self._query(sparql)
        return results["results"]["bindings"], cap is not None

    def _select_chunks(self, items: list[str], query: Callable[[list[str]], str]) -> Iterator[dict[str, Any]]:
        """The rows of ``query`` over ``items`` in chunks of at most 200; a chunk whose answer the server cut is asked
        again in halves (a query that asks about one item still cut is an error)."""
        pending = [items[start:start + _VALUES_CHUNK] for start in range(0, len(items), _VALUES_CHUNK)]
        while pending:
            chunk = pending.pop()
            rows, cut = self._select_page(query(chunk))
            if not cut:
                yield from rows
            elif len(chunk) > 1:
                pending += [chunk[: len(chunk) // 2], chunk[len(chunk) // 2:]]
            else:
                self.select(query(chunk))  # raises RemoteTruncatedError, saying why

    def construct(self, sparql: str) -> bytes:
        """Run a SPARQL CONSTRUCT query on the server; return its triples as N-Triples (re-serialized locally)."""

        def read(response: httpx.Response) -> bytes:
            media = response.headers.get("Content-Type", N_TRIPLES).split(";")[0].strip() or N_TRIPLES
            source = ox.RdfFormat.from_media_type(media)
            if source is None:
                raise MalformedAnswer(f"the answer is {media}, not RDF")
            try:
                canonical = ox.Store()  # literals in pyoxigraph's lexical form, as the embedded store answers
                canonical.extend(ox.Quad(t.subject, t.predicate, t.object) for t in ox.parse(response.content, format=source))
                return canonical.dump(format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph()) or b""
            except SyntaxError as exc:
                body = response.text.rstrip()
                message = message_after_partial_answer(body, body.rfind("\n") + 1)
                if message is not None:
                    raise FailedWhileAnswering(failed_query_message(sparql, message, "on the server")) from None
                raise MalformedAnswer(f"the answer is not valid {media}: {exc}") from None

        return self._http.request(
            "POST", self.query_url, idempotent=True, data={"query": sparql}, headers={"Accept": N_TRIPLES}, is_query=True, read=read
        )

    def update(self, sparql: str) -> None:
        """Run a SPARQL 1.1 Update on the update endpoint (not retried once sent: an update may not be idempotent)."""
        self._http.request("POST", self.update_url, idempotent=False, data={"update": sparql})

    def _stored(self, iris: list[str]) -> set[str]:
        """Which of these graphs hold anything on the server."""
        rows = self._select_chunks(
            iris, lambda chunk: f"SELECT ?g WHERE {{ VALUES ?g {{ {' '.join(_iri_ref(i) for i in chunk)} }} FILTER EXISTS {{ GRAPH ?g {{ ?s ?p ?o }} }} }}"
        )
        return {row["g"]["value"] for row in rows if "g" in row}

    def _graph_sizes(self, iris: list[str]) -> dict[str, int]:
        """The number of triples of each of these graphs that the server holds."""
        rows = self._select_chunks(
            iris,
            lambda chunk: f"SELECT ?g (COUNT(*) AS ?n) WHERE {{ VALUES ?g {{ {' '.join(_iri_ref(i) for i in chunk)} }} GRAPH ?g {{ ?s ?p ?o }} }} GROUP BY ?g",
        )
        return {row["g"]["value"]: int(row["n"]["value"]) for row in rows if "g" in row and "n" in row}

    # --- writes ----------------------------------------------------------------------------------------------

    def _write_method(self) -> WriteMethod:
        if self.write is not WriteMethod.AUTO:
            return self.write
        server = (self.server or "").lower()
        if server.startswith("oxigraph"):
            return WriteMethod.QUADS
        return WriteMethod.GRAPH if "virtuoso" in server else WriteMethod.UPDATE

    def _entry_bounds(self) -> tuple[int, int]:
        method = self._write_method()
        limit = self.request_bytes or DEFAULT_REQUEST_BYTES.get(method, 0)
        return (limit if method is not WriteMethod.GRAPH else 0), (UPDATE_REQUEST_TRIPLES if method is WriteMethod.UPDATE else 0)

    def _write_batch(self, batch: list[EncodedTrace], *, bulk: bool) -> list[tuple[str, str]]:
        """Send a batch in requests of whole traces (see the module docstring). A :class:`StoreError` from here
        carries ``written``: the IRIs of this batch that were stored before it failed."""
        method = self._write_method()
        limit = self.request_bytes or DEFAULT_REQUEST_BYTES.get(method, 0)
        written: list[str] = []
        refused: list[tuple[str, str]] = []
        try:
            triples = UPDATE_REQUEST_TRIPLES if method is WriteMethod.UPDATE else 0
            for group in _requests(batch, limit if method is not WriteMethod.GRAPH else 0, triples):
                out = self._write_group(group, method)
                refused += out
                gone = {iri for iri, _ in out}
                written += [item.iri for item in group if item.iri not in gone]
        except StoreError as exc:
            exc.written = written  # type: ignore[attr-defined]
            raise
        if batch and batch[-1].iri.startswith(LEDGER) and batch[-1].iri in written:
            self._ledger_entry_written()
        return refused

    def _write_group(self, group: list[EncodedTrace], method: WriteMethod) -> list[tuple[str, str]]:
        """Send one request; when the server refuses what it holds, send its traces one by one to tell which it
        refuses (returned as ``(iri, why)``); an error that is not about the traces (credentials, endpoint, network),
        or that every trace of the request gets, is raised."""
        try:
            self._send_traces(group, method)
            return []
        except RemoteHTTPError as exc:
            if isinstance(exc, RemoteAuthError) or not _refuses_values(exc):
                raise
            if len(group) == 1:
                return [(group[0].iri, f"the server refused it: {exc}")]
            refused = [found for item in group for found in self._write_group([item], method)]
            if len(refused) == len(group):
                raise
            return refused

    def _send_traces(self, group: list[EncodedTrace], method: WriteMethod) -> None:
        # Every write only adds the triples of whole traces, which are the same whoever sends them: safe to repeat.
        if method is WriteMethod.GRAPH:
            [item] = group
            self._http.request("PUT", self._graph_url(item.iri), idempotent=True, content=_escaped(_ntriples(item)), headers={"Content-Type": N_TRIPLES})
        elif method is WriteMethod.QUADS:
            url: str | httpx.URL = self.gsp_url
            if (self.server or "").lower().startswith("oxigraph"):
                # Oxigraph's bulk loader: atomic (Oxigraph 0.5), and the writer already checked every term
                url = httpx.URL(self.gsp_url).copy_merge_params({"no_transaction": "", "lenient": ""})
            self._http.request("POST", url, idempotent=True, content=b"".join(item.data for item in group), headers={"Content-Type": N_QUADS})
        else:
            body = b"INSERT DATA {\n" + b"".join(b"GRAPH <" + item.iri.encode() + b"> {\n" + _escaped(_ntriples(item)) + b"}\n" for item in group) + b"}\n"
            self._http.request("POST", self.update_url, idempotent=True, content=body, headers={"Content-Type": SPARQL_UPDATE})

    # --- TraceStore ------------------------------------------------------------------------------------------

    def _update_graphs(self, sparql: str) -> None:
        # these updates only add what a graph lacks: sent again after a lost answer, they change nothing more
        self._http.request("POST", self.update_url, idempotent=True, data={"update": sparql})

    def _forget_derived_facts_version(self, iris: list[str]) -> None:
        version = _iri_ref(v.slot_iri("derived_facts_version"))
        for start in range(0, len(iris), 200):
            graphs = " ".join(_iri_ref(check_trace_iri(iri)) for iri in iris[start:start + 200])
            self.update(f"DELETE {{ GRAPH ?g {{ ?g {version} ?v }} }} WHERE {{ VALUES ?g {{ {graphs} }} GRAPH ?g {{ ?g {version} ?v }} }}")

    def _delete_graph(self, iri: str) -> bool:
        """DELETE the graph; ``False`` when the server says it does not exist (404)."""
        _iri_ref(check_trace_iri(iri))
        response = self._http.request("DELETE", self._graph_url(iri), idempotent=True, ok_statuses=(404,))
        return response.status_code != 404

    def dump(self, handle: BinaryIO, *, traces: list[str] | None = None, trig: bool = False) -> int:
        """Write the traces (all by default) as N-Quads (or TriG), the quads as the embedded store writes them."""
        fmt = ox.RdfFormat.TRIG if trig else ox.RdfFormat.N_QUADS
        names = traces if traces is not None else self.trace_iris()
        for name in names:
            _iri_ref(check_trace_iri(name))
        sizes = self._graph_sizes(names)
        missing = [iri for iri in names if not sizes.get(iri)]
        if missing:  # every trace checked before anything is written
            raise StoreError(f"no trace {missing[0]} in the store at {self.location}")
        for iri in names:
            handle.write(ox.serialize(self._graph_quads(iri, sizes[iri]), format=fmt, prefixes=v.PREFIXES if trig else None) or b"")
        return len(names)

    def _graph_quads(self, iri: str, expected: int) -> list[ox.Quad]:
        """The quads of one graph of ``expected`` triples, in the canonical form the embedded store keeps."""
        graph = ox.NamedNode(iri)
        triples = self._whole_graph(iri, expected)
        canonical = ox.Store()  # literals as pyoxigraph keeps them, whatever lexical form the server wrote
        retyped = self.retypes_numbers
        canonical.extend(ox.Quad(s, p, mapped_number(p, o) if retyped else o, graph) for s, p, o in triples)
        return list(canonical.quads_for_pattern(None, None, None, graph))

    def _graph_triples(self, iri: str) -> set[tuple[Any, Any, Any]]:
        shown = safe_url(self.gsp_url)

        def read(response: httpx.Response) -> set[tuple[Any, Any, Any]]:
            media = response.headers.get("Content-Type", N_TRIPLES).split(";")[0].strip() or N_TRIPLES
            source = ox.RdfFormat.from_media_type(media)
            if source is None:
                raise RemoteResultError(f"GET {shown}: the server sent the graph as {media}, which cannot be read", method="GET", url=shown)
            try:
                return {(t.subject, t.predicate, t.object) for t in ox.parse(response.content, format=source)}
            except SyntaxError as exc:
                raise MalformedAnswer(f"the graph of {iri} is not valid {media}: {exc}") from None

        response_or_triples = self._http.request(
            "GET", self._graph_url(iri), idempotent=True, headers={"Accept": N_TRIPLES}, ok_statuses=(404,),
            read=lambda response: None if response.status_code == 404 else read(response),
        )
        if response_or_triples is None:
            raise StoreError(f"no trace {iri} in the store at {self.location}")
        return response_or_triples

    def _whole_graph(self, iri: str, expected: int) -> set[tuple[Any, Any, Any]]:
        """The ``expected`` triples of one graph: its Graph Store answer, read in ``SELECT`` pages where the server cut
        it (Virtuoso's row cap)."""
        if not expected:
            return set()
        triples = self._graph_triples(iri)
        if len(triples) != expected:
            triples |= self._paged_triples(iri, expected)
        if len(triples) != expected:
            raise RemoteResultError(
                f"the server sent {len(triples)} of the {expected} triples of {iri}", method="GET", url=safe_url(self.gsp_url)
            )
        return triples

    def _entry_rows(self, entry: str) -> list[dict[str, str]]:
        # An entry of a large store holds more triples than a server's row cap (Virtuoso's 10,000 by default: one
        # entry of 1M LM calls holds a row per tool and duration bucket): read as a graph is.
        triples = self._whole_graph(entry, self._graph_sizes([entry]).get(entry, 0))
        return [{"row": s.value, "p": p.value, "o": o.value} for s, p, o in triples]

    def _paged_triples(self, iri: str, expected: int) -> set[tuple[Any, Any, Any]]:
        """The triples of a graph read by ``SELECT`` pages (``OFFSET``, in the server's own order: sorting by three
        terms would meet Virtuoso's limit on sorted answers), until a page comes back empty."""
        found: set[tuple[Any, Any, Any]] = set()
        offset = 0
        while len(found) < expected:
            rows, _ = self._select_page(f"SELECT ?s ?p ?o WHERE {{ GRAPH {_iri_ref(iri)} {{ ?s ?p ?o }} }} LIMIT {self.page_rows} OFFSET {offset}")
            if not rows:
                break
            found.update((term_from_json(r["s"]), term_from_json(r["p"]), term_from_json(r["o"])) for r in rows)
            offset += len(rows)
        return found

    def close(self) -> None:
        self._stop_commit_threads()
        self._http.close()


# --- helpers ---------------------------------------------------------------------------------------------------


def _refuses_values(exc: RemoteHTTPError) -> bool:
    """Whether an error says the server refused what a request held (a value it cannot keep: HTTP 400, 413, 422, or
    Virtuoso's data errors, SQLSTATE class 22, which it may send as HTTP 500), rather than that it failed."""
    return exc.status in (400, 413, 422) or exc.status >= 500 and re.search(r"Virtuoso 22\w{3} Error", exc.body) is not None


def _iri_ref(iri: str) -> str:
    if not iri or _NOT_IN_IRI.search(iri):
        raise ValueError(f"not an IRI that can name a graph: {iri!r}")
    return f"<{iri}>"


def _ntriples(item: EncodedTrace) -> bytes:
    """The trace's N-Quads without their graph term: N-Triples. Every line ends with `` <iri> .\\n`` and a raw
    newline cannot occur inside a term, so that suffix is only ever the graph term."""
    suffix = f" <{item.iri}> .\n".encode()
    if item.data.count(suffix) != item.data.count(b"\n"):
        raise StoreError(f"the N-Quads of trace {item.iri} are not all in its graph")
    return item.data.replace(suffix, b" .\n")


def _escaped(ntriples: bytes) -> bytes:
    """N-Triples as SPARQL text: control characters (raw in the writer's literals, where N-Triples allows them)
    written as ``\\u`` escapes, which a server reading the text as C strings cannot cut at."""
    return _CONTROL.sub(lambda match: b"\\u%04X" % match.group(0)[0], ntriples)


def _requests(batch: list[EncodedTrace], limit: int, triples: int = 0) -> Iterator[list[EncodedTrace]]:
    """The batch in groups of whole traces of at most ``limit`` bytes (``0``: one trace each) and, when ``triples``
    is set, at most that many triples each; a trace larger than a bound goes alone."""
    group: list[EncodedTrace] = []
    size = count = 0
    for item in batch:
        if group and (size + len(item.data) > limit or triples and count + item.triples > triples):
            yield group
            group, size, count = [], 0, 0
        group.append(item)
        size += len(item.data)
        count += item.triples
    if group:
        yield group
