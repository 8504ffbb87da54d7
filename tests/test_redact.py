"""Secrets are redacted at export time by default, starting from the real leak: DSPy 3.3.1 copies an API key given
to a typed LM's constructor into each history entry's request config; then every key format, secret field name and
credential-bearing value a trace may carry, and the pre-check that lets most traces skip the walk."""

from __future__ import annotations

import json
import re
from pathlib import Path

import dspy
import pytest
from conftest import DATA, dspy33_types, examples, load
from hypothesis import given, settings
from hypothesis import strategies as st

import dspy_rdf
from dspy_rdf.canonical.identity import content_payload
from dspy_rdf.canonical.model import canonical_datetime
from dspy_rdf.canonical.redact import (
    DATA_KEY_WORDS,
    DEFAULT_PATTERNS,
    DEFAULT_REDACTOR,
    DESCRIBING_WORDS,
    TEXT_KEY,
    Redactor,
    is_secret_field,
    marker,
    text_keys,
)
from dspy_rdf.capture.recorder import FileSink, TraceRecorder
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.formats import RdfFormat, parse_traces, serialize_traces
from dspy_rdf.sources.tracejson import trace_from_dspy, trace_from_json, trace_to_json
from dspy_rdf.store import EmbeddedStore

OPENAI_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
SECRETS = {
    "openai_api_key": OPENAI_KEY,
    "anthropic_api_key": "sk-ant-api03-" + "x" * 40,
    "google_api_key": "AIza" + "B" * 35,
    "aws_access_key_id": "AKIA" + "ABCDEFGHIJKLMNOP",
    "github_token": "ghp_" + "c" * 36,
    "bearer_token": "eyJhbGciOiJIUzI1NiJ9.payload.signature123",
    "stripe_key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "groq_api_key": "gsk_" + "Q" * 52,
    "huggingface_token": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "json_web_token": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r",
    "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
    "stripe_webhook_secret": "whsec_" + "Zk3pQ9xW2mN7vB4cR8tY1uH6jL0sD5aE",
    "slack_token": "xoxb-" + "1234567890-AbCdEfGhIj",
    "digest_response": "6629fae49393a05397450978507c4ef1",
    "azure_storage_key": "q1Wm2Zx8Ab+c/d9Ef0Gh3Ij4Kl5Mn6Op7Qr8St9Uv==",
    "azure_shared_access_key": "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI=",
    "azure_shared_access_signature": "sr=sb%3A%2F%2Fns.servicebus.windows.net&sig=U2lnbmF0dXJlVmFsdWU%3D&se=1767225600&skn=Root",
    "basic_credentials": "cnVzZXI6aHVudGVyMi1wYXNzd29yZA==",
    "url_credentials": "ruser:hunter2pw",
    "url_credential_parameter": "AbC123sEcReT",
}
# how each secret appears in text (most appear anywhere; some only in their context)
CONTEXT = {
    "bearer_token": "Authorization: Bearer {}",
    "azure_storage_key": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core.windows.net",
    "azure_shared_access_key": "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={}",
    "azure_shared_access_signature": "Authorization: SharedAccessSignature {}",
    "digest_response": 'Authorization: Digest username="u", realm="r", nonce="n", uri="/", response="{}"',
    "basic_credentials": "Authorization: Basic {}",
    "url_credentials": "postgres://{}@db.internal:5432/app",
    "url_credential_parameter": "see https://maps.example.com/api?q=paris&key={}&z=3",
}


