"""Benchmark of SHACL validation at store scale: the fast engine (shapes compiled to SPARQL, run in the store) against
the reference engine (pySHACL, trace by trace) over the same store.

    .venv/bin/python bench/bench_validate.py [--lm-calls 1000 10000 100000] [--pyshacl-max 30000]
                                             [--pyshacl-budget 1800] [--repeat 3] [--repeat-large 1] [--workdir DIR]

Workload: the generator of ``bench/bench_store.py`` (real DSPy traces copied with new uuids, timestamps and models
until the wanted number of LM calls), loaded once per size into an on-disk embedded store with ``put(bulk=True)``
(cached in ``--workdir`` between runs). Measured per size:

- fast engine: ``dspy_rdf.validation.validate_store`` on the whole store, three ways: whole-store queries
  (``slices=False``) with ``workers=2`` (two processes) and ``workers=1``, and slices of 1,000 traces
  (``slices=True``, bounded memory) with ``workers=2``; each run in a fresh child process, which reports its time
  and the peak RSS of the largest process (``ru_maxrss`` of itself and of its workers); medians of ``--repeat``
  runs (``--repeat-large`` above 20k LM calls);
- pySHACL: ``dspy_rdf.validation.validate_store(engine=Engine.PYSHACL)``, each trace's graph copied into rdflib
  and validated alone (the reference; fetching the graphs is part of the time), in a child process stopped after
  ``--pyshacl-budget`` seconds: a run that does not finish is reported as a bound ("> budget"), and larger sizes are
  then not tried. Sizes above ``--pyshacl-max`` are extrapolated linearly from the measured
  sizes, and labelled so.

Both engines must agree on conformance. Throughputs are triples per second; tables are printed in Markdown.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import multiprocessing.queues
import queue
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import GENERATOR_VERSION, rss_mb, workload  # noqa: E402

from dspy_rdf.inputs import read_traces  # noqa: E402
from dspy_rdf.store import EmbeddedStore  # noqa: E402
from dspy_rdf.validation import Engine, compile_shapes, validate_store  # noqa: E402

STORE_VERSION = 2
"""Bumped when the writer's output changes (v2: usage summaries), so that cached stores are rebuilt."""


def build_store(lm_calls: int, workdir: Path) -> tuple[Path, int, int, int]:
    """The on-disk store holding the workload (built once, cached); its traces, LM calls and triples."""
    path, traces, calls = workload(lm_calls, workdir)
    target = workdir / f"validate_store_{lm_calls}_workload{GENERATOR_VERSION}_v{STORE_VERSION}"  # rebuilt when the workload changes
    meta = target.with_suffix(".meta.json")
    if not meta.exists():
        start = time.perf_counter()
        store = EmbeddedStore(target)
        report = store.put((item.trace for item in read_traces(path)), bulk=True)
        store.close()
        meta.write_text(json.dumps({"triples": report.triples}))
        print(f"  loaded {report.triples:,} triples into {target} in {time.perf_counter() - start:.1f} s", flush=True)
    return target, traces, calls, json.loads(meta.read_text())["triples"]


FAST_MODES = (("whole", 2), ("whole", 1), ("slices", 2))


def _fast_child(target: Path, mode: str, workers: int, answer: multiprocessing.queues.Queue) -> None:
    store = EmbeddedStore(target, read_only=True)
    gc.collect()
    start = time.perf_counter()
    report = validate_store(store, workers=workers, slices=mode == "slices")
    seconds = time.perf_counter() - start
    store.close()
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    answer.put((seconds, peak, report.conforms, len(report.violations)))


def run_fast(target: Path, mode: str, workers: int) -> tuple[float, float, bool, int]:
    """One fast-engine run in a fresh child process: seconds, peak MB of its largest process, conforms, violations."""
    context = multiprocessing.get_context("fork")
    answer = context.Queue()
    child = context.Process(target=_fast_child, args=(target, mode, workers, answer))
    child.start()
    try:
        return answer.get()
    finally:
        child.join()


def _pyshacl_child(target: Path, answer: multiprocessing.queues.Queue) -> None:
    build, seconds, grew, report = run_pyshacl(target)
    answer.put((build, seconds, grew, report.conforms, len(report.violations)))


def run_pyshacl_within(target: Path, budget: float) -> tuple[float, float, float, bool, int] | None:
    """pySHACL in a child process, stopped after ``budget`` seconds: its figures, or None when it did not finish."""
    context = multiprocessing.get_context("fork")
    answer = context.Queue()
    child = context.Process(target=_pyshacl_child, args=(target, answer), daemon=True)
    child.start()
    try:
        return answer.get(timeout=budget)
    except queue.Empty:
        return None
    finally:
        child.terminate()
        child.join()


