"""A load into a store that was stopped starts again where it stood: ``read_traces(start=...)`` reads a JSON Lines file
from any resume point exactly as a whole read goes on from there, ``put(settled=...)`` says in order which traces
are done with, and ``export --store`` keeps a journal beside the store, so that an export killed midway, run again,
reads only what was not stored and leaves the store exactly as one whole export does."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DATA

from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.journal import journal_path
from dspy_rdf.store.embedded import EmbeddedStore

ROOT = Path(__file__).resolve().parents[1]
JSONL_FIXTURES = sorted(p for p in (*DATA.rglob("*.jsonl"), ROOT / "src" / "dspy_rdf" / "examples" / "dspy33_traces.jsonl"))


def _mixed(tmp_path: Path) -> Path:
    """A JSON Lines file of every kind of line: traces of three formats, an OTLP trace spread over lines, blank lines,
    lines that are not JSON, a key given twice, a byte order mark."""
    lines = [b"\xef\xbb\xbf" + (ROOT / "src/dspy_rdf/examples/dspy33_traces.jsonl").read_bytes().splitlines()[0]]
    lines += [b"", b"{not json", b'{"a": 1, "a": 2}']
    lines += (DATA / "crosspath" / "mlflow3_traces.jsonl").read_bytes().splitlines()
    lines += (DATA / "otlp" / "openinference_dspy331_batches.jsonl").read_bytes().splitlines()
    lines += (ROOT / "src/dspy_rdf/examples/dspy33_traces.jsonl").read_bytes().splitlines()[1:]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _shown(item) -> tuple:
    return (item.source, item.line, item.trace, str(item.error) if item.error else None)


@pytest.mark.parametrize("path", [*JSONL_FIXTURES, "mixed"], ids=lambda p: p if isinstance(p, str) else p.name)
def test_reading_from_every_resume_point_goes_on_exactly_as_the_whole_read(path, tmp_path):
    path = _mixed(tmp_path) if path == "mixed" else path
    whole = list(read_traces(path))
    points = [(i, item.resume) for i, item in enumerate(whole) if item.resume is not None]
    if path.parent.name == "otlp":  # spans of traces spread over the lines: a trace is half read after every line
        assert not points
        return
    assert points, "no resume point"
    for index, point in points:
        progress: list[int] = []
        rest = list(read_traces(path, start=point, progress=progress.append))
        assert [_shown(item) for item in rest] == [_shown(item) for item in whole[index + 1:]], (path, point)
        assert sum(progress) == path.stat().st_size  # the bytes before the point count as read
    if path.name == "mixed.jsonl":  # no point inside the OTLP trace's lines, one after each other line
        otlp_lines = {item.line for item in whole if item.trace is not None and item.trace.source_format == "otlp"}
        assert otlp_lines and not any(min(otlp_lines) <= point.line < max(otlp_lines) for _, point in points)


def test_only_a_json_lines_file_is_read_from_a_resume_point():
    whole = list(read_traces(ROOT / "src/dspy_rdf/examples/dspy33_traces.jsonl"))
    with pytest.raises(ValueError, match="only a JSON Lines file"):
        list(read_traces(DATA / "crosspath" / "openinference.json", start=whole[0].resume))


def test_put_says_in_order_which_traces_are_done_with(tmp_path):
    traces = [item.trace for item in read_traces(ROOT / "src/dspy_rdf/examples/dspy33_traces.jsonl")]
    told: list[tuple[int, list[str]]] = []
    with EmbeddedStore(tmp_path / "store") as store:
        store.put(traces[:3])
        report = store.put([*traces, traces[0]], settled=lambda n, iris: told.append((n, iris)), batch_triples=1)
        assert [n for n, _ in told] == sorted(n for n, _ in told) and told[-1][0] == len(traces) + 1
        assert [iri for _, iris in told for iri in iris] == report.written and len(report.already_stored) == 3


def _workload(tmp_path: Path, lm_calls: int) -> Path:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from bench_store import workload
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return workload(lm_calls, tmp_path)[0]


def _quads(store_dir: Path) -> list[bytes]:
    buffer = io.BytesIO()
    with EmbeddedStore(store_dir) as store:
        store.dump(buffer)
    return sorted(buffer.getvalue().splitlines())


def _killed_midway(command: list[str], journal: Path, cwd: Path) -> None:
    """Run an export and kill it (SIGKILL: nothing of it runs after) as soon as its journal says traces are stored."""
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not journal.exists():
            assert process.poll() is None, "the export ended before it was killed: give it a larger file"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(60)


def test_an_export_killed_midway_resumes_where_it_stood_and_stores_what_one_whole_export_does(tmp_path, capsys):
    first = _workload(tmp_path, 2000)
    second = tmp_path / "second.jsonl"
    second.write_bytes((ROOT / "src/dspy_rdf/examples/dspy33_traces.jsonl").read_bytes())
    store = tmp_path / "store"
    journal = journal_path(str(store))
    _killed_midway([sys.executable, "-m", "dspy_rdf", "export", str(first), str(second), "--store", str(store)], journal, tmp_path)
    entry = json.loads(journal.read_text())["inputs"][str(first.resolve())]
    assert 0 < entry["offset"] < first.stat().st_size and not entry["done"]
    with EmbeddedStore(store) as partial:
        before = len(partial.trace_iris())
    assert before >= entry["items"]

    assert main(["export", str(first), str(second), "--store", str(store)]) == 0
    out, err = capsys.readouterr()
    assert f"resuming {first} after line {entry['line']}" in err
    total = sum(1 for line in first.read_bytes().splitlines() if line.strip()) + 9
    stored_now = int(out.split("stored ")[1].split(" trace")[0])
    # what was committed after the journal's last write is read again and found stored: nothing more
    already = int(out.split("; ")[1].split(" already")[0]) if "already stored" in out else 0
    assert stored_now + entry["items"] + already == total and already == before - entry["items"]
    assert not journal.exists()  # completed: forgotten

    assert main(["export", str(first), str(second), "--store", str(tmp_path / "whole")]) == 0
    assert _quads(store) == _quads(tmp_path / "whole")  # source_index too: the traces after the point are numbered as in a whole read

    # a later export of the same files reads them whole again, and finds everything stored
    capsys.readouterr()
    assert main(["export", str(first), str(second), "--store", str(store)]) == 0
    assert f"{total} already stored" in capsys.readouterr().out


def _journal_of(tmp_path: Path, files: list[Path], store: Path, stop_after: int) -> None:
    """Export ``files`` into ``store`` through the CLI, stopped (KeyboardInterrupt) after ``stop_after`` traces
    are handed to the store, each trace committed on its own."""
    from dspy_rdf.store import base
    from dspy_rdf.store.base import TraceStore

    real_put, chunk = TraceStore.put, base._LOOKUP_CHUNK
    base._LOOKUP_CHUNK = 1  # traces are looked up in the store (and then committed) one by one

    def put(self, traces, **kwargs):
        def stopping():
            for number, trace in enumerate(traces):
                if number == stop_after:
                    raise KeyboardInterrupt
                yield trace

        return real_put(self, stopping(), **kwargs, batch_triples=1)

    TraceStore.put = put
    try:
        assert main(["export", *map(str, files), "--store", str(store)]) == 130  # as Ctrl-C ends it
    finally:
        TraceStore.put, base._LOOKUP_CHUNK = real_put, chunk


def test_a_file_read_whole_before_the_stop_is_not_read_again_and_a_changed_one_is_read_from_its_start(tmp_path, capsys):
    example = (ROOT / "src/dspy_rdf/examples/dspy33_traces.jsonl").read_bytes()
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(example)
    b.write_bytes(b"\n".join(reversed(example.splitlines())) + b"\n")
    otlp = DATA / "otlp" / "openinference_dspy331_batches.jsonl"
    store = tmp_path / "store"
    with EmbeddedStore(store) as whole:
        whole.put([])
    _journal_of(tmp_path, [otlp, a, b], store, stop_after=len(list(read_traces(otlp))) + 2)
    entries = json.loads(journal_path(str(store)).read_text())["inputs"]
    assert entries[str(otlp.resolve())]["done"] and not entries[str(a.resolve())]["done"]
    capsys.readouterr()

    assert main(["export", str(otlp), str(a), str(b), "--store", str(store)]) == 0
    err = capsys.readouterr().err
    assert f"{otlp}: stored whole by a load that stopped after it; not read again" in err
    assert f"resuming {a} after line 2" in err

    # stopped again, then a file changed: read from its start, the traces already stored left as they are
    _journal_of(tmp_path, [a], tmp_path / "store2", stop_after=4)
    a.write_bytes(b"\n".join(reversed(example.splitlines())) + b"\n")  # the same traces, lines in another order
    capsys.readouterr()
    assert main(["export", str(a), "--store", str(tmp_path / "store2")]) == 0
    out, err = capsys.readouterr()
    assert f"{a} changed since a load into this store stopped in it: reading it from its start" in err
    assert "4 already stored" in out


def test_a_store_that_lost_what_the_journal_vouches_for_is_loaded_from_the_start(tmp_path, capsys):
    example = ROOT / "src/dspy_rdf/examples/dspy33_traces.jsonl"
    store = tmp_path / "store"
    _journal_of(tmp_path, [example], store, stop_after=5)
    check = json.loads(journal_path(str(store)).read_text())["inputs"][str(example.resolve())]["check"]
    with EmbeddedStore(store) as opened:
        assert opened.delete(check)
    capsys.readouterr()
    assert main(["export", str(example), "--store", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "the store no longer holds what a load stopped in" in err
    assert "stored 5 trace(s)" in out and "4 already stored" in out  # the one deleted, and the four never written


def test_from_start_reads_everything_again_and_a_broken_journal_is_named_and_ignored(tmp_path, capsys):
    example = ROOT / "src/dspy_rdf/examples/dspy33_traces.jsonl"
    store = tmp_path / "store"
    _journal_of(tmp_path, [example], store, stop_after=5)
    capsys.readouterr()
    assert main(["export", str(example), "--store", str(store), "--from-start"]) == 0
    out, err = capsys.readouterr()
    assert "resuming" not in err and "5 already stored" in out

    _journal_of(tmp_path, [example], tmp_path / "store2", stop_after=5)
    journal_path(str(tmp_path / "store2")).write_text("{not json")
    assert main(["export", str(example), "--store", str(tmp_path / "store2")]) == 0
    out, err = capsys.readouterr()
    assert "not a load journal this version reads" in err and "\n" not in err.strip().split("warning: ")[1]
    assert "5 already stored" in out


@pytest.mark.parametrize("broken", [
    "[]", '{"version": 1}', '{"version": 2, "inputs": {}}', '{"version": 1, "inputs": {"x": {"offset": "12"}}}',
    '{"version": 1, "inputs": {"x": {"offset": -1, "line": 1, "items": 1, "done": false, "size": 1, "head": "", "tail": "", "check": null}}}',
])  # fmt: skip
def test_a_journal_of_any_other_shape_is_named_once_and_the_inputs_read_from_their_start(broken, tmp_path):
    from dspy_rdf.journal import LoadJournal

    path = tmp_path / "store.load.json"
    path.write_text(broken)
    warnings: list[str] = []
    journal = LoadJournal(path, stored=set, warn=warnings.append)
    example = ROOT / "src/dspy_rdf/examples/dspy33_traces.jsonl"
    start = journal.start_of(example)
    assert len(warnings) == 1 and "not a load journal this version reads" in warnings[0]
    assert not start.skip and start.point is None and start.note is None
