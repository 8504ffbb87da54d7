"""One execution, every path: one trace and one answer.

The same programs (ReAct with a failing tool, native parallel tool calls, a nested module whose LM call fails) ran once
on the real ``dspy.LM`` with four recorders at once: dspy-rdf's live capture, MLflow's DSPy autolog (its trace JSON and
``mlflow traces search`` page), OpenInference's DSPy instrumentor (OTLP) and MLflow's GenAI OTLP export
(``tests/data/crosspath``, made by ``make_fixtures_crosspath.py``, with what the programs really did in ``facts.json``).
Each recording, each store (embedded, ``oxigraph serve``, Virtuoso) and each round trip (store -> dump -> store, file ->
file, JSON, OTLP) must give one trace per execution and the same rows in every canned query, except where a recorder
did not record something: then the answer is unknown, and the README's table of sources says so.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pyoxigraph as ox
import pytest

from dspy_rdf.analytics.catalog import list_queries, run_query
from dspy_rdf.canonical.identity import content_digest, content_payload, execution_id, trace_iri
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.formats import RdfFormat, parse_traces
from dspy_rdf.store import EmbeddedStore, TraceStore

DATA = Path(__file__).parent / "data"
CROSS = DATA / "crosspath"
FACTS = json.loads((CROSS / "facts.json").read_text(encoding="utf-8"))
FACTS_341 = json.loads((CROSS / "facts_dspy341.json").read_text(encoding="utf-8"))
FACTS_MLFLOW2 = json.loads((CROSS / "facts_mlflow2.json").read_text(encoding="utf-8"))
TIMES = {"seconds", "p50_seconds", "p95_seconds", "max_seconds", "total_seconds", "mean_seconds", "started_at"}
"""Columns that each recorder measures itself: the others' work runs inside its timing windows."""
NODES = {"trace", "execution", "call", "result"}
"""Columns that name a node: the IRIs of two recordings of one execution differ when the recorders share no id."""

PRODUCERS = {
    # file: what its recorder leaves unknown (the README's table of sources says the same); the live capture first
    "capture.jsonl": set(),
    "mlflow3_traces.jsonl": {"cost", "finish_reason"},
    "mlflow3_search_page.json": {"cost", "finish_reason"},
    "openinference.json": {"tokens", "cost", "finish_reason"},
    "mlflow_otlp.json": {"cost", "messages", "tool_call_parts"},
}
"""One execution (DSPy 3.3.1, MLflow 3) through five recorders."""
PRODUCERS_341 = {name.replace(".", "_dspy341.", 1): unknown for name, unknown in PRODUCERS.items()}
"""The same programs on DSPy 3.4.1."""
PRODUCERS_MLFLOW2 = {"capture_mlflow2.jsonl": set(), "mlflow2_traces.json": {"tokens", "cost", "finish_reason"}}
"""The same programs, recorded by live capture and MLflow 2.22's autolog (which records no usage)."""
SETS = {"dspy331": (PRODUCERS, FACTS), "dspy341": (PRODUCERS_341, FACTS_341), "mlflow2": (PRODUCERS_MLFLOW2, FACTS_MLFLOW2)}
CASES = [(name, producer) for name, (producers, _) in SETS.items() for producer in producers]


def _traces(path: Path) -> list:
    items = list(read_traces(path))
    assert all(item.error is None for item in items), [str(item.error) for item in items if item.error]
    return [item.trace for item in items]


def _rows(store: TraceStore) -> dict[str, list[str]]:
    """Every canned query's rows (and the store's counts) as sorted JSON lines, without the columns a recorder
    measures itself or that name nodes."""
    out = {}
    for query in list_queries():
        params = {"limit": 1000} if any(p.is_limit for p in query.parameters) else None
        records = run_query(store, query.name, params).records()
        out[query.name] = sorted(json.dumps({k: v for k, v in r.items() if k not in TIMES | NODES}, sort_keys=True) for r in records)
    out["stats"] = [json.dumps({k: v for k, v in store.stats().items() if k != "triples"}, sort_keys=True)]
    return out


