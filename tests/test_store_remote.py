"""The remote store: a real ``oxigraph serve`` on 127.0.0.1 (fixture ``oxigraph_server`` in conftest.py), and tiny
scripted HTTP servers on 127.0.0.1 for retries, ``Retry-After``, timeouts, typed errors, credentials and redirects."""

from __future__ import annotations

import io
import json
import re
import socket
import threading
import time
import traceback
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

import pyoxigraph as ox
import pytest

from dspy_rdf.canonical import model as m
from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.writer import trace_lines
from dspy_rdf.store import EmbeddedStore, StoreError, open_store
from dspy_rdf.store.remote import (
    RemoteAuthError,
    RemoteConnectionError,
    RemoteEvaluationError,
    RemoteHTTPError,
    RemoteQueryError,
    RemoteResultError,
    RemoteStore,
    RemoteStoreError,
    RemoteTimeoutError,
    RemoteTLSError,
    endpoints_for,
)

SECRET = "s3cr3t-Value-42"
FAST = {"max_attempts": 3, "backoff": 0.01, "timeout": 5, "connect_timeout": 1}


@pytest.fixture(autouse=True)
def no_store_env(monkeypatch):
    for name in (
        "DSPY_RDF_QUERY_URL", "DSPY_RDF_UPDATE_URL", "DSPY_RDF_GSP_URL", "DSPY_RDF_STORE_USER", "DSPY_RDF_STORE_PASSWORD",
        "DSPY_RDF_STORE_TOKEN", "DSPY_RDF_STORE_AUTH", "DSPY_RDF_STORE_TIMEOUT", "DSPY_RDF_STORE_CONNECT_TIMEOUT",
        "DSPY_RDF_STORE_MAX_ATTEMPTS",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def bundled() -> list[m.Trace]:
    return [item.trace for item in read_traces(bundled_traces_path())]


def sorted_dump(store, traces=None, trig=False) -> list[str]:
    handle = io.BytesIO()
    store.dump(handle, traces=traces, trig=trig)
    return sorted(handle.getvalue().decode("utf-8").splitlines())


def trig_quads(store) -> set:
    """The quads of a TriG dump (how a serializer groups subjects depends on the order it is given the quads)."""
    handle = io.BytesIO()
    store.dump(handle, trig=True)
    return set(ox.parse(handle.getvalue(), format=ox.RdfFormat.TRIG))


# --- against a real Oxigraph server ----------------------------------------------------------------------------


def test_open_store_gives_a_remote_store_for_a_url(oxigraph_server):
    with open_store(oxigraph_server) as store:
        assert isinstance(store, RemoteStore)
        assert (store.query_url, store.update_url, store.gsp_url) == endpoints_for(oxigraph_server)
        assert store.location == oxigraph_server


def test_put_stats_iris_idempotence_delete_dump(remote_store, tmp_path):
    traces = bundled()
    iris = [trace_lines(t)[0] for t in traces]
    report = remote_store.put(traces)
    assert report.written == iris and report.already_stored == [] and report.failed == []
    assert remote_store.trace_iris() == sorted(iris)
    with EmbeddedStore(tmp_path / "embedded") as embedded:
        embedded.put(traces)
        assert remote_store.stats() == embedded.stats()
        assert sorted_dump(remote_store) == sorted_dump(embedded)
        assert trig_quads(remote_store) == trig_quads(embedded)
    first = sorted_dump(remote_store)
    again = remote_store.put(traces)
    assert again.written == [] and again.already_stored == iris
    assert sorted_dump(remote_store) == first
    assert remote_store.delete(iris[0]) is True
    assert remote_store.delete(iris[0]) is False
    assert remote_store.trace_iris() == sorted(iris[1:])
    assert remote_store.stats()["traces"] == len(iris) - 1
    with pytest.raises(StoreError, match="no trace"):
        remote_store.dump(io.BytesIO(), traces=[iris[0]])
    assert remote_store.dump(io.BytesIO(), traces=iris[1:3]) == 2


def test_select_answers_equal_the_embedded_store(remote_store, tmp_path):
    traces = bundled()
    remote_store.put(traces)
    queries = [resources.files("dspy_rdf.analytics").joinpath("queries", name).read_text() for name in ("part_kinds.rq", "tokens_per_model.rq", "tool_calls_per_tool.rq")]
    queries += [
        # the traces' graphs (each store's ledger entries have names of their own)
        'SELECT ?g ?p ?o WHERE { GRAPH ?g { ?g ?p ?o } FILTER(!STRSTARTS(STR(?g), "urn:dspy-rdf:ledger:")) } ORDER BY ?g ?p ?o',
        'SELECT ?s (LANG(?o) AS ?lang) ?o WHERE { GRAPH ?g { ?s ?p ?o FILTER(isLiteral(?o)) } FILTER(!STRSTARTS(STR(?g), "urn:dspy-rdf:ledger:")) } ORDER BY ?s ?o LIMIT 200',
    ]
    with EmbeddedStore(tmp_path / "embedded") as embedded:
        embedded.put(traces)
        for query in queries:
            assert remote_store.select(query) == embedded.select(query), query
    assert remote_store.select("ASK { GRAPH ?g { ?s ?p ?o } }") == {"head": {}, "boolean": True}
    assert remote_store.select("ASK { GRAPH <urn:nothing> { ?s ?p ?o } }") == {"head": {}, "boolean": False}


def test_a_bad_query_is_a_value_error_with_the_status(remote_store):
    with pytest.raises(RemoteQueryError) as caught:
        remote_store.select("SELEKT nothing")
    assert isinstance(caught.value, ValueError) and caught.value.status == 400
    assert "HTTP 400" in str(caught.value)


def test_a_failed_put_says_which_traces_of_the_batch_were_written(remote_store, oxigraph_server):
    """The Graph Store endpoint fails after the first trace: the error lists what was written. (``remote_store``
    empties the session's server first: traces another test left there would be skipped, never sent.)"""
    traces = bundled()[:3]
    with FakeServer() as fake, RemoteStore(oxigraph_server, gsp_url=fake.url + "/store", max_attempts=1, write="graph") as store:
        fake.script(Reply(204), Reply(500, body="disk full"))
        with pytest.raises(RemoteHTTPError) as caught:
            store.put(traces)
    error = caught.value
    assert error.status == 500 and "disk full" in str(error)
    assert error.written == [trace_lines(traces[0])[0]]
    assert hasattr(error, "report")
    assert [r.method for r in fake.requests] == ["PUT", "PUT"]
    assert fake.requests[0].headers["Content-Type"] == "application/n-triples"
    assert f"> <{trace_lines(traces[0])[0]}> .\n".encode() not in fake.requests[0].body


# --- scripted servers --------------------------------------------------------------------------------------------


class Reply:
    """A scripted answer; with ``echo``, ``{authorization}`` in the body is the request's Authorization header (a
    server that quotes it in an error message)."""

    def __init__(
        self, status: int = 200, *, body: str | bytes = b"", headers: dict[str, str] | None = None, delay: float = 0.0, echo: bool = False
    ) -> None:
        self.status, self.headers, self.delay, self.echo = status, headers or {}, delay, echo
        self.body = body.encode() if isinstance(body, str) else body


EMPTY_RESULTS = Reply(200, body=json.dumps({"head": {"vars": ["g"]}, "results": {"bindings": []}}), headers={"Content-Type": "application/sparql-results+json"})


class Seen:
    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body


class FakeServer:
    """An HTTP server on 127.0.0.1 that answers with the scripted replies in order (then 200) and records requests."""

    def __init__(self, host: str = "127.0.0.1", *, server_header: bool = True) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Seen] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            if not server_header:  # a server, or a proxy before it, that does not say what it is

                def send_response(self, code: int, message: str | None = None) -> None:
                    self.log_request(code)
                    self.send_response_only(code, message)
                    self.send_header("Date", self.date_time_string())

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                outer.requests.append(Seen(self.command, self.path, dict(self.headers.items()), body))
                reply = outer.replies.popleft() if outer.replies else Reply(200)
                time.sleep(reply.delay)
                body = reply.body.replace(b"{authorization}", self.headers.get("Authorization", "").encode()) if reply.echo else reply.body
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up (timeout test)
                    pass

            do_GET = do_POST = do_PUT = do_DELETE = _handle

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_busy_or_unreachable_backend_502_503_504_is_retried_with_backoff_then_succeeds():
    with FakeServer() as fake, RemoteStore(fake.url, **{**FAST, "max_attempts": 4}) as store:
        fake.script(Reply(502), Reply(503), Reply(504), EMPTY_RESULTS)
        assert store.select("SELECT ?g WHERE {}")["results"]["bindings"] == []
    assert [r.method for r in fake.requests] == ["POST"] * 4
    assert fake.requests[-1].path == "/query"
    assert fake.requests[-1].headers["Accept"] == "application/sparql-results+json"
    assert fake.requests[-1].headers["Content-Type"] == "application/x-www-form-urlencoded"


