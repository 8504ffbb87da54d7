"""The ``dspy-rdf`` command: a thin layer over the library.

Exit codes: 0 success; 1 something was skipped or does not conform; 2 usage or input error; 130 when interrupted
(Ctrl-C), 143 when terminated (SIGTERM).

Loading this module imports nothing but ``io``, ``os``, ``sys`` (loaded with Python), ``contextlib`` and
:mod:`dspy_rdf.outputs` (which imports no more): every other import, of the standard library too, happens in :func:`main`, under its handler of Ctrl-C, so that a Ctrl-C at any
moment of the start is one line.
"""

from __future__ import annotations

import io
import os
import sys
from contextlib import contextmanager

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start (type checkers take it as theirs)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Any, BinaryIO

__all__ = ["Interrupted", "main"]


from dspy_rdf.outputs import STANDARD_OUTPUT, WholeWrites, is_standard_output, open_output, output_target


def _refuse_overwriting(output: Path | None, inputs: list[Path], store: str | None = None) -> None:
    """Refuse, before any work, an output that is one of the inputs (it would be replaced by what is read from it) or
    a file inside an embedded store's directory (it would break the store)."""
    target = output_target(output)
    if target is None:
        return
    if target.exists() and any(path.exists() and os.path.samefile(path, target) for path in inputs):
        raise ValueError(f"-o {output} is one of the inputs; give another file to write")
    if store is not None and not store.lower().startswith(("http://", "https://")):
        from pathlib import Path

        from dspy_rdf.store import default_store_target

        folder = Path(os.path.realpath(store or default_store_target()))
        if folder == Path(os.path.realpath(target)).parent or folder in Path(os.path.realpath(target)).parents:
            raise ValueError(f"-o {output} is inside the store at {store or default_store_target()}; write it elsewhere")


def _output_name(path: Path | None) -> str:
    """An output as messages name it."""
    return "standard output" if output_target(path) is None else str(path)


def _summary_stream(output: Path | None) -> Any:
    """Where a command that writes ``output`` prints its summary: standard output, unless the data goes there."""
    return sys.stderr if is_standard_output(output) else sys.stdout


@contextmanager
def _bar(total: Callable[[], int], **options: Any) -> Iterator[Callable[[int], None] | None]:
    """A tqdm progress bar on stderr when it is a terminal (and tqdm is installed); else nothing. ``total`` is only
    called when a bar is shown (counting may cost a listing of the store)."""
    if not sys.stderr.isatty():
        yield None
        return
    try:
        from tqdm import tqdm
    except ImportError:
        yield None
        return
    with tqdm(total=total(), file=sys.stderr, leave=False, **options) as bar:
        yield bar.update


def _progress(files: list[Path]):
    """A byte-count progress bar over ``files`` (see :func:`_bar`)."""
    return _bar(lambda: sum(path.stat().st_size for path in files if path.exists()), unit="B", unit_scale=True, desc="reading")


class _Inputs:
    """The traces of input files, streamed; bad inputs are reported on stderr and counted (or raised if strict)."""

    def __init__(self, files: list[Path], args: argparse.Namespace, *, strict: bool) -> None:
        from dspy_rdf.inputs import RDF_SUFFIXES

        for path in files:
            if not path.exists():
                raise FileNotFoundError(f"{path}: no such file")
            if args.source_format is not None and path.suffix.lower() in RDF_SUFFIXES:  # before any input is read
                raise ValueError(f"{path}: --from ({args.source_format}) applies to JSON inputs; an RDF file's traces are read as written")
        self.files = files
        self.options = {"source_format": args.source_format, "model": args.fill_model, "timestamp": args.fill_timestamp}
        self.strict = strict
        self.skipped = 0
        self.read = 0
        self.where: tuple[str, int | None] = ("<input>", None)
        """The file and line of the trace last handed out (what a trace that cannot be written is named by)."""

    def traces(self, progress: Callable[[int], None] | None = None) -> Iterator:
        from dspy_rdf.inputs import read_traces

        for path in self.files:
            for item in read_traces(path, progress=progress, **self.options):
                if item.error is None:
                    self.read += 1
                    self.where = (item.source, item.line)
                    yield item.trace
                elif self.strict:
                    raise item.error
                else:
                    print(f"skipped {item.error}", file=sys.stderr)
                    self.skipped += 1


def _redactor(args: argparse.Namespace):
    """The redactor the command's options ask for (None with ``--no-redact``), made once per command: the messages
    and the command's own work use the same one."""
    if "_made_redactor" not in vars(args):
        args._made_redactor = _new_redactor(args)
    return args._made_redactor


