"""Regenerate the OTLP JSON fixtures in this directory from real runs of OpenInference's DSPy instrumentor and of
MLflow's OpenTelemetry GenAI export, through the OpenTelemetry SDK, offline.

    python tests/data/otlp/make_fixtures_otlp.py          # pip install -e ".[fixtures]"

The three programs of ``tests/traced_programs.py`` (Predict, ReAct with a failing tool, native tool calling) run on the
real ``dspy.LM`` (LiteLLM ``mock_response`` / ``mock_tool_calls``):

- ``openinference_dspy331.json``: ``DSPyInstrumentor`` on an SDK ``TracerProvider``; every span, encoded by the SDK's
  OTLP encoder (``encode_spans``) and written with protobuf's ``MessageToDict`` (base64 ids, enum names);
- ``openinference_dspy331_batches.jsonl``: the same run through a ``BatchSpanProcessor`` exporting at most 4 spans at
  a time, each export one line of OTLP/JSON as the OpenTelemetry Collector's file exporter writes it (hex ids, enums as
  numbers), so that a trace is spread over several lines;
- ``mlflow_genai_dspy331.json``: ``mlflow.dspy.autolog()`` with ``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true`` and an OTLP
  endpoint, MLflow's own ``OtelSpanProcessor`` translating its spans to the GenAI conventions; its exporter is swapped
  for an in-memory one (no collector runs here), which gets exactly what the OTLP exporter would send.

Absolute paths of this machine (in exception stack traces) are replaced by placeholders before writing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tests"))
from otlp_json import otlp_json  # noqa: E402

from google.protobuf.json_format import MessageToDict  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from traced_programs import run_programs  # noqa: E402


def scrub(text: str) -> str:
    """Replace this machine's paths in ``text`` with placeholders."""
    for path, mark in ((sysconfig.get_paths()["purelib"], "<site-packages>"), (str(REPO), "<repo>"), (sys.prefix, "<python>")):
        text = text.replace(path, mark)
    return text




class JsonLinesExporter(SpanExporter):
    """Writes each export as one line of OTLP/JSON, as the Collector's file exporter does."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def export(self, spans) -> SpanExportResult:
        self.lines.append(json.dumps(otlp_json(spans), ensure_ascii=False))
        return SpanExportResult.SUCCESS


def openinference() -> None:
    from openinference.instrumentation.dspy import DSPyInstrumentor

    memory, lines = InMemorySpanExporter(), JsonLinesExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(BatchSpanProcessor(lines, max_export_batch_size=4, schedule_delay_millis=60_000))
    instrumentor = DSPyInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        run_programs()
    finally:
        instrumentor.uninstrument()
    provider.force_flush()
    text = json.dumps(MessageToDict(encode_spans(memory.get_finished_spans())), indent=1, ensure_ascii=False)
    (HERE / "openinference_dspy331.json").write_text(scrub(text) + "\n", encoding="utf-8")
    (HERE / "openinference_dspy331_batches.jsonl").write_text(scrub("".join(line + "\n" for line in lines.lines)), encoding="utf-8")
    print(f"wrote openinference_dspy331.json and openinference_dspy331_batches.jsonl ({len(lines.lines)} lines)")


def mlflow_genai() -> None:
    os.environ["MLFLOW_ENABLE_OTEL_GENAI_SEMCONV"] = "true"
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://127.0.0.1:4318/v1/traces"
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
    import mlflow
    import mlflow.tracing.provider as provider

    memory = InMemorySpanExporter()
    provider.get_otlp_exporter = lambda: memory  # what MLflow's OtelSpanProcessor would send to the endpoint
    mlflow.dspy.autolog()
    run_programs()
    provider.provider.get().force_flush()  # MLflow's processor exports in batches
    spans = memory.get_finished_spans()
    assert spans, "MLflow exported no spans"
    text = json.dumps(MessageToDict(encode_spans(spans)), indent=1, ensure_ascii=False)
    (HERE / "mlflow_genai_dspy331.json").write_text(scrub(text) + "\n", encoding="utf-8")
    print(f"wrote mlflow_genai_dspy331.json ({len(spans)} spans)")


if __name__ == "__main__":
    # each in a process of its own: OpenInference's instrumentation and MLflow's tracer provider do not mix
    if sys.argv[1:] == ["mlflow"]:
        mlflow_genai()
    elif sys.argv[1:] == ["openinference"]:
        openinference()
    else:
        for part in ("openinference", "mlflow"):
            subprocess.run([sys.executable, __file__, part], check=True)
