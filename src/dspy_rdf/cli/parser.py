"""The command line's parser: every command, its options and their help."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start (type checkers take it as theirs)
if TYPE_CHECKING:
    import argparse
    from typing import Any

from dspy_rdf.cli.commands import (
    run_delete,
    run_demo_command,
    run_dump,
    run_export,
    run_mcp,
    run_migrate,
    run_prov,
    run_queries,
    run_query_command,
    run_report,
    run_serve,
    run_stats,
    run_to_json,
    run_to_otlp,
    run_validate,
    store_took,
)


def _input_options(parser: argparse.ArgumentParser, source_formats: list[str], from_help: str) -> None:
    parser.add_argument("--from", dest="source_format", choices=source_formats, metavar="KIND", help=from_help)
    fill = "for lm.history dicts from DSPy versions that do not record it (2.5.0-2.5.3, DummyLM up to 3.1)"
    parser.add_argument("--fill-model", metavar="MODEL", help=f"model name {fill}")
    parser.add_argument("--fill-timestamp", metavar="ISO_DATETIME", help=f"timestamp {fill}")


def _add_query_commands(sub: argparse._SubParsersAction) -> None:
    """Register `dspy-rdf queries` and `dspy-rdf query` on the subparsers object of build_parser()."""
    from dspy_rdf.analytics.catalog import FORMATS

    queries = sub.add_parser("queries", help="list the named analytics queries, their questions and parameters")
    queries.add_argument("--json", action="store_true", help="print the list as JSON")
    queries.set_defaults(run=run_queries)

    query = sub.add_parser(
        "query",
        help="run a named analytics query (see `dspy-rdf queries`) or your own SPARQL against a store",
        description="Parameters are bound as RDF literals, never pasted into the query text. Raw SPARQL may not "
        "use SERVICE, updates, or FROM/FROM NAMED with non-http(s)/urn IRIs unless --allow-federation.",
    )
    query.add_argument("name", nargs="?", metavar="NAME", help="a query of the library")
    query.add_argument("--param", action="append", metavar="NAME=VALUE", help="a parameter of the named query (repeatable)")
    query.add_argument("--sparql", metavar="FILE_OR_TEXT", help="run this SPARQL (a file, or the query text) instead of a named query")
    query.add_argument("--allow-federation", action="store_true", help="with --sparql: allow SERVICE and FROM with any IRI")
    query.add_argument("--format", choices=list(FORMATS), default="table", help="output format (default: table)")
    _store_option(query, "$DSPY_RDF_STORE, else ./.dspy-rdf/store")
    query.set_defaults(run=run_query_command)


def _add_mcp_command(sub: argparse._SubParsersAction, store_help: str) -> None:
    """Register `dspy-rdf mcp` on the subparsers object of build_parser()."""
    mcp = sub.add_parser(
        "mcp",
        help="serve a store to agents over the Model Context Protocol: named queries, read-only SPARQL, the schema, "
        "traces and validation as tools (needs dspy-rdf[mcp])",
        description="Tools: list_queries, run_query, run_sparql, describe_schema, get_trace, validate. The store is "
        "opened read-only for each call. On stdio by default (what MCP clients start); with --transport http, "
        "streamable HTTP at http://HOST:PORT/mcp, bound to 127.0.0.1: another --host needs --token (or "
        "$DSPY_RDF_TOKEN), which every request must send as 'Authorization: Bearer <token>'.",
    )
    _store_option(mcp, store_help)
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or streamable HTTP")
    mcp.add_argument("--host", help="with --transport http: address to listen on (default 127.0.0.1: this machine only)")
    mcp.add_argument("--port", type=int, help="with --transport http: port to listen on (default 8000)")
    mcp.add_argument("--token", help="with --transport http: a token every request must send as 'Authorization: Bearer <token>' (default: $DSPY_RDF_TOKEN; needed with another --host)")
    mcp.add_argument("--max-rows", type=int, default=200, metavar="N", help="rows a query answers with unless a call asks for another number (default 200)")
    mcp.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="how long a query may run (default 30)")
    mcp.set_defaults(run=run_mcp)


def _redaction_options(parser: argparse.ArgumentParser, no_redact_help: str) -> None:
    parser.add_argument("--no-redact", action="store_true", help=no_redact_help)
    parser.add_argument("--redact-field", action="append", metavar="NAME", help="also redact the values of JSON fields with this name (repeatable)")
    parser.add_argument(
        "--redact-pattern", action="append", metavar="KIND=REGEX", help="also redact text matching REGEX, marked [REDACTED:KIND] (repeatable)"
    )


def _store_option(parser: argparse._ActionsContainer, default_help: str, what: str = "the store", *, servers: bool = True) -> None:
    """``--store [PATH|URL]``, the same on every command: a directory (embedded) or, where ``servers``, a SPARQL
    server URL; the value may be left out (``--store`` alone), which means the default store."""
    kinds = "a store directory (embedded) or a SPARQL server URL" if servers else "a store directory (embedded)"
    parser.add_argument(
        "--store", nargs="?", const="", metavar="PATH|URL" if servers else "PATH",
        help=f"{what}: {kinds}; without a value, or when not given where a store is needed, the default store ({default_help})",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    import argparse
    from pathlib import Path

    from dspy_rdf.canonical.identity import DEFAULT_BASE
    from dspy_rdf.canonical.model import SOURCE_FORMATS

    class Parser(argparse.ArgumentParser):
        """argparse's parser, and its subcommands', whose error for a missing positional argument says when
        ``--store`` took it (see :func:`store_took`)."""

        def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
            self.words = list(sys.argv[1:] if args is None else args)
            return super().parse_known_args(args, namespace)

        def error(self, message: str) -> Any:
            words = getattr(self, "words", [])
            if message.startswith("the following arguments are required"):
                store = words[words.index("--store") + 1] if "--store" in words[:-1] else None  # not --store=VALUE
                took = store_took(self.prog.rpartition(" ")[2], store)
                if took:
                    self.exit(2, f"error: {took}\n")
            super().error(message)

    parser = Parser(prog="dspy-rdf", description="DSPy traces as linked data (RDF, SHACL, SPARQL).")
    sub = parser.add_subparsers(dest="command", required=True)
    formats = ["ttl", "nt", "nq", "trig", "jsonld"]

    store_help = "$DSPY_RDF_STORE, else ./.dspy-rdf/store"
    source_formats: list[str] = list(SOURCE_FORMATS)
    from_help = "read every input as this DSPy shape instead of detecting it: " + ", ".join(source_formats)

    export = sub.add_parser("export", help="convert DSPy traces (JSON/JSONL of any supported shape, or RDF) to RDF or a store")
    export.add_argument("files", nargs="+", type=Path, help="DSPy JSON (.json: one trace) or JSON Lines (.jsonl: one trace per line), or RDF (.nq, .trig, .ttl, .nt, .jsonld)")
    _input_options(export, source_formats, from_help)
    target = export.add_mutually_exclusive_group(required=True)
    target.add_argument("-o", "--output", type=Path, help="output file")
    _store_option(target, store_help, "write into a store instead of a file")
    export.add_argument("--format", choices=formats, help="RDF format (default: from the output file's extension)")
    export.add_argument("--base", default=DEFAULT_BASE, help=f"prefix of trace IRIs (default: {DEFAULT_BASE})")
    export.add_argument("--strict", action="store_true", help="stop at the first bad input instead of skipping it")
    export.add_argument(
        "--bulk",
        action="store_true",
        help="with an embedded --store: the bulk loader for every batch, even small ones, and compaction afterwards "
        "(large batches use it anyway; every batch is still written all or nothing; see README)",
    )
    export.add_argument(
        "--from-start", action="store_true",
        help="with --store: read every input from its start, even one an earlier load into this store stopped in (by "
        "default such a load resumes where it stood; see README)",
    )  # fmt: skip
    _redaction_options(export, "keep secrets (API keys, bearer tokens, api_key-like fields) instead of redacting them")
    export.set_defaults(run=run_export)

    stats = sub.add_parser("stats", help="count traces, LM calls, tool calls and triples in a store")
    _store_option(stats, store_help)
    stats.add_argument("--json", action="store_true", help="print the counts as one JSON object")
    stats.set_defaults(run=run_stats)

    delete = sub.add_parser("delete", help="remove traces (their named graphs) from a store")
    delete.add_argument("traces", nargs="+", metavar="TRACE", help="trace IRI")
    _store_option(delete, store_help)
    delete.set_defaults(run=run_delete)

    migrate = sub.add_parser(
        "migrate", help="bring a store written by an earlier release to this release's trace IRIs and derived facts, merging the duplicates 0.1.0's keys let in",
        description="Each trace graph named by a 0.1.0 key (…sha256-<hex>) is written under the IRI it has now and then "
        "removed, so that a migration stopped at any point loses nothing and running it again finishes it. Traces "
        "stored twice (a store dumped and loaded again, one run recorded by two recorders) are merged into one. A "
        "trace written with the derived facts of an earlier release is given this release's in its own graph.",
    )  # fmt: skip
    _store_option(migrate, store_help)
    migrate.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    migrate.add_argument("-v", "--verbose", action="store_true", help="name every trace moved or merged")
    migrate.set_defaults(run=run_migrate)

    dump = sub.add_parser("dump", help="write a store's traces as N-Quads or TriG")
    _store_option(dump, store_help)
    dump.add_argument("--trace", action="append", metavar="IRI", help="only this trace (repeatable)")
    dump.add_argument("-o", "--output", type=Path, help="output file (default: standard output)")
    dump.add_argument("--format", choices=["nq", "trig"], help="default: from the output file's extension, else nq")
    dump.add_argument(
        "--with-ledger", action="store_true",
        help="also write the store's ledger (the figures the canned queries read), summed into one graph, so that a "
        "server bulk-loading the file (Virtuoso's ld_dir) needs no migrate; left out, with a warning, when the ledger "
        "does not cover every trace",
    )  # fmt: skip
    dump.set_defaults(run=run_dump)

    report = sub.add_parser("report", help="write an HTML page with charts of the main analytics of a store")
    _store_option(report, store_help)
    report.add_argument("--out", type=Path, required=True, help="output folder (index.html and PNG charts): new, empty, or a previous report, which is replaced")
    report.set_defaults(run=run_report)

    prov = sub.add_parser(
        "prov", help="write the PROV-O view of a store's traces (activities, what they used and generated, agents)",
        description="Each trace's view goes into the named graph <trace IRI>/prov (see the README, and "
        "shapes/prov/prov.shacl.ttl for its SHACL shapes); as PROV-JSON, PROV-N or PROV-XML (written by the prov "
        "package: pip install 'dspy-rdf[prov]'), into the bundle of that name.",
    )  # fmt: skip
    _store_option(prov, store_help)
    prov.add_argument("--trace", action="append", metavar="IRI", help="only this trace (repeatable)")
    prov.add_argument("-o", "--output", type=Path, help="output file (default: standard output)")
    prov.add_argument(
        "--format", choices=["nq", "trig", "provjson", "provn", "provxml"],
        help="default: from the output file's extension (.trig; .json PROV-JSON, .provn PROV-N, .provx or .xml PROV-XML), else nq",
    )  # fmt: skip
    prov.set_defaults(run=run_prov)

    _add_query_commands(sub)
    _add_mcp_command(sub, store_help)

    to_json = sub.add_parser("to-json", help="convert RDF written by `export` back to JSON (DSPy 3.3 JSON for DSPy's objects)")
    to_json.add_argument("file", type=Path, help="RDF file (.ttl, .nt, .nq, .trig, .jsonld)")
    to_json.add_argument("-o", "--output", type=Path, required=True, help="output .json (one trace) or .jsonl")
    to_json.add_argument("--format", choices=formats, help="RDF format (default: from the file's extension)")
    to_json.set_defaults(run=run_to_json)

    to_otlp = sub.add_parser(
        "to-otlp",
        help="write traces (RDF files or a store) as OpenTelemetry spans in OTLP JSON with the GenAI conventions, "
        "for MLflow, Phoenix or Langfuse, or send them to an OTLP/HTTP endpoint",
        description="LM calls become chat spans (gen_ai.input.messages, gen_ai.output.messages with a finish_reason each; "
        "OpenInference kind LLM), tool executions execute_tool spans with gen_ai.tool.call.id (TOOL), module calls "
        "invoke_workflow spans (CHAIN), following semantic conventions 1.41.0 (schemaUrl). `export --from otlp` reads the "
        "file back to the same traces, except the fields the conventions cannot carry, which each trace lists in its "
        "losses. --endpoint POSTs them to an OTLP/HTTP receiver instead of writing a file. Exit 1 when a trace holds no "
        "call to write (a message, a part, a trajectory) or the receiver rejected spans, 2 when it could not be reached "
        "or answered with an HTTP error.",
    )
    to_otlp.add_argument("files", nargs="*", type=Path, help="RDF files (.ttl, .nt, .nq, .trig, .jsonld)")
    to_otlp.add_argument("--store", nargs="?", const="", metavar="PATH|URL", help=f"read the traces of a store instead (default: {store_help})")
    to_otlp.add_argument("--trace", action="append", metavar="IRI", help="with --store: only this trace (repeatable)")
    to_otlp.add_argument("-o", "--output", type=Path, help="output .json (one OTLP export request) or .jsonl (one per trace per line)")
    to_otlp.add_argument("--format", choices=formats, help="RDF format of the files (default: from each file's extension)")
    to_otlp.add_argument(
        "--endpoint", metavar="URL",
        help="instead of -o: POST the spans to this OTLP/HTTP traces endpoint, e.g. http://127.0.0.1:6006/v1/traces "
        "(a URL without a path gets /v1/traces)",
    )  # fmt: skip
    to_otlp.add_argument(
        "--header", action="append", metavar="'NAME: VALUE'",
        help="with --endpoint: an HTTP header to send (repeatable), e.g. 'Authorization: Bearer ...'; values are never printed",
    )  # fmt: skip
    to_otlp.add_argument(
        "--protocol", choices=["protobuf", "json"], default="protobuf",
        help="with --endpoint: OTLP/HTTP encoding (default protobuf, which every receiver takes; needs dspy-rdf[otlp])",
    )  # fmt: skip
    to_otlp.add_argument("--gzip", action="store_true", help="with --endpoint: gzip the request bodies")
    to_otlp.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="with --endpoint: how long to wait for each answer (default 30)")
    to_otlp.add_argument(
        "--retries", type=int, default=5, metavar="N",
        help="with --endpoint: how many times to send a request again when the receiver answers 429, 502, 503 or 504 "
        "(after its Retry-After, else 1, 2, 4 ... s; default 5)",
    )  # fmt: skip
    to_otlp.set_defaults(run=run_to_otlp)

    validate = sub.add_parser(
        "validate",
        help="check traces (JSON, JSONL, RDF files or a store) against the SHACL shapes and the integrity rules",
        description="Exit 0 when every trace conforms (warnings allowed, unless --fail-on warning), 1 when one does not, "
        "an input was skipped or nothing was validated, 2 on an error.",
    )
    validate.add_argument("files", nargs="*", type=Path, help="DSPy JSON/JSONL or RDF (.ttl, .nt, .nq, .trig, .jsonld)")
    _input_options(validate, source_formats, from_help)
    validate.add_argument("--base", default=DEFAULT_BASE, help="prefix of trace IRIs for JSON inputs")
    _store_option(validate, store_help, "validate a store instead of files")
    validate.add_argument("--trace", action="append", metavar="IRI", help="only this trace (repeatable)")
    validate.add_argument("--format", choices=["text", "json", "ttl"], default="text", help="report format: text (grouped by trace and rule), json, or ttl (a SHACL validation report)")
    validate.add_argument(
        "--engine", default="fast", metavar="NAME",
        help="fast (the shapes compiled to SPARQL run inside the store, default), pyshacl (the reference), or the name of an engine an installed package offers",
    )  # fmt: skip
    validate.add_argument(
        "--fail-on", choices=["violation", "warning", "info"], default="violation",
        help="exit 1 when a result of this severity or higher is found (default: violation; warnings report what the "
        "model or program did, such as calling a tool that was not offered)",
    )
    _redaction_options(validate, "show secrets in reported values and messages instead of redacting them as exports do")
    validate.add_argument(
        "--slices", action=argparse.BooleanOptionalAction, default=None,
        help="fast engine, embedded store: validate 1,000 traces at a time in memory (memory bounded by a slice, about half "
        "the speed) or, with --no-slices, run each check over the whole store (memory grows with the store); "
        "default: slices above 10 million triples or with --trace",
    )
    validate.set_defaults(run=run_validate)

    serve = sub.add_parser(
        "serve",
        help="own a store and keep it open to others: take OpenTelemetry spans at /v1/traces (OTLP/HTTP) and answer "
        "SPARQL at /query, so query, stats, validate and report run with --store http://HOST:PORT while traces stream in",
        description="A span export is answered only once it is in the spool on disk (--spool), so nothing acknowledged "
        "is lost if the process stops; at start the spool is read again from where the store stands. A trace is "
        "stored as `export --from otlp` stores it, once its root span has come and its spans have stopped coming for "
        "--grace seconds. Binds to 127.0.0.1; another --host needs --token (or $DSPY_RDF_TOKEN), which every request "
        "must send as 'Authorization: Bearer <token>'. Ctrl-C (or SIGTERM) stops it, storing the traces that are ready.",
    )
    _store_option(serve, store_help, "the store to own")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=4318, help="port to listen on (default 4318, OTLP/HTTP's; 0 picks a free one)")
    serve.add_argument("--token", help="a token every request must send as 'Authorization: Bearer <token>' (default: $DSPY_RDF_TOKEN; needed with another --host)")
    serve.add_argument("--spool", type=Path, metavar="DIR", help="where received spans wait until stored (default: STORE.spool beside an embedded store, else ./.dspy-rdf/spool)")
    serve.add_argument("--grace", type=float, default=2.0, metavar="SECONDS", help="how long a trace's spans may keep coming after its root span (default 2)")
    serve.add_argument(
        "--orphan-timeout", type=float, default=600.0, metavar="SECONDS",
        help="how long spans whose root span never comes wait before they are stored as they are (default 600)",
    )  # fmt: skip
    serve.add_argument(
        "--workers", type=int, metavar="N",
        help="processes that build, redact and encode traces beside the server's own (default: one per core, at most 4; 0: none)",
    )  # fmt: skip
    serve.add_argument("--base", default=DEFAULT_BASE, help="prefix of trace IRIs")
    serve.set_defaults(run=run_serve)

    demo = sub.add_parser("demo", help="export the bundled DSPy traces to the embedded store, validate them, print analytics")
    _store_option(demo, store_help, "where to export the bundled traces", servers=False)
    demo.set_defaults(run=run_demo_command)
    return parser
