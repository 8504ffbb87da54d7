"""Every input, every engine, every entry point gives the same verdict: a differential matrix over the corpus of
``tests/cases.py`` (good traces, and broken variants generated from the shapes: every property constraint, every
closed class and every rule broken at least once).

The reference is pySHACL run on each case's trace alone. Every other way of validating the same traces must report
exactly the same set of ``(trace, focus node, rule, constraint component, severity)``:

- files in every format the CLI reads (N-Quads, TriG, JSON-LD with graphs; Turtle, N-Triples, and N-Quads, TriG and
  JSON-LD with everything in the default graph), all cases in one file (no cross-trace findings allowed) and single
  cases in files of their own; JSON and JSON Lines for the traces of the model;
- the CLI with both engines and every report format (text, json, ttl), ``validate_files``, ``validate_traces``,
  ``validate_graph`` (an rdflib graph and an rdflib dataset), ``validate_dataset``, ``validate_store`` on an embedded
  store (whole-store queries and slices) and on a real ``oxigraph serve``.

The default run uses a fixed sample of the cases (every rule, every kind of constraint), checks the fast engine in
every form against the reference (pySHACL on each case's trace alone); the pySHACL engine behind each entry point
(the same code behind the same readers, and checked through one of them by test_validation_trust.py) runs with
``--slow``, which runs every case in every combination.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import defaultdict
from pathlib import Path

import cases
import httpx
import pyoxigraph as ox
import pytest
import rdflib
from conftest import computed_once

from dspy_rdf.canonical.redact import DEFAULT_REDACTOR
from dspy_rdf.cli.main import main
from dspy_rdf.rdf.formats import encode_trace
from dspy_rdf.sources.tracejson import trace_to_json
from dspy_rdf.store import EmbeddedStore
from dspy_rdf.validation import (
    Engine,
    ValidationReport,
    validate_dataset,
    validate_files,
    validate_graph,
    validate_store,
    validate_traces,
)
from dspy_rdf.validation.reference import validate_graph_pyshacl
from dspy_rdf.validation.shapes import load_shapes

SH = rdflib.Namespace("http://www.w3.org/ns/shacl#")
ENGINES = [Engine.FAST, pytest.param(Engine.PYSHACL, marks=pytest.mark.slow, id="pyshacl")]
"""Both engines as test parameters; the pySHACL engine with --slow (its verdicts are the reference of every test here
anyway)."""
BOTH_ENGINES = (Engine.FAST, Engine.PYSHACL)
Key = tuple  # (trace, focus, rule, component, severity)


# --- the corpus and its reference -----------------------------------------------------------------------------------


def _sample(all_cases: tuple[cases.Case, ...]) -> list[cases.Case]:
    """A fixed sample: every model and rule case, and about one in fifteen of the others, with every kind of
    constraint at least once."""
    kinds: set[str] = set()
    out = []
    for case in all_cases:
        kind = case.name.rsplit(".", 1)[-1] if case.name.startswith(("good.", "model.", "rule.")) is False else case.name
        if case.name.startswith(("model.", "rule.")) or kind not in kinds or zlib.crc32(case.name.encode()) % 15 == 0:
            kinds.add(kind)
            out.append(case)
    return out


@pytest.fixture(scope="module", params=["sample", pytest.param("all", marks=pytest.mark.slow)])
def corpus(request) -> list[cases.Case]:
    everything = cases.all_cases()
    return list(everything) if request.param == "all" else _sample(everything)


def _keys(violations) -> dict[str | None, set[Key]]:
    out: dict[str | None, set[Key]] = defaultdict(set)
    for x in violations:
        out[x.trace].add(x.key())
    return out


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory, worker_id) -> dict[str, set[Key]]:
    """pySHACL on each case's trace alone (once per run: the workers of -n share it)."""

    def verdicts() -> dict[str, list[list]]:
        shapes = load_shapes()
        out = {}
        for case in corpus:
            triples = [(q.subject, q.predicate, q.object) for q in ox.parse(case.nquads, ox.RdfFormat.N_QUADS)]
            out[case.trace] = [list(x.key()) for x in validate_graph_pyshacl(triples, trace=case.trace, shapes=shapes)]
        return out

    shared = computed_once(tmp_path_factory, worker_id, f"validation-reference-{len(corpus)}-cases", verdicts)
    return {trace: {tuple(key) for key in keys} for trace, keys in shared.items()}


