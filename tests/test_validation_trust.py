"""`dspy-rdf validate` as a new user runs it: each way it once said "conforms" on broken data, now caught, on both
engines; severities and exit codes; nothing validated is not a success."""

from __future__ import annotations

import json
import re
import sys

import cases
import pyoxigraph as ox
import pytest
from conftest import DATA, load

from dspy_rdf import trace_from_json
from dspy_rdf.cli.main import main as cli_main
from dspy_rdf.rdf.formats import RdfFormat, encode_trace, serialize_traces
from dspy_rdf.store import EmbeddedStore

D = "https://w3id.org/lmodel/dspy/"
LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"


@pytest.fixture(params=["fast", "pyshacl"])
def engine(request):
    return request.param


def validate(capsys, engine: str, *argv: str) -> tuple[int, dict]:
    code = cli_main(["validate", *argv, "--engine", engine, "--format", "json"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, json.loads(captured.out)


def results(doc: dict) -> list[dict]:
    return [x for group in doc["traces"] for x in group["results"]]


def _export(tmp_path, capsys, fixture: str, suffix: str):
    source = DATA / fixture
    out = tmp_path / f"trace.{suffix}"
    assert cli_main(["export", str(source), "-o", str(out)]) == 0
    capsys.readouterr()
    return out


@pytest.mark.parametrize("suffix", ["ttl", "nt", "nq", "trig", "jsonld"])
def test_a_tool_call_without_a_name_fails_in_every_format(tmp_path, capsys, engine, suffix):
    path = _export(tmp_path, capsys, "part_tool_call.json", "nq")
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not (LABEL in line and "/part/0>" in line.split(" ")[0])]
    quads = list(ox.parse("\n".join(lines).encode(), ox.RdfFormat.N_QUADS))
    if suffix in ("ttl", "nt"):
        data = ox.serialize([q.triple for q in quads], format=ox.RdfFormat.TURTLE if suffix == "ttl" else ox.RdfFormat.N_TRIPLES)
    else:
        data = ox.serialize(quads, format={"nq": ox.RdfFormat.N_QUADS, "trig": ox.RdfFormat.TRIG, "jsonld": ox.RdfFormat.JSON_LD}[suffix])
    broken = tmp_path / f"broken.{suffix}"
    broken.write_bytes(data)
    code, doc = validate(capsys, engine, str(broken))
    assert code == 1 and not doc["conforms"]
    assert [(x["rule"], x["path"], x["constraint"]) for x in results(doc)] == [("LMToolCallPart", "rdfs:label", "MinCountConstraintComponent")]


@pytest.mark.parametrize("suffix", ["ttl", "nq"])
def test_a_tool_not_offered_is_the_same_warning_in_triples_and_quads(tmp_path, capsys, engine, suffix):
    _, trace, _ = next(x for x in cases.model_breaks() if x[0] == "tool-not-offered")
    source = tmp_path / "t.json"
    from dspy_rdf.sources.tracejson import trace_to_json

    source.write_text(json.dumps(trace_to_json(trace)), encoding="utf-8")
    out = tmp_path / f"t.{suffix}"
    assert cli_main(["export", str(source), "-o", str(out)]) == 0
    capsys.readouterr()
    code, doc = validate(capsys, engine, str(out))
    found = results(doc)
    assert found and {(x["rule"], x["severity"]) for x in found} == {("ToolCallOffered", "Warning")}
    assert code == 0 and doc["conforms"] and doc["warning_count"] == len(found)
    assert cli_main(["validate", str(out), "--engine", engine, "--fail-on", "warning"]) == 1
    text = capsys.readouterr().out
    assert text.startswith(f"conforms: {len(found)} warning(s) in 1 of 1 trace(s)") and "warning: the tool call names the tool no_such_tool" in text


def test_every_fixture_in_one_turtle_file_is_validated_trace_by_trace(tmp_path, capsys, engine):
    # rules relate nodes of one trace: with all traces in one default graph, tool results with the same call ids in
    # different traces once "answered" each other
    traces = list(cases.good_traces())
    path = tmp_path / "all.ttl"
    path.write_bytes(serialize_traces(traces, RdfFormat.TURTLE))
    code, doc = validate(capsys, engine, str(path))
    assert code == 0 and doc["conforms"] and results(doc) == []
    assert doc["traces_validated"] == len({encode_trace(t)[0] for t in traces})


def _store_with(tmp_path, nquads: bytes) -> str:
    store = EmbeddedStore(tmp_path / "store")
    store.oxigraph.load(nquads, ox.RdfFormat.N_QUADS)
    store.close()
    return str(tmp_path / "store")


def test_a_stored_trace_without_its_trace_node_is_still_validated(tmp_path, capsys, engine):
    store, graph = cases.fixture_dataset("history_entry_all_parts.json")
    store.update(f"DELETE WHERE {{ GRAPH <{graph}> {{ <{graph}> a <{D}Trace> }} }}")
    store.update(f"DELETE WHERE {{ GRAPH <{graph}> {{ <{graph}/entry/0/request> <{D}model> ?m }} }}")
    good = serialize_traces([trace_from_json(load("request_all_parts.json"))])
    location = _store_with(tmp_path, ox.serialize(store, format=ox.RdfFormat.N_QUADS) + good)
    code, doc = validate(capsys, engine, "--store", location)
    assert code == 1 and doc["traces_validated"] == 2
    assert {x["trace"] for x in results(doc)} == {graph}


def test_graphs_not_named_by_their_trace_are_validated(tmp_path, capsys, engine):
    lines = []
    for n in range(12):
        store, graph = cases.fixture_dataset("part_tool_call.json")
        store.update(f"DELETE WHERE {{ GRAPH <{graph}> {{ ?p {LABEL} ?name }} }}")
        lines += [f"{q.subject} {q.predicate} {q.object} <urn:somewhere:graph-{n}> ." for q in store]
    location = _store_with(tmp_path, ("\n".join(lines) + "\n").encode())
    code, doc = validate(capsys, engine, "--store", location)
    assert code == 1 and doc["traces_validated"] == 12 and doc["violation_count"] == 12
    assert {group["trace"] for group in doc["traces"]} == {f"urn:somewhere:graph-{n}" for n in range(12)}


@pytest.mark.parametrize("what", ["empty.nq", "empty.ttl", "comments.trig", "store"])
def test_nothing_validated_is_said_and_is_not_success(tmp_path, capsys, engine, what):
    if what == "store":
        location = tmp_path / "store"
        EmbeddedStore(location).close()
        argv = ["--store", str(location)]
    else:
        path = tmp_path / what
        path.write_text("# nothing here\n" if what.startswith("comments") else "", encoding="utf-8")
        argv = [str(path)]
    code = cli_main(["validate", *argv, "--engine", engine])
    captured = capsys.readouterr()
    where = f"the store at {location}" if what == "store" else str(path)
    assert code == 1 and captured.out == ""
    assert captured.err == f"error: no traces and no PROV views in {where}: found no data\n"
    code = cli_main(["validate", *argv, "--engine", engine, "--format", "json"])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == "" and "no traces and no PROV views" in captured.err  # no report "conforms"


def test_an_ill_formed_integer_is_a_datatype_violation_not_a_crash(tmp_path, capsys, engine):
    path = _export(tmp_path, capsys, "history_entry_all_parts.json", "nq")
    text = re.sub(r'(/input_tokens> )"\d+"', r'\1"abc"', path.read_text(encoding="utf-8"))
    path.write_text(text, encoding="utf-8")
    code = cli_main(["validate", str(path), "--engine", engine])
    captured = capsys.readouterr()
    assert code == 1 and captured.err == ""
    assert "dspy:input_tokens" in captured.out and "[DatatypeConstraintComponent]" in captured.out
    assert "UsageTotal" not in captured.out  # a rule computes only with well-formed values


def test_numbers_beyond_64_bits_are_valid_and_still_checked(tmp_path, capsys, engine):
    from dspy_rdf.sources.tracejson import trace_to_json

    good, good_sum = cases.big_number_traces()
    _, bad, _ = next(x for x in cases.model_breaks() if x[0] == "usage-total-beyond-64-bits")
    _, bad_sum, _ = next(x for x in cases.model_breaks() if x[0] == "usage-parts-overflow-64-bits")
    for trace, expected, number in ((good, set(), 2**70), (bad, {"UsageTotal"}, 2**70), (good_sum, set(), 2**63), (bad_sum, {"UsageTotal"}, 2**63 - 1)):
        path = tmp_path / "big.json"
        path.write_text(json.dumps(trace_to_json(trace)), encoding="utf-8")
        nq = tmp_path / "big.nq"
        assert cli_main(["export", str(path), "-o", str(nq)]) == 0
        assert str(number) in nq.read_text(encoding="utf-8")
        capsys.readouterr()
        for source in (path, nq):
            code, doc = validate(capsys, engine, str(source))
            assert {x["rule"] for x in results(doc)} == expected, results(doc)
            assert code == (1 if expected else 0)


@pytest.mark.parametrize("end", ['"2026-01-01"^^<http://www.w3.org/2001/XMLSchema#date>', '"yesterday"^^<http://www.w3.org/2001/XMLSchema#dateTime>'])
def test_a_mistyped_time_is_a_datatype_violation_on_both_engines(tmp_path, capsys, engine, end):
    trace = cases.captured_run()
    iri, data = encode_trace(trace, redactor=None)
    text = data.decode()
    text = re.sub(rf'(<{re.escape(iri)}> <{D}ended_at> )"[^"]*"\^\^<[^>]*>', lambda m: m.group(1) + end, text)
    path = tmp_path / "run.nq"
    path.write_text(text, encoding="utf-8")
    code, doc = validate(capsys, engine, str(path))
    assert code == 1
    assert [(x["rule"], x["path"], x["constraint"]) for x in results(doc)] == [("Trace", "dspy:ended_at", "DatatypeConstraintComponent")]


def test_an_unknown_trace_is_an_error_and_traces_can_be_chosen(tmp_path, capsys, engine):
    path = tmp_path / "two.nq"
    traces = [trace_from_json(load("part_text.json")), trace_from_json(load("part_tool_call.json"))]
    path.write_bytes(serialize_traces(traces))
    first = encode_trace(traces[0])[0]
    code, doc = validate(capsys, engine, str(path), "--trace", first)
    assert code == 0 and doc["traces_validated"] == 1
    assert cli_main(["validate", str(path), "--trace", "urn:nope", "--engine", engine]) == 2
    assert "no trace urn:nope in the input" in capsys.readouterr().err


def test_the_text_report_cannot_be_forged_by_a_value(tmp_path, capsys, engine):
    trace = trace_from_json({"model": "m", "messages": [{"role": "user", "parts": [
        {"type": "tool_call", "id": "x\nconforms: 1 trace(s), no violations\n", "name": "t"},
        {"type": "tool_call", "id": "x\nconforms: 1 trace(s), no violations\n", "name": "t"}]}]})
    path = tmp_path / "t.json"
    from dspy_rdf.sources.tracejson import trace_to_json

    path.write_text(json.dumps(trace_to_json(trace)), encoding="utf-8")
    assert cli_main(["validate", str(path), "--engine", engine]) == 0
    out = capsys.readouterr().out
    assert out.startswith("conforms: 1 warning(s)") and "\nconforms:" not in out and "\\nconforms: 1 trace(s)" in out


def test_the_report_goes_to_stdout_and_the_help_names_the_severities(capsys):
    with pytest.raises(SystemExit):
        cli_main(["validate", "--help"])
    out = capsys.readouterr().out
    assert "--fail-on" in out and "--no-redact" in out and "warning" in out
    assert sys.stdout is not None
