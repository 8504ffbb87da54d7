"""File and store sinks write in a process of their own: nothing handed over is lost, whatever happens to it."""

from __future__ import annotations

import copy
import enum
import gc
import math
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import dspy
import pytest
from lms import EchoLM

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.identity import trace_iri
from dspy_rdf.canonical.redact import Redactor
from dspy_rdf.capture.recorder import FileSink, MemorySink, StoreSink, TraceRecorder
from dspy_rdf.inputs import read_traces
from dspy_rdf.store import EmbeddedStore, StoreLockedError


@pytest.fixture(scope="module")
def runs() -> list[m.Trace]:
    """Real recorded runs of a dspy.Predict program on the real dspy.LM (offline)."""
    memory = MemorySink()
    recorder = TraceRecorder(memory)
    with dspy.context(lm=EchoLM(), callbacks=[recorder]):
        for n in range(12):
            dspy.Predict("question -> answer")(question=f"say {n}")
    assert len(memory.traces) == 12 and recorder.errors == []
    return memory.traces


def stored_runs(path) -> list[m.Trace]:
    out = []
    for item in read_traces(path):
        item.trace.source_index = None  # the line of the file; a recorded run has none
        out.append(item.trace)
    return out


def test_runs_handed_over_are_written_in_order_once_flushed(tmp_path, runs):
    sink = FileSink(tmp_path / "runs.jsonl")
    for trace in runs:
        sink.write(trace)
    assert sink.flush(timeout=60)
    assert stored_runs(tmp_path / "runs.jsonl") == runs
    sink.close()
    sink.close()


def test_when_the_writer_process_is_killed_its_runs_are_written_by_the_program(tmp_path, runs):
    sink = FileSink(tmp_path / "runs.jsonl")
    recorder = TraceRecorder(sink)
    for trace in runs[:6]:
        sink.write(trace)
    writer = sink.writer_pid
    assert writer not in (None, os.getpid()) and FileSink(tmp_path / "here.jsonl", background=False).writer_pid is None
    os.kill(writer, signal.SIGKILL)  # whatever it had not confirmed is written here
    for trace in runs[6:]:
        sink.write(trace)
    sink.close()
    assert recorder.unwritten == []
    # None lost. A run the child wrote but had no time to confirm is written again: a line more in the file, which
    # export reads as the same trace (the same IRI), as a store keeps it once.
    back = stored_runs(tmp_path / "runs.jsonl")
    assert {trace_iri(t) for t in back} == {trace_iri(t) for t in runs}


def test_a_run_the_writer_process_cannot_write_goes_back_to_the_recorder(tmp_path, runs):
    path = tmp_path / "runs.jsonl"
    sink = FileSink(path)
    recorder = TraceRecorder(sink)
    sink.write(runs[0])
    sink.flush()
    path.unlink()
    path.mkdir()  # appending to it now fails in the writer process
    sink.write(runs[1])
    sink.close()
    assert recorder.unwritten == [runs[1]]
    assert len(recorder.errors) == 1 and "IsADirectoryError" in recorder.errors[0] and "recorder.unwritten" in recorder.errors[0]


def test_a_program_that_exits_without_flushing_loses_no_run(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(os.path.dirname(__file__))!r})
        import dspy
        from lms import EchoLM
        from dspy_rdf.capture.recorder import FileSink, StoreSink, TraceRecorder
        recorders = [TraceRecorder(FileSink("runs.nq")), TraceRecorder(StoreSink("store"))]
        with dspy.context(lm=EchoLM(), callbacks=recorders):
            for n in range(5):
                dspy.Predict("question -> answer")(question=f"say {{n}}")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "runs.nq").read_text().count("/source_kind> \"program_run\"") == 5
    with EmbeddedStore(tmp_path / "store", read_only=True) as store:
        assert store.stats()["traces"] == 5


def test_a_store_held_by_another_process_is_a_clear_error_when_the_sink_is_made(tmp_path):
    with EmbeddedStore(tmp_path / "store"):
        with pytest.raises(StoreLockedError, match="locked"):
            StoreSink(tmp_path / "store")


