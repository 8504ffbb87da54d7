"""Benchmark of the trace store: export+load throughput and canned-query latency, measured in one run.

    .venv/bin/python bench/bench_store.py [--lm-calls 10000 100000] [--repeat 3] [--repeat-large 1]
                                          [--skip-rdflib] [--workdir DIR] [--queries DIR]

Workload: real DSPy traces (the bundled DSPy 3.3.1 traces that hold LM calls, the real history fixtures
``tests/data/history_dicts_dspy3.3.1.json`` and ``tests/data/react_history.json``, and program runs recorded by the
capture callback: ``dspy.ReAct`` runs whose tools run, one of them failing), copied until the wanted number of LM
calls is reached. Each copy differs only in identity-neutral values: every entry gets a new ``uuid``, a
``timestamp`` spread over 30 days, and one of three model names; a program run's calls move with it, and each tool
execution gets a latency drawn from a log-normal distribution (median 0.14 s); so each copy is a distinct trace
(trace IRIs are content hashes). The copies are written once as a JSONL file of DSPy JSON (``trace_to_json``),
cached in ``--workdir``, and every measurement starts from that file: "from DSPy JSON to committed quads".

Measured for each size, as medians over ``--repeat`` runs (``--repeat-large`` for sizes above 20k LM calls), each
store a fresh directory on disk:

- phases, separately: JSON text -> canonical model (``read_traces``), model -> N-Quads bytes (``encode_traces``),
  and store commit of the already encoded traces (``TraceStore.put`` with encoding taken out) in three modes, all
  atomic per batch of whole traces: the default (transactions for small batches, pyoxigraph's atomic bulk loader
  for large ones), ``transactions only`` (every batch one ``Store.load`` transaction: the
  default before pyoxigraph's bulk loader was found to be atomic) and ``bulk`` (``--bulk``: the bulk loader always);
- end to end: ``put(read_traces(file))`` followed by ``close()`` (flush), in the same three modes;
- reference: pyoxigraph's own ``bulk_load`` of the whole N-Quads at once (no per-trace anything);
- the latency of every canned query in ``src/dspy_rdf/analytics/queries/*.rq`` (whatever files exist when run), on the
  embedded store written by the first default end-to-end run, compacted first as ``dspy-rdf export`` does
  after a large export (``compact``, timed separately; first run and median of the next five), and on rdflib's
  in-memory ``Dataset`` holding the same N-Quads (median of three), with the row counts of both as a sanity check. rdflib is skipped at a size when the
  run's own smaller-size figures predict it would take more than ``--rdflib-budget`` seconds.

Throughputs are triples (quads) per second. The final tables are printed in Markdown.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyoxigraph as ox

import dspy_rdf
import dspy_rdf.store.base as store_base
import dspy_rdf.store.embedded as store_embedded
from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.identity import DEFAULT_BASE
from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.inputs import read_traces
from dspy_rdf.sources.tracejson import trace_from_json, trace_to_json
from dspy_rdf.store import EmbeddedStore, encode_traces

ROOT = Path(__file__).resolve().parents[1]
QUERIES = Path(dspy_rdf.__file__).parent / "analytics" / "queries"
FIXTURES = ("history_dicts_dspy3.3.1.json", "react_history.json")
MODELS = ("openai/gpt-4o-mini", "anthropic/claude-3-5-haiku", "scripted/typed-lm")
START = datetime(2026, 10, 23, 8, 0, 0)
GENERATOR_VERSION = 3  # 3: every copy of a program run has DSPy call ids of its own (a run's identity)


# --- workload ----------------------------------------------------------------------------------------------


def program_runs() -> list:
    """Program runs recorded by the capture callback: ``dspy.ReAct`` runs (DSPy's ``DummyLM``) that search, look up
    (a failing tool) and calculate before they finish."""
    import dspy
    from dspy.utils import DummyLM

    from dspy_rdf.capture.recorder import MemorySink, TraceRecorder

    def search(query: str) -> str:
        """Search the web."""
        return f"results for {query}"

    def lookup(key: str) -> str:
        """Look a key up in the company wiki."""
        raise KeyError(key)

    def calculate(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return str(sum(int(term) for term in expression.split("+")))

    sink = MemorySink()
    recorder = TraceRecorder(sink)
    for n in range(3):
        steps = [
            {"next_thought": "Search first.", "next_tool_name": "search", "next_tool_args": {"query": f"topic {n}"}},
            {"next_thought": "Look it up.", "next_tool_name": "lookup", "next_tool_args": {"key": f"k{n}"}},
            {"next_thought": "Add.", "next_tool_name": "calculate", "next_tool_args": {"expression": f"{n}+2"}},
            {"next_thought": "Done.", "next_tool_name": "finish", "next_tool_args": {}},
            {"reasoning": "Found it.", "answer": str(n + 2)},
        ]
        with dspy.context(lm=DummyLM(steps), callbacks=[recorder]):
            dspy.ReAct("question -> answer", tools=[search, lookup, calculate])(question=f"question {n}?")
    recorder.close()
    if recorder.errors or len(sink.traces) != 3:
        raise SystemExit(f"recording the program runs failed: {recorder.errors}")
    return sink.traces


def templates() -> list:
    out = [item.trace for item in read_traces(bundled_traces_path()) if item.trace is not None and item.trace.entries]
    for name in FIXTURES:
        with (ROOT / "tests" / "data" / name).open() as handle:
            out.append(trace_from_json(json.load(handle)))
    return out + program_runs()


def lm_call_count(trace) -> int:
    """The LM calls a trace holds: its history entries, or the LM calls of a program run."""
    return len(trace.entries) + sum(isinstance(call, m.LMCall) for call in trace.calls)


def renewed(entry, model: str, timestamp: str, rng: random.Random):
    """A copy of a history entry with a new uuid, ``timestamp`` and the request's ``model``."""
    request = dataclasses.replace(entry.request, model=model)
    return dataclasses.replace(entry, request=request, uuid=str(uuid.UUID(int=rng.getrandbits(128), version=4)), timestamp=timestamp)


def vary_run(trace, rng: random.Random):
    """A copy of the program run ``trace`` moved to a random start within 30 days, whose calls have new DSPy call ids
    (a run is identified by its top-level call's id, so copies must not share them), whose LM calls have new uuids and
    one of three models, and whose tool executions take log-normally distributed times."""
    when = START.replace(tzinfo=timezone.utc) + timedelta(seconds=rng.uniform(0, 30 * 86400))
    origin = datetime.fromisoformat(trace.started_at)

    def moved(stamp):
        return None if stamp is None else (when + (datetime.fromisoformat(stamp) - origin)).isoformat()

    model = rng.choice(MODELS)
    calls = []
    for call in trace.calls:
        changes = {"started_at": moved(call.started_at), "ended_at": moved(call.ended_at)}
        if call.dspy_call_id is not None:
            changes["dspy_call_id"] = f"{rng.getrandbits(128):032x}"
        if isinstance(call, m.ToolExecution) and call.ended_at is not None:
            began = datetime.fromisoformat(changes["started_at"])
            changes["ended_at"] = (began + timedelta(seconds=round(rng.lognormvariate(-2.0, 1.2), 6))).isoformat()
        if isinstance(call, m.LMCall) and call.entry is not None:
            changes["model"] = model
            changes["entry"] = renewed(call.entry, model, changes["started_at"][:26], rng)
        calls.append(dataclasses.replace(call, **changes))
    return dataclasses.replace(trace, calls=calls, started_at=moved(trace.started_at), ended_at=moved(trace.ended_at), source_index=None)


def vary(trace, rng: random.Random):
    """A copy of ``trace`` whose entries have new uuids, timestamps (within 30 days) and one of three models."""
    if trace.calls:
        return vary_run(trace, rng)
    when = START + timedelta(seconds=rng.uniform(0, 30 * 86400))
    model = rng.choice(MODELS)
    entries = []
    for entry in trace.entries:
        when += timedelta(seconds=rng.uniform(0.2, 5.0))
        entries.append(renewed(entry, model, when.isoformat(), rng))
    return dataclasses.replace(trace, entries=entries, source_index=None)


DISTINCT_ARGUMENTS = (("Paris", "Paris#{n}"), ("topic ", "topic {n}-"), ("+2", "+2+{n}"), ('"k0"', '"k0#{n}"'), ('"k1"', '"k1#{n}"'), ('"k2"', '"k2#{n}"'))
"""What ``distinct_arguments`` replaces in each line of the workload: every tool argument its templates hold (the city,
the search topic, the sum, the wiki key), with ``{n}`` the line's number."""


def workload(lm_calls: int, workdir: Path, *, distinct_arguments: bool = False) -> tuple[Path, int, int]:
    """The JSONL file of distinct traces holding at least ``lm_calls`` LM calls (cached); its trace and LM call counts.
    ``distinct_arguments``: each trace's tool arguments are its own (its line number put into each value), as free
    text an agent writes would be, rather than one of the templates' few."""
    path = workdir / f"traces_{lm_calls}_v{GENERATOR_VERSION}{'_distinct' if distinct_arguments else ''}.jsonl"
    meta = path.with_suffix(".meta.json")
    if path.exists() and meta.exists():
        counts = json.loads(meta.read_text())
        return path, counts["traces"], counts["lm_calls"]
    rng = random.Random(lm_calls)
    bases = templates()
    traces = calls = 0
    with path.open("w", encoding="utf-8") as handle:
        while calls < lm_calls:
            trace = vary(bases[traces % len(bases)], rng)
            line = json.dumps(trace_to_json(trace), ensure_ascii=False, separators=(",", ":"))
            if distinct_arguments:
                for old, new in DISTINCT_ARGUMENTS:
                    line = line.replace(old, new.format(n=traces))
            handle.write(line)
            handle.write("\n")
            traces += 1
            calls += lm_call_count(trace)
    meta.write_text(json.dumps({"traces": traces, "lm_calls": calls}))
    return path, traces, calls


# --- helpers -----------------------------------------------------------------------------------------------


def rss_mb() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Dirs:
    """Fresh store directories under one temporary directory on disk, removed after use."""

    def __init__(self, workdir: Path) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="stores-", dir=workdir))
        self.n = 0

    def fresh(self) -> Path:
        self.n += 1
        return self.root / f"s{self.n}"

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def pre_encoded(traces: list, encoded: list):
    """Within: ``TraceStore.put`` takes the IRI and N-Quads of each trace from ``encoded`` (made from ``traces``, in
    the same order) instead of computing them (commit only)."""
    by_trace = {id(trace): item for trace, item in zip(traces, encoded, strict=True)}
    originals = store_base.stored_form, store_base.encode_trace_figures
    store_base.stored_form = lambda trace, **options: (by_trace[id(trace)].iri, trace, "")  # (IRI, trace, digest)
    store_base.encode_trace_figures = lambda trace, **options: (by_trace[id(trace)].data, by_trace[id(trace)].figures)
    try:
        yield
    finally:
        store_base.stored_form, store_base.encode_trace_figures = originals


