"""The named-query library of dspy_rdf.analytics.catalog against a real on-disk store: real traces, recorded DSPy program
runs and traces with hostile names; every expected number is computed in Python from the trace objects, or counted by
the tools of the recorded programs themselves."""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import dspy
import pytest
from conftest import clear_traces
from dspy.utils import DummyLM
from lms import EchoLM, ScriptedLM, fields, tool_call
from traced_programs import CallTools, add, divide

from dspy_rdf.analytics.catalog import (
    FORMATS,
    QueryResult,
    bind_parameters,
    check_user_sparql,
    get_query,
    list_queries,
    run_query,
    sparql_term,
)
from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.identity import DEFAULT_BASE, trace_iri
from dspy_rdf.capture.recorder import MemorySink, TraceRecorder
from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.writer import trace_lines
from dspy_rdf.sources.tracejson import trace_from_json
from dspy_rdf.store import EmbeddedStore
from dspy_rdf.store.ledger import reads_maxima, stale_maxima
from dspy_rdf.store.base import encode_traces
from dspy_rdf.store.remote import RemoteStore

DATA = Path(__file__).parent / "data"
FIXTURES = (
    "dspy341_history_dicts.json",
    "dspy341_react_trajectory.json",
    "dspy341_lm15_request.json",
    "openai_exchange_tool_loop.json",
    "history_entry_all_parts.json",
    "react_history.json",
)
HOSTILE = ['" } ; DROP ALL #', "a'b\"c", "x }\n} #", "<http://evil/> ?x", "back\\slash\\", "tab\tline\r\nend", "\\u0022 } #", "\"\"\""]
BIG = {"limit": "100000"}

EXPECTED_COLUMNS = {
    "finish_reasons": ["finish_reason", "outputs", "traces", "truncated"],
    "lm_calls_per_module": ["module_class", "lm_calls", "timed_calls", "total_seconds", "mean_seconds", "max_seconds"],
    "longest_conversations": ["trace", "source_kind", "messages", "lm_calls", "tool_calls", "tool_results", "input_tokens", "output_tokens", "cost"],
    "orphan_tool_results": ["trace", "source_kind", "tool", "call_id", "is_error", "parts", "result"],
    "part_kinds": ["part_type", "parts", "traces"],
    "refusal_traces": ["trace", "source_kind", "refusals", "example"],
    "slowest_tool_executions": ["trace", "tool", "seconds", "failed", "error", "started_at", "execution"],
    "tokens_cost_per_model_day": ["model", "day", "lm_calls", "usage_calls", "input_tokens", "output_tokens", "total_tokens", "cost", "priced_calls"],
    "tokens_per_model": ["model", "lm_calls", "usage_calls", "input_tokens", "output_tokens", "cost", "priced_calls"],
    "tool_argument_frequency": ["tool", "args", "calls", "parts", "executions", "traces"],
    "tool_calls_per_tool": ["tool", "calls", "parts", "executions"],
    "tool_error_rate": ["tool", "results", "errors", "error_rate"],
    "tool_latency_per_tool": ["tool", "executions", "failed", "error_rate", "timed", "p50_seconds", "p95_seconds", "max_seconds"],
    "tools_offered_never_called": ["tool", "requests", "traces"],
    "unanswered_tool_calls": ["trace", "source_kind", "tool", "call_id", "parts", "call"],
    "tool_calls_not_offered": ["trace", "tool", "call", "request"],
    "duplicate_tool_call_ids": ["trace", "holder", "call_id", "calls"],
    "session_summary": ["session", "runs", "users", "user", "lm_calls", "priced_calls", "cost", "tool_errors", "first_started", "last_started"],
    "session_runs": ["session", "trace", "user", "started_at", "ended_at", "lm_calls", "priced_calls", "cost", "tool_errors", "error"],
    "candidate_lineage": [
        "trace", "compilation", "optimizer", "ancestors", "candidate", "program", "optimizer_score", "best_evaluation_score",
        "evaluation_count", "evaluation_cost", "making_cost",
    ],
    "candidate_gains": [
        "trace", "compilation", "ancestors", "candidate", "program", "parent", "parent_program", "score", "parent_score", "gain",
        "cost", "gain_per_dollar",
    ],
    "program_scores": [
        "program", "program_class", "evaluations", "best_score", "mean_score", "evaluation_lm_calls", "evaluation_input_tokens",
        "evaluation_output_tokens", "evaluation_cost", "compilations", "compile_lm_calls", "compile_input_tokens",
        "compile_output_tokens", "compile_cost",
    ],
}


# --- the data: real traces, recorded program runs, hostile names ----------------------------------------