def test_a_server_that_does_not_say_what_it_is_is_asked_once_and_taken_for_another_engine():
    """A canned query with a version for one engine needs the store's engine: read from the ``Server`` header of the
    answers, or asked once with ``ASK {}`` when none came; a server that never says is OTHER, and is not asked again."""
    from dspy_rdf.store.base import SparqlEngine

    ask = Reply(200, body=json.dumps({"head": {}, "boolean": True}), headers={"Content-Type": "application/sparql-results+json"})
    with FakeServer(server_header=False) as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(ask, ask)
        assert store.sparql_engine == SparqlEngine.OTHER
        assert store.sparql_engine == SparqlEngine.OTHER
        assert [r.body for r in fake.requests] == [b"query=ASK+%7B%7D"]
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:  # this one says (Python's BaseHTTP)
        fake.script(EMPTY_RESULTS)
        store.select("SELECT ?g WHERE {}")
        assert store.sparql_engine == SparqlEngine.OTHER and len(fake.requests) == 1  # known from the answer: no ASK


def test_retry_after_is_honoured():
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(Reply(503, headers={"Retry-After": "1"}), Reply(429, headers={"Retry-After": "0"}), EMPTY_RESULTS)
        start = time.monotonic()
        store.select("SELECT ?g WHERE {}")
        elapsed = time.monotonic() - start
    assert len(fake.requests) == 3
    assert elapsed >= 1.0  # the server's Retry-After: 1 was waited for


