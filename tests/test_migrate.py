"""A store written by dspy-rdf 0.1.0 (``tests/data/legacy/store_0_1_0.nq``, made by ``make_legacy_store.py`` with that
revision's code) is brought to this release's keys by ``dspy-rdf migrate``: every trace kept, the duplicates the old
keys let in (two recorders of one run, a store dumped and loaded again) merged, the same IRIs a fresh export gives."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest

from dspy_rdf.analytics.catalog import QueryResult, bind_parameters, get_query, list_queries, run_query
from dspy_rdf.canonical.identity import key_of_iri, trace_iri
from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.formats import RdfFormat, parse_traces, serialize_traces
from dspy_rdf.sources.tracejson import trace_from_json
from dspy_rdf.store import EmbeddedStore, RemoteStore, TraceStore
from dspy_rdf.store.migrate import migrate_store

DATA = Path(__file__).parent / "data"
LEGACY = DATA / "legacy" / "store_0_1_0.nq"


def _legacy_traces() -> list:
    return [trace for _, trace in parse_traces(LEGACY, RdfFormat.N_QUADS)]


def _expected_iris() -> set[str]:
    """What a fresh export of the same executions is named: the runs by their DSPy call ids, the history and the
    MLflow traces exactly as exporting their files today names them."""
    runs = {trace_iri(t) for t in _legacy_traces() if t.source_format == "dspy_callback"}
    files = [DATA / "history_dicts_dspy3.3.1.json", DATA / "mlflow" / "mlflow3_search_page.json"]
    fresh = {trace_iri(item.trace) for path in files for item in read_traces(path)}
    return runs | fresh


def test_the_legacy_store_holds_what_the_old_keys_let_in_twice():
    graphs = {q.graph_name.value for q in ox.parse(LEGACY.read_bytes(), ox.RdfFormat.N_QUADS)}
    assert len(graphs) == 20 and all(key_of_iri(g).startswith("sha256-") for g in graphs)
    assert len({trace_iri(t) for t in _legacy_traces()}) == 7 == len(_expected_iris())


def _fresh_stats(tmp_path: Path) -> dict:
    """The counts of a fresh store of the same executions, each once."""
    unique = {trace_iri(t): t for t in _legacy_traces()}
    with EmbeddedStore(tmp_path / "fresh") as fresh:
        fresh.put(list(unique.values()), redactor=None)
        return fresh.stats()


def _migrated(store: TraceStore, tmp_path: Path) -> None:
    before = store.stats()
    assert before["traces"] == before["to_migrate"] == 20
    dry = migrate_store(store, dry_run=True)
    assert (len(dry.moved), len(dry.merged), dry.current, dry.failed) == (7, 13, 0, [])
    assert len(store.trace_iris()) == 20  # a dry run changes nothing
    report = migrate_store(store)
    assert (len(report.moved), len(report.merged), report.failed) == (7, 13, [])
    assert {new for _, new in report.moved} == set(store.trace_iris()) == _expected_iris()
    # each execution once, as a fresh export holds it (which copy of a duplicate is kept decides only whether it says
    # where in a file it was read: source_index)
    assert {k: v for k, v in store.stats().items() if k != "triples"} == {k: v for k, v in _fresh_stats(tmp_path).items() if k != "triples"}
    again = migrate_store(store)
    assert (again.moved, again.merged, again.current) == ([], [], 7)
    # what the previous release named a module by (its qualified class) is now its class's name and path
    modules = store.select("SELECT DISTINCT ?c ?p WHERE { GRAPH ?g { ?m <https://w3id.org/lmodel/dspy/module_class> ?c . "
                           "OPTIONAL { ?m <https://w3id.org/lmodel/dspy/module_class_path> ?p } } }")
    names = {(b["c"]["value"], b.get("p", {}).get("value")) for b in modules["results"]["bindings"]}
    assert ("ReAct", "dspy.predict.react.ReAct") in names and not any("." in name for name, _ in names)


def test_migrate_brings_an_embedded_store_to_the_new_keys(tmp_path):
    with EmbeddedStore(tmp_path / "store") as store:
        store.oxigraph.load(path=str(LEGACY), format=ox.RdfFormat.N_QUADS)
        _migrated(store, tmp_path)


def test_migrate_brings_a_server_store_to_the_new_keys(remote_store, oxigraph_server, tmp_path):
    httpx.post(f"{oxigraph_server}/store", content=LEGACY.read_bytes(), headers={"content-type": "application/n-quads"}, timeout=60).raise_for_status()
    _migrated(remote_store, tmp_path)


def test_the_migrate_command_says_what_it_did_and_a_second_run_does_nothing(tmp_path, capsys):
    with EmbeddedStore(tmp_path / "store") as store:
        store.oxigraph.load(path=str(LEGACY), format=ox.RdfFormat.N_QUADS)
    assert main(["migrate", "--store", str(tmp_path / "store"), "--dry-run"]) == 0
    assert capsys.readouterr().out.strip().endswith(
        "20 graph(s) examined; 7 trace(s) would be moved to their new IRIs, 13 duplicate(s) would be merged into the trace they repeat, 0 would be given this release's derived facts, 0 would be given them in place from their own triples, 0 already current, the ledger would be brought up to date"
    )
    assert main(["migrate", "--store", str(tmp_path / "store"), "-v"]) == 0
    out = capsys.readouterr().out
    assert out.count("\nmoved ") + out.startswith("moved ") == 7 and out.count("merged urn:") == 13
    assert out.strip().endswith("0 already current, 7 trace(s) counted into a new ledger")
    assert main(["migrate", "--store", str(tmp_path / "store")]) == 0
    assert capsys.readouterr().out.strip().endswith("7 graph(s) examined; 0 trace(s) moved to their new IRIs, 0 duplicate(s) merged into the trace they repeat, 0 given this release's derived facts, 0 given them in place from their own triples, 7 already current")


def test_a_migration_stopped_between_writing_and_removing_is_finished_by_the_next(tmp_path, monkeypatch):
    with EmbeddedStore(tmp_path / "store") as store:
        store.oxigraph.load(path=str(LEGACY), format=ox.RdfFormat.N_QUADS)
        deleted: list[str] = []
        real_delete = type(store).delete

        def delete_then_stop(self, iri):
            if deleted:
                raise KeyboardInterrupt
            deleted.append(iri)
            return real_delete(self, iri)

        monkeypatch.setattr(type(store), "delete", delete_then_stop)
        with pytest.raises(KeyboardInterrupt):
            migrate_store(store)
        monkeypatch.setattr(type(store), "delete", real_delete)
        assert len(store.trace_iris()) == 21  # one moved and its old graph removed; the next written, not yet removed
        report = migrate_store(store)
        assert len(report.moved) + len(report.merged) == 19 and not report.failed
        assert set(store.trace_iris()) == _expected_iris()


@pytest.mark.slow
def test_migrate_brings_a_virtuoso_store_to_the_new_keys(virtuoso_store, tmp_path):
    graphs: dict[str, list[str]] = {}
    for quad in ox.parse(LEGACY.read_bytes(), ox.RdfFormat.N_QUADS):
        graphs.setdefault(quad.graph_name.value, []).append(f"{quad.subject} {quad.predicate} {quad.object} .")
    for name, triples in graphs.items():  # as dspy-rdf 0.1.0 wrote them, graph by graph
        virtuoso_store.update(f"INSERT DATA {{ GRAPH <{name}> {{ {' '.join(triples)} }} }}")
    _migrated(virtuoso_store, tmp_path)



# --- traces written with the derived facts of an earlier version ---------------------------------------------

_EXCEPTION_FACTS = ("derived_facts_version", "refusal_count", "unanswered_tool_call_parts", "orphan_tool_result_parts",
                    "unoffered_tool_call_parts", "duplicate_call_id_parts", "order_key", "unanswered_tools")  # fmt: skip
_EXCEPTION_QUERIES = ("refusal_traces", "unanswered_tool_calls", "orphan_tool_results", "tool_calls_not_offered", "duplicate_tool_call_ids")
RAW_QUERIES = DATA / "raw_queries"

# One LM call with one of each exception: a call to a tool the request does not offer, two calls sharing an id in
# one message, a call nothing answers, a result that answers no call, and a refusal.
_EXCEPTIONAL_CALL = {
    "request": {
        "model": "openai/gpt-4o-mini",
        "tools": [{"name": "search"}],
        "messages": [
            {"role": "assistant", "parts": [{"type": "tool_call", "name": "search", "id": "c1"}, {"type": "tool_call", "name": "search", "id": "c1"}]},
            {"role": "tool", "parts": [{"type": "tool_result", "call_id": "c1", "content": [{"type": "text", "text": "found"}]},
                                       {"type": "tool_result", "call_id": "gone", "content": [{"type": "text", "text": "late"}]}]},
        ],
    },
    "response": {"outputs": [{"parts": [{"type": "tool_call", "name": "delete_everything", "id": "c2"}, {"type": "refusal", "text": "I cannot."}]}]},
    "timestamp": "2025-01-31T12:00:00Z",
    "uuid": "6f1c2f0e-0d5e-4b8e-9a57-2b6f1f1f0001",
}  # fmt: skip


def _traces() -> list:
    traces = [item.trace for item in read_traces(bundled_traces_path())]
    return [*traces, trace_from_json(_EXCEPTIONAL_CALL, source_format="dspy33")]


def _as_written_before_exception_facts(traces: list) -> bytes:
    """The traces as the release before the exception facts wrote them: this release's N-Quads without them."""
    lines = serialize_traces(traces, RdfFormat.N_QUADS).splitlines(keepends=True)
    return b"".join(line for line in lines if not any(f"/dspy/{fact}>".encode() in line for fact in _EXCEPTION_FACTS))