def _expected(corpus, reference) -> dict[str | None, set[Key]]:
    return {case.trace: reference[case.trace] for case in corpus if reference[case.trace]}


def _assert_same(got: dict, corpus, reference, how: str) -> None:
    expected = _expected(corpus, reference)
    got = {trace: keys for trace, keys in got.items() if keys}
    wrong = sorted(set(got) ^ set(expected) | {t for t in got if t in expected and got[t] != expected[t]}, key=str)
    details = [(t, sorted(expected.get(t, set()) - got.get(t, set()))[:2], sorted(got.get(t, set()) - expected.get(t, set()))[:2]) for t in wrong[:5]]
    assert not wrong, f"{how}: {len(wrong)} trace(s) differ from the reference (missing, extra): {details}"


def test_every_case_breaks_what_it_says_and_good_traces_conform(corpus, reference):
    for case in corpus:
        keys = reference[case.trace]
        if case.expect is None:
            assert not [k for k in keys if k[4] == "Violation"], (case.name, sorted(keys)[:3])
            continue
        focus, path, what = case.expect
        if path is None and focus == case.trace:
            assert any(k[2] == what for k in keys), (case.name, what, sorted(keys)[:3])
        else:
            assert any(k[1] == focus and k[3] == what for k in keys), (case.name, case.expect, sorted(keys)[:3])


def test_the_corpus_breaks_every_rule_and_every_kind_of_constraint():
    everything = cases.all_cases()
    broken_rules = {c.expect[2] for c in everything if c.expect is not None and c.expect[1] is None}
    assert cases.rules_in_shapes() <= broken_rules, f"rules never broken: {sorted(cases.rules_in_shapes() - broken_rules)}"
    shapes = load_shapes().graph
    for shape in set(shapes.subjects(SH.targetClass, None)):
        name = str(shape).rsplit("/", 1)[-1]
        for ps in shapes.objects(shape, SH.property):
            path = str(shapes.value(ps, SH.path)).rsplit("/", 1)[-1].rsplit("#", 1)[-1]
            made = {c.name.rsplit(".", 1)[-1] for c in everything if c.name.startswith(f"{name}.{path}.")}
            if shapes.value(ps, SH.maxCount) is not None:
                assert "maxCount" in made, (name, path)
            if shapes.value(ps, SH.datatype) is not None:
                assert "datatype" in made, (name, path)
            if shapes.value(ps, SH.nodeKind) is not None:
                assert "nodeKind" in made, (name, path)
    # a sample that forgot a kind of constraint would silently narrow the default run
    assert {c.name.rsplit(".", 1)[-1] for c in _sample(everything) if c.name.count(".") >= 2} == {
        c.name.rsplit(".", 1)[-1] for c in everything if c.name.count(".") >= 2
    }
    assert len(everything) > 900


# --- files in every format --------------------------------------------------------------------------------------------


def _quads(corpus) -> list[ox.Quad]:
    return [q for case in corpus for q in ox.parse(case.nquads, ox.RdfFormat.N_QUADS)]


def _jsonld(quads: list[ox.Quad], *, graphs: bool) -> bytes:
    """Expanded JSON-LD, written here (rdflib's writer turns integers into JSON numbers, and fails beyond 64 bits)."""

    def term(t) -> dict:
        if isinstance(t, ox.NamedNode):
            return {"@id": t.value}
        if isinstance(t, ox.BlankNode):
            return {"@id": f"_:{t.value}"}
        if t.language:
            return {"@value": t.value, "@language": t.language}
        return {"@value": t.value, "@type": t.datatype.value}

    nodes: dict[str | None, dict[str, dict]] = defaultdict(dict)
    for q in quads:
        graph = q.graph_name.value if graphs and isinstance(q.graph_name, ox.NamedNode) else None
        subject = term(q.subject)["@id"]
        node = nodes[graph].setdefault(subject, {"@id": subject})
        if q.predicate.value == "http://www.w3.org/1999/02/22-rdf-syntax-ns#type":
            node.setdefault("@type", []).append(q.object.value)
        else:
            node.setdefault(q.predicate.value, []).append(term(q.object))
    doc = list(nodes.pop(None, {}).values())
    doc += [{"@id": name, "@graph": list(members.values())} for name, members in nodes.items()]
    return json.dumps(doc).encode("utf-8")


