"""The commands of ``dspy-rdf``: each takes the parsed arguments, calls the library and returns the exit code."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start (type checkers take it as theirs)
if TYPE_CHECKING:
    import argparse
    import contextlib
    from collections.abc import Callable, Iterable, Iterator
    from pathlib import Path
    from typing import Any

    from dspy_rdf.journal import LoadJournal

from dspy_rdf.cli.console import MESSAGES, RedactedStream, output_name, print_error, progress_bar, reading_progress, say, summary_stream
from dspy_rdf.outputs import open_output, output_target


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

    def traces(self, progress: Callable[[int], None] | None = None, journal: LoadJournal | None = None, *, resume: bool = True) -> Iterator:
        """The traces of the files, each file from where ``journal`` says a stopped load stood (if ``resume``), and
        noted in it as they are handed on."""
        from dspy_rdf.inputs import read_traces

        for path in self.files:
            start = journal.start_of(path) if journal is not None and resume else None
            if start is not None and start.note is not None:
                print(start.note, file=sys.stderr)
            if start is not None and start.skip:
                if progress is not None:
                    progress(path.stat().st_size)
                continue
            items = read_traces(path, progress=progress, start=start.point if start is not None else None, **self.options)
            for item in journal.items(path, items) if journal is not None else items:
                if item.error is None:
                    self.read += 1
                    self.where = (item.source, item.line)
                    yield item.trace
                elif self.strict:
                    raise item.error
                else:
                    print(f"skipped {item.error}", file=sys.stderr)
                    self.skipped += 1


def redactor_for(args: argparse.Namespace):
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


def run_export(args: argparse.Namespace) -> int:
    from dspy_rdf.rdf.formats import RdfFormat, write_traces

    inputs = _Inputs(args.files, args, strict=args.strict)
    redactor = redactor_for(args)
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
        with reading_progress(args.files) as progress, open_output(args.output) as handle:
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
    summary = f"wrote {count} trace(s) to {output_name(args.output)} ({fmt.value})" + "".join(f"; {n}" for n in notes)
    say(summary, summary_stream(args.output))
    return 1 if inputs.skipped or unwritable else 0


def _export_to_store(args: argparse.Namespace, inputs: _Inputs, redactor) -> int:
    from dspy_rdf.store import EmbeddedStore, StoreError, open_store

    from dspy_rdf.journal import LoadJournal, journal_path

    store = open_store(args.store)
    location = store.location
    journal = LoadJournal(
        journal_path(location), stored=lambda iris: set(iris) - set(store.missing_traces(iris)),
        warn=lambda message: print(f"warning: {message}", file=sys.stderr),
    )  # fmt: skip
    try:
        try:
            with reading_progress(args.files) as progress:
                traces = inputs.traces(progress, journal, resume=not args.from_start)
                report = store.put(traces, base=args.base, bulk=args.bulk, redactor=redactor, origin=lambda: inputs.where, settled=journal.settled)
        finally:
            journal.write()  # where the load stands, also when it stops here
        journal.forget(args.files)  # completed: a later load of these files reads them whole again
        if isinstance(store, EmbeddedStore) and (args.bulk or report.triples >= _OPTIMIZE_AFTER_TRIPLES):
            print(f"optimizing the store for queries after loading {report.triples} triples…", file=sys.stderr)
            store.optimize()
        elif not isinstance(store, EmbeddedStore) and report.written:
            # A server is not compacted from here, but its ledger's entries (one per batch) are folded into one, as
            # optimize does: the queries over the ledger then read one entry. A failed fold loses no trace.
            try:
                store.fold_ledger()
            except StoreError as exc:
                print(f"warning: every trace is stored, but folding the store's ledger failed ({exc}); run dspy-rdf migrate --store to count it again", file=sys.stderr)
    except StoreError as exc:
        done = getattr(exc, "report", None)
        written = len(done.written) if done is not None else 0
        print_error(f"{exc}")
        print(
            f"{written} trace(s) were written to {location} before the failure; the others were not. Run the same "
            "command again to complete the export: it resumes where this one stopped (traces already stored are kept "
            "as they are).",
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
    say(f"stored {len(report.written)} trace(s), {report.triples} triples, in {location}{mode}" + "".join(f"; {n}" for n in notes))
    try:
        store.close()
    except StoreError as exc:  # e.g. the disk filled up while the store flushed its memory to its files
        print_error(
            f"{exc}; the traces above were committed: the store replays them from its write-ahead log when it is "
            "next opened (free the space first)"
        )
        return 2
    return 1 if inputs.skipped or report.failed else 0


_OPTIMIZE_AFTER_TRIPLES = 1_000_000
"""Compact the embedded store after exports this large (and after every --bulk export)."""


def _close_quietly(store) -> None:
    """Close a store after an error that is being reported: a second error while closing would only hide it."""
    import contextlib

    with contextlib.suppress(Exception):
        store.close()


def run_stats(args: argparse.Namespace) -> int:
    import json

    from dspy_rdf.store import open_store

    with open_store(args.store, read_only=True) as store:
        counts = store.stats()
        location = store.location
    if args.json:
        print(json.dumps(counts))
    else:
        from dspy_rdf.store import QUIET_STATS, STATS

        say(f"store: {location}")
        for name, value in counts.items():
            if name in QUIET_STATS and not value:
                continue
            shown = "unknown" if value is None else format(value, ".6g") if isinstance(value, float) else f"{value:,}"
            print(f"{shown:>12}  {STATS.get(name, name)}")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    from dspy_rdf.store import check_trace_iri, open_store

    missing = 0
    for iri in args.traces:
        check_trace_iri(iri)
    with open_store(args.store, create=False) as store:
        for iri in args.traces:
            if store.delete(iri):
                say(f"deleted {iri}")
            else:  # as dump, prov, validate and to-otlp say of a trace that is not there
                print_error(f"no trace {iri} in the store at {store.location}")
                missing += 1
    return 2 if missing else 0


def run_migrate(args: argparse.Namespace) -> int:
    from dspy_rdf.store import open_store
    from dspy_rdf.store.migrate import migrate_store

    with open_store(args.store, create=False) as store:
        with progress_bar(lambda: len(store.trace_iris()), unit=" graphs", desc="migrating") as progress, progress_bar(
            lambda: len(store.trace_iris()), unit=" traces", desc="counting the ledger"
        ) as counting:
            report = migrate_store(store, dry_run=args.dry_run, progress=progress, ledger_progress=counting)
        location = store.location
    would = "would be " if args.dry_run else ""
    if args.verbose:
        for old, new in report.moved:
            say(f"{'would move' if args.dry_run else 'moved'} {old} -> {new}")
        for old, kept in report.merged:
            say(f"{'would merge' if args.dry_run else 'merged'} {old} into {kept}")
    for iri, why in report.failed:
        print_error(f"left as it is: {iri}: {why}")
    parts = [
        f"{len(report.moved)} trace(s) {would}moved to their new IRIs",
        f"{len(report.merged)} duplicate(s) {would}merged into the trace they repeat",
        f"{len(report.refreshed)} {would}given this release's derived facts",
        f"{len(report.upgraded)} {would}given them in place from their own triples",
        f"{report.current} already current",
    ]
    if report.other:
        parts.append(f"{len(report.other)} graph(s) not named by dspy-rdf left as they are")
    if report.failed:
        parts.append(f"{len(report.failed)} graph(s) that could not be migrated left as they are")
    if report.ledger_upgraded is not None:
        parts.append(f"the ledger of {report.ledger_upgraded} trace(s) brought to this release from queries over the triples")
    if report.ledger_traces is not None:
        counted = "the ledger would be brought up to date" if args.dry_run else f"{report.ledger_traces} trace(s) counted into a new ledger"
        parts.append(counted)
    say(f"{'dry run: ' if args.dry_run else ''}store {location}: {report.examined} graph(s) examined; " + ", ".join(parts))
    return 1 if report.failed else 0


def run_dump(args: argparse.Namespace) -> int:
    from dspy_rdf.store import open_store

    trig = _trig_output(args)
    if args.with_ledger and args.trace:
        raise ValueError("--with-ledger writes the ledger of every trace: it cannot go with --trace")
    _refuse_overwriting(args.output, [], args.store)
    ledger_note = ""
    with open_store(args.store, read_only=True) as store, open_output(args.output) as handle:
        count = store.dump(handle, traces=args.trace or None, trig=trig)
        if args.with_ledger:
            if store.ledger_is_current():
                handle.write(store.ledger_dump(trig=trig))
                ledger_note = " and its ledger"
            else:
                print("warning: the store's ledger does not cover every trace: left out of the dump (after loading it, "
                      "dspy-rdf migrate --store counts the traces into a new one)", file=sys.stderr)  # fmt: skip
    print(f"dumped {count} trace(s){ledger_note} to {output_name(args.output)}", file=sys.stderr)
    return 0


def _trig_output(args: argparse.Namespace) -> bool:
    """Whether dump or prov writes TriG (else N-Quads): ``--format``, else the output file's extension, else
    N-Quads. Checks the output before any work."""
    target = output_target(args.output)
    return (args.format or (args.output.suffix.lstrip(".") if target is not None else "nq")) == "trig"


def run_report(args: argparse.Namespace) -> int:
    from dspy_rdf.analytics.catalog import migrate_warning, traces_to_migrate
    from dspy_rdf.analytics.report import write_report
    from dspy_rdf.store import open_store

    with open_store(args.store, read_only=True) as store:
        page = write_report(store, args.out)
        outdated = traces_to_migrate(store)
    say(f"wrote {page}")
    if (warning := migrate_warning(outdated, args.store, missing_from="the report's sections")) is not None:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def run_to_json(args: argparse.Namespace) -> int:
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
    say(f"wrote {len(traces)} trace(s) to {output_name(args.output)}", summary_stream(args.output))
    return 0


def run_to_otlp(args: argparse.Namespace) -> int:
    import contextlib

    from dspy_rdf.interop.otlp import write_otlp

    if bool(args.files) == (args.store is not None):
        raise ValueError("give RDF FILEs or --store, not both" if args.files else "give RDF FILEs or --store PATH|URL to read traces from")
    if not args.files and (took := store_took("to-otlp", args.store)):
        raise ValueError(took)
    if args.trace and args.store is None:
        raise ValueError("--trace applies to --store only")
    if args.endpoint is not None:
        return _push_to_otlp(args)
    if args.output is None:
        raise ValueError("give -o FILE to write the spans to, or --endpoint URL to send them to")
    if args.header or args.gzip:
        raise ValueError(f"{'--header' if args.header else '--gzip'} applies to --endpoint only")
    lines = args.output.suffix.lower() in (".jsonl", ".ndjson")
    _refuse_overwriting(args.output, list(args.files), args.store)  # and a directory, before any work
    skipped: list[Exception] = []
    with contextlib.ExitStack() as stack:
        pairs = _otlp_input(args, stack, skipped)
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
    summary = f"wrote {report.written} trace(s) to {output_name(args.output)} (OTLP JSON)" + "".join(f"; {n}" for n in notes)
    say(summary, summary_stream(args.output))
    return 1 if report.refused or skipped else 0


def _otlp_input(args: argparse.Namespace, stack: contextlib.ExitStack, skipped: list[Exception]) -> Iterable[tuple[str, Any]]:
    """The traces ``to-otlp`` sends: the store's (``--trace`` some of them, the store kept open by ``stack``), else those
    of the RDF files (bad ones added to ``skipped``)."""
    if args.store is not None:
        from dspy_rdf.store import open_store

        store = stack.enter_context(open_store(args.store or None, read_only=True))
        return store.traces(list(dict.fromkeys(args.trace)) if args.trace else None)
    return _rdf_traces(args.files, args.format, skipped)


def _otlp_headers(given: list[str] | None) -> dict[str, str]:
    """``--header 'Name: value'`` options as a dict; errors name the header, never its value (a token)."""
    import re

    headers: dict[str, str] = {}
    for text in given or []:
        name, colon, value = text.partition(":")
        name = name.strip()
        if not colon or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
            # not shown: without a colon where expected, the text may be a value
            raise ValueError("--header: expected 'Name: value', with a header name of letters, digits and -")
        value = value.strip()
        if any(c in value for c in "\r\n\0"):
            raise ValueError(f"--header {name}: a header value cannot hold a line break")
        if name.lower() in ("content-type", "content-encoding", "content-length"):
            raise ValueError(f"--header {name}: set by --protocol and --gzip, not by hand")
        headers[name] = value
    return headers


def _push_to_otlp(args: argparse.Namespace) -> int:
    """``to-otlp --endpoint``: the traces sent to an OTLP/HTTP receiver, with what it rejected."""
    import contextlib

    from dspy_rdf.interop.otlp import push_otlp, shown_url, traces_url

    if args.output is not None:
        raise ValueError("give -o FILE or --endpoint URL, not both")
    url = traces_url(args.endpoint)  # a bad URL or header is said before any trace is read
    if args.retries < 0:
        raise ValueError("--retries must be 0 or more")
    headers = _otlp_headers(args.header)
    skipped: list[Exception] = []
    with contextlib.ExitStack() as stack:
        pairs = _otlp_input(args, stack, skipped)
        try:
            report = push_otlp(
                pairs, url, headers=headers, protocol=args.protocol, gzip=args.gzip, timeout=args.timeout, retries=args.retries
            )
        except ImportError as exc:  # opentelemetry-proto, for protobuf
            raise ValueError(str(exc)) from None
    for error in skipped:
        print(f"skipped {error}", file=sys.stderr)
    for iri, error in report.refused:
        print(f"not written: {iri}: {error}", file=sys.stderr)
    for message in report.rejections:
        print(f"the receiver said: {' '.join(message.split())}", file=sys.stderr)
    notes = [f"{report.lossy} with fields the GenAI conventions cannot carry, listed in their losses"] if report.lossy else []
    if report.retried:
        notes.append(f"{report.retried} request(s) sent again after the receiver asked to wait")
    if report.rejected_spans:
        notes.append(f"the receiver rejected {report.rejected_spans} span(s)")
    if report.refused:
        notes.append(f"{len(report.refused)} not written")
    if skipped:
        notes.append(f"{len(skipped)} bad input(s) skipped")
    summary = (
        f"sent {report.written} trace(s), {report.spans} span(s), to {shown_url(url)} (OTLP/{args.protocol}"
        + (", gzip" if args.gzip else "") + f", {report.requests} request(s))" + "".join(f"; {n}" for n in notes)
    )
    say(summary)
    return 1 if report.refused or skipped or report.rejected_spans else 0


def _rdf_traces(files: list[Path], format: str | None, skipped: list[Exception]) -> Iterator[tuple[str, Any]]:
    """The ``(IRI, trace)`` pairs of RDF files, one named graph at a time where the format has graphs; a graph that
    cannot be read is added to ``skipped`` (its file and graph named) and the others are read."""
    from dspy_rdf.canonical.identity import trace_iri
    from dspy_rdf.inputs import RDF_SUFFIXES, read_traces
    from dspy_rdf.rdf.formats import RdfFormat

    for path in files:
        fmt = RdfFormat(format) if format else RdfFormat.from_path(path)
        if path.suffix.lower() not in RDF_SUFFIXES or RDF_SUFFIXES[path.suffix.lower()] != fmt.value:
            from dspy_rdf.rdf.formats import parse_traces

            yield from parse_traces(path, fmt)
            continue
        for item in read_traces(path):
            if item.error is not None:
                skipped.append(item.error)
            elif item.trace is not None:  # always, when there is no error
                yield trace_iri(item.trace), item.trace


def run_validate(args: argparse.Namespace) -> int:
    from dspy_rdf.validation import Severity, engine_for, validate_files, validate_store

    if args.files and args.store is not None:
        raise ValueError("give input FILEs or --store, not both")
    if not args.files and args.store is None:
        raise ValueError("give input FILEs (JSON, JSONL or RDF) or --store PATH|URL to validate")
    if not args.files and (took := store_took("validate", args.store)):
        raise ValueError(took)
    traces = list(dict.fromkeys(args.trace)) if args.trace else None
    redactor = redactor_for(args)
    engine = engine_for(args.engine)  # an unknown name is refused before anything is read
    skipped: list[Exception] = []

    def skip(error: Exception) -> None:
        print(f"skipped {error}", file=sys.stderr)
        skipped.append(error)

    if args.store is not None:
        from dspy_rdf.store import open_store

        with open_store(args.store or None, read_only=True) as store:
            where = f"the store at {store.location}"

            def total() -> int:
                return len(traces) if traces is not None else len(store.trace_iris())

            with progress_bar(total, unit=" traces", desc="validating") as progress:
                report = validate_store(store, traces=traces, engine=engine, progress=progress, slices=args.slices, redactor=redactor)
    else:
        where = ", ".join(str(path) for path in args.files)
        report = validate_files(
            args.files, traces=traces, engine=engine, base=args.base, redactor=redactor, source_format=args.source_format,
            fill_model=args.fill_model, fill_timestamp=args.fill_timestamp, on_skip=skip,
        )
    nothing = report.nothing_found(where)
    if nothing is not None and not report.violations:  # never a report that "conforms" on nothing
        more = f" ({len(skipped)} bad input(s) skipped)" if skipped else ""
        print(f"error: {nothing}{more}", file=sys.stderr)
        return 1
    if args.format == "json":
        print(report.to_json())
    elif args.format == "ttl":
        sys.stdout.write(report.to_turtle())
    else:
        print(report.to_text())
    if skipped:
        print(f"skipped {len(skipped)} bad input(s)", file=sys.stderr)
    if nothing is not None:
        print(f"error: {nothing}", file=sys.stderr)
    return 1 if report.fails(Severity(args.fail_on.capitalize())) or skipped else 0


def run_prov(args: argparse.Namespace) -> int:
    from dspy_rdf.interop.prov import write_prov
    from dspy_rdf.store import open_store

    documents = {"provjson": "PROV-JSON", "provn": "PROV-N", "provxml": "PROV-XML"}
    suffixes = {".json": "provjson", ".provn": "provn", ".provx": "provxml", ".xml": "provxml"}
    if args.format is not None:
        document = args.format if args.format in documents else None
    else:
        document = suffixes.get(args.output.suffix.lower()) if output_target(args.output) is not None else None
    trig = document is None and _trig_output(args)
    if document is not None:  # the prov package writes these: say what to install before any work
        try:
            from dspy_rdf.interop.prov_documents import check_xml_support, write_prov_document

            if document == "provxml":
                check_xml_support()
        except ImportError as exc:
            raise ValueError(str(exc)) from None
    _refuse_overwriting(args.output, [], args.store)
    with open_store(args.store, read_only=True) as store:
        traces = list(dict.fromkeys(args.trace)) if args.trace else None
        with progress_bar(lambda: len(traces) if traces is not None else len(store.trace_iris()), unit=" traces", desc="prov") as progress:
            with open_output(args.output) as handle:
                if document is None:
                    count = write_prov(store, handle, traces=traces, trig=trig, progress=progress)
                else:
                    count = write_prov_document(store, handle, format=document, traces=traces, progress=progress)
    written = f" as {documents[document]}" if document is not None else ""
    print(f"wrote the PROV-O view of {count} trace(s){written} to {output_name(args.output)}", file=sys.stderr)
    return 0


def run_demo_command(args: argparse.Namespace) -> int:
    from dspy_rdf.cli.demo import run_demo

    return run_demo(store=args.store or None, out=RedactedStream(sys.stdout, MESSAGES.shown))


def run_mcp(args: argparse.Namespace) -> int:
    from dspy_rdf.service.mcp import TOKEN_ENV, run_server

    http = args.transport == "http"
    if not http and (args.host is not None or args.port is not None or args.token is not None):
        raise ValueError("--host, --port and --token apply to --transport http only")
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) if http else None
    try:
        run_server(
            args.store, transport=args.transport, host=args.host or "127.0.0.1", port=8000 if args.port is None else args.port,
            token=token, row_limit=args.max_rows, timeout=args.timeout,
        )
    except ImportError as exc:  # the mcp extra is not installed: the message says what to install
        raise ValueError(str(exc)) from None
    return 0


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


def run_queries(args: argparse.Namespace) -> int:
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


def run_query_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dspy_rdf.analytics.catalog import run_query
    from dspy_rdf.store import open_store

    if (args.name is None) == (args.sparql is None):
        both = "not both" if args.name is not None else "(neither was given)"
        raise ValueError(store_took("query", args.store) or f"give a query NAME (see `dspy-rdf queries`) or --sparql FILE_OR_TEXT, {both}")
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
    if (warning := result.migrate_warning(args.store)) is not None:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def run_serve(args: argparse.Namespace) -> int:
    import hashlib
    import threading
    from pathlib import Path

    from dspy_rdf.service.server import ServeOptions, TraceServer, check_binding
    from dspy_rdf.store import default_store_target, open_store

    token = args.token if args.token is not None else os.environ.get("DSPY_RDF_TOKEN")
    check_binding(args.host, token)  # before the store is opened
    if args.grace < 0 or args.orphan_timeout < 0:
        raise ValueError("--grace and --orphan-timeout are seconds, 0 or more")
    if args.workers is not None and args.workers < 0:
        raise ValueError("--workers is a number of processes, 0 or more")
    target = args.store or default_store_target()
    remote = "://" in str(target)
    if args.spool is not None:
        spool = args.spool
    elif remote:  # one spool per server: a spool belongs to one store
        spool = Path(".dspy-rdf") / f"spool-{hashlib.sha256(str(target).encode()).hexdigest()[:12]}"
    else:
        spool = Path(f"{Path(target).resolve()}.spool")
    options = ServeOptions(
        spool=spool, host=args.host, port=args.port, token=token, grace=args.grace, orphan=args.orphan_timeout, base=args.base,
        workers=args.workers,
    )
    with open_store(target) as store:
        server = TraceServer(store, options, log=lambda message: print(message, file=sys.stderr, flush=True))
        try:
            server.start()
        except BaseException:
            server.stop()
            raise
        try:
            replayed = f"; {server.replayed} export(s) read again from the spool" if server.replayed else ""
            url = server.url
            if args.host in ("0.0.0.0", "::"):  # every address of this machine: others reach it by one of them
                url = url.replace(f"//{args.host}:", "//127.0.0.1:").replace("//[::]:", "//127.0.0.1:")
                replayed += f"; listening on every address ({args.host}), so other machines use this one's name"
            say(
                f"serving {getattr(store, 'location', target)}: OTLP spans to {url}/v1/traces, SPARQL at "
                f"{url}/query (--store {url}), spool {spool}{replayed}; Ctrl-C stops"
            )
            sys.stdout.flush()  # a supervisor or a test reads the URL while the server runs
            threading.Event().wait()
        finally:
            server.stop()
            status = server.status()
            traces = status["traces"]
            say(
                f"stopped: {status['received']['spans']} span(s) received, {traces['written']} trace(s) stored, "
                f"{traces['gathering']} still gathering (kept in the spool), {traces['failed']} not stored"
            )
    return 0


def store_took(command: str, store: str | None) -> str | None:
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