def test_a_redactor_with_a_callback_of_its_own_writes_in_the_program(tmp_path, runs):
    sink = FileSink(tmp_path / "runs.jsonl", redactor=Redactor(callback=lambda text: text.replace("say", "s*y")))
    assert sink._writer is None  # the callback lives in this process
    sink.write(runs[0])
    assert "s*y 0" in (tmp_path / "runs.jsonl").read_text()


def test_a_forked_process_writes_its_runs_itself(tmp_path, runs):
    sink = FileSink(tmp_path / "runs.jsonl")
    sink.write(runs[0])
    pid = os.fork()
    if pid == 0:  # the child: the pipe belongs to its parent
        try:
            sink.write(runs[1])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    sink.write(runs[2])
    sink.close()
    assert sorted(stored_runs(tmp_path / "runs.jsonl"), key=lambda t: t.calls[0].started_at) == runs[:3]


def test_a_store_sink_closed_has_every_run_it_was_handed(tmp_path, runs):
    sink = StoreSink(tmp_path / "store")
    for trace in runs:
        sink.write(trace)
    sink.close()
    with EmbeddedStore(tmp_path / "store", read_only=True) as store:
        assert store.trace_iris() == sorted(trace_iri(t) for t in runs)


def unstorable_run() -> m.Trace:
    """A run no store takes: a score that is not a finite decimal number."""
    return m.Trace(
        source_kind="program_run",
        source_format="dspy_callback",
        calls=[m.EvaluateCall(started_at="2031-01-01T10:00:00Z", score=float("nan"))],
    )


def test_runs_written_together_are_stored_unless_refused(tmp_path, runs):
    sink = StoreSink(tmp_path / "store", background=False)
    assert sink.write_many([runs[0], runs[1]]) is True
    assert sink.write_many([runs[2], unstorable_run(), runs[3]]) is False
    assert sink.store.stats()["traces"] == 4  # the others of the batch are stored all the same
    sink.close()


def test_runs_handed_over_faster_than_a_store_commits_are_all_stored_and_a_bad_one_goes_back(tmp_path, runs):
    sink = StoreSink(tmp_path / "store")
    recorder = TraceRecorder(sink)
    bad = unstorable_run()
    handed = [*runs[:6], bad, *runs[6:]]
    for trace in handed:  # handed over in well under one commit's time: the writer takes them together
        sink.write(trace)
    assert sink.flush(timeout=60)
    sink.close()
    # The run given back is the one handed over, as the writer had it (a copy: NaN is not equal to itself, so compared
    # by its IRI, which its content makes).
    assert [trace_iri(t) for t in recorder.unwritten] == [trace_iri(bad)]
    assert math.isnan(recorder.unwritten[0].calls[0].score)
    assert len(recorder.errors) == 1 and "score nan" in recorder.errors[0]
    with EmbeddedStore(tmp_path / "store", read_only=True) as store:
        assert set(store.trace_iris()) == {trace_iri(t) for t in runs}