@contextlib.contextmanager
def transactions_only():
    """Within: every embedded batch is one ``Store.load`` transaction, whatever its size."""
    original = store_embedded._BULK_MIN_TRIPLES
    store_embedded._BULK_MIN_TRIPLES = float("inf")
    try:
        yield
    finally:
        store_embedded._BULK_MIN_TRIPLES = original


MODES = {"default": ({}, contextlib.nullcontext), "transactional": ({}, transactions_only), "bulk": ({"bulk": True}, contextlib.nullcontext)}
"""Store write modes measured: ``put`` options, and a context to run it in."""


def timed(fn):
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def parse_file(path: Path) -> list:
    items = list(read_traces(path))
    bad = [item.error for item in items if item.error is not None]
    if bad:
        raise SystemExit(f"{len(bad)} traces could not be read, e.g. {bad[0]}")
    return [item.trace for item in items]


def put_into(target: Path, traces, *, batch_triples: int, bulk: bool = False):
    store = EmbeddedStore(target)
    report = store.put(traces, bulk=bulk, batch_triples=batch_triples)
    store.close()
    return report


def sparql_rows(result) -> int:
    return len(result["results"]["bindings"]) if "results" in result else 1


# --- one size ------------------------------------------------------------------------------------------------


def run_size(lm_calls: int, args, dirs: Dirs, queries: list[Path], rdflib_rate: dict) -> dict:
    path, n_traces, n_calls = workload(lm_calls, args.workdir, distinct_arguments=args.distinct_arguments)
    repeat = args.repeat if lm_calls <= 20_000 else args.repeat_large
    print(f"\n# {n_calls:,} LM calls in {n_traces:,} traces ({path.stat().st_size / 1e6:.1f} MB of JSONL), {repeat} repeat(s)", flush=True)
    times: dict[str, list[float]] = {}

    def note(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)
        print(f"  {name:<28} {seconds:8.2f} s", flush=True)

    triples = 0
    nquads = b""
    for r in range(repeat):
        print(f" repeat {r + 1}", flush=True)
        seconds, traces = timed(lambda: parse_file(path))
        note("parse", seconds)
        seconds, encoded = timed(lambda: list(encode_traces(traces, base=DEFAULT_BASE)))
        note("encode", seconds)
        if len(encoded) != n_traces:
            raise SystemExit(f"expected {n_traces} distinct traces, got {len(encoded)} (copies are not distinct)")
        triples = sum(e.triples for e in encoded)
        for name, (options, context) in ((n, MODES[n]) for n in args.modes):
            with pre_encoded(traces, encoded), context():
                seconds, report = timed(lambda: put_into(dirs.fresh(), traces, batch_triples=args.batch_triples, **options))
            assert report.triples == triples and not report.failed
            note(f"commit {name}", seconds)
        if r == 0:
            nquads = b"".join(e.data for e in encoded)
        del traces, encoded
        for name, (options, context) in ((n, MODES[n]) for n in args.modes):
            target = dirs.fresh()
            with context():
                seconds, report = timed(
                    lambda: put_into(target, (item.trace for item in read_traces(path)), batch_triples=args.batch_triples, **options)
                )
            assert report.triples == triples and len(report.written) == n_traces and not report.failed
            note(f"end to end {name}", seconds)
            if r == 0 and name == args.modes[0]:
                query_store = target
            else:
                shutil.rmtree(target, ignore_errors=True)

        def raw_bulk() -> None:
            store = ox.Store(str(dirs.fresh()))
            store.bulk_load(nquads, ox.RdfFormat.N_QUADS)
            store.flush()
            del store

        seconds, _ = timed(raw_bulk)
        note("pyoxigraph bulk_load, raw", seconds)

    # --- queries, embedded: on the store the default export wrote, compacted as `dspy-rdf export` does after
    # a large export
    store = EmbeddedStore(query_store)
    seconds, _ = timed(store.optimize)
    note("compact (optimize)", seconds)
    store.close()
    store = EmbeddedStore(query_store, read_only=True)
    stats = store.stats()
    assert stats["triples"] == triples, (stats, triples)
    query_times: dict[str, dict] = {}
    for qpath in queries:
        text = qpath.read_text()
        first, result = timed(lambda: store.select(text))
        runs = [timed(lambda: store.select(text))[0] for _ in range(5)]
        query_times[qpath.stem] = {"first": first, "median": statistics.median(runs), "rows": sparql_rows(result)}
        print(f"  query {qpath.stem:<30} first {first * 1000:8.1f} ms, median {statistics.median(runs) * 1000:8.1f} ms, {sparql_rows(result)} rows", flush=True)
    del store
    shutil.rmtree(query_store, ignore_errors=True)

    # --- queries, rdflib
    rdflib_note = None
    if args.skip_rdflib:
        rdflib_note = "skipped (--skip-rdflib)"
    else:
        predicted = rdflib_rate.get("seconds_per_triple", 0) * triples
        if predicted > args.rdflib_budget:
            rdflib_note = (
                f"not measured: this run's smaller size predicts {predicted / 60:.0f} min and "
                f"{rdflib_rate['mb_per_triple'] * triples / 1024:.1f} GB for rdflib at this size (budget {args.rdflib_budget / 60:.0f} min)"
            )
        else:
            rdflib_note = run_rdflib(nquads, triples, queries, query_times, rdflib_rate)
    print(f"  rdflib: {rdflib_note}", flush=True)
    del nquads
    gc.collect()

    med = {name: statistics.median(values) for name, values in times.items()}
    return {
        "lm_calls": n_calls,
        "traces": n_traces,
        "triples": triples,
        "bytes": path.stat().st_size,
        "repeat": repeat,
        "times": med,
        "spread": {name: (min(v), max(v)) for name, v in times.items()},
        "queries": query_times,
        "rdflib": rdflib_note,
    }


