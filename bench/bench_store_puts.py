"""Many small writes into the embedded store, as live capture makes them: one ``put`` per recorded program run.

    python bench/bench_store_puts.py [--runs 600] [--window 100]

Workload: ``--runs`` runs of a real ``dspy.ReAct`` program (two tools, one raises; ``DummyLM``), recorded by the
capture callback; each run is one trace of 375 triples. Each is written on its own into a fresh embedded store in a
temporary directory, three ways, and the median time of a write is shown per window of ``--window`` runs:

- ``TraceStore.put([run])``: what ``StoreSink`` does for each run (redaction, encoding, the commit);
- baseline: pyoxigraph's ``Store.load`` of the same N-Quads, in the calling thread (the commit alone);
- the same ``Store.load`` in a thread started for each write, as ``put`` did before it kept its committing threads:
  RocksDB writes more slowly for every thread that ever wrote to the store.

A write time that grows with the number of runs already stored is what this benchmark is for: it should stay flat.
Peak memory (the process's maximum resident set) is printed at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
import pyoxigraph as ox  # noqa: E402
from bench_capture import ANSWERS, add, divide  # noqa: E402
from dspy.utils import DummyLM  # noqa: E402

from dspy_rdf.capture.recorder import MemorySink, TraceRecorder  # noqa: E402
from dspy_rdf.rdf.formats import encode_trace  # noqa: E402
from dspy_rdf.store import open_store  # noqa: E402


def recorded_runs(count: int) -> list:
    """``count`` recorded runs of the benchmark's ReAct program (distinct traces: each has its own times)."""
    program = dspy.ReAct("question -> answer", tools=[add, divide])
    recorder = TraceRecorder(MemorySink())
    for _ in range(count):
        with dspy.context(lm=DummyLM(list(ANSWERS)), callbacks=[recorder]):
            program(question="What is 2 + 3, divided by 0?")
    assert not recorder.errors, recorder.errors
    return recorder.sink.traces


def timed(write: Callable[[int], None], count: int) -> list[float]:
    """Seconds taken by ``write(i)`` for each i."""
    seconds = []
    for i in range(count):
        start = time.perf_counter()
        write(i)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=600)
    parser.add_argument("--window", type=int, default=100)
    args = parser.parse_args()

    runs = recorded_runs(args.runs)
    data = [encode_trace(run)[1] for run in runs]
    triples = data[0].count(b"\n")
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "put")
        put = timed(lambda i: store.put([runs[i]]), len(runs))
        store.close()
        direct = ox.Store(str(Path(tmp) / "load"))
        load = timed(lambda i: direct.load(data[i], ox.RdfFormat.N_QUADS, lenient=True), len(runs))
        del direct
        threaded = ox.Store(str(Path(tmp) / "thread"))

        def in_new_thread(i: int) -> None:
            thread = threading.Thread(target=threaded.load, args=(data[i], ox.RdfFormat.N_QUADS), kwargs={"lenient": True})
            thread.start()
            thread.join()

        per_thread = timed(in_new_thread, len(runs))
        del threaded

    print(f"dspy {dspy.__version__}, pyoxigraph {ox.__version__}; {len(runs)} runs of {triples} triples, one write each;")
    print(f"median ms per write, per window of {args.window} runs\n")
    print("| runs stored before | `put([run])` | baseline: `Store.load` | `put` / baseline | `Store.load` in a new thread each |")
    print("|---|---:|---:|---:|---:|")
    for start in range(0, len(runs), args.window):
        window = slice(start, start + args.window)
        p, b, t = (statistics.median(xs[window]) * 1e3 for xs in (put, load, per_thread))
        print(f"| {start}-{min(start + args.window, len(runs)) - 1} | {p:.2f} | {b:.2f} | {p / b:.2f}x | {t:.2f} |")
    print(f"\npeak memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
