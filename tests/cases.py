"""The validation corpus: good traces, and broken variants of them generated from the shapes themselves.

- :func:`good_traces`: every readable fixture in ``tests/data``, the bundled traces, a live-captured program run (a
  ``dspy.ReAct`` run with a failing tool, recorded by ``TraceRecorder``), and traces that hold numbers beyond 64 bits
  (valid: what the exporter writes for them).
- :func:`model_breaks`: traces of the canonical model that break a rule (so JSON inputs carry findings too).
- :func:`shape_cases`: for every property shape of every node shape of the shapes directory, one broken trace per
  constraint it has (a missing value for ``sh:minCount``, a second value for ``sh:maxCount``, a wrong datatype and an
  ill-formed lexical form for ``sh:datatype``, the wrong node kind, a node of the wrong class or of none, a value
  outside ``sh:in``, one below ``sh:minInclusive``, ...), and an unknown predicate for every closed shape. The
  constraints are read from the shapes graph, so a new constraint is covered without editing this file; a constraint
  kind this file cannot break fails :func:`shape_cases` by name.
- :func:`rule_cases`: every hand-written rule broken in a real trace (:data:`RULE_BREAKS`); :func:`rules_in_shapes`
  lists the rules, so a new rule without a break is caught by the tests.

Each case is one trace, in a graph named by its own IRI (``urn:dspy-rdf-case:<n>``; the nodes are renamed with it),
so every case can sit in one file with all the others.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pyoxigraph as ox
import rdflib
from rdflib.collection import Collection
from rdflib.namespace import RDF, RDFS, SH, XSD

from dspy_rdf import trace_from_json
from dspy_rdf.canonical import model as m
from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf import vocab as v
from dspy_rdf.rdf.formats import encode_trace
from dspy_rdf.validation.compiled import compile_shapes
from dspy_rdf.validation.shapes import RULES_NAMESPACE, load_shapes, subclass_closure

DATA = Path(__file__).parent / "data"
CASE_BASE = "urn:dspy-rdf-case:"
D = v.DSPY
PREFIX = f"PREFIX dspy: <{D}> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"


@dataclass(frozen=True)
class Case:
    """One trace (N-Quads, all in the graph of its IRI) and what must be reported on it: ``(focus node, path IRI or
    None, constraint component or rule name)``, or None for a trace that must conform."""

    name: str
    trace: str
    nquads: bytes
    expect: tuple[str, str | None, str] | None


# --- good traces ----------------------------------------------------------------------------------------------------


def _fixture_traces() -> list[m.Trace]:
    out = []
    for path in sorted(DATA.glob("*.json")):
        try:
            out.append(trace_from_json(json.loads(path.read_text(encoding="utf-8"))))
        except ValueError:
            continue  # history dicts of versions that need --fill-model, lm15 shapes read elsewhere
    return out


@lru_cache(maxsize=1)
def captured_run() -> m.Trace:
    """A ``dspy.ReAct`` run with a tool that raises, recorded live (DummyLM: deterministic answers)."""
    import dspy
    from dspy.utils import DummyLM

    from dspy_rdf.capture.recorder import MemorySink, TraceRecorder

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def divide(a: int, b: int) -> float:
        """Divide a by b."""
        return a / b

    lm = DummyLM([
        {"next_thought": "Add first.", "next_tool_name": "add", "next_tool_args": {"a": 2, "b": 3}},
        {"next_thought": "Now divide by zero.", "next_tool_name": "divide", "next_tool_args": {"a": 5, "b": 0}},
        {"next_thought": "That failed; finish.", "next_tool_name": "finish", "next_tool_args": {}},
        {"reasoning": "2 + 3 = 5", "answer": "5"},
    ])
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    with dspy.context(lm=lm, callbacks=[recorder]):
        dspy.ReAct("question -> answer", tools=[add, divide])(question="2 + 3, then / 0?")
    assert recorder.errors == [] and len(sink.traces) == 1
    return sink.traces[0]


def big_number_traces() -> list[m.Trace]:
    """Valid traces with numbers beyond 64 bits (usage of 2**70, max_tokens 10**30, n = -2**63 - 1; a total of 2**63 of
    counts that fit in 64 bits)."""
    entry = json.loads((DATA / "history_entry_all_parts.json").read_text(encoding="utf-8"))
    big = json.loads(json.dumps(entry))
    usage = big["response"]["usage"]
    usage.update(input_tokens=2**70, prompt_tokens=2**70, output_tokens=1, completion_tokens=1, total_tokens=2**70 + 1)
    big["request"]["config"]["max_tokens"] = 10**30
    big["request"]["config"]["n"] = -(2**63) - 1
    summed = json.loads(json.dumps(entry))  # counts within 64 bits whose total is not
    summed["response"]["usage"].update(input_tokens=2**63 - 1, prompt_tokens=2**63 - 1, output_tokens=1, completion_tokens=1, total_tokens=2**63)
    return [trace_from_json(big), trace_from_json(summed)]


@lru_cache(maxsize=1)
def good_traces() -> tuple[m.Trace, ...]:
    """Every trace of the corpus that must conform."""
    traces = _fixture_traces()
    traces += [item.trace for item in read_traces(bundled_traces_path()) if item.trace is not None]
    traces.append(captured_run())
    traces += big_number_traces()
    return tuple(traces)


def model_breaks() -> list[tuple[str, m.Trace, str]]:
    """``(name, trace, rule)``: traces of the canonical model that break one rule each (secrets included, so that
    reports are checked for redaction)."""
    entry = json.loads((DATA / "history_entry_all_parts.json").read_text(encoding="utf-8"))
    out = []

    def variant(name: str, rule: str, edit: Callable[[dict], None]) -> None:
        data = json.loads(json.dumps(entry))
        edit(data)
        out.append((name, trace_from_json(data), rule))

    def usage_total(d: dict) -> None:
        d["response"]["usage"]["total_tokens"] = 7
        d["request"]["config"]["extensions"] = {"api_key": "sk-proj-" + "A" * 40, "note": "Bearer abcdefghijklmnopqrstuvwxyz012345"}

    def big_usage_total(d: dict) -> None:
        d["response"]["usage"].update(input_tokens=2**70, prompt_tokens=2**70, total_tokens=2**70)

    def parts_overflow_64_bits(d: dict) -> None:
        # each count fits in 64 bits, their sum does not: a store computing with 64-bit integers finds no sum at all
        d["response"]["usage"].update(input_tokens=2**63 - 1, prompt_tokens=2**63 - 1, output_tokens=1, completion_tokens=1, total_tokens=0)

    def not_offered(d: dict) -> None:
        for output in d["response"]["outputs"]:
            for part in output["parts"]:
                if part["type"] == "tool_call":
                    part["name"] = "no_such_tool"

    def error_without_content(d: dict) -> None:
        for message in d["request"]["messages"]:
            for part in message["parts"]:
                if part["type"] == "tool_result":
                    part["is_error"], part["content"] = True, []

    def duplicate_ids(d: dict) -> None:
        for output in d["response"]["outputs"]:
            calls = [p for p in output["parts"] if p["type"] == "tool_call"]
            if calls:
                output["parts"].append(dict(calls[0], args={"copy": True}))

    variant("usage-total", "UsageTotal", usage_total)
    variant("usage-total-beyond-64-bits", "UsageTotal", big_usage_total)
    variant("usage-parts-overflow-64-bits", "UsageTotal", parts_overflow_64_bits)
    variant("tool-not-offered", "ToolCallOffered", not_offered)
    variant("error-without-content", "ErrorResultHasContent", error_without_content)
    variant("duplicate-call-ids", "UniqueToolCallIds", duplicate_ids)
    late = dataclasses.replace(captured_run(), started_at="2026-01-02T00:00:00+00:00", ended_at="2026-01-01T00:00:00+00:00")
    # another execution (a run is named by its top-level call's DSPy call id): not the good run of good_traces() edited
    late.calls = [dataclasses.replace(late.calls[0], dspy_call_id=f"{late.calls[0].dspy_call_id}-late"), *late.calls[1:]]
    out.append(("run-ends-before-start", late, "StartBeforeEnd"))
    return out


# --- from traces to cases -------------------------------------------------------------------------------------------


def _renamed(iri: str, nquads: bytes, new: str) -> list[tuple]:
    """The triples of one exported trace with every IRI under ``iri`` moved under ``new``."""

    def rename(term):
        if isinstance(term, ox.NamedNode) and (term.value == iri or term.value.startswith(iri + "/")):
            return ox.NamedNode(new + term.value[len(iri):])
        return term

    return [(rename(q.subject), q.predicate, rename(q.object)) for q in ox.parse(nquads, ox.RdfFormat.N_QUADS)]


def _nquads(trace_iri: str, triples: list[tuple]) -> bytes:
    graph = ox.NamedNode(trace_iri)
    return ox.serialize([ox.Quad(s, p, o, graph) for s, p, o in triples], format=ox.RdfFormat.N_QUADS)


class _Counter:
    n = 0

    @classmethod
    def next(cls) -> str:
        cls.n += 1
        return f"{CASE_BASE}{cls.n}"


def trace_case(name: str, trace: m.Trace, expect: tuple[str, str | None, str] | None = None) -> Case:
    """A trace of the model as a case, exported (unredacted: cases are about validation) and renamed."""
    iri, data = encode_trace(trace, redactor=None)
    new = _Counter.next()
    if expect is not None:
        expect = (expect[0].replace("{trace}", new), expect[1], expect[2])
    return Case(name, new, _nquads(new, _renamed(iri, data, new)), expect)


# --- shape cases ----------------------------------------------------------------------------------------------------

_LITERAL = {  # a well-formed value of each datatype, and a second one
    str(XSD.integer): ("12345", "12346"), str(XSD.boolean): ("true", "false"), str(XSD.double): ("1.5", "2.5"),
    str(XSD.decimal): ("1.5", "2.5"), str(XSD.dateTime): ("2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z"),
    str(XSD.date): ("2026-11-22", "2026-11-23"), str(XSD.string): ("x-one", "x-two"), str(RDF.JSON): ("{}", "[]"),
}
_COMPONENTS = {
    SH.minCount: "MinCountConstraintComponent", SH.maxCount: "MaxCountConstraintComponent",
    SH.datatype: "DatatypeConstraintComponent", SH.nodeKind: "NodeKindConstraintComponent",
    SH["class"]: "ClassConstraintComponent", SH["in"]: "InConstraintComponent",
    SH.minInclusive: "MinInclusiveConstraintComponent", SH.maxInclusive: "MaxInclusiveConstraintComponent",
    SH.minExclusive: "MinExclusiveConstraintComponent", SH.maxExclusive: "MaxExclusiveConstraintComponent",
    SH.minLength: "MinLengthConstraintComponent", SH.maxLength: "MaxLengthConstraintComponent",
    SH.pattern: "PatternConstraintComponent",
}
_NOT_CONSTRAINTS = {SH.path, SH.description, SH.order, SH.name, SH.group, SH.defaultValue, SH.message, SH.severity, RDFS.comment, RDFS.label, SH.flags}


def _literal(dt: str, which: int = 0) -> ox.Literal:
    text = _LITERAL.get(dt, ("x-one", "x-two"))[which]
    return ox.Literal(text) if dt == str(XSD.string) else ox.Literal(text, datatype=ox.NamedNode(dt))


def _closure() -> Callable[[str], frozenset[str]]:
    return subclass_closure(load_shapes().classes)


@lru_cache(maxsize=1)
def _bases() -> list[tuple[str, list[tuple]]]:
    """Each good trace as (IRI, triples), smallest first."""
    out = []
    for trace in good_traces():
        iri, data = encode_trace(trace, redactor=None)
        out.append((iri, [(q.subject, q.predicate, q.object) for q in ox.parse(data, ox.RdfFormat.N_QUADS)]))
    return sorted(out, key=lambda x: (len(x[1]), x[0]))


def _value_for(graph: rdflib.Graph, ps, which: int = 0) -> ox.NamedNode | ox.Literal:
    """A value that satisfies the property shape's value constraints."""
    in_list = graph.value(ps, SH["in"])
    if in_list is not None:
        members = list(Collection(graph, in_list))
        member = members[min(which, len(members) - 1)]
        return ox.Literal(str(member), datatype=ox.NamedNode(str(member.datatype))) if member.datatype else ox.Literal(str(member))
    dt = graph.value(ps, SH.datatype)
    if dt is not None:
        return _literal(str(dt), which)
    return ox.Literal(("x-one", "x-two")[which])