def _new_redactor(args: argparse.Namespace):
    from dspy_rdf.canonical.redact import Redactor

    if args.no_redact:
        if args.redact_field or args.redact_pattern:
            raise ValueError("--no-redact cannot be combined with --redact-field or --redact-pattern")
        return None
    patterns = {}
    for pair in args.redact_pattern or []:
        kind, sep, regex = pair.partition("=")
        if not sep or not kind or not regex:
            raise ValueError(f"--redact-pattern {pair!r}: write it as KIND=REGEX")
        patterns[kind] = regex
    return Redactor(extra_patterns=patterns, extra_fields=args.redact_field or ())


class _NothingWritten(Exception):
    """Every input of an export to a file failed: the file is not replaced by an empty one."""


def _export(args: argparse.Namespace) -> int:
    from dspy_rdf.rdf.formats import RdfFormat, write_traces

    inputs = _Inputs(args.files, args, strict=args.strict)
    redactor = _redactor(args)
    if args.output is None:
        return _export_to_store(args, inputs, redactor)
    if args.bulk:
        raise ValueError("--bulk applies to --store only")
    target = output_target(args.output)
    fmt = RdfFormat(args.format) if args.format else RdfFormat.N_QUADS if target is None else RdfFormat.from_path(args.output)
    _refuse_overwriting(args.output, args.files)
    unwritable = []

    def not_written(error: Exception) -> None:
        from dspy_rdf.canonical.errors import TraceInputError

        if isinstance(error, TraceInputError) and error.source == "<input>":  # named by the file and line it came from
            error = error.located(source=inputs.where[0], line=inputs.where[1])
        if args.strict:
            raise error
        print(f"not written: {error}", file=sys.stderr)
        unwritable.append(error)

    try:
        with _progress(args.files) as progress, open_output(args.output) as handle:
            count = write_traces(inputs.traces(progress), handle, fmt, base=args.base, on_error=not_written, redactor=redactor)
            if count == 0 and (inputs.skipped or unwritable):
                raise _NothingWritten
    except _NothingWritten:
        kept = f"; {args.output} was left as it was" if target is not None and target.is_file() else ""
        print(f"wrote no trace: every input failed{kept}", file=sys.stderr)
        return 1
    notes = [f"skipped {inputs.skipped} bad input(s)"] if inputs.skipped else []
    if unwritable:
        notes.append(f"{len(unwritable)} trace(s) could not be written as RDF")
    if inputs.read - len(unwritable) > count:
        notes.append(f"{inputs.read - len(unwritable) - count} duplicate(s) of a trace already written")
    summary = f"wrote {count} trace(s) to {_output_name(args.output)} ({fmt.value})" + "".join(f"; {n}" for n in notes)
    _say(summary, _summary_stream(args.output))
    return 1 if inputs.skipped or unwritable else 0


def _export_to_store(args: argparse.Namespace, inputs: _Inputs, redactor) -> int:
    from dspy_rdf.store import EmbeddedStore, StoreError, open_store

    store = open_store(args.store)
    location = store.location
    try:
        with _progress(args.files) as progress:
            report = store.put(inputs.traces(progress), base=args.base, bulk=args.bulk, redactor=redactor, origin=lambda: inputs.where)
        if isinstance(store, EmbeddedStore) and (args.bulk or report.triples >= _OPTIMIZE_AFTER_TRIPLES):
            print(f"optimizing the store for queries after loading {report.triples} triples…", file=sys.stderr)
            store.optimize()
    except StoreError as exc:
        done = getattr(exc, "report", None)
        written = len(done.written) if done is not None else 0
        _error(f"{exc}")
        print(
            f"{written} trace(s) were written to {location} before the failure; the others were not. Run the same "
            "command again to complete the export (traces already stored are kept as they are).",
            file=sys.stderr,
        )
        _close_quietly(store)
        return 2
    except BaseException:
        _close_quietly(store)
        raise
    for iri, reason in report.failed:
        print(f"not written: {reason}" if iri and iri in reason or not iri else f"not written: {iri}: {reason}", file=sys.stderr)
    notes = [f"{len(report.already_stored)} already stored"] if report.already_stored else []
    if inputs.skipped:
        notes.append(f"skipped {inputs.skipped} bad input(s)")
    duplicates = inputs.read - len(report.written) - len(report.already_stored) - len(report.failed)
    if duplicates > 0:
        notes.append(f"{duplicates} duplicate(s) of a trace already written")
    if report.failed:
        notes.append(f"{len(report.failed)} could not be written")
    mode = " (bulk load)" if args.bulk else ""
    _say(f"stored {len(report.written)} trace(s), {report.triples} triples, in {location}{mode}" + "".join(f"; {n}" for n in notes))
    try:
        store.close()
    except StoreError as exc:  # e.g. the disk filled up while the store flushed its memory to its files
        _error(
            f"{exc}; the traces above were committed: the store replays them from its write-ahead log when it is "
            "next opened (free the space first)"
        )
        return 2
    return 1 if inputs.skipped or report.failed else 0


