"""``dspy-rdf serve``: one process that owns a store, takes OpenTelemetry spans in and answers SPARQL out.

- ``POST /v1/traces``: an OTLP/HTTP traces receiver (protobuf or JSON, optionally gzipped). A request is answered 200
  only once its spans are in the spool on disk (:mod:`.spool`); spans that cannot be read are refused in the OTLP
  partial-success answer (:mod:`.receiver`). Traces are built and stored as ``export --from otlp`` builds them
  (:mod:`.builder`). A full disk is answered 503 with ``Retry-After``, which OTLP exporters retry.
- ``GET``/``POST /query`` (also ``/sparql``): a read-only SPARQL 1.1 Protocol endpoint over the same store: SELECT
  and ASK as SPARQL JSON results, CONSTRUCT and DESCRIBE as N-Triples, the same checks as ``query --sparql`` (no
  update, no SERVICE). ``GET /store?graph=IRI`` gives one trace's graph (the Graph Store Protocol's read). So
  ``dspy-rdf query|stats|validate|report|dump --store http://HOST:PORT`` work while traces stream in.
- ``GET /status``: what has been received, spooled, stored and refused, as JSON.

It binds to 127.0.0.1 unless told otherwise; any other address needs a token, which every request must then carry
as ``Authorization: Bearer <token>``. The token is never printed.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from dspy_rdf.analytics.catalog import check_user_sparql, query_form
from dspy_rdf.canonical.identity import DEFAULT_BASE
from dspy_rdf.service.builder import TraceBuilder
from dspy_rdf.service.receiver import MAX_BODY_BYTES, ReceiverError, decode_request, export_response, spans_of_record
from dspy_rdf.service.spool import Spool, SpoolError
from dspy_rdf.store.base import TraceStore, check_trace_iri

__all__ = ["DEFAULT_PORT", "ServeOptions", "TraceServer", "check_binding"]

DEFAULT_PORT = 4318
"""OTLP/HTTP's port: exporters send to http://localhost:4318/v1/traces unless told otherwise."""

SPARQL_JSON = "application/sparql-results+json"
N_TRIPLES = "application/n-triples"


@dataclass
class ServeOptions:
    """How a :class:`TraceServer` runs: where it listens, the token it asks for (None: none), its spool directory,
    how long a trace's spans may keep coming after its root span (``grace``) and how long a trace without a root
    span waits (``orphan``), in seconds, the largest request body, and how many worker processes build traces (None:
    one per core, at most four; 0: none, the server's own threads do it)."""

    spool: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None
    grace: float = 2.0
    orphan: float = 600.0
    base: str = DEFAULT_BASE
    max_body: int = MAX_BODY_BYTES
    workers: int | None = None


def check_binding(host: str, token: str | None) -> None:
    """Refuse (ValueError) to listen beyond this machine without a token."""
    if token is not None and not token.strip():
        raise ValueError("the token is empty")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and token is None:
        raise ValueError(
            f"--host {host} would take traces and queries from other machines: give a token too (--token, or "
            "$DSPY_RDF_TOKEN), which every request must then send as 'Authorization: Bearer <token>'"
        )


def _shown_store(store: TraceStore) -> str:
    """The store a spool belongs to, as a spool names it (a directory, or a server's URL without credentials)."""
    return str(getattr(store, "location", None) or store)


class _Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.spans = 0
        self.rejected_spans = 0
        self.refused_requests = 0
        self.queries = 0