def shape_cases() -> list[Case]:
    """One broken trace per constraint of every property shape, and per closed shape (see the module docstring)."""
    graph = load_shapes().graph
    closure = _closure()
    bases = _bases()
    out: list[Case] = []
    for shape in sorted(set(graph.subjects(SH.targetClass, None)), key=str):
        targets = set()
        for cls in graph.objects(shape, SH.targetClass):
            targets |= closure(str(cls))
        found = None
        for iri, triples in bases:
            typed = sorted(s.value for s, p, o in triples if p.value == v.RDF_TYPE and o.value in targets and isinstance(s, ox.NamedNode))
            if typed:
                found = (iri, triples, typed[0])
                break
        shape_name = str(shape).rsplit("/", 1)[-1]
        if found is None:
            # a class the writer never writes (Tool, Citation, ...): a node of it added to the smallest trace
            iri, triples = bases[0]
            focus = f"{iri}/synthetic/{shape_name}"
            cls = str(graph.value(shape, SH.targetClass))
            triples = triples + [(ox.NamedNode(focus), ox.NamedNode(v.RDF_TYPE), ox.NamedNode(cls))]
            for ps in graph.objects(shape, SH.property):
                if graph.value(ps, SH.minCount) is not None:
                    triples.append((ox.NamedNode(focus), ox.NamedNode(str(graph.value(ps, SH.path))), _value_for(graph, ps)))
            found = (iri, triples, focus)
        iri, triples, focus = found
        focus_node = ox.NamedNode(focus)
        for ps in sorted(graph.objects(shape, SH.property), key=lambda x: str(graph.value(x, SH.path))):
            path = str(graph.value(ps, SH.path))
            pred = ox.NamedNode(path)
            kept = [t for t in triples if not (t[0] == focus_node and t[1] == pred)]
            current = [t[2] for t in triples if t[0] == focus_node and t[1] == pred]
            label = f"{shape_name}.{path.rsplit('/', 1)[-1].rsplit('#', 1)[-1]}"

            def case(kind: str, values: list, component: str) -> None:
                new = _Counter.next()
                body = kept + [(focus_node, pred, value) for value in values]
                out.append(Case(f"{label}.{kind}", new, _nquads(new, _renamed(iri, _nquads(iri, body), new)),
                                (new + focus[len(iri):], path, component)))

            for param in set(graph.predicates(ps, None)):
                if param not in _COMPONENTS and param not in _NOT_CONSTRAINTS:
                    raise AssertionError(f"{label}: tests/cases.py cannot break {param} yet")
            dt = graph.value(ps, SH.datatype)
            good = current[:1] or [_value_for(graph, ps)]
            if (n := graph.value(ps, SH.minCount)) is not None and int(n) > 0:
                case("minCount", [], _COMPONENTS[SH.minCount])
            if (n := graph.value(ps, SH.maxCount)) is not None:
                extra = [_value_for(graph, ps, 1) if not isinstance(good[0], ox.NamedNode) else ox.NamedNode(good[0].value + "-second")]
                if extra[0] == good[0]:
                    extra = [ox.Literal("x-second")]
                case("maxCount", good + extra, _COMPONENTS[SH.maxCount])
            if dt is not None:
                wrong = ox.Literal("7", datatype=ox.NamedNode(str(XSD.integer))) if dt != XSD.integer else ox.Literal("seven")
                case("datatype", [wrong], _COMPONENTS[SH.datatype])
                if dt not in (XSD.string, RDF.JSON):
                    case("datatype-ill-formed", [ox.Literal("not-a-value", datatype=ox.NamedNode(str(dt)))], _COMPONENTS[SH.datatype])
                if dt == XSD.dateTime:
                    case("datatype-date", [ox.Literal("2026-01-01", datatype=ox.NamedNode(str(XSD.date)))], _COMPONENTS[SH.datatype])
            if (kind := graph.value(ps, SH.nodeKind)) is not None:
                value = ox.NamedNode("urn:test:an-iri") if kind == SH.Literal else ox.Literal("a literal")
                case("nodeKind", [value], _COMPONENTS[SH.nodeKind])
            if graph.value(ps, SH["class"]) is not None:
                case("class-wrong", [ox.NamedNode(iri)], _COMPONENTS[SH["class"]])
                case("class-none", [ox.NamedNode("urn:test:untyped")], _COMPONENTS[SH["class"]])
            if graph.value(ps, SH["in"]) is not None:
                case("in", [ox.Literal("no-such-member")], _COMPONENTS[SH["in"]])
            for param in (SH.minInclusive, SH.minExclusive):
                if (bound := graph.value(ps, param)) is not None:
                    below = int(bound) - 1 if param == SH.minInclusive else int(bound)
                    case(str(param).rsplit("#", 1)[-1], [ox.Literal(str(below), datatype=ox.NamedNode(str(dt or XSD.integer)))], _COMPONENTS[param])
            for param in (SH.maxInclusive, SH.maxExclusive):
                if (bound := graph.value(ps, param)) is not None:
                    above = int(bound) + 1 if param == SH.maxInclusive else int(bound)
                    case(str(param).rsplit("#", 1)[-1], [ox.Literal(str(above), datatype=ox.NamedNode(str(dt or XSD.integer)))], _COMPONENTS[param])
            if (n := graph.value(ps, SH.minLength)) is not None and int(n) > 0:
                case("minLength", [ox.Literal("")], _COMPONENTS[SH.minLength])
            if (n := graph.value(ps, SH.maxLength)) is not None:
                case("maxLength", [ox.Literal("x" * (int(n) + 1))], _COMPONENTS[SH.maxLength])
            if (pattern := graph.value(ps, SH.pattern)) is not None:
                # a value the pattern refuses (an anchored pattern refuses the first; "a character other than space",
                # \S, only a blank one)
                refused = next(v for v in ("\u0000 does not match", " ", "") if re.search(str(pattern), v) is None)
                case("pattern", [ox.Literal(refused)], _COMPONENTS[SH.pattern])
        closed = graph.value(shape, SH.closed)
        if closed is not None and closed.toPython():
            new = _Counter.next()
            body = triples + [(focus_node, ox.NamedNode("urn:test:unknown-predicate"), ox.Literal("x"))]
            out.append(Case(f"{shape_name}.closed", new, _nquads(new, _renamed(iri, _nquads(iri, body), new)),
                            (new + focus[len(iri):], "urn:test:unknown-predicate", "ClosedConstraintComponent")))
    return out


