"""Live capture and the readers on the paths real DSPy programs take: the real ``dspy.LM`` (offline, LiteLLM's mocks),
its legacy path and the typed one, DSPy's own programs (Predict, ChainOfThought, ReAct, ReActV2, native function
calling with parallel calls, dspy.Parallel, Evaluate, an optimizer), every sink. For each program, the counts in
``stats`` and the canned queries equal what the program did: LM calls, tool calls, tool errors, tokens, cost.

Runs on the DSPy of the environment (3.3.1 here; ``tests/test_dspy341.py`` runs it again on DSPy 3.4.1)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import dspy  # noqa: E402  (lms sets LiteLLM's offline price map first)
import pytest
from lms import EchoLM, ScriptedLM, fields
from traced_programs import NATIVE, REACT, CallTools

from dspy_rdf import RdfFormat, parse_traces, serialize_traces, trace_from_dspy, trace_from_json, trace_to_json
from dspy_rdf.analytics.catalog import run_query
from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.capture.recorder import FileSink, MemorySink, Sink, StoreSink, TraceRecorder
from dspy_rdf.capture.runs import build_trace
from dspy_rdf.inputs import read_traces
from dspy_rdf.store import EmbeddedStore
from dspy_rdf.validation import validate_traces

DSPY_VERSION = tuple(int(x) for x in dspy.__version__.split(".")[:2])
BIG = {"limit": "100000"}


# --- tools that count what they did ------------------------------------------------------------------------------


@dataclass
class Ledger:
    """What the program did, as the program itself saw it: tool calls and errors per tool."""

    calls: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def tools(self):
        def add(a: int, b: int) -> int:
            """Add two integers."""
            with self.lock:
                self.calls["add"] += 1
            return a + b

        def divide(a: int, b: int) -> float:
            """Divide a by b."""
            with self.lock:
                self.calls["divide"] += 1
            try:
                return a / b
            except ZeroDivisionError:
                with self.lock:
                    self.errors["divide"] += 1
                raise

        return [add, divide]


def history_totals(*lms: dspy.LM) -> dict:
    """LM calls, tokens and cost as the LMs' own histories record them."""
    out = {"lm_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost": 0.0, "models": Counter()}
    for lm in lms:
        for entry in lm.history:
            if isinstance(entry, dict):
                usage, cost, model = entry.get("usage") or {}, entry.get("cost"), entry.get("model")
                out["input_tokens"] += usage.get("prompt_tokens") or 0
                out["output_tokens"] += usage.get("completion_tokens") or 0
            else:  # a typed LMHistoryEntry (experimental=True)
                usage, cost, model = entry.response.usage, entry.response.cost, entry.request.model
                out["input_tokens"] += (usage.input_tokens or 0) if usage else 0
                out["output_tokens"] += (usage.output_tokens or 0) if usage else 0
            out["lm_calls"] += 1
            out["cost"] += cost or 0.0
            out["models"][model] += 1
    return out


def record_into_store(tmp_path: Path, run) -> tuple[EmbeddedStore, TraceRecorder]:
    """Run ``run(recorder)`` with a StoreSink into a fresh embedded store; return the store, reopened read-only."""
    location = tmp_path / "store"
    with StoreSink(location) as sink:
        recorder = TraceRecorder(sink)
        run(recorder)
    assert recorder.errors == [] and recorder.unwritten == []
    return EmbeddedStore(location, read_only=True), recorder


