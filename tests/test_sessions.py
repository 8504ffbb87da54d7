"""Sessions and users: live capture records them, MLflow's metadata and the spans' session.id / gen_ai.conversation.id /
user.id are read, every format and store keeps them exactly, to-otlp carries them, and the session queries give the
rows the model gives, whichever path the runs took."""

from __future__ import annotations

import copy
import dataclasses
import json

import dspy
import pytest
from conftest import DATA
from lms import ScriptedLM, fields
from test_analytics import comparable, session_truth
from traced_programs import ANSWERS, CONVERSATIONS, run_turn

from dspy_rdf.analytics.catalog import run_query
from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import TraceInputError
from dspy_rdf.canonical.identity import content_digest, content_payload, trace_iri
from dspy_rdf.capture.recorder import MemorySink, TraceRecorder
from dspy_rdf.inputs import read_traces
from dspy_rdf.interop.otlp import trace_to_resource_spans
from dspy_rdf.rdf.formats import RdfFormat, parse_traces, serialize_traces
from dspy_rdf.sources.run_json import run_from_json, run_to_json
from dspy_rdf.sources.tracejson import traces_from_json
from dspy_rdf.store import EmbeddedStore
from dspy_rdf.validation import validate_traces

SESSIONS = DATA / "sessions"
QUERIES = ("session_summary", "session_runs")
EXPECTED = [(session, user) for session, user, questions in CONVERSATIONS for _ in questions]
"""The session and user of each run of the conversations, in the order they ran."""


def converse(recorder: TraceRecorder) -> None:
    """The conversations of traced_programs.py, each session's runs made with the recorder's session and user set."""
    with dspy.context(callbacks=[recorder]):
        for session, user, questions in CONVERSATIONS:
            recorder.session_id, recorder.user_id = session, user
            for question in questions:
                run_turn(question)


@pytest.fixture(scope="module")
def captured() -> list[m.Trace]:
    """The conversations recorded live on the real dspy.LM (LiteLLM mock_response, LiteLLM's prices)."""
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    converse(recorder)
    assert recorder.errors == [] and len(sink.traces) == len(EXPECTED)
    return sink.traces


def rows(traces: list[m.Trace], where, params: dict | None = None) -> dict[str, list[dict]]:
    with EmbeddedStore(where) as store:
        report = store.put(traces)
        assert report.failed == []
        return {name: run_query(store, name, params).records() for name in QUERIES}


def without(records: list[dict], *columns: str) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in columns} for r in records]


# --- live capture --------------------------------------------------------------------------------------------------


def test_each_run_recorded_live_keeps_the_session_and_user_it_started_with(captured):
    assert [(t.session_id, t.user_id) for t in captured] == EXPECTED
    assert all(t.losses == [] for t in captured)


def test_the_session_queries_give_the_rows_the_model_gives(captured, tmp_path):
    found = rows(captured, tmp_path / "store")
    summary, runs = session_truth(captured)
    assert comparable(found["session_summary"]) == comparable(summary)
    assert comparable(found["session_runs"]) == comparable(runs)
    # LiteLLM priced every call of the real dspy.LM: the cost is known, and each session has one user
    assert [(r["session"], r["runs"], r["users"], r["user"], r["lm_calls"], r["priced_calls"]) for r in found["session_summary"]] == [
        (session, len(questions), 1, user, len(questions), len(questions)) for session, user, questions in CONVERSATIONS
    ]
    assert all(r["cost"] > 0 for r in found["session_runs"])
    [one] = rows(captured, tmp_path / "one", {"session": "conversation-2"})["session_summary"]
    assert one["session"] == "conversation-2" and one["runs"] == 1


def test_the_recorder_takes_its_keyword_arguments_and_a_run_keeps_the_session_it_started_in():
    sink = MemorySink()
    recorder = TraceRecorder(sink, session_id="first", user_id="erin")

    class SwitchesMidRun(dspy.Module):
        """Changes the recorder's session while it runs: the run keeps the one it started with."""

        def __init__(self) -> None:
            super().__init__()
            self.predict = dspy.Predict("question -> answer")

        def forward(self, question: str):
            recorder.session_id, recorder.user_id = "second", None
            return self.predict(question=question)

    with dspy.context(lm=ScriptedLM([fields(answer="4"), fields(answer="12")]), callbacks=[recorder]):
        SwitchesMidRun()(question="2 + 2?")
        dspy.Predict("question -> answer")(question="And times 3?")
    assert [(t.session_id, t.user_id) for t in sink.traces] == [("first", "erin"), ("second", None)]


@pytest.mark.parametrize(("bad", "error"), [("", ValueError), ("   ", ValueError), ("\n", ValueError), (42, TypeError), (b"id", TypeError)])
def test_the_recorder_refuses_an_empty_or_blank_id_and_what_is_not_text(bad, error):
    with pytest.raises(error, match="session_id"):
        TraceRecorder(session_id=bad)
    recorder = TraceRecorder()
    with pytest.raises(error, match="user_id"):
        recorder.user_id = bad
    assert recorder.user_id is None


