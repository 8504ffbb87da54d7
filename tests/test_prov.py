"""The PROV-O view: generic PROV queries answer on captured DSPy runs, every view conforms to its shapes, broken views
do not, and the schema's PROV-O mappings say what the view does."""

from __future__ import annotations

import json
import re

import dspy
import pyoxigraph as ox
import pytest
import yaml

from conftest import DATA
from dspy_rdf import model as m
from dspy_rdf.capture import MemorySink, TraceRecorder
from dspy_rdf.cli import main
from dspy_rdf.demo import bundled_traces_path
from dspy_rdf.identity import trace_iri
from dspy_rdf.inputs import read_traces
from dspy_rdf.prov import PROV, PROV_SHAPES, PROV_VIEW, prov_graph_name, prov_view, validate_prov
from dspy_rdf.resources import schema_path
from dspy_rdf.store import EmbeddedStore
from dspy_rdf.tracejson import trace_from_json
from dspy_rdf.writer import part_ref_iri
from lms import ScriptedLM, fields, tool_call

DSPY = "https://w3id.org/lmodel/dspy/"
REACT = [
    fields(next_thought="Add first.", next_tool_name="add", next_tool_args='{"a": 2, "b": 3}'),
    fields(next_thought="Now divide by zero.", next_tool_name="divide", next_tool_args='{"a": 5, "b": 0}'),
    fields(next_thought="Done.", next_tool_name="finish", next_tool_args="{}"),
    fields(reasoning="2 + 3 = 5", answer="5"),
]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


class CallTools(dspy.Module):
    """A model asks for tools natively (parallel calls in one response); the module runs them (one raises)."""

    def __init__(self) -> None:
        super().__init__()
        self.tools = {t.name: t for t in map(dspy.Tool, (add, divide))}
        self.predict = dspy.Predict("question: str, tools: list[dspy.Tool] -> tool_calls: dspy.ToolCalls")

    def forward(self, question: str):
        results = []
        for call in self.predict(question=question, tools=list(self.tools.values())).tool_calls.tool_calls:
            try:
                results.append(call.execute(functions=self.tools))
            except Exception as exc:  # noqa: BLE001 - the failing tool
                results.append(str(exc))
        return dspy.Prediction(results=results)


@pytest.fixture(scope="module")
def captured() -> dict[str, m.Trace]:
    """A dspy.ReAct run with a failing tool and a native parallel tool-calling run, on the real dspy.LM."""
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    with dspy.context(lm=ScriptedLM(REACT), callbacks=[recorder]):
        dspy.ReAct("question -> answer", tools=[add, divide])(question="2 + 3, then / 0?")
    native = ScriptedLM([[tool_call("call_add", "add", '{"a": 1, "b": 2}'), tool_call("call_div", "divide", '{"a": 1, "b": 0}')]])
    with dspy.context(lm=native, adapter=dspy.ChatAdapter(use_native_function_calling=True), callbacks=[recorder]):
        CallTools()(question="1 + 2 and 1 / 0")
    assert recorder.errors == [] and len(sink.traces) == 2
    return {"react": sink.traces[0], "native": sink.traces[1]}


@pytest.fixture(scope="module")
def store(captured, tmp_path_factory):
    traces = [item.trace for item in read_traces(bundled_traces_path())]
    traces += [trace_from_json(json.loads((DATA / name).read_text())) for name in ("history_dicts_dspy3.3.1.json", "react_history.json", "dspy341_react_trajectory.json")]
    traces += list(captured.values())
    with EmbeddedStore(tmp_path_factory.mktemp("prov") / "store") as opened:
        opened.put(traces)
        yield opened


def with_view(store, iri: str) -> ox.Store:
    """An in-memory store holding the trace's graph and its view (in the default graph), for PROV queries."""
    memory = ox.Store()
    for quad in store.oxigraph.quads_for_pattern(None, None, None, ox.NamedNode(iri)):
        memory.add(ox.Quad(quad.subject, quad.predicate, quad.object, ox.DefaultGraph()))
    [(_, triples)] = prov_view(store, [iri])
    memory.extend(ox.Quad(t.subject, t.predicate, t.object, ox.DefaultGraph()) for t in triples)
    return memory


def test_everything_the_final_answer_of_a_react_run_was_derived_from(store, captured):
    trace = captured["react"]
    iri = trace_iri(trace)
    lm_calls = [(n, c) for n, c in enumerate(trace.calls) if isinstance(c, m.LMCall)]
    last, _ = lm_calls[-1]
    # ground truth: the messages every LM call up to the last one read, and the LM responses that decided each tool
    # execution before it
    expected = {f"{iri}/call/{n}/entry/request/message/{k}" for n, c in lm_calls for k in range(len(c.entry.request.messages))}
    expected |= {f"{iri}/call/{c.decided_by}/entry/response" for n, c in enumerate(trace.calls) if isinstance(c, m.ToolExecution) and n < last}
    assert len(expected) > 8
    query = f"""PREFIX prov: <{PROV}>
        SELECT DISTINCT ?source WHERE {{ <{iri}/call/{last}/entry/response> prov:wasGeneratedBy/prov:wasInformedBy*/prov:used ?source }}"""
    found = {row["source"].value for row in with_view(store, iri).query(query)}
    assert found == expected


