"""Every reader fuzzed from the schema: one value of a real trace broken where a schema slot of its name stands (or
any key, for the readers' own names), between two good traces in one JSON Lines file, exported as users export.

The breakages come from the LinkML schema itself, so a slot added or constrained there is fuzzed here with no change:
an integer slot gets numbers out of its range (below its ``minimum_value``, beyond 64 bits, 5,000 digits, not ASCII
digits), a date-time slot times out of the years 1 to 9999 and text that is no time, a decimal slot numbers no double
holds, a boolean slot text, and every key values of the wrong JSON type, text of two megabytes, a lone surrogate and
JSON nested deeper than Python reads. Whatever is drawn: no traceback, exit code 0 or 1, the two good traces are
written, a trace left out is named by file and line, and the memory the export takes is bounded by its input.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import tracemalloc
from functools import cache
from pathlib import Path

import pytest
from conftest import DATA, examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspy_rdf.canonical.identity import trace_iri
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.sources.tracejson import trace_from_json

SCHEMA = Path(__file__).resolve().parents[1] / "schema" / "dspy.yaml"

REACT_V2_HISTORY = {"messages": [
    {"question": "2 + 3?", "next_thought": "add", "tool_calls": {
        "tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}],
        "tool_call_results": {"tool_call_results": [{"call_id": "c1", "name": "add", "value": "5", "is_error": False}]}}},
    {"answer": "5"},
]}  # fmt: skip

READERS = {
    # source format: a real value it reads (a file of tests/data, or the value itself)
    "dspy33": "history_entry_all_parts.json",
    "lm15": "dspy341_lm15_response.json",
    "history_dict": "history_dicts_dspy3.3.1.json",
    "openai_chat": "openai_exchange_tool_loop.json",
    "react_trajectory": "dspy341_react_trajectory.json",
    "dspy_history": REACT_V2_HISTORY,
    "dspy_callback": "crosspath/capture.jsonl",
    "mlflow": "mlflow/mlflow3_search_page.json",
    "otlp": "otlp/openinference_dspy331.json",
}
GOOD = [
    {"model": "openai/gpt-4o-mini", "messages": [{"role": "user", "content": f"good trace {n}"}], "outputs": [f"answer {n}"],
     "timestamp": f"2026-01-0{n}T00:00:00"}
    for n in (1, 2)
]  # fmt: skip


def test_every_source_format_is_fuzzed():
    from dspy_rdf.canonical.model import SOURCE_FORMATS

    assert set(READERS) == set(SOURCE_FORMATS)


@cache
def slot_ranges() -> dict[str, tuple[str | None, float | None]]:
    """Each slot of the schema: its range and minimum value."""
    from linkml_runtime.utils.schemaview import SchemaView

    view = SchemaView(str(SCHEMA))
    return {name: (slot.range, slot.minimum_value) for name, slot in view.all_slots().items()}


class Raw(str):
    """JSON text spliced into the line as it is: what ``json.dumps`` would not write."""


DEEP = Raw("[" * 100_000 + "]" * 100_000)
WRONG_TYPES = [["x"], {"x": 1}, 7, None, True, "", "x" * 2_000_000, "\ud800 lone surrogate"]
BY_RANGE = {
    "integer": [10**30, -(2**63) - 1, Raw("9" * 5000), "²³", 1.5, "12"],
    "decimal": [10**400, -1e308, Raw("1e400"), "NaN"],
    "datetime": ["10000-01-01T00:00:00", "0000-01-01T00:00:00", "9999-12-31T23:59:59-14:00", "yesterday", 10**30],
    "date": ["10000-01-01", "01/02/2026"],
    "boolean": ["true", 2],
}


def breakages(key: str) -> list:
    """What a value under ``key`` is replaced by: from the schema slot of that name, and of every JSON type."""
    slot_range, minimum = slot_ranges().get(key, (None, None))
    out = list(BY_RANGE.get(slot_range or "", []))
    if minimum is not None:
        out.append(int(minimum) - 1)
    return out + WRONG_TYPES + [DEEP]


@cache
def value_of(reader: str) -> object:
    where = READERS[reader]
    if not isinstance(where, str):
        return where
    text = (DATA / where).read_text(encoding="utf-8")
    return json.loads(text.splitlines()[0] if where.endswith(".jsonl") else text)


@cache
def paths_of(reader: str) -> list[tuple]:
    """Every place in the value of ``reader`` that holds a value under a key (a path of keys and indexes)."""
    found: list[tuple] = []

    def walk(node, path):
        if isinstance(node, dict):
            for key, child in node.items():
                found.append((*path, key))
                walk(child, (*path, key))
        elif isinstance(node, list):
            for index, child in enumerate(node):
                walk(child, (*path, index))

    walk(value_of(reader), ())
    return found


def broken_line(reader: str, path: tuple, replacement: object) -> str:
    """The JSON line of the reader's value with the value at ``path`` replaced."""
    value = json.loads(json.dumps(value_of(reader)))
    holder = value
    for step in path[:-1]:
        holder = holder[step]
    marker = "\x00raw\x00"
    holder[path[-1]] = marker if isinstance(replacement, Raw) else replacement
    line = json.dumps(value, ensure_ascii=True)
    return line.replace(json.dumps(marker), replacement) if isinstance(replacement, Raw) else line