def _canned_and_raw(store: TraceStore, name: str) -> tuple[list, list]:
    raw = dataclasses.replace(get_query(name), text=(RAW_QUERIES / f"{name}.rq").read_text(encoding="utf-8"))
    canned = run_query(store, name, {"limit": "100000"}).rows
    return canned, QueryResult.from_json(store.select(bind_parameters(raw, {"limit": "100000"}))).rows


def _facts_brought_up_to_date(store: TraceStore, tmp_path: Path) -> None:
    traces = _traces()
    before = store.stats()
    assert before["traces"] == before["to_migrate"] == len(traces)
    # the queries that start from the exception facts find nothing in those traces until they have them
    for name in _EXCEPTION_QUERIES:
        canned, raw = _canned_and_raw(store, name)
        assert raw and canned == [], name
    dry = migrate_store(store, dry_run=True)
    assert (len(dry.refreshed), dry.moved, dry.merged, dry.current, dry.failed) == (len(traces), [], [], 0, [])
    assert store.stats()["to_migrate"] == len(traces)  # a dry run changes nothing
    report = migrate_store(store)
    assert (sorted(report.refreshed), report.failed) == (sorted(trace_iri(t) for t in traces), [])
    for name in _EXCEPTION_QUERIES:
        canned, raw = _canned_and_raw(store, name)
        assert canned == raw, name
    # the graphs hold what a fresh export writes, each triple once
    with EmbeddedStore(tmp_path / "fresh") as fresh:
        fresh.put(traces, redactor=None)
        assert store.stats() == fresh.stats()
    again = migrate_store(store)
    assert (again.refreshed, again.current) == ([], len(traces))