# --- rule cases -----------------------------------------------------------------------------------------------------


def _update(store: ox.Store, graph: str, sparql: str) -> None:
    """Run a SPARQL update whose patterns are in the trace's graph (``WITH``)."""
    store.update(PREFIX + f"WITH <{graph}>\n" + sparql)


def _one(store: ox.Store, graph: str, select: str) -> ox.QuerySolution:
    rows = list(store.query(PREFIX + f"SELECT * WHERE {{ GRAPH <{graph}> {{ {select} }} }} LIMIT 1"))
    assert rows, select
    return rows[0]


def rederive_answers(store: ox.Store, graph: str) -> None:
    """Rewrite dspy:answers from the call ids, as the writer derives it."""
    _update(store, graph, "DELETE { ?r dspy:answers ?c } WHERE { ?r dspy:answers ?c }")
    _update(store, graph, "INSERT { ?r dspy:answers ?c } WHERE { ?r a dspy:LMToolResultPart ; dspy:call_id ?id . ?c a dspy:LMToolCallPart ; dspy:call_id ?id }")


def _delete_answers(store, g):
    _update(store, g, "DELETE { ?r dspy:answers ?c } WHERE { { SELECT ?r ?c WHERE { ?r dspy:answers ?c } ORDER BY ?r ?c LIMIT 1 } }")
    return "dspy:answers"