def _close_quietly(store) -> None:
    """Close a store after an error that is being reported: a second error while closing would only hide it."""
    import contextlib

    with contextlib.suppress(Exception):
        store.close()


_OPTIMIZE_AFTER_TRIPLES = 1_000_000
"""Compact the embedded store after exports this large (and after every --bulk export)."""


def _stats(args: argparse.Namespace) -> int:
    import json

    from dspy_rdf.store import open_store

    with open_store(args.store, read_only=True) as store:
        counts = store.stats()
        location = store.location
    if args.json:
        print(json.dumps(counts))
    else:
        from dspy_rdf.store import STATS

        _say(f"store: {location}")
        for name, value in counts.items():
            if name == "to_migrate" and not value:
                continue
            shown = "unknown" if value is None else format(value, ".6g") if isinstance(value, float) else f"{value:,}"
            print(f"{shown:>12}  {STATS.get(name, name)}")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from dspy_rdf.store import check_trace_iri, open_store

    missing = 0
    for iri in args.traces:
        check_trace_iri(iri)
    with open_store(args.store, create=False) as store:
        for iri in args.traces:
            if store.delete(iri):
                _say(f"deleted {iri}")
            else:  # as dump, prov, validate and to-otlp say of a trace that is not there
                _error(f"no trace {iri} in the store at {store.location}")
                missing += 1
    return 2 if missing else 0


def _migrate(args: argparse.Namespace) -> int:
    from dspy_rdf.store import open_store
    from dspy_rdf.store.migrate import migrate_store

    with open_store(args.store, create=False) as store:
        with _bar(lambda: len(store.trace_iris()), unit=" graphs", desc="migrating") as progress:
            report = migrate_store(store, dry_run=args.dry_run, progress=progress)
        location = store.location
    would = "would be " if args.dry_run else ""
    if args.verbose:
        for old, new in report.moved:
            _say(f"{'would move' if args.dry_run else 'moved'} {old} -> {new}")
        for old, kept in report.merged:
            _say(f"{'would merge' if args.dry_run else 'merged'} {old} into {kept}")
    for iri, why in report.failed:
        _error(f"left as it is: {iri}: {why}")
    parts = [
        f"{len(report.moved)} trace(s) {would}moved to their new IRIs",
        f"{len(report.merged)} duplicate(s) {would}merged into the trace they repeat",
        f"{report.current} already current",
    ]
    if report.other:
        parts.append(f"{len(report.other)} graph(s) not named by dspy-rdf left as they are")
    if report.failed:
        parts.append(f"{len(report.failed)} graph(s) that could not be migrated left as they are")
    _say(f"{'dry run: ' if args.dry_run else ''}store {location}: {report.examined} graph(s) examined; " + ", ".join(parts))
    return 1 if report.failed else 0


def _dump(args: argparse.Namespace) -> int:
    from dspy_rdf.store import open_store

    trig = _trig_output(args)
    _refuse_overwriting(args.output, [], args.store)
    with open_store(args.store, read_only=True) as store, open_output(args.output) as handle:
        count = store.dump(handle, traces=args.trace or None, trig=trig)
    print(f"dumped {count} trace(s) to {_output_name(args.output)}", file=sys.stderr)
    return 0


def _trig_output(args: argparse.Namespace) -> bool:
    """Whether dump or prov writes TriG (else N-Quads): ``--format``, else the output file's extension, else
    N-Quads. Checks the output before any work."""
    target = output_target(args.output)
    return (args.format or (args.output.suffix.lstrip(".") if target is not None else "nq")) == "trig"


def _report(args: argparse.Namespace) -> int:
    from dspy_rdf.analytics.report import write_report
    from dspy_rdf.store import open_store

    with open_store(args.store, read_only=True) as store:
        page = write_report(store, args.out)
    _say(f"wrote {page}")
    return 0