def _stored(path: Path, where: Path) -> dict[str, list[str]]:
    with EmbeddedStore(where / path.name) as store:
        report = store.put(_traces(path))
        assert not report.failed
        return _rows(store)


@pytest.fixture(scope="module")
def producer_rows(tmp_path_factory) -> dict[str, dict[str, list[str]]]:
    where = tmp_path_factory.mktemp("producers")
    return {name: _stored(CROSS / name, where) for producers, _ in SETS.values() for name in producers}


def _without(rows: dict[str, list[str]], unknown: set[str]) -> dict[str, list[str]]:
    """The rows with the columns (and queries) a recorder does not record left out, on both sides of a comparison."""
    columns = set()
    if "tokens" in unknown:
        columns |= {"input_tokens", "output_tokens", "total_tokens", "usage_calls"}
    if "cost" in unknown:
        columns |= {"cost", "priced_calls"}
    if "finish_reason" in unknown:
        columns |= {"finish_reason"}
    if "messages" in unknown:
        columns |= {"messages", "finish_reason", "outputs", "traces", "truncated"}
    if "tool_call_parts" in unknown:
        columns |= {"parts"}
    skipped = {"part_kinds", "finish_reasons"} if "messages" in unknown else set()
    return {
        query: sorted(json.dumps({k: v for k, v in json.loads(r).items() if k not in columns}, sort_keys=True) for r in found)
        for query, found in rows.items()
        if query not in skipped
    }


@pytest.mark.parametrize(("recording", "producer"), [(name, p) for name, p in CASES if not p.startswith("capture")])
def test_every_recorder_of_one_execution_gives_the_rows_of_live_capture_but_what_it_did_not_record(producer_rows, recording, producer):
    producers = SETS[recording][0]
    unknown, capture = producers[producer], next(iter(producers))
    assert _without(producer_rows[producer], unknown) == _without(producer_rows[capture], unknown)


@pytest.mark.parametrize(("recording", "producer"), CASES)
def test_what_a_recorder_did_not_record_is_unknown_never_zero(producer_rows, recording, producer):
    unknown = SETS[recording][0][producer]
    [tokens] = [json.loads(r) for r in producer_rows[producer]["tokens_per_model"]]
    [stats] = [json.loads(r) for r in producer_rows[producer]["stats"]]
    if "tokens" in unknown:
        assert tokens["input_tokens"] is tokens["output_tokens"] is stats["input_tokens"] is None
        assert tokens["usage_calls"] == stats["usage_calls"] == 0
    else:
        assert (tokens["input_tokens"], tokens["output_tokens"]) == (60, 120) == (stats["input_tokens"], stats["output_tokens"])
    if "cost" in unknown:
        assert tokens["cost"] is stats["cost"] is None and tokens["priced_calls"] == 0
    else:
        assert tokens["cost"] == pytest.approx(8.1e-05) and tokens["priced_calls"] == 6
    reasons = {json.loads(r)["finish_reason"] for r in producer_rows[producer]["finish_reasons"]}
    assert reasons == (set() if "messages" in unknown else {None} if "finish_reason" in unknown else {"stop"})


@pytest.mark.parametrize(("recording", "producer"), CASES)
def test_every_recorder_counts_what_the_programs_did(producer_rows, recording, producer):
    """The ground truth is what the programs themselves wrote down (facts.json), not what any recorder says."""
    programs = SETS[recording][1]["programs"].values()
    lm_calls = sum(p["lm_calls"] for p in programs)
    tools = [run for p in programs for run in p["tool_runs"] if run["name"] not in ("finish", "submit")]
    [stats] = [json.loads(r) for r in producer_rows[producer]["stats"]]
    assert (stats["traces"], stats["lm_calls"], stats["tool_executions"]) == (3, lm_calls, len(tools))
    per_tool = {json.loads(r)["tool"]: json.loads(r) for r in producer_rows[producer]["tool_error_rate"]}
    assert {tool: (row["results"], row["errors"]) for tool, row in per_tool.items()} == {
        name: (sum(1 for t in tools if t["name"] == name), sum(1 for t in tools if t["name"] == name and t["raised"])) for name in {t["name"] for t in tools}
    }
    [per_module] = [json.loads(r) for r in producer_rows[producer]["lm_calls_per_module"]]
    assert per_module["module_class"] == "Predict" and per_module["lm_calls"] == lm_calls


