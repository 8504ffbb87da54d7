"""Hostile input: every case round-trips exactly or fails with an error naming the file, line and field."""

from __future__ import annotations

import json
import unicodedata

import pytest
from conftest import load

from dspy_rdf.cli.main import main
from dspy_rdf.rdf.formats import RdfFormat, parse_traces, serialize_traces
from dspy_rdf.sources.tracejson import trace_from_json
from dspy_rdf.store import EmbeddedStore

HOSTILE_TEXT = [
    "with space",
    'quote " and \\ backslash',
    "<angle> & #hash %25 {braces} |pipe| ^caret `tick`",
    "new\nline and cr\r and tab\t",
    "nul\x00byte",
    unicodedata.normalize("NFC", "café"),
    unicodedata.normalize("NFD", "café"),
    "emoji 😀👩‍👩‍👧 and \u2028 line separator",
    "",
    " ",
]
FORMATS = list(RdfFormat)


def tool_call_request(name: str, call_id: str, args: dict | None = None) -> dict:
    return {
        "model": "m",
        "messages": [
            {"role": "assistant", "parts": [{"type": "tool_call", "name": name, "id": call_id, "args": args or {"q": name}}]},
            {"role": "tool", "parts": [{"type": "tool_result", "call_id": call_id, "name": name, "content": [{"type": "text", "text": name}]}]},
        ],
    }


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.value)
@pytest.mark.parametrize("text", HOSTILE_TEXT, ids=range(len(HOSTILE_TEXT)))
def test_hostile_tool_names_and_call_ids_round_trip_exactly(text, fmt):
    trace = trace_from_json(tool_call_request(text or "x", text))
    [(_, back)] = parse_traces(serialize_traces([trace], fmt), fmt)
    assert back == trace


def test_nfc_and_nfd_are_kept_apart():
    nfc, nfd = (trace_from_json(tool_call_request(unicodedata.normalize(form, "é"), "c")) for form in ("NFC", "NFD"))
    back = [t for _, t in parse_traces(serialize_traces([nfc, nfd], RdfFormat.N_QUADS), RdfFormat.N_QUADS)]
    assert sorted(t.request.messages[0].parts[0].name for t in back) == sorted([unicodedata.normalize("NFC", "é"), unicodedata.normalize("NFD", "é")])


@pytest.mark.parametrize("value", [10**40, -(10**40), 2**63, 1e308, -0.0, 5e-324, "", [], {}, [[[]]], None])
def test_edge_json_values_in_args_round_trip_exactly(value):
    trace = trace_from_json(tool_call_request("t", "c", {"v": value, "nested": {"v": value}}))
    [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.N_QUADS), RdfFormat.N_QUADS)
    assert back == trace
    # Key order is canonical (sorted), as documented; values, types and signs are exact.
    expected = json.dumps({"v": value, "nested": {"v": value}}, sort_keys=True)
    assert json.dumps(back.request.messages[0].parts[0].args, sort_keys=True) == expected


def test_json_nested_as_deep_as_python_reads_round_trips():
    deep: dict = {}
    cursor = deep
    for _ in range(900):
        cursor["a"] = {}
        cursor = cursor["a"]
    trace = trace_from_json(tool_call_request("t", "c", deep))
    [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.N_QUADS), RdfFormat.N_QUADS)
    assert back == trace


