"""Overhead of live capture: a DummyLM dspy.ReAct program with and without the TraceRecorder callback.

    python bench/bench_capture.py [--runs 40] [--rounds 15]

Workload: a real dspy.ReAct run with two tools (one raises), driven offline by dspy.utils.DummyLM: 4 LM calls,
3 tool executions, 6 module calls per run (13 calls; DSPy also dispatches 8 adapter format/parse events). Each round times --runs program runs in each configuration, the
configurations interleaved so that machine noise hits them alike; the figures are medians over the rounds.

- baseline: the program with no callback;
- no-op BaseCallback: a callback with no handlers, i.e. the cost of DSPy's own dispatch, which any callback pays
  (per decorated call: ``inspect.getcallargs``, ``uuid4``, handler lookup by isinstance checks);
- MemorySink: TraceRecorder keeping each finished run in memory (recording, conversion, pairing);
- FileSink .nq: the same, plus writing each run as N-Quads to a file (the full export path).

The target is an overhead under 5% of the baseline's run time.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path

import dspy
from dspy.utils import DummyLM
from dspy.utils.callback import BaseCallback

from dspy_rdf.capture import FileSink, MemorySink, TraceRecorder


class NoopCallback(BaseCallback):
    """A callback that does nothing: what DSPy's own callback dispatch costs."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


ANSWERS = [
    {"next_thought": "Add first.", "next_tool_name": "add", "next_tool_args": {"a": 2, "b": 3}},
    {"next_thought": "Now divide by zero.", "next_tool_name": "divide", "next_tool_args": {"a": 5, "b": 0}},
    {"next_thought": "That failed; finish.", "next_tool_name": "finish", "next_tool_args": {}},
    {"reasoning": "2 + 3 = 5", "answer": "5"},
]


def time_runs(program: dspy.Module, runs: int, callbacks: list) -> float:
    """Seconds per program run, over ``runs`` runs, each with a fresh DummyLM."""
    lms = [DummyLM(list(ANSWERS)) for _ in range(runs)]
    start = time.perf_counter()
    for lm in lms:
        with dspy.context(lm=lm, callbacks=callbacks):
            program(question="What is 2 + 3, divided by 0?")
    return (time.perf_counter() - start) / runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40, help="program runs per configuration per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--freeze-gc",
        action="store_true",
        help="gc.freeze() after warm-up, to show how much of the overhead is garbage collection of the extra allocations",
    )
    args = parser.parse_args()

    program = dspy.ReAct("question -> answer", tools=[add, divide])
    with tempfile.TemporaryDirectory() as tmp:
        memory = TraceRecorder(MemorySink())
        to_file = TraceRecorder(FileSink(Path(tmp) / "runs.nq"))
        configs = {
            "baseline (no callback)": [],
            "no-op BaseCallback": [NoopCallback()],
            "TraceRecorder + MemorySink": [memory],
            "TraceRecorder + FileSink .nq": [to_file],
        }
        for callbacks in configs.values():  # warm up imports and caches
            time_runs(program, 3, callbacks)
        # DSPy logs and swallows callback errors, so check that every run was really recorded.
        assert len(memory.sink.traces) == 3 and len(memory.sink.traces[0].calls) == 13, memory.sink.traces
        if args.freeze_gc:
            gc.collect()
            gc.freeze()
        times: dict[str, list[float]] = {name: [] for name in configs}
        for _ in range(args.rounds):
            for name, callbacks in configs.items():
                times[name].append(time_runs(program, args.runs, callbacks))
                memory.sink.traces.clear()
        assert not memory.errors and not to_file.errors, memory.errors + to_file.errors

    base = statistics.median(times["baseline (no callback)"])
    frozen = "; gc frozen after warm-up" if args.freeze_gc else ""
    print(f"dspy {dspy.__version__}; {args.rounds} rounds x {args.runs} runs; medians per program run{frozen}")
    floor = statistics.median(times["no-op BaseCallback"])
    print(f"{'configuration':32} {'ms/run':>8} {'vs baseline':>12} {'vs no-op':>9}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:32} {med * 1000:8.3f} {(med / base - 1) * 100:11.1f}% {(med / floor - 1) * 100:8.1f}%")


if __name__ == "__main__":
    main()
