"""``dspy-rdf mcp``: the store's queries, schema, traces and validation as MCP tools, through the mcp package's own
clients: one server over stdio and one over streamable HTTP (with a bearer token), each started as a user starts it,
on a store of the bundled real traces. What a tool answers is compared with what the command line answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pyoxigraph as ox
import pytest
from servers import free_port, wait_until_ready

pytest.importorskip("mcp.server.mcpserver", reason="dspy-rdf mcp needs mcp 2: pip install 'dspy-rdf[mcp]'")

import anyio  # noqa: E402  (after the skip: mcp brings it)
from anyio.from_thread import BlockingPortal, start_blocking_portal  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from dspy_rdf.cli.demo import bundled_traces_path  # noqa: E402
from dspy_rdf.cli.main import main  # noqa: E402
from dspy_rdf.store import EmbeddedStore, term_value  # noqa: E402

D = "https://w3id.org/lmodel/dspy/"
TOKEN = "test-token-4f9c2a7e"
TOOLS = ["describe_schema", "get_trace", "list_queries", "run_query", "run_sparql", "validate"]


def server_command(store: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "dspy_rdf", "mcp", "--store", str(store), *options]


def server_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("DSPY_RDF_STORE", "DSPY_RDF_TOKEN")}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The bundled real traces in an embedded store, one of them edited so that validation finds results."""
    where = tmp_path_factory.mktemp("mcp") / "store"
    assert main(["export", str(bundled_traces_path()), "--store", str(where)]) == 0
    with EmbeddedStore(where) as opened:
        # a usage node whose total is not input + output, and an answers link gone: results of the integrity rules
        [row] = opened.select(f"SELECT ?g WHERE {{ GRAPH ?g {{ ?u <{D}total_tokens> ?t . ?r <{D}answers> ?c }} }} ORDER BY ?g LIMIT 1")["results"]["bindings"]
        broken = row["g"]["value"]
        opened.oxigraph.update(f"WITH <{broken}> DELETE {{ ?u <{D}total_tokens> ?t }} INSERT {{ ?u <{D}total_tokens> 1 }} WHERE {{ ?u <{D}total_tokens> ?t }}")
        opened.oxigraph.update(f"WITH <{broken}> DELETE {{ ?r <{D}answers> ?c }} WHERE {{ ?r <{D}answers> ?c }}")
    (where.parent / "broken").write_text(broken, encoding="utf-8")
    return where


@pytest.fixture(scope="module")
def broken(store: Path) -> str:
    return (store.parent / "broken").read_text(encoding="utf-8")


@dataclass
class Session:
    """An MCP client session run by a portal's event loop, called from the test's thread."""

    portal: BlockingPortal
    session: ClientSession

    def call(self, tool: str, **arguments: Any) -> Any:
        return self.portal.call(partial(self.session.call_tool, tool, arguments))

    def answer(self, tool: str, **arguments: Any) -> Any:
        """The structured answer of a call that must succeed."""
        result = self.call(tool, **arguments)
        assert not result.is_error, result.content[0].text
        return result.structured_content.get("result", result.structured_content)

    def error(self, tool: str, **arguments: Any) -> str:
        """The one-line message of a call that must fail."""
        result = self.call(tool, **arguments)
        assert result.is_error, result.structured_content
        [content] = result.content
        assert "\n" not in content.text and "Traceback" not in content.text, content.text
        return content.text


@pytest.fixture(scope="module")
def stdio(store: Path) -> Iterator[Session]:
    """``dspy-rdf mcp --store DIR``, started by the stdio client as an MCP host starts it."""
    log = (store.parent / "stdio.log").open("w", encoding="utf-8")
    params = StdioServerParameters(command=sys.executable, args=server_command(store)[1:], env=server_env())
    with log, start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(stdio_client(params, errlog=log)) as (read, write):
            with portal.wrap_async_context_manager(ClientSession(read, write)) as session:
                portal.call(session.initialize)
                yield Session(portal, session)