def assert_counts(store: EmbeddedStore, totals: dict, ledger: Ledger, *, internal: Counter | None = None, traces: int | None = None) -> None:
    """stats and every canned query that counts something equal what the program did. The tools a module runs itself
    (``internal``: ReAct's finish, ReActV2's submit) are not the program's: left out unless asked for."""
    internal = internal or Counter()
    own = ledger.calls
    executed = own + internal
    stats = store.stats()
    assert stats["lm_calls"] == totals["lm_calls"]
    assert stats["tool_executions"] == sum(own.values())
    assert stats["tool_calls"] == sum(own.values())
    if traces is not None:
        assert stats["traces"] == traces
    models = {r["model"]: r for r in run_query(store, "tokens_per_model").records()}
    assert {k: r["lm_calls"] for k, r in models.items()} == dict(totals["models"])
    assert sum(r["input_tokens"] or 0 for r in models.values()) == totals["input_tokens"]
    assert sum(r["output_tokens"] or 0 for r in models.values()) == totals["output_tokens"]
    assert sum(r["cost"] or 0 for r in models.values()) == pytest.approx(totals["cost"])
    per_tool = {r["tool"]: r for r in run_query(store, "tool_calls_per_tool").records()}
    assert {t: r["executions"] for t, r in per_tool.items() if r["executions"]} == dict(own)
    assert {t: r["calls"] for t, r in per_tool.items() if r["calls"]} == dict(own)
    every_tool = {r["tool"]: r for r in run_query(store, "tool_calls_per_tool", {"framework_tools": 1}).records()}
    assert {t: r["executions"] for t, r in every_tool.items() if r["executions"]} == dict(executed)
    errors = {r["tool"]: r for r in run_query(store, "tool_error_rate").records()}
    assert {t: r["errors"] for t, r in errors.items() if r["errors"]} == dict(ledger.errors)
    assert {t: r["results"] for t, r in errors.items()} == dict(own)  # each call ran, once
    arguments = Counter()
    for r in run_query(store, "tool_argument_frequency", BIG).records():
        arguments[r["tool"]] += r["calls"]
    assert dict(arguments) == dict(own)
    slow = run_query(store, "slowest_tool_executions", BIG).records()
    assert len(slow) == sum(own.values()) and sum(bool(r["failed"]) for r in slow) == sum(ledger.errors.values())
    assert run_query(store, "unanswered_tool_calls", BIG).rows == []
    reasons = {r["finish_reason"]: r["outputs"] for r in run_query(store, "finish_reasons").records()}
    assert reasons == {"stop": totals["lm_calls"]}
    conversations = run_query(store, "longest_conversations", BIG).records()
    assert sum(r["lm_calls"] for r in conversations) == totals["lm_calls"]
    assert sum(r["tool_calls"] for r in conversations) == sum(own.values())


# --- every sink, the real LM ---------------------------------------------------------------------------------------


def predict_once(recorder: TraceRecorder, lm: dspy.LM) -> None:
    with dspy.context(lm=lm, callbacks=[recorder]):
        dspy.Predict("question -> answer")(question="What is 2 + 2?")


@pytest.mark.parametrize("sink_kind", ["memory", "jsonl", "nq", "store"])
def test_every_sink_keeps_a_run_of_the_real_lm(tmp_path, sink_kind):
    lm = ScriptedLM([fields(answer="4")])
    sink = {
        "memory": lambda: MemorySink(),
        "jsonl": lambda: FileSink(tmp_path / "runs.jsonl"),
        "nq": lambda: FileSink(tmp_path / "runs.nq"),
        "store": lambda: StoreSink(tmp_path / "store"),
    }[sink_kind]()
    recorder = TraceRecorder(sink)
    predict_once(recorder, lm)
    assert recorder.flush()
    assert recorder.errors == [] and recorder.unwritten == []
    if sink_kind == "memory":
        [trace] = sink.traces
        json.dumps(trace_to_json(trace))  # JSON data all through: no live provider object left
    elif sink_kind == "jsonl":
        [item] = list(read_traces(tmp_path / "runs.jsonl"))
        trace = item.trace
    elif sink_kind == "nq":
        [(_, trace)] = parse_traces(tmp_path / "runs.nq", RdfFormat.N_QUADS)
    else:
        sink.close()
        with EmbeddedStore(tmp_path / "store", read_only=True) as store:
            [iri] = store.trace_iris()
            trace = parse_traces(_dump(store), RdfFormat.N_QUADS)[0][1]
    [lm_call] = [c for c in trace.calls if isinstance(c, m.LMCall)]
    entry = lm_call.entry
    assert entry is not None and entry.response.outputs[0].finish_reason == "stop"
    assert entry.response.usage.total_tokens == 30 and entry.response.cost > 0
    provider = entry.extra_fields["provider_response"]
    assert isinstance(provider, dict) and provider["choices"][0]["finish_reason"] == "stop"  # the ModelResponse, as JSON
    assert trace.losses == []
    assert validate_traces([trace]).conforms