def test_the_programs_facts_are_what_the_fixture_says():
    programs = FACTS["programs"]
    assert [p["lm_calls"] for p in programs.values()] == [4, 1, 2] and sum(p["lm_calls_failed"] for p in programs.values()) == 1
    assert Counter(run["name"] for p in programs.values() for run in p["tool_runs"]) == {"add": 2, "divide": 2, "finish": 1}


def test_a_module_class_is_one_name_whatever_recorded_it(tmp_path):
    for name in ("capture.jsonl", "mlflow3_traces.jsonl", "openinference.json"):
        with EmbeddedStore(tmp_path / name) as store:
            store.put(_traces(CROSS / name))
            for asked in ("Predict", "dspy.predict.predict.Predict"):
                [row] = run_query(store, "lm_calls_per_module", {"module_class": asked}).records()
                assert (row["module_class"], row["lm_calls"]) == ("Predict", 7), (name, asked)
    [run] = _traces(CROSS / "capture.jsonl")[:1]
    assert {(c.module_class, c.module_class_path) for c in run.calls if hasattr(c, "module_class")} >= {("ReAct", "dspy.predict.react.ReAct")}


def test_dspys_own_tools_are_kept_marked_and_left_out_unless_asked_for(tmp_path):
    with EmbeddedStore(tmp_path / "store") as store:
        store.put(_traces(CROSS / "capture.jsonl"))
        default = {r["tool"] for r in run_query(store, "tool_calls_per_tool").records()}
        every = {r["tool"]: r["executions"] for r in run_query(store, "tool_calls_per_tool", {"framework_tools": 1}).records()}
        marked = store.select("SELECT ?tool WHERE { GRAPH ?g { ?g <https://w3id.org/lmodel/dspy/framework_tools> ?tool } }")
    assert default == {"add", "divide"} and every == {"add": 2, "divide": 2, "finish": 1}
    assert [b["tool"]["value"] for b in marked["results"]["bindings"]] == ["finish"]


def test_a_failed_lm_call_has_no_response_on_any_path(producer_rows, tmp_path):
    for name in PRODUCERS:
        [nested] = [t for t in _traces(CROSS / name) if any(getattr(c, "error", None) for c in t.calls if type(c).__name__ == "LMCall")]
        [failed] = [c for c in nested.calls if type(c).__name__ == "LMCall" and c.error]
        assert failed.entry is None, name
        if name != "capture.jsonl":
            assert any("the LM call failed" in x["reason"] for x in nested.losses), name
    for name in PRODUCERS:
        outputs = sum(json.loads(r)["outputs"] for r in producer_rows[name]["finish_reasons"])
        assert outputs == (0 if "messages" in PRODUCERS[name] else 6), name  # 6 LM calls answered, 1 failed


# --- one recording, two recorders, several sinks ----------------------------------------------------------------------


def test_one_run_recorded_twice_is_one_trace(tmp_path):
    """Two recorders in one program (an archive and a store), and a recorder with both sinks: one trace per run."""
    import dspy
    from lms import ScriptedLM, fields

    from dspy_rdf.capture.recorder import FileSink, StoreSink, TraceRecorder

    archive, stored = TraceRecorder(FileSink(tmp_path / "runs.jsonl")), TraceRecorder(StoreSink(tmp_path / "store"))
    both = TraceRecorder(FileSink(tmp_path / "both.jsonl"), FileSink(tmp_path / "both.nq"))
    with dspy.context(callbacks=[archive, stored, both]):
        for answer in ("4", "5", "6"):
            with dspy.context(lm=ScriptedLM([fields(answer=answer)])):
                dspy.Predict("question -> answer")(question="2 + 2?")
    for recorder in (archive, stored, both):
        recorder.close()
        assert not recorder.errors and not recorder.unwritten
    assert main(["export", str(tmp_path / "runs.jsonl"), str(tmp_path / "both.jsonl"), str(tmp_path / "both.nq"), "--store", str(tmp_path / "store")]) == 0
    with EmbeddedStore(tmp_path / "store", read_only=True) as store:
        counts = store.stats()
        iris = set(store.trace_iris())
    assert (counts["traces"], counts["lm_calls"]) == (3, 3)
    assert iris == {trace_iri(t) for t in _traces(tmp_path / "runs.jsonl")} == {trace_iri(t) for t in _traces(tmp_path / "both.jsonl")}
    assert iris == {iri for iri, _ in parse_traces(tmp_path / "both.nq", RdfFormat.N_QUADS)}


