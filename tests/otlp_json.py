"""OpenTelemetry SDK spans as OTLP/JSON, as the scripts that record fixtures and live producers write them (imported
by scripts that run in environments of their own, with the OpenTelemetry SDK and its OTLP encoder)."""

from __future__ import annotations

import base64
from typing import Any


def otlp_json(spans: Any) -> dict:
    """Spans as OTLP/JSON: the SDK's protobuf encoding, with hex ids and enums as numbers (the OTLP/JSON rules)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    data = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource_spans in data["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return data
