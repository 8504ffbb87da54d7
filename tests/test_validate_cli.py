"""`dspy-rdf validate`: exit codes, the text report grouped by trace and rule, JSON and Turtle reports, --store
(embedded) and --trace, and the same verdicts from the library's validate_store."""

from __future__ import annotations

import json
import sys

import pyoxigraph as ox
import pytest
import rdflib
from conftest import DATA, load

from dspy_rdf import trace_from_json
from dspy_rdf.cli.main import main as cli_main
from dspy_rdf.rdf.formats import RdfFormat, serialize_traces
from dspy_rdf.store import open_store
from dspy_rdf.validation import validate_store

D = "https://w3id.org/lmodel/dspy/"
SH = rdflib.Namespace("http://www.w3.org/ns/shacl#")


@pytest.fixture(params=["fast", "pyshacl"], autouse=True)
def engine(request, monkeypatch):
    """Every test runs with both engines: the default (fast) and the reference (pySHACL)."""

    def main(argv: list[str]) -> int:
        return cli_main([*argv, "--engine", request.param] if argv[:1] == ["validate"] else argv)

    monkeypatch.setattr(sys.modules[__name__], "main", main, raising=False)
    return request.param


def _nquads(*names: str) -> tuple[bytes, list[str]]:
    traces = [trace_from_json(load(n)) for n in names]
    data = serialize_traces(traces, RdfFormat.N_QUADS)
    graphs = sorted({q.graph_name.value for q in ox.parse(data, ox.RdfFormat.N_QUADS)})
    return data, graphs


def _broken(tmp_path):
    """Two traces as N-Quads: one with total_tokens off by one and an answers link removed, one intact."""
    data, graphs = _nquads("history_entry_all_parts.json", "request_all_parts.json")
    store = ox.Store()
    store.load(data, ox.RdfFormat.N_QUADS)
    bad = next(g for g in graphs if store.query(f"ASK {{ GRAPH <{g}> {{ ?r <{D}answers> ?c . ?u <{D}total_tokens> ?t }} }}"))
    store.update(f"""WITH <{bad}> DELETE {{ ?u <{D}total_tokens> ?t }} INSERT {{ ?u <{D}total_tokens> 1 }} WHERE {{ ?u <{D}total_tokens> ?t }}""")
    store.update(f"""WITH <{bad}> DELETE {{ ?r <{D}answers> ?c }} WHERE {{ {{ SELECT ?r ?c WHERE {{ ?r <{D}answers> ?c }} LIMIT 1 }} }}""")
    path = tmp_path / "broken.nq"
    path.write_bytes(ox.serialize(store, format=ox.RdfFormat.N_QUADS))
    good = next(g for g in graphs if g != bad)
    return path, bad, good


def test_conforming_inputs_exit_0(tmp_path, capsys):
    nq = tmp_path / "ok.nq"
    nq.write_bytes(_nquads("response_all_parts.json")[0])
    assert main(["validate", str(DATA / "request_all_parts.json"), str(nq)]) == 0
    assert "conforms: 2 trace(s)" in capsys.readouterr().out


def test_violations_exit_1_grouped_by_trace_and_rule(tmp_path, capsys):
    path, bad, good = _broken(tmp_path)
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("does not conform: 2 violation(s) in 1 of 2 trace(s)")
    assert f"trace {bad}" in out and f"trace {good}" not in out
    assert "  rule ToolResultAnswersCall (1 violation)" in out and "  rule UsageTotal (1 violation)" in out
    assert "    - at entry 0 › response › usage" in out
    assert "      property: dspy:total_tokens" in out
    assert '      value: "1"^^<http://www.w3.org/2001/XMLSchema#integer>' in out
    assert "total_tokens is 1, but input_tokens" in out
    assert "entry 0 › request › message 3 › part 0" in out


