"""The hand-written integrity rules (shapes/dspy.rules.ttl) and the LinkML-carried ones: every rule is broken once in
a real trace (a fixture exported as N-Quads, then a small edit of its graph) and reported as exactly that rule;
every fixture and bundled trace conforms."""

from __future__ import annotations

import json

import pyoxigraph as ox
import pytest
import rdflib
from cases import PREFIX, RULE_BREAKS, fixture_dataset
from conftest import DATA, load

from dspy_rdf import trace_from_json
from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.formats import RdfFormat, serialize_traces
from dspy_rdf.resources import shapes_dir
from dspy_rdf.validation import Engine, ValidationReport, node_label, rule_name, validate_dataset, validate_traces
from dspy_rdf.validation import compiled as fastshacl
from dspy_rdf.validation.running import Runner

D = "https://w3id.org/lmodel/dspy/"
RULES = ("ToolResultAnswersCall", "UniqueToolCallIds", "ContiguousPositions", "UsageTotal", "ToolCallOffered", "StartBeforeEnd", "ErrorResultHasContent")


def _dataset(name: str) -> tuple[ox.Store, str]:
    """A fixture as an in-memory dataset (one named graph) and its trace IRI."""
    return fixture_dataset(name)


def _rules(report: ValidationReport) -> set[str]:
    return {x.rule for x in report.violations}


BREAKS = RULE_BREAKS


@pytest.mark.parametrize(("fixture", "breaker", "rule"), BREAKS, ids=[b[1].__name__.strip("_") for b in BREAKS])
def test_each_rule_catches_its_defect_and_only_it(fixture, breaker, rule):
    store, graph = _dataset(fixture)
    assert validate_dataset(store).conforms
    path = breaker(store, graph)
    report = validate_dataset(store, engine=Engine.PYSHACL)
    assert report.violations
    assert _rules(report) == {rule}, report.to_text()
    for x in report.violations:
        assert x.trace == graph
        assert x.message and "{" not in x.message, x.message
        if path is not None:
            assert x.path == path, report.to_text()
        assert x.node == node_label(x.focus_node, graph)
        assert x.node in report.to_text() and rule in report.to_text()
    # the fast engine, with the store forms and with sh:select, reports the same
    assert _fast_rows(store, store_forms=True) == _fast_rows(store, store_forms=False)
    assert {_key(x) for x in validate_dataset(store).violations} == {_key(x) for x in report.violations}


def _key(x) -> tuple:
    # not the message: pySHACL writes a date-time value into it as rdflib prints it (+00:00 where the data says Z)
    return (x.trace, x.focus_node, x.path, x.constraint, x.value)


def _fast_rows(store: ox.Store, *, store_forms: bool, graphs: list[str] | None = None) -> list[tuple]:
    """What the fast engine's SPARQL checks report on every graph of ``store`` or on ``graphs`` (a batch: ``VALUES``)
    (text tuples, messages filled in), with each rule's dspyrule:storeSelect or with its sh:select."""
    compiled = fastshacl.compile_shapes(store_forms=store_forms)
    sparql = [i for i, check in enumerate(compiled.checks) if check.kind == "sparql"]
    assert any(compiled.checks[i].store_text for i in sparql) == store_forms
    return sorted(Runner(compiled, oxigraph=store).run_batch(graphs, sparql))


def _every_break_in_one_store() -> ox.Store:
    """Every fixture of BREAKS broken by its breaker, each in its own graph of one store."""
    store = ox.Store()
    for index, (fixture, breaker, _rule) in enumerate(BREAKS):
        one, graph = _dataset(fixture)
        breaker(one, graph)
        store.extend(ox.Quad(q.subject, q.predicate, q.object, ox.NamedNode(f"{graph}-{index}")) for q in one)
    return store


def test_store_forms_report_exactly_what_the_rules_report():
    # every rule broken at once, fourteen traces sharing node IRIs (the same fixture in several graphs): store forms
    # group and join per graph, so a defect of one graph shows in that graph only
    store = _every_break_in_one_store()
    rows = _fast_rows(store, store_forms=True)
    assert rows == _fast_rows(store, store_forms=False)
    # a batch of graphs (VALUES in front of every GRAPH of a store form, as for a remote store with chosen traces)
    batch = sorted(g.value for g in store.named_graphs())[::2]
    batch_rows = _fast_rows(store, store_forms=True, graphs=batch)
    assert batch_rows == _fast_rows(store, store_forms=False, graphs=batch) == [row for row in rows if row[0] in batch]
    assert {rule_name(row[-1]) for row in rows} == set(RULES)
    for index, (_fixture, _breaker, rule) in enumerate(BREAKS):
        assert {rule_name(row[-1]) for row in rows if row[0].endswith(f"-{index}")} == {rule} & set(RULES)


def test_the_rules_count_and_shape_names():
    g = rdflib.Graph().parse(shapes_dir() / "dspy.rules.ttl")
    sh = rdflib.Namespace("http://www.w3.org/ns/shacl#")
    names = {str(s).rsplit("/", 1)[-1] for s in g.subjects(sh.sparql, None)}
    assert names == set(RULES)
    for constraint in g.objects(None, sh.sparql):
        assert g.value(constraint, sh.message) is not None
        text = str(g.value(constraint, sh.select))
        assert "$this" in text.split("WHERE", 1)[0], "every rule projects $this"
        assert "VALUES" not in text and "MINUS" not in text


def test_start_and_end_in_order_conform():
    store, graph = _dataset("history_entry_all_parts.json")
    store.update(PREFIX + f"""INSERT DATA {{ GRAPH <{graph}> {{
        <{graph}> dspy:started_at "2026-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> ;
                  dspy:ended_at "2026-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> }} }}""")
    assert validate_dataset(store).conforms


def test_a_result_whose_call_is_outside_the_trace_is_allowed():
    # a real DSPy request that carries the result of a call made before it: no dspy:answers, no violation
    store, graph = _dataset("part_tool_result.json")
    assert not store.query(PREFIX + f"ASK {{ GRAPH <{graph}> {{ ?r dspy:answers ?c }} }}")
    assert validate_dataset(store).conforms


def test_rules_join_nothing_across_traces():
    # two traces with the same tool call id ("call 1 ...") validated together: each in its own graph
    traces = [trace_from_json(load("history_entry_all_parts.json")), trace_from_json(load("request_all_parts.json"))]
    report = validate_traces(traces)
    assert report.conforms, report.to_text()
    assert len(report.traces) == 2


def test_every_fixture_and_bundled_trace_conforms_with_the_rules():
    traces = [trace_from_json(json.loads(p.read_text(encoding="utf-8"))) for p in sorted(DATA.glob("*.json"))
              if p.name.startswith(("part_", "request_", "response_", "history_entry", "react_", "openai_", "dspy341_lm15"))]
    traces += [item.trace for item in read_traces(bundled_traces_path())]
    report = validate_traces(traces)
    assert report.conforms, report.to_text()
    store = ox.Store()
    store.load(serialize_traces(traces, RdfFormat.N_QUADS), ox.RdfFormat.N_QUADS)
    assert _fast_rows(store, store_forms=True) == _fast_rows(store, store_forms=False) == []


def test_node_labels():
    t = "https://example.org/t/abc"
    assert node_label(f"{t}/entry/0/request/message/2/part/1", t) == "entry 0 › request › message 2 › part 1"
    assert node_label(t, t) == "trace"
    assert node_label(f"{t}/call/3/tool_call", t) == "call 3 › tool call"
    assert node_label("https://elsewhere/x", t) == "https://elsewhere/x"