def _to_json(args: argparse.Namespace) -> int:
    import json

    from dspy_rdf.rdf.formats import RdfFormat, parse_traces
    from dspy_rdf.sources.tracejson import trace_to_json

    fmt = RdfFormat(args.format) if args.format else RdfFormat.from_path(args.file)
    _refuse_overwriting(args.output, [args.file])
    stream = output_target(args.output) is None
    traces = [trace for _, trace in parse_traces(args.file, fmt)]
    # JSON Lines in a .jsonl file, and for several traces on standard output; else one indented JSON object
    lines = args.output.suffix.lower() == ".jsonl" or stream and len(traces) > 1
    if len(traces) > 1 and not lines:
        raise ValueError(f"{args.file} holds {len(traces)} traces: write them to a .jsonl file (one trace a line), not {args.output}")
    with open_output(args.output) as handle:
        if lines:
            for trace in traces:
                handle.write((json.dumps(trace_to_json(trace), ensure_ascii=False) + "\n").encode("utf-8"))
        elif traces:
            handle.write((json.dumps(trace_to_json(traces[0]), indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    _say(f"wrote {len(traces)} trace(s) to {_output_name(args.output)}", _summary_stream(args.output))
    return 0


def _to_otlp(args: argparse.Namespace) -> int:
    import contextlib

    from dspy_rdf.rdf.formats import RdfFormat, parse_traces
    from dspy_rdf.interop.otlp import write_otlp

    if bool(args.files) == (args.store is not None):
        raise ValueError("give RDF FILEs or --store, not both" if args.files else "give RDF FILEs or --store PATH|URL to read traces from")
    if not args.files and (took := _store_took("to-otlp", args.store)):
        raise ValueError(took)
    if args.trace and args.store is None:
        raise ValueError("--trace applies to --store only")
    lines = args.output.suffix.lower() in (".jsonl", ".ndjson")
    _refuse_overwriting(args.output, list(args.files), args.store)  # and a directory, before any work
    skipped: list[Exception] = []
    with contextlib.ExitStack() as stack:
        if args.store is not None:
            from dspy_rdf.store import open_store

            store = stack.enter_context(open_store(args.store or None, read_only=True))
            pairs = store.traces(list(dict.fromkeys(args.trace)) if args.trace else None)
        else:
            pairs = _rdf_traces(args.files, args.format, skipped)
        with open_output(args.output) as handle:
            report = write_otlp(pairs, handle, lines=lines)
    for error in skipped:
        print(f"skipped {error}", file=sys.stderr)
    for iri, error in report.refused:
        print(f"not written: {iri}: {error}", file=sys.stderr)
    notes = [f"{report.lossy} with fields the GenAI conventions cannot carry, listed in their losses"] if report.lossy else []
    if report.refused:
        notes.append(f"{len(report.refused)} not written")
    if skipped:
        notes.append(f"{len(skipped)} bad input(s) skipped")
    summary = f"wrote {report.written} trace(s) to {_output_name(args.output)} (OTLP JSON)" + "".join(f"; {n}" for n in notes)
    _say(summary, _summary_stream(args.output))
    return 1 if report.refused or skipped else 0


def _rdf_traces(files: list[Path], format: str | None, skipped: list[Exception]) -> Iterator[tuple[str, Any]]:
    """The ``(IRI, trace)`` pairs of RDF files, one named graph at a time where the format has graphs; a graph that
    cannot be read is added to ``skipped`` (its file and graph named) and the others are read."""
    from dspy_rdf.rdf.formats import RdfFormat
    from dspy_rdf.canonical.identity import trace_iri
    from dspy_rdf.inputs import RDF_SUFFIXES, read_traces

    for path in files:
        fmt = RdfFormat(format) if format else RdfFormat.from_path(path)
        if path.suffix.lower() not in RDF_SUFFIXES or RDF_SUFFIXES[path.suffix.lower()] != fmt.value:
            from dspy_rdf.rdf.formats import parse_traces

            yield from parse_traces(path, fmt)
            continue
        for item in read_traces(path):
            if item.error is not None:
                skipped.append(item.error)
            else:
                yield trace_iri(item.trace), item.trace


def _validate(args: argparse.Namespace) -> int:
    from dspy_rdf.validation import Engine, Severity, validate_files, validate_store

    if args.files and args.store is not None:
        raise ValueError("give input FILEs or --store, not both")
    if not args.files and args.store is None:
        raise ValueError("give input FILEs (JSON, JSONL or RDF) or --store PATH|URL to validate")
    if not args.files and (took := _store_took("validate", args.store)):
        raise ValueError(took)
    traces = list(dict.fromkeys(args.trace)) if args.trace else None
    redactor = _redactor(args)
    engine = Engine(args.engine)
    skipped: list[Exception] = []

    def skip(error: Exception) -> None:
        print(f"skipped {error}", file=sys.stderr)
        skipped.append(error)

    if args.store is not None:
        from dspy_rdf.store import open_store

        with open_store(args.store or None, read_only=True) as store:
            def total() -> int:
                return len(traces) if traces is not None else len(store.trace_iris())

            with _bar(total, unit=" traces", desc="validating") as progress:
                report = validate_store(store, traces=traces, engine=engine, progress=progress, slices=args.slices, redactor=redactor)
    else:
        report = validate_files(
            args.files, traces=traces, engine=engine, base=args.base, redactor=redactor, source_format=args.source_format,
            fill_model=args.fill_model, fill_timestamp=args.fill_timestamp, on_skip=skip,
        )
    if args.format == "json":
        print(report.to_json())
    elif args.format == "ttl":
        sys.stdout.write(report.to_turtle())
    else:
        print(report.to_text())
    if skipped:
        print(f"skipped {len(skipped)} bad input(s)", file=sys.stderr)
    if report.validated == 0:
        print("error: nothing was validated (no traces in the input)", file=sys.stderr)
    elif not report.traces:
        print("error: no trace was found in the input (no dspy:Trace node)", file=sys.stderr)
    return 1 if report.fails(Severity(args.fail_on.capitalize())) or skipped else 0


def _prov(args: argparse.Namespace) -> int:
    from dspy_rdf.interop.prov import write_prov
    from dspy_rdf.store import open_store

    trig = _trig_output(args)
    _refuse_overwriting(args.output, [], args.store)
    with open_store(args.store, read_only=True) as store:
        traces = list(dict.fromkeys(args.trace)) if args.trace else None
        with _bar(lambda: len(traces) if traces is not None else len(store.trace_iris()), unit=" traces", desc="prov") as progress:
            with open_output(args.output) as handle:
                count = write_prov(store, handle, traces=traces, trig=trig, progress=progress)
    print(f"wrote the PROV-O view of {count} trace(s) to {_output_name(args.output)}", file=sys.stderr)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from dspy_rdf.cli.demo import run_demo

    return run_demo(store=args.store or None, out=_RedactedStream(sys.stdout, _MESSAGES.shown))


def _input_options(parser: argparse.ArgumentParser, source_formats: list[str], from_help: str) -> None:
    parser.add_argument("--from", dest="source_format", choices=source_formats, metavar="KIND", help=from_help)
    fill = "for lm.history dicts from DSPy versions that do not record it (2.5.0-2.5.3, DummyLM up to 3.1)"
    parser.add_argument("--fill-model", metavar="MODEL", help=f"model name {fill}")
    parser.add_argument("--fill-timestamp", metavar="ISO_DATETIME", help=f"timestamp {fill}")


def _parse_params(pairs: list[str] | None) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--param {pair!r}: write it as NAME=VALUE")
        if name in params:
            raise ValueError(f"--param {name} given twice")
        params[name] = value
    return params


def _queries(args: argparse.Namespace) -> int:
    import json

    from dspy_rdf.analytics.catalog import list_queries

    queries = list_queries()
    if args.json:
        print(json.dumps([
            {"name": q.name, "question": q.question, "notes": q.notes,
             "parameters": [{"name": p.name, "type": p.type, "default": p.default, "description": p.description} for p in q.parameters]}
            for q in queries
        ], indent=2))
        return 0
    for q in queries:
        print(f"{q.name}\n    {q.question}")
        for p in q.parameters:
            default = "unset" if p.default is None else p.default
            print(f"    --param {p.name}=<{p.type}>  {p.description} (default: {default})")
    return 0


def _query(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dspy_rdf.analytics.catalog import run_query
    from dspy_rdf.store import open_store

    if (args.name is None) == (args.sparql is None):
        both = "not both" if args.name is not None else "(neither was given)"
        raise ValueError(_store_took("query", args.store) or f"give a query NAME (see `dspy-rdf queries`) or --sparql FILE_OR_TEXT, {both}")
    if args.sparql is not None:
        if args.param:
            raise ValueError("--param applies to named queries only")
        source = args.sparql
        path = Path(source)
        if "\n" not in source and len(source) < 4096 and path.is_file():
            source = path.read_text(encoding="utf-8")
        elif not any(c.isspace() or c == "{" for c in source):  # no query is one word: a file name, mistyped
            raise ValueError(f"--sparql {source}: no such file (give a file of SPARQL, or the query text)")
        with open_store(args.store, read_only=True) as store:
            result = run_query(store, source, allow_federation=args.allow_federation)
    else:
        if args.allow_federation:
            raise ValueError("--allow-federation applies to --sparql only")
        with open_store(args.store, read_only=True) as store:
            result = run_query(store, args.name, _parse_params(args.param))
    sys.stdout.write(result.format(args.format))
    return 0


def _add_query_commands(sub: argparse._SubParsersAction) -> None:
    """Register `dspy-rdf queries` and `dspy-rdf query` on the subparsers object of _build_parser()."""
    from dspy_rdf.analytics.catalog import FORMATS

    queries = sub.add_parser("queries", help="list the named analytics queries, their questions and parameters")
    queries.add_argument("--json", action="store_true", help="print the list as JSON")
    queries.set_defaults(run=_queries)

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
    query.set_defaults(run=_query)


def _redaction_options(parser: argparse.ArgumentParser, no_redact_help: str) -> None:
    parser.add_argument("--no-redact", action="store_true", help=no_redact_help)
    parser.add_argument("--redact-field", action="append", metavar="NAME", help="also redact the values of JSON fields with this name (repeatable)")
    parser.add_argument(
        "--redact-pattern", action="append", metavar="KIND=REGEX", help="also redact text matching REGEX, marked [REDACTED:KIND] (repeatable)"
    )


def _store_option(parser: argparse.ArgumentParser, default_help: str, what: str = "the store", *, servers: bool = True) -> None:
    """``--store [PATH|URL]``, the same on every command: a directory (embedded) or, where ``servers``, a SPARQL
    server URL; the value may be left out (``--store`` alone), which means the default store."""
    kinds = "a store directory (embedded) or a SPARQL server URL" if servers else "a store directory (embedded)"
    parser.add_argument(
        "--store", nargs="?", const="", metavar="PATH|URL" if servers else "PATH",
        help=f"{what}: {kinds}; without a value, or when not given where a store is needed, the default store ({default_help})",
    )  # fmt: skip


def _store_took(command: str, store: str | None) -> str | None:
    """The error to give when ``command`` lacks its positional argument and ``--store`` took a value that looks like
    one (a query name, a trace IRI, an input file), else None: ``--store [PATH|URL]`` takes the next word, whatever
    it is, so ``dspy-rdf query --store tool_calls_per_tool`` reads a store named tool_calls_per_tool."""
    from pathlib import Path

    if not store or store.startswith("-"):
        return None
    path = Path(store)
    if command == "query":
        from dspy_rdf.analytics.catalog import list_queries

        looks_like_it = store in {q.name for q in list_queries()} and not path.exists()
        missing, write = "query NAME", "the query name"
    elif command == "delete":
        from dspy_rdf.canonical.identity import is_absolute_iri

        looks_like_it = is_absolute_iri(store) and not path.is_dir()
        missing, write = "TRACE", "the trace IRI"
    elif command in ("export", "validate", "to-otlp"):
        looks_like_it = path.is_file()  # a store is a directory or a URL, never a file
        missing, write = "input FILE", "the files"
    else:
        return None
    if not looks_like_it:
        return None
    return f"no {missing} was given: --store took {store!r} as the store; write {write} before --store, or --store=PATH"


def _build_parser() -> argparse.ArgumentParser:
    import argparse
    from pathlib import Path

    from dspy_rdf.canonical.identity import DEFAULT_BASE
    from dspy_rdf.canonical.model import SOURCE_FORMATS

    class Parser(argparse.ArgumentParser):
        """argparse's parser, and its subcommands', whose error for a missing positional argument says when
        ``--store`` took it (see :func:`_store_took`)."""

        def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
            self.words = list(sys.argv[1:] if args is None else args)
            return super().parse_known_args(args, namespace)

        def error(self, message: str) -> Any:
            words = getattr(self, "words", [])
            if message.startswith("the following arguments are required"):
                store = words[words.index("--store") + 1] if "--store" in words[:-1] else None  # not --store=VALUE
                took = _store_took(self.prog.rpartition(" ")[2], store)
                if took:
                    self.exit(2, f"error: {took}\n")
            super().error(message)

    parser = Parser(prog="dspy-rdf", description="DSPy traces as linked data (RDF, SHACL, SPARQL).")
    sub = parser.add_subparsers(dest="command", required=True)
    formats = ["ttl", "nt", "nq", "trig", "jsonld"]

    store_help = "$DSPY_RDF_STORE, else ./.dspy-rdf/store"
    source_formats = list(SOURCE_FORMATS)
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
    _redaction_options(export, "keep secrets (API keys, bearer tokens, api_key-like fields) instead of redacting them")
    export.set_defaults(run=_export)

    stats = sub.add_parser("stats", help="count traces, LM calls, tool calls and triples in a store")
    _store_option(stats, store_help)
    stats.add_argument("--json", action="store_true", help="print the counts as one JSON object")
    stats.set_defaults(run=_stats)

    delete = sub.add_parser("delete", help="remove traces (their named graphs) from a store")
    delete.add_argument("traces", nargs="+", metavar="TRACE", help="trace IRI")
    _store_option(delete, store_help)
    delete.set_defaults(run=_delete)

    migrate = sub.add_parser(
        "migrate", help="bring a store written by dspy-rdf 0.1.0 to this release's trace IRIs, merging the duplicates its keys let in",
        description="Each trace graph named by a 0.1.0 key (…sha256-<hex>) is written under the IRI it has now and then "
        "removed, so that a migration stopped at any point loses nothing and running it again finishes it. Traces "
        "stored twice (a store dumped and loaded again, one run recorded by two recorders) are merged into one.",
    )  # fmt: skip
    _store_option(migrate, store_help)
    migrate.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    migrate.add_argument("-v", "--verbose", action="store_true", help="name every trace moved or merged")
    migrate.set_defaults(run=_migrate)

    dump = sub.add_parser("dump", help="write a store's traces as N-Quads or TriG")
    _store_option(dump, store_help)
    dump.add_argument("--trace", action="append", metavar="IRI", help="only this trace (repeatable)")
    dump.add_argument("-o", "--output", type=Path, help="output file (default: standard output)")
    dump.add_argument("--format", choices=["nq", "trig"], help="default: from the output file's extension, else nq")
    dump.set_defaults(run=_dump)

    report = sub.add_parser("report", help="write an HTML page with charts of the main analytics of a store")
    _store_option(report, store_help)
    report.add_argument("--out", type=Path, required=True, help="output folder (index.html and PNG charts): new, empty, or a previous report, which is replaced")
    report.set_defaults(run=_report)

    prov = sub.add_parser(
        "prov", help="write the PROV-O view of a store's traces (activities, what they used and generated, agents)",
        description="Each trace's view goes into the named graph <trace IRI>/prov (see the README, and "
        "shapes/prov/prov.shacl.ttl for its SHACL shapes).",
    )  # fmt: skip
    _store_option(prov, store_help)
    prov.add_argument("--trace", action="append", metavar="IRI", help="only this trace (repeatable)")
    prov.add_argument("-o", "--output", type=Path, help="output file (default: standard output)")
    prov.add_argument("--format", choices=["nq", "trig"], help="default: from the output file's extension, else nq")
    prov.set_defaults(run=_prov)

    _add_query_commands(sub)

    to_json = sub.add_parser("to-json", help="convert RDF written by `export` back to JSON (DSPy 3.3 JSON for DSPy's objects)")
    to_json.add_argument("file", type=Path, help="RDF file (.ttl, .nt, .nq, .trig, .jsonld)")
    to_json.add_argument("-o", "--output", type=Path, required=True, help="output .json (one trace) or .jsonl")
    to_json.add_argument("--format", choices=formats, help="RDF format (default: from the file's extension)")
    to_json.set_defaults(run=_to_json)

    to_otlp = sub.add_parser(
        "to-otlp",
        help="write traces (RDF files or a store) as OpenTelemetry spans in OTLP JSON with the GenAI conventions, "
        "for MLflow, Phoenix or Langfuse",
        description="LM calls become chat spans (gen_ai.input.messages, gen_ai.output.messages), tool executions "
        "execute_tool spans with gen_ai.tool.call.id, module calls invoke_workflow spans. `export --from otlp` reads the "
        "file back to the same traces, except the fields the conventions cannot carry, which each trace lists in its "
        "losses. Exit 1 when a trace holds no call to write (a message, a part, a trajectory).",
    )
    to_otlp.add_argument("files", nargs="*", type=Path, help="RDF files (.ttl, .nt, .nq, .trig, .jsonld)")
    to_otlp.add_argument("--store", nargs="?", const="", metavar="PATH|URL", help=f"read the traces of a store instead (default: {store_help})")
    to_otlp.add_argument("--trace", action="append", metavar="IRI", help="with --store: only this trace (repeatable)")
    to_otlp.add_argument("-o", "--output", type=Path, required=True, help="output .json (one OTLP export request) or .jsonl (one per trace per line)")
    to_otlp.add_argument("--format", choices=formats, help="RDF format of the files (default: from each file's extension)")
    to_otlp.set_defaults(run=_to_otlp)

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
    validate.add_argument("--engine", choices=["fast", "pyshacl"], default="fast", help="fast (the shapes compiled to SPARQL run inside the store, default) or pyshacl (the reference)")
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
    validate.set_defaults(run=_validate)

    demo = sub.add_parser("demo", help="export the bundled DSPy traces to the embedded store, validate them, print analytics")
    _store_option(demo, store_help, "where to export the bundled traces", servers=False)
    demo.set_defaults(run=_demo)
    return parser


def _error(message: str) -> None:
    """One line on stderr (which redacts secrets, see :class:`_Messages`)."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr)


def _say(message: str, file: Any = None) -> None:
    """Print a message of the command (a summary) on standard output, or on ``file``, with secrets redacted."""
    print(_MESSAGES.shown(message), file=file or sys.stdout)


class _Messages:
    """The one redaction point of what the command says: errors, warnings and summaries. Everything written to
    standard error passes through :meth:`shown` (see :meth:`redacting_stderr`), and so does every summary printed on
    standard output (:func:`_say`). Secrets are redacted as exports redact them, by the default patterns, or for a
    command with redaction options by its ``--redact-pattern`` and ``--redact-field`` too, or not at all with its
    ``--no-redact``. The data a command writes (dumps, query results, reports) is not a message."""

    def __init__(self) -> None:
        self.redact: Callable[[str], str] | None = self.default

    @staticmethod
    def default(text: str) -> str:
        from dspy_rdf.canonical.errors import shown

        return shown(text)

    def shown(self, text: str) -> str:
        """``text`` as the command may show it: redacted, and with the control characters a terminal would act on
        (escape sequences, a bell, bidirectional overrides) written as escapes."""
        from dspy_rdf.analytics.terminal import terminal_text

        return terminal_text(text if self.redact is None else self.redact(text))

    def follow(self, args: argparse.Namespace) -> None:
        """Redact as the command's own redaction options say, where it has them."""
        if hasattr(args, "no_redact"):
            redactor = _redactor(args)
            self.redact = None if redactor is None else redactor.redact_text

    @contextmanager
    def redacting_stderr(self) -> Iterator[None]:
        """Standard error, for the block, through :meth:`shown`; then as it was, and the default redaction again."""
        original = sys.stderr
        sys.stderr = _RedactedStream(original, self.shown)
        try:
            yield
        finally:
            sys.stderr = original
            self.redact = self.default


class _RedactedStream:
    """A text stream that writes to ``stream`` what ``shown`` makes of each text; anything else is the stream's."""

    def __init__(self, stream: Any, shown: Callable[[str], str]) -> None:
        self._stream = stream
        self._shown = shown

    def write(self, text: str) -> int:
        self._stream.write(self._shown(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_MESSAGES = _Messages()

class Interrupted(KeyboardInterrupt):
    """The command was stopped by a signal: ``signal`` is SIGINT (Ctrl-C) or SIGTERM. A KeyboardInterrupt, so that
    what cleans up after Ctrl-C (temporary outputs, worker processes) cleans up after SIGTERM too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signal = signum


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread. The first one stops the
    command; the ones after it are ignored, so that a second Ctrl-C cannot break the cleanup the first one started.
    A signal ignored by whoever started the command (``nohup``, a background job of a script) stays ignored. The
    handlers before are put back when the block ends, unless a signal stopped it (the process is ending)."""
    import signal

    stops = [number for number in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(number) is not signal.SIG_IGN]

    def stop(signum: int, frame: object) -> None:
        for number in stops:
            signal.signal(number, signal.SIG_IGN)
        raise Interrupted(signum)

    try:
        previous = {number: signal.signal(number, stop) for number in stops}
    except ValueError:  # not the main thread: signals are not ours to handle
        yield
        return
    try:
        yield
    except Interrupted:
        raise
    except BaseException:
        _restore_handlers(previous)
        raise
    _restore_handlers(previous)


def _restore_handlers(handlers: dict) -> None:
    import signal

    for number, handler in handlers.items():
        signal.signal(number, handler)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code: 0, 1 (see the module docstring), 2 on an error, 128 + the signal
    when one stopped it (130 Ctrl-C, 143 SIGTERM). Everything, imports and the parser included, runs under the
    handler of those signals: a Ctrl-C at any moment is one line, never a traceback."""
    try:
        with _stopped_by_signals():
            return _run(argv)
    except KeyboardInterrupt as exc:
        import signal

        signum = exc.signal if isinstance(exc, Interrupted) else signal.SIGINT
        print("terminated" if signum == signal.SIGTERM else "interrupted", file=sys.stderr)
        return 128 + signum


def _run(argv: list[str] | None) -> int:
    """Parse the command line and run the command, each error reported as one line."""
    from dspy_rdf.canonical.errors import DspyRdfError

    with _MESSAGES.redacting_stderr():
        try:
            with _stdout_written_whole():
                args = _build_parser().parse_args(argv)
                _MESSAGES.follow(args)
                return args.run(args)
        except BrokenPipeError:  # the reader of our output went away (`dspy-rdf dump | head`)
            _error("the output was closed before everything was written (broken pipe)")
            return 2
        except (DspyRdfError, ValueError, OSError) as exc:  # dspy-rdf's own errors, bad input, files, disk, network
            _error(_os_message(exc) if type(exc).__module__ == "builtins" and isinstance(exc, OSError) else str(exc))
            return 2


@contextmanager
def _stdout_written_whole() -> Iterator[None]:
    """Standard output for the command, written whole or not at all: a write raises BrokenPipeError when the reader
    has gone, and the block ends with a flush, so that every command reports a broken pipe (Python's own standard
    output takes a large write in part when its reader goes away meanwhile, and says nothing). After a broken pipe,
    the output is sent to /dev/null: what is still buffered must not fail again when Python exits."""
    original = sys.stdout
    try:
        fd = original.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test capturing the output): nothing to do
        yield
        return
    original.flush()
    raw = WholeWrites(fd, shown_as="standard output", closefd=False)
    stream = io.TextIOWrapper(
        io.BufferedWriter(raw, buffer_size=1 << 16), encoding=original.encoding, errors=original.errors, line_buffering=original.line_buffering
    )
    sys.stdout = stream
    try:
        yield
        stream.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
        raise
    finally:
        sys.stdout = original
        try:
            stream.flush()
        except OSError:
            pass  # the output failed while another error is reported: that error is the one to show


def _os_message(exc: OSError) -> str:
    """An OS error as one line naming the file: ``writing out.nq failed: No space left on device``."""
    reason = exc.strerror or str(exc)
    return f"{exc.filename}: {reason}" if exc.filename else reason


if __name__ == "__main__":
    sys.exit(main())