@dataclass
class HttpServer:
    url: str
    process: subprocess.Popen
    log: Path


@pytest.fixture(scope="module")
def http_server(store: Path) -> Iterator[HttpServer]:
    """``dspy-rdf mcp --transport http`` with a token from ``$DSPY_RDF_TOKEN``."""
    port = free_port()
    log = store.parent / "http.log"
    url = f"http://127.0.0.1:{port}/mcp"
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            server_command(store, "--transport", "http", "--port", str(port)), env=server_env() | {"DSPY_RDF_TOKEN": TOKEN},
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        wait_until_ready(process, lambda: httpx.post(url, timeout=2).status_code == 401, url, log, "dspy-rdf mcp", 30)
        yield HttpServer(url, process, log)
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture(scope="module")
def http(http_server: HttpServer) -> Iterator[Session]:
    import httpx2

    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=httpx2.Timeout(30, read=300))
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(streamable_http_client(http_server.url, http_client=client)) as (read, write):
            with portal.wrap_async_context_manager(ClientSession(read, write)) as session:
                portal.call(session.initialize)
                yield Session(portal, session)


def cli_json(capsys, *argv: str) -> Any:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)


def cli_rows(capsys, store: Path, name: str, *params: str) -> list[dict[str, Any]]:
    """The rows ``dspy-rdf query NAME --format json`` prints, as values."""
    raw = cli_json(capsys, "query", name, *(f"--param={p}" for p in params), "--format", "json", f"--store={store}")
    return [{var: term_value(row.get(var)) for var in raw["head"]["vars"]} for row in raw["results"]["bindings"]]


# --- the tools --------------------------------------------------------------------------------------------


def test_the_server_offers_six_read_only_tools_each_described(stdio):
    tools = portal_tools(stdio)
    assert sorted(tools) == TOOLS
    for tool in tools.values():
        assert len(tool.description) > 80 and tool.annotations.read_only_hint


def portal_tools(session: Session) -> dict[str, Any]:
    return {tool.name: tool for tool in session.portal.call(session.session.list_tools).tools}


def test_list_queries_gives_the_catalog(stdio, capsys):
    listed = stdio.answer("list_queries")
    assert listed == cli_json(capsys, "queries", "--json")
    assert {"name": "tool", "type": "string", "default": None, "description": "only this tool"} in next(
        q for q in listed if q["name"] == "tool_latency_per_tool"
    )["parameters"]


def test_every_named_query_answers_the_rows_of_dspy_rdf_query(stdio, store, capsys):
    names = [q["name"] for q in stdio.answer("list_queries")]
    assert len(names) >= 20
    answered = 0
    for name in names:
        answer = stdio.answer("run_query", name=name, max_rows=10_000)
        assert answer["rows"] == cli_rows(capsys, store, name), name
        assert answer["truncated"] is False and answer["row_count"] == len(answer["rows"])
        answered += bool(answer["rows"])
    assert answered >= 8  # the bundled traces give rows to most queries


def test_query_parameters_are_bound_as_dspy_rdf_query_binds_them(stdio, store, capsys):
    expected = cli_rows(capsys, store, "tool_argument_frequency", "tool=search web", "limit=1")
    assert expected and len(expected) == 1
    assert stdio.answer("run_query", name="tool_argument_frequency", params={"tool": "search web", "limit": 1})["rows"] == expected
    assert stdio.answer("run_query", name="tool_calls_per_tool", params={"framework_tools": 1})["rows"] == cli_rows(
        capsys, store, "tool_calls_per_tool", "framework_tools=1"
    )