# --- identity ------------------------------------------------------------------------------------------------------


def test_the_session_and_user_are_content_but_not_a_runs_key(captured):
    trace = captured[0]
    bare = dataclasses.replace(trace, session_id=None, user_id=None)
    assert trace_iri(bare) == trace_iri(trace)  # one execution, one trace: its key is the DSPy call id's
    digests = {content_digest(content_payload(t)) for t in (trace, bare, dataclasses.replace(trace, user_id="someone else"))}
    assert len(digests) == 3
    assert '"session_id"' not in content_payload(bare) and '"session_id":"conversation-1"' in content_payload(trace)


# --- every format and store keeps them -----------------------------------------------------------------------------

LONG = "session " + "x" * 100_000 + " ü\u2028\"'<>{}\\"
"""A very long id with characters that need escaping in every format."""


def test_every_rdf_format_the_run_json_and_the_store_keep_them_exactly(captured, tmp_path):
    trace = dataclasses.replace(copy.deepcopy(captured[0]), session_id=LONG, user_id="ü\tser")
    for fmt in RdfFormat:
        [(_, back)] = list(parse_traces(serialize_traces([trace], fmt), fmt))
        assert (back.session_id, back.user_id) == (LONG, "ü\tser") and back == dataclasses.replace(trace, source_index=None), fmt
    assert run_from_json(json.loads(json.dumps(run_to_json(trace)))) == dataclasses.replace(trace, source_index=None)
    with EmbeddedStore(tmp_path / "store") as store:
        store.put([trace])
        [(_, stored)] = list(store.traces())
        assert stored.session_id == LONG
        [row] = run_query(store, "session_runs", {"session": LONG}).records()
        assert row["user"] == "ü\tser"
    assert validate_traces([trace]).conforms


def test_a_blank_id_breaks_the_shapes_and_the_run_json_reader(captured):
    trace = dataclasses.replace(copy.deepcopy(captured[0]), session_id=" ")
    report = validate_traces([trace])
    assert not report.conforms and any("session_id" in str(v) for v in report.violations)
    data = run_to_json(captured[0])
    with pytest.raises(TraceInputError, match="empty session id"):
        run_from_json({**data, "session_id": ""})


# --- to-otlp and back ----------------------------------------------------------------------------------------------


def test_capture_and_its_otlp_export_read_back_give_the_same_session_rows(captured, tmp_path):
    exported = {"resourceSpans": [trace_to_resource_spans(t)[0] for t in captured]}
    back = traces_from_json(json.loads(json.dumps(exported)))
    assert [(t.session_id, t.user_id) for t in back] == EXPECTED
    assert [trace_iri(t) for t in back] == [trace_iri(t) for t in captured]
    direct, through = rows(captured, tmp_path / "direct"), rows(back, tmp_path / "through")
    # a response's cost is what the GenAI conventions cannot carry (listed in each trace's losses): all else is the same
    for name in QUERIES:
        assert without(through[name], "cost", "priced_calls") == without(direct[name], "cost", "priced_calls")


# --- what other recorders wrote ------------------------------------------------------------------------------------


def imported(name: str) -> list[m.Trace]:
    items = list(read_traces(SESSIONS / name))
    assert all(item.error is None for item in items), [str(item.error) for item in items]
    return sorted((item.trace for item in items), key=lambda t: t.started_at)


def test_openinference_using_session_and_using_user_are_read_from_the_spans():
    traces = imported("openinference_sessions.json")
    assert [(t.session_id, t.user_id) for t in traces] == EXPECTED
    # every span carries them (OpenInference sets them from the context): read, so no loss names them
    assert not any("session.id" in loss["reason"] or "user.id" in loss["reason"] for t in traces for loss in t.losses)


def test_mlflow_trace_metadata_names_the_session_and_the_user():
    traces = imported("mlflow3_sessions.jsonl")
    assert [(t.session_id, t.user_id) for t in traces] == EXPECTED
    # MLflow's other metadata (token usage, sizes, ...) is still listed as not held
    assert all(any(loss["field"] == "info" and "trace_metadata" in loss["reason"] for loss in t.losses) for t in traces)


def test_mlflow_metadata_holding_only_the_session_and_user_loses_nothing():
    data = json.loads((SESSIONS / "mlflow3_sessions.jsonl").read_text(encoding="utf-8").splitlines()[0])
    data["info"]["trace_metadata"] = {"mlflow.trace.session": "s", "mlflow.trace.user": "u"}
    [trace] = traces_from_json(data)
    assert (trace.session_id, trace.user_id) == ("s", "u")
    assert all("trace_metadata" not in loss["reason"] for loss in trace.losses)
    data["info"]["trace_metadata"] = {"mlflow.trace.session": "", "mlflow.trace.user": " "}  # empty: none
    [trace] = traces_from_json(data)
    assert (trace.session_id, trace.user_id) == (None, None)
    data["info"]["trace_metadata"] = {"mlflow.trace.session": 7}
    with pytest.raises(TraceInputError, match="mlflow.trace.session"):
        traces_from_json(data)