def _answers_wrong_call(store, g):
    # the result of call_w1 answers the tool call of call_t1 as well
    _update(store, g, """INSERT { ?r dspy:answers ?other } WHERE {
        ?r a dspy:LMToolResultPart ; dspy:call_id "call_w1" . ?other a dspy:LMToolCallPart ; dspy:call_id "call_t1" }""")
    return "dspy:answers"


def _duplicate_call_id(store, g):
    # a message with two tool calls: the second gets the first's id (answers re-derived, so only the id clashes)
    row = _one(store, g, """?m dspy:parts ?a , ?b . ?a a dspy:LMToolCallPart ; dspy:call_id ?id .
                            ?b a dspy:LMToolCallPart ; dspy:call_id ?old . FILTER (STR(?a) < STR(?b))""")
    _update(store, g, f"DELETE {{ {row['b']} dspy:call_id ?x }} INSERT {{ {row['b']} dspy:call_id {row['id']} }} WHERE {{ {row['b']} dspy:call_id ?x }}")
    rederive_answers(store, g)
    return "dspy:parts"


def _duplicate_position(store, g):
    _update(store, g, "DELETE { ?p dspy:position 1 } INSERT { ?p dspy:position 0 } WHERE { <%s/entry/0/request/message/1> dspy:parts ?p . ?p dspy:position 1 }" % g)
    return None