def test_persistent_errors_are_typed_with_status_and_body_excerpt():
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(*[Reply(503, body="overloaded " + "x" * 2000)] * 3)
        with pytest.raises(RemoteHTTPError) as caught:
            store.delete("urn:trace:1")
        assert caught.value.status == 503 and len(fake.requests) == 3
        assert "HTTP 503" in str(caught.value) and "overloaded" in str(caught.value) and len(str(caught.value)) < 600
        assert "after 3 attempts" in str(caught.value)
        assert isinstance(caught.value, StoreError)

        # the Graph Store DELETE itself (delete reads the trace first, for the ledger)
        fake.script(Reply(404, body="no such graph"))
        assert store._delete_graph("urn:trace:1") is False
        fake.script(Reply(204))
        assert store._delete_graph("urn:trace:1") is True
        assert fake.requests[-1].method == "DELETE" and fake.requests[-1].path == "/store?graph=urn%3Atrace%3A1"

        fake.script(Reply(409, body="conflict"))  # 4xx other than 429: not retried
        before = len(fake.requests)
        with pytest.raises(RemoteHTTPError) as caught:
            store._delete_graph("urn:trace:1")
        assert caught.value.status == 409 and len(fake.requests) == before + 1


def test_a_500_is_final_at_once_unless_it_says_it_may_pass_when_sent_again():
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(Reply(500, body="NullPointerException"), EMPTY_RESULTS)
        with pytest.raises(RemoteHTTPError) as caught:
            store.select("SELECT ?g WHERE {}")
        assert caught.value.status == 500 and len(fake.requests) == 1 and "attempts" not in str(caught.value)
        fake.replies.clear()
        fake.script(Reply(500, headers={"Retry-After": "0"}), Reply(500, body="Virtuoso 40001 Error SR172: Transaction deadlocked"), EMPTY_RESULTS)
        assert store.select("SELECT ?g WHERE {}")["results"]["bindings"] == []
        assert len(fake.requests) == 4


@pytest.mark.parametrize("status", [400, 404, 405, 413, 501])
def test_an_error_answer_that_says_what_is_wrong_with_the_request_is_final_at_once(status):
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(Reply(status, body="no"), EMPTY_RESULTS, EMPTY_RESULTS)
        with pytest.raises(RemoteHTTPError) as caught:
            store.select("SELECT ?g WHERE {}")
    assert caught.value.status == status and len(fake.requests) == 1


