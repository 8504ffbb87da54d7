"""Benchmark of exports to real SPARQL servers: ``RemoteStore.put`` into a local ``oxigraph serve`` and a local
Virtuoso 7, each write method, against each server's own bulk load of the same N-Quads, in one run.

    .venv/bin/python bench/bench_remote.py [--traces 1500] [--repeat 3] [--workdir DIR] [--revision REV]

Workload: the first ``--traces`` traces of the store benchmark's JSONL at 10k LM calls (``bench/bench_store.py``'s
generator, cached in ``--workdir``;
real DSPy traces copied with identity-neutral changes), read and encoded once. Each measurement writes every trace
into an empty server (the servers are started by ``tests/servers.py`` on 127.0.0.1, each in a temporary directory)
and is the median of ``--repeat`` runs; peak memory is the Python allocations' peak during one more write, measured
(tracemalloc) in that run only, since tracing slows every allocation.
Reference: the server's own bulk load of the same N-Quads file (``oxigraph load``; Virtuoso's ``ld_dir`` +
``rdf_loader_run()``), and the first way of writing (one ``PUT`` per trace, one at a time) with today's code. With
``--revision``, the same ``put`` of that git revision of dspy-rdf too (its ``src`` from ``git archive``, in a process
of its own, timed the same way), so that a speed-up is measured against the code it replaces on the same machine.
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

sys.path.insert(0, str(ROOT / "bench"))

from bench_store import workload  # noqa: E402  (the same workload files)
from servers import Server, oxigraph_command, start_oxigraph, start_virtuoso  # noqa: E402

from dspy_rdf.canonical.identity import DEFAULT_BASE  # noqa: E402
from dspy_rdf.inputs import read_traces  # noqa: E402
from dspy_rdf.store import EncodedTrace, encode_traces  # noqa: E402
from dspy_rdf.store.remote import RemoteStore, WriteMethod  # noqa: E402


class OneRequestAtATime(RemoteStore):
    """The first way of writing to a server: one trace per request, one request at a time (the reference rate)."""

    writer_threads = 1


def empty_server(url: str, env: dict[str, str]) -> None:
    """Drop every trace graph of the server, so that a ``put`` writes every trace."""
    import os

    os.environ.update(env)
    with RemoteStore(url, max_attempts=2) as store:
        names = store.trace_iris()
        for start in range(0, len(names), 500):
            store.update(" ;\n".join(f"DROP SILENT GRAPH <{n}>" for n in names[start:start + 500]))


def timed_put(
    url: str, env: dict[str, str], traces: list, write: WriteMethod, store_class: type = RemoteStore, *, trace_memory: bool = False
) -> float:
    """Seconds of one ``put`` of every trace into an empty server or, with ``trace_memory``, the peak MiB of Python
    allocations during it (a separate run: tracemalloc slows every allocation, so it never runs in a timed one)."""
    empty_server(url, env)
    with store_class(url, write=write, max_attempts=2) as store:
        if trace_memory:
            tracemalloc.start()
        started = time.perf_counter()
        report = store.put(traces)
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] / 2**20 if trace_memory else 0.0
        tracemalloc.stop()
        assert not report.failed and len(report.written) == len(traces), report.failed[:3]
    return peak if trace_memory else seconds


REVISION_PUT = """
import itertools, sys, time
from dspy_rdf.inputs import read_traces
from dspy_rdf.store.remote import RemoteStore
source, count, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
traces = [item.trace for item in itertools.islice(read_traces(source), count)]
with RemoteStore(url, max_attempts=2) as store:
    started = time.perf_counter()
    report = store.put(traces)
    seconds = time.perf_counter() - started
    assert not report.failed and len(report.written) == len(traces), report.failed[:3]