def test_a_native_tool_execution_used_the_tool_call_part_and_generated_its_result(store, captured):
    trace = captured["native"]
    iri = trace_iri(trace)
    memory = with_view(store, iri)
    executions = [(n, c) for n, c in enumerate(trace.calls) if isinstance(c, m.ToolExecution)]
    assert len(executions) == 2
    for n, execution in executions:
        used = {r["x"].value for r in memory.query(f"SELECT ?x WHERE {{ <{iri}/call/{n}> <{PROV}used> ?x }}")}
        assert used == {part_ref_iri(iri, execution.answers)}
        generated = {r["x"].value for r in memory.query(f"SELECT ?x WHERE {{ ?x <{PROV}wasGeneratedBy> <{iri}/call/{n}> }}")}
        assert generated == {f"{iri}/call/{n}/tool_result"}
        # the part was generated by the LM call whose response holds it
        [row] = list(memory.query(f"SELECT ?a WHERE {{ <{part_ref_iri(iri, execution.answers)}> <{PROV}wasGeneratedBy> ?a }}"))
        assert row["a"].value == f"{iri}/call/{execution.answers.call}"


def test_every_view_conforms_to_the_prov_shapes(store):
    views = list(prov_view(store))
    assert len(views) == len(store.trace_iris()) >= 14
    for iri, triples in views:
        conforms, text = validate_prov(triples)
        assert conforms, f"{iri}\n{text}"
    activities = sum(1 for _, triples in views for t in triples if t.object == ox.NamedNode(PROV + "Activity"))
    assert activities > 20


def _replace(triples: list[ox.Triple], predicate: str, change) -> list[ox.Triple]:
    """The triples with the first one of ``predicate`` changed by ``change`` (a list of triples in its place)."""
    index = next(i for i, t in enumerate(triples) if t.predicate.value == PROV + predicate)
    return triples[:index] + change(triples[index]) + triples[index + 1:]


def _time(text: str) -> ox.Literal:
    return ox.Literal(text, datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime"))


def _broken_views(triples: list[ox.Triple]) -> dict[str, list[ox.Triple]]:
    """A conforming view broken in each way the shapes forbid."""
    start, end = PROV + "startedAtTime", PROV + "endedAtTime"
    activity = next(t.subject for t in triples if t.predicate.value == start)
    without_ends = [t for t in triples if t.predicate.value != end]
    informed = next(t for t in triples if t.predicate.value == PROV + "wasInformedBy")
    generated = next(t for t in triples if t.predicate.value == PROV + "wasGeneratedBy")
    used = next(t for t in triples if t.predicate.value == PROV + "used")
    associated = next(t for t in triples if t.predicate.value == PROV + "wasAssociatedWith")
    return {
        "a second start": _replace(triples, "startedAtTime", lambda t: [t, ox.Triple(t.subject, t.predicate, _time("2001-01-01T00:00:00Z"))]),
        "a second end": _replace(triples, "endedAtTime", lambda t: [t, ox.Triple(t.subject, t.predicate, _time("2999-01-01T00:00:00Z"))]),
        "a start that is not a date-time": _replace(triples, "startedAtTime", lambda t: [ox.Triple(t.subject, t.predicate, ox.Literal("yesterday"))]),
        "no time at all": [t for t in triples if not (t.subject == activity and t.predicate.value in (start, end))],
        "an end before the start": _replace(
            without_ends, "startedAtTime", lambda t: [t, ox.Triple(t.subject, ox.NamedNode(end), _time("1999-01-01T00:00:00Z"))]
        ),
        "informed by an activity that starts later": [t for t in triples if not (t.subject == informed.object and t.predicate.value == start)]
        + [ox.Triple(informed.object, ox.NamedNode(start), _time("2999-01-01T00:00:00Z"))],
        "informed by two activities": triples + [ox.Triple(informed.subject, informed.predicate, activity)],
        "informed by something that is not an activity": triples + [ox.Triple(informed.subject, informed.predicate, used.object)],
        "an entity generated twice": triples + [ox.Triple(generated.subject, generated.predicate, informed.subject)],
        "generated by something that is not an activity": [t for t in triples if not (t.subject == generated.subject and t.predicate == generated.predicate)]
        + [ox.Triple(generated.subject, generated.predicate, used.object)],
        "a generated node that is not an entity": [t for t in triples if not (t.subject == generated.subject and t.object == ox.NamedNode(PROV + "Entity"))],
        "used something that is not an entity": [t for t in triples if not (t.subject == used.object and t.object == ox.NamedNode(PROV + "Entity"))],
        "associated with something that is not an agent": triples + [ox.Triple(associated.subject, associated.predicate, used.object)],
        "an agent without a name": [t for t in triples if t.predicate.value != "http://www.w3.org/2000/01/rdf-schema#label"],
    }


def _shape_messages() -> set[str]:
    return set(re.findall(r'sh:message "([^"]+)"', PROV_SHAPES.read_text(encoding="utf-8")))


def test_every_constraint_of_the_prov_shapes_is_broken_by_a_case(store, captured):
    """Each broken view fails, and together they fail every constraint the shapes have (a new one needs a case)."""
    [(_, triples)] = prov_view(store, [trace_iri(captured["react"])])
    assert validate_prov(triples)[0]
    seen: set[str] = set()
    for case, broken in _broken_views(triples).items():
        assert broken != triples, case
        conforms, text = validate_prov(broken)
        assert not conforms, case
        seen |= set(re.findall(r"Message: (.+)", text))
    assert seen == _shape_messages()


def _prov_mappings() -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, str]]:
    """From the schema: class -> its PROV terms (with its ancestors'), slot -> its PROV terms, class -> parent."""
    schema = yaml.safe_load(schema_path().read_text(encoding="utf-8"))

    def prov_terms(element: dict) -> set[str]:
        kinds = ("exact_mappings", "close_mappings", "related_mappings", "narrow_mappings", "broad_mappings")
        return {term.split(":", 1)[1] for kind in kinds for term in element.get(kind) or [] if term.startswith("prov:")}

    classes = schema["classes"]
    parents = {name: c.get("is_a") for name, c in classes.items()}
    own = {name: prov_terms(c) for name, c in classes.items()}

    def inherited(name: str | None) -> set[str]:
        return set() if name is None else own[name] | inherited(parents[name])

    return {name: inherited(name) for name in classes}, {name: prov_terms(s) for name, s in schema["slots"].items()}, parents