def test_a_request_timeout_or_too_many_requests_is_retried():
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(Reply(408), Reply(429), EMPTY_RESULTS)
        assert store.select("SELECT ?g WHERE {}")["results"]["bindings"] == []
    assert len(fake.requests) == 3


def test_https_to_a_plain_http_server_that_answers_the_handshake_fails_at_once_saying_so():
    with FakeServer() as fake, RemoteStore(f"https://127.0.0.1:{fake.port}", **FAST) as store:
        with pytest.raises(RemoteTLSError) as caught:
            store.select("ASK {}")
    assert fake.requests == []  # http.server answered the handshake with an HTTP error, no request was read
    message = str(caught.value)
    assert message.startswith(f"POST https://127.0.0.1:{fake.port}/query: the TLS handshake failed: ")
    assert "plain-HTTP server? then give an http:// URL" in message and "attempts" not in message


def test_https_to_an_oxigraph_server_that_answers_no_handshake_fails_after_one_connect_timeout(oxigraph_server):
    url = oxigraph_server.replace("http://", "Https://")
    with RemoteStore(url, max_attempts=3, backoff=0.5, connect_timeout=1, timeout=5) as store:
        with pytest.raises(RemoteTLSError) as caught:
            store.select("ASK {}")
    assert "attempts" not in str(caught.value)  # not retried: a retried error names its attempts
    assert "answered no TLS handshake" in str(caught.value) and "plain-HTTP server?" in str(caught.value)


def test_a_service_call_that_fails_on_oxigraph_is_one_clear_error_naming_it_not_retried(remote_store):
    closed = f"http://127.0.0.1:{closed_port()}/sparql"
    for run in (remote_store.select, remote_store.construct):
        form = "SELECT *" if run == remote_store.select else "CONSTRUCT { ?s ?p ?o }"
        with pytest.raises(RemoteEvaluationError) as caught:
            run(f"{form} WHERE {{ SERVICE <{closed}> {{ ?s ?p ?o }} }}")
        message = str(caught.value)
        assert f"the SERVICE call to <{closed}> failed on the server: Connection refused" in message, message
        assert "JSON" not in message and "attempts" not in message and "\n" not in message
        assert caught.value.detail.startswith(f"the SERVICE call to <{closed}>")


def test_an_answer_the_server_ended_with_an_error_is_read_once():
    body = '{"head":{"vars":["o","p","s"]},"results":{"bindings":[{"s":{"type":"uri","value":"urn:a"}}Connection refused (os error 111)'
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(Reply(200, body=body, headers=JSON_RESULTS), EMPTY_RESULTS)
        with pytest.raises(RemoteEvaluationError) as caught:
            store.select("SELECT * WHERE { SERVICE <http://a.example/sparql> { ?s ?p ?o } SERVICE <http://b.example/sparql> { ?s ?p ?o } }")
    assert len(fake.requests) == 1
    assert "one of the SERVICE calls (to <http://a.example/sparql>, <http://b.example/sparql>) failed on the server: Connection refused" in str(caught.value)