FORMATS = {
    # name: (suffix, writer)
    "nq": (".nq", lambda qs: ox.serialize(qs, format=ox.RdfFormat.N_QUADS)),
    "trig": (".trig", lambda qs: ox.serialize(qs, format=ox.RdfFormat.TRIG)),
    "jsonld": (".jsonld", lambda qs: _jsonld(qs, graphs=True)),
    "ttl": (".ttl", lambda qs: ox.serialize([q.triple for q in qs], format=ox.RdfFormat.TURTLE)),
    "nt": (".nt", lambda qs: ox.serialize([q.triple for q in qs], format=ox.RdfFormat.N_TRIPLES)),
    "nq-default-graph": (".nq", lambda qs: ox.serialize([ox.Quad(q.subject, q.predicate, q.object) for q in qs], format=ox.RdfFormat.N_QUADS)),
    "trig-default-graph": (".trig", lambda qs: ox.serialize([ox.Quad(q.subject, q.predicate, q.object) for q in qs], format=ox.RdfFormat.TRIG)),
    "jsonld-default-graph": (".jsonld", lambda qs: _jsonld(qs, graphs=False)),
    "jsonld-as-.json": (".json", lambda qs: _jsonld(qs, graphs=True)),  # what `export -o x.json` writes
}


@pytest.fixture(scope="module")
def files(corpus, tmp_path_factory) -> dict[str, Path]:
    """All the cases in one file of each format."""
    directory = tmp_path_factory.mktemp("matrix")
    quads = _quads(corpus)
    out = {}
    for name, (suffix, write) in FORMATS.items():
        path = directory / f"all-{name}{suffix}"
        path.write_bytes(write(quads))
        out[name] = path
    return out


