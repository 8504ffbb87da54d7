"""Run the cross-path programs (``tests/data/crosspath/crosspath_programs.py``) once on the real ``dspy.LM``, recorded
live by OpenInference's DSPy instrumentor and by MLflow 3's autolog, each exporting over OTLP/HTTP (protobuf) to an
endpoint, as a user points them at ``dspy-rdf serve``; each exporter's spans are also kept, as OTLP/JSON files, so a
test can import the same spans from a file and compare.

    python otlp_live.py OPENINFERENCE_ENDPOINT MLFLOW_ENDPOINT OUT_DIR

Runs in an environment of its own (``tests/test_serve_live.py`` builds it): DSPy 3.3.1, MLflow 3, OpenInference and
the OpenTelemetry SDK with its OTLP/HTTP exporter. Writes ``OUT_DIR/openinference.json`` and ``OUT_DIR/mlflow_otlp.json``
(what each exporter sent) and ``OUT_DIR/mlflow3_traces.jsonl`` (MLflow's own record of the same traces).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(openinference_endpoint: str, mlflow_endpoint: str, out: Path) -> None:
    """Record the programs with both producers, exporting to the two endpoints; write the copies into ``out``."""
    here = Path(__file__).resolve().parent
    sys.path[:0] = [str(here.parent / "data" / "crosspath"), str(here.parent)]

    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
    # MLflow's OTLP export (GenAI conventions) beside its tracking store, to the endpoint: read when MLflow sets up its
    # tracer provider, so before the first trace
    os.environ["MLFLOW_ENABLE_OTEL_GENAI_SEMCONV"] = "true"
    os.environ["MLFLOW_TRACE_ENABLE_OTLP_DUAL_EXPORT"] = "true"
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = mlflow_endpoint
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"

    import mlflow
    import mlflow.tracing.provider as mlflow_provider
    from openinference.instrumentation.dspy import DSPyInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class Tee(SpanExporter):
        """MLflow's own OTLP exporter, keeping a copy of what it sends."""

        def __init__(self, exporter: SpanExporter) -> None:
            self.exporter, self.copy = exporter, InMemorySpanExporter()

        def export(self, spans):
            self.copy.export(spans)
            return self.exporter.export(spans)

        def shutdown(self) -> None:
            self.exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return self.exporter.force_flush(timeout_millis)


    made = mlflow_provider.get_otlp_exporter
    tee: list[Tee] = []
    mlflow_provider.get_otlp_exporter = lambda: tee.append(Tee(made())) or tee[-1]
    mlflow.set_tracking_uri(f"sqlite:///{out}/mlflow.db")
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("live", artifact_location=f"file://{out}/artifacts"))
    mlflow.dspy.autolog()

    openinference = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(openinference))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=openinference_endpoint)))
    DSPyInstrumentor().instrument(tracer_provider=provider)

    import crosspath_programs
    from otlp_json import otlp_json

    crosspath_programs.run_programs()
    provider.force_flush()
    mlflow.flush_trace_async_logging()
    mlflow_provider.provider.get().force_flush()
    assert tee, "MLflow did not set up its OTLP exporter"
    (out / "openinference.json").write_text(json.dumps(otlp_json(openinference.get_finished_spans())), encoding="utf-8")
    (out / "mlflow_otlp.json").write_text(json.dumps(otlp_json(tee[0].copy.get_finished_spans())), encoding="utf-8")
    traces = mlflow.search_traces(return_type="list", order_by=["timestamp_ms ASC"])
    (out / "mlflow3_traces.jsonl").write_text("".join(t.to_json() + "\n" for t in traces), encoding="utf-8")
    provider.shutdown()
    print(f"recorded {len(traces)} MLflow traces")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