def _insert_graph_by_graph(store: RemoteStore, data: bytes) -> None:
    """Write N-Quads into a server's graphs by SPARQL updates (Virtuoso takes no N-Quads POST), as an earlier release wrote them."""
    graphs: dict[str, list[str]] = {}
    for quad in ox.parse(data, ox.RdfFormat.N_QUADS):
        graphs.setdefault(quad.graph_name.value, []).append(f"{quad.subject} {quad.predicate} {quad.object} .")
    for name, triples in graphs.items():
        store.update(f"INSERT DATA {{ GRAPH <{name}> {{ {' '.join(triples)} }} }}")


def test_migrate_gives_an_embedded_store_the_derived_facts_it_lacks(tmp_path, monkeypatch):
    monkeypatch.setattr("dspy_rdf.store.migrate._REFRESH_BATCH", 3)  # several writes of a few traces each
    with EmbeddedStore(tmp_path / "store") as store:
        store.oxigraph.load(_as_written_before_exception_facts(_traces()), format=ox.RdfFormat.N_QUADS)
        _facts_brought_up_to_date(store, tmp_path)


def test_migrate_gives_a_server_store_the_derived_facts_it_lacks(remote_store, oxigraph_server, tmp_path):
    data = _as_written_before_exception_facts(_traces())
    httpx.post(f"{oxigraph_server}/store", content=data, headers={"content-type": "application/n-quads"}, timeout=60).raise_for_status()
    _facts_brought_up_to_date(remote_store, tmp_path)


def test_migrate_gives_a_virtuoso_store_the_derived_facts_it_lacks(virtuoso_store, tmp_path):
    _insert_graph_by_graph(virtuoso_store, _as_written_before_exception_facts(_traces()))
    _facts_brought_up_to_date(virtuoso_store, tmp_path)


def _bumped_and_migrated(store: TraceStore, monkeypatch) -> None:
    """A release whose derived facts have a higher version finds every trace outdated, and migrate leaves each trace
    with that one version."""
    from dspy_rdf.rdf.writer import DERIVED_FACTS_VERSION

    later = DERIVED_FACTS_VERSION + 1
    traces = _traces()
    store.put(traces)
    for module in ("dspy_rdf.rdf.writer", "dspy_rdf.store.base"):
        monkeypatch.setattr(f"{module}.DERIVED_FACTS_VERSION", later)
    assert store.stats()["to_migrate"] == len(traces)
    report = migrate_store(store)
    assert (len(report.refreshed), report.failed) == (len(traces), [])
    rows = store.select("SELECT ?g ?v WHERE { GRAPH ?g { ?g <https://w3id.org/lmodel/dspy/derived_facts_version> ?v } }")
    versions = [(b["g"]["value"], b["v"]["value"]) for b in rows["results"]["bindings"]]
    assert sorted(versions) == sorted((trace_iri(t), str(later)) for t in traces)
    # the traces gained triples the ledger's stats counts did not know: read again from the triples, not trace by trace
    assert report.ledger_upgraded == len(traces) and report.ledger_traces is None
    assert store.ledger_is_current() and store.stats() == store.stats(from_triples=True)
    assert store.stats()["to_migrate"] == 0


