"""`dspy-rdf validate` on PROV-O views: real captured DSPy runs exported with `dspy-rdf export`, their views written by
`dspy-rdf prov`, then validated with the PROV shapes from files and stores, alone or beside the traces; broken views
are reported where they are; an input with no trace and no view is refused in one line, never said to conform."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyoxigraph as ox
import pytest
import rdflib
from conftest import DATA

from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.cli.main import main
from dspy_rdf.interop.prov import PROV, PROV_SHAPES, prov_graph_name, validate_prov
from dspy_rdf.store import EmbeddedStore
from dspy_rdf.validation import validate_files

SH = rdflib.Namespace("http://www.w3.org/ns/shacl#")
XSD_DATETIME = ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")
RDF_TYPE = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
LABEL = ox.NamedNode("http://www.w3.org/2000/01/rdf-schema#label")
START, END = ox.NamedNode(PROV + "startedAtTime"), ox.NamedNode(PROV + "endedAtTime")
GENERATED, ENTITY = ox.NamedNode(PROV + "wasGeneratedBy"), ox.NamedNode(PROV + "Entity")
SOURCES = [DATA / "crosspath" / "capture.jsonl", bundled_traces_path()]
"""Captured program runs (callbacks) and the bundled lm.history traces: views of calls and of history entries."""


@pytest.fixture(params=["fast", "pyshacl"])
def engine(request) -> str:
    """Views are validated with the PROV shapes whichever engine validates the traces."""
    return request.param


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """The store the real runs were exported into, their traces dumped to traces.nq and their views (prov.nq)."""
    root = tmp_path_factory.mktemp("validate-prov")
    store = root / "store"
    for source in SOURCES:
        assert main(["export", str(source), "--store", str(store)]) == 0
    assert main(["dump", "--store", str(store), "-o", str(root / "traces.nq")]) == 0
    assert main(["prov", "--store", str(store), "-o", str(root / "prov.nq")]) == 0
    with EmbeddedStore(store, read_only=True) as opened:
        traces = opened.trace_iris()
    views = sorted({q.graph_name.value for q in ox.parse((root / "prov.nq").read_bytes(), ox.RdfFormat.N_QUADS)})
    assert len(traces) >= 10 and len(views) >= 8 and set(views) <= {prov_graph_name(t) for t in traces}
    return {"root": root, "store": store, "traces": traces, "views": views}


def _quads(path: Path) -> list[ox.Quad]:
    return list(ox.parse(path.read_bytes(), ox.RdfFormat.N_QUADS))


def _write(path: Path, quads: list[ox.Quad]) -> Path:
    path.write_bytes(ox.serialize(quads, format=ox.RdfFormat.N_QUADS) or b"")
    return path


def _activity_with_both_times(quads: list[ox.Quad]) -> tuple[ox.NamedNode, ox.NamedNode]:
    """An activity of a program run (``.../call/N``) that has a start and an end, and the graph of its view."""
    ends = {(q.subject, q.graph_name) for q in quads if q.predicate == END}
    activity, graph = next(
        (q.subject, q.graph_name) for q in sorted(quads, key=str) if q.predicate == START and (q.subject, q.graph_name) in ends and "/call/" in q.subject.value
    )
    return activity, graph


def test_the_views_prov_writes_conform_and_are_counted(made, capsys, engine):
    code, out, err = cli(capsys, "validate", str(made["root"] / "prov.nq"), "--engine", engine)
    assert (code, err) == (0, "")
    assert out == f"conforms: 0 trace(s) and {len(made['views'])} PROV view(s), no violations\n"
    code, out, _ = cli(capsys, "validate", str(made["root"] / "prov.nq"), "--engine", engine, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["conforms"] and doc["prov_views_validated"] == len(made["views"]) and doc["traces_validated"] == 0
    report = validate_files([made["root"] / "prov.nq"])
    assert sorted(report.views) == made["views"] and not report.traces and not report.fails()


def test_an_activity_that_ends_before_it_starts_is_reported_in_its_view(made, tmp_path, capsys, engine):
    quads = _quads(made["root"] / "prov.nq")
    activity, graph = _activity_with_both_times(quads)
    broken = [q for q in quads if not (q.subject == activity and q.predicate == END)]
    broken.append(ox.Quad(activity, END, ox.Literal("1999-01-01T00:00:00Z", datatype=XSD_DATETIME), graph))
    path = _write(tmp_path / "broken.nq", broken)
    trace = graph.value.removesuffix("/prov")
    node = "call " + activity.value.rsplit("/", 1)[1]

    code, out, _ = cli(capsys, "validate", str(path), "--engine", engine)
    assert code == 1
    assert out.startswith(f"does not conform: 1 violation(s) in 1 of {len(made['views'])} PROV view(s) and 0 trace(s)\n")
    assert f"\nPROV view {graph.value}\n  rule Activity (1 violation)\n    - at {node} <{activity.value}>\n" in out
    assert "      violation: an activity does not end before it starts [SPARQLConstraintComponent]" in out
    assert activity.value.startswith(trace + "/call/")

    code, out, _ = cli(capsys, "validate", str(path), "--engine", engine, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["violation_count"] == 1 and doc["traces"] == []
    [group] = doc["prov_views"]
    [result] = group["results"]
    assert group["view"] == graph.value and result["focus_node"] == activity.value and result["node"] == node
    assert result["message"] == "an activity does not end before it starts" and result["value"].startswith('"1999-01-01T00:00:00Z"')

    code, out, _ = cli(capsys, "validate", str(path), "--engine", engine, "--format", "ttl")
    report = rdflib.Graph().parse(data=out, format="turtle")
    [result_node] = report.objects(None, SH.result)
    shape = report.value(result_node, SH.sourceShape)
    shapes = rdflib.Graph().parse(PROV_SHAPES, format="turtle")
    assert code == 1 and (shape, rdflib.RDF.type, SH.NodeShape) in shapes  # the PROV shape that found it
    assert report.value(result_node, SH.focusNode) == rdflib.URIRef(activity.value)


def _no_time(quads: list[ox.Quad]) -> tuple[list[ox.Quad], str]:
    activity, _ = _activity_with_both_times(quads)
    return [q for q in quads if not (q.subject == activity and q.predicate in (START, END))], activity.value


def _generated_not_an_entity(quads: list[ox.Quad]) -> tuple[list[ox.Quad], str]:
    generated = next(q.subject for q in sorted(quads, key=str) if q.predicate == GENERATED)
    return [q for q in quads if not (q.subject == generated and q.predicate == RDF_TYPE and q.object == ENTITY)], generated.value


def _agent_without_a_name(quads: list[ox.Quad]) -> tuple[list[ox.Quad], str]:
    agent, graph = next((q.subject, q.graph_name) for q in sorted(quads, key=str) if q.predicate == LABEL)
    return [q for q in quads if not (q.subject == agent and q.predicate == LABEL and q.graph_name == graph)], agent.value


@pytest.mark.parametrize(("breaks", "message"), [
    (_no_time, "an activity has a time: when it started, or when it ended"),
    (_generated_not_an_entity, "what an activity generated is an entity"),
    (_agent_without_a_name, "a software agent has its name (the model, the module class)"),
])  # fmt: skip
def test_each_broken_view_fails_on_the_node_it_breaks(made, tmp_path, capsys, engine, breaks, message):
    assert message in set(re.findall(r'sh:message "([^"]+)"', PROV_SHAPES.read_text(encoding="utf-8")))
    broken, node = breaks(_quads(made["root"] / "prov.nq"))
    path = _write(tmp_path / "broken.nq", broken)
    code, out, _ = cli(capsys, "validate", str(path), "--engine", engine, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and not doc["conforms"] and doc["prov_views_validated"] == len(made["views"])
    found = {(x["focus_node"], x["message"]) for group in doc["prov_views"] for x in group["results"]}
    assert (node, message) in found
    # the same results, view by view, as the PROV module's own pySHACL check gives
    reported = {group["view"]: Counter(x["message"] for x in group["results"]) for group in doc["prov_views"]}
    for view in made["views"]:
        conforms, text = validate_prov([q.triple for q in broken if q.graph_name.value == view])
        assert reported.get(view, Counter()) == Counter(re.findall(r"Message: (.+)", text)) and conforms == (view not in reported)


def test_a_file_of_traces_and_views_validates_both(made, tmp_path, capsys, engine):
    root = made["root"]
    both = tmp_path / "both.nq"
    both.write_bytes((root / "traces.nq").read_bytes() + (root / "prov.nq").read_bytes())
    counted = f"{len(made['traces'])} trace(s) and {len(made['views'])} PROV view(s)"
    for argv in ([str(both)], [str(root / "traces.nq"), str(root / "prov.nq")]):
        code, out, _ = cli(capsys, "validate", *argv, "--engine", engine)
        assert (code, out) == (0, f"conforms: {counted}, no violations\n")
    # a broken view fails the file; the traces beside it still conform
    quads = _quads(both)
    activity, graph = _activity_with_both_times(quads)
    start = next(q.object for q in quads if q.subject == activity and q.predicate == START)
    assert isinstance(start, ox.Literal) and start.value.endswith("Z")
    # a second start at the same instant (written +00:00): only "starts once" fails, no order
    broken = quads + [ox.Quad(activity, START, ox.Literal(start.value[:-1] + "+00:00", datatype=XSD_DATETIME), graph)]
    code, out, _ = cli(capsys, "validate", str(_write(tmp_path / "broken.nq", broken)), "--engine", engine)
    assert code == 1
    assert out.startswith(f"does not conform: 1 violation(s) in 0 of {len(made['traces'])} trace(s) and 1 of {len(made['views'])} PROV view(s)\n")
    assert f"PROV view {graph.value}" in out and "an activity starts once, at an xsd:dateTime" in out


def test_a_view_is_known_by_its_prov_terms_whatever_its_graph(made, tmp_path, capsys, engine):
    """A view renamed, or written without a graph name (Turtle), is still a view."""
    quads = _quads(made["root"] / "prov.nq")
    _, graph = _activity_with_both_times(quads)
    view = [q for q in quads if q.graph_name == graph]
    renamed = _write(tmp_path / "renamed.nq", [ox.Quad(q.subject, q.predicate, q.object, ox.NamedNode("urn:example:provenance")) for q in view])
    turtle = tmp_path / "view.ttl"
    turtle.write_bytes(ox.serialize([q.triple for q in view], format=ox.RdfFormat.TURTLE) or b"")
    for path in (renamed, turtle):
        code, out, _ = cli(capsys, "validate", str(path), "--engine", engine)
        assert (code, out) == (0, "conforms: 0 trace(s) and 1 PROV view(s), no violations\n")
    activity, _ = _activity_with_both_times(view)
    broken = [q.triple for q in view if not (q.subject == activity and q.predicate in (START, END))]
    turtle.write_bytes(ox.serialize(broken, format=ox.RdfFormat.TURTLE) or b"")
    code, out, _ = cli(capsys, "validate", str(turtle), "--engine", engine)
    assert code == 1 and "\nPROV view (default graph)\n" in out and f"    - at {activity.value}\n" in out  # no trace to name it by


def _store_with_views(made, directory: Path, views: bytes) -> str:
    """A copy of the exported store with the views loaded into it."""
    shutil.copytree(made["store"], directory)
    with EmbeddedStore(directory) as store:
        store.oxigraph.load(views, ox.RdfFormat.N_QUADS)
    return str(directory)


def test_a_store_holding_traces_and_views_validates_both(made, tmp_path, capsys, engine):
    views = (made["root"] / "prov.nq").read_bytes()
    location = _store_with_views(made, tmp_path / "store", views)
    code, out, _ = cli(capsys, "validate", "--store", location, "--engine", engine)
    assert (code, out) == (0, f"conforms: {len(made['traces'])} trace(s) and {len(made['views'])} PROV view(s), no violations\n")
    # one view chosen by its graph's name
    code, out, _ = cli(capsys, "validate", "--store", location, "--engine", engine, "--trace", made["views"][0])
    assert (code, out) == (0, "conforms: 0 trace(s) and 1 PROV view(s), no violations\n")

    activity, graph = _activity_with_both_times(_quads(made["root"] / "prov.nq"))
    with EmbeddedStore(location) as store:
        store.oxigraph.update(f"DELETE WHERE {{ GRAPH {graph} {{ {activity} <{PROV}endedAtTime> ?end }} }}")
        store.oxigraph.update(f'INSERT DATA {{ GRAPH {graph} {{ {activity} <{PROV}endedAtTime> "1999-01-01T00:00:00Z"^^<{XSD_DATETIME.value}> }} }}')
    code, out, _ = cli(capsys, "validate", "--store", location, "--engine", engine, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["traces_validated"] == len(made["traces"]) and doc["prov_views_validated"] == len(made["views"])
    assert [(g["view"], [x["focus_node"] for x in g["results"]]) for g in doc["prov_views"]] == [(graph.value, [activity.value])]
    assert doc["traces"] == []


def test_a_server_holding_traces_and_views_validates_both(made, remote_store, capsys):
    from dspy_rdf.store import open_store

    with open_store(str(made["store"]), read_only=True) as store:
        traces = [trace for _, trace in store.traces()]
    remote_store.put(traces)
    quads = _quads(made["root"] / "prov.nq")
    activity, graph = _activity_with_both_times(quads)
    for name in made["views"]:
        body = " ".join(f"{q.subject} {q.predicate} {q.object} ." for q in quads if q.graph_name.value == name)
        remote_store.update(f"INSERT DATA {{ GRAPH <{name}> {{ {body} }} }}")
    url = remote_store.location
    code, out, _ = cli(capsys, "validate", "--store", url)
    assert (code, out) == (0, f"conforms: {len(made['traces'])} trace(s) and {len(made['views'])} PROV view(s), no violations\n")
    remote_store.update(f"DELETE WHERE {{ GRAPH {graph} {{ {activity} <{PROV}startedAtTime> ?t }} }} ; "
                        f"DELETE WHERE {{ GRAPH {graph} {{ {activity} <{PROV}endedAtTime> ?t }} }}")  # fmt: skip
    code, out, _ = cli(capsys, "validate", "--store", url)
    assert code == 1 and f"PROV view {graph.value}" in out and "an activity has a time: when it started, or when it ended" in out


def _refusal(*argv: str, cwd: Path) -> str:
    """The one line `dspy-rdf validate` says, run as a user runs it, when it refuses: nothing on stdout, exit 1."""
    result = subprocess.run(
        [sys.executable, "-m", "dspy_rdf.cli", "validate", *argv], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (1, "") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr.rstrip("\n")


def test_inputs_with_no_trace_and_no_view_are_refused_saying_what_they_hold(tmp_path):
    (tmp_path / "empty.nq").write_bytes(b"")
    (tmp_path / "other.ttl").write_text('<http://example.org/a> <http://example.org/b> "c" .\n', encoding="utf-8")
    (tmp_path / "graphs.nq").write_text(
        "".join(f'<http://example.org/a> <http://example.org/b> "c" <http://example.org/g{n}> .\n' for n in range(3)), encoding="utf-8"
    )
    assert _refusal("empty.nq", cwd=tmp_path) == "error: no traces and no PROV views in empty.nq: found no data"
    assert _refusal("other.ttl", "--format", "json", cwd=tmp_path) == (
        "error: no traces and no PROV views in other.ttl: found 1 graph of other data (no dspy:Trace node, no PROV-O triples)"
    )
    assert _refusal("graphs.nq", "--format", "ttl", cwd=tmp_path) == (
        "error: no traces and no PROV views in graphs.nq: found 3 graphs of other data (no dspy:Trace node, no PROV-O triples)"
    )


def test_stores_with_no_trace_and_no_view_are_refused_saying_what_they_hold(tmp_path, capsys, engine):
    EmbeddedStore(tmp_path / "empty").close()
    with EmbeddedStore(tmp_path / "other") as store:
        store.oxigraph.load(b'<http://example.org/a> <http://example.org/b> "c" <http://example.org/g1> .\n'
                            b'<http://example.org/a> <http://example.org/b> "d" <http://example.org/g2> .\n', ox.RdfFormat.N_QUADS)  # fmt: skip
    for name, found in (("empty", "found no data"), ("other", "found 2 graphs of other data (no dspy:Trace node, no PROV-O triples)")):
        code, out, err = cli(capsys, "validate", "--store", str(tmp_path / name), "--engine", engine)
        assert (code, out, err) == (1, "", f"error: no traces and no PROV views in the store at {tmp_path / name}: {found}\n")