# --- round trips ------------------------------------------------------------------------------------------------------

ROUND_TRIP_INPUTS = [CROSS / "capture.jsonl", CROSS / "mlflow3_traces.jsonl", CROSS / "openinference.json", DATA / "history_dicts_dspy3.3.1.json", DATA / "history_dicts_dspy3.4.1.json"]


def _dump(store: TraceStore) -> bytes:
    import io

    buffer = io.BytesIO()
    store.dump(buffer)
    return buffer.getvalue()


def _round_trip_in(store: TraceStore) -> None:
    traces = [t for path in ROUND_TRIP_INPUTS for t in _traces(path)]
    report = store.put(traces)
    assert not report.failed and len(report.written) == len(traces)
    before, iris = _rows(store), set(store.trace_iris())
    dumped = [trace for _, trace in parse_traces(_dump(store), RdfFormat.N_QUADS)]
    again = store.put(dumped)
    assert again.written == [] and len(again.already_stored) == len(traces)
    assert set(store.trace_iris()) == iris and _rows(store) == before
    assert {trace_iri(t) for t in dumped} == iris == {trace_iri(t) for t in traces}
    # every copy holds the content it was written with
    assert sorted(content_digest(content_payload(t)) for t in dumped) == sorted(t.content_digest for t in dumped)


def test_a_store_dumped_and_loaded_again_holds_every_trace_once_embedded(tmp_path):
    with EmbeddedStore(tmp_path / "store") as store:
        _round_trip_in(store)


def test_a_store_dumped_and_loaded_again_holds_every_trace_once_on_oxigraph_serve(remote_store):
    _round_trip_in(remote_store)


@pytest.mark.slow
def test_a_store_dumped_and_loaded_again_holds_every_trace_once_on_virtuoso(virtuoso_store):
    _round_trip_in(virtuoso_store)