# Secrets in the places they appear in (found by the patterns above), and the text that must survive around them.
SECRETS_IN_CONTEXT = [
    ("redis://:redispass1234@cache:6379/0", "redispass1234", "@cache:6379/0"),
    ("postgresql://u:pw4@h/db", "pw4", "@h/db"),
    (
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=QkJDRGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo0NTY3ODk9",
        "QkJDRGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo0NTY3ODk9", "SharedAccessKeyName=RootManageSharedAccessKey",
    ),
    ("SharedAccessSignature sig=SigFirst0123%2Bx%3D&se=1767225600&skn=Root&sr=sb%3A%2F%2Fns", "SigFirst0123", "SharedAccessSignature"),
    ("BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&ss=b&sp=rl&sig=StorSig0123%3D", "StorSig0123", "BlobEndpoint"),
    ("https://x.example/cb?refresh_token=RefReshTok123&x=1", "RefReshTok123", "&x=1"),
    ("https://x.example/cb?state=s&id_token=IdTokValue456", "IdTokValue456", "?state=s"),
    ("https://app.example/callback#access_token=FragAccessTok789&token_type=bearer", "FragAccessTok789", "&token_type=bearer"),
    ("https://b.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=abc0123456789", "abc0123456789", "AWS4-HMAC-SHA256"),
    ("https://b.s3.amazonaws.com/o?X-Amz-Credential=AKIDEXAMPLE%2F20260101%2Fus-east-1&X-Amz-Date=1", "AKIDEXAMPLE", "&X-Amz-Date=1"),
    ("https://b.s3.amazonaws.com/o?X-Amz-Security-Token=FQoGZXIvYXdzSessionTok&X-Amz-Expires=60", "FQoGZXIvYXdzSessionTok", "&X-Amz-Expires=60"),
    ("https://storage.googleapis.com/b/o?X-Goog-Credential=sa%40p.iam&X-Goog-Signature=0a1b2c3d4e5f", "0a1b2c3d4e5f", "storage.googleapis.com"),
    ("STRIPE_WEBHOOK_SECRET=whsec_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv", "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv", "STRIPE_WEBHOOK_SECRET="),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGPgpPrivBody\n=AbCd\n-----END PGP PRIVATE KEY BLOCK-----\nend", "lQOYBGPgpPrivBody", "end"),
]  # fmt: skip


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
    text = CONTEXT.get(kind, "my key is {} ok").format(SECRETS[kind])
    trace = trace_from_json({**load("part_text.json"), "metadata": {"note": text}})
    assert DEFAULT_REDACTOR.may_hold_secrets(json.dumps(trace_to_json(trace), sort_keys=True, separators=(",", ":")))
    redacted = Redactor()(trace)
    assert SECRETS[kind] not in json.dumps(trace_to_json(redacted))
    assert marker(kind) in redacted.request.metadata["note"] and redacted.redactions == {kind: 1}
    assert DEFAULT_REDACTOR.redact_text(text) == redacted.request.metadata["note"]


def test_every_default_pattern_has_an_example_secret():
    assert set(SECRETS) == set(DEFAULT_PATTERNS)


@pytest.mark.parametrize(("text", "secret", "kept"), SECRETS_IN_CONTEXT)
def test_secrets_in_urls_connection_strings_and_key_blocks_are_redacted_and_the_pre_check_sees_them(text, secret, kept):
    trace = trace_from_json({**load("part_text.json"), "metadata": {"note": text}})
    assert DEFAULT_REDACTOR.may_hold_secrets(content_payload(trace))
    note = Redactor()(trace).request.metadata["note"]
    assert secret not in note and "[REDACTED:" in note and kept in note
    assert DEFAULT_REDACTOR.redact_text(text) == note


@pytest.mark.parametrize("parameter", ["key", "api_key", "API-KEY", "sig", "signature", "access_token", "client_secret"])
def test_credential_parameters_of_urls_are_redacted_and_the_rest_of_the_url_kept(parameter):
    text = f"GET https://x.example/v1?{parameter}=s3cr3tValue&alt=json"
    assert DEFAULT_REDACTOR.redact_text(text) == f"GET https://x.example/v1?{parameter}=[REDACTED:url_credential_parameter]&alt=json"
    assert DEFAULT_REDACTOR.redact_text("https://x.example/v1?keyword=paris&monkey=1") == "https://x.example/v1?keyword=paris&monkey=1"


ISSUED_FIELDS = [
    "api_key", "API-Key", "Authorization", "x-api-key", "password", "aws_secret_access_key", "anthropic_api_key",
    "db_password", "api_token", "credentials", "connection_string", "sas_token", "passphrase", "pwd", "ApiKey",
    "X-Goog-Api-Key", "private_key", "client_secret", "refresh_token", "access_tokens", "Cookie", "auth", "sig",
    "ocp-apim-subscription-key", "Ocp-Apim-Subscription-Key", "stripe_key", "signing_key", "signingKey", "SIGNING_KEY",
    "encryption_key", "encryption_keys", "openai_key", "x-functions-key", "master_key", "bearer", "dsn", "sentry_dsn",
    "DATABASE_DSN", "private_key_id", "signing_key_2", "encryptionKey2", "secondary_key",
]  # fmt: skip
HARMLESS_FIELDS = [
    "max_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens", "max_completion_tokens", "token",
    "top_logprobs", "tokenizer", "token_count", "signature", "thinking_signature", "author", "keyword", "monkey",
    "key", "keys", "primary_key", "foreign_key", "cache_key", "prompt_cache_key", "sort_key", "sortKey",
    "idempotency_key", "Idempotency-Key", "partition_key", "input_keys", "public_key", "hotkey", "turkey",
    "password_min_length", "passwordMinLength", "password_max_length", "api_key_name", "secret_name",
    "credential_type", "password_policy", "password_required", "secretEnabled", "token_limit", "bearer_format",
    "password_hint", "password_field", "budget_tokens", "sort_key_2", "s3Bucket", "key1",
]  # fmt: skip


