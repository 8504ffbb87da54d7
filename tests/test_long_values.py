"""A value longer than an RDF literal may be (16 MB; pyoxigraph reads no token over 16 MiB): the trace holding it is
refused by file, line, node and property on every output, the others are written, and what is written reads back;
RDF written by other tools with such a value costs that value's line, not the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dspy_rdf.capture.recorder import FileSink, TraceRecorder
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.writer import MAX_LITERAL_BYTES

ENTRY = {"model": "openai/gpt-4o-mini", "outputs": ["ok"], "messages": [{"role": "user", "content": "hi"}]}


def history(path: Path, long_text: str) -> Path:
    """Three ``lm.history`` entries, the second of which asks ``long_text``."""
    values = [dict(ENTRY, timestamp=f"2026-01-01T00:00:0{n}") for n in range(3)]
    values[1]["messages"] = [{"role": "user", "content": long_text}]
    path.write_text("".join(json.dumps(v) + "\n" for v in values), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def too_long(tmp_path_factory) -> Path:
    return history(tmp_path_factory.mktemp("long") / "in.jsonl", "é" * (MAX_LITERAL_BYTES // 2 + 1))  # 2 bytes each


@pytest.mark.parametrize("output", ["--store", "nq", "trig", "ttl", "jsonld"])
def test_a_value_over_the_limit_is_refused_by_name_and_the_other_traces_are_written(too_long, tmp_path, capsys, output):
    target = tmp_path / ("store" if output == "--store" else f"out.{output}")
    args = ["--store", str(target)] if output == "--store" else ["-o", str(target)]
    assert main(["export", str(too_long), *args]) == 1
    err = capsys.readouterr().err
    assert f"not written: {too_long}:2, field node <" in err and "property <https://w3id.org/lmodel/dspy/text>" in err
    assert "16 MB a literal may have" in err and "Traceback" not in err
    if output == "--store":
        dumped = tmp_path / "dump.nq"
        assert main(["dump", "--store", str(target), "-o", str(dumped)]) == 0
        target = dumped
    read = list(read_traces(target))
    assert [i.error for i in read] == [None, None] and {i.trace.entries[0].timestamp[-1] for i in read} == {"0", "2"}


def test_a_value_just_under_the_limit_is_written_and_read_back(tmp_path):
    text = "x" * (MAX_LITERAL_BYTES - 1000)
    out = tmp_path / "out.nq"
    assert main(["export", str(history(tmp_path / "in.jsonl", text)), "-o", str(out)]) == 0
    read = [i.trace for i in read_traces(out)]
    assert len(read) == 3 and any(t.entries[0].request.messages[0].parts[0].text == text for t in read)


def test_a_capture_file_refuses_the_run_and_stays_readable(too_long, tmp_path):
    runs = [i.trace for i in read_traces(too_long)]
    path = tmp_path / "runs.nq"
    sink = FileSink(path)
    recorder = TraceRecorder(sink)
    for run in runs:
        sink.write(run)
    assert recorder.flush(timeout=120)
    recorder.close()
    assert len(recorder.errors) == 1 and "16 MB a literal may have" in recorder.errors[0]
    assert len(recorder.unwritten) == 1
    assert [i.error for i in read_traces(path)] == [None, None]


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_rdf_from_another_tool_with_a_longer_value_costs_only_its_line(tmp_path, where):
    out = tmp_path / "three.nq"
    assert main(["export", str(history(tmp_path / "in.jsonl", "short")), "-o", str(out)]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    at = {"first": 0, "middle": len(lines) // 2, "last": len(lines)}[where]
    long_line = '<http://example.org/a> <http://example.org/b> "' + "x" * (17 << 20) + '" <http://example.org/g> .'
    (tmp_path / "long.nq").write_text("\n".join([*lines[:at], long_line, *lines[at:]]) + "\n", encoding="utf-8")
    read = list(read_traces(tmp_path / "long.nq"))
    errors = [i for i in read if i.error is not None]
    assert len(errors) == 1 and errors[0].line == at + 1 and "longer than the 16 MiB the RDF parser reads" in str(errors[0].error)
    # a trace whose quads the long line cut in two is read whole all the same: its digest shows it lost nothing
    assert len([i for i in read if i.trace is not None]) == 3
    nt = tmp_path / "long.nt"
    nt.write_text(long_line.replace(" <http://example.org/g>", "") + "\n", encoding="utf-8")
    (only,) = read_traces(nt)
    assert "longer than the 16 MiB the RDF parser reads" in str(only.error)
