"""``dspy-rdf to-otlp --endpoint``: the spans POSTed to real OTLP/HTTP receivers and read back.

A minimal receiver here (the standard library's HTTP server, decoding the body with ``opentelemetry-proto``) checks
what is sent: ids as bytes, every span, its OpenInference kind and GenAI operation, the ``finish_reason`` the GenAI
output-messages schema requires (validated against the schema of semconv 1.41.0, ``tests/data/semconv``), the
headers, gzip, partial success and HTTP errors. The slow tests push to MLflow's tracking server and to Arize Phoenix,
each in an environment of its own at the root of the repository (``.venv-mlflow3``, ``.venv-phoenix``: they pin many
packages), built on first use, and read the spans back through their own clients.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import jsonschema
import pytest
from conftest import DATA
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from servers import ServerUnavailable as Unavailable
from servers import environment, free_port, wait_until_ready

from dspy_rdf.canonical import model as m
from dspy_rdf.cli.main import main
from dspy_rdf.interop.otlp import SCHEMA_URL, export_request_bytes, genai_finish_reason, trace_to_resource_spans
from dspy_rdf.rdf.formats import parse_traces
from dspy_rdf.sources.tracejson import traces_from_json

SCHEMA = json.loads((DATA / "semconv" / "gen-ai-output-messages-1.41.0.json").read_text(encoding="utf-8"))
TOKEN = "s3cr3t-t0ken-value"
KINDS = {"chat": "LLM", "execute_tool": "TOOL", "invoke_workflow": "CHAIN"}
ROOT = Path(__file__).resolve().parents[1]
MLFLOW = "mlflow==3.17.2"  # 3.18.0 is listed, but its mlflow-skinny pin does not install
PHOENIX = "arize-phoenix==20.26.1"


# --- fixtures: the traces, as RDF files ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three runs of ``crosspath/capture.jsonl`` (live capture: finish reasons known) as N-Quads."""
    path = tmp_path_factory.mktemp("captured") / "capture.nq"
    assert main(["export", str(DATA / "crosspath" / "capture.jsonl"), "-o", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same runs as MLflow 3 recorded them (``crosspath/mlflow3_traces.jsonl``): no finish reason anywhere."""
    path = tmp_path_factory.mktemp("imported") / "mlflow.nq"
    assert main(["export", str(DATA / "crosspath" / "mlflow3_traces.jsonl"), "-o", str(path)]) == 0
    return path


def source_traces(path: Path) -> list[m.Trace]:
    return [trace for _, trace in parse_traces(path)]


def lm_usage(trace: m.Trace) -> tuple[int, int]:
    """The input and output tokens of a trace's LM calls."""
    entries = [c.entry for c in trace.calls if isinstance(c, m.LMCall) and c.entry is not None and c.entry.response.usage]
    return sum(e.response.usage.input_tokens or 0 for e in entries), sum(e.response.usage.output_tokens or 0 for e in entries)


# --- a minimal OTLP/HTTP receiver ---------------------------------------------------------------------------------


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """What a test receiver was sent, and what it answers: ``status`` and ``answer`` (the response body)."""

    url: str
    requests: list[Received] = field(default_factory=list)
    status: int = 200
    answer: bytes = b""
    content_type: str = "application/x-protobuf"
    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)  # answers given first, with their headers

    def exports(self) -> list[ExportTraceServiceRequest]:
        out = []
        for r in self.requests:
            body = gzip.decompress(r.body) if r.headers.get("content-encoding") == "gzip" else r.body
            if r.headers["content-type"] == "application/x-protobuf":
                out.append(ExportTraceServiceRequest.FromString(body))
            else:  # OTLP/JSON: hex ids, kept as the hex text to compare
                out.append(json.loads(body))
        return out

    def spans(self) -> list:
        return [s for e in self.exports() for rs in e.resource_spans for ss in rs.scope_spans for s in ss.spans]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP receiver on 127.0.0.1 (a free port) that records each request."""
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name http.server calls
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            status, extra = state.script.pop(0) if state.script else (state.status, {})
            self.send_response(status)
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Content-Type", state.content_type)
            self.send_header("Content-Length", str(len(state.answer)))
            self.end_headers()
            self.wfile.write(state.answer)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def attributes(span) -> dict:
    """A protobuf span's attributes as Python values."""
    out = {}
    for a in span.attributes:
        kind = a.value.WhichOneof("value")
        value = getattr(a.value, kind)
        out[a.key] = [getattr(v, v.WhichOneof("value")) for v in value.values] if kind == "array_value" else value
    return out


# --- what is sent --------------------------------------------------------------------------------------------------


def test_the_spans_go_as_protobuf_with_ids_as_bytes_kinds_finish_reasons_and_headers(captured, receiver, tmp_path, capsys):
    assert main(["to-otlp", str(captured), "-o", str(tmp_path / "spans.json")]) == 0
    written = json.loads((tmp_path / "spans.json").read_text())
    capsys.readouterr()
    code = main([
        "to-otlp", str(captured), "--endpoint", receiver.url,
        "--header", f"Authorization: Bearer {TOKEN}", "--header", "x-mlflow-experiment-id: 0",
    ])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert TOKEN not in out + err
    assert out.strip().startswith(f"sent 3 trace(s), 25 span(s), to {receiver.url} (OTLP/protobuf, 1 request(s))")
    [request] = receiver.requests
    assert request.path == "/v1/traces" and request.headers["content-type"] == "application/x-protobuf"
    assert request.headers["authorization"] == f"Bearer {TOKEN}" and request.headers["x-mlflow-experiment-id"] == "0"
    [export] = receiver.exports()
    assert [rs.schema_url for rs in export.resource_spans] == [SCHEMA_URL] * 3
    assert all(ss.schema_url == SCHEMA_URL and ss.scope.name == "dspy-rdf" for rs in export.resource_spans for ss in rs.scope_spans)
    spans = receiver.spans()
    assert len(spans) == sum(len(t.calls) for t in source_traces(captured)) == 25
    # the ids are the bytes of the hex the JSON export writes, not base64 read from hex
    json_spans = [s for rs in written["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert [(s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex()) for s in spans] == [
        (s["traceId"], s["spanId"], s.get("parentSpanId", "")) for s in json_spans
    ]
    assert all(len(s.trace_id) == 16 and len(s.span_id) == 8 for s in spans)
    span_ids = {s.span_id for s in spans}
    assert all(s.parent_span_id in span_ids for s in spans if s.parent_span_id)
    seen = set()
    for span in spans:
        a = attributes(span)
        operation = a["gen_ai.operation.name"]
        assert a["openinference.span.kind"] == KINDS[operation] and span.name.startswith(operation + " ")
        seen.add(operation)
        if "gen_ai.output.messages" in a:
            messages = json.loads(a["gen_ai.output.messages"])
            jsonschema.validate(messages, SCHEMA)
            assert [msg["finish_reason"] for msg in messages] == ["stop"] * len(messages)
    assert seen == set(KINDS)


def test_an_imported_trace_without_finish_reasons_is_sent_valid_and_reads_back_as_it_was(imported, receiver, capsys):
    assert main(["to-otlp", str(imported), "--endpoint", receiver.url]) == 0
    # the LM calls that answered (a call that raised has no response)
    lm_spans = [a for s in receiver.spans() if s.name.startswith("chat ") and "gen_ai.output.messages" in (a := attributes(s))]
    assert len(lm_spans) == 6
    with_tool_calls = 0
    for a in lm_spans:
        messages = json.loads(a["gen_ai.output.messages"])
        jsonschema.validate(messages, SCHEMA)  # finish_reason is required
        assert [msg["finish_reason"] for msg in messages] == ["unknown"] * len(messages)
        with_tool_calls += any(p["type"] == "tool_call" for msg in messages for p in msg["parts"])
        assert "gen_ai.response.finish_reasons" not in a  # no reason was recorded
    assert with_tool_calls == 1
    # what was unknown comes back unknown
    for trace in source_traces(imported):
        resource_spans, _ = trace_to_resource_spans(trace)
        [back] = traces_from_json({"resourceSpans": [resource_spans]})
        outputs = [o for c in back.calls if isinstance(c, m.LMCall) and c.entry for o in c.entry.response.outputs]
        assert outputs and all(o.finish_reason is None for o in outputs)


def test_finish_reasons_are_mapped_to_the_genai_enum_and_read_back_as_they_were():
    assert [genai_finish_reason(r) for r in ("stop", "tool_calls", "function_call", "length", "content_filter", "end_turn", "max_tokens", "tool_use", "SAFETY")] == [
        "stop", "tool_call", "tool_call", "length", "content_filter", "stop", "length", "tool_call", "content_filter",
    ]  # fmt: skip
    assert (genai_finish_reason(None), genai_finish_reason(None, truncated=True), genai_finish_reason("weird")) == ("unknown", "length", "weird")
    outputs = [
        m.LMOutput(parts=[m.LMToolCallPart(name="add", args={"a": 1}, call_id="c1")], finish_reason="tool_calls"),
        m.LMOutput(parts=[m.LMTextPart(text="cut")], finish_reason="max_tokens", truncated=False),
        m.LMOutput(parts=[m.LMTextPart(text="cut")], truncated=True),
        m.LMOutput(parts=[m.LMTextPart(text="?")]),
    ]
    entry = m.LMHistoryEntry(
        request=m.LMRequest(model="openai/gpt-4o-mini", messages=[m.LMMessage(role="user", parts=[m.LMTextPart(text="hi")])]),
        response=m.LMResponse(outputs=outputs, model="openai/gpt-4o-mini"),
        timestamp="2026-01-01T00:00:00", uuid="u-1", model_type="chat",
    )
    trace = m.Trace(source_kind="lm_history_entry", entries=[entry])
    resource_spans, lost = trace_to_resource_spans(trace)
    [span] = resource_spans["scopeSpans"][0]["spans"]
    a = {x["key"]: next(iter(x["value"].values())) for x in span["attributes"]}
    messages = json.loads(a["gen_ai.output.messages"])
    jsonschema.validate(messages, SCHEMA)
    assert [msg["finish_reason"] for msg in messages] == ["tool_call", "length", "length", "unknown"]
    assert a["openinference.span.kind"] == "LLM"
    [back] = traces_from_json(json.loads(json.dumps({"resourceSpans": [resource_spans]})))
    assert lost == [] and back == trace


def test_compilations_evaluations_and_modules_have_their_kinds_and_come_back():
    calls: list[m.Call] = [
        m.CompileCall(optimizer_class="BootstrapFewShot", started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:00:03Z"),
        m.EvaluateCall(started_at="2026-01-01T00:00:01Z", ended_at="2026-01-01T00:00:02Z", parent_call=0, program_class="QA", devset_size=1, score=1.0),
        m.ModuleCall(module_class="Predict", started_at="2026-01-01T00:00:01Z", ended_at="2026-01-01T00:00:02Z", parent_call=1),
    ]
    trace = m.Trace(source_kind="program_run", source_format="dspy_callback", calls=calls, started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:00:03Z")
    resource_spans, lost = trace_to_resource_spans(trace)
    spans = resource_spans["scopeSpans"][0]["spans"]
    kinds = [{x["key"]: next(iter(x["value"].values())) for x in s["attributes"]} for s in spans]
    assert [(a["openinference.span.kind"], a["gen_ai.operation.name"]) for a in kinds] == [
        ("CHAIN", "invoke_workflow"), ("EVALUATOR", "invoke_workflow"), ("CHAIN", "invoke_workflow"),
    ]  # fmt: skip
    [back] = traces_from_json(json.loads(json.dumps({"resourceSpans": [resource_spans]})))
    assert [type(c) for c in back.calls] == [m.CompileCall, m.EvaluateCall, m.ModuleCall] and lost == []


def test_evaluation_scores_are_genai_evaluation_events_on_the_calls_they_scored():
    calls: list[m.Call] = [
        m.EvaluateCall(
            started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:00:04Z", program_class="QA", metric="exact_match",
            devset_size=3, score=50.0,
            example_results=[
                m.ExampleResult(example={"q": "a"}, score=1.0, program_call=1),
                m.ExampleResult(example={"q": "b"}, score=0.0, program_call=2),
                m.ExampleResult(example={"q": "c"}, error="ValueError: no answer"),
            ],
        ),
        m.ModuleCall(module_class="QA", started_at="2026-01-01T00:00:01Z", ended_at="2026-01-01T00:00:02Z", parent_call=0),
        m.ModuleCall(module_class="QA", started_at="2026-01-01T00:00:02Z", ended_at="2026-01-01T00:00:03Z", parent_call=0),
    ]  # fmt: skip
    trace = m.Trace(source_kind="program_run", source_format="dspy_callback", calls=calls, started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:00:04Z")
    resource_spans, lost = trace_to_resource_spans(trace)
    spans = resource_spans["scopeSpans"][0]["spans"]

    def events(span: dict) -> list[dict]:
        return [{a["key"]: next(iter(a["value"].values())) for a in e["attributes"]} for e in span.get("events", []) if e["name"] == "gen_ai.evaluation.result"]

    assert events(spans[0]) == [
        {"gen_ai.evaluation.name": "exact_match", "error.type": "ValueError"},
        {"gen_ai.evaluation.name": "exact_match", "gen_ai.evaluation.score.value": 50.0},
    ]  # fmt: skip
    assert events(spans[1]) == [{"gen_ai.evaluation.name": "exact_match", "gen_ai.evaluation.score.value": 1.0}]
    assert events(spans[2]) == [{"gen_ai.evaluation.name": "exact_match", "gen_ai.evaluation.score.value": 0.0}]
    [back] = traces_from_json(json.loads(json.dumps({"resourceSpans": [resource_spans]})))
    assert lost == [] and back.losses == [] and back.calls[0].example_results == calls[0].example_results


def test_json_and_gzip_and_a_base_url(captured, receiver, capsys):
    base = receiver.url.removesuffix("/v1/traces")
    assert main(["to-otlp", str(captured), "--endpoint", base, "--protocol", "json", "--gzip"]) == 0
    [request] = receiver.requests
    assert request.path == "/v1/traces"
    assert (request.headers["content-type"], request.headers["content-encoding"]) == ("application/json", "gzip")
    [export] = receiver.exports()
    spans = [s for rs in export["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert len(spans) == 25 and all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    assert "(OTLP/json, gzip, 1 request(s))" in capsys.readouterr().out


@pytest.mark.parametrize("protocol", ["protobuf", "json"])
def test_spans_the_receiver_rejects_are_reported(captured, receiver, capsys, protocol):
    if protocol == "protobuf":
        response = ExportTraceServiceResponse()
        response.partial_success.rejected_spans = 2
        response.partial_success.error_message = "2 spans are too old"
        receiver.answer = response.SerializeToString()
    else:  # OTLP/JSON writes the int64 count as a string
        receiver.content_type = "application/json"
        receiver.answer = json.dumps({"partialSuccess": {"rejectedSpans": "2", "errorMessage": "2 spans are too old"}}).encode()
    assert main(["to-otlp", str(captured), "--endpoint", receiver.url, "--protocol", protocol]) == 1
    out, err = capsys.readouterr()
    assert "the receiver rejected 2 span(s)" in out and "the receiver said: 2 spans are too old" in err


def test_a_store_s_traces_are_sent_too(captured, receiver, tmp_path, capsys):
    store = str(tmp_path / "store")
    assert main(["export", str(captured), "--store", store]) == 0
    [first, *_] = [iri for iri, _ in parse_traces(captured)]
    assert main(["to-otlp", "--store", store, "--trace", first, "--endpoint", receiver.url]) == 0
    assert len({s.trace_id for s in receiver.spans()}) == 1
    assert main(["to-otlp", "--store", store, "--endpoint", receiver.url]) == 0
    assert len(receiver.spans()) == 1 * len(next(t for i, t in parse_traces(captured) if i == first).calls) + 25


def test_large_pushes_go_in_several_requests_of_whole_traces(captured, receiver, monkeypatch, capsys):
    from dspy_rdf.interop import otlp

    monkeypatch.setattr(otlp, "_BATCH_SPANS", 10)  # the runs have 13, 5 and 7 spans
    assert main(["to-otlp", str(captured), "--endpoint", receiver.url]) == 0
    sizes = [[len(ss.spans) for rs in e.resource_spans for ss in rs.scope_spans] for e in receiver.exports()]
    assert sorted(sizes) == [[5, 7], [13]] and "2 request(s)" in capsys.readouterr().out


def test_an_http_error_is_one_line_without_the_header_values(captured, receiver, capsys):
    receiver.status, receiver.content_type, receiver.answer = 401, "text/plain", b"bad token"
    assert main(["to-otlp", str(captured), "--endpoint", receiver.url, "--header", f"Authorization: Bearer {TOKEN}"]) == 2
    out, err = capsys.readouterr()
    assert err.strip() == f"error: {receiver.url} answered HTTP 401 Unauthorized: bad token" and out == ""
    assert TOKEN not in out + err


def test_a_busy_receiver_is_sent_the_same_request_again_after_its_retry_after(captured, receiver, capsys):
    receiver.script = [(503, {"Retry-After": "0"}), (429, {"Retry-After": "0"})]
    assert main(["to-otlp", str(captured), "--endpoint", receiver.url]) == 0
    out = capsys.readouterr().out
    assert "sent 3 trace(s), 25 span(s)" in out and "2 request(s) sent again after the receiver asked to wait" in out
    assert len(receiver.requests) == 3 and receiver.requests[0].body == receiver.requests[1].body == receiver.requests[2].body


def test_a_receiver_that_stays_busy_is_an_error_after_the_retries(captured, receiver, capsys):
    receiver.script = [(503, {"Retry-After": "0"})] * 3
    assert main(["to-otlp", str(captured), "--endpoint", receiver.url, "--retries", "2"]) == 2
    out, err = capsys.readouterr()
    assert err.strip() == f"error: {receiver.url} answered HTTP 503 Service Unavailable (after 2 retries)" and out == ""
    assert len(receiver.requests) == 3
    receiver.requests.clear()
    receiver.script = [(400, {"Retry-After": "0"})]  # not a busy receiver: never sent again
    assert main(["to-otlp", str(captured), "--endpoint", receiver.url]) == 2
    assert len(receiver.requests) == 1 and "answered HTTP 400 Bad Request" in capsys.readouterr().err


def test_a_refused_connection_is_one_line(captured, capsys):
    url = f"http://127.0.0.1:{free_port()}/v1/traces"
    assert main(["to-otlp", str(captured), "--endpoint", url, "--header", f"Authorization: Bearer {TOKEN}"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"error: could not connect to {url}: ") and "Connection refused" in err
    assert len(err.strip().splitlines()) == 1 and TOKEN not in out + err


def test_the_options_are_checked_before_any_work(captured, tmp_path, capsys):
    cases = [
        (["--endpoint", "ftp://x/v1/traces"], "--endpoint must be an http:// or https:// URL"),
        (["--endpoint", "http://127.0.0.1:1/v1/traces", "--header", f"Authorization {TOKEN}"], "--header: expected 'Name: value'"),
        (["--endpoint", "http://127.0.0.1:1/v1/traces", "--header", "Content-Type: text/plain"], "--header Content-Type: set by --protocol"),
        (["--endpoint", "http://127.0.0.1:1/v1/traces", "-o", str(tmp_path / "x.json")], "give -o FILE or --endpoint URL, not both"),
        (["--header", "A: b", "-o", str(tmp_path / "x.json")], "--header applies to --endpoint only"),
        ([], "give -o FILE to write the spans to, or --endpoint URL"),
    ]
    for extra, message in cases:
        assert main(["to-otlp", str(captured), *extra]) == 2
        err = capsys.readouterr().err
        assert message in err and TOKEN not in err, err
    # a URL's user info and query may hold credentials: messages leave them out
    assert main(["to-otlp", str(captured), "--endpoint", f"http://user:{TOKEN}@127.0.0.1:{free_port()}/v1/traces?key={TOKEN}"]) == 2
    assert TOKEN not in capsys.readouterr().err


def test_protobuf_without_opentelemetry_proto_names_the_extra(captured, receiver, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "opentelemetry.proto.collector.trace.v1.trace_service_pb2", None)
    assert main(["to-otlp", str(captured), "--endpoint", receiver.url]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: OTLP/protobuf is encoded by the opentelemetry-proto package: pip install 'dspy-rdf[otlp]' (or --protocol json)"
    assert receiver.requests == []
    assert main(["to-otlp", str(captured), "--endpoint", receiver.url, "--protocol", "json"]) == 0


# --- real consumers ------------------------------------------------------------------------------------------------


def _start(command: list[str], env: dict[str, str], log: Path, ready: str, seconds: float) -> subprocess.Popen:
    """A server process, once ``ready`` answers 200."""
    with log.open("wb") as handle:
        process = subprocess.Popen(command, env={**os.environ, **env}, stdout=handle, stderr=subprocess.STDOUT)
    wait_until_ready(process, lambda: httpx.get(ready, timeout=2).status_code == 200, ready, log, command[0], seconds, poll=0.3)
    return process


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "false", "PHOENIX_TELEMETRY_ENABLED": "false"}

MLFLOW_READ = """
import json, sys
import mlflow
mlflow.set_tracking_uri(sys.argv[1])
out = []
for t in mlflow.search_traces(locations=["0"], return_type="list", max_results=1000):
    out.append({"trace_id": t.info.trace_id, "token_usage": t.info.token_usage,
                "spans": [{"name": s.name, "span_type": s.span_type, "parent_id": s.parent_id} for s in t.data.spans]})
print(json.dumps(out))
"""


@pytest.mark.slow
def test_mlflow_tracking_server_takes_the_spans_as_sent(captured, tmp_path, capsys):
    try:
        python = environment(ROOT / ".venv-mlflow3", MLFLOW) / "bin" / "python"
    except Unavailable as exc:
        pytest.skip(f"cannot build MLflow's environment here: {exc}")
    port = free_port()
    command = [str(python.with_name("mlflow")), "server", "--backend-store-uri", f"sqlite:///{tmp_path}/m.db", "--host", "127.0.0.1", "--port", str(port)]
    try:
        process = _start(command, OFFLINE, tmp_path / "mlflow.log", f"http://127.0.0.1:{port}/health", 120)
    except Unavailable as exc:
        pytest.skip(f"cannot run MLflow's tracking server here: {exc}")
    try:
        url = f"http://127.0.0.1:{port}"
        assert main(["to-otlp", str(captured), "--endpoint", f"{url}/v1/traces", "--header", "x-mlflow-experiment-id: 0"]) == 0
        assert "sent 3 trace(s), 25 span(s)" in capsys.readouterr().out
        read = subprocess.run([str(python), "-c", MLFLOW_READ, url], capture_output=True, text=True, timeout=300, check=False, env={**os.environ, **OFFLINE})
        assert read.returncode == 0, read.stderr[-3000:]
        got = {t["trace_id"].removeprefix("tr-"): t for t in json.loads(read.stdout)}
    finally:
        _stop(process)
    sent = {trace_to_resource_spans(t)[0]["scopeSpans"][0]["spans"][0]["traceId"]: t for t in source_traces(captured)}
    assert got.keys() == sent.keys()
    types = {"LLM": "LLM", "TOOL": "TOOL", "CHAIN": "CHAIN"}
    for trace_id, trace in sent.items():
        back = got[trace_id]
        assert len(back["spans"]) == len(trace.calls)
        assert sum(s["parent_id"] is None for s in back["spans"]) == 1
        inputs, outputs = lm_usage(trace)
        assert back["token_usage"] == {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}
        expected = sorted({"LLM" if isinstance(c, m.LMCall) else "TOOL" if isinstance(c, m.ToolExecution) else "CHAIN" for c in trace.calls})
        assert sorted({types[s["span_type"]] for s in back["spans"]}) == expected


def _phoenix() -> Path:
    """The ``phoenix`` command of its own environment."""
    return environment(ROOT / ".venv-phoenix", PHOENIX) / "bin" / "phoenix"


def _phoenix_spans(url: str, wanted: int, seconds: float = 60) -> list[dict]:
    """The spans of Phoenix's default project, once ``wanted`` of them are there (Phoenix inserts in the background)."""
    deadline = time.monotonic() + seconds
    while True:
        spans, cursor = [], None
        while True:
            params = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
            page = httpx.get(f"{url}/v1/projects/default/spans", params=params, timeout=30).json()
            spans += page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        if len(spans) >= wanted or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


CONTROL_TRACE = "c0" * 16


def _without_finish_reason(trace: m.Trace) -> dict:
    """The first LM span with output messages of ``trace``'s export, alone in a trace of its own, its messages
    without ``finish_reason`` (as to-otlp wrote imported traces before the key was always written)."""
    resource_spans, _ = trace_to_resource_spans(trace)
    for span in resource_spans["scopeSpans"][0]["spans"]:
        for a in span["attributes"]:
            if a["key"] == "gen_ai.output.messages":
                messages = [{k: v for k, v in msg.items() if k != "finish_reason"} for msg in json.loads(a["value"]["stringValue"])]
                a["value"]["stringValue"] = json.dumps(messages)
                alone = {**span, "traceId": CONTROL_TRACE, "spanId": "c0" * 8}
                alone.pop("parentSpanId", None)
                return {**resource_spans, "scopeSpans": [{**resource_spans["scopeSpans"][0], "spans": [alone]}]}
    raise AssertionError("no LM span with output messages")


@pytest.mark.slow
@pytest.mark.timeout(1200)  # building Phoenix's environment on first use
def test_phoenix_shows_llm_tool_and_chain_spans_with_output_messages_and_tool_calls(captured, imported, tmp_path, capsys):
    try:
        phoenix = _phoenix()
    except Unavailable as exc:
        pytest.skip(f"Arize Phoenix cannot be installed here (pip install {PHOENIX}): {exc}")
    port = free_port()
    env = {**OFFLINE, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix")}
    try:
        process = _start([str(phoenix), "serve"], env, tmp_path / "phoenix.log", f"http://127.0.0.1:{port}/healthz", 180)
    except Unavailable as exc:
        pytest.skip(f"cannot run Phoenix here: {exc}")
    try:
        url = f"http://127.0.0.1:{port}"
        for path in (captured, imported):
            assert main(["to-otlp", str(path), "--endpoint", f"{url}/v1/traces"]) == 0
        sent = [t for path in (captured, imported) for t in source_traces(path)]
        # the control: an LM span of the same export whose output messages lack finish_reason, on its own ids
        control = _without_finish_reason(sent[-1])
        assert httpx.post(f"{url}/v1/traces", content=export_request_bytes([control]), headers={"Content-Type": "application/x-protobuf"}).is_success
        spans = _phoenix_spans(url, sum(len(t.calls) for t in sent) + 1)
    finally:
        _stop(process)
    capsys.readouterr()
    [dropped] = [s for s in spans if s["context"]["trace_id"] == CONTROL_TRACE]
    assert "gen_ai.output.messages" in dropped["attributes"]
    assert not any(k.startswith("llm.output_messages") for k in dropped["attributes"])  # what Phoenix does without it
    spans = [s for s in spans if s["context"]["trace_id"] != CONTROL_TRACE]
    assert len(spans) == sum(len(t.calls) for t in sent) == 49
    by_trace: dict[str, list[dict]] = {}
    for span in spans:
        by_trace.setdefault(span["context"]["trace_id"], []).append(span)
    assert all(len(trace_id) == 32 for trace_id in by_trace)
    for trace in sent:
        trace_id = trace_to_resource_spans(trace)[0]["scopeSpans"][0]["spans"][0]["traceId"]
        kinds = sorted(s["span_kind"] for s in by_trace[trace_id])
        expected = sorted("LLM" if isinstance(c, m.LMCall) else "TOOL" if isinstance(c, m.ToolExecution) else "CHAIN" for c in trace.calls)
        assert kinds == expected, trace_id
    answered = [s["attributes"] for s in spans if s["span_kind"] == "LLM" and "gen_ai.output.messages" in s["attributes"]]
    assert answered
    # Phoenix read every output message (it drops gen_ai.output.messages that fail the GenAI schema) ...
    for a in answered:
        assert any(k.startswith("llm.output_messages.0.message.") for k in a), sorted(a)
        assert a["llm.output_messages.0.message.finish_reason"] in ("stop", "unknown")
    # ... and the tool calls in them: the CallTools run, captured and imported
    calls = [
        (a["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"], a["llm.output_messages.0.message.tool_calls.1.tool_call.function.name"])
        for a in answered if "llm.output_messages.0.message.tool_calls.0.tool_call.function.name" in a
    ]
    assert calls == [("add", "divide")] * 2
    tools = [s for s in spans if s["span_kind"] == "TOOL"]
    assert tools and all(s["attributes"].get("tool.name") for s in tools)