class TraceServer:
    """The receiver and the SPARQL endpoint over ``store`` (see the module docstring). :meth:`start` reads the spool
    again (what a previous run acknowledged and did not store yet), then listens; :meth:`stop` stops listening,
    stores the traces that are ready, and closes the spool (not the store, which the caller opened)."""

    def __init__(self, store: TraceStore, options: ServeOptions, *, log: Callable[[str], None] = lambda message: None) -> None:
        check_binding(options.host, options.token)
        self.store = store
        self.options = options
        self.log = log
        self.spool = Spool(options.spool, owner=_shown_store(store))
        self.builder = TraceBuilder(store, self.spool, grace=options.grace, orphan=options.orphan, base=options.base, workers=options.workers, log=log)
        self.counts = _Counts()
        self._receive = threading.Lock()  # spool order is builder order
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.replayed = 0

    @property
    def url(self) -> str:
        """The server's base URL (``--store`` it to query, ``/v1/traces`` under it to send spans)."""
        assert self._http is not None, "the server is not started"
        host, port = self._http.server_address[:2]
        host = str(host)
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    def start(self) -> None:
        """Listen, read the spool from its checkpoint, start the builder, and answer requests (in a thread)."""
        handler = type("Handler", (_Handler,), {"server_state": self})
        family = socket.AF_INET6 if ":" in self.options.host else socket.AF_INET
        server_class = type("Server", (ThreadingHTTPServer,), {"daemon_threads": True, "allow_reuse_address": True, "address_family": family})
        try:
            self._http = server_class((self.options.host, self.options.port), handler)  # before any thread or process
        except OSError as exc:
            raise OSError(f"cannot listen on {self.options.host}:{self.options.port}: {exc.strerror or exc}") from None
        self.builder.already_stored(set(self.spool.stored_traces))
        for record, payload in self.spool.replay():
            try:
                spans = spans_of_record(payload)
            except ReceiverError as exc:  # a record the CRC vouches for, which this receiver read when it came
                self.log(f"spool record {record} cannot be read again, left out: {exc}")
                spans = []
            self.builder.submit(record, spans)
            self.replayed += 1
        self.builder.start()
        self._thread = threading.Thread(target=self._http.serve_forever, name="dspy-rdf serve", daemon=True)
        self._thread.start()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every span received so far is stored (or refused): each trace still gathering waits out its
        grace first. True when that happened within ``timeout`` seconds."""
        return self.builder.wait_idle(timeout, settled=True)

    def stop(self) -> None:
        """Stop taking requests, put the traces that are ready, keep the rest in the spool."""
        if self._http is not None:
            if self._thread is not None:  # shutdown() waits for a serve_forever() that must have begun
                self._http.shutdown()
            self._http.server_close()
        self.builder.stop()
        self.spool.close()

    def status(self) -> dict[str, Any]:
        """What the server has done, as :meth:`_Handler` answers ``GET /status``."""
        counts = self.builder.counts
        with self.counts.lock:
            received = {
                "requests": self.counts.requests, "spans": self.counts.spans, "rejected_spans": self.counts.rejected_spans,
                "refused_requests": self.counts.refused_requests, "queries": self.counts.queries,
            }  # fmt: skip
        return {
            "received": received,
            "spool": asdict(self.spool.stats()),
            "traces": {
                "written": counts.written, "already_stored": counts.already_stored, "failed": counts.failed,
                "gathering": counts.gathering, "store_errors": counts.store_errors, "late_spans": counts.late_spans,
                "repeated_spans": counts.repeated_spans,
            },  # fmt: skip
            "recent_errors": list(counts.recent_errors),
        }

    def receive(self, body: bytes, content_type: str, content_encoding: str) -> tuple[int, str, bytes, dict[str, str]]:
        """Answer one OTLP export request: ``(status, content type, body, headers)``."""
        try:
            encoding, received = decode_request(body, content_type, content_encoding, limit=self.options.max_body)
        except ReceiverError as exc:
            with self.counts.lock:
                self.counts.refused_requests += 1
            return exc.status, "text/plain; charset=utf-8", f"{exc}\n".encode(), {}
        if received.accepted_spans:
            try:
                with self._receive:
                    record = self.spool.append(received.record)
                    self.builder.submit(record, received.spans)
            except SpoolError as exc:
                self.log(str(exc))
                with self.counts.lock:
                    self.counts.refused_requests += 1
                # OTLP exporters retry 503 after Retry-After: nothing was acknowledged
                return 503, "text/plain; charset=utf-8", b"the spool cannot be written; try again later\n", {"Retry-After": "5"}
        with self.counts.lock:
            self.counts.requests += 1
            self.counts.spans += received.accepted_spans
            self.counts.rejected_spans += received.rejected_spans
        return 200, encoding.value, export_response(encoding, received), {}

    def query(self, sparql: str) -> tuple[int, str, bytes]:
        """Answer one SPARQL query: ``(status, content type, body)``."""
        try:
            check_user_sparql(sparql)
            form = query_form(sparql)
            if form in ("SELECT", "ASK"):
                body, media = json.dumps(self.store.select(sparql), ensure_ascii=False).encode("utf-8"), SPARQL_JSON
            else:
                body, media = self.store.construct(sparql), N_TRIPLES
        except ValueError as exc:  # the command line's hint (--allow-federation) is not this server's
            return 400, "text/plain; charset=utf-8", f"{str(exc).split('; allow it with')[0]}\n".encode()
        except OSError as exc:
            return 500, "text/plain; charset=utf-8", f"{exc}\n".encode()
        with self.counts.lock:
            self.counts.queries += 1
        return 200, media, body

    def graph(self, iri: str) -> tuple[int, str, bytes]:
        """One trace's graph as N-Triples (404 when the store has no such graph)."""
        try:
            check_trace_iri(iri)
        except ValueError as exc:
            return 400, "text/plain; charset=utf-8", f"{exc}\n".encode()
        known = self.store.select(f"ASK {{ GRAPH <{iri}> {{ ?s ?p ?o }} }}").get("boolean")
        if not known:
            return 404, "text/plain; charset=utf-8", f"no graph {iri} in the store\n".encode()
        return 200, N_TRIPLES, self.store.construct(f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{iri}> {{ ?s ?p ?o }} }}")


