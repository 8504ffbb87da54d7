"""``dspy-rdf serve``: spans in at /v1/traces, SPARQL out at /query, nothing acknowledged lost.

The server runs in the test process (a real embedded store on disk, a real HTTP listener on 127.0.0.1) or, where a
kill is tested, as the real command in a process of its own. What it stores is compared with what ``export`` stores
from the same spans in a file: the same trace IRIs, the same quads, every canned query the same rows, asked through
the server's own SPARQL endpoint (``--store http://...``).
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from conftest import DATA
from servers import free_port

from dspy_rdf.analytics.catalog import list_queries, run_query
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.interop.otlp import export_request_bytes, trace_to_resource_spans
from dspy_rdf.service.receiver import decode_request, spans_of_record
from dspy_rdf.service.server import ServeOptions, TraceServer, check_binding
from dspy_rdf.service.spool import Spool
from dspy_rdf.sources.spans import Span, SpanStatus
from dspy_rdf.store import open_store
from dspy_rdf.store.base import TraceStore
from dspy_rdf.store.embedded import EmbeddedStore

CROSS = DATA / "crosspath"
TOKEN = "serve-t0ken-s3cret"
SOURCE_INDEX = b"<https://w3id.org/lmodel/dspy/source_index>"


@contextmanager
def served(tmp_path: Path, **options) -> Iterator[TraceServer]:
    """A server over an embedded store in ``tmp_path/store``, listening on a free port, stopped at the end."""
    options = {"spool": tmp_path / "spool", "port": 0, "grace": 0.2, **options}
    with EmbeddedStore(tmp_path / "store") as store:
        server = TraceServer(store, ServeOptions(**options))
        server.start()
        try:
            yield server
        finally:
            server.stop()


def settled(server: TraceServer, traces: int, seconds: float = 30) -> dict:
    """Wait until everything received is stored, and check that ``traces`` traces were; the server's status."""
    assert server.flush(seconds), server.status()
    status = server.status()
    assert status["traces"]["written"] + status["traces"]["already_stored"] >= traces, status
    return status


def rows(store: TraceStore) -> dict[str, list[str]]:
    """Every canned query's rows, and the store's counts, as sorted JSON lines (but the triple count: a trace read from
    a file also keeps its place in the file, ``dspy:source_index``, which a stream has not)."""
    out = {}
    for query in list_queries():
        params = {"limit": 1000} if any(p.is_limit for p in query.parameters) else None
        records = run_query(store, query.name, params).records()
        out[query.name] = sorted(json.dumps(r, sort_keys=True, default=str) for r in records)
    out["stats"] = [json.dumps({k: v for k, v in store.stats().items() if k != "triples"}, sort_keys=True)]
    return out


def quads(store: TraceStore) -> list[bytes]:
    """The store's quads, sorted, without where in an input file a trace was (a file has lines, a stream has not)."""
    buffer = io.BytesIO()
    store.dump(buffer)
    return sorted(line for line in buffer.getvalue().splitlines() if SOURCE_INDEX not in line)


def exported(path: Path, where: Path) -> Path:
    assert main(["export", str(path), "--store", str(where)]) == 0
    return where