def test_an_unsupported_function_on_oxigraph_is_one_clear_error_not_retried(remote_store, capsys, oxigraph_server):
    from dspy_rdf.cli.main import main

    query = "SELECT * WHERE { BIND(<http://example.org/f>(1) AS ?x) }"
    assert main(["query", "--store", oxigraph_server, "--sparql", query]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: POST {oxigraph_server}/query: HTTP 500 Internal Server Error: The custom function <http://example.org/f> is not supported"


JSON_RESULTS = {"Content-Type": "application/sparql-results+json"}
MALFORMED = {
    "truncated JSON": Reply(200, body='{"head": {"vars": ["g"]}, "results": {"bindi', headers=JSON_RESULTS),
    "an HTML page": Reply(200, body="<html><body>Gateway login</body></html>", headers={"Content-Type": "text/html"}),
    "no content type": Reply(200, body="ok"),
    "a JSON list": Reply(200, body="[1, 2]", headers=JSON_RESULTS),
    "no results": Reply(200, body='{"head": {"vars": ["g"]}}', headers=JSON_RESULTS),
    "bindings not a list": Reply(200, body='{"head": {"vars": ["g"]}, "results": {"bindings": {}}}', headers=JSON_RESULTS),
    "a row not an object": Reply(200, body='{"head": {"vars": ["g"]}, "results": {"bindings": [7]}}', headers=JSON_RESULTS),
    "a term without a type": Reply(200, body='{"head": {"vars": ["g"]}, "results": {"bindings": [{"g": {"value": "x"}}]}}', headers=JSON_RESULTS),
    "a boolean that is not": Reply(200, body='{"head": {}, "boolean": "yes"}', headers=JSON_RESULTS),
}


@pytest.mark.parametrize("kind", MALFORMED)
def test_a_malformed_success_answer_is_retried_then_a_clear_error_never_no_rows(kind, monkeypatch):
    monkeypatch.setenv("DSPY_RDF_STORE_TOKEN", SECRET)
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(*[MALFORMED[kind]] * 3)
        with pytest.raises(RemoteResultError) as caught:
            store.select("SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } }")
    message = str(caught.value)
    assert message.startswith(f"POST {fake.url}/query: HTTP 200 but ") and "(after 3 attempts)" in message
    assert SECRET not in message and SECRET not in repr(caught.value)
    assert len(fake.requests) == 3 and caught.value.method == "POST"


def test_a_malformed_answer_then_a_good_one_is_read():
    good = Reply(200, body=json.dumps({"head": {"vars": ["g"]}, "results": {"bindings": [{"g": {"type": "uri", "value": "urn:x"}}]}}), headers=JSON_RESULTS)
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(MALFORMED["an HTML page"], good)
        assert store.select("SELECT ?g {}")["results"]["bindings"] == [{"g": {"type": "uri", "value": "urn:x"}}]


def test_a_construct_answer_is_a_value_error_at_once():
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(Reply(200, body="<urn:a> <urn:b> <urn:c> .\n", headers={"Content-Type": "application/n-triples"}))
        with pytest.raises(ValueError, match="CONSTRUCT or DESCRIBE"):
            store.select("CONSTRUCT WHERE { ?s ?p ?o }")
    assert len(fake.requests) == 1


def test_an_export_whose_existence_check_is_garbage_writes_nothing_and_says_so(tmp_path):
    traces = bundled()[:2]
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(*[MALFORMED["a JSON list"]] * 3)
        with pytest.raises(StoreError) as caught:
            store.put(traces)
    assert caught.value.report.written == []
    assert [r.method for r in fake.requests] == ["POST"] * 3  # no PUT was sent


def test_a_graph_that_is_not_rdf_is_a_clear_error_on_dump():
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        sizes = {"head": {"vars": ["g", "n"]}, "results": {"bindings": [
            {"g": {"type": "uri", "value": "urn:trace:1"}, "n": {"type": "literal", "value": "3", "datatype": "http://www.w3.org/2001/XMLSchema#integer"}}
        ]}}  # fmt: skip
        fake.script(Reply(200, body=json.dumps(sizes).encode(), headers={"Content-Type": "application/sparql-results+json"}))
        fake.script(*[Reply(200, body="<html>not rdf", headers={"Content-Type": "application/n-triples"})] * FAST["max_attempts"])
        with pytest.raises(RemoteStoreError, match="not valid application/n-triples"):
            store.dump(io.BytesIO(), traces=["urn:trace:1"])


def test_updates_are_not_retried_once_sent():
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(Reply(503), Reply(204))
        with pytest.raises(RemoteHTTPError) as caught:
            store.update("CLEAR ALL")
    assert caught.value.status == 503 and len(fake.requests) == 1
    assert fake.requests[0].path == "/update"


def test_a_stalled_server_times_out_and_is_retried():
    with FakeServer() as fake, RemoteStore(fake.url, max_attempts=2, backoff=0.01, timeout=0.3, connect_timeout=1) as store:
        fake.script(Reply(200, delay=2), Reply(200, delay=2))
        with pytest.raises(RemoteTimeoutError) as caught:
            store.select("SELECT ?g WHERE {}")
    assert len(fake.requests) == 2  # each answer comes after 2 s: both tries timed out at 0.3 s, and were not waited for
    assert "timed out" in str(caught.value) and isinstance(caught.value, RemoteConnectionError)


def test_a_closed_port_is_a_connection_error_without_credentials(monkeypatch):
    monkeypatch.setenv("DSPY_RDF_STORE_TOKEN", SECRET)
    url = f"http://127.0.0.1:{closed_port()}"
    with RemoteStore(url, **FAST) as store:
        assert SECRET not in repr(store) and "bearer" in repr(store)
        with pytest.raises(RemoteConnectionError) as caught:
            store.trace_iris()
    text = "".join(traceback.format_exception(caught.value))
    assert SECRET not in text and url in str(caught.value) and "after 3 attempts" in str(caught.value)


def test_credentials_in_the_url_are_refused_and_never_shown(monkeypatch):
    port = closed_port()
    for url in (f"http://alice:{SECRET}@127.0.0.1:{port}", f"http://127.0.0.1:{port}/sparql?access-token={SECRET}"):
        with pytest.raises(StoreError) as caught:
            RemoteStore(url)
        assert SECRET not in "".join(traceback.format_exception(caught.value))
        assert "DSPY_RDF_STORE_USER" in str(caught.value)
    monkeypatch.setenv("DSPY_RDF_GSP_URL", f"http://bob:{SECRET}@127.0.0.1:{port}/store")
    with pytest.raises(StoreError) as caught:
        RemoteStore(f"http://127.0.0.1:{port}")
    assert SECRET not in str(caught.value) and "Graph Store endpoint" in str(caught.value)


def test_basic_auth_from_the_environment_and_a_401_is_an_auth_error(monkeypatch):
    monkeypatch.setenv("DSPY_RDF_STORE_USER", "alice")
    monkeypatch.setenv("DSPY_RDF_STORE_PASSWORD", SECRET)
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(Reply(401, body=f"bad password {SECRET}"))
        with pytest.raises(RemoteAuthError) as caught:
            store.select("ASK {}")
        assert SECRET not in repr(store)
    assert fake.requests[0].headers["Authorization"].startswith("Basic ")
    assert caught.value.status == 401 and SECRET not in "".join(traceback.format_exception(caught.value))
    assert "DSPY_RDF_STORE_USER" in str(caught.value)


@pytest.mark.parametrize("scheme", ["basic", "digest", "bearer"])
@pytest.mark.parametrize("command", [["stats"], ["validate"], ["dump"], ["query", "part_kinds"]])
def test_a_server_quoting_the_credentials_in_an_error_never_shows_them(monkeypatch, capsys, scheme, command):
    """Every form of every credential a server may quote in an error (the Authorization header as sent: base64 of
    user:password, the digest fields, a bearer token; the password itself, URL-encoded, JSON-escaped) is masked in
    what the CLI prints."""
    import base64
    import urllib.parse

    from dspy_rdf.cli.main import main

    password = "pa:ss w/ord\\\"1-" + SECRET
    if scheme == "bearer":
        monkeypatch.setenv("DSPY_RDF_STORE_TOKEN", password)
    else:
        monkeypatch.setenv("DSPY_RDF_STORE_USER", "alice")
        monkeypatch.setenv("DSPY_RDF_STORE_PASSWORD", password)
        monkeypatch.setenv("DSPY_RDF_STORE_AUTH", scheme)
    quoted = (
        "Virtuoso 42000 Error: refused request with Authorization: {authorization}; "
        f"password {password} {urllib.parse.quote(password)} {json.dumps(password)}"
    )
    forms = [password, urllib.parse.quote(password), json.dumps(password)[1:-1], base64.b64encode(f"alice:{password}".encode()).decode()]
    with FakeServer() as fake:
        challenge = Reply(401, headers={"WWW-Authenticate": 'Digest realm="r", nonce="abc123", qop="auth", algorithm=MD5'})
        fake.script(*([challenge] if scheme == "digest" else []), *[Reply(400, body=quoted, echo=True) for _ in range(4)])
        code = main([*command, "--store", fake.url])
        out, err = capsys.readouterr()
        sent = [r.headers.get("Authorization", "") for r in fake.requests]
    assert code == 2 and "Virtuoso 42000 Error" in err, err
    assert any(h.lower().startswith(scheme) for h in sent), sent
    header = next(h for h in sent if h.lower().startswith(scheme))
    shown = out + err
    for secret in [*forms, header.split(" ", 1)[1]] + re.findall(r'(?:response|cnonce)="?([^",]+)', header):
        assert secret not in shown, (secret, shown)


@pytest.mark.parametrize(
    ("variable", "secret", "quoted", "shown"),
    [
        ("DSPY_RDF_STORE_PASSWORD", "e", "Bad request. Headers: password=e; e", "Bad request. Headers: password=***; ***"),
        ("DSPY_RDF_STORE_TOKEN", "ds", "User-Agent: dspy-rdf, token ds", "User-Agent: dspy-rdf, token ***"),
        ("DSPY_RDF_STORE_PASSWORD", "p@ss", "wrong password (p@ss) for alice", "wrong password (***) for alice"),
    ],
)
def test_a_short_secret_is_masked_where_it_stands_as_a_word_not_inside_other_words(monkeypatch, variable, secret, quoted, shown):
    if variable == "DSPY_RDF_STORE_PASSWORD":
        monkeypatch.setenv("DSPY_RDF_STORE_USER", "alice")
    monkeypatch.setenv(variable, secret)
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(Reply(400, body=quoted))
        with pytest.raises(RemoteHTTPError) as caught:
            store.select("ASK {}")
    assert str(caught.value).endswith(f": {shown}") and caught.value.body == shown


def test_a_secret_of_8_characters_or_more_is_masked_even_inside_other_words(monkeypatch):
    monkeypatch.setenv("DSPY_RDF_STORE_TOKEN", "abcdefgh")
    with FakeServer() as fake, RemoteStore(fake.url, **FAST) as store:
        fake.script(Reply(400, body="token xabcdefghx refused"))
        with pytest.raises(RemoteHTTPError) as caught:
            store.select("ASK {}")
    assert caught.value.body == "token x***x refused"


def test_credentials_do_not_follow_a_redirect_to_another_host(monkeypatch):
    monkeypatch.setenv("DSPY_RDF_STORE_TOKEN", SECRET)
    with FakeServer() as origin, FakeServer() as other, RemoteStore(origin.url, **FAST) as store:
        # 127.0.0.1 -> 127.0.0.1 (same origin, other path): credentials kept; then -> localhost:<other port>: dropped.
        origin.script(
            Reply(307, headers={"Location": "/elsewhere/query"}),
            Reply(307, headers={"Location": f"http://localhost:{other.port}/query"}),
        )
        other.script(EMPTY_RESULTS)
        assert store.select("SELECT ?g WHERE {}")["results"]["bindings"] == []
    assert [r.path for r in origin.requests] == ["/query", "/elsewhere/query"]
    assert all(r.headers.get("Authorization") == f"Bearer {SECRET}" for r in origin.requests)
    [forwarded] = other.requests
    assert forwarded.method == "POST" and b"query=" in forwarded.body  # 307 keeps the method and body
    assert "Authorization" not in forwarded.headers and SECRET not in json.dumps(forwarded.headers)


def test_a_put_is_retried_and_its_body_is_n_triples():
    [trace] = bundled()[:1]
    iri, lines = trace_lines(trace)
    with FakeServer() as fake, RemoteStore(fake.url, write="graph", **FAST) as store:
        fake.script(EMPTY_RESULTS, Reply(503), Reply(201))
        report = store.put([trace], bulk=True)  # bulk is ignored remotely
    assert report.written == [iri]
    assert [r.method for r in fake.requests] == ["POST", "PUT", "PUT", "PUT"]  # the last: the batch's ledger entry
    assert fake.requests[-1].path.startswith("/store?graph=urn%3Adspy-rdf%3Aledger%3A")
    body = fake.requests[-2].body.decode()
    assert fake.requests[-2].path.startswith("/store?graph=")
    assert sorted(body.splitlines()) == sorted(line.removesuffix(f" <{iri}> .\n") + " ." for line in lines)


def test_endpoint_overrides_from_the_environment_and_keywords(monkeypatch):
    monkeypatch.setenv("DSPY_RDF_QUERY_URL", "http://q.example:7001/")
    monkeypatch.setenv("DSPY_RDF_GSP_URL", "http://q.example:7001/")
    store = RemoteStore("http://localhost:7878", update_url="http://u.example/update")
    assert (store.query_url, store.update_url, store.gsp_url) == ("http://q.example:7001/", "http://u.example/update", "http://q.example:7001/")
    store.close()
    monkeypatch.setenv("DSPY_RDF_STORE_TIMEOUT", "soon")
    with pytest.raises(StoreError, match="DSPY_RDF_STORE_TIMEOUT"):
        RemoteStore("http://localhost:7878")


@pytest.mark.slow
def test_virtuoso_queries_that_would_fetch_a_url_are_refused_before_they_are_sent(virtuoso_store, virtuoso_server, capsys):
    """Virtuoso's sponger fetches the FROM IRI of a query with DEFINE get:soft and stores what it got, and its
    built-in function bif:http_get fetches a URL from within any SELECT: refused. Each is first shown to fetch when
    sent to the server as it is (the guard is what stops it)."""
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        hits = 0

        def do_GET(self):  # noqa: N802 - the http.server API
            Page.hits += 1
            body = b"<urn:x:s> <urn:x:p> <urn:x:o> .\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/turtle")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/data.ttl"
        fetching = {
            f'DEFINE get:soft "replace" SELECT * FROM <{url}> WHERE {{ ?s ?p ?o }}': "DEFINE (a Virtuoso pragma) is refused",
            f'SELECT (bif:http_get("{url}") AS ?page) WHERE {{}}': "bif:http_get is refused",
            f'PREFIX b: <bif:> SELECT (b:http_get("{url}") AS ?page) WHERE {{}}': "<bif:> is refused",
        }
        for sparql, said in fetching.items():
            assert main(["query", "--sparql", sparql, "--store", virtuoso_server.url]) == 2
            assert said in capsys.readouterr().err
        [row] = virtuoso_store.select(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{url}> {{ ?s ?p ?o }} }}")["results"]["bindings"]
        assert Page.hits == 0 and row["n"]["value"] == "0"
        virtuoso_store.select(f'SELECT (bif:http_get("{url}") AS ?page) WHERE {{}}')  # unguarded, the server fetches
        assert Page.hits == 1
    finally:
        server.shutdown()