@pytest.mark.parametrize("field", ISSUED_FIELDS)
def test_secret_field_names_are_recognised_by_what_they_say(field):
    assert is_secret_field(field)


@pytest.mark.parametrize("field", HARMLESS_FIELDS)
def test_harmless_field_names_are_kept(field):
    assert not is_secret_field(field)


def test_the_readme_lists_every_word_that_keeps_a_field():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    secrets = readme[readme.index("## Secrets"):readme.index("## Analytics")]
    assert [word for word in sorted(DATA_KEY_WORDS | DESCRIBING_WORDS) if f"`{word}`" not in secrets] == []


def test_a_policy_about_a_secret_and_yes_or_no_values_are_kept():
    settings = {"password_min_length": 8, "passwordRequired": True, "has_api_key": False, "api_key": "k-123456"}
    assert DEFAULT_REDACTOR.redact_json(settings) == {**settings, "api_key": marker("secret_field")}


def test_a_tool_schema_describing_a_secret_is_kept_but_for_the_values_it_gives():
    value = load("request_all_parts.json")
    schema = value["tools"][0]["parameters"]
    schema["properties"]["api_key"] = {"type": "string", "description": "the caller's key", "default": "dflt-s3cret"}
    schema["properties"]["account"] = {"$ref": "#/$defs/Account"}
    schema["$defs"] = {"Account": {"type": "object", "properties": {"password": {"type": "string", "minLength": 8}}}}
    schema["required"] = ["query", "api_key"]
    trace = trace_from_json(value)
    assert DEFAULT_REDACTOR.may_hold_secrets(content_payload(trace))
    redacted = Redactor()(trace)
    kept = redacted.request.tools[0].parameters
    assert kept["properties"]["api_key"] == {"type": "string", "description": "the caller's key", "default": marker("secret_field")}
    assert kept["properties"]["account"] == {"$ref": "#/$defs/Account"} and kept["$defs"] == schema["$defs"]
    assert kept["required"] == ["query", "api_key"] and redacted.redactions == {"secret_field": 1}


@pytest.mark.parametrize(
    "value",
    [
        {"user": "u", "password": "p"},
        {"type": "service_account", "project_id": "demo", "private_key": "k", "client_email": "bot@demo.iam"},
        {"type": "bearer", "value": "v"},
        {"items": ["first-secret", "second-secret"]},
        {"type": [{"first": "secret"}], "default": "second-secret"},
        {"type": {"first": "secret"}},
        ["first-secret"],
        "plain-secret",
    ],
)
def test_a_value_under_a_secret_name_that_is_not_a_schema_is_replaced_whole(value):
    redacted = marker("secret_field")
    assert DEFAULT_REDACTOR.redact_json({"credentials": value, "api_key": value}) == {"credentials": redacted, "api_key": redacted}


def test_a_google_service_account_json_loses_its_key_and_keeps_the_rest():
    account = {
        "type": "service_account", "project_id": "demo", "private_key_id": "0123456789abcdef0123456789abcdef01234567",
        "private_key": SECRETS["private_key"], "client_email": "bot@demo.iam.gserviceaccount.com", "client_id": "1234567890",
    }  # fmt: skip
    out = DEFAULT_REDACTOR.redact_json({"tool_args": {"credentials_json": json.dumps(account), "account": account}})
    assert "BEGIN PRIVATE KEY" not in json.dumps(out) and "0123456789abcdef" not in json.dumps(out)
    kept = out["tool_args"]["account"]
    assert kept["client_email"] == account["client_email"] and kept["project_id"] == "demo"


def test_thinking_signatures_are_not_credentials_and_survive():
    trace = trace_from_json(load("dspy341_lm15_request.json"))  # an Anthropic thinking block and its signature
    assert '"signature": "sig-1"' in json.dumps(trace_to_json(trace)) and Redactor()(trace) is trace


