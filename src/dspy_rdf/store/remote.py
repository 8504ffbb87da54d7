"""A trace store on any SPARQL 1.1 server: queries by the SPARQL 1.1 Protocol, graphs by the Graph Store Protocol.

Each trace is one named graph, written with one ``PUT <gsp>?graph=<trace IRI>`` (N-Triples body): the server
replaces the whole graph at once, so a reader sees the old trace or the new one, never a part of either. Queries
are ``POST``-ed form-encoded (``query=...``) with ``Accept: application/sparql-results+json``; deletes are
``DELETE <gsp>?graph=...``; dumps ``GET <gsp>?graph=...`` per trace, re-serialized locally as N-Quads or TriG
(byte-identical to what the embedded store writes for the same quads).

Endpoints (see ``docs/remote-stores.md``): the URL given to :class:`RemoteStore` is turned into a query, an update
and a Graph Store endpoint by :func:`endpoints_for`; each can be overridden by a keyword argument or by
``$DSPY_RDF_QUERY_URL``, ``$DSPY_RDF_UPDATE_URL``, ``$DSPY_RDF_GSP_URL``.

Credentials come only from the environment: ``$DSPY_RDF_STORE_USER`` + ``$DSPY_RDF_STORE_PASSWORD`` (HTTP basic
auth, or digest with ``$DSPY_RDF_STORE_AUTH=digest``) or ``$DSPY_RDF_STORE_TOKEN`` (``Authorization: Bearer``).
A URL with credentials in it (``http://user:secret@host``, ``?access-token=...``) is refused, and no message,
log line or ``repr`` ever shows a credential. Credentials are sent only to the origin (scheme, host, port) of the
request's endpoint: redirects are followed here, not by httpx, and a redirect to another origin goes without them.

Network errors, 429 and 5xx answers are retried with exponential backoff (honouring ``Retry-After``) for the
requests that are safe to repeat: queries, ``GET``, ``PUT`` and ``DELETE``. SPARQL updates are only retried when
the connection could not be opened at all. Every 4xx/5xx answer that is not retried (or still fails) raises a
:class:`RemoteHTTPError` carrying ``status`` and a short excerpt of the body.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import re
import time
from collections.abc import Callable, Generator, Iterable
from datetime import datetime, timezone
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import httpx
import pyoxigraph as ox

from dspy_rdf import vocab as v
from dspy_rdf.store.base import EncodedTrace, SparqlJson, StoreError, TraceStore

__all__ = [
    "GSP_URL_ENV",
    "QUERY_URL_ENV",
    "UPDATE_URL_ENV",
    "RemoteAuthError",
    "RemoteConnectionError",
    "RemoteHTTPError",
    "RemoteQueryError",
    "RemoteResultError",
    "RemoteStore",
    "RemoteStoreError",
    "RemoteTimeoutError",
    "endpoints_for",
]

log = logging.getLogger(__name__)

QUERY_URL_ENV = "DSPY_RDF_QUERY_URL"
UPDATE_URL_ENV = "DSPY_RDF_UPDATE_URL"
GSP_URL_ENV = "DSPY_RDF_GSP_URL"
USER_ENV = "DSPY_RDF_STORE_USER"
PASSWORD_ENV = "DSPY_RDF_STORE_PASSWORD"
TOKEN_ENV = "DSPY_RDF_STORE_TOKEN"
AUTH_ENV = "DSPY_RDF_STORE_AUTH"
TIMEOUT_ENV = "DSPY_RDF_STORE_TIMEOUT"
CONNECT_TIMEOUT_ENV = "DSPY_RDF_STORE_CONNECT_TIMEOUT"
MAX_ATTEMPTS_ENV = "DSPY_RDF_STORE_MAX_ATTEMPTS"

DEFAULT_TIMEOUT = 60.0
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_MAX_ATTEMPTS = 5
MAX_REDIRECTS = 5
BODY_EXCERPT = 300
_VALUES_CHUNK = 200

SPARQL_JSON = "application/sparql-results+json"
N_TRIPLES = "application/n-triples"
_REDIRECTS = (301, 302, 303, 307, 308)
_SECRET_PARAM = re.compile(r"token|passw|secret|api[-_]?key", re.IGNORECASE)
_NOT_IN_IRI = re.compile(r'[\x00-\x20<>"{}|^`\\]')
_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
_RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"


# --- errors ----------------------------------------------------------------------------------------------------


class RemoteStoreError(StoreError):
    """A request to a remote store failed; ``method`` and ``url`` (credential-free) say which one."""

    def __init__(self, message: str, *, method: str | None = None, url: str | None = None) -> None:
        super().__init__(message)
        self.method = method
        self.url = url


class RemoteConnectionError(RemoteStoreError):
    """The server could not be reached, or the connection broke (after the retries allowed)."""


class RemoteTimeoutError(RemoteConnectionError):
    """The server did not answer within the timeout (after the retries allowed)."""


class RemoteHTTPError(RemoteStoreError):
    """The server answered with an HTTP error: ``status`` is its code, ``body`` a short excerpt of what it said."""

    def __init__(self, message: str, *, method: str | None = None, url: str | None = None, status: int, body: str = "") -> None:
        super().__init__(message, method=method, url=url)
        self.status = status
        self.body = body


class RemoteAuthError(RemoteHTTPError):
    """401 or 403: the credentials (from the environment) are missing or not allowed to do this."""


class RemoteResultError(RemoteStoreError):
    """The server answered with success but its body is not what the protocol says (malformed SPARQL JSON results,
    an HTML page from a proxy, unreadable RDF): retried like a network error for reads, then raised."""


class RemoteQueryError(RemoteHTTPError, ValueError):
    """400 to a SPARQL query: the server did not accept the query (a ``ValueError``, as from the embedded store)."""


# --- endpoints -------------------------------------------------------------------------------------------------


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


def safe_url(url: str | httpx.URL) -> str:
    """The URL as it may be shown: no user or password, and secret-looking query parameters masked."""
    parts = urlsplit(str(url))
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port is not None:
        netloc += f":{parts.port}"
    query = parts.query
    if query and _SECRET_PARAM.search(query):
        query = "&".join(f"{k}=***" if _SECRET_PARAM.search(k) else f"{k}={val}" for k, val in parse_qsl(query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _check_url(url: str, what: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise StoreError(f"the {what} {safe_url(url)!r} is not an http(s):// URL")
    secret_param = any(_SECRET_PARAM.search(k) for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    if parts.username is not None or parts.password is not None or secret_param:
        raise StoreError(
            f"the {what} {safe_url(url)} has credentials in it; they are not used: set ${USER_ENV} and ${PASSWORD_ENV}, "
            f"or ${TOKEN_ENV}, in the environment instead"
        )
    return url


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port or {"http": 80, "https": 443}.get(url.scheme)


class _BearerAuth(httpx.Auth):
    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header
        yield request

    def __repr__(self) -> str:
        return "_BearerAuth(***)"


def _env_number(name: str, default: float, kind: type = float) -> Any:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        raise StoreError(f"${name} must be a number, not {text!r}") from None
    if value <= 0:
        raise StoreError(f"${name} must be positive, not {text!r}")
    return value


# --- the store -------------------------------------------------------------------------------------------------


class RemoteStore(TraceStore):
    """Traces on a SPARQL 1.1 server, one named graph per trace (see the module documentation).

    ``url`` is the server (``http://host:7878``) or its query endpoint; ``query_url``, ``update_url`` and
    ``gsp_url`` override the endpoints derived from it (default: ``$DSPY_RDF_QUERY_URL`` and so on). ``timeout`` is
    the read/write timeout and ``connect_timeout`` the connect timeout, in seconds (default:
    ``$DSPY_RDF_STORE_TIMEOUT``, ``$DSPY_RDF_STORE_CONNECT_TIMEOUT``, else 60 and 10); ``max_attempts`` counts the
    first try (default: ``$DSPY_RDF_STORE_MAX_ATTEMPTS``, else 5); the n-th retry waits about
    ``backoff * 2**(n-1)`` seconds, at most ``max_wait`` (also the cap on ``Retry-After``). ``transport`` is
    passed to httpx (tests).

    ``bulk`` is ignored: every trace is one ``PUT`` anyway, atomic on the server.
    """

    def __init__(
        self,
        url: str,
        *,
        query_url: str | None = None,
        update_url: str | None = None,
        gsp_url: str | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        max_attempts: int | None = None,
        backoff: float = 0.5,
        max_wait: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        _check_url(url, "store URL")
        self.location = safe_url(url)
        derived = endpoints_for(url)
        env = os.environ
        self.query_url = _check_url(query_url or env.get(QUERY_URL_ENV) or derived[0], "query endpoint")
        self.update_url = _check_url(update_url or env.get(UPDATE_URL_ENV) or derived[1], "update endpoint")
        self.gsp_url = _check_url(gsp_url or env.get(GSP_URL_ENV) or derived[2], "Graph Store endpoint")
        self.timeout = timeout if timeout is not None else _env_number(TIMEOUT_ENV, DEFAULT_TIMEOUT)
        self.connect_timeout = connect_timeout if connect_timeout is not None else _env_number(CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT)
        self.max_attempts = max_attempts if max_attempts is not None else _env_number(MAX_ATTEMPTS_ENV, DEFAULT_MAX_ATTEMPTS, int)
        if self.max_attempts < 1:
            raise StoreError(f"max_attempts must be at least 1, not {self.max_attempts}")
        self.backoff = backoff
        self.max_wait = max_wait
        self._auth, self.auth_kind, self._secrets = self._auth_from_env()
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout),
            follow_redirects=False,  # followed in _send, so credentials never leave their origin
            transport=transport,
            headers={"User-Agent": "dspy-rdf"},
        )

    @staticmethod
    def _auth_from_env() -> tuple[httpx.Auth | None, str, tuple[str, ...]]:
        env = os.environ
        user, password, token = env.get(USER_ENV), env.get(PASSWORD_ENV), env.get(TOKEN_ENV)
        scheme = (env.get(AUTH_ENV) or "basic").strip().lower()
        if token and (user or password):
            raise StoreError(f"set either ${TOKEN_ENV} or ${USER_ENV} and ${PASSWORD_ENV}, not both")
        if token:
            return _BearerAuth(token), "bearer", (token,)
        if user or password:
            if not (user and password is not None):
                raise StoreError(f"${USER_ENV} and ${PASSWORD_ENV} go together: set both")
            if scheme not in ("basic", "digest"):
                raise StoreError(f"${AUTH_ENV} must be basic or digest, not {scheme!r}")
            auth = httpx.DigestAuth(user, password) if scheme == "digest" else httpx.BasicAuth(user, password)
            return auth, scheme, tuple(s for s in (password,) if s)
        return None, "none", ()

    def __repr__(self) -> str:
        return (
            f"RemoteStore(query={safe_url(self.query_url)!r}, update={safe_url(self.update_url)!r}, "
            f"gsp={safe_url(self.gsp_url)!r}, auth={self.auth_kind!r})"
        )

    # --- HTTP ------------------------------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _send(self, method: str, url: httpx.URL, *, content: bytes | None, data: dict[str, str] | None, headers: dict[str, str]) -> httpx.Response:
        """One request, following redirects; credentials only go to the origin of the first URL."""
        origin = _origin(url)
        for _ in range(MAX_REDIRECTS + 1):
            request = self._client.build_request(method, url, content=content, data=data, headers=headers)
            auth = self._auth if self._auth is not None and _origin(request.url) == origin else None
            response = self._client.send(request, auth=auth)
            location = response.headers.get("Location")
            if response.status_code not in _REDIRECTS or not location:
                return response
            response.close()
            url = request.url.join(location)
            if response.status_code == 303 and method != "HEAD" or response.status_code in (301, 302) and method == "POST":
                method, content, data = "GET", None, None
                headers = {k: val for k, val in headers.items() if k.lower() != "content-type"}
            log.debug("%s redirected to %s", safe_url(request.url), safe_url(url))
        raise RemoteStoreError(f"{method} {safe_url(url)}: more than {MAX_REDIRECTS} redirects", method=method, url=safe_url(url))

    def _request(
        self,
        method: str,
        url: str | httpx.URL,
        *,
        idempotent: bool,
        content: bytes | None = None,
        data: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        ok_statuses: Iterable[int] = (),
        is_query: bool = False,
        read: Callable[[httpx.Response], Any] | None = None,
    ) -> Any:
        """Send a request, retrying what may be retried; raise a :class:`RemoteStoreError` for what still fails.

        Returns the response, or what ``read`` makes of a success answer. A body ``read`` finds malformed (it raises
        :class:`_Malformed`) is retried like a network error when the request may be repeated, then raised as
        :class:`RemoteResultError`."""
        url = httpx.URL(url)
        shown = safe_url(url)
        attempt = 0
        while True:
            attempt += 1
            last_try = attempt >= self.max_attempts
            try:
                response = self._send(method, url, content=content, data=data, headers=headers or {})
            except httpx.TransportError as exc:
                # A connection that could not be opened sent nothing: safe to retry even for updates.
                retryable = idempotent or isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                what = f"timed out ({type(exc).__name__})" if isinstance(exc, httpx.TimeoutException) else f"failed: {self._redact(str(exc)) or type(exc).__name__}"
                if retryable and not last_try and not isinstance(exc, httpx.UnsupportedProtocol):
                    self._wait(attempt, None, f"{method} {shown} {what}")
                    continue
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                error = RemoteTimeoutError if isinstance(exc, httpx.TimeoutException) else RemoteConnectionError
                raise error(f"{method} {shown} {what}{tries}", method=method, url=shown) from None
            status = response.status_code
            if status < 400 or status in ok_statuses:
                if read is None:
                    return response
                try:
                    return read(response)
                except _Malformed as exc:
                    if idempotent and not last_try:
                        self._wait(attempt, None, f"{method} {shown}: {exc}")
                        continue
                    tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                    raise RemoteResultError(
                        f"{method} {shown}: HTTP {status} but {self._redact(str(exc))}{tries}", method=method, url=shown
                    ) from None
            if (status == 429 or status >= 500) and idempotent and not last_try:
                self._wait(attempt, response.headers.get("Retry-After"), f"{method} {shown} got HTTP {status}")
                continue
            raise self._http_error(method, shown, response, attempt, is_query=is_query)

    def _wait(self, attempt: int, retry_after: str | None, why: str) -> None:
        delay = _retry_after_seconds(retry_after)
        if delay is None:
            delay = self.backoff * 2 ** (attempt - 1)
            delay += random.uniform(0, delay / 4)
        delay = min(max(delay, 0.0), self.max_wait)
        log.warning("%s; retrying in %.1f s (attempt %d of %d)", why, delay, attempt + 1, self.max_attempts)
        time.sleep(delay)

    def _http_error(self, method: str, shown: str, response: httpx.Response, attempts: int, *, is_query: bool) -> RemoteHTTPError:
        status = response.status_code
        body = self._redact(" ".join(response.text.split()))
        if len(body) > BODY_EXCERPT:
            body = body[:BODY_EXCERPT] + "..."
        tries = f" (after {attempts} attempts)" if attempts > 1 else ""
        message = f"{method} {shown}: HTTP {status} {response.reason_phrase}{tries}" + (f": {body}" if body else "")
        if status in (401, 403):
            kind = RemoteAuthError
            message += f" (credentials are read from ${USER_ENV} and ${PASSWORD_ENV}, or ${TOKEN_ENV}; auth used: {self.auth_kind})"
        elif status == 400 and is_query:
            kind = RemoteQueryError
        else:
            kind = RemoteHTTPError
        return kind(message, method=method, url=shown, status=status, body=body)

    def _graph_url(self, iri: str) -> httpx.URL:
        return httpx.URL(self.gsp_url).copy_merge_params({"graph": iri})

    # --- SPARQL ----------------------------------------------------------------------------------------------

    def select(self, sparql: str) -> SparqlJson:
        """Run a SPARQL SELECT (or ASK) query on the server; return SPARQL 1.1 JSON results, normalized like the embedded store's.

        A success answer whose body is not SPARQL JSON results (truncated, an HTML page from a proxy, JSON of another
        shape) is retried like a network error, then raised as :class:`RemoteResultError`: it is never read as "no rows".
        """
        return self._request(
            "POST", self.query_url, idempotent=True, data={"query": sparql}, headers={"Accept": SPARQL_JSON}, is_query=True,
            read=_parse_results,
        )

    def construct(self, sparql: str) -> bytes:
        """Run a SPARQL CONSTRUCT query on the server; return its triples as N-Triples (re-serialized locally)."""

        def read(response: httpx.Response) -> bytes:
            media = response.headers.get("Content-Type", N_TRIPLES).split(";")[0].strip() or N_TRIPLES
            source = ox.RdfFormat.from_media_type(media)
            if source is None:
                raise _Malformed(f"the answer is {media}, not RDF")
            try:
                return ox.serialize(ox.parse(response.content, format=source), format=ox.RdfFormat.N_TRIPLES) or b""
            except SyntaxError as exc:
                raise _Malformed(f"the answer is not valid {media}: {exc}") from None

        return self._request(
            "POST", self.query_url, idempotent=True, data={"query": sparql}, headers={"Accept": N_TRIPLES}, is_query=True, read=read
        )

    def update(self, sparql: str) -> None:
        """Run a SPARQL 1.1 Update on the update endpoint (not retried once sent: an update may not be idempotent)."""
        self._request("POST", self.update_url, idempotent=False, data={"update": sparql})

    def _stored(self, iris: list[str]) -> set[str]:
        """Which of these graphs hold anything on the server."""
        found: set[str] = set()
        for start in range(0, len(iris), _VALUES_CHUNK):
            values = " ".join(_iri_ref(iri) for iri in iris[start : start + _VALUES_CHUNK])
            rows = self.select(f"SELECT ?g WHERE {{ VALUES ?g {{ {values} }} FILTER EXISTS {{ GRAPH ?g {{ ?s ?p ?o }} }} }}")
            found.update(row["g"]["value"] for row in rows["results"]["bindings"] if "g" in row)
        return found

    # --- TraceStore ------------------------------------------------------------------------------------------

    def _write_batch(self, batch: list[EncodedTrace], *, bulk: bool) -> None:
        """PUT each trace's graph in turn. A :class:`StoreError` from here carries ``written``: the IRIs of this batch
        that were stored before it failed."""
        written: list[str] = []
        try:
            for item in batch:
                self._request(
                    "PUT", self._graph_url(item.iri), idempotent=True, content=_ntriples(item), headers={"Content-Type": N_TRIPLES}
                )
                written.append(item.iri)
        except StoreError as exc:
            exc.written = written  # type: ignore[attr-defined]
            raise

    def delete(self, iri: str) -> bool:
        """DELETE the trace's graph; ``False`` when the server says it does not exist (404)."""
        _iri_ref(iri)
        response = self._request("DELETE", self._graph_url(iri), idempotent=True, ok_statuses=(404,))
        return response.status_code != 404

    def dump(self, handle: BinaryIO, *, traces: list[str] | None = None, trig: bool = False) -> int:
        """GET each trace's graph and write it as N-Quads (or TriG), serialized as the embedded store does."""
        fmt = ox.RdfFormat.TRIG if trig else ox.RdfFormat.N_QUADS
        names = traces if traces is not None else self.trace_iris()
        for iri in names:
            _iri_ref(iri)
            response = self._request("GET", self._graph_url(iri), idempotent=True, headers={"Accept": N_TRIPLES}, ok_statuses=(404,))
            if response.status_code == 404:
                raise StoreError(f"no trace {iri} in the store at {self.location}")
            media = response.headers.get("Content-Type", N_TRIPLES).split(";")[0].strip() or N_TRIPLES
            source = ox.RdfFormat.from_media_type(media)
            if source is None:
                raise RemoteResultError(f"GET {safe_url(self.gsp_url)}: the server sent the graph as {media}, which cannot be read", method="GET", url=safe_url(self.gsp_url))
            graph = ox.NamedNode(iri)
            try:
                quads = [ox.Quad(q.subject, q.predicate, q.object, graph) for q in ox.parse(response.content, format=source)]
            except SyntaxError as exc:
                raise RemoteResultError(f"GET {safe_url(self.gsp_url)}: the graph of {iri} is not valid {media}: {exc}", method="GET", url=safe_url(self.gsp_url)) from None
            handle.write(ox.serialize(quads, format=fmt, prefixes=v.PREFIXES if trig else None))
        return len(names)

    def close(self) -> None:
        self._client.close()


# --- helpers ---------------------------------------------------------------------------------------------------


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


def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - datetime.now(timezone.utc)).total_seconds()