def test_a_capture_file_exports_into_a_store_as_the_same_runs(tmp_path):
    from dspy_rdf.canonical.identity import trace_iri
    from dspy_rdf.cli.main import main

    memory = MemorySink()
    recorder = TraceRecorder(FileSink(tmp_path / "runs.nq"), on_run=memory.write)
    for answer in ("4", "5"):
        predict_once(recorder, ScriptedLM([fields(answer=answer)]))
    recorder.close()
    assert main(["export", str(tmp_path / "runs.nq"), "--store", str(tmp_path / "store")]) == 0
    with EmbeddedStore(tmp_path / "store", read_only=True) as store:
        assert sorted(store.trace_iris()) == sorted(trace_iri(t) for t in memory.traces)
        assert run_query(store, "tokens_per_model").records()[0]["lm_calls"] == 2


def _written_runs(sink_kind: str, sink, tmp_path: Path) -> list[m.Trace]:
    """The runs a sink holds, read back the way a user would: the file parsed, the store dumped."""
    if sink_kind == "memory":
        return list(sink.traces)
    sink.close()
    if sink_kind == "jsonl":
        return [item.trace for item in read_traces(tmp_path / "runs.jsonl")]
    if sink_kind == "nq":
        return [trace for _, trace in parse_traces(tmp_path / "runs.nq", RdfFormat.N_QUADS)]
    with EmbeddedStore(tmp_path / "store", read_only=True) as store:
        return [trace for _, trace in parse_traces(_dump(store), RdfFormat.N_QUADS)]


def _sink(sink_kind: str, tmp_path: Path):
    return {
        "memory": lambda: MemorySink(),
        "jsonl": lambda: FileSink(tmp_path / "runs.jsonl"),
        "nq": lambda: FileSink(tmp_path / "runs.nq"),
        "store": lambda: StoreSink(tmp_path / "store"),
    }[sink_kind]()


HALF = "\ud83d"  # the first half of an emoji: no Unicode text (UTF-8, RDF) can hold it alone
SENT_HALF = HALF if DSPY_VERSION < (3, 4) else ""  # DSPy 3.4 refuses to send such text to an LM at all


class Unreadable:
    """A live value whose text cannot be read, as a closed handle's may not."""

    def __repr__(self) -> str:
        raise RuntimeError("the handle is closed")

    __str__ = __repr__


class Odd(dspy.Module):
    """A program whose live values cannot all be kept exactly: half characters in its input, its LM's answer, a prompt
    it sends itself, a tool's arguments, result, name and error; a result whose text cannot be read."""

    def __init__(self, lm: dspy.LM) -> None:
        super().__init__()
        self.lm = lm
        self.predict = dspy.Predict("question -> answer")

        def echo(text: str) -> str:
            """Echo the text."""
            return text

        def handle() -> Unreadable:
            """Open a handle."""
            return Unreadable()

        def fail(why: str) -> str:
            """Fail."""
            raise ValueError(why)

        self.echo, self.handle, self.fail = dspy.Tool(echo), dspy.Tool(handle), dspy.Tool(fail, name=f"fail{HALF}")

    def forward(self, question: str) -> dspy.Prediction:
        answer = self.predict(question=question).answer
        self.lm(messages=[{"role": "user", "content": f"again {SENT_HALF}"}])
        self.echo(text=f"x {HALF}")
        self.handle()
        with contextlib.suppress(ValueError):
            self.fail(why=f"broken {HALF}")
        return dspy.Prediction(answer=answer)


@pytest.mark.parametrize("sink_kind", ["memory", "jsonl", "nq", "store"])
def test_a_run_with_values_no_trace_can_hold_is_written_with_each_kept_as_text_and_reported(tmp_path, sink_kind):
    lm = ScriptedLM([fields(answer=f"smile {HALF}"), f"plain {HALF}"])
    sink = _sink(sink_kind, tmp_path)
    recorder = TraceRecorder(sink)
    with dspy.context(lm=lm, callbacks=[recorder]):
        Odd(lm)(question=f"why {SENT_HALF}?")
    assert recorder.flush() and recorder.unwritten == []
    [trace] = _written_runs(sink_kind, sink, tmp_path)
    assert len(trace.calls) == 7  # Odd, Predict, 2 LM calls, 3 tool executions: none lost
    lost = {item["field"] for item in trace.losses}
    half_kept = {"calls[1].output_summary.answer", "calls[4].tool_call.args.text", "calls[4].tool_result.result",
                 "calls[6].tool_call.name", "calls[6].error"}  # fmt: skip
    if SENT_HALF:
        half_kept |= {"calls[0].input_summary.kwargs.question", "calls[3].entry.messages[0].content"}
    assert half_kept <= lost, lost
    assert "calls[5].tool_result.result" in lost  # the unreadable handle, named by its type
    [handle] = [c for c in trace.calls if isinstance(c, m.ToolExecution) and c.tool_call.name == "handle"]
    assert handle.tool_result.result == "<Unreadable whose text could not be read: RuntimeError>"
    [failed] = [c for c in trace.calls if isinstance(c, m.ToolExecution) and c.tool_result.is_error]
    assert failed.error == "ValueError: broken \ufffd" and failed.tool_call.name == "fail\ufffd"
    assert len(recorder.errors) == 1 and "not kept exactly" in recorder.errors[0]
    assert validate_traces([trace]).conforms