def run_rdflib(nquads: bytes, triples: int, queries: list[Path], query_times: dict, rdflib_rate: dict) -> str:
    import rdflib

    before = rss_mb()
    start = time.perf_counter()
    ds = rdflib.Dataset()
    ds.parse(data=nquads.decode("utf-8"), format="nquads")
    load = time.perf_counter() - start
    grew = rss_mb() - before
    print(f"  rdflib load {load:.1f} s, +{grew:.0f} MB RSS", flush=True)
    total = load
    for qpath in queries:
        text = qpath.read_text()
        runs = []
        rows = 0
        for _ in range(3):
            seconds, rows = timed(lambda: len(list(ds.query(text))))
            runs.append(seconds)
        total += sum(runs)
        query_times[qpath.stem]["rdflib"] = statistics.median(runs)
        query_times[qpath.stem]["rdflib_rows"] = rows
        print(f"  rdflib query {qpath.stem:<30} median {statistics.median(runs) * 1000:9.1f} ms, {rows} rows", flush=True)
    del ds
    gc.collect()
    rdflib_rate["seconds_per_triple"] = total / triples
    rdflib_rate["mb_per_triple"] = max(grew, 1) / triples
    return f"load {load:.1f} s, +{grew:,.0f} MB RSS"


# --- report ----------------------------------------------------------------------------------------------