@pytest.mark.parametrize("reader", list(READERS))
def test_a_value_broken_from_the_schema_costs_its_own_trace_only(reader):
    good_iris = {trace_iri(trace_from_json(g)) for g in GOOD}

    @settings(max_examples=examples(25), deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
    @given(data=st.data())
    def check(data):
        path = data.draw(st.sampled_from(paths_of(reader)), label="path")
        replacement = data.draw(st.sampled_from(breakages(str(path[-1]))), label="replacement")
        with tempfile.TemporaryDirectory() as directory:
            source, out = Path(directory) / "in.jsonl", Path(directory) / "out.nq"
            lines = [json.dumps(GOOD[0]), broken_line(reader, path, replacement), json.dumps(GOOD[1])]
            source.write_text("\n".join(lines) + "\n", encoding="utf-8")
            err = io.StringIO()
            tracemalloc.start()
            try:
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    code = main(["export", str(source), "-o", str(out)])
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            message = err.getvalue()
            assert code in (0, 1) and "Traceback" not in message, message[-2000:]
            assert peak < 64_000_000 + 40 * source.stat().st_size, (peak, source.stat().st_size)
            written = {trace_iri(item.trace) for item in read_traces(out) if item.trace is not None}
            assert good_iris <= written
            if code == 1:  # something of the broken value was left out, and named by its line
                assert f"{source}:2" in message, message[-2000:]
            else:
                assert message == ""

    check()


# --- RDF: the reader of this package's own graphs ----------------------------------------------------------------------

DSPY = "https://w3id.org/lmodel/dspy/"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_LITERALS = {
    "integer": [f'"{10**30}"^^<{XSD}integer>', f'"-1"^^<{XSD}integer>', f'"{"9" * 5000}"^^<{XSD}integer>', f'"²³"^^<{XSD}integer>',
                f'"1.5"^^<{XSD}integer>'],
    "decimal": [f'"1e400"^^<{XSD}decimal>', f'"NaN"^^<{XSD}double>', f'"{"9" * 400}"^^<{XSD}decimal>'],
    "datetime": [f'"10000-01-01T00:00:00Z"^^<{XSD}dateTime>', f'"yesterday"^^<{XSD}dateTime>',
                 f'"9999-12-31T23:59:59-14:00"^^<{XSD}dateTime>'],
    "boolean": [f'"yes"^^<{XSD}boolean>', f'"2"^^<{XSD}boolean>'],
}  # fmt: skip
RDF_ANY = ['"text"', f'"7"^^<{XSD}integer>', "<urn:x:node>", "_:blank", '"{\\"unclosed"^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON>',
           '"' + "x" * 2_000_000 + '"', "DROP"]  # fmt: skip


@cache
def rdf_lines() -> tuple[list[str], list[str], list[str]]:
    """The N-Quads of three traces: the first and last stay good, the middle one is broken."""
    with tempfile.TemporaryDirectory() as directory:
        source, out = Path(directory) / "in.jsonl", Path(directory) / "out.nq"
        middle = value_of("dspy_callback")
        source.write_text("\n".join(json.dumps(v) for v in (GOOD[0], middle, GOOD[1])) + "\n", encoding="utf-8")
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["export", str(source), "-o", str(out)]) == 0
        lines = out.read_text(encoding="utf-8").splitlines()
    graphs = list(dict.fromkeys(line.rsplit(" ", 2)[-2] for line in lines))
    split = [[line for line in lines if line.rsplit(" ", 2)[-2] == graph] for graph in graphs]
    middle_graph = max(split, key=len)  # the program run
    others = [g for g in split if g is not middle_graph]
    return others[0], middle_graph, others[1]


@pytest.mark.slow
def test_a_graph_broken_from_the_schema_costs_its_own_trace_only():
    first, middle, last = rdf_lines()
    good_graphs = {first[0].rsplit(" ", 2)[-2], last[0].rsplit(" ", 2)[-2]}
    dspy_lines = [i for i, line in enumerate(middle) if line.split(" ", 2)[1].startswith(f"<{DSPY}")]

    @settings(max_examples=examples(40), deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
    @given(data=st.data())
    def check(data):
        index = data.draw(st.sampled_from(dspy_lines), label="line")
        subject, predicate, rest = middle[index].split(" ", 2)
        slot_range, _ = slot_ranges().get(predicate[len(DSPY) + 1 : -1], (None, None))
        term = data.draw(st.sampled_from(RDF_LITERALS.get(slot_range or "", []) + RDF_ANY), label="object")
        graph = rest.rsplit(" ", 2)[-2]
        broken = list(middle)
        if term == "DROP":
            del broken[index]
        else:
            broken[index] = f"{subject} {predicate} {term} {graph} ."
        with tempfile.TemporaryDirectory() as directory:
            source, out = Path(directory) / "in.nq", Path(directory) / "out.nq"
            source.write_text("\n".join([*first, *broken, *last]) + "\n", encoding="utf-8")
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = main(["export", str(source), "-o", str(out)])
            message = err.getvalue()
            assert code in (0, 1) and "Traceback" not in message, message[-2000:]
            written = {line.rsplit(" ", 2)[-2] for line in out.read_text(encoding="utf-8").splitlines()}
            assert good_graphs <= written
            if code == 1:
                assert str(source) in message and ("graph <" in message or f"{source}:" in message), message[-2000:]

    check()
