"""Import throughput of MLflow traces and OTLP spans, against DSPy's own JSON of the same LM calls.

    python bench/bench_imports.py [--copies 400] [--rounds 5]

Workload: the real fixtures of ``tests/data/`` (MLflow 3's DSPy autolog, OpenInference's DSPy instrumentor; the three
programs Predict, ReAct with a failing tool and native tool calling: 6 LM calls, 3 tool executions per copy), copied
``--copies`` times with fresh trace and span ids, written as

- ``mlflow.jsonl``: one MLflow trace (``Trace.to_json()``) per line;
- ``otlp.jsonl``: OpenInference's spans as the Collector's file exporter writes them, one export of at most 4 spans
  per line, so that each trace is put together from several lines;
- ``dspy.jsonl``: the same LM calls as DSPy writes them, the history entries of each trace as one DSPy 3.3
  ``lm.history`` list per line (what ``dspy-rdf export`` read before it read spans).

Each configuration is what ``dspy-rdf export FILE -o out.nq`` does (read, map, write N-Quads), run in a fresh process
so that its peak resident memory is its own; configurations are interleaved round by round, and the figures are
medians over the rounds. A second run with ten times the copies shows whether memory grows with the file.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"


def _fresh_ids(text: str, ids: list[str], copy: int) -> str:
    """``text`` with each id (hex, 16 or 32 digits) replaced by one derived from it and the copy number."""
    for old in ids:
        new = uuid.uuid5(uuid.NAMESPACE_OID, f"{old}/{copy}").hex[: len(old)]
        text = text.replace(old, new)
    return text


def _hex_ids(value: object, found: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(item, str):
                found.add(item)
            else:
                _hex_ids(item, found)
    elif isinstance(value, list):
        for item in value:
            _hex_ids(item, found)


def build(directory: Path, copies: int) -> dict[str, Path]:
    """Write the three inputs of ``copies`` copies of the workload; return their paths."""
    from dspy_rdf.canonical import model as m
    from dspy_rdf.inputs import read_traces
    from dspy_rdf.sources.dspy33 import entry_to_json

    mlflow_lines = (DATA / "mlflow" / "mlflow3_sqlite_traces.jsonl").read_text().splitlines()
    mlflow_ids = sorted({json.loads(line)["info"]["trace_id"].removeprefix("tr-") for line in mlflow_lines})
    otlp_lines = (DATA / "otlp" / "openinference_dspy331_batches.jsonl").read_text().splitlines()
    otlp_ids: set[str] = set()
    for line in otlp_lines:
        _hex_ids(json.loads(line), otlp_ids)
    entries = [
        [entry_to_json(c.entry) for c in item.trace.calls if isinstance(c, m.LMCall) and c.entry is not None]
        for item in read_traces(DATA / "mlflow" / "mlflow3_sqlite_traces.jsonl")
    ]
    paths = {name: directory / f"{name}.jsonl" for name in ("mlflow", "otlp", "dspy")}
    with paths["mlflow"].open("w") as mlflow, paths["otlp"].open("w") as otlp, paths["dspy"].open("w") as dspy:
        for copy in range(copies):
            mlflow.write("".join(_fresh_ids(line, mlflow_ids, copy) + "\n" for line in mlflow_lines))
            otlp.write("".join(_fresh_ids(line, sorted(otlp_ids), copy) + "\n" for line in otlp_lines))
            for history in entries:
                for entry in history:
                    entry["uuid"] = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{entry['uuid']}/{copy}"))
                dspy.write(json.dumps(history) + "\n")
    return paths


def measure(path: Path) -> None:
    """Export one file to N-Quads as ``dspy-rdf export`` does; print seconds, traces, LM calls and peak RSS as JSON."""
    import io

    from dspy_rdf.canonical import model as m
    from dspy_rdf.inputs import read_traces
    from dspy_rdf.rdf.formats import RdfFormat, write_traces

    counts = {"traces": 0, "lm_calls": 0}

    def traces():
        for item in read_traces(path):
            assert item.error is None, item.error
            trace = item.trace
            counts["traces"] += 1
            counts["lm_calls"] += len(trace.entries) or sum(isinstance(c, m.LMCall) for c in trace.calls)
            yield trace

    class Null(io.RawIOBase):
        def write(self, b):  # noqa: D102 - a sink that keeps nothing
            return len(b)

        def writable(self):  # noqa: D102
            return True

    start = time.perf_counter()
    write_traces(traces(), Null(), RdfFormat.N_QUADS)
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"seconds": seconds, **counts, "rss_mb": rss, "bytes": path.stat().st_size}))


def run(path: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--measure", str(path)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=400, help="copies of the three-program workload")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for copies in (args.copies, args.copies * 10):
            directory = Path(tmp) / str(copies)
            directory.mkdir()
            paths = build(directory, copies)
            rounds = args.rounds if copies == args.copies else 1
            results: dict[str, list[dict]] = {name: [] for name in paths}
            for _ in range(rounds):
                for name, path in paths.items():
                    results[name].append(run(path))
            base = statistics.median(r["seconds"] for r in results["dspy"])
            print(f"\n{copies} copies ({copies * 3} traces, {copies * 6} LM calls), median of {rounds} round(s):")
            print(f"{'input':<8} {'MB':>7} {'traces':>7} {'LM calls':>9} {'seconds':>8} {'traces/s':>9} {'LM calls/s':>11} {'MB/s':>6} {'peak RSS MB':>12} {'x DSPy JSON':>12}")
            for name, rows in results.items():
                seconds = statistics.median(r["seconds"] for r in rows)
                rss = statistics.median(r["rss_mb"] for r in rows)
                first = rows[0]
                size = first["bytes"] / 1e6
                print(
                    f"{name:<8} {size:>7.1f} {first['traces']:>7} {first['lm_calls']:>9} {seconds:>8.2f} {first['traces'] / seconds:>9.0f} "
                    f"{first['lm_calls'] / seconds:>11.0f} {size / seconds:>6.1f} {rss:>12.0f} {seconds / base:>12.2f}"
                )


if __name__ == "__main__":
    main()