def _position_gap(store, g):
    _update(store, g, "DELETE { ?m dspy:position ?n } INSERT { ?m dspy:position 7 } WHERE { <%s/entry/0/request> dspy:messages ?m . ?m dspy:position ?n FILTER(?n = 3) }" % g)
    return "dspy:messages"


def _position_missing(store, g):
    _update(store, g, "DELETE { ?o dspy:position ?n } WHERE { <%s/entry/0/response> dspy:outputs ?o . ?o dspy:position ?n }" % g)
    return "dspy:outputs"


def _total_tokens(store, g):
    _update(store, g, "DELETE { ?u dspy:total_tokens ?t } INSERT { ?u dspy:total_tokens 1 } WHERE { ?u dspy:total_tokens ?t }")
    return "dspy:total_tokens"


def _no_outputs(store, g):
    _update(store, g, "DELETE { ?r dspy:outputs ?o } WHERE { ?r dspy:outputs ?o }")
    return "dspy:outputs"


def _tool_not_offered(store, g):
    _update(store, g, """DELETE { ?p rdfs:label ?n } INSERT { ?p rdfs:label "no_such_tool" }
                         WHERE { ?r dspy:outputs ?o . ?o dspy:parts ?p . ?p a dspy:LMToolCallPart ; rdfs:label ?n }""")
    return "rdfs:label"


