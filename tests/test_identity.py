"""Deterministic, safe IRIs: the same trace gives the same graph, and no input text reaches an IRI."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyoxigraph as ox
import pytest
from conftest import examples, load
from hypothesis import given, settings
from hypothesis import strategies as st

from dspy_rdf import RdfFormat, parse_traces, serialize_traces, trace_from_json, trace_iri, verify_trace_iri
from dspy_rdf.canonical.identity import CONTENT_KEY_PREFIX, DEFAULT_BASE
from dspy_rdf.rdf.writer import trace_lines

HOSTILE = ["a b", 'quote"d', "<angle>", "hash#frag", "per%20cent", "new\nline", "nul\x00byte", "e\u0301", "é", "🙂", "back\\slash", "}{", ""]


def test_exporting_the_same_trace_twice_gives_the_identical_graph():
    data = load("history_entry_all_parts.json")
    first = serialize_traces([trace_from_json(data)], RdfFormat.N_QUADS)
    second = serialize_traces([trace_from_json(load("history_entry_all_parts.json"))], RdfFormat.N_QUADS)
    assert first == second
    assert trace_iri(trace_from_json(data)).startswith(DEFAULT_BASE + CONTENT_KEY_PREFIX)


def test_a_changed_trace_gets_another_iri_and_verify_notices():
    data = load("part_text.json")
    trace = trace_from_json(data)
    iri = trace_iri(trace)
    assert verify_trace_iri(trace, iri)
    data["messages"][0]["parts"][0]["text"] += "!"
    assert not verify_trace_iri(trace_from_json(data), iri)


@pytest.mark.parametrize("text", HOSTILE, ids=repr)
def test_hostile_tool_names_and_call_ids_stay_out_of_iris(text):
    data = load("part_tool_call.json")
    data["messages"][0]["parts"][0].update(name=text, id=text)
    trace = trace_from_json(data)
    iri, lines = trace_lines(trace)
    quads = list(ox.parse("".join(lines).encode("utf-8"), ox.RdfFormat.N_QUADS))
    iris = {t.value for q in quads for t in (q.subject, q.object, q.graph_name) if isinstance(t, ox.NamedNode)}
    assert all(i.startswith(iri) or i.startswith("https://w3id.org/lmodel/dspy/") for i in iris)
    [(_, back)] = parse_traces(serialize_traces([trace], RdfFormat.TURTLE), RdfFormat.TURTLE)
    assert back.request.messages[0].parts[0].name == text
    assert back.request.messages[0].parts[0].call_id == text


def test_the_base_iri_is_configurable_and_checked():
    trace = trace_from_json(load("part_text.json"))
    assert trace_iri(trace, base="https://example.org/traces/").startswith("https://example.org/traces/content-")
    nq = serialize_traces([trace], RdfFormat.N_QUADS, base="https://example.org/traces/")
    [(iri, _)] = parse_traces(nq, RdfFormat.N_QUADS)
    assert iri.startswith("https://example.org/traces/")
    with pytest.raises(ValueError, match="not an absolute IRI"):
        serialize_traces([trace], RdfFormat.N_QUADS, base="no scheme here")


# --- the keys of stored data: a change here re-keys every store, so each is pinned -----------------------------------

PINNED_KEYS = {
    # source format: (input, the trace's key)
    "dspy33": ("history_entry_all_parts.json", "content-8ac8fcd6ccd7014548b86ad6462646ae"),
    "lm15": ("dspy341_lm15_request.json", "content-4e4ffe3da27ef73fd64e89931f5afa7a"),
    "history_dict": ("history_dicts_dspy3.3.1.json", "content-5868e74094a9a0ab352aa4950dfb8db4"),
    "openai_chat": ("openai_exchange_tool_loop.json", "content-06e2cc36029939dd93017fa209835bc5"),
    "react_trajectory": ("dspy341_react_trajectory.json", "content-87a81df87b93b86ce7660a99b85939ad"),
    "dspy_history": (None, "content-685764e6885c927a5c5414007979be36"),
    "dspy_callback": ("crosspath/capture.jsonl", "run-76487100beba97a2b8bfb51f259479a7"),
    "mlflow": ("mlflow/mlflow3_sqlite_traces.jsonl", "run-d5b520f68388ab0e946740c09c701433"),
    "otlp": ("otlp/openinference_dspy331.json", "run-dd7384b2f5d92441957096c976dc5251"),
}


def _first_trace(source_format: str):
    from pathlib import Path

    from dspy_rdf.inputs import read_traces

    name, _ = PINNED_KEYS[source_format]
    if name is None:  # a conversation dspy.History: made here, as a program holds it
        import dspy

        from dspy_rdf import trace_from_dspy

        return trace_from_dspy(dspy.History(messages=[{"question": "2 + 2?", "answer": "4"}, {"question": "and 3 + 3?", "answer": "6"}]))
    return next(iter(read_traces(Path(__file__).parent / "data" / name))).trace


def test_every_source_format_is_pinned():
    from dspy_rdf.canonical.model import SOURCE_FORMATS

    assert set(PINNED_KEYS) == set(SOURCE_FORMATS)


@pytest.mark.parametrize("source_format", list(PINNED_KEYS))
def test_the_key_of_one_trace_per_source_format_is_pinned(source_format):
    """A refactoring (of a reader, of how a source writes its JSON back, of the model) must not re-key stored data
    silently: this fails first. A change of the keys on purpose comes with `dspy-rdf migrate` support and new pins."""
    from dspy_rdf.canonical.identity import trace_key

    trace = _first_trace(source_format)
    assert (trace.source_format, trace_key(trace)) == (source_format, PINNED_KEYS[source_format][1])


def test_the_content_digest_depends_on_the_model_only():
    """The digest of a trace built in code, with no reader involved: the canonical form of the model is pinned."""
    from dspy_rdf.canonical import model as m
    from dspy_rdf.canonical.identity import content_digest, content_payload, model_json

    trace = m.Trace(source_kind="lm_part", parts=[m.LMTextPart(text="hello", metadata={"b": 1, "a": [1.5, None]})])
    assert model_json(trace) == {"@": "Trace", "source_kind": "lm_part", "parts": [{"@": "LMTextPart", "text": "hello", "metadata": {"b": 1, "a": [1.5, None]}}]}
    assert content_payload(trace) == '{"@":"Trace","parts":[{"@":"LMTextPart","metadata":{"a":[1.5,null],"b":1},"text":"hello"}],"source_kind":"lm_part"}'
    assert content_digest(content_payload(trace)) == "sha256:" + __import__("hashlib").sha256(content_payload(trace).encode()).hexdigest()
    read_back = dataclasses.replace(trace, source_index=7, content_digest="sha256:" + "0" * 64)  # where it was read, not what it holds
    assert content_payload(read_back) == content_payload(trace)


def test_a_session_and_user_are_part_of_the_content_and_leave_a_trace_without_them_as_it_was():
    """A content-keyed trace in a session is another trace than the same content outside it; a program run's key is
    its execution's, session or not (tests/test_sessions.py); a trace without them keeps its pinned digest."""
    from dspy_rdf.canonical import model as m
    from dspy_rdf.canonical.identity import content_payload, trace_key

    trace = m.Trace(source_kind="lm_part", parts=[m.LMTextPart(text="hello")])
    with_session = dataclasses.replace(trace, session_id="s", user_id="u")
    assert content_payload(trace) == '{"@":"Trace","parts":[{"@":"LMTextPart","text":"hello"}],"source_kind":"lm_part"}'
    assert content_payload(with_session) == '{"@":"Trace","parts":[{"@":"LMTextPart","text":"hello"}],"session_id":"s","source_kind":"lm_part","user_id":"u"}'
    assert trace_key(with_session) != trace_key(trace)


