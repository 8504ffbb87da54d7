"""The dspy-rdf command: export, to-json, validate, demo, and clear errors for bad input."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from conftest import DATA, load

from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.cli.main import main


@pytest.mark.parametrize("fmt", ["ttl", "nt", "nq", "trig", "jsonld"])
def test_export_then_to_json_gives_back_equal_json(tmp_path, fmt):
    out = tmp_path / f"trace.{fmt}"
    assert main(["export", str(DATA / "history_entry_all_parts.json"), "-o", str(out)]) == 0
    back = tmp_path / "back.json"
    assert main(["to-json", str(out), "-o", str(back)]) == 0
    assert json.loads(back.read_text(encoding="utf-8")) == load("history_entry_all_parts.json")


@pytest.mark.parametrize(
    "fixture",
    [
        "history_entry_all_parts.json",  # dspy33
        "dspy341_lm15_request.json",
        "dspy341_lm15_response.json",
        "dspy341_lm15_message.json",
        "dspy341_lm15_part_tool_call.json",
        "history_dicts_dspy2.5.43.json",  # DummyLM: exported with --fill-model and --fill-timestamp
        "history_dicts_dspy3.4.1.json",
        "openai_request_all_parts.json",
        "openai_exchange_tool_loop.json",
        "openai_response_logprobs.json",
        "dspy341_react_trajectory.json",
    ],
)
def test_to_json_output_exports_to_the_same_graph_for_every_source_shape(tmp_path, fixture):
    first, back, second = tmp_path / "first.nq", tmp_path / "back.json", tmp_path / "second.nq"
    fill = ["--fill-model", "dummy", "--fill-timestamp", "2026-01-01T00:00:00+00:00"] if "2.5" in fixture else []
    assert main(["export", str(DATA / fixture), "-o", str(first), *fill]) == 0
    assert main(["to-json", str(first), "-o", str(back)]) == 0
    assert main(["export", str(back), "-o", str(second)]) == 0
    assert sorted(second.read_text(encoding="utf-8").splitlines()) == sorted(first.read_text(encoding="utf-8").splitlines())


def test_a_jsonl_file_goes_back_to_the_same_lines(tmp_path):
    out, back = tmp_path / "all.trig", tmp_path / "back.jsonl"
    assert main(["export", str(bundled_traces_path()), "-o", str(out)]) == 0
    assert main(["to-json", str(out), "-o", str(back)]) == 0
    original = [json.loads(line) for line in bundled_traces_path().read_text(encoding="utf-8").splitlines()]
    assert [json.loads(line) for line in back.read_text(encoding="utf-8").splitlines()] == original


def test_a_bad_jsonl_line_is_named_skipped_and_reported_in_the_exit_code(tmp_path, capsys):
    bad = tmp_path / "mixed.jsonl"
    lines = bundled_traces_path().read_text(encoding="utf-8").splitlines()[:2]
    broken = load("part_tool_call.json")
    del broken["messages"][0]["parts"][0]["name"]
    bad.write_text("\n".join([lines[0], json.dumps(broken), "{not json", lines[1]]) + "\n", encoding="utf-8")
    out = tmp_path / "out.nq"
    assert main(["export", str(bad), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:2, field request.messages[0].parts[0].name: is required" in err
    assert f"{bad}:3: not valid JSON" in err
    assert out.read_text(encoding="utf-8").count("/Trace>") == 2
    assert main(["export", str(bad), "-o", str(tmp_path / "strict.nq"), "--strict"]) == 2
    assert not (tmp_path / "strict.nq").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["messages"][0]["parts"][0].update(type="hologram"), "field request.messages[0].parts[0].type: unknown part type 'hologram'"),
        (lambda d: d["messages"][0]["parts"][0].update(args="x=1"), "field request.messages[0].parts[0].args: expected a JSON object, got a string"),
        (lambda d: d["messages"][0]["parts"][0].update(surprise=1), "field request.messages[0].parts[0]: unknown field(s) surprise on a tool_call part"),
        (lambda d: d.update(messages="hi"), "field request.messages: expected a list, got a string"),
    ],
    ids=["unknown part type", "wrong type", "unknown field", "not a list"],
)
def test_bad_input_gets_an_error_naming_file_and_field(tmp_path, capsys, change, message):
    data = load("part_tool_call.json")
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["export", str(path), "-o", str(tmp_path / "out.ttl"), "--strict"]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}, {message}" in err
    assert "Traceback" not in err


def test_an_existing_output_is_untouched_when_export_fails(tmp_path):
    out = tmp_path / "out.ttl"
    out.write_text("previous content", encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2", encoding="utf-8")
    assert main(["export", str(bad), "-o", str(out), "--strict"]) == 2
    assert out.read_text(encoding="utf-8") == "previous content"


def test_validate_says_conforms_for_json_and_rdf(tmp_path, capsys):
    ttl = tmp_path / "t.ttl"
    main(["export", str(DATA / "response_all_parts.json"), "-o", str(ttl)])
    assert main(["validate", str(DATA / "request_all_parts.json"), str(ttl)]) == 0
    assert "conforms" in capsys.readouterr().out


def test_broken_rdf_gets_a_located_error(tmp_path, capsys):
    ttl = tmp_path / "t.ttl"
    ttl.write_text("<a> <b> .", encoding="utf-8")
    assert main(["to-json", str(ttl), "-o", str(tmp_path / "x.json")]) == 2
    assert f"error: {ttl}: not valid ttl" in capsys.readouterr().err


def test_the_demo_stores_validates_and_prints_analytics(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["demo", "--store", str(store)]) == 0
    assert main(["demo", "--store", str(store)]) == 0  # re-running keeps the stored traces
    out = capsys.readouterr().out
    assert out.count("exported 9 bundled DSPy 3.3.1 traces") == 2
    first, second = re.findall(r"\((\d+) traces, (\d+) triples in the store(.*)\)", out)
    assert first[:2] == second[:2] and first[0] == "9"
    assert first[2] == "" and second[2] == "; 9 were stored already and kept as they are"
    assert "all traces conform" in out and re.search(r"search web +3 +4 +0", out)
    shutil.rmtree(store)


def test_unrecognised_input_names_the_file_the_line_and_what_was_expected(tmp_path, capsys):
    path = tmp_path / "odd.jsonl"
    lines = bundled_traces_path().read_text(encoding="utf-8").splitlines()[:2]
    path.write_text("\n".join([lines[0], json.dumps({"hello": "world"}), lines[1]]) + "\n", encoding="utf-8")
    assert main(["export", str(path), "-o", str(tmp_path / "out.nq")]) == 1
    err = capsys.readouterr().err
    assert f"skipped {path}:2: cannot tell what DSPy object this is (a JSON object with keys hello)" in err
    assert "expected a DSPy 3.3 LMHistoryEntry" in err and "dspy.ReAct trajectory" in err
    assert (tmp_path / "out.nq").read_text(encoding="utf-8").count("/Trace>") == 2


def test_from_forces_a_source_format_and_says_when_the_input_is_not_that(tmp_path, capsys):
    out = tmp_path / "out.nq"
    assert main(["export", str(DATA / "request_all_parts.json"), "-o", str(out), "--from", "dspy33"]) == 0
    assert main(["export", str(DATA / "request_all_parts.json"), "-o", str(out), "--from", "react_trajectory", "--strict"]) == 2
    assert "ReAct trajectory key" in capsys.readouterr().err
    assert main(["export", str(DATA / "request_all_parts.json"), "-o", str(out), "--from", "lm15", "--strict"]) == 2
    assert "field request: unknown field(s) metadata on an lm15 request" in capsys.readouterr().err
    assert main(["export", str(DATA / "dspy341_react_trajectory.json"), "-o", str(out), "--from", "lm15", "--strict"]) == 2
    assert "this is not a DSPy 3.4 lm15 Request, Response, Message or part, or {request, response} (forced with --from lm15)" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["ttl", "trig", "nq"])
def test_a_large_jsonl_export_is_written_in_batches_that_read_back_whole(tmp_path, capsys, fmt):
    lines = bundled_traces_path().read_text(encoding="utf-8").splitlines()
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(lines * 130) + "\n", encoding="utf-8")  # 1,170 traces: three batches of 500
    out = tmp_path / f"many.{fmt}"
    assert main(["export", str(path), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"wrote {len(set(lines))} trace(s)" in said
    assert f"{len(lines) * 130 - len(set(lines))} duplicate(s) of a trace already written" in said
    from dspy_rdf import RdfFormat, parse_traces

    traces = parse_traces(out, RdfFormat(fmt))
    # Identical lines are one trace (one IRI); each distinct trace comes back whole.
    assert len(traces) == len(set(lines))


def _graph_lines(path) -> list[str]:
    """The quads of an N-Quads file but for dspy:source_index (where in its input each trace was)."""
    return sorted(line for line in path.read_text(encoding="utf-8").splitlines() if "/source_index>" not in line)


@pytest.mark.parametrize("fmt", ["nq", "trig", "ttl", "nt", "jsonld", "json"])
def test_an_rdf_file_exports_to_the_same_traces_in_a_file_and_in_a_store(tmp_path, fmt):
    first, rdf, again = tmp_path / "first.nq", tmp_path / f"traces.{fmt}", tmp_path / "again.nq"
    assert main(["export", str(bundled_traces_path()), "-o", str(first)]) == 0
    assert main(["export", str(first), "-o", str(rdf)]) == 0  # .json: JSON-LD, as export writes it
    assert main(["export", str(rdf), "-o", str(again)]) == 0
    assert _graph_lines(again) == _graph_lines(first)
    store = tmp_path / "store"
    assert main(["export", str(rdf), "--store", str(store)]) == 0
    dumped = tmp_path / "dumped.nq"
    assert main(["dump", "--store", str(store), "-o", str(dumped)]) == 0
    assert {line.rsplit(" ", 2)[-2] for line in _graph_lines(dumped)} == {line.rsplit(" ", 2)[-2] for line in _graph_lines(first)}


def test_an_rdf_input_refuses_from_and_a_trace_spread_over_an_nquads_file_is_read_whole(tmp_path, capsys):
    first = tmp_path / "first.nq"
    assert main(["export", str(bundled_traces_path()), "-o", str(first)]) == 0
    assert main(["export", str(first), "--from", "dspy33", "-o", str(tmp_path / "x.nq")]) == 2
    assert "applies to JSON inputs" in capsys.readouterr().err
    # refused before any input is read: a JSON input given first is not stored either
    assert main(["export", str(bundled_traces_path()), str(first), "--from", "dspy33", "--store", str(tmp_path / "st")]) == 2
    assert "applies to JSON inputs" in capsys.readouterr().err and not (tmp_path / "st").exists()
    lines = first.read_text(encoding="utf-8").splitlines()
    graphs = list(dict.fromkeys(line.rsplit(" ", 2)[-2] for line in lines))
    spread = tmp_path / "spread.nq"  # texts of the first trace moved after the second trace
    moved = [line for line in lines if line.rsplit(" ", 2)[-2] == graphs[0] and "/dspy/text>" in line]
    rest = [line for line in lines if line not in moved]
    cut = max(i for i, line in enumerate(rest) if line.rsplit(" ", 2)[-2] == graphs[1]) + 1
    spread.write_text("\n".join([*rest[:cut], *moved, *rest[cut:]]) + "\n", encoding="utf-8")
    assert main(["export", str(spread), "-o", str(tmp_path / "y.nq")]) == 0
    assert _graph_lines(tmp_path / "y.nq") == _graph_lines(first)


def test_an_edited_trace_in_rdf_is_exported_under_the_iri_of_its_new_content(tmp_path):
    first = tmp_path / "first.nq"
    assert main(["export", str(bundled_traces_path()), "-o", str(first)]) == 0
    lines = first.read_text(encoding="utf-8").splitlines()
    edited = next(i for i, line in enumerate(lines) if "/dspy/text>" in line)
    graph = lines[edited].rsplit(" ", 2)[-2]
    lines[edited] = lines[edited].replace('"', '"edited ', 1)
    for fmt in ("nq", "trig"):
        source = tmp_path / f"edited.{fmt}"
        (tmp_path / "edited.nq").write_text("\n".join(lines) + "\n", encoding="utf-8")
        if fmt == "trig":
            assert main(["export", str(tmp_path / "edited.nq"), "-o", str(source)]) == 0
        out = tmp_path / f"out-{fmt}.nq"
        assert main(["export", str(source), "-o", str(out)]) == 0
        written = {line.rsplit(" ", 2)[-2] for line in out.read_text(encoding="utf-8").splitlines()}
        assert graph not in written and len(written) == len({line.rsplit(" ", 2)[-2] for line in lines})
        assert "edited " in out.read_text(encoding="utf-8")


def test_the_demo_tables_show_trace_iris_whole_so_they_can_be_pasted(tmp_path):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "dspy_rdf.cli", "demo", "--store", str(tmp_path / "store")], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    shown = re.findall(r"urn:dspy-rdf:trace:(?:run|content)-[0-9a-f]*.?", result.stdout)
    assert shown and all(re.fullmatch(r"urn:dspy-rdf:trace:(?:run|content)-[0-9a-f]{32}[\s/]", iri) for iri in shown), shown


def test_no_command_writes_over_its_input_or_into_a_store(tmp_path, capsys):
    from dspy_rdf.cli.main import main as cli

    rdf, store = tmp_path / "x.nq", tmp_path / "st"
    assert cli(["export", str(DATA / "crosspath" / "capture.jsonl"), "-o", str(rdf)]) == 0
    before = rdf.read_bytes()
    for command in (["to-otlp", str(rdf), "-o", str(rdf)], ["to-json", str(rdf), "-o", str(rdf)], ["export", str(rdf), "-o", str(rdf)]):
        assert cli(command) == 2, command
        assert "is one of the inputs" in capsys.readouterr().err
    assert rdf.read_bytes() == before
    assert cli(["export", str(rdf), "--store", str(store)]) == 0
    capsys.readouterr()
    for command in (["dump", "--store", str(store), "-o", str(store / "CURRENT")], ["prov", "--store", str(store), "-o", str(store / "p.nq")],
                    ["to-otlp", "--store", str(store), "-o", str(store / "s.json")]):
        assert cli(command) == 2, command
        assert "is inside the store" in capsys.readouterr().err
    assert cli(["stats", "--store", str(store)]) == 0  # the store is intact


def test_what_a_trace_holds_never_reaches_the_terminal_as_control_characters(tmp_path, capsys):
    from dspy_rdf.cli.main import main as cli

    evil = "evil\x1b]0;pwned\x07\x1b[2J\u202e"
    source = tmp_path / "evil.json"
    source.write_text(json.dumps({
        "model": evil, "messages": [{"role": "assistant", "parts": [{"type": "tool_call", "name": evil, "id": "c1", "args": {}}]}],
    }), encoding="utf-8")  # fmt: skip
    store = str(tmp_path / "store")
    assert cli(["export", str(source), "--store", store]) == 0
    capsys.readouterr()
    assert cli(["query", "tool_calls_per_tool", "--store", store]) == 0
    table = capsys.readouterr().out
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J\\u202e" in table and "\x1b" not in table and "\x07" not in table
    assert cli(["query", "tool_calls_per_tool", "--store", store, "--format", "csv"]) == 0
    assert evil in capsys.readouterr().out  # data written as data
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"model": "m", "messages": [{"role": "user", "parts": [{"type": evil}]}]}), encoding="utf-8")
    assert cli(["export", str(bad), "-o", str(tmp_path / "out.nq")]) == 1
    err = capsys.readouterr().err
    assert "skipped" in err and "\x1b" not in err and "\x07" not in err


def test_the_bundled_traces_name_no_file_of_the_machine_that_recorded_them():
    text = bundled_traces_path().read_text(encoding="utf-8")
    assert "site-packages/dspy/predict/react.py" in text  # the traceback of the failing tool is kept ...
    assert not re.search(r'File \\"/', text)  # ... with paths that hold on any machine