def _tool_in_message_not_offered(store, g):
    _update(store, g, """DELETE { ?p rdfs:label ?n } INSERT { ?p rdfs:label "no_such_tool" }
                         WHERE { ?q dspy:messages ?m . ?m dspy:parts ?p . ?p a dspy:LMToolCallPart ; rdfs:label ?n }""")
    return "rdfs:label"


def _ends_before_start(store, g):
    store.update(PREFIX + f"""INSERT DATA {{ GRAPH <{g}> {{
        <{g}> dspy:started_at "2026-01-02T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> ;
              dspy:ended_at "2026-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> }} }}""")
    return "dspy:ended_at"


def _error_without_content(store, g):
    _update(store, g, "DELETE { ?r dspy:content ?c } WHERE { ?r a dspy:LMToolResultPart ; dspy:content ?c }")
    _update(store, g, "DELETE { ?r dspy:is_error ?e } INSERT { ?r dspy:is_error true } WHERE { ?r a dspy:LMToolResultPart ; dspy:is_error ?e }")
    return "dspy:content"


RULE_BREAKS = [
    ("history_entry_all_parts.json", _delete_answers, "ToolResultAnswersCall"),
    ("openai_exchange_tool_loop.json", _answers_wrong_call, "ToolResultAnswersCall"),
    ("openai_exchange_tool_loop.json", _duplicate_call_id, "UniqueToolCallIds"),
    ("history_entry_all_parts.json", _duplicate_position, "ContiguousPositions"),
    ("history_entry_all_parts.json", _position_gap, "ContiguousPositions"),
    ("history_entry_all_parts.json", _position_missing, "ContiguousPositions"),
    ("history_entry_all_parts.json", _total_tokens, "UsageTotal"),
    ("history_entry_all_parts.json", _no_outputs, "LMResponse"),
    ("history_entry_all_parts.json", _tool_not_offered, "ToolCallOffered"),
    ("openai_exchange_tool_loop.json", _tool_in_message_not_offered, "ToolCallOffered"),
    ("history_entry_all_parts.json", _ends_before_start, "StartBeforeEnd"),
    ("history_entry_all_parts.json", _error_without_content, "ErrorResultHasContent"),
]
"""``(fixture, breaker, rule)``: a breaker edits the fixture's graph (SPARQL updates) and returns the path reported."""