def test_export_dump_export_through_the_command_line_adds_nothing(tmp_path, capsys):
    store, dumped = str(tmp_path / "store"), str(tmp_path / "dump.nq")
    assert main(["export", *map(str, ROUND_TRIP_INPUTS), "--store", store]) == 0
    assert main(["stats", "--store", store, "--json"]) == 0
    first = capsys.readouterr().out
    assert main(["dump", "--store", store, "-o", dumped]) == 0
    assert main(["export", dumped, "--store", store]) == 0
    assert main(["stats", "--store", store, "--json"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == first.splitlines()[-1]


@pytest.mark.parametrize("fmt", ["nq", "trig", "ttl", "nt", "jsonld"])
def test_a_file_written_in_any_format_reads_back_as_the_same_traces(tmp_path, fmt):
    traces = [t for path in ROUND_TRIP_INPUTS for t in _traces(path)]
    out, back = tmp_path / f"out.{fmt}", tmp_path / "back.nq"
    assert main(["export", *map(str, ROUND_TRIP_INPUTS), "-o", str(out)]) == 0
    assert main(["export", str(out), "-o", str(back)]) == 0
    again = [t for _, t in parse_traces(back, RdfFormat.N_QUADS)]
    assert sorted(map(trace_iri, again)) == sorted(map(trace_iri, traces))
    assert sorted(content_digest(content_payload(t)) for t in again) == sorted(content_digest(content_payload(t)) for t in traces)


def test_json_and_otlp_round_trips_keep_each_trace_its_iri(tmp_path):
    rdf = tmp_path / "traces.nq"
    assert main(["export", *map(str, ROUND_TRIP_INPUTS), "-o", str(rdf)]) == 0
    traces = {trace_iri(t): t for _, t in parse_traces(rdf, RdfFormat.N_QUADS)}
    assert main(["to-json", str(rdf), "-o", str(tmp_path / "back.jsonl")]) == 0
    assert {trace_iri(t) for t in _traces(tmp_path / "back.jsonl")} == set(traces)
    assert main(["to-otlp", str(rdf), "-o", str(tmp_path / "spans.jsonl")]) == 0
    runs = {iri for iri, t in traces.items() if t.source_kind == "program_run"}
    from_spans = [item.trace for item in read_traces(tmp_path / "spans.jsonl", source_format="otlp")]
    assert {trace_iri(t) for t in from_spans if t.source_kind == "program_run"} == runs
    for trace in from_spans:  # what the conventions cannot carry is listed; everything else comes back
        before = traces.get(trace_iri(trace))
        if before is not None and not trace.losses[len(before.losses):]:
            assert content_digest(content_payload(trace)) == content_digest(content_payload(dataclasses.replace(before, source_index=None)))


def test_a_run_is_named_by_its_execution_and_other_traces_by_their_content():
    [run] = _traces(CROSS / "capture.jsonl")[:1]
    assert execution_id(run) == "dspy-call:" + run.calls[0].dspy_call_id and trace_iri(run).startswith("urn:dspy-rdf:trace:run-")
    later = dataclasses.replace(run, started_at="2030-01-01T00:00:00Z")  # the same execution, stamped by another recorder
    assert trace_iri(later) == trace_iri(run)
    [mlflow] = _traces(CROSS / "mlflow3_traces.jsonl")[:1]
    [otlp] = [t for t in _traces(CROSS / "mlflow_otlp.json") if t.source_trace_id.removeprefix("tr-") == mlflow.source_trace_id.removeprefix("tr-")]
    assert trace_iri(otlp) == trace_iri(mlflow)  # MLflow's trace JSON and its OTLP export of one trace: one trace
    [history] = _traces(DATA / "history_dicts_dspy3.3.1.json")
    assert execution_id(history) is None and trace_iri(history).startswith("urn:dspy-rdf:trace:content-")


def test_times_are_kept_in_the_form_every_store_gives_back(tmp_path):
    """A store rewrites an xsd:dateTime in its canonical form: a trace keeps that form from the start."""
    from conftest import examples
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from dspy_rdf.canonical.model import canonical_datetime

    store = ox.Store()
    dt = ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")

    @settings(max_examples=examples(300), deadline=None)
    @given(
        st.datetimes(min_value=__import__("datetime").datetime(1970, 1, 2), max_value=__import__("datetime").datetime(9998, 12, 30)),
        st.sampled_from(["", "Z", "+00:00", "-00:00", "+02:00", "-05:30", "+14:00"]),
        st.integers(min_value=0, max_value=9),
    )
    def check(moment, offset, digits):
        fraction = f"{moment.microsecond:06d}" + "000"
        text = moment.strftime("%Y-%m-%dT%H:%M:%S") + ("." + fraction[:digits] if digits else "") + offset
        canonical = canonical_datetime(text)
        assert canonical_datetime(canonical) == canonical
        store.clear()
        store.add(ox.Quad(ox.NamedNode("urn:s"), ox.NamedNode("urn:p"), ox.Literal(canonical, datatype=dt)))
        [quad] = list(store)
        assert quad.object.value == canonical  # pyoxigraph keeps it as it is
        padded = canonical.replace("Z", "") if "." not in canonical else canonical  # Virtuoso pads fractions to 6 digits
        if "." in canonical:
            main, _, rest = canonical.partition(".")
            digits_only = rest.rstrip("Z")
            padded = f"{main}.{digits_only.ljust(6, '0')}" + ("Z" if canonical.endswith("Z") else "")
        assert canonical_datetime(padded if "." in canonical else canonical) == canonical
        if offset:
            assert canonical.endswith("Z")

    check()
