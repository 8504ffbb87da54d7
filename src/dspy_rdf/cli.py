"""The ``dspy-rdf`` command: a thin layer over the library.

Exit codes: 0 success; 1 something was skipped or does not conform; 2 usage or input error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["main"]


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, so a failure never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_inputs(files: list[Path], *, strict: bool) -> tuple[list, int]:
    from dspy_rdf.inputs import read_traces

    traces, skipped = [], 0
    for path in files:
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file")
        for item in read_traces(path):
            if item.error is not None:
                if strict:
                    raise item.error
                print(f"skipped {item.error}", file=sys.stderr)
                skipped += 1
            else:
                traces.append(item.trace)
    return traces, skipped


def _export(args: argparse.Namespace) -> int:
    from dspy_rdf.formats import RdfFormat, serialize_traces

    fmt = RdfFormat(args.format) if args.format else RdfFormat.from_path(args.output)
    traces, skipped = _read_inputs(args.files, strict=args.strict)
    _write_atomically(args.output, serialize_traces(traces, fmt, base=args.base))
    print(f"wrote {len(traces)} trace(s) to {args.output} ({fmt.value})" + (f"; skipped {skipped}" if skipped else ""))
    return 1 if skipped else 0


def _to_json(args: argparse.Namespace) -> int:
    from dspy_rdf.dspy33 import trace_to_json
    from dspy_rdf.formats import RdfFormat, parse_traces

    fmt = RdfFormat(args.format) if args.format else RdfFormat.from_path(args.file)
    traces = [trace for _, trace in parse_traces(args.file, fmt)]
    if len(traces) == 1 and args.output.suffix.lower() != ".jsonl":
        text = json.dumps(trace_to_json(traces[0]), indent=2, ensure_ascii=False) + "\n"
    else:
        text = "".join(json.dumps(trace_to_json(t), ensure_ascii=False) + "\n" for t in traces)
    _write_atomically(args.output, text.encode("utf-8"))
    print(f"wrote {len(traces)} trace(s) to {args.output}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from dspy_rdf.formats import RdfFormat, parse_traces
    from dspy_rdf.validation import validate_traces

    traces, skipped = [], 0
    for path in args.files:
        if path.suffix.lower() in (".json", ".jsonl", ".ndjson"):
            more, bad = _read_inputs([path], strict=False)
            traces += more
            skipped += bad
        else:
            traces += [t for _, t in parse_traces(path, RdfFormat.from_path(path))]
    report = validate_traces(traces, base=args.base)
    print(f"{len(traces)} trace(s): {report}")
    return 0 if report.conforms and not skipped else 1


def _demo(args: argparse.Namespace) -> int:
    from dspy_rdf.demo import run_demo

    return run_demo(store_path=args.store, out=sys.stdout)


def _build_parser() -> argparse.ArgumentParser:
    from dspy_rdf.identity import DEFAULT_BASE

    parser = argparse.ArgumentParser(prog="dspy-rdf", description="DSPy traces as linked data (RDF, SHACL, SPARQL).")
    sub = parser.add_subparsers(dest="command", required=True)
    formats = ["ttl", "nt", "nq", "trig", "jsonld"]

    export = sub.add_parser("export", help="convert DSPy 3.3 JSON/JSONL traces to RDF")
    export.add_argument("files", nargs="+", type=Path, help="LMHistoryEntry/LMRequest/LMResponse JSON (.json) or JSON Lines (.jsonl)")
    export.add_argument("-o", "--output", type=Path, required=True, help="output file")
    export.add_argument("--format", choices=formats, help="RDF format (default: from the output file's extension)")
    export.add_argument("--base", default=DEFAULT_BASE, help=f"prefix of trace IRIs (default: {DEFAULT_BASE})")
    export.add_argument("--strict", action="store_true", help="stop at the first bad input instead of skipping it")
    export.set_defaults(run=_export)

    to_json = sub.add_parser("to-json", help="convert RDF written by `export` back to DSPy 3.3 JSON")
    to_json.add_argument("file", type=Path, help="RDF file (.ttl, .nt, .nq, .trig, .jsonld)")
    to_json.add_argument("-o", "--output", type=Path, required=True, help="output .json (one trace) or .jsonl")
    to_json.add_argument("--format", choices=formats, help="RDF format (default: from the file's extension)")
    to_json.set_defaults(run=_to_json)

    validate = sub.add_parser("validate", help="check traces (JSON, JSONL or RDF) against the SHACL shapes")
    validate.add_argument("files", nargs="+", type=Path)
    validate.add_argument("--base", default=DEFAULT_BASE, help="prefix of trace IRIs for JSON inputs")
    validate.set_defaults(run=_validate)

    demo = sub.add_parser("demo", help="export the bundled DSPy traces to the embedded store, validate them, print analytics")
    demo.add_argument("--store", type=Path, default=None, help="store directory (default: $DSPY_RDF_STORE or ./.dspy-rdf/store)")
    demo.set_defaults(run=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    from dspy_rdf.errors import DspyRdfError

    args = _build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (DspyRdfError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
