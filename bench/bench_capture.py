"""Overhead of live capture: a dspy.ReAct program with and without the TraceRecorder callback, with every sink.

    python bench/bench_capture.py [--runs 40] [--rounds 15] [--slow-runs 8] [--slow-rounds 15] [--lm-seconds 0.05]
                                  [--handler-rounds 15]

Workload: a real dspy.ReAct run with two tools (one raises): 4 LM calls, 3 tool executions, 6 module calls per run
(13 recorded calls; DSPy also dispatches 8 adapter format/parse events). Each round times --runs program runs in each
configuration, the configurations interleaved (in a new random order each round) so that machine noise hits them
alike; the figures are medians over the rounds, and each difference between two configurations is the median of
their differences within a round (paired: noise that slows a whole round cancels out). A sink's time includes writing
every run: each timed batch ends with ``recorder.flush()``, the wait for the writer process to finish (also shown
without that wait), and a ``MemorySink``'s batch with reading its traces, which builds them.

- baseline: the program with no callback;
- no-op BaseCallback: a callback with no handlers, i.e. the cost of DSPy's own dispatch, which any callback pays
  (per decorated call: ``inspect.getcallargs``, ``uuid4``, handler lookup by isinstance checks);
- TraceRecorder with MemorySink, FileSink .nq, FileSink .jsonl, StoreSink (embedded store): the sinks as users make
  them (file and store sinks write in a process of their own), and the file and store sinks with
  ``background=False`` (written in the program's thread) for comparison.

The recorder's own time is also read directly: in extra rounds (``--handler-rounds``), each of its handlers is timed
where DSPy calls it (``time.perf_counter_ns`` around the call), and the median over rounds of the time per run is
reported, which the machine's noise disturbs far less than a difference of two whole runs. It is the program's work for the run, the sink's hand-over included (and, for a
``MemorySink``, building the traces when they are read after each batch); it leaves out what recording costs the
program indirectly (more garbage to collect, caches the handlers take from DSPy's code), which the paired figures
hold. The same is done with the real ``dspy.LM`` answering after ``--lm-seconds`` (``--slow-runs`` runs, a third of
``--handler-rounds``).

Two LMs drive it: ``dspy.utils.DummyLM`` (no latency: the recorder's cost stands out), reported as microseconds per
recorded call above the no-op callback (target: at most 50 for every sink), in wall time and in the program's CPU
time, with the writer process's CPU time per run beside it; and the real ``dspy.LM`` answering from LiteLLM's
``mock_response`` after ``--lm-seconds`` per call (a realistic 50 ms), reported as the overhead against the program
without a callback (target: under 1%) and as the recorder's own share, above the no-op callback.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
from dspy.utils import DummyLM  # noqa: E402
from dspy.utils.callback import BaseCallback  # noqa: E402

from dspy_rdf.capture.recorder import FileSink, MemorySink, StoreSink, TraceRecorder  # noqa: E402

CALLS_PER_RUN = 13


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


class SlowMockLM(dspy.LM):
    """The real dspy.LM (LiteLLM's completion path), answering ANSWERS in turn from ``mock_response`` after a delay."""

    def __init__(self, seconds: float) -> None:
        super().__init__("openai/gpt-4o-mini", cache=False)
        self.seconds = seconds
        self.turn = 0

    def forward(self, prompt=None, messages=None, **kwargs):
        answer = ANSWERS[self.turn % len(ANSWERS)]
        self.turn += 1
        kwargs["mock_response"] = "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in answer.items()) + "[[ ## completed ## ]]"
        time.sleep(self.seconds)
        return super().forward(prompt=prompt, messages=messages, **kwargs)


def writer_cpu_seconds(callbacks: list) -> float:
    """CPU seconds used so far by the writer processes of the recorders' sinks, all their threads (the store's own
    included; ``/proc/<pid>/task/<tid>/schedstat``: nanoseconds on a CPU), 0 for sinks that write in the program."""
    total = 0.0
    for callback in callbacks:
        pid = getattr(getattr(callback, "sink", None), "writer_pid", None)
        if pid is not None:
            for task in Path(f"/proc/{pid}/task").iterdir():
                try:
                    total += int((task / "schedstat").read_text().split()[0]) / 1e9
                except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
                    pass
    return total


def time_runs(program: dspy.Module, runs: int, callbacks: list, make_lm) -> tuple[float, float, float, float]:
    """Per program run over ``runs`` runs, each with a fresh LM: seconds without and with the wait, at the end, until
    the sinks have written every run (a sink that writes in a process of its own works while the program runs); the
    program process's CPU seconds (all its threads, the wait included); the sinks' writer processes' CPU seconds."""
    lms = [make_lm() for _ in range(runs)]
    writer_before = writer_cpu_seconds(callbacks)
    cpu_before = time.process_time()
    start = time.perf_counter()
    for lm in lms:
        with dspy.context(lm=lm, callbacks=callbacks):
            program(question="What is 2 + 3, divided by 0?")
    for callback in callbacks:  # a memory sink's traces are built when read: part of the program's run
        if isinstance(callback, TraceRecorder) and isinstance(callback.sink, MemorySink):
            callback.sink.traces  # noqa: B018
    ran = time.perf_counter()
    for callback in callbacks:
        if isinstance(callback, TraceRecorder):
            callback.flush()
    waited = time.perf_counter()
    cpu = time.process_time() - cpu_before
    writer = writer_cpu_seconds(callbacks) - writer_before
    return (ran - start) / runs, (waited - start) / runs, cpu / runs, writer / runs


Times = dict[str, list[tuple[float, float, float, float]]]
WALL_NO_WAIT, WALL, PROGRAM_CPU, WRITER_CPU = range(4)


def measure(program, configs: dict, runs: int, rounds: int, make_lm) -> Times:
    """Per configuration, the :func:`time_runs` figures of each round. The configurations run in a new random order
    each round (seeded): what one leaves behind (a store's compactions, the kernel writing a file's pages) then falls
    on each of the others alike."""
    for callbacks in configs.values():  # warm up imports and caches
        time_runs(program, 2, callbacks, make_lm)
    times: Times = {name: [] for name in configs}
    order = random.Random(2026)
    for _ in range(rounds):
        for name in order.sample(list(configs), len(configs)):
            callbacks = configs[name]
            times[name].append(time_runs(program, runs, callbacks, make_lm))
            for callback in callbacks:
                if isinstance(callback, TraceRecorder) and isinstance(callback.sink, MemorySink):
                    callback.sink.traces.clear()  # built when read: timed in time_runs, here only dropped
    return times


HANDLERS = ("on_module_start", "on_module_end", "on_lm_start", "on_lm_end", "on_tool_start", "on_tool_end")


def clock_handlers(recorder: TraceRecorder, spent: list[int]) -> None:
    """Time each of ``recorder``'s handlers where DSPy calls it, adding nanoseconds to ``spent[0]`` (DSPy looks the
    handlers up on the instance, so the timed ones shadow the class's)."""

    def timed(handler):
        def call(*args, **kwargs):
            start = time.perf_counter_ns()
            try:
                return handler(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter_ns() - start

        return call

    for name in HANDLERS:
        setattr(recorder, name, timed(getattr(recorder, name)))


def handler_time(program, recorder: TraceRecorder, runs: int, rounds: int, make_lm) -> list[float]:
    """Per round of ``runs`` program runs, the seconds spent in ``recorder``'s handlers per run: a mean over the
    round's runs, so that the work done every few runs (reading the writer process's answers and freeing the runs they
    confirm; building a ``MemorySink``'s traces when they are read, at the end of each round) is shared among them."""
    spent = [0]
    clock_handlers(recorder, spent)
    out = []
    try:
        for _ in range(rounds):
            lms = [make_lm() for _ in range(runs)]
            spent[0] = 0
            for lm in lms:
                with dspy.context(lm=lm, callbacks=[recorder]):
                    program(question="What is 2 + 3, divided by 0?")
            if isinstance(recorder.sink, MemorySink):
                start = time.perf_counter_ns()
                recorder.sink.traces.clear()  # reading them builds them
                spent[0] += time.perf_counter_ns() - start
            out.append(spent[0] / 1e9 / runs)
            recorder.flush()
    finally:
        for name in HANDLERS:
            vars(recorder).pop(name, None)
    return out


def paired(times: Times, name: str, reference: str, column: int = WALL) -> float:
    """Median over rounds of the difference to ``reference`` in the same round (seconds per run): machine noise that
    slows a whole round cancels out. Wall time without the wait is compared with the reference's whole wall time."""
    against = WALL if column == WALL_NO_WAIT else column
    return statistics.median(a[column] - b[against] for a, b in zip(times[name], times[reference]))


def median(times: Times, name: str, column: int = WALL) -> float:
    return statistics.median(t[column] for t in times[name])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40, help="DummyLM program runs per configuration per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--slow-runs", type=int, default=8, help="runs per configuration per round with the 50 ms LM")
    parser.add_argument("--slow-rounds", type=int, default=15)
    parser.add_argument("--lm-seconds", type=float, default=0.05, help="latency of each call of the slow LM")
    parser.add_argument("--handler-rounds", type=int, default=15, help="rounds of --runs runs timing the recorder's handlers")
    args = parser.parse_args()

    program = dspy.ReAct("question -> answer", tools=[add, divide])
    base, noop = "baseline (no callback)", "no-op BaseCallback"
    with tempfile.TemporaryDirectory() as tmp:
        recorders = {
            "MemorySink": TraceRecorder(MemorySink()),
            "FileSink .nq": TraceRecorder(FileSink(Path(tmp) / "runs.nq")),
            "FileSink .jsonl": TraceRecorder(FileSink(Path(tmp) / "runs.jsonl")),
            "StoreSink": TraceRecorder(StoreSink(Path(tmp) / "store")),
            "FileSink .nq, background=False": TraceRecorder(FileSink(Path(tmp) / "sync.nq", background=False)),
            "StoreSink, background=False": TraceRecorder(StoreSink(Path(tmp) / "sync-store", background=False)),
        }
        configs = {base: [], noop: [NoopCallback()]}
        configs.update({f"TraceRecorder + {name}": [recorder] for name, recorder in recorders.items()})
        # DSPy logs and swallows callback errors, so check that every run was really recorded.
        time_runs(program, 1, [recorders["MemorySink"]], lambda: DummyLM(list(ANSWERS)))
        assert len(recorders["MemorySink"].sink.traces[0].calls) == CALLS_PER_RUN, recorders["MemorySink"].sink.traces
        fast = measure(program, configs, args.runs, args.rounds, lambda: DummyLM(list(ANSWERS)))
        slow_configs = {name: configs[name] for name in configs if "background=False" not in name}
        slow = measure(program, slow_configs, args.slow_runs, args.slow_rounds, lambda: SlowMockLM(args.lm_seconds))
        in_handlers = {
            name: handler_time(program, recorders[name], args.runs, args.handler_rounds, lambda: DummyLM(list(ANSWERS)))
            for name in recorders
        }
        in_handlers_slow = {
            name: handler_time(
                program, recorders[name], args.slow_runs, max(1, args.handler_rounds // 3), lambda: SlowMockLM(args.lm_seconds)
            )
            for name in recorders if "background=False" not in name
        }
        errors = [e for r in recorders.values() for e in r.errors]
        assert not errors, errors
        for recorder in recorders.values():
            recorder.close()

    print(f"dspy {dspy.__version__}; DummyLM: {args.rounds} rounds x {args.runs} runs; dspy.LM with {args.lm_seconds * 1000:.0f} ms "
          f"per call: {args.slow_rounds} rounds x {args.slow_runs} runs; per program run ({CALLS_PER_RUN} recorded calls), medians "
          "over rounds; differences are medians of the per-round differences (paired)\n")
    lm_ms = f"{args.lm_seconds * 1000:.0f} ms"
    print("DummyLM: wall time, and CPU time of the program and of the sink's writer process\n")
    print("| configuration | ms/run | µs per recorded call above the no-op callback | the same, not waiting for the writer "
          "| program CPU µs per recorded call above the no-op callback | µs per recorded call in the recorder's handlers "
          f"| the same with the real dspy.LM ({lm_ms} per call) | writer process CPU ms/run |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in fast:
        recorder = name.startswith("TraceRecorder")
        cells = [f"{median(fast, name) * 1000:.2f}"]
        for column in (WALL, WALL_NO_WAIT, PROGRAM_CPU):
            cells.append(f"{paired(fast, name, noop, column) / CALLS_PER_RUN * 1e6:.0f}" if recorder else "—")
        for clocked in (in_handlers, in_handlers_slow):
            short = name.removeprefix("TraceRecorder + ")
            cells.append(f"{statistics.median(clocked[short]) / CALLS_PER_RUN * 1e6:.1f}" if short in clocked else "—")
        writer = median(fast, name, WRITER_CPU)
        cells.append(f"{writer * 1000:.2f}" if writer else "—")
        print(f"| {name} | {' | '.join(cells)} |")
    print(f"\nThe real dspy.LM answering after {lm_ms} per call: overhead against the program without a callback, and the "
          "recorder's own share (above the no-op callback)\n")
    print(f"| configuration | ms/run | overhead vs no callback | the same, not waiting for the writer | above the no-op "
          "callback | the same, not waiting for the writer | in the recorder's handlers |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in slow:
        cells = [f"{median(slow, name) * 1000:.1f}"]
        for reference in (base, noop):
            if reference == noop and not name.startswith("TraceRecorder"):
                cells += ["—", "—"]
                continue
            for column in (WALL, WALL_NO_WAIT):
                cells.append(f"{paired(slow, name, reference, column) / median(slow, base) * 100:+.2f}%")
        short = name.removeprefix("TraceRecorder + ")
        cells.append(f"{statistics.median(in_handlers_slow[short]) / median(slow, base) * 100:.2f}%" if short in in_handlers_slow else "—")
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