def test_a_later_version_of_the_derived_facts_replaces_the_version_of_an_embedded_store(tmp_path, monkeypatch):
    with EmbeddedStore(tmp_path / "store") as store:
        _bumped_and_migrated(store, monkeypatch)


def test_a_later_version_of_the_derived_facts_replaces_the_version_of_a_server_store(remote_store, monkeypatch):
    _bumped_and_migrated(remote_store, monkeypatch)


def test_a_later_version_of_the_derived_facts_replaces_the_version_of_a_virtuoso_store(virtuoso_store, monkeypatch):
    _bumped_and_migrated(virtuoso_store, monkeypatch)


# --- the ledger on servers: removals take figures out, migrate counts a store the ledger does not cover ---------

LEDGER_QUERIES = [query for query in list_queries() if query.scan is not None]


def _params(query) -> dict[str, str]:
    """DSPy's own tools shown too, where the query can leave them out."""
    return {"framework_tools": "1"} if any(p.name == "framework_tools" for p in query.parameters) else {}


def _ledger_answers_equal_the_triples(store: TraceStore) -> None:
    for query in LEDGER_QUERIES:
        assert query.scan is not None
        params = _params(query)
        triples = QueryResult.from_json(store.select(bind_parameters(dataclasses.replace(query, text=query.scan), params)))
        # the bundled traces call every tool they offer, get no tool result, and hold no program run
        assert triples.rows or query.name in ("tools_offered_never_called", "tool_error_rate", "lm_calls_per_module", "slowest_tool_executions", "tool_latency_per_tool"), query.name
        assert run_query(store, query.name, params).rows == triples.rows, query.name
    assert store.stats() == store.stats(from_triples=True)