def write_jsonl(path, lines: list[str | bytes]) -> None:
    with path.open("wb") as handle:
        for line in lines:
            handle.write((line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n")


GOOD = json.dumps(tool_call_request("ok", "c1"))
BAD_LINES = {
    "nan": (GOOD.replace('"q": "ok"', '"q": NaN'), "NaN is not a JSON number"),
    "infinity": (GOOD.replace('"q": "ok"', '"q": -Infinity'), "-Infinity is not a JSON number"),
    "5000 digits": (GOOD.replace('"q": "ok"', '"q": ' + "9" * 5000), "not valid JSON"),
    "too deep": (GOOD.replace('"q": "ok"', '"q": ' + "[" * 100_000 + "]" * 100_000), "nested too deeply"),
    "truncated": (GOOD[: len(GOOD) // 2], "not valid JSON"),
    "not utf-8": (b'{"model": "m\xff", "messages": []}', "not UTF-8 text"),
    "unknown part type": (GOOD.replace('"type": "tool_call"', '"type": "hologram"'), "field request.messages[0].parts[0]"),
    "unknown field": (GOOD.replace('"role": "assistant"', '"role": "assistant", "mood": "happy"'), "mood"),
    "lone surrogate": (GOOD.replace('"q": "ok"', '"q": "a\\ud800b"'), "lone UTF-16 surrogate"),
}


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_one_bad_jsonl_line_is_named_and_skipped_and_the_others_are_exported(tmp_path, capsys, case):
    line, expected = BAD_LINES[case]
    source = tmp_path / "mixed.jsonl"
    write_jsonl(source, [GOOD, line, json.dumps(tool_call_request("other", "c2"))])
    out = tmp_path / "out.nq"
    assert main(["export", str(source), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert expected in err
    assert f"{source}:2" in err  # the file and line, even for what is only found when writing RDF
    if case == "lone surrogate":  # found when writing RDF: named by node and property too
        assert "/request/message/0/part/0" in err and "args" in err
    assert len(parse_traces(out, RdfFormat.N_QUADS)) == 2
    assert main(["export", str(source), "-o", str(tmp_path / "strict.nq"), "--strict"]) == 2
    assert not (tmp_path / "strict.nq").exists()


@pytest.mark.parametrize("case", ["nan", "lone surrogate", "truncated"])
def test_a_bad_line_leaves_the_store_with_exactly_the_good_traces(tmp_path, case):
    line, _ = BAD_LINES[case]
    source = tmp_path / "mixed.jsonl"
    write_jsonl(source, [GOOD, line])
    store = tmp_path / "store"
    assert main(["export", str(source), "--store", str(store)]) == 1
    with EmbeddedStore(store) as opened:
        assert opened.stats()["traces"] == 1


def test_live_values_that_json_cannot_hold_fail_clearly():
    from dspy_rdf.canonical.errors import TraceInputError

    for value, expected in [(float("nan"), "NaN or Infinity"), (10**5000, "integer longer than Python writes")]:
        trace = trace_from_json(tool_call_request("t", "c"))
        trace.request.messages[0].parts[0].args = {"v": value}
        with pytest.raises(TraceInputError, match=expected):
            serialize_traces([trace], RdfFormat.N_QUADS)


def test_ten_megabytes_of_text_export_and_reload(tmp_path):
    big = "x" * 5_000_000 + "é\"\\\n" * 1_000_000
    source = tmp_path / "big.json"
    source.write_text(json.dumps({"model": "m", "messages": [{"role": "user", "parts": [{"type": "text", "text": big}]}]}), encoding="utf-8")
    for fmt in ("nq", "ttl"):
        out = tmp_path / f"big.{fmt}"
        assert main(["export", str(source), "-o", str(out)]) == 0
        [(_, back)] = parse_traces(out)
        assert back.request.messages[0].parts[0].text == big


def test_empty_strings_and_missing_fields_stay_different():
    with_empty = tool_call_request("t", "c")
    with_empty["messages"][0]["name"] = ""
    without = tool_call_request("t", "c")
    a, b = trace_from_json(with_empty), trace_from_json(without)
    assert a != b
    for trace in (a, b):
        [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.TURTLE), RdfFormat.TURTLE)
        assert back == trace


@pytest.mark.parametrize(
    "patch, expected",
    [
        ({"timestamp": "not a date"}, "field timestamp: expected an ISO 8601 date-time"),
        ({"timestamp": "2025-01-01"}, "field timestamp: expected an ISO 8601 date-time"),
        ({"timestamp": "2025-13-01T00:00:00"}, "field timestamp: expected an ISO 8601 date-time"),
    ],
)
def test_timestamps_that_are_not_date_times_are_named(patch, expected):
    from dspy_rdf.canonical.errors import TraceInputError

    with pytest.raises(TraceInputError, match=expected):
        trace_from_json({**load("history_entry_all_parts.json"), **patch})


def test_a_cost_too_large_for_a_double_is_named():
    from dspy_rdf.canonical.errors import TraceInputError

    value = load("response_all_parts.json")
    value["cost"] = 10**400
    with pytest.raises(TraceInputError, match="field response.cost: the number has 401 digits"):
        trace_from_json(value)


# --- a value of the wrong JSON type where a reader decides what a node is ------------------------------------------

SWAP_FIXTURES = [
    "dspy341_lm15_request.json", "dspy341_lm15_response.json", "dspy341_lm15_message.json", "history_entry_all_parts.json",
    "request_all_parts.json", "openai_request_all_parts.json", "openai_exchange_tool_loop.json", "history_dicts_dspy3.4.1.json",
    "dspy341_history_dicts.json", "react_history.json",
]  # fmt: skip


def _swapped(value, key: str):
    """Copies of ``value`` with the value of one ``key`` anywhere in it replaced by a list, an object, a number and
    null: each where it stands, one at a time."""
    found: list[list] = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == key:
                    found.append([*path, k])
                walk(v, [*path, k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, [*path, i])

    walk(value, [])
    for path in found:
        for bad in ([["x"]], [{"x": 1}], [7], [None]):
            copy = json.loads(json.dumps(value))
            holder = copy
            for step in path[:-1]:
                holder = holder[step]
            holder[path[-1]] = bad[0]
            yield path, copy


@pytest.mark.parametrize("name", SWAP_FIXTURES)
@pytest.mark.parametrize("key", ["type", "role", "model", "name", "id", "call_id", "content", "parts", "text"])
def test_a_value_of_the_wrong_json_type_is_named_never_a_crash(name, key):
    from dspy_rdf.canonical.errors import TraceInputError
    from dspy_rdf.sources.tracejson import traces_from_json

    for path, value in _swapped(load(name), key):
        try:
            traces_from_json(value)
        except TraceInputError as exc:
            assert exc.field or exc.reason, (name, path)


@pytest.mark.parametrize(("where", "value", "said"), [
    ("startTimeUnixNano", str(10**30), "is not a time of the years 1970 to 9999"),
    ("endTimeUnixNano", str(253402300800 * 10**9 + 5), "is not a time of the years 1970 to 9999"),
    ("startTimeUnixNano", "²³", "expected nanoseconds since the epoch"),
    ("attributes", "9" * 5000, "expected a 64-bit integer"),
])
def test_one_bad_span_value_skips_its_trace_by_name_and_the_others_are_written(tmp_path, capsys, where, value, said):
    from conftest import DATA

    data = json.loads((DATA / "otlp" / "openinference_dspy331.json").read_text(encoding="utf-8"))
    span = data["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    if where == "attributes":
        span["attributes"].append({"key": "llm.token_count.prompt", "value": {"intValue": value}})
    else:
        span[where] = value
    source = tmp_path / "spans.json"
    source.write_text(json.dumps(data), encoding="utf-8")
    assert main(["export", str(source), "-o", str(tmp_path / "out.nq")]) == 1
    out, err = capsys.readouterr()
    assert "wrote 2 trace(s)" in out and said in err and "resourceSpans[0].scopeSpans[0].spans[0]" in err and "Traceback" not in err
