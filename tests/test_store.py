"""The store test-suite: the same tests on the embedded store (pyoxigraph on disk) and on a remote SPARQL 1.1
server (a real ``oxigraph serve`` process on 127.0.0.1), plus the CLI over a store."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyoxigraph
import pytest
from conftest import DATA, load

from dspy_rdf.canonical import model as m
from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf import vocab as v
from dspy_rdf.rdf.formats import RdfFormat, parse_traces
from dspy_rdf.rdf.writer import trace_lines
from dspy_rdf.sources.tracejson import trace_from_json
from dspy_rdf.store import EmbeddedStore, StoreError, StoreLockedError, open_store, term_value


def bundled() -> list[m.Trace]:
    return [item.trace for item in read_traces(bundled_traces_path())]


@pytest.fixture(params=["embedded", "remote"])
def store(request, tmp_path):
    if request.param == "embedded":
        opened = EmbeddedStore(tmp_path / "store")
    else:
        opened = request.getfixturevalue("remote_store")
    yield opened
    if request.param == "embedded":
        opened.close()


def sorted_dump(store, traces=None) -> list[str]:
    handle = io.BytesIO()
    store.dump(handle, traces=traces)
    return sorted(handle.getvalue().decode("utf-8").splitlines())


def test_each_trace_is_one_named_graph_named_by_its_iri(store):
    traces = bundled()
    report = store.put(traces)
    iris = [trace_lines(t)[0] for t in traces]
    assert report.written == iris and report.failed == []
    assert store.trace_iris() == sorted(iris)
    for iri, trace in zip(iris, traces):
        [(back_iri, back)] = parse_traces(b"\n".join(line.encode() for line in sorted_dump(store, [iri])) + b"\n", RdfFormat.N_QUADS)
        assert (back_iri, back) == (iri, trace)


def test_exporting_the_same_input_twice_leaves_exactly_the_same_quads(store):
    traces = bundled()
    store.put(traces)
    first = sorted_dump(store)
    again = store.put(traces)
    assert again.written == [] and again.triples == 0
    assert again.already_stored == [trace_lines(t)[0] for t in traces]
    assert sorted_dump(store) == first


def test_a_trace_seen_again_at_another_position_keeps_its_first_graph_whole(store):
    # The IRI is the content hash, but the graph also records where the trace came from (source_index): the trace
    # seen again (from another input, at another position) is the same trace, left as it was stored, with one
    # source_index, never two.
    [trace] = bundled()[:1]
    store.put([dataclasses.replace(trace, source_index=3)])
    again = store.put([dataclasses.replace(trace, source_index=41)])
    assert again.written == [] and len(again.already_stored) == 1
    [(_, back)] = parse_traces("\n".join(sorted_dump(store)).encode() + b"\n", RdfFormat.N_QUADS)
    assert back.source_index == 3
    rows = store.select(f"SELECT ?i WHERE {{ GRAPH ?g {{ ?t <{v.slot_iri('source_index')}> ?i }} }}")["results"]["bindings"]
    assert len(rows) == 1


def walk(obj):
    """Every dataclass object inside ``obj``."""
    import dataclasses

    if dataclasses.is_dataclass(obj):
        yield obj
        for f in dataclasses.fields(obj):
            yield from walk(getattr(obj, f.name))
    elif isinstance(obj, list):
        for item in obj:
            yield from walk(item)


def test_stats_count_what_the_traces_hold(store):
    traces = bundled() + [trace_from_json(load("react_history.json"))]
    store.put(traces)
    entries = sum(len(t.entries) or (1 if t.request or t.response else 0) for t in traces)
    def tool_calls(trace) -> int:  # distinct calls: parts that share a call id are one call
        ids, unnamed = set(), 0
        for part in walk(trace):
            if isinstance(part, m.LMToolCallPart):
                if part.call_id is None:
                    unnamed += 1
                else:
                    ids.add(part.call_id)
        return len(ids) + unnamed

    triples = sum(len(trace_lines(t)[1]) for t in traces)
    responses = [r for t in traces for r in [*(e.response for e in t.entries), t.response] if r is not None]
    with_usage = [r.usage for r in responses if r.usage is not None and (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) != (None, None, None)]
    priced = [r.cost for r in responses if r.cost is not None]
    got = store.stats()
    assert got == {
        "traces": len(traces),
        "lm_calls": entries,
        "tool_calls": sum(map(tool_calls, traces)),
        "tool_executions": 0,
        "tool_results": got["tool_results"],
        "messages": got["messages"],
        "usage_calls": len(with_usage),
        "input_tokens": sum(u.input_tokens or 0 for u in with_usage),
        "output_tokens": sum(u.output_tokens or 0 for u in with_usage),
        "priced_calls": len(priced),
        "cost": pytest.approx(sum(priced)),
        "triples": triples,
        "to_migrate": 0,
        "ledger_uncounted": 0,
    }
    assert store.stats()["tool_results"] == sum(sum(1 for line in trace_lines(t)[1] if "/LMToolResultPart>" in line) for t in traces)


def test_delete_removes_one_trace_and_nothing_else(store):
    traces = bundled()
    store.put(traces)
    gone, kept = trace_lines(traces[0])[0], trace_lines(traces[1])[0]
    before = sorted_dump(store, [kept])
    assert store.delete(gone) is True
    assert store.delete(gone) is False
    assert gone not in store.trace_iris() and len(store.trace_iris()) == len(traces) - 1
    assert sorted_dump(store, [kept]) == before


def test_select_returns_typed_sparql_json(store):
    store.put(bundled())
    results = store.select("SELECT (COUNT(?g) AS ?n) (SUM(?c) AS ?calls) WHERE { GRAPH ?g { ?g <https://w3id.org/lmodel/dspy/lm_call_count> ?c } }")
    [row] = results["results"]["bindings"]
    assert results["head"]["vars"] == ["n", "calls"]
    assert term_value(row["n"]) == 9 and isinstance(term_value(row["calls"]), int)


def test_a_trace_that_cannot_be_stored_is_reported_and_the_others_are_written(store):
    traces = bundled()
    broken = trace_from_json(load("part_text.json"))
    broken.request.messages[0].parts[0].text = "lone surrogate \ud800 here"
    report = store.put([traces[0], broken, traces[1]])
    assert len(report.failed) == 1 and "lone UTF-16 surrogate" in report.failed[0][1]
    assert report.written == [trace_lines(traces[0])[0], trace_lines(traces[1])[0]]
    assert store.trace_iris() == sorted(report.written)


def copies(n: int) -> list[m.Trace]:
    """``n`` distinct copies of every bundled trace (different uuids, so different trace IRIs)."""
    lines = bundled_traces_path().read_text(encoding="utf-8").splitlines()
    return [trace_from_json(_distinct(json.loads(line), copy)) for copy in range(n) for line in lines]


def test_many_batches_are_reported_in_input_order_whichever_writer_finished_first(store):
    traces = copies(12)
    seen = []
    report = store.put(traces, batch_triples=500, progress=seen.append)  # tiny batches: many, committed concurrently
    sizes = dict(_iri_and_size(trace) for trace in traces)  # input order, repeats once
    assert report.written == list(sizes) and sum(seen) == len(sizes) and len(seen) >= 10
    assert report.triples == store.stats()["triples"] == sum(sizes.values())


def test_every_put_commits_on_the_threads_the_store_keeps_until_it_is_closed(store, monkeypatch):
    # RocksDB writes more slowly for every thread that ever wrote to it: a thread per put (as live capture makes, one
    # put per run) made each commit slower than the last. The store keeps its committing threads instead.
    committed_on = []
    write_batch = type(store)._write_batch

    def recording(self, batch, *, bulk):
        committed_on.append(threading.current_thread())
        return write_batch(self, batch, bulk=bulk)

    monkeypatch.setattr(type(store), "_write_batch", recording)
    for trace in copies(6)[:30]:
        store.put([trace])
    threads = set(committed_on)
    assert len(committed_on) >= 20 and len(threads) <= store.writer_threads
    assert all(thread.name.startswith("dspy-rdf-store-writer") for thread in threads)
    if isinstance(store, EmbeddedStore):
        store.close()
        assert not any(thread.is_alive() for thread in threads)


def test_bulk_loaded_and_transactional_batches_store_the_same_quads(tmp_path):
    traces = copies(3)
    with EmbeddedStore(tmp_path / "tx") as by_transaction, EmbeddedStore(tmp_path / "bulk") as by_bulk:
        by_transaction.put(traces, batch_triples=2_000)  # below the bulk loader's threshold: transactions
        by_bulk.put(traces, batch_triples=2_000, bulk=True)
        by_bulk.put(traces[:5], bulk=True)  # replacing stored traces through the bulk loader too
        assert sorted_dump(by_bulk) == sorted_dump(by_transaction)
        assert not list((tmp_path / "bulk").glob("bulk-*.sst"))  # the loader's files were ingested, none left over


def test_a_second_writer_or_a_reader_of_a_store_being_written_gets_a_clear_locked_error(tmp_path, capsys):
    path = tmp_path / "store"
    with EmbeddedStore(path) as first:
        first.put(bundled()[:2])
        with pytest.raises(StoreLockedError, match="is locked"):
            EmbeddedStore(path)
        # pyoxigraph's read-only mode does not support a concurrent writer: readers are told whom to wait for.
        with pytest.raises(StoreLockedError, match=f"being written by process {os.getpid()}"):
            open_store(path, read_only=True)
        reader = subprocess.run(
            [sys.executable, "-m", "dspy_rdf.cli", "stats", "--store", str(path)], capture_output=True, text=True, check=False
        )
        assert reader.returncode == 2 and reader.stderr.count("\n") == 1 and f"process {os.getpid()}" in reader.stderr
        first.put(bundled()[2:4])  # the writer kept its lock: nothing the checks did released it
    with open_store(path, read_only=True) as reader, open_store(path, read_only=True) as another:
        assert len(reader.trace_iris()) == len(another.trace_iris()) == 4


@pytest.mark.slow  # kills exports at many points: 30 s of the default run's budget
@pytest.mark.parametrize("kind", ["embedded", "remote"])
def test_a_killed_export_or_re_export_leaves_no_half_trace_and_loses_nothing(tmp_path, request, kind):
    """SIGKILL an export in the middle of a large load, then SIGKILL a re-export of the same input while it writes
    the rest: every trace stored before each kill is still there, whole; every stored trace is whole exactly once;
    a last rerun completes the store."""
    source = tmp_path / "many.jsonl"
    lines = bundled_traces_path().read_text(encoding="utf-8").splitlines()
    with source.open("w", encoding="utf-8") as handle:
        for copy in range(1000 if kind == "embedded" else 600):  # embedded batches grow to 200k triples, bulk loaded
            for line in lines:
                handle.write(json.dumps(_distinct(json.loads(line), copy)) + "\n")
    if kind == "embedded":
        target = str(tmp_path / "store")

        @contextlib.contextmanager
        def opened(read_only: bool = False):
            with EmbeddedStore(target, read_only=read_only) as store:
                yield store
    else:
        remote = request.getfixturevalue("remote_store")
        target = remote.location

        @contextlib.contextmanager
        def opened(read_only: bool = False):
            yield remote

    def stored_count() -> int | None:
        """The number of stored traces, or None when the store cannot be read at this moment."""
        if kind == "remote":  # one count, cheaper than stats(): the kill must come while the export still writes
            rows = remote.select(f"SELECT (COUNT(?t) AS ?n) WHERE {{ GRAPH ?g {{ ?t a <{v.class_iri('Trace')}> }} }}")
            return int(term_value(rows["results"]["bindings"][0]["n"]))
        if not (tmp_path / "store").exists():
            return 0
        # Only to know when to kill the export: pyoxigraph's read-only mode, which the product refuses while a
        # process writes the store, still answers here most of the time; what is checked is read after the kill.
        with contextlib.suppress(OSError, RuntimeError):
            raw = pyoxigraph.Store.read_only(target)
            return sum(1 for _ in raw.quads_for_pattern(None, pyoxigraph.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type"), pyoxigraph.NamedNode(v.class_iri("Trace"))))
        return None

    def export_killed_after(more_than: int) -> None:
        """Run the export; SIGKILL it once more than ``more_than`` traces are stored. Meanwhile the store never holds
        fewer traces than before it (a stored trace is never removed to be written again)."""
        command = [sys.executable, "-m", "dspy_rdf.cli", "export", str(source), "--store", target]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            count = stored_count()
            if count is not None:
                assert count >= more_than, f"the store held {more_than} traces, then {count} during the export"
                if count > more_than:
                    break
            time.sleep(0.02)
        process.kill()
        process.wait()

    complete = dict(_iri_and_size(item.trace) for item in read_traces(source))

    def whole_traces() -> set[str]:
        """The stored traces, each checked whole: its triple count equals what the writer produces for it."""
        if kind == "remote":
            # A server goes on with a request the killed export had sent: wait until it has stored what it took (the
            # count unchanged for 3 s: a loaded server took over a second to store one request)
            counts, deadline = [remote.stats()["traces"]], time.monotonic() + 120
            while (len(counts) < 7 or len(set(counts[-7:])) > 1) and time.monotonic() < deadline:
                time.sleep(0.5)
                counts.append(remote.stats()["traces"])
        with opened() as store:
            sizes = store.select(
                'SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } FILTER(!STRSTARTS(STR(?g), "urn:dspy-rdf:ledger:")) } GROUP BY ?g'
            )["results"]["bindings"]
            assert len(sizes) == store.stats()["traces"]
            if kind == "embedded":  # a batch and its ledger entry are one load: a kill leaves both or neither
                assert store.ledger_is_current()
        for row in sizes:
            assert term_value(row["n"]) == complete[row["g"]["value"]]
        return {row["g"]["value"] for row in sizes}

    export_killed_after(0)
    first = whole_traces()
    assert 0 < len(first) < len(complete)  # the kill really interrupted the export
    export_killed_after(len(first))  # a re-export of the same input, killed while it writes what is missing
    second = whole_traces()
    assert first <= second and len(second) < len(complete)
    assert main(["export", str(source), "--store", target]) == 0
    if kind == "embedded":  # index files the killed bulk loader built but never ingested are cleaned up
        assert not list((tmp_path / "store").glob("bulk-*.sst"))
    assert whole_traces() == set(complete)
    with opened() as store:
        assert store.stats()["triples"] == sum(complete.values())


def _iri_and_size(trace: m.Trace) -> tuple[str, int]:
    iri, lines = trace_lines(trace)
    return iri, len(lines)


def _distinct(value, copy: int):
    """A copy of a bundled trace that is a different trace (different uuids), so each copy gets its own graph."""
    text = json.dumps(value)
    return json.loads(text.replace('"uuid": "', f'"uuid": "{copy}-'))


def test_cli_export_stats_dump_delete_over_a_store(tmp_path, capsys):
    store = str(tmp_path / "store")
    assert main(["export", str(bundled_traces_path()), "--store", store]) == 0
    assert main(["export", str(DATA / "react_history.json"), "--store", store, "--bulk"]) == 0
    capsys.readouterr()
    assert main(["stats", "--store", store, "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert counts["traces"] == 10
    out = tmp_path / "all.trig"
    assert main(["dump", "--store", store, "-o", str(out)]) == 0
    dumped = parse_traces(out, RdfFormat.TRIG)
    assert len(dumped) == 10
    assert main(["delete", dumped[0][0], "--store", store]) == 0
    assert main(["delete", dumped[0][0], "--store", store]) == 2
    assert main(["stats", "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["traces"] == 9


def test_the_store_defaults_to_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("DSPY_RDF_STORE", str(tmp_path / "from-env"))
    assert main(["export", str(DATA / "react_history.json"), "--store"]) == 0
    assert (tmp_path / "from-env").is_dir()


@pytest.mark.parametrize(
    ("target", "meant"),
    [
        ("HTTP:/127.0.0.1/ds", "http://127.0.0.1/ds"),
        ("http//host/ds", "http://host/ds"),
        ("Https//host/ds", "https://host/ds"),
        ("localhost:7878", "http://localhost:7878"),
        ("127.0.0.1:7878/ds", "http://127.0.0.1:7878/ds"),
    ],
)
def test_a_misspelt_url_or_host_port_is_refused_never_made_a_new_store(tmp_path, monkeypatch, capsys, target, meant):
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(DATA / "part_text.json"), "--store", target]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert f"did you mean {meant}?" in error and f"write ./{target}" in error
    assert list(tmp_path.iterdir()) == []


def test_a_misspelt_url_given_to_a_store_sink_is_refused(tmp_path, monkeypatch):
    from dspy_rdf.capture.recorder import StoreSink

    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=r"did you mean http://127\.0\.0\.1/x\?"):
        StoreSink("HTTP:/127.0.0.1/x", background=False)
    assert list(tmp_path.iterdir()) == []
    for background in (False, True):  # a Path is a directory, whatever its name
        with StoreSink(Path("localhost:7878"), background=background):
            pass
    assert [p.name for p in tmp_path.iterdir()] == ["localhost:7878"]


def test_a_url_lookalike_never_shows_the_credentials_in_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError) as caught:
        open_store("admin:s3cret-pw@localhost:7878")
    assert "s3cret" not in str(caught.value) and "did you mean http://localhost:7878?" in str(caught.value)


def test_a_directory_named_like_a_host_port_is_made_with_dot_slash_and_then_opened_by_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(DATA / "part_text.json"), "--store", "./localhost:7878"]) == 0
    assert main(["stats", "--store", "localhost:7878", "--json"]) == 0  # an existing store is opened as ever
    with open_store("localhost:7878", read_only=True) as opened:
        assert len(opened.trace_iris()) == 1


def test_dump_or_prov_of_a_trace_the_store_does_not_hold_names_it_and_writes_nothing(store):
    from dspy_rdf.interop.prov import write_prov

    iris = store.put(bundled()[:2]).written
    absent = "urn:dspy-rdf:trace:sha256-" + "0" * 64
    for write in (store.dump, lambda handle, traces: write_prov(store, handle, traces=traces)):
        handle = io.BytesIO()
        with pytest.raises(StoreError, match=f"^no trace {absent} in the store at "):
            write(handle, traces=[*iris, absent])
        assert handle.getvalue() == b""
    assert store.missing_traces([iris[0], absent, absent]) == [absent]


def test_a_failed_service_call_on_the_embedded_store_is_named(tmp_path):
    with EmbeddedStore(tmp_path / "store") as opened:
        with pytest.raises(StoreError) as caught:
            opened.select("SELECT * WHERE { SERVICE <http://127.0.0.1:1/sparql> { ?s ?p ?o } }")
    assert str(caught.value).startswith(f"the SERVICE call to <http://127.0.0.1:1/sparql> failed on the store at {tmp_path / 'store'}: ")


@pytest.mark.parametrize("how", ["option", "environment"])
def test_the_demo_refuses_a_misspelt_url_and_a_server_as_its_store(tmp_path, monkeypatch, capsys, how):
    monkeypatch.chdir(tmp_path)
    for target, said in (("localhost:7878", "did you mean http://localhost:7878?"), ("http://127.0.0.1:1/ds", "the demo writes into the embedded store")):
        if how == "option":
            argv = ["demo", "--store", target]
        else:
            monkeypatch.setenv("DSPY_RDF_STORE", target)
            argv = ["demo"]
        assert main(argv) == 2
        assert said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
