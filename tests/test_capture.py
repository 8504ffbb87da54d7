"""Live capture: real DSPy 3.3.1 programs run offline, recorded by TraceRecorder, exported and checked."""

from __future__ import annotations

import threading
from datetime import datetime

import dspy
import pytest
from conftest import dspy33_types, examples
from dspy.utils import DummyLM

from dspy_rdf import RdfFormat, parse_traces, serialize_traces, validate_traces
from dspy_rdf.canonical import model as m
from dspy_rdf.capture.recorder import FileSink, MemorySink, StoreSink, TraceRecorder, summarize



def at(value: str) -> datetime:
    """A time of the model (canonical ``xsd:dateTime`` text) as a datetime, to compare."""
    return datetime.fromisoformat(value)

def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


def record(program, lm, **inputs) -> list[m.Trace]:
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    with dspy.context(lm=lm, callbacks=[recorder]):
        program(**inputs)
    assert recorder.errors == []
    return sink.traces


def calls_of(trace: m.Trace, cls: type) -> list:
    return [c for c in trace.calls if isinstance(c, cls)]


def assert_round_trips_and_conforms(trace: m.Trace) -> None:
    report = validate_traces([trace])
    assert report.conforms, str(report)
    [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.N_QUADS), RdfFormat.N_QUADS)
    assert back == trace


def react_lm() -> DummyLM:
    return DummyLM(
        [
            {"next_thought": "Add first.", "next_tool_name": "add", "next_tool_args": {"a": 2, "b": 3}},
            {"next_thought": "Now divide by zero.", "next_tool_name": "divide", "next_tool_args": {"a": 5, "b": 0}},
            {"next_thought": "That failed; finish.", "next_tool_name": "finish", "next_tool_args": {}},
            {"reasoning": "2 + 3 = 5", "answer": "5"},
        ]
    )


def test_a_react_run_with_a_failing_tool_is_one_conforming_trace():
    [trace] = record(dspy.ReAct("question -> answer", tools=[add, divide]), react_lm(), question="2 + 3, then / 0?")
    assert (trace.source_kind, trace.source_format, trace.dspy_version) == ("program_run", "dspy_callback", dspy.__version__)
    root = trace.calls[0]
    assert isinstance(root, m.ModuleCall) and (root.module_class, root.module_class_path) == ("ReAct", "dspy.predict.react.ReAct") and root.parent_call is None
    assert root.input_summary == {"args": [], "kwargs": {"question": "2 + 3, then / 0?"}}
    assert root.output_summary["answer"] == "5"
    lm_calls = calls_of(trace, m.LMCall)
    tools = calls_of(trace, m.ToolExecution)
    assert len(lm_calls) == 4 and all(c.entry is not None for c in lm_calls)
    assert [t.tool_call.name for t in tools] == ["add", "divide", "finish"]
    assert [t.tool_call.args for t in tools] == [{"a": 2, "b": 3}, {"a": 5, "b": 0}, {}]
    assert tools[0].tool_result.result == 5 and tools[0].tool_result.is_error is False
    assert tools[1].tool_result.is_error is True and tools[1].error == "ZeroDivisionError: division by zero"
    assert tools[1].tool_result.error == tools[1].error
    # ReAct asks for tools in text fields: each execution is linked to the LM call just before it, marked inferred.
    for tool in tools:
        decider = trace.calls[tool.decided_by]
        assert tool.pairing == "preceding_lm_call" and isinstance(decider, m.LMCall)
        assert at(decider.ended_at) <= at(tool.started_at)
    assert [trace.calls.index(t) > t.decided_by for t in tools] == [True] * 3
    # Order is the order calls started, and each call's time span lies within its parent's (compared as times: the
    # canonical text drops trailing zeros of the fraction, so ".1649Z" is later than ".164929Z" as text).
    assert [at(c.started_at) for c in trace.calls] == sorted(at(c.started_at) for c in trace.calls)
    for call in trace.calls[1:]:
        parent = trace.calls[call.parent_call]
        assert at(parent.started_at) <= at(call.started_at) <= at(call.ended_at) <= at(parent.ended_at)
    assert_round_trips_and_conforms(trace)