def _normalize_term(term: dict[str, Any]) -> dict[str, Any]:
    out = dict(term)
    if out.get("type") == "typed-literal":  # SPARQL 1.0-era JSON (older Virtuoso)
        out["type"] = "literal"
    if out.get("type") == "literal":
        if "lang" in out and "xml:lang" not in out:
            out["xml:lang"] = out.pop("lang")
        if out.get("datatype") == _XSD_STRING or ("xml:lang" in out and out.get("datatype") == _RDF_LANG_STRING):
            del out["datatype"]
    return out


class _Malformed(Exception):
    """A success answer whose body is not SPARQL JSON results; the message says what is wrong with it."""


def _parse_results(response: httpx.Response) -> SparqlJson:
    media = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if media and ox.RdfFormat.from_media_type(media) is not None:
        raise ValueError(f"expected a SELECT or ASK query, got a CONSTRUCT or DESCRIBE query (the server answered {media})")
    if "json" not in media:
        raise _Malformed(
            f"the answer is {media or 'without a content type'}, not SPARQL JSON results (is it a SPARQL 1.1 query endpoint?)"
        )
    try:
        doc = response.json()
    except ValueError as exc:
        raise _Malformed(f"the answer is not valid JSON ({exc})") from None
    return _normalize_results(doc)