@pytest.mark.parametrize("name", ["history_entry_all_parts.json", "request_all_parts.json", "response_all_parts.json", "react_history.json"])
def test_a_run_pickles_to_an_equal_run_as_it_is_handed_over(name, runs):
    import pickle

    from conftest import load

    from dspy_rdf.sources.tracejson import trace_from_json

    for trace in (trace_from_json(load(name)), runs[0]):
        back = pickle.loads(pickle.dumps(trace, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == trace and repr(back) == repr(trace)


def test_a_recorder_with_a_file_sink_starts_no_thread_in_the_program_and_every_run_is_written_when_the_sink_closes(tmp_path):
    # A thread woken for each run (to convert it, or to read the writer's answer) cost the program more CPU than the
    # recording itself: the run is converted in the thread that ends it, answers are read when the next run is handed over.
    def ours() -> set[threading.Thread]:
        # LiteLLM's logging threads, left by LM calls of earlier tests in this process, come and go on their own
        return {thread for thread in threading.enumerate() if not thread.name.startswith("litellm")}

    before = ours()
    threads = []
    with FileSink(tmp_path / "runs.jsonl") as sink:
        recorder = TraceRecorder(sink, on_run=lambda trace: threads.append(threading.current_thread().name))
        with dspy.context(lm=EchoLM(), callbacks=[recorder]):
            for n in range(6):
                dspy.Predict("question -> answer")(question=f"say {n}")
        assert ours() == before
    assert threads == [threading.current_thread().name] * 6
    assert len(stored_runs(tmp_path / "runs.jsonl")) == 6 and recorder.errors == []


def test_a_run_larger_than_the_pipe_is_handed_over_whole_among_small_ones(tmp_path, runs):
    # Written without blocking: the program reads the writer's answers while it waits for room in the pipe.
    from dspy_rdf.capture.background import PIPE_BYTES

    big = copy.deepcopy(runs[0])
    big.calls[0].input_summary = {"question": "x" * (3 * PIPE_BYTES)}
    sink = FileSink(tmp_path / "runs.jsonl")
    handed = [*runs[:5], big, *runs[5:]] * 3
    for trace in handed:
        sink.write(trace)
    assert sink.flush(timeout=120)
    sink.close()
    assert stored_runs(tmp_path / "runs.jsonl") == handed


def test_a_memory_sink_has_each_run_when_the_programs_call_returns():
    memory = MemorySink()
    recorder = TraceRecorder(memory)
    with dspy.context(lm=EchoLM(), callbacks=[recorder]):
        dspy.Predict("question -> answer")(question="say 1")
        assert len(memory.traces) == 1


def predict_with_half_a_character(recorder: TraceRecorder) -> None:
    """A run whose module input holds a lone UTF-16 surrogate, which no trace can hold: in an input the signature does
    not use, as DSPy 3.4 refuses to send such text to an LM."""
    with dspy.context(lm=EchoLM(), callbacks=[recorder]):
        dspy.Predict("question -> answer")(question="say a", note="half \ud83d")


def test_a_memory_sink_builds_a_run_once_when_read_and_reports_what_building_noted():
    memory = MemorySink()
    recorder = TraceRecorder(memory)
    predict_with_half_a_character(recorder)
    assert len(recorder.errors) == 1 and "not kept exactly" in recorder.errors[0]  # reading errors builds the run
    [trace] = memory.traces
    assert trace.losses and memory.traces[0] is trace and len(recorder.errors) == 1


def test_a_memory_sinks_traces_hold_built_traces_only_and_later_runs_join_them_when_read():
    memory = MemorySink()
    recorder = TraceRecorder(memory)
    record(recorder)
    held = memory.traces
    record(recorder, 2)
    assert len(held) == 1 and all(isinstance(t, m.Trace) for t in held)  # nothing unbuilt slips into a list in hand
    held.append(held[0])  # a list of the caller's own
    assert len(memory.traces) == 4 and memory.traces is held and all(isinstance(t, m.Trace) for t in held)
    assert recorder.errors == []


class Unit(str, enum.Enum):
    C = "celsius"


class Level(enum.IntEnum):
    HIGH = 3


def weather(city: str, unit: Unit) -> Level:
    """The weather of a city."""
    return Level.HIGH


def test_enum_members_a_run_holds_reach_the_writer_process_as_their_values(tmp_path):
    # The writer process cannot import the program's classes: a run holding a str or int enum member (a tool's
    # argument and result) once made it fail to read the run, and every later run was written in the program.
    recorder = TraceRecorder(FileSink(tmp_path / "runs.jsonl"))
    pid = recorder.sink.writer_pid
    with dspy.context(callbacks=[recorder]):
        assert dspy.Tool(weather)(city="Paris", unit=Unit.C) == Level.HIGH
    assert recorder.flush() and recorder.sink.writer_pid == pid and recorder.errors == [] and recorder.unwritten == []
    recorder.close()
    [trace] = stored_runs(tmp_path / "runs.jsonl")
    [execution] = trace.calls
    assert execution.tool_call.args == {"city": "Paris", "unit": "celsius"} and execution.tool_result.result == 3


def test_a_run_the_writer_process_could_not_write_is_told_at_a_later_run_without_a_flush(tmp_path, monkeypatch):
    import dspy_rdf.capture.background

    monkeypatch.setattr(dspy_rdf.capture.background, "ANSWER_SECONDS", 0.2)
    path = tmp_path / "runs.jsonl"
    recorder = TraceRecorder(FileSink(path))
    record(recorder)
    recorder.flush()
    path.unlink()
    path.mkdir()  # appending to it now fails in the writer process
    record(recorder)
    for _ in range(6):  # a program whose runs come now and then: far fewer than UNANSWERED_RUNS
        if recorder.unwritten:
            break
        time.sleep(0.3)
        record(recorder)
    assert recorder.unwritten and "IsADirectoryError" in recorder.errors[0]
    recorder.close()


def record(recorder: TraceRecorder, runs: int = 1) -> None:
    with dspy.context(lm=EchoLM(), callbacks=[recorder]):
        for n in range(runs):
            dspy.Predict("question -> answer")(question=f"say {n}")


def test_closing_the_recorder_from_on_run_does_not_hang(tmp_path):
    with FileSink(tmp_path / "runs.jsonl") as sink:
        recorder = TraceRecorder(sink)
        recorder.on_run = lambda trace: recorder.close()
        record(recorder, 2)
        assert recorder.flush(timeout=30)
    assert len(stored_runs(tmp_path / "runs.jsonl")) == 2


def test_two_recorders_sharing_a_sink_and_flushing_from_on_run_do_not_hang(tmp_path):
    with FileSink(tmp_path / "runs.jsonl") as sink:
        first, second = TraceRecorder(sink), TraceRecorder(sink)
        first.on_run = lambda trace: sink.flush()
        second.on_run = lambda trace: sink.flush()
        record(first, 2)
        record(second, 1)
        assert sink.flush(timeout=30)
    assert len(stored_runs(tmp_path / "runs.jsonl")) == 3


def test_flush_keeps_to_its_timeout_while_the_writer_process_is_busy(tmp_path, runs):
    import time

    with StoreSink(tmp_path / "store") as sink:
        for n in range(40):
            for trace in runs:
                sink.write(_restarted(trace, n))
        assert sink.flush(timeout=0.05) is False  # 40 runs of work wait: a flush that ignored its timeout would say True
        assert sink.flush(timeout=120) is True
    with EmbeddedStore(tmp_path / "store") as store:
        assert len(store.trace_iris()) == 40 * len(runs)


def _restarted(trace: m.Trace, n: int) -> m.Trace:
    """The run as if it had been run again at another time: another execution (another DSPy call id), another trace."""
    other = copy.deepcopy(trace)
    other.started_at = f"2026-01-01T00:{n:02d}:00+00:00"
    other.calls[0].dspy_call_id = f"{other.calls[0].dspy_call_id}-{n}"
    return other


def test_runs_recorded_in_a_forked_process_that_exits_at_once_are_written(tmp_path):
    sink = FileSink(tmp_path / "runs.jsonl")
    recorder = TraceRecorder(sink)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            record(recorder, 3)
        finally:
            os._exit(0)  # no exit handlers, as multiprocessing's forked workers end
    os.waitpid(pid, 0)
    record(recorder, 2)
    sink.close()
    assert len(stored_runs(tmp_path / "runs.jsonl")) == 5


@pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="scheduling policies are Linux's")
def test_the_writer_process_does_not_take_the_cpu_from_the_program_when_a_run_wakes_it(tmp_path, runs):
    # Woken by each run, a writer under the normal policy often ran at once on the program's CPU: the program's
    # write of a run into the pipe then took 1.7 ms instead of 0.2 ms. Batch scheduling keeps it from doing that.
    with FileSink(tmp_path / "runs.nq") as sink:
        sink.write(runs[0])
        assert sink.flush(timeout=30)
        assert os.sched_getscheduler(sink.writer_pid) == os.SCHED_BATCH


def test_the_writer_process_makes_its_sink_without_importing_dspy(tmp_path, monkeypatch):
    # DSPy and LiteLLM take seconds to import (and LiteLLM fetches its price list unless told not to): the program
    # would wait for that each time it makes a sink. The specs the sinks send their writer process are made there.
    from dspy_rdf.capture import background

    specs = []
    made = background.BackgroundWriter.__init__

    def noting(self, spec, **kwargs):
        specs.append(spec)
        made(self, spec, **kwargs)

    monkeypatch.setattr(background.BackgroundWriter, "__init__", noting)
    FileSink(tmp_path / "runs.nq").close()
    StoreSink(tmp_path / "store").close()
    (tmp_path / "specs.pickle").write_bytes(pickle.dumps(specs))
    code = (
        "import pickle, sys\n"
        "from dspy_rdf.capture.background import make_sink\n"
        f"for spec in pickle.loads(open({str(tmp_path / 'specs.pickle')!r}, 'rb').read()):\n"
        "    make_sink(spec).close()\n"
        "assert not {'dspy', 'litellm'} & set(sys.modules), sorted(k for k in sys.modules if k.split('.')[0] in ('dspy', 'litellm'))\n"
    )
    assert len(specs) == 2
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def _record(recorder: TraceRecorder, answers: list[str]) -> list[m.Trace]:
    """Run a Predict program once per answer, recorded by ``recorder`` and by a recorder that builds each run in the
    program; return the latter's runs, untimed (each recorder notes its own times)."""
    built = MemorySink()
    mirror = TraceRecorder(built)
    with dspy.context(lm=EchoLM(), callbacks=[recorder, mirror]):
        for answer in answers:
            dspy.Predict("question -> answer")(question=f"say {answer}")
    return [_untimed(trace) for trace in built.traces]


def _untimed(trace: m.Trace) -> m.Trace:
    trace = copy.deepcopy(trace)
    trace.started_at = trace.ended_at = None
    for call in trace.calls:
        call.started_at, call.ended_at = "", None
    return trace


def test_runs_handed_over_as_recorded_are_built_by_the_writer_process_into_the_same_traces(tmp_path):
    recorder = TraceRecorder(FileSink(tmp_path / "runs.jsonl"))
    assert recorder.sink.builds_runs  # the program only records: the writer process builds each trace
    expected = _record(recorder, ["a", "b", "c"])
    recorder.close()
    assert [_untimed(t) for t in stored_runs(tmp_path / "runs.jsonl")] == expected and recorder.errors == []


def test_a_run_waiting_for_the_writer_process_is_not_kept_as_objects_in_the_program(tmp_path):
    # Kept until the writer confirms it, a run's objects would reach the garbage collector's old generation, whose
    # full passes then cost the program: the sink keeps the bytes it handed over instead.
    recorder = TraceRecorder(FileSink(tmp_path / "runs.jsonl"))
    handed_over = []
    hand_over = recorder.sink.write

    def write(run):
        handed_over.append(weakref.ref(run))
        hand_over(run)

    recorder.sink.write = write
    expected = _record(recorder, ["a"])
    gc.collect()
    assert len(handed_over) == 1 and handed_over[0]() is None  # not confirmed yet: answers are read at the flush
    recorder.close()
    assert [_untimed(t) for t in stored_runs(tmp_path / "runs.jsonl")] == expected and recorder.errors == []


def test_a_recorded_run_the_writer_process_cannot_write_goes_back_to_the_recorder_built(tmp_path):
    path = tmp_path / "runs.jsonl"
    recorder = TraceRecorder(FileSink(path))
    _record(recorder, ["a"])
    recorder.flush()
    path.unlink()
    path.mkdir()  # appending to it now fails in the writer process
    [expected] = _record(recorder, ["b"])
    recorder.close()
    assert [_untimed(t) for t in recorder.unwritten] == [expected]
    assert len(recorder.errors) == 1 and "IsADirectoryError" in recorder.errors[0]


def test_what_the_writer_process_notes_of_a_run_it_built_reaches_the_recorder(tmp_path):
    recorder = TraceRecorder(FileSink(tmp_path / "runs.jsonl"))
    predict_with_half_a_character(recorder)
    recorder.flush()
    assert len(recorder.errors) == 1 and "not kept exactly" in recorder.errors[0]
    recorder.close()
    [trace] = stored_runs(tmp_path / "runs.jsonl")
    assert trace.losses


def test_recorded_runs_the_killed_writer_process_had_not_confirmed_are_built_and_written_by_the_program(tmp_path):
    recorder = TraceRecorder(FileSink(tmp_path / "runs.jsonl"))
    expected = _record(recorder, ["a", "b"])
    os.kill(recorder.sink.writer_pid, signal.SIGKILL)
    expected += _record(recorder, ["c", "d"])
    recorder.close()
    assert recorder.unwritten == [] and recorder.errors == []
    assert {trace_iri(_untimed(t)) for t in stored_runs(tmp_path / "runs.jsonl")} == {trace_iri(t) for t in expected}
