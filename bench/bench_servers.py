"""The embedded store, ``oxigraph serve`` and Virtuoso 7 side by side on the same traces: the load as users run it
and every canned query, in one run.

    .venv/bin/python bench/bench_servers.py [--lm-calls 10000] [--runs 3] [--buffers 400000] [--workdir DIR]
        [--embedded DIR] [--skip oxigraph virtuoso-put]

Workload: the JSONL file of distinct real DSPy traces that ``bench_store.py`` writes at ``--lm-calls`` (the same
generator, cached in ``--workdir``). Each server is started by ``tests/servers.py`` on 127.0.0.1 in a temporary
directory. Loads, each one command timed from its start to its exit:

- embedded (the baseline): ``dspy-rdf export FILE --store DIR`` (compaction included), or a store of the workload
  loaded before (``--embedded DIR``: at 1M LM calls its load is bench_export.py's business);
- ``oxigraph serve``: ``dspy-rdf export FILE --store URL`` (N-Quads ``POST`` s to its bulk loader);
- Virtuoso: ``dspy-rdf export FILE --store URL`` (a Graph Store ``PUT`` per trace, four at once);
- Virtuoso's bulk loader, where the server shares a file system with the exporter, into a second Virtuoso:
  ``dspy-rdf dump --store DIR --with-ledger -o traces.nq`` of the embedded store (its traces and the ledger the
  canned queries read), then ``ld_dir`` + ``rdf_loader_run()`` + ``checkpoint``.

Then every canned query with its default parameters on each store, in-process (``run_query``, HTTP included for the
servers): its first run and the median of ``--runs`` more (a query whose first run takes over ``--slow`` seconds is
not repeated). Every store must give the embedded store's rows; a difference is printed and marked in the table.
Virtuoso gets ``--buffers`` pages of 8 KB (Virtuoso's advice is about two thirds of the memory it may use).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_store import workload  # noqa: E402  (the same workload files)
from servers import Server, ServerUnavailable, start_oxigraph, start_virtuoso  # noqa: E402

from dspy_rdf.analytics import list_queries, run_query  # noqa: E402
from dspy_rdf.store import EmbeddedStore, StoreError, open_store  # noqa: E402

CLI = [sys.executable, "-m", "dspy_rdf.cli"]


@contextmanager
def environment(env: dict[str, str]):
    """The process environment with ``env`` added (a server's credentials), as a command run in a shell would see it."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    """Seconds of one command, from its start to its exit, and its last line of output (it must succeed)."""
    started = time.perf_counter()
    done = subprocess.run(command, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited with {done.returncode}: {(done.stderr or done.stdout)[-500:]}")
    lines = (done.stdout + done.stderr).strip().splitlines()
    return seconds, lines[-1] if lines else ""


def virtuoso_bulk_load(server: Server, nquads: Path) -> float:
    """Seconds of Virtuoso's own bulk loader reading ``nquads`` (a file in a directory the server may read)."""
    folder = server.directory / "load"
    folder.mkdir(exist_ok=True)
    target = folder / nquads.name
    shutil.move(nquads, target)
    server.isql("SPARQL CLEAR GRAPH <urn:none>;")  # warm the SQL connection
    started = time.perf_counter()
    server.isql(f"ld_dir('{folder}', '{target.name}', 'urn:dspy-rdf:unused'); rdf_loader_run(); checkpoint;", timeout=7200)
    seconds = time.perf_counter() - started
    target.unlink()
    return seconds


def time_queries(name: str, store, runs: int, slow: float, expected: dict[str, list] | None) -> dict[str, tuple]:
    """Each canned query's (rows, first run, median of ``runs`` more or None, whether its rows are the expected), and
    under ``""`` the store's count of triples in its trace graphs."""
    started = time.perf_counter()
    try:
        out: dict[str, tuple] = {"": (store.stats()["triples"],)}
        print(f"  {name:<24} {'stats':<28} {time.perf_counter() - started:7.2f} s", flush=True)
    except StoreError as exc:  # stats reads every trace: a server may not answer it in time; the queries still run
        print(f"  {name:<24} stats failed after {time.perf_counter() - started:.0f} s: {str(exc)[:300]}", flush=True)
        out = {"": (None,)}
    if expected is not None and out[""][0] is not None and out[""][0] != expected[""]:
        print(f"  {name}: {out[''][0]:,} triples in trace graphs against {expected['']:,} in the embedded store", flush=True)
    for query in list_queries():
        started = time.perf_counter()
        try:
            result = run_query(store, query.name)
        except (StoreError, ValueError) as exc:  # a server that refuses a query: said in the table, the others still run
            print(f"  {name:<24} {query.name:<28} refused: {str(exc)[:300]}", flush=True)
            out[query.name] = (None, time.perf_counter() - started, None, False)
            continue
        first = time.perf_counter() - started
        times = []
        if first <= slow:
            for _ in range(runs):
                started = time.perf_counter()
                run_query(store, query.name)
                times.append(time.perf_counter() - started)
        same = expected is None or expected[query.name] is None or result.rows == expected[query.name]  # None: refused there
        if not same:
            print(f"  {name}: {query.name} differs from the embedded store: {result.rows[:2]} against {expected[query.name][:2]}", flush=True)
        out[query.name] = (result.rows, first, statistics.median(times) if times else None, same)
        median = f"{out[query.name][2]:.2f}" if times else "-"
        print(f"  {name:<24} {query.name:<28} {len(result.rows):>5} rows  {first:7.2f} s  {median:>6} s", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm-calls", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="runs of each query after the first")
    parser.add_argument("--slow", type=float, default=60.0, help="a query whose first run takes longer is not repeated")
    parser.add_argument("--buffers", type=int, default=400_000, help="Virtuoso's NumberOfBuffers (8 KB pages)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the workload file is cached (default: a temp dir)")
    parser.add_argument(
        "--embedded", type=Path, default=None,
        help="an embedded store of the workload loaded before (its load is then not timed; its queries are)",
    )
    parser.add_argument(
        "--skip", nargs="+", default=[], choices=["oxigraph", "virtuoso-put"],
        help="leave out oxigraph serve, or the export into Virtuoso by Graph Store PUTs (its bulk loader stays)",
    )
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-servers-"))
    workdir.mkdir(parents=True, exist_ok=True)
    source, n_traces, n_calls = workload(args.lm_calls, workdir)
    print(f"{n_calls:,} LM calls, {n_traces:,} traces, {source.stat().st_size / 1e6:.0f} MB of JSONL", flush=True)
    loads: list[tuple[str, str, float, str]] = []
    queries: dict[str, dict[str, tuple]] = {}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        work = Path(tmp)
        embedded = args.embedded or work / "embedded"
        if args.embedded is None:
            seconds, last = timed([*CLI, "export", str(source), "--store", str(embedded)])
            loads.append(("embedded", "`dspy-rdf export FILE --store DIR` (baseline)", seconds, last))
            print(loads[-1], flush=True)
        with EmbeddedStore(embedded, read_only=True) as store:
            queries["embedded"] = time_queries("embedded", store, args.runs, args.slow, None)
        expected = {name: figures[0] for name, figures in queries["embedded"].items()}
        triples = expected[""]
        servers: list[Server] = []
        try:
            if "oxigraph" not in args.skip:
                oxigraph = start_oxigraph(work / "oxigraph")
                servers.append(oxigraph)
                seconds, last = timed([*CLI, "export", str(source), "--store", oxigraph.url])
                loads.append(("oxigraph serve", "`dspy-rdf export FILE --store URL`", seconds, last))
                print(loads[-1], flush=True)
                with open_store(oxigraph.url) as store:
                    queries["oxigraph serve"] = time_queries("oxigraph serve", store, args.runs, args.slow, expected)
                oxigraph.stop()
            try:
                virtuoso = start_virtuoso(work / "virtuoso", buffers=args.buffers)
            except ServerUnavailable as exc:
                print(f"Virtuoso skipped: {exc}", flush=True)
            else:
                servers.append(virtuoso)
                if "virtuoso-put" not in args.skip:
                    seconds, last = timed([*CLI, "export", str(source), "--store", virtuoso.url], virtuoso.env)
                    loads.append(("Virtuoso 7", "`dspy-rdf export FILE --store URL`", seconds, last))
                    print(loads[-1], flush=True)
                    with environment(virtuoso.env), open_store(virtuoso.url) as store:
                        queries["Virtuoso 7"] = time_queries("Virtuoso 7", store, args.runs, args.slow, expected)
                virtuoso.stop()
                bulk = start_virtuoso(work / "virtuoso-bulk", buffers=args.buffers)
                servers.append(bulk)
                nquads = work / "traces.nq"
                seconds, last = timed([*CLI, "dump", "--store", str(embedded), "--with-ledger", "-o", str(nquads)])
                loads.append(("Virtuoso 7, bulk loader", "`dspy-rdf dump --store DIR --with-ledger -o traces.nq`", seconds, last))
                seconds = virtuoso_bulk_load(bulk, nquads)
                loads.append(("Virtuoso 7, bulk loader", "`ld_dir` + `rdf_loader_run()` + `checkpoint`", seconds, ""))
                for row in loads[-2:]:
                    print(row, flush=True)
                with environment(bulk.env), open_store(bulk.url) as store:
                    if not store.ledger_is_current():
                        raise SystemExit("the bulk-loaded Virtuoso's ledger does not cover every trace")
                    queries["Virtuoso 7, bulk loaded"] = time_queries("Virtuoso 7, bulk loaded", store, args.runs, args.slow, expected)
        finally:
            for server in servers:
                server.stop()
    print(f"\n{n_calls:,} LM calls, {n_traces:,} traces, {triples:,} triples; queries: first run, median of {args.runs} more\n")
    print("| store | step | seconds | triples/s |\n|---|---|---:|---:|")
    for store_name, step, seconds, _ in loads:
        print(f"| {store_name} | {step} | {seconds:.1f} | {triples / seconds:,.0f} |")
    names = list(queries)
    print("\n| query | rows | " + " | ".join(names) + " |\n|---|---:|" + "---|" * len(names))
    print("| triples in trace graphs | | " + " | ".join(f"{queries[name][''][0]:,}" if queries[name][""][0] is not None else "stats failed" for name in names) + " |")
    for query_name, (rows, *_) in queries["embedded"].items():
        if not query_name:
            continue
        cells = []
        for name in names:
            got, first, median, same = queries[name][query_name]
            cell = f"{first:.2f}, {median:.2f}" if median is not None else f"{first:.2f}, -"
            cells.append("refused" if got is None else cell if same else cell + " (rows differ)")
        print(f"| `{query_name}` | {len(rows) if rows is not None else '-'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