def _normalize_results(doc: Any) -> SparqlJson:
    """SPARQL JSON results in the shape the embedded store returns (the same answers compare equal); a document that
    does not follow the SPARQL 1.1 JSON results format raises :class:`_Malformed` naming the first fault."""
    if not isinstance(doc, dict):
        raise _Malformed(f"the answer is a JSON {type(doc).__name__}, not a SPARQL results object")
    if "boolean" in doc:
        if not isinstance(doc["boolean"], bool):
            raise _Malformed(f"'boolean' is {doc['boolean']!r}, not true or false")
        return {"head": {}, "boolean": doc["boolean"]}
    head, results = doc.get("head"), doc.get("results")
    if not isinstance(head, dict) or not isinstance(head.get("vars", []), list):
        raise _Malformed("the answer has no 'head' object with a 'vars' list")
    if not isinstance(results, dict) or not isinstance(results.get("bindings"), list):
        raise _Malformed("the answer has no 'results' object with a 'bindings' list")
    names = head.get("vars", [])
    if not all(isinstance(name, str) for name in names):
        raise _Malformed("'head.vars' holds something other than variable names")
    bindings = []
    for index, row in enumerate(results["bindings"]):
        if not isinstance(row, dict):
            raise _Malformed(f"results.bindings[{index}] is not an object")
        for name, term in row.items():
            if not isinstance(term, dict) or term.get("type") not in _TERM_TYPES or not isinstance(term.get("value"), str):
                raise _Malformed(f"results.bindings[{index}].{name} is not an RDF term ({{'type': ..., 'value': ...}})")
        bindings.append({name: _normalize_term(row[name]) for name in names if name in row})
    return {"head": {"vars": names}, "results": {"bindings": bindings}}


_TERM_TYPES = frozenset({"uri", "literal", "typed-literal", "bnode", "triple"})