def post(url: str, body: bytes, content_type: str = "application/json", **headers: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/traces", content=body, headers={"Content-Type": content_type, **headers}, timeout=30)


# --- the receiver stores what export stores ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["openinference.json", pytest.param("mlflow_otlp.json", marks=pytest.mark.slow)])
def test_spans_posted_as_json_are_stored_as_export_stores_them_from_a_file(name, tmp_path, capsys):
    body = (CROSS / name).read_bytes()
    spans = sum(len(ss["spans"]) for rs in json.loads(body)["resourceSpans"] for ss in rs["scopeSpans"])
    with served(tmp_path) as server:
        response = post(server.url, body)
        assert response.status_code == 200 and response.json() == {}  # no partial success: every span taken
        status = settled(server, 3)
        assert status["received"] == {"requests": 1, "spans": spans, "rejected_spans": 0, "refused_requests": 0, "queries": 0}
        with open_store(server.url) as remote, EmbeddedStore(exported(CROSS / name, tmp_path / "file")) as file:
            assert sorted(remote.trace_iris()) == sorted(file.trace_iris()) and len(file.trace_iris()) == 3
            assert rows(remote) == rows(file)
            assert quads(remote) == quads(file)
    capsys.readouterr()


@pytest.mark.slow  # 13 s: every command over the served store
def test_protobuf_gzipped_from_to_otlp_gives_each_run_its_iri_and_every_answer(tmp_path, capsys):
    file_store = exported(CROSS / "capture.jsonl", tmp_path / "file")
    with served(tmp_path) as server:
        assert main(["to-otlp", "--store", str(file_store), "--endpoint", server.url, "--gzip"]) == 0
        assert "sent 3 trace(s), 25 span(s)" in capsys.readouterr().out
        settled(server, 3)
        with open_store(server.url) as remote, EmbeddedStore(file_store) as file:
            assert sorted(remote.trace_iris()) == sorted(file.trace_iris())
            assert rows(remote) == rows(file)
        # the command line's own commands read the served store while it runs (no lock to wait for)
        for command in (["stats"], ["query", "tool_calls_per_tool"], ["validate"], ["report", "--out", str(tmp_path / "page")]):
            assert main([*command, "--store", server.url]) == 0, command
        # sent again (an exporter's retry): already stored, nothing added
        before = quads(open_store(server.url))
        assert main(["to-otlp", "--store", str(file_store), "--endpoint", server.url]) == 0
        status = settled(server, 3)
        # each span is taken once: the second copy adds nothing
        assert status["traces"]["repeated_spans"] == 25 and status["traces"]["written"] == 3 and quads(open_store(server.url)) == before
    capsys.readouterr()


def test_spans_that_cannot_be_read_are_refused_as_partial_success_and_the_rest_kept(tmp_path):
    export = json.loads((CROSS / "openinference.json").read_bytes())
    spans = export["resourceSpans"][0]["scopeSpans"][0]["spans"]
    broken = next(s for s in spans if s.get("parentSpanId"))  # a child span: its trace is kept without it
    del broken["startTimeUnixNano"]
    with served(tmp_path) as server:
        response = post(server.url, json.dumps(export).encode())
        assert response.status_code == 200
        partial = response.json()["partialSuccess"]
        assert partial["rejectedSpans"] == "1" and "startTimeUnixNano" in partial["errorMessage"] and "is required" in partial["errorMessage"]
        settled(server, 3)
        assert server.status()["received"]["rejected_spans"] == 1
    # the same in protobuf: an id of the wrong length is refused, the others kept
    encoding, received = decode_request(json.dumps(export).encode(), "application/json")
    assert received.rejected_spans == 1 and received.accepted_spans == sum(len(ss["spans"]) for rs in export["resourceSpans"] for ss in rs["scopeSpans"]) - 1


def test_a_request_refused_whole_is_answered_with_its_reason_and_nothing_is_kept(tmp_path):
    with served(tmp_path, max_body=200_000) as server:
        url = server.url
        cases = [
            (post(url, b"{}", "text/plain"), 415, "unsupported Content-Type 'text/plain'"),
            (post(url, b"{not json"), 400, "not valid JSON"),
            (post(url, b" \n"), 400, "the body is empty"),
            (post(url, b"[1, 2]"), 400, "not an OTLP/JSON export"),
            (post(url, b'{"resourceSpans": 3}'), 400, "resourceSpans: expected a list"),
            (post(url, b"\x0a\xff\xff", "application/x-protobuf"), 400, "not an OTLP ExportTraceServiceRequest"),
            (post(url, b"x" * 200_001), 413, "larger than 200000 bytes"),
            (post(url, gzip.compress(b" " * 300_000), **{"Content-Encoding": "gzip"}), 413, "once unzipped"),
            (post(url, b"not gzip", **{"Content-Encoding": "gzip"}), 400, "not valid gzip"),
            (post(url, b"{}", **{"Content-Encoding": "br"}), 415, "unsupported Content-Encoding 'br'"),
            (httpx.post(f"{url}/v2/traces", content=b"{}"), 404, "no such endpoint /v2/traces"),
        ]
        for response, status, said in cases:
            assert response.status_code == status and said in response.text, (status, response.text)
            assert len(response.text.strip().splitlines()) == 1
        assert server.spool.stats().appended == 0 and server.status()["received"]["refused_requests"] == 10


@pytest.mark.parametrize("flaw", ["a key twice", "NaN"])
def test_json_a_file_refuses_is_refused_by_the_receiver_for_the_same_reason(flaw, tmp_path, capsys):
    line = json.dumps(json.loads((CROSS / "openinference.json").read_bytes()))  # one line: a JSON Lines file of it
    if flaw == "a key twice":  # Python's json keeps the last value (the spans), where the file is refused
        body, said = '{"resourceSpans": [], ' + line[1:], "the key 'resourceSpans' appears twice"
    else:
        body, said = line.replace('"startTimeUnixNano":', '"x": NaN, "startTimeUnixNano":', 1), "NaN is not a JSON number"
    assert body != line
    source = tmp_path / "export.jsonl"
    source.write_text(body + "\n")
    assert main(["export", str(source), "--store", str(tmp_path / "from-file")]) != 0
    assert said in capsys.readouterr().err
    with served(tmp_path) as server:
        response = post(server.url, body.encode())
        assert response.status_code == 400 and said in response.text, response.text
        assert server.spool.stats().appended == 0
    # a spool record holding it (acknowledged by a release that read JSON leniently) is still read after a restart,
    # as that release read it: what was acknowledged is stored
    assert len(spans_of_record(b"J" + body.encode())) == line.count('"spanId"')


def test_kept_spans_holding_a_lone_surrogate_are_spooled_when_other_spans_are_refused(tmp_path):
    export = json.loads((CROSS / "openinference.json").read_bytes())
    spans = export["resourceSpans"][0]["scopeSpans"][0]["spans"]
    del next(s for s in spans if s.get("parentSpanId"))["startTimeUnixNano"]
    kept = next(s for s in spans if "startTimeUnixNano" in s)
    kept["attributes"].append({"key": "odd", "value": {"stringValue": "\ud800"}})  # JSON may escape one
    encoding, received = decode_request(json.dumps(export).encode(), "application/json")
    assert received.rejected_spans == 1 and b"\\ud800" in received.record
    assert [span.span_id for _, span, _, _ in spans_of_record(received.record)] == [span.span_id for _, span, _, _ in received.spans]


def test_the_sparql_endpoint_is_read_only_and_answers_the_protocol(tmp_path):
    with served(tmp_path) as server:
        post(server.url, (CROSS / "openinference.json").read_bytes())
        settled(server, 3)
        url = server.url
        select = "SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE { GRAPH ?g { ?g a <https://w3id.org/lmodel/dspy/Trace> } }"
        by_get = httpx.get(f"{url}/query", params={"query": select})
        by_form = httpx.post(f"{url}/query", data={"query": select})
        by_body = httpx.post(f"{url}/sparql", content=select, headers={"Content-Type": "application/sparql-query"})
        for response in (by_get, by_form, by_body):
            assert response.headers["content-type"] == "application/sparql-results+json"
            assert response.json()["results"]["bindings"][0]["n"]["value"] == "3"
        assert httpx.get(f"{url}/query", params={"query": "ASK { GRAPH ?g { ?s ?p ?o } }"}).json()["boolean"] is True
        iri = sorted(open_store(url).trace_iris())[0]
        answer = httpx.get(f"{url}/store", params={"graph": iri})
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/n-triples" and answer.content.count(b"\n") > 50
        refused = [
            (httpx.post(f"{url}/query", data={"query": "INSERT DATA { <urn:a> <urn:b> <urn:c> }"}), 400, "INSERT is an update"),
            (httpx.post(f"{url}/update", data={"update": "DROP ALL"}), 405, "read-only"),
            (httpx.post(f"{url}/query", data={"update": "DROP ALL"}), 405, "read-only"),
            (httpx.put(f"{url}/store", params={"graph": iri}, content=b""), 405, "read-only"),
            (httpx.delete(f"{url}/store", params={"graph": iri}), 405, "read-only"),
            (httpx.get(f"{url}/query", params={"query": "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }"}), 400, "SERVICE"),
            (httpx.get(f"{url}/query", params={"query": "SELECT WHERE {"}), 400, "not a valid SPARQL query"),
            (httpx.get(f"{url}/query"), 400, "?query="),
            (httpx.get(f"{url}/store", params={"graph": "urn:dspy-rdf:trace:content-00"}), 404, "no graph"),
        ]
        for response, status, said in refused:
            assert response.status_code == status and said in response.text, (status, response.text)
        assert open_store(url).trace_iris() == sorted(open_store(url).trace_iris())  # still all there
        assert len(open_store(url).trace_iris()) == 3


def test_a_token_is_asked_of_every_request_and_needed_beyond_this_machine(tmp_path, monkeypatch, capsys):
    with pytest.raises(ValueError, match="give a token too"):
        check_binding("0.0.0.0", None)
    check_binding("::1", None)
    check_binding("localhost", None)
    assert main(["serve", "--store", str(tmp_path / "s"), "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--token" in err and not (tmp_path / "s").exists()
    with served(tmp_path, token=TOKEN) as server:
        body = (CROSS / "openinference.json").read_bytes()
        assert post(server.url, body).status_code == 401
        assert post(server.url, body, Authorization="Bearer wrong").status_code == 401
        assert httpx.get(f"{server.url}/query", params={"query": "ASK {}"}).status_code == 401
        assert post(server.url, body, Authorization=f"Bearer {TOKEN}").status_code == 200
        settled(server, 3)
        assert main(["stats", "--store", server.url]) == 2
        assert "401" in capsys.readouterr().err
        monkeypatch.setenv("DSPY_RDF_STORE_TOKEN", TOKEN)
        assert main(["stats", "--store", server.url]) == 0
        out, err = capsys.readouterr()
        assert "3  traces" in out and TOKEN not in out + err


# --- nothing acknowledged is lost -------------------------------------------------------------------------------


def test_the_spool_appends_durably_cuts_a_torn_record_and_forgets_what_the_store_holds(tmp_path):
    spool = Spool(tmp_path / "spool", segment_bytes=300)
    numbers = [spool.append(json.dumps({"n": i, "pad": "x" * 100}).encode()) for i in range(10)]
    # a record is 124 bytes: a segment is closed at its third
    assert numbers == list(range(10)) and len(list((tmp_path / "spool").glob("segment-*.log"))) == 4
    spool.advance(7)
    assert [n for n, _ in spool.replay()] == [7, 8, 9] and len(list((tmp_path / "spool").glob("segment-*.log"))) == 2
    spool.advance(3)  # never back
    assert spool.checkpoint == 7
    spool.close()
    last = sorted((tmp_path / "spool").glob("segment-*.log"))[-1]
    with last.open("ab") as handle:
        handle.write(b"DRS1\x00\x00\x01\x00")  # a record cut in its header: the process stopped while appending
    again = Spool(tmp_path / "spool", segment_bytes=300)
    assert again.torn_bytes == 8 and again.checkpoint == 7 and again.next_record == 10
    assert [(n, json.loads(e)["n"]) for n, e in again.replay()] == [(7, 7), (8, 8), (9, 9)]
    assert again.append(b'{"n": 10}') == 10 and [n for n, _ in again.replay()] == [7, 8, 9, 10]


def _serve(store: Path, spool: Path, log: Path, grace: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "dspy_rdf", "serve", "--store", str(store), "--spool", str(spool), "--port", str(port), "--grace", str(grace)],
        stdout=log.open("ab"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/status", timeout=1)
            return process, url
        except httpx.TransportError:
            if process.poll() is not None:
                raise AssertionError(log.read_text())
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"serve did not answer: {log.read_text()}")


def test_spans_acknowledged_before_a_kill_are_stored_after_the_restart(tmp_path):
    """Killed (SIGKILL) while traces are still gathering: each export answered 200 is in the store after a restart,
    whole, and each trace once."""
    traces = [t for item in read_traces(CROSS / "capture.jsonl") for t in [item.trace]]
    traces += [t for item in read_traces(CROSS / "openinference.json") for t in [item.trace]]
    # one trace per request, each span of the first trace in a request of its own (its root comes last)
    bodies = []
    for i, trace in enumerate(traces):
        resource_spans, _ = trace_to_resource_spans(trace)
        if i == 0:
            spans = resource_spans["scopeSpans"][0]["spans"]
            for span in sorted(spans, key=lambda s: not s.get("parentSpanId")):
                one = {**resource_spans, "scopeSpans": [{**resource_spans["scopeSpans"][0], "spans": [span]}]}
                bodies.append(export_request_bytes([one]))
        else:
            bodies.append(export_request_bytes([resource_spans]))
    store, spool, log = tmp_path / "store", tmp_path / "spool", tmp_path / "serve.log"
    process, url = _serve(store, spool, log, grace=60)  # nothing is stored before the kill
    try:
        for body in bodies:
            assert post(url, body, "application/x-protobuf").status_code == 200
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    with EmbeddedStore(store) as killed:
        assert killed.trace_iris() == []
    process, url = _serve(store, spool, log, grace=0.1)
    try:
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/status").json()["traces"]["written"] < len(traces) and time.monotonic() < deadline:
            time.sleep(0.1)
        status = httpx.get(f"{url}/status").json()
        assert status["traces"]["written"] == len(traces) and status["traces"]["failed"] == 0, status
        assert status["spool"]["checkpoint"] == len(bodies)  # the spool forgets what the store holds
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 128 + signal.SIGTERM
    # the second run received nothing: every trace came from the spool
    assert f"export(s) read again from the spool" in log.read_text()
    assert f"stopped: 0 span(s) received, {len(traces)} trace(s) stored" in log.read_text()
    with EmbeddedStore(store) as restarted, EmbeddedStore(tmp_path / "direct") as direct:
        direct.put(traces)
        assert sorted(restarted.trace_iris()) == sorted(direct.trace_iris())
        assert rows(restarted) == rows(direct)
    # a third start reads nothing again
    process, url = _serve(store, spool, log, grace=0.1)
    try:
        assert httpx.get(f"{url}/status").json()["spool"]["checkpoint"] == len(bodies)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    assert "export(s) read again" not in log.read_text().split("serving")[-1]


# --- live capture writes to the server ----------------------------------------------------------------------


def test_a_program_recorded_to_the_server_and_to_a_store_at_once_is_one_trace_each_with_the_same_answers(tmp_path, capsys):
    """One execution of the real dspy.LM programs, recorded by one recorder into two sinks: a store of its own and
    the server (OtlpSink). The two stores hold the same IRIs and give the same answers."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import dspy
    from traced_programs import run_programs

    from dspy_rdf.capture import StoreSink, TraceRecorder
    from dspy_rdf.service.sink import OtlpSink

    with served(tmp_path) as server:
        direct = StoreSink(tmp_path / "direct", background=False)
        sink = OtlpSink(server.url)
        recorder = TraceRecorder(direct, sink)
        with dspy.context(callbacks=[recorder]):
            run_programs()
        assert sink.flush(30) and recorder.errors == []
        sink.close()
        direct.close()
        settled(server, 3)
        with open_store(server.url) as remote, EmbeddedStore(tmp_path / "direct") as file:
            assert len(file.trace_iris()) == 3 and sorted(remote.trace_iris()) == sorted(file.trace_iris())
            assert rows(remote) == rows(file)
    capsys.readouterr()


def test_a_run_the_server_cannot_take_goes_back_to_the_recorder(tmp_path):
    from dspy_rdf.capture import TraceRecorder
    from dspy_rdf.service.sink import OtlpSink

    traces = [item.trace for item in read_traces(CROSS / "capture.jsonl")]
    sink = OtlpSink(f"http://127.0.0.1:{free_port()}")
    recorder = TraceRecorder(sink)
    for trace in traces:
        sink.write(trace)
    assert sink.flush(30)
    sink.close()
    assert len(recorder.unwritten) == 3 and all("could not connect" in e for e in recorder.errors)


# --- protobuf read directly, as its JSON would be read ----------------------------------------------------------


def _otlp_fixtures() -> list[dict]:
    exports = []
    for path in sorted((DATA / "otlp").glob("*.json*")) + [CROSS / "openinference.json", CROSS / "mlflow_otlp.json"] + sorted((DATA / "sessions").glob("*.json")):
        text = path.read_text(encoding="utf-8")
        values = [json.loads(line) for line in text.splitlines() if line.strip()] if path.suffix == ".jsonl" else [json.loads(text)]
        for value in values:
            exports += value if isinstance(value, list) else [value]
    from dspy_rdf.sources.spans import hex_id

    exports = [e for e in exports if isinstance(e, dict) and "resourceSpans" in e]
    for export in exports:  # ids as hex, whichever way a fixture wrote them (protobuf's JSON: base64)
        for rs in export["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for key, size in (("traceId", 16), ("spanId", 8), ("parentSpanId", 8)):
                        if span.get(key):
                            span[key] = hex_id(span[key], key, size)
    return exports


def _both_ways(request) -> tuple[list, list]:
    from google.protobuf.json_format import MessageToDict

    from dspy_rdf.sources.otlp import spans_from_otlp, spans_from_proto

    def plain(reads):
        return [(t, str(s) if isinstance(s, Exception) else s, r, scope) for t, s, r, scope in reads]

    def caught(reads):
        try:
            return plain(reads)
        except Exception as exc:  # noqa: BLE001 - both ways must fail alike
            return [type(exc).__name__, str(exc)]

    return caught(spans_from_proto(request)), caught(spans_from_otlp(MessageToDict(request)))


def test_protobuf_spans_read_directly_are_the_spans_its_json_gives():
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    exports = _otlp_fixtures()
    assert len(exports) >= 8
    for export in exports:
        request = ExportTraceServiceRequest.FromString(export_request_bytes(export["resourceSpans"]))
        direct, through_json = _both_ways(request)
        assert direct == through_json and len(direct) == sum(len(ss["spans"]) for rs in export["resourceSpans"] for ss in rs["scopeSpans"])


def test_odd_protobuf_spans_are_read_or_refused_as_their_json_is():
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def request(**changes) -> ExportTraceServiceRequest:
        message = ExportTraceServiceRequest()
        scope = message.resource_spans.add().scope_spans.add()
        scope.scope.name = changes.pop("scope", "test")
        span = scope.spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="chat m", start_time_unix_nano=1_700_000_000_000_000_000)
        for key, value in changes.items():
            if key == "attributes":
                span.attributes.extend(value)
            else:
                setattr(span, key, value) if not isinstance(value, dict) else getattr(span, key).CopyFrom(type(getattr(span, key))(**value))
        return message

    nested = AnyValue()
    nested.array_value.values.add(int_value=2**62)
    nested.array_value.values.add(bytes_value=b"\x00\xff")
    nested.array_value.values.add().kvlist_value.values.add(key="k", value=AnyValue(double_value=float("nan")))
    cases = [
        {},
        {"name": ""},
        {"start_time_unix_nano": 0},
        {"end_time_unix_nano": 10**19},
        {"trace_id": b"\x01" * 15},
        {"span_id": b""},
        {"parent_span_id": b"\x03" * 8},
        {"parent_span_id": b"\x03" * 3},
        {"status": {"code": 2, "message": "boom"}},
        {"attributes": [KeyValue(key="a", value=nested), KeyValue(key="inf", value=AnyValue(double_value=float("-inf")))]},
        {"attributes": [KeyValue(key="", value=AnyValue(string_value="x"))]},
        {"attributes": [KeyValue(key="empty", value=AnyValue())]},
        {"attributes": [KeyValue(key="mlflow.spanInputs", value=AnyValue(string_value='{"q": 1}'))]},
        {"scope": "mlflow.tracing", "attributes": [KeyValue(key="x", value=AnyValue(string_value="[1, 2]"))]},
    ]
    for case in cases:
        direct, through_json = _both_ways(request(**dict(case)))
        assert direct == through_json, case


# --- retries, late spans, restarts, and requests made to break the server -----------------------------------------


def _one_trace_export(pick) -> tuple[dict, str]:
    """OpenInference's export with only the spans ``pick(spans of its first trace)`` chooses; and that trace's id."""
    whole = json.loads((CROSS / "openinference.json").read_text())
    spans = [s for rs in whole["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    first = spans[0]["traceId"]
    mine = [s for s in spans if s["traceId"] == first]
    value = json.loads(json.dumps(whole))
    value["resourceSpans"] = value["resourceSpans"][:1]
    value["resourceSpans"][0]["scopeSpans"] = value["resourceSpans"][0]["scopeSpans"][:1]
    value["resourceSpans"][0]["scopeSpans"][0]["spans"] = pick(mine)
    return value, first


def test_an_export_sent_again_within_the_grace_is_one_trace_as_it_was(tmp_path):
    body = (CROSS / "openinference.json").read_bytes()
    with served(tmp_path, grace=1.0) as server:
        assert post(server.url, body).status_code == 200
        assert post(server.url, gzip.compress(body), **{"Content-Encoding": "gzip"}).status_code == 200  # the retry
        status = settled(server, 3)
        spans = status["received"]["spans"] // 2
        assert status["traces"]["failed"] == 0 and status["traces"]["repeated_spans"] == spans and status["traces"]["written"] == 3
        with open_store(server.url) as remote, EmbeddedStore(exported(CROSS / "openinference.json", tmp_path / "file")) as file:
            assert rows(remote) == rows(file)


def test_a_span_that_comes_after_its_trace_was_stored_is_named_and_left_out_even_after_a_restart(tmp_path):
    root_and_some, trace_id = _one_trace_export(lambda spans: [s for s in spans if not s.get("parentSpanId")] + [s for s in spans if s.get("parentSpanId")][1:])
    last_child, _ = _one_trace_export(lambda spans: [s for s in spans if s.get("parentSpanId")][:1])
    # a trace whose root never comes: one LM call span
    orphan, _ = _one_trace_export(lambda spans: [dict(next(s for s in spans if s.get("parentSpanId") and "Adapter" not in s["name"]), traceId="ab" * 16)])
    with served(tmp_path, orphan=600) as server:
        for value in (root_and_some, orphan):
            assert post(server.url, json.dumps(value).encode()).status_code == 200
        settled_until = time.monotonic() + 30
        while server.status()["traces"]["written"] < 1 and time.monotonic() < settled_until:
            time.sleep(0.05)
        assert post(server.url, json.dumps(last_child).encode()).status_code == 200  # after its trace was stored
        assert server.builder.wait_idle(30)
        status = server.status()
        assert status["traces"]["late_spans"] == 1 and status["traces"]["failed"] == 0 and status["traces"]["gathering"] == 1
        assert any(f"1 span(s) of trace {trace_id} came after the trace was built" in e for e in status["recent_errors"])
        assert server.spool.checkpoint == 1 and trace_id in server.spool.stored_traces  # the orphan holds the spool back
        stored = open_store(server.url).trace_iris()
    assert len(stored) == 1
    # after a restart, the late span read again from the spool is left out again, without a word; the orphan is stored
    with served(tmp_path, orphan=0.2) as server:
        settled(server, 1)
        status = server.status()
        assert status["traces"]["written"] == 1 and status["traces"]["late_spans"] == 0 and status["traces"]["repeated_spans"] == 1
        assert len(open_store(server.url).trace_iris()) == 2 and stored[0] in open_store(server.url).trace_iris()


def test_requests_made_to_break_the_server_get_one_line_answers_and_it_keeps_serving(tmp_path):
    with served(tmp_path) as server:
        url = server.url
        deep_json = b'{"resourceSpans": ' + b"[" * 5000 + b"]" * 5000 + b"}"
        response = post(url, deep_json)
        assert response.status_code == 400 and "nested too deeply" in response.text
        deep_sparql = "SELECT * WHERE " + "{" * 3000 + "}" * 3000
        response = httpx.post(f"{url}/query", data={"query": deep_sparql})
        assert response.status_code == 400 and "nests brackets more than 128 deep" in response.text
        response = httpx.get(f"{url}/query", params={"query": "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }"})
        assert response.status_code == 400 and "allow-federation" not in response.text
        assert post(url, b"{}").status_code == 200  # an export of nothing, as an empty protobuf request
        with httpx.Client(timeout=30) as client:  # one kept-alive connection, as exporters use
            assert client.post(f"{url}/update", data={"update": "DROP ALL"}).status_code == 405
            assert client.post(f"{url}/v1/traces", content=b"{}", headers={"Content-Type": "text/plain"}).status_code == 415
            assert client.post(f"{url}/v1/traces", content=(CROSS / "openinference.json").read_bytes(), headers={"Content-Type": "application/json"}).status_code == 200
        settled(server, 3)
        assert httpx.get(f"{url}/status").status_code == 200


def test_a_spool_belongs_to_one_server_and_one_store(tmp_path):
    from dspy_rdf.service.spool import SpoolError

    with served(tmp_path) as server, EmbeddedStore(tmp_path / "other") as other:
        with pytest.raises(SpoolError, match="in use by another process"):
            TraceServer(other, ServeOptions(spool=tmp_path / "spool", port=0))
        assert server.status()["spool"]["checkpoint"] == 0
    with EmbeddedStore(tmp_path / "other") as other, pytest.raises(SpoolError, match="holds spans for the store"):
        TraceServer(other, ServeOptions(spool=tmp_path / "spool", port=0))


def test_a_port_in_use_is_one_line_naming_it(tmp_path, capsys):
    with served(tmp_path) as server:
        port = server.url.rsplit(":", 1)[1]
        assert main(["serve", "--store", str(tmp_path / "other"), "--port", port]) == 2
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [f"error: cannot listen on 127.0.0.1:{port}: Address already in use"] and "stopped" not in out


# --- the worker processes --------------------------------------------------------------------------------------


def _with_a_parent_cycle(value: dict) -> tuple[dict, str]:
    """The export with two child spans of its first trace made each other's parent (a trace that cannot be built);
    and that trace's id."""
    value = json.loads(json.dumps(value))
    spans = [s for rs in value["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    first = spans[0]["traceId"]
    a, b = [s for s in spans if s["traceId"] == first and s.get("parentSpanId")][:2]
    a["parentSpanId"], b["parentSpanId"] = b["spanId"], a["spanId"]
    return value, first


@pytest.mark.parametrize("workers", [0, 2])
def test_a_trace_that_cannot_be_built_is_named_by_its_spool_record_and_the_others_are_stored(workers, tmp_path):
    whole = json.loads((CROSS / "openinference.json").read_text())
    broken, trace_id = _with_a_parent_cycle(whole)
    with served(tmp_path, workers=workers) as server:
        assert post(server.url, json.dumps(broken).encode()).status_code == 200
        assert server.flush(30), server.status()
        status = server.status()
        assert status["traces"]["failed"] == 1 and status["traces"]["written"] == 2, status
        assert any(e.startswith("spool record 0: ") and "its own ancestor" in e for e in status["recent_errors"]), status
        stored = open_store(server.url).trace_iris()
    with EmbeddedStore(exported(CROSS / "openinference.json", tmp_path / "file")) as file:
        whole_iris = set(file.trace_iris())
    assert len(stored) == 2 and set(stored) < whole_iris  # the two others, as export stores them


def test_a_worker_process_killed_midstream_loses_nothing(tmp_path):
    import multiprocessing

    body = (CROSS / "openinference.json").read_bytes()
    with served(tmp_path, workers=2) as server:
        workers = multiprocessing.active_children()
        assert len(workers) == 2
        os.kill(workers[0].pid, signal.SIGKILL)
        workers[0].join(10)
        assert post(server.url, body).status_code == 200
        status = settled(server, 3)
        assert status["traces"]["written"] == 3 and status["traces"]["failed"] == 0, status
        assert any("worker process" in e for e in status["recent_errors"]), status
        with open_store(server.url) as remote, EmbeddedStore(exported(CROSS / "openinference.json", tmp_path / "file")) as file:
            assert rows(remote) == rows(file)


def _copies(path: Path, copies: int) -> dict:
    """One export request of ``copies`` copies of an OTLP JSON file's spans, each copy with fresh trace and span ids."""
    import uuid

    text = path.read_text()
    ids = sorted({s[key] for rs in json.loads(text)["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
                  for key in ("traceId", "spanId", "parentSpanId") if s.get(key)})  # fmt: skip
    spans: list = []
    for copy in range(copies):
        again = text
        for old in ids:
            again = again.replace(old, uuid.uuid5(uuid.NAMESPACE_OID, f"{old}/{copy}").hex[: len(old)])
        spans += json.loads(again)["resourceSpans"]
    return {"resourceSpans": spans}


@pytest.mark.parametrize("commit_triples", [None, 2_000])
def test_traces_built_together_are_committed_as_one_batch_of_the_store_up_to_its_size(commit_triples, tmp_path, monkeypatch):
    """A commit is one batch of the store's put (in the embedded store one bulk load, one ledger entry), not the
    ramp of a long export, and it waits for the batches the workers are still building, up to a commit's size:
    each commit split or cut short added files for RocksDB to compact (bench/bench_serve.py)."""
    from dspy_rdf.service import builder

    monkeypatch.setattr(builder, "_TRACES_PER_BATCH", 4)  # 8 batches of the 30 traces, built by two workers
    if commit_triples is not None:
        monkeypatch.setattr(builder, "_COMMIT_TRIPLES", commit_triples)
    body = json.dumps(_copies(CROSS / "openinference.json", 10)).encode()
    with EmbeddedStore(tmp_path / "store") as store:
        server = TraceServer(store, ServeOptions(spool=tmp_path / "spool", port=0, grace=0.2, workers=2))
        server.start()
        try:
            assert post(server.url, body).status_code == 200
            status = settled(server, 30)
            assert status["traces"]["written"] == 30 and status["traces"]["failed"] == 0, status
            entries = store.ledger_entries()
            triples = store.stats()["triples"]
        finally:
            server.stop()
    assert triples > 6_000
    if commit_triples is None:
        assert len(entries) == 1  # the 30 traces, gathered at once, in one commit
    else:
        # commits of at least 2,000 triples but the last: more than one, fewer than the batches
        assert 2 <= len(entries) <= triples // commit_triples + 1 < 8, entries


def test_a_put_given_its_first_batch_size_writes_the_traces_as_one_batch(tmp_path):
    traces = [item.trace for item in read_traces(CROSS / "openinference.json")]
    with EmbeddedStore(tmp_path / "ramp") as ramp, EmbeddedStore(tmp_path / "whole") as whole:
        ramp.put(traces, batch_triples=400, first_batch_triples=100)
        whole.put(traces, batch_triples=100_000, first_batch_triples=100_000)
        assert len(ramp.ledger_entries()) > 1 and len(whole.ledger_entries()) == 1
        assert quads(ramp) != [] and rows(ramp) == rows(whole)


def test_a_span_pickled_for_a_worker_process_comes_back_equal_in_every_field():
    samples = {
        "trace_id": "ab" * 16, "span_id": "cd" * 8, "parent_id": "ef" * 8, "name": "Predict.forward", "start_ns": 1, "end_ns": 2,
        "attributes": {"input.value": "{}"}, "path": "resourceSpans[0]", "status": SpanStatus.ERROR, "status_message": "boom",
        "events": [("exception", {"exception.type": "ValueError"})], "links": 3,
    }  # fmt: skip
    fields = [f.name for f in dataclasses.fields(Span)]
    assert set(fields) == set(samples), f"give the new field of Span a sample value here: {set(fields) ^ set(samples)}"
    span = Span(**samples)
    assert span.__reduce__()[0] is Span  # its own reduction, not the slots dataclass's state protocol
    again = pickle.loads(pickle.dumps(span))
    assert again == span and all(getattr(again, name) == value for name, value in samples.items())


@pytest.mark.parametrize("where", ["read", "encode"])
def test_a_fault_of_the_receiver_on_one_trace_is_that_traces_error_and_the_others_are_stored(where, tmp_path, monkeypatch):
    """An unexpected error while one trace is made from its spans or encoded (a fault of this code, not of the input)
    fails that trace alone, and says so without the trace's text; the receiver goes on storing."""
    from dspy_rdf.service import builder
    from dspy_rdf.sources.otlp import GatheredTrace

    secret, calls = "sk-" + "a" * 40, []
    step, original = (("encode_traces", builder.encode_traces), ("read", GatheredTrace.read))[where == "read"]

    def failing_first(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise KeyError(f"the text {secret}")
        return original(*args, **kwargs)

    monkeypatch.setattr(builder if step == "encode_traces" else GatheredTrace, step, failing_first)
    body = (CROSS / "openinference.json").read_bytes()
    with served(tmp_path, workers=0) as server:
        assert post(server.url, body).status_code == 200
        assert server.flush(30), server.status()
        status = server.status()
        assert status["traces"]["failed"] == 1 and status["traces"]["written"] == 2, status
        assert any("dspy-rdf failed on it (KeyError)" in e for e in status["recent_errors"]), status
        assert secret not in json.dumps(status)
        assert post(server.url, (CROSS / "openinference_dspy341.json").read_bytes()).status_code == 200
        assert server.flush(30) and server.status()["traces"]["written"] == 5, server.status()  # still storing