def run_pyshacl(target: Path) -> tuple[float, float, float, object]:
    store = EmbeddedStore(target, read_only=True)
    before = rss_mb()
    gc.collect()
    start = time.perf_counter()
    report = validate_store(store, engine=Engine.PYSHACL)
    seconds = time.perf_counter() - start
    grew = rss_mb() - before
    store.close()
    return 0.0, seconds, grew, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lm-calls", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--pyshacl-max", type=int, default=30_000, help="run pySHACL only up to this many LM calls")
    parser.add_argument("--pyshacl-budget", type=float, default=1800, help="stop pySHACL after this many seconds (then report a bound)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--repeat-large", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=Path(".bench"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    compiled = compile_shapes()
    print(f"compiled {len(compiled.checks)} queries from {', '.join(Path(f).name for f in compiled.files)}; not compiled: {list(compiled.unsupported) or 'nothing'}")
    results = []
    for lm_calls in args.lm_calls:
        target, traces, calls, triples = build_store(lm_calls, args.workdir)
        repeat = args.repeat if lm_calls <= 20_000 else args.repeat_large
        print(f"\n# {calls:,} LM calls, {traces:,} traces, {triples:,} triples; {repeat} repeat(s)", flush=True)
        row = {"lm_calls": calls, "traces": traces, "triples": triples, "repeat": repeat}
        for mode, workers in FAST_MODES:
            runs, peaks = [], []
            for _ in range(repeat):
                seconds, peak, conforms, violations = run_fast(target, mode, workers)
                runs.append(seconds)
                peaks.append(peak)
                print(f"  fast, {mode}, {workers} worker(s): {seconds:8.2f} s ({triples / seconds:,.0f} triples/s), peak {peak:,.0f} MB, conforms={conforms}, {violations} violations", flush=True)
            key = f"{mode}{workers}"
            row[key] = statistics.median(runs)
            row[f"{key}_spread"] = (min(runs), max(runs))
            row[f"{key}_mb"] = max(peaks)
            row["fast_conforms"] = conforms
        if lm_calls <= args.pyshacl_max and not any(r.get("pyshacl_unfinished") for r in results):
            answer = run_pyshacl_within(target, args.pyshacl_budget)
            if answer is None:
                print(f"  pySHACL: did not finish within {args.pyshacl_budget:,.0f} s (stopped)", flush=True)
                row.update(pyshacl_unfinished=args.pyshacl_budget)
            else:
                build, seconds, grew, conforms, violations = answer
                print(f"  pySHACL (reference, trace by trace): {seconds:.1f} s ({triples / seconds:,.0f} triples/s), +{grew:,.0f} MB RSS, conforms={conforms}, {violations} results", flush=True)
                row.update(pyshacl=seconds, pyshacl_build=build, pyshacl_mb=grew, pyshacl_conforms=conforms)
                if conforms != row["fast_conforms"]:
                    raise SystemExit("the engines disagree on conformance")
        results.append(row)
    # pySHACL's seconds per triple grow with size, so a larger size is extrapolated linearly from the slowest rate
    # seen: the measured ones and the bounds of stopped runs. A bound makes the extrapolation a bound too.
    rates = [(r["pyshacl"] / r["triples"], False) for r in results if "pyshacl" in r]
    rates += [(r["pyshacl_unfinished"] / r["triples"], True) for r in results if "pyshacl_unfinished" in r]
    if rates:
        per_triple, is_bound = max(rates)
        for r in results:
            if "pyshacl" not in r and "pyshacl_unfinished" not in r:
                r["pyshacl_extrapolated"] = per_triple * r["triples"]
                r["pyshacl_extrapolated_bound"] = is_bound
    print("\n" + markdown(results))


def markdown(results: list[dict]) -> str:
    out = [
        "| LM calls (traces, triples) | fast, whole store, 2 workers: s (triples/s), peak MB | fast, whole store, 1 worker | "
        "fast, slices, 2 workers | pySHACL (reference, trace by trace): s (triples/s) | speed-up (whole store, 2 workers) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        t = r["triples"]
        fast = " | ".join(f"{r[k]:.1f} ({t / r[k]:,.0f}), {r[k + '_mb']:,.0f} MB" for k in ("whole2", "whole1", "slices2"))
        head = f"| {r['lm_calls']:,} ({r['traces']:,}, {t:,}) | {fast} "
        if "pyshacl" in r:
            ref = r["pyshacl"]
            out.append(f"{head}| {ref:,.1f} ({t / ref:,.0f}) | {ref / r['whole2']:.0f}x |")
        elif "pyshacl_unfinished" in r:
            ref = r["pyshacl_unfinished"]
            out.append(f"{head}| > {ref:,.0f} (< {t / ref:,.0f}), stopped unfinished | > {ref / r['whole2']:.0f}x |")
        elif "pyshacl_extrapolated" in r:
            ref = r["pyshacl_extrapolated"]
            if r["pyshacl_extrapolated_bound"]:
                out.append(f"{head}| *> {ref:,.0f} (< {t / ref:,.0f}), extrapolated from a stopped run, not run* | > {ref / r['whole2']:.0f}x |")
            else:
                out.append(f"{head}| *~{ref:,.0f} ({t / ref:,.0f}), extrapolated, not run* | {ref / r['whole2']:.0f}x |")
        else:
            out.append(f"{head}| not run | |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