# --- the order key: what the queries listing traces order by ---------------------------------------------------

_HEX = "0123456789abcdef"


def test_the_queries_that_read_every_trace_compute_the_order_key_with_the_shared_expression():
    from dspy_rdf.analytics.catalog import get_query
    from dspy_rdf.canonical.identity import order_key_sparql

    expression = [line.strip() for line in order_key_sparql("?trace", "?trace_key").splitlines()]
    texts = {"scan/longest_conversations": get_query("longest_conversations").scan or ""}
    texts |= {f"raw/{path.stem}": path.read_text(encoding="utf-8") for path in (Path(__file__).parent / "data" / "raw_queries").glob("*.rq") if "trace_key" in path.read_text(encoding="utf-8")}
    assert len(texts) == 4
    for name, text in texts.items():
        lines = [line.strip() for line in text.splitlines()]
        assert any(lines[k:k + 2] == expression for k in range(len(lines))), name


@given(
    st.lists(
        st.tuples(st.sampled_from(["run-", "content-", "sha256-"]), st.text(_HEX, min_size=32, max_size=32), st.sampled_from([DEFAULT_BASE, "https://example.org/t/", "urn:x:"])),
        min_size=2,
        max_size=20,
    )
)
@settings(max_examples=examples(200), deadline=None)
def test_the_order_key_orders_traces_as_their_keys_do(keys):
    from dspy_rdf.canonical.identity import order_key

    iris = [base + kind + digits for kind, digits, base in keys]
    for iri in iris:
        assert len(order_key(iri)) == 15 and order_key(iri)[0] == iri.rsplit(":", 1)[-1].rsplit("/", 1)[-1][0]
    by_key = sorted(iris, key=lambda iri: (iri.rsplit(":", 1)[-1].rsplit("/", 1)[-1], iri))
    keys_in_order = [order_key(iri) for iri in by_key]
    assert keys_in_order == sorted(keys_in_order)