def test_json_report(tmp_path, capsys):
    path, bad, _ = _broken(tmp_path)
    assert main(["validate", str(path), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["conforms"] is False and doc["violation_count"] == 2 and doc["traces_validated"] == 2
    [group] = doc["traces"]
    assert group["trace"] == bad
    assert {x["rule"] for x in group["results"]} == {"ToolResultAnswersCall", "UsageTotal"}
    assert {x["severity"] for x in group["results"]} == {"Violation"}
    x = next(x for x in group["results"] if x["rule"] == "UsageTotal")
    assert x["node"] == "entry 0 › response › usage" and x["path"] == "dspy:total_tokens" and x["focus_node"] == f"{bad}/entry/0/response/usage"


def test_ttl_report_is_a_shacl_validation_report(tmp_path, capsys):
    path, bad, _ = _broken(tmp_path)
    assert main(["validate", str(path), "--format", "ttl"]) == 1
    graph = rdflib.Graph().parse(data=capsys.readouterr().out, format="turtle")
    [report] = graph.subjects(rdflib.RDF.type, SH.ValidationReport)
    assert graph.value(report, SH.conforms).toPython() is False
    results = list(graph.objects(report, SH.result))
    assert len(results) == 2
    paths = {graph.value(r, SH.resultPath) for r in results}
    assert paths == {rdflib.URIRef(D + "total_tokens"), rdflib.URIRef(D + "answers")}
    assert all(graph.value(r, SH.sourceConstraintComponent) == SH.SPARQLConstraintComponent for r in results)
    assert all(graph.value(r, SH.focusNode).startswith(bad) for r in results)


def test_ttl_report_of_a_conforming_file(capsys):
    assert main(["validate", str(DATA / "part_text.json"), "--format", "ttl"]) == 0
    graph = rdflib.Graph().parse(data=capsys.readouterr().out, format="turtle")
    [report] = graph.subjects(rdflib.RDF.type, SH.ValidationReport)
    assert graph.value(report, SH.conforms).toPython() is True


@pytest.fixture
def store_dir(tmp_path):
    path, bad, good = _broken(tmp_path)
    directory = tmp_path / "store"
    store = ox.Store(str(directory))
    store.load(path.read_bytes(), ox.RdfFormat.N_QUADS)
    store.flush()
    del store
    return directory, bad, good


def test_store_and_trace(store_dir, capsys):
    directory, bad, good = store_dir
    assert main(["validate", "--store", str(directory)]) == 1
    out = capsys.readouterr().out
    assert f"trace {bad}" in out and "of 2 trace(s)" in out
    assert main(["validate", "--store", str(directory), "--trace", good]) == 0
    assert "conforms: 1 trace(s)" in capsys.readouterr().out
    assert main(["validate", "--store", str(directory), "--trace", bad, "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["traces"][0]["trace"] == bad
    assert main(["validate", "--store", str(directory), "--trace", "urn:no-such-trace"]) == 2
    assert "no trace urn:no-such-trace" in capsys.readouterr().err


def test_slices_and_whole_store_give_the_same_report(store_dir, capsys):
    directory, bad, good = store_dir
    outputs = []
    for flag in ("--slices", "--no-slices"):
        assert main(["validate", "--store", str(directory), flag, "--format", "json"]) == 1
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1] and outputs[0]["traces"][0]["trace"] == bad


def test_a_terminal_gets_a_progress_bar_in_traces(store_dir, capsys, monkeypatch):
    directory, bad, good = store_dir
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["validate", "--store", str(directory)]) == 1
    err = capsys.readouterr().err
    assert "validating" in err and "/2 [" in err and "traces" in err  # tqdm redraws at most every 0.1 s
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert main(["validate", "--store", str(directory)]) == 1
    assert "validating" not in capsys.readouterr().err


def test_trace_filter_on_files(tmp_path, capsys):
    path, bad, good = _broken(tmp_path)
    assert main(["validate", str(path), "--trace", good]) == 0
    assert main(["validate", str(path), "--trace", bad]) == 1


def test_validate_store_api_reports_per_trace_with_progress(store_dir, engine):
    directory, bad, good = store_dir
    seen = []
    with open_store(directory, read_only=True) as store:
        report = validate_store(store, progress=seen.append, engine=engine)
    assert sum(seen) == 2 and sorted(report.traces) == sorted([bad, good])
    assert set(report.by_trace()) == {bad}
    assert {x.rule for x in report.violations} == {"ToolResultAnswersCall", "UsageTotal"}


def test_errors_exit_2(tmp_path, capsys):
    assert main(["validate"]) == 2
    assert "give input FILEs" in capsys.readouterr().err
    assert main(["validate", str(tmp_path / "missing.json")]) == 2
    bad = tmp_path / "bad.ttl"
    bad.write_text("<a> <b> .", encoding="utf-8")
    assert main(["validate", str(bad)]) == 2
    assert main(["validate", str(DATA / "part_text.json"), "--store", str(tmp_path / "s")]) == 2
    assert main(["validate", "--store", str(tmp_path / "nothing-here")]) == 2


def test_a_skipped_input_exits_1(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"not": "a trace"}\n', encoding="utf-8")
    assert main(["validate", str(bad), str(DATA / "part_text.json")]) == 1
    assert "skipped" in capsys.readouterr().err


def test_an_ill_typed_literal_in_a_turtle_report_is_shown_with_nothing_else_on_stderr(tmp_path, engine):
    import subprocess

    trace = "urn:x:t"
    xsd = "http://www.w3.org/2001/XMLSchema#"
    (tmp_path / "ill.nq").write_text(
        f'<{trace}> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{D}Trace> <{trace}> .\n'
        f'<{trace}> <{D}source_index> "abc"^^<{xsd}integer> <{trace}> .\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "dspy_rdf.cli", "validate", "ill.nq", "--format", "ttl", "--engine", engine],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (1, "")
    report = rdflib.Graph().parse(data=result.stdout, format="turtle")
    assert (None, SH.sourceConstraintComponent, SH.DatatypeConstraintComponent) in report
    assert {str(value) for value in report.objects(None, SH.value)} == {"abc"}


@pytest.mark.parametrize("content", [
    '<http://example.org/a> <http://example.org/b> "c" <http://example.org/g> .\n',  # one quad of another vocabulary
    '<urn:x:t> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://w3id.org/lmodel/dspy/Trace> <urn:x:t> .\n',  # http:// namespace
])
def test_rdf_that_holds_no_trace_is_never_a_success(tmp_path, capsys, content):
    path = tmp_path / "none.nq"
    path.write_text(content, encoding="utf-8")
    assert main(["validate", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"error: no traces and no PROV views in {path}: found 1 graph of other data (no dspy:Trace node, no PROV-O triples)\n"