def test_a_setting_that_is_not_a_number_costs_only_itself_not_the_lm_call():
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    with dspy.context(lm=ScriptedLM([fields(answer="4")]), callbacks=[recorder]):
        dspy.Predict("question -> answer")(question="2 + 2?", config={"temperature": float("nan")})
    [trace] = sink.traces
    [lm_call] = [c for c in trace.calls if isinstance(c, m.LMCall)]
    assert lm_call.entry is not None and lm_call.entry.response.usage.total_tokens == 30  # messages, answer, usage kept
    assert [item["field"] for item in trace.losses] == ["calls[1].entry.kwargs.temperature"] * 2
    assert "'nan' was left out" in trace.losses[1]["reason"]
    assert validate_traces([trace]).conforms


class KeepsRunsAsRecorded(Sink):
    """A sink that builds runs elsewhere, as a writer process does: it keeps each run as the recorder noted it."""

    builds_runs = True

    def __init__(self) -> None:
        self.runs: list = []

    def write(self, run) -> None:
        self.runs.append(run)


def test_a_run_built_again_is_the_same_trace():
    # A run is built again when its batch could not be written and each run is written on its own: building takes
    # refused values out of the recorded entries, so a second build must not lose what the first one noted.
    sink = KeepsRunsAsRecorded()
    with dspy.context(lm=ScriptedLM([fields(answer="4")]), callbacks=[TraceRecorder(sink)]):
        dspy.Predict("question -> answer")(question="2 + 2?", config={"temperature": float("nan")})
    [run] = sink.runs
    first = build_trace(run)
    assert "'nan' was left out" in first.losses[1]["reason"]
    assert build_trace(run) == first and build_trace(run).losses == first.losses


def test_each_lm_call_keeps_the_messages_it_was_sent_when_the_program_changes_them_later():
    lm = ScriptedLM(["one", "two", "three"])
    sink = MemorySink()
    recorder = TraceRecorder(sink)

    class Conversation(dspy.Module):
        def forward(self) -> None:
            messages = [{"role": "user", "content": "hi"}]
            for _ in range(3):
                reply = lm(messages=messages)[0]
                messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "more"}]

    with dspy.context(lm=lm, callbacks=[recorder]):
        Conversation()()
    [trace] = sink.traces
    sent = [len(c.entry.request.messages) for c in trace.calls if isinstance(c, m.LMCall)]
    assert sent == [1, 3, 5]  # the list DSPy's history holds grew to 7 afterwards


def _dump(store) -> bytes:
    import io

    buffer = io.BytesIO()
    store.dump(buffer)
    return buffer.getvalue()


class Opaque:
    """A value with no JSON form (not a pydantic model, not a container)."""

    def __str__(self) -> str:
        return "<opaque provider object>"


class OpaqueLM(ScriptedLM):
    """A real dspy.LM whose history entries hold a value with no JSON form, as a provider's extension might."""

    def update_history(self, entry):
        super().update_history({**entry, "opaque": Opaque()})


def test_a_value_without_a_json_form_is_kept_as_text_and_reported():
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    predict_once(recorder, OpaqueLM([fields(answer="4")]))
    [trace] = sink.traces
    [lm_call] = [c for c in trace.calls if isinstance(c, m.LMCall)]
    assert lm_call.entry.extra_fields["opaque"] == "<opaque provider object>"
    [lost] = trace.losses
    assert lost["field"].endswith("entry.opaque") and "kept as its text" in lost["reason"]
    assert len(recorder.errors) == 1 and "not kept exactly" in recorder.errors[0]
    back = trace_from_json(json.loads(json.dumps(trace_to_json(trace))))
    assert back == trace and validate_traces([trace]).conforms
    [(_, again)] = parse_traces(serialize_traces([trace]), RdfFormat.N_QUADS)
    assert again.losses == trace.losses