print(seconds)
"""


def revision_put(revision_src: Path, source: Path, count: int, url: str, env: dict[str, str]) -> float:
    """Seconds of one ``put`` of the same traces into the emptied server with another revision's code (its ``src``),
    in a process of its own."""
    import os

    empty_server(url, env)
    done = subprocess.run(
        [sys.executable, "-c", REVISION_PUT, str(source), str(count), url],
        env={**os.environ, **env, "PYTHONPATH": str(revision_src)}, check=True, capture_output=True, text=True,
    )
    return float(done.stdout.split()[-1])


def oxigraph_bulk(nquads: Path, work: Path) -> float:
    target = work / "bulk-oxigraph"
    shutil.rmtree(target, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run([oxigraph_command(), "load", "--location", str(target), "--file", str(nquads)], check=True, capture_output=True)
    return time.perf_counter() - started


def virtuoso_bulk(server: Server, nquads: Path) -> float:
    folder = server.directory / "load"
    folder.mkdir(exist_ok=True)
    shutil.copy(nquads, folder / "traces.nq")
    server.isql("SPARQL CLEAR GRAPH <urn:none>;")  # warm the SQL connection
    started = time.perf_counter()
    server.isql(f"ld_dir('{folder}', 'traces.nq', 'urn:dspy-rdf:unused'); rdf_loader_run(); checkpoint;")
    seconds = time.perf_counter() - started
    server.isql("DELETE FROM DB.DBA.load_list;")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="where the workload file is cached (default: a temp dir)")
    parser.add_argument(
        "--revision", default=None,
        help="also measure the put of this git revision of dspy-rdf (e.g. a release tag) on the same servers and traces",
    )
    args = parser.parse_args()
    if args.workdir is None:
        args.workdir = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    args.workdir.mkdir(parents=True, exist_ok=True)
    source, _, _ = workload(10_000, args.workdir)
    traces = [item.trace for item in itertools.islice(read_traces(source), args.traces)]
    encoded = [e for e in encode_traces(traces, base=DEFAULT_BASE) if isinstance(e, EncodedTrace)]
    triples = sum(e.triples for e in encoded)
    rows: list[tuple[str, str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        nquads = work / "traces.nq"
        nquads.write_bytes(b"".join(e.data for e in encoded))
        revision_src = None
        if args.revision:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.revision, "src"], check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)
            revision_src = work / "src"
        servers = [("oxigraph serve", start_oxigraph(work / "oxigraph")), ("Virtuoso 7", start_virtuoso(work / "virtuoso", buffers=100_000))]
        try:
            for name, server in servers:
                methods = [WriteMethod.QUADS, WriteMethod.GRAPH] if name.startswith("oxigraph") else [WriteMethod.GRAPH, WriteMethod.UPDATE]
                ways = [(f"put, {m.value}", m, RemoteStore) for m in methods]
                ways.append(("one PUT per trace, one at a time (the first way; the reference)", WriteMethod.GRAPH, OneRequestAtATime))
                for how, method, store_class in ways:
                    seconds = statistics.median(timed_put(server.url, server.env, traces, method, store_class) for _ in range(args.repeat))
                    peak = timed_put(server.url, server.env, traces, method, store_class, trace_memory=True)
                    rows.append((name, how, triples / seconds, peak))
                    print(rows[-1], flush=True)
                if revision_src is not None:
                    seconds = statistics.median(
                        revision_put(revision_src, source, args.traces, server.url, server.env) for _ in range(args.repeat)
                    )
                    rows.append((name, f"put of revision {args.revision}", triples / seconds, float("nan")))
                    print(rows[-1], flush=True)
                if name.startswith("oxigraph"):
                    bulk = statistics.median(oxigraph_bulk(nquads, work) for _ in range(args.repeat))
                    rows.append((name, "server's bulk load (oxigraph load)", triples / bulk, float("nan")))
                else:
                    bulk = statistics.median(virtuoso_bulk(server, nquads) for _ in range(args.repeat))
                    rows.append((name, "server's bulk load (ld_dir + rdf_loader_run)", triples / bulk, float("nan")))
                print(rows[-1], flush=True)
        finally:
            for _, server in servers:
                server.stop()
    print(f"\n{len(encoded)} traces, {triples} triples, median of {args.repeat}\n")
    print("| server | how | triples/s | peak MiB (Python) |\n|---|---|---:|---:|")
    for server_name, how, rate, peak in rows:
        print(f"| {server_name} | {how} | {rate:,.0f} | {'' if peak != peak else f'{peak:.0f}'} |")


if __name__ == "__main__":
    main()