def test_a_pattern_that_can_match_the_empty_string_is_refused(tmp_path, capsys):
    for regex in ("a*", "x?", "(?=a)", "\\b", "|k", "(?=s)", "(?=[A-Z])", "(?<=a)", "(?<=\\d)(?=T)", "(?<=\\w)(?=\\W)", "(?=\\{)", "(?=\u00e9)"):
        with pytest.raises(ValueError, match="can match the empty string"):
            Redactor(extra_patterns={"k": regex})
    source = tmp_path / "t.json"
    source.write_text(json.dumps(load("part_text.json")), encoding="utf-8")
    assert main(["export", str(source), "-o", str(tmp_path / "o.nq"), "--redact-pattern", "k=a*"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "can match the empty string" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "o.nq").exists()


def test_the_cli_refuses_a_zero_width_pattern_in_one_line_and_writes_nothing(tmp_path, capsys):
    source, out = DATA / "history_dicts_dspy3.3.1.json", tmp_path / "cap.nq"
    assert main(["export", str(source), "-o", str(out), "--redact-pattern", "x=(?=[A-Z])"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "can match the empty string" in err[0] and not out.exists()


def test_an_empty_match_never_replaces_anything():
    # (?=ZQX) matches empty only before "ZQX", which the refusal's sample text does not hold
    redactor = Redactor(patterns={"early": "(?=ZQX)", "code": r"ZQX\d+"})
    assert redactor.redact_text("system ZQX at 2026-11-22T20:15:03") == "system ZQX at 2026-11-22T20:15:03"
    assert redactor.redact_text("id ZQX123.") == f"id {marker('code')}."
    trace = trace_from_json({**load("part_text.json"), "metadata": {"note": "ZQX here"}})
    assert redactor(trace) is trace
    assert redactor.redact_term_text('"ZQX here"') == '"ZQX here"'
    assert redactor.redact_json({"a": ["ZQX"]}) == {"a": ["ZQX"]}


def test_a_users_pattern_leaves_the_kind_of_a_trace_and_its_times_alone(tmp_path):
    entries = load("history_dicts_dspy3.3.1.json")
    entries[0]["messages"][-1]["content"] += " Born 1990-04-01, see the history."
    source, out = tmp_path / "history.json", tmp_path / "out.nq"
    source.write_text(json.dumps(entries), encoding="utf-8")
    patterns = ["--redact-pattern", r"date=\d{4}-\d\d-\d\d", "--redact-pattern", "word=history"]
    assert main(["export", str(source), "-o", str(out), *patterns]) == 0
    [(_, trace)] = parse_traces(out.read_bytes(), RdfFormat.N_QUADS)
    assert trace.source_kind == "lm_history" and [e.timestamp for e in trace.entries] == [canonical_datetime(e["timestamp"]) for e in entries]
    assert "1990-04-01" not in out.read_text(encoding="utf-8") and trace.redactions["date"] >= 1


@pytest.mark.parametrize("field", ISSUED_FIELDS)
def test_secret_fields_are_redacted_in_json_slots_at_any_depth(field):
    value = load("part_tool_call.json")
    value["messages"][0]["parts"][0]["provider_data"] = {"headers": [{field: "hunter2-value"}]}
    value["messages"][0]["parts"][0]["args"] = {"login": {field: "another-value", "max_tokens": 5}}
    assert DEFAULT_REDACTOR.may_hold_secrets(content_payload(trace_from_json(value)))
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


def test_cli_export_of_a_history_dict_keeps_no_secret_of_its_kwargs_or_messages(tmp_path):
    entries = load("history_dicts_dspy3.3.1.json")[:1]
    fields = {
        "ocp-apim-subscription-key": "apim-1f2e3d", "stripe_key": "stripe-4c5b6a", "signing_key": "sign-7d8e9f",
        "encryption_key": "enc-0a1b2c", "bearer": "bearer-3d4e5f", "dsn": "postgresql://u:dsnpw@h/db", "password_min_length": 8,
    }  # fmt: skip
    entries[0]["kwargs"] = {**fields, "note": "\n".join(text for text, _, _ in SECRETS_IN_CONTEXT)}
    entries[0]["messages"] = [*entries[0]["messages"], {"role": "user", "content": " ".join(text for text, _, _ in SECRETS_IN_CONTEXT)}]
    source = tmp_path / "history.json"
    source.write_text(json.dumps(entries), encoding="utf-8")
    assert main(["export", str(source), "-o", str(tmp_path / "out.nq")]) == 0
    written = (tmp_path / "out.nq").read_text(encoding="utf-8")
    leaked = [secret for _, secret, _ in SECRETS_IN_CONTEXT if secret in written]
    leaked += [value for name, value in fields.items() if name != "password_min_length" and value in written]
    assert leaked == [] and 'password_min_length\\":8' in written


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
    sink.close()
    assert recorder.errors == []
    text = (tmp_path / f"runs{suffix}").read_text(encoding="utf-8")
    assert OPENAI_KEY not in text and "REDACTED" in text
    assert "/redactions>" in text if suffix == ".nq" else '"redactions"' in text


# --- every copy of a value: raw JSON text, provider payloads kept as their repr, object keys ---------------------------

RAW_SECRET = "hunter2-raw-value"


def _tool_call_exchange(field: str) -> dict:
    """An OpenAI exchange whose tool call carries a secret argument, in its raw arguments string as providers send it."""
    arguments = json.dumps({field: RAW_SECRET, "city": "Paris"})
    return {
        "request": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Log in and get the weather."}]},
        "response": {"id": "r1", "model": "gpt-4o-mini", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "login", "arguments": arguments}}],
        }}]},
    }  # fmt: skip