def _cli_json(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main(["validate", *argv, "--format", "json", "--no-redact"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def _json_keys(doc: dict) -> dict[str | None, set[Key]]:
    out: dict[str | None, set[Key]] = defaultdict(set)
    for group in doc["traces"]:
        for x in group["results"]:
            out[group["trace"]].add((x["trace"], x["focus_node"], x["rule"], x["constraint"], x["severity"]))
    return out


def _exit_code(expected: dict[str | None, set[Key]]) -> int:
    return 1 if any(k[4] == "Violation" for keys in expected.values() for k in keys) else 0


def _slow_unless(default: bool) -> list[pytest.MarkDecorator]:
    return [] if default else [pytest.mark.slow]


@pytest.mark.parametrize(
    ("engine", "fmt"),
    [
        pytest.param(engine, fmt, marks=_slow_unless(engine is Engine.FAST and fmt in ("nq", "ttl")), id=f"{engine}-{fmt}")
        for engine in BOTH_ENGINES for fmt in FORMATS
    ],
)
def test_cli_on_one_file_of_every_case_in_every_format(fmt, engine, files, corpus, reference, capsys):
    code, doc = _cli_json(capsys, [str(files[fmt]), "--engine", engine])
    _assert_same(_json_keys(doc), corpus, reference, f"validate {fmt} --engine {engine}")
    assert doc["traces_validated"] == len(corpus) and doc["untraced_graphs_validated"] == 0
    assert code == _exit_code(_expected(corpus, reference))


def _parse_text(text: str) -> dict[str | None, set[Key]]:
    out: dict[str | None, set[Key]] = defaultdict(set)
    trace = rule = focus = None
    for line in text.splitlines():
        if line.startswith("trace "):
            trace = line[len("trace "):]
        elif line == "outside any trace":
            trace = None
        elif line.startswith("  rule "):
            rule = line[len("  rule "):].rsplit(" (", 1)[0]
        elif line.startswith("    - at "):
            at = line[len("    - at "):]
            focus = at.rsplit(" <", 1)[1][:-1] if at.endswith(">") and " <" in at else at
        elif match := re.match(r"^      (violation|warning|info): .* \[(\w+)\]$", line):
            out[trace].add((trace, focus, rule, match.group(2), match.group(1).capitalize()))
    return out


def _parse_ttl(text: str) -> dict[str | None, set[Key]]:
    graph = rdflib.Graph().parse(data=text, format="turtle")
    out: dict[str | None, set[Key]] = defaultdict(set)
    for result in graph.subjects(rdflib.RDF.type, SH.ValidationResult):
        focus = str(graph.value(result, SH.focusNode))
        trace = focus.split("/", 1)[0]
        shape = str(graph.value(result, SH.sourceShape))
        out[trace].add((
            trace, focus, shape.rsplit("/", 1)[-1], str(graph.value(result, SH.sourceConstraintComponent)).rsplit("#", 1)[-1],
            str(graph.value(result, SH.resultSeverity)).rsplit("#", 1)[-1],
        ))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("report_format", ["text", "ttl"])
@pytest.mark.parametrize("engine", ENGINES)
def test_text_and_ttl_reports_say_the_same(report_format, engine, files, corpus, reference, capsys):
    code = main(["validate", str(files["trig"]), "--engine", engine, "--format", report_format, "--no-redact"])
    out = capsys.readouterr().out
    got = _parse_text(out) if report_format == "text" else _parse_ttl(out)
    _assert_same(got, corpus, reference, f"validate --format {report_format} --engine {engine}")
    assert code == _exit_code(_expected(corpus, reference))


def _single_case_sample(corpus) -> list[cases.Case]:
    return corpus[:: max(1, len(corpus) // 12)]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_cli_on_files_of_one_case_each(fmt, corpus, reference, tmp_path, capsys, request):
    suffix, write = FORMATS[fmt]
    # the fast engine against the reference verdicts; pySHACL too with --slow (a pySHACL run per case and format)
    engines = BOTH_ENGINES if request.config.getoption("--slow") else [Engine.FAST]
    for case in _single_case_sample(corpus):
        path = tmp_path / f"one{suffix}"
        path.write_bytes(write(list(ox.parse(case.nquads, ox.RdfFormat.N_QUADS))))
        for engine in engines:
            code, doc = _cli_json(capsys, [str(path), "--engine", engine])
            _assert_same(_json_keys(doc), [case], reference, f"{case.name} as {fmt} --engine {engine}")
            assert doc["traces_validated"] == 1
            assert code == _exit_code(_expected([case], reference))


# --- the Python entry points --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_validate_dataset_with_graphs_and_default_graph(engine, corpus, reference):
    quads = _quads(corpus)
    for dataset_quads in (quads, [ox.Quad(q.subject, q.predicate, q.object) for q in quads]):
        dataset = ox.Store()
        dataset.extend(dataset_quads)
        _assert_same(_keys(validate_dataset(dataset, engine=engine).violations), corpus, reference, f"validate_dataset {engine}")


@pytest.mark.parametrize("engine", ENGINES)
def test_validate_graph_with_an_rdflib_graph_and_dataset(engine, corpus, reference):
    # built from the quads term by term: rdflib's own parsers rewrite some ill-formed literals ("not-a-value" as an
    # xsd:boolean becomes "false"), which would change the data, not the verdict on it
    from dspy_rdf.rdf.terms import rdflib_term

    quads = _quads(corpus)
    graph = rdflib.Graph()
    dataset = rdflib.Dataset()
    for q in quads:
        triple = (rdflib_term(q.subject), rdflib.URIRef(q.predicate.value), rdflib_term(q.object))
        graph.add(triple)
        dataset.graph(rdflib.URIRef(q.graph_name.value)).add(triple)
    _assert_same(_keys(validate_graph(graph, engine=engine).violations), corpus, reference, f"validate_graph {engine}")
    _assert_same(_keys(validate_graph(dataset, engine=engine).violations), corpus, reference, f"validate_graph (Dataset) {engine}")


@pytest.mark.parametrize("engine", ENGINES)
def test_validate_files_api(engine, files, corpus, reference):
    report = validate_files([files["nt"]], engine=engine, redactor=None)
    _assert_same(_keys(report.violations), corpus, reference, f"validate_files {engine}")


@pytest.mark.parametrize(
    ("engine", "slices"),
    [
        pytest.param(engine, slices, marks=_slow_unless(engine is Engine.FAST), id=f"{engine}-{slices}")
        for engine in BOTH_ENGINES for slices in (False, True)
    ],
)
def test_validate_store_embedded(engine, slices, corpus, reference, tmp_path, capsys, monkeypatch):
    from dspy_rdf.validation import fast

    monkeypatch.setattr(fast, "_PARALLEL_MIN_TRACES", 1)  # worker processes, as on a large store
    store = EmbeddedStore(tmp_path / "store")
    store.oxigraph.load(b"".join(case.nquads for case in corpus), ox.RdfFormat.N_QUADS)
    writing = validate_store(store, engine=engine, slices=slices, redactor=None)  # open for writing: in this process
    store.close()
    with EmbeddedStore(tmp_path / "store", read_only=True) as store:  # read-only: in worker processes
        report = validate_store(store, engine=engine, slices=slices, redactor=None)
    for found in (writing, report):
        _assert_same(_keys(found.violations), corpus, reference, f"validate_store embedded {engine} slices={slices}")
        assert len(found.traces) == len(corpus)
    code, doc = _cli_json(capsys, ["--store", str(tmp_path / "store"), "--engine", engine, "--slices" if slices else "--no-slices"])
    _assert_same(_json_keys(doc), corpus, reference, f"validate --store {engine} slices={slices}")


@pytest.mark.parametrize("engine", ENGINES)
def test_validate_store_on_a_real_oxigraph_server(engine, remote_store, oxigraph_server, corpus, reference, capsys):
    response = httpx.post(f"{oxigraph_server}/store", content=b"".join(case.nquads for case in corpus),
                          headers={"Content-Type": "application/n-quads"}, timeout=60)
    assert response.status_code in (200, 201, 204), response.text
    report = validate_store(remote_store, engine=engine, redactor=None)
    _assert_same(_keys(report.violations), corpus, reference, f"validate_store remote {engine}")
    assert len(report.traces) == len(corpus)
    code, doc = _cli_json(capsys, ["--store", oxigraph_server, "--engine", engine])
    _assert_same(_json_keys(doc), corpus, reference, f"validate --store URL {engine}")


# --- traces of the model: JSON, JSON Lines and validate_traces ---------------------------------------------------------


@pytest.fixture(scope="module")
def model_traces():
    """The good traces and the model breaks, and the reference on each as export writes it (redacted)."""
    traces = list(cases.good_traces()) + [t for _, t, _ in cases.model_breaks()]
    shapes = load_shapes()
    expected: dict[str, set[Key]] = {}
    for trace in traces:
        iri, data = encode_trace(trace, redactor=DEFAULT_REDACTOR)
        triples = [(q.subject, q.predicate, q.object) for q in ox.parse(data, ox.RdfFormat.N_QUADS)]
        expected[iri] = {x.key() for x in validate_graph_pyshacl(triples, trace=iri, shapes=shapes)}
    return traces, expected


def _same_as(got: dict, expected: dict[str, set[Key]], how: str) -> None:
    got = {t: k for t, k in got.items() if k}
    want = {t: k for t, k in expected.items() if k}
    assert got == want, f"{how}: differs from the reference on {sorted(set(got) ^ set(want) | {t for t in got if got[t] != want.get(t)})[:3]}"


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_json_traces_through_every_entry_point(engine, model_traces, tmp_path, capsys):
    traces, expected = model_traces
    assert any(expected.values()), "the model breaks must be found"
    jsonl = tmp_path / "traces.jsonl"
    jsonl.write_text("".join(json.dumps(trace_to_json(t)) + "\n" for t in traces), encoding="utf-8")
    singles = []
    for i, trace in enumerate(traces[-8:]):
        path = tmp_path / f"trace-{i}.json"
        path.write_text(json.dumps(trace_to_json(trace)), encoding="utf-8")
        singles.append(path)
    _same_as(_keys(validate_traces(traces, engine=engine).violations), expected, f"validate_traces {engine}")
    _same_as(_keys(validate_files([jsonl], engine=engine).violations), expected, f"validate_files jsonl {engine}")
    code = main(["validate", str(jsonl), "--engine", engine, "--format", "json"])
    _same_as(_json_keys(json.loads(capsys.readouterr().out)), expected, f"validate jsonl {engine}")
    assert code == 1
    code = main(["validate", *map(str, singles), "--engine", engine, "--format", "json"])
    last = {iri: keys for iri, keys in list(expected.items())[-8:]}
    _same_as(_json_keys(json.loads(capsys.readouterr().out)), last, f"validate json files {engine}")
    # exported by the real CLI into each format, then validated: the same trace IRIs, the same results
    for fmt in ("nq", "trig", "ttl", "nt", "jsonld"):
        out = tmp_path / f"exported.{fmt}"
        assert main(["export", str(jsonl), "-o", str(out)]) == 0
        capsys.readouterr()
        main(["validate", str(out), "--engine", engine, "--format", "json"])
        _same_as(_json_keys(json.loads(capsys.readouterr().out)), expected, f"export to {fmt} then validate {engine}")


def test_reports_name_the_traces_export_stores_and_redact_as_export_does(tmp_path, capsys):
    name, trace, rule = next(x for x in cases.model_breaks() if x[0] == "usage-total")
    path = tmp_path / "secret.json"
    path.write_text(json.dumps(trace_to_json(trace)), encoding="utf-8")
    store = tmp_path / "store"
    assert main(["export", str(path), "--store", str(store)]) == 0
    capsys.readouterr()
    with EmbeddedStore(store, read_only=True) as opened:
        [stored] = opened.trace_iris()
    for engine in BOTH_ENGINES:
        for fmt in ("text", "json", "ttl"):
            assert main(["validate", str(path), "--engine", engine, "--format", fmt]) == 1
            out = capsys.readouterr().out
            assert stored in out
            assert "sk-proj-" not in out and "abcdefghijklmnopqrstuvwxyz012345" not in out
            assert "[REDACTED:" in out or fmt != "json" or "UsageTotal" in out
        assert main(["validate", "--store", str(store), "--engine", engine, "--format", "json"]) == 1
        doc = json.loads(capsys.readouterr().out)
        assert [g["trace"] for g in doc["traces"]] == [stored]
    # --no-redact shows what the file holds (a different trace IRI: export with --no-redact would store that one)
    assert main(["validate", str(path), "--no-redact", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [g["trace"] for g in doc["traces"]] != [stored]


def test_report_values_and_messages_are_redacted_as_exports_are():
    from dspy_rdf.validation import Severity, Violation

    secret = "sk-proj-" + "B" * 40
    value = rdflib.Literal(json.dumps({"api_key": "hunter2", "note": secret}), datatype=rdflib.RDF.JSON).n3()
    x = Violation(focus_node="urn:t/x", path="dspy:extensions", value=value, constraint="DatatypeConstraintComponent",
                  message=f"bad {secret}", severity=Severity.VIOLATION, trace="urn:t")
    [y] = ValidationReport(violations=(x,)).redacted(DEFAULT_REDACTOR).violations
    assert "hunter2" not in y.value and secret not in y.value and secret not in y.message
    assert "[REDACTED:secret_field]" in y.value and "[REDACTED:openai_api_key]" in y.message
    assert ValidationReport(violations=(x,)).redacted(None).violations == (x,)