def rate(triples: int, seconds: float) -> str:
    return f"{triples / seconds:,.0f}"


def markdown(results: list[dict], args) -> str:
    out = []
    sizes = " | ".join(f"{r['lm_calls']:,} LM calls ({r['triples']:,} triples)" for r in results)
    out.append("Throughput, triples/s (median; seconds in brackets):\n")
    out.append(f"| phase / mode | {sizes} |")
    out.append("|---|" + "---:|" * len(results))
    rows = [
        ("JSON text -> model (`read_traces`)", "parse"),
        ("model -> N-Quads bytes (`encode_traces`)", "encode"),
        ("store commit, default (atomic batches: bulk loader from 5k triples)", "commit default"),
        ("store commit, transactions only (every batch one `Store.load`)", "commit transactional"),
        ("store commit, `bulk`", "commit bulk"),
        ("**end to end, default** (JSON -> committed quads, atomic per batch)", "end to end default"),
        ("end to end, transactions only", "end to end transactional"),
        ("end to end, `--bulk`", "end to end bulk"),
        ("reference: pyoxigraph `bulk_load` of the whole N-Quads, raw", "pyoxigraph bulk_load, raw"),
        ("compaction after the export (`optimize`, once)", "compact (optimize)"),
    ]
    for label, key in rows:
        if key == "compact (optimize)":  # not a throughput: RocksDB decides how much there is to compact
            cells = [f"{r['times'][key]:.2f} s" if key in r["times"] else "" for r in results]
        else:
            cells = [f"{rate(r['triples'], r['times'][key])} ({r['times'][key]:.2f} s)" if key in r["times"] else "" for r in results]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Canned query latency, ms (embedded: median of 5 after a first run; rdflib `Dataset`: median of 3):\n")
    for r in results:
        out.append(f"{r['lm_calls']:,} LM calls, {r['triples']:,} triples; rdflib: {r['rdflib']}\n")
        out.append("| query | rows | embedded first | embedded median | rdflib median | rdflib / embedded |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for name, q in r["queries"].items():
            if "rdflib" in q:
                rd = f"{q['rdflib'] * 1000:,.1f}"
                ratio = f"{q['rdflib'] / q['median']:,.1f}x"
                if q["rdflib_rows"] != q["rows"]:
                    ratio += f" (rdflib gave {q['rdflib_rows']} rows)"
            else:
                rd = ratio = "—"
            out.append(f"| `{name}` | {q['rows']} | {q['first'] * 1000:,.1f} | {q['median'] * 1000:,.1f} | {rd} | {ratio} |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm-calls", type=int, nargs="+", default=[10_000, 100_000], help="workload sizes, in LM calls")
    parser.add_argument("--repeat", type=int, default=3, help="repeats at sizes up to 20k LM calls")
    parser.add_argument("--repeat-large", type=int, default=1, help="repeats at sizes above 20k LM calls")
    parser.add_argument("--skip-rdflib", action="store_true", help="do not measure the rdflib baseline")
    parser.add_argument("--rdflib-budget", type=float, default=900, help="skip rdflib at a size predicted to take longer (s)")
    parser.add_argument(
        "--modes", nargs="+", choices=list(MODES), default=list(MODES),
        help="store write modes to measure (the first one writes the store the queries run on)",
    )
    parser.add_argument("--batch-triples", type=int, default=100_000, help="TraceStore.put batch size")
    parser.add_argument("--workdir", type=Path, default=None, help="where workload files and stores go (default: a temp dir)")
    parser.add_argument("--queries", type=Path, default=QUERIES, help="directory of .rq files")
    parser.add_argument("--distinct-arguments", action="store_true", help="each trace's tool arguments its own (free text)")
    args = parser.parse_args()
    cleanup_workdir = args.workdir is None
    args.workdir = Path(tempfile.mkdtemp(prefix="bench-store-")) if cleanup_workdir else args.workdir
    args.workdir.mkdir(parents=True, exist_ok=True)
    queries = sorted(args.queries.glob("*.rq"))
    print(f"python {platform.python_version()}, pyoxigraph {ox.__version__}, {len(queries)} queries, workdir {args.workdir}", flush=True)
    dirs = Dirs(args.workdir)
    rdflib_rate: dict = {}
    try:
        results = [run_size(n, args, dirs, queries, rdflib_rate) for n in sorted(args.lm_calls)]
    finally:
        dirs.cleanup()
        if cleanup_workdir:
            shutil.rmtree(args.workdir, ignore_errors=True)
    print()
    print(markdown(results, args))


if __name__ == "__main__":
    sys.exit(main())