@pytest.mark.parametrize("answer", [
    '{"head": {"vars": ["n"]}, "results": {"bindings": [' * 1 + '[' * 100_000 + ']' * 100_000 + ']}}',  # nested 100,000 deep
    '{"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "literal", "value": "1"}}]}}',  # not the variable asked
    '{"head": {"vars": ["n"]}, "results": {"bindings": []}}',  # no row
])
def test_a_garbage_answer_to_a_count_is_one_line_naming_the_store(answer, capsys, monkeypatch):
    with FakeServer() as server:
        server.script(*[Reply(200, body=answer, headers={"Content-Type": "application/sparql-results+json"})] * 8)
        monkeypatch.setenv("DSPY_RDF_STORE_MAX_ATTEMPTS", "1")
        assert main(["stats", "--store", server.url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err


class _Trickle:
    """A server whose answers come slowly or at length: ``mode`` "trickle" sends a byte of a SPARQL JSON answer every
    half second, "huge" an error answer of ``size`` bytes; ``sent`` counts what it managed to send."""

    def __init__(self, mode: str, size: int = 0) -> None:
        self.sent = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    if mode == "trickle":
                        self.send_response(200)
                        self.send_header("Content-Type", "application/sparql-results+json")
                        self.end_headers()
                        for byte in b'{"head": {"vars": ["n"]}, "results": {"bindings": []}}':
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            outer.sent += 1
                            time.sleep(0.5)
                    else:
                        self.send_response(500)
                        self.send_header("Content-Length", str(size))
                        self.end_headers()
                        chunk = b"x" * 65536
                        while outer.sent < size:
                            self.wfile.write(chunk)
                            outer.sent += len(chunk)
                except OSError:  # the client stopped reading
                    pass

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_timeout_bounds_the_whole_answer_not_each_read():
    server = _Trickle("trickle")
    try:
        with pytest.raises(RemoteTimeoutError, match="timed out: the answer took longer than the timeout in all"):
            RemoteStore(server.url, timeout=1.5, connect_timeout=1, max_attempts=1).select("SELECT * WHERE { ?s ?p ?o }")
        assert server.sent < 20  # it gave up long before the 56 bytes (28 s) the answer would take
    finally:
        server.close()


def test_an_error_answer_of_hundreds_of_megabytes_is_read_no_further_than_its_excerpt():
    server = _Trickle("huge", size=400 * 2**20)
    try:
        with pytest.raises(RemoteHTTPError, match="HTTP 500"):
            RemoteStore(server.url, timeout=30, connect_timeout=1, max_attempts=1).select("SELECT * WHERE { ?s ?p ?o }")
        assert server.sent < 40 * 2**20  # the client closed the connection after its first 64 KiB (socket buffers aside)
    finally:
        server.close()