def test_the_order_key_computed_in_sparql_is_the_writers():
    """The queries that read every trace, and migrate's update, compute the key from the IRI: as the writer does."""
    from dspy_rdf.canonical.identity import order_key, order_key_sparql

    iris = [
        DEFAULT_BASE + "run-" + "0123456789abcdef" * 2,
        DEFAULT_BASE + "content-" + "fedcba9876543210" * 2,
        "https://example.org/traces/sha256-" + "a" * 32,
        "https://example.org/traces#run-" + "5" * 32,  # a base ending in '#'
        "https://example.org/t?id=content-" + "b" * 32,
        "urn:x:myrun-" + "c" * 32,
        "https://example.org/traces/run-" + "0" * 31,  # one digit short: not a key
        "https://example.org/traces/a-very-long-name-that-is-no-key",
        "urn:x:short",
        "urn:x:y/é🙂-name-beyond-fifteen",
        "https://example.org/ends-in-slash/",
    ]
    store = ox.Store()
    for iri in iris:
        store.add(ox.Quad(ox.NamedNode(iri), ox.NamedNode("urn:p"), ox.Literal("x"), ox.NamedNode(iri)))
    query = f"SELECT ?trace ?trace_key WHERE {{ GRAPH ?trace {{ ?trace <urn:p> ?x }} {order_key_sparql('?trace', '?trace_key')} }}"
    computed = {row["trace"].value: row["trace_key"].value for row in store.query(query)}
    assert computed == {iri: order_key(iri) for iri in iris}
    assert [order_key(iris[k]) for k in (0, 3, 5, 7, 10)] == ["r0123456789abcd", "r555555555555555"[:15], "rcccccccccccccc", "a-very-long-nam", ""]


def test_every_trace_carries_its_order_key_and_a_trace_with_an_unanswered_call_its_tools():
    from dspy_rdf.canonical.identity import order_key

    trace = trace_from_json({
        "request": {"model": "m", "tools": [{"name": "search"}], "messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]},
        "response": {"outputs": [{"parts": [{"type": "tool_call", "name": "search", "id": "c1"}, {"type": "tool_call", "name": "zap", "id": "c2"},
                                            {"type": "tool_call", "name": "search", "id": "c3"}]}]},
        "timestamp": "2025-01-31T12:00:00Z", "uuid": "6f1c2f0e-0d5e-4b8e-9a57-2b6f1f1f0002",
    }, source_format="dspy33")  # fmt: skip
    store = ox.Store()
    store.load(serialize_traces([trace], RdfFormat.N_QUADS), format=ox.RdfFormat.N_QUADS)
    iri = trace_iri(trace)
    rows = store.query(f"SELECT ?p ?o WHERE {{ GRAPH <{iri}> {{ <{iri}> ?p ?o }} }}")
    facts = sorted((row["p"].value.rsplit("/", 1)[-1], row["o"].value) for row in rows if row["p"].value.rsplit("/", 1)[-1] in ("order_key", "unanswered_tools"))
    assert facts == [("order_key", order_key(iri)), ("unanswered_tools", "search"), ("unanswered_tools", "zap")]