def test_a_run_the_sink_cannot_write_is_kept(tmp_path):
    class Broken:
        def write(self, trace):
            raise OSError("No space left on device")

    recorder = TraceRecorder(Broken())
    predict_once(recorder, ScriptedLM([fields(answer="4")]))
    assert len(recorder.unwritten) == 1 and recorder.unwritten[0].calls
    assert len(recorder.errors) == 1 and "No space left on device" in recorder.errors[0] and "recorder.unwritten" in recorder.errors[0]


# --- DSPy's programs: what stats and the queries say equals what the program did --------------------------------


REACT_V2 = [
    fields(next_thought="Add, then divide.", tool_calls=json.dumps({"tool_calls": [
        {"name": "add", "args": {"a": 2, "b": 3}}, {"name": "divide", "args": {"a": 5, "b": 0}}]})),
    fields(next_thought="Submit.", tool_calls=json.dumps({"tool_calls": [{"name": "submit", "args": {"answer": "5"}}]})),
]


def test_predict_and_chain_of_thought(tmp_path):
    ledger = Ledger()
    lm = ScriptedLM([fields(answer="4"), fields(reasoning="2 + 2", answer="4")])

    def run(recorder):
        with dspy.context(lm=lm, callbacks=[recorder]):
            dspy.Predict("question -> answer")(question="2 + 2?")
            dspy.ChainOfThought("question -> answer")(question="2 + 2?")

    store, _ = record_into_store(tmp_path, run)
    assert_counts(store, history_totals(lm), ledger, traces=2)
    store.close()


def test_react_with_a_failing_tool(tmp_path):
    ledger = Ledger()
    lm = ScriptedLM(REACT)

    def run(recorder):
        with dspy.context(lm=lm, callbacks=[recorder]):
            dspy.ReAct("question -> answer", tools=ledger.tools())(question="2 + 3, then / 0?")

    store, _ = record_into_store(tmp_path, run)
    assert dict(ledger.calls) == {"add": 1, "divide": 1} and dict(ledger.errors) == {"divide": 1}
    assert_counts(store, history_totals(lm), ledger, internal=Counter(finish=1), traces=1)
    store.close()


@pytest.mark.skipif(not hasattr(dspy, "ReActV2"), reason="this DSPy has no ReActV2")
def test_react_v2_with_a_failing_tool(tmp_path):
    ledger = Ledger()
    lm = ScriptedLM(REACT_V2)
    holder = {}

    def run(recorder):
        with dspy.context(lm=lm, callbacks=[recorder]):
            holder["prediction"] = dspy.ReActV2("question -> answer", tools=ledger.tools())(question="2 + 3, then / 0?")

    store, _ = record_into_store(tmp_path, run)
    assert_counts(store, history_totals(lm), ledger, internal=Counter(submit=1), traces=1)
    store.close()
    # its prediction and its history are traces too, that read back to the same JSON
    prediction = holder["prediction"]
    assert prediction.termination_reason == "submit"
    for value in (prediction, prediction.history, prediction.history.messages[0]["tool_calls"]):
        trace = trace_from_dspy(value)
        assert (trace.source_format, trace.source_kind) == ("dspy_history", "trajectory")
        data = trace_to_json(trace)
        assert trace_from_json(json.loads(json.dumps(data))) == trace
        [(_, back)] = parse_traces(serialize_traces([trace]), RdfFormat.N_QUADS)
        assert back == trace and validate_traces([trace]).conforms
    calls = [p for msg in trace_from_dspy(prediction).messages for p in msg.parts if isinstance(p, m.LMToolCallPart)]
    results = [p for msg in trace_from_dspy(prediction).messages for p in msg.parts if isinstance(p, m.LMToolResultPart)]
    assert [(c.name, c.call_id) for c in calls] == [("add", "call_0_0"), ("divide", "call_0_1"), ("submit", "call_1_0")]
    assert [r.is_error for r in results] == [False, True, False]