def test_a_query_answer_longer_than_max_rows_is_cut_and_says_so(stdio):
    everything = "SELECT ?s ?p ?o WHERE { GRAPH ?g { ?s ?p ?o } }"
    whole = stdio.answer("run_sparql", sparql=everything, max_rows=10_000)
    assert whole["truncated"] is False and whole["row_count"] > 1000
    cut = stdio.answer("run_sparql", sparql=everything)
    assert cut["row_count"] == 200 and len(cut["rows"]) == 200 and cut["truncated"] is True
    assert "only the first 200 rows" in cut["note"]
    assert stdio.answer("run_query", name="part_kinds", max_rows=1)["truncated"] is True
    assert "max_rows must be an integer from 1 to 10,000" in stdio.error("run_sparql", sparql=everything, max_rows=0)


def test_run_sparql_answers_select_and_ask(stdio, store, capsys):
    sparql = f"SELECT ?trace (COUNT(?m) AS ?messages) WHERE {{ GRAPH ?trace {{ ?m a <{D}LMMessage> }} }} GROUP BY ?trace ORDER BY ?trace"
    answer = stdio.answer("run_sparql", sparql=sparql)
    raw = cli_json(capsys, "query", "--sparql", sparql, "--format", "json", f"--store={store}")
    assert answer["columns"] == ["trace", "messages"]
    assert answer["rows"] == [{v: term_value(row.get(v)) for v in raw["head"]["vars"]} for row in raw["results"]["bindings"]]
    assert stdio.answer("run_sparql", sparql=f"ASK {{ GRAPH ?g {{ ?t a <{D}Trace> }} }}")["rows"] == [{"boolean": True}]


@pytest.mark.parametrize(
    "sparql, said",
    [
        ("INSERT DATA { GRAPH <urn:x> { <urn:a> <urn:b> <urn:c> } }", "INSERT is an update"),
        ("DELETE WHERE { GRAPH ?g { ?s ?p ?o } }", "DELETE is an update"),
        ("DROP ALL", "DROP is an update"),
        ("SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }", "SERVICE (federated query to another endpoint) is refused"),
        ("SELECT * WHERE { ?s ?p }", "not a valid SPARQL query"),
        ("CONSTRUCT { ?s ?p ?o } WHERE { GRAPH ?g { ?s ?p ?o } }", "expected a SELECT or ASK query"),
    ],
)
def test_run_sparql_refuses_what_query_sparql_refuses(stdio, store, sparql, said):
    message = stdio.error("run_sparql", sparql=sparql)
    assert message.startswith("Error executing tool run_sparql: ") and said in message
    assert "--allow-federation" not in message  # no call can allow it
    with EmbeddedStore(store, read_only=True) as opened:  # nothing was written
        assert not opened.select("ASK { GRAPH <urn:x> { ?s ?p ?o } }")["boolean"]
        assert len(opened.trace_iris()) == 9


def test_describe_schema_gives_the_classes_then_one_class_s_slots(stdio):
    overview = stdio.answer("describe_schema")
    classes = {c["name"]: c for c in overview["classes"]}
    assert {"Trace", "LMCall", "LMMessage", "LMToolCallPart", "ToolExecution", "UsageSummary"} <= set(classes)
    assert all(c["description"] for c in classes.values())
    assert classes["LMToolCallPart"]["parents"] == ["LMPart"] and "call_id" in classes["LMToolCallPart"]["slots"]
    part = stdio.answer("describe_schema", class_name="dspy:LMToolCallPart")
    slots = {s["name"]: s for s in part["slots"]}
    assert slots["name"]["iri"] == "http://www.w3.org/2000/01/rdf-schema#label" and slots["name"]["required"] is True
    assert slots["call_id"]["range"] == "string" and slots["call_id"]["description"]
    assert slots["part_type"]["values"] == ["tool_call"]
    assert {s["range"] for s in stdio.answer("describe_schema", class_name="LMMessage")["slots"] if s["name"] == "parts"} == {"LMPart"}
    assert "no class 'Nope' in the schema; its classes: " in stdio.error("describe_schema", class_name="Nope")