@pytest.mark.parametrize("field", ISSUED_FIELDS)
def test_a_secret_argument_of_a_tool_call_is_redacted_in_every_copy(tmp_path, field):
    source = tmp_path / "exchange.json"
    source.write_text(json.dumps(_tool_call_exchange(field)), encoding="utf-8")
    for fmt in ("nq", "jsonld"):
        assert main(["export", str(source), "-o", str(tmp_path / f"out.{fmt}")]) == 0
        text = (tmp_path / f"out.{fmt}").read_text(encoding="utf-8")
        assert RAW_SECRET not in text and "Paris" in text, (field, fmt)
    [(_, trace)] = parse_traces(tmp_path / "out.nq", RdfFormat.N_QUADS)
    assert trace.redactions["secret_field"] >= 2  # the parsed arguments and their raw copy


def test_a_secret_used_as_a_key_is_redacted_and_keys_stay_distinct():
    first, second = "sk-proj-" + "A" * 40, "sk-proj-" + "B" * 40
    redacted = DEFAULT_REDACTOR.redact_json({first: 1, second: 2, "city": "Paris"})
    assert redacted == {"[REDACTED:openai_api_key]": 1, "[REDACTED:openai_api_key] 2": 2, "city": "Paris"}


def test_secret_fields_in_reprs_and_raw_json_text_are_redacted_and_the_rest_kept():
    cases = {
        "ModelResponse(arguments='{\"api_key\": \"hunter2\", \"n\": 1}', name='w')": "ModelResponse(arguments='{\"api_key\": \"[REDACTED:secret_field]\", \"n\": 1}', name='w')",
        '{"arguments": "{\\"password\\": \\"hunter2\\"}"}': '{"arguments": "{\\"password\\": \\"[REDACTED:secret_field]\\"}"}',
        "{'client_secret': 'hunter2', 'a': 'b'}": "{'client_secret': '[REDACTED:secret_field]', 'a': 'b'}",
        "Login(password=\"hunter2\", user='me')": "Login(password=\"[REDACTED:secret_field]\", user='me')",
        '{"max_tokens": "10", "enabled": "true"}': '{"max_tokens": "10", "enabled": "true"}',
    }
    for text, expected in cases.items():
        assert DEFAULT_REDACTOR.redact_text(text) == expected, text
    assert DEFAULT_REDACTOR.may_hold_secrets(json.dumps({"args": json.dumps({"db_password": "x"})}))