def test_a_conversation_history_is_a_trace_live_and_as_its_json(tmp_path):
    from dspy_rdf.cli.main import main

    history = dspy.History(messages=[{"question": "What is DSPy?", "answer": "A framework."}, {"question": "Who made it?", "answer": "Stanford NLP."}])
    trace = trace_from_dspy(history)
    assert (trace.source_format, trace.source_kind) == ("dspy_history", "trajectory")
    assert [[p.text for p in msg.parts] for msg in trace.messages] == [["What is DSPy?", "A framework."], ["Who made it?", "Stanford NLP."]]
    assert trace_from_json(json.loads(json.dumps(trace_to_json(trace)))) == trace and validate_traces([trace]).conforms
    (tmp_path / "history.json").write_text(history.model_dump_json(), encoding="utf-8")
    assert main(["export", str(tmp_path / "history.json"), "-o", str(tmp_path / "history.nq")]) == 0
    assert [t for _, t in parse_traces(tmp_path / "history.nq", RdfFormat.N_QUADS)] == [trace]


def test_native_function_calling_with_parallel_calls_counts_each_call_once(tmp_path):
    ledger = Ledger()
    lm = ScriptedLM(NATIVE)

    def run(recorder):
        with dspy.context(lm=lm, callbacks=[recorder], adapter=dspy.ChatAdapter(use_native_function_calling=True)):
            CallTools(ledger.tools())(question="1 + 2, and 1 / 0")

    store, _ = record_into_store(tmp_path, run)
    assert_counts(store, history_totals(lm), ledger, traces=1)
    per_tool = {r["tool"]: r for r in run_query(store, "tool_calls_per_tool").records()}
    assert {t: r["parts"] for t, r in per_tool.items()} == {"add": 1, "divide": 1}  # the module's ToolCalls are the LM's parts
    [row] = run_query(store, "longest_conversations").records()
    assert row["tool_calls"] == 2
    store.close()


def test_parallel_runs_are_traces_of_their_own(tmp_path):
    ledger = Ledger()
    lm = EchoLM()
    examples = [dspy.Example(question=f"say {w}").with_inputs("question") for w in "abcd"]

    def run(recorder):
        with dspy.context(lm=lm, callbacks=[recorder]):
            program = dspy.Predict("question -> answer")
            dspy.Parallel(num_threads=2)([(program, example) for example in examples])

    store, _ = record_into_store(tmp_path, run)
    assert_counts(store, history_totals(lm), ledger, traces=4)
    store.close()