def test_get_trace_gives_what_dump_and_to_json_write(stdio, store, broken, tmp_path, capsys):
    trace = stdio.answer("run_query", name="longest_conversations")["rows"][0]["trace"]
    dumped = tmp_path / "one.nq"
    assert main(["dump", f"--store={store}", "--trace", trace, "-o", str(dumped)]) == 0
    nquads = stdio.answer("get_trace", trace=trace, format="nquads")
    assert nquads == {"trace": trace, "format": "nquads", "text": dumped.read_text(encoding="utf-8")}
    quads = set(ox.parse(dumped.read_bytes(), format=ox.RdfFormat.N_QUADS))
    trig = stdio.answer("get_trace", trace=trace)  # TriG by default
    assert trig["format"] == "trig" and set(ox.parse(trig["text"].encode(), format=ox.RdfFormat.TRIG)) == quads
    turtle = stdio.answer("get_trace", trace=trace, format="turtle")["text"]
    assert {q.triple for q in ox.parse(turtle.encode(), format=ox.RdfFormat.TURTLE)} == {q.triple for q in quads}
    assert main(["to-json", str(dumped), "-o", str(tmp_path / "one.json")]) == 0
    as_json = stdio.answer("get_trace", trace=trace.rpartition(":")[2], format="json")  # by its key alone
    assert as_json["trace"] == trace and json.loads(as_json["text"]) == json.loads((tmp_path / "one.json").read_text(encoding="utf-8"))
    too_long = stdio.error("get_trace", trace=trace, max_chars=100)
    assert f"trace {trace} is " in too_long and "more than max_chars (100)" in too_long


def test_an_unknown_trace_is_an_error(stdio):
    assert "no trace urn:dspy-rdf:trace:content-0000 in the store" in stdio.error("get_trace", trace="urn:dspy-rdf:trace:content-0000")
    assert "no trace content-0000 in the store" in stdio.error("validate", trace="content-0000")
    assert "missing argument 'trace'" in stdio.error("get_trace")
    assert "format" in stdio.error("get_trace", trace="content-0000", format="rdfxml")


def test_validate_gives_the_report_of_validate_store(stdio, store, broken, capsys):
    report = cli_json(capsys, "validate", f"--store={store}", "--format", "json")
    answer = stdio.answer("validate")
    counts = ("violation_count", "warning_count", "info_count", "traces_validated")
    assert {k: answer[k] for k in counts} == {k: report[k] for k in counts}
    assert answer["traces_validated"] == 9 and answer["violation_count"] >= 2 and answer["conforms"] is False
    assert answer["summary"].startswith("does not conform: ") and "in 1 of 9 trace(s)" in answer["summary"]
    assert answer["results"] == [x for group in report["traces"] for x in group["results"]][:50]
    assert {x["trace"] for x in answer["results"]} == {broken}
    capped = stdio.answer("validate", max_results=1)
    assert len(capped["results"]) == 1 and capped["truncated"] is True and "the first 1 of" in capped["note"]
    good = next(t for t in stdio.answer("run_query", name="longest_conversations")["rows"] if t["trace"] != broken)["trace"]
    one = stdio.answer("validate", trace=good, engine="pyshacl")
    assert one["conforms"] is True and one["traces_validated"] == 1 and one["results"] == []
    assert "no validation engine 'nope'" in stdio.error("validate", engine="nope")


def test_unknown_queries_parameters_and_values_are_one_line_errors(stdio):
    unknown = stdio.error("run_query", name="tool_calls_per_tol")
    assert "no query named 'tool_calls_per_tol'; known queries: " in unknown and "tool_calls_per_tool" in unknown
    assert "no query named 'SELECT * WHERE { ?s ?p ?o }'" in stdio.error("run_query", name="SELECT * WHERE { ?s ?p ?o }")
    assert "query 'tool_error_rate' has no parameter 'tools'" in stdio.error("run_query", name="tool_error_rate", params={"tools": "x"})
    assert "expected a date written YYYY-MM-DD" in stdio.error("run_query", name="tokens_cost_per_model_day", params={"since": "May 1st"})
    assert stdio.error("run_query") == "Error executing tool run_query: missing argument 'name'"
    assert "missing argument 'sparql'" in stdio.error("run_sparql")
    assert "argument 'max_rows'" in stdio.error("run_sparql", sparql="ASK {}", max_rows="many")


