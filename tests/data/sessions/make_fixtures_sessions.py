"""Regenerate the session fixtures in this directory: program runs grouped into sessions and users, as OpenInference,
the OpenTelemetry GenAI conventions and MLflow 3 record them, offline.

    python tests/data/sessions/make_fixtures_sessions.py          # pip install -e ".[fixtures]"

The conversations of ``tests/traced_programs.py`` (``CONVERSATIONS``: two sessions, three ``dspy.Predict`` turns on
the real ``dspy.LM``, LiteLLM ``mock_response``) are recorded:

- ``openinference_sessions.json``: by OpenInference's ``DSPyInstrumentor`` on an SDK ``TracerProvider``, each session
  under ``using_session`` and ``using_user`` (which put ``session.id`` and ``user.id`` on every span), written as
  OTLP/JSON (the SDK's OTLP encoding, ids as hex, enums as numbers);
- ``mlflow3_sessions.jsonl``: by ``mlflow.dspy.autolog()`` on a SQLite tracking store, each session under
  ``mlflow.tracing.context(session_id=..., user=...)`` (trace metadata ``mlflow.trace.session`` and
  ``mlflow.trace.user``), one ``Trace.to_json()`` a line;
- ``genai_conversation.json``: two turns of an agent written with the SDK's tracer in the GenAI conventions (no
  instrumentation of DSPy writes them): an ``invoke_agent`` root span with ``user.id`` and a ``chat`` child span with
  ``gen_ai.conversation.id``, as OTLP/JSON.

Absolute paths of this machine (in exception stack traces, the temporary tracking store, the user) are replaced by
placeholders before writing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tests"))
from otlp_json import otlp_json  # noqa: E402

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from traced_programs import CONVERSATIONS, run_turn  # noqa: E402


def scrub(text: str, *more: str) -> str:
    """Replace this machine's paths and user in ``text`` with placeholders."""
    for path, mark in ((sysconfig.get_paths()["purelib"], "<site-packages>"), (str(REPO), "<repo>"), (sys.prefix, "<python>"), *((m, "<tmp>") for m in more)):
        text = text.replace(path, mark)
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "root"
    return text.replace(f'"mlflow.user": "{user}"', '"mlflow.user": "<user>"')




def write(name: str, text: str, *more: str) -> None:
    (HERE / name).write_text(scrub(text, *more), encoding="utf-8")
    print(f"wrote {name}")


def openinference() -> None:
    from openinference.instrumentation import using_session, using_user
    from openinference.instrumentation.dspy import DSPyInstrumentor

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = DSPyInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        for session, user, questions in CONVERSATIONS:
            with using_session(session), using_user(user):
                for question in questions:
                    run_turn(question)
    finally:
        instrumentor.uninstrument()
    write("openinference_sessions.json", json.dumps(otlp_json(memory.get_finished_spans()), indent=1, ensure_ascii=False) + "\n")


def genai() -> None:
    from opentelemetry.trace import SpanKind

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("genai-conversation-example")
    turns = [("Hi, I am Erin.", "Hello Erin!"), ("What is my name?", "Your name is Erin.")]
    for question, answer in turns:
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper", "user.id": "erin"}
        with tracer.start_as_current_span("invoke_agent helper", kind=SpanKind.INTERNAL, attributes=agent):
            chat = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.conversation.id": "thread-9",
                "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": question}]}]),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]),
                "gen_ai.usage.input_tokens": 9,
                "gen_ai.usage.output_tokens": 4,
            }
            with tracer.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=chat):
                pass
    write("genai_conversation.json", json.dumps(otlp_json(memory.get_finished_spans()), indent=1, ensure_ascii=False) + "\n")


def mlflow3() -> None:
    import mlflow

    with tempfile.TemporaryDirectory() as tmp:
        mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
        experiment = mlflow.set_experiment("dspy-rdf-session-fixtures")
        mlflow.dspy.autolog()
        for session, user, questions in CONVERSATIONS:
            with mlflow.tracing.context(session_id=session, user=user):
                for question in questions:
                    run_turn(question)
        mlflow.flush_trace_async_logging()
        found = mlflow.search_traces(experiment_ids=[experiment.experiment_id], return_type="list", order_by=["timestamp_ms ASC"])
        assert len(found) == sum(len(q) for _, _, q in CONVERSATIONS), found
        write("mlflow3_sessions.jsonl", "".join(t.to_json() + "\n" for t in found), tmp, os.path.realpath(tmp))


if __name__ == "__main__":
    # each in a process of its own: OpenInference's instrumentation and MLflow's tracer provider do not mix
    parts = {"openinference": openinference, "genai": genai, "mlflow": mlflow3}
    if sys.argv[1:] and sys.argv[1] in parts:
        parts[sys.argv[1]]()
    else:
        for part in parts:
            subprocess.run([sys.executable, __file__, part], check=True)