def test_the_schema_prov_mappings_say_what_the_view_does(store):
    class_terms, slot_terms, _ = _prov_mappings()
    typed: dict[str, set[str]] = {}  # dspy class -> PROV classes the view gives its nodes
    for iri, triples in prov_view(store):
        classes = {row["s"].value: row["c"].value.removeprefix(DSPY) for row in store.oxigraph.query(
            f"SELECT ?s ?c WHERE {{ GRAPH <{iri}> {{ ?s a ?c }} }}")}  # fmt: skip
        for t in triples:
            if t.predicate.value.endswith("#type") and t.subject.value in classes:
                typed.setdefault(classes[t.subject.value], set()).add(t.object.value.removeprefix(PROV))
    assert {"LMCall", "ToolExecution", "ModuleCall", "LMHistoryEntry", "LMMessage", "LMResponse", "LMToolCallPart", "ToolResult"} <= set(typed)
    for cls, terms in typed.items():
        assert terms <= class_terms[cls], f"the view makes {cls} a {terms}; the schema maps it to {class_terms[cls]}"
    # every slot the view follows is mapped to the PROV relation the view turns it into (or its inverse)
    view = PROV_VIEW.read_text(encoding="utf-8")
    followed = set(re.findall(r"dspy:(\w+)", view)) - set(class_terms)
    relation = {"messages": "used", "request": "used", "response": "generated", "answers": "used", "decided_by": "wasInformedBy",
                "tool_result": "generated", "model": "wasAssociatedWith", "module_class": "wasAssociatedWith",
                "started_at": "startedAtTime", "ended_at": "endedAtTime", "timestamp": "endedAtTime"}  # fmt: skip
    for slot, term in relation.items():
        assert slot in followed and term in slot_terms[slot], slot


def test_the_cli_writes_each_view_into_its_own_graph(tmp_path, captured):
    store_copy = tmp_path / "copy"
    with EmbeddedStore(store_copy) as copy:
        copy.put(list(captured.values()))
    out = tmp_path / "prov.trig"
    assert main(["prov", "--store", str(store_copy), "-o", str(out)]) == 0
    graphs = {q.graph_name.value for q in ox.parse(out.read_bytes(), format=ox.RdfFormat.TRIG)}
    assert graphs == {prov_graph_name(trace_iri(t)) for t in captured.values()}


def test_a_server_gives_the_same_view_as_the_embedded_store(remote_store, store, captured):
    traces = list(captured.values())
    remote_store.put(traces)
    iris = [trace_iri(t) for t in traces]
    remote = {iri: sorted(map(str, triples)) for iri, triples in prov_view(remote_store, iris)}
    embedded = {iri: sorted(map(str, triples)) for iri, triples in prov_view(store, iris)}
    assert remote == embedded and all(remote.values())
