"""Benchmark of reading N-Quads in any order: wall time and peak memory of ``dspy-rdf export x.nq -o y.nq`` when the
file's quads are grouped by graph (as every dspy-rdf writer puts them: the baseline), shuffled, or interleaved.

    .venv/bin/python bench/bench_quad_order.py [--lm-calls 10000 50000] [--repeat 3] [--workdir DIR]

Workload: the distinct real DSPy traces of ``bench_store.py`` (cached in ``--workdir``), exported once to N-Quads
(grouped); then the same lines shuffled (``shuf``'s worst case: every graph spread over the whole file) and two
halves of the file interleaved line by line (a merge of two dumps). A grouped file is read in one pass holding one
graph at a time; the others in a second pass that sorts the graphs not read whole into temporary files of a few
megabytes. The same traces as JSON-LD are read too: as this package writes it (the streaming profile's key order,
read by pyoxigraph's streaming parser) and with its ``@context`` moved last, which no streaming parser can follow
(read by the parser that holds the whole document, as every JSON-LD file was read before).
Each run is one ``python -m dspy_rdf.cli export`` process started by the launcher of ``bench_export.py`` (its own
peak RSS, imports included). Medians over ``--repeat`` runs, each order's ratio to the grouped file in the same
round, and the range of that ratio over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_export import run_child  # noqa: E402  (the same launcher: the child's own peak memory)
from bench_store import workload  # noqa: E402  (the same workload files)

ORDERS = ("grouped (baseline)", "interleaved halves", "shuffled", "JSON-LD", "JSON-LD, context last")


def orders(nquads: Path, directory: Path, cli: list[str]) -> dict[str, Path]:
    """The N-Quads file in each order, and the same traces as JSON-LD."""
    lines = nquads.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    interleaved = [line for pair in zip(lines[:half], lines[half:]) for line in pair] + lines[2 * half :]
    shuffled = list(lines)
    random.Random(1).shuffle(shuffled)
    paths = {ORDERS[0]: nquads}
    for name, content in ((ORDERS[1], interleaved), (ORDERS[2], shuffled)):
        path = directory / f"{name.split()[0]}.nq"
        path.write_bytes(b"".join(content))
        paths[name] = path
    jsonld = directory / "traces.jsonld"
    run_child([*cli, str(nquads), "-o", str(jsonld)])
    paths[ORDERS[3]] = jsonld
    document = json.loads(jsonld.read_text(encoding="utf-8"))
    context_last = directory / "context_last.jsonld"
    context_last.write_text(json.dumps({"@graph": document.pop("@graph"), "@context": document["@context"]}), encoding="utf-8")
    paths[ORDERS[4]] = context_last
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm-calls", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    cleanup = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="bench-quad-order-")) if cleanup else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="orders-", dir=workdir))
    cli = [sys.executable, "-m", "dspy_rdf.cli", "export"]
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, repeat {args.repeat}", flush=True)
    rows = []
    try:
        for size in sorted(args.lm_calls):
            source, n_traces, n_calls = workload(size, workdir)
            grouped = scratch / "grouped.nq"
            run_child([*cli, str(source), "-o", str(grouped)])
            paths = orders(grouped, scratch, cli)
            print(f"\n# {n_calls:,} LM calls, {n_traces:,} traces, {grouped.stat().st_size / 1e6:.0f} MB of N-Quads", flush=True)
            times: dict[str, list[float]] = {name: [] for name in ORDERS}
            peaks: dict[str, list[float]] = {name: [] for name in ORDERS}
            for _ in range(args.repeat):
                for name, path in paths.items():
                    seconds, mb, last = run_child([*cli, str(path), "-o", str(scratch / "out.nq")])
                    times[name].append(seconds)
                    peaks[name].append(mb)
                    print(f"  {name:<20} {seconds:8.2f} s  {mb:7.0f} MB  {last[:80]}", flush=True)
            for name in ORDERS:
                ratios = [t / b for t, b in zip(times[name], times[ORDERS[0]])]
                rows.append((n_calls, name, statistics.median(times[name]), statistics.median(peaks[name]),
                             statistics.median(ratios), min(ratios), max(ratios)))  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if cleanup:
            shutil.rmtree(workdir, ignore_errors=True)
    print("\n| LM calls | order | seconds (median) | peak RSS MB | time vs grouped (median, range) |")
    print("|---:|---|---:|---:|---|")
    for calls, name, seconds, mb, ratio, low, high in rows:
        print(f"| {calls:,} | {name} | {seconds:.2f} | {mb:.0f} | {ratio:.2f}x ({low:.2f}-{high:.2f}) |")


if __name__ == "__main__":
    main()
