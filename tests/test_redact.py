"""Secrets are redacted at export time by default (issue 6), starting from the real leak: DSPy 3.3.1 copies an
API key given to a typed LM's constructor into each history entry's request config."""

from __future__ import annotations

import json

import dspy
import pytest

from conftest import dspy33_types, load
from dspy_rdf.capture import FileSink, TraceRecorder
from dspy_rdf.cli import main
from dspy_rdf.formats import RdfFormat, parse_traces, serialize_traces
from dspy_rdf.redact import Redactor, marker
from dspy_rdf.store import EmbeddedStore
from dspy_rdf.tracejson import trace_from_dspy, trace_from_json, trace_to_json

OPENAI_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
SECRETS = {
    "openai_api_key": OPENAI_KEY,
    "anthropic_api_key": "sk-ant-api03-" + "x" * 40,
    "google_api_key": "AIza" + "B" * 35,
    "aws_access_key_id": "AKIA" + "ABCDEFGHIJKLMNOP",
    "github_token": "ghp_" + "c" * 36,
    "bearer_token": "eyJhbGciOiJIUzI1NiJ9.payload.signature123",
}


def keyed_lm() -> dspy.BaseLM:
    """A typed DSPy 3.3 LM given an API key, as a user would give one to a provider client."""
    types = dspy33_types()

    class KeyedLM(dspy.BaseLM):
        forward_contract = "typed_lm"

        def __init__(self) -> None:
            super().__init__(model="openai/gpt-4o-mini", cache=False, api_key=OPENAI_KEY)

        def forward(self, request):
            answer = "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"
            return types.LMResponse(
                model="gpt-4o-mini", outputs=[types.LMOutput(parts=[types.LMTextPart(text=answer)], finish_reason="stop")],
                usage=types.LMUsage(prompt_tokens=10, completion_tokens=2),
            )

    return KeyedLM()


@pytest.fixture(scope="module")
def leaky_history():
    lm = keyed_lm()
    with dspy.context(lm=lm):
        dspy.Predict("question -> answer")(question="Capital of France?")
    return lm.history


def test_dspy_really_puts_the_key_into_the_history_entry(leaky_history):
    assert OPENAI_KEY in json.dumps(leaky_history[0].model_dump(mode="json"))  # the reason for all of this


def test_the_key_is_redacted_in_every_rdf_format_and_the_trace_says_so(leaky_history):
    trace = trace_from_dspy(leaky_history)
    for fmt in RdfFormat:
        data = serialize_traces([trace], fmt)
        assert OPENAI_KEY.encode() not in data
        [(_, back)] = parse_traces(data, fmt)
        assert back.redactions and sum(back.redactions.values()) >= 1
        assert back.entries[0].request.config.extensions["api_key"] in (marker("secret_field"), marker("openai_api_key"))
    assert OPENAI_KEY in json.dumps(trace_to_json(trace))  # the trace object given is not modified


@pytest.mark.parametrize("kind", list(SECRETS))
def test_each_well_known_secret_is_replaced_by_a_marker_naming_its_kind(kind):
    text = f"Authorization: Bearer {SECRETS[kind]}" if kind == "bearer_token" else f"my key is {SECRETS[kind]} ok"
    trace = trace_from_json({**load("part_text.json"), "metadata": {"note": text}})
    redacted = Redactor()(trace)
    assert SECRETS[kind] not in json.dumps(trace_to_json(redacted))
    assert marker(kind) in redacted.request.metadata["note"] and redacted.redactions == {kind: 1}


@pytest.mark.parametrize("field", ["api_key", "API-Key", "Authorization", "x-api-key", "password", "aws_secret_access_key"])
def test_secret_fields_are_redacted_in_json_slots_at_any_depth(field):
    value = load("part_tool_call.json")
    value["messages"][0]["parts"][0]["provider_data"] = {"headers": [{field: "hunter2-value"}]}
    value["messages"][0]["parts"][0]["args"] = {"login": {field: "another-value", "max_tokens": 5}}
    redacted = Redactor()(trace_from_json(value))
    text = json.dumps(trace_to_json(redacted))
    assert "hunter2-value" not in text and "another-value" not in text and '"max_tokens": 5' in text
    assert redacted.redactions == {"secret_field": 2}


def test_nothing_to_redact_returns_the_same_trace_object():
    trace = trace_from_json(load("history_entry_all_parts.json"))
    assert Redactor()(trace) is trace


def test_users_add_patterns_fields_and_callables_or_turn_it_off():
    value = load("part_text.json")
    value["metadata"] = {"employee": "EMP-123456", "internal_ref": "abc", "note": "call 555-0100"}
    trace = trace_from_json(value)
    custom = Redactor(extra_patterns={"employee_id": r"EMP-\d{6}"}, extra_fields=["internal_ref"], callback=lambda s: s.replace("555-0100", "[phone]"))
    meta = custom(trace).request.metadata
    assert meta == {"employee": marker("employee_id"), "internal_ref": marker("secret_field"), "note": "call [phone]"}
    assert custom(trace).redactions == {"custom": 1, "employee_id": 1, "secret_field": 1}
    with pytest.raises(ValueError, match="not a valid regular expression"):
        Redactor(extra_patterns={"bad": "("})


def test_redaction_survives_to_json_and_back(tmp_path, leaky_history):
    source = tmp_path / "leaky.json"
    source.write_text(json.dumps([e.model_dump(mode="json") for e in leaky_history]), encoding="utf-8")
    first, back, second = tmp_path / "a.nq", tmp_path / "back.json", tmp_path / "b.nq"
    assert main(["export", str(source), "-o", str(first)]) == 0
    assert main(["to-json", str(first), "-o", str(back)]) == 0
    assert OPENAI_KEY not in back.read_text(encoding="utf-8")
    assert main(["export", str(back), "-o", str(second)]) == 0
    assert sorted(first.read_text().splitlines()) == sorted(second.read_text().splitlines())


def test_cli_redacts_into_files_and_stores_unless_told_not_to(tmp_path, leaky_history):
    source = tmp_path / "leaky.json"
    source.write_text(json.dumps([e.model_dump(mode="json") for e in leaky_history]), encoding="utf-8")
    assert main(["export", str(source), "-o", str(tmp_path / "r.nq")]) == 0
    assert OPENAI_KEY not in (tmp_path / "r.nq").read_text()
    assert main(["export", str(source), "--store", str(tmp_path / "store")]) == 0
    with EmbeddedStore(tmp_path / "store") as store:
        dump = store.select("SELECT ?o WHERE { GRAPH ?g { ?s ?p ?o } }")
        assert OPENAI_KEY not in json.dumps(dump)
    assert main(["export", str(source), "-o", str(tmp_path / "raw.nq"), "--no-redact"]) == 0
    assert OPENAI_KEY in (tmp_path / "raw.nq").read_text()
    assert main(["export", str(source), "-o", str(tmp_path / "x.nq"), "--no-redact", "--redact-field", "a"]) == 2


@pytest.mark.parametrize("suffix", [".nq", ".jsonl"])
def test_the_capture_file_sink_redacts(tmp_path, suffix):
    sink = FileSink(tmp_path / f"runs{suffix}")
    recorder = TraceRecorder(sink)
    with dspy.context(lm=keyed_lm(), callbacks=[recorder]):
        dspy.Predict("question -> answer")(question="Capital of France?")
    assert recorder.errors == []
    text = (tmp_path / f"runs{suffix}").read_text(encoding="utf-8")
    assert OPENAI_KEY not in text and "REDACTED" in text
    assert "/redactions>" in text if suffix == ".nq" else '"redactions"' in text