def test_live_capture_of_a_tool_call_with_a_secret_argument_keeps_no_copy_of_it(tmp_path):
    """The real dspy.LM asks for a tool natively with an api_key argument: its parsed arguments, the raw arguments
    string and LiteLLM's response kept as its repr all hold the key; none of it reaches the file."""
    from lms import ScriptedLM, tool_call

    def login(api_key: str, city: str) -> str:
        """Log in and get the weather."""
        return "sunny"

    class CallsLogin(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tool = dspy.Tool(login)
            self.predict = dspy.Predict("question: str, tools: list[dspy.Tool] -> tool_calls: dspy.ToolCalls")

        def forward(self, question: str):
            calls = self.predict(question=question, tools=[self.tool]).tool_calls.tool_calls
            return dspy.Prediction(results=[self.tool(**call.args) for call in calls])

    lm = ScriptedLM([[tool_call("c1", "login", json.dumps({"api_key": RAW_SECRET, "city": "Paris"}))]])
    for suffix in (".nq", ".jsonl"):
        sink = FileSink(tmp_path / f"runs{suffix}")
        recorder = TraceRecorder(sink)
        lm.script = [[tool_call("c1", "login", json.dumps({"api_key": RAW_SECRET, "city": "Paris"}))]]
        with dspy.context(lm=lm, callbacks=[recorder], adapter=dspy.ChatAdapter(use_native_function_calling=True)):
            CallsLogin()(question="Log in, then the weather in Paris?")
        recorder.close()
        text = (tmp_path / f"runs{suffix}").read_text(encoding="utf-8")
        assert "Paris" in text and RAW_SECRET not in text, suffix
    assert lm.history and RAW_SECRET in json.dumps(lm.history[-1], default=str)  # the program itself kept it
    # the same LM call's lm.history entry, exported as a history dict
    from dspy_rdf.sources.live import json_data

    (tmp_path / "history.json").write_text(json.dumps([json_data(lm.history[-1])]), encoding="utf-8")
    assert main(["export", str(tmp_path / "history.json"), "-o", str(tmp_path / "history.nq")]) == 0
    text = (tmp_path / "history.nq").read_text(encoding="utf-8")
    assert "Paris" in text and RAW_SECRET not in text


KEY = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"


def test_an_error_hides_a_secret_in_the_iri_file_name_or_field_it_names_as_well_as_in_its_reason():
    from dspy_rdf.canonical.errors import RdfInputError, TraceInputError

    errors = [
        RdfInputError(f"bad value {KEY}", source=f"runs-{KEY}.nq:3", node=f"https://h.example/?api_key={KEY}", prop=f"urn:x:{KEY}"),
        TraceInputError(f"bad value {KEY}", source=f"runs-{KEY}.jsonl", line=2, field=f"request.headers.{KEY}"),
    ]
    for error in errors:
        assert KEY not in str(error) and "[REDACTED:openai_api_key]" in str(error)
    assert errors[0].node.endswith(KEY)  # the attributes keep the data; only what is shown is redacted


def test_the_command_line_shows_a_bad_rdf_file_s_error_without_the_key_it_quotes(tmp_path, capsys):
    bad = tmp_path / "bad.ttl"
    bad.write_text(f'<urn:x:a> <urn:x:b> "unterminated {KEY}\n', encoding="utf-8")
    assert main(["export", str(bad), "-o", str(tmp_path / "out.nq")]) != 0
    err = capsys.readouterr().err
    assert "bad.ttl" in err and KEY not in err


_KEY_TEXT = st.text(alphabet=st.sampled_from(list("ab_Z9é =:'\"\\{},x")), max_size=120)


@settings(max_examples=examples(3000), deadline=None)
@given(st.lists(_KEY_TEXT, max_size=4), st.sampled_from(["", "\\", "\\\\\\", "'", "\"", "=", "é"]))
def test_the_pre_check_finds_every_key_the_key_pattern_matches_anywhere(pieces, joint):
    """The pre-check reads keys in text from the end of each form; it must find every key that TEXT_KEY matches
    at any position (overlapping matches too), and nothing else."""
    text = joint.join(pieces)
    anywhere = re.compile("(?=(?:" + TEXT_KEY.pattern + "))")
    expected = {name for found in anywhere.findall(text) for name in found if name}
    assert text_keys(text) == expected
    assert {name for found in TEXT_KEY.findall(text) for name in found if name} <= text_keys(text)


@pytest.mark.parametrize("length", [1, 79, 80, 81, 82])
@pytest.mark.parametrize("form", ['{{"x": "\\"{k}\\": 1"}}', "{{'{k}': 1}}", "f({k}='v')", 'x é{k}=\\"v\\"', "_{k}='v'", '\\\\\\"{k}\\\\":'])
def test_the_pre_check_reads_keys_up_to_80_characters_in_every_form(form, length):
    text = form.format(k="k" * length)
    anywhere = re.compile("(?=(?:" + TEXT_KEY.pattern + "))")
    assert text_keys(text) == {name for found in anywhere.findall(text) for name in found if name}


def test_the_pre_check_finds_the_same_keys_in_every_bundled_trace():
    """On real traces the keys read from the ends of the forms are those the pattern finds, no more."""
    files = [Path(dspy_rdf.__file__).parent / "examples" / "dspy33_traces.jsonl", *sorted(DATA.glob("*.json"))]
    texts = [content_payload(item.trace) for path in files for item in read_traces(path) if item.trace is not None]
    assert len(texts) > 40
    for text in texts:
        assert text_keys(text) == {name for found in TEXT_KEY.findall(text) for name in found if name}