def test_the_genai_conversation_id_of_a_child_span_is_the_session():
    export = json.loads((SESSIONS / "genai_conversation.json").read_text(encoding="utf-8"))
    spans = [s for r in export["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]
    holders = [s for s in spans if any(a["key"] == "gen_ai.conversation.id" for a in s["attributes"])]
    assert holders and all("parentSpanId" in s for s in holders)  # on the chat spans, not on the roots
    traces = imported("genai_conversation.json")
    assert [(t.session_id, t.user_id) for t in traces] == [("thread-9", "erin")] * 2
    assert all(t.losses and not any("gen_ai.conversation.id" in loss["reason"] for loss in t.losses) for t in traces)


def test_every_recorder_of_the_conversations_gives_the_same_sessions(captured, tmp_path):
    """Live capture, OpenInference and MLflow recorded the same conversations: the same sessions, users and LM calls
    (their costs and times are each recorder's own)."""
    measured = ("cost", "priced_calls", "first_started", "last_started", "started_at", "ended_at", "trace")
    found = {name: rows(traces, tmp_path / name) for name, traces in (
        ("capture", captured), ("openinference", imported("openinference_sessions.json")), ("mlflow", imported("mlflow3_sessions.jsonl")),
    )}  # fmt: skip
    for name in QUERIES:
        want = without(found["capture"][name], *measured)
        assert without(found["openinference"][name], *measured) == want and without(found["mlflow"][name], *measured) == want, name


# --- hostile spans -------------------------------------------------------------------------------------------------


def openinference_export() -> dict:
    return json.loads((SESSIONS / "openinference_sessions.json").read_text(encoding="utf-8"))


def set_attribute(span: dict, key: str, value: dict | None) -> None:
    span["attributes"] = [a for a in span["attributes"] if a["key"] != key] + ([{"key": key, "value": value}] if value is not None else [])


def first_trace(export: dict) -> tuple[list[dict], m.Trace]:
    """The spans of the export's first trace, and that trace read from them."""
    spans = [s for r in export["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]
    first = [s for s in spans if s["traceId"] == spans[0]["traceId"]]
    export = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": first}]}]}
    [trace] = traces_from_json(json.loads(json.dumps(export)))
    return first, trace


def test_spans_that_disagree_keep_the_root_spans_session_and_list_the_others():
    spans, _ = first_trace(openinference_export())
    root = next(s for s in spans if "parentSpanId" not in s)
    child = next(s for s in spans if "parentSpanId" in s)
    set_attribute(child, "session.id", {"stringValue": "another session"})
    set_attribute(child, "gen_ai.conversation.id", {"stringValue": "a third"})
    set_attribute(root, "user.id", None)  # the user comes from the first span in start order that names one
    export = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
    [trace] = traces_from_json(json.loads(json.dumps(export)))
    assert (trace.session_id, trace.user_id) == ("conversation-1", "alice")
    listed = {(loss["field"], loss["reason"].split(";")[0]) for loss in trace.losses if "session" in loss["reason"]}
    assert listed == {
        (f"span {child['spanId']}.attributes.session.id", "names the session 'another session'"),
        (f"span {child['spanId']}.attributes.gen_ai.conversation.id", "names the session 'a third'"),
    }


def test_an_empty_session_is_none_and_a_session_that_is_not_text_is_an_error():
    spans, _ = first_trace(openinference_export())
    for span in spans:
        set_attribute(span, "session.id", {"stringValue": ""})
        set_attribute(span, "user.id", {"stringValue": "  "})
    export = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
    [trace] = traces_from_json(json.loads(json.dumps(export)))
    assert (trace.session_id, trace.user_id) == (None, None)
    assert not any("session.id" in loss["reason"] or "user.id" in loss["reason"] for loss in trace.losses)
    set_attribute(spans[0], "session.id", {"intValue": "42"})
    [trace] = traces_from_json(json.loads(json.dumps(export)))
    assert trace.session_id == "42"
    set_attribute(spans[0], "session.id", {"arrayValue": {"values": [{"stringValue": "a"}]}})
    with pytest.raises(TraceInputError, match="session.id"):
        traces_from_json(json.loads(json.dumps(export)))


def test_a_very_long_session_id_crosses_otlp_exactly(captured):
    trace = dataclasses.replace(copy.deepcopy(captured[0]), session_id=LONG, user_id=LONG[::-1])
    resource_spans, _ = trace_to_resource_spans(trace)
    [back] = traces_from_json(json.loads(json.dumps({"resourceSpans": [resource_spans]})))
    assert (back.session_id, back.user_id) == (LONG, LONG[::-1])


def test_the_turns_answer_as_scripted(captured):
    """The conversations ran the programs they claim: each run's answer is the scripted one."""
    answers = [c.output_summary["answer"] for t in captured for c in t.calls if isinstance(c, m.ModuleCall) and c.parent_call is None]
    assert answers == [ANSWERS[q] for _, _, questions in CONVERSATIONS for q in questions]