def test_parallel_calls_inside_a_module_belong_to_its_run(tmp_path):
    ledger = Ledger()
    lm = EchoLM()
    examples = [dspy.Example(question=f"say {w}").with_inputs("question") for w in "abcd"]

    class Fan(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.predict = dspy.Predict("question -> answer")

        def forward(self) -> list:
            return dspy.Parallel(num_threads=2)([(self.predict, example) for example in examples])

    def run(recorder):
        with dspy.context(lm=lm, callbacks=[recorder]):
            Fan()()

    store, _ = record_into_store(tmp_path, run)
    assert_counts(store, history_totals(lm), ledger, traces=1)
    store.close()


def exact(example, prediction, trace=None) -> bool:
    return example.answer == prediction.answer


def test_evaluate_and_an_optimizer_run(tmp_path):
    ledger = Ledger()
    lm = EchoLM()
    devset = [dspy.Example(question=f"say {w}", answer=w if w != "d" else "x").with_inputs("question") for w in "abcd"]
    results = {}

    def run(recorder):
        with dspy.context(lm=lm, callbacks=[recorder]):
            student = dspy.Predict("question -> answer")
            compiled = dspy.BootstrapFewShot(metric=exact, max_bootstrapped_demos=2, max_labeled_demos=2).compile(student, trainset=devset)
            results["evaluation"] = dspy.Evaluate(devset=devset, metric=exact, num_threads=2, display_progress=False)(compiled)

    store, recorder = record_into_store(tmp_path, run)
    assert_counts(store, history_totals(lm), ledger, traces=2)
    [row] = run_query(store, "program_scores").records()
    assert row["evaluations"] == 1 and row["best_score"] == results["evaluation"].score == 75.0
    assert row["compilations"] == 1 and row["evaluation_lm_calls"] == 4
    totals = history_totals(lm)
    assert row["evaluation_lm_calls"] + row["compile_lm_calls"] == totals["lm_calls"]
    for kind in ("input_tokens", "output_tokens"):
        assert row[f"evaluation_{kind}"] + row[f"compile_{kind}"] == totals[kind] and row[f"compile_{kind}"] > 0
    traces = parse_traces(_dump(store), RdfFormat.N_QUADS)
    evaluation = next(c for _, t in traces for c in t.calls if isinstance(c, m.EvaluateCall))
    assert evaluation.devset_size == 4 and evaluation.metric.endswith(".exact")
    assert [r.score for r in evaluation.example_results] == [1.0, 1.0, 1.0, 0.0]
    assert all(r.program_call is not None for r in evaluation.example_results)
    assert all(validate_traces([t]).conforms for _, t in traces)
    store.close()


# --- the typed path and mixed histories -------------------------------------------------------------------------------


def _typed_path_supported() -> bool:
    try:
        from dspy.core.types import LMHistoryEntry  # noqa: F401
    except ImportError:
        return False
    return DSPY_VERSION < (3, 4)


@pytest.mark.skipif(not _typed_path_supported(), reason="experimental=True records typed LMHistoryEntry objects in DSPy 3.3 only")
def test_the_typed_path_and_a_mixed_history(tmp_path):
    lm = ScriptedLM([fields(answer="4"), fields(answer="5")])
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    with dspy.context(lm=lm, callbacks=[recorder]):
        dspy.Predict("question -> answer")(question="2 + 2?")  # legacy: a dict
        with dspy.context(experimental=True):
            dspy.Predict("question -> answer")(question="2 + 3?")  # typed: an LMHistoryEntry
    assert recorder.errors == []
    assert [type(e).__name__ for e in lm.history] == ["dict", "LMHistoryEntry"]
    for trace in sink.traces:
        [call] = [c for c in trace.calls if isinstance(c, m.LMCall)]
        assert call.entry is not None and call.entry.response.outputs[0].finish_reason == "stop"
        assert validate_traces([trace]).conforms
    history = trace_from_dspy(lm)  # the mixed history as a whole
    assert (history.source_format, history.source_kind, len(history.entries)) == ("history_dict", "lm_history", 2)
    data = trace_to_json(history)
    assert trace_from_json(json.loads(json.dumps(data))) == history
    # as JSON: the dicts (their provider objects as JSON) and the typed entries' own dump, in one list
    path = tmp_path / "history.json"
    path.write_text(json.dumps([e if isinstance(e, dict) else e.to_dict(mode="json") for e in lm.history], default=str), encoding="utf-8")
    from dspy_rdf.cli.main import main

    assert main(["export", str(path), "-o", str(tmp_path / "history.nq")]) == 0


# --- DSPy 3.4: a request and its response kept together ----------------------------------------------------------


@pytest.mark.skipif(DSPY_VERSION < (3, 4), reason="lm15 is DSPy 3.4's")
def test_an_lm15_request_and_response_are_one_trace(tmp_path):
    from dspy import lm15
    from dspy._vendor.lm15 import serde

    request = lm15.Request(model="openai/gpt-4o-mini", messages=[lm15.Message.user("2 + 2?")])
    response = lm15.Response(id="r1", model="gpt-4o-mini", message=lm15.Message.assistant("4"), finish_reason="stop", usage=lm15.Usage(input_tokens=3, output_tokens=1))
    pair = {"request": serde.request_to_dict(request), "response": serde.response_to_dict(response)}
    for value in (pair, (request, response), (response, request), [request, response], {"request": request, "response": response}):
        trace = trace_from_json(value) if value is pair else trace_from_dspy(value)
        assert (trace.source_format, trace.source_kind) == ("lm15", "request_response")
        assert trace.response.outputs[0].finish_reason == "stop" and validate_traces([trace]).conforms
    with pytest.raises(TraceInputError, match="holds 2 LM calls"):
        trace_from_dspy([(request, response), (request, response)])
    path = tmp_path / "pair.json"
    path.write_text(json.dumps(pair), encoding="utf-8")
    from dspy_rdf.cli.main import main

    for argv in ([], ["--from", "lm15"]):
        assert main(["export", str(path), "-o", str(tmp_path / "pair.nq"), *argv]) == 0


@pytest.mark.skipif(DSPY_VERSION < (3, 4), reason="DSPy 3.3 has its typed objects")
def test_trace_to_dspy_on_dspy_34_says_what_to_do_instead():
    from dspy_rdf import trace_to_dspy

    trace = trace_from_json(json.loads((Path(__file__).parent / "data" / "request_all_parts.json").read_text(encoding="utf-8")))
    with pytest.raises(ImportError) as caught:
        trace_to_dspy(trace)
    message = str(caught.value)
    assert "trace_to_json" in message and "pip install" not in message and dspy.__version__ in message
