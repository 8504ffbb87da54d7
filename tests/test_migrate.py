"""A store written by dspy-rdf 0.1.0 (``tests/data/legacy/store_0_1_0.nq``, made by ``make_legacy_store.py`` with that
revision's code) is brought to this release's keys by ``dspy-rdf migrate``: every trace kept, the duplicates the old
keys let in (two recorders of one run, a store dumped and loaded again) merged, the same IRIs a fresh export gives."""

from __future__ import annotations

from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest

from dspy_rdf.canonical.identity import key_of_iri, trace_iri
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.formats import RdfFormat, parse_traces
from dspy_rdf.store import EmbeddedStore, TraceStore
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
        "20 graph(s) examined; 7 trace(s) would be moved to their new IRIs, 13 duplicate(s) would be merged into the trace they repeat, 0 already current"
    )
    assert main(["migrate", "--store", str(tmp_path / "store"), "-v"]) == 0
    out = capsys.readouterr().out
    assert out.count("\nmoved ") + out.startswith("moved ") == 7 and out.count("merged urn:") == 13
    assert main(["migrate", "--store", str(tmp_path / "store")]) == 0
    assert capsys.readouterr().out.strip().endswith("7 graph(s) examined; 0 trace(s) moved to their new IRIs, 0 duplicate(s) merged into the trace they repeat, 7 already current")


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