def rules_in_shapes() -> set[str]:
    """The hand-written rules (node shapes in the rules namespace with a SPARQL constraint)."""
    graph = load_shapes().graph
    return {str(s)[len(RULES_NAMESPACE):] for s in graph.subjects(SH.sparql, None) if str(s).startswith(RULES_NAMESPACE)}


def fixture_dataset(name: str) -> tuple[ox.Store, str]:
    """A fixture exported into an in-memory dataset (one named graph) and its trace IRI."""
    trace = trace_from_json(json.loads((DATA / name).read_text(encoding="utf-8")))
    iri, data = encode_trace(trace, redactor=None)
    store = ox.Store()
    store.load(data, ox.RdfFormat.N_QUADS)
    return store, iri


def rule_cases() -> list[Case]:
    """Every entry of :data:`RULE_BREAKS` as a case."""
    out = []
    for fixture, breaker, rule in RULE_BREAKS:
        store, iri = fixture_dataset(fixture)
        breaker(store, iri)
        new = _Counter.next()
        data = ox.serialize(store, format=ox.RdfFormat.N_QUADS)
        out.append(Case(f"rule.{breaker.__name__.strip('_')}", new, _nquads(new, _renamed(iri, data, new)), (new, None, rule)))
    return out


@lru_cache(maxsize=1)
def all_cases() -> tuple[Case, ...]:
    """Every case: the good traces, the model breaks, the shape cases and the rule cases."""
    cases = [trace_case(f"good.{i}", t) for i, t in enumerate(good_traces())]
    cases += [trace_case(f"model.{name}", t, ("{trace}", None, rule)) for name, t, rule in model_breaks()]
    cases += shape_cases()
    cases += rule_cases()
    assert compile_shapes().unsupported == ()
    return tuple(cases)