def recorded_runs() -> list[m.Trace]:
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    react_lm = DummyLM([
        {"next_thought": "Add first.", "next_tool_name": "add", "next_tool_args": {"a": 2, "b": 3}},
        {"next_thought": "Now divide by zero.", "next_tool_name": "divide", "next_tool_args": {"a": 5, "b": 0}},
        {"next_thought": "That failed; finish.", "next_tool_name": "finish", "next_tool_args": {}},
        {"reasoning": "2 + 3 = 5", "answer": "5"},
    ])
    with dspy.context(lm=react_lm, callbacks=[recorder]):
        dspy.ReAct("question -> answer", tools=[add, divide])(question="2 + 3, then / 0?")
    tools_lm = DummyLM([{"tool_calls": {"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}, {"name": "divide", "args": {"a": 1, "b": 0}}]}}])
    with dspy.context(lm=tools_lm, callbacks=[recorder]):
        CallTools()(question="1+2 and 1/0")
    # an optimizer run, then two evaluations of what it returned (the real dspy.LM, offline)
    devset = [dspy.Example(question=f"say {w}", answer=w).with_inputs("question") for w in ("a", "b", "c", "d")]

    def exact(example, prediction, trace=None):
        return example.answer == prediction.answer

    with dspy.context(lm=EchoLM(), callbacks=[recorder]):
        compiled = dspy.BootstrapFewShot(metric=exact, max_bootstrapped_demos=2, max_labeled_demos=2).compile(dspy.Predict("question -> answer"), trainset=devset)
        dspy.Evaluate(devset=devset, metric=exact, num_threads=2, display_progress=False)(compiled)
        dspy.Evaluate(devset=devset[:2], metric=exact, num_threads=1, display_progress=False)(compiled)
        dspy.Evaluate(devset=devset[:2], metric=exact, num_threads=1, display_progress=False)(dspy.Predict("question -> answer"))
    assert recorder.errors == [] and len(sink.traces) == 6
    return sink.traces


# --- recorded programs whose tools count what they did ------------------------------------------------------


def canonical_json(value) -> str:
    """JSON as the store writes ``dspy:args``: keys sorted, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass
class ToolLedger:
    """What the tools of one program run did, counted inside the tools: calls, failures and arguments per tool."""

    calls: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    args: Counter = field(default_factory=Counter)  # (tool, canonical JSON of the arguments) -> calls

    def tools(self, prefix: str) -> list:
        """``add`` and ``divide`` (which raises on a zero divisor), named ``<prefix>_add`` and ``<prefix>_divide``."""

        def add(a: int, b: int) -> int:
            """Add two integers."""
            self.count(f"{prefix}_add", a=a, b=b)
            return a + b

        def divide(a: int, b: int) -> float:
            """Divide a by b."""
            self.count(f"{prefix}_divide", a=a, b=b)
            try:
                return a / b
            except ZeroDivisionError:
                self.errors[f"{prefix}_divide"] += 1
                raise

        for tool in (add, divide):
            tool.__name__ = tool.__qualname__ = f"{prefix}_{tool.__name__}"
        return [add, divide]

    def count(self, tool: str, **args) -> None:
        self.calls[tool] += 1
        self.args[(tool, canonical_json(args))] += 1


class ToolLoop(dspy.Module):
    """A tool loop written by hand, the OpenAI way: the model asks for tools natively, the program runs each call
    through its ``dspy.Tool`` and sends every result back as a ``role=tool`` message (a failure as its error text,
    not flagged as an error), then asks the model again."""

    def __init__(self, tools) -> None:
        super().__init__()
        self.tools = {t.name: t for t in map(dspy.Tool, tools)}

    def forward(self, question: str):
        lm = dspy.settings.lm
        messages = [{"role": "user", "content": question}]
        specs = [t.format_as_litellm_function_call() for t in self.tools.values()]
        calls = lm(messages=list(messages), tools=specs)[0]["tool_calls"]
        messages.append({"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in calls]})
        for call in calls:
            try:
                result = str(self.tools[call.function.name](**json.loads(call.function.arguments)))
            except ZeroDivisionError as err:
                result = f"error: {err}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return lm(messages=list(messages))


def run_parallel_calls(ledger: ToolLedger) -> None:
    """Native function calling: one response asks for three calls in parallel, each run once through dspy.Tool."""
    script = [[
        tool_call("call_1", "parallel_add", '{"a": 2, "b": 3}'),
        tool_call("call_2", "parallel_add", '{"a": 4, "b": 5}'),
        tool_call("call_3", "parallel_divide", '{"a": 1, "b": 0}'),
    ]]  # fmt: skip
    with dspy.context(lm=ScriptedLM(script), adapter=dspy.ChatAdapter(use_native_function_calling=True)):
        CallTools(ledger.tools("parallel"))(question="2 + 3, 4 + 5 and 1 / 0")


def run_tool_loop(ledger: ToolLedger) -> None:
    """The hand-written loop: each call's part is replayed in the second request, with its result as a tool message."""
    script = [[tool_call("call_a", "loop_divide", '{"a": 6, "b": 3}'), tool_call("call_b", "loop_divide", '{"a": 1, "b": 0}')], "2, and 1 / 0 failed"]
    with dspy.context(lm=ScriptedLM(script)):
        ToolLoop(ledger.tools("loop"))(question="6 / 3 and 1 / 0?")


def run_react(ledger: ToolLedger) -> None:
    """dspy.ReAct: the model names each tool in text fields, one a turn; ReAct runs its own finish tool too."""
    script = [
        fields(next_thought="Add first.", next_tool_name="react_add", next_tool_args='{"a": 2, "b": 3}'),
        fields(next_thought="Now divide by zero.", next_tool_name="react_divide", next_tool_args='{"a": 5, "b": 0}'),
        fields(next_thought="Add again.", next_tool_name="react_add", next_tool_args='{"a": 2, "b": 3}'),
        fields(next_thought="Done.", next_tool_name="finish", next_tool_args="{}"),
        fields(reasoning="2 + 3 = 5", answer="5"),
    ]
    with dspy.context(lm=ScriptedLM(script)):
        dspy.ReAct("question -> answer", tools=ledger.tools("react"))(question="2 + 3, then / 0?")


def run_react_v2(ledger: ToolLedger) -> None:
    """dspy.ReActV2: the model asks for several tools a turn in a text field (a JSON list of calls); ReActV2 runs its
    own submit tool too."""
    calls = [{"name": "reactv2_add", "args": {"a": 2, "b": 3}}, {"name": "reactv2_divide", "args": {"a": 5, "b": 0}}]
    script = [
        fields(next_thought="Add, then divide.", tool_calls=json.dumps({"tool_calls": calls})),
        fields(next_thought="Submit.", tool_calls=json.dumps({"tool_calls": [{"name": "submit", "args": {"answer": "5"}}]})),
    ]
    with dspy.context(lm=ScriptedLM(script)):
        dspy.ReActV2("question -> answer", tools=ledger.tools("reactv2"))(question="2 + 3, then / 0?")


class ForgetfulLoop(dspy.Module):
    """A program that never runs the tool call the model asks for, yet asks the model twice more with that call still
    in the conversation (each request replays it), next to the result of a call the conversation no longer shows."""

    def forward(self, question: str):
        def lost_lookup(key: str) -> str:
            """Look a key up."""
            raise AssertionError("never run")

        lm = dspy.settings.lm
        specs = [dspy.Tool(lost_lookup).format_as_litellm_function_call()]
        messages = [{"role": "user", "content": question}]
        calls = lm(messages=list(messages), tools=specs)[0]["tool_calls"]
        messages.append({"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in calls]})
        messages.append({"role": "tool", "tool_call_id": "call_gone", "content": "a result from an earlier conversation"})
        for _ in range(2):
            messages.append({"role": "user", "content": "Answer without the tool."})
            messages.append({"role": "assistant", "content": lm(messages=list(messages), tools=specs)[0]})  # a text answer


def recorded_forgetful_run(calls: list | None = None, question: str = "What is k?") -> m.Trace:
    """ForgetfulLoop on the real dspy.LM (offline), recorded: by default one call of ``lost_lookup`` carried by three
    parts and answered by none (or the tool calls ``calls``, none answered), and one result (call id ``call_gone``)
    carried by two parts that answers no call."""
    sink = MemorySink()
    script = [calls or [tool_call("call_lost", "lost_lookup", '{"key": "k"}')], "I cannot.", "Still cannot."]
    with dspy.context(lm=ScriptedLM(script), callbacks=[TraceRecorder(sink)]):
        ForgetfulLoop()(question=question)
    [trace] = sink.traces
    return trace


@dataclass(frozen=True)
class Scenario:
    """A recorded program run whose tools are named ``<name>_add`` and ``<name>_divide``, and the tool-call parts
    that carry each of its calls (the model's response, plus each later request that replays the call)."""

    name: str
    run: Callable[[ToolLedger], None]
    parts_per_call: int


SCENARIOS = [
    Scenario("parallel", run_parallel_calls, parts_per_call=1),
    Scenario("loop", run_tool_loop, parts_per_call=2),
    Scenario("react", run_react, parts_per_call=0),
] + ([Scenario("reactv2", run_react_v2, parts_per_call=1)] if hasattr(dspy, "ReActV2") else [])


def recorded_scenarios() -> tuple[list[m.Trace], dict[str, ToolLedger]]:
    """Each scenario run once on the real dspy.LM (offline) and recorded by the capture callback: its trace and what
    its tools counted."""
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    ledgers = {}
    for scenario in SCENARIOS:
        ledgers[scenario.name] = ledger = ToolLedger()
        with dspy.context(callbacks=[recorder]):
            scenario.run(ledger)
    assert recorder.errors == [] and len(sink.traces) == len(SCENARIOS)
    assert all(ledger.errors[f"{name}_divide"] == 1 for name, ledger in ledgers.items())
    return sink.traces, ledgers


def unused(name: str) -> str:
    """The name of a tool that a hostile run offers and never calls (the hostile name itself is called)."""
    return f"unused {name}"


def hostile_run(name: str, day: int) -> m.Trace:
    """A program run in which the module class, model, tool, args, finish reason, session and user are all ``name``."""
    part = m.LMToolCallPart(name=name, call_id="c1", args={name: name})
    unanswered = m.LMToolCallPart(name=name, call_id="c2")  # no result in the run
    orphan = m.LMToolResultPart(call_id="c0", name=name, content=[m.LMTextPart(text="late")])  # answers no call of the run
    messages = [m.LMMessage(role="user", parts=[m.LMTextPart(text=name)]), m.LMMessage(role="tool", parts=[orphan])]
    entry = m.LMHistoryEntry(
        request=m.LMRequest(model=name, messages=messages, tools=[m.LMToolSpec(name=f"offered {day}"), m.LMToolSpec(name=unused(name))]),  # not `name`
        response=m.LMResponse(outputs=[m.LMOutput(parts=[part, unanswered], finish_reason=name)], usage=m.LMUsage(input_tokens=7, output_tokens=day), cost=0.5),
        timestamp=f"2031-01-{day:02d}T10:00:00",
        uuid=f"u-{day}",
    )
    t0 = f"2031-01-{day:02d}T10:00:00+00:00"
    return m.Trace(
        source_kind="program_run",
        source_format="dspy_callback",
        session_id=name,
        user_id=name,
        started_at=t0,
        ended_at=f"2031-01-{day:02d}T10:00:09+00:00",
        calls=[
            m.ModuleCall(module_class=name, started_at=t0, ended_at=f"2031-01-{day:02d}T10:00:09+00:00"),
            m.LMCall(parent_call=0, model=name, entry=entry, started_at=f"2031-01-{day:02d}T10:00:01+00:00", ended_at=f"2031-01-{day:02d}T10:00:03.5+00:00"),
            m.ToolExecution(
                parent_call=0,
                tool_call=m.ToolCall(name=name, call_id="c1", args={name: name}),
                tool_result=m.ToolResult(is_error=True, error="boom"),
                answers=m.PartRef(call=1, output=0, part=0),
                pairing="call_id",
                started_at=f"2031-01-{day:02d}T10:00:04+00:00",
                ended_at=f"2031-01-{day:02d}T10:00:0{day % 5 + 5}+00:00",
            ),
            m.EvaluateCall(  # an evaluation of a program whose fingerprint is the hostile name
                parent_call=0, program_fingerprint=name, program_class=name, metric=name, devset_size=1, score=50.0,
                started_at=f"2031-01-{day:02d}T10:00:04+00:00", ended_at=f"2031-01-{day:02d}T10:00:05+00:00",
            ),
        ],
    )


def conversation_runs() -> list[m.Trace]:
    """Two priced runs of one conversation for one user (their costs add up to a whole dollar), and a run that raised:
    the hostile runs without their evaluation."""
    runs = []
    for day in (20, 21, 22):
        run = hostile_run(f"conversation {day}", day)
        run.calls = [call for call in run.calls if not isinstance(call, m.EvaluateCall)]
        runs.append(dataclasses.replace(run, session_id="conversation", user_id="dave"))
    runs[-1].calls[0].error = "RuntimeError: the program gave up"
    return runs


def session_truth(traces: list[m.Trace]) -> tuple[list[dict], list[dict]]:
    """The rows of session_summary and session_runs, in their order, computed from the model (not from RDF)."""
    runs = []
    for trace in traces:
        if trace.session_id is None:
            continue
        framework = framework_names([trace])
        lm_calls = [c for c in trace.calls if isinstance(c, m.LMCall)]
        costs = [c.entry.response.cost for c in lm_calls if c.entry is not None and c.entry.response is not None and c.entry.response.cost is not None]
        failed = [c for c in trace.calls if isinstance(c, m.ToolExecution) and c.tool_call.name not in framework and execution_failed(c)]
        raised = [c.error for c in trace.calls if c.parent_call is None and c.error is not None]
        runs.append({
            "session": trace.session_id, "trace": trace_iri(trace), "user": trace.user_id, "started_at": trace.started_at,
            "ended_at": trace.ended_at, "lm_calls": len(lm_calls), "priced_calls": len(costs), "cost": sum(costs) if costs else None,
            "tool_errors": len(failed), "error": min(raised, default=None),
        })  # fmt: skip
    runs.sort(key=lambda r: (r["session"], _instant(r["started_at"]), r["trace"]))
    summary = []
    for session in sorted({r["session"] for r in runs}):
        mine = [r for r in runs if r["session"] == session]
        users = {r["user"] for r in mine if r["user"] is not None}
        starts = [r["started_at"] for r in mine if r["started_at"] is not None]
        priced = sum(r["priced_calls"] for r in mine)
        summary.append({
            "session": session, "runs": len(mine), "users": len(users), "user": next(iter(users)) if len(users) == 1 else None,
            "lm_calls": sum(r["lm_calls"] for r in mine), "priced_calls": priced,
            "cost": sum(r["cost"] for r in mine if r["cost"] is not None) if priced else None,
            "tool_errors": sum(r["tool_errors"] for r in mine), "first_started": min(starts, default=None), "last_started": max(starts, default=None),
        })  # fmt: skip
    summary.sort(key=lambda r: (_instant(r["first_started"]), r["session"]))
    return summary, runs


def _instant(text: str | None) -> tuple:
    """A time as SPARQL orders it: an unbound one first."""
    return () if text is None else (datetime.fromisoformat(text),)


def misbehaving_model() -> m.Trace:
    """A history entry in which the model called a tool it was not offered and reused a call id."""
    data = json.loads((DATA / "history_entry_all_parts.json").read_text(encoding="utf-8"))
    for output in data["response"]["outputs"]:
        calls = [p for p in output["parts"] if p["type"] == "tool_call"]
        if calls:
            calls[0]["name"] = "hallucinated_tool"
            output["parts"].append(dict(calls[-1], args={"again": True}))
    return trace_from_json(data)


def midnight_run() -> m.Trace:
    """A tool execution that spans midnight at the end of a month and year (a latency of 1.25 s), in a session of its
    own, a run with no start time of its own."""
    return m.Trace(
        source_kind="program_run",
        source_format="dspy_callback",
        session_id="midnight",
        user_id="carol",
        calls=[m.ToolExecution(tool_call=m.ToolCall(name="midnight"), started_at="2030-12-31T23:59:59.5+00:00", ended_at="2031-01-01T00:00:00.75+00:00")],
    )


# latencies of the "timed" tool's executions: every magnitude, ties, bucket edges; one execution has no end
TIMED_LATENCIES = [0.0004, 0.0004, 0.003, 0.0199, 0.02, 0.099, 0.1, 0.1, 0.105, 0.99, 1.0, 1.25, 1.25, 1.25, 1.26, 1.3,
                   2.0, 9.99, 10.0, 42.5, 99.9, 450.0, 1000.0, 2500.0]


def latency_runs() -> list[m.Trace]:
    """Program runs whose tool executions have the latencies of ``TIMED_LATENCIES`` (spread over three runs, some
    failing), one execution with no end, and a tool whose single execution took 7 s."""
    start = datetime.fromisoformat("2032-03-01T12:00:00+00:00")
    runs = []
    for run in range(3):
        calls = []
        for n, latency in enumerate(TIMED_LATENCIES[run::3]):
            began = start + timedelta(minutes=n)
            calls.append(m.ToolExecution(
                tool_call=m.ToolCall(name="timed", args={"n": n}),
                started_at=began.isoformat(),
                ended_at=(began + timedelta(seconds=latency)).isoformat(),
                error="TimeoutError(slow)" if latency > 100 else None,
            ))
        runs.append(m.Trace(
            source_kind="program_run", source_format="dspy_callback", calls=calls, started_at=f"2032-03-0{run + 1}T00:00:00+00:00",
            session_id="timed runs", user_id=("alice", None, "bob")[run],  # one session, two users and a run for none
        ))  # fmt: skip
    runs[0].calls.append(m.ToolExecution(tool_call=m.ToolCall(name="timed"), started_at="2032-03-01T13:00:00+00:00"))
    runs[1].calls.append(m.ToolExecution(tool_call=m.ToolCall(name="once"), started_at="2032-03-01T13:00:00+00:00", ended_at="2032-03-01T13:00:07+00:00"))
    return runs


def nearest_rank(values: list[float], percent: int) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(percent * len(ordered) / 100) - 1]


@pytest.fixture(scope="module")
def scenario_runs() -> tuple[list[m.Trace], dict[str, ToolLedger]]:
    return recorded_scenarios()


@pytest.fixture(scope="module")
def traces(scenario_runs) -> list[m.Trace]:
    out = [item.trace for item in read_traces(bundled_traces_path())]
    out += [trace_from_json(json.loads((DATA / name).read_text(encoding="utf-8"))) for name in FIXTURES]
    out += recorded_runs()
    out += scenario_runs[0]
    out.append(recorded_forgetful_run())
    out += [hostile_run(name, day) for day, name in enumerate(HOSTILE, start=1)]
    out.append(midnight_run())
    out += latency_runs()
    out.append(misbehaving_model())
    out += conversation_runs()
    unique = {}  # a fixture may hold the same trace as a bundled one: one graph per trace IRI
    for trace in out:
        unique.setdefault(trace_lines(trace)[0], trace)
    return list(unique.values())


STORES = ("embedded", "oxigraph", "virtuoso")


@pytest.fixture(scope="module", params=STORES)
def store(request, traces, tmp_path_factory):
    """The test traces in each kind of store: the embedded store on disk, a real ``oxigraph serve`` and a real
    Virtuoso 7, each written by ``put``; every query must give each of them the same answer."""
    with pytest.MonkeyPatch.context() as env:
        if request.param == "embedded":
            opened = EmbeddedStore(tmp_path_factory.mktemp("store") / "db")
        elif request.param == "oxigraph":
            opened = RemoteStore(request.getfixturevalue("oxigraph_server"), max_attempts=2)
            opened.update("CLEAR ALL")
        else:
            server = request.getfixturevalue("virtuoso_server")
            for name, value in server.env.items():
                env.setenv(name, value)
            opened = RemoteStore(server.url, max_attempts=2)
            clear_traces(opened)
        with opened as s:
            report = s.put(traces)
            assert report.failed == [] and len(report.written) == len(traces)
            yield s


# --- Python ground truth ---------------------------------------------------------------------------------


def walk(obj):
    """Every dataclass object inside ``obj`` (itself included), each occurrence once."""
    if dataclasses.is_dataclass(obj):
        yield obj
        for f in dataclasses.fields(obj):
            yield from walk(getattr(obj, f.name))
    elif isinstance(obj, list):
        for item in obj:
            yield from walk(item)


def of(trace: m.Trace, cls: type) -> list:
    return [o for o in walk(trace) if isinstance(o, cls)]


def seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def answered_part(trace: m.Trace, execution: m.ToolExecution) -> m.LMToolCallPart | None:
    """The tool-call part a tool execution answers, if any."""
    if (ref := execution.answers) is None:
        return None
    call = trace.calls[ref.call]
    return call.tool_calls[ref.part] if ref.output is None else call.entry.response.outputs[ref.output].parts[ref.part]


def answered_parts(trace: m.Trace) -> set[int]:
    """ids of the tool-call parts of a trace that a tool result (same call id) or tool execution answers."""
    calls = of(trace, m.LMToolCallPart)
    result_ids = {r.call_id for r in of(trace, m.LMToolResultPart) if r.call_id is not None}
    out = {id(p) for p in calls if p.call_id is not None and p.call_id in result_ids}
    out |= {id(part) for ex in of(trace, m.ToolExecution) if (part := answered_part(trace, ex)) is not None}
    return out


@dataclass
class ToolCallTruth:
    """One tool call as users count them, and what carried, ran and answered it."""

    tool: str
    parts: list = field(default_factory=list)  # its tool-call parts
    executions: list = field(default_factory=list)  # the tool executions of it
    results: list = field(default_factory=list)  # the tool-result parts answering it

    @property
    def failed(self) -> bool:
        return any(r.is_error for r in self.results) or any(execution_failed(ex) for ex in self.executions)


FRAMEWORK_MODULES = {"ReAct": "finish", "CodeAct": "finish", "ReActV2": "submit"}
"""The tool each of DSPy's agent modules adds itself."""


def framework_names(traces: list[m.Trace]) -> set[str]:
    """The names of the tools DSPy's own modules added in these traces (found from their module calls, not by the
    writer's code), which the tool queries leave out, by name, unless asked for."""
    return {FRAMEWORK_MODULES[c.module_class] for t in traces for c in of(t, m.ModuleCall) if c.module_class in FRAMEWORK_MODULES}


def execution_failed(execution: m.ToolExecution) -> bool:
    return bool((execution.tool_result and execution.tool_result.is_error) or execution.error)


def tool_calls(trace: m.Trace) -> dict[tuple, ToolCallTruth]:
    """The tool calls of a trace by (tool, call): the tool-call parts of one call id are one call (a part without one
    is a call of its own), an execution that answers a part belongs to that part's call, one that answers none is a
    call of its own, and a tool-result part answers the calls of its call id."""
    calls: dict[tuple, ToolCallTruth] = {}

    def key(part: m.LMToolCallPart) -> tuple:
        return (part.name, "id", part.call_id) if part.call_id is not None else (part.name, "part", id(part))

    for part in of(trace, m.LMToolCallPart):
        calls.setdefault(key(part), ToolCallTruth(part.name)).parts.append(part)
    for ex in of(trace, m.ToolExecution):
        part = answered_part(trace, ex)
        found = key(part) if part is not None else (ex.tool_call.name, "execution", id(ex))
        calls.setdefault(found, ToolCallTruth(ex.tool_call.name)).executions.append(ex)
    for result in of(trace, m.LMToolResultPart):
        for (tool, kind, ident), call in calls.items():
            if kind == "id" and result.call_id == ident:
                call.results.append(result)
    return calls


# --- the library -----------------------------------------------------------------------------------------


def test_every_query_has_a_question_documented_parameters_and_named_graph_patterns():
    queries = {q.name: q for q in list_queries()}
    assert set(queries) == set(EXPECTED_COLUMNS)
    for q in queries.values():
        assert q.question.endswith("?") and q.text.startswith("# Question:")
        # a query over the ledger reads its entries' graphs (and looks up only the traces' nodes the ledger points to:
        # those of a few duration buckets or sizes); its scan version, the traces'
        assert "GRAPH ?trace {" in (q.scan or q.text)
        assert q.scan is None or ("GRAPH ?entry {" in q.text and q.scan.startswith("# Question:"))
        # call ids are only shown or counted (optional, or one arm of a per-node UNION), never joined on: pairs come
        # from dspy:answers (duplicate_tool_call_ids groups tool calls by their id: the id is what it is about)
        lines = [line.strip() for line in q.text.splitlines() if "dspy:call_id" in line and q.name != "duplicate_tool_call_ids"]
        assert all(line.startswith("OPTIONAL {") or "UNION { ?" in line for line in lines), q.name
        for p in q.parameters:
            assert p.type in ("string", "date", "int", "class") and p.description
            if p.name == "limit":
                assert int(p.default) >= 0


def test_the_limit_parameter_reaches_every_limit_of_a_query():
    """A top-N sub-SELECT keeps as many rows as the query returns: the limit parameter replaces each of its LIMITs."""
    for q in list_queries():
        if any(p.name == "limit" for p in q.parameters):
            bound = bind_parameters(q, {"limit": "7"})
            limits = re.findall(r"\bLIMIT\s+(\d+)", bound, re.I) + re.findall(r"VALUES \(\?limit\) \{ \((\d+)\) \}", bound)
            assert limits and set(limits) == {"7"}, q.name
    assert "VALUES (?limit) { (7) }" in bind_parameters(get_query("longest_conversations"), {"limit": "7"})


def test_every_query_runs_and_returns_its_columns(store):
    for q in list_queries():
        result = run_query(store, q.name)
        assert result.columns == EXPECTED_COLUMNS[q.name], q.name
        assert result.rows, f"{q.name} found nothing in the test store"
        assert all(len(row) == len(result.columns) for row in result.rows)


# The queries that look for exceptions start from facts the writer derives (dspy:refusal_count,
# dspy:unanswered_tool_call_parts, ...); these are the same queries over the raw triples, as they were before those
# facts existed. Each must give the same rows, on every store and with every parameter.
RAW_QUERIES = DATA / "raw_queries"
MAINTAINED_PARAMS = [
    ("refusal_traces", {}), ("refusal_traces", {"limit": "1"}), ("refusal_traces", BIG),
    ("duplicate_tool_call_ids", {}), ("duplicate_tool_call_ids", {"limit": "1"}),
    ("tool_calls_not_offered", BIG), ("tool_calls_not_offered", {"tool": "hallucinated_tool"}), ("tool_calls_not_offered", {"limit": "2"}),
    ("orphan_tool_results", BIG), ("orphan_tool_results", {"limit": "1"}),
    ("unanswered_tool_calls", BIG), ("unanswered_tool_calls", {"framework_tools": "1", "limit": "100000"}),
    ("unanswered_tool_calls", {"tool": "lost_lookup"}), ("unanswered_tool_calls", {"tool": "finish", "framework_tools": "1"}),
    ("unanswered_tool_calls", {"limit": "3"}), ("unanswered_tool_calls", {"limit": "1"}),
    ("unanswered_tool_calls", {"limit": "2", "framework_tools": "1"}),
]  # fmt: skip


def over_raw_triples(store, name: str, params: dict) -> QueryResult:
    """A canned query as it was before the writer derived the facts it starts from, with the same parameters."""
    query = dataclasses.replace(get_query(name), text=(RAW_QUERIES / f"{name}.rq").read_text(encoding="utf-8"))
    return QueryResult.from_json(store.select(bind_parameters(query, params)))


def test_the_raw_queries_are_the_canned_queries_they_replace():
    for path in sorted(RAW_QUERIES.glob("*.rq")):
        raw, canned = path.read_text(encoding="utf-8"), get_query(path.stem)
        assert raw.split("PREFIX", 1)[0].splitlines()[:1] == canned.text.splitlines()[:1], path.stem  # same question
        assert "dspy:unanswered_tool_call_parts" not in raw and "dspy:refusal_count" not in raw
    assert {name for name, _ in MAINTAINED_PARAMS} == {path.stem for path in RAW_QUERIES.glob("*.rq")}


@pytest.mark.parametrize(("name", "params"), MAINTAINED_PARAMS, ids=lambda value: value if isinstance(value, str) else "-".join(f"{k}={v}" for k, v in value.items()) or "defaults")
def test_each_query_over_derived_facts_gives_the_rows_of_the_query_over_raw_triples(store, name, params):
    maintained = run_query(store, name, params)
    raw = over_raw_triples(store, name, params)
    assert maintained.columns == raw.columns
    assert maintained.rows == raw.rows
    if params in ({}, BIG):
        assert raw.rows, f"{name} finds nothing in the test store: the comparison would prove nothing"


def test_unanswered_tool_calls_reads_only_the_first_traces_and_gives_every_row_of_the_raw_query_at_every_limit(traces, tmp_path):
    """The query picks the first traces with a call to show before it reads their calls: at every limit, whether
    DSPy's own tools are shown or not, its rows are the first rows of the raw query, in a store where traces hold
    several unanswered calls, some of them of ReAct's own finish tool."""
    forgetful = [
        recorded_forgetful_run(
            # the first run asks for finish alone
            [tool_call(f"call_{run}_{i}", name, json.dumps({"key": run})) for i, name in enumerate(["finish", "lost_lookup", "other_lookup"][: 1 + run % 3])],
            question=f"What is k{run}?",
        )
        for run in range(5)
    ]
    with EmbeddedStore(tmp_path / "db") as store:
        store.put([*traces, *forgetful])
        for framework_tools in ("0", "1"):
            every = over_raw_triples(store, "unanswered_tool_calls", {**BIG, "framework_tools": framework_tools}).rows
            shown = [row[0] for row in every]
            assert len(set(shown)) >= 5 and len(set(shown)) < len(shown), "some trace must have several calls to show"
            for limit in range(1, len(every) + 2):
                params = {"limit": str(limit), "framework_tools": framework_tools}
                assert run_query(store, "unanswered_tool_calls", params).rows == every[:limit], params
            if framework_tools == "0":
                assert all(row[2] != "finish" for row in every)
            else:
                assert any(row[2] == "finish" for row in every)


def test_removing_traces_removes_their_exception_facts(traces, tmp_path):
    """The exception facts live in their trace's graph: once traces are deleted, every query over them still gives
    the rows of the query over the raw triples, and none of a deleted trace."""
    with EmbeddedStore(tmp_path / "db") as store:
        store.put(traces)
        found = {row[0] for name, _ in MAINTAINED_PARAMS for row in run_query(store, name, BIG).rows}
        removed = sorted(found)[::2]
        assert removed
        for iri in removed:
            assert store.delete(iri)
        for name, params in MAINTAINED_PARAMS:
            rows = run_query(store, name, params).rows
            assert rows == over_raw_triples(store, name, params).rows, name
            assert not {row[0] for row in rows} & set(removed), name


# The queries that add up every execution read the store's ledger (dspy_rdf.store.ledger), kept as traces are put and
# removed; their scan versions (queries/scan/) read the triples. Each must give the same rows, on every store.
LEDGER_PARAMS = [
    ("tokens_per_model", {}), ("tokens_per_model", {"model": "openai/gpt-4o-mini"}), ("tokens_per_model", {"model": HOSTILE[1]}),
    ("tokens_cost_per_model_day", {}), ("tokens_cost_per_model_day", {"model": "openai/gpt-4o-mini"}),
    ("tokens_cost_per_model_day", {"since": "2025-01-02", "until": "2025-01-05"}),
    ("part_kinds", {}), ("finish_reasons", {}),
    ("tool_calls_per_tool", {}), ("tool_calls_per_tool", {"framework_tools": "1"}), ("tool_calls_per_tool", {"tool": "add"}),
    ("tool_calls_per_tool", {"tool": "finish", "framework_tools": "1"}), ("tool_calls_per_tool", {"tool": HOSTILE[0]}),
    ("tool_argument_frequency", {}), ("tool_argument_frequency", {"framework_tools": "1"}), ("tool_argument_frequency", {"tool": "add"}),
    ("tool_argument_frequency", {"tool": "finish", "framework_tools": "1"}), ("tool_argument_frequency", {"tool": HOSTILE[0]}),
    ("tool_argument_frequency", {"limit": "1"}), ("tool_argument_frequency", {"limit": "1000", "framework_tools": "1"}),
    ("tools_offered_never_called", {}), ("tools_offered_never_called", {"framework_tools": "1"}),
    ("tools_offered_never_called", {"tool": "finish", "framework_tools": "1"}),
    ("tool_error_rate", {}), ("tool_error_rate", {"framework_tools": "1"}), ("tool_error_rate", {"tool": "divide"}),
    ("lm_calls_per_module", {}), ("lm_calls_per_module", {"module_class": "Predict"}), ("lm_calls_per_module", {"module_class": "dspy.predict.predict.Predict"}),
    ("slowest_tool_executions", {}), ("slowest_tool_executions", {"framework_tools": "1"}), ("slowest_tool_executions", {"tool": "divide"}),
    ("slowest_tool_executions", {"limit": "1"}), ("slowest_tool_executions", {"limit": "3", "framework_tools": "1"}),
    ("slowest_tool_executions", {"limit": "1000"}), ("slowest_tool_executions", {"tool": "finish", "framework_tools": "1"}),
    ("tool_latency_per_tool", {}), ("tool_latency_per_tool", {"framework_tools": "1"}), ("tool_latency_per_tool", {"tool": "add"}),
    ("tool_latency_per_tool", {"tool": "finish", "framework_tools": "1"}),
    ("longest_conversations", {}), ("longest_conversations", {"limit": "1"}), ("longest_conversations", {"limit": "3"}),
    ("longest_conversations", {"limit": "1000"}),
]  # fmt: skip


def over_triples(store, name: str, params: dict) -> QueryResult:
    """A canned query over the ledger, run as its scan version over the triples, with the same parameters."""
    query = get_query(name)
    return QueryResult.from_json(store.select(bind_parameters(dataclasses.replace(query, text=query.scan), params)))


ENGINE_VERSION_PARAMS = [(name, params, engine) for name, params in LEDGER_PARAMS for engine, _ in get_query(name).engine_versions]


def test_some_query_has_a_version_for_an_engine():
    assert ENGINE_VERSION_PARAMS  # else the test below tests nothing


@pytest.mark.parametrize(("name", "params", "engine"), ENGINE_VERSION_PARAMS, ids=lambda value: getattr(value, "value", None) or (value if isinstance(value, str) else "-".join(f"{k}={v}" for k, v in value.items()) or "defaults"))
def test_a_querys_version_for_one_engine_gives_the_rows_of_the_query_over_the_triples_on_every_store(store, name, params, engine):
    """A version of a canned query planned for one engine (``queries/<engine>/``) is the same query: on every store
    (whatever engine it is), its rows are those of the query over the triples."""
    query = get_query(name)
    planned = dataclasses.replace(query, text=dict(query.engine_versions)[engine])
    rows = QueryResult.from_json(store.select(bind_parameters(planned, params))).rows
    assert rows == over_triples(store, name, params).rows


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda q: (q / "virtuso").mkdir() or (q / "virtuso" / "part_kinds.rq").write_text("SELECT * WHERE {}"), "queries/virtuso/ is named for no engine"),
        (lambda q: (q / "scan" / "no_such_query.rq").write_text("SELECT * WHERE {}"), "queries/scan/no_such_query.rq is a version of no query"),
        (lambda q: (q / "virtuoso" / "tool_latency_per_tool.rq").write_text((q / "virtuoso" / "tool_latency_per_tool.rq").read_text().replace("only this tool", "only this tool, by name")), "query tool_latency_per_tool: its virtuoso/ version declares other parameters"),
    ],
    ids=["misspelt engine folder", "version of no query", "other parameters"],
)
def test_a_query_folder_that_no_store_would_run_as_meant_is_refused(tmp_path, monkeypatch, change, error):
    """A version of a query that no store would run, or would run with other parameters, stops the catalog loading
    with a one-line error naming the file, rather than being silently ignored."""
    import shutil
    from importlib import resources

    from dspy_rdf.analytics import catalog

    copy = tmp_path / "dspy_rdf_analytics"
    shutil.copytree(Path(str(resources.files("dspy_rdf.analytics") / "queries")), copy / "queries")
    change(copy / "queries")
    monkeypatch.setattr(catalog.resources, "files", lambda package: copy)
    with pytest.raises(ValueError, match=re.escape(error)):
        catalog._library()


def test_the_ledger_queries_are_the_queries_with_a_scan_version():
    assert {name for name, _ in LEDGER_PARAMS} == {q.name for q in list_queries() if q.scan is not None}


@pytest.mark.parametrize(("name", "params"), LEDGER_PARAMS, ids=lambda value: value if isinstance(value, str) else "-".join(f"{k}={v}" for k, v in value.items()) or "defaults")
def test_each_query_over_the_ledger_gives_the_rows_of_the_query_over_the_triples(store, name, params):
    assert store.ledger_is_current()
    maintained = run_query(store, name, params)
    triples = over_triples(store, name, params)
    assert maintained.columns == triples.columns
    assert maintained.rows == triples.rows
    if not params:
        assert triples.rows, f"{name} finds nothing in the test store: the comparison would prove nothing"


def test_stats_over_the_ledger_are_the_stats_over_the_triples(store):
    """``stats`` reads the ledger's sums while it is current: the counts of the scan of every trace, on every store."""
    assert store.ledger_is_current()
    over_ledger, scanned = store.stats(), store.stats(from_triples=True)
    assert over_ledger == scanned
    assert all(scanned[name] for name in ("traces", "lm_calls", "tool_calls", "tool_results", "messages", "input_tokens", "cost", "triples"))


def test_stats_read_the_triples_while_the_ledger_is_not_current(traces, tmp_path):
    """A trace written without its figures leaves the ledger short of a trace: ``stats`` then counts from the
    triples, and says by how much the ledger is short."""
    with EmbeddedStore(tmp_path / "db") as store:
        store.put(traces[1:])
        item = next(item for item in encode_traces(traces[:1], base=DEFAULT_BASE) if not isinstance(item, tuple))
        store.put([dataclasses.replace(item, figures=None)])
        assert not store.ledger_is_current()
        counts = store.stats()
        assert counts == store.stats(from_triples=True)
        assert counts["traces"] == len(store.trace_iris()) and counts["ledger_uncounted"] == 1


def test_a_query_over_the_ledger_runs_beside_the_check_that_the_ledger_covers_every_trace(traces, tmp_path, monkeypatch):
    """On the embedded store, run_query runs a query over the ledger beside the count of the trace nodes that says
    whether the ledger covers them: the query here waits for the count, which it could not if they ran one after
    the other. Where the ledger is short of a trace, the answer is the scan's, and an error of the query over the
    ledger is not the user's."""
    import threading

    from dspy_rdf.store import StoreError

    with EmbeddedStore(tmp_path / "db") as store:
        store.put(traces)
        counted = threading.Event()
        count, select = store._trace_count, store.select
        ran_beside: list[bool] = []

        def counting() -> int:
            n = count()
            counted.set()
            return n

        def selecting(sparql: str, **kwargs):
            if "ledger:" in sparql and threading.current_thread() is not threading.main_thread():
                ran_beside.append(counted.wait(10))
                if "broken" in ran_beside_mode:
                    raise StoreError("the query over the ledger failed")
                if "write" in ran_beside_mode:
                    answer = select(sparql, **kwargs)
                    late = m.ToolExecution(tool_call=m.ToolCall(name="late"), started_at="2033-02-01T00:00:00+00:00", ended_at="2033-02-01T00:00:03+00:00")
                    store.put([m.Trace(source_kind="program_run", source_format="dspy_callback", calls=[late])])
                    return answer
            return select(sparql, **kwargs)

        ran_beside_mode: set[str] = set()
        monkeypatch.setattr(store, "_trace_count", counting)
        monkeypatch.setattr(store, "select", selecting)
        rows = run_query(store, "tool_latency_per_tool").rows
        assert ran_beside == [True] and rows == over_triples(store, "tool_latency_per_tool", {}).rows and rows
        ran_beside_mode.add("broken")
        counted.clear()
        with pytest.raises(StoreError):
            run_query(store, "tool_latency_per_tool")  # the ledger is current: its query's error is the answer
        # a write between the query and the check (here, by the thread of the query once it answered): the answer
        # read the ledger before the write, so the query is asked again
        ran_beside_mode.clear()
        ran_beside_mode.add("write")
        counted.clear()
        written = run_query(store, "tool_latency_per_tool").rows
        assert written == over_triples(store, "tool_latency_per_tool", {}).rows and "late" in {row[0] for row in written}
        ran_beside_mode.clear()
        item = next(item for item in encode_traces([latency_runs()[0]], base="https://example.org/beside/") if not isinstance(item, tuple))
        store.put([dataclasses.replace(item, figures=None)])  # a trace the ledger does not count
        assert not store.ledger_is_current()
        for mode in ((), ("broken",)):  # the query over the ledger answered, or failed: the scan's answer either way
            ran_beside_mode.update(mode)
            counted.clear()
            assert run_query(store, "tool_latency_per_tool").rows == over_triples(store, "tool_latency_per_tool", {}).rows


def _content_stats(counts: dict) -> dict:
    """``stats`` less what it says of the ledger itself (how far it is behind the store)."""
    return {name: value for name, value in counts.items() if name != "ledger_uncounted"}


def ledger_answers(store) -> dict[str, object]:
    """The answers of the queries the ledger serves, and ``stats``, as a user gets them."""
    answers: dict[str, object] = {f"{name} {params}": run_query(store, name, params).rows for name, params in LEDGER_PARAMS}
    answers["stats"] = _content_stats(store.stats())
    return answers


def triples_answers(store) -> dict[str, object]:
    """The same answers, read from every trace."""
    answers: dict[str, object] = {f"{name} {params}": over_triples(store, name, params).rows for name, params in LEDGER_PARAMS}
    answers["stats"] = _content_stats(store.stats(from_triples=True))
    return answers


def test_the_ledger_follows_removals_and_folding_and_a_dump_loaded_again(traces, tmp_path):
    """Traces removed take their figures out of the ledger; folding its entries into one changes no answer; the
    store dumped and loaded into another store gives that store the same ledger answers."""
    with EmbeddedStore(tmp_path / "db") as store:
        written = store.put(traces).written
        assert len(store.ledger_entries()) >= 1
        for iri in written[::2]:
            assert store.delete(iri)
        assert not store.delete(written[0])  # gone already: no second entry taking it out again
        assert store.ledger_is_current()
        answers = ledger_answers(store)
        assert answers == triples_answers(store)  # removals taken out of every figure, stats' counts included
        assert sum(1 for rows in answers.values() if rows) >= 4
        entries = len(store.ledger_entries())
        assert entries > len(written) // 2  # one per removal
        store.optimize()
        assert len(store.ledger_entries()) == 1 and store.ledger_is_current()
        assert ledger_answers(store) == answers
        assert store.ledger().traces == len(written) - len(written[::2])
        dump = tmp_path / "all.nq"
        with dump.open("wb") as handle:
            store.dump(handle)
    assert b"urn:dspy-rdf:ledger" not in dump.read_bytes()  # the ledger is the store's own, not a trace
    with EmbeddedStore(tmp_path / "again") as again:
        again.put(trace for _, trace in EmbeddedStore(tmp_path / "db", read_only=True).traces())
        assert again.ledger_is_current()
        assert ledger_answers(again) == answers


def test_an_entry_keeps_each_tools_calls_by_arguments_up_to_a_bound_and_then_none_saying_so():
    """An entry holding more rows of the ``argument`` figure than the ledger keeps is written without them and says
    so; the mark survives a merge, a read back and a split, and no other figure is left out."""
    import pyoxigraph as ox

    from dspy_rdf.store.ledger import ARGUMENT_ROWS_KEPT, ARGUMENT_TEXT_KEPT, LEDGER, Ledger

    def entry(pairs: int) -> Ledger:
        ledger = Ledger()
        ledger.traces = 1
        for n in range(pairs):
            ledger.rows[("argument", ("search", f'{{"query":"q{n}"}}'))] = [1, 1, 0, 1]
        ledger.rows[("tool", ("search",))] = [pairs, pairs, 0, 0, 0, 0]
        return ledger

    def read_back(ledger: Ledger) -> Ledger:
        graph, data = ledger.nquads()
        store = ox.Store()
        store.load(data, ox.RdfFormat.N_QUADS)
        rows = [{"row": q.subject.value, "p": q.predicate.value, "o": q.object.value} for q in store.quads_for_pattern(None, None, None, ox.NamedNode(graph))]
        return Ledger.from_rows(graph, rows)

    kept = read_back(entry(ARGUMENT_ROWS_KEPT))
    assert not kept.without_arguments and sum(1 for figure, _ in kept.rows if figure == "argument") == ARGUMENT_ROWS_KEPT
    dropped = read_back(entry(ARGUMENT_ROWS_KEPT + 1))
    assert dropped.without_arguments and not any(figure == "argument" for figure, _ in dropped.rows)
    assert dropped.rows[("tool", ("search",))] == [ARGUMENT_ROWS_KEPT + 1] * 2 + [0] * 4 and dropped.traces == 1
    assert f"{LEDGER}without_arguments".encode() in entry(ARGUMENT_ROWS_KEPT + 1).nquads()[1]
    merged = entry(1)
    merged.merge(dropped)
    assert merged.without_arguments and read_back(merged).without_arguments  # a fold of the two keeps the mark
    long = Ledger()
    long.traces = 1
    for n in range(2):  # two rows, of more argument text together than an entry keeps
        long.rows[("argument", ("write_file", '{"text":"' + str(n) * (ARGUMENT_TEXT_KEPT // 2) + '"}'))] = [1, 1, 0, 1]
    assert read_back(long).without_arguments and not read_back(long).rows
    del long.rows[("argument", ("write_file", '{"text":"' + "1" * (ARGUMENT_TEXT_KEPT // 2) + '"}'))]
    assert not read_back(long).without_arguments and len(read_back(long).rows) == 1
    parts = entry(ARGUMENT_ROWS_KEPT + 1).split(max_triples=50)
    assert parts[0].without_arguments and parts[0].traces == 1 and not any(p.without_arguments for p in parts[1:])
    assert not any(figure == "argument" for p in parts for figure, _ in p.rows)


def test_a_sum_of_entries_that_passes_the_bound_midway_is_not_marked_when_removals_bring_it_back(tmp_path, monkeypatch):
    """Entries added up in any order (a removal read after the batch it takes out) may pass the bound of an entry
    midway: the sum is marked only if it is past the bound at the end."""
    import pyoxigraph as ox

    from dspy_rdf.store import ledger as ledger_module
    from dspy_rdf.store.ledger import Ledger

    monkeypatch.setattr(ledger_module, "ARGUMENT_ROWS_KEPT", 2)

    def entry(first: int, sign: int) -> Ledger:
        ledger = Ledger()
        ledger.traces = sign
        for n in range(first, first + 2):
            ledger.rows[("argument", ("search", f'{{"query":"q{n}"}}'))] = [sign, sign, 0, sign]
        return ledger

    with EmbeddedStore(tmp_path / "db") as store:
        names = []
        for ledger in (entry(0, 1), entry(2, 1), entry(2, -1)):  # two batches, then the second taken out again
            graph, data = ledger.nquads()
            store.oxigraph.load(data, ox.RdfFormat.N_QUADS)
            names.append(graph)
        total = store._sum_of(names)
        assert not total.without_arguments and total.traces == 1
        assert sorted(key for (figure, key), values in total.rows.items() if figure == "argument" and any(values)) == [
            ("search", '{"query":"q0"}'), ("search", '{"query":"q1"}'),
        ]
        assert b"without_arguments" not in total.nquads()[1]


def test_a_store_whose_ledger_left_out_arguments_reads_them_from_the_triples(traces, tmp_path, monkeypatch):
    """Where an entry left out its calls by arguments (more distinct arguments than it keeps), the arguments query
    reads the triples, with the rows it gives over them, through folds; every other query still reads the ledger."""
    from dspy_rdf.store import ledger as ledger_module

    monkeypatch.setattr(ledger_module, "ARGUMENT_ROWS_KEPT", 1)
    query = get_query("tool_argument_frequency")
    params = {"framework_tools": "1", "limit": "1000"}
    with EmbeddedStore(tmp_path / "db") as store:
        store.put(traces)
        assert store.select(ledger_module.ARGUMENTS_DROPPED)["results"]["bindings"]
        assert store.ledger_is_current() and not store.ledger_is_current(arguments=True)
        triples = over_triples(store, "tool_argument_frequency", params).rows
        assert len(triples) > 1
        over_the_ledger = QueryResult.from_json(store.select(bind_parameters(query, params))).rows
        assert over_the_ledger != triples  # the rows left out: read as they are, the ledger would answer wrong
        assert run_query(store, "tool_argument_frequency", params).rows == triples
        store.optimize()
        assert len(store.ledger_entries()) == 1 and not store.ledger_is_current(arguments=True)
        assert run_query(store, "tool_argument_frequency", params).rows == triples
        assert ledger_answers(store) == triples_answers(store)


def test_a_fold_stopped_midway_is_never_counted_twice_and_the_next_fold_finishes_it(traces, tmp_path):
    """A fold writes the sum of the entries first, naming the entries it replaces, then removes them one at a time:
    stopped after the sum was written, the ledger is not current (the queries read the triples and give the same
    rows), its sum counts each trace once, and the next fold removes the entries left."""
    import pyoxigraph as ox

    with EmbeddedStore(tmp_path / "db") as store:
        written = store.put(traces[: len(traces) // 2]).written
        store.put(traces[len(traces) // 2 :])
        for iri in written[::3]:
            assert store.delete(iri)
        answers = ledger_answers(store)
        before = store.ledger()
        entries = store.ledger_entries()
        assert len(entries) > 2 and store.ledger_is_current()
        graph, data = before.nquads(replaces=entries[1:])  # the sum of them all, as if stopped after removing the first
        store.oxigraph.load(data, ox.RdfFormat.N_QUADS)
        store.oxigraph.remove_graph(ox.NamedNode(entries[0]))
        assert not store.ledger_is_current()
        assert ledger_answers(store) == answers  # read from the triples meanwhile
        assert store.ledger().traces == before.traces == len(store.trace_iris())
        assert store.fold_ledger() == 0  # the entries left removed: nothing else to fold
        assert store.ledger_entries() == [graph] and store.ledger_is_current()
        assert ledger_answers(store) == answers


def test_a_forked_process_counts_and_folds_its_own_ledger_writes(tmp_path):
    """A process forked while threads of its parent fold the ledger and start a write counter (the fold's lock and
    the counter's start lock held, the count of entries written running) counts its own writes and folds after
    ``fold_every`` of them: the parent's locks, whose holders do not exist in the child, do not stop it."""
    import os
    import signal
    import time

    from dspy_rdf.store import base

    with EmbeddedStore(tmp_path / "db") as store:
        folds: list[int] = []
        store.fold_ledger = lambda: folds.append(os.getpid()) or 0  # type: ignore[method-assign]
        store.fold_every = 2
        store._ledger_entry_written()  # the parent has counted one write
        parents = store.__dict__["_ledger_writes"]
        starting = base._LEDGER_WRITES_STARTING
        assert parents.folding.acquire(blocking=False)  # as a thread of the parent folding at the moment of the fork
        assert starting.acquire(blocking=False)  # as a thread of the parent starting a counter at that moment
        reading, writing = os.pipe()
        try:
            child = os.fork()
            if child == 0:  # pragma: no cover - the child reports through the pipe
                try:
                    store._ledger_entry_written()
                    os.write(writing, b"folded" if folds else b"not folded")
                    store._ledger_entry_written()
                    os.write(writing, b" once" if len(folds) == 1 else b" twice or never")
                finally:
                    os._exit(0)
            os.close(writing)
            deadline = time.monotonic() + 60
            while os.waitpid(child, os.WNOHANG) == (0, 0):  # a child stuck on a lock must fail the test, not hang it
                if time.monotonic() > deadline:
                    os.kill(child, signal.SIGKILL)
                    os.waitpid(child, 0)
                    pytest.fail("the forked process waited for a lock its parent's thread held")
                time.sleep(0.01)
            assert os.read(reading, 100) == b"not folded once"
        finally:
            os.close(reading)
            parents.folding.release()
            starting.release()
        store._ledger_entry_written()  # the parent's second write: its own count folds
        assert folds == [os.getpid()]


def test_removing_the_longest_call_of_a_module_leaves_its_maximum_to_the_triples_until_migrate(traces, tmp_path):
    """A maximum cannot be taken out of the ledger: once every trace holding the longest LM call of a module is
    removed, lm_calls_per_module reads the triples (the other queries still read the ledger), and migrate counts the
    store again."""
    from dspy_rdf.rdf.formats import encode_trace_figures
    from dspy_rdf.store.migrate import migrate_store

    with EmbeddedStore(tmp_path / "db") as store:
        store.put(traces)
        longest = {iri: figures.modules["Predict"].max_seconds for iri, trace in store.traces()
                   if "Predict" in (figures := encode_trace_figures(trace, iri=iri, digest="")[1]).modules}  # fmt: skip
        top = max(longest.values())
        holders = [iri for iri, seconds in longest.items() if seconds == top]
        for iri in holders[:-1]:
            store.delete(iri)
        assert store.ledger_is_current(maxima=True)  # one trace still holds it
        store.delete(holders[-1])
        assert store.ledger_is_current() and not store.ledger_is_current(maxima=True)
        rows = run_query(store, "lm_calls_per_module").rows
        assert rows == over_triples(store, "lm_calls_per_module", {}).rows
        assert dict((row[0], row[-1]) for row in rows)["Predict"] < top
        store.optimize()  # folding keeps what was removed
        assert not store.ledger_is_current(maxima=True)
        assert migrate_store(store).ledger_traces == len(store.trace_iris())
        assert store.ledger_is_current(maxima=True)
        assert run_query(store, "lm_calls_per_module").rows == rows


def test_a_ledger_of_another_version_is_not_read_until_migrate_counts_the_store_again(traces, tmp_path):
    """An entry written by a release that kept other figures (here: no version) would answer as if the figures it
    lacks were none: the queries read the triples, folding leaves it, and migrate counts the store again."""
    import pyoxigraph as ox

    from dspy_rdf.store.ledger import LEDGER
    from dspy_rdf.store.migrate import migrate_store

    with EmbeddedStore(tmp_path / "db") as store:
        store.put(traces[:5])
        store.put(traces[5:])
        entries = store.ledger_entries()
        assert len(entries) == 2 and store.ledger_is_current()
        version = ox.NamedNode(f"{LEDGER}version")
        for quad in list(store.oxigraph.quads_for_pattern(ox.NamedNode(entries[0]), version, None, ox.NamedNode(entries[0]))):
            store.oxigraph.remove(quad)
        assert not store.ledger_is_current()
        assert store.stats()["ledger_uncounted"] == len(store.trace_iris())
        assert store.fold_ledger() == 0 and store.ledger_entries() == entries
        assert ledger_answers(store) == triples_answers(store)
        assert migrate_store(store).ledger_traces == len(store.trace_iris())
        assert store.ledger_is_current() and store.stats()["ledger_uncounted"] == 0


def test_an_execution_answering_a_tool_result_part_is_counted_as_the_query_counts_it(tmp_path):
    """An execution whose dspy:answers names a tool-result part (not a tool-call part) is the call of that part's call
    id, for the ledger as for the query over the triples."""
    def entry(request_parts, output_parts, n):
        request = m.LMRequest(model="m", messages=[m.LMMessage(role="user", parts=request_parts)])
        response = m.LMResponse(outputs=[m.LMOutput(parts=output_parts)])
        return m.LMHistoryEntry(request=request, response=response, timestamp=f"2025-01-0{n}T00:00:00", uuid=f"u{n}")

    result = m.LMToolResultPart(call_id="X", name="add", content=[m.LMTextPart(text="3")])
    calls = [
        m.LMCall(started_at="2025-01-01T00:00:00", entry=entry([m.LMTextPart(text="hi")], [result], 1)),
        m.LMCall(started_at="2025-01-02T00:00:00", entry=entry([m.LMToolCallPart(name="add", call_id="X", args={"a": 1}), result], [m.LMTextPart(text="ok")], 2)),
        m.ToolExecution(tool_call=m.ToolCall(name="add", call_id="X"), started_at="2025-01-01T00:00:01", answers=m.PartRef(call=0, output=0, part=0)),
    ]
    trace = m.Trace(source_kind="program_run", source_format="dspy_run", calls=calls)
    with EmbeddedStore(tmp_path / "db") as store:
        assert store.put([trace]).written and store.ledger_is_current()
        for name in ("tool_error_rate", "tool_calls_per_tool"):
            rows = run_query(store, name).rows
            assert rows and rows == over_triples(store, name, {}).rows, name


def test_which_maxima_are_stale():
    kept = [{"module": "Predict", "value": "2.5", "holders": "2", "removed": "0"}, {"module": "Predict", "value": "1.0", "holders": "7", "removed": "0"}]
    assert stale_maxima(kept) == []
    assert stale_maxima(kept + [{"module": "Predict", "value": "2.50", "holders": "1", "removed": "1"}]) == []
    assert stale_maxima(kept + [{"module": "Predict", "value": "2.5", "holders": "1", "removed": "1"}] * 2) == ["Predict"]
    assert stale_maxima(kept + [{"module": "Predict", "value": "1.0", "holders": "7", "removed": "1"}]) == []
    assert reads_maxima(get_query("lm_calls_per_module").text) and not reads_maxima(get_query("tokens_per_model").text)


def test_a_store_without_a_current_ledger_is_read_from_its_triples_until_migrate_counts_it(traces, tmp_path, monkeypatch):
    """Traces written without their figures (an earlier release, another writer) leave the ledger behind: the
    queries then read the triples, and give the same rows; migrate counts every trace into a new ledger."""
    from dspy_rdf.store.migrate import migrate_store

    with EmbeddedStore(tmp_path / "db") as store:
        half = len(traces) // 2
        store.put(traces[:half])
        store.put(dataclasses.replace(item, figures=None) for item in encode_traces(traces[half:], base=DEFAULT_BASE) if not isinstance(item, tuple))
        assert not store.ledger_is_current()
        assert store.stats()["ledger_uncounted"] == len(traces) - half  # stats says how far the ledger is behind
        before = triples_answers(store)
        assert ledger_answers(store) == before
        assert migrate_store(store, dry_run=True).ledger_traces == -1
        report = migrate_store(store)
        assert report.ledger_traces == len(store.trace_iris())
        assert store.ledger_is_current() and len(store.ledger_entries()) == 1
        assert store.stats()["ledger_uncounted"] == 0
        assert ledger_answers(store) == before
        assert migrate_store(store).ledger_traces is None  # current: nothing to count


def test_tool_calls_per_tool(store, traces):
    parts, distinct, executions, unasked = Counter(), defaultdict(set), Counter(), Counter()
    for n, trace in enumerate(traces):
        for part in of(trace, m.LMToolCallPart):
            parts[part.name] += 1
            distinct[part.name].add((n, part.call_id) if part.call_id is not None else id(part))
        for ex in of(trace, m.ToolExecution):
            executions[ex.tool_call.name] += 1
            unasked[ex.tool_call.name] += ex.answers is None
    tools = parts.keys() | executions.keys()
    every = {tool: (len(distinct[tool]) + unasked[tool], parts[tool], executions[tool]) for tool in tools}
    own = framework_names(traces)
    expected = {tool: counts for tool, counts in every.items() if tool not in own}
    rows = run_query(store, "tool_calls_per_tool").rows
    assert {tool: tuple(rest) for tool, *rest in rows} == expected
    assert expected["add"][2] == expected["divide"][2] == 2  # executed once by ReAct, once by CallTools
    # DSPy's own tools are kept, and shown when asked for
    assert own == {"finish", "submit"} if hasattr(dspy, "ReActV2") else own == {"finish"}
    rows = run_query(store, "tool_calls_per_tool", {"framework_tools": 1}).rows
    assert {tool: tuple(rest) for tool, *rest in rows} == every


def test_tool_error_rate(store, traces):
    results, errors = Counter(), Counter()
    for trace in traces:
        for call in tool_calls(trace).values():
            if call.results or call.executions:
                results[call.tool] += 1
                errors[call.tool] += call.failed
    rows = run_query(store, "tool_error_rate").rows
    own = framework_names(traces)
    assert {tool: (n, e) for tool, n, e, _ in rows} == {tool: (results[tool], errors[tool]) for tool in results if tool not in own}
    for tool, n, e, rate in rows:
        assert rate == pytest.approx(e / n)
    assert [r[1:3] for r in run_query(store, "tool_error_rate", {"tool": "divide"}).rows] == [(results["divide"], errors["divide"])]
    assert errors["divide"] >= 2  # both recorded runs divide by zero


def test_tool_latency_per_tool(store, traces):
    executions, failed, latencies = Counter(), Counter(), defaultdict(list)
    for trace in traces:
        for ex in of(trace, m.ToolExecution):
            tool = ex.tool_call.name
            executions[tool] += 1
            failed[tool] += bool((ex.tool_result and ex.tool_result.is_error) or ex.error)
            if ex.ended_at is not None:
                latencies[tool].append(seconds(ex.started_at, ex.ended_at))
    rows = run_query(store, "tool_latency_per_tool").records()
    assert {r["tool"] for r in rows} == set(executions) - framework_names(traces)
    for r in rows:
        tool = r["tool"]
        assert (r["executions"], r["failed"], r["timed"]) == (executions[tool], failed[tool], len(latencies[tool])), tool
        assert float(r["error_rate"]) == pytest.approx(round(failed[tool] / executions[tool], 6))
        for column, percent in (("p50_seconds", 50), ("p95_seconds", 95)):
            assert float(r[column]) == pytest.approx(nearest_rank(latencies[tool], percent), abs=1e-6), (tool, column)
        assert float(r["max_seconds"]) == pytest.approx(max(latencies[tool]), abs=1e-6)
    timed = {r["tool"]: r for r in rows}["timed"]
    assert (timed["executions"], timed["timed"], timed["failed"]) == (25, 24, 3)
    assert (float(timed["p50_seconds"]), float(timed["p95_seconds"])) == (1.25, 1000.0)
    only = run_query(store, "tool_latency_per_tool", {"tool": "once"}).records()
    assert [(r["tool"], r["executions"], float(r["p50_seconds"]), float(r["p95_seconds"])) for r in only] == [("once", 1, 7.0, 7.0)]


def test_tool_latency_percentiles_at_every_rank(tmp_path):
    """A store holding the first k latencies of TIMED_LATENCIES (in a shuffled order), for every k: the query's
    percentiles are the nearest-rank percentiles each time (ranks fall in every bucket and on every tie)."""
    import random

    rng = random.Random(7)
    with EmbeddedStore(tmp_path / "db") as store:
        for k in range(1, len(TIMED_LATENCIES) + 1):
            values = TIMED_LATENCIES[:k]
            rng.shuffle(values)
            start = datetime.fromisoformat("2033-01-01T00:00:00+00:00")
            calls = [
                m.ToolExecution(tool_call=m.ToolCall(name=f"k{k}"), started_at=start.isoformat(), ended_at=(start + timedelta(seconds=v)).isoformat())
                for v in values
            ]
            store.put([m.Trace(source_kind="program_run", source_format="dspy_callback", calls=calls)])
        rows = {r["tool"]: r for r in run_query(store, "tool_latency_per_tool").records()}
        query = get_query("tool_latency_per_tool")
        for engine, text in query.engine_versions:  # each engine's version ranks alike
            planned = QueryResult.from_json(store.select(bind_parameters(dataclasses.replace(query, text=text), {})))
            assert {r["tool"]: r for r in planned.records()} == rows, engine
    assert len(rows) == len(TIMED_LATENCIES)
    for k in range(1, len(TIMED_LATENCIES) + 1):
        row = rows[f"k{k}"]
        assert float(row["p50_seconds"]) == pytest.approx(nearest_rank(TIMED_LATENCIES[:k], 50)), k
        assert float(row["p95_seconds"]) == pytest.approx(nearest_rank(TIMED_LATENCIES[:k], 95)), k


def test_tools_offered_never_called(store, traces):
    offered, called = defaultdict(lambda: [0, set()]), set()
    for trace in traces:
        iri = trace_lines(trace)[0]
        for request, _ in _requests_and_responses(trace):
            for tool in {t.name for t in (request.tools if request is not None else [])}:
                offered[tool][0] += 1
                offered[tool][1].add(iri)
        called |= {p.name for p in of(trace, m.LMToolCallPart)} | {ex.tool_call.name for ex in of(trace, m.ToolExecution)}
    expected = {tool: (n, len(iris)) for tool, (n, iris) in offered.items() if tool not in called and tool not in framework_names(traces)}
    rows = run_query(store, "tools_offered_never_called").rows
    assert {tool: (requests, n) for tool, requests, n in rows} == expected
    assert {f"offered {day}" for day in range(1, len(HOSTILE) + 1)} <= expected.keys()
    assert [r[0] for r in run_query(store, "tools_offered_never_called", {"tool": "offered 1"}).rows] == ["offered 1"]
    assert run_query(store, "tools_offered_never_called", {"tool": "add"}).rows == []


def test_unanswered_tool_calls_and_orphan_results(store, traces):
    unanswered = Counter()  # (tool, parts) of each call that nothing answered
    orphans = Counter()  # (call id, parts) of each result that answers no call
    for trace in traces:
        answered = answered_parts(trace)
        for call in tool_calls(trace).values():
            if call.parts and not any(id(part) in answered for part in call.parts) and call.tool not in framework_names(traces):
                unanswered[(call.tool, len(call.parts))] += 1
        call_ids = {p.call_id for p in of(trace, m.LMToolCallPart)}
        lost = [r for r in of(trace, m.LMToolResultPart) if r.call_id is None or r.call_id not in call_ids]
        orphans.update((None, 1) for r in lost if r.call_id is None)
        orphans.update(Counter(r.call_id for r in lost if r.call_id is not None).items())
    rows = run_query(store, "unanswered_tool_calls", BIG).records()
    assert Counter((r["tool"], r["parts"]) for r in rows) == unanswered and unanswered
    orphan_rows = run_query(store, "orphan_tool_results", BIG).records()
    assert Counter((r["call_id"], r["parts"]) for r in orphan_rows) == orphans and orphans
    # each hostile run has one call answered by its tool execution (c1) and one without an answer (c2)
    assert sorted((r["tool"], r["call_id"]) for r in rows if r["tool"] in HOSTILE) == sorted((name, "c2") for name in HOSTILE)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.name)
def test_every_tool_query_counts_the_calls_the_program_made(store, scenario_runs, scenario):
    """Each recorded run's tools counted their own calls, failures and arguments; every query that counts tool calls
    says the same: one call per call the model asked for (however many parts carry it) or the program ran."""
    ledger = scenario_runs[1][scenario.name]
    tools = sorted(ledger.calls)
    per_tool = {r["tool"]: r for r in run_query(store, "tool_calls_per_tool").records() if r["tool"] in tools}
    assert {t: (r["calls"], r["parts"], r["executions"]) for t, r in per_tool.items()} == {
        t: (n, n * scenario.parts_per_call, n) for t, n in ledger.calls.items()
    }
    errors = {r["tool"]: r for r in run_query(store, "tool_error_rate").records() if r["tool"] in tools}
    assert {t: (r["results"], r["errors"], r["error_rate"]) for t, r in errors.items()} == {
        t: (n, ledger.errors[t], pytest.approx(ledger.errors[t] / n)) for t, n in ledger.calls.items()
    }
    arguments = [r for r in run_query(store, "tool_argument_frequency", BIG).records() if r["tool"] in tools]
    assert {(r["tool"], r["args"]): (r["calls"], r["parts"], r["executions"], r["traces"]) for r in arguments} == {
        args: (n, n * scenario.parts_per_call, n, 1) for args, n in ledger.args.items()
    }
    latency = {r["tool"]: r for r in run_query(store, "tool_latency_per_tool").records() if r["tool"] in tools}
    assert {t: (r["executions"], r["failed"], r["timed"]) for t, r in latency.items()} == {t: (n, ledger.errors[t], n) for t, n in ledger.calls.items()}
    slowest = [r for r in run_query(store, "slowest_tool_executions", BIG).records() if r["tool"] in tools]
    assert Counter((r["tool"], r["failed"]) for r in slowest) == Counter(
        {(t, failed): n for t in tools for failed, n in ((True, ledger.errors[t]), (False, ledger.calls[t] - ledger.errors[t])) if n}
    )
    assert [r for r in run_query(store, "unanswered_tool_calls", BIG).records() if r["tool"] in tools] == []
    assert [r for r in run_query(store, "orphan_tool_results", BIG).records() if r["tool"] in tools] == []


def test_a_call_replayed_without_an_answer_is_one_unanswered_call_and_a_replayed_result_one_orphan(store):
    [unanswered] = run_query(store, "unanswered_tool_calls", {"tool": "lost_lookup"}).records()
    assert (unanswered["call_id"], unanswered["parts"], unanswered["call"].endswith("/response/output/0/part/0")) == ("call_lost", 3, True)
    [orphan] = [r for r in run_query(store, "orphan_tool_results", BIG).records() if r["call_id"] == "call_gone"]
    assert (orphan["trace"], orphan["parts"], orphan["is_error"], orphan["tool"]) == (unanswered["trace"], 2, False, None)
    [calls] = run_query(store, "tool_calls_per_tool", {"tool": "lost_lookup"}).rows
    assert calls == ("lost_lookup", 1, 3, 0)
    [arguments] = run_query(store, "tool_argument_frequency", {"tool": "lost_lookup"}).rows
    assert arguments == ("lost_lookup", '{"key":"k"}', 1, 3, 0, 1)
    assert run_query(store, "tool_error_rate", {"tool": "lost_lookup"}).rows == []


def test_the_hand_written_loop_sends_its_failure_back_as_an_ordinary_result_and_replays_each_call():
    """The hand-written loop sends each result back to the model (tool-result parts, the failure's text not flagged
    as an error) after running it through dspy.Tool (executions, one with an error): two calls, two results, one
    failed; each call's parts are its response part and its replay in the second request."""
    [scenario] = [s for s in SCENARIOS if s.name == "loop"]
    ledger = ToolLedger()
    sink = MemorySink()
    with dspy.context(callbacks=[TraceRecorder(sink)]):
        scenario.run(ledger)
    [trace] = sink.traces
    results = of(trace, m.LMToolResultPart)
    assert [r.is_error for r in results] == [False, False] and len(of(trace, m.ToolExecution)) == 2
    assert [len(call.parts) for call in tool_calls(trace).values()] == [2, 2]
    assert dict(ledger.calls) == {"loop_divide": 2} and dict(ledger.errors) == {"loop_divide": 1}


def test_tokens_cost_per_model_day(store, traces):
    expected = defaultdict(lambda: [0, 0, 0, 0, 0, 0.0, 0])  # calls, calls with usage, input, output, total, cost, priced
    for trace in traces:
        for entry in of(trace, m.LMHistoryEntry):
            row = expected[(entry.request.model, entry.timestamp[:10])]
            usage = entry.response.usage
            row[0] += 1
            row[1] += usage is not None and any(n is not None for n in (usage.input_tokens, usage.output_tokens, usage.total_tokens))
            row[2] += (usage and usage.input_tokens) or 0
            row[3] += (usage and usage.output_tokens) or 0
            row[4] += (usage and usage.total_tokens) or 0
            row[5] += entry.response.cost or 0.0
            row[6] += entry.response.cost is not None
        for call in of(trace, m.LMCall):  # a call that failed has no entry: an LM call, its usage and cost unknown
            if call.entry is None and call.model is not None:
                expected[(call.model, call.started_at[:10])][0] += 1
    got = {(model, day): rest for model, day, *rest in run_query(store, "tokens_cost_per_model_day").rows}
    assert got.keys() == expected.keys()
    for key, (calls, counted, inputs, outputs, totals, cost, priced) in expected.items():
        tokens = (inputs, outputs, totals) if counted else (None, None, None)  # unknown, not 0, when no call reports them
        assert got[key][:5] + [got[key][6]] == [calls, counted, *tokens, priced], key
        assert got[key][5] == (pytest.approx(cost) if priced else None), key
    # total_tokens is only what responses reported
    assert got[(HOSTILE[0], "2031-01-01")] == [1, 1, 7, 1, 0, 0.5, 1]
    window = run_query(store, "tokens_cost_per_model_day", {"since": "2031-01-02", "until": "2031-01-03"}).rows
    assert sorted(r[:2] for r in window) == sorted([(HOSTILE[1], "2031-01-02"), (HOSTILE[2], "2031-01-03")])


def test_lm_calls_per_module(store, traces):
    expected = defaultdict(list)
    for trace in traces:
        for call in of(trace, m.LMCall):
            parent = trace.calls[call.parent_call] if call.parent_call is not None else None
            module = parent.module_class if isinstance(parent, m.ModuleCall) else ""
            expected[module].append(seconds(call.started_at, call.ended_at))
    rows = run_query(store, "lm_calls_per_module").records()
    assert {r["module_class"]: r["lm_calls"] for r in rows} == {k: len(v) for k, v in expected.items()}
    for r in rows:
        spans = expected[r["module_class"]]
        assert r["timed_calls"] == len(spans)
        assert r["total_seconds"] == pytest.approx(sum(spans), abs=1e-6)
        assert r["mean_seconds"] == pytest.approx(sum(spans) / len(spans), abs=1e-6)
        assert r["max_seconds"] == pytest.approx(max(spans), abs=1e-6)
    # 4 ReAct turns + CallTools + 2 bootstrapped demos + 4 + 2 + 2 evaluated examples, then the scenarios: parallel calls
    # (1), ReAct (5 turns) and ReActV2 (2); the hand-written tool loop calls the LM itself
    scenario_calls = 1 + 5 + (2 if hasattr(dspy, "ReActV2") else 0)
    assert {r["module_class"]: r["lm_calls"] for r in rows}["Predict"] == 15 + scenario_calls


def comparable(records: list[dict]) -> list[dict]:
    """Query records with times as instants and costs as numbers to 9 places (engines write both their own way)."""
    def plain(key, value):
        if value is not None and key in ("started_at", "ended_at", "first_started", "last_started"):
            return datetime.fromisoformat(str(value))
        if value is not None and key == "cost":
            return round(float(value), 9)
        return value

    return [{k: plain(k, v) for k, v in r.items()} for r in records]


def test_session_summary_and_session_runs(store, traces):
    summary, runs = session_truth(traces)
    assert len(summary) == len(HOSTILE) + 3 and {r["session"]: r["runs"] for r in summary}["timed runs"] == 3
    assert comparable(run_query(store, "session_summary").records()) == comparable(summary)
    assert comparable(run_query(store, "session_runs").records()) == comparable(runs)
    only = run_query(store, "session_runs", {"session": "conversation"}).records()
    assert comparable(only) == comparable([r for r in runs if r["session"] == "conversation"]) and len(only) == 3
    [one] = run_query(store, "session_summary", {"session": "timed runs"}).records()
    assert (one["users"], one["user"]) == (2, None)  # two users: none named
    assert run_query(store, "session_runs", {"session": "no such session"}).rows == []


def test_slowest_tool_executions(store, traces):
    own = framework_names(traces)
    spans = sorted(
        ((seconds(ex.started_at, ex.ended_at), ex.tool_call.name) for t in traces for ex in of(t, m.ToolExecution) if ex.ended_at and ex.tool_call.name not in own),
        reverse=True,
    )
    rows = run_query(store, "slowest_tool_executions", {"limit": "4"}).records()
    assert [r["seconds"] for r in rows] == pytest.approx([s for s, _ in spans[:4]])
    everything = run_query(store, "slowest_tool_executions", BIG).records()
    assert len(everything) == len(spans)
    midnight = next(r for r in everything if r["tool"] == "midnight")
    assert midnight["seconds"] == pytest.approx(1.25) and midnight["failed"] is False
    react_divide = [r for r in everything if r["tool"] == "divide" and r["error"]]
    assert react_divide and all(r["failed"] is True for r in react_divide)


def test_longest_conversations(store, traces):
    # messages in the trace, directly or in any request it holds
    from dspy_rdf.canonical.identity import trace_iri

    def lm_call_count(t: m.Trace) -> int:
        return len(of(t, m.LMHistoryEntry)) + (1 if t.request is not None or t.response is not None else 0)

    ranked = sorted(((-len(of(t, m.LMMessage)), -lm_call_count(t), trace_iri(t)) for t in traces))
    for limit in (1, 5, 7, len(traces) - 1):  # the boundary falls inside groups of equal counts, too
        rows = run_query(store, "longest_conversations", {"limit": limit}).records()
        assert [(-r["messages"], -r["lm_calls"], r["trace"]) for r in rows] == ranked[:limit], limit
    assert len(run_query(store, "longest_conversations", {"limit": 0}).rows) == 0
    assert len(run_query(store, "longest_conversations", BIG).rows) == len(traces)


def test_tool_argument_frequency(store, traces):
    calls, parts, executions, holders = defaultdict(set), Counter(), Counter(), defaultdict(set)
    for n, trace in enumerate(traces):
        for key, call in tool_calls(trace).items():
            for part in call.parts:
                args = (call.tool, canonical_json(part.args))
                calls[args].add((n, key))
                parts[args] += 1
                holders[args].add(n)
            for ex in call.executions:
                args = (ex.tool_call.name, canonical_json(ex.tool_call.args))
                if not call.parts:  # no part asked for it: a call of its own
                    calls[args].add((n, key))
                executions[args] += 1
                holders[args].add(n)
    own = framework_names(traces)
    expected = {args: (len(calls[args]), parts[args], executions[args], len(holders[args])) for args in holders if args[0] not in own}
    rows = run_query(store, "tool_argument_frequency", BIG).rows
    assert {(tool, args): tuple(rest) for tool, args, *rest in rows} == expected
    add_rows = run_query(store, "tool_argument_frequency", {"tool": "add"}).rows
    assert {r[1]: r[2] for r in add_rows} == {args: n[0] for (tool, args), n in expected.items() if tool == "add"}
    assert len(run_query(store, "tool_argument_frequency", {"tool": "add", "limit": "1"}).rows) == 1


def test_refusal_traces_and_finish_reasons(store, traces):
    with_refusals = [t for t in traces if of(t, m.LMRefusalPart)]
    rows = run_query(store, "refusal_traces").records()
    assert sorted(r["refusals"] for r in rows) == sorted(len(of(t, m.LMRefusalPart)) for t in with_refusals)
    assert len(rows) == len(with_refusals) >= 2
    reasons = Counter(o.finish_reason or "" for t in traces for o in of(t, m.LMOutput))
    assert {r[0]: r[1] for r in run_query(store, "finish_reasons").rows} == reasons


def _requests_and_responses(trace: m.Trace):
    """(request, response) of every LM call of a trace."""
    pairs = [(e.request, e.response) for e in of(trace, m.LMHistoryEntry)]
    if trace.request is not None or trace.response is not None:
        pairs.append((trace.request, trace.response))
    return pairs


def test_tool_calls_not_offered(store, traces):
    expected = Counter()
    for trace in traces:
        iri = trace_lines(trace)[0]
        for request, response in _requests_and_responses(trace):
            if request is None or not request.tools:
                continue
            offered = {t.name for t in request.tools}
            parts = [p for msg in request.messages for p in msg.parts]
            parts += [p for o in (response.outputs if response is not None else []) for p in o.parts]
            expected.update((iri, p.name) for p in parts if isinstance(p, m.LMToolCallPart) and p.name not in offered)
    rows = run_query(store, "tool_calls_not_offered", BIG).records()
    assert Counter((r["trace"], r["tool"]) for r in rows) == expected
    assert ("hallucinated_tool" in {tool for _, tool in expected}) and len(expected) > len(HOSTILE)


def test_duplicate_tool_call_ids(store, traces):
    expected = {}
    for trace in traces:
        iri = trace_lines(trace)[0]
        holders = of(trace, m.LMMessage) + of(trace, m.LMOutput)
        for holder in holders:
            ids = Counter(p.call_id for p in holder.parts if isinstance(p, m.LMToolCallPart) and p.call_id is not None)
            for call_id, n in ids.items():
                if n > 1:
                    expected[(iri, call_id)] = expected.get((iri, call_id), 0) + n
    rows = run_query(store, "duplicate_tool_call_ids").records()
    got = Counter()
    for r in rows:
        got[(r["trace"], r["call_id"])] += r["calls"]
    assert dict(got) == expected and expected


def test_program_scores(store, traces):
    def below(trace, index, ancestor):
        current = trace.calls[index].parent_call
        while current is not None:
            if current == ancestor:
                return True
            current = trace.calls[current].parent_call
        return False

    def totals(trace, index):
        lm = [c for i, c in enumerate(trace.calls) if isinstance(c, m.LMCall) and below(trace, i, index)]
        usage = [c.entry.response.usage for c in lm if c.entry is not None and c.entry.response.usage is not None]
        return len(lm), sum(u.input_tokens or 0 for u in usage), sum(u.output_tokens or 0 for u in usage), sum(c.entry.response.cost or 0 for c in lm if c.entry)

    expected: dict[str, dict] = {}
    for trace in traces:
        for index, call in enumerate(trace.calls):
            if isinstance(call, m.EvaluateCall):
                row = expected.setdefault(call.program_fingerprint, {"scores": [], "eval": [0, 0, 0, 0.0], "compilations": 0, "compile": [0, 0, 0, 0.0]})
                row["scores"].append(call.score)
                row["eval"] = [a + b for a, b in zip(row["eval"], totals(trace, index))]
            elif isinstance(call, m.CompileCall) and call.parent_call is None:
                row = expected.setdefault(call.program_fingerprint, {"scores": [], "eval": [0, 0, 0, 0.0], "compilations": 0, "compile": [0, 0, 0, 0.0]})
                row["compilations"] += 1
                row["compile"] = [a + b for a, b in zip(row["compile"], totals(trace, index))]
    rows = {r["program"]: r for r in run_query(store, "program_scores").records()}
    assert set(rows) == set(expected) and len(expected) == 2 + len(HOSTILE)
    for program, want in expected.items():
        got = rows[program]
        assert got["evaluations"] == len(want["scores"]) and got["best_score"] == (max(want["scores"]) if want["scores"] else None)
        assert [got["evaluation_lm_calls"], got["evaluation_input_tokens"], got["evaluation_output_tokens"]] == want["eval"][:3]
        assert got["evaluation_cost"] == pytest.approx(want["eval"][3])
        assert [got["compilations"], got["compile_lm_calls"], got["compile_input_tokens"], got["compile_output_tokens"]] == [
            want["compilations"], *want["compile"][:3]]
        assert got["compile_cost"] == pytest.approx(want["compile"][3])
    compiled = next(p for p, w in expected.items() if w["compilations"])
    assert expected[compiled]["scores"] == [100.0, 100.0] and expected[compiled]["eval"][0] == 6


def test_part_kinds_and_tokens_per_model_still_serve_the_demo(store, traces):
    kinds = Counter(type(p).part_type for t in traces for p in walk(t) if hasattr(type(p), "part_type"))
    assert {r[0]: r[1] for r in run_query(store, "part_kinds").rows} == kinds
    models = Counter()
    for t in traces:
        models.update(e.request.model for e in of(t, m.LMHistoryEntry))
        if t.request is not None:
            models[t.request.model] += 1
    assert {r[0]: r[1] for r in run_query(store, "tokens_per_model").rows} == models


# --- parameters are data --------------------------------------------------------------------------------


def text_parameters():
    return [(q.name, p.name) for q in list_queries() for p in q.parameters if p.type == "string"]


@pytest.mark.parametrize(("query", "param"), text_parameters())
def test_hostile_values_of_every_text_parameter_are_data(store, query, param):
    column = EXPECTED_COLUMNS[query].index(param)
    extra = BIG if any(p.name == "limit" for p in get_query(query).parameters) else {}
    everything = run_query(store, query, extra).rows
    for value in HOSTILE:
        value = unused(value) if query == "tools_offered_never_called" else value
        rows = run_query(store, query, {param: value, **extra}).rows
        assert Counter(rows) == Counter(r for r in everything if r[column] == value), (query, value)
        assert rows, f"{query} found nothing named {value!r}"


@pytest.mark.parametrize("value", HOSTILE + ["", "é\u2028\x00\x7f", "\\", "\\\\u005C\\u0022"])
def test_sparql_term_reads_back_as_the_same_literal(value):
    import pyoxigraph as ox

    text = sparql_term(value)
    [row] = ox.Store().query(f"SELECT ?v WHERE {{ VALUES ?v {{ {text} }} }}")
    assert row["v"] == ox.Literal(value)


def test_typed_parameters_are_validated():
    assert sparql_term("2031-01-02", "date") == '"2031-01-02"^^<http://www.w3.org/2001/XMLSchema#date>'
    assert sparql_term("42", "int") == '"42"^^<http://www.w3.org/2001/XMLSchema#integer>'
    for bad in ("2031-02-30", "2031-1-2", '2031-01-02" } #', "yesterday"):
        with pytest.raises(ValueError, match="date written YYYY-MM-DD"):
            sparql_term(bad, "date")
    with pytest.raises(ValueError, match="expected a string"):
        sparql_term(3)


def test_bad_parameters_name_the_parameter_and_the_type(store):
    with pytest.raises(ValueError, match=r"no parameter 'colour'.*tool, framework_tools, limit"):
        run_query(store, "slowest_tool_executions", {"colour": "red"})
    for bad in ("-1", "ten", "5; DROP", "1e3", True):
        with pytest.raises(ValueError, match=r"parameter 'limit' of query 'longest_conversations'.*non-negative integer"):
            run_query(store, "longest_conversations", {"limit": bad})
    with pytest.raises(ValueError, match=r"parameter 'since' .*YYYY-MM-DD"):
        run_query(store, "tokens_cost_per_model_day", {"since": "2031-01-01\" } #"})
    with pytest.raises(ValueError, match="no query named 'nope'"):
        run_query(store, "nope")
    with pytest.raises(ValueError, match="raw SPARQL takes none"):
        run_query(store, "SELECT * WHERE { ?s ?p ?o }", {"tool": "x"})


def test_binding_replaces_only_the_data_block_and_the_limit():
    query = get_query("slowest_tool_executions")
    bound = bind_parameters(query, {"tool": '" } ; DROP ALL #', "limit": "3"})
    # its parameter block is repeated (the sub-SELECT that picks duration buckets reads the parameters too): each is bound
    assert bound.count('VALUES (?tool) { ("\\" } ; DROP ALL #") }') == query.text.count("VALUES (?tool ?framework_tools) { (UNDEF UNDEF) }") == 2
    assert bound.rstrip().endswith("LIMIT 3")
    block = "VALUES (?tool ?framework_tools) { (UNDEF UNDEF) }"
    assert bound.replace('VALUES (?tool) { ("\\" } ; DROP ALL #") }', block).replace("LIMIT 3", "LIMIT 10") == query.text
    # with no parameter set the block is left out (UNDEF constrains nothing; Virtuoso 7 joins an UNDEF row wrongly)
    assert bind_parameters(query) == query.text.replace(block, "# no parameter set")
    several = get_query("tokens_cost_per_model_day")
    assert 'VALUES (?since) { ("2031-01-02"^^<http://www.w3.org/2001/XMLSchema#date>) }' in bind_parameters(several, {"since": "2031-01-02"})


# --- raw SPARQL -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sparql",
    [
        "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }",
        "select * where { service <http://x/> { ?s ?p ?o } }",
        "SELECT * WHERE { SERVIC\\u0045 <http://x/> { ?s ?p ?o } }",
        "SELECT * FROM <file:///etc/passwd> WHERE { ?s ?p ?o }",
        "SELECT * FROM NAMED <file:///etc/passwd> WHERE { GRAPH ?g { ?s ?p ?o } }",
        "PREFIX f: <file:///etc/> SELECT * FROM f:passwd WHERE { ?s ?p ?o }",
        "BASE <file:///etc/> SELECT * FROM <passwd> WHERE { ?s ?p ?o }",
        "SELECT * FROM undeclared:x WHERE { ?s ?p ?o }",
        "LOAD <http://example.org/data.ttl>",
        "DROP ALL",
        'DEFINE get:soft "replace" SELECT * FROM <http://127.0.0.1:9/data.ttl> WHERE { ?s ?p ?o }',
        'define input:grab-all "yes" SELECT * WHERE { ?s ?p ?o }',
        'SELECT * WHERE { ?s ?p ?o } # fine\nDEFINE sql:log-enable 2',
        "INSERT DATA { <urn:a> <urn:b> <urn:c> }",
        'SELECT (bif:http_get("http://127.0.0.1:9/") AS ?page) WHERE {}',
        'SELECT (<bif:http_get>("http://127.0.0.1:9/") AS ?page) WHERE {}',
        'PREFIX b: <BIF:> SELECT (b:http_get("http://127.0.0.1:9/") AS ?page) WHERE {}',
        'SELECT (\\u0062if:http_get("http://127.0.0.1:9/") AS ?page) WHERE {}',
        "SELECT (sql:DB.DBA.TTLP('<urn:a> <urn:b> <urn:c> .', '', 'urn:g') AS ?x) WHERE {}",
    ],
)
def test_raw_sparql_that_reaches_beyond_the_store_is_refused(store, sparql):
    with pytest.raises(ValueError):
        run_query(store, sparql)


def test_raw_sparql_runs_and_keywords_in_strings_iris_and_names_are_not_refused(store, traces):
    ok = [
        'PREFIX ex: <http://example.org/> SELECT ?service ?load WHERE { GRAPH ?g { ?service ?p "SERVICE <file:///x> LOAD" } '
        "OPTIONAL { ?service ex:load ?load } } # SERVICE in a comment",
        "SELECT (COUNT(*) AS ?n) FROM <https://example.org/g> FROM NAMED <urn:dspy-rdf:trace:x> WHERE { ?s ?p ?o }",
        'SELECT ?s WHERE { ?s <http://example.org/bif:http_get> "bif:http_get" }',
    ]
    for sparql in ok:
        check_user_sparql(sparql)
        run_query(store, sparql)
    result = run_query(store, "SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE { GRAPH ?g { ?g a <https://w3id.org/lmodel/dspy/Trace> } }")
    assert result.rows == [(len(traces),)]
    check_user_sparql("SELECT * FROM <file:///x> WHERE { ?s ?p ?o }", allow_federation=True)
    assert QueryResult.from_json({"head": {}, "boolean": True}).rows == [(True,)]


# --- results ----------------------------------------------------------------------------------------------


def test_formats(store):
    result = run_query(store, "tool_calls_per_tool")
    table = result.format("table")
    assert table.splitlines()[0].split() == result.columns and f"({len(result.rows)} rows)" in table
    import csv
    import io

    back = list(csv.reader(io.StringIO(result.to_csv())))
    assert back[0] == result.columns and len(back) == len(result.rows) + 1
    assert {r[0] for r in back[1:]} == {r[0] for r in result.rows}  # tool names with newlines and quotes survive CSV
    tsv = result.to_tsv().splitlines()
    assert len(tsv) == len(result.rows) + 1 and all(line.count("\t") == len(result.columns) - 1 for line in tsv)
    assert json.loads(result.format("json")) == result.raw
    with pytest.raises(ValueError, match="unknown format"):
        result.format("xml")
    assert set(FORMATS) == {"table", "csv", "tsv", "json"}


def test_to_dataframe_needs_pandas(store):
    result = run_query(store, "finish_reasons")
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            result.to_dataframe()
    else:
        frame = result.to_dataframe()
        assert list(frame.columns) == result.columns and len(frame) == len(result.rows)


def test_a_result_from_sparql_json_keeps_unbound_cells_as_none():
    raw = {"head": {"vars": ["a", "b"]}, "results": {"bindings": [{"a": {"type": "literal", "value": "1", "datatype": "http://www.w3.org/2001/XMLSchema#integer"}}]}}
    result = QueryResult.from_json(raw)
    assert result.rows == [(1, None)] and result.to_csv() == "a,b\r\n1,\r\n"


def test_trace_lines_are_the_source_of_the_store(traces):
    # sanity: every trace in the test set writes tool calls where walk() finds them (guards the ground truth)
    for trace in traces:
        _, lines = trace_lines(trace)
        assert sum("/LMToolCallPart>" in line for line in lines) == len(of(trace, m.LMToolCallPart))


def test_the_table_rounds_float_noise_but_csv_and_json_keep_the_value():
    raw = {"head": {"vars": ["cost"]}, "results": {"bindings": [
        {"cost": {"type": "literal", "value": "3.5879999999999994E-4", "datatype": "http://www.w3.org/2001/XMLSchema#double"}}
    ]}}  # fmt: skip
    result = QueryResult.from_json(raw)
    assert result.rows == [(0.00035879999999999994,)]
    assert "0.0003588\n" in result.to_table() + "\n" and "0.00035879999999999994" not in result.to_table()
    assert "0.00035879999999999994" in result.format("csv")
    assert json.loads(result.format("json")) == raw


def test_the_table_shows_iris_whole_and_cuts_other_long_text():
    iri = "urn:dspy-rdf:trace:sha256-" + "0123456789abcdef" * 2 + "/entry/0/response/output/0/part/1"
    raw = {"head": {"vars": ["call", "text"]}, "results": {"bindings": [
        {"call": {"type": "uri", "value": iri}, "text": {"type": "literal", "value": "x" * 80}},
    ]}}  # fmt: skip
    row = QueryResult.from_json(raw).to_table(max_width=20).splitlines()[2]
    assert row == f"{iri}  {'x' * 19}…"


@pytest.fixture(scope="module")
def rdflib_dataset(store):
    import io

    import rdflib

    handle = io.BytesIO()
    store.dump(handle)
    dataset = rdflib.Dataset()
    dataset.parse(data=handle.getvalue().decode("utf-8"), format="nquads")
    return dataset


def test_rdflib_joins_sub_selects_on_bind_made_keys_as_a_cross_product():
    """One reason the queries join sub-SELECTs only on terms read from triples (the other: pyoxigraph joins on a
    BIND-made key row by row, see the notes of tool_latency_per_tool): rdflib 7 gives 4 rows here, not 2. When this
    fails, rdflib changed."""
    import rdflib

    dataset = rdflib.Dataset()
    dataset.parse(data='<http://a> <http://p> "x" .\n<http://b> <http://p> "y" .\n', format="nt")
    query = (
        "SELECT * WHERE { { SELECT ?k ?s WHERE { ?s <http://p> ?o BIND(STR(?o) AS ?k) } }"
        " { SELECT ?k ?t WHERE { ?t <http://p> ?v BIND(STR(?v) AS ?k) } } }"
    )
    assert len(list(dataset.query(query))) == 4


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED_COLUMNS))
def test_every_query_gives_the_same_answer_on_another_engine(store, rdflib_dataset, name):
    """rdflib's SPARQL engine is a third implementation (next to the embedded and the remote Oxigraph): the query
    library must not rely on what one engine does where SPARQL leaves room (e.g. empty groups, SAMPLE, UNION). A
    dump holds the traces, not the store's ledger: rdflib runs the scan version of a query over the ledger, which
    must give what the store gives from its ledger."""
    query = get_query(name)
    ours = run_query(store, name, BIG if any(p.name == "limit" for p in query.parameters) else {}).rows
    text = bind_parameters(dataclasses.replace(query, text=query.scan or query.text), BIG if any(p.name == "limit" for p in query.parameters) else {})

    def plain(value):  # numbers and times compared as values (engines and parsers differ in their text), the rest as text
        if isinstance(value, numbers.Number) and not isinstance(value, bool):
            return round(float(value), 9)
        if isinstance(value, str) and len(value) > 19 and value[4] == "-" and value[10] == "T":
            value = datetime.fromisoformat(value)
        if isinstance(value, datetime):
            return value
        return value if value is None or isinstance(value, bool) else str(value)

    def lexical(term):  # numbers and booleans as values, everything else as its lexical form
        value = None if term is None else term.toPython()
        return plain(value if value is None or isinstance(value, (numbers.Number, bool, datetime)) else str(term))

    theirs = [tuple(lexical(term) for term in row) for row in rdflib_dataset.query(text)]
    assert Counter(tuple(plain(v) for v in row) for row in ours) == Counter(theirs)


# --- one answer everywhere --------------------------------------------------------------------------------

PARITY_VALUES = {
    "tool": ["add", "divide", HOSTILE[0], HOSTILE[5]], "model": ["openai/gpt-4o-mini", "dummy", HOSTILE[1], HOSTILE[7]],
    "module_class": ["Predict", HOSTILE[3]],
}  # fmt: skip
"""Values bound to the ``tool``, ``model`` and ``module_class`` parameters in the parity test (each is found in the test
traces)."""


def parity_cases() -> list[tuple[str, dict[str, str]]]:
    """Every canned query (whatever files exist), unbound and with each of its tool/model parameters bound."""
    cases = []
    for query in list_queries():
        extra = BIG if any(p.is_limit for p in query.parameters) else {}
        cases.append((query.name, dict(extra)))
        for p in query.parameters:
            for value in PARITY_VALUES.get(p.name, []) + (HOSTILE[2:3] if p.type == "string" else []):
                cases.append((query.name, {p.name: value, **extra}))
    return cases


def test_the_parity_test_covers_every_canned_query():
    assert {name for name, _ in parity_cases()} == {q.name for q in list_queries()} and len(list_queries()) >= 16
    assert sum(1 for _, params in parity_cases() if "tool" in params or "model" in params) >= 30


@pytest.fixture(scope="module")
def reference(traces, tmp_path_factory):
    """The test traces in an embedded store: the answers every other store must give."""
    with EmbeddedStore(tmp_path_factory.mktemp("reference") / "db") as s:
        s.put(traces)
        yield s


@pytest.mark.parametrize(("name", "params"), parity_cases(), ids=lambda x: x if isinstance(x, str) else repr(sorted(x.items())))
def test_every_canned_query_gives_the_embedded_stores_rows_on_every_store(store, reference, name, params):
    """Same rows, same order, same values and types (numbers compare exactly: costs and durations are decimals)."""
    want = run_query(reference, name, params)
    got = run_query(store, name, params)
    assert got.columns == want.columns
    assert [[(type(c).__name__, c) for c in row] for row in got.rows] == [[(type(c).__name__, c) for c in row] for row in want.rows]


def test_a_ledger_entry_larger_than_a_request_is_written_in_parts_a_server_takes(virtuoso_server, server_env):
    """A batch with many tools and duration buckets makes a ledger entry larger than any of its traces: sent to
    Virtuoso as SPARQL updates (at most about 1,000 triples each), it is written as several entries whose sums are the
    ledger's, which answers as the triples do."""
    from dspy_rdf.store.ledger import Ledger
    from dspy_rdf.store.remote import WriteMethod

    start = datetime.fromisoformat("2032-03-01T12:00:00+00:00")
    runs = [
        m.Trace(source_kind="program_run", source_format="dspy_callback", started_at=start.isoformat(), calls=[
            m.ToolExecution(tool_call=m.ToolCall(name=f"tool{run % 4}", args={"n": n}), started_at=(start + timedelta(minutes=n)).isoformat(),
                            ended_at=(start + timedelta(minutes=n, microseconds=137 * (run * 40 + n) ** 2)).isoformat())
            for n in range(40)
        ])
        for run in range(12)
    ]  # fmt: skip
    server_env(virtuoso_server)
    with RemoteStore(virtuoso_server.url, write=WriteMethod.UPDATE, max_attempts=2) as store:
        clear_traces(store)
        assert len(store.put(runs).written) == len(runs)
        entries = store.ledger_entries()
        assert len(entries) > 1 and store.ledger_is_current()
        total = Ledger()
        for part in Ledger.split(store.ledger(), 0, 800):
            total.merge(part)
        assert total.rows == store.ledger().rows and total.traces == len(runs)
        for name in ("slowest_tool_executions", "tool_latency_per_tool", "longest_conversations", "tool_calls_per_tool"):
            assert run_query(store, name, {}).rows == over_triples(store, name, {}).rows, name
            assert run_query(store, name, {}).rows
        clear_traces(store)