def test_usage_is_preserved_from_the_lm_history():
    lm = react_lm()
    [trace] = record(dspy.ReAct("question -> answer", tools=[add, divide]), lm, question="q")
    entries = [c.entry for c in calls_of(trace, m.LMCall)]
    assert [e.uuid for e in entries] == [h["uuid"] for h in lm.history]
    assert [e.response.usage.total_tokens for e in entries] == [h["usage"]["total_tokens"] for h in lm.history]


class CallTools(dspy.Module):
    """Predict tool calls with a dspy.ToolCalls output, then execute them (one raises)."""

    def __init__(self) -> None:
        super().__init__()
        self.tools = {t.name: t for t in (dspy.Tool(add), dspy.Tool(divide))}
        self.predict = dspy.Predict("question: str, tools: list[dspy.Tool] -> tool_calls: dspy.ToolCalls")

    def forward(self, question: str):
        calls = self.predict(question=question, tools=list(self.tools.values())).tool_calls
        results = []
        for call in calls.tool_calls:
            try:
                results.append(self.tools[call.name](**call.args))
            except ZeroDivisionError as err:
                results.append(str(err))
        return dspy.Prediction(results=results)


def test_tool_calls_returned_as_dspy_toolcalls_are_paired_with_their_executions():
    lm = DummyLM([{"tool_calls": {"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}, {"name": "divide", "args": {"a": 1, "b": 0}}]}}])
    [trace] = record(CallTools(), lm, question="1+2 and 1/0")
    predict = next(c for c in calls_of(trace, m.ModuleCall) if c.module_class.endswith("Predict"))
    assert [(p.name, p.args) for p in predict.tool_calls] == [("add", {"a": 1, "b": 2}), ("divide", {"a": 1, "b": 0})]
    tools = calls_of(trace, m.ToolExecution)
    index = trace.calls.index(predict)
    assert [(t.answers, t.pairing) for t in tools] == [
        (m.PartRef(call=index, output=None, part=0), "name_and_args"),
        (m.PartRef(call=index, output=None, part=1), "name_and_args"),
    ]
    assert [t.tool_result.is_error for t in tools] == [False, True]
    assert_round_trips_and_conforms(trace)


def test_native_tool_call_parts_are_paired_with_their_executions():
    """DSPy 3.3's typed path: a typed LM (``forward_contract = "typed_lm"``) writes typed LMHistoryEntry objects."""
    types = dspy33_types()

    class ScriptedLM(dspy.BaseLM):
        forward_contract = "typed_lm"

        def __init__(self, script) -> None:
            super().__init__(model="scripted/typed-lm", cache=False)
            self.script = list(script)

        def forward(self, request):
            return self.script.pop(0)

    class NativeToolLoop(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tool = dspy.Tool(add)

        def forward(self, question: str):
            spec = types.LMToolSpec(name="add", parameters=self.tool.args)
            with dspy.context(experimental=True):
                response = dspy.settings.lm(dspy.User(question), tools=[spec])
            call = response.tool_calls[0]
            return dspy.Prediction(answer=self.tool(**call.args))

    call = types.LMToolCallPart(id="call_7", name="add", args={"a": 4, "b": 5})
    output = types.LMOutput(parts=[types.LMTextPart(text="Adding."), call])
    lm = ScriptedLM([types.LMResponse(model="m", outputs=[output], usage=types.LMUsage(input_tokens=9, output_tokens=3))])
    [trace] = record(NativeToolLoop(), lm, question="4+5?")
    [lm_call] = calls_of(trace, m.LMCall)
    [tool] = calls_of(trace, m.ToolExecution)
    assert tool.answers == m.PartRef(call=trace.calls.index(lm_call), output=0, part=1) and tool.pairing == "name_and_args"
    assert lm_call.entry.response.outputs[0].parts[1].call_id == "call_7"
    assert lm_call.entry.response.usage.total_tokens == 12
    assert tool.tool_result.result == 9
    assert_round_trips_and_conforms(trace)
    nquads = serialize_traces([trace], RdfFormat.N_QUADS).decode()
    assert "/entry/response/output/0/part/1>" in nquads.split("/answers>")[1].splitlines()[0]


def test_a_multi_turn_history_keeps_every_turn_in_order():
    predict = dspy.Predict("question, history: dspy.History -> answer")
    lm = DummyLM([{"answer": "Paris"}, {"answer": "About 2 million"}])
    history = dspy.History(messages=[])
    first = record(predict, lm, question="Capital of France?", history=history)
    history = dspy.History(messages=[{"question": "Capital of France?", "answer": "Paris"}])
    second = record(predict, lm, question="Its population?", history=history)
    assert len(first) == len(second) == 1
    [lm_call] = calls_of(second[0], m.LMCall)
    messages = lm_call.entry.request.messages
    assert [msg.role for msg in messages] == ["system", "user", "assistant", "user"]
    texts = [msg.parts[0].text for msg in messages]
    assert "Capital of France?" in texts[1] and "Paris" in texts[2] and "Its population?" in texts[3]
    assert_round_trips_and_conforms(second[0])


def test_runs_in_parallel_threads_are_separate_and_complete():
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    errors = []

    def run(i: int) -> None:
        lm = DummyLM([{"next_thought": "t", "next_tool_name": "add", "next_tool_args": {"a": i, "b": 1}},
                      {"next_thought": "done", "next_tool_name": "finish", "next_tool_args": {}},
                      {"reasoning": "r", "answer": str(i + 1)}])
        try:
            with dspy.context(lm=lm, callbacks=[recorder]):
                dspy.ReAct("question -> answer", tools=[add])(question=f"{i} + 1?")
        except Exception as err:  # surfaced below: a thread's exception would otherwise vanish
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and recorder.errors == []
    assert len(sink.traces) == 6
    answers = sorted(t.calls[0].output_summary["answer"] for t in sink.traces)
    assert answers == sorted(str(i + 1) for i in range(6))
    for trace in sink.traces:
        [first_tool, _] = calls_of(trace, m.ToolExecution)
        assert first_tool.tool_result.result == first_tool.tool_call.args["a"] + 1
        assert len(calls_of(trace, m.LMCall)) == 3


def test_a_module_that_raises_is_recorded_with_its_error():
    class Boom(dspy.Module):
        def forward(self, x):
            raise RuntimeError("kaboom")

    sink = MemorySink()
    with dspy.context(callbacks=[TraceRecorder(sink)]), pytest.raises(RuntimeError):
        Boom()(x=1)
    [trace] = sink.traces
    assert trace.calls[0].error == "RuntimeError: kaboom" and trace.calls[0].output_summary is None
    assert_round_trips_and_conforms(trace)


@pytest.mark.parametrize("background", [True, False], ids=["in its own process", "in the program's thread"])
@pytest.mark.parametrize("suffix", [".nq", ".jsonl"])
def test_a_file_sink_appends_runs_that_read_back_equal(tmp_path, suffix, background):
    from dspy_rdf import read_traces

    path = tmp_path / f"runs{suffix}"
    recorder = TraceRecorder(FileSink(path, background=background))
    memory = MemorySink()
    recorder.on_run = memory.write
    for question in ("a?", "b?"):
        with dspy.context(lm=react_lm(), callbacks=[recorder]):
            dspy.ReAct("question -> answer", tools=[add, divide])(question=question)
    assert recorder.flush()
    if suffix == ".nq":
        back = [t for _, t in parse_traces(path, RdfFormat.N_QUADS)]
        assert sorted(back, key=lambda t: t.started_at) == memory.traces
    else:
        back = [item.trace for item in read_traces(path)]
        assert [t.source_index for t in back] == [0, 1]
        for trace in back:
            trace.source_index = None  # the line number in the file; a recorded run has none
        assert back == memory.traces


@pytest.mark.parametrize("kind", ["embedded", "remote"])
def test_a_store_sink_puts_each_run_as_a_whole_conforming_graph(kind, tmp_path, request):
    from dspy_rdf.analytics.catalog import run_query
    from dspy_rdf.canonical.identity import trace_iri
    from dspy_rdf.store import EmbeddedStore, StoreLockedError
    from dspy_rdf.validation import validate_store

    if kind == "remote":
        store = request.getfixturevalue("remote_store")
        sink = StoreSink(store)
    else:
        sink = StoreSink(tmp_path / "store")  # opened and written by the sink's own process
    recorder = TraceRecorder(sink)
    memory = MemorySink()
    recorder.on_run = memory.write
    for question in ("a?", "b?"):
        with dspy.context(lm=react_lm(), callbacks=[recorder]):
            dspy.ReAct("question -> answer", tools=[add, divide])(question=question)
    if kind == "embedded":
        with pytest.raises(StoreLockedError):  # the writer process holds it until the sink is closed
            EmbeddedStore(tmp_path / "store", read_only=True)
        sink.close()
        store = EmbeddedStore(tmp_path / "store", read_only=True)
    assert recorder.errors == []
    assert sorted(store.trace_iris()) == sorted(trace_iri(t) for t in memory.traces)
    assert validate_store(store).conforms
    rows = {row["tool"]: row for row in run_query(store, "tool_error_rate").records()}
    assert (rows["add"]["results"], rows["add"]["errors"], rows["divide"]["results"], rows["divide"]["errors"]) == (2, 0, 2, 2)
    sink.close()
    if kind == "embedded":
        store.close()


def test_a_file_sink_refuses_formats_that_cannot_be_appended(tmp_path):
    with pytest.raises(ValueError, match=r"\.nq\) or JSON Lines"):
        FileSink(tmp_path / "runs.ttl")


def test_summaries_cut_long_strings_and_describe_objects():
    summary = summarize({"text": "x" * 3000, "obj": object(), "n": [1, 2.5, None, float("nan")]}, max_chars=10)
    assert summary["text"] == "x" * 10 + "… [2990 more characters]"
    assert summary["obj"].startswith("<object ob… [")
    assert summary["n"] == [1, 2.5, None, "nan"]


# --- the converters' fast paths, against the plain walk they shortcut ------------------------------------------------
# json_data and summarize take the strings, integers, booleans and None inside a container without a call of their own
# (live capture converts every LM call's history entry while the program waits). These references walk every value
# the plain way; both must give the same JSON and the same losses, at the same places, for any value, and hold plain
# builtins only (a string enum member as its value: a writer process cannot import the program's classes).

import enum  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dspy_rdf.sources.live import MAX_DEPTH, json_data, text_of, unicode_text  # noqa: E402


class _Colour(enum.Enum):
    RED = "red"


class _Label(str):
    pass


class _Count(int):
    pass


class _Unit(str, enum.Enum):  # its str() is "_Unit.C", its JSON (and the recorded value) "celsius"
    C = "celsius"


class _Level(enum.IntEnum):
    HIGH = 3


def _plain(value):
    """A string, integer or float of a subclass as the plain value it holds (what a recorded run keeps)."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__int__(value)
    return float.__float__(value) if isinstance(value, float) else value


def _key(k, path, losses):
    return unicode_text(_plain(k), path, losses) if isinstance(k, str) else text_of(k, path, losses)


def _only_builtins(value) -> bool:
    if isinstance(value, dict):
        return all(type(k) is str and _only_builtins(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_only_builtins(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


def _reference_json(value, path, losses, depth=0):
    if isinstance(value, str):
        return unicode_text(_plain(value), path, losses)
    if value is None or isinstance(value, (bool, int)):
        return _plain(value)
    if isinstance(value, float) or depth >= MAX_DEPTH:
        return json_data(value, path=path, losses=losses)  # not what the fast paths touch
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = _key(k, path, losses)
            out[key] = _reference_json(v, f"{path}.{key}" if path else key, losses, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_reference_json(v, f"{path}[{i}]", losses, depth + 1) for i, v in enumerate(value)]
    return json_data(value, path=path, losses=losses)  # objects: not what the fast paths touch


def _reference_summary(value, max_chars, losses, path):
    if value is None or isinstance(value, (bool, int)):
        return _plain(value)
    if isinstance(value, float):
        return _plain(value) if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        text = unicode_text(_plain(value), path, losses)
        return text if len(text) <= max_chars else text[:max_chars] + f"… [{len(text) - max_chars} more characters]"
    if isinstance(value, dict):
        items = list(value.items())
        out = {}
        for k, v in items[:200]:
            key = _key(k, path, losses)
            out[key] = _reference_summary(v, max_chars, losses, f"{path}.{key}" if path else key)
        if len(items) > 200:
            out["…"] = f"{len(items) - 200} more items"
        return out
    if isinstance(value, (list, tuple)):
        out_list = [_reference_summary(v, max_chars, losses, f"{path}[{i}]") for i, v in enumerate(value[:200])]
        if len(value) > 200:
            out_list.append(f"… {len(value) - 200} more items")
        return out_list
    return summarize(value, max_chars=max_chars, losses=losses, path=path)


_TEXT = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),  # lone surrogates
    st.text(alphabet="ab", min_size=40, max_size=60),  # over the summaries' max_chars below
    st.builds(_Label, st.text(max_size=5)),
    st.just(_Unit.C),
)
_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.builds(_Count, st.integers(0, 9)), st.just(_Level.HIGH), st.floats(),
    _TEXT, st.just(_Colour.RED), st.just(b"bytes"),
)
_KEYS = st.one_of(_TEXT, st.integers(), st.booleans(), st.none(), st.tuples(st.integers()), st.just(_Colour.RED))
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.lists(inner, max_size=3).map(tuple), st.dictionaries(_KEYS, inner, max_size=6),
        st.lists(st.none(), min_size=201, max_size=203),  # more items than a summary keeps
    ),
    max_leaves=40,
)


def _same(fast, reference) -> bool:
    dump = lambda v: json.dumps(v, sort_keys=True, default=str, ensure_ascii=True)  # noqa: E731 - bytes kept as text
    return dump(fast) == dump(reference)


@settings(max_examples=examples(300), deadline=None)
@given(_VALUES)
def test_json_data_gives_what_the_plain_walk_gives(value):
    fast_losses: list = []
    reference_losses: list = []
    fast = json_data({"v": value}, path="entry", losses=fast_losses)
    reference = _reference_json({"v": value}, "entry", reference_losses)
    assert _same(fast, reference) and _only_builtins(fast)
    assert [x["field"] for x in fast_losses] == [x["field"] for x in reference_losses]


@settings(max_examples=examples(300), deadline=None)
@given(_VALUES)
def test_summaries_give_what_the_plain_walk_gives(value):
    fast_losses: list = []
    reference_losses: list = []
    fast = summarize({"v": value}, max_chars=50, losses=fast_losses, path="input_summary")
    reference = _reference_summary({"v": value}, 50, reference_losses, "input_summary")
    assert _same(fast, reference) and _only_builtins(fast)
    assert fast_losses == reference_losses


def test_a_response_format_given_as_a_pydantic_class_is_kept_as_the_schema_the_provider_is_sent():
    """DSPy's JSONAdapter passes its output model class as ``response_format``: it is kept as LiteLLM sends it, not
    as a loss."""
    import pydantic
    from litellm.utils import type_to_response_format_param

    from dspy_rdf.sources.live import json_data

    class Proposal(pydantic.BaseModel):
        new_instruction: str

    losses: list[dict[str, str]] = []
    kept = json_data({"response_format": Proposal}, losses=losses)
    assert losses == [] and kept == {"response_format": type_to_response_format_param(Proposal)}
    assert kept["response_format"]["json_schema"]["schema"]["required"] == ["new_instruction"]