def _ledger_follows_removals_and_migrate(store: TraceStore) -> None:
    from dspy_rdf.canonical.identity import DEFAULT_BASE
    from dspy_rdf.store.base import encode_traces

    traces = _traces()
    written = store.put(traces[: len(traces) // 2]).written
    for iri in written[::3]:
        assert store.delete(iri)
    assert store.ledger_is_current()
    _ledger_answers_equal_the_triples(store)
    # traces written without their figures: the queries read the triples until migrate counts every trace
    store.put(dataclasses.replace(item, figures=None) for item in encode_traces(traces[len(traces) // 2 :], base=DEFAULT_BASE) if not isinstance(item, tuple))
    assert not store.ledger_is_current()
    _ledger_answers_equal_the_triples(store)
    assert migrate_store(store).ledger_traces == len(store.trace_iris())
    assert store.ledger_is_current() and len(store.ledger_entries()) == 1
    _ledger_answers_equal_the_triples(store)


def test_the_ledger_of_an_oxigraph_server_follows_removals_and_migrate(remote_store):
    _ledger_follows_removals_and_migrate(remote_store)


def test_the_ledger_of_a_virtuoso_store_follows_removals_and_migrate(virtuoso_store):
    _ledger_follows_removals_and_migrate(virtuoso_store)


def _written_by_an_earlier_release(store: TraceStore, traces: list, monkeypatch, version: int, *, mixed: bool = False) -> None:
    """Put ``traces`` as an earlier release whose ledger (``version``) kept every figure but the ``argument`` figure
    (versions 2 and 3), the counts ``stats`` shows (version 2) and the ``tool_range`` keys of the duration buckets;
    ``mixed``: the second half put by this release afterwards (an upgrade of the package, then new traces, before
    ``migrate``)."""
    from dspy_rdf.store import ledger as ledger_module

    dropped = ({"argument"} if version in ledger_module.WITHOUT_ARGUMENTS else set()) | ({"stats"} if version in ledger_module.WITHOUT_STATS else set())
    counting = ledger_module.Ledger.add

    def add_as_earlier(self, figures, sign=1):
        counting(self, figures, sign)
        for key in [key for key in self.rows if key[0] in dropped]:
            del self.rows[key]

    half = len(traces) // 2
    with monkeypatch.context() as earlier:
        earlier.setattr(ledger_module, "LEDGER_VERSION", version)
        earlier.setattr(ledger_module, "TOOL_RANGE_KEYED", frozenset())
        earlier.setattr(ledger_module.Ledger, "add", add_as_earlier)
        written = store.put(traces[:half]).written
        if not mixed:
            store.put(traces[half:])
        assert store.delete(written[0])
    if mixed:
        store.put(traces[half:])


def _timed_runs() -> list:
    """Program runs whose tools ran for durations in several ranges of buckets (the bundled traces hold none): what
    the ledger's rows of duration buckets, and ``tool_latency_per_tool``'s percentiles, count."""
    from datetime import datetime, timedelta

    from dspy_rdf.canonical import model as m

    start = datetime.fromisoformat("2034-01-01T00:00:00+00:00")
    latencies = {"search": [0.0123, 0.0125, 0.4, 0.41, 2.5, 2.51, 37.0], "lookup": [0.0125, 0.9, 1.0, 12.0]}
    return [
        m.Trace(source_kind="program_run", source_format="dspy_callback", started_at=(start + timedelta(days=run)).isoformat(), calls=[
            m.ToolExecution(tool_call=m.ToolCall(name=tool), started_at=start.isoformat(), ended_at=(start + timedelta(seconds=seconds)).isoformat())
            for tool, values in latencies.items() for seconds in values[run::2]
        ])
        for run in range(2)
    ]  # fmt: skip


def _earlier_ledger_upgraded_from_the_triples(store: TraceStore, monkeypatch, version: int, mixed: bool) -> None:
    traces = [*_traces(), *_timed_runs()]
    _written_by_an_earlier_release(store, traces, monkeypatch, version, mixed=mixed)
    assert not store.ledger_is_current()  # its entries lack figures: queries and stats read the triples
    counts = store.stats()
    assert counts["ledger_uncounted"] == counts["traces"] == len(store.trace_iris())
    answers = {query.name: run_query(store, query.name, _params(query)).rows for query in LEDGER_QUERIES}
    assert answers["tool_argument_frequency"] and answers["tool_calls_per_tool"]
    assert {row[0] for row in answers["tool_latency_per_tool"] if row[5] is not None} == {"search", "lookup"}  # percentiles
    report = migrate_store(store, ledger_progress=lambda n: pytest.fail("a trace was read back: the upgrade reads the triples"))
    assert report.ledger_upgraded == counts["traces"] and report.ledger_traces is None
    assert store.ledger_is_current() and len(store.ledger_entries()) == 1
    ledger = "urn:dspy-rdf:ledger:"
    keyed = store.select(f"SELECT (COUNT(?row) AS ?rows) (COUNT(?key) AS ?keys) WHERE {{ GRAPH ?g {{ {{ ?row <{ledger}latency_tool> ?t }} UNION {{ ?row <{ledger}range_tool> ?t }} OPTIONAL {{ ?row <{ledger}tool_range> ?key }} }} }}")
    rows, keys = (int(keyed["results"]["bindings"][0][name]["value"]) for name in ("rows", "keys"))
    assert rows == keys > 0  # every row of a tool's duration buckets carries its range's key
    assert store.stats() == {**counts, "ledger_uncounted": 0} == store.stats(from_triples=True)
    assert {query.name: run_query(store, query.name, _params(query)).rows for query in LEDGER_QUERIES} == answers
    _ledger_answers_equal_the_triples(store)
    assert migrate_store(store).ledger_upgraded is None  # current: nothing to do


@pytest.mark.parametrize(
    ("kind", "version", "mixed"),
    [("embedded", 2, False), ("embedded", 3, False), ("embedded", 4, False), ("embedded", 2, True), ("embedded", 3, True), ("embedded", 4, True),
     ("remote_store", 3, False), ("remote_store", 4, False), ("virtuoso_store", 2, False)],
)
def test_migrate_upgrades_an_earlier_ledger_from_the_triples(kind, version, mixed, request, tmp_path, monkeypatch):
    """A ledger of an earlier release (versions 2 and 3: every figure but each tool's calls by arguments, and for
    version 2 the counts ``stats`` reads; version 4: without the keys of the tools' ranges of duration buckets)
    covering every trace, alone or beside entries this release wrote, gains those figures from a few queries over the
    triples and its own sums: no trace is read back, and every answer stays as it was, on every store kind."""
    if kind == "embedded":
        with EmbeddedStore(tmp_path / "db") as store:
            _earlier_ledger_upgraded_from_the_triples(store, monkeypatch, version, mixed)
    else:
        _earlier_ledger_upgraded_from_the_triples(request.getfixturevalue(kind), monkeypatch, version, mixed)


def test_an_upgrade_finding_more_distinct_arguments_than_the_ledger_keeps_keeps_none_saying_so(tmp_path, monkeypatch):
    """An earlier ledger upgraded where the store holds more distinct tool arguments than an entry keeps: the new
    entry keeps none of them and says so, the arguments query reads the triples, and every other query the ledger."""
    from dspy_rdf.store import ledger as ledger_module

    with EmbeddedStore(tmp_path / "db") as store:
        _written_by_an_earlier_release(store, _traces(), monkeypatch, 3)
        monkeypatch.setattr(ledger_module, "ARGUMENT_ROWS_KEPT", 1)
        answers = {query.name: run_query(store, query.name, _params(query)).rows for query in LEDGER_QUERIES}
        assert len(answers["tool_argument_frequency"]) > 1
        assert migrate_store(store, ledger_progress=lambda n: pytest.fail("a trace was read back")).ledger_upgraded
        assert store.ledger_is_current() and not store.ledger_is_current(arguments=True)
        assert {query.name: run_query(store, query.name, _params(query)).rows for query in LEDGER_QUERIES} == answers


def test_an_earlier_ledger_that_does_not_cover_every_trace_is_counted_again(tmp_path, monkeypatch):
    """An earlier release's ledger short of a trace cannot be upgraded from its sums: migrate counts every trace."""
    from dspy_rdf.canonical.identity import DEFAULT_BASE
    from dspy_rdf.store.base import encode_traces

    traces = _traces()
    with EmbeddedStore(tmp_path / "db") as store:
        _written_by_an_earlier_release(store, traces[:-1], monkeypatch, 2)
        store.put(dataclasses.replace(item, figures=None) for item in encode_traces(traces[-1:], base=DEFAULT_BASE) if not isinstance(item, tuple))
        report = migrate_store(store)
        assert report.ledger_upgraded is None and report.ledger_traces == len(store.trace_iris())
        assert store.ledger_is_current() and store.stats() == store.stats(from_triples=True)


# --- traces of the version before: given this release's facts in place ------------------------------------------

_VERSION_4_FACTS = ("order_key", "unanswered_tools")


def _as_written_with_facts_version_3(traces: list) -> bytes:
    """The traces as the release of derived facts version 3 wrote them: this release's N-Quads without version 4's facts."""
    lines = serialize_traces(traces, RdfFormat.N_QUADS).splitlines(keepends=True)
    kept = [line for line in lines if not any(f"/dspy/{fact}>".encode() in line for fact in _VERSION_4_FACTS)]
    version = b"/dspy/derived_facts_version> "
    return b"".join(line.replace(version + b'"4"', version + b'"3"') for line in kept)


def _facts_added_in_place(store: TraceStore, tmp_path: Path) -> None:
    traces = _traces()
    assert store.stats(from_triples=True)["to_migrate"] == len(traces)
    dry = migrate_store(store, dry_run=True)
    assert (len(dry.upgraded), dry.refreshed, dry.current, dry.failed) == (len(traces), [], 0, [])
    assert store.stats(from_triples=True)["to_migrate"] == len(traces)  # a dry run changes nothing
    report = migrate_store(store)
    assert (sorted(report.upgraded), report.refreshed, report.moved, report.failed) == (sorted(trace_iri(t) for t in traces), [], [], [])
    assert report.examined == len(traces)
    for name in _EXCEPTION_QUERIES:
        canned, raw = _canned_and_raw(store, name)
        assert canned == raw, name
    with EmbeddedStore(tmp_path / "fresh") as fresh:
        fresh.put(traces, redactor=None)
        assert store.stats() == fresh.stats() and store.ledger_is_current()
        for name in ("unanswered_tool_calls", "refusal_traces", "longest_conversations", "orphan_tool_results"):
            assert run_query(store, name, {}).rows == run_query(fresh, name, {}).rows, name
        if isinstance(store, EmbeddedStore):  # every triple as this release writes it
            assert set(store.oxigraph.quads_for_pattern(None, None, None, None)) - _ledger_quads(store) == set(fresh.oxigraph.quads_for_pattern(None, None, None, None)) - _ledger_quads(fresh)
    again = migrate_store(store)
    assert (again.upgraded, again.refreshed, again.current) == ([], [], len(traces))


def _ledger_quads(store: EmbeddedStore) -> set:
    return {quad for quad in store.oxigraph.quads_for_pattern(None, None, None, None) if not quad.graph_name.value.startswith("urn:dspy-rdf:trace:")}


@contextmanager
def _store_holding(kind: str, data: bytes, request, tmp_path: Path) -> Iterator[TraceStore]:
    """A store of ``kind`` holding the N-Quads ``data``, written as an earlier release wrote them (no ledger)."""
    if kind == "embedded":
        with EmbeddedStore(tmp_path / "store") as store:
            store.oxigraph.load(data, format=ox.RdfFormat.N_QUADS)
            yield store
    elif kind == "oxigraph":
        remote = request.getfixturevalue("remote_store")  # emptied first
        server = request.getfixturevalue("oxigraph_server")
        httpx.post(f"{server}/store", content=data, headers={"content-type": "application/n-quads"}, timeout=60).raise_for_status()
        yield remote
    else:
        store = request.getfixturevalue("virtuoso_store")
        _insert_graph_by_graph(store, data)
        yield store


@pytest.mark.parametrize("kind", ["embedded", "oxigraph", "virtuoso"])
def test_migrate_gives_a_store_of_the_version_before_its_facts_in_place(kind, request, tmp_path, monkeypatch):
    monkeypatch.setattr("dspy_rdf.store.migrate._IN_PLACE_BATCH", 2)  # several updates of a few traces each
    with _store_holding(kind, _as_written_with_facts_version_3(_traces()), request, tmp_path) as store:
        _facts_added_in_place(store, tmp_path)


def test_a_trace_of_a_version_no_update_reaches_is_written_again(tmp_path, monkeypatch):
    """Traces of version 3 when this release's facts are of a version no update of version 4 leads to: written again."""
    with EmbeddedStore(tmp_path / "store") as store:
        store.oxigraph.load(_as_written_with_facts_version_3(_traces()), format=ox.RdfFormat.N_QUADS)
        for module in ("dspy_rdf.rdf.writer", "dspy_rdf.store.base"):
            monkeypatch.setattr(f"{module}.DERIVED_FACTS_VERSION", 5)
        report = migrate_store(store)
        assert (report.upgraded, len(report.refreshed), report.failed) == ([], len(_traces()), [])


@pytest.mark.parametrize("kind", ["embedded", "oxigraph"])
def test_counts_marked_stale_again_after_a_migration_are_counted_again(kind, request, tmp_path):
    """The marker that says the ledger's counts are stale has one graph name: a sum that counted the traces again
    names it among the entries it replaces, and a marker written later (the next release's migration) must still
    make the next migration count them, not be taken for an entry left over from that sum."""
    store = EmbeddedStore(tmp_path / "store") if kind == "embedded" else request.getfixturevalue("remote_store")
    with store:
        traces = _traces()
        store.put(traces)
        for _ in range(2):
            store.refresh([])  # what writing traces again, or adding facts in place, writes first
            assert not store.ledger_is_current()
            assert store.upgrade_ledger() == len(traces)
            assert store.ledger_is_current() and store.stats() == store.stats(from_triples=True)


# --- a store not yet migrated: every answer says how many traces it may leave out ------------------------------


def _as_the_release_before_wrote(store: TraceStore, traces: list, monkeypatch) -> None:
    """Put ``traces`` as the release of derived facts version 3 did: its ledger counts them under version 3, and
    their graphs lack version 4's facts."""
    with monkeypatch.context() as before:
        for module in ("dspy_rdf.rdf.writer", "dspy_rdf.store.ledger"):
            before.setattr(f"{module}.DERIVED_FACTS_VERSION", 3)
        store.put(traces)
    for fact in _VERSION_4_FACTS:
        update = f"DELETE WHERE {{ GRAPH ?g {{ ?g <https://w3id.org/lmodel/dspy/{fact}> ?value }} }}"
        store.oxigraph.update(update) if isinstance(store, EmbeddedStore) else store.update(update)


@contextmanager
def _no_count_over_the_triples(store: TraceStore) -> Iterator[None]:
    """Fail on any query that counts the traces to migrate over the triples."""
    select = store.select

    def checked(query: str, *args, **kwargs):
        assert "derived_facts_version" not in query, "counted over the triples"
        return select(query, *args, **kwargs)

    store.select = checked  # type: ignore[method-assign]
    try:
        yield
    finally:
        del store.select


def _every_answer_says_how_many_to_migrate(opened, location: str, tmp_path: Path, capsys) -> None:
    """``opened()``: the store, open until the block ends (the CLI and MCP open it on their own in between: an
    embedded store takes one writer at a time)."""
    from dspy_rdf.analytics.report import write_report
    from dspy_rdf.service.mcp import StoreTools

    traces, tools = _traces(), StoreTools(store=location)
    warning = f"{len(traces)} traces of this store were written by an earlier release"
    with opened() as store:
        assert store.ledger_is_current()  # the release before's ledger covers every trace
        assert store.traces_to_migrate() == store.stats(from_triples=True)["to_migrate"] == len(traces)
        assert store.traces_to_migrate(ledger_covers=False) == len(traces)
        with _no_count_over_the_triples(store):  # the ledger's counts, not a scan
            assert store.traces_to_migrate() == store.traces_to_migrate(ledger_covers=True) == len(traces)
            assert run_query(store, "refusal_traces").to_migrate == run_query(store, "tool_calls_per_tool").to_migrate == len(traces)
        # what a store of the release before answers: no rows, for lack of the facts this release's queries read
        assert run_query(store, "unanswered_tool_calls").rows == []
        for query in list_queries():
            result = run_query(store, query.name, _params(query))
            assert result.to_migrate == len(traces), query.name
            assert warning in (result.migrate_warning(location) or ""), query.name
        assert run_query(store, "SELECT * WHERE { ?s ?p ?o } LIMIT 1").to_migrate == len(traces)
        assert "written by an earlier release" in write_report(store, tmp_path / "report").read_text(encoding="utf-8")
    assert main(["query", "unanswered_tool_calls", "--store", location]) == 0
    err = capsys.readouterr().err
    assert f"warning: {warning}" in err and f"dspy-rdf migrate --store {location}" in err
    assert main(["report", "--store", location, "--out", str(tmp_path / "report")]) == 0
    assert f"warning: {warning} of dspy-rdf and may be missing from the report's sections" in capsys.readouterr().err
    assert "dspy-rdf migrate" in tools.run_query("refusal_traces")["warning"]
    assert "dspy-rdf migrate" in tools.run_sparql("SELECT ?g WHERE { GRAPH ?g { ?g a <https://w3id.org/lmodel/dspy/Trace> } }")["warning"]

    with opened() as store:
        migrate_store(store)
        assert store.traces_to_migrate() == store.traces_to_migrate(ledger_covers=False) == 0
        assert run_query(store, "unanswered_tool_calls").rows != []
        for query in list_queries():
            result = run_query(store, query.name, _params(query))
            assert (result.to_migrate, result.migrate_warning(location)) == (0, None), query.name
        assert "written by an earlier release" not in write_report(store, tmp_path / "report").read_text(encoding="utf-8")
    assert main(["query", "unanswered_tool_calls", "--store", location]) == 0
    assert main(["report", "--store", location, "--out", str(tmp_path / "report")]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "warning" not in tools.run_query("refusal_traces") and "warning" not in tools.run_sparql("SELECT * WHERE { ?s ?p ?o } LIMIT 1")


@pytest.mark.parametrize("kind", ["embedded", pytest.param("oxigraph", marks=pytest.mark.slow)])
def test_every_answer_of_a_store_of_the_release_before_says_how_many_traces_to_migrate(kind, request, tmp_path, monkeypatch, capsys):
    """A store of the release before, its ledger current: the queries that read this release's derived facts find
    nothing in its traces until they are migrated; every answer (API, CLI, MCP, report) says so, counted from the
    ledger, and says nothing once ``migrate`` has run."""
    if kind == "embedded":
        path = tmp_path / "store"
        with EmbeddedStore(path) as store:
            _as_the_release_before_wrote(store, _traces(), monkeypatch)
        _every_answer_says_how_many_to_migrate(lambda: EmbeddedStore(path), str(path), tmp_path, capsys)
    else:
        store = request.getfixturevalue("remote_store")
        _as_the_release_before_wrote(store, _traces(), monkeypatch)
        _every_answer_says_how_many_to_migrate(lambda: contextlib.nullcontext(store), request.getfixturevalue("oxigraph_server"), tmp_path, capsys)


def test_a_store_of_the_release_before_without_a_ledger_is_counted_from_its_triples(tmp_path, capsys):
    """Traces of the release before loaded without a ledger (a dump bulk-loaded): counted over the triples."""
    path = tmp_path / "store"
    with EmbeddedStore(path) as store:
        store.oxigraph.load(_as_written_with_facts_version_3(_traces()), format=ox.RdfFormat.N_QUADS)
        assert not store.ledger_entries()
        assert store.traces_to_migrate() == len(_traces())
        assert run_query(store, "tool_calls_per_tool").to_migrate == run_query(store, "refusal_traces").to_migrate == len(_traces())
    assert main(["query", "refusal_traces", "--store", str(path)]) == 0
    assert f"warning: {len(_traces())} traces of this store" in capsys.readouterr().err


def test_traces_of_the_release_before_that_the_ledger_does_not_count_are_counted_too(tmp_path, monkeypatch):
    """Half the traces put by the release before (its ledger counts them), the other half loaded without a ledger
    (a dump loaded by other means): the ledger does not cover the store, so every trace is counted over the triples."""
    traces = _traces()
    half = len(traces) // 2
    with EmbeddedStore(tmp_path / "store") as store:
        _as_the_release_before_wrote(store, traces[:half], monkeypatch)
        store.oxigraph.load(_as_written_with_facts_version_3(traces[half:]), format=ox.RdfFormat.N_QUADS)
        assert not store.ledger_is_current()
        assert store.traces_to_migrate() == run_query(store, "refusal_traces").to_migrate == len(traces)
        assert run_query(store, "tool_calls_per_tool").to_migrate == len(traces)


def test_a_store_that_cannot_count_the_traces_to_migrate_still_answers(tmp_path, monkeypatch):
    from dspy_rdf.store import StoreError

    with EmbeddedStore(tmp_path / "store") as store:
        _as_the_release_before_wrote(store, _traces(), monkeypatch)

        def fails(*args, **kwargs):
            raise StoreError("the server went away")

        monkeypatch.setattr(store, "traces_to_migrate", fails)
        result = run_query(store, "tool_calls_per_tool")
        assert result.rows and result.to_migrate == 0 and result.migrate_warning() is None
