"""Injection strings through every CLI flag that takes text: treated as data or refused with a clear
error, never as query text; the store is unchanged."""

from __future__ import annotations

import json

import pytest

from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.cli.main import main

INJECTIONS = [
    '" } ; DROP ALL #',
    "> } DELETE WHERE { ?s ?p ?o } #",
    "x\\u0022 } #",
    "a'b\"c<d>e{f}g#h\nnew line",
    "<http://evil.example/> ?x",
    "SERVICE <http://evil.example/sparql> { ?s ?p ?o }",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("inj") / "store"
    assert main(["export", str(bundled_traces_path()), "--store", str(path)]) == 0
    return str(path)


def counts(store: str, capsys) -> dict:
    capsys.readouterr()
    assert main(["stats", "--store", store, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("text", INJECTIONS)
def test_query_params_from_the_command_line_are_data(store, capsys, text):
    before = counts(store, capsys)
    for name, param in [("tool_calls_per_tool", "tool"), ("tool_argument_frequency", "tool"), ("tokens_per_model", "model"), ("lm_calls_per_module", "module_class")]:
        assert main(["query", name, "--param", f"{param}={text}", "--store", store, "--format", "json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["results"]["bindings"] == [] or all(
            b.get(param if param != "module_class" else "module_class", {}).get("value") == text for b in result["results"]["bindings"]
        )
    for name, param in [("tokens_cost_per_model_day", "since"), ("longest_conversations", "limit")]:
        assert main(["query", name, "--param", f"{param}={text}", "--store", store]) == 2
        assert "error:" in capsys.readouterr().err
    assert counts(store, capsys) == before


@pytest.mark.parametrize("text", INJECTIONS)
def test_trace_arguments_are_iris_or_a_clear_error(store, capsys, text):
    before = counts(store, capsys)
    assert main(["delete", text, "--store", store]) in (1, 2)
    assert main(["dump", "--trace", text, "--store", store]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error:" in err
    assert counts(store, capsys) == before


@pytest.mark.parametrize("text", INJECTIONS)
def test_base_iris_with_injection_text_are_refused(tmp_path, capsys, text):
    assert main(["export", str(bundled_traces_path()), "-o", str(tmp_path / "x.nq"), "--base", text]) == 2
    assert "base IRI" in capsys.readouterr().err
    assert not (tmp_path / "x.nq").exists()


def test_raw_sparql_updates_and_federation_are_refused(store, capsys):
    before = counts(store, capsys)
    for text in ["DROP ALL", "INSERT DATA { <a:a> <a:b> <a:c> }", "SELECT * WHERE { SERVICE <http://evil.example/> { ?s ?p ?o } }",
                 "SELECT * FROM <file:///etc/passwd> WHERE { ?s ?p ?o }"]:
        assert main(["query", "--sparql", text, "--store", store]) == 2
        assert "error:" in capsys.readouterr().err
    assert counts(store, capsys) == before
