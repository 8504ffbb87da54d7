"""A store at scale: load, disk, compaction and every canned query, at sizes the other benchmarks cannot hold in memory.

    .venv/bin/python bench/bench_scale.py [--lm-calls 100000 1000000] [--workdir DIR] [--runs 5]
    .venv/bin/python bench/bench_scale.py --store DIR|URL [--runs 5] [--from-triples]   # a store loaded already

Workload: the JSONL files of distinct real DSPy traces that ``bench_store.py`` writes (the same generator, cached in
``--workdir``). Per size, in a fresh embedded store on disk under ``--workdir``:

- load: ``TraceStore.put`` of the file read as it streams (``read_traces``), the default batches, no compaction;
  triples per second, the process's peak RSS before and after;
- disk: the store's size on disk after the load, and after ``optimize`` (RocksDB's compaction, which ``dspy-rdf
  export`` runs after loading 1 M triples or more), with the compaction's time; bytes per triple stored;
- queries: every canned query with its default parameters on the compacted store opened read-only, its first run
  and the median of ``--runs`` more; the figure the targets name is the larger of the two. ``stats`` is timed the
  same way: as users run it (over the ledger while it is current) and, with ``--from-triples``, read from every
  trace (the path of a store whose ledger is not current).

``--store`` times the queries and ``stats`` on a store loaded already: a directory, or a server's URL (its
credentials from the ``DSPY_RDF_STORE_*`` variables, as for ``dspy-rdf``).

The store is removed afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import workload  # noqa: E402  (the same workload files)

from dspy_rdf.analytics.catalog import list_queries, run_query  # noqa: E402
from dspy_rdf.inputs import read_traces  # noqa: E402
from dspy_rdf.store import open_store  # noqa: E402
from dspy_rdf.store.embedded import EmbeddedStore  # noqa: E402


def disk_bytes(path: Path) -> int:
    """The bytes the files under ``path`` take on disk (allocated blocks, as ``du`` counts them)."""
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def first_and_median(run: Callable[[], int], runs: int) -> tuple[int, float, float]:
    """What ``run`` returns (a count of rows) and the seconds of its first run and the median of ``runs`` more."""
    start = time.perf_counter()
    rows = run()
    first = time.perf_counter() - start
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return rows, first, statistics.median(times) if times else first


def time_queries(target: str | Path, runs: int, *, from_triples: bool = False) -> None:
    """``stats`` and every canned query with its default parameters on the store at ``target`` (read-only): its
    first run and the median of ``runs`` more, as a Markdown table."""
    print("| query | rows | first run s | median of the next s | larger |\n|---|---:|---:|---:|---:|", flush=True)
    with open_store(target, read_only=True) as store:
        slowest = 0.0
        timed: list[tuple[str, Callable[[], int]]] = [("`stats`", lambda: len(store.stats()))]
        if from_triples:
            timed.append(("`stats`, from every trace", lambda: len(store.stats(from_triples=True))))
        timed += [(query.name, lambda name=query.name: len(run_query(store, name).records())) for query in list_queries()]
        for name, run in timed:
            rows, first, median = first_and_median(run, runs)
            if not name.startswith("`"):
                slowest = max(slowest, first, median)
            print(f"| {name} | {rows} | {first:.2f} | {median:.2f} | {max(first, median):.2f} |", flush=True)
    print(f"slowest canned query: {slowest:.2f} s; peak RSS of this process {peak_rss_mb():,.0f} MB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm-calls", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--workdir", type=Path, default=Path(".bench"))
    parser.add_argument("--runs", type=int, default=5, help="runs of each query after the first")
    parser.add_argument("--keep", action="store_true", help="keep the stores")
    parser.add_argument("--store", help="time the queries on this store (a directory or a server's URL, loaded already) only")
    parser.add_argument("--from-triples", action="store_true", help="time stats read from every trace too")
    args = parser.parse_args()
    if args.store is not None:
        local = "://" not in args.store
        target: str | Path = Path(args.store) if local else args.store
        with open_store(target, read_only=True) as store:
            triples = store.stats()["triples"]
        size = disk_bytes(Path(args.store)) if local else 0
        on_disk = f", {size / 1e9:,.2f} GB on disk ({size / triples:,.0f} B/triple)" if local else ""
        print(f"{args.store}: {triples:,} triples{on_disk}", flush=True)
        time_queries(target, args.runs, from_triples=args.from_triples)
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"python {platform.python_version()}, {os.cpu_count()} cores", flush=True)
    for size in sorted(args.lm_calls):
        path, n_traces, n_calls = workload(size, args.workdir)
        target = args.workdir / f"scale-store-{size}"
        shutil.rmtree(target, ignore_errors=True)
        print(f"\n# {n_calls:,} LM calls, {n_traces:,} traces, {path.stat().st_size / 1e6:,.0f} MB of JSONL", flush=True)
        rss_before = peak_rss_mb()
        with EmbeddedStore(target) as store:
            start = time.perf_counter()
            report = store.put(item.trace for item in read_traces(path) if item.trace is not None)
            load = time.perf_counter() - start
            triples = report.triples
            print(f"load: {load:,.1f} s, {triples:,} triples, {triples / load:,.0f} triples/s; peak RSS {rss_before:,.0f} -> {peak_rss_mb():,.0f} MB", flush=True)
            loaded = disk_bytes(target)
            start = time.perf_counter()
            store.optimize()
            compaction = time.perf_counter() - start
        compacted = disk_bytes(target)
        per_million = 1e6 / triples
        print(f"disk: {loaded / 1e9:,.2f} GB after the load ({loaded / triples:,.0f} B/triple), {compacted / 1e9:,.2f} GB "
              f"after compaction ({compacted / triples:,.0f} B/triple, {compacted * per_million / 1e6:,.0f} MB per M triples), "
              f"compaction {compaction:,.1f} s", flush=True)  # fmt: skip
        time_queries(target, args.runs, from_triples=True)
        if not args.keep:
            shutil.rmtree(target, ignore_errors=True)


if __name__ == "__main__":
    main()