_READ_ONLY = (
    "this server is read-only over SPARQL: send traces as OpenTelemetry spans to /v1/traces (dspy-rdf to-otlp "
    "--endpoint, an OTLP exporter, or dspy_rdf.service.OtlpSink)\n"
).encode()


class _Handler(BaseHTTPRequestHandler):
    server_state: TraceServer
    protocol_version = "HTTP/1.1"
    timeout = 120  # seconds a connection may sit idle or send slowly (a client that stalls holds a thread)
    server_version = "dspy-rdf"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # one line per request would drown the errors worth reading

    # --- plumbing ---------------------------------------------------------------------------------------------

    def _send(self, status: int, media: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        if self.command in ("POST", "PUT", "DELETE") and not getattr(self, "_body_read", False):
            self.close_connection = True  # its body was not read: the connection cannot carry another request
        self.send_response(status)
        if self.close_connection:
            self.send_header("Connection", "close")  # so that the client opens a new one for its next request
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _text(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, "text/plain; charset=utf-8", f"{message}\n".encode(), headers)

    def _authorized(self) -> bool:
        token = self.server_state.options.token
        if token is None:
            return True
        given = self.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode()):
            return True
        self._text(401, "a token is needed: send 'Authorization: Bearer <token>'", {"WWW-Authenticate": 'Bearer realm="dspy-rdf"'})
        return False

    def _body(self) -> bytes | None:
        """The request body, read whole (Content-Length or chunked); None after answering 411/413."""
        limit = self.server_state.options.max_body
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            size = 0
            while True:
                line = self.rfile.readline(1024)
                try:
                    length = int(line.split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    self.close_connection = True
                    self._text(400, "a chunk's size is not hexadecimal")
                    return None
                if length == 0:
                    self.rfile.readline(1024)
                    self._body_read = True
                    return b"".join(chunks)
                size += length
                if size > limit:
                    self.close_connection = True
                    self._text(413, f"the body is larger than {limit} bytes")
                    return None
                chunks.append(self.rfile.read(length))
                self.rfile.readline(1024)
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            self._text(411, "send a Content-Length")
            return None
        if not length_text.strip().isdigit():
            self._text(400, "Content-Length is not a number")
            return None
        length = int(length_text)
        if length > limit:
            self.close_connection = True
            self._text(413, f"the body is larger than {limit} bytes")
            return None
        body = self.rfile.read(length)
        self._body_read = True
        return body

    # --- routes -----------------------------------------------------------------------------------------------

    def handle_one_request(self) -> None:
        """One request; anything unforeseen is a one-line 500 and a log line, never a traceback or a dropped
        connection."""
        self._body_read = False
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - the server keeps serving
            self.server_state.log(f"{self.command} {urlsplit(self.path).path if hasattr(self, 'path') else ''}: {type(exc).__name__}: {exc}")
            self.close_connection = True
            try:
                self._text(500, f"the server failed on this request: {type(exc).__name__}")
            except OSError:
                pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if not self._authorized():
            return
        url = urlsplit(self.path)
        params = parse_qs(url.query)
        if url.path in ("/query", "/sparql"):
            if "query" not in params:
                self._text(400, "give the query as ?query=...")
                return
            self._send(*self.server_state.query(params["query"][0]))
        elif url.path == "/store":
            if "graph" not in params:
                self._text(400, "give the graph as ?graph=IRI (this endpoint serves one trace's graph at a time)")
                return
            self._send(*self.server_state.graph(params["graph"][0]))
        elif url.path == "/status":
            self._send(200, "application/json", json.dumps(self.server_state.status(), indent=2).encode() + b"\n")
        elif url.path in ("/", ""):
            self._text(200, "dspy-rdf serve: POST OTLP spans to /v1/traces; SPARQL at /query; a trace's graph at "
                       "/store?graph=IRI; counts at /status")  # fmt: skip
        else:
            self._text(404, f"no such endpoint {url.path}")

    def do_HEAD(self) -> None:  # noqa: N802
        if self._authorized():
            path = urlsplit(self.path).path
            self._send(200 if path in ("/", "/status", "/query", "/sparql", "/store") else 404, "text/plain; charset=utf-8", b"")

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        url = urlsplit(self.path)
        if url.path in ("/update", "/store") or url.path.startswith("/store"):
            self._send(405, "text/plain; charset=utf-8", _READ_ONLY, {"Allow": "GET"})
            return
        if url.path not in ("/v1/traces", "/query", "/sparql"):
            self._text(404, f"no such endpoint {url.path}")
            return
        body = self._body()
        if body is None:
            if url.path == "/v1/traces":
                with self.server_state.counts.lock:
                    self.server_state.counts.refused_requests += 1
            return
        if url.path == "/v1/traces":
            status, media, answer, headers = self.server_state.receive(
                body, self.headers.get("Content-Type", ""), self.headers.get("Content-Encoding", "")
            )
            self._send(status, media, answer, headers)
            return
        media = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media == "application/sparql-query":
            text = body.decode("utf-8", "replace")
        elif media == "application/x-www-form-urlencoded":
            form = parse_qs(body.decode("utf-8", "replace"))
            if "update" in form:
                self._send(405, "text/plain; charset=utf-8", _READ_ONLY, {"Allow": "GET"})
                return
            if "query" not in form:
                self._text(400, "give the query as the form field query=...")
                return
            text = form["query"][0]
        else:
            self._text(415, "send the query as application/sparql-query or a form (query=...)")
            return
        self._send(*self.server_state.query(text))

    def do_PUT(self) -> None:  # noqa: N802
        if self._authorized():
            self._send(405, "text/plain; charset=utf-8", _READ_ONLY, {"Allow": "GET"})

    do_DELETE = do_PUT