def test_a_query_past_the_timeout_is_stopped(store):
    from mcp.client import Client

    from dspy_rdf.service.mcp import StoreTools, build_server

    server = build_server(StoreTools(store=str(store), timeout=0.05))
    # about 10^6 pairs of triples to count: far longer than the timeout, short enough not to keep a core busy
    pairs = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?a { ?s ?p ?o } GRAPH ?b { ?t ?q ?v } FILTER(?o != ?v) }"

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool("run_sparql", {"sparql": pairs})

    result = anyio.run(call)
    assert result.is_error and "ran longer than the timeout of 0.05 s, so there is no answer" in result.content[0].text


# --- HTTP, the token, the start ------------------------------------------------------------------------------


def test_http_without_the_token_is_refused_and_with_it_works(http_server, http, capsys, store):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    assert httpx.post(http_server.url, json=initialize, headers=headers, timeout=5).status_code == 401
    wrong = httpx.post(http_server.url, json=initialize, headers=headers | {"Authorization": "Bearer not-the-token"}, timeout=5)
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")
    assert sorted(portal_tools(http)) == TOOLS
    assert http.answer("run_query", name="tool_calls_per_tool")["rows"] == cli_rows(capsys, store, "tool_calls_per_tool")
    assert "INSERT is an update" in http.error("run_sparql", sparql="INSERT DATA { <urn:a> <urn:b> <urn:c> }")
    http.answer("list_queries")
    assert TOKEN not in http_server.log.read_text(encoding="utf-8")  # never printed


def test_another_host_without_a_token_is_refused_at_start(store):
    done = subprocess.run(
        server_command(store, "--transport", "http", "--host", "0.0.0.0", "--port", str(free_port())),
        env=server_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: --host 0.0.0.0 ") and "--token" in done.stderr


def test_options_that_do_not_apply_and_a_missing_store_are_refused(store, tmp_path):
    assert main(["mcp", f"--store={store}", "--token", "t"]) == 2
    assert main(["mcp", f"--store={tmp_path / 'none'}"]) == 2


def test_without_the_mcp_package_the_command_says_what_to_install(store):
    hide = "import sys; sys.modules['mcp'] = None; from dspy_rdf.cli.main import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", hide, "mcp", f"--store={store}"], env=server_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2 and done.stderr == "error: the MCP server needs the mcp package: pip install 'dspy-rdf[mcp]'\n"


def test_calls_past_their_timeout_cannot_pile_up(store):
    """A call past its timeout is answered at once, but its query runs on in its thread: at most MAX_RUNNING_CALLS
    run at once, and one more is refused, saying why, until they end."""
    import threading

    from mcp.client import Client

    from dspy_rdf.service.mcp import MAX_RUNNING_CALLS, StoreTools, build_server

    release = threading.Event()

    class SlowTools(StoreTools):
        def run_query(self, *args, **kwargs):  # a query that ends only when the test says so
            release.wait(30)
            return super().run_query(*args, **kwargs)

    server = build_server(SlowTools(store=str(store), timeout=0.05))

    async def flood() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool("run_query", {"name": "tool_calls_per_tool"}) for _ in range(MAX_RUNNING_CALLS + 1)]

    try:
        results = anyio.run(flood)
    finally:
        release.set()
    texts = [r.content[0].text for r in results]
    assert all(r.is_error for r in results)
    assert sum("ran longer than the timeout" in t for t in texts) == MAX_RUNNING_CALLS
    assert f"{MAX_RUNNING_CALLS} calls are still running" in texts[-1]
